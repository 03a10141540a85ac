import type { FastifyBaseLogger, FastifyError, FastifyInstance, FastifyReply } from 'fastify';
import type { Socket } from 'node:net';
import { asOAuthError, invalidRequest, OAuthError, serverError } from '../domain/errors.js';
import { BODY_LIMIT } from './body.js';

/** RFC 6749 §5.1/§5.2: token responses, successful or not, must not be cached. */
export const NO_STORE = { 'cache-control': 'no-store', pragma: 'no-cache' } as const;

/**
 * Every error body of this server is an OAuthError's toJSON (RFC 6749 §5.2), written here or by the client
 * error handler below: OAuthError makes its error_description of the characters §5.2 allows.
 */
function sendOAuthError(reply: FastifyReply, error: OAuthError): FastifyReply {
  return reply.code(error.status).headers(NO_STORE).headers(error.headers).send(error.toJSON());
}

/** Fastify's own request errors, as the OAuth error a client should see. */
function fromFastify(error: FastifyError): OAuthError | undefined {
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return invalidRequest(`the request body is larger than ${BODY_LIMIT} bytes`, 413);
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_TYPE':
      return invalidRequest('the body must be application/x-www-form-urlencoded or application/json', 415);
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return invalidRequest('the JSON body is empty');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return invalidRequest('the Content-Length does not match the body');
  }
  if (error instanceof SyntaxError || error.statusCode === 400)
    return invalidRequest('the request body is malformed');
  if (typeof error.statusCode === 'number' && error.statusCode >= 400 && error.statusCode < 500) {
    return invalidRequest('the request is malformed', error.statusCode);
  }
  return undefined;
}

/** What Node's HTTP parser refuses before Fastify sees a request, as an OAuth error. */
function fromClientError(code: string | undefined): { status: number; reason: string; description: string } {
  switch (code) {
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      // RFC 9110 §15.5.9: the request did not arrive within TESSERA_REQUEST_TIMEOUT; the connection is closed.
      return { status: 408, reason: 'Request Timeout', description: 'the request was not received in time' };
    case 'HPE_HEADER_OVERFLOW':
      return {
        status: 431,
        reason: 'Request Header Fields Too Large',
        description: 'the request headers are too large',
      };
    default:
      return { status: 400, reason: 'Bad Request', description: 'the request is not valid HTTP/1.1' };
  }
}

/**
 * Fastify's clientErrorHandler: a request Node's HTTP server gave up on (too slow, too large, not HTTP) gets
 * an OAuth error body with the usual headers, written straight to the socket, which is then closed.
 */
export function clientErrorHandler(security: Record<string, string>) {
  const extra = Object.entries({ ...security, ...NO_STORE })
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  return function (this: FastifyInstance, error: Error & { code?: string }, socket: Socket): void {
    // A reset connection has nobody to answer; one whose answer has begun cannot take another.
    const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (error.code === 'ECONNRESET' || socket.destroyed) return;
    // At trace only: these are the internet's noise. The logger redacts the raw bytes (err.rawPacket).
    this.log.trace({ err: error }, 'client error');
    if (socket.writable && !inFlight?.headersSent) {
      const { status, reason, description } = fromClientError(error.code);
      const body = JSON.stringify(invalidRequest(description, status));
      socket.write(
        `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\n` +
          `Content-Length: ${Buffer.byteLength(body)}\r\n${extra}Connection: close\r\n\r\n${body}`,
      );
    }
    socket.destroy();
  };
}

/**
 * The OAuth error a failed request is answered with, logged: OAuth errors as they are (a refusal, at debug), the
 * infrastructure's Unavailable as the 503 temporarily_unavailable with Retry-After (docs/interface.md; a refusal
 * too), malformed requests as invalid_request, anything else logged with its detail (at error) and answered as a
 * generic server_error, never a stack. The error handler below and the token endpoint (token-endpoint.ts) use it.
 */
export function answerFor(error: unknown, log: Pick<FastifyBaseLogger, 'debug' | 'error'>): OAuthError {
  const refusal = asOAuthError(error);
  if (refusal) {
    log.debug({ error: refusal.error, status: refusal.status, reason: refusal.debug }, 'request refused');
    return refusal;
  }
  const mapped = error instanceof Error ? fromFastify(error as FastifyError) : undefined;
  if (mapped) return mapped;
  log.error({ err: error }, 'unexpected error');
  return serverError();
}

/** One handler for every error, answered as answerFor says. */
export function registerErrorHandlers(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError | OAuthError, request, reply) =>
    sendOAuthError(reply, answerFor(error, request.log)),
  );

  // A request no route matched (a method Fastify cannot even route included) on a known path is a 405,
  // answered before its body is read, so a PROPFIND with an odd body is a 405, not a 415.
  // A callback hook, not an async one: every request passes here, and only 404s need more than a check.
  app.addHook('onRequest', (request, reply, done) => {
    const allowed = request.is404 ? allowedMethods.get(app)?.get(request.url.split('?', 1)[0]!) : undefined;
    if (!allowed) return done();
    void reply
      .code(405)
      .headers(NO_STORE)
      .header('allow', allowed.join(', '))
      .send(invalidRequest(`method not allowed; use ${allowed.join(' or ')}`, 405).toJSON());
  });

  app.setNotFoundHandler((_request, reply) =>
    reply.code(404).send(new OAuthError('not_found', 'no such endpoint', 404).toJSON()),
  );
}

/** The methods each known path answers; every other method there is a 405 (RFC 9110 §15.5.6). */
const allowedMethods = new WeakMap<FastifyInstance, Map<string, readonly string[]>>();

/** Declares the methods a path answers: any other method on it, however exotic, gets 405 with Allow. */
export function methodNotAllowed(app: FastifyInstance, url: string, allowed: readonly string[]): void {
  let paths = allowedMethods.get(app);
  if (!paths) allowedMethods.set(app, (paths = new Map()));
  paths.set(url, allowed);
}
