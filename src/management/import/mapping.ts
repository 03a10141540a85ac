/**
 * The mapping's common part (docs/import.md): the apply file being built (audiences by identifier, clients by id,
 * grants merged), ids made from names, and the checks of a source's shape, each problem at its place. What the
 * values must be (URLs, names, lengths) is apply's to check: the file an import writes goes through `tessera
 * apply`'s validation, and the import has no rule of the store's of its own — it only leaves out, with a line,
 * what it knows Tessera cannot take (an audience that is no URL, a scope that is no scope token).
 */
import { PRIVATE_MEMBERS } from '../../domain/client-auth/jwks.js';
import {
  MAX_TOKEN_TTL,
  MIN_TOKEN_TTL,
  RESERVED_CLAIMS,
  validateAudienceUrl,
  validateScopeName,
} from '../../domain/validate.js';
import {
  byCodeUnit,
  type AudienceEntry,
  type ClientEntry,
  type ConfigFile,
  type GrantEntry,
  type ScopeEntry,
} from '../declarative/file.js';
import type { Problems, Place } from './source.js';
import type { Report } from './report.js';

/** The token profiles of an audience (MANAGEMENT.md, Token profiles): rfc9068 when left out. */
type TokenProfile = 'auth0' | 'keycloak';

/** An audience entry with its token profile (the apply file's `token_profile`). */
export type ImportedAudience = AudienceEntry & { token_profile?: TokenProfile };

/** Values by name, as a caller gives them: a Map, or an object (its own members only are read). */
export type Named = ReadonlyMap<string, string> | Readonly<Record<string, string>>;

/** What every source's mapping is given. */
export interface MappingOptions {
  /** Values of the Deploy CLI's `##NAME##` placeholders. */
  keywords?: Named;
  /** Audience URLs of names that are no URL: a Keycloak client id, an Auth0 or Hydra audience like `my-api`. */
  audiences?: Named;
  /** Whether secrets found in the source are carried (`--secrets FILE`); else those clients get new ones. */
  carrySecrets?: boolean;
}

/**
 * The options as the mapping reads them: names in Maps, never looked up on an object, where a name a source
 * chooses (`constructor`, `toString`, `__proto__`) would find what every object inherits.
 */
export interface Mapping {
  keywords: ReadonlyMap<string, string>;
  audiences: ReadonlyMap<string, string>;
  carrySecrets: boolean;
}

const namedMap = (named: Named | undefined): ReadonlyMap<string, string> =>
  named instanceof Map
    ? named
    : // Object.entries: its own enumerable members only, whatever their names.
      new Map(Object.entries((named ?? {}) as Record<string, string>));

export const mappingOf = (options: MappingOptions): Mapping => ({
  keywords: namedMap(options.keywords),
  audiences: namedMap(options.audiences),
  carrySecrets: options.carrySecrets === true,
});

/**
 * The most scopes an apply file made holds, of its audiences and its grants together. Keycloak's and Hydra's
 * scopes are each a scope of every audience the client is granted: a client of 10 000 audiences and 100 000
 * scopes, a megabyte of export, would be a billion. Past it nothing more is added, and the import is refused
 * (index.ts). An export of 64 MiB has far fewer (a Tessera audience has at most 200 scopes).
 */
export const MAX_FILE_SCOPES = 2_000_000;

/**
 * The apply file being built. Each audience keeps the names of its scopes in a Set, each client its grants in a Map
 * by audience (and each grant its scopes' names in a Set): an export of many clients, or of many scopes, costs a
 * look-up per scope, never a pass over what is there already.
 */
export class FileBuilder {
  private scopeCount = 0;
  /** Whether the file grew past MAX_FILE_SCOPES: the scopes past it are not added, and the import is refused. */
  overflowed = false;

  /** Room for one more scope, or none (and the file overflowed: every later call returns at once). */
  private room(): boolean {
    if (this.scopeCount < MAX_FILE_SCOPES) {
      this.scopeCount++;
      return true;
    }
    this.overflowed = true;
    return false;
  }

  private readonly audiences = new Map<string, { entry: ImportedAudience; names: Set<string> }>();
  private readonly clients = new Map<
    string,
    {
      entry: ClientEntry & { grants: GrantEntry[] };
      grants: Map<string, { grant: GrantEntry; names: Set<string> }>;
    }
  >();

  hasAudience(identifier: string): boolean {
    return this.audiences.has(identifier);
  }

  /** An audience; one already there keeps its fields and gains the scopes. */
  audience(entry: ImportedAudience): void {
    if (this.audiences.has(entry.identifier)) {
      this.addScopes(entry.identifier, entry.scopes ?? []);
      return;
    }
    const names = new Set<string>();
    const scopes = entry.scopes?.filter((s) => !names.has(s.name) && this.room() && names.add(s.name));
    this.audiences.set(entry.identifier, { entry: { ...entry, ...(scopes ? { scopes } : {}) }, names });
  }

  /** Scopes an audience defines, added to those it has (by name; the first description kept). */
  addScopes(identifier: string, scopes: readonly ScopeEntry[]): void {
    const { entry, names } = this.audiences.get(identifier)!;
    for (const scope of scopes) {
      if (this.overflowed) return;
      if (names.has(scope.name) || !this.room()) continue;
      names.add(scope.name);
      (entry.scopes ??= []).push(scope);
    }
  }

  /** The names of an audience's scopes (its own Set: not to be changed). */
  scopesOf(identifier: string): ReadonlySet<string> {
    return this.audiences.get(identifier)?.names ?? new Set();
  }

  hasClient(clientId: string): boolean {
    return this.clients.has(clientId);
  }

  client(entry: ClientEntry): void {
    this.clients.set(entry.client_id, { entry: { ...entry, grants: [] }, grants: new Map() });
  }

  /** A grant of an audience to a client; a second one of the same audience adds its scopes. */
  grant(clientId: string, audience: string, scopes: readonly string[]): void {
    const client = this.clients.get(clientId)!;
    let known = client.grants.get(audience);
    if (known === undefined) {
      known = { grant: { audience }, names: new Set() };
      client.grants.set(audience, known);
      client.entry.grants.push(known.grant);
    }
    for (const scope of scopes) {
      if (this.overflowed) return;
      if (known.names.has(scope) || !this.room()) continue;
      known.names.add(scope);
      (known.grant.scopes ??= []).push(scope);
    }
  }

  /** The file, in export's order: audiences by identifier, clients by id, grants by audience, scopes by name. */
  build(): ConfigFile & { audiences: ImportedAudience[]; clients: ClientEntry[] } {
    const audiences = [...this.audiences.values()]
      .map(({ entry: a }) =>
        a.scopes ? { ...a, scopes: [...a.scopes].sort((x, y) => byCodeUnit(x.name, y.name)) } : a,
      )
      .sort((a, b) => byCodeUnit(a.identifier, b.identifier));
    const clients = [...this.clients.values()]
      .map(({ entry: c }) => ({
        ...c,
        grants: c.grants
          .map((g) => (g.scopes ? { ...g, scopes: [...g.scopes].sort(byCodeUnit) } : g))
          .sort((a, b) => byCodeUnit(a.audience, b.audience)),
      }))
      .sort((a, b) => byCodeUnit(a.client_id, b.client_id));
    return { audiences, clients };
  }
}

const CLIENT_ID = /^[A-Za-z0-9._~-]{3,128}$/;

/** Whether a source's client id can be Tessera's as it is. */
export const isClientId = (value: unknown): value is string =>
  typeof value === 'string' && CLIENT_ID.test(value);

/**
 * The client ids taken, and for each base a made id was made of, the next suffix to try: 20 000 clients of one
 * name get their ids in one step each, not in a count from 2 each (which is quadratic).
 */
export class TakenIds {
  private readonly ids: Set<string>;
  private readonly next = new Map<string, number>();

  constructor(ids: Iterable<string> = []) {
    this.ids = new Set(ids);
  }

  has(id: string): boolean {
    return this.ids.has(id);
  }

  add(id: string): void {
    this.ids.add(id);
  }

  /** `base`, or `base-N` with the least N from the one last made of it that is not taken; it is taken then. */
  made(base: string): string {
    let id = base;
    let n = this.next.get(base) ?? 2;
    // Every suffix below `n` was taken when it was tried, and ids are never given back.
    for (; this.ids.has(id); n++) id = `${base}-${n}`;
    this.next.set(base, n);
    this.ids.add(id);
    return id;
  }
}

/**
 * A client id made from a name (docs/import.md): lower-case letters, digits and `-`, at least 3 and at most 64
 * characters, unique among `taken` (which it joins): `Orders Worker` is `orders-worker`, a second one
 * `orders-worker-2`.
 */
export function clientIdFromName(name: string, taken: TakenIds): string {
  let base = name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 60)
    .replace(/-+$/, '');
  if (base.length === 0) base = 'client';
  if (base.length < 3) base = `${base}-client`;
  return taken.made(base);
}

/** A lifetime in Tessera's range: as it is, or clamped with a line that says so. */
export function clampTtl(seconds: number, at: Place, report: Report, what: string): number {
  const whole = Math.floor(seconds);
  const clamped = Math.min(MAX_TOKEN_TTL, Math.max(MIN_TOKEN_TTL, whole));
  if (clamped !== seconds)
    report.changed(
      at,
      `${what} ${seconds} s is ${clamped} s: Tessera's token lifetimes are whole seconds from ${MIN_TOKEN_TTL} to ${MAX_TOKEN_TTL}`,
    );
  return clamped;
}

/** Whether a value is an audience URL Tessera takes. */
export function isAudienceUrl(value: string): boolean {
  try {
    validateAudienceUrl(value);
    return true;
  } catch {
    return false;
  }
}

/** Whether a value is a scope token Tessera takes. */
export function isScopeName(value: string): boolean {
  try {
    validateScopeName(value);
    return true;
  } catch {
    return false;
  }
}

const RESERVED = new Set<string>(RESERVED_CLAIMS);

/**
 * Names no member of a claim may have, at any level: what every object inherits, whose assignment would reach
 * Object.prototype (`__proto__`), or which, read, is a function (`constructor`), not a member the source made.
 */
const UNSAFE_MEMBERS = new Set(['__proto__', 'constructor', 'prototype']);

/** Why a member of a claim (a segment of a nested claim's name, `a` or `b` of `a.b`) cannot be one, if it cannot. */
export function unsafeMember(name: string): string | undefined {
  if (name === '' || UNSAFE_MEMBERS.has(name)) return `claim member ${JSON.stringify(name)} is not allowed`;
  return undefined;
}

/** Why a custom claim's name cannot be one (docs/interface.md's reserved names), or undefined when it can. */
export function reservedClaim(name: string): string | undefined {
  if (RESERVED.has(name)) return `claim ${name} is registered: Tessera sets it, it cannot be a custom claim`;
  if (name.toLowerCase().startsWith('tessera'))
    return `claim ${name}: names starting with "tessera" are reserved`;
  if (name === '' || UNSAFE_MEMBERS.has(name)) return `claim ${JSON.stringify(name)} is not allowed`;
  return undefined;
}

// --- the shape of a source: each problem at its place ---

export type Json = Record<string, unknown>;

export const isObject = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const kindOf = (value: unknown): string =>
  value === null
    ? 'null'
    : Array.isArray(value)
      ? 'a list'
      : typeof value === 'object'
        ? 'an object'
        : `a ${typeof value}`;

/**
 * A value of a source as a line shows it: a string or another scalar as it is, an object or a list by its kind.
 * Never String() of an object: a source's `{"toString": 1}` makes that throw (a TypeError), and a big one would be
 * a line as long as itself.
 */
export const shown = (value: unknown): string =>
  typeof value === 'object' && value !== null ? kindOf(value) : String(value);

/** A list of a source (absent: none); anything else a problem. */
export function listAt(value: unknown, at: Place, problems: Problems, what: string): unknown[] {
  if (value === undefined || value === null) return [];
  if (Array.isArray(value)) return value;
  problems.add(at, `${what} must be a list, not ${kindOf(value)}`);
  return [];
}

/** An object of a source; anything else a problem (undefined). */
export function objectAt(value: unknown, at: Place, problems: Problems, what: string): Json | undefined {
  if (isObject(value)) return value;
  problems.add(at, `${what} must be an object, not ${kindOf(value)}`);
  return undefined;
}

/** A string field (absent: undefined); anything else a problem. */
export function stringAt(value: unknown, at: Place, problems: Problems, what: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'string') return value;
  problems.add(at, `${what} must be a string, not ${kindOf(value)}`);
  return undefined;
}

/** A string a source must have; a problem when it lacks it. */
export function requiredString(
  value: unknown,
  at: Place,
  problems: Problems,
  what: string,
): string | undefined {
  if (value === undefined || value === null || value === '') {
    problems.add(at, `${what} is required`);
    return undefined;
  }
  return stringAt(value, at, problems, what);
}

/**
 * The URL of an audience named in a source: the name itself when it is a URL Tessera takes, else the one that
 * `--audience NAME=URL` gives; undefined when neither (the caller leaves it out with a line).
 */
export function audienceUrl(name: string, options: Mapping): string | undefined {
  const given = options.audiences.get(name);
  if (given !== undefined) return given;
  return isAudienceUrl(name) ? name : undefined;
}

/** Members only a private or symmetric JWK has: the ones apply refuses (domain/client-auth/jwks.ts). */
export const PRIVATE_JWK_MEMBERS = PRIVATE_MEMBERS;

/**
 * The first key of a JWK Set that holds a private member, and that member; undefined when none does. An import
 * refuses such a set at its place, never copying it into the apply file or an answer (nor into a message: only
 * the member's name is told, never its value).
 */
export function privateJwk(jwks: unknown): { index: number; member: string } | undefined {
  if (!isObject(jwks) || !Array.isArray(jwks.keys)) return undefined;
  for (const [index, key] of jwks.keys.entries()) {
    if (!isObject(key)) continue;
    const member = PRIVATE_JWK_MEMBERS.find((m) => Object.hasOwn(key, m));
    if (member !== undefined) return { index, member };
  }
  return undefined;
}

/** How `--audience` is named in a line. */
export const audienceHint = (name: string): string => `--audience ${name}=URL gives it one`;
