// One question: how long does fastpull take to pull and unpack an image with one large layer, against
// the same work done by the machine's own tools (curl to disk, then gzip -dc | tar -x), and how much
// memory does it hold while doing it?
//
// Generates an image (one layer of BENCH_MIB MiB of library-like files: a third random, a third text,
// a third sparse), pushes it to the CNCF distribution registry on loopback, then runs each contender
// BENCH_RUNS times into a fresh directory and prints the median wall time and peak RSS.
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { buildImage, pushImage, startDistribution, type LayerEntry } from '@fastpull/core/testing';

const MIB = Number(process.env.BENCH_MIB ?? 512);
const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const repo = resolve(import.meta.dirname, '..', '..');
const cli = join(repo, 'packages', 'cli', 'dist', 'bin.js');

function files(total: number): LayerEntry[] {
  const out: LayerEntry[] = [];
  const text = Buffer.from('static int resolve_symbol(const char *name, void **out) { return lookup(table, name, out); }\n'.repeat(4096));
  let size = 0;
  for (let i = 0; size < total; i++) {
    const len = 4096 + ((i * 7919) % (1024 * 1024));
    let content: Buffer;
    if (i % 3 === 0) content = randomBytes(len);
    else if (i % 3 === 1) content = Buffer.concat(Array.from({ length: Math.ceil(len / text.length) }, () => text)).subarray(0, len);
    else {
      content = Buffer.alloc(len);
      for (let j = 0; j < len; j += 512) content[j] = j & 0xff;
    }
    out.push({ type: 'file', path: `usr/lib/pkg${i % 37}/lib${i}.so`, content, mode: 0o755 });
    size += len;
  }
  return out;
}

/** Runs a shell-free command under /usr/bin/time; returns wall seconds and peak RSS in MiB. */
function timed(cmd: string, args: string[], env: NodeJS.ProcessEnv = process.env): { wall: number; rssMiB: number } {
  const r = spawnSync('/usr/bin/time', ['-f', '%e %M', cmd, ...args], { encoding: 'utf8', env, maxBuffer: 1 << 26 });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed: ${r.stderr}`);
  const [wall, kib] = r.stderr.trim().split('\n').at(-1)!.split(' ').map(Number);
  return { wall: wall!, rssMiB: kib! / 1024 };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

const work = mkdtempSync(join(tmpdir(), 'fastpull-bench-'));
const registry = await startDistribution({ dir: join(work, 'registry') });
try {
  const image = await buildImage({ layers: [files(MIB * 1024 * 1024), [{ type: 'file', path: 'etc/app.conf', content: 'x=1\n' }]] });
  const big = image.layers[0]!;
  await pushImage(registry.url, 'bench/large', '1', image);
  const ref = `${registry.host}/bench/large:1`;
  const blobUrl = `${registry.url}/v2/bench/large/blobs/${big.digest}`;
  console.log(`image: 2 layers, largest ${(big.size / 2 ** 20).toFixed(0)} MiB compressed, ${(big.tar.length / 2 ** 20).toFixed(0)} MiB uncompressed`);

  const results: Record<string, { wall: number[]; rss: number[] }> = {};
  const record = (name: string, r: { wall: number; rssMiB: number }) => {
    (results[name] ??= { wall: [], rss: [] }).wall.push(r.wall);
    results[name].rss.push(r.rssMiB);
  };
  for (let run = 0; run < RUNS; run++) {
    const root = join(work, `root-${run}`);
    record('fastpull pull (CLI)', timed(process.execPath, [cli, 'pull', '--quiet', '--root', root, ref]));
    const dir = join(work, `tools-${run}`);
    mkdirSync(join(dir, 'x'), { recursive: true });
    const curl = timed('curl', ['-sSf', '-o', join(dir, 'blob'), blobUrl]);
    const gz = timed('sh', ['-c', `gzip -dc "$0" | tar -x -C "$1"`, join(dir, 'blob'), join(dir, 'x')]);
    record('curl, then gzip -dc | tar -x', { wall: curl.wall + gz.wall, rssMiB: Math.max(curl.rssMiB, gz.rssMiB) });
    rmSync(join(dir, 'x'), { recursive: true });
    mkdirSync(join(dir, 'x'));
    const pz = timed('sh', ['-c', `igzip -dc "$0" | tar -x -C "$1"`, join(dir, 'blob'), join(dir, 'x')]);
    record('curl, then igzip -dc | tar -x', { wall: curl.wall + pz.wall, rssMiB: Math.max(curl.rssMiB, pz.rssMiB) });
    rmSync(root, { recursive: true, force: true });
    rmSync(dir, { recursive: true, force: true });
    execFileSync('sync');
  }
  const base = median(results['fastpull pull (CLI)']!.wall);
  console.log(`\n| contender | median s | min-max s | vs fastpull | peak RSS MiB |\n|---|---|---|---|---|`);
  for (const [name, r] of Object.entries(results)) {
    const m = median(r.wall);
    console.log(`| ${name.replaceAll("|", "\\|")} | ${m.toFixed(2)} | ${Math.min(...r.wall).toFixed(2)}-${Math.max(...r.wall).toFixed(2)} | ${(m / base).toFixed(2)}x | ${Math.max(...r.rss).toFixed(0)} |`);
  }
} finally {
  await registry.stop();
  rmSync(work, { recursive: true, force: true });
}
