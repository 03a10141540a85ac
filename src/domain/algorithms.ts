/** JWS algorithms Tessera signs access tokens with (RFC 9068 §2.1 forbids `none`). */
export const SIGNING_ALGS = ['ES256', 'RS256', 'PS256', 'EdDSA'] as const;
export type SigningAlg = (typeof SIGNING_ALGS)[number];

export function isSigningAlg(value: string): value is SigningAlg {
  return (SIGNING_ALGS as readonly string[]).includes(value);
}
