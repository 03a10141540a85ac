import { Option, type Command } from 'commander';
import { SIGNING_ALGS } from '../domain/algorithms.js';
import { audiences, views } from '../management/index.js';
import { action, parseName, parseTtl, withJson } from './common.js';
import { formatTable, print, printJson } from './output.js';

/** `tessera audience add|list|remove`. */
export function audienceCommands(program: Command): void {
  const audience = program
    .command('audience')
    .alias('audiences')
    .description('environment URLs tokens can be issued for');
  withJson(
    audience
      .command('add <url>')
      .description('register an audience')
      .option('--name <name>', 'display name', parseName)
      .option('--ttl <seconds>', 'token lifetime for this audience', parseTtl)
      .addOption(new Option('--alg <alg>', 'signing algorithm for this audience').choices(SIGNING_ALGS)),
  ).action(
    action(async (ctx, json, url: string, options: { name?: string; ttl?: number; alg?: string }) => {
      const added = await audiences.addAudience(ctx, {
        url,
        name: options.name,
        tokenTtl: options.ttl,
        signingAlg: options.alg,
      });
      if (json) printJson(views.audienceJson(added));
      else print(`Audience ${added.url} registered.\n`);
    }),
  );
  withJson(audience.command('list').description('list audiences')).action(
    action(async (ctx, json) => {
      const list = await audiences.listAudiences(ctx);
      if (json) printJson(list.map(views.audienceJson));
      else
        print(
          formatTable(
            ['url', 'name', 'token_ttl', 'signing_alg', 'created_at'],
            list.map((a) => [a.url, a.name, a.tokenTtl, a.signingAlg, a.createdAt]),
          ),
        );
    }),
  );
  withJson(audience.command('remove <url>').description('remove an audience and every grant of it')).action(
    action(async (ctx, json, url: string) => {
      await audiences.removeAudience(ctx, url);
      if (json) printJson({ url, removed: true });
      else print(`Audience ${url} removed, with its grants.\n`);
    }),
  );
}
