// One question: do two layers really unpack on two cores? An image of two equal layers, pulled by
// fastpull with worker threads and without, against two `gzip -dc | tar -x` processes run one after
// the other and at the same time, on blobs already on disk (so only unpacking is compared).
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildImage, pushImage, startDistribution } from '@fastpull/core/testing';
import { cli, libraryFiles, Results, timed } from './lib.js';

const MIB = Number(process.env.BENCH_MIB ?? 256);
const RUNS = Number(process.env.BENCH_RUNS ?? 3);

const work = mkdtempSync(join(tmpdir(), 'fastpull-bench2-'));
const registry = await startDistribution({ dir: join(work, 'registry') });
try {
  const image = await buildImage({ layers: [libraryFiles(MIB * 2 ** 20, 'opt/a'), libraryFiles(MIB * 2 ** 20, 'opt/b')] });
  await pushImage(registry.url, 'bench/two', '1', image);
  const ref = `${registry.host}/bench/two:1`;
  const blobs = image.layers.map((l, i) => {
    const p = join(work, `blob${i}`);
    writeFileSync(p, l.blob);
    return p;
  });
  console.log(
    `image: 2 layers of ${(image.layers[0]!.size / 2 ** 20).toFixed(0)} MiB compressed, ${(image.layers[0]!.tar.length / 2 ** 20).toFixed(0)} MiB uncompressed each`,
  );

  const results = new Results();
  const fresh = (name: string) => {
    const d = join(work, name);
    rmSync(d, { recursive: true, force: true });
    mkdirSync(join(d, 'a'), { recursive: true });
    mkdirSync(join(d, 'b'), { recursive: true });
    return d;
  };
  const untar = (tool: string) => `${tool} -dc "$0" | tar -x -C "$2/a"`;
  for (let run = 0; run < RUNS; run++) {
    for (const [name, env] of [
      ['fastpull, worker threads', {}],
      ['fastpull, main thread only', { FASTPULL_THREADS: '0' }],
      ['fastpull, worker threads, node:zlib', { FASTPULL_INFLATER: 'zlib' }],
    ] as const) {
      const root = join(work, 'root');
      rmSync(root, { recursive: true, force: true });
      results.record(name, timed(process.execPath, [cli, 'pull', '--quiet', '--root', root, ref], { ...process.env, ...env }));
      execFileSync('sync');
    }
    for (const tool of ['gzip', 'igzip']) {
      let d = fresh('seq');
      results.record(
        `2x ${tool} -dc | tar -x, one after the other`,
        timed('sh', ['-c', `${untar(tool)} && ${untar(tool).replace('$0', '$1').replace('/a', '/b')}`, blobs[0]!, blobs[1]!, d]),
      );
      d = fresh('par');
      results.record(
        `2x ${tool} -dc | tar -x, at the same time`,
        timed('sh', ['-c', `(${untar(tool)}) & (${untar(tool).replace('$0', '$1').replace('/a', '/b')}) & wait`, blobs[0]!, blobs[1]!, d]),
      );
      execFileSync('sync');
    }
  }
  results.print('fastpull, worker threads');
} finally {
  await registry.stop();
  rmSync(work, { recursive: true, force: true });
}
