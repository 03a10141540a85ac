import type { Command } from 'commander';
import type { Config } from '../config/index.js';
import { ValidationError } from '../domain/validate.js';
import { clients, views } from '../management/index.js';
import type { Client } from '../store/types.js';
import {
  action,
  collect,
  parseClientId,
  parseName,
  parseQuota,
  parseTtl,
  quotaValue,
  withJson,
  type QuotaOption,
} from './common.js';
import { formatRecord, formatTable, print, printJson } from './output.js';

function quotaText(c: Client): string | null {
  const parts = [
    c.quotaPerMinute === null ? '' : `${c.quotaPerMinute}/minute`,
    c.quotaPerDay === null ? '' : `${c.quotaPerDay}/day`,
  ].filter(Boolean);
  return parts.length ? parts.join(', ') : null;
}

function clientRecord(c: Client, secret?: string): string {
  return formatRecord([
    ['client_id', c.id],
    ...(secret === undefined ? [] : [['client_secret', secret] as const]),
    ['name', c.name],
    ['enabled', c.enabled ? 'yes' : 'no'],
    ['token_ttl', c.tokenTtl],
    ['quota', quotaText(c)],
    ['audiences', c.audiences.join(', ')],
    ['created_at', c.createdAt],
    ['updated_at', c.updatedAt],
    ['secret_rotated_at', c.secretRotatedAt],
  ]);
}

function curlHint(config: Config, c: Client, secret: string): string {
  const audience = c.audiences[0] ?? '<audience>';
  return (
    `\nGet a token:\n  curl -s ${config.issuer}/oauth/token -d grant_type=client_credentials ` +
    `-d client_id=${c.id} -d client_secret=${secret} -d audience=${encodeURIComponent(audience)}\n`
  );
}

/** A client with its secret, shown this once. */
function printWithSecret(
  config: Config,
  json: boolean,
  heading: string,
  { client, secret }: clients.WithSecret,
) {
  if (json) printJson({ ...views.clientJson(client), client_secret: secret });
  else {
    print(`${heading}: store it now.\n\n`);
    print(clientRecord(client, secret));
    print(curlHint(config, client, secret));
  }
}

interface CreateOptions {
  name: string;
  grant?: string[];
  id?: string;
  ttl?: number;
  quotaMinute?: QuotaOption;
  quotaDay?: QuotaOption;
}

/** `tessera client create|list|show|rotate-secret|set-quota|enable|disable|delete`. */
export function clientCommands(program: Command): void {
  const client = program.command('client').alias('clients').description('API clients and their secrets');
  withJson(
    client
      .command('create')
      .description('create a client; its secret is shown this once')
      .requiredOption('--name <name>', 'display name', parseName)
      .option('--grant <audience>', 'grant an audience (repeatable)', collect)
      .option('--id <client-id>', 'choose the client id instead of a generated one', parseClientId)
      .option('--ttl <seconds>', 'token lifetime for this client', parseTtl)
      .option('--quota-minute <n>', 'at most this many tokens a minute (or none)', parseQuota)
      .option('--quota-day <n>', 'at most this many tokens a day (or none)', parseQuota),
  ).action(
    action(async (ctx, json, options: CreateOptions) => {
      const created = await clients.createClient(ctx, {
        name: options.name,
        id: options.id,
        tokenTtl: options.ttl,
        quotaPerMinute: quotaValue(options.quotaMinute),
        quotaPerDay: quotaValue(options.quotaDay),
        grants: options.grant,
      });
      printWithSecret(ctx.config, json, 'Client created. The secret is shown this once', created);
    }),
  );
  withJson(client.command('list').description('list clients')).action(
    action(async (ctx, json) => {
      const list = await clients.listClients(ctx);
      if (json) printJson(list.map(views.clientJson));
      else
        print(
          formatTable(
            ['client_id', 'name', 'enabled', 'audiences', 'created_at'],
            list.map((c) => [c.id, c.name, c.enabled ? 'yes' : 'no', c.audiences.join(', '), c.createdAt]),
          ),
        );
    }),
  );
  withJson(client.command('show <client-id>').description('show one client (never its secret)')).action(
    action(async (ctx, json, id: string) => {
      const found = await clients.getClient(ctx, id);
      if (json) printJson(views.clientJson(found));
      else print(clientRecord(found));
    }),
  );
  withJson(
    client
      .command('rotate-secret <client-id>')
      .description('replace the secret; the old one stops working at once'),
  ).action(
    action(async (ctx, json, id: string) => {
      printWithSecret(
        ctx.config,
        json,
        'Secret rotated. The new secret is shown this once',
        await clients.rotateSecret(ctx, id),
      );
    }),
  );
  withJson(
    client
      .command('set-quota <client-id>')
      .description('limit the tokens a client may get (it should cache them); none removes a limit')
      .option('--per-minute <n>', 'tokens a minute, or none', parseQuota)
      .option('--per-day <n>', 'tokens a day, or none', parseQuota),
  ).action(
    action(async (ctx, json, id: string, options: { perMinute?: QuotaOption; perDay?: QuotaOption }) => {
      if (options.perMinute === undefined && options.perDay === undefined) {
        throw new ValidationError('set-quota needs --per-minute, --per-day or both (N or none)');
      }
      const updated = await clients.setQuota(ctx, id, {
        perMinute: quotaValue(options.perMinute),
        perDay: quotaValue(options.perDay),
      });
      if (json) printJson(views.clientJson(updated));
      else print(`Client ${id}: quota ${quotaText(updated) ?? 'none'}.\n`);
    }),
  );
  for (const [name, enabled] of [
    ['disable', false],
    ['enable', true],
  ] as const) {
    withJson(client.command(`${name} <client-id>`).description(`${name} a client`)).action(
      action(async (ctx, json, id: string) => {
        const updated = await clients.setEnabled(ctx, id, enabled);
        if (json) printJson(views.clientJson(updated));
        else print(`Client ${id} ${enabled ? 'enabled' : 'disabled'}.\n`);
      }),
    );
  }
  withJson(client.command('delete <client-id>').description('delete a client and its grants')).action(
    action(async (ctx, json, id: string) => {
      await clients.deleteClient(ctx, id);
      if (json) printJson({ client_id: id, deleted: true });
      else print(`Client ${id} deleted.\n`);
    }),
  );
}
