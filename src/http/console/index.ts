import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Type, type Static } from 'typebox';
import { ROLE_SCOPES } from '../../management/builtin.js';
import { operators, sessions, views } from '../../management/index.js';
import type { Operator } from '../../store/types.js';
import { depthLimited } from '../json-body.js';
import { answerWithProblems, asProblem, CONSOLE_CHALLENGE, noSuchResource, problem } from '../problem.js';
import { encodingFor, type Asset } from './assets.js';
import type { ConsoleSessions } from './session.js';

const CONSOLE_PREFIX = '/console';

/**
 * The console's policy: its own files only (no CDN, nothing inline: script-src 'self' refuses inline scripts
 * and style-src 'self' style attributes), its own API only, never framed.
 */
const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/** Pages anyone may load: the others redirect to the login page without a session. */
const PUBLIC_PAGES = new Set(['login', 'enroll']);

/** Console request bodies are a login or a password: a few KiB is plenty. */
const BODY_LIMIT = 16 * 1024;

export interface ConsoleDeps {
  sessions: ConsoleSessions;
  /** The built files; undefined when the console was not built (every page then says so). */
  assets: Map<string, Asset> | undefined;
}

const Login = Type.Object(
  { email: Type.String({ maxLength: 1024 }), password: Type.String({ maxLength: 4096 }) },
  { additionalProperties: false },
);
const EnrollmentLookup = Type.Object(
  { token: Type.String({ maxLength: 256 }) },
  { additionalProperties: false },
);
const Enrollment = Type.Object(
  { token: Type.String({ maxLength: 256 }), password: Type.String({ maxLength: 4096 }) },
  { additionalProperties: false },
);

/** What the console's pages learn of their session: who, what the role allows, and the anti-CSRF token. */
const sessionJson = (operator: Operator, csrf: string, expiresAt?: number) => ({
  operator: views.operatorJson(operator),
  scopes: ROLE_SCOPES[operator.role],
  csrf_token: csrf,
  ...(expiresAt === undefined ? {} : { expires_at: new Date(expiresAt).toISOString() }),
});

function sendAsset(request: FastifyRequest, reply: FastifyReply, asset: Asset): FastifyReply {
  reply
    .header('content-type', asset.type)
    .header('etag', asset.etag)
    .header('vary', 'accept-encoding')
    .header('cache-control', asset.immutable ? 'public, max-age=31536000, immutable' : 'no-cache');
  if (request.headers['if-none-match'] === asset.etag) return reply.code(304).send();
  const { body, encoding } = encodingFor(asset, request.headers['accept-encoding']);
  if (encoding) reply.header('content-encoding', encoding);
  return reply.send(body);
}

/**
 * The web console (docs/management.md, "Web console") under /console: its built pages and files, and its session
 * API (login, logout, enrollment). Everything else the pages do goes through the admin API with the session
 * cookie, so the console can do exactly what the API can, under the same rules.
 */
export function consoleRoutes(app: FastifyInstance, deps: ConsoleDeps): void {
  const { sessions: web, assets } = deps;
  void app.register(
    async (scope) => {
      const api = scope.withTypeProvider<TypeBoxTypeProvider>();
      // The rule for every JSON body, as in the admin API: at most 32 levels (docs/management.md).
      const json = depthLimited(scope.getDefaultJsonParser('error', 'error'));
      scope.removeAllContentTypeParsers();
      scope.addContentTypeParser('application/json', { parseAs: 'string', bodyLimit: BODY_LIMIT }, json);

      // After the server's own headers (a parent's onSend runs first): the console's policy replaces the API's.
      scope.addHook('onSend', async (_request, reply, payload) => {
        reply.header('content-security-policy', CONSOLE_CSP);
        reply.header('cross-origin-opener-policy', 'same-origin');
        reply.header('cross-origin-resource-policy', 'same-origin');
        return payload;
      });
      answerWithProblems(scope, 'the console');

      // --- the session API ---

      api.get('/api/session', async (request, reply) => {
        const caller = await web.caller(request);
        if (!caller)
          throw problem(
            401,
            'no_session',
            'no console session: log in first',
            {},
            { 'www-authenticate': CONSOLE_CHALLENGE },
          );
        return reply
          .header('cache-control', 'no-store')
          .send(sessionJson(caller.operator, sessions.csrfToken(web.policy, caller.token), caller.expiresAt));
      });
      api.post('/api/session', { schema: { body: Login } }, async (request, reply) => {
        // A login form on another site must not log the browser in (login CSRF).
        web.checkOrigin(request);
        const { email, password } = request.body as Static<typeof Login>;
        const opened = await sessions.login(web.context(request), web.policy, { email, password });
        return reply
          .header('set-cookie', web.cookie.set(opened.token, web.policy.maxSeconds))
          .header('cache-control', 'no-store')
          .send(sessionJson(opened.operator, opened.csrf, opened.expiresAt));
      });
      api.delete('/api/session', async (request, reply) => {
        const token = web.token(request);
        if (token !== undefined) {
          // Checks the Origin and the anti-CSRF token (a page elsewhere cannot log anyone out); a session that
          // has already ended is no error: the cookie goes all the same.
          try {
            await web.caller(request);
          } catch (error) {
            if (asProblem(error)?.problem.status !== 401) throw error;
          }
          await sessions.logout(web.context(request), web.policy, token);
        }
        return reply.header('set-cookie', web.cookie.clear()).code(204).send();
      });

      api.post('/api/enrollment/lookup', { schema: { body: EnrollmentLookup } }, async (request) => {
        web.checkOrigin(request);
        const { token } = request.body as Static<typeof EnrollmentLookup>;
        const operator = await operators.lookupEnrollment(web.context(request), token);
        return { email: operator.email, role: operator.role, expires_at: operator.enrollmentExpiresAt };
      });
      api.post('/api/enrollment', { schema: { body: Enrollment } }, async (request) => {
        web.checkOrigin(request);
        const { token, password } = request.body as Static<typeof Enrollment>;
        const operator = await operators.enroll(web.context(request), token, password);
        return { email: operator.email, role: operator.role };
      });

      // --- files and pages ---

      scope.get('/assets/*', async (request, reply) => {
        const name = `assets/${(request.params as { '*': string })['*']}`;
        const asset = assets?.get(name);
        if (!asset) throw problem(404, 'not_found', `no such file: ${name}`);
        return sendAsset(request, reply, asset);
      });

      const page = async (request: FastifyRequest, reply: FastifyReply) => {
        const rest = ((request.params as { '*'?: string })['*'] ?? '').replace(/\/+$/, '');
        if (rest === 'api' || rest.startsWith('api/')) throw noSuchResource(request);
        // A file at the top of the build (an icon) is served as it is.
        const file = assets?.get(rest);
        if (file && rest !== 'index.html') return sendAsset(request, reply, file);
        const index = assets?.get('index.html');
        if (!index) throw problem(503, 'console_not_built', 'the console is not built: run `npm run build`');
        if (!PUBLIC_PAGES.has(rest.split('/')[0]!)) {
          const caller = await web.caller(request).catch(() => undefined);
          if (!caller) {
            // Where the page was, its query included (a search, the audit trail's filters).
            const next = request.url;
            return reply
              .header('cache-control', 'no-store')
              .redirect(`${CONSOLE_PREFIX}/login?next=${encodeURIComponent(next)}`, 302);
          }
        }
        reply.header('content-type', index.type).header('cache-control', 'no-store');
        const { body, encoding } = encodingFor(index, request.headers['accept-encoding']);
        if (encoding) reply.header('content-encoding', encoding).header('vary', 'accept-encoding');
        return reply.send(body);
      };
      scope.get('/', page);
      scope.get('/*', page);
    },
    { prefix: CONSOLE_PREFIX },
  );
}
