/**
 * What the interface promises, and data that shows it, written once for the tests that check it in several
 * places (never read from src/: a test that took these from the code would check nothing).
 */

/** The registered claims of every access token, in the order a token has them (RFC 9068 §2.2). */
export const REGISTERED_CLAIMS = ['iss', 'sub', 'aud', 'client_id', 'iat', 'exp', 'jti'] as const;

/** The admin API's scopes, sorted, as discovery lists them among every audience's scopes. */
export const ADMIN_SCOPE_NAMES = [
  'audiences:read',
  'audiences:write',
  'audit:read',
  'clients:read',
  'clients:write',
  'keys:read',
  'keys:write',
  'operators:read',
  'operators:write',
  'tokens:introspect',
] as const;

/** The algorithms a private_key_jwt assertion may be signed with, as discovery lists them. */
export const ASSERTION_SIGNING_ALGS = ['ES256', 'ES384', 'RS256', 'PS256', 'EdDSA', 'Ed25519'] as const;

/** The algorithms a DPoP proof may be signed with (INTERFACE.md, DPoP), as discovery lists them. */
export const DPOP_SIGNING_ALGS = ['ES256', 'ES384', 'RS256', 'PS256', 'EdDSA', 'Ed25519'] as const;

/**
 * Clients ([id, name], made in this order, out of id order) that a search by a substring of the id or the
 * name tells apart: any ASCII case, and %, _ and \ taken literally (the store's LIKE, the CLI's --search).
 */
export const SEARCHED_CLIENTS: readonly (readonly [string, string])[] = [
  ['svc-zeta', 'Monthly BILLS'],
  ['Billing-1', 'billing'],
  ['pay_ment', 'Payments'],
  ['svc-pct', '100% uptime'],
  ['svc-snake', 'snake_case'],
  ['svc-three', 'three cats'],
  ['svc-slash', 'C:\\tools'],
];
