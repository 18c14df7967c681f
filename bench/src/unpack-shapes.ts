// Two questions about unpacking alone (blobs already on disk): (1) a layer of many small files:
// fastpull's unpack against GNU `tar -xzf` of the same blob; (2) an image of several layers unpacked
// at once: the total against the largest layer alone and against the layers one after the other.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { UnpackPool } from '@fastpull/core/unpack';
import { buildLayer, type BuiltLayer, type LayerEntry } from '@fastpull/core/testing';
import { libraryFiles, median } from './lib.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const FILES = Number(process.env.BENCH_FILES ?? 30_000);

const work = mkdtempSync(join(tmpdir(), 'fastpull-unpack-'));
const pool = new UnpackPool();

async function timeIt(fn: () => unknown): Promise<number> {
  execFileSync('sync');
  const t = performance.now();
  await fn();
  return (performance.now() - t) / 1000;
}

function save(name: string, layer: BuiltLayer): string {
  const p = join(work, name);
  writeFileSync(p, layer.blob);
  return p;
}

function fresh(name: string): string {
  const d = join(work, name);
  rmSync(d, { recursive: true, force: true });
  mkdirSync(d, { recursive: true });
  return d;
}

try {
  // (1) many small files
  const small: LayerEntry[] = Array.from({ length: FILES }, (_, i) => ({
    type: 'file',
    path: `usr/share/pkg${i % 200}/f${i}.txt`,
    content: `${'line of text for a small file\n'.repeat(1 + (i % 100))}`,
  }));
  const smallLayer = await buildLayer(small, { compression: 'gzip' });
  const smallBlob = save('small.tgz', smallLayer);
  const rows: string[] = [];
  const fp: number[] = [];
  const gt: number[] = [];
  for (let r = 0; r < RUNS; r++) {
    const d1 = fresh('s1');
    fp.push(await timeIt(() => pool.run({ blobPath: smallBlob, mediaType: smallLayer.mediaType, dest: d1 })));
    const d2 = fresh('s2');
    gt.push(await timeIt(() => execFileSync('tar', ['-xzf', smallBlob, '-C', d2])));
  }
  rows.push(
    `| ${FILES} small files (${(smallLayer.tar.length / 2 ** 20).toFixed(0)} MiB) | fastpull unpack ${median(fp).toFixed(2)} s | GNU tar -xzf ${median(gt).toFixed(2)} s | ${(median(gt) / median(fp)).toFixed(2)}x tar's speed |`,
  );

  // (2) several layers at once
  const sizes = [192, 96, 48, 24, 12, 6];
  const layers = await Promise.all(sizes.map((mib, i) => buildLayer(libraryFiles(mib * 2 ** 20, `opt/l${i}`), { compression: 'gzip' })));
  const blobs = layers.map((l, i) => save(`l${i}.tgz`, l));
  const all: number[] = [];
  const largest: number[] = [];
  const seq: number[] = [];
  for (let r = 0; r < RUNS; r++) {
    all.push(
      await timeIt(() =>
        Promise.all(layers.map((l, i) => pool.run({ blobPath: blobs[i]!, mediaType: l.mediaType, dest: fresh(`a${i}`) }, { priority: l.size }))),
      ),
    );
    largest.push(await timeIt(() => pool.run({ blobPath: blobs[0]!, mediaType: layers[0]!.mediaType, dest: fresh('big') })));
    seq.push(
      await timeIt(async () => {
        for (let i = 0; i < layers.length; i++) await pool.run({ blobPath: blobs[i]!, mediaType: layers[i]!.mediaType, dest: fresh(`q${i}`) });
      }),
    );
  }
  rows.push(
    `| ${layers.length} layers (${sizes.join('/')} MiB uncompressed) | all at once ${median(all).toFixed(2)} s | largest alone ${median(largest).toFixed(2)} s, one after another ${median(seq).toFixed(2)} s | ${(median(all) / median(largest)).toFixed(2)}x the largest |`,
  );
  console.log(`| case | fastpull | reference | ratio |\n|---|---|---|---|\n${rows.join('\n')}`);
} finally {
  await pool.close();
  rmSync(work, { recursive: true, force: true });
}
