import type { FastifyRequest } from 'fastify';
import { decodeJwt } from 'jose';
import {
  DPOP_CHALLENGE_ALGS,
  presentedTokenOf,
  verifyPresentedToken,
  type PresentationDeps,
  type PresentedToken,
  type TokenScheme,
} from '../../domain/presented-token.js';
import type { KnownClient } from '../../domain/known-client.js';
import type { AttemptLimiter } from '../../domain/limits.js';
import type { AdminScope } from '../../management/builtin.js';
import { isPossibleClientId } from '../../domain/validate.js';
import { actorOf } from '../../store/types.js';
import type { CertificateOf } from '../client-certificates.js';
import { insufficientScope, problem, ProblemError } from '../problem.js';

/** The caller of an admin request, once its token (or console session) is accepted. */
export interface AdminCaller {
  /** Who the audit trail names: `client:<id>` or `operator:<email>`. */
  actor: string;
  /** The admin scopes it holds now: its token's, as far as its grant still holds them; an operator's role's. */
  scopes: ReadonlySet<string>;
  /** The admin client's id (a token's caller). */
  clientId?: string;
  /** How its token was presented (RFC 9449 §7.1: a DPoP-bound token's challenges use the DPoP scheme). */
  scheme?: TokenScheme;
}

export interface AdminAuthDeps {
  /** `<issuer>/admin/v1`: the audience an admin token is for. */
  audience: string;
  /** This server's public base URL: a DPoP proof's htu is a URL under it. */
  issuer: string;
  /**
   * What verifying this server's own tokens reads (domain/own-tokens.ts): its published keys, the denylist, the
   * clients' standing, and the DPoP proof verifier for bound tokens (domain/presented-token.ts). A token revoked,
   * or of a client disabled, deleted or whose tokens were revoked, is refused; a bound one needs its proof.
   */
  tokens: PresentationDeps;
  /** The client as the token path knows it (cached, followed through the change feed). */
  findClient(id: string): KnownClient | undefined | Promise<KnownClient | undefined>;
  attempts: AttemptLimiter;
  /** The request's TLS client certificate, for a certificate-bound token (RFC 8705 §3); undefined: none arrives. */
  certificateOf?: CertificateOf | undefined;
  /** Console sessions: a request without an Authorization header may carry one instead of a token. */
  sessions?: { caller(request: FastifyRequest): Promise<AdminCaller | undefined> };
}

/** The problem type of a request for a DPoP nonce: no failed authentication (docs/interface.md, DPoP). */
const USE_DPOP_NONCE = 'urn:tessera:problem:use_dpop_nonce';

const quoted = (value: string): string => value.replace(/["\\]/g, '');

/**
 * A 401's challenges (RFC 9110 §11.6.1): both schemes the admin API takes, Bearer (RFC 6750 §3) and DPoP (RFC
 * 9449 §7.1, with the algorithms a proof may use); the error on the scheme the request used.
 */
function adminChallenge(scheme: TokenScheme, error?: string, description?: string): string {
  const params =
    error === undefined
      ? []
      : [`error="${error}"`, ...(description ? [`error_description="${quoted(description)}"`] : [])];
  const dpop = `DPoP ${[...(scheme === 'DPoP' ? params : []), `algs="${DPOP_CHALLENGE_ALGS}"`].join(', ')}`;
  const bearer = scheme === 'Bearer' && params.length > 0 ? `Bearer ${params.join(', ')}` : 'Bearer';
  return `${bearer}, ${dpop}`;
}

/** The 401 of a refused presentation, with its challenges (and the nonce to use, for use_dpop_nonce). */
function refusal(verdict: Extract<PresentedToken, { ok: false }>): ProblemError {
  const headers: Record<string, string> = {
    'www-authenticate': adminChallenge(verdict.scheme, verdict.error, verdict.description),
  };
  if (verdict.nonce !== undefined) headers['dpop-nonce'] = verdict.nonce;
  return problem(401, verdict.error, verdict.description, {}, headers);
}

/**
 * Checks admin requests' tokens: Tessera's own access tokens, active as introspection would say, presented as
 * their binding requires (domain/presented-token.ts: the one verifier of them, then Bearer for an unbound token,
 * DPoP with a proof of this request by the token's key for a bound one), for the admin audience; or, without an
 * Authorization header, a console session (see console/session.ts). Failures count against the caller's address
 * like failed token requests (a request for a DPoP nonce is none); a blocked address gets 429, unless it presents
 * a valid token of an enabled client or an open session.
 */
export class AdminAuth {
  constructor(private readonly deps: AdminAuthDeps) {}

  /** The nonce DPoP callers are to use now, when nonces are required (TESSERA_DPOP_NONCE); else undefined. */
  dpopNonce(): string | undefined {
    return this.deps.tokens.dpop.nonce(this.deps.tokens.now());
  }

  async authenticate(request: FastifyRequest): Promise<AdminCaller> {
    const source = request.ip;
    let caller: AdminCaller;
    try {
      const header = request.headers.authorization;
      const session = header === undefined ? await this.deps.sessions?.caller(request) : undefined;
      caller = session ?? (await this.verify(request));
    } catch (error) {
      // A refusal of what an authenticated session asked (a foreign Origin, a stale anti-CSRF token) is not a
      // failed authentication: a console tab left open must not get its address blocked. Nor is a request for a
      // DPoP nonce (RFC 9449 §9): a client's first proof has none.
      if (
        error instanceof ProblemError &&
        (error.problem.status === 403 || error.problem.type === USE_DPOP_NONCE)
      )
        throw error;
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

  private async verify(request: FastifyRequest): Promise<AdminCaller> {
    const dpop = request.headers.dpop;
    const verdict = await verifyPresentedToken(
      {
        authorization: request.headers.authorization,
        dpop: Array.isArray(dpop) ? dpop.join(', ') : dpop,
        method: request.method,
        url: this.deps.issuer + request.url,
        certificate: this.deps.certificateOf?.(request.raw),
      },
      this.deps.audience,
      this.deps.tokens,
    );
    if (!verdict.ok) throw refusal(verdict);
    const { claims: payload, scheme } = verdict;
    const clientId = payload.client_id;
    const found = this.deps.findClient(clientId);
    const client = found instanceof Promise ? await found : found;
    if (!client?.enabled)
      throw refusal({
        ok: false,
        scheme,
        error: 'invalid_token',
        description: 'the client of this token is disabled or deleted',
      });
    // Live scopes (docs/management.md): the token's, as far as the client's admin grant holds them now, as this
    // process's directory knows it (followed through the change feed): a scope taken from the grant, or the grant
    // deleted, stops working within a second, not when the token expires.
    const granted = client.grants.get(this.deps.audience)?.scopes;
    const scopes = new Set<string>();
    if (granted !== undefined && typeof payload.scope === 'string')
      for (const scope of payload.scope.split(' ')) if (granted.has(scope)) scopes.add(scope);
    return { actor: actorOf.client(clientId), scopes, clientId, scheme };
  }
}

/** Whether an answer is a request for a DPoP nonce (not a refused authentication: no audit event). */
export const asksForNonce = (answer: ProblemError): boolean => answer.problem.type === USE_DPOP_NONCE;

/**
 * A 403's challenge in the scheme the caller used (RFC 9449 §7.1: a DPoP-bound token's errors are DPoP
 * challenges); the problem's own challenge names Bearer.
 */
export function challengeForCaller(caller: AdminCaller | undefined, answer: ProblemError): void {
  const header = answer.headers['www-authenticate'];
  if (caller?.scheme !== 'DPoP' || header === undefined || !header.startsWith('Bearer error=')) return;
  answer.headers['www-authenticate'] =
    `DPoP ${header.slice('Bearer '.length)}, algs="${DPOP_CHALLENGE_ALGS}"`;
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
  const token = presentedTokenOf(request.headers.authorization);
  if (token === undefined) return null;
  try {
    const id = decodeJwt(token).client_id;
    return typeof id === 'string' && isPossibleClientId(id) ? id : null;
  } catch {
    return null;
  }
}
