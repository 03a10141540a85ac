import { useRoute } from 'preact-iso';
import { useState } from 'preact/hooks';
import { api, seg, type Client, type Grant, type Page, type Secret } from '../api';
import { useSession } from '../session';
import {
  DeletePanel,
  EditRemoveCell,
  formatSeconds,
  OnceValue,
  PageTitle,
  ReadOnly,
  TableBox,
  Time,
  type Ask,
} from '../components';
import {
  ChangeForm,
  CheckField,
  Done,
  ErrorMessage,
  fieldError,
  jsonOrNull,
  jsonText,
  SelectField,
  TextField,
  ToolbarForm,
} from '../forms';
import { Loaded, Loading, useAction, useLoad } from '../load';
import { useResource } from '../resource';
import { allAudiences } from './audiences';
import {
  clientBody,
  clientDraft,
  ClientFields,
  CLIENT_FIELDS,
  hasSecrets,
  isFederated,
  tlsIdentity,
  type ClientDraft,
} from './clients';
import { FederatedCredentials } from './federation';

/** One client: its settings, status, secrets, grants; deletion after a confirmation. */
export function ClientPage() {
  const { params } = useRoute();
  const { can } = useSession();
  const id = params.id!;
  const writable = can('clients:write');
  const {
    loaded: client,
    draft,
    setDraft,
    saved,
    save,
    submit,
    remove,
    destroy,
    ask,
    dialog,
  } = useResource<Client, ClientDraft>(`/clients/${seg(id)}`, clientDraft);
  const toggle = useAction();
  const revokeTokens = useAction();
  const [revoked, setRevoked] = useState<string>();

  if (client.error) return <ErrorMessage error={client.error} />;
  if (!client.data || !draft) return <Loading what="the client" />;
  const c = client.data.body;
  const tls = tlsIdentity(c);

  const setEnabled = async (enabled: boolean) => {
    if (!enabled) {
      const yes = await ask({
        title: 'Disable this client?',
        body: (
          <p>
            <strong>{c.name}</strong> gets no more tokens, on every instance within a second, and the tokens
            it has are inactive at introspection from now on, even if it is enabled again.
          </p>
        ),
        confirm: 'Disable client',
      });
      if (!yes) return;
    }
    setRevoked(undefined);
    // One field, whatever else changed meanwhile: no If-Match (the settings form sends one).
    const done = await toggle.run(() => api.patch<Client>(`/clients/${seg(id)}`, { enabled }));
    if (done) await client.reload();
  };

  const revokeAll = async () => {
    const yes = await ask({
      title: 'Revoke every token of this client?',
      body: (
        <p>
          Every token <strong>{c.name}</strong> holds now is inactive at introspection, on every instance
          within a second. It keeps its secrets and grants, and the tokens it gets from now on work.
        </p>
      ),
      confirm: 'Revoke tokens',
    });
    if (!yes) return;
    setRevoked(undefined);
    const done = await revokeTokens.run(() =>
      api.post<{ revoked_before: string }>(`/clients/${seg(id)}/revoke-tokens`),
    );
    if (done) {
      setRevoked(done.body.revoked_before);
      await client.reload();
    }
  };

  const confirmDelete = () =>
    destroy(
      {
        title: 'Delete this client?',
        body: (
          <p>
            <strong>{c.name}</strong> (<code>{c.client_id}</code>), its secrets and grants are deleted. This
            cannot be undone.
          </p>
        ),
        confirm: 'Delete client',
      },
      '/console/clients',
    );

  return (
    <>
      <PageTitle title={c.name}>
        <code>{c.client_id}</code> · created <Time value={c.created_at} /> · updated{' '}
        <Time value={c.updated_at} />
      </PageTitle>
      <section class="panel" aria-labelledby="cl-status">
        <h2 id="cl-status">Status</h2>
        <p>
          <span class={`badge ${c.enabled ? 'on' : 'off'}`}>{c.enabled ? 'enabled' : 'disabled'}</span>{' '}
          {c.enabled ? 'It gets tokens for the audiences granted below.' : 'It gets no tokens.'} Token
          lifetime: {formatSeconds(c.token_ttl, "the audience's")}.
        </p>
        <p>
          <span class={c.dpop_bound_access_tokens ? 'badge on' : 'badge'}>
            {c.dpop_bound_access_tokens ? 'DPoP required' : 'DPoP optional'}
          </span>{' '}
          {c.dpop_bound_access_tokens
            ? 'Every token is bound to the key of the DPoP proof sent with its request; a request without one is refused.'
            : 'A token is bound to a key only when its request carries a DPoP proof; otherwise it is a Bearer token.'}
        </p>
        {tls && (
          <p>
            <span class="badge on">tls_client_auth</span> Certificate: {tls.text} <code>{tls.value}</code>. It
            authenticates with a TLS client certificate of a CA Tessera trusts that carries this value (RFC
            8705).
          </p>
        )}
        {c.token_endpoint_auth_method === 'self_signed_tls_client_auth' && (
          <p>
            <span class="badge on">self_signed_tls_client_auth</span> Certificate: self-signed,{' '}
            {c.jwks_uri ? (
              <>
                one of those published at <code>{c.jwks_uri}</code>
              </>
            ) : (
              <>one of the {c.jwks?.keys.length ?? 0} in its JWK Set</>
            )}{' '}
            (RFC 8705).
          </p>
        )}
        <p>
          <span class={c.tls_client_certificate_bound_access_tokens ? 'badge on' : 'badge'}>
            {c.tls_client_certificate_bound_access_tokens
              ? 'Tokens bound to certificate'
              : 'Tokens not bound to a certificate'}
          </span>{' '}
          {c.tls_client_certificate_bound_access_tokens
            ? 'Every token is bound to the TLS client certificate it was asked with (cnf x5t#S256); a request without one is refused.'
            : 'Its tokens are not bound to its TLS client certificate.'}
        </p>
        <p>
          {c.revoked_before ? (
            <>
              Its tokens issued at or before <Time value={c.revoked_before} /> are inactive.
            </>
          ) : (
            'None of its tokens has been revoked.'
          )}
        </p>
        <ErrorMessage error={toggle.error} />
        <ErrorMessage error={revokeTokens.error} />
        {revoked && (
          <Done>
            Revoked: every token it held at <Time value={revoked} /> is inactive, on every instance within a
            second.
          </Done>
        )}
        {writable && (
          <div class="actions">
            {c.enabled ? (
              <button type="button" onClick={() => setEnabled(false)} disabled={toggle.busy}>
                Disable client…
              </button>
            ) : (
              <button type="button" class="primary" onClick={() => setEnabled(true)} disabled={toggle.busy}>
                Enable client
              </button>
            )}
            <button type="button" onClick={revokeAll} disabled={revokeTokens.busy}>
              Revoke all tokens…
            </button>
          </div>
        )}
      </section>
      {hasSecrets(c.token_endpoint_auth_method) && (
        <Secrets clientId={id} writable={writable} ask={ask} changed={client.reload} />
      )}
      {isFederated(c) && (
        <FederatedCredentials clientId={id} writable={writable} ask={ask} changed={client.reload} />
      )}
      <Grants clientId={id} writable={writable} ask={ask} changed={client.reload} />
      <section class="panel" aria-labelledby="cl-settings">
        <h2 id="cl-settings">Settings</h2>
        {writable ? (
          <ChangeForm
            onSubmit={submit(clientBody)}
            action={save}
            fields={CLIENT_FIELDS}
            done={saved && <Done>Saved.</Done>}
            submit="Save changes"
          >
            <ClientFields draft={draft} setDraft={setDraft} error={save.error} />
            {draft.token_endpoint_auth_method !== 'client_secret_basic' &&
              draft.token_endpoint_auth_method !== 'client_secret_post' &&
              hasSecrets(c.token_endpoint_auth_method) && (
                <p class="notice">
                  Switching to{' '}
                  {draft.token_endpoint_auth_method === 'federation'
                    ? 'federation'
                    : draft.token_endpoint_auth_method}{' '}
                  deletes the client's secrets.
                </p>
              )}
          </ChangeForm>
        ) : (
          <>
            <ReadOnly what="clients" />
            <dl>
              <dt>Description</dt>
              <dd>{c.description ?? '—'}</dd>
              <dt>Authentication</dt>
              <dd>
                {isFederated(c)
                  ? 'federation (private_key_jwt, no key of its own)'
                  : c.token_endpoint_auth_method}
              </dd>
              {tls && (
                <>
                  <dt>Certificate</dt>
                  <dd>
                    {tls.text} <code>{tls.value}</code>
                  </dd>
                </>
              )}
              <dt>DPoP</dt>
              <dd>{c.dpop_bound_access_tokens ? 'required (dpop_bound_access_tokens)' : 'optional'}</dd>
              <dt>Certificate-bound tokens</dt>
              <dd>
                {c.tls_client_certificate_bound_access_tokens
                  ? 'yes (tls_client_certificate_bound_access_tokens)'
                  : 'no'}
              </dd>
              <dt>Quota</dt>
              <dd>
                {c.quota_per_minute ?? 'no limit'} a minute, {c.quota_per_day ?? 'no limit'} a day
              </dd>
              <dt>Custom claims</dt>
              <dd>
                <pre>{jsonText(c.claims) || '—'}</pre>
              </dd>
            </dl>
          </>
        )}
      </section>
      {writable && (
        <DeletePanel id="cl-delete" action={remove} onDelete={confirmDelete} label="Delete client…" />
      )}
      {dialog}
    </>
  );
}

/** A client's secrets: list (never the values), add one with a grace period for the others, revoke one. */
interface SectionProps {
  clientId: string;
  writable: boolean;
  ask: Ask;
  /** The client changed (its ETag with it): the page reads it again. */
  changed: () => Promise<void>;
}

function Secrets({ clientId, writable, ask, changed }: SectionProps) {
  const list = useLoad(
    // At most 5 live and the expired ones not yet pruned: one page holds them all.
    async () => (await api.get<Page<Secret>>(`/clients/${seg(clientId)}/secrets?limit=500`)).body,
    [clientId],
  );
  const [grace, setGrace] = useState('24h');
  const [added, setAdded] = useState<Secret>();
  const add = useAction();
  const revoke = useAction();

  const submit = async (event: Event) => {
    event.preventDefault();
    setAdded(undefined);
    const text = grace.trim();
    const answer = await add.run(() =>
      api.post<Secret>(`/clients/${seg(clientId)}/secrets`, {
        grace: /^\d+$/.test(text) ? Number(text) : text || 0,
      }),
    );
    if (answer) {
      setAdded(answer.body);
      await Promise.all([list.reload(), changed()]);
    }
  };

  const revokeOne = async (secret: Secret) => {
    const yes = await ask({
      title: 'Revoke this secret?',
      body: (
        <p>
          <code>{secret.id}</code> stops working at once, on every instance. Replicas still using it get no
          more tokens.
        </p>
      ),
      confirm: 'Revoke secret',
    });
    if (!yes) return;
    const done = await revoke.run(() => api.delete(`/clients/${seg(clientId)}/secrets/${seg(secret.id)}`));
    if (done !== undefined) await Promise.all([list.reload(), changed()]);
  };

  return (
    <section class="panel" aria-labelledby="cl-secrets">
      <h2 id="cl-secrets">Secrets</h2>
      <Loaded state={list} what="secrets">
        {(data) => (
          <TableBox
            label="Secrets"
            columns={['Secret id', 'Created', 'Expires', 'Last used', writable && 'Action']}
          >
            {data.items.map((s) => (
              <tr key={s.id}>
                <td class="mono">{s.id}</td>
                <td class="nowrap">
                  <Time value={s.created_at} />
                </td>
                <td class="nowrap">{s.expires_at ? <Time value={s.expires_at} /> : 'never'}</td>
                <td class="nowrap">{s.last_used_at ? <Time value={s.last_used_at} /> : 'not yet'}</td>
                {writable && (
                  <td>
                    <button type="button" onClick={() => revokeOne(s)} aria-label={`Revoke secret ${s.id}`}>
                      Revoke…
                    </button>
                  </td>
                )}
              </tr>
            ))}
          </TableBox>
        )}
      </Loaded>
      <ErrorMessage error={revoke.error} />
      {added?.client_secret && (
        <OnceValue
          label="New client secret"
          value={added.client_secret}
          note={`This is the only time it is shown: copy it now. ${
            added.expires_at ? '' : 'The other secrets keep working for the grace period, then expire.'
          }`}
        />
      )}
      {writable && (
        <ToolbarForm
          onSubmit={submit}
          action={add}
          fields={['grace']}
          intro={<h3>Add a secret</h3>}
          submit="Add secret"
        >
          <TextField
            label="Grace period for the other secrets"
            name="grace"
            hint="How long the current secrets keep working: 0 (stop at once), 90s, 15m, 24h, 7d"
            error={add.error}
            value={grace}
            onValue={setGrace}
          />
        </ToolbarForm>
      )}
    </section>
  );
}

/** A client's grants: each audience with the scopes and claims the client gets for it. */
function Grants({ clientId, writable, ask, changed }: SectionProps) {
  const grants = useLoad(
    async () => (await api.get<Page<Grant>>(`/clients/${seg(clientId)}/grants?limit=500`)).body.items,
    [clientId],
  );
  const audiences = useLoad(allAudiences);
  const [audienceId, setAudienceId] = useState('');
  const [scopes, setScopes] = useState<string[]>([]);
  const [claims, setClaims] = useState('');
  const [exchange, setExchange] = useState(false);
  const put = useAction();
  const removal = useAction();
  const [done, setDone] = useState<string>();

  const chosen = audiences.data?.find((a) => a.id === audienceId);

  const edit = (grant: Grant) => {
    setAudienceId(grant.audience_id);
    setScopes(grant.scopes);
    setClaims(jsonText(grant.claims));
    setExchange(grant.token_exchange);
    setDone(undefined);
    document.getElementById('grant-form')?.scrollIntoView({ block: 'nearest' });
  };

  const pick = (id: string) => {
    setAudienceId(id);
    const existing = grants.data?.find((g) => g.audience_id === id);
    setScopes(existing?.scopes ?? []);
    setClaims(jsonText(existing?.claims));
    setExchange(existing?.token_exchange ?? false);
  };

  const submit = async (event: Event) => {
    event.preventDefault();
    setDone(undefined);
    const answer = await put.run(async () => {
      if (!audienceId) throw fieldError('audience_id', 'choose the audience to grant');
      return api.put<Grant>(`/clients/${seg(clientId)}/grants/${seg(audienceId)}`, {
        scopes,
        claims: jsonOrNull('claims', claims),
        token_exchange: exchange,
      });
    });
    if (answer) {
      setDone(
        answer.status === 201
          ? `Granted ${answer.body.audience}.`
          : `Grant of ${answer.body.audience} saved.`,
      );
      await Promise.all([grants.reload(), changed()]);
    }
  };

  const withdraw = async (grant: Grant) => {
    const yes = await ask({
      title: 'Withdraw this grant?',
      body: (
        <p>
          The client gets no more tokens for <strong>{grant.audience}</strong>.
        </p>
      ),
      confirm: 'Withdraw grant',
    });
    if (!yes) return;
    const answer = await removal.run(() =>
      api.delete(`/clients/${seg(clientId)}/grants/${seg(grant.audience_id)}`),
    );
    if (answer !== undefined) await Promise.all([grants.reload(), changed()]);
  };

  const toggleScope = (name: string, on: boolean) =>
    setScopes(on ? [...new Set([...scopes, name])].sort() : scopes.filter((s) => s !== name));

  return (
    <section class="panel" aria-labelledby="cl-grants">
      <h2 id="cl-grants">Grants</h2>
      <Loaded state={grants} what="grants">
        {(data) =>
          data.length === 0 ? (
            <p class="muted">No audience granted: the client cannot get any token yet.</p>
          ) : (
            <TableBox
              label="Grants"
              columns={['Audience', 'Scopes', 'Claims', 'Token exchange', writable && 'Actions']}
            >
              {data.map((g) => (
                <tr key={g.audience_id}>
                  <td>
                    <a href={`/console/audiences/${seg(g.audience_id)}`}>{g.audience}</a>
                  </td>
                  <td>{g.scopes.join(' ') || <span class="muted">none</span>}</td>
                  <td>
                    {g.claims ? <code>{JSON.stringify(g.claims)}</code> : <span class="muted">none</span>}
                  </td>
                  <td>{g.token_exchange ? 'allowed' : <span class="muted">no</span>}</td>
                  {writable && (
                    <EditRemoveCell
                      what={`grant of ${g.audience}`}
                      onEdit={() => edit(g)}
                      onRemove={() => withdraw(g)}
                      remove="Withdraw"
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
          id="grant-form"
          onSubmit={submit}
          action={put}
          fields={['audience_id', 'scopes', 'claims', 'token_exchange']}
          done={done && <Done>{done}</Done>}
          submit="Save grant"
        >
          <h3>Grant an audience, or change a grant</h3>
          <SelectField
            label="Audience"
            name="audience_id"
            error={put.error}
            value={audienceId}
            onValue={pick}
            options={[
              { value: '', label: 'Choose an audience…' },
              ...(audiences.data ?? []).map((a) => ({
                value: a.id,
                label: `${a.identifier}${a.name ? ` (${a.name})` : ''}`,
              })),
            ]}
          />
          {chosen && (
            <fieldset>
              <legend>Scopes</legend>
              {chosen.scopes.length === 0 ? (
                <p class="muted">This audience defines no scopes.</p>
              ) : (
                <div class="checks">
                  {chosen.scopes.map((s) => (
                    <label key={s.name}>
                      <input
                        type="checkbox"
                        checked={scopes.includes(s.name)}
                        onChange={(e) => toggleScope(s.name, e.currentTarget.checked)}
                      />
                      <code>{s.name}</code>
                      {s.description && <span class="muted"> {s.description}</span>}
                    </label>
                  ))}
                </div>
              )}
              {put.error?.forField('scopes') && (
                <p class="error" role="alert">
                  {put.error.forField('scopes')}
                </p>
              )}
            </fieldset>
          )}
          <TextField
            label="Claims for this audience (JSON)"
            name="claims"
            multiline
            hint="Override the client's custom claims in tokens for this audience; empty for none"
            error={put.error}
            value={claims}
            onValue={setClaims}
          />
          <CheckField
            label="Token exchange"
            name="token_exchange"
            hint="The client may exchange a token it received, as a resource server of that token's audience, for one of this audience (RFC 8693)"
            error={put.error}
            checked={exchange}
            onChecked={setExchange}
          />
        </ChangeForm>
      ) : (
        <ReadOnly what="grants" />
      )}
    </section>
  );
}
