/**
 * perTurn (src/per-turn.ts): the calls of one turn of the event loop made as one call of `many`.
 */
import { describe, expect, it } from 'vitest';
import { perTurn } from '../src/per-turn.js';

/** A `many` that records its calls and answers each input doubled, when `release` is called (or at once). */
function recorder(options: { held?: boolean } = {}) {
  const calls: number[][] = [];
  const releases: (() => void)[] = [];
  const many = (inputs: number[]) => {
    calls.push(inputs);
    const answer = inputs.map((n) => n * 2);
    if (!options.held) return Promise.resolve(answer);
    return new Promise<number[]>((resolve) => releases.push(() => resolve(answer)));
  };
  return { calls, releases, many };
}

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

describe('perTurn', () => {
  it("makes one turn's calls one call, inputs in the order of the calls, and gives each call its own answer", async () => {
    const r = recorder();
    const one = perTurn(r.many);
    const answers = Promise.all([one(1), one(2), one(3)]);
    expect(r.calls).toEqual([]); // not before the turn's end
    expect(await answers).toEqual([2, 4, 6]);
    expect(r.calls).toEqual([[1, 2, 3]]);
    expect(await one(4)).toBe(8);
    expect(r.calls).toEqual([[1, 2, 3], [4]]);
  });

  it("with soon: 'tick', the calls of one callback and of the promises it settles go at the tick, before the next turn", async () => {
    const r = recorder();
    const one = perTurn(r.many, { soon: 'tick' });
    let immediate = false;
    setImmediate(() => (immediate = true));
    // As the token lane's requests: one callback resumes them all, each makes its call a few awaits later.
    const gate = Promise.resolve();
    const answers = Promise.all(
      [1, 2, 3].map(async (n) => {
        await gate;
        for (let i = 0; i < n; i++) await null;
        return one(n);
      }),
    );
    await new Promise<void>((resolve) => process.nextTick(resolve));
    expect(await answers).toEqual([2, 4, 6]);
    expect(r.calls).toEqual([[1, 2, 3]]);
    expect(immediate).toBe(false);
  });

  it('calls made while one runs wait for it, then go together in the next, at once', async () => {
    const r = recorder({ held: true });
    const one = perTurn(r.many);
    const first = Promise.all([one(1), one(2)]);
    await nextTurn();
    expect(r.calls).toEqual([[1, 2]]);
    const second = Promise.all([one(3)]);
    await nextTurn();
    const third = Promise.all([one(4), one(5)]);
    await nextTurn();
    await nextTurn();
    expect(r.calls).toEqual([[1, 2]]); // still running: the others wait
    r.releases[0]!();
    expect(await first).toEqual([2, 4]);
    await nextTurn();
    expect(r.calls).toEqual([
      [1, 2],
      [3, 4, 5],
    ]);
    r.releases[1]!();
    expect([await second, await third]).toEqual([[6], [8, 10]]);
  });

  it('with parallel: 2, a second call starts while the first runs; a third waits for one of them', async () => {
    const r = recorder({ held: true });
    const one = perTurn(r.many, { parallel: 2 });
    const first = one(1);
    await nextTurn();
    const second = one(2);
    await nextTurn();
    expect(r.calls).toEqual([[1], [2]]);
    const third = Promise.all([one(3), one(4)]);
    await nextTurn();
    expect(r.calls).toEqual([[1], [2]]);
    r.releases[1]!();
    expect(await second).toBe(4);
    await nextTurn();
    expect(r.calls).toEqual([[1], [2], [3, 4]]);
    r.releases[0]!();
    r.releases[2]!();
    expect([await first, await third]).toEqual([2, [6, 8]]);
  });

  it('at most 256 inputs a call; the rest follow in the next', async () => {
    const r = recorder();
    const one = perTurn(r.many);
    const inputs = Array.from({ length: 300 }, (_, i) => i);
    expect(await Promise.all(inputs.map(one))).toEqual(inputs.map((n) => n * 2));
    expect(r.calls.map((c) => c.length)).toEqual([256, 44]);
    expect(r.calls.flat()).toEqual(inputs);
  });

  it('a failed call fails every call it was made for, and only those; a throw is a failure; so is a wrong count of answers', async () => {
    let fail: 'reject' | 'throw' | 'short' | undefined = 'reject';
    const calls: number[][] = [];
    const one = perTurn((inputs: number[]) => {
      calls.push(inputs);
      if (fail === 'throw') throw new Error('thrown');
      if (fail === 'reject') return Promise.reject(new Error('rejected'));
      if (fail === 'short') return Promise.resolve(inputs.slice(1));
      return Promise.resolve(inputs);
    });
    const settled = (ps: Promise<number>[]) => Promise.allSettled(ps);
    const failedWith = (message: string) => ({ status: 'rejected', reason: new Error(message) });
    expect(await settled([one(1), one(2)])).toEqual([failedWith('rejected'), failedWith('rejected')]);
    fail = 'throw';
    expect(await settled([one(3)])).toEqual([failedWith('thrown')]);
    fail = 'short';
    expect(await settled([one(4), one(5)])).toEqual([
      failedWith('1 answers to 2 calls'),
      failedWith('1 answers to 2 calls'),
    ]);
    fail = undefined;
    expect(await Promise.all([one(6), one(7)])).toEqual([6, 7]);
    expect(calls).toEqual([[1, 2], [3], [4, 5], [6, 7]]);
  });
});
