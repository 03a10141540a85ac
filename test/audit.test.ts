import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { AuditRecorder } from '../src/audit/recorder.js';
import type { AuditEvent, AuditStore } from '../src/store/types.js';
import { tesseraOk } from './helpers/process.js';
import { postToken, startTestServer, type TestClient, type TestServer } from './helpers/server.js';

const API = 'https://api.example.com';
const OTHER = 'https://other.example.com';

describe('the audit trail', () => {
  let t: TestServer;
  let client: TestClient;
  const logLines: string[] = [];
  const tokens: string[] = [];

  beforeAll(async () => {
    t = await startTestServer({ TESSERA_LOG_LEVEL: 'info', TESSERA_TRUST_PROXY: 'loopback' }, (l) =>
      logLines.push(l),
    );
    await t.addAudience(API);
    await t.addAudience(OTHER);
    client = await t.createClient([API]);
    const ask = (extra: Record<string, string>) =>
      postToken(
        t.url,
        {
          grant_type: 'client_credentials',
          client_id: client.id,
          client_secret: client.secret,
          audience: API,
          ...extra,
        },
        { headers: { 'x-forwarded-for': '198.51.100.4' } },
      );
    for (let i = 0; i < 2; i++) tokens.push((await ask({})).body.access_token as string);
    await ask({ client_secret: 'wrong' });
    await ask({ audience: OTHER });
    await ask({ client_id: 'nobody-here' });
    await ask({ client_id: 'not an id\u0000' });
    await t.server.runtime.audit.flush();
  });
  afterAll(async () => t.close());

  it('records every issued token and every refusal, newest first, without secrets or tokens', async () => {
    const events = await t.server.runtime.store.queryAuditEvents({ limit: 100 });
    expect(events.map((e) => [e.outcome, e.clientId, e.audience, e.reason])).toEqual([
      ['refused', '(not a client id)', API, 'invalid_client: unknown client'],
      ['refused', 'nobody-here', API, 'invalid_client: unknown client'],
      ['refused', client.id, OTHER, 'invalid_target: the requested audience is not granted to this client'],
      ['refused', client.id, API, 'invalid_client: wrong secret'],
      ['issued', client.id, API, null],
      ['issued', client.id, API, null],
    ]);
    for (const e of events) {
      expect(e.source).toBe('198.51.100.4');
      expect(Date.parse(e.at)).toBeGreaterThan(Date.now() - 60_000);
    }
    const issued = events.filter((e) => e.outcome === 'issued');
    for (const e of issued) expect(e.jti).toMatch(/^[A-Za-z0-9_-]{22}$/);
    const text = JSON.stringify(events);
    expect(text).not.toContain(client.secret);
    for (const token of tokens) expect(text).not.toContain(token.split('.')[2]);
  });

  it('logs each event as JSON, without secrets or tokens', () => {
    const audit = logLines
      .map((l) => JSON.parse(l) as { msg: string; audit?: AuditEvent })
      .filter((l) => l.audit);
    expect(audit.map((l) => l.msg)).toEqual([
      'token issued',
      'token issued',
      'token refused',
      'token refused',
      'token refused',
      'token refused',
    ]);
    const all = logLines.join('\n');
    expect(all).not.toContain(client.secret);
    for (const token of tokens) expect(all).not.toContain(token);
  });

  it('tessera audit filters by client, audience, outcome and time, with --json', async () => {
    const env = { ...process.env, TESSERA_DATA_DIR: t.dataDir, TESSERA_MASTER_KEY: t.config.masterKey };
    const refused = await tesseraOk(env, 'audit', '--client', client.id, '--outcome', 'refused', '--json');
    expect(refused.json.map((e: { reason: string }) => e.reason)).toEqual([
      'invalid_target: the requested audience is not granted to this client',
      'invalid_client: wrong secret',
    ]);
    const other = await tesseraOk(env, 'audit', '--audience', OTHER, '--since', '1h', '--json');
    expect(other.json).toHaveLength(1);
    expect(other.json[0]).toEqual({
      at: expect.any(String),
      outcome: 'refused',
      client_id: client.id,
      audience: OTHER,
      jti: null,
      reason: 'invalid_target: the requested audience is not granted to this client',
      source: '198.51.100.4',
    });
    const none = await tesseraOk(env, 'audit', '--until', '2000-01-01T00:00:00Z', '--json');
    expect(none.json).toEqual([]);
    const limited = await tesseraOk(env, 'audit', '--limit', '1');
    expect(limited.stdout.split('\n')[0]).toMatch(/^AT +OUTCOME +CLIENT_ID +AUDIENCE +JTI +REASON +SOURCE$/);
    expect(limited.stdout.trim().split('\n')).toHaveLength(2);
  });
});

describe('AuditRecorder', () => {
  const event = (at: string): AuditEvent => ({
    at,
    outcome: 'issued',
    clientId: 'svc',
    audience: API,
    jti: 'j',
    reason: null,
    source: '127.0.0.1',
  });
  const silent = pino({ level: 'silent' });

  it('keeps events while the store fails, writes them once it answers, in batches', async () => {
    const written: AuditEvent[][] = [];
    let down = true;
    const store: AuditStore = {
      appendAuditEvents: async (events) => {
        if (down) throw new Error('store down');
        written.push([...events]);
      },
      queryAuditEvents: async () => [],
      pruneAuditEvents: async () => 0,
    };
    const recorder = new AuditRecorder(store, { retentionSeconds: 3600, logger: silent, batch: 2 });
    for (let i = 0; i < 5; i++) recorder.record(event(`2026-01-01T00:00:0${i}.000Z`));
    await recorder.flush();
    expect(written).toEqual([]);
    down = false;
    await recorder.flush();
    expect(written.map((b) => b.length)).toEqual([2, 2, 1]);
  });

  /**
   * A recorder of batches of 2 and at most 4 queued events over a store whose first write waits until the
   * test settles it (`finish(error)` fails it); every later write succeeds. `dropped` reads the drop counts
   * the recorder logged.
   */
  function heldFirstWrite() {
    const written: string[] = [];
    let settle: ((error?: Error) => void) | undefined;
    const store: AuditStore = {
      appendAuditEvents: async (events) => {
        if (!settle)
          await new Promise<void>((resolve, reject) => {
            settle = (error) => (error ? reject(error) : resolve());
          });
        written.push(...events.map((e) => e.at));
      },
      queryAuditEvents: async () => [],
      pruneAuditEvents: async () => 0,
    };
    const lines: string[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(line) });
    const recorder = new AuditRecorder(store, { retentionSeconds: 3600, logger, batch: 2, maxQueued: 4 });
    const dropped = () =>
      lines
        .map((l) => JSON.parse(l) as { msg: string; dropped?: number })
        .filter((l) => l.dropped !== undefined)
        .map((l) => [l.msg, l.dropped]);
    return { recorder, written, dropped, finish: (error?: Error) => settle!(error) };
  }

  it('events dropped while a batch is being written are counted, and written ones are not lost or repeated', async () => {
    const { recorder, written, dropped, finish } = heldFirstWrite();
    for (let i = 0; i < 4; i++) recorder.record(event(`t${i}`));
    const flushing = recorder.flush(); // the write of t0, t1 starts at once
    for (let i = 4; i < 7; i++) recorder.record(event(`t${i}`)); // pushes t0, t1 (being written) and t2 out
    finish();
    await flushing;
    expect(written).toEqual(['t0', 't1', 't3', 't4', 't5', 't6']);
    // Only t2 is lost: t0 and t1 were already on their way to the store.
    expect(dropped()).toEqual([['audit events were dropped while the store was down', 1]]);
  });

  it('events of a batch whose write fails, pushed out meanwhile, are counted as dropped', async () => {
    const { recorder, written, dropped, finish } = heldFirstWrite();
    for (let i = 0; i < 4; i++) recorder.record(event(`t${i}`));
    const flushing = recorder.flush(); // the write of t0, t1 starts, and will fail
    for (let i = 4; i < 7; i++) recorder.record(event(`t${i}`)); // pushes t0, t1 and t2 out
    finish(new Error('store down'));
    await flushing;
    await recorder.flush();
    expect(written).toEqual(['t3', 't4', 't5', 't6']);
    expect(dropped()).toEqual([['audit events were dropped while the store was down', 3]]);
  });

  it('cleans control characters (PostgreSQL refuses NUL) out of what it records', async () => {
    const written: AuditEvent[] = [];
    const store: AuditStore = {
      appendAuditEvents: async (events) => void written.push(...events),
      queryAuditEvents: async () => [],
      pruneAuditEvents: async () => 0,
    };
    const recorder = new AuditRecorder(store, { retentionSeconds: 3600, logger: silent });
    recorder.record({
      ...event('t'),
      clientId: 'a\u0000b',
      audience: 'https://x\u0000\n',
      reason: 'r\u001b[31m',
    });
    await recorder.flush();
    expect(written[0]).toMatchObject({
      clientId: 'a\uFFFDb',
      audience: 'https://x\uFFFD\uFFFD',
      reason: 'r\uFFFD[31m',
    });
  });

  it('prunes events older than the retention', async () => {
    const cutoffs: Date[] = [];
    const store: AuditStore = {
      appendAuditEvents: async () => undefined,
      queryAuditEvents: async () => [],
      pruneAuditEvents: async (before) => (cutoffs.push(before), 0),
    };
    const now = Date.parse('2026-06-01T00:00:00Z');
    const recorder = new AuditRecorder(store, { retentionSeconds: 86_400, logger: silent, now: () => now });
    await recorder.flush();
    expect(cutoffs).toEqual([new Date('2026-05-31T00:00:00Z')]);
  });

  it('bounds what it keeps while the store is down, dropping the oldest', async () => {
    const written: AuditEvent[] = [];
    let down = true;
    const store: AuditStore = {
      appendAuditEvents: async (events) => {
        if (down) throw new Error('down');
        written.push(...events);
      },
      queryAuditEvents: async () => [],
      pruneAuditEvents: async () => 0,
    };
    const recorder = new AuditRecorder(store, { retentionSeconds: 3600, logger: silent, maxQueued: 3 });
    for (let i = 0; i < 5; i++) recorder.record(event(`2026-01-01T00:00:0${i}.000Z`));
    down = false;
    await recorder.flush();
    expect(written.map((e) => e.at)).toEqual([
      '2026-01-01T00:00:02.000Z',
      '2026-01-01T00:00:03.000Z',
      '2026-01-01T00:00:04.000Z',
    ]);
  });
});
