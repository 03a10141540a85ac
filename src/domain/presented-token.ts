import { DPOP_ALGS, type DpopVerifier } from './dpop.js';
import { OAuthError } from './errors.js';
import { dpopKeyOf, verifyOwnToken, type OwnTokenClaims, type OwnTokenDeps } from './own-tokens.js';
import { normalizedHttpUri } from './uri.js';

/*
 * A token of this server presented to one of its own endpoints that take its tokens (the admin API), as a
 * resource server takes it (RFC 6750 §2.1, RFC 9449 §7): the one verifier of this server's tokens (own-tokens.ts)
 * and then the token's binding. A token bound to a certificate (cnf.x5t#S256, RFC 8705 §3) is good only with that
 * certificate on the request; a token bound to a DPoP key (cnf.jkt) only with the DPoP scheme and a
 * proof for this very request by that key; a token bound to neither only as Bearer (docs/interface.md, DPoP: "Tessera's own
 * endpoints that take its tokens honour the binding"). No endpoint decides that on its own.
 */

/** How a request presents a token. */
export interface Presentation {
  /** The Authorization header, as received. */
  authorization: string | undefined;
  /** The DPoP header, as received (two arrive joined by a comma, which the verifier refuses). */
  dpop: string | undefined;
  method: string;
  /** The URL the request was sent to as its client names it: this server's public origin and the path. */
  url: string;
  /** The TLS client certificate of the request (its connection's, or a trusted proxy's header), if any. */
  certificate?: { readonly thumbprint: string } | undefined;
}

/** RFC 6750 §3 and RFC 9449 §7.1: the scheme of a challenge. */
export type TokenScheme = 'Bearer' | 'DPoP';

/** RFC 6750 §3.1 and RFC 9449 §7.1's error codes of a refused presentation. */
type PresentationError = 'invalid_request' | 'invalid_token' | 'invalid_dpop_proof' | 'use_dpop_nonce';

export type PresentedToken =
  | { ok: true; claims: OwnTokenClaims; scheme: TokenScheme }
  | {
      ok: false;
      /** The scheme whose challenge carries the error: the one the request used (Bearer when it used none). */
      scheme: TokenScheme;
      error: PresentationError;
      description: string;
      /** With use_dpop_nonce: the nonce to use. */
      nonce?: string;
    };

/** RFC 6750 §2.1 and RFC 9449 §7.1: the scheme, then a token68. */
const AUTHORIZATION = /^(Bearer|DPoP) +([A-Za-z0-9._~+/-]+=*) *$/i;

/** The token an Authorization header presents (Bearer or DPoP), unverified; undefined for any other header. */
export const presentedTokenOf = (authorization: string | undefined): string | undefined =>
  authorization === undefined ? undefined : AUTHORIZATION.exec(authorization)?.[2];

/** The algorithms a proof may use, for a DPoP challenge's `algs` (RFC 9449 §7.1). */
export const DPOP_CHALLENGE_ALGS = DPOP_ALGS.join(' ');

const refused = (scheme: TokenScheme, error: PresentationError, description: string): PresentedToken => ({
  ok: false,
  scheme,
  error,
  description,
});

/** What verifying a presented token reads: the one verifier's, and the DPoP proof verifier. */
export interface PresentationDeps extends OwnTokenDeps {
  dpop: DpopVerifier;
}

/**
 * Whether the request presents an active token of this server, presented as its binding requires, and `audience`
 * among its audiences. In this order, so that a proof costs nothing for a token that would be refused anyway:
 * the header's form, the token (own-tokens.ts: signature, typ, iss, exp, denylist, its client's standing), the
 * audience, the certificate it is bound to, the scheme against the DPoP binding, then the proof (htm, htu, ath, its key the token's, its jti single-use
 * on every instance). Throws only what the proof verifier cannot decide (503: the replay guard away).
 */
export async function verifyPresentedToken(
  presentation: Presentation,
  audience: string,
  deps: PresentationDeps,
): Promise<PresentedToken> {
  const { authorization } = presentation;
  if (authorization === undefined)
    return refused('Bearer', 'invalid_token', 'an access token is required (Authorization: Bearer or DPoP)');
  const match = AUTHORIZATION.exec(authorization);
  if (!match)
    return refused('Bearer', 'invalid_token', 'the Authorization header is not a Bearer or DPoP token');
  const scheme: TokenScheme = match[1]!.toLowerCase() === 'dpop' ? 'DPoP' : 'Bearer';
  const token = match[2]!;
  const verdict = verifyOwnToken(token, deps);
  if (!verdict.active)
    return refused(
      scheme,
      'invalid_token',
      verdict.why === 'client'
        ? 'the client of this token is disabled or deleted'
        : verdict.why === 'revoked'
          ? 'the access token has been revoked'
          : 'the access token is not valid for this API',
    );
  const { claims } = verdict;
  const { aud } = claims;
  if (aud !== audience && !(Array.isArray(aud) && aud.includes(audience)))
    return refused(scheme, 'invalid_token', 'the access token is not valid for this API');

  // RFC 8705 §3: a certificate-bound token is good only with that certificate on the request.
  const x5t = claims.cnf?.['x5t#S256'];
  if (x5t !== undefined && presentation.certificate?.thumbprint !== x5t)
    return refused(
      scheme,
      'invalid_token',
      'the access token is bound to a TLS client certificate: present it with that certificate',
    );

  const jkt = dpopKeyOf(claims);
  if (jkt === undefined) {
    if (scheme === 'DPoP')
      return refused(
        'DPoP',
        'invalid_token',
        'the access token is not bound to a DPoP key: present it as Bearer',
      );
    return { ok: true, claims, scheme };
  }
  // RFC 9449 §7.1: a DPoP-bound token is worth nothing as a bearer token.
  if (scheme === 'Bearer')
    return refused(
      'DPoP',
      'invalid_token',
      'the access token is bound to a DPoP key: present it with the DPoP scheme and a proof',
    );
  if (presentation.dpop === undefined)
    return refused('DPoP', 'invalid_dpop_proof', 'a DPoP proof is required with a DPoP-bound token');
  const htu = normalizedHttpUri(presentation.url);
  if (htu === undefined) return refused('DPoP', 'invalid_request', 'the request URL is not an http(s) URL');
  let proven: string;
  try {
    proven = await deps.dpop.verify(presentation.dpop, deps.now(), {
      htm: presentation.method,
      htu,
      accessToken: token,
    });
  } catch (error) {
    if (!(error instanceof OAuthError)) throw error;
    // RFC 9449 §9: a resource server's nonce, the same one the token endpoint gives (derived, on every instance).
    if (error.error === 'use_dpop_nonce')
      return {
        ok: false,
        scheme: 'DPoP',
        error: 'use_dpop_nonce',
        description: 'this API requires a nonce in the DPoP proof',
        ...(error.headers['dpop-nonce'] === undefined ? {} : { nonce: error.headers['dpop-nonce'] }),
      };
    if (error.error === 'invalid_dpop_proof') return refused('DPoP', 'invalid_dpop_proof', error.description);
    throw error;
  }
  // RFC 9449 §4.3 check 12 with §6.1: the proof's key is the one the token is bound to.
  if (proven !== jkt)
    return refused(
      'DPoP',
      'invalid_token',
      'the DPoP proof is signed by another key than the token is bound to',
    );
  return { ok: true, claims, scheme };
}
