// What making snapshots durable before their commit costs a pull, and which flush does it cheapest.
// fastpull flushes each snapshot before the rename that commits it (snapshots/durable.ts); the
// benchmark-only FASTPULL_SYNC_METHOD picks the way, against `--no-sync`:
//   syncfs   write-back started while extracting (sync_file_range of large files in 8 MiB steps, a
//            syncfs not waited for after each 8 MiB a layer writes), then one syncfs before the
//            commit (the default)
//   fsync    an fsync of every file and directory (what runs without the native addon)
// Earlier variants that lost (the syncfs alone, write-back started for every file as it is closed,
// large files only) are described in bench/README.md.
// Images: the peers bench's ML-shaped image and its many-small-files image (BENCH_IMAGES), generated
// and cached as there. Each run pulls with every variant in a rotating order, each into a fresh store
// after `sync` and a page-cache drop (so no variant pays for another's dirty pages); the machine is
// shared, so the figure that counts is each variant's ratio to `--no-sync` within the same run. From
// the pull's own timings (`--json`) it also reports the commit step of the largest layer, which
// holds its flush: that layer commits last, so its flush is what the pull waits for at the end.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { startDistribution } from '@fastpull/core/testing';
import { ensureImage, manyFilesImage, mlImage, pushCached, sizesFor, type ImageSpec } from './peers/images.js';
import { dropCaches, measure } from './peers/measure.js';
import { cli } from './lib.js';

const env = process.env;
const SCALE = Number(env.BENCH_SCALE ?? 0.25);
const RUNS = Math.max(1, Number(env.BENCH_RUNS ?? 3));
const IMAGES = (env.BENCH_IMAGES ?? 'ml,many-files').split(',').filter(Boolean);
const VARIANTS = (env.BENCH_VARIANTS ?? 'off,syncfs,fsync').split(',').filter(Boolean);
const CACHE = resolve(env.BENCH_CACHE ?? join(import.meta.dirname, '..', '.cache'));
const MIB = 1024 * 1024;
const log = (s: string) => process.stderr.write(`${s}\n`);

const sizes = sizesFor(SCALE, env);
const specs: Record<string, () => ImageSpec> = { ml: () => mlImage(sizes, 'gzip'), 'many-files': () => manyFilesImage(sizes) };
mkdirSync(join(CACHE, 'registry'), { recursive: true });
const registry = await startDistribution({ dir: join(CACHE, 'registry') });
const work = mkdtempSync(join(tmpdir(), 'fastpull-sync-'));
const median = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const f2 = (x: number) => x.toFixed(2);
const cacheDrops = new Set<string>();
try {
  const out: string[] = [];
  for (const name of IMAGES) {
    const make = specs[name];
    if (!make) throw new Error(`BENCH_IMAGES: unknown image ${name} (known: ${Object.keys(specs).join(', ')})`);
    const image = ensureImage(CACHE, make(), log);
    const ref = await pushCached(registry.url, registry.host, image);
    const files = image.layers.reduce((a, l) => a + l.files, 0);
    const desc = `${name}: ${image.layers.length} layers, ${(image.layers.reduce((a, l) => a + l.size, 0) / MIB).toFixed(0)} MiB compressed, ${(image.layers.reduce((a, l) => a + l.tarSize, 0) / MIB).toFixed(0)} MiB uncompressed, ${files} files`;
    log(desc);
    const largest = image.layers.reduce((best, l, i) => (l.tarSize > image.layers[best]!.tarSize ? i : best), 0);
    const commits = new Map<string, number[]>(VARIANTS.map((v) => [v, []]));
    const unpacks = new Map<string, number[]>(VARIANTS.map((v) => [v, []]));
    const walls = new Map<string, number[]>(VARIANTS.map((v) => [v, []]));
    const cpus = new Map<string, number[]>(VARIANTS.map((v) => [v, []]));
    const ratios = new Map<string, number[]>(VARIANTS.map((v) => [v, []]));
    for (let run = 0; run < RUNS; run++) {
      const order = VARIANTS.map((_, i) => VARIANTS[(i + run) % VARIANTS.length]!);
      const thisRun = new Map<string, number>();
      for (const variant of order) {
        const root = join(work, `root-${variant}`);
        cacheDrops.add(dropCaches());
        const args = [cli, 'pull', '--json', '--plain-http', '--root', root, ...(variant === 'off' ? ['--no-sync'] : []), ref];
        const m = await measure(process.execPath, args, { env: { ...env, ...(variant === 'off' ? {} : { FASTPULL_SYNC_METHOD: variant }) } });
        if (!m.ok) throw new Error(`${variant}: pull failed: ${m.output.slice(-2000)}`);
        rmSync(root, { recursive: true, force: true });
        const done = m.output.split('\n').find((l) => l.startsWith('{"type":"done"'));
        const layer = done ? (JSON.parse(done) as { timings: { layers: { commitMs: number; unpackMs: number }[] } }).timings.layers[largest] : undefined;
        if (!layer) throw new Error(`${variant}: no timings in the output: ${m.output.slice(-2000)}`);
        commits.get(variant)!.push(layer.commitMs / 1000);
        unpacks.get(variant)!.push(layer.unpackMs / 1000);
        walls.get(variant)!.push(m.wall);
        cpus.get(variant)!.push(m.cpu);
        thisRun.set(variant, m.wall);
        log(
          `  run ${run + 1}/${RUNS} ${variant}: ${f2(m.wall)} s, CPU ${f2(m.cpu)} s; largest layer: unpack ${f2(layer.unpackMs / 1000)} s, commit ${f2(layer.commitMs / 1000)} s`,
        );
      }
      const base = thisRun.get('off');
      if (base !== undefined) for (const [v, w] of thisRun) ratios.get(v)!.push(w / base);
    }
    out.push(
      `\n${desc}\n\n| variant | wall s (median) | min-max s | CPU s | vs --no-sync, same run (median) | min-max | largest layer: unpack s | commit s (flush included) | min-max s |\n|---|---|---|---|---|---|---|---|---|`,
    );
    for (const v of VARIANTS) {
      const w = walls.get(v)!;
      const r = ratios.get(v)!;
      const c = commits.get(v)!;
      out.push(
        `| ${v} | ${f2(median(w))} | ${f2(Math.min(...w))}-${f2(Math.max(...w))} | ${f2(median(cpus.get(v)!))} | ${r.length ? `${f2(median(r))}x` : '-'} | ${r.length ? `${f2(Math.min(...r))}-${f2(Math.max(...r))}` : '-'} | ${f2(median(unpacks.get(v)!))} | ${f2(median(c))} | ${f2(Math.min(...c))}-${f2(Math.max(...c))} |`,
      );
    }
  }
  console.log(`scale ${SCALE}, ${RUNS} runs, page cache ${[...cacheDrops].join(', ')} before each pull`);
  console.log(out.join('\n'));
} finally {
  await registry.stop();
  rmSync(work, { recursive: true, force: true });
}
