import { createHash, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { generateClientId } from '../../src/domain/secrets.js';
import { ClientIdSet, ClientIdSetBuilder, idHash } from '../../src/read-model/client-ids.js';
import { heapUsed } from '../helpers/memory.js';

/** Ids as Tessera makes them. */
const ids = (count: number): string[] => Array.from({ length: count }, generateClientId);

/** The heap and the typed arrays' buffers (outside the heap) in use, after full garbage collections. */
function memoryInUse(): number {
  const heap = heapUsed();
  return heap + process.memoryUsage().arrayBuffers;
}

describe('idHash', () => {
  it('64 bits of SHA-256 under the key: the same id the same hash under one key, another under another', () => {
    const a = idHash('key-a');
    const b = idHash('key-b');
    expect(a('svc')).toBe(a('svc'));
    expect(a('svc')).not.toBe(a('svc2'));
    expect(a('svc')).not.toBe(b('svc'));
    // The first 8 bytes, big-endian, of SHA-256(key + id).
    expect(idHash('k')('id')).toBe(createHash('sha256').update('kid').digest().readBigUInt64BE(0));
    // Every byte of those 8 counts, in order, whatever the id (UTF-8, as the Hash encodes a string).
    const key = randomBytes(16).toString('base64url');
    const hashOf = idHash(key);
    for (const id of [...ids(2000), 'é-client', '客户端', '\u0000', 'a'.repeat(128)])
      expect(hashOf(id)).toBe(
        createHash('sha256')
          .update(key + id)
          .digest()
          .readBigUInt64BE(0),
      );
  });

  it('a random key of its own when none is given', () => {
    expect(idHash()('svc')).not.toBe(idHash()('svc'));
  });
});

describe('ClientIdSet', () => {
  it('holds what it was built from and what was added, and nothing else', () => {
    const hash = idHash();
    const builder = new ClientIdSetBuilder(hash, 3);
    for (const id of ['svc-b', 'svc-a', 'svc-c', 'svc-a']) builder.add(id);
    const set = builder.finish();
    expect(set.size).toBe(3);
    expect(['svc-a', 'svc-b', 'svc-c', 'svc-d', 'SVC-A', ''].map((id) => set.has(id))).toEqual([
      true,
      true,
      true,
      false,
      false,
      false,
    ]);
    set.add('svc-d');
    set.add('svc-d');
    set.add('svc-a');
    expect(set.size).toBe(4);
    expect(set.has('svc-d')).toBe(true);
    // Built from 3 into an array made for 1 024: copied to its size, not kept with that much slack.
    expect(set.stats()).toEqual({ ids: 4, recent: 1, bytes: 3 * 8 + 64 });
  });

  it('an empty set holds nothing until ids are added', () => {
    const set = new ClientIdSet(idHash());
    expect(set.has('svc')).toBe(false);
    expect(set.size).toBe(0);
    set.add('svc');
    expect(set.has('svc')).toBe(true);
    expect(set.stats()).toEqual({ ids: 1, recent: 1, bytes: 64 });
  });

  it('merges recent additions into the sorted array at 1 024 of them (more for a large set), losing none', () => {
    const set = new ClientIdSet(idHash());
    const added = ids(2500);
    for (const [i, id] of added.entries()) {
      set.add(id);
      // Merged at the 1 024th and the 2 048th addition: the recent ones start again from none.
      expect(set.stats().recent).toBe((i + 1) % 1024);
    }
    expect(set.size).toBe(2500);
    expect(set.stats().bytes).toBe(2048 * 8 + 452 * 64);
    expect(added.every((id) => set.has(id))).toBe(true);
    // Adding an id again, merged or recent, changes nothing.
    set.add(added[0]!);
    set.add(added[2499]!);
    expect(set.stats()).toEqual({ ids: 2500, recent: 452, bytes: 2048 * 8 + 452 * 64 });

    // A set of 128 000 ids merges at 2 000 recent ones (one in 64), not at 1 024.
    const builder = new ClientIdSetBuilder(idHash(), 128_000);
    for (let i = 0; i < 128_000; i++) builder.add(`svc-${i}`);
    const large = builder.finish();
    for (let i = 0; i < 1999; i++) large.add(`new-${i}`);
    expect(large.stats().recent).toBe(1999);
    large.add('new-1999');
    expect(large.stats()).toEqual({ ids: 130_000, recent: 0, bytes: 130_000 * 8 });
    expect(large.has('new-0') && large.has('new-1999') && large.has('svc-0') && large.has('svc-127999')).toBe(
      true,
    );
  });

  it('no false negatives over 100 000 random ids (built, added and merged); no false positives among 100 000 others', () => {
    const hash = idHash();
    const all = ids(100_000);
    const builder = new ClientIdSetBuilder(hash, 60_000); // fewer expected than come: the array grows
    for (const id of all.slice(0, 70_000)) builder.add(id);
    const set = builder.finish();
    for (const id of all.slice(70_000)) set.add(id); // 30 000 more, merged a thousand or so at a time
    expect(set.size).toBe(100_000);
    expect(all.filter((id) => !set.has(id))).toEqual([]);
    // A false positive is a 64-bit collision: about 10^10 / 2^64 expected here, that is none.
    expect(ids(100_000).filter((id) => set.has(id))).toEqual([]);
    // Operator-chosen ids, of any length and alphabet Tessera allows, the same.
    const chosen = Array.from(
      { length: 1000 },
      (_, i) => `${'svc.-_~'[i % 7]}${randomBytes(i % 60).toString('hex')}${i}`,
    );
    for (const id of chosen) set.add(id);
    expect(chosen.every((id) => set.has(id))).toBe(true);
  });

  it('holds 100 000 ids in under 1.6 MB (16 MB a million): 8 bytes each', () => {
    const all = ids(100_000);
    const before = memoryInUse();
    const builder = new ClientIdSetBuilder(idHash(), all.length);
    for (const id of all) builder.add(id);
    const set = builder.finish();
    const grown = memoryInUse() - before;
    expect(set.stats()).toEqual({ ids: 100_000, recent: 0, bytes: 800_000 });
    expect(grown).toBeLessThan(1_600_000);
    expect(set.has(all[0]!)).toBe(true);
  });
});
