/*
 * Token profiles (docs/management.md, "Moving in"; INTERFACE.md's claims): an audience's choice of the claims its
 * tokens carry beyond RFC 9068's, so that resource servers written for another server keep working with nothing
 * changed but the issuer and the key set's URL.
 *
 * - `rfc9068` (the default): the claims of INTERFACE.md, nothing more.
 * - `auth0`: `sub` is `<client_id>@clients`, and `azp` (the client id), `gty: "client-credentials"` and
 *   `permissions` (the token's scopes as an array) are added, as Auth0's machine-to-machine tokens have them.
 * - `keycloak`: `azp` (the client id), `typ: "Bearer"`, `preferred_username` (`service-account-<client_id>`) and
 *   `clientId` are added, as Keycloak's service-account tokens have them (of an exchanged token: its subject's, the
 *   original caller's service account, as Keycloak's exchange keeps the subject's; `azp` is the acting client).
 *
 * Every reserved claim name stays reserved for custom claims; a custom claim named like one of a profile's own
 * (gty, permissions, preferred_username, clientId) is the client's choice, and the profile's is then left out.
 */

export const TOKEN_PROFILES = ['rfc9068', 'auth0', 'keycloak'] as const;
export type TokenProfile = (typeof TOKEN_PROFILES)[number];

export const isTokenProfile = (value: unknown): value is TokenProfile =>
  typeof value === 'string' && (TOKEN_PROFILES as readonly string[]).includes(value);

/** What the auth0 profile appends to a token's `sub`: Auth0's mark of a machine client. */
const AUTH0_CLIENT_SUFFIX = '@clients';

/**
 * The client a token of this server is for, from its `sub`: the client id, which the auth0 profile writes as
 * `<client_id>@clients` (a client id never holds `@`, validate.ts). What introspection, revocation and token exchange
 * look up, whatever the profile of the token's audience.
 */
export const subjectClientOf = (sub: string): string =>
  sub.endsWith(AUTH0_CLIENT_SUFFIX) ? sub.slice(0, -AUTH0_CLIENT_SUFFIX.length) : sub;

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
  // `azp` is the client the token was issued to; the subject is the client it is for (an exchanged token's is the
  // original caller, whose service account Keycloak names).
  claims.azp = claims.client_id;
  const subject = subjectClientOf(claims.sub);
  if (profile === 'auth0') {
    claims.sub = `${subject}${AUTH0_CLIENT_SUFFIX}`;
    if (!custom?.has('gty')) claims.gty = 'client-credentials';
    if (!custom?.has('permissions'))
      claims.permissions = claims.scope === undefined ? [] : claims.scope.split(' ');
    return;
  }
  claims.typ = 'Bearer';
  if (!custom?.has('preferred_username')) claims.preferred_username = `service-account-${subject}`;
  if (!custom?.has('clientId')) claims.clientId = subject;
}
