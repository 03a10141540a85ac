import { isSigningAlg, SIGNING_ALGS, type SigningAlg } from './algorithms.js';

/** Rules for what operators register, shared by the CLI and the store so both refuse the same input. */
export class ValidationError extends Error {
  override name = 'ValidationError';
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

export function validateName(value: string, what: string): string {
  const name = value.trim();
  if (name.length === 0) throw new ValidationError(`${what} name must not be empty`);
  if (name.length > 200) throw new ValidationError(`${what} name is longer than 200 characters`);
  // eslint-disable-next-line no-control-regex -- control characters are exactly what is refused here
  if (/[\u0000-\u001f\u007f]/.test(name))
    throw new ValidationError(`${what} name must not contain control characters`);
  return name;
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

/**
 * A string of its own, for input kept beyond its request (caches, limit counters, queued audit events).
 * V8 makes a slice of 13 characters or more a view into its whole parent: URLSearchParams hands out values
 * as slices of the whole body, and `slice(0, 256)` of a long value is a view of all of it. The concatenation
 * is flattened into a new string one character longer than the value, which the result then points into.
 */
export const ownString = (value: string): string => (' ' + value).slice(1);

export const MAX_QUOTA = 1_000_000_000;

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
