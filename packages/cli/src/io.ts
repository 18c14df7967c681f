// The streams and environment a command runs with, injected so tests can capture them.
import type { Writable } from 'node:stream';

export interface CliIO {
  readonly stdout: Writable & { isTTY?: boolean };
  readonly stderr: Writable & { isTTY?: boolean };
  readonly env: NodeJS.ProcessEnv;
}

export function writeLine(stream: Writable, line = ''): void {
  stream.write(`${line}\n`);
}

export function writeJSON(stream: Writable, value: unknown): void {
  stream.write(`${JSON.stringify(value, null, 2)}\n`);
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

export function shortDigest(d: string): string {
  const i = d.indexOf(':');
  return d.slice(i + 1, i + 13);
}
