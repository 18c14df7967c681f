// Entry times to the nanosecond, as utimensat(2) takes them, read from PAX text rather than the reader's doubles.
import { nativeFs } from '../../native/addon.js';
import type { RawRoot } from './rawpath.js';
import type { ParsedTarEntry } from '../tar/tarreader.js';

/** A time as utimensat(2) takes it: whole seconds since the epoch (negative before 1970) and 0-999999999 nanoseconds. */
export interface Timespec {
  sec: number;
  nsec: number;
}

/** The times an entry gives what it makes. */
export interface Times {
  atime: Timespec;
  mtime: Timespec;
}

/** Times past this (about year 5138) are no real file's and overflow some time_t conversions. */
export const MAX_ABS_TIME = 1e11;

/**
 * The entry's times to the nanosecond: a PAX record read again from its text (the reader's
 * number, a double, keeps microseconds at best), else the header's whole seconds. atime is the
 * later of atime and mtime, as containerd does. A time beyond {@link MAX_ABS_TIME} goes to
 * `outOfRange`, which throws.
 */
export function entryTimes(e: Pick<ParsedTarEntry, 'mtime' | 'atime' | 'pax'>, outOfRange: (time: number) => never): Times {
  const mtime = exactTime(e.mtime, e.pax.get('mtime'), outOfRange);
  const atime = e.atime === undefined ? undefined : exactTime(e.atime, e.pax.get('atime'), outOfRange);
  return { atime: atime !== undefined && isLater(atime, mtime) ? atime : mtime, mtime };
}

/** `approx` (the reader's seconds) exactly, from `paxText` when there is one. */
function exactTime(approx: number, paxText: Buffer | undefined, outOfRange: (time: number) => never): Timespec {
  if (!(Math.abs(approx) <= MAX_ABS_TIME)) outOfRange(approx);
  const exact = paxText === undefined ? undefined : parsePaxTime(paxText.toString('latin1'));
  if (exact !== undefined) return exact;
  // Header fields hold whole seconds; a fraction could only come from a record read above.
  const sec = Math.floor(approx);
  const nsec = Math.min(Math.round((approx - sec) * 1e9), 999_999_999);
  return { sec, nsec };
}

/**
 * A PAX time (`-?DIGITS[.DIGITS]`, as the reader checked) as exact seconds and nanoseconds. As Go's
 * archive/tar: digits past the ninth are cut, and the sign applies to the fraction too, so
 * `-1.25` is 1.25 s before the epoch: second -2, nanosecond 750000000. undefined for other text.
 */
export function parsePaxTime(text: string): Timespec | undefined {
  const m = /^(-?)([0-9]+)(?:\.([0-9]*))?$/.exec(text);
  if (m === null) return undefined;
  const whole = Number(m[2]);
  const nsec = Number(((m[3] ?? '') + '000000000').slice(0, 9));
  if (m[1] !== '-') return { sec: whole, nsec };
  return nsec === 0 ? { sec: whole === 0 ? 0 : -whole, nsec: 0 } : { sec: -whole - 1, nsec: 1_000_000_000 - nsec };
}

function isLater(a: Timespec, b: Timespec): boolean {
  return a.sec > b.sec || (a.sec === b.sec && a.nsec > b.nsec);
}

/** Sets the times of what `fd` is open on, to the nanosecond. */
export function setTimesFd(fd: number, t: Times): void {
  nativeFs().futimesNs(fd, t.atime.sec, t.atime.nsec, t.mtime.sec, t.mtime.nsec);
}

/** Sets the times of `rel` itself (a symlink's own, never its target's), to the nanosecond. */
export function setTimesAt(paths: RawRoot, rel: string, t: Times): void {
  paths.native(rel, false, (p) => nativeFs().lutimesNs(p, t.atime.sec, t.atime.nsec, t.mtime.sec, t.mtime.nsec));
}
