import type { FastifyInstance } from 'fastify';
import type { SigningAlg } from '../../domain/jose.js';
import type { Keyring } from '../../keys/keyring.js';
import type { Outage } from '../../outage.js';
import type { Directory } from '../../read-model/directory.js';
import type { Store } from '../../store/types.js';

/** Where TESSERA_APPLY_FILE stands (runtime/config-files.ts), as /readyz and the metrics show it. */
export interface ApplyFileStatus {
  file: string;
  /** Whether the last reading of the file was applied (or needed nothing). */
  ok: boolean;
  /** SHA-256 of the text last applied, when one was. */
  applied_digest?: string;
  applied_at?: string;
  /** Why the last reading was not applied: each problem with its place (line, column, JSON pointer). */
  errors?: { message: string; line?: number; column?: number; pointer?: string }[];
}

/**
 * What /readyz, which anyone may ask, shows of the apply file: whether it is applied, what was last, and where each
 * error is (its line, column and JSON pointer) — not the errors' words, which name files, clients and audiences:
 * those are in the log.
 */
const publicStatus = (status: ApplyFileStatus) => ({
  ok: status.ok,
  ...(status.applied_digest === undefined
    ? {}
    : { applied_digest: status.applied_digest, applied_at: status.applied_at }),
  ...(status.errors === undefined
    ? {}
    : {
        errors: status.errors.map(({ line, column, pointer }) => ({
          ...(line === undefined ? {} : { line }),
          ...(column === undefined ? {} : { column }),
          ...(pointer === undefined ? {} : { pointer }),
        })),
      }),
});

/**
 * /healthz: the process answers. /readyz: the store answers, the default signing key is loaded, and the
 * change feed is being followed; from a shutdown signal on, 503 at once (the server is draining).
 */
export function healthRoutes(
  app: FastifyInstance,
  store: Pick<Store, 'ping'>,
  keyring: Keyring,
  directory: Directory,
  defaultAlg: SigningAlg,
  options: {
    shutdown: { readonly draining: boolean };
    storeOutage?: Outage;
    /**
     * A change feed not read for this long means this instance may be serving stale clients and keys
     * (feedStaleMs in config/index.ts: derived from TESSERA_CHANGE_POLL_MS and TESSERA_STALE_WINDOW).
     */
    feedStaleMs: number;
    /**
     * TESSERA_APPLY_FILE's state: shown in the body (`checks.apply_file`, `apply_file`), never a reason to answer
     * 503 — the configuration applied before still serves, and a bad ConfigMap must not take every instance out.
     */
    applyFile?: { readonly status: ApplyFileStatus } | undefined;
  },
): void {
  const noStore = { 'cache-control': 'no-store' };
  app.get('/healthz', (_request, reply) => reply.headers(noStore).send({ status: 'ok' }));
  app.get('/readyz', async (_request, reply) => {
    if (options.shutdown.draining) {
      // Load balancers take this instance out of rotation while it still serves (TESSERA_SHUTDOWN_DELAY).
      return reply
        .code(503)
        .headers(noStore)
        .send({ status: 'not_ready', checks: { shutdown: 'draining' } });
    }
    const checks = {
      store: 'ok',
      signing_key: keyring.hasActive(defaultAlg) ? 'ok' : 'missing',
      // Changes made elsewhere reach this instance only while it reads the feed.
      change_feed: directory.following(options.feedStaleMs) ? 'ok' : 'stale',
    };
    const started = performance.now();
    try {
      // A store that hangs is as unready as one that refuses: answer within two seconds either way.
      await Promise.race([
        store.ping(),
        new Promise((_, reject) => setTimeout(() => reject(new Error('store ping timed out')), 2000).unref()),
      ]);
    } catch (error) {
      checks.store = 'unreachable';
      // Part of the store's outage, logged once however often the probe runs. Not if the change feed was
      // read since this ping began: the store answered meanwhile (its recovery may already be logged).
      if (!directory.following(performance.now() - started)) {
        options.storeOutage?.failed(error, { during: 'readiness probe' });
      }
    }
    const ready = Object.values(checks).every((check) => check === 'ok');
    const applied = options.applyFile?.status;
    return reply
      .code(ready ? 200 : 503)
      .headers(noStore)
      .send({
        status: ready ? 'ready' : 'not_ready',
        checks: applied === undefined ? checks : { ...checks, apply_file: applied.ok ? 'ok' : 'error' },
        ...(applied === undefined ? {} : { apply_file: publicStatus(applied) }),
      });
  });
}
