// The machine's own limit for pulling one image, measured with the best tools it has, and the bound of
// the design's performance model:
//   max(network, (inflate + SHA-256 of compressed and uncompressed bytes + extraction) CPU / cores,
//       (the same + receiving the blobs + serving them) CPU / cores, the same with the registry serving
//       from a cold page cache, largest layer's inflate, disk)
// network = parallel curl of all blobs to disk; receiving = the CPU of a parallel curl of all blobs
// to /dev/null, and serving = the registry's CPU meanwhile (it runs on this machine, on loopback, and
// takes its share of the cores during every pull; page cache warm, so the least it costs); serving
// cold = the registry's CPU during the curl to disk, right after the page cache was dropped, as it
// is before every measured pull (reading the blobs back from the disk costs the registry's process
// CPU too); inflate = per layer, the fastest single-core tool
// among igzip, pigz, gzip and node:zlib (zstd: the zstd program); hashes = openssl dgst -sha256;
// extraction and disk = GNU tar -x of all layers (one per core at a time), then sync. Its files go to
// the trash (src/peers/trash.ts), not away at once: the pulls measured next would pay for the delete.
import { closeSync, mkdirSync, openSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import type { ImageMeta } from './images.js';
import { cpuSeconds, dropCaches, measure, which, type Measured } from './measure.js';
import type { Trash } from './trash.js';

export interface InflateTry {
  readonly tool: string;
  readonly wall: number;
  readonly cpu: number;
  readonly error?: string;
}

export interface LayerLimit {
  readonly name: string;
  readonly size: number;
  readonly tarSize: number;
  readonly tries: readonly InflateTry[];
  /** The try with the least CPU. */
  readonly best: InflateTry;
}

/**
 * `cpu`: the unpack tools' CPU over the cores; `cpu with download`: the same plus receiving the blobs
 * and the loopback registry's serving them from a warm page cache, the least CPU any puller on this
 * machine shares its cores with; `cpu with cold download`: the same with the registry serving from
 * a cold page cache, as it does during the measured pulls (each starts after the cache is dropped).
 */
export type TermName = 'network' | 'cpu' | 'cpu with download' | 'cpu with cold download' | 'largest layer inflate' | 'disk';

export interface Limit {
  readonly cores: number;
  readonly curl: { wall: number; wallWithSync: number; cpu: number };
  /**
   * Every blob at once to /dev/null (page cache warm): curl's CPU (receiving), and the registry's CPU
   * meanwhile (serving; absent when its process is unknown); `coldServerCpu`, the registry's CPU while
   * it served the curl to disk right after the page cache was dropped (absent in results from before
   * 6 December, 17:00 UTC, or when its process is unknown).
   */
  readonly download?: { wall: number; cpu: number; serverCpu?: number; coldServerCpu?: number };
  readonly layers: readonly LayerLimit[];
  readonly inflateCpu: number;
  readonly shaCompressedCpu: number;
  readonly shaUncompressedCpu: number;
  readonly extract: { cpu: number; wallWithSync: number };
  /** For reading the disk term: writing the uncompressed bytes as one file with dd (fdatasync), no tar, no files. */
  readonly rawWrite: { wall: number; bytes: number };
  readonly terms: Readonly<Record<TermName, number>>;
  readonly bound: number;
  readonly dominant: TermName;
  readonly cacheDrop: string;
}

function inflaters(compression: ImageMeta['compression'], inflateChild: string): { tool: string; cmd: string; args: (file: string) => string[] }[] {
  const sh = (pipeline: string) => (file: string) => ['-c', `${pipeline} "$0" > /dev/null`, file];
  if (compression === 'zstd') return which('zstd') ? [{ tool: 'zstd -dc', cmd: 'sh', args: sh('zstd -dc') }] : [];
  // An uncompressed layer: reading it is all there is.
  if (compression === 'none') return [{ tool: 'cat', cmd: 'sh', args: sh('cat') }];
  const out: { tool: string; cmd: string; args: (file: string) => string[] }[] = [];
  for (const t of ['igzip', 'pigz', 'gzip']) if (which(t)) out.push({ tool: `${t} -dc`, cmd: 'sh', args: sh(`${t} -dc`) });
  out.push({ tool: 'node:zlib', cmd: process.execPath, args: (file) => [inflateChild, file] });
  return out;
}

function ok(m: Measured, what: string): Measured {
  if (!m.ok) throw new Error(`limit: ${what} failed: ${m.output.slice(-500)}`);
  return m;
}

export async function measureLimit(
  image: ImageMeta,
  blobUrl: (digest: string) => string,
  inflateChild: string,
  log: (s: string) => void,
  trash: Trash,
  serverPid?: number,
): Promise<Limit> {
  const cores = availableParallelism();
  const work = trash.dir('fastpull-bench-limit-');
  // Network: every blob at once, to disk.
  const cacheDrop = dropCaches();
  // Every blob at once with curl, blob i written to out(i); the registry's CPU meanwhile is its
  // serving from a cold page cache.
  const curlAll = (out: (i: number) => string) => [
    '-sS',
    '--fail',
    '--parallel',
    '--parallel-max',
    '16',
    ...image.layers.flatMap((l, i) => ['-o', out(i), blobUrl(l.digest)]),
  ];
  // The registry's CPU clock (undefined when its process is unknown), and its CPU since a reading.
  const serverClock = () => (serverPid === undefined ? undefined : cpuSeconds(serverPid));
  const serverCpuSince = (start: number | undefined) => (start === undefined ? undefined : Math.max(0, serverClock()! - start));
  const coldStart = serverClock();
  const curl = ok(
    await measure(
      'curl',
      curlAll((i) => join(work, `blob-${i}`)),
    ),
    'curl',
  );
  const coldServerCpu = serverCpuSince(coldStart);
  const sync = await measure('sync', []);
  log(`  limit: curl ${curl.wall.toFixed(2)} s (+ sync ${sync.wall.toFixed(2)} s)`);
  // Receiving and serving alone: the same blobs again, to /dev/null, the registry's CPU counted apart.
  const warmStart = serverClock();
  const received = ok(
    await measure(
      'curl',
      curlAll(() => '/dev/null'),
    ),
    'curl to /dev/null',
  );
  const serverCpu = serverCpuSince(warmStart);
  const download = {
    wall: received.wall,
    cpu: received.cpu,
    ...(serverCpu !== undefined ? { serverCpu } : {}),
    ...(coldServerCpu !== undefined ? { coldServerCpu } : {}),
  };
  const served = (s: number | undefined) => (s === undefined ? 'not measured' : `${s.toFixed(2)} s`);
  log(`  limit: receiving ${received.cpu.toFixed(2)} s of CPU, serving ${served(serverCpu)} (page cache warm), ${served(coldServerCpu)} (cold)`);

  // Inflate: each tool on each layer, the blob in the page cache, output discarded.
  const tools = inflaters(image.compression, inflateChild);
  const layers: LayerLimit[] = [];
  for (const [i, l] of image.layers.entries()) {
    const blob = join(image.dir, l.file);
    const tries: InflateTry[] = [];
    spawnSync('cat', [blob], { stdio: 'ignore' }); // warm the page cache
    for (const t of tools) {
      const m = await measure(t.cmd, t.args(blob));
      tries.push(m.ok ? { tool: t.tool, wall: m.wall, cpu: m.cpu } : { tool: t.tool, wall: NaN, cpu: NaN, error: m.output.slice(-200) });
    }
    const good = tries.filter((t) => t.error === undefined);
    if (good.length === 0) throw new Error(`limit: no inflater could decompress layer ${i} (${tries.map((t) => `${t.tool}: ${t.error}`).join('; ')})`);
    const best = good.reduce((a, b) => (b.cpu < a.cpu ? b : a));
    layers.push({ name: l.name, size: l.size, tarSize: l.tarSize, tries, best });
    // The uncompressed tar, for hashing and extraction (not timed).
    const fd = openSync(join(work, `layer-${i}.tar`), 'w');
    const r = spawnSync(
      image.compression === 'none' ? 'cat' : image.compression === 'zstd' ? 'zstd' : 'gzip',
      image.compression === 'none' ? [blob] : ['-dc', blob],
      { stdio: ['ignore', fd, 'pipe'] },
    );
    closeSync(fd);
    if (r.status !== 0) throw new Error(`limit: decompressing layer ${i}: ${r.stderr.toString()}`);
  }
  // The tars are dirty pages: write them back now, or the extraction's sync would count them.
  spawnSync('sync');
  const inflateCpu = layers.reduce((a, l) => a + l.best.cpu, 0);
  log(`  limit: inflate CPU ${inflateCpu.toFixed(2)} s (best per layer: ${[...new Set(layers.map((l) => l.best.tool))].join(', ')})`);

  // Hashes, with openssl, of the blobs and of the tars.
  const blobs = image.layers.map((l) => join(image.dir, l.file));
  const tars = image.layers.map((_, i) => join(work, `layer-${i}.tar`));
  const shaC = ok(await measure('openssl', ['dgst', '-sha256', ...blobs]), 'openssl dgst (compressed)');
  const shaU = ok(await measure('openssl', ['dgst', '-sha256', ...tars]), 'openssl dgst (uncompressed)');

  // Extraction: GNU tar -x of every layer into its own directory (as overlay snapshots are), as many
  // layers at once as there are cores (layers are independent), then sync.
  for (let i = 0; i < tars.length; i++) mkdirSync(join(work, `x-${i}`));
  const script = 'n="$1"; shift; printf "%s\\n" "$@" | xargs -P "$n" -I{} sh -c \'tar -x -f "$0/layer-$1.tar" -C "$0/x-$1"\' "$0" {} && sync';
  const extract = ok(await measure('sh', ['-c', script, work, String(cores), ...tars.map((_, i) => String(i))]), 'tar -x');
  const bytes = image.layers.reduce((a, l) => a + l.tarSize, 0);
  const blocks = Math.ceil(bytes / (4 * 1024 * 1024));
  const dd = ok(await measure('dd', ['if=/dev/zero', `of=${join(work, 'dd')}`, 'bs=4M', `count=${blocks}`, 'conv=fdatasync', 'status=none']), 'dd');
  const largest = image.layers.reduce((a, l, i) => (l.size > image.layers[a]!.size ? i : a), 0);

  const { terms, bound, dominant } = limitTerms({
    cores,
    network: curl.wall,
    toolsCpu: inflateCpu + shaC.cpu + shaU.cpu + extract.cpu,
    download,
    largestInflate: layers[largest]!.best.wall,
    disk: extract.wall,
  });
  return {
    cores,
    curl: { wall: curl.wall, wallWithSync: curl.wall + sync.wall, cpu: curl.cpu },
    download,
    layers,
    inflateCpu,
    shaCompressedCpu: shaC.cpu,
    shaUncompressedCpu: shaU.cpu,
    extract: { cpu: extract.cpu, wallWithSync: extract.wall },
    rawWrite: { wall: dd.wall, bytes: blocks * 4 * 1024 * 1024 },
    terms,
    bound,
    dominant,
    cacheDrop,
  };
}

/** What the terms of a {@link Limit} are made of (seconds). */
export interface LimitParts {
  readonly cores: number;
  /** Wall time of every blob to disk at once. */
  readonly network: number;
  /** CPU of the unpack tools: inflate, both hashes, tar -x. */
  readonly toolsCpu: number;
  /**
   * CPU of receiving the blobs and of the registry serving them, from a warm and from a cold page
   * cache (absent: not measured).
   */
  readonly download: { readonly cpu: number; readonly serverCpu?: number; readonly coldServerCpu?: number };
  readonly largestInflate: number;
  /** tar -x of every layer plus sync, wall. */
  readonly disk: number;
}

/**
 * The terms, the bound (the largest term) and which term it is.
 * @example limitTerms({ cores: 2, network: 1, toolsCpu: 5, download: { cpu: 0.5, serverCpu: 0.5 }, largestInflate: 0.8, disk: 2.9 }).bound // 3
 */
export function limitTerms(p: LimitParts): { terms: Record<TermName, number>; bound: number; dominant: TermName } {
  const terms: Record<TermName, number> = {
    network: p.network,
    cpu: p.toolsCpu / p.cores,
    'cpu with download': (p.toolsCpu + p.download.cpu + (p.download.serverCpu ?? 0)) / p.cores,
    // Serving from a cold cache costs at least what serving from a warm one does.
    'cpu with cold download': (p.toolsCpu + p.download.cpu + Math.max(p.download.coldServerCpu ?? 0, p.download.serverCpu ?? 0)) / p.cores,
    'largest layer inflate': p.largestInflate,
    disk: p.disk,
  };
  const dominant = (Object.keys(terms) as TermName[]).reduce((a, b) => (terms[b] > terms[a] ? b : a));
  return { terms, bound: terms[dominant], dominant };
}
