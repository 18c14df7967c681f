// How a fastpull pull scales with cores: the same images pulled with the CLI pinned to 1, 2, 4, ...
// of the machine's cores (`taskset -c` over the first N CPUs of cpuOrder, one thread of each physical
// core first; node and libuv size their pools from the affinity mask, so a pinned pull sizes itself
// as on a machine of that many cores), core counts alternating within each round. For each pull: wall, CPU, peak RSS, and from its trace the largest layer's unpack pass
// (its wall and the CPU of each of its stages' threads), which says whether one big layer uses more
// than one core. Prints a markdown table, writes bench/results/cores-<time>.json and keeps the trace
// of each image's widest pull.
//
// Knobs: BENCH_IMAGES (ml,single-fp16,many-layers), BENCH_SCALE (0.5; sizes as `pnpm bench`'s),
// BENCH_CORES (1,2,4,... up to the cores there are), BENCH_INFLATERS (auto; e.g. `auto,parallel`:
// each core count with each `--inflater`), BENCH_VARIANTS ('|'-separated settings, each of
// `KEY=VALUE` environment and CLI flags, e.g. `|FASTPULL_WRITER_THREADS=8|--unpack-concurrency 8`:
// the default, then each; default none), BENCH_RUNS (2), BENCH_DIR (where stores go;
// default the OS temporary directory), BENCH_CACHE (the image cache, bench/.cache),
// BENCH_PREPARE_ONLY=1 (build the images into the cache and stop: several can build at once).
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, release, tmpdir, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { startDistribution } from '@fastpull/core/testing';
import { fastpullTimings } from './peers/contenders.js';
import { ensureImage, namedImages, pushCached, sizesFor } from './peers/images.js';
import { blockCounters, diskBytes, dropCaches, measure, which } from './peers/measure.js';
import { envList as list, envNumber as num, f0, f2, medianOf as median } from './lib.js';

const here = import.meta.dirname;
const benchDir = resolve(here, '..');
const repo = resolve(benchDir, '..');
const env = process.env;
const log = (s: string) => process.stderr.write(`${s}\n`);
const MIB = 1024 * 1024;

const SCALE = num('BENCH_SCALE', 0.5);
const RUNS = Math.max(1, num('BENCH_RUNS', 2));
const IMAGES = list('BENCH_IMAGES', 'ml,single-fp16,many-layers');
const CACHE = resolve(env.BENCH_CACHE ?? join(benchDir, '.cache'));
const TIMEOUT_S = num('BENCH_TIMEOUT_S', 600);
const MAX = availableParallelism();
const INFLATERS = list('BENCH_INFLATERS', 'auto');
const VARIANTS = (env.BENCH_VARIANTS ?? '').split('|').map((v) => v.trim());

/** A BENCH_VARIANTS setting: its `KEY=VALUE` words as environment, the rest as CLI arguments. */
export function parseVariant(text: string): { env: Record<string, string>; args: string[] } {
  const env: Record<string, string> = {};
  const args: string[] = [];
  for (const word of text.split(/\s+/).filter(Boolean)) {
    const m = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(word);
    if (m) env[m[1]!] = m[2]!;
    else args.push(word);
  }
  return { env, args };
}

/** 1, 2, 4, ... and the machine's count, or BENCH_CORES. */
export function coreCounts(max: number, given?: string): number[] {
  if (given !== undefined && given !== '') {
    const xs = given.split(',').map((s) => Number(s.trim()));
    const bad = xs.find((n) => !Number.isInteger(n) || n < 1 || n > max);
    if (bad !== undefined) throw new Error(`BENCH_CORES: ${bad} is not a core count between 1 and ${max}`);
    return xs;
  }
  const out: number[] = [];
  for (let n = 1; n < max; n *= 2) out.push(n);
  out.push(max);
  return out;
}

/** "0-3,8,10-11" (the kernel's CPU list format) as numbers. */
export function parseCpuList(list: string): number[] {
  return list
    .trim()
    .split(',')
    .filter(Boolean)
    .flatMap((part) => {
      const [a, b] = part.split('-').map(Number);
      return b === undefined ? [a!] : Array.from({ length: b - a! + 1 }, (_, i) => a! + i);
    });
}

/**
 * The CPUs to pin to, one thread of each physical core first, then their siblings: `taskset` over the
 * first N of them gives N cores, not N hyperthreads of N/2 cores. `siblings` maps a CPU to its
 * thread_siblings_list ("0,8" or "0-1"); CPUs outside the affinity mask are left out.
 */
export function cpuOrder(allowed: readonly number[], siblings: (cpu: number) => string | undefined): number[] {
  const rank = new Map<number, number>();
  for (const cpu of allowed) {
    const s = siblings(cpu);
    rank.set(cpu, s === undefined ? 0 : Math.max(0, parseCpuList(s).indexOf(cpu)));
  }
  return [...allowed].sort((x, y) => rank.get(x)! - rank.get(y)! || x - y);
}

function allowedCpus(): number[] {
  const m = /Cpus_allowed_list:\s*(\S+)/.exec(readFileSync('/proc/self/status', 'utf8'));
  return parseCpuList(m?.[1] ?? `0-${MAX - 1}`);
}

function siblingsOf(cpu: number): string | undefined {
  try {
    return readFileSync(`/sys/devices/system/cpu/cpu${cpu}/topology/thread_siblings_list`, 'utf8');
  } catch {
    return undefined;
  }
}

/** The largest layer's unpack pass in a `fastpull pull --trace` file: wall and per-stage CPU, seconds. */
export interface PassFigures {
  readonly pullS: number;
  readonly passS: number;
  readonly layerMiB: number;
  /** CPU seconds of the pass's threads (unpack thread, inflater, both hashes, file writers) where traced. */
  readonly cpu: Readonly<Record<string, number>>;
}

export function largestPass(trace: unknown): PassFigures | undefined {
  type Ev = { name?: string; ph?: string; dur?: number; args?: Record<string, unknown> };
  const events = ((trace as { traceEvents?: Ev[] }).traceEvents ?? []).filter((e) => e.ph === 'X');
  const pull = events.find((e) => e.name === 'pull');
  const passes = events.filter((e) => e.name === 'unpack' && e.args !== undefined && 'layer' in e.args);
  if (pull?.dur === undefined || passes.length === 0) return undefined;
  const read = (e: Ev) => Number(e.args?.bytesRead ?? 0);
  const big = passes.reduce((a, b) => (read(b) > read(a) ? b : a));
  const ms = (k: string) => (typeof big.args?.[k] === 'number' ? big.args[k] / 1000 : undefined);
  const cpu: Record<string, number> = {};
  for (const [key, name] of [
    ['threadCpuMs', 'unpack thread'],
    ['inflateCpuMs', 'inflate'],
    ['blobHashCpuMs', 'blob hash'],
    ['tarHashCpuMs', 'tar hash'],
    ['writerCpuMs', 'writers'],
  ] as const) {
    const v = ms(key);
    if (v !== undefined) cpu[name] = v;
  }
  return { pullS: pull.dur / 1e6, passS: (big.dur ?? 0) / 1e6, layerMiB: read(big) / MIB, cpu };
}

/** The kept trace of an image's widest pull with one inflater. */
const traceName = (image: string, n: number, inflater: string, variant: string) =>
  `${image}-${n}-cores${inflater === 'auto' ? '' : `-${inflater}`}${
    variant
      ? `-${variant
          .replace(/[^A-Za-z0-9]+/g, '-')
          .replace(/^-|-$/g, '')
          .toLowerCase()}`
      : ''
  }.trace.json`;

interface Run {
  readonly cores: number;
  readonly inflater: string;
  /** The BENCH_VARIANTS setting ('' for none). */
  readonly variant: string;
  readonly ok: boolean;
  readonly wall: number;
  readonly cpu: number;
  readonly rssMiB: number;
  readonly diskMiB: number;
  readonly deviceWriteMiB?: number;
  readonly phases?: Record<string, number>;
  readonly pass?: PassFigures;
  readonly note?: string;
}

async function main(): Promise<void> {
  const sizes = sizesFor(SCALE, env);
  const specs = namedImages(sizes);
  const chosen = IMAGES.map((name) => {
    const make = specs[name];
    if (!make) throw new Error(`BENCH_IMAGES: unknown image ${name} (known: ${Object.keys(specs).join(', ')})`);
    return make();
  });
  const metas = chosen.map((spec) => ensureImage(CACHE, spec, log));
  if (env.BENCH_PREPARE_ONLY === '1') return;

  const cores = coreCounts(MAX, env.BENCH_CORES);
  const taskset = which('taskset');
  if (taskset === undefined) throw new Error('taskset (util-linux) is needed to pin a pull to some cores');
  const cli = join(repo, 'packages', 'cli', 'dist', 'launch.cjs');
  if (!existsSync(cli)) throw new Error(`${cli} is missing: build first (pnpm build)`);
  const base = mkdtempSync(join(resolve(env.BENCH_DIR ?? tmpdir()), 'fastpull-cores-'));
  const resultsDir = join(benchDir, 'results');
  const tracesDir = join(resultsDir, 'traces');
  mkdirSync(tracesDir, { recursive: true });
  const cpuList = cpuOrder(allowedCpus(), siblingsOf);
  const machine = {
    cpuOrder: cpuList.join(','),
    cores: MAX,
    cpu: cpus()[0]?.model ?? 'unknown',
    memGiB: Math.round(totalmem() / 2 ** 30),
    kernel: release(),
    node: process.version,
  };
  log(`fastpull cores bench: ${JSON.stringify(machine)}; scale ${SCALE}; cores ${cores.join(',')}; ${RUNS} round(s); stores under ${base}`);

  mkdirSync(join(CACHE, 'registry'), { recursive: true });
  const registry = await startDistribution({ dir: join(CACHE, 'registry') });
  const results: { image: string; layers: number; compressedMiB: number; unpackedMiB: number; runs: Run[] }[] = [];
  const drops = new Set<string>();
  try {
    for (const meta of metas) {
      const ref = await pushCached(registry.url, registry.host, meta);
      const compressedMiB = meta.layers.reduce((a, l) => a + l.size, 0) / MIB;
      const unpackedMiB = meta.layers.reduce((a, l) => a + l.tarSize, 0) / MIB;
      log(`${meta.name}: ${meta.layers.length} layers, ${f0(compressedMiB)} MiB compressed, ${f0(unpackedMiB)} MiB unpacked`);
      const runs: Run[] = [];
      for (let round = 0; round < RUNS; round++) {
        // Rotate the order each round, so no setting always runs first.
        const settings = cores.flatMap((n) => INFLATERS.flatMap((inflater) => VARIANTS.map((variant) => ({ n, inflater, variant }))));
        const order = settings.map((_, i) => settings[(i + round) % settings.length]!);
        for (const { n, inflater, variant } of order) {
          const extra = parseVariant(variant);
          const flags = [...(inflater === 'auto' ? [] : ['--inflater', inflater]), ...extra.args];
          const dir = mkdtempSync(join(base, 'run-'));
          const root = join(dir, 'root');
          const trace = join(dir, 'trace.json');
          execFileSync('sync');
          drops.add(dropCaches());
          const before = blockCounters(dir);
          const m = await measure(
            taskset,
            ['-c', cpuList.slice(0, n).join(','), process.execPath, cli, 'pull', '--json', '--plain-http', ...flags, '--root', root, '--trace', trace, ref],
            { timeoutMs: TIMEOUT_S * 1000, env: { ...env, ...extra.env } },
          );
          const after = blockCounters(dir);
          let pass: PassFigures | undefined;
          try {
            pass = largestPass(JSON.parse(readFileSync(trace, 'utf8')));
          } catch {
            pass = undefined;
          }
          const phases = fastpullTimings(m.output);
          const run: Run = {
            cores: n,
            inflater,
            variant,
            ok: m.ok,
            wall: m.wall,
            cpu: m.cpu,
            rssMiB: m.rssMiB,
            diskMiB: diskBytes(root) / MIB,
            ...(before && after ? { deviceWriteMiB: ((after.writeSectors - before.writeSectors) * 512) / MIB } : {}),
            ...(phases ? { phases } : {}),
            ...(pass ? { pass } : {}),
            ...(m.ok ? {} : { note: m.output.trim().split('\n').slice(-3).join(' / ').slice(0, 400) }),
          };
          runs.push(run);
          // The widest pull's trace of the last round, kept next to the results.
          if (m.ok && n === Math.max(...cores) && round === RUNS - 1) copyFileSync(trace, join(tracesDir, traceName(meta.name, n, inflater, variant)));
          const stages = pass
            ? Object.entries(pass.cpu)
                .map(([k, v]) => `${k} ${f2(v)}`)
                .join(', ')
            : '';
          log(
            `  round ${round + 1} ${n} core(s)${inflater === 'auto' ? '' : `, --inflater ${inflater}`}${variant ? `, ${variant}` : ''}: ${m.ok ? `${f2(m.wall)} s, CPU ${f2(m.cpu)} s, RSS ${f0(m.rssMiB)} MiB${pass ? `; largest pass ${f2(pass.passS)} s, ${f0(pass.layerMiB)} MiB blob (${stages})` : ''}` : `FAILED ${run.note}`}`,
          );
          rmSync(dir, { recursive: true, force: true });
        }
      }
      results.push({ image: meta.name, layers: meta.layers.length, compressedMiB, unpackedMiB, runs });
    }
  } finally {
    await registry.stop();
  }

  const lines: string[] = [];
  lines.push(
    `fastpull pull pinned to N cores (${machine.cores}-core ${machine.cpu}, ${machine.memGiB} GiB, kernel ${machine.kernel}; scale ${SCALE}; ${RUNS} round(s); page cache ${[...drops].join(', ')})`,
  );
  lines.push('');
  lines.push(
    "| image | inflater | variant | cores | wall s (median) | min-max s | speed-up vs 1st | CPU s | peak RSS MiB | largest pass s | its stages' CPU s (sum) | note |",
  );
  lines.push('|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of results) {
    for (const [inflater, variant] of INFLATERS.flatMap((i) => VARIANTS.map((v) => [i, v] as const))) {
      const same = (x: Run) => x.inflater === inflater && x.variant === variant;
      const first = median(r.runs.filter((x) => x.ok && x.cores === cores[0] && same(x)).map((x) => x.wall));
      for (const n of cores) {
        const good = r.runs.filter((x) => x.ok && x.cores === n && same(x));
        const bad = r.runs.filter((x) => !x.ok && x.cores === n && same(x));
        const wall = median(good.map((x) => x.wall));
        const passes = good.map((x) => x.pass).filter((p): p is PassFigures => p !== undefined);
        const stageSum = median(passes.map((p) => Object.values(p.cpu).reduce((a, b) => a + b, 0)));
        const stages = [...new Set(passes.flatMap((p) => Object.keys(p.cpu)))]
          .map((k) => `${k} ${f2(median(passes.map((p) => p.cpu[k] ?? NaN).filter(Number.isFinite)))}`)
          .join(', ');
        lines.push(
          `| ${r.image} | ${inflater} | ${variant || '-'} | ${n} | ${f2(wall)} | ${f2(Math.min(...good.map((x) => x.wall)))}-${f2(Math.max(...good.map((x) => x.wall)))} | ${f2(first / wall)}x | ${f2(median(good.map((x) => x.cpu)))} | ${f0(Math.max(...good.map((x) => x.rssMiB)))} | ${f2(median(passes.map((p) => p.passS)))} | ${f2(stageSum)}${stages ? ` (${stages})` : ''} | ${bad.length ? `${bad.length} failed: ${bad[0]!.note ?? ''}` : ''} |`,
        );
      }
    }
  }
  const table = lines.join('\n');
  process.stdout.write(`${table}\n`);
  const file = join(resultsDir, `cores-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  writeFileSync(
    file,
    `${JSON.stringify({ machine, scale: SCALE, cores, inflaters: INFLATERS, variants: VARIANTS, runs: RUNS, cacheDrops: [...drops], results }, null, 2)}\n`,
  );
  log(`wrote ${file}`);
  rmSync(base, { recursive: true, force: true });
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === resolve(here, 'cores.js')) await main();
