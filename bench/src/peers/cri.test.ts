// The peers configured for the fastest pull (src/peers/tuned.ts), each pulling two small bench images
// from a distribution registry on loopback through a containerd 2.2 of its own: the image is there,
// its top snapshot mounted holds exactly the files of its layers, and each peer runs as configured:
// the SOCI snapshotter pulled every layer in its parallel mode (its log says so, and containerd's
// content store holds no layer), containerd 2.2 has the chunked fetch and parallel unpack on (its
// config dump says so). Needs root (containerd, overlay mounts) and the registry, and fails without
// the peers scripts/peers.sh builds.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { lacksRegistry, lacksRoot, startDistribution, type DistributionRegistry } from '@fastpull/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { criContender, SOCI_PARALLEL_LINE, type CriOptions, type CriSnapshotter, type PulledImage } from './cri.js';
import { ensureImage, manyLayersImage, modelImage, pushCached, sizesFor, type ImageMeta } from './images.js';
import { removeTimeFiles } from './measure.js';
import { CONTAINERD_TUNED, SOCI_PARALLEL } from './tuned.js';

const repo = resolve(import.meta.dirname, '..', '..', '..');

const run = (cmd: string, args: string[], env?: NodeJS.ProcessEnv) => {
  const r = spawnSync(cmd, args, { encoding: 'utf8', env: env ?? process.env, timeout: 60_000 });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')}: exit ${r.status}: ${r.stderr}${r.error?.message ?? ''}`);
  return r.stdout;
};

/** containerd's chain ID of the image's layers: the name of its top committed snapshot. */
function chainId(image: ImageMeta): string {
  return image.layers.map((l) => l.diffID).reduce((parent, diff) => `sha256:${createHash('sha256').update(`${parent} ${diff}`).digest('hex')}`);
}

/** The image's layers extracted one over the other with GNU tar (the bench images have no whiteouts). */
function reference(image: ImageMeta, dir: string): void {
  mkdirSync(dir);
  for (const l of image.layers) run('tar', [image.compression === 'gzip' ? '-xzf' : '-xf', join(image.dir, l.file), '-C', dir]);
}

/** Checks what the pull left: the image, its top snapshot's files against the layers' own, its layers' blobs. */
function checkPulled(image: ImageMeta, p: PulledImage, work: string, layersInContent: boolean): void {
  const ctr = (...args: string[]) => run(p.ctr, ['--address', p.socket, '--namespace', p.namespace, ...args], p.env);
  expect(ctr('images', 'ls', '-q').split('\n')).toContain(p.ref);
  const content = ctr('content', 'ls', '-q');
  for (const l of image.layers) expect(content.includes(l.digest), `${l.digest} in containerd's content store`).toBe(layersInContent);
  // ctr prints containerd's mount.Mount as JSON: Type, Source, Options.
  const mounts = JSON.parse(ctr('snapshots', '--snapshotter', p.snapshotter, 'view', '--mounts', 'bench-check', chainId(image))) as {
    Type: string;
    Source: string;
    Options?: string[];
  }[];
  const target = join(work, `mnt-${p.snapshotter}`);
  const ref = join(work, `ref-${p.snapshotter}`);
  mkdirSync(target);
  reference(image, ref);
  expect(mounts).toHaveLength(1);
  const m = mounts[0]!;
  expect(m.Type, JSON.stringify(m)).toMatch(/^(overlay|bind)$/);
  run('mount', [...(m.Type === 'bind' ? [] : ['-t', m.Type]), ...(m.Options?.length ? ['-o', m.Options.join(',')] : []), m.Source, target]);
  try {
    const diff = spawnSync('diff', ['-r', '--no-dereference', ref, target], { encoding: 'utf8' });
    expect(`${diff.stdout}${diff.stderr}`).toBe('');
    expect(diff.status).toBe(0);
  } finally {
    // Neither may hide what failed above. containerd's garbage collector may already have taken the
    // view (ctr made it with no lease); its mount reads only the image's committed snapshots.
    spawnSync('umount', [target]);
    spawnSync(p.ctr, ['--address', p.socket, '--namespace', p.namespace, 'snapshots', '--snapshotter', p.snapshotter, 'rm', 'bench-check'], { env: p.env });
  }
}

describe.skipIf(lacksRoot() || lacksRegistry())('the tuned peers on containerd 2.2 pull the bench images right', () => {
  let registry: DistributionRegistry;
  let work: string;
  const images: { meta: ImageMeta; ref: string }[] = [];

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'fastpull-bench-cri-'));
    registry = await startDistribution({ dir: join(work, 'registry') });
    const sizes = sizesFor(0.1, { BENCH_LAYERS: '3', BENCH_LAYER_MIB: '1' });
    for (const spec of [manyLayersImage(sizes), modelImage(4)]) {
      const meta = ensureImage(join(work, 'cache'), spec, () => {});
      images.push({ meta, ref: await pushCached(registry.url, registry.host, meta) });
    }
  });

  afterAll(async () => {
    await registry?.stop();
    rmSync(work, { recursive: true, force: true });
    removeTimeFiles();
  });

  const cases: { name: string; snapshotter: CriSnapshotter; options: CriOptions; check: (p: PulledImage, image: ImageMeta) => void }[] = [
    { name: 'soci parallel (CRI)', snapshotter: 'soci', options: { client: 'cri' }, check: (p, image) => sociRan(p, image) },
    { name: 'soci parallel (ctr)', snapshotter: 'soci', options: { client: 'ctr' }, check: (p, image) => sociRan(p, image) },
    { name: 'containerd 2.2 (CRI)', snapshotter: 'overlayfs', options: { client: 'cri', tuned: true }, check: (p) => tunedRan(p) },
    { name: 'containerd 2.2 (ctr)', snapshotter: 'overlayfs', options: { client: 'ctr', tuned: true }, check: (p) => tunedRan(p) },
  ];

  it.each(cases)(
    '$name',
    async ({ name, snapshotter, options, check }) => {
      for (const { meta, ref } of images) {
        let checked = false;
        const dir = join(work, `${name.replace(/[^a-z0-9]+/gi, '-')}-${meta.name}`);
        mkdirSync(dir);
        const contender = criContender(repo, snapshotter, {
          ...options,
          release: '2.2',
          inspect: (p) => {
            checkPulled(meta, p, dir, snapshotter !== 'soci');
            check(p, meta);
            checked = true;
          },
        });
        expect(contender.name).toBe(name);
        expect(contender.unavailable()).toBeUndefined();
        const trace = join(dir, 'pull.trace.json');
        const r = await contender.pull(ref, dir, 120_000, trace);
        expect(r.note, `${name}: ${meta.name}: ${r.output.slice(-600)}`).not.toMatch(/failed|timed out/);
        expect(r.ok).toBe(true);
        expect(checked).toBe(true);
        expect(r.cpu).toBeGreaterThan(0);
        expect(r.daemonRssMiB).toBeGreaterThan(0);
        // A sampled trace of the pull's processes, containerd's and the snapshotter's among them.
        const doc = JSON.parse(run('cat', [trace])) as { traceEvents: { name: string; ph: string }[] };
        const counters = new Set(doc.traceEvents.filter((e) => e.ph === 'C').map((e) => e.name));
        expect(counters).toContain('rss: containerd');
        if (snapshotter === 'soci') expect(counters).toContain('rss: soci-snapshotter-grpc');
      }
    },
    300_000,
  );
});

function sociRan(p: PulledImage, image: ImageMeta): void {
  // One line per layer it prepared by pulling the layer itself, in parallel mode.
  expect(p.logs.snapshotter.split('\n').filter((l) => l.includes(SOCI_PARALLEL_LINE))).toHaveLength(image.layers.length);
  expect(SOCI_PARALLEL.enable).toBe(true);
}

function tunedRan(p: PulledImage): void {
  const dump = run(p.ctr.replace(/ctr$/, 'containerd'), ['--config', p.config, 'config', 'dump'], p.env);
  const table = dump.slice(dump.indexOf("[plugins.'io.containerd.transfer.v1.local']"));
  expect(table).toMatch(new RegExp(`concurrent_layer_fetch_buffer = ${CONTAINERD_TUNED.concurrent_layer_fetch_buffer}\\n`));
  expect(table).toMatch(new RegExp(`max_concurrent_downloads = ${CONTAINERD_TUNED.max_concurrent_downloads}\\n`));
  expect(table).toMatch(new RegExp(`max_concurrent_unpacks = ${CONTAINERD_TUNED.max_concurrent_unpacks}\\n`));
}
