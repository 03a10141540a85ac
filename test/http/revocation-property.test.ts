/**
 * A property of revocation (INTERFACE.md, "Revocation and introspection"), on a real server over SQLite and over
 * PostgreSQL: no sequence of a client's deletions, re-creations under the same id, revoke-tokens, disabling and
 * enabling ever makes a token active again once introspection has answered it inactive. The server's clock is
 * held and moved by the test (a few hundred ms a step), so that steps fall in the same second and across seconds,
 * where cuts are decided.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { audiences, clients, type ManagementContext } from '../../src/management/index.js';
import { createTestDatabase, type TestDatabase } from '../helpers/postgres.js';
import { tokenParams } from '../helpers/provision.js';
import { basic, NO_BLOCKING, postToken, startTestServer, type TestServer } from '../helpers/server.js';
import { clockAt } from '../helpers/clock.js';
import { managementOf } from '../helpers/management.js';

const API = 'https://api.example.com';
const OTHER = 'https://other.example.com';
/** The client ids the commands play with: few, so that deletions and re-creations meet. */
const IDS = ['svc-a', 'svc-b'] as const;

type Command =
  | { kind: 'token'; id: (typeof IDS)[number] }
  | { kind: 'delete'; id: (typeof IDS)[number] }
  | { kind: 'create'; id: (typeof IDS)[number]; audience: string }
  | { kind: 'revoke-tokens'; id: (typeof IDS)[number] }
  | { kind: 'disable'; id: (typeof IDS)[number] }
  | { kind: 'enable'; id: (typeof IDS)[number] }
  | { kind: 'wait'; ms: number };

const id = fc.constantFrom(...IDS);
const command: fc.Arbitrary<Command> = fc.oneof(
  { weight: 4, arbitrary: id.map((id) => ({ kind: 'token' as const, id })) },
  { weight: 2, arbitrary: id.map((id) => ({ kind: 'delete' as const, id })) },
  {
    weight: 3,
    arbitrary: fc
      .record({ id, audience: fc.constantFrom(API, OTHER) })
      .map((c) => ({ kind: 'create' as const, ...c })),
  },
  { weight: 1, arbitrary: id.map((id) => ({ kind: 'revoke-tokens' as const, id })) },
  { weight: 1, arbitrary: id.map((id) => ({ kind: 'disable' as const, id })) },
  { weight: 1, arbitrary: id.map((id) => ({ kind: 'enable' as const, id })) },
  { weight: 3, arbitrary: fc.integer({ min: 0, max: 1200 }).map((ms) => ({ kind: 'wait' as const, ms })) },
);

describe.each([
  ['SQLite', false],
  ['PostgreSQL', true],
] as const)('revocation never revives a token, on %s', (_name, postgres) => {
  let db: TestDatabase | undefined;
  let t: TestServer;
  let ctx: ManagementContext;
  let clock = Date.now();
  const now = () => clock;
  let rs: { id: string; secret: string };

  beforeAll(async () => {
    db = postgres ? await createTestDatabase() : undefined;
    t = await startTestServer(
      { ...NO_BLOCKING, ...(db ? { TESSERA_DATABASE_URL: db.url } : {}) },
      undefined,
      { clock: clockAt(now) },
    );
    ctx = managementOf(t, 'cli:test', now);
    await audiences.addAudience(ctx, { url: API });
    await audiences.addAudience(ctx, { url: OTHER });
    const made = await clients.createClient(ctx, { name: 'rs', adminScopes: ['tokens:introspect'] });
    rs = { id: made.client.id, secret: made.secret! };
    await t.sync();
  }, 60_000);

  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  const active = async (token: string): Promise<boolean> => {
    const response = await fetch(`${t.url}/oauth/introspect`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: basic(rs.id, rs.secret),
      },
      body: new URLSearchParams({ token }).toString(),
    });
    expect(response.status).toBe(200);
    return ((await response.json()) as { active: boolean }).active;
  };

  it('no sequence of delete, create, revoke-tokens, disable and enable makes an inactive token active', async () => {
    let round = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(command, { minLength: 4, maxLength: 24 }), async (commands) => {
        round += 1;
        // Each round its own ids, and its own second to start in.
        clock += 5000;
        const idOf = (name: string) => `${name}-${round}`;
        const secrets = new Map<string, { secret: string; audience: string }>();
        const tokens: { token: string; id: string; inactiveSeen: boolean }[] = [];
        for (const c of commands) {
          if (c.kind === 'wait') clock += c.ms;
          else {
            const cid = idOf(c.id);
            const held = secrets.get(cid);
            if (c.kind === 'token') {
              if (held === undefined) continue;
              const answer = await postToken(t.url, tokenParams(cid, held.secret, held.audience));
              if (answer.status === 200)
                tokens.push({ token: answer.body.access_token as string, id: cid, inactiveSeen: false });
            } else if (c.kind === 'create') {
              if (held !== undefined) continue;
              const made = await clients.createClient(ctx, { id: cid, name: cid, grants: [c.audience] });
              secrets.set(cid, { secret: made.secret!, audience: c.audience });
            } else if (held !== undefined) {
              if (c.kind === 'delete') {
                await clients.deleteClient(ctx, cid);
                secrets.delete(cid);
              } else if (c.kind === 'revoke-tokens') await clients.revokeClientTokens(ctx, cid);
              else await clients.setEnabled(ctx, cid, c.kind === 'enable');
            }
            await t.sync();
          }
          // After every step: each token inactive once stays inactive.
          for (const issued of tokens) {
            const isActive = await active(issued.token);
            if (issued.inactiveSeen)
              expect(isActive, `${issued.id}'s token active again after ${JSON.stringify(commands)}`).toBe(
                false,
              );
            if (!isActive) issued.inactiveSeen = true;
          }
        }
      }),
      { numRuns: 60 },
    );
  }, 120_000);
});
