/** A fresh data directory to run the `tessera` CLI in, as an operator would. */
import { spawn } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect } from 'vitest';
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

/**
 * A group of tests on one data directory. Groups run side by side (a CLI run is mostly Node starting up);
 * the tests of a group run in order and build on each other.
 */
export function group(name: string, body: (ws: Workspace) => void): void {
  describe(name, { concurrent: true }, () => {
    const ws = {} as Workspace; // made when the group runs, not when a filter skips it
    beforeAll(() => void Object.assign(ws, workspace()));
    afterAll(() => ws.remove?.());
    describe('in order', { concurrent: false }, () => body(ws));
  });
}

/** The error document of a run with --json: nothing on stdout, exactly one JSON line on stderr. */
export function jsonError(r: CliResult): unknown {
  expect(r.stdout).toBe('');
  expect(r.stderr.endsWith('\n'), `stderr: ${r.stderr}`).toBe(true);
  expect(r.stderr.trimEnd().split('\n'), `stderr must be one JSON line, got:\n${r.stderr}`).toHaveLength(1);
  return JSON.parse(r.stderr);
}

/**
 * Each `[value, message]` of `cases`, given as `tessera <args(value)> --json`, is refused as an invalid field:
 * exit 2, and the message in the error document. Run all at once.
 */
export async function expectFieldRefusals(
  ws: Workspace,
  args: (value: string) => string[],
  cases: readonly (readonly [string, string])[],
): Promise<void> {
  const results = await Promise.all(cases.map(([value]) => ws.run(...args(value), '--json')));
  results.forEach((r, i) => {
    expect(r.code, cases[i]![0]).toBe(2);
    expect(jsonError(r)).toEqual({ error: 'invalid_field', message: cases[i]![1] });
  });
}

/** A text table: a header line, then a line per row; columns aligned, cells apart by two or more spaces. */
export function expectTable(text: string, header: string[], rows: unknown[][]): void {
  expect(text.endsWith('\n')).toBe(true);
  const lines = text.slice(0, -1).split('\n');
  expect(lines.map((line) => line.split(/ {2,}/))).toEqual([header, ...rows]);
  const starts = (line: string) => [...line.matchAll(/(?:^|(?<= {2}))\S/g)].map((m) => m.index);
  for (const line of lines.slice(1)) expect(starts(line)).toEqual(starts(lines[0]!));
}
