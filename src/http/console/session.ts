import type { FastifyRequest } from 'fastify';
import type { Config } from '../../config/index.js';
import { sessions, type ManagementContext } from '../../management/index.js';
import type { SessionPolicy } from '../../management/sessions.js';
import type { Operator, Store } from '../../store/types.js';
import { problem } from '../problem.js';
import { SessionCookie } from '../session-cookie.js';

/** The header a console page sends its session's anti-CSRF token in, on every request that changes something. */
const CSRF_HEADER = 'x-csrf-token';
/**
 * The header a console page sends on requests it makes by itself (the overview's refresh): they do not count
 * as activity, so a page left open still lets its session end after the idle timeout.
 */
const BACKGROUND_HEADER = 'x-tessera-background';

const NO_SCOPES: ReadonlySet<string> = new Set();

/** Methods that change nothing (RFC 9110 §9.2.1): the only ones a session may use without CSRF token and Origin. */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Who a console session is: its operator, and what their role allows, as admin scopes. */
export interface SessionCaller {
  actor: string;
  scopes: ReadonlySet<string>;
  operator: Operator;
  /** The cookie's value (logout ends this session). */
  token: string;
  /** The session's absolute end, ms since the epoch. */
  expiresAt: number;
}

export interface ConsoleSessionsDeps {
  store: Store;
  config: Config;
  policy: SessionPolicy;
}

/**
 * Console sessions as the HTTP face sees them: the cookie, and for a request that changes something a matching
 * `Origin` and the session's anti-CSRF token, checked before the store is asked anything; then the session
 * itself, read from the store on every request (so that a disabled operator is shut out at once, everywhere).
 */
export class ConsoleSessions {
  readonly cookie: SessionCookie;
  /** The issuer's origin: the only one whose pages may change anything with a session. */
  readonly origin: string;

  constructor(private readonly deps: ConsoleSessionsDeps) {
    this.cookie = new SessionCookie(deps.config.issuer);
    this.origin = new URL(deps.config.issuer).origin;
  }

  get policy(): SessionPolicy {
    return this.deps.policy;
  }

  /**
   * The management context of a console request, before its operator is known: it holds no admin scope (logins
   * and enrollments name their operator themselves, see sessions.operatorContext).
   */
  context(request: FastifyRequest): ManagementContext {
    return {
      store: this.deps.store,
      config: this.deps.config,
      actor: 'console',
      holds: NO_SCOPES,
      source: request.ip,
    };
  }

  /** The session cookie's value of a request, if any. */
  token(request: FastifyRequest): string | undefined {
    return this.cookie.read(request.headers.cookie);
  }

  /** Refuses (403) a request that changes something from a page that is not the console's. */
  checkOrigin(request: FastifyRequest): void {
    if (request.headers.origin !== this.origin)
      throw problem(
        403,
        'origin_mismatch',
        `a change made with a console session must come from a page of ${this.origin} (the Origin header)`,
      );
  }

  /**
   * The caller of a request that carries a session cookie; undefined when it carries none. A change needs the
   * Origin and the anti-CSRF token (403 otherwise); a session that has ended is a 401.
   */
  async caller(request: FastifyRequest): Promise<SessionCaller | undefined> {
    const token = this.token(request);
    if (token === undefined) return undefined;
    if (!SAFE_METHODS.has(request.method)) {
      this.checkOrigin(request);
      const presented = request.headers[CSRF_HEADER];
      if (typeof presented !== 'string' || !sessions.csrfMatches(this.deps.policy, token, presented))
        throw problem(
          403,
          'csrf_failed',
          `a change made with a console session needs the session's anti-CSRF token (${CSRF_HEADER})`,
        );
    }
    const found = await sessions.findSession(
      this.context(request),
      this.deps.policy,
      token,
      request.headers[BACKGROUND_HEADER] === undefined,
    );
    if (!found)
      throw problem(
        401,
        'session_ended',
        'the console session has ended (logged out, timed out, or the operator was disabled): log in again',
        {},
        { 'www-authenticate': 'Bearer error="invalid_token"' },
      );
    const { actor, holds } = sessions.operatorContext(this.context(request), found.operator);
    return {
      actor,
      scopes: holds,
      operator: found.operator,
      token,
      expiresAt: found.session.expiresAt,
    };
  }
}
