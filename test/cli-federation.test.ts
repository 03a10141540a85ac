/**
 * `tessera client federation add|list|show|update|remove` (workload identity federation) as an operator runs it:
 * real processes on a real SQLite data directory. `--json` prints the admin API's documents; exit codes by the
 * kind of failure (2 a value refused, 1 not found or a conflict).
 */
import { Ajv2020 } from 'ajv/dist/2020.js';
import { exportJWK, generateKeyPair } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectTable, jsonError, workspace, type Workspace } from './helpers/cli.js';
import type { CliResult } from './helpers/process.js';

const API = 'https://api.example.com';
const GITHUB = 'https://token.actions.githubusercontent.com';
const K8S = 'https://kubernetes.default.svc.cluster.local';
/** The issuer of the CLI's settings (TESSERA_ISSUER unset): the default audience of a credential. */
const ISSUER = 'http://localhost:8080';
const SLOW = { timeout: 120_000 };

let ws: Workspace;
let jwks: { keys: Record<string, unknown>[] };

beforeAll(async () => {
  ws = workspace('tessera-cli-federation-');
  await ws.ok('audience', 'add', API);
  const { publicKey } = await generateKeyPair('RS256', { extractable: true });
  jwks = { keys: [{ ...(await exportJWK(publicKey)), kid: 'k8s-key', alg: 'RS256', use: 'sig' }] };
}, 60_000);
afterAll(() => ws?.remove());

const credential = (fields: Record<string, unknown>) => ({
  id: expect.stringMatching(/^fed_[A-Za-z0-9_-]{16}$/),
  jwks: null,
  jwks_uri: null,
  audience: ISSUER,
  claims: {},
  max_lifetime: 3600,
  once: false,
  created_at: expect.stringMatching(/Z$/),
  updated_at: expect.stringMatching(/Z$/),
  ...fields,
});

describe('tessera client federation', SLOW, () => {
  it('a keyless private_key_jwt client says it has no keys yet; add with the GitHub preset, in text and --json', async () => {
    const created = await ws.ok(
      'client',
      'create',
      '--name',
      'Billing CI',
      '--id',
      'billing-ci',
      '--grant',
      API,
      '--auth-method',
      'private_key_jwt',
    );
    expect(created.stdout.split('\n')[0]).toBe(
      'Client created: it authenticates with private_key_jwt (no secret), and has no keys yet: give it federated ' +
        'credentials (tessera client federation add billing-ci ...) or keys (tessera client update billing-ci --jwks ...).',
    );

    const added = await ws.ok(
      'client',
      'federation',
      'add',
      'billing-ci',
      '--name',
      'deploy',
      '--github-repo',
      'acme/billing',
      '--github-ref',
      'refs/heads/main',
      '--claim',
      'repository_id=123456',
      '--max-lifetime',
      '15m',
    );
    const [heading, record, hint] = added.stdout.split('\n\n');
    const id = /^Federated credential (fed_\S+) added/.exec(heading!)![1]!;
    expect(heading).toBe(
      `Federated credential ${id} added to billing-ci: a token of ${GITHUB} with sub ` +
        `repo:acme/billing:ref:refs/heads/main and aud ${ISSUER} now authenticates it.`,
    );
    expect(record!.split('\n').map((line) => line.trim().split(/ {2,}/))).toEqual([
      ['id', id],
      ['name', 'deploy'],
      ['issuer', GITHUB],
      ['keys', `by discovery: ${GITHUB}/.well-known/openid-configuration`],
      ['subject', 'repo:acme/billing:ref:refs/heads/main'],
      ['audience', ISSUER],
      // A claim given as name=value is text: GitHub's ids are strings in its tokens.
      ['claims', '{"repository_id":"123456"}'],
      ['max_lifetime', '900 s'],
      ['once', 'no'],
      ['created_at', expect.stringMatching(/Z$/)],
      ['updated_at', expect.stringMatching(/Z$/)],
    ]);
    expect(hint).toBe(
      "Get a token with the platform's token in $PLATFORM_TOKEN:\n" +
        `  curl -s ${ISSUER}/oauth/token -d grant_type=client_credentials -d client_id=billing-ci ` +
        '-d client_assertion_type=urn:ietf:params:oauth:client-assertion-type:jwt-bearer ' +
        '-d client_assertion="$PLATFORM_TOKEN" -d audience=https%3A%2F%2Fapi.example.com\n',
    );

    const env = await ws.ok(
      'client',
      'federation',
      'add',
      'billing-ci',
      '--name',
      'production',
      '--github-repo',
      'acme/billing',
      '--github-environment',
      'production',
      '--claims',
      '{"runner_environment":"github-hosted"}',
      '--once',
      '--json',
    );
    expect(env.json).toEqual(
      credential({
        name: 'production',
        issuer: GITHUB,
        subject: 'repo:acme/billing:environment:production',
        claims: { runner_environment: 'github-hosted' },
        once: true,
      }),
    );

    const shown = await ws.ok('client', 'show', 'billing-ci');
    expect(shown.stdout).toMatch(
      new RegExp(`^ *federated +deploy \\(${GITHUB}\\), production \\(${GITHUB}\\)$`, 'm'),
    );
  });

  it('list, show (by id or name), update (the fields given; default resets), remove; --json is the API document', async () => {
    const file = ws.write('cluster-jwks.json', JSON.stringify(jwks));
    await ws.ok(
      'client',
      'create',
      '--name',
      'k8s',
      '--id',
      'k8s-billing',
      '--auth-method',
      'private_key_jwt',
    );
    const added = await ws.ok(
      'client',
      'federation',
      'add',
      'k8s-billing',
      '--name',
      'prod',
      '--issuer',
      K8S,
      '--k8s-service-account',
      'prod:billing',
      '--jwks-file',
      file,
      '--audience',
      'https://tessera.example.com',
      '--json',
    );
    const prod = added.json as { id: string; created_at: string };
    expect(prod).toEqual(
      credential({
        name: 'prod',
        issuer: K8S,
        jwks,
        subject: 'system:serviceaccount:prod:billing',
        audience: 'https://tessera.example.com',
      }),
    );
    const other = (
      await ws.ok(
        'client',
        'federation',
        'add',
        'k8s-billing',
        '--name',
        'staging',
        '--issuer',
        K8S,
        '--subject',
        'system:serviceaccount:staging:billing',
        '--jwks-uri',
        'https://keys.example.com/openid/v1/jwks',
        '--json',
      )
    ).json as { id: string };

    const listed = await ws.ok('client', 'federation', 'list', 'k8s-billing', '--json');
    expect(listed.json).toEqual({ items: [prod, other] });
    expectTable(
      (await ws.ok('client', 'federation', 'list', 'k8s-billing')).stdout,
      ['ID', 'NAME', 'ISSUER', 'SUBJECT', 'MAX_LIFETIME', 'ONCE'],
      [
        [prod.id, 'prod', K8S, 'system:serviceaccount:prod:billing', '3600 s', 'no'],
        [other.id, 'staging', K8S, 'system:serviceaccount:staging:billing', '3600 s', 'no'],
      ],
    );
    expect((await ws.ok('client', 'federation', 'show', 'k8s-billing', prod.id, '--json')).json).toEqual(
      prod,
    );
    expect((await ws.ok('client', 'federation', 'show', 'k8s-billing', 'prod', '--json')).json).toEqual(prod);
    expect((await ws.ok('client', 'federation', 'show', 'k8s-billing', 'prod')).stdout).toMatch(
      /^ {2}keys +inline: k8s-key$/m,
    );

    const updated = await ws.ok(
      'client',
      'federation',
      'update',
      'k8s-billing',
      'prod',
      '--audience',
      'default',
      '--claim',
      'kubernetes.io/namespace=prod',
      '--max-lifetime',
      '2h',
      '--once',
      '--discovery',
      '--json',
    );
    expect(updated.json).toEqual({
      ...prod,
      jwks: null,
      audience: ISSUER,
      claims: { 'kubernetes.io/namespace': 'prod' },
      max_lifetime: 7200,
      once: true,
      updated_at: expect.stringMatching(/Z$/),
    });
    const back = await ws.ok(
      'client',
      'federation',
      'update',
      'k8s-billing',
      prod.id,
      '--no-once',
      '--claims',
      '{}',
      '--max-lifetime',
      'default',
      '--jwks-file',
      file,
      '--json',
    );
    expect(back.json).toEqual({ ...prod, audience: ISSUER, updated_at: expect.stringMatching(/Z$/) });

    expect((await ws.ok('client', 'federation', 'remove', 'k8s-billing', 'staging')).stdout).toBe(
      `Federated credential ${other.id} (staging) of k8s-billing removed: its tokens stop working at once.\n`,
    );
    expect((await ws.ok('client', 'federation', 'remove', 'k8s-billing', prod.id, '--json')).json).toEqual({
      client_id: 'k8s-billing',
      id: prod.id,
      removed: true,
    });
    expect((await ws.ok('client', 'federation', 'list', 'k8s-billing', '--json')).json).toEqual({
      items: [],
    });
    expectTable(
      (await ws.ok('client', 'federation', 'list', 'k8s-billing')).stdout,
      ['ID', 'NAME', 'ISSUER', 'SUBJECT', 'MAX_LIFETIME', 'ONCE'],
      [],
    );
  });

  it('refusals: a value is exit 2 (invalid_field), a conflict or something missing exit 1, nothing written', async () => {
    await ws.ok('client', 'create', '--name', 'secret', '--id', 'with-secret');
    await ws.ok(
      'client',
      'create',
      '--name',
      'fed',
      '--id',
      'fed-refused',
      '--auth-method',
      'private_key_jwt',
    );
    await ws.ok(
      'client',
      'federation',
      'add',
      'fed-refused',
      '--name',
      'deploy',
      '--issuer',
      GITHUB,
      '--subject',
      'repo:acme/x:ref:refs/heads/main',
    );
    const base = ['client', 'federation', 'add', 'fed-refused', '--name', 'x'];
    const cases: [string[], number, string, string][] = [
      [
        [...base, '--issuer', 'ftp://issuer.example.com', '--subject', 's'],
        2,
        'invalid_field',
        'issuer must be an http or https URL',
      ],
      [[...base, '--issuer', GITHUB], 2, 'invalid_field', 'subject is required'],
      [
        [...base, '--issuer', GITHUB, '--subject', 's', '--max-lifetime', 'soon'],
        2,
        'invalid_field',
        '--max-lifetime must be a duration: seconds, or a number and s, m, h or d (e.g. 15m)',
      ],
      [
        [...base, '--issuer', GITHUB, '--subject', 's', '--max-lifetime', '2d'],
        2,
        'invalid_field',
        'max_lifetime must be a whole number of seconds from 60 to 86400 (24 hours)',
      ],
      [
        [...base, '--github-repo', 'acme/x', '--github-ref', 'refs/heads/main', '--subject', 's'],
        2,
        'invalid_field',
        'give --subject or a preset, not both',
      ],
      [
        [...base, '--github-repo', 'acme/x'],
        2,
        'invalid_field',
        '--github-repo needs --github-ref or --github-environment (one of them)',
      ],
      [
        [...base, '--issuer', GITHUB, '--subject', 's', '--claim', 'nothing'],
        2,
        'invalid_field',
        'a claim is name=value, got "nothing"',
      ],
      [
        [
          ...base,
          '--issuer',
          GITHUB,
          '--subject',
          's',
          '--jwks-uri',
          'https://k.example.com/j',
          '--jwks-file',
          '{"keys":[]}',
        ],
        2,
        'invalid_field',
        'give one of --jwks-file, --jwks-uri and --discovery',
      ],
      [
        ['client', 'federation', 'add', 'with-secret', '--name', 'x', '--issuer', GITHUB, '--subject', 's'],
        1,
        'client_uses_secrets',
        'client with-secret authenticates with a secret (client_secret_basic): a federated credential is for a private_key_jwt client without secrets or keys (change token_endpoint_auth_method first)',
      ],
      [
        [
          'client',
          'federation',
          'add',
          'fed-refused',
          '--name',
          'deploy',
          '--issuer',
          GITHUB,
          '--subject',
          's',
        ],
        1,
        'federated_credential_exists',
        'client fed-refused already has a federated credential named deploy',
      ],
      [
        ['client', 'secrets', 'add', 'fed-refused'],
        1,
        'client_uses_federation',
        'client fed-refused authenticates with federated credentials: it has no secrets (remove its federated credentials first)',
      ],
      [
        ['client', 'federation', 'show', 'fed-refused', 'nothing'],
        1,
        'federated_credential_not_found',
        'client fed-refused has no federated credential nothing',
      ],
      [
        ['client', 'federation', 'remove', 'fed-refused', 'fed_AAAAAAAAAAAAAAAA'],
        1,
        'federated_credential_not_found',
        'client fed-refused has no federated credential fed_AAAAAAAAAAAAAAAA',
      ],
      [['client', 'federation', 'list', 'nobody'], 1, 'client_not_found', 'client nobody does not exist'],
    ];
    const before = (await ws.ok('export', '--format', 'json')).stdout;
    // Four at a time: each is a Node process, and the machine may have two busy cores.
    const results: CliResult[] = [];
    for (let i = 0; i < cases.length; i += 4)
      results.push(...(await Promise.all(cases.slice(i, i + 4).map(([args]) => ws.run(...args, '--json')))));
    results.forEach((r, i) => {
      const [args, code, error, message] = cases[i]!;
      expect(r.code, args.join(' ')).toBe(code);
      expect(jsonError(r), args.join(' ')).toEqual({ error, message });
    });
    expect((await ws.ok('export', '--format', 'json')).stdout).toBe(before);
    // In text, the message alone.
    const text = await ws.run('client', 'federation', 'list', 'nobody');
    expect(text).toMatchObject({ code: 1, stdout: '', stderr: 'tessera: client nobody does not exist\n' });
  });
});

describe('federated credentials in tessera apply / export', SLOW, () => {
  const made: Workspace[] = [];
  afterAll(() => made.forEach((w) => w.remove()));
  const fresh = async () => {
    const w = workspace('tessera-apply-federation-');
    made.push(w);
    await w.ok('audience', 'add', API);
    return w;
  };

  it('export writes them by name (defaults left out); export | apply --dry-run says No changes.; the schema takes the file', async () => {
    const w = await fresh();
    await w.ok(
      'client',
      'create',
      '--name',
      'ci',
      '--id',
      'ci-bot',
      '--auth-method',
      'private_key_jwt',
      '--grant',
      API,
    );
    await w.ok(
      'client',
      'federation',
      'add',
      'ci-bot',
      '--name',
      'main',
      '--github-repo',
      'acme/billing',
      '--github-ref',
      'refs/heads/main',
      '--claim',
      'repository_owner=acme',
      '--max-lifetime',
      '10m',
      '--once',
    );
    const file = w.write('jwks.json', JSON.stringify(jwks));
    await w.ok(
      'client',
      'federation',
      'add',
      'ci-bot',
      '--name',
      'k8s',
      '--issuer',
      K8S,
      '--k8s-service-account',
      'prod:billing',
      '--jwks-file',
      file,
      '--audience',
      'https://tessera.example.com',
    );
    const yaml = (await w.ok('export')).stdout;
    expect(yaml).toBe(
      [
        'audiences:',
        `  - identifier: ${API}`,
        'clients:',
        '  - client_id: ci-bot',
        '    name: ci',
        '    enabled: true',
        '    token_endpoint_auth_method: private_key_jwt',
        '    federated_credentials:',
        '      - name: k8s',
        `        issuer: ${K8S}`,
        '        jwks:',
        '          keys:',
        ...Object.entries(jwks.keys[0]!).map(
          ([k, v], i) => `${i === 0 ? '            - ' : '              '}${k}: ${v}`,
        ),
        '        subject: system:serviceaccount:prod:billing',
        '        audience: https://tessera.example.com',
        '      - name: main',
        `        issuer: ${GITHUB}`,
        '        subject: repo:acme/billing:ref:refs/heads/main',
        '        claims:',
        '          repository_owner: acme',
        '        max_lifetime: 600',
        '        once: true',
        '    grants:',
        `      - audience: ${API}`,
        '',
      ].join('\n'),
    );
    expect((await w.withInput(yaml, 'apply', '-f', '-', '--dry-run')).stdout).toBe('No changes.\n');
    const json = (await w.ok('export', '--format', 'json')).json;
    expect((await w.withInput(JSON.stringify(json), 'apply', '-f', '-', '--prune')).stdout).toBe(
      'No changes.\n',
    );
    const schema = (await w.ok('export', '--schema')).json;
    const validate = new Ajv2020({ allErrors: true, strict: true }).compile(schema);
    expect(validate(json), JSON.stringify(validate.errors)).toBe(true);
    expect(
      validate({ clients: [{ client_id: 'x', name: 'x', federated_credentials: [{ name: 'x' }] }] }),
    ).toBe(false);
  });

  it('plans add, update and remove by name, and orders a switch between secrets, keys and federation so it works', async () => {
    const w = await fresh();
    await w.ok('client', 'create', '--name', 'was secret', '--id', 'svc', '--grant', API);
    await w.ok('client', 'create', '--name', 'was fed', '--id', 'back', '--auth-method', 'private_key_jwt');
    await w.ok(
      'client',
      'federation',
      'add',
      'back',
      '--name',
      'old',
      '--issuer',
      GITHUB,
      '--subject',
      'repo:a/b:ref:x',
    );
    await w.ok('client', 'create', '--name', 'fed', '--id', 'fed', '--auth-method', 'private_key_jwt');
    for (const name of ['keep', 'change', 'drop'])
      await w.ok(
        'client',
        'federation',
        'add',
        'fed',
        '--name',
        name,
        '--issuer',
        GITHUB,
        '--subject',
        `repo:a/${name}:ref:x`,
      );
    const text = [
      'audiences:',
      `  - identifier: ${API}`,
      'clients:',
      '  - client_id: back',
      '    name: was fed',
      '    token_endpoint_auth_method: private_key_jwt',
      '    jwks_uri: https://keys.example.com/jwks.json',
      '  - client_id: fed',
      '    name: fed',
      '    token_endpoint_auth_method: private_key_jwt',
      '    federated_credentials:',
      '      - name: change',
      `        issuer: ${GITHUB}`,
      '        subject: repo:a/change:environment:prod',
      '        once: true',
      '      - name: keep',
      `        issuer: ${GITHUB}`,
      '        subject: repo:a/keep:ref:x',
      '  - client_id: new',
      '    name: new',
      '    token_endpoint_auth_method: private_key_jwt',
      '    federated_credentials:',
      '      - name: ci',
      '        issuer: https://gitlab.com',
      '        subject: project_path:acme/x:ref_type:branch:ref:main',
      '    grants:',
      `      - audience: ${API}`,
      '  - client_id: svc',
      '    name: now federated',
      '    token_endpoint_auth_method: private_key_jwt',
      '    federated_credentials:',
      '      - name: deploy',
      `        issuer: ${GITHUB}`,
      '        subject: repo:acme/svc:ref:refs/heads/main',
      '        max_lifetime: 900',
      '    grants:',
      `      - audience: ${API}`,
      '',
    ].join('\n');
    const file = w.write('tessera.yaml', text);
    const plan = [
      '- federated credential "old" of back',
      '~ client back: jwks_uri null → "https://keys.example.com/jwks.json"',
      '- federated credential "drop" of fed',
      '~ federated credential "change" of fed: subject "repo:a/change:ref:x" → "repo:a/change:environment:prod"',
      '~ federated credential "change" of fed: once false → true',
      '+ client new (name "new", enabled true, token_endpoint_auth_method "private_key_jwt")',
      '+ federated credential "ci" of new (issuer "https://gitlab.com", subject "project_path:acme/x:ref_type:branch:ref:main")',
      `+ grant new → ${API}`,
      '~ client svc: name "was secret" → "now federated"',
      '~ client svc: token_endpoint_auth_method null → "private_key_jwt"',
      `+ federated credential "deploy" of svc (issuer "${GITHUB}", subject "repo:acme/svc:ref:refs/heads/main", max_lifetime 900)`,
      '',
      'Plan: 4 to create, 3 to update, 2 to delete.',
    ];
    const dry = await w.ok('apply', '-f', file, '--dry-run');
    expect(dry.stdout).toBe([...plan, 'Dry run: nothing was changed.', ''].join('\n'));
    const applied = await w.ok('apply', '-f', file);
    expect(applied.stdout).toBe([...plan, 'Applied.', ''].join('\n'));
    // The client switched from secrets has none left; the new federated client got none.
    expect((await w.ok('client', 'secrets', 'list', 'svc', '--json')).json).toEqual([]);
    expect((await w.ok('client', 'federation', 'list', 'svc', '--json')).json).toEqual({
      items: [
        credential({
          name: 'deploy',
          issuer: GITHUB,
          subject: 'repo:acme/svc:ref:refs/heads/main',
          max_lifetime: 900,
        }),
      ],
    });
    expect(
      ((await w.ok('client', 'federation', 'list', 'fed', '--json')).json.items as { name: string }[]).map(
        (c) => c.name,
      ),
    ).toEqual(['keep', 'change']);
    expect((await w.ok('client', 'show', 'back', '--json')).json).toMatchObject({
      jwks_uri: 'https://keys.example.com/jwks.json',
    });
    expect((await w.ok('apply', '-f', file)).stdout).toBe('No changes.\n');
    // As JSON, the steps in the file's names.
    w.write('tessera.yaml', text.replace('repo:a/keep:ref:x', 'repo:a/keep:ref:y'));
    expect((await w.ok('apply', '-f', file, '--dry-run', '--json')).json.changes).toEqual([
      {
        action: 'update',
        type: 'federated_credential',
        client_id: 'fed',
        name: 'keep',
        changes: [{ field: 'subject', from: 'repo:a/keep:ref:x', to: 'repo:a/keep:ref:y' }],
      },
    ]);
  });

  it('a file with bad credentials is refused whole, every error with its line, nothing written', async () => {
    const w = await fresh();
    const before = (await w.ok('export')).stdout;
    const eleven = Array.from({ length: 11 }, (_, i) =>
      [`      - name: job-${i}`, `        issuer: ${GITHUB}`, `        subject: repo:a/b:ref:${i}`].join(
        '\n',
      ),
    ).join('\n');
    const text = [
      'clients:',
      '  - client_id: secret',
      '    name: secret',
      '    federated_credentials:',
      '      - name: x',
      `        issuer: ${GITHUB}`,
      '        subject: s',
      '  - client_id: bad',
      '    name: bad',
      '    token_endpoint_auth_method: private_key_jwt',
      '    federated_credentials:',
      '      - name: a',
      '        issuer: ftp://issuer.example.com',
      '        subject: s',
      '        max_lifetime: 30',
      '      - name: a',
      `        issuer: ${GITHUB}`,
      '        subject: s',
      '        claims:',
      '          job:',
      '            nested: 1',
      '      - name: b',
      `        issuer: ${GITHUB}`,
      '        colour: blue',
      '  - client_id: many',
      '    name: many',
      '    token_endpoint_auth_method: private_key_jwt',
      '    federated_credentials:',
      eleven,
      '',
    ].join('\n');
    const file = w.write('bad.yaml', text);
    const r = await w.run('apply', '-f', file, '--json');
    expect(r.code).toBe(2);
    const { error, errors } = JSON.parse(r.stderr) as { error: string; errors: unknown[] };
    expect(error).toBe('invalid_file');
    expect(errors).toEqual([
      {
        pointer: '/clients/0/federated_credentials',
        line: 5,
        column: 7,
        message: 'federated credentials are for a private_key_jwt client without jwks or jwks_uri',
      },
      {
        pointer: '/clients/1/federated_credentials/0/issuer',
        line: 13,
        column: 17,
        message: 'issuer must be an http or https URL',
      },
      {
        pointer: '/clients/1/federated_credentials/0/max_lifetime',
        line: 15,
        column: 23,
        message: 'max_lifetime must be a whole number of seconds from 60 to 86400 (24 hours)',
      },
      {
        pointer: '/clients/1/federated_credentials/1/claims/job',
        line: 21,
        column: 13,
        message: 'must be string, number or boolean',
      },
      {
        pointer: '/clients/1/federated_credentials/2',
        line: 22,
        column: 9,
        message: 'missing required field "subject"',
      },
      {
        pointer: '/clients/1/federated_credentials/2/colour',
        line: 24,
        column: 9,
        message: 'unknown field "colour"',
      },
      {
        pointer: '/clients/2/federated_credentials',
        line: 29,
        column: 7,
        message: 'a client has at most 10 federated credentials; 11 are given',
      },
    ]);
    expect((await w.ok('export')).stdout).toBe(before);
    // A name twice in one client, alone: refused at the second, naming the first's line.
    const twice = w.write(
      'twice.yaml',
      [
        'clients:',
        '  - client_id: twice',
        '    name: twice',
        '    token_endpoint_auth_method: private_key_jwt',
        '    federated_credentials:',
        '      - name: a',
        `        issuer: ${GITHUB}`,
        '        subject: s',
        '      - name: a',
        `        issuer: ${GITHUB}`,
        '        subject: t',
        '',
      ].join('\n'),
    );
    const again = await w.run('apply', '-f', twice);
    expect(again.code).toBe(2);
    expect(again.stderr).toBe(
      `tessera: ${twice}: 1 error, nothing was changed\n` +
        `  ${twice}:9:15: /clients/0/federated_credentials/1/name: federated credential a is already in this client (line 6)\n`,
    );
  });
});
