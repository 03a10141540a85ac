import { CompactEncrypt, compactDecrypt, decodeProtectedHeader, type JWK } from 'jose';
import { TesseraError } from '../domain/errors.js';
import type { MasterKey } from './master-key.js';

/**
 * A private JWK at rest is a compact JWE: `dir` + A256GCM under the master key (RFC 7516/7518). The protected
 * header, which GCM authenticates, names the master key and the signing key, so a sealed key cannot be
 * moved to another row unnoticed.
 */
export async function sealPrivateJwk(jwk: JWK, master: MasterKey, kid: string): Promise<string> {
  return new CompactEncrypt(new TextEncoder().encode(JSON.stringify(jwk)))
    .setProtectedHeader({ alg: 'dir', enc: 'A256GCM', kid: master.id, cty: 'jwk+json', 'tessera.kid': kid })
    .encrypt(master.key);
}

export class MasterKeyMismatchError extends TesseraError {
  override name = 'MasterKeyMismatchError';

  /** The management error it is answered as (management/errors.ts). */
  override get code(): string {
    return 'master_key_mismatch';
  }
}

export async function openPrivateJwk(sealed: string, master: MasterKey, kid: string): Promise<JWK> {
  const header = decodeProtectedHeader(sealed);
  if (header.kid !== master.id) {
    throw new MasterKeyMismatchError(
      `signing key ${kid} was sealed under another master key (${String(header.kid)}, this one is ${master.id}); ` +
        'start with the TESSERA_MASTER_KEY it was created with',
    );
  }
  if (header['tessera.kid'] !== kid) throw new Error(`sealed key does not belong to signing key ${kid}`);
  const { plaintext } = await compactDecrypt(sealed, master.key, {
    keyManagementAlgorithms: ['dir'],
    contentEncryptionAlgorithms: ['A256GCM'],
  });
  return JSON.parse(new TextDecoder().decode(plaintext)) as JWK;
}

/**
 * Refuses to add a key sealed under `master` to a store whose keys were sealed under another master key:
 * the servers could not open it, and would stop following the key schedule.
 */
export function assertSameMasterKey(
  keys: readonly { kid: string; privateJwkSealed: string }[],
  master: MasterKey,
): void {
  for (const key of keys) {
    const sealedUnder = decodeProtectedHeader(key.privateJwkSealed).kid;
    if (sealedUnder !== master.id) {
      throw new MasterKeyMismatchError(
        `signing key ${key.kid} was sealed under another master key (${String(sealedUnder)}, this one is ${master.id}); ` +
          'use the TESSERA_MASTER_KEY the servers use',
      );
    }
  }
}
