// One question: does one large layer use more than one core, with both SHA-256s on the libuv pool,
// inflate on its decoder's own thread and extraction on the unpack thread, and by how much is its
// unpack faster than the serial path (both hashes inline on the unpack thread)?
//
// Builds (and caches under bench/.cache) single-layer images of BENCH_MIB MiB (default 512): one of
// incompressible bytes (model weights as stored), one of fp16-like values (gzip takes about a tenth
// off). Unpacks each layer in this process with unpackLayer and the inflater BENCH_INFLATER resolves
// to (default auto: in-process ISA-L where its addon is built), BENCH_RUNS times per path, the two
// paths alternating (serial first in odd runs). Each run reports wall time, process CPU and each
// stage's CPU on its own thread's clock, as UnpackTimings gives it: blob hash and tar hash (pool
// threads), inflate (ISA-L's decode thread, the parallel decoder's jobs), the unpack thread (tar
// parsing, file writes, stream plumbing; inline hashing too for 'serial', where the hash columns are
// the time of those calls and part of it); their sum, and sum / wall: above 1, the stages ran at once.
// "rest" is process CPU less the stages (V8's GC threads, the blob's reads on libuv's pool);
// process CPU / wall is how many cores the process got, the ceiling of sum / wall. A decoder without a clock (node:zlib, igzip, pigz) is measured alone instead (gunzip
// to nowhere, process CPU), and that figure stands in for its inflate, marked so.
import { execFileSync } from 'node:child_process';
import { createReadStream, mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import zlib from 'node:zlib';
import type { InflaterChoice } from '@fastpull/core';
import { resolveGunzip, unpackLayer } from '@fastpull/core/unpack';
import { median } from './lib.js';
import { ensureImage, type ImageSpec, type LayerSpec } from './peers/images.js';
import { randomBlob } from './peers/content.js';

const MIB = 1024 * 1024;
const SIZE_MIB = Number(process.env.BENCH_MIB ?? 512);
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const INFLATER = (process.env.BENCH_INFLATER ?? 'auto') as InflaterChoice;
const DECODER = resolveGunzip(INFLATER).kind;
const CACHE = resolve(process.env.BENCH_CACHE ?? join(import.meta.dirname, '..', '.cache'));
const log = (s: string) => process.stderr.write(`${s}\n`);

/**
 * fp16-like values: the low byte (mantissa) random, the high byte a random sign over exponents
 * drawn from a narrow range, as trained weights near zero have.
 */
function fp16Blob(size: number, seed: number): (write: (b: Buffer) => void) => void {
  return (write) => {
    randomBlob(
      size,
      seed,
    )((r) => {
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
  inflate: number;
  /** Whether `inflate` is the decoder's own clock in this run, not the measurement alone. */
  inflateClocked: boolean;
  tarHash: number;
  thread: number;
  /** The writer threads that made the small files (0: none went to them; NaN: no writer threads). */
  writers: number;
  /** The stages' CPU: hashes (apart only on the pool), inflate, unpack thread, writer threads. */
  sum: number;
  rest: number;
}

const cpuSeconds = (u: NodeJS.CpuUsage) => (u.user + u.system) / 1e6;

async function unpackOnce(blobPath: string, mediaType: string, hashMode: 'inline' | 'pool', inflateAlone: () => number): Promise<Run> {
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
    const writers = (r.timings.writerCpuMs ?? 0) / 1000;
    const clocked = r.timings.inflateCpuMs !== undefined;
    const inflate = clocked ? r.timings.inflateCpuMs! / 1000 : inflateAlone();
    // Inline, the hashing is part of the unpack thread's CPU.
    const sum = (hashMode === 'inline' ? thread : thread + blobHash + tarHash) + inflate + writers;
    // Only clocked stages ran in this process's CPU: an inflate measured alone is not in it.
    const rest = cpu - sum + (clocked ? 0 : inflate);
    return { wall, cpu, blobHash, inflate, inflateClocked: clocked, tarHash, thread, writers: r.timings.writerCpuMs === undefined ? NaN : writers, sum, rest };
  } finally {
    rmSync(dest, { recursive: true, force: true });
  }
}

/** CPU seconds of inflating the blob alone with node:zlib, to nowhere. */
async function zlibAlone(blobPath: string): Promise<number> {
  const c0 = process.cpuUsage();
  await pipeline(
    createReadStream(blobPath, { highWaterMark: MIB }),
    zlib.createGunzip({ chunkSize: 256 * 1024 }),
    new Writable({ write: (_c, _e, cb) => cb() }),
  );
  return cpuSeconds(process.cpuUsage(c0));
}

const range = (xs: readonly number[], digits = 2) => `${median(xs).toFixed(digits)} (${Math.min(...xs).toFixed(digits)}-${Math.max(...xs).toFixed(digits)})`;
const load = () =>
  loadavg()
    .map((x) => x.toFixed(1))
    .join(' ');
const PATHS = { inline: 'serial', pool: 'stages' } as const;

console.log(
  `# unpack stages: ${new Date().toISOString().slice(0, 10)}, ${availableParallelism()} cores, load ${load()} at the start, ${SIZE_MIB} MiB per layer, inflater ${INFLATER} (${DECODER}), ${RUNS} runs per path, alternating\n`,
);
for (const kind of ['incompressible', 'fp16'] as const) {
  const spec: ImageSpec = { name: `stages-${kind}-${SIZE_MIB}`, compression: 'gzip', layers: [layer(kind, SIZE_MIB)] };
  const meta = ensureImage(CACHE, spec, log);
  const l = meta.layers[0]!;
  const blobPath = join(meta.dir, l.file);
  const runs = { inline: [] as Run[], pool: [] as Run[] };
  // Only for a decoder without a clock: node:zlib alone stands in for it (an external program's own cost differs).
  let alone: number | undefined;
  const inflateAlone = () => alone ?? NaN;
  const first = await unpackOnce(blobPath, l.mediaType, 'pool', inflateAlone); // warm: page cache, JIT, allocator
  if (!first.inflateClocked) alone = await zlibAlone(blobPath);
  for (let i = 0; i < RUNS; i++) {
    const order = i % 2 === 0 ? (['inline', 'pool'] as const) : (['pool', 'inline'] as const);
    for (const mode of order) {
      const r = await unpackOnce(blobPath, l.mediaType, mode, inflateAlone);
      runs[mode].push(r);
      log(
        `${kind} ${PATHS[mode]} run ${i + 1}: wall ${r.wall.toFixed(2)} s, stages CPU ${r.sum.toFixed(2)} s, sum / wall ${(r.sum / r.wall).toFixed(2)}, load ${load()}`,
      );
    }
  }
  const mark = first.inflateClocked ? '' : ' (node:zlib alone, measured apart)';
  console.log(`## ${kind}: ${(l.size / MIB).toFixed(0)} MiB compressed, ${(l.tarSize / MIB).toFixed(0)} MiB tar\n`);
  console.log(
    `| path | run | wall s | blob hash CPU s | inflate CPU s${mark} | tar hash CPU s | unpack thread CPU s | writer threads CPU s | stages sum s | sum / wall | process CPU s | rest s |`,
  );
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|');
  const f = (x: number) => x.toFixed(2);
  for (const mode of ['inline', 'pool'] as const) {
    runs[mode].forEach((r, i) =>
      console.log(
        `| ${PATHS[mode]} | ${i + 1} | ${f(r.wall)} | ${f(r.blobHash)} | ${f(r.inflate)} | ${f(r.tarHash)} | ${f(r.thread)} | ${f(r.writers)} | ${f(r.sum)} | ${f(r.sum / r.wall)} | ${f(r.cpu)} | ${f(r.rest)} |`,
      ),
    );
  }
  console.log('\nMedian (min-max):\n');
  console.log(
    '| path | wall s | blob hash CPU s | inflate CPU s | tar hash CPU s | unpack thread CPU s | writer threads CPU s | stages sum s | sum / wall | process CPU / wall |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|---|');
  for (const mode of ['inline', 'pool'] as const) {
    const rs = runs[mode];
    console.log(
      `| ${PATHS[mode]} | ${range(rs.map((r) => r.wall))} | ${range(rs.map((r) => r.blobHash))} | ${range(rs.map((r) => r.inflate))} | ${range(rs.map((r) => r.tarHash))} | ${range(rs.map((r) => r.thread))} | ${range(rs.map((r) => r.writers))} | ${range(rs.map((r) => r.sum))} | ${range(rs.map((r) => r.sum / r.wall))} | ${range(rs.map((r) => r.cpu / r.wall))} |`,
    );
  }
  const ratios = runs.inline.map((r, i) => r.wall / runs.pool[i]!.wall);
  console.log(`\nserial / stages wall, per pair: ${range(ratios)}x\n`);
}
console.log(`load ${load()} at the end`);
