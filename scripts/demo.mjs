// The demo: a sample multi-layer image (generated from a fixed seed) is pushed to a real CNCF
// distribution registry on loopback, then pulled and unpacked by the fastpull CLI.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pushImage, sampleImage, startDistribution } from '@fastpull/core/testing';

const repo = resolve(import.meta.dirname, '..');
const root = join(repo, '.fastpull-demo', 'root');
const cli = join(repo, 'packages', 'cli', 'dist', 'bin.js');
const fastpull = (...args) => {
  const r = spawnSync(process.execPath, [cli, ...args], { stdio: 'inherit' });
  if (r.status !== 0) throw new Error(`fastpull ${args.join(' ')} exited with ${r.status}`);
};
const capture = (...args) => execFileSync(process.execPath, [cli, ...args], { encoding: 'utf8' });

const work = mkdtempSync(join(tmpdir(), 'fastpull-demo-'));
const registry = await startDistribution({ dir: work });
try {
  const image = await sampleImage(1);
  const ref = `${registry.host}/sample/app:1.0`;
  await pushImage(registry.url, 'sample/app', '1.0', image);
  console.log(
    `demo: pushed ${ref} (${image.layers.length} layers, ${image.layers.reduce((s, l) => s + l.size, 0)} bytes) to the distribution registry on ${registry.url}\n`,
  );

  console.log(`$ fastpull pull --root ${root} --plain-http ${ref}`);
  fastpull('pull', '--root', root, '--plain-http', ref);
  console.log(`\n$ fastpull images --root ${root}`);
  fastpull('images', '--root', root);
  console.log(`\n$ fastpull mounts --root ${root} ${ref}`);
  const mountLine = capture('mounts', '--root', root, ref).trim();
  console.log(mountLine);

  const merged = join(repo, '.fastpull-demo', 'merged');
  mkdirSync(merged, { recursive: true });
  const m = /^-t (\S+) (\S+) -o (\S+)$/.exec(mountLine);
  if (process.getuid?.() === 0 && m) {
    try {
      execFileSync('mount', ['-t', m[1], m[2], '-o', m[3], merged], { stdio: 'pipe' });
      try {
        console.log(`\nmounted at ${merged}:`);
        console.log(execFileSync('ls', ['-la', merged], { encoding: 'utf8' }));
      } finally {
        execFileSync('umount', [merged]);
      }
    } catch (e) {
      console.log(`\n(not mounted: ${String(e.stderr || e.message).trim()})`);
    }
  } else {
    console.log('\n(run as root to see the image mounted with overlayfs)');
  }
  console.log(`\ndemo: the image landed in ${root}: snapshots under ${join(root, 'snapshots', 'committed')}, blobs under ${join(root, 'content', 'blobs')}`);
} finally {
  await registry.stop();
  rmSync(work, { recursive: true, force: true });
}
