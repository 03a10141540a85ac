/**
 * The apply file followed on the runtime's clock (runtime/config-files.ts), in the test's process: a refusal is
 * logged once however often the file is read again, and the file mended is applied at the next reading. The clock
 * is the test's: each reading is a step of it, not a wait (test/config-files.test.ts runs the same in `tessera serve`).
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { ApplyFile } from '../../src/runtime/config-files.js';
import { stillClock } from '../helpers/clock.js';
import { managementContext } from '../helpers/management.js';
import { tempDir } from '../helpers/server.js';

const API = 'https://api.example.com';
const closing: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closing.splice(0)) await close();
});

describe('the apply file, read on the runtime clock', () => {
  it('logs a refusal once however often it is read again, and applies the mended file at the next reading', async () => {
    const { store, ctx } = await managementContext();
    closing.push(() => store.close());
    const clock = stillClock();
    const lines: { msg: string; errors?: unknown }[] = [];
    const logger = createLogger(
      { logLevel: 'info' },
      { write: (line: string) => void lines.push(JSON.parse(line) as { msg: string }) },
    );
    const file = path.join(tempDir('tessera-apply-clock-'), 'tessera.yaml');
    writeFileSync(file, `audiences:\n  - identifier: ${API}\n    token_ttl: 5\n`);
    const applyFile = new ApplyFile(store, ctx.config, { path: file, prune: false }, clock, logger);
    closing.push(() => applyFile.close());
    await applyFile.start();
    const refused = 'apply file refused: the configuration applied before is kept';
    expect(applyFile.status.ok).toBe(false);
    for (let reading = 0; reading < 3; reading++) {
      clock.advance(5000);
      await applyFile.check();
    }
    expect(lines.filter((l) => l.msg === refused)).toEqual([
      expect.objectContaining({
        errors: [
          {
            pointer: '/audiences/0/token_ttl',
            line: 3,
            column: 16,
            message: 'token lifetime must be a whole number of seconds from 60 to 86400',
          },
        ],
      }),
    ]);

    writeFileSync(file, `audiences:\n  - identifier: ${API}\n`);
    clock.advance(5000);
    await applyFile.check();
    expect(applyFile.status).toMatchObject({ ok: true, applied_at: clock.iso() });
    expect(lines.map((l) => l.msg)).toEqual([refused, 'apply file applied']);
    expect((await store.findAudience(API))?.url).toBe(API);
  });
});
