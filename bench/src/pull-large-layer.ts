// One question: how long does fastpull take to pull and unpack an image with one large layer, against
// the same work done by the machine's own tools (curl to disk, then gzip -dc | tar -x), and how much
// memory does it hold while doing it?
//
// Generates an image (one layer of BENCH_MIB MiB of library-like files), pushes it to the CNCF
// distribution registry on loopback, then runs each contender BENCH_RUNS times into a fresh
// directory and prints the median wall time and peak RSS.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildImage, pushImage, startDistribution } from '@fastpull/core/testing';
import { cli, libraryFiles, Results, timed } from './lib.js';

const MIB = Number(process.env.BENCH_MIB ?? 512);
const RUNS = Number(process.env.BENCH_RUNS ?? 3);

const work = mkdtempSync(join(tmpdir(), 'fastpull-bench-'));
const registry = await startDistribution({ dir: join(work, 'registry') });
try {
  const image = await buildImage({ layers: [libraryFiles(MIB * 1024 * 1024), [{ type: 'file', path: 'etc/app.conf', content: 'x=1\n' }]] });
  const big = image.layers[0]!;
  await pushImage(registry.url, 'bench/large', '1', image);
  const ref = `${registry.host}/bench/large:1`;
  const blobUrl = `${registry.url}/v2/bench/large/blobs/${big.digest}`;
  console.log(`image: 2 layers, largest ${(big.size / 2 ** 20).toFixed(0)} MiB compressed, ${(big.tar.length / 2 ** 20).toFixed(0)} MiB uncompressed`);

  const results = new Results();
  for (let run = 0; run < RUNS; run++) {
    const root = join(work, `root-${run}`);
    results.record('fastpull pull (CLI)', timed(process.execPath, [cli, 'pull', '--quiet', '--root', root, ref]));
    const dir = join(work, `tools-${run}`);
    mkdirSync(join(dir, 'x'), { recursive: true });
    const curl = timed('curl', ['-sSf', '-o', join(dir, 'blob'), blobUrl]);
    const gz = timed('sh', ['-c', 'gzip -dc "$0" | tar -x -C "$1"', join(dir, 'blob'), join(dir, 'x')]);
    results.record('curl, then gzip -dc | tar -x', { wall: curl.wall + gz.wall, rssMiB: Math.max(curl.rssMiB, gz.rssMiB) });
    rmSync(join(dir, 'x'), { recursive: true });
    mkdirSync(join(dir, 'x'));
    const ig = timed('sh', ['-c', 'igzip -dc "$0" | tar -x -C "$1"', join(dir, 'blob'), join(dir, 'x')]);
    results.record('curl, then igzip -dc | tar -x', { wall: curl.wall + ig.wall, rssMiB: Math.max(curl.rssMiB, ig.rssMiB) });
    rmSync(root, { recursive: true, force: true });
    rmSync(dir, { recursive: true, force: true });
    execFileSync('sync');
  }
  results.print('fastpull pull (CLI)');
} finally {
  await registry.stop();
  rmSync(work, { recursive: true, force: true });
}
