/**
 * A file of `tessera apply` that is JSON (`tessera export --format json`), read with JSON.parse: a few bytes of
 * memory per byte of text, where yaml's document model, which keeps every value's place, takes about a hundred
 * (a 2 MB file of 20 000 clients held 150 MB while it was read, and 200 000 clients would not fit in a few GB).
 * Places are only needed for an error; file.ts finds them then, with yaml.
 */

/**
 * What reading a JSON file gave: its data; or the offset of a key given twice in one object; or that it nests
 * deeper than allowed (file.ts then finds the place as for any file).
 */
export type JsonRead = { data: unknown } | { duplicateKeyAt: number } | { tooDeep: true };

/**
 * The text read as JSON, if it is JSON (an object, as a file is); undefined if it is not (then it is YAML, whose
 * flow style also starts with `{`, and yaml reads it). A key twice in one object is refused, as yaml refuses it:
 * JSON.parse would keep the last one silently.
 */
export function readJsonFile(text: string, maxDepth: number): JsonRead | undefined {
  if (!/^\uFEFF?\s*\{/.test(text)) return undefined;
  let data: unknown;
  try {
    data = JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
  } catch {
    return undefined;
  }
  const scanned = scan(text, maxDepth);
  if (scanned === 'too deep') return { tooDeep: true };
  return scanned === undefined ? { data } : { duplicateKeyAt: scanned };
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;

/**
 * One pass over a text that JSON.parse accepted (so well-formed: strings are closed, brackets balance): 'too
 * deep' at a collection deeper than `maxDepth` (the document being level 1), else the offset of the first key
 * given twice in the same object, else undefined. A set of keys for each object still open.
 */
function scan(text: string, maxDepth: number): number | 'too deep' | undefined {
  // null for an array; the keys so far of an object.
  const open: (Set<string> | null)[] = [];
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      if (open.length === maxDepth) return 'too deep';
      open.push(c === 0x7b ? new Set() : null);
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) open.pop();
    else if (c === QUOTE) {
      const start = i;
      let escaped = false;
      for (i++; text.charCodeAt(i) !== QUOTE; i++) {
        if (text.charCodeAt(i) === BACKSLASH) {
          escaped = true;
          i++;
        }
      }
      const keys = open.at(-1);
      if (!keys) continue;
      let next = i + 1;
      while (/\s/.test(text[next] ?? '')) next++;
      if (text.charCodeAt(next) !== COLON) continue;
      const raw = text.slice(start, i + 1);
      const key = escaped ? (JSON.parse(raw) as string) : raw.slice(1, -1);
      if (keys.has(key)) return start;
      keys.add(key);
    }
  }
  return undefined;
}
