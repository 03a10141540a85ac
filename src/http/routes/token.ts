import type { FastifyInstance } from 'fastify';
import type { TokenService } from '../../domain/token-service.js';
import type { TokenResponse } from '../../domain/token-types.js';
import { tokenParams } from '../body.js';
import { methodNotAllowed, NO_STORE } from '../errors.js';
import { TOKEN_PATH } from './discovery.js';

export const JSON_TYPE = 'application/json; charset=utf-8';

/**
 * The token answer as JSON.stringify writes it, without its escaping scan over the token: a JWS compact
 * serialization is base64url and dots only, and the other members are fixed text and an integer. The scope,
 * when the token has one, is escaped as any string.
 */
export function tokenJson(response: TokenResponse): string {
  const scope = response.scope === undefined ? '' : `,"scope":${JSON.stringify(response.scope)}`;
  // RFC 8693 §2.2.1: a token exchange's answer names the issued token's type (a fixed URN).
  const issued =
    response.issued_token_type === undefined ? '' : `,"issued_token_type":"${response.issued_token_type}"`;
  return `{"access_token":"${response.access_token}"${issued},"token_type":"${response.token_type}","expires_in":${response.expires_in}${scope}}`;
}

/**
 * The most requests one event-loop iteration resumes (see endOfTurn). A batch of 100 tokens is ~5 ms of this
 * thread, and libuv accepts one new connection per iteration (libuv/libuv#3696): with a thousand requests in
 * flight an uncapped iteration ran ~85 ms, and a burst of new connections waited in the listen queue for
 * seconds. 32 keeps the writes back to back and an iteration to ~2 ms of tokens.
 */
export const TURN_MAX = 32;

/** Requests waiting for their turn, at most TURN_MAX: they resume together, in an iteration of their own. */
interface Group {
  promise: Promise<void>;
  resolve: () => void;
  size: number;
  next: Group | undefined;
}
/** The groups waiting, oldest first: the first resumes at the next check phase, each other one an iteration later. */
let first: Group | undefined;
let last: Group | undefined;

function resumeFirst(): void {
  const group = first!;
  first = group.next;
  if (first === undefined) last = undefined;
  // Immediates queued now run in the next iteration's check phase, after its poll phase.
  else setImmediate(resumeFirst);
  group.resolve();
}

/**
 * Settles in the check phase of this event-loop iteration, once every socket readable in it has been read.
 * Token requests wait for it, so those that arrived together are handled as a batch, in two passes: every
 * token is issued (on a warm cache synchronously, signature included), and only then, a microtask later
 * each, every answer is written, back to back. Writes in a row cost the kernel far less than writes spaced
 * by a signature each (on loopback each one also wakes the reading thread): 1.6–2× the tokens per core in
 * bench/ (bench/README.md, _Batches_). The wait is the rest of one loop iteration.
 *
 * An iteration resumes at most TURN_MAX requests; the others resume in the iterations after it, in the order they
 * came, each iteration's poll phase (new connections, the sockets that became readable) running in between.
 */
export function endOfTurn(): Promise<void> {
  let group = last;
  if (group === undefined || group.size >= TURN_MAX) {
    let resolve!: () => void;
    const promise = new Promise<void>((settle) => (resolve = settle));
    group = { promise, resolve, size: 0, next: undefined };
    if (last === undefined) {
      first = group;
      setImmediate(resumeFirst);
    } else last.next = group;
    last = group;
  }
  group.size++;
  return group.promise;
}

/** The DPoP header as one string: Node joins repeated ones with commas, which the verifier refuses. */
export const dpopHeader = (value: string | string[] | undefined): string | undefined =>
  Array.isArray(value) ? value.join(', ') : value;

/**
 * POST /oauth/token: parse, call the domain, serialise. Errors go to the one error handler. With DPoP nonces
 * (TESSERA_DPOP_NONCE), every answer at the endpoint's path carries the current one (RFC 9449 §8): tokens,
 * refusals, parse errors, the 405 of another method; without them, no hook is added.
 */
export function tokenRoutes(app: FastifyInstance, tokens: TokenService): void {
  if (tokens.dpopNonce() !== undefined)
    app.addHook('onSend', (request, reply, payload, done) => {
      const url = request.url;
      if (url.startsWith(TOKEN_PATH) && (url.length === TOKEN_PATH.length || url[TOKEN_PATH.length] === '?'))
        reply.header('dpop-nonce', tokens.dpopNonce());
      done(null, payload);
    });
  app.post(TOKEN_PATH, async (request, reply) => {
    const params = tokenParams(request.body);
    await endOfTurn();
    const issued = await tokens.issue({
      params,
      authorization: request.headers.authorization,
      source: request.ip,
      dpop: dpopHeader(request.headers.dpop),
    });
    return reply.headers(NO_STORE).type(JSON_TYPE).send(tokenJson(issued.response));
  });
  methodNotAllowed(app, TOKEN_PATH, ['POST']);
}
