import type { Command } from 'commander';
import { loadConfig } from '../config/index.js';
import { openStore } from '../runtime/store.js';
import { parseWorkers, withJson, type JsonFlag } from './common.js';
import { print, printJson } from './output.js';

/** `tessera serve` and `tessera migrate`. */
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
