/**
 * Black-box tests of the `tessera` command line: every command runs as a real process on a real data
 * directory, as an operator runs it. The CLI loads dist/, so `npm run build` must have run (`npm test` does).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { once } from 'node:events';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify, type JSONWebKeySet } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tokenParams } from './helpers/provision.js';
import {
  collect,
  ROOT,
  startServe,
  TESSERA,
  tessera,
  tesseraEnv,
  type CliResult,
  type Serve,
} from './helpers/process.js';
import {
  expectFieldRefusals,
  expectTable,
  group,
  jsonError,
  workspace,
  type Workspace,
} from './helpers/cli.js';
import { createTestDatabase, type TestDatabase } from './helpers/postgres.js';
import { freePort, postToken } from './helpers/server.js';
import { pollUntil } from './helpers/wait.js';

// --- helpers ---

const CLIENT_ID = /^[0-9a-f]{32}$/;
const SECRET = /^[A-Za-z0-9_-]{43,}$/;
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const anyTime = () => expect.stringMatching(ISO_TIME);

const API = 'https://api.example.com';
const SANDBOX = 'https://api.sandbox.example.com';
const STAGING = 'https://api.staging.example.com/v1';

/** Loaded before the CLI: loads it, says so on fd 3, and waits until stdin closes. */
const GATE = `--import=data:text/javascript,${encodeURIComponent(
  `import { writeSync } from 'node:fs';
   await import(${JSON.stringify(pathToFileURL(path.join(ROOT, 'dist/cli/index.js')).href)});
   writeSync(3, 'ready');
   process.stdin.resume();
   await new Promise((resolve) => process.stdin.once('end', resolve));`,
)}`;

/**
 * Runs several commands at the same moment. Started plainly, Node's start-up spreads them over a few
 * hundred milliseconds (more on a busy machine) and they seldom meet; so each first loads the CLI, then
 * waits, and all are released at once.
 */
async function runTogether(env: NodeJS.ProcessEnv, runs: string[][]): Promise<CliResult[]> {
  const children = runs.map((args) =>
    spawn(process.execPath, [TESSERA[0], GATE, ...TESSERA.slice(1), ...args], {
      cwd: ROOT,
      env,
      stdio: ['pipe', 'pipe', 'pipe', 'pipe'],
    }),
  );
  const results = children.map(collect);
  await Promise.all(children.map((child, i) => Promise.race([once(child.stdio[3]!, 'data'), results[i]])));
  for (const child of children) child.stdin!.end();
  return Promise.all(results);
}

/** A record: `  key  value` lines, values aligned. */
function parseRecord(text: string): [string, string][] {
  expect(text.endsWith('\n')).toBe(true);
  const lines = text.slice(0, -1).split('\n');
  const entries = lines.map((line) => {
    const m = /^ {2}([a-z_]+) +(\S.*)$/.exec(line);
    expect(m, `record line ${JSON.stringify(line)}`).not.toBeNull();
    return [m![1]!, m![2]!] as [string, string];
  });
  const valueStart = (line: string) => line.search(/(?<=\S {2,})\S/);
  for (const line of lines) expect(valueStart(line)).toBe(valueStart(lines[0]!));
  return entries;
}

/** What `client create` and `client rotate-secret` print in text mode: a line, the record, the curl hint. */
function parseSecretOutput(text: string, intro: string): { record: [string, string][]; hint: string } {
  const [first, record, hint, ...rest] = text.split('\n\n');
  expect(first).toBe(intro);
  expect(rest).toEqual([]);
  return { record: parseRecord(record! + '\n'), hint: hint! };
}

function curlHint(issuer: string, id: string, secret: string, audience: string): string {
  return (
    `Get a token:\n  curl -s ${issuer}/oauth/token -d grant_type=client_credentials ` +
    `-d client_id=${id} -d client_secret=${secret} -d audience=${encodeURIComponent(audience)}\n`
  );
}

const withoutSecret = ({ client_secret: _secret, ...rest }: Record<string, unknown>) => rest;

/** The bytes of the store: the SQLite file, its write-ahead log and its shared-memory file, as present. */
function storeBytes(dir: string): Buffer {
  const files = ['tessera.db', 'tessera.db-wal', 'tessera.db-shm']
    .map((name) => path.join(dir, name))
    .filter((file) => existsSync(file));
  return Buffer.concat(files.map((file) => readFileSync(file)));
}

// --- the commands ---

group('tessera migrate', (ws) => {
  it('creates the store in an empty data directory; --json', async () => {
    const r = await ws.ok('migrate', '--json');
    expect(r.json).toEqual({ migrated: true, engine: 'sqlite' });
    expect(existsSync(path.join(ws.dir, 'tessera.db'))).toBe(true);
  });

  it('is idempotent; text, and --json before the command', async () => {
    expect((await ws.ok('migrate')).stdout).toBe('Store schema is up to date (sqlite).\n');
    expect((await ws.ok('--json', 'migrate')).json).toEqual({ migrated: true, engine: 'sqlite' });
  });
});

group('tessera audience', (ws) => {
  let production: Record<string, unknown>;
  let sandbox: Record<string, unknown>;
  let staging: Record<string, unknown>;

  it('add --name --ttl --alg --json prints the audience', async () => {
    const r = await ws.ok(
      'audience',
      'add',
      API,
      '--name',
      'Production API',
      '--ttl',
      '600',
      '--alg',
      'RS256',
      '--json',
    );
    production = r.json;
    expect(production).toEqual({
      id: expect.stringMatching(/^aud_/),
      identifier: API,
      scopes: [],
      resource_server_client_ids: [],
      token_profile: 'rfc9068',
      name: 'Production API',
      token_ttl: 600,
      signing_alg: 'RS256',
      created_at: anyTime(),
      updated_at: anyTime(),
    });
    expect(production.updated_at).toBe(production.created_at);
  });

  it('add without options leaves name, lifetime and algorithm unset', async () => {
    sandbox = (await ws.ok('audience', 'add', SANDBOX, '--json')).json;
    expect(sandbox).toEqual({
      id: expect.stringMatching(/^aud_/),
      identifier: SANDBOX,
      scopes: [],
      resource_server_client_ids: [],
      token_profile: 'rfc9068',
      name: null,
      token_ttl: null,
      signing_alg: null,
      created_at: anyTime(),
      updated_at: anyTime(),
    });
  });

  it('add in text mode says what it registered', async () => {
    const r = await ws.ok('audience', 'add', STAGING, '--name', 'Staging', '--alg', 'EdDSA');
    expect(r.stdout).toBe(`Audience ${STAGING} registered.\n`);
  });

  it('list --json lists every audience, sorted by URL', async () => {
    const r = await ws.ok('audience', 'list', '--json');
    expect(r.json).toEqual([
      production,
      sandbox,
      {
        id: expect.stringMatching(/^aud_/),
        identifier: STAGING,
        scopes: [],
        resource_server_client_ids: [],
        token_profile: 'rfc9068',
        name: 'Staging',
        token_ttl: null,
        signing_alg: 'EdDSA',
        created_at: anyTime(),
        updated_at: anyTime(),
      },
    ]);
    staging = r.json[2];
  });

  it('list in text mode prints a table', async () => {
    expectTable(
      (await ws.ok('audience', 'list')).stdout,
      [
        'URL',
        'NAME',
        'TOKEN_TTL',
        'SIGNING_ALG',
        'TOKEN_PROFILE',
        'SCOPES',
        'RESOURCE_SERVERS',
        'CREATED_AT',
      ],
      [
        [API, 'Production API', '600', 'RS256', 'rfc9068', '-', '-', production.created_at],
        [SANDBOX, '-', '-', '-', 'rfc9068', '-', '-', sandbox.created_at],
        [STAGING, 'Staging', '-', 'EdDSA', 'rfc9068', '-', '-', staging.created_at],
      ],
    );
  });

  it('remove --json, and remove in text mode', async () => {
    expect((await ws.ok('audience', 'remove', SANDBOX, '--json')).json).toEqual({
      url: SANDBOX,
      removed: true,
    });
    expect((await ws.ok('audience', 'remove', STAGING)).stdout).toBe(
      `Audience ${STAGING} removed, with its grants.\n`,
    );
    expect((await ws.ok('audience', 'list', '--json')).json).toEqual([production]);
  });

  it('list of none: an empty array, or a header alone', async () => {
    await ws.ok('audience', 'remove', API);
    expect((await ws.ok('audience', 'list', '--json')).json).toEqual([]);
    expect((await ws.ok('audience', 'list')).stdout).toBe(
      'URL  NAME  TOKEN_TTL  SIGNING_ALG  TOKEN_PROFILE  SCOPES  RESOURCE_SERVERS  CREATED_AT\n',
    );
  });
});

group('tessera client', (ws) => {
  let billing: Record<string, unknown>;
  let reporting: Record<string, unknown>;
  let ledger: Record<string, unknown> & { client_id: string; client_secret: string };

  beforeAll(async () => {
    await ws.ok('audience', 'add', API);
    await ws.ok('audience', 'add', SANDBOX);
  });

  it('create --name --grant --grant --id --ttl --json prints the client and its secret', async () => {
    const r = await ws.ok(
      ...['client', 'create', '--name', 'Billing service', '--grant', SANDBOX, '--grant', API],
      ...['--id', 'billing-svc', '--ttl', '900', '--json'],
    );
    billing = r.json;
    expect(billing).toEqual({
      client_id: 'billing-svc',
      name: 'Billing service',
      enabled: true,
      token_ttl: 900,
      quota_per_minute: null,
      quota_per_day: null,
      description: null,
      token_endpoint_auth_method: 'client_secret_basic',
      jwks: null,
      jwks_uri: null,
      dpop_bound_access_tokens: false,
      tls_client_auth_subject_dn: null,
      tls_client_auth_san_dns: null,
      tls_client_auth_san_uri: null,
      tls_client_auth_san_ip: null,
      tls_client_auth_san_email: null,
      tls_client_certificate_bound_access_tokens: false,
      claims: null,
      audiences: [API, SANDBOX],
      created_at: anyTime(),
      updated_at: anyTime(),
      secret_rotated_at: anyTime(),
      revoked_before: null,
      client_secret: expect.stringMatching(SECRET),
    });
    expect(billing.updated_at).toBe(billing.created_at);
    expect(billing.secret_rotated_at).toBe(billing.created_at);
  });

  it('create with --name alone: a generated 32-hex-digit id, a fresh secret, no grants', async () => {
    reporting = (await ws.ok('client', 'create', '--name', 'reporting', '--json')).json;
    expect(reporting).toEqual({
      client_id: expect.stringMatching(CLIENT_ID),
      name: 'reporting',
      enabled: true,
      token_ttl: null,
      quota_per_minute: null,
      quota_per_day: null,
      description: null,
      token_endpoint_auth_method: 'client_secret_basic',
      jwks: null,
      jwks_uri: null,
      dpop_bound_access_tokens: false,
      tls_client_auth_subject_dn: null,
      tls_client_auth_san_dns: null,
      tls_client_auth_san_uri: null,
      tls_client_auth_san_ip: null,
      tls_client_auth_san_email: null,
      tls_client_certificate_bound_access_tokens: false,
      claims: null,
      audiences: [],
      created_at: anyTime(),
      updated_at: anyTime(),
      secret_rotated_at: anyTime(),
      revoked_before: null,
      client_secret: expect.stringMatching(SECRET),
    });
    expect(reporting.client_secret).not.toBe(billing.client_secret);
  });

  it('create in text mode prints the record with the secret, and how to get a token', async () => {
    const r = await ws.ok('client', 'create', '--name', 'Ledger', '--grant', SANDBOX);
    const { record, hint } = parseSecretOutput(
      r.stdout,
      'Client created. The secret is shown this once: store it now.',
    );
    const [id, secret] = [record[0]![1], record[1]![1]];
    expect(id).toMatch(CLIENT_ID);
    expect(secret).toMatch(SECRET);
    expect(record).toEqual([
      ['client_id', id],
      ['client_secret', secret],
      ['name', 'Ledger'],
      ['description', '-'],
      ['enabled', 'yes'],
      ['token_ttl', '-'],
      ['quota', '-'],
      ['claims', '-'],
      ['auth_method', 'client_secret_basic'],
      ['dpop_bound', 'no'],
      ['cert_bound', 'no'],
      ['grants', SANDBOX],
      ['created_at', anyTime()],
      ['updated_at', anyTime()],
      ['secret_rotated_at', anyTime()],
      ['revoked_before', '-'],
    ]);
    // Neither TESSERA_PORT nor TESSERA_ISSUER is set: the default issuer.
    expect(hint).toBe(curlHint('http://localhost:8080', id, secret, SANDBOX));
    ledger = {
      client_id: id,
      client_secret: secret,
      created_at: record.find(([key]) => key === 'created_at')![1],
    };
  });

  it('list --json lists every client in creation order, without secrets', async () => {
    expect((await ws.ok('client', 'list', '--json')).json).toEqual([
      withoutSecret(billing),
      withoutSecret(reporting),
      {
        client_id: ledger.client_id,
        name: 'Ledger',
        enabled: true,
        token_ttl: null,
        quota_per_minute: null,
        quota_per_day: null,
        description: null,
        token_endpoint_auth_method: 'client_secret_basic',
        jwks: null,
        jwks_uri: null,
        dpop_bound_access_tokens: false,
        tls_client_auth_subject_dn: null,
        tls_client_auth_san_dns: null,
        tls_client_auth_san_uri: null,
        tls_client_auth_san_ip: null,
        tls_client_auth_san_email: null,
        tls_client_certificate_bound_access_tokens: false,
        claims: null,
        audiences: [SANDBOX],
        created_at: ledger.created_at,
        updated_at: ledger.created_at,
        secret_rotated_at: ledger.created_at,
        revoked_before: null,
      },
    ]);
  });

  it('list in text mode prints a table', async () => {
    expectTable(
      (await ws.ok('client', 'list')).stdout,
      ['CLIENT_ID', 'NAME', 'ENABLED', 'AUDIENCES', 'CREATED_AT'],
      [
        ['billing-svc', 'Billing service', 'yes', `${API}, ${SANDBOX}`, billing.created_at],
        [reporting.client_id, 'reporting', 'yes', '-', reporting.created_at],
        [ledger.client_id, 'Ledger', 'yes', SANDBOX, ledger.created_at],
      ],
    );
  });

  it('show --json prints the client without its secret', async () => {
    expect((await ws.ok('client', 'show', 'billing-svc', '--json')).json).toEqual(withoutSecret(billing));
  });

  it('show in text mode prints the record without its secret', async () => {
    expect(parseRecord((await ws.ok('client', 'show', 'billing-svc')).stdout)).toEqual([
      ['client_id', 'billing-svc'],
      ['name', 'Billing service'],
      ['description', '-'],
      ['enabled', 'yes'],
      ['token_ttl', '900'],
      ['quota', '-'],
      ['claims', '-'],
      ['auth_method', 'client_secret_basic'],
      ['dpop_bound', 'no'],
      ['cert_bound', 'no'],
      ['grants', `${API}, ${SANDBOX}`],
      ['created_at', billing.created_at],
      ['updated_at', billing.updated_at],
      ['secret_rotated_at', billing.secret_rotated_at],
      ['revoked_before', '-'],
    ]);
  });

  it('rotate-secret --json prints the client with a new secret', async () => {
    const r = await ws.ok('client', 'rotate-secret', 'billing-svc', '--json');
    expect(r.json).toEqual({
      ...withoutSecret(billing),
      updated_at: anyTime(),
      secret_rotated_at: anyTime(),
      revoked_before: null,
      client_secret: expect.stringMatching(SECRET),
    });
    expect(r.json.client_secret).not.toBe(billing.client_secret);
    expect(r.json.secret_rotated_at > (billing.secret_rotated_at as string)).toBe(true);
    expect(r.json.updated_at >= r.json.secret_rotated_at).toBe(true);
    billing = r.json;
  });

  it('rotate-secret in text mode prints the record with the new secret, and how to get a token', async () => {
    const r = await ws.ok('client', 'rotate-secret', ledger.client_id);
    const { record, hint } = parseSecretOutput(
      r.stdout,
      'Secret rotated. The new secret is shown this once: store it now.',
    );
    const secret = record[1]![1];
    expect(secret).toMatch(SECRET);
    expect(secret).not.toBe(ledger.client_secret);
    expect(record).toEqual([
      ['client_id', ledger.client_id],
      ['client_secret', secret],
      ['name', 'Ledger'],
      ['description', '-'],
      ['enabled', 'yes'],
      ['token_ttl', '-'],
      ['quota', '-'],
      ['claims', '-'],
      ['auth_method', 'client_secret_basic'],
      ['dpop_bound', 'no'],
      ['cert_bound', 'no'],
      ['grants', SANDBOX],
      ['created_at', ledger.created_at],
      ['updated_at', anyTime()],
      ['secret_rotated_at', anyTime()],
      ['revoked_before', '-'],
    ]);
    expect(hint).toBe(curlHint('http://localhost:8080', ledger.client_id, secret, SANDBOX));
  });

  it('disable and enable, --json and text: disabling revokes the tokens it has, enabling revives none', async () => {
    const disabled = await ws.ok('client', 'disable', 'billing-svc', '--json');
    expect(disabled.json).toEqual({
      ...withoutSecret(billing),
      enabled: false,
      updated_at: anyTime(),
      revoked_before: anyTime(),
    });
    // The moment it was disabled (the management layer's clock; updated_at is the store's, a moment later).
    expect(disabled.json.revoked_before <= disabled.json.updated_at).toBe(true);
    expect(disabled.json.revoked_before > (billing.updated_at as string)).toBe(true);
    const enabled = await ws.ok('client', 'enable', 'billing-svc', '--json');
    expect(enabled.json).toEqual({
      ...withoutSecret(billing),
      enabled: true,
      updated_at: anyTime(),
      revoked_before: disabled.json.revoked_before,
    });

    expect((await ws.ok('client', 'disable', ledger.client_id)).stdout).toBe(
      `Client ${ledger.client_id} disabled.\n`,
    );
    const row = (await ws.ok('client', 'list')).stdout
      .split('\n')
      .find((l) => l.startsWith(ledger.client_id));
    expect(row?.split(/ {2,}/)[2]).toBe('no');
    expect((await ws.ok('client', 'enable', ledger.client_id)).stdout).toBe(
      `Client ${ledger.client_id} enabled.\n`,
    );
    expect((await ws.ok('client', 'show', ledger.client_id, '--json')).json.enabled).toBe(true);
  });

  it('revoke-tokens --json and text: the moment, in the client too, and its audit event', async () => {
    const revoked = await ws.ok('client', 'revoke-tokens', 'billing-svc', '--json');
    expect(revoked.json).toEqual({ revoked_before: anyTime() });
    const shown = await ws.ok('client', 'show', 'billing-svc', '--json');
    expect(shown.json.revoked_before).toBe(revoked.json.revoked_before);
    expect(shown.json.updated_at >= revoked.json.revoked_before).toBe(true);
    const text = await ws.ok('client', 'revoke-tokens', ledger.client_id);
    const at = /at or before (\S+) \(to the second\)/.exec(text.stdout)?.[1];
    expect(text.stdout).toBe(
      `Client ${ledger.client_id}: its tokens issued at or before ${at} (to the second) are inactive.\n`,
    );
    expect((await ws.ok('client', 'show', ledger.client_id, '--json')).json.revoked_before).toBe(at);
    const events = (await ws.ok('audit', '--type', 'client.tokens_revoked', '--json')).json as {
      actor: string;
      target: string;
    }[];
    expect(events.map((e) => e.target).sort()).toEqual(['billing-svc', ledger.client_id].sort());
    for (const e of events) expect(e.actor).toMatch(/^cli:/);
    const missing = await ws.run('client', 'revoke-tokens', 'nobody', '--json');
    expect(missing.code).toBe(1);
    expect(jsonError(missing)).toEqual({
      error: 'client_not_found',
      message: 'client nobody does not exist',
    });
  });

  it('delete --json, and delete in text mode', async () => {
    expect((await ws.ok('client', 'delete', 'billing-svc', '--json')).json).toEqual({
      client_id: 'billing-svc',
      deleted: true,
    });
    expect((await ws.ok('client', 'delete', ledger.client_id)).stdout).toBe(
      `Client ${ledger.client_id} deleted.\n`,
    );
    expect((await ws.ok('client', 'list', '--json')).json).toEqual([withoutSecret(reporting)]);
  });
});

group('tessera client quotas', (ws) => {
  const ZERO =
    'a quota of 0 would refuse every token: use none to remove the limit, or disable the client (`tessera client disable`) to stop it';
  const RANGE = 'a quota must be a whole number from 1 to 1000000000, or none';
  /** What a usage error prints in text mode: the message, a blank line, then the command's help. */
  const usageText = async (message: string, ...command: string[]) =>
    `error: ${message}\n\n${(await ws.ok(...command, '--help')).stdout}`;
  let metered: Record<string, unknown> & { client_id: string };

  beforeAll(async () => {
    await ws.ok('audience', 'add', API);
  });

  it('create --quota-minute N --quota-day N --json: both limits, in the document', async () => {
    const r = await ws.ok(
      ...['client', 'create', '--name', 'metered', '--id', 'metered-svc', '--grant', API],
      ...['--quota-minute', '60', '--quota-day', '10000', '--json'],
    );
    metered = r.json;
    expect(r.json).toEqual({
      client_id: 'metered-svc',
      name: 'metered',
      enabled: true,
      token_ttl: null,
      quota_per_minute: 60,
      quota_per_day: 10_000,
      description: null,
      token_endpoint_auth_method: 'client_secret_basic',
      jwks: null,
      jwks_uri: null,
      dpop_bound_access_tokens: false,
      tls_client_auth_subject_dn: null,
      tls_client_auth_san_dns: null,
      tls_client_auth_san_uri: null,
      tls_client_auth_san_ip: null,
      tls_client_auth_san_email: null,
      tls_client_certificate_bound_access_tokens: false,
      claims: null,
      audiences: [API],
      created_at: anyTime(),
      updated_at: anyTime(),
      secret_rotated_at: anyTime(),
      revoked_before: null,
      client_secret: expect.stringMatching(SECRET),
    });
  });

  it('create --quota-day N alone, and create --quota-minute none (the same as leaving it out), in text mode', async () => {
    const daily = await ws.ok('client', 'create', '--name', 'daily', '--quota-day', '500');
    const { record } = parseSecretOutput(
      daily.stdout,
      'Client created. The secret is shown this once: store it now.',
    );
    expect(record.find(([key]) => key === 'quota')).toEqual(['quota', '500/day']);
    const unlimited = await ws.ok('client', 'create', '--name', 'free', '--quota-minute', 'none', '--json');
    expect(unlimited.json).toMatchObject({ name: 'free', quota_per_minute: null, quota_per_day: null });
    const both = await ws.ok(
      'client',
      'create',
      '--name',
      'both',
      '--quota-minute',
      '7',
      '--quota-day',
      '70',
    );
    const shown = parseSecretOutput(
      both.stdout,
      'Client created. The secret is shown this once: store it now.',
    );
    expect(shown.record.find(([key]) => key === 'quota')).toEqual(['quota', '7/minute, 70/day']);
  });

  it('set-quota --per-minute N --json: that limit set, the other left as it was', async () => {
    const r = await ws.ok('client', 'set-quota', 'metered-svc', '--per-minute', '30', '--json');
    expect(r.json).toEqual({
      ...withoutSecret(metered),
      quota_per_minute: 30,
      quota_per_day: 10_000,
      updated_at: anyTime(),
    });
    expect(r.json.updated_at > (metered.updated_at as string)).toBe(true);
    metered = r.json;
  });

  it('set-quota --per-day N in text mode: one line with both limits; the minute left out stays', async () => {
    expect(await ws.run('client', 'set-quota', 'metered-svc', '--per-day', '2000')).toEqual({
      code: 0,
      stdout: 'Client metered-svc: quota 30/minute, 2000/day.\n',
      stderr: '',
      json: undefined,
    });
    expect((await ws.ok('client', 'show', 'metered-svc', '--json')).json).toEqual({
      ...withoutSecret(metered),
      quota_per_minute: 30,
      quota_per_day: 2000,
      updated_at: anyTime(),
    });
  });

  it('set-quota --per-minute none --json removes the minute limit (null, not 0), the day limit stays', async () => {
    const r = await ws.ok('client', 'set-quota', 'metered-svc', '--per-minute', 'none', '--json');
    expect(r.json).toEqual({
      ...withoutSecret(metered),
      quota_per_minute: null,
      quota_per_day: 2000,
      updated_at: anyTime(),
    });
    expect(parseRecord((await ws.ok('client', 'show', 'metered-svc')).stdout)).toContainEqual([
      'quota',
      '2000/day',
    ]);
  });

  it('set-quota --per-minute none --per-day none in text mode: no quota at all', async () => {
    const r = await ws.run('client', 'set-quota', 'metered-svc', '--per-minute', 'none', '--per-day', 'none');
    expect(r).toEqual({ code: 0, stdout: 'Client metered-svc: quota none.\n', stderr: '', json: undefined });
    expect((await ws.ok('client', 'show', 'metered-svc', '--json')).json).toEqual({
      ...withoutSecret(metered),
      quota_per_minute: null,
      quota_per_day: null,
      updated_at: anyTime(),
    });
    expect(parseRecord((await ws.ok('client', 'show', 'metered-svc')).stdout)).toContainEqual(['quota', '-']);
    // And back: a limit can be set again after none.
    expect(
      (await ws.ok('client', 'set-quota', 'metered-svc', '--per-day', '5', '--json')).json,
    ).toMatchObject({
      quota_per_minute: null,
      quota_per_day: 5,
    });
  });

  it('set-quota 0 (or 00): exit 2, a message that points at none and at client disable, nothing written', async () => {
    const before = (await ws.ok('client', 'show', 'metered-svc', '--json')).json;
    const [minute, day, padded] = await Promise.all([
      ws.run('client', 'set-quota', 'metered-svc', '--per-minute', '0', '--json'),
      ws.run('client', 'set-quota', 'metered-svc', '--per-day', '0', '--json'),
      ws.run('client', 'set-quota', 'metered-svc', '--per-minute', '00', '--per-day', '9', '--json'),
    ]);
    for (const [r, option, value] of [
      [minute, '--per-minute', '0'],
      [day, '--per-day', '0'],
      [padded, '--per-minute', '00'],
    ] as const) {
      expect(r.code).toBe(2);
      expect(jsonError(r)).toEqual({
        error: 'usage',
        message: `option '${option} <n>' argument '${value}' is invalid. ${ZERO}`,
      });
    }
    const text = await ws.run('client', 'set-quota', 'metered-svc', '--per-minute', '0');
    expect(text).toEqual({
      code: 2,
      stdout: '',
      stderr: await usageText(
        `option '--per-minute <n>' argument '0' is invalid. ${ZERO}`,
        ...['client', 'set-quota'],
      ),
      json: undefined,
    });
    expect((await ws.ok('client', 'show', 'metered-svc', '--json')).json).toEqual(before);
  });

  it('create --quota-minute 0 or --quota-day 0: exit 2, the same message, no client created', async () => {
    const before = (await ws.ok('client', 'list', '--json')).json;
    const [minute, day] = await Promise.all([
      ws.run('client', 'create', '--name', 'zero', '--quota-minute', '0', '--json'),
      ws.run('client', 'create', '--name', 'zero', '--quota-day', '0', '--json'),
    ]);
    expect(minute.code).toBe(2);
    expect(jsonError(minute)).toEqual({
      error: 'usage',
      message: `option '--quota-minute <n>' argument '0' is invalid. ${ZERO}`,
    });
    expect(day.code).toBe(2);
    expect(jsonError(day)).toEqual({
      error: 'usage',
      message: `option '--quota-day <n>' argument '0' is invalid. ${ZERO}`,
    });
    const text = await ws.run('client', 'create', '--name', 'zero', '--quota-day', '0');
    expect(text).toEqual({
      code: 2,
      stdout: '',
      stderr: await usageText(
        `option '--quota-day <n>' argument '0' is invalid. ${ZERO}`,
        'client',
        'create',
      ),
      json: undefined,
    });
    expect((await ws.ok('client', 'list', '--json')).json).toEqual(before);
  });

  it('a quota that is not a whole number from 1 to 1000000000, or none: exit 2, usage', async () => {
    const values = ['abc', '1.5', '-5', '1e3', '1000000001', 'None', ' 5', ''];
    const results = await Promise.all(
      values.map((value) => ws.run('client', 'set-quota', 'metered-svc', '--per-day', value, '--json')),
    );
    results.forEach((r, i) => {
      expect(r.code, values[i]).toBe(2);
      expect(jsonError(r)).toEqual({
        error: 'usage',
        message: `option '--per-day <n>' argument '${values[i]}' is invalid. ${RANGE}`,
      });
    });
    expect(
      (await ws.ok('client', 'set-quota', 'metered-svc', '--per-day', '1000000000', '--json')).json,
    ).toMatchObject({ quota_per_day: 1_000_000_000 });
  });

  it('set-quota with neither limit: exit 2, nothing to set', async () => {
    const message = 'set-quota needs --per-minute, --per-day or both (N or none)';
    const json = await ws.run('client', 'set-quota', 'metered-svc', '--json');
    expect(json.code).toBe(2);
    expect(jsonError(json)).toEqual({ error: 'invalid_field', message });
    expect(await ws.run('client', 'set-quota', 'metered-svc')).toEqual({
      code: 2,
      stdout: '',
      stderr: `tessera: ${message}\n`,
      json: undefined,
    });
  });

  it('set-quota of an unknown client: exit 1, client_not_found', async () => {
    const r = await ws.run('client', 'set-quota', 'no-such-client', '--per-minute', 'none', '--json');
    expect(r.code).toBe(1);
    expect(jsonError(r)).toEqual({
      error: 'client_not_found',
      message: 'client no-such-client does not exist',
    });
  });
});

describe('tessera client quotas on PostgreSQL', () => {
  // Before the fix, `none` reached the store as '': SQLite kept it (read back as 0), PostgreSQL refused it.
  let db: TestDatabase;
  let env: NodeJS.ProcessEnv;
  beforeAll(async () => {
    db = await createTestDatabase();
    env = tesseraEnv({ TESSERA_DATABASE_URL: await db.freshSchema(), TESSERA_LOG_LEVEL: 'silent' });
  });
  afterAll(async () => db?.drop());

  it('create --quota-minute N, then set-quota none and N: null and numbers in the store', async () => {
    const run = async (...args: string[]) => {
      const r = await tessera(env, ...args, '--json');
      expect(r, args.join(' ')).toMatchObject({ code: 0, stderr: '' });
      return r.json as Record<string, unknown>;
    };
    const created = await run('client', 'create', '--name', 'pg', '--id', 'pg-svc', '--quota-minute', '5');
    expect(created).toMatchObject({ quota_per_minute: 5, quota_per_day: null });
    expect(
      await run('client', 'set-quota', 'pg-svc', '--per-minute', 'none', '--per-day', '9'),
    ).toMatchObject({
      quota_per_minute: null,
      quota_per_day: 9,
    });
    expect(await run('client', 'set-quota', 'pg-svc', '--per-day', 'none')).toMatchObject({
      quota_per_minute: null,
      quota_per_day: null,
    });
    expect(await run('client', 'set-quota', 'pg-svc', '--per-minute', '12')).toMatchObject({
      quota_per_minute: 12,
      quota_per_day: null,
    });
    expect(await run('client', 'show', 'pg-svc')).toEqual({
      ...withoutSecret(created),
      quota_per_minute: 12,
      updated_at: anyTime(),
    });
  });
});

group('tessera grant', (ws) => {
  let id: string;
  const audiencesOf = async (clientId: string) =>
    (await ws.ok('client', 'show', clientId, '--json')).json.audiences;

  beforeAll(async () => {
    await ws.ok('audience', 'add', API);
    await ws.ok('audience', 'add', SANDBOX);
    id = (await ws.ok('client', 'create', '--name', 'svc', '--grant', API, '--json')).json.client_id;
  });

  it('add --json grants an audience; a second add says it was there already', async () => {
    // The admin API's document of the grant (as its PUT answers), and whether this command created it.
    const listed = (await ws.ok('audience', 'list', '--json')).json as { id: string; identifier: string }[];
    const sandboxId = listed.find((a) => a.identifier === SANDBOX)!.id;
    const document = {
      client_id: id,
      audience_id: sandboxId,
      audience: SANDBOX,
      scopes: [],
      claims: null,
      token_exchange: false,
    };
    const first = await ws.ok('grant', 'add', id, SANDBOX, '--json');
    expect(first.json).toEqual({ ...document, added: true });
    expect(await audiencesOf(id)).toEqual([API, SANDBOX]);
    const again = await ws.ok('grant', 'add', id, SANDBOX, '--json');
    expect(again.json).toEqual({ ...document, added: false });
  });

  it('set-claims --json: the same document, with the claims; in text mode, the claims', async () => {
    const listed = (await ws.ok('audience', 'list', '--json')).json as { id: string; identifier: string }[];
    const set = await ws.ok('grant', 'set-claims', id, SANDBOX, '{"tier":"gold"}', '--json');
    expect(set.json).toEqual({
      client_id: id,
      audience_id: listed.find((a) => a.identifier === SANDBOX)!.id,
      audience: SANDBOX,
      scopes: [],
      claims: { tier: 'gold' },
      token_exchange: false,
      added: false,
    });
    expect((await ws.ok('grant', 'set-claims', id, SANDBOX, '{}')).stdout).toBe(
      `Client ${id}, ${SANDBOX}: claims none.\n`,
    );
  });

  it('remove --json, and remove in text mode', async () => {
    const removed = await ws.ok('grant', 'remove', id, SANDBOX, '--json');
    expect(removed.json).toEqual({ client_id: id, audience: SANDBOX, removed: true });
    expect((await ws.ok('grant', 'remove', id, API)).stdout).toBe(
      `Client ${id} may no longer get tokens for ${API}.\n`,
    );
    expect(await audiencesOf(id)).toEqual([]);
  });

  it('add in text mode, new and again', async () => {
    expect((await ws.ok('grant', 'add', id, API)).stdout).toBe(
      `Client ${id} may now get tokens for ${API}.\n`,
    );
    expect((await ws.ok('grant', 'add', id, API)).stdout).toBe(`Client ${id} already had ${API}.\n`);
  });

  it('audience remove withdraws the audience from every client', async () => {
    await ws.ok('grant', 'add', id, SANDBOX);
    await ws.ok('audience', 'remove', API);
    expect(await audiencesOf(id)).toEqual([SANDBOX]);
  });
});

group('tessera keys list', (ws) => {
  // The server makes the keys (a listed key is in the server tests below); the CLI never makes one.
  it('on a store without keys: an empty array, or a header alone', async () => {
    expect((await ws.ok('keys', 'list', '--json')).json).toEqual([]);
    expect((await ws.ok('keys', 'list')).stdout).toBe(
      'KID  ALG  STATUS  CREATED_AT  ACTIVATES_AT  RETIRES_AT\n',
    );
  });
});

// --- secrets ---

group('client secrets', (ws) => {
  it('are printed by create and rotate-secret only, and stored only as a digest', async () => {
    await ws.ok('audience', 'add', API);
    const one = (await ws.ok('client', 'create', '--name', 'one', '--grant', API, '--json')).json;
    const two = (await ws.ok('client', 'create', '--name', 'two')).stdout;
    const twoId = /^ {2}client_id +(\S+)$/m.exec(two)![1]!;
    const twoSecret = /^ {2}client_secret +(\S+)$/m.exec(two)![1]!;
    const rotated = (await ws.ok('client', 'rotate-secret', one.client_id, '--json')).json;
    const secrets: string[] = [one.client_secret, twoSecret, rotated.client_secret];
    for (const secret of secrets) expect(secret).toMatch(SECRET);
    expect(new Set(secrets).size).toBe(3);

    // Writes one after the other (see "several commands at once"), then the reads side by side.
    const writes = [
      ['client', 'disable', twoId, '--json'],
      ['client', 'enable', twoId, '--json'],
      ['grant', 'add', twoId, API, '--json'],
    ];
    const reads = [
      ['client', 'list'],
      ['client', 'list', '--json'],
      ['client', 'show', one.client_id],
      ['client', 'show', one.client_id, '--json'],
      ['client', 'show', twoId],
      ['client', 'show', twoId, '--json'],
    ];
    const results: CliResult[] = [];
    for (const args of writes) results.push(await ws.ok(...args));
    results.push(...(await Promise.all(reads.map((args) => ws.ok(...args)))));
    results.forEach((r, i) => {
      const command = [...writes, ...reads][i]!.join(' ');
      for (const secret of secrets) expect(r.stdout, command).not.toContain(secret);
      expect(r.stdout, command).not.toMatch(/secret(?!_rotated_at|_basic)/);
    });

    const onDisk = storeBytes(ws.dir);
    for (const secret of secrets) expect(onDisk.includes(secret), 'a secret in the store').toBe(false);
    // The right bytes were read: they hold the digest of each live secret.
    for (const secret of [twoSecret, rotated.client_secret]) {
      const digest = 'sha256:' + createHash('sha256').update(secret).digest('base64url');
      expect(onDisk.includes(digest)).toBe(true);
    }
    expect(statSync(path.join(ws.dir, 'tessera.db')).mode & 0o777).toBe(0o600);
  });
});

// --- failures and exit codes ---

group('errors', (ws) => {
  const unknownId = '0123456789abcdef0123456789abcdef';
  /** Usage errors seen with --json, for the last test of the group. */
  const usageRuns: [string, CliResult][] = [];

  /** The error document of a usage error with --json: its last line of stderr (see the last test). */
  async function usageError(...args: string[]): Promise<unknown> {
    const r = await ws.run(...args, '--json');
    usageRuns.push([args.join(' '), r]);
    expect(r.code, args.join(' ')).toBe(2);
    expect(r.stdout).toBe('');
    return JSON.parse(r.stderr.trimEnd().split('\n').at(-1)!);
  }

  beforeAll(async () => {
    await ws.ok('audience', 'add', API);
  });

  it('client show, rotate-secret, disable, enable, delete of an unknown id: exit 1, client_not_found', async () => {
    const commands = ['show', 'rotate-secret', 'disable', 'enable', 'delete'];
    const results = await Promise.all(
      commands.map((command) => ws.run('client', command, unknownId, '--json')),
    );
    results.forEach((r, i) => {
      expect(r.code, commands[i]).toBe(1);
      expect(jsonError(r)).toEqual({
        error: 'client_not_found',
        message: `client ${unknownId} does not exist`,
      });
    });
    expect(await ws.run('client', 'show', unknownId)).toMatchObject({
      code: 1,
      stdout: '',
      stderr: `tessera: client ${unknownId} does not exist\n`,
    });
  });

  it('grants and audiences that do not exist: exit 1, the code of what is missing, nothing written', async () => {
    const id = (await ws.ok('client', 'create', '--name', 'known', '--json')).json.client_id;
    const cases: [string[], string, string][] = [
      [['grant', 'add', unknownId, API], 'client_not_found', `client ${unknownId} does not exist`],
      [['grant', 'add', id, SANDBOX], 'audience_not_found', `audience ${SANDBOX} is not registered`],
      [['grant', 'remove', id, API], 'grant_not_found', `client ${id} has no grant for ${API}`],
      [['audience', 'remove', SANDBOX], 'audience_not_found', `audience ${SANDBOX} is not registered`],
      [
        ['client', 'create', '--name', 'x', '--grant', API, '--grant', SANDBOX],
        'audience_not_found',
        `audience ${SANDBOX} is not registered`,
      ],
    ];
    const results = await Promise.all(cases.map(([args]) => ws.run(...args, '--json')));
    results.forEach((r, i) => {
      expect(r.code, cases[i]![0].join(' ')).toBe(1);
      expect(jsonError(r)).toEqual({ error: cases[i]![1], message: cases[i]![2] });
    });
    expect((await ws.ok('client', 'list', '--json')).json).toEqual([
      expect.objectContaining({ client_id: id, audiences: [] }),
    ]);
  });

  it('a duplicate audience or client id: exit 1, audience_exists or client_exists', async () => {
    await ws.ok('client', 'create', '--name', 'a', '--id', 'svc-1');
    const [json, text, client] = await Promise.all([
      ws.run('audience', 'add', API, '--json'),
      ws.run('audience', 'add', API),
      ws.run('client', 'create', '--name', 'b', '--id', 'svc-1', '--json'),
    ]);
    expect(json.code).toBe(1);
    expect(jsonError(json)).toEqual({
      error: 'audience_exists',
      message: `audience ${API} is already registered`,
    });
    expect(text).toMatchObject({
      code: 1,
      stdout: '',
      stderr: `tessera: audience ${API} is already registered\n`,
    });
    expect(client.code).toBe(1);
    expect(jsonError(client)).toEqual({ error: 'client_exists', message: 'client svc-1 already exists' });
  });

  it('an invalid audience URL: exit 2, invalid_field', async () => {
    const cases: [string, string][] = [
      ['not-a-url', 'audience must be an absolute URL, got "not-a-url"'],
      ['ftp://files.example.com', 'audience must be an http or https URL'],
      ['https://api.example.com/#part', 'audience URL must not have a fragment (RFC 8707 §2)'],
      ['https://user:pw@api.example.com', 'audience URL must not carry credentials'],
      ['https://api.example.com/a b', 'audience URL must not contain spaces or control characters'],
    ];
    await expectFieldRefusals(ws, (url) => ['audience', 'add', url], cases);
    expect(await ws.run('audience', 'add', 'ftp://files.example.com')).toMatchObject({
      code: 2,
      stdout: '',
      stderr: 'tessera: audience must be an http or https URL\n',
    });
    expect(
      (await ws.ok('audience', 'list', '--json')).json.map((a: { identifier: string }) => a.identifier),
    ).toEqual([API]);
  });

  it('a bad --ttl: exit 2, usage, nothing written', async () => {
    const whole = 'token lifetime must be a whole number of seconds';
    const range = `${whole} from 60 to 86400`;
    const cases: [string[], string, string][] = [
      [['audience', 'add', SANDBOX], 'abc', whole],
      [['audience', 'add', SANDBOX], '1.5', whole],
      [['audience', 'add', SANDBOX], '-60', whole],
      [['audience', 'add', SANDBOX], '59', range],
      [['client', 'create', '--name', 'x'], '86401', range],
      [['client', 'create', '--name', 'x'], '', whole],
    ];
    const bodies = await Promise.all(cases.map(([args, ttl]) => usageError(...args, '--ttl', ttl)));
    bodies.forEach((body, i) => {
      const [, ttl, reason] = cases[i]!;
      expect(body).toEqual({
        error: 'usage',
        message: `option '--ttl <seconds>' argument '${ttl}' is invalid. ${reason}`,
      });
    });
    const text = await ws.run('audience', 'add', SANDBOX, '--ttl', 'abc');
    expect(text).toMatchObject({ code: 2, stdout: '' });
    expect(text.stderr).toMatch(/^error: option '--ttl <seconds>' argument 'abc' is invalid\. /);
    expect(text.stderr).toContain('Usage: tessera audience add [options] <url>');
    expect(
      (await ws.ok('audience', 'list', '--json')).json.map((a: { identifier: string }) => a.identifier),
    ).toEqual([API]);
  });

  it('a bad --alg: exit 2, usage', async () => {
    const algs = ['HS256', 'none', 'es256'];
    const bodies = await Promise.all(algs.map((alg) => usageError('audience', 'add', SANDBOX, '--alg', alg)));
    bodies.forEach((body, i) =>
      expect(body).toEqual({
        error: 'usage',
        message: `option '--alg <alg>' argument '${algs[i]}' is invalid. Allowed choices are ES256, RS256, PS256, EdDSA.`,
      }),
    );
    const text = await ws.run('audience', 'add', SANDBOX, '--alg', 'HS256');
    expect(text).toMatchObject({ code: 2, stdout: '' });
    expect(text.stderr).toMatch(/^error: option '--alg <alg>' argument 'HS256' is invalid\. /);
  });

  it('an invalid --grant URL or --id: exit 2, usage', async () => {
    const [grant, id] = await Promise.all([
      usageError('client', 'create', '--name', 'x', '--grant', 'ftp://files.example.com'),
      usageError('client', 'create', '--name', 'x', '--id', 'a'),
    ]);
    expect(grant).toEqual({
      error: 'usage',
      message:
        "option '--grant <audience>' argument 'ftp://files.example.com' is invalid. audience must be an http or https URL",
    });
    expect(id).toEqual({
      error: 'usage',
      message:
        "option '--id <client-id>' argument 'a' is invalid. client id must be 3 to 128 characters of A-Z a-z 0-9 . _ ~ -",
    });
  });

  it('a missing or empty --name: exit 2, usage', async () => {
    const [missing, empty, text] = await Promise.all([
      usageError('client', 'create', '--grant', API),
      usageError('client', 'create', '--name', '  '),
      ws.run('client', 'create'),
    ]);
    expect(missing).toEqual({ error: 'usage', message: "required option '--name <name>' not specified" });
    expect(empty).toEqual({
      error: 'usage',
      message: "option '--name <name>' argument '  ' is invalid. the name must not be empty",
    });
    expect(text).toMatchObject({ code: 2, stdout: '' });
    expect(text.stderr).toMatch(/^error: required option '--name <name>' not specified\n/);
    expect(text.stderr).toContain('Usage: tessera client create [options]');
  });

  it('an unknown command, subcommand or option, or a missing argument: exit 2, usage', async () => {
    const cases: [string[], string][] = [
      [['frobnicate'], "unknown command 'frobnicate'"],
      [['client', 'frobnicate'], "unknown command 'frobnicate'"],
      [['client', 'list', '--frobnicate'], "unknown option '--frobnicate'"],
      [['client', 'show'], "missing required argument 'client-id'"],
    ];
    const bodies = await Promise.all(cases.map(([args]) => usageError(...args)));
    bodies.forEach((body, i) => expect(body).toEqual({ error: 'usage', message: cases[i]![1] }));
    const text = await ws.run('frobnicate');
    expect(text).toMatchObject({ code: 2, stdout: '' });
    expect(text.stderr).toMatch(/^error: unknown command 'frobnicate'\n/);
    expect(text.stderr).toContain('Usage: tessera [options] [command]');
  });

  it('an invalid setting: exit 2, invalid_config', async () => {
    const r = await tessera({ ...ws.env, TESSERA_LOG_LEVEL: 'loud' }, 'client', 'list', '--json');
    expect(r.code).toBe(2);
    expect(jsonError(r)).toEqual({
      error: 'invalid_config',
      message: 'TESSERA_LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent, got "loud"',
    });
  });

  it('no command at all: exit 2; with --json, a usage error that says what is missing', async () => {
    const text = await ws.run();
    expect(text.code).toBe(2);
    expect(text.stderr).toContain('Usage: tessera [options] [command]');
    const json = await ws.run('--json');
    expect(json.code).toBe(2);
    expect(jsonError(json)).toEqual({ error: 'usage', message: expect.stringMatching(/command/) });
  });

  it('with --json, a usage error puts only its JSON document on stderr (no commander text, no help)', () => {
    expect(usageRuns.length).toBeGreaterThan(10);
    const offenders = usageRuns
      .filter(([, r]) => r.stderr.trimEnd().split('\n').length !== 1)
      .map(([args]) => args);
    expect(offenders).toEqual([]);
  });
});

// --- several processes on one store ---

describe('several commands at once', () => {
  // Operators script the CLI, and deployments run `tessera migrate` and start servers side by side: the
  // store is to wait for its lock (busy_timeout) rather than fail.
  it('on a fresh data directory: all succeed', async () => {
    const ws = workspace();
    try {
      const results = await runTogether(
        ws.env,
        Array.from({ length: 6 }, () => ['audience', 'list', '--json']),
      );
      for (const r of results) {
        expect({ code: r.code, stderr: r.stderr, stdout: r.stdout }).toEqual({
          code: 0,
          stderr: '',
          stdout: '[]\n',
        });
      }
    } finally {
      ws.remove();
    }
  });

  it('writing to one store: all succeed', async () => {
    const ws = workspace();
    try {
      await ws.ok('migrate');
      const added: string[] = [];
      for (let round = 0; round < 3; round++) {
        const urls = Array.from({ length: 6 }, (_, i) => `https://api${round}${i}.example.com`);
        const results = await runTogether(
          ws.env,
          urls.map((url) => ['audience', 'add', url, '--json']),
        );
        for (const r of results) expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
        added.push(...urls);
      }
      const list = (await ws.ok('audience', 'list', '--json')).json as { identifier: string }[];
      expect(list.map((a) => a.identifier)).toEqual(added);
    } finally {
      ws.remove();
    }
  });
});

// --- a running server follows the CLI ---

describe('a running server', () => {
  let ws: Workspace;
  const AUDIENCE = 'https://api.example.com'; // the one of the first-token hint
  let server: ChildProcess;
  let exited: Promise<number | null>;
  let serverStderr = '';
  let base: string;
  let issuer: string;
  let client: { id: string; secret: string };

  /** Polls the token endpoint every 100 ms until it answers `status`; returns the answer and how long it took. */
  async function untilToken(status: number, id: string, secret: string, audience = AUDIENCE) {
    const { value: answer, ms: elapsed } = await pollUntil(
      () => postToken(base, tokenParams(id, secret, audience)),
      (a) => a.status === status,
      4000,
      100,
    );
    return { answer, elapsed };
  }

  const invalidClient = { error: 'invalid_client', error_description: expect.any(String) };
  const invalidTarget = { error: 'invalid_target', error_description: expect.any(String) };

  beforeAll(async () => {
    ws = workspace();
    const port = await freePort();
    ws.env.TESSERA_PORT = String(port);
    ws.env.TESSERA_HOST = '127.0.0.1';
    base = `http://127.0.0.1:${port}`;
    issuer = `http://localhost:${port}`;
    server = spawn(process.execPath, [...TESSERA, 'serve'], {
      cwd: ROOT,
      env: ws.env,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    server.stderr!.setEncoding('utf8').on('data', (chunk: string) => (serverStderr += chunk));
    exited = new Promise((resolve) => server.once('exit', (code) => resolve(code)));
    const healthy = await pollUntil(
      async () => {
        if (server.exitCode !== null)
          throw new Error(`tessera serve exited with ${server.exitCode}: ${serverStderr}`);
        return (await fetch(`${base}/healthz`).catch(() => undefined))?.ok === true;
      },
      (ok) => ok,
      15_000,
      100,
    );
    if (!healthy.value) throw new Error(`tessera serve does not answer /healthz: ${serverStderr}`);
  });

  afterAll(async () => {
    if (server && server.exitCode === null && server.signalCode === null) {
      server.kill('SIGKILL');
      await exited;
    }
    ws?.remove();
  });

  it('on an empty store, prints how to get a first token', async () => {
    await pollUntil(
      () => serverStderr,
      (text) => text.includes('curl'),
      5000,
      100,
    );
    expect(serverStderr).toContain(`npx tessera audience add ${AUDIENCE} --name "Example API"`);
    expect(serverStderr).toContain(`npx tessera client create --name demo --grant ${AUDIENCE}`);
    expect(serverStderr).toContain(`curl -s ${issuer}/oauth/token -d grant_type=client_credentials`);
  });

  it('issues a token to a client made with the CLI as the hint says, within 2 s', async () => {
    await ws.ok('audience', 'add', AUDIENCE, '--name', 'Example API');
    const r = await ws.ok('client', 'create', '--name', 'demo', '--grant', AUDIENCE, '--json');
    client = { id: r.json.client_id, secret: r.json.client_secret };
    const { answer, elapsed } = await untilToken(200, client.id, client.secret);
    expect(answer).toMatchObject({
      status: 200,
      body: { access_token: expect.any(String), token_type: 'Bearer', expires_in: 1800 },
    });
    expect(elapsed).toBeLessThan(2000);

    const token = answer.body.access_token as string;
    const jwks = (await (await fetch(`${base}/.well-known/jwks.json`)).json()) as JSONWebKeySet;
    const verified = await jwtVerify(token, createLocalJWKSet(jwks), {
      issuer,
      audience: AUDIENCE,
      typ: 'at+jwt',
    });
    expect(verified.payload).toMatchObject({ sub: client.id, client_id: client.id });

    // `keys list` shows the key that signed it, active.
    const keys = (await ws.ok('keys', 'list', '--json')).json as Record<string, unknown>[];
    const key = (k: Record<string, unknown>) => ({
      kid: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
      alg: expect.stringMatching(/^(ES256|RS256|PS256|EdDSA)$/),
      status: 'active',
      created_at: anyTime(),
      activates_at: k.created_at,
      retires_at: null,
    });
    for (const k of keys) expect(k).toEqual(key(k));
    expect(keys).toContainEqual(
      expect.objectContaining({ kid: decodeProtectedHeader(token).kid, alg: 'ES256' }),
    );
    expectTable(
      (await ws.ok('keys', 'list')).stdout,
      ['KID', 'ALG', 'STATUS', 'CREATED_AT', 'ACTIVATES_AT', 'RETIRES_AT'],
      keys.map((k) => [k.kid, k.alg, 'active', k.created_at, k.activates_at, '-']),
    );
  });

  it('client disable: 401 invalid_client within 2 s; client enable: 200 within 2 s', async () => {
    await ws.ok('client', 'disable', client.id);
    const off = await untilToken(401, client.id, client.secret);
    expect(off.answer).toMatchObject({ status: 401, body: invalidClient });
    expect(off.elapsed).toBeLessThan(2000);

    await ws.ok('client', 'enable', client.id);
    const on = await untilToken(200, client.id, client.secret);
    expect(on.answer.status).toBe(200);
    expect(on.elapsed).toBeLessThan(2000);
  });

  it('client rotate-secret: the old secret 401 and the new one 200 within 2 s', async () => {
    const secret = (await ws.ok('client', 'rotate-secret', client.id, '--json')).json.client_secret as string;
    const old = await untilToken(401, client.id, client.secret);
    expect(old.answer).toMatchObject({ status: 401, body: invalidClient });
    const fresh = await untilToken(200, client.id, secret);
    expect(fresh.answer.status).toBe(200);
    expect(old.elapsed + fresh.elapsed).toBeLessThan(2000);
    client.secret = secret;
  });

  it('grant remove: 400 invalid_target within 2 s; grant add: 200 within 2 s', async () => {
    await ws.ok('grant', 'remove', client.id, AUDIENCE);
    const removed = await untilToken(400, client.id, client.secret);
    expect(removed.answer).toMatchObject({ status: 400, body: invalidTarget });
    expect(removed.elapsed).toBeLessThan(2000);

    await ws.ok('grant', 'add', client.id, AUDIENCE);
    const added = await untilToken(200, client.id, client.secret);
    expect(added.answer.status).toBe(200);
    expect(added.elapsed).toBeLessThan(2000);
  });

  it('audience remove: 400 invalid_target within 2 s', async () => {
    await ws.ok('audience', 'remove', AUDIENCE);
    const removed = await untilToken(400, client.id, client.secret);
    expect(removed.answer).toMatchObject({ status: 400, body: invalidTarget });
    expect(removed.elapsed).toBeLessThan(2000);
  });

  it('client delete: 401 invalid_client within 2 s', async () => {
    await ws.ok('audience', 'add', SANDBOX);
    await ws.ok('grant', 'add', client.id, SANDBOX);
    expect((await untilToken(200, client.id, client.secret, SANDBOX)).answer.status).toBe(200);
    await ws.ok('client', 'delete', client.id);
    const deleted = await untilToken(401, client.id, client.secret, SANDBOX);
    expect(deleted.answer).toMatchObject({ status: 401, body: invalidClient });
    expect(deleted.elapsed).toBeLessThan(2000);
  });

  it('stops on SIGTERM with exit code 0', async () => {
    server.kill('SIGTERM');
    expect(await exited).toBe(0);
  });
});

// --- quotas set with the CLI, as a running server applies them ---

describe('quotas set with the CLI, on a running server', () => {
  let ws: Workspace;
  let serve: Serve;
  const QUOTA_EXCEEDED = {
    error: 'invalid_request',
    error_description: 'token quota exceeded for this client; reuse your token until it expires',
  };
  /** A client that only tells when the server has read the store's change feed (see synced). */
  let marker: { id: string; secret: string };

  const ask = (c: { id: string; secret: string }) => postToken(serve.url, tokenParams(c.id, c.secret, API));

  /** Polls (every 100 ms) until `c` gets `status`; fails after 4 s (the feed is read every 500 ms). */
  async function until(c: { id: string; secret: string }, status: number) {
    const { value: answer } = await pollUntil(
      () => ask(c),
      (a) => a.status === status,
      4000,
      100,
    );
    if (answer.status !== status)
      throw new Error(`still ${answer.status} after 4 s: ${JSON.stringify(answer.body)}`);
    return answer;
  }

  /**
   * Waits until the server has seen every change written so far, without asking for a token of the client
   * under test (which would count against its quota): the marker is disabled (or enabled) after those
   * changes, and the feed is read in order, so once the marker's answer flips, the earlier change is seen.
   * The marker is asked for first, so that the server has it cached: a marker it has not cached would be
   * read from the store, and its answer would flip at once, before the feed is read (a flaky test in CI).
   */
  async function synced(): Promise<void> {
    const { enabled } = (await ws.ok('client', 'show', marker.id, '--json')).json as { enabled: boolean };
    expect((await ask(marker)).status).toBe(enabled ? 200 : 401);
    await ws.ok('client', enabled ? 'disable' : 'enable', marker.id);
    await until(marker, enabled ? 401 : 200);
  }

  const create = async (...options: string[]) => {
    const r = await ws.ok('client', 'create', '--name', 'quota test', '--grant', API, ...options, '--json');
    return { id: r.json.client_id as string, secret: r.json.client_secret as string };
  };

  /** Two tokens, then 429 with the quota body and a Retry-After within the minute. */
  async function twoThenRefused(c: { id: string; secret: string }): Promise<void> {
    expect((await ask(c)).status).toBe(200);
    expect((await ask(c)).status).toBe(200);
    const refused = await ask(c);
    expect({ status: refused.status, body: refused.body }).toEqual({ status: 429, body: QUOTA_EXCEEDED });
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(refused.headers.get('cache-control')).toBe('no-store');
    expect((await ask(c)).status).toBe(429);
  }

  beforeAll(async () => {
    ws = workspace();
    ws.env.TESSERA_PORT = String(await freePort());
    ws.env.TESSERA_HOST = '127.0.0.1';
    await ws.ok('audience', 'add', API);
    marker = await create();
    serve = await startServe(ws.env);
  });

  afterAll(async () => {
    await serve?.stop('SIGKILL');
    ws?.remove();
  });

  it('create --quota-minute 2: two tokens, then 429 with Retry-After', async () => {
    await twoThenRefused(await create('--quota-minute', '2'));
  });

  it('create --quota-day 2: two tokens, then 429 until the day is over', async () => {
    const daily = await create('--quota-day', '2');
    expect((await ask(daily)).status).toBe(200);
    expect((await ask(daily)).status).toBe(200);
    const refused = await ask(daily);
    expect({ status: refused.status, body: refused.body }).toEqual({ status: 429, body: QUOTA_EXCEEDED });
    // The day window opened with the first token, a second or so ago (generous for a slow machine).
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(86_400 - 60);
  });

  it('set-quota --per-minute 2 on a client the server has cached: two tokens, then 429', async () => {
    const c = await create();
    for (let i = 0; i < 5; i++) expect((await ask(c)).status).toBe(200); // no quota: not even counted
    await ws.ok('client', 'set-quota', c.id, '--per-minute', '2');
    await synced();
    await twoThenRefused(c);
  });

  it('set-quota --per-minute none --per-day none (the command of issue 10): tokens again, unlimited', async () => {
    const c = await create('--quota-minute', '2', '--quota-day', '1000');
    await twoThenRefused(c);
    const r = await ws.ok('client', 'set-quota', c.id, '--per-minute', 'none', '--per-day', 'none');
    expect(r.stdout).toBe(`Client ${c.id}: quota none.\n`);
    await until(c, 200);
    for (let i = 0; i < 20; i++) expect((await ask(c)).status).toBe(200);
  });

  it('set-quota --per-minute none leaves a day limit that still counts', async () => {
    const c = await create('--quota-minute', '2', '--quota-day', '4');
    await twoThenRefused(c); // four requests: two counted by the day, two refused by the minute
    await ws.ok('client', 'set-quota', c.id, '--per-minute', 'none');
    await until(c, 200); // the third token of the day
    expect((await ask(c)).status).toBe(200); // the fourth
    const refused = await ask(c);
    expect({ status: refused.status, body: refused.body }).toEqual({ status: 429, body: QUOTA_EXCEEDED });
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(86_400 - 60);
  });

  it('set-quota --per-minute 0 is refused, and the client keeps getting its tokens', async () => {
    const c = await create();
    expect((await ask(c)).status).toBe(200);
    expect((await ws.run('client', 'set-quota', c.id, '--per-minute', '0')).code).toBe(2);
    await synced();
    for (let i = 0; i < 10; i++) expect((await ask(c)).status).toBe(200);
  });
});

describe('tessera --version', () => {
  it("prints package.json's version and exits 0, as -V does", async () => {
    const { version } = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
      version: string;
    };
    for (const flag of ['--version', '-V']) {
      const result = await tessera(tesseraEnv({}), flag);
      expect({ code: result.code, stdout: result.stdout, stderr: result.stderr }).toEqual({
        code: 0,
        stdout: `${version}\n`,
        stderr: '',
      });
    }
  });
});
