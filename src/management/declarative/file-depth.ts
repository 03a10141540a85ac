import { CST, LineCounter, Parser } from 'yaml';
import { pointerSegment } from '../../domain/json-depth.js';

/** A collection past the depth limit in a file's text: its JSON pointer, and its line and column (from 1). */
export interface DeepPlace {
  pointer: string;
  line: number;
  column: number;
}

interface Frame {
  token: CST.Token;
  level: number;
  pointer: string;
}

/** A map key as the data names it: a scalar's value; anything else (an alias, a collection) as written. */
function keyName(key: CST.Token | null | undefined): string {
  if (!key) return '';
  if (CST.isScalar(key)) return CST.resolveAsScalar(key)?.value ?? key.source;
  return CST.stringify(key).trim();
}

/**
 * The first collection (in document order) at level `maxDepth + 1` of a YAML or JSON text, the document itself
 * being level 1, found in the text's syntax tree: the yaml package's parser keeps its own stack, but its
 * composer (parseDocument) recurses per level and gives up some 700 levels down with a stack overflow for an
 * error, so the depth is checked before it runs. Iterative, and it stops at the limit.
 * A collection written as a key counts as a level too (the data makes it a name, but the composer descends
 * into it as into a value); a flow sequence's `a: b` entry is a map the text does not nest, so a level less
 * is counted for it here: what the data has, ParsedFile's check of the data finds (aliases too).
 */
export function deepPlaceInText(text: string, maxDepth: number): DeepPlace | undefined {
  const lines = new LineCounter();
  const documents: CST.Token[] = [...new Parser(lines.addNewLine).parse(text)];
  const stack: Frame[] = [];
  for (let i = documents.length - 1; i >= 0; i--) {
    const document = documents[i]!;
    if (document.type === 'document' && document.value)
      stack.push({ token: document.value, level: 1, pointer: '' });
  }
  const deep = firstDeep(stack, maxDepth);
  if (deep === undefined) return undefined;
  const { line, col } = lines.linePos(deep.token.offset);
  return { pointer: deep.pointer, line, column: col };
}

/**
 * Whether a part of a text's syntax tree, at `level` (the document being level 1), has a collection past
 * `maxDepth`, counted as deepPlaceInText counts: for a file read part by part (yaml-file.ts), which finds the
 * place, if there is one, as deepPlaceInText does.
 */
export const tooDeepToken = (token: CST.Token, level: number, maxDepth: number): boolean =>
  firstDeep([{ token, level, pointer: '' }], maxDepth) !== undefined;

/** The first frame (popped from the end of `stack`) whose collection is past `maxDepth`. */
function firstDeep(stack: Frame[], maxDepth: number): Frame | undefined {
  while (stack.length > 0) {
    const frame = stack.pop()!;
    const { token, level, pointer } = frame;
    if (!CST.isCollection(token)) continue;
    if (level > maxDepth) return frame;
    const isMap =
      token.type === 'block-map' || (token.type === 'flow-collection' && token.start.source === '{');
    const children: Frame[] = [];
    token.items.forEach((item, index) => {
      if (isMap) {
        const name = `${pointer}/${pointerSegment(keyName(item.key))}`;
        if (item.key) children.push({ token: item.key, level: level + 1, pointer: name });
        if (item.value) children.push({ token: item.value, level: level + 1, pointer: name });
      } else {
        // An item of a sequence; `key` only for a flow sequence's `a: b` entry.
        if (item.key) children.push({ token: item.key, level: level + 1, pointer: `${pointer}/${index}` });
        if (item.value)
          children.push({ token: item.value, level: level + 1, pointer: `${pointer}/${index}` });
      }
    });
    for (let i = children.length - 1; i >= 0; i--) stack.push(children[i]!);
  }
  return undefined;
}
