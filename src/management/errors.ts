import { TesseraError } from '../domain/errors.js';
import { PasswordWorkBusy } from './passwords.js';
import { ValidationError } from '../domain/validate.js';
import { MasterKeyMismatchError } from '../keys/sealed.js';
import { StoreError, type StoreResource } from '../store/types.js';

/**
 * The stable codes of every management failure, whatever the face: the CLI maps each to an exit code and
 * prints it under `--json`, the admin API to a problem+json type and status. A code is never renamed.
 */
const ERROR_CODES = {
  invalid_field: 'invalid',
  invalid_file: 'invalid',
  invalid_cursor: 'invalid',
  audience_not_found: 'not_found',
  client_not_found: 'not_found',
  grant_not_found: 'not_found',
  key_not_found: 'not_found',
  secret_not_found: 'not_found',
  federated_credential_not_found: 'not_found',
  operator_not_found: 'not_found',
  audience_exists: 'conflict',
  client_exists: 'conflict',
  audience_builtin: 'conflict',
  too_many_secrets: 'conflict',
  client_uses_keys: 'conflict',
  client_uses_secrets: 'conflict',
  client_uses_federation: 'conflict',
  too_many_federated_credentials: 'conflict',
  federated_credential_exists: 'conflict',
  operator_exists: 'conflict',
  enrollment_invalid: 'invalid',
  invalid_login: 'unauthenticated',
  login_throttled: 'throttled',
  precondition_failed: 'precondition',
  insufficient_scope: 'forbidden',
  master_key_mismatch: 'failed',
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;
/** What kind of failure a code is: each face maps kinds (an exit code, an HTTP status), not every code. */
export type ErrorKind = (typeof ERROR_CODES)[ErrorCode];

export class ManagementError extends TesseraError {
  override name = 'ManagementError';
  constructor(
    override readonly code: ErrorCode,
    message: string,
    /** The input field at fault, for invalid_field (`name`, `token_ttl`, ...). */
    readonly field?: string,
    /** Seconds to wait before trying again (login_throttled). */
    readonly retryAfter?: number,
    /** The admin scopes the caller lacks (insufficient_scope), sorted. */
    readonly scopes?: readonly string[],
  ) {
    super(message);
  }

  get kind(): ErrorKind {
    return ERROR_CODES[this.code];
  }
}

const NOT_FOUND = {
  audience: 'audience_not_found',
  client: 'client_not_found',
  grant: 'grant_not_found',
  signing_key: 'key_not_found',
  secret: 'secret_not_found',
  operator: 'operator_not_found',
} as const;

/** The resources a store conflict can be about: one whose key is taken. */
const EXISTS: Partial<Record<StoreResource, ErrorCode>> = {
  audience: 'audience_exists',
  client: 'client_exists',
  operator: 'operator_exists',
};

/**
 * The management error a failure is, if it is one: the rules' ValidationError, the store's not-found and
 * conflict, a master key that does not open the stored keys. Anything else (the store unreachable, a bug) is
 * not a management error and stays what it is.
 */
export function asManagementError(error: unknown): ManagementError | undefined {
  if (error instanceof ManagementError) return error;
  if (error instanceof ValidationError) return new ManagementError('invalid_field', error.message);
  if (error instanceof MasterKeyMismatchError)
    return new ManagementError('master_key_mismatch', error.message);
  if (error instanceof PasswordWorkBusy)
    return new ManagementError(
      'login_throttled',
      'too many logins at once: try again in a second',
      undefined,
      1,
    );
  if (error instanceof StoreError && error.resource !== undefined) {
    if (error.code === 'not_found') return new ManagementError(NOT_FOUND[error.resource], error.message);
    const exists = EXISTS[error.resource];
    if (exists !== undefined) return new ManagementError(exists, error.message);
  }
  return undefined;
}

/** Runs a rule and names the field it was about when it refuses. */
export function field<T>(name: string, check: () => T): T {
  try {
    return check();
  } catch (error) {
    if (error instanceof ValidationError) throw new ManagementError('invalid_field', error.message, name);
    throw error;
  }
}

/** Runs a store operation, turning its failures into management errors. */
export async function storeCall<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    throw asManagementError(error) ?? error;
  }
}

/**
 * Runs the rules of several fields and keeps every refusal instead of stopping at the first, so that a face
 * can report them all (tessera apply); an operation then throws the first, as a single call always did.
 */
export class FieldChecks {
  readonly errors: ManagementError[] = [];

  /** `prefix`: put before every field's name (`federated_credentials/0/` for a list's first item). */
  constructor(private readonly prefix = '') {}

  run<T>(name: string, check: () => T): T {
    try {
      return field(this.prefix + name, check);
    } catch (error) {
      if (!(error instanceof ManagementError)) throw error;
      this.errors.push(error);
      return undefined as T; // never used: the caller throws or reports the errors
    }
  }

  throwFirst(): void {
    if (this.errors.length > 0) throw this.errors[0];
  }
}
