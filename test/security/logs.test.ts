import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { connect } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clients } from '../../src/management/index.js';
import { EVERY_SCOPE } from '../../src/management/context.js';
import { createTestDatabase, type TestDatabase } from '../helpers/postgres.js';
import { tessera } from '../helpers/process.js';
import {
  basic,
  freePort,
  startTestServer,
  startWithClient,
  type TestClient,
  type TestServer,
} from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';

/**
 * What Tessera writes to its log, at the most verbose level (trace), over a full flow: tokens in every
 * encoding and method, every kind of refusal, HTTP parser errors, a 500, a store outage and a 503, and
 * store writes by the CLI and as the CLI makes them. No line may carry a client secret, an access token
 * (or its signature), an Authorization header value or the PostgreSQL password, in any form (Buffers
 * included, which pino writes as arrays of bytes); every line is JSON.
 *
 * The flow runs on PostgreSQL, with a password in TESSERA_DATABASE_URL, and cuts its connections once: the
 * password and the outage are half of what is checked, so without a PostgreSQL the test fails (as the
 * store's PostgreSQL tests do) rather than pass on SQLite having checked neither.
 */

const X = 'https://x.api.example.com';
const Y = 'https://y.api.example.com';
const FORM = 'application/x-www-form-urlencoded';

interface Secret {
  label: string;
  value: string;
}

/** Everything that must never appear in a log line. */
const secrets: Secret[] = [];
const keep = (label: string, value: string) => {
  if (value.length >= 8) secrets.push({ label, value });
};

let sourceCounter = 0;
const nextSource = () => {
  const n = ++sourceCounter;
  return `10.77.${(n >> 8) & 255}.${n & 255}`;
};

async function post(
  url: string,
  body: string | undefined,
  headers: Record<string, string>,
  source = nextSource(),
): Promise<{ status: number; body: Record<string, unknown> }> {
  if (headers.authorization) keep('an Authorization header', headers.authorization);
  const response = await fetch(`${url}/oauth/token`, {
    method: 'POST',
    headers: { 'x-forwarded-for': source, ...headers },
    body,
  });
  const text = await response.text();
  const parsed = text ? (JSON.parse(text) as Record<string, unknown>) : {};
  if (typeof parsed.access_token === 'string') {
    keep('an access token', parsed.access_token);
    keep('an access token signature', parsed.access_token.split('.')[2]!);
  }
  return { status: response.status, body: parsed };
}

/** Sends raw bytes; resolves with what came back when the server closes or after `waitMs`. */
function raw(port: number, data: string, waitMs = 1500): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let out = '';
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(out);
    };
    const timer = setTimeout(done, waitMs);
    socket.setEncoding('latin1').on('data', (chunk: string) => (out += chunk));
    socket.on('close', done);
    socket.on('error', () => undefined);
    socket.write(data);
  });
}

/** Every string a log line holds, Buffers (as pino writes them: {type:'Buffer', data:[...]}) decoded. */
function strings(value: unknown, out: string[] = []): string[] {
  if (typeof value === 'string') out.push(value);
  else if (Array.isArray(value)) {
    if (value.length > 0 && value.every((b) => Number.isInteger(b) && b >= 0 && b <= 255))
      out.push(Buffer.from(value as number[]).toString('latin1'));
    for (const v of value) strings(v, out);
  } else if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      out.push(k);
      strings(v, out);
    }
  }
  return out;
}

/** Which secrets appear in which lines (described by level and message, never by the secret itself). */
function leaks(lines: string[], needles: Secret[]): string[] {
  const found = new Set<string>();
  lines.forEach((line, i) => {
    let parsed: Record<string, unknown> = {};
    try {
      parsed = JSON.parse(line) as Record<string, unknown>;
    } catch {
      // reported by the JSON test
    }
    const haystack = [line, ...strings(parsed)];
    // Percent- and form-encoded forms of a secret count too.
    for (const { label, value } of needles) {
      const forms = [value, encodeURIComponent(value), Buffer.from(value).toString('base64')];
      if (haystack.some((h) => forms.some((f) => h.includes(f))))
        found.add(`${label} in log line ${i} (level ${String(parsed.level)}, msg "${String(parsed.msg)}")`);
    }
  });
  return [...found].sort();
}

describe('log lines at trace level over a full flow', () => {
  const lines: string[] = [];
  let db: TestDatabase;
  let databaseUrl: string;
  let pgPassword: string;
  let t: TestServer;
  let port: number;
  const statuses: Record<string, number> = {};
  let serverError: { status: number; body: Record<string, unknown> } | undefined;
  let cliOutputs: string[] = [];
  /** The server's PostgreSQL connections cut for the outage. */
  let terminated = 0;

  beforeAll(async () => {
    try {
      db = await createTestDatabase();
    } catch (error) {
      throw new Error(
        `this test needs PostgreSQL (TESSERA_TEST_PG_URL, default 127.0.0.1:5432): ${(error as Error).message}`,
        { cause: error },
      );
    }
    pgPassword = `pg-${randomBytes(12).toString('hex')}`;
    const u = new URL(db.url);
    u.password = pgPassword; // the machine's PostgreSQL trusts local connections; the password must still never be logged
    databaseUrl = u.toString();
    keep('the PostgreSQL password', pgPassword);
    t = await startTestServer(
      {
        TESSERA_LOG_LEVEL: 'trace',
        TESSERA_TRUST_PROXY: 'loopback',
        TESSERA_REQUEST_TIMEOUT: '1',
        TESSERA_DATABASE_URL: databaseUrl,
      },
      (chunk) => lines.push(...chunk.split('\n').filter((l) => l !== '')),
    );
    port = Number(new URL(t.url).port);
    const store = t.server.runtime.store;

    // --- store writes as the CLI makes them ---
    await t.addAudience(X);
    await t.addAudience(Y);
    const track = (name: string, c: TestClient) => {
      keep(`the secret of client ${name}`, c.secret);
      return c;
    };
    const a = track('A', await t.createClient([X]));
    const b = track('B (disabled)', await t.createClient([X]));
    await store.updateClient(b.id, { enabled: false });
    const c = track('C', await t.createClient([Y]));
    const { secret: rotated } = await clients.rotateSecret(
      { store, config: t.config, actor: 'cli:test', holds: EVERY_SCOPE },
      c.id,
    );
    keep('a rotated secret', rotated);
    await store.addGrant(c.id, X);
    await store.removeGrant(c.id, X);
    const d = track('D (deleted)', await t.createClient([X]));
    await store.deleteClient(d.id);
    const uncached = track('E (uncached)', await t.createClient([X])); // never used until the store is gone
    await t.sync();

    // --- the real CLI, on the same store ---
    const cliEnv = {
      PATH: process.env.PATH,
      TESSERA_DATA_DIR: t.dataDir,
      TESSERA_MASTER_KEY: t.config.masterKey,
      TESSERA_LOG_LEVEL: 'trace',
      TESSERA_DATABASE_URL: databaseUrl,
    };
    const created = await tessera(cliEnv, 'client', 'create', '--name', 'cli client', '--grant', X, '--json');
    expect(created.code).toBe(0);
    const cliClient = created.json as { client_id: string; client_secret: string };
    keep('the secret of the CLI client', cliClient.client_secret);
    const rotatedByCli = await tessera(cliEnv, 'client', 'rotate-secret', cliClient.client_id, '--json');
    expect(rotatedByCli.code).toBe(0);
    const cliSecret = (rotatedByCli.json as { client_secret: string }).client_secret;
    keep('the rotated secret of the CLI client', cliSecret);
    // The CLI against a PostgreSQL that is not there: its error must not show the password either.
    const closedPort = await freePort();
    const failing = await tessera(
      {
        ...cliEnv,
        TESSERA_DATABASE_URL: `postgres://tessera:${pgPassword}@127.0.0.1:${closedPort}/tessera`,
      },
      'client',
      'list',
    );
    expect(failing.code).not.toBe(0);
    cliOutputs = [created.stderr, rotatedByCli.stderr, failing.stdout, failing.stderr];
    await t.sync();

    // --- tokens: form, JSON, Basic ---
    const good = { grant_type: 'client_credentials', client_id: a.id, client_secret: a.secret, audience: X };
    const formOf = (p: Record<string, string>) => new URLSearchParams(p).toString();
    const form = (p: Record<string, string>, h: Record<string, string> = {}, source?: string) =>
      post(t.url, formOf(p), { 'content-type': FORM, ...h }, source);
    const json = (p: unknown, h: Record<string, string> = {}) =>
      post(t.url, typeof p === 'string' ? p : JSON.stringify(p), {
        'content-type': 'application/json',
        ...h,
      });
    const record = (name: string, answer: { status: number }) => (statuses[name] = answer.status);

    record('form', await form(good));
    record('json', await json(good));
    record(
      'basic',
      await form({ grant_type: 'client_credentials', audience: X }, { authorization: basic(a.id, a.secret) }),
    );
    record('resource', await form({ ...good, audience: '', resource: X }));
    record('cli client', await form({ ...good, client_id: cliClient.client_id, client_secret: cliSecret }));
    record('rotated', await form({ ...good, client_id: c.id, client_secret: rotated, audience: Y }));

    // --- every kind of refusal, each carrying a real secret somewhere ---
    record('unknown client', await form({ ...good, client_id: 'no-such-client' }));
    record('wrong secret', await form({ ...good, client_secret: `${a.secret}x` }));
    record('old secret', await form({ ...good, client_id: c.id, client_secret: c.secret, audience: Y }));
    record('disabled', await form({ ...good, client_id: b.id, client_secret: b.secret }));
    record('deleted', await form({ ...good, client_id: d.id, client_secret: d.secret }));
    record(
      'wrong Basic',
      await form(
        { grant_type: 'client_credentials', audience: X },
        { authorization: basic(a.id, `${a.secret}x`) },
      ),
    );
    record(
      'Basic without colon',
      await form({ audience: X }, { authorization: `Basic ${Buffer.from(a.secret).toString('base64')}` }),
    );
    record(
      'Basic bad percent',
      await form(
        { audience: X },
        { authorization: `Basic ${Buffer.from(`%zz:${a.secret}`).toString('base64')}` },
      ),
    );
    record('Basic not base64', await form({ audience: X }, { authorization: `Basic ${a.secret}!` }));
    record('Bearer', await form({ audience: X }, { authorization: `Bearer ${a.secret}` }));
    record('two methods', await form(good, { authorization: basic(a.id, a.secret) }));
    record(
      'Basic other id',
      await form({ ...good, client_secret: '', client_id: b.id }, { authorization: basic(a.id, a.secret) }),
    );
    for (const missing of ['client_id', 'grant_type', 'audience'] as const)
      record(`missing ${missing}`, await form({ ...good, [missing]: '' }));
    record('missing secret', await form({ ...good, client_secret: '' }));
    record('twice', await post(t.url, `${formOf(good)}&client_secret=${a.secret}`, { 'content-type': FORM }));
    record('audience and resource', await form({ ...good, resource: X }));
    record('unsupported grant', await form({ ...good, grant_type: 'password' }));
    record('not registered', await form({ ...good, audience: 'https://nowhere.example.com' }));
    record('not granted', await form({ ...good, audience: Y }));
    record('scope', await form({ ...good, scope: 'read' }));
    record('malformed JSON', await json(`{"client_secret":"${a.secret}", "client_id": ${a.secret}}`));
    record('JSON not a string', await json({ ...good, audience: [a.secret] }));
    record('JSON not an object', await json(`["${a.secret}"]`));
    record('JSON __proto__', await json(`{"__proto__":{"x":"${a.secret}"},"client_secret":"${a.secret}"}`));
    record(
      '415',
      await post(t.url, formOf(good), { 'content-type': 'text/plain', authorization: basic(a.id, a.secret) }),
    );
    record(
      '413',
      await form({ ...good, padding: a.secret.repeat(200) }, { authorization: basic(a.id, a.secret) }),
    );
    const put = await fetch(`${t.url}/oauth/token`, {
      method: 'PUT',
      headers: { 'content-type': FORM, authorization: basic(a.id, a.secret) },
      body: formOf(good),
    });
    record('405', { status: put.status });
    // 429: ten wrong secrets from one address, then an eleventh (the right one would still pass).
    const source = nextSource();
    for (let i = 0; i < 10; i++) await form({ ...good, client_secret: `${a.secret}${i}` }, {}, source);
    record('429', await form({ ...good, client_secret: `${a.secret}x` }, {}, source));
    // 408: half a body with the secret in it, then nothing (TESSERA_REQUEST_TIMEOUT=1).
    const half = formOf(good);
    const timedOut = await raw(
      port,
      `POST /oauth/token HTTP/1.1\r\nHost: x\r\nAuthorization: ${basic(a.id, a.secret)}\r\nContent-Type: ${FORM}\r\n` +
        `Content-Length: ${half.length + 50}\r\n\r\n${half}`,
      3000,
    );
    statuses['408'] = Number(/^HTTP\/1\.1 (\d+)/.exec(timedOut)?.[1]);

    // HTTP parser errors: Node hands Fastify the bytes it choked on, credentials included.
    const auth = basic(a.id, a.secret);
    keep('an Authorization header', auth);
    const full = `POST /oauth/token HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth}\r\nContent-Type: ${FORM}\r\nContent-Length: ${half.length}\r\n\r\n${half}`;
    await raw(port, `${full}\u0000garbage\r\n\r\n`, 500); // a request, then junk
    await raw(
      port,
      `POST /oauth/token HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth}\r\nBad Header: x\r\n\r\n`,
      500,
    );
    await raw(
      port,
      `POST /oauth/token HTTP/1.1\r\nAuthorization: ${auth}\r\nX-Pad: ${'a'.repeat(20_000)}\r\n\r\n`,
      500,
    );

    // --- a 500: the signer fails unexpectedly (patched in this process; src is untouched) ---
    const keyring = t.server.runtime.keyring;
    const sign = keyring.sign.bind(keyring);
    keyring.sign = () => Promise.reject(new TypeError(`cannot sign for ${a.id}`));
    try {
      serverError = await form(good);
    } finally {
      keyring.sign = sign;
    }
    record('after the 500', await form(good));

    // --- a store outage: every PostgreSQL connection of the server is cut, then it comes back ---
    const loggedSince = (from: number, msg: string) =>
      lines.slice(from).some((line) => (JSON.parse(line) as { msg?: string }).msg === msg);
    const cutAt = lines.length;
    const name = new URL(db.url).pathname.slice(1);
    const admin = new pg.Client({ connectionString: new URL('/postgres', db.url).toString() });
    await admin.connect();
    const cut = await admin.query(
      'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
      [name],
    );
    await admin.end();
    terminated = cut.rowCount ?? 0;
    // The server noticed (its change listener was cut) and is back.
    await waitFor(() => loggedSince(cutAt, 'the change listener is back'), 10_000);
    record('after the outage', await form(good));

    // --- the store gone for good: an uncached client is a 503 ---
    await store.close();
    record('503', await form({ ...good, client_id: uncached.id, client_secret: uncached.secret }));
    await t.server.runtime.directory.poll(); // a read of the failing feed, logged (an event, not a wait)
  }, 60_000);

  afterAll(async () => {
    await t?.server.app.close().catch(() => undefined);
    await t?.server.runtime.close().catch(() => undefined);
    if (t) rmSync(t.dataDir, { recursive: true, force: true });
    await db?.drop();
  });

  it('the flow did what it was meant to', () => {
    expect(statuses).toEqual({
      form: 200,
      json: 200,
      basic: 200,
      resource: 200,
      'cli client': 200,
      rotated: 200,
      'unknown client': 401,
      'wrong secret': 401,
      'old secret': 401,
      disabled: 401,
      deleted: 401,
      'wrong Basic': 401,
      'Basic without colon': 401,
      'Basic bad percent': 401,
      'Basic not base64': 401,
      Bearer: 401,
      'two methods': 400,
      'Basic other id': 400,
      'missing client_id': 400,
      'missing grant_type': 400,
      'missing audience': 400,
      'missing secret': 400,
      twice: 400,
      'audience and resource': 400,
      'unsupported grant': 400,
      'not registered': 400,
      'not granted': 400,
      scope: 400,
      'malformed JSON': 400,
      'JSON not a string': 400,
      'JSON not an object': 400,
      'JSON __proto__': 400,
      '415': 415,
      '413': 413,
      '405': 405,
      '429': 429,
      '408': 408,
      'after the 500': 200,
      'after the outage': 200,
      '503': 503,
    });
    expect(terminated).toBeGreaterThan(0); // the outage did cut the server's connections
    expect(serverError).toEqual({
      status: 500,
      body: { error: 'server_error', error_description: 'the server met an unexpected condition' },
    });
    expect(lines.length).toBeGreaterThan(20);
  });

  it('every line is one JSON object with a level, a time and a message or an error', () => {
    const bad = lines.filter((line) => {
      try {
        const parsed = JSON.parse(line) as Record<string, unknown>;
        return (
          typeof parsed !== 'object' || typeof parsed.level !== 'number' || typeof parsed.time !== 'number'
        );
      } catch {
        return true;
      }
    });
    expect(bad).toEqual([]);
  });

  it('refusals are logged at debug, the 500 at error with its cause, the outage at error', () => {
    const parsed = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(parsed.filter((p) => p.msg === 'request refused').length).toBeGreaterThan(20);
    const unexpected = parsed.find((p) => p.msg === 'unexpected error');
    expect(unexpected).toMatchObject({ level: 50, err: { type: 'TypeError' } });
    expect(parsed.some((p) => p.level === 50 && /store/.test(String(p.msg)))).toBe(true);
  });

  it('no line carries a client secret, an access token or its signature, an Authorization header value or the PostgreSQL password', () => {
    expect(secrets.filter((s) => s.label.startsWith('an access token')).length).toBeGreaterThanOrEqual(12);
    expect(leaks(lines, secrets)).toEqual([]);
  });

  it('the CLI does not print the PostgreSQL password, even when the database cannot be reached', () => {
    expect(secrets.map((s) => s.label)).toContain('the PostgreSQL password');
    expect(cliOutputs[3]).toMatch(/^tessera: /); // the failing run said why, and that was read
    for (const output of cliOutputs) expect(output).not.toContain(pgPassword);
  });
});

describe('HTTP parser errors at trace level', () => {
  let t: TestServer;
  const lines: string[] = [];
  let client: TestClient;

  beforeAll(async () => {
    ({ t, client } = await startWithClient(X, { TESSERA_LOG_LEVEL: 'trace' }, (chunk) =>
      lines.push(...chunk.split('\n').filter((l) => l !== '')),
    ));
  });
  afterAll(async () => t?.close());

  it.each([
    [
      'a good token request followed by junk',
      (auth: string, body: string) =>
        `POST /oauth/token HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth}\r\nContent-Type: ${FORM}\r\nContent-Length: ${body.length}\r\n\r\n${body}\u0000junk\r\n\r\n`,
    ],
    [
      'an invalid header after the Authorization header',
      (auth: string) =>
        `POST /oauth/token HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth}\r\nBad Header: x\r\n\r\n`,
    ],
    [
      'headers over the size limit (431)',
      (auth: string) =>
        `POST /oauth/token HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth}\r\nX-Pad: ${'a'.repeat(20_000)}\r\n\r\n`,
    ],
  ])('%s: the bytes Node could not parse are not logged', async (_name, request) => {
    const auth = basic(client.id, client.secret);
    const body = new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: client.id,
      client_secret: client.secret,
      audience: X,
    }).toString();
    const before = lines.length;
    const port = Number(new URL(t.url).port);
    const answer = await raw(port, request(auth, body), 500);
    expect(answer).toMatch(/^HTTP\/1\.1 4\d\d /);
    const fresh = lines.slice(before);
    expect(fresh.length).toBeGreaterThan(0); // the parser error is logged (at trace) ...
    expect(
      leaks(fresh, [
        { label: 'the client secret', value: client.secret },
        { label: 'the Authorization header', value: auth },
      ]),
    ).toEqual([]); // ... but not what the client sent
  });
});
