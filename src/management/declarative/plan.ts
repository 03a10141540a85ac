/**
 * The plan of `tessera apply`: what makes the store match a checked file, step by step and field by field.
 * The store is read (audiences, clients with their grants), the file checked against it (check.ts), then each
 * resource compared with what the file asks for. Planning writes nothing.
 */
import type { Audience, Client } from '../../store/types.js';
import { adminAudienceUrl } from '../builtin.js';
import { holdsSecret } from '../clients.js';
import { changedFields, nowOf, type FieldChange, type ManagementContext } from '../context.js';
import { storeCall } from '../errors.js';
import { AUDIENCE_FIELDS, CLIENT_FIELDS, FEDERATED_FIELDS } from '../views.js';
import { checkFile, type SecretFiles, type WantedClient } from './check.js';
import {
  audienceEntry,
  clientEntry,
  credentialEntry,
  credentialView,
  type CredentialView,
} from './export.js';
import {
  audienceOfEntry,
  byCodeUnit,
  type AudienceEntry,
  type ClientEntry,
  type FederatedCredentialEntry,
  type GrantEntry,
  type ParsedFile,
} from './file.js';

/** One step of a plan, in the file's names; applyPlan runs it through the management operations. */
export type PlanStep =
  | { action: 'create'; type: 'audience'; identifier: string; values: Omit<AudienceEntry, 'identifier'> }
  | { action: 'update'; type: 'audience'; identifier: string; changes: FieldChange[] }
  | { action: 'delete'; type: 'audience'; identifier: string }
  | {
      action: 'create';
      type: 'client';
      client_id: string;
      values: Omit<ClientEntry, 'client_id' | 'grants' | 'federated_credentials'>;
    }
  | { action: 'update'; type: 'client'; client_id: string; changes: FieldChange[] }
  | { action: 'delete'; type: 'client'; client_id: string }
  | {
      action: 'create';
      type: 'grant';
      client_id: string;
      audience: string;
      scopes: string[];
      claims?: Record<string, unknown>;
      token_exchange?: boolean;
    }
  | { action: 'update'; type: 'grant'; client_id: string; audience: string; changes: FieldChange[] }
  | { action: 'delete'; type: 'grant'; client_id: string; audience: string }
  | {
      action: 'create';
      type: 'federated_credential';
      client_id: string;
      name: string;
      values: Omit<FederatedCredentialEntry, 'name'>;
    }
  | {
      action: 'update';
      type: 'federated_credential';
      client_id: string;
      name: string;
      changes: FieldChange[];
    }
  | { action: 'delete'; type: 'federated_credential'; client_id: string; name: string };

/** What the store has and the file does not, kept because --prune was not given. */
interface Kept {
  audiences: number;
  clients: number;
  grants: number;
}

export interface Plan {
  file: string;
  prune: boolean;
  steps: PlanStep[];
  kept: Kept;
}

/**
 * The secrets a plan gives its clients (their client_secret_file, read when it was planned), by client_id: beside
 * the plan, not in it, so that no printing of a plan (its JSON, its lines) can carry one.
 */
const givenSecrets = new WeakMap<Plan, ReadonlyMap<string, string>>();

/** The secret a plan gives a client (from its client_secret_file), if it gives one. */
export const givenSecretOf = (plan: Plan, clientId: string): string | undefined =>
  givenSecrets.get(plan)?.get(clientId);

const sortedKeys = (map: ReadonlyMap<string, unknown>): string[] => [...map.keys()].sort(byCodeUnit);

/** The audience fields the export leaves out at their default (which is not null). */
const AUDIENCE_DEFAULTS = { resource_server_client_ids: [], token_profile: 'rfc9068' };

/** The audiences the file creates or changes, by identifier. */
function audienceSteps(
  wanted: ReadonlyMap<string, AudienceEntry>,
  stored: ReadonlyMap<string, Audience>,
): PlanStep[] {
  const steps: PlanStep[] = [];
  for (const url of sortedKeys(wanted)) {
    const want = wanted.get(url)!;
    const have = stored.get(url);
    if (!have) {
      // As the export would write it: no null field, no empty list.
      const { identifier: _, ...values } = audienceEntry(audienceOfEntry(want));
      steps.push({ action: 'create', type: 'audience', identifier: url, values });
      continue;
    }
    // A list the file leaves out is its default: a change back to it reads `[a] → []`, not `→ null`.
    const changes = changedFields(
      AUDIENCE_FIELDS,
      { ...AUDIENCE_DEFAULTS, ...audienceEntry(have) },
      { ...AUDIENCE_DEFAULTS, ...want },
    );
    if (changes.length > 0) steps.push({ action: 'update', type: 'audience', identifier: url, changes });
  }
  return steps;
}

const createGrant = (clientId: string, g: GrantEntry): PlanStep => ({
  action: 'create',
  type: 'grant',
  client_id: clientId,
  audience: g.audience,
  scopes: g.scopes ?? [],
  ...(g.claims ? { claims: g.claims } : {}),
  ...(g.token_exchange ? { token_exchange: true } : {}),
});

/** The grants of a stored client that the file creates, changes, or (with --prune) deletes. */
function grantSteps(have: Client, grants: readonly GrantEntry[], prune: boolean, kept: Kept): PlanStep[] {
  const steps: PlanStep[] = [];
  const granted = new Map(have.grants.map((g) => [g.audience, g]));
  for (const g of grants) {
    const current = granted.get(g.audience);
    if (current === undefined) {
      steps.push(createGrant(have.id, g));
      continue;
    }
    // Scopes as one string (`a b`), as a token has them; claims as objects.
    const changes = changedFields(
      ['scopes', 'claims', 'token_exchange'],
      { scopes: current.scopes.join(' '), claims: current.claims, token_exchange: current.tokenExchange },
      {
        scopes: (g.scopes ?? []).join(' '),
        claims: g.claims ?? null,
        token_exchange: g.token_exchange ?? false,
      },
    );
    if (changes.length > 0)
      steps.push({ action: 'update', type: 'grant', client_id: have.id, audience: g.audience, changes });
  }
  const wanted = new Set(grants.map((g) => g.audience));
  for (const audience of [...have.audiences].sort(byCodeUnit)) {
    if (wanted.has(audience)) continue;
    if (prune) steps.push({ action: 'delete', type: 'grant', client_id: have.id, audience });
    else kept.grants++;
  }
  return steps;
}

/** The client fields the export leaves out at their default (which is not null). */
const CLIENT_DEFAULTS = {
  dpop_bound_access_tokens: false,
  tls_client_certificate_bound_access_tokens: false,
};

/** The fields of a federated credential that a plan compares (all but its name, which is how it is known). */
const CREDENTIAL_FIELDS = FEDERATED_FIELDS.filter((f) => f !== 'name');

const createCredential = (clientId: string, c: CredentialView, issuer: string): PlanStep => {
  const { name, ...values } = credentialEntry(c, issuer);
  return { action: 'create', type: 'federated_credential', client_id: clientId, name, values };
};

/**
 * The federated credentials of a stored client the file removes (every one it does not list: like jwks, they are
 * a part of the client, the file lists all of them), and those it adds or changes, by name.
 */
function credentialSteps(
  have: Client,
  wanted: readonly CredentialView[],
  issuer: string,
): { removed: PlanStep[]; written: PlanStep[] } {
  const current = new Map(have.federatedCredentials.map((c) => [c.name, credentialView(c)]));
  const names = new Set(wanted.map((c) => c.name));
  const removed: PlanStep[] = [...current.keys()]
    .filter((name) => !names.has(name))
    .sort(byCodeUnit)
    .map((name) => ({ action: 'delete', type: 'federated_credential', client_id: have.id, name }));
  const written: PlanStep[] = [];
  for (const want of wanted) {
    const stored = current.get(want.name);
    if (stored === undefined) {
      written.push(createCredential(have.id, want, issuer));
      continue;
    }
    const changes = changedFields(CREDENTIAL_FIELDS, stored, want);
    if (changes.length > 0)
      written.push({
        action: 'update',
        type: 'federated_credential',
        client_id: have.id,
        name: want.name,
        changes,
      });
  }
  return { removed, written };
}

/**
 * The steps of one client the file has: created with its federated credentials and grants; or its changes, in
 * an order that works when it moves between secrets, keys and federation: credentials removed, then the client
 * changed (a switch to private_key_jwt deletes its secrets), then credentials added or changed, then grants.
 */
function clientSteps(
  wanted: WantedClient,
  have: Client | undefined,
  prune: boolean,
  kept: Kept,
  issuer: string,
  given: { secret: string; now: number; from: string } | undefined,
): PlanStep[] {
  const { grants, client_id: id, federated_credentials: credentials, ...want } = wanted;
  if (!have) {
    const values = Object.fromEntries(Object.entries(want).filter(([, v]) => v !== null)) as Omit<
      ClientEntry,
      'client_id' | 'grants' | 'federated_credentials'
    >;
    return [
      { action: 'create', type: 'client', client_id: id, values },
      ...credentials.map((c) => createCredential(id, c, issuer)),
      ...grants.map((g) => createGrant(id, g)),
    ];
  }
  const { removed, written } = credentialSteps(have, credentials, issuer);
  const steps: PlanStep[] = [...removed];
  // A flag the file leaves out is its default: a change back to it reads `true → false`, not `→ null`.
  const changes = changedFields(
    CLIENT_FIELDS,
    { ...CLIENT_DEFAULTS, ...clientEntry(have, issuer) },
    { ...CLIENT_DEFAULTS, ...want },
  );
  // Its secret from the file, unless it is one of the client's already: then the client's secrets are replaced by it.
  if (given !== undefined && !holdsSecret(have, given.secret, given.now))
    // `to` says where the secret is (never the secret): its file, or the secrets given beside the file.
    changes.push({ field: 'client_secret', from: null, to: want.client_secret_file ?? given.from });
  if (changes.length > 0) steps.push({ action: 'update', type: 'client', client_id: id, changes });
  return [...steps, ...written, ...grantSteps(have, grants, prune, kept)];
}

/** What the store has and the file does not: deleted with --prune (clients, then audiences), else kept. */
function leftOutSteps(
  wanted: { audiences: ReadonlyMap<string, unknown>; clients: ReadonlyMap<string, unknown> },
  stored: { audiences: ReadonlyMap<string, Audience>; clients: readonly Client[] },
  prune: boolean,
  kept: Kept,
): PlanStep[] {
  const steps: PlanStep[] = [];
  for (const client of [...stored.clients].sort((a, b) => byCodeUnit(a.id, b.id))) {
    if (wanted.clients.has(client.id)) continue;
    if (prune) steps.push({ action: 'delete', type: 'client', client_id: client.id });
    else kept.clients++;
  }
  for (const url of sortedKeys(stored.audiences)) {
    if (wanted.audiences.has(url)) continue;
    if (prune) steps.push({ action: 'delete', type: 'audience', identifier: url });
    else kept.audiences++;
  }
  return steps;
}

/** A checked file and what the store has. */
interface Checked {
  stored: { audiences: Map<string, Audience>; clients: Client[] };
  wanted: Awaited<ReturnType<typeof checkFile>>;
}

/** The store read, and the file checked against it. */
async function checkAgainstStore(
  ctx: ManagementContext,
  file: ParsedFile,
  prune: boolean,
  secretFiles: SecretFiles | undefined,
): Promise<Checked> {
  const [audiences, clients] = await storeCall(() =>
    Promise.all([ctx.store.listAudiences(), ctx.store.listClients()]),
  );
  const builtIn = adminAudienceUrl(ctx.config);
  // The built-in audience is known even where the server has not started yet, and it is never pruned.
  const stored = {
    audiences: new Map(audiences.filter((a) => a.url !== builtIn).map((a) => [a.url, a])),
    clients,
  };
  const wanted = await checkFile(ctx, file, {
    builtIn,
    audiences: stored.audiences,
    clients: new Set(clients.map((c) => c.id)),
    prune,
    ...(secretFiles === undefined ? {} : { secretFiles }),
  });
  return { stored, wanted };
}

/**
 * The differences, in a stable order: audiences, then clients (each with its grants), then deletions. Each
 * client the file asks for is let go once its steps are made (a plan of 200 000 clients is made while what the
 * file asks for is let go, not beside all of it).
 */
function planSteps(
  ctx: ManagementContext,
  { stored, wanted }: Checked,
  prune: boolean,
  kept: Kept,
): PlanStep[] {
  const leftOut = leftOutSteps(wanted, stored, prune, kept);
  const steps = audienceSteps(wanted.audiences, stored.audiences);
  const byId = new Map(stored.clients.map((c) => [c.id, c]));
  const now = nowOf(ctx);
  for (const id of sortedKeys(wanted.clients)) {
    const client = wanted.clients.get(id)!;
    wanted.clients.delete(id);
    const secret = wanted.secrets.get(id);
    const given = secret === undefined ? undefined : { secret, now, from: wanted.secretsFrom };
    for (const step of clientSteps(client, byId.get(id), prune, kept, ctx.config.issuer, given))
      steps.push(step);
  }
  for (const step of leftOut) steps.push(step);
  return steps;
}

/**
 * Checks a file whole (schema, rules, cross-references against the store) and computes what applying it
 * changes, field by field. Throws ConfigFileError with every problem; reads the store, writes nothing. The file
 * (its text and data) is not held once it is checked: not a function that awaits, so that nothing keeps it
 * while the steps are made.
 */
export function planApply(
  ctx: ManagementContext,
  file: ParsedFile,
  /** `secretFiles`: how the clients' client_secret_file are read; without it a file naming one is refused. */
  options: { prune?: boolean; secretFiles?: SecretFiles } = {},
): Promise<Plan> {
  const prune = options.prune ?? false;
  const name = file.name;
  return checkAgainstStore(ctx, file, prune, options.secretFiles).then((checked) => {
    const kept: Kept = { audiences: 0, clients: 0, grants: 0 };
    const plan: Plan = { file: name, prune, steps: planSteps(ctx, checked, prune, kept), kept };
    if (checked.wanted.secrets.size > 0) givenSecrets.set(plan, checked.wanted.secrets);
    return plan;
  });
}
