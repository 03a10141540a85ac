/**
 * Graceful shutdown of `tessera serve`, as an orchestrator does it: SIGTERM while requests are in flight.
 * A request is held in flight by sending its headers and half of its body on a raw TCP connection; the rest
 * is sent after the signal. Every such request must be answered in full, new connections must be refused
 * (or answered 503) rather than hang, and the process must then exit with code 0.
 *
 * The CLI loads dist/, so `npm run build` must have run (`npm test` does). Linux only (/proc).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createLocalJWKSet, jwtVerify, type JSONWebKeySet } from 'jose';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { alive, childrenOf, startedWith } from '../helpers/proc.js';
import { exitWithin, spawnServe, tessera, tesseraEnv, type Serve } from '../helpers/process.js';
import { getRequest, openSocket, readResponse, tokenRequest, type RawResponse } from '../helpers/raw-http.js';
import { freePort } from '../helpers/server.js';

// --- processes ---

const AUDIENCE = 'https://api.example.com';
const JWT = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// --- raw HTTP/1.1 over one TCP connection ---

/** Every socket a test opened, destroyed after it. */
const sockets = new Set<Socket>();

async function openTracked(port: number, ms = 5000): Promise<Socket> {
  const socket = await openSocket(port, ms);
  sockets.add(socket);
  return socket;
}

/** Resolves when the socket closes; rejects after `ms`. */
function closed(socket: Socket, ms: number): Promise<void> {
  if (socket.destroyed) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the connection is still open after ${ms} ms`)), ms);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

async function get(port: number, target: string): Promise<RawResponse> {
  const socket = await openTracked(port);
  try {
    const answer = readResponse(socket, 5000);
    socket.write(getRequest(port, target, 'close'));
    return await answer;
  } finally {
    socket.destroy();
  }
}

/** A token request on its own connection, of which only the headers and half of the body have been sent. */
interface HalfSent {
  socket: Socket;
  /** The answer, read from the moment the request was started (so an early answer is not missed). */
  response: Promise<RawResponse>;
  /** Sends the rest of the body. */
  finish(): void;
}

async function halfSend(port: number, form: string): Promise<HalfSent> {
  const socket = await openTracked(port);
  const request = Buffer.from(tokenRequest(port, form));
  // Everything up to the middle of the body.
  const cut = request.length - Math.ceil(Buffer.byteLength(form) / 2);
  const response = readResponse(socket, 15_000);
  response.catch(() => undefined); // asserted by the test; never an unhandled rejection
  socket.write(request.subarray(0, cut));
  return { socket, response, finish: () => socket.write(request.subarray(cut)) };
}

/**
 * What a new connection gets while the server drains: refused, or a 503. Anything else (a hang, a reset,
 * another status) is returned as a description, so the assertion shows it.
 */
async function newConnectionOutcome(port: number): Promise<string> {
  let socket: Socket;
  try {
    socket = await openTracked(port, 5000);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ECONNREFUSED' ? 'refused' : String(error);
  }
  try {
    const answer = readResponse(socket, 5000);
    socket.write(getRequest(port, '/healthz', 'close'));
    const response = await answer;
    return response.status === 503 ? '503' : `answered ${response.statusLine} ${response.body}`;
  } catch (error) {
    return String(error);
  } finally {
    socket.destroy();
  }
}

// --- the tests ---

describe('graceful shutdown: requests in flight at SIGTERM are answered', () => {
  let dataDir: string;
  let env: NodeJS.ProcessEnv;
  let client: { id: string; secret: string };
  let form: string;
  let serve: Serve | undefined;
  /** Every pid a test's server ran as (primary and workers), for the clean-up. */
  const pids = new Set<number>();

  async function start(...args: string[]): Promise<Serve> {
    serve = spawnServe({ ...env, TESSERA_PORT: String(await freePort()) }, ...args);
    pids.add(serve.pid);
    const workers = args.includes('--workers') ? Number(args[args.indexOf('--workers') + 1]) : 1;
    await Promise.race([
      serve.waitForLog('tessera is listening', workers, 15_000),
      serve.exited.then((exit) => {
        throw new Error(`tessera serve exited early: ${JSON.stringify(exit)}: ${serve!.stderr()}`);
      }),
    ]);
    for (const pid of childrenOf(serve.pid)) pids.add(pid);
    return serve;
  }

  /** The JWKS, to verify the tokens answered during the shutdown. */
  async function keySet(port: number) {
    const jwks = await get(port, '/.well-known/jwks.json');
    expect(jwks.status).toBe(200);
    return createLocalJWKSet(JSON.parse(jwks.body) as JSONWebKeySet);
  }

  /** A complete HTTP/1.1 200 token response, with a token that verifies. */
  async function expectToken(
    response: RawResponse,
    port: number,
    keys: ReturnType<typeof createLocalJWKSet>,
  ) {
    expect(response.statusLine).toBe('HTTP/1.1 200 OK');
    expect(response.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(response.headers['cache-control']).toBe('no-store');
    expect(response.headers['pragma']).toBe('no-cache');
    expect(Number(response.headers['content-length'])).toBe(Buffer.byteLength(response.body));
    const body = JSON.parse(response.body) as { access_token: string };
    expect(body).toEqual({
      access_token: expect.stringMatching(JWT),
      token_type: 'Bearer',
      expires_in: 1800,
    });
    const { payload } = await jwtVerify(body.access_token, keys, {
      issuer: `http://localhost:${port}`,
      audience: AUDIENCE,
      typ: 'at+jwt',
    });
    expect(payload).toMatchObject({ sub: client.id, client_id: client.id });
    return body.access_token;
  }

  /** SIGTERM, then waits until the server (each worker) has logged that it is shutting down. */
  async function sigterm(s: Serve, processes = 1) {
    s.child.kill('SIGTERM');
    await s.waitForLog('shutting down: finishing requests in flight', processes, 5000);
  }

  beforeAll(async () => {
    dataDir = mkdtempSync(path.join(tmpdir(), 'tessera-shutdown-test-'));
    env = tesseraEnv({ TESSERA_DATA_DIR: dataDir, TESSERA_LOG_LEVEL: 'info', TESSERA_HOST: '127.0.0.1' });
    const added = await tessera(env, 'audience', 'add', AUDIENCE, '--json');
    expect(added).toMatchObject({ code: 0, stderr: '' });
    const created = await tessera(env, 'client', 'create', '--name', 'drain', '--grant', AUDIENCE, '--json');
    expect(created).toMatchObject({ code: 0, stderr: '' });
    const record = JSON.parse(created.stdout) as { client_id: string; client_secret: string };
    client = { id: record.client_id, secret: record.client_secret };
    form = new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: client.id,
      client_secret: client.secret,
      audience: AUDIENCE,
    }).toString();
  }, 30_000);

  afterEach(async () => {
    for (const socket of sockets) socket.destroy();
    sockets.clear();
    if (serve) {
      if (alive(serve.pid)) for (const pid of childrenOf(serve.pid)) pids.add(pid);
      for (const pid of pids)
        if (pid !== serve.pid && alive(pid) && startedWith(pid, dataDir)) process.kill(pid, 'SIGKILL');
      if (serve.child.exitCode === null && serve.child.signalCode === null) {
        serve.child.kill('SIGKILL');
        await exitWithin(serve, 5000);
      }
      serve.child.stdout?.destroy();
      serve.child.stderr?.destroy();
      serve = undefined;
    }
    pids.clear();
  });

  afterAll(() => {
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('a half-sent token request is answered in full after SIGTERM, then the process exits 0', async () => {
    const s = await start();
    const keys = await keySet(s.port);
    const request = await halfSend(s.port, form);
    await sleep(200);

    await sigterm(s);
    await sleep(200);
    // Still draining: not exited, nothing answered yet (the body is incomplete).
    expect(s.child.exitCode).toBe(null);
    const early = await Promise.race([
      request.response.then(() => 'answered'),
      sleep(0).then(() => 'pending'),
    ]);
    expect(early).toBe('pending');

    request.finish();
    await expectToken(await request.response, s.port, keys);
    // Answered, the connection is closed by the server (it is not left to the client's keep-alive).
    await closed(request.socket, 5000);
    expect(await exitWithin(s, 5000), s.stderr()).toEqual({ code: 0, signal: null });
    expect(s.logs.map((line) => line.msg)).toContain('stopped');
    expect(s.logs.filter((line) => line.level >= 50)).toEqual([]);
  });

  it('20 half-sent requests on separate connections: all 20 answered 200 after SIGTERM', async () => {
    const s = await start();
    const keys = await keySet(s.port);
    const requests = await Promise.all(Array.from({ length: 20 }, () => halfSend(s.port, form)));
    await sleep(200);

    await sigterm(s);
    await sleep(200);
    expect(s.child.exitCode).toBe(null);

    for (const request of requests) request.finish();
    const responses = await Promise.allSettled(requests.map((request) => request.response));
    const statuses = responses.map((r) => (r.status === 'fulfilled' ? r.value.statusLine : String(r.reason)));
    expect(statuses).toEqual(Array(20).fill('HTTP/1.1 200 OK'));
    const tokens = new Set<string>();
    for (const r of responses)
      tokens.add(await expectToken((r as PromiseFulfilledResult<RawResponse>).value, s.port, keys));
    expect(tokens.size).toBe(20);
    await Promise.all(requests.map((request) => closed(request.socket, 5000)));
    expect(await exitWithin(s, 5000), s.stderr()).toEqual({ code: 0, signal: null });
  });

  it('while draining: a new connection is refused or answered 503 within 5 s, an idle one is closed', async () => {
    const s = await start();
    const keys = await keySet(s.port);
    // An idle keep-alive connection: one request answered, the connection left open.
    const idle = await openTracked(s.port);
    const first = readResponse(idle, 5000);
    idle.write(getRequest(s.port, '/healthz'));
    expect((await first).status).toBe(200);
    const request = await halfSend(s.port, form);
    await sleep(200);

    await sigterm(s);
    await sleep(200);
    const started = performance.now();
    expect(['refused', '503']).toContain(await newConnectionOutcome(s.port));
    expect(performance.now() - started).toBeLessThan(5000);
    await closed(idle, 5000);

    expect(s.child.exitCode).toBe(null);
    request.finish();
    await expectToken(await request.response, s.port, keys);
    // Answered, the connection is closed by the server (it is not left to the client's keep-alive).
    await closed(request.socket, 5000);
    expect(await exitWithin(s, 5000), s.stderr()).toEqual({ code: 0, signal: null });
  });

  it('--workers 2: a half-sent request is answered after SIGTERM to the primary; all exit, code 0', async () => {
    const s = await start('--workers', '2');
    const workers = childrenOf(s.pid);
    expect(workers).toHaveLength(2);
    const keys = await keySet(s.port);
    const request = await halfSend(s.port, form);
    await sleep(200);

    await sigterm(s, 2);
    expect((await s.waitForLog('stopping workers: finishing requests in flight'))[0]).toMatchObject({
      signal: 'SIGTERM',
      workers: 2,
    });
    await sleep(200);
    // The primary waits for the worker that holds the request.
    expect(s.child.exitCode).toBe(null);
    const started = performance.now();
    expect(['refused', '503']).toContain(await newConnectionOutcome(s.port));
    expect(performance.now() - started).toBeLessThan(5000);

    request.finish();
    await expectToken(await request.response, s.port, keys);
    // Answered, the connection is closed by the server (it is not left to the client's keep-alive).
    await closed(request.socket, 5000);
    expect(await exitWithin(s, 5000), s.stderr()).toEqual({ code: 0, signal: null });
    for (const pid of workers) expect(alive(pid)).toBe(false);
    expect(await s.waitForLog('stopped', 2, 0)).toHaveLength(2);
    expect(await s.waitForLog('all workers stopped', 1, 0)).toHaveLength(1);
    expect(s.logs.filter((line) => line.level >= 50)).toEqual([]);
  });
});
