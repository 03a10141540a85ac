import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

// A real gc() without --expose-gc on the command line, so that heap figures are not noise.
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** Full garbage collections: what nothing holds any more is gone (a WeakRef to it derefs to undefined). */
export function collectGarbage(): void {
  gc();
  gc();
}

/** The heap in use after full garbage collections. */
export function heapUsed(): number {
  collectGarbage();
  return process.memoryUsage().heapUsed;
}

/**
 * How much the heap grows, after full garbage collections, while `run` builds what it returns: the memory that
 * what it keeps holds on to. The result stays reachable until the second measurement.
 */
export async function retainedBytes(run: () => unknown): Promise<number> {
  const before = heapUsed();
  const kept = await run();
  const grown = heapUsed() - before;
  if (kept === undefined) throw new Error('run must return what it keeps');
  return grown;
}
