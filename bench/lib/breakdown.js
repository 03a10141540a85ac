/**
 * `--profile`: where a server's CPU per answer goes, measurement by measurement. The samples of every thread's CPU
 * profile (the request thread and, for Tessera on SQLite, the store's maintenance thread) taken within the
 * measurement are put in categories, and each category's share of them is scaled to the server's CPU per answer
 * (from /proc: the main threads' samples to their CPU, the other threads' to theirs).
 *
 * A sample's category: by its innermost frame for the work every server does alike (the signature, garbage
 * collection, Node's HTTP and streams), else by the innermost frame of Tessera's own code (dist/) in its stack, else
 * by the package or the server file it runs in. So `digest` under `proves` (client-auth/secret.js) is
 * authentication, `parseParams` under `parseForm` is form parsing, and `writev` is Node's HTTP whoever wrote.
 */

/** The categories in the order they are printed; what falls in each. */
const CATEGORIES = [
  ['signature', 'the signature itself (node:crypto sign)'],
  ['node http', "Node's HTTP server, sockets and streams, the event loop and promises"],
  ['gc', 'garbage collection'],
  ['native', 'V8 and Node outside JavaScript ((program), (native))'],
  ['lane', "Tessera's HTTP: the token lane, its batches, routes, answers"],
  ['parse', 'form parsing (Tessera)'],
  ['authenticate', 'authentication: client lookup, secret digest, attempt limits (Tessera)'],
  ['claims', 'claims, grant checks, signing input (Tessera)'],
  ['audit', 'audit trail on the request thread: spool lines, writes, read-back (Tessera)'],
  ['store thread', "the store's maintenance thread: audit inserts, checkpoints (Tessera on SQLite)"],
  ['unprofiled', "threads without a profile: V8's, libuv's, and with --profile the profiler's"],
  ['metrics', 'metrics (Tessera, prom-client)'],
  ['log', 'logging (pino)'],
  ['framework', 'Fastify and other packages'],
  ['server', "the server's own code (bench/servers) or other Tessera code"],
];

/** Node's own HTTP work: what the floor does too. */
const NODE_HTTP =
  /^node:(_http_|net$|events$|internal\/(streams|stream_base_commons|http|timers|process\/task_queues|async_hooks|url|perf))/;
const NODE_HTTP_NATIVE = new Set([
  'writev',
  'writeBuffer',
  'writeUtf8String',
  'writeLatin1String',
  'read',
  'runMicrotasks',
]);

/** dist/ paths, the first that matches. */
const DIST = [
  [/^http\/body\.js$/, 'parse'],
  [/^(http\/|per-turn\.js$)/, 'lane'],
  [
    /^(domain\/client-auth\/|domain\/secrets\.js$|limits\/|read-model\/(directory|client-cache|client-ids|known-client|secret-usage)\.js$|lru\.js$|clock\.js$)/,
    'authenticate',
  ],
  [/^(domain\/|keys\/|read-model\/|runtime\/parts\.js$)/, 'claims'],
  [/^(audit\/|store\/(audit-events|sqlite-maintenance|kysely\/audit)\.js$)/, 'audit'],
  [/^metrics\//, 'metrics'],
  [/^logger\.js$/, 'log'],
];

/** dist/ files of helpers that every part of Tessera calls. */
const SHARED = /^domain\/validate\.js$/;

/** The category of every node of one profile (by id), worked out once per node. */
function categorizer(profile, thread) {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const known = new Map();
  const ofStack = (id) => {
    let packageName;
    let server = false;
    for (let at = id; at !== undefined; at = parent.get(at)) {
      const url = byId.get(at).callFrame.url;
      const inPackage = /\/node_modules\/((@[^/]+\/)?[^/]+)\//.exec(url);
      if (inPackage) {
        packageName ??= inPackage[1];
        continue;
      }
      const dist = /\/dist\/(.*)$/.exec(url);
      // Helpers used everywhere (ownString, the id checks) count where they are called from.
      if (dist && !SHARED.test(dist[1])) return DIST.find(([path]) => path.test(dist[1]))?.[1] ?? 'server';
      if (/\/bench\/servers\//.test(url)) server = true;
    }
    if (packageName === 'pino' || packageName?.startsWith('pino-')) return 'log';
    if (packageName === 'prom-client') return 'metrics';
    if (packageName !== undefined) return 'framework';
    return server ? 'server' : 'node http';
  };
  return (id) => {
    let category = known.get(id);
    if (category !== undefined) return category;
    const frame = byId.get(id).callFrame;
    const name = frame.functionName;
    // postMessage to the maintenance thread: on one core, where the request thread waits while the thread it woke
    // writes (its own cost is ~0.3 µs an audit event, both sides, in a micro-benchmark), so not its CPU.
    if (name === '(idle)' || (name === 'postMessage' && thread === 'main')) category = 'idle';
    else if (thread !== 'main') category = 'store thread';
    else if (name === '(garbage collector)') category = 'gc';
    else if (name === '(program)' || (name === '(native)' && frame.url === '')) category = 'native';
    else if (name === 'signOneShot' || (name === 'sign' && frame.url === 'node:internal/crypto/sig'))
      category = 'signature';
    else if (NODE_HTTP.test(frame.url)) category = 'node http';
    // A write or a read: the socket's, unless the audit trail's spool file's.
    else if (frame.url === '' && NODE_HTTP_NATIVE.has(name))
      category = ofStack(id) === 'audit' ? 'audit' : 'node http';
    else category = ofStack(id);
    known.set(id, category);
    return category;
  };
}

/**
 * The most time one sample stands for: a quarter more than the profile's usual interval. A thread kept off the CPU
 * (by another process, or on one core by another thread of its own) is sampled late, when it runs again, where it
 * resumed; capped, such a sample counts for one interval, as the others do.
 */
function sampleCap(deltas) {
  const sorted = deltas.filter((d) => d > 0).sort((a, b) => a - b);
  return sorted.length === 0 ? Infinity : sorted[Math.floor(sorted.length / 2)] * 1.25;
}

/** Each busy sample of a profile in the window: its category and the time it stands for, [from, to] (µs). */
function busySamples(profile, thread, fromUs, toUs) {
  const category = categorizer(profile, thread);
  const cap = sampleCap(profile.timeDeltas);
  const samples = [];
  let t = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i] ?? 0;
    if (t < fromUs || t > toUs) continue;
    const c = category(profile.samples[i]);
    if (c !== 'idle')
      samples.push({ category: c, from: t - Math.min(profile.timeDeltas[i] ?? 0, cap), to: t });
  }
  return samples;
}

/**
 * The µs per answer of each category over one measurement: `profiles` are every thread's profile of the server,
 * each `{ profile, thread: 'main' | 'worker' }`; `fromUs` and `toUs` bound the measurement on the profiles' clock;
 * `cpu` is the server's CPU per answer in it, `total` and of it its main threads' (`main`), from /proc, and its
 * `answers`. The main threads' samples are scaled to their CPU; the other threads' with a profile count as sampled;
 * the rest of the other threads' CPU is the threads' without a profile. Undefined when no sample fell in the window.
 *
 * The bench pins a server to one core, where its threads take turns: while the maintenance thread writes a batch,
 * the request thread waits where it woke it (`postMessage`), and its sample comes when it runs again. So the time a
 * request thread's sample stands for is less the time of other threads' busy samples in the same span.
 */
export function cpuBreakdown(profiles, fromUs, toUs, cpu) {
  const main = new Map();
  const others = new Map();
  const add = (into, category, us) => into.set(category, (into.get(category) ?? 0) + us);
  const busyOthers = profiles
    .filter((p) => p.thread !== 'main')
    .flatMap((p) => busySamples(p.profile, p.thread, fromUs, toUs))
    .sort((a, b) => a.from - b.from);
  for (const s of busyOthers) add(others, s.category, s.to - s.from);
  for (const { profile, thread } of profiles.filter((p) => p.thread === 'main')) {
    let first = 0;
    for (const s of busySamples(profile, thread, fromUs, toUs)) {
      while (first < busyOthers.length && busyOthers[first].to <= s.from) first++;
      let overlap = 0;
      for (let i = first; i < busyOthers.length && busyOthers[i].from < s.to; i++)
        overlap += Math.max(0, Math.min(s.to, busyOthers[i].to) - Math.max(s.from, busyOthers[i].from));
      add(main, s.category, Math.max(0, s.to - s.from - overlap));
    }
  }
  const sum = (map) => [...map.values()].reduce((a, b) => a + b, 0);
  const mainBusy = sum(main);
  const othersBusy = sum(others);
  if (mainBusy === 0 || !(cpu.answers > 0) || !Number.isFinite(cpu.total) || !Number.isFinite(cpu.main))
    return undefined;
  // The other threads with a profile (the maintenance thread) are sampled while they run: their samples' time is
  // their CPU (at most all of the other threads'). What is left of the other threads' CPU is threads' without one.
  const rest = Math.max(0, cpu.total - cpu.main);
  const scale = othersBusy / cpu.answers > rest ? rest / othersBusy : 1 / cpu.answers;
  const unprofiled = rest - othersBusy * scale;
  const us = (category) =>
    ((main.get(category) ?? 0) / mainBusy) * cpu.main +
    (others.get(category) ?? 0) * scale +
    (category === 'unprofiled' ? unprofiled : 0);
  return Object.fromEntries(CATEGORIES.map(([c]) => [c, us(c)]).filter(([, value]) => value > 0));
}

/** The measurements with a breakdown, side by side: one column each, a line per category (µs per answer). */
export function breakdownText(rows) {
  const shown = rows.filter((r) => r.cpuBreakdown !== undefined);
  if (shown.length === 0) return [];
  const heads = shown.map((r) => `${r.label} c${r.connections}`);
  const width = Math.max(...CATEGORIES.map(([, what]) => what.length), 'total (CPU µs per answer)'.length);
  const line = (name, cells) =>
    `  ${name.padEnd(width)}  ${cells.map((c, i) => c.padStart(heads[i].length)).join('  ')}`;
  const lines = [
    "Where the CPU per answer goes (--profile: every thread's samples within each measurement, scaled to its CPU per answer), µs:",
    line('', heads),
  ];
  for (const [category, what] of CATEGORIES) {
    if (!shown.some((r) => r.cpuBreakdown[category] !== undefined)) continue;
    lines.push(
      line(
        what,
        shown.map((r) => (r.cpuBreakdown[category] ?? 0).toFixed(1)),
      ),
    );
  }
  lines.push(
    line(
      'total (CPU µs per answer)',
      shown.map((r) => r.serverCpuUsPerRequest.toFixed(1)),
    ),
  );
  return lines;
}
