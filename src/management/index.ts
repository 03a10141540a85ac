/**
 * The management layer: every operation on audiences, clients, grants, quotas, keys and the audit trail, with
 * its rules, in one place. The CLI (and every later face) parses its input, calls an operation, and presents
 * the result; nothing else writes to the store for management. The declarative configuration (`apply`, `export`)
 * is imported from declarative/ by the faces that read files: the others start without its schema and YAML.
 */
export * as audiences from './audiences.js';
export * as audit from './audit.js';
export * as clientGrants from './client-grants.js';
export * as clients from './clients.js';
export * as federation from './federation.js';
export * as grants from './grants.js';
export * as keys from './keys.js';
export * as operators from './operators.js';
export * as sessions from './sessions.js';
export * as stats from './stats.js';
export * as secrets from './secrets.js';
export type { ManagementContext, Precondition } from './context.js';
export { asManagementError, ManagementError, type ErrorKind } from './errors.js';
export * as views from './views.js';
