import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tessera, tesseraOk } from './helpers/process.js';
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
    const events = await t.server.runtime.store.queryAuditEvents({
      limit: 100,
      types: ['token.issued', 'token.refused', 'token.throttled'],
    });
    // Besides them: the first key of each algorithm, made by the server at its start, is a change too.
    const keys = await t.server.runtime.store.queryAuditEvents({ limit: 100, types: ['key.rotated'] });
    expect(keys.map((e) => [e.actor, e.changes?.alg]).sort()).toEqual(
      ['ES256', 'EdDSA', 'PS256', 'RS256'].map((alg) => ['tessera', alg]),
    );
    expect(events.map((e) => [e.type, e.clientId, e.audience, e.reason, e.count])).toEqual([
      ['token.refused', '(not a client id)', API, 'invalid_client: unknown client', null],
      ['token.refused', 'nobody-here', API, 'invalid_client: unknown client', null],
      [
        'token.refused',
        client.id,
        OTHER,
        'invalid_target: the requested audience is not granted to this client',
        null,
      ],
      ['token.refused', client.id, API, 'invalid_client: wrong secret', null],
      ['token.issued', client.id, API, null, null],
      ['token.issued', client.id, API, null, null],
    ]);
    for (const e of events) {
      expect(e.source).toBe('198.51.100.4');
      expect(Date.parse(e.at)).toBeGreaterThan(Date.now() - 60_000);
      expect(e.at).toBe(new Date(Date.parse(e.at)).toISOString());
    }
    const issued = events.filter((e) => e.type === 'token.issued');
    for (const e of issued) expect(e.jti).toMatch(/^[A-Za-z0-9_-]{22}$/);
    const text = JSON.stringify(events);
    expect(text).not.toContain(client.secret);
    for (const token of tokens) expect(text).not.toContain(token.split('.')[2]);
  });

  it('logs each event as JSON, without secrets or tokens', () => {
    const audit = logLines
      .map((l) => JSON.parse(l) as { msg: string; audit?: Record<string, unknown> })
      .filter((l) => l.audit);
    expect(audit.map((l) => l.msg)).toEqual([
      'token issued',
      'token issued',
      'token refused',
      'token refused',
      'token refused',
      'token refused',
    ]);
    expect(audit[0]!.audit).toEqual({
      at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      type: 'token.issued',
      clientId: client.id,
      audience: API,
      jti: expect.stringMatching(/^[A-Za-z0-9_-]{22}$/),
      reason: null,
      source: '198.51.100.4',
    });
    const all = logLines.join('\n');
    expect(all).not.toContain(client.secret);
    for (const token of tokens) expect(all).not.toContain(token);
  });

  it('tessera audit filters by client, audience, type, outcome and time, with --json', async () => {
    const env = { ...process.env, TESSERA_DATA_DIR: t.dataDir, TESSERA_MASTER_KEY: t.config.masterKey };
    const refused = await tesseraOk(env, 'audit', '--client', client.id, '--outcome', 'refused', '--json');
    expect(refused.json.map((e: { reason: string }) => e.reason)).toEqual([
      'invalid_target: the requested audience is not granted to this client',
      'invalid_client: wrong secret',
    ]);
    const issued = await tesseraOk(env, 'audit', '--type', 'token.issued', '--json');
    expect(issued.json.map((e: { type: string }) => e.type)).toEqual(['token.issued', 'token.issued']);
    const both = await tesseraOk(env, 'audit', '--type', 'token.issued', '--type', 'token.refused', '--json');
    expect(both.json).toHaveLength(6);
    const contradicting = await tesseraOk(
      env,
      'audit',
      '--type',
      'token.issued',
      '--outcome',
      'refused',
      '--json',
    );
    expect(contradicting.json).toEqual([]);
    const other = await tesseraOk(env, 'audit', '--audience', OTHER, '--since', '1h', '--json');
    expect(other.json).toHaveLength(1);
    expect(other.json[0]).toEqual({
      id: expect.any(Number),
      time: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      type: 'token.refused',
      client_id: client.id,
      audience: OTHER,
      jti: null,
      source: '198.51.100.4',
      reason: 'invalid_target: the requested audience is not granted to this client',
      count: null,
      actor: null,
      target: null,
      changes: null,
    });
    const none = await tesseraOk(env, 'audit', '--until', '2000-01-01T00:00:00Z', '--json');
    expect(none.json).toEqual([]);
    const limited = await tesseraOk(env, 'audit', '--limit', '1');
    expect(limited.stdout.split('\n')[0]).toMatch(
      /^TIME +TYPE +CLIENT_ID +AUDIENCE +JTI +REASON +SOURCE +COUNT +ACTOR +CHANGES$/,
    );
    expect(limited.stdout.trim().split('\n')).toHaveLength(2);
  });

  it('tessera audit --format ndjson streams every event, one JSON document a line, newest first', async () => {
    const env = { ...process.env, TESSERA_DATA_DIR: t.dataDir, TESSERA_MASTER_KEY: t.config.masterKey };
    const json = await tesseraOk(env, 'audit', '--json');
    const ndjson = await tesseraOk(env, 'audit', '--format', 'ndjson');
    expect(ndjson.stdout.endsWith('\n')).toBe(true);
    expect(
      ndjson.stdout
        .trimEnd()
        .split('\n')
        .map((line) => JSON.parse(line) as unknown),
    ).toEqual(json.json);
    const limited = await tesseraOk(env, 'audit', '--format', 'ndjson', '--limit', '2');
    expect(
      limited.stdout
        .trimEnd()
        .split('\n')
        .map((line) => JSON.parse(line) as unknown),
    ).toEqual(json.json.slice(0, 2));
    const none = await tesseraOk(env, 'audit', '--format', 'ndjson', '--until', '2000-01-01T00:00:00Z');
    expect(none.stdout).toBe('');
  });

  it('tessera audit caps a table or a JSON document at 100 000 events, and points at ndjson', async () => {
    const env = { ...process.env, TESSERA_DATA_DIR: t.dataDir, TESSERA_MASTER_KEY: t.config.masterKey };
    const result = await tessera(env, 'audit', '--limit', '100001', '--json');
    expect(result.code).toBe(2);
    expect(JSON.parse(result.stderr)).toEqual({
      error: 'invalid_field',
      message:
        'limit is at most 100000 in one answer; an export (tessera audit --format ndjson) streams any number',
    });
    expect(result.stdout).toBe('');
  });
});

describe('changes in the audit trail', () => {
  it('every change made with the CLI is an event: its actor, its target, the fields that changed, never a secret', async () => {
    const { userInfo } = await import('node:os');
    const { tempDir } = await import('./helpers/server.js');
    const { tesseraEnv } = await import('./helpers/process.js');
    const env = tesseraEnv({ TESSERA_DATA_DIR: tempDir() });
    const actor = `cli:${userInfo().username}`;
    await tesseraOk(env, 'audience', 'add', API, '--name', 'Orders', '--ttl', '600');
    const created = (
      await tesseraOk(
        env,
        'client',
        'create',
        '--name',
        'svc',
        '--id',
        'svc-1',
        '--grant',
        API,
        '--quota-minute',
        '10',
        '--json',
      )
    ).json as { client_secret: string };
    await tesseraOk(env, 'client', 'set-quota', 'svc-1', '--per-minute', 'none', '--per-day', '500');
    await tesseraOk(env, 'client', 'disable', 'svc-1');
    const rotated = (await tesseraOk(env, 'client', 'rotate-secret', 'svc-1', '--json')).json as {
      client_secret: string;
    };
    await tesseraOk(env, 'audience', 'add', OTHER);
    await tesseraOk(env, 'grant', 'add', 'svc-1', OTHER);
    await tesseraOk(env, 'grant', 'add', 'svc-1', OTHER); // already granted: no change, no event
    await tesseraOk(env, 'grant', 'remove', 'svc-1', OTHER);
    await tesseraOk(env, 'keys', 'rotate', '--alg', 'ES256');
    await tesseraOk(env, 'client', 'delete', 'svc-1');
    await tesseraOk(env, 'audience', 'remove', OTHER);
    // A change the store refuses is no event.
    expect((await tessera(env, 'client', 'disable', 'svc-1')).code).toBe(1);

    const result = await tesseraOk(env, 'audit', '--json');
    const events = (result.json as Record<string, unknown>[]).reverse();
    const kid = events.find((e) => e.type === 'key.rotated')!.target;
    // An audience's events name it by its id; the audience field has its URL.
    const [apiId, otherId] = (['audience.created', 'audience.created'] as const).map(
      (type, i) => events.filter((e) => e.type === type)[i]!.target,
    );
    expect(apiId).toMatch(/^aud_/);
    expect(events.map(({ id: _id, time: _time, ...e }) => e)).toEqual(
      [
        [
          'audience.created',
          apiId,
          null,
          API,
          { name: 'Orders', token_ttl: 600, signing_alg: null, scopes: [] },
        ],
        [
          'client.created',
          'svc-1',
          'svc-1',
          null,
          {
            name: 'svc',
            description: null,
            enabled: true,
            token_ttl: null,
            quota_per_minute: 10,
            quota_per_day: null,
            claims: null,
            token_endpoint_auth_method: 'client_secret_basic',
            jwks: null,
            jwks_uri: null,
            dpop_bound_access_tokens: false,
            tls_client_certificate_bound_access_tokens: false,
            grants: [{ audience: API, scopes: [] }],
          },
        ],
        [
          'client.updated',
          'svc-1',
          'svc-1',
          null,
          { quota_per_minute: { from: 10, to: null }, quota_per_day: { from: null, to: 500 } },
        ],
        [
          'client.updated',
          'svc-1',
          'svc-1',
          null,
          // Disabling revokes the tokens it has: its revoked_before is the moment it was disabled.
          {
            enabled: { from: true, to: false },
            revoked_before: { from: null, to: expect.stringMatching(/^\d{4}-.*Z$/) as unknown },
          },
        ],
        [
          'client.secret_rotated',
          'svc-1',
          'svc-1',
          null,
          // The new secret's id, never the secret; no grace: the others stopped at once.
          {
            secret_id: expect.stringMatching(/^sec_/) as unknown,
            grace: 0,
          },
        ],
        [
          'audience.created',
          otherId,
          null,
          OTHER,
          { name: null, token_ttl: null, signing_alg: null, scopes: [] },
        ],
        ['grant.created', 'svc-1', 'svc-1', OTHER, null],
        ['grant.deleted', 'svc-1', 'svc-1', OTHER, null],
        [
          'key.rotated',
          kid,
          null,
          null,
          { alg: 'ES256', activates_at: expect.any(String) as unknown, retiring: [] },
        ],
        ['client.deleted', 'svc-1', 'svc-1', null, null],
        ['audience.deleted', otherId, null, OTHER, null],
      ].map(([type, target, clientId, audience, changes]) => ({
        type,
        actor,
        target,
        client_id: clientId,
        audience,
        changes,
        jti: null,
        source: null,
        reason: null,
        count: null,
      })),
    );
    expect(result.stdout).not.toContain(created.client_secret);
    expect(result.stdout).not.toContain(rotated.client_secret);
    // `apply` goes through the same operations: its changes are audited the same way, in its transaction.
    const { writeFileSync } = await import('node:fs');
    const { join } = await import('node:path');
    const file = join(tempDir(), 'tessera.yaml');
    writeFileSync(
      file,
      `audiences:\n  - identifier: ${API}\n    name: Orders v2\n    token_ttl: 600\nclients: []\n`,
    );
    await tesseraOk(env, 'apply', '-f', file);
    const applied = await tesseraOk(env, 'audit', '--type', 'audience.updated', '--json');
    expect(applied.json).toEqual([
      expect.objectContaining({
        type: 'audience.updated',
        actor,
        target: apiId,
        audience: API,
        changes: { name: { from: 'Orders', to: 'Orders v2' } },
      }),
    ]);
    const only = await tesseraOk(env, 'audit', '--type', 'client.updated', '--json');
    expect((only.json as { type: string }[]).map((e) => e.type)).toEqual([
      'client.updated',
      'client.updated',
    ]);
  });
});
