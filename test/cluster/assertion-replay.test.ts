/**
 * A private_key_jwt assertion is good once, whichever process it reaches (INTERFACE.md, "Client
 * authentication": a replay is refused across every instance). Real `tessera serve` processes: one instance
 * sent the same assertion twice; one instance with two workers (SQLite, then PostgreSQL) sent it over 20
 * connections at once, both workers taking some; two instances on one PostgreSQL without Redis (the ids go to
 * the store) and with Redis (they go to Redis), sent it one after the other and all at once. Each time: one
 * 200, every other answer exactly 401 invalid_client, and the audit trail says `assertion replayed`.
 *
 * The CLI cannot register a private_key_jwt client yet, so the test writes the client to the store the
 * instances share; they load it on its first use (a cache miss reads the store).
 *
 * The CLI loads dist/, so `npm run build` must have run (`npm test` does). Linux only (/proc).
 */
import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { decodeJwt, exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JWT_BEARER } from '../../src/domain/client-auth/index.js';
import { AssertionReplay, redisKeyOf } from '../../src/limits/replay.js';
import { openPostgresStore } from '../../src/store/postgres.js';
import { openSqliteStore } from '../../src/store/sqlite.js';
import type { Store } from '../../src/store/types.js';
import {
  complaints,
  startPostgresPair,
  stopPostgresPair,
  tokenEvents,
  type PostgresPair,
} from '../helpers/instances.js';
import { writeKeyClient } from '../helpers/key-client.js';
import { alive, childrenOf, connectionOwner, startedWith } from '../helpers/proc.js';
import { createTestDatabase, type TestDatabase } from '../helpers/postgres.js';
import { startServe, tesseraEnv, tesseraOk, type Serve } from '../helpers/process.js';
import { sendRawAtOnce, tokenRequest, type JsonAnswer } from '../helpers/raw-http.js';
import { testPrefix } from '../helpers/redis.js';
import { freePort, NO_BLOCKING, tempDir } from '../helpers/server.js';

const ISSUER = 'https://auth.tessera.test';
const API = 'https://api.example.com';
const REFUSED = { error: 'invalid_client', error_description: 'client authentication failed' };
const REPLAYED = 'invalid_client: assertion replayed';
/** How many connections carry the same assertion at once. */
const CONNECTIONS = 20;
const JWT = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

// --- the client and its assertions ---

interface KeyClient {
  id: string;
  privateKey: CryptoKey;
}

/** A new ES256 key pair and a private_key_jwt client (inline jwks, granted API), written to `store`. */
async function keyClient(store: Store): Promise<KeyClient> {
  const { privateKey, publicKey } = await generateKeyPair('ES256');
  const jwk: JWK = { ...(await exportJWK(publicKey)), kid: 'replay', alg: 'ES256', use: 'sig' };
  const id = await writeKeyClient(store, { name: 'replay test', audiences: [API], jwks: { keys: [jwk] } });
  return { id, privateKey };
}

interface Assertion {
  jwt: string;
  jti: string;
  exp: number;
  /** The token request carrying it, as a form body. */
  form: string;
}

/** One assertion, its jti fixed: aud is the issuer, which every instance shares. */
async function assertionOf(client: KeyClient): Promise<Assertion> {
  const now = Math.floor(Date.now() / 1000);
  const jti = `replay-${randomUUID()}`;
  const exp = now + 300;
  const jwt = await new SignJWT({ iss: client.id, sub: client.id, aud: ISSUER, iat: now, exp, jti })
    .setProtectedHeader({ alg: 'ES256', kid: 'replay' })
    .sign(client.privateKey);
  const form = new URLSearchParams({
    grant_type: 'client_credentials',
    client_assertion_type: JWT_BEARER,
    client_assertion: jwt,
    audience: API,
  }).toString();
  return { jwt, jti, exp, form };
}

// --- sending it ---

interface Answer extends JsonAnswer {
  /** The pid holding the server side of the connection (with `owners` to choose from), read before it closed. */
  owner: number | undefined;
}

/**
 * Sends `form` to each port of `ports`, one new connection each, all at once (sendRawAtOnce); with `owners`,
 * each connection stays open until the process that answered it is known.
 */
const sendAtOnce = (ports: number[], form: string, owners: number[] = []): Promise<Answer[]> =>
  sendRawAtOnce(
    ports,
    (port) => tokenRequest(port, form),
    (port, socket) => ({
      owner: owners.length > 0 ? connectionOwner(port, socket.localPort!, owners) : undefined,
    }),
  );

const send = async (port: number, form: string): Promise<Answer> => (await sendAtOnce([port], form))[0]!;

/** A token for `client`: 200 with the usual body and headers. */
function expectIssued(answer: Answer, client: KeyClient): void {
  expect({ status: answer.status, body: answer.body }).toEqual({
    status: 200,
    body: { access_token: expect.stringMatching(JWT), token_type: 'Bearer', expires_in: 1800 },
  });
  expect(answer.headers['cache-control']).toBe('no-store');
  expect(decodeJwt(answer.body.access_token as string)).toMatchObject({
    iss: ISSUER,
    sub: client.id,
    client_id: client.id,
    aud: API,
  });
}

/** Exactly 401 invalid_client, with its challenge and no-store. */
function expectRefused(answer: Answer): void {
  expect({ status: answer.status, body: answer.body }).toEqual({ status: 401, body: REFUSED });
  expect(answer.headers['www-authenticate']).toBe('Basic realm="tessera"');
  expect(answer.headers['cache-control']).toBe('no-store');
}

/** Of answers to one assertion, exactly one is a token and every other is exactly 401 invalid_client. */
function expectOneIssued(answers: Answer[], client: KeyClient, context: string): Answer {
  const summary = `${context}; answers: ${JSON.stringify(answers.map((a) => [a.port, a.status, a.body.error ?? 'token']))}`;
  const issued = answers.filter((a) => a.status === 200);
  expect(issued.length, summary).toBe(1);
  expectIssued(issued[0]!, client);
  const others = answers.filter((a) => a !== issued[0]);
  expect(others).toHaveLength(answers.length - 1);
  for (const answer of others) expectRefused(answer);
  return issued[0]!;
}

// --- the audit trail, through the CLI (tokenEvents) ---

const expectedEvents = (refused: number): string[] =>
  ['token.issued: ', ...Array<string>(refused).fill(`token.refused: ${REPLAYED}`)].sort();

// --- where the used ids are kept ---

const replayId = (client: KeyClient, assertion: Assertion) => AssertionReplay.idOf(client.id, assertion.jti);

/** expires_at of the assertion's id in PostgreSQL's assertion_jtis, or undefined if it has no row. */
async function pgJtiRow(url: string, id: string): Promise<number | undefined> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ expires_at: string }>(
      'SELECT expires_at FROM assertion_jtis WHERE id = $1',
      [id],
    );
    return rows[0] === undefined ? undefined : Number(rows[0].expires_at);
  } finally {
    await client.end();
  }
}

/** The same, in a SQLite file. */
function sqliteJtiRow(file: string, id: string): number | undefined {
  const db = new DatabaseSync(file, { readOnly: true });
  try {
    const row = db.prepare('SELECT expires_at FROM assertion_jtis WHERE id = ?').get(id) as
      { expires_at: number } | undefined;
    return row === undefined ? undefined : Number(row.expires_at);
  } finally {
    db.close();
  }
}

// --- the clusters under test ---

describe.each([
  { name: 'without Redis: the used ids go to the store', redis: false },
  { name: 'with Redis: the used ids go to Redis', redis: true },
])('two instances on one PostgreSQL, $name', ({ redis }) => {
  let pair: PostgresPair | undefined;
  let db: TestDatabase;
  let env: NodeJS.ProcessEnv;
  let store: Store;
  let instances: Serve[] = [];
  const prefix = testPrefix();

  beforeAll(async () => {
    pair = await startPostgresPair(ISSUER, 'tessera-replay-', NO_BLOCKING, redis ? prefix : undefined);
    ({ db, env, instances } = pair);
    await tesseraOk(env, 'audience', 'add', API);
    store = openPostgresStore(db.url, { max: 2 });
  }, 90_000);

  afterAll(async () => {
    await stopPostgresPair(pair, store);
  });

  /** Where the assertion's id is recorded: in Redis (and not the store) with Redis, else in the store. */
  async function expectRecorded(client: KeyClient, assertion: Assertion): Promise<void> {
    const id = replayId(client, assertion);
    const until = (assertion.exp + 60) * 1000;
    if (redis) {
      const ttl = await pair!.redisClient!.pttl(redisKeyOf(prefix, id));
      // Set with PX until - now when the first request was checked, a moment ago.
      expect(ttl).toBeGreaterThan(until - Date.now() - 30_000);
      expect(ttl).toBeLessThanOrEqual(until - Date.now() + 1000);
      expect(await pgJtiRow(db.url, id)).toBeUndefined();
    } else {
      expect(await pgJtiRow(db.url, id)).toBe(until);
    }
  }

  it('the same instance twice: 200, then exactly 401 invalid_client; the audit trail says why', async () => {
    const [a] = instances as [Serve, Serve];
    const client = await keyClient(store);
    const assertion = await assertionOf(client);
    expectIssued(await send(a.port, assertion.form), client);
    const again = await send(a.port, assertion.form);
    expectRefused(again);
    await expectRecorded(client, assertion);
    expect(await tokenEvents(env, client.id, 2)).toEqual(expectedEvents(1));
    expect(complaints(instances)).toEqual([]);
  });

  it('sent to A, then to B: 200, then exactly 401 invalid_client', async () => {
    const [a, b] = instances as [Serve, Serve];
    const client = await keyClient(store);
    const assertion = await assertionOf(client);
    expectIssued(await send(a.port, assertion.form), client);
    expectRefused(await send(b.port, assertion.form));
    // And back to A.
    expectRefused(await send(a.port, assertion.form));
    await expectRecorded(client, assertion);
    expect(await tokenEvents(env, client.id, 3)).toEqual(expectedEvents(2));
    expect(complaints(instances)).toEqual([]);
  });

  it(`sent to A and B at once over ${CONNECTIONS} connections: exactly one 200`, async () => {
    const [a, b] = instances as [Serve, Serve];
    const client = await keyClient(store);
    const assertion = await assertionOf(client);
    const ports = Array.from({ length: CONNECTIONS }, (_, i) => (i % 2 === 0 ? a.port : b.port));
    const answers = await sendAtOnce(ports, assertion.form);
    const winner = expectOneIssued(answers, client, JSON.stringify(complaints(instances)));
    console.log(
      `${redis ? 'Redis' : 'store'}: one assertion on ${CONNECTIONS} connections to A and B at once: ` +
        `the token from ${winner.port === a.port ? 'A' : 'B'}, ${CONNECTIONS - 1} × 401`,
    );
    await expectRecorded(client, assertion);
    expect(await tokenEvents(env, client.id, CONNECTIONS)).toEqual(expectedEvents(CONNECTIONS - 1));
    expect(complaints(instances)).toEqual([]);
  });
});

describe.each([
  { name: 'SQLite', postgres: false },
  { name: 'PostgreSQL', postgres: true },
])('one instance with TESSERA_WORKERS=2 on $name, no Redis', ({ postgres }) => {
  let db: TestDatabase | undefined;
  let dataDir: string;
  let env: NodeJS.ProcessEnv;
  let serve: Serve | undefined;
  let workers: number[] = [];
  let client: KeyClient;
  const jtiRow = (id: string) =>
    postgres ? pgJtiRow(db!.url, id) : Promise.resolve(sqliteJtiRow(path.join(dataDir, 'tessera.db'), id));

  beforeAll(async () => {
    dataDir = tempDir('tessera-replay-workers-');
    if (postgres) db = await createTestDatabase();
    env = tesseraEnv({
      TESSERA_DATA_DIR: dataDir,
      ...(db ? { TESSERA_DATABASE_URL: db.url } : {}),
      TESSERA_ISSUER: ISSUER,
      TESSERA_HOST: '127.0.0.1',
      TESSERA_PORT: String(await freePort()),
      // info: the test waits for both workers' "tessera is listening".
      TESSERA_LOG_LEVEL: 'info',
      TESSERA_WORKERS: '2',
      TESSERA_SHUTDOWN_DELAY: '0',
      ...NO_BLOCKING,
    });
    // The CLI makes the store (migrations) and the audience; the test adds the key client, before the start.
    await tesseraOk(env, 'audience', 'add', API);
    const store = postgres
      ? openPostgresStore(db!.url, { max: 1 })
      : openSqliteStore(path.join(dataDir, 'tessera.db'));
    try {
      client = await keyClient(store);
    } finally {
      await store.close();
    }
    serve = await startServe(env);
    await serve.waitForLog('tessera is listening', 2, 30_000);
    workers = childrenOf(serve.pid);
  }, 90_000);

  afterAll(async () => {
    if (serve) {
      const children = alive(serve.pid) ? childrenOf(serve.pid) : workers;
      await serve.stop('SIGKILL');
      for (const pid of new Set([...children, ...workers]))
        if (alive(pid) && startedWith(pid, dataDir)) process.kill(pid, 'SIGKILL');
    }
    await db?.drop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it(`one assertion on ${CONNECTIONS} connections at once, both workers answering: exactly one 200`, async () => {
    expect(workers).toHaveLength(2);
    const assertion = await assertionOf(client);
    const answers = await sendAtOnce(Array<number>(CONNECTIONS).fill(serve!.port), assertion.form, workers);
    const owners = answers.map((a) => a.owner);
    // Both workers answered some of them (connections are handed out in turn).
    expect(
      [...new Set(owners)].sort((x, y) => x! - y!),
      JSON.stringify(owners),
    ).toEqual(workers);
    const winner = expectOneIssued(answers, client, JSON.stringify(complaints([serve!])));
    const perWorker = workers.map((pid) => owners.filter((o) => o === pid).length);
    console.log(
      `${postgres ? 'PostgreSQL' : 'SQLite'}, 2 workers: ${perWorker.join(' + ')} connections; ` +
        `the token from worker ${workers.indexOf(winner.owner!) + 1}, ${CONNECTIONS - 1} × 401`,
    );
    expect(await jtiRow(replayId(client, assertion))).toBe((assertion.exp + 60) * 1000);
    expect(await tokenEvents(env, client.id, CONNECTIONS)).toEqual(expectedEvents(CONNECTIONS - 1));
    // Then again on each worker, one at a time: still refused.
    for (let i = 0; i < 4; i++) expectRefused(await send(serve!.port, assertion.form));
    expect(complaints([serve!])).toEqual([]);
  });
});
