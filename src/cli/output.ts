/** Output of the CLI: one JSON document with --json, otherwise readable text. */
export function printJson(value: unknown): void {
  process.stdout.write(JSON.stringify(value, null, 2) + '\n');
}

/** A plain aligned table; empty cells print as "-". */
export function formatTable(
  columns: readonly string[],
  rows: readonly (readonly (string | number | null)[])[],
): string {
  const cells = rows.map((row) => row.map((c) => (c === null || c === '' ? '-' : String(c))));
  const widths = columns.map((title, i) => Math.max(title.length, ...cells.map((row) => row[i]!.length)));
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
    entries.map(([k, v]) => `  ${k.padEnd(width)}  ${v === null || v === '' ? '-' : String(v)}`).join('\n') +
    '\n'
  );
}

export function print(text: string): void {
  process.stdout.write(text);
}
