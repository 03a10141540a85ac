import type { Command } from 'commander';
import { grants } from '../management/index.js';
import { action, withJson } from './common.js';
import { print, printJson } from './output.js';

/** `tessera grant add|remove`. */
export function grantCommands(program: Command): void {
  const grant = program
    .command('grant')
    .alias('grants')
    .description('which client may get tokens for which audience');
  withJson(grant.command('add <client-id> <audience>').description('allow a client an audience')).action(
    action(async (ctx, json, id: string, url: string) => {
      const added = await grants.addGrant(ctx, id, url);
      if (json) printJson({ client_id: id, audience: url, added });
      else
        print(added ? `Client ${id} may now get tokens for ${url}.\n` : `Client ${id} already had ${url}.\n`);
    }),
  );
  withJson(
    grant.command('remove <client-id> <audience>').description('withdraw an audience from a client'),
  ).action(
    action(async (ctx, json, id: string, url: string) => {
      await grants.removeGrant(ctx, id, url);
      if (json) printJson({ client_id: id, audience: url, removed: true });
      else print(`Client ${id} may no longer get tokens for ${url}.\n`);
    }),
  );
}
