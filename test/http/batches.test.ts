import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import type { TokenRequest } from '../../src/domain/token-types.js';
import { registerBodyParsers } from '../../src/http/body.js';
import { tokenRoutes } from '../../src/http/routes/token.js';
import { recordingTokens } from '../helpers/fake-tokens.js';

/**
 * Token requests that arrive together are answered as a batch: every token is issued first, then every
 * answer written, back to back (src/http/routes/token.ts says why).
 */
describe('token requests answered in batches', () => {
  it('issues every token of the requests read in one loop iteration before it writes any answer', async () => {
    const events: string[] = [];
    const tokens = recordingTokens(events);
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
