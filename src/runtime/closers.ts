/** One part's close: it stops its timers and lets go of its connections, threads and locks. */
type Closer = () => void | Promise<void>;

/**
 * What a start has opened, to be closed again: each part pushes its closer as it opens, and close() runs them
 * in reverse, the last opened first, each whatever the ones before did, so that nothing is left running
 * against a closed store or holding the process open. The same close serves a runtime that started (its
 * close()) and a start that failed part-way (what it had opened so far).
 */
export class Closers {
  private readonly closers: Closer[] = [];
  private closing: Promise<void> | undefined;

  push(closer: Closer): void {
    this.closers.push(closer);
  }

  /** Closes everything pushed, in reverse; rejects with the first failure, once all have run. Once only. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      const failures: unknown[] = [];
      for (const closer of this.closers.reverse()) {
        try {
          await closer();
        } catch (error) {
          failures.push(error);
        }
      }
      if (failures.length > 0) throw failures[0];
    })();
    return this.closing;
  }
}
