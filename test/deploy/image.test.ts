/**
 * The container image (MANAGEMENT.md, "Running it"), built and run for real: `npm run image`'s script
 * (deploy/image/build.sh: buildah, on local stand-ins of node:22-bookworm and distroless nodejs22 where their
 * registries are out of reach) builds it; podman runs it read-only (no tmpfs either, as a Kubernetes
 * readOnlyRootFilesystem), all capabilities dropped, as the image's user 65532, with a named volume as /data, the
 * secrets as mounted files, a bootstrap admin and an apply file in a directory laid out as a ConfigMap's. It must
 * answer /readyz and `tessera healthcheck`, issue tokens the container's JWKS verifies, follow an update of the
 * ConfigMap, stop on SIGTERM with exit code 0, start again on the same volume with the same keys and clients, and
 * show none of the secrets in its logs, its configuration or its history.
 *
 * Needs buildah, podman and debootstrap (and root: the vfs storage driver and chroot isolation): without them it
 * is skipped with the reason; under CI=true (.ci/run installs them) it fails instead.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { createRemoteJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/process.js';
import { freePort, tempDir } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';

const API = 'https://api.example.com';
const LEDGER = 'https://ledger.example.com';
const MB = 1_000_000;
/** The same storage as deploy/image/build.sh's buildah; runc where it is installed (crun fails on some hosts). */
const STORAGE = ['--storage-driver', process.env.BUILDAH_STORAGE_DRIVER ?? 'vfs'];
const onPath = (command: string): string | undefined =>
  [...(process.env.PATH ?? '').split(':'), '/usr/sbin', '/sbin']
    .map((dir) => path.join(dir, command))
    .find((file) => existsSync(file));
const runtime = process.env.TESSERA_PODMAN_RUNTIME ?? (onPath('runc') ? 'runc' : undefined);
const PODMAN = [...STORAGE, ...(runtime ? ['--runtime', runtime] : [])];

// The stand-ins of the bases need debootstrap, unless both bases are given (deploy/image/build.sh).
const basesGiven = Boolean(process.env.TESSERA_BUILD_BASE && process.env.TESSERA_RUNTIME_BASE);
const missing = ['buildah', 'podman', ...(basesGiven ? [] : ['debootstrap'])].filter((c) => !onPath(c));
const needs =
  missing.length > 0
    ? `${missing.join(', ')} (not installed)`
    : process.getuid?.() !== 0
      ? 'root (buildah with the vfs driver and chroot isolation, debootstrap)'
      : undefined;
if (needs && process.env.CI)
  throw new Error(`the container image test needs ${needs}: .ci/run installs them`);
if (needs)
  console.warn(
    `skipped: the container image test needs ${needs}; apt-get install buildah podman runc debootstrap, as root`,
  );

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(command: string, args: string[], timeoutMs = 60_000): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

const podman = (...args: string[]): Promise<Run> => run('podman', [...PODMAN, ...args]);
async function podmanOk(...args: string[]): Promise<string> {
  const result = await podman(...args);
  if (result.code !== 0)
    throw new Error(`podman ${args.join(' ')}: exit ${result.code}\n${result.stderr}${result.stdout}`);
  return result.stdout;
}

/**
 * A directory mounted as a ConfigMap is: `tessera.yaml -> ..data/tessera.yaml`, `..data -> ..<version>`; an update
 * writes a new version directory and swaps the `..data` link at once (a rename).
 */
class ConfigMapDir {
  private version = 0;
  constructor(readonly dir: string) {
    mkdirSync(dir, { recursive: true, mode: 0o755 });
    chmodSync(dir, 0o755);
  }
  write(name: string, text: string): void {
    const version = `..${new Date().toISOString().replace(/[:.]/g, '_')}.${++this.version}`;
    mkdirSync(path.join(this.dir, version), { mode: 0o755 });
    writeFileSync(path.join(this.dir, version, name), text, { mode: 0o644 });
    symlinkSync(version, path.join(this.dir, '..data_tmp'));
    renameSync(path.join(this.dir, '..data_tmp'), path.join(this.dir, '..data'));
    if (!existsSync(path.join(this.dir, name)))
      symlinkSync(path.join('..data', name), path.join(this.dir, name));
  }
}

const applyFile = (ledger: boolean): string =>
  [
    'audiences:',
    `  - identifier: ${API}`,
    '    name: Orders API',
    '    scopes: [{ name: "orders:read" }]',
    ...(ledger ? [`  - identifier: ${LEDGER}`, '    name: Ledger'] : []),
    'clients:',
    '  - client_id: orders-worker',
    '    name: Orders worker',
    '    client_secret_file: /run/secrets/client',
    '    grants:',
    `      - audience: ${API}`,
    '        scopes: ["orders:read"]',
    ...(ledger ? [`      - audience: ${LEDGER}`] : []),
    '',
  ].join('\n');

async function token(base: string, form: Record<string, string>) {
  const response = await fetch(`${base}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'client_credentials', ...form }).toString(),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

const status = (url: string): Promise<number> =>
  fetch(url).then(
    (r) => r.status,
    () => 0,
  );

const kids = async (base: string): Promise<string[]> => {
  const jwks = (await (await fetch(`${base}/.well-known/jwks.json`)).json()) as { keys: { kid: string }[] };
  return jwks.keys.map((k) => k.kid).sort();
};

describe.skipIf(needs !== undefined)('the container image', () => {
  const id = randomBytes(4).toString('hex');
  const volume = `tessera-image-test-${id}`;
  const containers: string[] = [];
  const dirs: string[] = [];
  const secrets = {
    admin: randomBytes(32).toString('base64url'),
    client: randomBytes(32).toString('base64url'),
    masterKey: randomBytes(32).toString('base64'),
  };
  let image = '';
  let port = 0;
  let base = '';
  let issuer = '';
  let config: ConfigMapDir;
  let secretsDir = '';
  let firstToken = '';
  let firstKids: string[] = [];

  beforeAll(async () => {
    // Through the script of `npm run image`: the bases made once and cached, the image's layers reused.
    const started = Date.now();
    const built = await run('bash', ['deploy/image/build.sh'], 14 * 60_000);
    if (built.code !== 0)
      throw new Error(`deploy/image/build.sh: exit ${built.code}\n${built.stderr.slice(-4000)}`);
    image = built.stdout.trim().split('\n').pop()!;
    console.log(`image: ${image} built in ${((Date.now() - started) / 1000).toFixed(0)} s`);

    port = await freePort();
    base = `http://127.0.0.1:${port}`;
    issuer = `http://localhost:${port}`;
    // The secrets, as a Secret's files: readable by the image's user only.
    secretsDir = tempDir('tessera-image-secrets-');
    dirs.push(secretsDir);
    chmodSync(secretsDir, 0o755);
    for (const [name, value] of [
      ['admin', secrets.admin],
      ['client', secrets.client],
      ['master-key', secrets.masterKey],
    ] as const) {
      const file = path.join(secretsDir, name);
      writeFileSync(file, `${value}\n`, { mode: 0o400 });
      chownSync(file, 65532, 65532);
    }
    const configRoot = tempDir('tessera-image-config-');
    dirs.push(configRoot);
    config = new ConfigMapDir(path.join(configRoot, 'config'));
    config.write('tessera.yaml', applyFile(false));
    await podmanOk('volume', 'create', volume);
  }, 15 * 60_000);

  afterAll(async () => {
    for (const name of containers) await podman('rm', '--force', '--time', '0', name);
    await podman('volume', 'rm', '--force', volume);
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  }, 120_000);

  /** Starts a container of the image on the volume; resolves once /readyz answers 200, with the time it took. */
  async function start(name: string): Promise<number> {
    containers.push(name);
    // prettier-ignore
    await podmanOk(
      'run', '--detach', '--name', name, '--network', 'host',
      '--read-only', '--read-only-tmpfs=false', '--cap-drop', 'all', '--security-opt', 'no-new-privileges',
      '--ulimit', 'nofile=20000:20000', '--ulimit', 'nproc=4096:4096',
      '--volume', `${volume}:/data`,
      '--volume', `${secretsDir}:/run/secrets:ro`,
      '--volume', `${config.dir}:/config:ro`,
      '--env', `TESSERA_PORT=${port}`,
      '--env', 'TESSERA_MASTER_KEY_FILE=/run/secrets/master-key',
      '--env', 'TESSERA_BOOTSTRAP_ADMIN_CLIENT_ID=platform-admin',
      '--env', 'TESSERA_BOOTSTRAP_ADMIN_CLIENT_SECRET_FILE=/run/secrets/admin',
      '--env', 'TESSERA_APPLY_FILE=/config/tessera.yaml',
      '--env', 'TESSERA_SHUTDOWN_DELAY=1',
      image,
    );
    try {
      await waitFor(async () => (await status(`${base}/readyz`)) === 200, 60_000, 25);
    } catch (error) {
      const logs = await podman('logs', name);
      throw new Error(`${name} not ready\n${logs.stdout}${logs.stderr}`, { cause: error });
    }
    const readyAt = Date.now();
    const startedAt = Number(
      BigInt((await podmanOk('inspect', '--format', '{{.State.StartedAt.UnixNano}}', name)).trim()) /
        1_000_000n,
    );
    return readyAt - startedAt;
  }

  it('is under 200 MB, runs as 65532 with the contract`s settings, and holds no secret in its configuration', async () => {
    const [inspected] = JSON.parse(await podmanOk('image', 'inspect', image)) as {
      Size: number;
      Healthcheck?: { Test: string[] };
      Config: {
        User: string;
        Env: string[];
        Entrypoint: string[];
        Cmd: string[];
        Volumes?: Record<string, unknown>;
      };
    }[];
    console.log(`image: ${(inspected!.Size / MB).toFixed(0)} MB`);
    expect(inspected!.Size).toBeLessThan(200 * MB);
    const c = inspected!.Config;
    expect(c.User).toBe('65532:65532');
    expect(c.Env).toEqual(
      expect.arrayContaining([
        'NODE_ENV=production',
        'TESSERA_HOST=0.0.0.0',
        'TESSERA_DATA_DIR=/data',
        'TESSERA_CONTAINER=true',
        'NODE_DISABLE_COMPILE_CACHE=1',
      ]),
    );
    // Nothing secret is configured in the image: the secrets are files mounted at run time.
    for (const env of c.Env) expect(env.split('=')[0]).not.toMatch(/SECRET|PASSWORD|KEY|TOKEN|CREDENTIAL/i);
    expect(c.Entrypoint).toEqual([
      '/nodejs/bin/node',
      '--disable-warning=ExperimentalWarning',
      '/app/bin/tessera.js',
    ]);
    expect(c.Cmd).toEqual(['serve']);
    expect(Object.keys(c.Volumes ?? {})).toEqual(['/data']);
    // podman shows a docker-format image's HEALTHCHECK beside its Config.
    expect(inspected!.Healthcheck?.Test).toEqual([
      'CMD',
      '/nodejs/bin/node',
      '--disable-warning=ExperimentalWarning',
      '/app/bin/tessera.js',
      'healthcheck',
    ]);
  });

  it('starts read-only as 65532 with the bootstrap admin and the apply file; healthcheck answers 0', async () => {
    const ms = await start(`tessera-image-test-${id}-1`);
    console.log(`image: container start → /readyz 200 in ${ms} ms`);
    const name = containers[0]!;
    expect((await podmanOk('inspect', '--format', '{{.Config.User}}', name)).trim()).toBe('65532:65532');
    // From inside: its user; what the image has and has not (no shell, no package manager, no compiler, no
    // development dependency); the root not writable, /data writable.
    const probe = await podmanOk(
      'exec',
      name,
      '/nodejs/bin/node',
      '-e',
      `const fs = require('node:fs');
       const writable = (p) => { try { fs.writeFileSync(p, ''); fs.rmSync(p); return true } catch { return false } };
       console.log(JSON.stringify({
         uid: process.getuid(), gid: process.getgid(), node: process.version,
         present: ${JSON.stringify([
           '/bin/sh',
           '/usr/bin/sh',
           '/bin/bash',
           '/bin/busybox',
           '/usr/bin/apt',
           '/usr/bin/apt-get',
           '/usr/bin/dpkg',
           '/nodejs/bin/npm',
           '/usr/local/bin/npm',
           '/usr/bin/gcc',
           '/usr/bin/cc',
           '/usr/bin/curl',
           '/usr/bin/wget',
           '/app/src',
           '/app/node_modules/typescript',
           '/app/node_modules/vite',
           '/app/node_modules/node',
           '/app/node_modules/vitest',
           '/app/dist/console/index.html',
           '/app/dist/cli/index.js',
         ])}.filter((p) => fs.existsSync(p)),
         writable: ['/app/x', '/tmp/x', '/home/nonroot/x', '/x', '/data/x'].filter(writable),
       }))`,
    );
    expect(JSON.parse(probe)).toEqual({
      uid: 65532,
      gid: 65532,
      node: expect.stringMatching(/^v22\./),
      present: ['/app/dist/console/index.html', '/app/dist/cli/index.js'],
      writable: ['/data/x'],
    });

    const health = await podman('exec', name, '/nodejs/bin/node', '/app/bin/tessera.js', 'healthcheck');
    expect(health.code, health.stderr).toBe(0);
    // Nothing answering on the port it is told: not 0.
    const elsewhere = await podman(
      'exec',
      '--env',
      `TESSERA_PORT=${await freePort()}`,
      name,
      '/nodejs/bin/node',
      '/app/bin/tessera.js',
      'healthcheck',
    );
    expect(elsewhere.code).not.toBe(0);
    // The image's HEALTHCHECK (kept by --format docker), as podman runs it.
    const podmanHealth = await podman('healthcheck', 'run', name);
    expect(podmanHealth.code, podmanHealth.stdout + podmanHealth.stderr).toBe(0);
  });

  it('issues a token to the applied client that its JWKS verifies, and one to the bootstrap admin', async () => {
    const issued = await token(base, {
      client_id: 'orders-worker',
      client_secret: secrets.client,
      audience: API,
    });
    expect(issued.status, JSON.stringify(issued.body)).toBe(200);
    expect(issued.body.scope).toBe('orders:read');
    firstToken = String(issued.body.access_token);
    const { payload } = await jwtVerify(
      firstToken,
      createRemoteJWKSet(new URL(`${base}/.well-known/jwks.json`)),
      {
        issuer,
        audience: API,
      },
    );
    expect(payload.client_id).toBe('orders-worker');
    firstKids = await kids(base);
    expect(firstKids).toContain(decodeProtectedHeader(firstToken).kid);

    const admin = await token(base, {
      client_id: 'platform-admin',
      client_secret: secrets.admin,
      audience: `${issuer}/admin/v1`,
    });
    expect(admin.status, JSON.stringify(admin.body)).toBe(200);
    expect(String(admin.body.scope).split(' ')).toContain('clients:read');
    const listed = await fetch(`${base}/admin/v1/clients`, {
      headers: { authorization: `Bearer ${String(admin.body.access_token)}` },
    });
    expect(listed.status).toBe(200);
    const { items } = (await listed.json()) as { items: { client_id: string }[] };
    expect(items.map((c) => c.client_id).sort()).toEqual(['orders-worker', 'platform-admin']);
  });

  it('follows an update of its ConfigMap: a new audience and grant work within seconds', async () => {
    expect(
      (await token(base, { client_id: 'orders-worker', client_secret: secrets.client, audience: LEDGER }))
        .status,
    ).not.toBe(200);
    config.write('tessera.yaml', applyFile(true));
    const ms = await waitFor(
      async () =>
        (await token(base, { client_id: 'orders-worker', client_secret: secrets.client, audience: LEDGER }))
          .status === 200,
      20_000,
      250,
    );
    console.log(`image: ConfigMap update applied in ${ms} ms`);
  });

  it('stops on SIGTERM with exit code 0', async () => {
    const name = containers[0]!;
    const started = Date.now();
    await podmanOk('stop', '--time', '30', name);
    expect(Date.now() - started).toBeLessThan(25_000);
    expect((await podmanOk('inspect', '--format', '{{.State.ExitCode}}', name)).trim()).toBe('0');
  });

  it('starts again on the same /data: the same signing keys and clients', async () => {
    const ms = await start(`tessera-image-test-${id}-2`);
    console.log(`image: second start → /readyz 200 in ${ms} ms`);
    expect(await kids(base)).toEqual(firstKids);
    // The first container's token still verifies against the second's keys.
    await jwtVerify(firstToken, createRemoteJWKSet(new URL(`${base}/.well-known/jwks.json`)), {
      issuer,
      audience: API,
    });
    for (const audience of [API, LEDGER])
      expect(
        (await token(base, { client_id: 'orders-worker', client_secret: secrets.client, audience })).status,
      ).toBe(200);
    expect(
      (
        await token(base, {
          client_id: 'platform-admin',
          client_secret: secrets.admin,
          audience: `${issuer}/admin/v1`,
        })
      ).status,
    ).toBe(200);
    await podmanOk('stop', '--time', '30', containers[1]!);
    expect((await podmanOk('inspect', '--format', '{{.State.ExitCode}}', containers[1]!)).trim()).toBe('0');
  });

  it('shows no secret in its logs, its configuration or its history', async () => {
    const logs = (await Promise.all(containers.map((name) => podman('logs', name)))).map(
      (r) => r.stdout + r.stderr,
    );
    for (const log of logs) expect(log).toContain('tessera is listening');
    const seen = [
      ...logs,
      ...(await Promise.all(containers.map((name) => podmanOk('inspect', name)))),
      await podmanOk('image', 'inspect', image),
      await podmanOk('history', '--no-trunc', image),
      await podmanOk('history', '--no-trunc', '--format', '{{.CreatedBy}}', image),
    ].join('\n');
    for (const secret of Object.values(secrets)) expect(seen).not.toContain(secret);
    // Nor the build machine's: its npm CA is an argument of the build stages only.
    expect(seen).not.toContain('NODE_EXTRA_CA_CERTS');
  });
});
