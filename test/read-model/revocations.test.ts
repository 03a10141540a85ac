/**
 * The denylist and the clients' cuts in memory (read-model/revocations.ts): what start loads, what the change feed
 * brings (through a Directory, as a server follows it), what pruning forgets, and how much memory 100 000
 * revoked tokens hold.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Directory } from '../../src/read-model/directory.js';
import { Revocations } from '../../src/read-model/revocations.js';
import { openSqliteStore } from '../../src/store/sqlite.js';
import type { Store } from '../../src/store/types.js';
import { stillClock, type TestClock } from '../helpers/clock.js';
import { retainedBytes } from '../helpers/memory.js';

const DAY = 86_400;
const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

let clock: TestClock;
let file: string;
let store: Store;
let revocations: Revocations;
let directory: Directory;

const seconds = () => Math.floor(clock.now() / 1000);
const newClient = (id: string, enabled = true) =>
  store.createClient({ id, name: id, secretDigest: null, tokenTtl: null, audiences: [], enabled });

/** A server's view: revocations loaded and followed through a directory on the same store. */
async function follow(): Promise<void> {
  revocations = new Revocations(store, { clock, maxTokenTtl: DAY });
  directory = new Directory(store, {
    ttlMs: 60_000,
    max: 1000,
    pollMs: 3_600_000,
    retryAfter: 5,
    clock,
    followers: [revocations],
  });
  await directory.start();
}

beforeEach(async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'tessera-revocations-'));
  dirs.push(dir);
  file = path.join(dir, 'tessera.db');
  clock = stillClock();
  store = openSqliteStore(file, clock.date);
  await store.migrate();
});
afterEach(async () => {
  revocations?.stop();
  await directory?.stop();
  await store.close();
});

describe('Revocations', () => {
  it('loads the tokens revoked and not expired, and the cuts that still matter', async () => {
    await newClient('old');
    await newClient('old-off', false);
    await newClient('old-revoked');
    clock.advance((DAY + 10) * 1000);
    await store.revokeToken({ jti: 'live', clientId: 'a', exp: seconds() + 60 });
    await store.revokeToken({ jti: 'gone', clientId: 'a', exp: seconds() });
    await store.updateClient('old-revoked', { revokedBefore: clock.iso() });
    await newClient('new');
    await newClient('revoked-long-ago');
    await store.updateClient('revoked-long-ago', { revokedBefore: '2000-01-01T00:00:00.000Z' });
    await follow();
    expect(revocations.isRevoked('live')).toBe(true);
    expect(revocations.isRevoked('gone')).toBe(false);
    expect(revocations.cutOf('old')).toBe(-Infinity);
    expect(revocations.cutOf('old-off')).toBe(Infinity);
    expect(revocations.cutOf('old-revoked')).toBe(seconds());
    // Made a moment ago: the tokens of a client deleted before it, under its id, are cut (2 s of clock skew).
    expect(revocations.cutOf('new')).toBe(seconds() - 2);
    // A revoked_before older than its creation cuts nothing more.
    expect(revocations.cutOf('revoked-long-ago')).toBe(seconds() - 2);
    expect(revocations.cutOf('nobody')).toBe(-Infinity);
    expect(revocations.size()).toEqual({ tokens: 1, clients: 4 });
  });

  it('follows the feed: a token revoked elsewhere, a client revoked, disabled, enabled, deleted and made again', async () => {
    await newClient('svc');
    clock.advance((DAY + 10) * 1000);
    await follow();
    expect(revocations.cutOf('svc')).toBe(-Infinity);

    // Another instance (the same store) revokes a token, and a client's tokens.
    await store.revokeToken({ jti: 'j-1', clientId: 'svc', exp: seconds() + 600 });
    await store.updateClient('svc', { revokedBefore: clock.iso() });
    expect(revocations.isRevoked('j-1')).toBe(false);
    await directory.poll();
    expect(revocations.isRevoked('j-1')).toBe(true);
    expect(revocations.cutOf('svc')).toBe(seconds());

    clock.advance(5000);
    await store.updateClient('svc', { enabled: false });
    await directory.poll();
    expect(revocations.cutOf('svc')).toBe(Infinity);
    // Enabled again: its cut is its revoked_before (the management layer set it when it disabled it).
    await store.updateClient('svc', { enabled: true, revokedBefore: clock.iso() });
    await directory.poll();
    expect(revocations.cutOf('svc')).toBe(seconds());

    await store.deleteClient('svc');
    await directory.poll();
    expect(revocations.cutOf('svc')).toBe(Infinity);
    // Made again under the same id: a new client, whose old namesake's tokens stay cut.
    clock.advance(3000);
    await newClient('svc');
    await directory.poll();
    expect(revocations.cutOf('svc')).toBe(seconds() - 2);
  });

  it('a client deleted and made again within the same second: its old tokens stay cut, on load and by the feed', async () => {
    await newClient('svc');
    clock.advance((DAY + 10) * 1000);
    await follow();
    const deletedAt = seconds();
    clock.advance(200);
    // Deleted and made again before any poll: the feed brings both in one batch.
    await store.deleteClient('svc');
    await newClient('svc');
    await directory.poll();
    expect(revocations.cutOf('svc')).toBe(deletedAt);
    // The same seen by an instance starting now.
    const fresh = new Revocations(store, { clock, maxTokenTtl: DAY });
    await fresh.load();
    expect(fresh.cutOf('svc')).toBe(deletedAt);
    // A tombstone no longer needed once every token of the deleted client has expired: pruned with the denylist.
    await store.deleteClient('svc');
    clock.advance((DAY + 1) * 1000);
    await revocations.prune();
    await newClient('svc');
    expect((await store.findClient('svc'))!.revokedBefore).toBeNull();
  });

  it('revoke(): in the store with its change and event, known here at once; again, nothing more', async () => {
    await follow();
    const token = { jti: 'j-2', clientId: 'svc', exp: seconds() + 60 };
    await revocations.revoke(token, '203.0.113.9');
    expect(revocations.isRevoked('j-2')).toBe(true);
    await revocations.revoke(token, '203.0.113.9');
    expect(await store.listRevokedTokens(seconds())).toEqual([{ jti: 'j-2', exp: token.exp }]);
    const events = await store.queryAuditEvents({ limit: 10, types: ['token.revoked'] });
    expect(events.map((e) => [e.actor, e.target, e.clientId, e.source, e.changes])).toEqual([
      ['client:svc', 'j-2', 'svc', '203.0.113.9', { exp: new Date(token.exp * 1000).toISOString() }],
    ]);
    expect((await store.changesSince(0, 100)).filter((c) => c.entity === 'token')).toEqual([
      { seq: expect.any(Number) as number, entity: 'token', key: `${token.exp} j-2` },
    ]);
  });

  it('prune forgets what has expired, in memory and in the store; a deleted client after a day', async () => {
    await newClient('svc');
    await newClient('gone');
    await follow();
    await revocations.revoke({ jti: 'short', clientId: 'svc', exp: seconds() + 60 }, null);
    await revocations.revoke({ jti: 'long', clientId: 'svc', exp: seconds() + 3600 }, null);
    await store.deleteClient('gone');
    await directory.poll();
    expect(revocations.size()).toEqual({ tokens: 2, clients: 2 });

    clock.advance(60_000);
    await revocations.prune();
    expect(revocations.isRevoked('short')).toBe(false);
    expect(revocations.isRevoked('long')).toBe(true);
    expect((await store.listRevokedTokens(0)).map((t) => t.jti)).toEqual(['long']);

    clock.advance(DAY * 1000);
    await revocations.prune();
    expect(revocations.size()).toEqual({ tokens: 0, clients: 0 });
    expect(await store.listRevokedTokens(0)).toEqual([]);
  });

  it('holds 100 000 revoked tokens in a few MB, loaded from the store or brought by the feed', async () => {
    const exp = seconds() + 3600;
    const jtis = Array.from({ length: 100_000 }, (_, i) =>
      Buffer.from(`${i}`.padStart(16, '0')).toString('base64url'),
    );
    const db = new DatabaseSync(file);
    db.exec('begin');
    const insert = db.prepare('insert into revoked_tokens (jti, client_id, exp) values (?, ?, ?)');
    for (const jti of jtis) insert.run(jti, 'svc', exp);
    db.exec('commit');
    db.close();

    const loaded = await retainedBytes(async () => {
      const kept = new Revocations(store, { clock, maxTokenTtl: DAY });
      await kept.load();
      return kept;
    });
    const followed = await retainedBytes(async () => {
      const kept = new Revocations(store, { clock, maxTokenTtl: DAY });
      await kept.apply(jtis.map((jti, seq) => ({ seq, entity: 'token' as const, key: `${exp} ${jti}` })));
      return kept;
    });
    console.log(
      `100 000 revoked tokens: ${(loaded / 2 ** 20).toFixed(1)} MiB loaded at start, ` +
        `${(followed / 2 ** 20).toFixed(1)} MiB brought by the change feed`,
    );
    expect(loaded).toBeLessThan(16 * 2 ** 20);
    expect(followed).toBeLessThan(16 * 2 ** 20);
  });

  it('holds the cuts of 100 000 clients made within the token lifetime in about 100 bytes each', async () => {
    const made = clock.date().toISOString();
    const db = new DatabaseSync(file);
    db.exec('begin');
    const insert = db.prepare(
      'insert into clients (id, name, secret_digest, enabled, created_at, updated_at, secret_rotated_at) values (?, ?, ?, 1, ?, ?, ?)',
    );
    for (let i = 0; i < 100_000; i++)
      insert.run(`${i}`.padStart(32, 'c'), 'made lately', '', made, made, made);
    db.exec('commit');
    db.close();

    let kept: Revocations | undefined;
    const bytes = await retainedBytes(async () => {
      kept = new Revocations(store, { clock, maxTokenTtl: DAY });
      await kept.load();
      return kept;
    });
    console.log(`cuts of 100 000 clients made lately: ${(bytes / 2 ** 20).toFixed(1)} MiB`);
    expect(kept!.size()).toEqual({ tokens: 0, clients: 100_000 });
    // Each cut: the client's id (a 32-character string) and a number in a Map: 8.1 MiB; 13.4 MiB as objects.
    expect(bytes).toBeLessThan(12 * 2 ** 20);
    // Forgotten once the tokens of their first second could have expired.
    clock.advance((DAY + 2) * 1000);
    await kept!.prune();
    expect(kept!.size()).toEqual({ tokens: 0, clients: 0 });
  });
});
