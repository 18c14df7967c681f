// Packs @fastpull/core, @fastpull/daemon and @fastpull/cli into installable tarballs in DIR (each
// package's prepack compiles it first; pnpm turns workspace:* into the packages' versions), checks
// that every dependency names a real version, and prints the tarballs' paths, one a line.
// Usage: node scripts/pack.mjs DIR   (then: npm install DIR/*.tgz, or npm install -g DIR/*.tgz)
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';

const PACKAGES = ['core', 'daemon', 'cli'];
const root = resolve(import.meta.dirname, '..');
const dest = process.argv[2];
if (!dest) {
  console.error('usage: node scripts/pack.mjs DIR');
  process.exit(2);
}
const dir = resolve(dest);
mkdirSync(dir, { recursive: true });

const tarballs = [];
for (const name of PACKAGES) {
  const before = new Set(readdirSync(dir));
  execFileSync('pnpm', ['pack', '--pack-destination', dir], { cwd: join(root, 'packages', name), stdio: ['ignore', 'ignore', 'inherit'] });
  const made = readdirSync(dir).filter((f) => f.startsWith(`fastpull-${name}-`) && f.endsWith('.tgz'));
  const file = made.find((f) => !before.has(f)) ?? made.sort().at(-1);
  if (file === undefined) throw new Error(`pnpm pack made no tarball for @fastpull/${name} in ${dir}`);
  const path = join(dir, file);
  const manifest = JSON.parse(execFileSync('tar', ['-xzOf', path, 'package/package.json'], { encoding: 'utf8' }));
  for (const field of ['dependencies', 'peerDependencies', 'optionalDependencies']) {
    for (const [dep, range] of Object.entries(manifest[field] ?? {})) {
      if (String(range).startsWith('workspace:')) throw new Error(`${file}: ${field}.${dep} is still ${range}`);
    }
  }
  tarballs.push(path);
}
console.log(tarballs.join('\n'));
