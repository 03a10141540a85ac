import { createHmac, timingSafeEqual } from 'node:crypto';
import { problem } from '../problem.js';

/**
 * Opaque list cursors (`next`, `?after=`): the position after the last item of a page (a keyset, so pages
 * stay stable under concurrent writes), and which list it belongs to, signed with an HMAC under a key every
 * instance derives from the master key. A cursor the server did not issue, or of another list, is a 400.
 */
export class Cursors {
  constructor(private readonly key: Uint8Array) {}

  private mac(body: string): Buffer {
    return createHmac('sha256', this.key).update(body).digest().subarray(0, 16);
  }

  issue(list: string, position: unknown): string {
    const body = Buffer.from(JSON.stringify([list, position])).toString('base64url');
    return `${body}.${this.mac(body).toString('base64url')}`;
  }

  /** The position a cursor of `list` names; refuses anything else. */
  read<T>(list: string, cursor: string, check: (position: unknown) => position is T): T {
    const [body, mac, extra] = cursor.split('.');
    const presented = Buffer.from(mac ?? '', 'base64url');
    const expected = body ? this.mac(body) : undefined;
    if (
      extra === undefined &&
      expected &&
      presented.length === expected.length &&
      timingSafeEqual(presented, expected)
    ) {
      const [name, position] = JSON.parse(Buffer.from(body!, 'base64url').toString('utf8')) as [
        string,
        unknown,
      ];
      if (name === list && check(position)) return position;
    }
    throw problem(400, 'invalid_cursor', 'the cursor (after) is not one this API issued for this list', {
      errors: [{ pointer: '/after', detail: 'is not a cursor of this list' }],
    });
  }
}

export const isString = (v: unknown): v is string => typeof v === 'string';

/** The key of an item listed oldest first (a client's secrets, its federated credentials): its creation, then id. */
export const byCreation = (item: { createdAt: string; id: string }): string => `${item.createdAt} ${item.id}`;

/** The items in byCreation's order, the order pageOfList pages them in. */
export const oldestFirst = <T extends { createdAt: string; id: string }>(items: readonly T[]): T[] =>
  [...items].sort((a, b) => (byCreation(a) < byCreation(b) ? -1 : byCreation(a) > byCreation(b) ? 1 : 0));

/** A page of `items` (sorted by `keyOf`) after `after`: at most `limit`, and the cursor of the next if any. */
function pageOf<T, K extends string>(
  sorted: readonly T[],
  keyOf: (item: T) => K,
  after: K | undefined,
  limit: number,
): { items: T[]; last: K | undefined } {
  const start = after === undefined ? 0 : sorted.findIndex((item) => keyOf(item) > after);
  const items = start < 0 ? [] : sorted.slice(start, start + limit);
  const more = start >= 0 && start + limit < sorted.length;
  return { items, last: more ? keyOf(items[items.length - 1]!) : undefined };
}

/** A list's query: at most `limit` items (50 when it is left out) after the cursor `after`. */
interface ListQuery {
  limit?: number;
  after?: string;
}

/**
 * A page of a list read whole (there are few of them: audiences, operators, signing keys, a client's grants),
 * sorted by `keyOf`. The cursor is read first, so a cursor of another list is a 400 whatever the list holds.
 */
export async function pageOfList<T, V>(
  cursors: Cursors,
  list: string,
  query: ListQuery,
  load: () => Promise<readonly T[]>,
  keyOf: (item: T) => string,
  view: (item: T) => V,
): Promise<{ items: V[]; next: string | null }> {
  const { limit = 50, after } = query;
  const from = after === undefined ? undefined : cursors.read(list, after, isString);
  const page = pageOf(await load(), keyOf, from, limit);
  return {
    items: page.items.map(view),
    next: page.last === undefined ? null : cursors.issue(list, page.last),
  };
}

/**
 * A page of a list the store pages (clients, the audit trail): `fetched` is one item longer than `limit` when
 * there is a next page, whose cursor is the position of this page's last item.
 */
export function pageOfFetched<T, V>(
  cursors: Cursors,
  list: string,
  fetched: readonly T[],
  limit: number,
  positionOf: (last: T) => unknown,
  view: (item: T) => V,
): { items: V[]; next: string | null } {
  const items = fetched.slice(0, limit);
  const last = items[items.length - 1];
  return {
    items: items.map(view),
    next: fetched.length > limit && last !== undefined ? cursors.issue(list, positionOf(last)) : null,
  };
}
