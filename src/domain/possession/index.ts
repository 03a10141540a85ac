import type { GrantResult } from '../grants/grant.js';
import type { KnownClient } from '../known-client.js';
import type { TokenRequest } from '../token-request.js';

/*
 * Proof of possession (docs/design.md, "Where the next capabilities plug in"): a token is bound to a key its
 * client proves it holds, by one kind of proof each (a TLS client certificate, RFC 8705: certificate.ts; DPoP, RFC 9449: dpop.ts).
 * The token service asks every proof, after the grant decided and before the quota, whether it has anything to
 * do for the request; each that has returns the `cnf` member it binds the token by, or throws its refusal.
 */

/** What one proof binds a token by: its `cnf` member (RFC 7800), and the token type it makes the token. */
export interface Binding {
  /** The confirmation member, e.g. `jkt` (RFC 9449 §6.1). */
  readonly member: string;
  readonly value: string;
  /** RFC 9449 §7.1: a DPoP-bound token is of type DPoP; a certificate-bound one stays Bearer (RFC 8705 §3). */
  readonly tokenType: 'Bearer' | 'DPoP';
}

export interface PossessionProof {
  /**
   * Whether the request has anything for this proof to do: a proof presented, a client registered for it, or a
   * grant that requires it (a bound subject token). Memory only; false for the plain request, which then pays
   * nothing more.
   */
  applies(request: TokenRequest, client: KnownClient, decided: GrantResult): boolean;
  /** The binding, once the request proves possession; throws the refusal (a failed attempt where it is one). */
  prove(request: TokenRequest, client: KnownClient, decided: GrantResult, now: number): Promise<Binding>;
}
