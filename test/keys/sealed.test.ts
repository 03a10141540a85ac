import { randomBytes } from 'node:crypto';
import { decodeProtectedHeader, exportJWK, generateKeyPair, type JWK } from 'jose';
import { beforeAll, describe, expect, it } from 'vitest';
import { rejection } from '../helpers/assert.js';
import { parseMasterKey, type MasterKey } from '../../src/keys/master-key.js';
import { MasterKeyMismatchError, openPrivateJwk, sealPrivateJwk } from '../../src/keys/sealed.js';

const master = (): MasterKey => parseMasterKey(randomBytes(32).toString('base64'));

describe('sealed private keys', () => {
  let jwk: JWK;
  let rsa: JWK;
  const mk = master();

  beforeAll(async () => {
    jwk = await exportJWK((await generateKeyPair('ES256', { extractable: true })).privateKey);
    rsa = await exportJWK(
      (await generateKeyPair('RS256', { extractable: true, modulusLength: 2048 })).privateKey,
    );
  });

  it('opens what it sealed, exactly', async () => {
    for (const key of [jwk, rsa]) {
      const sealed = await sealPrivateJwk(key, mk, 'kid-1');
      expect(await openPrivateJwk(sealed, mk, 'kid-1')).toEqual(key);
    }
  });

  it('seals as a compact JWE, dir + A256GCM, naming the master key and the signing key in the header', async () => {
    const sealed = await sealPrivateJwk(jwk, mk, 'kid-1');
    const parts = sealed.split('.');
    expect(parts).toHaveLength(5);
    expect(parts[1]).toBe(''); // dir: no encrypted key
    expect(decodeProtectedHeader(sealed)).toEqual({
      alg: 'dir',
      enc: 'A256GCM',
      kid: mk.id,
      cty: 'jwk+json',
      'tessera.kid': 'kid-1',
    });
  });

  it('never contains a private member in the clear', async () => {
    for (const key of [jwk, rsa]) {
      const sealed = await sealPrivateJwk(key, mk, 'kid-1');
      for (const member of ['d', 'p', 'q', 'dp', 'dq', 'qi'] as const) {
        const value = key[member];
        if (value === undefined) continue;
        expect(sealed).not.toContain(value);
        expect(sealed).not.toContain(value.slice(0, 16));
        const decoded = sealed
          .split('.')
          .map((part) => Buffer.from(part, 'base64url').toString('latin1'))
          .join('\n');
        expect(decoded).not.toContain(value.slice(0, 16));
        expect(decoded).not.toContain(Buffer.from(value, 'base64url').subarray(0, 12).toString('latin1'));
      }
      expect(sealed).not.toContain('"d"');
    }
  });

  it('seals the same key differently each time (a fresh IV)', async () => {
    const one = await sealPrivateJwk(jwk, mk, 'kid-1');
    const two = await sealPrivateJwk(jwk, mk, 'kid-1');
    expect(one).not.toBe(two);
    expect(one.split('.')[2]).not.toBe(two.split('.')[2]);
  });

  it('refuses another master key with MasterKeyMismatchError, naming both ids', async () => {
    const sealed = await sealPrivateJwk(jwk, mk, 'kid-1');
    const other = master();
    const error = await rejection(openPrivateJwk(sealed, other, 'kid-1'));
    expect(error).toBeInstanceOf(MasterKeyMismatchError);
    expect(error.name).toBe('MasterKeyMismatchError');
    expect(error.message).toBe(
      `signing key kid-1 was sealed under another master key (${mk.id}, this one is ${other.id}); ` +
        'start with the TESSERA_MASTER_KEY it was created with',
    );
  });

  it('refuses a sealed key moved to another signing key', async () => {
    const sealed = await sealPrivateJwk(jwk, mk, 'kid-1');
    const error = await rejection(openPrivateJwk(sealed, mk, 'kid-2'));
    expect(error).not.toBeInstanceOf(MasterKeyMismatchError);
    expect(error.message).toBe('sealed key does not belong to signing key kid-2');
  });

  it('refuses a header rewritten to claim another signing key (GCM authenticates the header)', async () => {
    const sealed = await sealPrivateJwk(jwk, mk, 'kid-1');
    const [, ...rest] = sealed.split('.');
    const forged = Buffer.from(
      JSON.stringify({ alg: 'dir', enc: 'A256GCM', kid: mk.id, cty: 'jwk+json', 'tessera.kid': 'kid-2' }),
    ).toString('base64url');
    await rejection(openPrivateJwk([forged, ...rest].join('.'), mk, 'kid-2'));
  });

  it('refuses a key whose id matches but whose bytes differ (a tampered header kid)', async () => {
    const sealed = await sealPrivateJwk(jwk, mk, 'kid-1');
    const impostor: MasterKey = { key: new Uint8Array(randomBytes(32)), id: mk.id };
    const error = await rejection(openPrivateJwk(sealed, impostor, 'kid-1'));
    expect(error).not.toBeInstanceOf(MasterKeyMismatchError);
  });

  it('refuses a tampered ciphertext', async () => {
    const sealed = await sealPrivateJwk(jwk, mk, 'kid-1');
    const parts = sealed.split('.');
    const ciphertext = Buffer.from(parts[3]!, 'base64url');
    ciphertext[0]! ^= 1;
    parts[3] = ciphertext.toString('base64url');
    await rejection(openPrivateJwk(parts.join('.'), mk, 'kid-1'));
  });
});
