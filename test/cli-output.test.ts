/**
 * The CLI's tables hold any number of rows: a column's width is folded over the rows, never spread into one
 * call's arguments (`Math.max(...rows)` overflows the stack past about 120,000 of them: an apply of 196k clients
 * died so, after committing them, before printing a single new secret).
 */
import { Writable } from 'node:stream';
import { setImmediate as tick } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { formatTable, jsonPieces, writePieces } from '../src/cli/output.js';

describe('formatTable', () => {
  it('aligns 300,000 rows, the widest cell setting its column', () => {
    const rows = Array.from({ length: 300_000 }, (_, i) => [`client-${i}`, i % 7 === 0 ? null : 'x']);
    const lines = formatTable(['CLIENT', 'V'], rows).trimEnd().split('\n');
    expect(lines).toHaveLength(300_001);
    expect(lines[0]).toBe('CLIENT         V');
    expect(lines[1]).toBe('client-0       -');
    expect(lines.at(-1)).toBe('client-299999  -'); // 299,999 = 7 × 42,857
  });
});

describe('jsonPieces', () => {
  it('writes what JSON.stringify(value, null, 2) writes, whatever the depth it splits at', () => {
    const values: unknown[] = [
      {
        file: 'a "b"\n.yaml',
        dry_run: false,
        none: undefined,
        fn: () => 1,
        summary: { create: 2, update: 0, delete: 0 },
        changes: [
          {
            action: 'create',
            type: 'client',
            client_id: 'x',
            values: { name: 'X\n', claims: { a: [1, { b: null }] } },
          },
          { action: 'update', type: 'grant', changes: [{ field: 'scopes', from: 'a b', to: '' }] },
        ],
        empty: [],
        nothing: {},
        holes: [undefined, () => 1, null, 'x', [], {}],
        at: new Date(0),
      },
      [],
      {},
      'text',
      42,
      null,
      [[[{ deep: [1, 2, { deeper: true }] }]]],
    ];
    for (const value of values)
      for (const depth of [0, 1, 2, 5])
        expect([...jsonPieces(value, depth)].join('')).toBe(JSON.stringify(value, null, 2));
  });
});

describe('writePieces', () => {
  it('waits for a slow stream to drain: what waits to be written stays bounded, not the whole text', async () => {
    let written = 0;
    let mostWaiting = 0;
    const out = new Writable({
      highWaterMark: 16_384,
      write(chunk: Buffer, _encoding, done) {
        written += chunk.length;
        mostWaiting = Math.max(mostWaiting, out.writableLength);
        // A slow reader: each chunk taken on a later turn of the event loop.
        void tick().then(() => done());
      },
    });
    const line = `${'x'.repeat(99)}\n`;
    function* lines() {
      for (let i = 0; i < 200_000; i++) yield line; // 20 MB
    }
    await writePieces(lines(), out);
    expect(written).toBe(20_000_000);
    // Without waiting for 'drain' every piece would be queued at once: 20 MB waiting.
    expect(mostWaiting).toBeLessThan(200_000);
  });
});
