/**
 * A keep-alive load generator on raw sockets, for tests that put a real server under load and then do
 * something to it (kill it, signal it, starve its store): every answer is parsed and kept, so a test can
 * hold the server to each one (every 200's token id in the audit trail, no connection reset).
 */
import { connect, type Socket } from 'node:net';

interface LoadResult {
  /** Answers by status. */
  statuses: Map<number, number>;
  /** The `jti` of every token answered 200. */
  jtis: string[];
  /** Connections that failed with a request outstanding (reset, closed before the answer), by error code. */
  failures: Map<string, number>;
  /** Requests written in all. */
  sent: number;
  /** Milliseconds each answer took, in the order they came. */
  latencies: number[];
}

export interface Load {
  /**
   * Stops sending; resolves when every connection has its last answer (or has failed). A connection still
   * waiting after `ms` is destroyed and counted as a failure ('no answer').
   */
  stop(ms?: number): Promise<LoadResult>;
  /** Answers so far. */
  answered(): number;
}

function jtiOf(body: string): string | undefined {
  try {
    const token = (JSON.parse(body) as { access_token?: string }).access_token;
    if (!token) return undefined;
    return (JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as { jti: string }).jti;
  } catch {
    return undefined;
  }
}

/**
 * `connections` keep-alive connections to 127.0.0.1:`port`, each sending `request` (whole HTTP/1.1 request
 * bytes, or a function that makes each one) as soon as the previous answer is complete. A connection the server closes after an answer
 * (Connection: close) is opened again, unless `reopen` is false.
 */
export function keepAliveLoad(
  port: number,
  request: string | (() => string),
  connections: number,
  options: {
    reopen?: boolean;
    /**
     * Each connection sends at most one request per this many milliseconds (an open rate, not the server's
     * fastest): latency is then the server's answer time, not the queue of a saturated 2-core machine.
     */
    intervalMs?: number;
  } = {},
): Load {
  const result: LoadResult = {
    statuses: new Map(),
    jtis: [],
    failures: new Map(),
    sent: 0,
    latencies: [],
  };
  let stopping = false;
  let timedOut = false;
  let answered = 0;
  const sockets = new Set<Socket>();
  const fixed = typeof request === 'string' ? Buffer.from(request) : undefined;
  const fail = (code: string) => result.failures.set(code, (result.failures.get(code) ?? 0) + 1);

  const run = (): Promise<void> =>
    new Promise((resolve) => {
      let socket: Socket;
      let buffer: Buffer = Buffer.alloc(0);
      let outstanding = false;
      let started = 0;
      let closeAfter = false;
      const send = () => {
        if (stopping) {
          socket.end();
          return;
        }
        outstanding = true;
        started = performance.now();
        result.sent++;
        socket.write(fixed ?? (request as () => string)());
      };
      const open = () => {
        socket = connect({ host: '127.0.0.1', port });
        sockets.add(socket);
        buffer = Buffer.alloc(0);
        closeAfter = false;
        socket.on('connect', send);
        socket.on('data', (chunk: Buffer) => {
          buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk]);
          for (;;) {
            const end = buffer.indexOf('\r\n\r\n');
            if (end < 0) return;
            const head = buffer.subarray(0, end).toString('latin1');
            const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
            if (buffer.length < end + 4 + length) return;
            const status = Number(head.split(' ', 2)[1]);
            const body = buffer.subarray(end + 4, end + 4 + length).toString();
            buffer = buffer.subarray(end + 4 + length);
            outstanding = false;
            answered++;
            result.latencies.push(performance.now() - started);
            result.statuses.set(status, (result.statuses.get(status) ?? 0) + 1);
            if (status === 200) {
              const jti = jtiOf(body);
              if (jti) result.jtis.push(jti);
            }
            closeAfter = /\r\nconnection: *close/i.test(head);
            if (closeAfter) continue;
            const wait =
              options.intervalMs === undefined ? 0 : started + options.intervalMs - performance.now();
            if (wait > 0) setTimeout(send, wait);
            else send();
          }
        });
        socket.on('error', (error: NodeJS.ErrnoException) => {
          if (outstanding) fail(error.code ?? error.message);
          outstanding = false;
        });
        socket.on('close', () => {
          sockets.delete(socket);
          if (outstanding) fail(stopping && timedOut ? 'no answer' : 'closed before the answer');
          outstanding = false;
          if (!stopping && (closeAfter || options.reopen === true) && options.reopen !== false) open();
          else resolve();
        });
      };
      open();
    });

  const runs = Array.from({ length: connections }, run);
  return {
    answered: () => answered,
    async stop(ms = 10_000) {
      stopping = true;
      const timer = setTimeout(() => {
        timedOut = true;
        for (const socket of sockets) socket.destroy();
      }, ms);
      await Promise.all(runs);
      clearTimeout(timer);
      return result;
    },
  };
}
