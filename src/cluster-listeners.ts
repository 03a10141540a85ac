import cluster, { type Worker } from 'node:cluster';

const CLOSED = 'tessera:listener-closed';
const ALL_CLOSED = 'tessera:listeners-closed';

/**
 * Under `--workers`, the port stays open (in the primary) until the last worker has closed its listener:
 * until then a client that reconnects is handed to a worker that is still listening, or, if that one closes
 * meanwhile, held by the primary and reset when the port closes. So a worker keeps its connections alive
 * until every worker has stopped listening, and only then asks its clients to reconnect (they are refused).
 *
 * In a worker: tells the primary that this worker's listener is closed (after Node's own message that
 * closes it, on the same channel), and resolves once the primary says every worker's is, or after
 * `timeoutMs` whatever happens.
 */
export function listenerClosedEverywhere(timeoutMs: number): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      process.off('message', onMessage);
      resolve();
    };
    const onMessage = (message: { type?: string }): void => {
      if (message?.type === ALL_CLOSED) done();
    };
    const timer = setTimeout(done, timeoutMs);
    process.on('message', onMessage);
    if (process.connected) process.send!({ type: CLOSED });
    else done();
  });
}

/**
 * In the primary, once stopping: `workers()` are the live workers; when each has said its listener is
 * closed, every one is told. Call `check()` again when a worker exits.
 */
export function coordinateListeners(workers: () => Iterable<Worker>): { check(): void } {
  const closed = new Set<number>();
  let told = false;
  const check = (): void => {
    if (told) return;
    const live = [...workers()];
    if (!live.every((worker) => closed.has(worker.id))) return;
    told = true;
    for (const worker of live) if (worker.isConnected()) worker.send({ type: ALL_CLOSED });
  };
  cluster.on('message', (worker, message: { type?: string }) => {
    if (message?.type !== CLOSED) return;
    closed.add(worker.id);
    check();
  });
  return { check };
}
