// One question: which node:zlib gunzip chunkSize inflates a layer fastest? (The unpacker uses 64 KiB.)
// Generates ~128 MiB of layer-like content (text, zeros, random bytes), gzips it once, then inflates it
// with each chunk size, three runs each, and prints the median throughput.
import { randomBytes } from 'node:crypto';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip, gzipSync } from 'node:zlib';

const SIZE = Number(process.env.BENCH_MIB ?? 128) * 1024 * 1024;
const RUNS = 3;

function layerLike(size: number): Buffer {
  const parts: Buffer[] = [];
  let total = 0;
  const text = Buffer.from('int main(void) { return run(config, "/usr/lib/x86_64-linux-gnu/libexample.so.1"); }\n'.repeat(400));
  for (let i = 0; total < size; i++) {
    const kind = i % 3;
    const chunk = kind === 0 ? text : kind === 1 ? Buffer.alloc(64 * 1024) : randomBytes(64 * 1024);
    parts.push(chunk);
    total += chunk.length;
  }
  return Buffer.concat(parts).subarray(0, size);
}

async function inflate(gz: Buffer, chunkSize: number): Promise<number> {
  let out = 0;
  const t = performance.now();
  await pipeline(
    Readable.from([gz.subarray(0, gz.length >> 1), gz.subarray(gz.length >> 1)]),
    createGunzip({ chunkSize }),
    new Writable({
      write(chunk: Buffer, _enc, cb) {
        out += chunk.length;
        cb();
      },
    }),
  );
  if (out !== SIZE) throw new Error(`inflated ${out} bytes, want ${SIZE}`);
  return performance.now() - t;
}

const gz = gzipSync(layerLike(SIZE), { level: 6 });
console.log(`| chunkSize | median ms | MB/s out | (${SIZE / 2 ** 20} MiB, ${(gz.length / 2 ** 20).toFixed(1)} MiB gzipped, ${RUNS} runs) |`);
console.log('|---|---|---|---|');
for (const kib of [16, 64, 256, 1024]) {
  const times: number[] = [];
  for (let i = 0; i < RUNS; i++) times.push(await inflate(gz, kib * 1024));
  times.sort((a, b) => a - b);
  const median = times[Math.floor(RUNS / 2)]!;
  console.log(`| ${kib} KiB | ${median.toFixed(0)} | ${(SIZE / 1e6 / (median / 1000)).toFixed(0)} | |`);
}
