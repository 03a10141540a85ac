/**
 * Applying a plan: each step through the management operation a face would call, on a store bound to one
 * transaction, so that the plan is applied whole or not at all.
 */
import type { PublicJwks } from '../../domain/client-auth/index.js';
import { tlsIdentityField } from '../../domain/client-auth/certificate-registration.js';
import { TLS_IDENTITY_KINDS } from '../../domain/known-client.js';
import { addAudience, removeAudience, updateAudience } from '../audiences.js';
import { adminAudienceUrl, ensureAdminAudience } from '../builtin.js';
import {
  checkClient,
  createCheckedClients,
  deleteClient,
  rotateSecret,
  updateClient,
  type CheckedClient,
  type ClientFields,
  type ClientInput,
} from '../clients.js';
import type { FieldChange, ManagementContext } from '../context.js';
import { ManagementError, storeCall } from '../errors.js';
import {
  addFederatedCredential,
  listFederatedCredentials,
  removeFederatedCredential,
  updateFederatedCredential,
  type FederatedCredentialInput,
} from '../federation.js';
import { putGrant, removeGrant } from '../grants.js';
import type { ScopeEntry } from './file.js';
import { givenSecretOf, type Plan, type PlanStep } from './plan.js';

/** The change of a client whose secret the file gives and which does not have it (plan.ts). */
const SECRET_FILE = 'client_secret';

/** A new client's secret, shown once. */
export interface CreatedSecret {
  client_id: string;
  client_secret: string;
}

type StepOf<T extends PlanStep['type']> = Extract<PlanStep, { type: T }>;
type NewGrant = Extract<StepOf<'grant'>, { action: 'create' }>;
type NewCredential = Extract<StepOf<'federated_credential'>, { action: 'create' }>;
type NewClientStep = Extract<StepOf<'client'>, { action: 'create' }>;

/** New clients of consecutive steps checked and created together, at most this many at a time. */
const CREATE_TOGETHER = 1000;

/** A plan's values (the file's names) as an audience operation takes them; a field left out stays as it is. */
const audienceFields = (values: Record<string, unknown>) => ({
  ...('name' in values ? { name: values.name as string | null } : {}),
  ...('token_ttl' in values ? { tokenTtl: values.token_ttl as number | null } : {}),
  ...('signing_alg' in values ? { signingAlg: values.signing_alg as string | null } : {}),
  ...('scopes' in values ? { scopes: (values.scopes as ScopeEntry[] | null) ?? [] } : {}),
  ...('token_profile' in values ? { tokenProfile: values.token_profile as string | null } : {}),
});

/** A plan's values of an audience but its resource servers, which are set once every client exists. */
function withoutResourceServers(values: Record<string, unknown>): {
  rest: Record<string, unknown>;
  ids: string[] | undefined;
} {
  const { resource_server_client_ids: ids, ...rest } = values;
  return { rest, ids: ids === undefined ? undefined : ((ids as string[] | null) ?? []) };
}

/** A plan's values (the file's names) as a client operation takes them; a field left out stays as it is. */
const clientFields = (values: Record<string, unknown>) => ({
  ...('name' in values ? { name: values.name as string } : {}),
  ...('description' in values ? { description: values.description as string | null } : {}),
  ...('enabled' in values ? { enabled: values.enabled as boolean } : {}),
  ...('token_ttl' in values ? { tokenTtl: values.token_ttl as number | null } : {}),
  ...('quota_per_minute' in values ? { quotaPerMinute: values.quota_per_minute as number | null } : {}),
  ...('quota_per_day' in values ? { quotaPerDay: values.quota_per_day as number | null } : {}),
  ...('claims' in values ? { claims: values.claims as Record<string, unknown> | null } : {}),
  ...('token_endpoint_auth_method' in values
    ? { authMethod: (values.token_endpoint_auth_method as string | null) ?? 'client_secret_basic' }
    : {}),
  ...('jwks' in values ? { jwks: values.jwks as PublicJwks | null } : {}),
  ...('jwks_uri' in values ? { jwksUri: values.jwks_uri as string | null } : {}),
  ...('dpop_bound_access_tokens' in values
    ? { dpopBoundAccessTokens: values.dpop_bound_access_tokens === true }
    : {}),
  ...tlsIdentityOf(values),
  ...('tls_client_certificate_bound_access_tokens' in values
    ? { certificateBoundAccessTokens: values.tls_client_certificate_bound_access_tokens === true }
    : {}),
});

/**
 * A plan's tls_client_auth_* values (the file's names) by kind, as a client operation takes them: the one it sets
 * and those it clears (null), so that a change of kind replaces the value.
 */
function tlsIdentityOf(values: Record<string, unknown>): { tlsIdentity?: ClientFields['tlsIdentity'] } {
  const given: NonNullable<ClientFields['tlsIdentity']> = {};
  for (const kind of TLS_IDENTITY_KINDS) {
    const field = tlsIdentityField(kind);
    if (field in values) given[kind] = values[field] as string | null;
  }
  return Object.keys(given).length === 0 ? {} : { tlsIdentity: given };
}

/** A plan's values of a federated credential (the file's names) as its operations take them; left out: as it is. */
const credentialFields = (values: Record<string, unknown>): FederatedCredentialInput => ({
  ...('issuer' in values ? { issuer: values.issuer } : {}),
  ...('jwks' in values ? { jwks: values.jwks } : {}),
  ...('jwks_uri' in values ? { jwksUri: values.jwks_uri } : {}),
  ...('subject' in values ? { subject: values.subject } : {}),
  ...('audience' in values ? { audience: values.audience } : {}),
  ...('claims' in values ? { claims: values.claims } : {}),
  ...('max_lifetime' in values ? { maxLifetime: values.max_lifetime } : {}),
  ...('once' in values ? { once: values.once } : {}),
});

/** The values a change sets: `{ field: to }`. */
const changed = (changes: FieldChange[]): Record<string, unknown> =>
  Object.fromEntries(changes.map((c) => [c.field, c.to]));

/** A plan being applied in a transaction (`ctx` is bound to it); a new client's grants are made with it. */
class Applying {
  readonly secrets: CreatedSecret[] = [];
  /**
   * The audiences' resource servers, set after every other step: a file may name a client it creates, which
   * exists only once its step ran (the audiences come first, for the clients' grants name them).
   */
  private readonly resourceServers: { url: string; ids: string[] }[] = [];

  constructor(
    private readonly ctx: ManagementContext,
    private readonly plan: Plan,
    private readonly grantsOfNew: ReadonlyMap<string, NewGrant[]>,
    private readonly credentialsOfNew: ReadonlyMap<string, NewCredential[]>,
  ) {}

  async audience(step: StepOf<'audience'>): Promise<void> {
    if (step.action === 'delete') return removeAudience(this.ctx, step.identifier);
    const { rest, ids } = withoutResourceServers(
      step.action === 'create' ? step.values : changed(step.changes),
    );
    if (ids !== undefined) this.resourceServers.push({ url: step.identifier, ids });
    if (step.action === 'create')
      await addAudience(this.ctx, { url: step.identifier, ...audienceFields(rest) });
    else await updateAudience(this.ctx, step.identifier, audienceFields(rest));
  }

  /** The audiences' resource servers, once every client of the plan exists. */
  async setResourceServers(): Promise<void> {
    for (const { url, ids } of this.resourceServers)
      await updateAudience(this.ctx, url, { resourceServerClientIds: ids });
  }

  async client(step: Exclude<StepOf<'client'>, { action: 'create' }>): Promise<void> {
    if (step.action === 'delete') return deleteClient(this.ctx, step.client_id);
    const fields = step.changes.filter((c) => c.field !== SECRET_FILE);
    if (fields.length > 0) await updateClient(this.ctx, step.client_id, clientFields(changed(fields)));
    // After its method changed (to one with secrets): its secret from the file, in place of the others at once.
    if (fields.length < step.changes.length)
      await rotateSecret(this.ctx, step.client_id, {
        graceSeconds: 0,
        secret: this.givenSecret(step.client_id),
      });
  }

  /** The secret the plan gives a client from its client_secret_file (planned only when it gives one). */
  private givenSecret(clientId: string): string {
    const secret = givenSecretOf(this.plan, clientId);
    if (secret === undefined) throw new Error(`the plan gives client ${clientId} no secret`);
    return secret;
  }

  async grant(step: StepOf<'grant'>): Promise<void> {
    if (step.action === 'create') {
      // A new client's grants are made with it.
      if (!this.grantsOfNew.has(step.client_id))
        await putGrant(this.ctx, step.client_id, await this.audienceOf(step.audience), {
          scopes: step.scopes,
          claims: step.claims ?? null,
          tokenExchange: step.token_exchange === true,
        });
    } else if (step.action === 'update') {
      const to = changed(step.changes);
      await putGrant(this.ctx, step.client_id, await this.audienceOf(step.audience), {
        ...('scopes' in to ? { scopes: String(to.scopes).split(' ').filter(Boolean) } : {}),
        ...('claims' in to ? { claims: to.claims as Record<string, unknown> | null } : {}),
        ...('token_exchange' in to ? { tokenExchange: to.token_exchange === true } : {}),
      });
    } else await removeGrant(this.ctx, step.client_id, step.audience);
  }

  async credential(step: StepOf<'federated_credential'>): Promise<void> {
    // A new client's credentials are made with it.
    if (step.action === 'create' && this.credentialsOfNew.has(step.client_id)) return;
    if (step.action === 'create') {
      await addFederatedCredential(this.ctx, step.client_id, {
        name: step.name,
        ...credentialFields(step.values),
      });
      return;
    }
    const id = await this.credentialId(step.client_id, step.name);
    if (step.action === 'update')
      await updateFederatedCredential(this.ctx, step.client_id, id, credentialFields(changed(step.changes)));
    else await removeFederatedCredential(this.ctx, step.client_id, id);
  }

  /**
   * New clients, each with its grants and federated credentials: checked (checkClient) and created together
   * (createCheckedClients: a few statements for them all); their secrets kept to be shown once (none for
   * private_key_jwt). Called with at most CREATE_TOGETHER steps, so that what a client takes in memory while it
   * is made is let go before the next ones are.
   */
  async createClients(steps: readonly NewClientStep[]): Promise<void> {
    if (steps.length === 0) return;
    const checked: CheckedClient[] = [];
    for (const step of steps) checked.push(await checkClient(this.ctx, this.clientInput(step)));
    await createCheckedClients(this.ctx, checked);
    // A secret from a client_secret_file is the file's, never shown.
    for (const { client, secret, input } of checked)
      if (secret !== undefined && input.secret === undefined)
        this.secrets.push({ client_id: client.id, client_secret: secret });
  }

  /** A new client's step as createClient takes it, with its grants and federated credentials. */
  private clientInput(step: NewClientStep): ClientInput {
    const grants = this.grantsOfNew.get(step.client_id) ?? [];
    const credentials = this.credentialsOfNew.get(step.client_id) ?? [];
    const secret = givenSecretOf(this.plan, step.client_id);
    return {
      id: step.client_id,
      ...clientFields(step.values),
      name: step.values.name,
      ...(secret === undefined ? {} : { secret }),
      ...(credentials.length === 0
        ? {}
        : {
            federatedCredentials: credentials.map((c) => ({ name: c.name, ...credentialFields(c.values) })),
          }),
      grants: grants.map((g) => g.audience),
      scopes: Object.fromEntries(grants.map((g) => [g.audience, g.scopes])),
      grantClaims: Object.fromEntries(grants.flatMap((g) => (g.claims ? [[g.audience, g.claims]] : []))),
      grantTokenExchange: grants.filter((g) => g.token_exchange === true).map((g) => g.audience),
    };
  }

  /** The id of a client's federated credential, by its name (how a file knows it). */
  private async credentialId(clientId: string, name: string): Promise<string> {
    const found = (await listFederatedCredentials(this.ctx, clientId)).find((c) => c.name === name);
    if (!found)
      throw new ManagementError(
        'federated_credential_not_found',
        `client ${clientId} has no federated credential named ${name}`,
      );
    return found.id;
  }

  private async audienceOf(url: string) {
    const found = await this.ctx.store.findAudience(url);
    if (!found) throw new ManagementError('audience_not_found', `audience ${url} is not registered`);
    return found;
  }
}

/**
 * The grants and federated credentials of the clients a plan creates, by client: they are created with their
 * client, in one operation.
 */
function partsOfNewClients(plan: Plan): {
  grants: Map<string, NewGrant[]>;
  credentials: Map<string, NewCredential[]>;
} {
  const grants = new Map<string, NewGrant[]>();
  const credentials = new Map<string, NewCredential[]>();
  for (const s of plan.steps)
    if (s.type === 'client' && s.action === 'create') {
      grants.set(s.client_id, []);
      credentials.set(s.client_id, []);
    }
  for (const s of plan.steps)
    if (s.action === 'create' && s.type === 'grant') grants.get(s.client_id)?.push(s);
    else if (s.action === 'create' && s.type === 'federated_credential')
      credentials.get(s.client_id)?.push(s);
  return { grants, credentials };
}

/**
 * Applies a plan through the management operations, on a store bound to one transaction: every step or none.
 * A client created gets a secret, returned here once. The new clients of consecutive steps are created
 * together, a thousand at a time (createCheckedClients: a few statements for them all, so that a big plan holds
 * the write lock briefly).
 */
export async function applyPlan(ctx: ManagementContext, plan: Plan): Promise<CreatedSecret[]> {
  if (plan.steps.length === 0) return [];
  const ofNew = partsOfNewClients(plan);
  const builtIn = adminAudienceUrl(ctx.config);
  return storeCall(() =>
    ctx.store.transaction(async (store) => {
      const tx: ManagementContext = { ...ctx, store };
      // A file may grant the admin audience on a store whose server has not made it yet.
      if (plan.steps.some((s) => s.type === 'grant' && s.action !== 'delete' && s.audience === builtIn))
        await ensureAdminAudience(tx);
      const applying = new Applying(tx, plan, ofNew.grants, ofNew.credentials);
      let creating: NewClientStep[] = [];
      for (const step of plan.steps) {
        if (step.type === 'client' && step.action === 'create') {
          creating.push(step);
          if (creating.length === CREATE_TOGETHER) {
            await applying.createClients(creating);
            creating = [];
          }
          continue;
        }
        await applying.createClients(creating);
        creating = [];
        if (step.type === 'audience') await applying.audience(step);
        else if (step.type === 'client') await applying.client(step);
        else if (step.type === 'federated_credential') await applying.credential(step);
        else await applying.grant(step);
      }
      await applying.createClients(creating);
      await applying.setResourceServers();
      return applying.secrets;
    }),
  );
}
