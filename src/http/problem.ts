import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { asOAuthError, TesseraError } from '../domain/errors.js';
import { asManagementError, type ErrorKind, type ManagementError } from '../management/index.js';

/*
 * How the admin API and the console's session API answer errors: RFC 9457 problem details, one document shape
 * and one set of codes for both faces (the token endpoint answers OAuth errors instead, see errors.ts).
 */

/** RFC 9457 problem details, as every admin API and console API error is answered. */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  /** Validation errors: each with the JSON pointer (RFC 6901) of the field at fault in the request body. */
  errors?: { pointer: string; detail: string }[];
}

/**
 * The challenge of a 401 that a console session, not a token, answers (RFC 9110 §11.6.1 wants one on every 401):
 * a failed login, or no session at all. Browsers ask for nothing on a scheme they do not know.
 */
export const CONSOLE_CHALLENGE = 'Session realm="Tessera console"';

/** RFC 6750 §3.1's challenge of a caller whose token lacks these scopes. */
export const insufficientScope = (scopes: readonly string[]): string =>
  `Bearer error="insufficient_scope", scope="${scopes.join(' ')}"`;

/** Stable problem type URIs: `urn:tessera:problem:<code>`, the same codes the CLI prints under --json. */
const PROBLEM_TYPE = 'urn:tessera:problem:';
const problemType = (code: string): string => PROBLEM_TYPE + code;

const STATUS: Record<ErrorKind, number> = {
  invalid: 400,
  not_found: 404,
  conflict: 409,
  precondition: 412,
  failed: 500,
  unauthenticated: 401,
  throttled: 429,
  forbidden: 403,
};

const TITLES: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  409: 'Conflict',
  412: 'Precondition Failed',
  413: 'Content Too Large',
  415: 'Unsupported Media Type',
  428: 'Precondition Required',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

/** An error answered as it is: its status, its problem, and headers (WWW-Authenticate, ...). */
export class ProblemError extends TesseraError {
  constructor(
    readonly problem: Problem,
    readonly headers: Record<string, string> = {},
  ) {
    super(problem.detail);
  }

  /** Its problem type's code (`urn:tessera:problem:<code>`). */
  override get code(): string {
    return this.problem.type.slice(PROBLEM_TYPE.length);
  }
}

export function problem(
  status: number,
  code: string,
  detail: string,
  extra: Partial<Problem> = {},
  headers: Record<string, string> = {},
): ProblemError {
  return new ProblemError(
    { type: problemType(code), title: TITLES[status] ?? 'Error', status, detail, ...extra },
    headers,
  );
}

function sendProblem(reply: FastifyReply, error: ProblemError): FastifyReply {
  return reply
    .code(error.problem.status)
    .headers(error.headers)
    .header('cache-control', 'no-store')
    .type('application/problem+json')
    .send(error.problem);
}

/** An Ajv error's place as a JSON pointer in the body (or a query parameter's name). */
function pointerOf(e: { instancePath?: string; keyword?: string; params?: Record<string, unknown> }): string {
  const base = e.instancePath ?? '';
  if (e.keyword === 'additionalProperties')
    return `${base}/${String(e.params?.additionalProperty).replace(/~/g, '~0').replace(/\//g, '~1')}`;
  if (e.keyword === 'required') return `${base}/${String(e.params?.missingProperty)}`;
  return base;
}

function ajvDetail(e: { keyword?: string; message?: string; params?: Record<string, unknown> }): string {
  if (e.keyword === 'additionalProperties') return 'is not a field of this resource';
  if (e.keyword === 'required') return 'is required';
  if (e.keyword === 'enum')
    return `must be one of ${(e.params?.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`;
  return e.message ?? 'is not valid';
}

/** Any error of a request, as the problem it is answered with; undefined for an unexpected one. */
export function asProblem(error: unknown): ProblemError | undefined {
  if (error instanceof ProblemError) return error;
  // The store cannot answer a client lookup (the token path's 503, with its Retry-After): the infrastructure's
  // Unavailable, or that 503 itself.
  const oauth = asOAuthError(error);
  if (oauth?.status === 503)
    return problem(503, 'temporarily_unavailable', oauth.description, {}, { ...oauth.headers });
  const managed = asManagementError(error);
  if (managed) return fromManagement(managed);
  const e = error as FastifyError & { validation?: { instancePath?: string; keyword?: string }[] };
  if (e.validation) {
    const where = e.validationContext === 'body' ? 'the request body' : `the ${e.validationContext}`;
    // One error per place: a union (a nullable field) fails once per branch; the first branch says it best.
    const errors: { pointer: string; detail: string }[] = [];
    for (const v of e.validation) {
      const pointer = pointerOf(v);
      if (!errors.some((x) => x.pointer === pointer)) errors.push({ pointer, detail: ajvDetail(v) });
    }
    return problem(400, 'invalid_field', `${where} is not valid`, { errors });
  }
  switch (e.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return problem(413, 'body_too_large', 'the request body is too large');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_TYPE':
      return problem(
        415,
        'unsupported_media_type',
        'the body must be application/json (or application/merge-patch+json for PATCH)',
      );
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return problem(400, 'invalid_body', 'the JSON body is empty');
  }
  if (error instanceof SyntaxError || e.statusCode === 400)
    return problem(400, 'invalid_body', 'the request body is not valid JSON');
  if (typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500)
    return problem(e.statusCode, 'invalid_request', 'the request is malformed');
  return undefined;
}

function fromManagement(error: ManagementError): ProblemError {
  const status = STATUS[error.kind];
  const errors =
    error.code === 'invalid_field' && error.field
      ? [{ pointer: `/${error.field}`, detail: error.message }]
      : undefined;
  const headers: Record<string, string> = {};
  if (error.retryAfter !== undefined) headers['retry-after'] = String(error.retryAfter);
  if (error.kind === 'unauthenticated') headers['www-authenticate'] = CONSOLE_CHALLENGE;
  // RFC 6750 §3.1: the scopes the caller would need, which it lacks (docs/management.md, no caller gives what it
  // does not hold).
  if (error.kind === 'forbidden') headers['www-authenticate'] = insufficientScope(error.scopes ?? []);
  return problem(status, error.code, error.message, errors ? { errors } : {}, headers);
}

/** The 404 of a path no route of the face serves. */
export const noSuchResource = (request: FastifyRequest): ProblemError =>
  problem(404, 'not_found', `no such resource: ${request.method} ${request.url.split('?')[0]}`);

/**
 * Answers every error of a face's scope as a problem, and a path it does not serve as a 404: known errors as
 * asProblem makes them (each told to `answered` first, if given), anything else logged as unexpected in
 * `face` and answered as a generic server_error, never a stack.
 */
export function answerWithProblems(
  scope: FastifyInstance,
  face: string,
  answered?: (request: FastifyRequest, answer: ProblemError) => void,
): void {
  scope.setErrorHandler((error, request, reply: FastifyReply) => {
    const answer = asProblem(error);
    if (answer) {
      answered?.(request, answer);
      return sendProblem(reply, answer);
    }
    request.log.error({ err: error }, `unexpected error in ${face}`);
    return sendProblem(reply, problem(500, 'server_error', 'the server could not complete the request'));
  });
  scope.setNotFoundHandler((request, reply) => sendProblem(reply, noSuchResource(request)));
}
