/**
 * Ory Hydra's OAuth 2.0 clients, as its CLI prints them in JSON: one client (`hydra get oauth2-client ID`), a list
 * of them (`hydra get oauth2-client ID ID…`), or a page of `hydra list oauth2-clients --format json`
 * (`{"items": [...], "next_page_token": "…"}`). Clients with the client_credentials grant become clients; their
 * `audience` list audiences and grants; their `scope` the scopes of each audience they are granted.
 */
import type { AuthMethodName } from '../../domain/client-auth/index.js';
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
  stringAt,
  type Json,
  type MappingOptions,
} from './mapping.js';
import { below, rootOf, type Report } from './report.js';
import { carrySecret, type CarriedSecrets } from './secrets.js';
import type { Place, Problems, SourceDoc } from './source.js';

const UNIT_SECONDS: Record<string, number> = {
  ns: 1e-9,
  us: 1e-6,
  µs: 1e-6,
  μs: 1e-6,
  ms: 1e-3,
  s: 1,
  m: 60,
  h: 3600,
};

/** A Go duration (time.ParseDuration: `1h0m0s`, `30m`, `1h30m0.5s`, `1.5h`, `0`) in seconds; undefined if it is none. */
export function goDuration(value: string): number | undefined {
  if (value === '0') return 0;
  const re = /(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)/y;
  let seconds = 0;
  let at = 0;
  while (at < value.length) {
    re.lastIndex = at;
    const match = re.exec(value);
    if (!match) return undefined;
    seconds += Number(match[1]) * UNIT_SECONDS[match[2]!]!;
    at = re.lastIndex;
  }
  return at === 0 ? undefined : seconds;
}

/** OpenID Connect's scopes, and Hydra's default ones: no permission of an API. */
const NOT_API_SCOPES = new Set(['openid', 'offline', 'offline_access']);

const METHODS = new Set<string>(['client_secret_basic', 'client_secret_post', 'private_key_jwt']);

export function mapHydra(
  docs: SourceDoc[],
  options: MappingOptions,
  report: Report,
  problems: Problems,
  secrets: CarriedSecrets,
): FileBuilder {
  const file = new FileBuilder();
  const doc = docs[0]!;
  const root = rootOf(doc);
  let list: unknown[];
  let listAt_: Place;
  if (Array.isArray(doc.data)) {
    list = doc.data;
    listAt_ = root;
  } else if (isObject(doc.data) && 'items' in doc.data) {
    listAt_ = below(root, 'items');
    list = listAt(doc.data.items, listAt_, problems, 'items');
    const next = doc.data.next_page_token;
    if (typeof next === 'string' && next !== '')
      report.leftOut(
        below(root, 'next_page_token'),
        `the clients of the next pages: this is one page of hydra list oauth2-clients; import every page (--page-token ${next}) or a larger --page-size`,
      );
  } else if (isObject(doc.data)) {
    list = [doc.data];
    listAt_ = root;
  } else {
    objectAt(
      doc.data,
      root,
      problems,
      'a Hydra client, a list of them or a page of hydra list oauth2-clients',
    );
    return file;
  }
  const single = !Array.isArray(doc.data) && !('items' in (doc.data as Json));
  const clients: { value: Json; at: Place }[] = [];
  list.forEach((raw, i) => {
    const at = single ? listAt_ : below(listAt_, i);
    const value = objectAt(raw, at, problems, 'a client');
    if (value) clients.push({ value, at });
  });
  const taken = new Set<string>();
  for (const { value } of clients) if (isClientId(value.client_id)) taken.add(value.client_id);

  for (const { value: client, at } of clients) {
    const sourceId = requiredString(client.client_id, below(at, 'client_id'), problems, 'client_id');
    const clientName = stringAt(client.client_name, below(at, 'client_name'), problems, 'client_name');
    const grantTypes = listAt(client.grant_types, below(at, 'grant_types'), problems, 'grant_types');
    const rawMethod =
      stringAt(
        client.token_endpoint_auth_method,
        below(at, 'token_endpoint_auth_method'),
        problems,
        'token_endpoint_auth_method',
      ) ?? 'client_secret_basic';
    const audienceList = listAt(client.audience, below(at, 'audience'), problems, 'audience');
    const scope = stringAt(client.scope, below(at, 'scope'), problems, 'scope') ?? '';
    if (sourceId === undefined) continue;
    if (!grantTypes.includes('client_credentials') || rawMethod === 'none') {
      report.leftOut(
        at,
        rawMethod === 'none'
          ? `client ${sourceId} authenticates with none: a public client gets no client-credentials token`
          : `client ${sourceId} has no client_credentials grant`,
      );
      continue;
    }
    if (!METHODS.has(rawMethod)) {
      report.leftOut(
        below(at, 'token_endpoint_auth_method'),
        `client ${sourceId} authenticates with ${rawMethod}, which Tessera has no counterpart of`,
      );
      continue;
    }
    const method = rawMethod as AuthMethodName;
    let clientId = sourceId;
    if (!isClientId(sourceId)) {
      clientId = clientIdFromName(clientName || sourceId, taken);
      report.changed(
        below(at, 'client_id'),
        `client_id ${JSON.stringify(sourceId)} is not a Tessera client id: its client_id is ${clientId}, made from its ${clientName ? 'name' : 'id'}`,
      );
    }
    let name = clientName;
    if (!name) {
      name = clientId;
      report.changed(
        below(at, 'client_name'),
        `client ${clientId} has no client_name: its name is its client_id`,
      );
    }
    const entry: ClientEntry = { client_id: clientId, name };
    if (method !== 'client_secret_basic') entry.token_endpoint_auth_method = method;
    if (method === 'private_key_jwt') {
      const jwksUri = stringAt(client.jwks_uri, below(at, 'jwks_uri'), problems, 'jwks_uri');
      const jwks = client.jwks;
      if (isObject(jwks) && Array.isArray(jwks.keys) && jwks.keys.length > 0) {
        entry.jwks = jwks as unknown as ClientEntry['jwks'];
        report.mapped(
          below(at, 'jwks'),
          `client ${clientId}: its jwks (${jwks.keys.length} key${jwks.keys.length === 1 ? '' : 's'})`,
        );
      } else if (jwksUri) {
        entry.jwks_uri = jwksUri;
        report.mapped(below(at, 'jwks_uri'), `client ${clientId}: jwks_uri ${jwksUri}`);
      } else
        report.changed(
          at,
          `client ${clientId} authenticates with private_key_jwt but has neither jwks nor jwks_uri: it has no keys until one is set`,
        );
    } else if (client.client_secret !== undefined)
      carrySecret(
        client.client_secret,
        below(at, 'client_secret'),
        clientId,
        options,
        secrets,
        report,
        problems,
      );
    const lifespan = client.client_credentials_grant_access_token_lifespan;
    if (typeof lifespan === 'string' && lifespan !== '') {
      const lifespanAt = below(at, 'client_credentials_grant_access_token_lifespan');
      const seconds = goDuration(lifespan);
      if (seconds === undefined) problems.add(lifespanAt, `${JSON.stringify(lifespan)} is not a Go duration`);
      else {
        entry.token_ttl = clampTtl(seconds, lifespanAt, report, `the lifespan ${lifespan} =`);
        if (entry.token_ttl === seconds)
          report.mapped(lifespanAt, `client ${clientId}: token_ttl ${seconds} (${lifespan})`);
      }
    }
    file.client(entry);
    report.mapped(
      at,
      `client ${sourceId}${sourceId === clientId ? '' : ` → client ${clientId}`}${method === 'private_key_jwt' ? '' : ' (Hydra exports no secret: apply makes one)'}`,
    );

    const scopes: string[] = [];
    const dropped: string[] = [];
    for (const s of scope.split(' ').filter(Boolean)) {
      if (NOT_API_SCOPES.has(s) || !isScopeName(s)) dropped.push(s);
      else if (!scopes.includes(s)) scopes.push(s);
    }
    if (dropped.length > 0)
      report.leftOut(
        below(at, 'scope'),
        `scopes ${dropped.join(' ')} of client ${clientId}: OpenID Connect's, no permission of an API`,
      );
    const granted: string[] = [];
    audienceList.forEach((raw, i) => {
      const audienceAt = below(at, 'audience', i);
      if (typeof raw !== 'string') {
        problems.add(audienceAt, 'an audience must be a string');
        return;
      }
      const url = audienceUrl(raw, options);
      if (url === undefined) {
        report.leftOut(
          audienceAt,
          `audience ${raw} of client ${clientId}: a Tessera audience is an http(s) URL; ${audienceHint(raw)}`,
        );
        return;
      }
      if (!file.hasAudience(url)) {
        file.audience({ identifier: url });
        report.mapped(audienceAt, `audience ${raw === url ? url : `${raw} → audience ${url}`}`);
      }
      file.addScopes(
        url,
        scopes.map((name) => ({ name })),
      );
      file.grant(clientId, url, scopes);
      granted.push(url);
      report.mapped(
        audienceAt,
        `grant ${clientId} → ${url}${scopes.length ? ` (scopes ${scopes.join(' ')})` : ''}`,
      );
    });
    if (scopes.length > 0 && granted.length === 0)
      report.leftOut(
        below(at, 'scope'),
        `scopes ${scopes.join(' ')} of client ${clientId}: it is granted no audience`,
      );
  }
  return file;
}
