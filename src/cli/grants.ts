import type { Command } from 'commander';
import { grants } from '../management/index.js';
import { action, parseClaims, withJson } from './common.js';
import { print, printJson } from './output.js';

/** Scopes as the command line takes them: one argument, separated by spaces (as in a token request). */
const scopeList = (value: string): string[] => value.split(/\s+/).filter(Boolean);

/** `tessera grant add|set-scopes|remove`. */
export function grantCommands(program: Command): void {
  const grant = program
    .command('grant')
    .alias('grants')
    .description('which client may get tokens for which audience, with which scopes');
  withJson(
    grant
      .command('add <client-id> <audience>')
      .description('allow a client an audience')
      .option('--scopes <scopes>', 'the scopes it may have, space-separated (each one the audience defines)'),
  ).action(
    action(async (ctx, json, id: string, url: string, options: { scopes?: string }) => {
      if (options.scopes !== undefined) {
        const { grant: set, created } = await grants.setGrantScopes(ctx, id, url, scopeList(options.scopes));
        if (json) printJson({ client_id: id, audience: url, scopes: set.scopes, added: created });
        else
          print(
            `Client ${id} may ${created ? 'now ' : ''}get tokens for ${url}, scopes: ${set.scopes.join(' ') || 'none'}.\n`,
          );
        return;
      }
      const added = await grants.addGrant(ctx, id, url);
      if (json) printJson({ client_id: id, audience: url, added });
      else
        print(added ? `Client ${id} may now get tokens for ${url}.\n` : `Client ${id} already had ${url}.\n`);
    }),
  );
  withJson(
    grant
      .command('set-scopes <client-id> <audience> <scopes>')
      .description(
        'set exactly the scopes of a grant (space-separated; "" for none); grants the audience if needed',
      ),
  ).action(
    action(async (ctx, json, id: string, url: string, scopes: string) => {
      const { grant: set, created } = await grants.setGrantScopes(ctx, id, url, scopeList(scopes));
      if (json) printJson({ client_id: id, audience: url, scopes: set.scopes, added: created });
      else print(`Client ${id}, ${url}: scopes ${set.scopes.join(' ') || 'none'}.\n`);
    }),
  );
  withJson(
    grant
      .command('set-claims <client-id> <audience> <json>')
      .description("set the custom claims of a grant (over the client's for this audience; '{}' for none)"),
  ).action(
    action(async (ctx, json, id: string, url: string, text: string) => {
      const { grant: set, created } = await grants.setGrant(ctx, id, url, { claims: parseClaims(text) });
      if (json) printJson({ client_id: id, audience: url, claims: set.claims, added: created });
      else
        print(`Client ${id}, ${url}: claims ${set.claims === null ? 'none' : JSON.stringify(set.claims)}.\n`);
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
