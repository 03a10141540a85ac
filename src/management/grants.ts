import { validateAudienceUrl, validateClaims } from '../domain/validate.js';
import type { Audience, Client, Grant } from '../store/types.js';
import {
  asAuditChanges,
  changeAudit,
  changedFields,
  checkPrecondition,
  type ManagementContext,
  type Precondition,
} from './context.js';
import { field, ManagementError, storeCall } from './errors.js';
import { adminScopesIn, adminScopesOf, requireHeld } from './authority.js';
import { adminAudienceUrl } from './builtin.js';
import { grantJson } from './views.js';

/** The audience of a grant, checked by its rule (field `audience`). */
export const checkGrantAudience = (audience: string): string =>
  field('audience', () => validateAudienceUrl(audience));

/** A grant's scopes: each one the audience defines (field `scopes`); each once, sorted. */
export function checkGrantScopes(audience: Audience, scopes: readonly string[]): string[] {
  const defined = new Set(audience.scopes.map((s) => s.name));
  for (const scope of scopes)
    if (!defined.has(scope))
      throw new ManagementError(
        'invalid_field',
        `audience ${audience.url} defines no scope ${JSON.stringify(scope)}`,
        'scopes',
      );
  return [...new Set(scopes)].sort();
}

/**
 * Refuses token_exchange on a grant of the admin audience: a token is exchanged only for one a resource server
 * of Tessera's passes on, and the admin API is not one (an exchanged token never reaches it).
 */
export function checkGrantTokenExchange(ctx: Pick<ManagementContext, 'config'>, url: string): void {
  if (url === adminAudienceUrl(ctx.config))
    throw new ManagementError(
      'invalid_field',
      `a grant of ${url} (Tessera's admin API) cannot allow token exchange: exchanged tokens never reach the admin API`,
      'token_exchange',
    );
}

/** Allows a client an audience. False if it already had it. */
export async function addGrant(ctx: ManagementContext, clientId: string, audience: string): Promise<boolean> {
  const url = checkGrantAudience(audience);
  const audit = changeAudit(ctx, 'grant.created', clientId, { clientId, audience: url });
  return storeCall(() =>
    ctx.store.transaction(async (store) => {
      const client = await store.findClient(clientId);
      // A new grant has no scopes; a grant the client has stays as it is.
      if (client) requireGrantHeld(ctx, client, url, grantOf(client, url)?.scopes ?? []);
      return store.addGrant(clientId, url, audit);
    }),
  );
}

/**
 * The rule for a change of a client's grant of `url` to `scopes` (authority.ts): every admin scope the client
 * holds, and for the admin audience every scope the grant would hold.
 */
function requireGrantHeld(ctx: ManagementContext, client: Client, url: string, scopes: readonly string[]) {
  const current = adminScopesOf(ctx, client);
  const admin = url === adminAudienceUrl(ctx.config);
  requireHeld(
    ctx,
    admin ? `a grant of ${url}` : `a change of client ${client.id}`,
    current,
    admin ? scopes : current,
  );
}

/**
 * Refuses a change of a grant (a PUT with these scopes as sent, a DELETE with none) that the rule does not allow,
 * before the request's body is validated: a refused change is a 403 even when its body is also invalid. A client
 * or audience that does not exist is left to the operation, which says so.
 */
export async function authorizeGrant(
  ctx: ManagementContext,
  clientId: string,
  audienceId: string,
  scopes: unknown,
): Promise<void> {
  const [client, audience] = await storeCall(() =>
    Promise.all([ctx.store.findClient(clientId), ctx.store.findAudienceById(audienceId)]),
  );
  if (client && audience)
    requireGrantHeld(ctx, client, audience.url, adminScopesIn(Array.isArray(scopes) ? scopes : []));
}

/** The fields of a grant an operator sets, in the audit trail's names. */
const grantFields = (grant: Grant) => ({
  scopes: grant.scopes,
  claims: grant.claims,
  token_exchange: grant.tokenExchange,
});

/** A client's grant of an audience, if it has one. */
export const grantOf = (client: Client, url: string): Grant | undefined =>
  client.grants.find((g) => g.audience === url);

/**
 * What a grant is set to: its scopes, its claims, whether it allows token exchange; one left undefined stays as
 * it is (none, or false, for a new grant).
 */
export interface GrantInput {
  scopes?: readonly string[];
  claims?: Record<string, unknown> | null;
  /** `token_exchange` (docs/interface.md, "Token exchange"): never true on a grant of the admin audience. */
  tokenExchange?: boolean;
}

/**
 * Grants a client an audience, or changes the grant (the admin API's PUT, `grant set-scopes`, apply).
 * Returns the grant and whether it was created; a grant that already is so writes nothing.
 */
export async function putGrant(
  ctx: ManagementContext,
  clientId: string,
  audience: Audience,
  input: GrantInput,
  condition: Precondition = {},
): Promise<{ grant: Grant; created: boolean }> {
  const scopes = input.scopes === undefined ? undefined : checkGrantScopes(audience, input.scopes);
  const claims =
    input.claims === undefined || input.claims === null
      ? input.claims
      : field('claims', () => validateClaims(input.claims));
  if (input.tokenExchange === true) checkGrantTokenExchange(ctx, audience.url);
  return storeCall(() =>
    ctx.store.transaction(async (store) => {
      const client = await store.findClient(clientId);
      if (!client) throw new ManagementError('client_not_found', `client ${clientId} does not exist`);
      const current = grantOf(client, audience.url);
      const grant: Grant = {
        audience: audience.url,
        scopes: scopes ?? current?.scopes ?? [],
        claims: claims === undefined ? (current?.claims ?? null) : claims,
        tokenExchange: input.tokenExchange ?? current?.tokenExchange ?? false,
      };
      requireGrantHeld(ctx, client, audience.url, grant.scopes);
      // If-Match on a grant that does not exist fails, `*` included (RFC 9110 §13.1.1).
      if (current) checkPrecondition(condition, grantJson(clientId, audience, current), 'the grant');
      else if (condition.ifMatch !== undefined)
        throw new ManagementError('precondition_failed', 'the grant does not exist: If-Match fails');
      const changed = changedFields(
        ['scopes', 'claims', 'token_exchange'],
        current ? grantFields(current) : {},
        grantFields(grant),
      );
      if (current && changed.length === 0) return { grant, created: false };
      const audit = changeAudit(ctx, current ? 'grant.updated' : 'grant.created', clientId, {
        clientId,
        audience: audience.url,
        changes: current
          ? asAuditChanges(changed)
          : {
              scopes: grant.scopes,
              ...(grant.claims ? { claims: grant.claims } : {}),
              ...(grant.tokenExchange ? { token_exchange: true } : {}),
            },
      });
      const created = await store.putGrant(
        clientId,
        audience.url,
        grant.scopes,
        audit,
        grant.claims,
        grant.tokenExchange,
      );
      return { grant, created };
    }),
  );
}

/** Withdraws an audience from a client. */
export async function removeGrant(
  ctx: ManagementContext,
  clientId: string,
  audience: string,
  condition: Precondition = {},
): Promise<void> {
  const audit = changeAudit(ctx, 'grant.deleted', clientId, { clientId, audience });
  return storeCall(() =>
    ctx.store.transaction(async (store) => {
      const client = await store.findClient(clientId);
      // As PUT on the same path answers: no client, client_not_found (not that it has no such grant).
      if (!client) throw new ManagementError('client_not_found', `client ${clientId} does not exist`);
      requireGrantHeld(ctx, client, audience, []);
      if (condition.ifMatch !== undefined) {
        const current = grantOf(client, audience);
        const found = current && (await store.findAudience(audience));
        if (current && found) checkPrecondition(condition, grantJson(clientId, found, current), 'the grant');
      }
      await store.removeGrant(clientId, audience, audit);
    }),
  );
}

/** Grants a client an audience (by its URL), or changes the grant: the CLI's `grant set-scopes/set-claims`. */
export async function setGrant(
  ctx: ManagementContext,
  clientId: string,
  url: string,
  input: GrantInput,
): Promise<{ grant: Grant; created: boolean }> {
  const audience = await storeCall(() => ctx.store.findAudience(checkGrantAudience(url)));
  if (!audience) throw new ManagementError('audience_not_found', `audience ${url} is not registered`);
  return putGrant(ctx, clientId, audience, input);
}

/** Grants a client an audience (by its URL) with exactly these scopes, keeping its claims. */
export const setGrantScopes = (
  ctx: ManagementContext,
  clientId: string,
  url: string,
  scopes: readonly string[],
) => setGrant(ctx, clientId, url, { scopes });
