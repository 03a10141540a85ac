import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/**
 * How much the heap grows, after full garbage collections, while `run` builds what it returns: the memory that
 * what it keeps holds on to. The result stays reachable until the second measurement.
 */
export async function retainedBytes(run: () => unknown): Promise<number> {
  gc();
  const before = process.memoryUsage().heapUsed;
  const kept = await run();
  gc();
  const grown = process.memoryUsage().heapUsed - before;
  if (kept === undefined) throw new Error('run must return what it keeps');
  return grown;
}
