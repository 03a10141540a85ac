import { isIP } from 'node:net';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { TesseraError } from '../domain/errors.js';
import { isSigningAlg, SIGNING_ALGS, type SigningAlg } from '../domain/jose.js';
import { MAX_TOKEN_TTL, MIN_TOKEN_TTL, parseDuration as parseDurationStrictly } from '../domain/validate.js';

/** A failed-attempt limit: this many failures within the window block the key for `blockSeconds`. */
export interface Threshold {
  failures: number;
  windowSeconds: number;
  blockSeconds: number;
}

/** Every setting Tessera reads, validated once at start. The CLI reads the same ones. */
export interface Config {
  /** TCP port of the HTTP server. */
  port: number;
  /** Interface the HTTP server binds to. */
  host: string;
  /** Public base URL; the `iss` of every token and the base of every published endpoint. */
  issuer: string;
  /** Directory of the embedded SQLite file and, outside production, of the generated master key. */
  dataDir: string;
  /** Where the store lives: a postgres:// URL, an absolute SQLite file path, or undefined for `<dataDir>/tessera.db`. */
  databaseUrl: string | undefined;
  /** Default access token lifetime in seconds; an audience may set its own. */
  tokenTtl: number;
  /** Default JWS algorithm; an audience may set its own. */
  signingAlg: SigningAlg;
  /** 32-byte key that encrypts private signing keys at rest, or undefined (see keys/master-key.ts). */
  masterKey: string | undefined;
  /** Redis for shared counters across instances (failed-attempt limits, quotas). */
  redisUrl: string | undefined;
  /** Prefix of every Redis key, so several deployments (or test runs) can share one Redis. */
  redisPrefix: string;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** Backstop lifetime in seconds of a cached client; changes normally arrive through the change feed. */
  cacheTtl: number;
  /** Most clients kept in memory at once. */
  cacheMax: number;
  /** How often, in milliseconds, the change feed is read for changes made by other processes. */
  changePollMs: number;
  /**
   * Which proxies' X-Forwarded-For to believe for the caller's address (the failed-attempt limits count per
   * address): false (none), or the list of the proxies' addresses and CIDR ranges.
   */
  trustProxy: false | string[];
  /** Seconds audit events are kept in the store. */
  auditRetention: number;
  /** Directory where audit events wait for the store (one per host; see audit/spool.ts). */
  auditSpoolDir: string;
  /** Most bytes the audit spool may hold; events past it are dropped (counted and logged). */
  auditSpoolMax: number;
  /** Seconds cached clients are still served while the store cannot be reached; then 503. */
  staleWindow: number;
  /** Seconds a client has to send a whole request; slower ones get 408 and are disconnected. */
  requestTimeout: number;
  /** Processes serving the port (`tessera serve --workers`); 1 serves in this process. */
  workers: number;
  /**
   * Most connections one process holds open at once; past it the least recently active idle ones are closed
   * to make room, else the new one is. Defaults from the open-files limit (see defaultMaxConnections).
   */
  maxConnections: number;
  /** Seconds an idle keep-alive connection is kept (announced to clients in `Keep-Alive: timeout=`). */
  keepAliveTimeout: number;
  /** Seconds the server keeps serving after SIGTERM/SIGINT, /readyz answering 503, before it stops listening. */
  shutdownDelay: number;
  /** Seconds connections have to finish once the listener is closed; what is left then is destroyed. */
  shutdownTimeout: number;
  /** Seconds between automatic key rotations; 0 turns automatic rotation off. */
  keyRotationInterval: number;
  /** Seconds a new key is published before it signs. The JWKS max-age is half of it (see jwksMaxAge). */
  keyPublishAhead: number;
  /**
   * Failed authentications per client id + source address: `failures` within `windowSeconds` block that
   * pair for `blockSeconds` (TESSERA_ATTEMPTS_CLIENT_MAX, _WINDOW, _BLOCK).
   */
  attemptsPerClient: Threshold;
  /** Failed authentications per source address, whatever the client ids (TESSERA_ATTEMPTS_SOURCE_*). */
  attemptsPerSource: Threshold;
  /** Failed console logins per operator email, from any address (TESSERA_ATTEMPTS_LOGIN_*). */
  attemptsLogin: Threshold;
  /** Failed console logins per source address, whatever the emails (TESSERA_ATTEMPTS_LOGIN_SOURCE_*). */
  attemptsLoginSource: Threshold;
  /** Whether the web console is served at /console (TESSERA_CONSOLE). */
  console: boolean;
  /** Seconds a console session lasts without a request (TESSERA_SESSION_IDLE). */
  sessionIdle: number;
  /** Seconds a console session lasts at most, however active (TESSERA_SESSION_MAX). */
  sessionMax: number;
  /** Milliseconds a count waits for Redis before it is made in memory and the breaker opens. */
  redisTimeoutMs: number;
  /** Seconds a PostgreSQL query may take before it fails: a store that hangs fails like one that refuses. */
  pgQueryTimeout: number;
  /** Seconds a connection attempt to PostgreSQL may take before it fails. */
  pgConnectTimeout: number;
  /** Seconds a `503 temporarily_unavailable` asks the client to wait (`Retry-After`). */
  retryAfter: number;
  /** Whether GET /metrics answers (Prometheus text format); off, it is a 404 like any unknown path. */
  metrics: boolean;
  /** NODE_ENV=production: refuses settings that are only safe on a developer's machine. */
  production: boolean;
  /**
   * Whether a client's jwks_uri may be on a loopback, private, link-local or unique-local address
   * (TESSERA_JWKS_ALLOW_PRIVATE; off: such fetches are refused, against server-side request forgery, and a
   * jwks_uri on such an address written as an IP literal is refused when it is set).
   */
  jwksAllowPrivate: boolean;
  /**
   * Whether a DPoP proof must carry a nonce the server gave (TESSERA_DPOP_NONCE; RFC 9449 §8): every answer of
   * the token endpoint then carries the current one in `DPoP-Nonce`.
   */
  dpopNonce: boolean;
  /**
   * HTTPS served by Tessera (TESSERA_TLS_CERT and TESSERA_TLS_KEY, absolute paths of PEM files); undefined: plain
   * HTTP (behind a proxy that terminates TLS, or for local use).
   */
  tls: { cert: string; key: string } | undefined;
  /** TESSERA_TLS_CLIENT_CA: the PEM bundle of the CAs whose client certificates tls_client_auth trusts (RFC 8705). */
  tlsClientCa: string | undefined;
  /**
   * TESSERA_CLIENT_CERT_HEADER: where a proxy that terminated TLS puts the client's certificate, read only from the
   * peers of TESSERA_TRUST_PROXY; undefined: no header is read.
   */
  clientCertHeader: (typeof CLIENT_CERT_HEADERS)[number] | undefined;
  /** TESSERA_MTLS_BASE_URL: the origin of RFC 8705 §5's mtls_endpoint_aliases; undefined: the issuer's. */
  mtlsBaseUrl: string | undefined;
  /**
   * TESSERA_OTEL_TRUST_REMOTE: every caller's W3C traceparent is the parent of its request's span (by default only a
   * TESSERA_TRUST_PROXY peer's is; anyone else's is a link).
   */
  otelTrustRemote: boolean;
  /**
   * TESSERA_BOOTSTRAP_ADMIN_CLIENT_ID with TESSERA_BOOTSTRAP_ADMIN_CLIENT_SECRET_FILE: the admin client made (or
   * updated) at start with every admin scope, its secret read from the file then (docs/production.md).
   */
  bootstrapAdmin: { clientId: string; secretFile: string } | undefined;
  /**
   * TESSERA_APPLY_FILE: a declarative file applied at start and again whenever it changes (a ConfigMap update),
   * with `--prune` only when TESSERA_APPLY_PRUNE=true.
   */
  applyFile: { path: string; prune: boolean } | undefined;
  /** TESSERA_CONTAINER=true (set by the image): the start's words speak of the image, which has no npx. */
  container: boolean;
}

export class ConfigError extends TesseraError {
  override name = 'ConfigError';

  /** The CLI's code for it under --json (cli/index.ts). */
  override get code(): string {
    return 'invalid_config';
  }
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

type Env = Record<string, string | undefined>;

function read(env: Env, name: string): string | undefined {
  const value = env[name]?.trim();
  return value === undefined || value === '' ? undefined : value;
}

/**
 * A secret setting, from the variable or from the file its `_FILE` form names (a mounted Kubernetes or Docker
 * secret; its trailing newline dropped), never both: the image and the chart give every secret as a file, so that
 * none is in a manifest or the process's environment.
 */
export function secretSetting(env: Env, name: string, cwd: string): string | undefined {
  const file = read(env, `${name}_FILE`);
  if (file === undefined) return read(env, name);
  if (read(env, name) !== undefined) throw new ConfigError(`${name} and ${name}_FILE: set one, not both`);
  return readSecretFile(`${name}_FILE`, path.resolve(cwd, file));
}

/**
 * The secret in a mounted file (its surrounding whitespace, a trailing newline, dropped), for the setting that names
 * it: a ConfigError naming the setting when it cannot be read or is empty, never its content.
 */
export function readSecretFile(setting: string, file: string): string {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new ConfigError(
      `${setting}: cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? 'error'})`,
    );
  }
  const value = text.trim();
  if (value === '') throw new ConfigError(`${setting}: ${file} is empty`);
  return value;
}

/** A duration in seconds: `90`, `90s`, `15m`, `12h`, `30d`; undefined if it is not one (validate.ts's grammar). */
export function parseDuration(raw: string): number | undefined {
  try {
    return parseDurationStrictly(raw);
  } catch {
    return undefined;
  }
}

/** A duration in seconds: `90`, `90s`, `15m`, `12h`, `30d`. */
function duration(
  env: Env,
  name: string,
  fallback: number,
  min: number,
  max: number,
  zeroTurnsOff = false,
): number {
  const raw = read(env, name);
  if (raw === undefined) return fallback;
  const value = parseDuration(raw);
  if (value === undefined) {
    throw new ConfigError(`${name} must be a duration such as 3600, 90s, 15m, 12h or 30d, got "${raw}"`);
  }
  if ((value !== 0 || !zeroTurnsOff) && (value < min || value > max)) {
    throw new ConfigError(`${name} must be between ${min} and ${max} seconds, got ${value}`);
  }
  return value;
}

/**
 * The JWKS `Cache-Control: max-age`, derived from how early keys are published: a verifier that fetched the
 * JWKS just before a new key appeared refetches by the time the key signs (docs/interface.md, RFC 7517).
 */
export function jwksMaxAge(config: Pick<Config, 'keyPublishAhead'>): number {
  return Math.floor(config.keyPublishAhead / 2);
}

/**
 * How long /readyz lets the change feed go unread before it reports it stale (the instance may be serving
 * clients and keys that changed elsewhere): three poll intervals, so that a poll late by a slow store or a
 * busy process does not take a healthy instance out of rotation, and at least 10 s; but no longer than the
 * stale window (TESSERA_STALE_WINDOW), past which every token request is refused anyway. Never less than two
 * polls and a second, which the stale window is at least (see loadConfig).
 */
export function feedStaleMs(config: Pick<Config, 'changePollMs' | 'staleWindow'>): number {
  return Math.min(config.staleWindow * 1000, Math.max(10_000, 3 * config.changePollMs));
}

function prefix(raw: string): string {
  if (!/^[A-Za-z0-9._:-]{1,64}$/.test(raw)) {
    throw new ConfigError('TESSERA_REDIS_PREFIX must be 1 to 64 characters of A-Z a-z 0-9 . _ : -');
  }
  return raw;
}

/** The named ranges Fastify's trustProxy (proxy-addr) knows. */
const PROXY_RANGES = ['loopback', 'linklocal', 'uniquelocal'];

function trustProxy(raw: string | undefined): Config['trustProxy'] {
  if (raw === undefined || raw === 'false') return false;
  if (raw === 'true') {
    // Trusting every hop means trusting the leftmost X-Forwarded-For entry, which the client writes.
    throw new ConfigError('TESSERA_TRUST_PROXY must list the proxies (addresses or CIDR ranges), not "true"');
  }
  const list = raw.split(',').map((entry) => entry.trim());
  for (const entry of list) {
    if (PROXY_RANGES.includes(entry)) continue;
    // Checked here, not left to proxy-addr at listen(): a bad entry is a settings error (exit 2, named),
    // for the CLI too, rather than "invalid IP address" from a server that fails to start.
    const [address = '', prefix, ...rest] = entry.split('/');
    const bits = { 4: 32, 6: 128 }[isIP(address)] ?? 0; // isIP: 0 when it is not an address
    const length = prefix === undefined ? bits : /^\d{1,3}$/.test(prefix) ? Number(prefix) : -1;
    if (bits > 0 && rest.length === 0 && length === 0) {
      throw new ConfigError(
        `TESSERA_TRUST_PROXY: "${entry}" would trust every address, as "true" would: list the proxies`,
      );
    }
    if (bits === 0 || rest.length > 0 || length < 1 || length > bits) {
      throw new ConfigError(
        `TESSERA_TRUST_PROXY: "${entry}" is not an address, a CIDR range, loopback, linklocal or uniquelocal`,
      );
    }
  }
  return list;
}

const SIZE_UNITS: Record<string, number> = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 };

/** A size in bytes: `1048576`, `512k`, `64m`, `1g` (powers of 1024; `KiB`, `MB` and the like are read the same). */
function parseSize(raw: string): number | undefined {
  const match = /^(\d+)\s*([kmg]?)(i?b)?$/i.exec(raw.trim());
  if (!match || (match[3] !== undefined && match[2] === '')) return undefined;
  return Number(match[1]) * SIZE_UNITS[match[2]!.toLowerCase()]!;
}

function size(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = read(env, name);
  if (raw === undefined) return fallback;
  const value = parseSize(raw);
  if (value === undefined)
    throw new ConfigError(`${name} must be a size such as 1073741824, 512m or 1g, got "${raw}"`);
  if (value < min || value > max)
    throw new ConfigError(`${name} must be between ${min} and ${max} bytes, got ${value}`);
  return value;
}

function boolean(env: Env, name: string, fallback: boolean): boolean {
  const raw = read(env, name);
  if (raw === undefined) return fallback;
  if (raw === 'true') return true;
  if (raw === 'false') return false;
  throw new ConfigError(`${name} must be true or false, got "${raw}"`);
}

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = read(env, name);
  if (raw === undefined) return fallback;
  if (!/^\d+$/.test(raw)) throw new ConfigError(`${name} must be a whole number, got "${raw}"`);
  const value = Number(raw);
  if (value < min || value > max)
    throw new ConfigError(`${name} must be between ${min} and ${max}, got ${value}`);
  return value;
}

/**
 * One failed-attempt limit: TESSERA_ATTEMPTS_<scope>_MAX failures within TESSERA_ATTEMPTS_<scope>_WINDOW
 * block the caller for TESSERA_ATTEMPTS_<scope>_BLOCK.
 */
function threshold(
  env: Env,
  scope: 'CLIENT' | 'SOURCE' | 'LOGIN' | 'LOGIN_SOURCE',
  fallback: Threshold,
): Threshold {
  const name = `TESSERA_ATTEMPTS_${scope}`;
  return {
    failures: integer(env, `${name}_MAX`, fallback.failures, 1, 1_000_000),
    windowSeconds: duration(env, `${name}_WINDOW`, fallback.windowSeconds, 1, 86_400),
    blockSeconds: duration(env, `${name}_BLOCK`, fallback.blockSeconds, 1, 86_400),
  };
}

/** RFC 8414 §2: the issuer is an https URL with no query or fragment (http is tolerated for local use). */
/** The headers a proxy may forward a client certificate in (docs/mtls.md): RFC 9440, Envoy's XFCC, nginx's. */
export const CLIENT_CERT_HEADERS = ['client-cert', 'x-forwarded-client-cert', 'ssl-client-cert'] as const;

export function normalizeIssuer(raw: string, name = 'TESSERA_ISSUER'): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(`${name} must be an absolute URL, got "${raw}"`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new ConfigError(`${name} must be an http(s) URL, got "${raw}"`);
  }
  if (url.search || url.hash || raw.includes('#') || raw.includes('?')) {
    throw new ConfigError(`${name} must not carry a query or a fragment (RFC 8414 §2)`);
  }
  if (url.username || url.password) throw new ConfigError(`${name} must not carry credentials`);
  if (url.pathname !== '/') {
    // Endpoints are served at the root; a path prefix would need the RFC 8414 §3.1 path-inserted metadata URL.
    throw new ConfigError(`${name} must be an origin without a path, such as https://auth.example.com`);
  }
  return url.origin;
}

/** The open-files limit Linux applies to this process, from /proc/self/limits; undefined elsewhere. */
export function openFilesLimit(
  read: () => string = () => readFileSync('/proc/self/limits', 'utf8'),
): number | undefined {
  let text: string;
  try {
    text = read();
  } catch {
    return undefined;
  }
  // "Max open files            20000                20000                files": the soft limit is the first.
  const soft = /^Max open files\s+(\d+)\s/m.exec(text)?.[1];
  return soft === undefined ? undefined : Number(soft);
}

/** Share of the open-files limit that connections may take by default: the rest is the process's own. */
const CONNECTIONS_SHARE_OF_FILES = 0.8;
/** Default cap where the open-files limit cannot be read: 80 % of 1 024, the usual soft limit. */
const FALLBACK_MAX_CONNECTIONS = 819;
/**
 * The default cap never exceeds this: an idle connection holds ~6.5 KB of the process's memory (measured on
 * Tessera), besides the kernel's buffers, so ~0.3 GB here; a larger limit does not mean more memory.
 */
const DEFAULT_MAX_CONNECTIONS_CEILING = 50_000;

/**
 * The default connection cap: 80 % of the open-files limit (each connection is a descriptor; the other 20 %,
 * 204 of the common 1 024, is ample for the store pool, SQLite's files, Redis, the change listener, stdio
 * and the cluster channel), at most 50 000. Node raises its soft limit to the hard limit at start, so this
 * reads the limit the process really has.
 */
export function defaultMaxConnections(limit: number | undefined): number {
  if (limit === undefined || !Number.isFinite(limit) || limit < 2) return FALLBACK_MAX_CONNECTIONS;
  return Math.min(Math.floor(limit * CONNECTIONS_SHARE_OF_FILES), DEFAULT_MAX_CONNECTIONS_CEILING);
}

function maxConnections(env: Env, limit: number | undefined): number {
  const value = integer(env, 'TESSERA_MAX_CONNECTIONS', defaultMaxConnections(limit), 1, 10_000_000);
  if (limit !== undefined && value >= limit) {
    // Past the limit accept() fails before Tessera sees the connection: nobody is served, nothing is logged.
    throw new ConfigError(
      `TESSERA_MAX_CONNECTIONS must be below this process's open-files limit (${limit}, see ulimit -n), got ${value}`,
    );
  }
  return value;
}

export function loadConfig(
  env: Env = process.env,
  cwd: string = process.cwd(),
  /** The open-files limit (read from /proc/self/limits unless given), for the default connection cap. */
  fileLimit: () => number | undefined = openFilesLimit,
): Config {
  const port = integer(env, 'TESSERA_PORT', 8080, 0, 65535);
  const production = env.NODE_ENV === 'production';
  // On a developer's machine only this machine reaches it; in production (and in the image) every interface.
  const host = read(env, 'TESSERA_HOST') ?? (production ? '0.0.0.0' : '127.0.0.1');
  const issuer = normalizeIssuer(read(env, 'TESSERA_ISSUER') ?? `http://localhost:${port}`);
  const dataDir = path.resolve(cwd, read(env, 'TESSERA_DATA_DIR') ?? './data');

  let databaseUrl = secretSetting(env, 'TESSERA_DATABASE_URL', cwd);
  if (databaseUrl !== undefined) {
    if (isPostgresUrl(databaseUrl)) {
      try {
        new URL(databaseUrl);
      } catch {
        throw new ConfigError('TESSERA_DATABASE_URL is not a valid postgres:// URL');
      }
    } else {
      const file = databaseUrl.replace(/^(sqlite|file):(\/\/)?/i, '');
      if (/^[a-z][a-z0-9+.-]*:/i.test(file)) {
        throw new ConfigError(
          'TESSERA_DATABASE_URL must be a postgres:// URL, a SQLite file path or a sqlite: or file: URL',
        );
      }
      databaseUrl = path.resolve(cwd, file);
    }
  }

  const alg = read(env, 'TESSERA_SIGNING_ALG') ?? 'ES256';
  if (!isSigningAlg(alg)) {
    throw new ConfigError(`TESSERA_SIGNING_ALG must be one of ${SIGNING_ALGS.join(', ')}, got "${alg}"`);
  }

  const logLevel = (read(env, 'TESSERA_LOG_LEVEL') ?? 'info').toLowerCase();
  if (!(LOG_LEVELS as readonly string[]).includes(logLevel)) {
    throw new ConfigError(`TESSERA_LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got "${logLevel}"`);
  }

  const redisUrl = secretSetting(env, 'TESSERA_REDIS_URL', cwd);
  if (redisUrl !== undefined) {
    let parsed: URL | undefined;
    try {
      parsed = new URL(redisUrl);
    } catch {
      parsed = undefined;
    }
    if (!/^rediss?:\/\//i.test(redisUrl) || !parsed || parsed.hostname === '') {
      throw new ConfigError('TESSERA_REDIS_URL must be a redis:// or rediss:// URL');
    }
  }

  const keyPublishAhead = duration(env, 'TESSERA_KEY_PUBLISH_AHEAD', 3600, 2, 7 * 86_400);
  const keyRotationInterval = duration(
    env,
    'TESSERA_KEY_ROTATION_INTERVAL',
    30 * 86_400,
    3600,
    5 * 365 * 86_400,
    true,
  );
  if (keyRotationInterval !== 0 && keyRotationInterval <= keyPublishAhead) {
    throw new ConfigError('TESSERA_KEY_ROTATION_INTERVAL must be longer than TESSERA_KEY_PUBLISH_AHEAD');
  }

  const sessionIdle = duration(env, 'TESSERA_SESSION_IDLE', 30 * 60, 60, 86_400);
  const sessionMax = duration(env, 'TESSERA_SESSION_MAX', 12 * 3600, 60, 30 * 86_400);
  if (sessionMax < sessionIdle)
    throw new ConfigError('TESSERA_SESSION_MAX must be at least TESSERA_SESSION_IDLE');

  const staleWindow = duration(env, 'TESSERA_STALE_WINDOW', 60, 1, 86_400);
  const changePollMs = integer(env, 'TESSERA_CHANGE_POLL_MS', 500, 50, 10_000);
  if (staleWindow * 1000 < 2 * changePollMs + 1000) {
    // Otherwise a healthy store would trip the window between two reads of the feed.
    throw new ConfigError(
      'TESSERA_STALE_WINDOW must be at least two TESSERA_CHANGE_POLL_MS intervals plus a second',
    );
  }

  const tlsCert = filePath(env, 'TESSERA_TLS_CERT', cwd);
  const tlsKey = filePath(env, 'TESSERA_TLS_KEY', cwd);
  if ((tlsCert === undefined) !== (tlsKey === undefined))
    throw new ConfigError('TESSERA_TLS_CERT and TESSERA_TLS_KEY go together: set both, or neither');
  const clientCertHeader = read(env, 'TESSERA_CLIENT_CERT_HEADER')?.toLowerCase();
  if (
    clientCertHeader !== undefined &&
    !(CLIENT_CERT_HEADERS as readonly string[]).includes(clientCertHeader)
  )
    throw new ConfigError(
      `TESSERA_CLIENT_CERT_HEADER must be one of ${CLIENT_CERT_HEADERS.join(', ')}, got "${clientCertHeader}"`,
    );
  const proxies = trustProxy(read(env, 'TESSERA_TRUST_PROXY'));
  if (clientCertHeader !== undefined && proxies === false)
    // Anyone could write the header: it is read only from the proxies that put it there.
    throw new ConfigError(
      'TESSERA_CLIENT_CERT_HEADER needs TESSERA_TRUST_PROXY: the header is read only from the proxies listed there',
    );
  const mtlsBase = read(env, 'TESSERA_MTLS_BASE_URL');

  return {
    port,
    host,
    issuer,
    dataDir,
    databaseUrl,
    tokenTtl: integer(env, 'TESSERA_TOKEN_TTL', 1800, MIN_TOKEN_TTL, MAX_TOKEN_TTL),
    signingAlg: alg,
    masterKey: secretSetting(env, 'TESSERA_MASTER_KEY', cwd),
    redisUrl,
    redisPrefix: prefix(read(env, 'TESSERA_REDIS_PREFIX') ?? 'tessera'),
    logLevel: logLevel as Config['logLevel'],
    cacheTtl: integer(env, 'TESSERA_CACHE_TTL', 60, 1, 3600),
    cacheMax: integer(env, 'TESSERA_CACHE_MAX', 100_000, 100, 10_000_000),
    changePollMs,
    requestTimeout: integer(env, 'TESSERA_REQUEST_TIMEOUT', 10, 1, 300),
    staleWindow,
    auditRetention: duration(env, 'TESSERA_AUDIT_RETENTION', 90 * 86_400, 3600, 10 * 365 * 86_400),
    auditSpoolDir: path.resolve(
      cwd,
      read(env, 'TESSERA_AUDIT_SPOOL_DIR') ?? path.join(dataDir, 'audit-spool'),
    ),
    auditSpoolMax: size(env, 'TESSERA_AUDIT_SPOOL_MAX', 1024 ** 3, 1024 ** 2, 1024 ** 4),
    trustProxy: proxies,
    workers: integer(env, 'TESSERA_WORKERS', 1, 1, 256),
    maxConnections: maxConnections(env, fileLimit()),
    keepAliveTimeout: duration(env, 'TESSERA_KEEPALIVE_TIMEOUT', 5, 1, 3600),
    shutdownDelay: duration(env, 'TESSERA_SHUTDOWN_DELAY', 5, 0, 600),
    shutdownTimeout: duration(env, 'TESSERA_SHUTDOWN_TIMEOUT', 20, 1, 3600),
    keyRotationInterval,
    keyPublishAhead,
    attemptsPerClient: threshold(env, 'CLIENT', { failures: 10, windowSeconds: 300, blockSeconds: 300 }),
    attemptsPerSource: threshold(env, 'SOURCE', { failures: 100, windowSeconds: 300, blockSeconds: 900 }),
    attemptsLogin: threshold(env, 'LOGIN', { failures: 10, windowSeconds: 900, blockSeconds: 900 }),
    attemptsLoginSource: threshold(env, 'LOGIN_SOURCE', {
      failures: 20,
      windowSeconds: 900,
      blockSeconds: 900,
    }),
    console: boolean(env, 'TESSERA_CONSOLE', true),
    sessionIdle,
    sessionMax,
    redisTimeoutMs: integer(env, 'TESSERA_REDIS_TIMEOUT_MS', 100, 10, 10_000),
    pgQueryTimeout: duration(env, 'TESSERA_PG_QUERY_TIMEOUT', 5, 1, 600),
    pgConnectTimeout: duration(env, 'TESSERA_PG_CONNECT_TIMEOUT', 5, 1, 600),
    retryAfter: duration(env, 'TESSERA_RETRY_AFTER', 5, 1, 3600),
    metrics: boolean(env, 'TESSERA_METRICS', true),
    jwksAllowPrivate: boolean(env, 'TESSERA_JWKS_ALLOW_PRIVATE', false),
    dpopNonce: boolean(env, 'TESSERA_DPOP_NONCE', false),
    tls: tlsCert === undefined ? undefined : { cert: tlsCert, key: tlsKey! },
    tlsClientCa: filePath(env, 'TESSERA_TLS_CLIENT_CA', cwd),
    clientCertHeader: clientCertHeader as Config['clientCertHeader'],
    mtlsBaseUrl: mtlsBase === undefined ? undefined : normalizeIssuer(mtlsBase, 'TESSERA_MTLS_BASE_URL'),
    otelTrustRemote: boolean(env, 'TESSERA_OTEL_TRUST_REMOTE', false),
    production,
    bootstrapAdmin: bootstrapAdmin(env, cwd),
    applyFile: applyFile(env, cwd),
    container: boolean(env, 'TESSERA_CONTAINER', false),
  };
}

/** TESSERA_BOOTSTRAP_ADMIN_CLIENT_ID and TESSERA_BOOTSTRAP_ADMIN_CLIENT_SECRET_FILE: both, or neither. */
function bootstrapAdmin(env: Env, cwd: string): Config['bootstrapAdmin'] {
  const clientId = read(env, 'TESSERA_BOOTSTRAP_ADMIN_CLIENT_ID');
  const secretFile = filePath(env, 'TESSERA_BOOTSTRAP_ADMIN_CLIENT_SECRET_FILE', cwd);
  if (read(env, 'TESSERA_BOOTSTRAP_ADMIN_CLIENT_SECRET') !== undefined)
    // A secret in the environment is in every manifest and `docker inspect`: only a file is accepted.
    throw new ConfigError(
      'TESSERA_BOOTSTRAP_ADMIN_CLIENT_SECRET is not read: put the secret in a file and name it in TESSERA_BOOTSTRAP_ADMIN_CLIENT_SECRET_FILE',
    );
  if (clientId === undefined && secretFile === undefined) return undefined;
  if (clientId === undefined || secretFile === undefined)
    throw new ConfigError(
      'TESSERA_BOOTSTRAP_ADMIN_CLIENT_ID and TESSERA_BOOTSTRAP_ADMIN_CLIENT_SECRET_FILE go together: set both, or neither',
    );
  return { clientId, secretFile };
}

function applyFile(env: Env, cwd: string): Config['applyFile'] {
  const file = filePath(env, 'TESSERA_APPLY_FILE', cwd);
  const prune = boolean(env, 'TESSERA_APPLY_PRUNE', false);
  if (file === undefined) {
    if (prune) throw new ConfigError('TESSERA_APPLY_PRUNE needs TESSERA_APPLY_FILE');
    return undefined;
  }
  return { path: file, prune };
}

/** A file setting, resolved against the working directory (read when the server starts, not here). */
function filePath(env: Env, name: string, cwd: string): string | undefined {
  const raw = read(env, name);
  return raw === undefined ? undefined : path.resolve(cwd, raw);
}

export function isPostgresUrl(url: string | undefined): boolean {
  return url !== undefined && /^postgres(ql)?:\/\//i.test(url);
}

/** Where the embedded SQLite file lives (when the store is not PostgreSQL). */
export function sqlitePath(config: Pick<Config, 'dataDir' | 'databaseUrl'>): string {
  return config.databaseUrl ?? path.join(config.dataDir, 'tessera.db');
}
