import { SIGNING_ALGS, type SigningAlg } from '../domain/jose.js';
import { MAX_TOKEN_TTL } from '../domain/validate.js';
import { keyState, mayStillSign, selectKeys, type KeyState } from '../keys/lifecycle.js';
import { resolveMasterKey, type MasterKey } from '../keys/master-key.js';
import { generateSigningKey, pendingKey, planRetire, rotateKey } from '../keys/rotation.js';
import { assertSameMasterKey } from '../keys/sealed.js';
import type { SigningKey } from '../store/types.js';
import { changeAudit, nowOf, type ManagementContext } from './context.js';
import { ManagementError, storeCall } from './errors.js';

const MAX_TOKEN_TTL_MS = MAX_TOKEN_TTL * 1000;

/** A signing key (public parts only) with its status now. */
export interface KeyView {
  key: SigningKey;
  status: KeyState;
}

export async function listKeys(ctx: ManagementContext): Promise<KeyView[]> {
  const keys = await storeCall(() => ctx.store.listSigningKeys());
  return withStatus(keys, nowOf(ctx));
}

function withStatus(keys: SigningKey[], now: number): KeyView[] {
  const selection = selectKeys(keys, now, MAX_TOKEN_TTL_MS);
  return keys.map((key) => ({ key, status: keyState(key, selection, now) }));
}

/**
 * The master key the servers use: the one every stored key that may still sign is sealed under, so that an
 * operator with another TESSERA_MASTER_KEY cannot add keys the servers could not open.
 */
async function masterKey(ctx: ManagementContext, warn: (message: string) => void): Promise<MasterKey> {
  const master = resolveMasterKey(ctx.config, warn);
  const now = nowOf(ctx);
  const keys = await storeCall(() => ctx.store.listSigningKeys());
  assertSameMasterKey(
    keys.filter((k) => mayStillSign(k, now)),
    master,
  );
  return master;
}

export interface RotationResult {
  alg: SigningAlg;
  /** The key now scheduled (the new one, or the one already scheduled), if any. */
  kid: string | null;
  activatesAt: string | null;
  alreadyScheduled: boolean;
  /** Keys that stop signing when the new one starts. */
  retiring: string[];
}

/**
 * Publishes a new key for each algorithm (or `alg` only). It signs after TESSERA_KEY_PUBLISH_AHEAD, when the
 * current key retires; on a store with no key for the algorithm, it signs at once. Automatic rotation goes
 * the same way (keys/rotation.ts, rotateKey).
 */
export async function rotateKeys(
  ctx: ManagementContext,
  options: { alg?: SigningAlg; warn?: (message: string) => void } = {},
): Promise<RotationResult[]> {
  const master = await masterKey(ctx, options.warn ?? (() => undefined));
  const results: RotationResult[] = [];
  for (const alg of options.alg ? [options.alg] : SIGNING_ALGS) {
    const now = nowOf(ctx);
    const rotated = await storeCall(() =>
      rotateKey(
        ctx.store,
        master,
        alg,
        now,
        ctx.config.keyPublishAhead * 1000,
        { actor: ctx.actor, source: ctx.source ?? null },
        () => nowOf(ctx),
      ),
    );
    if (rotated) {
      results.push({
        alg,
        kid: rotated.key.kid,
        activatesAt: rotated.key.activatesAt,
        alreadyScheduled: false,
        retiring: rotated.retiring,
      });
    } else {
      const scheduled = pendingKey(await storeCall(() => ctx.store.listSigningKeys()), alg, now);
      results.push({
        alg,
        kid: scheduled?.kid ?? null,
        activatesAt: scheduled?.activatesAt ?? null,
        alreadyScheduled: true,
        retiring: [],
      });
    }
  }
  return results;
}

/** What a retirement did: the key retired, the keys of its algorithm afterwards, and which of them signs. */
export interface Retirement {
  retired: SigningKey;
  keys: KeyView[];
  /** The key that signs for the algorithm now; null when none does yet. */
  signing: string | null;
}

/**
 * Stops signing with a key now (it stays published until its last token expires). If it was signing, the
 * scheduled next key takes over now, or else a new one.
 */
export async function retireKey(
  ctx: ManagementContext,
  kid: string,
  options: { warn?: (message: string) => void } = {},
): Promise<Retirement> {
  const keys = await storeCall(() => ctx.store.listSigningKeys());
  const key = keys.find((k) => k.kid === kid);
  if (!key) throw new ManagementError('key_not_found', `signing key ${kid} does not exist`);
  const now = nowOf(ctx);
  const master = await masterKey(ctx, options.warn ?? (() => undefined));
  const replacement = await generateSigningKey(key.alg, master, now, now);
  await storeCall(() =>
    ctx.store.changeSigningKeys(planRetire(kid, replacement, now, MAX_TOKEN_TTL_MS), (change) =>
      changeAudit(ctx, 'key.retired', kid, {
        changes: {
          alg: key.alg,
          // The key that signs from now on, if the retired one was signing.
          signing: change.insert?.kid ?? change.update?.find((u) => u.activatesAt !== undefined)?.kid ?? null,
        },
      }),
    ),
  );
  const after = await storeCall(() => ctx.store.listSigningKeys());
  const at = nowOf(ctx);
  const signing = selectKeys(after, at, MAX_TOKEN_TTL_MS).active.get(key.alg)?.kid ?? null;
  return { retired: key, keys: withStatus(after, at).filter((v) => v.key.alg === key.alg), signing };
}
