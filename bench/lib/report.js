// What a run produced, for people: a table (stdout and Markdown), the targets of issue 5, and an SVG chart.
import { breakdownText } from './breakdown.js';
import { limitsMarkdown } from './limits.js';

const fixed = (value, digits = 0) =>
  value === undefined || value === null || Number.isNaN(value) ? '–' : value.toFixed(digits);
const thousands = (value) =>
  value === undefined || Number.isNaN(value) ? '–' : Math.round(value).toLocaleString('en-US');
const percent = (value, digits = 0) =>
  value === undefined || Number.isNaN(value) ? '–' : `${(value * 100).toFixed(digits)} %`;

const COLUMNS = [
  ['server', (r) => r.label],
  ['conc.', (r) => String(r.connections)],
  ['req/s', (r) => thousands(r.reqPerSec)],
  ['vs ceiling', (r) => percent(r.ratioToCeiling)],
  ['vs limit', (r) => percent(r.ratioToLimit)],
  ['p50 ms', (r) => fixed(r.p50Ms, 2)],
  ['p99 ms', (r) => fixed(r.p99Ms, 2)],
  ['p99.9 ms', (r) => fixed(r.p999Ms, 2)],
  ['max ms', (r) => fixed(r.maxMs, 1)],
  ['loop max ms', (r) => fixed(r.loopDelayMaxMs, 1)],
  ['errors', (r) => String(r.errors + r.timeouts)],
  ['non-2xx', (r) => String(r.non2xx)],
  ['server CPU', (r) => fixed(r.serverCpuCores, 2)],
  ['CPU µs/req', (r) => fixed(r.serverCpuUsPerRequest, 0)],
  ['RSS MB', (r) => fixed(r.serverRssMb, 0)],
  ['loadgen CPU', (r) => fixed(r.loadgenCpuCores, 2)],
  ['loadgen loop max ms', (r) => fixed(r.loadgenLoopMaxMs, 1)],
  ['store CPU', (r) => (r.storeCpuCores === undefined ? '' : fixed(r.storeCpuCores, 2))],
  ['other CPU', (r) => fixed(r.otherCpuCores, 2)],
  ['node', (r) => r.nodeVersion],
];

/** The median of numbers (of two middle ones, their mean). */
export const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
};

/**
 * --rounds without --compare: a scenario's rows of every round at one concurrency (`<scenario>`, `<scenario>#2`,
 * ...) as one row of `<scenario>`: every figure the median of the rounds' (req/s, latencies, CPU, RSS, ...), the rest
 * the first round's (its profile's breakdown among them), and `rounds` the rounds' req/s in the order they ran.
 * --compare's rows (`@`) and a scenario of one round are left as they are.
 */
export function medianRows(rows) {
  const base = (scenario) => scenario.replace(/#\d+$/, '');
  const groups = new Map();
  for (const row of rows) {
    const key = row.scenario.includes('@') ? row : `${base(row.scenario)}\0${row.connections}`;
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(row);
  }
  return [...groups.values()].map((group) => {
    if (group.length === 1) return group[0];
    const first = group.find((r) => !/#\d+$/.test(r.scenario)) ?? group[0];
    const folded = {
      ...first,
      scenario: base(first.scenario),
      label: first.label.replace(/ #\d+$/, ''),
      rounds: group.map((r) => r.reqPerSec),
    };
    for (const [key, value] of Object.entries(first))
      if (typeof value === 'number' && group.every((r) => typeof r[key] === 'number'))
        folded[key] = median(group.map((r) => r[key]));
    return folded;
  });
}

/**
 * --compare: each Tessera scenario beside its run as of the compared revision (rows `<scenario>@<commit>`), one
 * line per scenario and concurrency: req/s, p99 and CPU per answer, now and then, and the ratio. With --rounds,
 * the pairs of every round (rows `<scenario>#<n>` and `<scenario>@<commit>#<n>`): each figure is the median of
 * the rounds, the ratio the median of the rounds' ratios, with their range. [] without --compare.
 */
export function compareRows(rows, commit) {
  if (!commit) return [];
  const out = [];
  const row = (scenario, connections) =>
    rows.find((r) => r.scenario === scenario && r.connections === connections);
  for (const first of rows) {
    if (first.scenario.includes('#') || !row(`${first.scenario}@${commit}`, first.connections)) continue;
    const pairs = [];
    for (let n = 1; ; n++) {
      const round = n === 1 ? '' : `#${n}`;
      const now = row(`${first.scenario}${round}`, first.connections);
      const then = row(`${first.scenario}@${commit}${round}`, first.connections);
      if (!now || !then) break;
      pairs.push({ now, then, ratio: now.reqPerSec / then.reqPerSec });
    }
    const of = (pick) => median(pairs.map(pick));
    const ratios = pairs.map((p) => p.ratio);
    out.push({
      scenario: first.scenario,
      connections: first.connections,
      rounds: pairs.length,
      reqPerSec: of((p) => p.now.reqPerSec),
      thenReqPerSec: of((p) => p.then.reqPerSec),
      ratio: median(ratios),
      minRatio: Math.min(...ratios),
      maxRatio: Math.max(...ratios),
      p99Ms: of((p) => p.now.p99Ms),
      thenP99Ms: of((p) => p.then.p99Ms),
      cpuUs: of((p) => p.now.serverCpuUsPerRequest),
      thenCpuUs: of((p) => p.then.serverCpuUsPerRequest),
    });
  }
  return out;
}

/** The --compare table for the terminal. */
export function compareText(list, commit) {
  const rounds = Math.max(...list.map((r) => r.rounds));
  const columns = [
    ['scenario', (r) => r.scenario],
    ['conc.', (r) => String(r.connections)],
    ['req/s now', (r) => thousands(r.reqPerSec)],
    [`req/s ${commit}`, (r) => thousands(r.thenReqPerSec)],
    ['ratio', (r) => `${fixed(r.ratio, 3)}×`],
    ...(rounds > 1
      ? [['ratios', (r) => `${fixed(r.minRatio, 2)}–${fixed(r.maxRatio, 2)} (${r.rounds})`]]
      : []),
    ['p99 ms now', (r) => fixed(r.p99Ms, 2)],
    [`p99 ms ${commit}`, (r) => fixed(r.thenP99Ms, 2)],
    ['CPU µs/req now', (r) => fixed(r.cpuUs, 0)],
    [`CPU µs/req ${commit}`, (r) => fixed(r.thenCpuUs, 0)],
  ];
  const cells = list.map((row) => columns.map(([, cell]) => cell(row)));
  const widths = columns.map(([title], i) => Math.max(title.length, ...cells.map((c) => c[i].length)));
  const line = (values) =>
    values.map((v, i) => (i === 0 ? v.padEnd(widths[i]) : v.padStart(widths[i]))).join('  ');
  return [
    rounds > 1
      ? `Against ${commit} (--compare), each scenario run as of both in ${rounds} rounds, every other one in the ` +
        'other order; medians of the rounds, ratio = now / then:'
      : `Against ${commit} (--compare), each scenario run as of both, one after the other; ratio = now / then:`,
    line(columns.map(([title]) => title)),
    line(widths.map((w) => '-'.repeat(w))),
    ...cells.map(line),
  ].join('\n');
}

/** Plain-text table for the terminal. */
export function textTable(rows) {
  const cells = rows.map((row) => COLUMNS.map(([, cell]) => cell(row)));
  const widths = COLUMNS.map(([title], i) => Math.max(title.length, ...cells.map((c) => c[i].length)));
  const line = (values) =>
    values.map((v, i) => (i === 0 ? v.padEnd(widths[i]) : v.padStart(widths[i]))).join('  ');
  return [
    line(COLUMNS.map(([title]) => title)),
    line(widths.map((w) => '-'.repeat(w))),
    ...cells.map(line),
  ].join('\n');
}

function markdownTable(rows) {
  const header = `| ${COLUMNS.map(([title]) => title).join(' | ')} |`;
  const rule = `|${COLUMNS.map((_, i) => (i === 0 ? ' --- ' : ' ---: ')).join('|')}|`;
  const body = rows.map((row) => `| ${COLUMNS.map(([, cell]) => cell(row)).join(' | ')} |`);
  return [header, rule, ...body].join('\n');
}

const find = (rows, scenario, connections) =>
  rows.find((r) => r.scenario === scenario && r.connections === connections);

/**
 * The targets of issues 5 and 25, each as {target, measured, pass}; those that cannot be judged from the
 * scenarios and concurrencies run are left out.
 */
export function targets(rows, concurrencies) {
  const out = [];
  const check = (target, measured, pass) => out.push({ target, measured, pass });
  for (const c of concurrencies) {
    const t = find(rows, 'tessera-sqlite', c);
    const ceiling = find(rows, 'ceiling', c);
    // Issue 25: 95 % at 100 connections and more; issue 5's 90 % below that.
    const share = c >= 100 ? 0.95 : 0.9;
    if (t && ceiling)
      check(
        `Tessera (SQLite) ≥ ${share * 100} % of the best bare server's req/s at concurrency ${c}`,
        percent(t.ratioToCeiling, 1),
        t.ratioToCeiling >= share,
      );
  }
  const t100limit = find(rows, 'tessera-sqlite', 100);
  if (t100limit?.ratioToLimit !== undefined)
    check(
      `Tessera (SQLite) ≥ 80 % of the physical limit on one core at concurrency 100 (the Bearer path's limit)`,
      `${percent(t100limit.ratioToLimit, 1)} of ${thousands(t100limit.physicalLimit)} req/s`,
      t100limit.ratioToLimit >= 0.8,
    );
  const loopMax = rows.filter((r) => r.scenario === 'tessera-sqlite' && r.loopDelayMaxMs !== undefined);
  if (loopMax.length > 0) {
    const worst = loopMax.reduce((a, b) => (b.loopDelayMaxMs > a.loopDelayMaxMs ? b : a));
    // Bare Node's own on this machine, under the same loads: what the machine (other threads and processes on
    // the core, the hypervisor) stalls any process for.
    const bare = rows.filter((r) => r.scenario === 'ceiling' && r.loopDelayMaxMs !== undefined);
    const bareWorst = bare.length === 0 ? undefined : Math.max(...bare.map((r) => r.loopDelayMaxMs));
    check(
      `Tessera (SQLite) longest event-loop stall under load ≤ 10 ms`,
      `${fixed(worst.loopDelayMaxMs, 1)} ms (concurrency ${worst.connections})` +
        (bareWorst === undefined ? '' : `; the ceiling's, bare Node: ${fixed(bareWorst, 1)} ms`),
      worst.loopDelayMaxMs <= 10,
    );
  }
  // The p99 targets: at concurrency 100 within 1.5× the best bare server's (issue 5), at 1,000 within 2× (issue 25);
  // runs without that concurrency (--concurrency) do not judge it.
  for (const [c, factor] of [
    [100, 1.5],
    [1000, 2],
  ]) {
    const t = find(rows, 'tessera-sqlite', c);
    const bare = find(rows, t?.bestBare ?? 'ceiling', c);
    if (t && bare)
      check(
        `Tessera (SQLite) p99 at concurrency ${c} ≤ ${factor}× the ceiling's`,
        `${fixed(t.p99Ms, 2)} ms vs ${fixed(bare.p99Ms, 2)} ms (${fixed(t.p99Ms / bare.p99Ms, 2)}×)`,
        t.p99Ms <= factor * bare.p99Ms,
      );
  }
  // PostgreSQL warm within 10 % of SQLite (issue 25).
  for (const c of concurrencies) {
    const sqlite = find(rows, 'tessera-sqlite', c);
    const pg = find(rows, 'tessera-pg', c);
    if (sqlite && pg)
      check(
        `Tessera on PostgreSQL (warm) ≥ 90 % of SQLite's req/s at concurrency ${c}`,
        percent(pg.reqPerSec / sqlite.reqPerSec, 1),
        pg.reqPerSec >= 0.9 * sqlite.reqPerSec,
      );
  }
  // Verifying costs more than signing, but introspection answers within 2× of the token endpoint's rate.
  for (const c of concurrencies) {
    const t = find(rows, 'tessera-sqlite', c);
    const introspection = find(rows, 'tessera-sqlite-introspect', c);
    if (t && introspection)
      check(
        `Introspection (SQLite) ≥ 50 % of the token endpoint's req/s at concurrency ${c}`,
        percent(introspection.reqPerSec / t.reqPerSec, 1),
        introspection.reqPerSec >= 0.5 * t.reqPerSec,
      );
  }
  for (const c of concurrencies) {
    const t = find(rows, 'tessera-sqlite', c);
    const oidc = find(rows, 'oidc-provider', c);
    if (t && oidc)
      check(
        `Tessera (SQLite) ≥ 2.5× node-oidc-provider's req/s at concurrency ${c}`,
        `${fixed(t.reqPerSec / oidc.reqPerSec, 2)}×`,
        t.reqPerSec >= 2.5 * oidc.reqPerSec,
      );
  }
  for (const c of concurrencies) {
    const warm = find(rows, 'tessera-pg', c);
    const cold = find(rows, 'tessera-pg-cold', c);
    if (warm && cold)
      check(
        `Cold cache on PostgreSQL ≥ 50 % of the warm figure at concurrency ${c}`,
        percent(cold.reqPerSec / warm.reqPerSec, 1),
        cold.reqPerSec >= 0.5 * warm.reqPerSec,
      );
  }
  /** The RSS target over `of` (rows), if any ran: the largest RSS at the end of a run under 200 MB. */
  const rssUnder200 = (target, of) => {
    if (of.length === 0) return;
    const worst = Math.max(...of.map((r) => r.serverRssMb));
    check(target, `${fixed(worst, 0)} MB at most`, worst < 200);
  };
  rssUnder200(
    'Tessera server RSS < 200 MB with every client of tessera-sqlite-cached in its cache (--cold-clients, 100 000 by default)',
    rows.filter((r) => r.scenario === 'tessera-sqlite-cached'),
  );
  rssUnder200(
    'Tessera server RSS < 200 MB at the end of every single-process run',
    rows.filter((r) => r.scenario.startsWith('tessera-') && r.workers === 1),
  );
  return out;
}

function targetsMarkdown(list) {
  if (list.length === 0) return '_No target could be judged from the scenarios run._';
  return [
    '| target | measured | |',
    '| --- | --- | --- |',
    ...list.map((t) => `| ${t.target} | ${t.measured} | ${t.pass ? 'met' : '**not met**'} |`),
  ].join('\n');
}

export function targetsText(list) {
  return list.map((t) => `${t.pass ? 'met    ' : 'NOT MET'}  ${t.target}: ${t.measured}`).join('\n');
}

const ID_COLUMNS = [
  ['clients', (r) => thousands(r.clients)],
  ['start ms', (r) => thousands(r.startMs)],
  ['held MB', (r) => fixed(r.heldBytes / 2 ** 20, 2)],
  ['B/client', (r) => fixed(r.heldBytesPerClient, 2)],
  ['MB per million', (r) => fixed(r.heldMbPerMillion, 2)],
  ['in the set', (r) => `${thousands(r.found)} of ${thousands(r.clients)}`],
  ['false positives', (r) => `${r.falsePositives} of ${thousands(r.othersChecked)}`],
  ['ns a test', (r) => fixed(r.lookupNs, 0)],
];

const ID_NOTE =
  'Every client id in memory (src/read-model/client-ids.ts), measured by bench/client-ids.js: a SQLite store filled ' +
  "by the bulk insert (ids made by generateClientId), then the start of the server's Directory on it (feed " +
  'position, audiences, a count, the ids 10 000 a page); held = heap and array buffers after full collections, ' +
  'before and after that start (budget: 16 MB a million); a test hashes an id and searches the set.';

/** The client-ids measurement as text, for the terminal. */
export function clientIdsText(clientIds) {
  const cells = clientIds.results.map((r) => ID_COLUMNS.map(([, cell]) => cell(r)));
  const widths = ID_COLUMNS.map(([title], i) => Math.max(title.length, ...cells.map((c) => c[i].length)));
  const line = (values) => values.map((v, i) => v.padStart(widths[i])).join('  ');
  return [
    `Client ids in memory (Node ${clientIds.node})`,
    line(ID_COLUMNS.map(([title]) => title)),
    line(widths.map((w) => '-'.repeat(w))),
    ...cells.map(line),
    ID_NOTE,
  ].join('\n');
}

function clientIdsMarkdown(clientIds) {
  return [
    `## Client ids in memory (Node ${clientIds.node})`,
    '',
    `| ${ID_COLUMNS.map(([title]) => title).join(' | ')} |`,
    `|${ID_COLUMNS.map(() => ' ---: ').join('|')}|`,
    ...clientIds.results.map((r) => `| ${ID_COLUMNS.map(([, cell]) => cell(r)).join(' | ')} |`),
    '',
    ID_NOTE,
  ].join('\n');
}

/** The Markdown report: environment, table, targets, failures, notes. */
export function markdown(result) {
  const { environment: env, settings } = result;
  const lines = [
    `# Tessera benchmark, ${result.startedAt}${result.label ? ` (${result.label})` : ''}`,
    '',
    `Mode **${settings.mode}**: ${settings.warmupSeconds} s checked warm-up per server, ` +
      `${settings.seconds} s per measurement, concurrency ${settings.concurrencies.join(' and ')}; ` +
      `cold-cache runs over ${thousands(settings.coldClients)} clients.`,
    '',
    `- Machine: ${env.cpuModel}, ${env.cpus} CPUs, ${env.memoryGb} GB, Linux ${env.kernel}; ` +
      `${fixed(env.backgroundCpuCoresAtStart, 2)} CPU busy with other work just before the run`,
    `- Servers pinned to CPU ${settings.serverCpus}, load generator (autocannon ${env.autocannon}) to CPU ${settings.loadCpus}; ` +
      `\`--workers 2\` on CPUs ${settings.workersCpus}, shared with the load generator`,
    `- Node: servers ${env.serverNode} (\`${env.serverNodePath}\`), harness ${env.harnessNode}`,
    `- PostgreSQL: ${env.postgres ?? 'not used'}${env.postgres ? ' (not pinned: its CPU is the "store CPU" column)' : ''}`,
    `- Peers: oidc-provider ${env.versions['oidc-provider']}, @node-oauth/oauth2-server ${env.versions['@node-oauth/oauth2-server']}; ` +
      `Tessera ${env.tesseraCommit} (fastify ${env.versions.fastify}, jose ${env.versions.jose})`,
    '',
    markdownTable(result.rows),
    ...(result.compare?.length > 0
      ? ['', '```text', compareText(result.compare, result.environment.compareCommit), '```']
      : []),
    '',
    'req/s counts 2xx answers over the wall time of the measurement; p50/p99 are of 2xx answers. Server CPU is ' +
      'user+system time of the server process and its children over the same wall time (1.00 = one core busy); ' +
      'RSS is the sum over the process tree at the end. "vs ceiling" compares with the ceiling at the same concurrency. ' +
      'Loadgen CPU is autocannon (this process); other CPU is every other program that ran meanwhile (kernel ' +
      'threads, which carry the loopback networking of the run itself, left out): well above 0, the figures are disturbed.',
    ...(result.settings.profile && result.rows.some((r) => r.cpuBreakdown !== undefined)
      ? ['', '```text', ...breakdownText(result.rows), '```']
      : []),
    '',
    '## Targets (issue 5)',
    '',
    targetsMarkdown(result.targets),
  ];
  if (result.limits?.length > 0)
    lines.push(
      '',
      "## Each path's physical limit on one core",
      '',
      "limit = 10⁶ ÷ (the floor's server CPU per answer + the signatures and verifications of the path, each in a " +
        "tight loop on the server's CPU + the audited ceiling's CPU per answer less the ceiling's, where the path " +
        "audits + one replay record, where it keeps one); share = Tessera's req/s ÷ the limit (bench/README.md, " +
        '"Each path\'s limit").',
      '',
      ...limitsMarkdown(result.limits),
    );
  if (result.clientIds) lines.push('', clientIdsMarkdown(result.clientIds));
  if (result.failures.length > 0) {
    lines.push('', '## Failures', '');
    for (const f of result.failures) lines.push(`- **${f.scenario}**: ${f.error.split('\n')[0]}`);
  }
  if (result.notes.length > 0) {
    lines.push('', '## Notes', '');
    for (const note of result.notes) lines.push(`- ${note}`);
  }
  if (result.profiles?.length > 0) {
    lines.push('', '## CPU profiles (self time, top entries)', '');
    for (const profile of result.profiles) {
      lines.push(
        `### ${profile.scenario} (${profile.file})`,
        '',
        '| self % | self ms | function | where |',
        '| ---: | ---: | --- | --- |',
      );
      for (const e of profile.top)
        lines.push(`| ${e.percent.toFixed(1)} | ${e.selfMs.toFixed(0)} | ${e.name} | ${e.where} |`);
      lines.push('');
    }
  }
  lines.push('', `Raw figures: \`${result.jsonFile}\`. Chart: \`${result.svgFile}\`.`, '');
  return lines.join('\n');
}

const escapeXml = (text) =>
  String(text).replace(
    /[<>&"']/g,
    (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;', "'": '&apos;' })[c],
  );

const COLORS = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759'];

/** Horizontal grouped bars of req/s per server and concurrency, the ceiling's figures as dashed lines. */
export function svgChart(result) {
  const concurrencies = result.settings.concurrencies;
  const groups = [];
  for (const row of result.rows) {
    let group = groups.find((g) => g.scenario === row.scenario);
    if (!group) groups.push((group = { scenario: row.scenario, label: row.label, bars: [] }));
    group.bars.push(row);
  }
  const labelWidth = 330;
  const plotWidth = 560;
  const right = 110;
  const barHeight = 16;
  const groupGap = 14;
  const top = 70;
  const groupHeight = concurrencies.length * barHeight + groupGap;
  const height = top + groups.length * groupHeight + 50;
  const width = labelWidth + plotWidth + right;
  const max = Math.max(1, ...result.rows.map((r) => r.reqPerSec)) * 1.05;
  const x = (value) => Math.round((labelWidth + (value / max) * plotWidth) * 10) / 10;
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Helvetica, Arial, sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="#fff"/>`,
    `<text x="12" y="22" font-size="15" font-weight="bold">${escapeXml(`Token requests per second (ES256), ${result.startedAt}`)}</text>`,
    `<text x="12" y="40" fill="#555">${escapeXml(`Node ${result.environment.serverNode}; one server process on one core unless noted; ${result.settings.seconds} s per bar`)}</text>`,
  ];
  concurrencies.forEach((c, i) => {
    const lx = labelWidth + i * 150;
    out.push(
      `<rect x="${lx}" y="50" width="12" height="12" fill="${COLORS[i % COLORS.length]}"/>`,
      `<text x="${lx + 16}" y="60">concurrency ${c}</text>`,
    );
  });
  // Grid and axis.
  const step = niceStep(max);
  for (let v = 0; v <= max; v += step) {
    const gx = x(v);
    out.push(
      `<line x1="${gx}" y1="${top - 4}" x2="${gx}" y2="${height - 40}" stroke="#e5e5e5"/>`,
      `<text x="${gx}" y="${height - 26}" text-anchor="middle" fill="#555">${escapeXml(thousands(v))}</text>`,
    );
  }
  groups.forEach((group, gi) => {
    const gy = top + gi * groupHeight;
    out.push(
      `<text x="${labelWidth - 8}" y="${gy + (concurrencies.length * barHeight) / 2 + 4}" text-anchor="end"${group.scenario === 'ceiling' ? ' font-weight="bold"' : ''}>${escapeXml(group.label)}</text>`,
    );
    concurrencies.forEach((c, ci) => {
      const row = group.bars.find((b) => b.connections === c);
      if (!row) return;
      const by = gy + ci * barHeight;
      const w = Math.max(1, x(row.reqPerSec) - labelWidth);
      const ratio = row.ratioToCeiling === undefined ? '' : ` (${percent(row.ratioToCeiling)})`;
      out.push(
        `<rect x="${labelWidth}" y="${by}" width="${w.toFixed(1)}" height="${barHeight - 3}" fill="${COLORS[ci % COLORS.length]}"/>`,
        `<text x="${(labelWidth + w + 4).toFixed(1)}" y="${by + barHeight - 5}" fill="#333">${escapeXml(thousands(row.reqPerSec) + ratio)}</text>`,
      );
    });
  });
  // The ceiling, one dashed line per concurrency, across every group; labels staggered so close lines
  // do not print over each other.
  const ceilings = concurrencies
    .map((c, ci) => ({ c, ci, row: find(result.rows, 'ceiling', c) }))
    .filter((e) => e.row)
    .sort((a, b) => a.row.reqPerSec - b.row.reqPerSec);
  ceilings.forEach(({ c, ci, row }, order) => {
    const cx = x(row.reqPerSec);
    const color = COLORS[ci % COLORS.length];
    const left = order === 0 && ceilings.length > 1;
    out.push(
      `<line x1="${cx}" y1="${top - 4}" x2="${cx}" y2="${height - 40}" stroke="${color}" stroke-dasharray="5,4" stroke-width="1.5"/>`,
      `<text x="${left ? cx - 3 : cx + 3}" y="${height - 8}" text-anchor="${left ? 'end' : 'start'}" fill="${color}">${escapeXml(`ceiling c${c}`)}</text>`,
    );
  });
  out.push('</svg>', '');
  return out.join('\n');
}

function niceStep(max) {
  const raw = max / 6;
  const power = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * power >= raw) return m * power;
  return 10 * power;
}

/**
 * Top self-time entries of a V8 .cpuprofile, as shares of the time the process was busy ((idle) left out),
 * and that busy time in milliseconds.
 */
export function profileTop(profile, count = 20) {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const perNode = new Map();
  const { samples = [], timeDeltas = [] } = profile;
  for (let i = 0; i < samples.length; i++)
    perNode.set(samples[i], (perNode.get(samples[i]) ?? 0) + (timeDeltas[i] ?? 0));
  const self = new Map();
  let busyMs = 0;
  for (const [id, micros] of perNode) {
    const frame = byId.get(id)?.callFrame;
    if (!frame || frame.functionName === '(idle)') continue;
    const file = frame.url ? frame.url.replace(/^file:\/\//, '').replace(/^.*\/node_modules\//, '') : '';
    const where = file ? `${file.replace(/^.*\/(dist|bench)\//, '$1/')}:${frame.lineNumber + 1}` : '';
    const name = frame.functionName || (file ? '(anonymous)' : '(native)');
    const key = `${name} ${where}`;
    const entry = self.get(key) ?? { name, where, selfMs: 0 };
    entry.selfMs += micros / 1000;
    self.set(key, entry);
    busyMs += micros / 1000;
  }
  const top = [...self.values()]
    .sort((a, b) => b.selfMs - a.selfMs)
    .slice(0, count)
    .map((e) => ({ ...e, percent: (100 * e.selfMs) / busyMs }));
  return { busyMs, top };
}
