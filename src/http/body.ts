import type { FastifyInstance } from 'fastify';
import { invalidRequest } from '../domain/errors.js';
import { MAX_JSON_DEPTH, tooDeepAt } from '../domain/json-depth.js';
import { ownString } from '../domain/validate.js';
import { TOKEN_PARAMS, type TokenParam, type TokenParams } from '../domain/token-request.js';

/** Token requests are a few hundred bytes; a few KiB is plenty (docs/interface.md), more is refused with 413. */
export const BODY_LIMIT = 8 * 1024;

const KNOWN = new Set<string>(TOKEN_PARAMS);

/** A form body, parsed with duplicates detected (RFC 6749 §3.2: no parameter more than once). */
export class FormBody {
  constructor(readonly params: TokenParams) {}
}

/** Parses a form body, recognised parameters only (as strings of their own). */
export function parseForm(text: string): FormBody {
  const params: TokenParams = {};
  for (const [name, value] of new URLSearchParams(text)) {
    if (!KNOWN.has(name)) continue;
    if (params[name as TokenParam] !== undefined)
      throw invalidRequest(`parameter ${name} is sent more than once`);
    params[name as TokenParam] = ownString(value);
  }
  return new FormBody(params);
}

/**
 * The names of a JSON object's own members, duplicates included, which JSON.parse would silently
 * collapse. Runs only on text JSON.parse has already accepted, so it need not handle malformed input.
 */
function topLevelKeys(text: string): string[] {
  const keys: string[] = [];
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') depth--;
    else if (c === '"') {
      const start = i;
      for (i++; text[i] !== '"'; i++) if (text[i] === '\\') i++;
      if (depth !== 1) continue;
      let j = i + 1;
      while (text[j] === ' ' || text[j] === '\t' || text[j] === '\n' || text[j] === '\r') j++;
      if (text[j] === ':') keys.push(JSON.parse(text.slice(start, i + 1)) as string);
    }
  }
  return keys;
}

function rejectDuplicateJsonParams(text: string): void {
  const seen = new Set<string>();
  for (const key of topLevelKeys(text)) {
    if (!KNOWN.has(key)) continue;
    if (seen.has(key)) throw invalidRequest(`parameter ${key} is sent more than once`);
    seen.add(key);
  }
}

/**
 * The token endpoint reads exactly two encodings: application/x-www-form-urlencoded (RFC 6749) and
 * application/json (the Auth0-style body). Every other type is a 415.
 */
export function registerBodyParsers(app: FastifyInstance): void {
  const json = app.getDefaultJsonParser('error', 'error');
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(
    'application/json',
    { parseAs: 'string', bodyLimit: BODY_LIMIT },
    (request, body, done) =>
      json(request, body as string, (error, value) => {
        if (error) return done(error, undefined);
        try {
          // The admin API's depth rule holds here too (docs/management.md: every JSON body, 32 levels at most). The
          // pointer stays out of the description: a name may hold characters RFC 6749 §5.2 does not allow.
          if (tooDeepAt(value, MAX_JSON_DEPTH) !== undefined)
            throw invalidRequest(`the JSON body nests deeper than ${MAX_JSON_DEPTH} levels`);
          // RFC 6749 §3.2 holds for the JSON encoding too: no parameter more than once.
          if (typeof value === 'object' && value !== null && !Array.isArray(value))
            rejectDuplicateJsonParams(body as string);
        } catch (duplicate) {
          return done(duplicate as Error, undefined);
        }
        done(null, value);
      }),
  );
  app.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'string', bodyLimit: BODY_LIMIT },
    (_req, body, done) => {
      try {
        done(null, parseForm(body as string));
      } catch (error) {
        done(error as Error, undefined);
      }
    },
  );
}

/** The recognised parameters of a parsed body, each a string; unknown parameters are ignored. */
export function tokenParams(body: unknown): TokenParams {
  if (body === undefined) return {}; // no body at all: the missing parameters are named next
  if (body instanceof FormBody) return body.params;
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw invalidRequest('the JSON body must be an object');
  }
  const params: TokenParams = {};
  for (const name of TOKEN_PARAMS) {
    const value = (body as Record<string, unknown>)[name];
    if (value === undefined || value === null) continue;
    if (typeof value !== 'string') throw invalidRequest(`parameter ${name} must be a string`);
    params[name] = value;
  }
  return params;
}
