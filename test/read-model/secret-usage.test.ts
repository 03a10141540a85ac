/** Last-used times of secrets: noted once a minute in memory (read-model/secret-usage.ts), written in id order. */
import { describe, expect, it } from 'vitest';
import { inOrder } from '../../src/store/kysely/secrets.js';
import { SecretUsage } from '../../src/read-model/secret-usage.js';
import { clockAt } from '../helpers/clock.js';

const MINUTE = 60_000;

describe('SecretUsage', () => {
  it('notes a secret once a minute: a write has each secret used since the last one, a new minute notes it again', async () => {
    const writes: string[][] = [];
    let now = 10 * MINUTE;
    const usage = new SecretUsage(
      { markSecretsUsed: async (ids) => void writes.push([...ids]) },
      { clock: clockAt(() => now) },
    );
    for (const id of ['a', 'b', 'a', 'b', 'a']) usage.used(id);
    await usage.flush();
    usage.used('a'); // the same minute: noted already
    await usage.flush();
    now += MINUTE;
    usage.used('a');
    usage.used('c');
    usage.used('a');
    await usage.flush();
    expect(writes).toEqual([
      ['a', 'b'],
      ['a', 'c'],
    ]);
  });
});

describe('inOrder', () => {
  const collect = async (ids: string[], size: number) => {
    const chunks: string[][] = [];
    for await (const chunk of inOrder(ids, size)) chunks.push(chunk);
    return chunks;
  };

  it('gives 5,000 ids (three sorted runs, merged) in order, 100 at a time', async () => {
    const ids = Array.from(
      { length: 5000 },
      (_, i) => `sec_${((i * 7919) % 5000).toString(36).padStart(4, '0')}`,
    );
    const chunks = await collect(ids, 100);
    expect(chunks.map((c) => c.length)).toEqual(Array(50).fill(100));
    expect(chunks.flat()).toEqual([...ids].sort());
  });

  it('gives the last chunk short, and nothing for no ids', async () => {
    expect(await collect(['c', 'a', 'b'], 2)).toEqual([['a', 'b'], ['c']]);
    expect(await collect([], 100)).toEqual([]);
  });
});
