import { describe, expect, it } from 'vitest';
import { parseForm } from '../../src/http/body.js';
import { retainedBytes } from '../helpers/memory.js';

describe('form bodies', () => {
  it('parameters kept after the request (cache keys, limit counters, audit events) do not keep its body alive', async () => {
    // URLSearchParams hands out values as slices of the whole body text: a 30-character client id kept in the
    // cache of unknown ids would hold on to up to 8 KiB of body, padding included.
    const pad = 'p'.repeat(8000);
    const id = (i: number) => `unknown-client-${String(i).padStart(6, '0')}`;
    const grown = await retainedBytes(() => {
      const kept: string[] = [];
      for (let i = 0; i < 2000; i++) {
        const params = parseForm(`grant_type=client_credentials&client_id=${id(i)}&pad=${pad}${i}`).params;
        expect(params.client_id).toBe(id(i));
        kept.push(params.client_id!, params.grant_type!);
      }
      return kept;
    });
    // 2000 bodies of 8 KB are 16 MB; 4000 short strings are well under 1 MB.
    expect(grown).toBeLessThan(4 * 1024 * 1024);
  });
});
