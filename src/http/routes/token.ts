import type { FastifyInstance } from 'fastify';
import type { TokenResponse, TokenService } from '../../domain/token-service.js';
import { tokenParams } from '../body.js';
import { methodNotAllowed, NO_STORE } from '../errors.js';

const JSON_TYPE = 'application/json; charset=utf-8';

/**
 * The token answer as JSON.stringify writes it, without its escaping scan over the token: a JWS compact
 * serialization is base64url and dots only, and the other members are fixed text and an integer.
 */
export function tokenJson(response: TokenResponse): string {
  return `{"access_token":"${response.access_token}","token_type":"${response.token_type}","expires_in":${response.expires_in}}`;
}

let turn: Promise<void> | undefined;
/**
 * Settles in the check phase of this event-loop iteration, once every socket readable in it has been read.
 * Token requests are answered in batches this way: all that arrived together are signed and written back to
 * back, rather than each written as soon as it is ready. Measured with bench/ on loopback, the kernel's cost
 * per answer (writev, which also wakes the reader) falls by more than half and a core answers 1.5–2× the
 * tokens; the wait is the rest of one loop iteration.
 */
function endOfTurn(): Promise<void> {
  return (turn ??= new Promise((resolve) =>
    setImmediate(() => {
      turn = undefined;
      resolve();
    }),
  ));
}

/** POST /oauth/token: parse, call the domain, serialise. Errors go to the one error handler. */
export function tokenRoutes(app: FastifyInstance, tokens: TokenService): void {
  app.post('/oauth/token', async (request, reply) => {
    const params = tokenParams(request.body);
    await endOfTurn();
    const issued = await tokens.issue({
      params,
      authorization: request.headers.authorization,
      source: request.ip,
    });
    return reply.headers(NO_STORE).type(JSON_TYPE).send(tokenJson(issued.response));
  });
  methodNotAllowed(app, '/oauth/token', ['POST']);
}
