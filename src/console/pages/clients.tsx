import { useLocation } from 'preact-iso';
import { useState } from 'preact/hooks';
import { api, query, seg, type ApiError, type Client, type Page } from '../api';
import { useSession } from '../session';
import { OnceValue, PageTitle, ReadOnly, TableBox } from '../components';
import {
  ChangeForm,
  CheckField,
  Done,
  jsonOrNull,
  jsonText,
  numberOrNull,
  SelectField,
  TextField,
} from '../forms';
import { Loaded, useAction, useLoad } from '../load';

/**
 * How a client authenticates, as the forms offer it: `federation` is private_key_jwt without keys of its own (its
 * federated credentials, added on its page, are what it authenticates with).
 */
type Method = Client['token_endpoint_auth_method'] | 'federation';

const AUTH_METHODS: { value: Method; label: string }[] = [
  { value: 'client_secret_basic', label: 'Secret (client_secret_basic or _post)' },
  { value: 'client_secret_post', label: 'Secret, sent in the body (client_secret_post)' },
  { value: 'private_key_jwt', label: 'Signed assertion (private_key_jwt)' },
  { value: 'federation', label: "Federation (a platform's token)" },
  { value: 'tls_client_auth', label: 'TLS client certificate of a trusted CA (tls_client_auth)' },
  {
    value: 'self_signed_tls_client_auth',
    label: 'Self-signed TLS client certificate (self_signed_tls_client_auth)',
  },
];

/** What a tls_client_auth client's certificate must carry (RFC 8705 §2.1.2): one of these, by its field's suffix. */
const TLS_KINDS = [
  {
    value: 'subject_dn',
    label: 'Subject DN',
    text: 'subject DN',
    hint: 'RFC 4514, e.g. CN=worker,O=Example,C=US',
  },
  {
    value: 'san_dns',
    label: 'DNS name (SAN)',
    text: 'DNS name',
    hint: 'e.g. worker.example.com, or *.example.com',
  },
  {
    value: 'san_uri',
    label: 'URI (SAN)',
    text: 'URI',
    hint: 'An absolute URI, e.g. the SPIFFE ID spiffe://prod.example.com/ns/billing/sa/worker',
  },
  {
    value: 'san_ip',
    label: 'IP address (SAN)',
    text: 'IP address',
    hint: 'IPv4 or IPv6, e.g. 192.0.2.10 or 2001:db8::10',
  },
  {
    value: 'san_email',
    label: 'Email address (SAN)',
    text: 'email address',
    hint: 'e.g. worker@example.com',
  },
] as const;
type TlsKind = (typeof TLS_KINDS)[number]['value'];
const tlsField = (kind: TlsKind) => `tls_client_auth_${kind}` as const;

/**
 * A tls_client_auth client's one value, its kind, and the kind in words (`subject DN`); undefined for a client of
 * another method.
 */
export function tlsIdentity(c: Client): { kind: TlsKind; value: string; text: string } | undefined {
  if (c.token_endpoint_auth_method !== 'tls_client_auth') return undefined;
  for (const { value: kind, text } of TLS_KINDS) {
    const value = c[tlsField(kind)];
    if (value !== null) return { kind, value, text };
  }
  return undefined;
}

/** Whether a client of this method has secrets. */
export const hasSecrets = (method: Client['token_endpoint_auth_method']): boolean =>
  method === 'client_secret_basic' || method === 'client_secret_post';

/** A client that authenticates with federated credentials (or has no credential yet): private_key_jwt, no keys. */
export const isFederated = (c: Client): boolean =>
  c.token_endpoint_auth_method === 'private_key_jwt' && c.jwks === null && c.jwks_uri === null;

/** How a client authenticates, in a word. */
const methodText = (c: Client): string =>
  isFederated(c)
    ? 'federation'
    : c.token_endpoint_auth_method === 'private_key_jwt'
      ? 'private_key_jwt'
      : c.token_endpoint_auth_method === 'tls_client_auth'
        ? 'certificate'
        : c.token_endpoint_auth_method === 'self_signed_tls_client_auth'
          ? 'self-signed certificate'
          : 'secret';

/** The fields of a client that its forms edit, as text. */
export interface ClientDraft {
  name: string;
  description: string;
  token_endpoint_auth_method: Method;
  keys: 'jwks' | 'jwks_uri';
  jwks: string;
  jwks_uri: string;
  dpop_bound_access_tokens: boolean;
  /** tls_client_auth: which value its certificate must carry, and the value. */
  tls_kind: TlsKind;
  tls_value: string;
  tls_client_certificate_bound_access_tokens: boolean;
  token_ttl: string;
  quota_per_minute: string;
  quota_per_day: string;
  claims: string;
}

export const clientDraft = (c?: Client): ClientDraft => ({
  name: c?.name ?? '',
  description: c?.description ?? '',
  token_endpoint_auth_method: c
    ? isFederated(c)
      ? 'federation'
      : c.token_endpoint_auth_method
    : 'client_secret_basic',
  keys: c?.jwks_uri ? 'jwks_uri' : 'jwks',
  jwks: jsonText(c?.jwks),
  jwks_uri: c?.jwks_uri ?? '',
  dpop_bound_access_tokens: c?.dpop_bound_access_tokens ?? false,
  tls_kind: (c && tlsIdentity(c)?.kind) ?? 'subject_dn',
  tls_value: (c && tlsIdentity(c)?.value) ?? '',
  tls_client_certificate_bound_access_tokens: c?.tls_client_certificate_bound_access_tokens ?? false,
  token_ttl: c?.token_ttl == null ? '' : String(c.token_ttl),
  quota_per_minute: c?.quota_per_minute == null ? '' : String(c.quota_per_minute),
  quota_per_day: c?.quota_per_day == null ? '' : String(c.quota_per_day),
  claims: jsonText(c?.claims),
});

/** A draft as the API takes it (POST and PATCH alike); throws, next to its field, JSON that does not parse. */
export function clientBody(draft: ClientDraft) {
  const method = draft.token_endpoint_auth_method;
  // self_signed_tls_client_auth: its certificates in the x5c of its keys, inline or at a URL, as private_key_jwt's keys.
  const keyed = method === 'private_key_jwt' || method === 'self_signed_tls_client_auth';
  const keys = draft.keys;
  return {
    name: draft.name,
    description: draft.description.trim() === '' ? null : draft.description,
    // Federation: private_key_jwt without keys (neither jwks nor jwks_uri).
    token_endpoint_auth_method: method === 'federation' ? 'private_key_jwt' : method,
    jwks: keyed && keys === 'jwks' ? jsonOrNull('jwks', draft.jwks) : null,
    jwks_uri: keyed && keys === 'jwks_uri' && draft.jwks_uri.trim() !== '' ? draft.jwks_uri.trim() : null,
    dpop_bound_access_tokens: draft.dpop_bound_access_tokens,
    // tls_client_auth: the one value (the others null: a change of kind replaces it); another method has none.
    ...(method === 'tls_client_auth'
      ? Object.fromEntries(
          TLS_KINDS.map(({ value: kind }) => [
            tlsField(kind),
            kind === draft.tls_kind && draft.tls_value.trim() !== '' ? draft.tls_value.trim() : null,
          ]),
        )
      : {}),
    tls_client_certificate_bound_access_tokens: draft.tls_client_certificate_bound_access_tokens,
    token_ttl: numberOrNull(draft.token_ttl),
    quota_per_minute: numberOrNull(draft.quota_per_minute),
    quota_per_day: numberOrNull(draft.quota_per_day),
    claims: jsonOrNull('claims', draft.claims),
  };
}

export const CLIENT_FIELDS = [
  'client_id',
  'name',
  'description',
  'token_endpoint_auth_method',
  'jwks',
  'jwks_uri',
  'dpop_bound_access_tokens',
  ...TLS_KINDS.map(({ value }) => tlsField(value)),
  'tls_client_certificate_bound_access_tokens',
  'token_ttl',
  'quota_per_minute',
  'quota_per_day',
  'claims',
];

/** Every field of a client's form; `withId` adds the client_id a new client may choose. */
export function ClientFields({
  draft,
  setDraft,
  error,
  id,
}: {
  draft: ClientDraft;
  setDraft: (d: ClientDraft) => void;
  error: ApiError | undefined;
  id?: { value: string; set: (v: string) => void };
}) {
  const set = (patch: Partial<ClientDraft>) => setDraft({ ...draft, ...patch });
  const method = draft.token_endpoint_auth_method;
  const selfSigned = method === 'self_signed_tls_client_auth';
  const kind = TLS_KINDS.find((k) => k.value === draft.tls_kind) ?? TLS_KINDS[0];
  return (
    <>
      <div class="grid">
        <TextField
          label="Name"
          name="name"
          required
          error={error}
          value={draft.name}
          onValue={(name) => set({ name })}
        />
        {id && (
          <TextField
            label="Client id"
            name="client_id"
            hint="Optional: Tessera makes one when left empty"
            error={error}
            value={id.value}
            onValue={id.set}
          />
        )}
        <TextField
          label="Description"
          name="description"
          error={error}
          value={draft.description}
          onValue={(description) => set({ description })}
        />
        <SelectField
          label="Authentication"
          name="token_endpoint_auth_method"
          error={error}
          value={draft.token_endpoint_auth_method}
          onValue={(method) =>
            set({ token_endpoint_auth_method: method as ClientDraft['token_endpoint_auth_method'] })
          }
          options={AUTH_METHODS}
        />
      </div>
      {draft.token_endpoint_auth_method === 'federation' && (
        <p class="notice">
          A federated client has no secret and no key: tokens of a platform it trusts (Kubernetes, GitHub
          Actions, GitLab CI, SPIFFE, an OIDC issuer) authenticate it, as its federated credentials say (on
          the client's page).
        </p>
      )}
      {method === 'tls_client_auth' && (
        <fieldset>
          <legend>Client certificate</legend>
          <p class="hint">
            A certificate of a CA Tessera trusts (TESSERA_TLS_CLIENT_CA) authenticates the client when it
            carries this value (RFC 8705); the client has no secret.
          </p>
          <div class="grid">
            <SelectField
              label="The certificate must carry"
              name="tls_client_auth_kind"
              value={draft.tls_kind}
              onValue={(tls_kind) => set({ tls_kind: tls_kind as TlsKind })}
              options={TLS_KINDS.map(({ value, label }) => ({ value, label }))}
            />
            <TextField
              label={kind.label}
              name={tlsField(kind.value)}
              hint={kind.hint}
              error={error}
              value={draft.tls_value}
              onValue={(tls_value) => set({ tls_value })}
            />
          </div>
        </fieldset>
      )}
      {(method === 'private_key_jwt' || selfSigned) && (
        <fieldset>
          <legend>{selfSigned ? 'Certificates' : 'Public keys'}</legend>
          <div
            class="checks"
            role="radiogroup"
            aria-label={selfSigned ? 'Where the certificates are' : 'Where the keys are'}
          >
            <label>
              <input
                type="radio"
                name="keys"
                checked={draft.keys === 'jwks'}
                onChange={() => set({ keys: 'jwks' })}
              />
              A JWK Set here
            </label>
            <label>
              <input
                type="radio"
                name="keys"
                checked={draft.keys === 'jwks_uri'}
                onChange={() => set({ keys: 'jwks_uri' })}
              />
              At a URL (jwks_uri)
            </label>
          </div>
          {draft.keys === 'jwks' ? (
            <TextField
              label="JWK Set"
              name="jwks"
              multiline
              hint={
                selfSigned
                  ? 'Each self-signed certificate as a public key with its certificate in x5c: {"keys": [{"kty": "EC", …, "x5c": ["MIIB…"]}]}'
                  : '{"keys": [ … public keys … ]}'
              }
              error={error}
              value={draft.jwks}
              onValue={(jwks) => set({ jwks })}
            />
          ) : (
            <TextField
              label="JWKS URL"
              name="jwks_uri"
              type="url"
              error={error}
              value={draft.jwks_uri}
              onValue={(jwks_uri) => set({ jwks_uri })}
            />
          )}
        </fieldset>
      )}
      <CheckField
        label="Require DPoP: bind every token to the client's key"
        name="dpop_bound_access_tokens"
        hint="The client gets no token without a DPoP proof (RFC 9449); without this, a proof is optional"
        error={error}
        checked={draft.dpop_bound_access_tokens}
        onChecked={(dpop_bound_access_tokens) => set({ dpop_bound_access_tokens })}
      />
      <CheckField
        label="Bind tokens to the client certificate (RFC 8705)"
        name="tls_client_certificate_bound_access_tokens"
        hint="Every token carries the thumbprint of the TLS client certificate it was asked with, and none is issued without one; for a client of any method"
        error={error}
        checked={draft.tls_client_certificate_bound_access_tokens}
        onChecked={(tls_client_certificate_bound_access_tokens) =>
          set({ tls_client_certificate_bound_access_tokens })
        }
      />
      <div class="grid">
        <TextField
          label="Token lifetime"
          name="token_ttl"
          hint="Seconds or 15m, 1h…; empty: the audience's"
          error={error}
          value={draft.token_ttl}
          onValue={(token_ttl) => set({ token_ttl })}
        />
        <TextField
          label="Quota per minute"
          name="quota_per_minute"
          inputMode="numeric"
          hint="Tokens; empty: no limit"
          error={error}
          value={draft.quota_per_minute}
          onValue={(quota_per_minute) => set({ quota_per_minute })}
        />
        <TextField
          label="Quota per day"
          name="quota_per_day"
          inputMode="numeric"
          hint="Tokens; empty: no limit"
          error={error}
          value={draft.quota_per_day}
          onValue={(quota_per_day) => set({ quota_per_day })}
        />
      </div>
      <TextField
        label="Custom claims (JSON)"
        name="claims"
        multiline
        hint='Added to every token of this client, e.g. {"tenant_id": "acme"}; a grant may override them'
        error={error}
        value={draft.claims}
        onValue={(claims) => set({ claims })}
      />
    </>
  );
}

export function ClientsPage() {
  const { can } = useSession();
  const { query: params, route } = useLocation();
  const search = params.search ?? '';
  const after = params.after;
  const [text, setText] = useState(search);
  const list = useLoad(
    async () => (await api.get<Page<Client>>(`/clients${query({ limit: 50, search, after })}`)).body,
    [search, after],
  );
  const [draft, setDraft] = useState(clientDraft());
  const [clientId, setClientId] = useState('');
  const [created, setCreated] = useState<Client>();
  const add = useAction();

  const find = (event: Event) => {
    event.preventDefault();
    route(`/console/clients${query({ search: text.trim() })}`);
  };

  const create = async (event: Event) => {
    event.preventDefault();
    setCreated(undefined);
    const answer = await add.run(() =>
      api.post<Client>('/clients', {
        ...clientBody(draft),
        ...(clientId.trim() ? { client_id: clientId.trim() } : {}),
      }),
    );
    if (!answer) return;
    setCreated(answer.body);
    setDraft(clientDraft());
    setClientId('');
    await list.reload();
  };

  return (
    <>
      <PageTitle title="Clients">
        The programs that get tokens: their credentials, grants, claims and quotas.
      </PageTitle>
      <section class="panel" aria-labelledby="cl-list">
        <h2 id="cl-list">Clients</h2>
        <form class="toolbar" role="search" onSubmit={find}>
          <TextField
            label="Search by client id or name"
            name="search"
            type="search"
            error={list.error}
            value={text}
            onValue={setText}
          />
          <button type="submit">Search</button>
          {search && (
            <a href="/console/clients" class="muted">
              Show all
            </a>
          )}
        </form>
        <Loaded state={list} what="clients" fields={['search']}>
          {(data) =>
            data.items.length === 0 ? (
              <p class="muted">{search ? `No client matches “${search}”.` : 'No clients yet.'}</p>
            ) : (
              <>
                <TableBox
                  label="Clients"
                  columns={['Client id', 'Name', 'Status', 'Authentication', 'Audiences']}
                >
                  {data.items.map((c) => (
                    <tr key={c.client_id}>
                      <td>
                        <a href={`/console/clients/${seg(c.client_id)}`} class="mono">
                          {c.client_id}
                        </a>
                      </td>
                      <td>{c.name}</td>
                      <td>
                        <span class={`badge ${c.enabled ? 'on' : 'off'}`}>
                          {c.enabled ? 'enabled' : 'disabled'}
                        </span>
                      </td>
                      <td>{methodText(c)}</td>
                      <td>{c.audiences.join(', ') || <span class="muted">none</span>}</td>
                    </tr>
                  ))}
                </TableBox>
                <div class="pager">
                  {after && (
                    <a href={`/console/clients${query({ search })}`} class="muted">
                      First page
                    </a>
                  )}
                  {data.next && (
                    <a href={`/console/clients${query({ search, after: data.next })}`}>Next page</a>
                  )}
                </div>
              </>
            )
          }
        </Loaded>
      </section>
      <section class="panel" aria-labelledby="cl-new">
        <h2 id="cl-new">New client</h2>
        {created && (
          <>
            <Done>
              Client <a href={`/console/clients/${seg(created.client_id)}`}>{created.name}</a> created with
              the id <code>{created.client_id}</code>.{' '}
              {isFederated(created)
                ? 'Add its federated credentials and grant it an audience on its page.'
                : 'Grant it an audience on its page.'}
            </Done>
            {created.client_secret && (
              <OnceValue
                label="Client secret"
                value={created.client_secret}
                note="This is the only time it is shown: copy it now. Only a digest is stored."
              />
            )}
          </>
        )}
        {can('clients:write') ? (
          <ChangeForm onSubmit={create} action={add} fields={CLIENT_FIELDS} submit="Create client">
            <ClientFields
              draft={draft}
              setDraft={setDraft}
              error={add.error}
              id={{ value: clientId, set: setClientId }}
            />
          </ChangeForm>
        ) : (
          <ReadOnly what="clients" />
        )}
      </section>
    </>
  );
}
