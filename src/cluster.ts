import cluster, { type Worker } from 'node:cluster';
import type { Logger } from 'pino';
import type { Config } from './config/index.js';
import { coordinateListeners } from './cluster-listeners.js';
import { SIGNING_ALGS } from './domain/jose.js';
import { MAX_TOKEN_TTL } from './domain/validate.js';
import { Keyring } from './keys/keyring.js';
import { resolveMasterKey } from './keys/master-key.js';
import { createLogger } from './logger.js';
import { serveClusterMetrics } from './metrics/cluster.js';
import { firstTokenHint, runServer } from './main.js';
import { openStore } from './runtime/store.js';

/** Beyond each worker's own drain (delay + timeout), time for it to flush the audit trail and exit. */
const STOP_MARGIN_MS = 15_000;
const MAX_RESTART_DELAY_MS = 30_000;
/** A worker that lived this long is considered healthy: the restart back-off starts over. */
const HEALTHY_AFTER_MS = 10_000;

/**
 * The primary prepares the store once (migrations, a key per algorithm), so workers never race to do it,
 * and tells the operator how to get a first token.
 */
async function prepare(config: Config, logger: Logger): Promise<void> {
  const master = resolveMasterKey(config, (message) => logger.warn(message));
  const store = await openStore(config, { poolSize: 2 });
  try {
    await new Keyring(store, master, { maxTokenTtl: MAX_TOKEN_TTL, retryAfter: config.retryAfter }).load(
      SIGNING_ALGS,
    );
    if ((await store.countClients()) === 0) process.stderr.write(firstTokenHint(config.issuer) + '\n');
  } finally {
    await store.close();
  }
}

/**
 * `tessera serve --workers N`: N processes share one port (node:cluster hands connections out round-robin),
 * each with its own cache and the same behaviour. A worker that dies is replaced, with a growing delay if it
 * keeps dying young. SIGTERM/SIGINT stop every worker gracefully.
 */
export async function runCluster(config: Config, workers: number): Promise<void> {
  if (cluster.isWorker) return runServer(config, { hint: false });

  const logger = createLogger(config);
  await prepare(config, logger);
  if (config.metrics) serveClusterMetrics();

  let stopping = false;
  let restartDelay = 500;
  const started = new Map<Worker, number>();
  const fork = (): void => {
    const worker = cluster.fork();
    started.set(worker, performance.now());
  };

  const listeners = coordinateListeners(() => started.keys());
  cluster.on('exit', (worker, code, signal) => {
    const lived = performance.now() - (started.get(worker) ?? 0);
    started.delete(worker);
    if (stopping) {
      listeners.check();
      if (started.size === 0) {
        logger.info('all workers stopped');
        process.exit(0);
      }
      return;
    }
    restartDelay = lived > HEALTHY_AFTER_MS ? 500 : Math.min(restartDelay * 2, MAX_RESTART_DELAY_MS);
    logger.warn(
      { pid: worker.process.pid, code, signal, restartInMs: restartDelay },
      'worker died; replacing it',
    );
    setTimeout(() => !stopping && fork(), restartDelay);
  });

  // Each worker drains as a single process does (see shutDown in main.ts); the primary waits for them all.
  const stopTimeoutMs = (config.shutdownDelay + config.shutdownTimeout) * 1000 + STOP_MARGIN_MS;
  const stop = (signal: NodeJS.Signals): void => {
    if (stopping) {
      // A second signal: every worker gets a second one too, and exits at once; so does the primary.
      logger.warn({ signal }, 'second signal: exiting at once');
      for (const worker of started.keys()) worker.process.kill('SIGTERM');
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal, workers: started.size }, 'stopping workers: finishing requests in flight');
    if (started.size === 0) process.exit(0);
    for (const worker of started.keys()) worker.process.kill('SIGTERM');
    setTimeout(() => {
      logger.error('workers did not stop in time; killing them');
      for (const worker of started.keys()) worker.process.kill('SIGKILL');
      process.exit(1);
    }, stopTimeoutMs).unref();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  // TLS files reloaded (docs/mtls.md): each worker reloads its own server's.
  process.on('SIGHUP', () => {
    for (const worker of started.keys()) worker.process.kill('SIGHUP');
  });

  for (let i = 0; i < workers; i++) fork();
  logger.info({ workers, pid: process.pid }, 'primary started');
}
