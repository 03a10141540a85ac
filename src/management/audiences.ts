import {
  ValidationError,
  validateClientId,
  validateAudienceUrl,
  validateName,
  validateSigningAlg,
  validateAudienceScopes,
  validateScopeName,
  validateTokenTtl,
} from '../domain/validate.js';
import { newAudienceId } from '../store/migrations.js';
import type { Audience, AudiencePatch, NewAudience, Store } from '../store/types.js';
import { writeAudience } from './audience-scopes.js';
import { assertNotBuiltIn } from './builtin.js';
import {
  changeAudit,
  checkPrecondition,
  patchChanges,
  type ManagementContext,
  type Precondition,
} from './context.js';
import { isTokenProfile, TOKEN_PROFILES } from '../domain/token-profiles.js';
import { AUDIENCE_FIELDS, audienceJson } from './views.js';
import { FieldChecks, ManagementError, storeCall } from './errors.js';

/** The fields of an audience but its URL: undefined leaves one as it is (a change) or unset (a new one). */
export interface AudienceFields {
  name?: string | null;
  tokenTtl?: number | null;
  signingAlg?: string | null;
  /** Every scope it defines (a change replaces the list; scopes left out are taken from its grants too). */
  scopes?: { name: string; description?: string | null }[];
  /**
   * Its resource servers (`resource_server_client_ids`): the clients that receive its tokens, and so may exchange
   * them (docs/interface.md, "Token exchange"). Each an existing client id; the whole list ([] clears it).
   */
  resourceServerClientIds?: readonly string[];
  /** Its token profile (domain/token-profiles.ts): `rfc9068` (or null, the default), `auth0`, `keycloak`. */
  tokenProfile?: string | null;
}

/** The most resource servers an audience names. */
export const MAX_RESOURCE_SERVERS = 100;

/** An audience's resource servers as the rules make them: client ids (their syntax), each once, sorted. */
function checkResourceServerIds(ids: readonly string[], checks: FieldChecks): string[] | undefined {
  const before = checks.errors.length;
  if (ids.length > MAX_RESOURCE_SERVERS)
    checks.run('resource_server_client_ids', () => {
      throw new ValidationError(`an audience names at most ${MAX_RESOURCE_SERVERS} resource servers`);
    });
  else ids.forEach((id, i) => checks.run(`resource_server_client_ids/${i}`, () => validateClientId(id)));
  // Each once, sorted, as grant scopes are: naming a client twice is naming it.
  return checks.errors.length === before ? [...new Set(ids)].sort() : undefined;
}

/**
 * Refuses (invalid_field, naming its place) a resource server that is not an existing client, read in the
 * transaction that writes the audience. `ids` as given (their places), checked by checkResourceServerIds.
 */
async function requireResourceServers(store: Store, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return;
  const found = new Set((await store.findClients([...new Set(ids)])).map((c) => c.id));
  const missing = ids.findIndex((id) => !found.has(id));
  if (missing >= 0)
    throw new ManagementError(
      'invalid_field',
      `client ${ids[missing]} does not exist: an audience's resource servers are existing clients`,
      `resource_server_client_ids/${missing}`,
    );
}

export interface AudienceInput extends AudienceFields {
  url: string;
}

/** Checks the fields given (null clears one), each by its rule; refusals are collected in `checks`. */
function checkAudienceFields(input: AudienceFields, checks: FieldChecks): AudiencePatch {
  const patch: AudiencePatch = {};
  if (input.name !== undefined)
    patch.name =
      input.name === null ? null : checks.run('name', () => validateName(input.name!, 'the audience'));
  if (input.tokenTtl !== undefined)
    patch.tokenTtl =
      input.tokenTtl === null ? null : checks.run('token_ttl', () => validateTokenTtl(input.tokenTtl!));
  if (input.signingAlg !== undefined)
    patch.signingAlg =
      input.signingAlg === null
        ? null
        : checks.run('signing_alg', () => validateSigningAlg(input.signingAlg!));
  if (input.scopes !== undefined) {
    // Each scope's name first, so that a refusal names its place (`scopes/1/name`); then the list's own rules.
    const before = checks.errors.length;
    input.scopes.forEach((scope, i) => checks.run(`scopes/${i}/name`, () => validateScopeName(scope.name)));
    if (checks.errors.length === before)
      patch.scopes = checks.run('scopes', () => validateAudienceScopes(input.scopes!));
  }
  if (input.resourceServerClientIds !== undefined) {
    const ids = checkResourceServerIds(input.resourceServerClientIds, checks);
    if (ids !== undefined) patch.resourceServerClientIds = ids;
  }
  if (input.tokenProfile !== undefined) {
    const profile = input.tokenProfile;
    const checked = checks.run('token_profile', () => {
      if (profile !== null && !isTokenProfile(profile))
        throw new ValidationError(`token_profile must be one of ${TOKEN_PROFILES.join(', ')}`);
      return profile === null || profile === 'rfc9068' ? null : profile;
    });
    if (checked !== undefined) patch.tokenProfile = checked;
  }
  return patch;
}

/** A new audience as the rules make it (URL checked, names trimmed); refusals are collected in `checks`. */
export function checkNewAudience(input: AudienceInput, checks: FieldChecks): NewAudience {
  const url = checks.run('identifier', () => validateAudienceUrl(input.url));
  const fields = checkAudienceFields(input, checks);
  return {
    url,
    name: fields.name ?? null,
    tokenTtl: fields.tokenTtl ?? null,
    signingAlg: fields.signingAlg ?? null,
    scopes: fields.scopes ?? [],
    resourceServerClientIds: fields.resourceServerClientIds ?? [],
    tokenProfile: fields.tokenProfile ?? null,
  };
}

/** Registers an audience; every field is checked here, whatever face it came from. */
export async function addAudience(ctx: ManagementContext, input: AudienceInput): Promise<Audience> {
  const checks = new FieldChecks();
  const audience = { ...checkNewAudience(input, checks), id: newAudienceId() };
  checks.throwFirst();
  assertNotBuiltIn(ctx, audience.url);
  const resourceServers = audience.resourceServerClientIds ?? [];
  const audit = changeAudit(ctx, 'audience.created', audience.id, {
    audience: audience.url,
    changes: {
      name: audience.name,
      token_ttl: audience.tokenTtl,
      signing_alg: audience.signingAlg,
      scopes: audience.scopes,
      ...(resourceServers.length > 0 ? { resource_server_client_ids: resourceServers } : {}),
      ...(audience.tokenProfile === null ? {} : { token_profile: audience.tokenProfile }),
    },
  });
  return storeCall(() =>
    ctx.store.transaction(async (store) => {
      await requireResourceServers(store, input.resourceServerClientIds ?? []);
      return store.addAudience(audience, audit);
    }),
  );
}

/** Changes the fields given of an audience (null clears one). */
export async function updateAudience(
  ctx: ManagementContext,
  url: string,
  change: AudienceFields,
  condition: Precondition = {},
): Promise<Audience> {
  const checks = new FieldChecks();
  const patch = checkAudienceFields(change, checks);
  checks.throwFirst();
  assertNotBuiltIn(ctx, url);
  // Read, compare and write in one transaction; a change that changes nothing writes nothing.
  return storeCall(() =>
    ctx.store.transaction(async (store) => {
      const current = await getAudience({ ...ctx, store }, url);
      checkPrecondition(condition, audienceJson(current), `audience ${url}`);
      await requireResourceServers(store, change.resourceServerClientIds ?? []);
      const patched = patchChanges(current, patch, audienceJson, AUDIENCE_FIELDS);
      if (!patched) return current;
      const { changes } = patched;
      const audit = changeAudit(ctx, 'audience.updated', current.id, { audience: url, changes });
      return writeAudience(store, current, patch, audit);
    }),
  );
}

export function listAudiences(ctx: ManagementContext): Promise<Audience[]> {
  return storeCall(() => ctx.store.listAudiences());
}

export async function getAudience(ctx: ManagementContext, url: string): Promise<Audience> {
  const found = await storeCall(() => ctx.store.findAudience(url));
  if (!found) throw new ManagementError('audience_not_found', `audience ${url} is not registered`);
  return found;
}

/** An audience by its server-made id (the admin API's paths). */
export async function getAudienceById(ctx: ManagementContext, id: string): Promise<Audience> {
  const found = await storeCall(() => ctx.store.findAudienceById(id));
  if (!found) throw new ManagementError('audience_not_found', `audience ${id} does not exist`);
  return found;
}

/** Removes an audience and every grant of it. */
export async function removeAudience(
  ctx: ManagementContext,
  url: string,
  condition: Precondition = {},
): Promise<void> {
  assertNotBuiltIn(ctx, url);
  return storeCall(() =>
    ctx.store.transaction(async (store) => {
      const current = await getAudience({ ...ctx, store }, url);
      checkPrecondition(condition, audienceJson(current), `audience ${url}`);
      const audit = changeAudit(ctx, 'audience.deleted', current.id, { audience: url });
      await store.removeAudience(url, audit);
    }),
  );
}

/** Adds a scope to an audience, or changes its description. */
export async function putScope(
  ctx: ManagementContext,
  url: string,
  scope: { name: string; description?: string | null },
): Promise<Audience> {
  return storeCall(() =>
    ctx.store.transaction(async (store) => {
      const tx = { ...ctx, store };
      const current = await getAudience(tx, url);
      const others = current.scopes.filter((s) => s.name !== scope.name);
      return updateAudience(tx, url, { scopes: [...others, scope] });
    }),
  );
}

/** Removes scopes from an audience, and from every grant of it. */
export async function removeScopes(ctx: ManagementContext, url: string, names: string[]): Promise<Audience> {
  return storeCall(() =>
    ctx.store.transaction(async (store) => {
      const tx = { ...ctx, store };
      const current = await getAudience(tx, url);
      const missing = names.find((n) => !current.scopes.some((s) => s.name === n));
      if (missing !== undefined)
        throw new ManagementError(
          'invalid_field',
          `audience ${url} defines no scope ${JSON.stringify(missing)}`,
          'scopes',
        );
      return updateAudience(tx, url, { scopes: current.scopes.filter((s) => !names.includes(s.name)) });
    }),
  );
}
