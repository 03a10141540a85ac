import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from './helpers/process.js';
import { freePort } from './helpers/server.js';
import { pollUntil, waitFor } from './helpers/wait.js';

// The bench's audited ceiling (bench/servers/ceiling.js with BENCH_AUDIT_DIR, the scenario ceiling-audited): every
// answer's event on its spool file before the answer, and in its SQLite store within a flush, counted per minute.

const AUDIENCE = 'https://api.example.com';
const CLIENT = 'bench-client';
const SECRET = 'bench-secret';

describe('bench: the audited ceiling keeps the audit trail it is measured with', () => {
  let dir: string;
  let url: string;
  let server: ChildProcess;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'tessera-audited-ceiling-'));
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    server = spawn(
      process.execPath,
      ['--disable-warning=ExperimentalWarning', path.join(ROOT, 'bench/servers/ceiling.js')],
      {
        env: {
          ...process.env,
          BENCH_AUDIT_DIR: dir,
          BENCH_PORT: String(port),
          BENCH_ISSUER: url,
          BENCH_AUDIENCE: AUDIENCE,
          BENCH_CLIENT_ID: CLIENT,
          BENCH_CLIENT_SECRET: SECRET,
        },
        stdio: 'ignore',
      },
    );
    await waitFor(
      async () => (await fetch(`${url}/.well-known/jwks.json`).catch(() => undefined))?.ok === true,
      10_000,
    );
  });

  afterAll(() => {
    server?.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  const token = (secret: string) =>
    fetch(`${url}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'client_credentials',
        client_id: CLIENT,
        client_secret: secret,
        audience: AUDIENCE,
      }),
    });

  it('spools each event before its answer and stores it, with the minute counts', async () => {
    const first = await token(SECRET);
    expect(first.status).toBe(200);
    const { jti: firstJti } = decodeJwt(((await first.json()) as { access_token: string }).access_token);
    const spooled = () => readFileSync(path.join(dir, 'audit.spool'), 'utf8').split('\n').filter(Boolean);
    // On the spool once answered.
    expect(spooled().map((line) => (JSON.parse(line) as unknown[]).slice(1))).toEqual([
      ['token.issued', CLIENT, AUDIENCE, firstJti, null, '127.0.0.1', null],
    ]);

    const refused = await token('wrong');
    expect(refused.status).toBe(401);
    expect(await refused.json()).toEqual({
      error: 'invalid_client',
      error_description: 'client authentication failed',
    });
    const second = await token(SECRET);
    const { jti: secondJti } = decodeJwt(((await second.json()) as { access_token: string }).access_token);
    expect(spooled()).toHaveLength(3);

    // The worker thread makes its file and tables as the server starts: not necessarily before these answers.
    const file = path.join(dir, 'audit.db');
    await waitFor(() => existsSync(file), 5000);
    const db = new DatabaseSync(file, { readOnly: true });
    try {
      const rows = () => {
        try {
          return db
            .prepare(
              'select type, client_id, audience, jti, reason, source, count from audit_events order by id',
            )
            .all();
        } catch {
          return []; // no table yet
        }
      };
      // The store takes them at its next flush (once a second).
      const { value } = await pollUntil(rows, (r) => r.length === 3, 5000);
      expect(value.map((r) => ({ ...r }))).toEqual([
        {
          type: 'token.issued',
          client_id: CLIENT,
          audience: AUDIENCE,
          jti: firstJti,
          reason: null,
          source: '127.0.0.1',
          count: null,
        },
        {
          type: 'token.refused',
          client_id: CLIENT,
          audience: AUDIENCE,
          jti: null,
          reason: 'invalid_client: client authentication failed',
          source: '127.0.0.1',
          count: null,
        },
        {
          type: 'token.issued',
          client_id: CLIENT,
          audience: AUDIENCE,
          jti: secondJti,
          reason: null,
          source: '127.0.0.1',
          count: null,
        },
      ]);
      const counts = db.prepare('select sum(issued) issued, sum(refused) refused from token_counts').get();
      expect({ ...counts }).toEqual({ issued: 2, refused: 1 });
    } finally {
      db.close();
    }
  });
});
