import { createHash, hkdfSync, randomBytes } from 'node:crypto';
import { linkSync, mkdirSync, readFileSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ConfigError, isPostgresUrl, type Config } from '../config/index.js';

/** The key that seals private signing keys at rest (AES-256-GCM), and a short id that names it. */
export interface MasterKey {
  key: Uint8Array;
  /** Derived from the key; recorded beside each sealed key so a wrong master key is recognised, not guessed at. */
  id: string;
}

export const MASTER_KEY_FILE = 'master.key';

/** A key of its own for each use (HKDF-SHA256 of the master key, `use` as the info): the same on every instance. */
export const deriveKey = (master: MasterKey, use: string): Uint8Array =>
  new Uint8Array(hkdfSync('sha256', master.key, '', use, 32));

/** Accepts 32 bytes written as 64 hex digits, base64 or base64url (`openssl rand -base64 32`). */
export function parseMasterKey(raw: string, source = 'TESSERA_MASTER_KEY'): MasterKey {
  const text = raw.trim();
  let key: Buffer | undefined;
  if (/^[0-9a-fA-F]{64}$/.test(text)) key = Buffer.from(text, 'hex');
  else if (/^[A-Za-z0-9+/_-]{43}=?$/.test(text)) key = Buffer.from(text.replace(/=$/, ''), 'base64url');
  if (!key || key.length !== 32) {
    throw new ConfigError(
      `${source} must be 32 random bytes as 64 hex digits or base64 (openssl rand -base64 32)`,
    );
  }
  const id = createHash('sha256')
    .update('tessera master key id\0')
    .update(key)
    .digest('base64url')
    .slice(0, 16);
  return { key: new Uint8Array(key), id };
}

/**
 * TESSERA_MASTER_KEY when set. Otherwise, outside production only, a key generated once into the data
 * directory with mode 0600; the caller is told so that it can warn. In production a missing key is an error:
 * a key file beside the database it protects protects little.
 */
export function resolveMasterKey(
  config: Pick<Config, 'masterKey' | 'dataDir' | 'production'> & Partial<Pick<Config, 'databaseUrl'>>,
  warn: (message: string) => void,
): MasterKey {
  if (config.masterKey !== undefined) return parseMasterKey(config.masterKey);
  if (isPostgresUrl(config.databaseUrl)) {
    // Every instance must open the keys the others sealed: one key, given to all, not one file each.
    throw new ConfigError(
      'TESSERA_MASTER_KEY is required with PostgreSQL: every instance needs the same one',
    );
  }
  if (config.production) {
    throw new ConfigError(
      'TESSERA_MASTER_KEY is required when NODE_ENV=production (openssl rand -base64 32)',
    );
  }
  const file = path.join(config.dataDir, MASTER_KEY_FILE);
  mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
  try {
    const master = parseMasterKey(readFileSync(file, 'utf8'), file);
    if ((statSync(file).mode & 0o077) !== 0) warn(`${file} is readable by other users; chmod 600 it`);
    warn(`TESSERA_MASTER_KEY is not set: private signing keys are sealed with the key in ${file}`);
    return master;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  // Written whole to a private temporary file, then linked into place: a process starting at the same moment
  // sees either no key file or a complete one, never an empty one; if another got there first, theirs wins.
  const temporary = `${file}.${process.pid}.${randomBytes(6).toString('hex')}`;
  writeFileSync(temporary, randomBytes(32).toString('base64url') + '\n', { mode: 0o600, flag: 'wx' });
  try {
    linkSync(temporary, file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  } finally {
    unlinkSync(temporary);
  }
  warn(`TESSERA_MASTER_KEY is not set: generated ${file} (mode 0600); set TESSERA_MASTER_KEY in production`);
  return parseMasterKey(readFileSync(file, 'utf8'), file);
}
