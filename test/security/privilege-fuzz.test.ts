/**
 * No caller gives what it does not hold (MANAGEMENT.md), under random sequences of admin calls: admin clients
 * with random scope sets grant, withdraw, add secrets, disable, enable and delete each other through the admin
 * API. Every answer is the one a model of the rule predicts, and afterwards no client holds an admin scope that
 * the caller who last set its grant did not hold at that moment, nor was any client taken over (a secret added,
 * disabled, deleted) by a caller holding less than it.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_SCOPES, adminAudienceUrl, ensureAdminAudience } from '../../src/management/builtin.js';
import { EVERY_SCOPE } from '../../src/management/context.js';
import { clients, type ManagementContext } from '../../src/management/index.js';
import { adminCall, adminTokenOf } from '../helpers/admin.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** The scopes drawn from: enough to make callers differ, few enough that they often overlap. */
const SCOPES = ['clients:read', 'clients:write', 'keys:write', 'audit:read', 'operators:write'] as const;
const CALLERS = 4;
const CLIENTS = 6; // the callers, and two more

type Action = 'grant' | 'withdraw' | 'secret' | 'disable' | 'enable' | 'delete';

interface Known {
  id: string;
  exists: boolean;
  enabled: boolean;
  /** Disabled at some point: the tokens it had are revoked for good, enabled again or not. */
  revoked: boolean;
  /** Its admin grant's scopes; null: no admin grant. */
  admin: Set<string> | null;
}

let t: TestServer;
let ctx: ManagementContext;
let adminId: string;
let run = 0;
/** `<action> <status>` → how many times it was answered. */
const seen = new Map<string, number>();

beforeAll(async () => {
  // Disabled and deleted callers fail to authenticate, hundreds of times: no block for the test's own address.
  t = await startTestServer({
    TESSERA_ATTEMPTS_SOURCE_MAX: '1000000',
    TESSERA_ATTEMPTS_CLIENT_MAX: '1000000',
  });
  ctx = { store: t.server.runtime.store, config: t.config, actor: 'cli:fuzz', holds: EVERY_SCOPE };
  adminId = (await ensureAdminAudience(ctx)).id;
  // The scopes fuzzed are admin scopes the server defines.
  expect(SCOPES.every((s) => (ADMIN_SCOPES as readonly string[]).includes(s))).toBe(true);
});
afterAll(async () => {
  await t?.close();
});

const subset = fc.subarray([...SCOPES]);
/**
 * A client's admin scopes at the start: often with clients:write (so that calls get past the route's own scope to
 * the rule), sometimes no admin grant at all (null; only the clients that are not callers).
 */
const initialScopes = fc.oneof(
  { weight: 3, arbitrary: subset.map((s) => [...new Set(['clients:write', ...s])]) },
  { weight: 2, arbitrary: subset },
  { weight: 1, arbitrary: fc.constant(null) },
);
const command = fc.record({
  caller: fc.nat(CALLERS - 1),
  target: fc.nat(CLIENTS - 1),
  action: fc.constantFrom<Action>('grant', 'grant', 'withdraw', 'secret', 'disable', 'enable', 'delete'),
  scopes: subset,
});

const missing = (held: Set<string>, ...needed: Set<string>[]) =>
  [...new Set(needed.flatMap((s) => [...s]))].filter((s) => !held.has(s)).sort();

describe('random admin calls by clients with random scope sets', () => {
  it('answer as the rule says, and never leave a client holding a scope its granter did not hold', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(initialScopes, { minLength: CLIENTS, maxLength: CLIENTS }),
        fc.array(command, { minLength: 10, maxLength: 30 }),
        async (initial, commands) => {
          const url = adminAudienceUrl(t.config);
          run++;
          const known: Known[] = [];
          const tokens: { token: string; scopes: Set<string> }[] = [];
          for (let i = 0; i < CLIENTS; i++) {
            // Callers need an admin grant to get a token of the admin audience.
            const scopes = initial[i] ?? (i < CALLERS ? [] : null);
            const { client, secret } = await clients.createClient(ctx, {
              id: `fuzz-${run}-${i}`,
              name: 'fuzz',
              grants: scopes === null ? [] : [url],
              scopes: scopes === null ? {} : { [url]: scopes },
            });
            known.push({
              id: client.id,
              exists: true,
              enabled: true,
              revoked: false,
              admin: scopes && new Set(scopes),
            });
            if (i < CALLERS) {
              await t.sync();
              tokens.push({
                token: await adminTokenOf(t, client.id, secret, scopes!),
                scopes: new Set(scopes),
              });
            }
          }
          await t.sync();

          for (const c of commands) {
            const caller = known[c.caller]!;
            const target = known[c.target]!;
            const token = tokens[c.caller]!;
            // What the caller holds now: its token's scopes, as far as its grant still holds them.
            const holds = new Set([...token.scopes].filter((s) => caller.admin?.has(s)));
            const current = target.admin ?? new Set<string>();
            const next =
              c.action === 'grant'
                ? new Set(c.scopes)
                : c.action === 'withdraw'
                  ? new Set<string>()
                  : current;

            const [method, path, body] = {
              grant: ['PUT', `/clients/${target.id}/grants/${adminId}`, { scopes: c.scopes }],
              withdraw: ['DELETE', `/clients/${target.id}/grants/${adminId}`],
              secret: ['POST', `/clients/${target.id}/secrets`, {}],
              disable: ['PATCH', `/clients/${target.id}`, { enabled: false }],
              enable: ['PATCH', `/clients/${target.id}`, { enabled: true }],
              delete: ['DELETE', `/clients/${target.id}`],
            }[c.action] as [string, string, unknown?];
            const answer = await adminCall(t, { token: token.token }, method, path, body);

            // The model of the rule.
            let expected: number;
            let challenge: string | null = null;
            if (!caller.exists || !caller.enabled || caller.revoked) expected = 401;
            else if (!holds.has('clients:write')) {
              expected = 403;
              challenge = 'Bearer error="insufficient_scope", scope="clients:write"';
            } else if (target.exists && missing(holds, current, next).length > 0) {
              expected = 403;
              challenge = `Bearer error="insufficient_scope", scope="${missing(holds, current, next).join(' ')}"`;
            } else if (!target.exists) expected = 404;
            else if (c.action === 'withdraw' && target.admin === null) expected = 404;
            else
              expected = {
                grant: target.admin === null ? 201 : 200,
                withdraw: 204,
                secret: 201,
                disable: 200,
                enable: 200,
                delete: 204,
              }[c.action];
            const what = `${run}: ${caller.id} ${c.action} ${target.id} [${c.scopes.join(' ')}] holding [${[...holds].join(' ')}]`;
            expect(answer.status, `${what}: ${JSON.stringify(answer.body)}`).toBe(expected);
            seen.set(`${c.action} ${expected}`, (seen.get(`${c.action} ${expected}`) ?? 0) + 1);
            if (challenge !== null) expect(answer.headers.get('www-authenticate'), what).toBe(challenge);
            if (expected >= 300) continue;

            // Allowed: whatever the target holds before and after, the caller held (the property itself).
            for (const scope of [...current, ...next])
              expect(holds.has(scope), `${what}: ${scope}`).toBe(true);
            if (c.action === 'grant') target.admin = new Set(c.scopes);
            else if (c.action === 'withdraw') target.admin = null;
            else if (c.action === 'disable') {
              // Disabling a client that was enabled revokes the tokens it has (INTERFACE.md).
              if (target.enabled) target.revoked = true;
              target.enabled = false;
            } else if (c.action === 'enable') target.enabled = true;
            else if (c.action === 'delete') target.exists = false;
            // Every instance sees a change within a second; this one at once, for the next call.
            await t.sync();
          }

          // The store agrees with the model: each client's admin grant is exactly what the allowed calls made.
          for (const k of known) {
            const stored = await t.server.runtime.store.findClient(k.id);
            expect(stored !== undefined, k.id).toBe(k.exists);
            if (!stored) continue;
            expect(stored.enabled, k.id).toBe(k.enabled);
            const grant = stored.grants.find((g) => g.audience === url);
            expect(grant ? [...grant.scopes].sort() : null, k.id).toEqual(
              k.admin ? [...k.admin].sort() : null,
            );
          }
        },
      ),
      { numRuns: 60 },
    );
    // Not vacuous: the sequences reached every kind of answer, and the rule refused and allowed each action.
    console.log(
      [...seen]
        .sort()
        .map(([k, n]) => `${k}: ${n}`)
        .join(', '),
    );
    for (const action of ['grant', 'withdraw', 'secret', 'disable', 'delete'])
      for (const status of [
        403,
        action === 'grant' ? 200 : action === 'secret' ? 201 : action === 'disable' ? 200 : 204,
      ])
        expect(seen.get(`${action} ${status}`), `${action} ${status}`).toBeGreaterThan(0);
    for (const status of [401, 404])
      expect([...seen.keys()].some((k) => k.endsWith(` ${status}`))).toBe(true);
  }, 240_000);
});
