// Campaign 5, daemon load: fastpulld (a real process) serving 32 library clients, each on its own
// connection, and 4 CLI processes (--address), all pulling a mix of 8 images that share layers, for
// several generations with `rm` + gc between them so that each generation really fetches. The
// registry (the project's loopback registry, which counts bytes served per blob) holds manifests
// until every caller has asked, so every caller of an image shares its one pull. Asserted per
// generation: every caller gets the right manifest digest; every layer blob and config is fetched
// exactly once (bytes and requests counted per digest), however many images and callers share it;
// every image's snapshots hold the builder's trees;
// the daemon's connections number at least the clients'; the store is empty after rm + gc. Across
// generations: the daemon's RSS stays flat. FASTPULL_RELIABILITY_LONG=1 runs 30 generations, and
// then the RSS after the 30th must be within 16 MiB of the RSS after the 5th (by then the heap and
// the allocator have warmed up).
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Prng, startLoopbackRegistry, type BuiltImage, type LayerEntry, type LoopbackRegistry, buildImage } from '@fastpull/core/testing';
import { FastpullClient } from '@fastpull/daemon';
import { runCliAsync, startDaemon, tempDir, type RunningDaemon } from './helpers.js';
import { layerEntries, LONG, snapshotDiffs, suiteSeed } from './reliability-lib.js';

const CLIENTS = 32;
const CLIS = 4;
const IMAGES = 8;
const GENERATIONS = LONG ? 30 : 3;
const MiB = 1024 * 1024;

async function until(what: string, fn: () => boolean, ms: number, detail: () => string = () => ''): Promise<void> {
  const end = performance.now() + ms;
  while (!fn()) {
    if (performance.now() > end) throw new Error(`${what}: not within ${ms} ms ${detail()}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** VmRSS of a process, in bytes. */
function rss(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m?.[1] ?? NaN) * 1024;
}

/** Sockets a process holds open. */
function sockets(pid: number): number {
  let n = 0;
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      if (readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith('socket:')) n++;
    } catch {
      // closed meanwhile
    }
  }
  return n;
}

describe('daemon load (campaign 5)', () => {
  const seed = suiteSeed(5005);
  const work = tempDir('load');
  const root = join(work.dir, 'root');
  const socket = join(work.dir, 'fastpulld.sock');
  const images: BuiltImage[] = [];
  let reg: LoopbackRegistry;
  let daemon: RunningDaemon;
  const figures: string[] = [];

  beforeAll(async () => {
    // Layers as a tree: one base under all 8 images, 2 middles under 4 each, 4 lows under 2 each,
    // and one layer of each image's own. Each blob sits at one place in one chain, so each is one
    // snapshot, needed by 8, 4, 2 or 1 images.
    const prng = new Prng(seed);
    const base = layerEntries(prng, { dir: 'base', files: 12, fileSize: 160 * 1024 });
    const mids = [0, 1].map((i) => layerEntries(prng, { dir: `mid${i}`, files: 6, fileSize: 160 * 1024 }));
    const lows = [0, 1, 2, 3].map((i) => layerEntries(prng, { dir: `low${i}`, files: 4, fileSize: 120 * 1024, noise: i % 2 === 0 }));
    for (let i = 0; i < IMAGES; i++) {
      const own: LayerEntry[] = layerEntries(prng, { dir: `own${i}`, files: 3, fileSize: 64 * 1024 });
      images.push(await buildImage({ layers: [base, mids[i % 2]!, lows[i % 4]!, own] }));
    }
    reg = await startLoopbackRegistry({ maxLogEntries: 100_000 });
    images.forEach((img, i) => reg.addImage(`load/img${i}`, 'v1', img));
    daemon = startDaemon(['--socket', socket, '--root', root, '--log-level', 'debug']);
    await until(
      'fastpulld serving',
      () => daemon.logs.some((l) => l.msg === 'fastpulld serving'),
      30_000,
      () => daemon.stderr(),
    );
  });

  afterAll(async () => {
    if (daemon && daemon.proc.exitCode === null) {
      daemon.proc.kill('SIGTERM');
      await daemon.exited;
    }
    await reg?.close();
    work.cleanup();
    console.log(`daemon-load campaign (seed ${seed}):\n  ${figures.join('\n  ')}`);
  });

  it(
    `${CLIENTS} clients and ${CLIS} CLI processes pull ${IMAGES} images sharing layers, ${GENERATIONS} generations: each blob fetched once per generation, all served, memory flat`,
    async () => {
      // The same blob appears in several images: the registry must serve each once per generation.
      const blobs = new Map<string, { size: number; users: number }>();
      for (const img of images) {
        for (const l of img.layers) blobs.set(l.digest, { size: l.size, users: (blobs.get(l.digest)?.users ?? 0) + 1 });
        blobs.set(img.configDigest, { size: img.config.length, users: 1 });
      }
      expect(blobs.size).toBe(1 + 2 + 4 + IMAGES + IMAGES);
      const refOf = (i: number) => `${reg.host}/load/img${i}:v1`;
      const pid = daemon.proc.pid!;
      const rssAfter: number[] = [];
      let served = 0;
      let cliServed = 0;
      let maxSockets = 0;
      const pid0Sockets = sockets(pid);
      const t0 = performance.now();
      for (let g = 0; g < GENERATIONS; g++) {
        const label = `seed ${seed} generation ${g}`;
        reg.stats.reset();
        let open!: () => void;
        reg.faults.hold = { path: /\/manifests\//, until: new Promise<void>((r) => (open = r)) };
        const mark = daemon.logs.length;
        const tg = performance.now();
        const clients = Array.from({ length: CLIENTS }, () => new FastpullClient(socket, { ownConnection: true }));
        const callers = new Map<number, number>();
        const libPulls = clients.map((c, k) => {
          const i = (k + g) % IMAGES;
          callers.set(i, (callers.get(i) ?? 0) + 1);
          return c.pull(refOf(i)).then((r) => ({ i, digest: r.image.manifest.digest, layers: r.snapshots.length }));
        });
        const cliPulls = Array.from({ length: CLIS }, (_, j) => {
          const i = (2 * j + g) % IMAGES;
          callers.set(i, (callers.get(i) ?? 0) + 1);
          return runCliAsync(['pull', '--address', socket, '--quiet', refOf(i)]).then((r) => ({ i, ...r }));
        });
        // Every caller has asked (each Pull request logs that it started or joined a pull) before
        // any manifest is answered: each image is one shared pull.
        const asked = () => daemon.logs.slice(mark).filter((l) => l.msg === 'pull started' || l.msg === 'joined a running pull').length;
        await until(
          `${label}: every caller asked`,
          () => asked() === CLIENTS + CLIS,
          60_000,
          () => `(${asked()} asked)`,
        );
        maxSockets = Math.max(maxSockets, sockets(pid) - pid0Sockets);
        expect(sockets(pid) - pid0Sockets, `${label}: the daemon holds a connection per client`).toBeGreaterThanOrEqual(CLIENTS);
        open();
        const lib = await Promise.all(libPulls);
        const cli = await Promise.all(cliPulls);
        await Promise.all(clients.map((c) => c.close()));
        const genMs = performance.now() - tg;
        for (const r of lib) {
          expect(r.digest, `${label}: image ${r.i}`).toBe(images[r.i]!.manifestDigest);
          expect(r.layers).toBe(4);
        }
        for (const r of cli) {
          expect(r.status, `${label}: CLI image ${r.i}: ${r.stderr}`).toBe(0);
          expect(r.stdout.trim(), `${label}: CLI image ${r.i}`).toBe(images[r.i]!.manifestDigest);
        }
        served += lib.length + cli.length;
        cliServed += cli.length;
        // One pull per image, shared by all of its callers. A pull's log line may land just after its
        // callers got their answer: wait for one per image (and check there is no more).
        const pullLinesNow = () => daemon.logs.slice(mark).filter((l) => l.event === 'pull');
        await until(
          `${label}: a log line per pull`,
          () => pullLinesNow().length >= IMAGES,
          20_000,
          () => `(${pullLinesNow().length} lines)`,
        );
        const pullLines = pullLinesNow();
        expect(pullLines.map((l) => l.result)).toEqual(Array(IMAGES).fill('ok'));
        for (const [i, n] of callers) expect(pullLines.find((l) => l.image === refOf(i))?.callers, `${label}: callers of image ${i}`).toBe(n);
        // Each blob (layer or config) fetched once: its bytes and one GET, whatever shares it.
        for (const [digest, { size }] of blobs) {
          expect(reg.stats.blobBytesServed(digest as never), `${label}: bytes served of ${digest}`).toBe(size);
          expect(
            reg.stats.requests.filter((r) => r.method === 'GET' && r.path.endsWith(`/blobs/${digest}`)),
            `${label}: GETs of ${digest}`,
          ).toHaveLength(1);
        }
        expect(reg.stats.requests.filter((r) => r.path.includes('/manifests/'))).toHaveLength(IMAGES);
        const bytes = [...blobs.values()].reduce((s, b) => s + b.size, 0);
        // What they were served is what the builder made, layer by layer.
        for (let i = 0; i < IMAGES; i++) expect(await snapshotDiffs(root, refOf(i), images[i]!), `${label}: image ${i}`).toEqual([]);

        // rm + gc through the daemon: the store is empty, so the next generation fetches again.
        const admin = new FastpullClient(socket);
        try {
          for (let i = 0; i < IMAGES; i++) await admin.removeImage(refOf(i));
          const gc = await admin.collectGarbage();
          expect(gc.snapshots.length, label).toBe(1 + 2 + 4 + IMAGES);
          expect(await admin.listImages()).toEqual([]);
          expect(await admin.listSnapshots()).toEqual([]);
          expect(await admin.listContent()).toEqual([]);
        } finally {
          await admin.close();
        }
        await until(`${label}: pulls settled`, () => daemon.logs.slice(mark).filter((l) => l.event === 'pull').length === IMAGES, 5000);
        rssAfter.push(rss(pid));
        figures.push(
          `generation ${g}: ${lib.length} client + ${cli.length} CLI pulls served in ${(genMs / 1000).toFixed(1)} s, ${reg.stats.requests.filter((r) => r.path.includes('/blobs/')).length} blob GETs for ${blobs.size} blobs (${(bytes / MiB).toFixed(1)} MiB, each once), daemon RSS ${(rssAfter[g]! / MiB).toFixed(1)} MiB`,
        );
      }
      delete reg.faults.hold;
      const first = rssAfter[0]!;
      const last = rssAfter.at(-1)!;
      figures.push(
        `${served} pulls served (${cliServed} by CLI processes) over ${GENERATIONS} generations in ${((performance.now() - t0) / 1000).toFixed(1)} s; up to ${maxSockets} daemon sockets; RSS first ${(first / MiB).toFixed(1)} MiB, last ${(last / MiB).toFixed(1)} MiB, max ${(Math.max(...rssAfter) / MiB).toFixed(1)} MiB`,
      );
      expect(served).toBe(GENERATIONS * (CLIENTS + CLIS));
      // Memory flat across generations: the last within a quarter (plus 16 MiB of allocator slack) of the first.
      const perGeneration = `RSS per generation: ${rssAfter.map((r) => (r / MiB).toFixed(1)).join(', ')} MiB`;
      expect(last, perGeneration).toBeLessThanOrEqual(first * 1.25 + 16 * MiB);
      if (LONG) {
        // No growth per generation once warm: a leak of a few MiB per generation adds up to more
        // than 16 MiB over 25 generations.
        expect(rssAfter[29]! - rssAfter[4]!, perGeneration).toBeLessThanOrEqual(16 * MiB);
      }
      expect(daemon.proc.exitCode).toBeNull();
    },
    LONG ? 1_800_000 : 180_000,
  );
});
