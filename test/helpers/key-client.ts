/**
 * private_key_jwt clients for the tests of client authentication (INTERFACE.md, "Client authentication"): a
 * client's signing key, the client written straight to a store, and the RFC 7523 assertions it signs.
 */
import { randomUUID } from 'node:crypto';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK, type JWTPayload } from 'jose';
import { generateClientId } from '../../src/domain/secrets.js';
import type { NewClient, Store } from '../../src/store/types.js';

export interface Signer {
  privateKey: CryptoKey;
  jwk: JWK;
  alg: string;
}

/** A new key pair for `alg`, its public JWK with `kid` when one is given (an unnamed key is matched by alg). */
export async function signer(alg = 'ES256', kid?: string): Promise<Signer> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = await exportJWK(publicKey);
  if (kid !== undefined) jwk.kid = kid;
  return { privateKey, jwk, alg };
}

/**
 * Writes a private_key_jwt client to `store` as the management layer would (no secret, the default token
 * lifetime), with its keys inline (`jwks`), at a URL (`jwksUri`), or none but its federated credentials; returns
 * its new id. A running server sees it at its next poll (t.sync()), or on its first use.
 */
export async function writeKeyClient(
  store: Store,
  client: Pick<NewClient, 'name' | 'audiences' | 'jwks' | 'jwksUri' | 'federatedCredentials'>,
): Promise<string> {
  const id = generateClientId();
  await store.createClient({
    id,
    secretDigest: null,
    tokenTtl: null,
    authMethod: 'private_key_jwt',
    jwks: null,
    jwksUri: null,
    ...client,
  });
  return id;
}

/**
 * An assertion as RFC 7523 wants it, by `key` for client `id`, for the token endpoint `aud`: five minutes to live
 * and a fresh jti; `claims` and `header` over those defaults (the key's kid, when it has one, and alg).
 */
export function clientAssertion(
  key: Signer,
  id: string,
  aud: string,
  claims: JWTPayload = {},
  header: Record<string, unknown> = {},
): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ iss: id, sub: id, aud, iat: now, exp: now + 300, jti: randomUUID(), ...claims })
    .setProtectedHeader({ alg: key.alg, ...(key.jwk.kid ? { kid: key.jwk.kid } : {}), ...header })
    .sign(key.privateKey);
}
