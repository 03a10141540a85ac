import type { SigningAlg } from '../domain/jose.js';
import type { SigningKey } from '../store/types.js';

/**
 * A signing key's life, from its row and the time alone:
 * - next: published, not signing yet (activatesAt in the future), so verifiers learn it first;
 * - active: signing (the latest activated key of its algorithm that is not retired);
 * - retired: no longer signing, still published until the last token it may have signed has expired;
 * - expired: gone from the JWKS.
 */
export type KeyState = 'next' | 'active' | 'superseded' | 'retired' | 'expired';

export interface KeySelection {
  /** Keys in the JWKS, in row order. */
  published: SigningKey[];
  /** The key each algorithm signs with. */
  active: Map<SigningAlg, SigningKey>;
  /** The next time this selection changes (ms since the epoch), or Infinity. */
  changesAt: number;
}

const time = (iso: string | null): number => (iso === null ? Infinity : Date.parse(iso));

/** Whether the key may sign at `now` (the latest such key of an algorithm is the one that does). */
export function canSign(key: SigningKey, now: number): boolean {
  return time(key.activatesAt) <= now && now < time(key.retiredAt);
}

/** Whether the key may still sign at some time from `now` on: its private part must be at hand. */
export function mayStillSign(key: SigningKey, now: number): boolean {
  return now < time(key.retiredAt);
}

/**
 * Chooses, as of `now`, what is published and what signs. `maxTokenTtlMs` is the longest a token lives:
 * a retired key stays published that long after it stopped signing (docs/interface.md: every key that can verify
 * a token that has not expired yet).
 */
export function selectKeys(rows: readonly SigningKey[], now: number, maxTokenTtlMs: number): KeySelection {
  const published: SigningKey[] = [];
  const active = new Map<SigningAlg, SigningKey>();
  let changesAt = Infinity;
  for (const row of rows) {
    const activatesAt = time(row.activatesAt);
    const retiredAt = time(row.retiredAt);
    const expiresAt = retiredAt + maxTokenTtlMs;
    for (const at of [activatesAt, retiredAt, expiresAt]) if (at > now) changesAt = Math.min(changesAt, at);
    if (expiresAt <= now) continue;
    published.push(row);
    if (!canSign(row, now)) continue;
    const current = active.get(row.alg);
    if (
      !current ||
      activatesAt > time(current.activatesAt) ||
      (activatesAt === time(current.activatesAt) && row.kid > current.kid)
    ) {
      active.set(row.alg, row);
    }
  }
  return { published, active, changesAt };
}

export function keyState(key: SigningKey, selection: KeySelection, now: number): KeyState {
  if (selection.active.get(key.alg)?.kid === key.kid) return 'active';
  if (!selection.published.includes(key)) return 'expired';
  if (time(key.retiredAt) <= now) return 'retired';
  return time(key.activatesAt) > now ? 'next' : 'superseded';
}
