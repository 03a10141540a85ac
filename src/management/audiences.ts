import {
  validateAudienceUrl,
  validateName,
  validateSigningAlg,
  validateTokenTtl,
} from '../domain/validate.js';
import type { Audience, AudiencePatch, NewAudience } from '../store/types.js';
import {
  asAuditChanges,
  changeAudit,
  changedFields,
  definedFields,
  type ManagementContext,
} from './context.js';
import { AUDIENCE_FIELDS, audienceJson } from './views.js';
import { FieldChecks, ManagementError, storeCall } from './errors.js';

/** The fields of an audience but its URL: undefined leaves one as it is (a change) or unset (a new one). */
export interface AudienceFields {
  name?: string | null;
  tokenTtl?: number | null;
  signingAlg?: string | null;
}

export interface AudienceInput extends AudienceFields {
  url: string;
}

/** Checks the fields given (null clears one), each by its rule; refusals are collected in `checks`. */
export function checkAudienceFields(input: AudienceFields, checks: FieldChecks): AudiencePatch {
  const patch: AudiencePatch = {};
  if (input.name !== undefined)
    patch.name =
      input.name === null ? null : checks.run('name', () => validateName(input.name!, 'the audience'));
  if (input.tokenTtl !== undefined)
    patch.tokenTtl =
      input.tokenTtl === null ? null : checks.run('token_ttl', () => validateTokenTtl(input.tokenTtl!));
  if (input.signingAlg !== undefined)
    patch.signingAlg =
      input.signingAlg === null
        ? null
        : checks.run('signing_alg', () => validateSigningAlg(input.signingAlg!));
  return patch;
}

/** A new audience as the rules make it (URL checked, names trimmed); refusals are collected in `checks`. */
export function checkNewAudience(input: AudienceInput, checks: FieldChecks): NewAudience {
  const url = checks.run('url', () => validateAudienceUrl(input.url));
  const fields = checkAudienceFields(input, checks);
  return {
    url,
    name: fields.name ?? null,
    tokenTtl: fields.tokenTtl ?? null,
    signingAlg: fields.signingAlg ?? null,
  };
}

/** Registers an audience; every field is checked here, whatever face it came from. */
export function addAudience(ctx: ManagementContext, input: AudienceInput): Promise<Audience> {
  const checks = new FieldChecks();
  const audience = checkNewAudience(input, checks);
  checks.throwFirst();
  const audit = changeAudit(ctx, 'audience.created', audience.url, {
    audience: audience.url,
    changes: { name: audience.name, token_ttl: audience.tokenTtl, signing_alg: audience.signingAlg },
  });
  return storeCall(() => ctx.store.addAudience(audience, audit));
}

/** Changes the fields given of an audience (null clears one). */
export async function updateAudience(
  ctx: ManagementContext,
  url: string,
  change: AudienceFields,
): Promise<Audience> {
  const checks = new FieldChecks();
  const patch = checkAudienceFields(change, checks);
  checks.throwFirst();
  // Read, compare and write in one transaction; a change that changes nothing writes nothing.
  return storeCall(() =>
    ctx.store.transaction(async (store) => {
      const current = await getAudience({ ...ctx, store }, url);
      const after = { ...current, ...definedFields(patch) };
      const changed = changedFields(AUDIENCE_FIELDS, audienceJson(current), audienceJson(after));
      if (changed.length === 0) return current;
      const changes = asAuditChanges(changed);
      const audit = changeAudit(ctx, 'audience.updated', url, { audience: url, changes });
      return store.updateAudience(url, patch, audit);
    }),
  );
}

export function listAudiences(ctx: ManagementContext): Promise<Audience[]> {
  return storeCall(() => ctx.store.listAudiences());
}

export async function getAudience(ctx: ManagementContext, url: string): Promise<Audience> {
  const found = await storeCall(() => ctx.store.findAudience(url));
  if (!found) throw new ManagementError('audience_not_found', `audience ${url} is not registered`);
  return found;
}

/** Removes an audience and every grant of it. */
export function removeAudience(ctx: ManagementContext, url: string): Promise<void> {
  const audit = changeAudit(ctx, 'audience.deleted', url, { audience: url });
  return storeCall(() => ctx.store.removeAudience(url, audit));
}
