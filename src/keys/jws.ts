import type { KeyObject } from 'node:crypto';
import type { JWTPayload } from 'jose';
import { signatureCheck, signatureMaker, type SigningAlg } from '../domain/jose.js';
import type { SignatureCheck } from '../domain/own-tokens.js';

/**
 * Signs one access token's payload; built once per key. `claims`, when given, is the inside of a JSON object
 * (`"k":v,...`, serialised once per client) appended after the payload's own members: the registered claims
 * first, then the custom ones.
 */
export type Signer = (payload: JWTPayload, claims?: string) => string;

/**
 * An RFC 9068 access token as a JWS Compact Serialization (RFC 7515 §7.1): the protected header
 * (`alg`, `kid`, `typ: at+jwt`) encoded once per key, the claims encoded per token, and the signature made
 * from domain/jose.ts's table by node:crypto in one synchronous call. Only the serialization is assembled here;
 * every algorithm's output is verified with jose in test/keys.
 */
export function jwsSigner(key: KeyObject, alg: SigningAlg, kid: string): Signer {
  const signature = signatureMaker(alg, key);
  const header = Buffer.from(JSON.stringify({ alg, kid, typ: 'at+jwt' })).toString('base64url') + '.';
  return (payload, claims) => {
    const json = JSON.stringify(payload);
    const body = claims === undefined ? json : `${json.slice(0, -1)},${claims}}`;
    const input = header + Buffer.from(body).toString('base64url');
    return input + '.' + signature(Buffer.from(input, 'latin1')).toString('base64url');
  };
}

/**
 * Checks the signature of a JWS made by jwsSigner (or by anyone holding the private key), with the public key:
 * domain/jose.ts's check, as signing is. `input` is the signing input (header.payload, ASCII).
 */
export function jwsVerifier(key: KeyObject, alg: SigningAlg): SignatureCheck {
  const check = signatureCheck(alg, key);
  return (input, signature) => check(Buffer.from(input, 'latin1'), signature);
}
