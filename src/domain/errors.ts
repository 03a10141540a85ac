/** What RFC 6749 §5.2 does not allow in an error_description: anything but `%x20-21 / %x23-5B / %x5D-7E`. */
const NOT_IN_DESCRIPTION = /[^\x20\x21\x23-\x5b\x5d-\x7e]/g;

/**
 * A text as an error_description may have it (RFC 6749 §5.2: printable ASCII but `"` and `\`), each other
 * character replaced by `?`. The descriptions Tessera writes are within it already; this keeps a slip (a `§`,
 * a quoted value, a name a caller chose) from reaching a client that checks the grammar.
 */
export const descriptionText = (text: string): string => text.replace(NOT_IN_DESCRIPTION, '?');

/**
 * The base of every error class of Tessera's own, in the lowest layer so that every layer's errors may extend it
 * (.dependency-cruiser.cjs: the domain imports nothing but itself, and every layer may import it). `code` is a
 * stable, machine-readable snake_case identifier of the failure, for telling failures apart without reading a
 * message: an OAuthError's is its RFC 6749 §5.2 `error`, a management error's the code the CLI and the admin API
 * print. Each class keeps its own `name` and message. A class with no code-like field of its own has its code as
 * a getter, on the prototype: the logger writes an error's enumerable fields, and a logged error stays as it was.
 */
export abstract class TesseraError extends Error {
  abstract readonly code: string;
}

/**
 * The one error type a client ever sees. `error` is the RFC 6749 §5.2 / RFC 8707 code; the
 * description is meant for the client, in the characters §5.2 allows (made so here, whatever it was given);
 * `debug` goes to the log only.
 */
export class OAuthError extends TesseraError {
  override name = 'OAuthError';
  readonly description: string;
  constructor(
    readonly error: string,
    description: string,
    readonly status: number,
    readonly headers: Readonly<Record<string, string>> = {},
    readonly debug?: string,
  ) {
    const text = descriptionText(description);
    super(`${error}: ${text}`);
    this.description = text;
  }

  /** Its `error`. */
  override get code(): string {
    return this.error;
  }

  toJSON(): { error: string; error_description: string } {
    return { error: this.error, error_description: this.description };
  }
}

const BASIC_REALM = 'tessera';

// RFC 6749 §5.2: a 401 answer carries a WWW-Authenticate challenge for the scheme the client may use.
const CHALLENGE = { 'www-authenticate': `Basic realm="${BASIC_REALM}"` };

/** The same answer for an unknown client, a wrong secret, a disabled client and a malformed Basic header. */
export const invalidClient = (debug?: string): OAuthError =>
  new OAuthError('invalid_client', 'client authentication failed', 401, CHALLENGE, debug);

export const invalidRequest = (description: string, status = 400): OAuthError =>
  new OAuthError('invalid_request', description, status);

/** The grant types the token service dispatches on, named in the description (e.g. `a or b`). */
export const unsupportedGrantType = (supported: string): OAuthError =>
  new OAuthError('unsupported_grant_type', `grant_type must be ${supported}`, 400);

/**
 * RFC 8693 §2.2.2: a subject_token or actor_token that is invalid or unacceptable is an invalid_request. The
 * description is for the caller; the debug text (the audit trail's reason) names the token and why.
 */
export const unacceptableToken = (param: string, description: string, why: string): OAuthError =>
  new OAuthError('invalid_request', description, 400, {}, `${param}: ${why}`);

/** RFC 6749 §5.2: the authenticated client may not use this grant so (token exchange, RFC 8693 §2.2.2). */
export const unauthorizedClient = (description: string): OAuthError =>
  new OAuthError('unauthorized_client', description, 400);

// RFC 8707 §2: invalid_target for an audience (resource) that is unknown or not allowed.
export const invalidTarget = (description: string): OAuthError =>
  new OAuthError('invalid_target', description, 400);

export const invalidScope = (description: string): OAuthError =>
  new OAuthError('invalid_scope', description, 400);

/** RFC 7009 §2.2.1: a token type this server does not revoke (Tessera issues no refresh tokens). */
export const unsupportedTokenType = (): OAuthError =>
  new OAuthError('unsupported_token_type', 'this server issues and revokes access tokens only', 400);

/**
 * An authenticated client without the admin scope an endpoint needs (introspection: tokens:introspect). Its
 * credentials are right, so it is no failed authentication: 403, as the admin API answers a scope missing.
 */
export const insufficientScope = (scope: string): OAuthError =>
  new OAuthError('insufficient_scope', `this client lacks the admin scope ${scope}`, 403);

export const temporarilyUnavailable = (retryAfterSeconds: number): OAuthError =>
  new OAuthError('temporarily_unavailable', 'the service cannot answer right now; try again later', 503, {
    'retry-after': String(retryAfterSeconds),
  });

/**
 * What the infrastructure throws when it cannot answer safely (docs/interface.md: the store cannot be reached and
 * the answer cannot be given safely), instead of an answer of its own: it says only how long a client should
 * wait. Where errors become answers (asOAuthError) it is the 503 temporarily_unavailable with `Retry-After`; in
 * the domain it is what a 503 was: no failed attempt, no failed proof.
 */
export class Unavailable extends TesseraError {
  override name = 'Unavailable';
  constructor(
    /** Seconds a client is asked to wait (`Retry-After`, TESSERA_RETRY_AFTER). */
    readonly retryAfter: number,
    /** What could not answer, for the log. */
    message: string,
    cause?: unknown,
  ) {
    super(message, cause === undefined ? undefined : { cause });
  }

  override get code(): string {
    return 'unavailable';
  }
}

/**
 * The OAuth error a refusal is answered with (RFC 6749 §5.2): an OAuthError as it is, an Unavailable as the 503
 * temporarily_unavailable with its Retry-After; undefined for anything else. The one mapping of Unavailable to an
 * answer: the HTTP faces (http/errors.ts, http/problem.ts) and the token service's audit trail read it alike.
 */
export function asOAuthError(error: unknown): OAuthError | undefined {
  if (error instanceof OAuthError) return error;
  if (error instanceof Unavailable) return temporarilyUnavailable(error.retryAfter);
  return undefined;
}

/** docs/interface.md: too many failed attempts, an invalid_request-shaped body with Retry-After (RFC 6585 §4). */
export const tooManyAttempts = (retryAfterSeconds: number): OAuthError =>
  new OAuthError('invalid_request', 'too many failed attempts; try again later', 429, {
    'retry-after': String(retryAfterSeconds),
  });

/** A client over its issuance quota: it should cache its tokens (same 429 shape, RFC 6585 §4). */
export const quotaExceeded = (retryAfterSeconds: number): OAuthError =>
  new OAuthError(
    'invalid_request',
    'token quota exceeded for this client; reuse your token until it expires',
    429,
    {
      'retry-after': String(retryAfterSeconds),
    },
  );

/**
 * RFC 9449 §7.1 / §12.2: a DPoP proof that is missing where required, malformed or not acceptable. The debug
 * text (the audit trail's reason) says `dpop: ` and why.
 */
export const invalidDpopProof = (description: string): OAuthError =>
  new OAuthError('invalid_dpop_proof', description, 400, {}, `dpop: ${description}`);

/** RFC 9449 §8: the proof must carry the nonce given in the DPoP-Nonce header; the client retries with it. */
export const useDpopNonce = (nonce: string, why: string): OAuthError =>
  new OAuthError(
    'use_dpop_nonce',
    'the authorization server requires a nonce in the DPoP proof',
    400,
    { 'dpop-nonce': nonce },
    `dpop: ${why}`,
  );

export const serverError = (): OAuthError =>
  new OAuthError('server_error', 'the server met an unexpected condition', 500);
