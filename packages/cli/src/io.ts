// The streams and environment a command runs with, injected so tests can capture them; and the
// formatting every command shares (sizes, durations, tables, JSON).
import type { Writable } from 'node:stream';
import { UsageError } from './errors.js';

export interface CliIO {
  readonly stdout: Writable & { isTTY?: boolean; columns?: number };
  readonly stderr: Writable & { isTTY?: boolean; columns?: number };
  readonly env: NodeJS.ProcessEnv;
}

export function writeLine(stream: Writable, line = ''): void {
  stream.write(`${line}\n`);
}

/** Pretty JSON, for a document read whole (`images --json`, `inspect`). */
export function writeJSON(stream: Writable, value: unknown): void {
  stream.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** One JSON value on one line, for a stream of events (`pull --json`). */
export function writeJSONLine(stream: Writable, value: unknown): void {
  stream.write(`${JSON.stringify(value)}\n`);
}

/** Colour only on a terminal, and never when NO_COLOR is set to anything but "" (no-color.org). */
export function colorEnabled(io: CliIO, stream: { isTTY?: boolean }): boolean {
  return stream.isTTY === true && !io.env.NO_COLOR;
}

/** 1536 -> "1.5 KiB". */
export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${v} B` : `${v.toFixed(v >= 100 ? 0 : 1)} ${units[u]}`;
}

/** 12 -> "12ms", 1234 -> "1.23s", 75_000 -> "1m15s". */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(2)}s`;
  const s = Math.round(ms / 1000);
  return s < 3600 ? `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s` : `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

/** How long ago `then` was, as `docker images` says it: "5 seconds ago", "3 days ago". */
export function formatAge(then: Date, now: Date): string {
  const s = Math.max(0, Math.floor((now.getTime() - then.getTime()) / 1000));
  const steps: [number, string][] = [
    [365 * 86400, 'year'],
    [30 * 86400, 'month'],
    [7 * 86400, 'week'],
    [86400, 'day'],
    [3600, 'hour'],
    [60, 'minute'],
  ];
  for (const [unit, name] of steps) {
    const n = Math.floor(s / unit);
    if (n >= 1) return `${n} ${name}${n === 1 ? '' : 's'} ago`;
  }
  return s < 1 ? 'just now' : `${s} second${s === 1 ? '' : 's'} ago`;
}

export function shortDigest(d: string): string {
  const i = d.indexOf(':');
  return d.slice(i + 1, i + 13);
}

const SIZE_UNITS: Readonly<Record<string, number>> = {
  '': 1,
  b: 1,
  k: 1024,
  kib: 1024,
  m: 1024 ** 2,
  mib: 1024 ** 2,
  g: 1024 ** 3,
  gib: 1024 ** 3,
  kb: 1000,
  mb: 1000 ** 2,
  gb: 1000 ** 3,
};

/**
 * A byte count as people write it: "1048576", "8M", "16MiB", "512k", "1.5GiB". K, M, G and the
 * -iB forms are powers of 1024 (as `docker run --memory` reads them); kB, MB, GB are powers of 1000.
 * Throws a usage error naming `what` on anything else.
 */
export function parseSize(value: string, what: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(value);
  const unit = m ? SIZE_UNITS[m[2]!.toLowerCase()] : undefined;
  const n = m && unit !== undefined ? Number(m[1]) * unit : NaN;
  if (!Number.isSafeInteger(n) || n < 1) {
    throw new UsageError(`${what} ${JSON.stringify(value)}: want a whole number of bytes, e.g. 1048576, 8M or 16MiB`);
  }
  return n;
}

/** A positive integer flag value, or a usage error naming `what`. */
export function parsePositiveInt(value: string, what: string): number {
  const n = /^\s*\d+\s*$/.test(value) ? Number(value) : NaN;
  if (!Number.isSafeInteger(n) || n < 1) throw new UsageError(`${what} ${JSON.stringify(value)}: want a positive integer`);
  return n;
}

/** Rows as columns two spaces apart; the last column is not padded. */
export function formatTable(rows: readonly (readonly string[])[]): string[] {
  const widths: number[] = [];
  for (const r of rows) r.forEach((cell, c) => (widths[c] = Math.max(widths[c] ?? 0, cell.length)));
  return rows.map((r) => r.map((cell, c) => (c === r.length - 1 ? cell : cell.padEnd(widths[c]!))).join('  '));
}
