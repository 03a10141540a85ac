import {
  validateAudienceUrl,
  validateName,
  validateSigningAlg,
  validateTokenTtl,
} from '../domain/validate.js';
import type { Audience } from '../store/types.js';
import { changeAudit, type ManagementContext } from './context.js';
import { field, ManagementError, storeCall } from './errors.js';

export interface AudienceInput {
  url: string;
  name?: string | null;
  tokenTtl?: number | null;
  signingAlg?: string | null;
}

/** Registers an audience; every field is checked here, whatever face it came from. */
export function addAudience(ctx: ManagementContext, input: AudienceInput): Promise<Audience> {
  const audience = {
    url: field('url', () => validateAudienceUrl(input.url)),
    name: input.name == null ? null : field('name', () => validateName(input.name!, 'the audience')),
    tokenTtl: input.tokenTtl == null ? null : field('token_ttl', () => validateTokenTtl(input.tokenTtl!)),
    signingAlg:
      input.signingAlg == null ? null : field('signing_alg', () => validateSigningAlg(input.signingAlg!)),
  };
  const audit = changeAudit(ctx, 'audience.created', audience.url, {
    audience: audience.url,
    changes: { name: audience.name, token_ttl: audience.tokenTtl, signing_alg: audience.signingAlg },
  });
  return storeCall(() => ctx.store.addAudience(audience, audit));
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
