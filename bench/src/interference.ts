// What a pull takes from the node's other work. A CPU-bound workload (one busy hashing process pinned
// to each core: src/interference/workload.ts) runs for the whole benchmark. Each round, for each
// contender in rotated order: page cache dropped, the workload's throughput measured alone for
// BENCH_WINDOW_S seconds, then during one pull of the ML image from the distribution registry on
// loopback. Reported per contender: the pull's wall time and CPU, and the share of its throughput
// the workload kept while the pull ran (during / alone), medians with min-max.
//
//   BENCH_SCALE (0.25)   image size, as `pnpm bench`
//   BENCH_RUNS (3)       rounds
//   BENCH_WINDOW_S (5)   seconds of the workload alone before each pull
//   BENCH_CONTENDERS     fastpull,fastpull-budget1,fastpull-background,fastpull-budget1-background,containerd
//   BENCH_WORKLOAD_CPUS  all (default): a workload process on every core; spare: only on the cores a
//                        one-core budget leaves (all but the last, the one --cpu-budget 1 takes); or a
//                        list such as 0,2
//
// The registry stands in for another machine but runs on this one: its CPU time during each pull is
// reported beside the pull's, since it comes out of the workload's share where they share cores (with
// BENCH_WORKLOAD_CPUS other than all, it is pinned to the cores the workload leaves).
import { spawnSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { startDistribution } from '@fastpull/core/testing';
import { envList as list, envNumber as num, f2, medianOf as median } from './lib.js';
import { containerd, type Contender, type PullResult } from './peers/contenders.js';
import { ensureImage, mlImage, pushCached, sizesFor } from './peers/images.js';
import { cpuSeconds, diskBytes, dropCaches, measure, sleep } from './peers/measure.js';
import { Workload } from './interference/workload.js';

const here = import.meta.dirname;
const benchDir = resolve(here, '..');
const repo = resolve(benchDir, '..');
const env = process.env;
const SCALE = num('BENCH_SCALE', 0.25);
const RUNS = Math.max(1, num('BENCH_RUNS', 3));
const WINDOW_S = Math.max(1, num('BENCH_WINDOW_S', 5));
const CONTENDERS = list('BENCH_CONTENDERS', 'fastpull,fastpull-budget1,fastpull-background,fastpull-budget1-background,containerd');
const CACHE = resolve(env.BENCH_CACHE ?? join(benchDir, '.cache'));
const TIMEOUT_MS = num('BENCH_TIMEOUT_S', 1800) * 1000;
const log = (s: string) => process.stderr.write(`${s}\n`);

/** `fastpull pull` in its own process with `flags`, as a node would run it for a pull beside its work. */
function fastpullWith(name: string, flags: readonly string[]): Contender {
  const bin = join(repo, 'packages', 'cli', 'dist', 'launch.cjs');
  return {
    name,
    unavailable: () => undefined,
    async pull(ref, dir, timeoutMs) {
      const root = join(dir, 'root');
      const m = await measure(process.execPath, [bin, 'pull', '--quiet', '--plain-http', ...flags, '--root', root, ref], { timeoutMs });
      return { ...m, bytes: diskBytes(root), ...(m.ok ? {} : { note: m.output.trim().split('\n').slice(-2).join(' / ') }) };
    },
  };
}

const KNOWN: Record<string, () => Contender> = {
  fastpull: () => fastpullWith('fastpull', []),
  'fastpull-budget1': () => fastpullWith('fastpull --cpu-budget 1', ['--cpu-budget', '1']),
  'fastpull-background': () => fastpullWith('fastpull --background', ['--background']),
  'fastpull-budget1-background': () => fastpullWith('fastpull --cpu-budget 1 --background', ['--cpu-budget', '1', '--background']),
  containerd: () => containerd(),
};

interface Row {
  readonly wall: number[];
  readonly cpu: number[];
  /** The registry's CPU seconds during the pull. */
  readonly registryCpu: number[];
  readonly kept: number[];
  readonly notes: Set<string>;
}

const contenders = CONTENDERS.map((c) => {
  const make = KNOWN[c];
  if (!make) throw new Error(`BENCH_CONTENDERS: unknown ${c} (known: ${Object.keys(KNOWN).join(', ')})`);
  return make();
});
for (const c of contenders) {
  const why = c.unavailable();
  if (why) throw new Error(`${c.name}: ${why}`);
}

const cores = availableParallelism();
const cpus = workloadCpus(env.BENCH_WORKLOAD_CPUS ?? 'all', cores);
const image = ensureImage(CACHE, mlImage(sizesFor(SCALE, env), 'gzip'), log);
mkdirSync(join(CACHE, 'registry'), { recursive: true });
const registry = await startDistribution({ dir: join(CACHE, 'registry') });
// The registry stands in for another machine: where the workload leaves cores free, it runs there.
const free = Array.from({ length: cores }, (_, i) => i).filter((c) => !cpus.includes(c));
if (free.length > 0 && registry.pid !== undefined) {
  const pin = spawnSync('taskset', ['-a', '-p', '-c', free.join(','), String(registry.pid)], { encoding: 'utf8' });
  if (pin.status !== 0) throw new Error(`pinning the registry to CPUs ${free.join(',')}: ${pin.stderr.trim()}`);
}
const runDir = join(CACHE, 'interference');
rmSync(runDir, { recursive: true, force: true });
mkdirSync(runDir, { recursive: true });
const rows = new Map<string, Row>(contenders.map((c) => [c.name, { wall: [], cpu: [], registryCpu: [], kept: [], notes: new Set() }]));
const loadAtStart = loadavg();
const started = new Date();
let workload: Workload | undefined;
try {
  const ref = await pushCached(registry.url, registry.host, image);
  log(
    `interference: ${image.name} (${image.layers.length} layers), scale ${SCALE}, ${RUNS} round(s), workload on CPUs ${cpus.join(',')}, ${WINDOW_S} s alone before each pull`,
  );
  workload = await Workload.start(cpus);
  for (let run = 0; run < RUNS; run++) {
    // Rotated, so no contender always comes first.
    const order = contenders.map((_, i) => contenders[(i + run) % contenders.length]!);
    for (const c of order) {
      const dir = join(runDir, `${run}-${c.name.replace(/[^a-z0-9]+/gi, '-')}`);
      mkdirSync(dir, { recursive: true });
      dropCaches();
      const alone0 = await workload.reported();
      await sleep(WINDOW_S * 1000);
      const alone1 = await workload.reported();
      const during0 = process.hrtime.bigint();
      const registryCpu0 = registry.pid === undefined ? 0 : cpuSeconds(registry.pid);
      const r: PullResult = await c.pull(ref, dir, TIMEOUT_MS);
      const registryCpu = registry.pid === undefined ? 0 : cpuSeconds(registry.pid) - registryCpu0;
      const during1 = await workload.reported();
      const kept = workload.rate(during0, during1) / workload.rate(alone0, alone1);
      workload.forget(during1);
      const row = rows.get(c.name)!;
      if (!r.ok) {
        row.notes.add(r.note ?? 'failed');
        log(`  run ${run + 1} ${c.name}: FAILED ${r.note ?? ''}`);
        continue;
      }
      row.wall.push(r.wall);
      row.cpu.push(r.cpu);
      row.registryCpu.push(registryCpu);
      row.kept.push(kept);
      if (r.note) row.notes.add(r.note);
      log(`  run ${run + 1} ${c.name}: ${f2(r.wall)} s, ${f2(r.cpu)} s CPU, registry ${f2(registryCpu)} s CPU, workload kept ${(kept * 100).toFixed(1)}%`);
      // The store goes now, before the next window: its removal is not part of any pull.
      rmSync(dir, { recursive: true, force: true });
    }
  }
} finally {
  await workload?.stop();
  await registry.stop();
}

const range = (xs: number[], f: (x: number) => string) => (xs.length === 0 ? '-' : `${f(median(xs))} (${f(Math.min(...xs))}-${f(Math.max(...xs))})`);
const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
const lines = [
  `## Interference: ${image.name} pulled beside a CPU-bound workload`,
  '',
  `${started.toISOString()}, ${cores} cores, scale ${SCALE}, ${RUNS} round(s), load average at start ${loadAtStart.map((l) => l.toFixed(2)).join(' ')}. One busy hashing process pinned to each of CPUs ${cpus.join(',')}; "kept" is their throughput during the pull over their throughput in the ${WINDOW_S} s before it. The registry (on loopback, standing in for another machine${free.length > 0 ? `, pinned to CPUs ${free.join(',')}` : ''}) spent "registry CPU" during the pull. Medians (min-max).`,
  '',
  '| contender | pull s | pull CPU s | registry CPU s | workload kept | note |',
  '|---|---|---|---|---|---|',
  ...[...rows].map(
    ([name, r]) =>
      `| ${name} | ${range(r.wall, f2)} | ${range(r.cpu, f2)} | ${range(r.registryCpu, f2)} | ${range(r.kept, pct)} | ${[...r.notes].join('; ')} |`,
  ),
];
const text = lines.join('\n') + '\n';
process.stdout.write(text);
const resultsDir = join(benchDir, 'results');
mkdirSync(resultsDir, { recursive: true });
const suffix = env.BENCH_WORKLOAD_CPUS && env.BENCH_WORKLOAD_CPUS !== 'all' ? `-${env.BENCH_WORKLOAD_CPUS.replace(/[^a-z0-9]+/gi, '_')}` : '';
writeFileSync(join(resultsDir, `interference${suffix}.md`), text);
writeFileSync(
  join(resultsDir, `interference${suffix}.json`),
  JSON.stringify(
    {
      started,
      cores,
      workloadCpus: cpus,
      scale: SCALE,
      runs: RUNS,
      windowS: WINDOW_S,
      loadAtStart,
      rows: Object.fromEntries([...rows].map(([k, r]) => [k, { ...r, notes: [...r.notes] }])),
    },
    null,
    2,
  ) + '\n',
);

/** The CPUs the workload runs on: every one, those a one-core budget leaves, or a list. */
function workloadCpus(spec: string, count: number): number[] {
  const all = Array.from({ length: count }, (_, i) => i);
  if (spec === 'all') return all;
  if (spec === 'spare') {
    if (count < 2) throw new Error('BENCH_WORKLOAD_CPUS=spare: one core leaves none spare');
    return all.slice(0, -1);
  }
  const list = spec.split(',').map((x) => Number(x.trim()));
  if (list.length === 0 || list.some((c) => !Number.isInteger(c) || c < 0 || c >= count))
    throw new Error(`BENCH_WORKLOAD_CPUS: want all, spare or CPU numbers below ${count}, not ${spec}`);
  return list;
}
