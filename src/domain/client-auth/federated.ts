import { errors, type JWTPayload, type JWTVerifyGetKey } from 'jose';
import type { KnownFederatedCredential } from '../known-client.js';
import {
  allowedAlg,
  ASSERTION_SKEW_SECONDS,
  AssertionFailed,
  KeysUnavailable,
  usableJti,
  verifyAtPlace,
  verifyJwt,
  VERIFY_ALGS,
  type ParsedAssertion,
  type RemoteKeys,
  type ReplayGuard,
} from './assertion.js';
import type { JwtChecks } from './verify-jwt.js';

/*
 * Workload identity federation (docs/interface.md): the client assertion is a platform's token (a Kubernetes
 * service-account token, a GitHub Actions or GitLab CI OIDC token, a SPIFFE JWT-SVID) and one of the client's
 * federated credentials must match it. The request is private_key_jwt's (private-key-jwt.ts reads it and
 * comes here for a client registered with federated credentials), with client_id required: the token's iss is
 * the platform, not the client.
 *
 * Everything that can be checked in memory is, for every credential of the token's issuer, before any key is
 * fetched and before a `once` token's jti is recorded: a token that cannot match costs a decode, never a
 * fetch or a write. Every refusal's reason starts with `federated: `.
 */

const fail = (why: string): AssertionFailed => new AssertionFailed(`federated: ${why}`);

const SKEW = ASSERTION_SKEW_SECONDS;

/** A time claim: absent, or a finite number (RFC 7519 §2 NumericDate); anything else is a refusal. */
const numericDate = (value: unknown): boolean =>
  value === undefined || (typeof value === 'number' && Number.isFinite(value));

/** The token's own times, whatever the credential (60 s skew, as jose counts it). */
function timeProblem(payload: JWTPayload, now: number): string | undefined {
  const { exp, nbf, iat } = payload;
  if (exp === undefined) return 'token has no exp';
  if (!numericDate(exp)) return 'token exp is not a number';
  if (exp <= now - SKEW) return 'token expired';
  if (!numericDate(nbf)) return 'token nbf is not a number';
  if (nbf !== undefined && nbf > now + SKEW) return 'not yet valid (nbf)';
  if (!numericDate(iat)) return 'token iat is not a number';
  if (iat !== undefined && iat > now + SKEW) return 'issued in the future (iat)';
  return undefined;
}

/**
 * Why `credential` does not accept the token, with how far the token got (a higher rank is a closer match:
 * of several credentials of one issuer, the refusal names the closest one's reason); undefined if it does.
 */
function credentialProblem(
  credential: KnownFederatedCredential,
  payload: JWTPayload,
  now: number,
): { rank: number; why: string } | undefined {
  if (payload.sub !== credential.subject) return { rank: 1, why: 'subject does not match' };
  const aud = payload.aud;
  // RFC 7519 §4.1.3: a string, or an array of them of which one must be ours.
  if (aud !== credential.audience && !(Array.isArray(aud) && aud.includes(credential.audience)))
    return { rank: 2, why: 'audience does not match' };
  for (const [name, value] of credential.claims)
    if (!Object.hasOwn(payload, name) || payload[name] !== value)
      return { rank: 3, why: `claim ${name} does not match` };
  const from = payload.iat ?? now;
  if (payload.exp! - from > credential.maxLifetime) return { rank: 4, why: 'lifetime over max_lifetime' };
  if (credential.once && !usableJti(payload.jti)) return { rank: 5, why: 'jti required' };
  return undefined;
}

/** Why a signature check failed, in the audit trail's words. */
function signatureProblem(error: unknown): AssertionFailed {
  if (error instanceof AssertionFailed) return error;
  if (error instanceof KeysUnavailable) return fail(`issuer keys unavailable: ${error.message}`);
  if (error instanceof errors.JWKSNoMatchingKey) return fail('unknown kid');
  if (error instanceof errors.JWSSignatureVerificationFailed) return fail('signature does not verify');
  if (error instanceof errors.JOSEAlgNotAllowed) return fail('algorithm not allowed');
  // The times were checked already, with the same skew: these only for a token that is wrong in jose's eyes.
  if (error instanceof errors.JWTExpired) return fail('token expired');
  if (error instanceof errors.JWTClaimValidationFailed) return fail(`token ${error.claim} is invalid`);
  return fail('malformed token');
}

/** The token's signature by a key of the credential's issuer, and of no one else. */
function verifySignature(
  assertion: ParsedAssertion,
  credential: KnownFederatedCredential,
  now: number,
  remote: RemoteKeys,
): Promise<JWTPayload> {
  const options: JwtChecks = { algorithms: VERIFY_ALGS, clockTolerance: SKEW, now };
  const keys = credential.keys;
  const verify = (getKey: JWTVerifyGetKey) => verifyJwt(assertion, getKey, options);
  if ('inline' in keys) return verify(keys.inline);
  return verifyAtPlace(remote, keys, assertion.header.kid, verify);
}

/**
 * The credential of `credentials` (a client's) that accepts the platform token `assertion` at `now` (ms), or
 * an AssertionFailed whose message is the audit trail's reason. `clientIdSent`: the request named the client
 * by client_id (required here).
 */
export async function proveFederated(
  assertion: ParsedAssertion,
  clientId: string,
  clientIdSent: boolean,
  credentials: readonly KnownFederatedCredential[],
  now: number,
  options: { remote: RemoteKeys; replay: ReplayGuard },
): Promise<KnownFederatedCredential> {
  if (credentials.length === 0) throw fail('client has no federated credentials');
  // The token's iss is the platform: without client_id it was taken for the client id (as private_key_jwt
  // has it), and that is no way to name a federated client.
  if (!clientIdSent) throw fail('client_id is required');
  if (!allowedAlg(assertion.header)) throw fail('algorithm not allowed');
  const { payload } = assertion;
  const nowSeconds = Math.floor(now / 1000);

  // In memory: the credentials of this issuer, then the token's times, then each credential's rules.
  let ofIssuer = 0;
  let closest: { rank: number; why: string } | undefined;
  const matching: KnownFederatedCredential[] = [];
  for (const credential of credentials) {
    if (credential.issuer !== payload.iss) continue;
    if (ofIssuer++ === 0) {
      const time = timeProblem(payload, nowSeconds);
      if (time !== undefined) throw fail(time);
    }
    const problem = credentialProblem(credential, payload, nowSeconds);
    if (problem === undefined) matching.push(credential);
    else if (closest === undefined || problem.rank > closest.rank) closest = problem;
  }
  if (ofIssuer === 0) throw fail('issuer not trusted by this client');
  if (matching.length === 0) throw fail(closest!.why);

  // The signature, by the keys of the issuer of a credential that matched (several may: one issuer, one
  // subject, keys found two ways); the first that verifies is the one used.
  let chosen: KnownFederatedCredential | undefined;
  let failure: unknown;
  for (const credential of matching) {
    try {
      await verifySignature(assertion, credential, now, options.remote);
      chosen = credential;
      break;
    } catch (error) {
      failure ??= error;
    }
  }
  if (chosen === undefined) throw signatureProblem(failure);

  // Last, once everything else holds: only a token that would be accepted is recorded, while it could be
  // valid anywhere (its exp, plus the skew). Its scope is the client and the issuer, which no client's own
  // assertions share (a client id has no space): one platform's jtis never collide with another's.
  if (chosen.once) {
    const fresh = await options.replay.use(
      `${clientId} ${chosen.issuer}`,
      payload.jti as string,
      (payload.exp! + SKEW) * 1000,
    );
    if (!fresh) throw fail('token replayed');
  }
  return chosen;
}
