import { once } from 'node:events';

/** Output of the CLI: one JSON document with --json, otherwise readable text. */
export function printJson(value: unknown): void {
  process.stdout.write(JSON.stringify(value, null, 2) + '\n');
}

/**
 * What the CLI prints may come from callers (an audit event's client id): control characters and bidi
 * overrides are shown escaped, never sent to the operator's terminal.
 */
function safe(value: string): string {
  return value.replace(
    // eslint-disable-next-line no-control-regex -- control characters are exactly what is escaped
    /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/** A plain aligned table; empty cells print as "-". */
export function formatTable(
  columns: readonly string[],
  rows: readonly (readonly (string | number | null)[])[],
): string {
  const cells = rows.map((row) => row.map((c) => (c === null || c === '' ? '-' : safe(String(c)))));
  // Folded, not spread into Math.max: a table may have more rows than a call takes arguments.
  const widths = columns.map((title, i) =>
    cells.reduce((w, row) => Math.max(w, row[i]!.length), title.length),
  );
  const line = (values: readonly string[]): string =>
    values
      .map((v, i) => (i === values.length - 1 ? v : v.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(columns.map((c) => c.toUpperCase())), ...cells.map(line)].join('\n') + '\n';
}

/** Key/value lines for one record. */
export function formatRecord(entries: readonly (readonly [string, string | number | null])[]): string {
  const width = Math.max(...entries.map(([k]) => k.length));
  return (
    entries
      .map(([k, v]) => `  ${k.padEnd(width)}  ${v === null || v === '' ? '-' : safe(String(v))}`)
      .join('\n') + '\n'
  );
}

export function print(text: string): void {
  process.stdout.write(text);
}

/**
 * A value as JSON.stringify(value, null, 2) writes it, in pieces: the containers of its first `depth` levels one
 * member at a time, what is deeper with JSON.stringify (re-indented: a JSON text has no raw newline in a
 * string). For a document too big to hold twice, as text and as data (an apply of 200 000 clients: 90 MB).
 * For plain data, as the CLI prints: an object with a toJSON method is left to JSON.stringify whole.
 */
export function* jsonPieces(value: unknown, depth = 2, indent = ''): Generator<string> {
  const container =
    typeof value === 'object' &&
    value !== null &&
    depth > 0 &&
    typeof (value as { toJSON?: unknown }).toJSON !== 'function';
  if (!container) {
    const text = JSON.stringify(value, null, 2) ?? 'null';
    yield indent === '' ? text : text.replace(/\n/g, `\n${indent}`);
    return;
  }
  const inner = `${indent}  `;
  if (Array.isArray(value)) {
    if (value.length === 0) return yield '[]';
    for (let i = 0; i < value.length; i++) {
      yield `${i === 0 ? '[' : ','}\n${inner}`;
      yield* jsonPieces(value[i], depth - 1, inner);
    }
    return yield `\n${indent}]`;
  }
  const record = value as Record<string, unknown>;
  // As JSON.stringify: a member whose value JSON has no word for is left out.
  const keys = Object.keys(record).filter((k) => isShown(record[k]));
  if (keys.length === 0) return yield '{}';
  for (const [i, key] of keys.entries()) {
    yield `${i === 0 ? '{' : ','}\n${inner}${JSON.stringify(key)}: `;
    yield* jsonPieces(record[key], depth - 1, inner);
  }
  yield `\n${indent}}`;
}

/** A value JSON.stringify writes as a member (not undefined, a function or a symbol). */
const isShown = (value: unknown): boolean =>
  value !== undefined && typeof value !== 'function' && typeof value !== 'symbol';

/**
 * Writes text given in pieces, some 64 kB at a time, waiting whenever the stream asks (its write returns false)
 * until it drains: what waits to be written stays bounded, however long the text.
 */
export async function writePieces(
  pieces: Iterable<string>,
  out: NodeJS.WritableStream = process.stdout,
): Promise<void> {
  let buffer = '';
  const flush = async () => {
    const chunk = buffer;
    buffer = '';
    // once() rejects if the stream fails instead (a closed pipe): no wait for a drain that never comes.
    if (!out.write(chunk)) await once(out, 'drain');
  };
  for (const piece of pieces) {
    buffer += piece;
    if (buffer.length >= 65_536) await flush();
  }
  if (buffer.length > 0) await flush();
}
