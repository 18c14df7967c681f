// HTTP details of the loopback registry: byte ranges, distribution's error bodies, names and the
// counted faults that switch themselves off.
import { FastpullError } from '../errors.js';
import type { CountedFault } from './registry-types.js';

/** Distribution's repository name grammar (distribution/reference). */
const NAME_RE = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$/;

export type ByteRange = { start: number; end: number } | 'unsatisfiable' | undefined;

/** Parses a single `bytes=` range; undefined means "ignore the header" (absent, malformed or multi-range), as RFC 9110 allows. */
export function parseRange(header: string | undefined, total: number): ByteRange {
  if (header === undefined) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m) return undefined;
  const [, a = '', b = ''] = m;
  if (a === '' && b === '') return undefined;
  if (a === '') {
    const suffix = Number(b);
    if (suffix === 0 || total === 0) return 'unsatisfiable';
    return { start: Math.max(0, total - suffix), end: total - 1 };
  }
  const start = Number(a);
  const end = b === '' ? total - 1 : Math.min(Number(b), total - 1);
  if (start >= total || (b !== '' && Number(b) < start)) return 'unsatisfiable';
  return { start, end };
}

export function errorBody(code: string, message: string, detail?: unknown): Buffer {
  return Buffer.from(JSON.stringify({ errors: [{ code, message, ...(detail !== undefined ? { detail } : {}) }] }));
}

export function checkName(repository: string): void {
  if (!NAME_RE.test(repository) || repository.length > 255)
    throw new FastpullError('INVALID_ARGUMENT', `invalid repository name ${JSON.stringify(repository)}`);
}

export function takeCounted<T extends CountedFault>(fault: T | undefined, path: string): T | undefined {
  if (fault === undefined || fault.times <= 0) return undefined;
  if (fault.path !== undefined && !fault.path.test(path)) return undefined;
  fault.times--;
  return fault;
}
