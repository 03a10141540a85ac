/**
 * RFC 8705's client registration in the management layer (docs/mtls.md): tls_client_auth's one tls_client_auth_*
 * value, self_signed_tls_client_auth's certificates in the x5c of its jwks, tls_client_certificate_bound_access_tokens;
 * every refusal with its field (the admin API's JSON pointer), the switches of method, and the audit trail.
 */
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { EVERY_SCOPE } from '../../src/management/context.js';
import {
  audit,
  clients,
  federation,
  ManagementError,
  secrets,
  views,
  type ManagementContext,
} from '../../src/management/index.js';
import { openSqliteStore } from '../../src/store/sqlite.js';
import { selfSigned } from '../helpers/pki.js';
import { tempDir } from '../helpers/server.js';

let ctx: ManagementContext;
beforeEach(async () => {
  const dataDir = tempDir();
  const store = openSqliteStore(path.join(dataDir, 'tessera.db'));
  await store.migrate();
  const config = loadConfig({
    TESSERA_DATA_DIR: dataDir,
    TESSERA_MASTER_KEY: randomBytes(32).toString('base64url'),
  });
  ctx = { store, config, actor: 'cli:test', holds: EVERY_SCOPE };
});
afterEach(async () => {
  await ctx.store.close();
});

/** The failure of `run` as { code, field, message }. */
async function refusal(run: () => Promise<unknown>) {
  try {
    await run();
  } catch (error) {
    expect(error).toBeInstanceOf(ManagementError);
    const e = error as ManagementError;
    return { code: e.code, field: e.field, message: e.message };
  }
  throw new Error('expected a refusal');
}

const NEEDS_ONE =
  'tls_client_auth needs one of tls_client_auth_subject_dn, tls_client_auth_san_dns, tls_client_auth_san_uri, tls_client_auth_san_ip, tls_client_auth_san_email';
const SPIFFE = 'spiffe://prod.example.com/ns/billing/sa/worker';

type Jwk = Awaited<ReturnType<typeof selfSigned>>['jwk'];
let first: Jwk;
let second: Jwk;
beforeAll(async () => {
  first = (await selfSigned({ subject: 'CN=first' })).jwk;
  second = (await selfSigned({ subject: 'CN=second' })).jwk;
});

const tlsClient = (id: string, tlsIdentity: clients.ClientFields['tlsIdentity']) =>
  clients.createClient(ctx, { name: id, id, authMethod: 'tls_client_auth', tlsIdentity });

describe('tls_client_auth', () => {
  it('a client with one tls_client_auth_* value of each kind: stored trimmed as given, no secret, shown in its view', async () => {
    const values = {
      subject_dn: '  CN=worker, O=Example,C=US ',
      san_dns: 'Worker.Example.COM',
      san_uri: SPIFFE,
      san_ip: '2001:DB8:0:0:0:0:0:10',
      san_email: 'Worker@Example.com',
    } as const;
    for (const [kind, value] of Object.entries(values)) {
      const { client, secret } = await tlsClient(`c-${kind}`, { [kind]: value });
      expect(secret).toBeUndefined();
      expect(client).toMatchObject({
        authMethod: 'tls_client_auth',
        tlsClientAuth: { kind, value: value.trim() },
        certificateBoundAccessTokens: false,
        secrets: [],
      });
      const view = views.clientJson(client);
      expect(view).toMatchObject({
        token_endpoint_auth_method: 'tls_client_auth',
        tls_client_auth_subject_dn: kind === 'subject_dn' ? 'CN=worker, O=Example,C=US' : null,
        tls_client_auth_san_dns: kind === 'san_dns' ? value : null,
        tls_client_auth_san_uri: kind === 'san_uri' ? value : null,
        tls_client_auth_san_ip: kind === 'san_ip' ? value : null,
        tls_client_auth_san_email: kind === 'san_email' ? value : null,
        tls_client_certificate_bound_access_tokens: false,
      });
    }
    // A wildcard dNSName, an IPv4 address, a URI of any scheme.
    for (const [kind, value] of [
      ['san_dns', '*.workers.example.com'],
      ['san_ip', '192.0.2.10'],
      ['san_uri', 'https://workers.example.com/billing'],
      ['san_uri', 'urn:example:worker:1'],
    ] as const)
      expect((await tlsClient(`c-${value.length}-${kind}`, { [kind]: value })).client.tlsClientAuth).toEqual({
        kind,
        value,
      });
    // client.created records the one value and the binding.
    const [event] = await audit.queryAudit(ctx, { types: ['client.created'], clientId: 'c-san_uri' });
    expect(event!.changes).toMatchObject({
      token_endpoint_auth_method: 'tls_client_auth',
      tls_client_auth_san_uri: SPIFFE,
      tls_client_certificate_bound_access_tokens: false,
    });
    expect(Object.keys(event!.changes as object).filter((k) => k.startsWith('tls_client_auth_'))).toEqual([
      'tls_client_auth_san_uri',
    ]);
  });

  it('refuses none, two, and a value that is not of its kind, each at its field', async () => {
    expect(await refusal(() => tlsClient('none', undefined))).toEqual({
      code: 'invalid_field',
      field: 'token_endpoint_auth_method',
      message: NEEDS_ONE,
    });
    // Nulls are no value.
    expect(await refusal(() => tlsClient('nulls', { san_dns: null }))).toMatchObject({
      field: 'token_endpoint_auth_method',
      message: NEEDS_ONE,
    });
    // Two: the second one given is at fault, in the order given.
    expect(await refusal(() => tlsClient('two', { san_uri: SPIFFE, subject_dn: 'CN=worker' }))).toEqual({
      code: 'invalid_field',
      field: 'tls_client_auth_subject_dn',
      message:
        'a tls_client_auth client has one of tls_client_auth_subject_dn, tls_client_auth_san_dns, tls_client_auth_san_uri, tls_client_auth_san_ip, tls_client_auth_san_email: tls_client_auth_san_uri is given already',
    });
    expect(
      await refusal(() =>
        tlsClient('three', { san_ip: '192.0.2.1', san_dns: 'a.example', san_email: 'a@b.c' }),
      ),
    ).toMatchObject({ field: 'tls_client_auth_san_dns' });
    expect(await refusal(() => tlsClient('dn1', { subject_dn: 'CN=worker,,O=x' }))).toMatchObject({
      code: 'invalid_field',
      field: 'tls_client_auth_subject_dn',
      message: expect.stringMatching(/^tls_client_auth_subject_dn is not an RFC 4514 distinguished name/),
    });
    expect(await refusal(() => tlsClient('dn2', { subject_dn: 'worker' }))).toMatchObject({
      field: 'tls_client_auth_subject_dn',
    });
    const URI =
      'tls_client_auth_san_uri must be an absolute URI, with a scheme (spiffe://prod.example.com/ns/billing/sa/worker, https://...), without spaces';
    for (const uri of ['/ns/billing/sa/worker', 'prod.example.com/worker', 'spiffe://a b/c', '://x'])
      expect(await refusal(() => tlsClient('uri', { san_uri: uri }))).toEqual({
        code: 'invalid_field',
        field: 'tls_client_auth_san_uri',
        message: URI,
      });
    expect(await refusal(() => tlsClient('uri', { san_uri: `spiffe://x/${'a'.repeat(2048)}` }))).toEqual({
      code: 'invalid_field',
      field: 'tls_client_auth_san_uri',
      message: 'tls_client_auth_san_uri is longer than 2048 characters',
    });
    for (const ip of ['192.0.2', '192.0.2.256', '01.2.3.4', '2001:db8::g', 'fe80::1%eth0', 'localhost'])
      expect(await refusal(() => tlsClient('ip1', { san_ip: ip }))).toEqual({
        code: 'invalid_field',
        field: 'tls_client_auth_san_ip',
        message: 'tls_client_auth_san_ip must be an IPv4 or IPv6 address (192.0.2.10, 2001:db8::10)',
      });
    for (const dns of [
      '-a.example.com',
      'a..example.com',
      'a_b.example.com',
      '*.',
      'a.*.example.com',
      'x'.repeat(64),
    ])
      expect(await refusal(() => tlsClient('dns', { san_dns: dns }))).toMatchObject({
        code: 'invalid_field',
        field: 'tls_client_auth_san_dns',
        message: expect.stringMatching(/^tls_client_auth_san_dns must be a DNS name/),
      });
    expect(await refusal(() => tlsClient('dns', { san_dns: `${'a.'.repeat(127)}ab` }))).toEqual({
      code: 'invalid_field',
      field: 'tls_client_auth_san_dns',
      message: 'tls_client_auth_san_dns is 256 characters; a DNS name has at most 253',
    });
    for (const email of [
      'worker',
      '@example.com',
      'worker@',
      'a b@example.com',
      '"a"@example.com',
      'a@-x.com',
    ])
      expect(await refusal(() => tlsClient('email', { san_email: email }))).toEqual({
        code: 'invalid_field',
        field: 'tls_client_auth_san_email',
        message:
          'tls_client_auth_san_email must be an email address (local@domain, at most 254 characters), as an rfc822Name SAN holds it',
      });
    expect(await refusal(() => tlsClient('empty', { san_dns: '  ' }))).toEqual({
      code: 'invalid_field',
      field: 'tls_client_auth_san_dns',
      message: 'tls_client_auth_san_dns must not be empty',
    });
    // No keys: they are for private_key_jwt and self_signed_tls_client_auth.
    expect(
      await refusal(() =>
        clients.createClient(ctx, {
          name: 'key',
          authMethod: 'tls_client_auth',
          tlsIdentity: { san_dns: 'a.example.com' },
          jwks: { keys: [first] },
        }),
      ),
    ).toEqual({
      code: 'invalid_field',
      field: 'jwks',
      message:
        'jwks and jwks_uri are for private_key_jwt and self_signed_tls_client_auth; this client uses tls_client_auth',
    });
    expect(await ctx.store.countClients()).toBe(0);
  });

  it('a tls_client_auth_* value on a client of another method is refused at its field', async () => {
    for (const authMethod of [
      undefined,
      'client_secret_post',
      'private_key_jwt',
      'self_signed_tls_client_auth',
    ] as const)
      expect(
        await refusal(() =>
          clients.createClient(ctx, {
            name: 'x',
            authMethod,
            tlsIdentity: { san_ip: '192.0.2.1' },
            ...(authMethod === 'self_signed_tls_client_auth' ? { jwks: { keys: [first] } } : {}),
          }),
        ),
      ).toEqual({
        code: 'invalid_field',
        field: 'tls_client_auth_san_ip',
        message: `tls_client_auth_* fields are for tls_client_auth; this client uses ${authMethod ?? 'client_secret_basic'}`,
      });
    await clients.createClient(ctx, { name: 'svc', id: 'svc' });
    expect(
      await refusal(() => clients.updateClient(ctx, 'svc', { tlsIdentity: { subject_dn: 'CN=svc' } })),
    ).toEqual({
      code: 'invalid_field',
      field: 'tls_client_auth_subject_dn',
      message: 'tls_client_auth_* fields are for tls_client_auth; this client uses client_secret_basic',
    });
    // With a switch to another method too.
    await tlsClient('wkr', { subject_dn: 'CN=wkr' });
    expect(
      await refusal(() =>
        clients.updateClient(ctx, 'wkr', {
          authMethod: 'client_secret_basic',
          tlsIdentity: { san_dns: 'w.example' },
        }),
      ),
    ).toMatchObject({ field: 'tls_client_auth_san_dns' });
    expect((await clients.getClient(ctx, 'wkr')).tlsClientAuth).toEqual({
      kind: 'subject_dn',
      value: 'CN=wkr',
    });
  });

  it('a change: one value replaces the one it has; a null of its kind clears it (refused: it needs one), of another kind changes nothing', async () => {
    await tlsClient('wkr', { subject_dn: 'CN=wkr' });
    const replaced = await clients.updateClient(ctx, 'wkr', { tlsIdentity: { san_uri: SPIFFE } });
    expect(replaced.tlsClientAuth).toEqual({ kind: 'san_uri', value: SPIFFE });
    // Null for the kind it has, with another given: the other is its value.
    expect(
      (await clients.updateClient(ctx, 'wkr', { tlsIdentity: { san_uri: null, san_dns: 'w.example.com' } }))
        .tlsClientAuth,
    ).toEqual({ kind: 'san_dns', value: 'w.example.com' });
    expect(await refusal(() => clients.updateClient(ctx, 'wkr', { tlsIdentity: { san_dns: null } }))).toEqual(
      {
        code: 'invalid_field',
        field: 'token_endpoint_auth_method',
        message: NEEDS_ONE,
      },
    );
    const before = await clients.getClient(ctx, 'wkr');
    expect(
      await clients.updateClient(ctx, 'wkr', { tlsIdentity: { subject_dn: null, san_ip: null } }),
    ).toEqual(before);
    const updates = await audit.queryAudit(ctx, { types: ['client.updated'], clientId: 'wkr' });
    expect(updates.map((e) => e.changes)).toEqual([
      {
        tls_client_auth_san_dns: { from: null, to: 'w.example.com' },
        tls_client_auth_san_uri: { from: SPIFFE, to: null },
      },
      {
        tls_client_auth_subject_dn: { from: 'CN=wkr', to: null },
        tls_client_auth_san_uri: { from: null, to: SPIFFE },
      },
    ]);
  });

  it('a switch to tls_client_auth deletes the secrets and keys; a switch away clears its value', async () => {
    await clients.createClient(ctx, { name: 'svc', id: 'svc' });
    await secrets.addSecret(ctx, 'svc');
    expect((await clients.getClient(ctx, 'svc')).secrets).toHaveLength(2);
    expect(
      await refusal(() => clients.updateClient(ctx, 'svc', { authMethod: 'tls_client_auth' })),
    ).toMatchObject({ field: 'token_endpoint_auth_method', message: NEEDS_ONE });
    expect((await clients.getClient(ctx, 'svc')).secrets).toHaveLength(2);
    const switched = await clients.updateClient(ctx, 'svc', {
      authMethod: 'tls_client_auth',
      tlsIdentity: { san_dns: 'svc.example.com' },
    });
    expect(switched).toMatchObject({
      authMethod: 'tls_client_auth',
      tlsClientAuth: { kind: 'san_dns', value: 'svc.example.com' },
      secrets: [],
    });
    // It has no secret to add or rotate.
    expect(await refusal(() => clients.rotateSecret(ctx, 'svc'))).toEqual({
      code: 'client_uses_keys',
      field: undefined,
      message:
        'client svc authenticates with tls_client_auth: it has no secrets (change token_endpoint_auth_method first)',
    });
    // Nor federated credentials.
    expect(
      await refusal(() =>
        federation.addFederatedCredential(ctx, 'svc', {
          name: 'gh',
          issuer: 'https://token.actions.githubusercontent.com',
          subject: 'repo:acme/app:ref:refs/heads/main',
        }),
      ),
    ).toMatchObject({ code: 'client_uses_keys' });
    // From private_key_jwt with keys: the keys go with the switch.
    await clients.createClient(ctx, {
      name: 'key',
      id: 'key',
      authMethod: 'private_key_jwt',
      jwks: { keys: [first] },
    });
    expect(
      await clients.updateClient(ctx, 'key', {
        authMethod: 'tls_client_auth',
        tlsIdentity: { subject_dn: 'CN=k' },
      }),
    ).toMatchObject({ jwks: null, jwksUri: null, tlsClientAuth: { kind: 'subject_dn', value: 'CN=k' } });
    // Away from tls_client_auth: its value goes (and, to a secret method, it has no secret until one is added).
    const away = await clients.updateClient(ctx, 'svc', { authMethod: 'client_secret_basic' });
    expect(away).toMatchObject({ authMethod: 'client_secret_basic', tlsClientAuth: null, secrets: [] });
    const [event] = await audit.queryAudit(ctx, { types: ['client.updated'], clientId: 'svc' });
    expect(event!.changes).toEqual({
      token_endpoint_auth_method: { from: 'tls_client_auth', to: 'client_secret_basic' },
      tls_client_auth_san_dns: { from: 'svc.example.com', to: null },
    });
    expect(
      await clients.updateClient(ctx, 'key', { authMethod: 'private_key_jwt', jwks: { keys: [first] } }),
    ).toMatchObject({ authMethod: 'private_key_jwt', tlsClientAuth: null, jwks: { keys: [first] } });
  });
});

describe('self_signed_tls_client_auth', () => {
  const selfSignedClient = (id: string, extra: Partial<clients.ClientInput> = {}) =>
    clients.createClient(ctx, { name: id, id, authMethod: 'self_signed_tls_client_auth', ...extra });

  it('registers its certificates inline in jwks, each key with x5c; no secret', async () => {
    const { client, secret } = await selfSignedClient('ss1', { jwks: { keys: [first, second] } });
    expect(secret).toBeUndefined();
    expect(client).toMatchObject({
      authMethod: 'self_signed_tls_client_auth',
      jwks: { keys: [first, second] },
      tlsClientAuth: null,
      secrets: [],
    });
  });

  it('takes its certificates at a jwks_uri instead (checked when they are fetched)', async () => {
    const { client } = await selfSignedClient('published', { jwksUri: 'https://keys.example.com/jwks.json' });
    expect(client).toMatchObject({
      authMethod: 'self_signed_tls_client_auth',
      jwks: null,
      jwksUri: 'https://keys.example.com/jwks.json',
      secrets: [],
    });
  });

  it('refuses both jwks and jwks_uri, neither, a key without x5c and an x5c that is not the key’s, each at its place', async () => {
    expect(
      await refusal(() =>
        selfSignedClient('both', { jwks: { keys: [first] }, jwksUri: 'https://keys.example.com/jwks.json' }),
      ),
    ).toEqual({
      code: 'invalid_field',
      field: 'jwks_uri',
      message: 'give jwks or jwks_uri, not both',
    });
    expect(await refusal(() => selfSignedClient('non'))).toEqual({
      code: 'invalid_field',
      field: 'jwks',
      message: "self_signed_tls_client_auth needs jwks or jwks_uri: its certificates, each in its key's x5c",
    });
    const { x5c: _, ...bare } = second;
    expect(await refusal(() => selfSignedClient('bare', { jwks: { keys: [first, bare] } }))).toEqual({
      code: 'invalid_field',
      field: 'jwks/keys/1/x5c',
      message:
        "jwks key 2 has no x5c: a self_signed_tls_client_auth client registers each certificate in its key's x5c (RFC 7517 section 4.7)",
    });
    expect(
      await refusal(() => selfSignedClient('mis', { jwks: { keys: [{ ...first, x5c: second.x5c }] } })),
    ).toEqual({
      code: 'invalid_field',
      field: 'jwks/keys/0/x5c',
      message:
        'jwks key 1: x5c[0] is the certificate of another key (its "x" is not the key\'s): the first certificate must hold the key the JWK describes (RFC 7517 section 4.7)',
    });
    const url = first.x5c[0]!.replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
    expect(url).not.toBe(first.x5c[0]);
    expect(
      await refusal(() => selfSignedClient('b64', { jwks: { keys: [{ ...first, x5c: [url] }] } })),
    ).toEqual({
      code: 'invalid_field',
      field: 'jwks/keys/0/x5c',
      message:
        "jwks key 1: x5c[0] must be a certificate's DER in standard base64 (RFC 7517 section 4.7: not base64url, no line breaks)",
    });
    expect(
      await refusal(() => selfSignedClient('der', { jwks: { keys: [{ ...first, x5c: ['AAAA'] }] } })),
    ).toEqual({
      code: 'invalid_field',
      field: 'jwks/keys/0/x5c',
      message: 'jwks key 1: x5c[0] is not an X.509 certificate (DER)',
    });
    expect(await ctx.store.countClients()).toBe(0);
  });

  it('a switch from private_key_jwt keeps keys that carry x5c (or its jwks_uri) and refuses those that do not; private_key_jwt keeps x5c', async () => {
    const { x5c: _, ...bare } = first;
    await clients.createClient(ctx, {
      name: 'key',
      id: 'key',
      authMethod: 'private_key_jwt',
      jwks: { keys: [bare] },
    });
    expect(
      await refusal(() => clients.updateClient(ctx, 'key', { authMethod: 'self_signed_tls_client_auth' })),
    ).toMatchObject({ field: 'jwks/keys/0/x5c' });
    expect(
      await clients.updateClient(ctx, 'key', {
        authMethod: 'self_signed_tls_client_auth',
        jwks: { keys: [first] },
      }),
    ).toMatchObject({ authMethod: 'self_signed_tls_client_auth', jwks: { keys: [first] } });
    // A private_key_jwt client may register keys with x5c, whosever certificate it is, as before.
    expect(
      await clients.updateClient(ctx, 'key', {
        authMethod: 'private_key_jwt',
        jwks: { keys: [{ ...first, x5c: second.x5c }] },
      }),
    ).toMatchObject({ authMethod: 'private_key_jwt' });
    // One with jwks_uri switches keeping it (the certificates are then the set's there), or with inline keys,
    // which replace the URL.
    await clients.createClient(ctx, {
      name: 'uri',
      id: 'uri',
      authMethod: 'private_key_jwt',
      jwksUri: 'https://keys.example.com/jwks.json',
    });
    expect(
      await clients.updateClient(ctx, 'uri', { authMethod: 'self_signed_tls_client_auth' }),
    ).toMatchObject({ jwks: null, jwksUri: 'https://keys.example.com/jwks.json' });
    expect(
      await clients.updateClient(ctx, 'uri', {
        authMethod: 'self_signed_tls_client_auth',
        jwks: { keys: [second] },
      }),
    ).toMatchObject({ jwks: { keys: [second] }, jwksUri: null });
  });
});

describe('tls_client_certificate_bound_access_tokens', () => {
  it('false by default, for a client of any method, set at creation or by a change, audited both ways', async () => {
    const plain = (await clients.createClient(ctx, { name: 'plain', id: 'plain' })).client;
    expect(plain.certificateBoundAccessTokens).toBe(false);
    const bound = (
      await clients.createClient(ctx, {
        name: 'bound',
        id: 'bound',
        authMethod: 'private_key_jwt',
        certificateBoundAccessTokens: true,
      })
    ).client;
    expect(bound.certificateBoundAccessTokens).toBe(true);
    expect(views.clientJson(bound)).toMatchObject({ tls_client_certificate_bound_access_tokens: true });
    const created = await audit.queryAudit(ctx, { types: ['client.created'] });
    expect(
      created.map((e) => [
        e.target,
        (e.changes as Record<string, unknown>).tls_client_certificate_bound_access_tokens,
      ]),
    ).toEqual([
      ['bound', true],
      ['plain', false],
    ]);
    await clients.updateClient(ctx, 'plain', { certificateBoundAccessTokens: true });
    // Again: nothing changes, nothing is recorded.
    await clients.updateClient(ctx, 'plain', { certificateBoundAccessTokens: true });
    await clients.updateClient(ctx, 'bound', { certificateBoundAccessTokens: false });
    const updates = await audit.queryAudit(ctx, { types: ['client.updated'] });
    expect(updates.map((e) => [e.target, e.changes])).toEqual([
      ['bound', { tls_client_certificate_bound_access_tokens: { from: true, to: false } }],
      ['plain', { tls_client_certificate_bound_access_tokens: { from: false, to: true } }],
    ]);
    // Left out of a change, it stays.
    expect(await clients.updateClient(ctx, 'plain', { name: 'renamed' })).toMatchObject({
      certificateBoundAccessTokens: true,
    });
  });
});
