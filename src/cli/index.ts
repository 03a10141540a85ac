import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { ConfigError, loadConfig, parseDuration, type Config } from '../config/index.js';
import { SIGNING_ALGS, type SigningAlg } from '../domain/algorithms.js';
import { digestSecret, generateClientId, generateSecret } from '../domain/secrets.js';
import {
  validateAudienceUrl,
  validateClientId,
  validateName,
  validateSigningAlg,
  validateTokenTtl,
  ValidationError,
  MAX_TOKEN_TTL,
} from '../domain/validate.js';
import { keyState, mayStillSign, selectKeys, type KeySelection } from '../keys/lifecycle.js';
import { resolveMasterKey, type MasterKey } from '../keys/master-key.js';
import { generateSigningKey, pendingKey, planRetire, planRotation } from '../keys/rotation.js';
import { assertSameMasterKey, MasterKeyMismatchError } from '../keys/sealed.js';
import { runCluster } from '../cluster.js';
import { runServer } from '../main.js';
import { openStore } from '../runtime.js';
import {
  AUDIT_EVENT_TYPES,
  StoreError,
  type Audience,
  type AuditCursor,
  type AuditEvent,
  type AuditEventType,
  type AuditFilter,
  type Client,
  type SigningKey,
  type Store,
} from '../store/types.js';
import { formatRecord, formatTable, print, printJson } from './output.js';

/** Exit codes: 0 done, 1 the operation failed (not found, already exists, store error), 2 bad arguments. */
const EXIT_FAILED = 1;
const EXIT_USAGE = 2;

interface JsonFlag {
  json?: boolean;
}

// --- how records are shown ---

const audienceJson = (a: Audience) => ({
  url: a.url,
  name: a.name,
  token_ttl: a.tokenTtl,
  signing_alg: a.signingAlg,
  created_at: a.createdAt,
  updated_at: a.updatedAt,
});

const clientJson = (c: Client) => ({
  client_id: c.id,
  name: c.name,
  enabled: c.enabled,
  token_ttl: c.tokenTtl,
  quota_per_minute: c.quotaPerMinute,
  quota_per_day: c.quotaPerDay,
  audiences: c.audiences,
  created_at: c.createdAt,
  updated_at: c.updatedAt,
  secret_rotated_at: c.secretRotatedAt,
});

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

/** An audit event as every face shows it (MANAGEMENT.md's field names). */
const auditEventJson = (e: AuditEvent) => ({
  id: e.id,
  time: e.at,
  type: e.type,
  client_id: e.clientId,
  audience: e.audience,
  jti: e.jti,
  source: e.source,
  reason: e.reason,
  count: e.count,
});

/** Most events `tessera audit` prints as a table or one JSON document (ndjson streams any number). */
const MAX_DOCUMENT_EVENTS = 100_000;

/** Events per query of a streamed export: the export pages through the store with a keyset cursor. */
const EXPORT_PAGE = 1000;

/**
 * Every matching event, one JSON document per line, newest first, paged from the store so that a day of a
 * busy trail streams in constant memory; waits for stdout to drain (a slow pipe, `| gzip`) between pages.
 */
async function streamAuditEvents(
  store: Store,
  filter: Omit<AuditFilter, 'limit' | 'after'>,
  limit: number,
): Promise<void> {
  if (filter.types?.length === 0) return;
  let after: AuditCursor | undefined;
  let left = limit;
  while (left > 0) {
    const page = await store.queryAuditEvents({ ...filter, after, limit: Math.min(EXPORT_PAGE, left) });
    if (page.length === 0) break;
    const text = page.map((e) => JSON.stringify(auditEventJson(e)) + '\n').join('');
    if (!process.stdout.write(text)) await new Promise((resolve) => process.stdout.once('drain', resolve));
    left -= page.length;
    const last = page[page.length - 1]!;
    after = { at: last.at, id: last.id };
    if (page.length < EXPORT_PAGE) break;
  }
}

// --- argument parsers ---

function wrap<T>(parse: (value: string) => T): (value: string) => T {
  return (value) => {
    try {
      return parse(value);
    } catch (error) {
      throw new InvalidArgumentError((error as Error).message);
    }
  };
}

const parseTtl = wrap((value: string) => {
  if (!/^\d+$/.test(value)) throw new ValidationError('token lifetime must be a whole number of seconds');
  return validateTokenTtl(Number(value));
});
const parseUrl = wrap(validateAudienceUrl);
const parseName = wrap((value: string) => validateName(value, 'the'));
const parseClientId = wrap(validateClientId);
const parseWorkers = wrap((value: string) => {
  if (!/^\d+$/.test(value) || Number(value) < 1 || Number(value) > 256) {
    throw new ValidationError('workers must be a whole number from 1 to 256');
  }
  return Number(value);
});
/** An ISO 8601 time, or a duration before now (`15m`, `12h`, `7d`). */
const parseTime = wrap((value: string) => {
  const ago = parseDuration(value);
  if (ago !== undefined) return new Date(Date.now() - ago * 1000).toISOString();
  const at = Date.parse(value);
  if (!/^\d{4}-\d{2}-\d{2}/.test(value) || Number.isNaN(at)) {
    throw new ValidationError(
      'a time must be ISO 8601 (2026-01-31T12:00:00Z) or a duration ago (15m, 12h, 7d)',
    );
  }
  return new Date(at).toISOString();
});
const parseLimit = wrap((value: string) => {
  if (!/^\d+$/.test(value) || Number(value) < 1 || !Number.isSafeInteger(Number(value))) {
    throw new ValidationError('limit must be a whole number from 1 up');
  }
  return Number(value);
});
/** A quota option as parsed: a whole number of tokens, or `none` (no limit). */
type QuotaOption = number | 'none';
const MAX_QUOTA = 1_000_000_000;
/**
 * The parser cannot return null for `none`: commander stores a parser's null or undefined as '' for an
 * option that takes a value (commander 15, lib/command.js, "Fill-in appropriate missing values"), and ''
 * reached the store, where SQLite kept it and it read back as 0 (a client refused every token) and
 * PostgreSQL refused it. So `none` stays a word until quotaLimit() makes it null.
 */
const parseQuota = wrap((value: string): QuotaOption => {
  if (value === 'none') return 'none';
  // 0 is refused rather than read: "no tokens at all" is what `client disable` is for (a 401 that says
  // so, not a 429 telling the client to reuse a token it cannot have), and to many operators 0 means
  // "unlimited", which is what none is for.
  if (/^0+$/.test(value)) {
    throw new ValidationError(
      'a quota of 0 would refuse every token: use none to remove the limit, or `tessera client disable` to stop the client',
    );
  }
  if (!/^\d+$/.test(value) || Number(value) > MAX_QUOTA) {
    throw new ValidationError(`a quota must be a whole number from 1 to ${MAX_QUOTA}, or none`);
  }
  return Number(value);
});
/** The limit an option sets: a number, null for `none` (no limit), or `current` when it was left out. */
const quotaLimit = (option: QuotaOption | undefined, current: number | null): number | null =>
  option === undefined ? current : option === 'none' ? null : option;
const collect = (value: string, previous: string[] = []): string[] => [...previous, parseUrl(value)];

// --- the program ---

/** Runs an action against the store, printing a JSON document or text, and maps failures to exit codes. */
function action<A extends unknown[]>(
  run: (store: Store, config: Config, json: boolean, ...args: A) => Promise<void>,
): (...args: [...A, Command]) => Promise<void> {
  return async (...args) => {
    // Commander passes the positional arguments, then the options, then the command itself.
    const command = args[args.length - 1] as Command;
    const json = Boolean(command.optsWithGlobals<JsonFlag>().json);
    const config = loadConfig();
    const store = await openStore(config);
    try {
      await run(store, config, json, ...(args.slice(0, -1) as A));
    } finally {
      await store.close();
    }
  };
}

export function buildProgram(): Command {
  const program = new Command('tessera')
    .description('Tessera: OAuth 2.0 client-credentials token server')
    .option('--json', 'print one JSON document instead of text')
    .showHelpAfterError()
    .exitOverride();

  const withJson = (c: Command): Command => c.option('--json', 'print one JSON document instead of text');

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
      if (config.workers > 1) await runCluster(config, config.workers);
      else await runServer(config);
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

  // --- audiences ---
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
    action(
      async (store, _config, json, url: string, options: { name?: string; ttl?: number; alg?: string }) => {
        const added = await store.addAudience({
          url: validateAudienceUrl(url),
          name: options.name ?? null,
          tokenTtl: options.ttl ?? null,
          signingAlg: options.alg === undefined ? null : validateSigningAlg(options.alg),
        });
        if (json) printJson(audienceJson(added));
        else print(`Audience ${added.url} registered.\n`);
      },
    ),
  );
  withJson(audience.command('list').description('list audiences')).action(
    action(async (store, _config, json) => {
      const list = await store.listAudiences();
      if (json) printJson(list.map(audienceJson));
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
    action(async (store, _config, json, url: string) => {
      await store.removeAudience(url);
      if (json) printJson({ url, removed: true });
      else print(`Audience ${url} removed, with its grants.\n`);
    }),
  );

  // --- clients ---
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
    action(
      async (
        store,
        config,
        json,
        options: {
          name: string;
          grant?: string[];
          id?: string;
          ttl?: number;
          quotaMinute?: QuotaOption;
          quotaDay?: QuotaOption;
        },
      ) => {
        const secret = generateSecret();
        const created = await store.createClient({
          id: options.id ?? generateClientId(),
          name: options.name,
          secretDigest: digestSecret(secret),
          tokenTtl: options.ttl ?? null,
          quotaPerMinute: quotaLimit(options.quotaMinute, null),
          quotaPerDay: quotaLimit(options.quotaDay, null),
          audiences: options.grant ?? [],
        });
        if (json) printJson({ ...clientJson(created), client_secret: secret });
        else {
          print('Client created. The secret is shown this once: store it now.\n\n');
          print(clientRecord(created, secret));
          print(curlHint(config, created, secret));
        }
      },
    ),
  );
  withJson(client.command('list').description('list clients')).action(
    action(async (store, _config, json) => {
      const list = await store.listClients();
      if (json) printJson(list.map(clientJson));
      else
        print(
          formatTable(
            ['client_id', 'name', 'enabled', 'audiences', 'created_at'],
            list.map((c) => [c.id, c.name, c.enabled ? 'yes' : 'no', c.audiences.join(', '), c.createdAt]),
          ),
        );
    }),
  );

  const requireClient = async (store: Store, id: string): Promise<Client> => {
    const found = await store.findClient(id);
    if (!found) throw new StoreError('not_found', `client ${id} does not exist`);
    return found;
  };

  withJson(client.command('show <client-id>').description('show one client (never its secret)')).action(
    action(async (store, _config, json, id: string) => {
      const found = await requireClient(store, id);
      if (json) printJson(clientJson(found));
      else print(clientRecord(found));
    }),
  );
  withJson(
    client
      .command('rotate-secret <client-id>')
      .description('replace the secret; the old one stops working at once'),
  ).action(
    action(async (store, config, json, id: string) => {
      const secret = generateSecret();
      const updated = await store.setClientSecret(id, digestSecret(secret));
      if (json) printJson({ ...clientJson(updated), client_secret: secret });
      else {
        print('Secret rotated. The new secret is shown this once: store it now.\n\n');
        print(clientRecord(updated, secret));
        print(curlHint(config, updated, secret));
      }
    }),
  );
  withJson(
    client
      .command('set-quota <client-id>')
      .description('limit the tokens a client may get (it should cache them); none removes a limit')
      .option('--per-minute <n>', 'tokens a minute, or none', parseQuota)
      .option('--per-day <n>', 'tokens a day, or none', parseQuota),
  ).action(
    action(
      async (
        store,
        _config,
        json,
        id: string,
        options: { perMinute?: QuotaOption; perDay?: QuotaOption },
      ) => {
        if (options.perMinute === undefined && options.perDay === undefined) {
          throw new ValidationError('set-quota needs --per-minute, --per-day or both (N or none)');
        }
        const current = await requireClient(store, id);
        const updated = await store.setClientQuota(id, {
          perMinute: quotaLimit(options.perMinute, current.quotaPerMinute),
          perDay: quotaLimit(options.perDay, current.quotaPerDay),
        });
        if (json) printJson(clientJson(updated));
        else print(`Client ${id}: quota ${quotaText(updated) ?? 'none'}.\n`);
      },
    ),
  );
  for (const [name, enabled] of [
    ['disable', false],
    ['enable', true],
  ] as const) {
    withJson(client.command(`${name} <client-id>`).description(`${name} a client`)).action(
      action(async (store, _config, json, id: string) => {
        const updated = await store.setClientEnabled(id, enabled);
        if (json) printJson(clientJson(updated));
        else print(`Client ${id} ${enabled ? 'enabled' : 'disabled'}.\n`);
      }),
    );
  }
  withJson(client.command('delete <client-id>').description('delete a client and its grants')).action(
    action(async (store, _config, json, id: string) => {
      await store.deleteClient(id);
      if (json) printJson({ client_id: id, deleted: true });
      else print(`Client ${id} deleted.\n`);
    }),
  );

  // --- grants ---
  const grant = program
    .command('grant')
    .alias('grants')
    .description('which client may get tokens for which audience');
  withJson(grant.command('add <client-id> <audience>').description('allow a client an audience')).action(
    action(async (store, _config, json, id: string, url: string) => {
      const added = await store.addGrant(id, url);
      if (json) printJson({ client_id: id, audience: url, added });
      else
        print(added ? `Client ${id} may now get tokens for ${url}.\n` : `Client ${id} already had ${url}.\n`);
    }),
  );
  withJson(
    grant.command('remove <client-id> <audience>').description('withdraw an audience from a client'),
  ).action(
    action(async (store, _config, json, id: string, url: string) => {
      await store.removeGrant(id, url);
      if (json) printJson({ client_id: id, audience: url, removed: true });
      else print(`Client ${id} may no longer get tokens for ${url}.\n`);
    }),
  );

  // --- keys ---
  const keys = program.command('keys').description('signing keys: list, rotate, retire');
  const keyJson = (k: SigningKey, selection: KeySelection, now: number) => ({
    kid: k.kid,
    alg: k.alg,
    status: keyState(k, selection, now),
    created_at: k.createdAt,
    activates_at: k.activatesAt,
    retired_at: k.retiredAt,
  });
  const printKeys = (list: SigningKey[], json: boolean): void => {
    const now = Date.now();
    const selection = selectKeys(list, now, MAX_TOKEN_TTL * 1000);
    if (json) printJson(list.map((k) => keyJson(k, selection, now)));
    else
      print(
        formatTable(
          ['kid', 'alg', 'status', 'created_at', 'activates_at', 'retired_at'],
          list.map((k) => [
            k.kid,
            k.alg,
            keyState(k, selection, now),
            k.createdAt,
            k.activatesAt,
            k.retiredAt,
          ]),
        ),
      );
  };
  /** The master key the servers use: the one every stored key that may still sign is sealed under. */
  const masterKey = async (store: Store, config: Config, json: boolean): Promise<MasterKey> => {
    const master = resolveMasterKey(config, (message) => {
      if (!json) process.stderr.write(`tessera: ${message}\n`);
    });
    const now = Date.now();
    assertSameMasterKey(
      (await store.listSigningKeys()).filter((k) => mayStillSign(k, now)),
      master,
    );
    return master;
  };

  withJson(keys.command('list').description('list signing keys (public parts only) and their status')).action(
    action(async (store, _config, json) => printKeys(await store.listSigningKeys(), json)),
  );
  withJson(
    keys
      .command('rotate')
      .description(
        'publish a new key now; it signs after TESSERA_KEY_PUBLISH_AHEAD, when the current one retires',
      )
      .addOption(
        new Option('--alg <alg>', 'only this algorithm (default: every algorithm)').choices(SIGNING_ALGS),
      ),
  ).action(
    action(async (store, config, json, options: { alg?: SigningAlg }) => {
      const master = await masterKey(store, config, json);
      const results = [];
      for (const alg of options.alg ? [options.alg] : SIGNING_ALGS) {
        const now = Date.now();
        const next = await generateSigningKey(alg, master, now, now + config.keyPublishAhead * 1000);
        const written = await store.changeSigningKeys(planRotation(next, now));
        const scheduled = written ? next : pendingKey(await store.listSigningKeys(), alg, now);
        results.push({
          alg,
          kid: scheduled?.kid ?? null,
          activates_at: scheduled?.activatesAt ?? null,
          already_scheduled: !written,
          retiring: written?.update?.map((u) => u.kid) ?? [],
        });
      }
      if (json) printJson(results);
      else
        for (const r of results)
          print(
            r.already_scheduled
              ? `${r.alg}: a next key is already scheduled (${r.kid}, signs from ${r.activates_at}).\n`
              : `${r.alg}: new key ${r.kid} published; it signs from ${r.activates_at}` +
                  (r.retiring.length ? `, when ${r.retiring.join(', ')} retires.\n` : '.\n'),
          );
    }),
  );
  withJson(
    keys
      .command('retire <kid>')
      .description('stop signing with a key now (it stays published until its tokens expire)'),
  ).action(
    action(async (store, config, json, kid: string) => {
      const list = await store.listSigningKeys();
      const key = list.find((k) => k.kid === kid);
      if (!key) throw new StoreError('not_found', `signing key ${kid} does not exist`);
      const now = Date.now();
      const replacement = await generateSigningKey(key.alg, await masterKey(store, config, json), now, now);
      await store.changeSigningKeys(planRetire(kid, replacement, now, MAX_TOKEN_TTL * 1000));
      const after = await store.listSigningKeys();
      if (json)
        printKeys(
          after.filter((k) => k.alg === key.alg),
          true,
        );
      else {
        const signing = selectKeys(after, Date.now(), MAX_TOKEN_TTL * 1000).active.get(key.alg);
        print(
          `Key ${kid} retired; ${key.alg} tokens are now signed by ${signing?.kid ?? 'the next server-generated key'}.\n`,
        );
      }
    }),
  );

  // --- audit ---
  withJson(
    program
      .command('audit')
      .description('the audit trail (issued tokens, refused and throttled requests), newest first')
      .option('--client <client-id>', 'only this client')
      .option('--audience <url>', 'only this audience')
      .addOption(
        new Option('--type <type>', 'only this type of event (repeatable)')
          .choices(AUDIT_EVENT_TYPES)
          .argParser((value: string, previous: AuditEventType[] | undefined) => [
            ...(previous ?? []),
            value as AuditEventType,
          ]),
      )
      .addOption(
        new Option(
          '--outcome <outcome>',
          'issued (token.issued) or refused (token.refused, token.throttled)',
        ).choices(['issued', 'refused']),
      )
      .option('--since <time>', 'from this time: ISO 8601, or a duration ago such as 15m, 12h, 7d', parseTime)
      .option('--until <time>', 'before this time: ISO 8601, or a duration ago', parseTime)
      .option(
        '--limit <n>',
        'at most this many events (default 100; no limit with --format ndjson)',
        parseLimit,
      )
      .addOption(
        new Option(
          '--format <format>',
          'table, json (one document, as --json) or ndjson (one event per line, streamed: any number of events)',
        ).choices(['table', 'json', 'ndjson']),
      ),
  ).action(
    action(
      async (
        store,
        _config,
        json,
        options: {
          client?: string;
          audience?: string;
          type?: AuditEventType[];
          outcome?: 'issued' | 'refused';
          since?: string;
          until?: string;
          limit?: number;
          format?: 'table' | 'json' | 'ndjson';
        },
      ) => {
        const format = options.format ?? (json ? 'json' : 'table');
        const outcome: Record<string, AuditEventType[]> = {
          issued: ['token.issued'],
          refused: ['token.refused', 'token.throttled'],
        };
        const byOutcome = options.outcome === undefined ? undefined : outcome[options.outcome]!;
        const types =
          options.type && byOutcome
            ? options.type.filter((t) => byOutcome.includes(t))
            : (options.type ?? byOutcome);
        const filter = {
          clientId: options.client,
          audience: options.audience,
          types,
          since: options.since,
          until: options.until,
        };
        if (format === 'ndjson') {
          await streamAuditEvents(store, filter, options.limit ?? Infinity);
          return;
        }
        // A document is built in memory: bounded. The ndjson stream is not.
        if ((options.limit ?? 0) > MAX_DOCUMENT_EVENTS)
          throw new ValidationError(
            `limit is at most ${MAX_DOCUMENT_EVENTS} with table or json output; --format ndjson streams any number`,
          );
        const events =
          types?.length === 0 ? [] : await store.queryAuditEvents({ ...filter, limit: options.limit ?? 100 });
        if (format === 'json') printJson(events.map(auditEventJson));
        else
          print(
            formatTable(
              ['time', 'type', 'client_id', 'audience', 'jti', 'reason', 'source', 'count'],
              events.map((e) => [e.at, e.type, e.clientId, e.audience, e.jti, e.reason, e.source, e.count]),
            ),
          );
      },
    ),
  );

  return program;
}

function fail(json: boolean, code: string, message: string, exitCode: number): void {
  if (json) process.stderr.write(JSON.stringify({ error: code, message }) + '\n');
  else process.stderr.write(`tessera: ${message}\n`);
  process.exitCode = exitCode;
}

/** A key id as Tessera makes them: the RFC 7638 thumbprint, 43 base64url characters. */
const KID = /^[A-Za-z0-9_-]{43}$/;

/**
 * A key id is a thumbprint, so one in 64 starts with `-` and commander would take it for an option.
 * For `keys retire`, such an argument moves behind `--` (no option is 43 characters of that alphabet);
 * any other operand that starts with `-`, like a client id, is written after `--` by the user.
 */
export function kidOperands(argv: string[]): string[] {
  const at = argv.indexOf('keys');
  if (at < 0 || argv[at + 1] !== 'retire' || argv.includes('--')) return argv;
  const rest = argv.slice(at + 2);
  const kids = rest.filter((arg) => arg.startsWith('-') && KID.test(arg));
  if (kids.length === 0) return argv;
  return [...argv.slice(0, at + 2), ...rest.filter((arg) => !kids.includes(arg)), '--', ...kids];
}

/** Entry point of the `tessera` command. */
export async function main(args: string[] = process.argv): Promise<void> {
  const argv = kidOperands(args);
  const json = argv.includes('--json');
  const program = buildProgram();
  // Each subcommand copied the output settings when it was made, so configure every one: with --json,
  // commander's own message and help stay off stderr, which holds the one JSON document.
  const quiet = (command: Command): void => {
    command.configureOutput({ writeErr: () => undefined });
    command.commands.forEach(quiet);
  };
  if (json) quiet(program);
  try {
    await program.parseAsync(argv);
  } catch (error) {
    if (error instanceof CommanderError) {
      if (error.exitCode === 0) return; // --help, --version
      // A command group without its subcommand shows help; commander's message is then "(outputHelp)".
      const message = error.code === 'commander.help' ? 'a command is required (see --help)' : error.message;
      if (json) fail(true, 'usage', message.replace(/^error: /, ''), EXIT_USAGE);
      else process.exitCode = EXIT_USAGE; // commander has printed the message and the usage
    } else if (error instanceof ValidationError) {
      fail(json, 'invalid_argument', error.message, EXIT_USAGE);
    } else if (error instanceof ConfigError) {
      fail(json, 'invalid_config', error.message, EXIT_USAGE);
    } else if (error instanceof StoreError) {
      fail(json, error.code, error.message, EXIT_FAILED);
    } else if (error instanceof MasterKeyMismatchError) {
      fail(json, 'master_key_mismatch', error.message, EXIT_FAILED);
    } else {
      fail(json, 'failed', (error as Error).message ?? String(error), EXIT_FAILED);
    }
  }
}
