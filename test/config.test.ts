import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { thrownBy } from './helpers/assert.js';
import {
  ConfigError,
  defaultMaxConnections,
  feedStaleMs,
  isPostgresUrl,
  jwksMaxAge,
  loadConfig,
  normalizeIssuer,
  openFilesLimit,
  sqlitePath,
  type Config,
} from '../src/config/index.js';

const CWD = '/srv/tessera';

function configError(env: Record<string, string | undefined>): ConfigError {
  const thrown = thrownBy(() => loadConfig(env, CWD), ConfigError);
  expect(thrown.name).toBe('ConfigError');
  return thrown;
}

describe('loadConfig defaults', () => {
  it('gives every documented default with an empty environment', () => {
    expect(loadConfig({}, CWD, () => 20_000)).toEqual({
      port: 8080,
      host: '127.0.0.1',
      issuer: 'http://localhost:8080',
      dataDir: '/srv/tessera/data',
      databaseUrl: undefined,
      tokenTtl: 1800,
      signingAlg: 'ES256',
      masterKey: undefined,
      redisUrl: undefined,
      redisPrefix: 'tessera',
      logLevel: 'info',
      cacheTtl: 60,
      cacheMax: 100_000,
      changePollMs: 500,
      auditRetention: 90 * 86_400,
      auditSpoolDir: '/srv/tessera/data/audit-spool',
      auditSpoolMax: 1024 ** 3,
      staleWindow: 60,
      requestTimeout: 10,
      trustProxy: false,
      workers: 1,
      maxConnections: 16_000,
      keepAliveTimeout: 5,
      shutdownDelay: 5,
      shutdownTimeout: 20,
      keyRotationInterval: 30 * 86_400,
      keyPublishAhead: 3600,
      attemptsPerClient: { failures: 10, windowSeconds: 300, blockSeconds: 300 },
      attemptsPerSource: { failures: 100, windowSeconds: 300, blockSeconds: 900 },
      attemptsLogin: { failures: 10, windowSeconds: 900, blockSeconds: 900 },
      attemptsLoginSource: { failures: 20, windowSeconds: 900, blockSeconds: 900 },
      console: true,
      sessionIdle: 1800,
      sessionMax: 43_200,
      redisTimeoutMs: 100,
      pgQueryTimeout: 5,
      pgConnectTimeout: 5,
      retryAfter: 5,
      metrics: true,
      production: false,
      jwksAllowPrivate: false,
      dpopNonce: false,
      tls: undefined,
      tlsClientCa: undefined,
      clientCertHeader: undefined,
      mtlsBaseUrl: undefined,
      otelTrustRemote: false,
      bootstrapAdmin: undefined,
      applyFile: undefined,
      container: false,
    } satisfies Config);
  });

  describe('audit spool settings', () => {
    it('TESSERA_AUDIT_SPOOL_DIR is resolved against the working directory; by default it is in the data directory', () => {
      expect(loadConfig({ TESSERA_DATA_DIR: '/var/lib/t' }, CWD).auditSpoolDir).toBe(
        '/var/lib/t/audit-spool',
      );
      expect(loadConfig({ TESSERA_AUDIT_SPOOL_DIR: 'spool' }, CWD).auditSpoolDir).toBe('/srv/tessera/spool');
      expect(loadConfig({ TESSERA_AUDIT_SPOOL_DIR: '/fast/spool' }, CWD).auditSpoolDir).toBe('/fast/spool');
    });

    it.each([
      ['1048576', 1048576],
      ['1024k', 1024 ** 2],
      ['64m', 64 * 1024 ** 2],
      ['64MiB', 64 * 1024 ** 2],
      ['64 MB', 64 * 1024 ** 2],
      ['2g', 2 * 1024 ** 3],
    ])('TESSERA_AUDIT_SPOOL_MAX=%j is %d bytes', (raw, bytes) => {
      expect(loadConfig({ TESSERA_AUDIT_SPOOL_MAX: raw }, CWD).auditSpoolMax).toBe(bytes);
    });

    it('TESSERA_AUDIT_SPOOL_MAX is at least 1 MiB', () => {
      expect(() => loadConfig({ TESSERA_AUDIT_SPOOL_MAX: '512k' }, CWD)).toThrow(
        'TESSERA_AUDIT_SPOOL_MAX must be between 1048576 and 1099511627776 bytes, got 524288',
      );
    });

    it.each(['', 'lots', '1.5g', '-1m', 'mb', '10 b', '1t', '0x10'])(
      'TESSERA_AUDIT_SPOOL_MAX=%j is refused (empty is the default)',
      (raw) => {
        if (raw === '') {
          expect(loadConfig({ TESSERA_AUDIT_SPOOL_MAX: raw }, CWD).auditSpoolMax).toBe(1024 ** 3);
          return;
        }
        expect(() => loadConfig({ TESSERA_AUDIT_SPOOL_MAX: raw }, CWD)).toThrow(
          `TESSERA_AUDIT_SPOOL_MAX must be a size such as 1073741824, 512m or 1g, got "${raw}"`,
        );
      },
    );
  });

  describe('key rotation settings', () => {
    it.each([
      ['90', 90],
      ['90s', 90],
      ['15m', 900],
      ['2h', 7200],
      ['1d', 86_400],
    ])('TESSERA_KEY_PUBLISH_AHEAD=%j is %d seconds, and the JWKS max-age is half of it', (raw, seconds) => {
      const config = loadConfig({ TESSERA_KEY_PUBLISH_AHEAD: raw }, CWD);
      expect(config.keyPublishAhead).toBe(seconds);
      expect(jwksMaxAge(config)).toBe(Math.floor(seconds / 2));
    });

    it('TESSERA_KEY_ROTATION_INTERVAL accepts durations, and 0 turns automatic rotation off', () => {
      expect(loadConfig({ TESSERA_KEY_ROTATION_INTERVAL: '7d' }, CWD).keyRotationInterval).toBe(7 * 86_400);
      expect(loadConfig({ TESSERA_KEY_ROTATION_INTERVAL: '0' }, CWD).keyRotationInterval).toBe(0);
    });

    it.each([
      [
        { TESSERA_KEY_PUBLISH_AHEAD: '1' },
        'TESSERA_KEY_PUBLISH_AHEAD must be between 2 and 604800 seconds, got 1',
      ],
      [
        { TESSERA_KEY_PUBLISH_AHEAD: '0' },
        'TESSERA_KEY_PUBLISH_AHEAD must be between 2 and 604800 seconds, got 0',
      ],
      [
        { TESSERA_KEY_PUBLISH_AHEAD: 'soon' },
        'TESSERA_KEY_PUBLISH_AHEAD must be a duration such as 3600, 90s, 15m, 12h or 30d, got "soon"',
      ],
      [
        { TESSERA_KEY_ROTATION_INTERVAL: '10m' },
        'TESSERA_KEY_ROTATION_INTERVAL must be between 3600 and 157680000 seconds, got 600',
      ],
      [
        { TESSERA_KEY_ROTATION_INTERVAL: '2h', TESSERA_KEY_PUBLISH_AHEAD: '3h' },
        'TESSERA_KEY_ROTATION_INTERVAL must be longer than TESSERA_KEY_PUBLISH_AHEAD',
      ],
    ])('refuses %j', (env, message) => {
      expect(() => loadConfig(env, CWD)).toThrow(new ConfigError(message));
    });
  });

  it('treats empty and blank values as unset', () => {
    const env: Record<string, string> = {};
    for (const name of [
      'TESSERA_PORT',
      'TESSERA_HOST',
      'TESSERA_ISSUER',
      'TESSERA_DATA_DIR',
      'TESSERA_DATABASE_URL',
      'TESSERA_TOKEN_TTL',
      'TESSERA_SIGNING_ALG',
      'TESSERA_MASTER_KEY',
      'TESSERA_REDIS_URL',
      'TESSERA_LOG_LEVEL',
      'TESSERA_CACHE_TTL',
      'TESSERA_CACHE_MAX',
      'TESSERA_CHANGE_POLL_MS',
    ]) {
      env[name] = name.length % 2 ? '' : '   ';
    }
    expect(loadConfig(env, CWD)).toEqual(loadConfig({}, CWD));
  });

  it('reads process.env and process.cwd() when given nothing', () => {
    const config = loadConfig();
    expect(config.dataDir).toBe(
      path.resolve(process.cwd(), process.env.TESSERA_DATA_DIR?.trim() || './data'),
    );
  });

  it('derives the default issuer from the port', () => {
    expect(loadConfig({ TESSERA_PORT: '9443' }, CWD).issuer).toBe('http://localhost:9443');
  });
});

describe('feedStaleMs: how long /readyz lets the change feed go unread', () => {
  it.each([
    // [TESSERA_CHANGE_POLL_MS, TESSERA_STALE_WINDOW, threshold in ms]
    [undefined, undefined, 10_000], // the defaults (500 ms, 60 s): at least 10 s
    ['100', undefined, 10_000],
    ['3333', undefined, 10_000], // 3 x 3333 = 9999: still the 10 s floor
    ['4000', undefined, 12_000], // three polls
    ['10000', undefined, 30_000], // three polls: an instance polling every 10 s does not flap
    ['10000', '25', 25_000], // no longer than the stale window
    ['1000', '3', 3000],
    ['500', '2', 2000], // the shortest stale window allowed with this poll: two polls and a second
  ])('TESSERA_CHANGE_POLL_MS=%s, TESSERA_STALE_WINDOW=%s: %d ms', (poll, window, expected) => {
    const config = loadConfig({ TESSERA_CHANGE_POLL_MS: poll, TESSERA_STALE_WINDOW: window }, CWD);
    expect(feedStaleMs(config)).toBe(expected);
  });
});

describe('loadConfig reads each TESSERA_* variable', () => {
  it('TESSERA_PORT', () => {
    expect(loadConfig({ TESSERA_PORT: '3000' }, CWD).port).toBe(3000);
    expect(loadConfig({ TESSERA_PORT: ' 3000 ' }, CWD).port).toBe(3000);
    expect(loadConfig({ TESSERA_PORT: '0' }, CWD).port).toBe(0);
    expect(loadConfig({ TESSERA_PORT: '65535' }, CWD).port).toBe(65535);
  });

  it('TESSERA_HOST', () => {
    expect(loadConfig({ TESSERA_HOST: '127.0.0.1' }, CWD).host).toBe('127.0.0.1');
    expect(loadConfig({ TESSERA_HOST: '::' }, CWD).host).toBe('::');
  });

  it('TESSERA_ISSUER, normalised to its origin', () => {
    expect(loadConfig({ TESSERA_ISSUER: 'https://auth.example.com' }, CWD).issuer).toBe(
      'https://auth.example.com',
    );
    expect(loadConfig({ TESSERA_ISSUER: 'https://auth.example.com/' }, CWD).issuer).toBe(
      'https://auth.example.com',
    );
    expect(loadConfig({ TESSERA_ISSUER: 'https://Auth.Example.COM:8443' }, CWD).issuer).toBe(
      'https://auth.example.com:8443',
    );
    expect(loadConfig({ TESSERA_ISSUER: 'https://auth.example.com:443' }, CWD).issuer).toBe(
      'https://auth.example.com',
    );
    expect(loadConfig({ TESSERA_ISSUER: 'http://127.0.0.1:8080' }, CWD).issuer).toBe('http://127.0.0.1:8080');
    // The issuer is independent of the port it listens on (behind a proxy).
    expect(loadConfig({ TESSERA_ISSUER: 'https://auth.example.com', TESSERA_PORT: '3000' }, CWD).issuer).toBe(
      'https://auth.example.com',
    );
  });

  it('TESSERA_DATA_DIR, resolved against the working directory', () => {
    expect(loadConfig({ TESSERA_DATA_DIR: 'var/db' }, CWD).dataDir).toBe('/srv/tessera/var/db');
    expect(loadConfig({ TESSERA_DATA_DIR: '../shared' }, CWD).dataDir).toBe('/srv/shared');
    expect(loadConfig({ TESSERA_DATA_DIR: '/var/lib/tessera' }, CWD).dataDir).toBe('/var/lib/tessera');
  });

  it('TESSERA_DATABASE_URL as a SQLite file path or sqlite:/file: URL, resolved against the working directory', () => {
    expect(loadConfig({ TESSERA_DATABASE_URL: '/var/lib/t.db' }, CWD).databaseUrl).toBe('/var/lib/t.db');
    expect(loadConfig({ TESSERA_DATABASE_URL: 't.db' }, CWD).databaseUrl).toBe('/srv/tessera/t.db');
    expect(loadConfig({ TESSERA_DATABASE_URL: 'sqlite:///var/lib/t.db' }, CWD).databaseUrl).toBe(
      '/var/lib/t.db',
    );
    expect(loadConfig({ TESSERA_DATABASE_URL: 'sqlite://t.db' }, CWD).databaseUrl).toBe('/srv/tessera/t.db');
    expect(loadConfig({ TESSERA_DATABASE_URL: 'sqlite:t.db' }, CWD).databaseUrl).toBe('/srv/tessera/t.db');
    expect(loadConfig({ TESSERA_DATABASE_URL: 'file:///var/lib/t.db' }, CWD).databaseUrl).toBe(
      '/var/lib/t.db',
    );
    expect(loadConfig({ TESSERA_DATABASE_URL: 'SQLITE:///var/lib/t.db' }, CWD).databaseUrl).toBe(
      '/var/lib/t.db',
    );
  });

  it('TESSERA_TOKEN_TTL, from 60 to 86400 seconds', () => {
    expect(loadConfig({ TESSERA_TOKEN_TTL: '60' }, CWD).tokenTtl).toBe(60);
    expect(loadConfig({ TESSERA_TOKEN_TTL: '3600' }, CWD).tokenTtl).toBe(3600);
    expect(loadConfig({ TESSERA_TOKEN_TTL: '86400' }, CWD).tokenTtl).toBe(86_400);
  });

  it.each(['ES256', 'RS256', 'PS256', 'EdDSA'] as const)('TESSERA_SIGNING_ALG=%s', (alg) => {
    expect(loadConfig({ TESSERA_SIGNING_ALG: alg }, CWD).signingAlg).toBe(alg);
  });

  it('TESSERA_MASTER_KEY, passed on as written (trimmed) for keys/master-key.ts to parse', () => {
    expect(loadConfig({ TESSERA_MASTER_KEY: ' abc \n' }, CWD).masterKey).toBe('abc');
  });

  it('TESSERA_HOST: 127.0.0.1 on a developer machine, every interface with NODE_ENV=production', () => {
    expect(loadConfig({ NODE_ENV: 'production', TESSERA_MASTER_KEY: 'k' }, CWD).host).toBe('0.0.0.0');
    expect(loadConfig({ NODE_ENV: 'development' }, CWD).host).toBe('127.0.0.1');
    expect(loadConfig({ NODE_ENV: 'production', TESSERA_HOST: '127.0.0.1' }, CWD).host).toBe('127.0.0.1');
    expect(loadConfig({ TESSERA_HOST: '::' }, CWD).host).toBe('::');
  });

  it('every secret setting from a file: TESSERA_MASTER_KEY_FILE, TESSERA_DATABASE_URL_FILE, TESSERA_REDIS_URL_FILE', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'tessera-config-'));
    try {
      writeFileSync(path.join(dir, 'master'), 'k'.repeat(43) + '\n');
      writeFileSync(path.join(dir, 'db'), 'postgres://tessera:pw@db:5432/tessera\n');
      writeFileSync(path.join(dir, 'redis'), 'redis://:pw@cache:6379\n');
      writeFileSync(path.join(dir, 'empty'), ' \n');
      const config = loadConfig(
        {
          TESSERA_MASTER_KEY_FILE: 'master',
          TESSERA_DATABASE_URL_FILE: `${dir}/db`,
          TESSERA_REDIS_URL_FILE: 'redis',
        },
        dir,
      );
      expect(config.masterKey).toBe('k'.repeat(43));
      expect(config.databaseUrl).toBe('postgres://tessera:pw@db:5432/tessera');
      expect(config.redisUrl).toBe('redis://:pw@cache:6379');
      expect(configError({ TESSERA_MASTER_KEY: 'x', TESSERA_MASTER_KEY_FILE: `${dir}/master` }).message).toBe(
        'TESSERA_MASTER_KEY and TESSERA_MASTER_KEY_FILE: set one, not both',
      );
      expect(configError({ TESSERA_REDIS_URL_FILE: `${dir}/none` }).message).toBe(
        `TESSERA_REDIS_URL_FILE: cannot read ${dir}/none (ENOENT)`,
      );
      expect(configError({ TESSERA_DATABASE_URL_FILE: `${dir}/empty` }).message).toBe(
        `TESSERA_DATABASE_URL_FILE: ${dir}/empty is empty`,
      );
      // What the file holds is checked as the variable is.
      writeFileSync(path.join(dir, 'bad'), 'mysql://db\n');
      expect(configError({ TESSERA_REDIS_URL_FILE: `${dir}/bad` }).message).toBe(
        'TESSERA_REDIS_URL must be a redis:// or rediss:// URL',
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('TESSERA_BOOTSTRAP_ADMIN_CLIENT_ID and _SECRET_FILE together; the secret never from the environment', () => {
    expect(
      loadConfig(
        {
          TESSERA_BOOTSTRAP_ADMIN_CLIENT_ID: 'platform-admin',
          TESSERA_BOOTSTRAP_ADMIN_CLIENT_SECRET_FILE: 's/admin',
        },
        CWD,
      ).bootstrapAdmin,
    ).toEqual({ clientId: 'platform-admin', secretFile: '/srv/tessera/s/admin' });
    const together =
      'TESSERA_BOOTSTRAP_ADMIN_CLIENT_ID and TESSERA_BOOTSTRAP_ADMIN_CLIENT_SECRET_FILE go together: set both, or neither';
    expect(configError({ TESSERA_BOOTSTRAP_ADMIN_CLIENT_ID: 'a' }).message).toBe(together);
    expect(configError({ TESSERA_BOOTSTRAP_ADMIN_CLIENT_SECRET_FILE: '/s' }).message).toBe(together);
    expect(
      configError({
        TESSERA_BOOTSTRAP_ADMIN_CLIENT_ID: 'a',
        TESSERA_BOOTSTRAP_ADMIN_CLIENT_SECRET: 'x'.repeat(40),
      }).message,
    ).toBe(
      'TESSERA_BOOTSTRAP_ADMIN_CLIENT_SECRET is not read: put the secret in a file and name it in TESSERA_BOOTSTRAP_ADMIN_CLIENT_SECRET_FILE',
    );
  });

  it('TESSERA_APPLY_FILE and TESSERA_APPLY_PRUNE', () => {
    expect(loadConfig({ TESSERA_APPLY_FILE: 'config/tessera.yaml' }, CWD).applyFile).toEqual({
      path: '/srv/tessera/config/tessera.yaml',
      prune: false,
    });
    expect(
      loadConfig({ TESSERA_APPLY_FILE: '/config/tessera.yaml', TESSERA_APPLY_PRUNE: 'true' }, CWD).applyFile,
    ).toEqual({ path: '/config/tessera.yaml', prune: true });
    expect(configError({ TESSERA_APPLY_PRUNE: 'true' }).message).toBe(
      'TESSERA_APPLY_PRUNE needs TESSERA_APPLY_FILE',
    );
    expect(configError({ TESSERA_APPLY_FILE: '/c.yaml', TESSERA_APPLY_PRUNE: 'yes' }).message).toBe(
      'TESSERA_APPLY_PRUNE must be true or false, got "yes"',
    );
  });

  it('TESSERA_REDIS_URL, redis:// or rediss://', () => {
    expect(loadConfig({ TESSERA_REDIS_URL: 'redis://localhost:6379/0' }, CWD).redisUrl).toBe(
      'redis://localhost:6379/0',
    );
    expect(loadConfig({ TESSERA_REDIS_URL: 'rediss://:pw@cache.example.com:6380' }, CWD).redisUrl).toBe(
      'rediss://:pw@cache.example.com:6380',
    );
  });

  it.each(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const)(
    'TESSERA_LOG_LEVEL=%s',
    (level) => {
      expect(loadConfig({ TESSERA_LOG_LEVEL: level }, CWD).logLevel).toBe(level);
    },
  );

  it('TESSERA_LOG_LEVEL in any case', () => {
    expect(loadConfig({ TESSERA_LOG_LEVEL: 'DEBUG' }, CWD).logLevel).toBe('debug');
  });

  it('TESSERA_CACHE_TTL, TESSERA_CACHE_MAX, TESSERA_CHANGE_POLL_MS', () => {
    const config = loadConfig(
      { TESSERA_CACHE_TTL: '5', TESSERA_CACHE_MAX: '1000', TESSERA_CHANGE_POLL_MS: '250' },
      CWD,
    );
    expect([config.cacheTtl, config.cacheMax, config.changePollMs]).toEqual([5, 1000, 250]);
    expect(
      loadConfig({ TESSERA_CACHE_TTL: '1', TESSERA_CACHE_MAX: '100', TESSERA_CHANGE_POLL_MS: '50' }, CWD),
    ).toMatchObject({ cacheTtl: 1, cacheMax: 100, changePollMs: 50 });
    expect(
      loadConfig(
        { TESSERA_CACHE_TTL: '3600', TESSERA_CACHE_MAX: '10000000', TESSERA_CHANGE_POLL_MS: '10000' },
        CWD,
      ),
    ).toMatchObject({ cacheTtl: 3600, cacheMax: 10_000_000, changePollMs: 10_000 });
  });

  it('NODE_ENV=production, and nothing else, means production', () => {
    expect(loadConfig({ NODE_ENV: 'production' }, CWD).production).toBe(true);
    expect(loadConfig({ NODE_ENV: 'development' }, CWD).production).toBe(false);
    expect(loadConfig({ NODE_ENV: 'test' }, CWD).production).toBe(false);
  });

  it('reads TESSERA_DPOP_NONCE as true or false (off by default)', () => {
    expect(loadConfig({}, CWD).dpopNonce).toBe(false);
    expect(loadConfig({ TESSERA_DPOP_NONCE: 'true' }, CWD).dpopNonce).toBe(true);
    expect(loadConfig({ TESSERA_DPOP_NONCE: 'false' }, CWD).dpopNonce).toBe(false);
    expect(() => loadConfig({ TESSERA_DPOP_NONCE: 'yes' }, CWD)).toThrow(
      'TESSERA_DPOP_NONCE must be true or false, got "yes"',
    );
  });

  it('reads TESSERA_METRICS as true or false', () => {
    expect(loadConfig({ TESSERA_METRICS: 'false' }, CWD).metrics).toBe(false);
    expect(loadConfig({ TESSERA_METRICS: 'true' }, CWD).metrics).toBe(true);
  });

  it('TESSERA_TRUST_PROXY: false unless set; a comma-separated list of addresses, CIDR ranges and named ranges', () => {
    const trust = (value: string | undefined) => loadConfig({ TESSERA_TRUST_PROXY: value }, CWD).trustProxy;
    expect(trust(undefined)).toBe(false);
    expect(trust('')).toBe(false);
    expect(trust('false')).toBe(false);
    expect(trust('127.0.0.1')).toEqual(['127.0.0.1']);
    expect(trust(' 10.0.0.1 , 10.0.0.0/8,192.168.1.0/24 ')).toEqual([
      '10.0.0.1',
      '10.0.0.0/8',
      '192.168.1.0/24',
    ]);
    expect(trust('::1, fd00::/8, 2001:db8::/32, ::ffff:10.0.0.0/104, 10.0.0.7/32, ::1/128')).toEqual([
      '::1',
      'fd00::/8',
      '2001:db8::/32',
      '::ffff:10.0.0.0/104',
      '10.0.0.7/32',
      '::1/128',
    ]);
    expect(trust('loopback')).toEqual(['loopback']);
    expect(trust('loopback, linklocal, uniquelocal, 203.0.113.9')).toEqual([
      'loopback',
      'linklocal',
      'uniquelocal',
      '203.0.113.9',
    ]);
  });

  it('ignores variables it does not know', () => {
    expect(loadConfig({ TESSERA_NOPE: 'x', PORT: '1' }, CWD)).toEqual(loadConfig({}, CWD));
  });
});

describe('failed-attempt limits, timeouts and Retry-After', () => {
  it('TESSERA_ATTEMPTS_CLIENT_* and TESSERA_ATTEMPTS_SOURCE_*: a count, and two durations', () => {
    const config = loadConfig(
      {
        TESSERA_ATTEMPTS_CLIENT_MAX: '5',
        TESSERA_ATTEMPTS_CLIENT_WINDOW: '10m',
        TESSERA_ATTEMPTS_CLIENT_BLOCK: '1h',
        TESSERA_ATTEMPTS_SOURCE_MAX: '1000',
        TESSERA_ATTEMPTS_SOURCE_WINDOW: '90',
        TESSERA_ATTEMPTS_SOURCE_BLOCK: '1d',
      },
      CWD,
    );
    expect([config.attemptsPerClient, config.attemptsPerSource]).toEqual([
      { failures: 5, windowSeconds: 600, blockSeconds: 3600 },
      { failures: 1000, windowSeconds: 90, blockSeconds: 86_400 },
    ]);
    // Each is a setting of its own: the others keep their defaults.
    expect(loadConfig({ TESSERA_ATTEMPTS_SOURCE_BLOCK: '30m' }, CWD)).toMatchObject({
      attemptsPerClient: { failures: 10, windowSeconds: 300, blockSeconds: 300 },
      attemptsPerSource: { failures: 100, windowSeconds: 300, blockSeconds: 1800 },
    });
    expect(loadConfig({ TESSERA_ATTEMPTS_CLIENT_MAX: '1' }, CWD).attemptsPerClient.failures).toBe(1);
  });

  it('TESSERA_REDIS_TIMEOUT_MS, TESSERA_PG_QUERY_TIMEOUT, TESSERA_PG_CONNECT_TIMEOUT, TESSERA_RETRY_AFTER', () => {
    expect(
      loadConfig(
        {
          TESSERA_REDIS_TIMEOUT_MS: '250',
          TESSERA_PG_QUERY_TIMEOUT: '30s',
          TESSERA_PG_CONNECT_TIMEOUT: '2',
          TESSERA_RETRY_AFTER: '1m',
        },
        CWD,
      ),
    ).toMatchObject({ redisTimeoutMs: 250, pgQueryTimeout: 30, pgConnectTimeout: 2, retryAfter: 60 });
    expect(
      loadConfig(
        {
          TESSERA_REDIS_TIMEOUT_MS: '10',
          TESSERA_PG_QUERY_TIMEOUT: '10m',
          TESSERA_PG_CONNECT_TIMEOUT: '600',
          TESSERA_RETRY_AFTER: '1h',
        },
        CWD,
      ),
    ).toMatchObject({ redisTimeoutMs: 10, pgQueryTimeout: 600, pgConnectTimeout: 600, retryAfter: 3600 });
  });

  it.each([
    [
      { TESSERA_ATTEMPTS_CLIENT_MAX: '0' },
      'TESSERA_ATTEMPTS_CLIENT_MAX must be between 1 and 1000000, got 0',
    ],
    [{ TESSERA_ATTEMPTS_SOURCE_MAX: 'ten' }, 'TESSERA_ATTEMPTS_SOURCE_MAX must be a whole number, got "ten"'],
    [
      { TESSERA_ATTEMPTS_CLIENT_WINDOW: '0' },
      'TESSERA_ATTEMPTS_CLIENT_WINDOW must be between 1 and 86400 seconds, got 0',
    ],
    [
      { TESSERA_ATTEMPTS_SOURCE_WINDOW: '5 min' },
      'TESSERA_ATTEMPTS_SOURCE_WINDOW must be a duration such as 3600, 90s, 15m, 12h or 30d, got "5 min"',
    ],
    [
      { TESSERA_ATTEMPTS_CLIENT_BLOCK: '2d' },
      'TESSERA_ATTEMPTS_CLIENT_BLOCK must be between 1 and 86400 seconds, got 172800',
    ],
    [
      { TESSERA_ATTEMPTS_SOURCE_BLOCK: '-1' },
      'TESSERA_ATTEMPTS_SOURCE_BLOCK must be a duration such as 3600, 90s, 15m, 12h or 30d, got "-1"',
    ],
    [{ TESSERA_REDIS_TIMEOUT_MS: '5' }, 'TESSERA_REDIS_TIMEOUT_MS must be between 10 and 10000, got 5'],
    [{ TESSERA_REDIS_TIMEOUT_MS: '0.1s' }, 'TESSERA_REDIS_TIMEOUT_MS must be a whole number, got "0.1s"'],
    [{ TESSERA_PG_QUERY_TIMEOUT: '0' }, 'TESSERA_PG_QUERY_TIMEOUT must be between 1 and 600 seconds, got 0'],
    [
      { TESSERA_PG_CONNECT_TIMEOUT: '1h' },
      'TESSERA_PG_CONNECT_TIMEOUT must be between 1 and 600 seconds, got 3600',
    ],
    [
      { TESSERA_PG_QUERY_TIMEOUT: '500ms' },
      'TESSERA_PG_QUERY_TIMEOUT must be a duration such as 3600, 90s, 15m, 12h or 30d, got "500ms"',
    ],
    [{ TESSERA_RETRY_AFTER: '0' }, 'TESSERA_RETRY_AFTER must be between 1 and 3600 seconds, got 0'],
    [
      { TESSERA_RETRY_AFTER: 'soon' },
      'TESSERA_RETRY_AFTER must be a duration such as 3600, 90s, 15m, 12h or 30d, got "soon"',
    ],
  ])('%j is refused', (env, message) => {
    expect(configError(env).message).toBe(message);
  });
});

describe('connection and shutdown settings', () => {
  /** The open-files limit a process would read; the config is then loaded as on that machine. */
  const withLimit = (env: Record<string, string>, limit: number | undefined) =>
    loadConfig(env, CWD, () => limit);

  it('TESSERA_KEEPALIVE_TIMEOUT, TESSERA_SHUTDOWN_DELAY and TESSERA_SHUTDOWN_TIMEOUT are durations', () => {
    expect(
      loadConfig(
        { TESSERA_KEEPALIVE_TIMEOUT: '65s', TESSERA_SHUTDOWN_DELAY: '15', TESSERA_SHUTDOWN_TIMEOUT: '2m' },
        CWD,
      ),
    ).toMatchObject({ keepAliveTimeout: 65, shutdownDelay: 15, shutdownTimeout: 120 });
    // No delay at all is allowed (a process with nothing in front of it).
    expect(loadConfig({ TESSERA_SHUTDOWN_DELAY: '0' }, CWD).shutdownDelay).toBe(0);
    expect(loadConfig({ TESSERA_KEEPALIVE_TIMEOUT: '1' }, CWD).keepAliveTimeout).toBe(1);
    expect(loadConfig({ TESSERA_KEEPALIVE_TIMEOUT: '1h' }, CWD).keepAliveTimeout).toBe(3600);
  });

  it.each([
    [
      { TESSERA_KEEPALIVE_TIMEOUT: '0' },
      'TESSERA_KEEPALIVE_TIMEOUT must be between 1 and 3600 seconds, got 0',
    ],
    [
      { TESSERA_KEEPALIVE_TIMEOUT: '2h' },
      'TESSERA_KEEPALIVE_TIMEOUT must be between 1 and 3600 seconds, got 7200',
    ],
    [
      { TESSERA_KEEPALIVE_TIMEOUT: '5 s' },
      'TESSERA_KEEPALIVE_TIMEOUT must be a duration such as 3600, 90s, 15m, 12h or 30d, got "5 s"',
    ],
    [{ TESSERA_SHUTDOWN_DELAY: '11m' }, 'TESSERA_SHUTDOWN_DELAY must be between 0 and 600 seconds, got 660'],
    [
      { TESSERA_SHUTDOWN_DELAY: '-1' },
      'TESSERA_SHUTDOWN_DELAY must be a duration such as 3600, 90s, 15m, 12h or 30d, got "-1"',
    ],
    [{ TESSERA_SHUTDOWN_TIMEOUT: '0' }, 'TESSERA_SHUTDOWN_TIMEOUT must be between 1 and 3600 seconds, got 0'],
  ])('%j is refused', (env, message) => {
    expect(configError(env).message).toBe(message);
  });

  it('TESSERA_MAX_CONNECTIONS defaults to 80 % of the open-files limit, at most 50 000, else 819', () => {
    expect(withLimit({}, 20_000).maxConnections).toBe(16_000);
    expect(withLimit({}, 1024).maxConnections).toBe(819);
    expect(withLimit({}, 65_536).maxConnections).toBe(50_000);
    expect(withLimit({}, 1_048_576).maxConnections).toBe(50_000);
    // Unreadable (not Linux): 80 % of 1 024, the usual soft limit.
    expect(withLimit({}, undefined).maxConnections).toBe(819);
    expect([defaultMaxConnections(10), defaultMaxConnections(undefined)]).toEqual([8, 819]);
  });

  it('TESSERA_MAX_CONNECTIONS as set, below the open-files limit', () => {
    expect(withLimit({ TESSERA_MAX_CONNECTIONS: '50' }, 20_000).maxConnections).toBe(50);
    expect(withLimit({ TESSERA_MAX_CONNECTIONS: '19999' }, 20_000).maxConnections).toBe(19_999);
    expect(withLimit({ TESSERA_MAX_CONNECTIONS: '100000' }, undefined).maxConnections).toBe(100_000);
    // At or past the limit, accept() would fail before Tessera sees the connection.
    expect(thrownBy(() => withLimit({ TESSERA_MAX_CONNECTIONS: '20000' }, 20_000), ConfigError).message).toBe(
      "TESSERA_MAX_CONNECTIONS must be below this process's open-files limit (20000, see ulimit -n), got 20000",
    );
    expect(thrownBy(() => withLimit({ TESSERA_MAX_CONNECTIONS: '0' }, 20_000), ConfigError).message).toBe(
      'TESSERA_MAX_CONNECTIONS must be between 1 and 10000000, got 0',
    );
    expect(thrownBy(() => withLimit({ TESSERA_MAX_CONNECTIONS: 'many' }, 20_000), ConfigError).message).toBe(
      'TESSERA_MAX_CONNECTIONS must be a whole number, got "many"',
    );
  });

  it('openFilesLimit reads the soft limit from /proc/self/limits', () => {
    const limits = [
      'Limit                     Soft Limit           Hard Limit           Units     ',
      'Max processes             95834                95834                processes ',
      'Max open files            4096                 524288               files     ',
      'Max locked memory         8388608              8388608              bytes     ',
    ].join('\n');
    expect(openFilesLimit(() => limits)).toBe(4096);
    expect(openFilesLimit(() => 'nothing like it')).toBeUndefined();
    expect(
      openFilesLimit(() => {
        throw new Error('ENOENT');
      }),
    ).toBeUndefined();
    // This machine's own (the tests run on Linux).
    expect(openFilesLimit()).toBeGreaterThan(0);
  });
});

describe('loadConfig refuses invalid values with a ConfigError', () => {
  it.each(['abc', '-1', '80.5', '1e3', '0x50', '65536', '99999999999999999999', '8080 8081'])(
    'TESSERA_PORT=%j',
    (value) => {
      expect(configError({ TESSERA_PORT: value }).message).toMatch(/^TESSERA_PORT must be /);
    },
  );

  it.each(['yes', '1', 'on', 'False'])('TESSERA_METRICS=%j', (value) => {
    expect(configError({ TESSERA_METRICS: value }).message).toBe(
      `TESSERA_METRICS must be true or false, got "${value}"`,
    );
  });

  it('TESSERA_TRUST_PROXY=true: refused, saying why (it would trust what the client writes)', () => {
    expect(configError({ TESSERA_TRUST_PROXY: 'true' }).message).toBe(
      'TESSERA_TRUST_PROXY must list the proxies (addresses or CIDR ranges), not "true"',
    );
  });

  it.each(['0.0.0.0/0', '::/0', '10.0.0.1/0', '127.0.0.1, ::/00'])(
    'TESSERA_TRUST_PROXY=%j: a /0 trusts every address, as true would',
    (value) => {
      const entry = value.split(',').at(-1)!.trim();
      expect(configError({ TESSERA_TRUST_PROXY: value }).message).toBe(
        `TESSERA_TRUST_PROXY: "${entry}" would trust every address, as "true" would: list the proxies`,
      );
    },
  );

  it.each([
    ['proxy.example.com', 'proxy.example.com'],
    ['True', 'True'],
    ['yes', 'yes'],
    ['cafe', 'cafe'], // hex digits, but not an address
    ['...', '...'],
    ['::::', '::::'],
    ['999.1.1.1', '999.1.1.1'],
    ['10.0.0', '10.0.0'],
    ['010.0.0.1', '010.0.0.1'], // a leading zero reads as octal in some parsers: refused, not guessed
    ['10.0.0.0/33', '10.0.0.0/33'],
    ['fd00::/129', 'fd00::/129'],
    ['10.0.0.0/8/8', '10.0.0.0/8/8'],
    ['10.0.0.0/', '10.0.0.0/'],
    ['10.0.0.0/255.0.0.0', '10.0.0.0/255.0.0.0'],
    ['10.0.0.0/-8', '10.0.0.0/-8'],
    ['/8', '/8'],
    ['10.0.0.1,', ''], // an empty entry
    ['10.0.0.1,,10.0.0.2', ''],
    ['10.0.0.1 10.0.0.2', '10.0.0.1 10.0.0.2'],
    ['127.0.0.1, false', 'false'],
    ['LOOPBACK', 'LOOPBACK'],
    ['loopback, private', 'private'],
  ])('TESSERA_TRUST_PROXY=%j: the entry %j refused', (value, entry) => {
    expect(configError({ TESSERA_TRUST_PROXY: value }).message).toBe(
      `TESSERA_TRUST_PROXY: "${entry}" is not an address, a CIDR range, loopback, linklocal or uniquelocal`,
    );
  });

  it('says what was wrong with the port', () => {
    expect(configError({ TESSERA_PORT: 'abc' }).message).toBe(
      'TESSERA_PORT must be a whole number, got "abc"',
    );
    expect(configError({ TESSERA_PORT: '65536' }).message).toBe(
      'TESSERA_PORT must be between 0 and 65535, got 65536',
    );
  });

  it.each(['0', '59', '86401', '1800s', '30m', '-60', '1800.5'])('TESSERA_TOKEN_TTL=%j', (value) => {
    expect(configError({ TESSERA_TOKEN_TTL: value }).message).toMatch(/^TESSERA_TOKEN_TTL must be /);
  });

  it('says the token lifetime range', () => {
    expect(configError({ TESSERA_TOKEN_TTL: '59' }).message).toBe(
      'TESSERA_TOKEN_TTL must be between 60 and 86400, got 59',
    );
    expect(configError({ TESSERA_TOKEN_TTL: '86401' }).message).toBe(
      'TESSERA_TOKEN_TTL must be between 60 and 86400, got 86401',
    );
  });

  it.each(['HS256', 'none', 'es256', 'RS384', 'ES512', 'Ed25519'])('TESSERA_SIGNING_ALG=%j', (alg) => {
    expect(configError({ TESSERA_SIGNING_ALG: alg }).message).toBe(
      `TESSERA_SIGNING_ALG must be one of ES256, RS256, PS256, EdDSA, got "${alg}"`,
    );
  });

  it.each([
    [
      'a path',
      'https://auth.example.com/tessera',
      'TESSERA_ISSUER must be an origin without a path, such as https://auth.example.com',
    ],
    [
      'a path with a trailing slash',
      'https://auth.example.com/oauth/',
      'TESSERA_ISSUER must be an origin without a path, such as https://auth.example.com',
    ],
    [
      'a query',
      'https://auth.example.com?tenant=1',
      'TESSERA_ISSUER must not carry a query or a fragment (RFC 8414 §2)',
    ],
    [
      'an empty query',
      'https://auth.example.com/?',
      'TESSERA_ISSUER must not carry a query or a fragment (RFC 8414 §2)',
    ],
    [
      'a fragment',
      'https://auth.example.com#x',
      'TESSERA_ISSUER must not carry a query or a fragment (RFC 8414 §2)',
    ],
    [
      'an empty fragment',
      'https://auth.example.com#',
      'TESSERA_ISSUER must not carry a query or a fragment (RFC 8414 §2)',
    ],
    [
      'another scheme',
      'ftp://auth.example.com',
      'TESSERA_ISSUER must be an http(s) URL, got "ftp://auth.example.com"',
    ],
    ['no scheme', 'auth.example.com', 'TESSERA_ISSUER must be an absolute URL, got "auth.example.com"'],
    ['a relative path', '/oauth', 'TESSERA_ISSUER must be an absolute URL, got "/oauth"'],
  ])('TESSERA_ISSUER with %s', (_, value, message) => {
    expect(configError({ TESSERA_ISSUER: value }).message).toBe(message);
  });

  it('refuses an issuer that carries credentials rather than silently dropping them', () => {
    configError({ TESSERA_ISSUER: 'https://user:secret@auth.example.com' });
  });

  it.each(['http://localhost:6379', 'localhost:6379', 'redis:/localhost', 'memcached://x'])(
    'TESSERA_REDIS_URL=%j',
    (value) => {
      expect(configError({ TESSERA_REDIS_URL: value }).message).toBe(
        'TESSERA_REDIS_URL must be a redis:// or rediss:// URL',
      );
    },
  );

  it.each(['redis://', 'redis://not a host'])('TESSERA_REDIS_URL=%j (not a usable URL)', (value) => {
    configError({ TESSERA_REDIS_URL: value });
  });

  it.each(['postgres://u:p@db:5432/tessera', 'postgresql://db/tessera', 'POSTGRES://db/tessera'])(
    'TESSERA_DATABASE_URL=%j is PostgreSQL, kept as given',
    (value) => {
      const config = loadConfig({ TESSERA_DATABASE_URL: value }, CWD);
      expect(config.databaseUrl).toBe(value);
      expect(isPostgresUrl(config.databaseUrl)).toBe(true);
    },
  );

  it('TESSERA_DATABASE_URL that is not a parseable postgres URL', () => {
    expect(configError({ TESSERA_DATABASE_URL: 'postgres://[bad' }).message).toBe(
      'TESSERA_DATABASE_URL is not a valid postgres:// URL',
    );
  });

  it.each(['mysql://db/tessera', 'postgress://db/tessera', 'redis://db'])(
    'TESSERA_DATABASE_URL=%j (another scheme is not a relative file name)',
    (value) => {
      configError({ TESSERA_DATABASE_URL: value });
    },
  );

  it.each(['verbose', 'warning', '10'])('TESSERA_LOG_LEVEL=%j', (value) => {
    expect(configError({ TESSERA_LOG_LEVEL: value }).message).toBe(
      `TESSERA_LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent, got "${value}"`,
    );
  });

  it.each([
    ['TESSERA_CACHE_TTL', '0'],
    ['TESSERA_CACHE_TTL', '3601'],
    ['TESSERA_CACHE_MAX', '99'],
    ['TESSERA_CACHE_MAX', '10000001'],
    ['TESSERA_CHANGE_POLL_MS', '49'],
    ['TESSERA_CHANGE_POLL_MS', '10001'],
    ['TESSERA_CHANGE_POLL_MS', 'fast'],
  ])('%s=%j', (name, value) => {
    expect(configError({ [name]: value }).message).toMatch(new RegExp(`^${name} must be `));
  });
});

describe('normalizeIssuer and sqlitePath', () => {
  it('normalizeIssuer returns the origin', () => {
    expect(normalizeIssuer('https://auth.example.com/')).toBe('https://auth.example.com');
    expect(normalizeIssuer('http://localhost:8080')).toBe('http://localhost:8080');
  });

  it('sqlitePath is the database URL when set, else <dataDir>/tessera.db', () => {
    expect(sqlitePath({ dataDir: '/srv/data', databaseUrl: undefined })).toBe('/srv/data/tessera.db');
    expect(sqlitePath({ dataDir: '/srv/data', databaseUrl: '/var/lib/t.db' })).toBe('/var/lib/t.db');
    expect(sqlitePath(loadConfig({}, CWD))).toBe('/srv/tessera/data/tessera.db');
  });
});
