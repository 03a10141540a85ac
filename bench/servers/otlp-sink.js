/* global process, Buffer */
// The OTLP/HTTP receiver of the tracing scenarios (bench/lib/servers.js, otlpSink): what Tessera's exporter sends
// its spans to, answering at once and keeping nothing but counts. Every POST (/v1/traces, /v1/metrics, /v1/logs) is
// read to its end and answered 200: with an empty body of type application/x-protobuf to a protobuf request (an
// empty Export*ServiceResponse, all of whose fields are optional), with {} to a JSON one. Of each, it counts the
// request, its bytes (as received, and inflated when gzip-encoded), and the spans in it (an
// ExportTraceServiceRequest walked field by field, nothing decoded but the span names). GET /stats answers the
// counts so far as JSON; on SIGTERM they are printed to stdout, one JSON line, and it exits.
//
// Started by the bench pinned to the load generator's CPU (not the server's): its work is not the server's CPU.
// Settings: BENCH_PORT (the port on 127.0.0.1).
import { createServer } from 'node:http';
import { gunzipSync } from 'node:zlib';

const port = Number(process.env.BENCH_PORT);
if (!Number.isInteger(port) || port <= 0) throw new Error('BENCH_PORT is not set');

/** The span names seen, at most this many different ones (the rest counted as other). */
const MAX_NAMES = 32;

const stats = {
  requests: 0,
  bytes: 0,
  inflatedBytes: 0,
  spans: 0,
  /** Requests that could not be read as OTLP (a body that is not protobuf or JSON of the kind expected). */
  unreadable: 0,
  byPath: {},
  spanNames: {},
};

/** A protobuf varint at `at`: [value, next offset]. Values past 2^53 lose precision, which no length here reaches. */
function varint(buffer, at) {
  let value = 0;
  let scale = 1;
  for (;;) {
    if (at >= buffer.length) throw new Error('truncated varint');
    const byte = buffer[at++];
    value += (byte & 0x7f) * scale;
    if (byte < 0x80) return [value, at];
    scale *= 128;
  }
}

/** Calls `each(field, start, end)` for every length-delimited field of the message in buffer[start, end). */
function lengthDelimited(buffer, start, end, each) {
  let at = start;
  while (at < end) {
    const [key, afterKey] = varint(buffer, at);
    const field = Math.floor(key / 8);
    const wire = key & 7;
    at = afterKey;
    if (wire === 0) [, at] = varint(buffer, at);
    else if (wire === 1) at += 8;
    else if (wire === 5) at += 4;
    else if (wire === 2) {
      const [length, afterLength] = varint(buffer, at);
      at = afterLength + length;
      if (at > end) throw new Error('truncated field');
      each(field, afterLength, at);
    } else throw new Error(`wire type ${wire}`);
  }
  if (at !== end) throw new Error('truncated message');
}

const named = (name) => {
  if (name in stats.spanNames || Object.keys(stats.spanNames).length < MAX_NAMES)
    stats.spanNames[name] = (stats.spanNames[name] ?? 0) + 1;
  else stats.spanNames['(other)'] = (stats.spanNames['(other)'] ?? 0) + 1;
};

/**
 * The spans of an ExportTraceServiceRequest in protobuf: resource_spans (1) → scope_spans (2) → spans (2), each
 * Span's name its field 5.
 */
function protobufSpans(body) {
  let spans = 0;
  lengthDelimited(body, 0, body.length, (field, start, end) => {
    if (field !== 1) return;
    lengthDelimited(body, start, end, (field, start, end) => {
      if (field !== 2) return;
      lengthDelimited(body, start, end, (field, start, end) => {
        if (field !== 2) return;
        spans++;
        lengthDelimited(body, start, end, (field, start, end) => {
          if (field === 5) named(body.toString('utf8', start, end));
        });
      });
    });
  });
  return spans;
}

/** The spans of an ExportTraceServiceRequest in OTLP/JSON. */
function jsonSpans(body) {
  let spans = 0;
  for (const resource of JSON.parse(body.toString('utf8')).resourceSpans ?? [])
    for (const scope of resource.scopeSpans ?? [])
      for (const span of scope.spans ?? []) {
        spans++;
        named(String(span.name));
      }
  return spans;
}

const server = createServer((request, response) => {
  if (request.method === 'GET' && request.url === '/stats') {
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(JSON.stringify(stats));
    return;
  }
  if (request.method !== 'POST') {
    response.writeHead(405, { allow: 'POST' }).end();
    return;
  }
  const chunks = [];
  let received = 0;
  request.on('data', (chunk) => {
    chunks.push(chunk);
    received += chunk.length;
  });
  request.on('end', () => {
    const path = (request.url ?? '/').split('?')[0];
    const json = /\bjson\b/i.test(request.headers['content-type'] ?? '');
    stats.requests++;
    stats.bytes += received;
    const byPath = (stats.byPath[path] ??= { requests: 0, bytes: 0, spans: 0 });
    byPath.requests++;
    byPath.bytes += received;
    try {
      let body = Buffer.concat(chunks, received);
      if (/gzip/i.test(request.headers['content-encoding'] ?? '')) body = gunzipSync(body);
      stats.inflatedBytes += body.length;
      if (path === '/v1/traces') {
        const spans = json ? jsonSpans(body) : protobufSpans(body);
        stats.spans += spans;
        byPath.spans += spans;
      }
    } catch {
      stats.unreadable++;
    }
    if (json) response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    else response.writeHead(200, { 'content-type': 'application/x-protobuf', 'content-length': '0' }).end();
  });
  request.on('error', () => response.destroy());
});
server.keepAliveTimeout = 60_000;
server.listen(port, '127.0.0.1');

process.once('SIGTERM', () => {
  process.stdout.write(JSON.stringify(stats) + '\n');
  process.exit(0);
});
