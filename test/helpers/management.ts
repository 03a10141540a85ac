import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { loadConfig } from '../../src/config/index.js';
import { EVERY_SCOPE, type ManagementContext } from '../../src/management/context.js';
import { openSqliteStore } from '../../src/store/sqlite.js';
import type { Store } from '../../src/store/types.js';
import { stillClock, type TestClock } from './clock.js';
import { tempDir, type TestServer } from './server.js';

/**
 * The management layer as the CLI calls it, over a fresh SQLite store in a directory of its own, on a clock
 * that stands still: for tests of management operations and their rules. Close the store after the test.
 */
export async function managementContext(
  env: Record<string, string> = {},
): Promise<{ store: Store; ctx: ManagementContext; clock: TestClock }> {
  const clock = stillClock();
  const dataDir = tempDir();
  const store = openSqliteStore(path.join(dataDir, 'tessera.db'), clock.date);
  await store.migrate();
  const config = loadConfig({
    TESSERA_DATA_DIR: dataDir,
    TESSERA_MASTER_KEY: randomBytes(32).toString('base64url'),
    ...env,
  });
  return { store, clock, ctx: { store, config, actor: 'cli:test', holds: EVERY_SCOPE, now: clock.now } };
}

/**
 * The management layer over a running test server's store, holding every scope, as `tessera` on the server's
 * own host calls it: for tests that set up audiences, clients and operators as an operator would. `actor` is
 * what the audit trail records as who made each change; `now`, the clock of its rules (the wall clock if left
 * out).
 */
export function managementOf(t: TestServer, actor = 'cli:test', now?: () => number): ManagementContext {
  return {
    store: t.server.runtime.store,
    config: t.config,
    actor,
    holds: EVERY_SCOPE,
    ...(now ? { now } : {}),
  };
}
