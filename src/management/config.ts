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
import { MAX_JSON_DEPTH, tooDeepAt } from '../domain/json-depth.js';
import { validateClaims } from '../domain/validate.js';
import {
  AUTH_METHOD_NAMES,
  authMethodProblem,
  checkJwksKeys,
  type AuthMethodName,
  type PublicJwks,
} from '../domain/client-keys.js';
import type { Audience, AudienceScope, Client } from '../store/types.js';
import { checkNewAudience } from './audiences.js';
import { checkNewClient, createClient, deleteClient, updateClient } from './clients.js';
import { changedFields, type ManagementContext } from './context.js';
import { deepPlaceInText } from './file-depth.js';
import { AUDIENCE_FIELDS, CLIENT_FIELDS } from './views.js';
import { field, FieldChecks, ManagementError, storeCall } from './errors.js';
import {
  ADMIN_AUDIENCE_SCOPES,
  adminAudienceUrl,
  ensureAdminAudience,
  isBuiltInAudience,
} from './builtin.js';
import { checkGrantAudience, checkGrantScopes, putGrant, removeGrant } from './grants.js';

/** An audience's fields but those the plan looks at (an audience the plan makes, the built-in one). */
const ADMIN_AUDIENCE_STUB: Audience = {
  id: '',
  url: '',
  name: null,
  tokenTtl: null,
  signingAlg: null,
  scopes: ADMIN_AUDIENCE_SCOPES,
  createdAt: '',
  updatedAt: '',
};
import { removeAudience, addAudience, updateAudience } from './audiences.js';

// --- the file format ---

/** A grant of an audience to a client, with the audience's scopes it carries (none when left out). */
export interface GrantEntry {
  audience: string;
  scopes?: string[];
  /** Custom claims for this audience's tokens, over the client's. */
  claims?: Record<string, unknown> | null;
}

/** A scope an audience defines; a description only when it has one. */
export interface ScopeEntry {
  name: string;
  description?: string | null;
}

/** An audience, known by its identifier (the URL). A field left out or null is the server default. */
export interface AudienceEntry {
  identifier: string;
  name?: string | null;
  token_ttl?: number | null;
  signing_alg?: string | null;
  /** The scopes it defines, sorted by name; none when left out. */
  scopes?: ScopeEntry[];
}

/** Scopes as a file has them: sorted, a description only where there is one, and no list when empty. */
const scopeEntries = (scopes: readonly AudienceScope[]): ScopeEntry[] | undefined =>
  scopes.length === 0
    ? undefined
    : scopes.map((s) =>
        s.description === null ? { name: s.name } : { name: s.name, description: s.description },
      );

/** A client, known by its client_id; never its secret. A field left out or null is the default. */
export interface ClientEntry {
  client_id: string;
  name: string;
  description?: string | null;
  /** True when left out. */
  enabled?: boolean;
  token_ttl?: number | null;
  quota_per_minute?: number | null;
  quota_per_day?: number | null;
  /** Custom claims in every token of the client. */
  claims?: Record<string, unknown> | null;
  /** client_secret_basic when left out; private_key_jwt with jwks or jwks_uri. */
  token_endpoint_auth_method?: AuthMethodName;
  /** private_key_jwt: the client's public keys (a JWK Set). */
  jwks?: PublicJwks | null;
  /** private_key_jwt: where the client publishes its public keys. */
  jwks_uri?: string | null;
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
          scopes: {
            type: 'array',
            description: 'the permissions this audience defines (RFC 6749 §3.3 scope tokens)',
            items: {
              type: 'object',
              additionalProperties: false,
              required: ['name'],
              properties: { name: { type: 'string' }, description: nullable({ type: 'string' }) },
            },
          },
        },
      },
      client: {
        type: 'object',
        additionalProperties: false,
        required: ['client_id', 'name'],
        properties: {
          client_id: { type: 'string' },
          name: { type: 'string' },
          description: nullable({ type: 'string' }),
          enabled: { type: 'boolean', default: true },
          token_ttl: nullable({ type: 'integer', description: 'token lifetime in seconds' }),
          quota_per_minute: nullable({ type: 'integer', description: 'tokens a minute; null: no limit' }),
          quota_per_day: nullable({ type: 'integer', description: 'tokens a day; null: no limit' }),
          claims: nullable({ type: 'object', description: 'custom claims in every token of the client' }),
          token_endpoint_auth_method: {
            enum: [...AUTH_METHOD_NAMES],
            default: 'client_secret_basic',
            description: 'how the client authenticates (RFC 7591); private_key_jwt needs jwks or jwks_uri',
          },
          jwks: nullable({
            type: 'object',
            required: ['keys'],
            properties: { keys: { type: 'array', items: { type: 'object' }, minItems: 1 } },
            description: 'private_key_jwt: the public keys, a JWK Set (RFC 7517)',
          }),
          jwks_uri: nullable({ type: 'string', description: 'private_key_jwt: where the public keys are' }),
          grants: { type: 'array', items: { $ref: '#/$defs/grant' } },
        },
      },
      grant: {
        type: 'object',
        additionalProperties: false,
        required: ['audience'],
        properties: {
          audience: { type: 'string', description: 'the identifier of an audience' },
          scopes: {
            type: 'array',
            items: { type: 'string' },
            description: "scopes the grant carries, each one the audience's; none when left out",
          },
          claims: nullable({
            type: 'object',
            description: "custom claims for this audience, over the client's",
          }),
        },
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
    ...(a.scopes.length === 0 ? {} : { scopes: scopeEntries(a.scopes) }),
  };
}

export function clientEntry(c: Client): ClientEntry {
  return {
    client_id: c.id,
    name: c.name,
    ...(c.description === null ? {} : { description: c.description }),
    enabled: c.enabled,
    ...(c.tokenTtl === null ? {} : { token_ttl: c.tokenTtl }),
    ...(c.quotaPerMinute === null ? {} : { quota_per_minute: c.quotaPerMinute }),
    ...(c.quotaPerDay === null ? {} : { quota_per_day: c.quotaPerDay }),
    ...(c.claims === null ? {} : { claims: c.claims }),
    ...(c.authMethod === 'client_secret_basic' ? {} : { token_endpoint_auth_method: c.authMethod }),
    ...(c.jwks === null ? {} : { jwks: c.jwks }),
    ...(c.jwksUri === null ? {} : { jwks_uri: c.jwksUri }),
    grants: [...c.grants]
      .sort((a, b) => byCodeUnit(a.audience, b.audience))
      .map((g) => ({
        audience: g.audience,
        ...(g.scopes.length === 0 ? {} : { scopes: g.scopes }),
        ...(g.claims === null ? {} : { claims: g.claims }),
      })),
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
  // The built-in admin audience is the server's, not configuration: its grants are exported, it is not.
  return {
    audiences: audiences
      .filter((a) => !isBuiltInAudience(ctx, a.url))
      .sort((a, b) => byCodeUnit(a.url, b.url))
      .map(audienceEntry),
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

/** A file's place nested too deep (MANAGEMENT.md: 32 levels, as a JSON body). */
const TOO_DEEP = `is an object or list at level ${MAX_JSON_DEPTH + 1}; a file nests at most ${MAX_JSON_DEPTH} levels, itself being level 1`;

/**
 * Parses YAML (and so JSON, which YAML 1.2 reads alike) keeping positions. Syntax errors (and duplicate keys)
 * refuse the file at once, each with its line and column.
 */
export function parseConfigFile(text: string, name: string): ParsedFile {
  // A file nests at most 32 levels, as every JSON body does (MANAGEMENT.md). On the text first: the composer
  // (parseDocument) recurses per level, and what reads the data after it (JSON.stringify) too.
  const deep = deepPlaceInText(text, MAX_JSON_DEPTH);
  if (deep) throw new ConfigFileError(name, [{ ...deep, message: TOO_DEEP }]);
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
  const file: ParsedFile = {
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
  // An alias nests its anchor's value where it stands, deeper than the text shows.
  const pointer = tooDeepAt(file.data, MAX_JSON_DEPTH);
  if (pointer !== undefined)
    throw new ConfigFileError(name, [{ pointer, ...file.locate(pointer), message: TOO_DEEP }]);
  return file;
}

// --- the plan ---

/** A field's value in a plan: a scalar, or a list (an audience's scopes, a grant's). */
type Value = string | number | boolean | null | ScopeEntry[] | Record<string, unknown> | PublicJwks;

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
  | {
      action: 'create';
      type: 'grant';
      client_id: string;
      audience: string;
      scopes: string[];
      claims?: Record<string, unknown>;
    }
  | { action: 'update'; type: 'grant'; client_id: string; audience: string; changes: FieldChange[] }
  | { action: 'delete'; type: 'grant'; client_id: string; audience: string };

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
  /** A management refusal, placed at the file's field (the rules use the file's and the API's names). */
  const ruleProblems = (base: string, checks: FieldChecks) => {
    for (const error of checks.errors) problem(`${base}/${error.field ?? ''}`, error.message);
  };

  const data = isObject(file.data) ? file.data : {};
  const audienceList = Array.isArray(data.audiences) ? (data.audiences as unknown[]) : [];
  const clientList = Array.isArray(data.clients) ? (data.clients as unknown[]) : [];
  const [stored, storedClients] = await storeCall(() =>
    Promise.all([ctx.store.listAudiences(), ctx.store.listClients()]),
  );
  const builtIn = adminAudienceUrl(ctx.config);
  // The built-in audience is known even where the server has not started yet, and it is never pruned.
  const storedAudiences = new Map(stored.filter((a) => a.url !== builtIn).map((a) => [a.url, a]));
  /** The scopes an audience defines, for the grants' scopes (audiences the file creates define none yet). */
  const scopesOf = (url: string): Audience => {
    if (url === builtIn) return { ...ADMIN_AUDIENCE_STUB, url: builtIn };
    // The file's scopes where the file has the audience (they are what the store will have), else the store's.
    const inFile = wantAudiences.get(url);
    if (inFile)
      return {
        ...ADMIN_AUDIENCE_STUB,
        url,
        scopes: (inFile.scopes ?? []).map((s) => ({ name: s.name, description: s.description ?? null })),
      };
    return storedAudiences.get(url) ?? { ...ADMIN_AUDIENCE_STUB, url, scopes: [] };
  };

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
        scopes: Array.isArray(raw.scopes)
          ? (raw.scopes as unknown[]).flatMap((s) =>
              isObject(s) && typeof s.name === 'string'
                ? [{ name: s.name, description: nstr(s.description) ?? null }]
                : [],
            )
          : undefined,
      },
      checks,
    );
    ruleProblems(base, checks);
    if (checked.url === builtIn) {
      problem(`${base}/identifier`, `audience ${builtIn} is Tessera's admin API: it is built in`);
      return;
    }
    // Named in the file, even if another of its fields is refused: its grants are not errors too.
    if (!checks.errors.some((e) => e.field === 'identifier')) namedInFile.add(checked.url);
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
      scopes: scopeEntries(checked.scopes ?? []),
    });
  });

  // Clients, and the cross-references of their grants.
  const wantClients = new Map<string, ClientEntry & { grants: GrantEntry[] }>();
  const clientAt = new Map<string, string>();
  /** Inline key sets to import (with jose, asynchronously) once every client is read. */
  const keySets: { pointer: string; jwks: PublicJwks }[] = [];
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
        description: nstr(raw.description),
        claims: raw.claims === null ? null : isObject(raw.claims) ? raw.claims : undefined,
        authMethod: str(raw.token_endpoint_auth_method),
        jwks: raw.jwks === null ? null : isObject(raw.jwks) ? raw.jwks : undefined,
        jwksUri: nstr(raw.jwks_uri),
      },
      checks,
      ctx.config.production,
      ctx.config.jwksAllowPrivate,
    );
    ruleProblems(base, checks);
    if (checks.errors.length === 0) {
      const keysProblem = authMethodProblem(checked.authMethod, checked.jwks, checked.jwksUri);
      if (keysProblem !== undefined)
        problem(`${base}/${checked.jwks !== null ? 'jwks' : 'token_endpoint_auth_method'}`, keysProblem);
      else if (checked.jwks !== null) keySets.push({ pointer: `${base}/jwks`, jwks: checked.jwks });
    }
    const grants: GrantEntry[] = [];
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
      if (grants.some((g) => g.audience === url)) return problem(pointer, `audience ${url} is granted twice`);
      if (!namedInFile.has(url) && url !== builtIn) {
        if (!storedAudiences.has(url))
          return problem(pointer, `audience ${url} is neither in the file nor registered`);
        if (prune) return problem(pointer, `audience ${url} is not in the file, so --prune would delete it`);
      }
      const asked = isObject(grant) && Array.isArray(grant.scopes) ? (grant.scopes as unknown[]) : [];
      // Each scope by the grants' rule, so that a refusal names the scope's own place in the file.
      let refusedScope = false;
      asked.forEach((scope, k) => {
        if (typeof scope !== 'string') return;
        try {
          checkGrantScopes(scopesOf(url), [scope]);
        } catch (error) {
          if (!(error instanceof ManagementError)) throw error;
          problem(`${base}/grants/${j}/scopes/${k}`, error.message);
          refusedScope = true;
        }
      });
      if (refusedScope) return;
      const scopes = checkGrantScopes(
        scopesOf(url),
        asked.filter((s): s is string => typeof s === 'string'),
      );
      let claims: Record<string, unknown> | null = null;
      if (isObject(grant) && isObject(grant.claims)) {
        try {
          claims = field('claims', () => validateClaims(grant.claims));
        } catch (error) {
          if (error instanceof ManagementError) return problem(`${base}/grants/${j}/claims`, error.message);
          throw error;
        }
      }
      grants.push({ audience: url, scopes, ...(claims === null ? {} : { claims }) });
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
      description: checked.description,
      claims: checked.claims ?? null,
      enabled: checked.enabled,
      token_ttl: checked.tokenTtl,
      quota_per_minute: checked.quotaPerMinute,
      quota_per_day: checked.quotaPerDay,
      // The default as the export leaves it out, so that an exported file plans no change.
      ...(checked.authMethod === 'client_secret_basic'
        ? {}
        : { token_endpoint_auth_method: checked.authMethod }),
      jwks: checked.jwks,
      jwks_uri: checked.jwksUri,
      grants: grants.sort((a, b) => byCodeUnit(a.audience, b.audience)),
    });
  });
  for (const { pointer, jwks } of keySets) {
    try {
      await checkJwksKeys(jwks);
    } catch (error) {
      problem(pointer, (error as Error).message);
    }
  }

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
        ...ADMIN_AUDIENCE_STUB,
        url,
        name: want.name ?? null,
        tokenTtl: want.token_ttl ?? null,
        signingAlg: (want.signing_alg ?? null) as Audience['signingAlg'],
        scopes: (want.scopes ?? []).map((s) => ({ name: s.name, description: s.description ?? null })),
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
    const createGrant = (g: GrantEntry): PlanStep => ({
      action: 'create',
      type: 'grant',
      client_id: id,
      audience: g.audience,
      scopes: g.scopes ?? [],
      ...(g.claims ? { claims: g.claims } : {}),
    });
    if (!have) {
      const values = Object.fromEntries(Object.entries(want).filter(([, v]) => v !== null)) as Omit<
        ClientEntry,
        'client_id' | 'grants'
      >;
      steps.push({ action: 'create', type: 'client', client_id: id, values });
      for (const g of grants) steps.push(createGrant(g));
      continue;
    }
    const changes = changedFields(CLIENT_FIELDS, clientEntry(have), want) as FieldChange[];
    if (changes.length > 0) steps.push({ action: 'update', type: 'client', client_id: id, changes });
    const granted = new Map(have.grants.map((g) => [g.audience, g]));
    for (const g of grants) {
      const current = granted.get(g.audience);
      if (current === undefined) {
        steps.push(createGrant(g));
        continue;
      }
      // Scopes as one string (`a b`), as a token has them; claims as objects.
      const changes = changedFields(
        ['scopes', 'claims'],
        { scopes: current.scopes.join(' '), claims: current.claims },
        { scopes: (g.scopes ?? []).join(' '), claims: g.claims ?? null },
      ) as FieldChange[];
      if (changes.length > 0)
        steps.push({ action: 'update', type: 'grant', client_id: id, audience: g.audience, changes });
    }
    const wantedSet = new Set(grants.map((g) => g.audience));
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
  ...('scopes' in values ? { scopes: (values.scopes as ScopeEntry[] | null) ?? [] } : {}),
});

const clientFields = (values: Record<string, Value | undefined>) => ({
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
  const grantsOfNew = new Map<
    string,
    { audience: string; scopes: string[]; claims?: Record<string, unknown> }[]
  >();
  for (const s of plan.steps)
    if (s.type === 'grant' && s.action === 'create' && newClients.has(s.client_id))
      grantsOfNew.set(s.client_id, [...(grantsOfNew.get(s.client_id) ?? []), s]);
  const builtIn = adminAudienceUrl(ctx.config);
  return storeCall(() =>
    ctx.store.transaction(async (store) => {
      const tx: ManagementContext = { ...ctx, store };
      const secrets: CreatedSecret[] = [];
      // A file may grant the admin audience on a store whose server has not made it yet.
      if (plan.steps.some((s) => s.type === 'grant' && s.action !== 'delete' && s.audience === builtIn))
        await ensureAdminAudience(tx);
      const audienceOf = async (url: string) => {
        const found = await store.findAudience(url);
        if (!found) throw new ManagementError('audience_not_found', `audience ${url} is not registered`);
        return found;
      };
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
              grants: (grantsOfNew.get(step.client_id) ?? []).map((g) => g.audience),
              scopes: Object.fromEntries(
                (grantsOfNew.get(step.client_id) ?? []).map((g) => [g.audience, g.scopes]),
              ),
              grantClaims: Object.fromEntries(
                (grantsOfNew.get(step.client_id) ?? []).flatMap((g) =>
                  g.claims ? [[g.audience, g.claims]] : [],
                ),
              ),
            });
            // A private_key_jwt client has no secret to show.
            if (secret !== undefined) secrets.push({ client_id: step.client_id, client_secret: secret });
          } else if (step.action === 'update')
            await updateClient(tx, step.client_id, clientFields(changed(step.changes)));
          else await deleteClient(tx, step.client_id);
        } else if (step.action === 'create') {
          if (!newClients.has(step.client_id))
            await putGrant(tx, step.client_id, await audienceOf(step.audience), {
              scopes: step.scopes,
              claims: step.claims ?? null,
            });
        } else if (step.action === 'update') {
          const to = changed(step.changes);
          await putGrant(tx, step.client_id, await audienceOf(step.audience), {
            ...('scopes' in to ? { scopes: String(to.scopes).split(' ').filter(Boolean) } : {}),
            ...('claims' in to ? { claims: to.claims as Record<string, unknown> | null } : {}),
          });
        } else await removeGrant(tx, step.client_id, step.audience);
      }
      return secrets;
    }),
  );
}

// --- the plan in words ---

const show = (value: Value): string =>
  Array.isArray(value)
    ? value.map((s) => s.name).join(' ')
    : typeof value === 'string' || (typeof value === 'object' && value !== null)
      ? JSON.stringify(value)
      : String(value);

/** The plan, one line per change: `+ audience URL (...)`, `~ client ID: field from → to`, `- grant ID → URL`. */
export function planLines(plan: Plan): string[] {
  const lines: string[] = [];
  const values = (v: Record<string, Value | undefined>) => {
    const shown = Object.entries(v).filter(([, x]) => x !== undefined && x !== null);
    return shown.length ? ` (${shown.map(([k, x]) => `${k} ${show(x!)}`).join(', ')})` : '';
  };
  for (const s of plan.steps) {
    const id = s.type === 'audience' ? s.identifier : s.client_id;
    if (s.type === 'grant') {
      if (s.action === 'create')
        lines.push(
          `+ grant ${s.client_id} → ${s.audience}${s.scopes.length ? ` (scopes ${show(s.scopes.join(' '))})` : ''}`,
        );
      else if (s.action === 'delete') lines.push(`- grant ${s.client_id} → ${s.audience}`);
      else
        for (const c of s.changes)
          lines.push(`~ grant ${s.client_id} → ${s.audience}: ${c.field} ${show(c.from)} → ${show(c.to)}`);
    } else if (s.action === 'create') lines.push(`+ ${s.type} ${id}${values(s.values)}`);
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
