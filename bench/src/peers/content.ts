// Realistic file content for generated layers, deterministic for a given machine: real shared
// libraries and text files copied from this machine (each copy slightly varied), incompressible blobs
// (AES-CTR keystream, like model weights) and low-entropy blobs (mostly zero bytes, like padded
// tensors or sparse data files).
import { createCipheriv, createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { Prng } from '@fastpull/core/testing';

const CHUNK = 1024 * 1024;

export interface SourceFile {
  readonly path: string;
  readonly size: number;
}

function walk(dir: string, keep: (name: string, size: number) => boolean, out: SourceFile[], depth: number, limit: number): void {
  if (depth < 0 || out.length >= limit) return;
  let names: string[];
  try {
    names = readdirSync(dir).sort();
  } catch {
    return;
  }
  for (const name of names) {
    if (out.length >= limit) return;
    const p = join(dir, name);
    let st;
    try {
      st = statSync(p, { throwIfNoEntry: false });
    } catch {
      continue;
    }
    if (st === undefined) continue;
    if (st.isDirectory()) walk(p, keep, out, depth - 1, limit);
    else if (st.isFile() && keep(name, st.size)) {
      // A symlink to a file already listed would repeat it; statSync follows links, so dedupe by path only.
      out.push({ path: p, size: st.size });
    }
  }
}

/** Machine files the generated content copies: shared libraries and binaries, and text. */
export interface Sources {
  readonly libs: readonly SourceFile[];
  readonly texts: readonly SourceFile[];
  /** A hash of the lists (paths and sizes): part of the image cache key. */
  readonly fingerprint: string;
}

let cached: Sources | undefined;

export function machineSources(): Sources {
  if (cached) return cached;
  const libs: SourceFile[] = [];
  for (const dir of ['/usr/lib/x86_64-linux-gnu', '/usr/lib/aarch64-linux-gnu', '/usr/lib', '/usr/bin']) {
    walk(
      dir,
      (name, size) => size >= 64 * 1024 && size <= 64 * 1024 * 1024 && (/\.so(\.|$)/.test(name) || dir === '/usr/bin'),
      libs,
      dir === '/usr/lib' ? 2 : 1,
      400,
    );
  }
  const texts: SourceFile[] = [];
  for (const dir of ['/usr/lib/python3', '/usr/lib/python3.11', '/usr/lib/python3.12', '/usr/share/perl', '/usr/share/doc']) {
    walk(
      dir,
      (name, size) => size >= 256 && size <= 512 * 1024 && /\.(py|pm|txt|md|rst|html|h|c|json|cfg|pl)$|^(copyright|README|changelog)$/.test(name),
      texts,
      6,
      6000,
    );
  }
  const seen = new Set<string>();
  const dedupe = (xs: SourceFile[]) => xs.filter((x) => (seen.has(x.path) ? false : (seen.add(x.path), true)));
  const l = dedupe(libs);
  const t = dedupe(texts);
  if (l.length === 0 || t.length === 0) throw new Error('bench: found no shared libraries or text files on this machine to build realistic layers from');
  const fingerprint = createHash('sha256')
    .update(JSON.stringify([l, t]))
    .digest('hex')
    .slice(0, 16);
  cached = { libs: l, texts: t, fingerprint };
  return cached;
}

const fileCache = new Map<string, Buffer>();
function readSource(path: string): Buffer {
  let b = fileCache.get(path);
  if (!b) {
    b = readFileSync(path);
    if (fileCache.size > 64) fileCache.clear();
    fileCache.set(path, b);
  }
  return b;
}

export type Fill = (write: (b: Buffer) => void) => void;

/** A copy of a machine file with 16 bytes changed per 64 KiB, so copies differ. */
export function variedCopy(source: SourceFile, seed: number): { size: number; fill: Fill } {
  return {
    size: source.size,
    fill: (write) => {
      const b = Buffer.from(readSource(source.path));
      const rng = new Prng(seed);
      for (let off = 0; off < b.byteLength; off += 64 * 1024) {
        const at = off + rng.int(0, Math.max(0, Math.min(64 * 1024, b.byteLength - off) - 16));
        rng.bytes(Math.min(16, b.byteLength - at)).copy(b, at);
      }
      for (let off = 0; off < b.byteLength; off += CHUNK) write(b.subarray(off, off + CHUNK));
    },
  };
}

/** An exact copy of a (small) machine file. */
export function exactCopy(source: SourceFile): { size: number; fill: Fill } {
  return { size: source.size, fill: (write) => write(readSource(source.path)) };
}

function keystream(seed: number): (n: number) => Buffer {
  const key = createHash('sha256').update(`fastpull-bench-${seed}`).digest();
  const cipher = createCipheriv('aes-256-ctr', key, Buffer.alloc(16));
  const zeros = Buffer.alloc(CHUNK);
  return (n) => cipher.update(zeros.subarray(0, n));
}

/** `size` incompressible bytes. */
export function randomBlob(size: number, seed: number): Fill {
  return (write) => {
    const next = keystream(seed);
    for (let left = size; left > 0; left -= CHUNK) write(next(Math.min(CHUNK, left)));
  };
}

/** Abramowitz and Stegun 7.1.26: erf to 1.5e-7, enough to weigh exponents. */
function erf(x: number): number {
  const t = 1 / (1 + 0.3275911 * Math.abs(x));
  const y = 1 - ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * Math.exp(-x * x);
  return x >= 0 ? y : -y;
}

/**
 * For fp16 weights drawn from N(0, sigma): the exponent field of each of 65536 equally likely
 * 16-bit draws, so that a uniform draw picks an exponent as often as the normal puts |x| in
 * [2^e, 2^(e+1)). Subnormals and zero share field 0.
 */
function fp16Exponents(sigma: number): Uint8Array {
  const table = new Uint8Array(65536);
  const cdf = (v: number) => erf(v / (sigma * Math.SQRT2)); // P(|x| < v)
  let filled = 0;
  for (let field = 30; field >= 1 && filled < table.length; field--) {
    const lo = 2 ** (field - 15);
    const share = Math.round((cdf(lo * 2) - cdf(lo)) * table.length);
    table.fill(field, filled, Math.min(table.length, filled + share));
    filled += share;
  }
  return table; // what is left (|x| below 2^-14) stays 0: subnormal
}

/**
 * `size` bytes of fp16 tensors like a model's weights: values of N(0, 0.02), sign and mantissa
 * random, exponents as the normal makes them. gzip -6 shrinks them to about 92% (the exponent
 * bits are predictable, the mantissas are not), where random bytes do not shrink at all.
 */
export function fp16Blob(size: number, seed: number): Fill {
  const exponents = fp16Exponents(0.02);
  return (write) => {
    const next = keystream(seed);
    for (let left = size; left > 0; left -= CHUNK) {
      const n = Math.min(CHUNK, left);
      const r = Buffer.concat([next(n), next(n)]); // 4 random bytes per 2-byte value
      const out = Buffer.alloc(n);
      for (let i = 0, j = 0; i + 1 < n; i += 2, j += 4) {
        const draw = r[j]! | (r[j + 1]! << 8);
        const value = ((r[j + 2]! & 0x80) << 8) | (exponents[draw]! << 10) | (((r[j + 2]! & 0x03) << 8) | r[j + 3]!);
        out[i] = value & 0xff;
        out[i + 1] = value >> 8;
      }
      write(out);
    }
  };
}

/** `size` low-entropy bytes: one random byte in four, the rest zero (compresses about 3x with gzip). */
export function lowEntropyBlob(size: number, seed: number): Fill {
  return (write) => {
    const next = keystream(seed);
    for (let left = size; left > 0; left -= CHUNK) {
      const n = Math.min(CHUNK, left);
      const r = next(n);
      const out = Buffer.alloc(n);
      for (let i = 3; i < n; i += 4) out[i] = r[i]!;
      write(out);
    }
  };
}

/** Source-code-like text of `size` bytes, built from words (for many-small-files layers). */
export function wordsText(size: number, seed: number): Fill {
  return (write) => {
    const rng = new Prng(seed);
    write(Buffer.from(rng.text(size).padEnd(size, '\n').slice(0, size), 'utf8'));
  };
}
