import { describe, expect, it } from 'vitest';
import { cpuBreakdown, type CpuProfile } from '../bench/lib/breakdown.js';

// bench --profile's split of a server's CPU per answer (bench/lib/breakdown.js), on profiles made by hand.

/** A profile of leaves under the root, each [functionName, url], sampled in `order`, `deltas` apart from `startTime`. */
function profile(leaves: [string, string][], order: number[], deltas: number[], startTime = 0): CpuProfile {
  const nodes = [
    {
      id: 1,
      callFrame: { functionName: '(root)', url: '', lineNumber: -1 },
      children: leaves.map((_, i) => i + 2),
    },
    ...leaves.map(([functionName, url], i) => ({
      id: i + 2,
      callFrame: { functionName, url, lineNumber: 0 },
    })),
  ];
  return { nodes, startTime, samples: order.map((i) => i + 2), timeDeltas: deltas };
}

const DIST = 'file:///srv/tessera/dist';

describe('bench --profile: where the CPU per answer goes', () => {
  it("puts each sample in its category and scales the main thread's to its CPU, the maintenance thread's as sampled", () => {
    const main = profile(
      [
        ['parseForm', `${DIST}/http/body.js`],
        ['signOneShot', 'node:internal/crypto/sig'],
        ['(idle)', ''],
        ['postMessage', ''],
        ['(garbage collector)', ''],
      ],
      [0, 0, 1, 1, 1, 1, 2, 3, 4, 4],
      Array(10).fill(1000),
    );
    // The maintenance thread, after them (so that no sample of it spans the main thread's): idle, then busy for 1 ms,
    // then a sample 5 ms late, which stands for 1.25 ms (its usual interval, 1 ms, and a quarter).
    const worker = profile(
      [
        ['(idle)', ''],
        ['appendAudit', '[worker eval]'],
      ],
      [0, 1, 1],
      [1000, 1000, 5000],
      20_000,
    );
    // 8 ms of the main thread's samples count (not idle, not waiting in postMessage): 2 parse, 4 signature, 2 GC.
    const split = cpuBreakdown(
      [
        { profile: main, thread: 'main' },
        { profile: worker, thread: 'worker' },
      ],
      0,
      100_000,
      { total: 13, main: 10, answers: 1000 },
    );
    // The maintenance thread's 2.25 ms for 1000 answers; the rest of the other threads' 3 µs is threads' without a
    // profile.
    expect(split).toEqual({
      signature: 5,
      gc: 2.5,
      parse: 2.5,
      'store thread': 2.25,
      unprofiled: 0.75,
    });
  });

  it("takes the other threads' busy samples out of the request thread's that span the same time (one core)", () => {
    // The main thread's samples end at 1, 2, 3 and 4 ms; the worker is busy from 1 to 2 ms (its one sample).
    const main = profile([['answer', `${DIST}/http/token-lane.js`]], [0, 0, 0, 0], [1000, 1000, 1000, 1000]);
    const worker = profile(
      [
        ['(idle)', ''],
        ['appendAudit', '[worker eval]'],
      ],
      [0, 1, 0],
      [1000, 1000, 1000],
    );
    const split = cpuBreakdown(
      [
        { profile: main, thread: 'main' },
        { profile: worker, thread: 'worker' },
      ],
      0,
      10_000,
      { total: 4, main: 3, answers: 1000 },
    );
    expect(split).toEqual({ lane: 3, 'store thread': 1 });
  });

  it('is undefined without a sample in the measurement', () => {
    const main = profile([['answer', `${DIST}/http/token-lane.js`]], [0], [1000]);
    expect(
      cpuBreakdown([{ profile: main, thread: 'main' }], 5000, 6000, { total: 4, main: 3, answers: 10 }),
    ).toBe(undefined);
  });
});
