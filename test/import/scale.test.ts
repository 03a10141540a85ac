/**
 * A big realm (docs/import.md, "Big exports"): a Keycloak export of 5,000 service-account clients (generated here,
 * of the fixture's shape) imported by the real CLI and applied within a minute; and the import's memory linear in
 * the export's size: the peak RSS of `tessera import` (a process of its own, its own resourceUsage().maxRSS) over
 * that of a 10-client export, for 1,000 and for 5,000 clients.
 *
 * The CLI loads dist/, so `npm run build` must have run (`npm test` does).
 */
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { collect, ROOT, tesseraEnv, tesseraOk } from '../helpers/process.js';
import { tempDir } from '../helpers/server.js';

const APIS = 50;

/** A realm export of `count` confidential clients with a service account, each granted one of 50 APIs. */
function realm(count: number): string {
  const apis = Array.from({ length: APIS }, (_, i) => ({
    clientId: `api-${i}`,
    name: `API ${i}`,
    rootUrl: `https://api-${i}.acme.example`,
    enabled: true,
    bearerOnly: true,
    serviceAccountsEnabled: false,
    publicClient: false,
    protocol: 'openid-connect',
    attributes: {},
  }));
  const clients = Array.from({ length: count }, (_, i) => ({
    id: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
    clientId: `job-${i}`,
    name: `Job ${i}`,
    description: `Batch job number ${i}`,
    enabled: true,
    clientAuthenticatorType: 'client-secret',
    secret: `s${String(i).padStart(8, '0')}-kept-from-keycloak-0123456789`,
    redirectUris: [],
    webOrigins: [],
    bearerOnly: false,
    standardFlowEnabled: false,
    directAccessGrantsEnabled: false,
    serviceAccountsEnabled: true,
    publicClient: false,
    protocol: 'openid-connect',
    attributes: { 'client.secret.creation.time': '1733270400', 'access.token.lifespan': '900' },
    protocolMappers: [
      {
        name: 'audience',
        protocol: 'openid-connect',
        protocolMapper: 'oidc-audience-mapper',
        config: { 'included.client.audience': `api-${i % APIS}`, 'access.token.claim': 'true' },
      },
      {
        name: 'tenant',
        protocol: 'openid-connect',
        protocolMapper: 'oidc-hardcoded-claim-mapper',
        config: {
          'claim.name': 'tenant',
          'claim.value': `t${i % 7}`,
          'jsonType.label': 'String',
          'access.token.claim': 'true',
        },
      },
    ],
    defaultClientScopes: ['web-origins', 'acr', 'profile', 'roles', 'basic', 'email', 'jobs:run'],
    optionalClientScopes: ['address', 'phone', 'offline_access', 'microprofile-jwt'],
  }));
  return JSON.stringify(
    {
      realm: 'big',
      enabled: true,
      clients: [...apis, ...clients],
      clientScopes: [{ name: 'jobs:run', protocol: 'openid-connect' }],
    },
    null,
    2,
  );
}

/** `tessera import keycloak` in a process of its own: its peak RSS in MB (VmHWM), and its time. */
async function importPeak(source: string, out: string): Promise<{ mb: number; ms: number }> {
  const script = `
    const { main } = await import(${JSON.stringify(path.join(ROOT, 'dist/cli/index.js'))});
    const started = performance.now();
    await main([process.execPath, 'tessera', 'import', 'keycloak', ${JSON.stringify(source)}, '-o', ${JSON.stringify(out)}]);
    const ms = performance.now() - started;
    // VmHWM, this process's own peak: getrusage's maxRSS keeps, across exec, the RSS of the forked copy of the test's
    // worker (hundreds of MB in a long run), which would be the base of every measurement.
    const hwm = Number(/^VmHWM:\\s+(\\d+) kB/m.exec((await import('node:fs')).readFileSync('/proc/self/status', 'utf8'))[1]);
    process.stdout.write(JSON.stringify({ code: process.exitCode ?? 0, maxRSS: hwm, ms }));
  `;
  const child = spawn(
    process.execPath,
    ['--disable-warning=ExperimentalWarning', '--input-type=module', '-e', script],
    {
      cwd: ROOT,
      env: tesseraEnv({ TESSERA_DATA_DIR: tempDir('tessera-import-peak-') }),
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const result = await collect(child);
  expect(result.code, result.stderr.slice(-2000)).toBe(0);
  const { code, maxRSS, ms } = result.json as { code: number; maxRSS: number; ms: number };
  expect(code).toBe(0);
  return { mb: maxRSS / 1024, ms };
}

describe('a realm of 5,000 clients', () => {
  it('is imported and applied within a minute, its secrets carried', async () => {
    const dir = tempDir('tessera-import-big-');
    const source = path.join(dir, 'realm.json');
    writeFileSync(source, realm(5000));
    const out = path.join(dir, 'tessera.yaml');
    const secrets = path.join(dir, 'secrets.json');
    const env = tesseraEnv({ TESSERA_DATA_DIR: path.join(dir, 'data') });
    const started = Date.now();
    const imported = await tesseraOk(
      env,
      'import',
      'keycloak',
      source,
      '-o',
      out,
      '--secrets',
      secrets,
      '--json',
    );
    expect(imported.json.apply_file.clients).toHaveLength(5000);
    expect(imported.json.apply_file.audiences).toHaveLength(APIS);
    expect(Object.keys(JSON.parse(readFileSync(secrets, 'utf8')) as object)).toHaveLength(5000);
    const applied = await tesseraOk(env, 'apply', '-f', out, '--secrets', secrets, '--json');
    const took = Date.now() - started;
    expect(applied.json.summary).toEqual({ create: APIS + 5000 + 5000, update: 0, delete: 0 });
    expect(applied.json.secrets).toEqual([]);
    expect(took).toBeLessThan(60_000);
    console.log(`5,000 clients: imported and applied in ${took} ms`);
  }, 120_000);

  it("takes memory linear in the export's size", async () => {
    const dir = tempDir('tessera-import-memory-');
    const runs: Record<number, { mb: number; ms: number; bytes: number }> = {};
    for (const count of [10, 1000, 5000]) {
      const source = path.join(dir, `realm-${count}.json`);
      const text = realm(count);
      writeFileSync(source, text);
      runs[count] = {
        ...(await importPeak(source, path.join(dir, `tessera-${count}.yaml`))),
        bytes: text.length,
      };
    }
    const base = runs[10]!.mb;
    const small = runs[1000]!.mb - base;
    const large = runs[5000]!.mb - base;
    console.log(
      `import peak RSS: 10 clients ${base.toFixed(0)} MB; 1,000 clients (${(runs[1000]!.bytes / 1e6).toFixed(1)} MB) +${small.toFixed(0)} MB in ${runs[1000]!.ms.toFixed(0)} ms; ` +
        `5,000 clients (${(runs[5000]!.bytes / 1e6).toFixed(1)} MB) +${large.toFixed(0)} MB in ${runs[5000]!.ms.toFixed(0)} ms`,
    );
    // Five times the clients, at most seven and a half times the memory above the base (linear: five; the
    // quadratic growth this guards against: twenty-five); and no more than 40 bytes of memory per byte of export.
    expect(large / small).toBeLessThan(7.5);
    expect((large * 1024 * 1024) / runs[5000]!.bytes).toBeLessThan(40);
  }, 120_000);
});
