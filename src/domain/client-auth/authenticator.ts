import { invalidClient, invalidRequest, OAuthError, tooManyAttempts } from '../errors.js';
import type { KnownClient } from '../known-client.js';
import type { AttemptLimiter } from '../limits.js';
import { present, type TokenRequest } from '../token-request.js';
import { isPossibleClientId } from '../validate.js';
import type { AuthMethodName, ClientAuthMethod, PresentedCredentials, Proof } from './method.js';

/** A client that proved who it is, and what its method says of the proof (the audit trail's note, if any). */
export interface Authenticated {
  client: KnownClient;
  note: string | undefined;
  /** The method it authenticated with, by its RFC 8414 name (a trace's oauth.client.auth_method). */
  method: AuthMethodName;
}

export interface ClientAuthenticatorDeps {
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
  /** Milliseconds since the epoch. */
  now(): number;
  attempts: AttemptLimiter;
  /** Told which secret authenticated a request (its id): last-used times are written off the token path. */
  secretUsed?: (secretId: string) => void;
}

/**
 * Client authentication (RFC 6749 §2.3) with the failed-attempt limits around it, as every endpoint a client
 * authenticates at does it (docs/interface.md): the token endpoint, revocation, introspection. One method per request,
 * chosen from what the request carries; a failure counted against the caller; a blocked caller let through only
 * with the exact credential of a registered, enabled client, and answered 429 from memory otherwise.
 */
export class ClientAuthenticator {
  constructor(
    private readonly deps: ClientAuthenticatorDeps,
    /** The methods, in the order a request is examined (client-auth/index.ts). */
    private readonly methods: readonly ClientAuthMethod[],
  ) {}

  /**
   * The client the request proves it is; synchronous on a warm cache (the secret methods), a promise on a miss or
   * for a method that must wait (an assertion). Throws the refusal: invalid_client (401), invalid_request (400),
   * 429 for a blocked caller, 503 when the store cannot answer. A request that presents no credential at all is
   * `missing`: an invalid_request at the token endpoint (a required field missing), an invalid_client where the
   * contract says so (introspection, RFC 7662 §2.3); not a failed attempt either way.
   */
  authenticate(
    request: TokenRequest,
    missing: 'invalid_request' | 'invalid_client' = 'invalid_request',
  ): Authenticated | Promise<Authenticated> {
    const credentials = this.credentialsOf(request, missing);
    const possible = isPossibleClientId(credentials.clientId) ? credentials.clientId : undefined;
    // A caller blocked for failed attempts gets through only with the exact credential of a registered client,
    // and 429 for everything else, with no store operation for whatever ids it sprays (docs/interface.md).
    const wait = this.deps.attempts.blockedFor(possible, request.source);
    return wait > 0
      ? this.authenticateBlocked(possible, credentials, wait)
      : this.prove(credentials, request, missing);
  }

  /**
   * The presented credentials, by the one method the request uses (RFC 6749 §2.3: one method per request). Two
   * methods at once are an invalid_request decided before any credential is parsed (docs/interface.md: a malformed
   * assertion beside a secret is a 400, not a 401). Malformed credentials are a failed authentication, counted
   * against the source; from a caller that is blocked, any malformed request is a 429 like everything else it
   * sends.
   */
  private credentialsOf(
    request: TokenRequest,
    missing: 'invalid_request' | 'invalid_client',
  ): PresentedCredentials {
    const { params, source } = request;
    // By index, without a filtered array or a closure: this runs for every token.
    let used = 0;
    let method: ClientAuthMethod | undefined;
    for (let i = 0; i < this.methods.length; i++) {
      const candidate = this.methods[i]!;
      if (!candidate.presentedIn(request)) continue;
      used++;
      method ??= candidate;
    }
    // A refusal of the request's form: a blocked caller hears 429 instead, as for everything else it sends.
    const refuse = (error: unknown, id: string | undefined): never => {
      const wait = this.deps.attempts.blockedFor(
        id !== undefined && isPossibleClientId(id) ? id : undefined,
        source,
      );
      if (wait > 0) throw tooManyAttempts(wait);
      throw error;
    };
    if (used > 1)
      refuse(
        invalidRequest(
          params.client_assertion === undefined && params.client_assertion_type === undefined
            ? 'use one client authentication method: HTTP Basic or client_secret in the body, not both'
            : 'use one client authentication method: HTTP Basic, client_secret in the body, or client_assertion',
        ),
        present(params.client_id),
      );
    if (method === undefined)
      return refuse(
        missing === 'invalid_client'
          ? invalidClient('no client credentials')
          : invalidRequest(
              present(params.client_id) === undefined ? 'client_id is required' : 'client_secret is required',
            ),
        present(params.client_id),
      );
    let credentials: PresentedCredentials;
    try {
      credentials = method.parse(request);
    } catch (error) {
      if (!(error instanceof OAuthError && error.error === 'invalid_client'))
        return refuse(error, present(params.client_id));
      const wait = this.deps.attempts.blockedFor(undefined, source);
      if (wait > 0) throw tooManyAttempts(wait);
      void this.deps.attempts.failed(undefined, source);
      throw error;
    }
    try {
      method.check?.(request, credentials);
    } catch (error) {
      refuse(error, credentials.clientId);
    }
    return credentials;
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
  ): Authenticated | Promise<Authenticated> {
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
  ): Authenticated | Promise<Authenticated> {
    const decide = (proof: Proof): Authenticated => {
      if (client && proof.proven && client.enabled) return this.admitted(client, proof, credentials);
      throw tooManyAttempts(wait);
    };
    const proof = credentials.proves(client, this.deps.now());
    return proof instanceof Promise ? proof.then(decide) : decide(proof);
  }

  /** A client proven: its secret's use noted (written off the token path), the method's note kept. */
  private admitted(
    client: KnownClient,
    proof: Proof & { proven: true },
    credentials: PresentedCredentials,
  ): Authenticated {
    if (proof.secretId !== undefined) this.deps.secretUsed?.(proof.secretId);
    return { client, note: proof.note, method: credentials.methodFor(client) };
  }

  /**
   * One path for every failure: the secret is always hashed and compared, against a dummy digest when the
   * client is unknown, so unknown, wrong and disabled give the same answer by the same work.
   */
  private prove(
    credentials: PresentedCredentials,
    request: TokenRequest,
    missing: 'invalid_request' | 'invalid_client',
  ): Authenticated | Promise<Authenticated> {
    const { clientId } = credentials;
    // An id no client can have (a NUL, 8 KiB of junk) is unknown without a cache entry or a store query.
    const found = isPossibleClientId(clientId) ? this.deps.findClient(clientId) : undefined;
    return found instanceof Promise
      ? found.then((client) => this.check(client, credentials, request, missing))
      : this.check(found, credentials, request, missing);
  }

  private check(
    client: KnownClient | undefined,
    credentials: PresentedCredentials,
    request: TokenRequest,
    missing: 'invalid_request' | 'invalid_client',
  ): Authenticated | Promise<Authenticated> {
    const proof = credentials.proves(client, this.deps.now());
    return proof instanceof Promise
      ? proof.then((proven) => this.decide(client, credentials, request, proven, missing))
      : this.decide(client, credentials, request, proof, missing);
  }

  private decide(
    client: KnownClient | undefined,
    credentials: PresentedCredentials,
    request: TokenRequest,
    proof: Proof,
    missing: 'invalid_request' | 'invalid_client',
  ): Authenticated {
    const { clientId } = credentials;
    const { source } = request;
    if (!proof.proven && proof.missing === true) {
      // No credential of the client's was presented (only its id, where a certificate could have been the
      // credential): as a request without any, never a failed attempt; a blocked caller hears 429 as for all else.
      const wait = this.deps.attempts.blockedFor(isPossibleClientId(clientId) ? clientId : undefined, source);
      if (wait > 0) throw tooManyAttempts(wait);
      throw missing === 'invalid_client'
        ? invalidClient('no client credentials')
        : invalidRequest('client_secret is required');
    }
    const failure = !client
      ? 'unknown client'
      : !proof.proven
        ? proof.failure
        : !client.enabled
          ? 'client is disabled'
          : '';
    if (!failure) return this.admitted(client!, proof as Proof & { proven: true }, credentials);
    // The limits turn failures into 429s, never a success: an enabled client with its exact secret is let
    // through even from a blocked address, so nobody sharing that address (a NAT, a proxy) can lock it
    // out. With 256-bit secrets, letting a blocked guesser learn "wrong" costs nothing.
    const possible = isPossibleClientId(clientId) ? clientId : undefined;
    const wait = this.deps.attempts.blockedFor(possible, source);
    if (wait > 0) throw tooManyAttempts(wait);
    // An id no client can have is counted against the address alone: no counter keyed by 8 KiB of junk.
    void this.deps.attempts.failed(possible, source);
    // RFC 8705 §2: a client registered for its certificate that sends it with a secret or an assertion as well uses
    // two methods (docs/interface.md). Decided once the client is known (a request cannot tell it: a mesh sends a
    // certificate with every request, whatever the client's method), and counted as the failure it also is.
    if (
      client !== undefined &&
      request.certificate !== undefined &&
      credentials.byCertificate !== true &&
      (client.tls !== undefined || client.selfSigned !== undefined)
    )
      throw invalidRequest(
        'use one client authentication method: this client authenticates with its TLS certificate; send client_id without a secret or an assertion',
      );
    throw invalidClient(failure);
  }
}
