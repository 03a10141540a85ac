import type { Command } from 'commander';
import { parseDuration, ValidationError } from '../domain/validate.js';
import { clients, secrets, views } from '../management/index.js';
import { printWithSecret } from './client-output.js';
import { action, withJson } from './common.js';
import { formatTable, print, printJson } from './output.js';

/** A duration option (`0`, `90s`, `15m`, `24h`, `7d`) in seconds. */
function seconds(value: string | undefined, option: string): number | undefined {
  if (value === undefined) return undefined;
  try {
    return parseDuration(value);
  } catch {
    throw new ValidationError(
      `${option} must be a duration: seconds, or a number and s, m, h or d (e.g. 24h)`,
    );
  }
}

/** `tessera client rotate-secret` and `tessera client secrets list|add|revoke`. */
export function secretCommands(client: Command): void {
  withJson(
    client
      .command('rotate-secret <client-id>')
      .description('a new secret; the others stop working at once, or after --grace')
      .option('--grace <duration>', 'how long the other secrets keep working (e.g. 24h; default 0: none)'),
  ).action(
    action(async (ctx, json, id: string, options: { grace?: string }) => {
      const graceSeconds = seconds(options.grace, '--grace') ?? 0;
      const rotated = await clients.rotateSecret(ctx, id, { graceSeconds });
      const until = rotated.client.secrets.find((s) => s.id !== rotated.secretId)?.expiresAt;
      const heading = `Secret rotated${
        until ? `; the others work until ${until}` : ''
      }. The new secret is shown this once`;
      printWithSecret(ctx.config, json, heading, rotated);
    }),
  );

  const list = client
    .command('secrets')
    .alias('secret')
    .description("a client's secrets (never their values)");
  withJson(list.command('list <client-id>').description('the secrets of a client, oldest first')).action(
    action(async (ctx, json, id: string) => {
      const found = await secrets.listSecrets(ctx, id);
      if (json) printJson(found.map(views.secretJson));
      else
        print(
          formatTable(
            ['id', 'created_at', 'expires_at', 'last_used_at'],
            found.map((s) => [s.id, s.createdAt, s.expiresAt, s.lastUsedAt]),
          ),
        );
    }),
  );
  withJson(
    list
      .command('add <client-id>')
      .description('one more secret (at most 5 live); the others keep working')
      .option('--expires <duration>', 'it expires after this long (e.g. 90d); default: never'),
  ).action(
    action(async (ctx, json, id: string, options: { expires?: string }) => {
      const added = await secrets.addSecret(ctx, id, {
        expiresInSeconds: seconds(options.expires, '--expires'),
      });
      if (json) printJson({ ...views.secretJson(added.secret), client_id: id, client_secret: added.value });
      else
        print(
          `Secret ${added.secret.id} added to ${id}; it is shown this once: store it now.\n\n` +
            `  client_secret  ${added.value}\n  expires_at     ${added.secret.expiresAt ?? 'never'}\n`,
        );
    }),
  );
  withJson(
    list.command('revoke <client-id> <secret-id>').description('a secret stops working at once'),
  ).action(
    action(async (ctx, json, id: string, secretId: string) => {
      await secrets.revokeSecret(ctx, id, secretId);
      if (json) printJson({ client_id: id, secret_id: secretId, revoked: true });
      else print(`Secret ${secretId} of ${id} revoked.\n`);
    }),
  );
}
