/**
 * `tessera serve --workers 2` as an operator runs it: a real primary process with two real workers on a fresh
 * SQLite data directory. Which worker answered a connection is read from /proc (the server side of the TCP
 * connection belongs to exactly one worker), so "both workers answer" is checked, not assumed.
 *
 * The CLI loads dist/, so `npm run build` must have run (`npm test` does). Linux only (/proc).
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify, type JSONWebKeySet } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { provisionWithCli } from '../helpers/provision.js';
import { alive, childrenOf, connectionOwner, connectionsHeldBy, startedWith } from '../helpers/proc.js';
import { exitWithin, spawnServe, tessera, tesseraEnv, type Serve } from '../helpers/process.js';
import { getRequest, openSocket, readResponse, tokenRequest, type RawResponse } from '../helpers/raw-http.js';
import { freePort } from '../helpers/server.js';
import { pollUntil, waitFor } from '../helpers/wait.js';

// --- processes ---

const AUDIENCE = 'https://api.example.com';
const JWT = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

// --- raw HTTP/1.1 over one TCP connection ---

/** POSTs a form body through `agent`; rejects on a network error or after `ms`. */
function post(
  agent: Agent,
  port: number,
  target: string,
  body: string,
  ms: number,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        agent,
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: target,
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          'content-length': Buffer.byteLength(body),
        },
        timeout: ms,
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.once('end', () => resolve({ status: res.statusCode!, body: text }));
        res.once('error', reject);
      },
    );
    req.once('timeout', () => req.destroy(new Error(`no answer within ${ms} ms`)));
    req.once('error', reject);
    req.end(body);
  });
}

/**
 * Sends one request on a new connection and reads the answer; the connection stays open until the owner
 * (the worker holding its server side) has been read from /proc, then is closed.
 */
async function onNewConnection(
  port: number,
  request: string,
  workers: number[],
): Promise<RawResponse & { owner: number | undefined }> {
  const socket = await openSocket(port);
  try {
    const answer = readResponse(socket);
    socket.write(request);
    const response = await answer;
    return { ...response, owner: connectionOwner(port, socket.localPort!, workers) };
  } finally {
    socket.destroy();
  }
}

// --- the cluster under test ---

describe('tessera serve --workers 2', () => {
  let dataDir: string;
  let env: NodeJS.ProcessEnv;
  let port: number;
  let base: string;
  let issuer: string;
  let client: { id: string; secret: string };
  let form: string;
  let serve: Serve | undefined;
  let spawnedAt = 0;
  /** Every worker pid seen, for the clean-up. */
  const seen = new Set<number>();
  let workers: number[] = [];

  /** Polls until the primary has `count` live children (and `accept` likes them); at most `ms`. */
  async function untilWorkers(count: number, ms: number, accept: (pids: number[]) => boolean = () => true) {
    const wanted = (pids: number[]) => pids.length === count && accept(pids);
    const { value: pids } = await pollUntil(
      () => {
        const pids = childrenOf(serve!.pid);
        pids.forEach((pid) => seen.add(pid));
        return pids;
      },
      wanted,
      ms,
      50,
    );
    if (!wanted(pids))
      throw new Error(`expected ${count} workers within ${ms} ms, have ${JSON.stringify(pids)}`);
    return pids;
  }

  beforeAll(async () => {
    dataDir = mkdtempSync(path.join(tmpdir(), 'tessera-cluster-test-'));
    port = await freePort();
    base = `http://127.0.0.1:${port}`;
    issuer = `http://localhost:${port}`;
    env = tesseraEnv({
      TESSERA_DATA_DIR: dataDir,
      TESSERA_LOG_LEVEL: 'info',
      TESSERA_HOST: '127.0.0.1',
      TESSERA_PORT: String(port),
      // A stop drains for this long first (readyz 503); test/cluster/shutdown.test.ts covers the drain.
      TESSERA_SHUTDOWN_DELAY: '1',
    });
    const provisioned = await provisionWithCli(env, AUDIENCE, 'load');
    client = { id: provisioned.id, secret: provisioned.secret };
    form = provisioned.form;

    spawnedAt = performance.now();
    serve = spawnServe(env, '--workers', '2');
    await Promise.race([
      serve.waitForLog('tessera is listening', 2, 15_000),
      serve.exited.then((exit) => {
        throw new Error(`tessera serve exited early: ${JSON.stringify(exit)}: ${serve!.stderr()}`);
      }),
    ]);
  }, 30_000);

  afterAll(async () => {
    if (serve) {
      // Workers first, while they are still known as the primary's children; then the primary.
      if (alive(serve.pid)) for (const pid of childrenOf(serve.pid)) seen.add(pid);
      for (const pid of seen) if (alive(pid) && startedWith(pid, dataDir)) process.kill(pid, 'SIGKILL');
      if (serve.child.exitCode === null && serve.child.signalCode === null) {
        serve.child.kill('SIGKILL');
        await exitWithin(serve, 5000);
      }
      serve.child.stdout?.destroy();
      serve.child.stderr?.destroy();
    }
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('runs two worker processes, children of the primary; the primary logged its start', async () => {
    workers = await untilWorkers(2, 5000);
    expect(workers).toHaveLength(2);
    expect(workers).not.toContain(serve!.pid);
    const [started] = await serve!.waitForLog('primary started');
    expect(started).toMatchObject({ level: 30, workers: 2, pid: serve!.pid });
    // The primary prepared the store; each worker listens on the one port.
    const listening = await serve!.waitForLog('tessera is listening', 2);
    for (const line of listening) expect(line).toMatchObject({ address: base, issuer, store: 'sqlite' });
  });

  it('both workers answer /readyz and issue tokens on new connections', async () => {
    const answeredBy = new Set<number>();
    for (let i = 0; i < 8; i++) {
      const ready = await onNewConnection(port, getRequest(port, '/readyz'), workers);
      expect(ready.statusLine).toBe('HTTP/1.1 200 OK');
      expect(JSON.parse(ready.body)).toEqual({
        status: 'ready',
        checks: { store: 'ok', signing_key: 'ok', change_feed: 'ok' },
      });
      expect(workers).toContain(ready.owner);
      answeredBy.add(ready.owner!);

      const token = await onNewConnection(port, tokenRequest(port, form), workers);
      expect(token.statusLine).toBe('HTTP/1.1 200 OK');
      expect(token.headers['content-type']).toBe('application/json; charset=utf-8');
      expect(token.headers['cache-control']).toBe('no-store');
      expect(token.headers['pragma']).toBe('no-cache');
      expect(JSON.parse(token.body)).toEqual({
        access_token: expect.stringMatching(JWT),
        token_type: 'Bearer',
        expires_in: 1800,
      });
      expect(workers).toContain(token.owner);
      answeredBy.add(token.owner!);
    }
    expect([...answeredBy].sort((a, b) => a - b)).toEqual(workers);
  });

  it('/metrics from either worker counts the whole cluster (the primary sums every worker)', async () => {
    // No series yet (no token issued so far, when this test runs alone) counts as 0.
    const issued = (body: string) =>
      Number(
        /^tessera_tokens_issued_total\{audience="https:\/\/api\.example\.com"\} (\d+)$/m.exec(body)?.[1] ?? 0,
      );
    const first = await onNewConnection(port, getRequest(port, '/metrics'), workers);
    expect(first.statusLine).toBe('HTTP/1.1 200 OK');
    expect(first.headers['content-type']).toBe('text/plain; version=0.0.4; charset=utf-8');
    const before = issued(first.body);

    const issuers = new Set<number>();
    for (let i = 0; i < 6; i++) {
      const token = await onNewConnection(port, tokenRequest(port, form), workers);
      expect(token.statusLine).toBe('HTTP/1.1 200 OK');
      expect(workers).toContain(token.owner);
      issuers.add(token.owner!);
    }
    expect([...issuers].sort((a, b) => a - b)).toEqual(workers); // both workers issued some of the six

    const scrapedBy = new Set<number>();
    for (let i = 0; i < 6; i++) {
      const scrape = await onNewConnection(port, getRequest(port, '/metrics'), workers);
      expect(scrape.statusLine).toBe('HTTP/1.1 200 OK');
      expect(issued(scrape.body)).toBe(before + 6);
      expect(workers).toContain(scrape.owner);
      scrapedBy.add(scrape.owner!);
    }
    expect([...scrapedBy].sort((a, b) => a - b)).toEqual(workers);
  });

  it('both workers publish the same JWKS, and tokens from either verify against it', async () => {
    const bodies: string[] = [];
    const publishers = new Set<number>();
    for (let i = 0; i < 20; i++) {
      const jwks = await onNewConnection(port, getRequest(port, '/.well-known/jwks.json'), workers);
      expect(jwks.statusLine).toBe('HTTP/1.1 200 OK');
      expect(jwks.headers['content-type']).toBe('application/jwk-set+json; charset=utf-8');
      bodies.push(jwks.body);
      publishers.add(jwks.owner!);
    }
    expect([...publishers].sort((a, b) => a - b)).toEqual(workers);
    expect(new Set(bodies).size).toBe(1);
    const jwks = JSON.parse(bodies[0]!) as JSONWebKeySet;
    expect(jwks.keys.length).toBeGreaterThan(0);
    const keySet = createLocalJWKSet(jwks);

    const issuers = new Set<number>();
    for (let i = 0; i < 10; i++) {
      const answer = await onNewConnection(port, tokenRequest(port, form), workers);
      expect(answer.status).toBe(200);
      const token = (JSON.parse(answer.body) as { access_token: string }).access_token;
      expect(jwks.keys.map((k) => k.kid)).toContain(decodeProtectedHeader(token).kid);
      const { payload, protectedHeader } = await jwtVerify(token, keySet, {
        issuer,
        audience: AUDIENCE,
        typ: 'at+jwt',
      });
      expect(protectedHeader.alg).toBe('ES256');
      expect(payload).toMatchObject({ sub: client.id, client_id: client.id });
      expect(payload.exp! - payload.iat!).toBe(1800);
      issuers.add(answer.owner!);
    }
    expect([...issuers].sort((a, b) => a - b)).toEqual(workers);
  });

  it('a worker killed under load: at most the requests it held fail, the port keeps answering, a new worker replaces it', async () => {
    const CONCURRENCY = 10;
    /** Answers before the kill: the load is well under way (more than 50 are asserted below). */
    const ANSWERED_BEFORE_KILL = 500;
    const RUN_AFTER_KILL_MS = 2500;
    const MAX_REQUESTS = 20_000;
    const [victim, survivor] = workers as [number, number];

    interface Result {
      start: number;
      end: number;
      ok: boolean;
      detail: string;
    }
    const results: Result[] = [];
    const t0 = performance.now();
    let killedAt = Infinity;
    let sent = 0;
    const stopAt = () => Math.min(t0 + 8000, killedAt + RUN_AFTER_KILL_MS);

    // Keep-alive connections, never more than CONCURRENCY of them: each can hold one request in flight.
    const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });
    const loop = async () => {
      while (performance.now() < stopAt() && sent < MAX_REQUESTS) {
        sent++;
        const start = performance.now();
        let ok = false;
        let detail: string;
        try {
          const response = await post(agent, port, '/oauth/token', form, 3000);
          detail = `${response.status} ${response.body}`;
          const body = response.status === 200 ? (JSON.parse(response.body) as Record<string, unknown>) : {};
          ok = response.status === 200 && body.token_type === 'Bearer' && JWT.test(String(body.access_token));
        } catch (error) {
          detail = String(error);
        }
        results.push({ start, end: performance.now(), ok, detail });
      }
    };
    let held = 0;
    const killer = (async () => {
      await waitFor(() => results.length >= ANSWERED_BEFORE_KILL, 7000, 10);
      held = connectionsHeldBy(victim, port);
      killedAt = performance.now();
      process.kill(victim, 'SIGKILL');
    })();
    try {
      await Promise.all([killer, ...Array.from({ length: CONCURRENCY }, loop)]);
    } finally {
      agent.destroy();
    }

    const failures = results.filter((r) => !r.ok);
    const before = results.filter((r) => r.end < killedAt);
    const after = results.filter((r) => r.start > killedAt + 100);
    const report = JSON.stringify({
      sent: results.length,
      connectionsHeldByTheKilledWorker: held,
      failures: failures.map((f) => ({ at: Math.round(f.start - killedAt), detail: f.detail.slice(0, 200) })),
    });
    // The load ran on both sides of the kill, and nothing failed before it.
    expect(before.length, report).toBeGreaterThan(50);
    expect(
      before.every((r) => r.ok),
      report,
    ).toBe(true);
    // At most one request per connection it held was lost with the worker; never more than CONCURRENCY.
    expect(failures.length, report).toBeLessThanOrEqual(CONCURRENCY);
    // The port kept answering after the kill.
    expect(after.filter((r) => r.ok).length, report).toBeGreaterThan(50);

    // The primary noticed and replaced the worker within 5 s of the kill.
    const replaced = await untilWorkers(
      2,
      Math.max(0, killedAt + 5000 - performance.now()),
      (pids) => pids.includes(survivor) && !pids.includes(victim),
    );
    const replacement = replaced.find((pid) => pid !== survivor)!;
    expect(replacement).not.toBe(victim);
    expect(alive(victim)).toBe(false);
    const [died] = await serve!.waitForLog('worker died; replacing it', 1, 1000);
    expect(died).toMatchObject({ level: 40, pid: victim, code: null, signal: 'SIGKILL' });
    // A worker that lived less than 10 s is replaced after 1 s (the back-off doubled from 500 ms).
    if (killedAt - spawnedAt < 9000) expect(died!.restartInMs).toBe(1000);
    else expect([500, 1000]).toContain(died!.restartInMs);
    expect(serve!.logs.filter((line) => line.msg === 'worker died; replacing it')).toHaveLength(1);

    // The replacement listens and answers too: both current workers answer on new connections.
    await serve!.waitForLog('tessera is listening', 3, 5000);
    workers = replaced;
    const answeredBy = new Set<number>();
    for (let i = 0; i < 10 && answeredBy.size < 2; i++) {
      const answer = await onNewConnection(port, tokenRequest(port, form), workers);
      expect(answer.status).toBe(200);
      expect(workers).toContain(answer.owner);
      answeredBy.add(answer.owner!);
    }
    expect(answeredBy).toContain(replacement);
    expect(answeredBy).toContain(survivor);
  });

  it('the replacement publishes the same JWKS as the survivor', async () => {
    const bodies = new Set<string>();
    const publishers = new Set<number>();
    for (let i = 0; i < 20; i++) {
      const jwks = await onNewConnection(port, getRequest(port, '/.well-known/jwks.json'), workers);
      expect(jwks.status).toBe(200);
      bodies.add(jwks.body);
      publishers.add(jwks.owner!);
    }
    expect(bodies.size).toBe(1);
    expect([...publishers].sort((a, b) => a - b)).toEqual(workers);
  });

  it('SIGTERM to the primary stops every worker and the primary, exit code 0, within 10 s', async () => {
    const current = childrenOf(serve!.pid);
    expect(current).toEqual(workers);
    const start = performance.now();
    serve!.child.kill('SIGTERM');
    const exit = await exitWithin(serve!, 10_000);
    expect(exit, `${serve!.stderr()}`).toEqual({ code: 0, signal: null });
    expect(performance.now() - start).toBeLessThan(10_000);
    for (const pid of current) expect(alive(pid)).toBe(false);

    expect((await serve!.waitForLog('stopping workers: finishing requests in flight'))[0]).toMatchObject({
      signal: 'SIGTERM',
      workers: 2,
    });
    expect(await serve!.waitForLog('shutting down: draining', 2, 0)).toHaveLength(2);
    expect(await serve!.waitForLog('stopped', 2, 0)).toHaveLength(2);
    expect(await serve!.waitForLog('all workers stopped', 1, 0)).toHaveLength(1);
    expect(serve!.logs.filter((line) => line.level >= 50)).toEqual([]);

    // Nothing listens any more.
    await expect(openSocket(port)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
  });
});

describe('tessera serve --workers: bad values are usage errors', () => {
  let dataDir: string;
  let env: NodeJS.ProcessEnv;

  beforeAll(async () => {
    dataDir = mkdtempSync(path.join(tmpdir(), 'tessera-cluster-test-'));
    env = tesseraEnv({
      TESSERA_DATA_DIR: dataDir,
      TESSERA_LOG_LEVEL: 'info',
      TESSERA_HOST: '127.0.0.1',
      TESSERA_PORT: String(await freePort()),
    });
  });

  afterAll(() => {
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  for (const value of ['0', 'x', '-1', '1.5', '257', '']) {
    it(`--workers "${value}": exit code 2, the reason on stderr, nothing started`, async () => {
      const r = await tessera(env, 'serve', '--workers', value, '--json');
      expect(r.code).toBe(2);
      expect(r.stdout).toBe('');
      expect(JSON.parse(r.stderr)).toEqual({
        error: 'usage',
        message: `option '--workers <n>' argument '${value}' is invalid. workers must be a whole number from 1 to 256`,
      });
      // It failed before touching the store.
      expect(existsSync(path.join(dataDir, 'tessera.db'))).toBe(false);
    });
  }

  it('--workers 0 in text mode: exit code 2 and the reason', async () => {
    const r = await tessera(env, 'serve', '--workers', '0');
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain(
      "error: option '--workers <n>' argument '0' is invalid. workers must be a whole number from 1 to 256",
    );
  });

  it('TESSERA_WORKERS=0: exit code 2 (invalid_config)', async () => {
    const r = await tessera({ ...env, TESSERA_WORKERS: '0' }, 'serve', '--json');
    expect(r.code).toBe(2);
    expect(JSON.parse(r.stderr)).toEqual({
      error: 'invalid_config',
      message: 'TESSERA_WORKERS must be between 1 and 256, got 0',
    });
  });
});
