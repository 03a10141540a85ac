import { describe, expect, it } from 'vitest';
import { MAX_JSON_DEPTH, pointerSegment, tooDeepAt } from '../../src/domain/json-depth.js';

/** `{"a":{"a":...{}}}`: `levels` objects, the outermost at level 1. */
const nested = (levels: number, key = 'a'): object => {
  let value: object = {};
  for (let i = 1; i < levels; i++) value = { [key]: value };
  return value;
};
/** `[[...[]]]`: `levels` arrays. */
const arrays = (levels: number): unknown[] => {
  let value: unknown[] = [];
  for (let i = 1; i < levels; i++) value = [value];
  return value;
};

describe('tooDeepAt: the first object or array past the depth limit (MANAGEMENT.md)', () => {
  it('32 levels pass; the object at level 33 is named by its pointer', () => {
    expect(MAX_JSON_DEPTH).toBe(32);
    expect(tooDeepAt(nested(32))).toBeUndefined();
    expect(tooDeepAt(nested(33))).toBe('/a'.repeat(32));
    expect(tooDeepAt(arrays(32))).toBeUndefined();
    expect(tooDeepAt(arrays(33))).toBe('/0'.repeat(32));
  });

  it('the value itself is level 1: {"a":{}} has {} at level 2; scalars are no level', () => {
    expect(tooDeepAt({ a: {} }, 1)).toBe('/a');
    expect(tooDeepAt({ a: {} }, 2)).toBeUndefined();
    expect(tooDeepAt({ a: 1, b: 'x', c: null, d: true }, 1)).toBeUndefined();
    expect(tooDeepAt({}, 0)).toBe('');
    for (const scalar of [null, 0, 'text', true, undefined]) expect(tooDeepAt(scalar, 0)).toBeUndefined();
  });

  it('the first in document order: members in their order, items by index, depth first', () => {
    const value = { a: [1, { b: 2 }], c: { d: [{}, []] }, e: [[]] };
    expect(tooDeepAt(value, 2)).toBe('/a/1');
    expect(tooDeepAt(value, 3)).toBe('/c/d/0');
    expect(tooDeepAt({ x: [0, [[], {}]] }, 3)).toBe('/x/1/0');
    expect(tooDeepAt({ z: {}, y: {}, x: { w: {} } }, 2)).toBe('/x/w');
    // Through arrays and objects alike, at any place.
    const inner = { claims: { x: arrays(31) } };
    expect(tooDeepAt(inner)).toBe('/claims/x' + '/0'.repeat(30));
  });

  it('escapes ~ and / in names (RFC 6901 §3), and names every other character as it is', () => {
    expect(tooDeepAt({ 'a/b': { '~c': { 'd~/': {} } } }, 2)).toBe('/a~1b/~0c');
    expect(tooDeepAt({ 'a/b': { '~c': { 'd~/': {} } } }, 3)).toBe('/a~1b/~0c/d~0~1');
    expect(tooDeepAt({ '': { ' ': { 'é"\\': {} } } }, 3)).toBe('// /é"\\');
    expect(pointerSegment('~/~1')).toBe('~0~1~01');
  });

  it('an own __proto__ member, as JSON.parse makes it, is a member like any other', () => {
    expect(tooDeepAt(JSON.parse('{"__proto__":{"a":{}}}'), 2)).toBe('/__proto__/a');
  });

  it('runs in constant stack: 1,000,000 levels, and a cyclic value, stop at the limit', () => {
    const deep = JSON.parse('['.repeat(1_000_000) + ']'.repeat(1_000_000)) as unknown;
    expect(tooDeepAt(deep)).toBe('/0'.repeat(32));
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(tooDeepAt(cyclic)).toBe('/self'.repeat(32));
  });

  it('a wide value is walked whole: a deep one after 100,000 shallow ones is found', () => {
    const wide: unknown[] = Array.from({ length: 100_000 }, () => ({ a: [] }));
    wide.push(arrays(32));
    expect(tooDeepAt(wide)).toBe('/100000' + '/0'.repeat(31));
  });
});
