import { TOKEN_PROFILES } from '../../domain/token-profiles.js';
/**
 * The JSON Schema of the file (`tessera export --schema`), and the file's shape checked by it. The rules
 * (lengths, ranges, URL forms) are the management layer's, checked after it (see check.ts).
 */
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import { SIGNING_ALGS } from '../../domain/jose.js';
import { AUTH_METHOD_NAMES, DEFAULT_MAX_LIFETIME } from '../../domain/client-auth/index.js';
import { pointerSegment } from '../../domain/json-depth.js';
import type { FileProblem, ParsedFile } from './file.js';

const nullable = (schema: Record<string, unknown>) => ({ anyOf: [schema, { type: 'null' }] });

const AUDIENCE = {
  type: 'object',
  additionalProperties: false,
  required: ['identifier'],
  properties: {
    identifier: { type: 'string', description: 'the audience URL (RFC 8707), matched exactly' },
    name: nullable({ type: 'string' }),
    token_ttl: nullable({ type: 'integer', description: 'token lifetime in seconds' }),
    signing_alg: nullable({ enum: [...SIGNING_ALGS] }),
    scopes: {
      type: 'array',
      description: 'the permissions this audience defines (RFC 6749 §3.3 scope tokens)',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['name'],
        properties: { name: { type: 'string' }, description: nullable({ type: 'string' }) },
      },
    },
    resource_server_client_ids: {
      type: 'array',
      items: { type: 'string' },
      description:
        'token exchange (RFC 8693): the clients that receive its tokens, and so may exchange one for a token of another audience, by client_id (each a client in the file or registered); none when left out',
    },
    token_profile: nullable({
      enum: [...TOKEN_PROFILES],
      default: 'rfc9068',
      description:
        "the claims its tokens carry: rfc9068 (RFC 9068's), auth0 (sub <client_id>@clients, azp, gty, permissions: as Auth0's), keycloak (azp, typ Bearer, preferred_username service-account-<client_id>, clientId: as Keycloak's)",
    }),
  },
};

const CLIENT = {
  type: 'object',
  additionalProperties: false,
  required: ['client_id', 'name'],
  properties: {
    client_id: { type: 'string' },
    name: { type: 'string' },
    description: nullable({ type: 'string' }),
    enabled: { type: 'boolean', default: true },
    token_ttl: nullable({ type: 'integer', description: 'token lifetime in seconds' }),
    quota_per_minute: nullable({ type: 'integer', description: 'tokens a minute; null: no limit' }),
    quota_per_day: nullable({ type: 'integer', description: 'tokens a day; null: no limit' }),
    claims: nullable({ type: 'object', description: 'custom claims in every token of the client' }),
    token_endpoint_auth_method: {
      enum: [...AUTH_METHOD_NAMES],
      default: 'client_secret_basic',
      description:
        'how the client authenticates (RFC 7591); private_key_jwt with jwks or jwks_uri, or with federated_credentials; tls_client_auth with one tls_client_auth_* field; self_signed_tls_client_auth with jwks whose keys carry x5c (RFC 8705)',
    },
    jwks: nullable({
      type: 'object',
      required: ['keys'],
      properties: { keys: { type: 'array', items: { type: 'object' }, minItems: 1 } },
      description:
        'private_key_jwt: the public keys, a JWK Set (RFC 7517); self_signed_tls_client_auth: its certificates, in the x5c of each key',
    }),
    jwks_uri: nullable({ type: 'string', description: 'private_key_jwt: where the public keys are' }),
    federated_credentials: {
      type: 'array',
      description:
        'workload identity federation (a private_key_jwt client without jwks or jwks_uri): every platform whose tokens it accepts, each known by its name; none when left out',
      items: { $ref: '#/$defs/federated_credential' },
    },
    dpop_bound_access_tokens: {
      type: 'boolean',
      default: false,
      description: 'no token without a DPoP proof (RFC 9449 section 5.2)',
    },
    tls_client_auth_subject_dn: nullable({
      type: 'string',
      description:
        'tls_client_auth (RFC 8705 section 2.1.2): the subject DN its certificate must have, RFC 4514 (CN=worker,O=Example,C=US); one tls_client_auth_* field at most',
    }),
    tls_client_auth_san_dns: nullable({
      type: 'string',
      description: 'tls_client_auth (RFC 8705 section 2.1.2): a dNSName its certificate must carry as a SAN',
    }),
    tls_client_auth_san_uri: nullable({
      type: 'string',
      description:
        'tls_client_auth (RFC 8705 section 2.1.2): a URI its certificate must carry as a SAN (a SPIFFE ID)',
    }),
    tls_client_auth_san_ip: nullable({
      type: 'string',
      description:
        'tls_client_auth (RFC 8705 section 2.1.2): an IP address its certificate must carry as a SAN',
    }),
    tls_client_auth_san_email: nullable({
      type: 'string',
      description:
        'tls_client_auth (RFC 8705 section 2.1.2): an email address its certificate must carry as a SAN',
    }),
    tls_client_certificate_bound_access_tokens: {
      type: 'boolean',
      default: false,
      description:
        'its tokens are bound to its TLS client certificate, and none is issued without one (RFC 8705 section 3.4)',
    },
    client_secret_file: {
      type: 'string',
      minLength: 1,
      description:
        "a file holding the client's secret (a mounted Kubernetes Secret; at least 32 characters), relative to this file's directory: a new client gets it, a client whose secrets do not include it gets it in place of them; never written by export",
    },
    grants: { type: 'array', items: { $ref: '#/$defs/grant' } },
  },
};

const FEDERATED_CREDENTIAL = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'issuer', 'subject'],
  properties: {
    name: { type: 'string', description: "unique among the client's federated credentials" },
    issuer: { type: 'string', description: "the exact iss of the platform's tokens" },
    jwks: nullable({
      type: 'object',
      required: ['keys'],
      properties: { keys: { type: 'array', items: { type: 'object' }, minItems: 1 } },
      description: "the issuer's public keys inline (a JWK Set); left out with jwks_uri: found by discovery",
    }),
    jwks_uri: nullable({ type: 'string', description: 'where the issuer publishes its keys' }),
    subject: { type: 'string', description: 'the exact sub required' },
    audience: nullable({ type: 'string', description: 'the aud required; left out: the Tessera issuer URL' }),
    claims: nullable({
      type: 'object',
      additionalProperties: { anyOf: [{ type: 'string' }, { type: 'number' }, { type: 'boolean' }] },
      description: 'further claims the token must carry with exactly these values',
    }),
    max_lifetime: nullable({
      type: 'integer',
      description: `the longest lifetime of a token accepted, in seconds; left out: ${DEFAULT_MAX_LIFETIME}`,
    }),
    once: nullable({ type: 'boolean', description: 'each token authenticates once (jti required)' }),
  },
};

const GRANT = {
  type: 'object',
  additionalProperties: false,
  required: ['audience'],
  properties: {
    audience: { type: 'string', description: 'the identifier of an audience' },
    scopes: {
      type: 'array',
      items: { type: 'string' },
      description: "scopes the grant carries, each one the audience's; none when left out",
    },
    claims: nullable({
      type: 'object',
      description: "custom claims for this audience, over the client's",
    }),
    token_exchange: {
      type: 'boolean',
      default: false,
      description:
        "token exchange (RFC 8693): the client may exchange a token it received, as a resource server of the token's audience, for one of this audience; never for the admin API's audience",
    },
  },
};

/**
 * The JSON Schema (draft 2020-12) of the file: its shape. The rules (lengths, ranges, URL forms) are the
 * management layer's, checked after it, so that a value is refused with the same words by every face.
 */
export function configSchema(): Record<string, unknown> {
  return {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    $id: 'urn:tessera:config:1',
    title: 'Tessera configuration (tessera apply / tessera export)',
    type: 'object',
    additionalProperties: false,
    properties: {
      $schema: { type: 'string', description: 'where an editor finds this schema' },
      audiences: {
        type: 'array',
        description: 'audiences, each known by its identifier',
        items: { $ref: '#/$defs/audience' },
      },
      clients: {
        type: 'array',
        description: 'clients, each known by its client_id, with every grant it has',
        items: { $ref: '#/$defs/client' },
      },
    },
    $defs: structuredClone({
      audience: AUDIENCE,
      client: CLIENT,
      federated_credential: FEDERATED_CREDENTIAL,
      grant: GRANT,
    }),
  };
}

let validator: ValidateFunction | undefined;
function validateShape(data: unknown): ErrorObject[] {
  validator ??= new Ajv2020({ allErrors: true, strict: true }).compile(configSchema());
  return validator(data) ? [] : [...(validator.errors ?? [])];
}

/** The message of a schema error, in words; unknown fields are named. */
function shapeProblem(e: ErrorObject, file: ParsedFile): FileProblem {
  let pointer = e.instancePath;
  let message = e.message ?? 'is not valid';
  let key = false;
  if (e.keyword === 'additionalProperties') {
    const property = (e.params as { additionalProperty: string }).additionalProperty;
    pointer = `${pointer}/${pointerSegment(property)}`;
    message = `unknown field "${property}"`;
    key = true;
  } else if (e.keyword === 'required') {
    message = `missing required field "${(e.params as { missingProperty: string }).missingProperty}"`;
  } else if (e.keyword === 'enum') {
    message = `must be one of ${(e.params as { allowedValues: unknown[] }).allowedValues.map((v) => JSON.stringify(v)).join(', ')}`;
  }
  return { pointer, ...file.locate(pointer, key), message };
}

/** Whether an error only says that no branch of an anyOf (a nullable value, a union) took the value. */
const isBranchError = (e: ErrorObject): boolean => e.keyword === 'type' || e.keyword === 'anyOf';

/**
 * What the schema finds wrong with a file's shape, one problem per place. An anyOf reports each branch: where a
 * branch failed deeper inside the value (an object of the wrong shape), the deeper problem is the one reported;
 * where the value's type fits no branch, the types it may have are named together (`must be string or null`).
 */
export function shapeProblems(file: ParsedFile): FileProblem[] {
  const errors = validateShape(file.data);
  const deeper = (path: string) => errors.some((e) => e.instancePath.startsWith(`${path}/`));
  const types = new Map<string, string[]>();
  for (const e of errors)
    if (e.keyword === 'type') {
      const list = types.get(e.instancePath) ?? [];
      types.set(e.instancePath, [...list, String((e.params as { type: unknown }).type)]);
    }
  const problems = new Map<string, FileProblem>();
  for (const error of errors) {
    if (isBranchError(error) && deeper(error.instancePath)) continue;
    const problem = shapeProblem(error, file);
    const named = types.get(error.instancePath);
    if (isBranchError(error) && named !== undefined)
      problem.message = `must be ${named.length === 1 ? named[0] : `${named.slice(0, -1).join(', ')} or ${named.at(-1)}`}`;
    if (!problems.has(problem.pointer)) problems.set(problem.pointer, problem);
  }
  return [...problems.values()];
}
