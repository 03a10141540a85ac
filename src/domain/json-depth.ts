/**
 * How deep a JSON document may nest (docs/management.md: every JSON body nests at most 32 levels, the body itself
 * being level 1). JSON.parse copes with any depth a body limit allows, but much of what reads a parsed value
 * afterwards recurses once per level (JSON.stringify among them, which overflows the stack some 4,000 levels
 * down): the depth is refused where a document is read, and nothing past that point meets a deep one.
 */
export const MAX_JSON_DEPTH = 32;

/** An RFC 6901 reference token: `~` as `~0`, `/` as `~1` (RFC 6901 §3). */
export const pointerSegment = (segment: string | number): string =>
  String(segment).replace(/~/g, '~0').replace(/\//g, '~1');

interface Frame {
  value: object;
  level: number;
  parent: Frame | undefined;
  key: string | number;
}

/**
 * The JSON pointer (RFC 6901) of the first object or array at level `maxDepth + 1` of a parsed JSON value (the
 * value itself is level 1: `{"a":{}}` has `{}` at level 2), or undefined when it nests no deeper than that.
 * "First" is in document order: depth first, an object's members in their order, an array's items by index.
 * (An object JSON.parse makes lists integer-like names first, ECMA-262 OrdinaryOwnPropertyKeys: among those
 * that is the order.) Iterative, never recursive, so that the depth it refuses cannot overflow it; it stops at
 * the limit, so a value that is deeper than that, or even cyclic, costs no more than its first 32 levels.
 */
export function tooDeepAt(value: unknown, maxDepth: number = MAX_JSON_DEPTH): string | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const stack: Frame[] = [{ value, level: 1, parent: undefined, key: '' }];
  while (stack.length > 0) {
    const frame = stack.pop()!;
    if (frame.level > maxDepth) return pointerOf(frame);
    // Children pushed last first, so that they are popped in document order.
    if (Array.isArray(frame.value)) {
      for (let i = frame.value.length - 1; i >= 0; i--) push(stack, frame, i, frame.value[i]);
    } else {
      const keys = Object.keys(frame.value);
      for (let i = keys.length - 1; i >= 0; i--)
        push(stack, frame, keys[i]!, (frame.value as Record<string, unknown>)[keys[i]!]);
    }
  }
  return undefined;
}

function push(stack: Frame[], parent: Frame, key: string | number, child: unknown): void {
  if (typeof child === 'object' && child !== null)
    stack.push({ value: child, level: parent.level + 1, parent, key });
}

/** Built only for the one value found: a frame knows its parent and its key, not its whole path. */
function pointerOf(frame: Frame): string {
  const segments: string[] = [];
  for (let f: Frame | undefined = frame; f?.parent !== undefined; f = f.parent)
    segments.push(`/${pointerSegment(f.key)}`);
  return segments.reverse().join('');
}
