import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { kidOperands } from '../src/cli/index.js';
import { tessera, tesseraEnv, tesseraOk } from './helpers/process.js';
import { tempDir } from './helpers/server.js';
import { pollUntil } from './helpers/wait.js';

/** `tessera keys list|rotate|retire` against a real store, as an operator runs them. */

interface KeyRow {
  kid: string;
  alg: string;
  status: string;
  created_at: string;
  activates_at: string;
  retires_at: string | null;
}

describe('tessera keys', () => {
  let dir: string;
  let env: NodeJS.ProcessEnv;
  const keys = async () => (await tesseraOk(env, 'keys', 'list', '--json')).json as KeyRow[];
  const of = (list: KeyRow[], alg: string) => list.filter((k) => k.alg === alg);
  /** The first keys were scheduled 2 s ahead: wait (bounded) until they sign, however busy the machine. */
  const untilAllActive = async () => {
    const active = (list: KeyRow[]) => list.every((k) => k.status === 'active');
    if (!active((await pollUntil(keys, active, 15_000, 250)).value))
      throw new Error('the first keys did not become active');
  };

  beforeEach(async () => {
    dir = tempDir();
    env = tesseraEnv({ TESSERA_DATA_DIR: dir, TESSERA_KEY_PUBLISH_AHEAD: '1h' });
    await tesseraOk(env, 'migrate');
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('rotate on a store without keys makes a first key that signs at once, as a server start does', async () => {
    const out = (await tesseraOk(env, 'keys', 'rotate', '--alg', 'ES256', '--json')).json;
    expect(out).toEqual([
      {
        alg: 'ES256',
        kid: expect.any(String),
        activates_at: expect.any(String),
        already_scheduled: false,
        retiring: [],
      },
    ]);
    const list = await keys();
    expect(list).toEqual([{ ...list[0], alg: 'ES256', status: 'active', retires_at: null }]);
    // Nothing signs for ES256 to hand over from: a key published an hour ahead would leave it without one.
    expect(list[0]!.activates_at).toBe(list[0]!.created_at);
  });

  it('rotate schedules one successor per algorithm, once; the current key retires when it activates', async () => {
    // A current key that signs now, as the server makes at first start (and rotate on an empty store).
    await tesseraOk(env, 'keys', 'rotate', '--json');
    await untilAllActive();
    const before = await keys();
    expect(before.map((k) => k.status)).toEqual(['active', 'active', 'active', 'active']);

    const first = (await tesseraOk(env, 'keys', 'rotate', '--json')).json as {
      alg: string;
      kid: string;
      retiring: string[];
    }[];
    expect(first.map((r) => r.alg)).toEqual(['ES256', 'RS256', 'PS256', 'EdDSA']);
    for (const r of first) expect(r.retiring).toEqual([of(before, r.alg)[0]!.kid]);
    const again = (await tesseraOk(env, 'keys', 'rotate', '--alg', 'RS256', '--json')).json;
    expect(again).toEqual([
      {
        alg: 'RS256',
        kid: first.find((r) => r.alg === 'RS256')!.kid,
        activates_at: expect.any(String),
        already_scheduled: true,
        retiring: [],
      },
    ]);
    const after = await keys();
    for (const alg of ['ES256', 'RS256', 'PS256', 'EdDSA']) {
      const [current, next] = of(after, alg) as [KeyRow, KeyRow];
      expect([current.status, next.status]).toEqual(['active', 'next']);
      expect(current.retires_at).toBe(next.activates_at);
    }
    const text = await tesseraOk(env, 'keys', 'rotate', '--alg', 'EdDSA');
    expect(text.stdout).toMatch(/^EdDSA: a next key is already scheduled \(.+, signs from .+\)\.\n$/);
  }, 60_000);

  it('retire: the signing key stops now, the scheduled next key takes over; retiring the next key cancels it', async () => {
    await tesseraOk({ ...env, TESSERA_KEY_PUBLISH_AHEAD: '2s' }, 'keys', 'rotate', '--alg', 'ES256');
    await untilAllActive();
    const [current] = await keys();
    const [scheduled] = (await tesseraOk(env, 'keys', 'rotate', '--alg', 'ES256', '--json')).json;

    // Withdraw the scheduled key: the current one keeps signing, with no retirement planned. Under --json, the
    // admin API's document of the retirement (POST /keys/{kid}/retire).
    const withdrawn = (await tesseraOk(env, 'keys', 'retire', scheduled.kid, '--json')).json;
    let list = await keys();
    const es256 = list.filter((k) => k.alg === 'ES256');
    expect(withdrawn).toEqual({ retired: scheduled.kid, signing: current!.kid, keys: es256 });
    expect(list.map((k) => [k.kid, k.status, k.retires_at === null])).toEqual([
      [current!.kid, 'active', true],
      [scheduled.kid, 'retired', false],
    ]);

    // Retire the signing key with nothing scheduled: a new key signs at once.
    const retired = await tesseraOk(env, 'keys', 'retire', current!.kid);
    list = await keys();
    const replacement = list.find((k) => k.status === 'active')!;
    expect(retired.stdout).toBe(
      `Key ${current!.kid} retired; ES256 tokens are now signed by ${replacement.kid}.\n`,
    );
    expect(list.find((k) => k.kid === current!.kid)?.status).toBe('retired');
  }, 60_000);

  it('refuses to add a key under another master key than the stored keys were sealed with', async () => {
    await tesseraOk(env, 'keys', 'rotate', '--alg', 'ES256');
    const other = { ...env, TESSERA_MASTER_KEY: randomBytes(32).toString('base64') };
    const result = await tessera(other, 'keys', 'rotate', '--alg', 'ES256', '--json');
    expect(result.code).toBe(1);
    expect(JSON.parse(result.stderr)).toEqual({
      error: 'master_key_mismatch',
      message: expect.stringMatching(/^signing key .+ was sealed under another master key/),
    });
    expect(await keys()).toHaveLength(1);
  });

  it('retire takes a kid that starts with "-" (one thumbprint in 64 does) as the kid, not as an option', async () => {
    for (const kid of [`-h${'A'.repeat(41)}`, `--${'x'.repeat(41)}`]) {
      for (const args of [
        ['keys', 'retire', kid, '--json'],
        ['--json', 'keys', 'retire', kid],
        ['keys', 'retire', '--json', '--', kid],
      ]) {
        const result = await tessera(env, ...args);
        expect([args, result.code, JSON.parse(result.stderr)]).toEqual([
          args,
          1,
          { error: 'key_not_found', message: `signing key ${kid} does not exist` },
        ]);
      }
    }
  }, 60_000);

  it('kidOperands moves only a key-id-shaped argument of keys retire behind --', () => {
    const kid = `-${'a'.repeat(42)}`;
    const node = ['node', 'tessera'];
    expect(kidOperands([...node, 'keys', 'retire', kid, '--json'])).toEqual([
      ...node,
      'keys',
      'retire',
      '--json',
      '--',
      kid,
    ]);
    // Left alone: a kid without a dash, an explicit --, other commands, a shorter option-like word.
    for (const argv of [
      [...node, 'keys', 'retire', 'a'.repeat(43)],
      [...node, 'keys', 'retire', '--', kid],
      [...node, 'client', 'show', kid],
      [...node, 'keys', 'retire', '--jsno'],
    ]) {
      expect(kidOperands(argv)).toEqual(argv);
    }
  });

  it('retire of an unknown kid: exit 1, key_not_found', async () => {
    const result = await tessera(env, 'keys', 'retire', 'nope', '--json');
    expect(result.code).toBe(1);
    expect(JSON.parse(result.stderr)).toEqual({
      error: 'key_not_found',
      message: 'signing key nope does not exist',
    });
  });
});
