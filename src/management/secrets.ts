import { digestSecret, generateSecret } from '../domain/secrets.js';
import { ValidationError } from '../domain/validate.js';
import { newSecretId } from '../store/migrations.js';
import type { ClientSecret } from '../store/types.js';
import { changeClient, getClient, requireSecretClient } from './client-access.js';
import { changeAudit, nowOf, type ManagementContext } from './context.js';
import { field } from './errors.js';
import { addingSecret } from './secret-rules.js';

/** A client's secrets (never their values), oldest first. */
export async function listSecrets(ctx: ManagementContext, clientId: string): Promise<ClientSecret[]> {
  return (await getClient(ctx, clientId)).secrets;
}

export interface NewSecret {
  /** Seconds the client's other secrets keep working; undefined: they stay as they are (a second secret). */
  graceSeconds?: number;
  /** When the new secret expires (RFC 3339), or in how many seconds; neither: never. */
  expiresAt?: string;
  expiresInSeconds?: number;
}

/**
 * Adds a secret to a client, shown in the answer only (its digest is stored). With a grace, the others expire
 * after it (0: at once). At most five live secrets (too_many_secrets).
 */
export async function addSecret(
  ctx: ManagementContext,
  clientId: string,
  input: NewSecret = {},
): Promise<{ secret: ClientSecret; value: string }> {
  const now = nowOf(ctx);
  const expiresAt = field('expires_at', () => {
    // In seconds: counted from when the secret is made (secret-rules.ts).
    if (input.expiresInSeconds !== undefined) return null;
    if (input.expiresAt === undefined) return null;
    const at = Date.parse(input.expiresAt);
    if (Number.isNaN(at)) throw new ValidationError(`"${input.expiresAt}" is not an RFC 3339 time`);
    if (at <= now) throw new ValidationError('a new secret must expire in the future');
    return new Date(at).toISOString();
  });
  const value = generateSecret();
  const id = newSecretId();
  const audit = changeAudit(ctx, 'client.secret_added', clientId, {
    clientId,
    // Never the secret, nor its digest.
    changes: {
      secret_id: id,
      expires_at: expiresAt,
      ...(input.expiresInSeconds === undefined ? {} : { expires_in: input.expiresInSeconds }),
      grace: input.graceSeconds ?? null,
    },
  });
  const client = await changeClient(ctx, clientId, (store, current) => {
    requireSecretClient(current);
    const secret = {
      id,
      digest: digestSecret(value),
      expiresAt,
      ...(input.expiresInSeconds === undefined ? {} : { expiresInSeconds: input.expiresInSeconds }),
    };
    return store.changeSecrets(
      clientId,
      addingSecret(current, secret, input.graceSeconds ?? null, nowOf(ctx)),
      audit,
    );
  });
  return { secret: client.secrets.find((s) => s.id === id)!, value };
}

/** Revokes one secret of a client: it stops working at once, on every instance within a second. */
export async function revokeSecret(
  ctx: ManagementContext,
  clientId: string,
  secretId: string,
): Promise<void> {
  const audit = changeAudit(ctx, 'client.secret_revoked', clientId, {
    clientId,
    changes: { secret_id: secretId },
  });
  await changeClient(ctx, clientId, (store) => store.changeSecrets(clientId, { delete: [secretId] }, audit));
}
