/** The plan in words, as `tessera apply` prints it before applying it. */
import type { ScopeEntry } from './file.js';
import type { CreatedSecret } from './apply.js';
import type { Plan, PlanStep } from './plan.js';

/**
 * A value as a plan line shows it: scopes by name, a list of ids (resource servers) in brackets, strings and
 * objects as JSON, the rest as they are.
 */
const show = (value: unknown): string =>
  Array.isArray(value) && value.every((v) => typeof v === 'string')
    ? `[${value.join(', ')}]`
    : Array.isArray(value)
      ? (value as ScopeEntry[]).map((s) => s.name).join(' ')
      : typeof value === 'string' || (typeof value === 'object' && value !== null)
        ? JSON.stringify(value)
        : String(value);

/** A new resource's values: ` (name "x", token_ttl 60)`, the fields left out or null not shown. */
const values = (v: Record<string, unknown>): string => {
  const shown = Object.entries(v).filter(([, x]) => x !== undefined && x !== null);
  return shown.length ? ` (${shown.map(([k, x]) => `${k} ${show(x)}`).join(', ')})` : '';
};

function grantLines(s: Extract<PlanStep, { type: 'grant' }>): string[] {
  const grant = `grant ${s.client_id} → ${s.audience}`;
  if (s.action === 'create') {
    const notes = [
      ...(s.scopes.length ? [`scopes ${show(s.scopes.join(' '))}`] : []),
      ...(s.token_exchange ? ['token_exchange true'] : []),
    ];
    return [`+ ${grant}${notes.length ? ` (${notes.join(', ')})` : ''}`];
  }
  if (s.action === 'delete') return [`- ${grant}`];
  return s.changes.map((c) => `~ ${grant}: ${c.field} ${show(c.from)} → ${show(c.to)}`);
}

/** A client's federated credential, known by its name: `federated credential "deploy" of billing-ci`. */
function credentialLines(s: Extract<PlanStep, { type: 'federated_credential' }>): string[] {
  const credential = `federated credential ${JSON.stringify(s.name)} of ${s.client_id}`;
  if (s.action === 'create') return [`+ ${credential}${values(s.values)}`];
  if (s.action === 'delete') return [`- ${credential}`];
  return s.changes.map((c) => `~ ${credential}: ${c.field} ${show(c.from)} → ${show(c.to)}`);
}

function resourceLines(s: Exclude<PlanStep, { type: 'grant' | 'federated_credential' }>): string[] {
  const id = s.type === 'audience' ? s.identifier : s.client_id;
  if (s.action === 'create') return [`+ ${s.type} ${id}${values(s.values)}`];
  if (s.action === 'delete')
    return [`- ${s.type} ${id}${s.type === 'client' ? ' (with its grants)' : ' (with every grant of it)'}`];
  return s.changes.map((c) =>
    c.field === 'client_secret'
      ? `~ ${s.type} ${id}: its secrets replaced by the one in ${show(c.to)}`
      : `~ ${s.type} ${id}: ${c.field} ${show(c.from)} → ${show(c.to)}`,
  );
}

/**
 * The plan, one line per change: `+ audience URL (...)`, `~ client ID: field from → to`, `- grant ID → URL`,
 * `+ federated credential "NAME" of ID (...)`. One at a time: a plan of 200 000 clients is 400 000 lines.
 */
export function* planLines(plan: Plan): Generator<string> {
  for (const s of plan.steps)
    yield* s.type === 'grant'
      ? grantLines(s)
      : s.type === 'federated_credential'
        ? credentialLines(s)
        : resourceLines(s);
}

/** How many resources a plan creates, updates and deletes. */
export function planSummary(plan: Plan): { create: number; update: number; delete: number } {
  const summary = { create: 0, update: 0, delete: 0 };
  for (const s of plan.steps) summary[s.action]++;
  return summary;
}

/**
 * What an apply did, as `tessera apply --json` and POST /admin/v1/apply answer it: the plan's steps and counts, and
 * the new clients' secrets, shown this once.
 */
export function applyOutcome(plan: Plan, secrets: readonly CreatedSecret[], dryRun: boolean) {
  return {
    dry_run: dryRun,
    prune: plan.prune,
    applied: !dryRun && plan.steps.length > 0,
    summary: planSummary(plan),
    changes: plan.steps,
    kept: plan.kept,
    secrets,
  };
}
