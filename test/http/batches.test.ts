import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import type { TokenService } from '../../src/domain/token-service.js';
import type { TokenRequest } from '../../src/domain/token-types.js';
import { registerBodyParsers } from '../../src/http/body.js';
import { tokenRoutes } from '../../src/http/routes/token.js';

/**
 * Token requests that arrive together are answered as a batch: every token is issued first, then every
 * answer written, back to back (src/http/routes/token.ts says why).
 */
describe('token requests answered in batches', () => {
  it('issues every token of the requests read in one loop iteration before it writes any answer', async () => {
    const events: string[] = [];
    const tokens = {
      issue: async (request: TokenRequest) => {
        events.push(`issue ${request.params.client_id}`);
        return {
          response: { access_token: 'a.b.c', token_type: 'Bearer', expires_in: 1800 },
          clientId: request.params.client_id!,
          audience: 'https://api.example',
          jti: 'j',
        };
      },
      // No DPoP nonces: no hook of their own on the answers.
      dpopNonce: () => undefined,
    } as unknown as TokenService;
    const app = Fastify();
    registerBodyParsers(app);
    tokenRoutes(app, tokens);
    app.addHook('onSend', async (request) => {
      events.push(`send ${(request.body as { params: TokenRequest['params'] }).params.client_id}`);
    });
    await app.ready();
    try {
      const ids = ['c1', 'c2', 'c3', 'c4'];
      const answers = await Promise.all(
        ids.map((id) =>
          app.inject({
            method: 'POST',
            url: '/oauth/token',
            headers: { 'content-type': 'application/x-www-form-urlencoded' },
            payload: `grant_type=client_credentials&client_id=${id}`,
          }),
        ),
      );
      expect(answers.map((a) => a.statusCode)).toEqual([200, 200, 200, 200]);
      expect(events).toEqual([...ids.map((id) => `issue ${id}`), ...ids.map((id) => `send ${id}`)]);
    } finally {
      await app.close();
    }
  });
});
