// fastpull against real peers (containerd, skopeo + umoci) and against the machine's own limit, in
// one run. See bench/README.md ("Peers and the machine's limit") for what is measured and the knobs.
//
// Generates (and caches under bench/.cache) the benchmark images, serves them from the CNCF
// distribution registry on loopback, measures the limit per image, then pulls each image with every
// contender BENCH_RUNS times into a fresh store (page cache dropped first where permitted); then the
// memory scenario (one small vs one large layer) and the fault scenario (one stalled connection).
// Trees it is done with go to a trash, emptied only when space runs short and then followed by a
// cool-down before the next measured run (src/peers/trash.ts says why), and at the end.
// Prints markdown tables and writes bench/results/peers-<time>.json and peers-latest.md.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { arch, availableParallelism, loadavg, release, totalmem } from 'node:os';
import { basename, join, relative, resolve } from 'node:path';
import { startDistribution } from '@fastpull/core/testing';
import { containerd, fastpullCli, fastpulld, skopeoUmoci, type Contender, type PullResult } from './peers/contenders.js';
import { criContender } from './peers/cri.js';
import {
  ensureImage,
  mlImage,
  namedImages,
  oneLayerImage,
  pushCached,
  pushSociIndex,
  sizesFor,
  warmUpImage,
  type ImageMeta,
  type ImageSpec,
} from './peers/images.js';
import { measureLimit, type Limit } from './peers/limit.js';
import { blockCounters, dropCaches, which } from './peers/measure.js';
import { startStallProxy } from './peers/stall-proxy.js';
import { limitNeed, plus, pullNeed, times, Trash } from './peers/trash.js';
import { readTrace, traceSvg } from './trace-svg.js';
import { envList as list, envNumber as num, f0, f2, medianOf as median } from './lib.js';

const here = import.meta.dirname;
const benchDir = resolve(here, '..');
const repo = resolve(benchDir, '..');
const env = process.env;

const SCALE = num('BENCH_SCALE', 0.1);
const RUNS = Math.max(1, num('BENCH_RUNS', 3));
const IMAGES = list('BENCH_IMAGES', 'ml,ml-zstd,many-files,many-layers');
const SCENARIOS = list('BENCH_SCENARIOS', 'pull,memory,fault');
const CONTENDERS = list('BENCH_CONTENDERS', 'fastpull,fastpulld,containerd,cri-fastpull,cri-overlayfs,skopeo');
const MEM_MIB = list('BENCH_MEM_MIB', `${Math.max(16, Math.round(512 * SCALE))},${Math.max(64, Math.round(4096 * SCALE))}`).map(Number);
const PULL_TIMEOUT_S = num('BENCH_TIMEOUT_S', 1800);
const FAULT_TIMEOUT_S = num('BENCH_FAULT_TIMEOUT_S', 60);
const FAULT_AFTER_BYTES = num('BENCH_FAULT_AFTER_KIB', 1024) * 1024;
/** Seconds between removing trees and the next measured run (0: no wait). */
const DELETE_COOLDOWN_S = Math.max(0, num('BENCH_DELETE_COOLDOWN_S', 65));
const CACHE = resolve(env.BENCH_CACHE ?? join(benchDir, '.cache'));
/** BENCH_SOCI=1: gzip images get a SOCI index (v1, through the referrers tag), which fastpull's parallel inflater uses. */
const SOCI = env.BENCH_SOCI === '1';
const MIB = 1024 * 1024;
const resultsDir = join(benchDir, 'results');
/** One trace per image and tracing contender, the latest run's only (overwritten), with its SVG. */
const tracesDir = join(resultsDir, 'traces');
const slug = (s: string) =>
  s
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '');

const log = (s: string) => process.stderr.write(`${s}\n`);

// ---- machine and tools ---------------------------------------------------------------------------

function cpuModel(): string {
  try {
    return /model name\s*:\s*(.*)/.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1]?.trim() ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

function version(cmd: string, args: string[]): string | undefined {
  if (!which(cmd)) return undefined;
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: 10_000 });
  return `${r.stdout}${r.stderr}`.trim().split('\n')[0];
}

/** Installs missing peers with bench/setup.sh (Debian, as root) unless BENCH_SETUP=0. */
function setupPeers(): string {
  const missing = ['containerd', 'ctr', 'skopeo', 'umoci', 'igzip', 'pigz', 'zstd', 'openssl', 'curl'].filter((c) => !which(c));
  if (!existsSync('/usr/bin/time')) missing.push('/usr/bin/time');
  if (missing.length === 0) return 'all tools present';
  if (env.BENCH_SETUP === '0') return `missing ${missing.join(', ')}; BENCH_SETUP=0, not installing`;
  if (process.getuid?.() !== 0) return `missing ${missing.join(', ')}; not root, not installing (run bench/setup.sh as root)`;
  log(`installing missing tools (${missing.join(', ')}) with bench/setup.sh`);
  const r = spawnSync('bash', [join(benchDir, 'setup.sh')], { stdio: ['ignore', 'inherit', 'inherit'] });
  return r.status === 0
    ? `installed with bench/setup.sh (was missing ${missing.join(', ')})`
    : `bench/setup.sh failed (exit ${r.status}); missing ${missing.join(', ')}`;
}

// ---- results -------------------------------------------------------------------------------------

interface Row {
  readonly image: string;
  readonly contender: string;
  readonly runs: PullResult[];
  readonly unavailable?: string;
  /** The trace of its last run, relative to the bench directory (contenders that trace). */
  trace?: string;
}

const cell = (s: string) => s.replaceAll('|', '\\|').replaceAll('\n', ' ');

/** "skopeo copy 0.71 s, umoci unpack 3.94 s" (medians), or '' when the contender is one command. */
function phaseMedians(runs: readonly PullResult[]): string {
  const names = [...new Set(runs.flatMap((x) => Object.keys(x.phases ?? {})))];
  return names.map((n) => `${n} ${f2(median(runs.map((x) => x.phases?.[n] ?? NaN).filter(Number.isFinite)))} s`).join(', ');
}

/** "daemon alone: 231 MiB peak" for a contender with a daemon: its share of the peak-RSS column. */
function daemonPeak(runs: readonly PullResult[]): string[] {
  const peaks = runs.map((x) => x.daemonRssMiB).filter((m): m is number => m !== undefined && Number.isFinite(m));
  return peaks.length > 0 ? [`daemon alone ${f0(Math.max(...peaks))} MiB peak`] : [];
}

function summarize(r: Row) {
  const good = r.runs.filter((x) => x.ok);
  const walls = good.map((x) => x.wall);
  return {
    ok: good.length,
    failed: r.runs.length - good.length,
    wall: median(walls),
    min: Math.min(...walls),
    max: Math.max(...walls),
    cpu: median(good.map((x) => x.cpu)),
    rss: Math.max(...good.map((x) => x.rssMiB)),
    bytes: median(good.map((x) => x.bytes)),
    notes: [...new Set(r.runs.map((x) => x.note).filter((n): n is string => n !== undefined)), ...daemonPeak(good)],
    phases: phaseMedians(good),
  };
}

function pullTable(images: readonly ImageMeta[], limits: ReadonlyMap<string, Limit>, rows: readonly Row[]): string {
  const out: string[] = [];
  out.push('| image | contender | wall s (median) | min-max s | CPU s | peak RSS MiB | disk MiB | vs fastpull | vs bound | note |');
  out.push('|---|---|---|---|---|---|---|---|---|---|');
  for (const image of images) {
    const limit = limits.get(image.name);
    const base =
      rows.find((r) => r.image === image.name && r.contender.startsWith('fastpull (CLI)')) ??
      rows.find((r) => r.image === image.name && r.contender.startsWith('fastpull'));
    const baseWall = base ? summarize(base).wall : NaN;
    for (const r of rows.filter((x) => x.image === image.name)) {
      if (r.unavailable !== undefined) {
        out.push(`| ${image.name} | ${cell(r.contender)} | - | - | - | - | - | - | - | ${cell(r.unavailable)} |`);
        continue;
      }
      const s = summarize(r);
      const note = [s.failed ? `${s.failed} of ${r.runs.length} runs failed` : '', s.phases, ...s.notes].filter(Boolean).join('; ');
      out.push(
        `| ${image.name} | ${cell(r.contender)} | ${f2(s.wall)} | ${s.ok ? `${f2(s.min)}-${f2(s.max)}` : '-'} | ${f2(s.cpu)} | ${f0(s.rss)} | ${f0(s.bytes / MIB)} | ${s.ok ? `${f2(s.wall / baseWall)}x` : '-'} | ${limit && s.ok ? `${f2(s.wall / limit.bound)}x` : '-'} | ${cell(note)} |`,
      );
    }
    if (limit) out.push(`| ${image.name} | **bound** (${limit.dominant}) | ${f2(limit.bound)} | | | | | ${f2(limit.bound / baseWall)}x | 1.00x | |`);
  }
  return out.join('\n');
}

function limitTable(images: readonly ImageMeta[], limits: ReadonlyMap<string, Limit>): string {
  const out = [
    '| image | layers | compressed MiB | uncompressed MiB | network s (curl, +sync) | inflate CPU s (best per layer) | SHA-256 CPU s (compr. + uncompr.) | tar -x CPU s | CPU term s (/cores) | download CPU s (receive + serve warm, cold) | CPU term with download s (warm, cold) | largest layer inflate s | disk s (tar -x + sync) | bound s | dominant | for reference: dd of as many bytes s |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const image of images) {
    const l = limits.get(image.name);
    if (!l) continue;
    const tools = [...new Set(l.layers.map((x) => x.best.tool))].join(', ');
    out.push(
      `| ${image.name} | ${image.layers.length} | ${f0(image.layers.reduce((a, x) => a + x.size, 0) / MIB)} | ${f0(image.layers.reduce((a, x) => a + x.tarSize, 0) / MIB)} | ${f2(l.curl.wall)} (${f2(l.curl.wallWithSync)}) | ${f2(l.inflateCpu)} (${tools}) | ${f2(l.shaCompressedCpu)} + ${f2(l.shaUncompressedCpu)} | ${f2(l.extract.cpu)} | ${f2(l.terms.cpu)} | ${l.download ? `${f2(l.download.cpu)} + ${l.download.serverCpu === undefined ? '?' : f2(l.download.serverCpu)}, ${l.download.coldServerCpu === undefined ? '?' : f2(l.download.coldServerCpu)}` : ''} | ${l.terms['cpu with download'] === undefined ? '' : f2(l.terms['cpu with download'])}${l.terms['cpu with cold download'] === undefined ? '' : `, ${f2(l.terms['cpu with cold download'])}`} | ${f2(l.terms['largest layer inflate'])} | ${f2(l.terms.disk)} | ${f2(l.bound)} | ${l.dominant} | ${f2(l.rawWrite.wall)} |`,
    );
  }
  return out.join('\n');
}

function inflateTable(images: readonly ImageMeta[], limits: ReadonlyMap<string, Limit>): string {
  const out = ['| image | largest layer (MiB compressed) | tool | wall s | CPU s |', '|---|---|---|---|---|'];
  for (const image of images) {
    const l = limits.get(image.name);
    if (!l) continue;
    const big = l.layers.reduce((a, b) => (b.size > a.size ? b : a));
    for (const t of big.tries)
      out.push(`| ${image.name} | ${big.name} (${f0(big.size / MIB)}) | ${t.tool}${t === big.best ? ' (best)' : ''} | ${f2(t.wall)} | ${f2(t.cpu)} |`);
  }
  return out.join('\n');
}

// ---- the run -------------------------------------------------------------------------------------

/** The image `fastpulld:warm` pulls before the clock, once pushed (below). */
let warmUpRef: string | undefined;
const allContenders: Record<string, Contender> = {
  fastpull: fastpullCli(repo),
  'fastpull-nodehttp': fastpullCli(repo, 'nodehttp'),
  fastpulld: fastpulld(repo),
  'fastpulld:warm': fastpulld(repo, () => warmUpRef),
  containerd: containerd(),
  'cri-fastpull': criContender(repo, 'fastpull'),
  'cri-overlayfs': criContender(repo, 'overlayfs'),
  'cri-fastpull-1.7': criContender(repo, 'fastpull', { release: '1.7' }),
  'cri-overlayfs-1.7': criContender(repo, 'overlayfs', { release: '1.7' }),
  'cri-fastpull-2.2': criContender(repo, 'fastpull', { release: '2.2' }),
  'cri-overlayfs-2.2': criContender(repo, 'overlayfs', { release: '2.2' }),
  'cri-fastpull-2.2-nosync': criContender(repo, 'fastpull', {
    release: '2.2',
    fastpulldArgs: ['--no-sync'],
    name: 'containerd 2.2 + fastpull snapshotter --no-sync (CRI PullImage)',
  }),
  'cri-tuned-2.2': criContender(repo, 'overlayfs', { release: '2.2', tuned: true }),
  'ctr-tuned-2.2': criContender(repo, 'overlayfs', { release: '2.2', tuned: true, client: 'ctr' }),
  'cri-soci-2.2': criContender(repo, 'soci', { release: '2.2' }),
  'ctr-soci-2.2': criContender(repo, 'soci', { release: '2.2', client: 'ctr' }),
  skopeo: skopeoUmoci(),
};
const contenders = CONTENDERS.map((n) => {
  // `fastpull:<inflater>`: the CLI with --inflater <inflater>, to compare the gzip decoders end to end.
  if (n.startsWith('fastpull:')) return fastpullCli(repo, n.slice('fastpull:'.length));
  // `fastpull@<checkout>`: the CLI of another built checkout, to compare two builds run for run.
  if (n.startsWith('fastpull@')) {
    const other = resolve(n.slice('fastpull@'.length));
    return { ...fastpullCli(other), name: `fastpull (CLI) of ${basename(other)}` };
  }
  const c = allContenders[n];
  if (!c) throw new Error(`BENCH_CONTENDERS: unknown contender ${n} (known: ${Object.keys(allContenders).join(', ')})`);
  return c;
});

const trash = new Trash(DELETE_COOLDOWN_S, log);
// Ctrl-C or a kill: the trash goes too (it may hold many GiB), then exit as the signal would have.
for (const [sig, code] of [
  ['SIGINT', 130],
  ['SIGTERM', 143],
] as const) {
  process.once(sig, () => {
    log(`\n${sig}: removing the trash (${trash.size} tree(s))`);
    trash.empty();
    process.exit(code);
  });
}

/** One pull into a fresh directory, which goes to the trash (callers call `trash.before` first). */
async function pullOnce(c: Contender, ref: string, timeoutS: number, trace?: string): Promise<PullResult> {
  const dir = trash.dir('fastpull-bench-run-');
  try {
    const before = blockCounters(dir);
    const r = await c.pull(ref, dir, timeoutS * 1000, trace);
    const after = blockCounters(dir);
    if (before === undefined || after === undefined) return r;
    const mib = (sectors: number) => (sectors * 512) / MIB;
    const discarded =
      before.discardSectors !== undefined && after.discardSectors !== undefined ? { deviceDiscardMiB: mib(after.discardSectors - before.discardSectors) } : {};
    return { ...r, deviceWriteMiB: mib(after.writeSectors - before.writeSectors), ...discarded };
  } catch (e) {
    return {
      ok: false,
      timedOut: false,
      wall: NaN,
      cpu: NaN,
      rssMiB: NaN,
      bytes: NaN,
      output: '',
      note: `error: ${e instanceof Error ? e.message : String(e)}`,
    };
  } finally {
    execFileSync('sync');
  }
}

const setup = setupPeers();
const machine = {
  cores: availableParallelism(),
  cpu: cpuModel(),
  arch: arch(),
  memGiB: Math.round(totalmem() / 2 ** 30),
  kernel: release(),
  node: process.version,
  tools: {
    containerd: version('containerd', ['--version']),
    skopeo: version('skopeo', ['--version']),
    umoci: version('umoci', ['--version']),
    igzip: version('igzip', ['--version']),
    pigz: version('pigz', ['--version']),
    gzip: version('gzip', ['--version']),
    zstd: version('zstd', ['--version']),
    openssl: version('openssl', ['version']),
    curl: version('curl', ['--version']),
    tar: version('tar', ['--version']),
    registry: version('docker-registry', ['--version']),
  },
};
const sizes = sizesFor(SCALE, env);
log(`fastpull peers bench: scale ${SCALE}, ${RUNS} run(s), ${machine.cores} cores (${machine.cpu}); tools: ${setup}`);
log(`sizes: ${JSON.stringify(sizes)}`);
log(
  `trees go to a trash under ${trash.base}, emptied when space runs short, then ${DELETE_COOLDOWN_S} s before the next measured run (BENCH_DELETE_COOLDOWN_S)`,
);

mkdirSync(join(CACHE, 'registry'), { recursive: true });
const registry = await startDistribution({ dir: join(CACHE, 'registry') });
const started = new Date();
// On a shared machine the other tenants' load is part of every figure: it is reported with them.
const loadAtStart = loadavg();
const limits = new Map<string, Limit>();
const rows: Row[] = [];
const memoryRows: Row[] = [];
const faultRows: Row[] = [];
let faultInfo: { image: string; digest: string; afterBytes: number; timeoutS: number; stalled: number[] } | undefined;
const pullImages: ImageMeta[] = [];
const cacheDrops = new Set<string>();
const drop = () => cacheDrops.add(dropCaches());

try {
  const specs = namedImages(sizes);
  const refs = new Map<string, string>();
  const prepare = async (spec: ImageSpec) => {
    const meta = ensureImage(CACHE, spec, log);
    refs.set(meta.name, await pushCached(registry.url, registry.host, meta));
    if (SOCI && meta.compression === 'gzip') log(`${meta.name}: SOCI index with ${await pushSociIndex(registry.url, meta)} zTOCs`);
    return meta;
  };
  if (CONTENDERS.includes('fastpulld:warm')) warmUpRef = refs.get((await prepare(warmUpImage())).name);
  const blobUrl = (image: ImageMeta) => (digest: string) => `${registry.url}/v2/bench/${image.name}/blobs/${digest}`;

  if (SCENARIOS.includes('pull')) {
    for (const name of IMAGES) {
      const make = specs[name];
      if (!make) throw new Error(`BENCH_IMAGES: unknown image ${name} (known: ${Object.keys(specs).join(', ')})`);
      const image = await prepare(make());
      pullImages.push(image);
      const ref = refs.get(image.name)!;
      log(
        `${image.name}: ${image.layers.length} layers, ${f0(image.layers.reduce((a, l) => a + l.size, 0) / MIB)} MiB compressed, ${f0(image.layers.reduce((a, l) => a + l.tarSize, 0) / MIB)} MiB uncompressed, ${image.layers.reduce((a, l) => a + l.files, 0)} files`,
      );
      // Between images: the trash is emptied here if this image's runs would not fit beside it.
      await trash.before(plus(limitNeed(image), times(RUNS * contenders.length, pullNeed(image))), `${image.name}: the limit`);
      const limit = await measureLimit(image, blobUrl(image), join(here, 'peers', 'inflate-child.js'), log, trash, registry.pid);
      cacheDrops.add(limit.cacheDrop);
      limits.set(image.name, limit);
      log(
        `  bound ${f2(limit.bound)} s (${limit.dominant}); terms ${JSON.stringify(Object.fromEntries(Object.entries(limit.terms).map(([k, v]) => [k, Number(v.toFixed(3))])))}`,
      );
      const byName = new Map<string, Row>();
      for (const c of contenders) {
        const why = c.unavailable();
        const row: Row =
          why === undefined ? { image: image.name, contender: c.name, runs: [] } : { image: image.name, contender: c.name, runs: [], unavailable: why };
        byName.set(c.name, row);
        rows.push(row);
      }
      for (let run = 0; run < RUNS; run++) {
        // Rotate the order each run, so no contender always goes first after the registry warmed up.
        const order = contenders.map((_, i) => contenders[(i + run) % contenders.length]!);
        for (const c of order) {
          const row = byName.get(c.name)!;
          if (row.unavailable !== undefined) continue;
          await trash.before(pullNeed(image), `${image.name} run ${run + 1} ${c.name}`);
          drop();
          // The last run of a contender that can writes its trace (the sampling costs next to nothing).
          const trace = c.traces && run === RUNS - 1 ? join(tracesDir, `${image.name}-${slug(c.name)}.trace.json`) : undefined;
          if (trace) mkdirSync(tracesDir, { recursive: true });
          const r = await pullOnce(c, ref, PULL_TIMEOUT_S, trace);
          row.runs.push(r);
          if (trace && r.ok && existsSync(trace)) {
            writeFileSync(trace.replace(/\.trace\.json$/, '.svg'), traceSvg(readTrace(trace), `${c.name}: ${image.name} (bench image, scale ${SCALE})`));
            row.trace = relative(benchDir, trace);
          }
          const device =
            r.deviceWriteMiB === undefined
              ? ''
              : `, device wrote ${f0(r.deviceWriteMiB)} MiB${r.deviceDiscardMiB === undefined ? '' : `, discarded ${f0(r.deviceDiscardMiB)} MiB`}`;
          log(
            `  run ${run + 1}/${RUNS} ${c.name}: ${r.ok ? `${f2(r.wall)} s, CPU ${f2(r.cpu)} s, RSS ${f0(r.rssMiB)} MiB, disk ${f0(r.bytes / MIB)} MiB${device}` : 'FAILED'}${r.note ? ` (${r.note})` : ''}`,
          );
        }
      }
    }
  }

  if (SCENARIOS.includes('memory')) {
    for (const mib of MEM_MIB) {
      const image = await prepare(oneLayerImage(mib));
      const ref = refs.get(image.name)!;
      log(`memory: one layer of ${mib} MiB (${f0(image.layers[0]!.size / MIB)} MiB compressed)`);
      await trash.before(times(contenders.length, pullNeed(image)), `memory, ${mib} MiB`);
      for (const c of contenders) {
        const why = c.unavailable();
        if (why !== undefined) {
          memoryRows.push({ image: image.name, contender: c.name, runs: [], unavailable: why });
          continue;
        }
        await trash.before(pullNeed(image), `memory, ${mib} MiB, ${c.name}`);
        drop();
        const r = await pullOnce(c, ref, PULL_TIMEOUT_S);
        memoryRows.push({ image: image.name, contender: c.name, runs: [r] });
        log(`  ${c.name}: ${r.ok ? `${f2(r.wall)} s, peak RSS ${f0(r.rssMiB)} MiB` : 'FAILED'}${r.note ? ` (${r.note})` : ''}`);
      }
    }
  }

  if (SCENARIOS.includes('fault')) {
    const image = await prepare(mlImage(sizes, 'gzip'));
    const largest = image.layers.reduce((a, l) => (l.size > a.size ? l : a));
    faultInfo = { image: image.name, digest: largest.digest, afterBytes: FAULT_AFTER_BYTES, timeoutS: FAULT_TIMEOUT_S, stalled: [] };
    log(
      `fault: ${image.name}, the first GET of the largest layer (${f0(largest.size / MIB)} MiB) stalls after ${FAULT_AFTER_BYTES} bytes; limit ${FAULT_TIMEOUT_S} s`,
    );
    await trash.before(times(contenders.length, pullNeed(image)), 'fault');
    for (const c of contenders) {
      const why = c.unavailable();
      if (why !== undefined) {
        faultRows.push({ image: image.name, contender: c.name, runs: [], unavailable: why });
        continue;
      }
      await trash.before(pullNeed(image), `fault, ${c.name}`);
      const proxy = await startStallProxy(registry.url, largest.digest, FAULT_AFTER_BYTES);
      try {
        drop();
        const ref = `${proxy.host}/bench/${image.name}:${image.key}`;
        const r = await pullOnce(c, ref, FAULT_TIMEOUT_S);
        faultInfo.stalled.push(proxy.stalled());
        const note = [r.timedOut ? `killed after ${FAULT_TIMEOUT_S} s` : '', r.note ?? '', `connections stalled: ${proxy.stalled()}`]
          .filter(Boolean)
          .join('; ');
        faultRows.push({ image: image.name, contender: c.name, runs: [{ ...r, note }] });
        log(
          `  ${c.name}: ${r.ok ? `${f2(r.wall)} s` : r.timedOut ? `did not finish within ${FAULT_TIMEOUT_S} s` : 'FAILED'} (stalled connections: ${proxy.stalled()})${r.note ? ` (${r.note})` : ''}`,
        );
      } finally {
        await proxy.close();
      }
    }
  }
} finally {
  await registry.stop();
  log(`removing the trash (${trash.size} tree(s))`);
  trash.empty();
}

// ---- report --------------------------------------------------------------------------------------

const loadAtEnd = loadavg();
const la = (l: number[]) => l.map((x) => x.toFixed(2)).join(' ');
const header = [
  `Machine: ${machine.cores} cores, ${machine.cpu}, ${machine.memGiB} GiB, Linux ${machine.kernel}, Node ${machine.node}.`,
  `Load average (1, 5, 15 min): ${la(loadAtStart)} at start, ${la(loadAtEnd)} at end.`,
  `Scale ${SCALE} (BENCH_SCALE), ${RUNS} run(s) per contender (BENCH_RUNS); page cache before each pull: ${[...cacheDrops].join(', ') || 'not touched'}.`,
].join('\n');
const sections: string[] = [header];
if (pullImages.length) {
  sections.push(
    `### Pulls\n\nWall time until the puller exits (pulled and unpacked); CPU = user + system of the puller and its children (and containerd's daemon); peak RSS = largest sum over the puller's processes (daemon included); disk = what the store takes afterwards.\n\n${pullTable(pullImages, limits, rows)}`,
  );
  const traced = rows.filter((r) => r.trace !== undefined);
  if (traced.length)
    sections.push(
      `Traces of each image's last run (open in ui.perfetto.dev; an SVG beside each): ${traced.map((r) => `${r.image} ${r.contender} \`bench/${r.trace}\``).join(', ')}.`,
    );
  sections.push(`### The machine's limit (terms of the bound, ${machine.cores} cores)\n\n${limitTable(pullImages, limits)}`);
  sections.push(`### Inflate, largest layer, single core\n\n${inflateTable(pullImages, limits)}`);
}
if (memoryRows.length) {
  const out = ['| layer | contender | wall s | peak RSS MiB | note |', '|---|---|---|---|---|'];
  for (const r of memoryRows) {
    const x = r.runs[0];
    const note = r.unavailable ?? [x && !x.ok && !x.note ? 'failed' : '', x ? phaseMedians([x]) : '', x?.note ?? ''].filter(Boolean).join('; ');
    out.push(
      `| ${r.image.replace('one-layer-', '')} MiB | ${cell(r.contender)} | ${x?.ok ? f2(x.wall) : '-'} | ${x?.ok ? f0(x.rssMiB) : '-'} | ${cell(note)} |`,
    );
  }
  sections.push(`### Memory: one layer, small vs large\n\n${out.join('\n')}`);
}
if (faultRows.length && faultInfo) {
  const out = ['| contender | time to complete s | note |', '|---|---|---|'];
  for (const r of faultRows) {
    const x = r.runs[0];
    const t = !x ? '-' : x.ok ? f2(x.wall) : x.timedOut ? `did not complete within ${faultInfo.timeoutS}` : 'failed';
    out.push(`| ${cell(r.contender)} | ${t} | ${cell(r.unavailable ?? x?.note ?? '')} |`);
  }
  sections.push(
    `### Fault: one stalled connection\n\nImage ${faultInfo.image}; the first GET of its largest layer sends ${faultInfo.afterBytes} bytes and then nothing, connection held open (loopback proxy in front of the registry).\n\n${out.join('\n')}`,
  );
}
const markdown = sections.join('\n\n');
console.log(markdown);

mkdirSync(resultsDir, { recursive: true });
const stamp = started.toISOString().replace(/[:.]/g, '-');
const json = {
  started: started.toISOString(),
  machine,
  load: { start: loadAtStart, end: loadAtEnd },
  setup,
  params: {
    scale: SCALE,
    runs: RUNS,
    sizes,
    images: IMAGES,
    scenarios: SCENARIOS,
    contenders: CONTENDERS,
    memMiB: MEM_MIB,
    faultAfterBytes: FAULT_AFTER_BYTES,
    faultTimeoutS: FAULT_TIMEOUT_S,
  },
  cacheDrops: [...cacheDrops],
  images: pullImages.map((i) => ({
    name: i.name,
    compression: i.compression,
    layers: i.layers.map((l) => ({ name: l.name, digest: l.digest, size: l.size, tarSize: l.tarSize, files: l.files })),
  })),
  limits: Object.fromEntries(limits),
  pulls: rows.map((r) => ({ ...r, summary: r.unavailable === undefined ? summarize(r) : undefined, runs: r.runs.map(({ output: _o, ...x }) => x) })),
  memory: memoryRows.map((r) => ({ ...r, runs: r.runs.map(({ output: _o, ...x }) => x) })),
  fault: faultInfo ? { ...faultInfo, rows: faultRows.map((r) => ({ ...r, runs: r.runs.map(({ output: _o, ...x }) => x) })) } : undefined,
};
const jsonPath = join(resultsDir, `peers-${stamp}.json`);
writeFileSync(jsonPath, `${JSON.stringify(json, null, 1)}\n`);
writeFileSync(join(resultsDir, 'peers-latest.md'), `${markdown}\n`);
log(`\nwrote ${jsonPath} and bench/results/peers-latest.md`);
