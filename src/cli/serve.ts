import type { Command } from 'commander';
import { get as httpGet, type IncomingMessage } from 'node:http';
import { get as httpsGet } from 'node:https';
import { loadConfig, type Config } from '../config/index.js';
import { openStore } from '../runtime/store.js';
import { parseWorkers, withJson, type JsonFlag } from './common.js';
import { print, printJson } from './output.js';

/** Where `tessera healthcheck` asks: the bound address, or loopback when every interface is bound. */
function loopbackOf(host: string): string {
  if (host === '0.0.0.0' || host === '') return '127.0.0.1';
  if (host === '::') return '::1';
  return host;
}

/**
 * GET /healthz on this machine's server (the port and TLS of the settings; over loopback, a certificate for a public
 * name is not checked): whether it answers 200 within five seconds. For the image, which has no curl.
 */
function healthcheck(config: Config): Promise<string | undefined> {
  const host = loopbackOf(config.host);
  const options = {
    host,
    port: config.port,
    path: '/healthz',
    timeout: 5000,
    headers: { host: host.includes(':') ? `[${host}]:${config.port}` : `${host}:${config.port}` },
  };
  return new Promise((resolve) => {
    const done = (response: IncomingMessage) => {
      response.resume();
      resolve(response.statusCode === 200 ? undefined : `/healthz answered ${response.statusCode}`);
    };
    const request =
      config.tls === undefined
        ? httpGet(options, done)
        : httpsGet({ ...options, rejectUnauthorized: false }, done);
    request.on('timeout', () => request.destroy(new Error('no answer within 5 s')));
    request.on('error', (error) => resolve(error.message));
  });
}

/** `tessera serve`, `tessera migrate` and `tessera healthcheck`. */
export function serveCommands(program: Command): void {
  program
    .command('serve')
    .description('run the token server (settings from TESSERA_* variables)')
    .option('--port <port>', 'TCP port (overrides TESSERA_PORT)')
    .option('--host <host>', 'interface to bind (overrides TESSERA_HOST)')
    .option('--workers <n>', 'processes sharing the port (overrides TESSERA_WORKERS)', parseWorkers)
    .action(async (options: { port?: string; host?: string; workers?: number }) => {
      const env = { ...process.env };
      if (options.port !== undefined) env.TESSERA_PORT = options.port;
      if (options.host !== undefined) env.TESSERA_HOST = options.host;
      if (options.workers !== undefined) env.TESSERA_WORKERS = String(options.workers);
      const config = loadConfig(env);
      // Loaded here, not at the top: the server (Fastify, the console, metrics, Redis) is most of what a command
      // would load, and every other command does without it.
      if (config.workers > 1) {
        const { runCluster } = await import('../cluster.js');
        await runCluster(config, config.workers);
      } else {
        const { runServer } = await import('../main.js');
        await runServer(config);
      }
    });

  program
    .command('healthcheck')
    .description("exit 0 if this machine's server answers /healthz (for a container's health check)")
    .action(async () => {
      const problem = await healthcheck(loadConfig());
      if (problem === undefined) return;
      process.stderr.write(`tessera: unhealthy: ${problem}\n`);
      process.exitCode = 1;
    });

  withJson(program.command('migrate').description('bring the store schema up to date')).action(
    async (_options: JsonFlag, command: Command) => {
      const json = Boolean(command.optsWithGlobals<JsonFlag>().json);
      const config = loadConfig();
      const store = await openStore(config);
      await store.close();
      if (json) printJson({ migrated: true, engine: store.engine });
      else print(`Store schema is up to date (${store.engine}).\n`);
    },
  );
}
