import type { FastifyInstance } from 'fastify';
import type { RevocationService } from '../../domain/revocation.js';
import { tokenParams } from '../body.js';
import { methodNotAllowed, NO_STORE } from '../errors.js';
import type { CertificateOf } from '../client-certificates.js';
import type { Turns } from '../turns.js';
import { INTROSPECTION_PATH, REVOCATION_PATH } from './discovery.js';

/**
 * POST /oauth/revoke (RFC 7009) and POST /oauth/introspect (RFC 7662): parse, call the domain, serialise; the body
 * encodings, the limits and the errors are the token endpoint's. Requests that arrive together are answered
 * together, as token requests are (Turns): a resource server introspects as often as clients ask for tokens.
 */
export function revocationRoutes(
  app: FastifyInstance,
  revocation: RevocationService,
  turns: Turns,
  certificateOf: CertificateOf | undefined,
): void {
  app.post(REVOCATION_PATH, async (request, reply) => {
    const params = tokenParams(request.body);
    await revocation.revoke({
      params,
      authorization: request.headers.authorization,
      source: request.ip,
      certificate: certificateOf?.(request.raw),
    });
    // RFC 7009 §2.2: 200, whether the token was revoked, invalid, unknown or another client's; no body.
    return reply.code(200).headers(NO_STORE).send();
  });
  methodNotAllowed(app, REVOCATION_PATH, ['POST']);

  app.post(INTROSPECTION_PATH, async (request, reply) => {
    const params = tokenParams(request.body);
    await turns.end();
    const answer = await revocation.introspect({
      params,
      authorization: request.headers.authorization,
      source: request.ip,
      certificate: certificateOf?.(request.raw),
    });
    // RFC 7662 §2.2: JSON, and (as every answer about tokens) not to be stored.
    return reply.headers(NO_STORE).type('application/json; charset=utf-8').send(JSON.stringify(answer));
  });
  methodNotAllowed(app, INTROSPECTION_PATH, ['POST']);
}
