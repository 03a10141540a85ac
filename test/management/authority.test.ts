/**
 * The one authorization rule (MANAGEMENT.md, "No caller gives what it does not hold"), as a function of the
 * caller's scopes, the target's admin scopes now and the target's admin scopes after the change: every case.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { missingScopes, requireHeld } from '../../src/management/authority.js';
import { ADMIN_SCOPES } from '../../src/management/builtin.js';
import { EVERY_SCOPE, type Holdings } from '../../src/management/context.js';

const set = (...scopes: string[]): Holdings => new Set(scopes);
const R = 'clients:read';
const W = 'clients:write';
const K = 'keys:write';
const O = 'operators:write';

describe('missingScopes(caller holds, target holds now, target would hold)', () => {
  it.each<[string, Holdings, string[], string[], string[]]>([
    // [case, caller, current, next, missing]
    ['a target with no admin scopes, none given', set(W), [], [], []],
    ['a caller with no scopes at all, nothing at stake', set(), [], [], []],
    ['granting scopes the caller holds', set(R, W), [], [R], []],
    ['granting every scope the caller holds', set(R, W), [], [R, W], []],
    ['granting a scope the caller lacks', set(R, W), [], [K], [K]],
    ['granting some held and some not', set(R, W), [], [R, K, O], [K, O]],
    ['changing a target that holds a scope the caller lacks, its scopes unchanged', set(R, W), [K], [K], [K]],
    ['lowering a target that holds more than the caller', set(R, W), [R, K], [R], [K]],
    ['removing every scope of a target that holds more than the caller', set(R, W), [K], [], [K]],
    ['lowering a target whose scopes the caller holds', set(R, W, K), [R, K], [R], []],
    ['raising a target within what the caller holds', set(R, W, K), [R], [R, K], []],
    ['raising a target past what the caller holds', set(R, W), [R], [R, O], [O]],
    ['a target equal to the caller', set(R, W), [R, W], [R, W], []],
    ['missing scopes sorted and each once', set(), [O, K], [K, R], [R, K, O].sort()],
    ['the local CLI holds every scope', EVERY_SCOPE, [...ADMIN_SCOPES], [...ADMIN_SCOPES], []],
    ['the local CLI grants anything', EVERY_SCOPE, [], [...ADMIN_SCOPES], []],
  ])('%s', (_, held, current, next, missing) => {
    expect(missingScopes(held, current, next)).toEqual(missing);
  });

  it('allows exactly the changes whose before and after the caller holds whole', () => {
    const scope = fc.constantFrom(...ADMIN_SCOPES);
    const scopes = fc.uniqueArray(scope, { maxLength: ADMIN_SCOPES.length });
    fc.assert(
      fc.property(scopes, scopes, scopes, (held, current, next) => {
        const missing = missingScopes(new Set(held), current, next);
        const needed = new Set([...current, ...next]);
        expect(missing).toEqual([...needed].filter((s) => !held.includes(s)).sort());
        expect(missing.length === 0).toBe([...needed].every((s) => held.includes(s)));
      }),
    );
  });
});

describe('requireHeld', () => {
  it('throws insufficient_scope with the scopes missing, or nothing', () => {
    expect(() => requireHeld({ holds: set(R, W) }, 'a change of client c1', [K, O], [K])).toThrow(
      expect.objectContaining({
        code: 'insufficient_scope',
        kind: 'forbidden',
        scopes: [K, O],
        message:
          'a change of client c1 needs every admin scope it holds or would hold, and this caller lacks keys:write operators:write',
      }),
    );
    expect(() => requireHeld({ holds: set(R, W, K, O) }, 'a change', [K, O], [K])).not.toThrow();
  });
});
