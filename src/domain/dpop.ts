import { createHmac } from 'node:crypto';
import {
  calculateJwkThumbprint,
  compactVerify,
  decodeJwt,
  decodeProtectedHeader,
  EmbeddedJWK,
  errors,
  type JWK,
  type JWTPayload,
  type ProtectedHeaderParameters,
} from 'jose';
import { ASSERTION_ALGS, type ReplayGuard } from './client-auth/index.js';
import { invalidDpopProof, temporarilyUnavailable, useDpopNonce } from './errors.js';

/*
 * DPoP (RFC 9449): a token request may carry a proof that its sender holds a private key; the token is then
 * bound to that key (`cnf.jkt`, RFC 9449 §6.1) and its type is DPoP. This is the one verifier of that kind of
 * proof; the token service asks it after the client is authenticated.
 */

/** The algorithms a proof may be signed with: asymmetric ones only, as for client assertions (INTERFACE.md). */
export const DPOP_ALGS: readonly string[] = ASSERTION_ALGS;

/** A proof is accepted within this many seconds of its iat, either way (INTERFACE.md). */
const PROOF_WINDOW_SECONDS = 60;
/** The longest proof read: room for an RSA key of 8192 bits in its header; the rest is refused unread. */
const MAX_PROOF_LENGTH = 8192;
/** A jti longer than this is refused (it is kept as a digest; this only bounds the work). */
const MAX_JTI_LENGTH = 512;
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

export interface DpopOptions {
  /** The token endpoint's URL, which a proof's htu must name (RFC 9449 §4.3 check 9). */
  tokenEndpoint: string;
  /** Proof ids in use, across every instance (the same guard as client assertions' ids). */
  replay: ReplayGuard;
  /** With TESSERA_DPOP_NONCE=true: the nonces a proof must carry. */
  nonces?: DpopNonces | undefined;
  /** Seconds a 503 asks the client to wait when the replay guard cannot answer. */
  retryAfter: number;
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** Why jose refused a proof's key or signature, in the words of the answer. */
function signatureFailure(error: unknown): string {
  if (error instanceof errors.JWSSignatureVerificationFailed) return 'DPoP proof signature does not verify';
  if (error instanceof errors.JOSEAlgNotAllowed) return 'DPoP proof alg is not allowed';
  return 'DPoP proof jwk is not a public key usable with its alg';
}

/**
 * Verifies a DPoP proof at the token endpoint (RFC 9449 §4.3): everything that can be checked from the text
 * first (size, one proof, typ, alg, a public jwk, htm, htu, iat, jti, nonce), then the signature, and last,
 * only for a proof that holds, its jti is recorded as used on every instance.
 */
export class DpopVerifier {
  private readonly endpoint: string;

  constructor(private readonly options: DpopOptions) {
    this.endpoint = new URL(options.tokenEndpoint).href;
  }

  /** The nonce a client is to use now, when nonces are required; else undefined. */
  nonce(now: number): string | undefined {
    return this.options.nonces?.now(now);
  }

  /**
   * The RFC 7638 SHA-256 thumbprint of the proof's key, once the proof holds. `proof` is the DPoP header as
   * received (two headers arrive joined by a comma). Throws invalid_dpop_proof, use_dpop_nonce, or 503 when
   * the replay guard cannot answer.
   */
  async verify(proof: string, now: number): Promise<string> {
    if (proof.length > MAX_PROOF_LENGTH)
      throw invalidDpopProof(`DPoP proof is longer than ${MAX_PROOF_LENGTH} characters`);
    // RFC 9449 §4.3 check 1: one DPoP header. A JWS compact serialization has no comma.
    if (proof.includes(',')) throw invalidDpopProof('send one DPoP header with one proof');
    let header: ProtectedHeaderParameters;
    let claims: JWTPayload;
    try {
      header = decodeProtectedHeader(proof);
      claims = decodeJwt(proof);
    } catch {
      throw invalidDpopProof('DPoP proof is not a JWT');
    }
    // RFC 9449 §4.3 checks 4 to 7.
    if (header.typ !== 'dpop+jwt') throw invalidDpopProof('DPoP proof typ must be dpop+jwt');
    if (typeof header.alg !== 'string' || !DPOP_ALGS.includes(header.alg))
      throw invalidDpopProof(`DPoP proof alg must be one of ${DPOP_ALGS.join(', ')}`);
    const jwk = header.jwk as unknown;
    if (!isObject(jwk)) throw invalidDpopProof('DPoP proof header has no jwk');
    if (PRIVATE_MEMBERS.some((member) => member in jwk))
      throw invalidDpopProof('DPoP proof jwk must be a public key');
    if (claims.htm !== 'POST') throw invalidDpopProof('DPoP proof htm must be POST');
    if (!this.namesEndpoint(claims.htu))
      throw invalidDpopProof('DPoP proof htu is not the token endpoint URL');
    const iat = claims.iat;
    if (typeof iat !== 'number' || !Number.isFinite(iat)) throw invalidDpopProof('DPoP proof has no iat');
    if (Math.abs(now / 1000 - iat) > PROOF_WINDOW_SECONDS)
      throw invalidDpopProof(`DPoP proof iat is not within ${PROOF_WINDOW_SECONDS} seconds of now`);
    const jti = claims.jti;
    if (typeof jti !== 'string' || jti === '' || jti.length > MAX_JTI_LENGTH)
      throw invalidDpopProof(`DPoP proof jti must be a string of 1 to ${MAX_JTI_LENGTH} characters`);
    // RFC 9449 §8: a use_dpop_nonce answer carries the nonce to use; it is not a failure.
    const nonces = this.options.nonces;
    if (nonces !== undefined && !nonces.accepts(claims.nonce, now))
      throw useDpopNonce(
        nonces.now(now),
        claims.nonce === undefined ? 'proof without a nonce' : 'proof with a nonce that is not current',
      );

    // RFC 9449 §4.3 check 8: the signature, by the key in the header.
    try {
      await compactVerify(proof, EmbeddedJWK, { algorithms: DPOP_ALGS as string[] });
    } catch (error) {
      throw invalidDpopProof(signatureFailure(error));
    }
    const jkt = await calculateJwkThumbprint(jwk as JWK, 'sha256');

    // RFC 9449 §11.1: a proof is used once, on every instance. Recorded while an instance whose clock is within
    // the window of this one's could still accept it.
    let fresh: boolean;
    try {
      fresh = await this.options.replay.use(REPLAY_SCOPE + jkt, jti, (iat + 2 * PROOF_WINDOW_SECONDS) * 1000);
    } catch {
      throw temporarilyUnavailable(this.options.retryAfter);
    }
    if (!fresh) throw invalidDpopProof('DPoP proof jti was already used');
    return jkt;
  }

  /** Whether htu names the token endpoint, its query and fragment ignored (RFC 9449 §4.3 check 9). */
  private namesEndpoint(htu: unknown): boolean {
    if (typeof htu !== 'string') return false;
    if (htu === this.endpoint) return true;
    if (!URL.canParse(htu)) return false;
    const url = new URL(htu);
    url.search = '';
    url.hash = '';
    return url.href === this.endpoint;
  }
}
