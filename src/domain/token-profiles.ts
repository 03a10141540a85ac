/*
 * Token profiles (docs/management.md, "Moving in"; INTERFACE.md's claims): an audience's choice of the claims its
 * tokens carry beyond RFC 9068's, so that resource servers written for another server keep working with nothing
 * changed but the issuer and the key set's URL.
 *
 * - `rfc9068` (the default): the claims of INTERFACE.md, nothing more.
 * - `auth0`: `sub` is `<client_id>@clients`, and `azp` (the client id), `gty: "client-credentials"` and
 *   `permissions` (the token's scopes as an array) are added, as Auth0's machine-to-machine tokens have them.
 * - `keycloak`: `azp` (the client id), `typ: "Bearer"`, `preferred_username` (`service-account-<client_id>`) and
 *   `clientId` are added, as Keycloak's service-account tokens have them.
 *
 * Every reserved claim name stays reserved for custom claims; a custom claim named like one of a profile's own
 * (gty, permissions, preferred_username, clientId) is the client's choice, and the profile's is then left out.
 */

export const TOKEN_PROFILES = ['rfc9068', 'auth0', 'keycloak'] as const;
export type TokenProfile = (typeof TOKEN_PROFILES)[number];

export const isTokenProfile = (value: unknown): value is TokenProfile =>
  typeof value === 'string' && (TOKEN_PROFILES as readonly string[]).includes(value);

/** The claims a profile adds that custom claims may also name (the others are reserved). */
export const PROFILE_CLAIMS = ['gty', 'permissions', 'preferred_username', 'clientId'] as const;

/** What a profile reads of the token and writes into its claims. */
interface ProfiledClaims {
  sub: string;
  client_id: string;
  scope?: string | undefined;
  [claim: string]: unknown;
}

/**
 * Adds the profile's claims to a token's (in place), after the registered ones; `custom`: the names of the token's
 * custom claims that a profile's own would repeat (KnownGrant.profileClaimsTaken), which are then left out.
 */
export function applyTokenProfile(
  profile: Exclude<TokenProfile, 'rfc9068'>,
  claims: ProfiledClaims,
  custom: ReadonlySet<string> | undefined,
): void {
  const clientId = claims.client_id;
  claims.azp = clientId;
  if (profile === 'auth0') {
    // An exchanged token's subject may be an Auth0-profiled token's already.
    if (!claims.sub.endsWith('@clients')) claims.sub = `${claims.sub}@clients`;
    if (!custom?.has('gty')) claims.gty = 'client-credentials';
    if (!custom?.has('permissions'))
      claims.permissions = claims.scope === undefined ? [] : claims.scope.split(' ');
    return;
  }
  claims.typ = 'Bearer';
  if (!custom?.has('preferred_username')) claims.preferred_username = `service-account-${clientId}`;
  if (!custom?.has('clientId')) claims.clientId = clientId;
}
