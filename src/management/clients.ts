import { digestSecret, generateClientId, generateSecret } from '../domain/secrets.js';
import {
  validateAudienceUrl,
  validateClientId,
  validateName,
  validateQuota,
  validateTokenTtl,
} from '../domain/validate.js';
import type { Client } from '../store/types.js';
import { changeAudit, diff, type ManagementContext } from './context.js';
import { field, ManagementError, storeCall } from './errors.js';

export interface ClientInput {
  name: string;
  /** Chosen by the operator; generated when left out. */
  id?: string;
  tokenTtl?: number | null;
  quotaPerMinute?: number | null;
  quotaPerDay?: number | null;
  /** Audience URLs granted at once. */
  grants?: string[];
}

/** A client and its secret, which exists in clear only in this answer. */
export interface WithSecret {
  client: Client;
  secret: string;
}

const quota = (name: string, value: number | null | undefined): number | null =>
  value === undefined ? null : field(name, () => validateQuota(value));

/** Creates a client with a new secret (stored as its digest only). */
export function createClient(ctx: ManagementContext, input: ClientInput): Promise<WithSecret> {
  const secret = generateSecret();
  const client = {
    id: input.id === undefined ? generateClientId() : field('client_id', () => validateClientId(input.id!)),
    name: field('name', () => validateName(input.name, 'the client')),
    secretDigest: digestSecret(secret),
    tokenTtl: input.tokenTtl == null ? null : field('token_ttl', () => validateTokenTtl(input.tokenTtl!)),
    quotaPerMinute: quota('quota_per_minute', input.quotaPerMinute),
    quotaPerDay: quota('quota_per_day', input.quotaPerDay),
    audiences: (input.grants ?? []).map((url) => field('grants', () => validateAudienceUrl(url))),
  };
  const audit = changeAudit(ctx, 'client.created', client.id, {
    clientId: client.id,
    // Never the secret, nor its digest.
    changes: {
      name: client.name,
      token_ttl: client.tokenTtl,
      quota_per_minute: client.quotaPerMinute,
      quota_per_day: client.quotaPerDay,
      grants: [...new Set(client.audiences)].sort(),
    },
  });
  return storeCall(async () => ({ client: await ctx.store.createClient(client, audit), secret }));
}

export function listClients(ctx: ManagementContext): Promise<Client[]> {
  return storeCall(() => ctx.store.listClients());
}

export async function getClient(ctx: ManagementContext, id: string): Promise<Client> {
  const found = await storeCall(() => ctx.store.findClient(id));
  if (!found) throw new ManagementError('client_not_found', `client ${id} does not exist`);
  return found;
}

/** Replaces the client's secret; the old one stops working at once. */
export function rotateSecret(ctx: ManagementContext, id: string): Promise<WithSecret> {
  const secret = generateSecret();
  const audit = changeAudit(ctx, 'client.secret_rotated', id, { clientId: id });
  return storeCall(async () => ({
    client: await ctx.store.setClientSecret(id, digestSecret(secret), audit),
    secret,
  }));
}

/** Sets the quotas given (a number, or null for none); one left undefined keeps its value. */
export async function setQuota(
  ctx: ManagementContext,
  id: string,
  change: { perMinute?: number | null; perDay?: number | null },
): Promise<Client> {
  if (change.perMinute === undefined && change.perDay === undefined)
    throw new ManagementError(
      'invalid_field',
      'a quota change needs a per-minute or a per-day quota (or both)',
    );
  const perMinute = change.perMinute === undefined ? undefined : quota('quota_per_minute', change.perMinute);
  const perDay = change.perDay === undefined ? undefined : quota('quota_per_day', change.perDay);
  const current = await getClient(ctx, id);
  const quotas = {
    perMinute: perMinute === undefined ? current.quotaPerMinute : perMinute,
    perDay: perDay === undefined ? current.quotaPerDay : perDay,
  };
  const audit = changeAudit(ctx, 'client.updated', id, {
    clientId: id,
    changes: diff(
      { quota_per_minute: current.quotaPerMinute, quota_per_day: current.quotaPerDay },
      { quota_per_minute: quotas.perMinute, quota_per_day: quotas.perDay },
    ),
  });
  return storeCall(() => ctx.store.setClientQuota(id, quotas, audit));
}

export async function setEnabled(ctx: ManagementContext, id: string, enabled: boolean): Promise<Client> {
  const current = await getClient(ctx, id);
  const audit = changeAudit(ctx, 'client.updated', id, {
    clientId: id,
    changes: diff({ enabled: current.enabled }, { enabled }),
  });
  return storeCall(() => ctx.store.setClientEnabled(id, enabled, audit));
}

/** Deletes a client and its grants. */
export function deleteClient(ctx: ManagementContext, id: string): Promise<void> {
  const audit = changeAudit(ctx, 'client.deleted', id, { clientId: id });
  return storeCall(() => ctx.store.deleteClient(id, audit));
}
