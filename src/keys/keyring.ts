import {
  calculateJwkThumbprint,
  exportJWK,
  generateKeyPair,
  importJWK,
  SignJWT,
  type CryptoKey,
  type JWK,
  type JWTPayload,
} from 'jose';
import type { SigningAlg } from '../domain/algorithms.js';
import type { KeyStore, SigningKey } from '../store/types.js';
import type { MasterKey } from './master-key.js';
import { openPrivateJwk, sealPrivateJwk } from './sealed.js';

/** What a resource server needs of a key, as published in the JWKS (RFC 7517). */
export interface PublicJwk extends JWK {
  kid: string;
  alg: SigningAlg;
  use: 'sig';
}

interface ActiveKey {
  kid: string;
  alg: SigningAlg;
  key: CryptoKey;
  activatesAt: string;
}

export interface KeyringOptions {
  now?: () => number;
  /** The longest lifetime any token may have, in seconds: a retired key stays published this long. */
  maxTokenTtl: number;
  /** Cache lifetime of the JWKS in seconds, sent as Cache-Control: max-age. */
  jwksMaxAge?: number;
}

const GENERATE_OPTIONS: Record<SigningAlg, Parameters<typeof generateKeyPair>[1]> = {
  ES256: { extractable: true },
  RS256: { extractable: true, modulusLength: 2048 },
  PS256: { extractable: true, modulusLength: 2048 },
  EdDSA: { extractable: true, crv: 'Ed25519' },
};

/** Public members only: a private JWK never leaves this module unsealed. */
function publicPart(jwk: JWK): JWK {
  const { kty, crv, x, y, n, e } = jwk;
  return Object.fromEntries(Object.entries({ kty, crv, x, y, n, e }).filter(([, v]) => v !== undefined));
}

/**
 * The signing keys of this process: imported once (never per request), one active key per algorithm, and
 * the JWKS, serialised once per change. Keys live in the store with their private part sealed under the
 * master key, so every process that shares the store signs with the same keys.
 */
export class Keyring {
  private active = new Map<SigningAlg, ActiveKey>();
  private imported = new Map<string, CryptoKey>();
  private published: PublicJwk[] = [];
  private jwksBody = '{"keys":[]}';
  private generating = new Map<SigningAlg, Promise<void>>();
  private rows: SigningKey[] = [];
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

  /** Loads the keys from the store and generates a first key for each required algorithm that has none. */
  async load(required: Iterable<SigningAlg>): Promise<void> {
    await this.reload();
    for (const alg of new Set(required)) await this.ensure(alg);
  }

  /**
   * Reads the keys again, as after a change made by another process. Every key that signs now or will
   * sign later is imported here, so that choosing the active key as time passes needs no I/O.
   */
  async reload(): Promise<void> {
    const rows = await this.store.listSigningKeys();
    for (const row of rows) {
      if (row.retiredAt !== null || this.imported.has(row.kid)) continue;
      const jwk = await openPrivateJwk(row.privateJwkSealed, this.master, row.kid);
      this.imported.set(row.kid, (await importJWK(jwk, row.alg)) as CryptoKey);
    }
    this.rows = rows;
    this.select();
  }

  /**
   * Picks, as of now, the published keys and the active key per algorithm, and notes the next time that
   * choice changes (a key activates, a retired key's last token expires).
   */
  private select(): void {
    const now = this.now();
    const ttlMs = this.options.maxTokenTtl * 1000;
    const published: PublicJwk[] = [];
    const active = new Map<SigningAlg, ActiveKey>();
    let refreshAt = Infinity;
    for (const row of this.rows) {
      const retiredAt = row.retiredAt === null ? null : Date.parse(row.retiredAt);
      const activatesAt = Date.parse(row.activatesAt);
      // INTERFACE.md: every key that can verify an unexpired token stays published, the next one too.
      if (retiredAt !== null && retiredAt + ttlMs <= now) continue;
      if (retiredAt !== null) refreshAt = Math.min(refreshAt, retiredAt + ttlMs);
      else if (activatesAt > now) refreshAt = Math.min(refreshAt, activatesAt);
      // Only public members are published, whatever the row holds.
      published.push({
        ...publicPart(JSON.parse(row.publicJwk) as JWK),
        kid: row.kid,
        alg: row.alg,
        use: 'sig',
      });
      if (retiredAt !== null || activatesAt > now) continue;
      const key = this.imported.get(row.kid);
      const current = active.get(row.alg);
      // Rows come oldest first: the latest activated key of an algorithm wins.
      if (key && (!current || row.activatesAt >= current.activatesAt)) {
        active.set(row.alg, { kid: row.kid, alg: row.alg, key, activatesAt: row.activatesAt });
      }
    }
    this.active = active;
    this.published = published;
    this.jwksBody = JSON.stringify({ keys: published });
    this.refreshAt = refreshAt;
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
    const { publicKey, privateKey } = await generateKeyPair(alg, GENERATE_OPTIONS[alg]);
    const publicJwk = publicPart(await exportJWK(publicKey));
    // RFC 7638 thumbprint: a kid that is unique, stable, and says nothing but which key it is.
    const kid = await calculateJwkThumbprint(publicJwk);
    const at = new Date(this.now()).toISOString();
    await this.store.insertSigningKey({
      kid,
      alg,
      publicJwk: JSON.stringify(publicJwk),
      privateJwkSealed: await sealPrivateJwk(await exportJWK(privateKey), this.master, kid),
      createdAt: at,
      activatesAt: at,
      retiredAt: null,
    });
    await this.reload();
  }

  hasActive(alg: SigningAlg): boolean {
    this.current();
    return this.active.has(alg);
  }

  /** Signs an RFC 9068 access token: `typ: at+jwt` and the `kid` of the active key. */
  async sign(payload: JWTPayload, alg: SigningAlg): Promise<string> {
    this.current();
    let key = this.active.get(alg);
    if (!key) {
      await this.ensure(alg);
      key = this.active.get(alg);
      if (!key) throw new Error(`no active signing key for ${alg}`);
    }
    return new SignJWT(payload).setProtectedHeader({ alg, kid: key.kid, typ: 'at+jwt' }).sign(key.key);
  }

  /** The JWKS document, serialised once per change. */
  jwks(): string {
    this.current();
    return this.jwksBody;
  }

  publishedKeys(): readonly PublicJwk[] {
    this.current();
    return this.published;
  }

  activeKids(): Map<SigningAlg, string> {
    this.current();
    return new Map([...this.active].map(([alg, k]) => [alg, k.kid]));
  }
}
