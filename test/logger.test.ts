/**
 * The log destination (src/logger.ts): asynchronous writes to standard output, in whole lines of at most
 * PIPE_BUF bytes, so that the processes of `--workers` sharing one stdout never cut into each other's lines.
 * Runs the compiled logger (dist/, built by `npm test`) in real processes on a real pipe.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';

const LOGGER = pathToFileURL(path.resolve('dist/logger.js')).href;

/** Runs `processes` copies of a script that logs `lines` lines as fast as it can, all into one pipe. */
function logTogether(processes: number, lines: number): Promise<string> {
  const script =
    `import { createLogger } from ${JSON.stringify(LOGGER)};` +
    `const log = createLogger({ logLevel: 'info' });` +
    `for (let i = 0; i < ${lines}; i++) log.info({ audit: { n: i, pid: process.pid, pad: 'x'.repeat(300 + (i % 97)) } }, 'line');` +
    // process.exit flushes what is still buffered (pino's exit handler)
    `process.exit(0);`;
  const node = JSON.stringify(process.execPath);
  const one = `${node} --input-type=module -e ${JSON.stringify(script).replace(/\$/g, '\\$')}`;
  const shell = Array.from({ length: processes }, () => `${one} &`).join(' ') + ' wait';
  return new Promise((resolve, reject) => {
    const child = spawn('sh', ['-c', shell], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`exit ${code}`))));
  });
}

describe('the log destination', () => {
  it('two processes logging at full speed into one pipe: every line arrives whole, none lost', async () => {
    const lines = 5000;
    const out = await logTogether(2, lines);
    const parsed = out
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as { msg: string; audit: { n: number; pid: number } });
    expect(parsed).toHaveLength(2 * lines);
    const byPid = new Map<number, number[]>();
    for (const { msg, audit } of parsed) {
      expect(msg).toBe('line');
      byPid.set(audit.pid, [...(byPid.get(audit.pid) ?? []), audit.n]);
    }
    expect(byPid.size).toBe(2);
    // Each process's lines arrive complete and in order.
    for (const ns of byPid.values()) expect(ns).toEqual(Array.from({ length: lines }, (_, i) => i));
  }, 30_000);
});
