// JSON documents a registry or the store hands over (manifests, indexes, configs, referrer lists),
// parsed only after their nesting is known to be bounded. JSON.parse itself copes with any depth, but
// whatever walks the result recursively later (JSON.stringify for the daemon's Get and `fastpull
// inspect`, structuredClone, a logger) overflows the stack a few thousand levels down: a document
// deeper than that, once stored, would fail every read of it forever.
import { FastpullError, type ErrorCode } from '../errors.js';

/**
 * How deeply arrays and objects may nest in a document. Real manifests, indexes and configs nest
 * four or five levels; this leaves room for any artifact's config while every recursive walk of
 * the parsed value stays far from the stack's end (see docs/errors.md, INVALID_MANIFEST).
 */
export const MAX_JSON_DEPTH = 128;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_ARRAY = 0x5b;
const OPEN_OBJECT = 0x7b;
const CLOSE_ARRAY = 0x5d;
const CLOSE_OBJECT = 0x7d;

/**
 * Whether arrays and objects in `bytes` nest deeper than `limit`: one pass that never recurses and
 * skips strings with memchr, so it costs a fraction of the parse it guards. Brackets inside strings
 * do not count. Malformed JSON is not its business: it answers for what it saw, the parse refuses it.
 * @example
 * nestedDeeperThan(Buffer.from('[[[]]]'), 2); // true
 */
export function nestedDeeperThan(bytes: Uint8Array, limit: number): boolean {
  const b = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const n = b.length;
  let depth = 0;
  let i = 0;
  while (i < n) {
    const c = b[i]!;
    if (c === QUOTE) {
      i = stringEnd(b, i + 1);
      if (i < 0) return false;
    } else if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      if (++depth > limit) return true;
    } else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) {
      depth--;
    }
    i++;
  }
  return false;
}

/** The index of the quote that closes a string whose body starts at `from`; -1 when none does. */
function stringEnd(b: Buffer, from: number): number {
  let j = from;
  for (;;) {
    j = b.indexOf(QUOTE, j);
    if (j < 0) return -1;
    // A quote is escaped by an odd run of backslashes before it.
    let k = j - 1;
    while (k >= from && b[k] === BACKSLASH) k--;
    if ((j - 1 - k) % 2 === 0) return j;
    j++;
  }
}

/**
 * Parses a JSON document whose nesting is at most {@link MAX_JSON_DEPTH}. Throws `code` (default
 * INVALID_MANIFEST), its message starting with `what`, for a deeper document and for one that is not
 * JSON.
 * @example
 * const doc = parseJSONDocument(bytes, `manifest of ${name}`);
 */
export function parseJSONDocument(bytes: Uint8Array, what: string, code: ErrorCode = 'INVALID_MANIFEST'): unknown {
  if (nestedDeeperThan(bytes, MAX_JSON_DEPTH)) {
    throw new FastpullError(code, `${what}: arrays and objects nested deeper than ${MAX_JSON_DEPTH} levels`, { details: { maxDepth: MAX_JSON_DEPTH } });
  }
  try {
    return JSON.parse(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8')) as unknown;
  } catch (e) {
    throw new FastpullError(code, `${what}: not valid JSON`, { cause: e });
  }
}
