/* global process, console, setTimeout, clearTimeout, fetch */
// `npm run bench`: Tessera against the ceiling and its peers, one server at a time, each pinned to one core
// and loaded by autocannon from the other. See bench/README.md.
import { execFileSync } from 'node:child_process';
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
import { breakdownText, cpuBreakdown } from './lib/breakdown.js';
import { limitsTable, limitsText, pathLimit, pathOf, referenceCosts } from './lib/limits.js';
import { checkedWarmup, measure } from './lib/load.js';
import { options } from './lib/options.js';
import { scenarios } from './lib/scenarios.js';
import { freePort, killAllNow, machineCpuSeconds, pinSelf, stopServer, waitUntilReady } from './lib/proc.js';
import {
  clientIdsText,
  compareRows,
  compareText,
  markdown,
  medianRows,
  profileTop,
  svgChart,
  targets,
  targetsText,
  textTable,
} from './lib/report.js';
import { postgresAnswers, redisAnswers } from './lib/stores.js';
import { namedStalls, stallsText } from './lib/stalls.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/**
 * Tessera's tessera_event_loop_delay_max_seconds (the longest event-loop delay since the previous scrape), or
 * the ceiling's event_loop_delay_max_seconds (the same measure), in milliseconds, of a /metrics text; undefined
 * where the server has no metrics (TESSERA_METRICS=false, the other peers).
 */
function loopDelayMaxMs(text) {
  const match = text && /^(?:tessera_)?event_loop_delay_max_seconds (\S+)$/m.exec(text);
  return match ? Number(match[1]) * 1000 : undefined;
}

/**
 * The text of a server's /metrics, or undefined (no metrics, no answer). `get`: the server's fetch over https (it
 * trusts its CA).
 */
async function scrape(metricsUrl, get = fetch) {
  try {
    const response = await get(metricsUrl);
    return response.ok ? await response.text() : undefined;
  } catch {
    return undefined;
  }
}

/** tessera_otel_spans_dropped_total of a /metrics text (spans the full export queue dropped), or undefined. */
function spansDropped(text) {
  const match = text && /^tessera_otel_spans_dropped_total (\S+)$/m.exec(text);
  return match ? Number(match[1]) : undefined;
}

/** What the OTLP sink received between two readings of its /stats (lib/servers.js, otlpSink). */
function sinkDelta(before, after) {
  return {
    requests: after.requests - before.requests,
    bytes: after.bytes - before.bytes,
    spans: after.spans - before.spans,
    unreadable: after.unreadable - before.unreadable,
    paths: Object.keys(after.byPath).filter(
      (path) => after.byPath[path].requests > (before.byPath[path]?.requests ?? 0),
    ),
    /** Spans by name (the sink keeps 32 names at most). */
    names: Object.fromEntries(
      Object.entries(after.spanNames)
        .map(([name, count]) => [name, count - (before.spanNames[name] ?? 0)])
        .filter(([, count]) => count > 0)
        .sort((a, b) => b[1] - a[1]),
    ),
  };
}

/** A sink delta for people: `N requests (paths), M kB, K spans (B bytes a span)`. */
function sinkText(d) {
  return (
    `${d.requests.toLocaleString('en-US')} requests (${d.paths.join(', ') || 'none'}), ` +
    `${(d.bytes / 1024).toFixed(0)} kB, ${d.spans.toLocaleString('en-US')} spans` +
    (d.spans > 0 ? ` (${(d.bytes / d.spans).toFixed(0)} bytes a span)` : '') +
    (d.unreadable > 0 ? `, ${d.unreadable} not readable as OTLP` : '')
  );
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
  const turns = settings.compare
    ? settings.scenarios.length +
      (2 * settings.rounds - 1) * settings.scenarios.filter((id) => id.startsWith('tessera-')).length
    : settings.rounds * settings.scenarios.length;
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
  const redisUp = settings.scenarios.some((s) => s.endsWith('-redis'))
    ? await redisAnswers(settings.redisUrl)
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

  const { definitions, servedBy, ...measured } = scenarios({
    settings,
    cleanups,
    environment,
    pgUp,
    baseline,
    profileDir,
    log,
  });

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
    /** The OTLP sink's counts when the server was ready (tracing scenarios). */
    let sinkAtStart;
    try {
      const port = await freePort();
      started = await definition.start(port);
      await waitUntilReady(started.server, started.readyUrl, { timeoutMs: 30_000, fetch: started.fetch });
      // The tracing scenarios' sink: what it received from this server, from before its first request.
      if (started.sink) sinkAtStart = await started.sink.stats();
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
        // One scrape before and one after (the loop delay's window is the time between two scrapes), of which
        // the tracing scenarios also read the spans dropped.
        const scraped = loopDelayUrl ? await scrape(loopDelayUrl, started.fetch) : undefined;
        const sinkBefore = started.sink ? await started.sink.stats() : undefined;
        const result = await measure(started.target, {
          seconds: settings.seconds,
          connections,
          serverPid: started.server.pid,
          storeComm: { postgres: 'postgres', redis: 'redis-server' }[definition.store],
          sinkPid: started.sink?.pid,
        });
        const scrapedAfter = loopDelayUrl ? await scrape(loopDelayUrl, started.fetch) : undefined;
        result.loopDelayMaxMs = loopDelayMaxMs(scrapedAfter);
        if (started.sink) {
          // What the sink received during the measurement: the batches exported meanwhile (the last spans of
          // it may go out in the next one), and the spans the full queue dropped.
          result.otlp = sinkDelta(sinkBefore, await started.sink.stats());
          const dropped = [spansDropped(scraped), spansDropped(scrapedAfter)];
          result.otlp.spansDropped =
            dropped[0] === undefined || dropped[1] === undefined ? undefined : dropped[1] - dropped[0];
        }
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
            ` (load generator's ${result.loadgenLoopMaxMs.toFixed(1)} ms)` +
            `, errors ${result.errors + result.timeouts}, non-2xx ${result.non2xx}, ` +
            `server CPU ${result.serverCpuCores.toFixed(2)}, RSS ${result.serverRssMb.toFixed(0)} MB`,
        );
      }
      // After the measurements: what the target keeps for the end (the replay probe's last replay), as a note.
      const finished = await started.target.finish?.();
      if (finished) notes.push(`${id}: ${finished}`);
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
    // The tracing scenarios: what the sink received from the server in all, its shutdown's flush included (it
    // exports what it holds before it exits). Where every request is recorded, none arriving means that the
    // measurement was of a server that exported nothing: a failure, not a figure.
    if (started?.sink && sinkAtStart) {
      try {
        const total = sinkDelta(sinkAtStart, await started.sink.stats());
        const names = Object.entries(total.names).map(([name, n]) => `${n.toLocaleString('en-US')} ${name}`);
        notes.push(
          `${id}: the OTLP sink received ${sinkText(total)} from the server in all (warm-up, measurements, ` +
            `shutdown)${names.length > 0 ? `; spans by name: ${names.join(', ')}` : ''}`,
        );
        if (definition.spansExpected && total.spans === 0 && !failures.some((f) => f.scenario === id))
          failures.push({
            scenario: id,
            error:
              `the OTLP sink received no span from ${id} (${total.requests} requests, ${total.bytes} bytes): ` +
              `the measurement is of a server that exported nothing\n${started.server.output}`,
          });
      } catch (error) {
        notes.push(`${id}: the OTLP sink could not be read (${error.message})`);
      }
    }
    // Each profile file is read once, for everything made of it (they are tens of MB).
    const left = settings.profile || settings.stalls ? profilesLeft(profileDir, id) : [];
    if (settings.profile) {
      profiles.push(...summaries(id, left));
      addBreakdowns(left, id, rows);
    }
    if (settings.stalls && isTessera(id))
      stallReports.push({ scenario: id, stalls: readStalls(left, join(profileDir, id), readyAt) });
  }

  const notedOnce = new Set();
  // Without --compare, --rounds runs the whole list that many times, every other round in the reverse order (so
  // that neither the first nor the last place in a round is always the same scenario's); a round's rows after the
  // first are `<id>#<round>`, folded into their medians once every round has run (medianRows in lib/report.js).
  const passes = settings.compare ? [[settings.scenarios, '']] : [];
  for (let n = 1; !settings.compare && n <= settings.rounds; n++)
    passes.push([
      n % 2 === 1 ? settings.scenarios : [...settings.scenarios].reverse(),
      n === 1 ? '' : `#${n}`,
    ]);
  try {
    for (const [scenarios, pass] of passes)
      for (const scenario of scenarios) {
        if (aborting) break;
        const definition = definitions[scenario];
        // The client id measurement is not a load: once.
        if (definition.measure && pass !== '') continue;
        const id = scenario + pass;
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
        if (definition.store === 'redis' && !redisUp) {
          notes.push(`${id} skipped: Redis does not answer at ${settings.redisUrl}`);
          log(`${id}: skipped, Redis does not answer`);
          continue;
        }
        await runLoad(id, definition, pass && ` ${pass}`);
        if (compare && isTessera(id)) {
          // The same scenario as of the --compare revision, right after, so that both see the same machine. With
          // --rounds, more pairs, each in the other order from the one before (then, now; now, then; ...), so that
          // what favours the first or the second run of a pair is not counted for one side only. Rows of a round
          // after the first are `<id>#<round>` and `<id>@<commit>#<round>` (compareRows in lib/report.js).
          const round = (n) => (n === 1 ? '' : `#${n}`);
          const asThen = (n) =>
            servedBy(compare.root, () =>
              runLoad(`${id}@${compare.commit}${round(n)}`, definition, ` @ ${compare.commit}${round(n)}`),
            );
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
  if (!compare && settings.rounds > 1) {
    const folded = medianRows(rows);
    rows.splice(0, rows.length, ...folded);
    for (const row of rows)
      if (row.rounds)
        notes.push(
          `${row.scenario} c${row.connections}: the median of ${row.rounds.length} rounds, req/s ` +
            row.rounds.map((r) => Math.round(r).toLocaleString('en-US')).join(' / '),
        );
  }
  const signature = measured.signature();
  const verifications = measured.verifications();

  // Every ratio is against the best bare server of the run at that concurrency (the ceiling, or the ceiling
  // writing each answer at once when that was faster), and against the physical limit on one core of its path
  // (lib/limits.js: the floor, its signatures and verifications, an audit event and a replay record where it keeps
  // them; the ceiling's and the floor's, the floor and one signature).
  for (const row of rows) {
    const bare = rows.filter(
      (r) =>
        (r.scenario === 'ceiling' || r.scenario === 'ceiling-at-once') && r.connections === row.connections,
    );
    const best = bare.reduce((a, b) => (b.reqPerSec > a.reqPerSec ? b : a), bare[0]);
    row.ratioToCeiling = best ? row.reqPerSec / best.reqPerSec : undefined;
    row.bestBare = best?.scenario;
    // One core busy with nothing else: the floor's server CPU per answer (from /proc, so a floor held back by the
    // load generator still counts only its own work) plus what the row's path does beyond it.
    const costs = referenceCosts(rows, row.connections, signature, verifications);
    if (costs) {
      const path = pathOf(row.scenario);
      const limit = pathLimit(path, costs);
      row.limitPath = path.path;
      row.physicalLimit = limit.reqPerSec;
      row.ratioToLimit = row.reqPerSec / row.physicalLimit;
    }
  }
  /** Issue 45: each path's limit, Tessera's and node-oidc-provider's req/s on it. */
  const limits = limitsTable(rows, settings.concurrencies, signature, verifications);
  // Where Tessera's CPU per token goes beyond the floor's and the signature's (--profile names the functions).
  for (const row of rows.filter((r) => r.scenario === 'tessera-sqlite')) {
    const floorRow = rows.find((r) => r.scenario === 'floor' && r.connections === row.connections);
    const costs = referenceCosts(rows, row.connections, signature, verifications);
    if (floorRow && signature && costs) {
      const audit = costs.auditUs;
      notes.push(
        `Tessera (SQLite) at concurrency ${row.connections}: ${(row.ratioToLimit * 100).toFixed(0)} % of the Bearer ` +
          `path's physical limit (${Math.round(row.physicalLimit)} req/s); server CPU per token ` +
          `${row.serverCpuUsPerRequest.toFixed(0)} µs = the floor's ${floorRow.serverCpuUsPerRequest.toFixed(0)} µs ` +
          `(HTTP, parse, authenticate, serialize) + ${signature.usPerSignature.toFixed(0)} µs signature + ` +
          (audit === undefined ? '' : `${audit.toFixed(0)} µs audit event (ceiling-audited's) + `) +
          `${(row.serverCpuUsPerRequest - floorRow.serverCpuUsPerRequest - signature.usPerSignature - (audit ?? 0)).toFixed(0)} µs ` +
          `Tessera's own (routing, validation, ${audit === undefined ? 'audit, ' : 'its audit beyond the bare one, '}` +
          `logs, metrics; --profile splits it by category)`,
      );
    }
  }
  // What a durable audit trail costs on this core (the audited ceiling beside the ceiling), and Tessera beside a bare
  // server that keeps one.
  for (const audited of rows.filter((r) => r.scenario === 'ceiling-audited')) {
    const c = audited.connections;
    const bare = rows.find((r) => r.scenario === 'ceiling' && r.connections === c);
    const tessera = rows.find((r) => r.scenario === 'tessera-sqlite' && r.connections === c);
    if (bare)
      notes.push(
        `ceiling-audited at concurrency ${c}: ${(audited.ratioToCeiling * 100).toFixed(0)} % of the best bare ` +
          `server's req/s; its audit trail costs ` +
          `${(audited.serverCpuUsPerRequest - bare.serverCpuUsPerRequest).toFixed(1)} µs of server CPU a token ` +
          `(${audited.serverCpuUsPerRequest.toFixed(0)} against the ceiling's ${bare.serverCpuUsPerRequest.toFixed(0)})` +
          (tessera
            ? `; Tessera (SQLite) is at ${((tessera.reqPerSec / audited.reqPerSec) * 100).toFixed(0)} % of its req/s`
            : ''),
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
  // The admin API read with a DPoP-bound token beside the same read with a Bearer one.
  for (const row of rows.filter((r) => r.scenario === 'tessera-sqlite-admin-list-dpop')) {
    const bearer = rows.find(
      (r) => r.scenario === 'tessera-sqlite-admin-list' && r.connections === row.connections,
    );
    if (bearer)
      notes.push(
        `admin API at concurrency ${row.connections}: Bearer ${Math.round(bearer.reqPerSec)}/s, DPoP ` +
          `${Math.round(row.reqPerSec)}/s (${((row.reqPerSec / bearer.reqPerSec) * 100).toFixed(0)} %); CPU per ` +
          `answer ${row.serverCpuUsPerRequest?.toFixed(1)} vs ${bearer.serverCpuUsPerRequest?.toFixed(1)} µs`,
      );
  }
  // Mutual TLS (RFC 8705): what TLS costs the secret path, what tls_client_auth costs over a secret on the same TLS,
  // and the certificate forwarded by a proxy in a header over plain HTTP.
  for (const [scenario, against, what] of [
    ['tessera-sqlite-tls', 'tessera-sqlite', 'TLS (a secret over HTTPS ÷ over HTTP)'],
    ['tessera-sqlite-mtls', 'tessera-sqlite-tls', 'tls_client_auth (÷ a secret, both over HTTPS)'],
    [
      'tessera-sqlite-mtls-header',
      'tessera-sqlite',
      'tls_client_auth by Client-Cert header (÷ a secret, both over HTTP)',
    ],
  ])
    for (const row of rows.filter((r) => r.scenario === scenario)) {
      const other = rows.find((r) => r.scenario === against && r.connections === row.connections);
      if (other)
        notes.push(
          `${what} at concurrency ${row.connections}: ${scenario} ${Math.round(row.reqPerSec)} req/s, ${against} ` +
            `${Math.round(other.reqPerSec)} req/s (${(row.reqPerSec / other.reqPerSec).toFixed(2)}×); p99 ` +
            `${row.p99Ms.toFixed(1)} vs ${other.p99Ms.toFixed(1)} ms; CPU per token ` +
            `${row.serverCpuUsPerRequest?.toFixed(1)} vs ${other.serverCpuUsPerRequest?.toFixed(1)} µs`,
        );
    }
  // Traces (issue 42): tracing off now against the --baseline revision, and tracing on (1 % of the requests, every
  // one) against tracing off, each with what the OTLP sink received during the measurement.
  for (const [scenario, against, what] of [
    ['tessera-sqlite', 'tessera-sqlite-baseline', 'tracing off (now ÷ the --baseline revision)'],
    [
      'tessera-sqlite-otel-ratio',
      'tessera-sqlite',
      'traces at parentbased_traceidratio 0.01 (÷ tracing off)',
    ],
    ['tessera-sqlite-otel-always', 'tessera-sqlite', 'traces at always_on (÷ tracing off)'],
  ])
    for (const row of rows.filter((r) => r.scenario === scenario)) {
      const other = rows.find((r) => r.scenario === against && r.connections === row.connections);
      if (!other) continue;
      const { otlp } = row;
      notes.push(
        `${what} at concurrency ${row.connections}: ${scenario} ${Math.round(row.reqPerSec)} req/s, ${against} ` +
          `${Math.round(other.reqPerSec)} req/s (${(row.reqPerSec / other.reqPerSec).toFixed(2)}×); p99 ` +
          `${row.p99Ms.toFixed(1)} vs ${other.p99Ms.toFixed(1)} ms (${(row.p99Ms / other.p99Ms).toFixed(2)}×); CPU ` +
          `per token ${row.serverCpuUsPerRequest?.toFixed(1)} vs ${other.serverCpuUsPerRequest?.toFixed(1)} µs ` +
          `(${(row.serverCpuUsPerRequest / other.serverCpuUsPerRequest).toFixed(2)}×)` +
          (otlp
            ? `; the sink received ${sinkText(otlp)} meanwhile, ${otlp.spansDropped ?? '?'} spans dropped, sink ` +
              `CPU ${row.sinkCpuCores?.toFixed(2)}`
            : ''),
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
      'PostgreSQL and Redis run unpinned on the same machine; their CPU (all postgres processes, or redis-server) is the "store CPU" column',
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
    verifications,
    limits,
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
  if (limits.length > 0) out.push('', ...limitsText(limits));
  if (result.compare.length > 0) out.push('', compareText(result.compare, compare.commit));
  if (clientIds) out.push('', clientIdsText(clientIds));
  for (const f of failures) out.push(`FAILED  ${f.scenario}: ${f.error.split('\n')[0]}`);
  for (const note of notes) out.push(`note: ${note}`);
  for (const report of stallReports) out.push('', ...stallsText(report.scenario, report.stalls));
  if (settings.profile) out.push('', ...breakdownText(rows));
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
 * The profiles a server's run left in its directory (`CPU.<date>.<time>.<pid>.<thread>.<seq>.cpuprofile`, thread 0
 * the process's main thread), each read and parsed: [{ file, thread: 'main' | 'worker', profile }].
 */
function profilesLeft(profileDir, id) {
  const dir = join(profileDir, id);
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith('.cpuprofile'))
    .map((file) => ({
      file: join(dir, file),
      thread: file.split('.')[4] === '0' ? 'main' : 'worker',
      profile: JSON.parse(readFileSync(join(dir, file), 'utf8')),
    }));
}

/**
 * The longest stalls a Tessera server logged (--stalls, in `dir`) once it was ready (`from`, µs), named from its
 * busiest thread's profile.
 */
function readStalls(left, dir, from) {
  let busiest;
  for (const { profile } of left) {
    const busy = profileTop(profile, 0).busyMs;
    if (busiest === undefined || busy > busiest.busy) busiest = { profile, busy };
  }
  return busiest === undefined || from === undefined
    ? []
    : namedStalls(busiest.profile, join(dir, 'stalls.log'), from);
}

/** --profile: each of the server's measurements (its rows) gets where its CPU per answer went (lib/breakdown.js). */
function addBreakdowns(left, id, rows) {
  if (left.length === 0) return;
  for (const row of rows.filter((r) => r.scenario === id)) {
    const from = row.startedMonotonicUs;
    row.cpuBreakdown = cpuBreakdown(left, from, from + row.seconds * 1e6, {
      total: row.serverCpuUsPerRequest,
      main: row.serverMainThreadCpuUsPerRequest,
      answers: row.ok,
    });
  }
}

/** The profiles a server's run left, summarised; a cluster primary that did nothing but wait is left out. */
function summaries(id, left) {
  const summarised = left.map(({ file, profile }) => ({
    scenario: id,
    file: relative(ROOT, file),
    ...profileTop(profile),
  }));
  const busiest = Math.max(0, ...summarised.map((p) => p.busyMs));
  return summarised.filter((p) => p.busyMs >= busiest / 5);
}

main().catch((error) => {
  killAllNow();
  console.error(`bench: ${process.env.BENCH_DEBUG ? (error.stack ?? error) : (error.message ?? error)}`);
  process.exit(2);
});
