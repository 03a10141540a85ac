import type { FastifyInstance } from 'fastify';
import type { TokenService } from '../../domain/token-service.js';
import { tokenParams } from '../body.js';
import { methodNotAllowed, NO_STORE } from '../errors.js';

/** POST /oauth/token: parse, call the domain, serialise. Errors go to the one error handler. */
export function tokenRoutes(app: FastifyInstance, tokens: TokenService): void {
  app.post('/oauth/token', async (request, reply) => {
    const params = tokenParams(request.body);
    const issued = await tokens.issue({
      params,
      authorization: request.headers.authorization,
      source: request.ip,
    });
    return reply.headers(NO_STORE).send(issued.response);
  });
  methodNotAllowed(app, '/oauth/token', ['POST']);
}
