import type { JWTPayload } from 'jose';
import type { SigningAlg } from './algorithms.js';
import {
  claimedClientId,
  ClientAuthenticator,
  SECRET_METHODS,
  type ClientAuthenticatorDeps,
  type ClientAuthMethod,
  type PresentedCredentials,
} from './client-auth/index.js';
import type { DpopVerifier } from './dpop.js';
import {
  OAuthError,
  invalidDpopProof,
  invalidRequest,
  quotaExceeded,
  unsupportedGrantType,
} from './errors.js';
import { clientCredentials } from './grants/client-credentials.js';
import type { GrantHandler } from './grants/grant.js';
import { ACCESS_TOKEN_TYPE, exchangeNote, TOKEN_EXCHANGE, tokenExchange } from './grants/token-exchange.js';
import type { OwnTokenDeps } from './own-tokens.js';
import {
  present,
  type AuditEntry,
  type KnownAudience,
  type KnownClient,
  type QuotaLimiter,
  type TokenRequest,
  type TokenResponse,
} from './token-types.js';
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
  /** The audit event: token.exchanged for a token exchange (RFC 8693), token.issued for any other grant. */
  type: 'token.issued' | 'token.exchanged';
  /**
   * What the audit trail says of the token beyond its client and audience: how the client authenticated, if its
   * method said anything (a federated credential); for an exchange, the original caller and the actors first.
   */
  note?: string | undefined;
}

/** The grant types (RFC 6749 §4.4, RFC 8693 §2.1), each a handler (grants/): looked up by grant_type, as sent. */
const CLIENT_CREDENTIALS = 'client_credentials';

/**
 * The token endpoint as a list of small steps: pick the authentication method, authenticate, look up the grant
 * type's handler (grants/), which checks what its grant needs and returns the claims; then, for every grant, the
 * DPoP proof, the quota, signing, the answer and the audit event. Credentials are checked before anything else
 * about the request is revealed (docs/interface.md).
 */
export class TokenService {
  /** Client authentication and its limits, as the revocation and introspection endpoints share it. */
  readonly clients: ClientAuthenticator;
  /** By grant_type; a Map, so that no name (`__proto__`, `constructor`) finds anything it was not given. */
  private readonly grants: ReadonlyMap<string, GrantHandler>;
  /** The unsupported_grant_type description: the grant types offered. */
  private readonly grantTypes: string;

  constructor(private readonly deps: TokenServiceDeps) {
    this.clients = new ClientAuthenticator(deps, deps.methods ?? SECRET_METHODS);
    const grants = new Map<string, GrantHandler>([[CLIENT_CREDENTIALS, clientCredentials]]);
    if (deps.ownTokens !== undefined) grants.set(TOKEN_EXCHANGE, tokenExchange);
    this.grants = grants;
    this.grantTypes = [...grants.keys()].join(' or ');
  }

  /** The grant types this service issues tokens for (discovery's grant_types_supported). */
  get grantTypesSupported(): string[] {
    return [...this.grants.keys()];
  }

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
      const oauth = error as OAuthError;
      const known = oauth instanceof OAuthError;
      audit({
        at: this.deps.now(),
        // Every 429 is a throttled refusal (a blocked caller, a client over its quota): summed, not stored.
        type: known && oauth.status === 429 ? 'token.throttled' : 'token.refused',
        clientId: possibleId(claimedClientId(request)),
        audience: clip(request.params.audience ?? request.params.resource),
        jti: null,
        reason: known ? [oauth.error, oauth.debug ?? oauth.description].join(': ') : 'server_error',
        source: request.source,
      });
      throw error;
    }
  }

  private async grant(request: TokenRequest): Promise<IssuedToken> {
    const { params } = request;
    // Awaited only on a cache miss (and signing only while a first key is made): a warm request waits on nothing.
    let credentials: PresentedCredentials | undefined;
    const authenticated = this.clients.authenticate(request, 'invalid_request', (presented) => {
      credentials = presented;
    });
    const client = authenticated instanceof Promise ? await authenticated : authenticated;

    const grantType = present(params.grant_type);
    if (grantType === undefined) throw invalidRequest('grant_type is required');
    const handler = this.grants.get(grantType);
    if (handler === undefined) throw unsupportedGrantType(this.grantTypes);
    // The grant's checks, synchronous: the claims to sign and what they were checked against, or its refusal.
    const { claims, audience, grant: granted, dpopRequired } = handler(params, client, this.deps);

    // Proof of possession (RFC 9449): nothing at all to do for a request without a proof from a client that is
    // not bound to DPoP, for a grant that does not need one. Before the quota: a refused proof costs no token of it.
    const jkt =
      request.dpop !== undefined || client.dpopBound === true || dpopRequired === true
        ? await this.proofKey(request, client, dpopRequired === true)
        : undefined;

    // Only clients with a quota pay for counting it (an exchanged token counts as one of the acting client's).
    if (this.deps.quotas && (client.quota.perMinute !== null || client.quota.perDay !== null)) {
      const wait = await this.deps.quotas.take(client.id, client.quota);
      if (wait > 0) throw quotaExceeded(wait);
    }

    // RFC 9449 §6.1: the token is bound to the proof's key.
    if (jkt !== undefined) claims.cnf = { jkt };
    const signed = this.deps.sign(claims, audience.signingAlg ?? this.deps.defaultAlg, granted.claims);
    const accessToken = typeof signed === 'string' ? signed : await signed;
    const tokenType = jkt === undefined ? 'Bearer' : 'DPoP';
    const expiresIn = claims.exp - claims.iat;
    const scope = claims.scope;
    if (claims.act === undefined)
      return {
        response:
          scope === undefined
            ? { access_token: accessToken, token_type: tokenType, expires_in: expiresIn }
            : { access_token: accessToken, token_type: tokenType, expires_in: expiresIn, scope },
        clientId: client.id,
        audience: audience.url,
        jti: claims.jti,
        type: 'token.issued',
        note: credentials?.note,
      };
    // RFC 8693 §2.2.1: an exchange's answer says what it issued.
    const response: TokenResponse = {
      access_token: accessToken,
      issued_token_type: ACCESS_TOKEN_TYPE,
      token_type: tokenType,
      expires_in: expiresIn,
    };
    if (scope !== undefined) response.scope = scope;
    const note = exchangeNote(claims);
    return {
      response,
      clientId: client.id,
      audience: audience.url,
      jti: claims.jti,
      type: 'token.exchanged',
      note: credentials?.note === undefined ? note : `${note}; ${credentials.note}`,
    };
  }

  /**
   * The thumbprint of the key the request's DPoP proof proves, or a refusal: invalid_dpop_proof (a failed
   * attempt, as a wrong credential is) or use_dpop_nonce (not one: a client's first proof has no nonce yet).
   */
  private async proofKey(request: TokenRequest, client: KnownClient, forSubject: boolean): Promise<string> {
    try {
      if (request.dpop === undefined)
        throw invalidDpopProof(
          forSubject
            ? 'the subject_token is bound to a DPoP key: a DPoP proof of the acting client is required'
            : 'a DPoP proof is required for this client (dpop_bound_access_tokens)',
        );
      if (this.deps.dpop === undefined) throw invalidDpopProof('DPoP proofs are not accepted here');
      return await this.deps.dpop.verify(request.dpop, this.deps.now());
    } catch (error) {
      if (error instanceof OAuthError && error.error === 'invalid_dpop_proof')
        void this.deps.attempts.failed(client.id, request.source);
      throw error;
    }
  }

  /** The nonce DPoP clients are to use now (every answer of the token endpoint carries it); else undefined. */
  dpopNonce(): string | undefined {
    return this.deps.dpop?.nonce(this.deps.now());
  }
}
