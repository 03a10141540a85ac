import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DatabaseSync } from 'node:sqlite';
import { digestBytes, digestSecret, generateClientId } from '../../src/domain/secrets.js';
import type { KnownClient } from '../../src/domain/known-client.js';
import { asOAuthError, Unavailable } from '../../src/domain/errors.js';
import { rejection } from '../helpers/assert.js';
import { sleep } from '../helpers/wait.js';
import { Directory, type DirectoryOptions } from '../../src/read-model/directory.js';
import { toKnownClient } from '../../src/read-model/known-client.js';
import { openSqliteStore } from '../../src/store/sqlite.js';
import type { Audience, SigningKey, Store } from '../../src/store/types.js';
import { clockAt } from '../helpers/clock.js';

const A = 'https://api.a.example.com';
const B = 'https://api.b.example.com';
const SECRET_1 = 'first secret, long enough for a test';
const SECRET_2 = 'second secret, long enough for a test';

interface Deferred {
  promise: Promise<void>;
  resolve: () => void;
}
function deferred(): Deferred {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/** A gate on one store method: the real call completes (`read`), then the answer is held until `release`. */
interface Gate {
  read: Deferred;
  release: Deferred;
}

/**
 * The store the Directory reads, wrapped: every method call is recorded in `calls`, and a method can be
 * made to fail or be held back after it has read.
 */
function instrument(store: Store) {
  const calls: string[] = [];
  const gates = new Map<string, Gate>();
  const failures = new Map<string, unknown>();
  const proxy = new Proxy(store, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== 'function' || typeof property !== 'string') return value;
      return async (...args: unknown[]) => {
        calls.push(property);
        const failure = failures.get(property);
        if (failure !== undefined) throw failure;
        const result: unknown = await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        const gate = gates.get(property);
        if (gate) {
          gates.delete(property);
          gate.read.resolve();
          await gate.release.promise;
        }
        return result;
      };
    },
  });
  return {
    store: proxy,
    calls,
    /** Store calls other than those named, since the last reset. */
    reset: () => calls.splice(0),
    gate(method: string): Gate {
      const gate = { read: deferred(), release: deferred() };
      gates.set(method, gate);
      return gate;
    },
    fail(method: string, error: unknown) {
      failures.set(method, error);
    },
    heal(method: string) {
      failures.delete(method);
    },
  };
}

const isPromise = (value: unknown): value is Promise<unknown> => value instanceof Promise;

describe('Directory', () => {
  let dir: string;
  let server: Store; // the store the directory reads, as the server process has it
  let cli: Store; // another store on the same file, as the CLI or another instance has it
  let spy: ReturnType<typeof instrument>;
  let directory: Directory;
  let onError: ReturnType<typeof vi.fn<NonNullable<DirectoryOptions['onError']>>>;
  let onKeysChanged: ReturnType<typeof vi.fn<() => Promise<void>>>;
  let onAudiencesChanged: ReturnType<typeof vi.fn<(audiences: readonly Audience[]) => void>>;

  async function startDirectory(options: Partial<DirectoryOptions> = {}): Promise<Directory> {
    directory = new Directory(spy.store, {
      ttlMs: 3_600_000,
      max: 1000,
      pollMs: 3_600_000, // polls only when the test says so
      retryAfter: 5,
      onError,
      onKeysChanged,
      onAudiencesChanged,
      ...options,
    });
    await directory.start();
    spy.reset();
    return directory;
  }

  async function createClient(id: string, audiences: string[], secret = SECRET_1) {
    return cli.createClient({ id, name: id, secretDigest: digestSecret(secret), tokenTtl: null, audiences });
  }

  /** Looks a client up, awaiting a miss; tells whether it was a hit. */
  async function lookup(id: string): Promise<{ hit: boolean; client: KnownClient | undefined }> {
    const found = directory.findClient(id);
    return isPromise(found) ? { hit: false, client: await found } : { hit: true, client: found };
  }

  beforeEach(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'tessera-directory-'));
    const file = path.join(dir, 'tessera.db');
    server = openSqliteStore(file);
    await server.migrate();
    cli = openSqliteStore(file);
    spy = instrument(server);
    onError = vi.fn<NonNullable<DirectoryOptions['onError']>>();
    onKeysChanged = vi.fn<() => Promise<void>>(async () => {});
    onAudiencesChanged = vi.fn<(audiences: readonly Audience[]) => void>();
    await cli.addAudience({ url: A, name: 'A', tokenTtl: 600, signingAlg: 'RS256' });
    await cli.addAudience({ url: B, name: null, tokenTtl: null, signingAlg: null });
  });

  afterEach(async () => {
    await directory?.stop();
    await server.close();
    await cli.close();
    rmSync(dir, { recursive: true, force: true });
  });

  describe('audiences', () => {
    it('loads every audience at start and hands them to onAudiencesChanged', async () => {
      await startDirectory();
      expect(directory.findAudience(A)).toEqual({
        url: A,
        tokenTtl: 600,
        signingAlg: 'RS256',
        resourceServers: new Set(),
      });
      expect(directory.findAudience(B)).toEqual({
        url: B,
        tokenTtl: null,
        signingAlg: null,
        resourceServers: new Set(),
      });
      expect(directory.findAudience('https://unknown.example.com')).toBeUndefined();
      const listed = await server.listAudiences();
      expect(directory.listAudiences()).toEqual(listed);
      expect(onAudiencesChanged.mock.calls).toEqual([[listed]]);
    });

    it('answers audience lookups without store I/O', async () => {
      await startDirectory();
      directory.findAudience(A);
      directory.findAudience('https://unknown.example.com');
      directory.listAudiences();
      expect(spy.calls).toEqual([]);
    });

    it('sees an audience added elsewhere after poll()', async () => {
      await startDirectory();
      await cli.addAudience({
        url: 'https://api.c.example.com',
        name: null,
        tokenTtl: 120,
        signingAlg: 'EdDSA',
      });
      expect(directory.findAudience('https://api.c.example.com')).toBeUndefined();
      await directory.poll();
      expect(directory.findAudience('https://api.c.example.com')).toEqual({
        url: 'https://api.c.example.com',
        tokenTtl: 120,
        signingAlg: 'EdDSA',
        resourceServers: new Set(),
      });
      expect(directory.listAudiences().map((a) => a.url)).toEqual([A, B, 'https://api.c.example.com']);
      expect(onAudiencesChanged).toHaveBeenCalledTimes(2);
    });

    it("carries an audience's resource servers to the token path, and every change of them: set, changed, a client deleted", async () => {
      await createClient('rs-1', []);
      await createClient('rs-2', []);
      await cli.updateAudience(A, { resourceServerClientIds: ['rs-1', 'rs-2'] });
      await startDirectory();
      expect(directory.findAudience(A)?.resourceServers).toEqual(new Set(['rs-1', 'rs-2']));
      expect(directory.findAudience(B)?.resourceServers).toEqual(new Set());

      await cli.updateAudience(B, { resourceServerClientIds: ['rs-2'] });
      await directory.poll();
      expect(directory.findAudience(B)?.resourceServers).toEqual(new Set(['rs-2']));

      // Deleting a client takes it off every audience that names it, and the feed says the audiences changed.
      await cli.deleteClient('rs-2');
      await directory.poll();
      expect(directory.findAudience(A)?.resourceServers).toEqual(new Set(['rs-1']));
      expect(directory.findAudience(B)?.resourceServers).toEqual(new Set());
      expect((await server.findAudience(A))?.resourceServerClientIds).toEqual(['rs-1']);
    });

    it('forgets a removed audience and the cached grants of it', async () => {
      await createClient('svc', [A, B]);
      await startDirectory();
      expect([...((await lookup('svc')).client?.grants.keys() ?? [])]).toEqual([A, B]);

      await cli.removeAudience(A);
      await directory.poll();
      expect(directory.findAudience(A)).toBeUndefined();
      expect(directory.listAudiences().map((a) => a.url)).toEqual([B]);
      expect(onAudiencesChanged).toHaveBeenLastCalledWith(await server.listAudiences());

      spy.reset();
      const after = await lookup('svc');
      expect(after.hit).toBe(false);
      expect([...(after.client?.grants.keys() ?? [])]).toEqual([B]);
      expect(spy.calls).toEqual(['findClients']);
    });
  });

  describe('clients', () => {
    it('loads a client on a miss, as the token path needs it', async () => {
      const created = await createClient('svc', [B, A]);
      await startDirectory();
      const first = await lookup('svc');
      expect(first.hit).toBe(false);
      expect(first.client).toEqual({
        id: 'svc',
        enabled: true,
        secrets: [
          {
            id: expect.stringMatching(/^sec_/) as unknown as string,
            digest: digestBytes(digestSecret(SECRET_1)),
            expiresAt: Infinity,
          },
        ],
        grants: expect.any(Object) as unknown as KnownClient['grants'],
        tokenTtl: null,
        quota: { perMinute: null, perDay: null },
        dpopBound: false,
        certificateBound: false,
      });
      // Looked up by audience (a list for a few grants, not a Map): each one, in the order of the grants.
      const grants = first.client!.grants;
      expect([...grants.keys()]).toEqual([A, B]);
      for (const url of [A, B])
        expect(grants.get(url)).toEqual({ scopes: new Set(), scope: undefined, tokenExchange: false });
      expect(grants.get('https://api.c.example.com')).toBeUndefined();
      expect(first.client).toEqual(toKnownClient(created));
      expect(spy.calls).toEqual(['findClients']);
    });

    it('finds each of a client’s grants by audience, with one grant, a few, or more than a list holds', async () => {
      const created = await createClient('svc', [A]);
      for (const count of [1, 8, 9, 30]) {
        const urls = Array.from({ length: count }, (_, i) => `https://api-${i}.example.com`);
        const known = toKnownClient({
          ...created,
          grants: urls.map((audience, i) => ({
            audience,
            scopes: i % 2 === 0 ? [] : [`s${i}`],
            claims: null,
            tokenExchange: i % 3 === 0,
          })),
        });
        expect([...known.grants.keys()], String(count)).toEqual(urls);
        for (const [i, url] of urls.entries())
          expect(known.grants.get(url), url).toEqual({
            scopes: new Set(i % 2 === 0 ? [] : [`s${i}`]),
            scope: i % 2 === 0 ? undefined : `s${i}`,
            tokenExchange: i % 3 === 0,
          });
        expect(known.grants.get('https://api-x.example.com')).toBeUndefined();
        // A URL is no audience by a prefix, nor a grant's object by its place in the list.
        expect(known.grants.get('https://api-1.example.co')).toBeUndefined();
      }
    });

    it('carries dpop_bound_access_tokens to the token path, and its change', async () => {
      await createClient('svc', [A]);
      await cli.updateClient('svc', { dpopBoundAccessTokens: true });
      await startDirectory();
      expect((await lookup('svc')).client).toMatchObject({ id: 'svc', dpopBound: true });
      await cli.updateClient('svc', { dpopBoundAccessTokens: false });
      await directory.poll();
      expect((await lookup('svc')).client).toMatchObject({ id: 'svc', dpopBound: false });
    });

    it('carries a tls_client_auth value (in its compared form) and the certificate binding to the token path, and their change', async () => {
      await createClient('svc', [A]);
      await cli.updateClient('svc', {
        authMethod: 'tls_client_auth',
        tlsClientAuth: { kind: 'san_dns', value: 'Worker.Example.com' },
        certificateBoundAccessTokens: true,
      });
      await startDirectory();
      expect((await lookup('svc')).client).toMatchObject({
        id: 'svc',
        tls: { kind: 'san_dns', value: 'worker.example.com' },
        selfSigned: undefined,
        certificateBound: true,
      });
      await cli.updateClient('svc', {
        tlsClientAuth: { kind: 'san_ip', value: '2001:DB8::0:10' },
        certificateBoundAccessTokens: false,
      });
      await directory.poll();
      expect((await lookup('svc')).client).toMatchObject({
        tls: { kind: 'san_ip', value: '2001:db8::10' },
        certificateBound: false,
      });
    });

    it("carries a grant's token_exchange to the token path, and its change (the grant's change reloads the client)", async () => {
      await createClient('svc', [A, B]);
      await cli.putGrant('svc', A, [], undefined, null, true);
      await startDirectory();
      const first = (await lookup('svc')).client!;
      expect(first.grants.get(A)?.tokenExchange).toBe(true);
      expect(first.grants.get(B)?.tokenExchange).toBe(false);
      await cli.putGrant('svc', A, [], undefined, null, false);
      await cli.putGrant('svc', B, [], undefined, null, true);
      await directory.poll();
      const after = await lookup('svc');
      expect(after.hit).toBe(false);
      expect(after.client!.grants.get(A)?.tokenExchange).toBe(false);
      expect(after.client!.grants.get(B)?.tokenExchange).toBe(true);
    });

    it("keeps a cached client's digest as 32 latin1 characters of its own: no Buffer, no slice of Node's pool", async () => {
      // A Buffer sliced from the pool would keep its whole 8 KiB slab alive, mostly other requests' garbage
      // (800 MB for the default 100 000 cached clients); one of its own costs ~280 bytes, the string 48.
      await createClient('svc', [A]);
      await startDirectory();
      const { client } = await lookup('svc');
      const digest = client!.secrets[0]!.digest;
      expect(typeof digest).toBe('string');
      expect(digest).toHaveLength(32);
      expect(Buffer.from(digest, 'latin1')).toEqual(createHash('sha256').update(SECRET_1, 'utf8').digest());
      expect(digestBytes(digestSecret(SECRET_1))).toBe(digest);
    });

    it('answers a hit synchronously with no store I/O', async () => {
      await createClient('svc', [A]);
      await startDirectory();
      const loaded = await lookup('svc');
      spy.reset();
      for (let i = 0; i < 3; i++) {
        const found = directory.findClient('svc');
        expect(isPromise(found)).toBe(false);
        expect(found).toBe(loaded.client);
      }
      expect(spy.calls).toEqual([]);
    });

    it('an id no client has: one read of the change feed and no lookup, then remembered as unknown', async () => {
      await startDirectory();
      const first = await lookup('nobody');
      expect(first).toEqual({ hit: false, client: undefined });
      // The first read of the feed since the start prunes it too (then once per 10 minutes).
      expect(spy.calls).toEqual(['changesSince', 'pruneChanges']);
      spy.reset();
      const second = directory.findClient('nobody');
      expect(isPromise(second)).toBe(false);
      expect(second).toBeUndefined();
      expect(spy.calls).toEqual([]);
      expect(directory.stats).toEqual({ hits: 0, unknownHits: 1, misses: 0, unregistered: 1 });
    });

    it('a client created through another store a moment ago is found at its first lookup: the feed is read first', async () => {
      await startDirectory();
      await createClient('fresh', [A]); // the directory has not read the feed since
      expect(directory.registered('fresh')).toBe(false);
      const found = await lookup('fresh');
      expect(found.client?.id).toBe('fresh');
      expect(spy.calls).toEqual(['changesSince', 'pruneChanges', 'findClients']);
      expect(directory.registered('fresh')).toBe(true);
      expect(directory.stats).toEqual({ hits: 0, unknownHits: 0, misses: 1, unregistered: 1 });
      spy.reset();
      expect((await lookup('fresh')).hit).toBe(true);
      expect(spy.calls).toEqual([]);
    });

    it('a deleted client: its id stays in the set, costs one lookup, then is remembered as unknown', async () => {
      await createClient('gone', [A]);
      await startDirectory();
      await cli.deleteClient('gone');
      await directory.poll();
      spy.reset();
      expect(directory.registered('gone')).toBe(true);
      expect(await lookup('gone')).toEqual({ hit: false, client: undefined });
      expect(spy.calls).toEqual(['findClients']);
      spy.reset();
      expect(await lookup('gone')).toEqual({ hit: true, client: undefined });
      expect(spy.calls).toEqual([]);
    });

    it('shares one store lookup between concurrent misses of the same id', async () => {
      await createClient('svc', [A]);
      await createClient('other', [A]);
      await startDirectory();
      const first = directory.findClient('svc');
      const second = directory.findClient('svc');
      expect(isPromise(first)).toBe(true);
      expect(second).toBe(first);
      const [a, b] = await Promise.all([first, second]);
      expect(a).toBe(b);
      expect(a?.id).toBe('svc');
      expect(spy.calls).toEqual(['findClients']);
      // And a different id is a lookup of its own.
      await lookup('other');
      expect(spy.calls).toEqual(['findClients', 'findClients']);
    });

    it('asks the store once for every id that misses in the same callback (one batch of token requests)', async () => {
      for (const id of ['c1', 'c2', 'c3', 'nobody']) await createClient(id, id === 'c2' ? [A, B] : [A]);
      await startDirectory();
      // Deleted: its id stays in the set (see ClientIdSet), so it is looked up with the others, and not found.
      await cli.deleteClient('nobody');
      await directory.poll();
      spy.reset();
      const asked: string[][] = [];
      const findClients = server.findClients.bind(server);
      server.findClients = async (ids) => (asked.push([...ids]), findClients(ids));

      const lookups = ['c1', 'c2', 'nobody', 'c3', 'c2'].map((id) => directory.findClient(id));
      expect(lookups.every(isPromise)).toBe(true);
      const found = await Promise.all(lookups);
      expect(found.map((c) => c?.id)).toEqual(['c1', 'c2', undefined, 'c3', 'c2']);
      expect([...found[1]!.grants.keys()]).toEqual([A, B]);
      expect(asked).toEqual([['c1', 'c2', 'nobody', 'c3']]);
      expect(spy.calls).toEqual(['findClients']);
      // All of them are cached now, the unknown one as unknown.
      for (const id of ['c1', 'c2', 'c3', 'nobody']) expect(isPromise(directory.findClient(id))).toBe(false);
      // A miss in a later callback is a query of its own.
      await createClient('c4', [A]);
      expect((await lookup('c4')).client?.id).toBe('c4');
      expect(asked).toEqual([['c1', 'c2', 'nobody', 'c3'], ['c4']]);
    });

    it('answers every request of a batch that failed with temporarily_unavailable', async () => {
      for (const id of ['c1', 'c2', 'nobody']) await createClient(id, [A]);
      await startDirectory();
      await cli.deleteClient('nobody'); // still in the set: looked up with the others
      await directory.poll();
      spy.reset();
      spy.fail('findClients', new Error('store unreachable'));
      const results = await Promise.allSettled(['c1', 'c2', 'nobody'].map((id) => directory.findClient(id)));
      for (const result of results) {
        expect(result.status).toBe('rejected');
        const { reason } = result as PromiseRejectedResult;
        expect(reason).toBeInstanceOf(Unavailable);
        expect(asOAuthError(reason)).toMatchObject({ error: 'temporarily_unavailable', status: 503 });
      }
      expect(spy.calls).toEqual(['findClients']);
      expect(onError).toHaveBeenCalledTimes(1);
    });

    it('shares one read of the feed between concurrent misses of an unknown id too', async () => {
      await startDirectory();
      const first = directory.findClient('nobody');
      expect(directory.findClient('nobody')).toBe(first);
      expect(await first).toBeUndefined();
      expect(spy.calls).toEqual(['changesSince', 'pruneChanges']);
    });

    it('a flood of unknown ids: one read of the feed at a time, no lookup', async () => {
      await startDirectory();
      await directory.poll(); // the first poll's prune, out of the way
      spy.reset();
      const gate = spy.gate('changesSince');
      const first = Array.from({ length: 50 }, (_, i) => directory.findClient(`made-up-${i}`));
      await gate.read.promise; // one read in flight; the others wait for the one read after it
      const more = Array.from({ length: 50 }, (_, i) => directory.findClient(`made-up-${50 + i}`));
      expect(spy.calls).toEqual(['changesSince']);
      gate.release.resolve();
      expect(await Promise.all([...first, ...more])).toEqual(Array(100).fill(undefined));
      expect(spy.calls).toEqual(['changesSince', 'changesSince']);
      expect(directory.stats).toEqual({ hits: 0, unknownHits: 0, misses: 0, unregistered: 100 });
    });

    it('an unknown id while the feed cannot be read: temporarily_unavailable, as a failed lookup', async () => {
      await startDirectory({ retryAfter: 7 });
      const boom = new Error('store unreachable');
      spy.fail('changesSince', boom);
      const failure = asOAuthError(
        await rejection(Promise.resolve(directory.findClient('nobody')), Unavailable),
      )!;
      expect([failure.error, failure.status, failure.headers]).toEqual([
        'temporarily_unavailable',
        503,
        { 'retry-after': '7' },
      ]);
      expect(onError.mock.calls).toEqual([[boom, 'change feed']]);
      // Nothing remembered: once the feed reads again, the same id is answered.
      spy.heal('changesSince');
      expect(await lookup('nobody')).toEqual({ hit: false, client: undefined });
    });

    it('an unknown id while the feed hangs: temporarily_unavailable after lookupTimeoutMs, as a hung lookup', async () => {
      await startDirectory({ lookupTimeoutMs: 50, retryAfter: 7 });
      const gate = spy.gate('changesSince');
      const started = Date.now();
      const failure = asOAuthError(
        await rejection(Promise.resolve(directory.findClient('nobody')), Unavailable),
      )!;
      expect([failure.error, failure.status, failure.headers]).toEqual([
        'temporarily_unavailable',
        503,
        { 'retry-after': '7' },
      ]);
      expect(Date.now() - started).toBeLessThan(1000);
      gate.release.resolve();
    });

    it('evicts the least recently used client beyond `max`', async () => {
      for (const id of ['c1', 'c2', 'c3']) await createClient(id, [A]);
      await startDirectory({ max: 2 });
      await lookup('c1');
      await lookup('c2');
      await lookup('c3'); // evicts c1
      spy.reset();
      expect((await lookup('c3')).hit).toBe(true);
      expect((await lookup('c2')).hit).toBe(true);
      expect((await lookup('c1')).hit).toBe(false);
      expect(spy.calls).toEqual(['findClients']);
    });

    it('forgets a cached client after ttlMs, even with no change', async () => {
      await createClient('svc', [A]);
      await startDirectory({ ttlMs: 40 });
      await lookup('svc');
      expect((await lookup('svc')).hit).toBe(true);
      await sleep(80);
      spy.reset();
      expect((await lookup('svc')).hit).toBe(false);
      expect(spy.calls).toEqual(['findClients']);
    });
  });

  describe('peekClient (memory only, for blocked callers)', () => {
    it('never asks the store; holds what a lookup loaded, past the TTL too, until a change removes it', async () => {
      await createClient('svc', [A]);
      await startDirectory({ ttlMs: 40 });
      expect(directory.peekClient('svc')).toBeUndefined();
      expect(directory.peekClient('nobody')).toBeUndefined();
      expect(spy.calls).toEqual([]);
      await lookup('svc');
      spy.reset();
      expect(directory.peekClient('svc')?.id).toBe('svc');
      await sleep(80); // past the TTL: a lookup would ask the store again
      expect(directory.peekClient('svc')?.id).toBe('svc');
      expect(spy.calls).toEqual([]);
      await cli.updateClient('svc', { enabled: false });
      await directory.poll();
      expect(directory.peekClient('svc')).toBeUndefined();
    });

    it('holds nothing once the stale window is over (the feed unread)', async () => {
      await createClient('svc', [A]);
      await startDirectory({ staleWindowMs: 50 });
      await lookup('svc');
      await sleep(80);
      expect(directory.peekClient('svc')).toBeUndefined();
    });
  });

  describe('changes made by another store instance', () => {
    beforeEach(async () => {
      await createClient('svc', [A]);
      await createClient('bystander', [A, B]);
      await startDirectory();
      await lookup('svc');
      await lookup('bystander');
      spy.reset();
    });

    /** Polls, then looks `svc` up again: it must be a miss that reads the store. */
    async function pollAndReload(): Promise<KnownClient | undefined> {
      await directory.poll();
      spy.reset();
      const after = await lookup('svc');
      expect(after.hit).toBe(false);
      expect(spy.calls).toEqual(['findClients']);
      // An unrelated client stays cached (unless audiences changed, which is not the case here).
      spy.reset();
      expect((await lookup('bystander')).hit).toBe(true);
      expect(spy.calls).toEqual([]);
      return after.client;
    }

    it('keeps serving the cached entry until poll() reads the change', async () => {
      await cli.updateClient('svc', { enabled: false });
      const before = await lookup('svc');
      expect(before.hit).toBe(true);
      expect(before.client?.enabled).toBe(true);
      expect(spy.calls).toEqual([]);
    });

    it('client disabled', async () => {
      await cli.updateClient('svc', { enabled: false });
      expect((await pollAndReload())?.enabled).toBe(false);
    });

    it('client enabled again', async () => {
      await cli.updateClient('svc', { enabled: false });
      await directory.poll();
      await lookup('svc');
      await cli.updateClient('svc', { enabled: true });
      expect((await pollAndReload())?.enabled).toBe(true);
    });

    it('secret rotated', async () => {
      const old = (await cli.findClient('svc'))!.secrets.map((s) => s.id);
      const add = {
        id: 'sec_2',
        digest: digestSecret(SECRET_2),
        createdAt: new Date().toISOString(),
        expiresAt: null,
      };
      await cli.changeSecrets('svc', { delete: old, add });
      // The old secret stops at once (no grace): only the new one is left.
      expect((await pollAndReload())?.secrets.map((s) => s.digest)).toEqual([
        digestBytes(digestSecret(SECRET_2)),
      ]);
    });

    it('grant added', async () => {
      await cli.addGrant('svc', B);
      expect([...((await pollAndReload())?.grants.keys() ?? [])]).toEqual([A, B]);
    });

    it('grant removed', async () => {
      await cli.removeGrant('svc', A);
      expect([...((await pollAndReload())?.grants.keys() ?? [])]).toEqual([]);
    });

    it('client deleted', async () => {
      await cli.deleteClient('svc');
      expect(await pollAndReload()).toBeUndefined();
      // ... and now remembered as unknown.
      spy.reset();
      expect(await lookup('svc')).toEqual({ hit: true, client: undefined });
    });

    it('client created after its id was looked up as unknown', async () => {
      expect(await lookup('late')).toEqual({ hit: false, client: undefined });
      expect(await lookup('late')).toEqual({ hit: true, client: undefined });
      await createClient('late', [B]);
      await directory.poll();
      spy.reset();
      const after = await lookup('late');
      expect(after.hit).toBe(false);
      expect([...(after.client?.grants.keys() ?? [])]).toEqual([B]);
    });

    it('changes more than one batch (1000) long are all read by one poll()', async () => {
      await createClient('noisy', []);
      for (let i = 0; i < 600; i++) {
        await cli.addGrant('noisy', A);
        await cli.removeGrant('noisy', A);
      }
      await cli.updateClient('svc', { enabled: false });
      expect((await pollAndReload())?.enabled).toBe(false);
    });

    it('a backlog of several batches is read with the event loop let in between: a timer runs during the poll', async () => {
      await createClient('noisy', []);
      for (let i = 0; i < 1100; i++) {
        await cli.addGrant('noisy', A);
        await cli.removeGrant('noisy', A);
      }
      // 2 200 changes: three batches. On SQLite every read is synchronous; without a yield between batches the
      // whole poll is one task, and a timer due meanwhile waits for its end.
      let ticked = false;
      const done = directory.poll().then(() => ticked);
      setImmediate(() => (ticked = true));
      expect(await done).toBe(true);
    });

    it('does not read anything when nothing changed', async () => {
      await directory.poll();
      expect(spy.calls.filter((c) => c !== 'pruneChanges')).toEqual(['changesSince']);
      expect((await lookup('svc')).hit).toBe(true);
    });
  });

  describe('the set of every client id', () => {
    /** Clients written straight into the file, in one transaction (as bench/lib/stores.js fills a store). */
    function insertClients(ids: readonly string[]): void {
      const db = new DatabaseSync(path.join(dir, 'tessera.db'));
      try {
        db.exec('PRAGMA busy_timeout = 10000');
        const insert = db.prepare(
          'INSERT INTO clients (id, name, secret_digest, enabled, token_ttl, created_at, updated_at, ' +
            'secret_rotated_at, quota_per_minute, quota_per_day) VALUES (?, ?, ?, 1, NULL, ?, ?, ?, NULL, NULL)',
        );
        const now = new Date().toISOString();
        db.exec('BEGIN');
        for (const id of ids) insert.run(id, id, digestSecret(SECRET_1), now, now, now);
        db.exec('COMMIT');
      } finally {
        db.close();
      }
    }

    it('is built at start, after the feed position is taken, from every id in the store; asking it is memory only', async () => {
      await createClient('svc', [A]);
      await createClient('other', []);
      directory = new Directory(spy.store, {
        ttlMs: 3_600_000,
        max: 1000,
        pollMs: 3_600_000,
        retryAfter: 5,
        onError,
      });
      await directory.start();
      expect(spy.calls).toEqual(['latestChange', 'listAudiences', 'countClients', 'listClientIds']);
      spy.reset();
      expect(['svc', 'other', 'nobody', 'SVC', 'svc '].map((id) => directory.registered(id))).toEqual([
        true,
        true,
        false,
        false,
        false,
      ]);
      // Built for 1 024 ids at least, and copied to its size (two ids) rather than kept with that slack.
      expect(directory.idStats()).toEqual({ ids: 2, recent: 0, bytes: 16 });
      expect(spy.calls).toEqual([]);
      expect(onError).not.toHaveBeenCalled();
    });

    it('reads the store a page (10 000 ids) at a time: 25 001 ids, every one in the set', async () => {
      const ids = Array.from({ length: 25_000 }, generateClientId);
      insertClients(ids);
      await createClient('svc', [A]);
      const asked: (string | null)[] = [];
      const listClientIds = server.listClientIds.bind(server);
      server.listClientIds = async (after, limit) => (asked.push(after), listClientIds(after, limit));
      await startDirectory();
      const sorted = [...ids, 'svc'].sort();
      expect(asked).toEqual([null, sorted[9_999], sorted[19_999]]);
      expect(directory.idStats()).toEqual({ ids: 25_001, recent: 0, bytes: 25_001 * 8 });
      expect(ids.every((id) => directory.registered(id))).toBe(true);
      expect(Array.from({ length: 1000 }, generateClientId).some((id) => directory.registered(id))).toBe(
        false,
      );
      // More than a page: a deletion does not make the backstop read 25 001 ids again (see maybeRebuildIds).
      await cli.deleteClient('svc');
      await directory.poll();
      expect(directory.registered('svc')).toBe(true);
    });

    it('adds the id of every client change the feed brings', async () => {
      await startDirectory();
      await createClient('new-1', [A]);
      await createClient('new-2', []);
      expect(directory.registered('new-1')).toBe(false);
      await directory.poll();
      expect(directory.registered('new-1')).toBe(true);
      expect(directory.registered('new-2')).toBe(true);
      expect(directory.idStats()).toEqual({ ids: 2, recent: 2, bytes: 2 * 64 });
    });

    it('keeps a client created while the pages are read: it comes through the feed and is added at the end', async () => {
      await createClient('svc', [A]);
      const gate = spy.gate('listClientIds');
      directory = new Directory(spy.store, {
        ttlMs: 3_600_000,
        max: 1000,
        pollMs: 3_600_000,
        retryAfter: 5,
        onError,
      });
      const started = directory.start();
      await gate.read.promise; // the page is read: svc only
      await createClient('during', [A]);
      await directory.poll();
      expect(directory.registered('during')).toBe(false); // not built yet
      gate.release.resolve();
      await started;
      expect(directory.registered('svc')).toBe(true);
      expect(directory.registered('during')).toBe(true);
    });

    it('until it is built, every miss is a lookup, as before there was a set', async () => {
      await createClient('svc', [A]);
      const gate = spy.gate('countClients');
      directory = new Directory(spy.store, {
        ttlMs: 3_600_000,
        max: 1000,
        pollMs: 3_600_000,
        retryAfter: 5,
        onError,
      });
      const started = directory.start();
      await gate.read.promise;
      spy.reset();
      expect(directory.registered('svc')).toBe(false);
      expect(await lookup('nobody')).toEqual({ hit: false, client: undefined });
      expect(spy.calls).toEqual(['findClients']);
      gate.release.resolve();
      await started;
      expect(directory.registered('svc')).toBe(true);
    });

    it('a build that fails: reported, the start goes on without a set, and it is built again 10 s later once the feed reads', async () => {
      await createClient('svc', [A]);
      const boom = new Error('store unreachable');
      spy.fail('listClientIds', boom);
      await startDirectory();
      expect(onError.mock.calls).toEqual([[boom, 'client ids']]);
      expect(directory.registered('svc')).toBe(false);
      expect(directory.idStats()).toBeUndefined();
      spy.heal('listClientIds');
      await directory.poll();
      expect(spy.calls.filter((c) => c === 'listClientIds')).toEqual([]); // not before 10 s
      vi.useFakeTimers({ toFake: ['Date'], now: Date.now() + 10_000 });
      try {
        await directory.poll();
      } finally {
        vi.useRealTimers();
      }
      await vi.waitFor(() => expect(directory.registered('svc')).toBe(true), { timeout: 2000, interval: 5 });
      expect(spy.calls.filter((c) => c === 'listClientIds')).toEqual(['listClientIds']);
    });

    it('is built again at the TTL backstop when a client changed and it holds a page of ids or fewer: a deleted id leaves', async () => {
      let now = Date.parse('2030-06-01T00:00:00.000Z');
      await createClient('svc', [A]);
      await createClient('gone', [A]);
      await startDirectory({ ttlMs: 60_000, clock: clockAt(() => now) });
      await cli.deleteClient('gone');
      await directory.poll();
      expect(directory.registered('gone')).toBe(true);
      spy.reset();
      now += 60_000;
      await directory.poll();
      await vi.waitFor(() => expect(directory.registered('gone')).toBe(false), {
        timeout: 2000,
        interval: 5,
      });
      expect(directory.registered('svc')).toBe(true);
      expect(spy.calls.filter((c) => c === 'countClients' || c === 'listClientIds')).toEqual([
        'countClients',
        'listClientIds',
      ]);
      // No client changed since: the next backstop does not read the ids again.
      spy.reset();
      now += 60_000;
      await directory.poll();
      await directory.stop();
      expect(spy.calls.filter((c) => c === 'countClients' || c === 'listClientIds')).toEqual([]);
    });
  });

  describe('races', () => {
    it('does not cache what a lookup in flight across an invalidation read', async () => {
      await createClient('svc', [A]);
      await startDirectory();
      const gate = spy.gate('findClients');
      const inFlight = directory.findClient('svc');
      await gate.read.promise; // the store has answered: enabled

      await cli.updateClient('svc', { enabled: false });
      await directory.poll();
      gate.release.resolve();
      expect((await inFlight)?.enabled).toBe(true); // the request that started before the change

      spy.reset();
      const after = await lookup('svc');
      expect(after.hit).toBe(false);
      expect(after.client?.enabled).toBe(false);
    });

    it('does not hand a lookup started after an invalidation the answer of one started before it', async () => {
      await createClient('svc', [A]);
      await startDirectory();
      const gate = spy.gate('findClients');
      const inFlight = directory.findClient('svc');
      await gate.read.promise; // the store has answered: enabled

      await cli.updateClient('svc', { enabled: false });
      await directory.poll(); // the directory now knows svc is disabled...
      const later = directory.findClient('svc'); // ... so this lookup must not join the stale one
      gate.release.resolve();
      await inFlight;
      expect((await later)?.enabled).toBe(false);
    });

    it('a poll() called while another is in flight still sees the writes made before the call', async () => {
      await createClient('svc', [A]);
      await startDirectory();
      await lookup('svc');
      const gate = spy.gate('changesSince');
      const first = directory.poll();
      await gate.read.promise; // the first poll has read the feed: nothing new

      await cli.updateClient('svc', { enabled: false });
      const second = directory.poll(); // e.g. `sync()` after a write, while the timer's poll runs
      gate.release.resolve();
      await Promise.all([first, second]);
      expect((await lookup('svc')).client?.enabled).toBe(false);
    });
  });

  describe('keys and errors', () => {
    const key = (kid: string): SigningKey => ({
      kid,
      alg: 'ES256',
      publicJwk: '{}',
      privateJwkSealed: 'sealed',
      createdAt: '2030-01-01T00:00:00.000Z',
      activatesAt: '2030-01-01T00:00:00.000Z',
      retiredAt: null,
    });

    it('calls onKeysChanged once per poll that read key changes, and not for other changes', async () => {
      await startDirectory();
      await createClient('svc', [A]);
      await directory.poll();
      expect(onKeysChanged).not.toHaveBeenCalled();

      await cli.changeSigningKeys(() => ({ insert: key('k1') }));
      await cli.changeSigningKeys(() => ({ insert: key('k2') }));
      await directory.poll();
      expect(onKeysChanged).toHaveBeenCalledTimes(1);
      await directory.poll();
      expect(onKeysChanged).toHaveBeenCalledTimes(1);

      await cli.changeSigningKeys(() => ({ insert: key('k3') }));
      await directory.poll();
      expect(onKeysChanged).toHaveBeenCalledTimes(2);
    });

    it('sends a poll error to onError, resolves, and reads the same changes next time', async () => {
      await createClient('svc', [A]);
      await startDirectory();
      await lookup('svc');
      await cli.updateClient('svc', { enabled: false });

      const boom = new Error('store unreachable');
      spy.fail('changesSince', boom);
      await expect(directory.poll()).resolves.toBeUndefined();
      expect(onError.mock.calls).toEqual([[boom, 'change feed']]);
      expect((await lookup('svc')).client?.enabled).toBe(true);

      spy.heal('changesSince');
      await directory.poll();
      expect(onError).toHaveBeenCalledTimes(1);
      expect((await lookup('svc')).client?.enabled).toBe(false);
    });

    it('sends a failing onKeysChanged to onError, goes on with the feed, and retries the keys at the full refresh', async () => {
      let now = Date.parse('2026-01-01T00:00:00Z');
      await startDirectory({ ttlMs: 60_000, clock: clockAt(() => now) });
      const boom = new Error('reload failed');
      onKeysChanged.mockRejectedValueOnce(boom);
      await cli.changeSigningKeys(() => ({ insert: key('k1') }));
      await expect(directory.poll()).resolves.toBeUndefined();
      expect(onError.mock.calls).toEqual([[boom, 'change feed']]);
      // The feed moved on: later changes are applied, and the key change is not read again and again.
      await createClient('late', [A]);
      await directory.poll();
      expect(await directory.findClient('late')).toMatchObject({ id: 'late' });
      expect(onKeysChanged).toHaveBeenCalledTimes(1);
      // The backstop: once per TTL, the keys are reloaded whatever the feed said.
      now += 60_000;
      await directory.poll();
      expect(onKeysChanged).toHaveBeenCalledTimes(2);
    });

    it('never rejects, even without onError', async () => {
      await startDirectory({ onError: undefined });
      spy.fail('changesSince', new Error('store unreachable'));
      await expect(directory.poll()).resolves.toBeUndefined();
    });

    it('answers a failed client lookup with temporarily_unavailable (Retry-After: its retryAfter), reports it, and caches nothing', async () => {
      await createClient('svc', [A]);
      await startDirectory({ retryAfter: 42 });
      const boom = new Error('store unreachable');
      spy.fail('findClients', boom);
      let failure: unknown;
      try {
        await directory.findClient('svc');
      } catch (error) {
        failure = error;
      }
      expect(failure).toBeInstanceOf(Unavailable);
      const oauth = asOAuthError(failure)!;
      expect([oauth.error, oauth.description, oauth.status, oauth.headers]).toEqual([
        'temporarily_unavailable',
        'the service cannot answer right now; try again later',
        503,
        { 'retry-after': '42' },
      ]);
      expect(onError.mock.calls).toEqual([[boom, 'client lookup']]);
      spy.heal('findClients');
      spy.reset();
      const after = await lookup('svc');
      expect(after.hit).toBe(false);
      expect(after.client?.id).toBe('svc');
    });
  });

  describe('following the feed', () => {
    it('polls on its own every pollMs once started, and stops on stop()', async () => {
      await createClient('svc', [A]);
      await startDirectory({ pollMs: 20 });
      await lookup('svc');
      await cli.updateClient('svc', { enabled: false });
      await vi.waitFor(
        () => {
          const found = directory.findClient('svc');
          expect(isPromise(found)).toBe(true);
        },
        { timeout: 2000, interval: 10 },
      );
      await directory.stop();
      spy.reset();
      await sleep(80);
      expect(spy.calls.filter((c) => c === 'changesSince')).toEqual([]);
    });

    it('prunes changes older than 24 hours, at most every 10 minutes', async () => {
      let now = Date.parse('2030-06-01T00:00:00.000Z');
      await startDirectory({ clock: clockAt(() => now) });
      const pruned = vi.spyOn(server, 'pruneChanges');

      await directory.poll();
      expect(pruned.mock.calls).toEqual([[new Date(now - 24 * 3600 * 1000)]]);

      now += 9 * 60 * 1000;
      await directory.poll();
      expect(pruned).toHaveBeenCalledTimes(1);

      now += 2 * 60 * 1000;
      await directory.poll();
      expect(pruned).toHaveBeenCalledTimes(2);
      expect(pruned.mock.calls[1]).toEqual([new Date(now - 24 * 3600 * 1000)]);
    });

    it('reads a big change in batches sized to take ~4 ms each, with the thread free between them', async () => {
      const limits: number[] = [];
      const recorded = new Proxy(spy.store, {
        get(target, property, receiver) {
          if (property === 'changesSince')
            return (after: number, limit: number) => {
              limits.push(limit);
              return target.changesSince(after, limit);
            };
          return Reflect.get(target, property, receiver) as unknown;
        },
      });
      // A follower whose work is 1 ms per 100 records: 10 ms for a batch of 1,000.
      const applied: number[] = [];
      const follower = {
        load: async () => {},
        apply: async (changes: readonly unknown[]) => {
          applied.push(changes.length);
          const until = performance.now() + changes.length / 100;
          while (performance.now() < until);
        },
      };
      spy = { ...spy, store: recorded };
      await startDirectory({ followers: [follower] });
      // 2,500 clients with a grant each: 2,500 records (a client's record covers its grants).
      await cli.transaction(async (tx) => {
        for (let i = 0; i < 2500; i++)
          await tx.createClient({
            id: `bulk-${i}`,
            name: `bulk ${i}`,
            secretDigest: digestSecret(SECRET_1),
            tokenTtl: null,
            audiences: [A],
          });
      });
      limits.length = 0;
      let ticks = 0;
      const ticker = setInterval(() => ticks++, 0);
      try {
        await directory.poll();
      } finally {
        clearInterval(ticker);
      }
      expect(applied.reduce((a, b) => a + b, 0)).toBe(2500);
      // The first batch as large as allowed, the next ones ~4 ms of work (~400 records), never under 50.
      expect(limits[0]).toBe(1000);
      expect(limits.length).toBeGreaterThanOrEqual(4);
      for (const limit of limits.slice(1)) {
        expect(limit).toBeLessThanOrEqual(500);
        expect(limit).toBeGreaterThanOrEqual(50);
      }
      // Timers ran between the batches (a timer of 1 ms, due at most turns of the loop).
      expect(ticks).toBeGreaterThanOrEqual(Math.floor(limits.length / 2));
      expect((await lookup('bulk-2499')).client?.id).toBe('bulk-2499');
    });

    it('starts from the current end of the feed, not from its beginning', async () => {
      await createClient('svc', [A]);
      await cli.changeSigningKeys(() => ({
        insert: {
          kid: 'old',
          alg: 'ES256',
          publicJwk: '{}',
          privateJwkSealed: 'sealed',
          createdAt: '2030-01-01T00:00:00.000Z',
          activatesAt: '2030-01-01T00:00:00.000Z',
          retiredAt: null,
        },
      }));
      await startDirectory();
      await directory.poll();
      expect(onKeysChanged).not.toHaveBeenCalled();
      expect(onAudiencesChanged).toHaveBeenCalledTimes(1); // at start only
    });
  });
});
