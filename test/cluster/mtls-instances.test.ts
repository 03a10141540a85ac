/**
 * Two instances on one PostgreSQL agree on mutual TLS (INTERFACE.md, "Mutual TLS…"; DESIGN.md, "Scaling out"):
 * behind a proxy that forwards client certificates (RFC 9440 Client-Cert, from 127.0.0.1, the trusted proxy), a
 * tls_client_auth client made with the CLI gets a certificate-bound token from either instance; both refuse a
 * certificate of a CA they do not trust with the same answer; a change of the client's registered SAN on one
 * reaches the other within a second; and a certificate-bound admin token from one is taken by the other's admin API
 * only with its certificate.
 *
 * The CLI loads dist/, so `npm run build` must have run (`npm test` does).
 */
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPostgresPair, stopPostgresPair, type PostgresPair } from '../helpers/instances.js';
import { issueCert, makeCa, writePems, type Issued } from '../helpers/pki.js';
import { tesseraOk, type Serve } from '../helpers/process.js';
import { NO_BLOCKING } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';

const ISSUER = 'https://auth.tessera.test';
const API = 'https://api.example.com';
const SPIFFE = 'spiffe://prod.example.com/ns/billing/sa/worker';
const MOVED = 'spiffe://prod.example.com/ns/billing/sa/worker-v2';
const INVALID_CLIENT = { error: 'invalid_client', error_description: 'client authentication failed' };

let pair: PostgresPair | undefined;
let a: Serve;
let b: Serve;
let worker: Issued;
let moved: Issued;
let untrusted: Issued;
let clientId: string;

const header = (leaf: Issued): Record<string, string> => ({
  'client-cert': `:${leaf.der.toString('base64')}:`,
});

async function tokenAt(instance: Serve, leaf: Issued, audience = API) {
  const response = await fetch(`${instance.url}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...header(leaf) },
    body: new URLSearchParams({ grant_type: 'client_credentials', client_id: clientId, audience }).toString(),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

beforeAll(async () => {
  const root = await makeCa({ subject: 'CN=Example Client Root' });
  const other = await makeCa({ subject: 'CN=Somebody Else Root' });
  worker = await issueCert(root, { subject: 'CN=worker,O=Example Inc', san: { uri: [SPIFFE] } });
  moved = await issueCert(root, { subject: 'CN=worker,O=Example Inc', san: { uri: [MOVED] } });
  untrusted = await issueCert(other, { subject: 'CN=worker,O=Example Inc', san: { uri: [SPIFFE] } });
  const files = await writePems({ 'client-ca.pem': root.certPem });
  pair = await startPostgresPair(ISSUER, 'tessera-mtls-', {
    ...NO_BLOCKING,
    TESSERA_TRUST_PROXY: '127.0.0.1',
    TESSERA_CLIENT_CERT_HEADER: 'client-cert',
    TESSERA_TLS_CLIENT_CA: files['client-ca.pem']!,
  });
  [a, b] = pair.instances as [Serve, Serve];
  await tesseraOk(pair.env, 'audience', 'add', API);
  const created = await tesseraOk(
    pair.env,
    'client',
    'create',
    '--name',
    'worker',
    '--auth-method',
    'tls_client_auth',
    '--tls-san-uri',
    SPIFFE,
    '--cert-bound-tokens',
    '--grant',
    API,
    '--admin',
    '--admin-scopes',
    'clients:read',
    '--json',
  );
  clientId = created.json.client_id as string;
  expect(created.json.client_secret).toBeUndefined();
}, 120_000);

afterAll(async () => {
  await stopPostgresPair(pair);
});

describe('mutual TLS on two instances of one PostgreSQL', () => {
  it('either instance issues a token bound to the certificate; both refuse an untrusted CA alike', async () => {
    for (const instance of [a, b]) {
      const answer = await tokenAt(instance, worker);
      expect(answer.status).toBe(200);
      const claims = decodeJwt(answer.body.access_token as string);
      expect([claims.iss, claims.client_id, claims.cnf]).toEqual([
        ISSUER,
        clientId,
        { 'x5t#S256': worker.x5t },
      ]);
      expect(await tokenAt(instance, untrusted)).toEqual({ status: 401, body: INVALID_CLIENT });
    }
  });

  it('a certificate-bound admin token from A is taken at B only with its certificate', async () => {
    const issued = await tokenAt(a, worker, `${ISSUER}/admin/v1`);
    expect(issued.status).toBe(200);
    const call = async (leaf: Issued | undefined) =>
      (
        await fetch(`${b.url}/admin/v1/clients?limit=1`, {
          headers: {
            authorization: `Bearer ${issued.body.access_token as string}`,
            ...(leaf === undefined ? {} : header(leaf)),
          },
        })
      ).status;
    expect(await call(worker)).toBe(200);
    expect(await call(undefined)).toBe(401);
    expect(await call(moved)).toBe(401);
  });

  it('a change of the registered SAN (by the CLI, on the store) reaches both instances within a second', async () => {
    await tesseraOk(pair!.env, 'client', 'update', clientId, '--tls-san-uri', MOVED);
    // Each instance hears of the change on its own (its notification, else its poll): neither waits for the other.
    const took = await Promise.all(
      [a, b].map((instance) => waitFor(async () => (await tokenAt(instance, moved)).status === 200, 1000)),
    );
    expect(Math.max(...took)).toBeLessThan(1000);
    expect(await tokenAt(b, worker)).toEqual({ status: 401, body: INVALID_CLIENT });
    expect(await tokenAt(a, worker)).toEqual({ status: 401, body: INVALID_CLIENT });
  });
});
