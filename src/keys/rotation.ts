import { calculateJwkThumbprint, exportJWK, generateKeyPair, type JWK } from 'jose';
import type { SigningAlg } from '../domain/jose.js';
import {
  SERVER_ACTOR,
  StoreError,
  type ChangeAudit,
  type KeyChange,
  type KeyStore,
  type SigningKey,
} from '../store/types.js';
import { canSign, mayStillSign, selectKeys } from './lifecycle.js';
import type { MasterKey } from './master-key.js';
import { sealPrivateJwk } from './sealed.js';

const GENERATE_OPTIONS: Record<SigningAlg, Parameters<typeof generateKeyPair>[1]> = {
  ES256: { extractable: true },
  RS256: { extractable: true, modulusLength: 2048 },
  PS256: { extractable: true, modulusLength: 2048 },
  EdDSA: { extractable: true, crv: 'Ed25519' },
};

/** Public members only: a private JWK never leaves this module unsealed. */
export function publicPart(jwk: JWK): JWK {
  const { kty, crv, x, y, n, e } = jwk;
  return Object.fromEntries(Object.entries({ kty, crv, x, y, n, e }).filter(([, v]) => v !== undefined));
}

/** A new key pair as a store row: the private part sealed under the master key, the kid its RFC 7638 thumbprint. */
export async function generateSigningKey(
  alg: SigningAlg,
  master: MasterKey,
  createdAt: number,
  activatesAt: number,
): Promise<SigningKey> {
  const { publicKey, privateKey } = await generateKeyPair(alg, GENERATE_OPTIONS[alg]);
  const publicJwk = publicPart(await exportJWK(publicKey));
  const kid = await calculateJwkThumbprint(publicJwk);
  return {
    kid,
    alg,
    publicJwk: JSON.stringify(publicJwk),
    privateJwkSealed: await sealPrivateJwk(await exportJWK(privateKey), master, kid),
    createdAt: new Date(createdAt).toISOString(),
    activatesAt: new Date(activatesAt).toISOString(),
    retiredAt: null,
  };
}

/** The key scheduled to take over an algorithm's signing, if any: published, not signing yet. */
export const pendingKey = (
  keys: readonly SigningKey[],
  alg: SigningAlg,
  now: number,
): SigningKey | undefined =>
  keys.find((k) => k.alg === alg && Date.parse(k.activatesAt) > now && mayStillSign(k, now));

/**
 * A key for an algorithm that has none signing now: it signs at once, as there is nothing to hand over from.
 * The clock is read when the plan runs, inside the store's lock: a key another instance made while this one
 * was generating its candidate has an activation time later than the start of that generation.
 */
export function planFirstKey(candidate: SigningKey, clock: () => number) {
  return (keys: SigningKey[]): KeyChange | undefined => {
    const now = clock();
    return keys.some((k) => k.alg === candidate.alg && canSign(k, now)) ? undefined : { insert: candidate };
  };
}

/**
 * Rotation: `next` is published now and signs from its activatesAt on, when the current key stops signing
 * and starts its retirement (published until its last token expires). Nothing happens if a next key is
 * already scheduled, so every instance may ask at once.
 */
export function planRotation(next: SigningKey, now: number) {
  return (keys: SigningKey[]): KeyChange | undefined => {
    if (pendingKey(keys, next.alg, now)) return undefined;
    const current = keys.filter((k) => k.alg === next.alg && canSign(k, now));
    return { insert: next, update: current.map((k) => ({ kid: k.kid, retiredAt: next.activatesAt })) };
  };
}

/**
 * Retiring a key at once (it is suspected, say): it stops signing now and stays published until its last
 * token expires. If it was the signing key, the scheduled next key signs from now, or else `replacement`.
 */
export function planRetire(kid: string, replacement: SigningKey, now: number, maxTokenTtlMs: number) {
  return (keys: SigningKey[]): KeyChange | undefined => {
    const key = keys.find((k) => k.kid === kid);
    if (!key) throw new StoreError('not_found', `signing key ${kid} does not exist`, 'signing_key');
    if (!mayStillSign(key, now)) return undefined;
    const at = new Date(now).toISOString();
    const update: NonNullable<KeyChange['update']> = [{ kid, retiredAt: at }];
    const change: KeyChange = { update };
    if (Date.parse(key.activatesAt) > now) {
      // A scheduled key withdrawn before it signs: the keys that were to hand over to it keep signing.
      for (const k of keys) {
        if (k.alg === key.alg && canSign(k, now) && k.retiredAt === key.activatesAt) {
          update.push({ kid: k.kid, retiredAt: null });
        }
      }
    } else if (selectKeys(keys, now, maxTokenTtlMs).active.get(key.alg)?.kid === kid) {
      const next = pendingKey(keys, key.alg, now);
      if (next) update.push({ kid: next.kid, activatesAt: at });
      else change.insert = replacement;
    }
    return change;
  };
}

/** What rotateKey scheduled: the new key and the keys it takes over from. */
export interface Rotated {
  key: SigningKey;
  retiring: string[];
}

/**
 * Rotates one algorithm's signing key: the one way both the automatic rotator and an operator's `keys rotate`
 * (any face) go. The new key is published now and signs `publishAheadMs` later, when the current one
 * retires; with no key signing for `alg` (an empty store), it signs at once, as the one a server's start
 * makes. Undefined when a next key is already scheduled (by this or another instance).
 */
export async function rotateKey(
  store: KeyStore,
  master: MasterKey,
  alg: SigningAlg,
  now: number,
  publishAheadMs: number,
  /** Who rotates, for the audit event written with the rotation (automatic rotation: `tessera`). */
  by: Pick<ChangeAudit, 'actor' | 'source'> = { actor: SERVER_ACTOR, source: null },
  /** Read again inside the store's lock (see planFirstKey): a first key made meanwhile elsewhere is seen. */
  clock: () => number = Date.now,
): Promise<Rotated | undefined> {
  const keys = await store.listSigningKeys();
  if (pendingKey(keys, alg, now)) return undefined;
  const signing = keys.some((k) => k.alg === alg && canSign(k, now));
  const next = await generateSigningKey(alg, master, now, signing ? now + publishAheadMs : now);
  const written = await store.changeSigningKeys(
    signing ? planRotation(next, now) : planFirstKey(next, clock),
    (change) => ({
      type: 'key.rotated',
      ...by,
      target: next.kid,
      changes: {
        alg,
        activates_at: next.activatesAt,
        retiring: change.update?.map((u) => u.kid) ?? [],
      },
    }),
  );
  if (!written?.insert) return undefined;
  return { key: next, retiring: written.update?.map((u) => u.kid) ?? [] };
}
