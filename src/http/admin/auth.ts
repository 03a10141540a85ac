import type { FastifyRequest } from 'fastify';
import { decodeJwt } from 'jose';
import { verifyOwnToken, type OwnTokenDeps } from '../../domain/own-tokens.js';
import type { AttemptLimiter, KnownClient } from '../../domain/token-types.js';
import type { AdminScope } from '../../management/builtin.js';
import { isPossibleClientId } from '../../domain/validate.js';
import { actorOf } from '../../store/types.js';
import { insufficientScope, problem, ProblemError } from '../problem.js';

/** The caller of an admin request, once its token (or console session) is accepted. */
export interface AdminCaller {
  /** Who the audit trail names: `client:<id>` or `operator:<email>`. */
  actor: string;
  /** The admin scopes it holds now: its token's, as far as its grant still holds them; an operator's role's. */
  scopes: ReadonlySet<string>;
  /** The admin client's id (a token's caller). */
  clientId?: string;
}

export interface AdminAuthDeps {
  /** `<issuer>/admin/v1`: the audience an admin token is for. */
  audience: string;
  /**
   * What verifying this server's own tokens reads (domain/own-tokens.ts): its published keys, the denylist, the
   * clients' standing. A token revoked, or of a client disabled, deleted or whose tokens were revoked, is refused.
   */
  tokens: OwnTokenDeps;
  /** The client as the token path knows it (cached, followed through the change feed). */
  findClient(id: string): KnownClient | undefined | Promise<KnownClient | undefined>;
  attempts: AttemptLimiter;
  /** Console sessions: a request without an Authorization header may carry one instead of a token. */
  sessions?: { caller(request: FastifyRequest): Promise<AdminCaller | undefined> };
}

/** RFC 6750 §2.1: `Bearer` and a b64token. */
const BEARER = /^Bearer +([A-Za-z0-9._~+/-]+=*) *$/i;

const invalidToken = (detail: string): ProblemError =>
  problem(
    401,
    'invalid_token',
    detail,
    {},
    { 'www-authenticate': `Bearer error="invalid_token", error_description="${detail}"` },
  );

/**
 * Checks admin requests' bearer tokens (RFC 6750): Tessera's own access tokens, active as introspection would
 * say (the one verifier of them, domain/own-tokens.ts: signature by a published key, typ at+jwt, iss, exp, not
 * revoked, of a client that still exists and is enabled now, not just when the token was issued), for the admin
 * audience; or, without an Authorization header, a console session (see console/session.ts). Failures count
 * against the caller's address like failed token requests; a blocked address gets 429, unless it presents a
 * valid token of an enabled client or an open session.
 */
export class AdminAuth {
  constructor(private readonly deps: AdminAuthDeps) {}

  async authenticate(request: FastifyRequest): Promise<AdminCaller> {
    const source = request.ip;
    let caller: AdminCaller;
    try {
      const header = request.headers.authorization;
      const session = header === undefined ? await this.deps.sessions?.caller(request) : undefined;
      caller = session ?? (await this.verify(header));
    } catch (error) {
      // A refusal of what an authenticated session asked (a foreign Origin, a stale anti-CSRF token) is not a
      // failed authentication: a console tab left open must not get its address blocked.
      if (error instanceof ProblemError && error.problem.status === 403) throw error;
      const wait = this.deps.attempts.blockedFor(undefined, source);
      if (wait > 0)
        throw problem(
          429,
          'too_many_attempts',
          'too many failed authentications from this address; try again later',
          {},
          { 'retry-after': String(wait) },
        );
      await this.deps.attempts.failed(undefined, source);
      throw error;
    }
    return caller;
  }

  private async verify(header: string | undefined): Promise<AdminCaller> {
    if (header === undefined) throw invalidToken('an access token is required (Authorization: Bearer)');
    const match = BEARER.exec(header);
    if (!match) throw invalidToken('the Authorization header is not a Bearer token');
    const verdict = verifyOwnToken(match[1]!, this.deps.tokens);
    if (!verdict.active)
      throw invalidToken(
        verdict.why === 'client'
          ? 'the client of this token is disabled or deleted'
          : verdict.why === 'revoked'
            ? 'the access token has been revoked'
            : 'the access token is not valid for this API',
      );
    const payload = verdict.claims;
    const { aud } = payload;
    if (aud !== this.deps.audience && !(Array.isArray(aud) && aud.includes(this.deps.audience)))
      throw invalidToken('the access token is not valid for this API');
    const clientId = payload.client_id;
    const found = this.deps.findClient(clientId);
    const client = found instanceof Promise ? await found : found;
    if (!client?.enabled) throw invalidToken('the client of this token is disabled or deleted');
    // Live scopes (MANAGEMENT.md): the token's, as far as the client's admin grant holds them now, as this
    // process's directory knows it (followed through the change feed): a scope taken from the grant, or the grant
    // deleted, stops working within a second, not when the token expires.
    const granted = client.grants.get(this.deps.audience)?.scopes;
    const scopes = new Set<string>();
    if (granted !== undefined && typeof payload.scope === 'string')
      for (const scope of payload.scope.split(' ')) if (granted.has(scope)) scopes.add(scope);
    return { actor: actorOf.client(clientId), scopes, clientId };
  }
}

/** Refuses a caller without the scope a route needs (RFC 6750 §3.1: 403 insufficient_scope). */
export function requireScope(caller: AdminCaller, scope: AdminScope): void {
  if (!caller.scopes.has(scope))
    throw problem(
      403,
      'insufficient_scope',
      `this call needs the scope ${scope}`,
      {},
      { 'www-authenticate': insufficientScope([scope]) },
    );
}

/**
 * The client id an admin request's bearer token names, verified or not: for the audit trail of a refused call
 * only (a refused token's claim is what was presented, as a refused token request's client_id is).
 */
export function presentedClientId(request: FastifyRequest): string | null {
  const match = BEARER.exec(request.headers.authorization ?? '');
  if (!match) return null;
  try {
    const id = decodeJwt(match[1]!).client_id;
    return typeof id === 'string' && isPossibleClientId(id) ? id : null;
  } catch {
    return null;
  }
}
