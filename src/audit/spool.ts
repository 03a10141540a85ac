import { randomBytes } from 'node:crypto';
import {
  closeSync,
  fstatSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  readdirSync,
  readSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { SPOOLED_EVENT_TYPES, type AuditRecord, type SpooledEventType } from '../store/types.js';
import { systemClock } from '../clock.js';

/**
 * The audit spool: append-only files on local disk where every audit event is written before the answer it
 * belongs to, so that an event survives a crash of the process however long the store takes to take it.
 *
 * - Each process owns its files: `<owner>.<seq>.spool` segments and an `<owner>.lock`, a tiny SQLite file on
 *   which the owner holds an exclusive lock for as long as it lives. The operating system drops that lock
 *   when the process dies (kill -9 included), so "can I take the lock?" is an exact answer to "is the owner
 *   gone?", whatever became of its pid (a container's pid 1, a reused pid).
 * - A process adopts the segments of owners that are gone (at start and once a minute): it keeps their lock
 *   while it writes them to the store, then removes them.
 * - A new owner takes its lock on `<owner>.lock.new`, a name no adopter looks at, and only then renames it to
 *   `<owner>.lock` (the lock is the file's, not its name's). Created under its final name, the file would be
 *   unlocked for a moment: a process adopting at that moment would take it, find no segment, remove it, and
 *   the new owner would fail to lock (or lock a file no longer in the directory, whose segments the next
 *   adopter would take from a live owner).
 * - Each segment is one JSON array per line. How far a segment has reached the store is recorded in the store,
 *   in the transaction that writes its events (audit_spool_positions), so a replay after a crash resumes
 *   exactly where the store stands: no event twice, none lost.
 *
 * Writes are `write(2)` calls, not fsync: what was written survives a crash of the process (it is in the
 * kernel's page cache), not necessarily a crash of the machine.
 */

/** Segments are closed past this size and removed once their events are all in the store. */
const SEGMENT_BYTES = 16 << 20;
/** Bytes read from a segment at a time when writing it to the store. */
const READ_BYTES = 256 << 10;
const NEWLINE = 0x0a;
const SEGMENT_NAME = /^([0-9a-z]+-[0-9a-f]+)\.(\d{8})\.spool$/;
const LOCK_NAME = /^([0-9a-z]+-[0-9a-f]+)\.lock$/;
/** A lock file being made: locked, not yet under its name (see above); one left by a crash goes after a minute. */
const NEW_LOCK_NAME = /^[0-9a-z]+-[0-9a-f]+\.lock\.new$/;
const NEW_LOCK_STALE_MS = 60_000;

/** One spool line: the record as a JSON array (field names would double its size); no count is null. */
export function encodeRecord(r: Omit<AuditRecord, 'count'> & { count?: number | null }): string {
  return (
    JSON.stringify([r.at, r.type, r.clientId, r.audience, r.jti, r.reason, r.source, r.count ?? null]) + '\n'
  );
}

// The spool carries token events only; changes are written in their own transaction.
const TYPES = new Set<string>(SPOOLED_EVENT_TYPES);
const text = (value: unknown): value is string | null => value === null || typeof value === 'string';

/** The record of one line, or undefined if the line is not one (a file damaged by something else). */
function decodeRecord(line: string): AuditRecord | undefined {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return undefined;
  }
  return recordOf(value);
}

/** The record of one parsed line, or undefined if it is not one. */
function recordOf(value: unknown): AuditRecord | undefined {
  if (!Array.isArray(value) || value.length !== 8) return undefined;
  const [at, type, clientId, audience, jti, reason, source, count] = value as unknown[];
  if (typeof at !== 'number' || !Number.isSafeInteger(at) || typeof type !== 'string' || !TYPES.has(type))
    return undefined;
  if (!text(clientId) || !text(audience) || !text(jti) || !text(reason) || !text(source)) return undefined;
  if (count !== null && (typeof count !== 'number' || !Number.isSafeInteger(count))) return undefined;
  return { at, type: type as SpooledEventType, clientId, audience, jti, reason, source, count };
}

/** Lines (JSON values separated by newlines) as the array of their values; undefined if one does not parse. */
function parseLines(text: string): unknown[] | undefined {
  try {
    const values: unknown = JSON.parse(`[${text.replaceAll('\n', ',')}]`);
    return Array.isArray(values) ? values : undefined;
  } catch {
    return undefined;
  }
}

/**
 * An exclusive lock on `file`, held by the returned handle until it is closed or the process ends; undefined
 * if another process holds it. SQLite's locks are the operating system's (fcntl), released when their process
 * dies; in exclusive locking mode the connection keeps the lock after its transaction ends.
 */
function tryLock(file: string): DatabaseSync | undefined {
  const db = new DatabaseSync(file);
  try {
    db.exec('PRAGMA busy_timeout = 0');
    // No journal file beside the lock: the lock file never holds data.
    db.exec('PRAGMA journal_mode = MEMORY');
    db.exec('PRAGMA locking_mode = EXCLUSIVE');
    db.exec('BEGIN EXCLUSIVE');
    db.exec('COMMIT');
    return db;
  } catch {
    db.close();
    return undefined;
  }
}

function unlinkQuietly(file: string): void {
  try {
    unlinkSync(file);
  } catch {
    // already gone (another process finished it), or it cannot be removed: nothing is lost either way
  }
}

export interface Segment {
  name: string;
  owner: string;
  /** Written by this process (not adopted from a process that is gone). */
  own: boolean;
  /** Bytes in the file. */
  size: number;
  /** Bytes whose events are in the store; undefined until read from the store (adopted segments). */
  written: number | undefined;
}

/** Events read from the spool, to be written to the store; `end` is the offset just past them. */
export interface SpoolChunk {
  segment: Segment;
  records: AuditRecord[];
  /** Lines in the chunk, damaged ones included (they are skipped, not written). */
  lines: number;
  end: number;
}

export interface SpoolOptions {
  dir: string;
  /** Most bytes the spool may hold on disk; appends past it are refused. */
  maxBytes: number;
  /** Size at which a segment is closed and the next one begun. */
  segmentBytes?: number;
}

export class Spool {
  readonly owner = `${systemClock.now().toString(36)}-${randomBytes(6).toString('hex')}`;
  /** Segments with events possibly not yet in the store, oldest first; adopted ones before this process's own. */
  private readonly segments: Segment[] = [];
  /** Locks of the owners whose segments this process adopted, until their last segment is removed. */
  private readonly adopted = new Map<string, DatabaseSync>();
  private readonly lock: DatabaseSync;
  private readonly segmentBytes: number;
  private current!: Segment;
  private fd = -1;
  private seq = 0;
  private readFd: { segment: Segment; fd: number } | undefined;
  /** Where chunks are read (their text is copied out of it at once): one buffer for the spool's life. */
  private readBuffer: Buffer | undefined;
  /** Removed segments whose positions the store may still hold (see takeRemoved). */
  private removed: string[] = [];
  /** Bytes of every segment file this process has (its own and adopted ones). */
  private held = 0;
  /** Lines this process appended whose events are not in the store yet. */
  private ownLines = 0;
  /** Lines found damaged and skipped. */
  damaged = 0;

  constructor(private readonly options: SpoolOptions) {
    this.segmentBytes = Math.max(4096, Math.min(options.segmentBytes ?? SEGMENT_BYTES, options.maxBytes / 4));
    mkdirSync(options.dir, { recursive: true, mode: 0o700 });
    const making = this.file(`${this.owner}.lock.new`);
    const lock = tryLock(making);
    if (!lock) throw new Error(`cannot lock a new audit spool file in ${options.dir}`);
    renameSync(making, this.file(`${this.owner}.lock`));
    this.lock = lock;
    this.openSegment();
  }

  /** Bytes on disk in spool segments of this process (its own and adopted ones). */
  get bytes(): number {
    return this.held;
  }

  /** Events this process appended that are not in the store yet. */
  get queued(): number {
    return this.ownLines;
  }

  /** Segments this process holds: its own and the adopted ones (for tests and the log). */
  get segmentNames(): string[] {
    return this.segments.map((s) => s.name);
  }

  private file(name: string): string {
    return path.join(this.options.dir, name);
  }

  private openSegment(): void {
    const name = `${this.owner}.${String(++this.seq).padStart(8, '0')}.spool`;
    this.fd = openSync(this.file(name), 'a', 0o600);
    this.current = { name, owner: this.owner, own: true, size: 0, written: 0 };
    this.segments.push(this.current);
  }

  /**
   * Appends lines (whole, each ending in a newline) before the answers they belong to are written. Returns
   * false, writing nothing, when the spool is full; throws when the disk refuses the write (then nothing of
   * it stays in the file).
   */
  append(text: string, lines: number): boolean {
    const data = Buffer.from(text);
    const current = this.current;
    const full = this.held + data.length > this.options.maxBytes;
    // A segment is closed when it is big enough, or early when it is all in the store and its room is needed.
    if (current.size >= this.segmentBytes || (full && current.size > 0 && current.written === current.size))
      this.rotate();
    if (this.held + data.length > this.options.maxBytes) return false;
    const start = this.current.size;
    try {
      for (let done = 0; done < data.length;) done += writeSync(this.fd, data, done, data.length - done);
    } catch (error) {
      // A partial line would corrupt the next: cut the file back to where this write began.
      try {
        ftruncateSync(this.fd, start);
      } catch {
        // the damaged tail is skipped when the segment is read
      }
      throw error;
    }
    this.current.size += data.length;
    this.held += data.length;
    this.ownLines += lines;
    return true;
  }

  private rotate(): void {
    closeSync(this.fd);
    const done = this.current;
    this.openSegment();
    // All in the store already: it goes now (others go when the writer reaches their end).
    if (done.written === done.size) this.remove(done);
  }

  /** A `.lock.new` whose process died before renaming it: unlocked and over a minute old; it never had segments. */
  private removeStaleNewLock(name: string): void {
    const file = this.file(name);
    let age: number;
    try {
      // Against the file system's times, which are the wall clock's.
      age = systemClock.now() - statSync(file).mtimeMs;
    } catch {
      return; // renamed or removed meanwhile
    }
    if (age < NEW_LOCK_STALE_MS) return;
    const lock = tryLock(file);
    if (!lock) return; // its owner lives (a start that takes over a minute)
    unlinkQuietly(file);
    lock.close();
  }

  /**
   * Adopts the segments of every owner that is gone: their lock can be taken. Returns how many segments were
   * adopted. Their positions in the store are read before they are written (see unpositioned).
   */
  adoptOrphans(): number {
    const owners = new Set<string>();
    for (const name of readdirSync(this.options.dir)) {
      if (NEW_LOCK_NAME.test(name)) {
        this.removeStaleNewLock(name);
        continue;
      }
      const owner = SEGMENT_NAME.exec(name)?.[1] ?? LOCK_NAME.exec(name)?.[1];
      if (owner !== undefined && owner !== this.owner && !this.adopted.has(owner)) owners.add(owner);
    }
    let count = 0;
    const adopted: Segment[] = [];
    for (const owner of [...owners].sort()) {
      const lockFile = this.file(`${owner}.lock`);
      const lock = tryLock(lockFile);
      if (!lock) continue; // its owner lives
      // Listed again under the lock: another process may have finished them meanwhile.
      const names = readdirSync(this.options.dir)
        .filter((name) => SEGMENT_NAME.exec(name)?.[1] === owner)
        .sort();
      if (names.length === 0) {
        unlinkQuietly(lockFile);
        lock.close();
        continue;
      }
      this.adopted.set(owner, lock);
      for (const name of names) {
        const size = statSync(this.file(name)).size;
        adopted.push({ name, owner, own: false, size, written: undefined });
        this.held += size;
        count++;
      }
    }
    // Older than anything of this process's own: written first.
    const firstOwn = this.segments.findIndex((s) => s.own);
    this.segments.splice(firstOwn < 0 ? this.segments.length : firstOwn, 0, ...adopted);
    return count;
  }

  /** The first segment whose position in the store is not known yet, if that is what holds the spool up. */
  unpositioned(): Segment | undefined {
    const head = this.segments[0];
    return head !== undefined && head.written === undefined ? head : undefined;
  }

  /** The store's position for an adopted segment (the offset past its last event in the store). */
  positioned(segment: Segment, offset: number): void {
    segment.written = Math.min(offset, segment.size);
  }

  /**
   * Reads up to `max` events that are not in the store yet, from the oldest segment that has some; removes
   * the segments found complete on the way (their names go to takeRemoved). Undefined when all is written.
   */
  read(max: number): SpoolChunk | undefined {
    for (;;) {
      const segment = this.segments[0];
      if (segment === undefined || segment.written === undefined) return undefined;
      if (segment.written < segment.size) {
        const chunk = this.readFrom(segment, segment.written, max);
        if (chunk) return chunk;
      }
      if (segment === this.current) return undefined;
      this.remove(segment);
    }
  }

  /**
   * Reads up to `max` events just past `chunk`, in its segment, before `chunk` is in the store: the next part of a
   * batch the store commits at once (see AuditRecorder). Undefined at the segment's end (the next segment is
   * read by `read`, once everything before it is stored).
   */
  readAfter(chunk: SpoolChunk, max: number): SpoolChunk | undefined {
    if (!this.hasAfter(chunk)) return undefined;
    return this.readFrom(chunk.segment, chunk.end, max);
  }

  /**
   * Whether the chunk's segment has bytes past it: readAfter then gives a chunk (of damaged lines only, in a segment
   * that is not being written) or, for this process's current segment (which holds whole lines only), events.
   */
  hasAfter(chunk: SpoolChunk): boolean {
    return chunk.end < chunk.segment.size;
  }

  /** The events of a chunk are in the store. */
  stored(chunk: SpoolChunk): void {
    chunk.segment.written = chunk.end;
    if (chunk.segment.own) this.ownLines -= chunk.lines;
  }

  /** Names of the segments removed since the last call, whose store positions can be forgotten. */
  takeRemoved(): string[] {
    const names = this.removed;
    this.removed = [];
    return names;
  }

  private readFrom(segment: Segment, start: number, max: number): SpoolChunk | undefined {
    if (this.readFd?.segment !== segment) {
      if (this.readFd) closeSync(this.readFd.fd);
      this.readFd = { segment, fd: openSync(this.file(segment.name), 'r') };
    }
    const fd = this.readFd.fd;
    // One buffer for every read: 34 chunks a second at 17,000 tokens, each a new 256 KiB otherwise.
    const buffer = (this.readBuffer ??= Buffer.allocUnsafe(READ_BYTES));
    const length = readSync(fd, buffer, 0, Math.min(READ_BYTES, segment.size - start), start);
    let records: AuditRecord[] = [];
    let lines = 0;
    let at = 0;
    while (lines < max) {
      const newline = buffer.indexOf(NEWLINE, at);
      if (newline < 0 || newline >= length) break;
      lines++;
      at = newline + 1;
    }
    if (lines > 0) {
      // The lines parsed as one JSON array (a third of the cost of a parse per line); line by line only if
      // that fails, so that a damaged line costs only itself.
      const whole = parseLines(buffer.toString('utf8', 0, at - 1));
      // As many values as lines: a damaged line holding several (`1,2`) is found line by line.
      if (whole?.length === lines) {
        for (const value of whole) {
          const record = recordOf(value);
          if (record) records.push(record);
          else this.damaged++;
        }
      } else {
        records = [];
        for (const line of buffer.toString('utf8', 0, at - 1).split('\n')) {
          const record = decodeRecord(line);
          if (record) records.push(record);
          else this.damaged++;
        }
      }
    }
    if (lines === 0) {
      // No whole line here. A segment still being written only ever ends in whole lines; any other may end in
      // a line that was cut (a write the disk refused half-way), or hold a line longer than a read: skipped.
      if (segment === this.current) return undefined;
      this.damaged++;
      return { segment, records, lines: 0, end: start + length };
    }
    return { segment, records, lines, end: start + at };
  }

  private remove(segment: Segment): void {
    if (this.readFd?.segment === segment) {
      closeSync(this.readFd.fd);
      this.readFd = undefined;
    }
    unlinkQuietly(this.file(segment.name));
    this.held -= segment.size;
    this.segments.splice(this.segments.indexOf(segment), 1);
    this.removed.push(segment.name);
    if (!segment.own && !this.segments.some((s) => s.owner === segment.owner)) {
      const lock = this.adopted.get(segment.owner);
      this.adopted.delete(segment.owner);
      // The lock file goes while it is still locked, so no other process adopts an owner that is finished.
      unlinkQuietly(this.file(`${segment.owner}.lock`));
      lock?.close();
    }
  }

  /**
   * Closes the spool. Segments whose events are all in the store are removed; the others stay, with their
   * owners' locks released, for the next process (or another live one) to adopt.
   */
  close(): void {
    if (this.readFd) closeSync(this.readFd.fd);
    this.readFd = undefined;
    if (this.fd >= 0) {
      // The size on disk, in case a write was refused half-way after the last append counted.
      this.current.size = fstatSync(this.fd).size;
      closeSync(this.fd);
      this.fd = -1;
    }
    for (
      let head = this.segments[0];
      head !== undefined && head.written === head.size;
      head = this.segments[0]
    )
      this.remove(head);
    for (const lock of this.adopted.values()) lock.close();
    this.adopted.clear();
    if (!this.segments.some((s) => s.own)) unlinkQuietly(this.file(`${this.owner}.lock`));
    this.lock.close();
  }
}
