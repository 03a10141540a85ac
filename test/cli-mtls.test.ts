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
