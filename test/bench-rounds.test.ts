import { describe, expect, it } from 'vitest';
import { medianRows } from '../bench/lib/report.js';
import { medianOfEach } from '../bench/lib/scenarios.js';

// `npm run bench -- --rounds N` without --compare (bench/run.js): every round's row of a scenario folded into one.

/** A row as run.js makes it: a round after the first is `<scenario>#<n>`, labelled with ` #<n>` after its label. */
const row = (scenario: string, connections: number, reqPerSec: number, p99Ms: number, extra = {}) => ({
  scenario,
  label: ['Tessera, SQLite', ...(scenario.match(/#\d+$/) ?? [])].join(' '),
  connections,
  reqPerSec,
  p99Ms,
  serverCpuUsPerRequest: 1e6 / reqPerSec,
  nodeVersion: '22.23.3',
  ...extra,
});

describe('bench: --rounds without --compare', () => {
  it('gives each scenario and concurrency the medians of its rounds, and the rounds’ req/s in the order they ran', () => {
    const breakdown = { signature: 30 };
    const folded = medianRows([
      row('tessera-sqlite', 100, 9000, 30, { cpuBreakdown: breakdown }),
      row('tessera-sqlite', 10, 7000, 3),
      row('floor', 100, 30_000, 9),
      row('floor#2', 100, 28_000, 12),
      row('tessera-sqlite#2', 100, 11_000, 20),
      row('tessera-sqlite#3', 100, 10_000, 40),
      row('floor#3', 100, 29_000, 10),
    ]);
    expect(folded).toEqual([
      {
        ...row('tessera-sqlite', 100, 10_000, 30, { cpuBreakdown: breakdown }),
        rounds: [9000, 11_000, 10_000],
      },
      row('tessera-sqlite', 10, 7000, 3),
      {
        ...row('floor', 100, 29_000, 10),
        serverCpuUsPerRequest: 1e6 / 29_000,
        rounds: [30_000, 28_000, 29_000],
      },
    ]);
    // Each figure is the median of its own: the CPU per answer is not recomputed from the median rate.
    const cpu = medianRows([
      { ...row('x', 100, 100, 1), serverCpuUsPerRequest: 5 },
      { ...row('x#2', 100, 200, 2), serverCpuUsPerRequest: 9 },
      { ...row('x#3', 100, 300, 3), serverCpuUsPerRequest: 1 },
    ]);
    expect(cpu.map((r) => [r.reqPerSec, r.p99Ms, r.serverCpuUsPerRequest, r.label])).toEqual([
      [200, 2, 5, 'Tessera, SQLite'],
    ]);
  });

  it('leaves --compare’s rows and a scenario of one round as they are', () => {
    const rows = [
      row('tessera-sqlite@abc123', 100, 1, 1),
      row('tessera-sqlite@abc123#2', 100, 2, 2),
      row('y', 100, 3, 3),
    ];
    expect(medianRows(rows)).toEqual(rows);
  });
});

describe('bench: the tight loops of several rounds', () => {
  it('are each figure’s median, and nothing without a run', () => {
    expect(
      medianOfEach([
        { es256Crypto: 60, replayRecord: 30 },
        { es256Crypto: 70, replayRecord: 20 },
        { es256Crypto: 65, replayRecord: 25 },
      ]),
    ).toEqual({ es256Crypto: 65, replayRecord: 25 });
    expect(medianOfEach([{ usPerSignature: 20 }, { usPerSignature: 30 }])).toEqual({ usPerSignature: 25 });
    expect(medianOfEach([])).toBe(undefined);
  });
});
