/** A client as the token path caches it (read-model/known-client.ts): how little a hundred thousand of them hold. */
import { describe, expect, it } from 'vitest';
import { toKnownClient } from '../../src/read-model/known-client.js';
import { retainedBytes } from '../helpers/memory.js';
import { API, stored } from '../helpers/stored-client.js';

describe('toKnownClient', () => {
  it('holds a plain client (a secret, a grant) in under 600 bytes of heap, its id and secret id included (628 when each grant was its own object)', async () => {
    const count = 20_000;
    // Each row is dropped as soon as its client is made: only what the cache keeps stays (the id, the secret's id).
    const bytes = await retainedBytes(() =>
      Array.from({ length: count }, (_, i) => toKnownClient(stored(i))),
    );
    const each = bytes / count;
    console.log(`a cached client: ${each.toFixed(0)} bytes`);
    expect(each).toBeLessThan(600);
  });

  it('plain grants are one shared object; a grant with scopes, claims or exchange is its own', () => {
    const a = toKnownClient(stored(1));
    const b = toKnownClient(stored(2));
    expect(a.grants.get(API)).toBe(b.grants.get(API));
    expect(a.grants.get(API)).toEqual({
      scopes: new Set(),
      scope: undefined,
      claims: undefined,
      tokenExchange: false,
    });
    const scoped = toKnownClient({
      ...stored(3),
      grants: [{ audience: API, scopes: ['read'], claims: null, tokenExchange: false }],
    });
    expect(scoped.grants.get(API)).toEqual({
      scopes: new Set(['read']),
      scope: 'read',
      tokenExchange: false,
    });
    const claimed = toKnownClient({ ...stored(4), claims: { tier: 'gold' } });
    expect(claimed.grants.get(API)).toEqual({
      scopes: new Set(),
      scope: undefined,
      claims: '"tier":"gold"',
      tokenExchange: false,
    });
    const exchanging = toKnownClient({
      ...stored(5),
      grants: [{ audience: API, scopes: [], claims: null, tokenExchange: true }],
    });
    expect(exchanging.grants.get(API)).toEqual({ scopes: new Set(), scope: undefined, tokenExchange: true });
    for (const own of [scoped, claimed, exchanging]) expect(own.grants.get(API)).not.toBe(a.grants.get(API));
  });
});
