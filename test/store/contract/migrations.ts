import { expect } from 'vitest';
import type { AuditEvent, Store } from '../../../src/store/types.js';
import { DIGEST_1, migrationsAfter, storeError } from './shared.js';

/** The two audit events each engine's test writes before migration 0004, in the schema of 0003. */
export const EVENTS_BEFORE_0004 = {
  columns: ['id', 'at', 'outcome', 'client_id', 'audience', 'jti', 'reason', 'source'],
  rows: [
    [7, '2026-11-01T10:00:00.123Z', 'issued', 'c1', 'https://api.example.com', 'j1', null, '10.0.0.1'],
    [9, '2026-11-01T10:00:01.999Z', 'refused', null, null, null, 'invalid_client: unknown client', null],
  ],
} as const;

/**
 * After migration 0004 on a store that held two events written before it (ids 7 and 9, RFC 3339 times,
 * outcomes): both converted, ids kept, and new events numbered after them. Each engine's test writes the
 * old rows its own way.
 */
export async function expectCompactAuditConverted(store: Store): Promise<void> {
  const event = (id: number, at: string, fields: Partial<AuditEvent>): AuditEvent => ({
    id,
    at,
    type: 'token.issued',
    clientId: null,
    audience: null,
    jti: null,
    reason: null,
    source: null,
    count: null,
    actor: null,
    target: null,
    changes: null,
    ...fields,
  });
  expect(await store.migrate()).toEqual(migrationsAfter('0003_client_quotas'));
  expect(await store.queryAuditEvents({ limit: 10 })).toEqual([
    event(9, '2026-11-01T10:00:01.999Z', { type: 'token.refused', reason: 'invalid_client: unknown client' }),
    event(7, '2026-11-01T10:00:00.123Z', {
      clientId: 'c1',
      audience: 'https://api.example.com',
      jti: 'j1',
      source: '10.0.0.1',
    }),
  ]);
  // New events continue after the copied ids.
  const {
    id: _id,
    at: _at,
    actor: _a,
    target: _t,
    changes: _c,
    ...record
  } = event(0, '', { clientId: 'c2' });
  await store.appendAuditEvents([
    { ...record, type: 'token.issued', at: Date.parse('2026-11-02T00:00:00Z') },
  ]);
  expect((await store.queryAuditEvents({ limit: 1 }))[0]!.id).toBe(10);
}

/**
 * The rows each engine's test writes, table by table in this order, with the schema of migration 0005 (before
 * audiences had ids and scopes, grants scopes, clients a description).
 */
export const ROWS_BEFORE_0006 = {
  audiences: [
    {
      url: 'https://api.example.com',
      name: 'API',
      token_ttl: 600,
      signing_alg: 'ES256',
      created_at: '2026-11-01T10:00:00.000Z',
      updated_at: '2026-11-02T10:00:00.000Z',
    },
    {
      url: 'https://other.example.com',
      name: null,
      token_ttl: null,
      signing_alg: null,
      created_at: '2026-11-03T10:00:00.000Z',
      updated_at: '2026-11-03T10:00:00.000Z',
    },
  ],
  clients: [
    {
      id: 'old',
      name: 'Old client',
      secret_digest: DIGEST_1,
      enabled: 1,
      token_ttl: null,
      created_at: '2026-11-04T10:00:00.000Z',
      updated_at: '2026-11-04T10:00:00.000Z',
      secret_rotated_at: '2026-11-04T10:00:00.000Z',
      quota_per_minute: null,
      quota_per_day: 100,
    },
  ],
  grants: [
    { client_id: 'old', audience_url: 'https://api.example.com', created_at: '2026-11-04T10:00:00.000Z' },
  ],
} as const;

/**
 * After migration 0006 on a store that held the rows of ROWS_BEFORE_0006 (and nothing else): each audience has
 * an id of its own, in the form the store makes, and no scopes; the ids are stored and unique; the client has
 * no description and its grant no scopes.
 */
export async function expectAudienceIdsAssigned(store: Store): Promise<void> {
  expect(await store.migrate()).toEqual(migrationsAfter('0005_change_audit'));
  const audiences = await store.listAudiences();
  expect(audiences).toEqual(
    ROWS_BEFORE_0006.audiences.map((row) => ({
      id: expect.stringMatching(/^aud_[A-Za-z0-9_-]{16}$/),
      url: row.url,
      name: row.name,
      tokenTtl: row.token_ttl,
      signingAlg: row.signing_alg,
      scopes: [],
      resourceServerClientIds: [],
      tokenProfile: null,
      createdAt: row.created_at,
      updatedAt: row.updated_at,
    })),
  );
  const [first, second] = audiences;
  expect(first!.id).not.toBe(second!.id);
  expect(await store.findAudienceById(first!.id)).toEqual(first);
  expect(await store.findAudienceById(second!.id)).toEqual(second);
  expect(await store.listAudiences()).toEqual(audiences);
  expect(await store.findClient('old')).toEqual({
    id: 'old',
    name: 'Old client',
    description: null,
    secretDigest: DIGEST_1,
    enabled: true,
    tokenTtl: null,
    createdAt: '2026-11-04T10:00:00.000Z',
    updatedAt: '2026-11-04T10:00:00.000Z',
    secretRotatedAt: '2026-11-04T10:00:00.000Z',
    quotaPerMinute: null,
    quotaPerDay: 100,
    claims: null,
    // Every client before 0009 authenticates with its secret, as before.
    authMethod: 'client_secret_basic',
    jwks: null,
    jwksUri: null,
    federatedCredentials: [],
    // Every client before 0013 gets tokens with or without a DPoP proof.
    dpopBoundAccessTokens: false,
    // Enabled, so 0014 set no revoked_before.
    revokedBefore: null,
    // Every client before 0017 has no tls_client_auth value, and its tokens are not bound to a certificate.
    tlsClientAuth: null,
    certificateBoundAccessTokens: false,
    // Its single secret became its first, made when it was last rotated.
    secrets: [
      {
        id: expect.stringMatching(/^sec_/),
        digest: DIGEST_1,
        createdAt: '2026-11-04T10:00:00.000Z',
        expiresAt: null,
        lastUsedAt: null,
      },
    ],
    audiences: ['https://api.example.com'],
    grants: [{ audience: 'https://api.example.com', scopes: [], claims: null, tokenExchange: false }],
  });
  // The ids are unique from now on: one given again is refused, a new one is another.
  const third = { url: 'https://third.example.com', name: null, tokenTtl: null, signingAlg: null };
  expect((await storeError(store.addAudience({ ...third, id: first!.id }))).code).toBe('conflict');
  const added = await store.addAudience(third);
  expect(added.id).toMatch(/^aud_[A-Za-z0-9_-]{16}$/);
  expect([first!.id, second!.id]).not.toContain(added.id);
}
