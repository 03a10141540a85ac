/** Several `tessera serve` instances on one PostgreSQL database, as an operator runs them behind a load balancer. */
import { startServe, tesseraEnv, type Serve } from './process.js';
import { freePort } from './server.js';

/**
 * The environment every instance shares: the database, one issuer and one master key; listening on 127.0.0.1,
 * logging warnings; then `settings`.
 */
export function sharedDatabaseEnv(
  databaseUrl: string,
  issuer: string,
  settings: Record<string, string> = {},
): NodeJS.ProcessEnv {
  return tesseraEnv({
    TESSERA_DATABASE_URL: databaseUrl,
    TESSERA_ISSUER: issuer,
    TESSERA_HOST: '127.0.0.1',
    TESSERA_LOG_LEVEL: 'warn',
    ...settings,
  });
}

/** `count` instances with `env` (and `settingsOf` each), each on a free port, all started at once. */
export async function startInstances(
  env: NodeJS.ProcessEnv,
  count: number,
  settingsOf: (i: number) => Record<string, string> = () => ({}),
): Promise<Serve[]> {
  const ports: number[] = [];
  for (let i = 0; i < count; i++) ports.push(await freePort());
  return Promise.all(
    ports.map((port, i) => startServe({ ...env, ...settingsOf(i), TESSERA_PORT: String(port) })),
  );
}
