import { execFile, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { freePort } from './server.js';

/**
 * A throwaway PostgreSQL cluster of its own (initdb into a temp dir, a free port on 127.0.0.1), to stop and
 * start for real without touching the machine's own server. Run as root, the binaries run as `postgres`.
 */
export interface PgCluster {
  /** postgres://postgres@127.0.0.1:<port>/tessera */
  url: string;
  port: number;
  dir: string;
  /** pg_ctl start -w: resolves once it accepts connections. */
  start(): Promise<void>;
  /** pg_ctl stop -m immediate -w: the postmaster and every backend are gone when it resolves. */
  stop(): Promise<void>;
  /**
   * SIGSTOP the postmaster and every backend: the server hangs instead of refusing (a frozen host, a
   * partition that drops packets). Connections stay open and queries never answer until thaw().
   */
  freeze(): void;
  /** SIGCONT what freeze() stopped. */
  thaw(): void;
  /** Stops (if running) and removes the directory; safe to call twice. */
  destroy(): Promise<void>;
  /** The server's own log, for failure messages. */
  log(): string;
}

function binDir(): string {
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((v) => existsSync(path.join(root, v, 'bin', 'pg_ctl')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions.length === 0) throw new Error(`no PostgreSQL binaries under ${root}/*/bin`);
  return path.join(root, versions[0]!, 'bin');
}

const asRoot = process.getuid?.() === 0;

/** The command line, run as `postgres` when we are root (initdb and postgres refuse to run as root). */
function command(bin: string, args: string[]): [string, string[]] {
  return asRoot ? ['runuser', ['-u', 'postgres', '--', bin, ...args]] : [bin, args];
}

function run(bin: string, args: string[], timeoutMs = 20_000): Promise<string> {
  const [file, argv] = command(bin, args);
  return new Promise((resolve, reject) => {
    execFile(file, argv, { timeout: timeoutMs, killSignal: 'SIGKILL' }, (error, stdout, stderr) => {
      if (error)
        reject(new Error(`${path.basename(bin)} ${args.join(' ')} failed: ${error.message}\n${stderr}`));
      else resolve(stdout + stderr);
    });
  });
}

export async function startPgCluster(): Promise<PgCluster> {
  const bin = binDir();
  const dir = mkdtempSync(path.join(tmpdir(), 'tessera-pgfault-'));
  const data = path.join(dir, 'data');
  const logFile = path.join(dir, 'postgres.log');
  if (asRoot) {
    const { uid, gid } = postgresUser();
    chownSync(dir, uid, gid);
  }
  const port = await freePort();
  const pgctl = path.join(bin, 'pg_ctl');
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50`;
  let running = false;
  let destroyed = false;
  let frozen: number[] = [];

  // If the test process dies before destroy(), do not leave a postmaster behind.
  const onExit = (): void => {
    for (const pid of frozen) {
      try {
        process.kill(pid, 'SIGCONT');
      } catch {
        // Already gone.
      }
    }
    if (running) {
      const [file, argv] = command(pgctl, ['-D', data, '-m', 'immediate', '-w', 'stop']);
      spawnSync(file, argv, { stdio: 'ignore', timeout: 10_000 });
    }
    rmSync(dir, { recursive: true, force: true });
  };
  process.once('exit', onExit);

  const cluster: PgCluster = {
    url: `postgres://postgres@127.0.0.1:${port}/tessera`,
    port,
    dir,
    async start() {
      await run(pgctl, ['-D', data, '-l', logFile, '-o', options, '-w', '-t', '20', 'start']);
      running = true;
    },
    async stop() {
      if (!running) return;
      await run(pgctl, ['-D', data, '-m', 'immediate', '-w', '-t', '20', 'stop']);
      running = false;
    },
    freeze() {
      const postmaster = Number(readFileSync(path.join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
      const children = spawnSync('ps', ['-o', 'pid=', '--ppid', String(postmaster)], { encoding: 'utf8' })
        .stdout.split('\n')
        .map((line) => Number(line.trim()))
        .filter((pid) => Number.isInteger(pid) && pid > 0);
      frozen = [postmaster, ...children];
      for (const pid of frozen) process.kill(pid, 'SIGSTOP');
    },
    thaw() {
      for (const pid of frozen) {
        try {
          process.kill(pid, 'SIGCONT');
        } catch {
          // Already gone.
        }
      }
      frozen = [];
    },
    async destroy() {
      if (destroyed) return;
      destroyed = true;
      cluster.thaw();
      try {
        await cluster.stop();
      } finally {
        process.removeListener('exit', onExit);
        rmSync(dir, { recursive: true, force: true });
      }
    },
    log() {
      try {
        return spawnSync('tail', ['-n', '40', logFile], { encoding: 'utf8' }).stdout;
      } catch {
        return '';
      }
    },
  };

  try {
    await run(path.join(bin, 'initdb'), [
      '-D',
      data,
      '--auth=trust',
      '-U',
      'postgres',
      '-E',
      'UTF8',
      '--no-sync',
      '--no-instructions',
    ]);
    await cluster.start();
    const admin = new pg.Client({ connectionString: `postgres://postgres@127.0.0.1:${port}/postgres` });
    await admin.connect();
    try {
      await admin.query('CREATE DATABASE tessera');
    } finally {
      await admin.end();
    }
  } catch (error) {
    await cluster.destroy();
    throw error;
  }
  return cluster;
}

function postgresUser(): { uid: number; gid: number } {
  const out = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
  const gidOut = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
  const uid = Number(out.stdout.trim());
  const gid = Number(gidOut.stdout.trim());
  if (out.status !== 0 || !Number.isInteger(uid))
    throw new Error('running as root but there is no postgres user');
  return { uid, gid };
}
