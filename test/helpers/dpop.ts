/**
 * DPoP proofs made by hand (RFC 9449 §4.2), for the tests of what Tessera refuses: a key holder, and a proof of
 * any claims and header signed by it. Members set to undefined are left out, so a test can remove one.
 */
import { createHash } from 'node:crypto';
import {
  calculateJwkThumbprint,
  exportJWK,
  generateKeyPair,
  SignJWT,
  type CryptoKey,
  type JWK,
  type JWTPayload,
} from 'jose';

export interface Holder {
  alg: string;
  privateKey: CryptoKey;
  jwk: JWK;
  /** The RFC 7638 thumbprint of its public key: a bound token's cnf.jkt. */
  jkt: string;
}

export async function holder(alg = 'ES256'): Promise<Holder> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = await exportJWK(publicKey);
  return { alg, privateKey, jwk, jkt: await calculateJwkThumbprint(jwk, 'sha256') };
}

/** The object without its undefined members. */
export const clean = (o: Record<string, unknown>): Record<string, unknown> =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));

/** RFC 9449 §4.2: a proof's ath, the base64url SHA-256 of the access token. */
export const ath = (token: string): string => createHash('sha256').update(token).digest('base64url');

/** A proof of exactly `claims` (typ dpop+jwt, the holder's alg and jwk, then `header` over them). */
export function signProof(
  h: Holder,
  claims: Record<string, unknown>,
  header: Record<string, unknown> = {},
): Promise<string> {
  return new SignJWT(clean(claims) as JWTPayload)
    .setProtectedHeader(clean({ alg: h.alg, typ: 'dpop+jwt', jwk: h.jwk, ...header }) as { alg: string })
    .sign(h.privateKey);
}
