import type { FastifyInstance } from 'fastify';
import { tokenParams } from '../body.js';
import { methodNotAllowed } from '../errors.js';
import type { IncomingMessage } from 'node:http';
import type { RequestSpan } from '../../telemetry/tracing.js';
import type { CertificateOf } from '../client-certificates.js';
import { TOKEN_ANSWER_HEADERS, type TokenEndpoint } from '../token-endpoint.js';
import { TOKEN_PATH } from './discovery.js';

/**
 * POST /oauth/token through Fastify (a JSON body, a chunked one, a query string: what the token lane leaves to
 * it): the token endpoint's answer (TokenEndpoint), sent. With DPoP nonces (TESSERA_DPOP_NONCE), every other
 * answer at the endpoint's path carries the current one too (RFC 9449 §8): parse errors, the 405 of another
 * method; without them, no hook is added.
 */
export function tokenRoutes(
  app: FastifyInstance,
  endpoint: TokenEndpoint,
  certificateOf: CertificateOf | undefined,
  spanOf?: (request: IncomingMessage) => RequestSpan | undefined,
): void {
  const tokens = endpoint.tokens;
  if (tokens.dpopNonce() !== undefined)
    app.addHook('onSend', (request, reply, payload, done) => {
      const url = request.url;
      if (url.startsWith(TOKEN_PATH) && (url.length === TOKEN_PATH.length || url[TOKEN_PATH.length] === '?'))
        reply.header('dpop-nonce', tokens.dpopNonce());
      done(null, payload);
    });
  app.post(TOKEN_PATH, async (request, reply) => {
    const answer = await endpoint.answer({
      params: () => tokenParams(request.body),
      authorization: request.headers.authorization,
      dpop: request.headers.dpop,
      source: request.ip,
      certificate: certificateOf?.(request.raw),
      span: spanOf?.(request.raw),
    });
    reply.code(answer.status).headers(TOKEN_ANSWER_HEADERS);
    if (answer.headers !== undefined) reply.headers(answer.headers);
    return reply.send(answer.body);
  });
  methodNotAllowed(app, TOKEN_PATH, ['POST']);
}
