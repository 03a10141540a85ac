/**
 * Auth0, as its Deploy CLI exports a tenant (`a0deploy export`): the YAML file (`tenant.yaml`, with
 * `resourceServers`, `clients` and `clientGrants`) or the directory format (one JSON file per resource in
 * `resource-servers/`, `clients/` and `grants/`). Its `##NAME##` placeholders (and `@@NAME@@`, a whole value as
 * JSON) are filled from the keywords, as the Deploy CLI fills them; one left unfilled is a problem at its place.
 */
import { MAX_JSON_DEPTH, tooDeepAt } from '../../domain/json-depth.js';
import type { ClientEntry } from '../declarative/file.js';
import {
  audienceHint,
  audienceUrl,
  clampTtl,
  clientIdFromName,
  FileBuilder,
  isClientId,
  isObject,
  isScopeName,
  listAt,
  objectAt,
  requiredString,
  shown,
  stringAt,
  TakenIds,
  type Json,
  type Mapping,
} from './mapping.js';
import { below, rootOf, type Report } from './report.js';
import { MAX_SOURCE_BYTES, type Place, type Problems, type SourceDoc } from './source.js';

interface Item {
  value: Json;
  at: Place;
}

/** The Deploy CLI's directories (its constants RESOURCE_SERVERS_DIRECTORY, CLIENTS_DIRECTORY, CLIENTS_GRANTS_DIRECTORY). */
const DIRECTORIES = {
  'resource-servers': 'resourceServers',
  clients: 'clients',
  grants: 'clientGrants',
} as const;
type Kind = (typeof DIRECTORIES)[keyof typeof DIRECTORIES];

/** The files of a directory export that the import reads: the JSON files of those three directories. */
export const auth0DirectoryFile = (path: string): boolean =>
  /^(resource-servers|clients|grants)\/[^/]+\.json$/.test(path);

const PLACEHOLDER = /##([A-Za-z0-9_]+)##/g;
const WHOLE = /^@@([A-Za-z0-9_]+)@@$/;

/** What filling the placeholders has added to the export so far, in bytes, over all its documents. */
interface Filled {
  bytes: number;
  /** Whether the export grew past the limit (said once, at the first place it did). */
  over: boolean;
}

/**
 * The Deploy CLI's keyword replacement, on the values of a document; every unfilled placeholder a problem. What
 * the keywords add counts against the source's byte limit (MAX_SOURCE_BYTES, over the whole export): a keyword of
 * a megabyte in a thousand placeholders is a gigabyte, refused at the place where the limit is passed. A whole
 * value (`@@NAME@@`) nests no deeper where it stands than a source may (MAX_JSON_DEPTH).
 */
function fillKeywords(
  doc: SourceDoc,
  keywords: ReadonlyMap<string, string>,
  filled: Filled,
  problems: Problems,
): void {
  const missing = (name: string, pointer: string, form: string) =>
    problems.add({ doc, pointer }, `placeholder ${form} has no value: give it one (--keyword ${name}=VALUE)`);
  /** Counts what a value adds; false (and a problem, once) when the export is then past the limit. */
  const grows = (added: number, pointer: string): boolean => {
    if (filled.over) return false;
    filled.bytes += added;
    if (filled.bytes <= MAX_SOURCE_BYTES) return true;
    filled.over = true;
    problems.add(
      { doc, pointer },
      `its placeholders filled, the export is more than ${MAX_SOURCE_BYTES} bytes (64 MiB), the most an export is read up to`,
    );
    return false;
  };
  const fill = (value: unknown, pointer: string, level: number): unknown => {
    if (typeof value === 'string') {
      const whole = WHOLE.exec(value);
      if (whole) {
        const given = keywords.get(whole[1]!);
        if (given === undefined) {
          missing(whole[1]!, pointer, value);
          return value;
        }
        if (!grows(Buffer.byteLength(given), pointer)) return value;
        let parsed: unknown;
        try {
          parsed = JSON.parse(given) as unknown;
        } catch {
          return given;
        }
        // The value stands at `level`: it may nest as deep as the rest of the source may there.
        const deep = tooDeepAt(parsed, MAX_JSON_DEPTH - level + 1);
        if (deep !== undefined) {
          problems.add(
            { doc, pointer },
            `placeholder ${value}'s value nests too deep here (at ${deep || 'its top'}): a source nests at most ${MAX_JSON_DEPTH} levels`,
          );
          return value;
        }
        return parsed;
      }
      if (!value.includes('##')) return value;
      let added = 0;
      const result = value.replace(PLACEHOLDER, (form, name: string) => {
        const given = keywords.get(name);
        if (given === undefined) {
          missing(name, pointer, form);
          return form;
        }
        added += Buffer.byteLength(given) - form.length;
        return given;
      });
      return grows(Math.max(0, added), pointer) ? result : value;
    }
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) value[i] = fill(value[i], `${pointer}/${i}`, level + 1);
    } else if (isObject(value)) {
      for (const key of Object.keys(value))
        value[key] = fill(
          value[key],
          `${pointer}/${key.replace(/~/g, '~0').replace(/\//g, '~1')}`,
          level + 1,
        );
    }
    return value;
  };
  doc.data = fill(doc.data, '', 1);
}

/** The resources of the export, each at its place. */
function itemsOf(docs: SourceDoc[], directory: boolean, problems: Problems): Record<Kind, Item[]> {
  const items: Record<Kind, Item[]> = { resourceServers: [], clients: [], clientGrants: [] };
  for (const doc of docs) {
    const root = rootOf(doc);
    if (directory) {
      const kind = DIRECTORIES[doc.file!.split('/')[0] as keyof typeof DIRECTORIES];
      const value = objectAt(doc.data, root, problems, 'a file of the Deploy CLI');
      if (value) items[kind].push({ value, at: root });
      continue;
    }
    const tenant = objectAt(doc.data, root, problems, 'a Deploy CLI export');
    if (!tenant) continue;
    for (const kind of ['resourceServers', 'clients', 'clientGrants'] as const) {
      const at = below(root, kind);
      listAt(tenant[kind], at, problems, kind).forEach((entry, i) => {
        const value = objectAt(entry, below(at, i), problems, `an entry of ${kind}`);
        if (value) items[kind].push({ value, at: below(at, i) });
      });
    }
  }
  return items;
}

/** Tessera signs with these (docs/keys.md); Auth0's HS256 is a secret shared with the API. */
const KEPT_ALGS = new Set(['RS256', 'PS256']);

export function mapAuth0(
  docs: SourceDoc[],
  directory: boolean,
  options: Mapping,
  report: Report,
  problems: Problems,
): FileBuilder {
  const filled: Filled = { bytes: 0, over: false };
  for (const doc of docs) fillKeywords(doc, options.keywords, filled, problems);
  const items = itemsOf(docs, directory, problems);
  const file = new FileBuilder();

  /** Each API of the export: its Tessera identifier, or why it is left out. */
  const apis = new Map<string, { url: string } | { leftOut: string }>();
  for (const { value: api, at } of items.resourceServers) {
    const identifier = requiredString(api.identifier, below(at, 'identifier'), problems, 'identifier');
    const name = stringAt(api.name, below(at, 'name'), problems, 'name');
    if (identifier === undefined) continue;
    const alg = stringAt(api.signing_alg, below(at, 'signing_alg'), problems, 'signing_alg');
    if (alg !== undefined && !KEPT_ALGS.has(alg)) {
      report.leftOut(
        below(at, 'signing_alg'),
        `API ${identifier}: signing_alg ${alg}: Tessera signs asymmetrically only (RS256, PS256, ES256, EdDSA), so the API and its grants are left out`,
      );
      apis.set(identifier, { leftOut: `its API ${identifier} is left out (signing_alg ${alg})` });
      continue;
    }
    const url = audienceUrl(identifier, options);
    if (url === undefined) {
      report.leftOut(
        below(at, 'identifier'),
        `API ${identifier}: a Tessera audience is an http(s) URL; ${audienceHint(identifier)}`,
      );
      apis.set(identifier, { leftOut: `its API ${identifier} is left out (no URL)` });
      continue;
    }
    if (file.hasAudience(url)) {
      report.leftOut(at, `API ${identifier}: audience ${url} is already mapped from another API`);
      apis.set(identifier, { url });
      continue;
    }
    const scopes: { name: string; description?: string }[] = [];
    listAt(api.scopes, below(at, 'scopes'), problems, 'scopes').forEach((raw, i) => {
      const scopeAt = below(at, 'scopes', i);
      const scope = objectAt(raw, scopeAt, problems, 'a scope');
      if (!scope) return;
      const value = requiredString(scope.value, below(scopeAt, 'value'), problems, 'a scope value');
      const description = stringAt(scope.description, below(scopeAt, 'description'), problems, 'description');
      if (value === undefined) return;
      if (!isScopeName(value)) {
        report.leftOut(scopeAt, `scope ${JSON.stringify(value)} is not a scope token (RFC 6749 §3.3)`);
        return;
      }
      scopes.push(description ? { name: value, description } : { name: value });
    });
    let ttl: number | undefined;
    if (typeof api.token_lifetime === 'number')
      ttl = clampTtl(api.token_lifetime, below(at, 'token_lifetime'), report, 'token_lifetime');
    file.audience({
      identifier: url,
      ...(name ? { name } : {}),
      ...(ttl === undefined ? {} : { token_ttl: ttl }),
      ...(alg ? { signing_alg: alg } : {}),
      ...(scopes.length > 0 ? { scopes } : {}),
      token_profile: 'auth0',
    });
    apis.set(identifier, { url });
    report.mapped(
      at,
      `API ${name ? `"${name}" ` : ''}${identifier === url ? '' : `(${identifier}) `}→ audience ${url} (${scopes.length} scope${scopes.length === 1 ? '' : 's'}, token_profile auth0)`,
    );
  }

  // Clients: by their id and, as the Deploy CLI's grants name them, by their name.
  const taken = new TakenIds();
  for (const { value } of items.clients) if (isClientId(value.client_id)) taken.add(value.client_id);
  const byId = new Map<string, string | null>();
  const byName = new Map<string, string | null>();
  for (const { value: app, at } of items.clients) {
    const name = requiredString(app.name, below(at, 'name'), problems, 'name');
    const sourceId = stringAt(app.client_id, below(at, 'client_id'), problems, 'client_id');
    const appType = stringAt(app.app_type, below(at, 'app_type'), problems, 'app_type');
    const grantTypes = listAt(app.grant_types, below(at, 'grant_types'), problems, 'grant_types');
    const method = stringAt(
      app.token_endpoint_auth_method,
      below(at, 'token_endpoint_auth_method'),
      problems,
      'token_endpoint_auth_method',
    );
    if (name === undefined) continue;
    const m2m = appType === 'non_interactive' || grantTypes.includes('client_credentials');
    if (!m2m || method === 'none') {
      report.leftOut(
        at,
        method === 'none' && m2m
          ? `application "${name}" authenticates with none: a public client gets no client-credentials token`
          : `application "${name}" (app_type ${appType ?? 'none'}) is not a machine-to-machine application`,
      );
      if (sourceId !== undefined) byId.set(sourceId, null);
      if (!byName.has(name)) byName.set(name, null);
      continue;
    }
    let clientId: string;
    if (isClientId(sourceId)) clientId = sourceId;
    else {
      clientId = clientIdFromName(name, taken);
      const first = byName.get(name);
      report.changed(
        below(at, sourceId === undefined ? 'name' : 'client_id'),
        (sourceId === undefined
          ? `client "${name}" has no client_id in the export: its client_id is ${clientId}, made from its name`
          : `client_id ${JSON.stringify(sourceId)} is not a Tessera client id: its client_id is ${clientId}, made from its name`) +
          (first ? ` (a grant naming "${name}" is ${first}'s, the first of that name)` : ''),
      );
    }
    const description = stringAt(app.description, below(at, 'description'), problems, 'description');
    const methods = isObject(app.client_authentication_methods) ? app.client_authentication_methods : {};
    const entry: ClientEntry = { client_id: clientId, name, ...(description ? { description } : {}) };
    if (methods.private_key_jwt !== undefined) {
      entry.token_endpoint_auth_method = 'private_key_jwt';
      report.changed(
        below(at, 'client_authentication_methods', 'private_key_jwt'),
        `client ${clientId} authenticates with private_key_jwt: Auth0 exports no keys, so it has none until its jwks or jwks_uri is set`,
      );
    } else if (method === 'client_secret_basic' || method === 'client_secret_post')
      entry.token_endpoint_auth_method = method;
    file.client(entry);
    if (sourceId !== undefined) byId.set(sourceId, clientId);
    if (!byName.has(name)) byName.set(name, clientId);
    report.mapped(
      at,
      `application "${name}" → client ${clientId}${entry.token_endpoint_auth_method === 'private_key_jwt' ? '' : ' (Auth0 exports no secret: apply makes one)'}`,
    );
  }

  for (const { value: grant, at } of items.clientGrants) {
    const client = requiredString(grant.client_id, below(at, 'client_id'), problems, 'client_id');
    const audience = requiredString(grant.audience, below(at, 'audience'), problems, 'audience');
    const scopes = listAt(grant.scope, below(at, 'scope'), problems, 'scope');
    if (client === undefined || audience === undefined) continue;
    if (grant.subject_type === 'user') {
      report.leftOut(at, `grant of ${audience} to ${client}: a grant for users' tokens, not the client's`);
      continue;
    }
    const clientId = byId.has(client) ? byId.get(client) : byName.get(client);
    if (clientId === undefined) {
      report.leftOut(at, `grant of ${audience}: ${client} is no client of the export`);
      continue;
    }
    if (clientId === null) {
      report.leftOut(at, `grant of ${audience} to ${client}: the application is left out`);
      continue;
    }
    const api = apis.get(audience);
    if (api === undefined) {
      report.leftOut(
        below(at, 'audience'),
        `grant of ${audience} to ${clientId}: the API is not among the export's resourceServers (Auth0's own Management API, or one not exported)`,
      );
      continue;
    }
    if ('leftOut' in api) {
      report.leftOut(at, `grant of ${audience} to ${clientId}: ${api.leftOut}`);
      continue;
    }
    const defined = file.scopesOf(api.url);
    const kept: string[] = [];
    scopes.forEach((scope, i) => {
      if (typeof scope === 'string' && defined.has(scope)) kept.push(scope);
      else
        report.leftOut(
          below(at, 'scope', i),
          `scope ${typeof scope === 'string' ? JSON.stringify(scope) : shown(scope)} of the grant of ${api.url} to ${clientId}: the API does not define it`,
        );
    });
    file.grant(clientId, api.url, kept);
    report.mapped(at, `grant ${clientId} → ${api.url}${kept.length ? ` (scopes ${kept.join(' ')})` : ''}`);
  }
  return file;
}
