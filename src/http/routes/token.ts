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
 * While new connections arrive, the most requests one event-loop iteration resumes (see endOfTurn). libuv accepts one
 * connection per iteration (libuv/libuv#3696), and an iteration that answers a batch of a thousand requests runs
 * ~85 ms: a burst of new connections waited for seconds in the listen queue, each for as many iterations as were
 * ahead of it. Sixteen tokens are ~1 ms; in between, the connections already open are answered in whole batches.
 */
export const TURN_MAX = 16;

/** Requests waiting for their turn, at most TURN_MAX. */
interface Group {
  promise: Promise<void>;
  resolve: () => void;
  size: number;
  next: Group | undefined;
}
/** The groups waiting, oldest first. */
let first: Group | undefined;
let last: Group | undefined;
/** A connection was accepted since the last check phase that resumed requests. */
let accepted = false;

/** Called for every connection the server accepts: the next iterations resume one group each (see endOfTurn). */
export function connectionAccepted(): void {
  accepted = true;
}

/** The check phase: resumes every group waiting, or only the first while connections are being accepted. */
function resume(): void {
  const one = accepted;
  accepted = false;
  do {
    const group = first!;
    first = group.next;
    group.resolve();
  } while (!one && first !== undefined);
  if (first === undefined) last = undefined;
  // Queued now, it runs in the next iteration's check phase, after that iteration's poll phase.
  else setImmediate(resume);
}

/**
 * Settles in the check phase of this event-loop iteration, once every socket readable in it has been read.
 * Token requests wait for it, so those that arrived together are handled as a batch, in two passes: every
 * token is issued (on a warm cache synchronously, signature included), and only then, a microtask later
 * each, every answer is written, back to back. Writes in a row cost the kernel far less than writes spaced
 * by a signature each (on loopback each one also wakes the reading thread): 1.6–2× the tokens per core in
 * bench/ (bench/README.md, _Batches_). The wait is the rest of one loop iteration.
 *
 * While connections are being accepted, an iteration resumes at most TURN_MAX requests, the oldest; the others
 * resume in the iterations after it, each iteration's poll phase (the next connection, the sockets that became
 * readable) running in between.
 */
export function endOfTurn(): Promise<void> {
  let group = last;
  if (group === undefined || group.size >= TURN_MAX) {
    let resolve!: () => void;
    const promise = new Promise<void>((settle) => (resolve = settle));
    group = { promise, resolve, size: 0, next: undefined };
    if (last === undefined) {
      first = group;
      setImmediate(resume);
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
