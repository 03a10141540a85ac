/**
 * A DPoP proof at the admin API is good once, whichever instance it reaches (INTERFACE.md, DPoP: the admin API
 * takes a bound token only with a proof whose "`jti` [is] single-use on every instance"). Two real
 * `tessera serve` processes on one PostgreSQL, one issuer (every proof's htu is the public URL, not an
 * instance's), without Redis and no nonces (the proof ids go to the store), and with Redis and
 * TESSERA_DPOP_NONCE=true (they go to Redis; a nonce one instance gives is good at the other): a proof used at
 * A is refused at B and at A again, and the other way round; one proof sent to both at once over 20
 * connections lets exactly one call in.
 *
 * The CLI loads dist/, so `npm run build` must have run (`npm test` does).
 */
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ath, holder, signProof, type Holder } from '../helpers/dpop.js';
import {
  expectProofRecorded,
  startPostgresPair,
  stopPostgresPair,
  type PostgresPair,
} from '../helpers/instances.js';
import { tesseraOk, type Serve } from '../helpers/process.js';
import { sendRawAtOnce, type JsonAnswer as Answer } from '../helpers/raw-http.js';
import { testPrefix } from '../helpers/redis.js';
import { NO_BLOCKING } from '../helpers/server.js';

const ISSUER = 'https://auth.tessera.test';
const ADMIN = `${ISSUER}/admin/v1`;
const CLIENTS = `${ADMIN}/clients`;
const ALGS = 'ES256 ES384 RS256 PS256 EdDSA Ed25519';
const CONNECTIONS = 20;
const REPLAYED = 'DPoP proof jti was already used';

/** A GET of /admin/v1/clients with the token and proof, as a keep-alive client sends it. */
const adminRequest = (port: number, token: string, dpop: string): string =>
  `GET /admin/v1/clients HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: keep-alive\r\n` +
  `Authorization: DPoP ${token}\r\nDPoP: ${dpop}\r\n\r\n`;

/** Sends the same call to each port, one connection each, every request written in the same turn. */
const sendAtOnce = (ports: number[], token: string, dpop: string): Promise<Answer[]> =>
  sendRawAtOnce(ports, (port) => adminRequest(port, token, dpop));

const call = async (port: number, token: string, dpop: string) => (await sendAtOnce([port], token, dpop))[0]!;

describe.each([
  { name: 'without Redis and without nonces: the proof ids go to the store', redis: false, nonces: false },
  { name: 'with Redis and TESSERA_DPOP_NONCE=true: the proof ids go to Redis', redis: true, nonces: true },
])('the admin API of two instances on one PostgreSQL, $name', ({ redis, nonces }) => {
  let pair: PostgresPair | undefined;
  let env: NodeJS.ProcessEnv;
  let instances: Serve[] = [];
  let h: Holder;
  let form: string;
  /** A DPoP-bound admin token, from A. */
  let token: string;
  let jtis = 0;

  /** A proof by `h` of a call to `htm` `htu` (with the token's ath unless `forToken`), its nonce given. */
  const proofOf = (htm: string, htu: string, nonce: string | undefined, forToken = false): Promise<string> =>
    signProof(h, {
      htm,
      htu,
      iat: Math.floor(Date.now() / 1000),
      jti: `admin-${++jtis}-${Date.now()}-${Math.random()}`,
      ...(forToken ? {} : { ath: ath(token) }),
      ...(nonce === undefined ? {} : { nonce }),
    });

  /** A token request to `instance` with this proof. */
  const tokenAt = async (instance: Serve, dpop: string) => {
    const response = await fetch(`${instance.url}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', dpop },
      body: form,
    });
    return {
      status: response.status,
      nonce: response.headers.get('dpop-nonce'),
      body: (await response.json()) as Record<string, unknown>,
    };
  };

  /** The nonce to use (asked of `instance`'s token endpoint), or undefined without nonces. */
  const nonceFrom = async (instance: Serve): Promise<string | undefined> => {
    if (!nonces) return undefined;
    const asked = await tokenAt(instance, await proofOf('POST', `${ISSUER}/oauth/token`, undefined, true));
    expect({ status: asked.status, error: asked.body.error }).toEqual({
      status: 400,
      error: 'use_dpop_nonce',
    });
    return asked.nonce!;
  };

  /** The 401 of a replayed proof, as every instance answers it. */
  const replayed = (nonce: string | undefined) => ({
    status: 401,
    headers: {
      'content-type': 'application/problem+json; charset=utf-8',
      'cache-control': 'no-store',
      'www-authenticate': `Bearer, DPoP error="invalid_dpop_proof", error_description="${REPLAYED}", algs="${ALGS}"`,
      ...(nonce === undefined ? {} : { 'dpop-nonce': nonce }),
    },
    body: {
      type: 'urn:tessera:problem:invalid_dpop_proof',
      title: 'Unauthorized',
      status: 401,
      detail: REPLAYED,
    },
  });

  /** An answer's status, the headers a refusal is checked by, and its body. */
  const shown = (a: Answer) => ({
    status: a.status,
    headers: Object.fromEntries(
      ['content-type', 'cache-control', 'www-authenticate', 'dpop-nonce']
        .filter((name) => a.headers[name] !== undefined)
        .map((name) => [name, a.headers[name]]),
    ),
    body: a.body,
  });

  /** Where the proof's id is kept: in Redis (not the store) with Redis, else in the store. */
  const expectRecorded = (jti: string): Promise<void> => expectProofRecorded(pair!, h.jkt, jti);

  beforeAll(async () => {
    pair = await startPostgresPair(
      ISSUER,
      'tessera-admin-dpop-',
      { ...NO_BLOCKING, ...(nonces ? { TESSERA_DPOP_NONCE: 'true' } : {}) },
      redis ? testPrefix() : undefined,
    );
    ({ env, instances } = pair);
    // An admin client bound to DPoP: every token it gets is a DPoP token.
    const created = await tesseraOk(
      env,
      'client',
      'create',
      '--name',
      'ops',
      '--admin',
      '--dpop-bound',
      '--json',
    );
    expect(created.json).toMatchObject({ dpop_bound_access_tokens: true });
    form = new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: created.json.client_id as string,
      client_secret: created.json.client_secret as string,
      audience: ADMIN,
    }).toString();
    h = await holder('ES256');

    // A token from A; B asked for one too, so that it knows the client (its admin API asks only what it knows).
    const [a, b] = instances as [Serve, Serve];
    for (const instance of [b, a]) {
      const issued = await tokenAt(
        instance,
        await proofOf('POST', `${ISSUER}/oauth/token`, await nonceFrom(instance), true),
      );
      expect({ status: issued.status, type: issued.body.token_type }).toEqual({ status: 200, type: 'DPoP' });
      token = issued.body.access_token as string;
    }
    expect(decodeJwt(token).cnf).toEqual({ jkt: h.jkt });
  }, 90_000);

  afterAll(async () => {
    await stopPostgresPair(pair);
  });

  it('a proof used at A is refused at B, and at A again; one used at B is refused at A', async () => {
    const [a, b] = instances as [Serve, Serve];
    for (const [first, second] of [
      [a, b],
      [b, a],
    ] as const) {
      // In nonce mode, the nonce the first instance gives, taken by the second.
      const nonce = await nonceFrom(first);
      const p = await proofOf('GET', CLIENTS, nonce);
      const ok = await call(first.port, token, p);
      expect(ok.status, JSON.stringify(ok.body)).toBe(200);
      expect(ok.headers['dpop-nonce']).toBe(nonce);
      expect((ok.body.items as { client_id: string }[]).length).toBeGreaterThan(0);
      for (const instance of [second, first])
        expect(shown(await call(instance.port, token, p)), `at ${instance.port}`).toEqual(replayed(nonce));
      // A fresh proof still gets in at the second instance.
      expect((await call(second.port, token, await proofOf('GET', CLIENTS, nonce))).status).toBe(200);
      await expectRecorded(decodeJwt(p).jti!);
    }
  });

  it(`one proof on ${CONNECTIONS} connections to A and B at once: exactly one call gets in`, async () => {
    const [a, b] = instances as [Serve, Serve];
    const nonce = await nonceFrom(b);
    const p = await proofOf('GET', CLIENTS, nonce);
    const ports = Array.from({ length: CONNECTIONS }, (_, i) => (i % 2 === 0 ? a.port : b.port));
    const answers = await sendAtOnce(ports, token, p);
    const summary = JSON.stringify(answers.map((x) => [x.port, x.status, x.body.type ?? 'ok']));
    expect(
      answers.filter((x) => x.status === 200),
      summary,
    ).toHaveLength(1);
    for (const other of answers.filter((x) => x.status !== 200))
      expect(shown(other)).toEqual(replayed(nonce));
    console.log(
      `${redis ? 'Redis' : 'store'}: one admin DPoP proof on ${CONNECTIONS} connections to A and B: 1 × 200, ${CONNECTIONS - 1} × 401`,
    );
  });
});
