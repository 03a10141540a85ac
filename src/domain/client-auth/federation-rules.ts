import { randomBytes } from 'node:crypto';
import { normalizedHttpUri } from '../uri.js';
import { ValidationError, validateName } from '../validate.js';
import { validateJwks, validateJwksUri, type PublicJwks } from './jwks.js';

/*
 * Workload identity federation (docs/interface.md, "Workload identity federation"): a client trusts tokens that a
 * platform signs (a Kubernetes service-account token, a GitHub Actions or GitLab CI OIDC token, a SPIFFE
 * JWT-SVID) in place of a secret or a key of its own. Each trust is a federated credential: the issuer, where
 * its keys are, the subject and audience the token must carry, further claims that must equal given values,
 * the longest lifetime accepted, and whether a token may authenticate once only. The rules of its fields live
 * here; management checks them when a credential is written, the token path reads what they produced.
 */

/** The value of a claim a credential requires: a JSON scalar, compared exactly. */
export type ClaimValue = string | number | boolean;

/** One federated credential of a client, as stored. */
export interface FederatedCredential {
  /** `fed_` and 96 random bits, made by the server. */
  id: string;
  /** Unique among the client's credentials. */
  name: string;
  /** The exact `iss` of the platform's tokens. */
  issuer: string;
  /** The issuer's keys inline; null: at jwksUri, or found by discovery when both are null. */
  jwks: PublicJwks | null;
  /** Where the issuer publishes its keys; null: inline, or found by discovery. */
  jwksUri: string | null;
  /** The exact `sub` required. */
  subject: string;
  /** The `aud` required (the Tessera issuer URL unless another is given when the credential is written). */
  audience: string;
  /** Further top-level claims that must equal these values exactly; {} for none. */
  claims: Record<string, ClaimValue>;
  /** The longest lifetime (`exp − iat`, or `exp − now`) of a token accepted, in seconds. */
  maxLifetime: number;
  /** True: each token authenticates once (its `jti` is required and single-use on every instance). */
  once: boolean;
  /** RFC 3339, as the store's other times. */
  createdAt: string;
  updatedAt: string;
}

/** At most this many federated credentials per client (docs/interface.md). */
export const MAX_FEDERATED_CREDENTIALS = 10;
/** `max_lifetime` when none is given: 1 hour. */
export const DEFAULT_MAX_LIFETIME = 3600;
/** `max_lifetime` is at most 24 hours... */
export const MAX_MAX_LIFETIME = 86_400;
/** ...and at least a minute (a platform token lives minutes at the least). */
export const MIN_MAX_LIFETIME = 60;
/** At most this many required claims on one credential. */
export const MAX_REQUIRED_CLAIMS = 20;
/** Issuer, subject, audience, claim names and string values are at most this long. */
const MAX_TEXT = 2048;
const MAX_CLAIM_NAME = 256;

/** Claims the token path checks itself: a credential cannot require a value of these. */
const CHECKED_CLAIMS = ['iss', 'sub', 'aud', 'exp', 'nbf', 'iat', 'jti'] as const;

/** A new federated credential's id: `fed_` and 96 random bits, URL-safe. */
export const newFederatedCredentialId = (): string => `fed_${randomBytes(12).toString('base64url')}`;

// eslint-disable-next-line no-control-regex -- control characters are exactly what is refused here
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

function exactText(value: unknown, what: string): string {
  if (typeof value !== 'string' || value === '')
    throw new ValidationError(`${what} must be a non-empty string`);
  if (value.length > MAX_TEXT) throw new ValidationError(`${what} is longer than ${MAX_TEXT} characters`);
  if (CONTROL.test(value)) throw new ValidationError(`${what} must not contain control characters`);
  return value;
}

/**
 * An issuer is compared exactly with the token's `iss`; it must be an absolute https URL (http outside
 * production), as OpenID Connect issuers and SPIFFE trust domains' JWT issuers are, with no query or fragment,
 * since `<issuer>/.well-known/openid-configuration` is where its keys are found when none are given.
 */
export function validateIssuer(value: unknown, production: boolean, ownIssuer: string): string {
  const raw = exactText(value, 'issuer');
  // docs/interface.md: never Tessera's own issuer (nor with a trailing slash, in any spelling of the same URI): this
  // server's tokens reach another token only by token exchange, under its rules.
  const same = (uri: string) => normalizedHttpUri(uri)?.replace(/\/$/, '');
  if (same(raw) !== undefined && same(raw) === same(ownIssuer))
    throw new ValidationError(
      "issuer must not be this server's own issuer: its tokens are exchanged for others by token exchange (RFC 8693), never taken as a client credential",
    );
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ValidationError(`issuer must be an absolute URL, got "${raw.slice(0, 100)}"`);
  }
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && !production))
    throw new ValidationError(
      production ? 'issuer must be an https URL' : 'issuer must be an http or https URL',
    );
  if (url.search !== '' || raw.includes('?')) throw new ValidationError('issuer must not have a query');
  if (raw.includes('#')) throw new ValidationError('issuer must not have a fragment');
  if (url.username || url.password) throw new ValidationError('issuer must not carry credentials');
  return raw;
}

export const validateSubject = (value: unknown): string => exactText(value, 'subject');

export const validateFederatedAudience = (value: unknown): string => exactText(value, 'audience');

export function validateMaxLifetime(value: unknown): number {
  if (
    typeof value !== 'number' ||
    !Number.isInteger(value) ||
    value < MIN_MAX_LIFETIME ||
    value > MAX_MAX_LIFETIME
  )
    throw new ValidationError(
      `max_lifetime must be a whole number of seconds from ${MIN_MAX_LIFETIME} to ${MAX_MAX_LIFETIME} (24 hours)`,
    );
  return value;
}

/**
 * The claims a token must carry with these exact values: an object of at most MAX_REQUIRED_CLAIMS top-level
 * names, each a string, a number or a boolean (docs/interface.md: scalar values; a nested value cannot be
 * compared exactly), none of the claims the token path checks itself.
 */
export function validateRequiredClaims(value: unknown): Record<string, ClaimValue> {
  if (value === null || value === undefined) return {};
  if (typeof value !== 'object' || Array.isArray(value))
    throw new ValidationError('claims must be a JSON object of claim names and the values required');
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length > MAX_REQUIRED_CLAIMS)
    throw new ValidationError(`claims has ${entries.length} names; at most ${MAX_REQUIRED_CLAIMS}`);
  const claims: Record<string, ClaimValue> = {};
  for (const [name, required] of entries) {
    if (name === '' || name.length > MAX_CLAIM_NAME || CONTROL.test(name))
      throw new ValidationError(
        `claims: a name must be 1 to ${MAX_CLAIM_NAME} characters, no control characters`,
      );
    if ((CHECKED_CLAIMS as readonly string[]).includes(name))
      throw new ValidationError(
        `claims: ${name} is checked by its own field (${CHECKED_CLAIMS.join(', ')} cannot be listed)`,
      );
    if (typeof required === 'string') {
      if (required.length > MAX_TEXT)
        throw new ValidationError(`claims: ${name} is longer than ${MAX_TEXT} characters`);
    } else if (typeof required === 'number') {
      if (!Number.isFinite(required)) throw new ValidationError(`claims: ${name} must be a finite number`);
    } else if (typeof required !== 'boolean')
      throw new ValidationError(
        `claims: ${name} must be a string, a number or a boolean (a nested value cannot be required)`,
      );
    Object.defineProperty(claims, name, {
      value: required,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return claims;
}

/** Where an issuer's keys are: inline, at a URL, or neither (discovery); never both. */
export function validateIssuerKeys(
  jwks: unknown,
  jwksUri: unknown,
  production: boolean,
  allowPrivate: boolean,
): { jwks: PublicJwks | null; jwksUri: string | null } {
  const inline = jwks === null || jwks === undefined ? null : validateJwks(jwks);
  let uri: string | null = null;
  if (jwksUri !== null && jwksUri !== undefined) {
    if (typeof jwksUri !== 'string') throw new ValidationError('jwks_uri must be a string');
    uri = validateJwksUri(jwksUri, production, allowPrivate);
  }
  if (inline !== null && uri !== null) throw new ValidationError('give jwks or jwks_uri, not both');
  return { jwks: inline, jwksUri: uri };
}

export const validateCredentialName = (value: unknown): string => {
  if (typeof value !== 'string') throw new ValidationError('name must be a string');
  return validateName(value, 'federated credential');
};

/** Where an issuer's OpenID Provider metadata is (OpenID Connect Discovery §4), when no keys are given. */
export const discoveryUrl = (issuer: string): string =>
  `${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`;
