// A small seeded pseudo-random generator, so generated test images are the same bytes on every run.

const WORDS = [
  'alpha',
  'bravo',
  'cache',
  'delta',
  'echo',
  'fetch',
  'gamma',
  'hash',
  'index',
  'join',
  'kernel',
  'layer',
  'mount',
  'node',
  'overlay',
  'pull',
  'query',
  'range',
  'stream',
  'tar',
  'upper',
  'verify',
  'write',
  'zlib',
  'the',
  'a',
  'of',
  'to',
  'and',
  'in',
  'is',
  'for',
  'with',
  'on',
  'from',
  'by',
  'when',
  'each',
  'not',
  'config',
  'service',
  'daemon',
  'socket',
  'buffer',
  'digest',
  'manifest',
  'registry',
  'image',
  'chunk',
] as const;

/**
 * A deterministic generator (mulberry32): the same seed always yields the same sequence.
 * Not for anything that needs real randomness.
 *
 * @example
 * const rng = new Prng(42);
 * rng.int(1, 6); // the same die roll on every run
 */
export class Prng {
  private state: number;

  /** `seed` is any number; only its low 32 bits matter. */
  constructor(seed: number) {
    if (!Number.isFinite(seed)) throw new TypeError(`Prng seed must be a finite number, got ${seed}`);
    this.state = Math.trunc(seed) >>> 0;
  }

  /** The next value, an unsigned 32-bit integer. */
  nextUint32(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  }

  /** A float in [0, 1). */
  float(): number {
    return this.nextUint32() / 0x1_0000_0000;
  }

  /** An integer in [min, max], both ends included. */
  int(min: number, max: number): number {
    if (!Number.isSafeInteger(min) || !Number.isSafeInteger(max) || max < min) {
      throw new RangeError(`Prng.int: want integers min <= max, got ${min}, ${max}`);
    }
    return min + Math.floor(this.float() * (max - min + 1));
  }

  /** True with probability `p`. */
  chance(p: number): boolean {
    return this.float() < p;
  }

  /** One item of a non-empty list. */
  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new RangeError('Prng.pick: empty list');
    return items[this.int(0, items.length - 1)] as T;
  }

  /** The list in a shuffled order (a new array). */
  shuffle<T>(items: readonly T[]): T[] {
    const out = [...items];
    for (let i = out.length - 1; i > 0; i--) {
      const j = this.int(0, i);
      [out[i], out[j]] = [out[j] as T, out[i] as T];
    }
    return out;
  }

  /** `n` uniformly random bytes (incompressible). */
  bytes(n: number): Buffer {
    if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`Prng.bytes: want a length >= 0, got ${n}`);
    const out = Buffer.allocUnsafe(n);
    let i = 0;
    for (; i + 4 <= n; i += 4) out.writeUInt32LE(this.nextUint32(), i);
    if (i < n) {
      const last = this.nextUint32();
      for (let k = 0; i < n; i++, k++) out[i] = (last >>> (8 * k)) & 0xff;
    }
    return out;
  }

  /**
   * `n` bytes that look like a compiled binary: runs of zeros, repeated short patterns and random
   * stretches, so gzip has real work to do and the ratio is neither 1 nor tiny.
   */
  binary(n: number): Buffer {
    if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`Prng.binary: want a length >= 0, got ${n}`);
    const out = Buffer.alloc(n);
    let i = 0;
    while (i < n) {
      const run = Math.min(n - i, this.int(16, 4096));
      const kind = this.int(0, 3);
      if (kind === 0) {
        // zeros: already there
      } else if (kind === 1) {
        const pattern = this.bytes(this.int(2, 16));
        for (let k = 0; k < run; k++) out[i + k] = pattern[k % pattern.length] as number;
      } else {
        this.bytes(run).copy(out, i);
      }
      i += run;
    }
    return out;
  }

  /** A lowercase identifier-like word. */
  word(): string {
    return this.pick(WORDS);
  }

  /** Text of about `n` bytes (exactly `n`, ASCII): words, punctuation and lines, like a config or doc file. */
  text(n: number): string {
    if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`Prng.text: want a length >= 0, got ${n}`);
    const parts: string[] = [];
    let length = 0;
    let lineLength = 0;
    while (length < n) {
      let w: string = this.word();
      if (lineLength === 0) w = w.charAt(0).toUpperCase() + w.slice(1);
      const end = lineLength > 60 || this.chance(0.08) ? (this.chance(0.5) ? '.\n' : '\n') : ' ';
      const piece = w + end;
      parts.push(piece);
      length += piece.length;
      lineLength = end === ' ' ? lineLength + piece.length : 0;
    }
    return parts.join('').slice(0, n);
  }
}
