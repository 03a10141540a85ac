import type { TokenRequest } from '../token-request.js';
import type { ClientAuthMethod } from './method.js';
import { assertionIssuer } from './assertion.js';
import { tlsCertificate, type RemoteCertificates } from './certificate.js';
import { privateKeyJwt, type PrivateKeyJwtOptions } from './private-key-jwt.js';
import { basicClientId, clientSecretBasic, clientSecretPost } from './secret.js';

/*
 * Client authentication at the token endpoint (RFC 6749 §2.3): one module per method, each a ClientAuthMethod
 * (method.ts), and the list below, in the order the token service examines a request. The token service
 * asks every method whether the request uses it, refuses a request that uses two, and lets the one used
 * prove the client; what a method knows of a client it reads from KnownClient (known-client.ts), which the
 * directory fills from the store.
 *
 * A method with parameters of its own is added here, and the token service does not change: its name in
 * AUTH_METHOD_NAMES (method.ts: a client can then be registered with it, and the admin API's schema and
 * discovery list it); a module exporting its ClientAuthMethod, given what it needs at run time as options,
 * as private_key_jwt is; its place in clientAuthMethods; and, if the id it claims is not client_id, how to
 * read that id in claimedClientId (for the audit trail of a refusal).
 *
 * Federated credentials are client assertions too (the same two parameters, RFC 7523), signed by an issuer
 * the client trusts rather than by the client's own key: a request cannot tell them from private_key_jwt, the
 * client's registration does. They are one more kind of ClientKeys (known-client.ts: the issuers the client
 * trusts, each with the subject it vouches for); private_key_jwt's method reads the request, and its proof
 * hands a client that has them to federated.ts. What both proofs share (the assertion's algorithms, the
 * signature check, keys fetched at a URL with a refetch on an unknown kid, the replay guard) is assertion.ts.
 *
 * The token service does not run the methods itself: ClientAuthenticator (authenticator.ts) does, with the
 * failed-attempt limits around them, for every endpoint a client authenticates at (token, revocation,
 * introspection).
 *
 * A TLS client certificate (RFC 8705 §2) is one method serving both of its names (certificate.ts): the client's
 * registration says which, and a certificate client that sends a secret as well uses two methods (authenticator.ts).
 *
 * DPoP (RFC 9449) is not client authentication: it proves possession of a key alongside whichever method
 * authenticated the client, so it is a step of the token service after authentication (domain/dpop.ts), reading
 * the request's DPoP header, not an entry of this list.
 */

export {
  AUTH_METHOD_NAMES,
  usesSecrets,
  validateAuthMethod,
  type AuthMethodName,
  type ClientAuthMethod,
} from './method.js';
export { clientSecretBasic, clientSecretPost, parseBasicAuthorization } from './secret.js';
export { ClientAuthenticator, type ClientAuthenticatorDeps } from './authenticator.js';
export { JWT_BEARER, type RemoteKeys, type ReplayGuard } from './assertion.js';
export type { RemoteCertificates } from './certificate.js';
export { certificateThumbprints } from './certificate-registration.js';
export type { PrivateKeyJwtOptions } from './private-key-jwt.js';
export {
  DEFAULT_MAX_LIFETIME,
  discoveryUrl,
  MAX_FEDERATED_CREDENTIALS,
  newFederatedCredentialId,
  validateCredentialName,
  validateFederatedAudience,
  validateIssuer,
  validateIssuerKeys,
  validateMaxLifetime,
  validateRequiredClaims,
  validateSubject,
  type ClaimValue,
  type FederatedCredential,
} from './federation-rules.js';
export {
  algsForKey,
  ASSERTION_ALGS,
  checkJwksKeys,
  MAX_CLIENT_KEYS,
  rsaJwkProblem,
  validateJwks,
  validateJwksUri,
  type PublicJwks,
} from './jwks.js';

/** The secret methods: what a token service that is given no list uses (they need nothing at run time). */
export const SECRET_METHODS: readonly ClientAuthMethod[] = [clientSecretBasic, clientSecretPost];

/**
 * Every method the token endpoint accepts, in the order a request is examined; discovery lists the same. The TLS
 * client certificate methods (RFC 8705) only where a certificate can arrive: TLS served, or a proxy's header read.
 */
export function clientAuthMethods(options: {
  privateKeyJwt: PrivateKeyJwtOptions;
  /** Where a certificate can arrive: the certificates published at a self-signed client's jwks_uri; else undefined. */
  certificates: { remote: RemoteCertificates } | undefined;
}): ClientAuthMethod[] {
  const methods = [...SECRET_METHODS, privateKeyJwt(options.privateKeyJwt)];
  if (options.certificates !== undefined) methods.push(tlsCertificate(options.certificates));
  return methods;
}

/**
 * The client id a request claims, whichever method it uses, for the audit trail of a refusal only (nothing
 * here is verified): client_id, else the id of a Basic header, else the iss of a client assertion.
 */
export const claimedClientId = (request: TokenRequest): string | undefined =>
  request.params.client_id ??
  basicClientId(request.authorization) ??
  assertionIssuer(request.params.client_assertion);
