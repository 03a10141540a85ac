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
