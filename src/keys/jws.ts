import { constants, sign, verify, type KeyObject, type SignKeyObjectInput } from 'node:crypto';
import type { JWTPayload } from 'jose';
import type { SigningAlg } from '../domain/algorithms.js';
import type { SignatureCheck } from '../domain/own-tokens.js';

/**
 * Signs one access token's payload; built once per key. `claims`, when given, is the inside of a JSON object
 * (`"k":v,...`, serialised once per client) appended after the payload's own members: the registered claims
 * first, then the custom ones.
 */
export type Signer = (payload: JWTPayload, claims?: string) => string;

/**
 * How node:crypto computes each JWS algorithm's signature (RFC 7518 §3, RFC 8037 §3.1): the digest, and the
 * options that make the output the JWS form (ECDSA as r || s, RSASSA-PSS with a salt as long as the hash).
 */
function signatureParams(
  alg: SigningAlg,
  key: KeyObject,
): { digest: string | null; key: KeyObject | SignKeyObjectInput } {
  switch (alg) {
    case 'ES256':
      return { digest: 'sha256', key: { key, dsaEncoding: 'ieee-p1363' } };
    case 'RS256':
      return { digest: 'sha256', key };
    case 'PS256':
      return {
        digest: 'sha256',
        key: { key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: 32 },
      };
    case 'EdDSA':
      return { digest: null, key }; // Ed25519 hashes internally
  }
}

/**
 * An RFC 9068 access token as a JWS Compact Serialization (RFC 7515 §7.1): the protected header
 * (`alg`, `kid`, `typ: at+jwt`) encoded once per key, the claims encoded per token, and the signature made
 * by node:crypto in one synchronous call. Only the serialization is assembled here; the cryptography is
 * node:crypto's, and every algorithm's output is verified with jose in test/keys.
 *
 * jose signs through WebCrypto, whose per-call machinery (an async job, DOMException and structuredClone
 * setup) cost more than the signature itself; jose still makes, exports, seals and thumbprints the keys.
 */
export function jwsSigner(key: KeyObject, alg: SigningAlg, kid: string): Signer {
  if (key.type !== 'private') throw new Error('a signing key must be a private key');
  const header = Buffer.from(JSON.stringify({ alg, kid, typ: 'at+jwt' })).toString('base64url') + '.';
  const params = signatureParams(alg, key);
  return (payload, claims) => {
    const json = JSON.stringify(payload);
    const body = claims === undefined ? json : `${json.slice(0, -1)},${claims}}`;
    const input = header + Buffer.from(body).toString('base64url');
    const signature = sign(params.digest, Buffer.from(input, 'latin1'), params.key);
    return input + '.' + signature.toString('base64url');
  };
}

/**
 * Checks the signature of a JWS made by jwsSigner (or by anyone holding the private key), with the public key and
 * the same options: node:crypto in one synchronous call, as signing is. `input` is the signing input
 * (header.payload, ASCII).
 */
export function jwsVerifier(key: KeyObject, alg: SigningAlg): SignatureCheck {
  if (key.type !== 'public') throw new Error('a verifying key must be a public key');
  const params = signatureParams(alg, key);
  return (input, signature) => {
    try {
      return verify(params.digest, Buffer.from(input, 'latin1'), params.key, signature);
    } catch {
      // A signature of the wrong length for the key, for instance: not a signature of it.
      return false;
    }
  };
}
