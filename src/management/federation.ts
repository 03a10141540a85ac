import {
  checkJwksKeys,
  DEFAULT_MAX_LIFETIME,
  discoveryUrl,
  MAX_FEDERATED_CREDENTIALS,
  newFederatedCredentialId,
  usesSecrets,
  validateCredentialName,
  validateFederatedAudience,
  validateIssuer,
  validateIssuerKeys,
  validateJwksUri,
  validateMaxLifetime,
  validateRequiredClaims,
  validateSubject,
  type FederatedCredential,
} from '../domain/client-auth/index.js';

import { ValidationError } from '../domain/validate.js';
import type { Client } from '../store/types.js';
import { changeClient, getClient } from './client-access.js';
import {
  changeAudit,
  checkPrecondition,
  nowOf,
  patchChanges,
  type ManagementContext,
  type Precondition,
} from './context.js';
import { FieldChecks, ManagementError } from './errors.js';
import { FEDERATED_FIELDS, federatedCredentialJson } from './views.js';

/*
 * Workload identity federation (docs/interface.md): a client's federated credentials, the platforms' tokens it
 * accepts in place of a secret or key. A client with credentials has no secret and no keys of its own (its
 * method is private_key_jwt); one with secrets or keys gets none (client_uses_secrets, client_uses_keys), and
 * secrets and keys are refused to one that has some (client_uses_federation, in clients.ts and secrets.ts).
 * Every change is a change of the client (changeClient: the caller must hold the client's admin scopes, as
 * for a secret), recorded with its own audit event, and reaches every instance through the change feed.
 */

/** A federated credential as a caller gives it: every field optional (a change), or as `add` requires. */
export interface FederatedCredentialInput {
  name?: unknown;
  issuer?: unknown;
  jwks?: unknown;
  jwksUri?: unknown;
  subject?: unknown;
  /** Default (new): the Tessera issuer URL, stored as such. */
  audience?: unknown;
  claims?: unknown;
  /** Seconds; default (new) 1 hour. */
  maxLifetime?: unknown;
  once?: unknown;
}

/** The fields a new credential must have. */
const REQUIRED = [
  ['name', 'name'],
  ['issuer', 'issuer'],
  ['subject', 'subject'],
] as const;

/**
 * A credential as the rules make it from `input` over `base` (a change) or from nothing (new; `id` and times
 * are set by the caller). Refusals of single fields are collected in `checks`; the keys are imported after.
 */
function checkFields(
  ctx: ManagementContext,
  input: FederatedCredentialInput,
  checks: FieldChecks,
  base: Omit<FederatedCredential, 'id' | 'createdAt' | 'updatedAt'> | undefined,
): Omit<FederatedCredential, 'id' | 'createdAt' | 'updatedAt'> {
  const { production, jwksAllowPrivate } = ctx.config;
  if (base === undefined)
    for (const [key, pointer] of REQUIRED)
      if (input[key] === undefined || input[key] === null)
        checks.run(pointer, () => {
          throw new ValidationError(`${pointer} is required`);
        });
  const pick = <T>(
    key: keyof FederatedCredentialInput,
    pointer: string,
    rule: (v: unknown) => T,
    now: T,
  ): T => (input[key] === undefined ? now : checks.run(pointer, () => rule(input[key])));
  const name = pick('name', 'name', validateCredentialName, base?.name ?? '');
  const issuer = pick(
    'issuer',
    'issuer',
    (v) => validateIssuer(v, production, ctx.config.issuer),
    base?.issuer ?? '',
  );
  const subject = pick('subject', 'subject', validateSubject, base?.subject ?? '');
  const audience = pick(
    'audience',
    'audience',
    (v) => (v === null ? ctx.config.issuer : validateFederatedAudience(v)),
    base?.audience ?? ctx.config.issuer,
  );
  const claims = pick('claims', 'claims', validateRequiredClaims, base?.claims ?? {});
  const maxLifetime = pick(
    'maxLifetime',
    'max_lifetime',
    (v) => (v === null ? DEFAULT_MAX_LIFETIME : validateMaxLifetime(v)),
    base?.maxLifetime ?? DEFAULT_MAX_LIFETIME,
  );
  const once = pick(
    'once',
    'once',
    (v) => {
      if (v === null) return false;
      if (typeof v !== 'boolean') throw new ValidationError('once must be true or false');
      return v;
    },
    base?.once ?? false,
  );
  // Keys go together: inline keys given replace a URL and the other way round; neither: discovery.
  let jwks = base?.jwks ?? null;
  let jwksUri = base?.jwksUri ?? null;
  if (input.jwks !== undefined || input.jwksUri !== undefined) {
    const pointer =
      input.jwks != null && input.jwksUri != null ? 'jwks_uri' : input.jwks != null ? 'jwks' : 'jwks_uri';
    const keys = checks.run(pointer, () =>
      validateIssuerKeys(
        input.jwks === undefined ? (input.jwksUri != null ? null : jwks) : input.jwks,
        input.jwksUri === undefined ? (input.jwks != null ? null : jwksUri) : input.jwksUri,
        production,
        jwksAllowPrivate,
      ),
    );
    if (keys !== undefined) ({ jwks, jwksUri } = keys);
  }
  // Without keys, they are found at the issuer's discovery document: a URL under the same guard as jwks_uri.
  if (jwks === null && jwksUri === null && issuer)
    checks.run('issuer', () => {
      try {
        validateJwksUri(discoveryUrl(issuer), production, jwksAllowPrivate);
      } catch (error) {
        throw new ValidationError(
          `${(error as Error).message.replace(/^jwks_uri/, 'issuer')} (its keys are found by discovery when neither jwks nor jwks_uri is given)`,
        );
      }
    });
  return { name, issuer, jwks, jwksUri, subject, audience, claims, maxLifetime, once };
}

/**
 * A new credential's fields by the rules (defaults filled), every refusal collected in `checks`: a file checked
 * whole (declarative/check.ts). Its inline keys are imported after, with checkJwksKeys.
 */
export const checkNewCredentialFields = (
  ctx: ManagementContext,
  input: FederatedCredentialInput,
  checks: FieldChecks,
): Omit<FederatedCredential, 'id' | 'createdAt' | 'updatedAt'> => checkFields(ctx, input, checks, undefined);

/** Imports inline keys with jose: a key that does not import is refused (`pointer`: where the keys were given). */
async function checkKeys(credential: Pick<FederatedCredential, 'jwks'>, pointer: string): Promise<void> {
  if (credential.jwks === null) return;
  try {
    await checkJwksKeys(credential.jwks);
  } catch (error) {
    throw new ManagementError('invalid_field', (error as Error).message, pointer);
  }
}

/**
 * New credentials, each checked whole (the fields of the i-th named `<prefix>/<i>/<field>` when a prefix is
 * given: a client created with its credentials). Ids and times are made here.
 */
export async function checkNewCredentials(
  ctx: ManagementContext,
  inputs: readonly FederatedCredentialInput[],
  prefix = '',
): Promise<FederatedCredential[]> {
  if (inputs.length > MAX_FEDERATED_CREDENTIALS)
    throw new ManagementError(
      'invalid_field',
      `a client has at most ${MAX_FEDERATED_CREDENTIALS} federated credentials; ${inputs.length} were given`,
      prefix === '' ? 'federated_credentials' : prefix,
    );
  const at = new Date(nowOf(ctx)).toISOString();
  const made: FederatedCredential[] = [];
  for (const [i, input] of inputs.entries()) {
    const checks = new FieldChecks(prefix === '' ? '' : `${prefix}/${i}/`);
    const fields = checkFields(ctx, input, checks, undefined);
    checks.throwFirst();
    await checkKeys(fields, prefix === '' ? 'jwks' : `${prefix}/${i}/jwks`);
    if (made.some((m) => m.name === fields.name))
      throw new ManagementError(
        'federated_credential_exists',
        `a federated credential named ${fields.name} is given twice`,
      );
    made.push({ id: newFederatedCredentialId(), ...fields, createdAt: at, updatedAt: at });
  }
  return made;
}

/** Refuses (409) federated credentials for a client that authenticates with its own secret, keys or certificate. */
function requireFederationClient(client: Client): void {
  if (usesSecrets(client.authMethod))
    throw new ManagementError(
      'client_uses_secrets',
      `client ${client.id} authenticates with a secret (${client.authMethod}): a federated credential is for a private_key_jwt client without secrets or keys (change token_endpoint_auth_method first)`,
    );
  if (client.authMethod !== 'private_key_jwt')
    throw new ManagementError(
      'client_uses_keys',
      `client ${client.id} authenticates with a TLS client certificate (${client.authMethod}): a federated credential is for a private_key_jwt client without secrets or keys (change token_endpoint_auth_method first)`,
    );
  if (client.jwks !== null || client.jwksUri !== null)
    throw new ManagementError(
      'client_uses_keys',
      `client ${client.id} authenticates with its own keys (${client.jwks !== null ? 'jwks' : 'jwks_uri'}): remove them before adding a federated credential`,
    );
}

function findCredential(client: Client, credentialId: string): FederatedCredential {
  const found = client.federatedCredentials.find((c) => c.id === credentialId);
  if (found === undefined)
    throw new ManagementError(
      'federated_credential_not_found',
      `client ${client.id} has no federated credential ${credentialId}`,
    );
  return found;
}

function requireUniqueName(client: Client, name: string, except?: string): void {
  if (client.federatedCredentials.some((c) => c.name === name && c.id !== except))
    throw new ManagementError(
      'federated_credential_exists',
      `client ${client.id} already has a federated credential named ${name}`,
    );
}

/** A client's federated credentials, oldest first. */
export async function listFederatedCredentials(
  ctx: ManagementContext,
  clientId: string,
): Promise<FederatedCredential[]> {
  return (await getClient(ctx, clientId)).federatedCredentials;
}

export async function getFederatedCredential(
  ctx: ManagementContext,
  clientId: string,
  credentialId: string,
): Promise<FederatedCredential> {
  return findCredential(await getClient(ctx, clientId), credentialId);
}

/** Adds a federated credential to a client: at most 10, names unique within the client. */
export async function addFederatedCredential(
  ctx: ManagementContext,
  clientId: string,
  input: FederatedCredentialInput,
): Promise<FederatedCredential> {
  const [credential] = await checkNewCredentials(ctx, [input]);
  return changeClient(ctx, clientId, async (store, client) => {
    requireFederationClient(client);
    if (client.federatedCredentials.length >= MAX_FEDERATED_CREDENTIALS)
      throw new ManagementError(
        'too_many_federated_credentials',
        `client ${clientId} has ${client.federatedCredentials.length} federated credentials, the most it may have: remove one first`,
      );
    requireUniqueName(client, credential!.name);
    const audit = changeAudit(ctx, 'client.federated_credential_added', clientId, {
      clientId,
      changes: federatedCredentialJson(credential!),
    });
    await store.updateClient(
      clientId,
      { federatedCredentials: [...client.federatedCredentials, credential!] },
      audit,
    );
    return credential!;
  });
}

/** Changes the fields given of a credential (JSON Merge Patch: null resets audience, claims, max_lifetime, once). */
export async function updateFederatedCredential(
  ctx: ManagementContext,
  clientId: string,
  credentialId: string,
  input: FederatedCredentialInput,
  condition: Precondition = {},
): Promise<FederatedCredential> {
  for (const key of ['name', 'issuer', 'subject'] as const)
    if (input[key] === null) throw new ManagementError('invalid_field', `${key} cannot be removed`, key);
  return changeClient(ctx, clientId, async (store, client) => {
    const current = findCredential(client, credentialId);
    checkPrecondition(condition, federatedCredentialJson(current), `federated credential ${credentialId}`);
    const checks = new FieldChecks();
    const fields = checkFields(ctx, input, checks, current);
    checks.throwFirst();
    const patched = patchChanges(current, fields, federatedCredentialJson, FEDERATED_FIELDS);
    if (!patched) return current;
    if (input.jwks !== undefined) await checkKeys(fields, 'jwks');
    requireUniqueName(client, fields.name, credentialId);
    const after = { ...patched.after, updatedAt: new Date(nowOf(ctx)).toISOString() };
    const audit = changeAudit(ctx, 'client.federated_credential_updated', clientId, {
      clientId,
      changes: { id: credentialId, ...patched.changes },
    });
    await store.updateClient(
      clientId,
      { federatedCredentials: client.federatedCredentials.map((c) => (c.id === credentialId ? after : c)) },
      audit,
    );
    return after;
  });
}

/** Removes a credential: its platform's tokens stop working at once, on every instance within a second. */
export async function removeFederatedCredential(
  ctx: ManagementContext,
  clientId: string,
  credentialId: string,
  condition: Precondition = {},
): Promise<void> {
  await changeClient(ctx, clientId, async (store, client) => {
    const current = findCredential(client, credentialId);
    checkPrecondition(condition, federatedCredentialJson(current), `federated credential ${credentialId}`);
    const audit = changeAudit(ctx, 'client.federated_credential_removed', clientId, {
      clientId,
      changes: { id: credentialId, name: current.name, issuer: current.issuer, subject: current.subject },
    });
    await store.updateClient(
      clientId,
      { federatedCredentials: client.federatedCredentials.filter((c) => c.id !== credentialId) },
      audit,
    );
  });
}
