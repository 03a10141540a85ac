/**
 * `tessera import`'s mapping (MANAGEMENT.md, "Moving in from another server"; docs/import.md), in process: each
 * server's export of the fixtures (test/fixtures/import/<server>/, of the servers' own shapes, with their odd
 * cases) is mapped to exactly the apply file beside it (tessera.yaml), with exactly these report lines, each at its
 * place in the source; and every refusal names its place. The apply files go through `tessera apply` in cli.test.ts.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { importExport, ImportSourceError, type ImportInput } from '../../src/management/import/index.js';
import { goDuration } from '../../src/management/import/hydra.js';
import { clientIdFromName, TakenIds } from '../../src/management/import/mapping.js';
import { ROOT } from '../helpers/process.js';

const FIXTURES = path.join(ROOT, 'test/fixtures/import');
const fixture = (name: string): string => readFileSync(path.join(FIXTURES, name), 'utf8');
const textOf = (name: string): ImportInput => ({ text: fixture(name), name });
const expected = (name: string): unknown => parse(fixture(name));

/** A directory as the CLI reads it: its files, by path relative to it. */
function directoryOf(name: string): ImportInput {
  const root = path.join(FIXTURES, name);
  const files: { path: string; text: string }[] = [];
  for (const dir of readdirSync(root).sort()) {
    if (!statSync(path.join(root, dir)).isDirectory()) continue;
    for (const file of readdirSync(path.join(root, dir)).sort())
      files.push({ path: `${dir}/${file}`, text: readFileSync(path.join(root, dir, file), 'utf8') });
  }
  return { files, name };
}

type Line = [place: string, outcome: string, detail: string];
const tuples = (report: { place: string; outcome: string; detail: string }[]): Line[] =>
  report.map((l) => [l.place, l.outcome, l.detail]);

/** The problems of a refused source, as the CLI prints them. */
function refusal(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    if (error instanceof ImportSourceError) return error.message;
    throw error;
  }
  throw new Error('the import was not refused');
}

const AUTH0_KEYWORDS = { ENV: 'prod', AUTH0_DOMAIN: 'acme.eu.auth0.com' };
const KEYCLOAK_SECRET = 'W5vKq2mZ8xT1rY7uN4bH6cJ9dL3fG0sA';

describe('Auth0 (the Deploy CLI)', () => {
  it('maps a tenant.yaml: M2M applications, RS256/PS256 APIs, grants by name; every line at its line:column', () => {
    const result = importExport('auth0', textOf('auth0/tenant.yaml'), {
      keywords: AUTH0_KEYWORDS,
      audiences: { reports: 'https://reports.acme.example' },
    });
    expect(result.file).toEqual(expected('auth0/tessera.yaml'));
    expect(result.secrets).toEqual({});
    expect(tuples(result.report)).toEqual([
      [
        '7:5',
        'mapped',
        'API "Orders API" → audience https://prod.api.acme.example/orders (2 scopes, token_profile auth0)',
      ],
      [
        '24:21',
        'changed',
        "token_lifetime 30 s is 60 s: Tessera's token lifetimes are whole seconds from 60 to 86400",
      ],
      [
        '19:5',
        'mapped',
        'API "Billing API" → audience https://prod.api.acme.example/billing (1 scope, token_profile auth0)',
      ],
      [
        '30:18',
        'left_out',
        'API https://legacy.acme.example: signing_alg HS256: Tessera signs asymmetrically only (RS256, PS256, ES256, EdDSA), so the API and its grants are left out',
      ],
      [
        '37:21',
        'changed',
        "token_lifetime 172800 s is 86400 s: Tessera's token lifetimes are whole seconds from 60 to 86400",
      ],
      [
        '34:5',
        'mapped',
        'API "Reports API" (reports) → audience https://reports.acme.example (1 scope, token_profile auth0)',
      ],
      [
        '41:11',
        'changed',
        'client "Orders Worker" has no client_id in the export: its client_id is orders-worker, made from its name',
      ],
      [
        '41:5',
        'mapped',
        'application "Orders Worker" → client orders-worker (Auth0 exports no secret: apply makes one)',
      ],
      [
        '65:11',
        'changed',
        'client "Billing Sync" has no client_id in the export: its client_id is billing-sync, made from its name',
      ],
      [
        '75:9',
        'changed',
        'client billing-sync authenticates with private_key_jwt: Auth0 exports no keys, so it has none until its jwks or jwks_uri is set',
      ],
      ['65:5', 'mapped', 'application "Billing Sync" → client billing-sync'],
      [
        '79:11',
        'changed',
        'client "Backoffice" has no client_id in the export: its client_id is backoffice, made from its name',
      ],
      [
        '79:5',
        'mapped',
        'application "Backoffice" → client backoffice (Auth0 exports no secret: apply makes one)',
      ],
      ['90:5', 'left_out', 'application "Storefront" (app_type spa) is not a machine-to-machine application'],
      [
        '101:11',
        'changed',
        'client "Orders Worker" has no client_id in the export: its client_id is orders-worker-2, made from its name (a grant naming "Orders Worker" is orders-worker\'s, the first of that name)',
      ],
      [
        '101:5',
        'mapped',
        'application "Orders Worker" → client orders-worker-2 (Auth0 exports no secret: apply makes one)',
      ],
      [
        '107:5',
        'mapped',
        'grant orders-worker → https://prod.api.acme.example/orders (scopes read:orders write:orders)',
      ],
      [
        '113:15',
        'left_out',
        "grant of https://acme.eu.auth0.com/api/v2/ to orders-worker: the API is not among the export's resourceServers (Auth0's own Management API, or one not exported)",
      ],
      [
        '116:5',
        'left_out',
        'grant of https://legacy.acme.example to orders-worker: its API https://legacy.acme.example is left out (signing_alg HS256)',
      ],
      ['120:5', 'mapped', 'grant billing-sync → https://prod.api.acme.example/billing (scopes charge)'],
      [
        '128:9',
        'left_out',
        'scope "delete:orders" of the grant of https://prod.api.acme.example/orders to backoffice: the API does not define it',
      ],
      ['124:5', 'mapped', 'grant backoffice → https://prod.api.acme.example/orders (scopes read:orders)'],
      ['129:5', 'mapped', 'grant backoffice → https://reports.acme.example (scopes reports:read)'],
      [
        '133:5',
        'left_out',
        'grant of https://prod.api.acme.example/orders to Storefront: the application is left out',
      ],
    ]);
  });

  it('leaves out an API that is no URL when --audience gives none', () => {
    const result = importExport('auth0', textOf('auth0/tenant.yaml'), { keywords: AUTH0_KEYWORDS });
    expect(tuples(result.report).filter(([place]) => place === '35:17' || place === '129:5')).toEqual([
      [
        '35:17',
        'left_out',
        'API reports: a Tessera audience is an http(s) URL; --audience reports=URL gives it one',
      ],
      ['129:5', 'left_out', 'grant of reports to backoffice: its API reports is left out (no URL)'],
    ]);
    expect(result.file.audiences!.map((a) => a.identifier)).toEqual([
      'https://prod.api.acme.example/billing',
      'https://prod.api.acme.example/orders',
    ]);
  });

  it('maps the directory format (resource-servers/, clients/, grants/), each line at its file', () => {
    const result = importExport('auth0', directoryOf('auth0/directory'), { keywords: AUTH0_KEYWORDS });
    expect(result.file).toEqual(expected('auth0/directory-tessera.yaml'));
    expect(tuples(result.report)).toEqual([
      [
        'resource-servers/Legacy API.json#/signing_alg',
        'left_out',
        'API https://legacy.acme.example: signing_alg HS256: Tessera signs asymmetrically only (RS256, PS256, ES256, EdDSA), so the API and its grants are left out',
      ],
      [
        'resource-servers/Orders API.json',
        'mapped',
        'API "Orders API" → audience https://prod.api.acme.example/orders (2 scopes, token_profile auth0)',
      ],
      [
        'clients/Orders Worker.json#/name',
        'changed',
        'client "Orders Worker" has no client_id in the export: its client_id is orders-worker, made from its name',
      ],
      [
        'clients/Orders Worker.json',
        'mapped',
        'application "Orders Worker" → client orders-worker (Auth0 exports no secret: apply makes one)',
      ],
      [
        'clients/Storefront.json',
        'left_out',
        'application "Storefront" (app_type spa) is not a machine-to-machine application',
      ],
      [
        'grants/Orders Worker-Auth0 Management API.json#/audience',
        'left_out',
        "grant of https://acme.eu.auth0.com/api/v2/ to orders-worker: the API is not among the export's resourceServers (Auth0's own Management API, or one not exported)",
      ],
      [
        'grants/Orders Worker-Legacy API.json',
        'left_out',
        'grant of https://legacy.acme.example to orders-worker: its API https://legacy.acme.example is left out (signing_alg HS256)',
      ],
      [
        'grants/Orders Worker-Orders API.json',
        'mapped',
        'grant orders-worker → https://prod.api.acme.example/orders (scopes read:orders)',
      ],
      [
        'grants/Storefront-Orders API.json',
        'left_out',
        'grant of https://prod.api.acme.example/orders to Storefront: the application is left out',
      ],
    ]);
  });

  it('resolves a grant by client_id too, and fills @@NAME@@ with a whole JSON value', () => {
    const result = importExport(
      'auth0',
      {
        data: {
          resourceServers: [{ name: 'A', identifier: 'https://a.example', scopes: '@@SCOPES@@' }],
          clients: [{ name: 'Job', client_id: 'abcDEF123', app_type: 'non_interactive' }],
          clientGrants: [{ client_id: 'abcDEF123', audience: 'https://a.example', scope: ['x'] }],
        },
      },
      { keywords: { SCOPES: '[{"value":"x"}]' } },
    );
    expect(result.file).toEqual({
      audiences: [
        { identifier: 'https://a.example', name: 'A', scopes: [{ name: 'x' }], token_profile: 'auth0' },
      ],
      clients: [
        { client_id: 'abcDEF123', name: 'Job', grants: [{ audience: 'https://a.example', scopes: ['x'] }] },
      ],
    });
    expect(tuples(result.report)).toEqual([
      ['/resourceServers/0', 'mapped', 'API "A" → audience https://a.example (1 scope, token_profile auth0)'],
      [
        '/clients/0',
        'mapped',
        'application "Job" → client abcDEF123 (Auth0 exports no secret: apply makes one)',
      ],
      ['/clientGrants/0', 'mapped', 'grant abcDEF123 → https://a.example (scopes x)'],
    ]);
  });

  it('refuses a placeholder left unfilled, each at its place, and writes nothing', () => {
    expect(
      refusal(() => importExport('auth0', textOf('auth0/tenant.yaml'), { keywords: { ENV: 'prod' } })),
    ).toBe(
      'auth0/tenant.yaml: 1 error, nothing was written\n' +
        '  auth0/tenant.yaml:113:15: /clientGrants/1/audience: placeholder ##AUTH0_DOMAIN## has no value: give it one (--keyword AUTH0_DOMAIN=VALUE)',
    );
    expect(
      refusal(() =>
        importExport('auth0', directoryOf('auth0/directory'), { keywords: { AUTH0_DOMAIN: 'x' } }),
      ),
    ).toBe(
      'auth0/directory: 3 errors, nothing was written\n' +
        '  auth0/directory/grants/Orders Worker-Orders API.json:3:15: /audience: placeholder ##ENV## has no value: give it one (--keyword ENV=VALUE)\n' +
        '  auth0/directory/grants/Storefront-Orders API.json:3:15: /audience: placeholder ##ENV## has no value: give it one (--keyword ENV=VALUE)\n' +
        '  auth0/directory/resource-servers/Orders API.json:3:17: /identifier: placeholder ##ENV## has no value: give it one (--keyword ENV=VALUE)',
    );
  });

  it('refuses what is not a Deploy CLI export, at each place', () => {
    expect(
      refusal(() =>
        importExport('auth0', {
          text: 'resourceServers:\n  - name: A\nclients: {}\nclientGrants:\n  - audience: 3\n',
          name: 'tenant.yaml',
        }),
      ),
    ).toBe(
      'tenant.yaml: 4 errors, nothing was written\n' +
        '  tenant.yaml:2:5: /resourceServers/0/identifier: identifier is required\n' +
        '  tenant.yaml:3:10: /clients: clients must be a list, not an object\n' +
        '  tenant.yaml:5:5: /clientGrants/0/client_id: client_id is required\n' +
        '  tenant.yaml:5:15: /clientGrants/0/audience: audience must be a string, not a number',
    );
  });
});

describe('Keycloak (a realm export)', () => {
  const options = { audiences: { ledger: 'https://ledger.acme.example' } };

  it('maps confidential clients with a service account; audiences of their mappers; claims; non-built-in scopes', () => {
    const result = importExport('keycloak', textOf('keycloak/realm-export.json'), {
      ...options,
      carrySecrets: true,
    });
    expect(result.file).toEqual(expected('keycloak/tessera.yaml'));
    expect(result.secrets).toEqual({ 'orders-worker': KEYCLOAK_SECRET });
    expect(tuples(result.report)).toEqual([
      ['/clients/0', 'left_out', 'client account: a public client, so no client-credentials tokens'],
      ['/clients/1', 'left_out', 'client admin-cli: a public client, so no client-credentials tokens'],
      ['/clients/2', 'left_out', 'client realm-management: bearer-only, so no client-credentials tokens'],
      ['/clients/3', 'left_out', 'client orders-api: no service account, so no client-credentials tokens'],
      ['/clients/4', 'left_out', 'client ledger: bearer-only, so no client-credentials tokens'],
      ['/clients/5/attributes/access.token.lifespan', 'mapped', 'client orders-worker: token_ttl 600'],
      ['/clients/5/secret', 'mapped', "client orders-worker's secret carried to the secrets file"],
      [
        '/clients/5/protocolMappers/0',
        'mapped',
        'audience orders-api → audience https://orders.acme.example (token_profile keycloak)',
      ],
      ['/clients/5/protocolMappers/1', 'mapped', 'client orders-worker: custom claim tenant'],
      ['/clients/5/protocolMappers/2', 'mapped', 'client orders-worker: custom claim billing.plan'],
      [
        '/clients/5/protocolMappers/3/config/claim.name',
        'left_out',
        'client orders-worker: claim azp is registered: Tessera sets it, it cannot be a custom claim',
      ],
      [
        '/clients/5/protocolMappers/4',
        'left_out',
        'protocol mapper "Client ID" (oidc-usersessionmodel-note-mapper) of client orders-worker: Tessera has no counterpart',
      ],
      ['/clients/5', 'mapped', 'client orders-worker (client_secret_basic)'],
      [
        '/clients/5',
        'mapped',
        'grant orders-worker → https://orders.acme.example (scopes orders:read orders:write)',
      ],
      [
        '/clients/5/defaultClientScopes',
        'changed',
        "client orders-worker's client scopes orders:read orders:write are scopes of each audience it is granted (https://orders.acme.example): Keycloak's scopes are not per API",
      ],
      [
        '/clients/6/attributes/jwks.url',
        'mapped',
        'client billing-sync: jwks_uri https://billing.acme.example/.well-known/jwks.json',
      ],
      [
        '/clients/6/protocolMappers/0',
        'mapped',
        'audience https://billing.acme.example (token_profile keycloak)',
      ],
      ['/clients/6', 'mapped', 'client billing-sync (private_key_jwt)'],
      ['/clients/6', 'mapped', 'grant billing-sync → https://billing.acme.example (scopes billing:charge)'],
      [
        '/clients/6/defaultClientScopes',
        'changed',
        "client billing-sync's client scopes billing:charge are scopes of each audience it is granted (https://billing.acme.example): Keycloak's scopes are not per API",
      ],
      [
        '/clients/7/attributes/x509.subjectdn',
        'mapped',
        'client ledger-reader: tls_client_auth_subject_dn CN=ledger-reader,O=Acme',
      ],
      [
        '/clientScopes/3/protocolMappers/0',
        'mapped',
        'audience ledger → audience https://ledger.acme.example (token_profile keycloak)',
      ],
      ['/clients/7', 'mapped', 'client ledger-reader (tls_client_auth)'],
      ['/clients/7', 'mapped', 'grant ledger-reader → https://ledger.acme.example (scopes ledger-audience)'],
      [
        '/clients/7/defaultClientScopes',
        'changed',
        "client ledger-reader's client scopes ledger-audience are scopes of each audience it is granted (https://ledger.acme.example): Keycloak's scopes are not per API",
      ],
      [
        '/clients/8/secret',
        'changed',
        "client reporting-job's secret is masked (**********), no secret: apply makes a new one",
      ],
      ['/clients/8', 'mapped', 'client reporting-job (client_secret_basic)'],
      ['/clients/8', 'mapped', 'grant reporting-job → https://orders.acme.example'],
      [
        '/clients/9/secret',
        'changed',
        'client inventory-sync has no secret in the export: apply makes a new one',
      ],
      [
        '/clients/9/protocolMappers/0/config/included.custom.audience',
        'left_out',
        'audience inventory of client inventory-sync: a Tessera audience is an http(s) URL; --audience inventory=URL gives it one',
      ],
      ['/clients/9', 'mapped', 'client inventory-sync (client_secret_basic)'],
      ['/clients/10', 'left_out', 'client storefront: no service account, so no client-credentials tokens'],
    ]);
    // No secret in the apply file or the report (the storefront's is not a service account's: never carried).
    const shown = JSON.stringify([result.file, result.report]);
    expect(shown).not.toContain(KEYCLOAK_SECRET);
    expect(shown).not.toContain('Fh3nB8qW1eR6tY2uI9oP4aS7dG5jK0lZ');
  });

  it('carries no secret without --secrets, and says so', () => {
    const result = importExport('keycloak', textOf('keycloak/realm-export.json'), options);
    expect(result.secrets).toEqual({});
    expect(result.file).toEqual(expected('keycloak/tessera.yaml'));
    expect(result.report.find((l) => l.place === '/clients/5/secret')).toEqual({
      place: '/clients/5/secret',
      outcome: 'changed',
      detail:
        "client orders-worker's secret is in the export but not carried (--secrets FILE carries it): apply makes a new one",
    });
  });

  it('leaves out an included.client.audience without a URL; --audience gives it one', () => {
    const result = importExport('keycloak', textOf('keycloak/realm-export.json'));
    expect(result.report.find((l) => l.place.startsWith('/clientScopes/3'))).toEqual({
      place: '/clientScopes/3/protocolMappers/0/config/included.client.audience',
      outcome: 'left_out',
      detail:
        'audience ledger of client scope ledger-audience: the client has no absolute rootUrl or baseUrl; --audience ledger=URL gives it one',
    });
    expect(result.file.clients!.find((c) => c.client_id === 'ledger-reader')!.grants).toEqual([]);
  });

  it('refuses a carried secret shorter than 32 characters, at its client', () => {
    const realm = JSON.parse(fixture('keycloak/realm-export.json')) as { clients: { secret?: string }[] };
    realm.clients[5]!.secret = 'tooshort-31-characters-long-xyz';
    realm.clients[9]!.secret = 'short';
    const text = JSON.stringify(realm, null, 2);
    expect(
      refusal(() =>
        importExport('keycloak', { text, name: 'realm.json' }, { ...options, carrySecrets: true }),
      ),
    ).toBe(
      'realm.json: 2 errors, nothing was written\n' +
        "  realm.json:152:17: /clients/5/secret: client orders-worker's secret: a secret must have at least 32 characters; this one has 31: rotate it on the old server first, or leave out --secrets and let apply make one\n" +
        "  realm.json:398:17: /clients/9/secret: client inventory-sync's secret: a secret must have at least 32 characters; this one has 5: rotate it on the old server first, or leave out --secrets and let apply make one",
    );
    // Not carried, a short secret is no matter: apply makes a new one.
    expect(importExport('keycloak', { text, name: 'realm.json' }, options).secrets).toEqual({});
  });

  it('maps a hard-coded claim by its JSON type, and leaves out one of another type', () => {
    const mapper = (name: string, value: string, type: string) => ({
      name,
      protocolMapper: 'oidc-hardcoded-claim-mapper',
      config: {
        'claim.name': name,
        'claim.value': value,
        'jsonType.label': type,
        'access.token.claim': 'true',
      },
    });
    const result = importExport('keycloak', {
      data: {
        clients: [
          {
            clientId: 'job',
            serviceAccountsEnabled: true,
            protocolMappers: [
              mapper('flag', 'true', 'boolean'),
              mapper('limits', '{"max":5}', 'JSON'),
              mapper('count', 'many', 'long'),
              mapper('a\\.b', 'x', 'String'),
              mapper('tessera_x', 'x', 'String'),
            ],
          },
        ],
      },
    });
    expect(result.file.clients).toEqual([
      {
        client_id: 'job',
        name: 'job',
        token_endpoint_auth_method: 'client_secret_basic',
        claims: { flag: true, limits: { max: 5 }, 'a.b': 'x' },
        grants: [],
      },
    ]);
    expect(tuples(result.report)).toEqual([
      ['/clients/0/secret', 'changed', 'client job has no secret in the export: apply makes a new one'],
      ['/clients/0/protocolMappers/0', 'mapped', 'client job: custom claim flag'],
      ['/clients/0/protocolMappers/1', 'mapped', 'client job: custom claim limits'],
      [
        '/clients/0/protocolMappers/2/config/claim.value',
        'left_out',
        'claim count of client job is not of its type long',
      ],
      ['/clients/0/protocolMappers/3', 'mapped', 'client job: custom claim a\\.b'],
      [
        '/clients/0/protocolMappers/4/config/claim.name',
        'left_out',
        'client job: claim tessera_x: names starting with "tessera" are reserved',
      ],
      ['/clients/0', 'mapped', 'client job (client_secret_basic)'],
    ]);
  });

  it('refuses a directory, and what is not a realm', () => {
    expect(refusal(() => importExport('keycloak', directoryOf('auth0/directory')))).toBe(
      'auth0/directory: 1 error, nothing was written\n  auth0/directory: is a directory; a keycloak export is one JSON file',
    );
    expect(
      refusal(() => importExport('keycloak', { text: '{"clients": [{"clientId": 7}, 3]}', name: 'r.json' })),
    ).toBe(
      'r.json: 2 errors, nothing was written\n' +
        '  r.json:1:27: /clients/0/clientId: clientId must be a string, not a number\n' +
        '  r.json:1:31: /clients/1: a client must be an object, not a number',
    );
  });
});

describe('Hydra (its clients as JSON)', () => {
  it('maps the page of hydra list oauth2-clients: client_credentials clients, audiences, scopes, lifespans', () => {
    const result = importExport('hydra', textOf('hydra/clients.json'));
    expect(result.file).toEqual(expected('hydra/tessera.yaml'));
    expect(tuples(result.report)).toEqual([
      [
        '/items/0/client_credentials_grant_access_token_lifespan',
        'mapped',
        'client 3b0b6d6e-6f3a-4c8e-9a51-2f0d1c7e8a01: token_ttl 3600 (1h0m0s)',
      ],
      [
        '/items/0',
        'mapped',
        'client 3b0b6d6e-6f3a-4c8e-9a51-2f0d1c7e8a01 (Hydra exports no secret: apply makes one)',
      ],
      [
        '/items/0/scope',
        'left_out',
        "scopes offline_access of client 3b0b6d6e-6f3a-4c8e-9a51-2f0d1c7e8a01: OpenID Connect's, no permission of an API",
      ],
      ['/items/0/audience/0', 'mapped', 'audience https://orders.acme.example'],
      [
        '/items/0/audience/0',
        'mapped',
        'grant 3b0b6d6e-6f3a-4c8e-9a51-2f0d1c7e8a01 → https://orders.acme.example (scopes orders:read orders:write)',
      ],
      ['/items/1/jwks', 'mapped', 'client billing-sync: its jwks (1 key)'],
      [
        '/items/1/client_credentials_grant_access_token_lifespan',
        'changed',
        "the lifespan 1h30m0.5s = 5400.5 s is 5400 s: Tessera's token lifetimes are whole seconds from 60 to 86400",
      ],
      ['/items/1', 'mapped', 'client billing-sync'],
      ['/items/1/audience/0', 'mapped', 'audience https://billing.acme.example'],
      [
        '/items/1/audience/0',
        'mapped',
        'grant billing-sync → https://billing.acme.example (scopes charge refund)',
      ],
      [
        '/items/1/audience/1',
        'left_out',
        'audience ledger of client billing-sync: a Tessera audience is an http(s) URL; --audience ledger=URL gives it one',
      ],
      ['/items/2/client_name', 'changed', 'client fast-job has no client_name: its name is its client_id'],
      [
        '/items/2/client_credentials_grant_access_token_lifespan',
        'changed',
        "the lifespan 30s = 30 s is 60 s: Tessera's token lifetimes are whole seconds from 60 to 86400",
      ],
      ['/items/2', 'mapped', 'client fast-job (Hydra exports no secret: apply makes one)'],
      ['/items/2/audience/0', 'mapped', 'grant fast-job → https://orders.acme.example (scopes orders:read)'],
      ['/items/2/audience/1', 'mapped', 'grant fast-job → https://billing.acme.example (scopes orders:read)'],
      ['/items/3', 'left_out', 'client web-portal has no client_credentials grant'],
      [
        '/items/4',
        'left_out',
        'client cli-tool authenticates with none: a public client gets no client-credentials token',
      ],
    ]);
  });

  it('reads one client, or a list of them (hydra get oauth2-client ID…), and says a page has more', () => {
    const page = JSON.parse(fixture('hydra/clients.json')) as { items: unknown[] };
    const one = importExport('hydra', { text: JSON.stringify(page.items[2]), name: 'one.json' });
    expect(one.file.clients!.map((c) => c.client_id)).toEqual(['fast-job']);
    expect(one.report[0]).toEqual({
      place: '/client_name',
      outcome: 'changed',
      detail: 'client fast-job has no client_name: its name is its client_id',
    });
    const list = importExport('hydra', { text: JSON.stringify(page.items.slice(3)), name: 'list.json' });
    expect(tuples(list.report)).toEqual([
      ['/0', 'left_out', 'client web-portal has no client_credentials grant'],
      [
        '/1',
        'left_out',
        'client cli-tool authenticates with none: a public client gets no client-credentials token',
      ],
    ]);
    const more = importExport('hydra', { data: { items: [], next_page_token: 'eyJwYWdlIjoy' } });
    expect(more.report).toEqual([
      {
        place: '/next_page_token',
        outcome: 'left_out',
        detail:
          'the clients of the next pages: this is one page of hydra list oauth2-clients; import every page (--page-token eyJwYWdlIjoy) or a larger --page-size',
      },
    ]);
  });

  it('reads Go durations', () => {
    expect(
      ['1h0m0s', '30m', '1h30m0.5s', '1.5h', '90s', '500ms', '0', '2h45m', '', '1d', '10', 'h'].map(
        goDuration,
      ),
    ).toEqual([3600, 1800, 5400.5, 5400, 90, 0.5, 0, 9900, undefined, undefined, undefined, undefined]);
    expect(
      refusal(() =>
        importExport('hydra', {
          text: '[{"client_id": "job", "grant_types": ["client_credentials"], "client_credentials_grant_access_token_lifespan": "1 day"}]',
          name: 'c.json',
        }),
      ),
    ).toBe(
      'c.json: 1 error, nothing was written\n  c.json:1:112: /0/client_credentials_grant_access_token_lifespan: "1 day" is not a Go duration',
    );
  });
});

describe('reading a source', () => {
  it('refuses a text that is neither YAML nor JSON, one nested too deep, and one too big', () => {
    expect(refusal(() => importExport('hydra', { text: '{"items": [}', name: 'c.json' }))).toBe(
      'c.json: 2 errors, nothing was written\n' +
        '  c.json:1:12: Flow sequence in block collection must be sufficiently indented and end with a ]\n' +
        '  c.json:1:12: Flow map must end with a }',
    );
    const deep = `${'['.repeat(40)}${']'.repeat(40)}`;
    expect(refusal(() => importExport('hydra', { text: deep, name: 'deep.json' }))).toBe(
      'deep.json: 1 error, nothing was written\n' +
        '  deep.json:1:33: /0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0: is an object or list at level 33; a file nests at most 32 levels, itself being level 1',
    );
    expect(
      refusal(() =>
        importExport('keycloak', { data: JSON.parse(`${'{"a":'.repeat(33)}1${'}'.repeat(33)}`) }),
      ),
    ).toBe(
      'file: 1 error, nothing was written\n  file: /a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a: nests deeper than 32 levels',
    );
    const big = `{"clients": [${'"x",'.repeat(17 * 1024 * 1024)}"x"]}`;
    expect(refusal(() => importExport('keycloak', { text: big, name: 'big.json' }))).toBe(
      `big.json: 1 error, nothing was written\n  big.json: is ${Buffer.byteLength(big)} bytes; an export is read up to 67108864 bytes (64 MiB)`,
    );
  });

  it('makes client ids of names: lower-case letters, digits and -, 3 to 64 characters, unique', () => {
    const taken = new TakenIds(['orders-worker', 'orders-worker-4']);
    expect(
      [
        'Orders Worker',
        'Orders  Worker!',
        'Orders Worker',
        'Über Job',
        'A',
        '日本',
        '日本',
        `${'x'.repeat(70)} y`,
      ].map((n) => clientIdFromName(n, taken)),
    ).toEqual([
      'orders-worker-2',
      'orders-worker-3',
      'orders-worker-5',
      'uber-job',
      'a-client',
      'client',
      'client-2',
      'x'.repeat(60),
    ]);
  });
});
