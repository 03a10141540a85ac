import type { KnownClient } from '../known-client.js';
import type { TokenRequest } from '../token-request.js';
import { ValidationError } from '../validate.js';
import type { PublicJwks } from './jwks.js';

/**
 * How a client authenticates at the token endpoint, by RFC 7591's names (docs/interface.md, "Client
 * authentication"). A client with secrets may use either secret method, whichever it is registered with;
 * a private_key_jwt client has no secret that works.
 */
export const AUTH_METHOD_NAMES = [
  'client_secret_basic',
  'client_secret_post',
  'private_key_jwt',
  // RFC 8705 §2.1 and §2.2: a TLS client certificate is the credential (docs/mtls.md).
  'tls_client_auth',
  'self_signed_tls_client_auth',
] as const;
export type AuthMethodName = (typeof AUTH_METHOD_NAMES)[number];

export const usesSecrets = (method: AuthMethodName): boolean =>
  method === 'client_secret_basic' || method === 'client_secret_post';

export function validateAuthMethod(value: string): AuthMethodName {
  if (!(AUTH_METHOD_NAMES as readonly string[]).includes(value))
    throw new ValidationError(`token_endpoint_auth_method must be one of ${AUTH_METHOD_NAMES.join(', ')}`);
  return value as AuthMethodName;
}

/**
 * The rule of a client's method and keys: private_key_jwt has at most one of jwks and jwks_uri (neither: a
 * client that authenticates with federated credentials, or has no credential yet and gets no token); a
 * secret method has neither. Returns the message of the first rule broken, or undefined.
 */
export function authMethodProblem(
  method: AuthMethodName,
  jwks: PublicJwks | null,
  jwksUri: string | null,
): string | undefined {
  if (method === 'private_key_jwt') {
    if (jwks !== null && jwksUri !== null) return 'give jwks or jwks_uri, not both';
    return undefined;
  }
  if (jwks !== null || jwksUri !== null)
    return `jwks and jwks_uri are for private_key_jwt; this client uses ${method}`;
  return undefined;
}

/**
 * What a proof of a client's credential found: proven, with what the method has to say of it; or not, and why.
 * A result, never a change to the credentials: the authenticator reads it and decides.
 */
export type Proof =
  | {
      readonly proven: true;
      /** The id of the secret that matched, if the method uses secrets (its last use is noted). */
      readonly secretId?: string | undefined;
      /**
       * The audit trail's reason of the issued token, if the method has something to say of it (a federated
       * credential names itself and the platform's subject).
       */
      readonly note?: string | undefined;
    }
  | {
      readonly proven: false;
      /** Why, for the audit trail (never the credential itself). */
      readonly failure: string;
      /**
       * The request carries no credential this client could use (it sent only its client_id, and authenticates with
       * a secret, or is unknown): answered as a request without credentials is, not counted as a failed attempt.
       */
      readonly missing?: true;
    };

/** A failed proof, by its reason. */
export const failedProof = (failure: string): Proof => ({ proven: false, failure });

/** What a request presented to authenticate as a client, by one method. */
export interface PresentedCredentials {
  clientId: string;
  /**
   * Whether the credential proves `client` (undefined: no such client) at `now` (ms). For a secret, the same
   * work either way, so that an unknown client and a wrong secret cannot be told apart by time. A promise
   * only for a method that must wait (an assertion: its keys, its replay check).
   */
  proves(client: KnownClient | undefined, now: number): Proof | Promise<Proof>;
  /** True for a TLS client certificate (certificate.ts): the credential of the clients registered for RFC 8705. */
  readonly byCertificate?: boolean;
  /**
   * The method these credentials are of, by its RFC 8414 name; for a certificate, which of the two RFC 8705 methods
   * depends on the client (the method of the authenticated client).
   */
  methodFor(client: KnownClient): AuthMethodName;
}

/**
 * One way of authenticating a client at the token endpoint (RFC 6749 §2.3). The token service asks every
 * method whether the request uses it; exactly one may (index.ts lists them).
 */
export interface ClientAuthMethod {
  /**
   * The names of RFC 8414's token_endpoint_auth_methods_supported that it serves: those a client can be registered
   * with. Usually one; a TLS client certificate serves both RFC 8705 methods, which only the client's registration
   * tells apart (a request cannot).
   */
  readonly names: readonly AuthMethodName[];
  /** Whether the request uses this method, by a look at what it carries (nothing is parsed yet). */
  presentedIn(request: TokenRequest): boolean;
  /**
   * The credentials, parsed. Throws invalid_client for credentials that are malformed (a failed
   * authentication: counted against the caller), invalid_request for a request that is malformed otherwise.
   */
  parse(request: TokenRequest): PresentedCredentials;
  /** Checks the rest of the request against the method, once it is the only one used (invalid_request). */
  check?(request: TokenRequest, credentials: PresentedCredentials): void;
}
