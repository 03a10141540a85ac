import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import type { TokenRequest } from '../../src/domain/token-types.js';
import { registerBodyParsers } from '../../src/http/body.js';
import { connectionAccepted, TURN_MAX, tokenRoutes } from '../../src/http/routes/token.js';
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

  /**
   * 2 × TURN_MAX + 1 token requests sent together, answered; `check` runs at the start of the check phase of each of
   * the first four iterations.
   */
  async function burst(check: (iteration: number) => void): Promise<{ ids: string[]; events: string[] }> {
    const events: string[] = [];
    const tokens = recordingTokens(events);
    const app = Fastify();
    registerBodyParsers(app);
    tokenRoutes(app, tokens);
    app.addHook('onSend', async (request) => {
      events.push(`send ${(request.body as { params: TokenRequest['params'] }).params.client_id}`);
    });
    await app.ready();
    // An immediate queued before the requests' own runs first in each check phase; one it queues runs in the next
    // iteration's, and so on: each marks where an iteration's batch begins.
    let iteration = 0;
    const mark = (): void => {
      events.push(`iteration ${++iteration}`);
      check(iteration);
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
      return { ids, events };
    } finally {
      await app.close();
    }
  }

  const batch = (ids: string[]) => [...ids.map((id) => `issue ${id}`), ...ids.map((id) => `send ${id}`)];
  /** The iteration in which a request was issued its token. */
  const iterationOf = (events: string[], id: string) =>
    events.slice(0, events.indexOf(`issue ${id}`)).filter((e) => e.startsWith('iteration')).length;

  it('with no connection arriving, every request read in an iteration is one batch, however many', async () => {
    const { ids, events } = await burst(() => undefined);
    expect(events.filter((e) => !e.startsWith('iteration'))).toEqual(batch(ids));
  });

  it('while connections arrive, an iteration resumes at most TURN_MAX requests, the oldest; the others in the iterations after', async () => {
    // A connection accepted in every iteration, as in a burst of new ones (libuv accepts one an iteration).
    const { ids, events } = await burst(() => connectionAccepted());
    expect(events.filter((e) => !e.startsWith('iteration'))).toEqual([
      ...batch(ids.slice(0, TURN_MAX)),
      ...batch(ids.slice(TURN_MAX, 2 * TURN_MAX)),
      ...batch(ids.slice(2 * TURN_MAX)),
    ]);
    const start = iterationOf(events, ids[0]!);
    expect(
      [ids[TURN_MAX - 1]!, ids[TURN_MAX]!, ids[2 * TURN_MAX]!].map((id) => iterationOf(events, id)),
    ).toEqual([start, start + 1, start + 2]);
  });

  it('once no more connections arrive, the requests still waiting resume together', async () => {
    const { ids, events } = await burst((iteration) => {
      if (iteration === 1) connectionAccepted();
    });
    expect(events.filter((e) => !e.startsWith('iteration'))).toEqual([
      ...batch(ids.slice(0, TURN_MAX)),
      ...batch(ids.slice(TURN_MAX)),
    ]);
    expect(iterationOf(events, ids[TURN_MAX]!)).toBe(iterationOf(events, ids[0]!) + 1);
  });
});
