import { createHash, randomBytes } from 'node:crypto';
import { hashPassword, validatePassword } from './passwords.js';
import { emailKey, OPERATOR_ROLES, validateEmail, validateRole } from '../domain/validate.js';
import { newOperatorId } from '../store/migrations.js';
import type { Operator, OperatorRole } from '../store/types.js';
import {
  changeAudit,
  checkPrecondition,
  nowOf,
  patchChanges,
  type ManagementContext,
  type Precondition,
} from './context.js';
import { field, ManagementError, storeCall } from './errors.js';
import { OPERATOR_FIELDS, operatorJson } from './views.js';
import { operatorContext } from './sessions.js';
import { requireOperatorHeld } from './authority.js';

/**
 * The console's operators (docs/management.md, "Operators"): people with an email and a role, apart from clients.
 * An operator is added with a one-time enrollment link, valid 24 hours, where they choose their password; a
 * reset makes a new link, clears the password and ends their sessions.
 */

/** How long an enrollment link works. */
const ENROLLMENT_SECONDS = 24 * 3600;

/** The console page an enrollment link opens; its token is in the fragment, which browsers never send. */
const ENROLL_PATH = '/console/enroll';

/** An operator with their new enrollment link, which exists in clear only in this answer. */
export interface Enrollment {
  operator: Operator;
  url: string;
  expiresAt: string;
}

/** The digest a link's token is kept as: the token itself is never stored. */
const enrollmentDigest = (token: string): string => createHash('sha256').update(token).digest('base64url');

function newLink(ctx: ManagementContext): { url: string; digest: string; expiresAt: string } {
  const token = randomBytes(32).toString('base64url');
  return {
    url: `${ctx.config.issuer}${ENROLL_PATH}#token=${token}`,
    digest: enrollmentDigest(token),
    expiresAt: new Date(nowOf(ctx) + ENROLLMENT_SECONDS * 1000).toISOString(),
  };
}

/** An email or an operator id as the faces give it: an email is matched in lower case. */
const lookupKey = (idOrEmail: string): string => (idOrEmail.includes('@') ? emailKey(idOrEmail) : idOrEmail);

export async function addOperator(
  ctx: ManagementContext,
  input: { email: string; role: string },
): Promise<Enrollment> {
  const email = field('email', () => validateEmail(input.email));
  const role = field('role', () => validateRole(input.role));
  requireOperatorHeld(ctx, undefined, role);
  const link = newLink(ctx);
  const id = newOperatorId();
  const operator = await storeCall(() =>
    ctx.store.addOperator(
      { id, email, role, enrollDigest: link.digest, enrollExpiresAt: link.expiresAt },
      changeAudit(ctx, 'operator.created', id, { changes: { email, role } }),
    ),
  );
  return { operator, url: link.url, expiresAt: link.expiresAt };
}

/**
 * Refuses a change of an operator (undefined: a new one) to `role` as sent (anything but a role: the role stays)
 * that the rule does not allow, before the request's body is validated (a refused change is a 403 even when its
 * body is also invalid). An operator that does not exist is left to the operation, which says so.
 */
export async function authorizeChange(
  ctx: ManagementContext,
  idOrEmail: string | undefined,
  role: unknown,
): Promise<void> {
  const next = (OPERATOR_ROLES as readonly unknown[]).includes(role) ? (role as OperatorRole) : undefined;
  if (idOrEmail === undefined) return requireOperatorHeld(ctx, undefined, next);
  const found = await storeCall(() => ctx.store.findOperator(lookupKey(idOrEmail)));
  if (found) requireOperatorHeld(ctx, found, next);
}

export async function listOperators(ctx: ManagementContext): Promise<Operator[]> {
  return storeCall(() => ctx.store.listOperators());
}

/** By id or email; operator_not_found when there is none. */
export async function getOperator(ctx: ManagementContext, idOrEmail: string): Promise<Operator> {
  const found = await storeCall(() => ctx.store.findOperator(lookupKey(idOrEmail)));
  if (!found) throw new ManagementError('operator_not_found', `operator ${idOrEmail} does not exist`);
  return found;
}

/** Changes an operator's role or whether they may log in; disabling ends their sessions everywhere at once. */
export async function updateOperator(
  ctx: ManagementContext,
  idOrEmail: string,
  patch: { role?: string; enabled?: boolean },
  condition: Precondition = {},
): Promise<Operator> {
  const role = patch.role === undefined ? undefined : field('role', () => validateRole(patch.role!));
  return storeCall(() =>
    ctx.store.transaction(async (store) => {
      const before = await getOperator({ ...ctx, store }, idOrEmail);
      requireOperatorHeld(ctx, before, role);
      checkPrecondition(condition, operatorJson(before), `operator ${before.email}`);
      const change = { role: role as OperatorRole | undefined, enabled: patch.enabled };
      const patched = patchChanges(before, change, operatorJson, OPERATOR_FIELDS);
      if (!patched) return before;
      const updated = await store.updateOperator(
        before.id,
        change,
        changeAudit(ctx, 'operator.updated', before.id, { changes: patched.changes }),
      );
      // A disabled operator (or one whose password was reset) is signed out everywhere at once, in the
      // transaction of the change: sessions are read from the store on every request, so this takes effect on
      // every instance with the commit.
      if (patch.enabled === false) await store.endOperatorSessions(before.id);
      return updated;
    }),
  );
}

export async function removeOperator(
  ctx: ManagementContext,
  idOrEmail: string,
  condition: Precondition = {},
): Promise<Operator> {
  return storeCall(() =>
    ctx.store.transaction(async (store) => {
      const operator = await getOperator({ ...ctx, store }, idOrEmail);
      requireOperatorHeld(ctx, operator, undefined);
      checkPrecondition(condition, operatorJson(operator), `operator ${operator.email}`);
      await store.removeOperator(
        operator.id,
        changeAudit(ctx, 'operator.deleted', operator.id, { changes: { email: operator.email } }),
      );
      return operator;
    }),
  );
}

/** A new enrollment link (the old one stops working); the password is cleared and the sessions end. */
export async function resetOperator(ctx: ManagementContext, idOrEmail: string): Promise<Enrollment> {
  const link = newLink(ctx);
  const operator = await storeCall(() =>
    ctx.store.transaction(async (store) => {
      const found = await getOperator({ ...ctx, store }, idOrEmail);
      requireOperatorHeld(ctx, found, undefined);
      const reset = await store.updateOperator(
        found.id,
        { enrollment: { digest: link.digest, expiresAt: link.expiresAt } },
        changeAudit(ctx, 'operator.reset', found.id, { changes: { email: found.email } }),
      );
      await store.endOperatorSessions(found.id);
      return reset;
    }),
  );
  return { operator, url: link.url, expiresAt: link.expiresAt };
}

const invalidLink = (): ManagementError =>
  new ManagementError(
    'enrollment_invalid',
    'this enrollment link has expired or has already been used: ask an admin for a new one (tessera operator reset)',
  );

/** The operator an enrollment link is for, if it still works (the enroll page shows whose it is). */
export async function lookupEnrollment(ctx: ManagementContext, token: string): Promise<Operator> {
  const operator =
    token === ''
      ? undefined
      : await storeCall(() => ctx.store.findOperatorByEnrollment(enrollmentDigest(token)));
  const now = new Date(nowOf(ctx)).toISOString();
  if (!operator?.enabled || operator.enrollmentExpiresAt === null || operator.enrollmentExpiresAt <= now)
    throw invalidLink();
  return operator;
}

/** Sets the password of the operator whose link this is; the link works once, and only within its 24 hours. */
export async function enroll(ctx: ManagementContext, token: string, password: string): Promise<Operator> {
  field('password', () => validatePassword(password));
  // Checked first, so that a dead link costs no hash.
  await lookupEnrollment(ctx, token);
  const hash = await hashPassword(password);
  const operator = await storeCall(() =>
    ctx.store.enrollOperator(enrollmentDigest(token), hash, new Date(nowOf(ctx)).toISOString(), (op) =>
      changeAudit(operatorContext(ctx, op), 'operator.enrolled', op.id),
    ),
  );
  if (!operator) throw invalidLink();
  return operator;
}
