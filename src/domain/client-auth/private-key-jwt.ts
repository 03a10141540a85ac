import { errors, type JWTPayload, type JWTVerifyGetKey } from 'jose';
import { invalidClient, invalidRequest, OAuthError, Unavailable } from '../errors.js';
import type { KnownClient } from '../known-client.js';
import { present, type TokenRequest } from '../token-request.js';
import {
  allowedAlg,
  ASSERTION_SKEW_SECONDS,
  AssertionFailed,
  JWT_BEARER,
  KeysUnavailable,
  parseAssertion,
  usableJti,
  verifyAtPlace,
  verifyJwt,
  VERIFY_ALGS,
  type ParsedAssertion,
  type RemoteKeys,
  type ReplayGuard,
} from './assertion.js';
import { proveFederated } from './federated.js';
import {
  failedProof,
  type ClientAuthMethod,
  type PresentedCredentials,
  type Proof,
  type AuthMethodName,
} from './method.js';

/** An assertion may live at most this long: after its iat, or after now when it has none (authlib: 60 min). */
const MAX_ASSERTION_LIFETIME_SECONDS = 3600;
/** RFC 7523 §3: an exp, and a jti (single use, RFC 7523 §3 item 7, required by docs/interface.md). */
const REQUIRED_CLAIMS = ['exp', 'jti'] as const;

export interface PrivateKeyJwtOptions {
  issuer: string;
  tokenEndpoint: string;
  replay: ReplayGuard;
  /** The keys of clients' jwks_uri and of federated credentials' issuers. */
  remote: RemoteKeys;
}

/** Why an assertion failed, in the words of the audit trail; never the assertion itself. */
function reasonOf(error: unknown): string {
  if (error instanceof errors.JWTExpired) return 'assertion expired';
  if (error instanceof errors.JWTClaimValidationFailed) {
    switch (error.claim) {
      case 'nbf':
        return 'assertion not yet valid (nbf)';
      case 'aud':
        return 'assertion aud is neither the issuer nor the token endpoint';
      case 'iss':
      case 'sub':
        return 'assertion iss and sub must both be the client id';
      case 'exp':
      case 'jti':
        return `assertion has no ${error.claim}`;
      default:
        return `assertion ${error.claim} is invalid`;
    }
  }
  if (error instanceof errors.JOSEAlgNotAllowed) return 'assertion algorithm not allowed';
  if (error instanceof errors.JWSSignatureVerificationFailed) return 'assertion signature does not verify';
  if (error instanceof errors.JWKSNoMatchingKey) return 'unknown kid';
  return 'malformed assertion';
}

/**
 * A client assertion (RFC 7523 §2.2), parsed but not trusted: client_id, else its iss, names the client, whose
 * registration says which proof applies: its own keys (private_key_jwt), or its federated credentials
 * (federated.ts). proves() checks the rest. Everything that can be checked in memory is, before any key is
 * fetched or any replay is recorded, so a bad assertion costs a decode and perhaps a signature check, and never
 * a write.
 */
class AssertionCredentials implements PresentedCredentials {
  constructor(
    readonly clientId: string,
    private readonly assertion: ParsedAssertion,
    /** Whether the request named the client by client_id (else clientId is the assertion's iss). */
    private readonly clientIdSent: boolean,
    private readonly options: PrivateKeyJwtOptions,
  ) {}

  /** A federated credential is sent as a client assertion too (RFC 7523): the method is private_key_jwt. */
  methodFor(): AuthMethodName {
    return 'private_key_jwt';
  }

  proves(client: KnownClient | undefined, now: number): Promise<Proof> {
    return this.verify(client, now).then(
      (note): Proof => ({ proven: true, note }),
      (error: unknown) => {
        // The replay guard could not tell (503, temporarily_unavailable): not a failed proof, and not counted as one.
        if (error instanceof OAuthError || error instanceof Unavailable) throw error;
        return failedProof(error instanceof AssertionFailed ? error.message : reasonOf(error));
      },
    );
  }

  /** Resolves when the assertion proves `client`, with what a federated credential says of it; else rejects. */
  private async verify(client: KnownClient | undefined, now: number): Promise<string | undefined> {
    if (client === undefined) throw new AssertionFailed('unknown client');
    const keys = client.keys;
    if (keys === undefined)
      throw new AssertionFailed('client authenticates with a secret, not private_key_jwt');
    if ('federated' in keys) {
      const credential = await proveFederated(
        this.assertion,
        client.id,
        this.clientIdSent,
        keys.federated,
        now,
        this.options,
      );
      return credential.note;
    }
    // Only a federated credential's token has an iss that is not the client (docs/interface.md).
    if (this.assertion.payload.iss !== this.clientId)
      throw new AssertionFailed('client_id is not the client_assertion iss');
    if (!allowedAlg(this.assertion.header)) throw new AssertionFailed('assertion algorithm not allowed');
    let payload: JWTPayload;
    if ('inline' in keys) payload = await this.check(keys.inline, now);
    else {
      try {
        payload = await verifyAtPlace(this.options.remote, keys, this.assertion.header.kid, (remote) =>
          this.check(remote, now),
        );
      } catch (error) {
        if (error instanceof KeysUnavailable) throw new AssertionFailed(`jwks_uri: ${error.message}`);
        throw error;
      }
    }
    const nowSeconds = Math.floor(now / 1000);
    const exp = payload.exp!;
    const from = typeof payload.iat === 'number' ? payload.iat : nowSeconds;
    if (
      exp - from > MAX_ASSERTION_LIFETIME_SECONDS ||
      exp - nowSeconds > MAX_ASSERTION_LIFETIME_SECONDS + ASSERTION_SKEW_SECONDS
    )
      throw new AssertionFailed('assertion exp is more than 60 minutes ahead');
    const jti = payload.jti;
    if (!usableJti(jti)) throw new AssertionFailed('assertion jti must be a string of 1 to 512 characters');
    // Last, once everything else holds: only an assertion that would be accepted is recorded. It stays
    // recorded while it could be valid anywhere (its exp, plus the skew any instance allows).
    const fresh = await this.options.replay.use(this.clientId, jti, (exp + ASSERTION_SKEW_SECONDS) * 1000);
    if (!fresh) throw new AssertionFailed('assertion replayed');
    return undefined;
  }

  /** Signature and claims (RFC 7523 §3). */
  private check(getKey: JWTVerifyGetKey, now: number): Promise<JWTPayload> {
    return verifyJwt(this.assertion, getKey, {
      algorithms: VERIFY_ALGS,
      issuer: this.clientId,
      subject: this.clientId,
      audience: [this.options.issuer, this.options.tokenEndpoint],
      clockTolerance: ASSERTION_SKEW_SECONDS,
      now,
      requiredClaims: REQUIRED_CLAIMS,
    });
  }
}

/**
 * private_key_jwt (RFC 7523 §2.2, OpenID Connect Core §9): `client_assertion_type` and `client_assertion`,
 * and `client_id`, which must then be the assertion's iss unless the client has federated credentials (then it
 * is required, and the iss is the platform's).
 */
export function privateKeyJwt(options: PrivateKeyJwtOptions): ClientAuthMethod {
  return {
    names: ['private_key_jwt'],
    presentedIn: (request: TokenRequest) =>
      present(request.params.client_assertion) !== undefined ||
      present(request.params.client_assertion_type) !== undefined,
    parse(request: TokenRequest): PresentedCredentials {
      const type = present(request.params.client_assertion_type);
      const jwt = present(request.params.client_assertion);
      if (type === undefined) throw invalidRequest('client_assertion_type is required with client_assertion');
      if (jwt === undefined) throw invalidRequest('client_assertion is required with client_assertion_type');
      if (type !== JWT_BEARER) throw invalidRequest(`client_assertion_type must be ${JWT_BEARER}`);
      // Decoded once, as verifyJwt reads it: its checks of the header and the claims take it.
      const assertion = parseAssertion(jwt);
      if (assertion === undefined) throw invalidClient('malformed client_assertion');
      const { header, payload } = assertion;
      // RFC 8725 §3.11, RFC 9068 §4: an access token is never a client credential, whatever signed it (this
      // server's own tokens as a federated credential's platform tokens, a token of another server as an
      // assertion). Media types compare case-insensitively, and "application/" may be left out (RFC 7515 §4.1.9).
      if (typeof header.typ === 'string' && /^(?:application\/)?at\+jwt$/i.test(header.typ))
        throw invalidClient('client_assertion is an access token (typ at+jwt), not a client credential');
      const iss = payload.iss;
      if (typeof iss !== 'string' || iss === '') throw invalidClient('client_assertion has no iss');
      const clientId = present(request.params.client_id);
      // A client_id other than the iss is checked once the client is known: only a federated one accepts it.
      return new AssertionCredentials(clientId ?? iss, assertion, clientId !== undefined, options);
    },
  };
}
