import type { Audience, AudiencePatch, ChangeAudit, GrantScopes, Store } from '../store/types.js';

/**
 * Writes a change of an audience, `current` as read in the transaction that writes it. A grant holds only
 * scopes its audience defines (grants.ts checkGrantScopes): new scopes take those it no longer defines from
 * every grant of it, in the same write. Used by every change of an audience, the server's own (builtin.ts).
 */
export async function writeAudience(
  store: Store,
  current: Audience,
  patch: AudiencePatch,
  audit: ChangeAudit,
): Promise<Audience> {
  const grants: GrantScopes[] = [];
  if (patch.scopes !== undefined) {
    const defined = new Set(patch.scopes.map((s) => s.name));
    for (const grant of await store.listGrantsOf(current.url)) {
      const kept = grant.scopes.filter((s) => defined.has(s));
      if (kept.length < grant.scopes.length) grants.push({ clientId: grant.clientId, scopes: kept });
    }
  }
  return store.updateAudience(current.url, patch, audit, grants);
}
