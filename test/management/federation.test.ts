/**
 * The management rules of workload identity federation (INTERFACE.md, MANAGEMENT.md): a client's federated
 * credentials, their fields, and the rule that a client authenticates with federated credentials, or with its
 * own secrets or keys, never both. On a real SQLite store.
 */
import { exportJWK, generateKeyPair } from 'jose';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManagementError } from '../../src/management/errors.js';
import {
  audit,
  clients,
  federation,
  secrets,
  views,
  type ManagementContext,
} from '../../src/management/index.js';
import type { Store } from '../../src/store/types.js';
import { rejection } from '../helpers/assert.js';
import { managementContext } from '../helpers/management.js';

const GITHUB = 'https://token.actions.githubusercontent.com';
const ISSUER = 'https://tessera.example.com';

let store: Store;
let ctx: ManagementContext;
beforeEach(async () => {
  ({ store, ctx } = await managementContext({ TESSERA_ISSUER: ISSUER }));
});
afterEach(async () => {
  await store.close();
});

const federatedClient = (id: string) =>
  clients.createClient(ctx, { id, name: id, authMethod: 'private_key_jwt' });

const github = {
  name: 'deploy',
  issuer: GITHUB,
  subject: 'repo:acme/billing:environment:production',
  claims: { repository: 'acme/billing', ref: 'refs/heads/main' },
};

async function refusal(promise: Promise<unknown>): Promise<[string, string, string | undefined]> {
  const error = await rejection(promise, ManagementError);
  return [error.code, error.message, error.field];
}

describe('federated credentials', () => {
  it('are added with their defaults, listed, changed and removed, each change audited', async () => {
    const { client, secret } = await federatedClient('billing-ci');
    expect(secret).toBeUndefined();
    expect(client.federatedCredentials).toEqual([]);
    const added = await federation.addFederatedCredential(ctx, 'billing-ci', github);
    expect(added.id).toMatch(/^fed_[A-Za-z0-9_-]{16}$/);
    expect(views.federatedCredentialJson(added)).toEqual({
      id: added.id,
      name: 'deploy',
      issuer: GITHUB,
      jwks: null,
      jwks_uri: null,
      subject: 'repo:acme/billing:environment:production',
      // The Tessera issuer, stored as such: a later change of TESSERA_ISSUER does not move it.
      audience: ISSUER,
      claims: { repository: 'acme/billing', ref: 'refs/heads/main' },
      max_lifetime: 3600,
      once: false,
      created_at: added.createdAt,
      updated_at: added.createdAt,
    });
    expect(await federation.listFederatedCredentials(ctx, 'billing-ci')).toEqual([added]);

    const changed = await federation.updateFederatedCredential(ctx, 'billing-ci', added.id, {
      maxLifetime: 600,
      once: true,
      claims: null,
    });
    expect(changed).toMatchObject({ maxLifetime: 600, once: true, claims: {}, name: 'deploy' });
    expect(await federation.getFederatedCredential(ctx, 'billing-ci', added.id)).toEqual(changed);
    // A change that changes nothing writes nothing.
    expect(await federation.updateFederatedCredential(ctx, 'billing-ci', added.id, { once: true })).toEqual(
      changed,
    );

    await federation.removeFederatedCredential(ctx, 'billing-ci', added.id);
    expect(await federation.listFederatedCredentials(ctx, 'billing-ci')).toEqual([]);

    const events = (
      await audit.queryAudit(ctx, {
        types: [
          'client.federated_credential_added',
          'client.federated_credential_updated',
          'client.federated_credential_removed',
        ],
      })
    ).map((e) => [e.type, e.actor, e.target, e.changes]);
    expect(events).toEqual([
      [
        'client.federated_credential_removed',
        'cli:test',
        'billing-ci',
        { id: added.id, name: 'deploy', issuer: GITHUB, subject: github.subject },
      ],
      [
        'client.federated_credential_updated',
        'cli:test',
        'billing-ci',
        {
          id: added.id,
          claims: { from: github.claims, to: {} },
          max_lifetime: { from: 3600, to: 600 },
          once: { from: false, to: true },
        },
      ],
      ['client.federated_credential_added', 'cli:test', 'billing-ci', views.federatedCredentialJson(added)],
    ]);
  });

  it('a client is created with its credentials, each field named by its place when refused', async () => {
    const { client } = await clients.createClient(ctx, {
      id: 'k8s-billing',
      name: 'Billing',
      authMethod: 'private_key_jwt',
      federatedCredentials: [
        {
          name: 'prod',
          issuer: 'https://kubernetes.default.svc.cluster.local',
          subject: 'system:serviceaccount:prod:billing',
          jwksUri: 'https://keys.example.com/openid/v1/jwks',
          once: true,
        },
      ],
    });
    expect(client.federatedCredentials).toMatchObject([
      { name: 'prod', jwksUri: 'https://keys.example.com/openid/v1/jwks', once: true, maxLifetime: 3600 },
    ]);
    expect(
      await refusal(
        clients.createClient(ctx, {
          name: 'x',
          authMethod: 'private_key_jwt',
          federatedCredentials: [github, { ...github, name: 'b', maxLifetime: 90_000 }],
        }),
      ),
    ).toEqual([
      'invalid_field',
      'max_lifetime must be a whole number of seconds from 60 to 86400 (24 hours)',
      'federated_credentials/1/max_lifetime',
    ]);
    expect(await refusal(clients.createClient(ctx, { name: 'x', federatedCredentials: [github] }))).toEqual([
      'invalid_field',
      'federated credentials are for a private_key_jwt client without jwks or jwks_uri',
      'federated_credentials',
    ]);
    expect(
      await refusal(
        clients.createClient(ctx, {
          name: 'x',
          authMethod: 'private_key_jwt',
          federatedCredentials: [github, github],
        }),
      ),
    ).toEqual([
      'federated_credential_exists',
      'a federated credential named deploy is given twice',
      undefined,
    ]);
    expect((await clients.listClients(ctx)).map((c) => c.id)).toEqual(['k8s-billing']);
  });

  it('each field is checked by its rule', async () => {
    await federatedClient('ccc');
    const cases: [federation.FederatedCredentialInput, string, string][] = [
      [{ ...github, name: undefined }, 'name is required', 'name'],
      [
        { ...github, issuer: 'token.actions.githubusercontent.com' },
        'issuer must be an absolute URL, got "token.actions.githubusercontent.com"',
        'issuer',
      ],
      [{ ...github, issuer: 'ftp://issuer.example.com' }, 'issuer must be an http or https URL', 'issuer'],
      [
        { ...github, issuer: 'https://issuer.example.com/?tenant=1' },
        'issuer must not have a query',
        'issuer',
      ],
      [{ ...github, issuer: 'https://issuer.example.com/#x' }, 'issuer must not have a fragment', 'issuer'],
      [
        { ...github, issuer: 'https://10.0.0.1' },
        "issuer's host 10.0.0.1 is not a public address (loopback, private, link-local, unique-local or reserved) (its keys are found by discovery when neither jwks nor jwks_uri is given)",
        'issuer',
      ],
      [{ ...github, subject: '' }, 'subject must be a non-empty string', 'subject'],
      [{ ...github, subject: 'a\nb' }, 'subject must not contain control characters', 'subject'],
      [{ ...github, audience: 42 }, 'audience must be a non-empty string', 'audience'],
      [
        { ...github, claims: { job: { workflow: 'x' } } },
        'claims: job must be a string, a number or a boolean (a nested value cannot be required)',
        'claims',
      ],
      [
        { ...github, claims: { sub: 'x' } },
        'claims: sub is checked by its own field (iss, sub, aud, exp, nbf, iat, jti cannot be listed)',
        'claims',
      ],
      [
        { ...github, claims: ['repository'] },
        'claims must be a JSON object of claim names and the values required',
        'claims',
      ],
      [
        { ...github, maxLifetime: 59 },
        'max_lifetime must be a whole number of seconds from 60 to 86400 (24 hours)',
        'max_lifetime',
      ],
      [
        { ...github, maxLifetime: 86_401 },
        'max_lifetime must be a whole number of seconds from 60 to 86400 (24 hours)',
        'max_lifetime',
      ],
      [{ ...github, once: 'yes' }, 'once must be true or false', 'once'],
      [
        { ...github, jwks: { keys: [] }, jwksUri: undefined },
        'jwks must have a non-empty "keys" list',
        'jwks',
      ],
      [
        { ...github, jwks: { keys: [{ kty: 'oct', k: 'c2VjcmV0' }] } },
        'jwks key 1 has "k": register public keys only (a private or symmetric key is refused)',
        'jwks',
      ],
      [
        { ...github, jwksUri: 'https://192.168.1.1/jwks' },
        "jwks_uri's host 192.168.1.1 is not a public address (loopback, private, link-local, unique-local or reserved)",
        'jwks_uri',
      ],
    ];
    for (const [input, message, pointer] of cases)
      expect(await refusal(federation.addFederatedCredential(ctx, 'ccc', input))).toEqual([
        'invalid_field',
        message,
        pointer,
      ]);
    const { publicKey } = await generateKeyPair('ES256');
    const jwk = await exportJWK(publicKey);
    expect(
      await refusal(
        federation.addFederatedCredential(ctx, 'ccc', {
          ...github,
          jwks: { keys: [jwk] },
          jwksUri: 'https://keys.example.com/jwks',
        }),
      ),
    ).toEqual(['invalid_field', 'give jwks or jwks_uri, not both', 'jwks_uri']);
    expect(await federation.listFederatedCredentials(ctx, 'ccc')).toEqual([]);
  });

  it('a client has federated credentials or its own secrets or keys, never both', async () => {
    await clients.createClient(ctx, { id: 'with-secret', name: 'x' });
    expect(await refusal(federation.addFederatedCredential(ctx, 'with-secret', github))).toEqual([
      'client_uses_secrets',
      'client with-secret authenticates with a secret (client_secret_basic): a federated credential is for a private_key_jwt client without secrets or keys (change token_endpoint_auth_method first)',
      undefined,
    ]);
    await clients.createClient(ctx, {
      id: 'with-keys',
      name: 'x',
      authMethod: 'private_key_jwt',
      jwksUri: 'https://keys.example.com/jwks',
    });
    expect(await refusal(federation.addFederatedCredential(ctx, 'with-keys', github))).toEqual([
      'client_uses_keys',
      'client with-keys authenticates with its own keys (jwks_uri): remove them before adding a federated credential',
      undefined,
    ]);

    await federatedClient('fed');
    await federation.addFederatedCredential(ctx, 'fed', github);
    const before = await clients.getClient(ctx, 'fed');
    expect(await refusal(secrets.addSecret(ctx, 'fed'))).toEqual([
      'client_uses_federation',
      'client fed authenticates with federated credentials: it has no secrets (remove its federated credentials first)',
      undefined,
    ]);
    expect(await refusal(clients.rotateSecret(ctx, 'fed'))).toEqual([
      'client_uses_federation',
      'client fed authenticates with federated credentials: it has no secrets (remove its federated credentials first)',
      undefined,
    ]);
    expect(
      await refusal(clients.updateClient(ctx, 'fed', { jwksUri: 'https://keys.example.com/jwks' })),
    ).toEqual([
      'client_uses_federation',
      'client fed authenticates with federated credentials: it cannot have jwks_uri (remove its federated credentials first)',
      undefined,
    ]);
    expect(await refusal(clients.updateClient(ctx, 'fed', { authMethod: 'client_secret_post' }))).toEqual([
      'client_uses_federation',
      'client fed authenticates with federated credentials: it cannot have the method client_secret_post (remove its federated credentials first)',
      undefined,
    ]);
    expect(await clients.getClient(ctx, 'fed')).toEqual(before);
  });

  it('at most 10 per client, names unique within it, unknown ids refused', async () => {
    await federatedClient('many');
    await federatedClient('other');
    for (let i = 0; i < 10; i++)
      await federation.addFederatedCredential(ctx, 'many', { ...github, name: `job-${i}` });
    expect(
      await refusal(federation.addFederatedCredential(ctx, 'many', { ...github, name: 'eleventh' })),
    ).toEqual([
      'too_many_federated_credentials',
      'client many has 10 federated credentials, the most it may have: remove one first',
      undefined,
    ]);
    const [first, second] = await federation.listFederatedCredentials(ctx, 'many');
    expect(
      await refusal(federation.updateFederatedCredential(ctx, 'many', second!.id, { name: 'job-0' })),
    ).toEqual([
      'federated_credential_exists',
      'client many already has a federated credential named job-0',
      undefined,
    ]);
    // The same name on another client is another credential.
    await federation.addFederatedCredential(ctx, 'other', { ...github, name: 'job-0' });
    expect(await refusal(federation.getFederatedCredential(ctx, 'other', first!.id))).toEqual([
      'federated_credential_not_found',
      `client other has no federated credential ${first!.id}`,
      undefined,
    ]);
    expect(await refusal(federation.removeFederatedCredential(ctx, 'nobody', first!.id))).toEqual([
      'client_not_found',
      'client nobody does not exist',
      undefined,
    ]);
    expect(
      await refusal(federation.updateFederatedCredential(ctx, 'many', first!.id, { issuer: null })),
    ).toEqual(['invalid_field', 'issuer cannot be removed', 'issuer']);
  });

  it('keys given replace the others: inline keys a URL, a URL inline keys, neither discovery', async () => {
    await federatedClient('kkk');
    const { publicKey } = await generateKeyPair('RS256');
    const jwks = { keys: [{ ...(await exportJWK(publicKey)), kid: 'k1' }] };
    const added = await federation.addFederatedCredential(ctx, 'kkk', {
      ...github,
      jwksUri: 'https://keys.example.com/jwks',
    });
    const inline = await federation.updateFederatedCredential(ctx, 'kkk', added.id, { jwks });
    expect([inline.jwks, inline.jwksUri]).toEqual([jwks, null]);
    const discovery = await federation.updateFederatedCredential(ctx, 'kkk', added.id, { jwks: null });
    expect([discovery.jwks, discovery.jwksUri]).toEqual([null, null]);
  });
});
