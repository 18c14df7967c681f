// One question: what would it cost to make a layer's extracted files durable before its snapshot is
// committed (today they are left to the kernel's writeback: safe against kill -9, not power loss)?
// On an image of one large layer the commit is the pull's last step, so each variant is measured as
// the pull followed at once by the flush: one syncfs(2) of the store's filesystem (`sync -f`), or an
// fsync(2) of every extracted file and directory (`find | xargs sync`, one after another). Each run
// starts with nothing dirty (`sync`), into a fresh store.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildImage, pushImage, startDistribution } from '@fastpull/core/testing';
import { cli, libraryFiles, median } from './lib.js';

const MIB = Number(process.env.BENCH_MIB ?? 512);
const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const work = mkdtempSync(join(tmpdir(), 'fastpull-sync-'));
const registry = await startDistribution({ dir: join(work, 'registry') });
const since = (t: bigint) => Number(process.hrtime.bigint() - t) / 1e9;
try {
  const image = await buildImage({ layers: [libraryFiles(MIB * 1024 * 1024), [{ type: 'file', path: 'etc/app.conf', content: 'x=1\n' }]] });
  const big = image.layers[0]!;
  await pushImage(registry.url, 'bench/large', '1', image);
  const ref = `${registry.host}/bench/large:1`;
  console.log(`image: 2 layers, largest ${(big.size / 2 ** 20).toFixed(0)} MiB compressed, ${(big.tar.length / 2 ** 20).toFixed(0)} MiB uncompressed, ${big.entries.length} files`);
  const rows = new Map<string, number[]>();
  const rec = (k: string, v: number) => rows.set(k, [...(rows.get(k) ?? []), v]);
  for (let run = 0; run < RUNS; run++) {
    for (const flush of ['none', 'syncfs', 'fsync each file'] as const) {
      const root = join(work, `root-${run}`);
      execFileSync('sync');
      const t = process.hrtime.bigint();
      const r = spawnSync(process.execPath, [cli, 'pull', '--quiet', '--root', root, ref], { encoding: 'utf8' });
      if (r.status !== 0) throw new Error(r.stderr);
      const pulled = since(t);
      const tf = process.hrtime.bigint();
      if (flush === 'syncfs') execFileSync('sync', ['-f', root]);
      if (flush === 'fsync each file') execFileSync('sh', ['-c', 'find "$0/snapshots/committed" -print0 | xargs -0 sync --', root]);
      if (flush !== 'none') rec(`${flush}: the flush alone`, since(tf));
      rec(`pull, then ${flush}`, since(t));
      if (flush === 'none') rec('pull', pulled);
      rmSync(root, { recursive: true, force: true });
    }
  }
  console.log('\n| variant | median s | runs s |\n|---|---|---|');
  for (const [k, v] of rows) if (k !== 'pull, then none') console.log(`| ${k} | ${median(v).toFixed(2)} | ${v.map((x) => x.toFixed(2)).join(', ')} |`);
} finally {
  await registry.stop();
  rmSync(work, { recursive: true, force: true });
}
