import type { Config } from '../config/index.js';
import { INTROSPECTION_SCOPE } from '../domain/revocation.js';
import { newAudienceId } from '../store/migrations.js';
import type { Audience, AudienceScope, OperatorRole } from '../store/types.js';
import { writeAudience } from './audience-scopes.js';
import { changeAudit, type ManagementContext } from './context.js';
import { ManagementError, storeCall } from './errors.js';

/**
 * The admin API's own audience (docs/management.md): `<issuer>/admin/v1`, with one scope per kind of access. An
 * admin client is an ordinary client granted this audience with some of these scopes; its tokens come from
 * /oauth/token like any other, and the admin API accepts them.
 */
export const ADMIN_SCOPES = [
  'audiences:read',
  'audiences:write',
  'clients:read',
  'clients:write',
  'keys:read',
  'keys:write',
  'audit:read',
  'operators:read',
  'operators:write',
  INTROSPECTION_SCOPE,
] as const;
export type AdminScope = (typeof ADMIN_SCOPES)[number];

/**
 * What a console operator may do, as admin scopes (the admin API checks a session as it checks a token): an
 * admin everything; a viewer reads everything but the operators (docs/management.md: a viewer changes nothing, and
 * the operators page is for admins).
 */
export const ROLE_SCOPES: Record<OperatorRole, readonly AdminScope[]> = {
  admin: ADMIN_SCOPES,
  viewer: ADMIN_SCOPES.filter((scope) => scope.endsWith(':read') && scope !== 'operators:read'),
};

const DESCRIPTIONS: Record<AdminScope, string> = {
  'audiences:read': 'read audiences',
  'audiences:write': 'create, change and delete audiences',
  'clients:read': 'read clients, their secrets (never the values) and grants',
  'clients:write': 'create, change and delete clients, secrets and grants',
  'keys:read': 'read signing keys',
  'keys:write': 'rotate and retire signing keys',
  'audit:read': 'read the audit trail and the token counts',
  'operators:read': 'read the console operators',
  'operators:write': 'add, change, reset and remove console operators',
  'tokens:introspect':
    "introspect this server's access tokens (POST /oauth/introspect): for resource servers",
};

export const ADMIN_AUDIENCE_SCOPES: AudienceScope[] = [...ADMIN_SCOPES]
  .sort()
  .map((name) => ({ name, description: DESCRIPTIONS[name] }));

export const adminAudienceUrl = (config: Pick<Config, 'issuer'>): string => `${config.issuer}/admin/v1`;

export const isBuiltInAudience = (ctx: ManagementContext, url: string): boolean =>
  url === adminAudienceUrl(ctx.config);

/** Refuses a change to the built-in audience: it is Tessera's, made and kept by the server. */
export function assertNotBuiltIn(ctx: ManagementContext, url: string): void {
  if (isBuiltInAudience(ctx, url))
    throw new ManagementError(
      'audience_builtin',
      `audience ${url} is Tessera's admin API: it cannot be changed or deleted`,
    );
}

/**
 * Makes sure the admin audience is registered with its scopes (the server does at start; `client create
 * --admin` and `apply` when they grant it). Idempotent: a store that has it as it should be is not written.
 */
export async function ensureAdminAudience(ctx: ManagementContext): Promise<Audience> {
  try {
    return await makeAdminAudience(ctx);
  } catch (error) {
    // Another process made it between our read and our write (two instances starting at once): read again.
    if (error instanceof ManagementError && error.code === 'audience_exists') return makeAdminAudience(ctx);
    throw error;
  }
}

function makeAdminAudience(ctx: ManagementContext): Promise<Audience> {
  const url = adminAudienceUrl(ctx.config);
  const wanted = JSON.stringify(ADMIN_AUDIENCE_SCOPES);
  return storeCall(() =>
    ctx.store.transaction(async (store) => {
      const found = await store.findAudience(url);
      if (found && JSON.stringify(found.scopes) === wanted) return found;
      if (found)
        return writeAudience(
          store,
          found,
          { scopes: ADMIN_AUDIENCE_SCOPES },
          changeAudit(ctx, 'audience.updated', found.id, {
            audience: url,
            changes: { scopes: { from: found.scopes, to: ADMIN_AUDIENCE_SCOPES } },
          }),
        );
      const audience = {
        id: newAudienceId(),
        url,
        name: 'Tessera admin API',
        tokenTtl: null,
        signingAlg: null,
        scopes: ADMIN_AUDIENCE_SCOPES,
      };
      return store.addAudience(
        audience,
        changeAudit(ctx, 'audience.created', audience.id, {
          audience: url,
          changes: { name: audience.name, scopes: ADMIN_SCOPES },
        }),
      );
    }),
  );
}
