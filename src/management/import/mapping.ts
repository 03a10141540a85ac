/**
 * The mapping's common part (docs/import.md): the apply file being built (audiences by identifier, clients by id,
 * grants merged), ids made from names, and the checks of a source's shape, each problem at its place. What the
 * values must be (URLs, names, lengths) is apply's to check: the file an import writes goes through `tessera
 * apply`'s validation, and the import has no rule of the store's of its own — it only leaves out, with a line,
 * what it knows Tessera cannot take (an audience that is no URL, a scope that is no scope token).
 */
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

/** What every source's mapping is given. */
export interface MappingOptions {
  /** Values of the Deploy CLI's `##NAME##` placeholders. */
  keywords?: Record<string, string>;
  /** Audience URLs of names that are no URL: a Keycloak client id, an Auth0 or Hydra audience like `my-api`. */
  audiences?: Record<string, string>;
  /** Whether secrets found in the source are carried (`--secrets FILE`); else those clients get new ones. */
  carrySecrets?: boolean;
}

/** The apply file being built. */
export class FileBuilder {
  private readonly audiences = new Map<string, ImportedAudience>();
  private readonly clients = new Map<string, ClientEntry & { grants: GrantEntry[] }>();

  hasAudience(identifier: string): boolean {
    return this.audiences.has(identifier);
  }

  /** An audience; one already there keeps its fields and gains the scopes. */
  audience(entry: ImportedAudience): void {
    const known = this.audiences.get(entry.identifier);
    if (known === undefined) this.audiences.set(entry.identifier, { ...entry });
    else this.addScopes(entry.identifier, entry.scopes ?? []);
  }

  /** Scopes an audience defines, added to those it has (by name; the first description kept). */
  addScopes(identifier: string, scopes: readonly ScopeEntry[]): void {
    const audience = this.audiences.get(identifier)!;
    const names = new Set((audience.scopes ?? []).map((s) => s.name));
    const added = scopes.filter((s) => !names.has(s.name) && names.add(s.name));
    if (added.length > 0) audience.scopes = [...(audience.scopes ?? []), ...added];
  }

  scopesOf(identifier: string): Set<string> {
    return new Set((this.audiences.get(identifier)?.scopes ?? []).map((s) => s.name));
  }

  hasClient(clientId: string): boolean {
    return this.clients.has(clientId);
  }

  client(entry: ClientEntry): void {
    this.clients.set(entry.client_id, { ...entry, grants: [] });
  }

  /** A grant of an audience to a client; a second one of the same audience adds its scopes. */
  grant(clientId: string, audience: string, scopes: readonly string[]): void {
    const grants = this.clients.get(clientId)!.grants;
    const known = grants.find((g) => g.audience === audience);
    if (known === undefined) {
      grants.push(scopes.length > 0 ? { audience, scopes: [...new Set(scopes)] } : { audience });
      return;
    }
    const merged = [...new Set([...(known.scopes ?? []), ...scopes])];
    if (merged.length > 0) known.scopes = merged;
  }

  /** The file, in export's order: audiences by identifier, clients by id, grants by audience, scopes by name. */
  build(): ConfigFile & { audiences: ImportedAudience[]; clients: ClientEntry[] } {
    const audiences = [...this.audiences.values()]
      .map((a) => (a.scopes ? { ...a, scopes: [...a.scopes].sort((x, y) => byCodeUnit(x.name, y.name)) } : a))
      .sort((a, b) => byCodeUnit(a.identifier, b.identifier));
    const clients = [...this.clients.values()]
      .map((c) => ({
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
 * A client id made from a name (docs/import.md): lower-case letters, digits and `-`, at least 3 and at most 64
 * characters, unique among `taken` (which it joins): `Orders Worker` is `orders-worker`, a second one
 * `orders-worker-2`.
 */
export function clientIdFromName(name: string, taken: Set<string>): string {
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
  let id = base;
  for (let n = 2; taken.has(id); n++) id = `${base}-${n}`;
  taken.add(id);
  return id;
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

/** Why a custom claim's name cannot be one (docs/interface.md's reserved names), or undefined when it can. */
export function reservedClaim(name: string): string | undefined {
  if (RESERVED.has(name)) return `claim ${name} is registered: Tessera sets it, it cannot be a custom claim`;
  if (name.toLowerCase().startsWith('tessera'))
    return `claim ${name}: names starting with "tessera" are reserved`;
  if (name === '' || name === '__proto__') return `claim ${JSON.stringify(name)} is not allowed`;
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
export function audienceUrl(name: string, options: MappingOptions): string | undefined {
  const given = options.audiences?.[name];
  if (given !== undefined) return given;
  return isAudienceUrl(name) ? name : undefined;
}

/** How `--audience` is named in a line. */
export const audienceHint = (name: string): string => `--audience ${name}=URL gives it one`;
