import { TesseraError } from './errors.js';
import { isSigningAlg, SIGNING_ALGS, type SigningAlg } from './jose.js';
import { MAX_JSON_DEPTH, tooDeepAt } from './json-depth.js';

/** Rules for what operators register, shared by the CLI and the store so both refuse the same input. */
export class ValidationError extends TesseraError {
  override name = 'ValidationError';

  /** The management error it is answered as, whatever the face (management/errors.ts). */
  override get code(): string {
    return 'invalid_field';
  }
}

export const MIN_TOKEN_TTL = 60;
export const MAX_TOKEN_TTL = 86_400;

/**
 * An audience is an absolute http(s) URL without a fragment (RFC 8707 §2). It is kept exactly as
 * written and matched exactly, as Auth0 and Hydra do: `https://api.example.com` and
 * `https://api.example.com/` are two different audiences.
 */
export function validateAudienceUrl(raw: string): string {
  if (raw.length > 2048) throw new ValidationError('audience URL is longer than 2048 characters');
  // eslint-disable-next-line no-control-regex -- control characters are exactly what is refused here
  if (raw !== raw.trim() || /[\s\u0000-\u001f\u007f]/.test(raw)) {
    throw new ValidationError('audience URL must not contain spaces or control characters');
  }
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ValidationError(`audience must be an absolute URL, got "${raw}"`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new ValidationError('audience must be an http or https URL');
  }
  if (raw.includes('#')) throw new ValidationError('audience URL must not have a fragment (RFC 8707 §2)');
  if (url.username || url.password) throw new ValidationError('audience URL must not carry credentials');
  return raw;
}

export function validateTokenTtl(value: number): number {
  if (!Number.isInteger(value) || value < MIN_TOKEN_TTL || value > MAX_TOKEN_TTL) {
    throw new ValidationError(
      `token lifetime must be a whole number of seconds from ${MIN_TOKEN_TTL} to ${MAX_TOKEN_TTL}`,
    );
  }
  return value;
}

export function validateSigningAlg(value: string): SigningAlg {
  if (!isSigningAlg(value))
    throw new ValidationError(`signing algorithm must be one of ${SIGNING_ALGS.join(', ')}`);
  return value;
}

/** Control characters (Unicode's Cc: C0, DEL and C1), as names and descriptions refuse them (docs/management.md). */
// eslint-disable-next-line no-control-regex -- control characters are exactly what is looked for
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
/** The same, but the line breaks and tabs that a free text may have. */
// eslint-disable-next-line no-control-regex -- control characters are exactly what is looked for
const CONTROL_BUT_LINES = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/;
/**
 * The bidirectional embeddings and overrides (U+202A–U+202E) and isolates (U+2066–U+2069) of Unicode's
 * bidirectional algorithm (UAX #9 §2.1–2.4): they make text show in another order than it is written (a name
 * with U+202E shows reversed in the console and in a terminal), so docs/management.md refuses them in names and
 * descriptions, as it does control characters.
 */
const BIDI_CONTROL = /[\u202a-\u202e\u2066-\u2069]/;
const NO_BIDI = 'must not contain bidirectional overrides (U+202A to U+202E, U+2066 to U+2069)';

export function validateName(value: string, what: string): string {
  const name = value.trim();
  if (name.length === 0) throw new ValidationError(`${what} name must not be empty`);
  if (name.length > 200) throw new ValidationError(`${what} name is longer than 200 characters`);
  if (CONTROL.test(name)) throw new ValidationError(`${what} name must not contain control characters`);
  if (BIDI_CONTROL.test(name)) throw new ValidationError(`${what} name ${NO_BIDI}`);
  return name;
}

/**
 * A free-text description: at most 1000 characters, no control characters but line breaks and tabs, no
 * bidirectional override.
 */
export function validateDescription(value: string): string {
  if (value.length > 1000) throw new ValidationError('description is longer than 1000 characters');
  if (CONTROL_BUT_LINES.test(value))
    throw new ValidationError('description must not contain control characters');
  if (BIDI_CONTROL.test(value)) throw new ValidationError(`description ${NO_BIDI}`);
  return value;
}

const CLIENT_ID = /^[A-Za-z0-9._~-]{3,128}$/;

/** Whether a string could be a client id at all; anything else is known not to exist without asking the store. */
export function isPossibleClientId(value: string): boolean {
  return CLIENT_ID.test(value);
}

/** Client ids are chosen by Tessera, or by the operator within these characters (all URL- and Basic-safe). */
export function validateClientId(value: string): string {
  if (!CLIENT_ID.test(value)) {
    throw new ValidationError('client id must be 3 to 128 characters of A-Z a-z 0-9 . _ ~ -');
  }
  return value;
}

/** An email as operators are known by it: trimmed and lower-cased (the store keeps it so; logins look it up so). */
export const emailKey = (value: string): string => value.trim().toLowerCase();

/** An operator's email: trimmed and lower-cased (it is how they log in), at most 254 characters (RFC 5321). */
export function validateEmail(value: string): string {
  const email = emailKey(value);
  if (email.length > 254) throw new ValidationError('email is longer than 254 characters');
  // One @, something on both sides, no spaces or control characters: the address is only ever shown and typed.
  // eslint-disable-next-line no-control-regex -- control characters are exactly what is refused here
  if (!/^[^\s@\u0000-\u001f\u007f]+@[^\s@\u0000-\u001f\u007f]+$/.test(email))
    throw new ValidationError('email must be an address such as ops@example.com');
  return email;
}

export const OPERATOR_ROLES = ['admin', 'viewer'] as const;

export function validateRole(value: string): (typeof OPERATOR_ROLES)[number] {
  if (!(OPERATOR_ROLES as readonly string[]).includes(value))
    throw new ValidationError(`role must be one of ${OPERATOR_ROLES.join(', ')}`);
  return value as (typeof OPERATOR_ROLES)[number];
}

/**
 * A string of its own, for input kept beyond its request (caches, limit counters, queued audit events).
 * V8 makes a slice of 13 characters or more a view into its whole parent: URLSearchParams hands out values
 * as slices of the whole body, and `slice(0, 256)` of a long value is a view of all of it. The concatenation
 * is flattened into a new string one character longer than the value, which the result then points into.
 */
export const ownString = (value: string): string => (' ' + value).slice(1);

const MAX_QUOTA = 1_000_000_000;

/**
 * A client's quota (tokens a minute or a day): a whole number from 1, or null for no limit. 0 is refused
 * rather than stored: "no tokens at all" is what disabling a client is for (a 401 that says so, not a 429
 * telling the client to reuse a token it cannot have), and to many operators 0 means "unlimited".
 */
export function validateQuota(value: number | null): number | null {
  if (value === null) return null;
  if (value === 0) {
    throw new ValidationError(
      'a quota of 0 would refuse every token: use none to remove the limit, or disable the client (`tessera client disable`) to stop it',
    );
  }
  if (!Number.isSafeInteger(value) || value < 1 || value > MAX_QUOTA) {
    throw new ValidationError(`a quota must be a whole number from 1 to ${MAX_QUOTA}, or none`);
  }
  return value;
}

/** A duration as people write it: whole seconds (`3600`), or a number and a unit (`90s`, `15m`, `24h`, `7d`). */
export function parseDuration(value: string): number {
  const match = /^([0-9]{1,9})([smhd]?)$/.exec(value.trim());
  if (!match)
    throw new ValidationError(`"${value}" is not a duration: seconds, or a number and s, m, h or d`);
  return Number(match[1]) * UNIT_SECONDS[(match[2] || 's') as keyof typeof UNIT_SECONDS];
}

/** Seconds per unit of a duration. */
const UNIT_SECONDS = { s: 1, m: 60, h: 3600, d: 86_400 } as const;

/** RFC 6749 §3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E ). */
export const SCOPE_TOKEN = /^[\x21\x23-\x5b\x5d-\x7e]+$/;
const MAX_SCOPE_LENGTH = 128;
const MAX_AUDIENCE_SCOPES = 200;

/** A scope an audience defines: a scope-token (RFC 6749 §3.3) of at most 128 characters. */
export function validateScopeName(name: string): string {
  if (name.length > MAX_SCOPE_LENGTH)
    throw new ValidationError(
      `scope ${JSON.stringify(name.slice(0, 40))}… is longer than ${MAX_SCOPE_LENGTH} characters`,
    );
  if (!SCOPE_TOKEN.test(name))
    throw new ValidationError(
      `scope ${JSON.stringify(name)} is not a scope token (RFC 6749 §3.3: printable ASCII but space, " and \\)`,
    );
  return name;
}

/**
 * An audience's scopes: each name a scope token, each once, at most 200; descriptions at most 500 characters.
 * Returned sorted by name, as they are stored and shown.
 */
export function validateAudienceScopes(
  scopes: readonly { name: string; description?: string | null }[],
): { name: string; description: string | null }[] {
  if (scopes.length > MAX_AUDIENCE_SCOPES)
    throw new ValidationError(`an audience has at most ${MAX_AUDIENCE_SCOPES} scopes`);
  const seen = new Set<string>();
  const checked = scopes.map(({ name, description }) => {
    validateScopeName(name);
    if (seen.has(name)) throw new ValidationError(`scope ${name} is listed twice`);
    seen.add(name);
    if (description != null) {
      if (description.length > 500)
        throw new ValidationError(`the description of scope ${name} is longer than 500 characters`);
      if (CONTROL.test(description))
        throw new ValidationError(`the description of scope ${name} must not contain control characters`);
      if (BIDI_CONTROL.test(description))
        throw new ValidationError(`the description of scope ${name} ${NO_BIDI}`);
    }
    return { name, description: description ?? null };
  });
  return checked.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** Claim names a client or grant may not set: registered and protocol claims (docs/interface.md). */
export const RESERVED_CLAIMS = [
  'iss',
  'sub',
  'aud',
  'exp',
  'nbf',
  'iat',
  'jti',
  'client_id',
  'scope',
  'cnf',
  'act',
  'may_act',
  'azp',
  'auth_time',
  'acr',
  'amr',
  'typ',
] as const;
const RESERVED = new Set<string>(RESERVED_CLAIMS);
const MAX_CLAIMS_BYTES = 4096;

/**
 * A document that a request body holds as one of its fields (custom claims, a JWK Set) nests at most one level
 * less than the body (docs/management.md: 32 levels, the body being level 1), whichever face it came through: the
 * CLI's `--claims` and `--jwks` reach the rules without a body around them. Checked before JSON.stringify,
 * which recurses once per level and overflows the stack some 4,000 levels down.
 */
export function checkNesting(value: unknown, what: string): void {
  const pointer = tooDeepAt(value, MAX_JSON_DEPTH - 1);
  if (pointer !== undefined)
    throw new ValidationError(
      `${what} must nest at most ${MAX_JSON_DEPTH - 1} levels (a request body, ${MAX_JSON_DEPTH}); ${pointer} is deeper`,
    );
}

/**
 * Custom claims: a JSON object of at most 4 KiB serialized, nested at most 31 levels, none of whose names is reserved or starts with
 * `tessera`. Returned as given (an empty object is no claims: null).
 */
export function validateClaims(value: unknown): Record<string, unknown> | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new ValidationError('claims must be a JSON object');
  for (const name of Object.keys(value)) {
    if (name === '') throw new ValidationError('a claim name must not be empty');
    // A verifier that merges claims into objects must not meet a prototype-setting name.
    if (name === '__proto__') throw new ValidationError('claim __proto__ is not allowed');
    if (RESERVED.has(name))
      throw new ValidationError(`claim ${name} is registered: Tessera sets it, it cannot be a custom claim`);
    if (name.toLowerCase().startsWith('tessera'))
      throw new ValidationError(`claim ${name}: names starting with "tessera" are reserved`);
  }
  checkNesting(value, 'claims');
  const bytes = Buffer.byteLength(JSON.stringify(value));
  if (bytes > MAX_CLAIMS_BYTES)
    throw new ValidationError(`claims are ${bytes} bytes as JSON; at most ${MAX_CLAIMS_BYTES}`);
  return Object.keys(value).length === 0 ? null : (value as Record<string, unknown>);
}
