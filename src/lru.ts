import { LRUCache } from 'lru-cache';

type Options<K extends NonNullable<unknown>, V extends NonNullable<unknown>> = Omit<
  LRUCache.Options<K, V, unknown>,
  'max' | 'maxSize' | 'sizeCalculation'
>;

/**
 * An LRU cache of at most `max` entries whose memory grows with what it holds. lru-cache given `max` allocates
 * its arrays for `max` entries up front (its key, value, order and TTL arrays: ~30 bytes an entry); a server
 * holds eight such caches of 10 000 to 100 000 entries (the clients, failed attempts and their blocks, login
 * limits, JWKS URLs), nearly all empty nearly always, and that was 13 MB resident before the first request.
 * Bounded instead by a size of 1 an entry (maxSize), it allocates as it fills: the same bound and eviction order.
 */
export function boundedLru<K extends NonNullable<unknown>, V extends NonNullable<unknown>>(
  max: number,
  options: Options<K, V> = {},
): LRUCache<K, V> {
  return new LRUCache<K, V>({ ...options, maxSize: max, sizeCalculation: () => 1 });
}
