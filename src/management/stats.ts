import type { TokenCount } from '../store/types.js';
import { nowOf, type ManagementContext } from './context.js';
import { ManagementError, storeCall } from './errors.js';

/** The most minutes one answer covers: a day. */
const MAX_STATS_MINUTES = 1440;

export interface Stats {
  clients: number;
  audiences: number;
  /** The first minute covered (RFC 3339). */
  from: string;
  /** The end of the last minute covered, the current one (exclusive). */
  until: string;
  /** Every minute from `from`, oldest first, zeros included: a chart draws it as it is. */
  tokens: TokenCount[];
}

/**
 * What the console's overview shows: how many clients and audiences there are, and the token endpoint's
 * outcomes per minute over the last `minutes` minutes up to the current one (counted by the audit trail's
 * writer as its batches reach the store, so a second or so behind, the same on every instance).
 */
export async function overview(ctx: ManagementContext, minutes = 60): Promise<Stats> {
  if (!Number.isInteger(minutes) || minutes < 1 || minutes > MAX_STATS_MINUTES)
    throw new ManagementError(
      'invalid_field',
      `minutes must be a whole number from 1 to ${MAX_STATS_MINUTES}`,
      'minutes',
    );
  const now = nowOf(ctx);
  const until = now - (now % 60_000) + 60_000;
  const from = until - minutes * 60_000;
  const [clients, audiences, counted] = await storeCall(() =>
    Promise.all([ctx.store.countClients(), ctx.store.listAudiences(), ctx.store.tokenCounts(from, until)]),
  );
  const byMinute = new Map(counted.map((c) => [c.minute, c]));
  const tokens: TokenCount[] = [];
  for (let at = from; at < until; at += 60_000) {
    const minute = new Date(at).toISOString();
    tokens.push(byMinute.get(minute) ?? { minute, issued: 0, refused: 0 });
  }
  return {
    clients,
    audiences: audiences.length,
    from: new Date(from).toISOString(),
    until: new Date(until).toISOString(),
    tokens,
  };
}
