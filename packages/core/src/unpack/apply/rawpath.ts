// Entry paths as raw bytes under a snapshot root: cleaning, display, and calls that never leave the root or lose a byte.
//
// A layer's names are bytes, held here one char per byte (latin1 strings), so names that are not
// UTF-8 stay apart. node:fs takes them as Buffers; the native addon takes UTF-8 strings only, so a
// name that is not UTF-8 is reached through a descriptor of its parent directory.
import { isUtf8 } from 'node:buffer';
import fs from 'node:fs';
import { FastpullError } from '../../errors.js';

const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW } = fs.constants;
// eslint-disable-next-line no-control-regex -- every ASCII byte, NUL and the other controls included
const ASCII = /^[\x00-\x7f]*$/;

/**
 * A tar path as a clean relative path: leading `/` and `./` stripped, `.` and empty components
 * dropped. '' is the root. A `..` component or a NUL is hostile. Names are taken as they come
 * (for a layer's entries: raw bytes, one char per byte).
 */
export function cleanEntryPath(name: string, what: string): string {
  if (isClean(name)) return name;
  if (name.includes('\0')) throw new FastpullError('HOSTILE_LAYER', `${what}: NUL in path ${JSON.stringify(name)}`);
  const parts: string[] = [];
  for (const part of name.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') throw new FastpullError('HOSTILE_LAYER', `${what}: path ${JSON.stringify(name)} has a ".." component`);
    parts.push(part);
  }
  return parts.join('/');
}

/**
 * Whether `name` is already what {@link cleanEntryPath} makes of it: no NUL, no empty, `.` or `..`
 * component (so no leading, trailing or doubled `/`). Most names of a layer's files are, and need no
 * split, array and join.
 */
function isClean(name: string): boolean {
  let start = 0;
  for (let i = 0; i <= name.length; i++) {
    const c = i === name.length ? 0x2f : name.charCodeAt(i);
    if (c === 0) return false;
    if (c !== 0x2f) continue;
    const len = i - start;
    if (len === 0) return false;
    if (name.charCodeAt(start) === 0x2e && (len === 1 || (len === 2 && name.charCodeAt(start + 1) === 0x2e))) return false;
    start = i + 1;
  }
  return true;
}

/** A raw name (latin1 chars) for people: decoded as UTF-8. */
export function display(raw: string): string {
  return ASCII.test(raw) ? raw : Buffer.from(raw, 'latin1').toString('utf8');
}

/** A raw path for node:fs: the string itself when ASCII (the common case), else its bytes. */
export function fsPath(raw: string): string | Buffer {
  return ASCII.test(raw) ? raw : Buffer.from(raw, 'latin1');
}

/** The last component of a clean relative path. */
export function baseOf(rel: string): string {
  return rel.slice(rel.lastIndexOf('/') + 1);
}

/** The errno name of a filesystem error (ENOENT, ...), if it has one. */
export function errnoOf(e: unknown): string | undefined {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/**
 * Clean relative paths (raw bytes) under one root directory. `taken` says whether a path is in use
 * (the layer's tree knows: only this apply writes below the root), so a temporary name never
 * replaces an entry.
 */
export class RawRoot {
  /** The root as raw bytes (latin1 chars), to join with raw entry paths. */
  private readonly raw: string;
  private tmpCounter = 0;

  constructor(
    root: string,
    private readonly taken: (rel: string) => boolean,
  ) {
    this.raw = Buffer.from(root, 'utf8').toString('latin1');
  }

  /** `rel` under the root, raw. */
  abs(rel: string): string {
    return rel === '' ? this.raw : `${this.raw}/${rel}`;
  }

  /** `rel` under the root, for node:fs. */
  fs(rel: string): string | Buffer {
    return fsPath(this.abs(rel));
  }

  /**
   * Runs a call of the native addon, which takes paths only as UTF-8 strings, on `rel`. A path
   * that is not UTF-8 is reached through a descriptor of its parent (/proc/self/fd/N/NAME) and,
   * when its own name is not UTF-8, under a temporary UTF-8 name that it is renamed from and back
   * to. `creates`: the call makes the entry (so there is nothing to rename first).
   */
  native<T>(rel: string, creates: boolean, call: (p: string) => T): T {
    const raw = this.abs(rel);
    if (ASCII.test(raw)) return call(raw);
    const bytes = Buffer.from(raw, 'latin1');
    if (isUtf8(bytes)) return call(bytes.toString('utf8'));
    const slash = raw.lastIndexOf('/');
    const dirFd = fs.openSync(Buffer.from(raw.slice(0, slash), 'latin1'), O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    try {
      const base = raw.slice(slash + 1);
      const baseBytes = Buffer.from(base, 'latin1');
      if (isUtf8(baseBytes)) return call(`/proc/self/fd/${dirFd}/${baseBytes.toString('utf8')}`);
      const relDir = rel.includes('/') ? rel.slice(0, rel.lastIndexOf('/') + 1) : '';
      let tmp: string;
      do tmp = `.fastpull-tmp-${process.pid}-${++this.tmpCounter}`;
      while (this.taken(relDir + tmp));
      const there = Buffer.from(`${raw.slice(0, slash)}/${tmp}`, 'latin1');
      if (!creates) fs.renameSync(bytes, there);
      let made = !creates;
      try {
        const result = call(`/proc/self/fd/${dirFd}/${tmp}`);
        made = true;
        return result;
      } finally {
        if (made) fs.renameSync(there, bytes);
      }
    } finally {
      fs.closeSync(dirFd);
    }
  }
}
