/**
 * Token exchange's fields (INTERFACE.md, "Token exchange") through the CLI and `tessera apply`/`export`: a grant's
 * `--token-exchange` and `set-token-exchange`, an audience's `--resource-server` on add and update and
 * `--no-resource-servers`, shown by `client show`, `audience list` and --json; a file that names resource servers
 * it creates in the same apply, its plan, its export, and an exported file that plans no change.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jsonError, workspace, type Workspace } from './helpers/cli.js';

const ORDERS = 'https://orders.example.com';
const BILLING = 'https://billing.example.com';
let ws: Workspace;

beforeAll(async () => {
  ws = workspace();
  await ws.ok('audience', 'add', BILLING);
  for (const id of ['orders-api', 'billing-api', 'gateway'])
    await ws.ok('client', 'create', '--name', id, '--id', id);
}, 60_000);
afterAll(() => ws?.remove());

describe('tessera audience --resource-server', () => {
  it('add and update set the list (repeatable, comma-separated, each once, sorted); --no-resource-servers clears it', async () => {
    const added = await ws.ok(
      'audience',
      'add',
      ORDERS,
      '--resource-server',
      'orders-api,gateway',
      '--resource-server',
      'orders-api',
      '--json',
    );
    expect(added.json).toMatchObject({
      identifier: ORDERS,
      resource_server_client_ids: ['gateway', 'orders-api'],
    });

    const updated = await ws.ok('audience', 'update', ORDERS, '--resource-server', 'billing-api');
    expect(updated.stdout).toBe(`Audience ${ORDERS}: resource servers billing-api.\n`);
    const listed = await ws.ok('audience', 'list', '--json');
    expect((listed.json as { identifier: string }[]).find((a) => a.identifier === ORDERS)).toMatchObject({
      resource_server_client_ids: ['billing-api'],
    });
    expect((await ws.ok('audience', 'list')).stdout).toMatch(
      new RegExp(`^${ORDERS.replace(/\./g, '\\.')} .* billing-api +\\d{4}-`, 'm'),
    );

    const cleared = await ws.ok('audience', 'update', ORDERS, '--no-resource-servers', '--json');
    expect(cleared.json).toMatchObject({ resource_server_client_ids: [] });

    const trail = await ws.ok('audit', '--type', 'audience.updated', '--json');
    expect(
      (trail.json as { audience: string; changes: unknown }[]).map((e) => [e.audience, e.changes]),
    ).toEqual([
      [ORDERS, { resource_server_client_ids: { from: ['billing-api'], to: [] } }],
      [ORDERS, { resource_server_client_ids: { from: ['gateway', 'orders-api'], to: ['billing-api'] } }],
    ]);
  }, 60_000);

  it('refuses a client that does not exist (exit 2), both options at once, and the admin audience', async () => {
    const unknown = await ws.run(
      'audience',
      'update',
      ORDERS,
      '--resource-server',
      'gateway,nobody',
      '--json',
    );
    expect(unknown.code).toBe(2);
    expect(jsonError(unknown)).toEqual({
      error: 'invalid_field',
      message: "client nobody does not exist: an audience's resource servers are existing clients",
    });
    const both = await ws.run(
      'audience',
      'update',
      ORDERS,
      '--resource-server',
      'gateway',
      '--no-resource-servers',
    );
    expect(both.code).toBe(2);
    expect(both.stderr).toContain(
      '--resource-server and --no-resource-servers say opposite things: give one',
    );
    await ws.ok('client', 'create', '--name', 'ops', '--id', 'ops', '--admin');
    const admin = await ws.run(
      'audience',
      'update',
      `${'http://localhost:8080'}/admin/v1`,
      '--resource-server',
      'gateway',
    );
    expect(admin.code).not.toBe(0);
    expect(admin.stderr).toContain("is Tessera's admin API: it cannot be changed or deleted");
  }, 60_000);
});

describe('tessera grant --token-exchange', () => {
  it('add --token-exchange, set-token-exchange on|off, shown by --json and client show; audited', async () => {
    const listed = (await ws.ok('audience', 'list', '--json')).json as { id: string; identifier: string }[];
    const billingId = listed.find((a) => a.identifier === BILLING)!.id;
    const added = await ws.ok('grant', 'add', 'gateway', BILLING, '--token-exchange', '--json');
    expect(added.json).toEqual({
      client_id: 'gateway',
      audience_id: billingId,
      audience: BILLING,
      scopes: [],
      claims: null,
      token_exchange: true,
      added: true,
    });
    expect((await ws.ok('client', 'show', 'gateway')).stdout).toMatch(
      new RegExp(`^ *grants +${BILLING.replace(/\./g, '\\.')} \\[token exchange\\]$`, 'm'),
    );
    const off = await ws.ok('grant', 'set-token-exchange', 'gateway', BILLING, 'off');
    expect(off.stdout).toBe(`Client gateway, ${BILLING}: token exchange not allowed.\n`);
    const on = await ws.ok('grant', 'set-token-exchange', 'gateway', BILLING, 'on', '--json');
    expect(on.json).toMatchObject({ token_exchange: true, added: false });
    // Scopes alone keep it.
    await ws.ok('grant', 'set-scopes', 'gateway', BILLING, '');
    expect((await ws.ok('grant', 'add', 'gateway', BILLING, '--json')).json).toMatchObject({
      token_exchange: true,
      added: false,
    });
    const text = await ws.ok('grant', 'add', 'orders-api', BILLING, '--token-exchange');
    expect(text.stdout).toBe(
      `Client orders-api may now get tokens for ${BILLING}, scopes: none, token exchange allowed.\n`,
    );
    const wrong = await ws.run('grant', 'set-token-exchange', 'gateway', BILLING, 'maybe');
    expect(wrong.code).toBe(2);
    expect(wrong.stderr).toContain('Allowed choices are on, off');

    const trail = await ws.ok('audit', '--type', 'grant.updated', '--client', 'gateway', '--json');
    expect((trail.json as { changes: unknown }[]).map((e) => e.changes)).toEqual([
      { token_exchange: { from: false, to: true } },
      { token_exchange: { from: true, to: false } },
    ]);
  }, 60_000);

  it('refuses token exchange on a grant of the admin audience (exit 2, invalid_field)', async () => {
    const refused = await ws.run(
      'grant',
      'add',
      'ops',
      'http://localhost:8080/admin/v1',
      '--token-exchange',
      '--json',
    );
    expect(refused.code).toBe(2);
    expect(jsonError(refused)).toEqual({
      error: 'invalid_field',
      message:
        "a grant of http://localhost:8080/admin/v1 (Tessera's admin API) cannot allow token exchange: exchanged tokens never reach the admin API",
    });
  }, 60_000);
});

describe('tessera apply / export', () => {
  it('a file naming resource servers it creates applies in one go; its plan, export and a second apply', async () => {
    const w = workspace();
    try {
      const text = [
        'audiences:',
        '  - identifier: https://inventory.example.com',
        '    resource_server_client_ids: [inventory-api]',
        '  - identifier: https://stock.example.com',
        'clients:',
        '  - client_id: inventory-api',
        '    name: Inventory API',
        '    grants:',
        '      - audience: https://stock.example.com',
        '        token_exchange: true',
        '',
      ].join('\n');
      const file = w.write('tessera.yaml', text);
      const plan = [
        '+ audience https://inventory.example.com (resource_server_client_ids [inventory-api])',
        '+ audience https://stock.example.com',
        '+ client inventory-api (name "Inventory API", enabled true)',
        '+ grant inventory-api → https://stock.example.com (token_exchange true)',
        '',
        'Plan: 4 to create, 0 to update, 0 to delete.',
      ];
      const applied = await w.ok('apply', '-f', file);
      expect(applied.stdout.replace(/\nClient inventory-api[\s\S]*$/, '\n')).toContain(
        [...plan, 'Applied.', ''].join('\n'),
      );
      const audiences = (await w.ok('audience', 'list', '--json')).json as Record<string, unknown>[];
      expect(audiences.find((a) => a.identifier === 'https://inventory.example.com')).toMatchObject({
        resource_server_client_ids: ['inventory-api'],
      });

      const exported = await w.ok('export', '--format', 'json');
      const config = exported.json as { audiences: unknown[]; clients: { grants: unknown[] }[] };
      expect(config.audiences).toEqual([
        { identifier: 'https://inventory.example.com', resource_server_client_ids: ['inventory-api'] },
        { identifier: 'https://stock.example.com' },
      ]);
      expect(config.clients[0]!.grants).toEqual([
        { audience: 'https://stock.example.com', token_exchange: true },
      ]);
      const again = await w.withInput(exported.stdout, 'apply', '-f', '-', '--dry-run');
      expect(again.code).toBe(0);
      expect(again.stdout).toContain('No changes.');

      // Left out: none, and false; the plan says so field by field.
      const plain = w.write(
        'plain.yaml',
        [
          'audiences:',
          '  - identifier: https://inventory.example.com',
          '  - identifier: https://stock.example.com',
          'clients:',
          '  - client_id: inventory-api',
          '    name: Inventory API',
          '    grants:',
          '      - audience: https://stock.example.com',
          '',
        ].join('\n'),
      );
      const changed = await w.ok('apply', '-f', plain);
      expect(changed.stdout).toBe(
        [
          '~ audience https://inventory.example.com: resource_server_client_ids [inventory-api] → []',
          '~ grant inventory-api → https://stock.example.com: token_exchange true → false',
          '',
          'Plan: 0 to create, 2 to update, 0 to delete.',
          'Applied.',
          '',
        ].join('\n'),
      );
      const exportedAgain = (await w.ok('export', '--format', 'json')).json as {
        clients: { grants: unknown[] }[];
      };
      expect(exportedAgain.clients[0]!.grants).toEqual([{ audience: 'https://stock.example.com' }]);
    } finally {
      w.remove();
    }
  }, 60_000);

  it('refuses a file naming an unknown client, one --prune would delete, and token exchange on the admin audience', async () => {
    const w = workspace();
    try {
      await w.ok('client', 'create', '--name', 'kept', '--id', 'kept-svc');
      const file = w.write(
        'bad.yaml',
        [
          'audiences:',
          '  - identifier: https://api.example.com',
          '    resource_server_client_ids: [nobody, kept-svc]',
          'clients:',
          '  - client_id: ops',
          '    name: ops',
          '    grants:',
          '      - audience: http://localhost:8080/admin/v1',
          '        scopes: [keys:read]',
          '        token_exchange: true',
          '',
        ].join('\n'),
      );
      const refused = await w.run('apply', '-f', file, '--prune');
      expect(refused.code).toBe(2);
      expect(refused.stderr).toBe(
        [
          `tessera: ${file}: 3 errors, nothing was changed`,
          `  ${file}:3:34: /audiences/0/resource_server_client_ids/0: client nobody is neither in the file nor registered`,
          `  ${file}:3:42: /audiences/0/resource_server_client_ids/1: client kept-svc is not in the file, so --prune would delete it`,
          `  ${file}:10:25: /clients/0/grants/0/token_exchange: a grant of http://localhost:8080/admin/v1 (Tessera's admin API) cannot allow token exchange: exchanged tokens never reach the admin API`,
          '',
        ].join('\n'),
      );
      expect((await w.ok('audience', 'list', '--json')).json).toEqual([]);

      const schema = (await w.ok('export', '--schema')).json as {
        $defs: {
          audience: { properties: Record<string, unknown> };
          grant: { properties: Record<string, unknown> };
        };
      };
      expect(schema.$defs.audience.properties.resource_server_client_ids).toMatchObject({
        type: 'array',
        items: { type: 'string' },
      });
      expect(schema.$defs.grant.properties.token_exchange).toMatchObject({ type: 'boolean', default: false });
    } finally {
      w.remove();
    }
  }, 60_000);
});
