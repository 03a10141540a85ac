/**
 * The admin API's schemas (TypeBox, i.e. JSON Schema): the server validates requests and serialises answers
 * with them, and the OpenAPI document is generated from them, so the document cannot drift from the server.
 * Field names and shapes are docs/management.md's, the same documents the CLI prints under --json (views.ts).
 */
import { TOKEN_PROFILES } from '../../domain/token-profiles.js';
import { Type, type TSchema } from 'typebox';
import { SIGNING_ALGS } from '../../domain/jose.js';
import {
  AUTH_METHOD_NAMES,
  DEFAULT_MAX_LIFETIME,
  MAX_CLIENT_KEYS,
  MAX_FEDERATED_CREDENTIALS,
} from '../../domain/client-auth/index.js';
import {
  MAX_MAX_LIFETIME,
  MAX_REQUIRED_CLAIMS,
  MIN_MAX_LIFETIME,
} from '../../domain/client-auth/federation-rules.js';
import { OPERATOR_ROLES } from '../../domain/validate.js';
import { TLS_IDENTITY_KINDS, type TlsIdentityKind } from '../../domain/known-client.js';
import { AUDIT_EVENT_TYPES } from '../../store/types.js';
import { MAX_RESOURCE_SERVERS } from '../../management/audiences.js';

const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);
const Alg = Type.Enum([...SIGNING_ALGS]);
/** Custom claims: a JSON object (at most 4 KiB; registered names and tessera* refused). */
const Claims = Type.Record(Type.String(), Type.Unknown(), {
  description: 'custom claims: a JSON object, at most 4 KiB; registered claim names are refused',
});
const Time = Type.String({ format: 'date-time', description: 'RFC 3339, UTC' });

/** A duration: whole seconds, or a number and a unit (`90s`, `15m`, `24h`, `7d`). */
const Duration = Type.Union([
  Type.Integer({ minimum: 0 }),
  Type.String({ pattern: '^[0-9]{1,9}[smhd]$', description: 'a number and a unit: s, m, h or d' }),
]);

// --- resources as answered ---

const Scope = Type.Object(
  { name: Type.String(), description: Nullable(Type.String()) },
  { additionalProperties: false },
);

/** An audience's token profile (domain/token-profiles.ts). */
const TokenProfile = Type.Union(
  TOKEN_PROFILES.map((p) => Type.Literal(p)),
  {
    description:
      'the claims its tokens carry: rfc9068 (the default: RFC 9068), auth0 (sub <client_id>@clients, azp, gty, permissions), keycloak (azp, typ Bearer, preferred_username service-account-<client_id>, clientId)',
  },
);

export const Audience = Type.Object(
  {
    id: Type.String({ description: 'server-made, stable; paths use it' }),
    identifier: Type.String({ description: 'the audience URL (RFC 8707), as tokens carry it in aud' }),
    name: Nullable(Type.String()),
    token_ttl: Nullable(Type.Integer({ description: 'seconds; null: the server default' })),
    signing_alg: Nullable(Alg),
    scopes: Type.Array(Scope),
    resource_server_client_ids: Type.Array(Type.String(), {
      description:
        "token exchange (RFC 8693): the clients that receive this audience's tokens, and so may exchange one for a token of another audience; sorted, each once",
    }),
    token_profile: TokenProfile,
    created_at: Time,
    updated_at: Time,
  },
  { additionalProperties: false },
);

/** An audience's resource servers as POST and PATCH take them: the whole list. */
const ResourceServersInput = Type.Array(Type.String({ maxLength: 128 }), {
  maxItems: MAX_RESOURCE_SERVERS,
  description: `token exchange: the client ids of the audience's resource servers (at most ${MAX_RESOURCE_SERVERS}, each an existing client; a client named twice is named once); on PATCH the whole list, [] for none`,
});

/** A grant's token_exchange (docs/interface.md, "Token exchange"). */
const TOKEN_EXCHANGE =
  "token exchange (RFC 8693): the client may exchange a token it received, as a resource server of the token's audience, for one of this grant's audience; never true on a grant of the admin API's audience";
const TokenExchange = Type.Boolean({ description: TOKEN_EXCHANGE });

const AuthMethod = Type.Union(
  AUTH_METHOD_NAMES.map((m) => Type.Literal(m)),
  {
    description:
      'how the client authenticates at the token endpoint (RFC 7591): with a secret (client_secret_basic ' +
      'or client_secret_post, either accepted), with a signed assertion (private_key_jwt: its own keys in ' +
      'jwks or jwks_uri, or a platform token matching one of its federated credentials, or neither yet), or ' +
      'with a TLS client certificate (RFC 8705: tls_client_auth, a certificate of a trusted CA carrying its one ' +
      'tls_client_auth_* value; self_signed_tls_client_auth, one of the certificates in the x5c of its jwks)',
  },
);

/** A JWK Set (RFC 7517): public keys only, at most MAX_CLIENT_KEYS. */
const jwksOf = (description: string) =>
  Type.Object(
    {
      keys: Type.Array(Type.Object({ kty: Type.String() }, { additionalProperties: true }), {
        minItems: 1,
        maxItems: MAX_CLIENT_KEYS,
      }),
    },
    { additionalProperties: true, description },
  );

const Jwks = jwksOf(
  "private_key_jwt: the public keys, a JWK Set (RFC 7517); self_signed_tls_client_auth: its certificates, each the first of a key's x5c (RFC 8705 section 2.2)",
);

/**
 * RFC 8705 section 2.1.2: the tls_client_auth_* fields, a client of tls_client_auth registering exactly one (as
 * answered: the one it has, the others null).
 */
const TLS_IDENTITY: Record<TlsIdentityKind, string> = {
  subject_dn:
    'tls_client_auth (RFC 8705 section 2.1.2): the subject its certificate must have, an RFC 4514 distinguished name (CN=worker,O=Example,C=US), compared as a name (attribute types and string values in any case, RDN members in any order), not as text',
  san_dns:
    'tls_client_auth (RFC 8705 section 2.1.2): a dNSName its certificate must carry in subjectAltName (a wildcard *.example.com is compared as written); compared in any case',
  san_uri:
    'tls_client_auth (RFC 8705 section 2.1.2): a uniformResourceIdentifier its certificate must carry in subjectAltName, an absolute URI (a SPIFFE ID spiffe://prod.example.com/ns/billing/sa/worker), compared exactly',
  san_ip:
    'tls_client_auth (RFC 8705 section 2.1.2): an iPAddress its certificate must carry in subjectAltName, IPv4 or IPv6 (compared as addresses, whatever their spelling)',
  san_email:
    'tls_client_auth (RFC 8705 section 2.1.2): an rfc822Name its certificate must carry in subjectAltName (local@domain); compared in any case',
};
const tlsIdentityProperties = <T extends TSchema>(of: (kind: TlsIdentityKind) => T) =>
  Object.fromEntries(TLS_IDENTITY_KINDS.map((kind) => [`tls_client_auth_${kind}`, of(kind)])) as Record<
    `tls_client_auth_${TlsIdentityKind}`,
    T
  >;

const CertificateBound = Type.Boolean({
  description:
    'RFC 8705 section 3.4 tls_client_certificate_bound_access_tokens: every token is bound to the TLS client certificate of its request (cnf x5t#S256), and none is issued without one; for a client of any method; false for a new client unless given',
});

const DpopBound = Type.Boolean({
  description:
    "RFC 9449 section 5.2: the client gets no token without a DPoP proof (each then bound to the proof's key); false for a new client unless given",
});

const clientProperties = {
  client_id: Type.String(),
  name: Type.String(),
  description: Nullable(Type.String()),
  enabled: Type.Boolean(),
  token_endpoint_auth_method: AuthMethod,
  jwks: Nullable(Jwks),
  jwks_uri: Nullable(
    Type.String({ description: 'private_key_jwt: where the client publishes its public keys' }),
  ),
  dpop_bound_access_tokens: DpopBound,
  ...tlsIdentityProperties((kind) =>
    Nullable(Type.String({ description: `${TLS_IDENTITY[kind]}; null: none` })),
  ),
  tls_client_certificate_bound_access_tokens: CertificateBound,
  token_ttl: Nullable(Type.Integer({ description: 'seconds; null: the audience or server default' })),
  quota_per_minute: Nullable(Type.Integer({ description: 'tokens a minute; null: no limit' })),
  quota_per_day: Nullable(Type.Integer({ description: 'tokens a day; null: no limit' })),
  claims: Nullable(Claims),
  audiences: Type.Array(Type.String(), { description: 'the identifiers of the audiences granted' }),
  created_at: Time,
  updated_at: Time,
  secret_rotated_at: Time,
  revoked_before: Nullable(
    Type.String({
      format: 'date-time',
      description:
        'its tokens issued at or before this moment, to the second, are inactive: set by revoke-tokens and by ' +
        'disabling it; null: never',
    }),
  ),
};

export const Client = Type.Object(clientProperties, { additionalProperties: false });

const RequiredClaimValue = Type.Union([Type.String(), Type.Number(), Type.Boolean()]);

const federatedProperties = {
  id: Type.String({ description: 'fed_ and 96 random bits, made by the server; paths use it' }),
  name: Type.String({ description: "unique among the client's federated credentials" }),
  issuer: Type.String({ description: "the exact iss of the platform's tokens" }),
  jwks: Nullable(jwksOf("the issuer's public keys inline (a JWK Set); null: at jwks_uri, or by discovery")),
  jwks_uri: Nullable(
    Type.String({
      description:
        "where the issuer publishes its keys; null: inline, or by discovery (<issuer>/.well-known/openid-configuration's jwks_uri) when jwks is null too",
    }),
  ),
  subject: Type.String({ description: 'the exact sub required' }),
  audience: Type.String({
    description: 'the aud required (equal to it, or a list containing it); by default the Tessera issuer URL',
  }),
  claims: Type.Record(Type.String(), RequiredClaimValue, {
    description: 'further top-level claims the token must carry with exactly these values; {} for none',
  }),
  max_lifetime: Type.Integer({
    description: `the longest lifetime of a token accepted (exp - iat, or exp - now without iat), in seconds`,
  }),
  once: Type.Boolean({
    description: 'true: each token authenticates once (its jti is required and single-use on every instance)',
  }),
  created_at: Time,
  updated_at: Time,
};

export const FederatedCredential = Type.Object(federatedProperties, { additionalProperties: false });

export const TokensRevoked = Type.Object(
  {
    revoked_before: Type.String({
      format: 'date-time',
      description: "the client's tokens issued at or before this moment, to the second, are inactive",
    }),
  },
  { additionalProperties: false },
);

export const ClientWithSecret = Type.Object(
  {
    ...clientProperties,
    client_secret: Type.Optional(
      Type.String({
        description: 'shown in this answer only; stored as a digest. None for a private_key_jwt client',
      }),
    ),
    federated_credentials: Type.Optional(
      Type.Array(FederatedCredential, {
        description: 'the federated credentials the client was created with, when the request gave them',
      }),
    ),
  },
  { additionalProperties: false },
);

export const Secret = Type.Object(
  {
    id: Type.String(),
    created_at: Time,
    expires_at: Nullable(Time),
    last_used_at: Nullable(Time),
  },
  { additionalProperties: false },
);

export const SecretWithValue = Type.Object(
  {
    ...Secret.properties,
    client_secret: Type.String({ description: 'shown in this answer only; stored as a digest' }),
  },
  { additionalProperties: false },
);

export const NewSecretBody = Type.Object(
  {
    grace: Type.Optional(Duration),
    expires_at: Type.Optional(Time),
  },
  { additionalProperties: false },
);

export const SecretParams = Type.Object(
  { id: Type.String({ maxLength: 256 }), secret_id: Type.String({ maxLength: 256 }) },
  { additionalProperties: false },
);

export const Grant = Type.Object(
  {
    client_id: Type.String(),
    audience_id: Type.String(),
    audience: Type.String({ description: 'the identifier of the audience' }),
    scopes: Type.Array(Type.String()),
    claims: Nullable(Claims),
    token_exchange: TokenExchange,
  },
  { additionalProperties: false },
);

export const Key = Type.Object(
  {
    kid: Type.String(),
    alg: Alg,
    status: Type.Union(['next', 'active', 'superseded', 'retired', 'expired'].map((s) => Type.Literal(s))),
    created_at: Time,
    activates_at: Time,
    retires_at: Nullable(Time),
  },
  { additionalProperties: false },
);

const Rotation = Type.Object(
  {
    alg: Alg,
    kid: Nullable(Type.String({ description: 'the key scheduled to sign next' })),
    activates_at: Nullable(Time),
    already_scheduled: Type.Boolean(),
    retiring: Type.Array(Type.String(), { description: 'keys that stop signing when it starts' }),
  },
  { additionalProperties: false },
);

export const Rotations = Type.Object({ items: Type.Array(Rotation) }, { additionalProperties: false });

export const Retirement = Type.Object(
  {
    retired: Type.String({ description: 'the kid retired' }),
    signing: Nullable(Type.String({ description: 'the key of its algorithm that signs from now on' })),
    keys: Type.Array(Key, { description: 'the keys of its algorithm, afterwards' }),
  },
  { additionalProperties: false },
);

export const AuditEvent = Type.Object(
  {
    id: Type.Integer(),
    time: Time,
    type: Type.Enum([...AUDIT_EVENT_TYPES]),
    client_id: Nullable(Type.String()),
    audience: Nullable(Type.String()),
    jti: Nullable(Type.String()),
    source: Nullable(Type.String()),
    reason: Nullable(Type.String()),
    count: Nullable(
      Type.Integer({
        description:
          'requests a summary stands for: token.throttled, admin.auth_failed and admin.forbidden are summed per source address and minute',
      }),
    ),
    actor: Nullable(
      Type.String({
        description:
          'who made a change, by kind: client:<client_id>, operator:<email>, cli:<os user>, or tessera (the server itself); null for none',
      }),
    ),
    target: Nullable(Type.String({ description: "the changed resource's id" })),
    changes: Nullable(
      Type.Record(Type.String(), Type.Unknown(), { description: 'the fields that changed (never a secret)' }),
    ),
  },
  { additionalProperties: false },
);

const Role = Type.Union(
  OPERATOR_ROLES.map((r) => Type.Literal(r)),
  { description: 'admin: everything; viewer: reads everything but the operators, changes nothing' },
);

export const Operator = Type.Object(
  {
    id: Type.String({ description: 'server-made, stable; paths use it' }),
    email: Type.String({ description: 'lower case; what the operator logs in with' }),
    role: Role,
    enabled: Type.Boolean(),
    enrolled: Type.Boolean({ description: 'whether the operator has set a password' }),
    enrollment_expires_at: Nullable(Time),
    last_login_at: Nullable(Time),
    created_at: Time,
    updated_at: Time,
  },
  { additionalProperties: false },
);

export const OperatorWithLink = Type.Object(
  {
    ...Operator.properties,
    enrollment_url: Type.String({
      description: 'the one-time link where the operator sets a password; shown in this answer only',
    }),
  },
  { additionalProperties: false },
);

const TokenCount = Type.Object(
  {
    minute: Time,
    issued: Type.Integer({ description: 'tokens issued in that minute' }),
    refused: Type.Integer({ description: 'token requests refused or throttled in that minute' }),
  },
  { additionalProperties: false },
);

export const Stats = Type.Object(
  {
    clients: Type.Integer(),
    audiences: Type.Integer({ description: "the admin API's own audience included" }),
    from: Time,
    until: Time,
    tokens: Type.Array(TokenCount, { description: 'every minute from `from` to `until`, oldest first' }),
  },
  { additionalProperties: false },
);

export const Page = <T extends TSchema>(item: T) =>
  Type.Object(
    {
      items: Type.Array(item),
      next: Nullable(Type.String({ description: 'pass as ?after= for the next page; null: the last page' })),
    },
    { additionalProperties: false },
  );

export const ProblemSchema = Type.Object(
  {
    type: Type.String({ description: 'urn:tessera:problem:<code>, stable' }),
    title: Type.String(),
    status: Type.Integer(),
    detail: Type.String(),
    errors: Type.Optional(
      Type.Array(
        Type.Object(
          {
            pointer: Type.String({ description: 'JSON pointer into the request body' }),
            detail: Type.String(),
          },
          { additionalProperties: false },
        ),
      ),
    ),
  },
  { additionalProperties: false },
);

// --- requests ---

const Name = Type.String({ minLength: 1, maxLength: 200 });
const Ttl = Nullable(Duration);
const Quota = Nullable(Type.Integer({ minimum: 1 }));

const ScopeInput = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 128, description: 'an RFC 6749 §3.3 scope token' }),
    description: Type.Optional(Nullable(Type.String({ maxLength: 500 }))),
  },
  { additionalProperties: false },
);
const ScopesInput = Type.Array(ScopeInput, {
  maxItems: 200,
  description:
    'every scope the audience defines; on PATCH the whole list, and scopes left out are taken from its grants',
});

export const NewAudience = Type.Object(
  {
    identifier: Type.String({ maxLength: 2048 }),
    scopes: Type.Optional(ScopesInput),
    name: Type.Optional(Nullable(Name)),
    token_ttl: Type.Optional(Ttl),
    signing_alg: Type.Optional(Nullable(Alg)),
    resource_server_client_ids: Type.Optional(ResourceServersInput),
    token_profile: Type.Optional(Nullable(TokenProfile)),
  },
  { additionalProperties: false },
);

export const AudiencePatch = Type.Object(
  {
    scopes: Type.Optional(ScopesInput),
    name: Type.Optional(Nullable(Name)),
    token_ttl: Type.Optional(Ttl),
    signing_alg: Type.Optional(Nullable(Alg)),
    resource_server_client_ids: Type.Optional(ResourceServersInput),
    token_profile: Type.Optional(Nullable(TokenProfile)),
  },
  { additionalProperties: false },
);

/** A duration of a federated credential: `max_lifetime`. */
const MaxLifetime = Type.Union([...Duration.anyOf], {
  description: `the longest lifetime of a token accepted: seconds or a duration (15m, 1h), from ${MIN_MAX_LIFETIME} s to ${MAX_MAX_LIFETIME} s (24 h); default ${DEFAULT_MAX_LIFETIME} s`,
});

/** A federated credential's fields as POST and PATCH take them (JSON Merge Patch: null resets a default). */
const federatedFields = {
  jwks: Type.Optional(
    Nullable(jwksOf("the issuer's public keys inline (a JWK Set), e.g. a private cluster's")),
  ),
  jwks_uri: Type.Optional(
    Nullable(
      Type.String({
        maxLength: 2048,
        format: 'uri',
        description: 'where the issuer publishes its keys; with neither, they are found by discovery',
      }),
    ),
  ),
  audience: Type.Optional(
    Nullable(
      Type.String({
        maxLength: 2048,
        description: 'the aud required; null or left out: the Tessera issuer URL',
      }),
    ),
  ),
  claims: Type.Optional(
    Nullable(
      Type.Record(Type.String(), Type.Unknown(), {
        description: `further claims the token must carry with exactly these values (strings, numbers or booleans; at most ${MAX_REQUIRED_CLAIMS}); null: none`,
      }),
    ),
  ),
  max_lifetime: Type.Optional(Nullable(MaxLifetime)),
  once: Type.Optional(
    Nullable(Type.Boolean({ description: 'each token authenticates once (jti required); default false' })),
  ),
};

const CredentialName = Type.String({ minLength: 1, maxLength: 200 });
const Issuer = Type.String({
  maxLength: 2048,
  description: "the exact iss of the platform's tokens: an https URL (http outside production)",
});
const Subject = Type.String({ minLength: 1, maxLength: 2048, description: 'the exact sub required' });

export const NewFederatedCredential = Type.Object(
  { name: CredentialName, issuer: Issuer, subject: Subject, ...federatedFields },
  { additionalProperties: false },
);

export const FederatedCredentialPatch = Type.Object(
  {
    name: Type.Optional(CredentialName),
    issuer: Type.Optional(Issuer),
    subject: Type.Optional(Subject),
    ...federatedFields,
  },
  { additionalProperties: false },
);

export const FederatedCredentialParams = Type.Object(
  { id: Type.String({ maxLength: 256 }), fid: Type.String({ maxLength: 256 }) },
  { additionalProperties: false },
);

const clientFields = {
  description: Type.Optional(Nullable(Type.String({ maxLength: 1000 }))),
  enabled: Type.Optional(Type.Boolean()),
  token_ttl: Type.Optional(Ttl),
  quota_per_minute: Type.Optional(Quota),
  quota_per_day: Type.Optional(Quota),
  claims: Type.Optional(Nullable(Claims)),
  token_endpoint_auth_method: Type.Optional(AuthMethod),
  jwks: Type.Optional(Nullable(Jwks)),
  jwks_uri: Type.Optional(Nullable(Type.String({ maxLength: 2048, format: 'uri' }))),
  dpop_bound_access_tokens: Type.Optional(DpopBound),
  ...tlsIdentityProperties((kind) =>
    Type.Optional(
      Nullable(
        Type.String({
          maxLength: 2048,
          description: `${TLS_IDENTITY[kind]}. One replaces the value the client has, of any kind; two in one request are refused; null clears this one`,
        }),
      ),
    ),
  ),
  tls_client_certificate_bound_access_tokens: Type.Optional(CertificateBound),
};

export const NewClient = Type.Object(
  {
    client_id: Type.Optional(Type.String({ description: 'chosen by the caller; generated when left out' })),
    name: Name,
    ...clientFields,
    federated_credentials: Type.Optional(
      Type.Array(NewFederatedCredential, {
        description: `workload identity federation: the client's federated credentials (at most ${MAX_FEDERATED_CREDENTIALS}), for a private_key_jwt client without jwks or jwks_uri; it gets no secret`,
      }),
    ),
  },
  { additionalProperties: false },
);

export const ClientPatch = Type.Object(
  { name: Type.Optional(Name), ...clientFields },
  { additionalProperties: false },
);

export const GrantBody = Type.Object(
  {
    scopes: Type.Optional(
      Type.Array(Type.String(), { maxItems: 200, description: "the audience's scopes; none when left out" }),
    ),
    claims: Type.Optional(Nullable(Claims)),
    token_exchange: Type.Optional(
      Type.Boolean({
        description: `${TOKEN_EXCHANGE}; false when left out (PUT sets the whole grant)`,
      }),
    ),
  },
  { additionalProperties: false },
);

export const RotateBody = Type.Object({ alg: Type.Optional(Alg) }, { additionalProperties: false });

export const ListQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 50 })),
    after: Type.Optional(Type.String({ maxLength: 1024, description: 'the `next` of the previous page' })),
  },
  { additionalProperties: false },
);

export const AuditQuery = Type.Object(
  {
    ...ListQuery.properties,
    client_id: Type.Optional(Type.String({ maxLength: 256 })),
    audience: Type.Optional(Type.String({ maxLength: 2048 })),
    outcome: Type.Optional(Type.Enum(['issued', 'refused'])),
    type: Type.Optional(Type.Enum([...AUDIT_EVENT_TYPES])),
    since: Type.Optional(Time),
    until: Type.Optional(Time),
  },
  { additionalProperties: false },
);

export const ClientListQuery = Type.Object(
  {
    ...ListQuery.properties,
    search: Type.Optional(
      Type.String({
        maxLength: 200,
        description: 'only clients whose client_id or name contains this text (ASCII letters in any case)',
      }),
    ),
  },
  { additionalProperties: false },
);

export const StatsQuery = Type.Object(
  { minutes: Type.Optional(Type.Integer({ minimum: 1, maximum: 1440, default: 60 })) },
  { additionalProperties: false },
);

export const NewOperator = Type.Object(
  { email: Type.String({ minLength: 3, maxLength: 254 }), role: Role },
  { additionalProperties: false },
);

export const OperatorPatch = Type.Object(
  { role: Type.Optional(Role), enabled: Type.Optional(Type.Boolean()) },
  { additionalProperties: false },
);

export const IdParam = Type.Object({ id: Type.String({ maxLength: 256 }) }, { additionalProperties: false });
export const GrantParams = Type.Object(
  { id: Type.String({ maxLength: 256 }), audience_id: Type.String({ maxLength: 256 }) },
  { additionalProperties: false },
);
export const KidParam = Type.Object(
  { kid: Type.String({ maxLength: 256 }) },
  { additionalProperties: false },
);
