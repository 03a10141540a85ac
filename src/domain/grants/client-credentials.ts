import { present } from '../token-request.js';
import {
  accessTokenClaims,
  grantedAudience,
  requestedAudience,
  scopeOf,
  type GrantHandler,
} from './grant.js';

/**
 * The client credentials grant (RFC 6749 §4.4): the client asks for a token of its own for an audience granted
 * to it. Steps, after authentication: resolve the audience (invalid_request without one, invalid_target unknown or
 * not granted), check the scopes (invalid_scope), and the claims, the client's own.
 */
export const clientCredentials: GrantHandler = (params, client, deps) => {
  const { audience, granted } = grantedAudience(requestedAudience(params), client, deps);
  const scope = scopeOf(granted, present(params.scope));
  // For client credentials, sub is the client.
  const claims = accessTokenClaims(deps, client, audience, client.id);
  if (scope !== undefined) claims.scope = scope;
  return { claims, audience, grant: granted, type: 'token.issued' };
};
