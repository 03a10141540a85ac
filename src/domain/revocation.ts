import type { ClientAuthenticator } from './client-auth/index.js';
import { insufficientScope, invalidRequest, unsupportedTokenType } from './errors.js';
import { verifyOwnToken, type OwnTokenClaims, type OwnTokenDeps } from './own-tokens.js';
import { present, type TokenRequest } from './token-request.js';

/**
 * The admin scope a client needs to introspect tokens (docs/interface.md: a resource server gets a client whose only
 * admin grant is this scope).
 */
export const INTROSPECTION_SCOPE = 'tokens:introspect';

/** RFC 7662 §2.2: an active token's members, those Tessera's tokens have; or exactly `{"active": false}`. */
export type Introspection =
  | { active: false }
  | {
      active: true;
      scope?: string;
      client_id: string;
      sub: string;
      aud: string | string[];
      iss: string;
      exp: number;
      iat: number;
      nbf?: number;
      jti: string;
      token_type: 'Bearer' | 'DPoP';
      cnf?: Record<string, unknown>;
      /** RFC 8693 §4.1: who acted for `sub`, as an exchanged token carries it. */
      act?: unknown;
    };

const INACTIVE: Introspection = { active: false };

/** An active token as introspection answers it: its claims in RFC 7662's order, and how it is presented. */
function introspectionOf(claims: OwnTokenClaims): Introspection {
  return {
    active: true,
    ...(claims.scope === undefined ? {} : { scope: claims.scope }),
    client_id: claims.client_id,
    sub: claims.sub,
    aud: claims.aud,
    iss: claims.iss,
    exp: claims.exp,
    iat: claims.iat,
    ...(claims.nbf === undefined ? {} : { nbf: claims.nbf }),
    jti: claims.jti,
    // RFC 9449 §6.2: a token bound to a DPoP key (cnf.jkt) is a DPoP token; RFC 8705's x5t#S256 stays Bearer.
    token_type: claims.cnf !== undefined && 'jkt' in claims.cnf ? 'DPoP' : 'Bearer',
    ...(claims.cnf === undefined ? {} : { cnf: claims.cnf }),
    // RFC 8693 §4.1: the act claim may be in an introspection answer; a resource server sees the chain.
    ...(claims.act === undefined ? {} : { act: claims.act }),
  };
}

export interface RevocationDeps {
  /** Client authentication and its limits, exactly as at the token endpoint (the token service's). */
  clients: Pick<ClientAuthenticator, 'authenticate'>;
  /** What verifying this server's tokens reads, all in memory (own-tokens.ts). */
  tokens: OwnTokenDeps;
  /** Puts a token on the denylist of every instance (the store, the change feed, the audit trail). */
  revoke(token: { jti: string; clientId: string; exp: number }, source: string): Promise<void>;
  /** The built-in admin audience (`<issuer>/admin/v1`): a client's grant of it holds its admin scopes. */
  adminAudience: string;
}

/**
 * Revocation (RFC 7009) and introspection (RFC 7662) of this server's access tokens (docs/interface.md, "Revocation
 * and introspection"). The caller authenticates as at the token endpoint, first: nothing about the token is
 * revealed or done before that.
 */
export class RevocationService {
  constructor(private readonly deps: RevocationDeps) {}

  /**
   * RFC 7009 §2.1: a token issued to the authenticated client goes on the denylist of every instance until it
   * would have expired; anything else (not a token of this server, expired, revoked already, another client's)
   * changes nothing and is answered the same (§2.2): a client learns nothing of tokens that are not its own.
   */
  async revoke(request: TokenRequest): Promise<void> {
    const authenticated = this.deps.clients.authenticate(request);
    const { client } = authenticated instanceof Promise ? await authenticated : authenticated;
    const token = this.tokenOf(request);
    // Tessera issues no refresh tokens: whatever the token, nothing is revoked (docs/interface.md).
    if (request.params.token_type_hint === 'refresh_token') throw unsupportedTokenType();
    const verdict = verifyOwnToken(token, this.deps.tokens);
    if (!verdict.active || verdict.claims.client_id !== client.id) return;
    const { jti, exp } = verdict.claims;
    await this.deps.revoke({ jti, clientId: client.id, exp }, request.source);
  }

  /**
   * RFC 7662 §2: for a caller holding the admin scope tokens:introspect, the token's claims if it is active now,
   * else exactly `{"active": false}`, whatever made it inactive (§2.2). From memory: no store operation.
   */
  async introspect(request: TokenRequest): Promise<Introspection> {
    // RFC 7662 §2.3: a missing credential is invalid_client too.
    const authenticated = this.deps.clients.authenticate(request, 'invalid_client');
    const { client } = authenticated instanceof Promise ? await authenticated : authenticated;
    if (client.grants.get(this.deps.adminAudience)?.scopes.has(INTROSPECTION_SCOPE) !== true)
      throw insufficientScope(INTROSPECTION_SCOPE);
    const verdict = verifyOwnToken(this.tokenOf(request), this.deps.tokens);
    return verdict.active ? introspectionOf(verdict.claims) : INACTIVE;
  }

  /** RFC 7009 §2.1, RFC 7662 §2.1: `token` is required. */
  private tokenOf(request: TokenRequest): string {
    const token = present(request.params.token);
    if (token === undefined) throw invalidRequest('token is required');
    return token;
  }
}
