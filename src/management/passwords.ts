import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import { TesseraError } from '../domain/errors.js';
import { ValidationError } from '../domain/validate.js';

/**
 * Operators' passwords (docs/management.md, "Operators"): at least 12 characters, stored only as a scrypt hash
 * (RFC 7914) with a random salt, written `scrypt$<log2 N>$<r>$<p>$<salt>$<hash>` (base64url), so that the
 * cost can be raised later and old hashes still verify. scrypt runs in libuv's thread pool, never on the event
 * loop, one hash at a time; one takes about 150 ms of one core and 32 MiB.
 */
const MIN_PASSWORD_LENGTH = 12;
/** A bound on what is hashed: a pass phrase, not a document. */
const MAX_PASSWORD_LENGTH = 1024;

/** OWASP's scrypt settings of the same strength as N = 2^17, r = 8, p = 1, in a quarter of the memory. */
const COST = { log2N: 15, r: 8, p: 3 };
const KEY_LENGTH = 32;
const SALT_LENGTH = 16;

/** Too many password hashes are waiting: the caller is asked to try again in a moment. */
export class PasswordWorkBusy extends TesseraError {
  override name = 'PasswordWorkBusy';

  /** The management error it is answered as (errors.ts): 429 with Retry-After, or the CLI's exit code. */
  override get code(): string {
    return 'login_throttled';
  }
}

/**
 * One hash at a time, and at most this many waiting: on a small machine, logins (wanted or not) take a core at
 * most, never the one the token endpoint runs on as well; a flood of them is refused, not queued without end.
 */
const MAX_WAITING = 8;
let running = false;
const waiting: (() => void)[] = [];

async function oneAtATime<T>(work: () => Promise<T>): Promise<T> {
  if (running) {
    if (waiting.length >= MAX_WAITING) throw new PasswordWorkBusy('too many logins at once');
    await new Promise<void>((resolve) => waiting.push(resolve));
  }
  running = true;
  try {
    return await work();
  } finally {
    const next = waiting.shift();
    if (next) next();
    else running = false;
  }
}

function derive(password: string, salt: Buffer, log2N: number, r: number, p: number): Promise<Buffer> {
  const N = 2 ** log2N;
  const options: ScryptOptions = { N, r, p, maxmem: 2 * 128 * N * r * p };
  return oneAtATime(
    () =>
      new Promise((resolve, reject) =>
        scrypt(password.normalize('NFC'), salt, KEY_LENGTH, options, (error, key) =>
          error ? reject(error) : resolve(key),
        ),
      ),
  );
}

/** Refuses a password that is too short or too long (lengths in characters, as people count them). */
export function validatePassword(password: unknown): string {
  if (typeof password !== 'string') throw new ValidationError('password must be a string');
  const length = [...password].length;
  if (length < MIN_PASSWORD_LENGTH)
    throw new ValidationError(`password must have at least ${MIN_PASSWORD_LENGTH} characters`);
  if (length > MAX_PASSWORD_LENGTH)
    throw new ValidationError(`password must have at most ${MAX_PASSWORD_LENGTH} characters`);
  return password;
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(SALT_LENGTH);
  const key = await derive(password, salt, COST.log2N, COST.r, COST.p);
  return ['scrypt', COST.log2N, COST.r, COST.p, salt.toString('base64url'), key.toString('base64url')].join(
    '$',
  );
}

/**
 * A hash of a password nobody has, with the current cost: checked when an email has no password (unknown, or
 * not enrolled), so that such a login takes as long as a wrong password for a real operator.
 */
const NOBODY = `scrypt$${COST.log2N}$${COST.r}$${COST.p}$${randomBytes(SALT_LENGTH).toString('base64url')}$${randomBytes(KEY_LENGTH).toString('base64url')}`;

/**
 * Whether `password` is the one `hash` was made of; compared in constant time. A null hash (no password set)
 * costs the same as a wrong password, and is false.
 */
export async function verifyPassword(password: string, hash: string | null): Promise<boolean> {
  const parts = (hash ?? NOBODY).split('$');
  const [scheme, log2N, r, p, salt, key] = parts;
  if (parts.length !== 6 || scheme !== 'scrypt') throw new Error('not a password hash of this server');
  const expected = Buffer.from(key!, 'base64url');
  const derived = await derive(
    password,
    Buffer.from(salt!, 'base64url'),
    Number(log2N),
    Number(r),
    Number(p),
  );
  return hash !== null && derived.length === expected.length && timingSafeEqual(derived, expected);
}
