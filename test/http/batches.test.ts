import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import type { TokenRequest } from '../../src/domain/token-types.js';
import { registerBodyParsers } from '../../src/http/body.js';
import { TURN_MAX, tokenRoutes } from '../../src/http/routes/token.js';
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

  it('resumes at most TURN_MAX requests an iteration: the others in the iterations after, in the order they came', async () => {
    const events: string[] = [];
    const tokens = recordingTokens(events);
    const app = Fastify();
    registerBodyParsers(app);
    tokenRoutes(app, tokens);
    app.addHook('onSend', async (request) => {
      events.push(`send ${(request.body as { params: TokenRequest['params'] }).params.client_id}`);
    });
    await app.ready();
    // An immediate queued before the requests runs in the first iteration's check phase, before their batch; one
    // queued by it runs in the next iteration, and so on: each marks where an iteration's batch begins.
    let iteration = 0;
    const mark = (): void => {
      events.push(`iteration ${++iteration}`);
      if (iteration < 4) setImmediate(mark);
    };
    try {
      const ids = Array.from({ length: 2 * TURN_MAX + 1 }, (_, i) => `c${i}`);
      const answers = Promise.all(
        ids.map((id) =>
          app.inject({
            method: 'POST',
            url: '/oauth/token',
            headers: { 'content-type': 'application/x-www-form-urlencoded' },
            payload: `grant_type=client_credentials&client_id=${id}`,
          }),
        ),
      );
      setImmediate(mark);
      expect((await answers).map((a) => a.statusCode)).toEqual(ids.map(() => 200));
      const batch = (group: string[]) => [
        ...group.map((id) => `issue ${id}`),
        ...group.map((id) => `send ${id}`),
      ];
      expect(events.filter((e) => !e.startsWith('iteration'))).toEqual([
        ...batch(ids.slice(0, TURN_MAX)),
        ...batch(ids.slice(TURN_MAX, 2 * TURN_MAX)),
        ...batch(ids.slice(2 * TURN_MAX)),
      ]);
      // Each group in an iteration of its own.
      const first = (id: string) => events.indexOf(`issue ${id}`);
      const iterationOf = (id: string) =>
        events.slice(0, first(id)).filter((e) => e.startsWith('iteration')).length;
      expect([ids[0]!, ids[TURN_MAX - 1]!, ids[TURN_MAX]!, ids[2 * TURN_MAX]!].map(iterationOf)).toEqual([
        iterationOf(ids[0]!),
        iterationOf(ids[0]!),
        iterationOf(ids[0]!) + 1,
        iterationOf(ids[0]!) + 2,
      ]);
    } finally {
      await app.close();
    }
  });
});
