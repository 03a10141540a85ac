/**
 * `tessera import` against hostile exports (the security review of the import): each is refused with its problems
 * at their places, or mapped with a line saying what was left out, never a crash, a hang, a change of a process's
 * objects (Object.prototype), or a key or secret copied where it does not belong. In process, by the mapping
 * itself; POST /admin/v1/imports's own part (a console viewer may call it) is in api-hostile.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { validateJwks } from '../../src/domain/client-auth/jwks.js';
import { importExport, ImportSourceError, type ImportInput } from '../../src/management/import/index.js';
import { goDuration } from '../../src/management/import/hydra.js';
import { PRIVATE_JWK_MEMBERS } from '../../src/management/import/mapping.js';
import { MAX_REPORT_LINES } from '../../src/management/import/report.js';

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

/** How long a call takes, in ms. */
function timed<T>(run: () => T): { value: T; ms: number } {
  const started = performance.now();
  const value = run();
  return { value, ms: performance.now() - started };
}

const claimMapper = (name: string, value: string, type = 'String') => ({
  name,
  protocolMapper: 'oidc-hardcoded-claim-mapper',
  config: { 'claim.name': name, 'claim.value': value, 'jsonType.label': type, 'access.token.claim': 'true' },
});

/** A realm of one service-account client, `job`, with these protocol mappers and fields. */
const realmOf = (mappers: unknown[], fields: Record<string, unknown> = {}): ImportInput => ({
  data: { clients: [{ clientId: 'job', serviceAccountsEnabled: true, protocolMappers: mappers, ...fields }] },
});

const hydraClient = (fields: Record<string, unknown>): Record<string, unknown> => ({
  client_id: 'job',
  grant_types: ['client_credentials'],
  ...fields,
});

describe('prototype pollution through a Keycloak claim name', () => {
  it('leaves out every name with a segment __proto__, constructor or prototype, or empty; Object.prototype untouched', () => {
    const result = importExport(
      'keycloak',
      realmOf([
        claimMapper('x.__proto__.prune', 'true', 'boolean'),
        claimMapper('__proto__.prune', 'true', 'boolean'),
        claimMapper('constructor.prototype.prune', 'true', 'boolean'),
        claimMapper('a.constructor', 'x'),
        claimMapper('a..b', 'x'),
        claimMapper('toString.x', 'inherited names are the claims own members'),
        claimMapper('valueOf', '1', 'int'),
        claimMapper('deep', '{"__proto__": {"prune": true}}', 'JSON'),
      ]),
    );
    expect(({} as Record<string, unknown>).prune).toBeUndefined();
    expect(Object.prototype).not.toHaveProperty('prune');
    const claims = result.file.clients![0]!.claims!;
    expect(claims).toEqual({
      toString: { x: 'inherited names are the claims own members' },
      valueOf: 1,
    });
    // Plain JSON objects, with a member of their own of each name.
    expect(Object.getPrototypeOf(claims)).toBe(Object.prototype);
    expect(Object.hasOwn(claims, 'toString')).toBe(true);
    expect(JSON.parse(JSON.stringify(claims))).toEqual(claims);
    expect(tuples(result.report)).toEqual([
      ['/clients/0/secret', 'changed', 'client job has no secret in the export: apply makes a new one'],
      [
        '/clients/0/protocolMappers/0/config/claim.name',
        'left_out',
        'client job: claim member "__proto__" is not allowed',
      ],
      [
        '/clients/0/protocolMappers/1/config/claim.name',
        'left_out',
        'client job: claim "__proto__" is not allowed',
      ],
      [
        '/clients/0/protocolMappers/2/config/claim.name',
        'left_out',
        'client job: claim "constructor" is not allowed',
      ],
      [
        '/clients/0/protocolMappers/3/config/claim.name',
        'left_out',
        'client job: claim member "constructor" is not allowed',
      ],
      [
        '/clients/0/protocolMappers/4/config/claim.name',
        'left_out',
        'client job: claim member "" is not allowed',
      ],
      ['/clients/0/protocolMappers/5', 'mapped', 'client job: custom claim toString.x'],
      ['/clients/0/protocolMappers/6', 'mapped', 'client job: custom claim valueOf'],
      [
        '/clients/0/protocolMappers/7/config/claim.value',
        'left_out',
        'claim deep of client job: its JSON value has a member "__proto__" (at /__proto__), which is not allowed',
      ],
      ['/clients/0', 'mapped', 'client job (client_secret_basic)'],
    ]);
  });

  it('does the same for a claim of a client scope, which every client that has it gets', () => {
    const result = importExport('keycloak', {
      data: {
        clients: [{ clientId: 'job', serviceAccountsEnabled: true, defaultClientScopes: ['claims'] }],
        clientScopes: [{ name: 'claims', protocolMappers: [claimMapper('tenant.__proto__.prune', 'yes')] }],
      },
    });
    expect(({} as Record<string, unknown>).prune).toBeUndefined();
    expect(result.file.clients![0]!.claims).toBeUndefined();
    expect(result.report[1]).toEqual({
      place: '/clientScopes/0/protocolMappers/0/config/claim.name',
      outcome: 'left_out',
      detail: 'client scope claims: claim member "__proto__" is not allowed',
    });
  });
});

describe('a Go duration', () => {
  it('of 100 000 digits and no unit is refused at once, not matched in quadratic time', () => {
    const digits = '1'.repeat(100_000);
    const read = timed(() => goDuration(digits));
    expect(read.value).toBeUndefined();
    expect(read.ms).toBeLessThan(100);
    // The unambiguous pattern is linear too, below the length limit.
    expect(goDuration(`${'0'.repeat(60)}1.5h`)).toBe(5400);
    expect(goDuration(`${'1'.repeat(63)}`)).toBeUndefined();
    const refused = timed(() =>
      refusal(() =>
        importExport('hydra', {
          data: [hydraClient({ client_credentials_grant_access_token_lifespan: digits })],
        }),
      ),
    );
    expect(refused.value).toBe(
      'file: 1 error, nothing was written\n  file: /0/client_credentials_grant_access_token_lifespan: is 100000 characters long; a Go duration is read up to 64',
    );
    expect(refused.ms).toBeLessThan(1000);
  });
});

describe('plain-object maps: names every object inherits', () => {
  // As the CLI and the admin API give them: none, as an empty object (whose inherited members are no names).
  const none = { keywords: {}, audiences: {} };

  it('an audience or an authenticator named constructor, toString or __proto__ is no match of anything', () => {
    const result = importExport(
      'keycloak',
      {
        data: {
          clients: [
            {
              clientId: 'job',
              serviceAccountsEnabled: true,
              protocolMappers: ['constructor', 'toString', '__proto__'].map((name) => ({
                name,
                protocolMapper: 'oidc-audience-mapper',
                config: { 'included.client.audience': name },
              })),
            },
            { clientId: 'other', serviceAccountsEnabled: true, clientAuthenticatorType: 'constructor' },
            { clientId: 'third', serviceAccountsEnabled: true, clientAuthenticatorType: '__proto__' },
          ],
        },
      },
      none,
    );
    expect(tuples(result.report).slice(1, 4)).toEqual(
      ['constructor', 'toString', '__proto__'].map((name, i) => [
        `/clients/0/protocolMappers/${i}/config/included.client.audience`,
        'left_out',
        `audience ${name} of client job: no client of the realm; --audience ${name}=URL gives it one`,
      ]),
    );
    expect(tuples(result.report).slice(5)).toEqual([
      [
        '/clients/1/clientAuthenticatorType',
        'left_out',
        'client other authenticates with constructor, which Tessera has no counterpart of',
      ],
      [
        '/clients/2/clientAuthenticatorType',
        'left_out',
        'client third authenticates with __proto__, which Tessera has no counterpart of',
      ],
    ]);
    expect(result.file).toEqual({
      audiences: [],
      clients: [
        { client_id: 'job', name: 'job', token_endpoint_auth_method: 'client_secret_basic', grants: [] },
      ],
    });
  });

  it('an Auth0 API identifier or Hydra audience named constructor has no URL; --audience gives it one', () => {
    const tenant = { resourceServers: [{ identifier: 'constructor', name: 'A' }] };
    expect(tuples(importExport('auth0', { data: tenant }, none).report)).toEqual([
      [
        '/resourceServers/0/identifier',
        'left_out',
        'API constructor: a Tessera audience is an http(s) URL; --audience constructor=URL gives it one',
      ],
    ]);
    const given = importExport(
      'auth0',
      { data: tenant },
      { audiences: { constructor: 'https://a.example' } },
    );
    expect(given.file.audiences).toEqual([
      { identifier: 'https://a.example', name: 'A', token_profile: 'auth0' },
    ]);
    const hydra = importExport(
      'hydra',
      { data: [hydraClient({ audience: ['toString', 'hasOwnProperty'] })] },
      none,
    );
    expect(hydra.file.audiences).toEqual([]);
    expect(hydra.report.filter((l) => l.outcome === 'left_out').map((l) => l.place)).toEqual([
      '/0/audience/0',
      '/0/audience/1',
    ]);
  });

  it('a placeholder ##constructor## or @@__proto__@@ has no value unless a keyword gives it one', () => {
    const tenant = () => ({
      resourceServers: [
        { identifier: 'https://a.example', name: '##constructor##', scopes: '@@__proto__@@' },
      ],
    });
    expect(refusal(() => importExport('auth0', { data: tenant() }, none))).toBe(
      'file: 3 errors, nothing was written\n' +
        '  file: /resourceServers/0/name: placeholder ##constructor## has no value: give it one (--keyword constructor=VALUE)\n' +
        '  file: /resourceServers/0/scopes: placeholder @@__proto__@@ has no value: give it one (--keyword __proto__=VALUE)\n' +
        '  file: /resourceServers/0/scopes: scopes must be a list, not a string',
    );
    // A keyword of that name, given as an object's own member or in a Map, is its value.
    const keywords = JSON.parse(
      '{"constructor": "Orders", "__proto__": "[{\\"value\\": \\"read\\"}]"}',
    ) as Record<string, string>;
    for (const given of [keywords, new Map(Object.entries(keywords))]) {
      const result = importExport('auth0', { data: tenant() }, { keywords: given });
      expect(result.file.audiences).toEqual([
        {
          identifier: 'https://a.example',
          name: 'Orders',
          scopes: [{ name: 'read' }],
          token_profile: 'auth0',
        },
      ]);
    }
  });
});

describe('values that are objects where a string is meant', () => {
  it('a mapper name or an authenticator {"toString": 1, "valueOf": 1} is a problem at its place, not a TypeError', () => {
    const hostile = { toString: 1, valueOf: 1 };
    const run = () =>
      importExport(
        'keycloak',
        realmOf(
          [
            {
              name: hostile,
              protocolMapper: 'oidc-audience-mapper',
              config: { 'access.token.claim': 'false' },
            },
            { name: hostile, protocolMapper: hostile },
            { ...claimMapper('x', 'y'), name: hostile },
          ],
          { clientAuthenticatorType: hostile },
        ),
      );
    expect(refusal(run)).toBe(
      'file: 5 errors, nothing was written\n' +
        '  file: /clients/0/clientAuthenticatorType: clientAuthenticatorType must be a string, not an object\n' +
        '  file: /clients/0/protocolMappers/0/name: name must be a string, not an object\n' +
        '  file: /clients/0/protocolMappers/1/name: name must be a string, not an object\n' +
        '  file: /clients/0/protocolMappers/1/protocolMapper: protocolMapper must be a string, not an object\n' +
        '  file: /clients/0/protocolMappers/2/name: name must be a string, not an object',
    );
  });
});

describe('depth: JSON in a string, which the source depth check does not see', () => {
  const deep = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;

  it('a claim.value (jsonType JSON) of 100 000 levels is a problem at its place', () => {
    expect(refusal(() => importExport('keycloak', realmOf([claimMapper('deep', deep, 'JSON')])))).toBe(
      'file: 1 error, nothing was written\n' +
        `  file: /clients/0/protocolMappers/0/config/claim.value: claim deep of client job: its JSON value nests deeper than 32 levels (at ${'/0'.repeat(32)})`,
    );
  });

  it('a jwks.string of 100 000 levels is a problem at its place', () => {
    const realm = realmOf([], {
      clientAuthenticatorType: 'client-jwt',
      attributes: { 'use.jwks.string': 'true', 'jwks.string': deep },
    });
    expect(refusal(() => importExport('keycloak', realm))).toBe(
      'file: 1 error, nothing was written\n' +
        `  file: /clients/0/attributes/jwks.string: jwks.string nests deeper than 32 levels (at ${'/0'.repeat(32)})`,
    );
  });

  it('a whole value @@NAME@@ nests no deeper where it stands than a source may', () => {
    const tenant = { resourceServers: [{ identifier: 'https://a.example', scopes: '@@DEEP@@' }] };
    expect(refusal(() => importExport('auth0', { data: tenant }, { keywords: { DEEP: deep } }))).toBe(
      'file: 2 errors, nothing was written\n' +
        `  file: /resourceServers/0/scopes: placeholder @@DEEP@@'s value nests too deep here (at ${'/0'.repeat(29)}): a source nests at most 32 levels\n` +
        '  file: /resourceServers/0/scopes: scopes must be a list, not a string',
    );
    // As deep as it may be there: its top at level 4 (below the tenant, its list, the API), its last at 32.
    const fits = `${'['.repeat(29)}${']'.repeat(29)}`;
    const other = () => ({ resourceServers: [{ identifier: 'https://a.example', unread: '@@DEEP@@' }] });
    expect(
      importExport('auth0', { data: other() }, { keywords: { DEEP: fits } }).file.audiences,
    ).toHaveLength(1);
    expect(refusal(() => importExport('auth0', { data: other() }, { keywords: { DEEP: `[${fits}]` } }))).toBe(
      'file: 1 error, nothing was written\n' +
        `  file: /resourceServers/0/unread: placeholder @@DEEP@@'s value nests too deep here (at ${'/0'.repeat(29)}): a source nests at most 32 levels`,
    );
  });
});

describe('keyword expansion', () => {
  it('refuses an export that its placeholders fill past the byte limit (64 MiB), at the place it passes it', () => {
    const big = 'x'.repeat(1024 * 1024);
    const tenant = {
      resourceServers: Array.from({ length: 80 }, (_, i) => ({
        identifier: `https://a${i}.example`,
        name: '##BIG##',
        description: '@@BIG@@',
      })),
    };
    const { value, ms } = timed(() =>
      refusal(() => importExport('auth0', { data: tenant }, { keywords: { BIG: big } })),
    );
    // Each API adds 2 MiB (less the 7 bytes of ##BIG##): 32 of them are just below 64 MiB, the 33rd's name past it.
    expect(value).toBe(
      'file: 1 error, nothing was written\n' +
        '  file: /resourceServers/32/name: its placeholders filled, the export is more than 67108864 bytes (64 MiB), the most an export is read up to',
    );
    expect(ms).toBeLessThan(5000);
    // Below it, filled.
    const small = { resourceServers: tenant.resourceServers.slice(0, 30) };
    expect(importExport('auth0', { data: small }, { keywords: { BIG: big } }).file.audiences).toHaveLength(
      30,
    );
  });
});

describe('private keys in an imported jwks', () => {
  const secretD = 'nJ3kQx8VwY2pZr5tLm0aSe7uFh4gDc1bXo6iKq9yWv3sTn8rMj2lPz5xHa0eGf7u';
  const key = {
    kty: 'EC',
    crv: 'P-256',
    x: 'f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU',
    y: 'x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0',
  };

  it('Hydra: a jwks key with "d" is refused at its place; the key appears nowhere', () => {
    const data = [
      hydraClient({
        token_endpoint_auth_method: 'private_key_jwt',
        jwks: { keys: [key, { ...key, d: secretD }] },
      }),
    ];
    let message = '';
    try {
      importExport('hydra', { data });
    } catch (error) {
      message = JSON.stringify({
        message: (error as ImportSourceError).message,
        problems: (error as ImportSourceError).problems,
      });
    }
    expect(JSON.parse(message).message).toBe(
      'file: 1 error, nothing was written\n' +
        `  file: /0/jwks/keys/1: client job's jwks key 2 has "d": it is a private or symmetric key; an export's jwks holds public keys only`,
    );
    expect(message).not.toContain(secretD);
  });

  it('Keycloak: a jwks.string holding a symmetric key ("k") is refused; the key appears nowhere', () => {
    const k = 'c2VjcmV0LXN5bW1ldHJpYy1rZXktbWF0ZXJpYWwtZG8tbm90LWxlYWs';
    const realm = realmOf([], {
      clientAuthenticatorType: 'client-jwt',
      attributes: { 'use.jwks.string': 'true', 'jwks.string': JSON.stringify({ keys: [{ kty: 'oct', k }] }) },
    });
    let thrown: unknown;
    try {
      importExport('keycloak', realm);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ImportSourceError);
    expect((thrown as ImportSourceError).message).toBe(
      'file: 1 error, nothing was written\n' +
        `  file: /clients/0/attributes/jwks.string: client job's jwks.string key 1 has "k": it is a private or symmetric key; an export's jwks holds public keys only`,
    );
    expect(JSON.stringify((thrown as ImportSourceError).problems)).not.toContain(k);
  });

  it('refuses each member that apply refuses (domain/client-auth/jwks.ts)', () => {
    for (const member of PRIVATE_JWK_MEMBERS) {
      expect(() => validateJwks({ keys: [{ ...key, [member]: 'x' }] })).toThrow(`has "${member}"`);
      const data = [
        hydraClient({
          token_endpoint_auth_method: 'private_key_jwt',
          jwks: { keys: [{ ...key, [member]: 'x' }] },
        }),
      ];
      expect(refusal(() => importExport('hydra', { data }))).toContain(`has "${member}"`);
    }
  });
});

describe('carried secrets', () => {
  it('keeps the secret of a client whose id is __proto__, as a member of its own', () => {
    const secret = 'W5vKq2mZ8xT1rY7uN4bH6cJ9dL3fG0sA';
    const result = importExport(
      'keycloak',
      { data: { clients: [{ clientId: '__proto__', serviceAccountsEnabled: true, secret }] } },
      { carrySecrets: true },
    );
    expect(Object.hasOwn(result.secrets, '__proto__')).toBe(true);
    expect(Object.getPrototypeOf(result.secrets)).toBe(Object.prototype);
    expect(JSON.stringify(result.secrets)).toBe(`{"__proto__":"${secret}"}`);
    expect(Object.entries(result.secrets)).toEqual([['__proto__', secret]]);
  });
});

describe('scale: what an export repeats costs once, and a report is bounded', () => {
  it('maps 20 000 Keycloak clients of one name sharing a client scope of 1 000 mappers in a few seconds', () => {
    const mappers = [
      ...Array.from({ length: 500 }, (_, i) => ({
        name: `silent ${i}`,
        protocolMapper: 'oidc-audience-mapper',
        config: { 'included.custom.audience': 'https://api.example', 'access.token.claim': 'false' },
      })),
      ...Array.from({ length: 499 }, (_, i) => claimMapper(`azp`, `reserved ${i}`)),
      {
        name: 'api',
        protocolMapper: 'oidc-audience-mapper',
        config: { 'included.custom.audience': 'https://api.example' },
      },
    ];
    const clients = Array.from({ length: 20_000 }, () => ({
      clientId: 'batch job',
      serviceAccountsEnabled: true,
      defaultClientScopes: ['shared'],
    }));
    // One client names the scope a million times, and a name that is no scope token a million times too.
    clients[0]!.defaultClientScopes = Array<string>(1_000_000).fill('shared');
    (clients[0] as Record<string, unknown>).optionalClientScopes = Array<string>(1_000_000).fill('no scope');
    const { value: result, ms } = timed(() =>
      importExport('keycloak', {
        data: {
          clients,
          clientScopes: [{ name: 'shared', protocolMappers: [...mappers, claimMapper('tenant', 'acme')] }],
        },
      }),
    );
    console.log(`20,000 Keycloak clients of one name, a shared scope of 1,001 mappers: ${ms.toFixed(0)} ms`);
    expect(ms).toBeLessThan(5000);
    const ids = result.file.clients!.map((c) => c.client_id);
    expect(new Set(ids).size).toBe(20_000);
    expect(ids).toContain('batch-job');
    expect(ids).toContain('batch-job-20000');
    expect(result.file.clients![19_999]!).toEqual({
      client_id: 'batch-job-9999',
      name: 'batch-job-9999',
      token_endpoint_auth_method: 'client_secret_basic',
      claims: { tenant: 'acme' },
      grants: [{ audience: 'https://api.example', scopes: ['shared'] }],
    });
    // The scope's lines once each (1,001 mappers), each client's five (no secret, its id made, itself, its grant,
    // its client scope a scope of its audience), one for the bad scope name.
    const scopeLines = result.report.filter((l) => l.place.startsWith('/clientScopes/0'));
    expect(scopeLines).toHaveLength(1001);
    expect(scopeLines[0]).toEqual({
      place: '/clientScopes/0/protocolMappers/0',
      outcome: 'left_out',
      detail: 'audience mapper "silent 0" adds nothing to access tokens',
    });
    expect(scopeLines.at(-1)).toEqual({
      place: '/clientScopes/0/protocolMappers/1000',
      outcome: 'mapped',
      detail: 'client scope shared: custom claim tenant',
    });
    expect(result.report.filter((l) => l.place.startsWith('/clients/0/optionalClientScopes'))).toEqual([
      {
        place: '/clients/0/optionalClientScopes/0',
        outcome: 'left_out',
        detail: 'client scope "no scope" is not a scope token (RFC 6749 §3.3)',
      },
    ]);
    expect(result.report).toHaveLength(1001 + 5 * 20_000 + 1);
  }, 30_000);

  it('makes ids for 20 000 Hydra and Auth0 clients of one name in a few seconds; a repeated audience once', () => {
    const hydra = Array.from({ length: 20_000 }, () =>
      hydraClient({
        client_id: 'not an id!',
        client_name: 'Job',
        audience: ['https://a.example'],
        scope: 'read',
      }),
    );
    hydra[0]!.audience = Array<string>(1_000_000).fill('https://a.example');
    hydra[0]!.scope = Array<string>(200_000).fill('read').join(' ');
    const tenant = {
      clients: Array.from({ length: 20_000 }, () => ({ name: 'Worker', app_type: 'non_interactive' })),
    };
    const { value, ms } = timed(() => [
      importExport('hydra', { data: hydra }),
      importExport('auth0', { data: tenant }),
    ]);
    console.log(`20,000 Hydra and 20,000 Auth0 clients of one name: ${ms.toFixed(0)} ms`);
    expect(ms).toBeLessThan(5000);
    const [fromHydra, fromAuth0] = value;
    expect(fromHydra!.file.clients!.map((c) => c.client_id).slice(0, 3)).toEqual([
      'job',
      'job-10',
      'job-100',
    ]);
    expect(new Set(fromHydra!.file.clients!.map((c) => c.client_id)).size).toBe(20_000);
    expect(fromHydra!.file.clients!.find((c) => c.client_id === 'job')!.grants).toEqual([
      { audience: 'https://a.example', scopes: ['read'] },
    ]);
    expect(fromHydra!.report.filter((l) => l.place.startsWith('/0/audience'))).toHaveLength(2);
    expect(new Set(fromAuth0!.file.clients!.map((c) => c.client_id)).size).toBe(20_000);
    expect(fromAuth0!.file.clients!.at(-1)!.client_id).toBe('worker-9999');
  }, 30_000);

  it(`holds at most ${MAX_REPORT_LINES} lines, the last saying how many more were left unsaid`, () => {
    const clients = Array.from({ length: MAX_REPORT_LINES + 5 }, (_, i) => ({ client_id: `c-${i}` }));
    const { report } = importExport('hydra', { data: clients });
    expect(report).toHaveLength(MAX_REPORT_LINES + 1);
    expect(report[MAX_REPORT_LINES - 1]).toEqual({
      place: `/${MAX_REPORT_LINES - 1}`,
      outcome: 'left_out',
      detail: `client c-${MAX_REPORT_LINES - 1} has no client_credentials grant`,
    });
    expect(report.at(-1)).toEqual({
      place: '',
      outcome: 'left_out',
      detail: `5 more lines of this report, left unsaid: a report holds at most ${MAX_REPORT_LINES} lines, of ${64 * 1024 * 1024} characters in all`,
    });
  });

  it('refuses, at once, a client whose scopes times its audiences would be billions of scopes in the file', () => {
    const scope = Array.from({ length: 100_000 }, (_, i) => `s${i}`).join(' ');
    const audience = Array.from({ length: 10_000 }, (_, i) => `https://a${i}.example`);
    const { value, ms } = timed(() =>
      refusal(() => importExport('hydra', { data: [hydraClient({ scope, audience })] })),
    );
    expect(value).toBe(
      'file: 1 error, nothing was written\n' +
        "  file: its apply file would hold more than 2000000 scopes of audiences and grants (each client's scopes are scopes of every audience it is granted); a Tessera audience has at most 200",
    );
    expect(ms).toBeLessThan(5000);
    const realm = {
      clients: [
        {
          clientId: 'job',
          serviceAccountsEnabled: true,
          protocolMappers: audience.map((url) => ({
            name: url,
            protocolMapper: 'oidc-audience-mapper',
            config: { 'included.custom.audience': url },
          })),
          defaultClientScopes: scope.split(' '),
        },
      ],
    };
    const keycloak = timed(() => refusal(() => importExport('keycloak', { data: realm })));
    expect(keycloak.value).toBe(value);
    expect(keycloak.ms).toBeLessThan(5000);
  });

  it('tells at most 1 000 problems, and how many more there were', () => {
    const error = (() => {
      try {
        importExport('keycloak', { data: { clients: Array<number>(5000).fill(1) } });
      } catch (e) {
        return e as ImportSourceError;
      }
      throw new Error('not refused');
    })();
    expect(error.problems).toHaveLength(1001);
    expect(error.problems[999]).toEqual({
      pointer: '/clients/999',
      message: 'a client must be an object, not a number',
    });
    expect(error.problems[1000]).toEqual({
      pointer: '',
      message: '4000 more problems, untold: at most 1000 are told',
    });
  });
});
