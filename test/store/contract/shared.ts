import { afterEach, beforeEach, expect } from 'vitest';
import { rejection } from '../../helpers/assert.js';
import { stillClock, type TestClock } from '../../helpers/clock.js';
import {
  StoreError,
  type ChangeAudit,
  type NewClient,
  type SigningKey,
  type Store,
} from '../../../src/store/types.js';

/**
 * Opens a store on a fresh, empty, unmigrated database. The store must take its time from `now` when given
 * (every engine's factory accepts an injected clock), so that timestamps and pruning can be asserted exactly.
 */
export type OpenStore = (now?: () => Date) => Promise<Store>;

/**
 * The clock and the store of the test that is running, set by the hooks of `freshStorePerTest`. Every part of
 * the contract imports them; an import of a `let` is a live binding, so it reads the current test's store.
 */
export let clock: TestClock;
export let store: Store;

/** Gives each test of the enclosing describe a fresh, migrated store on a still clock, and closes it after. */
export function freshStorePerTest(open: OpenStore): void {
  beforeEach(async () => {
    clock = stillClock();
    store = await open(clock.date);
    await store.migrate();
  });

  afterEach(async () => {
    await store.close();
  });
}

/** A change event as it reads back (without its id), written at `at`. */
export const changeEventAt = (at: string, a: ChangeAudit) => ({
  at,
  type: a.type,
  clientId: null,
  audience: null,
  jti: null,
  reason: a.reason ?? null,
  source: a.source,
  count: null,
  actor: a.actor,
  target: a.target,
  changes: a.changes,
});

/**
 * Every migration in order, written out here rather than read from src/store: a migration dropped, renamed or
 * reordered fails the contract. A new migration is added here once.
 */
export const MIGRATIONS = [
  '0001_initial',
  '0002_audit_events',
  '0003_client_quotas',
  '0004_compact_audit',
  '0005_change_audit',
  '0006_ids_and_scopes',
  '0007_custom_claims',
  '0008_client_secrets',
  '0009_private_key_jwt',
  '0010_console',
  '0011_typed_actors',
  '0012_federated_credentials',
  '0013_dpop_bound_access_tokens',
  '0014_revocation',
  '0015_token_exchange',
  '0016_client_deletions',
  '0017_tls_client_auth',
  '0018_token_profile',
] as const;

/** The migrations a store migrated up to `name` still runs, in order. */
export const migrationsAfter = (name: (typeof MIGRATIONS)[number]): string[] =>
  MIGRATIONS.slice(MIGRATIONS.indexOf(name) + 1);

export const A = 'https://api.a.example.com';
export const B = 'https://api.b.example.com';
export const C = 'https://api.c.example.com';
export const DIGEST_1 = 'sha256:' + Buffer.alloc(32, 1).toString('base64url');
export const DIGEST_2 = 'sha256:' + Buffer.alloc(32, 2).toString('base64url');

export const newClient = (
  id: string,
  audiences: string[] = [],
  extra: Partial<NewClient> = {},
): NewClient => ({
  id,
  name: `client ${id}`,
  secretDigest: DIGEST_1,
  tokenTtl: null,
  audiences,
  ...extra,
});

/** Resolves to the StoreError a promise rejected with; fails the test if it resolved or threw something else. */
export function storeError(promise: Promise<unknown>): Promise<StoreError> {
  return rejection(promise, StoreError);
}

/** The changes recorded after `seq`, as [entity, key] pairs. */
export async function changesAfter(store: Store, seq: number): Promise<[string, string][]> {
  return (await store.changesSince(seq, 1000)).map((c) => [c.entity, c.key]);
}

/** Runs `write` and asserts that it appended exactly the given changes, and returns what it resolved to. */
export async function expectChanges<T>(
  store: Store,
  write: () => Promise<T>,
  expected: [string, string][],
): Promise<T> {
  const before = await store.latestChange();
  const result = await write();
  expect(await changesAfter(store, before)).toEqual(expected);
  return result;
}

/** Runs a write that must fail and asserts that it appended no change. */
export async function expectNoChange(store: Store, write: () => Promise<unknown>): Promise<StoreError> {
  const before = await store.latestChange();
  const error = await storeError(write());
  expect(await changesAfter(store, before)).toEqual([]);
  return error;
}

export function signingKey(kid: string, extra: Partial<SigningKey> = {}): SigningKey {
  return {
    kid,
    alg: 'ES256',
    publicJwk: JSON.stringify({ kty: 'EC', crv: 'P-256', x: `x-${kid}`, y: `y-${kid}` }),
    privateJwkSealed: `sealed-${kid}`,
    createdAt: '2030-01-01T00:00:00.000Z',
    activatesAt: '2030-01-01T00:00:00.000Z',
    retiredAt: null,
    ...extra,
  };
}
