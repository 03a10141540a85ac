import { describe, expect, it } from 'vitest';
import {
  StoreError,
  type ChangeAudit,
  type NewOperator,
  type Operator,
  type OperatorSession,
} from '../../../src/store/types.js';
import { changeEventAt, clock, store, storeError } from './shared.js';

/** Operators of the console: adding, finding, listing, updating, removing and enrolling them, with their events. */
export function operatorsContract(): void {
  describe('operators', () => {
    const T = '2030-01-02T03:04:05.006Z'; // the clock's start
    const DAY_LATER = '2030-01-03T03:04:05.006Z';
    const newOperator = (id: string, email: string, extra: Partial<NewOperator> = {}): NewOperator => ({
      id,
      email,
      role: 'admin',
      enrollDigest: `enroll-${id}`,
      enrollExpiresAt: DAY_LATER,
      ...extra,
    });
    const audit = (type: ChangeAudit['type'], target: string | null, extra: Partial<ChangeAudit> = {}) => ({
      type,
      actor: 'cli:test',
      source: null,
      target,
      changes: null,
      ...extra,
    });
    const events = async () =>
      (await store.queryAuditEvents({ limit: 100 })).map(({ id: _id, ...rest }) => rest);
    const session = (id: string, operatorId: string, extra: Partial<OperatorSession> = {}) => ({
      id,
      operatorId,
      createdAt: Date.parse(T),
      lastSeenAt: Date.parse(T),
      expiresAt: Date.parse(T) + 12 * 3600_000,
      source: '203.0.113.7',
      ...extra,
    });
    const sessionIds = async (...ids: string[]) => {
      const found: string[] = [];
      for (const id of ids) if (await store.findOperatorSession(id)) found.push(id);
      return found;
    };
    const added = (id: string, email: string, extra: Partial<Operator> = {}): Operator => ({
      id,
      email,
      role: 'admin',
      enabled: true,
      enrolled: false,
      enrollmentExpiresAt: DAY_LATER,
      lastLoginAt: null,
      createdAt: T,
      updatedAt: T,
      ...extra,
    });

    it('addOperator: enabled, not enrolled, its link open, both times from the clock, its event in the same write', async () => {
      const created = audit('operator.created', 'op_1', {
        changes: { email: 'ops@example.com', role: 'admin' },
      });
      const operator = await store.addOperator(newOperator('op_1', 'ops@example.com'), created);
      const expected = added('op_1', 'ops@example.com');
      expect(operator).toEqual(expected);
      expect(await store.findOperator('op_1')).toEqual(expected);
      expect(await store.findOperator('ops@example.com')).toEqual(expected);
      expect(await store.findOperatorCredentials('ops@example.com')).toEqual({
        operator: expected,
        passwordHash: null,
      });
      expect(await store.findOperatorByEnrollment('enroll-op_1')).toEqual(expected);
      expect(await store.listOperators()).toEqual([expected]);
      expect(await events()).toEqual([changeEventAt(T, created)]);
      // A viewer, without an audit event.
      const viewer = await store.addOperator(
        newOperator('op_2', 'viewer@example.com', {
          role: 'viewer',
          enrollExpiresAt: '2030-01-02T04:00:00.000Z',
        }),
      );
      expect(viewer).toEqual(
        added('op_2', 'viewer@example.com', {
          role: 'viewer',
          enrollmentExpiresAt: '2030-01-02T04:00:00.000Z',
        }),
      );
      expect(await store.findOperator('op_2')).toEqual(viewer);
      expect(await events()).toEqual([changeEventAt(T, created)]);
      // Operators are not tokens: the per-minute counts stay empty.
      expect(await store.tokenCounts(0, Date.parse('2100-01-01T00:00:00Z'))).toEqual([]);
    });

    it('addOperator refuses an email that is taken (conflict, operator), writes no event, keeps the first', async () => {
      const first = await store.addOperator(newOperator('op_1', 'ops@example.com'));
      clock.advance(1000);
      const error = await storeError(
        store.addOperator(
          newOperator('op_2', 'ops@example.com', { role: 'viewer' }),
          audit('operator.created', 'op_2'),
        ),
      );
      expect(error).toMatchObject({
        code: 'conflict',
        resource: 'operator',
        message: 'operator ops@example.com already exists',
      });
      expect(await store.listOperators()).toEqual([first]);
      expect(await store.findOperator('op_2')).toBeUndefined();
      expect(await store.findOperatorByEnrollment('enroll-op_2')).toBeUndefined();
      expect(await events()).toEqual([]);
    });

    it('addOperator: of two adds of one email at the same moment, exactly one succeeds', async () => {
      const results = await Promise.allSettled(
        ['op_1', 'op_2', 'op_3'].map((id) =>
          store.addOperator(newOperator(id, 'same@example.com'), audit('operator.created', id)),
        ),
      );
      const won = results.filter((r) => r.status === 'fulfilled');
      const lost = results.filter((r) => r.status === 'rejected');
      expect(won).toHaveLength(1);
      expect(lost).toHaveLength(2);
      for (const r of lost) {
        expect(r.reason).toBeInstanceOf(StoreError);
        expect(r.reason).toMatchObject({ code: 'conflict', resource: 'operator' });
      }
      const winner = (won[0] as PromiseFulfilledResult<Operator>).value;
      expect(await store.listOperators()).toEqual([winner]);
      expect((await events()).map((e) => e.target)).toEqual([winner.id]);
    });

    it('finds nothing for an unknown id, email or digest; credentials by email only', async () => {
      await store.addOperator(newOperator('op_1', 'ops@example.com'));
      expect(await store.findOperator('op_2')).toBeUndefined();
      expect(await store.findOperator('other@example.com')).toBeUndefined();
      expect(await store.findOperator('')).toBeUndefined();
      expect(await store.findOperatorCredentials('other@example.com')).toBeUndefined();
      expect(await store.findOperatorCredentials('op_1')).toBeUndefined();
      expect(await store.findOperatorByEnrollment('enroll-op_2')).toBeUndefined();
      expect(await store.findOperatorByEnrollment('op_1')).toBeUndefined();
    });

    it('listOperators: by email, in code-unit order, whatever the order they were added in', async () => {
      const emails = [
        'zed@example.com',
        'a.b@example.com',
        'a-b@example.com',
        'ab@example.com',
        'a_b@example.com',
      ];
      for (const [i, email] of emails.entries()) await store.addOperator(newOperator(`op_${i}`, email));
      expect((await store.listOperators()).map((o) => o.email)).toEqual([...emails].sort());
      expect([...emails].sort()).toEqual([
        'a-b@example.com',
        'a.b@example.com',
        'a_b@example.com',
        'ab@example.com',
        'zed@example.com',
      ]);
    });

    it('updateOperator sets the role and stamps updated_at, with its event; sessions stay', async () => {
      await store.addOperator(newOperator('op_1', 'ops@example.com'));
      await store.createOperatorSession(session('s1', 'op_1'));
      clock.advance(5000);
      const changed = audit('operator.updated', 'op_1', {
        changes: { role: { from: 'admin', to: 'viewer' } },
      });
      const updated = await store.updateOperator('op_1', { role: 'viewer' }, changed);
      const expected = added('op_1', 'ops@example.com', {
        role: 'viewer',
        lastLoginAt: T,
        updatedAt: clock.iso(),
      });
      expect(updated).toEqual(expected);
      expect(await store.findOperator('op_1')).toEqual(expected);
      expect(await sessionIds('s1')).toEqual(['s1']);
      expect(await events()).toEqual([changeEventAt(clock.iso(), changed)]);
      // enabled: true keeps the sessions too; a patch without a field keeps it.
      clock.advance(5000);
      const again = await store.updateOperator('op_1', { enabled: true });
      expect(again).toEqual({ ...expected, updatedAt: clock.iso() });
      expect(await sessionIds('s1')).toEqual(['s1']);
    });

    it('updateOperator enabled:false disables the operator, with its event; endOperatorSessions ends only theirs', async () => {
      await store.addOperator(newOperator('op_1', 'ops@example.com'));
      await store.addOperator(newOperator('op_2', 'other@example.com'));
      await store.createOperatorSession(session('s1', 'op_1'));
      await store.createOperatorSession(session('s2', 'op_1'));
      await store.createOperatorSession(session('s3', 'op_2'));
      const disabled = audit('operator.updated', 'op_1', {
        changes: { enabled: { from: true, to: false } },
      });
      clock.advance(1000);
      const updated = await store.updateOperator('op_1', { enabled: false }, disabled);
      expect(updated).toEqual(
        added('op_1', 'ops@example.com', { enabled: false, lastLoginAt: T, updatedAt: clock.iso() }),
      );
      expect(await events()).toEqual([changeEventAt(clock.iso(), disabled)]);
      // The store stores: ending the sessions of a disabled operator is the management layer's rule.
      expect(await sessionIds('s1', 's2', 's3')).toEqual(['s1', 's2', 's3']);
      // Rolled back with a transaction: the sessions are there.
      await expect(
        store.transaction(async (tx) => {
          await tx.endOperatorSessions('op_1');
          expect(await tx.findOperatorSession('s1')).toBeUndefined();
          throw new Error('changed my mind');
        }),
      ).rejects.toThrow('changed my mind');
      expect(await sessionIds('s1', 's2', 's3')).toEqual(['s1', 's2', 's3']);
      await store.endOperatorSessions('op_1');
      expect(await sessionIds('s1', 's2', 's3')).toEqual(['s3']);
      // No operator, or none of theirs: nothing to end, no error.
      await store.endOperatorSessions('op_1');
      await store.endOperatorSessions('op_nobody');
      expect(await sessionIds('s1', 's2', 's3')).toEqual(['s3']);
      expect(await events()).toHaveLength(1);
    });

    it('updateOperator with a new enrollment: the password cleared, the old link closed, the sessions kept', async () => {
      await store.addOperator(newOperator('op_1', 'ops@example.com'));
      await store.addOperator(newOperator('op_2', 'other@example.com'));
      const hash = 'scrypt$hash-of-a-password';
      await store.enrollOperator('enroll-op_1', hash, T, (op) => audit('operator.enrolled', op.id));
      await store.createOperatorSession(session('s1', 'op_1'));
      await store.createOperatorSession(session('s2', 'op_2'));
      clock.advance(60_000);
      const link = { digest: 'enroll-op_1-again', expiresAt: '2030-01-03T03:05:05.006Z' };
      const reset = audit('operator.reset', 'op_1', { changes: { email: 'ops@example.com' } });
      const updated = await store.updateOperator('op_1', { enrollment: link }, reset);
      const expected = added('op_1', 'ops@example.com', {
        enrollmentExpiresAt: link.expiresAt,
        lastLoginAt: T,
        updatedAt: clock.iso(),
      });
      expect(updated).toEqual(expected);
      expect(await store.findOperatorCredentials('ops@example.com')).toEqual({
        operator: expected,
        passwordHash: null,
      });
      expect(await store.findOperatorByEnrollment('enroll-op_1')).toBeUndefined();
      expect(await store.findOperatorByEnrollment('enroll-op_1-again')).toEqual(expected);
      // Ending the sessions of an operator reset is the management layer's rule (endOperatorSessions).
      expect(await sessionIds('s1', 's2')).toEqual(['s1', 's2']);
      expect((await events())[0]).toEqual(changeEventAt(clock.iso(), reset));
      // The new link works, once; the old one never again.
      expect(
        await store.enrollOperator('enroll-op_1', 'old', clock.iso(), (op) =>
          audit('operator.enrolled', op.id),
        ),
      ).toBeUndefined();
      const enrolled = await store.enrollOperator('enroll-op_1-again', 'scrypt$new', clock.iso(), (op) =>
        audit('operator.enrolled', op.id),
      );
      expect(enrolled?.enrolled).toBe(true);
      expect((await store.findOperatorCredentials('ops@example.com'))?.passwordHash).toBe('scrypt$new');
    });

    it('updateOperator refuses an unknown operator (not_found, operator) and writes no event', async () => {
      await store.addOperator(newOperator('op_1', 'ops@example.com'));
      const error = await storeError(
        store.updateOperator('op_2', { role: 'viewer' }, audit('operator.updated', 'op_2')),
      );
      expect(error).toMatchObject({
        code: 'not_found',
        resource: 'operator',
        message: 'operator op_2 does not exist',
      });
      // By id only: an email is not an id here.
      const byEmail = await storeError(store.updateOperator('ops@example.com', { role: 'viewer' }));
      expect(byEmail).toMatchObject({ code: 'not_found', resource: 'operator' });
      expect(await store.listOperators()).toEqual([added('op_1', 'ops@example.com')]);
      expect(await events()).toEqual([]);
    });

    it('removeOperator deletes the operator and their sessions, with its event; not_found for nobody', async () => {
      await store.addOperator(newOperator('op_1', 'ops@example.com'));
      await store.addOperator(newOperator('op_2', 'other@example.com'));
      await store.createOperatorSession(session('s1', 'op_1'));
      await store.createOperatorSession(session('s2', 'op_2'));
      clock.advance(1000);
      const removed = audit('operator.deleted', 'op_1', { changes: { email: 'ops@example.com' } });
      await store.removeOperator('op_1', removed);
      expect(await store.findOperator('op_1')).toBeUndefined();
      expect(await store.findOperator('ops@example.com')).toBeUndefined();
      expect(await store.findOperatorByEnrollment('enroll-op_1')).toBeUndefined();
      expect(await sessionIds('s1', 's2')).toEqual(['s2']);
      expect((await store.listOperators()).map((o) => o.id)).toEqual(['op_2']);
      expect(await events()).toEqual([changeEventAt(clock.iso(), removed)]);

      const error = await storeError(store.removeOperator('op_1', audit('operator.deleted', 'op_1')));
      expect(error).toMatchObject({
        code: 'not_found',
        resource: 'operator',
        message: 'operator op_1 does not exist',
      });
      expect(await events()).toEqual([changeEventAt(clock.iso(), removed)]);
      // The email is free again.
      expect((await store.addOperator(newOperator('op_3', 'ops@example.com'))).id).toBe('op_3');
    });

    it('enrollOperator sets the password and closes the link, with the event the callback makes; works once', async () => {
      await store.addOperator(newOperator('op_1', 'ops@example.com'));
      clock.advance(1000);
      const now = '2030-01-02T10:00:00.000Z';
      const seen: Operator[] = [];
      const enrolled = (op: Operator) => {
        seen.push(op);
        return audit('operator.enrolled', op.id, { actor: `operator:${op.email}`, source: '203.0.113.7' });
      };
      const operator = await store.enrollOperator('enroll-op_1', 'scrypt$first', now, enrolled);
      const expected = added('op_1', 'ops@example.com', {
        enrolled: true,
        enrollmentExpiresAt: null,
        updatedAt: now,
      });
      expect(operator).toEqual(expected);
      expect(seen).toEqual([expected]);
      expect(await store.findOperatorCredentials('ops@example.com')).toEqual({
        operator: expected,
        passwordHash: 'scrypt$first',
      });
      expect(await store.findOperatorByEnrollment('enroll-op_1')).toBeUndefined();
      const written = changeEventAt(clock.iso(), enrolled(expected));
      expect(await events()).toEqual([written]);

      // The same link again: nothing, and the password stays.
      seen.length = 0;
      expect(await store.enrollOperator('enroll-op_1', 'scrypt$second', now, enrolled)).toBeUndefined();
      expect(seen).toEqual([]);
      expect((await store.findOperatorCredentials('ops@example.com'))?.passwordHash).toBe('scrypt$first');
      expect(await events()).toEqual([written]);
      // A link nobody has.
      expect(await store.enrollOperator('enroll-nobody', 'scrypt$x', now, enrolled)).toBeUndefined();
      expect(seen).toEqual([]);
    });

    it('enrollOperator refuses a link past its expiry (the expiry itself included) and a disabled operator', async () => {
      await store.addOperator(newOperator('op_1', 'one@example.com'));
      await store.addOperator(newOperator('op_2', 'two@example.com'));
      await store.addOperator(newOperator('op_3', 'three@example.com'));
      const enrolled = (op: Operator) => audit('operator.enrolled', op.id);
      // At the expiry and after: closed.
      expect(await store.enrollOperator('enroll-op_1', 'h', DAY_LATER, enrolled)).toBeUndefined();
      expect(
        await store.enrollOperator('enroll-op_1', 'h', '2030-01-04T00:00:00.000Z', enrolled),
      ).toBeUndefined();
      expect((await store.findOperatorCredentials('one@example.com'))?.passwordHash).toBeNull();
      // The link is still the operator's (the enroll page can say it expired), and works no more.
      expect((await store.findOperatorByEnrollment('enroll-op_1'))?.id).toBe('op_1');
      // A millisecond before: open.
      expect(
        (await store.enrollOperator('enroll-op_2', 'h2', '2030-01-03T03:04:05.005Z', enrolled))?.enrolled,
      ).toBe(true);
      // Disabled: refused, the link kept; enabled again within its time, it works.
      await store.updateOperator('op_3', { enabled: false });
      expect(await store.enrollOperator('enroll-op_3', 'h3', T, enrolled)).toBeUndefined();
      expect((await store.findOperatorCredentials('three@example.com'))?.passwordHash).toBeNull();
      expect((await store.findOperatorByEnrollment('enroll-op_3'))?.enabled).toBe(false);
      await store.updateOperator('op_3', { enabled: true });
      expect((await store.enrollOperator('enroll-op_3', 'h3', T, enrolled))?.enrolled).toBe(true);
      expect((await events()).map((e) => [e.type, e.target])).toEqual([
        ['operator.enrolled', 'op_3'],
        ['operator.enrolled', 'op_2'],
      ]);
    });

    it('each write and its event are one transaction: an event that cannot be written undoes the write', async () => {
      // An event the table refuses (a type that cannot be null): the write must leave nothing behind.
      const bad = { ...audit('operator.updated', 'op_1'), type: null } as unknown as ChangeAudit;
      await expect(store.addOperator(newOperator('op_1', 'ops@example.com'), bad)).rejects.toThrow();
      expect(await store.listOperators()).toEqual([]);

      await store.addOperator(newOperator('op_1', 'ops@example.com'));
      const hash = 'scrypt$h';
      await expect(store.enrollOperator('enroll-op_1', hash, T, () => bad)).rejects.toThrow();
      expect(await store.findOperatorCredentials('ops@example.com')).toEqual({
        operator: added('op_1', 'ops@example.com'),
        passwordHash: null,
      });
      await expect(store.createOperatorSession(session('s1', 'op_1'), bad)).rejects.toThrow();
      expect(await store.findOperatorSession('s1')).toBeUndefined();
      expect((await store.findOperator('op_1'))?.lastLoginAt).toBeNull();

      await store.createOperatorSession(session('s1', 'op_1'));
      const before = await store.findOperator('op_1');
      clock.advance(1000);
      for (const patch of [
        { enabled: false },
        { role: 'viewer' as const },
        { enrollment: { digest: 'new', expiresAt: DAY_LATER } },
      ])
        await expect(store.updateOperator('op_1', patch, bad)).rejects.toThrow();
      expect(await store.findOperator('op_1')).toEqual(before);
      expect(await store.findOperatorByEnrollment('enroll-op_1')).toEqual(before);
      expect(await store.findOperatorByEnrollment('new')).toBeUndefined();
      expect(await sessionIds('s1')).toEqual(['s1']);
      await expect(store.deleteOperatorSession('s1', bad)).rejects.toThrow();
      expect(await sessionIds('s1')).toEqual(['s1']);
      await expect(store.removeOperator('op_1', bad)).rejects.toThrow();
      expect(await store.findOperator('op_1')).toEqual(before);
      expect(await sessionIds('s1')).toEqual(['s1']);
      await expect(store.recordEvent(bad)).rejects.toThrow();
      expect(await events()).toEqual([]);
    });

    it('enrollOperator: of several requests presenting one link at the same moment, exactly one succeeds', async () => {
      for (let round = 0; round < 3; round++) {
        const id = `op_${round}`;
        await store.addOperator(newOperator(id, `ops${round}@example.com`));
        const hashes = ['a', 'b', 'c', 'd'].map((h) => `scrypt$${round}${h}`);
        const results = await Promise.all(
          hashes.map((hash) =>
            store.enrollOperator(`enroll-${id}`, hash, T, (op) =>
              audit('operator.enrolled', op.id, { changes: { hash } }),
            ),
          ),
        );
        const won = results.flatMap((r, i) => (r === undefined ? [] : [i]));
        expect(won).toHaveLength(1);
        expect(results[won[0]!]).toMatchObject({ id, enrolled: true, enrollmentExpiresAt: null });
        expect((await store.findOperatorCredentials(`ops${round}@example.com`))?.passwordHash).toBe(
          hashes[won[0]!],
        );
        const enrolledEvents = (await events()).filter((e) => e.target === id);
        expect(enrolledEvents.map((e) => e.changes)).toEqual([{ hash: hashes[won[0]!] }]);
      }
    });
  });
}
