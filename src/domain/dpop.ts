import { createHash, createHmac, KeyObject } from 'node:crypto';
import { calculateJwkThumbprint, EmbeddedJWK, type ProtectedHeaderParameters } from 'jose';
import type { ReplayGuard } from './client-auth/index.js';
import { invalidDpopProof, useDpopNonce } from './errors.js';
import {
  ASSERTION_ALGS,
  compactJws,
  isJsonObject,
  jsonPart,
  MAX_JTI_LENGTH,
  signatureCheck,
  usableJti,
  verifyingKeyFits,
  type AssertionAlg,
  type SignatureBytesCheck,
} from './jose.js';
import { normalizedHttpUri } from './uri.js';

/*
 * DPoP (RFC 9449): a token request may carry a proof that its sender holds a private key; the token is then
 * bound to that key (`cnf.jkt`, RFC 9449 §6.1) and its type is DPoP. This is the one verifier of that kind of
 * proof; the token service asks it after the client is authenticated.
 */

/** The algorithms a proof may be signed with: asymmetric ones only, as for client assertions (docs/interface.md). */
export const DPOP_ALGS: readonly string[] = ASSERTION_ALGS;

/** A proof is accepted within this many seconds of its iat, either way (docs/interface.md). */
const PROOF_WINDOW_SECONDS = 60;
/** The longest proof read: room for an RSA key of 8192 bits in its header; the rest is refused unread. */
const MAX_PROOF_LENGTH = 8192;
/** JWK members that only a private or symmetric key has (RFC 7518 §6.2.2, §6.3.2, §6.4; RFC 8037 §2). */
const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'] as const;
/**
 * The replay guard's scope of a proof's jti, before the key's thumbprint: a client's own assertions are scoped
 * by its id, which has no colon, a federated token's by `<client id> <issuer>`, whose first colon comes after
 * a space; so no proof's jti meets an assertion's.
 */
const REPLAY_SCOPE = 'dpop:';

/**
 * Nonces (RFC 9449 §8) derived, not stored: an HMAC of the number of the current time window under a key every
 * instance shares, so any instance accepts what another gave, with no store operation per proof. The nonce of
 * the current window and of the one before are accepted: a nonce is good for one to two windows.
 */
export class DpopNonces {
  private window = Number.NaN;
  private current = '';
  private previous = '';

  constructor(
    private readonly key: Uint8Array,
    /** Milliseconds; a nonce is accepted for at least this long. */
    private readonly windowMs = 120_000,
  ) {}

  /** The nonce to give out now. */
  now(now: number): string {
    this.roll(now);
    return this.current;
  }

  /** Whether `nonce` is one given out in this window or the one before. */
  accepts(nonce: unknown, now: number): boolean {
    this.roll(now);
    return typeof nonce === 'string' && (nonce === this.current || nonce === this.previous);
  }

  private roll(now: number): void {
    const window = Math.floor(now / this.windowMs);
    if (window === this.window) return;
    this.previous = window === this.window + 1 ? this.current : this.of(window - 1);
    this.current = this.of(window);
    this.window = window;
  }

  private of(window: number): string {
    // 128 bits of the HMAC: unguessable without the key, 22 characters in the header.
    return createHmac('sha256', this.key).update(`dpop nonce ${window}`).digest('base64url').slice(0, 22);
  }
}

/**
 * What a proof must be for (RFC 9449 §4.3 checks 8, 9 and 12): the request's method and URL, and, when it comes
 * with an access token (at a resource: RFC 9449 §7), that token's hash.
 */
export interface ProofTarget {
  htm: string;
  /** The URL the request was sent to, in the normal form of normalizedHttpUri (query and fragment dropped). */
  htu: string;
  /** RFC 9449 §4.3 check 12: the access token the proof comes with, whose hash its `ath` must be. */
  accessToken?: string;
}

export interface DpopOptions {
  /** The token endpoint's URL, which a proof's htu must name (RFC 9449 §4.3 check 9). */
  tokenEndpoint: string;
  /** Proof ids in use, across every instance (the same guard as client assertions' ids). */
  replay: ReplayGuard;
  /** With TESSERA_DPOP_NONCE=true: the nonces a proof must carry. */
  nonces?: DpopNonces | undefined;
}

/** A proof's key, imported once: its thumbprint and the check of its signatures under the header's alg. */
interface ProofKey {
  jkt: string;
  check: SignatureBytesCheck;
}

/** Proof keys kept by protected header (a client signs every proof with one key and one header). */
const MAX_KEYS = 1000;

/**
 * Verifies a DPoP proof at the token endpoint (RFC 9449 §4.3): everything that can be checked from the text
 * first (size, one proof, typ, alg, a public jwk, htm, htu, iat, jti, nonce), then the signature, and last,
 * only for a proof that holds, its jti is recorded as used on every instance.
 *
 * A client signs all its proofs with one key under one protected header: the key is imported (by jose's
 * EmbeddedJWK, which checks it fits the alg) and thumbprinted the first time, and kept by the header's text;
 * each signature is then checked by node:crypto in one synchronous call, from the table tokens are signed with
 * (jose.ts), as client assertions' are (client-auth/verify-jwt.ts).
 */
export class DpopVerifier {
  /** Where a proof at the token endpoint is for. */
  private readonly tokenEndpoint: ProofTarget;
  private readonly keys = new Map<string, ProofKey>();

  constructor(private readonly options: DpopOptions) {
    const htu = normalizedHttpUri(options.tokenEndpoint);
    if (htu === undefined)
      throw new Error(`the token endpoint ${options.tokenEndpoint} is not an http(s) URI`);
    this.tokenEndpoint = { htm: 'POST', htu };
  }

  /** The nonce a client is to use now, when nonces are required; else undefined. */
  nonce(now: number): string | undefined {
    return this.options.nonces?.now(now);
  }

  /**
   * The RFC 7638 SHA-256 thumbprint of the proof's key, once the proof holds for `target` (the token endpoint
   * when left out). `proof` is the DPoP header as received (two headers arrive joined by a comma). Throws
   * invalid_dpop_proof, use_dpop_nonce, or 503 when the replay guard cannot answer.
   */
  async verify(proof: string, now: number, target: ProofTarget = this.tokenEndpoint): Promise<string> {
    if (proof.length > MAX_PROOF_LENGTH)
      throw invalidDpopProof(`DPoP proof is longer than ${MAX_PROOF_LENGTH} characters`);
    // RFC 9449 §4.3 check 1: one DPoP header. A JWS compact serialization has no comma.
    if (proof.includes(',')) throw invalidDpopProof('send one DPoP header with one proof');
    const jws = compactJws(proof, 'any');
    if (jws === undefined) throw invalidDpopProof('DPoP proof is not a JWT');
    // The header is read only for a key not seen before: a kept one is found by the header's text.
    const known = this.keys.get(jws.header);
    const header = known === undefined ? this.checkedHeader(jws.header) : undefined;
    const claims = jsonPart(jws.payload);
    if (claims === undefined) throw invalidDpopProof('DPoP proof is not a JWT');
    const { iat, jti } = this.checkedClaims(claims, now, target);

    // RFC 9449 §4.3 check 8: the signature, by the key in the header.
    const key = known ?? (await this.importKey(header!));
    if (!key.check(Buffer.from(jws.signingInput), jws.signature))
      throw invalidDpopProof('DPoP proof signature does not verify');
    if (known === undefined) this.keep(jws.header, key);

    // RFC 9449 §11.1: a proof is used once, on every instance. Recorded while an instance whose clock is within
    // the window of this one's could still accept it.
    // A guard that cannot tell throws what is answered 503 (ReplayGuard): no refused proof.
    const fresh = await this.options.replay.use(
      REPLAY_SCOPE + key.jkt,
      jti,
      (iat + 2 * PROOF_WINDOW_SECONDS) * 1000,
    );
    if (!fresh) throw invalidDpopProof('DPoP proof jti was already used');
    return key.jkt;
  }

  /** The protected header, when RFC 9449 §4.3 checks 4 to 7 hold (a header seen before held them). */
  private checkedHeader(text: string): ProtectedHeaderParameters {
    const header = jsonPart(text);
    if (header === undefined) throw invalidDpopProof('DPoP proof is not a JWT');
    if (header.typ !== 'dpop+jwt') throw invalidDpopProof('DPoP proof typ must be dpop+jwt');
    if (typeof header.alg !== 'string' || !DPOP_ALGS.includes(header.alg))
      throw invalidDpopProof(`DPoP proof alg must be one of ${DPOP_ALGS.join(', ')}`);
    const jwk = header.jwk;
    if (!isJsonObject(jwk)) throw invalidDpopProof('DPoP proof header has no jwk');
    if (PRIVATE_MEMBERS.some((member) => member in jwk))
      throw invalidDpopProof('DPoP proof jwk must be a public key');
    // RFC 7515 §4.1.11: no extension this verifier would have to understand (b64 among them).
    if (header.crit !== undefined) throw invalidDpopProof('DPoP proof header must not have crit');
    return header as ProtectedHeaderParameters;
  }

  /** The claims' iat and jti, when htm, htu, iat, jti, the nonce and ath hold (RFC 9449 §4.3 checks 9 to 12). */
  private checkedClaims(
    claims: Record<string, unknown>,
    now: number,
    target: ProofTarget,
  ): { iat: number; jti: string } {
    if (claims.htm !== target.htm) throw invalidDpopProof(`DPoP proof htm must be ${target.htm}`);
    // RFC 9449 §4.3 check 9, compared as docs/interface.md says: RFC 3986 §6.2.2 and §6.2.3 normalization only.
    // (The target is in normal form, a fixed point of the normalization: an htu equal to it needs none.)
    const htu = claims.htu;
    if (typeof htu !== 'string' || (htu !== target.htu && normalizedHttpUri(htu) !== target.htu))
      throw invalidDpopProof(
        target === this.tokenEndpoint
          ? 'DPoP proof htu is not the token endpoint URL'
          : 'DPoP proof htu is not the URL of this request',
      );
    // RFC 9449 §4.3 check 12 (a proof at a resource): ath, the base64url SHA-256 of the access token.
    if (
      target.accessToken !== undefined &&
      claims.ath !== createHash('sha256').update(target.accessToken).digest('base64url')
    )
      throw invalidDpopProof('DPoP proof ath is not the hash of the access token');
    const iat = claims.iat;
    if (typeof iat !== 'number' || !Number.isFinite(iat)) throw invalidDpopProof('DPoP proof has no iat');
    if (Math.abs(now / 1000 - iat) > PROOF_WINDOW_SECONDS)
      throw invalidDpopProof(`DPoP proof iat is not within ${PROOF_WINDOW_SECONDS} seconds of now`);
    const jti = claims.jti;
    if (!usableJti(jti))
      throw invalidDpopProof(`DPoP proof jti must be a string of 1 to ${MAX_JTI_LENGTH} characters`);
    // RFC 9449 §8: a use_dpop_nonce answer carries the nonce to use; it is not a failure.
    const nonces = this.options.nonces;
    if (nonces !== undefined && !nonces.accepts(claims.nonce, now))
      throw useDpopNonce(
        nonces.now(now),
        claims.nonce === undefined ? 'proof without a nonce' : 'proof with a nonce that is not current',
      );
    return { iat, jti };
  }

  /** The header's key, imported by jose (which refuses a key that does not fit the alg) and thumbprinted. */
  private async importKey(header: ProtectedHeaderParameters): Promise<ProofKey> {
    let key: KeyObject;
    try {
      key = KeyObject.from(await EmbeddedJWK(header, undefined));
    } catch {
      throw invalidDpopProof('DPoP proof jwk is not a public key usable with its alg');
    }
    // checkedHeader let only DPOP_ALGS through.
    const problem = verifyingKeyFits(header.alg as AssertionAlg, key);
    if (problem !== undefined) throw invalidDpopProof(`DPoP proof jwk: ${problem}`);
    return {
      jkt: await calculateJwkThumbprint(header.jwk!, 'sha256'),
      check: signatureCheck(header.alg as AssertionAlg, key),
    };
  }

  /** Keeps a key whose proof verified; the oldest one goes when there are too many. */
  private keep(headerText: string, key: ProofKey): void {
    if (this.keys.size >= MAX_KEYS) this.keys.delete(this.keys.keys().next().value!);
    this.keys.set(headerText, key);
  }
}
