import {
  digestSecret,
  generateClientId,
  generateSecret,
  givenSecretProblem,
  matchesDigest,
} from '../domain/secrets.js';
import type { TlsIdentityKind } from '../domain/known-client.js';
import {
  credentialProblem,
  TLS_IDENTITY_FIELDS,
  tlsIdentityField,
  validateTlsIdentity,
  type RegisteredCredentials,
} from '../domain/client-auth/certificate-registration.js';
import { newSecretId } from '../store/migrations.js';
import {
  validateAudienceUrl,
  validateClientId,
  validateClaims,
  validateDescription,
  validateName,
  validateQuota,
  validateTokenTtl,
  ValidationError,
} from '../domain/validate.js';
import type { Audience, ChangeAudit, Client, ClientPatch, NewClient, TlsClientAuth } from '../store/types.js';
import {
  checkJwksKeys,
  usesSecrets,
  validateAuthMethod,
  validateJwks,
  validateJwksUri,
  type AuthMethodName,
  type FederatedCredential,
  type PublicJwks,
} from '../domain/client-auth/index.js';
import {
  changeAudit,
  checkPrecondition,
  nowOf,
  patchChanges,
  type ManagementContext,
  type Precondition,
} from './context.js';
import { adminAudienceUrl, ensureAdminAudience } from './builtin.js';
import { requireClientHeld, requireHeld } from './authority.js';
import { changeClient, requireSecretClient } from './client-access.js';

export { getClient } from './client-access.js';
import { checkGrantScopes, checkGrantTokenExchange } from './grants.js';
import { addingSecret } from './secret-rules.js';
import { CLIENT_FIELDS, clientJson, federatedCredentialJson } from './views.js';
import { checkNewCredentials, type FederatedCredentialInput } from './federation.js';
import { field, FieldChecks, ManagementError, storeCall } from './errors.js';

/**
 * The fields of a client but its id and grants, as a caller gives them, before their checks: a store's
 * ClientPatch, but a method and inline keys not yet known to be valid. Undefined leaves one as it is (a change)
 * or default (new).
 */
export interface ClientFields extends Omit<
  ClientPatch,
  'authMethod' | 'jwks' | 'federatedCredentials' | 'revokedBefore' | 'tlsClientAuth'
> {
  /** Claims added to the client's (an update only): the CLI's `--claim k=v`. */
  addClaims?: Record<string, unknown>;
  /** RFC 7591 token_endpoint_auth_method (client_secret_basic when a new client leaves it out). */
  authMethod?: string;
  /** private_key_jwt: the public keys inline (a JWK Set), or null. */
  jwks?: unknown;
  /**
   * tls_client_auth (RFC 8705 §2.1.2): the tls_client_auth_* values given, by kind (`subject_dn` for
   * tls_client_auth_subject_dn, ...), in the order given. One value is the client's (a change: it replaces the one
   * it has, of any kind); a second is refused at its field; null clears that kind's value if it is the client's.
   */
  tlsIdentity?: Partial<Record<TlsIdentityKind, unknown>>;
}

export interface ClientInput extends ClientFields {
  name: string;
  /** Chosen by the operator; generated when left out. */
  id?: string;
  /** Audience URLs granted at once. */
  grants?: string[];
  /** The scopes of some of those grants, by audience URL (each defined by its audience). */
  scopes?: Record<string, string[]>;
  /** The custom claims of some of those grants, by audience URL. */
  grantClaims?: Record<string, Record<string, unknown>>;
  /** The audience URLs of those grants that allow token exchange (never the admin audience's). */
  grantTokenExchange?: readonly string[];
  /** An admin client: granted the admin API with these of its scopes (ADMIN_SCOPES for all). */
  adminScopes?: readonly string[];
  /** Workload identity federation: its federated credentials (a private_key_jwt client without jwks or jwks_uri). */
  federatedCredentials?: readonly FederatedCredentialInput[];
  /**
   * Its secret, given (a mounted file's: the bootstrap admin, an apply file's client_secret_file) rather than made
   * here; at least MIN_GIVEN_SECRET_LENGTH characters, and only for a method that uses a secret.
   */
  secret?: string;
}

/** A client and its secret, which exists in clear only in this answer (none for a private_key_jwt client). */
export interface WithSecret {
  client: Client;
  secret: string | undefined;
}

const quota = (name: string, value: number | null | undefined): number | null =>
  value === undefined ? null : field(name, () => validateQuota(value));

/** The tls_client_auth_* fields given (undefined left out), in the order given. */
const givenTls = (given: Partial<Record<TlsIdentityKind, unknown>>) =>
  (Object.entries(given) as [TlsIdentityKind, unknown][]).filter(([, value]) => value !== undefined);

/**
 * The tls_client_auth value of the tls_client_auth_* fields given: the one set, checked by its kind's rule; null
 * when every one given is null; undefined for none given (or a refusal, collected in `checks`: a second value is
 * refused at its own field).
 */
function checkTlsIdentity(
  given: Partial<Record<TlsIdentityKind, unknown>>,
  checks: FieldChecks,
): TlsClientAuth | null | undefined {
  const fields = givenTls(given);
  const set = fields.filter(([, value]) => value !== null);
  if (set.length > 1) {
    const [first, second] = [tlsIdentityField(set[0]![0]), tlsIdentityField(set[1]![0])];
    checks.run(second, () => {
      throw new ValidationError(
        `a tls_client_auth client has one of ${TLS_IDENTITY_FIELDS.join(', ')}: ${first} is given already`,
      );
    });
    return undefined;
  }
  if (set.length === 0) return fields.length > 0 ? null : undefined;
  const [kind, raw] = set[0]!;
  const value = checks.run(tlsIdentityField(kind), () => validateTlsIdentity(kind, raw));
  return value === undefined ? undefined : { kind, value };
}

/** Checks the fields given (null clears one), each by its rule; refusals are collected in `checks`. */
function checkClientFields(
  input: ClientFields,
  checks: FieldChecks,
  production: boolean,
  /** TESSERA_JWKS_ALLOW_PRIVATE: a jwks_uri may be on a private address. */
  allowPrivate: boolean,
): ClientPatch {
  const patch: ClientPatch = {};
  if (input.name !== undefined)
    patch.name = checks.run('name', () => validateName(input.name!, 'the client'));
  if (input.description !== undefined)
    patch.description =
      input.description === null
        ? null
        : checks.run('description', () => validateDescription(input.description!));
  if (input.enabled !== undefined) patch.enabled = input.enabled;
  if (input.dpopBoundAccessTokens !== undefined) patch.dpopBoundAccessTokens = input.dpopBoundAccessTokens;
  if (input.certificateBoundAccessTokens !== undefined)
    patch.certificateBoundAccessTokens = input.certificateBoundAccessTokens;
  if (input.tlsIdentity !== undefined) {
    const tls = checkTlsIdentity(input.tlsIdentity, checks);
    if (tls !== undefined) patch.tlsClientAuth = tls;
  }
  if (input.tokenTtl !== undefined)
    patch.tokenTtl =
      input.tokenTtl === null ? null : checks.run('token_ttl', () => validateTokenTtl(input.tokenTtl!));
  if (input.quotaPerMinute !== undefined)
    patch.quotaPerMinute = checks.run('quota_per_minute', () =>
      quota('quota_per_minute', input.quotaPerMinute),
    );
  if (input.quotaPerDay !== undefined)
    patch.quotaPerDay = checks.run('quota_per_day', () => quota('quota_per_day', input.quotaPerDay));
  if (input.claims !== undefined)
    patch.claims = input.claims === null ? null : checks.run('claims', () => validateClaims(input.claims));
  if (input.authMethod !== undefined)
    patch.authMethod = checks.run('token_endpoint_auth_method', () => validateAuthMethod(input.authMethod!));
  if (input.jwks !== undefined)
    patch.jwks = input.jwks === null ? null : checks.run('jwks', () => validateJwks(input.jwks));
  if (input.jwksUri !== undefined)
    patch.jwksUri =
      input.jwksUri === null
        ? null
        : checks.run('jwks_uri', () => validateJwksUri(input.jwksUri!, production, allowPrivate));
  return patch;
}

/**
 * A client's method and credentials together (client-auth/certificate-registration.ts's rule, method.ts's for the
 * methods before RFC 8705), the keys imported with jose: the field that breaks the rule is named
 * (`jwks/keys/0/x5c` for a part of one).
 */
async function checkAuthKeys(client: RegisteredCredentials) {
  const problem = credentialProblem(client);
  if (problem !== undefined) throw new ManagementError('invalid_field', problem.message, problem.field);
  const { jwks } = client;
  if (jwks !== null) {
    try {
      await checkJwksKeys(jwks);
    } catch (error) {
      throw new ManagementError('invalid_field', (error as Error).message, 'jwks');
    }
  }
}

/**
 * The federated credentials of a new client, checked (their fields are named `federated_credentials/<i>/…`):
 * only a private_key_jwt client without jwks or jwks_uri has any.
 */
async function newClientCredentials(
  ctx: ManagementContext,
  client: { authMethod: AuthMethodName; jwks: PublicJwks | null; jwksUri: string | null },
  inputs: readonly FederatedCredentialInput[] | undefined,
): Promise<FederatedCredential[]> {
  if (inputs === undefined || inputs.length === 0) return [];
  if (client.authMethod !== 'private_key_jwt' || client.jwks !== null || client.jwksUri !== null)
    throw new ManagementError(
      'invalid_field',
      'federated credentials are for a private_key_jwt client without jwks or jwks_uri',
      'federated_credentials',
    );
  return checkNewCredentials(ctx, inputs, 'federated_credentials');
}

/**
 * Refuses (client_uses_federation) keys or a secret method for a client that has federated credentials: it
 * authenticates with them only (remove them first).
 */
function requireNoFederation(
  current: Client,
  after: { authMethod: AuthMethodName; jwks: PublicJwks | null; jwksUri: string | null },
): void {
  if (current.federatedCredentials.length === 0) return;
  const what =
    after.authMethod !== 'private_key_jwt'
      ? `the method ${after.authMethod}`
      : after.jwks !== null
        ? 'jwks'
        : after.jwksUri !== null
          ? 'jwks_uri'
          : undefined;
  if (what !== undefined)
    throw new ManagementError(
      'client_uses_federation',
      `client ${current.id} authenticates with federated credentials: it cannot have ${what} (remove its federated credentials first)`,
    );
}

/** A new client as the rules make it, but its secret; refusals are collected in `checks`. */
export function checkNewClient(
  input: ClientInput,
  checks: FieldChecks,
  production: boolean,
  allowPrivate: boolean,
): Omit<NewClient, 'secretDigest'> & {
  enabled: boolean;
  dpopBoundAccessTokens: boolean;
  certificateBoundAccessTokens: boolean;
  authMethod: AuthMethodName;
  jwks: PublicJwks | null;
  jwksUri: string | null;
  tlsClientAuth: TlsClientAuth | null;
} {
  const id =
    input.id === undefined ? generateClientId() : checks.run('client_id', () => validateClientId(input.id!));
  const name = checks.run('name', () => validateName(input.name, 'the client'));
  const fields = checkClientFields({ ...input, name: undefined }, checks, production, allowPrivate);
  return {
    authMethod: fields.authMethod ?? 'client_secret_basic',
    jwks: fields.jwks ?? null,
    jwksUri: fields.jwksUri ?? null,
    tlsClientAuth: fields.tlsClientAuth ?? null,
    id,
    name,
    description: fields.description ?? null,
    tokenTtl: fields.tokenTtl ?? null,
    quotaPerMinute: fields.quotaPerMinute ?? null,
    quotaPerDay: fields.quotaPerDay ?? null,
    claims: fields.claims ?? null,
    enabled: input.enabled ?? true,
    dpopBoundAccessTokens: input.dpopBoundAccessTokens ?? false,
    certificateBoundAccessTokens: input.certificateBoundAccessTokens ?? false,
    // Each audience once, in order: as the store keeps them, and as the audit event reports them.
    audiences: [
      ...new Set((input.grants ?? []).map((url) => checks.run('grants', () => validateAudienceUrl(url)))),
    ].sort(),
  };
}

/**
 * Creates a client with a new secret (stored as its digest only), or, for private_key_jwt, with its keys and
 * no secret. A caller that names no method (or a secret one) gets a secret, as the type says.
 */
export function createClient(
  ctx: ManagementContext,
  input: ClientInput & { authMethod?: 'client_secret_basic' | 'client_secret_post' },
): Promise<{ client: Client; secret: string }>;
export function createClient(ctx: ManagementContext, input: ClientInput): Promise<WithSecret>;
export async function createClient(ctx: ManagementContext, input: ClientInput): Promise<WithSecret> {
  if (input.adminScopes !== undefined) {
    // An admin client: granted the built-in admin audience (made if the server has not yet) with these scopes.
    await ensureAdminAudience(ctx);
    const url = adminAudienceUrl(ctx.config);
    input = {
      ...input,
      adminScopes: undefined,
      grants: [...(input.grants ?? []), url],
      scopes: { ...input.scopes, [url]: [...input.adminScopes] },
    };
  }
  const checked = await checkClient(ctx, input);
  return storeCall(() =>
    ctx.store.transaction(async (store) => {
      const { client, audit } = await readyToStore(ctx, checked, (url) => store.findAudience(url));
      return { client: await store.createClient(client, audit), secret: checked.secret };
    }),
  );
}

/** A new client checked as far as it can be without the store, with its secret (none for private_key_jwt). */
export interface CheckedClient {
  readonly input: ClientInput;
  readonly client: ReturnType<typeof checkNewClient>;
  readonly federated: FederatedCredential[];
  readonly secret: string | undefined;
}

/**
 * The checks of a new client that need no store (its fields, its keys, its federated credentials), and its
 * secret: the first half of createClient, for createCheckedClients.
 */
export async function checkClient(ctx: ManagementContext, input: ClientInput): Promise<CheckedClient> {
  if (input.adminScopes !== undefined)
    throw new Error('an admin client is made by createClient (its audience may have to be made first)');
  const checks = new FieldChecks();
  const client = checkNewClient(input, checks, ctx.config.production, ctx.config.jwksAllowPrivate);
  checks.throwFirst();
  await checkAuthKeys(client);
  const federated = await newClientCredentials(ctx, client, input.federatedCredentials);
  // A client of a key or a certificate has no secret at all.
  if (input.secret !== undefined) checkGivenSecret(input.secret, client.authMethod);
  const secret = usesSecrets(client.authMethod) ? (input.secret ?? generateSecret()) : undefined;
  return { input, client, federated, secret };
}

/**
 * Creates many clients checked by checkClient, in one transaction (or the caller's): each as createClient makes
 * it — the same checks of its grants against their audiences, the same rows, audit event and change record —
 * but written together, a few statements for them all, so that a big `apply` holds the write lock briefly.
 */
export async function createCheckedClients(
  ctx: ManagementContext,
  checked: readonly CheckedClient[],
): Promise<void> {
  if (checked.length === 0) return;
  await storeCall(() =>
    ctx.store.transaction(async (store) => {
      // Each audience read once: thousands of clients name the same few.
      const audiences = new Map<string, Promise<Audience | undefined>>();
      const audienceOf = (url: string) => {
        let found = audiences.get(url);
        if (found === undefined) audiences.set(url, (found = store.findAudience(url)));
        return found;
      };
      const ready: { client: NewClient; audit: ChangeAudit }[] = [];
      for (const one of checked) ready.push(await readyToStore(ctx, one, audienceOf));
      await store.createClients(ready);
    }),
  );
}

/** Refuses (invalid_field) a grant's `field` given for an audience the new client is not granted. */
function requireGranted(audiences: readonly string[], url: string, field: string): void {
  if (!audiences.includes(url))
    throw new ManagementError('invalid_field', `${field} is given for ${url}, which is not granted`, field);
}

/**
 * The checks of a new client's grants against their audiences (read in the transaction that writes them), and
 * the client as the store takes it with its audit event.
 */
async function readyToStore(
  ctx: ManagementContext,
  { input, client, federated, secret }: CheckedClient,
  audienceOf: (url: string) => Promise<Audience | undefined>,
): Promise<{ client: NewClient; audit: ChangeAudit }> {
  // Each grant's scopes must be its audience's.
  const scopes: Record<string, string[]> = {};
  for (const [url, asked] of Object.entries(input.scopes ?? {})) {
    requireGranted(client.audiences, url, 'scopes');
    const audience = await audienceOf(url);
    if (!audience) throw new ManagementError('audience_not_found', `audience ${url} is not registered`);
    scopes[url] = checkGrantScopes(audience, asked);
  }
  // A new client granted the admin audience: the caller must hold every scope that grant would hold.
  const adminUrl = adminAudienceUrl(ctx.config);
  if (client.audiences.includes(adminUrl))
    requireHeld(ctx, `a grant of ${adminUrl}`, [], scopes[adminUrl] ?? []);
  const grantClaims: Record<string, Record<string, unknown>> = {};
  for (const [url, claims] of Object.entries(input.grantClaims ?? {})) {
    requireGranted(client.audiences, url, 'claims');
    const checked = field('claims', () => validateClaims(claims));
    if (checked) grantClaims[url] = checked;
  }
  const exchanging = [...new Set(input.grantTokenExchange ?? [])].sort();
  for (const url of exchanging) {
    requireGranted(client.audiences, url, 'token_exchange');
    checkGrantTokenExchange(ctx, url);
  }
  const audit = changeAudit(ctx, 'client.created', client.id, {
    clientId: client.id,
    // Never the secret, nor its digest.
    changes: {
      name: client.name,
      description: client.description,
      enabled: client.enabled,
      token_ttl: client.tokenTtl,
      quota_per_minute: client.quotaPerMinute,
      quota_per_day: client.quotaPerDay,
      claims: client.claims,
      token_endpoint_auth_method: client.authMethod,
      jwks: client.jwks,
      jwks_uri: client.jwksUri,
      dpop_bound_access_tokens: client.dpopBoundAccessTokens,
      ...(client.tlsClientAuth === null
        ? {}
        : { [tlsIdentityField(client.tlsClientAuth.kind)]: client.tlsClientAuth.value }),
      tls_client_certificate_bound_access_tokens: client.certificateBoundAccessTokens,
      ...(federated.length > 0 ? { federated_credentials: federated.map(federatedCredentialJson) } : {}),
      grants: client.audiences.map((audience) => ({
        audience,
        scopes: scopes[audience] ?? [],
        ...(grantClaims[audience] ? { claims: grantClaims[audience] } : {}),
        ...(exchanging.includes(audience) ? { token_exchange: true } : {}),
      })),
    },
  });
  return {
    client: {
      ...client,
      scopes,
      grantClaims,
      grantTokenExchange: exchanging,
      federatedCredentials: federated,
      secretDigest: secret === undefined ? null : digestSecret(secret),
    },
    audit,
  };
}

/** Changes the fields given of a client (null clears a lifetime or a quota); never its secret. */
export async function updateClient(
  ctx: ManagementContext,
  id: string,
  change: ClientFields,
  condition: Precondition = {},
): Promise<Client> {
  const checks = new FieldChecks();
  const patch = checkClientFields(change, checks, ctx.config.production, ctx.config.jwksAllowPrivate);
  checks.throwFirst();
  // Keys go with their method: new inline keys replace a URL and the other way round, and a secret method
  // or tls_client_auth has neither (so a switch needs no clearing by hand).
  if (patch.jwks != null && change.jwksUri === undefined) patch.jwksUri = null;
  if (patch.jwksUri != null && change.jwks === undefined) patch.jwks = null;
  if (
    patch.authMethod !== undefined &&
    (usesSecrets(patch.authMethod) || patch.authMethod === 'tls_client_auth')
  ) {
    patch.jwks ??= null;
    patch.jwksUri ??= null;
  }
  // Only nulls given for tls_client_auth_* fields: they clear the client's value if it is of one of their kinds.
  let clearsTls =
    patch.tlsClientAuth === null ? givenTls(change.tlsIdentity ?? {}).map(([kind]) => kind) : undefined;
  // The tls_client_auth value goes with its method too: a switch to another clears it (one given with the switch
  // stays, to be refused at its field).
  if (patch.authMethod !== undefined && patch.authMethod !== 'tls_client_auth' && !patch.tlsClientAuth) {
    patch.tlsClientAuth = null;
    clearsTls = undefined;
  }
  // Read, compare and write in one transaction: the event's `from` is what was replaced, and a change that
  // changes nothing writes nothing (no event, no updated_at, no change for the caches).
  return changeClient(ctx, id, async (store, current) => {
    checkPrecondition(condition, clientJson(current), `client ${id}`);
    const tls = current.tlsClientAuth;
    if (clearsTls !== undefined && tls !== null && !clearsTls.includes(tls.kind)) delete patch.tlsClientAuth;
    // Claims added to those it has (or to those this change sets), checked whole.
    if (change.addClaims !== undefined) {
      const base = patch.claims !== undefined ? patch.claims : current.claims;
      patch.claims = field('claims', () => validateClaims({ ...base, ...change.addClaims }));
    }
    const patched = patchChanges(current, patch, clientJson, CLIENT_FIELDS);
    if (!patched) return current;
    const { after, changes } = patched;
    // Disabling ends the tokens it has now, for good: enabling it again never revives them (docs/interface.md).
    if (current.enabled && after.enabled === false) {
      patch.revokedBefore = new Date(nowOf(ctx)).toISOString();
      changes.revoked_before = { from: current.revokedBefore, to: patch.revokedBefore };
    }
    if (
      patch.authMethod !== undefined ||
      patch.jwks !== undefined ||
      patch.jwksUri !== undefined ||
      patch.tlsClientAuth !== undefined
    ) {
      await checkAuthKeys(after);
      requireNoFederation(current, after);
    }
    const audit = changeAudit(ctx, 'client.updated', id, { clientId: id, changes });
    // A client that authenticates by key or certificate has no secret that works: its secrets go, for good, in
    // the same write (a secret that came back with a switch to a secret method later would be one an operator
    // thought revoked).
    const secrets =
      patch.authMethod !== undefined && !usesSecrets(patch.authMethod) && current.secrets.length > 0
        ? { delete: current.secrets.map((s) => s.id) }
        : undefined;
    return store.updateClient(id, patch, audit, secrets);
  });
}

export function listClients(ctx: ManagementContext): Promise<Client[]> {
  return storeCall(() => ctx.store.listClients());
}

/**
 * Replaces the client's secret with a new one: the others keep working for `graceSeconds` (0, the default:
 * they stop at once), then expire by themselves on every instance.
 */
export async function rotateSecret(
  ctx: ManagementContext,
  id: string,
  /** `secret`: the new one given (a mounted file's) rather than made here. */
  options: { graceSeconds?: number; secret?: string } = {},
): Promise<{ client: Client; secret: string; secretId: string }> {
  const grace = options.graceSeconds ?? 0;
  const secret = options.secret ?? generateSecret();
  const secretId = newSecretId();
  const audit = changeAudit(ctx, 'client.secret_rotated', id, {
    clientId: id,
    changes: { secret_id: secretId, grace },
  });
  return changeClient(ctx, id, async (store, current) => {
    requireSecretClient(current);
    if (options.secret !== undefined) checkGivenSecret(options.secret, current.authMethod);
    const added = { id: secretId, digest: digestSecret(secret), expiresAt: null };
    const client = await store.changeSecrets(id, addingSecret(current, added, grace, nowOf(ctx)), audit);
    return { client, secret, secretId };
  });
}

/** Refuses (invalid_field `client_secret`) a given secret too weak, or for a method that uses none. */
function checkGivenSecret(secret: string, authMethod: AuthMethodName): void {
  field('client_secret', () => {
    if (!usesSecrets(authMethod))
      throw new ValidationError(`a client authenticating with ${authMethod} has no secret`);
    const problem = givenSecretProblem(secret);
    if (problem !== undefined) throw new ValidationError(problem);
  });
}

/** Whether `secret` is one of the client's live secrets (compared as digests, in constant time). */
export function holdsSecret(client: Client, secret: string, now: number): boolean {
  const at = new Date(now).toISOString();
  return matchesDigest(
    secret,
    client.secrets.filter((s) => s.expiresAt === null || s.expiresAt > at).map((s) => s.digest),
  );
}

/** Sets the quotas given (a number, or null for none); one left undefined keeps its value. */
export function setQuota(
  ctx: ManagementContext,
  id: string,
  change: { perMinute?: number | null; perDay?: number | null },
): Promise<Client> {
  return updateClient(ctx, id, { quotaPerMinute: change.perMinute, quotaPerDay: change.perDay });
}

export function setEnabled(ctx: ManagementContext, id: string, enabled: boolean): Promise<Client> {
  return updateClient(ctx, id, { enabled });
}

/**
 * Makes every token the client holds inactive at once, on every instance within a second: those issued at or
 * before this moment, to the second (docs/interface.md, "Revocation and introspection"). Audited as
 * client.tokens_revoked; the client's view shows the moment as revoked_before.
 */
export function revokeClientTokens(ctx: ManagementContext, id: string): Promise<Client> {
  return changeClient(ctx, id, async (store, client) => {
    const at = new Date(nowOf(ctx)).toISOString();
    const audit = changeAudit(ctx, 'client.tokens_revoked', id, {
      clientId: id,
      changes: { revoked_before: { from: client.revokedBefore, to: at } },
    });
    return store.updateClient(id, { revokedBefore: at }, audit);
  });
}

/**
 * Deletes a client and its grants, and takes it off the resource servers of every audience that names it (in the
 * same transaction: an audience never names a client that does not exist). The event says which audiences those
 * were: `resource_server_of: { from: [identifiers], to: [] }`.
 */
export async function deleteClient(
  ctx: ManagementContext,
  id: string,
  condition: Precondition = {},
): Promise<void> {
  return changeClient(ctx, id, async (store, client) => {
    checkPrecondition(condition, clientJson(client), `client ${id}`);
    const served = (await store.listAudiences())
      .filter((a) => a.resourceServerClientIds.includes(id))
      .map((a) => a.url);
    const audit = changeAudit(ctx, 'client.deleted', id, {
      clientId: id,
      ...(served.length > 0 ? { changes: { resource_server_of: { from: served, to: [] } } } : {}),
    });
    await store.deleteClient(id, audit);
  });
}

/**
 * Refuses a change of a client whose admin scopes the caller does not all hold, before the request's body is
 * read (the admin API asks first: a refused change is a 403 even when its body is also invalid). A client that
 * does not exist is left to the operation, which says so.
 */
export async function authorizeChange(ctx: ManagementContext, id: string): Promise<void> {
  const client = await storeCall(() => ctx.store.findClient(id));
  if (client) requireClientHeld(ctx, client);
}

/** The longest text a client search takes. */
const MAX_SEARCH_LENGTH = 200;

/**
 * A page of clients in client_id order: those after `after`, at most `limit`; with `search`, only those whose
 * client_id or name contains it (ASCII letters in any case; %, _ and \ are plain characters).
 */
export function listClientsPage(
  ctx: ManagementContext,
  after: string | null,
  limit: number,
  search?: string,
): Promise<Client[]> {
  if (search !== undefined && search.length > MAX_SEARCH_LENGTH)
    throw new ManagementError(
      'invalid_field',
      `search must be at most ${MAX_SEARCH_LENGTH} characters`,
      'search',
    );
  return storeCall(() => ctx.store.listClientsPage(after, limit, search));
}

/** Every client matching `search` (see listClientsPage), in client_id order, a page at a time from the store. */
export async function searchClients(ctx: ManagementContext, search: string): Promise<Client[]> {
  const found: Client[] = [];
  for (let after: string | null = null; ;) {
    const page = await listClientsPage(ctx, after, 1000, search);
    found.push(...page);
    if (page.length < 1000) return found;
    after = page[page.length - 1]!.id;
  }
}
