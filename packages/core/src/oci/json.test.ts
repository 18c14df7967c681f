// The nesting bound on JSON documents: brackets inside strings (escaped quotes, runs of backslashes)
// never count, the answer agrees with the parsed value's own depth, and a document far past the bound
// is refused without recursion.
import { describe, expect, it } from 'vitest';
import { Prng } from '../testing/prng.js';
import { MAX_JSON_DEPTH, nestedDeeperThan, parseJSONDocument } from './json.js';

const b = (s: string): Buffer => Buffer.from(s);

/** The nesting of a parsed value, by walking it (the reference the scanner must agree with). */
function depthOf(v: unknown): number {
  if (Array.isArray(v)) return 1 + Math.max(0, ...v.map(depthOf));
  if (typeof v === 'object' && v !== null) return 1 + Math.max(0, ...Object.values(v).map(depthOf));
  return 0;
}

/** A random document of bounded size whose strings are full of brackets, quotes and backslashes. */
function randomDoc(rng: Prng, budget: number): unknown {
  const pick = rng.int(0, 3);
  const str = (): string => Array.from({ length: rng.int(0, 6) }, () => ['[', ']', '{', '}', '"', '\\', 'a', '\\"', '\\\\'][rng.int(0, 8)]).join('');
  if (budget <= 0 || pick === 0) return str();
  if (pick === 1) return Array.from({ length: rng.int(0, 3) }, () => randomDoc(rng, budget - 1));
  if (pick === 2) return Object.fromEntries(Array.from({ length: rng.int(0, 3) }, () => [str(), randomDoc(rng, budget - 1)]));
  return rng.int(0, 1000);
}

describe('nestedDeeperThan', () => {
  it('counts arrays and objects, and nothing inside strings', () => {
    expect(nestedDeeperThan(b('[[[]]]'), 3)).toBe(false);
    expect(nestedDeeperThan(b('[[[]]]'), 2)).toBe(true);
    expect(nestedDeeperThan(b('{"a":{"b":[1]}}'), 2)).toBe(true);
    expect(nestedDeeperThan(b('{"a":"[[[[{{{{"}'), 1)).toBe(false);
    expect(nestedDeeperThan(b('["\\"[[[["]'), 1)).toBe(false);
    // An even run of backslashes ends the string: the brackets after it count.
    expect(nestedDeeperThan(b('["\\\\",[[]]]'), 2)).toBe(true);
    expect(nestedDeeperThan(b('["\\\\\\"[[[["]'), 1)).toBe(false);
    expect(nestedDeeperThan(b('"unterminated [[['), 0)).toBe(false);
  });

  it('agrees with the depth of the parsed value on random documents', () => {
    const rng = new Prng(46);
    for (let i = 0; i < 2000; i++) {
      const doc = randomDoc(rng, 8);
      const text = b(JSON.stringify(doc));
      const depth = depthOf(doc);
      expect(nestedDeeperThan(text, depth), JSON.stringify(doc)).toBe(false);
      if (depth > 0) expect(nestedDeeperThan(text, depth - 1), JSON.stringify(doc)).toBe(true);
    }
  });
});

describe('parseJSONDocument', () => {
  it('parses a document nested to the bound', () => {
    const text = `${'['.repeat(MAX_JSON_DEPTH)}${']'.repeat(MAX_JSON_DEPTH)}`;
    expect(depthOf(parseJSONDocument(b(text), 'doc'))).toBe(MAX_JSON_DEPTH);
  });

  it('refuses one level more, and millions more, as INVALID_MANIFEST (or the code asked for)', () => {
    for (const depth of [MAX_JSON_DEPTH + 1, 2_000_000]) {
      const text = b(`{"a":${'['.repeat(depth)}${']'.repeat(depth)}}`);
      expect(() => parseJSONDocument(text, 'manifest of app:1')).toThrow(
        expect.objectContaining({ code: 'INVALID_MANIFEST', message: `manifest of app:1: arrays and objects nested deeper than ${MAX_JSON_DEPTH} levels` }),
      );
    }
    expect(() => parseJSONDocument(b('[[]'.repeat(200)), 'sig', 'SIGNATURE_INVALID')).toThrow(expect.objectContaining({ code: 'SIGNATURE_INVALID' }));
    expect(() => parseJSONDocument(b('{"a":'), 'doc')).toThrow(expect.objectContaining({ code: 'INVALID_MANIFEST', message: 'doc: not valid JSON' }));
  });
});
