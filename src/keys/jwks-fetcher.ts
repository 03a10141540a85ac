import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { createLocalJWKSet, type JWK, type JWTVerifyGetKey } from 'jose';
import { boundedLru } from '../lru.js';
import { clientSpan } from '../telemetry/client-span.js';
import { isPublicAddress } from '../domain/addresses.js';
import { TesseraError } from '../domain/errors.js';
import {
  algsForKey,
  certificateThumbprints,
  discoveryUrl,
  MAX_CLIENT_KEYS,
  rsaJwkProblem,
  type RemoteCertificates,
  type RemoteKeys,
} from '../domain/client-auth/index.js';
import { MAX_JSON_DEPTH, tooDeepAt } from '../domain/json-depth.js';
import type { KeyPlace } from '../domain/known-client.js';

/**
 * Public keys published at a URL (docs/interface.md, "Client authentication" and "Workload identity federation"):
 * a private_key_jwt client's jwks_uri; a federated credential's issuer's jwks_uri, or the jwks_uri of the
 * issuer's OpenID Provider metadata (`<issuer>/.well-known/openid-configuration`, whose `issuer` must be that
 * issuer) when the credential names none. Each place is fetched with a 2 s timeout and a 64 KiB cap (the
 * metadata too), cached for the key set's max-age clamped to 5 minutes–24 hours, refetched at most once a
 * minute when an assertion names a kid the set lacks, and kept (stale) when a refetch fails. One fetch at a
 * time per place, whatever the number of requests waiting for it.
 *
 * An issuer's keys are cached under the issuer and where they are (its jwks_uri, or discovery), apart from
 * any other issuer's and any client's, even at the same URL: an issuer's keys never verify another's tokens.
 *
 * Our own fetch rather than jose's createRemoteJWKSet, for the guard in front of it: every address the host
 * resolves to is checked in the connection's own DNS lookup (so a name that resolves to a private address at
 * connect time is refused, not only at registration), redirects are not followed, and the cap counts bytes
 * as they arrive. jose still parses and imports every key (createLocalJWKSet).
 */
export interface JwksFetcherOptions {
  /** TESSERA_JWKS_ALLOW_PRIVATE: loopback, private, link-local and unique-local addresses may be fetched. */
  allowPrivate: boolean;
  /** NODE_ENV=production: https only. */
  production: boolean;
  timeoutMs?: number;
  maxBytes?: number;
  minTtlMs?: number;
  maxTtlMs?: number;
  refetchMs?: number;
  now?: () => number;
  /** Each time an issuer's keys are fetched (its metadata and key set), and whether that gave keys. */
  onIssuerFetch?: (issuer: string, ok: boolean) => void;
}

const JWKS_FETCH_TIMEOUT_MS = 2000;
const JWKS_MAX_BYTES = 64 * 1024;
const MIN_TTL_MS = 5 * 60_000;
const MAX_TTL_MS = 24 * 3600_000;
const REFETCH_MS = 60_000;
const JWKS_ACCEPT = 'application/jwk-set+json, application/json';
/** Places whose keys are kept: far more than the clients and issuers of one deployment publish. */
const MAX_URLS = 10_000;

interface Entry {
  keys: JWTVerifyGetKey | undefined;
  /**
   * The x5t#S256 of the first certificate of each key's x5c (RFC 7517 §4.7): a self_signed_tls_client_auth client's
   * certificates (RFC 8705 §2.2), when the set is one.
   */
  certificates: ReadonlySet<string> | undefined;
  /** Until when the keys are fresh (ms). */
  freshUntil: number;
  /** When a fetch last began (ms): a place that failed is not fetched again within refetchMs. */
  fetchedAt: number;
  /** When an unknown kid last made a refetch (ms): at most one within refetchMs. */
  refetchedAt: number;
  /** Why the last fetch failed, while there are no keys. */
  error: string | undefined;
  inflight: Promise<void> | undefined;
}

/** A place's cache key: a client's URL as it is; an issuer's, the issuer and its URL (none: discovery). */
const placeKey = (place: KeyPlace): string =>
  place.issuer === undefined ? place.uri : `${place.issuer}\u0000${place.uri ?? ''}`;

/** A fetched answer: its JSON and the max-age it may be kept for. */
interface Fetched {
  body: unknown;
  maxAgeMs: number | undefined;
}

/** A fetch refused before it is made (a name that resolves to an address that is not public). */
class FetchRefused extends TesseraError {
  override get code(): string {
    return 'fetch_refused';
  }
}

/** A DNS lookup that fails for a name with any address that is not public (all of them are checked). */
function guardedLookup(allowPrivate: boolean): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (error, addresses: LookupAddress[]) => {
      if (error) return callback(error, '', 0);
      const blocked = allowPrivate ? undefined : addresses.find((a) => !isPublicAddress(a.address));
      if (blocked !== undefined || addresses.length === 0)
        return callback(
          new FetchRefused(`${hostname} resolves to ${blocked?.address ?? 'nothing'}, not a public address`),
          '',
          0,
        );
      if (options.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
      callback(null, addresses[0]!.address, addresses[0]!.family);
    });
  };
}

/** max-age of a Cache-Control header, in ms, or undefined. */
function maxAgeOf(header: string | undefined): number | undefined {
  const match = /(?:^|,)\s*max-age\s*=\s*"?(\d+)"?/i.exec(header ?? '');
  return match ? Number(match[1]) * 1000 : undefined;
}

/** The usable signing keys of a fetched set: public keys of a type an assertion can be signed with. */
function usableKeys(body: unknown): JWK[] {
  // The depth rule of every JSON document Tessera reads (docs/management.md: 32 levels): jose copies the keys with
  // structuredClone, which recurses per level and overflows the stack on a key nested a few thousand deep.
  if (tooDeepAt(body, MAX_JSON_DEPTH) !== undefined)
    throw new Error(`the answer nests deeper than ${MAX_JSON_DEPTH} levels`);
  const keys = (body as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(keys)) throw new Error('the answer is not a JWK Set');
  const usable = keys.filter(
    (k): k is JWK =>
      typeof k === 'object' &&
      k !== null &&
      !('d' in k) &&
      !('k' in k) &&
      (k as JWK).use !== 'enc' &&
      algsForKey(k as JWK).length > 0 &&
      rsaJwkProblem(k as JWK) === undefined,
  );
  if (usable.length === 0) throw new Error('the set has no usable signing key');
  return usable.slice(0, MAX_CLIENT_KEYS * 2);
}

const NO_CERTIFICATES: ReadonlySet<string> = new Set();

export class JwksFetcher implements RemoteKeys, RemoteCertificates {
  private readonly entries = boundedLru<string, Entry>(MAX_URLS);
  private readonly timeoutMs: number;
  private readonly maxBytes: number;
  private readonly minTtlMs: number;
  private readonly maxTtlMs: number;
  private readonly refetchMs: number;
  private readonly now: () => number;
  private readonly lookup: LookupFunction;

  constructor(private readonly options: JwksFetcherOptions) {
    this.timeoutMs = options.timeoutMs ?? JWKS_FETCH_TIMEOUT_MS;
    this.maxBytes = options.maxBytes ?? JWKS_MAX_BYTES;
    this.minTtlMs = options.minTtlMs ?? MIN_TTL_MS;
    this.maxTtlMs = options.maxTtlMs ?? MAX_TTL_MS;
    this.refetchMs = options.refetchMs ?? REFETCH_MS;
    this.now = options.now ?? Date.now;
    this.lookup = guardedLookup(options.allowPrivate);
  }

  async keysFor(place: KeyPlace): Promise<JWTVerifyGetKey> {
    const key = placeKey(place);
    let entry = this.entries.get(key);
    if (entry?.keys !== undefined && entry.freshUntil > this.now()) return entry.keys;
    if (entry?.inflight !== undefined) await entry.inflight;
    // Expired keys are fetched again (stale ones serve while that fails); a place that failed is retried at
    // most once a minute, so an unreachable one costs one fetch a minute, not one a request.
    else if (entry === undefined || this.now() - entry.fetchedAt >= this.refetchMs)
      entry = await this.fetchOnce(key, place);
    entry = this.entries.get(key) ?? entry;
    if (entry?.keys !== undefined) return entry.keys;
    throw new Error(entry?.error ?? 'no keys');
  }

  async refetch(place: KeyPlace): Promise<JWTVerifyGetKey | undefined> {
    const key = placeKey(place);
    const entry = this.entries.get(key);
    if (entry === undefined) return undefined;
    // Counted apart from the fetches of expired keys: a key rotated just after a fetch is found at once.
    if (this.now() - entry.refetchedAt < this.refetchMs) return undefined;
    entry.refetchedAt = this.now();
    const before = entry.keys;
    const after = (await this.fetchOnce(key, place)).keys;
    return after !== before ? after : undefined;
  }

  /** The certificates of the set at a client's jwks_uri (self_signed_tls_client_auth), fetched as its keys are. */
  async certificatesFor(place: { uri: string }): Promise<ReadonlySet<string>> {
    await this.keysFor(place);
    return this.entries.get(placeKey(place))?.certificates ?? NO_CERTIFICATES;
  }

  /** The set fetched again for an unknown certificate, as for an unknown kid (at most once a minute); else undefined. */
  async refetchCertificates(place: { uri: string }): Promise<ReadonlySet<string> | undefined> {
    if ((await this.refetch(place)) === undefined) return undefined;
    return this.entries.get(placeKey(place))?.certificates;
  }

  /** Fetches the place unless a fetch is under way (then waits for it); the entry after it. */
  private async fetchOnce(key: string, place: KeyPlace): Promise<Entry> {
    let entry = this.entries.get(key);
    if (entry === undefined) {
      entry = {
        keys: undefined,
        certificates: undefined,
        freshUntil: 0,
        fetchedAt: 0,
        refetchedAt: -Infinity,
        error: undefined,
        inflight: undefined,
      };
      this.entries.set(key, entry);
    }
    const current = entry;
    current.inflight ??= (async () => {
      current.fetchedAt = this.now();
      const issuer = place.issuer;
      try {
        const { body, maxAgeMs } = await this.fetchKeySet(place);
        const keys = usableKeys(body);
        current.keys = createLocalJWKSet({ keys });
        current.certificates = certificateThumbprints({ keys });
        current.error = undefined;
        const ttl = Math.min(this.maxTtlMs, Math.max(this.minTtlMs, maxAgeMs ?? 0));
        current.freshUntil = this.now() + ttl;
        if (issuer !== undefined) this.options.onIssuerFetch?.(issuer, true);
      } catch (error) {
        current.error = (error as Error).message;
        // Stale keys keep serving until the next try, a minute on.
        if (current.keys !== undefined) current.freshUntil = this.now() + this.refetchMs;
        if (issuer !== undefined) this.options.onIssuerFetch?.(issuer, false);
      } finally {
        current.inflight = undefined;
      }
    })();
    await current.inflight;
    return current;
  }

  /**
   * The key set of a place: at its URL; for an issuer without one, at the jwks_uri of its OpenID Provider
   * metadata (OpenID Connect Discovery §4), fetched each time the keys are, behind the same guard.
   */
  private async fetchKeySet(place: KeyPlace): Promise<Fetched> {
    const issuer = place.issuer;
    if (issuer === undefined || place.uri !== null) return this.fetch(place.uri!, JWKS_ACCEPT);
    let metadata: Fetched;
    try {
      metadata = await this.fetch(discoveryUrl(issuer), 'application/json');
    } catch (error) {
      throw new Error(`discovery: ${(error as Error).message}`, { cause: error });
    }
    const body = metadata.body as { issuer?: unknown; jwks_uri?: unknown } | null;
    if (typeof body !== 'object' || body === null || Array.isArray(body))
      throw new Error('discovery: the answer is not a JSON object');
    // OpenID Connect Discovery §4.3: the metadata's issuer is exactly the one it was fetched for.
    if (body.issuer !== issuer)
      throw new Error(
        `discovery: the metadata's issuer is ${typeof body.issuer === 'string' ? JSON.stringify(body.issuer.slice(0, 200)) : 'missing'}, not this issuer`,
      );
    if (typeof body.jwks_uri !== 'string' || body.jwks_uri === '')
      throw new Error('discovery: the metadata has no jwks_uri');
    return this.fetch(body.jwks_uri, JWKS_ACCEPT);
  }

  /**
   * One GET, guarded, in a CLIENT span of the request it is made for (traces: url.full without its query, which may
   * carry anything).
   */
  private fetch(uri: string, accept: string): Promise<Fetched> {
    let where: Record<string, string | number> = { 'http.request.method': 'GET' };
    try {
      const url = new URL(uri);
      where = {
        ...where,
        'url.full': `${url.origin}${url.pathname}`,
        'server.address': url.hostname,
        'server.port': Number(url.port || (url.protocol === 'https:' ? 443 : 80)),
      };
    } catch {
      // Not a URL: refused by the fetch itself.
    }
    return clientSpan(
      'GET',
      where,
      () => this.fetchGuarded(uri, accept),
      (span) => span.set('http.response.status_code', 200),
    );
  }

  /** One GET, guarded: scheme, address, time, size; a 200 with JSON, or an Error saying what went wrong. */
  private fetchGuarded(uri: string, accept: string): Promise<Fetched> {
    let url: URL;
    try {
      url = new URL(uri);
    } catch {
      return Promise.reject(new Error('not a URL'));
    }
    if (url.protocol !== 'https:' && (url.protocol !== 'http:' || this.options.production))
      return Promise.reject(
        new Error(this.options.production ? 'only https is fetched' : 'not an http(s) URL'),
      );
    const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
    // A literal address, in any spelling (addresses.ts); a name is checked as it resolves (guardedLookup).
    if (isIP(host) !== 0 && !this.options.allowPrivate && !isPublicAddress(host))
      return Promise.reject(new Error(`${host} is not a public address`));
    const request = url.protocol === 'https:' ? httpsRequest : httpRequest;
    return new Promise((resolve, reject) => {
      let done = false;
      const finish = (error: Error | undefined, value?: Fetched) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        if (error) {
          req.destroy();
          reject(error);
        } else resolve(value!);
      };
      const req = request(
        url,
        {
          method: 'GET',
          headers: { accept },
          lookup: this.lookup,
          agent: false,
        },
        (res: IncomingMessage) => {
          if (res.statusCode !== 200) return finish(new Error(`answered ${res.statusCode}`));
          const declared = Number(res.headers['content-length'] ?? 0);
          if (declared > this.maxBytes) return finish(new Error(`answer over ${this.maxBytes} bytes`));
          const chunks: Buffer[] = [];
          let size = 0;
          res.on('data', (chunk: Buffer) => {
            size += chunk.length;
            if (size > this.maxBytes) return finish(new Error(`answer over ${this.maxBytes} bytes`));
            chunks.push(chunk);
          });
          res.on('end', () => {
            let body: unknown;
            try {
              body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
            } catch {
              return finish(new Error('the answer is not JSON'));
            }
            finish(undefined, { body, maxAgeMs: maxAgeOf(res.headers['cache-control']) });
          });
          res.on('error', (error) => finish(error));
        },
      );
      const timer = setTimeout(
        () => finish(new Error(`no answer within ${this.timeoutMs} ms`)),
        this.timeoutMs,
      );
      req.on('error', (error) =>
        finish(
          error instanceof FetchRefused
            ? error
            : new Error(`unreachable (${(error as NodeJS.ErrnoException).code ?? error.message})`),
        ),
      );
      req.end();
    });
  }
}
