/**
 * What the token path knows of a client's certificate registration (RFC 8705; domain/known-client.ts): a
 * tls_client_auth client's value in the form it is compared in, a self_signed_tls_client_auth client's x5t#S256 of
 * each certificate, whether its tokens are bound to its certificate; none of them in a packed client.
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { canonicalDn } from '../../src/domain/mtls/dn.js';
import { ClientCache, HOT_MAX } from '../../src/read-model/client-cache.js';
import { packKnownClient, toKnownClient } from '../../src/read-model/known-client.js';
import type { Client, TlsClientAuth } from '../../src/store/types.js';
import { selfSigned } from '../helpers/pki.js';
import { stored } from '../helpers/stored-client.js';

const tlsClient = (tlsClientAuth: TlsClientAuth): Client => ({
  ...stored(1),
  secrets: [],
  authMethod: 'tls_client_auth',
  tlsClientAuth,
});

describe('toKnownClient: certificates', () => {
  it('tls: the registered value in its compared form, by kind', () => {
    const known = (kind: TlsClientAuth['kind'], value: string) =>
      toKnownClient(tlsClient({ kind, value })).tls;
    expect(known('subject_dn', 'cn=Worker,  O=Example , c=US')).toEqual({
      kind: 'subject_dn',
      value: canonicalDn('CN=worker,O=Example,C=US'),
    });
    expect(known('subject_dn', 'CN=worker,O=Example,C=US')!.value).toBe(
      '[[["2.5.4.3","s:worker"]],[["2.5.4.10","s:example"]],[["2.5.4.6","s:us"]]]',
    );
    expect(known('san_dns', 'Worker.Example.COM')).toEqual({ kind: 'san_dns', value: 'worker.example.com' });
    expect(known('san_dns', '*.Example.com')).toEqual({ kind: 'san_dns', value: '*.example.com' });
    expect(known('san_email', 'Worker@Example.COM')).toEqual({
      kind: 'san_email',
      value: 'worker@example.com',
    });
    // A URI as registered: its path and query are case-sensitive.
    expect(known('san_uri', 'spiffe://Prod.example.com/ns/Billing')).toEqual({
      kind: 'san_uri',
      value: 'spiffe://Prod.example.com/ns/Billing',
    });
    // Addresses as the token path writes a certificate's iPAddress: dotted IPv4, RFC 5952 IPv6 (an IPv4-mapped
    // address stays IPv6, in hexadecimal).
    for (const [given, value] of [
      ['192.0.2.10', '192.0.2.10'],
      ['2001:DB8:0:0:0:0:0:10', '2001:db8::10'],
      ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'],
      ['0:0:0:0:0:0:0:1', '::1'],
      ['::FFFF:192.0.2.10', '::ffff:c000:20a'],
    ])
      expect(known('san_ip', given!)).toEqual({ kind: 'san_ip', value });
  });

  it('tls is for tls_client_auth only; a value that no longer parses proves nothing and does not fail the lookup', () => {
    expect(
      toKnownClient({ ...tlsClient({ kind: 'san_dns', value: 'a.example' }), authMethod: 'private_key_jwt' })
        .tls,
    ).toBeUndefined();
    expect(toKnownClient(stored(1)).tls).toBeUndefined();
    const broken = toKnownClient(tlsClient({ kind: 'subject_dn', value: 'not a DN' }));
    expect(broken).toMatchObject({ id: stored(1).id, tls: undefined });
  });

  it('selfSigned: the x5t#S256 of the first certificate of each key of a self_signed_tls_client_auth client', async () => {
    const a = await selfSigned({ subject: 'CN=a' });
    const b = await selfSigned({ subject: 'CN=b' });
    const chained = { ...b.jwk, x5c: [...b.jwk.x5c, a.jwk.x5c[0]!] };
    const client: Client = {
      ...stored(1),
      secrets: [],
      authMethod: 'self_signed_tls_client_auth',
      jwks: { keys: [a.jwk, chained] },
    };
    const known = toKnownClient(client);
    expect(known.selfSigned).toEqual(new Set([a.x5t, b.x5t]));
    expect(a.x5t).toBe(createHash('sha256').update(a.der).digest('base64url'));
    expect(known.keys).toBeUndefined();
    expect(known.tls).toBeUndefined();
    // The same keys registered for private_key_jwt are its keys, not certificates.
    const pkjwt = toKnownClient({ ...client, authMethod: 'private_key_jwt' });
    expect(pkjwt.selfSigned).toBeUndefined();
    expect(pkjwt.keys).toHaveProperty('inline');
  });

  it('certificateBound: tls_client_certificate_bound_access_tokens, for a client of any method', () => {
    expect(toKnownClient(stored(1)).certificateBound).toBe(false);
    expect(toKnownClient({ ...stored(1), certificateBoundAccessTokens: true }).certificateBound).toBe(true);
    expect(
      toKnownClient({
        ...tlsClient({ kind: 'san_ip', value: '192.0.2.1' }),
        certificateBoundAccessTokens: true,
      }),
    ).toMatchObject({ certificateBound: true, tls: { kind: 'san_ip', value: '192.0.2.1' } });
  });

  it('a client of a certificate is never packed: the cache keeps it as it is', () => {
    const index = () => 0;
    expect(packKnownClient(toKnownClient(stored(1)), 0, index)).toBeTypeOf('string');
    const bound = toKnownClient({ ...stored(2), certificateBoundAccessTokens: true });
    const tls = toKnownClient(tlsClient({ kind: 'san_dns', value: 'a.example' }));
    for (const client of [bound, tls]) expect(packKnownClient(client, 0, index)).toBeUndefined();
    const cache = new ClientCache(HOT_MAX * 2, 60_000);
    cache.set(bound, 0);
    cache.set({ ...tls, id: 'tls-client' }, 0);
    for (let i = 0; i < HOT_MAX; i++) cache.set(toKnownClient(stored(1_000_000 + i)), 0);
    expect(cache.get(bound.id, 0, false)).toBe(bound);
    expect(cache.get('tls-client', 0, false)).toMatchObject({ tls: { kind: 'san_dns', value: 'a.example' } });
    // An unpacked client has the same shape: no certificate.
    const plain = toKnownClient(stored(3));
    cache.set(plain, 0);
    for (let i = 0; i < HOT_MAX; i++) cache.set(toKnownClient(stored(2_000_000 + i)), 0);
    expect(cache.get(plain.id, 0, false)).toMatchObject({
      tls: undefined,
      selfSigned: undefined,
      certificateBound: false,
    });
  });
});
