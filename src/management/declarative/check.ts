/**
 * A file checked whole before anything is planned: its shape by the schema, each entry by the rules of the
 * management operations (their check functions, not copies), and the cross-references of its grants against
 * the file and the store. Every problem is collected and placed (a JSON pointer, a line and column), then the
 * file is refused with all of them at once.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { usesSecrets } from '../../domain/client-auth/index.js';
import { givenSecretProblem } from '../../domain/secrets.js';
import { validateClaims } from '../../domain/validate.js';
import { credentialProblem, tlsIdentityField } from '../../domain/client-auth/certificate-registration.js';
import { TLS_IDENTITY_KINDS } from '../../domain/known-client.js';
import { checkJwksKeys, MAX_FEDERATED_CREDENTIALS, type PublicJwks } from '../../domain/client-auth/index.js';
import type { Audience } from '../../store/types.js';
import { checkNewAudience, type AudienceInput } from '../audiences.js';
import { ADMIN_AUDIENCE_SCOPES } from '../builtin.js';
import { checkNewClient, type ClientInput } from '../clients.js';
import type { ManagementContext } from '../context.js';
import { field, FieldChecks, ManagementError } from '../errors.js';
import { checkNewCredentialFields, type FederatedCredentialInput } from '../federation.js';
import { checkGrantAudience, checkGrantScopes, checkGrantTokenExchange } from '../grants.js';
import type { CredentialView } from './export.js';
import {
  audienceOfEntry,
  byCodeUnit,
  ConfigFileError,
  pointerOf,
  scopeEntries,
  type AudienceEntry,
  type ClientEntry,
  type FileProblem,
  type GrantEntry,
  type ParsedFile,
} from './file.js';
import { shapeProblems } from './schema.js';

/**
 * A client the file asks for, in the rules' normal form, with its grants sorted by audience and its federated
 * credentials by name (each with every field, defaults filled in).
 */
export type WantedClient = Omit<ClientEntry, 'federated_credentials'> & {
  grants: GrantEntry[];
  federated_credentials: CredentialView[];
};

/** What a checked file asks for: its audiences by identifier, its clients by client_id. */
interface Wanted {
  audiences: Map<string, AudienceEntry>;
  clients: Map<string, WantedClient>;
  /**
   * The secrets of the clients that name a client_secret_file or have one given beside the file, by client_id
   * (read, checked, never printed).
   */
  secrets: Map<string, string>;
  /** Where the secrets given beside the file came from (`--secrets FILE`), for the plan's words. */
  secretsFrom: string;
}

/** How the clients' client_secret_file are read (planApply's `secretFiles`). */
export interface SecretFiles {
  /** What a relative client_secret_file is relative to: the apply file's directory. */
  baseDir: string;
  /** Reads one (utf8); fs.readFileSync unless a caller gives its own. */
  read?: (path: string) => string;
  /**
   * Every new client that authenticates with a secret must name one (TESSERA_APPLY_FILE: a secret made for it
   * could be shown to no one).
   */
  required?: boolean;
  /**
   * Secrets given beside the file, by client_id (`tessera apply --secrets`: those an import carried over), each
   * taken as a client_secret_file's would be; `from` names where they came from, for the problems.
   */
  given?: { secrets: ReadonlyMap<string, string>; from: string };
}

/** What the checks of a file need to know of the store. */
interface Known {
  /** The built-in admin audience's identifier: grantable whether or not the server has made it yet. */
  builtIn: string;
  /** The stored audiences but the built-in one, by identifier. */
  audiences: ReadonlyMap<string, Audience>;
  /** The stored clients' ids: an audience's resource servers are clients of the file or of the store. */
  clients: ReadonlySet<string>;
  /** With --prune a grant of an audience the file does not have is refused (the audience would go). */
  prune: boolean;
  /** How client_secret_file is read; without it, a file that names one is refused (the caller cannot read files). */
  secretFiles?: SecretFiles;
}

/**
 * The problems of a file, each placed; a place the schema refused (or a place inside it) gets no other
 * problem, its value being of the wrong shape for the rules.
 */
class Problems {
  private readonly list: FileProblem[];
  private readonly refusedShapes: ReadonlySet<string>;

  constructor(private readonly file: ParsedFile) {
    this.list = shapeProblems(file);
    this.refusedShapes = new Set(this.list.map((p) => p.pointer));
  }

  add(pointer: string, message: string): void {
    for (const refused of this.refusedShapes)
      if (refused === pointer || refused.startsWith(`${pointer}/`)) return;
    this.list.push({ pointer, ...this.file.locate(pointer), message });
  }

  /** Management refusals, placed at the file's fields (the rules use the file's and the API's names). */
  addRules(base: string, checks: FieldChecks): void {
    for (const error of checks.errors) this.add(`${base}/${error.field ?? ''}`, error.message);
  }

  /** Runs a rule; a refusal is added at `pointer`, and undefined returned. */
  check<T>(pointer: string, run: () => T): { value: T } | undefined {
    try {
      return { value: run() };
    } catch (error) {
      if (!(error instanceof ManagementError)) throw error;
      this.add(pointer, error.message);
      return undefined;
    }
  }

  /** Refuses the file with every problem, in the order of the text, if it has any. */
  throwIfAny(): void {
    if (this.list.length === 0) return;
    const order = (p: FileProblem) => (p.line ?? 0) * 1e6 + (p.column ?? 0);
    throw new ConfigFileError(
      this.file.name,
      this.list.sort((a, b) => order(a) - order(b)),
    );
  }
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const listOf = (value: unknown): unknown[] => (Array.isArray(value) ? value : []);
/** A value of the type the schema asks, else undefined (its error is the schema's). */
const str = (v: unknown) => (typeof v === 'string' ? v : undefined);
const int = (v: unknown) => (v === null ? null : Number.isInteger(v) ? (v as number) : undefined);
const nstr = (v: unknown) => (v === null ? null : str(v));

/** An audience's entry as the rules take it, each value only if it is of the type the schema asks. */
const audienceInput = (url: string, raw: Record<string, unknown>): AudienceInput => ({
  url,
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
  resourceServerClientIds: Array.isArray(raw.resource_server_client_ids)
    ? (raw.resource_server_client_ids as unknown[]).filter((id): id is string => typeof id === 'string')
    : undefined,
  tokenProfile: nstr(raw.token_profile),
});

/** A client's entry as the rules take it, each value only if it is of the type the schema asks. */
const clientInput = (id: string, name: string, raw: Record<string, unknown>): ClientInput => ({
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
  dpopBoundAccessTokens:
    typeof raw.dpop_bound_access_tokens === 'boolean' ? raw.dpop_bound_access_tokens : undefined,
  tlsIdentity: tlsIdentityOf(raw),
  certificateBoundAccessTokens:
    typeof raw.tls_client_certificate_bound_access_tokens === 'boolean'
      ? raw.tls_client_certificate_bound_access_tokens
      : undefined,
});

/** An entry's tls_client_auth_* fields by kind, in the file's order (a second one is refused at its place). */
function tlsIdentityOf(raw: Record<string, unknown>): ClientInput['tlsIdentity'] {
  const given: NonNullable<ClientInput['tlsIdentity']> = {};
  for (const [key, value] of Object.entries(raw)) {
    const kind = TLS_IDENTITY_KINDS.find((k) => tlsIdentityField(k) === key);
    if (kind !== undefined) given[kind] = nstr(value);
  }
  return Object.keys(given).length === 0 ? undefined : given;
}

/** A federated credential's entry as the rules take it, each value only if it is of the type the schema asks. */
const credentialInput = (raw: Record<string, unknown>): FederatedCredentialInput => ({
  name: str(raw.name),
  issuer: str(raw.issuer),
  subject: str(raw.subject),
  jwks: raw.jwks === null ? null : isObject(raw.jwks) ? raw.jwks : undefined,
  jwksUri: nstr(raw.jwks_uri),
  audience: nstr(raw.audience),
  claims: raw.claims === null ? null : isObject(raw.claims) ? raw.claims : undefined,
  maxLifetime: int(raw.max_lifetime),
  once: raw.once === null || typeof raw.once === 'boolean' ? raw.once : undefined,
});

type CheckedClient = ReturnType<typeof checkNewClient>;

/** A checked client as the plan compares it with the store's (clientEntry's form), its grants sorted. */
const wantedClient = (
  checked: CheckedClient,
  grants: GrantEntry[],
  credentials: CredentialView[],
): WantedClient => ({
  client_id: checked.id,
  name: checked.name,
  description: checked.description,
  claims: checked.claims ?? null,
  enabled: checked.enabled,
  token_ttl: checked.tokenTtl,
  quota_per_minute: checked.quotaPerMinute,
  quota_per_day: checked.quotaPerDay,
  // The default as the export leaves it out, so that an exported file plans no change.
  ...(checked.authMethod === 'client_secret_basic' ? {} : { token_endpoint_auth_method: checked.authMethod }),
  jwks: checked.jwks,
  jwks_uri: checked.jwksUri,
  federated_credentials: credentials.sort((a, b) => byCodeUnit(a.name, b.name)),
  // As the export writes them: only when true, only the one set.
  ...(checked.dpopBoundAccessTokens ? { dpop_bound_access_tokens: true } : {}),
  ...(checked.tlsClientAuth === null
    ? {}
    : { [tlsIdentityField(checked.tlsClientAuth.kind)]: checked.tlsClientAuth.value }),
  ...(checked.certificateBoundAccessTokens ? { tls_client_certificate_bound_access_tokens: true } : {}),
  // A copy of its length: the list the grants were pushed to has room for 17 (150 bytes a client of 200 000).
  grants: grants.sort((a, b) => byCodeUnit(a.audience, b.audience)).slice(),
});

/** A file being checked: what it asks for so far, and its problems. */
class FileCheck {
  readonly problems: Problems;
  readonly audiences = new Map<string, AudienceEntry>();
  readonly clients = new Map<string, WantedClient>();
  readonly secrets = new Map<string, string>();
  /** Every audience identifier the file names, even one whose other fields are refused. */
  private readonly named = new Set<string>();
  /**
   * Where each audience and client first stood (its entry's index in its list), to say so of a second one. An
   * index, not the entry's pointer: a file may have 200 000 clients.
   */
  private readonly audienceAt = new Map<string, number>();
  private readonly clientAt = new Map<string, number>();
  /** Every client id the file names, even one whose other fields are refused. */
  private readonly namedClients = new Set<string>();
  /** The resource servers each audience names, checked once every client is read (places as in the file). */
  private readonly resourceServers: { pointer: string; ids: unknown[] }[] = [];
  /**
   * One string of each audience identifier the grants name: the file's text has one per grant (200 000 clients
   * granted one audience hold it once, not 200 000 times).
   */
  private readonly identifiers = new Map<string, string>();
  /** Inline key sets to import (with jose, asynchronously) once every client is read. */
  private readonly keySets: { pointer: string; jwks: PublicJwks }[] = [];

  constructor(
    private readonly ctx: ManagementContext,
    private readonly file: ParsedFile,
    private readonly known: Known,
  ) {
    this.problems = new Problems(file);
  }

  /**
   * Where an entry first stood: `line 3`. Found only for a problem: a place is looked up in yaml's document of
   * the file, which a JSON file does not make unless it has to (json-file.ts).
   */
  private firstAt(base: string, key: string): string {
    const at = this.file.locate(`${base}/${key}`);
    return at ? `line ${at.line}` : base;
  }

  /** An audience, by the rules of a new one (the normalised values are what the store would hold). */
  readAudience(raw: unknown, i: number): void {
    if (!isObject(raw)) return;
    const base = pointerOf('audiences', i);
    const checks = new FieldChecks();
    const identifier = str(raw.identifier);
    if (identifier === undefined) return;
    const checked = checkNewAudience(audienceInput(identifier, raw), checks);
    this.problems.addRules(base, checks);
    const { builtIn } = this.known;
    if (checked.url === builtIn) {
      this.problems.add(`${base}/identifier`, `audience ${builtIn} is Tessera's admin API: it is built in`);
      return;
    }
    // Named in the file, even if another of its fields is refused: its grants are not errors too.
    if (!checks.errors.some((e) => e.field === 'identifier')) this.named.add(checked.url);
    if (checks.errors.length > 0) return;
    if (Array.isArray(raw.resource_server_client_ids))
      this.resourceServers.push({
        pointer: `${base}/resource_server_client_ids`,
        ids: raw.resource_server_client_ids as unknown[],
      });
    const first = this.audienceAt.get(checked.url);
    if (first !== undefined) {
      this.problems.add(
        `${base}/identifier`,
        `audience ${checked.url} is already in the file (${this.firstAt(pointerOf('audiences', first), 'identifier')})`,
      );
      return;
    }
    this.audienceAt.set(checked.url, i);
    this.audiences.set(checked.url, {
      identifier: checked.url,
      name: checked.name,
      token_ttl: checked.tokenTtl,
      signing_alg: checked.signingAlg,
      scopes: scopeEntries(checked.scopes ?? []),
      // As the export writes it: only when it names any.
      ...(checked.resourceServerClientIds?.length
        ? { resource_server_client_ids: checked.resourceServerClientIds }
        : {}),
      // As the export writes it: only when not the default.
      ...(checked.tokenProfile ? { token_profile: checked.tokenProfile } : {}),
    });
  }

  /** The secrets given beside the file for clients it does not have: a mistake, refused. */
  checkGivenSecrets(): void {
    const given = this.known.secretFiles?.given;
    if (given === undefined) return;
    for (const id of given.secrets.keys())
      if (!this.namedClients.has(id))
        this.problems.add('', `${given.from} has a secret for client ${id}, which is not in the file`);
  }

  /**
   * The resource servers of the file's audiences: each a client of the file, or a registered one that stays (with
   * --prune, a client left out of the file would be deleted). Refusals name the id's place.
   */
  checkResourceServers(): void {
    for (const { pointer, ids } of this.resourceServers)
      ids.forEach((id, j) => {
        if (typeof id !== 'string' || this.namedClients.has(id)) return;
        if (!this.known.clients.has(id))
          this.problems.add(`${pointer}/${j}`, `client ${id} is neither in the file nor registered`);
        else if (this.known.prune)
          this.problems.add(`${pointer}/${j}`, `client ${id} is not in the file, so --prune would delete it`);
      });
  }

  /** A client by the rules of a new one, and its grants (read even when the client is refused). */
  readClient(raw: unknown, i: number): void {
    if (!isObject(raw)) return;
    const base = pointerOf('clients', i);
    const checks = new FieldChecks();
    const id = str(raw.client_id);
    const name = str(raw.name);
    if (id === undefined || name === undefined) return;
    this.namedClients.add(id);
    const { production, jwksAllowPrivate } = this.ctx.config;
    const checked = checkNewClient(clientInput(id, name, raw), checks, production, jwksAllowPrivate);
    this.problems.addRules(base, checks);
    if (checks.errors.length === 0) this.checkAuthMethod(base, checked);
    const credentials = this.readCredentials(raw.federated_credentials, base, checked);
    const grants: GrantEntry[] = [];
    listOf(raw.grants).forEach((grant, j) => this.readGrant(grant, `${base}/grants/${j}`, grants));
    if (checks.errors.length > 0 || credentials === undefined) return;
    const secretFile = str(raw.client_secret_file);
    const secret = this.readSecret(base, checked, secretFile);
    if (secret === null) return;
    const first = this.clientAt.get(checked.id);
    if (first !== undefined) {
      this.problems.add(
        `${base}/client_id`,
        `client ${checked.id} is already in the file (${this.firstAt(pointerOf('clients', first), 'client_id')})`,
      );
      return;
    }
    this.clientAt.set(checked.id, i);
    const wanted = wantedClient(checked, grants, credentials);
    if (secret !== undefined) {
      this.secrets.set(checked.id, secret);
      wanted.client_secret_file = secretFile;
    }
    this.clients.set(checked.id, wanted);
  }

  /**
   * A client's secret from its client_secret_file (relative to the file's directory): undefined when it names none,
   * null when it is refused (unreadable, too weak, for a method without secrets; placed at the field). A new client
   * that needs a secret and names no file is refused when every one must (TESSERA_APPLY_FILE).
   */
  private readSecret(
    base: string,
    client: CheckedClient,
    file: string | undefined,
  ): string | undefined | null {
    const secretFiles = this.known.secretFiles;
    const at = `${base}/client_secret_file`;
    const given = secretFiles?.given?.secrets.get(client.id);
    if (given !== undefined) {
      const from = secretFiles!.given!.from;
      if (file !== undefined) {
        this.problems.add(at, `client ${client.id} has a secret in ${from} too: give it one secret, not two`);
        return null;
      }
      if (!usesSecrets(client.authMethod)) {
        this.problems.add(
          `${base}/client_id`,
          `${from} has a secret for client ${client.id}, which authenticates with ${client.authMethod}`,
        );
        return null;
      }
      const problem = givenSecretProblem(given);
      if (problem !== undefined) {
        this.problems.add(`${base}/client_id`, `${from}: client ${client.id}: ${problem}`);
        return null;
      }
      return given;
    }
    if (file === undefined) {
      if (secretFiles?.required && usesSecrets(client.authMethod) && !this.known.clients.has(client.id)) {
        this.problems.add(
          `${base}/client_id`,
          `client ${client.id} is new and authenticates with a secret: name its client_secret_file (a mounted secret), since a secret made for it could be shown to no one`,
        );
        return null;
      }
      return undefined;
    }
    if (!usesSecrets(client.authMethod)) {
      this.problems.add(at, `a client authenticating with ${client.authMethod} has no secret`);
      return null;
    }
    if (secretFiles === undefined) {
      this.problems.add(at, 'client_secret_file is read only from a file on this machine');
      return null;
    }
    let text: string;
    try {
      text = (secretFiles.read ?? ((p: string) => readFileSync(p, 'utf8')))(
        resolve(secretFiles.baseDir, file),
      );
    } catch (error) {
      this.problems.add(at, `cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
      return null;
    }
    const secret = text.trim();
    const problem = givenSecretProblem(secret);
    if (problem !== undefined) {
      this.problems.add(at, `${file}: ${problem}`);
      return null;
    }
    return secret;
  }

  /**
   * A client's federated credentials, each by the rules of a new one (its fields placed at
   * `<client>/federated_credentials/<i>/<field>`), names unique within the client, at most 10, and only for a
   * private_key_jwt client without jwks or jwks_uri. Undefined when one is refused.
   */
  private readCredentials(list: unknown, base: string, client: CheckedClient): CredentialView[] | undefined {
    const items = listOf(list);
    if (items.length === 0) return [];
    const at = `${base}/federated_credentials`;
    let refused = false;
    if (client.authMethod !== 'private_key_jwt' || client.jwks !== null || client.jwksUri !== null) {
      this.problems.add(
        at,
        'federated credentials are for a private_key_jwt client without jwks or jwks_uri',
      );
      refused = true;
    }
    if (items.length > MAX_FEDERATED_CREDENTIALS) {
      this.problems.add(
        at,
        `a client has at most ${MAX_FEDERATED_CREDENTIALS} federated credentials; ${items.length} are given`,
      );
      refused = true;
    }
    const credentials: CredentialView[] = [];
    const named = new Map<string, string>();
    items.forEach((raw, i) => {
      // Not an object, or without a field it needs: the schema's problem.
      if (!isObject(raw) || [raw.name, raw.issuer, raw.subject].some((v) => typeof v !== 'string')) {
        refused = true;
        return;
      }
      const place = `${at}/${i}`;
      const checks = new FieldChecks();
      const fields = checkNewCredentialFields(this.ctx, credentialInput(raw), checks);
      this.problems.addRules(place, checks);
      if (checks.errors.length > 0) {
        refused = true;
        return;
      }
      const first = named.get(fields.name);
      if (first !== undefined) {
        this.problems.add(
          `${place}/name`,
          `federated credential ${fields.name} is already in this client (${this.firstAt(first, 'name')})`,
        );
        refused = true;
        return;
      }
      named.set(fields.name, place);
      if (fields.jwks !== null) this.keySets.push({ pointer: `${place}/jwks`, jwks: fields.jwks });
      credentials.push({
        name: fields.name,
        issuer: fields.issuer,
        jwks: fields.jwks,
        jwks_uri: fields.jwksUri,
        subject: fields.subject,
        audience: fields.audience,
        claims: fields.claims,
        max_lifetime: fields.maxLifetime,
        once: fields.once,
      });
    });
    return refused ? undefined : credentials;
  }

  /**
   * A client's method and credentials together (domain/client-auth/certificate-registration.ts's rule, the management
   * operations'), placed at the field at fault; an inline key set is kept to be imported once every client is read.
   */
  private checkAuthMethod(base: string, client: CheckedClient): void {
    const problem = credentialProblem(client);
    if (problem !== undefined) this.problems.add(`${base}/${problem.field}`, problem.message);
    else if (client.jwks !== null) this.keySets.push({ pointer: `${base}/jwks`, jwks: client.jwks });
  }

  /** A grant at `base`: its audience (in the file, or registered), its scopes (the audience's), its claims. */
  private readGrant(grant: unknown, base: string, grants: GrantEntry[]): void {
    const audience = isObject(grant) ? str(grant.audience) : undefined;
    if (!isObject(grant) || audience === undefined) return;
    const pointer = `${base}/audience`;
    const checkedUrl = this.problems.check(pointer, () => checkGrantAudience(audience));
    if (checkedUrl === undefined) return;
    const url = this.oneCopy(checkedUrl.value);
    if (grants.some((g) => g.audience === url))
      return this.problems.add(pointer, `audience ${url} is granted twice`);
    if (!this.named.has(url) && url !== this.known.builtIn) {
      if (!this.known.audiences.has(url))
        return this.problems.add(pointer, `audience ${url} is neither in the file nor registered`);
      if (this.known.prune)
        return this.problems.add(pointer, `audience ${url} is not in the file, so --prune would delete it`);
    }
    const asked = listOf(grant.scopes);
    // Each scope by the grants' rule, so that a refusal names the scope's own place in the file.
    let refusedScope = false;
    asked.forEach((scope, k) => {
      if (typeof scope !== 'string') return;
      const checked = this.problems.check(`${base}/scopes/${k}`, () =>
        checkGrantScopes(this.scopesOf(url), [scope]),
      );
      if (checked === undefined) refusedScope = true;
    });
    if (refusedScope) return;
    const scopes = checkGrantScopes(
      this.scopesOf(url),
      asked.filter((s): s is string => typeof s === 'string'),
    );
    let claims: Record<string, unknown> | null = null;
    if (isObject(grant.claims)) {
      const checked = this.problems.check(`${base}/claims`, () =>
        field('claims', () => validateClaims(grant.claims)),
      );
      if (checked === undefined) return;
      claims = checked.value;
    }
    const exchange = grant.token_exchange === true;
    if (
      exchange &&
      !this.problems.check(`${base}/token_exchange`, () => checkGrantTokenExchange(this.ctx, url))
    )
      return;
    grants.push({
      audience: url,
      scopes,
      ...(claims === null ? {} : { claims }),
      ...(exchange ? { token_exchange: true } : {}),
    });
  }

  private oneCopy(url: string): string {
    const kept = this.identifiers.get(url);
    if (kept !== undefined) return kept;
    this.identifiers.set(url, url);
    return url;
  }

  /** The scopes an audience defines, for the grants' scopes: the file's where it has it, else the store's. */
  private scopesOf(url: string): Audience {
    if (url === this.known.builtIn)
      return { ...audienceOfEntry({ identifier: url }), scopes: ADMIN_AUDIENCE_SCOPES };
    const inFile = this.audiences.get(url);
    if (inFile) return audienceOfEntry(inFile);
    return this.known.audiences.get(url) ?? audienceOfEntry({ identifier: url });
  }

  /** The inline key sets, imported with jose: a key it cannot use is refused at its client's `jwks`. */
  async checkKeySets(): Promise<void> {
    for (const { pointer, jwks } of this.keySets) {
      try {
        await checkJwksKeys(jwks);
      } catch (error) {
        this.problems.add(pointer, (error as Error).message);
      }
    }
  }
}

/**
 * Checks a file whole (schema, rules, cross-references against what the store has) and returns what it asks
 * for. Throws ConfigFileError with every problem.
 */
export async function checkFile(ctx: ManagementContext, file: ParsedFile, known: Known): Promise<Wanted> {
  const check = new FileCheck(ctx, file, known);
  const data = isObject(file.data) ? file.data : {};
  // Audiences first: the grants of the clients refer to them.
  // Each entry is let go once it is read (the file is planned once, see ParsedFile): what it asks for is kept
  // instead, not beside it (for 200 000 clients, some 60 MB).
  const audiences = listOf(data.audiences);
  for (let i = 0; i < audiences.length; i++) {
    check.readAudience(audiences[i], i);
    audiences[i] = undefined;
  }
  const clients = listOf(data.clients);
  for (let i = 0; i < clients.length; i++) {
    check.readClient(clients[i], i);
    clients[i] = undefined;
  }
  check.checkResourceServers();
  check.checkGivenSecrets();
  await check.checkKeySets();
  check.problems.throwIfAny();
  return {
    audiences: check.audiences,
    clients: check.clients,
    secrets: check.secrets,
    secretsFrom: known.secretFiles?.given?.from ?? '',
  };
}
