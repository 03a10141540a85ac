import { applyTokenProfile } from './token-profiles.js';
import type { JWTPayload } from 'jose';
import type { SigningAlg } from './jose.js';
import {
  claimedClientId,
  ClientAuthenticator,
  SECRET_METHODS,
  type ClientAuthenticatorDeps,
  type ClientAuthMethod,
} from './client-auth/index.js';
import type { DpopVerifier } from './dpop.js';
import { asOAuthError, invalidRequest, quotaExceeded, unsupportedGrantType } from './errors.js';
import { clientCredentials } from './grants/client-credentials.js';
import type { GrantHandler, GrantResult } from './grants/grant.js';
import { TOKEN_EXCHANGE, tokenExchange } from './grants/token-exchange.js';
import type { KnownAudience, KnownClient } from './known-client.js';
import type { QuotaLimiter } from './limits.js';
import type { OwnTokenDeps } from './own-tokens.js';
import { certificatePossession } from './possession/certificate.js';
import { dpopPossession } from './possession/dpop.js';
import type { PossessionProof } from './possession/index.js';
import type { AuditEntry } from './token-events.js';
import { present, type TokenParams, type TokenRequest, type TokenResponse } from './token-request.js';
import { isPossibleClientId, ownString } from './validate.js';

/** What the token service needs: client authentication's (client-auth/authenticator.ts), and its own. */
export interface TokenServiceDeps extends ClientAuthenticatorDeps {
  findAudience(url: string): KnownAudience | undefined;
  /**
   * Synchronous once the key is loaded; a promise only while one is being made. `claims`: a client's custom
   * claims, serialised once (see KnownGrant), signed after the registered ones.
   */
  sign(payload: JWTPayload, alg: SigningAlg, claims?: string): string | Promise<string>;
  /** A unique token id with at least 128 random bits. */
  newJti(): string;
  quotas?: QuotaLimiter;
  /**
   * The client authentication methods, in the order a request is examined; the secret methods when left
   * out (private_key_jwt needs what only a runtime has: the issuer's URLs, a replay guard, a key fetcher).
   */
  methods?: readonly ClientAuthMethod[];
  /** DPoP proofs (RFC 9449): without it, a request with a proof, or a client bound to DPoP, gets no token. */
  dpop?: DpopVerifier;
  /** Receives every issued token and every refusal (no secrets, no tokens in them). */
  audit?: (event: AuditEntry) => void;
  /**
   * What verifying this server's own tokens reads, all in memory (own-tokens.ts): with it, token exchange
   * (RFC 8693) is offered, its subject and actor tokens verified as introspection verifies tokens.
   */
  ownTokens?: OwnTokenDeps;
  issuer: string;
  defaultTtl: number;
  defaultAlg: SigningAlg;
}

/** Presented values are recorded as sent but never at any length (and never holding on to the rest). */
const clip = (value: string | undefined): string | null =>
  value === undefined ? null : ownString(value.slice(0, 256));
/**
 * A presented client id, if it could be one; otherwise a marker. What does not fit the id alphabet (junk, or
 * a secret pasted into the wrong field) is not written to the audit trail or the log.
 */
const possibleId = (value: string | undefined): string | null =>
  value === undefined || value === '' ? null : isPossibleClientId(value) ? value : '(not a client id)';

export interface IssuedToken {
  response: TokenResponse;
  clientId: string;
  audience: string;
  jti: string;
  /** The audit event: the grant's (token.exchanged for a token exchange, token.issued for any other grant). */
  type: GrantResult['type'];
  /** What the token is bound to (a trace's oauth.token.binding): a DPoP key, a certificate, both; undefined: neither. */
  binding?: 'dpop' | 'mtls' | 'dpop+mtls' | undefined;
  /**
   * What the audit trail says of the token beyond its client and audience: the grant's note (an exchange: the
   * original caller and the actors), then the client authentication method's, if it said anything (a federated
   * credential).
   */
  note?: string | undefined;
}

type TokenType = TokenResponse['token_type'];

/** What a token's `cnf` binds it to (RFC 9449 §6.1 jkt, RFC 8705 §3.1 x5t#S256), as a trace names it. */
function bindingOf(cnf: Record<string, string>): NonNullable<IssuedToken['binding']> {
  const dpop = cnf.jkt !== undefined;
  const mtls = cnf['x5t#S256'] !== undefined;
  return dpop && mtls ? 'dpop+mtls' : dpop ? 'dpop' : 'mtls';
}

/** The answer (RFC 6749 §5.1): the token, its type, its lifetime, the grant's own members, the scopes if any. */
function answerOf(accessToken: string, tokenType: TokenType, decided: GrantResult): TokenResponse {
  const { claims, answer } = decided;
  const expiresIn = claims.exp - claims.iat;
  // In RFC 8693 §2.2.1's order, when the grant adds its member.
  const response: TokenResponse =
    answer?.issued_token_type === undefined
      ? { access_token: accessToken, token_type: tokenType, expires_in: expiresIn }
      : {
          access_token: accessToken,
          issued_token_type: answer.issued_token_type,
          token_type: tokenType,
          expires_in: expiresIn,
        };
  if (claims.scope !== undefined) response.scope = claims.scope;
  return response;
}

/** The grant types (RFC 6749 §4.4, RFC 8693 §2.1), each a handler (grants/): looked up by grant_type, as sent. */
const CLIENT_CREDENTIALS = 'client_credentials';

/**
 * The token endpoint as named steps (grant, below): authenticate the client; choose the grant type's handler
 * (grants/), which checks what its grant needs and decides the claims, its answer's own members, its audit event
 * and note; the proofs of possession (possession/), each binding the token by one `cnf` member; the quota; sign;
 * the answer. Each step is a module's, and a new grant, method or proof is one more module in its list, never a
 * branch here. Credentials are checked before anything else about the request is revealed (docs/interface.md).
 */
export class TokenService {
  /** Client authentication and its limits, as the revocation and introspection endpoints share it. */
  readonly clients: ClientAuthenticator;
  /** By grant_type; a Map, so that no name (`__proto__`, `constructor`) finds anything it was not given. */
  private readonly grants: ReadonlyMap<string, GrantHandler>;
  /** The unsupported_grant_type description: the grant types offered. */
  private readonly grantTypes: string;
  /** The proofs of possession, in the order they are asked. */
  private readonly proofs: readonly PossessionProof[];

  constructor(private readonly deps: TokenServiceDeps) {
    this.clients = new ClientAuthenticator(deps, deps.methods ?? SECRET_METHODS);
    const grants = new Map<string, GrantHandler>([[CLIENT_CREDENTIALS, clientCredentials]]);
    if (deps.ownTokens !== undefined) grants.set(TOKEN_EXCHANGE, tokenExchange);
    this.grants = grants;
    this.grantTypes = [...grants.keys()].join(' or ');
    this.proofs = [certificatePossession, dpopPossession(deps.dpop, deps.attempts)];
  }

  /** The client authentication methods accepted, by RFC 8414's names (discovery's *_auth_methods_supported). */
  get authMethodsSupported(): string[] {
    return (this.deps.methods ?? SECRET_METHODS).flatMap((method) => method.names);
  }

  /** The grant types this service issues tokens for (discovery's grant_types_supported). */
  get grantTypesSupported(): string[] {
    return [...this.grants.keys()];
  }

  /**
   * A token for the request, or its refusal (an OAuthError, or an Unavailable: the 503 it is answered with); either
   * way its audit event, when audited.
   */
  async issue(request: TokenRequest): Promise<IssuedToken> {
    const audit = this.deps.audit;
    if (!audit) return this.grant(request);
    try {
      const issued = await this.grant(request);
      audit({
        at: this.deps.now(),
        type: issued.type,
        clientId: issued.clientId,
        audience: issued.audience,
        jti: issued.jti,
        reason: issued.note ?? null,
        source: request.source,
      });
      return issued;
    } catch (error) {
      // Audited as it is answered (the infrastructure's Unavailable as its 503 temporarily_unavailable).
      const oauth = asOAuthError(error);
      audit({
        at: this.deps.now(),
        // Every 429 is a throttled refusal (a blocked caller, a client over its quota): summed, not stored.
        type: oauth?.status === 429 ? 'token.throttled' : 'token.refused',
        clientId: possibleId(claimedClientId(request)),
        audience: clip(request.params.audience ?? request.params.resource),
        jti: null,
        reason: oauth ? [oauth.error, oauth.debug ?? oauth.description].join(': ') : 'server_error',
        source: request.source,
      });
      throw error;
    }
  }

  /** The steps. Awaited only where a step must wait (a cache miss, an assertion, a proof): a warm request waits on nothing. */
  private async grant(request: TokenRequest): Promise<IssuedToken> {
    const authenticating = this.clients.authenticate(request);
    const { client, note, method } =
      authenticating instanceof Promise ? await authenticating : authenticating;
    request.onAuthenticated?.(client.id, method);
    const decided = this.handlerFor(request.params)(request.params, client, this.deps);
    const binding = this.bind(request, client, decided);
    const tokenType = typeof binding === 'string' ? binding : await binding;
    const quota = this.takeQuota(client);
    if (quota !== undefined) await quota;
    const { claims } = decided;
    const profile = decided.audience.tokenProfile;
    if (profile !== undefined) applyTokenProfile(profile, claims, decided.grant.profileClaimsTaken);
    const signed = this.deps.sign(
      claims,
      decided.audience.signingAlg ?? this.deps.defaultAlg,
      decided.grant.claims,
    );
    const accessToken = typeof signed === 'string' ? signed : await signed;
    const cnf = claims.cnf;
    return {
      response: answerOf(accessToken, tokenType, decided),
      clientId: client.id,
      audience: decided.audience.url,
      jti: claims.jti,
      type: decided.type,
      binding: cnf === undefined ? undefined : bindingOf(cnf),
      note:
        decided.note === undefined ? note : note === undefined ? decided.note : `${decided.note}; ${note}`,
    };
  }

  /** The grant type's handler, as sent (invalid_request without one, unsupported_grant_type for another). */
  private handlerFor(params: TokenParams): GrantHandler {
    const grantType = present(params.grant_type);
    if (grantType === undefined) throw invalidRequest('grant_type is required');
    const handler = this.grants.get(grantType);
    if (handler === undefined) throw unsupportedGrantType(this.grantTypes);
    return handler;
  }

  /**
   * The proofs of possession that apply (none, for the plain request: nothing is awaited), each adding its member
   * to the token's `cnf` (RFC 7800). Before the quota: a refused proof costs no token of it.
   */
  private bind(
    request: TokenRequest,
    client: KnownClient,
    decided: GrantResult,
  ): Promise<TokenType> | TokenType {
    let pending: Promise<TokenType> | undefined;
    for (const proof of this.proofs) {
      if (!proof.applies(request, client, decided)) continue;
      const bound = (before: TokenType) =>
        proof.prove(request, client, decided, this.deps.now()).then((binding): TokenType => {
          (decided.claims.cnf ??= {})[binding.member] = binding.value;
          return binding.tokenType === 'DPoP' ? 'DPoP' : before;
        });
      pending = pending === undefined ? bound('Bearer') : pending.then(bound);
    }
    return pending ?? 'Bearer';
  }

  /** Only clients with a quota pay for counting it (an exchanged token counts as one of the acting client's). */
  private takeQuota(client: KnownClient): Promise<void> | undefined {
    if (this.deps.quotas && (client.quota.perMinute !== null || client.quota.perDay !== null))
      return this.deps.quotas.take(client.id, client.quota).then((wait) => {
        if (wait > 0) throw quotaExceeded(wait);
      });
    return undefined;
  }

  /** The nonce DPoP clients are to use now (every answer of the token endpoint carries it); else undefined. */
  dpopNonce(): string | undefined {
    return this.deps.dpop?.nonce(this.deps.now());
  }
}
