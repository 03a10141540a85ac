import {
  decodeJwt,
  decodeProtectedHeader,
  errors,
  jwtVerify,
  type JWTPayload,
  type JWTVerifyGetKey,
  type ProtectedHeaderParameters,
} from 'jose';
import { invalidClient, invalidRequest } from '../errors.js';
import { present, type KnownClient, type TokenRequest } from '../token-types.js';
import { ASSERTION_ALGS } from './jwks.js';
import type { ClientAuthMethod, PresentedCredentials } from './method.js';

/** RFC 7523 §2.2: the one client assertion type. */
export const JWT_BEARER = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';
/** Clock skew allowed on every time of an assertion (INTERFACE.md). */
const ASSERTION_SKEW_SECONDS = 60;
/** An assertion may live at most this long: after its iat, or after now when it has none (authlib: 60 min). */
const MAX_ASSERTION_LIFETIME_SECONDS = 3600;
/** A jti longer than this is refused (it is stored as a digest; this only bounds the work). */
const MAX_JTI_LENGTH = 512;

const ALGS: readonly string[] = ASSERTION_ALGS;

/** Marks assertion ids as used until a time, across every instance (Redis, else the store). */
export interface ReplayGuard {
  /** True if `jti` was not in use for this client; false if it is (a replay). `until`: ms since the epoch. */
  use(clientId: string, jti: string, until: number): Promise<boolean>;
}

/** The keys published at a client's jwks_uri (see keys/jwks-fetcher.ts). */
export interface RemoteKeys {
  /** The URL's keys, fetched or cached; rejects with an Error whose message says why there are none. */
  keysFor(uri: string): Promise<JWTVerifyGetKey>;
  /** Fetches the URL's keys again if it was not fetched in the last minute: the new keys, or undefined. */
  refetch(uri: string): Promise<JWTVerifyGetKey | undefined>;
}

export interface PrivateKeyJwtOptions {
  issuer: string;
  tokenEndpoint: string;
  replay: ReplayGuard;
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

class AssertionFailed extends Error {}

/**
 * A client assertion (RFC 7523 §2.2), parsed but not trusted: its iss names the client; proves() checks the
 * rest. Everything that can be checked in memory is, before any key is fetched or any replay is recorded, so
 * a bad assertion costs a decode and perhaps a signature check, and never a write.
 */
class AssertionCredentials implements PresentedCredentials {
  failure: string | undefined;

  constructor(
    readonly clientId: string,
    private readonly assertion: string,
    private readonly header: ProtectedHeaderParameters,
    private readonly options: PrivateKeyJwtOptions,
  ) {}

  proves(client: KnownClient | undefined, now: number): Promise<boolean> {
    return this.verify(client, now).then(
      () => true,
      (error: unknown) => {
        this.failure = error instanceof AssertionFailed ? error.message : reasonOf(error);
        return false;
      },
    );
  }

  private async verify(client: KnownClient | undefined, now: number): Promise<void> {
    if (client === undefined) throw new AssertionFailed('unknown client');
    const keys = client.keys;
    if (keys === undefined)
      throw new AssertionFailed('client authenticates with a secret, not private_key_jwt');
    const alg = this.header.alg;
    if (typeof alg !== 'string' || !ALGS.includes(alg))
      throw new AssertionFailed('assertion algorithm not allowed');
    let payload: JWTPayload;
    if ('inline' in keys) payload = await this.check(keys.inline, now);
    else {
      let remote: JWTVerifyGetKey;
      try {
        remote = await this.options.remote.keysFor(keys.uri);
      } catch (error) {
        throw new AssertionFailed(`jwks_uri: ${(error as Error).message}`);
      }
      try {
        payload = await this.check(remote, now);
      } catch (error) {
        // A key the cached set lacks: the client may have rotated. One refetch a minute per URL, at most.
        if (!(error instanceof errors.JWKSNoMatchingKey) || this.header.kid === undefined) throw error;
        const fresh = await this.options.remote.refetch(keys.uri).catch(() => undefined);
        if (fresh === undefined) throw error;
        payload = await this.check(fresh, now);
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
    if (typeof jti !== 'string' || jti === '' || jti.length > MAX_JTI_LENGTH)
      throw new AssertionFailed('assertion jti must be a string of 1 to 512 characters');
    // Last, once everything else holds: only an assertion that would be accepted is recorded. It stays
    // recorded while it could be valid anywhere (its exp, plus the skew any instance allows).
    const fresh = await this.options.replay.use(this.clientId, jti, (exp + ASSERTION_SKEW_SECONDS) * 1000);
    if (!fresh) throw new AssertionFailed('assertion replayed');
  }

  /** Signature and claims, with jose; without a kid, every key that fits the alg is tried (authlib sends none). */
  private async check(getKey: JWTVerifyGetKey, now: number): Promise<JWTPayload> {
    const options = {
      algorithms: ALGS as string[],
      issuer: this.clientId,
      subject: this.clientId,
      audience: [this.options.issuer, this.options.tokenEndpoint],
      clockTolerance: ASSERTION_SKEW_SECONDS,
      currentDate: new Date(now),
      requiredClaims: ['exp', 'jti'],
    };
    try {
      return (await jwtVerify(this.assertion, getKey, options)).payload;
    } catch (error) {
      if (!(error instanceof errors.JWKSMultipleMatchingKeys)) throw error;
      let last: unknown = error;
      for await (const key of error as unknown as AsyncIterable<CryptoKeyLike>) {
        try {
          return (await jwtVerify(this.assertion, key, options)).payload;
        } catch (failed) {
          last = failed;
          // Only a signature that fails moves on to the next key; a bad claim fails whatever the key.
          if (!(failed instanceof errors.JWSSignatureVerificationFailed)) throw failed;
        }
      }
      throw last;
    }
  }
}

type CryptoKeyLike = Parameters<typeof jwtVerify>[1] & object;

/** The iss of a client assertion, for the audit trail only (undefined if it does not decode). */
export function assertionIssuer(assertion: string | undefined): string | undefined {
  if (assertion === undefined || assertion === '') return undefined;
  try {
    const iss = decodeJwt(assertion).iss;
    return typeof iss === 'string' ? iss : undefined;
  } catch {
    return undefined;
  }
}

/**
 * private_key_jwt (RFC 7523 §2.2, OpenID Connect Core §9): `client_assertion_type` and `client_assertion`,
 * and optionally `client_id`, which must then be the assertion's iss.
 */
export function privateKeyJwt(options: PrivateKeyJwtOptions): ClientAuthMethod {
  return {
    name: 'private_key_jwt',
    presentedIn: (request: TokenRequest) =>
      present(request.params.client_assertion) !== undefined ||
      present(request.params.client_assertion_type) !== undefined,
    parse(request: TokenRequest): PresentedCredentials {
      const type = present(request.params.client_assertion_type);
      const assertion = present(request.params.client_assertion);
      if (type === undefined) throw invalidRequest('client_assertion_type is required with client_assertion');
      if (assertion === undefined)
        throw invalidRequest('client_assertion is required with client_assertion_type');
      if (type !== JWT_BEARER) throw invalidRequest(`client_assertion_type must be ${JWT_BEARER}`);
      let header: ProtectedHeaderParameters;
      let iss: unknown;
      try {
        header = decodeProtectedHeader(assertion);
        iss = decodeJwt(assertion).iss;
      } catch {
        throw invalidClient('malformed client_assertion');
      }
      if (typeof iss !== 'string' || iss === '') throw invalidClient('client_assertion has no iss');
      const clientId = present(request.params.client_id);
      if (clientId !== undefined && clientId !== iss)
        throw invalidClient('client_id is not the client_assertion iss');
      return new AssertionCredentials(iss, assertion, header, options);
    },
  };
}
