import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { parseForm } from '../../src/http/body.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

describe('form bodies', () => {
  it('parameters kept after the request (cache keys, limit counters, audit events) do not keep its body alive', () => {
    // URLSearchParams hands out values as slices of the whole body text: a 30-character client id kept in the
    // cache of unknown ids would hold on to up to 8 KiB of body, padding included.
    const pad = 'p'.repeat(8000);
    const kept: string[] = [];
    gc();
    const before = process.memoryUsage().heapUsed;
    for (let i = 0; i < 2000; i++) {
      const body = `grant_type=client_credentials&client_id=unknown-client-${String(i).padStart(6, '0')}&pad=${pad}${i}`;
      const params = parseForm(body).params;
      expect(params.client_id).toBe(`unknown-client-${String(i).padStart(6, '0')}`);
      kept.push(params.client_id!, params.grant_type!);
    }
    gc();
    const grown = process.memoryUsage().heapUsed - before;
    // 2000 bodies of 8 KB are 16 MB; 4000 short strings are well under 1 MB.
    expect(grown).toBeLessThan(4 * 1024 * 1024);
    expect(kept).toHaveLength(4000);
  });
});
