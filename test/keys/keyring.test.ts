import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  calculateJwkThumbprint,
  createLocalJWKSet,
  decodeProtectedHeader,
  exportJWK,
  generateKeyPair,
  jwtVerify,
  type JWK,
} from 'jose';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { rejection } from '../helpers/assert.js';
import { SIGNING_ALGS, type SigningAlg } from '../../src/domain/jose.js';
import { asOAuthError, Unavailable } from '../../src/domain/errors.js';
import { Keyring } from '../../src/keys/keyring.js';
import { parseMasterKey, type MasterKey } from '../../src/keys/master-key.js';
import { MasterKeyMismatchError, openPrivateJwk, sealPrivateJwk } from '../../src/keys/sealed.js';
import { openSqliteStore } from '../../src/store/sqlite.js';
import type { SigningKey, Store } from '../../src/store/types.js';

const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'];
const PUBLISHED_MEMBERS: Record<string, string[]> = {
  EC: ['alg', 'crv', 'kid', 'kty', 'use', 'x', 'y'],
  RSA: ['alg', 'e', 'kid', 'kty', 'n', 'use'],
  OKP: ['alg', 'crv', 'kid', 'kty', 'use', 'x'],
};
const KTY: Record<SigningAlg, string> = { ES256: 'EC', RS256: 'RSA', PS256: 'RSA', EdDSA: 'OKP' };

/** RFC 7638 §3: SHA-256 over the required members, sorted, without whitespace; computed here without jose. */
function thumbprint(jwk: JWK): string {
  const required: Record<string, string[]> = {
    EC: ['crv', 'kty', 'x', 'y'],
    RSA: ['e', 'kty', 'n'],
    OKP: ['crv', 'kty', 'x'],
  };
  const members = required[jwk.kty!]!;
  const values = jwk as Record<string, unknown>;
  const json = '{' + members.map((m) => `${JSON.stringify(m)}:${JSON.stringify(values[m])}`).join(',') + '}';
  return createHash('sha256').update(json).digest('base64url');
}

interface Jwks {
  keys: (JWK & { kid: string; alg: string; use: string })[];
}
const parseJwks = (keyring: Keyring): Jwks => JSON.parse(keyring.jwks()) as Jwks;

const dirs: string[] = [];
async function freshStore(): Promise<Store> {
  const dir = mkdtempSync(path.join(tmpdir(), 'tessera-keyring-'));
  dirs.push(dir);
  const store = openSqliteStore(path.join(dir, 'tessera.db'));
  await store.migrate();
  return store;
}
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const newMaster = (): MasterKey => parseMasterKey(randomBytes(32).toString('base64'));

describe('Keyring with every algorithm', () => {
  let store: Store;
  let master: MasterKey;
  let keyring: Keyring;
  const loadedAt = Date.now();

  beforeAll(async () => {
    store = await freshStore();
    master = newMaster();
    keyring = new Keyring(store, master, { maxTokenTtl: 86_400, now: () => loadedAt, retryAfter: 5 });
    await keyring.load(SIGNING_ALGS);
  });
  afterAll(async () => {
    await store.close();
  });

  it('generates exactly one key per required algorithm, active from now, never retired', async () => {
    const rows = await store.listSigningKeys();
    expect(rows.map((r) => r.alg).sort()).toEqual([...SIGNING_ALGS].sort());
    const at = new Date(loadedAt).toISOString();
    for (const row of rows) {
      expect(row.createdAt).toBe(at);
      expect(row.activatesAt).toBe(at);
      expect(row.retiredAt).toBeNull();
    }
    for (const alg of SIGNING_ALGS) expect(keyring.hasActive(alg)).toBe(true);
    expect(new Map([...keyring.activeKids()].sort())).toEqual(
      new Map(rows.map((r) => [r.alg, r.kid] as const).sort()),
    );
  });

  it('names each key by its RFC 7638 thumbprint', async () => {
    for (const row of await store.listSigningKeys()) {
      const publicJwk = JSON.parse(row.publicJwk) as JWK;
      expect(row.kid).toBe(thumbprint(publicJwk));
      expect(row.kid).toBe(await calculateJwkThumbprint(publicJwk));
      expect(row.kid).toMatch(/^[A-Za-z0-9_-]{43}$/);
    }
  });

  it('generates the documented key types: P-256, RSA 2048, Ed25519', async () => {
    for (const row of await store.listSigningKeys()) {
      const jwk = JSON.parse(row.publicJwk) as JWK;
      expect(jwk.kty).toBe(KTY[row.alg]);
      if (row.alg === 'ES256') expect(jwk.crv).toBe('P-256');
      if (row.alg === 'EdDSA') expect(jwk.crv).toBe('Ed25519');
      if (jwk.kty === 'RSA') {
        expect(Buffer.from(jwk.n!, 'base64url')).toHaveLength(256);
        expect(jwk.e).toBe('AQAB');
      }
    }
  });

  it('stores only public members in the clear, and the private key sealed under the master key', async () => {
    for (const row of await store.listSigningKeys()) {
      const publicJwk = JSON.parse(row.publicJwk) as JWK;
      expect(Object.keys(publicJwk).sort()).toEqual(
        PUBLISHED_MEMBERS[KTY[row.alg]]!.filter((m) => !['alg', 'kid', 'use'].includes(m)),
      );
      const privateJwk = await openPrivateJwk(row.privateJwkSealed, master, row.kid);
      expect(typeof privateJwk.d).toBe('string');
      expect(row.privateJwkSealed).not.toContain(privateJwk.d!);
      for (const member of ['kty', 'crv', 'x', 'y', 'n', 'e'] as const)
        expect(privateJwk[member]).toBe(publicJwk[member]);
    }
  });

  it('publishes a JWKS of public members plus kid, alg and use=sig, and nothing private', async () => {
    const jwks = parseJwks(keyring);
    expect(Object.keys(jwks)).toEqual(['keys']);
    const rows = await store.listSigningKeys();
    expect(jwks.keys.map((k) => k.kid)).toEqual(rows.map((r) => r.kid));
    for (const key of jwks.keys) {
      const row = rows.find((r) => r.kid === key.kid)!;
      expect(Object.keys(key).sort()).toEqual(PUBLISHED_MEMBERS[key.kty!]);
      expect(key).toEqual({ ...(JSON.parse(row.publicJwk) as JWK), kid: row.kid, alg: row.alg, use: 'sig' });
      for (const member of PRIVATE_MEMBERS) expect(key).not.toHaveProperty(member);
    }
    // Each published key verifies this server's own tokens by its kid, with its alg; no other kid does.
    for (const key of jwks.keys) expect(keyring.verificationKey(key.kid)?.alg).toBe(key.alg);
    expect(keyring.verificationKey('no-such-kid')).toBeUndefined();
    expect(keyring.jwksMaxAge).toBe(300);
  });

  it.each(SIGNING_ALGS)(
    "verifies what it signs with %s by the key's kid; a changed payload or signature, or another key, fails",
    async (alg) => {
      const token = await keyring.sign({ iss: 'https://auth.example.com', sub: 'svc', jti: 'j' }, alg);
      const [header, payload, signature] = token.split('.') as [string, string, string];
      const check = (input: string, sig: string, kid = keyring.activeKids().get(alg)!) =>
        keyring.verificationKey(kid)!.check(input, Buffer.from(sig, 'base64url'));
      expect(check(`${header}.${payload}`, signature)).toBe(true);
      const other = Buffer.from(JSON.stringify({ iss: 'https://auth.example.com', sub: 'root', jti: 'j' }));
      expect(check(`${header}.${other.toString('base64url')}`, signature)).toBe(false);
      const flipped = Buffer.from(signature, 'base64url');
      flipped[flipped.length - 1]! ^= 1;
      expect(check(`${header}.${payload}`, flipped.toString('base64url'))).toBe(false);
      // Too short a signature for the key: false, not an exception.
      expect(check(`${header}.${payload}`, 'AAAA')).toBe(false);
      const another = SIGNING_ALGS.find((a) => a !== alg)!;
      expect(check(`${header}.${payload}`, signature, keyring.activeKids().get(another)!)).toBe(false);
    },
  );

  it.each(SIGNING_ALGS)(
    'signs an %s access token that jose verifies against the published JWKS',
    async (alg) => {
      const iat = Math.floor(Date.now() / 1000);
      const claims = {
        iss: 'https://auth.example.com',
        sub: 'svc',
        aud: 'https://api.example.com',
        client_id: 'svc',
        iat,
        exp: iat + 300,
        jti: 'jti-1',
      };
      const token = await keyring.sign(claims, alg);
      const kid = keyring.activeKids().get(alg);
      expect(decodeProtectedHeader(token)).toEqual({ alg, kid, typ: 'at+jwt' });

      const { payload, protectedHeader } = await jwtVerify(token, createLocalJWKSet(parseJwks(keyring)), {
        algorithms: [alg],
        typ: 'at+jwt',
        issuer: 'https://auth.example.com',
        audience: 'https://api.example.com',
      });
      expect(payload).toEqual(claims);
      expect(protectedHeader).toEqual({ alg, kid, typ: 'at+jwt' });
    },
  );

  it('does not let a token verify with another algorithm', async () => {
    const token = await keyring.sign({ sub: 'svc' }, 'ES256');
    await expect(
      jwtVerify(token, createLocalJWKSet(parseJwks(keyring)), { algorithms: ['RS256'] }),
    ).rejects.toThrow();
  });

  it('reuses the stored keys in a second Keyring on the same store', async () => {
    const before = await store.listSigningKeys();
    const second = new Keyring(store, master, { maxTokenTtl: 86_400, now: () => loadedAt, retryAfter: 5 });
    await second.load(SIGNING_ALGS);
    expect(await store.listSigningKeys()).toEqual(before);
    expect(second.activeKids()).toEqual(keyring.activeKids());
    expect(second.jwks()).toBe(keyring.jwks());
    // What one process signs, the JWKS of the other verifies.
    const token = await second.sign({ sub: 'svc' }, 'EdDSA');
    await expect(jwtVerify(token, createLocalJWKSet(parseJwks(keyring)))).resolves.toBeDefined();
  });

  it('refuses to load keys sealed under another master key', async () => {
    const stranger = new Keyring(store, newMaster(), {
      maxTokenTtl: 86_400,
      now: () => loadedAt,
      retryAfter: 5,
    });
    const error = await rejection(stranger.load(['ES256']));
    expect(error).toBeInstanceOf(MasterKeyMismatchError);
  });
});

describe('Keyring generation', () => {
  let store: Store;
  beforeEach(async () => {
    store = await freshStore();
  });
  afterEach(async () => {
    await store.close();
  });

  it('starts with an empty JWKS and no active key', async () => {
    const keyring = new Keyring(store, newMaster(), { maxTokenTtl: 3600, retryAfter: 5 });
    await keyring.load([]);
    expect(keyring.jwks()).toBe('{"keys":[]}');
    expect(keyring.hasActive('ES256')).toBe(false);
    expect(await store.listSigningKeys()).toEqual([]);
  });

  it('generates one key however many callers ask at once, and for a repeated algorithm', async () => {
    const keyring = new Keyring(store, newMaster(), { maxTokenTtl: 3600, retryAfter: 5 });
    await keyring.load(['ES256', 'ES256']);
    await Promise.all([keyring.ensure('EdDSA'), keyring.ensure('EdDSA'), keyring.ensure('EdDSA')]);
    expect((await store.listSigningKeys()).map((k) => k.alg).sort()).toEqual(['ES256', 'EdDSA']);
  });

  it('generates a key on first use of an algorithm that has none', async () => {
    const keyring = new Keyring(store, newMaster(), { maxTokenTtl: 3600, retryAfter: 5 });
    await keyring.load(['ES256']);
    const token = await keyring.sign({ sub: 'svc' }, 'EdDSA');
    expect(decodeProtectedHeader(token).alg).toBe('EdDSA');
    expect((await store.listSigningKeys()).map((k) => k.alg).sort()).toEqual(['ES256', 'EdDSA']);
    await expect(jwtVerify(token, createLocalJWKSet(parseJwks(keyring)))).resolves.toBeDefined();
  });

  it('a key that cannot be made (the store refuses) is a 503 with Retry-After: the retryAfter it was given (TESSERA_RETRY_AFTER)', async () => {
    const errors: unknown[] = [];
    const keyring = new Keyring(store, newMaster(), {
      maxTokenTtl: 3600,
      retryAfter: 17,
      onError: (error) => errors.push(error),
    });
    await keyring.load(['ES256']);
    const down = new Error('the store is down');
    store.changeSigningKeys = () => Promise.reject(down);
    const refused = asOAuthError(
      await rejection(
        Promise.resolve().then(() => keyring.sign({ sub: 'svc' }, 'EdDSA')),
        Unavailable,
      ),
    )!;
    expect([refused.error, refused.status, refused.headers]).toEqual([
      'temporarily_unavailable',
      503,
      { 'retry-after': '17' },
    ]);
    expect(errors).toEqual([down]);
  });

  it('sees a key added by another process after reload()', async () => {
    const master = newMaster();
    const server = new Keyring(store, master, { maxTokenTtl: 3600, retryAfter: 5 });
    await server.load(['ES256']);
    const other = new Keyring(store, master, { maxTokenTtl: 3600, retryAfter: 5 });
    await other.load(['EdDSA']);
    expect(server.hasActive('EdDSA')).toBe(false);
    await server.reload();
    expect(server.hasActive('EdDSA')).toBe(true);
    expect(server.jwks()).toBe(other.jwks());
  });
});

describe('Keyring over time', () => {
  const T = Date.parse('2030-01-01T00:00:00.000Z');
  const MINUTE = 60_000;
  const HOUR = 60 * MINUTE;
  const MAX_TTL = 2 * 3600; // seconds

  let store: Store;
  let master: MasterKey;
  let now: number;
  let keyring: Keyring;

  /** A real key pair, sealed, as a row to insert directly. */
  async function keyRow(
    alg: SigningAlg,
    times: { createdAt: number; activatesAt: number; retiredAt?: number },
  ) {
    const { publicKey, privateKey } = await generateKeyPair(alg, { extractable: true });
    const { kty, crv, x, y } = await exportJWK(publicKey);
    const publicJwk = Object.fromEntries(
      Object.entries({ kty, crv, x, y }).filter(([, v]) => v !== undefined),
    );
    const kid = thumbprint(publicJwk);
    const row: SigningKey = {
      kid,
      alg,
      publicJwk: JSON.stringify(publicJwk),
      privateJwkSealed: await sealPrivateJwk(await exportJWK(privateKey), master, kid),
      createdAt: new Date(times.createdAt).toISOString(),
      activatesAt: new Date(times.activatesAt).toISOString(),
      retiredAt: times.retiredAt === undefined ? null : new Date(times.retiredAt).toISOString(),
    };
    await store.changeSigningKeys(() => ({ insert: row }));
    return row;
  }

  const publishedKids = () => parseJwks(keyring).keys.map((k) => k.kid);
  const signingKid = async () => decodeProtectedHeader(await keyring.sign({ sub: 'svc' }, 'ES256')).kid;
  async function at(time: number): Promise<void> {
    now = time;
    await keyring.reload();
  }

  let old: SigningKey;
  let current: SigningKey;
  let next: SigningKey;

  beforeEach(async () => {
    store = await freshStore();
    master = newMaster();
    now = T;
    // old: signed until an hour ago; current: signs now; next: published now, signs from T + 30 min.
    old = await keyRow('ES256', {
      createdAt: T - 48 * HOUR,
      activatesAt: T - 48 * HOUR,
      retiredAt: T - HOUR,
    });
    current = await keyRow('ES256', { createdAt: T - 24 * HOUR, activatesAt: T - 24 * HOUR });
    next = await keyRow('ES256', { createdAt: T - MINUTE, activatesAt: T + 30 * MINUTE });
    keyring = new Keyring(store, master, { maxTokenTtl: MAX_TTL, now: () => now, retryAfter: 5 });
    await keyring.load(['ES256']);
  });
  afterEach(async () => {
    await store.close();
  });

  it('uses the stored keys and generates none', async () => {
    expect((await store.listSigningKeys()).map((k) => k.kid)).toEqual([old.kid, current.kid, next.kid]);
  });

  it('publishes the retired, the current and the next key; signs with the current one', async () => {
    expect(publishedKids()).toEqual([old.kid, current.kid, next.kid]);
    expect(keyring.activeKids()).toEqual(new Map([['ES256', current.kid]]));
    expect(await signingKid()).toBe(current.kid);
  });

  it('does not sign with a key before its activation time, and does from then on', async () => {
    await at(T + 30 * MINUTE - 1);
    expect(await signingKid()).toBe(current.kid);
    await at(T + 30 * MINUTE);
    expect(await signingKid()).toBe(next.kid);
    // The key it replaced is not retired: it stays published.
    expect(publishedKids()).toContain(current.kid);
  });

  it('keeps a retired key published for maxTokenTtl after its retirement, then drops it', async () => {
    const gone = T - HOUR + MAX_TTL * 1000;
    await at(gone - 1);
    expect(publishedKids()).toEqual([old.kid, current.kid, next.kid]);
    await at(gone);
    expect(publishedKids()).toEqual([current.kid, next.kid]);
    expect(parseJwks(keyring).keys.map((k) => k.kid)).not.toContain(old.kid);
  });

  it('never signs with a retired key, even the newest one', async () => {
    await keyRow('ES256', { createdAt: T, activatesAt: T, retiredAt: T });
    await at(T);
    expect(await signingKid()).toBe(current.kid);
  });

  it('generates a key to sign with when the only key of an algorithm is not active yet', async () => {
    const future = await keyRow('EdDSA', { createdAt: T, activatesAt: T + HOUR });
    await at(T);
    expect(keyring.hasActive('EdDSA')).toBe(false);
    expect(publishedKids()).toContain(future.kid);
    const token = await keyring.sign({ sub: 'svc' }, 'EdDSA');
    const kid = decodeProtectedHeader(token).kid;
    expect(kid).not.toBe(future.kid);
    expect(publishedKids()).toEqual(expect.arrayContaining([future.kid, kid]));
  });

  it('breaks a tie in activation time by the greater kid, the same in every process', async () => {
    const a = await keyRow('EdDSA', { createdAt: T, activatesAt: T });
    const b = await keyRow('EdDSA', { createdAt: T, activatesAt: T });
    await at(T);
    expect(keyring.activeKids().get('EdDSA')).toBe(a.kid > b.kid ? a.kid : b.kid);
  });

  it('verifies tokens of the current key against a JWKS that also holds the retired and next keys', async () => {
    const token = await keyring.sign({ sub: 'svc' }, 'ES256');
    await expect(
      jwtVerify(token, createLocalJWKSet(parseJwks(keyring)), { typ: 'at+jwt' }),
    ).resolves.toBeDefined();
  });

  // Nothing calls reload() when time alone passes a boundary (only the change feed does), so the keyring
  // has to notice the boundary itself: the next key must start signing, and an expired retired key must go.
  it('starts signing with the next key at its activation time without a reload', async () => {
    now = T + 30 * MINUTE;
    expect(await signingKid()).toBe(next.kid);
  });

  it('drops an expired retired key from the JWKS without a reload', async () => {
    now = T - HOUR + MAX_TTL * 1000;
    expect(publishedKids()).not.toContain(old.kid);
  });

  it('never publishes a private member, even if one was stored in the public JWK', async () => {
    const { publicKey, privateKey } = await generateKeyPair('ES256', { extractable: true });
    const privateJwk = await exportJWK(privateKey);
    const kid = thumbprint(await exportJWK(publicKey));
    const stored = {
      kid,
      alg: 'ES256' as const,
      publicJwk: JSON.stringify(privateJwk),
      privateJwkSealed: await sealPrivateJwk(privateJwk, master, kid),
      createdAt: new Date(T).toISOString(),
      activatesAt: new Date(T + HOUR).toISOString(),
      retiredAt: null,
    };
    await store.changeSigningKeys(() => ({ insert: stored }));
    await at(T);
    expect(publishedKids()).toContain(kid);
    expect(keyring.jwks()).not.toContain(privateJwk.d!);
    for (const key of parseJwks(keyring).keys) {
      for (const member of PRIVATE_MEMBERS) expect(key).not.toHaveProperty(member);
    }
  });
});
