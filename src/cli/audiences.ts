import { TOKEN_PROFILES } from '../domain/token-profiles.js';
import { Option, type Command } from 'commander';
import { SIGNING_ALGS } from '../domain/jose.js';
import { audiences, ManagementError, views } from '../management/index.js';
import { action, collectText, parseName, parseTtl, withJson } from './common.js';

const RESOURCE_SERVER_HELP =
  'a client that receives its tokens, and so may exchange one for a token of another audience (RFC 8693): a client id, repeatable or comma-separated';

const TOKEN_PROFILE_HELP =
  'the claims its tokens carry: rfc9068 (the default), auth0 (sub <id>@clients, azp, gty, permissions), keycloak (azp, typ, preferred_username, clientId)';

/** `--resource-server a --resource-server b,c`: client ids, in the order given (the rules are management's). */
const collectClientIds = (value: string, previous: string[] = []): string[] => [
  ...previous,
  ...value
    .split(',')
    .map((id) => id.trim())
    .filter(Boolean),
];
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
      .addOption(new Option('--alg <alg>', 'signing algorithm for this audience').choices(SIGNING_ALGS))
      .option(
        '--scope <name>',
        'a scope it defines (repeatable; descriptions: audience scope add)',
        collectText,
      )
      .option('--resource-server <client-id>', RESOURCE_SERVER_HELP, collectClientIds)
      .addOption(new Option('--token-profile <profile>', TOKEN_PROFILE_HELP).choices(TOKEN_PROFILES)),
  ).action(
    action(
      async (
        ctx,
        json,
        url: string,
        options: {
          name?: string;
          ttl?: number;
          alg?: string;
          scope?: string[];
          resourceServer?: string[];
          tokenProfile?: string;
        },
      ) => {
        const added = await audiences.addAudience(ctx, {
          url,
          name: options.name,
          scopes: options.scope?.map((name) => ({ name })),
          tokenTtl: options.ttl,
          signingAlg: options.alg,
          resourceServerClientIds: options.resourceServer,
          tokenProfile: options.tokenProfile,
        });
        if (json) printJson(views.audienceJson(added));
        else print(`Audience ${added.url} registered.\n`);
      },
    ),
  );
  withJson(audience.command('list').description('list audiences')).action(
    action(async (ctx, json) => {
      const list = await audiences.listAudiences(ctx);
      if (json) printJson(list.map(views.audienceJson));
      else
        print(
          formatTable(
            [
              'url',
              'name',
              'token_ttl',
              'signing_alg',
              'token_profile',
              'scopes',
              'resource_servers',
              'created_at',
            ],
            list.map((a) => [
              a.url,
              a.name,
              a.tokenTtl,
              a.signingAlg,
              a.tokenProfile ?? 'rfc9068',
              a.scopes.map((sc) => sc.name).join(' ') || null,
              a.resourceServerClientIds.join(', ') || null,
              a.createdAt,
            ]),
          ),
        );
    }),
  );
  withJson(
    audience
      .command('update <url>')
      .description(
        'change an audience: its resource servers (the clients that receive its tokens; token exchange), its token profile',
      )
      .option(
        '--resource-server <client-id>',
        `${RESOURCE_SERVER_HELP}; the whole list, replacing the current one`,
        collectClientIds,
      )
      .option('--no-resource-servers', 'no client is its resource server any more')
      .addOption(new Option('--token-profile <profile>', TOKEN_PROFILE_HELP).choices(TOKEN_PROFILES)),
  ).action(
    action(
      async (
        ctx,
        json,
        url: string,
        options: { resourceServer?: string[]; resourceServers?: boolean; tokenProfile?: string },
      ) => {
        const ids = options.resourceServers === false ? [] : options.resourceServer;
        if (options.resourceServers === false && options.resourceServer !== undefined)
          throw new ManagementError(
            'invalid_field',
            '--resource-server and --no-resource-servers say opposite things: give one',
            'resource_server_client_ids',
          );
        const updated = await audiences.updateAudience(ctx, url, {
          resourceServerClientIds: ids,
          tokenProfile: options.tokenProfile,
        });
        if (json) printJson(views.audienceJson(updated));
        else
          print(
            `Audience ${url}: resource servers ${updated.resourceServerClientIds.join(', ') || 'none'}${
              options.tokenProfile === undefined ? '' : `; token profile ${updated.tokenProfile ?? 'rfc9068'}`
            }.\n`,
          );
      },
    ),
  );
  withJson(audience.command('remove <url>').description('remove an audience and every grant of it')).action(
    action(async (ctx, json, url: string) => {
      await audiences.removeAudience(ctx, url);
      if (json) printJson({ url, removed: true });
      else print(`Audience ${url} removed, with its grants.\n`);
    }),
  );
  const scope = audience.command('scope').alias('scopes').description('the permissions an audience defines');
  withJson(
    scope
      .command('add <url> <name>')
      .description('define a scope (RFC 6749 §3.3 characters), or change its description')
      .option('--description <text>', 'what the scope allows'),
  ).action(
    action(async (ctx, json, url: string, name: string, options: { description?: string }) => {
      const updated = await audiences.putScope(ctx, url, { name, description: options.description });
      if (json) printJson(views.audienceJson(updated));
      else print(`Audience ${url} defines ${name}.\n`);
    }),
  );
  withJson(
    scope
      .command('remove <url> <names...>')
      .description('remove scopes from an audience and from every grant of it'),
  ).action(
    action(async (ctx, json, url: string, names: string[]) => {
      const updated = await audiences.removeScopes(ctx, url, names);
      if (json) printJson(views.audienceJson(updated));
      else print(`Audience ${url} no longer defines ${names.join(', ')}; its grants lost them too.\n`);
    }),
  );
}
