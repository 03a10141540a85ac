import { createPrivateKey, createPublicKey, type JsonWebKey } from 'node:crypto';
import { compactVerify, decodeProtectedHeader, exportJWK, generateKeyPair, importJWK, jwtVerify } from 'jose';
import { describe, expect, it } from 'vitest';
import { SIGNING_ALGS, type SigningAlg } from '../../src/domain/jose.js';
import { jwsSigner } from '../../src/keys/jws.js';

const OPTIONS = {
  ES256: { extractable: true },
  RS256: { extractable: true, modulusLength: 2048 },
  PS256: { extractable: true, modulusLength: 2048 },
  EdDSA: { extractable: true, crv: 'Ed25519' },
} as const;

async function keyPair(alg: SigningAlg) {
  const { privateKey, publicKey } = await generateKeyPair(alg, OPTIONS[alg]);
  const jwk = await exportJWK(privateKey);
  return {
    privateKey: createPrivateKey({ key: jwk as JsonWebKey, format: 'jwk' }),
    publicJwk: await exportJWK(publicKey),
  };
}

const claims = {
  iss: 'https://auth.example.com',
  sub: 'svc-1',
  aud: 'https://api.example.com',
  client_id: 'svc-1',
  iat: 1_700_000_000,
  exp: 1_700_001_800,
  jti: 'AAECAwQFBgcICQoLDA0ODw',
};

describe('jwsSigner', () => {
  it.each(SIGNING_ALGS)(
    '%s: a compact JWS that jose verifies, header and claims exactly as given',
    async (alg) => {
      const { privateKey, publicJwk } = await keyPair(alg);
      const token = jwsSigner(privateKey, alg, 'kid-1')(claims);
      expect(token).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+$/);
      expect(decodeProtectedHeader(token)).toEqual({ alg, kid: 'kid-1', typ: 'at+jwt' });
      const key = await importJWK(publicJwk, alg);
      const { payload, protectedHeader } = await jwtVerify(token, key, {
        algorithms: [alg],
        typ: 'at+jwt',
        currentDate: new Date(claims.iat * 1000),
      });
      expect(payload).toEqual(claims);
      expect(protectedHeader).toEqual({ alg, kid: 'kid-1', typ: 'at+jwt' });
    },
  );

  it('custom claims, serialised once, are signed after the registered ones, as one JSON object', async () => {
    const { privateKey, publicJwk } = await keyPair('ES256');
    const custom = JSON.stringify({ tenant_id: 'acme', limits: { rps: 10 }, 'a"b': 'é' }).slice(1, -1);
    const token = jwsSigner(privateKey, 'ES256', 'k')(claims, custom);
    const body = Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8');
    expect(body).toBe(`${JSON.stringify(claims).slice(0, -1)},${custom}}`);
    const { payload } = await jwtVerify(token, await importJWK(publicJwk, 'ES256'), {
      currentDate: new Date(claims.iat * 1000),
    });
    expect(payload).toEqual({ ...claims, tenant_id: 'acme', limits: { rps: 10 }, 'a"b': 'é' });
    expect(Object.keys(payload)).toEqual([...Object.keys(claims), 'tenant_id', 'limits', 'a"b']);
  });

  it.each(SIGNING_ALGS)(
    '%s: a changed claim or a signature from another key does not verify',
    async (alg) => {
      const { privateKey, publicJwk } = await keyPair(alg);
      const other = await keyPair(alg);
      const key = await importJWK(publicJwk, alg);
      const token = jwsSigner(privateKey, alg, 'k')(claims);
      const [header, , signature] = token.split('.');
      const forged = Buffer.from(JSON.stringify({ ...claims, sub: 'admin' })).toString('base64url');
      const failed = { code: 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED' };
      await expect(compactVerify(`${header}.${forged}.${signature}`, key)).rejects.toMatchObject(failed);
      await expect(compactVerify(jwsSigner(other.privateKey, alg, 'k')(claims), key)).rejects.toMatchObject(
        failed,
      );
    },
  );

  it('ES256 signatures are 64 bytes (r || s, RFC 7518 §3.4), not DER', async () => {
    const { privateKey } = await keyPair('ES256');
    const signature = jwsSigner(privateKey, 'ES256', 'k')(claims).split('.')[2]!;
    expect(Buffer.from(signature, 'base64url')).toHaveLength(64);
  });

  it('claims with non-ASCII characters are encoded as UTF-8', async () => {
    const { privateKey, publicJwk } = await keyPair('ES256');
    const token = jwsSigner(privateKey, 'ES256', 'k')({ ...claims, sub: 'dienst-ü-✓' });
    const { payload } = await compactVerify(token, await importJWK(publicJwk, 'ES256'));
    expect(JSON.parse(Buffer.from(payload).toString('utf8'))).toMatchObject({ sub: 'dienst-ü-✓' });
  });

  it('refuses a public key', async () => {
    const { privateKey } = await keyPair('ES256');
    expect(() => jwsSigner(createPublicKey(privateKey), 'ES256', 'k')).toThrow(/private key/);
  });
});
