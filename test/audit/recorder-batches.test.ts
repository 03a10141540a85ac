import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { AuditRecorder } from '../../src/audit/recorder.js';
import type { AuditEntry } from '../../src/domain/token-events.js';
import { openSqliteStore } from '../../src/store/sqlite.js';
import type { AuditRecord, AuditStore, Store } from '../../src/store/types.js';
import { collectGarbage } from '../helpers/memory.js';
import { tempDir } from '../helpers/server.js';
import { clockAt } from '../helpers/clock.js';

// How a flush hands the spool's chunks to the store, one batch of parts (AuditRecorder's writeBatch): each chunk read
// only once the part before it is with the store, and no chunk's events kept here after that.

const T0 = Date.parse('2026-11-01T10:00:00.000Z');
/** A token's event, the i-th. */
const issued = (i: number): AuditEntry => ({
  at: T0 + i,
  type: 'token.issued',
  clientId: 'svc',
  audience: null,
  jti: `jti-${i}`,
  reason: null,
  source: null,
});
const line = (jti: string) =>
  JSON.stringify([T0, 'token.issued', 'svc', 'https://api.example.com', jti, null, '192.0.2.1', null]);

const closing: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const open of closing.splice(0).reverse()) await open.close();
});

/**
 * The server's SQLite store (a maintenance thread, which holds a batch's parts in one transaction), and the parts as
 * the recorder asks for them: each with its jtis and a weak reference to the events it was given. Every part waits
 * for `opened` before it answers.
 */
async function storeAndParts(dir: string) {
  const store: Store = openSqliteStore(path.join(dir, 'tessera.db'), { backgroundCheckpoints: true });
  closing.push(store);
  await store.migrate();
  const parts: {
    first: boolean;
    last: boolean;
    jtis: (string | null)[];
    events: WeakRef<readonly AuditRecord[]>;
  }[] = [];
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  // The store itself, but for its audit writes, which are recorded and held until `opened`.
  const audit: AuditStore = {
    ...store,
    appendAuditEvents: (events, position, part) => {
      parts.push({ ...part!, jtis: events.map((e) => e.jti), events: new WeakRef(events) });
      const written = store.appendAuditEvents(events, position, part);
      return opened.then(() => written);
    },
  };
  const stored = async () => (await store.queryAuditEvents({ limit: 1000 })).map((e) => e.jti).reverse();
  return { audit, parts, open, stored };
}

function recorder(audit: AuditStore, spoolDir: string, logger = pino({ level: 'silent' })): AuditRecorder {
  // Chunks of two events; a clock that stands still, so that no batch is cut short by its 50 ms.
  const made = new AuditRecorder(audit, {
    spoolDir,
    spoolMaxBytes: 1 << 30,
    retentionSeconds: 10 * 365 * 86_400,
    logger,
    flushMs: 3_600_000,
    batch: 2,
    clock: clockAt(() => T0),
  });
  closing.push(made);
  return made;
}

async function until(done: () => boolean): Promise<void> {
  for (let i = 0; !done(); i++) {
    if (i > 10_000) throw new Error('gave up waiting');
    await new Promise((resolve) => setImmediate(resolve));
  }
}

describe('AuditRecorder: the parts of a batch', () => {
  it('reads each chunk once the store has the one before, and keeps none of its events once the store has them', async () => {
    const dir = tempDir();
    const { audit, parts, open, stored } = await storeAndParts(dir);
    const r = recorder(audit, path.join(dir, 'spool'));
    r.start();
    for (let i = 0; i < 3; i++) r.record(issued(i));
    r.persist();
    const flushed = r.flush();
    await until(() => parts.length === 1);
    expect(parts[0]).toMatchObject({ first: true, last: false, jtis: ['jti-0', 'jti-1'] });
    // Recorded while the store has the first part: the chunk after it, read only now, has them.
    for (let i = 3; i < 5; i++) r.record(issued(i));
    r.persist();
    // The events handed to the store are held by nothing here while it writes them.
    collectGarbage();
    const kept = parts[0]!.events.deref() !== undefined;
    open();
    await flushed;
    expect(kept).toBe(false);
    expect(parts.map((p) => [p.first, p.last, p.jtis])).toEqual([
      [true, false, ['jti-0', 'jti-1']],
      [false, false, ['jti-2', 'jti-3']],
      [false, true, ['jti-4']],
    ]);
    expect(await stored()).toEqual(['jti-0', 'jti-1', 'jti-2', 'jti-3', 'jti-4']);
    expect(r.queued).toBe(0);
  });

  it('a chunk of damaged lines is a part with no events, and a line cut short at the end of a segment its last', async () => {
    const dir = tempDir();
    const spoolDir = path.join(dir, 'spool');
    const { audit, parts, open, stored } = await storeAndParts(dir);
    open();
    // The segment of a process that is gone: two events, two damaged lines, two events, and a line cut short.
    mkdirSync(spoolDir, { recursive: true });
    const lines = [line('a'), line('b'), 'not json', '[1]', line('c'), line('d')].join('\n') + '\n';
    writeFileSync(path.join(spoolDir, 'gone-0123ab.00000001.spool'), lines + line('e').slice(0, 30));
    const logged: { msg: string; lines?: number }[] = [];
    const logger = pino({ level: 'info' }, { write: (text: string) => void logged.push(JSON.parse(text)) });
    const r = recorder(audit, spoolDir, logger);
    r.start();
    await r.flush();
    expect(parts.map((p) => [p.first, p.last, p.jtis])).toEqual([
      [true, false, ['a', 'b']],
      [false, false, []],
      [false, false, ['c', 'd']],
      [false, true, []],
    ]);
    expect(await stored()).toEqual(['a', 'b', 'c', 'd']);
    expect(logged.filter((l) => l.msg === 'damaged audit spool lines were skipped')).toMatchObject([
      { lines: 3 },
    ]);
    // Written to its end: the adopted segment is gone at the next flush.
    await r.flush();
    expect(r.spoolSegments.some((name) => name.startsWith('gone-'))).toBe(false);
  });
});
