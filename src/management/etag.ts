import { createHash } from 'node:crypto';

/**
 * A strong entity tag of a resource as the API shows it (RFC 9110 §8.8.3): any change of what a reader sees
 * changes it, and two readers of the same version get the same tag on any instance.
 */
export const etagOf = (view: object): string =>
  `"${createHash('sha256').update(JSON.stringify(view)).digest('base64url').slice(0, 27)}"`;

/**
 * Whether an If-Match header allows a change of a resource with this tag (RFC 9110 §13.1.1): `*`, or a list of
 * entity tags one of which is this one by strong comparison (a weak tag never matches).
 */
export function ifMatchAllows(header: string, etag: string): boolean {
  if (header.trim() === '*') return true;
  return header
    .split(',')
    .map((t) => t.trim())
    .some((t) => t === etag);
}
