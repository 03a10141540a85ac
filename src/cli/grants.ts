import { Argument, type Command } from 'commander';
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

const TOKEN_EXCHANGE_HELP =
  'the client may exchange a token it received (as a resource server of its audience) for one of this audience (RFC 8693 token_exchange)';
const NO_TOKEN_EXCHANGE_HELP = 'it may not (the default for a new grant)';

/** What a grant's text line says of token exchange: nothing when it is off. */
const exchangeText = (on: boolean): string => (on ? ', token exchange allowed' : '');

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
      .option('--scopes <scopes>', 'the scopes it may have, space-separated (each one the audience defines)')
      .option('--token-exchange', TOKEN_EXCHANGE_HELP)
      .option('--no-token-exchange', NO_TOKEN_EXCHANGE_HELP),
  ).action(
    action(
      async (ctx, json, id: string, url: string, options: { scopes?: string; tokenExchange?: boolean }) => {
        if (options.scopes !== undefined || options.tokenExchange !== undefined) {
          const { grant: set, created } = await grants.setGrant(ctx, id, url, {
            ...(options.scopes === undefined ? {} : { scopes: scopeList(options.scopes) }),
            tokenExchange: options.tokenExchange,
          });
          if (json) await printGrant(ctx, id, url, created);
          else
            print(
              `Client ${id} may ${created ? 'now ' : ''}get tokens for ${url}, scopes: ${set.scopes.join(' ') || 'none'}${exchangeText(set.tokenExchange)}.\n`,
            );
          return;
        }
        const added = await grants.addGrant(ctx, id, url);
        if (json) await printGrant(ctx, id, url, added);
        else
          print(
            added ? `Client ${id} may now get tokens for ${url}.\n` : `Client ${id} already had ${url}.\n`,
          );
      },
    ),
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
    grant
      .command('set-token-exchange <client-id> <audience>')
      .addArgument(new Argument('<on|off>', 'on: allowed; off: not').choices(['on', 'off']))
      .description(
        'allow or forbid a grant token exchange: the client exchanging a token it received for one of this audience (RFC 8693); grants the audience if needed',
      ),
  ).action(
    action(async (ctx, json, id: string, url: string, value: string) => {
      const { grant: set, created } = await grants.setGrant(ctx, id, url, {
        tokenExchange: value === 'on',
      });
      if (json) await printGrant(ctx, id, url, created);
      else print(`Client ${id}, ${url}: token exchange ${set.tokenExchange ? 'allowed' : 'not allowed'}.\n`);
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
