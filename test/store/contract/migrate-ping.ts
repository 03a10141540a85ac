import { describe, expect, it } from 'vitest';
import type { ChangeAudit } from '../../../src/store/types.js';
import { clock, MIGRATIONS, migrationsAfter, type OpenStore, store } from './shared.js';

/** Migrations on a fresh database, once each (and 0011 on the actors of earlier events), ping, and an empty store. */
export function migratePingContract(open: OpenStore): void {
  describe('migrate, ping', () => {
    it('runs every migration once on a fresh database, and nothing the second time', async () => {
      const fresh = await open(clock.date);
      try {
        expect(await fresh.migrate()).toEqual([...MIGRATIONS]);
        expect(await fresh.migrate()).toEqual([]);
        expect(await fresh.migrate()).toEqual([]);
      } finally {
        await fresh.close();
      }
    });

    it('0011 gives the actors of earlier events their kind: client:<id>, and none for an anonymous login', async () => {
      const fresh = await open(clock.date);
      try {
        await fresh.migrate('0010_console');
        const written: [string, string | null, ChangeAudit['type']][] = [
          // [actor as recorded before, its source, type]
          ['ops-client', '10.0.0.1', 'client.updated'],
          ['tessera', null, 'key.rotated'], // the server itself (no address)
          ['tessera', '10.0.0.2', 'client.created'], // an admin client whose id is tessera
          ['anonymous', '10.0.0.3', 'operator.login_failed'], // a failed login for an unknown email
          ['anonymous', '10.0.0.4', 'grant.updated'], // an admin client whose id is anonymous
          ['cli:root', null, 'audience.created'],
          ['operator:ann@example.com', '10.0.0.5', 'operator.login'],
        ];
        for (const [actor, source, type] of written) {
          clock.advance(1000);
          await fresh.recordEvent({ type, actor, source, target: null, changes: null });
        }
        expect(await fresh.migrate()).toEqual(migrationsAfter('0010_console'));
        const events = await fresh.queryAuditEvents({ limit: 10 });
        expect(events.reverse().map((e) => [e.actor, e.source, e.type])).toEqual([
          ['client:ops-client', '10.0.0.1', 'client.updated'],
          ['tessera', null, 'key.rotated'],
          ['client:tessera', '10.0.0.2', 'client.created'],
          [null, '10.0.0.3', 'operator.login_failed'],
          ['client:anonymous', '10.0.0.4', 'grant.updated'],
          ['cli:root', null, 'audience.created'],
          ['operator:ann@example.com', '10.0.0.5', 'operator.login'],
        ]);
      } finally {
        await fresh.close();
      }
    });

    it('answers ping', async () => {
      await expect(store.ping()).resolves.toBeUndefined();
    });

    it('starts empty', async () => {
      expect(await store.listAudiences()).toEqual([]);
      expect(await store.listClients()).toEqual([]);
      expect(await store.countClients()).toBe(0);
      expect(await store.listSigningKeys()).toEqual([]);
      expect(await store.latestChange()).toBe(0);
      expect(await store.changesSince(0, 100)).toEqual([]);
    });
  });
}
