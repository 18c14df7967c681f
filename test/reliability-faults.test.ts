// Campaign 2, network faults: many library pulls, each against registries misbehaving in a seeded
// random combination of the ways the download engine must survive (connections reset mid-body,
// stalls, 5xx/408/429 with Retry-After, ignored Range, wrong Content-Range, redirects to another
// origin, corrupt bytes, a lying Docker-Content-Digest, auth challenges and expiring tokens, refused
// credentials, slow bodies). Every pull either completes with content equal to the builder's, or
// fails within its time bound with the one error code its fatal fault calls for (docs/errors.md).
// After each failure the store holds nothing but resumable downloads of the image's layers, and a
// fault-free pull into it then completes (or gc removes them: both are checked). At the end: no
// socket, file descriptor, scheduler slot or ingest is left over. FASTPULL_RELIABILITY_LONG=1 runs
// hundreds of pulls instead of dozens; FASTPULL_RELIABILITY_SEED picks another seed.
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { collectGarbage, isFastpullError, openStore, pull, type Digest } from '@fastpull/core';
import { RegistryClient, sharedFetchScheduler } from '@fastpull/core/registry';
import { Prng, startLoopbackRegistry, type BuiltImage, type LoopbackFaults, type LoopbackRegistry } from '@fastpull/core/testing';
import { tempDir } from './helpers.js';
import { generatedImage, ingestDigest, litter, LONG, openFds, settle, snapshotDiffs, suiteSeed, tcpConnections } from './reliability-lib.js';

const KiB = 1024;
const CHUNK = 64 * KiB;
const PULL_TUNING = { chunkSize: CHUNK, stallTimeoutMs: 300, stragglerWindowMs: 1000, noProgressTimeoutMs: 3000 } as const;
const CREDS = { username: 'faults', password: 'pw-faults' };

type Kind = 'plain' | 'bearer' | 'basic';

/** One pull's plan: where, what, which faults, and what must come of it. */
interface Plan {
  readonly kind: Kind;
  readonly image: number;
  readonly byDigest: boolean;
  readonly badCreds: boolean;
  /** Faults of the registry named in the reference. */
  readonly front: LoopbackFaults;
  /** Faults of whoever serves blob bodies: the same registry, or the redirect target. */
  readonly blob: LoopbackFaults;
  readonly redirect: boolean;
  /** 'ok', or the code the fatal fault calls for. */
  readonly want: string;
  readonly describe: string[];
}

describe('network faults (campaign 2)', () => {
  const seed = suiteSeed(2002);
  const pulls = LONG ? 300 : 40;
  const work = tempDir('netfaults');
  const images: BuiltImage[] = [];
  const regs = {} as Record<Kind, LoopbackRegistry>;
  let storage: LoopbackRegistry;
  const figures: string[] = [];

  beforeAll(async () => {
    // Three images of 3-4 layers; each has a layer of many 64 KiB ranges and small single-request ones.
    images.push(
      await generatedImage(seed, [
        { dir: 'base', files: 6, fileSize: 4 * KiB },
        { dir: 'big', files: 3, fileSize: 200 * KiB, noise: true },
        { dir: 'top', files: 2, fileSize: 1 * KiB },
      ]),
      await generatedImage(seed + 1, [
        { dir: 'usr', files: 10, fileSize: 30 * KiB },
        { dir: 'opt', files: 2, fileSize: 300 * KiB, noise: true },
        { dir: 'srv', files: 4, fileSize: 20 * KiB, noise: true },
        { dir: 'etc', files: 3, fileSize: 512 },
      ]),
      await generatedImage(seed + 2, [
        { dir: 'a', files: 1, fileSize: 900 * KiB, noise: true },
        { dir: 'b', files: 5, fileSize: 8 * KiB },
        { dir: 'c', files: 2, fileSize: 100 * KiB },
      ]),
    );
    regs.plain = await startLoopbackRegistry();
    // Tokens that expire within a slow pull: renewed on a 401 mid-download.
    regs.bearer = await startLoopbackRegistry({ auth: { type: 'bearer', expiresIn: 1 } });
    regs.basic = await startLoopbackRegistry({ auth: { type: 'basic', ...CREDS } });
    storage = await startLoopbackRegistry();
    for (const r of [regs.plain, regs.bearer, regs.basic, storage]) images.forEach((img, i) => r.addImage(`faults/img${i}`, 'v1', img));
  });

  afterAll(async () => {
    await Promise.all([...Object.values(regs), storage].map((r) => r?.close()));
    work.cleanup();
    console.log(`network-faults campaign (seed ${seed}):\n  ${figures.join('\n  ')}`);
  });

  /** A seeded random plan; `budget` bounds the recoverable counted faults below the 4 attempts a request gets. */
  function plan(prng: Prng): Plan {
    const kind = prng.pick<Kind>(['plain', 'plain', 'bearer', 'basic']);
    const index = prng.int(0, images.length - 1);
    const img = images[index]!;
    const byDigest = prng.chance(0.25);
    const redirect = prng.chance(0.2);
    const front: LoopbackFaults = {};
    const blob: LoopbackFaults = {};
    const d: string[] = [];
    const big = [...img.layers].sort((a, b) => b.size - a.size)[0]!;
    const targets: Digest[] = [...img.layers.map((l) => l.digest), img.configDigest];
    const target = (): { re: RegExp; name: string } => {
      const r = prng.int(0, targets.length + 1);
      if (r === targets.length) return { re: /\/blobs\//, name: 'all blobs' };
      if (r === targets.length + 1) return { re: /\/(blobs|manifests)\//, name: 'everything' };
      const t = targets[r]!;
      return { re: new RegExp(t.slice(7)), name: t === img.configDigest ? 'config' : `layer ${img.layers.findIndex((l) => l.digest === t)}` };
    };
    let budget = 3;
    for (const k of prng.shuffle(['drop', 'stall', 'status', 'ignoreRange', 'slow', 'none']).slice(0, prng.int(1, 3))) {
      if (k === 'drop' && budget > 0) {
        const times = prng.int(1, Math.min(2, budget));
        budget -= times;
        const t = target();
        // A config is a few hundred bytes: cut it inside its body.
        blob.dropAfter = { bytes: prng.int(0, t.name === 'config' ? img.config.length - 1 : 48 * KiB), times, path: t.re };
        d.push(`reset after ${blob.dropAfter.bytes} bytes x${times} (${t.name})`);
      } else if (k === 'stall' && budget > 0) {
        const times = prng.int(1, Math.min(2, budget));
        budget -= times;
        const t = target();
        blob.stallAfter = { bytes: prng.int(0, t.name === 'config' ? img.config.length - 1 : 48 * KiB), times, path: t.re };
        d.push(`stall after ${blob.stallAfter.bytes} bytes x${times} (${t.name})`);
      } else if (k === 'status' && budget > 0) {
        const times = prng.int(1, Math.min(2, budget));
        budget -= times;
        const status = prng.pick([500, 502, 503, 504, 408, 429]);
        const t = target();
        front.status = { path: t.re, status, times, ...(status === 429 || status === 503 ? { headers: { 'Retry-After': prng.pick(['0', '1']) } } : {}) };
        d.push(`HTTP ${status}${front.status.headers ? ` Retry-After ${front.status.headers['Retry-After']}` : ''} x${times} (${t.name})`);
      } else if (k === 'ignoreRange') {
        blob.ignoreRange = true;
        d.push('Range ignored (200, whole body)');
      } else if (k === 'slow') {
        blob.bytesPerSecond = prng.int(512 * KiB, 4096 * KiB);
        d.push(`bodies at ${Math.round(blob.bytesPerSecond / KiB)} KiB/s`);
      }
    }
    if (redirect) d.push('blobs redirected to another origin');
    if (kind !== 'plain') d.push(kind === 'bearer' ? 'bearer tokens expiring after 1 s' : 'basic auth');
    let want = 'ok';
    let badCreds = false;
    if (prng.chance(0.4)) {
      const fatal = prng.pick(['corrupt', 'corruptConfig', 'lyingDigest', 'contentRange', 'status', 'status', 'hardDrop', 'hardStall', 'badCreds']);
      if (fatal === 'corrupt' || fatal === 'corruptConfig') {
        const victim = fatal === 'corrupt' ? prng.pick(img.layers).digest : img.configDigest;
        blob.corruptBlob = new Set([victim]);
        want = 'DIGEST_MISMATCH';
        d.push(`FATAL: corrupt ${fatal === 'corrupt' ? 'layer' : 'config'} bytes`);
      } else if (fatal === 'lyingDigest' && !byDigest) {
        front.wrongDockerContentDigest = true;
        want = 'DIGEST_MISMATCH';
        d.push('FATAL: Docker-Content-Digest that does not match');
      } else if (fatal === 'contentRange') {
        // A 206 for another range than asked; only ranged requests see it.
        delete blob.ignoreRange;
        blob.wrongContentRange = true;
        want = 'REGISTRY_ERROR';
        d.push('FATAL: wrong Content-Range');
      } else if (fatal === 'status') {
        const [status, code, headers] = prng.pick<[number, string, Record<string, string> | undefined]>([
          [404, 'NOT_FOUND', undefined],
          [403, 'DENIED', undefined],
          [401, 'UNAUTHORIZED', undefined],
          [429, 'RATE_LIMITED', { 'Retry-After': '3600' }],
          [500, 'REGISTRY_ERROR', undefined],
          [400, 'REGISTRY_ERROR', undefined],
        ]);
        const where = prng.pick([/\/manifests\//, new RegExp(big.digest.slice(7)), new RegExp(img.configDigest.slice(7))]);
        front.status = { path: where, status, times: 1000, ...(headers ? { headers } : {}) };
        want = code;
        d.push(`FATAL: HTTP ${status} on every ${where.source}`);
      } else if (fatal === 'hardDrop') {
        // Resets after fewer bytes than a chunk needs over all its attempts.
        blob.dropAfter = { bytes: prng.int(0, 8 * KiB), times: 1000, path: new RegExp(big.digest.slice(7)) };
        delete blob.ignoreRange;
        want = 'NETWORK_ERROR';
        d.push(`FATAL: every response of the biggest layer reset after ${blob.dropAfter.bytes} bytes`);
      } else if (fatal === 'hardStall') {
        blob.stallAfter = { bytes: 0, times: 1000, path: new RegExp(big.digest.slice(7)) };
        want = 'NETWORK_ERROR';
        d.push('FATAL: the biggest layer never sends a byte');
      } else if (fatal === 'badCreds' && kind === 'basic') {
        badCreds = true;
        want = 'UNAUTHORIZED';
        d.push('FATAL: wrong password');
      }
    }
    return { kind, image: index, byDigest, badCreds, front, blob, redirect, want, describe: d };
  }

  function apply(p: Plan): void {
    for (const r of [...Object.values(regs), storage]) r.faults = {};
    const reg = regs[p.kind];
    reg.faults = { ...p.front, ...(p.redirect ? { redirectBlobsTo: storage.url } : p.blob) };
    if (p.redirect) storage.faults = { ...p.blob };
  }

  /** Times the counted faults fired (their `times` went down). */
  function fired(p: Plan, before: Map<object, number>): number {
    let n = 0;
    for (const f of [p.front.status, p.blob.dropAfter, p.blob.stallAfter]) if (f) n += (before.get(f) ?? 0) - f.times;
    return n;
  }

  it(
    "every pull completes verified or fails with its fault's code in bounded time; nothing leaks",
    async () => {
      const prng = new Prng(seed);
      // Warm up: worker threads, inflaters and lazily opened files exist before the baseline.
      const warm = join(work.dir, 'warm');
      await pull(`${regs.plain.host}/faults/img0:v1`, { root: warm, ...PULL_TUNING });
      rmSync(warm, { recursive: true, force: true });
      await settle(() => tcpConnections(Number(regs.plain.host.split(':')[1])).server === 0, 5000);
      const fdsBefore = openFds();

      const outcomes: Record<string, number> = {};
      let faultSettings = 0;
      let firings = 0;
      let failedThenResumed = 0;
      let gcAfterFailure = 0;
      let slowest = 0;
      const t0 = performance.now();
      for (let i = 0; i < pulls; i++) {
        const p = plan(prng);
        const label = `seed ${seed} pull ${i}: ${p.describe.join('; ') || 'no faults'} (want ${p.want})`;
        const img = images[p.image]!;
        const reg = regs[p.kind];
        const ref = `${reg.host}/faults/img${p.image}${p.byDigest ? `@${img.manifestDigest}` : ':v1'}`;
        const root = join(work.dir, `r${i}`);
        apply(p);
        faultSettings += p.describe.length;
        const counts = new Map<object, number>();
        for (const f of [p.front.status, p.blob.dropAfter, p.blob.stallAfter]) if (f) counts.set(f, f.times);
        const client = new RegistryClient({
          idleTimeoutMs: 2000,
          credentials: (host) => (host === regs.basic.host ? (p.badCreds ? { ...CREDS, password: 'wrong' } : CREDS) : undefined),
        });
        const t = performance.now();
        let outcome: string;
        let name = '';
        try {
          name = (await pull(ref, { root, client, ...PULL_TUNING })).image.name;
          outcome = 'ok';
        } catch (e) {
          outcome = isFastpullError(e) ? e.code : `not a FastpullError: ${(e as Error)?.stack ?? String(e)}`;
          if (outcome !== p.want) console.error(label, e);
        } finally {
          await client.close();
        }
        const ms = performance.now() - t;
        slowest = Math.max(slowest, ms);
        firings += fired(p, counts);
        outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
        expect(outcome, label).toBe(p.want);
        if (outcome === 'ok') {
          // A pull that succeeded went past every status fault it was given: each answered as many
          // requests as it was told to (its target is a blob or manifest the pull cannot do without).
          if (p.front.status) expect(p.front.status.times, `${label}: the status fault fired every time`).toBe(0);
          expect(await snapshotDiffs(root, name, img), label).toEqual([]);
          expect(litter(root), label).toEqual({ ingests: [], actives: [] });
        } else {
          // Nothing visible, nothing half-unpacked; downloads kept only for the image's layers.
          expect(await openStore(root).images.list(), label).toEqual([]);
          const left = litter(root);
          expect(left.actives, label).toEqual([]);
          const layers = new Set<string>(img.layers.map((l) => l.digest));
          for (const id of left.ingests) expect(layers.has(ingestDigest(root, id) ?? ''), `${label}: ingest ${id}`).toBe(true);
          apply({ ...p, front: {}, blob: {}, redirect: false, badCreds: false });
          if (i % 2 === 0) {
            // gc removes every download the failed pull kept (none is held by a live process).
            await collectGarbage(openStore(root));
            expect(litter(root), label).toEqual({ ingests: [], actives: [] });
            gcAfterFailure++;
          }
          // A fault-free pull into the same store completes (resuming what was kept).
          const again = await pull(ref, { root, ...PULL_TUNING, credentials: () => CREDS });
          expect(await snapshotDiffs(root, again.image.name, img), label).toEqual([]);
          expect(litter(root), label).toEqual({ ingests: [], actives: [] });
          failedThenResumed++;
        }
        rmSync(root, { recursive: true, force: true });
      }
      const totalMs = performance.now() - t0;

      // Leaks: every connection on both ends closed, the same descriptors open as before, no
      // request slot held.
      for (const r of [...Object.values(regs), storage]) r.faults = {};
      const ports = [...Object.values(regs), storage].map((r) => Number(r.host.split(':')[1]));
      const closed = await settle(() => ports.every((port) => tcpConnections(port).server === 0 && tcpConnections(port).client === 0), 10_000);
      const open = ports.map((port) => ({ port, ...tcpConnections(port) }));
      expect(closed, `open connections: ${JSON.stringify(open)}`).toBe(true);
      let fdsAfter = openFds();
      await settle(() => (fdsAfter = openFds()).size <= fdsBefore.size, 5000);
      const extra = [...fdsAfter].filter(([fd, target]) => fdsBefore.get(fd) !== target);
      expect(extra, 'file descriptors opened by the campaign and still open').toEqual([]);
      expect(sharedFetchScheduler().inFlight).toEqual({ requests: 0, bytes: 0 });

      figures.push(
        `${pulls} pulls in ${(totalMs / 1000).toFixed(1)} s (slowest ${(slowest / 1000).toFixed(1)} s): outcomes ${JSON.stringify(outcomes)}`,
        `${faultSettings} fault settings injected, counted faults fired ${firings} times; ${failedThenResumed} failed pulls completed by a fault-free pull after (${gcAfterFailure} after a gc)`,
        `after: ${fdsBefore.size} fds before / ${fdsAfter.size} after, 0 connections open, 0 ingests, 0 active snapshots`,
      );
      expect(outcomes.ok ?? 0).toBeGreaterThan(pulls / 3);
      // The faults were there: the counted ones fired, and the failures are the fatal ones'.
      expect(firings).toBeGreaterThan(0);
      expect(Object.keys(outcomes).filter((o) => o !== 'ok').length).toBeGreaterThan(0);
    },
    LONG ? 1_800_000 : 240_000,
  );
});
