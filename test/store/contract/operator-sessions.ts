import { beforeEach, describe, expect, it } from 'vitest';
import type { ChangeAudit, Operator, OperatorSession } from '../../../src/store/types.js';
import { changeEventAt, clock, store } from './shared.js';

/** Operator sessions: creating, finding, touching, deleting and pruning them; events that go with no change. */
export function operatorSessionsContract(): void {
  describe('operator sessions', () => {
    const T = Date.parse('2030-01-02T03:04:05.006Z');
    const EXPIRES = '2030-01-03T03:04:05.006Z';
    const session = (
      id: string,
      operatorId: string,
      extra: Partial<OperatorSession> = {},
    ): OperatorSession => ({
      id,
      operatorId,
      createdAt: T,
      lastSeenAt: T,
      expiresAt: T + 12 * 3600_000,
      source: '203.0.113.7',
      ...extra,
    });
    const login = (target: string): ChangeAudit => ({
      type: 'operator.login',
      actor: `operator:${target}`,
      source: '203.0.113.7',
      target,
      changes: null,
    });
    const events = async () =>
      (await store.queryAuditEvents({ limit: 100 })).map(({ id: _id, ...rest }) => rest);
    let operator: Operator;

    beforeEach(async () => {
      operator = await store.addOperator({
        id: 'op_1',
        email: 'ops@example.com',
        role: 'viewer',
        enrollDigest: 'enroll-op_1',
        enrollExpiresAt: EXPIRES,
      });
      await store.addOperator({
        id: 'op_2',
        email: 'other@example.com',
        role: 'admin',
        enrollDigest: 'enroll-op_2',
        enrollExpiresAt: EXPIRES,
      });
    });

    it('createOperatorSession keeps the session, stamps the last login (the session’s time), writes its event', async () => {
      clock.advance(3000);
      const loginAt = T + 2000; // the session's own time, not the store's clock
      const s = session('sess-1', 'op_1', {
        createdAt: loginAt,
        lastSeenAt: loginAt,
        expiresAt: loginAt + 43_200_000,
      });
      await store.createOperatorSession(s, login('op_1'));
      const withLogin = { ...operator, lastLoginAt: new Date(loginAt).toISOString() };
      expect(await store.findOperatorSession('sess-1')).toEqual({ session: s, operator: withLogin });
      expect(await store.findOperator('op_1')).toEqual(withLogin);
      // The other operator is untouched.
      expect((await store.findOperator('op_2'))?.lastLoginAt).toBeNull();
      expect(await events()).toEqual([changeEventAt(clock.iso(), login('op_1'))]);
      // A session with no source, without an event; a later login moves the stamp.
      const later = session('sess-2', 'op_1', { createdAt: T + 9000, lastSeenAt: T + 9000, source: null });
      await store.createOperatorSession(later);
      const stamped = { ...operator, lastLoginAt: new Date(T + 9000).toISOString() };
      expect(await store.findOperatorSession('sess-2')).toEqual({ session: later, operator: stamped });
      expect(await store.findOperatorSession('sess-1')).toEqual({ session: s, operator: stamped });
      expect(await events()).toEqual([changeEventAt(clock.iso(), login('op_1'))]);
    });

    it('findOperatorSession joins the operator as it is now; nothing for an unknown id', async () => {
      await store.createOperatorSession(session('sess-1', 'op_1'));
      await store.updateOperator('op_1', { role: 'admin' });
      await store.createOperatorSession(session('sess-2', 'op_2', { source: null }));
      const found = await store.findOperatorSession('sess-1');
      expect(found?.operator).toEqual(await store.findOperator('op_1'));
      expect(found?.operator.role).toBe('admin');
      expect(found?.session).toEqual(session('sess-1', 'op_1'));
      expect(await store.findOperatorSession('sess-2')).toEqual({
        session: session('sess-2', 'op_2', { source: null }),
        operator: await store.findOperator('op_2'),
      });
      expect(await store.findOperatorSession('sess-3')).toBeUndefined();
      expect(await store.findOperatorSession('')).toBeUndefined();
    });

    it('touchOperatorSession moves last_seen_at forward, never back; an unknown id is no error', async () => {
      await store.createOperatorSession(session('sess-1', 'op_1'));
      const seen = async () => (await store.findOperatorSession('sess-1'))?.session.lastSeenAt;
      await store.touchOperatorSession('sess-1', T + 60_000);
      expect(await seen()).toBe(T + 60_000);
      await store.touchOperatorSession('sess-1', T + 30_000);
      expect(await seen()).toBe(T + 60_000);
      await store.touchOperatorSession('sess-1', T + 60_000);
      expect(await seen()).toBe(T + 60_000);
      await store.touchOperatorSession('sess-1', T + 60_001);
      expect(await seen()).toBe(T + 60_001);
      await store.touchOperatorSession('nobody', T + 90_000);
      expect(await store.findOperatorSession('nobody')).toBeUndefined();
      // Only the last-seen time moves.
      expect((await store.findOperatorSession('sess-1'))?.session).toEqual(
        session('sess-1', 'op_1', { lastSeenAt: T + 60_001 }),
      );
      expect(await events()).toEqual([]);
    });

    it('deleteOperatorSession ends one session, with its event (logout) or without', async () => {
      await store.createOperatorSession(session('sess-1', 'op_1'));
      await store.createOperatorSession(session('sess-2', 'op_1'));
      await store.createOperatorSession(session('sess-3', 'op_2'));
      clock.advance(1000);
      const logout: ChangeAudit = { ...login('op_1'), type: 'operator.logout' };
      await store.deleteOperatorSession('sess-1', logout);
      expect(await store.findOperatorSession('sess-1')).toBeUndefined();
      expect(await store.findOperatorSession('sess-2')).toBeDefined();
      expect(await events()).toEqual([changeEventAt(clock.iso(), logout)]);
      await store.deleteOperatorSession('sess-3');
      expect(await store.findOperatorSession('sess-3')).toBeUndefined();
      expect(await store.findOperatorSession('sess-2')).toEqual({
        session: session('sess-2', 'op_1'),
        operator: { ...operator, lastLoginAt: new Date(T).toISOString() },
      });
      expect(await events()).toEqual([changeEventAt(clock.iso(), logout)]);
      // Rolled back with its transaction: the session is there again, no event.
      await expect(
        store.transaction(async (tx) => {
          await tx.deleteOperatorSession('sess-2', logout);
          throw new Error('changed my mind');
        }),
      ).rejects.toThrow('changed my mind');
      expect(await store.findOperatorSession('sess-2')).toBeDefined();
      expect(await events()).toEqual([changeEventAt(clock.iso(), logout)]);
    });

    it('pruneOperatorSessions deletes those at or past their end and those idle since before the bound; returns how many', async () => {
      const now = T + 3600_000;
      const idleBefore = now - 1800_000;
      const sessions = {
        ended: session('ended', 'op_1', { expiresAt: now, lastSeenAt: now - 1000 }), // its end is now: over
        'ended-long-ago': session('ended-long-ago', 'op_2', { expiresAt: now - 1, lastSeenAt: now - 1 }),
        'ends-next': session('ends-next', 'op_1', { expiresAt: now + 1, lastSeenAt: idleBefore }), // idle exactly to the bound: kept
        idle: session('idle', 'op_2', { lastSeenAt: idleBefore - 1 }),
        fresh: session('fresh', 'op_1', { lastSeenAt: now - 1000 }),
      };
      for (const s of Object.values(sessions)) await store.createOperatorSession(s);
      expect(await store.pruneOperatorSessions(now, idleBefore)).toBe(3);
      const left: string[] = [];
      for (const id of Object.keys(sessions)) if (await store.findOperatorSession(id)) left.push(id);
      expect(left).toEqual(['ends-next', 'fresh']);
      expect(await store.pruneOperatorSessions(now, idleBefore)).toBe(0);
      expect(await store.pruneOperatorSessions(now + 1, idleBefore)).toBe(1);
      expect(await store.pruneOperatorSessions(now + 1, now - 999)).toBe(1);
      expect(await store.pruneOperatorSessions(now + 1, now - 999)).toBe(0);
      // The operators stay.
      expect((await store.listOperators()).map((o) => o.id)).toEqual(['op_1', 'op_2']);
    });

    it('recordEvent writes an event that goes with no change: a failed login, its reason, no target', async () => {
      clock.advance(1234);
      const failed: ChangeAudit = {
        type: 'operator.login_failed',
        actor: null,
        source: '2001:db8::1',
        target: null,
        changes: null,
        reason: 'unknown email',
      };
      const changesBefore = await store.latestChange();
      await store.recordEvent(failed);
      const known: ChangeAudit = {
        ...failed,
        actor: 'operator:ops@example.com',
        target: 'op_1',
        reason: 'wrong password',
      };
      await store.recordEvent(known);
      expect(await events()).toEqual([changeEventAt(clock.iso(), known), changeEventAt(clock.iso(), failed)]);
      expect((await events())[1]).toEqual({
        at: '2030-01-02T03:04:06.240Z',
        type: 'operator.login_failed',
        clientId: null,
        audience: null,
        jti: null,
        reason: 'unknown email',
        source: '2001:db8::1',
        count: null,
        actor: null,
        target: null,
        changes: null,
      });
      expect(await store.queryAuditEvents({ limit: 10, types: ['operator.login_failed'] })).toHaveLength(2);
      expect(await store.latestChange()).toBe(changesBefore);
      expect((await store.findOperator('op_1'))?.lastLoginAt).toBeNull();
    });
  });
}
