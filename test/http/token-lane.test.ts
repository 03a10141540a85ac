import { EventEmitter } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { decodeJwt } from 'jose';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AnswerFinish } from '../../src/http/finish.js';
import { TokenEndpoint } from '../../src/http/token-endpoint.js';
import { TokenLane, type TokenLaneDeps } from '../../src/http/token-lane.js';
import { Turns } from '../../src/http/turns.js';
import { recordingTokens } from '../helpers/fake-tokens.js';
import { openSocket, readResponse, type RawResponse } from '../helpers/raw-http.js';
import { basic, startWithClient, type TestClient, type TestServer } from '../helpers/server.js';

/**
 * The token lane (src/http/token-lane.ts) answers the common token request without Fastify's pipeline. It
 * must take exactly the requests it says it takes, and answer them exactly as the Fastify route would.
 */

function laneOf(events: string[], deps: Partial<TokenLaneDeps> = {}): TokenLane {
  const logger = pino({ level: 'silent' });
  return new TokenLane({
    endpoint: new TokenEndpoint(recordingTokens(events), logger, new Turns()),
    finish: new AnswerFinish({ 'x-frame-options': 'DENY' }, { closesConnection: () => false }),
    logger,
    trustProxy: false,
    certificateOf: undefined,
    ...deps,
  });
}

describe('the requests the token lane takes', () => {
  let server: Server;
  let port: number;
  const lane = laneOf([]);
  beforeAll(async () => {
    // The lane first, as in app.ts; what it leaves is answered 299 "other", as Fastify would answer it.
    server = createServer((request: IncomingMessage, response: ServerResponse) => {
      if (lane.take(request, response)) return;
      request.resume();
      request.on('end', () => response.writeHead(299, { 'content-length': 5 }).end('other'));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  /** Sends `head` (the request line and headers, without the blank line) and `body`; who answered. */
  async function whoAnswers(
    head: string,
    body = 'grant_type=client_credentials&client_id=c1',
  ): Promise<string> {
    const socket = await openSocket(port);
    try {
      const chunked = /transfer-encoding: chunked/i.test(head);
      const length = chunked ? '' : `Content-Length: ${Buffer.byteLength(body)}\r\n`;
      const framed = chunked ? `${Buffer.byteLength(body).toString(16)}\r\n${body}\r\n0\r\n\r\n` : body;
      socket.write(`${head}\r\nHost: x\r\n${length}\r\n${framed}`);
      const answer = await readResponse(socket);
      return answer.status === 200 ? 'lane' : answer.body;
    } finally {
      socket.destroy();
    }
  }

  const FORM = 'Content-Type: application/x-www-form-urlencoded';
  it.each([
    ['the form type', `POST /oauth/token HTTP/1.1\r\n${FORM}`],
    [
      'the form type in capitals',
      'POST /oauth/token HTTP/1.1\r\nContent-Type: Application/X-WWW-Form-Urlencoded',
    ],
    ['with the UTF-8 charset', `POST /oauth/token HTTP/1.1\r\n${FORM}; charset=UTF-8`],
    ['HTTP/1.0', `POST /oauth/token HTTP/1.0\r\n${FORM}`],
  ])('takes a POST to /oauth/token with %s and a Content-Length', async (_what, head) => {
    expect(await whoAnswers(head)).toBe('lane');
  });

  it.each([
    ['a JSON body', 'POST /oauth/token HTTP/1.1\r\nContent-Type: application/json', '{"grant_type":"x"}'],
    ['another charset', `POST /oauth/token HTTP/1.1\r\n${FORM}; charset=ISO-8859-1`, 'a=b'],
    ['no Content-Type', 'POST /oauth/token HTTP/1.1', 'a=b'],
    ['a chunked body', `POST /oauth/token HTTP/1.1\r\n${FORM}\r\nTransfer-Encoding: chunked`, 'a=b'],
    ['an empty body', `POST /oauth/token HTTP/1.1\r\n${FORM}`, ''],
    ['a body over the limit', `POST /oauth/token HTTP/1.1\r\n${FORM}`, `a=${'b'.repeat(8 * 1024)}`],
    ['a query string', `POST /oauth/token?x=1 HTTP/1.1\r\n${FORM}`, 'a=b'],
    ['a trailing slash', `POST /oauth/token/ HTTP/1.1\r\n${FORM}`, 'a=b'],
    ['another method', `PUT /oauth/token HTTP/1.1\r\n${FORM}`, 'a=b'],
    ['another path', `POST /oauth/revoke HTTP/1.1\r\n${FORM}`, 'a=b'],
  ])('leaves %s to Fastify', async (_what, head, body) => {
    expect(await whoAnswers(head, body)).toBe('other');
  });

  it('takes nothing once closed', async () => {
    const closed = laneOf([]);
    closed.close();
    const response = { writeHead: () => expect.fail('answered') } as unknown as ServerResponse;
    const request = Object.assign(new EventEmitter(), {
      method: 'POST',
      url: '/oauth/token',
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'content-length': '3' },
    }) as unknown as IncomingMessage;
    expect(closed.take(request, response)).toBe(false);
    expect(lane.take(request, response)).toBe(true);
  });
});

describe('token requests in the lane', () => {
  it('issues every token of the requests read in one loop iteration before it writes any answer', async () => {
    const events: string[] = [];
    const lane = laneOf(events);
    const ids = ['c1', 'c2', 'c3', 'c4'];
    const answered = ids.map((id) => {
      const body = Buffer.from(`grant_type=client_credentials&client_id=${id}`);
      const request = Object.assign(new EventEmitter(), {
        method: 'POST',
        url: '/oauth/token',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          'content-length': String(body.length),
        },
        socket: { remoteAddress: '127.0.0.1' },
      }) as unknown as IncomingMessage;
      return new Promise<number>((resolve) => {
        let status = 0;
        const response = {
          writeHead: (code: number) => (status = code),
          end: () => {
            events.push(`send ${id}`);
            resolve(status);
          },
        } as unknown as ServerResponse;
        expect(lane.take(request, response)).toBe(true);
        request.emit('data', body);
        request.emit('end');
      });
    });
    expect(await Promise.all(answered)).toEqual([200, 200, 200, 200]);
    expect(events).toEqual([...ids.map((id) => `issue ${id}`), ...ids.map((id) => `send ${id}`)]);
  });
});

describe('the lane answers as the Fastify route does', () => {
  let t: TestServer;
  let client: TestClient;
  const API = 'https://api.example.com';
  beforeAll(async () => {
    ({ t, client } = await startWithClient(API, { TESSERA_TRUST_PROXY: 'loopback' }));
  });
  afterAll(async () => t.close());

  /** The same request, with a Content-Length (the lane's) or chunked (Fastify's). */
  async function send(form: string, chunked: boolean, headers: Record<string, string>): Promise<RawResponse> {
    const socket = await openSocket(Number(new URL(t.url).port));
    try {
      const extra = Object.entries(headers)
        .map(([name, value]) => `${name}: ${value}\r\n`)
        .join('');
      const framing = chunked
        ? `Transfer-Encoding: chunked\r\n\r\n${Buffer.byteLength(form).toString(16)}\r\n${form}\r\n0\r\n\r\n`
        : `Content-Length: ${Buffer.byteLength(form)}\r\n\r\n${form}`;
      socket.write(
        `POST /oauth/token HTTP/1.1\r\nHost: localhost\r\n${extra}` +
          `Content-Type: application/x-www-form-urlencoded\r\n${framing}`,
      );
      return await readResponse(socket);
    } finally {
      socket.destroy();
    }
  }

  /**
   * What must be equal: the status, the body (a token's claims), every header but the date, the length and
   * the connection's. Fastify closes the connection after any error of its body parsers (a parameter sent
   * twice), in case the client sends more; the lane has read the whole body then, and keeps it.
   */
  function shape(answer: RawResponse): unknown {
    const {
      date: _date,
      'content-length': _length,
      connection: _connection,
      'keep-alive': _keepAlive,
      ...headers
    } = answer.headers;
    const body = JSON.parse(answer.body) as Record<string, unknown>;
    if (typeof body.access_token === 'string') {
      const { jti: _jti, iat: _iat, exp: _exp, ...claims } = decodeJwt(body.access_token);
      body.access_token = claims;
    }
    return { status: answer.status, headers, body };
  }

  it.each<[string, string, boolean, number]>([
    ['a token', `grant_type=client_credentials&audience=${encodeURIComponent(API)}`, false, 200],
    ['a wrong secret: 401 with its challenge', `grant_type=client_credentials&audience=${API}`, true, 401],
    ['a missing grant_type', `audience=${API}`, false, 400],
    ['a parameter sent twice', 'grant_type=client_credentials&grant_type=client_credentials', false, 400],
    ['an unknown audience', 'grant_type=client_credentials&audience=https://nowhere.example', false, 400],
    ['an unsupported grant type', 'grant_type=password', false, 400],
  ])('%s', async (_what, form, wrongSecret, status) => {
    const headers = {
      authorization: basic(client.id, wrongSecret ? 'not-the-secret' : client.secret),
      'x-forwarded-for': '203.0.113.7',
    };
    const lane = await send(form, false, headers);
    const fastify = await send(form, true, headers);
    expect(lane.status).toBe(status);
    expect(lane.headers['transfer-encoding']).toBeUndefined();
    expect(lane.headers.connection).toBe('keep-alive');
    expect(lane.headers['keep-alive']).toBe('timeout=5');
    expect(shape(lane)).toEqual(shape(fastify));
  });

  it("records the caller's address as Fastify does: behind a trusted proxy, the X-Forwarded-For hop", async () => {
    const form = `grant_type=client_credentials&audience=${encodeURIComponent(API)}`;
    const authorization = basic(client.id, client.secret);
    expect((await send(form, false, { authorization, 'x-forwarded-for': '203.0.113.7' })).status).toBe(200);
    expect((await send(form, true, { authorization, 'x-forwarded-for': '198.51.100.4' })).status).toBe(200);
    await t.server.runtime.audit.flush();
    const events = await t.server.runtime.store.queryAuditEvents({
      types: ['token.issued'],
      clientId: client.id,
      limit: 2,
    });
    expect(events.map((e) => e.source)).toEqual(['198.51.100.4', '203.0.113.7']);
  });
});
