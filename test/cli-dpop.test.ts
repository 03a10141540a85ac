/**
 * dpop_bound_access_tokens (RFC 9449 §5.2) through the CLI and `tessera apply`/`export`: `--dpop-bound` and
 * `--no-dpop-bound` on create and update, shown by `client show`; a file that binds a client, its export,
 * and an exported file that plans no change; a file that unbinds it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workspace, type Workspace } from './helpers/cli.js';

const API = 'https://api.example.com';
let ws: Workspace;

beforeAll(async () => {
  ws = workspace();
  await ws.ok('audience', 'add', API);
}, 60_000);
afterAll(() => ws?.remove());

describe('tessera client --dpop-bound', () => {
  it('create --dpop-bound, show, update --no-dpop-bound and --dpop-bound; false when left out', async () => {
    const created = await ws.ok(
      'client',
      'create',
      '--name',
      'bound',
      '--id',
      'bound-svc',
      '--dpop-bound',
      '--json',
    );
    expect(created.json).toMatchObject({ client_id: 'bound-svc', dpop_bound_access_tokens: true });
    expect((await ws.ok('client', 'show', 'bound-svc')).stdout).toMatch(/^ *dpop_bound +yes$/m);

    const plain = await ws.ok('client', 'create', '--name', 'plain', '--id', 'plain-svc', '--json');
    expect(plain.json).toMatchObject({ dpop_bound_access_tokens: false });
    expect((await ws.ok('client', 'show', 'plain-svc')).stdout).toMatch(/^ *dpop_bound +no$/m);

    const unbound = await ws.ok('client', 'update', 'bound-svc', '--no-dpop-bound', '--json');
    expect(unbound.json).toMatchObject({ dpop_bound_access_tokens: false });
    // Another change leaves it as it is.
    const bound = await ws.ok('client', 'update', 'plain-svc', '--dpop-bound', '--json');
    expect(bound.json).toMatchObject({ dpop_bound_access_tokens: true });
    const renamed = await ws.ok('client', 'update', 'plain-svc', '--name', 'renamed', '--json');
    expect(renamed.json).toMatchObject({ name: 'renamed', dpop_bound_access_tokens: true });

    const trail = await ws.ok('audit', '--type', 'client.updated', '--json');
    expect((trail.json as { target: string; changes: unknown }[]).map((e) => [e.target, e.changes])).toEqual([
      ['plain-svc', { name: { from: 'plain', to: 'renamed' } }],
      ['plain-svc', { dpop_bound_access_tokens: { from: false, to: true } }],
      ['bound-svc', { dpop_bound_access_tokens: { from: true, to: false } }],
    ]);
  }, 60_000);

  it('apply binds a client; export writes the field only when true; export | apply plans no change; a file without it unbinds', async () => {
    const file = ws.write(
      'tessera.yaml',
      [
        'clients:',
        '  - client_id: applied-dpop',
        '    name: Applied DPoP',
        '    dpop_bound_access_tokens: true',
        '    grants:',
        `      - audience: ${API}`,
        '',
      ].join('\n'),
    );
    expect((await ws.ok('apply', '-f', file)).stdout).toContain('Applied.');
    expect((await ws.ok('client', 'show', 'applied-dpop', '--json')).json).toMatchObject({
      dpop_bound_access_tokens: true,
    });

    const exported = await ws.ok('export', '--format', 'json');
    const entries = (exported.json as { clients: Record<string, unknown>[] }).clients;
    expect(entries.find((c) => c.client_id === 'applied-dpop')).toMatchObject({
      dpop_bound_access_tokens: true,
    });
    // Left out for a client that is not bound (the default).
    expect(entries.find((c) => c.client_id === 'bound-svc')).not.toHaveProperty('dpop_bound_access_tokens');
    const again = await ws.withInput(exported.stdout, 'apply', '-f', '-', '--dry-run');
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('No changes.');

    const unbind = ws.write(
      'unbind.yaml',
      [
        'clients:',
        '  - client_id: applied-dpop',
        '    name: Applied DPoP',
        '    grants:',
        `      - audience: ${API}`,
        '',
      ].join('\n'),
    );
    const plan = await ws.ok('apply', '-f', unbind);
    expect(plan.stdout).toContain('~ client applied-dpop: dpop_bound_access_tokens true → false');
    expect((await ws.ok('client', 'show', 'applied-dpop', '--json')).json).toMatchObject({
      dpop_bound_access_tokens: false,
    });

    const wrong = ws.write(
      'wrong.yaml',
      ['clients:', '  - client_id: wrong', '    name: Wrong', '    dpop_bound_access_tokens: "yes"', ''].join(
        '\n',
      ),
    );
    const refused = await ws.run('apply', '-f', wrong);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('dpop_bound_access_tokens');
    expect(refused.stderr).toContain('must be boolean');
  }, 60_000);

  it('export --schema describes the field', async () => {
    const schema = (await ws.ok('export', '--schema')).json as {
      $defs: { client: { properties: Record<string, unknown> } };
    };
    expect(schema.$defs.client.properties.dpop_bound_access_tokens).toEqual({
      type: 'boolean',
      default: false,
      description: 'no token without a DPoP proof (RFC 9449 section 5.2)',
    });
  }, 60_000);
});
