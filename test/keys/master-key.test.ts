import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { thrownBy } from '../helpers/assert.js';
import { ConfigError } from '../../src/config/index.js';
import { MASTER_KEY_FILE, parseMasterKey, resolveMasterKey } from '../../src/keys/master-key.js';

const BYTES = Buffer.from(Array.from({ length: 32 }, (_, i) => i * 7 + 3));
/** The id is derived from the key: the first 16 base64url characters of SHA-256("tessera master key id\0" ‖ key). */
const expectedId = (key: Buffer) =>
  createHash('sha256').update('tessera master key id\0').update(key).digest('base64url').slice(0, 16);

const REJECTED =
  'TESSERA_MASTER_KEY must be 32 random bytes as 64 hex digits or base64 (openssl rand -base64 32)';

function configError(fn: () => unknown): ConfigError {
  return thrownBy(fn, ConfigError);
}

describe('parseMasterKey', () => {
  it.each([
    ['hex, lower case', BYTES.toString('hex')],
    ['hex, upper case', BYTES.toString('hex').toUpperCase()],
    ['base64 with padding (openssl rand -base64 32)', BYTES.toString('base64')],
    ['base64 without padding', BYTES.toString('base64').replace(/=$/, '')],
    ['base64url', BYTES.toString('base64url')],
    ['base64url with padding', BYTES.toString('base64url') + '='],
    ['surrounded by whitespace and a newline', `  ${BYTES.toString('base64')}\n`],
  ])('accepts %s', (_, text) => {
    const master = parseMasterKey(text);
    expect(Buffer.from(master.key)).toEqual(BYTES);
    expect(master.key).toBeInstanceOf(Uint8Array);
    expect(master.id).toBe(expectedId(BYTES));
  });

  it('decodes base64 with + and / as well as base64url with - and _', () => {
    // 0xfb 0xff ... encodes to "+/" in base64 and "-_" in base64url.
    const bytes = Buffer.alloc(32, 0xfb);
    bytes[1] = 0xff;
    expect(bytes.toString('base64')).toMatch(/[+/]/);
    expect(Buffer.from(parseMasterKey(bytes.toString('base64')).key)).toEqual(bytes);
    expect(Buffer.from(parseMasterKey(bytes.toString('base64url')).key)).toEqual(bytes);
  });

  it('gives different keys different ids, and the same key the same id whatever its encoding', () => {
    const other = randomBytes(32);
    expect(parseMasterKey(other.toString('hex')).id).toBe(parseMasterKey(other.toString('base64')).id);
    expect(parseMasterKey(other.toString('hex')).id).not.toBe(parseMasterKey(BYTES.toString('hex')).id);
    expect(parseMasterKey(other.toString('hex')).id).toMatch(/^[A-Za-z0-9_-]{16}$/);
  });

  it.each([
    ['empty', ''],
    ['31 bytes of hex', randomBytes(31).toString('hex')],
    ['33 bytes of hex', randomBytes(33).toString('hex')],
    ['31 bytes of base64', randomBytes(31).toString('base64')],
    ['33 bytes of base64', randomBytes(33).toString('base64')],
    ['16 bytes of base64', randomBytes(16).toString('base64')],
    ['64 bytes of base64', randomBytes(64).toString('base64')],
    ['a passphrase', 'correct horse battery staple'],
    ['hex with a non-hex digit', 'g' + BYTES.toString('hex').slice(1)],
    ['base64 with a character outside both alphabets', '*' + BYTES.toString('base64').slice(1)],
    [
      'base64 with a space inside',
      BYTES.toString('base64').slice(0, 20) + ' ' + BYTES.toString('base64').slice(20),
    ],
  ])('rejects %s with a ConfigError', (_, text) => {
    expect(configError(() => parseMasterKey(text)).message).toBe(REJECTED);
  });

  it('names the source in the error', () => {
    expect(configError(() => parseMasterKey('short', '/data/master.key')).message).toBe(
      '/data/master.key must be 32 random bytes as 64 hex digits or base64 (openssl rand -base64 32)',
    );
  });

  it('does not put the key in the error message', () => {
    const wrong = randomBytes(31).toString('hex');
    expect(configError(() => parseMasterKey(wrong)).message).not.toContain(wrong);
  });
});

describe('resolveMasterKey', () => {
  let dir: string;
  let warnings: string[];
  const warn = (message: string) => void warnings.push(message);

  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'tessera-master-'));
    warnings = [];
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('uses TESSERA_MASTER_KEY when set, writes no file and warns of nothing, in production or not', () => {
    for (const production of [false, true]) {
      const dataDir = path.join(dir, `data-${production}`);
      const master = resolveMasterKey({ masterKey: BYTES.toString('base64'), dataDir, production }, warn);
      expect(Buffer.from(master.key)).toEqual(BYTES);
      expect(master.id).toBe(expectedId(BYTES));
      expect(existsSync(path.join(dataDir, MASTER_KEY_FILE))).toBe(false);
    }
    expect(warnings).toEqual([]);
  });

  it('prefers TESSERA_MASTER_KEY over an existing key file', () => {
    writeFileSync(path.join(dir, MASTER_KEY_FILE), randomBytes(32).toString('base64url') + '\n', {
      mode: 0o600,
    });
    const master = resolveMasterKey(
      { masterKey: BYTES.toString('hex'), dataDir: dir, production: false },
      warn,
    );
    expect(Buffer.from(master.key)).toEqual(BYTES);
    expect(warnings).toEqual([]);
  });

  it('rejects a malformed TESSERA_MASTER_KEY rather than falling back to a file', () => {
    expect(
      configError(() => resolveMasterKey({ masterKey: 'nope', dataDir: dir, production: false }, warn))
        .message,
    ).toBe(REJECTED);
    expect(existsSync(path.join(dir, MASTER_KEY_FILE))).toBe(false);
  });

  it('refuses to start in production without TESSERA_MASTER_KEY, and writes nothing', () => {
    const dataDir = path.join(dir, 'data');
    const error = configError(() =>
      resolveMasterKey({ masterKey: undefined, dataDir, production: true }, warn),
    );
    expect(error.message).toBe(
      'TESSERA_MASTER_KEY is required when NODE_ENV=production (openssl rand -base64 32)',
    );
    expect(existsSync(dataDir)).toBe(false);
    expect(warnings).toEqual([]);
  });

  it('refuses to start on PostgreSQL without TESSERA_MASTER_KEY, in production or not, and writes nothing', () => {
    for (const production of [false, true]) {
      const dataDir = path.join(dir, `pg-${production}`);
      const config = { masterKey: undefined, dataDir, production, databaseUrl: 'postgres://db/tessera' };
      expect(configError(() => resolveMasterKey(config, warn)).message).toBe(
        'TESSERA_MASTER_KEY is required with PostgreSQL: every instance needs the same one',
      );
      expect(existsSync(path.join(dataDir, MASTER_KEY_FILE))).toBe(false);
    }
    expect(warnings).toEqual([]);
  });

  it('refuses in production even when a generated key file exists', () => {
    resolveMasterKey({ masterKey: undefined, dataDir: dir, production: false }, warn);
    configError(() => resolveMasterKey({ masterKey: undefined, dataDir: dir, production: true }, warn));
  });

  it('outside production, generates <dataDir>/master.key (mode 0600, data dir 0700) once and warns', () => {
    const dataDir = path.join(dir, 'data');
    const file = path.join(dataDir, MASTER_KEY_FILE);
    const master = resolveMasterKey({ masterKey: undefined, dataDir, production: false }, warn);

    expect(statSync(dataDir).mode & 0o777).toBe(0o700);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const text = readFileSync(file, 'utf8');
    expect(text).toMatch(/^[A-Za-z0-9_-]{43}\n$/);
    expect(Buffer.from(master.key)).toEqual(Buffer.from(text.trim(), 'base64url'));
    expect(master.id).toBe(expectedId(Buffer.from(master.key)));
    expect(warnings).toEqual([
      `TESSERA_MASTER_KEY is not set: generated ${file} (mode 0600); set TESSERA_MASTER_KEY in production`,
    ]);
  });

  it('reuses the generated key the second time, and still warns', () => {
    const first = resolveMasterKey({ masterKey: undefined, dataDir: dir, production: false }, warn);
    const file = path.join(dir, MASTER_KEY_FILE);
    const text = readFileSync(file, 'utf8');
    warnings = [];
    const second = resolveMasterKey({ masterKey: undefined, dataDir: dir, production: false }, warn);
    expect(second).toEqual(first);
    expect(readFileSync(file, 'utf8')).toBe(text);
    expect(warnings).toEqual([
      `TESSERA_MASTER_KEY is not set: private signing keys are sealed with the key in ${file}`,
    ]);
  });

  it('warns when the key file is readable by other users', () => {
    resolveMasterKey({ masterKey: undefined, dataDir: dir, production: false }, warn);
    const file = path.join(dir, MASTER_KEY_FILE);
    chmodSync(file, 0o644);
    warnings = [];
    resolveMasterKey({ masterKey: undefined, dataDir: dir, production: false }, warn);
    expect(warnings).toEqual([
      `${file} is readable by other users; chmod 600 it`,
      `TESSERA_MASTER_KEY is not set: private signing keys are sealed with the key in ${file}`,
    ]);
  });

  it('refuses a corrupt key file instead of replacing it', () => {
    const file = path.join(dir, MASTER_KEY_FILE);
    writeFileSync(file, 'not a key\n', { mode: 0o600 });
    expect(
      configError(() => resolveMasterKey({ masterKey: undefined, dataDir: dir, production: false }, warn))
        .message,
    ).toBe(`${file} must be 32 random bytes as 64 hex digits or base64 (openssl rand -base64 32)`);
    expect(readFileSync(file, 'utf8')).toBe('not a key\n');
  });

  it('accepts a key file an operator wrote in hex', () => {
    writeFileSync(path.join(dir, MASTER_KEY_FILE), BYTES.toString('hex') + '\n', { mode: 0o600 });
    const master = resolveMasterKey({ masterKey: undefined, dataDir: dir, production: false }, warn);
    expect(Buffer.from(master.key)).toEqual(BYTES);
  });
});
