import type { ClientCertificate } from './mtls/certificate.js';

/*
 * A request at an endpoint where a client authenticates (token, revocation, introspection), as the HTTP layer
 * hands it to the domain, and the token endpoint's answer.
 */

/**
 * The request parameters Tessera reads at the endpoints where a client authenticates (RFC 6749 §4.4.2, RFC 8707
 * §2; token exchange's, RFC 8693 §2.1; the token of revocation and introspection, RFC 7009 §2.1 and RFC 7662
 * §2.1); others are ignored.
 */
export const TOKEN_PARAMS = [
  'grant_type',
  'client_id',
  'client_secret',
  'audience',
  'resource',
  'scope',
  'client_assertion_type',
  'client_assertion',
  'subject_token',
  'subject_token_type',
  'actor_token',
  'actor_token_type',
  'requested_token_type',
  'token',
  'token_type_hint',
] as const;
export type TokenParam = (typeof TOKEN_PARAMS)[number];
export type TokenParams = Partial<Record<TokenParam, string>>;

/** Empty values count as missing (RFC 6749 §3.2: "Parameters sent without a value MUST be treated as if omitted"). */
export const present = (value: string | undefined): string | undefined => (value === '' ? undefined : value);

export interface TokenRequest {
  params: TokenParams;
  /** The Authorization header, if any (client_secret_basic). */
  authorization?: string | undefined;
  /** The caller's address, for the failed-attempt limits. */
  source: string;
  /** The DPoP header, if any (RFC 9449 §4): several arrive joined by commas. */
  dpop?: string | undefined;
  /**
   * The TLS client certificate it came with (RFC 8705): on the connection, or from a trusted proxy's header; undefined
   * without one, and always when neither TLS nor a certificate header is configured.
   */
  certificate?: ClientCertificate | undefined;
  /** Told which client authenticated, and how, as soon as it has (a trace's attributes, even of a later refusal). */
  onAuthenticated?: ((clientId: string, method: string) => void) | undefined;
}

export interface TokenResponse {
  access_token: string;
  /** Token exchange's answer only (RFC 8693 §2.2.1): the type of the token issued, always an access token. */
  issued_token_type?: 'urn:ietf:params:oauth:token-type:access_token';
  /** DPoP when the token is bound to the key of a DPoP proof (RFC 9449 §5). */
  token_type: 'Bearer' | 'DPoP';
  expires_in: number;
  /** The token's scopes, when it carries any (RFC 6749 §5.1). */
  scope?: string;
}
