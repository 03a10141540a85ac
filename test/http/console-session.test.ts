/**
 * The console's sessions (MANAGEMENT.md, "Web console": operators, sessions) from outside, as a browser and an
 * attacker see them: a real server on a real socket, requests made with fetch and the headers a browser would
 * send (Cookie, Origin, X-CSRF-Token) or an attacker's page could. Every refusal is checked to the exact status,
 * header and problem body, and every refused change by reading the store afterwards: nothing changed.
 * Operators are added through the management layer, as `tessera operator add` does.
 */
import { createHash, randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_SCOPES } from '../../src/management/builtin.js';
import { exportConfig } from '../../src/management/declarative/index.js';
import {
  audiences,
  clients,
  operators,
  sessions,
  type ManagementContext,
} from '../../src/management/index.js';
import type { AuditEvent } from '../../src/store/types.js';
import { managementOf } from '../helpers/management.js';
import { createTestDatabase, type TestDatabase } from '../helpers/postgres.js';
import { ROOT } from '../helpers/process.js';
import { dropPrefix, REDIS_URL, testPrefix } from '../helpers/redis.js';
import { freePort, startTestServer, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';

const PASSWORD = 'correct horse battery staple';
const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";
const VIEWER_SCOPES = ['audiences:read', 'clients:read', 'keys:read', 'audit:read'];

const INVALID_LOGIN = {
  type: 'urn:tessera:problem:invalid_login',
  title: 'Unauthorized',
  status: 401,
  detail: 'the email or the password is not right',
};
const NO_SESSION = {
  type: 'urn:tessera:problem:no_session',
  title: 'Unauthorized',
  status: 401,
  detail: 'no console session: log in first',
};
const SESSION_ENDED = {
  type: 'urn:tessera:problem:session_ended',
  title: 'Unauthorized',
  status: 401,
  detail: 'the console session has ended (logged out, timed out, or the operator was disabled): log in again',
};
const CSRF_FAILED = {
  type: 'urn:tessera:problem:csrf_failed',
  title: 'Forbidden',
  status: 403,
  detail: "a change made with a console session needs the session's anti-CSRF token (x-csrf-token)",
};
const originMismatch = (origin: string) => ({
  type: 'urn:tessera:problem:origin_mismatch',
  title: 'Forbidden',
  status: 403,
  detail: `a change made with a console session must come from a page of ${origin} (the Origin header)`,
});
const insufficientScope = (scope: string) => ({
  type: 'urn:tessera:problem:insufficient_scope',
  title: 'Forbidden',
  status: 403,
  detail: `this call needs the scope ${scope}`,
});
const ENROLLMENT_INVALID = {
  type: 'urn:tessera:problem:enrollment_invalid',
  title: 'Bad Request',
  status: 400,
  detail:
    'this enrollment link has expired or has already been used: ask an admin for a new one (tessera operator reset)',
};
const LOGIN_THROTTLED = {
  type: 'urn:tessera:problem:login_throttled',
  title: 'Too Many Requests',
  status: 429,
  detail: 'too many failed logins for this email or from this address: try again later',
};
const PROBLEM_JSON = 'application/problem+json; charset=utf-8';
const SESSION_ENDED_CHALLENGE = 'Bearer error="invalid_token"';

interface Answer {
  status: number;
  headers: Headers;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any -- JSON answers, checked field by field
}

interface Session {
  /** The cookie's value. */
  token: string;
  csrf: string;
  /** The Cookie request header that carries it. */
  cookie: string;
  answer: Answer;
}

const ctxOf = (t: TestServer, now?: () => number): ManagementContext => managementOf(t, 'test', now);
const originOf = (t: TestServer): string => new URL(t.config.issuer).origin;
const cookieName = (t: TestServer): string =>
  t.config.issuer.startsWith('https://') ? '__Host-tessera_session' : 'tessera_session';
/** Every password, cookie value and link token this file used: none may be found in the data directory. */
const inClear = new Set<string>();
/** The token of an enrollment link: in its fragment, which browsers never send. */
const linkToken = (url: string): string => {
  const match = /#token=([A-Za-z0-9_-]{43})$/.exec(url);
  if (!match) throw new Error(`not an enrollment link: ${url}`);
  inClear.add(match[1]!);
  return match[1]!;
};

/** One request to the server the way a browser (or a forged page) would make it. */
async function send(
  t: TestServer,
  method: string,
  route: string,
  options: {
    cookie?: string;
    origin?: string;
    csrf?: string;
    body?: unknown;
    headers?: Record<string, string>;
    /** The server's own address when the issuer names another one (a shared issuer, an https issuer). */
    base?: string;
  } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.cookie !== undefined) headers.cookie = options.cookie;
  if (options.origin !== undefined) headers.origin = options.origin;
  if (options.csrf !== undefined) headers['x-csrf-token'] = options.csrf;
  let payload: string | undefined;
  if (options.body !== undefined) {
    payload = typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
    headers['content-type'] ??= 'application/json';
  }
  const response = await fetch(`${options.base ?? baseOf(t)}${route}`, {
    method,
    headers,
    body: payload,
    redirect: 'manual',
  });
  const text = await response.text();
  const type = response.headers.get('content-type') ?? '';
  return {
    status: response.status,
    headers: response.headers,
    body: text !== '' && type.includes('json') ? JSON.parse(text) : text,
  };
}

/** Where the server listens (the issuer, unless the test set another one). */
const baseOf = (t: TestServer): string => `http://127.0.0.1:${t.config.port}`;

async function login(
  t: TestServer,
  email: string,
  password = PASSWORD,
  origin = originOf(t),
  base?: string,
): Promise<Answer> {
  return send(t, 'POST', '/console/api/session', {
    origin,
    body: { email, password },
    ...(base ? { base } : {}),
  });
}

/** Logs in and expects it to work: the session's cookie and anti-CSRF token. */
async function openSession(
  t: TestServer,
  email: string,
  password = PASSWORD,
  base?: string,
): Promise<Session> {
  const answer = await login(t, email, password, originOf(t), base);
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  const setCookie = answer.headers.getSetCookie();
  expect(setCookie).toHaveLength(1);
  const match = new RegExp(`^${cookieName(t)}=([A-Za-z0-9_-]{43}); `).exec(setCookie[0]!);
  expect(match).not.toBeNull();
  const token = match![1]!;
  const csrf = answer.body.csrf_token as string;
  inClear.add(token).add(password);
  return { token, csrf, cookie: `${cookieName(t)}=${token}`, answer };
}

/** Adds an operator and sets their password, as `tessera operator add` and the enrollment page do. */
async function addEnrolled(t: TestServer, email: string, role: 'admin' | 'viewer', password = PASSWORD) {
  const ctx = ctxOf(t);
  const { url } = await operators.addOperator(ctx, { email, role });
  return operators.enroll(ctx, linkToken(url), password);
}

/** Everything a refused change could have touched: the configuration, the keys, the operators, the audit. */
async function snapshot(t: TestServer) {
  const ctx = ctxOf(t);
  const { store } = t.server.runtime;
  return {
    config: await exportConfig(ctx),
    keys: (await store.listSigningKeys()).map((k) => `${k.kid} ${k.activatesAt} ${k.retiredAt}`),
    operators: await store.listOperators(),
    audit: (await store.queryAuditEvents({ limit: 500 })).map((e) => `${e.id} ${e.type}`),
  };
}

const auditOf = async (t: TestServer, type: AuditEvent['type']): Promise<AuditEvent[]> =>
  t.server.runtime.store.queryAuditEvents({ types: [type], limit: 500 });

/** The headers of an answer that say something (the date and the connection's own are left out). */
const headersOf = (answer: Answer): Record<string, string> =>
  Object.fromEntries(
    [...answer.headers.entries()].filter(([name]) => !['date', 'connection', 'keep-alive'].includes(name)),
  );

/** The challenge of the console's own 401s (a failed login, no session): RFC 9110 wants one on every 401. */
const CONSOLE_CHALLENGE = 'Session realm="Tessera console"';

function expectProblem(answer: Answer, status: number, body: object, given: Record<string, string> = {}) {
  const headers =
    body === INVALID_LOGIN || body === NO_SESSION
      ? { 'www-authenticate': CONSOLE_CHALLENGE, ...given }
      : given;
  expect({ status: answer.status, body: answer.body }).toEqual({ status, body });
  expect(answer.headers.get('content-type')).toBe(PROBLEM_JSON);
  expect(answer.headers.get('cache-control')).toBe('no-store');
  expect(answer.headers.getSetCookie()).toEqual([]);
  for (const [name, value] of Object.entries(headers)) expect(answer.headers.get(name)).toBe(value);
  if (!('www-authenticate' in headers)) expect(answer.headers.get('www-authenticate')).toBeNull();
}

/**
 * Asks until the session is refused: it must be within a second of `started` (when its operator was disabled),
 * with exactly the answer of an ended session.
 */
async function expectEndedWithinASecond(list: () => Promise<Answer>, started: number): Promise<void> {
  let refused: Answer | undefined;
  await waitFor(
    async () => {
      const answer = await list();
      if (answer.status === 200) return false;
      refused = answer;
      return true;
    },
    1000,
    20,
  );
  expect(Date.now() - started).toBeLessThan(1000);
  expectProblem(refused!, 401, SESSION_ENDED, { 'www-authenticate': SESSION_ENDED_CHALLENGE });
}

const sha256 = (token: string): string => createHash('sha256').update(token).digest('base64url');

describe('the console on an http issuer', () => {
  let t: TestServer;

  beforeAll(async () => {
    t = await startTestServer();
  });
  afterAll(async () => {
    await t?.close();
  });

  describe('without a session', () => {
    it('pages redirect to the login page with where they were; the login and enroll pages load', async () => {
      for (const [page, next] of [
        ['/console/clients', '%2Fconsole%2Fclients'],
        ['/console/', '%2Fconsole%2F'],
        ['/console', '%2Fconsole'],
        ['/console/clients/abc?tab=secrets', '%2Fconsole%2Fclients%2Fabc%3Ftab%3Dsecrets'],
        ['/console/operators', '%2Fconsole%2Foperators'],
      ] as const) {
        for (const cookie of [undefined, `tessera_session=${randomBytes(32).toString('base64url')}`]) {
          const answer = await send(t, 'GET', page, cookie === undefined ? {} : { cookie });
          expect(answer.status, page).toBe(302);
          expect(answer.headers.get('location')).toBe(`/console/login?next=${next}`);
          expect(answer.headers.get('cache-control')).toBe('no-store');
          expect(answer.headers.get('content-security-policy')).toBe(CSP);
          expect(answer.headers.getSetCookie()).toEqual([]);
          expect(answer.body).toBe('');
        }
      }
      for (const page of ['/console/login', '/console/login?next=%2Fconsole%2Fkeys', '/console/enroll']) {
        const answer = await send(t, 'GET', page);
        expect(answer.status, page).toBe(200);
        expect(answer.headers.get('content-type')).toBe('text/html; charset=utf-8');
        expect(answer.headers.get('cache-control')).toBe('no-store');
        expect(answer.headers.get('content-security-policy')).toBe(CSP);
        expect(answer.body).toContain('<script type="module" crossorigin src="/console/assets/');
      }
    });

    it('the session API says no_session, the admin API invalid_token; a cookie of no session says session_ended', async () => {
      expectProblem(await send(t, 'GET', '/console/api/session'), 401, NO_SESSION, {
        'content-security-policy': CSP,
      });
      expectProblem(
        await send(t, 'GET', '/admin/v1/clients'),
        401,
        {
          type: 'urn:tessera:problem:invalid_token',
          title: 'Unauthorized',
          status: 401,
          detail: 'an access token is required (Authorization: Bearer or DPoP)',
        },
        {
          'www-authenticate':
            'Bearer error="invalid_token", error_description="an access token is required (Authorization: Bearer or DPoP)", DPoP algs="ES256 ES384 RS256 PS256 EdDSA Ed25519"',
        },
      );
      // A cookie of the right shape that no session has, and one of any other shape.
      for (const value of [randomBytes(32).toString('base64url'), 'not-a-session', '']) {
        const cookie = `tessera_session=${value}`;
        expectProblem(await send(t, 'GET', '/console/api/session', { cookie }), 401, SESSION_ENDED, {
          'www-authenticate': SESSION_ENDED_CHALLENGE,
        });
        expectProblem(await send(t, 'GET', '/admin/v1/clients', { cookie }), 401, SESSION_ENDED, {
          'www-authenticate': SESSION_ENDED_CHALLENGE,
        });
      }
    });

    it('every /console answer has the strict CSP; hashed files are immutable, the page is never cached', async () => {
      const html = readFileSync(path.join(ROOT, 'dist/console/index.html'), 'utf8');
      const script = /src="\/console\/(assets\/[^"]+\.js)"/.exec(html)?.[1];
      expect(script).toMatch(/^assets\/index-[A-Za-z0-9_-]+\.js$/);
      const asset = await send(t, 'GET', `/console/${script}`);
      expect(asset.status).toBe(200);
      expect(asset.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
      expect(asset.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
      expect(asset.headers.get('content-security-policy')).toBe(CSP);
      const missing = await send(t, 'GET', '/console/assets/nothing-here.js');
      expectProblem(
        missing,
        404,
        {
          type: 'urn:tessera:problem:not_found',
          title: 'Not Found',
          status: 404,
          detail: 'no such file: assets/nothing-here.js',
        },
        { 'content-security-policy': CSP },
      );
    });
  });

  describe('session cookie', () => {
    it('login sets HttpOnly, SameSite=Strict, Path=/ and the 12-hour Max-Age; logout clears it the same way', async () => {
      const email = 'cookie@example.com';
      await addEnrolled(t, email, 'admin');
      const answer = await login(t, email);
      expect(answer.status).toBe(200);
      expect(answer.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(answer.headers.get('cache-control')).toBe('no-store');
      expect(answer.headers.get('content-security-policy')).toBe(CSP);
      const [setCookie, ...more] = answer.headers.getSetCookie();
      expect(more).toEqual([]);
      expect(setCookie).toMatch(
        /^tessera_session=[A-Za-z0-9_-]{43}; Max-Age=43200; Path=\/; HttpOnly; SameSite=Strict$/,
      );
      const token = /^tessera_session=([^;]+);/.exec(setCookie!)![1]!;
      const operator = await operators.getOperator(ctxOf(t), email);
      expect(answer.body).toEqual({
        operator: {
          id: operator.id,
          email,
          role: 'admin',
          enabled: true,
          enrolled: true,
          enrollment_expires_at: null,
          last_login_at: operator.lastLoginAt,
          created_at: operator.createdAt,
          updated_at: operator.updatedAt,
        },
        scopes: [...ADMIN_SCOPES],
        csrf_token: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) as unknown,
        expires_at: expect.any(String) as unknown,
      });
      // 12 hours from the login, which last_login_at records.
      expect(Date.parse(answer.body.expires_at)).toBe(Date.parse(operator.lastLoginAt!) + 43_200_000);
      // The store keeps the session only as the SHA-256 of the cookie's value.
      expect(await t.server.runtime.store.findOperatorSession(token)).toBeUndefined();
      expect((await t.server.runtime.store.findOperatorSession(sha256(token)))?.operator.email).toBe(email);

      // The cookie works; reading the session sets no cookie.
      const cookie = `tessera_session=${token}`;
      const read = await send(t, 'GET', '/console/api/session', { cookie });
      expect(read.status).toBe(200);
      expect(read.headers.get('cache-control')).toBe('no-store');
      expect(read.headers.getSetCookie()).toEqual([]);
      expect(read.body).toEqual(answer.body);

      // A second login is another session, with another cookie and another anti-CSRF token.
      const again = await openSession(t, email);
      expect(again.token).not.toBe(token);
      expect(again.csrf).not.toBe(answer.body.csrf_token);

      const logout = await send(t, 'DELETE', '/console/api/session', {
        cookie,
        origin: originOf(t),
        csrf: answer.body.csrf_token as string,
      });
      expect(logout.status).toBe(204);
      expect(logout.body).toBe('');
      expect(logout.headers.getSetCookie()).toEqual([
        'tessera_session=; Max-Age=0; Path=/; HttpOnly; SameSite=Strict',
      ]);
      expectProblem(await send(t, 'GET', '/console/api/session', { cookie }), 401, SESSION_ENDED, {
        'www-authenticate': SESSION_ENDED_CHALLENGE,
      });
      expectProblem(await send(t, 'GET', '/admin/v1/clients', { cookie }), 401, SESSION_ENDED, {
        'www-authenticate': SESSION_ENDED_CHALLENGE,
      });
      expect(await t.server.runtime.store.findOperatorSession(sha256(token))).toBeUndefined();
      // Only that session ended: the other one still works.
      expect((await send(t, 'GET', '/console/api/session', { cookie: again.cookie })).status).toBe(200);
      const [event] = await auditOf(t, 'operator.logout');
      expect(event).toMatchObject({
        type: 'operator.logout',
        actor: `operator:${email}`,
        target: operator.id,
        source: '127.0.0.1',
      });

      // Logging out without a session (or again) is no error, and clears the cookie all the same.
      for (const options of [{}, { cookie, origin: originOf(t), csrf: answer.body.csrf_token as string }]) {
        const none = await send(t, 'DELETE', '/console/api/session', options);
        expect(none.status).toBe(204);
        expect(none.headers.getSetCookie()).toEqual([
          'tessera_session=; Max-Age=0; Path=/; HttpOnly; SameSite=Strict',
        ]);
      }
      expect(await auditOf(t, 'operator.logout')).toHaveLength(1);
    });
  });

  describe('CSRF and Origin', () => {
    const email = 'csrf@example.com';
    let current: Session;
    let earlier: Session;
    let sibling: Session;
    let audienceId: string;

    beforeAll(async () => {
      await addEnrolled(t, email, 'admin');
      const audience = await audiences.addAudience(ctxOf(t), { url: 'https://csrf.example.com' });
      audienceId = audience.id;
      await clients.createClient(ctxOf(t), { name: 'target', id: 'csrf-target', grants: [audience.url] });
      // A session that ended (logged out), a sibling session still open, and the current one.
      earlier = await openSession(t, email);
      const out = await send(t, 'DELETE', '/console/api/session', {
        cookie: earlier.cookie,
        origin: originOf(t),
        csrf: earlier.csrf,
      });
      expect(out.status).toBe(204);
      sibling = await openSession(t, email);
      current = await openSession(t, email);
    });

    it('a change with a forged, replayed, foreign or missing anti-CSRF token or Origin is refused; nothing changes', async () => {
      const before = await snapshot(t);
      const origin = originOf(t);
      const { hostname, port } = new URL(origin);
      // The same machine under another name: the issuer says localhost, the socket is 127.0.0.1.
      const otherName = hostname === 'localhost' ? '127.0.0.1' : 'localhost';
      const attempts: [string, { origin?: string; csrf?: string }, object][] = [
        ['forged token', { origin, csrf: randomBytes(32).toString('base64url') }, CSRF_FAILED],
        ['token of an earlier session', { origin, csrf: earlier.csrf }, CSRF_FAILED],
        ['token of another open session', { origin, csrf: sibling.csrf }, CSRF_FAILED],
        ['no token', { origin }, CSRF_FAILED],
        ['empty token', { origin, csrf: '' }, CSRF_FAILED],
        ['the cookie as the token', { origin, csrf: current.token }, CSRF_FAILED],
        ['foreign Origin', { origin: 'https://evil.example', csrf: current.csrf }, originMismatch(origin)],
        ['no Origin', { csrf: current.csrf }, originMismatch(origin)],
        ['Origin null', { origin: 'null', csrf: current.csrf }, originMismatch(origin)],
        [
          'another port',
          { origin: `http://${hostname}:${Number(port) + 1}`, csrf: current.csrf },
          originMismatch(origin),
        ],
        [
          'https, not http',
          { origin: `https://${hostname}:${port}`, csrf: current.csrf },
          originMismatch(origin),
        ],
        [
          'another name of the host',
          { origin: `http://${otherName}:${port}`, csrf: current.csrf },
          originMismatch(origin),
        ],
        ['a path after it', { origin: `${origin}/`, csrf: current.csrf }, originMismatch(origin)],
        ['neither', {}, originMismatch(origin)],
      ];
      // Every kind of change, a few of them per attempt: a body or none, every unsafe method.
      const writes: [string, string, unknown][] = [
        ['POST', '/admin/v1/clients', { name: 'forged', client_id: 'forged' }],
        ['POST', '/admin/v1/keys/rotate', undefined],
        ['PATCH', '/admin/v1/clients/csrf-target', { enabled: false }],
        ['PUT', `/admin/v1/clients/csrf-target/grants/${audienceId}`, { scopes: [] }],
        ['DELETE', '/admin/v1/clients/csrf-target', undefined],
        ['POST', '/admin/v1/operators', { email: 'forged@example.com', role: 'admin' }],
        ['DELETE', `/admin/v1/audiences/${audienceId}`, undefined],
      ];
      for (const [i, [what, headers, problem]] of attempts.entries()) {
        for (const [method, route, body] of [writes[i % writes.length]!, writes[(i + 3) % writes.length]!]) {
          const answer = await send(t, method, route, {
            cookie: current.cookie,
            ...headers,
            ...(body === undefined ? {} : { body }),
          });
          expect({ what, route: `${method} ${route}`, status: answer.status, body: answer.body }).toEqual({
            what,
            route: `${method} ${route}`,
            status: 403,
            body: problem,
          });
          expect(answer.headers.get('content-type')).toBe(PROBLEM_JSON);
          expect(answer.headers.get('cache-control')).toBe('no-store');
          expect(answer.headers.get('www-authenticate')).toBeNull();
          expect(answer.headers.getSetCookie()).toEqual([]);
        }
        // The same for a logout: a page elsewhere cannot end the session either.
        const logout = await send(t, 'DELETE', '/console/api/session', {
          cookie: current.cookie,
          ...headers,
        });
        expect({ what, status: logout.status, body: logout.body }).toEqual({
          what,
          status: 403,
          body: problem,
        });
        expect(logout.headers.getSetCookie()).toEqual([]);
      }
      expect(await snapshot(t)).toEqual(before);
      // The session is still open: a forged logout did not end it.
      expect((await send(t, 'GET', '/console/api/session', { cookie: current.cookie })).status).toBe(200);

      // With its own token and the issuer's Origin, the same change goes through, audited as the operator.
      const created = await send(t, 'POST', '/admin/v1/clients', {
        cookie: current.cookie,
        origin,
        csrf: current.csrf,
        body: { name: 'made in the console', client_id: 'console-made' },
      });
      expect(created.status).toBe(201);
      expect(created.body.client_id).toBe('console-made');
      const [event] = await auditOf(t, 'client.created');
      expect(event).toMatchObject({
        actor: `operator:${email}`,
        target: 'console-made',
        source: '127.0.0.1',
      });
      const deleted = await send(t, 'DELETE', '/admin/v1/clients/console-made', {
        cookie: current.cookie,
        origin,
        csrf: current.csrf,
      });
      expect(deleted.status).toBe(204);
    });

    it('the token of a session is refused with the cookie of an earlier one, which has ended', async () => {
      const answer = await send(t, 'POST', '/admin/v1/keys/rotate', {
        cookie: earlier.cookie,
        origin: originOf(t),
        csrf: current.csrf,
      });
      expectProblem(answer, 403, CSRF_FAILED);
      // Its own token with it: the session is over.
      const own = await send(t, 'POST', '/admin/v1/keys/rotate', {
        cookie: earlier.cookie,
        origin: originOf(t),
        csrf: earlier.csrf,
      });
      expectProblem(own, 401, SESSION_ENDED, { 'www-authenticate': SESSION_ENDED_CHALLENGE });
    });

    it('a login from a page elsewhere is refused, even with the right password, and opens no session', async () => {
      const before = await t.server.runtime.store.findOperator(email);
      const logins = (await auditOf(t, 'operator.login')).length;
      const failures = (await auditOf(t, 'operator.login_failed')).length;
      const { hostname, port } = new URL(originOf(t));
      const otherName = hostname === 'localhost' ? '127.0.0.1' : 'localhost';
      for (const origin of ['https://evil.example', 'null', `http://${otherName}:${port}`, undefined]) {
        const answer = await send(t, 'POST', '/console/api/session', {
          ...(origin === undefined ? {} : { origin }),
          body: { email, password: PASSWORD },
        });
        expectProblem(answer, 403, originMismatch(originOf(t)), { 'content-security-policy': CSP });
      }
      // A form post (what a page elsewhere could send without CORS) is not even read.
      for (const type of [
        'application/x-www-form-urlencoded',
        'text/plain',
        'multipart/form-data; boundary=x',
      ]) {
        const answer = await send(t, 'POST', '/console/api/session', {
          origin: originOf(t),
          body: `email=${email}&password=${PASSWORD}`,
          headers: { 'content-type': type },
        });
        expect(answer.status, type).toBe(415);
        expect(answer.body.type).toBe('urn:tessera:problem:unsupported_media_type');
        expect(answer.headers.getSetCookie()).toEqual([]);
      }
      expect(await t.server.runtime.store.findOperator(email)).toEqual(before);
      expect(await auditOf(t, 'operator.login')).toHaveLength(logins);
      expect(await auditOf(t, 'operator.login_failed')).toHaveLength(failures);
    });

    it('enrollment needs the Origin too', async () => {
      const { url } = await operators.addOperator(ctxOf(t), {
        email: 'origin-enroll@example.com',
        role: 'viewer',
      });
      const token = linkToken(url);
      for (const [route, body] of [
        ['/console/api/enrollment/lookup', { token }],
        ['/console/api/enrollment', { token, password: PASSWORD }],
      ] as const) {
        for (const origin of ['https://evil.example', undefined]) {
          const answer = await send(t, 'POST', route, { ...(origin ? { origin } : {}), body });
          expectProblem(answer, 403, originMismatch(originOf(t)));
        }
      }
      expect((await operators.getOperator(ctxOf(t), 'origin-enroll@example.com')).enrolled).toBe(false);
    });
  });

  describe('a viewer', () => {
    const email = 'viewer@example.com';
    let viewer: Session;
    let audienceId: string;

    beforeAll(async () => {
      await addEnrolled(t, email, 'viewer');
      viewer = await openSession(t, email);
      const ctx = ctxOf(t);
      const audience = await audiences.addAudience(ctx, {
        url: 'https://orders.example.com',
        scopes: [{ name: 'orders:read' }],
      });
      audienceId = audience.id;
      await clients.createClient(ctx, { name: 'kept', id: 'kept-client', grants: [audience.url] });
      await t.sync();
    });

    it('has the read scopes only, and reads clients, audiences, keys and the audit trail', async () => {
      const session = await send(t, 'GET', '/console/api/session', { cookie: viewer.cookie });
      expect(session.status).toBe(200);
      expect(session.body.scopes).toEqual(VIEWER_SCOPES);
      expect(session.body.operator).toMatchObject({ email, role: 'viewer', enabled: true, enrolled: true });
      expect(session.body.csrf_token).toBe(viewer.csrf);
      for (const route of [
        '/admin/v1/clients',
        '/admin/v1/audiences',
        '/admin/v1/keys',
        '/admin/v1/audit-events',
      ]) {
        const answer = await send(t, 'GET', route, { cookie: viewer.cookie });
        expect(answer.status, route).toBe(200);
        expect(answer.headers.get('cache-control')).toBe('no-store');
        expect(answer.body.items.length, route).toBeGreaterThan(0);
      }
      const client = await send(t, 'GET', '/admin/v1/clients/kept-client', { cookie: viewer.cookie });
      expect(client.status).toBe(200);
      expect(client.body.name).toBe('kept');
      const audience = await send(t, 'GET', `/admin/v1/audiences/${audienceId}`, { cookie: viewer.cookie });
      expect(audience.status).toBe(200);
      expect(audience.body.identifier).toBe('https://orders.example.com');
    });

    it('changes nothing: every write is 403 insufficient_scope, even with the right Origin and token', async () => {
      const before = await snapshot(t);
      const writes: [string, string, unknown, string][] = [
        ['POST', '/admin/v1/clients', { name: 'by a viewer' }, 'clients:write'],
        ['PATCH', `/admin/v1/audiences/${audienceId}`, { name: 'renamed' }, 'audiences:write'],
        ['DELETE', `/admin/v1/audiences/${audienceId}`, undefined, 'audiences:write'],
        ['POST', '/admin/v1/keys/rotate', undefined, 'keys:write'],
        ['DELETE', '/admin/v1/clients/kept-client', undefined, 'clients:write'],
        ['PATCH', '/admin/v1/clients/kept-client', { enabled: false }, 'clients:write'],
        ['POST', '/admin/v1/clients/kept-client/secrets', {}, 'clients:write'],
        ['PUT', `/admin/v1/clients/kept-client/grants/${audienceId}`, { scopes: [] }, 'clients:write'],
        ['POST', '/admin/v1/operators', { email: 'new@example.com', role: 'admin' }, 'operators:write'],
        ['PATCH', `/admin/v1/operators/${email}`, { role: 'admin' }, 'operators:write'],
        ['GET', '/admin/v1/operators', undefined, 'operators:read'],
        ['GET', `/admin/v1/operators/${email}`, undefined, 'operators:read'],
      ];
      for (const [method, route, body, scope] of writes) {
        const answer = await send(t, method, route, {
          cookie: viewer.cookie,
          origin: originOf(t),
          csrf: viewer.csrf,
          ...(body === undefined ? {} : { body }),
        });
        expect({ route: `${method} ${route}`, status: answer.status, body: answer.body }).toEqual({
          route: `${method} ${route}`,
          status: 403,
          body: insufficientScope(scope),
        });
        expect(answer.headers.get('www-authenticate')).toBe(
          `Bearer error="insufficient_scope", scope="${scope}"`,
        );
        expect(answer.headers.get('content-type')).toBe(PROBLEM_JSON);
        expect(answer.headers.get('cache-control')).toBe('no-store');
      }
      expect(await snapshot(t)).toEqual(before);
      expect((await operators.getOperator(ctxOf(t), email)).role).toBe('viewer');
    });

    it('made an admin, the same session may write at its next request; made a viewer again, it may not', async () => {
      const ctx = ctxOf(t);
      await operators.updateOperator(ctx, email, { role: 'admin' });
      const promoted = await send(t, 'GET', '/console/api/session', { cookie: viewer.cookie });
      expect(promoted.body.scopes).toEqual([...ADMIN_SCOPES]);
      const rotate = () =>
        send(t, 'POST', '/admin/v1/keys/rotate', {
          cookie: viewer.cookie,
          origin: originOf(t),
          csrf: viewer.csrf,
        });
      expect((await rotate()).status).toBe(200);
      await operators.updateOperator(ctx, email, { role: 'viewer' });
      expectProblem(await rotate(), 403, insufficientScope('keys:write'), {
        'www-authenticate': 'Bearer error="insufficient_scope", scope="keys:write"',
      });
      const demoted = await send(t, 'GET', '/console/api/session', { cookie: viewer.cookie });
      expect(demoted.body.scopes).toEqual(VIEWER_SCOPES);
    });
  });

  describe('enrollment', () => {
    const lookup = (token: string, origin = originOf(t)) =>
      send(t, 'POST', '/console/api/enrollment/lookup', { origin, body: { token } });
    const enroll = (token: string, password: string) =>
      send(t, 'POST', '/console/api/enrollment', { origin: originOf(t), body: { token, password } });

    it('a link works once; a second use, an expired link and a token of no link are refused', async () => {
      const email = 'enroll@example.com';
      const added = await operators.addOperator(ctxOf(t), { email, role: 'viewer' });
      const token = linkToken(added.url);
      expect(added.url).toBe(`${t.url}/console/enroll#token=${token}`);
      const looked = await lookup(token);
      expect(looked.status).toBe(200);
      expect(looked.body).toEqual({ email, role: 'viewer', expires_at: added.expiresAt });
      expect(Date.parse(added.expiresAt) - Date.now()).toBeGreaterThan(24 * 3600_000 - 60_000);

      // Too short a password: refused with the field at fault, and the link still works.
      const short = await enroll(token, 'elevenchars');
      expectProblem(short, 400, {
        type: 'urn:tessera:problem:invalid_field',
        title: 'Bad Request',
        status: 400,
        detail: 'password must have at least 12 characters',
        errors: [{ pointer: '/password', detail: 'password must have at least 12 characters' }],
      });
      expect((await lookup(token)).status).toBe(200);

      const done = await enroll(token, PASSWORD);
      expect(done.status).toBe(200);
      expect(done.body).toEqual({ email, role: 'viewer' });
      expect(done.headers.getSetCookie()).toEqual([]);
      const [enrolled] = await auditOf(t, 'operator.enrolled');
      expect(enrolled).toMatchObject({
        actor: `operator:${email}`,
        target: added.operator.id,
        source: '127.0.0.1',
      });

      // Used: it is dead, and the password it set is the one that works.
      expectProblem(await lookup(token), 400, ENROLLMENT_INVALID);
      expectProblem(await enroll(token, 'another long password'), 400, ENROLLMENT_INVALID);
      expectProblem(await login(t, email, 'another long password'), 401, INVALID_LOGIN);
      await openSession(t, email);

      // Tokens of no link.
      for (const bad of ['', randomBytes(32).toString('base64url'), 'x'.repeat(256)]) {
        expectProblem(await lookup(bad), 400, ENROLLMENT_INVALID);
        expectProblem(await enroll(bad, PASSWORD), 400, ENROLLMENT_INVALID);
      }
    });

    it('a link older than 24 hours is refused, and sets no password', async () => {
      const email = 'late@example.com';
      const yesterday = ctxOf(t, () => Date.now() - 25 * 3600_000);
      const added = await operators.addOperator(yesterday, { email, role: 'admin' });
      expect(Date.parse(added.expiresAt)).toBeLessThan(Date.now() - 3599_000);
      const token = linkToken(added.url);
      expectProblem(await lookup(token), 400, ENROLLMENT_INVALID);
      expectProblem(await enroll(token, PASSWORD), 400, ENROLLMENT_INVALID);
      expect((await operators.getOperator(ctxOf(t), email)).enrolled).toBe(false);
      expectProblem(await login(t, email), 401, INVALID_LOGIN);
    });

    it('a reset kills the old link and the old password, and ends every session; the new link works', async () => {
      const email = 'reset@example.com';
      const ctx = ctxOf(t);
      const first = await operators.addOperator(ctx, { email, role: 'admin' });
      // A reset before the first link is used: that link dies.
      const second = await operators.resetOperator(ctx, email);
      expectProblem(await lookup(linkToken(first.url)), 400, ENROLLMENT_INVALID);
      expectProblem(await enroll(linkToken(first.url), PASSWORD), 400, ENROLLMENT_INVALID);
      expect((await enroll(linkToken(second.url), PASSWORD)).status).toBe(200);
      const sessionsOpen = [await openSession(t, email), await openSession(t, email)];

      const third = await operators.resetOperator(ctx, email);
      expect(third.operator).toMatchObject({ enrolled: false, enabled: true });
      for (const session of sessionsOpen) {
        expectProblem(
          await send(t, 'GET', '/console/api/session', { cookie: session.cookie }),
          401,
          SESSION_ENDED,
          {
            'www-authenticate': SESSION_ENDED_CHALLENGE,
          },
        );
        expectProblem(
          await send(t, 'GET', '/admin/v1/keys', { cookie: session.cookie }),
          401,
          SESSION_ENDED,
          {
            'www-authenticate': SESSION_ENDED_CHALLENGE,
          },
        );
        expect(await t.server.runtime.store.findOperatorSession(sha256(session.token))).toBeUndefined();
      }
      // The old password no longer works, nor the link that set it.
      expectProblem(await login(t, email), 401, INVALID_LOGIN);
      expectProblem(await enroll(linkToken(second.url), 'yet another password'), 400, ENROLLMENT_INVALID);
      const [failed] = await auditOf(t, 'operator.login_failed');
      expect(failed).toMatchObject({ actor: `operator:${email}`, reason: 'not enrolled' });

      const newPassword = 'a brand new pass phrase';
      expect((await enroll(linkToken(third.url), newPassword)).status).toBe(200);
      expectProblem(await login(t, email), 401, INVALID_LOGIN);
      await openSession(t, email, newPassword);
    });
  });

  describe('a disabled operator', () => {
    it("is shut out within a second: their session's next request is 401 session_ended", async () => {
      const email = 'disabled@example.com';
      await addEnrolled(t, email, 'admin');
      const session = await openSession(t, email);
      // Another session of theirs, in another browser, that makes no request while they are disabled.
      const quiet = await openSession(t, email);
      const list = () => send(t, 'GET', '/admin/v1/clients', { cookie: session.cookie });
      expect((await list()).status).toBe(200);

      const started = Date.now();
      await operators.updateOperator(ctxOf(t), email, { enabled: false });
      // Ended by the disabling itself, not left for a request to find: gone from the store at once.
      expect(await t.server.runtime.store.findOperatorSession(sha256(quiet.token))).toBeUndefined();
      await expectEndedWithinASecond(list, started);
      expectProblem(
        await send(t, 'GET', '/console/api/session', { cookie: session.cookie }),
        401,
        SESSION_ENDED,
        {
          'www-authenticate': SESSION_ENDED_CHALLENGE,
        },
      );
      const page = await send(t, 'GET', '/console/keys', { cookie: session.cookie });
      expect(page.status).toBe(302);
      expect(page.headers.get('location')).toBe('/console/login?next=%2Fconsole%2Fkeys');

      // The right password no longer opens a session.
      expectProblem(await login(t, email), 401, INVALID_LOGIN);
      const [failed] = await auditOf(t, 'operator.login_failed');
      expect(failed).toMatchObject({ actor: `operator:${email}`, reason: 'operator disabled' });

      // Enabled again, the old sessions stay ended (the quiet one too): they log in anew.
      await operators.updateOperator(ctxOf(t), email, { enabled: true });
      expectProblem(await list(), 401, SESSION_ENDED, { 'www-authenticate': SESSION_ENDED_CHALLENGE });
      expectProblem(await send(t, 'GET', '/admin/v1/clients', { cookie: quiet.cookie }), 401, SESSION_ENDED, {
        'www-authenticate': SESSION_ENDED_CHALLENGE,
      });
      const fresh = await openSession(t, email);
      expect((await send(t, 'GET', '/admin/v1/clients', { cookie: fresh.cookie })).status).toBe(200);
    });

    it('removed, the same', async () => {
      const email = 'removed@example.com';
      await addEnrolled(t, email, 'viewer');
      const session = await openSession(t, email);
      await operators.removeOperator(ctxOf(t), email);
      expectProblem(await send(t, 'GET', '/admin/v1/keys', { cookie: session.cookie }), 401, SESSION_ENDED, {
        'www-authenticate': SESSION_ENDED_CHALLENGE,
      });
      expect(await t.server.runtime.store.findOperatorSession(sha256(session.token))).toBeUndefined();
    });
  });

  describe('timeouts (the management layer, on a clock of its own)', () => {
    const email = 'clock@example.com';
    const IDLE = 30 * 60_000;
    const MAX = 12 * 3600_000;
    const at = (ms: number) => ctxOf(t, () => ms);
    const stored = async (token: string) => t.server.runtime.store.findOperatorSession(sha256(token));

    beforeAll(async () => {
      await addEnrolled(t, email, 'viewer');
    });

    it('are 30 minutes idle and 12 hours at most by default', () => {
      const policy = t.server.runtime.sessionPolicy;
      expect(policy.idleSeconds * 1000).toBe(IDLE);
      expect(policy.maxSeconds * 1000).toBe(MAX);
    });

    it('a session ends the idle time after its last request (not sooner, at most a minute later), and is deleted', async () => {
      const policy = t.server.runtime.sessionPolicy;
      const T0 = Date.now();
      const opened = await sessions.login(at(T0), policy, { email, password: PASSWORD });
      expect(opened.expiresAt).toBe(T0 + MAX);
      // The session made here is the server's too.
      const cookie = `tessera_session=${opened.token}`;
      expect((await send(t, 'GET', '/console/api/session', { cookie })).status).toBe(200);
      const lastSeen = async () => (await stored(opened.token))!.session.lastSeenAt;
      expect(await lastSeen()).toBe(T0);

      // Used within the minute: kept, last-seen not written.
      expect((await sessions.findSession(at(T0 + 30_000), policy, opened.token))?.operator.email).toBe(email);
      expect(await lastSeen()).toBe(T0);
      expect((await sessions.findSession(at(T0 + 59_999), policy, opened.token))?.operator.email).toBe(email);
      expect(await lastSeen()).toBe(T0);
      // A minute on: written.
      const T1 = T0 + 60_000;
      expect((await sessions.findSession(at(T1), policy, opened.token))?.session.id).toBe(
        sha256(opened.token),
      );
      expect(await lastSeen()).toBe(T1);
      // The operator's last request, 59 s later: not written (less than a minute since the last write).
      const last = T1 + 59_000;
      expect(await sessions.findSession(at(last), policy, opened.token)).toBeDefined();
      expect(await lastSeen()).toBe(T1);
      // Requests the page makes by itself are no activity, however late; the session still counts from `last`:
      // a millisecond short of the idle time after it, it is open.
      expect(await sessions.findSession(at(last + IDLE - 1), policy, opened.token, false)).toBeDefined();
      expect(await lastSeen()).toBe(T1);
      // A minute past the idle time after it, at the latest: gone, and deleted from the store (a clock going
      // back does not revive it).
      expect(
        await sessions.findSession(at(last + IDLE + 60_000), policy, opened.token, false),
      ).toBeUndefined();
      expect(await stored(opened.token)).toBeUndefined();
      expect(await sessions.findSession(at(T1), policy, opened.token)).toBeUndefined();
      expectProblem(await send(t, 'GET', '/console/api/session', { cookie }), 401, SESSION_ENDED, {
        'www-authenticate': SESSION_ENDED_CHALLENGE,
      });
    });

    it('a session never used after the login ends the idle time after it, at most a minute later', async () => {
      const policy = t.server.runtime.sessionPolicy;
      const T0 = Date.now();
      const opened = await sessions.login(at(T0), policy, { email, password: PASSWORD });
      expect(await sessions.findSession(at(T0 + IDLE - 1), policy, opened.token, false)).toBeDefined();
      expect(await sessions.findSession(at(T0 + IDLE + 60_000), policy, opened.token, false)).toBeUndefined();
      expect(await stored(opened.token)).toBeUndefined();
    });

    it('a session used all along ends 12 hours after the login', async () => {
      const policy = t.server.runtime.sessionPolicy;
      const T0 = Date.now();
      const opened = await sessions.login(at(T0), policy, { email, password: PASSWORD });
      // Used every 29 minutes: never idle, and each use moves last-seen.
      for (let now = T0 + 29 * 60_000; now < T0 + MAX; now += 29 * 60_000) {
        expect(
          await sessions.findSession(at(now), policy, opened.token),
          `at +${(now - T0) / 60_000} min`,
        ).toBeDefined();
        expect((await stored(opened.token))!.session.lastSeenAt).toBe(now);
      }
      expect(await sessions.findSession(at(T0 + MAX - 1), policy, opened.token)).toBeDefined();
      expect(await sessions.findSession(at(T0 + MAX), policy, opened.token)).toBeUndefined();
      expect(await stored(opened.token)).toBeUndefined();
    });

    it('a login prunes the sessions that are over, and none that is not', async () => {
      const policy = t.server.runtime.sessionPolicy;
      const T0 = Date.now();
      const idle = await sessions.login(at(T0), policy, { email, password: PASSWORD });
      // A login a millisecond short of the idle time: the idle session stays.
      await sessions.login(at(T0 + IDLE - 1), policy, { email, password: PASSWORD });
      expect(await stored(idle.token)).toBeDefined();
      expect(await sessions.findSession(at(T0 + IDLE - 1), policy, idle.token, false)).toBeDefined();
      // A login once it is over: it goes, the new one stays.
      const later = await sessions.login(at(T0 + IDLE + 60_001), policy, { email, password: PASSWORD });
      expect(await stored(idle.token)).toBeUndefined();
      expect(await stored(later.token)).toBeDefined();
    });
  });

  describe('a wrong email and a wrong password', () => {
    it('answer the same; the audit trail tells them apart', async () => {
      const email = 'same@example.com';
      const operator = await addEnrolled(t, email, 'admin');
      const pending = await operators.addOperator(ctxOf(t), { email: 'pending@example.com', role: 'admin' });
      const off = await addEnrolled(t, 'off@example.com', 'admin');
      await operators.updateOperator(ctxOf(t), 'off@example.com', { enabled: false });
      const since = new Date().toISOString();

      const wrongPassword = await login(t, email, 'not the right password');
      const wrongEmail = await login(t, 'nobody@example.com', PASSWORD);
      const notEnrolled = await login(t, 'pending@example.com', PASSWORD);
      const disabled = await login(t, 'off@example.com', PASSWORD);
      const caseOfEmail = await login(t, 'SAME@Example.com', 'not the right password');
      for (const answer of [wrongPassword, wrongEmail, notEnrolled, disabled, caseOfEmail]) {
        expectProblem(answer, 401, INVALID_LOGIN, { 'content-security-policy': CSP });
        expect(headersOf(answer)).toEqual(headersOf(wrongPassword));
        expect(answer.body).toEqual(wrongPassword.body);
      }
      // Same length, same bytes: nothing in the answer says which it was.
      expect(wrongEmail.headers.get('content-length')).toBe(wrongPassword.headers.get('content-length'));

      const events = (
        await t.server.runtime.store.queryAuditEvents({
          types: ['operator.login_failed'],
          since,
          limit: 100,
        })
      ).reverse();
      expect(
        events.map((e) => ({ actor: e.actor, target: e.target, reason: e.reason, source: e.source })),
      ).toEqual([
        { actor: `operator:${email}`, target: operator.id, reason: 'wrong password', source: '127.0.0.1' },
        { actor: null, target: null, reason: 'unknown email', source: '127.0.0.1' },
        {
          actor: 'operator:pending@example.com',
          target: pending.operator.id,
          reason: 'not enrolled',
          source: '127.0.0.1',
        },
        {
          actor: 'operator:off@example.com',
          target: off.id,
          reason: 'operator disabled',
          source: '127.0.0.1',
        },
        { actor: `operator:${email}`, target: operator.id, reason: 'wrong password', source: '127.0.0.1' },
      ]);
      // What was typed as an unknown email is recorded nowhere.
      expect(JSON.stringify(events)).not.toContain('nobody@example.com');
      expect(
        await t.server.runtime.store.queryAuditEvents({ types: ['operator.login'], since, limit: 10 }),
      ).toEqual([]);
    });
  });

  describe('scopes of the session', () => {
    it('a viewer has the four read scopes, an admin all ten', async () => {
      await addEnrolled(t, 'scopes-viewer@example.com', 'viewer');
      await addEnrolled(t, 'scopes-admin@example.com', 'admin');
      const viewer = await openSession(t, 'scopes-viewer@example.com');
      const admin = await openSession(t, 'scopes-admin@example.com');
      expect(viewer.answer.body.scopes).toEqual([
        'audiences:read',
        'clients:read',
        'keys:read',
        'audit:read',
      ]);
      expect(admin.answer.body.scopes).toEqual([
        'audiences:read',
        'audiences:write',
        'clients:read',
        'clients:write',
        'keys:read',
        'keys:write',
        'audit:read',
        'operators:read',
        'operators:write',
        // For resource servers (a client's), but an admin holds every scope: it may give it.
        'tokens:introspect',
      ]);
      for (const [session, scopes, role] of [
        [viewer, VIEWER_SCOPES, 'viewer'],
        [admin, [...ADMIN_SCOPES], 'admin'],
      ] as const) {
        const read = await send(t, 'GET', '/console/api/session', { cookie: session.cookie });
        expect(read.status).toBe(200);
        expect(read.body.scopes).toEqual(scopes);
        expect(read.body.operator.role).toBe(role);
        expect(read.body.csrf_token).toBe(session.csrf);
      }
      // The admin reads the operators; the viewer does not.
      expect((await send(t, 'GET', '/admin/v1/operators', { cookie: admin.cookie })).status).toBe(200);
      expect((await send(t, 'GET', '/admin/v1/operators', { cookie: viewer.cookie })).status).toBe(403);
    });
  });

  it('keeps no password, no session cookie and no link token in clear, and shows no hash', async () => {
    expect(inClear.size).toBeGreaterThan(20);
    await t.server.runtime.audit.flush();
    const files = readdirSync(t.dataDir, { recursive: true, withFileTypes: true }).filter((f) => f.isFile());
    expect(files.map((f) => f.name)).toContain('tessera.db');
    for (const file of files) {
      const bytes = readFileSync(path.join(file.parentPath, file.name));
      for (const secret of inClear)
        expect(bytes.includes(secret), `${file.name} holds ${secret}`).toBe(false);
    }
    const admin = await openSession(t, 'scopes-admin@example.com');
    const list = await send(t, 'GET', '/admin/v1/operators', { cookie: admin.cookie });
    expect(list.status).toBe(200);
    for (const item of list.body.items as object[])
      expect(Object.keys(item).sort()).toEqual(
        [
          'id',
          'email',
          'role',
          'enabled',
          'enrolled',
          'enrollment_expires_at',
          'last_login_at',
          'created_at',
          'updated_at',
        ].sort(),
      );
  });
});

describe('the console on an https issuer', () => {
  let t: TestServer;

  beforeAll(async () => {
    // Served over http here (only the issuer's scheme decides the cookie).
    const port = await freePort();
    t = await startTestServer({ TESSERA_PORT: String(port), TESSERA_ISSUER: `https://127.0.0.1:${port}` });
    await addEnrolled(t, 'secure@example.com', 'admin');
  });
  afterAll(async () => {
    await t?.close();
  });

  it('the cookie is __Host- prefixed and Secure; its plain name is not read', async () => {
    const answer = await login(t, 'secure@example.com');
    expect(answer.status).toBe(200);
    const [setCookie, ...more] = answer.headers.getSetCookie();
    expect(more).toEqual([]);
    expect(setCookie).toMatch(
      /^__Host-tessera_session=[A-Za-z0-9_-]{43}; Max-Age=43200; Path=\/; HttpOnly; SameSite=Strict; Secure$/,
    );
    const token = /^__Host-tessera_session=([^;]+);/.exec(setCookie!)![1]!;
    const csrf = answer.body.csrf_token as string;
    expect(
      (await send(t, 'GET', '/console/api/session', { cookie: `__Host-tessera_session=${token}` })).status,
    ).toBe(200);
    // The plain name is another cookie (one a sibling host could have set): no session.
    expectProblem(
      await send(t, 'GET', '/console/api/session', { cookie: `tessera_session=${token}` }),
      401,
      NO_SESSION,
    );
    // The http origin of the same host is not the issuer's.
    const origin = `https://127.0.0.1:${t.config.port}`;
    expectProblem(
      await send(t, 'DELETE', '/console/api/session', {
        cookie: `__Host-tessera_session=${token}`,
        origin: `http://127.0.0.1:${t.config.port}`,
        csrf,
      }),
      403,
      originMismatch(origin),
    );
    expectProblem(
      await login(t, 'secure@example.com', PASSWORD, `http://127.0.0.1:${t.config.port}`),
      403,
      originMismatch(origin),
    );

    const logout = await send(t, 'DELETE', '/console/api/session', {
      cookie: `__Host-tessera_session=${token}`,
      origin,
      csrf,
    });
    expect(logout.status).toBe(204);
    expect(logout.headers.getSetCookie()).toEqual([
      '__Host-tessera_session=; Max-Age=0; Path=/; HttpOnly; SameSite=Strict; Secure',
    ]);
    expectProblem(
      await send(t, 'GET', '/console/api/session', { cookie: `__Host-tessera_session=${token}` }),
      401,
      SESSION_ENDED,
      { 'www-authenticate': SESSION_ENDED_CHALLENGE },
    );
  });
});

describe('login throttling', () => {
  let t: TestServer;

  beforeAll(async () => {
    t = await startTestServer({ TESSERA_ATTEMPTS_LOGIN_MAX: '3', TESSERA_ATTEMPTS_LOGIN_SOURCE_MAX: '8' });
    await addEnrolled(t, 'known@example.com', 'admin');
    await addEnrolled(t, 'other@example.com', 'viewer');
  });
  afterAll(async () => {
    await t?.close();
  });

  it('per email: three failures block it, even with the right password, known or not; per address after eight', async () => {
    // 1-3: three wrong passwords for a known email, then the right one is refused.
    for (let i = 0; i < 3; i++)
      expectProblem(await login(t, 'known@example.com', 'wrong password!'), 401, INVALID_LOGIN);
    const known = await login(t, 'known@example.com');
    // 4-6: the same for an email nobody has.
    for (let i = 0; i < 3; i++)
      expectProblem(await login(t, 'ghost@example.com', 'wrong password!'), 401, INVALID_LOGIN);
    const unknown = await login(t, 'ghost@example.com');
    for (const answer of [known, unknown]) {
      expectProblem(answer, 429, LOGIN_THROTTLED, { 'content-security-policy': CSP });
      const wait = Number(answer.headers.get('retry-after'));
      expect(wait).toBeGreaterThan(0);
      expect(wait).toBeLessThanOrEqual(900);
    }
    // Once blocked, a known email and an unknown one answer alike (but for the seconds left to wait).
    const { 'retry-after': _knownWait, ...knownHeaders } = headersOf(known);
    const { 'retry-after': _unknownWait, ...unknownHeaders } = headersOf(unknown);
    expect(knownHeaders).toEqual(unknownHeaders);
    expect(known.body).toEqual(unknown.body);
    // The email as typed in another case is the same email.
    expectProblem(await login(t, ' Known@Example.COM '), 429, LOGIN_THROTTLED);

    // Another email from the same address still logs in.
    const other = await openSession(t, 'other@example.com');
    expect(other.answer.body.operator.email).toBe('other@example.com');
    // 7-8: the address reaches its limit; then every email from it is refused, the right password too.
    expectProblem(await login(t, 'third@example.com', 'wrong password!'), 401, INVALID_LOGIN);
    expectProblem(await login(t, 'fourth@example.com', 'wrong password!'), 401, INVALID_LOGIN);
    expectProblem(await login(t, 'other@example.com'), 429, LOGIN_THROTTLED);
    expectProblem(await login(t, 'fifth@example.com', 'wrong password!'), 429, LOGIN_THROTTLED);

    // Eight failures audited one by one; the blocked attempts, answered from memory, once an address and minute
    // (without looking the email up: no actor, no target); no session was opened by them.
    const failed = await auditOf(t, 'operator.login_failed');
    const blocked = failed.filter((e) => e.reason === 'blocked: too many failed logins');
    expect(failed.length - blocked.length).toBe(8);
    expect(blocked.length).toBeGreaterThanOrEqual(1);
    expect(new Set(blocked.map((e) => e.at.slice(0, 16))).size).toBe(blocked.length);
    for (const e of blocked) expect(e).toMatchObject({ actor: null, target: null, source: '127.0.0.1' });
    const logins = await auditOf(t, 'operator.login');
    expect(logins.map((e) => e.actor)).toEqual(['operator:other@example.com']);
    // A session opened before the block goes on working.
    expect((await send(t, 'GET', '/console/api/session', { cookie: other.cookie })).status).toBe(200);
  });
});

describe('login throttling behind a proxy (addresses from X-Forwarded-For)', () => {
  let t: TestServer;
  const from = (address: string, email: string, password = PASSWORD) =>
    send(t, 'POST', '/console/api/session', {
      origin: originOf(t),
      body: { email, password },
      headers: { 'x-forwarded-for': address },
    });

  beforeAll(async () => {
    t = await startTestServer({
      TESSERA_TRUST_PROXY: 'loopback',
      TESSERA_ATTEMPTS_LOGIN_MAX: '3',
      TESSERA_ATTEMPTS_LOGIN_SOURCE_MAX: '4',
    });
    await addEnrolled(t, 'roaming@example.com', 'admin');
    await addEnrolled(t, 'elsewhere@example.com', 'viewer');
  });
  afterAll(async () => {
    await t?.close();
  });

  it('an email is blocked by failures from any address; an address by failures for any emails', async () => {
    // Three failures for one email, each from another address: the email is blocked from a fourth.
    for (const address of ['198.51.100.1', '198.51.100.2', '198.51.100.3'])
      expectProblem(await from(address, 'roaming@example.com', 'wrong password!'), 401, INVALID_LOGIN);
    const blocked = await from('198.51.100.4', 'roaming@example.com');
    expectProblem(blocked, 429, LOGIN_THROTTLED);
    expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(0);
    // None of those addresses is blocked for another email.
    for (const address of ['198.51.100.1', '198.51.100.4'])
      expect((await from(address, 'elsewhere@example.com')).status).toBe(200);
    // Newest first: the blocked attempt from the fourth address (recorded once, with no actor), the three failures.
    const failed = await auditOf(t, 'operator.login_failed');
    expect(failed.map((e) => [e.source, e.actor, e.reason]).reverse()).toEqual([
      ['198.51.100.1', 'operator:roaming@example.com', 'wrong password'],
      ['198.51.100.2', 'operator:roaming@example.com', 'wrong password'],
      ['198.51.100.3', 'operator:roaming@example.com', 'wrong password'],
      ['198.51.100.4', null, 'blocked: too many failed logins'],
    ]);

    // Four failures from one address, each for another email: that address is blocked for every email.
    for (const email of ['a@example.com', 'b@example.com', 'c@example.com', 'd@example.com'])
      expectProblem(await from('203.0.113.7', email, 'wrong password!'), 401, INVALID_LOGIN);
    expectProblem(await from('203.0.113.7', 'elsewhere@example.com'), 429, LOGIN_THROTTLED);
    expectProblem(await from('203.0.113.7', 'e@example.com', 'wrong password!'), 429, LOGIN_THROTTLED);
    // Another address is not.
    expect((await from('203.0.113.8', 'elsewhere@example.com')).status).toBe(200);
  });
});

/**
 * Logins made at once are counted before their passwords are hashed (a hash takes ~150 ms, one at a time): a
 * burst never checks more passwords than the limit allows. Counted in memory, and in Redis (an INCR each).
 */
for (const shared of [false, true])
  describe(`login throttling of logins made at once (${shared ? 'in Redis' : 'in memory'})`, () => {
    let t: TestServer;
    let redis: Redis | undefined;
    const prefix = testPrefix();
    /** The count of an email's failed logins in Redis (undefined in memory). */
    const counted = async (email: string) => redis?.get(`${prefix}:fail:login:${email}`);

    beforeAll(async () => {
      t = await startTestServer({
        TESSERA_ATTEMPTS_LOGIN_MAX: '3',
        ...(shared ? { TESSERA_REDIS_URL: REDIS_URL, TESSERA_REDIS_PREFIX: prefix } : {}),
      });
      if (shared) redis = new Redis(REDIS_URL);
      await addEnrolled(t, 'burst@example.com', 'admin');
      await addEnrolled(t, 'steady@example.com', 'viewer');
    });
    afterAll(async () => {
      await t?.close();
      redis?.disconnect();
      if (shared) await dropPrefix(prefix);
    });

    it('12 wrong logins at once for one email, with a limit of 3: 3 passwords checked, 9 refused with Retry-After', async () => {
      const answers = await Promise.all(
        Array.from({ length: 12 }, () => login(t, 'burst@example.com', 'wrong password!')),
      );
      const refused = answers.filter((a) => a.status === 429);
      expect(answers.map((a) => a.status).sort()).toEqual([
        ...Array<number>(3).fill(401),
        ...Array<number>(9).fill(429),
      ]);
      for (const answer of answers.filter((a) => a.status === 401)) expectProblem(answer, 401, INVALID_LOGIN);
      for (const answer of refused) {
        expectProblem(answer, 429, LOGIN_THROTTLED, { 'content-security-policy': CSP });
        const wait = Number(answer.headers.get('retry-after'));
        expect(wait).toBeGreaterThan(0);
        expect(wait).toBeLessThanOrEqual(900);
      }
      // One password checked per failure the audit trail tells of; the refused ones, answered before any hash or
      // store lookup, recorded once an address and minute (anonymously, no target).
      const failed = await auditOf(t, 'operator.login_failed');
      expect(failed.filter((e) => e.reason === 'wrong password')).toHaveLength(3);
      const blocked = failed.filter((e) => e.reason === 'blocked: too many failed logins');
      expect(blocked.length).toBeGreaterThanOrEqual(1);
      expect(blocked.length + 3).toBe(failed.length);
      expect(new Set(blocked.map((e) => e.at.slice(0, 16))).size).toBe(blocked.length);
      for (const e of blocked) expect(e).toMatchObject({ actor: null, target: null });
      // Blocked now, the right password too; three failures counted (the one that blocked, by its block).
      expectProblem(await login(t, 'burst@example.com'), 429, LOGIN_THROTTLED);
      if (shared) expect(await counted('burst@example.com')).toBe('2');
      // The refused logins were no failures of the address: another email from it logs in.
      expect((await openSession(t, 'steady@example.com')).answer.status).toBe(200);
      expect(await auditOf(t, 'operator.login')).toHaveLength(1);
    });

    it('a right password after two wrong ones logs in and gives its place back: the third failure blocks, not the second', async () => {
      for (let i = 0; i < 2; i++)
        expectProblem(await login(t, 'steady@example.com', 'wrong password!'), 401, INVALID_LOGIN);
      expect((await openSession(t, 'steady@example.com')).answer.status).toBe(200);
      if (shared) expect(await counted('steady@example.com')).toBe('2');
      // Had the login kept its place, this one would be refused unchecked (429).
      expectProblem(await login(t, 'steady@example.com', 'wrong password!'), 401, INVALID_LOGIN);
      const blocked = await login(t, 'steady@example.com');
      expectProblem(blocked, 429, LOGIN_THROTTLED);
      expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(0);
      const steady = (await auditOf(t, 'operator.login_failed')).filter(
        (e) => e.actor === 'operator:steady@example.com',
      );
      expect(steady.map((e) => e.reason)).toEqual(Array(3).fill('wrong password'));
    });
  });

describe('two instances on one PostgreSQL', { timeout: 60_000 }, () => {
  let db: TestDatabase;
  let a: TestServer;
  let b: TestServer;
  const ISSUER = 'https://auth.tessera.test';

  beforeAll(async () => {
    db = await createTestDatabase();
    const url = await db.freshSchema();
    const shared = {
      TESSERA_DATABASE_URL: url,
      TESSERA_ISSUER: ISSUER,
      TESSERA_MASTER_KEY: randomBytes(32).toString('base64'),
    };
    a = await startTestServer(shared);
    b = await startTestServer(shared);
  }, 60_000);
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await db?.drop();
  });

  it("a session opened on A ends on A within a second of the operator's disabling through B's admin API", async () => {
    const ctx = ctxOf(b);
    await addEnrolled(b, 'ops-a@example.com', 'admin');
    await addEnrolled(b, 'boss-b@example.com', 'admin');
    const onA = await openSession(a, 'ops-a@example.com', PASSWORD, baseOf(a));
    const onB = await openSession(b, 'boss-b@example.com', PASSWORD, baseOf(b));
    expect(onA.cookie).toMatch(/^__Host-tessera_session=/);
    const list = () => send(a, 'GET', '/admin/v1/clients', { cookie: onA.cookie });
    expect((await list()).status).toBe(200);
    // A session is known to every instance.
    expect((await send(b, 'GET', '/console/api/session', { cookie: onA.cookie })).status).toBe(200);

    const operator = await operators.getOperator(ctx, 'ops-a@example.com');
    const started = Date.now();
    const patched = await send(b, 'PATCH', `/admin/v1/operators/${operator.id}`, {
      cookie: onB.cookie,
      origin: ISSUER,
      csrf: onB.csrf,
      body: { enabled: false },
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ id: operator.id, email: 'ops-a@example.com', enabled: false });
    await expectEndedWithinASecond(list, started);
    expectProblem(await send(b, 'GET', '/admin/v1/clients', { cookie: onA.cookie }), 401, SESSION_ENDED, {
      'www-authenticate': SESSION_ENDED_CHALLENGE,
    });
    const [event] = await auditOf(a, 'operator.updated');
    expect(event).toMatchObject({
      actor: 'operator:boss-b@example.com',
      target: operator.id,
      changes: { enabled: { from: true, to: false } },
    });
    // B's admin is not affected.
    expect((await send(a, 'GET', '/admin/v1/clients', { cookie: onB.cookie })).status).toBe(200);
  });

  it("disabled through the management layer on B's store: refused on A within a second", async () => {
    await addEnrolled(b, 'ops-c@example.com', 'viewer');
    const onA = await openSession(a, 'ops-c@example.com', PASSWORD, baseOf(a));
    const list = () => send(a, 'GET', '/admin/v1/keys', { cookie: onA.cookie });
    expect((await list()).status).toBe(200);
    const started = Date.now();
    await operators.updateOperator(ctxOf(b), 'ops-c@example.com', { enabled: false });
    await waitFor(async () => (await list()).status === 401, 1000, 20);
    expect(Date.now() - started).toBeLessThan(1000);
    expectProblem(await list(), 401, SESSION_ENDED, { 'www-authenticate': SESSION_ENDED_CHALLENGE });
  });
});
