// fastpulld's footprint, on a real process started as it is deployed (its launcher, which sizes
// libuv's pool and caps the allocator's arenas): its memory idle after start, during thirty pulls of
// an image of 2,000 files (the image removed and its content collected after each, so that every
// pull fetches and unpacks it all), and idle again after the first pull, the tenth and the thirtieth.
// "Idle" is when fastpulld says it has settled its memory (the debug log line "idle memory
// released", idle.ts), not a time: the test waits for that line. The figures asserted on are what
// the daemon holds: anonymous memory (RssAnon) idle after start, how far pulls raise it above that,
// and the peak of all its memory (VmHWM); file-backed pages (the node binary's and the libraries'
// code, shared with every node process and dropped by the kernel at will) are printed and bounded
// loosely, with the whole RSS. Measured figures: docs/daemon.md, "Memory".
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildImage, Prng, startLoopbackRegistry, type BuiltImage, type LayerEntry, type LoopbackRegistry } from '@fastpull/core/testing';
import { FastpullClient } from '@fastpull/daemon';
import { repoRoot, serveDaemon, stopDaemon, tempDir, type RunningDaemon } from './helpers.js';

const MiB = 1024 * 1024;
const FILES = 2000;
const PULLS = 30;
/** The executable the systemd unit and the container image run. */
const launcher = join(repoRoot, 'packages', 'daemon', 'dist', 'launch.cjs');
/** Anonymous memory fastpulld may hold idle after start. */
const START_ANON_LIMIT = 26 * MiB;
/**
 * How far pulls may raise the idle anonymous memory above what it was after start: the code the
 * first pulls compile and optimize stays (docs/daemon.md, "Memory"), the pulls' buffers, workers
 * and allocator arenas do not.
 */
const PULLS_ANON_TOLERANCE = 8 * MiB;
/** All of its memory idle, file-backed pages included (these depend on the node binary). */
const IDLE_RSS_LIMIT = 80 * MiB;
/**
 * How much the idle anonymous memory may grow from after the tenth pull to after the thirtieth: it
 * rises over the first pulls, then levels off (docs/daemon.md, "Memory").
 */
const GROWTH_TOLERANCE = 4 * MiB;
/** The pull after which the growth is counted from. */
const WARM_PULLS = 10;
/** The peak during pulls. */
const PEAK_LIMIT = 256 * MiB;

interface Memory {
  readonly rss: number;
  readonly anon: number;
  readonly file: number;
  readonly hwm: number;
}

function memory(pid: number): Memory {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (key: string): number => {
    const m = new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status);
    if (!m) throw new Error(`/proc/${pid}/status has no ${key}`);
    return Number(m[1]) * 1024;
  };
  return { rss: kib('VmRSS'), anon: kib('RssAnon'), file: kib('RssFile'), hwm: kib('VmHWM') };
}

const glibc = Boolean((process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header?.glibcVersionRuntime);
/** glibc's heaps of 64 MiB, aligned to their size (HEAP_MAX_SIZE on 64-bit), that each arena but the main one lives in. */
const ARENA_HEAP = 64n * 1024n * 1024n;

/**
 * How many of the C library's allocator arenas besides the main one the process has made: its
 * anonymous mappings that start on a 64 MiB boundary and, with the reserved pages that follow, end
 * on the next one. glibc's only: elsewhere undefined.
 */
function arenas(pid: number): number | undefined {
  if (!glibc) return undefined;
  const maps = readFileSync(`/proc/${pid}/maps`, 'utf8')
    .trim()
    .split('\n')
    .map((line) => {
      const [range, perm, , , inode, ...name] = line.split(/\s+/);
      const [from, to] = range!.split('-').map((x) => BigInt(`0x${x}`));
      return { from: from!, to: to!, perm: perm!, anonymous: inode === '0' && name.join('') === '' };
    });
  let count = 0;
  for (let i = 0; i < maps.length; i++) {
    const m = maps[i]!;
    if (!m.anonymous || !m.perm.startsWith('rw') || m.from % ARENA_HEAP !== 0n) continue;
    let end = m.to;
    for (let j = i + 1; end - m.from < ARENA_HEAP && j < maps.length && maps[j]!.anonymous && maps[j]!.from === end; j++) end = maps[j]!.to;
    if (end - m.from === ARENA_HEAP) count++;
  }
  return count;
}

const mib = (n: number): string => (n / MiB).toFixed(1);
const show = (m: Memory): string => `RSS ${mib(m.rss)} MiB (anonymous ${mib(m.anon)}, file-backed ${mib(m.file)}), peak ${mib(m.hwm)} MiB`;

/** One layer of FILES small files in 40 directories. */
function manyFiles(prng: Prng): LayerEntry[] {
  const entries: LayerEntry[] = [{ type: 'dir', path: 'many', mode: 0o755 }];
  for (let d = 0; d < 40; d++) entries.push({ type: 'dir', path: `many/d${d}`, mode: 0o755 });
  for (let i = 0; i < FILES; i++) entries.push({ type: 'file', path: `many/d${i % 40}/f${i}.txt`, content: prng.binary(256 + prng.int(0, 4096)), mode: 0o644 });
  return entries;
}

describe('fastpulld footprint', () => {
  const work = tempDir('footprint');
  let reg: LoopbackRegistry;
  let image: BuiltImage;
  let daemon: RunningDaemon | undefined;
  let client: FastpullClient | undefined;
  const figures: string[] = [];

  beforeAll(async () => {
    image = await buildImage({ layers: [manyFiles(new Prng(4747))] });
    reg = await startLoopbackRegistry();
    reg.addImage('footprint/many', 'v1', image);
  });
  afterAll(async () => {
    await client?.close();
    await stopDaemon(daemon);
    await reg?.close();
    work.cleanup();
    if (figures.length > 0) console.log(`fastpulld footprint:\n  ${figures.join('\n  ')}`);
  });

  it(`idle after start and after ${PULLS} pulls of ${FILES} files: anonymous memory bounded, near the start's and not growing, peak under 256 MiB`, async () => {
    const socket = join(work.dir, 'fastpulld.sock');
    // The launcher's own cap is what is measured, not one this process's environment would set
    // (spawn leaves out a variable whose value is undefined).
    daemon = await serveDaemon(['--socket', socket, '--root', join(work.dir, 'root'), '--log-level', 'debug'], {
      bin: launcher,
      env: { MALLOC_ARENA_MAX: undefined },
    });
    const d = daemon;
    const pid = d.proc.pid!;
    client = new FastpullClient(socket);
    const c = client;
    /** Waits for the daemon to settle after its log's first `mark` lines, then reads its memory once it stops falling. */
    const idle = async (mark: number, what: string): Promise<Memory> => {
      const line = await d.waitLog((l) => l.msg === 'idle memory released' && d.logs.indexOf(l) >= mark, 120_000);
      // V8 and the allocator may still be handing pages back: read again after each answered call
      // until the anonymous memory stops falling (at most ten reads).
      let m = memory(pid);
      for (let i = 0; i < 10; i++) {
        expect(await c.health()).toBe('SERVING');
        const next = memory(pid);
        if (next.anon >= m.anon) break;
        m = next;
      }
      figures.push(
        `${what}: ${show(m)}; the daemon said ${JSON.stringify({ workers: line.workers, steps: line.steps, youngGeneration: line.youngGeneration })}`,
      );
      return m;
    };

    const start = await idle(0, 'idle after start');
    const arenasAtStart = arenas(pid);
    const layer = image.layers[0]!;
    let afterFirst: Memory | undefined;
    let warm: Memory | undefined;
    let mark = 0;
    for (let i = 1; i <= PULLS; i++) {
      const r = await c.pull(`${reg.host}/footprint/many:v1`);
      // The daemon logged the pull's start before it answered: a settling from here on came after it.
      mark = d.logs.length;
      expect(r.image.manifest.digest).toBe(image.manifestDigest);
      const removed = await c.removeImage(`${reg.host}/footprint/many:v1`, { gc: true });
      expect(removed.gc).toBeDefined();
      // Each pull fetched the layer whole: the previous one's content was collected.
      expect(reg.stats.blobBytesServed(layer.digest)).toBeGreaterThanOrEqual(i * layer.size);
      if (i === 1) afterFirst = await idle(mark, 'idle after the first pull');
      if (i === WARM_PULLS) warm = await idle(mark, `idle after ${WARM_PULLS} pulls`);
    }
    const after = await idle(mark, `idle after ${PULLS} pulls`);
    const { hwm } = memory(pid);
    figures.push(`peak during the pulls (VmHWM): ${mib(hwm)} MiB`);
    const arenasAfter = arenas(pid);
    figures.push(
      arenasAfter === undefined
        ? 'allocator arenas not counted: the C library is not glibc'
        : `allocator arenas besides the main one: ${arenasAtStart} after start, ${arenasAfter} after the pulls`,
    );
    // The launcher capped the arenas before the daemon's code loaded: the threads the pulls started
    // (unpack workers, file writers, libuv's pool at work) share those there were.
    if (arenasAfter !== undefined) expect(arenasAfter).toBeLessThanOrEqual(arenasAtStart!);

    // The unpack workers the pulls started ended once the daemon was idle.
    expect(d.logs.filter((l) => l.msg === 'idle memory released').at(-1)?.workers).toBeGreaterThanOrEqual(1);
    expect(start.anon).toBeLessThanOrEqual(START_ANON_LIMIT);
    for (const m of [start, afterFirst!, warm!, after]) {
      expect(m.anon - start.anon).toBeLessThanOrEqual(PULLS_ANON_TOLERANCE);
      expect(m.rss).toBeLessThanOrEqual(IDLE_RSS_LIMIT);
    }
    expect(after.anon - warm!.anon).toBeLessThanOrEqual(GROWTH_TOLERANCE);
    expect(hwm).toBeLessThan(PEAK_LIMIT);
  }, 900_000);
});
