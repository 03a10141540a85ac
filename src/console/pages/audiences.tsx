import { useLocation, useRoute } from 'preact-iso';
import { useState } from 'preact/hooks';
import { api, seg, type ApiError, type Audience, type Grant, type Page } from '../api';
import { useSession } from '../session';
import { ALGS, DeletePanel, formatSeconds, PageTitle, ReadOnly, TableBox, Time } from '../components';
import { ChangeForm, Done, ErrorMessage, numberOrNull, SelectField, TextField } from '../forms';
import { Loaded, Loading, useAction, useLoad } from '../load';
import { useResource } from '../resource';

/** Every audience (there are few), a page of 500 at a time. */
export async function allAudiences(): Promise<Audience[]> {
  const all: Audience[] = [];
  let after: string | null = null;
  do {
    const path: string = `/audiences?limit=500${after ? `&after=${encodeURIComponent(after)}` : ''}`;
    const page: Page<Audience> = (await api.get<Page<Audience>>(path)).body;
    all.push(...page.items);
    after = page.next;
  } while (after);
  return all.sort((a, b) => (a.identifier < b.identifier ? -1 : 1));
}

interface ScopeDraft {
  name: string;
  description: string;
}

/** The fields an audience's form edits, as text. */
interface AudienceDraft {
  identifier: string;
  name: string;
  token_ttl: string;
  signing_alg: string;
  scopes: ScopeDraft[];
  /** Its resource servers' client ids, as typed: separated by commas or spaces. */
  resource_servers: string;
  token_profile: string;
}

/** The token profiles, as the form offers them (domain/token-profiles.ts). */
const PROFILES = [
  { value: 'rfc9068', label: 'RFC 9068 (the default)' },
  { value: 'auth0', label: 'Auth0: sub <client_id>@clients, azp, gty, permissions' },
  { value: 'keycloak', label: 'Keycloak: azp, typ, preferred_username, clientId' },
];

const draftOf = (a?: Audience): AudienceDraft => ({
  identifier: a?.identifier ?? '',
  name: a?.name ?? '',
  token_ttl: a?.token_ttl === null || a?.token_ttl === undefined ? '' : String(a.token_ttl),
  signing_alg: a?.signing_alg ?? '',
  scopes: a?.scopes.map((s) => ({ name: s.name, description: s.description ?? '' })) ?? [],
  resource_servers: a?.resource_server_client_ids.join(', ') ?? '',
  token_profile: a?.token_profile ?? 'rfc9068',
});

/** Client ids as typed: separated by commas, spaces or lines. */
const clientIdsOf = (text: string): string[] => text.split(/[\s,]+/).filter(Boolean);

const bodyOf = (draft: AudienceDraft) => ({
  name: draft.name.trim() === '' ? null : draft.name,
  token_ttl: numberOrNull(draft.token_ttl),
  signing_alg: draft.signing_alg === '' ? null : draft.signing_alg,
  scopes: draft.scopes
    .filter((s) => s.name.trim() !== '' || s.description.trim() !== '')
    .map((s) => ({ name: s.name.trim(), description: s.description.trim() === '' ? null : s.description })),
  resource_server_client_ids: clientIdsOf(draft.resource_servers),
  token_profile: draft.token_profile,
});

/** The fields of an audience's form, for the errors the API names by them. */
const FIELDS = ['name', 'token_ttl', 'signing_alg', 'scopes', 'resource_server_client_ids', 'token_profile'];

/** The form of a new or an existing audience; the identifier is set once. */
function AudienceForm({
  draft,
  setDraft,
  error,
  isNew,
}: {
  draft: AudienceDraft;
  setDraft: (d: AudienceDraft) => void;
  error: ApiError | undefined;
  isNew: boolean;
}) {
  const set = (patch: Partial<AudienceDraft>) => setDraft({ ...draft, ...patch });
  const setScope = (i: number, patch: Partial<ScopeDraft>) =>
    set({ scopes: draft.scopes.map((s, j) => (j === i ? { ...s, ...patch } : s)) });
  return (
    <>
      <div class="grid">
        {isNew && (
          <TextField
            label="Identifier (URL)"
            name="identifier"
            type="url"
            required
            hint="The environment URL clients ask for, e.g. https://api.example.com"
            error={error}
            value={draft.identifier}
            onValue={(identifier) => set({ identifier })}
          />
        )}
        <TextField
          label="Name"
          name="name"
          error={error}
          value={draft.name}
          onValue={(name) => set({ name })}
        />
        <TextField
          label="Token lifetime"
          name="token_ttl"
          hint="Seconds, or 15m, 1h…; empty: the server's default"
          error={error}
          value={draft.token_ttl}
          onValue={(token_ttl) => set({ token_ttl })}
        />
        <SelectField
          label="Signing algorithm"
          name="signing_alg"
          error={error}
          value={draft.signing_alg}
          onValue={(signing_alg) => set({ signing_alg })}
          options={[
            { value: '', label: "The server's default" },
            ...ALGS.map((alg) => ({ value: alg, label: alg })),
          ]}
        />
        <SelectField
          label="Token profile"
          name="token_profile"
          hint="The claims its tokens carry, for resource servers written for another server"
          error={error}
          value={draft.token_profile}
          onValue={(token_profile) => set({ token_profile })}
          options={PROFILES}
        />
      </div>
      <fieldset>
        <legend>Scopes</legend>
        <p class="hint">
          The permissions its APIs check, such as orders:read. Removing one removes it from every grant.
        </p>
        {draft.scopes.map((scope, i) => (
          <div class="scope-row" key={i}>
            <TextField
              label={`Scope ${i + 1} name`}
              name={`scopes/${i}/name`}
              error={error}
              value={scope.name}
              onValue={(name) => setScope(i, { name })}
            />
            <TextField
              label={`Scope ${i + 1} description`}
              name={`scopes/${i}/description`}
              error={error}
              value={scope.description}
              onValue={(description) => setScope(i, { description })}
            />
            <button
              type="button"
              onClick={() => set({ scopes: draft.scopes.filter((_, j) => j !== i) })}
              aria-label={`Remove scope ${scope.name || i + 1}`}
            >
              Remove
            </button>
          </div>
        ))}
        <button
          type="button"
          onClick={() => set({ scopes: [...draft.scopes, { name: '', description: '' }] })}
        >
          Add a scope
        </button>
        {error?.forField('scopes') && !error.errors.some((e) => /^\/scopes\/\d+\//.test(e.pointer)) && (
          <p class="error" role="alert">
            {error.forField('scopes')}
          </p>
        )}
      </fieldset>
      <TextField
        label="Resource servers (client ids)"
        name="resource_server_client_ids"
        hint="The clients that receive this audience's tokens, separated by commas: each may exchange such a token for one of another audience it is granted with token exchange (RFC 8693)"
        error={error}
        value={draft.resource_servers}
        onValue={(resource_servers) => set({ resource_servers })}
      />
    </>
  );
}

export function AudiencesPage() {
  const { can } = useSession();
  const { route } = useLocation();
  const list = useLoad(allAudiences);
  const [draft, setDraft] = useState(draftOf());
  const add = useAction();

  const create = async (event: Event) => {
    event.preventDefault();
    const created = await add.run(() =>
      api.post<Audience>('/audiences', { identifier: draft.identifier, ...bodyOf(draft) }),
    );
    if (created) route(`/console/audiences/${seg(created.body.id)}?created=1`);
  };

  return (
    <>
      <PageTitle title="Audiences">
        The environment URLs tokens are issued for, and the scopes each defines.
      </PageTitle>
      <section class="panel" aria-labelledby="aud-list">
        <h2 id="aud-list">Registered</h2>
        <Loaded state={list} what="audiences">
          {(data) => (
            <TableBox
              label="Audiences"
              columns={[
                'Identifier',
                'Name',
                'Scopes',
                'Resource servers',
                'Token lifetime',
                'Algorithm',
                'Token profile',
              ]}
            >
              {data.map((a) => (
                <tr key={a.id}>
                  <td>
                    <a href={`/console/audiences/${seg(a.id)}`}>{a.identifier}</a>
                  </td>
                  <td>{a.name ?? <span class="muted">—</span>}</td>
                  <td>{a.scopes.map((s) => s.name).join(' ') || <span class="muted">none</span>}</td>
                  <td>{a.resource_server_client_ids.join(', ') || <span class="muted">none</span>}</td>
                  <td class="nowrap">{formatSeconds(a.token_ttl)}</td>
                  <td>{a.signing_alg ?? <span class="muted">default</span>}</td>
                  <td>{a.token_profile}</td>
                </tr>
              ))}
            </TableBox>
          )}
        </Loaded>
      </section>
      <section class="panel" aria-labelledby="aud-new">
        <h2 id="aud-new">New audience</h2>
        {can('audiences:write') ? (
          <ChangeForm
            onSubmit={create}
            action={add}
            fields={['identifier', ...FIELDS]}
            submit="Create audience"
          >
            <AudienceForm draft={draft} setDraft={setDraft} error={add.error} isNew />
          </ChangeForm>
        ) : (
          <ReadOnly what="audiences" />
        )}
      </section>
    </>
  );
}

/** Client links, or `none`. */
function ClientList({ ids }: { ids: readonly string[] }) {
  if (ids.length === 0) return <span class="muted">none</span>;
  return (
    <ul class="inline-list">
      {ids.map((id) => (
        <li key={id}>
          <a href={`/console/clients/${seg(id)}`}>
            <code>{id}</code>
          </a>
        </li>
      ))}
    </ul>
  );
}

/**
 * An audience in token exchange (RFC 8693): the clients that receive its tokens (its resource servers, set in the
 * form above), and the clients that may exchange a token for one of it (their grant of it allows token exchange).
 */
function TokenExchange({ audience, canReadClients }: { audience: Audience; canReadClients: boolean }) {
  const grants = useLoad(
    async () =>
      canReadClients
        ? (await api.get<Page<Grant>>(`/audiences/${seg(audience.id)}/grants?limit=500`)).body.items
        : [],
    [audience.id, audience.updated_at, canReadClients],
  );
  return (
    <section class="panel" aria-labelledby="aud-exchange">
      <h2 id="aud-exchange">Token exchange</h2>
      <dl>
        <dt>Resource servers</dt>
        <dd>
          <ClientList ids={audience.resource_server_client_ids} />
          <p class="hint">They receive its tokens, and may exchange one for a token of another audience.</p>
        </dd>
        <dt>May exchange into it</dt>
        <dd>
          {canReadClients ? (
            <Loaded state={grants} what="the grants of this audience">
              {(data) => <ClientList ids={data.filter((g) => g.token_exchange).map((g) => g.client_id)} />}
            </Loaded>
          ) : (
            <span class="muted">reading clients is not among your permissions</span>
          )}
          <p class="hint">
            Clients whose grant of this audience allows token exchange (set on each client's page).
          </p>
        </dd>
      </dl>
    </section>
  );
}

export function AudiencePage() {
  const { params, query } = useRoute();
  const { can } = useSession();
  const id = params.id!;
  const { loaded, draft, setDraft, saved, save, submit, remove, destroy, dialog } = useResource<
    Audience,
    AudienceDraft
  >(`/audiences/${seg(id)}`, draftOf);

  if (loaded.error) return <ErrorMessage error={loaded.error} />;
  if (!loaded.data || !draft) return <Loading what="the audience" />;
  const audience = loaded.data.body;
  const writable = can('audiences:write');
  const confirmDelete = () =>
    destroy(
      {
        title: 'Delete this audience?',
        body: (
          <p>
            <strong>{audience.identifier}</strong> and every grant of it go. Clients can no longer get tokens
            for it.
          </p>
        ),
        confirm: 'Delete audience',
      },
      '/console/audiences',
    );
  return (
    <>
      <PageTitle title={audience.name ?? audience.identifier}>
        <code>{audience.identifier}</code> · id <code>{audience.id}</code> · created{' '}
        <Time value={audience.created_at} />
      </PageTitle>
      {query.created && <Done>Audience created. Grant it to clients on their pages.</Done>}
      <section class="panel" aria-labelledby="aud-edit">
        <h2 id="aud-edit">Settings and scopes</h2>
        {writable ? (
          <ChangeForm
            onSubmit={submit(bodyOf)}
            action={save}
            fields={FIELDS}
            done={saved && <Done>Saved.</Done>}
            submit="Save changes"
          >
            <AudienceForm draft={draft} setDraft={setDraft} error={save.error} isNew={false} />
          </ChangeForm>
        ) : (
          <>
            <ReadOnly what="audiences" />
            <TableBox label="Scopes" columns={['Scope', 'Description']}>
              {audience.scopes.map((s) => (
                <tr key={s.name}>
                  <td>
                    <code>{s.name}</code>
                  </td>
                  <td>{s.description ?? ''}</td>
                </tr>
              ))}
            </TableBox>
          </>
        )}
      </section>
      <TokenExchange audience={audience} canReadClients={can('clients:read')} />
      {writable && (
        <DeletePanel id="aud-delete" action={remove} onDelete={confirmDelete} label="Delete audience…">
          <p>Deleting an audience removes every grant of it.</p>
        </DeletePanel>
      )}
      {dialog}
    </>
  );
}
