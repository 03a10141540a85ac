/**
 * Declarative configuration (docs/management.md, `tessera apply` / `tessera export`): the store as a file kept in
 * git, and the plan that makes the store match one.
 *
 * - file.ts: the file's entries, and reading one (YAML or JSON, with every value's line and column);
 *   file-depth.ts: its nesting limit, checked on the text before it is parsed; json-file.ts and yaml-file.ts:
 *   reading one without yaml's document of the whole text, which takes a hundred bytes per byte of it;
 * - schema.ts: its JSON Schema (the shape);
 * - export.ts: the store as a file;
 * - check.ts: a file checked whole, by the schema, the management rules and its cross-references;
 * - plan.ts: the steps that make the store match it, resource by resource;
 * - apply.ts: the plan applied through the management operations, in one transaction;
 * - plan-text.ts: the plan in words.
 */
export { applyPlan, type CreatedSecret } from './apply.js';
export { exportConfig } from './export.js';
export { ConfigFileError, parseConfigFile } from './file.js';
export { planApply, type Plan } from './plan.js';
export { applyOutcome, planLines, planSummary } from './plan-text.js';
export { configSchema } from './schema.js';
