/**
 * docs/traces.md's attribute tables are src/telemetry/attributes.ts's (INTERFACE.md, "Traces": a documented and
 * stable set): every row the same name, type, occasion and example, in the same order.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  ADMIN_ATTRIBUTES,
  CLIENT_ATTRIBUTES,
  HTTP_ATTRIBUTES,
  OAUTH_ATTRIBUTES,
  type AttributeRow,
} from '../src/telemetry/attributes.js';

const GUIDE = readFileSync(resolve(import.meta.dirname, '../docs/traces.md'), 'utf8');

/** The rows of the table after `<!-- attributes: name -->`, as the module writes them. */
function documented(name: string): AttributeRow[] {
  const at = GUIDE.indexOf(`<!-- attributes: ${name} -->`);
  if (at < 0) throw new Error(`docs/traces.md has no table ${name}`);
  const lines = GUIDE.slice(at).split('\n').slice(1);
  const start = lines.findIndex((line) => line.startsWith('|'));
  const table = lines.slice(
    start,
    lines.findIndex((line, i) => i > start && !line.startsWith('|')),
  );
  return table.slice(2).map((line) => {
    const [attribute, type, when, example] = line
      .split(/(?<!\\)\|/)
      .slice(1, -1)
      .map((cell) => cell.trim().replace(/^`|`$/g, ''));
    return { name: attribute!, type: type as AttributeRow['type'], when: when!, example: example! };
  });
}

describe('docs/traces.md', () => {
  it.each([
    ['http', HTTP_ATTRIBUTES],
    ['oauth', OAUTH_ATTRIBUTES],
    ['admin', ADMIN_ATTRIBUTES],
    ['client', CLIENT_ATTRIBUTES],
  ] as const)('the %s attributes are the module’s', (name, rows) => {
    expect(documented(name)).toEqual(rows.map((row) => ({ ...row })));
  });
});
