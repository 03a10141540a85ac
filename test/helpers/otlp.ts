/**
 * A receiver of OTLP traces for tests: OTLP/HTTP (protobuf and JSON) and OTLP/gRPC, every request kept as it
 * arrived, and the spans read back from either encoding. The protobuf is read by a small reader of the wire format
 * (varints, fixed64 and length-delimited fields) with the field numbers of opentelemetry-proto's trace.proto: enough to
 * check what Tessera exports, nothing of it production code.
 */
import { createServer as createHttp2Server, type Http2Server, type ServerHttp2Session } from 'node:http2';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  attributes: Record<string, string | number | boolean>;
  links: { traceId: string; spanId: string }[];
  statusCode: number;
}

type Field = number | bigint | Buffer;

/** The fields of a protobuf message, by number, each a list of its values. */
function fields(message: Buffer): Map<number, Field[]> {
  const out = new Map<number, Field[]>();
  let at = 0;
  const varint = (): bigint => {
    let value = 0n;
    let shift = 0n;
    for (;;) {
      const byte = message[at++]!;
      value |= BigInt(byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return value;
      shift += 7n;
    }
  };
  while (at < message.length) {
    const key = Number(varint());
    const number = key >>> 3;
    const type = key & 7;
    let value: Field;
    if (type === 0) value = varint();
    else if (type === 1) {
      value = message.readBigUInt64LE(at);
      at += 8;
    } else if (type === 2) {
      const length = Number(varint());
      value = message.subarray(at, at + length);
      at += length;
    } else if (type === 5) {
      value = message.readUInt32LE(at);
      at += 4;
    } else throw new Error(`wire type ${type}`);
    out.set(number, [...(out.get(number) ?? []), value]);
  }
  return out;
}

const bytes = (f: Map<number, Field[]>, n: number): Buffer[] => (f.get(n) ?? []) as Buffer[];
const text = (f: Map<number, Field[]>, n: number): string => bytes(f, n)[0]?.toString('utf8') ?? '';
const hex = (f: Map<number, Field[]>, n: number): string => bytes(f, n)[0]?.toString('hex') ?? '';

function anyValue(value: Buffer): string | number | boolean {
  const f = fields(value);
  if (f.has(1)) return text(f, 1);
  if (f.has(2)) return f.get(2)![0] === 1n;
  if (f.has(3)) return Number(f.get(3)![0]);
  if (f.has(4))
    return Buffer.from((f.get(4)![0] as bigint).toString(16).padStart(16, '0'), 'hex').readDoubleBE();
  return '';
}

/** The spans of an ExportTraceServiceRequest in protobuf. */
function spansOfProtobuf(request: Buffer): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  for (const resourceSpans of bytes(fields(request), 1))
    for (const scopeSpans of bytes(fields(resourceSpans), 2))
      for (const raw of bytes(fields(scopeSpans), 2)) {
        const span = fields(raw);
        const attributes: ReceivedSpan['attributes'] = {};
        for (const kv of bytes(span, 9)) {
          const f = fields(kv);
          attributes[text(f, 1)] = anyValue(bytes(f, 2)[0] ?? Buffer.alloc(0));
        }
        const status = bytes(span, 15)[0];
        spans.push({
          traceId: hex(span, 1),
          spanId: hex(span, 2),
          parentSpanId: hex(span, 4),
          name: text(span, 5),
          kind: Number(span.get(6)?.[0] ?? 0),
          attributes,
          links: bytes(span, 13).map((link) => ({
            traceId: hex(fields(link), 1),
            spanId: hex(fields(link), 2),
          })),
          statusCode: status === undefined ? 0 : Number(fields(status).get(3)?.[0] ?? 0),
        });
      }
  return spans;
}

/** The resource attributes of each ResourceSpans of an ExportTraceServiceRequest in protobuf. */
function resourcesOfProtobuf(request: Buffer): Record<string, string | number | boolean>[] {
  return bytes(fields(request), 1).map((resourceSpans) => {
    const attributes: Record<string, string | number | boolean> = {};
    const resource = bytes(fields(resourceSpans), 1)[0];
    for (const kv of resource === undefined ? [] : bytes(fields(resource), 1)) {
      const f = fields(kv);
      attributes[text(f, 1)] = anyValue(bytes(f, 2)[0] ?? Buffer.alloc(0));
    }
    return attributes;
  });
}

export interface Receiver {
  url: string;
  /** The bodies received, as they arrived. */
  bodies: Buffer[];
  /** The headers of each export received (OTLP/HTTP only). */
  headers: IncomingHttpHeaders[];
  spans(): ReceivedSpan[];
  /** The resource attributes of every batch received. */
  resources(): Record<string, string | number | boolean>[];
  close(): Promise<void>;
}

/** An OTLP/HTTP receiver (protobuf: the bodies are decoded as such). */
export async function otlpHttpReceiver(): Promise<Receiver> {
  const bodies: Buffer[] = [];
  const headers: IncomingHttpHeaders[] = [];
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      if (request.url === '/v1/traces') {
        bodies.push(Buffer.concat(chunks));
        headers.push(request.headers);
      }
      response.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    bodies,
    headers,
    spans: () => bodies.flatMap(spansOfProtobuf),
    resources: () => bodies.flatMap(resourcesOfProtobuf),
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** An OTLP/gRPC receiver: TraceService/Export over HTTP/2, each message length-prefixed (gRPC's framing). */
export async function otlpGrpcReceiver(): Promise<Receiver> {
  const bodies: Buffer[] = [];
  const server: Http2Server = createHttp2Server();
  const sessions = new Set<ServerHttp2Session>();
  server.on('session', (session) => {
    sessions.add(session);
    session.on('close', () => sessions.delete(session));
  });
  server.on('stream', (stream, headers) => {
    const chunks: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.on('end', () => {
      const framed = Buffer.concat(chunks);
      if (
        headers[':path'] === '/opentelemetry.proto.collector.trace.v1.TraceService/Export' &&
        framed.length >= 5
      )
        bodies.push(framed.subarray(5, 5 + framed.readUInt32BE(1)));
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
      // An empty ExportTraceServiceResponse, framed.
      stream.end(Buffer.from([0, 0, 0, 0, 0]));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    bodies,
    headers: [],
    spans: () => bodies.flatMap(spansOfProtobuf),
    resources: () => bodies.flatMap(resourcesOfProtobuf),
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        for (const session of sessions) session.destroy();
      }),
  };
}
