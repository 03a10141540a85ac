/**
 * `tessera apply` reads a YAML file entry by entry (yaml-file.ts) instead of making yaml's syntax tree and document
 * of the whole text (some 90 bytes of memory per byte of text: a 200 000-client file held 3 GB). It must read the
 * same data as yaml reads, and leave to the whole reading (which reports errors and places as before) what it
 * cannot read alike.
 */
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { readYamlFile } from '../../src/management/declarative/yaml-file.js';
import * as declarative from '../../src/management/declarative/index.js';
import { heapUsed } from '../helpers/memory.js';

const read = (text: string) => readYamlFile(text, 32, 100);

/** Texts that are read part by part, each as yaml reads it whole. */
const SAME = {
  'a file': `audiences:
  - identifier: https://api.example.com
    name: Orders API
    token_ttl: 600
  - identifier: https://billing.example.com
    signing_alg: ES256
clients:
  - client_id: svc-1
    name: Service one
    quota_per_minute: 10
    grants:
      - audience: https://api.example.com
      - audience: https://billing.example.com
  - client_id: svc-2
    name: Service two
    enabled: false
    grants:
      - audience: https://old.example.com
`,
  'comments everywhere, a document start and a BOM': `\uFEFF# the file
---
# before
clients: # the clients
  # first
  - client_id: a # a
    name: A

    # between
  - client_id: b
    name: B
      # indented comment
  # last
audiences: []
# the end
`,
  'lists at the indentation of their key, and without a newline at the end': `clients:
- client_id: a
  name: A
- client_id: b
  name: B
- client_id: c
  name: C`,
  'flow entries, block scalars, quoted and multi-line scalars, empty entries, nulls and numbers': `clients:
  - {client_id: a, name: "A\\n", grants: [{audience: x}]}
  - client_id: 'b'
    name: >-
      folded
      text
    description: |
      literal
        kept
    claims: {n: 1, f: 1.5, o: 0o17, h: 0x1f, t: true, y: yes, z: ~, e: ""}
  -
  - - nested
    - list
  - plain
    continued
  - [1, 2,
     3]
  - "multi
    line"
  - ? explicit
    : value
x: 1
clients2:
  - 1
  - 2
`,
  'not a map': '- a\n- b\n- c\n',
  'a scalar': 'hello\n',
  nothing: '',
  'only a comment': '# nothing\n',
};

describe('a YAML file read entry by entry', () => {
  for (const [name, text] of Object.entries(SAME))
    it(`reads what yaml reads: ${name}`, () => {
      expect(read(text)).toEqual({ data: parse(text) });
    });

  it('leaves to the whole reading what the parts cannot read alike', () => {
    const anchored = 'clients:\n  - &a {client_id: a, name: A}\n  - *a\n';
    const tagged = 'clients:\n  - !!str 1\n  - 2\n';
    const directive = '%YAML 1.1\n---\nclients:\n  - yes\n  - no\n';
    const twoDocuments = 'clients:\n  - a\n  - b\n---\nclients: []\n';
    const duplicate = 'clients:\n  - a\n  - b\nclients:\n  - c\n';
    const duplicateInEntry = 'clients:\n  - client_id: a\n    client_id: b\n  - client_id: c\n';
    const broken = 'clients:\n  - a: [1, 2\n  - b\n';
    const deep = `clients:\n  - a\n  - ${'['.repeat(31)}${']'.repeat(31)}\n  - c\n`;
    for (const text of [anchored, tagged, directive, twoDocuments, duplicate, duplicateInEntry, broken, deep])
      expect(read(text), text).toBeUndefined();
    // 30 levels inside an entry at level 3 is level 32: allowed.
    const deepest = `clients:\n  - a\n  - ${'['.repeat(30)}${']'.repeat(30)}\n  - c\n`;
    expect(read(deepest)).toEqual({ data: parse(deepest) });
  });

  it('refuses and places errors as the whole reading does', () => {
    const problems = (text: string) => {
      try {
        declarative.parseConfigFile(text, 'tessera.yaml');
      } catch (error) {
        return (error as InstanceType<typeof declarative.ConfigFileError>).problems;
      }
      return undefined;
    };
    expect(problems('clients:\n  - client_id: a\n    name: A\n  - client_id: b\n    client_id: c\n')).toEqual(
      [{ pointer: '', line: 5, column: 5, message: 'Map keys must be unique' }],
    );
    expect(problems(`clients:\n  - a\n  - ${'['.repeat(31)}${']'.repeat(31)}\n`)).toEqual([
      expect.objectContaining({ pointer: `/clients/1${'/0'.repeat(30)}`, line: 3, column: 35 }),
    ]);
  });

  it('keeps the data, not yaml’s document of the text: 20,000 clients hold a few MB', () => {
    let text = 'clients:\n';
    for (let i = 0; i < 20_000; i++)
      text += `  - client_id: bulk-${i}\n    name: Bulk ${i}\n    grants:\n      - audience: https://api.example.com\n`;
    const before = heapUsed();
    const file = declarative.parseConfigFile(text, 'big.yaml');
    const held = heapUsed() - before;
    expect((file.data as { clients: unknown[] }).clients).toHaveLength(20_000);
    expect((file.data as { clients: unknown[] }).clients[19_999]).toEqual({
      client_id: 'bulk-19999',
      name: 'Bulk 19999',
      grants: [{ audience: 'https://api.example.com' }],
    });
    // yaml's document of this 2 MB text alone is some 45 MB; the data is about 6 MB.
    expect(held).toBeLessThan(15 * 1024 * 1024);
    // A place is still found when a problem needs one.
    expect(file.locate('/clients/19999/grants/0/audience')).toEqual({ line: 80_001, column: 19 });
  });
});
