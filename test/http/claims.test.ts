/**
 * Custom claims (INTERFACE.md, "Custom claims"): per client and per grant (the grant's override the client's
 * for its audience), refused when reserved or too large, and in every token after the registered claims.
 */
import { decodeJwt, decodeProtectedHeader, jwtVerify, createRemoteJWKSet } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RESERVED_CLAIMS } from '../../src/domain/validate.js';
import { audiences, clients, grants, ManagementError } from '../../src/management/index.js';
import type { ManagementContext } from '../../src/management/index.js';
import { REGISTERED_CLAIMS } from '../helpers/expected.js';
import { managementOf } from '../helpers/management.js';
import { issuedToken } from '../helpers/provision.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const API = 'https://orders.example.com';
const OTHER = 'https://other.example.com';

let t: TestServer;
let ctx: ManagementContext;
let svc: { id: string; secret: string };

beforeAll(async () => {
  t = await startTestServer();
  ctx = managementOf(t, 'test');
  await audiences.addAudience(ctx, { url: API, scopes: [{ name: 'orders:read' }] });
  await audiences.addAudience(ctx, { url: OTHER });
  const made = await clients.createClient(ctx, {
    name: 'svc',
    grants: [API, OTHER],
    scopes: { [API]: ['orders:read'] },
    claims: { tenant_id: 'acme', plan: 'gold', limits: { rps: 10 } },
  });
  svc = { id: made.client.id, secret: made.secret };
  await grants.setGrant(ctx, svc.id, API, { claims: { plan: 'platinum', region: 'eu' } });
  await t.sync();
});
afterAll(async () => {
  await t?.close();
});

const tokenFor = (audience: string) => issuedToken(t.url, svc, audience);

describe('custom claims in tokens', () => {
  it("the registered claims first, then the client's, the grant's overriding them for its audience", async () => {
    const token = await tokenFor(API);
    const payload = decodeJwt(token);
    expect(Object.keys(payload)).toEqual([
      ...REGISTERED_CLAIMS,
      'scope',
      'tenant_id',
      'plan',
      'limits',
      'region',
    ]);
    expect(payload).toMatchObject({ tenant_id: 'acme', plan: 'platinum', limits: { rps: 10 }, region: 'eu' });
    // A verifier library accepts it as any token.
    const verified = await jwtVerify(token, createRemoteJWKSet(new URL(`${t.url}/.well-known/jwks.json`)), {
      issuer: t.url,
      audience: API,
      typ: 'at+jwt',
    });
    expect(verified.payload.plan).toBe('platinum');
    expect(decodeProtectedHeader(token).typ).toBe('at+jwt');
  });

  it('another audience gets the client claims only', async () => {
    const payload = decodeJwt(await tokenFor(OTHER));
    expect(payload).toMatchObject({ tenant_id: 'acme', plan: 'gold', limits: { rps: 10 } });
    expect(payload).not.toHaveProperty('region');
    expect(payload).not.toHaveProperty('scope');
  });

  it('a change of claims reaches the token endpoint with the change feed; {} removes them', async () => {
    await clients.updateClient(ctx, svc.id, { claims: { tenant_id: 'globex' } });
    await grants.setGrant(ctx, svc.id, API, { claims: null });
    await t.sync();
    const payload = decodeJwt(await tokenFor(API));
    expect(payload.tenant_id).toBe('globex');
    expect(payload).not.toHaveProperty('plan');
    await clients.updateClient(ctx, svc.id, { claims: {} });
    expect((await ctx.store.findClient(svc.id))?.claims).toBeNull();
    await t.sync();
    expect(Object.keys(decodeJwt(await tokenFor(OTHER)))).toEqual(REGISTERED_CLAIMS);
  });
});

describe('the rules, at configuration time', () => {
  const refusal = (claims: unknown) =>
    clients.updateClient(ctx, svc.id, { claims: claims as Record<string, unknown> }).then(
      () => undefined,
      (e: unknown) => e as ManagementError,
    );

  it.each([...RESERVED_CLAIMS])('%s is reserved', async (name) => {
    const error = await refusal({ [name]: 'x' });
    expect(error).toBeInstanceOf(ManagementError);
    expect({ code: error?.code, field: error?.field, message: error?.message }).toEqual({
      code: 'invalid_field',
      field: 'claims',
      message: `claim ${name} is registered: Tessera sets it, it cannot be a custom claim`,
    });
  });

  it.each(['tessera', 'tessera_role', 'TesseraX'])('%s starts with tessera: refused', async (name) => {
    expect((await refusal({ [name]: 1 }))?.message).toBe(
      `claim ${name}: names starting with "tessera" are reserved`,
    );
  });

  it('__proto__ is refused (a name that would set a prototype where claims are merged)', async () => {
    expect((await refusal(JSON.parse('{"__proto__": {"admin": true}}')))?.message).toBe(
      'claim __proto__ is not allowed',
    );
  });

  it('at most 4 KiB as JSON; an object, not a list or a value', async () => {
    expect((await refusal({ big: 'x'.repeat(4096) }))?.message).toBe(
      'claims are 4106 bytes as JSON; at most 4096',
    );
    expect(await refusal({ fits: 'x'.repeat(4084) })).toBeUndefined();
    expect((await refusal(['a']))?.message).toBe('claims must be a JSON object');
    expect((await refusal('a'))?.message).toBe('claims must be a JSON object');
  });

  it('at most 31 levels of their own (32 in a body that holds them), whatever face they come through', async () => {
    let deep: Record<string, unknown> = {};
    for (let i = 1; i < 31; i++) deep = { a: deep };
    expect(await refusal(deep)).toBeUndefined();
    const error = await refusal({ a: deep });
    expect({ code: error?.code, field: error?.field, message: error?.message }).toEqual({
      code: 'invalid_field',
      field: 'claims',
      message: `claims must nest at most 31 levels (a request body, 32); ${'/a'.repeat(31)} is deeper`,
    });
    // As the CLI's --claims hands them over: 5,000 levels are refused by the rule, not by a stack overflow.
    const huge = JSON.parse('{"x":'.repeat(5000) + '1' + '}'.repeat(5000)) as Record<string, unknown>;
    expect((await refusal(huge))?.message).toBe(
      `claims must nest at most 31 levels (a request body, 32); ${'/x'.repeat(31)} is deeper`,
    );
    await expect(grants.setGrant(ctx, svc.id, API, { claims: huge })).rejects.toThrow(
      `claims must nest at most 31 levels (a request body, 32); ${'/x'.repeat(31)} is deeper`,
    );
    const keys = JSON.parse('{"keys":' + '['.repeat(5000) + ']'.repeat(5000) + '}') as object;
    await expect(clients.updateClient(ctx, svc.id, { jwks: keys as never })).rejects.toThrow(
      `jwks must nest at most 31 levels (a request body, 32); /keys${'/0'.repeat(30)} is deeper`,
    );
  });

  it("a grant's claims follow the same rules", async () => {
    await expect(grants.setGrant(ctx, svc.id, API, { claims: { aud: 'x' } })).rejects.toThrow(
      'claim aud is registered: Tessera sets it, it cannot be a custom claim',
    );
  });
});
