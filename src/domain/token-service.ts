import type { JWTPayload } from 'jose';
import type { SigningAlg } from './algorithms.js';
import {
  claimedClientId,
  SECRET_METHODS,
  type ClientAuthMethod,
  type PresentedCredentials,
} from './client-auth/index.js';
import type { DpopVerifier } from './dpop.js';
import {
  OAuthError,
  invalidClient,
  invalidDpopProof,
  invalidRequest,
  invalidScope,
  invalidTarget,
  quotaExceeded,
  tooManyAttempts,
  unsupportedGrantType,
} from './errors.js';
import {
  present,
  type AttemptLimiter,
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

export interface TokenServiceDeps {
  /** Cached lookup; a promise only on a cache miss. */
  findClient(id: string): KnownClient | undefined | Promise<KnownClient | undefined>;
  /** Memory only: the client if this process holds it, else undefined (never a store query). */
  peekClient(id: string): KnownClient | undefined;
  /**
   * Memory only: whether `id` may be a client's, by the set of every client id (a deleted client's may
   * linger; an id not in it is no client's). False when not known, as it is when left out: a blocked caller is
   * then answered from peekClient alone.
   */
  registered?(id: string): boolean;
  findAudience(url: string): KnownAudience | undefined;
  /**
   * Synchronous once the key is loaded; a promise only while one is being made. `claims`: a client's custom
   * claims, serialised once (see KnownGrant), signed after the registered ones.
   */
  sign(payload: JWTPayload, alg: SigningAlg, claims?: string): string | Promise<string>;
  /** Milliseconds since the epoch. */
  now(): number;
  /** A unique token id with at least 128 random bits. */
  newJti(): string;
  attempts: AttemptLimiter;
  quotas?: QuotaLimiter;
  /**
   * The client authentication methods, in the order a request is examined; the secret methods when left
   * out (private_key_jwt needs what only a runtime has: the issuer's URLs, a replay guard, a key fetcher).
   */
  methods?: readonly ClientAuthMethod[];
  /** DPoP proofs (RFC 9449): without it, a request with a proof, or a client bound to DPoP, gets no token. */
  dpop?: DpopVerifier;
  /** Told which secret authenticated a request (its id): last-used times are written off the token path. */
  secretUsed?: (secretId: string) => void;
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
  constructor(private readonly deps: TokenServiceDeps) {
    this.methods = deps.methods ?? SECRET_METHODS;
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
    const { params, source } = request;
    const credentials = this.credentialsOf(request);
    const possible = isPossibleClientId(credentials.clientId) ? credentials.clientId : undefined;
    // A caller blocked for failed attempts gets its token only with the exact credential of a registered client,
    // and 429 for everything else, with no store operation for whatever ids it sprays (INTERFACE.md).
    const wait = this.deps.attempts.blockedFor(possible, source);
    let client: KnownClient;
    if (wait > 0) {
      const blocked = this.authenticateBlocked(possible, credentials, wait);
      client = blocked instanceof Promise ? await blocked : blocked;
    } else {
      // Awaited only on a cache miss (and signing only while a first key is made): a warm request waits on nothing.
      const authenticated = this.authenticate(credentials, source);
      client = authenticated instanceof Promise ? await authenticated : authenticated;
    }

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
      note: credentials.note,
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

  /** The client authentication methods, in the order a request is examined (client-auth/index.ts). */
  private readonly methods: readonly ClientAuthMethod[];

  /**
   * The presented credentials, by the one method the request uses (RFC 6749 §2.3: one method per request).
   * Malformed credentials are a failed authentication, counted against the source; from a caller that is
   * blocked, any malformed request is a 429 like everything else it sends.
   */
  private credentialsOf(request: TokenRequest): PresentedCredentials {
    const { params, source } = request;
    // By index, without a filtered array or a closure: this runs for every token.
    let used = 0;
    let method: ClientAuthMethod | undefined;
    let credentials: PresentedCredentials | undefined;
    let malformed: unknown;
    for (let i = 0; i < this.methods.length; i++) {
      const candidate = this.methods[i]!;
      if (!candidate.presentedIn(request)) continue;
      used++;
      try {
        const parsed = candidate.parse(request);
        if (credentials === undefined) {
          credentials = parsed;
          method = candidate;
        }
      } catch (error) {
        if (error instanceof OAuthError && error.error === 'invalid_client') {
          const wait = this.deps.attempts.blockedFor(undefined, source);
          if (wait > 0) throw tooManyAttempts(wait);
          void this.deps.attempts.failed(undefined, source);
          throw error;
        }
        malformed ??= error;
      }
    }
    try {
      if (used > 1) {
        throw invalidRequest(
          params.client_assertion === undefined && params.client_assertion_type === undefined
            ? 'use one client authentication method: HTTP Basic or client_secret in the body, not both'
            : 'use one client authentication method: HTTP Basic, client_secret in the body, or client_assertion',
        );
      }
      if (malformed !== undefined) throw malformed;
      if (used === 0 || method === undefined || credentials === undefined) {
        throw invalidRequest(
          present(params.client_id) === undefined ? 'client_id is required' : 'client_secret is required',
        );
      }
      method.check?.(request, credentials);
      return credentials;
    } catch (error) {
      const id = credentials?.clientId ?? present(params.client_id);
      const wait = this.deps.attempts.blockedFor(
        id !== undefined && isPossibleClientId(id) ? id : undefined,
        source,
      );
      if (wait > 0) throw tooManyAttempts(wait);
      throw error;
    }
  }

  /**
   * A blocked caller: only an enabled client with its exact credential gets through (a NAT or proxy may be
   * shared with an attacker, and a client that caches its token for half an hour is the one this process may
   * have forgotten). The client is the one in memory; or, for a registered id (in the set of every client id),
   * the one a lookup finds, batched and cached like any miss, so that a client sharing the address gets in
   * after its first request and a spray of its id with wrong secrets is answered from memory after that. An
   * id that is not registered costs nothing: no lookup, no failure counted, 429. A lookup that fails (the
   * store away) is a 429 too: what a blocked caller sends never costs an audit row of its own. The secret is
   * hashed and compared whatever the id, as on the usual path.
   */
  private authenticateBlocked(
    clientId: string | undefined,
    credentials: PresentedCredentials,
    wait: number,
  ): KnownClient | Promise<KnownClient> {
    const held = clientId === undefined ? undefined : this.deps.peekClient(clientId);
    if (held === undefined && clientId !== undefined && this.deps.registered?.(clientId) === true) {
      let found: KnownClient | undefined | Promise<KnownClient | undefined>;
      try {
        found = this.deps.findClient(clientId);
      } catch {
        throw tooManyAttempts(wait);
      }
      if (found instanceof Promise)
        return found.then(
          (client) => this.admitBlocked(client, credentials, wait),
          () => {
            throw tooManyAttempts(wait);
          },
        );
      return this.admitBlocked(found, credentials, wait);
    }
    return this.admitBlocked(held, credentials, wait);
  }

  /** The blocked caller's credential checked against `client` (undefined: none): the client, or 429. */
  private admitBlocked(
    client: KnownClient | undefined,
    credentials: PresentedCredentials,
    wait: number,
  ): KnownClient | Promise<KnownClient> {
    const proven = credentials.proves(client, this.deps.now());
    const decide = (matches: boolean): KnownClient => {
      if (client && matches && client.enabled) {
        if (credentials.usedSecret !== undefined) this.deps.secretUsed?.(credentials.usedSecret);
        return client;
      }
      throw tooManyAttempts(wait);
    };
    return typeof proven === 'boolean' ? decide(proven) : proven.then(decide);
  }

  /**
   * One path for every failure: the secret is always hashed and compared, against a dummy digest when the
   * client is unknown, so unknown, wrong and disabled give the same answer by the same work.
   */
  private authenticate(
    credentials: PresentedCredentials,
    source: string,
  ): KnownClient | Promise<KnownClient> {
    const { clientId } = credentials;
    // An id no client can have (a NUL, 8 KiB of junk) is unknown without a cache entry or a store query.
    const found = isPossibleClientId(clientId) ? this.deps.findClient(clientId) : undefined;
    return found instanceof Promise
      ? found.then((client) => this.check(client, credentials, source))
      : this.check(found, credentials, source);
  }

  private check(
    client: KnownClient | undefined,
    credentials: PresentedCredentials,
    source: string,
  ): KnownClient | Promise<KnownClient> {
    const matches = credentials.proves(client, this.deps.now());
    return typeof matches === 'boolean'
      ? this.decide(client, credentials, source, matches)
      : matches.then((proven) => this.decide(client, credentials, source, proven));
  }

  private decide(
    client: KnownClient | undefined,
    credentials: PresentedCredentials,
    source: string,
    matches: boolean,
  ): KnownClient {
    const { clientId } = credentials;
    const failure = !client
      ? 'unknown client'
      : !matches
        ? (credentials.failure ?? 'wrong secret')
        : !client.enabled
          ? 'client is disabled'
          : '';
    if (!failure) {
      if (credentials.usedSecret !== undefined) this.deps.secretUsed?.(credentials.usedSecret);
      return client!;
    }
    // The limits turn failures into 429s, never a success: an enabled client with its exact secret is let
    // through even from a blocked address, so nobody sharing that address (a NAT, a proxy) can lock it
    // out. With 256-bit secrets, letting a blocked guesser learn "wrong" costs nothing.
    const possible = isPossibleClientId(clientId) ? clientId : undefined;
    const wait = this.deps.attempts.blockedFor(possible, source);
    if (wait > 0) throw tooManyAttempts(wait);
    // An id no client can have is counted against the address alone: no counter keyed by 8 KiB of junk.
    void this.deps.attempts.failed(possible, source);
    throw invalidClient(failure);
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
