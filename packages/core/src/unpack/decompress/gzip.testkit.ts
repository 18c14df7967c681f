// Test inputs for the gzip decoders' tests: layer-shaped bytes and the chunkings fed to a stream.

/** Deterministic bytes shaped like a layer: runs of random bytes, text and zeros. */
export function layerLike(size: number, seed: number): Buffer {
  const out = Buffer.alloc(size);
  let x = seed >>> 0 || 1;
  const next = (): number => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>>= 0);
  };
  const words = ['usr', 'lib', 'python3', 'site-packages', 'import', 'return', 'def', 'self', '\n', '    ', 'the', 'of'];
  let at = 0;
  while (at < size) {
    const run = Math.min(size - at, 1 + (next() % 65536));
    const kind = next() % 3;
    if (kind === 0) for (let i = 0; i < run; i++) out[at + i] = next() & 0xff;
    else if (kind === 1) {
      let i = 0;
      while (i < run) i += out.write(`${words[next() % words.length]} `, at + i, run - i, 'latin1');
    } // else zeros, as allocated
    at += run;
  }
  return out;
}

/** `data` cut into pieces of `size` bytes (the last one shorter), as a stream would be fed. */
export function chunks(data: Buffer, size: number): Buffer[] {
  const out: Buffer[] = [];
  for (let at = 0; at < data.length; at += size) out.push(data.subarray(at, at + size));
  return out;
}
