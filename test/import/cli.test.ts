/**
 * `tessera import` end to end (MANAGEMENT.md, "Moving in from another server"; docs/import.md), with the real CLI:
 * each server's export (test/fixtures/import/<server>/) imported, the apply file applied by `tessera apply` (its
 * own validation: import has no rule of its own), a running `tessera serve` giving every imported client a token
 * for exactly its audiences and scopes, in the token profile of its server (verified against the server's JWKS);
 * imported and applied again, `No changes.`; every refusal with its exit code and its place, nothing written; no
 * secret in an apply file, the report, or the server's log.
 *
 * The CLI loads dist/, so `npm run build` must have run (`npm test` does).
 */
import { existsSync, mkdirSync, readFileSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { createRemoteJWKSet, jwtVerify, type JWTPayload } from 'jose';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { importExport, reportLineText, type ImportInput } from '../../src/management/import/index.js';
import { clientAssertion, signer } from '../helpers/key-client.js';
import { ROOT, startServe, tessera, tesseraEnv, tesseraOk, type Serve } from '../helpers/process.js';
import { basic, freePort, tempDir } from '../helpers/server.js';

const FIXTURES = path.join(ROOT, 'test/fixtures/import');
const fixture = (name: string): string => path.join(FIXTURES, name);

const running: Serve[] = [];
afterAll(async () => {
  await Promise.all(running.map((s) => s.stop('SIGKILL')));
});

/** A store of its own, and the environment of every command on it. */
async function setup(prefix: string) {
  const dir = tempDir(prefix);
  const env = tesseraEnv({
    TESSERA_DATA_DIR: path.join(dir, 'data'),
    TESSERA_PORT: String(await freePort()),
    TESSERA_SHUTDOWN_DELAY: '0',
  });
  return { dir, env };
}

async function serve(env: NodeJS.ProcessEnv): Promise<Serve> {
  const server = await startServe(env);
  running.push(server);
  return server;
}

/** The report as the CLI prints it: the lines the mapping gives, one `<place>: <outcome>: <detail>` each. */
const reportText = (input: ImportInput, source: 'auth0' | 'keycloak' | 'hydra', options = {}): string =>
  importExport(source, input, options)
    .report.map((l) => `${reportLineText(l)}\n`)
    .join('');

type Credentials = { secret: string; method: 'basic' | 'post' } | { assertion: () => Promise<string> };

/** A token request of a client for an audience. */
async function token(server: Serve, clientId: string, credentials: Credentials, audience: string) {
  const form: Record<string, string> = { grant_type: 'client_credentials', audience };
  const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded' };
  if ('assertion' in credentials) {
    form.client_assertion_type = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';
    form.client_assertion = await credentials.assertion();
    form.client_id = clientId;
  } else if (credentials.method === 'basic') headers.authorization = basic(clientId, credentials.secret);
  else Object.assign(form, { client_id: clientId, client_secret: credentials.secret });
  const response = await fetch(`${server.url}/oauth/token`, {
    method: 'POST',
    headers,
    body: new URLSearchParams(form).toString(),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/**
 * The claims of a client's token for each audience it is granted (each verified: signature by the server's JWKS,
 * iss, aud), and the answer for one it is not granted.
 */
async function tokensOf(
  server: Serve,
  clientId: string,
  credentials: Credentials,
  audiences: string[],
): Promise<Record<string, JWTPayload>> {
  const jwks = createRemoteJWKSet(new URL(`${server.url}/.well-known/jwks.json`));
  const claims: Record<string, JWTPayload> = {};
  for (const audience of audiences) {
    const answer = await token(server, clientId, credentials, audience);
    expect(answer.status, `${clientId} → ${audience}: ${JSON.stringify(answer.body)}`).toBe(200);
    const { payload } = await jwtVerify(String(answer.body.access_token), jwks, {
      issuer: `http://localhost:${server.port}`,
      audience,
    });
    expect(payload.scope).toBe(answer.body.scope);
    claims[audience] = payload;
  }
  const refused = await token(server, clientId, credentials, 'https://not-granted.example');
  expect(refused.status).toBe(400);
  expect(refused.body.error).toBe('invalid_target');
  return claims;
}

/** What a token says, without its times and ids. */
const stable = ({ exp, iat, nbf, jti, ...rest }: JWTPayload) => {
  void exp;
  void iat;
  void nbf;
  void jti;
  return rest;
};

/** The secrets `apply --json` printed, by client id. */
const secretsOf = (applied: { json: { secrets: { client_id: string; client_secret: string }[] } }) =>
  Object.fromEntries(applied.json.secrets.map((s) => [s.client_id, s.client_secret]));

/** The report lines that would print a secret, and the places where one is. */
function expectNoSecret(texts: string[], secrets: string[]): void {
  for (const text of texts) for (const secret of secrets) expect(text).not.toContain(secret);
}

describe('Auth0: tenant.yaml → tessera apply → tokens', () => {
  it('imports, applies and serves every M2M application its grants, in the auth0 token profile', async () => {
    const { dir, env } = await setup('tessera-import-auth0-');
    const out = path.join(dir, 'tessera.yaml');
    const args = [
      'import',
      'auth0',
      fixture('auth0/tenant.yaml'),
      '-o',
      out,
      '--keyword',
      'ENV=prod',
      '--keyword',
      'AUTH0_DOMAIN=acme.eu.auth0.com',
      '--audience',
      'reports=https://reports.acme.example',
    ];
    const imported = await tesseraOk(env, ...args);
    expect(imported.stdout).toBe('');
    expect(imported.stderr).toBe(
      reportText({ text: readFileSync(fixture('auth0/tenant.yaml'), 'utf8'), name: 'x' }, 'auth0', {
        keywords: { ENV: 'prod', AUTH0_DOMAIN: 'acme.eu.auth0.com' },
        audiences: { reports: 'https://reports.acme.example' },
      }),
    );
    expect(imported.stderr.split('\n')[3]).toBe(
      '30:18: left_out: API https://legacy.acme.example: signing_alg HS256: Tessera signs asymmetrically only (RS256, PS256, ES256, EdDSA), so the API and its grants are left out',
    );
    expect(readFileSync(out, 'utf8')).toBe(readFileSync(fixture('auth0/tessera.yaml'), 'utf8'));

    const applied = await tesseraOk(env, 'apply', '-f', out, '--json');
    expect(applied.json.summary).toEqual({ create: 11, update: 0, delete: 0 });
    const secrets = secretsOf(applied);
    expect(Object.keys(secrets).sort()).toEqual(['backoffice', 'orders-worker', 'orders-worker-2']);

    const server = await serve(env);
    const ORDERS = 'https://prod.api.acme.example/orders';
    const REPORTS = 'https://reports.acme.example';
    const worker = await tokensOf(
      server,
      'orders-worker',
      { secret: secrets['orders-worker']!, method: 'post' },
      [ORDERS],
    );
    expect(stable(worker[ORDERS]!)).toEqual({
      iss: `http://localhost:${server.port}`,
      sub: 'orders-worker@clients',
      aud: ORDERS,
      client_id: 'orders-worker',
      azp: 'orders-worker',
      gty: 'client-credentials',
      scope: 'read:orders write:orders',
      permissions: ['read:orders', 'write:orders'],
    });
    const backoffice = await tokensOf(
      server,
      'backoffice',
      { secret: secrets.backoffice!, method: 'basic' },
      [ORDERS, REPORTS],
    );
    expect([backoffice[ORDERS]!.scope, backoffice[REPORTS]!.scope]).toEqual(['read:orders', 'reports:read']);
    // The second "Orders Worker" is granted nothing (its grants were the first's), and Auth0's lifetime is kept.
    expect(
      (
        await token(
          server,
          'orders-worker-2',
          { secret: secrets['orders-worker-2']!, method: 'post' },
          ORDERS,
        )
      ).body.error,
    ).toBe('invalid_target');
    expect(worker[ORDERS]!.exp! - worker[ORDERS]!.iat!).toBe(86_400);
    expectNoSecret(
      [readFileSync(out, 'utf8'), imported.stderr, JSON.stringify(server.logs), server.stderr()],
      Object.values(secrets),
    );

    // Imported and applied again: nothing to do.
    await tesseraOk(env, ...args);
    expect((await tesseraOk(env, 'apply', '-f', out)).stdout).toBe('No changes.\n');
  }, 60_000);

  it('imports the directory format the same way', async () => {
    const { dir, env } = await setup('tessera-import-auth0-dir-');
    const out = path.join(dir, 'tessera.json');
    const args = [
      'import',
      'auth0',
      fixture('auth0/directory'),
      '-o',
      out,
      '--keyword',
      'ENV=prod',
      '--keyword',
      'AUTH0_DOMAIN=acme.eu.auth0.com',
    ];
    const imported = await tesseraOk(env, ...args);
    expect(imported.stderr.split('\n').slice(0, 2)).toEqual([
      'resource-servers/Legacy API.json#/signing_alg: left_out: API https://legacy.acme.example: signing_alg HS256: Tessera signs asymmetrically only (RS256, PS256, ES256, EdDSA), so the API and its grants are left out',
      'resource-servers/Orders API.json: mapped: API "Orders API" → audience https://prod.api.acme.example/orders (2 scopes, token_profile auth0)',
    ]);
    expect(JSON.parse(readFileSync(out, 'utf8'))).toEqual(
      parse(readFileSync(fixture('auth0/directory-tessera.yaml'), 'utf8')),
    );
    const applied = await tesseraOk(env, 'apply', '-f', out, '--json');
    const server = await serve(env);
    const claims = await tokensOf(
      server,
      'orders-worker',
      { secret: secretsOf(applied)['orders-worker']!, method: 'post' },
      ['https://prod.api.acme.example/orders'],
    );
    expect(claims['https://prod.api.acme.example/orders']!.scope).toBe('read:orders');
    await tesseraOk(env, ...args);
    expect((await tesseraOk(env, 'apply', '-f', out)).stdout).toBe('No changes.\n');
  }, 60_000);

  it('refuses a placeholder left unfilled, with its place: exit 2, nothing written', async () => {
    const { dir, env } = await setup('tessera-import-refused-');
    const out = path.join(dir, 'tessera.yaml');
    const file = fixture('auth0/tenant.yaml');
    const refused = await tessera(env, 'import', 'auth0', file, '-o', out, '--keyword', 'ENV=prod');
    expect(refused.code).toBe(2);
    expect(refused.stdout).toBe('');
    expect(refused.stderr).toBe(
      `tessera: ${file}: 1 error, nothing was written\n` +
        `  ${file}:113:15: /clientGrants/1/audience: placeholder ##AUTH0_DOMAIN## has no value: give it one (--keyword AUTH0_DOMAIN=VALUE)\n`,
    );
    expect(existsSync(out)).toBe(false);
    const json = await tessera(env, 'import', 'auth0', file, '--json', '--keyword', 'ENV=prod');
    expect(json.code).toBe(2);
    expect(JSON.parse(json.stderr)).toEqual({
      error: 'invalid_file',
      message: refused.stderr.slice('tessera: '.length, -1),
      errors: [
        {
          pointer: '/clientGrants/1/audience',
          line: 113,
          column: 15,
          message: 'placeholder ##AUTH0_DOMAIN## has no value: give it one (--keyword AUTH0_DOMAIN=VALUE)',
        },
      ],
    });
  });
});

describe('Keycloak: realm export → tessera apply → tokens', () => {
  it('imports, carries the secrets to a file of their own (0600), applies, and serves in the keycloak profile', async () => {
    const { dir, env } = await setup('tessera-import-keycloak-');
    const out = path.join(dir, 'tessera.yaml');
    const secretsFile = path.join(dir, 'secrets.json');
    const realm = fixture('keycloak/realm-export.json');
    const args = [
      'import',
      'keycloak',
      realm,
      '-o',
      out,
      '--secrets',
      secretsFile,
      '--audience',
      'ledger=https://ledger.acme.example',
    ];
    const imported = await tesseraOk(env, ...args);
    expect(imported.stderr).toBe(
      reportText({ text: readFileSync(realm, 'utf8'), name: 'x' }, 'keycloak', {
        audiences: { ledger: 'https://ledger.acme.example' },
        carrySecrets: true,
      }),
    );
    expect(readFileSync(out, 'utf8')).toBe(readFileSync(fixture('keycloak/tessera.yaml'), 'utf8'));
    expect(JSON.parse(readFileSync(secretsFile, 'utf8'))).toEqual({
      'orders-worker': 'W5vKq2mZ8xT1rY7uN4bH6cJ9dL3fG0sA',
    });
    expect(statSync(secretsFile).mode & 0o777).toBe(0o600);
    expectNoSecret(
      [readFileSync(out, 'utf8'), imported.stderr],
      ['W5vKq2mZ8xT1rY7uN4bH6cJ9dL3fG0sA', 'Fh3nB8qW1eR6tY2uI9oP4aS7dG5jK0lZ'],
    );

    const applied = await tesseraOk(env, 'apply', '-f', out, '--json');
    const secrets = secretsOf(applied);
    expect(Object.keys(secrets).sort()).toEqual(['inventory-sync', 'orders-worker', 'reporting-job']);
    const server = await serve(env);
    const ORDERS = 'https://orders.acme.example';
    const worker = await tokensOf(
      server,
      'orders-worker',
      { secret: secrets['orders-worker']!, method: 'basic' },
      [ORDERS],
    );
    expect(stable(worker[ORDERS]!)).toEqual({
      iss: `http://localhost:${server.port}`,
      sub: 'orders-worker',
      aud: ORDERS,
      client_id: 'orders-worker',
      azp: 'orders-worker',
      typ: 'Bearer',
      preferred_username: 'service-account-orders-worker',
      clientId: 'orders-worker',
      scope: 'orders:read orders:write',
      tenant: 'acme',
      billing: { plan: 3 },
    });
    expect(worker[ORDERS]!.exp! - worker[ORDERS]!.iat!).toBe(600);
    // Disabled in Keycloak, disabled here; granted nothing, no token.
    expect(
      (await token(server, 'reporting-job', { secret: secrets['reporting-job']!, method: 'basic' }, ORDERS))
        .status,
    ).toBe(401);
    expect(
      (await token(server, 'inventory-sync', { secret: secrets['inventory-sync']!, method: 'basic' }, ORDERS))
        .body.error,
    ).toBe('invalid_target');
    expectNoSecret(
      [JSON.stringify(server.logs), server.stderr()],
      [...Object.values(secrets), 'W5vKq2mZ8xT1rY7uN4bH6cJ9dL3fG0sA'],
    );

    await tesseraOk(env, ...args);
    expect((await tesseraOk(env, 'apply', '-f', out)).stdout).toBe('No changes.\n');
  }, 60_000);

  it('keeps a carried secret working: tessera apply --secrets sets it', async () => {
    const { dir, env } = await setup('tessera-import-carried-');
    const out = path.join(dir, 'tessera.yaml');
    const secretsFile = path.join(dir, 'secrets.json');
    await tesseraOk(
      env,
      'import',
      'keycloak',
      fixture('keycloak/realm-export.json'),
      '-o',
      out,
      '--secrets',
      secretsFile,
      '--audience',
      'ledger=https://ledger.acme.example',
    );
    const applied = await tesseraOk(env, 'apply', '-f', out, '--secrets', secretsFile, '--json');
    // The carried secret is set, never printed; the others are new.
    expect(Object.keys(secretsOf(applied)).sort()).toEqual(['inventory-sync', 'reporting-job']);
    expect(applied.stdout).not.toContain('W5vKq2mZ8xT1rY7uN4bH6cJ9dL3fG0sA');
    const server = await serve(env);
    const claims = await tokensOf(
      server,
      'orders-worker',
      { secret: 'W5vKq2mZ8xT1rY7uN4bH6cJ9dL3fG0sA', method: 'basic' },
      ['https://orders.acme.example'],
    );
    expect(claims['https://orders.acme.example']!.scope).toBe('orders:read orders:write');
    expect((await tesseraOk(env, 'apply', '-f', out, '--secrets', secretsFile)).stdout).toBe('No changes.\n');
  }, 60_000);

  it('refuses a carried secret shorter than 32 characters at its client: exit 2, neither file written', async () => {
    const { dir, env } = await setup('tessera-import-short-');
    const realm = JSON.parse(readFileSync(fixture('keycloak/realm-export.json'), 'utf8')) as {
      clients: { secret?: string }[];
    };
    realm.clients[5]!.secret = 'only-twenty-characters';
    const source = path.join(dir, 'realm.json');
    writeFileSync(source, JSON.stringify(realm, null, 2));
    const out = path.join(dir, 'tessera.yaml');
    const secretsFile = path.join(dir, 'secrets.json');
    const refused = await tessera(env, 'import', 'keycloak', source, '-o', out, '--secrets', secretsFile);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toBe(
      `tessera: ${source}: 1 error, nothing was written\n` +
        `  ${source}:152:17: /clients/5/secret: client orders-worker's secret: a secret must have at least 32 characters; this one has 22: rotate it on the old server first, or leave out --secrets and let apply make one\n`,
    );
    expect([existsSync(out), existsSync(secretsFile)]).toEqual([false, false]);
  });
});

describe('Hydra: hydra list oauth2-clients → tessera apply → tokens', () => {
  it('imports, applies and serves each client_credentials client its audiences and scopes (rfc9068)', async () => {
    const { dir, env } = await setup('tessera-import-hydra-');
    // The private_key_jwt client's key: one this test holds, in place of the fixture's.
    const key = await signer('ES256', 'billing-1');
    const page = JSON.parse(readFileSync(fixture('hydra/clients.json'), 'utf8')) as {
      items: { jwks?: unknown }[];
    };
    page.items[1]!.jwks = { keys: [{ ...key.jwk, use: 'sig', alg: 'ES256' }] };
    const source = path.join(dir, 'clients.json');
    writeFileSync(source, JSON.stringify(page, null, 2));
    const out = path.join(dir, 'tessera.yaml');
    const imported = await tesseraOk(env, 'import', 'hydra', source, '-o', out);
    expect(imported.stderr).toBe(reportText({ text: readFileSync(source, 'utf8'), name: 'x' }, 'hydra'));
    const expected = parse(readFileSync(fixture('hydra/tessera.yaml'), 'utf8')) as {
      clients: { jwks?: unknown }[];
    };
    expected.clients[1]!.jwks = page.items[1]!.jwks;
    expect(parse(readFileSync(out, 'utf8'))).toEqual(expected);

    const applied = await tesseraOk(env, 'apply', '-f', out, '--json');
    const secrets = secretsOf(applied);
    const WORKER = '3b0b6d6e-6f3a-4c8e-9a51-2f0d1c7e8a01';
    expect(Object.keys(secrets).sort()).toEqual([WORKER, 'fast-job']);
    const server = await serve(env);
    const ORDERS = 'https://orders.acme.example';
    const BILLING = 'https://billing.acme.example';
    const worker = await tokensOf(server, WORKER, { secret: secrets[WORKER]!, method: 'basic' }, [ORDERS]);
    expect(stable(worker[ORDERS]!)).toEqual({
      iss: `http://localhost:${server.port}`,
      sub: WORKER,
      aud: ORDERS,
      client_id: WORKER,
      scope: 'orders:read orders:write',
    });
    expect(worker[ORDERS]!.exp! - worker[ORDERS]!.iat!).toBe(3600);
    const fast = await tokensOf(server, 'fast-job', { secret: secrets['fast-job']!, method: 'post' }, [
      ORDERS,
      BILLING,
    ]);
    expect([fast[ORDERS]!.scope, fast[BILLING]!.scope, fast[ORDERS]!.exp! - fast[ORDERS]!.iat!]).toEqual([
      'orders:read',
      'orders:read',
      60,
    ]);
    const billing = await tokensOf(
      server,
      'billing-sync',
      {
        assertion: () => clientAssertion(key, 'billing-sync', `http://localhost:${server.port}/oauth/token`),
      },
      [BILLING],
    );
    expect([billing[BILLING]!.scope, billing[BILLING]!.exp! - billing[BILLING]!.iat!]).toEqual([
      'charge refund',
      5400,
    ]);
    expectNoSecret(
      [readFileSync(out, 'utf8'), imported.stderr, JSON.stringify(server.logs), server.stderr()],
      Object.values(secrets),
    );

    await tesseraOk(env, 'import', 'hydra', source, '-o', out);
    expect((await tesseraOk(env, 'apply', '-f', out)).stdout).toBe('No changes.\n');
  }, 60_000);

  it('--json prints the apply file and the report as one document, as the admin API answers', async () => {
    const { env } = await setup('tessera-import-json-');
    const result = await tesseraOk(env, 'import', 'hydra', fixture('hydra/clients.json'), '--json');
    expect(result.stderr).toBe('');
    const mapped = importExport('hydra', {
      text: readFileSync(fixture('hydra/clients.json'), 'utf8'),
      name: 'x',
    });
    expect(result.json).toEqual({ apply_file: mapped.file, report: mapped.report });
  });
});

describe('sources that cannot be read', () => {
  it('refuses a missing file, a too big one, a directory for keycloak, a bad option: exit 2, with its place', async () => {
    const { dir, env } = await setup('tessera-import-unreadable-');
    const missing = path.join(dir, 'none.json');
    let refused = await tessera(env, 'import', 'hydra', missing);
    expect([refused.code, refused.stderr]).toEqual([
      2,
      `tessera: ${missing}: 1 error, nothing was written\n  ${missing}: cannot be read: ENOENT\n`,
    ]);
    const big = path.join(dir, 'big.json');
    writeFileSync(big, '');
    truncateSync(big, 64 * 1024 * 1024 + 1);
    refused = await tessera(env, 'import', 'keycloak', big);
    expect([refused.code, refused.stderr]).toEqual([
      2,
      `tessera: ${big}: 1 error, nothing was written\n  ${big}: is 67108865 bytes; an export is read up to 67108864 bytes (64 MiB)\n`,
    ]);
    refused = await tessera(env, 'import', 'keycloak', fixture('auth0/directory'));
    expect([refused.code, refused.stderr]).toEqual([
      2,
      `tessera: ${fixture('auth0/directory')}: 1 error, nothing was written\n  ${fixture('auth0/directory')}: is a directory; a keycloak export is one JSON file\n`,
    ]);
    const empty = path.join(dir, 'empty');
    mkdirSync(empty);
    refused = await tessera(env, 'import', 'auth0', empty);
    expect([refused.code, refused.stderr]).toEqual([
      2,
      `tessera: ${empty}: 1 error, nothing was written\n  ${empty}: has none of the Deploy CLI directories resource-servers/, clients/, grants/\n`,
    ]);
    const notJson = path.join(dir, 'realm.json');
    writeFileSync(notJson, '{"clients": [\n  {"clientId": "a" "b"}\n]}\n');
    refused = await tessera(env, 'import', 'keycloak', notJson);
    expect([refused.code, refused.stderr]).toEqual([
      2,
      `tessera: ${notJson}: 1 error, nothing was written\n  ${notJson}:2:20: Unexpected double-quoted-scalar at node end\n`,
    ]);
    refused = await tessera(
      env,
      'import',
      'keycloak',
      notJson,
      '--audience',
      'ledger=ftp://ledger',
      '--json',
    );
    expect([refused.code, JSON.parse(refused.stderr)]).toEqual([
      2,
      {
        error: 'usage',
        message:
          "option '--audience <name=url>' argument 'ledger=ftp://ledger' is invalid. audience must be an http or https URL",
      },
    ]);
    refused = await tessera(env, 'import', 'okta', notJson, '--json');
    expect([refused.code, JSON.parse(refused.stderr)]).toEqual([
      2,
      {
        error: 'usage',
        message:
          "command-argument value 'okta' is invalid for argument 'server'. Allowed choices are auth0, keycloak, hydra.",
      },
    ]);
  });
});
