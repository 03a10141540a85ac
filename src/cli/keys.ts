import { Option, type Command } from 'commander';
import { SIGNING_ALGS, type SigningAlg } from '../domain/jose.js';
import { keys, views } from '../management/index.js';
import type { KeyView } from '../management/keys.js';
import { action, withJson } from './common.js';
import { formatTable, print, printJson } from './output.js';

function printKeys(list: KeyView[], json: boolean): void {
  if (json) printJson(list.map(views.keyJson));
  else
    print(
      formatTable(
        ['kid', 'alg', 'status', 'created_at', 'activates_at', 'retires_at'],
        list.map(({ key, status }) => [
          key.kid,
          key.alg,
          status,
          key.createdAt,
          key.activatesAt,
          key.retiredAt,
        ]),
      ),
    );
}

/** A warning about the master key (a generated one, say): on stderr, never inside a JSON document. */
const warner = (json: boolean) => (message: string) => {
  if (!json) process.stderr.write(`tessera: ${message}\n`);
};

/** `tessera keys list|rotate|retire`. */
export function keyCommands(program: Command): void {
  const group = program.command('keys').description('signing keys: list, rotate, retire');
  withJson(
    group.command('list').description('list signing keys (public parts only) and their status'),
  ).action(action(async (ctx, json) => printKeys(await keys.listKeys(ctx), json)));
  withJson(
    group
      .command('rotate')
      .description(
        'publish a new key now; it signs after TESSERA_KEY_PUBLISH_AHEAD, when the current one retires',
      )
      .addOption(
        new Option('--alg <alg>', 'only this algorithm (default: every algorithm)').choices(SIGNING_ALGS),
      ),
  ).action(
    action(async (ctx, json, options: { alg?: SigningAlg }) => {
      const results = await keys.rotateKeys(ctx, { alg: options.alg, warn: warner(json) });
      if (json) printJson(results.map(views.rotationJson));
      else
        for (const r of results)
          print(
            r.alreadyScheduled
              ? `${r.alg}: a next key is already scheduled (${r.kid}, signs from ${r.activatesAt}).\n`
              : `${r.alg}: new key ${r.kid} published; it signs from ${r.activatesAt}` +
                  (r.retiring.length ? `, when ${r.retiring.join(', ')} retires.\n` : '.\n'),
          );
    }),
  );
  withJson(
    group
      .command('retire <kid>')
      .description('stop signing with a key now (it stays published until its tokens expire)'),
  ).action(
    action(async (ctx, json, kid: string) => {
      const retirement = await keys.retireKey(ctx, kid, { warn: warner(json) });
      if (json) printJson(views.retirementJson(retirement));
      else
        print(
          `Key ${kid} retired; ${retirement.retired.alg} tokens are now signed by ${retirement.signing ?? 'the next server-generated key'}.\n`,
        );
    }),
  );
}
