/**
 * A YAML file of `tessera apply` read part by part: each entry of a top-level list (a client, an audience) is
 * composed and made data as soon as the parser has finished it, and its syntax tree let go. yaml's syntax tree
 * and document of the whole text take some 90 bytes of memory per byte of it (a 20 MB file of 200 000 clients
 * held about 3 GB); read this way, what stays is the text and its data.
 *
 * Each entry is composed by yaml itself (its Composer), inside copies of the tokens around it (the document, the
 * top-level map with only the entry's key, the list with only the entry), so that it is read in the context it
 * has in the file: the same values, the same errors. What the parts cannot read alike is left to the reading of
 * the whole text (file.ts), which reports every error as before: anchors, aliases and tags (an alias may name an
 * anchor of another entry), directives, more than one document, any error, and any place nested too deep.
 */
import { Composer, CST, Lexer, Parser } from 'yaml';
import { TesseraError } from '../../domain/errors.js';
import { tooDeepToken } from './file-depth.js';

/** A top-level list being read part by part: its entries' data so far, and its key in the data. */
interface Streamed {
  seq: CST.BlockSequence;
  values: unknown[];
  key: string | undefined;
}

type Entry = CST.BlockSequence['items'][number];
type Pair = CST.BlockMap['items'][number];

/** Stops the reading: the whole text is read instead (file.ts). */
class NotHere extends TesseraError {
  override get code(): string {
    return 'read_whole';
  }
}

/**
 * The data of a YAML text, read part by part; undefined when it must be read whole (see above), which then
 * finds the same data or the errors. The document is level 1 of `maxDepth`.
 */
export function readYamlFile(
  text: string,
  maxDepth: number,
  maxAliasCount: number,
): { data: unknown } | undefined {
  try {
    return { data: readParts(text, maxDepth, maxAliasCount) };
  } catch (error) {
    if (error instanceof NotHere) return undefined;
    throw error;
  }
}

function readParts(text: string, maxDepth: number, maxAliasCount: number): unknown {
  const parser = new Parser();
  const composer = new Composer();
  /** What the parser gives at the top of the stream: the document, and comments and spaces around it. */
  const stream: CST.Token[] = [];
  const streamed: Streamed[] = [];
  let current: Streamed | undefined;
  const collect = (token: CST.Token) => {
    if (token.type === 'document' ? stream.some((t) => t.type === 'document') : !isBlank(token))
      throw new NotHere();
    stream.push(token);
  };

  /** An entry composed where it stands, its data kept. */
  const compose = (list: Streamed, document: CST.Document, map: CST.BlockMap, pair: Pair, item: Entry) => {
    if (item.value && tooDeepToken(item.value, 3, maxDepth)) throw new NotHere();
    const alone: CST.Document = {
      ...document,
      value: { ...map, items: [{ ...pair, value: { ...list.seq, items: [item] } } as Pair] },
      end: [],
    };
    const docs = [...composer.compose([alone], true, text.length)];
    if (docs.length !== 1 || docs[0]!.errors.length > 0) throw new NotHere();
    const data = docs[0]!.toJS({ maxAliasCount }) as Record<string, unknown>;
    const keys = Object.keys(data);
    const values = data[keys[0]!];
    if (keys.length !== 1 || !Array.isArray(values) || (list.key ?? keys[0]) !== keys[0]) throw new NotHere();
    list.key = keys[0];
    for (const value of values) list.values.push(compact(value));
  };

  let scalarNext = false;
  for (const lexeme of new Lexer().lex(text, false)) {
    // The lexeme after a scalar's mark is its text, whatever it starts with (as the parser reads it).
    if (scalarNext) scalarNext = false;
    else {
      const type = CST.tokenType(lexeme);
      if (type === 'scalar') scalarNext = true;
      else if (type === 'anchor' || type === 'alias' || type === 'tag') throw new NotHere();
    }
    for (const token of parser.next(lexeme)) collect(token);
    // A top-level map's list being read: its entries before the last one that starts with `-` are finished (the
    // parser only adds to the last ones).
    const [document, map, seq] = parser.stack;
    if (document?.type !== 'document' || map?.type !== 'block-map' || seq?.type !== 'block-seq') continue;
    let done = seq.items.length - 1;
    while (done > 0 && !seq.items[done]!.start.some((t) => t.type === 'seq-item-ind')) done--;
    if (done <= 0) continue;
    const pair = map.items[map.items.length - 1]!;
    if (pair.value !== undefined || !pair.key || !CST.isScalar(pair.key)) continue;
    if (current?.seq !== seq) {
      current = { seq, values: [], key: undefined };
      streamed.push(current);
    }
    for (let i = 0; i < done; i++) compose(current, document, map, pair, seq.items[i]!);
    seq.items.splice(0, done);
  }
  for (const token of parser.end()) collect(token);

  const document = stream.find((t): t is CST.Document => t.type === 'document');
  const map = document?.value;
  if (streamed.length > 0) {
    // The entries after the last one read: the lists are in the map now, each the value of its key.
    if (map?.type !== 'block-map') throw new NotHere();
    for (const list of streamed) {
      const pair = map.items.find((p) => p.value === list.seq);
      if (!pair) throw new NotHere();
      for (const item of list.seq.items) compose(list, document!, map, pair, item);
      list.seq.items = [];
    }
  }
  // The rest of the file, its lists emptied of what was read: whole, as yaml reads a text.
  if (map && tooDeepToken(map, 1, maxDepth)) throw new NotHere();
  const docs = [...new Composer().compose(stream, true, text.length)];
  if (docs.length !== 1 || docs[0]!.errors.length > 0) throw new NotHere();
  const data: unknown = docs[0]!.toJS({ maxAliasCount });
  for (const list of streamed) {
    const record = data as Record<string, unknown> | null;
    const key = list.key;
    if (key === undefined) continue; // only comments were read of it
    if (key === '__proto__' || !Array.isArray(record?.[key]) || (record[key] as unknown[]).length > 0)
      throw new NotHere();
    record[key] = list.values;
  }
  return data;
}

const isBlank = (token: CST.Token): boolean =>
  token.type === 'space' ||
  token.type === 'comment' ||
  token.type === 'newline' ||
  token.type === 'byte-order-mark';

/**
 * A value with each of its lists copied to its length: yaml's toJS pushes the items of a list, which leaves
 * room for 17 (a client's list of one grant held 150 bytes, 30 MB for 200 000 clients). The depth is the file's,
 * checked before (at most 32 levels).
 */
function compact(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(compact);
  if (typeof value === 'object' && value !== null)
    for (const [key, item] of Object.entries(value))
      if (typeof item === 'object' && item !== null) (value as Record<string, unknown>)[key] = compact(item);
  return value;
}
