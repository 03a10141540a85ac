/**
 * Each path's physical limit on one core (issue 45; bench/README.md, "Each path's limit"): one core doing nothing
 * but the HTTP floor's work per answer (the floor scenario's server CPU per answer), plus what the path does beyond
 * it, each measured in a tight loop on the server's CPU: its signatures (servers/sign-loop.js), its verifications
 * and its replay record (servers/verify-loop.js), and an audit event where the path keeps one (the audited
 * ceiling's server CPU per answer less the ceiling's, at the same concurrency). Pure: run.js gives it the rows and
 * the loops' figures.
 */

/**
 * The verifications the loops measure, by name (servers/verify-loop.js), and what they are in the explanations.
 * A limit counts the cheapest correct verification, node:crypto's, which Tessera makes of every JWS it checks (client
 * assertions, platform tokens, DPoP proofs, its own tokens); jose's figures are in the loops' note, for comparison.
 */
const VERIFICATIONS = {
  es256Crypto: 'ES256 verification (node:crypto)',
  rs256Crypto: 'RS256 verification (node:crypto)',
};

/**
 * The paths, each with Tessera's scenario, node-oidc-provider's on the same path where it has one, and what one
 * answer does beyond the floor: signatures, verifications (names of VERIFICATIONS), whether it keeps a replay
 * record and an audit event. `also`: other scenarios of the same path (another store, another replay guard), whose
 * "vs limit" is against it too.
 */
export const PATHS = [
  {
    path: 'Bearer (secret)',
    scenario: 'tessera-sqlite',
    peer: 'oidc-provider',
    signatures: 1,
    verifications: [],
    replay: false,
    audited: true,
    also: [
      'tessera-sqlite-baseline',
      'tessera-sqlite-no-metrics',
      'tessera-sqlite-scoped',
      'tessera-sqlite-cold',
      'tessera-sqlite-cached',
      'tessera-pg',
      'tessera-pg-cold',
      'oauth2-server',
      'ceiling-audited',
    ],
  },
  {
    path: 'private_key_jwt',
    scenario: 'tessera-sqlite-pkjwt',
    peer: 'oidc-provider-pkjwt',
    signatures: 1,
    verifications: ['es256Crypto'],
    replay: true,
    audited: true,
    also: ['tessera-sqlite-pkjwt-redis'],
  },
  {
    path: 'DPoP',
    scenario: 'tessera-sqlite-dpop',
    peer: 'oidc-provider-dpop',
    signatures: 1,
    verifications: ['es256Crypto'],
    replay: true,
    audited: true,
    also: ['tessera-sqlite-dpop-redis', 'tessera-pg-dpop'],
  },
  {
    path: 'federated credential',
    scenario: 'tessera-sqlite-federated',
    signatures: 1,
    verifications: ['rs256Crypto'],
    replay: false,
    audited: true,
    also: [],
  },
  {
    path: 'introspection',
    scenario: 'tessera-sqlite-introspect',
    signatures: 0,
    verifications: ['es256Crypto'],
    replay: false,
    audited: false,
    also: [],
  },
  {
    path: 'token exchange',
    scenario: 'tessera-sqlite-exchange',
    signatures: 1,
    verifications: ['es256Crypto'],
    replay: false,
    audited: true,
    also: [],
  },
];

/** The bare servers, which keep no audit trail: their limit is the floor and one signature only. */
const BARE = { path: 'bare', signatures: 1, verifications: [], replay: false, audited: false };
const BARE_SCENARIOS = new Set(['ceiling', 'ceiling-at-once', 'floor']);

/**
 * The path a scenario's row is measured against: its own (Tessera's, node-oidc-provider's on it, or another of the
 * path's), the Bearer path for any other (every other scenario answers a secret's token), the bare one for the ceiling and the floor. A --compare or --rounds row
 * (`<scenario>@<commit>`, `<scenario>#<n>`) is its scenario's.
 */
export function pathOf(scenario) {
  const id = scenario.replace(/[@#].*$/, '');
  if (BARE_SCENARIOS.has(id)) return BARE;
  return PATHS.find((p) => p.scenario === id || p.peer === id || p.also.includes(id)) ?? PATHS[0];
}

/**
 * What one answer costs at `connections` beyond nothing, for the limits: the floor's server CPU per answer, the
 * audited ceiling's audit event (its CPU per answer less the ceiling's; undefined without both, at least 0), and
 * the loops' figures. Undefined without the floor's row or the loops' figures.
 */
export function referenceCosts(rows, connections, signature, verifications) {
  const at = (scenario) => rows.find((r) => r.scenario === scenario && r.connections === connections);
  const floor = at('floor');
  if (!floor || !signature || !verifications) return undefined;
  const audited = at('ceiling-audited');
  const ceiling = at('ceiling');
  return {
    floorUs: floor.serverCpuUsPerRequest,
    signatureUs: signature.usPerSignature,
    auditUs:
      audited && ceiling
        ? Math.max(0, audited.serverCpuUsPerRequest - ceiling.serverCpuUsPerRequest)
        : undefined,
    verifications,
  };
}

/**
 * A path's limit with `costs` (referenceCosts): its parts, [what, µs], their sum, and 10⁶ ÷ it (answers a second);
 * `missing` names what could not be counted (an audit event when ceiling-audited or ceiling did not run).
 */
export function pathLimit(path, costs) {
  const parts = [['HTTP floor', costs.floorUs]];
  if (path.signatures > 0)
    parts.push([
      path.signatures === 1 ? 'signature' : `${path.signatures} signatures`,
      path.signatures * costs.signatureUs,
    ]);
  for (const name of path.verifications) parts.push([VERIFICATIONS[name], costs.verifications[name]]);
  if (path.replay) parts.push(['replay record', costs.verifications.replayRecord]);
  const missing = [];
  if (path.audited) {
    if (costs.auditUs === undefined) missing.push('audit event');
    else parts.push(['audit event', costs.auditUs]);
  }
  const usPerAnswer = parts.reduce((sum, [, us]) => sum + us, 0);
  return { parts, usPerAnswer, reqPerSec: 1e6 / usPerAnswer, missing };
}

/**
 * The table of issue 45, per concurrency and path whose Tessera scenario or peer ran: the path's limit, Tessera's
 * req/s and its share of the limit, node-oidc-provider's req/s on the same path and Tessera ÷ it.
 */
export function limitsTable(rows, concurrencies, signature, verifications) {
  const out = [];
  for (const connections of concurrencies) {
    const costs = referenceCosts(rows, connections, signature, verifications);
    if (!costs) continue;
    const at = (scenario) =>
      scenario && rows.find((r) => r.scenario === scenario && r.connections === connections);
    for (const path of PATHS) {
      const tessera = at(path.scenario);
      const peer = at(path.peer);
      if (!tessera && !peer) continue;
      const limit = pathLimit(path, costs);
      out.push({
        path: path.path,
        connections,
        limit: limit.reqPerSec,
        usPerAnswer: limit.usPerAnswer,
        parts: limit.parts,
        missing: limit.missing,
        tessera: tessera?.reqPerSec,
        tesseraUsPerAnswer: tessera?.serverCpuUsPerRequest,
        share: tessera ? tessera.reqPerSec / limit.reqPerSec : undefined,
        peer: peer?.reqPerSec,
        peerShare: peer ? peer.reqPerSec / limit.reqPerSec : undefined,
        overPeer: tessera && peer ? tessera.reqPerSec / peer.reqPerSec : undefined,
      });
    }
  }
  return out;
}

const whole = (value) => (value === undefined ? '–' : Math.round(value).toLocaleString('en-US'));
const share = (value) => (value === undefined ? '–' : `${(value * 100).toFixed(1)} %`);
const times = (value) => (value === undefined ? '–' : `${value.toFixed(2)}×`);

const COLUMNS = [
  ['path', (r) => r.path],
  ['conc.', (r) => String(r.connections)],
  ['limit req/s', (r) => whole(r.limit) + (r.missing.length > 0 ? ' *' : '')],
  ['Tessera req/s', (r) => whole(r.tessera)],
  ['share of limit', (r) => share(r.share)],
  ['oidc-provider req/s', (r) => whole(r.peer)],
  ['Tessera ÷ oidc-provider', (r) => times(r.overPeer)],
];

/** How each limit is made, one line per path and concurrency: 10⁶ ÷ (its parts, µs). */
export function limitParts(table) {
  return table.map(
    (r) =>
      `${r.path} c${r.connections}: ${whole(r.limit)} req/s = 10⁶ ÷ (` +
      r.parts.map(([what, us]) => `${what} ${us.toFixed(1)}`).join(' + ') +
      ` = ${r.usPerAnswer.toFixed(1)} µs)` +
      (r.missing.length > 0 ? `; * without the ${r.missing.join(', ')} (not measured in this run)` : '') +
      (r.tesseraUsPerAnswer === undefined
        ? ''
        : `; Tessera's server CPU ${r.tesseraUsPerAnswer.toFixed(1)} µs`),
  );
}

/** The table for the terminal, then how each limit is made. */
export function limitsText(table) {
  if (table.length === 0) return [];
  const cells = table.map((row) => COLUMNS.map(([, cell]) => cell(row)));
  const widths = COLUMNS.map(([title], i) => Math.max(title.length, ...cells.map((c) => c[i].length)));
  const line = (values) =>
    values.map((v, i) => (i === 0 ? v.padEnd(widths[i]) : v.padStart(widths[i]))).join('  ');
  return [
    "Each path's physical limit on one core, Tessera and node-oidc-provider on it:",
    line(COLUMNS.map(([title]) => title)),
    line(widths.map((w) => '-'.repeat(w))),
    ...cells.map(line),
    ...limitParts(table).map((text) => `  ${text}`),
  ];
}

/** The table in Markdown, then how each limit is made. */
export function limitsMarkdown(table) {
  if (table.length === 0) return [];
  return [
    `| ${COLUMNS.map(([title]) => title).join(' | ')} |`,
    `|${COLUMNS.map((_, i) => (i === 0 ? ' --- ' : ' ---: ')).join('|')}|`,
    ...table.map((row) => `| ${COLUMNS.map(([, cell]) => cell(row)).join(' | ')} |`),
    '',
    ...limitParts(table).map((text) => `- ${text}`),
  ];
}
