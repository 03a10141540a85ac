/**
 * `tessera export`: the store as a file (everything but secrets). The entries written here are also what the
 * plan compares a file with, so that an exported file plans no change.
 */
import type { Audience, Client } from '../../store/types.js';
import { isBuiltInAudience } from '../builtin.js';
import type { ManagementContext } from '../context.js';
import { storeCall } from '../errors.js';
import {
  byCodeUnit,
  scopeEntries,
  type AudienceEntry,
  type ClientEntry,
  type ConfigFile,
  type GrantEntry,
} from './file.js';

/** An audience as a file has it: a null field is left out (it is the default). */
export function audienceEntry(a: Audience): AudienceEntry {
  return {
    identifier: a.url,
    ...(a.name === null ? {} : { name: a.name }),
    ...(a.tokenTtl === null ? {} : { token_ttl: a.tokenTtl }),
    ...(a.signingAlg === null ? {} : { signing_alg: a.signingAlg }),
    ...(a.scopes.length === 0 ? {} : { scopes: scopeEntries(a.scopes) }),
  };
}

/** A grant as a file has it: no scopes or claims when it has none. */
const grantEntry = (g: Client['grants'][number]): GrantEntry => ({
  audience: g.audience,
  ...(g.scopes.length === 0 ? {} : { scopes: g.scopes }),
  ...(g.claims === null ? {} : { claims: g.claims }),
});

/** A client as a file has it, its grants by audience: a null field and the default auth method left out. */
export function clientEntry(c: Client): ClientEntry {
  return {
    client_id: c.id,
    name: c.name,
    ...(c.description === null ? {} : { description: c.description }),
    enabled: c.enabled,
    ...(c.tokenTtl === null ? {} : { token_ttl: c.tokenTtl }),
    ...(c.quotaPerMinute === null ? {} : { quota_per_minute: c.quotaPerMinute }),
    ...(c.quotaPerDay === null ? {} : { quota_per_day: c.quotaPerDay }),
    ...(c.claims === null ? {} : { claims: c.claims }),
    ...(c.authMethod === 'client_secret_basic' ? {} : { token_endpoint_auth_method: c.authMethod }),
    ...(c.jwks === null ? {} : { jwks: c.jwks }),
    ...(c.jwksUri === null ? {} : { jwks_uri: c.jwksUri }),
    ...(c.dpopBoundAccessTokens ? { dpop_bound_access_tokens: true } : {}),
    grants: [...c.grants].sort((a, b) => byCodeUnit(a.audience, b.audience)).map(grantEntry),
  };
}

/**
 * The store as a file (everything but secrets), in a stable order: audiences by identifier, clients by
 * client_id, grants by audience. A null field is left out (it is the default); `enabled` and `grants` are
 * always written.
 */
export async function exportConfig(ctx: ManagementContext): Promise<ConfigFile> {
  const [audiences, clients] = await storeCall(() =>
    Promise.all([ctx.store.listAudiences(), ctx.store.listClients()]),
  );
  // The built-in admin audience is the server's, not configuration: its grants are exported, it is not.
  return {
    audiences: audiences
      .filter((a) => !isBuiltInAudience(ctx, a.url))
      .sort((a, b) => byCodeUnit(a.url, b.url))
      .map(audienceEntry),
    clients: [...clients].sort((a, b) => byCodeUnit(a.id, b.id)).map(clientEntry),
  };
}
