import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import type { TokenRequest } from '../../src/domain/token-request.js';
import { registerBodyParsers } from '../../src/http/body.js';
import pino from 'pino';
import { tokenRoutes } from '../../src/http/routes/token.js';
import { TokenEndpoint } from '../../src/http/token-endpoint.js';
import { TURN_MAX, Turns } from '../../src/http/turns.js';
import { recordingTokens } from '../helpers/fake-tokens.js';

/**
 * Token requests that arrive together are answered as a batch: every token is issued first, then every
 * answer written, back to back (src/http/turns.ts says why).
 */
describe('token requests answered in batches', () => {
  /** One batch: every token issued, then every answer sent. */
  const batch = (ids: string[]) => [...ids.map((id) => `issue ${id}`), ...ids.map((id) => `send ${id}`)];

  /**
   * Token requests from these clients sent together, each answered 200; the events: each token issued, each answer
   * sent, and `iteration N` where the check phase of each of the first four iterations begins. `check` runs there.
   */
  async function answered(ids: string[], check: (iteration: number) => void = () => {}): Promise<string[]> {
    const turns = new Turns();
    connectionAccepted = turns.connectionAccepted;
    const events: string[] = [];
    const tokens = recordingTokens(events);
    const app = Fastify();
    registerBodyParsers(app);
    tokenRoutes(app, new TokenEndpoint(tokens, pino({ level: 'silent' }), turns), undefined);
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
      return events;
    } finally {
      await app.close();
    }
  }

  /** The app's batcher's connectionAccepted, while `answered` runs. */
  let connectionAccepted = (): void => {};

  /** The events of the requests alone, without the iteration marks. */
  const requests = (events: string[]) => events.filter((e) => !e.startsWith('iteration'));
  /** 2 × TURN_MAX + 1 clients: three groups while connections arrive. */
  const many = Array.from({ length: 2 * TURN_MAX + 1 }, (_, i) => `c${i}`);

  it('issues every token of the requests read in one loop iteration before it writes any answer', async () => {
    const ids = ['c1', 'c2', 'c3', 'c4'];
    expect(requests(await answered(ids))).toEqual(batch(ids));
  });

  /** The iteration in which a request was issued its token. */
  const iterationOf = (events: string[], id: string) =>
    events.slice(0, events.indexOf(`issue ${id}`)).filter((e) => e.startsWith('iteration')).length;

  it('with no connection arriving, every request read in an iteration is one batch, however many', async () => {
    expect(requests(await answered(many))).toEqual(batch(many));
  });

  it('while connections arrive, an iteration resumes at most TURN_MAX requests, the oldest; the others in the iterations after', async () => {
    // A connection accepted in every iteration, as in a burst of new ones (libuv accepts one an iteration).
    const events = await answered(many, () => connectionAccepted());
    expect(requests(events)).toEqual([
      ...batch(many.slice(0, TURN_MAX)),
      ...batch(many.slice(TURN_MAX, 2 * TURN_MAX)),
      ...batch(many.slice(2 * TURN_MAX)),
    ]);
    const start = iterationOf(events, many[0]!);
    expect(
      [many[TURN_MAX - 1]!, many[TURN_MAX]!, many[2 * TURN_MAX]!].map((id) => iterationOf(events, id)),
    ).toEqual([start, start + 1, start + 2]);
  });

  it('once no more connections arrive, the requests still waiting resume together', async () => {
    const events = await answered(many, (iteration) => {
      if (iteration === 1) connectionAccepted();
    });
    expect(requests(events)).toEqual([...batch(many.slice(0, TURN_MAX)), ...batch(many.slice(TURN_MAX))]);
    expect(iterationOf(events, many[TURN_MAX]!)).toBe(iterationOf(events, many[0]!) + 1);
  });
});
