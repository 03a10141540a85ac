/**
 * Configuration from files, for a server that nobody execs into (MANAGEMENT.md, "Bootstrap without a shell";
 * docs/production.md): the bootstrap admin of TESSERA_BOOTSTRAP_ADMIN_CLIENT_ID, made at start, and the declarative
 * file of TESSERA_APPLY_FILE, applied at start and again whenever it changes (a ConfigMap's update swaps its
 * `..data` link). Both go through the management layer, as the server's own actor; an apply is planned and applied
 * in one transaction, which on PostgreSQL takes the change feed's lock first (and on SQLite the write lock), so that
 * the instances apply a file one at a time and the second finds nothing left to do.
 */
import { createHash } from 'node:crypto';
import { readFileSync, watch, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import type { Logger } from 'pino';
import { ConfigError, readSecretFile, type Config } from '../config/index.js';
import { givenSecretProblem } from '../domain/secrets.js';
import { bootstrapAdminClient } from '../management/bootstrap.js';
import { EVERY_SCOPE, type ManagementContext } from '../management/context.js';
import { SERVER_ACTOR, type Store } from '../store/types.js';
import type { Clock, Job } from '../clock.js';
import type { ApplyFileStatus } from '../http/routes/health.js';

export type { ApplyFileStatus };

/** How often the apply file is read again, besides the notices of a change in its directory. */
const APPLY_FILE_POLL_MS = 5000;
/** A change notice is acted on this long after the last one (a ConfigMap update is several renames). */
const SETTLE_MS = 200;
/** The plan lines logged of one apply at most (the rest counted). */
const LOGGED_LINES = 100;

const serverContext = (store: Store, config: Config, clock: Clock): ManagementContext => ({
  store,
  config,
  actor: SERVER_ACTOR,
  holds: EVERY_SCOPE,
  now: clock.now,
});

/**
 * The bootstrap admin, when TESSERA_BOOTSTRAP_ADMIN_CLIENT_ID asks for one: its secret read from
 * TESSERA_BOOTSTRAP_ADMIN_CLIENT_SECRET_FILE now (at least 32 characters), the client made or brought up to date.
 * A file that cannot be read, or a secret too weak, stops the start (ConfigError).
 */
export async function bootstrapAdmin(
  store: Store,
  config: Config,
  clock: Clock,
  logger: Logger,
): Promise<void> {
  const wanted = config.bootstrapAdmin;
  if (wanted === undefined) return;
  const secret = readSecretFile('TESSERA_BOOTSTRAP_ADMIN_CLIENT_SECRET_FILE', wanted.secretFile);
  const problem = givenSecretProblem(secret);
  if (problem !== undefined) throw new ConfigError(`TESSERA_BOOTSTRAP_ADMIN_CLIENT_SECRET_FILE: ${problem}`);
  const done = await bootstrapAdminClient(serverContext(store, config, clock), wanted.clientId, secret);
  if (done.created) logger.info({ client_id: wanted.clientId }, 'bootstrap admin client created');
  else if (done.changed.length > 0)
    logger.info({ client_id: wanted.clientId, changed: done.changed }, 'bootstrap admin client updated');
  if (!done.client.enabled)
    logger.warn({ client_id: wanted.clientId }, 'bootstrap admin client is disabled; left disabled');
}

/** The apply file of TESSERA_APPLY_FILE, followed: applied at start, then on every change of its text. */
export class ApplyFile {
  private state: ApplyFileStatus;
  /** The digest of the text last dealt with (applied, or refused for its content); another one is applied. */
  private seen: string | undefined;
  /**
   * The client_secret_file read by the last attempt and what each held (a digest, or why it could not be read): a
   * secret rotated in its mounted file is applied though the apply file is the same, and a file that could not be
   * read (a Secret mounted after its ConfigMap) is tried again at every reading until it can.
   */
  private secretsSeen = new Map<string, string>();
  /** The errors last logged, so that a refusal tried again every few seconds is logged once. */
  private loggedErrors: string | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private watcher: FSWatcher | undefined;
  private poll: Job | undefined;
  private settle: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly store: Store,
    private readonly config: Config,
    private readonly file: { path: string; prune: boolean },
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {
    this.state = { file: file.path, ok: false };
  }

  get status(): ApplyFileStatus {
    return this.state;
  }

  /** Applies the file now, then follows it (its directory's change notices, and a reading every few seconds). */
  async start(): Promise<void> {
    await this.check();
    this.poll = this.clock.every(APPLY_FILE_POLL_MS, () => void this.check());
    try {
      // The directory, not the file: a ConfigMap's file is a link into `..data`, which an update replaces.
      this.watcher = watch(dirname(this.file.path), { persistent: false }, () => this.soon());
      this.watcher.on('error', () => this.watcher?.close());
    } catch {
      // No such directory yet (or no notices here): the readings every few seconds see it come.
    }
  }

  private soon(): void {
    clearTimeout(this.settle);
    this.settle = setTimeout(() => void this.check(), SETTLE_MS);
    this.settle.unref();
  }

  /** Reads the file, and applies it if its text is new; one at a time (a check asked meanwhile runs after). */
  check(): Promise<void> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      try {
        do {
          this.again = false;
          if (!this.closed) await this.readAndApply();
        } while (this.again);
      } finally {
        this.running = undefined;
      }
    })();
    return this.running;
  }

  private async readAndApply(): Promise<void> {
    let text: string;
    try {
      text = await readFile(this.file.path, 'utf8');
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? 'error';
      const digest = `unreadable:${code}`;
      if (this.seen !== digest) {
        this.seen = digest;
        this.refused([{ message: `cannot read ${this.file.path} (${code})` }]);
      }
      return;
    }
    const digest = createHash('sha256').update(text).digest('hex');
    if (digest === this.seen && !(await this.secretsChanged())) return;
    const d = await import('../management/declarative/index.js');
    const ctx = serverContext(this.store, this.config, this.clock);
    const name = basename(this.file.path);
    const secretsRead = new Map<string, string>();
    const read = (path: string): string => {
      try {
        const secret = readFileSync(path, 'utf8');
        secretsRead.set(path, createHash('sha256').update(secret).digest('hex'));
        return secret;
      } catch (error) {
        secretsRead.set(path, `unreadable:${(error as NodeJS.ErrnoException).code ?? 'error'}`);
        throw error;
      }
    };
    try {
      // Planned and applied in one transaction: one instance at a time (see the top of this file).
      const plan = await this.store.transaction(async (store) => {
        const tx = { ...ctx, store };
        const planned = await d.planApply(tx, d.parseConfigFile(text, name), {
          prune: this.file.prune,
          secretFiles: { baseDir: dirname(this.file.path), required: true, read },
        });
        await d.applyPlan(tx, planned);
        return planned;
      });
      this.seen = digest;
      this.secretsSeen = secretsRead;
      this.loggedErrors = undefined;
      this.state = {
        file: this.file.path,
        ok: true,
        applied_digest: digest,
        applied_at: new Date(this.clock.now()).toISOString(),
      };
      if (plan.steps.length === 0) {
        this.logger.info({ file: this.file.path }, 'apply file: no changes');
        return;
      }
      const lines: string[] = [];
      for (const line of d.planLines(plan)) if (lines.push(line) >= LOGGED_LINES) break;
      this.logger.info(
        { file: this.file.path, summary: d.planSummary(plan), changes: lines },
        'apply file applied',
      );
    } catch (error) {
      if (error instanceof d.ConfigFileError) {
        // Its content is at fault: nothing is tried again until it (or a secret file it names) changes.
        this.seen = digest;
        this.secretsSeen = secretsRead;
        this.refused(error.problems);
        return;
      }
      // Anything else (the store, a rule found at apply time) may pass: the next reading tries again.
      this.refused([{ message: (error as Error).message }]);
    }
  }

  /** Whether a client_secret_file the last attempt read holds something else now, or could not be read then. */
  private async secretsChanged(): Promise<boolean> {
    for (const [path, seen] of this.secretsSeen) {
      if (seen.startsWith('unreadable:')) return true;
      try {
        if (
          createHash('sha256')
            .update(await readFile(path, 'utf8'))
            .digest('hex') !== seen
        )
          return true;
      } catch {
        return true;
      }
    }
    return false;
  }

  private refused(errors: NonNullable<ApplyFileStatus['errors']>): void {
    // The configuration applied before keeps serving; what was last applied stays named.
    this.state = {
      file: this.file.path,
      ok: false,
      ...(this.state.applied_digest === undefined
        ? {}
        : { applied_digest: this.state.applied_digest, applied_at: this.state.applied_at }),
      errors,
    };
    const logged = JSON.stringify(errors);
    if (logged === this.loggedErrors) return;
    this.loggedErrors = logged;
    this.logger.error(
      { file: this.file.path, errors },
      'apply file refused: the configuration applied before is kept',
    );
  }

  async close(): Promise<void> {
    this.closed = true;
    this.poll?.stop();
    this.watcher?.close();
    clearTimeout(this.settle);
    await this.running;
  }
}
