// The streams and environment a command runs with, injected so tests can capture them; and the
// formatting every command shares (sizes, durations, tables, JSON).
import type { Writable } from 'node:stream';
import { isFastpullError, parsePositiveInt as parsePositiveIntSetting, parseSize as parseSizeSetting } from '@fastpull/core';
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
  return s < 3600
    ? `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`
    : `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
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

/**
 * A byte count as people write it ("1048576", "8M", "16MiB", "512k", "1.5GiB"), read as every front
 * end reads sizes (core's parseSize); anything else is a usage error naming `what`.
 */
export function parseSize(value: string, what: string): number {
  return asUsageError(() => parseSizeSetting(value, what));
}

/** A positive integer flag value, or a usage error naming `what`. */
export function parsePositiveInt(value: string, what: string): number {
  return asUsageError(() => parsePositiveIntSetting(value, what));
}

/** A setting's INVALID_ARGUMENT as a usage error (exit 2): a bad flag value is bad usage. */
export function asUsageError<T>(fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    if (isFastpullError(e) && e.code === 'INVALID_ARGUMENT' && !(e instanceof UsageError)) throw new UsageError(e.message);
    throw e;
  }
}

/** Rows as columns two spaces apart; the last column is not padded. */
export function formatTable(rows: readonly (readonly string[])[]): string[] {
  const widths: number[] = [];
  for (const r of rows) r.forEach((cell, c) => (widths[c] = Math.max(widths[c] ?? 0, cell.length)));
  return rows.map((r) => r.map((cell, c) => (c === r.length - 1 ? cell : cell.padEnd(widths[c]!))).join('  '));
}
