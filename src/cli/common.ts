import type { Command } from 'commander';
import { InvalidArgumentError } from 'commander';
import { readFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { loadConfig, parseDuration, type Config } from '../config/index.js';
import {
  validateAudienceUrl,
  validateClientId,
  validateName,
  validateQuota,
  validateTokenTtl,
  ValidationError,
} from '../domain/validate.js';
import type { ManagementContext } from '../management/index.js';
import { EVERY_SCOPE } from '../management/context.js';
import { actorOf } from '../store/types.js';
import { openStore } from '../runtime/store.js';
import { systemClock } from '../clock.js';

/** Exit codes: 0 done, 1 the operation failed (not found, already exists, store error), 2 bad arguments. */
export const EXIT_FAILED = 1;
export const EXIT_USAGE = 2;

export interface JsonFlag {
  json?: boolean;
}

export const withJson = (c: Command): Command =>
  c.option('--json', 'print one JSON document instead of text');

/**
 * Runs a command against the management layer (a context on the store of the settings), printing a JSON
 * document or text; failures reach main(), which maps them to exit codes once.
 */
export function action<A extends unknown[]>(
  run: (ctx: ManagementContext, json: boolean, ...args: A) => Promise<void>,
): (...args: [...A, Command]) => Promise<void> {
  return async (...args) => {
    // Commander passes the positional arguments, then the options, then the command itself.
    const command = args[args.length - 1] as Command;
    const json = Boolean(command.optsWithGlobals<JsonFlag>().json);
    const config: Config = loadConfig();
    const store = await openStore(config, { migrate: false });
    try {
      // The local CLI holds every scope: it is how the first admin is made (docs/management.md).
      await run({ store, config, actor: cliActor(), holds: EVERY_SCOPE }, json, ...(args.slice(0, -1) as A));
    } finally {
      await store.close();
    }
  };
}

/** The CLI's changes are audited as `cli:<the OS user>` (docs/management.md). */
function cliActor(): string {
  try {
    return actorOf.cli(userInfo().username);
  } catch {
    // no entry for this uid (a container's arbitrary user)
    return actorOf.cli(`uid-${process.getuid?.() ?? 'unknown'}`);
  }
}

// --- argument parsers: the words of the command line, then the management layer's rules ---

function wrap<T>(parse: (value: string) => T): (value: string) => T {
  return (value) => {
    try {
      return parse(value);
    } catch (error) {
      throw new InvalidArgumentError((error as Error).message);
    }
  };
}

export const parseTtl = wrap((value: string) => {
  if (!/^\d+$/.test(value)) throw new ValidationError('token lifetime must be a whole number of seconds');
  return validateTokenTtl(Number(value));
});
export const parseTtlOrNone = (value: string): number | 'none' =>
  value === 'none' ? 'none' : parseTtl(value);
const parseUrl = wrap(validateAudienceUrl);
export const parseName = wrap((value: string) => validateName(value, 'the'));
export const parseClientId = wrap(validateClientId);
export const parseWorkers = wrap((value: string) => {
  if (!/^\d+$/.test(value) || Number(value) < 1 || Number(value) > 256) {
    throw new ValidationError('workers must be a whole number from 1 to 256');
  }
  return Number(value);
});
/** An ISO 8601 time, or a duration before now (`15m`, `12h`, `7d`). */
export const parseTime = wrap((value: string) => {
  const ago = parseDuration(value);
  if (ago !== undefined) return new Date(systemClock.now() - ago * 1000).toISOString();
  const at = Date.parse(value);
  if (!/^\d{4}-\d{2}-\d{2}/.test(value) || Number.isNaN(at)) {
    throw new ValidationError(
      'a time must be ISO 8601 (2026-01-31T12:00:00Z) or a duration ago (15m, 12h, 7d)',
    );
  }
  return new Date(at).toISOString();
});
export const parseLimit = wrap((value: string) => {
  if (!/^\d+$/.test(value) || Number(value) < 1 || !Number.isSafeInteger(Number(value))) {
    throw new ValidationError('limit must be a whole number from 1 up');
  }
  return Number(value);
});

/** A quota option as parsed: a whole number of tokens, or `none` (no limit). */
export type QuotaOption = number | 'none';
/**
 * The parser cannot return null for `none`: commander stores a parser's null or undefined as '' for an
 * option that takes a value (commander 15, lib/command.js, "Fill-in appropriate missing values"), and ''
 * reached the store, where SQLite kept it and it read back as 0 (a client refused every token) and
 * PostgreSQL refused it. So `none` stays a word until quotaValue() makes it null.
 */
export const parseQuota = wrap((value: string): QuotaOption => {
  if (value === 'none') return 'none';
  // Anything but digits is not a whole number to the rule (Number() would read `1e3` or ` 5`).
  return validateQuota(/^\d+$/.test(value) ? Number(value) : Number.NaN)!;
});
/** The value an option sets: a number, null for `none`, undefined when it was left out. */
export const quotaValue = (option: QuotaOption | undefined): number | null | undefined =>
  option === 'none' ? null : option;
export const collect = (value: string, previous: string[] = []): string[] => [...previous, parseUrl(value)];
/** A repeatable option of free text (commander's accumulator). */
export const collectText = (value: string, previous: string[] = []): string[] => [...previous, value];

/** `--claims '{"tenant_id":"acme"}'`: a JSON object (its rules are the management layer's). */
export const parseClaims = wrap((value: string): Record<string, unknown> => {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    throw new ValidationError('claims must be a JSON object, e.g. \'{"tenant_id":"acme"}\'');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw new ValidationError('claims must be a JSON object, e.g. \'{"tenant_id":"acme"}\'');
  return parsed as Record<string, unknown>;
});

/**
 * `--jwks`: a JWK Set as JSON, or the path of a file holding one (`-`: standard input). Its rules are the
 * management layer's; here it is only read and parsed.
 */
export const parseJwks = wrap((value: string): unknown => {
  let text = value;
  if (!value.trimStart().startsWith('{')) {
    try {
      text = readFileSync(value === '-' ? 0 : value, 'utf8');
    } catch (error) {
      throw new ValidationError(
        `jwks: cannot read ${value}: ${(error as NodeJS.ErrnoException).code ?? 'error'}`,
      );
    }
  }
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new ValidationError('jwks must be a JWK Set as JSON ({"keys":[...]}), or a file holding one');
  }
});

/** `--claim k=v` (repeatable): v as JSON when it is JSON (`plan=3`, `beta=true`), else as text. */
export const collectClaim = (
  value: string,
  previous: Record<string, unknown> = {},
): Record<string, unknown> => {
  const at = value.indexOf('=');
  if (at <= 0) throw new InvalidArgumentError(`a claim is name=value, got "${value}"`);
  const raw = value.slice(at + 1);
  let parsed: unknown = raw;
  try {
    parsed = JSON.parse(raw);
  } catch {
    // text
  }
  return { ...previous, [value.slice(0, at)]: parsed };
};

/** The claims of `--claims` and `--claim` together (the latter win); undefined when neither is given. */
export const claimsOption = (options: {
  claims?: Record<string, unknown>;
  claim?: Record<string, unknown>;
}): Record<string, unknown> | undefined =>
  options.claims === undefined && options.claim === undefined
    ? undefined
    : { ...options.claims, ...options.claim };
