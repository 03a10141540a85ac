import swagger from '@fastify/swagger';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Ajv, type Options } from 'ajv';
import addFormats from 'ajv-formats';
import type { Config } from '../../config/index.js';
import type { Store } from '../../store/types.js';
import type { AdminRefusal } from '../../audit/recorder.js';
import {
  AdminAuth,
  asksForNonce,
  challengeForCaller,
  presentedClientId,
  requireScope,
  type AdminAuthDeps,
  type AdminCaller,
} from './auth.js';
import type { AdminGuard } from './route.js';
import type { AdminRouteContext } from './route-context.js';
import { depthLimited } from '../json-body.js';
import { Cursors } from './paging.js';
import { SessionCookie } from '../session-cookie.js';
import { answerWithProblems, type ProblemError } from '../problem.js';
import { applyRoutes } from './routes-apply.js';
import { audienceRoutes } from './routes-audiences.js';
import { auditRoutes } from './routes-audit.js';
import { clientRoutes } from './routes-clients.js';
import { federationRoutes } from './routes-federation.js';
import { importRoutes } from './routes-imports.js';
import { keyRoutes } from './routes-keys.js';
import { operatorRoutes } from './routes-operators.js';
import { secretRoutes } from './routes-secrets.js';
import { statsRoutes } from './routes-stats.js';
import type { AdminScope } from '../../management/builtin.js';

const ADMIN_PREFIX = '/admin/v1';

/** Admin request bodies are small documents; a few hundred KiB leaves room for key sets, and no more. */
const ADMIN_BODY_LIMIT = 256 * 1024;

export interface AdminApiDeps extends Omit<AdminAuthDeps, 'audience' | 'issuer'> {
  config: Config;
  store: Store;
  /** The key that signs list cursors; the same on every instance (derived from the master key). */
  cursorKey: Uint8Array;
  /** Told of every refused call (401, 429, 403): the audit trail sums them per address and minute. */
  refused?: (refusal: Omit<AdminRefusal, 'at'>) => void;
  /** The runtime's clock (ms), for the operations' times (revoked_before, a secret's expiry); the wall clock if left out. */
  now?: () => number;
  /**
   * Brings this process's view of the store (cached clients, revocations, keys) up to the changes just written;
   * awaited before a change's answer is sent, so that what an operator did through this instance is in effect
   * here when the answer arrives. Never rejects.
   */
  catchUp?: () => Promise<void>;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The admin scope a route needs; routes without one need no token (the OpenAPI document). */
    scope?: AdminScope;
    /** The rule of a change that can hand out admin power, checked before the body is validated (route.ts). */
    guard?: AdminGuard;
    /** The management operation (a trace's tessera.operation: client.create, grant.put, …). */
    operation?: string;
  }
  interface FastifyRequest {
    adminCaller?: AdminCaller;
  }
}

function ajv(options: Options): Ajv {
  const instance = new Ajv({ allErrors: true, strict: false, ...options });
  (addFormats as unknown as (a: Ajv) => void)(instance);
  return instance;
}

/**
 * The admin API (docs/management.md) under /admin/v1, in its own encapsulated context: its own JSON parsers and
 * body limit, validation that refuses unknown fields instead of dropping them, problem+json errors, bearer
 * authentication with Tessera's own tokens, and the OpenAPI 3.1 document generated from the route schemas.
 */
export function adminApi(app: FastifyInstance, deps: AdminApiDeps): void {
  const audience = `${deps.config.issuer}${ADMIN_PREFIX}`;
  const auth = new AdminAuth({ ...deps, audience, issuer: deps.config.issuer });
  const cursors = new Cursors(deps.cursorKey);
  void app.register(
    async (admin) => {
      await admin.register(swagger, {
        openapi: {
          openapi: '3.1.0',
          info: {
            title: 'Tessera admin API',
            version: '1',
            description:
              'Manage audiences, clients, grants, signing keys and read the audit trail. Authenticate with an ' +
              `access token of Tessera for the audience ${audience} (client credentials at /oauth/token).`,
          },
          servers: [{ url: audience }],
          components: {
            securitySchemes: {
              bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' },
              dpop: {
                type: 'http',
                scheme: 'dpop',
                description:
                  'A DPoP-bound access token (RFC 9449 §7.1: Authorization: DPoP <token>) with a DPoP proof of each ' +
                  'request (htm, htu, ath), signed by the key of its cnf.jkt. A client registered with ' +
                  'dpop_bound_access_tokens gets only such tokens; a bound token is refused as Bearer.',
              },
              session: {
                type: 'apiKey',
                in: 'cookie',
                name: new SessionCookie(deps.config.issuer).name,
                description:
                  "A console operator's session (POST /console/api/session). Role admin has every scope, role " +
                  'viewer the read scopes but operators:read. A change also needs the Origin of the issuer and ' +
                  "the session's anti-CSRF token in X-CSRF-Token.",
              },
            },
          },
        },
        // Paths relative to the server URL above.
        transform: ({ schema, url }) => ({ schema, url: url.slice(ADMIN_PREFIX.length) || '/' }),
      });

      const bodies = ajv({ coerceTypes: false, removeAdditional: false, useDefaults: true });
      const parameters = ajv({ coerceTypes: true, removeAdditional: false, useDefaults: true });
      admin.setValidatorCompiler(({ schema, httpPart, method }) => {
        const validate = (httpPart === 'body' ? bodies : parameters).compile(schema);
        // A body without a required field (POST /keys/rotate, PUT of a grant) may be left out altogether.
        const optional =
          httpPart === 'body' &&
          (method === 'POST' || method === 'PUT') &&
          ((schema as { required?: unknown[] }).required?.length ?? 0) === 0;
        if (!optional) return validate;
        const maybeEmpty = Object.assign(
          (data: unknown): boolean => {
            if (data === undefined || data === null) return true; // no body (Fastify passes null)
            const valid = validate(data);
            maybeEmpty.errors = validate.errors;
            return valid;
          },
          { errors: validate.errors },
        );
        return maybeEmpty;
      });

      // Nested at most 32 levels (docs/management.md), refused before any hook or validation sees the body.
      const json = depthLimited(admin.getDefaultJsonParser('error', 'error'));
      admin.removeAllContentTypeParsers();
      for (const type of ['application/json', 'application/merge-patch+json'])
        admin.addContentTypeParser(type, { parseAs: 'string', bodyLimit: ADMIN_BODY_LIMIT }, json);

      admin.decorateRequest('adminCaller', undefined);
      // Before the body is read: a caller without a valid token learns nothing of what it sent, and costs no parse.
      admin.addHook('onRequest', async (request) => {
        const scope = request.routeOptions.config.scope;
        if (scope === undefined) return;
        const caller = await auth.authenticate(request);
        request.adminCaller = caller;
        requireScope(caller, scope);
      });
      // Once the body is parsed, before it is validated: a change the rule refuses is a 403 whatever its body.
      admin.addHook('preValidation', async (request) => {
        const guard = request.routeOptions.config.guard;
        if (guard !== undefined) await guard(request, context.context(request));
      });

      // A change answered (2xx): in effect on this instance before the operator hears so. A revoke-tokens, then an
      // introspection at the same instance, finds the token inactive; the other instances follow within a second.
      const catchUp = deps.catchUp;
      if (catchUp !== undefined)
        admin.addHook('onSend', async (request, reply) => {
          if (request.method !== 'GET' && request.method !== 'HEAD' && reply.statusCode < 300)
            await catchUp();
        });

      // RFC 9449 §8-9: with nonces required, every answer to a DPoP caller carries the nonce to use next.
      if (deps.config.dpopNonce)
        admin.addHook('onSend', async (request, reply) => {
          if (/^dpop /i.test(request.headers.authorization ?? '') && !reply.hasHeader('dpop-nonce')) {
            const nonce = auth.dpopNonce();
            if (nonce !== undefined) reply.header('dpop-nonce', nonce);
          }
        });

      /**
       * A refused call: its challenge in the scheme of the caller's token, and the audit trail (summed per address
       * and minute, never a write per request); a request for a DPoP nonce is not a refusal.
       */
      const audit = (request: FastifyRequest, answer: ProblemError): void => {
        challengeForCaller(request.adminCaller, answer);
        const { status, detail } = answer.problem;
        if (asksForNonce(answer)) return;
        if (deps.refused === undefined || (status !== 401 && status !== 403 && status !== 429)) return;
        deps.refused({
          type: status === 403 ? 'admin.forbidden' : 'admin.auth_failed',
          clientId: request.adminCaller?.clientId ?? presentedClientId(request),
          reason: `${request.method} ${request.routeOptions.url ?? 'unknown route'}: ${detail}`,
          source: request.ip,
        });
      };
      answerWithProblems(admin, 'the admin API', audit);

      const context: AdminRouteContext = {
        cursors,
        config: deps.config,
        context: (request) => ({
          store: deps.store,
          config: deps.config,
          actor: request.adminCaller!.actor,
          holds: request.adminCaller!.scopes,
          source: request.ip,
          ...(deps.now === undefined ? {} : { now: deps.now }),
        }),
      };
      audienceRoutes(admin, context);
      clientRoutes(admin, context);
      secretRoutes(admin, context);
      federationRoutes(admin, context);
      keyRoutes(admin, context);
      auditRoutes(admin, context);
      operatorRoutes(admin, context);
      statsRoutes(admin, context);
      importRoutes(admin, context);
      applyRoutes(admin, context);

      // Needs no token (config without a scope); no-store like every admin answer.
      admin.get('/openapi.json', { schema: { hide: true }, config: {} }, async () => admin.swagger());
    },
    { prefix: ADMIN_PREFIX },
  );
}
