/**
 * Black-box tests of `tessera operator ...` (MANAGEMENT.md, "Operators") and `tessera client list --search`: every
 * command runs as a real process on a real data directory. What the CLI wrote is checked through the store and
 * the management layer (an enrollment link works, or no longer does). The CLI loads dist/, so `npm run build`
 * must have run (`npm test` does).
 */
import { EVERY_SCOPE } from '../src/management/context.js';
import { userInfo } from 'node:os';
import path from 'node:path';
import { beforeAll, expect, it } from 'vitest';
import { loadConfig } from '../src/config/index.js';
import { ManagementError, operators, views, type ManagementContext } from '../src/management/index.js';
import { openSqliteStore } from '../src/store/sqlite.js';
import { SEARCHED_CLIENTS } from './helpers/expected.js';
import { rejection } from './helpers/assert.js';
import { expectFieldRefusals, expectTable, group, jsonError, type Workspace } from './helpers/cli.js';
import { tessera, type CliResult } from './helpers/process.js';

// --- helpers ---

const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const anyTime = () => expect.stringMatching(ISO_TIME);
const OP_ID = /^op_[A-Za-z0-9_-]{16}$/;
const DAY = 24 * 3600_000;
/** Every audit event of the CLI names the OS user who ran it. */
const ACTOR = `cli:${userInfo().username}`;

/** What `operator add` and `operator reset` print in text mode: the first line, then the link; its parts. */
function parseLink(
  text: string,
  first: string,
  issuer = 'http://localhost:8080',
): { url: string; token: string; until: string } {
  const escaped = (s: string) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  const m = new RegExp(
    `^${escaped(first)}\\n` +
      `Enrollment link \\(valid until (\\S+), works once; the operator sets a password there\\):\\n` +
      ` {2}(${escaped(issuer)}/console/enroll#token=([A-Za-z0-9_-]{43}))\\n$`,
  ).exec(text);
  expect(m, `link output:\n${text}`).not.toBeNull();
  expect(m![1]).toMatch(ISO_TIME);
  return { until: m![1]!, url: m![2]!, token: m![3]! };
}

const tokenOf = (url: string): string => {
  const m = /^http:\/\/localhost:8080\/console\/enroll#token=([A-Za-z0-9_-]{43})$/.exec(url);
  expect(m, url).not.toBeNull();
  return m![1]!;
};

/** An operator as `--json` shows it. */
type OperatorJson = ReturnType<typeof views.operatorJson>;

/** Runs `fn` with a management context on the workspace's store (as another face would), then closes it. */
async function withStore<T>(ws: Workspace, fn: (ctx: ManagementContext) => Promise<T>): Promise<T> {
  const store = openSqliteStore(path.join(ws.dir, 'tessera.db'));
  try {
    return await fn({
      store,
      actor: 'test',
      holds: EVERY_SCOPE,
      config: loadConfig({ TESSERA_DATA_DIR: ws.dir, TESSERA_MASTER_KEY: ws.env.TESSERA_MASTER_KEY! }),
    });
  } finally {
    await store.close();
  }
}

/** The operator an enrollment link is for, or the code of the management error that refuses it. */
async function lookup(ws: Workspace, token: string): Promise<OperatorJson | string> {
  return withStore(ws, async (ctx) => {
    try {
      return views.operatorJson(await operators.lookupEnrollment(ctx, token));
    } catch (error) {
      if (error instanceof ManagementError) return error.code;
      throw error;
    }
  });
}

/** Opens a console session for an operator straight in the store; whether it is still there is `hasSession`. */
async function openSession(ws: Workspace, operator: { id: string }, id: string): Promise<void> {
  const now = Date.now();
  await withStore(ws, (ctx) =>
    ctx.store.createOperatorSession({
      id,
      operatorId: operator.id,
      createdAt: now,
      lastSeenAt: now,
      expiresAt: now + 3600_000,
      source: null,
    }),
  );
}
const hasSession = (ws: Workspace, id: string): Promise<boolean> =>
  withStore(ws, async (ctx) => (await ctx.store.findOperatorSession(id)) !== undefined);

/** Runs a command that must succeed, bracketed by the wall clock (for the times it prints). */
async function timed(
  ws: Workspace,
  ...args: string[]
): Promise<{ r: CliResult; before: number; after: number }> {
  const before = Date.now();
  const r = await ws.ok(...args);
  return { r, before, after: Date.now() };
}

/** A link valid 24 h from when the command ran. */
function expectDayLong(until: string, before: number, after: number): void {
  expect(Date.parse(until)).toBeGreaterThanOrEqual(before + DAY);
  expect(Date.parse(until)).toBeLessThanOrEqual(after + DAY);
}

const LIST_HEADER = ['EMAIL', 'ROLE', 'ENABLED', 'ENROLLED', 'LAST_LOGIN_AT', 'CREATED_AT'];

// --- the commands ---

group('tessera operator', (ws) => {
  beforeAll(async () => {
    await ws.ok('migrate');
  });

  let ops: OperatorJson;
  let viewer: OperatorJson;
  /** The first links of ops and viewer, and the viewer's after its reset. */
  let opsLink: string;
  let viewerLink: string;
  let viewerLink2: string;

  it('add --role admin prints the operator and a one-time link, valid 24 h, that works for that operator', async () => {
    const { r, before, after } = await timed(ws, 'operator', 'add', 'ops@example.com', '--role', 'admin');
    const link = parseLink(r.stdout, 'Operator ops@example.com added (admin).');
    expectDayLong(link.until, before, after);
    opsLink = link.token;
    const found = await lookup(ws, link.token);
    expect(found).toEqual({
      id: expect.stringMatching(OP_ID),
      email: 'ops@example.com',
      role: 'admin',
      enabled: true,
      enrolled: false,
      enrollment_expires_at: link.until,
      last_login_at: null,
      created_at: anyTime(),
      updated_at: anyTime(),
    });
    ops = found as OperatorJson;
    expect(ops.updated_at).toBe(ops.created_at);
    expect(Date.parse(ops.created_at)).toBeGreaterThanOrEqual(before);
    expect(Date.parse(ops.created_at)).toBeLessThanOrEqual(after);
  });

  it('add --json: the email trimmed and in lower case, viewer by default, the link as enrollment_url', async () => {
    const { r, before, after } = await timed(ws, 'operator', 'add', '  Viewer@Example.COM ', '--json');
    viewer = {
      id: expect.stringMatching(OP_ID),
      email: 'viewer@example.com',
      role: 'viewer',
      enabled: true,
      enrolled: false,
      enrollment_expires_at: anyTime(),
      last_login_at: null,
      created_at: anyTime(),
      updated_at: anyTime(),
    } as unknown as OperatorJson;
    expect(r.json).toEqual({
      ...viewer,
      enrollment_url: expect.stringMatching(
        /^http:\/\/localhost:8080\/console\/enroll#token=[A-Za-z0-9_-]{43}$/,
      ),
    });
    const { enrollment_url: url, ...operator } = r.json as OperatorJson & { enrollment_url: string };
    viewer = operator;
    expectDayLong(viewer.enrollment_expires_at!, before, after);
    expect(viewer.id).not.toBe(ops.id);
    viewerLink = tokenOf(url);
    expect(viewerLink).not.toBe(opsLink);
    expect(await lookup(ws, viewerLink)).toEqual(viewer);
  });

  it('add: the link is under the issuer (TESSERA_ISSUER)', async () => {
    const r = await tessera(
      { ...ws.env, TESSERA_ISSUER: 'https://auth.example.com' },
      'operator',
      'add',
      'issuer@example.com',
    );
    expect(r).toMatchObject({ code: 0, stderr: '' });
    const link = parseLink(
      r.stdout,
      'Operator issuer@example.com added (viewer).',
      'https://auth.example.com',
    );
    expect(await lookup(ws, link.token)).toMatchObject({ email: 'issuer@example.com', role: 'viewer' });
    expect((await ws.ok('operator', 'remove', 'issuer@example.com')).stdout).toBe(
      'Operator issuer@example.com removed.\n',
    );
  });

  it('list --json: by email, every field, never a password hash or a link; list: a table', async () => {
    const json = await ws.ok('operator', 'list', '--json');
    expect(json.json).toEqual([ops, viewer]);
    expect(json.stdout).not.toContain(opsLink);
    expect(json.stdout).not.toContain(viewerLink);
    expectTable((await ws.ok('operator', 'list')).stdout, LIST_HEADER, [
      ['ops@example.com', 'admin', 'yes', `link until ${ops.enrollment_expires_at}`, '-', ops.created_at],
      [
        'viewer@example.com',
        'viewer',
        'yes',
        `link until ${viewer.enrollment_expires_at}`,
        '-',
        viewer.created_at,
      ],
    ]);
    // The alias.
    expect((await ws.ok('operators', 'list', '--json')).json).toEqual([ops, viewer]);
  });

  it('an email that is taken, in any case: exit 1, operator_exists; nothing added', async () => {
    const [json, text] = await Promise.all([
      ws.run('operator', 'add', 'OPS@example.com', '--role', 'viewer', '--json'),
      ws.run('operator', 'add', 'ops@example.com'),
    ]);
    expect(json.code).toBe(1);
    expect(jsonError(json)).toEqual({
      error: 'operator_exists',
      message: 'operator ops@example.com already exists',
    });
    expect(text).toMatchObject({
      code: 1,
      stdout: '',
      stderr: 'tessera: operator ops@example.com already exists\n',
    });
    expect((await ws.ok('operator', 'list', '--json')).json).toEqual([ops, viewer]);
    // The first link still works: a refused add changes nothing.
    expect(await lookup(ws, opsLink)).toEqual(ops);
  });

  it('a role that is not admin or viewer: exit 2 (usage for --role, invalid_field for set-role); nothing written', async () => {
    const [json, text, setRole, setRoleText] = await Promise.all([
      ws.run('operator', 'add', 'new@example.com', '--role', 'root', '--json'),
      ws.run('operator', 'add', 'new@example.com', '--role', 'Admin'),
      ws.run('operator', 'set-role', 'ops@example.com', 'root', '--json'),
      ws.run('operator', 'set-role', 'ops@example.com', 'superuser'),
    ]);
    expect(json.code).toBe(2);
    expect(jsonError(json)).toEqual({
      error: 'usage',
      message: "option '--role <role>' argument 'root' is invalid. Allowed choices are admin, viewer.",
    });
    expect(text).toMatchObject({ code: 2, stdout: '' });
    expect(text.stderr).toMatch(
      /^error: option '--role <role>' argument 'Admin' is invalid\. Allowed choices are admin, viewer\.\n/,
    );
    expect(text.stderr).toContain('Usage: tessera operator add [options] <email>');
    expect(setRole.code).toBe(2);
    expect(jsonError(setRole)).toEqual({
      error: 'invalid_field',
      message: 'role must be one of admin, viewer',
    });
    expect(setRoleText).toMatchObject({
      code: 2,
      stdout: '',
      stderr: 'tessera: role must be one of admin, viewer\n',
    });
    expect((await ws.ok('operator', 'list', '--json')).json).toEqual([ops, viewer]);
  });

  it('an email that is not an address: exit 2, invalid_field; nothing added', async () => {
    const address = 'email must be an address such as ops@example.com';
    const cases: [string, string][] = [
      ['ops', address],
      ['ops@', address],
      ['@example.com', address],
      ['a b@example.com', address],
      ['a@b@example.com', address],
      ['ops@exa\tmple.com', address],
      [`${'a'.repeat(243)}@example.com`, 'email is longer than 254 characters'],
    ];
    await expectFieldRefusals(ws, (email) => ['operator', 'add', email], cases);
    expect(await ws.run('operator', 'add', 'not-an-address')).toMatchObject({
      code: 2,
      stdout: '',
      stderr: `tessera: ${address}\n`,
    });
    // 254 characters is still an address.
    const longest = `${'a'.repeat(242)}@example.com`;
    expect(longest).toHaveLength(254);
    expect((await ws.ok('operator', 'add', longest, '--json')).json.email).toBe(longest);
    await ws.ok('operator', 'remove', longest);
    expect((await ws.ok('operator', 'list', '--json')).json).toEqual([ops, viewer]);
  });

  it('an unknown operator: exit 1, operator_not_found, for every command that names one', async () => {
    const commands = [
      ['disable', 'nobody@example.com'],
      ['enable', 'nobody@example.com'],
      ['set-role', 'nobody@example.com', 'admin'],
      ['reset', 'nobody@example.com'],
      ['remove', 'nobody@example.com'],
    ];
    const results = await Promise.all(commands.map((args) => ws.run('operator', ...args, '--json')));
    results.forEach((r, i) => {
      expect(r.code, commands[i]![0]).toBe(1);
      expect(jsonError(r)).toEqual({
        error: 'operator_not_found',
        message: 'operator nobody@example.com does not exist',
      });
    });
    expect(await ws.run('operator', 'disable', 'nobody@example.com')).toMatchObject({
      code: 1,
      stdout: '',
      stderr: 'tessera: operator nobody@example.com does not exist\n',
    });
  });

  it('disable ends the operator’s sessions and stops the link; again: no change; enable: back, the link with it', async () => {
    await openSession(ws, ops, 'session-ops-1');
    await openSession(ws, viewer, 'session-viewer-1');
    const { r, before } = await timed(ws, 'operator', 'disable', 'ops@example.com');
    expect(r.stdout).toBe('Operator ops@example.com disabled.\n');
    expect(await hasSession(ws, 'session-ops-1')).toBe(false);
    expect(await hasSession(ws, 'session-viewer-1')).toBe(true);
    // A disabled operator's link does not work, and says so as an expired one does.
    expect(await lookup(ws, opsLink)).toBe('enrollment_invalid');

    const [listed] = (await ws.ok('operator', 'list', '--json')).json as OperatorJson[];
    // The session stamped the last login; disabling stamped updated_at.
    expect(listed).toEqual({ ...ops, enabled: false, last_login_at: anyTime(), updated_at: anyTime() });
    expect(Date.parse(listed!.updated_at)).toBeGreaterThanOrEqual(before);
    ops = listed!;

    // Disabled again: nothing to change, nothing written (updated_at stays).
    expect((await ws.ok('operator', 'disable', 'ops@example.com', '--json')).json).toEqual(ops);

    const enabled = await ws.ok('operator', 'enable', 'Ops@Example.com', '--json');
    expect(enabled.json).toEqual({ ...ops, enabled: true, updated_at: anyTime() });
    expect(Date.parse(enabled.json.updated_at)).toBeGreaterThanOrEqual(Date.parse(ops.updated_at));
    ops = enabled.json;
    expect(await lookup(ws, opsLink)).toEqual(ops);
    expect((await ws.ok('operator', 'enable', 'ops@example.com')).stdout).toBe(
      'Operator ops@example.com enabled.\n',
    );
    expect((await ws.ok('operator', 'list', '--json')).json).toEqual([
      ops,
      { ...viewer, last_login_at: anyTime() },
    ]);
  });

  it('set-role: text and --json; the same role again changes nothing', async () => {
    expect((await ws.ok('operator', 'set-role', 'ops@example.com', 'viewer')).stdout).toBe(
      'Operator ops@example.com is viewer now.\n',
    );
    const back = await ws.ok('operator', 'set-role', 'ops@example.com', 'admin', '--json');
    expect(back.json).toEqual({ ...ops, updated_at: anyTime() });
    ops = back.json;
    expect((await ws.ok('operator', 'set-role', 'ops@example.com', 'admin', '--json')).json).toEqual(ops);
    expect((await ws.ok('operator', 'set-role', 'ops@example.com', 'admin')).stdout).toBe(
      'Operator ops@example.com is admin now.\n',
    );
  });

  it('reset: a new link; the previous one stops working; the password is cleared and the sessions end', async () => {
    // The operator enrolls with the first link (as the console does) and logs in.
    const password = 'correct horse battery staple';
    await withStore(ws, (ctx) => operators.enroll(ctx, opsLink, password));
    const hashBefore = await withStore(
      ws,
      async (ctx) => (await ctx.store.findOperatorCredentials('ops@example.com'))!.passwordHash,
    );
    expect(hashBefore).toMatch(/^scrypt\$\d+\$\d+\$\d+\$[A-Za-z0-9_-]+\$[A-Za-z0-9_-]+$/);
    expect(await lookup(ws, opsLink)).toBe('enrollment_invalid'); // used once: no more
    await openSession(ws, ops, 'session-ops-2');

    // Enrolled: list says so, and never shows the hash or anything of the password.
    const enrolled = await ws.ok('operator', 'list', '--json');
    const [listed] = enrolled.json as OperatorJson[];
    expect(listed).toEqual({
      ...ops,
      enrolled: true,
      enrollment_expires_at: null,
      last_login_at: anyTime(),
      updated_at: anyTime(),
    });
    ops = listed!;
    for (const secret of [hashBefore!, password, opsLink, viewerLink, 'scrypt', 'hash', 'password', 'digest'])
      expect(enrolled.stdout).not.toContain(secret);
    expectTable((await ws.ok('operator', 'list')).stdout, LIST_HEADER, [
      ['ops@example.com', 'admin', 'yes', 'yes', ops.last_login_at, ops.created_at],
      [
        'viewer@example.com',
        'viewer',
        'yes',
        `link until ${viewer.enrollment_expires_at}`,
        expect.stringMatching(ISO_TIME),
        viewer.created_at,
      ],
    ]);

    const { r, before, after } = await timed(ws, 'operator', 'reset', 'ops@example.com');
    const link = parseLink(r.stdout, 'Operator ops@example.com: password cleared, sessions ended.');
    expectDayLong(link.until, before, after);
    expect(await hasSession(ws, 'session-ops-2')).toBe(false);
    expect(await hasSession(ws, 'session-viewer-1')).toBe(true);
    expect(
      await withStore(
        ws,
        async (ctx) => (await ctx.store.findOperatorCredentials('ops@example.com'))!.passwordHash,
      ),
    ).toBeNull();
    const reset = await lookup(ws, link.token);
    expect(reset).toEqual({
      ...ops,
      enrolled: false,
      enrollment_expires_at: link.until,
      updated_at: anyTime(),
    });
    ops = reset as OperatorJson;

    // A link never used stops working at a reset too; --json gives the new one.
    const viewerReset = await ws.ok('operator', 'reset', 'viewer@example.com', '--json');
    const { enrollment_url: url, ...operator } = viewerReset.json as OperatorJson & {
      enrollment_url: string;
    };
    expect(operator).toEqual({
      ...viewer,
      last_login_at: anyTime(),
      enrollment_expires_at: anyTime(),
      updated_at: anyTime(),
    });
    expect(await lookup(ws, viewerLink)).toBe('enrollment_invalid');
    viewerLink2 = tokenOf(url);
    expect(await lookup(ws, viewerLink2)).toEqual(operator);
    expect(await hasSession(ws, 'session-viewer-1')).toBe(false);
    viewer = operator;
    // And the old links cannot set a password.
    const refused = await withStore(ws, (ctx) =>
      rejection(operators.enroll(ctx, viewerLink, 'another long password'), ManagementError),
    );
    expect(refused.code).toBe('enrollment_invalid');
    expect((await ws.ok('operator', 'list', '--json')).json).toEqual([ops, viewer]);
  });

  it('remove: text and --json; the sessions go with the operator, the email is free again', async () => {
    await openSession(ws, viewer, 'session-viewer-2');
    expect((await ws.ok('operator', 'remove', 'viewer@example.com')).stdout).toBe(
      'Operator viewer@example.com removed.\n',
    );
    expect(await hasSession(ws, 'session-viewer-2')).toBe(false);
    expect(await lookup(ws, viewerLink2)).toBe('enrollment_invalid');
    expect((await ws.ok('operator', 'remove', 'OPS@example.com', '--json')).json).toEqual({
      email: 'ops@example.com',
      removed: true,
    });
    expect((await ws.ok('operator', 'list', '--json')).json).toEqual([]);
    expect((await ws.ok('operator', 'list')).stdout).toBe(
      'EMAIL  ROLE  ENABLED  ENROLLED  LAST_LOGIN_AT  CREATED_AT\n',
    );
    const again = await ws.ok('operator', 'add', 'ops@example.com', '--json');
    expect(again.json.id).not.toBe(ops.id);
    await ws.ok('operator', 'remove', 'ops@example.com');
  });

  it('every change is audited as cli:<user>, with the fields that changed and nothing secret', async () => {
    const created = await ws.ok('audit', '--type', 'operator.created', '--json');
    const event = (type: string, target: string, changes: unknown, actor = ACTOR) => ({
      id: expect.any(Number),
      time: anyTime(),
      type,
      client_id: null,
      audience: null,
      jti: null,
      source: null,
      reason: null,
      count: null,
      actor,
      target,
      changes,
    });
    const longest = `${'a'.repeat(242)}@example.com`;
    expect(created.json).toEqual([
      event('operator.created', expect.stringMatching(OP_ID), { email: 'ops@example.com', role: 'viewer' }),
      event('operator.created', expect.stringMatching(OP_ID), { email: longest, role: 'viewer' }),
      event('operator.created', expect.stringMatching(OP_ID), {
        email: 'issuer@example.com',
        role: 'viewer',
      }),
      event('operator.created', viewer.id, { email: 'viewer@example.com', role: 'viewer' }),
      event('operator.created', ops.id, { email: 'ops@example.com', role: 'admin' }),
    ]);
    const types = [
      'operator.created',
      'operator.updated',
      'operator.reset',
      'operator.enrolled',
      'operator.deleted',
    ].flatMap((t) => ['--type', t]);
    const all = (await ws.ok('audit', ...types, '--json')).json as ReturnType<typeof event>[];
    const mine = all.filter((e) => e.target === ops.id || e.target === viewer.id).reverse();
    expect(mine).toEqual([
      event('operator.created', ops.id, { email: 'ops@example.com', role: 'admin' }),
      event('operator.created', viewer.id, { email: 'viewer@example.com', role: 'viewer' }),
      event('operator.updated', ops.id, { enabled: { from: true, to: false } }),
      event('operator.updated', ops.id, { enabled: { from: false, to: true } }),
      event('operator.updated', ops.id, { role: { from: 'admin', to: 'viewer' } }),
      event('operator.updated', ops.id, { role: { from: 'viewer', to: 'admin' } }),
      event('operator.enrolled', ops.id, null, 'operator:ops@example.com'),
      event('operator.reset', ops.id, { email: 'ops@example.com' }),
      event('operator.reset', viewer.id, { email: 'viewer@example.com' }),
      event('operator.deleted', viewer.id, { email: 'viewer@example.com' }),
      event('operator.deleted', ops.id, { email: 'ops@example.com' }),
    ]);
    const text = JSON.stringify(all);
    for (const secret of [opsLink, viewerLink, viewerLink2, 'scrypt', 'password', 'digest'])
      expect(text).not.toContain(secret);
  });
});

group('tessera client list --search', (ws) => {
  const API = 'https://api.example.com';
  const created = new Map<string, Record<string, unknown>>();

  beforeAll(async () => {
    await ws.ok('audience', 'add', API);
    for (const [id, name] of SEARCHED_CLIENTS) {
      const args = ['client', 'create', '--id', id, '--name', name, '--json'];
      const r = await ws.ok(...(id === 'svc-pct' ? [...args, '--grant', API] : args));
      const { client_secret: _secret, ...client } = r.json as Record<string, unknown>;
      created.set(id, client);
    }
  });

  const search = async (text: string) =>
    ((await ws.ok('client', 'list', '--search', text, '--json')).json as { client_id: string }[]).map(
      (c) => c.client_id,
    );

  it('--json: the clients whose id or name contains the text, any ASCII case, by client id, as list shows them', async () => {
    const r = await ws.ok('client', 'list', '--search', 'BILL', '--json');
    expect(r.json).toEqual([created.get('Billing-1'), created.get('svc-zeta')]);
    // Exactly as `client list` shows each of them.
    const all = (await ws.ok('client', 'list', '--json')).json as { client_id: string }[];
    expect(all.map((c) => c.client_id)).toEqual(SEARCHED_CLIENTS.map(([id]) => id));
    expect(r.json).toEqual([all[1], all[0]]);
    expect(await search('svc-S')).toEqual(['svc-slash', 'svc-snake']);
    expect(await search('payMENTS')).toEqual(['pay_ment']);
    expect(await search('nobody')).toEqual([]);
  });

  it('%, _ and \\ are matched as themselves', async () => {
    expect(await search('%')).toEqual(['svc-pct']);
    expect(await search('_')).toEqual(['pay_ment', 'svc-snake']);
    expect(await search('e_c')).toEqual(['svc-snake']);
    expect(await search('\\')).toEqual(['svc-slash']);
    expect(await search('\\t')).toEqual(['svc-slash']);
    expect(await search('\\%')).toEqual([]);
  });

  it('text: a table of the clients found; a header alone when none', async () => {
    const pct = created.get('svc-pct')!;
    const snake = created.get('svc-snake')!;
    expectTable(
      (await ws.ok('client', 'list', '--search', '%')).stdout,
      ['CLIENT_ID', 'NAME', 'ENABLED', 'AUDIENCES', 'CREATED_AT'],
      [['svc-pct', '100% uptime', 'yes', API, pct.created_at]],
    );
    expectTable(
      (await ws.ok('client', 'list', '--search', 'SNAKE')).stdout,
      ['CLIENT_ID', 'NAME', 'ENABLED', 'AUDIENCES', 'CREATED_AT'],
      [['svc-snake', 'snake_case', 'yes', '-', snake.created_at]],
    );
    expect((await ws.ok('client', 'list', '--search', 'nobody')).stdout).toBe(
      'CLIENT_ID  NAME  ENABLED  AUDIENCES  CREATED_AT\n',
    );
  });
});
