/* global console, process, setTimeout, setInterval, clearInterval, URLSearchParams, performance */
// A big `tessera apply` while the server answers tokens: `npm run build && node bench/apply-load.js
// [--clients 20000] [--store sqlite|postgres] [--rate 1000]`. Starts `tessera serve` on a fresh store, gets tokens
// at a steady rate (keep-alive connections, each sending its next request a fixed interval after the last
// answer), and after a few seconds runs `tessera apply` of a file with N new clients (each granted the
// audience, so 2N rows), as README's bulk example does. Prints the latencies before, during and after the apply,
// the apply's time, its peak memory (the CLI process's VmHWM), and whether it printed a secret for every client.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { freePort, waitUntilReady, startPinned, stopServer } from './lib/proc.js';
import { createPostgresDatabase, provision, tesseraEnv } from './lib/stores.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const AUDIENCE = 'https://api.bench.example';
const { values } = parseArgs({
  options: {
    clients: { type: 'string', default: '20000' },
    store: { type: 'string', default: 'sqlite' },
    rate: { type: 'string', default: '1000' },
    pg: { type: 'string', default: 'postgres://postgres@127.0.0.1:5432/postgres' },
    // A CPU profile of the server (--cpu-prof) into this directory, to find what a stall was.
    profile: { type: 'string' },
  },
});
const N = Number(values.clients);
const CONNECTIONS = 8;
const intervalMs = (CONNECTIONS * 1000) / Number(values.rate);

const dataDir = mkdtempSync(join(tmpdir(), 'tessera-apply-load-'));
const cleanups = [() => rmSync(dataDir, { recursive: true, force: true })];
const port = await freePort();
const settings = {
  TESSERA_DATA_DIR: dataDir,
  TESSERA_PORT: String(port),
  TESSERA_HOST: '127.0.0.1',
  TESSERA_MASTER_KEY: randomBytes(32).toString('base64url'),
  TESSERA_LOG_LEVEL: 'warn',
};
if (values.store === 'postgres') {
  const db = await createPostgresDatabase(values.pg);
  settings.TESSERA_DATABASE_URL = db.url;
  cleanups.push(db.drop);
}
const env = tesseraEnv(settings);

/** Runs the CLI; resolves with its output, exit code and peak RSS (VmHWM from /proc, read until it exits). */
function cli(args) {
  return new Promise((resolveRun) => {
    const child = spawn(
      process.execPath,
      ['--disable-warning=ExperimentalWarning', join(ROOT, 'bin/tessera.js'), ...args],
      { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stdout = '';
    let stderr = '';
    let peakKb = 0;
    const watch = setInterval(() => {
      try {
        const hwm = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'));
        if (hwm) peakKb = Math.max(peakKb, Number(hwm[1]));
      } catch {
        // gone
      }
    }, 50);
    child.stdout.on('data', (c) => (stdout += c));
    child.stderr.on('data', (c) => (stderr += c));
    child.on('exit', (code) => {
      clearInterval(watch);
      resolveRun({ code, stdout, stderr, maxRssMb: peakKb / 1024 });
    });
  });
}

const client = await provision(ROOT, env, AUDIENCE);
const server = startPinned({
  name: 'tessera',
  cpus: '0',
  command: process.execPath,
  args: [
    '--disable-warning=ExperimentalWarning',
    ...(values.profile ? ['--cpu-prof', `--cpu-prof-dir=${resolve(values.profile)}`] : []),
    join(ROOT, 'bin/tessera.js'),
    'serve',
  ],
  env,
  cwd: ROOT,
});
cleanups.unshift(() => stopServer(server));
await waitUntilReady(server, `http://127.0.0.1:${port}/readyz`);

const body = new URLSearchParams({
  grant_type: 'client_credentials',
  client_id: client.clientId,
  client_secret: client.clientSecret,
  audience: AUDIENCE,
}).toString();
const agent = new Agent({ keepAlive: true, maxSockets: CONNECTIONS });
const samples = []; // [startedAtMs, latencyMs, status]
let running = true;
const t0 = performance.now();
function one() {
  return new Promise((done) => {
    const started = performance.now();
    const req = request(
      {
        agent,
        host: '127.0.0.1',
        port,
        path: '/oauth/token',
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'content-length': body.length },
      },
      (res) => {
        res.resume();
        res.on('end', () => {
          samples.push([started - t0, performance.now() - started, res.statusCode]);
          done();
        });
      },
    );
    req.on('error', () => {
      samples.push([started - t0, performance.now() - started, 0]);
      done();
    });
    req.end(body);
  });
}
// The file is written before the load starts: writing 200,000 clients' lines here stopped this process, and with it
// the load generator, for ~300 ms, which counted as the server's latency.
const file = join(dataDir, 'bulk.yaml');
{
  const lines = ['clients:'];
  for (let i = 0; i < N; i++)
    lines.push(
      `  - client_id: bulk-${i}`,
      `    name: Bulk ${i}`,
      '    grants:',
      `      - audience: ${AUDIENCE}`,
    );
  writeFileSync(file, lines.join('\n') + '\n');
}
const loops = Array.from({ length: CONNECTIONS }, async () => {
  while (running) {
    await one();
    await new Promise((r) => setTimeout(r, intervalMs));
  }
});

await new Promise((r) => setTimeout(r, 5000));
const applyStart = performance.now() - t0;
const applied = await cli(['apply', '-f', file, '--json']);
const applyEnd = performance.now() - t0;
await new Promise((r) => setTimeout(r, 5000));
running = false;
await Promise.all(loops);
agent.destroy();

let secrets;
try {
  secrets = (JSON.parse(applied.stdout).secrets ?? []).length;
} catch {
  secrets = -1; // not a JSON document: the apply died before it printed one
}
const stats = (phase) => {
  const ms = phase.map((s) => s[1]).sort((a, b) => a - b);
  const at = (p) => ms[Math.min(ms.length - 1, Math.max(0, Math.ceil((p / 100) * ms.length) - 1))] ?? NaN;
  return {
    requests: ms.length,
    non200: phase.filter((s) => s[2] !== 200).length,
    p50: +at(50).toFixed(2),
    p99: +at(99).toFixed(2),
    max: +(ms.at(-1) ?? NaN).toFixed(2),
    over100ms: ms.filter((v) => v > 100).length,
  };
};
const before = samples.filter((s) => s[0] < applyStart);
const during = samples.filter((s) => s[0] >= applyStart && s[0] < applyEnd + 1000);
const after = samples.filter((s) => s[0] >= applyEnd + 1000);
console.log(
  JSON.stringify(
    {
      clients: N,
      store: values.store,
      rate: Number(values.rate),
      apply: {
        exitCode: applied.code,
        seconds: +((applyEnd - applyStart) / 1000).toFixed(1),
        maxRssMb: +applied.maxRssMb.toFixed(0),
        secretsPrinted: secrets,
        stderr: applied.code === 0 ? undefined : applied.stderr.slice(-2000),
      },
      before: stats(before),
      during: stats(during),
      // The slowest requests of the run: when each started, in ms from the apply's start (the apply ended at
      // applyEndMs), and how long it waited.
      applyEndMs: Math.round(applyEnd - applyStart),
      slowest: [...samples]
        .sort((a, b) => b[1] - a[1])
        .slice(0, 5)
        .map((s) => ({ atMs: Math.round(s[0] - applyStart), ms: +s[1].toFixed(1), status: s[2] })),
      after: stats(after),
      // What the server logged (warnings and errors at TESSERA_LOG_LEVEL=warn): why a request was refused.
      serverLog: server.output.split('\n').filter(Boolean).slice(-10),
    },
    null,
    2,
  ),
);
for (const cleanup of cleanups) await cleanup();
