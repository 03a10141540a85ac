/**
 * Keycloak, as it exports a realm (`kc.sh export --realm NAME --users skip`, or the admin console's partial export,
 * which masks secrets): its confidential clients with a service account become clients; the audiences of their
 * `oidc-audience-mapper` protocol mappers (their own, or those of their default client scopes) audiences and
 * grants; their `oidc-hardcoded-claim-mapper`s custom claims; their default and optional client scopes that are
 * not Keycloak's built-in ones scopes of each audience they are granted.
 */
import type { AuthMethodName } from '../../domain/client-auth/index.js';
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
  requiredString,
  reservedClaim,
  stringAt,
  type Json,
  type MappingOptions,
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

function setClaim(claims: Json, path: string[], value: unknown): void {
  let node = claims;
  for (const part of path.slice(0, -1)) {
    if (!isObject(node[part])) node[part] = {};
    node = node[part] as Json;
  }
  node[path.at(-1)!] = value;
}

export function mapKeycloak(
  docs: SourceDoc[],
  options: MappingOptions,
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

  const taken = new Set<string>();
  for (const { value } of clients) if (isClientId(value.clientId)) taken.add(value.clientId);

  /** An audience mapper: the audience it names (made and granted), or a line saying why not. */
  const audienceOf = (mapper: Json, at: Place, clientId: string): string | undefined => {
    const config = isObject(mapper.config) ? mapper.config : {};
    if (config['access.token.claim'] === 'false') {
      report.leftOut(at, `audience mapper "${String(mapper.name)}" adds nothing to access tokens`);
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
          `audience ${custom} of client ${clientId}: a Tessera audience is an http(s) URL; ${audienceHint(custom)}`,
        );
        return undefined;
      }
    } else if (typeof named === 'string' && named !== '') {
      source = named;
      const target = byClientId.get(named);
      url = options.audiences?.[named] ?? urlOfClient(target);
      if (url === undefined) {
        report.leftOut(
          below(at, 'config', 'included.client.audience'),
          `audience ${named} of client ${clientId}: ${target ? 'the client has no absolute rootUrl or baseUrl' : 'no client of the realm'}; ${audienceHint(named)}`,
        );
        return undefined;
      }
      const targetName =
        typeof target?.name === 'string' && !target.name.startsWith('${') ? target.name : named;
      name = targetName;
    } else {
      report.leftOut(at, `audience mapper "${String(mapper.name)}" names no audience`);
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
    const authenticator = client.clientAuthenticatorType ?? 'client-secret';
    const method = {
      'client-secret': 'client_secret_basic',
      'client-secret-jwt': 'client_secret_basic',
      'client-jwt': 'private_key_jwt',
      'client-x509': 'tls_client_auth',
    }[String(authenticator)] as AuthMethodName | undefined;
    if (method === undefined) {
      report.leftOut(
        below(at, 'clientAuthenticatorType'),
        `client ${clientId} authenticates with ${String(authenticator)}, which Tessera has no counterpart of`,
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
        try {
          entry.jwks = JSON.parse(inline) as ClientEntry['jwks'];
          report.mapped(below(at, 'attributes', 'jwks.string'), `client ${clientId}: its jwks`);
        } catch {
          problems.add(below(at, 'attributes', 'jwks.string'), 'jwks.string is not JSON');
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

    // Its protocol mappers, then those of its default client scopes (always in its tokens).
    const audiences: string[] = [];
    const claims: Json = {};
    const mappersOf = (owner: Json, ownerAt: Place, what: string) =>
      listAt(owner.protocolMappers, below(ownerAt, 'protocolMappers'), problems, 'protocolMappers').forEach(
        (raw, i) => {
          const mapperAt = below(ownerAt, 'protocolMappers', i);
          const mapper = objectAt(raw, mapperAt, problems, 'a protocol mapper');
          if (!mapper) return;
          const type = mapper.protocolMapper;
          if (type === AUDIENCE_MAPPER) {
            const url = audienceOf(mapper, mapperAt, clientId);
            if (url !== undefined && !audiences.includes(url)) audiences.push(url);
          } else if (type === CLAIM_MAPPER) {
            claimOf(mapper, mapperAt, clientId, claims);
          } else if (what === 'client')
            report.leftOut(
              mapperAt,
              `protocol mapper "${String(mapper.name)}" (${String(type)}) of client ${clientId}: Tessera has no counterpart`,
            );
        },
      );
    mappersOf(client, at, 'client');
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
    for (const scope of defaults) {
      const known = typeof scope === 'string' ? clientScopes.get(scope) : undefined;
      if (known && !BUILT_IN_SCOPES.has(scope as string)) mappersOf(known.value, known.at, 'scope');
    }
    if (Object.keys(claims).length > 0) entry.claims = claims;

    const scopes: string[] = [];
    const scopeLists = [
      ['defaultClientScopes', defaults],
      ['optionalClientScopes', optional],
    ] as const;
    for (const [field, list] of scopeLists)
      list.forEach((scope, i) => {
        if (typeof scope !== 'string' || BUILT_IN_SCOPES.has(scope) || scopes.includes(scope)) return;
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
    for (const url of audiences) {
      const described = scopes.map((s) => {
        const scopeDescription = clientScopes.get(s)?.value.description;
        return typeof scopeDescription === 'string' && scopeDescription !== ''
          ? { name: s, description: scopeDescription }
          : { name: s };
      });
      file.addScopes(url, described);
      file.grant(clientId, url, scopes);
      report.mapped(at, `grant ${clientId} → ${url}${scopes.length ? ` (scopes ${scopes.join(' ')})` : ''}`);
    }
    if (scopes.length > 0)
      report.changed(
        below(at, 'defaultClientScopes'),
        audiences.length > 0
          ? `client ${clientId}'s client scopes ${scopes.join(' ')} are scopes of each audience it is granted (${audiences.join(', ')}): Keycloak's scopes are not per API`
          : `client ${clientId}'s client scopes ${scopes.join(' ')} are left out: it is granted no audience`,
      );
  }

  function claimOf(mapper: Json, at: Place, clientId: string, claims: Json): void {
    const config = isObject(mapper.config) ? mapper.config : {};
    const name = config['claim.name'];
    const raw = config['claim.value'];
    if (config['access.token.claim'] === 'false') {
      report.leftOut(at, `claim mapper "${String(mapper.name)}" adds nothing to access tokens`);
      return;
    }
    if (typeof name !== 'string' || name === '' || typeof raw !== 'string') {
      report.leftOut(at, `claim mapper "${String(mapper.name)}" has no claim.name or claim.value`);
      return;
    }
    const path = claimPath(name);
    const reserved = reservedClaim(path[0]!);
    if (reserved !== undefined) {
      report.leftOut(below(at, 'config', 'claim.name'), `client ${clientId}: ${reserved}`);
      return;
    }
    const type =
      typeof config['jsonType.label'] === 'string' ? (config['jsonType.label'] as string) : undefined;
    const value = claimValue(raw, type);
    if (value === undefined) {
      report.leftOut(
        below(at, 'config', 'claim.value'),
        `claim ${name} of client ${clientId} is not of its type ${type}`,
      );
      return;
    }
    setClaim(claims, path, value);
    report.mapped(at, `client ${clientId}: custom claim ${name}`);
  }

  return file;
}
