/**
 * `tessera apply` files nest at most 32 levels, the file itself being level 1 (MANAGEMENT.md: the rule of every
 * JSON body). A file deeper than that is refused whole, the first place too deep named as the file's other
 * errors are (a JSON pointer, its line and column), however deep it goes: the YAML composer, which recurses
 * per level, never sees it. The CLI's `--claims` follow the claims rule (31 levels of their own).
 */
import { afterAll, describe, expect, it } from 'vitest';
import * as declarative from '../../src/management/declarative/index.js';
import { jsonError, workspace } from '../helpers/cli.js';

const MESSAGE = 'is an object or list at level 33; a file nests at most 32 levels, itself being level 1';

/** A file whose client's claims are block maps `a:` down to level `levels` of the file (claims: level 4). */
function blockFile(levels: number): string {
  let text = 'clients:\n  - client_id: svc\n    name: svc\n    claims:\n';
  let indent = 6;
  for (let level = 5; level < levels; level++, indent += 2) text += `${' '.repeat(indent)}a:\n`;
  return text + `${' '.repeat(indent)}a: {}\n`;
}

function refusal(text: string): unknown {
  try {
    declarative.parseConfigFile(text, 'tessera.yaml');
  } catch (error) {
    expect(error).toBeInstanceOf(declarative.ConfigFileError);
    const { problems, message } = error as InstanceType<typeof declarative.ConfigFileError>;
    return { problems, message };
  }
  return undefined;
}

describe('apply files: at most 32 levels', () => {
  it('block YAML: level 32 is read; level 33 is refused at its pointer, line and column', () => {
    const fits = declarative.parseConfigFile(blockFile(32), 'tessera.yaml');
    let claims = (fits.data as { clients: { claims: unknown }[] }).clients[0]!.claims;
    let depth = 4;
    while (typeof claims === 'object' && claims !== null && 'a' in claims) {
      claims = (claims as { a: unknown }).a;
      depth++;
    }
    expect({ depth, claims }).toEqual({ depth: 32, claims: {} });

    const pointer = '/clients/0/claims' + '/a'.repeat(29);
    expect(refusal(blockFile(33))).toEqual({
      problems: [{ pointer, line: 33, column: 66, message: MESSAGE }],
      message: `tessera.yaml: 1 error, nothing was changed\n  tessera.yaml:33:66: ${pointer}: ${MESSAGE}`,
    });
  });

  it('JSON (which YAML reads alike), 5,000 levels deep through lists: refused at level 33, not overflowed', () => {
    const text = `{"clients": [{"client_id": "svc", "name": "svc", "claims": {"x": ${'['.repeat(5000)}${']'.repeat(5000)}}}]}`;
    const pointer = '/clients/0/claims/x' + '/0'.repeat(28);
    const column = text.indexOf('[', text.indexOf('"x"')) + 28 + 1;
    expect(refusal(text)).toEqual({
      problems: [{ pointer, line: 1, column, message: MESSAGE }],
      message: `tessera.yaml: 1 error, nothing was changed\n  tessera.yaml:1:${column}: ${pointer}: ${MESSAGE}`,
    });
  });

  it('the first place too deep in the file, names escaped (RFC 6901); a flow map in a block file', () => {
    const text =
      'audiences:\n  - identifier: https://api.example.com\n' +
      `clients:\n  - client_id: svc\n    name: svc\n    claims:\n      ok: [1, {b: 2}]\n` +
      `      "a/b~c": ${'{k: '.repeat(29)}{}${'}'.repeat(29)}\n      z: ${'['.repeat(40)}${']'.repeat(40)}\n`;
    const pointer = '/clients/0/claims/a~1b~0c' + '/k'.repeat(28);
    expect((refusal(text) as { problems: unknown }).problems).toEqual([
      { pointer, line: 8, column: 16 + 4 * 28, message: MESSAGE },
    ]);
  });

  it('an alias nests its anchor deeper than the text: the data is checked too, the place located', () => {
    const anchor = `${'['.repeat(20)}${']'.repeat(20)}`;
    const text =
      `clients:\n  - client_id: svc\n    name: svc\n    claims:\n      base: &deep ${anchor}\n` +
      `      more: [[[[[[[[[[*deep]]]]]]]]]]\n`;
    // In the text, 24 levels at most (base). In the data, more's ten lists (levels 5 to 14) hold the anchor's
    // twenty (15 to 34); the place is the alias, where the pointer leaves the text.
    const pointer = '/clients/0/claims/more' + '/0'.repeat(28);
    expect((refusal(text) as { problems: unknown }).problems).toEqual([
      { pointer, line: 6, column: 23, message: MESSAGE },
    ]);
  });

  it('a key that is a collection counts as a level, as the composer descends into it', () => {
    const key = `${'['.repeat(40)}${']'.repeat(40)}`;
    // The client's map is level 3, the key level 4: its 30th list is at level 33.
    expect((refusal(`clients:\n  - ? ${key}\n    : x\n`) as { problems: unknown }).problems).toEqual([
      { pointer: `/clients/0/${key}${'/0'.repeat(29)}`, line: 2, column: 7 + 29, message: MESSAGE },
    ]);
  });
});

describe('the CLI', { timeout: 60_000 }, () => {
  const ws = workspace('tessera-depth-test-');
  afterAll(() => ws.remove());

  it('apply of a file 5,000 levels deep: exit 2, its place, nothing written; --claims 5,000 levels deep: exit 2', async () => {
    const text = `{"clients": [{"client_id": "svc", "name": "svc", "claims": {"x": ${'['.repeat(5000)}${']'.repeat(5000)}}}]}`;
    const file = ws.write('deep.json', text);
    const pointer = '/clients/0/claims/x' + '/0'.repeat(28);
    const column = text.indexOf('[', text.indexOf('"x"')) + 28 + 1;
    const [applied, created] = await Promise.all([
      ws.run('apply', '-f', file, '--json'),
      ws.run(
        'client',
        'create',
        '--name',
        'deep',
        '--claims',
        `{"x":${'['.repeat(5000)}${']'.repeat(5000)}}`,
        '--json',
      ),
    ]);
    expect(applied.code).toBe(2);
    expect(jsonError(applied)).toEqual({
      error: 'invalid_file',
      message: `${file}: 1 error, nothing was changed\n  ${file}:1:${column}: ${pointer}: ${MESSAGE}`,
      errors: [{ pointer, line: 1, column, message: MESSAGE }],
    });
    expect(created.code).toBe(2);
    expect(jsonError(created)).toEqual({
      error: 'invalid_field',
      message: `claims must nest at most 31 levels (a request body, 32); /x${'/0'.repeat(30)} is deeper`,
    });
    expect((await ws.ok('client', 'list', '--json')).json).toEqual([]);
  });
});

/** A "billion laughs": nine aliases of nine aliases, six times over (9^6 = 531,441 strings from 7 lines). */
const ALIAS_BOMB =
  'clients:\n  - client_id: svc\n    name: svc\n    claims:\n' +
  '      a: &a [x, x, x, x, x, x, x, x, x]\n' +
  ['b', 'c', 'd', 'e', 'f']
    .map((name, i) => {
      const prev = 'abcde'[i]!;
      return `      ${name}: &${name} [${Array(9).fill(`*${prev}`).join(', ')}]\n`;
    })
    .join('') +
  `      g: [${Array(9).fill('*f').join(', ')}]\n`;
const ALIASES =
  "the file's aliases expand to too many values (at most 100 per alias): write the values out, or use fewer aliases of aliases";

describe('apply files: an alias bomb', () => {
  it('is refused as the file, at its first alias, before it expands', () => {
    expect(refusal(ALIAS_BOMB)).toEqual({
      problems: [{ pointer: '', line: 6, column: 14, message: ALIASES }],
      message: `tessera.yaml: 1 error, nothing was changed\n  tessera.yaml:6:14: ${ALIASES}`,
    });
    // A few aliases are still aliases.
    const fine = declarative.parseConfigFile('a: &a [1, 2]\nb: [*a, *a]\n', 'tessera.yaml');
    expect(fine.data).toEqual({
      a: [1, 2],
      b: [
        [1, 2],
        [1, 2],
      ],
    });
  });
});

describe('the CLI and an alias bomb', { timeout: 60_000 }, () => {
  const ws = workspace('tessera-alias-test-');
  afterAll(() => ws.remove());

  it('apply: exit 2 (invalid_file) with the place, nothing written', async () => {
    const file = ws.write('bomb.yaml', ALIAS_BOMB);
    const applied = await ws.run('apply', '-f', file, '--json');
    expect(applied.code).toBe(2);
    expect(jsonError(applied)).toEqual({
      error: 'invalid_file',
      message: `${file}: 1 error, nothing was changed\n  ${file}:6:14: ${ALIASES}`,
      errors: [{ pointer: '', line: 6, column: 14, message: ALIASES }],
    });
    expect((await ws.ok('client', 'list', '--json')).json).toEqual([]);
  });
});
