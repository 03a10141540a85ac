import { describe, expect, it } from 'vitest';
import {
  hashPassword,
  PasswordWorkBusy,
  validatePassword,
  verifyPassword,
} from '../../src/management/passwords.js';

describe('operators’ passwords', () => {
  it('are stored as scrypt hashes with a salt of their own, and verify only with the same password', async () => {
    const hash = await hashPassword('correct horse battery staple');
    expect(hash).toMatch(/^scrypt\$15\$8\$3\$[A-Za-z0-9_-]{22}\$[A-Za-z0-9_-]{43}$/);
    expect(hash).not.toContain('correct');
    expect(await hashPassword('correct horse battery staple')).not.toBe(hash);
    expect(await verifyPassword('correct horse battery staple', hash)).toBe(true);
    expect(await verifyPassword('correct horse battery stapl', hash)).toBe(false);
    expect(await verifyPassword('', hash)).toBe(false);
    // No password set (not enrolled, or an unknown email): false, after the same work.
    expect(await verifyPassword('correct horse battery staple', null)).toBe(false);
    // Unicode compositions are one password, however the keyboard sent them (NFC).
    const composed = await hashPassword('café au lait, très bien');
    expect(await verifyPassword('cafe\u0301 au lait, tre\u0300s bien', composed)).toBe(true);
  });

  it('are 12 to 1024 characters, counted as people count them', () => {
    expect(() => validatePassword('eleven chars')).not.toThrow();
    expect(() => validatePassword('elevenchars')).toThrow('password must have at least 12 characters');
    // Twelve characters of which some take two UTF-16 units: enough.
    expect(() => validatePassword('🔑🔑🔑🔑🔑🔑🔑🔑🔑🔑🔑🔑')).not.toThrow();
    expect(() => validatePassword('🔑🔑🔑🔑🔑🔑🔑🔑🔑🔑🔑')).toThrow('at least 12');
    expect(() => validatePassword('x'.repeat(1025))).toThrow('password must have at most 1024 characters');
    expect(() => validatePassword(12 as unknown as string)).toThrow('password must be a string');
  });

  it('are hashed one at a time; past eight waiting, the next is refused at once (busy), the others complete', async () => {
    const work = Array.from({ length: 9 }, (_, i) => hashPassword(`password number ${i}`));
    await expect(hashPassword('one too many, refused')).rejects.toBeInstanceOf(PasswordWorkBusy);
    const hashes = await Promise.all(work);
    expect(new Set(hashes).size).toBe(9);
    // Once they are done, hashing works again.
    expect(await verifyPassword('password number 3', hashes[3]!)).toBe(true);
  });
});
