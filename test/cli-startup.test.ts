/**
 * What a `tessera` command loads before it runs: the server's stack only for `serve`, and the PostgreSQL driver and
 * the Redis client only where they are configured.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ROOT } from './helpers/process.js';

/** The packages among `watched` that importing `module` (built, in dist/) loads, found by a resolve hook. */
function packagesLoadedBy(module: string, watched: readonly string[]): Promise<string[]> {
  const url = pathToFileURL(path.join(ROOT, 'dist', module)).href;
  const probe = `
import { registerHooks } from 'node:module';
const watched = ${JSON.stringify(watched)};
const loaded = new Set();
registerHooks({
  resolve(specifier, context, next) {
    const resolved = next(specifier, context);
    const name = /\\/node_modules\\/((?:@[^/]+\\/)?[^/]+)\\//.exec(resolved.url)?.[1];
    if (name !== undefined && watched.includes(name)) loaded.add(name);
    return resolved;
  },
});
await import(${JSON.stringify(url)});
process.stdout.write(JSON.stringify([...loaded].sort()));
`;
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ['--disable-warning=ExperimentalWarning', '--input-type=module', '-e', probe],
      { timeout: 20_000 },
      (error, stdout) => (error ? reject(error) : resolve(JSON.parse(stdout) as string[])),
    );
  });
}

const SERVER_PACKAGES = ['fastify', 'ioredis', 'pg', 'pino', 'prom-client'];

describe('the tessera command', () => {
  it('loads none of the server’s packages for its commands; `serve` loads them when it runs', async () => {
    // Every command used to load the whole server (Fastify, metrics, Redis, the logger) through `serve`'s
    // imports: ~1.7–2.9 s and 125 MB for `client list` on a slow machine, 0.6–0.8 s and 86 MB without.
    expect(await packagesLoadedBy('cli/index.js', SERVER_PACKAGES)).toEqual([]);
    // The probe sees them where they are loaded: the server's own entry.
    expect(await packagesLoadedBy('main.js', SERVER_PACKAGES)).toEqual(['fastify', 'pino', 'prom-client']);
  });

  it('loads the PostgreSQL driver and the Redis client only with the modules that use them, imported when configured', async () => {
    // A server on SQLite without Redis holds neither (README, "Memory"): runtime/store.ts and runtime/parts.ts
    // import these two modules only for a PostgreSQL URL and a Redis URL.
    expect(await packagesLoadedBy('store/postgres.js', SERVER_PACKAGES)).toEqual(['pg']);
    expect(await packagesLoadedBy('limits/redis.js', SERVER_PACKAGES)).toEqual(['ioredis']);
  });
});
