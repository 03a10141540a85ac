import { MAX_LIVE_SECRETS } from '../domain/secrets.js';
import type { Client, SecretChange } from '../store/types.js';
import { ManagementError } from './errors.js';

/** A secret to add: it expires at `expiresAt`, or `expiresInSeconds` after it is made, or never. */
interface SecretToAdd {
  id: string;
  digest: string;
  expiresAt: string | null;
  expiresInSeconds?: number;
}

/**
 * What adding a secret to `client` writes (docs/interface.md, "Secrets, with overlap"), `client` as read in the
 * transaction that writes it (clients.ts changeClient):
 * - its secrets expired by `now` are pruned, so that they neither count nor clutter the list;
 * - with a grace, its other secrets that would outlive now + `graceSeconds` expire then (0: they go at once;
 *   null: they stay as they are);
 * - it may hold at most MAX_LIVE_SECRETS live secrets (too_many_secrets);
 * - the new one is made at `now` (ms): one clock reading for its time, its expiry and the others', so that a
 *   grace is exact.
 */
export function addingSecret(
  client: Client,
  secret: SecretToAdd,
  graceSeconds: number | null,
  now: number,
): SecretChange {
  const at = new Date(now).toISOString();
  const othersUntil = graceSeconds === null ? null : new Date(now + graceSeconds * 1000).toISOString();
  const gone: string[] = [];
  const expiring: string[] = [];
  let live = 0;
  for (const { id, expiresAt } of client.secrets) {
    if (expiresAt !== null && expiresAt <= at) gone.push(id);
    else if (othersUntil === null || (expiresAt !== null && expiresAt <= othersUntil)) live++;
    else if (othersUntil <= at) gone.push(id);
    else {
      expiring.push(id);
      live++;
    }
  }
  if (live >= MAX_LIVE_SECRETS)
    throw new ManagementError(
      'too_many_secrets',
      `client ${client.id} has ${MAX_LIVE_SECRETS} live secrets already: revoke one, or rotate with a grace period shorter than theirs`,
    );
  return {
    ...(gone.length > 0 ? { delete: gone } : {}),
    ...(expiring.length > 0 ? { expire: { ids: expiring, at: othersUntil! } } : {}),
    add: {
      id: secret.id,
      digest: secret.digest,
      createdAt: at,
      expiresAt:
        secret.expiresInSeconds === undefined
          ? secret.expiresAt
          : new Date(now + secret.expiresInSeconds * 1000).toISOString(),
    },
  };
}
