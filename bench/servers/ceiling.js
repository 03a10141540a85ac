/* global Buffer, URL, URLSearchParams, process, setImmediate, setInterval */
// The ceiling: the fastest a single Node process can answer this token request. Bare node:http, the
// form body parsed, the secret compared in constant time (sha256 + timingSafeEqual), the audience checked,
// and an RFC 9068 JWT with Tessera's header and claims signed by node:crypto (ES256, ieee-p1363) with a
// key made once at start. No framework, no logging, no store.
//
// Requests are answered in batches, one per event-loop iteration: a request whose body is complete waits
// for the check phase, when every socket readable in this iteration has been read; then every token of the
// batch is signed, and then every answer written, back to back. Writes in a row are far cheaper for the
// kernel on loopback than writes spaced by a signature each (see bench/README.md). BENCH_AT_ONCE=1 answers
// each request as soon as its body is read instead (the scenario ceiling-at-once).
//
// BENCH_FIXED=1 makes it the HTTP floor (the scenario floor): every answer carries one token signed at start, so
// a request costs everything the ceiling does but the signature. The floor plus one signature as measured in a
// tight loop (sign-loop.js) is the physical limit on one core.
//
// BENCH_AUDIT_DIR=<dir> makes it the audited ceiling (the scenario ceiling-audited): the ceiling with the durable,
// queryable audit trail Tessera keeps, built as cheaply as bare Node allows. Every answer's event is a spool line
// (Tessera's format), the lines of a batch are written to a file in one write(2) before its first answer (as
// Tessera's spool), and once a second the lines written since are sent to a worker thread that inserts them into
// SQLite (audit-store.js: Tessera's table, indexes and per-minute counts, one json_each statement). Unlike Tessera,
// it keeps those lines in memory rather than reading them back from its file. Its share of the ceiling is what a
// durable audit trail costs any server answering on this core.
//
// GET /metrics answers the longest event-loop delay since the previous one, measured as Tessera measures its own
// (perf_hooks.monitorEventLoopDelay, a timer every millisecond): the stalls of bare Node on this machine, under
// the same load, beside Tessera's.
import { openSync, writeSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import { accessTokenSigner, authenticate, es256Key, jti, settings, TOKEN_HEADERS } from './common.js';

const key = es256Key();
const signToken = accessTokenSigner(key);
const JWKS_HEADERS = {
  'content-type': 'application/json; charset=utf-8',
  'cache-control': 'public, max-age=1800',
};
const KNOWN = new Set(['grant_type', 'client_id', 'client_secret', 'audience', 'resource', 'scope']);

const FIXED = process.env.BENCH_FIXED === '1' ? signToken(settings.clientId, settings.audience) : undefined;
const accessToken = (clientId, audience, id) => FIXED ?? signToken(clientId, audience, id);

/** The audit trail of BENCH_AUDIT_DIR (see above): record() an event, persist() the batch before its answers. */
function auditTrail(dir) {
  const spool = openSync(join(dir, 'audit.spool'), 'a');
  const store = new Worker(new URL('./audit-store.js', import.meta.url), {
    workerData: { file: join(dir, 'audit.db') },
  });
  /** Lines not yet on the spool; lines on it not yet sent to the store. */
  let pending = '';
  let unsent = '';
  setInterval(() => {
    if (unsent === '') return;
    store.postMessage(unsent);
    unsent = '';
  }, 1000);
  return {
    record(type, clientId, audience, id, reason, source) {
      pending += JSON.stringify([Date.now(), type, clientId, audience, id, reason, source, null]) + '\n';
    },
    persist() {
      if (pending === '') return;
      writeSync(spool, pending);
      unsent += pending;
      pending = '';
    },
  };
}
const audit = process.env.BENCH_AUDIT_DIR ? auditTrail(process.env.BENCH_AUDIT_DIR) : undefined;

function send(res, [status, body, headers = TOKEN_HEADERS]) {
  audit?.persist();
  res.writeHead(status, { ...headers, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

const error = (status, code, description) => [
  status,
  JSON.stringify({ error: code, error_description: description }),
];

/** A refusal of a request from `source` with `params`, audited. */
function refuse(params, source, status, code, description) {
  const audience = params.audience ?? params.resource ?? null;
  audit?.record('token.refused', params.client_id ?? null, audience, null, `${code}: ${description}`, source);
  return error(status, code, description);
}

/**
 * The answer to a token request from `source` (its address, for the audit trail; undefined without one): [status,
 * body].
 */
function answer(contentType, text, source) {
  const params = {};
  if (!contentType?.startsWith('application/x-www-form-urlencoded'))
    return refuse(
      params,
      source,
      415,
      'invalid_request',
      'the body must be application/x-www-form-urlencoded',
    );
  for (const [name, value] of new URLSearchParams(text)) {
    if (!KNOWN.has(name)) continue;
    if (params[name] !== undefined)
      return refuse(params, source, 400, 'invalid_request', `${name} sent twice`);
    params[name] = value;
  }
  if (!authenticate(params.client_id, params.client_secret))
    return refuse(params, source, 401, 'invalid_client', 'client authentication failed');
  if (params.grant_type !== 'client_credentials')
    return refuse(params, source, 400, 'unsupported_grant_type', '');
  const audience = params.audience ?? params.resource;
  if (audience !== settings.audience)
    return refuse(params, source, 400, 'invalid_target', 'audience not granted');
  // The token's id is drawn here only for the audit trail (otherwise the claims draw it).
  const id = audit === undefined ? undefined : jti();
  // Written as Tessera writes it: the token is base64url and dots, no escaping scan needed.
  const body = `{"access_token":"${accessToken(params.client_id, audience, id)}","token_type":"Bearer","expires_in":${settings.ttl}}`;
  audit?.record('token.issued', params.client_id, audience, id, null, source);
  return [200, body];
}

const loopDelay = monitorEventLoopDelay({ resolution: 1 });
loopDelay.enable();
function loopDelayMax() {
  const max = loopDelay.count === 0 ? 0 : loopDelay.max / 1e9;
  loopDelay.reset();
  return [200, `event_loop_delay_max_seconds ${max}\n`, { 'content-type': 'text/plain; version=0.0.4' }];
}

const AT_ONCE = process.env.BENCH_AT_ONCE === '1';
let turn;
const endOfTurn = () =>
  (turn ??= new Promise((resolve) =>
    setImmediate(() => {
      turn = undefined;
      resolve();
    }),
  ));

createServer((req, res) => {
  if (req.url === '/oauth/token' && req.method === 'POST') {
    let text = '';
    req.setEncoding('utf8');
    req.on('data', (chunk) => {
      text += chunk;
      if (text.length > 8192) req.destroy();
    });
    req.on('end', () => {
      const source = audit && req.socket.remoteAddress;
      if (AT_ONCE) return send(res, answer(req.headers['content-type'], text, source));
      // Two passes over the batch: every answer is computed in the first, every one written in the second.
      void endOfTurn()
        .then(() => answer(req.headers['content-type'], text, source))
        .then((reply) => send(res, reply));
    });
  } else if (req.url === '/metrics' && req.method === 'GET') {
    send(res, loopDelayMax());
  } else if (req.url === '/.well-known/jwks.json' && req.method === 'GET') {
    send(res, [200, key.jwks, JWKS_HEADERS]);
  } else {
    send(res, [404, '{"error":"not_found"}']);
  }
}).listen(settings.port, settings.host);
