/** What RFC 6749 §5.2 does not allow in an error_description: anything but `%x20-21 / %x23-5B / %x5D-7E`. */
const NOT_IN_DESCRIPTION = /[^\x20\x21\x23-\x5b\x5d-\x7e]/g;

/**
 * A text as an error_description may have it (RFC 6749 §5.2: printable ASCII but `"` and `\`), each other
 * character replaced by `?`. The descriptions Tessera writes are within it already; this keeps a slip (a `§`,
 * a quoted value, a name a caller chose) from reaching a client that checks the grammar.
 */
export const descriptionText = (text: string): string => text.replace(NOT_IN_DESCRIPTION, '?');

/**
 * The one error type a client ever sees. `error` is the RFC 6749 §5.2 / RFC 8707 code; the
 * description is meant for the client, in the characters §5.2 allows (made so here, whatever it was given);
 * `debug` goes to the log only.
 */
export class OAuthError extends Error {
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
