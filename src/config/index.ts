import path from 'node:path';
import { isSigningAlg, SIGNING_ALGS, type SigningAlg } from '../domain/algorithms.js';
import { MAX_TOKEN_TTL, MIN_TOKEN_TTL } from '../domain/validate.js';

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
  /** Seconds cached clients are still served while the store cannot be reached; then 503. */
  staleWindow: number;
  /** Seconds a client has to send a whole request; slower ones get 408 and are disconnected. */
  requestTimeout: number;
  /** Processes serving the port (`tessera serve --workers`); 1 serves in this process. */
  workers: number;
  /** Seconds between automatic key rotations; 0 turns automatic rotation off. */
  keyRotationInterval: number;
  /** Seconds a new key is published before it signs. The JWKS max-age is half of it (see jwksMaxAge). */
  keyPublishAhead: number;
  /** Whether GET /metrics answers (Prometheus text format); off, it is a 404 like any unknown path. */
  metrics: boolean;
  /** NODE_ENV=production: refuses settings that are only safe on a developer's machine. */
  production: boolean;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

type Env = Record<string, string | undefined>;

function read(env: Env, name: string): string | undefined {
  const value = env[name]?.trim();
  return value === undefined || value === '' ? undefined : value;
}

const UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400 };

/** A duration in seconds: `90`, `90s`, `15m`, `12h`, `30d`; undefined if it is not one. */
export function parseDuration(raw: string): number | undefined {
  const match = /^(\d+)([smhd]?)$/.exec(raw.trim());
  return match ? Number(match[1]) * UNITS[match[2] || 's']! : undefined;
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
 * JWKS just before a new key appeared refetches by the time the key signs (INTERFACE.md, RFC 7517).
 */
export function jwksMaxAge(config: Pick<Config, 'keyPublishAhead'>): number {
  return Math.floor(config.keyPublishAhead / 2);
}

function prefix(raw: string): string {
  if (!/^[A-Za-z0-9._:-]{1,64}$/.test(raw)) {
    throw new ConfigError('TESSERA_REDIS_PREFIX must be 1 to 64 characters of A-Z a-z 0-9 . _ : -');
  }
  return raw;
}

function trustProxy(raw: string | undefined): Config['trustProxy'] {
  if (raw === undefined || raw === 'false') return false;
  if (raw === 'true') {
    // Trusting every hop means trusting the leftmost X-Forwarded-For entry, which the client writes.
    throw new ConfigError('TESSERA_TRUST_PROXY must list the proxies (addresses or CIDR ranges), not "true"');
  }
  const list = raw.split(',').map((entry) => entry.trim());
  for (const entry of list) {
    if (
      !/^[0-9a-fA-F.:]+(\/\d{1,3})?$/.test(entry) &&
      !['loopback', 'linklocal', 'uniquelocal'].includes(entry)
    ) {
      throw new ConfigError(
        `TESSERA_TRUST_PROXY: "${entry}" is not an address, a CIDR range, loopback, linklocal or uniquelocal`,
      );
    }
  }
  return list;
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

/** RFC 8414 §2: the issuer is an https URL with no query or fragment (http is tolerated for local use). */
export function normalizeIssuer(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(`TESSERA_ISSUER must be an absolute URL, got "${raw}"`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new ConfigError(`TESSERA_ISSUER must be an http(s) URL, got "${raw}"`);
  }
  if (url.search || url.hash || raw.includes('#') || raw.includes('?')) {
    throw new ConfigError('TESSERA_ISSUER must not carry a query or a fragment (RFC 8414 §2)');
  }
  if (url.username || url.password) throw new ConfigError('TESSERA_ISSUER must not carry credentials');
  if (url.pathname !== '/') {
    // Endpoints are served at the root; a path prefix would need the RFC 8414 §3.1 path-inserted metadata URL.
    throw new ConfigError(
      'TESSERA_ISSUER must be an origin without a path, such as https://auth.example.com',
    );
  }
  return url.origin;
}

export function loadConfig(env: Env = process.env, cwd: string = process.cwd()): Config {
  const port = integer(env, 'TESSERA_PORT', 8080, 0, 65535);
  const host = read(env, 'TESSERA_HOST') ?? '0.0.0.0';
  const issuer = normalizeIssuer(read(env, 'TESSERA_ISSUER') ?? `http://localhost:${port}`);
  const dataDir = path.resolve(cwd, read(env, 'TESSERA_DATA_DIR') ?? './data');

  let databaseUrl = read(env, 'TESSERA_DATABASE_URL');
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

  const redisUrl = read(env, 'TESSERA_REDIS_URL');
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

  const staleWindow = duration(env, 'TESSERA_STALE_WINDOW', 60, 1, 86_400);
  const changePollMs = integer(env, 'TESSERA_CHANGE_POLL_MS', 500, 50, 10_000);
  if (staleWindow * 1000 < 2 * changePollMs + 1000) {
    // Otherwise a healthy store would trip the window between two reads of the feed.
    throw new ConfigError(
      'TESSERA_STALE_WINDOW must be at least two TESSERA_CHANGE_POLL_MS intervals plus a second',
    );
  }

  return {
    port,
    host,
    issuer,
    dataDir,
    databaseUrl,
    tokenTtl: integer(env, 'TESSERA_TOKEN_TTL', 1800, MIN_TOKEN_TTL, MAX_TOKEN_TTL),
    signingAlg: alg,
    masterKey: read(env, 'TESSERA_MASTER_KEY'),
    redisUrl,
    redisPrefix: prefix(read(env, 'TESSERA_REDIS_PREFIX') ?? 'tessera'),
    logLevel: logLevel as Config['logLevel'],
    cacheTtl: integer(env, 'TESSERA_CACHE_TTL', 60, 1, 3600),
    cacheMax: integer(env, 'TESSERA_CACHE_MAX', 100_000, 100, 10_000_000),
    changePollMs,
    requestTimeout: integer(env, 'TESSERA_REQUEST_TIMEOUT', 10, 1, 300),
    staleWindow,
    auditRetention: duration(env, 'TESSERA_AUDIT_RETENTION', 90 * 86_400, 3600, 10 * 365 * 86_400),
    trustProxy: trustProxy(read(env, 'TESSERA_TRUST_PROXY')),
    workers: integer(env, 'TESSERA_WORKERS', 1, 1, 256),
    keyRotationInterval,
    keyPublishAhead,
    metrics: boolean(env, 'TESSERA_METRICS', true),
    production: env.NODE_ENV === 'production',
  };
}

export function isPostgresUrl(url: string | undefined): boolean {
  return url !== undefined && /^postgres(ql)?:\/\//i.test(url);
}

/** Where the embedded SQLite file lives (when the store is not PostgreSQL). */
export function sqlitePath(config: Pick<Config, 'dataDir' | 'databaseUrl'>): string {
  return config.databaseUrl ?? path.join(config.dataDir, 'tessera.db');
}
