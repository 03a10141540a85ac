/**
 * The file of `tessera apply` and `tessera export` (docs/management.md): its entries, and reading one. A file is read
 * as YAML (and so JSON, which YAML 1.2 reads alike), keeping where each value stands in the text, so that every
 * problem found later names its line and column.
 */
import { isMap, isScalar, isSeq, LineCounter, parseDocument, visit, type Document, type Node } from 'yaml';
import { MAX_JSON_DEPTH, pointerSegment, tooDeepAt } from '../../domain/json-depth.js';
import type { AuthMethodName, ClaimValue, PublicJwks } from '../../domain/client-auth/index.js';
import type { Audience, AudienceScope } from '../../store/types.js';
import { ManagementError } from '../errors.js';
import { deepPlaceInText } from './file-depth.js';
import { readJsonFile } from './json-file.js';
import { readYamlFile } from './yaml-file.js';

/** A grant of an audience to a client, with the audience's scopes it carries (none when left out). */
export interface GrantEntry {
  audience: string;
  scopes?: string[];
  /** Custom claims for this audience's tokens, over the client's. */
  claims?: Record<string, unknown> | null;
  /** The client may exchange a token it received for one of this audience (RFC 8693); false when left out. */
  token_exchange?: boolean;
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
  /** The clients that receive its tokens (token exchange), by client_id, sorted; none when left out. */
  resource_server_client_ids?: string[];
  /** The claims its tokens carry beyond RFC 9068's: auth0, keycloak; rfc9068 when left out. */
  token_profile?: string | null;
}

/**
 * A federated credential of a client (workload identity federation), known by its name within the client. A field
 * left out or null is the default: keys by discovery, the Tessera issuer as audience, no claims, 1 hour, not once.
 */
export interface FederatedCredentialEntry {
  name: string;
  issuer: string;
  jwks?: PublicJwks | null;
  jwks_uri?: string | null;
  subject: string;
  audience?: string | null;
  claims?: Record<string, ClaimValue> | null;
  max_lifetime?: number | null;
  once?: boolean | null;
}

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
  /** private_key_jwt without jwks or jwks_uri: every federated credential it has; none when left out. */
  federated_credentials?: FederatedCredentialEntry[];
  /** RFC 9449 §5.2: no token without a DPoP proof; false when left out. */
  dpop_bound_access_tokens?: boolean;
  /** tls_client_auth (RFC 8705 §2.1.2): the one value its certificate must carry; none when left out. */
  tls_client_auth_subject_dn?: string | null;
  tls_client_auth_san_dns?: string | null;
  tls_client_auth_san_uri?: string | null;
  tls_client_auth_san_ip?: string | null;
  tls_client_auth_san_email?: string | null;
  /** RFC 8705 §3.4: its tokens are bound to its certificate; false when left out. */
  tls_client_certificate_bound_access_tokens?: boolean;
  /** Every audience the client is granted; none when left out. */
  grants?: GrantEntry[];
  /**
   * The file holding its secret (a mounted secret), relative to the apply file's directory; read when the file is
   * planned, never exported. Its secret is the client's: given to a new one, put in place of the secrets of one
   * that does not have it.
   */
  client_secret_file?: string;
}

export interface ConfigFile {
  $schema?: string;
  audiences?: AudienceEntry[];
  clients?: ClientEntry[];
}

/** Scopes as a file has them: sorted, a description only where there is one, and no list when empty. */
export const scopeEntries = (scopes: readonly AudienceScope[]): ScopeEntry[] | undefined =>
  scopes.length === 0
    ? undefined
    : scopes.map((s) =>
        s.description === null ? { name: s.name } : { name: s.name, description: s.description },
      );

/**
 * An audience entry as the store's record, for what takes one (the rules of a grant's scopes, the entry a new
 * audience exports as); it has no id or dates yet.
 */
export const audienceOfEntry = (entry: AudienceEntry): Audience => ({
  id: '',
  url: entry.identifier,
  name: entry.name ?? null,
  tokenTtl: entry.token_ttl ?? null,
  signingAlg: (entry.signing_alg ?? null) as Audience['signingAlg'],
  scopes: (entry.scopes ?? []).map((s) => ({ name: s.name, description: s.description ?? null })),
  resourceServerClientIds: [...new Set(entry.resource_server_client_ids ?? [])].sort(byCodeUnit),
  tokenProfile: (entry.token_profile === 'rfc9068'
    ? null
    : (entry.token_profile ?? null)) as Audience['tokenProfile'],
  createdAt: '',
  updatedAt: '',
});

/** The order of a file's lists (audiences, clients, grants): by UTF-16 code unit, as the store compares. */
export const byCodeUnit = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

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
  /**
   * Planned once: planApply takes the entries of its lists as it reads them (they are undefined after), so that
   * a big file's entries are not held beside what they ask for.
   */
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

/** The JSON pointer of a place in a file: `pointerOf('clients', 0)` is `/clients/0`. */
export const pointerOf = (...path: (string | number)[]): string =>
  path.map((s) => `/${pointerSegment(s)}`).join('');

/** A file's place nested too deep (docs/management.md: 32 levels, as a JSON body). */
const TOO_DEEP = `is an object or list at level ${MAX_JSON_DEPTH + 1}; a file nests at most ${MAX_JSON_DEPTH} levels, itself being level 1`;

/** Where a JSON pointer is in a parsed document: its value's place, or with `key` its key's. */
function locator(doc: Document, lineCounter: LineCounter): ParsedFile['locate'] {
  const position = (node: Node | null | undefined) => {
    const offset = node?.range?.[0];
    if (offset === undefined) return undefined;
    const { line, col } = lineCounter.linePos(offset);
    return { line, column: col };
  };
  return (pointer, key = false) => {
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
  };
}

/**
 * Where a JSON pointer is in a text read without yaml's document (json-file.ts, yaml-file.ts): found only if a
 * problem needs a place, in the document yaml then makes of the text once.
 */
function lazyLocator(text: string): ParsedFile['locate'] {
  let located: ParsedFile['locate'] | undefined;
  return (pointer, key) => {
    if (located === undefined) {
      const lines = new LineCounter();
      located = locator(parseDocument(text, { lineCounter: lines }), lines);
    }
    return located(pointer, key);
  };
}

/**
 * How many nodes one alias may stand for, counted as yaml counts them (its default, 100, is kept: a
 * configuration file has no need of more, and a bomb of a few lines expands to millions).
 */
const MAX_ALIAS_COUNT = 100;

/** The line and column (1-based) of an offset of a text, as yaml's LineCounter counts them. */
function lineOf(text: string, offset: number): { line: number; col: number } {
  let line = 1;
  let start = 0;
  for (let i = text.indexOf('\n'); i !== -1 && i < offset; i = text.indexOf('\n', i + 1)) {
    line++;
    start = i + 1;
  }
  return { line, col: offset - start + 1 };
}

/** The first alias of a document, in the order of its text (where an alias bomb is reported). */
function firstAlias(doc: Document): Node | undefined {
  let found: Node | undefined;
  visit(doc, {
    Alias(_key, node) {
      found = node;
      return visit.BREAK;
    },
  });
  return found;
}

/**
 * Parses YAML (and so JSON, which YAML 1.2 reads alike) keeping positions. Syntax errors (and duplicate keys)
 * refuse the file at once, each with its line and column.
 */
export function parseConfigFile(text: string, name: string): ParsedFile {
  // JSON (an export's, a program's) is read without yaml's syntax tree and document of places (a hundred bytes of
  // memory per byte of text): a place is found, with yaml, only if an error needs one.
  const json = readJsonFile(text, MAX_JSON_DEPTH);
  if (json !== undefined && 'duplicateKeyAt' in json) {
    const { line, col } = lineOf(text, json.duplicateKeyAt);
    throw new ConfigFileError(name, [{ pointer: '', line, column: col, message: 'Map keys must be unique' }]);
  }
  if (json !== undefined && 'data' in json) return { name, data: json.data, locate: lazyLocator(text) };
  // A YAML file is read entry by entry, without a syntax tree or document of the whole text, unless it has what
  // only the whole text reads (anchors, an error: see yaml-file.ts).
  const yaml = readYamlFile(text, MAX_JSON_DEPTH, MAX_ALIAS_COUNT);
  if (yaml !== undefined) return { name, data: yaml.data, locate: lazyLocator(text) };
  // A file nests at most 32 levels, as every JSON body does (docs/management.md). On the text first: the composer
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
  let data: unknown;
  try {
    data = doc.toJS({ maxAliasCount: MAX_ALIAS_COUNT });
  } catch (error) {
    // yaml refuses a document whose aliases would expand past maxAliasCount times the nodes they stand for (a
    // "billion laughs" bomb: nine aliases of nine aliases of ... make gigabytes of a few lines) with a
    // ReferenceError; anything else it throws is not about the file and stays what it is.
    if (!(error instanceof ReferenceError)) throw error;
    const alias = firstAlias(doc);
    const at = alias?.range ? lineCounter.linePos(alias.range[0]) : undefined;
    throw new ConfigFileError(name, [
      {
        pointer: '',
        ...(at ? { line: at.line, column: at.col } : {}),
        message: `the file's aliases expand to too many values (at most ${MAX_ALIAS_COUNT} per alias): write the values out, or use fewer aliases of aliases`,
      },
    ]);
  }
  const file: ParsedFile = { name, data, locate: locator(doc, lineCounter) };
  // An alias nests its anchor's value where it stands, deeper than the text shows.
  const pointer = tooDeepAt(file.data, MAX_JSON_DEPTH);
  if (pointer !== undefined)
    throw new ConfigFileError(name, [{ pointer, ...file.locate(pointer), message: TOO_DEEP }]);
  return file;
}
