/* global Buffer, fetch */
// The scenarios of `npm run bench` (bench/README.md lists them): for each, its label, how its store is made and
// its server started (lib/servers.js), and the note the report gives it. run.js runs those asked for, measures
// and reports.
import { join } from 'node:path';
import { startPinned, stopServer } from './proc.js';
import { CLIENT_SAN_URI } from './pki.js';
import { ADMIN_LIST_CLIENTS, ADMIN_LIST_PAGE, DOWNSTREAM, ROOT, runServers } from './servers.js';
import { median } from './report.js';
import { tesseraEnv } from './stores.js';

/**
 * The scenarios of one run, by id, and what run.js needs of them besides. `run` is what they share with it: the
 * settings (lib/options.js), the cleanups their stores and databases add to, the environment record, whether
 * PostgreSQL answers, the --baseline build, where profiles go, and the run's log.
 */
export function scenarios(run) {
  const { settings, baseline, log } = run;
  const servers = runServers(run);
  /** The signature alone, measured when the floor scenario runs: {usPerSignature}. */
  let signature;
  /** The verifications and the replay record alone, measured when the floor scenario runs (servers/verify-loop.js). */
  let verifications;
  /** Every round's of both (--rounds runs the floor once a round): the limits take their medians. */
  const signatures = [];
  const verificationRuns = [];
  /**
   * A Tessera scenario whose requests need something of the running server first (a token to introspect, to
   * exchange, to call the admin API with): `prepare(target, store)` runs once it answers, before the warm-up.
   */
  const preparedTessera = (id, makeStore, prepare) => async (port) => {
    const store = await makeStore(port);
    const started = await servers.startTessera({ id, store, port });
    started.target.prepare = () => prepare(started.target, store);
    return started;
  };

  /** A started server whose target is probed for replays once it answers (probeReplay). */
  const withReplayProbe = (started) => {
    started.target.prepare = () => probeReplay(started.target);
    return started;
  };

  const coldNote = () =>
    `cold cache: ${settings.coldClients.toLocaleString('en-US')} clients in the store, requests rotate through all of ` +
    `them in random order, TESSERA_CACHE_MAX=${settings.coldCacheMax} so that practically every request is a cache miss`;

  /** A cold-cache scenario: the store filled with the cold clients, a cache too small to hold them. */
  const coldScenario = (id, label, openStore, store) => ({
    label,
    store,
    note: coldNote,
    start: async (port) => {
      const opened = await openStore();
      await servers.loadCold(opened);
      return servers.startTessera({ id, store: opened, port, cold: true });
    },
  });

  /**
   * The cached scenario: the cold clients in the store, TESSERA_CACHE_MAX at its default (100 000), and before
   * the warm-up every client asked for once (a pass of the rotation, 64 at a time), so that the server holds
   * them all: what its memory is with that many clients cached.
   */
  const cachedScenario = (id, label, openStore) => ({
    label,
    note: () =>
      `cached: ${settings.coldClients.toLocaleString('en-US')} clients in the store, each asked for once before ` +
      'the warm-up and then in turn, TESSERA_CACHE_MAX at its default: every request is a cache hit, and the RSS ' +
      'is that of a server holding them all',
    start: async (port) => {
      const opened = await openStore();
      await servers.loadCold(opened);
      const started = await servers.startTessera({ id, store: opened, port, rotate: true });
      started.target.prepare = () => askEveryClient(started.target);
      return started;
    },
  });

  /**
   * The replay probe of a private_key_jwt or DPoP target, once its server answers (before the warm-up): one request
   * with a new assertion (or proof), the same request again at once, and `target.finish` (after the measurements,
   * run.js) sends it a third time, once every assertion or proof of the warm-up and the measurements was made.
   * What each answer was is the note `finish` returns: a server whose replay detection works refuses both replays.
   */
  async function probeReplay(target) {
    const maker = target.assertions ?? target.dpop;
    const what = target.assertions ? 'client assertion' : 'DPoP proof';
    const body = target.assertions
      ? target.assertions.body(target.audience, target.audienceParam)
      : target.body;
    const headers = {
      'content-type': 'application/x-www-form-urlencoded',
      ...(target.dpop ? { dpop: target.dpop.proof() } : {}),
    };
    const send = async () => {
      const response = await (target.fetch ?? fetch)(`${target.url}${target.path}`, {
        method: 'POST',
        headers,
        body,
      });
      const text = await response.text();
      let json;
      try {
        json = JSON.parse(text);
      } catch {
        json = {};
      }
      const said = json.error
        ? `${json.error}${json.error_description ? ` (${json.error_description})` : ''}`
        : json.access_token
          ? `a ${json.token_type} token`
          : text.slice(0, 120);
      return { status: response.status, said, accepted: response.status === 200 };
    };
    const first = await send();
    if (!first.accepted)
      throw new Error(`replay probe: the first ${what} was refused: ${first.status} ${first.said}`);
    const again = await send();
    const made = maker.made();
    log(`replay probe: a ${what} replayed at once: ${again.status} ${again.said}`);
    target.finish = async () => {
      const later = await send();
      const replays = [again, later].filter((a) => a.accepted).length;
      return (
        `replay probe (${what}s, one new per request): the first answered ${first.status} (${first.said}); ` +
        `replayed at once: ${again.status} ${again.said}; replayed again after the warm-up and the measurements ` +
        `(${(maker.made() - made).toLocaleString('en-US')} ${what}s later): ${later.status} ${later.said}` +
        (replays === 0 ? ': both replays refused' : `: ${replays} of 2 replays ACCEPTED`)
      );
    };
  }

  /** Asks once for the token of every client of the target's rotation, 64 at a time; each must be 200. */
  async function askEveryClient(target) {
    const { bodies } = target.rotation;
    const t0 = Date.now();
    let next = 0;
    const worker = async () => {
      while (next < bodies.length) {
        const body = bodies[next++];
        const response = await fetch(`${target.url}${target.path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body,
        });
        await response.arrayBuffer();
        if (response.status !== 200) throw new Error(`a client's first token: status ${response.status}`);
      }
    };
    await Promise.all(Array.from({ length: 64 }, worker));
    log(`${bodies.length.toLocaleString('en-US')} clients asked for once in ${Date.now() - t0} ms`);
  }

  /**
   * One token of the scenario's client, got at its running server: what an introspection or exchange scenario
   * sends. With `dpop` (a proof maker), the request carries a proof, and the token must be bound to its key.
   */
  async function clientToken(target, purpose, dpop) {
    const response = await fetch(`${target.url}/oauth/token`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        ...(dpop ? { dpop: dpop.proof() } : {}),
      },
      body: target.body,
    });
    if (response.status !== 200)
      throw new Error(
        `no token to ${purpose}: status ${response.status}: ${(await response.text()).slice(0, 300)}`,
      );
    const json = await response.json();
    if (dpop) {
      if (json.token_type !== 'DPoP') throw new Error(`token to ${purpose}: token_type ${json.token_type}`);
      const [, payload] = json.access_token.split('.');
      const cnf = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')).cnf;
      if (cnf?.jkt !== dpop.jkt)
        throw new Error(`token to ${purpose} bound to ${JSON.stringify(cnf)}, not to the proofs' key`);
    }
    return json.access_token;
  }

  /**
   * The admin list scenarios' preparation, once the server answers: a token of the admin client (with a DPoP
   * proof, bound to its key, when the store has a proof maker for it), with which every request reads the first
   * page of clients; with DPoP, each request presents it with a proof of its own, for GET at the list's URL.
   */
  async function prepareAdminList(target, store) {
    const { admin, adminDpop: dpop } = store;
    if (dpop) dpop.tokenEndpoint = `${target.url}/oauth/token`;
    const token = await clientToken(
      {
        ...target,
        body: servers.form({
          grant_type: 'client_credentials',
          client_id: admin.clientId,
          client_secret: admin.clientSecret,
          audience: `${target.url}/admin/v1`,
        }),
      },
      'list clients',
      dpop,
    );
    target.method = 'GET';
    target.path = `/admin/v1/clients?limit=${ADMIN_LIST_PAGE}`;
    target.body = undefined;
    target.adminList = { count: ADMIN_LIST_PAGE };
    if (dpop) {
      dpop.forResource('GET', `${target.url}${target.path}`, token);
      target.headers = { authorization: `DPoP ${token}` };
      target.dpop = dpop;
    } else target.headers = { authorization: `Bearer ${token}` };
  }

  const definitions = {
    ceiling: {
      label: 'ceiling (node:http + node:crypto)',
      start: (port) => servers.startPeer({ id: 'ceiling', script: 'ceiling.js', port }),
    },
    'ceiling-at-once': {
      label: 'ceiling, each answer written at once',
      note: () =>
        'ceiling-at-once: the ceiling writing each answer as soon as its body is read, instead of in one batch per ' +
        'event-loop iteration; the difference is what batching saves in the kernel on loopback',
      start: (port) =>
        servers.startPeer({
          id: 'ceiling-at-once',
          script: 'ceiling.js',
          port,
          extraEnv: { BENCH_AT_ONCE: '1' },
        }),
    },
    'ceiling-audited': {
      label: 'ceiling with a durable audit trail',
      note: () =>
        'ceiling-audited: the ceiling keeping the audit trail Tessera keeps, as cheaply as bare Node can: each ' +
        "batch's events written to a spool file before its answers, and inserted into SQLite (Tessera's table and " +
        'indexes) by a worker thread once a second; its share of the ceiling is what a durable audit trail costs ' +
        'any server answering on this core',
      start: (port) =>
        servers.startPeer({ id: 'ceiling-audited', script: 'ceiling.js', port, audited: true }),
    },
    floor: {
      label: 'HTTP floor (the ceiling, one fixed token)',
      note: () =>
        signature === undefined
          ? undefined
          : `physical limit on one core ("vs limit"): one core doing nothing but the HTTP floor's work per answer (the ` +
            `ceiling answering one token signed at start; its server CPU per answer) plus one ES256 signature as a ` +
            `tight loop measures it on the server's CPU (${signature.usPerSignature.toFixed(1)} µs); for each path, ` +
            `plus the verifications it does, an audit event where it keeps one (ceiling-audited's CPU per answer ` +
            `less the ceiling's) and a replay record where it keeps one, each verification and the record measured ` +
            `in a tight loop too (bench/servers/verify-loop.js` +
            (verifications
              ? `: ES256 by node:crypto ${verifications.es256Crypto.toFixed(1)} µs, by jose ` +
                `${verifications.es256Jose.toFixed(1)} µs, RS256 by jose ${verifications.rs256Jose.toFixed(1)} µs ` +
                `(by node:crypto ${verifications.rs256Crypto.toFixed(1)} µs), a replay record on SQLite ` +
                `${verifications.replayRecord.toFixed(1)} µs, ${verifications.replayBatch} a transaction`
              : '') +
            `); the ceiling and the floor are set against the floor and one signature alone`,
      start: async (port) => {
        signature = await servers.measureSignature();
        signatures.push(signature);
        log(`floor: one signature in a tight loop costs ${signature.usPerSignature.toFixed(1)} µs`);
        verifications = await servers.measureVerifications();
        verificationRuns.push(verifications);
        const v = verifications;
        log(
          `floor: in a tight loop, an ES256 verification costs ${v.es256Crypto.toFixed(1)} µs by node:crypto, ` +
            `${v.es256Jose.toFixed(1)} µs by jose (an assertion); an RS256 one ${v.rs256Jose.toFixed(1)} µs by jose ` +
            `(${v.rs256Crypto.toFixed(1)} by node:crypto); a replay record ${v.replayRecord.toFixed(1)} µs`,
        );
        return servers.startPeer({ id: 'floor', script: 'ceiling.js', port, extraEnv: { BENCH_FIXED: '1' } });
      },
    },
    'tessera-sqlite': {
      label: 'Tessera, SQLite',
      start: async (port) =>
        servers.startTessera({ id: 'tessera-sqlite', store: await servers.sqliteStore(), port }),
    },
    'tessera-sqlite-baseline': {
      label: `Tessera, SQLite, baseline ${baseline?.commit ?? ''}`,
      note: () =>
        `baseline: Tessera as of ${baseline.commit} (--baseline ${settings.baseline}), built apart and run like ` +
        'tessera-sqlite in the same run: the difference between the two rows is what the changes since cost or save',
      start: async (port) =>
        servers.startTessera({
          id: 'tessera-sqlite-baseline',
          store: await servers.sqliteStore(baseline.root),
          port,
          root: baseline.root,
        }),
    },
    'tessera-sqlite-no-metrics': {
      label: 'Tessera, SQLite, TESSERA_METRICS=false',
      start: async (port) =>
        servers.startTessera({
          id: 'tessera-sqlite-no-metrics',
          store: await servers.sqliteStore(),
          port,
          env: { TESSERA_METRICS: 'false' },
        }),
    },
    'tessera-sqlite-scoped': {
      label: 'Tessera, SQLite, 10 scopes + 5 claims',
      note: () =>
        'scoped: the client is granted ten scopes and has five custom claims, so every token carries a scope ' +
        'claim and the custom claims (and the answer a scope field); against tessera-sqlite, what they cost',
      start: async (port) =>
        servers.startTessera({ id: 'tessera-sqlite-scoped', store: await servers.scopedSqliteStore(), port }),
    },
    'tessera-sqlite-pkjwt': {
      label: 'Tessera, SQLite, private_key_jwt',
      note: () =>
        'private_key_jwt: the client authenticates with a new ES256 client assertion per request (made by the load ' +
        'generator): the server verifies its signature (node:crypto, the key imported once) and records its jti in the store (the replay ' +
        'check: one INSERT for all those of a turn; Redis when configured); against tessera-sqlite, what an assertion costs over a secret',
      start: async (port) =>
        withReplayProbe(
          await servers.startTessera({
            id: 'tessera-sqlite-pkjwt',
            store: await servers.keyClientSqliteStore(),
            port,
          }),
        ),
    },
    'tessera-sqlite-pkjwt-redis': {
      label: 'Tessera, SQLite, private_key_jwt, Redis',
      store: 'redis',
      note: () =>
        "private_key_jwt with Redis: as tessera-sqlite-pkjwt, with TESSERA_REDIS_URL set, so each assertion's jti " +
        'goes to Redis (the ids of one turn in one command) instead of a row in the store',
      start: async (port) =>
        servers.startTessera({
          id: 'tessera-sqlite-pkjwt-redis',
          store: await servers.keyClientRedisSqliteStore(),
          port,
        }),
    },
    'tessera-sqlite-dpop': {
      label: 'Tessera, SQLite, DPoP',
      note: () =>
        'DPoP: the client of tessera-sqlite (a secret) sends a new ES256 DPoP proof with every request (made by ' +
        'the load generator): the server checks it, verifies its signature with node:crypto (the key imported and ' +
        'thumbprinted once), records its jti in the store (one INSERT for all those of a turn; Redis when configured), and the token ' +
        'carries cnf.jkt; ' +
        'against tessera-sqlite, what binding a token to a key costs',
      start: async (port) =>
        withReplayProbe(
          await servers.startTessera({
            id: 'tessera-sqlite-dpop',
            store: await servers.dpopSqliteStore(),
            port,
          }),
        ),
    },
    'tessera-sqlite-dpop-redis': {
      label: 'Tessera, SQLite, DPoP, Redis',
      store: 'redis',
      note: () =>
        "DPoP with Redis: as tessera-sqlite-dpop, with TESSERA_REDIS_URL set, so each proof's jti goes to Redis (the " +
        'ids of one turn in one command, a SET NX each) instead of a row in the store (how several instances share the replay guard); against ' +
        'tessera-sqlite-dpop, what Redis costs over the local store',
      start: async (port) =>
        servers.startTessera({
          id: 'tessera-sqlite-dpop-redis',
          store: await servers.dpopRedisSqliteStore(),
          port,
        }),
    },
    'tessera-sqlite-federated': {
      label: 'Tessera, SQLite, federated credential',
      note: () =>
        'federated: the client authenticates with a Kubernetes projected service-account token (RS256, the ' +
        "cluster's key registered inline), the same token on every request as a pod reuses it: the server checks " +
        'its claims against the credential and verifies its signature (node:crypto, the key imported once); no replay check (the credential ' +
        'is not once), so no write; against tessera-sqlite-pkjwt, what a platform token costs over an assertion',
      start: async (port) =>
        servers.startTessera({
          id: 'tessera-sqlite-federated',
          store: await servers.federatedSqliteStore(),
          port,
        }),
    },
    'tessera-sqlite-tls': {
      label: 'Tessera, SQLite, HTTPS',
      note: () =>
        "TLS: tessera-sqlite's client (a secret, client_secret_post) over Tessera's own HTTPS (TESSERA_TLS_CERT and " +
        'TESSERA_TLS_KEY: an EC P-256 certificate for 127.0.0.1 of a CA the bench made with openssl; TLS 1.3 as ' +
        'negotiated; the server asks every client for a certificate, this one sends none). Every connection is kept ' +
        'alive for the whole measurement, as in every scenario, so each pays its handshake (a full one) once: the ' +
        "measurement's connections (its concurrency) handshakes in all, and then the record layer's encryption on " +
        'every request and answer; against tessera-sqlite, what TLS costs',
      start: async (port) =>
        servers.startTessera({ id: 'tessera-sqlite-tls', store: await servers.tlsSqliteStore(), port }),
    },
    'tessera-sqlite-mtls': {
      label: 'Tessera, SQLite, HTTPS, tls_client_auth',
      note: () =>
        'tls_client_auth (RFC 8705 §2.1): a client with no secret, registered with tls_client_auth_san_uri ' +
        `${CLIENT_SAN_URI}, over the HTTPS of tessera-sqlite-tls, its certificate (EC P-256, of the client CA in ` +
        "TESSERA_TLS_CLIENT_CA, that SPIFFE ID its subjectAltName) presented in each connection's handshake and " +
        'the body only grant_type, client_id and audience: the chain is verified by OpenSSL once per connection ' +
        "(kept-alive, as in tessera-sqlite-tls), and each request matches the connection's certificate with the " +
        "client's registration; against tessera-sqlite-tls, what tls_client_auth costs over a secret on the same TLS",
      start: async (port) =>
        servers.startTessera({ id: 'tessera-sqlite-mtls', store: await servers.mtlsSqliteStore(), port }),
    },
    'tessera-sqlite-mtls-header': {
      label: 'Tessera, SQLite, tls_client_auth header',
      note: () =>
        'tls_client_auth behind a TLS-terminating proxy: the client of tessera-sqlite-mtls over plain HTTP, the load ' +
        "generator in the proxy's place (TESSERA_TRUST_PROXY=127.0.0.1, TESSERA_CLIENT_CERT_HEADER=client-cert) " +
        "sending the client certificate in every request's Client-Cert header (RFC 9440, :<base64 DER>:), the same " +
        'one every time as a proxy forwards it for one client: Tessera validates the chain against ' +
        "TESSERA_TLS_CLIENT_CA itself and keeps what it decoded and its verdict (since cce288f by the header's " +
        'text: a warm request decodes nothing again); no TLS anywhere, so against tessera-sqlite, what ' +
        "tls_client_auth costs behind a proxy (the proxy's own TLS work is not measured)",
      start: async (port) =>
        servers.startTessera({
          id: 'tessera-sqlite-mtls-header',
          store: await servers.mtlsHeaderSqliteStore(),
          port,
        }),
    },
    'tessera-sqlite-otel-ratio': {
      label: 'Tessera, SQLite, traces 1 %',
      note: () =>
        "traces at 1 %: tessera-sqlite's client and body, with OTEL_EXPORTER_OTLP_ENDPOINT the bench's OTLP sink " +
        "(bench/servers/otlp-sink.js, pinned to the load generator's CPU, answering every export at once), " +
        'OTEL_TRACES_SAMPLER=parentbased_traceidratio and OTEL_TRACES_SAMPLER_ARG=0.01, the protocol ' +
        "OpenTelemetry's default (http/protobuf): the SDK loaded, and every request pays for its SERVER span " +
        'started (a trace id drawn, its attributes built) and a sampling decision (no traceparent comes in, so the ' +
        'trace id ratio decides); about one in a hundred is recorded, batched and exported by the batch processor ' +
        '(its defaults), the others go on unrecorded. Against tessera-sqlite, what tracing costs as a production ' +
        'would run it',
      start: async (port) =>
        servers.startTessera({
          id: 'tessera-sqlite-otel-ratio',
          store: await servers.otelRatioSqliteStore(),
          port,
        }),
    },
    'tessera-sqlite-otel-always': {
      label: 'Tessera, SQLite, traces always_on',
      // Every request is recorded: a run where the sink got no span measured nothing (run.js fails it).
      spansExpected: true,
      note: () =>
        'traces always_on: as tessera-sqlite-otel-ratio with OTEL_TRACES_SAMPLER=always_on: every request ' +
        "recorded as a SERVER span with its attributes (the HTTP conventions and Tessera's oauth.*), queued, " +
        'serialized to protobuf in batches of 512 and posted to the sink by the batch processor (its defaults: a ' +
        'queue of 2048, spans beyond it dropped and counted in tessera_otel_spans_dropped_total); the worst case, ' +
        "against tessera-sqlite, what recording and exporting a span costs on the server's core",
      start: async (port) =>
        servers.startTessera({
          id: 'tessera-sqlite-otel-always',
          store: await servers.otelAlwaysSqliteStore(),
          port,
        }),
    },
    'tessera-sqlite-introspect': {
      label: 'Tessera, SQLite, introspection',
      note: () =>
        'introspection: POST /oauth/introspect by a resource server (client_secret_post, admin scope ' +
        'tokens:introspect) of one active ES256 token of the client, verified from memory (the signature, the ' +
        "denylist, the client's standing); against tessera-sqlite, the token endpoint's rate on the same server build",
      // Once the server answers: a token of the client, which every request then introspects.
      start: preparedTessera(
        'tessera-sqlite-introspect',
        servers.introspectionSqliteStore,
        async (target, store) => {
          const token = await clientToken(target, 'introspect');
          const rs = store.resourceServer;
          target.path = '/oauth/introspect';
          target.introspection = true;
          target.body = Buffer.from(
            servers.form({ token, client_id: rs.clientId, client_secret: rs.clientSecret }),
          );
        },
      ),
    },
    'tessera-sqlite-exchange': {
      label: 'Tessera, SQLite, token exchange',
      note: () =>
        'token exchange (RFC 8693): a service (client_secret_post) exchanges one active ES256 token of the client ' +
        '(its caller, for the API the service serves) for a token of the API it calls, with act: the subject ' +
        "token verified from memory (the signature, the denylist, both clients' standing), then signed as a " +
        "client credentials token; against tessera-sqlite, the token endpoint's rate on the same server build",
      // Once the server answers: a token of the client (the caller), which every request then exchanges.
      start: preparedTessera(
        'tessera-sqlite-exchange',
        servers.exchangeSqliteStore,
        async (target, store) => {
          const token = await clientToken(target, 'exchange');
          const service = store.service;
          target.exchange = { sub: target.clientId };
          target.clientId = service.clientId;
          target.audience = DOWNSTREAM;
          target.body = Buffer.from(
            servers.form({
              grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
              client_id: service.clientId,
              client_secret: service.clientSecret,
              subject_token: token,
              subject_token_type: 'urn:ietf:params:oauth:token-type:access_token',
              audience: DOWNSTREAM,
            }),
          );
        },
      ),
    },
    'tessera-sqlite-admin-list': {
      label: 'Tessera, SQLite, admin list',
      note: () =>
        `admin list: GET /admin/v1/clients?limit=${ADMIN_LIST_PAGE} by an operator's program (a Bearer token of an ` +
        `admin client with clients:read) on a store of ${ADMIN_LIST_CLIENTS.toLocaleString('en-US')} clients: the ` +
        'token verified, the page read from the store (clients, grants, secrets) and serialized with its schema; ' +
        "against tessera-sqlite, the token endpoint's rate on the same server build",
      // Once the server answers: an admin token, with which every request reads the first page of clients.
      start: preparedTessera('tessera-sqlite-admin-list', servers.adminListSqliteStore, prepareAdminList),
    },
    'tessera-sqlite-admin-list-dpop': {
      label: 'Tessera, SQLite, admin list, DPoP',
      note: () =>
        `admin list with DPoP (RFC 9449 §7): as tessera-sqlite-admin-list, the admin client made with --dpop-bound, ` +
        'its token bound to a key (cnf.jkt, got once with a proof), and every GET carries Authorization: DPoP and ' +
        'a new ES256 proof (htm GET, htu the list URL without its query, ath the hash of the token; made by the ' +
        "load generator): the server verifies the token, then the proof's signature, and records its jti (one " +
        'INSERT, those of a turn in one transaction); against tessera-sqlite-admin-list, what the binding costs a read',
      // Once the server answers: a bound admin token, presented with a fresh proof on every request.
      start: preparedTessera(
        'tessera-sqlite-admin-list-dpop',
        servers.adminListDpopSqliteStore,
        prepareAdminList,
      ),
    },
    'tessera-sqlite-cold': coldScenario(
      'tessera-sqlite-cold',
      'Tessera, SQLite, cold cache',
      servers.sqliteStore,
    ),
    'tessera-sqlite-cached': cachedScenario(
      'tessera-sqlite-cached',
      'Tessera, SQLite, 100k clients cached',
      servers.sqliteStore,
    ),
    'tessera-workers2': {
      label: 'Tessera, SQLite, --workers 2 *',
      workers: 2,
      note: () =>
        `* --workers 2: a primary and two workers on CPUs ${settings.workersCpus}, and the load generator shares ` +
        `CPU ${settings.loadCpus} with them: the figure is a lower bound for two dedicated cores; on a machine with ` +
        `more cores, expect close to N× the single-process figure for N workers, each worker being independent ` +
        `(its own cache and keys, no shared lock on the token path) as long as the load balancer and the store ` +
        `keep up`,
      start: async (port) =>
        servers.startTessera({
          id: 'tessera-workers2',
          store: await servers.sqliteStore(),
          port,
          workers: 2,
        }),
    },
    'tessera-pg': {
      label: 'Tessera, PostgreSQL',
      store: 'postgres',
      start: async (port) =>
        servers.startTessera({ id: 'tessera-pg', store: await servers.postgresStore(), port }),
    },
    'tessera-pg-dpop': {
      label: 'Tessera, PostgreSQL, DPoP',
      store: 'postgres',
      note: () =>
        "DPoP on PostgreSQL: as tessera-sqlite-dpop, each proof's jti recorded in PostgreSQL (the ids of one " +
        'turn of the event loop in one statement); against tessera-pg, what binding a token to a key costs there',
      start: async (port) =>
        servers.startTessera({ id: 'tessera-pg-dpop', store: await servers.dpopPostgresStore(), port }),
    },
    'tessera-pg-cold': coldScenario(
      'tessera-pg-cold',
      'Tessera, PostgreSQL, cold cache',
      servers.postgresStore,
      'postgres',
    ),
    'oidc-provider': {
      label: 'node-oidc-provider',
      start: (port) =>
        servers.startPeer({
          id: 'oidc-provider',
          script: 'oidc-provider.js',
          port,
          audienceParam: 'resource',
        }),
    },
    'oidc-provider-pkjwt': {
      label: 'node-oidc-provider, private_key_jwt',
      note: () =>
        'oidc-provider-pkjwt: node-oidc-provider with the client registered for private_key_jwt (its jwks the ' +
        "bench's ES256 key, token_endpoint_auth_signing_alg ES256), every request carrying a new assertion made by " +
        'the load generator as for tessera-sqlite-pkjwt (aud the token endpoint): it verifies it with jose and ' +
        'records its jti in ReplayDetection on its default in-memory adapter (an LRU of 1000 entries kept in two ' +
        'generations, shared by every model it stores), no store of its own; the replay probe note says whether a ' +
        'replay was refused',
      start: async (port) =>
        withReplayProbe(
          servers.startPeer({
            id: 'oidc-provider-pkjwt',
            script: 'oidc-provider.js',
            port,
            audienceParam: 'resource',
            auth: 'private_key_jwt',
          }),
        ),
    },
    'oidc-provider-dpop': {
      label: 'node-oidc-provider, DPoP',
      note: () =>
        'oidc-provider-dpop: node-oidc-provider with features.dPoP.enabled and the secret client of oidc-provider, ' +
        'every request carrying a new ES256 DPoP proof made by the load generator as for tessera-sqlite-dpop: it ' +
        'verifies the proof with jose (EmbeddedJWK), thumbprints its key, records its jti in ReplayDetection on ' +
        'its default in-memory adapter (as oidc-provider-pkjwt) and binds the token (cnf.jkt, token_type DPoP, ' +
        'checked in the warm-up); the replay probe note says whether a replay was refused',
      start: async (port) =>
        withReplayProbe(
          servers.startPeer({
            id: 'oidc-provider-dpop',
            script: 'oidc-provider.js',
            port,
            audienceParam: 'resource',
            auth: 'dpop',
          }),
        ),
    },
    'oauth2-server': {
      label: '@node-oauth/oauth2-server',
      start: (port) => servers.startPeer({ id: 'oauth2-server', script: 'oauth2-server.js', port }),
    },
    // Not a load: bench/client-ids.js in a process of its own, pinned like a server, on the servers' Node.
    'client-ids': {
      label: 'client ids in memory',
      measure: async () => {
        const child = startPinned({
          name: 'client-ids',
          cpus: settings.serverCpus,
          command: settings.nodePath,
          args: [
            '--expose-gc',
            '--disable-warning=ExperimentalWarning',
            join(ROOT, 'bench/client-ids.js'),
            '--clients',
            settings.idClients.join(','),
            '--json',
          ],
          env: tesseraEnv({}),
          cwd: ROOT,
        });
        try {
          const code = await child.exited;
          const json = child.output.split('\n').find((line) => line.startsWith('{"node"'));
          if (code !== 0 || json === undefined)
            throw new Error(`bench/client-ids.js exited ${code}:\n${child.output}`);
          return JSON.parse(json);
        } finally {
          await stopServer(child);
        }
      },
    },
  };

  return {
    definitions,
    servedBy: servers.servedBy,
    /** The signature alone, if the floor scenario ran: {usPerSignature}, the median of its rounds'. */
    signature: () => medianOfEach(signatures),
    /**
     * The verifications and the replay record alone, if the floor scenario ran (servers/verify-loop.js): each figure
     * the median of its rounds'.
     */
    verifications: () => medianOfEach(verificationRuns),
  };
}

/** The figures of several runs of one tight loop as one: each member the median of its runs'; undefined for none. */
export function medianOfEach(runs) {
  if (runs.length === 0) return undefined;
  return Object.fromEntries(Object.keys(runs[0]).map((key) => [key, median(runs.map((run) => run[key]))]));
}
