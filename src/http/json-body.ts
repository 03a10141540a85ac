import type { FastifyBodyParser } from 'fastify';
import { MAX_JSON_DEPTH, tooDeepAt } from '../domain/json-depth.js';
import { problem, type ProblemError } from './problem.js';

/** A body nested past MAX_JSON_DEPTH: 400, the first value too deep named by its pointer (docs/management.md). */
const tooDeepBody = (pointer: string): ProblemError =>
  problem(400, 'invalid_body', `the request body nests deeper than ${MAX_JSON_DEPTH} levels`, {
    errors: [
      {
        pointer,
        detail: `is an object or array at level ${MAX_JSON_DEPTH + 1}; a body nests at most ${MAX_JSON_DEPTH} levels, itself being level 1`,
      },
    ],
  });

/**
 * Fastify's JSON parser, then the depth rule (docs/management.md: every JSON body nests at most 32 levels), for the
 * admin API and the console's session API. JSON.parse itself reads any depth a body limit allows (V8's parser
 * is iterative); what reads the value after it (validation, the rules, JSON.stringify, the store) is not, so
 * a body too deep is refused here, before any hook, validation or handler sees it.
 */
export function depthLimited(json: FastifyBodyParser<string>): FastifyBodyParser<string> {
  return (request, body: string, done) =>
    json(request, body, (error: Error | null, value?: unknown) => {
      if (error) return done(error, undefined);
      const pointer = tooDeepAt(value, MAX_JSON_DEPTH);
      if (pointer !== undefined) return done(tooDeepBody(pointer), undefined);
      done(null, value);
    });
}
