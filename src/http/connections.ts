import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { Server as TlsServer } from 'node:tls';
import type { Logger } from 'pino';
import { systemClock, type Clock, type Job } from '../clock.js';

/** How often the warning that the cap is reached may be logged again while it keeps being reached. */
const CAP_WARNING_EVERY_MS = 60_000;
/** How often connections' activity is sampled while many are open (see Connections). */
const SAMPLE_EVERY_MS = 1000;
/** At the cap with no idle connection, the next ranking waits this long at least (arrivals are refused). */
const RERANK_MIN_MS = 50;

/** What the connection tracker counts, read at scrape time (no metrics dependency here). */
export interface ConnectionStats {
  /** Connections open now. */
  open: number;
  /** Idle connections closed to make room for a new one at the cap. */
  closedIdleAtCap: number;
  /** New connections closed at once because the cap was reached and no connection was idle. */
  refusedAtCap: number;
}

interface Tracked {
  /** socket.bytesRead when the connection was last looked at. */
  bytesRead: number;
  /** The sample (a counter, see `tick`) in which the connection was last seen active, or opened. */
  activeAt: number;
}

/**
 * A connection with no request being answered. Node's own closeIdleConnections() asks the same of a socket:
 * its response is assigned to it from the moment the request's headers are parsed until it is written.
 */
function idle(socket: Socket): boolean {
  const response = (socket as Socket & { _httpMessage?: { finished?: boolean } | null })._httpMessage;
  return !response || response.finished === true;
}

/**
 * The HTTP server's connections, each tracked from accept to close, with a cap on how many are open at once.
 *
 * Past the cap, the least recently active idle connection is closed to make room, so a new client is still
 * served by a process that idle connections would otherwise fill up to its file-descriptor limit (then
 * accept() fails, and nobody is served or told). If every connection is busy, the new one is closed at once.
 *
 * The work is per connection (a map entry and a 'close' listener), never per request. Activity is read from
 * socket.bytesRead, which Node keeps anyway: while at least half the cap is open, a sample each second
 * notes which connections read something since the last one; at the cap, the idle ones are ranked by their
 * last active sample (then by age), and that ranking is used for the next arrivals until it is a second old.
 */
export class Connections {
  private readonly open = new Map<Socket, Tracked>();
  private closedIdle = 0;
  private refused = 0;
  /** Advances with each sample; a connection's activeAt is compared against it. */
  private tick = 0;
  private sampler: Job | undefined;
  /** Idle connections, least recently active first, from the last ranking; `next` is the next to close. */
  private ranked: Socket[] = [];
  private next = 0;
  private rankedAt = -Infinity;
  /** The sample the ranking was made in: a connection active in a later one is not closed on its word. */
  private rankedTick = 0;
  private lastWarning = -Infinity;
  private warnedClosed = 0;
  private warnedRefused = 0;
  private drainedWaiter: (() => void) | undefined;
  /** Connections whose next answer closes them: those open when the shutdown began, or all of them. */
  private closing: Set<Socket> | 'all' | undefined;

  constructor(
    server: Server,
    private readonly options: {
      max: number;
      logger: Logger;
      /** The sampler's periodic job (clock.ts); the wall clock when left out. */
      clock?: Clock;
    },
  ) {
    // Over TLS the HTTP connection is the TLS socket (its requests' `socket`), tracked once the handshake is done;
    // until then TLS's own handshake timeout bounds a connection.
    server.on(server instanceof TlsServer ? 'secureConnection' : 'connection', (socket: Socket) =>
      this.accept(socket),
    );
  }

  get stats(): ConnectionStats {
    return { open: this.open.size, closedIdleAtCap: this.closedIdle, refusedAtCap: this.refused };
  }

  get size(): number {
    return this.open.size;
  }

  /** How long ago things happened here is a real event's duration: monotonic time. */
  private now(): number {
    return performance.now();
  }

  private accept(socket: Socket): void {
    if (this.open.size >= this.options.max && !this.makeRoom()) {
      this.refused++;
      this.capReached();
      socket.destroy();
      return;
    }
    this.open.set(socket, { bytesRead: 0, activeAt: this.tick });
    socket.once('close', () => this.closed(socket));
    if (this.sampler === undefined && this.open.size * 2 >= this.options.max) {
      this.sampler = (this.options.clock ?? systemClock).every(SAMPLE_EVERY_MS, () => this.sample());
    }
  }

  private closed(socket: Socket): void {
    this.open.delete(socket);
    if (this.open.size === 0) this.drainedWaiter?.();
  }

  /** Notes which connections read something since the last look; stops sampling once few are open. */
  private sample(): void {
    this.tick++;
    for (const [socket, tracked] of this.open) {
      const read = socket.bytesRead;
      if (read !== tracked.bytesRead) {
        tracked.bytesRead = read;
        tracked.activeAt = this.tick;
      }
    }
    // A ranking more than a second old is not used again: let go of the sockets it holds.
    if (this.ranked.length > 0 && this.now() - this.rankedAt > SAMPLE_EVERY_MS) this.ranked = [];
    if (this.open.size * 4 < this.options.max) {
      this.sampler?.stop();
      this.sampler = undefined;
    }
  }

  /** At the cap: closes the least recently active idle connection. False if none is idle. */
  private makeRoom(): boolean {
    const age = this.now() - this.rankedAt;
    // A ranking serves the arrivals of the next second; one that ran out is redone, but not more than every
    // RERANK_MIN_MS, so that arrivals while every connection is busy do not each pay for a full scan.
    if (age > SAMPLE_EVERY_MS || (this.next >= this.ranked.length && age > RERANK_MIN_MS)) this.rank();
    while (this.next < this.ranked.length) {
      const socket = this.ranked[this.next++]!;
      const tracked = this.open.get(socket);
      // Closed meanwhile, busy now, or active since the ranking: not this one.
      if (
        tracked === undefined ||
        !idle(socket) ||
        socket.bytesRead !== tracked.bytesRead ||
        tracked.activeAt > this.rankedTick
      )
        continue;
      this.open.delete(socket);
      socket.destroy();
      this.closedIdle++;
      this.capReached();
      return true;
    }
    return false;
  }

  /** Ranks the idle connections, least recently active first (ties: the oldest first, the map's order). */
  private rank(): void {
    this.sample();
    const candidates: { socket: Socket; activeAt: number }[] = [];
    for (const [socket, tracked] of this.open) {
      if (idle(socket)) candidates.push({ socket, activeAt: tracked.activeAt });
    }
    // Array.prototype.sort is stable: equal activity keeps the order of opening.
    candidates.sort((a, b) => a.activeAt - b.activeAt);
    this.ranked = candidates.map((candidate) => candidate.socket);
    this.next = 0;
    this.rankedAt = this.now();
    this.rankedTick = this.tick;
  }

  /** Logs that the cap is reached: at once, then at most once a minute with what was done since. */
  private capReached(): void {
    const now = this.now();
    if (now - this.lastWarning < CAP_WARNING_EVERY_MS) return;
    this.lastWarning = now;
    this.options.logger.warn(
      {
        maxConnections: this.options.max,
        open: this.open.size,
        closedIdle: this.closedIdle - this.warnedClosed,
        refused: this.refused - this.warnedRefused,
      },
      'connection cap reached: closing the least recently active idle connections to make room for new ones',
    );
    this.warnedClosed = this.closedIdle;
    this.warnedRefused = this.refused;
  }

  /**
   * From now on, the answer on each connection open now closes it (their clients may be held to this instance
   * by a load balancer or a connection-tracking NAT, e.g. a Kubernetes Service, that no longer sends it new
   * connections). Connections opened later are kept alive until closeAllAfterAnswer(): a client that reaches
   * the instance on a new connection is served there, instead of being made to connect again and again,
   * which at the moment the listener closes would leave it in the kernel's accept queue, reset unanswered.
   */
  closeAfterAnswer(): void {
    this.closing ??= new Set(this.open.keys());
  }

  /** From now on, every answer closes its connection. */
  closeAllAfterAnswer(): void {
    this.closing = 'all';
  }

  /** Whether the answer on this connection closes it (see closeAfterAnswer). */
  closesAfterAnswer(socket: Socket): boolean {
    return this.closing === 'all' || (this.closing?.has(socket) ?? false);
  }

  /**
   * Resolves once every connection has closed, or after `timeoutMs`: then what is left is destroyed (and
   * counted in the answer). Connections are not hurried: each closes after its answer (the server sends
   * `Connection: close` while shutting down) or when its keep-alive timeout, announced to the client, ends.
   */
  async drained(timeoutMs: number): Promise<number> {
    if (this.open.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        this.drainedWaiter = resolve;
        timer = setTimeout(resolve, timeoutMs);
      });
      clearTimeout(timer);
      this.drainedWaiter = undefined;
    }
    const left = [...this.open.keys()];
    for (const socket of left) socket.destroy();
    this.open.clear();
    this.sampler?.stop();
    this.sampler = undefined;
    return left.length;
  }
}
