/**
 * Configuration from files (MANAGEMENT.md, "Bootstrap without a shell"; docs/production.md), from a real `tessera
 * serve`: the bootstrap admin of TESSERA_BOOTSTRAP_ADMIN_CLIENT_ID and its mounted secret; TESSERA_APPLY_FILE applied
 * at start and again when a ConfigMap-style update swaps its `..data` link, a bad file keeping the running
 * configuration (shown in /readyz, the metric and the log, with its places) while /readyz stays 200; two instances
 * on PostgreSQL applying one file at once; `client_secret_file` with `tessera apply`; `tessera healthcheck`. No
 * secret in any log line or output.
 *
 * The CLI loads dist/, so `npm run build` must have run (`npm test` does).
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import { afterAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './helpers/postgres.js';
import { spawnServe, startServe, tessera, tesseraEnv, tesseraOk, type Serve } from './helpers/process.js';
import { freePort, NO_BLOCKING, tempDir } from './helpers/server.js';
import { waitFor } from './helpers/wait.js';

const API = 'https://api.example.com';
const LEDGER = 'https://ledger.example.com';
const secret = (): string => randomBytes(32).toString('base64url');

const running: Serve[] = [];
const databases: TestDatabase[] = [];
afterAll(async () => {
  await Promise.all(running.map((s) => s.stop('SIGKILL')));
  await Promise.all(databases.map((d) => d.drop()));
});

async function serve(env: NodeJS.ProcessEnv): Promise<Serve> {
  const server = await startServe(env);
  running.push(server);
  return server;
}

async function token(url: string, form: Record<string, string>) {
  const response = await fetch(`${url}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'client_credentials', ...form }).toString(),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

interface Readiness {
  status: string;
  checks: Record<string, string>;
  apply_file: {
    ok: boolean;
    applied_digest?: string;
    applied_at?: string;
    errors?: Record<string, unknown>[];
  };
}

async function readyz(url: string) {
  const response = await fetch(`${url}/readyz`);
  return { status: response.status, body: (await response.json()) as Readiness };
}

async function metric(url: string, name: string): Promise<string | undefined> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1];
}

/**
 * A directory mounted as a ConfigMap is: `tessera.yaml -> ..data/tessera.yaml`, `..data -> ..<version>`; an update
 * writes a new version directory and swaps the `..data` link at once (a rename).
 */
class ConfigMapDir {
  private version = 0;
  constructor(readonly dir: string) {
    mkdirSync(dir, { recursive: true });
  }
  get file(): string {
    return path.join(this.dir, 'tessera.yaml');
  }
  write(files: Record<string, string>): void {
    const version = `..v${++this.version}`;
    mkdirSync(path.join(this.dir, version));
    for (const [name, text] of Object.entries(files)) writeFileSync(path.join(this.dir, version, name), text);
    symlinkSync(version, path.join(this.dir, '..data_tmp'));
    renameSync(path.join(this.dir, '..data_tmp'), path.join(this.dir, '..data'));
    for (const name of Object.keys(files)) {
      try {
        symlinkSync(path.join('..data', name), path.join(this.dir, name));
      } catch {
        // the link is there from an earlier version
      }
    }
  }
}

const noSecretIn = (text: string, secrets: string[]): void => {
  for (const s of secrets) expect(text).not.toContain(s);
};

describe('the bootstrap admin', () => {
  it('is made at start with every admin scope and the secret of its file, audited as tessera; kept in step on restart', async () => {
    const data = tempDir('tessera-bootstrap-');
    const secrets = tempDir('tessera-bootstrap-secrets-');
    const first = secret();
    writeFileSync(path.join(secrets, 'admin'), `${first}\n`);
    const env = tesseraEnv({
      TESSERA_DATA_DIR: data,
      TESSERA_PORT: String(await freePort()),
      TESSERA_BOOTSTRAP_ADMIN_CLIENT_ID: 'platform-admin',
      TESSERA_BOOTSTRAP_ADMIN_CLIENT_SECRET_FILE: path.join(secrets, 'admin'),
      TESSERA_SHUTDOWN_DELAY: '0',
    });
    let server = await serve(env);
    const admin = `http://localhost:${server.port}/admin/v1`;
    const granted = await token(server.url, {
      client_id: 'platform-admin',
      client_secret: first,
      audience: admin,
    });
    expect(granted.status).toBe(200);
    expect(String(granted.body.scope).split(' ').sort()).toEqual([
      'audiences:read',
      'audiences:write',
      'audit:read',
      'clients:read',
      'clients:write',
      'keys:read',
      'keys:write',
      'operators:read',
      'operators:write',
      'tokens:introspect',
    ]);
    const clients = await fetch(`${server.url}/admin/v1/clients`, {
      headers: { authorization: `Bearer ${String(granted.body.access_token)}` },
    });
    expect(clients.status).toBe(200);
    const listed = (await clients.json()) as {
      clients?: { client_id: string }[];
      items?: { client_id: string }[];
    };
    expect((listed.clients ?? listed.items ?? []).map((c) => c.client_id)).toEqual(['platform-admin']);
    await server.waitForLog('bootstrap admin client created');
    const audit = await tesseraOk(env, 'audit', '--json', '--limit', '20');
    const created = (audit.json as { type: string; actor: string; client_id?: string }[]).find(
      (e) => e.type === 'client.created',
    );
    expect(created?.actor).toBe('tessera');
    expect((await server.stop()).code).toBe(0);

    // The same file: nothing changes. A new secret in the file: it replaces the old one at once.
    server = await serve(env);
    expect(server.logs.some((l) => String(l.msg).startsWith('bootstrap admin client'))).toBe(false);
    await server.stop();
    const second = secret();
    writeFileSync(path.join(secrets, 'admin'), second);
    server = await serve(env);
    await server.waitForLog('bootstrap admin client updated');
    expect(
      (await token(server.url, { client_id: 'platform-admin', client_secret: first, audience: admin }))
        .status,
    ).toBe(401);
    expect(
      (await token(server.url, { client_id: 'platform-admin', client_secret: second, audience: admin }))
        .status,
    ).toBe(200);
    await server.stop();
    noSecretIn(JSON.stringify(server.logs) + server.stderr(), [first, second]);
  });

  it('a secret too short, or a file that cannot be read, stops the start with the reason', async () => {
    const data = tempDir('tessera-bootstrap-');
    const file = path.join(tempDir('tessera-bootstrap-secrets-'), 'admin');
    writeFileSync(file, 'short-secret\n');
    const env = tesseraEnv({
      TESSERA_DATA_DIR: data,
      TESSERA_PORT: String(await freePort()),
      TESSERA_BOOTSTRAP_ADMIN_CLIENT_ID: 'platform-admin',
      TESSERA_BOOTSTRAP_ADMIN_CLIENT_SECRET_FILE: file,
    });
    let server = spawnServe(env);
    let exit = await server.exited;
    expect(exit.code).toBe(2);
    expect(server.stderr()).toContain(
      'TESSERA_BOOTSTRAP_ADMIN_CLIENT_SECRET_FILE: a secret must have at least 32 characters; this one has 12',
    );
    expect(server.stderr()).not.toContain('short-secret');
    rmSync(file);
    server = spawnServe(env);
    exit = await server.exited;
    expect(exit.code).toBe(2);
    expect(server.stderr()).toContain(
      `TESSERA_BOOTSTRAP_ADMIN_CLIENT_SECRET_FILE: cannot read ${file} (ENOENT)`,
    );
  });
});

const fileWith = (clients: string, audiences = `  - identifier: ${API}\n    scopes: [{ name: read }]\n`) =>
  `audiences:\n${audiences}clients:\n${clients}`;

describe('TESSERA_APPLY_FILE', () => {
  it('is applied at start and on every update of its ConfigMap; a bad one is shown and the running configuration kept', async () => {
    const config = new ConfigMapDir(path.join(tempDir('tessera-apply-file-'), 'config'));
    const secrets = tempDir('tessera-apply-secrets-');
    const billing = secret();
    writeFileSync(path.join(secrets, 'billing'), `${billing}\n`);
    config.write({
      'tessera.yaml': fileWith(
        `  - client_id: billing\n    name: Billing\n    client_secret_file: ${secrets}/billing\n    grants:\n      - audience: ${API}\n        scopes: [read]\n`,
      ),
    });
    const env = tesseraEnv({
      TESSERA_DATA_DIR: tempDir('tessera-apply-data-'),
      TESSERA_PORT: String(await freePort()),
      TESSERA_APPLY_FILE: config.file,
      TESSERA_SHUTDOWN_DELAY: '0',
      // The waits below ask with a secret not applied yet, again and again: no failed-attempt limit in the way.
      ...NO_BLOCKING,
    });
    const server = await serve(env);
    const issued = await token(server.url, { client_id: 'billing', client_secret: billing, audience: API });
    expect(issued.status).toBe(200);
    expect(issued.body.scope).toBe('read');
    const jwks = createRemoteJWKSet(new URL(`${server.url}/.well-known/jwks.json`));
    const { payload } = await jwtVerify(String(issued.body.access_token), jwks, {
      issuer: `http://localhost:${server.port}`,
      audience: API,
    });
    expect(payload.client_id).toBe('billing');
    let ready = await readyz(server.url);
    expect(ready.status).toBe(200);
    expect(ready.body.checks.apply_file).toBe('ok');
    expect(ready.body.apply_file).toEqual({
      ok: true,
      applied_digest: expect.stringMatching(/^[0-9a-f]{64}$/),
      applied_at: expect.stringMatching(/Z$/),
    });
    expect(await metric(server.url, 'tessera_apply_file_ok')).toBe('1');
    const applied = await server.waitForLog('apply file applied');
    expect(applied[0]!.changes).toEqual([
      `+ audience ${API} (scopes read)`,
      `+ client billing (name "Billing", enabled true, client_secret_file "${secrets}/billing")`,
      `+ grant billing → ${API} (scopes "read")`,
    ]);

    // An update: a second audience granted.
    config.write({
      'tessera.yaml': fileWith(
        `  - client_id: billing\n    name: Billing\n    client_secret_file: ${secrets}/billing\n    grants:\n      - audience: ${API}\n        scopes: [read]\n      - audience: ${LEDGER}\n`,
        `  - identifier: ${API}\n    scopes: [{ name: read }]\n  - identifier: ${LEDGER}\n`,
      ),
    });
    await waitFor(
      async () =>
        (await token(server.url, { client_id: 'billing', client_secret: billing, audience: LEDGER }))
          .status === 200,
      15_000,
      200,
    );

    // A bad update: a grant of an audience nobody has. Refused whole, with its place; /readyz stays 200.
    config.write({
      'tessera.yaml': fileWith(
        `  - client_id: billing\n    name: Billing\n    client_secret_file: ${secrets}/billing\n    grants:\n      - audience: https://nowhere.example.com\n`,
      ),
    });
    await waitFor(async () => (await readyz(server.url)).body.checks.apply_file === 'error', 15_000, 200);
    ready = await readyz(server.url);
    expect(ready.status).toBe(200);
    expect(ready.body.status).toBe('ready');
    expect(ready.body.apply_file.ok).toBe(false);
    expect(ready.body.apply_file.applied_digest).toMatch(/^[0-9a-f]{64}$/);
    // Anyone may ask /readyz: it shows where the errors are; their words (files, clients, audiences) are the log's.
    expect(ready.body.apply_file.errors).toEqual([
      { line: 9, column: 19, pointer: '/clients/0/grants/0/audience' },
    ]);
    expect(await metric(server.url, 'tessera_apply_file_ok')).toBe('0');
    const refused = await server.waitForLog('apply file refused: the configuration applied before is kept');
    expect(refused[0]!.errors).toEqual([
      {
        pointer: '/clients/0/grants/0/audience',
        line: 9,
        column: 19,
        message: 'audience https://nowhere.example.com is neither in the file nor registered',
      },
    ]);
    // (Read again every few seconds, the same refusal is logged once: test/runtime/config-files.test.ts, on its clock.)
    // What was applied before still serves.
    expect(
      (await token(server.url, { client_id: 'billing', client_secret: billing, audience: LEDGER })).status,
    ).toBe(200);

    // A new client with no client_secret_file: its secret could be shown to no one.
    config.write({
      'tessera.yaml': fileWith(`  - client_id: reports\n    name: Reports\n`),
    });
    const missing = (
      await server.waitForLog('apply file refused: the configuration applied before is kept', 2)
    )[1]!;
    expect(missing.errors).toEqual([
      {
        pointer: '/clients/0/client_id',
        line: 5,
        column: 16,
        message:
          'client reports is new and authenticates with a secret: name its client_secret_file (a mounted secret), since a secret made for it could be shown to no one',
      },
    ]);
    expect((await readyz(server.url)).body.apply_file.errors).toEqual([
      { line: 5, column: 16, pointer: '/clients/0/client_id' },
    ]);

    // A new secret in the client's file: it replaces the client's.
    const rotated = secret();
    writeFileSync(path.join(secrets, 'billing2'), rotated);
    config.write({
      'tessera.yaml': fileWith(
        `  - client_id: billing\n    name: Billing\n    client_secret_file: ${secrets}/billing2\n    grants:\n      - audience: ${API}\n        scopes: [read]\n`,
      ),
    });
    await waitFor(async () => (await readyz(server.url)).body.checks.apply_file === 'ok', 15_000, 200);
    // (The change reaches the server's cache by its change feed, within a poll.)
    await waitFor(
      async () =>
        (await token(server.url, { client_id: 'billing', client_secret: rotated, audience: API })).status ===
        200,
      5000,
      100,
    );
    expect(
      (await token(server.url, { client_id: 'billing', client_secret: billing, audience: API })).status,
    ).toBe(401);
    const lines = (await server.waitForLog('apply file applied', 3)).at(-1)!.changes;
    // Without TESSERA_APPLY_PRUNE the grant the file no longer has is kept.
    expect(lines).toEqual([`~ client billing: its secrets replaced by the one in "${secrets}/billing2"`]);

    // The Secret rotated in its mounted file, the apply file the same: applied too.
    const again = secret();
    writeFileSync(path.join(secrets, 'billing2'), again);
    await waitFor(
      async () =>
        (await token(server.url, { client_id: 'billing', client_secret: again, audience: API })).status ===
        200,
      15_000,
      200,
    );
    expect(
      (await token(server.url, { client_id: 'billing', client_secret: rotated, audience: API })).status,
    ).toBe(401);
    await server.stop();
    noSecretIn(JSON.stringify(server.logs) + server.stderr(), [billing, rotated, again]);
  }, 90_000);

  it('on PostgreSQL, two instances started at once apply it one at a time: one creates, the other finds it done', async () => {
    const db = await createTestDatabase();
    databases.push(db);
    const url = await db.freshSchema();
    const config = new ConfigMapDir(path.join(tempDir('tessera-apply-file-'), 'config'));
    const secrets = tempDir('tessera-apply-secrets-');
    const value = secret();
    writeFileSync(path.join(secrets, 'svc'), value);
    const clients = Array.from(
      { length: 20 },
      (_, i) =>
        `  - client_id: svc-${i}\n    name: Service ${i}\n    client_secret_file: svc\n    grants:\n      - audience: ${API}\n`,
    ).join('');
    // client_secret_file relative to the file's directory: the mounted secret beside it.
    writeFileSync(path.join(config.dir, 'svc'), value);
    config.write({ 'tessera.yaml': fileWith(clients) });
    const master = randomBytes(32).toString('base64');
    const [a, b] = await Promise.all(
      [0, 1].map(async () =>
        serve(
          tesseraEnv({
            TESSERA_DATABASE_URL: url,
            TESSERA_MASTER_KEY: master,
            TESSERA_PORT: String(await freePort()),
            TESSERA_APPLY_FILE: config.file,
          }),
        ),
      ),
    );
    for (const server of [a!, b!]) {
      const ready = await readyz(server.url);
      expect(ready.body.checks.apply_file).toBe('ok');
    }
    const messages = [a!, b!]
      .flatMap((s) => s.logs.map((l) => l.msg))
      .filter((m) => String(m).startsWith('apply file'));
    expect(messages.sort()).toEqual(['apply file applied', 'apply file: no changes']);
    expect((await token(b!.url, { client_id: 'svc-19', client_secret: value, audience: API })).status).toBe(
      200,
    );
    void secrets;
  }, 60_000);
});

describe('client_secret_file with tessera apply', () => {
  it('gives a new client the file’s secret (never printed), plans nothing the second time, and replaces a secret that changed', async () => {
    const dir = tempDir('tessera-apply-cli-');
    const env = tesseraEnv({ TESSERA_DATA_DIR: path.join(dir, 'data') });
    const value = secret();
    writeFileSync(path.join(dir, 'billing.secret'), `${value}\n`);
    const file = path.join(dir, 'tessera.yaml');
    writeFileSync(
      file,
      fileWith(
        `  - client_id: billing\n    name: Billing\n    client_secret_file: billing.secret\n    grants:\n      - audience: ${API}\n`,
      ),
    );
    let applied = await tesseraOk(env, 'apply', '-f', file);
    expect(applied.stdout).toBe(
      [
        `+ audience ${API} (scopes read)`,
        '+ client billing (name "Billing", enabled true, client_secret_file "billing.secret")',
        `+ grant billing → ${API}`,
        '',
        'Plan: 3 to create, 0 to update, 0 to delete.',
        'Applied.',
        '',
      ].join('\n'),
    );
    expect((await tesseraOk(env, 'apply', '-f', file)).stdout).toBe('No changes.\n');
    const next = secret();
    writeFileSync(path.join(dir, 'billing.secret'), next);
    applied = await tesseraOk(env, 'apply', '-f', file, '--json');
    expect(applied.json.changes).toEqual([
      {
        action: 'update',
        type: 'client',
        client_id: 'billing',
        changes: [{ field: 'client_secret', from: null, to: 'billing.secret' }],
      },
    ]);
    expect(applied.json.secrets).toEqual([]);
    noSecretIn(applied.stdout + applied.stderr, [value, next]);
    const listed = await tesseraOk(env, 'client', 'secrets', 'list', 'billing', '--json');
    expect(listed.json).toHaveLength(1);
  });

  it('refuses a file that cannot be read, a secret too short, and a file for a client without secrets, each at its place', async () => {
    const dir = tempDir('tessera-apply-cli-');
    const env = tesseraEnv({ TESSERA_DATA_DIR: path.join(dir, 'data') });
    writeFileSync(path.join(dir, 'short'), 'not-32-characters');
    const file = path.join(dir, 'tessera.yaml');
    writeFileSync(
      file,
      fileWith(
        [
          '  - client_id: aaa\n    name: A\n    client_secret_file: missing\n',
          '  - client_id: bbb\n    name: B\n    client_secret_file: short\n',
          `  - client_id: ccc\n    name: C\n    token_endpoint_auth_method: private_key_jwt\n    jwks_uri: https://c.example.com/jwks\n    client_secret_file: short\n`,
        ].join(''),
      ),
    );
    const refused = await tessera(env, 'apply', '-f', file);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toBe(
      [
        `tessera: ${file}: 3 errors, nothing was changed`,
        `  ${file}:7:25: /clients/0/client_secret_file: cannot read missing (ENOENT)`,
        `  ${file}:10:25: /clients/1/client_secret_file: short: a secret must have at least 32 characters; this one has 17`,
        `  ${file}:15:25: /clients/2/client_secret_file: a client authenticating with private_key_jwt has no secret`,
        '',
      ].join('\n'),
    );
    expect(refused.stderr).not.toContain('not-32-characters');
  });
});

describe('tessera apply --secrets', () => {
  it('carries secrets given beside the file: new clients get them, none is printed, twice is No changes.', async () => {
    const dir = tempDir('tessera-apply-secrets-');
    const env = tesseraEnv({ TESSERA_DATA_DIR: path.join(dir, 'data') });
    const carried = secret();
    const secrets = path.join(dir, 'secrets.json');
    writeFileSync(secrets, JSON.stringify({ billing: carried }), { mode: 0o600 });
    const file = path.join(dir, 'tessera.yaml');
    writeFileSync(
      file,
      fileWith(`  - client_id: billing\n    name: Billing\n    grants:\n      - audience: ${API}\n`),
    );
    const applied = await tesseraOk(env, 'apply', '-f', file, '--secrets', secrets, '--json');
    expect(applied.json.secrets).toEqual([]);
    expect(applied.stdout).not.toContain(carried);
    expect((await tesseraOk(env, 'apply', '-f', file, '--secrets', secrets)).stdout).toBe('No changes.\n');
    // The carried secret is the client's: a new one beside the file replaces it.
    const next = secret();
    writeFileSync(secrets, JSON.stringify({ billing: next }));
    expect((await tesseraOk(env, 'apply', '-f', file, '--secrets', secrets, '--dry-run')).stdout).toBe(
      [
        `~ client billing: its secrets replaced by the one in "${secrets}"`,
        '',
        'Plan: 0 to create, 1 to update, 0 to delete.',
        'Dry run: nothing was changed.',
        '',
      ].join('\n'),
    );
  });

  it('refuses a secret too short, one for a client the file lacks, and a file that is not a JSON object, never showing a secret', async () => {
    const dir = tempDir('tessera-apply-secrets-');
    const env = tesseraEnv({ TESSERA_DATA_DIR: path.join(dir, 'data') });
    const file = path.join(dir, 'tessera.yaml');
    writeFileSync(file, fileWith(`  - client_id: billing\n    name: Billing\n`));
    const secrets = path.join(dir, 'secrets.json');
    writeFileSync(secrets, JSON.stringify({ billing: 'short-one', ghost: secret() }));
    const refused = await tessera(env, 'apply', '-f', file, '--secrets', secrets);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toBe(
      [
        `tessera: ${file}: 2 errors, nothing was changed`,
        `  ${file}:1:1: ${secrets} has a secret for client ghost, which is not in the file`,
        `  ${file}:5:16: /clients/0/client_id: ${secrets}: client billing: a secret must have at least 32 characters; this one has 9`,
        '',
      ].join('\n'),
    );
    expect(refused.stderr).not.toContain('short-one');
    writeFileSync(secrets, '{"billing": "not-closed');
    const broken = await tessera(env, 'apply', '-f', file, '--secrets', secrets);
    expect(broken.code).toBe(2);
    expect(broken.stderr).toBe(`tessera: ${secrets}: not JSON\n`);
    writeFileSync(secrets, JSON.stringify({ billing: 42 }));
    expect((await tessera(env, 'apply', '-f', file, '--secrets', secrets)).stderr).toBe(
      `tessera: ${secrets}: not a JSON object of client ids and their secrets\n`,
    );
  });
});

describe('tessera healthcheck', () => {
  it('exits 0 while the server answers /healthz, 1 when nothing answers', async () => {
    const env = tesseraEnv({
      TESSERA_DATA_DIR: tempDir('tessera-health-'),
      TESSERA_PORT: String(await freePort()),
      TESSERA_SHUTDOWN_DELAY: '0',
    });
    const server = await serve(env);
    expect(await tessera(env, 'healthcheck')).toMatchObject({ code: 0, stdout: '', stderr: '' });
    await server.stop();
    const down = await tessera(env, 'healthcheck');
    expect(down.code).toBe(1);
    expect(down.stderr).toBe(`tessera: unhealthy: connect ECONNREFUSED 127.0.0.1:${server.port}\n`);
  });
});
