// One question: how fast does the parallel gunzip decode one large gzip layer with 1, 2, 4
// and all-core worker threads, against node:zlib (what the unpacker uses without igzip), `gzip -dc`
// and `igzip -dc`? The layer is the ML image's dominant layer (bench/src/peers/images.ts: shared
// libraries and text of this machine, random weights, low-entropy tensors), `gzip -n -6`, generated
// once and cached under bench/.cache. Every decoder reads the blob from the page cache and drops its
// output (the parallel decoder still checks every member's CRC-32 and length, as zlib does). Each
// in-process run is a fresh `node` process (decode threads started before the clock), so no run
// inherits another's heap or allocator state. The parallel rows run after tuneAllocator(), as the CLI
// and fastpulld do; node:zlib runs both ways (stock Node, the baseline, and "allocator tuned").
// The "+ zTOC" rows start chunks at checkpoints every 4 MiB of output, as a SOCI zTOC gives them
// (made once with the test kit and cached next to the layer). The "isal in process" rows are ISA-L's
// decoder linked into Node (createIsalGunzip, where libisal was found at build time), decoding on a
// libuv pool thread or on the reading thread. The "reusing output" rows fill output buffers again
// once the reader has taken them (`reuseOutput`, as an unpack pass runs the parallel decoder);
// the other parallel rows allocate a fresh buffer per 256 KiB, as a caller without it does. Prints
// a markdown table (medians of BENCH_RUNS, default 3) and writes bench/results/pargzip-<time>.json.
//   BENCH_PARGZIP_MIB  uncompressed size of the layer (default 1024)
//   BENCH_DECODERS     only the rows whose name starts with one of these, `|`-separated (row names hold
//                      commas: 'parallel, 2 threads|igzip'); without a `|`, comma-separated as before
import { spawnSync } from 'node:child_process';
import { createReadStream, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus } from 'node:os';
import { join, resolve } from 'node:path';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip, gzipSync } from 'node:zlib';
import { tuneAllocator } from '@fastpull/core';
import {
  createIsalGunzip,
  createParallelGunzip,
  findInflater,
  InflatePool,
  parseZtoc,
  type GzipCheckpoint,
  type ParallelGunzipStream,
} from '@fastpull/core/unpack';
import { buildGzipCheckpoints, encodeZtoc } from '@fastpull/core/testing';
import { median } from './lib.js';
import { ensureImage, mlDominantLayerImage } from './peers/images.js';

const benchDir = resolve(import.meta.dirname, '..');
const MIB = Number(process.env.BENCH_PARGZIP_MIB ?? 1024);
const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const cache = resolve(process.env.BENCH_CACHE ?? join(benchDir, '.cache'));

interface Run {
  wall: number;
  cpu: number;
  out: number;
  /** Parallel rows: output bytes decoded by exact jobs, one after another (ParallelGunzipStats.exactBytes). */
  exactBytes?: number;
}

const cpuNow = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};

/** `release`: called with the output taken so far after each chunk (a reader done with all of it). */
async function inProcess(file: string, make: () => NodeJS.ReadWriteStream, release?: (stream: NodeJS.ReadWriteStream, upTo: number) => void): Promise<Run> {
  let out = 0;
  const c = cpuNow();
  const t = performance.now();
  const stream = make();
  await pipeline(
    createReadStream(file, { highWaterMark: 1024 * 1024 }),
    stream,
    new Writable({
      write(chunk: Buffer, _e, cb) {
        out += chunk.length;
        release?.(stream, out);
        cb();
      },
    }),
  );
  const stats = (stream as Partial<ParallelGunzipStream>).stats;
  return { wall: (performance.now() - t) / 1000, cpu: cpuNow() - c, out, ...(stats ? { exactBytes: stats.exactBytes } : {}) };
}

function external(cmd: string, file: string): Run | undefined {
  if (!existsSync(cmd)) return undefined;
  const r = spawnSync('/usr/bin/time', ['-f', '%e %U %S', 'sh', '-c', `${cmd} -dc < "$1" | wc -c`, 'sh', file], { encoding: 'utf8', maxBuffer: 1 << 20 });
  if (r.status !== 0) throw new Error(`${cmd} failed: ${r.stderr}`);
  const [wall, user, sys] = r.stderr.trim().split('\n').at(-1)!.split(' ').map(Number);
  return { wall: wall!, cpu: user! + sys!, out: Number(r.stdout.trim()) };
}

/** The in-process contenders, by name: each runs in a fresh child process (see runChild). */
function inProcessContender(
  name: string,
): { threads?: number; ztoc: boolean; reuse?: boolean; tune: boolean; make?: () => NodeJS.ReadWriteStream } | undefined {
  if (name === 'node:zlib createGunzip') return { ztoc: false, tune: false };
  if (name === 'node:zlib, allocator tuned') return { ztoc: false, tune: true };
  if (name === 'isal in process, pool thread') return { ztoc: false, tune: true, make: () => createIsalGunzip() };
  if (name === 'isal in process, reading thread') return { ztoc: false, tune: true, make: () => createIsalGunzip({ sync: true }) };
  const m = /^parallel( \+ zTOC)?( reusing output)?, (\d+) threads?$/.exec(name);
  return m ? { threads: Number(m[3]), ztoc: m[1] !== undefined, reuse: m[2] !== undefined, tune: false } : undefined;
}

/**
 * One run of one in-process contender, in this (child) process: a fresh heap and allocator, as a
 * puller would have them (in one long process, earlier contenders change glibc's dynamic mmap
 * threshold and so the page faults of later ones). Decode threads are started before the clock.
 */
async function child(name: string, file: string, ztocFile: string): Promise<void> {
  const c = inProcessContender(name);
  if (!c) throw new Error(`unknown contender ${name}`);
  // fastpull's CLI and fastpulld run with the allocator tuned: so do the parallel rows.
  if (c.tune || c.threads !== undefined) tuneAllocator({});
  let run: Run;
  if (c.make) {
    run = await inProcess(file, c.make);
  } else if (c.threads === undefined) {
    run = await inProcess(file, () => createGunzip({ chunkSize: 256 * 1024 }));
  } else {
    const pool = new InflatePool({ threads: c.threads });
    const size = statSync(file).size;
    const checkpoints = c.ztoc ? parseZtoc(readFileSync(ztocFile)).checkpoints : undefined;
    // Start the threads: a small stream through the pool first.
    await pipeline(
      Readable.from([gzipSync(Buffer.alloc(4 << 20, 7))]),
      createParallelGunzip({ pool, chunkSize: 64 * 1024 }),
      new Writable({ write: (_c, _e, cb) => cb() }),
    );
    const release = c.reuse ? (stream: NodeJS.ReadWriteStream, upTo: number) => (stream as ParallelGunzipStream).releaseOutput(upTo) : undefined;
    run = await inProcess(
      file,
      () => createParallelGunzip({ pool, size, ...(checkpoints ? { checkpoints } : {}), ...(c.reuse ? { reuseOutput: true } : {}) }),
      release,
    );
    await pool.close();
  }
  process.stdout.write(JSON.stringify(run));
}

/** Why the in-process ISA-L decoder cannot run here, or undefined when it can. */
function isalMissing(): string | undefined {
  try {
    findInflater('isal');
    return undefined;
  } catch (e) {
    return e instanceof Error ? e.message : String(e);
  }
}

function runChild(name: string, file: string, ztocFile: string): Run {
  const r = spawnSync(process.execPath, [process.argv[1]!], {
    encoding: 'utf8',
    maxBuffer: 1 << 20,
    env: { ...process.env, PARGZIP_ONE: name, PARGZIP_FILE: file, PARGZIP_ZTOC: ztocFile },
  });
  if (r.status !== 0) throw new Error(`${name} failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as Run;
}

async function main(): Promise<void> {
  if (!InflatePool.available()) throw new Error('the inflate addon is not built: pnpm --filter @fastpull/core build:native');
  mkdirSync(cache, { recursive: true });
  const meta = ensureImage(cache, mlDominantLayerImage(MIB), (s) => console.error(s));
  const layer = meta.layers[0]!;
  const file = join(meta.dir, layer.file);
  const size = statSync(file).size;
  readFileSync(file); // into the page cache
  const cores = availableParallelism();
  const threadCounts = [...new Set([1, 2, 4, cores])].sort((a, b) => a - b);
  // Checkpoints as a SOCI zTOC gives them (soci's default span, 4 MiB of tar), made once and kept as a zTOC.
  const ztocFile = `${file}.ztoc`;
  if (!existsSync(ztocFile)) {
    const tc = performance.now();
    const checkpoints: GzipCheckpoint[] = buildGzipCheckpoints(readFileSync(file), 4 * 1024 * 1024);
    writeFileSync(ztocFile, encodeZtoc({ checkpoints, compressedSize: size, uncompressedSize: layer.tarSize }));
    console.error(`${checkpoints.length} zTOC checkpoints in ${((performance.now() - tc) / 1000).toFixed(1)} s`);
  }
  const contenders: [string, () => Promise<Run | undefined>][] = [
    ['node:zlib createGunzip', async () => runChild('node:zlib createGunzip', file, ztocFile)],
    ['node:zlib, allocator tuned', async () => runChild('node:zlib, allocator tuned', file, ztocFile)],
    ['gzip -dc', async () => external('/usr/bin/gzip', file)],
    ['igzip -dc', async () => external('/usr/bin/igzip', file)],
  ];
  for (const name of ['isal in process, pool thread', 'isal in process, reading thread']) {
    const missing = isalMissing();
    if (missing) console.error(`${name}: left out (${missing})`);
    else contenders.push([name, async () => runChild(name, file, ztocFile)]);
  }
  for (const [ztoc, reuse] of [
    [false, false],
    [false, true],
    [true, false],
    [true, true],
  ] as const) {
    for (const n of threadCounts) {
      const name = `parallel${ztoc ? ' + zTOC' : ''}${reuse ? ' reusing output' : ''}, ${n} thread${n === 1 ? '' : 's'}`;
      contenders.push([name, async () => runChild(name, file, ztocFile)]);
    }
  }
  const picked = process.env.BENCH_DECODERS ?? '';
  const only = picked
    .split(picked.includes('|') ? '|' : ',')
    .map((x) => x.trim())
    .filter(Boolean);
  if (only.length) contenders.splice(0, contenders.length, ...contenders.filter(([name]) => only.some((o) => name.startsWith(o))));
  const runs = new Map<string, Run[]>();
  // Rounds interleave the contenders, so a machine that slows down over time spreads over all of them.
  for (let round = 0; round < RUNS; round++) {
    for (const [name, run] of contenders) {
      const r = await run();
      if (!r) continue;
      if (r.out !== layer.tarSize) throw new Error(`${name}: ${r.out} bytes out, want ${layer.tarSize}`);
      runs.set(name, [...(runs.get(name) ?? []), r]);
      console.error(`${name}: ${r.wall.toFixed(2)} s`);
    }
  }
  const base = median((runs.get('node:zlib createGunzip') ?? [...runs.values()][0]!).map((r) => r.wall));
  const rows = [...runs].map(([name, rs]) => {
    const wall = median(rs.map((r) => r.wall));
    const exact = rs[0]!.exactBytes;
    return {
      name,
      wall,
      min: Math.min(...rs.map((r) => r.wall)),
      max: Math.max(...rs.map((r) => r.wall)),
      cpu: median(rs.map((r) => r.cpu)),
      mbps: layer.tarSize / 1e6 / wall,
      vsZlib: base / wall,
      serial: exact === undefined ? undefined : exact / layer.tarSize,
    };
  });
  const lines = [
    `Parallel gunzip, ${cpus()[0]?.model ?? 'unknown cpu'} (${cores} cores), Node ${process.version}; layer ${(size / 2 ** 20).toFixed(0)} MiB gzip -6 -> ${(layer.tarSize / 2 ** 20).toFixed(0)} MiB; median of ${RUNS}.`,
    '',
    '| decoder | wall s (min-max) | CPU s | MB/s out | vs node:zlib | decoded one job after another |',
    '|---|---|---|---|---|---|',
    ...rows.map(
      (r) =>
        `| ${r.name} | ${r.wall.toFixed(2)} (${r.min.toFixed(2)}-${r.max.toFixed(2)}) | ${r.cpu.toFixed(2)} | ${r.mbps.toFixed(0)} | ${r.vsZlib.toFixed(2)}x | ${r.serial === undefined ? '' : `${(100 * r.serial).toFixed(0)}%`} |`,
    ),
  ];
  console.log(lines.join('\n'));
  const out = join(benchDir, 'results', `pargzip-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  mkdirSync(join(benchDir, 'results'), { recursive: true });
  writeFileSync(
    out,
    JSON.stringify(
      { date: new Date().toISOString(), cores, layer: { compressed: size, uncompressed: layer.tarSize }, runs: Object.fromEntries(runs), rows },
      null,
      2,
    ),
  );
  console.error(`wrote ${out}`);
}

if (process.env.PARGZIP_ONE) await child(process.env.PARGZIP_ONE, process.env.PARGZIP_FILE!, process.env.PARGZIP_ZTOC!);
else await main();
