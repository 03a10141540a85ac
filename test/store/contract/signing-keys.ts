import { describe, expect, it } from 'vitest';
import type { ChangeAudit, KeyChange } from '../../../src/store/types.js';
import { expectChanges, expectNoChange, signingKey, store } from './shared.js';

/** Signing keys: inserting and listing them, and the plans of changeSigningKeys. */
export function signingKeysContract(): void {
  describe('signing keys', () => {
    it('inserts keys and lists them oldest first, every field as given', async () => {
      const newer = signingKey('kid-new', {
        alg: 'EdDSA',
        createdAt: '2030-01-03T00:00:00.000Z',
        activatesAt: '2030-01-04T00:00:00.000Z',
      });
      const older = signingKey('kid-old', {
        alg: 'RS256',
        createdAt: '2030-01-01T00:00:00.000Z',
        activatesAt: '2030-01-01T00:00:00.000Z',
        retiredAt: '2030-01-04T00:00:00.000Z',
      });
      // A change of the keys is recorded as one of them all: followers reload every key.
      await expectChanges(store, () => store.changeSigningKeys(() => ({ insert: newer })), [['key', '*']]);
      await expectChanges(store, () => store.changeSigningKeys(() => ({ insert: older })), [['key', '*']]);
      expect(await store.listSigningKeys()).toEqual([older, newer]);
    });

    it('orders keys created at the same time by kid', async () => {
      await store.changeSigningKeys(() => ({ insert: signingKey('b') }));
      await store.changeSigningKeys(() => ({ insert: signingKey('a') }));
      expect((await store.listSigningKeys()).map((k) => k.kid)).toEqual(['a', 'b']);
    });

    it('refuses a second key with the same kid, and records no change', async () => {
      await store.changeSigningKeys(() => ({ insert: signingKey('same') }));
      const before = await store.latestChange();
      await expect(
        store.changeSigningKeys(() => ({ insert: signingKey('same', { alg: 'PS256' }) })),
      ).rejects.toThrow();
      expect(await store.latestChange()).toBe(before);
      expect(await store.listSigningKeys()).toEqual([signingKey('same')]);
    });
    it('changeSigningKeys: the plan reads the keys; its times are set, in one write with its event', async () => {
      await store.changeSigningKeys(() => ({ insert: signingKey('k1') }));
      const seen: string[][] = [];
      const audit = (change: KeyChange): ChangeAudit => ({
        type: 'key.rotated',
        actor: 'tessera',
        source: null,
        target: change.insert?.kid ?? null,
        changes: null,
      });
      const k2 = signingKey('k2', { activatesAt: '2030-01-05T00:00:00.000Z' });
      const change = { insert: k2, update: [{ kid: 'k1', retiredAt: '2030-01-06T00:00:00.000Z' }] };
      const written = await expectChanges(
        store,
        () =>
          store.changeSigningKeys((keys) => {
            seen.push(keys.map((k) => k.kid));
            return change;
          }, audit),
        [['key', '*']],
      );
      expect(written).toEqual(change);
      expect(seen).toEqual([['k1']]);
      expect(await store.listSigningKeys()).toEqual([
        signingKey('k1', { retiredAt: '2030-01-06T00:00:00.000Z' }),
        k2,
      ]);
      expect((await store.queryAuditEvents({ limit: 10 })).map((e) => [e.type, e.target])).toEqual([
        ['key.rotated', 'k2'],
      ]);
      // retiredAt null cancels a retirement; activatesAt moves.
      await store.changeSigningKeys(() => ({
        update: [
          { kid: 'k1', retiredAt: null },
          { kid: 'k2', activatesAt: '2030-01-07T00:00:00.000Z' },
        ],
      }));
      expect(await store.listSigningKeys()).toEqual([
        signingKey('k1'),
        { ...k2, activatesAt: '2030-01-07T00:00:00.000Z' },
      ]);
      // A plan that makes nothing writes nothing, not even a change.
      const before = await store.latestChange();
      expect(await store.changeSigningKeys(() => undefined, audit)).toBeUndefined();
      expect(await store.changeSigningKeys(() => ({ update: [] }), audit)).toBeUndefined();
      expect(await store.latestChange()).toBe(before);
      // An update of a key that does not exist: not_found, and the whole plan is undone.
      const error = await expectNoChange(store, () =>
        store.changeSigningKeys(
          () => ({ insert: signingKey('k3'), update: [{ kid: 'nope', retiredAt: null }] }),
          audit,
        ),
      );
      expect(error).toMatchObject({ code: 'not_found', resource: 'signing_key' });
      expect((await store.listSigningKeys()).map((k) => k.kid)).toEqual(['k1', 'k2']);
      expect(await store.queryAuditEvents({ limit: 10 })).toHaveLength(1);
    });
  });
}
