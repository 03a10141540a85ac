/**
 * The CLI's tables hold any number of rows: a column's width is folded over the rows, never spread into one
 * call's arguments (`Math.max(...rows)` overflows the stack past about 120,000 of them: an apply of 196k clients
 * died so, after committing them, before printing a single new secret).
 */
import { describe, expect, it } from 'vitest';
import { formatTable } from '../src/cli/output.js';

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
