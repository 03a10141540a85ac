import { describe, expect, it } from 'vitest';
import {
  limitParts,
  limitsMarkdown,
  limitsTable,
  limitsText,
  pathLimit,
  pathOf,
  PATHS,
  referenceCosts,
  type Verifications,
} from '../bench/lib/limits.js';

// Each path's physical limit on one core (issue 45, bench/lib/limits.js), from figures made by hand.

const VERIFY: Verifications = {
  es256Crypto: 20,
  es256Jose: 55,
  rs256Jose: 75,
  rs256Crypto: 15,
  replayRecord: 20,
  replayBatch: 16,
};
const SIGNATURE = { usPerSignature: 45 };

const row = (scenario: string, connections: number, reqPerSec: number, serverCpuUsPerRequest: number) => ({
  scenario,
  connections,
  reqPerSec,
  serverCpuUsPerRequest,
});

const ROWS = [
  row('floor', 100, 15_000, 55),
  row('ceiling', 100, 11_000, 80),
  row('ceiling-audited', 100, 9000, 105),
  row('tessera-sqlite', 100, 6000, 150),
  row('oidc-provider', 100, 1500, 650),
  row('tessera-sqlite-pkjwt', 100, 3000, 320),
  row('oidc-provider-pkjwt', 100, 1000, 980),
  row('tessera-sqlite-introspect', 100, 9000, 100),
  // No floor at concurrency 10: no limit there.
  row('tessera-sqlite', 10, 5000, 170),
];

const path = (name: string) => PATHS.find((p) => p.path === name)!;

describe('bench: each path’s physical limit on one core', () => {
  it('takes the floor, the signature, the loops’ figures and the audited ceiling’s extra CPU of one concurrency', () => {
    expect(referenceCosts(ROWS, 100, SIGNATURE, VERIFY)).toEqual({
      floorUs: 55,
      signatureUs: 45,
      auditUs: 25,
      verifications: VERIFY,
    });
    // Without the floor's row, or the loops' figures: nothing.
    expect(referenceCosts(ROWS, 10, SIGNATURE, VERIFY)).toBe(undefined);
    expect(referenceCosts(ROWS, 100, undefined, VERIFY)).toBe(undefined);
    expect(referenceCosts(ROWS, 100, SIGNATURE, undefined)).toBe(undefined);
    // An audited ceiling cheaper than the ceiling (noise) counts as no cost; without it, the cost is unknown.
    const cheaper = ROWS.map((r) =>
      r.scenario === 'ceiling-audited' ? { ...r, serverCpuUsPerRequest: 70 } : r,
    );
    expect(referenceCosts(cheaper, 100, SIGNATURE, VERIFY)?.auditUs).toBe(0);
    const unaudited = ROWS.filter((r) => r.scenario !== 'ceiling-audited');
    expect(referenceCosts(unaudited, 100, SIGNATURE, VERIFY)?.auditUs).toBe(undefined);
  });

  it('adds what each path does to the floor', () => {
    const costs = referenceCosts(ROWS, 100, SIGNATURE, VERIFY)!;
    const limit = (name: string) => pathLimit(path(name), costs);
    expect(limit('Bearer (secret)')).toEqual({
      parts: [
        ['HTTP floor', 55],
        ['signature', 45],
        ['audit event', 25],
      ],
      usPerAnswer: 125,
      reqPerSec: 8000,
      missing: [],
    });
    expect(limit('private_key_jwt')).toEqual({
      parts: [
        ['HTTP floor', 55],
        ['signature', 45],
        ['ES256 verification (node:crypto)', 20],
        ['replay record', 20],
        ['audit event', 25],
      ],
      usPerAnswer: 165,
      reqPerSec: 1e6 / 165,
      missing: [],
    });
    expect(limit('DPoP').parts).toEqual([
      ['HTTP floor', 55],
      ['signature', 45],
      ['ES256 verification (node:crypto)', 20],
      ['replay record', 20],
      ['audit event', 25],
    ]);
    expect(limit('DPoP').usPerAnswer).toBe(165);
    expect(limit('DPoP').reqPerSec).toBe(1e6 / 165);
    // The platform token is verified, never recorded (the credential is not `once`).
    expect(limit('federated credential').parts).toEqual([
      ['HTTP floor', 55],
      ['signature', 45],
      ['RS256 verification (node:crypto)', 15],
      ['audit event', 25],
    ]);
    expect(limit('federated credential').reqPerSec).toBe(1e6 / 140);
    // Introspection signs nothing and audits nothing: the floor and one verification.
    expect(limit('introspection')).toEqual({
      parts: [
        ['HTTP floor', 55],
        ['ES256 verification (node:crypto)', 20],
      ],
      usPerAnswer: 75,
      reqPerSec: 1e6 / 75,
      missing: [],
    });
    expect(limit('token exchange').usPerAnswer).toBe(55 + 45 + 20 + 25);
    // Without the audited ceiling, the limit leaves the audit event out and says so.
    expect(pathLimit(path('Bearer (secret)'), { ...costs, auditUs: undefined })).toEqual({
      parts: [
        ['HTTP floor', 55],
        ['signature', 45],
      ],
      usPerAnswer: 100,
      reqPerSec: 10_000,
      missing: ['audit event'],
    });
  });

  it('sets each scenario against its own path', () => {
    expect(pathOf('tessera-sqlite').path).toBe('Bearer (secret)');
    expect(pathOf('tessera-sqlite-pkjwt@5839d5a#2').path).toBe('private_key_jwt');
    expect(pathOf('tessera-sqlite-dpop-redis').path).toBe('DPoP');
    expect(pathOf('tessera-pg-dpop').path).toBe('DPoP');
    expect(pathOf('oidc-provider-pkjwt').path).toBe('private_key_jwt');
    expect(pathOf('oidc-provider-dpop').path).toBe('DPoP');
    expect(pathOf('oidc-provider').path).toBe('Bearer (secret)');
    expect(pathOf('tessera-sqlite-tls').path).toBe('Bearer (secret)');
    expect(pathOf('ceiling-audited').path).toBe('Bearer (secret)');
    // The bare servers keep no audit trail: the floor and one signature.
    for (const bare of ['ceiling', 'ceiling-at-once', 'floor']) {
      const p = pathOf(bare);
      expect(pathLimit(p, referenceCosts(ROWS, 100, SIGNATURE, VERIFY)!).usPerAnswer).toBe(100);
    }
  });

  it('tabulates the limit, Tessera’s share of it and node-oidc-provider on the same path', () => {
    const table = limitsTable(ROWS, [10, 100], SIGNATURE, VERIFY);
    expect(
      table.map(({ path: p, connections, limit, tessera, share, peer, overPeer, missing }) => ({
        p,
        connections,
        limit,
        tessera,
        share,
        peer,
        overPeer,
        missing,
      })),
    ).toEqual([
      {
        p: 'Bearer (secret)',
        connections: 100,
        limit: 8000,
        tessera: 6000,
        share: 0.75,
        peer: 1500,
        overPeer: 4,
        missing: [],
      },
      {
        p: 'private_key_jwt',
        connections: 100,
        limit: 1e6 / 165,
        tessera: 3000,
        share: 3000 / (1e6 / 165),
        peer: 1000,
        overPeer: 3,
        missing: [],
      },
      {
        p: 'introspection',
        connections: 100,
        limit: 1e6 / 75,
        tessera: 9000,
        share: 9000 / (1e6 / 75),
        peer: undefined,
        overPeer: undefined,
        missing: [],
      },
    ]);
    expect(limitsText(table)).toEqual([
      "Each path's physical limit on one core, Tessera and node-oidc-provider on it:",
      'path             conc.  limit req/s  Tessera req/s  share of limit  oidc-provider req/s  Tessera ÷ oidc-provider',
      '---------------  -----  -----------  -------------  --------------  -------------------  -----------------------',
      'Bearer (secret)    100        8,000          6,000          75.0 %                1,500                    4.00×',
      'private_key_jwt    100        6,061          3,000          49.5 %                1,000                    3.00×',
      'introspection      100       13,333          9,000          67.5 %                    –                        –',
      '  Bearer (secret) c100: 8,000 req/s = 10⁶ ÷ (HTTP floor 55.0 + signature 45.0 + audit event 25.0 = 125.0 µs); ' +
        "Tessera's server CPU 150.0 µs",
      '  private_key_jwt c100: 6,061 req/s = 10⁶ ÷ (HTTP floor 55.0 + signature 45.0 + ES256 verification ' +
        "(node:crypto) 20.0 + replay record 20.0 + audit event 25.0 = 165.0 µs); Tessera's server CPU 320.0 µs",
      '  introspection c100: 13,333 req/s = 10⁶ ÷ (HTTP floor 55.0 + ES256 verification (node:crypto) 20.0 = 75.0 µs); ' +
        "Tessera's server CPU 100.0 µs",
    ]);
    expect(limitsMarkdown(table).slice(0, 3)).toEqual([
      '| path | conc. | limit req/s | Tessera req/s | share of limit | oidc-provider req/s | Tessera ÷ oidc-provider |',
      '| --- | ---: | ---: | ---: | ---: | ---: | ---: |',
      '| Bearer (secret) | 100 | 8,000 | 6,000 | 75.0 % | 1,500 | 4.00× |',
    ]);
  });

  it('marks a limit made without the audit event', () => {
    const table = limitsTable(
      ROWS.filter((r) => r.scenario !== 'ceiling-audited' && r.scenario !== 'tessera-sqlite-introspect'),
      [100],
      SIGNATURE,
      VERIFY,
    );
    expect(limitsText(table)[3]).toBe(
      'Bearer (secret)    100     10,000 *          6,000          60.0 %                1,500                    4.00×',
    );
    expect(limitParts(table)[0]).toBe(
      'Bearer (secret) c100: 10,000 req/s = 10⁶ ÷ (HTTP floor 55.0 + signature 45.0 = 100.0 µs); * without the audit ' +
        "event (not measured in this run); Tessera's server CPU 150.0 µs",
    );
  });
});
