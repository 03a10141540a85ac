import cluster from 'node:cluster';
import { AggregatorRegistry, type Registry } from 'prom-client';
import type { Exposition } from './metrics.js';

const REQUEST = 'tessera:metrics-request';
const RESPONSE = 'tessera:metrics-response';
/** A worker asking for the cluster's metrics gives up after this long (prom-client's own limit is 5 s). */
const TIMEOUT_MS = 6000;

interface MetricsResponse {
  type: typeof RESPONSE;
  id: number;
  text?: string;
  contentType?: string;
  error?: string;
}

/**
 * In the primary of `tessera serve --workers N`: a worker that is asked for /metrics asks the primary, which
 * collects every worker's registry (prom-client's AggregatorRegistry) and answers with the sums, so a
 * scrape sees the whole cluster whichever worker it lands on.
 */
export function serveClusterMetrics(): void {
  const aggregator = new AggregatorRegistry();
  cluster.on('message', (worker, message: { type?: string; id?: number }) => {
    if (message?.type !== REQUEST || typeof message.id !== 'number') return;
    const id = message.id;
    const reply = (answer: Omit<MetricsResponse, 'type' | 'id'>): void => {
      if (worker.isConnected()) worker.send({ type: RESPONSE, id, ...answer } satisfies MetricsResponse);
    };
    aggregator.clusterMetrics().then(
      (text) => reply({ text, contentType: aggregator.contentType }),
      (error: unknown) => reply({ error: error instanceof Error ? error.message : String(error) }),
    );
  });
}

/**
 * In a worker: makes `registry` the one the primary collects, and returns a function that fetches the
 * whole cluster's exposition through the primary.
 */
export function clusterExposition(registry: Registry): () => Promise<Exposition> {
  AggregatorRegistry.setRegistries([registry]);
  new AggregatorRegistry(); // installs this worker's answer to the primary's collection requests
  const pending = new Map<number, (response: MetricsResponse) => void>();
  let next = 0;
  process.on('message', (message: MetricsResponse) => {
    if (message?.type === RESPONSE) pending.get(message.id)?.(message);
  });
  return () =>
    new Promise<Exposition>((resolve, reject) => {
      const id = next++;
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(new Error('the primary did not answer with the cluster metrics in time'));
      }, TIMEOUT_MS);
      pending.set(id, (response) => {
        clearTimeout(timer);
        pending.delete(id);
        if (response.text !== undefined && response.contentType !== undefined)
          resolve({ contentType: response.contentType, text: response.text });
        else reject(new Error(`cluster metrics: ${response.error ?? 'no answer'}`));
      });
      process.send!({ type: REQUEST, id });
    });
}
