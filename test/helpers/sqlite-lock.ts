import { DatabaseSync } from 'node:sqlite';

/**
 * Another connection to `file` (an apply from the CLI, here on this thread) takes SQLite's write lock and commits
 * after `ms`: `heldAt` is when it took it. The caller closes `holder`.
 */
export function holdWriteLock(file: string, ms: number): { holder: DatabaseSync; heldAt: number } {
  const holder = new DatabaseSync(file);
  holder.exec('BEGIN IMMEDIATE');
  const heldAt = performance.now();
  setTimeout(() => holder.exec('COMMIT'), ms);
  return { holder, heldAt };
}
