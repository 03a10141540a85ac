import proxyAddr from '@fastify/proxy-addr';
import { AsyncResource } from 'node:async_hooks';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { ClientCertificate } from '../domain/mtls/certificate.js';
import type { RequestSpan } from '../telemetry/tracing.js';
import { BODY_LIMIT, parseForm } from './body.js';
import type { AnswerFinish } from './finish.js';
import { TOKEN_PATH } from './routes/discovery.js';
import { TOKEN_ANSWER_HEADERS, type TokenEndpoint } from './token-endpoint.js';

const FORM = 'application/x-www-form-urlencoded';
/** The Content-Types the lane takes, lower-cased: the form type, bare or with the UTF-8 charset. */
const FORM_TYPES = new Set([FORM, `${FORM};charset=utf-8`, `${FORM}; charset=utf-8`]);

export interface TokenLaneDeps {
  endpoint: TokenEndpoint;
  /** The request's TLS client certificate (client-certificates.ts); undefined when none can arrive. */
  certificateOf: ((request: IncomingMessage) => ClientCertificate | undefined) | undefined;
  /**
   * The request's span, when traced (telemetry/tracing.ts). A request with one is answered in the async context it
   * arrived in (its span's), so that its log lines carry the span's ids: its body's last event comes from the
   * socket's parser, made before that context.
   */
  spanOf?: ((request: IncomingMessage) => RequestSpan | undefined) | undefined;

  finish: AnswerFinish;
  logger: Logger;
  trustProxy: boolean | string[];
}

/**
 * The token endpoint's common request, served straight from Node's HTTP server instead of through Fastify's
 * request pipeline (router, hooks, content-type parsers, reply): a POST to exactly /oauth/token with a form
 * body whose Content-Length is given and within the limit. That is the request of the OAuth client libraries,
 * and a warm token costs 8 % less CPU without Fastify's pipeline (bench/README.md, _The token lane_). Every
 * other request — a JSON body, a query string, a chunked or oversized body, any other type or method — goes
 * to Fastify as before, and is answered exactly as it always was.
 *
 * The lane only reads the socket and writes: the answer is the token endpoint's (TokenEndpoint.answer, as the
 * Fastify route's), finished as every answer is (AnswerFinish, as Fastify's onSend hook does). One difference:
 * after a malformed form (a parameter sent twice) Fastify closes the connection, in case more of the body is
 * coming; the lane has read all of it, and keeps the connection. From the app's close on, the lane takes
 * nothing: Fastify answers 503 while it closes.
 */
export class TokenLane {
  private closed = false;
  /** The headers of every answer: a token's, and a refusal's besides its own. */
  private readonly headers: Readonly<Record<string, string>>;
  private readonly trust: ((address: string, hop: number) => boolean) | undefined;

  constructor(private readonly deps: TokenLaneDeps) {
    this.headers = { ...TOKEN_ANSWER_HEADERS, ...deps.finish.security };
    // As Fastify's request.ip: the socket's peer, or with trusted proxies the nearest untrusted hop.
    const trust = deps.trustProxy;
    this.trust = trust === false ? undefined : trust === true ? () => true : proxyAddr.compile(trust);
  }

  /** From now on every request goes to Fastify (which answers 503 while the app closes). */
  close(): void {
    this.closed = true;
  }

  /** Takes the request and answers it, if it is the lane's; false: it is Fastify's, untouched. */
  take(request: IncomingMessage, response: ServerResponse): boolean {
    if (this.closed || request.method !== 'POST' || request.url !== TOKEN_PATH) return false;
    const headers = request.headers;
    const type = headers['content-type'];
    if (type === undefined || !FORM_TYPES.has(type.toLowerCase())) return false;
    const length = headers['content-length'];
    if (length === undefined || headers['transfer-encoding'] !== undefined) return false;
    const bytes = Number(length);
    if (!(bytes > 0 && bytes <= BODY_LIMIT)) return false;

    const started = performance.now();
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    // A client that goes away mid-body has nobody to answer; Node closes the socket.
    request.on('error', () => undefined);
    const end = () => {
      const body = chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks).toString('utf8');
      this.answer(request, response, body, started).catch((error: unknown) => {
        // Only writing the answer can fail here (every error of the request itself is answered): the
        // connection is cut rather than left waiting, and the process goes on.
        this.deps.logger.error({ err: error }, 'unexpected error');
        response.destroy();
      });
    };
    // Only a recorded span's request needs its context (a sampled-out one has no span to name in its log lines).
    request.on('end', this.deps.spanOf?.(request) !== undefined ? AsyncResource.bind(end) : end);
    return true;
  }

  private async answer(
    request: IncomingMessage,
    response: ServerResponse,
    body: string,
    started: number,
  ): Promise<void> {
    const answer = await this.deps.endpoint.answer({
      params: () => parseForm(body).params,
      authorization: request.headers.authorization,
      dpop: request.headers.dpop,
      source: this.trust ? proxyAddr(request, this.trust) : (request.socket.remoteAddress ?? ''),
      certificate: this.deps.certificateOf?.(request),
      span: this.deps.spanOf?.(request),
    });
    const finish = this.deps.finish;
    const closes = finish.beforeWrite(request.socket);
    const headers: Record<string, string | number> = {
      ...this.headers,
      ...answer.headers,
      'content-length': Buffer.byteLength(answer.body),
    };
    if (closes) headers.connection = 'close';
    finish.observe('POST', TOKEN_PATH, answer.status, (performance.now() - started) / 1000);
    response.writeHead(answer.status, headers);
    response.end(answer.body);
  }
}
