/**
 * HTTP/1.1 spoken by hand over one TCP connection, for tests that need to hold a request half-sent, see
 * which process answered a connection, or read exactly what came back.
 */
import { connect, type Socket } from 'node:net';

export interface RawResponse {
  statusLine: string;
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * Reads one complete response (Content-Length framed) from the socket; rejects on close, on bytes after the
 * response, or after `ms`.
 */
export function readResponse(socket: Socket, ms = 5000): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    let buffer = Buffer.alloc(0);
    const done = (error?: Error, response?: RawResponse) => {
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('close', onClose);
      socket.off('error', onError);
      if (error) reject(error);
      else resolve(response!);
    };
    const onData = (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      const end = buffer.indexOf('\r\n\r\n');
      if (end < 0) return;
      const [statusLine, ...lines] = buffer.subarray(0, end).toString('latin1').split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of lines) {
        const colon = line.indexOf(':');
        headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      const length = headers['content-length'];
      if (length === undefined) return done(new Error(`response without Content-Length: ${statusLine}`));
      const body = buffer.subarray(end + 4);
      if (body.length < Number(length)) return;
      if (body.length > Number(length))
        return done(new Error(`bytes after the response: ${buffer.toString()}`));
      done(undefined, {
        statusLine: statusLine!,
        status: Number(statusLine!.split(' ')[1]),
        headers,
        body: body.toString('utf8'),
      });
    };
    const onClose = () =>
      done(new Error(`connection closed before a complete response: "${buffer.toString()}"`));
    const onError = (error: Error) => done(error);
    const timer = setTimeout(() => done(new Error(`no complete response within ${ms} ms`)), ms);
    socket.on('data', onData);
    socket.once('close', onClose);
    socket.once('error', onError);
  });
}

/** A connection to 127.0.0.1:`port`; rejects on an error or after `ms`. */
export function openSocket(port: number, ms = 5000): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no connection within ${ms} ms`));
    }, ms);
    socket.once('connect', () => {
      clearTimeout(timer);
      resolve(socket);
    });
    socket.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
  });
}

export function getRequest(port: number, target: string, connection = 'keep-alive'): string {
  return `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: ${connection}\r\n\r\n`;
}

/** A complete token request with a form body, as a keep-alive client sends it; `headers` are added lines. */
export function tokenRequest(port: number, form: string, headers: Record<string, string> = {}): string {
  const extra = Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  return (
    `POST /oauth/token HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: keep-alive\r\n${extra}` +
    `Content-Type: application/x-www-form-urlencoded\r\nContent-Length: ${Buffer.byteLength(form)}\r\n\r\n${form}`
  );
}

/** An answer of sendRawAtOnce: the port it came from, and its JSON body parsed. */
export interface JsonAnswer {
  port: number;
  status: number;
  headers: Record<string, string>;
  body: Record<string, unknown>;
}

/**
 * Sends one request to each port of `ports` (`request` makes it for its port), a new connection each: every
 * connection is opened first, then every request is written in the same turn of the event loop, so that they all
 * arrive at once. Each connection stays open until its answer is read and `inspect`, when given, has looked at
 * it: what it returns is added to the answer (which process held the connection is known only while it is open).
 */
export async function sendRawAtOnce<T extends object = object>(
  ports: number[],
  request: (port: number) => string,
  inspect?: (port: number, socket: Socket) => T,
): Promise<(JsonAnswer & T)[]> {
  const sockets = await Promise.all(ports.map((port) => openSocket(port, 15_000)));
  try {
    const answers = sockets.map((socket) => readResponse(socket, 20_000));
    sockets.forEach((socket, i) => socket.write(request(ports[i]!)));
    return await Promise.all(
      answers.map(async (pending, i) => {
        const response = await pending;
        return {
          port: ports[i]!,
          status: response.status,
          headers: response.headers,
          body: JSON.parse(response.body) as Record<string, unknown>,
          ...(inspect?.(ports[i]!, sockets[i]!) as T),
        };
      }),
    );
  } finally {
    for (const socket of sockets) socket.destroy();
  }
}
