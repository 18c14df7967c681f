// One question: what does each gzip decoder cost in CPU per GiB of one large layer, alone, from the
// page cache into a discarding sink? The in-process ISA-L stage against `igzip -dc` (the same library
// in its own process) shows what the stream around the decoder costs.
//
// Builds (and caches under bench/.cache) the bench's single-layer images at BENCH_MIB MiB (default
// 1024): fp16-like weights and incompressible bytes. Each run is a fresh process (src/decoders-child.ts,
// CPU counted around the pipeline only); `igzip` runs under /usr/bin/time. BENCH_RUNS rounds
// (default 5), the decoders' order rotated each round. BENCH_DECODERS picks them (default
// read,isal,isal-reader,zlib,igzip; also isal-reuse, which fills its output buffers again as a pull
// does; `read` is reading the file alone, the floor under the in-process
// decoders); a name with `@base` (isal@base) loads that decoder from the packages/core build at
// BENCH_BASELINE_CORE, to measure a change against the build before it in the same run.
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { availableParallelism, loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import type { DecoderRun } from './decoders-child.js';
import { median } from './lib.js';
import { ensureImage, singleLayerImage } from './peers/images.js';

const MIB = 1024 * 1024;
const SIZE_MIB = Number(process.env.BENCH_MIB ?? 1024);
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const DECODERS = (process.env.BENCH_DECODERS ?? 'read,isal,isal-reader,zlib,igzip').split(',').filter(Boolean);
const KINDS = (process.env.BENCH_KINDS ?? 'fp16,incompressible').split(',') as ('fp16' | 'incompressible')[];
const CACHE = resolve(process.env.BENCH_CACHE ?? join(import.meta.dirname, '..', '.cache'));
const CHILD = join(import.meta.dirname, 'decoders-child.js');
const log = (s: string) => process.stderr.write(`${s}\n`);

function runIgzip(file: string): DecoderRun {
  const r = spawnSync('/usr/bin/time', ['-f', '%e %U %S %R %w %c', 'sh', '-c', 'exec igzip -dc "$1" > /dev/null', 'sh', file], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`igzip -dc ${file} failed: ${r.stderr}`);
  const [wall, user, sys, minflt, vol, invol] = r.stderr.trim().split('\n').at(-1)!.split(' ').map(Number);
  return { wall: wall!, cpu: user! + sys!, user: user!, sys: sys!, main: user! + sys!, minflt: minflt!, switches: vol! + invol! };
}

function runChild(decoder: string, file: string, bytes: number): DecoderRun {
  const out = execFileSync(process.execPath, [CHILD, decoder, file, String(bytes)], { encoding: 'utf8', env: process.env });
  return JSON.parse(out.trim().split('\n').at(-1)!) as DecoderRun;
}

const range = (xs: readonly number[], digits = 2) => `${median(xs).toFixed(digits)} (${Math.min(...xs).toFixed(digits)}-${Math.max(...xs).toFixed(digits)})`;

console.log(
  `# gzip decoders alone: ${new Date().toISOString().slice(0, 10)}, ${availableParallelism()} cores, load ${loadavg()[0]!.toFixed(1)}, ${SIZE_MIB} MiB per layer, ${RUNS} rounds, order rotated per round\n`,
);
for (const kind of KINDS) {
  const meta = ensureImage(CACHE, singleLayerImage(SIZE_MIB, kind), log);
  const layer = meta.layers[0]!;
  const file = join(meta.dir, layer.file);
  readFileSync(file); // into the page cache: every run reads it from there
  const runs = new Map<string, DecoderRun[]>(DECODERS.map((d) => [d, []]));
  for (let round = 0; round < RUNS; round++) {
    for (let i = 0; i < DECODERS.length; i++) {
      const d = DECODERS[(i + round) % DECODERS.length]!;
      const r = d === 'igzip' ? runIgzip(file) : runChild(d, file, layer.tarSize);
      runs.get(d)!.push(r);
      log(`${kind} round ${round + 1} ${d}: cpu ${r.cpu.toFixed(2)} s, wall ${r.wall.toFixed(2)} s`);
    }
  }
  const gib = layer.tarSize / 1024 ** 3;
  console.log(
    `## ${kind}: ${(layer.size / MIB).toFixed(0)} MiB compressed, ${(layer.tarSize / MIB).toFixed(0)} MiB tar; per GiB of output, median (min-max)\n`,
  );
  console.log('| decoder | CPU s | user s | sys s | stream thread CPU s | wall s | minor faults | context switches |');
  console.log('|---|---|---|---|---|---|---|---|');
  for (const [d, rs] of runs) {
    const per = (f: (r: DecoderRun) => number, digits = 2) =>
      range(
        rs.map((r) => f(r) / gib),
        digits,
      );
    console.log(
      `| ${d} | ${per((r) => r.cpu)} | ${per((r) => r.user)} | ${per((r) => r.sys)} | ${d === 'igzip' ? '-' : per((r) => r.main)} | ${per((r) => r.wall)} | ${per((r) => r.minflt, 0)} | ${per((r) => r.switches, 0)} |`,
    );
  }
  console.log('');
}
