/** A fresh data directory to run the `tessera` CLI in, as an operator would. */
import { spawn } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'vitest';
import { collect, ROOT, TESSERA, tessera, tesseraEnv, type CliResult } from './process.js';
import { tempDir } from './server.js';

/** A fresh data directory and the environment to run with; no TESSERA_* variable is inherited. */
export interface Workspace {
  dir: string;
  env: NodeJS.ProcessEnv;
  run(...args: string[]): Promise<CliResult>;
  /** Runs a command that must succeed (exit 0, nothing on stderr). */
  ok(...args: string[]): Promise<CliResult>;
  /** Runs with `input` on standard input. */
  withInput(input: string, ...args: string[]): Promise<CliResult>;
  /** Writes a file into the data directory; returns its path. */
  write(name: string, text: string): string;
  remove(): void;
}

export function workspace(prefix = 'tessera-cli-test-'): Workspace {
  const dir = tempDir(prefix);
  const env = tesseraEnv({ TESSERA_DATA_DIR: dir, TESSERA_LOG_LEVEL: 'silent' });
  const run = (...args: string[]) => tessera(env, ...args);
  return {
    dir,
    env,
    run,
    async ok(...args) {
      const r = await run(...args);
      expect(r, `tessera ${args.join(' ')}`).toMatchObject({ code: 0, stderr: '' });
      return r;
    },
    withInput(input, ...args) {
      const child = spawn(process.execPath, [...TESSERA, ...args], {
        cwd: ROOT,
        env,
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      child.stdin!.end(input);
      return collect(child);
    },
    write(name, text) {
      const file = path.join(dir, name);
      writeFileSync(file, text);
      return file;
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
