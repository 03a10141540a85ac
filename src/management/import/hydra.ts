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
  privateJwk,
  requiredString,
  stringAt,
  TakenIds,
  type Json,
  type Mapping,
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

/**
 * The longest Go duration read (Hydra writes `1h0m0s`; 64 characters is a lifespan of every unit, with decimals):
 * a longer one is refused before any matching, whatever its pattern costs.
 */
const MAX_DURATION_LENGTH = 64;

/** A Go duration (time.ParseDuration: `1h0m0s`, `30m`, `1h30m0.5s`, `1.5h`, `0`) in seconds; undefined if it is none. */
export function goDuration(value: string): number | undefined {
  if (value.length > MAX_DURATION_LENGTH) return undefined;
  if (value === '0') return 0;
  // One way only to match a number (digits, then a point and digits if any; or a point and digits): `\d+\.?\d*`
  // split a run of digits between its two `\d` in every way, quadratic in the run when no unit followed.
  const re = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/y;
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
  options: Mapping,
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
  const taken = new TakenIds();
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
      const secret = privateJwk(jwks);
      if (secret !== undefined)
        problems.add(
          below(at, 'jwks', 'keys', secret.index),
          `client ${clientId}'s jwks key ${secret.index + 1} has "${secret.member}": it is a private or symmetric key; an export's jwks holds public keys only`,
        );
      else if (isObject(jwks) && Array.isArray(jwks.keys) && jwks.keys.length > 0) {
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
      if (lifespan.length > MAX_DURATION_LENGTH)
        problems.add(
          lifespanAt,
          `is ${lifespan.length} characters long; a Go duration is read up to ${MAX_DURATION_LENGTH}`,
        );
      else if (seconds === undefined)
        problems.add(lifespanAt, `${JSON.stringify(lifespan)} is not a Go duration`);
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

    // Each scope once, however often the export repeats it (a Set: never a pass over those already kept).
    const kept = new Set<string>();
    const dropped = new Set<string>();
    for (const s of scope.split(' ').filter(Boolean)) {
      if (kept.has(s) || dropped.has(s)) continue;
      if (NOT_API_SCOPES.has(s) || !isScopeName(s)) dropped.add(s);
      else kept.add(s);
    }
    const scopes = [...kept];
    // Made once for the client, not once for each audience it is granted (a list of many audiences).
    const defined = scopes.map((name) => ({ name }));
    const scopeText = scopes.join(' ');
    if (dropped.size > 0)
      report.leftOut(
        below(at, 'scope'),
        `scopes ${[...dropped].join(' ')} of client ${clientId}: OpenID Connect's, no permission of an API`,
      );
    // Each audience granted once, however often the list repeats it (its scopes added once, one line).
    const granted = new Set<string>();
    const named = new Set<string>();
    audienceList.forEach((raw, i) => {
      const audienceAt = below(at, 'audience', i);
      if (typeof raw !== 'string') {
        problems.add(audienceAt, 'an audience must be a string');
        return;
      }
      if (named.has(raw)) return;
      named.add(raw);
      const url = audienceUrl(raw, options);
      if (url === undefined) {
        report.leftOut(
          audienceAt,
          `audience ${raw} of client ${clientId}: a Tessera audience is an http(s) URL; ${audienceHint(raw)}`,
        );
        return;
      }
      if (granted.has(url)) return;
      if (!file.hasAudience(url)) {
        file.audience({ identifier: url });
        report.mapped(audienceAt, `audience ${raw === url ? url : `${raw} → audience ${url}`}`);
      }
      file.addScopes(url, defined);
      file.grant(clientId, url, scopes);
      granted.add(url);
      report.mapped(audienceAt, `grant ${clientId} → ${url}${scopes.length ? ` (scopes ${scopeText})` : ''}`);
    });
    if (scopes.length > 0 && granted.size === 0)
      report.leftOut(
        below(at, 'scope'),
        `scopes ${scopeText} of client ${clientId}: it is granted no audience`,
      );
  }
  return file;
}
