/**
 * private_key_jwt clients through the CLI and `tessera apply`/`export`: the same rules as the admin API
 * (the management layer's), no secret made or shown, a secret refused for them, and an exported file that
 * plans no change.
 */
import { exportJWK, generateKeyPair } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workspace, type Workspace } from './helpers/cli.js';

const API = 'https://api.example.com';
let ws: Workspace;
let jwk: Record<string, unknown>;

beforeAll(async () => {
  ws = workspace();
  await ws.ok('audience', 'add', API);
  const { publicKey } = await generateKeyPair('ES256', { extractable: true });
  jwk = { ...(await exportJWK(publicKey)), kid: 'k1' };
}, 60_000);
afterAll(() => ws?.remove());

describe('tessera client with private_key_jwt', () => {
  it('create --auth-method private_key_jwt --jwks FILE: no secret; secrets refused; update moves the keys', async () => {
    const file = ws.write('jwks.json', JSON.stringify({ keys: [jwk] }));
    const created = await ws.ok(
      'client',
      'create',
      '--name',
      'keys',
      '--id',
      'keys-svc',
      '--grant',
      API,
      '--auth-method',
      'private_key_jwt',
      '--jwks',
      file,
      '--json',
    );
    expect(created.json).toMatchObject({
      client_id: 'keys-svc',
      token_endpoint_auth_method: 'private_key_jwt',
      jwks: { keys: [jwk] },
      jwks_uri: null,
    });
    expect(created.json).not.toHaveProperty('client_secret');

    const text = await ws.ok('client', 'show', 'keys-svc');
    expect(text.stdout).toMatch(/^ *auth_method +private_key_jwt$/m);
    expect(text.stdout).toMatch(/^ *jwks +k1$/m);

    for (const args of [
      ['client', 'secrets', 'add', 'keys-svc'],
      ['client', 'rotate-secret', 'keys-svc'],
    ]) {
      const refused = await ws.run(...args, '--json');
      expect(refused.code).toBe(1);
      expect(JSON.parse(refused.stderr)).toEqual({
        error: 'client_uses_keys',
        message:
          'client keys-svc authenticates with private_key_jwt: it has no secrets (change token_endpoint_auth_method first)',
      });
    }

    const moved = await ws.ok(
      'client',
      'update',
      'keys-svc',
      '--jwks-uri',
      'https://keys.example.com/jwks.json',
      '--json',
    );
    expect(moved.json).toMatchObject({ jwks: null, jwks_uri: 'https://keys.example.com/jwks.json' });

    const bad = await ws.run(
      'client',
      'create',
      '--name',
      'x',
      '--jwks',
      JSON.stringify({ keys: [jwk] }),
      '--json',
    );
    expect(bad.code).toBe(2);
    expect(JSON.parse(bad.stderr)).toEqual({
      error: 'invalid_field',
      message: 'jwks and jwks_uri are for private_key_jwt; this client uses client_secret_basic',
    });
  }, 60_000);

  it('apply creates a key client and prints no secret; export | apply --dry-run plans no change', async () => {
    const file = ws.write(
      'tessera.yaml',
      [
        'clients:',
        '  - client_id: applied-keys',
        '    name: Applied keys',
        '    token_endpoint_auth_method: private_key_jwt',
        `    jwks: ${JSON.stringify({ keys: [jwk] })}`,
        '    grants:',
        `      - audience: ${API}`,
        '',
      ].join('\n'),
    );
    const applied = await ws.ok('apply', '-f', file);
    expect(applied.stdout).toContain('Applied.');
    expect(applied.stdout).not.toContain('Secrets of the new clients');
    const shown = await ws.ok('client', 'show', 'applied-keys', '--json');
    expect(shown.json).toMatchObject({
      token_endpoint_auth_method: 'private_key_jwt',
      jwks: { keys: [jwk] },
    });

    const exported = await ws.ok('export');
    expect(exported.stdout).toContain('token_endpoint_auth_method: private_key_jwt');
    const again = await ws.withInput(exported.stdout, 'apply', '-f', '-', '--dry-run');
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('No changes.');

    const broken = ws.write(
      'broken.yaml',
      [
        'clients:',
        '  - client_id: broken',
        '    name: Broken',
        '    token_endpoint_auth_method: private_key_jwt',
        '    jwks_uri: ftp://keys.example.com/jwks.json',
        '',
      ].join('\n'),
    );
    const refused = await ws.run('apply', '-f', broken);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('jwks_uri must be an http or https URL');
  }, 60_000);
});
