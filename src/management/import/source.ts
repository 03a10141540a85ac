/**
 * Reading another server's export (docs/import.md): a file's text (YAML or JSON), the files of a directory (the
 * Auth0 Deploy CLI's directory format), or data already parsed (the admin API's body). Each read document knows
 * where a JSON pointer of its data is, as a report's place and as the place of a problem; a source that cannot be
 * read (not YAML or JSON, nested too deep, too big) is refused as `tessera apply` refuses a file.
 */
import { MAX_JSON_DEPTH, tooDeepAt } from '../../domain/json-depth.js';
import { deepPlaceInText } from '../declarative/file-depth.js';
import { ConfigFileError, parseConfigFile, type FileProblem, type ParsedFile } from '../declarative/file.js';

/** The largest export read, in bytes (a realm of 100 000 clients is some 200 MB; one of 20 000 about 40). */
export const MAX_SOURCE_BYTES = 64 * 1024 * 1024;

/** What an import reads: a file's text, a directory's files (paths relative to it, with `/`), or parsed data. */
export type ImportInput =
  | { text: string; name: string }
  | { files: { path: string; text: string }[]; name: string }
  | { data: unknown; name?: string };

/** One document of a source: its data, and the places of its values. */
export interface SourceDoc {
  data: unknown;
  /** Its file within a directory source (`clients/My M2M.json`); undefined for a single file or data. */
  file?: string;
  /** A report's place of a pointer: the pointer (JSON), `line:column` (YAML), `file#pointer` (a directory's file). */
  place(pointer: string): string;
  /** A problem at a pointer, with its line and column when the source is text. */
  problem(pointer: string, message: string): FileProblem & { file?: string };
}

/** A place in a source: the document, and the JSON pointer of a value in its data. */
export interface Place {
  doc: SourceDoc;
  pointer: string;
}

/** A source refused: every problem, each in its file of a directory. */
export class ImportSourceError extends ConfigFileError {
  constructor(name: string, problems: (FileProblem & { file?: string })[]) {
    super(name, problems);
    const where = (p: FileProblem & { file?: string }) => {
      const file = p.file === undefined ? name : `${name}/${p.file}`;
      return p.line === undefined ? file : `${file}:${p.line}:${p.column ?? 1}`;
    };
    this.message =
      `${name}: ${problems.length} ${problems.length === 1 ? 'error' : 'errors'}, nothing was written\n` +
      problems.map((p) => `  ${where(p)}: ${p.pointer ? `${p.pointer}: ` : ''}${p.message}`).join('\n');
  }
}

const TOO_BIG = (bytes: number): string =>
  `is ${bytes} bytes; an export is read up to ${MAX_SOURCE_BYTES} bytes (64 MiB)`;

/** Refuses a source over the byte limit (its size known before it is read, e.g. from fs.stat). */
export function checkSize(name: string, bytes: number): void {
  if (bytes > MAX_SOURCE_BYTES) throw new ImportSourceError(name, [{ pointer: '', message: TOO_BIG(bytes) }]);
}

const looksJson = (text: string): boolean => /^\uFEFF?\s*[[{]/.test(text);

/**
 * A text read as YAML or JSON by apply's own reader (parseConfigFile: its depth limit, its duplicate keys, its
 * aliases), which takes an object at the top: a list (a Hydra export) is read inside one and taken out again.
 */
function readText(text: string, name: string, file?: string): SourceDoc {
  checkSize(file === undefined ? name : `${name}/${file}`, Buffer.byteLength(text));
  const isList = /^\uFEFF?\s*\[/.test(text);
  let parsed: ParsedFile;
  try {
    parsed = isList ? readList(text, name) : parseConfigFile(text, name);
  } catch (error) {
    if (!(error instanceof ConfigFileError)) throw error;
    throw new ImportSourceError(
      name,
      error.problems.map((p) => ({
        ...p,
        ...(isList ? unwrapped(p) : {}),
        ...(file === undefined ? {} : { file }),
      })),
    );
  }
  const data = isList ? (parsed.data as { items: unknown }).items : parsed.data;
  const locate = (pointer: string) => {
    const at = parsed.locate(isList ? `/items${pointer}` : pointer);
    return at && isList ? unwrappedAt(at) : at;
  };
  const json = looksJson(text);
  return {
    data,
    ...(file === undefined ? {} : { file }),
    place: (pointer) => {
      if (file !== undefined) return pointer === '' ? file : `${file}#${pointer}`;
      if (json) return pointer;
      const at = locate(pointer);
      return at ? `${at.line}:${at.column}` : pointer;
    },
    problem: (pointer, message) => ({
      pointer,
      ...locate(pointer),
      message,
      ...(file === undefined ? {} : { file }),
    }),
  };
  function unwrapped(p: FileProblem): Partial<FileProblem> {
    return {
      pointer: p.pointer.replace(/^\/items/, ''),
      ...(p.line === undefined ? {} : unwrappedAt({ line: p.line, column: p.column ?? 1 })),
    };
  }
  function unwrappedAt(at: { line: number; column: number }) {
    // The list stood after `{"items":` on the first line.
    return at.line === 1 ? { line: 1, column: Math.max(1, at.column - LIST_PREFIX.length) } : at;
  }
}

/** What a list is read inside of (its places then shift by as much on its first line). */
const LIST_PREFIX = '{"items":';

/**
 * A JSON list (a Hydra export), read with JSON.parse and its depth checked on its own data; its places are found,
 * when a line needs one, in the list read inside an object (`{"items": …}`), as apply's reader takes it. A text
 * that JSON.parse refuses is read that way too, for the places of its errors.
 */
function readList(text: string, name: string): ParsedFile {
  const wrapped = (): ParsedFile => parseConfigFile(`${LIST_PREFIX}${text.replace(/^\uFEFF/, '')}}`, name);
  let items: unknown;
  try {
    items = JSON.parse(text.replace(/^\uFEFF/, ''));
  } catch {
    return wrapped();
  }
  let located: ParsedFile | undefined;
  const locate: ParsedFile['locate'] = (pointer, key) => (located ??= wrapped()).locate(pointer, key);
  if (tooDeepAt(items, MAX_JSON_DEPTH) !== undefined) {
    // Its place in the text itself (the text read inside an object would be deeper still, and refused).
    const deep = deepPlaceInText(text, MAX_JSON_DEPTH)!;
    throw new ConfigFileError(name, [
      {
        pointer: `/items${deep.pointer}`,
        line: deep.line,
        column: deep.column + (deep.line === 1 ? LIST_PREFIX.length : 0),
        message: `is an object or list at level ${MAX_JSON_DEPTH + 1}; a file nests at most ${MAX_JSON_DEPTH} levels, itself being level 1`,
      },
    ]);
  }
  return { name, data: { items }, locate };
}

/** Data given parsed (the admin API's body): its places are JSON pointers, below `base` in the request. */
function readData(data: unknown, name: string): SourceDoc {
  const deep = tooDeepAt(data, MAX_JSON_DEPTH);
  if (deep !== undefined)
    throw new ImportSourceError(name, [
      { pointer: deep, message: `nests deeper than ${MAX_JSON_DEPTH} levels` },
    ]);
  return { data, place: (pointer) => pointer, problem: (pointer, message) => ({ pointer, message }) };
}

/** The documents of a source: one for a file or data; one per JSON or YAML file of a directory. */
export function readSource(input: ImportInput): { name: string; docs: SourceDoc[] } {
  if ('text' in input) return { name: input.name, docs: [readText(input.text, input.name)] };
  if ('data' in input) {
    const name = input.name ?? 'file';
    return { name, docs: [readData(input.data, name)] };
  }
  let total = 0;
  for (const f of input.files) total += Buffer.byteLength(f.text);
  checkSize(input.name, total);
  const docs: SourceDoc[] = [];
  const problems: (FileProblem & { file?: string })[] = [];
  for (const f of input.files) {
    try {
      docs.push(readText(f.text, input.name, f.path));
    } catch (error) {
      if (!(error instanceof ConfigFileError)) throw error;
      problems.push(...error.problems);
    }
  }
  if (problems.length > 0) throw new ImportSourceError(input.name, problems);
  return { name: input.name, docs };
}

/**
 * Two places of data without lines, in the order of their lists: `/clients/0/clientId` before `/clients/1`; of
 * two members of one object, the order found.
 */
function byListIndex(a: string, b: string): number {
  const x = a.split('/');
  const y = b.split('/');
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    if (x[i] === y[i]) continue;
    return /^\d+$/.test(x[i]!) && /^\d+$/.test(y[i]!) ? Number(x[i]) - Number(y[i]) : 0;
  }
  return 0;
}

/**
 * The most problems told of one source: an export of a million bad entries is refused with the first of them and a
 * count of the others, not with a message (and an answer) of a million lines.
 */
const MAX_PROBLEMS = 1000;

/** Problems of a source found while it is mapped, all reported at once (up to MAX_PROBLEMS, then counted). */
export class Problems {
  readonly list: (FileProblem & { file?: string })[] = [];
  private untold = 0;
  add(at: Place, message: string): void {
    if (this.list.length < MAX_PROBLEMS) this.list.push(at.doc.problem(at.pointer, message));
    else this.untold++;
  }
  /** Throws the source's problems, if there are any. */
  check(name: string): void {
    if (this.list.length === 0) return;
    // In the order of the source: by file, then line and column (data has none: the order found).
    const order = (p: FileProblem & { file?: string }): [string, number, number] => [
      p.file ?? '',
      p.line ?? 0,
      p.column ?? 0,
    ];
    const sorted = [...this.list].sort((a, b) => {
      const [fa, la, ca] = order(a);
      const [fb, lb, cb] = order(b);
      return fa < fb ? -1 : fa > fb ? 1 : la - lb || ca - cb || byListIndex(a.pointer, b.pointer);
    });
    if (this.untold > 0)
      sorted.push({
        pointer: '',
        message: `${this.untold} more ${this.untold === 1 ? 'problem' : 'problems'}, untold: at most ${MAX_PROBLEMS} are told`,
      });
    throw new ImportSourceError(name, sorted);
  }
}
