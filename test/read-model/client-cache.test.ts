/** The directory's cache of clients (read-model/client-cache.ts): the HOT_MAX asked for lately as objects, the rest packed. */
import { describe, expect, it } from 'vitest';
import type { KnownClient } from '../../src/domain/known-client.js';
import { ClientCache, HOT_MAX } from '../../src/read-model/client-cache.js';
import { toKnownClient } from '../../src/read-model/known-client.js';
import { retainedBytes } from '../helpers/memory.js';
import { API, stored } from '../helpers/stored-client.js';

const TTL = 60_000;
const T0 = Date.parse('2026-11-28T12:00:00.000Z');

/** What the token path reads of a client, with its grants as [audience, grant] pairs. */
const view = (c: KnownClient | undefined) =>
  c && { ...c, grants: [...c.grants.keys()].map((audience) => [audience, c.grants.get(audience)]) };

/** Caches `clients` in order, then `pushing` more, so that the first ones leave the hot objects. */
function cacheWithCold(clients: KnownClient[], max = HOT_MAX * 2): ClientCache {
  const cache = new ClientCache(max, TTL);
  for (const client of clients) cache.set(client, T0);
  for (let i = 0; i < HOT_MAX; i++) cache.set(toKnownClient(stored(1_000_000 + i)), T0);
  return cache;
}

describe('ClientCache', () => {
  it('a usual client is packed once it is not among the HOT_MAX asked for lately, and read back as it was', () => {
    const plain = toKnownClient(stored(1));
    const rich = toKnownClient({
      ...stored(2),
      tokenTtl: 300,
      dpopBoundAccessTokens: true,
      grants: [
        { audience: API, scopes: [], claims: null, tokenExchange: false },
        { audience: 'https://other.example.com', scopes: [], claims: null, tokenExchange: false },
      ],
      secrets: [
        { ...stored(2).secrets[0]!, id: 'sec_new', expiresAt: null },
        { ...stored(3).secrets[0]!, id: 'sec_old,1', expiresAt: '2026-11-28T13:00:00.123Z' },
      ],
    });
    // A digest of the separators' bytes (spaces, commas, digits) reads back as it was.
    rich.secrets[0]!.digest = ' , 1 , '.padEnd(32, ' ');
    const none = toKnownClient({ ...stored(4), grants: [], secrets: [] });
    const cache = cacheWithCold([plain, rich, none]);
    expect(cache.packed).toBe(3);
    expect(cache.size).toBe(HOT_MAX + 3);
    for (const original of [plain, rich, none]) {
      const read = cache.get(original.id, T0, false);
      expect(read).not.toBe(original);
      expect(view(read)).toEqual(view(original));
      // The same plain grant object as every other client's, and the digests compare as they did.
      expect(read!.grants.get(API)).toBe(original.grants.get(API));
    }
    expect(rich.secrets.map((s) => s.expiresAt)).toEqual([Infinity, Date.parse('2026-11-28T13:00:00.123Z')]);
    // Read once each, they stay packed; read again, each is an object again, and as many others are packed.
    expect(cache.packed).toBe(3);
    for (const original of [plain, rich, none]) {
      const hot = cache.get(original.id, T0, false);
      expect(cache.get(original.id, T0, false)).toBe(hot);
    }
    expect(cache.packed).toBe(3);
    expect(cache.size).toBe(HOT_MAX + 3);
  });

  it('a packed client read once is unpacked for that read only; read twice in a while, it is kept as an object', () => {
    const clients = Array.from({ length: 10 }, (_, i) => toKnownClient(stored(i)));
    const cache = cacheWithCold(clients);
    // Clients asked for in turn (a hundred thousand of them, say): none is made an object again.
    for (const client of clients.slice(1)) expect(cache.get(client.id, T0, false)?.id).toBe(client.id);
    expect(cache.packed).toBe(10);
    const once = cache.get(clients[0]!.id, T0, false);
    expect(cache.packed).toBe(10);
    // Asked for again within the last 4096 reads of packed clients: an object, and the same one from then on.
    const again = cache.get(clients[0]!.id, T0, false);
    expect(again).not.toBe(once);
    expect(view(again)).toEqual(view(once));
    expect(cache.packed).toBe(10); // one packed client fewer, and the hot one the longest unasked packed
    expect(cache.get(clients[0]!.id, T0, false)).toBe(again);
  });

  it('a client with a quota, keys, scopes, claims, token exchange, or disabled is kept as the object it is', () => {
    const unusual = [
      toKnownClient({ ...stored(1), quotaPerMinute: 10 }),
      toKnownClient({
        ...stored(2),
        authMethod: 'private_key_jwt',
        jwksUri: 'https://keys.example.com/jwks',
      }),
      toKnownClient({
        ...stored(3),
        grants: [{ audience: API, scopes: ['read'], claims: null, tokenExchange: false }],
      }),
      toKnownClient({ ...stored(4), claims: { tier: 'gold' } }),
      toKnownClient({
        ...stored(5),
        grants: [{ audience: API, scopes: [], claims: null, tokenExchange: true }],
      }),
      toKnownClient({ ...stored(6), enabled: false }),
      toKnownClient({ ...stored(7), secrets: [{ ...stored(7).secrets[0]!, id: 'sec with space' }] }),
    ];
    const cache = cacheWithCold(unusual);
    expect(cache.packed).toBe(0);
    for (const client of unusual) expect(cache.get(client.id, T0, false)).toBe(client);
  });

  it('holds at most max clients: the objects the longest unasked are packed, the packed leave in the order they were', () => {
    const max = HOT_MAX + 1000;
    const cache = new ClientCache(max, TTL);
    const clients = Array.from({ length: max + 500 }, (_, i) => toKnownClient(stored(i)));
    for (const client of clients.slice(0, max)) cache.set(client, T0);
    expect(cache.packed).toBe(1000); // the first thousand
    // The first is asked for twice: an object again (client 1000, the object the longest unasked, is packed).
    cache.get(clients[0]!.id, T0, false);
    cache.get(clients[0]!.id, T0, false);
    for (const client of clients.slice(max)) cache.set(client, T0);
    expect(cache.size).toBe(max);
    expect(cache.get(clients[0]!.id, T0, false)?.id).toBe(clients[0]!.id);
    for (let i = 1; i <= 500; i++) expect(cache.get(clients[i]!.id, T0, false)).toBeUndefined();
    for (let i = 501; i < clients.length; i += 97)
      expect(cache.get(clients[i]!.id, T0, false)?.id).toBe(clients[i]!.id);
  });

  it('keeps a packed client good until its TTL from when it was cached, not from when it was packed', () => {
    const client = toKnownClient(stored(1));
    const cache = new ClientCache(HOT_MAX * 2, TTL);
    cache.set(client, T0);
    for (let i = 0; i < HOT_MAX; i++) cache.set(toKnownClient(stored(1_000_000 + i)), T0 + TTL - 1000);
    expect(cache.packed).toBe(1);
    // Past the TTL while the feed cannot be read: still served, and kept (read twice: an object again).
    expect(cache.get(client.id, T0 + TTL + 1, true)?.id).toBe(client.id);
    expect(cache.get(client.id, T0 + TTL, false)?.id).toBe(client.id);
    expect(cache.packed).toBe(1);
    // Past it: dropped.
    expect(cache.get(client.id, T0 + TTL + 1, false)).toBeUndefined();
    expect(cache.get(client.id, T0 + TTL + 1, true)).toBeUndefined();
    expect(cache.size).toBe(HOT_MAX);
  });

  it('drops a packed client read past its TTL', () => {
    const client = toKnownClient(stored(1));
    const cache = cacheWithCold([client]);
    expect(cache.get(client.id, T0 + TTL + 1, false)).toBeUndefined();
    expect(cache.size).toBe(HOT_MAX);
    expect(cache.packed).toBe(0);
  });

  it('delete and clear take a client out whether it is hot or packed', () => {
    const clients = [toKnownClient(stored(1)), toKnownClient(stored(2))];
    const cache = cacheWithCold(clients);
    cache.set(clients[1]!, T0); // hot again
    for (const client of clients) cache.delete(client.id);
    for (const client of clients) expect(cache.get(client.id, T0, false)).toBeUndefined();
    expect(cache.size).toBe(HOT_MAX);
    cache.clear();
    expect(cache.size).toBe(0);
  });

  it('with max at most HOT_MAX, packs nothing', () => {
    const cache = new ClientCache(100, TTL);
    for (let i = 0; i < 300; i++) cache.set(toKnownClient(stored(i)), T0);
    expect(cache.size).toBe(100);
    expect(cache.packed).toBe(0);
    expect(cache.get(toKnownClient(stored(0)).id, T0, false)).toBeUndefined();
    expect(cache.get(toKnownClient(stored(299)).id, T0, false)?.id).toBe(toKnownClient(stored(299)).id);
  });

  it('holds 20 000 usual clients, their ids and entries included, in under 220 bytes each once packed (181 here; 445 as objects, known-client.test.ts)', async () => {
    const count = 20_000;
    const bytes = await retainedBytes(() => {
      const cache = new ClientCache(count + HOT_MAX, TTL);
      for (let i = 0; i < count; i++) cache.set(toKnownClient(stored(i)), T0);
      // The last HOT_MAX cached go packed too: only the 20 000 are measured.
      for (let i = 0; i < HOT_MAX; i++) cache.set(toKnownClient(stored(1_000_000 + i)), T0);
      return cache;
    });
    const baseline = await retainedBytes(() => {
      const cache = new ClientCache(HOT_MAX, TTL);
      for (let i = 0; i < HOT_MAX; i++) cache.set(toKnownClient(stored(1_000_000 + i)), T0);
      return cache;
    });
    const each = (bytes - baseline) / count;
    console.log(`a packed client: ${each.toFixed(0)} bytes`);
    expect(each).toBeLessThan(220);
  });
});
