/**
 * A DPoP proof is good once, whichever instance it reaches, and a nonce one instance gives is good at the
 * other (INTERFACE.md, "DPoP": jti unseen "on every instance"; a nonce "good for at least 2 minutes on every
 * instance ... derived, not stored"). Two real `tessera serve` processes on one PostgreSQL, with
 * TESSERA_DPOP_NONCE=true, without Redis (the proof ids go to the store) and with Redis (they go to Redis):
 * the nonce from A's use_dpop_nonce taken by B; a proof used at B refused at A; one proof sent to both at once
 * over 20 connections, one token. The issuer (and so every proof's htu) is the public URL, not an instance's.
 *
 * The CLI loads dist/, so `npm run build` must have run (`npm test` does).
 */
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { holder, signProof, type Holder } from '../helpers/dpop.js';
import {
  expectProofRecorded,
  startPostgresPair,
  stopPostgresPair,
  type PostgresPair,
} from '../helpers/instances.js';
import { tesseraOk, type Serve } from '../helpers/process.js';
import { sendRawAtOnce, tokenRequest, type JsonAnswer } from '../helpers/raw-http.js';
import { testPrefix } from '../helpers/redis.js';
import { NO_BLOCKING } from '../helpers/server.js';

const ISSUER = 'https://auth.tessera.test';
const API = 'https://api.example.com';
const CONNECTIONS = 20;
const REPLAYED = {
  error: 'invalid_dpop_proof',
  error_description: 'DPoP proof jti was already used',
};

/** Sends `form` with `dpop` to each port, one connection each, every request written in the same turn. */
const sendAtOnce = (ports: number[], form: string, dpop: string): Promise<JsonAnswer[]> =>
  sendRawAtOnce(ports, (port) => tokenRequest(port, form, { DPoP: dpop }));

const send = async (port: number, form: string, dpop: string) => (await sendAtOnce([port], form, dpop))[0]!;

/** A proof for the public token endpoint, its jti and nonce given. */
function proofOf(h: Holder, jti: string, nonce?: string): Promise<string> {
  return signProof(h, {
    htm: 'POST',
    htu: `${ISSUER}/oauth/token`,
    iat: Math.floor(Date.now() / 1000),
    jti,
    ...(nonce === undefined ? {} : { nonce }),
  });
}

describe.each([
  { name: 'without Redis: the proof ids go to the store', redis: false },
  { name: 'with Redis: the proof ids go to Redis', redis: true },
])('two instances on one PostgreSQL with TESSERA_DPOP_NONCE=true, $name', ({ redis }) => {
  let pair: PostgresPair | undefined;
  let env: NodeJS.ProcessEnv;
  let instances: Serve[] = [];
  let form: string;
  let h: Holder;

  beforeAll(async () => {
    pair = await startPostgresPair(
      ISSUER,
      'tessera-dpop-',
      { ...NO_BLOCKING, TESSERA_DPOP_NONCE: 'true' },
      redis ? testPrefix() : undefined,
    );
    ({ env, instances } = pair);
    await tesseraOk(env, 'audience', 'add', API);
    // Bound to DPoP: every token it gets here is a DPoP token.
    const created = await tesseraOk(
      env,
      'client',
      'create',
      '--name',
      'dpop',
      '--grant',
      API,
      '--dpop-bound',
      '--json',
    );
    form = new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: created.json.client_id as string,
      client_secret: created.json.client_secret as string,
      audience: API,
    }).toString();
    h = await holder('ES256');
  }, 90_000);

  afterAll(async () => {
    await stopPostgresPair(pair);
  });

  /** The nonce A gives, in its use_dpop_nonce answer to a proof without one. */
  async function nonceFromA(): Promise<string> {
    const asked = await send(
      instances[0]!.port,
      form,
      await proofOf(h, `ask-${Date.now()}-${Math.random()}`),
    );
    expect({ status: asked.status, error: asked.body.error }).toEqual({
      status: 400,
      error: 'use_dpop_nonce',
    });
    return asked.headers['dpop-nonce']!;
  }

  /** Where the proof's id is kept: in Redis (not the store) with Redis, else in the store. */
  const expectRecorded = (jti: string): Promise<void> => expectProofRecorded(pair!, h.jkt, jti);

  it("A's nonce is taken by B; the proof used at B is refused at A, and at B again", async () => {
    const [a, b] = instances as [Serve, Serve];
    const nonce = await nonceFromA();
    const jti = `one-${Date.now()}`;
    const p = await proofOf(h, jti, nonce);
    const issued = await send(b.port, form, p);
    expect({ status: issued.status, type: issued.body.token_type }).toEqual({ status: 200, type: 'DPoP' });
    expect(issued.headers['dpop-nonce']).toBe(nonce);
    expect(decodeJwt(issued.body.access_token as string).cnf).toEqual({ jkt: h.jkt });
    for (const port of [a.port, b.port]) {
      const again = await send(port, form, p);
      expect({ status: again.status, body: again.body }).toEqual({ status: 400, body: REPLAYED });
      expect(again.headers['cache-control']).toBe('no-store');
    }
    await expectRecorded(jti);
  });

  it(`one proof on ${CONNECTIONS} connections to A and B at once: exactly one token`, async () => {
    const [a, b] = instances as [Serve, Serve];
    const nonce = await nonceFromA();
    const p = await proofOf(h, `many-${Date.now()}`, nonce);
    const ports = Array.from({ length: CONNECTIONS }, (_, i) => (i % 2 === 0 ? a.port : b.port));
    const answers = await sendAtOnce(ports, form, p);
    const summary = JSON.stringify(answers.map((x) => [x.port, x.status, x.body.error ?? 'token']));
    expect(
      answers.filter((x) => x.status === 200),
      summary,
    ).toHaveLength(1);
    for (const other of answers.filter((x) => x.status !== 200))
      expect({ status: other.status, body: other.body }).toEqual({ status: 400, body: REPLAYED });
    console.log(
      `${redis ? 'Redis' : 'store'}: one DPoP proof on ${CONNECTIONS} connections to A and B: 1 token, ${CONNECTIONS - 1} × 400`,
    );
  });
});
