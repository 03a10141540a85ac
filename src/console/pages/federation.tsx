/**
 * A client's federated credentials (workload identity federation): the platforms whose tokens authenticate it
 * instead of a secret. Listed, added from a preset that fills the issuer and shows the `sub` to type, changed,
 * removed; every change through the admin API.
 */
import { useState } from 'preact/hooks';
import { api, seg, type FederatedCredential, type Page } from '../api';
import { EditRemoveCell, formatSeconds, ReadOnly, TableBox, type Ask } from '../components';
import {
  ChangeForm,
  Done,
  ErrorMessage,
  jsonOrNull,
  jsonText,
  numberOrNull,
  SelectField,
  TextField,
} from '../forms';
import {
  FEDERATION_PRESETS,
  type FederationPreset,
  type FederationPresetName,
  type PresetKeys,
} from '../../management/federation-presets';
import { Loaded, useAction, useLoad } from '../load';

/** The platforms, written once for the CLI and the console (management/federation-presets.ts: pure data). */
const PRESETS = FEDERATION_PRESETS;
type Preset = FederationPreset;
type Keys = PresetKeys;

type PresetName = FederationPresetName;

/** The fields of a credential that the form edits, as text. */
interface Draft {
  name: string;
  issuer: string;
  subject: string;
  audience: string;
  claims: string;
  max_lifetime: string;
  once: boolean;
  keys: Keys;
  jwks: string;
  jwks_uri: string;
}

const FIELDS = [
  'name',
  'issuer',
  'subject',
  'audience',
  'claims',
  'max_lifetime',
  'once',
  'jwks',
  'jwks_uri',
];

const draftOf = (preset: Preset, c?: FederatedCredential): Draft => ({
  name: c?.name ?? '',
  issuer: c?.issuer ?? preset.issuer,
  subject: c?.subject ?? '',
  audience: c?.audience ?? '',
  claims: c && Object.keys(c.claims).length > 0 ? jsonText(c.claims) : '',
  max_lifetime: c ? String(c.max_lifetime) : '',
  once: c?.once ?? false,
  keys: c ? (c.jwks ? 'jwks' : c.jwks_uri ? 'jwks_uri' : 'discovery') : preset.keys,
  jwks: jsonText(c?.jwks),
  jwks_uri: c?.jwks_uri ?? '',
});

/** A draft as the API takes it (POST and PATCH alike: empty is the default); JSON that does not parse is refused. */
const bodyOf = (d: Draft) => ({
  name: d.name,
  issuer: d.issuer.trim(),
  subject: d.subject,
  audience: d.audience.trim() === '' ? null : d.audience.trim(),
  claims: jsonOrNull('claims', d.claims),
  max_lifetime: numberOrNull(d.max_lifetime),
  once: d.once,
  jwks: d.keys === 'jwks' ? jsonOrNull('jwks', d.jwks) : null,
  jwks_uri: d.keys === 'jwks_uri' && d.jwks_uri.trim() !== '' ? d.jwks_uri.trim() : null,
});

const keysText = (c: FederatedCredential) =>
  c.jwks ? `inline (${c.jwks.keys.map((k) => k.kid ?? k.kty).join(', ')})` : (c.jwks_uri ?? 'by discovery');

/** The federated credentials of a client that authenticates with them (private_key_jwt without keys). */
export function FederatedCredentials({
  clientId,
  writable,
  ask,
  changed,
}: {
  clientId: string;
  writable: boolean;
  ask: Ask;
  changed: () => Promise<void>;
}) {
  const path = `/clients/${seg(clientId)}/federated-credentials`;
  const list = useLoad(
    // At most 10 a client: one page holds them all.
    async () => (await api.get<Page<FederatedCredential>>(`${path}?limit=500`)).body.items,
    [path],
  );
  const [preset, setPreset] = useState<PresetName>('kubernetes');
  const [draft, setDraft] = useState<Draft>(draftOf(PRESETS.kubernetes));
  /** The credential being changed (its id and the ETag it was read with), or none: a new one. */
  const [editing, setEditing] = useState<{ id: string; name: string; etag: string | null }>();
  const [done, setDone] = useState<string>();
  const save = useAction();
  const removal = useAction();
  const set = (patch: Partial<Draft>) => setDraft({ ...draft, ...patch });
  const shown = PRESETS[preset];

  const choose = (name: string) => {
    const next = PRESETS[name as PresetName];
    setPreset(name as PresetName);
    setDraft({ ...draft, issuer: next.issuer, keys: next.keys });
  };

  const reset = () => {
    setEditing(undefined);
    setDraft(draftOf(PRESETS[preset]));
    save.clear();
  };

  const edit = async (c: FederatedCredential) => {
    setDone(undefined);
    const answer = await save.run(() => api.get<FederatedCredential>(`${path}/${seg(c.id)}`));
    if (!answer) return;
    setEditing({ id: c.id, name: answer.body.name, etag: answer.etag });
    setDraft(draftOf(PRESETS.oidc, answer.body));
    document.getElementById('federated-form')?.scrollIntoView({ block: 'nearest' });
  };

  const submit = async (event: Event) => {
    event.preventDefault();
    setDone(undefined);
    const answer = await save.run(() =>
      editing
        ? api.patch<FederatedCredential>(`${path}/${seg(editing.id)}`, bodyOf(draft), editing.etag)
        : api.post<FederatedCredential>(path, bodyOf(draft)),
    );
    if (!answer) return;
    setDone(
      editing
        ? `Federated credential ${answer.body.name} saved.`
        : `Federated credential ${answer.body.name} added: tokens of ${answer.body.issuer} for ${answer.body.subject} now authenticate this client.`,
    );
    setEditing(undefined);
    setDraft(draftOf(PRESETS[preset]));
    await Promise.all([list.reload(), changed()]);
  };

  const remove = async (c: FederatedCredential) => {
    const yes = await ask({
      title: 'Remove this federated credential?',
      body: (
        <p>
          Tokens of <strong>{c.issuer}</strong> for <code>{c.subject}</code> stop authenticating this client
          at once, on every instance.
        </p>
      ),
      confirm: 'Remove credential',
    });
    if (!yes) return;
    const answer = await removal.run(() => api.delete(`${path}/${seg(c.id)}`));
    if (answer === undefined) return;
    if (editing?.id === c.id) reset();
    await Promise.all([list.reload(), changed()]);
  };

  return (
    <section class="panel" aria-labelledby="cl-federated">
      <h2 id="cl-federated">Federated credentials</h2>
      <p class="muted">
        A token that a platform signs (a Kubernetes service account, a GitHub Actions or GitLab CI job, a
        SPIFFE workload, any OIDC issuer) authenticates this client instead of a secret: the program sends it
        as <code>client_assertion</code> with <code>client_id</code>. Nothing secret is stored or rotated.
      </p>
      <Loaded state={list} what="federated credentials">
        {(items) =>
          items.length === 0 ? (
            <p class="muted">No federated credential yet: this client cannot get a token.</p>
          ) : (
            <TableBox
              label="Federated credentials"
              columns={['Name', 'Issuer', 'Subject', 'Keys', 'Max lifetime', 'Once', writable && 'Actions']}
            >
              {items.map((c) => (
                <tr key={c.id}>
                  <td>{c.name}</td>
                  <td class="mono">{c.issuer}</td>
                  <td class="mono">
                    {c.subject}
                    {Object.keys(c.claims).length > 0 && (
                      <>
                        <br />
                        <span class="muted">and {JSON.stringify(c.claims)}</span>
                      </>
                    )}
                  </td>
                  <td>{keysText(c)}</td>
                  <td class="nowrap">{formatSeconds(c.max_lifetime)}</td>
                  <td>{c.once ? 'yes' : 'no'}</td>
                  {writable && (
                    <EditRemoveCell
                      what={`federated credential ${c.name}`}
                      onEdit={() => edit(c)}
                      onRemove={() => remove(c)}
                      remove="Remove"
                    />
                  )}
                </tr>
              ))}
            </TableBox>
          )
        }
      </Loaded>
      <ErrorMessage error={removal.error} />
      {writable ? (
        <ChangeForm
          id="federated-form"
          onSubmit={submit}
          action={save}
          fields={FIELDS}
          done={done && <Done>{done}</Done>}
          submit={editing ? 'Save credential' : 'Add credential'}
        >
          <h3>{editing ? `Change ${editing.name}` : 'Add a federated credential'}</h3>
          <div class="grid">
            {!editing && (
              <SelectField
                label="Platform"
                name="preset"
                value={preset}
                onValue={choose}
                options={Object.entries(PRESETS).map(([value, p]) => ({ value, label: p.label }))}
              />
            )}
            <TextField
              label="Credential name"
              name="name"
              required
              hint="Unique within this client, e.g. prod-cluster"
              error={save.error}
              value={draft.name}
              onValue={(name) => set({ name })}
            />
          </div>
          <div class="grid">
            <TextField
              label="Issuer"
              name="issuer"
              type="url"
              required
              hint={editing ? "The exact iss of the platform's tokens." : shown.issuerHint}
              error={save.error}
              value={draft.issuer}
              onValue={(issuer) => set({ issuer })}
            />
            <TextField
              label="Subject (sub)"
              name="subject"
              required
              hint={
                editing ? (
                  'The exact sub required.'
                ) : (
                  <>
                    Format: <code>{shown.subject}</code>. {shown.subjectHint}
                  </>
                )
              }
              error={save.error}
              value={draft.subject}
              onValue={(subject) => set({ subject })}
            />
          </div>
          <div class="grid">
            <TextField
              label="Audience (aud)"
              name="audience"
              hint="The aud the token must carry; empty: this Tessera's issuer URL"
              error={save.error}
              value={draft.audience}
              onValue={(audience) => set({ audience })}
            />
            <TextField
              label="Max lifetime"
              name="max_lifetime"
              hint="The longest lifetime of a token accepted: seconds or 15m, 1h (at most 24h); empty: 1 hour"
              error={save.error}
              value={draft.max_lifetime}
              onValue={(max_lifetime) => set({ max_lifetime })}
            />
          </div>
          <TextField
            label="Required claims (JSON)"
            name="claims"
            multiline
            hint='Further claims the token must carry with exactly these values, e.g. {"repository_owner": "acme"}; empty: none'
            error={save.error}
            value={draft.claims}
            onValue={(claims) => set({ claims })}
          />
          <fieldset>
            <legend>Replays</legend>
            <div class="checks">
              <label>
                <input
                  type="checkbox"
                  checked={draft.once}
                  onChange={(e) => set({ once: e.currentTarget.checked })}
                />
                Each token authenticates once (its <code>jti</code> is required and single-use); by default a
                platform's token is reused until it is renewed
              </label>
            </div>
          </fieldset>
          <fieldset>
            <legend>The issuer's keys</legend>
            <div class="checks" role="radiogroup" aria-label="Where the issuer's keys are">
              {(
                [
                  ['discovery', 'Found by its discovery document'],
                  ['jwks_uri', 'At a URL (jwks_uri)'],
                  ['jwks', 'A JWK Set here (a private cluster)'],
                ] as const
              ).map(([value, label]) => (
                <label key={value}>
                  <input
                    type="radio"
                    name="federated-keys"
                    checked={draft.keys === value}
                    onChange={() => set({ keys: value })}
                  />
                  {label}
                </label>
              ))}
            </div>
            {draft.keys === 'jwks' && (
              <TextField
                label="Issuer JWK Set"
                name="jwks"
                multiline
                hint="For a cluster whose issuer is not reachable: the output of kubectl get --raw /openid/v1/jwks"
                error={save.error}
                value={draft.jwks}
                onValue={(jwks) => set({ jwks })}
              />
            )}
            {draft.keys === 'jwks_uri' && (
              <TextField
                label="Issuer JWKS URL"
                name="jwks_uri"
                type="url"
                error={save.error}
                value={draft.jwks_uri}
                onValue={(jwks_uri) => set({ jwks_uri })}
              />
            )}
          </fieldset>
          {editing && (
            <div class="actions">
              <button type="button" onClick={reset}>
                Cancel the change
              </button>
            </div>
          )}
        </ChangeForm>
      ) : (
        <ReadOnly what="federated credentials" />
      )}
    </section>
  );
}
