import { hash, randomBytes } from 'node:crypto';

/**
 * Every client id in memory, compactly (docs/interface.md: at most 16 MB for a million clients), so that the token
 * path can tell an id that no client has without asking the store, and a caller blocked for failed attempts
 * can still be let through with the credential of a client this process has not seen yet.
 *
 * An id is kept as 64 bits of a keyed SHA-256 of it, in a sorted BigUint64Array searched by halves: 8 bytes
 * per client, whatever the id's length (operators may choose ids of up to 128 characters). The answer
 * "absent" is exact; "present" may be wrong for an id that collides with a client's on 64 bits, which costs
 * one store lookup and nothing else (the credential is still checked against what the store holds). Random
 * collisions are negligible (about n / 2^64 per id: one in 18 trillion at a million clients), and the key is
 * made at random by each process and never leaves it, so that nobody can search offline for ids that
 * collide: an unkeyed hash of known ids could be, at 2^64 / n work for some id of n.
 *
 * Ids added after the set was built (the change feed) go to a small Set first and are merged into the sorted
 * array now and then, so that a burst of new clients does not copy the array once per client. Ids are never
 * removed: the feed says that a client changed, not that it is gone. A deleted client's id stays present until
 * the set is built again from the store (see Directory), costing one lookup per cache lifetime when presented.
 */

/** The 64-bit hash of an id under this process's key. */
export type IdHash = (id: string) => bigint;

/** A hash under a key of its own (random, unless given: tests and benchmarks may fix it). */
export function idHash(key: string = randomBytes(16).toString('base64url')): IdHash {
  // The key has a fixed length, so key + id is unambiguous. One-shot crypto.hash: no Hash object per id. Its
  // digest as a "binary" (latin1) string, a char per byte, not a Buffer: allocating the Buffer was two thirds
  // of the cost (3.05 µs an id against 0.90 µs on a slow machine), paid for every id of a big apply as the
  // feed brings it, and for every id read at start.
  return (id) => {
    const digest = hash('sha256', key + id, 'binary');
    return (BigInt(uint32At(digest, 0)) << 32n) | BigInt(uint32At(digest, 4));
  };
}

/** The big-endian 32-bit number of a "binary" string's four chars from `at` (a byte each). */
function uint32At(bytes: string, at: number): number {
  return (
    ((bytes.charCodeAt(at) << 24) |
      (bytes.charCodeAt(at + 1) << 16) |
      (bytes.charCodeAt(at + 2) << 8) |
      bytes.charCodeAt(at + 3)) >>>
    0
  );
}

/** Recent additions are merged once there are this many, or one per 64 ids held if that is more. */
const MERGE_AT_LEAST = 1024;
const MERGE_SHARE = 64;
/** What one recent addition costs in the heap, roughly (a Set entry and a heap BigInt): for `bytes` only. */
const RECENT_ENTRY_BYTES = 64;

/** The index of the first element of `sorted` that is ≥ `value`, searching from `from`. */
function lowerBound(sorted: BigUint64Array, value: bigint, from = 0): number {
  let low = from;
  let high = sorted.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (sorted[middle]! < value) low = middle + 1;
    else high = middle;
  }
  return low;
}

function contains(sorted: BigUint64Array, value: bigint): boolean {
  const at = lowerBound(sorted, value);
  return at < sorted.length && sorted[at] === value;
}

export interface ClientIdStats {
  /** Ids held (hashes, each once). */
  ids: number;
  /** Of those, added since the last merge. */
  recent: number;
  /** Memory held: the sorted array's buffer, and an estimate for the recent additions. */
  bytes: number;
}

export class ClientIdSet {
  /** Hashes in ascending order, each once. */
  private sorted: BigUint64Array;
  /** Hashes added since the last merge; none of them is in `sorted`. */
  private readonly recent = new Set<bigint>();

  /** `sorted`: hashes made by `hashOf`, in ascending order, each once (see ClientIdSetBuilder). */
  constructor(
    private readonly hashOf: IdHash,
    sorted: BigUint64Array = new BigUint64Array(0),
  ) {
    this.sorted = sorted;
  }

  /** Whether `id` may be a client's: false is certain, true may be a collision (see above). */
  has(id: string): boolean {
    const value = this.hashOf(id);
    return this.recent.has(value) || contains(this.sorted, value);
  }

  add(id: string): void {
    const value = this.hashOf(id);
    if (this.recent.has(value) || contains(this.sorted, value)) return;
    this.recent.add(value);
    if (this.recent.size >= Math.max(MERGE_AT_LEAST, this.sorted.length / MERGE_SHARE)) this.merge();
  }

  get size(): number {
    return this.sorted.length + this.recent.size;
  }

  stats(): ClientIdStats {
    return {
      ids: this.size,
      recent: this.recent.size,
      // The whole buffer: a built set may view a slightly larger one (see ClientIdSetBuilder.finish).
      bytes: this.sorted.buffer.byteLength + this.recent.size * RECENT_ENTRY_BYTES,
    };
  }

  /**
   * The recent additions into a new sorted array: the runs of the old one between them are copied whole
   * (a memory copy each), so a merge costs one pass over the array and a search per addition.
   */
  private merge(): void {
    const added = BigUint64Array.from(this.recent).sort();
    const old = this.sorted;
    const merged = new BigUint64Array(old.length + added.length);
    let from = 0;
    let to = 0;
    for (const value of added) {
      const at = lowerBound(old, value, from);
      merged.set(old.subarray(from, at), to);
      to += at - from;
      from = at;
      merged[to++] = value;
    }
    merged.set(old.subarray(from), to);
    this.sorted = merged;
    this.recent.clear();
  }
}

/** A set built from ids read from the store, in any order and perhaps twice (pages read while ids change). */
export class ClientIdSetBuilder {
  private hashes: BigUint64Array;
  private count = 0;

  /** `expected`: about how many ids will come (the array grows past it if need be). */
  constructor(
    private readonly hashOf: IdHash,
    expected: number,
  ) {
    this.hashes = new BigUint64Array(Math.max(MERGE_AT_LEAST, expected));
  }

  add(id: string): void {
    if (this.count === this.hashes.length) {
      const grown = new BigUint64Array(Math.ceil(this.hashes.length * 1.5));
      grown.set(this.hashes);
      this.hashes = grown;
    }
    this.hashes[this.count++] = this.hashOf(id);
  }

  finish(): ClientIdSet {
    const hashes = this.hashes.subarray(0, this.count).sort();
    let unique = 0;
    for (let i = 0; i < hashes.length; i++) {
      const value = hashes[i]!;
      if (unique === 0 || hashes[unique - 1] !== value) hashes[unique++] = value;
    }
    // Some slack is kept rather than copied away (a copy would hold both for a moment): an array a little
    // larger than expected, from a count taken before the pages were read.
    const kept =
      unique >= this.hashes.length - this.hashes.length / 8
        ? hashes.subarray(0, unique)
        : hashes.slice(0, unique);
    this.hashes = new BigUint64Array(0);
    return new ClientIdSet(this.hashOf, kept);
  }
}
