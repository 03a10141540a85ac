/**
 * Declarative configuration (MANAGEMENT.md, `tessera apply` / `tessera export`): the file format and its JSON
 * Schema, the export of the store as such a file, and the plan that makes the store match one. A file is
 * checked by the schema (its shape), then by the rules of the management operations (their check functions,
 * not copies), then for its cross-references; the plan is applied through the same operations, on a store
 * bound to one transaction, so that it is applied whole or not at all.
 */
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import { isMap, isScalar, isSeq, LineCounter, parseDocument, type Node } from 'yaml';
import { SIGNING_ALGS } from '../domain/algorithms.js';
import type { Audience, Client } from '../store/types.js';
import { checkNewAudience } from './audiences.js';
import { checkNewClient, createClient, deleteClient, updateClient } from './clients.js';
import { changedFields, type ManagementContext } from './context.js';
import { AUDIENCE_FIELDS, CLIENT_FIELDS } from './views.js';
import { FieldChecks, ManagementError, storeCall } from './errors.js';
import { addGrant, checkGrantAudience, removeGrant } from './grants.js';
import { removeAudience, addAudience, updateAudience } from './audiences.js';

// --- the file format ---

/** A grant of an audience to a client. Scopes and claims will be fields of it. */
export interface GrantEntry {
  audience: string;
}

/** An audience, known by its identifier (the URL). A field left out or null is the server default. */
export interface AudienceEntry {
  identifier: string;
  name?: string | null;
  token_ttl?: number | null;
  signing_alg?: string | null;
}

/** A client, known by its client_id; never its secret. A field left out or null is the default. */
export interface ClientEntry {
  client_id: string;
  name: string;
  /** True when left out. */
  enabled?: boolean;
  token_ttl?: number | null;
  quota_per_minute?: number | null;
  quota_per_day?: number | null;
  /** Every audience the client is granted; none when left out. */
  grants?: GrantEntry[];
}

export interface ConfigFile {
  $schema?: string;
  audiences?: AudienceEntry[];
  clients?: ClientEntry[];
}

const nullable = (schema: Record<string, unknown>) => ({ anyOf: [schema, { type: 'null' }] });

/**
 * The JSON Schema (draft 2020-12) of the file: its shape. The rules (lengths, ranges, URL forms) are the
 * management layer's, checked after it, so that a value is refused with the same words by every face.
 */
export function configSchema(): Record<string, unknown> {
  return {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    $id: 'urn:tessera:config:1',
    title: 'Tessera configuration (tessera apply / tessera export)',
    type: 'object',
    additionalProperties: false,
    properties: {
      $schema: { type: 'string', description: 'where an editor finds this schema' },
      audiences: {
        type: 'array',
        description: 'audiences, each known by its identifier',
        items: { $ref: '#/$defs/audience' },
      },
      clients: {
        type: 'array',
        description: 'clients, each known by its client_id, with every grant it has',
        items: { $ref: '#/$defs/client' },
      },
    },
    $defs: {
      audience: {
        type: 'object',
        additionalProperties: false,
        required: ['identifier'],
        properties: {
          identifier: { type: 'string', description: 'the audience URL (RFC 8707), matched exactly' },
          name: nullable({ type: 'string' }),
          token_ttl: nullable({ type: 'integer', description: 'token lifetime in seconds' }),
          signing_alg: nullable({ enum: [...SIGNING_ALGS] }),
        },
      },
      client: {
        type: 'object',
        additionalProperties: false,
        required: ['client_id', 'name'],
        properties: {
          client_id: { type: 'string' },
          name: { type: 'string' },
          enabled: { type: 'boolean', default: true },
          token_ttl: nullable({ type: 'integer', description: 'token lifetime in seconds' }),
          quota_per_minute: nullable({ type: 'integer', description: 'tokens a minute; null: no limit' }),
          quota_per_day: nullable({ type: 'integer', description: 'tokens a day; null: no limit' }),
          grants: { type: 'array', items: { $ref: '#/$defs/grant' } },
        },
      },
      grant: {
        type: 'object',
        additionalProperties: false,
        required: ['audience'],
        properties: { audience: { type: 'string', description: 'the identifier of an audience' } },
      },
    },
  };
}

let validator: ValidateFunction | undefined;
function validateShape(data: unknown): ErrorObject[] {
  validator ??= new Ajv2020({ allErrors: true, strict: true }).compile(configSchema());
  return validator(data) ? [] : [...(validator.errors ?? [])];
}

// --- export ---

const byCodeUnit = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

export function audienceEntry(a: Audience): AudienceEntry {
  return {
    identifier: a.url,
    ...(a.name === null ? {} : { name: a.name }),
    ...(a.tokenTtl === null ? {} : { token_ttl: a.tokenTtl }),
    ...(a.signingAlg === null ? {} : { signing_alg: a.signingAlg }),
  };
}

export function clientEntry(c: Client): ClientEntry {
  return {
    client_id: c.id,
    name: c.name,
    enabled: c.enabled,
    ...(c.tokenTtl === null ? {} : { token_ttl: c.tokenTtl }),
    ...(c.quotaPerMinute === null ? {} : { quota_per_minute: c.quotaPerMinute }),
    ...(c.quotaPerDay === null ? {} : { quota_per_day: c.quotaPerDay }),
    grants: [...c.audiences].sort(byCodeUnit).map((audience) => ({ audience })),
  };
}

/**
 * The store as a file (everything but secrets), in a stable order: audiences by identifier, clients by
 * client_id, grants by audience. A null field is left out (it is the default); `enabled` and `grants` are
 * always written.
 */
export async function exportConfig(ctx: ManagementContext): Promise<ConfigFile> {
  const [audiences, clients] = await storeCall(() =>
    Promise.all([ctx.store.listAudiences(), ctx.store.listClients()]),
  );
  return {
    audiences: [...audiences].sort((a, b) => byCodeUnit(a.url, b.url)).map(audienceEntry),
    clients: [...clients].sort((a, b) => byCodeUnit(a.id, b.id)).map(clientEntry),
  };
}

// --- reading a file ---

/** One thing wrong with a file, and where: a JSON pointer, and its line and column (from 1) when known. */
export interface FileProblem {
  pointer: string;
  line?: number;
  column?: number;
  message: string;
}

/** A file refused as a whole, with every problem found. */
export class ConfigFileError extends ManagementError {
  constructor(
    readonly file: string,
    readonly problems: FileProblem[],
  ) {
    const where = (p: FileProblem) =>
      p.line === undefined ? `${file}` : `${file}:${p.line}:${p.column ?? 1}`;
    super(
      'invalid_file',
      `${file}: ${problems.length} ${problems.length === 1 ? 'error' : 'errors'}, nothing was changed\n` +
        problems.map((p) => `  ${where(p)}: ${p.pointer ? `${p.pointer}: ` : ''}${p.message}`).join('\n'),
    );
  }
}

/** A file as read: its data, and where in its text a JSON pointer is. */
export interface ParsedFile {
  name: string;
  data: unknown;
  locate(pointer: string, key?: boolean): { line: number; column: number } | undefined;
}

const segments = (pointer: string): string[] =>
  pointer === ''
    ? []
    : pointer
        .slice(1)
        .split('/')
        .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
const escape = (segment: string | number): string => String(segment).replace(/~/g, '~0').replace(/\//g, '~1');
const pointerOf = (...path: (string | number)[]): string => path.map((s) => `/${escape(s)}`).join('');

/**
 * Parses YAML (and so JSON, which YAML 1.2 reads alike) keeping positions. Syntax errors (and duplicate keys)
 * refuse the file at once, each with its line and column.
 */
export function parseConfigFile(text: string, name: string): ParsedFile {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false });
  if (doc.errors.length > 0) {
    throw new ConfigFileError(
      name,
      doc.errors.map((e) => {
        const { line, col } = lineCounter.linePos(e.pos[0]);
        return { pointer: '', line, column: col, message: e.message };
      }),
    );
  }
  const position = (node: Node | null | undefined) => {
    const offset = node?.range?.[0];
    if (offset === undefined) return undefined;
    const { line, col } = lineCounter.linePos(offset);
    return { line, column: col };
  };
  return {
    name,
    data: doc.toJS(),
    locate(pointer, key = false) {
      let node: unknown = doc.contents;
      let found = node as Node | null;
      const path = segments(pointer);
      for (const [i, segment] of path.entries()) {
        if (isMap(node)) {
          const pair = node.items.find((p) => (isScalar(p.key) ? String(p.key.value) : p.key) === segment);
          if (!pair) break;
          if (key && i === path.length - 1) return position(pair.key as Node);
          node = pair.value;
        } else if (isSeq(node)) {
          node = node.items[Number(segment)];
        } else break;
        if (node === undefined || node === null) break;
        found = node as Node;
      }
      return position(found) ?? { line: 1, column: 1 };
    },
  };
}

// --- the plan ---

type Value = string | number | boolean | null;

export interface FieldChange {
  field: string;
  from: Value;
  to: Value;
}

/** One step of a plan, in the file's names; applyPlan runs it through the management operations. */
export type PlanStep =
  | { action: 'create'; type: 'audience'; identifier: string; values: Omit<AudienceEntry, 'identifier'> }
  | { action: 'update'; type: 'audience'; identifier: string; changes: FieldChange[] }
  | { action: 'delete'; type: 'audience'; identifier: string }
  | {
      action: 'create';
      type: 'client';
      client_id: string;
      values: Omit<ClientEntry, 'client_id' | 'grants'>;
    }
  | { action: 'update'; type: 'client'; client_id: string; changes: FieldChange[] }
  | { action: 'delete'; type: 'client'; client_id: string }
  | { action: 'create' | 'delete'; type: 'grant'; client_id: string; audience: string };

export interface Plan {
  file: string;
  prune: boolean;
  steps: PlanStep[];
  /** What the store has and the file does not, kept because --prune was not given. */
  kept: { audiences: number; clients: number; grants: number };
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
/** A value of the type the schema asks, else undefined (its error is the schema's). */
const str = (v: unknown) => (typeof v === 'string' ? v : undefined);
const int = (v: unknown) => (v === null ? null : Number.isInteger(v) ? (v as number) : undefined);
const nstr = (v: unknown) => (v === null ? null : str(v));

/** The message of a schema error, in words; unknown fields are named. */
function shapeProblem(e: ErrorObject, file: ParsedFile): FileProblem {
  let pointer = e.instancePath;
  let message = e.message ?? 'is not valid';
  let key = false;
  if (e.keyword === 'additionalProperties') {
    const property = (e.params as { additionalProperty: string }).additionalProperty;
    pointer = `${pointer}/${escape(property)}`;
    message = `unknown field "${property}"`;
    key = true;
  } else if (e.keyword === 'required') {
    message = `missing required field "${(e.params as { missingProperty: string }).missingProperty}"`;
  } else if (e.keyword === 'enum') {
    message = `must be one of ${(e.params as { allowedValues: unknown[] }).allowedValues.map((v) => JSON.stringify(v)).join(', ')}`;
  }
  return { pointer, ...file.locate(pointer, key), message };
}

/**
 * Checks a file whole (schema, rules, cross-references against the store) and computes what applying it
 * changes, field by field. Throws ConfigFileError with every problem; reads the store, writes nothing.
 */
export async function planApply(
  ctx: ManagementContext,
  file: ParsedFile,
  options: { prune?: boolean } = {},
): Promise<Plan> {
  const prune = options.prune ?? false;
  const problems: FileProblem[] = [];
  const shapeErrors = validateShape(file.data).map((e) => shapeProblem(e, file));
  // anyOf reports each branch; one message per place is enough.
  const seenPlaces = new Set<string>();
  for (const p of shapeErrors) {
    if (seenPlaces.has(p.pointer)) continue;
    seenPlaces.add(p.pointer);
    problems.push(p);
  }
  const refused = (pointer: string) =>
    [...seenPlaces].some((p) => p === pointer || p.startsWith(`${pointer}/`));
  const problem = (pointer: string, message: string) => {
    if (!refused(pointer)) problems.push({ pointer, ...file.locate(pointer), message });
  };
  /** A management refusal, placed at the file's field (the rules name `url`, the file `identifier`). */
  const ruleProblems = (base: string, checks: FieldChecks, names: Record<string, string> = {}) => {
    for (const error of checks.errors)
      problem(`${base}/${names[error.field ?? ''] ?? error.field}`, error.message);
  };

  const data = isObject(file.data) ? file.data : {};
  const audienceList = Array.isArray(data.audiences) ? (data.audiences as unknown[]) : [];
  const clientList = Array.isArray(data.clients) ? (data.clients as unknown[]) : [];
  const [stored, storedClients] = await storeCall(() =>
    Promise.all([ctx.store.listAudiences(), ctx.store.listClients()]),
  );
  const storedAudiences = new Map(stored.map((a) => [a.url, a]));

  // Audiences: each by the rules of a new one (the normalised values are what the store would hold).
  const wantAudiences = new Map<string, AudienceEntry>();
  const audienceAt = new Map<string, string>();
  const namedInFile = new Set<string>();
  audienceList.forEach((raw, i) => {
    if (!isObject(raw)) return;
    const base = pointerOf('audiences', i);
    const checks = new FieldChecks();
    const identifier = str(raw.identifier);
    if (identifier === undefined) return;
    const checked = checkNewAudience(
      {
        url: identifier,
        name: nstr(raw.name),
        tokenTtl: int(raw.token_ttl),
        signingAlg: nstr(raw.signing_alg),
      },
      checks,
    );
    ruleProblems(base, checks, { url: 'identifier' });
    // Named in the file, even if another of its fields is refused: its grants are not errors too.
    if (!checks.errors.some((e) => e.field === 'url')) namedInFile.add(checked.url);
    if (checks.errors.length > 0) return;
    const first = audienceAt.get(checked.url);
    if (first !== undefined) {
      problem(`${base}/identifier`, `audience ${checked.url} is already in the file (${first})`);
      return;
    }
    const at = file.locate(`${base}/identifier`);
    audienceAt.set(checked.url, at ? `line ${at.line}` : base);
    wantAudiences.set(checked.url, {
      identifier: checked.url,
      name: checked.name,
      token_ttl: checked.tokenTtl,
      signing_alg: checked.signingAlg,
    });
  });

  // Clients, and the cross-references of their grants.
  const wantClients = new Map<string, ClientEntry & { grants: GrantEntry[] }>();
  const clientAt = new Map<string, string>();
  clientList.forEach((raw, i) => {
    if (!isObject(raw)) return;
    const base = pointerOf('clients', i);
    const checks = new FieldChecks();
    const id = str(raw.client_id);
    const name = str(raw.name);
    if (id === undefined || name === undefined) return;
    const checked = checkNewClient(
      {
        id,
        name,
        enabled: typeof raw.enabled === 'boolean' ? raw.enabled : undefined,
        tokenTtl: int(raw.token_ttl),
        quotaPerMinute: int(raw.quota_per_minute),
        quotaPerDay: int(raw.quota_per_day),
      },
      checks,
    );
    ruleProblems(base, checks);
    const grants: string[] = [];
    (Array.isArray(raw.grants) ? (raw.grants as unknown[]) : []).forEach((grant, j) => {
      const audience = isObject(grant) ? str(grant.audience) : undefined;
      if (audience === undefined) return;
      const pointer = `${base}/grants/${j}/audience`;
      let url: string;
      try {
        url = checkGrantAudience(audience);
      } catch (error) {
        if (error instanceof ManagementError) return problem(pointer, error.message);
        throw error;
      }
      if (grants.includes(url)) return problem(pointer, `audience ${url} is granted twice`);
      if (!namedInFile.has(url)) {
        if (!storedAudiences.has(url))
          return problem(pointer, `audience ${url} is neither in the file nor registered`);
        if (prune) return problem(pointer, `audience ${url} is not in the file, so --prune would delete it`);
      }
      grants.push(url);
    });
    if (checks.errors.length > 0) return;
    const first = clientAt.get(checked.id);
    if (first !== undefined) {
      problem(`${base}/client_id`, `client ${checked.id} is already in the file (${first})`);
      return;
    }
    const at = file.locate(`${base}/client_id`);
    clientAt.set(checked.id, at ? `line ${at.line}` : base);
    wantClients.set(checked.id, {
      client_id: checked.id,
      name: checked.name,
      enabled: checked.enabled,
      token_ttl: checked.tokenTtl,
      quota_per_minute: checked.quotaPerMinute,
      quota_per_day: checked.quotaPerDay,
      grants: grants.sort(byCodeUnit).map((audience) => ({ audience })),
    });
  });

  if (problems.length > 0) {
    const order = (p: FileProblem) => (p.line ?? 0) * 1e6 + (p.column ?? 0);
    throw new ConfigFileError(
      file.name,
      problems.sort((a, b) => order(a) - order(b)),
    );
  }

  // The differences, in a stable order: audiences, then clients (each with its grants), then deletions.
  const steps: PlanStep[] = [];
  const kept = { audiences: 0, clients: 0, grants: 0 };
  for (const url of [...wantAudiences.keys()].sort(byCodeUnit)) {
    const want = wantAudiences.get(url)!;
    const have = storedAudiences.get(url);
    if (!have) {
      const { identifier: _, ...values } = audienceEntry({
        url,
        name: want.name ?? null,
        tokenTtl: want.token_ttl ?? null,
        signingAlg: (want.signing_alg ?? null) as Audience['signingAlg'],
        createdAt: '',
        updatedAt: '',
      });
      steps.push({ action: 'create', type: 'audience', identifier: url, values });
      continue;
    }
    const changes = changedFields(AUDIENCE_FIELDS, audienceEntry(have), want) as FieldChange[];
    if (changes.length > 0) steps.push({ action: 'update', type: 'audience', identifier: url, changes });
  }
  const haveClients = new Map(storedClients.map((c) => [c.id, c]));
  for (const id of [...wantClients.keys()].sort(byCodeUnit)) {
    const { grants, client_id: _, ...want } = wantClients.get(id)!;
    const have = haveClients.get(id);
    const wanted = grants.map((g) => g.audience);
    if (!have) {
      const values = Object.fromEntries(Object.entries(want).filter(([, v]) => v !== null)) as Omit<
        ClientEntry,
        'client_id' | 'grants'
      >;
      steps.push({ action: 'create', type: 'client', client_id: id, values });
      for (const audience of wanted) steps.push({ action: 'create', type: 'grant', client_id: id, audience });
      continue;
    }
    const changes = changedFields(CLIENT_FIELDS, clientEntry(have), want) as FieldChange[];
    if (changes.length > 0) steps.push({ action: 'update', type: 'client', client_id: id, changes });
    const granted = new Set(have.audiences);
    for (const audience of wanted)
      if (!granted.has(audience)) steps.push({ action: 'create', type: 'grant', client_id: id, audience });
    const wantedSet = new Set(wanted);
    for (const audience of [...have.audiences].sort(byCodeUnit)) {
      if (wantedSet.has(audience)) continue;
      if (prune) steps.push({ action: 'delete', type: 'grant', client_id: id, audience });
      else kept.grants++;
    }
  }
  for (const client of [...storedClients].sort((a, b) => byCodeUnit(a.id, b.id))) {
    if (wantClients.has(client.id)) continue;
    if (prune) steps.push({ action: 'delete', type: 'client', client_id: client.id });
    else kept.clients++;
  }
  for (const url of [...storedAudiences.keys()].sort(byCodeUnit)) {
    if (wantAudiences.has(url)) continue;
    if (prune) steps.push({ action: 'delete', type: 'audience', identifier: url });
    else kept.audiences++;
  }
  return { file: file.name, prune, steps, kept };
}

/** A new client's secret, shown once. */
export interface CreatedSecret {
  client_id: string;
  client_secret: string;
}

const audienceFields = (values: Record<string, Value | undefined>) => ({
  ...('name' in values ? { name: values.name as string | null } : {}),
  ...('token_ttl' in values ? { tokenTtl: values.token_ttl as number | null } : {}),
  ...('signing_alg' in values ? { signingAlg: values.signing_alg as string | null } : {}),
});

const clientFields = (values: Record<string, Value | undefined>) => ({
  ...('name' in values ? { name: values.name as string } : {}),
  ...('enabled' in values ? { enabled: values.enabled as boolean } : {}),
  ...('token_ttl' in values ? { tokenTtl: values.token_ttl as number | null } : {}),
  ...('quota_per_minute' in values ? { quotaPerMinute: values.quota_per_minute as number | null } : {}),
  ...('quota_per_day' in values ? { quotaPerDay: values.quota_per_day as number | null } : {}),
});

const changed = (changes: FieldChange[]) => Object.fromEntries(changes.map((c) => [c.field, c.to]));

/**
 * Applies a plan through the management operations, on a store bound to one transaction: every step or none.
 * A client created gets a secret, returned here once.
 */
export async function applyPlan(ctx: ManagementContext, plan: Plan): Promise<CreatedSecret[]> {
  if (plan.steps.length === 0) return [];
  // The grants of a new client are created with it, in one operation.
  const newClients = new Set(
    plan.steps.flatMap((s) => (s.type === 'client' && s.action === 'create' ? [s.client_id] : [])),
  );
  const grantsOfNew = new Map<string, string[]>();
  for (const s of plan.steps)
    if (s.type === 'grant' && s.action === 'create' && newClients.has(s.client_id))
      grantsOfNew.set(s.client_id, [...(grantsOfNew.get(s.client_id) ?? []), s.audience]);
  return storeCall(() =>
    ctx.store.transaction(async (store) => {
      const tx: ManagementContext = { ...ctx, store };
      const secrets: CreatedSecret[] = [];
      for (const step of plan.steps) {
        if (step.type === 'audience') {
          if (step.action === 'create')
            await addAudience(tx, { url: step.identifier, ...audienceFields(step.values) });
          else if (step.action === 'update')
            await updateAudience(tx, step.identifier, audienceFields(changed(step.changes)));
          else await removeAudience(tx, step.identifier);
        } else if (step.type === 'client') {
          if (step.action === 'create') {
            const { secret } = await createClient(tx, {
              id: step.client_id,
              ...clientFields(step.values),
              name: step.values.name,
              grants: grantsOfNew.get(step.client_id) ?? [],
            });
            secrets.push({ client_id: step.client_id, client_secret: secret });
          } else if (step.action === 'update')
            await updateClient(tx, step.client_id, clientFields(changed(step.changes)));
          else await deleteClient(tx, step.client_id);
        } else if (step.action === 'create') {
          if (!newClients.has(step.client_id)) await addGrant(tx, step.client_id, step.audience);
        } else await removeGrant(tx, step.client_id, step.audience);
      }
      return secrets;
    }),
  );
}

// --- the plan in words ---

const show = (value: Value): string => (typeof value === 'string' ? JSON.stringify(value) : String(value));

/** The plan, one line per change: `+ audience URL (...)`, `~ client ID: field from → to`, `- grant ID → URL`. */
export function planLines(plan: Plan): string[] {
  const lines: string[] = [];
  const values = (v: Record<string, Value | undefined>) => {
    const shown = Object.entries(v).filter(([, x]) => x !== undefined && x !== null);
    return shown.length ? ` (${shown.map(([k, x]) => `${k} ${show(x!)}`).join(', ')})` : '';
  };
  for (const s of plan.steps) {
    const id = s.type === 'audience' ? s.identifier : s.client_id;
    if (s.type === 'grant')
      lines.push(`${s.action === 'create' ? '+' : '-'} grant ${s.client_id} → ${s.audience}`);
    else if (s.action === 'create') lines.push(`+ ${s.type} ${id}${values(s.values)}`);
    else if (s.action === 'delete')
      lines.push(
        `- ${s.type} ${id}${s.type === 'client' ? ' (with its grants)' : ' (with every grant of it)'}`,
      );
    else
      for (const c of s.changes) lines.push(`~ ${s.type} ${id}: ${c.field} ${show(c.from)} → ${show(c.to)}`);
  }
  return lines;
}

/** How many resources a plan creates, updates and deletes. */
export function planSummary(plan: Plan): { create: number; update: number; delete: number } {
  const count = (action: string) => plan.steps.filter((s) => s.action === action).length;
  return { create: count('create'), update: count('update'), delete: count('delete') };
}
