/**
 * `tessera apply` reads a JSON file with JSON.parse instead of yaml's syntax tree and document of places (about a
 * hundred bytes of memory per byte of text: a 200 000-client file would not fit in a few GB), and finds a place
 * only when an error needs one. It must refuse and place exactly what the YAML reading did: a key twice in one
 * object where yaml says so, the places of later problems where yaml's document puts them.
 */
import { LineCounter, parseDocument } from 'yaml';
import { describe, expect, it } from 'vitest';
import { readJsonFile } from '../../src/management/declarative/json-file.js';
import * as declarative from '../../src/management/declarative/index.js';

/** What yaml says of a text: its errors, placed, as the YAML reading reported them. */
function yamlErrors(text: string) {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false });
  return doc.errors.map((e) => {
    const { line, col } = lines.linePos(e.pos[0]);
    return { pointer: '', line, column: col, message: e.message };
  });
}

function problemsOf(text: string): unknown {
  try {
    declarative.parseConfigFile(text, 'tessera.json');
  } catch (error) {
    expect(error).toBeInstanceOf(declarative.ConfigFileError);
    return (error as InstanceType<typeof declarative.ConfigFileError>).problems;
  }
  return undefined;
}

describe('a JSON file of tessera apply', () => {
  it('is read by JSON.parse: the same data as yaml reads', () => {
    const text = JSON.stringify(
      {
        audiences: [{ identifier: 'https://api.example.com', token_ttl: 600, scopes: [{ name: 'a:read' }] }],
        clients: [
          {
            client_id: 'svc',
            name: 'Svc "quoted" \\ and \u00e9',
            claims: { tier: 3, ratio: 1.5e3, ok: true, none: null, list: [1, 'two'] },
            grants: [{ audience: 'https://api.example.com', scopes: ['a:read'] }],
          },
        ],
      },
      null,
      2,
    );
    expect(readJsonFile(text, 32)).toEqual({ data: parseDocument(text).toJS() });
    expect(declarative.parseConfigFile(text, 'f.json').data).toEqual(parseDocument(text).toJS());
    // A byte order mark first, as some editors write it.
    expect(readJsonFile(`\uFEFF${text}`, 32)).toEqual({ data: JSON.parse(text) });
  });

  it('YAML, a flow mapping included, is not JSON: yaml reads it as before', () => {
    expect(readJsonFile('clients: []\n', 32)).toBeUndefined();
    expect(readJsonFile('{clients: []}', 32)).toBeUndefined();
    expect(declarative.parseConfigFile('{clients: []}', 'f.yaml').data).toEqual({ clients: [] });
    expect(readJsonFile('[]', 32)).toBeUndefined();
  });

  it.each([
    ['a key twice', '{\n  "clients": [\n    {"client_id": "a", "name": "x", "name": "y"}\n  ]\n}'],
    ['a key twice, once written with an escape', '{"a\\u0062": 1, "ab": 2}'],
    ['a key twice at the top, after nested objects', '{"a": {"a": 1}, "b": [{"a": 2}], "a": 3}'],
    ['a key twice after a string holding quotes and colons', '{"k": "v\\": \\"k\\":", "k": 1}'],
  ])('%s: refused where yaml refuses it, with its words', (_what, text) => {
    expect(readJsonFile(text, 32)).toMatchObject({ duplicateKeyAt: expect.any(Number) });
    expect(problemsOf(text)).toEqual(yamlErrors(text));
    expect(yamlErrors(text)).toHaveLength(1);
  });

  it('the same key in different objects, or as a value, is no duplicate', () => {
    const text = '{"x": {"k": 1}, "y": {"k": 2}, "z": [{"k": 3}, {"k": "k"}], "k": "x"}';
    expect(readJsonFile(text, 32)).toEqual({ data: JSON.parse(text) });
  });

  it('a file deeper than the limit is left to the place-finding of every file', () => {
    const deep = `{"a": ${'['.repeat(40)}${']'.repeat(40)}}`;
    expect(readJsonFile(deep, 32)).toEqual({ tooDeep: true });
    expect(problemsOf(deep)).toEqual([
      expect.objectContaining({
        line: 1,
        message: expect.stringContaining('a file nests at most 32 levels'),
      }),
    ]);
    // At the limit exactly: read.
    const atLimit = `{"a": ${'['.repeat(31)}${']'.repeat(31)}}`;
    expect(readJsonFile(atLimit, 32)).toMatchObject({ data: expect.any(Object) });
  });

  it('places a problem found later where yaml would: the document of places is made then', () => {
    const text =
      '{\n  "clients": [\n    { "client_id": "svc", "name": "one" },\n    { "client_id": "svc", "name": "two" }\n  ]\n}\n';
    const file = declarative.parseConfigFile(text, 'f.json');
    expect(file.locate('/clients/1/client_id')).toEqual({ line: 4, column: 20 });
    expect(file.locate('/clients/1/client_id', true)).toEqual({ line: 4, column: 7 });
    expect(file.locate('/clients/0')).toEqual({ line: 3, column: 5 });
  });
});
