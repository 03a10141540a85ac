import { invalidTarget } from '../errors.js';
import { present } from '../token-types.js';
import { requestedAudience, scopeOf, type GrantClaims, type GrantHandler } from './grant.js';

/**
 * The client credentials grant (RFC 6749 §4.4): the client asks for a token of its own for an audience granted
 * to it. Steps, after authentication: resolve the audience (invalid_request without one, invalid_target unknown or
 * not granted), check the scopes (invalid_scope), and the claims, the client's own.
 */
export const clientCredentials: GrantHandler = (params, client, deps) => {
  const audience = deps.findAudience(requestedAudience(params));
  if (!audience) throw invalidTarget('the requested audience is not registered');
  const granted = client.grants.get(audience.url);
  if (!granted) throw invalidTarget('the requested audience is not granted to this client');
  const scope = scopeOf(granted, present(params.scope));

  const ttl = client.tokenTtl ?? audience.tokenTtl ?? deps.defaultTtl;
  const iat = Math.floor(deps.now() / 1000);
  // RFC 9068 §2.2: iss, exp, aud, sub, client_id, iat, jti. For client credentials, sub is the client.
  const claims: GrantClaims = {
    iss: deps.issuer,
    sub: client.id,
    aud: audience.url,
    client_id: client.id,
    iat,
    exp: iat + ttl,
    jti: deps.newJti(),
  };
  if (scope !== undefined) claims.scope = scope;
  return { claims, audience, grant: granted, type: 'token.issued' };
};
