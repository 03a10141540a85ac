/**
 * Keycloak, as it exports a realm (`kc.sh export --realm NAME --users skip`, or the admin console's partial export,
 * which masks secrets): its confidential clients with a service account become clients; the audiences of their
 * `oidc-audience-mapper` protocol mappers (their own, or those of their default client scopes) audiences and
 * grants; their `oidc-hardcoded-claim-mapper`s custom claims; their default and optional client scopes that are
 * not Keycloak's built-in ones scopes of each audience they are granted.
 */
import type { AuthMethodName } from '../../domain/client-auth/index.js';
import { MAX_JSON_DEPTH, tooDeepAt } from '../../domain/json-depth.js';
import type { ClientEntry } from '../declarative/file.js';
import {
  audienceHint,
  audienceUrl,
  clampTtl,
  clientIdFromName,
  FileBuilder,
  isAudienceUrl,
  isClientId,
  isObject,
  isScopeName,
  listAt,
  objectAt,
  privateJwk,
  requiredString,
  reservedClaim,
  shown,
  stringAt,
  TakenIds,
  unsafeMember,
  type Json,
  type Mapping,
} from './mapping.js';
import { below, rootOf, type Report } from './report.js';
import { carrySecret, type CarriedSecrets } from './secrets.js';
import type { Place, Problems, SourceDoc } from './source.js';

/** Keycloak's built-in client scopes: OpenID Connect's and its own, never scopes of an API. */
const BUILT_IN_SCOPES = new Set([
  'profile',
  'email',
  'roles',
  'web-origins',
  'acr',
  'basic',
  'address',
  'phone',
  'offline_access',
  'microprofile-jwt',
  'role_list',
  'organization',
  'saml_organization',
  'service_account',
]);

/** Keycloak's client authenticators, and Tessera's method of each (a Map: an export's name is any string). */
const METHODS = new Map<string, AuthMethodName>([
  ['client-secret', 'client_secret_basic'],
  ['client-secret-jwt', 'client_secret_basic'],
  ['client-jwt', 'private_key_jwt'],
  ['client-x509', 'tls_client_auth'],
]);

const AUDIENCE_MAPPER = 'oidc-audience-mapper';
const CLAIM_MAPPER = 'oidc-hardcoded-claim-mapper';

interface KeycloakClient {
  value: Json;
  at: Place;
}

/** A realm's client's fields that name an audience of another client: its rootUrl or baseUrl, when absolute. */
function urlOfClient(client: Json | undefined): string | undefined {
  for (const field of ['rootUrl', 'baseUrl']) {
    const value = client?.[field];
    if (typeof value === 'string' && isAudienceUrl(value)) return value;
  }
  return undefined;
}

/** A hard-coded claim's value as its `jsonType.label` types it; undefined when it is not of that type. */
function claimValue(raw: string, type: string | undefined): unknown {
  switch (type) {
    case 'long':
    case 'int': {
      const n = Number(raw);
      return raw.trim() !== '' && Number.isInteger(n) ? n : undefined;
    }
    case 'boolean':
      return raw === 'true' ? true : raw === 'false' ? false : undefined;
    case 'JSON':
      try {
        return JSON.parse(raw) as unknown;
      } catch {
        return undefined;
      }
    default:
      return raw;
  }
}

/** A claim's name as Keycloak nests it: `a.b` is `{a: {b: …}}`, `a\.b` the name `a.b`. */
const claimPath = (name: string): string[] =>
  name.split(/(?<!\\)\./).map((part) => part.replace(/\\\./g, '.'));

/**
 * A claim set at its path, each object on the way the claims' own: a member only inherited (Object.prototype's)
 * is never stepped into, but replaced by an object of the claims' own (the path's segments are checked by
 * unsafeMember: none is `__proto__`, whose assignment would not make a member). A JSON value is copied, so that
 * no two clients share an object (YAML would write the second as an alias of the first).
 */
function setClaim(claims: Json, path: readonly string[], value: unknown): void {
  let node = claims;
  for (const part of path.slice(0, -1)) {
    const next = Object.hasOwn(node, part) ? node[part] : undefined;
    if (isObject(next)) node = next;
    else {
      const made: Json = {};
      node[part] = made;
      node = made;
    }
  }
  node[path.at(-1)!] = typeof value === 'object' && value !== null ? structuredClone(value) : value;
}

/** The pointer of the first member named `__proto__` of a JSON value (already no deeper than a source). */
function protoMemberAt(value: unknown, pointer = ''): string | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  for (const [key, child] of Object.entries(value)) {
    const at = `${pointer}/${Array.isArray(value) ? key : key.replace(/~/g, '~0').replace(/\//g, '~1')}`;
    if (key === '__proto__' && !Array.isArray(value)) return at;
    const found = protoMemberAt(child, at);
    if (found !== undefined) return found;
  }
  return undefined;
}

/** What a client scope's protocol mappers give each client it is a default scope of: mapped once per scope. */
interface ScopeMapping {
  audiences: string[];
  claims: { path: string[]; value: unknown }[];
}

export function mapKeycloak(
  docs: SourceDoc[],
  options: Mapping,
  report: Report,
  problems: Problems,
  secrets: CarriedSecrets,
): FileBuilder {
  const file = new FileBuilder();
  const doc = docs[0]!;
  const root = rootOf(doc);
  const realm = objectAt(doc.data, root, problems, 'a Keycloak realm export');
  if (!realm) return file;

  const clients: KeycloakClient[] = [];
  listAt(realm.clients, below(root, 'clients'), problems, 'clients').forEach((raw, i) => {
    const at = below(root, 'clients', i);
    const value = objectAt(raw, at, problems, 'a client');
    if (value) clients.push({ value, at });
  });
  const byClientId = new Map<string, Json>();
  for (const { value } of clients)
    if (typeof value.clientId === 'string') byClientId.set(value.clientId, value);
  /** The realm's client scopes by name, with their places. */
  const clientScopes = new Map<string, KeycloakClient>();
  listAt(realm.clientScopes, below(root, 'clientScopes'), problems, 'clientScopes').forEach((raw, i) => {
    const at = below(root, 'clientScopes', i);
    const value = objectAt(raw, at, problems, 'a client scope');
    if (value && typeof value.name === 'string') clientScopes.set(value.name, { value, at });
  });

  const taken = new TakenIds();
  const scopeMappings = new Map<string, ScopeMapping>();
  for (const { value } of clients) if (isClientId(value.clientId)) taken.add(value.clientId);

  /** An audience mapper: the audience it names (made and granted), or a line saying why not. */
  const audienceOf = (mapper: Json, at: Place, owner: string): string | undefined => {
    const config = isObject(mapper.config) ? mapper.config : {};
    if (config['access.token.claim'] === 'false') {
      report.leftOut(at, `audience mapper "${shown(mapper.name)}" adds nothing to access tokens`);
      return undefined;
    }
    const custom = config['included.custom.audience'];
    const named = config['included.client.audience'];
    let url: string | undefined;
    let name: string | undefined;
    let source: string;
    if (typeof custom === 'string' && custom !== '') {
      source = custom;
      url = audienceUrl(custom, options);
      if (url === undefined) {
        report.leftOut(
          below(at, 'config', 'included.custom.audience'),
          `audience ${custom} of ${owner}: a Tessera audience is an http(s) URL; ${audienceHint(custom)}`,
        );
        return undefined;
      }
    } else if (typeof named === 'string' && named !== '') {
      source = named;
      const target = byClientId.get(named);
      url = options.audiences.get(named) ?? urlOfClient(target);
      if (url === undefined) {
        report.leftOut(
          below(at, 'config', 'included.client.audience'),
          `audience ${named} of ${owner}: ${target ? 'the client has no absolute rootUrl or baseUrl' : 'no client of the realm'}; ${audienceHint(named)}`,
        );
        return undefined;
      }
      const targetName =
        typeof target?.name === 'string' && !target.name.startsWith('${') ? target.name : named;
      name = targetName;
    } else {
      report.leftOut(at, `audience mapper "${shown(mapper.name)}" names no audience`);
      return undefined;
    }
    if (!file.hasAudience(url)) {
      file.audience({ identifier: url, ...(name ? { name } : {}), token_profile: 'keycloak' });
      report.mapped(
        at,
        `audience ${source === url ? url : `${source} → audience ${url}`} (token_profile keycloak)`,
      );
    }
    return url;
  };

  for (const { value: client, at } of clients) {
    const sourceId = requiredString(client.clientId, below(at, 'clientId'), problems, 'clientId');
    if (sourceId === undefined) continue;
    if (
      client.serviceAccountsEnabled !== true ||
      client.publicClient === true ||
      client.bearerOnly === true
    ) {
      report.leftOut(
        at,
        `client ${sourceId}: ${client.publicClient === true ? 'a public client' : client.bearerOnly === true ? 'bearer-only' : 'no service account'}, so no client-credentials tokens`,
      );
      continue;
    }
    let clientId = sourceId;
    if (!isClientId(sourceId)) {
      clientId = clientIdFromName(sourceId, taken);
      report.changed(
        below(at, 'clientId'),
        `clientId ${JSON.stringify(sourceId)} is not a Tessera client id: its client_id is ${clientId}, made from it`,
      );
    }
    const rawName = stringAt(client.name, below(at, 'name'), problems, 'name');
    const name = rawName && !rawName.startsWith('${') ? rawName : clientId;
    const description = stringAt(client.description, below(at, 'description'), problems, 'description');
    const attributes = isObject(client.attributes) ? client.attributes : {};
    const entry: ClientEntry = {
      client_id: clientId,
      name,
      ...(description ? { description } : {}),
      ...(client.enabled === false ? { enabled: false } : {}),
    };
    const authenticator =
      stringAt(
        client.clientAuthenticatorType,
        below(at, 'clientAuthenticatorType'),
        problems,
        'clientAuthenticatorType',
      ) ?? 'client-secret';
    const method = METHODS.get(authenticator);
    if (method === undefined) {
      report.leftOut(
        below(at, 'clientAuthenticatorType'),
        `client ${clientId} authenticates with ${authenticator}, which Tessera has no counterpart of`,
      );
      continue;
    }
    entry.token_endpoint_auth_method = method;
    if (authenticator === 'client-secret-jwt')
      report.changed(
        below(at, 'clientAuthenticatorType'),
        `client ${clientId} signed its assertions with its secret (client-secret-jwt): it is client_secret_basic, with that secret`,
      );
    if (method === 'private_key_jwt') {
      const url = attributes['jwks.url'];
      const inline = attributes['jwks.string'];
      if (typeof url === 'string' && url !== '' && attributes['use.jwks.url'] !== 'false') {
        entry.jwks_uri = url;
        report.mapped(below(at, 'attributes', 'jwks.url'), `client ${clientId}: jwks_uri ${url}`);
      } else if (typeof inline === 'string' && inline !== '' && attributes['use.jwks.string'] === 'true') {
        const inlineAt = below(at, 'attributes', 'jwks.string');
        let jwks: unknown;
        try {
          jwks = JSON.parse(inline) as unknown;
        } catch {
          problems.add(inlineAt, 'jwks.string is not JSON');
        }
        // The text's own depth, unchecked by the source's (it is a string there); never a private key (its value
        // is not told: the message names the member only).
        const deep = jwks === undefined ? undefined : tooDeepAt(jwks, MAX_JSON_DEPTH);
        const secret = privateJwk(jwks);
        if (deep !== undefined)
          problems.add(inlineAt, `jwks.string nests deeper than ${MAX_JSON_DEPTH} levels (at ${deep})`);
        else if (secret !== undefined)
          problems.add(
            inlineAt,
            `client ${clientId}'s jwks.string key ${secret.index + 1} has "${secret.member}": it is a private or symmetric key; an export's jwks holds public keys only`,
          );
        else if (jwks !== undefined) {
          entry.jwks = jwks as ClientEntry['jwks'];
          report.mapped(inlineAt, `client ${clientId}: its jwks`);
        }
      } else
        report.changed(
          at,
          `client ${clientId} authenticates with private_key_jwt but the export has no jwks.url: it has no keys until its jwks or jwks_uri is set`,
        );
    }
    if (method === 'tls_client_auth') {
      const dn = attributes['x509.subjectdn'];
      if (typeof dn !== 'string' || dn === '') {
        report.leftOut(
          below(at, 'attributes'),
          `client ${clientId} authenticates with client-x509 but has no x509.subjectdn`,
        );
        continue;
      }
      entry.tls_client_auth_subject_dn = dn;
      report.mapped(
        below(at, 'attributes', 'x509.subjectdn'),
        `client ${clientId}: tls_client_auth_subject_dn ${dn}${attributes['x509.allow.regex.pattern.comparison'] === 'false' ? '' : ' (Keycloak may match it as a regular expression; Tessera matches the DN exactly)'}`,
      );
    }
    const lifespan = attributes['access.token.lifespan'];
    if (typeof lifespan === 'string' && /^\d+$/.test(lifespan) && Number(lifespan) > 0) {
      const lifespanAt = below(at, 'attributes', 'access.token.lifespan');
      entry.token_ttl = clampTtl(Number(lifespan), lifespanAt, report, 'access.token.lifespan');
      report.mapped(lifespanAt, `client ${clientId}: token_ttl ${entry.token_ttl}`);
    }
    if (method === 'client_secret_basic')
      carrySecret(client.secret, below(at, 'secret'), clientId, options, secrets, report, problems);

    // Its protocol mappers, then those of its default client scopes (always in its tokens); each audience once.
    const audiences = new Set<string>();
    const claims: Json = {};
    const owner = `client ${clientId}`;
    listAt(client.protocolMappers, below(at, 'protocolMappers'), problems, 'protocolMappers').forEach(
      (raw, i) => {
        const mapperAt = below(at, 'protocolMappers', i);
        const mapper = protocolMapperOf(raw, mapperAt);
        if (!mapper) return;
        const type = mapper.protocolMapper;
        if (type === AUDIENCE_MAPPER) {
          const url = audienceOf(mapper, mapperAt, owner);
          if (url !== undefined) audiences.add(url);
        } else if (type === CLAIM_MAPPER) {
          const claim = claimOf(mapper, mapperAt, owner);
          if (claim) setClaim(claims, claim.path, claim.value);
        } else
          report.leftOut(
            mapperAt,
            `protocol mapper "${shown(mapper.name)}" (${shown(type)}) of client ${clientId}: Tessera has no counterpart`,
          );
      },
    );
    const defaults = listAt(
      client.defaultClientScopes,
      below(at, 'defaultClientScopes'),
      problems,
      'defaultClientScopes',
    );
    const optional = listAt(
      client.optionalClientScopes,
      below(at, 'optionalClientScopes'),
      problems,
      'optionalClientScopes',
    );
    // Each scope once, however often the list names it; its mappers mapped for the first client, then taken as
    // they were (lines of the scope's, at its place, said once).
    for (const scope of new Set(defaults)) {
      if (typeof scope !== 'string' || BUILT_IN_SCOPES.has(scope)) continue;
      const mapping = scopeMapping(scope);
      if (mapping === undefined) continue;
      for (const url of mapping.audiences) audiences.add(url);
      for (const claim of mapping.claims) setClaim(claims, claim.path, claim.value);
    }
    if (Object.keys(claims).length > 0) entry.claims = claims;

    const scopes: string[] = [];
    const seen = new Set<string>();
    const scopeLists = [
      ['defaultClientScopes', defaults],
      ['optionalClientScopes', optional],
    ] as const;
    for (const [field, list] of scopeLists)
      list.forEach((scope, i) => {
        if (typeof scope !== 'string' || BUILT_IN_SCOPES.has(scope) || seen.has(scope)) return;
        seen.add(scope);
        if (!isScopeName(scope)) {
          report.leftOut(
            below(at, field, i),
            `client scope ${JSON.stringify(scope)} is not a scope token (RFC 6749 §3.3)`,
          );
          return;
        }
        scopes.push(scope);
      });
    file.client(entry);
    report.mapped(
      at,
      `client ${sourceId}${sourceId === clientId ? '' : ` → client ${clientId}`} (${method})`,
    );
    const described = scopes.map((s) => {
      const scopeDescription = clientScopes.get(s)?.value.description;
      return typeof scopeDescription === 'string' && scopeDescription !== ''
        ? { name: s, description: scopeDescription }
        : { name: s };
    });
    const scopeText = scopes.join(' ');
    for (const url of audiences) {
      file.addScopes(url, described);
      file.grant(clientId, url, scopes);
      report.mapped(at, `grant ${clientId} → ${url}${scopes.length ? ` (scopes ${scopeText})` : ''}`);
    }
    if (scopes.length > 0)
      report.changed(
        below(at, 'defaultClientScopes'),
        audiences.size > 0
          ? `client ${clientId}'s client scopes ${scopeText} are scopes of each audience it is granted (${[...audiences].join(', ')}): Keycloak's scopes are not per API`
          : `client ${clientId}'s client scopes ${scopeText} are left out: it is granted no audience`,
      );
  }

  /** A protocol mapper of the export, its name and type strings (anything else a problem at its place). */
  function protocolMapperOf(raw: unknown, at: Place): Json | undefined {
    const mapper = objectAt(raw, at, problems, 'a protocol mapper');
    if (!mapper) return undefined;
    stringAt(mapper.name, below(at, 'name'), problems, 'name');
    stringAt(mapper.protocolMapper, below(at, 'protocolMapper'), problems, 'protocolMapper');
    return mapper;
  }

  /**
   * A client scope's mappers, mapped the first time a client has it as a default scope and kept for the others:
   * a scope of many mappers, the default scope of many clients, costs its mappers once (and its lines are said
   * once, the scope's own), not once per client. Undefined for a name that is no client scope of the realm.
   */
  function scopeMapping(name: string): ScopeMapping | undefined {
    const known = scopeMappings.get(name);
    if (known !== undefined) return known;
    const scope = clientScopes.get(name);
    if (scope === undefined) return undefined;
    const mapping: ScopeMapping = { audiences: [], claims: [] };
    const owner = `client scope ${name}`;
    const urls = new Set<string>();
    listAt(
      scope.value.protocolMappers,
      below(scope.at, 'protocolMappers'),
      problems,
      'protocolMappers',
    ).forEach((raw, i) => {
      const mapperAt = below(scope.at, 'protocolMappers', i);
      const mapper = protocolMapperOf(raw, mapperAt);
      if (!mapper) return;
      if (mapper.protocolMapper === AUDIENCE_MAPPER) {
        const url = audienceOf(mapper, mapperAt, owner);
        if (url !== undefined && !urls.has(url)) {
          urls.add(url);
          mapping.audiences.push(url);
        }
      } else if (mapper.protocolMapper === CLAIM_MAPPER) {
        const claim = claimOf(mapper, mapperAt, owner);
        if (claim) mapping.claims.push(claim);
      }
    });
    scopeMappings.set(name, mapping);
    return mapping;
  }

  /** A hard-coded claim mapper's claim (its path and value), or a line saying why not (`owner`: whose it is). */
  function claimOf(mapper: Json, at: Place, owner: string): { path: string[]; value: unknown } | undefined {
    const config = isObject(mapper.config) ? mapper.config : {};
    const name = config['claim.name'];
    const raw = config['claim.value'];
    if (config['access.token.claim'] === 'false') {
      report.leftOut(at, `claim mapper "${shown(mapper.name)}" adds nothing to access tokens`);
      return undefined;
    }
    if (typeof name !== 'string' || name === '' || typeof raw !== 'string') {
      report.leftOut(at, `claim mapper "${shown(mapper.name)}" has no claim.name or claim.value`);
      return undefined;
    }
    const path = claimPath(name);
    // The registered and reserved names are the token's own (the first segment); no segment may be one that
    // every object inherits (`x.__proto__.y` would set a member of Object.prototype).
    const reserved = reservedClaim(path[0]!) ?? path.map(unsafeMember).find((r) => r !== undefined);
    if (reserved !== undefined) {
      report.leftOut(below(at, 'config', 'claim.name'), `${owner}: ${reserved}`);
      return undefined;
    }
    const type =
      typeof config['jsonType.label'] === 'string' ? (config['jsonType.label'] as string) : undefined;
    const value = claimValue(raw, type);
    if (value === undefined) {
      report.leftOut(
        below(at, 'config', 'claim.value'),
        `claim ${name} of ${owner} is not of its type ${type}`,
      );
      return undefined;
    }
    // A JSON value's depth is its text's, which the source's depth check did not see (it is a string there).
    const deep = tooDeepAt(value, MAX_JSON_DEPTH);
    if (deep !== undefined) {
      problems.add(
        below(at, 'config', 'claim.value'),
        `claim ${name} of ${owner}: its JSON value nests deeper than ${MAX_JSON_DEPTH} levels (at ${deep})`,
      );
      return undefined;
    }
    const proto = protoMemberAt(value);
    if (proto !== undefined) {
      report.leftOut(
        below(at, 'config', 'claim.value'),
        `claim ${name} of ${owner}: its JSON value has a member "__proto__" (at ${proto}), which is not allowed`,
      );
      return undefined;
    }
    report.mapped(at, `${owner}: custom claim ${name}`);
    return { path, value };
  }

  return file;
}
