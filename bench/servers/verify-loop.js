/* global console, process */
// The rest of each path's physical limit on one core (bench/README.md, "Each path's limit"), beside the signature
// (sign-loop.js): what one verification and one replay record cost when nothing else runs, each in a tight loop,
// pinned like a server. Prints {"verifications": …} on one line, µs each:
//
// - es256Crypto: an ES256 JWS checked by node:crypto's verify (ieee-p1363) with a key imported once, the
//   JWS split and its signature decoded first: how Tessera checks a DPoP proof's signature (domain/dpop.ts) and
//   its own access tokens (domain/own-tokens.ts: introspection, a token exchange's subject token);
// - es256Jose: a client assertion (ES256, the bench's load generator's) verified by jose's jwtVerify against a
//   createLocalJWKSet of the client's JWK Set, with Tessera's options (issuer, subject, audience, required
//   claims, clock tolerance): how Tessera verifies a private_key_jwt assertion (client-auth/assertion.ts);
// - rs256Jose: a Kubernetes projected service-account token (RS256, 2048 bits) verified the same way: a
//   federated credential's platform token (client-auth/federated.ts);
// - rs256Crypto: the same RS256 token by node:crypto alone, for comparison;
// - replayRecord: one replay guard's record on SQLite as cheaply as node:sqlite makes it: the SHA-256 of
//   `<client id> <jti>` (base64url), then Tessera's statement (INSERT … ON CONFLICT DO UPDATE … WHERE expired
//   RETURNING id into its assertion_jtis table and index), prepared once, REPLAY_BATCH records a transaction (a
//   turn's, as Tessera's per-turn writes), WAL with synchronous = NORMAL as Tessera opens its store.
//
// The best of three runs of each: the cost of the work, not of whatever else the machine did meanwhile.
import { createHash, generateKeyPairSync, randomBytes, sign, verify } from 'node:crypto';
import { Buffer } from 'node:buffer';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { DatabaseSync } from 'node:sqlite';
import { createLocalJWKSet, jwtVerify } from 'jose';

const SECONDS = Number(process.env.BENCH_VERIFY_SECONDS ?? 1.5);
/** Replay records a transaction: a turn's private_key_jwt or DPoP requests, recorded together. */
const REPLAY_BATCH = 16;
const CLIENT = 'bench-client';
const ENDPOINT = 'http://127.0.0.1/oauth/token';

const b64 = (value) => Buffer.from(JSON.stringify(value)).toString('base64url');

/** A compact JWS of `claims` under `header`, signed by `privateKey` with node:crypto's `options`. */
function jws(header, claims, key) {
  const input = `${b64(header)}.${b64(claims)}`;
  return `${input}.${sign('sha256', Buffer.from(input), key).toString('base64url')}`;
}

/** µs per call of `once` (synchronous), the best of three runs after a warm-up. */
function loop(once) {
  const run = (ms) => {
    let n = 0;
    const started = performance.now();
    const until = started + ms;
    while (performance.now() < until) {
      for (let i = 0; i < 100; i++) once();
      n += 100;
    }
    return ((performance.now() - started) * 1000) / n;
  };
  run(300);
  const third = (SECONDS * 1000) / 3;
  return Math.min(run(third), run(third), run(third));
}

/** µs per call of `once` (a promise), awaited one after the other, the best of three runs after a warm-up. */
async function asyncLoop(once) {
  const run = async (ms) => {
    let n = 0;
    const started = performance.now();
    const until = started + ms;
    while (performance.now() < until) {
      for (let i = 0; i < 100; i++) await once();
      n += 100;
    }
    return ((performance.now() - started) * 1000) / n;
  };
  await run(300);
  const third = (SECONDS * 1000) / 3;
  return Math.min(await run(third), await run(third), await run(third));
}

/** A check as Tessera's signatureCheck: split, decode, one node:crypto verify; throws if it does not hold. */
function cryptoCheck(token, key) {
  const dot = token.lastIndexOf('.');
  const input = Buffer.from(token.slice(0, dot), 'latin1');
  const signature = Buffer.from(token.slice(dot + 1), 'base64url');
  if (!verify('sha256', input, key, signature)) throw new Error('the signature does not verify');
}

const now = Math.floor(Date.now() / 1000);

// ES256: a client assertion as the load generator makes them (lib/assertions.js).
const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const ecJwk = { ...ec.publicKey.export({ format: 'jwk' }), kid: 'bench', alg: 'ES256', use: 'sig' };
const assertion = jws(
  { alg: 'ES256', kid: 'bench', typ: 'JWT' },
  {
    iss: CLIENT,
    sub: CLIENT,
    aud: ENDPOINT,
    iat: now,
    exp: now + 300,
    jti: randomBytes(12).toString('base64url'),
  },
  { key: ec.privateKey, dsaEncoding: 'ieee-p1363' },
);
const ecKeys = createLocalJWKSet({ keys: [ecJwk] });
const ecCheckKey = { key: ec.publicKey, dsaEncoding: 'ieee-p1363' };

// RS256: a projected service-account token as the federated scenario's (lib/assertions.js, platformToken).
const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
const rsaJwk = { ...rsa.publicKey.export({ format: 'jwk' }), kid: 'cluster', alg: 'RS256', use: 'sig' };
const platform = jws(
  { alg: 'RS256', kid: 'cluster' },
  {
    aud: ['https://tessera.bench.example'],
    exp: now + 3600,
    iat: now,
    iss: 'https://kubernetes.default.svc.cluster.local',
    sub: 'system:serviceaccount:bench:bench',
  },
  rsa.privateKey,
);
const rsaKeys = createLocalJWKSet({ keys: [rsaJwk] });

const es256Crypto = loop(() => cryptoCheck(assertion, ecCheckKey));
const rs256Crypto = loop(() => cryptoCheck(platform, rsa.publicKey));
const es256Jose = await asyncLoop(() =>
  jwtVerify(assertion, ecKeys, {
    algorithms: ['ES256', 'RS256', 'PS256', 'EdDSA', 'Ed25519', 'ES384'],
    issuer: CLIENT,
    subject: CLIENT,
    audience: ['http://127.0.0.1', ENDPOINT],
    clockTolerance: 60,
    requiredClaims: ['exp', 'jti'],
  }),
);
const rs256Jose = await asyncLoop(() =>
  jwtVerify(platform, rsaKeys, {
    algorithms: ['ES256', 'RS256', 'PS256', 'EdDSA', 'Ed25519', 'ES384'],
    issuer: 'https://kubernetes.default.svc.cluster.local',
    subject: 'system:serviceaccount:bench:bench',
    audience: 'https://tessera.bench.example',
    clockTolerance: 60,
  }),
);

// The replay record: Tessera's table, index and statement (store/migrations.ts, store/kysely/assertion-jtis.ts).
const dir = mkdtempSync(join(tmpdir(), 'tessera-bench-replay-'));
let replayRecord;
try {
  const db = new DatabaseSync(join(dir, 'replay.db'));
  db.exec(`
    PRAGMA journal_mode = WAL;
    PRAGMA synchronous = NORMAL;
    CREATE TABLE assertion_jtis (id text PRIMARY KEY, expires_at bigint NOT NULL);
    CREATE INDEX assertion_jtis_expires_idx ON assertion_jtis (expires_at);
  `);
  const use = db.prepare(
    'insert into "assertion_jtis" ("id", "expires_at") values (?, ?) on conflict ("id") do update set ' +
      '"expires_at" = "excluded"."expires_at" where "assertion_jtis"."expires_at" <= ? returning "id"',
  );
  const prefix = randomBytes(9).toString('base64url');
  let counter = 0;
  let inBatch = 0;
  const expiresAt = Date.now() + 360_000;
  replayRecord = loop(() => {
    if (inBatch === 0) db.exec('BEGIN IMMEDIATE');
    const id = createHash('sha256').update(`${CLIENT} ${prefix}.${counter++}`).digest('base64url');
    if (use.get(id, expiresAt, Date.now()) === undefined) throw new Error('a fresh jti taken for a replay');
    if (++inBatch === REPLAY_BATCH) {
      db.exec('COMMIT');
      inBatch = 0;
    }
  });
  if (inBatch > 0) db.exec('COMMIT');
  db.close();
} finally {
  rmSync(dir, { recursive: true, force: true });
}

console.log(
  JSON.stringify({
    verifications: {
      es256Crypto,
      es256Jose,
      rs256Jose,
      rs256Crypto,
      replayRecord,
      replayBatch: REPLAY_BATCH,
    },
  }),
);
