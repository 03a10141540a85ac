/* global process */
// The command line of `npm run bench` (bench/run.js): its scenarios, its usage text and its options, parsed and
// checked into the run's settings.
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

const SCENARIOS = [
  'ceiling',
  'ceiling-at-once',
  'ceiling-audited',
  'floor',
  'tessera-sqlite',
  'tessera-sqlite-baseline',
  'tessera-sqlite-no-metrics',
  'tessera-sqlite-scoped',
  'tessera-sqlite-pkjwt',
  'tessera-sqlite-pkjwt-redis',
  'tessera-sqlite-dpop',
  'tessera-sqlite-dpop-redis',
  'tessera-sqlite-federated',
  'tessera-sqlite-tls',
  'tessera-sqlite-mtls',
  'tessera-sqlite-mtls-header',
  'tessera-sqlite-otel-ratio',
  'tessera-sqlite-otel-always',
  'tessera-sqlite-introspect',
  'tessera-sqlite-exchange',
  'tessera-sqlite-admin-list',
  'tessera-sqlite-admin-list-dpop',
  'tessera-sqlite-cold',
  'tessera-sqlite-cached',
  'tessera-workers2',
  'tessera-pg',
  'tessera-pg-dpop',
  'tessera-pg-cold',
  'oidc-provider',
  'oidc-provider-pkjwt',
  'oidc-provider-dpop',
  'oauth2-server',
  'client-ids',
];

const USAGE = `npm run bench [-- options]

  --quick                 short run (1 s warm-up and 1 s per measurement; under a minute in all)
  --seconds N             seconds per measurement (default 12; quick 1)
  --warmup N              seconds of checked warm-up per server (default 5; quick 1)
  --concurrency 10,100    connections of each measurement
  --cold-clients N        clients in the store for the cold-cache runs (default 100000)
  --cold-cache-max N      TESSERA_CACHE_MAX of the cold-cache runs (default 1000: every request misses)
  --id-clients 100000,1000000
                          numbers of clients of the client-ids measurement: the memory and load time of every
                          client id held in memory (no load, no server; runs last, pinned like a server;
                          alone: --only client-ids, about 40 s)
  --only a,b              run only these scenarios: ${SCENARIOS.join(', ')}
  --skip a,b              run all but these
  --node PATH             run every server under this Node binary (default: the one running npm)
  --env NAME=VALUE        extra environment for every Tessera server (repeatable)
  --profile               run every server with --cpu-prof and print the top self-time entries
  --stalls                name every Tessera server's longest event-loop stalls: each callback that ran 5 ms or
                          more (bench/servers/stalls.js) and the code its CPU profile sampled in it; async_hooks
                          slow the servers down, so the figures of such a run are not the benchmark's
  --label TEXT            a label for the results (shown in the report, appended to the file name)
  --baseline REF          also run Tessera as of this git commit (built into a temporary directory) on SQLite:
                          the tessera-sqlite-baseline scenario, a before/after in one run
  --compare REF           run every Tessera scenario of the run twice, as of now and as of this git commit (built
                          like --baseline), one after the other, and print a table of each one's ratio
  --rounds N              N rounds (default 1; on a noisy machine, 3 or more). With --compare: N pairs of runs of
                          each Tessera scenario, every other pair in the other order; the table gives the median
                          ratio and the range. Without: the whole list of scenarios N times, every other round in
                          the reverse order; every table and target is of the medians of the rounds
  --pg URL                PostgreSQL admin URL (default postgres://postgres@127.0.0.1:5432/postgres)
  --redis URL             Redis of the scenarios that use one (default redis://127.0.0.1:6379)
  --server-cpus 0         CPUs of a single-process server
  --load-cpus 1           CPUs of the load generator (this process)
  --workers-cpus 0,1      CPUs of Tessera --workers 2
  --out DIR               where results go (default bench/results)
  --wait-quiet N          before each measurement, wait up to N s for the machine to be idle (default 0)
`;

export function options(root) {
  const { values } = parseArgs({
    options: {
      quick: { type: 'boolean', default: false },
      seconds: { type: 'string' },
      warmup: { type: 'string' },
      concurrency: { type: 'string', default: '10,100' },
      'cold-clients': { type: 'string', default: '100000' },
      'cold-cache-max': { type: 'string', default: '1000' },
      'id-clients': { type: 'string', default: '100000,1000000' },
      only: { type: 'string' },
      skip: { type: 'string' },
      node: { type: 'string' },
      env: { type: 'string', multiple: true, default: [] },
      profile: { type: 'boolean', default: false },
      stalls: { type: 'boolean', default: false },
      label: { type: 'string' },
      baseline: { type: 'string' },
      compare: { type: 'string' },
      rounds: { type: 'string', default: '1' },
      pg: { type: 'string', default: 'postgres://postgres@127.0.0.1:5432/postgres' },
      redis: { type: 'string', default: 'redis://127.0.0.1:6379' },
      'server-cpus': { type: 'string', default: '0' },
      'load-cpus': { type: 'string', default: '1' },
      'workers-cpus': { type: 'string', default: '0,1' },
      out: { type: 'string', default: join(root, 'bench/results') },
      'wait-quiet': { type: 'string', default: '0' },
      help: { type: 'boolean', default: false },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(USAGE);
    process.exit(0);
  }
  const integer = (name, value, min) => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be a whole number ≥ ${min}`);
    return n;
  };
  const list = (value) =>
    value
      ? value
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean)
      : undefined;
  const only = list(values.only);
  const skip = list(values.skip) ?? [];
  for (const id of [...(only ?? []), ...skip])
    if (!SCENARIOS.includes(id)) throw new Error(`unknown scenario ${id}; known: ${SCENARIOS.join(', ')}`);
  const extraEnv = {};
  for (const pair of values.env) {
    const eq = pair.indexOf('=');
    if (eq < 1) throw new Error(`--env wants NAME=VALUE, got ${pair}`);
    extraEnv[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return {
    mode: values.quick ? 'quick' : 'full',
    seconds: integer('seconds', values.seconds ?? (values.quick ? 1 : 12), 1),
    warmupSeconds: integer('warmup', values.warmup ?? (values.quick ? 1 : 5), 1),
    concurrencies: list(values.concurrency).map((c) => integer('concurrency', c, 1)),
    coldClients: integer('cold-clients', values['cold-clients'], 1000),
    coldCacheMax: integer('cold-cache-max', values['cold-cache-max'], 100),
    idClients: list(values['id-clients']).map((c) => integer('id-clients', c, 1)),
    scenarios: SCENARIOS.filter((id) => (!only || only.includes(id)) && !skip.includes(id)),
    nodePath: values.node ? resolve(values.node) : process.execPath,
    extraEnv,
    profile: values.profile,
    stalls: values.stalls,
    label: values.label,
    baseline: values.baseline,
    compare: values.compare,
    rounds: integer('rounds', values.rounds, 1),
    pgAdminUrl: values.pg,
    redisUrl: values.redis,
    serverCpus: values['server-cpus'],
    loadCpus: values['load-cpus'],
    workersCpus: values['workers-cpus'],
    out: resolve(values.out),
    waitQuietSeconds: integer('wait-quiet', values['wait-quiet'], 0),
  };
}
