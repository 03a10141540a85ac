/** boundedLru (src/lru.ts): lru-cache's bound and eviction order, without its arrays allocated up front. */
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { LRUCache } from 'lru-cache';
import { describe, expect, it } from 'vitest';
import { boundedLru } from '../src/lru.js';

// V8's own collector, to start each measurement from what is reachable: a worker runs file after file in one
// heap (vitest.config.ts, isolate: false), and a collection during `make` would otherwise free the garbage they
// left and hide what `make` allocated.
v8.setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** Bytes of heap and array buffers that `make` leaves reachable (the caches it returns are held meanwhile). */
function retained(make: () => unknown[]): number {
  const used = () => {
    const { heapUsed, arrayBuffers } = process.memoryUsage();
    return heapUsed + arrayBuffers;
  };
  gc();
  const before = used();
  const kept = make();
  const after = used();
  expect(kept.length).toBeGreaterThan(0);
  return after - before;
}

describe('boundedLru', () => {
  it('holds at most max entries and evicts the least recently used first', () => {
    const cache = boundedLru<string, number>(3);
    cache.set('a', 1);
    cache.set('b', 2);
    cache.set('c', 3);
    expect(cache.get('a')).toBe(1); // a is now the most recently used
    cache.set('d', 4);
    expect([...cache.keys()]).toEqual(['d', 'a', 'c']);
    expect(cache.has('b')).toBe(false);
    for (let i = 0; i < 1000; i++) cache.set(`k${i}`, i);
    expect(cache.size).toBe(3);
    expect([...cache.keys()]).toEqual(['k999', 'k998', 'k997']);
    cache.set('k998', -1); // replacing an entry evicts nothing
    expect(cache.size).toBe(3);
    expect(cache.get('k997')).toBe(997);
  });

  it('keeps the options it is given (a TTL, stale reads)', async () => {
    const cache = boundedLru<string, number>(10, { ttl: 20, ttlAutopurge: false });
    cache.set('a', 1);
    await new Promise((resolve) => setTimeout(resolve, 40));
    expect(cache.get('a', { allowStale: true, noDeleteOnStaleGet: true })).toBe(1);
    expect(cache.get('a')).toBeUndefined();
  });

  it('allocates as it fills: ten empty caches of a million entries hold under 2 MB, lru-cache with max ~80 MB', () => {
    const bounded = retained(() => Array.from({ length: 10 }, () => boundedLru<string, number>(1_000_000)));
    const preallocated = retained(() =>
      Array.from({ length: 10 }, () => new LRUCache<string, number>({ max: 1_000_000 })),
    );
    expect(bounded).toBeLessThan(2 * 1024 * 1024);
    expect(preallocated).toBeGreaterThan(40 * 1024 * 1024);
  });
});
