/* global Buffer, URLSearchParams, process, fetch, AbortSignal */
// The stores and servers of `npm run bench`'s scenarios (lib/scenarios.js): a store of its own for each, filled as
// the scenario needs, and its server started on it, pinned: Tessera (this checkout's or the --compare revision's),
// the ceiling and the peers.
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { assertionMaker, dpopProofMaker, platformToken } from './assertions.js';
import { httpsFetch, makePki } from './pki.js';
import { freePort, startPinned, stopServer, waitUntilReady } from './proc.js';
import {
  coldClients,
  createPostgresDatabase,
  dropRedisPrefix,
  insertPostgres,
  insertSqlite,
  provision,
  provisionAdminReader,
  provisionExchange,
  provisionFederatedClient,
  provisionKeyClient,
  provisionResourceServer,
  provisionScoped,
  provisionTlsClient,
  tesseraEnv,
} from './stores.js';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const AUDIENCE = 'https://api.bench.example';
/** The API the token exchange scenario's service calls for its caller. */
export const DOWNSTREAM = 'https://downstream.bench.example';
/** The admin list scenario: clients in its store, and clients per page it reads. */
export const ADMIN_LIST_CLIENTS = 1000;
export const ADMIN_LIST_PAGE = 50;

/**
 * The store makers and server starters of one run. `run` is what they share with it: the settings
 * (lib/options.js), the cleanups its stores and databases add to, the environment record (whose PostgreSQL
 * version a PostgreSQL store fills in), whether PostgreSQL answers, where profiles go, and the run's log.
 */
export function runServers({ settings, cleanups, environment, pgUp, profileDir, log }) {
  // Every scenario gets a store of its own, made when it starts and removed at the end: no scenario runs on
  // the audit rows or the cold clients another one left.
  const masterKey = randomBytes(32).toString('base64');
  let cold;
  const coldSet = () => {
    if (!cold) {
      log(`making ${settings.coldClients.toLocaleString('en-US')} cold-cache clients`);
      cold = coldClients(settings.coldClients);
    }
    return cold;
  };
  const storeSettings = (store) => ({
    TESSERA_MASTER_KEY: masterKey,
    TESSERA_LOG_LEVEL: 'warn',
    // Stopped between scenarios, not behind a load balancer: no drain delay (older baselines ignore it).
    TESSERA_SHUTDOWN_DELAY: '0',
    ...(store.databaseUrl
      ? { TESSERA_DATABASE_URL: store.databaseUrl }
      : { TESSERA_DATA_DIR: store.dataDir }),
    ...(store.redisPrefix
      ? { TESSERA_REDIS_URL: settings.redisUrl, TESSERA_REDIS_PREFIX: store.redisPrefix }
      : {}),
  });
  /**
   * The Tessera that the stores are made with and that serves: this checkout's, or the --compare revision's while
   * its turn of a scenario runs.
   */
  let tesseraRoot = ROOT;
  /** A fresh SQLite store, its schema made by the Tessera at `root` (the baseline's may be older). */
  async function sqliteStore(root = tesseraRoot) {
    const dataDir = mkdtempSync(join(tmpdir(), 'tessera-bench-'));
    cleanups.push(async () => rmSync(dataDir, { recursive: true, force: true }));
    const store = { engine: 'sqlite', dataDir };
    store.client = await provision(root, tesseraEnv(storeSettings(store)), AUDIENCE);
    return store;
  }
  /** Like sqliteStore, with a client that has ten scopes and five custom claims (every token carries them). */
  async function scopedSqliteStore() {
    const dataDir = mkdtempSync(join(tmpdir(), 'tessera-bench-'));
    cleanups.push(async () => rmSync(dataDir, { recursive: true, force: true }));
    const store = { engine: 'sqlite', dataDir };
    store.client = await provisionScoped(tesseraRoot, tesseraEnv(storeSettings(store)), AUDIENCE);
    return store;
  }
  /** Like sqliteStore, with a private_key_jwt client (an ES256 key, inline) and the maker of its assertions. */
  async function keyClientSqliteStore() {
    const dataDir = mkdtempSync(join(tmpdir(), 'tessera-bench-'));
    cleanups.push(async () => rmSync(dataDir, { recursive: true, force: true }));
    const store = { engine: 'sqlite', dataDir, assertions: assertionMaker() };
    store.client = await provisionKeyClient(
      tesseraRoot,
      tesseraEnv(storeSettings(store)),
      AUDIENCE,
      store.assertions.jwks,
    );
    store.assertions.clientId = store.client.clientId;
    return store;
  }
  /** The run's certificates (lib/pki.js), made by the first TLS scenario that starts. */
  let pki;
  const thePki = () => {
    if (!pki) {
      const t0 = Date.now();
      pki = makePki(cleanups);
      log(`certificates of the TLS scenarios made with openssl in ${Date.now() - t0} ms (${pki.dir})`);
    }
    return pki;
  };
  /**
   * Like sqliteStore (its client, a secret), served over Tessera's own HTTPS: TESSERA_TLS_CERT and TESSERA_TLS_KEY,
   * the certificate for 127.0.0.1 of the run's server CA, which the load generator trusts.
   */
  async function tlsSqliteStore() {
    const store = await sqliteStore();
    store.tls = { pki: thePki() };
    return store;
  }
  /**
   * A fresh SQLite store whose client is a tls_client_auth one (RFC 8705 §2.1, tls_client_auth_san_uri the client
   * certificate's SPIFFE ID), TESSERA_TLS_CLIENT_CA the run's client CA, and the body every request sends: the
   * client's id and the audience, no secret.
   */
  async function certificateClientStore() {
    const dataDir = mkdtempSync(join(tmpdir(), 'tessera-bench-'));
    cleanups.push(async () => rmSync(dataDir, { recursive: true, force: true }));
    const { clientCaFile, clientSanUri } = thePki();
    const store = { engine: 'sqlite', dataDir, env: { TESSERA_TLS_CLIENT_CA: clientCaFile } };
    store.client = await provisionTlsClient(
      tesseraRoot,
      tesseraEnv(storeSettings(store)),
      AUDIENCE,
      clientSanUri,
    );
    store.body = Buffer.from(
      form({ grant_type: 'client_credentials', client_id: store.client.clientId, audience: AUDIENCE }),
    );
    return store;
  }
  /** The tls_client_auth client over Tessera's HTTPS, its certificate presented in every connection's handshake. */
  async function mtlsSqliteStore() {
    const store = await certificateClientStore();
    store.tls = { pki: thePki(), clientCertificate: true };
    return store;
  }
  /**
   * The tls_client_auth client over plain HTTP, as behind a proxy that terminated TLS: the load generator (on
   * 127.0.0.1, TESSERA_TRUST_PROXY) sends the client certificate in every request's Client-Cert header (RFC 9440,
   * TESSERA_CLIENT_CERT_HEADER=client-cert).
   */
  async function mtlsHeaderSqliteStore() {
    const store = await certificateClientStore();
    Object.assign(store.env, { TESSERA_TRUST_PROXY: '127.0.0.1', TESSERA_CLIENT_CERT_HEADER: 'client-cert' });
    store.headers = {
      'content-type': 'application/x-www-form-urlencoded',
      'client-cert': thePki().clientCertHeader,
    };
    return store;
  }
  /**
   * The run's OTLP/HTTP receiver (bench/servers/otlp-sink.js), started by the first tracing scenario: on the
   * harness's Node, pinned to the load generator's CPU (its work is not the server's), stopped at the end. `stats()`
   * are its counts so far (requests, bytes, spans, by path): a scenario's are the difference between two readings.
   */
  let sink;
  async function otlpSink() {
    if (!sink) {
      const port = await freePort();
      const url = `http://127.0.0.1:${port}`;
      const server = startPinned({
        name: 'otlp-sink',
        cpus: settings.loadCpus,
        command: process.execPath,
        args: [join(ROOT, 'bench/servers/otlp-sink.js')],
        env: { ...tesseraEnv({}), BENCH_PORT: String(port) },
        cwd: ROOT,
      });
      cleanups.push(() => stopServer(server));
      await waitUntilReady(server, `${url}/stats`, { timeoutMs: 10_000 });
      sink = {
        url,
        pid: server.pid,
        server,
        async stats() {
          const response = await fetch(`${url}/stats`, { signal: AbortSignal.timeout(5000) });
          if (!response.ok) throw new Error(`the OTLP sink's /stats: status ${response.status}`);
          return response.json();
        },
      };
      log(`OTLP sink listening at ${url} (pid ${server.pid}, CPU ${settings.loadCpus})`);
    }
    return sink;
  }
  /**
   * Like sqliteStore (its client, a secret), with traces exported to the run's OTLP sink by the standard
   * variables: OTEL_EXPORTER_OTLP_ENDPOINT the sink (the protocol OpenTelemetry's default, http/protobuf, to
   * /v1/traces), OTEL_TRACES_SAMPLER `sampler` and OTEL_TRACES_SAMPLER_ARG `arg` when given; nothing else of
   * OpenTelemetry's is set (tesseraEnv passes none of the harness's OTEL_* on).
   */
  async function otelSqliteStore(sampler, arg) {
    const store = await sqliteStore();
    store.sink = await otlpSink();
    store.env = {
      OTEL_EXPORTER_OTLP_ENDPOINT: store.sink.url,
      OTEL_TRACES_SAMPLER: sampler,
      ...(arg === undefined ? {} : { OTEL_TRACES_SAMPLER_ARG: arg }),
    };
    return store;
  }
  /** Like sqliteStore, with the maker of the DPoP proofs every request of its client carries. */
  async function dpopSqliteStore() {
    const store = await sqliteStore();
    store.dpop = dpopProofMaker();
    return store;
  }
  /**
   * `store` with Redis (TESSERA_REDIS_URL) under a prefix of its own, so that the proofs' ids go to Redis; the
   * prefix's keys are deleted at the end (they expire anyway).
   */
  function withRedis(store) {
    const prefix = `tessera-bench-${randomBytes(6).toString('hex')}`;
    store.redisPrefix = prefix;
    cleanups.push(() => dropRedisPrefix(settings.redisUrl, prefix));
    return store;
  }
  /**
   * Like sqliteStore, with a client that authenticates with a federated credential (a Kubernetes cluster's
   * key, inline) and the one platform token every request carries.
   */
  async function federatedSqliteStore() {
    const dataDir = mkdtempSync(join(tmpdir(), 'tessera-bench-'));
    cleanups.push(async () => rmSync(dataDir, { recursive: true, force: true }));
    const trust = {
      issuer: 'https://kubernetes.default.svc.cluster.local',
      subject: 'system:serviceaccount:bench:bench',
      audience: 'https://tessera.bench.example',
    };
    const { jwks, token } = platformToken(trust);
    const store = { engine: 'sqlite', dataDir };
    store.client = await provisionFederatedClient(
      tesseraRoot,
      tesseraEnv(storeSettings(store)),
      AUDIENCE,
      dataDir,
      {
        ...trust,
        jwks,
      },
    );
    store.body = Buffer.from(
      form({
        grant_type: 'client_credentials',
        client_id: store.client.clientId,
        client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
        client_assertion: token,
        audience: AUDIENCE,
      }),
    );
    return store;
  }
  /**
   * Like sqliteStore, with a resource server's client (admin scope tokens:introspect) beside the client, granted
   * the admin audience of the server's issuer (`<issuer>/admin/v1`: the one the server on `port` will have).
   */
  async function introspectionSqliteStore(port) {
    const store = await sqliteStore();
    store.resourceServer = await provisionResourceServer(
      tesseraRoot,
      tesseraEnv({ ...storeSettings(store), TESSERA_ISSUER: `http://127.0.0.1:${port}` }),
    );
    return store;
  }
  /**
   * Like sqliteStore, with a service (the resource server of AUDIENCE, granted DOWNSTREAM with token_exchange)
   * that exchanges the client's tokens for DOWNSTREAM ones.
   */
  async function exchangeSqliteStore() {
    const store = await sqliteStore();
    store.service = await provisionExchange(
      tesseraRoot,
      tesseraEnv(storeSettings(store)),
      store.dataDir,
      AUDIENCE,
      DOWNSTREAM,
    );
    return store;
  }
  /**
   * Like sqliteStore, with ADMIN_LIST_CLIENTS more clients and an admin client that may read them (clients:read),
   * granted the admin audience of the server's issuer (`<issuer>/admin/v1`: the one the server on `port` will have).
   */
  async function adminListSqliteStore(port, { dpopBound = false } = {}) {
    const store = await sqliteStore();
    store.admin = await provisionAdminReader(
      tesseraRoot,
      tesseraEnv({ ...storeSettings(store), TESSERA_ISSUER: `http://127.0.0.1:${port}` }),
      store.dataDir,
      AUDIENCE,
      ADMIN_LIST_CLIENTS,
      { dpopBound },
    );
    return store;
  }
  /**
   * Like adminListSqliteStore, with the admin client DPoP-bound and the maker of the proofs: one for its token,
   * then one for every admin request (lib/assertions.js, forResource). The store's client stays unbound: the
   * proofs are the admin client's alone.
   */
  async function adminListDpopSqliteStore(port) {
    const store = await adminListSqliteStore(port, { dpopBound: true });
    store.adminDpop = dpopProofMaker();
    return store;
  }
  async function postgresStore() {
    if (!pgUp) throw new Error(`PostgreSQL does not answer at ${settings.pgAdminUrl}`);
    const db = await createPostgresDatabase(settings.pgAdminUrl);
    cleanups.push(() => db.drop());
    environment.postgres = db.version;
    const store = { engine: 'postgres', databaseUrl: db.url };
    store.client = await provision(tesseraRoot, tesseraEnv(storeSettings(store)), AUDIENCE);
    return store;
  }
  /** Like postgresStore, with the maker of the DPoP proofs every request of its client carries. */
  async function dpopPostgresStore() {
    const store = await postgresStore();
    store.dpop = dpopProofMaker();
    return store;
  }
  async function loadCold(store) {
    const clients = coldSet();
    const t0 = Date.now();
    if (store.engine === 'sqlite') await insertSqlite(join(store.dataDir, 'tessera.db'), clients, AUDIENCE);
    else await insertPostgres(store.databaseUrl, clients, AUDIENCE);
    log(
      `${clients.ids.length.toLocaleString('en-US')} clients written to ${store.engine} in ${Date.now() - t0} ms`,
    );
  }

  const form = (params) => new URLSearchParams(params).toString();
  const tokenBody = (client, audienceParam = 'audience') =>
    form({
      grant_type: 'client_credentials',
      client_id: client.clientId,
      client_secret: client.clientSecret,
      [audienceParam]: AUDIENCE,
    });

  // Requests spread over every cold client, in a random order that repeats no client within a pass.
  function rotation() {
    const { ids, secrets } = coldSet();
    const order = ids.map((_, i) => i);
    for (let i = order.length - 1; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1));
      [order[i], order[j]] = [order[j], order[i]];
    }
    return {
      next: 0,
      clientIds: order.map((i) => ids[i]),
      bodies: order.map((i) => Buffer.from(tokenBody({ clientId: ids[i], clientSecret: secrets[i] }))),
    };
  }

  async function startTessera({
    id,
    store,
    port,
    workers = 1,
    cold: isCold = false,
    rotate = isCold,
    env: own = {},
    root = tesseraRoot,
  }) {
    const tls = store.tls;
    const url = `${tls ? 'https' : 'http'}://127.0.0.1:${port}`;
    const env = tesseraEnv({
      ...storeSettings(store),
      TESSERA_ISSUER: url,
      ...(tls ? { TESSERA_TLS_CERT: tls.pki.serverCert, TESSERA_TLS_KEY: tls.pki.serverKey } : {}),
      ...(isCold ? { TESSERA_CACHE_MAX: String(settings.coldCacheMax) } : {}),
      ...store.env,
      ...own,
      ...settings.extraEnv,
    });
    const flags = ['--disable-warning=ExperimentalWarning'];
    if (settings.profile || settings.stalls)
      flags.push('--cpu-prof', `--cpu-prof-dir=${join(profileDir, id)}`);
    if (settings.stalls) {
      mkdirSync(join(profileDir, id), { recursive: true });
      flags.push('--cpu-prof-interval', '250', '--import', join(ROOT, 'bench/servers/stalls.js'));
      env.BENCH_STALLS_FILE = join(profileDir, id, 'stalls.log');
    }
    const args = [
      ...flags,
      join(root, 'bin/tessera.js'),
      'serve',
      '--port',
      String(port),
      '--host',
      '127.0.0.1',
    ];
    if (workers > 1) args.push('--workers', String(workers));
    const server = startPinned({
      name: id,
      cpus: workers > 1 ? settings.workersCpus : settings.serverCpus,
      command: settings.nodePath,
      args,
      env,
      cwd: root,
    });
    const target = { ...tokenTarget(url, store.client), rotation: rotate ? rotation() : undefined };
    // Over TLS: what autocannon's connections present (tls.connect's options: the server CA; the client
    // certificate and its key when the client authenticates with it), and a fetch that trusts the server CA for
    // the harness's own requests (readiness, the JWKS, /metrics).
    let fetch;
    if (tls) {
      const { ca, clientCert, clientKey } = tls.pki;
      target.tlsOptions = tls.clientCertificate ? { ca, cert: clientCert, key: clientKey } : { ca };
      fetch = await httpsFetch(ca);
      target.fetch = fetch;
    }
    // Headers of the store's own (the Client-Cert header a proxy would forward), sent with every request.
    if (store.headers) target.headers = store.headers;
    if (store.assertions) {
      store.assertions.tokenEndpoint = `${url}/oauth/token`;
      target.assertions = store.assertions;
    }
    if (store.dpop) {
      store.dpop.tokenEndpoint = `${url}/oauth/token`;
      target.dpop = store.dpop;
    }
    // A body of the store's own (the federated scenario's platform token), sent as it is every time.
    if (store.body) target.body = store.body;
    // The tracing scenarios' OTLP sink: run.js reads what it received during each measurement and in all.
    return { server, target, readyUrl: `${url}/readyz`, fetch, sink: store.sink };
  }

  /** What the load generator asks a server for: the token of `client`, and where to check it. */
  function tokenTarget(url, client, audienceParam = 'audience') {
    return {
      url,
      path: '/oauth/token',
      issuer: url,
      audience: AUDIENCE,
      jwksUrl: `${url}/.well-known/jwks.json`,
      clientId: client.clientId,
      body: Buffer.from(tokenBody(client, audienceParam)),
    };
  }

  /**
   * A tight loop pinned like a server, on the servers' Node: `script` (bench/servers/) prints one line of JSON that
   * starts with `{"<key>"`, which is returned parsed.
   */
  async function tightLoop(script, key) {
    const child = startPinned({
      name: script.replace(/\.js$/, ''),
      cpus: settings.serverCpus,
      command: settings.nodePath,
      args: ['--disable-warning=ExperimentalWarning', join(ROOT, 'bench/servers', script)],
      env: {
        ...tesseraEnv({}),
        BENCH_PORT: '0',
        BENCH_ISSUER: 'http://127.0.0.1',
        BENCH_AUDIENCE: AUDIENCE,
        BENCH_CLIENT_ID: 'bench-client',
        BENCH_CLIENT_SECRET: 'unused',
      },
      cwd: ROOT,
    });
    try {
      const code = await child.exited;
      const json = child.output.split('\n').find((line) => line.startsWith(`{"${key}"`));
      if (code !== 0 || json === undefined)
        throw new Error(`bench/servers/${script} exited ${code}:\n${child.output}`);
      return JSON.parse(json);
    } finally {
      await stopServer(child);
    }
  }

  /** The ceiling's signature alone, in a tight loop pinned like a server (bench/servers/sign-loop.js). */
  const measureSignature = () => tightLoop('sign-loop.js', 'usPerSignature');
  /**
   * One verification of each kind the paths do and one replay record, each in a tight loop pinned like a server
   * (bench/servers/verify-loop.js): {es256Crypto, es256Jose, rs256Jose, rs256Crypto, replayRecord, replayBatch}, µs.
   */
  const measureVerifications = async () => (await tightLoop('verify-loop.js', 'verifications')).verifications;

  /**
   * A reference server; `audited` (ceiling.js): with an audit trail in a directory of its own (BENCH_AUDIT_DIR).
   * `auth` (oidc-provider.js): 'private_key_jwt', the client registered with the public keys of an assertion maker
   * (BENCH_CLIENT_JWKS) and every request carrying a new assertion; 'dpop', the secret client with a new DPoP proof
   * on every request (BENCH_DPOP=1): the load generator makes them as for Tessera's scenarios (lib/assertions.js).
   */
  function startPeer({
    id,
    script,
    port,
    audienceParam = 'audience',
    extraEnv = {},
    audited = false,
    auth = 'secret',
  }) {
    const url = `http://127.0.0.1:${port}`;
    const assertions = auth === 'private_key_jwt' ? assertionMaker() : undefined;
    const dpop = auth === 'dpop' ? dpopProofMaker() : undefined;
    if (assertions) extraEnv = { ...extraEnv, BENCH_CLIENT_JWKS: JSON.stringify(assertions.jwks) };
    if (dpop) extraEnv = { ...extraEnv, BENCH_DPOP: '1' };
    if (audited) {
      const auditDir = mkdtempSync(join(tmpdir(), 'tessera-bench-audit-'));
      cleanups.push(async () => rmSync(auditDir, { recursive: true, force: true }));
      extraEnv = { ...extraEnv, BENCH_AUDIT_DIR: auditDir };
    }
    const client = {
      clientId: `bench-${randomBytes(8).toString('hex')}`,
      clientSecret: randomBytes(32).toString('base64url'),
    };
    const env = {
      ...tesseraEnv({}),
      NODE_ENV: 'production',
      BENCH_PORT: String(port),
      BENCH_ISSUER: url,
      BENCH_AUDIENCE: AUDIENCE,
      BENCH_CLIENT_ID: client.clientId,
      BENCH_CLIENT_SECRET: client.clientSecret,
      ...extraEnv,
    };
    const server = startPinned({
      name: id,
      cpus: settings.serverCpus,
      command: settings.nodePath,
      args: [
        ...(settings.profile ? ['--cpu-prof', `--cpu-prof-dir=${join(profileDir, id)}`] : []),
        join(ROOT, 'bench/servers', script),
      ],
      env,
      cwd: ROOT,
    });
    const target = tokenTarget(url, client, audienceParam);
    target.audienceParam = audienceParam;
    if (assertions) {
      Object.assign(assertions, { clientId: client.clientId, tokenEndpoint: `${url}/oauth/token` });
      target.assertions = assertions;
    }
    if (dpop) {
      dpop.tokenEndpoint = `${url}/oauth/token`;
      target.dpop = dpop;
    }
    const loopDelayUrl = script === 'ceiling.js' ? `${url}/metrics` : undefined;
    return { server, target, readyUrl: target.jwksUrl, loopDelayUrl };
  }

  return {
    sqliteStore,
    scopedSqliteStore,
    keyClientSqliteStore,
    dpopSqliteStore,
    tlsSqliteStore,
    mtlsSqliteStore,
    mtlsHeaderSqliteStore,
    otelRatioSqliteStore: () => otelSqliteStore('parentbased_traceidratio', '0.01'),
    otelAlwaysSqliteStore: () => otelSqliteStore('always_on'),
    dpopRedisSqliteStore: async () => withRedis(await dpopSqliteStore()),
    keyClientRedisSqliteStore: async () => withRedis(await keyClientSqliteStore()),
    federatedSqliteStore,
    introspectionSqliteStore,
    exchangeSqliteStore,
    adminListSqliteStore,
    adminListDpopSqliteStore,
    postgresStore,
    dpopPostgresStore,
    loadCold,
    form,
    startTessera,
    startPeer,
    measureSignature,
    measureVerifications,
    /** Runs `body` with the Tessera at `root` (the --compare revision's build) making the stores and serving. */
    async servedBy(root, body) {
      tesseraRoot = root;
      try {
        return await body();
      } finally {
        tesseraRoot = ROOT;
      }
    },
  };
}
