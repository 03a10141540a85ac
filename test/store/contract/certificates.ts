import { beforeEach, describe, expect, it } from 'vitest';
import { A, clock, migrationsAfter, newClient, store, type OpenStore } from './shared.js';

/**
 * Mutual TLS's part of a client (RFC 8705, migration 0017): a tls_client_auth client's one registered value (its
 * kind and the value as given) and tls_client_certificate_bound_access_tokens, on every engine.
 */
export function certificatesContract(open: OpenStore): void {
  describe('clients: tls_client_auth values and certificate-bound tokens (0017)', () => {
    beforeEach(async () => {
      await store.addAudience({ url: A, name: null, tokenTtl: null, signingAlg: null });
    });

    it('a client has no tls value and unbound tokens unless created with them; every read has them', async () => {
      const plain = await store.createClient(newClient('plain', [A]));
      expect(plain).toMatchObject({ tlsClientAuth: null, certificateBoundAccessTokens: false });
      const created = await store.createClient({
        ...newClient('worker', [A], { secretDigest: null }),
        authMethod: 'tls_client_auth',
        tlsClientAuth: { kind: 'subject_dn', value: 'CN=worker, O=Example, C=US' },
        certificateBoundAccessTokens: true,
      });
      expect(created).toMatchObject({
        id: 'worker',
        authMethod: 'tls_client_auth',
        tlsClientAuth: { kind: 'subject_dn', value: 'CN=worker, O=Example, C=US' },
        certificateBoundAccessTokens: true,
        secrets: [],
      });
      expect(await store.findClient('worker')).toEqual(created);
      expect(await store.findClients(['worker', 'plain'])).toEqual([plain, created]);
      expect((await store.listClients()).find((c) => c.id === 'worker')).toEqual(created);
      expect(await store.listClientsPage(null, 10)).toEqual([plain, created]);
    });

    it('updateClient replaces the value (of any kind), clears it, and sets and clears the binding', async () => {
      await store.createClient({
        ...newClient('w', [A], { secretDigest: null }),
        authMethod: 'tls_client_auth',
        tlsClientAuth: { kind: 'san_dns', value: 'Worker.Example.com' },
      });
      clock.advance(1000);
      const replaced = await store.updateClient('w', {
        tlsClientAuth: { kind: 'san_uri', value: 'spiffe://prod.example.com/ns/billing/sa/worker' },
      });
      expect(replaced).toMatchObject({
        tlsClientAuth: { kind: 'san_uri', value: 'spiffe://prod.example.com/ns/billing/sa/worker' },
        certificateBoundAccessTokens: false,
        updatedAt: clock.iso(),
      });
      expect(await store.findClient('w')).toEqual(replaced);
      const bound = await store.updateClient('w', { certificateBoundAccessTokens: true });
      expect(bound).toMatchObject({
        tlsClientAuth: { kind: 'san_uri', value: 'spiffe://prod.example.com/ns/billing/sa/worker' },
        certificateBoundAccessTokens: true,
      });
      // A change of another field keeps both.
      expect(await store.updateClient('w', { name: 'renamed' })).toMatchObject({
        tlsClientAuth: { kind: 'san_uri' },
        certificateBoundAccessTokens: true,
      });
      const cleared = await store.updateClient('w', {
        authMethod: 'client_secret_basic',
        tlsClientAuth: null,
        certificateBoundAccessTokens: false,
      });
      expect(cleared).toMatchObject({
        authMethod: 'client_secret_basic',
        tlsClientAuth: null,
        certificateBoundAccessTokens: false,
      });
      expect(await store.findClient('w')).toEqual(cleared);
    });

    it('createClients writes clients with and without them in one go, each as it was given', async () => {
      await store.createClients([
        { client: newClient('a', [A]) },
        {
          client: {
            ...newClient('b', [], { secretDigest: null }),
            authMethod: 'tls_client_auth',
            tlsClientAuth: { kind: 'san_ip', value: '2001:DB8::10' },
          },
        },
        { client: { ...newClient('c', [A]), certificateBoundAccessTokens: true } },
      ]);
      expect(
        (await store.findClients(['a', 'b', 'c'])).map((c) => [
          c.id,
          c.tlsClientAuth,
          c.certificateBoundAccessTokens,
        ]),
      ).toEqual([
        ['a', null, false],
        ['b', { kind: 'san_ip', value: '2001:DB8::10' }, false],
        ['c', null, true],
      ]);
    });

    it('0017 gives every client there is no tls value and unbound tokens', async () => {
      const fresh = await open(clock.date);
      try {
        await fresh.migrate('0016_client_deletions');
        await fresh.addAudience({ url: A, name: null, tokenTtl: null, signingAlg: null });
        // Written by `tessera migrate`'s own steps to a store of the schema before 0017.
        await fresh.createClient({ ...newClient('old', [A]), dpopBoundAccessTokens: true });
        expect(await fresh.migrate()).toEqual(migrationsAfter('0016_client_deletions'));
        expect(migrationsAfter('0016_client_deletions')).toEqual([
          '0017_tls_client_auth',
          '0018_token_profile',
        ]);
        expect(await fresh.findClient('old')).toMatchObject({
          id: 'old',
          dpopBoundAccessTokens: true,
          tlsClientAuth: null,
          certificateBoundAccessTokens: false,
        });
        expect(
          await fresh.updateClient('old', {
            authMethod: 'tls_client_auth',
            tlsClientAuth: { kind: 'san_email', value: 'Worker@Example.com' },
            certificateBoundAccessTokens: true,
          }),
        ).toMatchObject({
          tlsClientAuth: { kind: 'san_email', value: 'Worker@Example.com' },
          certificateBoundAccessTokens: true,
        });
        expect(await fresh.migrate()).toEqual([]);
      } finally {
        await fresh.close();
      }
    });
  });
}
