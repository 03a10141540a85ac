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
  invalidScope,
  invalidTarget,
  quotaExceeded,
  unsupportedGrantType,
} from './errors.js';
import {
  present,
  type AuditEntry,
  type KnownAudience,
  type KnownClient,
  type KnownGrant,
  type QuotaLimiter,
  type TokenParams,
  type TokenRequest,
  type TokenResponse,
} from './token-types.js';
import { isPossibleClientId, ownString, SCOPE_TOKEN } from './validate.js';

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
  /** What the audit trail says of how the client authenticated, if its method said anything (a federated credential). */
  note?: string | undefined;
}

/**
 * The scopes a token carries (INTERFACE.md, Scopes): without `scope` in the request every granted one; with
 * it exactly those asked for (each once, sorted), each granted, else invalid_scope naming the first that is not.
 */
function scopeOf(grant: KnownGrant, requested: string | undefined): string | undefined {
  if (requested === undefined) return grant.scope;
  const asked = requested.split(' ');
  for (const token of asked) {
    if (!SCOPE_TOKEN.test(token))
      // "section", not the sign: an error_description is printable ASCII only (RFC 6749 §5.2).
      throw invalidScope('scope must be scope tokens separated by single spaces (RFC 6749 section 3.3)');
    if (!grant.scopes.has(token))
      throw invalidScope(`scope ${token.slice(0, 128)} is not granted to this client for this audience`);
  }
  return [...new Set(asked)].sort().join(' ');
}

/**
 * The client credentials grant (RFC 6749 §4.4) as a list of small steps: pick the authentication method,
 * authenticate, check the grant type, resolve the audience, check the grant, sign. Credentials are checked
 * before anything else about the request is revealed (INTERFACE.md).
 */
export class TokenService {
  /** Client authentication and its limits, as the revocation and introspection endpoints share it. */
  readonly clients: ClientAuthenticator;

  constructor(private readonly deps: TokenServiceDeps) {
    this.clients = new ClientAuthenticator(deps, deps.methods ?? SECRET_METHODS);
  }

  async issue(request: TokenRequest): Promise<IssuedToken> {
    const audit = this.deps.audit;
    if (!audit) return this.grant(request);
    try {
      const issued = await this.grant(request);
      audit({
        at: this.deps.now(),
        type: 'token.issued',
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
    if (grantType !== 'client_credentials') throw unsupportedGrantType();

    const audienceUrl = this.requestedAudience(params);
    const audience = this.deps.findAudience(audienceUrl);
    if (!audience) throw invalidTarget('the requested audience is not registered');
    const granted = client.grants.get(audience.url);
    if (!granted) throw invalidTarget('the requested audience is not granted to this client');
    const scope = scopeOf(granted, present(params.scope));

    // Proof of possession (RFC 9449): nothing at all to do for a request without a proof from a client that is
    // not bound to DPoP. Before the quota: a refused proof costs no token of it.
    const jkt =
      request.dpop !== undefined || client.dpopBound === true
        ? await this.proofKey(request, client)
        : undefined;

    // Only clients with a quota pay for counting it.
    if (this.deps.quotas && (client.quota.perMinute !== null || client.quota.perDay !== null)) {
      const wait = await this.deps.quotas.take(client.id, client.quota);
      if (wait > 0) throw quotaExceeded(wait);
    }

    const ttl = client.tokenTtl ?? audience.tokenTtl ?? this.deps.defaultTtl;
    const iat = Math.floor(this.deps.now() / 1000);
    const jti = this.deps.newJti();
    // RFC 9068 §2.2: iss, exp, aud, sub, client_id, iat, jti. For client credentials, sub is the client.
    const payload: JWTPayload = {
      iss: this.deps.issuer,
      sub: client.id,
      aud: audience.url,
      client_id: client.id,
      iat,
      exp: iat + ttl,
      jti,
    };
    if (scope !== undefined) payload.scope = scope;
    // RFC 9449 §6.1: the token is bound to the proof's key.
    if (jkt !== undefined) payload.cnf = { jkt };
    const signed = this.deps.sign(payload, audience.signingAlg ?? this.deps.defaultAlg, granted.claims);
    const accessToken = typeof signed === 'string' ? signed : await signed;
    const tokenType = jkt === undefined ? 'Bearer' : 'DPoP';
    return {
      response:
        scope === undefined
          ? { access_token: accessToken, token_type: tokenType, expires_in: ttl }
          : { access_token: accessToken, token_type: tokenType, expires_in: ttl, scope },
      clientId: client.id,
      audience: audience.url,
      jti,
      note: credentials?.note,
    };
  }

  /**
   * The thumbprint of the key the request's DPoP proof proves, or a refusal: invalid_dpop_proof (a failed
   * attempt, as a wrong credential is) or use_dpop_nonce (not one: a client's first proof has no nonce yet).
   */
  private async proofKey(request: TokenRequest, client: KnownClient): Promise<string> {
    try {
      if (request.dpop === undefined)
        throw invalidDpopProof('a DPoP proof is required for this client (dpop_bound_access_tokens)');
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

  /** `audience` (Auth0, Hydra) and `resource` (RFC 8707) name the same thing; one of them, not both. */
  private requestedAudience(params: TokenParams): string {
    const audience = present(params.audience);
    const resource = present(params.resource);
    if (audience !== undefined && resource !== undefined) {
      throw invalidRequest('send audience or resource, not both');
    }
    const value = audience ?? resource;
    if (value === undefined) throw invalidRequest('audience is required');
    return value;
  }
}
