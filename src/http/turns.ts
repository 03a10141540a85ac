/**
 * While new connections arrive, the most requests one event-loop iteration resumes (see Turns.end). libuv accepts
 * one connection per iteration (libuv/libuv#3696), and an iteration that answers a batch of a thousand requests
 * runs ~85 ms: a burst of new connections waited for seconds in the listen queue, each for as many iterations as
 * were ahead of it. Sixteen tokens are ~1 ms; in between, the connections already open are answered in whole
 * batches.
 */
export const TURN_MAX = 16;

/** Requests waiting for their turn, at most TURN_MAX. */
interface Group {
  promise: Promise<void>;
  resolve: () => void;
  size: number;
  next: Group | undefined;
}

/**
 * The batches of an app's token, introspection and revocation requests: one instance per app (buildApp), told of
 * every connection its server accepts.
 *
 * A request waits for `end()`, which settles in the check phase of this event-loop iteration, once every socket
 * readable in it has been read. So the requests that arrived together are handled as a batch, in two passes:
 * every token is issued (on a warm cache synchronously, signature included), and only then, a microtask later
 * each, every answer is written, back to back. Writes in a row cost the kernel far less than writes spaced by a
 * signature each (on loopback each one also wakes the reading thread): 1.6–2× the tokens per core in bench/
 * (bench/README.md, _Batches_). The wait is the rest of one loop iteration.
 *
 * While connections are being accepted, an iteration resumes at most TURN_MAX requests, the oldest; the others
 * resume in the iterations after it, each iteration's poll phase (the next connection, the sockets that became
 * readable) running in between.
 */
export class Turns {
  /** The groups waiting, oldest first. */
  private first: Group | undefined;
  private last: Group | undefined;
  /** A connection was accepted since the last check phase that resumed requests. */
  private accepted = false;
  private readonly resume = (): void => {
    const one = this.accepted;
    this.accepted = false;
    do {
      const group = this.first!;
      this.first = group.next;
      group.resolve();
    } while (!one && this.first !== undefined);
    if (this.first === undefined) this.last = undefined;
    // Queued now, it runs in the next iteration's check phase, after that iteration's poll phase.
    else setImmediate(this.resume);
  };

  /** Called for every connection the server accepts: the next iterations resume one group each. */
  readonly connectionAccepted = (): void => {
    this.accepted = true;
  };

  /** Settles at the end of this turn, with the requests of its group (see the class). */
  end(): Promise<void> {
    let group = this.last;
    if (group === undefined || group.size >= TURN_MAX) {
      let resolve!: () => void;
      const promise = new Promise<void>((settle) => (resolve = settle));
      group = { promise, resolve, size: 0, next: undefined };
      if (this.last === undefined) {
        this.first = group;
        setImmediate(this.resume);
      } else this.last.next = group;
      this.last = group;
    }
    group.size++;
    return group.promise;
  }
}
