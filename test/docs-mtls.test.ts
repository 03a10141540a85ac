/**
 * docs/mtls.md works as pasted: its blocks marked `<!-- tested: … -->` are run as they stand, in a new directory —
 * the four openssl commands of a client certificate, the server certificate and `npx tessera serve` over TLS, the
 * client registered and its token asked for with curl — and its resource server, which checks cnf.x5t#S256, runs
 * as written and takes a certificate-bound token only over a connection with that certificate. Only the ports are
 * changed (to free ones), and `npx tessera` is this checkout's CLI, as it is when the guide is followed in one.
 */
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { decodeJwt } from 'jose';
import { Agent, fetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from './helpers/server.js';
import { waitFor } from './helpers/wait.js';

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '..');
const GUIDE = readFileSync(join(ROOT, 'docs/mtls.md'), 'utf8');

/** The code block after `<!-- tested: name -->`. */
function block(name: string): string {
  const match = new RegExp(`<!-- tested: ${name} -->\\s*\`\`\`(?:sh|js)\\n([\\s\\S]*?)\`\`\``).exec(GUIDE);
  if (!match) throw new Error(`docs/mtls.md has no block tested: ${name}`);
  return match[1]!;
}

let dir: string;
let env: NodeJS.ProcessEnv;
let port: number;
let apiPort: number;
let server: ChildProcess | undefined;
let api: ChildProcess | undefined;
let clientId: string;

/** A block run by bash in the guide's directory, its ports made free ones. */
const bash = (script: string) =>
  run('bash', ['-euo', 'pipefail', '-c', script.replaceAll('8443', String(port))], { cwd: dir, env });

beforeAll(async () => {
  // Inside node_modules: the resource server's `import … from 'jose'` resolves as in a project that installed it.
  dir = mkdtempSync(join(ROOT, 'node_modules', '.tessera-docs-mtls-'));
  port = await freePort();
  apiPort = await freePort();
  // `npx tessera` in a checkout: this one's CLI.
  writeFileSync(
    join(dir, 'npx'),
    `#!/bin/sh\n[ "$1" = tessera ] && shift && exec node --disable-warning=ExperimentalWarning ${ROOT}/bin/tessera.js "$@"\necho "npx $1: only npx tessera is run by this test" >&2\nexit 127\n`,
  );
  chmodSync(join(dir, 'npx'), 0o755);
  env = {
    ...process.env,
    PATH: `${dir}:${process.env.PATH}`,
    TESSERA_LOG_LEVEL: 'warn',
    TESSERA_DATA_DIR: undefined,
    TESSERA_DATABASE_URL: undefined,
  };
}, 30_000);

afterAll(async () => {
  server?.kill('SIGKILL');
  api?.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

describe('docs/mtls.md, as pasted', () => {
  it('four openssl commands make a client certificate that chains to its CA, for client authentication', async () => {
    await bash(block('certificate'));
    const verified = await run(
      'openssl',
      ['verify', '-CAfile', 'ca.pem', '-purpose', 'sslclient', 'worker.pem'],
      {
        cwd: dir,
      },
    );
    expect(verified.stdout).toBe('worker.pem: OK\n');
    const subject = await run(
      'openssl',
      ['x509', '-in', 'worker.pem', '-noout', '-subject', '-nameopt', 'RFC2253'],
      {
        cwd: dir,
      },
    );
    expect(subject.stdout).toBe('subject=CN=worker,O=Example Inc,C=US\n');
  });

  it('Tessera serves HTTPS with the server certificate, trusting the CA for client certificates', async () => {
    const [certificate, ...start] = block('serve').replaceAll('8443', String(port)).split('\n');
    // The first command makes the server certificate (it may wrap onto a second line); then the server starts.
    const serveAt = start.findIndex((line) => line.startsWith('TESSERA_TLS_CERT='));
    await bash([certificate, ...start.slice(0, serveAt)].join('\n'));
    server = spawn('bash', ['-c', start.slice(serveAt).join('\n')], { cwd: dir, env, stdio: 'ignore' });
    const ca = readFileSync(join(dir, 'ca.pem'), 'utf8');
    const agent = new Agent({ connect: { ca } });
    await waitFor(
      () =>
        fetch(`https://localhost:${port}/healthz`, { dispatcher: agent }).then(
          (r) => r.status === 200,
          () => false,
        ),
      30_000,
      100,
    );
  }, 40_000);

  it('the client registered with its SPIFFE ID gets a token with curl and its certificate', async () => {
    const script = `${block('token')}`.replace(/\n$/, '') + '\necho\necho "$CLIENT_ID"';
    const { stdout } = await bash(script);
    // What the commands print (the audience added), then curl's answer, then the id.
    const [answer, id] = stdout.trim().split('\n').slice(-2);
    clientId = id!;
    const body = JSON.parse(answer!) as Record<string, unknown>;
    expect([body.token_type, body.expires_in]).toEqual(['Bearer', 1800]);
    const claims = decodeJwt(body.access_token as string);
    expect([claims.iss, claims.client_id, claims.aud]).toEqual([
      `https://localhost:${port}`,
      clientId,
      'https://api.example.com',
    ]);
  });

  it('the resource server takes a certificate-bound token only over a connection with that certificate', async () => {
    // Its own TLS certificate, from the guide's CA; the client bound to its certificate from now on.
    await bash(
      'openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj "/CN=localhost" ' +
        '-addext "subjectAltName=DNS:localhost" -CA ca.pem -CAkey ca.key -keyout api.key -out api.pem 2>/dev/null\n' +
        `TESSERA_PORT=8443 TESSERA_ISSUER=https://localhost:8443 npx tessera client update ${clientId} --cert-bound-tokens\n` +
        'openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=intruder" -keyout other.key ' +
        '-out other.csr 2>/dev/null\n' +
        'openssl x509 -req -in other.csr -CA ca.pem -CAkey ca.key -days 1 -extfile worker.ext -out other.pem 2>/dev/null',
    );
    writeFileSync(join(dir, 'api.mjs'), block('resource-server').replace('9443', String(apiPort)));
    api = spawn(process.execPath, ['api.mjs'], {
      cwd: dir,
      env: { ...env, TESSERA_ISSUER: `https://localhost:${port}`, NODE_EXTRA_CA_CERTS: join(dir, 'ca.pem') },
      stdio: 'ignore',
    });
    const file = (name: string) => readFileSync(join(dir, name), 'utf8');
    const as = (name: string | undefined) =>
      new Agent({
        connect: {
          ca: file('ca.pem'),
          ...(name === undefined ? {} : { cert: file(`${name}.pem`), key: file(`${name}.key`) }),
        },
      });
    const worker = as('worker');
    await waitFor(
      () =>
        fetch(`https://localhost:${apiPort}/`, { dispatcher: worker }).then(
          () => true,
          () => false,
        ),
      15_000,
      100,
    );
    // A bound token: once the change has reached the server (the CLI wrote it to the store).
    let token = '';
    await waitFor(async () => {
      const response = await fetch(`https://localhost:${port}/oauth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: `grant_type=client_credentials&client_id=${clientId}&audience=https://api.example.com`,
        dispatcher: worker,
      });
      token = ((await response.json()) as { access_token: string }).access_token;
      return decodeJwt(token).cnf !== undefined;
    }, 5000);
    const call = async (dispatcher: Agent) =>
      (
        await fetch(`https://localhost:${apiPort}/`, {
          headers: { authorization: `Bearer ${token}` },
          dispatcher,
        })
      ).status;
    expect(await call(worker)).toBe(200);
    expect(await call(as('other'))).toBe(401);
    expect(await call(as(undefined))).toBe(401);
  }, 60_000);
});
