import type { Command } from 'commander';
import { clientGrants, grants, views, type ManagementContext } from '../management/index.js';
import { action, parseClaims, withJson } from './common.js';
import { print, printJson } from './output.js';

/**
 * A grant under --json: the admin API's document of it (views.grantJson, as PUT
 * /clients/{id}/grants/{audience_id} answers it), read back once the change is made, and `added`: whether this
 * command created the grant, which the API tells by its status (201, not 200).
 */
async function printGrant(ctx: ManagementContext, clientId: string, url: string, added: boolean) {
  const { audience, grant } = await clientGrants.getGrant(ctx, clientId, url);
  printJson({ ...views.grantJson(clientId, audience, grant), added });
}

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
        if (json) await printGrant(ctx, id, url, created);
        else
          print(
            `Client ${id} may ${created ? 'now ' : ''}get tokens for ${url}, scopes: ${set.scopes.join(' ') || 'none'}.\n`,
          );
        return;
      }
      const added = await grants.addGrant(ctx, id, url);
      if (json) await printGrant(ctx, id, url, added);
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
      if (json) await printGrant(ctx, id, url, created);
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
      if (json) await printGrant(ctx, id, url, created);
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
