/* global process, console, setTimeout, clearTimeout, Buffer, URLSearchParams, fetch */
// `npm run bench`: Tessera against the ceiling and its peers, one server at a time, each pinned to one core
// and loaded by autocannon from the other. See bench/README.md.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { cpus as osCpus, release, tmpdir, totalmem } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkedWarmup, measure } from './lib/load.js';
import { options } from './lib/options.js';
import {
  freePort,
  killAllNow,
  machineCpuSeconds,
  pinSelf,
  startPinned,
  stopServer,
  waitUntilReady,
} from './lib/proc.js';
import {
  clientIdsText,
  compareRows,
  compareText,
  markdown,
  profileTop,
  svgChart,
  targets,
  targetsText,
  textTable,
} from './lib/report.js';
import {
  coldClients,
  createPostgresDatabase,
  insertPostgres,
  insertSqlite,
  postgresAnswers,
  provision,
  provisionFederatedClient,
  provisionKeyClient,
  provisionExchange,
  provisionAdminReader,
  provisionResourceServer,
  provisionScoped,
  tesseraEnv,
} from './lib/stores.js';
import { assertionMaker, dpopProofMaker, platformToken } from './lib/assertions.js';
import { namedStalls, stallsText } from './lib/stalls.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const AUDIENCE = 'https://api.bench.example';
/** The API the token exchange scenario's service calls for its caller. */
const DOWNSTREAM = 'https://downstream.bench.example';
/** The admin list scenario: clients in its store, and clients per page it reads. */
const ADMIN_LIST_CLIENTS = 1000;
const ADMIN_LIST_PAGE = 50;

/**
 * Tessera's tessera_event_loop_delay_max_seconds (the longest event-loop delay since the previous scrape), or
 * the ceiling's event_loop_delay_max_seconds (the same measure), in milliseconds; undefined where the server
 * has no metrics (TESSERA_METRICS=false, the other peers).
 */
async function loopDelayMaxMs(metricsUrl) {
  try {
    const response = await fetch(metricsUrl);
    if (!response.ok) return undefined;
    const match = /^(?:tessera_)?event_loop_delay_max_seconds (\S+)$/m.exec(await response.text());
    return match ? Number(match[1]) * 1000 : undefined;
  } catch {
    return undefined;
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** CPU cores the machine keeps busy over one second (this benchmark is idle meanwhile). */
async function backgroundCores() {
  const before = machineCpuSeconds();
  await sleep(1000);
  const after = machineCpuSeconds();
  return Math.max(0, after.tasks + after.interrupts - before.tasks - before.interrupts);
}

/** Waits up to `seconds` for a second in which the machine is (nearly) idle; returns the last figure. */
async function waitForQuiet(seconds) {
  const deadline = Date.now() + seconds * 1000;
  let cores = await backgroundCores();
  while (cores >= 0.15 && Date.now() < deadline) cores = await backgroundCores();
  return cores;
}

const log = (message) =>
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);

function versionOf(pkg) {
  try {
    return JSON.parse(readFileSync(join(ROOT, 'node_modules', pkg, 'package.json'), 'utf8')).version;
  } catch {
    return 'unknown';
  }
}

function gitDescription() {
  try {
    const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], {
      cwd: ROOT,
      encoding: 'utf8',
    }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--', 'src'], {
      cwd: ROOT,
      encoding: 'utf8',
    }).trim();
    return dirty ? `${commit} + uncommitted changes in src/` : commit;
  } catch {
    return 'unknown';
  }
}

function preflight(settings) {
  const [major, minor] = process.versions.node.split('.').map(Number);
  if (major < 22 || (major === 22 && minor < 13))
    throw new Error(
      `the harness needs Node >= 22.13 (it runs the Tessera CLI and node:sqlite), this is ${process.versions.node}: ` +
        'run it as "npm run bench", which uses the Node 22 that npm installed (--node picks the servers\' Node)',
    );
  try {
    execFileSync('taskset', ['-V'], { stdio: 'ignore' });
  } catch {
    throw new Error('taskset not found: install util-linux (apt-get install util-linux)');
  }
  const cpuCount = osCpus().length;
  const needed = [settings.serverCpus, settings.loadCpus, settings.workersCpus].flatMap((s) => s.split(','));
  for (const cpu of needed)
    if (Number(cpu) >= cpuCount) throw new Error(`CPU ${cpu} does not exist here (${cpuCount} CPUs)`);
  if (!existsSync(join(ROOT, 'dist/cli/index.js')))
    throw new Error('Tessera is not built: run npm run build');
  if (!existsSync(settings.nodePath)) throw new Error(`no Node binary at ${settings.nodePath}`);
  return execFileSync(settings.nodePath, ['--version'], { encoding: 'utf8' }).trim().replace(/^v/, '');
}

async function main() {
  const settings = options(ROOT);
  const serverNode = preflight(settings);
  if (!settings.baseline)
    settings.scenarios = settings.scenarios.filter((id) => id !== 'tessera-sqlite-baseline');
  pinSelf(settings.loadCpus);
  const startedAt = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const stamp =
    startedAt.replace(/:/g, '-') + (settings.label ? `-${settings.label.replace(/[^\w.-]+/g, '_')}` : '');
  mkdirSync(settings.out, { recursive: true });
  const profileDir = join(settings.out, `${stamp}-profiles`);

  const cleanups = [];
  /** Each cleanup runs once, newest first, whoever asks (the end of the run, a signal, the deadline). */
  const runCleanups = async () => {
    while (cleanups.length > 0) {
      const cleanup = cleanups.pop();
      try {
        await cleanup();
      } catch (error) {
        log(`cleanup failed: ${error.message}`);
      }
    }
  };
  const rows = [];
  /** The client-ids measurement's figures, when it ran. */
  let clientIds;
  const failures = [];
  const notes = [];
  const profiles = [];
  /** --stalls: each Tessera scenario's longest stalls, named. */
  const stallReports = [];

  // Nothing outlives the benchmark: servers are killed on any exit, and the whole run has a deadline.
  process.on('exit', killAllNow);
  let aborting = false;
  const abort = async (why, code) => {
    if (aborting) return;
    aborting = true;
    log(why);
    killAllNow();
    await runCleanups();
    process.exit(code);
  };
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'])
    process.once(signal, () => void abort(`${signal}: stopping every server`, 130));
  const perScenario =
    settings.warmupSeconds +
    settings.concurrencies.length * (settings.seconds + 2 + settings.waitQuietSeconds) +
    60;
  const turns =
    settings.scenarios.length +
    (settings.compare
      ? (2 * settings.rounds - 1) * settings.scenarios.filter((id) => id.startsWith('tessera-')).length
      : 0);
  const budgetMs = (turns * perScenario + 180) * 1000;
  const watchdog = setTimeout(
    () => void abort(`the run exceeded its time budget (${budgetMs / 1000} s): stopped`, 1),
    budgetMs,
  );
  watchdog.unref();

  const baseline = settings.scenarios.includes('tessera-sqlite-baseline')
    ? buildBaseline(settings.baseline, cleanups)
    : undefined;
  /** --compare: the revision every Tessera scenario also runs as, built apart like the baseline. */
  const compare = settings.compare ? buildBaseline(settings.compare, cleanups) : undefined;
  const isTessera = (id) => id.startsWith('tessera-') && id !== 'tessera-sqlite-baseline';
  const pgUp = settings.scenarios.some((s) => s.startsWith('tessera-pg'))
    ? await postgresAnswers(settings.pgAdminUrl)
    : false;
  const background = await backgroundCores();
  if (background >= 0.15)
    log(
      `the machine is busy before the run (${background.toFixed(2)} CPU in use by others): figures will be disturbed`,
    );
  const environment = {
    backgroundCpuCoresAtStart: background,
    cpuModel: osCpus()[0]?.model ?? 'unknown',
    cpus: osCpus().length,
    memoryGb: Math.round(totalmem() / 2 ** 30),
    kernel: release(),
    harnessNode: process.versions.node,
    serverNode,
    serverNodePath: settings.nodePath,
    autocannon: versionOf('autocannon'),
    tesseraCommit: gitDescription(),
    baselineCommit: baseline?.commit,
    compareCommit: compare?.commit,
    postgres: undefined,
    versions: Object.fromEntries(
      ['oidc-provider', '@node-oauth/oauth2-server', 'jose', 'fastify', 'autocannon', 'pg'].map((p) => [
        p,
        versionOf(p),
      ]),
    ),
  };

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
  /** Like sqliteStore, with the maker of the DPoP proofs every request of its client carries. */
  async function dpopSqliteStore() {
    const store = await sqliteStore();
    store.dpop = dpopProofMaker();
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
  async function adminListSqliteStore(port) {
    const store = await sqliteStore();
    store.admin = await provisionAdminReader(
      tesseraRoot,
      tesseraEnv({ ...storeSettings(store), TESSERA_ISSUER: `http://127.0.0.1:${port}` }),
      store.dataDir,
      AUDIENCE,
      ADMIN_LIST_CLIENTS,
    );
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
    env: own = {},
    root = tesseraRoot,
  }) {
    const env = tesseraEnv({
      ...storeSettings(store),
      TESSERA_ISSUER: `http://127.0.0.1:${port}`,
      ...(isCold ? { TESSERA_CACHE_MAX: String(settings.coldCacheMax) } : {}),
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
    const url = `http://127.0.0.1:${port}`;
    const target = { ...tokenTarget(url, store.client), rotation: isCold ? rotation() : undefined };
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
    return { server, target, readyUrl: `${url}/readyz` };
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

  /** The ceiling's signature alone, in a tight loop pinned like a server (bench/servers/sign-loop.js). */
  async function measureSignature() {
    const child = startPinned({
      name: 'sign-loop',
      cpus: settings.serverCpus,
      command: settings.nodePath,
      args: [join(ROOT, 'bench/servers/sign-loop.js')],
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
      const json = child.output.split('\n').find((line) => line.startsWith('{"usPerSignature"'));
      if (code !== 0 || json === undefined)
        throw new Error(`bench/servers/sign-loop.js exited ${code}:\n${child.output}`);
      return JSON.parse(json);
    } finally {
      await stopServer(child);
    }
  }

  function startPeer({ id, script, port, audienceParam = 'audience', extraEnv = {} }) {
    const url = `http://127.0.0.1:${port}`;
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
    const loopDelayUrl = script === 'ceiling.js' ? `${url}/metrics` : undefined;
    return { server, target, readyUrl: target.jwksUrl, loopDelayUrl };
  }

  /**
   * A Tessera scenario whose requests need something of the running server first (a token to introspect, to
   * exchange, to call the admin API with): `prepare(target, store)` runs once it answers, before the warm-up.
   */
  const preparedTessera = (id, makeStore, prepare) => async (port) => {
    const store = await makeStore(port);
    const started = await startTessera({ id, store, port });
    started.target.prepare = () => prepare(started.target, store);
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
      await loadCold(opened);
      return startTessera({ id, store: opened, port, cold: true });
    },
  });

  /** One token of the scenario's client, got at its running server: what an introspection or exchange scenario sends. */
  async function clientToken(target, purpose) {
    const response = await fetch(`${target.url}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: target.body,
    });
    if (response.status !== 200) throw new Error(`no token to ${purpose}: status ${response.status}`);
    return (await response.json()).access_token;
  }

  const definitions = {
    ceiling: {
      label: 'ceiling (node:http + node:crypto)',
      start: (port) => startPeer({ id: 'ceiling', script: 'ceiling.js', port }),
    },
    'ceiling-at-once': {
      label: 'ceiling, each answer written at once',
      note: () =>
        'ceiling-at-once: the ceiling writing each answer as soon as its body is read, instead of in one batch per ' +
        'event-loop iteration; the difference is what batching saves in the kernel on loopback',
      start: (port) =>
        startPeer({ id: 'ceiling-at-once', script: 'ceiling.js', port, extraEnv: { BENCH_AT_ONCE: '1' } }),
    },
    floor: {
      label: 'HTTP floor (the ceiling, one fixed token)',
      note: () =>
        signature === undefined
          ? undefined
          : `physical limit on one core ("vs limit"): one core doing nothing but the HTTP floor's work per answer (the ` +
            `ceiling answering one token signed at start; its server CPU per answer) plus one ES256 signature as a ` +
            `tight loop measures it on the server's CPU (${signature.usPerSignature.toFixed(1)} µs)`,
      start: async (port) => {
        signature = await measureSignature();
        log(`floor: one signature in a tight loop costs ${signature.usPerSignature.toFixed(1)} µs`);
        return startPeer({ id: 'floor', script: 'ceiling.js', port, extraEnv: { BENCH_FIXED: '1' } });
      },
    },
    'tessera-sqlite': {
      label: 'Tessera, SQLite',
      start: async (port) => startTessera({ id: 'tessera-sqlite', store: await sqliteStore(), port }),
    },
    'tessera-sqlite-baseline': {
      label: `Tessera, SQLite, baseline ${baseline?.commit ?? ''}`,
      note: () =>
        `baseline: Tessera as of ${baseline.commit} (--baseline ${settings.baseline}), built apart and run like ` +
        'tessera-sqlite in the same run: the difference between the two rows is what the changes since cost or save',
      start: async (port) =>
        startTessera({
          id: 'tessera-sqlite-baseline',
          store: await sqliteStore(baseline.root),
          port,
          root: baseline.root,
        }),
    },
    'tessera-sqlite-no-metrics': {
      label: 'Tessera, SQLite, TESSERA_METRICS=false',
      start: async (port) =>
        startTessera({
          id: 'tessera-sqlite-no-metrics',
          store: await sqliteStore(),
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
        startTessera({ id: 'tessera-sqlite-scoped', store: await scopedSqliteStore(), port }),
    },
    'tessera-sqlite-pkjwt': {
      label: 'Tessera, SQLite, private_key_jwt',
      note: () =>
        'private_key_jwt: the client authenticates with a new ES256 client assertion per request (made by the load ' +
        'generator): the server verifies its signature with jose and records its jti in the store (the replay ' +
        'check, one INSERT; Redis when configured); against tessera-sqlite, what an assertion costs over a secret',
      start: async (port) =>
        startTessera({ id: 'tessera-sqlite-pkjwt', store: await keyClientSqliteStore(), port }),
    },
    'tessera-sqlite-dpop': {
      label: 'Tessera, SQLite, DPoP',
      note: () =>
        'DPoP: the client of tessera-sqlite (a secret) sends a new ES256 DPoP proof with every request (made by ' +
        'the load generator): the server checks it, verifies its signature with node:crypto (the key imported and ' +
        'thumbprinted once), records its jti in the store (one INSERT; Redis when configured), and the token ' +
        'carries cnf.jkt; ' +
        'against tessera-sqlite, what binding a token to a key costs',
      start: async (port) =>
        startTessera({ id: 'tessera-sqlite-dpop', store: await dpopSqliteStore(), port }),
    },
    'tessera-sqlite-federated': {
      label: 'Tessera, SQLite, federated credential',
      note: () =>
        'federated: the client authenticates with a Kubernetes projected service-account token (RS256, the ' +
        "cluster's key registered inline), the same token on every request as a pod reuses it: the server checks " +
        'its claims against the credential and verifies its signature with jose; no replay check (the credential ' +
        'is not once), so no write; against tessera-sqlite-pkjwt, what a platform token costs over an assertion',
      start: async (port) =>
        startTessera({ id: 'tessera-sqlite-federated', store: await federatedSqliteStore(), port }),
    },
    'tessera-sqlite-introspect': {
      label: 'Tessera, SQLite, introspection',
      note: () =>
        'introspection: POST /oauth/introspect by a resource server (client_secret_post, admin scope ' +
        'tokens:introspect) of one active ES256 token of the client, verified from memory (the signature, the ' +
        "denylist, the client's standing); against tessera-sqlite, the token endpoint's rate on the same server build",
      // Once the server answers: a token of the client, which every request then introspects.
      start: preparedTessera('tessera-sqlite-introspect', introspectionSqliteStore, async (target, store) => {
        const token = await clientToken(target, 'introspect');
        const rs = store.resourceServer;
        target.path = '/oauth/introspect';
        target.introspection = true;
        target.body = Buffer.from(form({ token, client_id: rs.clientId, client_secret: rs.clientSecret }));
      }),
    },
    'tessera-sqlite-exchange': {
      label: 'Tessera, SQLite, token exchange',
      note: () =>
        'token exchange (RFC 8693): a service (client_secret_post) exchanges one active ES256 token of the client ' +
        '(its caller, for the API the service serves) for a token of the API it calls, with act: the subject ' +
        "token verified from memory (the signature, the denylist, both clients' standing), then signed as a " +
        "client credentials token; against tessera-sqlite, the token endpoint's rate on the same server build",
      // Once the server answers: a token of the client (the caller), which every request then exchanges.
      start: preparedTessera('tessera-sqlite-exchange', exchangeSqliteStore, async (target, store) => {
        const token = await clientToken(target, 'exchange');
        const service = store.service;
        target.exchange = { sub: target.clientId };
        target.clientId = service.clientId;
        target.audience = DOWNSTREAM;
        target.body = Buffer.from(
          form({
            grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
            client_id: service.clientId,
            client_secret: service.clientSecret,
            subject_token: token,
            subject_token_type: 'urn:ietf:params:oauth:token-type:access_token',
            audience: DOWNSTREAM,
          }),
        );
      }),
    },
    'tessera-sqlite-admin-list': {
      label: 'Tessera, SQLite, admin list',
      note: () =>
        `admin list: GET /admin/v1/clients?limit=${ADMIN_LIST_PAGE} by an operator's program (a Bearer token of an ` +
        `admin client with clients:read) on a store of ${ADMIN_LIST_CLIENTS.toLocaleString('en-US')} clients: the ` +
        'token verified, the page read from the store (clients, grants, secrets) and serialized with its schema; ' +
        "against tessera-sqlite, the token endpoint's rate on the same server build",
      // Once the server answers: an admin token, with which every request reads the first page of clients.
      start: preparedTessera('tessera-sqlite-admin-list', adminListSqliteStore, async (target, store) => {
        const admin = store.admin;
        const token = await clientToken(
          {
            ...target,
            body: form({
              grant_type: 'client_credentials',
              client_id: admin.clientId,
              client_secret: admin.clientSecret,
              audience: `${target.url}/admin/v1`,
            }),
          },
          'list clients',
        );
        target.method = 'GET';
        target.path = `/admin/v1/clients?limit=${ADMIN_LIST_PAGE}`;
        target.headers = { authorization: `Bearer ${token}` };
        target.body = undefined;
        target.adminList = { count: ADMIN_LIST_PAGE };
      }),
    },
    'tessera-sqlite-cold': coldScenario('tessera-sqlite-cold', 'Tessera, SQLite, cold cache', sqliteStore),
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
        startTessera({ id: 'tessera-workers2', store: await sqliteStore(), port, workers: 2 }),
    },
    'tessera-pg': {
      label: 'Tessera, PostgreSQL',
      store: 'postgres',
      start: async (port) => startTessera({ id: 'tessera-pg', store: await postgresStore(), port }),
    },
    'tessera-pg-cold': coldScenario(
      'tessera-pg-cold',
      'Tessera, PostgreSQL, cold cache',
      postgresStore,
      'postgres',
    ),
    'oidc-provider': {
      label: 'node-oidc-provider',
      start: (port) =>
        startPeer({ id: 'oidc-provider', script: 'oidc-provider.js', port, audienceParam: 'resource' }),
    },
    'oauth2-server': {
      label: '@node-oauth/oauth2-server',
      start: (port) => startPeer({ id: 'oauth2-server', script: 'oauth2-server.js', port }),
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

  log(
    `${settings.mode} run: ${settings.scenarios.join(', ')}; servers on Node ${serverNode}, CPUs ${settings.serverCpus}; ` +
      `load generator on CPU ${settings.loadCpus}`,
  );
  /**
   * One load scenario: its server started, warmed up (every answer checked), measured at each concurrency, stopped.
   * `id` names its rows (`<scenario>@<commit>` for a --compare turn); `labelSuffix` is added to its label.
   */
  async function runLoad(id, definition, labelSuffix = '') {
    let started;
    /** When the server was ready and prepared (µs, the monotonic clock its stalls and profile use). */
    let readyAt;
    try {
      const port = await freePort();
      started = await definition.start(port);
      await waitUntilReady(started.server, started.readyUrl, { timeoutMs: 30_000 });
      await started.target.prepare?.();
      readyAt = Number(process.hrtime.bigint() / 1000n);
      const warm = await checkedWarmup(started.target, {
        seconds: settings.warmupSeconds,
        connections: Math.max(...settings.concurrencies),
      });
      log(`${id}: warm-up ${warm.answers} answers, every token verified`);
      for (const connections of settings.concurrencies) {
        if (settings.waitQuietSeconds > 0) {
          const cores = await waitForQuiet(settings.waitQuietSeconds);
          if (cores >= 0.15)
            log(`still ${cores.toFixed(2)} CPU in use by others after ${settings.waitQuietSeconds} s`);
        }
        // The longest event-loop stall over the measurement (Tessera's, the ceiling's): the scrape before starts
        // the window over.
        const loopDelayUrl =
          started.loopDelayUrl ??
          (started.readyUrl.endsWith('/readyz')
            ? started.readyUrl.replace(/\/readyz$/, '/metrics')
            : undefined);
        if (loopDelayUrl) await loopDelayMaxMs(loopDelayUrl);
        const result = await measure(started.target, {
          seconds: settings.seconds,
          connections,
          serverPid: started.server.pid,
          storeComm: definition.store === 'postgres' ? 'postgres' : undefined,
        });
        result.loopDelayMaxMs = loopDelayUrl ? await loopDelayMaxMs(loopDelayUrl) : undefined;
        if (started.server.exitCode !== undefined)
          throw new Error(
            `${id} exited (${started.server.exitCode}) during the measurement:\n${started.server.output}`,
          );
        rows.push({
          scenario: id,
          label: definition.label + labelSuffix,
          workers: definition.workers ?? 1,
          nodeVersion: serverNode,
          ...result,
        });
        log(
          `${id} c${connections}: ${Math.round(result.reqPerSec)} req/s, p50 ${result.p50Ms.toFixed(2)} ms, ` +
            `p99 ${result.p99Ms.toFixed(2)} ms, p99.9 ${result.p999Ms.toFixed(2)} ms, max ${result.maxMs.toFixed(2)} ms` +
            (result.loopDelayMaxMs === undefined
              ? ''
              : `, loop stall max ${result.loopDelayMaxMs.toFixed(1)} ms`) +
            `, errors ${result.errors + result.timeouts}, non-2xx ${result.non2xx}, ` +
            `server CPU ${result.serverCpuCores.toFixed(2)}, RSS ${result.serverRssMb.toFixed(0)} MB`,
        );
      }
      const note = definition.note?.();
      if (note && !notedOnce.has(note)) {
        notedOnce.add(note);
        notes.push(note);
      }
    } catch (error) {
      failures.push({ scenario: id, error: error.stack ?? String(error) });
      log(`${id} FAILED: ${error.message}`);
    } finally {
      if (started) await stopServer(started.server);
    }
    if (settings.profile) profiles.push(...readProfiles(profileDir, id));
    if (settings.stalls && isTessera(id))
      stallReports.push({ scenario: id, stalls: readStalls(profileDir, id, readyAt) });
  }

  const notedOnce = new Set();
  /** The signature alone, measured when the floor scenario runs: {usPerSignature}. */
  let signature;
  try {
    for (const id of settings.scenarios) {
      if (aborting) break;
      const definition = definitions[id];
      if (definition.measure) {
        try {
          clientIds = await definition.measure();
          for (const r of clientIds.results)
            log(
              `${id} ${r.clients}: start ${r.startMs} ms, ${(r.heldBytes / 2 ** 20).toFixed(2)} MB held ` +
                `(${r.heldBytesPerClient.toFixed(2)} B a client)`,
            );
        } catch (error) {
          failures.push({ scenario: id, error: error.stack ?? String(error) });
          log(`${id} FAILED: ${error.message}`);
        }
        continue;
      }
      if (definition.store === 'postgres' && !pgUp) {
        // Reported, not a failure: a machine without PostgreSQL runs the other scenarios (bench/README.md).
        notes.push(`${id} skipped: PostgreSQL does not answer at ${settings.pgAdminUrl}`);
        log(`${id}: skipped, PostgreSQL does not answer`);
        continue;
      }
      await runLoad(id, definition);
      if (compare && isTessera(id)) {
        // The same scenario as of the --compare revision, right after, so that both see the same machine. With
        // --rounds, more pairs, each in the other order from the one before (then, now; now, then; ...), so that
        // what favours the first or the second run of a pair is not counted for one side only. Rows of a round
        // after the first are `<id>#<round>` and `<id>@<commit>#<round>` (compareRows in lib/report.js).
        const round = (n) => (n === 1 ? '' : `#${n}`);
        const asThen = async (n) => {
          tesseraRoot = compare.root;
          try {
            await runLoad(
              `${id}@${compare.commit}${round(n)}`,
              definition,
              ` @ ${compare.commit}${round(n)}`,
            );
          } finally {
            tesseraRoot = ROOT;
          }
        };
        const asNow = (n) => runLoad(`${id}${round(n)}`, definition, round(n) && ` ${round(n)}`);
        await asThen(1);
        for (let n = 2; n <= settings.rounds && !aborting; n++)
          for (const run of n % 2 === 0 ? [asThen, asNow] : [asNow, asThen]) await run(n);
      }
    }
  } finally {
    killAllNow();
    await runCleanups();
  }

  // Every ratio is against the best bare server of the run at that concurrency (the ceiling, or the ceiling
  // writing each answer at once when that was faster), and against the physical limit on one core.
  for (const row of rows) {
    const bare = rows.filter(
      (r) =>
        (r.scenario === 'ceiling' || r.scenario === 'ceiling-at-once') && r.connections === row.connections,
    );
    const best = bare.reduce((a, b) => (b.reqPerSec > a.reqPerSec ? b : a), bare[0]);
    row.ratioToCeiling = best ? row.reqPerSec / best.reqPerSec : undefined;
    row.bestBare = best?.scenario;
    const floorRow = rows.find((r) => r.scenario === 'floor' && r.connections === row.connections);
    if (floorRow && signature) {
      // One core busy with nothing else: the floor's server CPU per answer (from /proc, so a floor held back by
      // the load generator still counts only its own work) plus the signature.
      row.physicalLimit = 1e6 / (floorRow.serverCpuUsPerRequest + signature.usPerSignature);
      row.ratioToLimit = row.reqPerSec / row.physicalLimit;
    }
  }
  // Where Tessera's CPU per token goes beyond the floor's and the signature's (--profile names the functions).
  for (const row of rows.filter((r) => r.scenario === 'tessera-sqlite')) {
    const floorRow = rows.find((r) => r.scenario === 'floor' && r.connections === row.connections);
    if (floorRow && signature)
      notes.push(
        `Tessera (SQLite) at concurrency ${row.connections}: ${(row.ratioToLimit * 100).toFixed(0)} % of the physical limit ` +
          `(${Math.round(row.physicalLimit)} req/s); server CPU per token ${row.serverCpuUsPerRequest.toFixed(0)} µs = ` +
          `the floor's ${floorRow.serverCpuUsPerRequest.toFixed(0)} µs (HTTP, parse, authenticate, serialize) + ` +
          `${signature.usPerSignature.toFixed(0)} µs signature + ` +
          `${(row.serverCpuUsPerRequest - floorRow.serverCpuUsPerRequest - signature.usPerSignature).toFixed(0)} µs ` +
          `Tessera's own (routing, validation, audit, logs, metrics; --profile names them)`,
      );
  }
  for (const row of rows)
    if (row.errors + row.timeouts + row.non2xx > 0)
      notes.push(
        `${row.label} at concurrency ${row.connections}: ${row.errors + row.timeouts} errors and ${row.non2xx} ` +
          `non-2xx answers (${JSON.stringify(row.statusCodes)})`,
      );
  for (const row of rows.filter((r) => r.scenario === 'tessera-sqlite-no-metrics')) {
    const on = rows.find((r) => r.scenario === 'tessera-sqlite' && r.connections === row.connections);
    if (on)
      notes.push(
        `metrics cost at concurrency ${row.connections}: ${Math.round(on.reqPerSec)} req/s with /metrics on (the ` +
          `default), ${Math.round(row.reqPerSec)} with TESSERA_METRICS=false (${((on.reqPerSec / row.reqPerSec - 1) * 100).toFixed(1)} %); ` +
          `CPU per token ${on.serverCpuUsPerRequest?.toFixed(1)} vs ${row.serverCpuUsPerRequest?.toFixed(1)} µs`,
      );
  }
  // Other requests of the same server build beside its token endpoint's rate.
  for (const [scenario, what, per, tokenWhat] of [
    ['tessera-sqlite-exchange', 'token exchange', 'token', 'client credentials'],
    ['tessera-sqlite-introspect', 'introspection', 'answer', 'the token endpoint'],
    ['tessera-sqlite-admin-list', 'admin list', 'answer', 'the token endpoint'],
  ])
    for (const row of rows.filter((r) => r.scenario === scenario)) {
      const tokens = rows.find((r) => r.scenario === 'tessera-sqlite' && r.connections === row.connections);
      if (tokens)
        notes.push(
          `${what} at concurrency ${row.connections}: ${Math.round(row.reqPerSec)} req/s, ${tokenWhat} ` +
            `${Math.round(tokens.reqPerSec)} req/s (${(row.reqPerSec / tokens.reqPerSec).toFixed(2)}×); CPU per ` +
            `${per} ${row.serverCpuUsPerRequest?.toFixed(1)} vs ${tokens.serverCpuUsPerRequest?.toFixed(1)} µs`,
        );
    }
  const noisy = rows.filter((r) => r.otherCpuCores >= 0.15);
  if (noisy.length > 0)
    notes.push(
      `other work on the machine during ${noisy.map((r) => `${r.label} c${r.connections} (${r.otherCpuCores.toFixed(2)} CPU)`).join(', ')}: ` +
        'those figures are disturbed; run again on a quiet machine',
    );
  for (const row of rows)
    if (row.loadgenCpuCores >= 0.9)
      notes.push(
        `${row.label} at concurrency ${row.connections}: the load generator used ${row.loadgenCpuCores.toFixed(2)} of a ` +
          "core; the figure may be its limit rather than the server's",
      );
  if (rows.some((r) => r.storeCpuCores !== undefined))
    notes.push(
      'PostgreSQL runs unpinned on the same machine; its CPU (all postgres processes) is the "PG CPU" column',
    );

  const jsonFile = join(settings.out, `${stamp}.json`);
  const mdFile = join(settings.out, `${stamp}.md`);
  const svgFile = join(settings.out, `${stamp}.svg`);
  const result = {
    startedAt,
    label: settings.label,
    settings,
    environment,
    rows,
    clientIds,
    targets: targets(rows, settings.concurrencies),
    compare: compareRows(rows, compare?.commit),
    failures,
    notes,
    profiles,
    stalls: stallReports,
    jsonFile: relative(ROOT, jsonFile),
    svgFile: relative(ROOT, svgFile),
  };
  writeFileSync(jsonFile, JSON.stringify(result, null, 2) + '\n');
  writeFileSync(mdFile, markdown(result));
  writeFileSync(svgFile, svgChart(result));

  const out = [
    '',
    `Tessera benchmark (${settings.mode}), servers on Node ${serverNode}, ${settings.seconds} s per measurement`,
  ];
  // Without a load scenario (--only client-ids) there is no table and no target to print.
  if (rows.length > 0) out.push('', textTable(rows), '', targetsText(result.targets));
  if (result.compare.length > 0) out.push('', compareText(result.compare, compare.commit));
  if (clientIds) out.push('', clientIdsText(clientIds));
  for (const f of failures) out.push(`FAILED  ${f.scenario}: ${f.error.split('\n')[0]}`);
  for (const note of notes) out.push(`note: ${note}`);
  for (const report of stallReports) out.push('', ...stallsText(report.scenario, report.stalls));
  for (const profile of profiles) {
    out.push(
      '',
      `CPU profile ${profile.scenario} (${profile.file}), ${(profile.busyMs / 1000).toFixed(1)} s busy; top self time:`,
    );
    for (const e of profile.top.slice(0, 15))
      out.push(`  ${e.percent.toFixed(1).padStart(5)} %  ${e.name}  ${e.where}`);
  }
  out.push('', `results: ${relative(process.cwd(), jsonFile)}, .md, .svg`, '');
  process.stdout.write(out.join('\n'));
  clearTimeout(watchdog);
  process.exitCode = failures.length > 0 ? 1 : 0;
}

/**
 * Tessera as of `ref`, for the before/after of one run: its files (git archive) in a temporary directory, the
 * project's node_modules linked in, compiled with the project's TypeScript.
 */
function buildBaseline(ref, cleanups) {
  const commit = execFileSync('git', ['rev-parse', '--short', `${ref}^{commit}`], {
    cwd: ROOT,
    encoding: 'utf8',
  }).trim();
  const root = mkdtempSync(join(tmpdir(), `tessera-baseline-${commit}-`));
  cleanups.push(async () => rmSync(root, { recursive: true, force: true }));
  log(`building the baseline ${commit} in ${root}`);
  const archive = execFileSync('git', ['archive', '--format=tar', commit], { cwd: ROOT, maxBuffer: 1 << 30 });
  execFileSync('tar', ['-x', '-C', root], { input: archive });
  symlinkSync(join(ROOT, 'node_modules'), join(root, 'node_modules'), 'dir');
  execFileSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], {
    cwd: root,
    stdio: 'inherit',
  });
  return { commit, root };
}

/**
 * The longest stalls a Tessera server logged (--stalls) once it was ready (`from`, µs), named from its busiest
 * thread's profile.
 */
function readStalls(profileDir, id, from) {
  const dir = join(profileDir, id);
  if (!existsSync(dir)) return [];
  let busiest;
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'))) {
    const profile = JSON.parse(readFileSync(join(dir, file), 'utf8'));
    const busy = profileTop(profile, 0).busyMs;
    if (busiest === undefined || busy > busiest.busy) busiest = { profile, busy };
  }
  return busiest === undefined || from === undefined
    ? []
    : namedStalls(busiest.profile, join(dir, 'stalls.log'), from);
}

/** The profiles a Tessera run left, summarised; a cluster primary that did nothing but wait is left out. */
function readProfiles(profileDir, id) {
  const dir = join(profileDir, id);
  if (!existsSync(dir)) return [];
  const profiles = readdirSync(dir)
    .filter((f) => f.endsWith('.cpuprofile'))
    .map((file) => ({
      scenario: id,
      file: relative(ROOT, join(dir, file)),
      ...profileTop(JSON.parse(readFileSync(join(dir, file), 'utf8'))),
    }));
  const busiest = Math.max(0, ...profiles.map((p) => p.busyMs));
  return profiles.filter((p) => p.busyMs >= busiest / 5);
}

main().catch((error) => {
  killAllNow();
  console.error(`bench: ${process.env.BENCH_DEBUG ? (error.stack ?? error) : (error.message ?? error)}`);
  process.exit(2);
});
