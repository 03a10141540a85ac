/* global process, setTimeout, clearTimeout, fetch, AbortSignal */
// Processes the benchmark starts (pinned with taskset, each in its own process group so that a server and
// its workers go together) and what /proc says about them: CPU time and resident memory.
import { execFileSync, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';

const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;

/** Every server still running, so that none outlives the benchmark whatever happens. */
const live = new Set();

/** Kills every process group still running, at once (for exit handlers: synchronous, no waiting). */
export function killAllNow() {
  for (const server of live) {
    try {
      process.kill(-server.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  live.clear();
}

/** A TCP port free on 127.0.0.1 at the time of asking. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.unref();
    probe.on('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

/**
 * Starts `command args` pinned to `cpus` (taskset -c) in a new process group. The last 64 KiB of its
 * output are kept for the error report.
 */
export function startPinned({ name, cpus, command, args, env, cwd }) {
  const child = spawn('taskset', ['-c', cpus, command, ...args], {
    cwd,
    env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const server = {
    name,
    pid: child.pid,
    child,
    output: '',
    exited: undefined,
    exitCode: undefined,
  };
  const keep = (chunk) => {
    server.output = (server.output + chunk.toString()).slice(-65536);
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  server.exited = new Promise((resolve) => {
    child.on('exit', (code, signal) => {
      server.exitCode = code ?? signal;
      // Still in `live` until stopServer: workers of a primary that died first may outlive it.
      resolve(server.exitCode);
    });
    child.on('error', (error) => {
      keep(`spawn failed: ${error.message}\n`);
      server.exitCode = 'spawn-error';
      live.delete(server);
      resolve(server.exitCode);
    });
  });
  if (child.pid !== undefined) live.add(server);
  return server;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** SIGTERM to the whole group, then SIGKILL if it has not exited within `graceMs`. */
export async function stopServer(server, graceMs = 10_000) {
  if (!server || server.pid === undefined) return;
  const signal = (name) => {
    try {
      process.kill(-server.pid, name);
    } catch {
      // gone meanwhile
    }
  };
  // A server that already exited (a primary that crashed) may have left workers in its group: kill them.
  if (server.exitCode !== undefined) {
    signal('SIGKILL');
    live.delete(server);
    return;
  }
  signal('SIGTERM');
  let timer;
  const timedOut = new Promise((resolve) => {
    timer = setTimeout(() => resolve('timeout'), graceMs);
  });
  const outcome = await Promise.race([server.exited, timedOut]);
  clearTimeout(timer);
  if (outcome === 'timeout') {
    signal('SIGKILL');
    await Promise.race([server.exited, sleep(2000)]);
  }
  // Workers left behind by a primary that died first share its process group.
  signal('SIGKILL');
  live.delete(server);
}

/**
 * Polls `url` until it answers `okStatus`, the server exits, or `timeoutMs` passes; with the `fetch` given (over
 * https, one that trusts the server's CA), or the global one.
 */
export async function waitUntilReady(
  server,
  url,
  { timeoutMs = 30_000, okStatus = 200, fetch: get = fetch } = {},
) {
  const deadline = Date.now() + timeoutMs;
  let last = 'no answer';
  while (Date.now() < deadline) {
    if (server.exitCode !== undefined) {
      throw new Error(`${server.name} exited (${server.exitCode}) before it was ready:\n${server.output}`);
    }
    try {
      const response = await get(url, { signal: AbortSignal.timeout(1000) });
      await response.arrayBuffer();
      if (response.status === okStatus) return;
      last = `status ${response.status}`;
    } catch (error) {
      last = error.cause?.code ?? error.message;
    }
    await sleep(50);
  }
  throw new Error(`${server.name} not ready at ${url} within ${timeoutMs} ms (${last}):\n${server.output}`);
}

/** A process's (or a thread's) /proc stat: its name, its parent, its CPU ticks (user + system). */
function parseStat(stat) {
  const open = stat.indexOf('(');
  const close = stat.lastIndexOf(')');
  const fields = stat.slice(close + 2).split(' ');
  // fields[0] is field 3 (state): ppid is field 4, utime 14, stime 15.
  return {
    comm: stat.slice(open + 1, close),
    ppid: Number(fields[1]),
    ticks: Number(fields[11]) + Number(fields[12]),
  };
}

/** Every process as [pid, {ppid, ticks (utime+stime), comm}], read from /proc in one pass. */
export function processTable() {
  const table = new Map();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      table.set(Number(entry), parseStat(readFileSync(`/proc/${entry}/stat`, 'utf8')));
    } catch {
      // exited while we looked
    }
  }
  return table;
}

/** A process and every descendant of it that is alive now. */
export function processTree(rootPid, table = processTable()) {
  const children = new Map();
  for (const [pid, info] of table) {
    const list = children.get(info.ppid);
    if (list) list.push(pid);
    else children.set(info.ppid, [pid]);
  }
  const tree = [];
  const queue = [rootPid];
  while (queue.length > 0) {
    const pid = queue.shift();
    if (!table.has(pid)) continue;
    tree.push(pid);
    queue.push(...(children.get(pid) ?? []));
  }
  return tree;
}

/** CPU seconds (user + system) used so far by a process and its live descendants. */
export function treeCpuSeconds(rootPid) {
  const table = processTable();
  let ticks = 0;
  for (const pid of processTree(rootPid, table)) ticks += table.get(pid).ticks;
  return ticks / CLK_TCK;
}

/**
 * CPU seconds used so far by the main thread of a process and of each of its live descendants; the rest of their
 * treeCpuSeconds is their other threads' (a Tessera server's: the store's maintenance thread, V8's, libuv's).
 */
export function mainThreadsCpuSeconds(rootPid) {
  let ticks = 0;
  for (const pid of processTree(rootPid)) {
    try {
      ticks += parseStat(readFileSync(`/proc/${pid}/task/${pid}/stat`, 'utf8')).ticks;
    } catch {
      // exited while we looked
    }
  }
  return ticks / CLK_TCK;
}

/**
 * CPU seconds that every program other than `exclude` (and other than those named `excludeComm`) spent
 * between two process tables. Per-process times are exact, unlike the
 * tick-sampled totals of /proc/stat (which on this VM add up to less than the processes' own times). A
 * process that both started and ended between the two tables is missed.
 */
export function otherCpuSeconds(before, after, exclude, excludeComm) {
  let ticks = 0;
  for (const [pid, info] of after) {
    if (exclude.has(pid) || (excludeComm !== undefined && info.comm === excludeComm)) continue;
    // Kernel threads (children of kthreadd, pid 2) do this very measurement's loopback network work.
    if (pid === 2 || info.ppid === 2) continue;
    const earlier = before.get(pid);
    ticks += earlier && earlier.comm === info.comm ? info.ticks - earlier.ticks : info.ticks;
  }
  return Math.max(0, ticks) / CLK_TCK;
}

/** CPU seconds used so far by every process whose name is `comm` (e.g. the PostgreSQL server's). */
export function commCpuSeconds(comm) {
  let ticks = 0;
  for (const info of processTable().values()) if (info.comm === comm) ticks += info.ticks;
  return ticks / CLK_TCK;
}

/**
 * CPU seconds the whole machine has spent so far, from /proc/stat: `tasks` (user, nice, system, steal: time
 * some process or kernel thread ran) and `interrupts` (irq and softirq, much of it loopback network work
 * that belongs to no process).
 */
export function machineCpuSeconds() {
  const [user, nice, system, , , irq, softirq, steal] = readFileSync('/proc/stat', 'utf8')
    .split('\n')[0]
    .trim()
    .split(/\s+/)
    .slice(1)
    .map(Number);
  return { tasks: (user + nice + system + steal) / CLK_TCK, interrupts: (irq + softirq) / CLK_TCK };
}

/** CPU seconds used so far by this process (all its threads). */
export function selfCpuSeconds() {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1e6;
}

/** Resident memory (VmRSS) of a process and its live descendants, in MiB. */
export function treeRssMb(rootPid) {
  let kb = 0;
  for (const pid of processTree(rootPid)) {
    try {
      const match = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
      if (match) kb += Number(match[1]);
    } catch {
      // exited while we looked
    }
  }
  return kb / 1024;
}

/**
 * Pins this process, every thread of it, to `cpus` (threads made later inherit it). taskset -a walks the
 * threads one by one and fails if one ends meanwhile, so it is tried a few times.
 */
export function pinSelf(cpus) {
  let failure;
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      execFileSync('taskset', ['-a', '-p', '-c', cpus, String(process.pid)], { stdio: 'pipe' });
      return;
    } catch (error) {
      failure = error;
    }
  }
  throw new Error(
    `could not pin the load generator to CPUs ${cpus}: ${failure.stderr?.toString().trim() || failure.message}`,
  );
}
