// One run of bench:decoders (src/decoders.ts) in a fresh process: gunzips a file from the page cache
// into a discarding sink with one decoder and prints what it cost as one JSON line.
//
// argv: decoder (read, isal, isal-reuse, isal-reader, zlib; `@base` after a name loads the decoder from the
// build named by BENCH_BASELINE_CORE instead), the .gz file, the bytes it must decode to.
// The allocator is tuned as the CLI and fastpulld tune it at startup.
import { createReadStream, existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Writable, type Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import zlib from 'node:zlib';
import { tuneAllocator } from '@fastpull/core';
import type { IsalGunzipOptions, IsalGunzipStream } from '@fastpull/core/unpack';

export interface DecoderRun {
  readonly wall: number;
  readonly cpu: number;
  readonly user: number;
  readonly sys: number;
  /** CPU of the thread that runs the streams (the process's first thread). */
  readonly main: number;
  readonly minflt: number;
  readonly switches: number;
}

/** As the unpacker reads a blob (BLOB_READ_CHUNK) and sizes node:zlib's output (GUNZIP_CHUNK_SIZE). */
const READ_CHUNK = 1024 * 1024;
const ZLIB_CHUNK = 256 * 1024;

type MakeIsal = (options?: IsalGunzipOptions) => Transform;

async function isalFactory(base: boolean): Promise<MakeIsal> {
  if (!base) return (await import('@fastpull/core/unpack')).createIsalGunzip;
  const dir = process.env.BENCH_BASELINE_CORE;
  if (!dir) throw new Error('a decoder@base was asked for but BENCH_BASELINE_CORE (a built packages/core to compare against) is not set');
  // Where the stage's module is in that build: unpack/decompress/ since the decoders have a folder of their own.
  const module = ['unpack/decompress/isal.js', 'unpack/isal.js'].map((f) => join(dir, 'dist', f)).find((f) => existsSync(f));
  if (module === undefined) throw new Error(`BENCH_BASELINE_CORE ${dir} has no dist/unpack/decompress/isal.js nor dist/unpack/isal.js: build it first`);
  return ((await import(pathToFileURL(module).href)) as { createIsalGunzip: MakeIsal }).createIsalGunzip;
}

/** CPU seconds of one thread of this process from /proc (clock ticks of 10 ms). */
function threadCpu(tid: number): number {
  const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / 100; // utime, stime: fields 14 and 15 of stat(5)
}

async function main(): Promise<void> {
  const [spec, file, want] = process.argv.slice(2);
  if (!spec || !file || !want) throw new Error('usage: decoders-child <decoder[@base]> <file.gz> <decoded bytes>');
  const [name, base] = spec.split('@');
  tuneAllocator(process.env);
  let stage: Transform | undefined;
  // isal-reuse: the stage fills its output buffers again once the sink is past them, as in a pull.
  if (name === 'isal' || name === 'isal-reader' || name === 'isal-reuse')
    stage = (await isalFactory(base === 'base'))({ sync: name === 'isal-reader', ...(name === 'isal-reuse' ? { reuseOutput: true } : {}) });
  else if (name === 'zlib') stage = zlib.createGunzip({ chunkSize: ZLIB_CHUNK });
  else if (name !== 'read') throw new Error(`unknown decoder ${name}`);
  let out = 0;
  const sink = new Writable({
    write(chunk: Buffer, _e, cb) {
      out += chunk.length;
      if (name === 'isal-reuse') (stage as IsalGunzipStream).releaseOutput(out);
      cb();
    },
  });
  const main0 = threadCpu(process.pid);
  const ru0 = process.resourceUsage();
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const source = createReadStream(file, { highWaterMark: READ_CHUNK });
  await (stage ? pipeline(source, stage, sink) : pipeline(source, sink));
  const wall = (performance.now() - t0) / 1000;
  const c = process.cpuUsage(c0);
  const ru = process.resourceUsage();
  const expected = name === 'read' ? -1 : Number(want);
  if (expected >= 0 && out !== expected) throw new Error(`${spec} decoded ${out} bytes of ${file}, want ${expected}`);
  const run: DecoderRun = {
    wall,
    cpu: (c.user + c.system) / 1e6,
    user: c.user / 1e6,
    sys: c.system / 1e6,
    main: threadCpu(process.pid) - main0,
    minflt: ru.minorPageFault - ru0.minorPageFault,
    switches: ru.voluntaryContextSwitches - ru0.voluntaryContextSwitches + ru.involuntaryContextSwitches - ru0.involuntaryContextSwitches,
  };
  process.stdout.write(`${JSON.stringify(run)}\n`);
}

await main();
