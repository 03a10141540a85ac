import type { Logger } from 'pino';
import type { ClientCertificate } from '../domain/mtls/certificate.js';
import { asOAuthError } from '../domain/errors.js';
import type { IssuedToken, TokenService } from '../domain/token-service.js';
import type { RequestSpan } from '../telemetry/tracing.js';
import type { TokenParams, TokenResponse } from '../domain/token-request.js';
import { answerFor, NO_STORE } from './errors.js';
import type { Turns } from './turns.js';

const JSON_TYPE = 'application/json; charset=utf-8';

/** The headers of every answer of the token endpoint, a token's and a refusal's (RFC 6749 §5.1: no-store). */
export const TOKEN_ANSWER_HEADERS: Readonly<Record<string, string>> = {
  ...NO_STORE,
  'content-type': JSON_TYPE,
};

/**
 * The token answer as JSON.stringify writes it, without its escaping scan over the token: a JWS compact
 * serialization is base64url and dots only, and the other members are fixed text and an integer. The scope,
 * when the token has one, is escaped as any string.
 */
function tokenJson(response: TokenResponse): string {
  const scope = response.scope === undefined ? '' : `,"scope":${JSON.stringify(response.scope)}`;
  // RFC 8693 §2.2.1: a token exchange's answer names the issued token's type (a fixed URN).
  const issued =
    response.issued_token_type === undefined ? '' : `,"issued_token_type":"${response.issued_token_type}"`;
  return `{"access_token":"${response.access_token}"${issued},"token_type":"${response.token_type}","expires_in":${response.expires_in}${scope}}`;
}

/** The DPoP header as one string: Node joins repeated ones with commas, which the verifier refuses. */
const dpopHeader = (value: string | string[] | undefined): string | undefined =>
  Array.isArray(value) ? value.join(', ') : value;

/** A traced request's grant type (oauth.grant_type), when it is one Tessera offers (no caller's junk in a trace). */
function traceRequest(span: RequestSpan, params: TokenParams, offered: readonly string[]): void {
  const grantType = params.grant_type;
  if (grantType !== undefined && offered.includes(grantType)) span.set('oauth.grant_type', grantType);
}

function traceClient(span: RequestSpan, clientId: string, method: string): void {
  span.set('oauth.client_id', clientId);
  span.set('oauth.client.auth_method', method);
}

/** The issued token's attributes (attributes.ts): never the token itself. */
function traceIssued(span: RequestSpan, issued: IssuedToken): void {
  span.set('oauth.audience', issued.audience);
  if (issued.response.scope !== undefined) span.set('oauth.scope', issued.response.scope);
  span.set('oauth.token.id', issued.jti);
  if (issued.binding !== undefined) span.set('oauth.token.binding', issued.binding);
}

/** A refusal's OAuth error code and the audit trail's reason (never a credential: the reason never holds one). */
function traceRefusal(span: RequestSpan, error: unknown, code: string): void {
  span.set('oauth.error', code);
  const oauth = asOAuthError(error);
  span.set(
    'tessera.refusal_reason',
    oauth ? [oauth.error, oauth.debug ?? oauth.description].join(': ') : 'server_error',
  );
}

/** A token request as the HTTP layer hands it over: its parameters still to be read, and its headers. */
export interface TokenCall {
  /** Reads the parameters from the body (throws invalid_request for a malformed one: it is answered). */
  params(): TokenParams;
  authorization: string | undefined;
  dpop: string | string[] | undefined;
  /** The caller's address: the socket's peer, or behind trusted proxies the nearest untrusted hop. */
  source: string;
  /** Its TLS client certificate (client-certificates.ts), if any. */
  certificate: ClientCertificate | undefined;
  /** Its span, when traced (telemetry/tracing.ts): the endpoint gives it its oauth.* attributes. */
  span?: RequestSpan | undefined;
}

/** The answer to write: status, body, and the headers beyond TOKEN_ANSWER_HEADERS (none, for a token). */
export interface TokenAnswer {
  status: number;
  body: string;
  headers: Readonly<Record<string, string>> | undefined;
}

/**
 * The token endpoint (POST /oauth/token), once: read the parameters, wait for the turn's batch (Turns), issue
 * (TokenService), and the answer — the token, or the refusal as RFC 6749 §5.2 says (answerFor), and with DPoP
 * nonces (TESSERA_DPOP_NONCE) the current one (RFC 9449 §8). Whatever serves the socket (the token lane, the
 * Fastify route) calls it and writes what it returns with the headers every answer gets (AnswerFinish).
 */
export class TokenEndpoint {
  constructor(
    readonly tokens: TokenService,
    private readonly logger: Logger,
    readonly turns: Turns,
  ) {}

  async answer(call: TokenCall): Promise<TokenAnswer> {
    let status = 200;
    let body: string;
    let headers: Readonly<Record<string, string>> | undefined;
    const span = call.span;
    try {
      const params = call.params();
      await this.turns.end();
      if (span !== undefined) traceRequest(span, params, this.tokens.grantTypesSupported);
      const issued = await this.tokens.issue({
        params,
        authorization: call.authorization,
        source: call.source,
        dpop: dpopHeader(call.dpop),
        certificate: call.certificate,
        onAuthenticated: span && ((clientId, method) => traceClient(span, clientId, method)),
      });
      if (span !== undefined) traceIssued(span, issued);
      body = tokenJson(issued.response);
    } catch (error) {
      const refusal = answerFor(error, this.logger);
      if (span !== undefined) traceRefusal(span, error, refusal.error);
      status = refusal.status;
      body = JSON.stringify(refusal.toJSON());
      headers = refusal.headers;
    }
    const nonce = this.tokens.dpopNonce();
    if (nonce !== undefined) headers = { ...headers, 'dpop-nonce': nonce };
    return { status, body, headers };
  }
}
