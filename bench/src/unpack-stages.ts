// One question: does one large layer use more than one core now that both SHA-256s run on the libuv
// pool beside inflate and extraction, and by how much is its unpack faster than the serial path?
//
// Builds (and caches under bench/.cache) single-layer images of BENCH_MIB MiB (default 512): one of
// incompressible bytes (model weights as stored), one of fp16-like values (gzip takes about a fifth
// off). Unpacks each layer in this process with unpackLayer, BENCH_RUNS times per path, the two
// paths alternating (serial first in odd runs): 'serial' hashes inline on the unpack thread (as
// before), 'stages' hashes on the pool. Each run reports wall time, process CPU and each stage's CPU
// on its own thread (the addon's thread clock): blob hash and tar hash (pool threads), the unpack
// thread (tar parsing, file writes, stream plumbing; inline hashing too for 'serial'), and the rest
// of the process (node:zlib's inflate on the pool, V8's GC threads). Inflate alone is measured apart
// (gunzip to nowhere, process CPU) so that the sum of the stages' CPU can be put beside the wall time.
import { execFileSync } from 'node:child_process';
import { createReadStream, mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import zlib from 'node:zlib';
import { unpackLayer, type InflaterChoice } from '@fastpull/core';
import { median } from './lib.js';
import { ensureImage, type ImageSpec, type LayerSpec } from './peers/images.js';
import { randomBlob } from './peers/content.js';

const MIB = 1024 * 1024;
const SIZE_MIB = Number(process.env.BENCH_MIB ?? 512);
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const INFLATER = (process.env.BENCH_INFLATER ?? 'zlib') as InflaterChoice;
const CACHE = resolve(process.env.BENCH_CACHE ?? join(import.meta.dirname, '..', '.cache'));
const log = (s: string) => process.stderr.write(`${s}\n`);

/**
 * fp16-like values: the low byte (mantissa) random, the high byte a random sign over exponents
 * drawn from a narrow range, as trained weights near zero have.
 */
function fp16Blob(size: number, seed: number): (write: (b: Buffer) => void) => void {
  return (write) => {
    randomBlob(size, seed)((r) => {
      const out = Buffer.allocUnsafe(r.length);
      for (let i = 0; i + 1 < r.length; i += 2) {
        out[i] = r[i]!;
        const e = r[i + 1]!;
        out[i + 1] = (e & 0x80) | (0x2c + ((e & 0x7f) % 12));
      }
      if (r.length % 2) out[r.length - 1] = r[r.length - 1]!;
      write(out);
    });
  };
}

function layer(kind: 'incompressible' | 'fp16', mib: number): LayerSpec {
  const shard = 64 * MIB;
  return {
    name: `${kind} ${mib} MiB`,
    params: { stages: kind, mib, shard },
    write: (w) => {
      for (let left = mib * MIB, n = 0; left > 0; n++, left -= shard) {
        const size = Math.min(shard, left);
        w.file(`models/${kind}-${String(n).padStart(4, '0')}.bin`, size, 0o644, kind === 'fp16' ? fp16Blob(size, 900 + n) : randomBlob(size, 700 + n));
      }
    },
  };
}

interface Run {
  wall: number;
  cpu: number;
  blobHash: number;
  tarHash: number;
  thread: number;
  rest: number;
}

const cpuSeconds = (u: NodeJS.CpuUsage) => (u.user + u.system) / 1e6;

async function unpackOnce(blobPath: string, mediaType: string, hashMode: 'inline' | 'pool'): Promise<Run> {
  const dest = mkdtempSync(join(tmpdir(), 'fastpull-stages-'));
  try {
    execFileSync('sync');
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    const r = await unpackLayer({ blobPath, mediaType, dest, hashMode, inflater: INFLATER });
    const wall = (performance.now() - t0) / 1000;
    const cpu = cpuSeconds(process.cpuUsage(c0));
    if (r.timings.hashMode !== hashMode) throw new Error(`asked to hash ${hashMode}, the unpack hashed ${r.timings.hashMode} (is the addon built?)`);
    const blobHash = (r.timings.blobHashCpuMs ?? NaN) / 1000;
    const tarHash = (r.timings.tarHashCpuMs ?? NaN) / 1000;
    const thread = (r.timings.threadCpuMs ?? NaN) / 1000;
    // Inline, the hashing is part of the unpack thread's CPU.
    const own = hashMode === 'inline' ? thread : thread + blobHash + tarHash;
    return { wall, cpu, blobHash, tarHash, thread, rest: cpu - own };
  } finally {
    rmSync(dest, { recursive: true, force: true });
  }
}

/** CPU and wall seconds of inflating the blob alone, to nowhere. */
async function inflateAlone(blobPath: string): Promise<{ wall: number; cpu: number }> {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await pipeline(createReadStream(blobPath, { highWaterMark: MIB }), zlib.createGunzip({ chunkSize: 256 * 1024 }), new Writable({ write: (_c, _e, cb) => cb() }));
  return { wall: (performance.now() - t0) / 1000, cpu: cpuSeconds(process.cpuUsage(c0)) };
}

const range = (xs: readonly number[], digits = 2) => `${median(xs).toFixed(digits)} (${Math.min(...xs).toFixed(digits)}-${Math.max(...xs).toFixed(digits)})`;

console.log(`# unpack stages: ${new Date().toISOString().slice(0, 10)}, ${availableParallelism()} cores, load ${loadavg()[0]!.toFixed(1)}, ${SIZE_MIB} MiB per layer, inflater ${INFLATER}, ${RUNS} runs per path, alternating\n`);
for (const kind of ['incompressible', 'fp16'] as const) {
  const spec: ImageSpec = { name: `stages-${kind}-${SIZE_MIB}`, compression: 'gzip', layers: [layer(kind, SIZE_MIB)] };
  const meta = ensureImage(CACHE, spec, log);
  const l = meta.layers[0]!;
  const blobPath = join(meta.dir, l.file);
  const runs = { inline: [] as Run[], pool: [] as Run[] };
  const inflate: { wall: number; cpu: number }[] = [];
  await unpackOnce(blobPath, l.mediaType, 'pool'); // warm: page cache, JIT, allocator
  for (let i = 0; i < RUNS; i++) {
    const order = i % 2 === 0 ? (['inline', 'pool'] as const) : (['pool', 'inline'] as const);
    for (const mode of order) {
      const r = await unpackOnce(blobPath, l.mediaType, mode);
      runs[mode].push(r);
      log(`${kind} ${mode === 'inline' ? 'serial' : 'stages'} run ${i + 1}: wall ${r.wall.toFixed(2)} s, cpu ${r.cpu.toFixed(2)} s`);
    }
    inflate.push(await inflateAlone(blobPath));
  }
  const inflateCpu = median(inflate.map((x) => x.cpu));
  console.log(`## ${kind}: ${(l.size / MIB).toFixed(0)} MiB compressed, ${(l.tarSize / MIB).toFixed(0)} MiB tar; inflate alone ${range(inflate.map((x) => x.cpu))} s CPU\n`);
  console.log('| path | wall s | process CPU s | blob hash CPU s | tar hash CPU s | unpack thread CPU s | rest CPU s (inflate, GC) | stages CPU sum s | wall / stages sum |');
  console.log('|---|---|---|---|---|---|---|---|---|');
  for (const mode of ['inline', 'pool'] as const) {
    const rs = runs[mode];
    // Inline, the unpack thread's CPU holds both hashes; on the pool they are apart.
    const sums = rs.map((r) => (mode === 'inline' ? r.thread : r.thread + r.blobHash + r.tarHash) + inflateCpu);
    console.log(
      `| ${mode === 'inline' ? 'serial (hash inline)' : 'stages (hash on pool)'} | ${range(rs.map((r) => r.wall))} | ${range(rs.map((r) => r.cpu))} | ${range(rs.map((r) => r.blobHash))} | ${range(rs.map((r) => r.tarHash))} | ${range(rs.map((r) => r.thread))} | ${range(rs.map((r) => r.rest))} | ${range(sums)} | ${range(rs.map((r, i) => r.wall / sums[i]!))} |`,
    );
  }
  const ratios = runs.inline.map((r, i) => r.wall / runs.pool[i]!.wall);
  console.log(`\nserial / stages wall, per pair: ${range(ratios)}x\n`);
}
