import { createPrivateKey, createPublicKey, type JsonWebKey } from 'node:crypto';
import type { JWK, JWTPayload } from 'jose';
import type { SigningAlg } from '../domain/jose.js';
import { Unavailable } from '../domain/errors.js';
import type { VerificationKey } from '../domain/own-tokens.js';
import { SERVER_ACTOR, type KeyStore, type SigningKey } from '../store/types.js';
import { jwsSigner, jwsVerifier, type Signer } from './jws.js';
import type { MasterKey } from './master-key.js';
import { mayStillSign, selectKeys } from './lifecycle.js';
import { generateSigningKey, planFirstKey, publicPart } from './rotation.js';
import { openPrivateJwk } from './sealed.js';

/** What a resource server needs of a key, as published in the JWKS (RFC 7517). */
export interface PublicJwk extends JWK {
  kid: string;
  alg: SigningAlg;
  use: 'sig';
}

interface ActiveKey {
  kid: string;
  alg: SigningAlg;
  sign: Signer;
}

export interface KeyringOptions {
  now?: () => number;
  /** The longest lifetime any token may have, in seconds: a retired key stays published this long. */
  maxTokenTtl: number;
  /** Cache lifetime of the JWKS in seconds, sent as Cache-Control: max-age. */
  jwksMaxAge?: number;
  /** A key that could not be opened on reload. */
  onError?: (error: unknown) => void;
  /**
   * Seconds a token request is asked to wait (`Retry-After`, TESSERA_RETRY_AFTER) when no key can sign for its
   * algorithm: the store is unreachable, or the key cannot be opened.
   */
  retryAfter: number;
}

/** The token signer of a stored private JWK, its key imported once. */
function signerFor(jwk: JWK, alg: SigningAlg, kid: string): Signer {
  return jwsSigner(createPrivateKey({ key: jwk as JsonWebKey, format: 'jwk' }), alg, kid);
}

/**
 * The signing keys of this process: imported once (never per request), one active key per algorithm, and
 * the JWKS, serialised once per change. Keys live in the store with their private part sealed under the
 * master key, so every process that shares the store signs with the same keys.
 */
export class Keyring {
  private active = new Map<SigningAlg, ActiveKey>();
  private imported = new Map<string, Signer>();
  private published: PublicJwk[] = [];
  /** The published keys by kid, imported once each, for verifying this server's own tokens. */
  private verifying = new Map<string, VerificationKey>();
  private jwksBody = '{"keys":[]}';
  private generating = new Map<SigningAlg, Promise<void>>();
  private rows: SigningKey[] = [];
  private chain: Promise<void> = Promise.resolve();
  private refreshAt = Infinity;
  private readonly now: () => number;
  readonly jwksMaxAge: number;

  constructor(
    private readonly store: KeyStore,
    private readonly master: MasterKey,
    private readonly options: KeyringOptions,
  ) {
    this.now = options.now ?? Date.now;
    this.jwksMaxAge = options.jwksMaxAge ?? 300;
  }

  /**
   * Loads the keys from the store and generates a first key for each required algorithm that has none. At
   * start every key that may still sign must open: a wrong master key stops the process here, clearly.
   */
  async load(required: Iterable<SigningAlg>): Promise<void> {
    await this.serially(() => this.read(true));
    for (const alg of new Set(required)) await this.ensure(alg);
  }

  /**
   * Reads the keys again, as after a change made by another process. Every key that signs now or may sign
   * later is imported here, so that following the schedule as time passes needs no I/O. A key that cannot
   * be opened (sealed under another master key) is reported and left out; its algorithm is then not ready.
   */
  reload(): Promise<void> {
    return this.serially(() => this.read(false));
  }

  /** Reloads run one after another, each reading afresh, so an older read never replaces a newer one. */
  private serially(work: () => Promise<void>): Promise<void> {
    const run = this.chain.then(work);
    this.chain = run.catch(() => undefined);
    return run;
  }

  private async read(strict: boolean): Promise<void> {
    const rows = await this.store.listSigningKeys();
    const now = this.now();
    // A key that will never sign again has no business in memory.
    const live = new Set(rows.filter((row) => mayStillSign(row, now)).map((row) => row.kid));
    for (const kid of this.imported.keys()) if (!live.has(kid)) this.imported.delete(kid);
    for (const row of rows) {
      if (!mayStillSign(row, now) || this.imported.has(row.kid)) continue;
      try {
        const jwk = await openPrivateJwk(row.privateJwkSealed, this.master, row.kid);
        this.imported.set(row.kid, signerFor(jwk, row.alg, row.kid));
      } catch (error) {
        if (strict) throw error;
        this.options.onError?.(error);
      }
    }
    this.rows = rows;
    this.select();
  }

  /** Applies the schedule as of now: what is published, what signs, and when that changes next. */
  private select(): void {
    const selection = selectKeys(this.rows, this.now(), this.options.maxTokenTtl * 1000);
    const active = new Map<SigningAlg, ActiveKey>();
    for (const [alg, row] of selection.active) {
      const sign = this.imported.get(row.kid);
      if (sign) active.set(alg, { kid: row.kid, alg, sign });
    }
    // Only public members are published, whatever the row holds.
    this.published = selection.published.map((row) => ({
      ...publicPart(JSON.parse(row.publicJwk) as JWK),
      kid: row.kid,
      alg: row.alg,
      use: 'sig',
    }));
    this.active = active;
    const verifying = new Map<string, VerificationKey>();
    for (const jwk of this.published)
      verifying.set(
        jwk.kid,
        this.verifying.get(jwk.kid) ?? {
          alg: jwk.alg,
          check: jwsVerifier(createPublicKey({ key: jwk as unknown as JsonWebKey, format: 'jwk' }), jwk.alg),
        },
      );
    this.verifying = verifying;
    this.jwksBody = JSON.stringify({ keys: this.published });
    this.refreshAt = selection.changesAt;
  }

  /** Re-selects when a key has activated or expired since the last choice; a number compare otherwise. */
  private current(): void {
    if (this.now() >= this.refreshAt) this.select();
  }

  /** Makes sure an algorithm has an active key, generating one if not (once, however many callers ask). */
  async ensure(alg: SigningAlg): Promise<void> {
    this.current();
    if (this.active.has(alg)) return;
    let pending = this.generating.get(alg);
    if (!pending) {
      pending = this.generate(alg).finally(() => this.generating.delete(alg));
      this.generating.set(alg, pending);
    }
    await pending;
  }

  private async generate(alg: SigningAlg): Promise<void> {
    const now = this.now();
    // Another instance may be doing the same: the plan inside the store's transaction lets only one win.
    const key = await generateSigningKey(alg, this.master, now, now);
    await this.store.changeSigningKeys(planFirstKey(key, this.now), () => ({
      type: 'key.rotated',
      actor: SERVER_ACTOR,
      source: null,
      target: key.kid,
      changes: { alg, activates_at: key.activatesAt, retiring: [] },
    }));
    await this.reload();
  }

  hasActive(alg: SigningAlg): boolean {
    this.current();
    return this.active.has(alg);
  }

  /**
   * Signs an RFC 9068 access token: `typ: at+jwt` and the `kid` of the active key. Synchronous when the
   * algorithm has an active key (always, once loaded); a promise only while a first key is being made.
   */
  sign(payload: JWTPayload, alg: SigningAlg, claims?: string): string | Promise<string> {
    this.current();
    const key = this.active.get(alg);
    return key ? key.sign(payload, claims) : this.signAfterEnsure(payload, alg, claims);
  }

  private async signAfterEnsure(payload: JWTPayload, alg: SigningAlg, claims?: string): Promise<string> {
    await this.ensure(alg).catch((error: unknown) => this.options.onError?.(error));
    const key = this.active.get(alg);
    // The store is unreachable, or the signing key cannot be opened: not an answer to give unsafely.
    if (!key) throw new Unavailable(this.options.retryAfter, `no ${alg} signing key can be used`);
    return key.sign(payload, claims);
  }

  /** The JWKS document, serialised once per change. */
  jwks(): string {
    this.current();
    return this.jwksBody;
  }

  /**
   * The published key with this kid, to verify a token of this server with (the key that signs now, the next one,
   * and a retired one until every token it signed has expired); undefined for any other kid. Memory only.
   */
  verificationKey(kid: string): VerificationKey | undefined {
    this.current();
    return this.verifying.get(kid);
  }

  activeKids(): Map<SigningAlg, string> {
    this.current();
    return new Map([...this.active].map(([alg, k]) => [alg, k.kid]));
  }
}
