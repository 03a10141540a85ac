/**
 * RFC 8705's client registration through the CLI: `client create` and `client update` with `--auth-method
 * tls_client_auth` and one `--tls-*` value, `--cert-bound-tokens` / `--no-cert-bound-tokens`, a
 * self_signed_tls_client_auth client with its certificates in `--jwks`; `client show` prints them; every refusal
 * with its message, exit code 2.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workspace, type Workspace } from './helpers/cli.js';
import { selfSigned } from './helpers/pki.js';

const API = 'https://api.example.com';
const SPIFFE = 'spiffe://prod.example.com/ns/billing/sa/worker';
let ws: Workspace;

beforeAll(async () => {
  ws = workspace();
  await ws.ok('audience', 'add', API);
}, 60_000);
afterAll(() => ws?.remove());

/** The refusal of a command: exit 2, and the error's code and message under --json. */
async function refused(...args: string[]) {
  const r = await ws.run(...args, '--json');
  expect(r.code, r.stderr).toBe(2);
  return JSON.parse(r.stderr) as { error: string; message: string };
}

const NEEDS_ONE =
  'tls_client_auth needs one of tls_client_auth_subject_dn, tls_client_auth_san_dns, tls_client_auth_san_uri, tls_client_auth_san_ip, tls_client_auth_san_email';

describe('tessera client --auth-method tls_client_auth', () => {
  it('create with each --tls-* option: the one value, no secret; show prints it', async () => {
    for (const [flag, field, value] of [
      ['--tls-subject-dn', 'tls_client_auth_subject_dn', 'CN=worker,O=Example,C=US'],
      ['--tls-san-dns', 'tls_client_auth_san_dns', 'worker.example.com'],
      ['--tls-san-uri', 'tls_client_auth_san_uri', SPIFFE],
      ['--tls-san-ip', 'tls_client_auth_san_ip', '2001:db8::10'],
      ['--tls-san-email', 'tls_client_auth_san_email', 'worker@example.com'],
    ] as const) {
      const id = `tls-${field.slice('tls_client_auth_'.length).replace('_', '-')}`;
      const created = await ws.ok(
        ...['client', 'create', '--name', id, '--id', id, '--grant', API],
        ...['--auth-method', 'tls_client_auth', flag, value, '--json'],
      );
      expect(created.json).toMatchObject({
        client_id: id,
        token_endpoint_auth_method: 'tls_client_auth',
        [field]: value,
        tls_client_certificate_bound_access_tokens: false,
      });
      expect(created.json).not.toHaveProperty('client_secret');
      const shown = (await ws.ok('client', 'show', id)).stdout;
      expect(shown).toMatch(new RegExp(`^ *tls_${field.slice('tls_client_auth_'.length)} +${value}$`, 'm'));
      expect(shown).toMatch(/^ *auth_method +tls_client_auth$/m);
      expect(shown).toMatch(/^ *cert_bound +no$/m);
      expect(shown).not.toMatch(/client_secret/);
    }
    // Created in text mode: no secret to show, no curl line.
    const text = await ws.ok(
      ...['client', 'create', '--name', 'text', '--id', 'tls-text'],
      ...['--auth-method', 'tls_client_auth', '--tls-san-dns', 'text.example.com'],
    );
    expect(text.stdout).toMatch(/^ *tls_san_dns +text\.example\.com$/m);
    expect(text.stdout).not.toContain('client_secret');
  }, 60_000);

  it('update replaces the value, "" removes one, --cert-bound-tokens and --no-cert-bound-tokens; a switch away clears it', async () => {
    const replaced = await ws.ok('client', 'update', 'tls-subject-dn', '--tls-san-uri', SPIFFE, '--json');
    expect(replaced.json).toMatchObject({
      tls_client_auth_subject_dn: null,
      tls_client_auth_san_uri: SPIFFE,
    });
    const bound = await ws.ok('client', 'update', 'tls-subject-dn', '--cert-bound-tokens', '--json');
    expect(bound.json).toMatchObject({ tls_client_certificate_bound_access_tokens: true });
    expect((await ws.ok('client', 'show', 'tls-subject-dn')).stdout).toMatch(/^ *cert_bound +yes$/m);
    // Removing its only value leaves none: refused at the method.
    expect(await refused('client', 'update', 'tls-subject-dn', '--tls-san-uri', '')).toEqual({
      error: 'invalid_field',
      message: NEEDS_ONE,
    });
    // "" of another kind changes nothing.
    const same = await ws.ok('client', 'update', 'tls-subject-dn', '--tls-san-ip', '', '--json');
    expect(same.json).toMatchObject({ tls_client_auth_san_uri: SPIFFE });
    const unbound = await ws.ok('client', 'update', 'tls-subject-dn', '--no-cert-bound-tokens', '--json');
    expect(unbound.json).toMatchObject({ tls_client_certificate_bound_access_tokens: false });
    const away = await ws.ok(
      ...['client', 'update', 'tls-subject-dn', '--auth-method', 'client_secret_basic', '--json'],
    );
    expect(away.json).toMatchObject({
      token_endpoint_auth_method: 'client_secret_basic',
      tls_client_auth_san_uri: null,
    });
    // And back, with a value; then the secret it was given in between is gone.
    await ws.ok('client', 'rotate-secret', 'tls-subject-dn');
    const back = await ws.ok(
      ...['client', 'update', 'tls-subject-dn', '--auth-method', 'tls_client_auth'],
      ...['--tls-subject-dn', 'CN=worker,O=Example,C=US', '--json'],
    );
    expect(back.json).toMatchObject({ tls_client_auth_subject_dn: 'CN=worker,O=Example,C=US' });
    expect((await ws.ok('client', 'secrets', 'list', 'tls-subject-dn', '--json')).json).toEqual([]);

    const trail = await ws.ok('audit', '--type', 'client.updated', '--client', 'tls-subject-dn', '--json');
    expect((trail.json as { changes: unknown }[]).map((e) => e.changes)).toEqual([
      {
        token_endpoint_auth_method: { from: 'client_secret_basic', to: 'tls_client_auth' },
        tls_client_auth_subject_dn: { from: null, to: 'CN=worker,O=Example,C=US' },
      },
      {
        token_endpoint_auth_method: { from: 'tls_client_auth', to: 'client_secret_basic' },
        tls_client_auth_san_uri: { from: SPIFFE, to: null },
      },
      { tls_client_certificate_bound_access_tokens: { from: true, to: false } },
      { tls_client_certificate_bound_access_tokens: { from: false, to: true } },
      {
        tls_client_auth_subject_dn: { from: 'CN=worker,O=Example,C=US', to: null },
        tls_client_auth_san_uri: { from: null, to: SPIFFE },
      },
    ]);
  }, 60_000);

  it('refuses none, two, a bad value, a value on another method: exit 2 with the message', async () => {
    const tls = ['client', 'create', '--name', 'bad', '--auth-method', 'tls_client_auth'];
    expect(await refused(...tls)).toEqual({ error: 'invalid_field', message: NEEDS_ONE });
    expect(
      await refused(...tls, '--tls-san-ip', '192.0.2.1', '--tls-san-dns', 'a.example.com'),
    ).toMatchObject({
      message:
        'a tls_client_auth client has one of tls_client_auth_subject_dn, tls_client_auth_san_dns, tls_client_auth_san_uri, tls_client_auth_san_ip, tls_client_auth_san_email: tls_client_auth_san_ip is given already',
    });
    expect(await refused(...tls, '--tls-subject-dn', 'CN=a,,O=b')).toMatchObject({
      message: expect.stringMatching(/^tls_client_auth_subject_dn is not an RFC 4514 distinguished name/),
    });
    expect(await refused(...tls, '--tls-san-uri', 'ns/billing')).toEqual({
      error: 'invalid_field',
      message:
        'tls_client_auth_san_uri must be an absolute URI, with a scheme (spiffe://prod.example.com/ns/billing/sa/worker, https://...), without spaces',
    });
    expect(await refused(...tls, '--tls-san-ip', '300.1.1.1')).toEqual({
      error: 'invalid_field',
      message: 'tls_client_auth_san_ip must be an IPv4 or IPv6 address (192.0.2.10, 2001:db8::10)',
    });
    expect(await refused('client', 'create', '--name', 'bad', '--tls-san-dns', 'a.example.com')).toEqual({
      error: 'invalid_field',
      message: 'tls_client_auth_* fields are for tls_client_auth; this client uses client_secret_basic',
    });
    expect(
      await refused(
        'client',
        'update',
        'tls-san-dns',
        '--auth-method',
        'client_secret_post',
        '--tls-san-dns',
        'b.example.com',
      ),
    ).toEqual({
      error: 'invalid_field',
      message: 'tls_client_auth_* fields are for tls_client_auth; this client uses client_secret_post',
    });
    expect((await ws.ok('client', 'list', '--search', 'bad', '--json')).json).toEqual([]);
  }, 60_000);
});

describe('tessera client --auth-method self_signed_tls_client_auth', () => {
  it('create with its certificates in --jwks; a key without x5c is refused', async () => {
    const cert = await selfSigned({ subject: 'CN=self' });
    const jwks = ws.write('self.json', JSON.stringify({ keys: [{ ...cert.jwk, kid: 'self-1' }] }));
    const created = await ws.ok(
      ...['client', 'create', '--name', 'self', '--id', 'self-signed', '--grant', API],
      ...['--auth-method', 'self_signed_tls_client_auth', '--jwks', jwks, '--cert-bound-tokens', '--json'],
    );
    expect(created.json).toMatchObject({
      token_endpoint_auth_method: 'self_signed_tls_client_auth',
      jwks: { keys: [{ kid: 'self-1', x5c: cert.jwk.x5c }] },
      tls_client_certificate_bound_access_tokens: true,
    });
    expect(created.json).not.toHaveProperty('client_secret');
    const shown = (await ws.ok('client', 'show', 'self-signed')).stdout;
    expect(shown).toMatch(/^ *jwks +self-1$/m);
    expect(shown).toMatch(/^ *cert_bound +yes$/m);
    const { x5c: _, ...bare } = cert.jwk;
    const without = ws.write('bare.json', JSON.stringify({ keys: [bare] }));
    expect(
      await refused(
        'client',
        'create',
        '--name',
        'bare',
        '--auth-method',
        'self_signed_tls_client_auth',
        '--jwks',
        without,
      ),
    ).toEqual({
      error: 'invalid_field',
      message:
        "jwks key 1 has no x5c: a self_signed_tls_client_auth client registers each certificate in its key's x5c (RFC 7517 section 4.7)",
    });
  }, 60_000);

  it('--cert-bound-tokens on a client of a secret method; false when left out', async () => {
    const created = await ws.ok(
      'client',
      'create',
      '--name',
      'bound',
      '--id',
      'bound-svc',
      '--cert-bound-tokens',
      '--json',
    );
    expect(created.json).toMatchObject({ tls_client_certificate_bound_access_tokens: true });
    expect(created.json).toHaveProperty('client_secret');
    const plain = await ws.ok('client', 'create', '--name', 'plain', '--id', 'plain-svc', '--json');
    expect(plain.json).toMatchObject({ tls_client_certificate_bound_access_tokens: false });
  }, 60_000);
});

describe('tessera apply and export: RFC 8705 client fields', () => {
  it('apply creates them; export writes a tls_client_auth_* field only when set and the binding only when true; export | apply plans no change', async () => {
    const cert = await selfSigned({ subject: 'CN=applied' });
    const file = ws.write(
      'mtls.yaml',
      [
        'clients:',
        '  - client_id: applied-tls',
        '    name: Applied TLS',
        '    token_endpoint_auth_method: tls_client_auth',
        '    tls_client_auth_subject_dn: CN=worker,O=Example,C=US',
        '    tls_client_certificate_bound_access_tokens: true',
        '    grants:',
        `      - audience: ${API}`,
        '  - client_id: applied-self',
        '    name: Applied self-signed',
        '    token_endpoint_auth_method: self_signed_tls_client_auth',
        `    jwks: ${JSON.stringify({ keys: [cert.jwk] })}`,
        '  - client_id: applied-bound',
        '    name: Applied bound',
        '    tls_client_certificate_bound_access_tokens: true',
        '',
      ].join('\n'),
    );
    const applied = await ws.ok('apply', '-f', file);
    expect(applied.stdout).toContain('Applied.');
    // Only the client of a secret method gets a secret.
    expect(applied.stdout).toContain('applied-bound');
    expect(applied.stdout).not.toMatch(/applied-tls +\S{20,}/);
    expect((await ws.ok('client', 'show', 'applied-tls', '--json')).json).toMatchObject({
      token_endpoint_auth_method: 'tls_client_auth',
      tls_client_auth_subject_dn: 'CN=worker,O=Example,C=US',
      tls_client_certificate_bound_access_tokens: true,
    });
    expect((await ws.ok('client', 'secrets', 'list', 'applied-tls', '--json')).json).toEqual([]);

    const exported = await ws.ok('export', '--format', 'json');
    const entries = (exported.json as { clients: Record<string, unknown>[] }).clients;
    const entry = (id: string) => entries.find((c) => c.client_id === id)!;
    expect(entry('applied-tls')).toEqual({
      client_id: 'applied-tls',
      name: 'Applied TLS',
      enabled: true,
      token_endpoint_auth_method: 'tls_client_auth',
      tls_client_auth_subject_dn: 'CN=worker,O=Example,C=US',
      tls_client_certificate_bound_access_tokens: true,
      grants: [{ audience: API }],
    });
    expect(entry('applied-self')).toEqual({
      client_id: 'applied-self',
      name: 'Applied self-signed',
      enabled: true,
      token_endpoint_auth_method: 'self_signed_tls_client_auth',
      jwks: { keys: [cert.jwk] },
      grants: [],
    });
    expect(entry('applied-bound')).toMatchObject({ tls_client_certificate_bound_access_tokens: true });
    expect(entry('applied-bound')).not.toHaveProperty('token_endpoint_auth_method');
    // Left out where not set: every other client.
    for (const c of entries.filter(
      (c) => !['applied-tls', 'applied-bound', 'self-signed', 'bound-svc'].includes(c.client_id as string),
    ))
      expect(c).not.toHaveProperty('tls_client_certificate_bound_access_tokens');
    expect(entry('tls-san-ip')).toMatchObject({ tls_client_auth_san_ip: '2001:db8::10' });
    expect(Object.keys(entry('tls-san-ip')).filter((k) => k.startsWith('tls_'))).toEqual([
      'tls_client_auth_san_ip',
    ]);
    const again = await ws.withInput(exported.stdout, 'apply', '-f', '-', '--dry-run');
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('No changes.');
    const yaml = await ws.ok('export');
    const againYaml = await ws.withInput(yaml.stdout, 'apply', '-f', '-', '--dry-run');
    expect(againYaml.stdout).toContain('No changes.');
  }, 60_000);

  it('a file that changes the kind replaces the value; one that leaves the binding out unbinds; each line of the plan', async () => {
    const file = ws.write(
      'mtls-2.yaml',
      [
        'clients:',
        '  - client_id: applied-tls',
        '    name: Applied TLS',
        '    token_endpoint_auth_method: tls_client_auth',
        `    tls_client_auth_san_uri: ${SPIFFE}`,
        '    grants:',
        `      - audience: ${API}`,
        '',
      ].join('\n'),
    );
    const plan = await ws.ok('apply', '-f', file);
    expect(plan.stdout).toContain(
      '~ client applied-tls: tls_client_auth_subject_dn "CN=worker,O=Example,C=US" → null',
    );
    expect(plan.stdout).toContain(`tls_client_auth_san_uri null → "${SPIFFE}"`);
    expect(plan.stdout).toContain('tls_client_certificate_bound_access_tokens true → false');
    expect((await ws.ok('client', 'show', 'applied-tls', '--json')).json).toMatchObject({
      tls_client_auth_subject_dn: null,
      tls_client_auth_san_uri: SPIFFE,
      tls_client_certificate_bound_access_tokens: false,
    });
    // To a secret method: the value goes.
    const secret = ws.write(
      'mtls-3.yaml',
      [
        'clients:',
        '  - client_id: applied-tls',
        '    name: Applied TLS',
        '    grants:',
        `      - audience: ${API}`,
        '',
      ].join('\n'),
    );
    const back = await ws.ok('apply', '-f', secret);
    // (The default method, which the file leaves out, reads as null.)
    expect(back.stdout).toContain(
      '~ client applied-tls: token_endpoint_auth_method "tls_client_auth" → null',
    );
    expect(back.stdout).toContain(`~ client applied-tls: tls_client_auth_san_uri "${SPIFFE}" → null`);
    expect((await ws.ok('client', 'show', 'applied-tls', '--json')).json).toMatchObject({
      token_endpoint_auth_method: 'client_secret_basic',
      tls_client_auth_san_uri: null,
    });
  }, 60_000);

  it('a file with two values, a bad value, a value on another method or a key without x5c is refused whole, each at its place', async () => {
    const cert = await selfSigned({ subject: 'CN=refused' });
    const { x5c: _, ...bare } = cert.jwk;
    const file = ws.write(
      'bad.yaml',
      [
        'clients:',
        '  - client_id: two-values',
        '    name: Two',
        '    token_endpoint_auth_method: tls_client_auth',
        '    tls_client_auth_san_dns: a.example.com',
        '    tls_client_auth_san_ip: 192.0.2.1',
        '  - client_id: none-given',
        '    name: None',
        '    token_endpoint_auth_method: tls_client_auth',
        '  - client_id: bad-ip',
        '    name: Bad IP',
        '    token_endpoint_auth_method: tls_client_auth',
        '    tls_client_auth_san_ip: 192.0.2',
        '  - client_id: other-method',
        '    name: Other',
        '    tls_client_auth_san_uri: spiffe://x/y',
        '  - client_id: no-x5c',
        '    name: No x5c',
        '    token_endpoint_auth_method: self_signed_tls_client_auth',
        `    jwks: ${JSON.stringify({ keys: [bare] })}`,
        '  - client_id: wrong-type',
        '    name: Wrong type',
        '    tls_client_certificate_bound_access_tokens: "yes"',
        '',
      ].join('\n'),
    );
    const refusedFile = await ws.run('apply', '-f', file, '--json');
    expect(refusedFile.code).toBe(2);
    const { errors } = JSON.parse(refusedFile.stderr) as {
      errors: { pointer: string; line?: number; message: string }[];
    };
    expect(errors.map((e) => [e.pointer, e.line, e.message])).toEqual([
      [
        '/clients/0/tls_client_auth_san_ip',
        6,
        'a tls_client_auth client has one of tls_client_auth_subject_dn, tls_client_auth_san_dns, tls_client_auth_san_uri, tls_client_auth_san_ip, tls_client_auth_san_email: tls_client_auth_san_dns is given already',
      ],
      [
        '/clients/1/token_endpoint_auth_method',
        9,
        'tls_client_auth needs one of tls_client_auth_subject_dn, tls_client_auth_san_dns, tls_client_auth_san_uri, tls_client_auth_san_ip, tls_client_auth_san_email',
      ],
      [
        '/clients/2/tls_client_auth_san_ip',
        13,
        'tls_client_auth_san_ip must be an IPv4 or IPv6 address (192.0.2.10, 2001:db8::10)',
      ],
      [
        '/clients/3/tls_client_auth_san_uri',
        16,
        'tls_client_auth_* fields are for tls_client_auth; this client uses client_secret_basic',
      ],
      [
        '/clients/4/jwks/keys/0/x5c',
        20,
        "jwks key 1 has no x5c: a self_signed_tls_client_auth client registers each certificate in its key's x5c (RFC 7517 section 4.7)",
      ],
      ['/clients/5/tls_client_certificate_bound_access_tokens', 23, 'must be boolean'],
    ]);
    expect((await ws.ok('client', 'list', '--search', 'two-values', '--json')).json).toEqual([]);
  }, 60_000);

  it('export --schema describes the fields', async () => {
    const schema = (await ws.ok('export', '--schema')).json as {
      $defs: { client: { properties: Record<string, { description?: string }> } };
    };
    const properties = schema.$defs.client.properties;
    for (const field of [
      'tls_client_auth_subject_dn',
      'tls_client_auth_san_dns',
      'tls_client_auth_san_uri',
      'tls_client_auth_san_ip',
      'tls_client_auth_san_email',
    ])
      expect(properties[field]).toEqual({
        anyOf: [
          { type: 'string', description: expect.stringContaining('RFC 8705 section 2.1.2') },
          { type: 'null' },
        ],
      });
    expect(properties.tls_client_certificate_bound_access_tokens).toEqual({
      type: 'boolean',
      default: false,
      description:
        'its tokens are bound to its TLS client certificate, and none is issued without one (RFC 8705 section 3.4)',
    });
  }, 60_000);
});
