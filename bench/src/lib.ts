// Shared parts of the pull benchmarks: layer-like content, timing under /usr/bin/time, medians.
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join, resolve } from 'node:path';
import type { LayerEntry } from '@fastpull/core/testing';

export const repo = resolve(import.meta.dirname, '..', '..');
/** The CLI through its launcher, as the installed `fastpull` starts (it sizes libuv's pool). */
export const cli = join(repo, 'packages', 'cli', 'dist', 'launch.cjs');

/** About `total` bytes of library-like files under `dir`: a third random, a third text, a third sparse. */
export function libraryFiles(total: number, dir = 'usr/lib'): LayerEntry[] {
  const out: LayerEntry[] = [];
  const text = Buffer.from('static int resolve_symbol(const char *name, void **out) { return lookup(table, name, out); }\n'.repeat(4096));
  let size = 0;
  for (let i = 0; size < total; i++) {
    const len = 4096 + ((i * 7919) % (1024 * 1024));
    let content: Buffer;
    if (i % 3 === 0) content = randomBytes(len);
    else if (i % 3 === 1) content = Buffer.concat(Array.from({ length: Math.ceil(len / text.length) }, () => text)).subarray(0, len);
    else {
      content = Buffer.alloc(len);
      for (let j = 0; j < len; j += 512) content[j] = j & 0xff;
    }
    out.push({ type: 'file', path: `${dir}/pkg${i % 37}/lib${i}.so`, content, mode: 0o755 });
    size += len;
  }
  return out;
}

export interface Timed {
  readonly wall: number;
  readonly rssMiB: number;
}

/** Runs a command (no shell unless the command is one) under /usr/bin/time: wall seconds and peak RSS. */
export function timed(cmd: string, args: string[], env: NodeJS.ProcessEnv = process.env): Timed {
  const r = spawnSync('/usr/bin/time', ['-f', '%e %M', cmd, ...args], { encoding: 'utf8', env, maxBuffer: 1 << 26 });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed: ${r.stderr}`);
  const [wall, kib] = r.stderr.trim().split('\n').at(-1)!.split(' ').map(Number);
  return { wall: wall!, rssMiB: kib! / 1024 };
}

/** A number from the environment; `dflt` when it is unset or empty. */
export function envNumber(name: string, dflt: number, env: NodeJS.ProcessEnv = process.env): number {
  const v = env[name];
  return v !== undefined && v !== '' ? Number(v) : dflt;
}

/** A comma-separated list from the environment (`dflt` when unset), trimmed, empty items dropped. */
export function envList(name: string, dflt: string, env: NodeJS.ProcessEnv = process.env): string[] {
  return (env[name] ?? dflt)
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

/** The median, the mean of the middle two for an even count; NaN for none. */
export function medianOf(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}

/** Two decimals, or '-' for what is not a finite number. */
export const f2 = (x: number): string => (Number.isFinite(x) ? x.toFixed(2) : '-');
/** No decimals, or '-' for what is not a finite number. */
export const f0 = (x: number): string => (Number.isFinite(x) ? x.toFixed(0) : '-');

/** The upper middle value (the middle one for an odd count). */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

/** Collects runs per contender and prints the markdown table, ratios against `base`. */
export class Results {
  private readonly rows = new Map<string, { wall: number[]; rss: number[] }>();

  record(name: string, r: Timed): void {
    const row = this.rows.get(name) ?? { wall: [], rss: [] };
    row.wall.push(r.wall);
    row.rss.push(r.rssMiB);
    this.rows.set(name, row);
  }

  print(base: string): void {
    const b = median(this.rows.get(base)?.wall ?? [NaN]);
    console.log(`\n| contender | median s | min-max s | vs ${base.replaceAll('|', '\\|')} | peak RSS MiB |\n|---|---|---|---|---|`);
    for (const [name, r] of this.rows) {
      const m = median(r.wall);
      console.log(
        `| ${name.replaceAll('|', '\\|')} | ${m.toFixed(2)} | ${Math.min(...r.wall).toFixed(2)}-${Math.max(...r.wall).toFixed(2)} | ${(m / b).toFixed(2)}x | ${Math.max(...r.rss).toFixed(0)} |`,
      );
    }
  }
}
