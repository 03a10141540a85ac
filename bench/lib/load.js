/* global process, fetch, AbortSignal */
// The load: autocannon in this process (pinned to the load generator's core). A checked warm-up, in which
// every answer must be a 200 with a token that verifies against the server's JWKS, then measurements.
import { monitorEventLoopDelay } from 'node:perf_hooks';
import autocannon from 'autocannon';
import { createLocalJWKSet, jwtVerify } from 'jose';
import {
  commCpuSeconds,
  machineCpuSeconds,
  otherCpuSeconds,
  processTable,
  processTree,
  selfCpuSeconds,
  mainThreadsCpuSeconds,
  treeCpuSeconds,
  treeRssMb,
} from './proc.js';

/**
 * Over TLS (an https target): the options of every connection's tls.connect (the server CA, and the client
 * certificate and key of a tls_client_auth client). autocannon connects with rejectUnauthorized false whatever the
 * options say; the warm-up's JWKS request is the one that verifies the server's certificate (target.fetch trusts the
 * CA). Each connection is kept alive for the whole run, so its handshake is paid once.
 */
const tlsOf = (target) => (target.tlsOptions ? { tlsOptions: target.tlsOptions } : {});

function run(options, onResponse) {
  return new Promise((resolve, reject) => {
    const instance = autocannon(options, (error, result) => (error ? reject(error) : resolve(result)));
    if (onResponse) instance.on('response', onResponse);
  });
}

/**
 * The request to send: one fixed body, or a rotation through many (the cold-cache run), shared by every
 * connection so that consecutive requests name different clients, or a new client assertion each time.
 */
function requestPlan(target) {
  const base = {
    method: target.method ?? 'POST',
    path: target.path,
    headers: target.headers ?? { 'content-type': 'application/x-www-form-urlencoded' },
  };
  if (target.dpop) {
    // DPoP: every request carries a proof of its own (a replay would be refused); the body stays the same.
    return {
      base,
      rotating: true,
      setupRequest(request, context) {
        request.headers = { ...base.headers, dpop: target.dpop.proof() };
        request.body = target.body;
        context.clientId = target.clientId;
        return request;
      },
    };
  }
  if (target.assertions) {
    // private_key_jwt: every request carries an assertion of its own (a replay would be refused).
    return {
      base,
      rotating: true,
      setupRequest(request, context) {
        request.body = target.assertions.body(target.audience, target.audienceParam);
        context.clientId = target.clientId;
        return request;
      },
    };
  }
  if (!target.rotation) return { base, requests: undefined, fixed: { ...base, body: target.body } };
  const { bodies, clientIds } = target.rotation;
  return {
    base,
    rotating: true,
    setupRequest(request, context) {
      const i = target.rotation.next;
      target.rotation.next = (i + 1) % bodies.length;
      request.body = bodies[i];
      context.clientId = clientIds[i];
      return request;
    },
  };
}

/**
 * An introspection answer (RFC 7662) for the token the target introspects: active, the token's client, this
 * issuer and audience, a Bearer token.
 */
function checkIntrospection(target, json) {
  if (json.active !== true) throw new Error(`active ${json.active}`);
  if (json.client_id !== target.clientId || json.sub !== target.clientId)
    throw new Error(`introspected a token of ${json.client_id}, expected ${target.clientId}`);
  if (json.iss !== target.issuer || json.aud !== target.audience)
    throw new Error(`iss ${json.iss}, aud ${json.aud}`);
  if (json.token_type !== 'Bearer' || !(json.exp > json.iat)) throw new Error(JSON.stringify(json));
}

/** A page of the admin API's client list: full, each client with its id and audiences, and a cursor to the next. */
function checkAdminList(target, json) {
  const { items, next } = json;
  if (!Array.isArray(items) || items.length !== target.adminList.count)
    throw new Error(`a page of ${items?.length} clients, expected ${target.adminList.count}`);
  if (items.some((c) => typeof c.client_id !== 'string' || !Array.isArray(c.audiences)))
    throw new Error(`a client without client_id or audiences: ${JSON.stringify(items[0]).slice(0, 200)}`);
  if (typeof next !== 'string') throw new Error(`next ${next}`);
}

/**
 * A warm-up of `seconds` at `connections` in which every answer is kept, then checked: status 200, a JSON
 * body with a Bearer token (a DPoP token bound to the proofs' key, with DPoP proofs) that jose verifies against
 * the server's JWKS (issuer, audience, typ at+jwt, ES256) and names the client that asked (for a token
 * exchange, as the actor for the caller); or, for an introspection target, the active token's claims. Throws on the first failures.
 */
export async function checkedWarmup(target, { seconds, connections }) {
  const plan = requestPlan(target);
  const answers = [];
  const record = (status, body, context) =>
    answers.push([status, body, context?.clientId ?? target.clientId]);
  const request = plan.rotating
    ? { ...plan.base, setupRequest: plan.setupRequest, onResponse: record }
    : { ...plan.base, ...(target.body === undefined ? {} : { body: target.body }), onResponse: record };
  const result = await run({
    url: target.url,
    connections,
    duration: seconds,
    requests: [request],
    timeout: 10,
    ...tlsOf(target),
  });
  if (answers.length === 0) throw new Error('no answer during the warm-up');
  const response = await (target.fetch ?? fetch)(target.jwksUrl, { signal: AbortSignal.timeout(5000) });
  if (!response.ok) throw new Error(`JWKS at ${target.jwksUrl}: status ${response.status}`);
  const jwks = createLocalJWKSet(await response.json());
  const failures = [];
  let verified = 0;
  for (const [status, body, clientId] of answers) {
    try {
      if (status !== 200) throw new Error(`status ${status}: ${body.slice(0, 200)}`);
      const json = JSON.parse(body);
      if (target.introspection) {
        checkIntrospection(target, json);
        verified++;
        continue;
      }
      if (target.adminList) {
        checkAdminList(target, json);
        verified++;
        continue;
      }
      const tokenType = target.dpop ? 'dpop' : 'bearer';
      if (String(json.token_type).toLowerCase() !== tokenType)
        throw new Error(`token_type ${json.token_type}`);
      if (!(json.expires_in > 0)) throw new Error(`expires_in ${json.expires_in}`);
      const { payload } = await jwtVerify(json.access_token, jwks, {
        issuer: target.issuer,
        audience: target.audience,
        typ: 'at+jwt',
        algorithms: ['ES256'],
        requiredClaims: ['iss', 'sub', 'aud', 'exp', 'iat', 'jti', 'client_id'],
      });
      if (target.exchange) {
        // Token exchange (RFC 8693): the caller stays the subject, the service that asked acts for it.
        if (json.issued_token_type !== 'urn:ietf:params:oauth:token-type:access_token')
          throw new Error(`issued_token_type ${json.issued_token_type}`);
        if (payload.client_id !== clientId || payload.sub !== target.exchange.sub)
          throw new Error(`token of ${payload.client_id} for ${payload.sub}, asked by ${clientId}`);
        if (payload.act?.sub !== clientId) throw new Error(`act ${JSON.stringify(payload.act)}`);
      } else if (payload.client_id !== clientId || payload.sub !== clientId)
        throw new Error(`token for ${payload.client_id}, asked by ${clientId}`);
      if (target.dpop && payload.cnf?.jkt !== target.dpop.jkt)
        throw new Error(`token bound to ${JSON.stringify(payload.cnf)}, not to the proof's key`);
      verified++;
    } catch (error) {
      if (failures.length < 5) failures.push(error.message);
    }
  }
  const errors = result.errors + result.timeouts;
  if (failures.length > 0 || errors > 0) {
    throw new Error(
      `warm-up: ${answers.length - verified} of ${answers.length} answers failed the check, ` +
        `${errors} connection errors/timeouts; first failures: ${failures.join(' | ')}`,
    );
  }
  return { answers: answers.length, verified, seconds: result.duration };
}

/** Exact percentile (nearest rank) of sorted values. */
function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[Math.min(sorted.length, rank) - 1];
}

/**
 * One measurement: `seconds` of load at `connections`, with the server's CPU time (its process tree,
 * from /proc) and this process's, over the same wall time, and the server's RSS at the end. Latencies are
 * taken per response (autocannon's own histogram rounds to whole milliseconds). `sinkPid`: the tracing scenarios'
 * OTLP sink (on the load generator's CPU), whose CPU is its own figure, not other programs' noise.
 */
export async function measure(target, { seconds, connections, serverPid, storeComm, sinkPid }) {
  const plan = requestPlan(target);
  const options = { url: target.url, connections, duration: seconds, timeout: 10, ...tlsOf(target) };
  if (plan.rotating) options.requests = [{ ...plan.base, setupRequest: plan.setupRequest }];
  else
    Object.assign(options, {
      url: target.url + target.path,
      method: plan.base.method,
      headers: plan.base.headers,
      ...(target.body === undefined ? {} : { body: target.body }),
    });

  let latencies = new Float64Array(1 << 16);
  let okCount = 0;
  let responses = 0;
  const onResponse = (_client, status, _bytes, ms) => {
    responses++;
    if (status < 200 || status > 299) return;
    if (okCount === latencies.length) {
      const bigger = new Float64Array(latencies.length * 2);
      bigger.set(latencies);
      latencies = bigger;
    }
    latencies[okCount++] = ms;
  };

  const cpu0 = treeCpuSeconds(serverPid);
  const main0 = mainThreadsCpuSeconds(serverPid);
  const self0 = selfCpuSeconds();
  const store0 = storeComm ? commCpuSeconds(storeComm) : 0;
  const sink0 = sinkPid === undefined ? 0 : treeCpuSeconds(sinkPid);
  const machine0 = machineCpuSeconds();
  const table0 = processTable();
  // The load generator's own event-loop stalls: a response it reads late counts that wait as latency, so a max
  // latency near this figure may be the load generator's rather than the server's.
  const ownDelay = monitorEventLoopDelay({ resolution: 1 });
  ownDelay.enable();
  const t0 = process.hrtime.bigint();
  const result = await run(options, onResponse);
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  ownDelay.disable();
  const cpu = treeCpuSeconds(serverPid) - cpu0;
  const mainCpu = mainThreadsCpuSeconds(serverPid) - main0;
  const self = selfCpuSeconds() - self0;
  const store = storeComm ? commCpuSeconds(storeComm) - store0 : undefined;
  const sink = sinkPid === undefined ? undefined : treeCpuSeconds(sinkPid) - sink0;
  const machine1 = machineCpuSeconds();
  const table1 = processTable();
  const measured = new Set([
    process.pid,
    ...processTree(serverPid, table1),
    ...(sinkPid === undefined ? [] : processTree(sinkPid, table1)),
  ]);
  const other = otherCpuSeconds(table0, table1, measured, storeComm);
  const interrupts = machine1.interrupts - machine0.interrupts;
  const rssMb = treeRssMb(serverPid);

  const sorted = latencies.subarray(0, okCount).sort();
  return {
    connections,
    seconds: wall,
    requests: responses,
    ok: okCount,
    reqPerSec: okCount / wall,
    p50Ms: percentile(sorted, 50),
    p99Ms: percentile(sorted, 99),
    p999Ms: percentile(sorted, 99.9),
    maxMs: sorted.length > 0 ? sorted[sorted.length - 1] : NaN,
    errors: result.errors,
    timeouts: result.timeouts,
    non2xx: result.non2xx,
    statusCodes: result.statusCodeStats,
    serverCpuCores: cpu / wall,
    serverCpuUsPerRequest: okCount > 0 ? (cpu * 1e6) / okCount : NaN,
    // Of it, the main threads' (a Tessera server's request thread); the rest is its other threads'.
    serverMainThreadCpuUsPerRequest: okCount > 0 ? (mainCpu * 1e6) / okCount : NaN,
    serverRssMb: rssMb,
    loadgenCpuCores: self / wall,
    loadgenLoopMaxMs: ownDelay.max / 1e6,
    // When the measurement started on the monotonic clock (µs), the clock of a server's --cpu-prof timestamps.
    startedMonotonicUs: Number(t0 / 1000n),
    storeCpuCores: store === undefined ? undefined : store / wall,
    // The OTLP sink's, on the load generator's CPU (tracing scenarios only).
    sinkCpuCores: sink === undefined ? undefined : sink / wall,
    // Every other program that ran meanwhile (kernel threads left out): noise if well above 0.
    otherCpuCores: other / wall,
    // irq and softirq time on every CPU: mostly the loopback network work of this very measurement.
    interruptCpuCores: interrupts / wall,
    autocannon: {
      reqPerSecAverage: result.requests.average,
      latencyP50: result.latency.p50,
      latencyP99: result.latency.p99,
      duration: result.duration,
    },
  };
}
