import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { verifyPassword } from './passwords.js';
import { emailKey } from '../domain/validate.js';
import type { LoginAttempt } from '../limits/logins.js';
import { actorOf, type ChangeAudit, type Operator, type OperatorSession } from '../store/types.js';
import { ROLE_SCOPES } from './builtin.js';
import { changeAudit, nowOf, type ManagementContext } from './context.js';
import { ManagementError, storeCall } from './errors.js';

/**
 * Console sessions (docs/management.md, "Sessions"): an operator logs in with email and password and gets an
 * opaque random id (the cookie), kept in the store only as its SHA-256, so every instance knows every session
 * and ending one (logout, the operator disabled or reset) takes effect everywhere with the commit. A session
 * ends after `idleSeconds` without a request and after `maxSeconds` in any case. Every state change also needs
 * the session's anti-CSRF token, an HMAC of the session id that only a page of the console can read.
 */
export interface SessionPolicy {
  idleSeconds: number;
  maxSeconds: number;
  /** Signs the anti-CSRF tokens; the same on every instance (derived from the master key). */
  csrfKey: Uint8Array;
  /** Failed logins, per email and per address. */
  logins: {
    blockedFor(email: string, address: string): number;
    /** Counts a login before its password is checked; it may be refused (see LoginAttempts). */
    begin(email: string, address: string): Promise<LoginAttempt>;
    /** Whether this blocked login is the one of its minute and address that the audit trail records. */
    refusalToRecord(address: string): boolean;
  };
  /**
   * The clock sessions are timed by when the management context has none: the server's (runtime/faces.ts),
   * which the console's contexts do not carry. Left out: the wall clock.
   */
  now?: () => number;
}

/** The time of a session operation: the context's clock, else the policy's, else the wall clock. */
const timeOf = (ctx: ManagementContext, policy: SessionPolicy): number =>
  ctx.now ? nowOf(ctx) : (policy.now ?? Date.now)();

/** An open session, as login answers it: the cookie's value and the page's anti-CSRF token exist only here. */
export interface NewSession {
  token: string;
  csrf: string;
  operator: Operator;
  /** ms since the epoch: the session's absolute end. */
  expiresAt: number;
}

/** A session's last-seen time is written at most this often: the idle timeout is exact to a minute. */
const TOUCH_EVERY_MS = 60_000;

/**
 * How long a session may go unseen (by its stored last-seen time) before it is over. A request less than
 * TOUCH_EVERY_MS after the last write is not written, so the operator's last request may be up to that much
 * later than what the store says: the timeout counts from the latest it can have been, so that a session never
 * ends sooner than the idle time after its last request (and at most a minute later).
 */
const idleLimitMs = (policy: Pick<SessionPolicy, 'idleSeconds'>): number =>
  policy.idleSeconds * 1000 + TOUCH_EVERY_MS;

/** A session token: 256 random bits, base64url. Anything else is refused without asking the store. */
const TOKEN = /^[A-Za-z0-9_-]{43}$/;

const sessionId = (token: string): string => createHash('sha256').update(token).digest('base64url');

/** The anti-CSRF token of a session: it names that session and no other, and cannot be made without the key. */
export const csrfToken = (policy: Pick<SessionPolicy, 'csrfKey'>, token: string): string =>
  createHmac('sha256', policy.csrfKey).update(`tessera console csrf ${token}`).digest('base64url');

/** Whether `presented` is the anti-CSRF token of the session `token` (compared in constant time). */
export function csrfMatches(
  policy: Pick<SessionPolicy, 'csrfKey'>,
  token: string,
  presented: string,
): boolean {
  const expected = Buffer.from(csrfToken(policy, token));
  const given = Buffer.from(presented);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** An operator's own context: they are the actor, holding what their role allows. */
export const operatorContext = (
  ctx: ManagementContext,
  operator: Operator,
): ManagementContext & { holds: ReadonlySet<string> } => ({
  ...ctx,
  actor: actorOf.operator(operator.email),
  holds: new Set(ROLE_SCOPES[operator.role]),
});

/** An event nobody known caused (a login for an email no operator has): no actor. */
const anonymous = (audit: ChangeAudit): ChangeAudit => ({ ...audit, actor: null });

const invalidLogin = (): ManagementError =>
  new ManagementError('invalid_login', 'the email or the password is not right');

/**
 * A login refused by the limits, before any store lookup or hash: one refusal an address and minute is
 * recorded, without looking the email up.
 */
async function throttled(ctx: ManagementContext, policy: SessionPolicy, source: string, wait: number) {
  if (policy.logins.refusalToRecord(source))
    await storeCall(() =>
      ctx.store.recordEvent(
        // Nobody known: no actor (an email someone typed is not an operator's).
        anonymous(
          changeAudit(ctx, 'operator.login_failed', null, { reason: 'blocked: too many failed logins' }),
        ),
      ),
    );
  return new ManagementError(
    'login_throttled',
    'too many failed logins for this email or from this address: try again later',
    undefined,
    wait,
  );
}

/**
 * Logs an operator in. A wrong password, an unknown email, an operator not enrolled yet and a disabled one
 * get the same answer after the same work (a password hash is checked in every case); the audit trail says
 * which it was. Failures count per email and per address; a blocked login is refused before any hash, even
 * with the right password (see LoginAttempts).
 */
export async function login(
  ctx: ManagementContext,
  policy: SessionPolicy,
  input: { email: string; password: string },
): Promise<NewSession> {
  const source = ctx.source ?? 'unknown';
  // The key the limits count: the email as typed, as the store would look it up.
  const email = emailKey(input.email).slice(0, 254);
  // A blocked key is refused from memory, with no I/O at all.
  const wait = policy.logins.blockedFor(email, source);
  if (wait > 0) throw await throttled(ctx, policy, source, wait);
  // Counted before the password is hashed (docs/management.md, "Sessions"): logins made at once check at most as
  // many passwords as the limits allow; one past them is refused as a blocked one is.
  const attempt = await policy.logins.begin(email, source);
  if (attempt.refusedFor > 0) throw await throttled(ctx, policy, source, attempt.refusedFor);
  let operator: Operator | undefined;
  let right: boolean;
  try {
    const found = await storeCall(() => ctx.store.findOperatorCredentials(email));
    operator = found?.operator;
    right = await verifyPassword(input.password, found?.passwordHash ?? null);
  } catch (error) {
    // No password was checked (the store failed, or too many hashes wait: PasswordWorkBusy): no failure.
    await attempt.release();
    throw error;
  }
  const reason = !operator
    ? 'unknown email'
    : !operator.enrolled
      ? 'not enrolled'
      : !right
        ? 'wrong password'
        : !operator.enabled
          ? 'operator disabled'
          : undefined;
  if (reason !== undefined || !operator) {
    await attempt.failed();
    // Only a known operator's email is recorded: what someone typed in the email field may be anything.
    await storeCall(() =>
      ctx.store.recordEvent(
        operator
          ? changeAudit(operatorContext(ctx, operator), 'operator.login_failed', operator.id, { reason })
          : anonymous(changeAudit(ctx, 'operator.login_failed', null, { reason })),
      ),
    );
    throw invalidLogin();
  }
  // A login that succeeds is no failure: its places go back.
  await attempt.release();
  const now = timeOf(ctx, policy);
  const token = randomBytes(32).toString('base64url');
  const session: OperatorSession = {
    id: sessionId(token),
    operatorId: operator.id,
    createdAt: now,
    lastSeenAt: now,
    expiresAt: now + policy.maxSeconds * 1000,
    source: ctx.source ?? null,
  };
  await storeCall(async () => {
    // Sessions that are over go now (every instance prunes at logins, so the table stays small).
    await ctx.store.pruneOperatorSessions(now, now - idleLimitMs(policy));
    await ctx.store.createOperatorSession(
      session,
      changeAudit(operatorContext(ctx, operator), 'operator.login', operator.id),
    );
  });
  return {
    token,
    csrf: csrfToken(policy, token),
    operator: { ...operator, lastLoginAt: new Date(now).toISOString() },
    expiresAt: session.expiresAt,
  };
}

/** The session of a cookie's value, if it is open, with its operator (enabled). */
export async function findSession(
  ctx: ManagementContext,
  policy: SessionPolicy,
  token: string,
  /** false for requests the page makes by itself (a chart's refresh): they do not keep a session alive. */
  activity = true,
): Promise<{ session: OperatorSession; operator: Operator } | undefined> {
  if (!TOKEN.test(token)) return undefined;
  const found = await storeCall(() => ctx.store.findOperatorSession(sessionId(token)));
  if (!found) return undefined;
  const now = timeOf(ctx, policy);
  const { session, operator } = found;
  if (!operator.enabled || now >= session.expiresAt || now - session.lastSeenAt >= idleLimitMs(policy)) {
    await storeCall(() => ctx.store.deleteOperatorSession(session.id));
    return undefined;
  }
  if (activity && now - session.lastSeenAt >= TOUCH_EVERY_MS)
    await storeCall(() => ctx.store.touchOperatorSession(session.id, now));
  return found;
}

/** Ends a session (logout); audited when there was one to end. */
export async function logout(ctx: ManagementContext, policy: SessionPolicy, token: string): Promise<void> {
  const found = await findSession(ctx, policy, token, false);
  if (!found) return;
  await storeCall(() =>
    ctx.store.deleteOperatorSession(
      found.session.id,
      changeAudit(operatorContext(ctx, found.operator), 'operator.logout', found.operator.id),
    ),
  );
}
