import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig, type Config } from '../../src/config/index.js';
import { digestSecret, generateClientId, generateSecret } from '../../src/domain/secrets.js';
import { createLogger } from '../../src/logger.js';
import { startServer, type Server } from '../../src/main.js';
import type { RuntimeOptions } from '../../src/runtime/index.js';
import type { AuditEvent, Client, NewAudience, NewClient } from '../../src/store/types.js';

/** A port that was free a moment ago (the issuer URL must be known before the server listens). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}

export function tempDir(prefix = 'tessera-test-'): string {
  return mkdtempSync(path.join(tmpdir(), prefix));
}

export interface TestClient {
  id: string;
  secret: string;
  record: Client;
}

export interface TestServer {
  /** Base URL, which is also the issuer. */
  url: string;
  config: Config;
  server: Server;
  dataDir: string;
  addAudience(url: string, options?: Partial<Omit<NewAudience, 'url'>>): Promise<void>;
  createClient(audiences: string[], options?: { id?: string; tokenTtl?: number }): Promise<TestClient>;
  /** Makes the running server see what was written to the store (instead of waiting for the poll). */
  sync(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Failed-attempt limits (TESSERA_ATTEMPTS_*) that a test never reaches: for tests whose refusals are many, all
 * from 127.0.0.1, which the limits would turn into 429s. The limits have tests of their own.
 */
export const NO_BLOCKING = { TESSERA_ATTEMPTS_SOURCE_MAX: '100000', TESSERA_ATTEMPTS_CLIENT_MAX: '100000' };

/** A real Tessera on a real socket, on a fresh data directory that is removed on close. */
export async function startTestServer(
  env: Record<string, string> = {},
  /** Receives every log line, when given (set TESSERA_LOG_LEVEL too). */
  log?: (line: string) => void,
  /** The runtime's clock (see RuntimeOptions and helpers/clock.ts); the wall clock when left out. */
  options: RuntimeOptions = {},
): Promise<TestServer> {
  const dataDir = tempDir();
  const port = await freePort();
  const config = loadConfig({
    TESSERA_DATA_DIR: dataDir,
    TESSERA_PORT: String(port),
    TESSERA_HOST: '127.0.0.1',
    TESSERA_MASTER_KEY: randomBytes(32).toString('base64'),
    TESSERA_LOG_LEVEL: 'silent',
    TESSERA_CHANGE_POLL_MS: '100',
    ...env,
  });
  const destination = log && { write: (line: string) => log(line) };
  const server = await startServer(config, createLogger(config, destination), options);
  const { store, directory } = server.runtime;
  const sync = () => directory.poll();
  return {
    url: config.issuer,
    config,
    server,
    dataDir,
    sync,
    async addAudience(url, options = {}) {
      await store.addAudience({ url, name: null, tokenTtl: null, signingAlg: null, ...options });
      await sync();
    },
    async createClient(audiences, options = {}) {
      const secret = generateSecret();
      const record = await store.createClient({
        id: options.id ?? generateClientId(),
        name: 'test client',
        secretDigest: digestSecret(secret),
        tokenTtl: options.tokenTtl ?? null,
        audiences,
      });
      await sync();
      return { id: record.id, secret, record };
    },
    async close() {
      await server.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * startTestServer with `audience` registered and one client granted it: what most tests of the token endpoint
 * start from. Its arguments after `audience` are startTestServer's.
 */
export async function startWithClient(
  audience: string,
  env: Record<string, string> = {},
  log?: (line: string) => void,
  options: RuntimeOptions = {},
): Promise<{ t: TestServer; client: TestClient }> {
  const t = await startTestServer(env, log, options);
  try {
    await t.addAudience(audience);
    return { t, client: await t.createClient([audience]) };
  } catch (error) {
    // The caller has no server to close in its afterAll yet.
    await t.close();
    throw error;
  }
}

/** The latest audit event of client `clientId`, once the server has written the events it holds to its store. */
export async function latestAuditEvent(t: TestServer, clientId: string): Promise<AuditEvent | undefined> {
  await t.server.runtime.audit.flush();
  const [event] = await t.server.runtime.store.queryAuditEvents({ limit: 1, clientId });
  return event;
}

/** POSTs a form body to the token endpoint and returns status, headers and parsed JSON body. */
export async function postToken(
  base: string,
  body: string | Record<string, string> | undefined,
  init: { headers?: Record<string, string>; json?: boolean; method?: string } = {},
): Promise<{ status: number; headers: Headers; body: Record<string, unknown> }> {
  const headers: Record<string, string> = { ...init.headers };
  let payload: string | undefined;
  if (typeof body === 'string') payload = body;
  else if (body !== undefined && init.json) {
    payload = JSON.stringify(body);
    headers['content-type'] ??= 'application/json';
  } else if (body !== undefined) {
    payload = new URLSearchParams(body).toString();
    headers['content-type'] ??= 'application/x-www-form-urlencoded';
  }
  const response = await fetch(`${base}/oauth/token`, {
    method: init.method ?? 'POST',
    headers,
    body: payload,
  });
  const text = await response.text();
  return {
    status: response.status,
    headers: response.headers,
    body: text ? (JSON.parse(text) as Record<string, unknown>) : {},
  };
}

export function basic(id: string, secret: string): string {
  const enc = (s: string) => encodeURIComponent(s).replace(/%20/g, '+');
  return 'Basic ' + Buffer.from(`${enc(id)}:${enc(secret)}`).toString('base64');
}

/**
 * Two servers that share what `env` gives them (Redis), as two instances do, each on a SQLite store of its own:
 * `audience` registered in both, and one client granted it, with the same id and secret in both (as a shared
 * PostgreSQL would hold it) and these quotas.
 */
export async function startTwoInstances(
  env: Record<string, string>,
  audience: string,
  quotas: Pick<NewClient, 'quotaPerMinute' | 'quotaPerDay'> = {},
): Promise<{ a: TestServer; b: TestServer; client: TestClient }> {
  const a = await startTestServer(env);
  const b = await startTestServer(env);
  await a.addAudience(audience);
  await b.addAudience(audience);
  const client = await a.createClient([audience]);
  if (Object.keys(quotas).length > 0) {
    await a.server.runtime.store.updateClient(client.id, quotas);
    await a.sync();
  }
  await b.server.runtime.store.createClient({
    id: client.id,
    name: 'same',
    secretDigest: client.record.secretDigest,
    tokenTtl: null,
    ...quotas,
    audiences: [audience],
  });
  await b.sync();
  return { a, b, client };
}

/**
 * The token path's usual cast: audiences `api` and `other` registered, a client granted `api`, and another
 * granted it but disabled.
 */
export async function clientsOfTokenTests(
  t: TestServer,
  api: string,
  other: string,
): Promise<{ client: TestClient; disabled: TestClient }> {
  await t.addAudience(api);
  await t.addAudience(other);
  const client = await t.createClient([api]);
  const disabled = await t.createClient([api]);
  await t.server.runtime.store.updateClient(disabled.id, { enabled: false });
  await t.sync();
  return { client, disabled };
}
