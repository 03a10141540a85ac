import { digestSecret, generateClientId, generateSecret } from '../domain/secrets.js';
import {
  validateAudienceUrl,
  validateClientId,
  validateName,
  validateQuota,
  validateTokenTtl,
} from '../domain/validate.js';
import type { Client, ClientPatch, NewClient } from '../store/types.js';
import {
  asAuditChanges,
  changeAudit,
  changedFields,
  definedFields,
  type ManagementContext,
} from './context.js';
import { CLIENT_FIELDS, clientJson } from './views.js';
import { field, FieldChecks, ManagementError, storeCall } from './errors.js';

/** The fields of a client but its id and grants: undefined leaves one as it is (a change) or default (new). */
export interface ClientFields {
  name?: string;
  enabled?: boolean;
  tokenTtl?: number | null;
  quotaPerMinute?: number | null;
  quotaPerDay?: number | null;
}

export interface ClientInput extends ClientFields {
  name: string;
  /** Chosen by the operator; generated when left out. */
  id?: string;
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

/** Checks the fields given (null clears one), each by its rule; refusals are collected in `checks`. */
export function checkClientFields(input: ClientFields, checks: FieldChecks): ClientPatch {
  const patch: ClientPatch = {};
  if (input.name !== undefined)
    patch.name = checks.run('name', () => validateName(input.name!, 'the client'));
  if (input.enabled !== undefined) patch.enabled = input.enabled;
  if (input.tokenTtl !== undefined)
    patch.tokenTtl =
      input.tokenTtl === null ? null : checks.run('token_ttl', () => validateTokenTtl(input.tokenTtl!));
  if (input.quotaPerMinute !== undefined)
    patch.quotaPerMinute = checks.run('quota_per_minute', () =>
      quota('quota_per_minute', input.quotaPerMinute),
    );
  if (input.quotaPerDay !== undefined)
    patch.quotaPerDay = checks.run('quota_per_day', () => quota('quota_per_day', input.quotaPerDay));
  return patch;
}

/** A new client as the rules make it, but its secret; refusals are collected in `checks`. */
export function checkNewClient(
  input: ClientInput,
  checks: FieldChecks,
): Omit<NewClient, 'secretDigest'> & { enabled: boolean } {
  const id =
    input.id === undefined ? generateClientId() : checks.run('client_id', () => validateClientId(input.id!));
  const name = checks.run('name', () => validateName(input.name, 'the client'));
  const fields = checkClientFields({ ...input, name: undefined }, checks);
  return {
    id,
    name,
    tokenTtl: fields.tokenTtl ?? null,
    quotaPerMinute: fields.quotaPerMinute ?? null,
    quotaPerDay: fields.quotaPerDay ?? null,
    enabled: input.enabled ?? true,
    // Each audience once, in order: as the store keeps them, and as the audit event reports them.
    audiences: [
      ...new Set((input.grants ?? []).map((url) => checks.run('grants', () => validateAudienceUrl(url)))),
    ].sort(),
  };
}

/** Creates a client with a new secret (stored as its digest only). */
export function createClient(ctx: ManagementContext, input: ClientInput): Promise<WithSecret> {
  const checks = new FieldChecks();
  const client = checkNewClient(input, checks);
  checks.throwFirst();
  const secret = generateSecret();
  const audit = changeAudit(ctx, 'client.created', client.id, {
    clientId: client.id,
    // Never the secret, nor its digest.
    changes: {
      name: client.name,
      enabled: client.enabled,
      token_ttl: client.tokenTtl,
      quota_per_minute: client.quotaPerMinute,
      quota_per_day: client.quotaPerDay,
      grants: client.audiences,
    },
  });
  return storeCall(async () => ({
    client: await ctx.store.createClient({ ...client, secretDigest: digestSecret(secret) }, audit),
    secret,
  }));
}

/** Changes the fields given of a client (null clears a lifetime or a quota); never its secret. */
export async function updateClient(
  ctx: ManagementContext,
  id: string,
  change: ClientFields,
): Promise<Client> {
  const checks = new FieldChecks();
  const patch = checkClientFields(change, checks);
  checks.throwFirst();
  // Read, compare and write in one transaction: the event's `from` is what was replaced, and a change that
  // changes nothing writes nothing (no event, no updated_at, no change for the caches).
  return storeCall(() =>
    ctx.store.transaction(async (store) => {
      const current = await getClient({ ...ctx, store }, id);
      const after = { ...current, ...definedFields(patch) };
      const changed = changedFields(CLIENT_FIELDS, clientJson(current), clientJson(after));
      if (changed.length === 0) return current;
      const changes = asAuditChanges(changed);
      const audit = changeAudit(ctx, 'client.updated', id, { clientId: id, changes });
      return store.updateClient(id, patch, audit);
    }),
  );
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
export function setQuota(
  ctx: ManagementContext,
  id: string,
  change: { perMinute?: number | null; perDay?: number | null },
): Promise<Client> {
  return updateClient(ctx, id, { quotaPerMinute: change.perMinute, quotaPerDay: change.perDay });
}

export function setEnabled(ctx: ManagementContext, id: string, enabled: boolean): Promise<Client> {
  return updateClient(ctx, id, { enabled });
}

/** Deletes a client and its grants. */
export function deleteClient(ctx: ManagementContext, id: string): Promise<void> {
  const audit = changeAudit(ctx, 'client.deleted', id, { clientId: id });
  return storeCall(() => ctx.store.deleteClient(id, audit));
}
