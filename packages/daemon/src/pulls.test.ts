// The pull manager over real pulls into a real store: callers of one pull share it, one caller leaving
// stops only its own share, the last one leaving stops the pull, a failure reaches every caller, and a
// late caller first gets what it missed. Pulls come from the CNCF registry on loopback; the project's
// loopback registry holds blob requests back where a pull must still be running.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatReference, LocalService, parseReference, type PulledImage, type PullEvent, type PullResult } from '@fastpull/core';
import {
  type BuiltImage,
  type DistributionRegistry,
  findDistributionBinary,
  lacksRegistry,
  pushImage,
  sampleImage,
  startDistribution,
  startLoopbackRegistry,
} from '@fastpull/core/testing';
import { PullManager, pullKey, type PullOutcome, type PullSubscriber, type StartPull } from './pulls.js';
import type { PullCpuBudget, RateLimiter } from '@fastpull/core';
import { sharedSnapshotPuller } from './snapshotter/pull.js';

const binary = findDistributionBinary();
if (!binary) console.warn('skipping the pull manager tests that pull from docker-registry: it is not installed');

/** A caller: what it received, and its answer as a promise. */
interface Caller extends PullSubscriber {
  readonly events: PullEvent[];
  readonly answer: Promise<PullResult>;
  /** Whether finish or fail was called. */
  answered: boolean;
}

function caller(): Caller {
  let resolve!: (r: PullResult) => void;
  let reject!: (e: unknown) => void;
  const answer = new Promise<PullResult>((res, rej) => ((resolve = res), (reject = rej)));
  // Read by the test whether or not the answer is awaited.
  answer.catch(() => undefined);
  const c: Caller = {
    events: [],
    answer,
    answered: false,
    progress: (e) => c.events.push(e),
    finish: (r) => ((c.answered = true), resolve(r)),
    fail: (e) => ((c.answered = true), reject(e)),
  };
  return c;
}

describe('pull keys', () => {
  it('differ by every part of a pull, and never hold the credentials', () => {
    const base = { name: 'registry.test/app:v1', plainHttp: false, keepBlobs: false, trace: false };
    const keys = [
      pullKey(base),
      pullKey({ ...base, name: 'registry.test/app:v2' }),
      pullKey({ ...base, platform: 'linux/arm64' }),
      pullKey({ ...base, plainHttp: true }),
      pullKey({ ...base, keepBlobs: true }),
      pullKey({ ...base, trace: true }),
      pullKey({ ...base, credentials: { username: 'alice', password: 'secret-one' } }),
      pullKey({ ...base, credentials: { username: 'alice', password: 'secret-two' } }),
    ];
    expect(new Set(keys).size).toBe(keys.length);
    expect(pullKey({ ...base, platform: '' })).toBe(pullKey(base));
    expect(keys.join()).not.toMatch(/secret/);
  });
});

describe.skipIf(lacksRegistry())('shared pulls from docker-registry', () => {
  const work = mkdtempSync(join(tmpdir(), 'fastpull-pulls-'));
  let registry: DistributionRegistry;
  let image: BuiltImage;
  let ref = '';
  let n = 0;
  const services: LocalService[] = [];

  /** A manager over a fresh store, and what it reported settling. */
  function setup(): {
    manager: PullManager<PulledImage>;
    service: LocalService;
    outcomes: PullOutcome<PulledImage>[];
    starts: () => number;
    start: StartPull<PulledImage>;
  } {
    const service = new LocalService({ root: join(work, `root-${++n}`) });
    services.push(service);
    const outcomes: PullOutcome<PulledImage>[] = [];
    const manager = new PullManager<PulledImage>({ settled: (o) => outcomes.push(o) });
    let started = 0;
    const start: StartPull<PulledImage> = (signal, onProgress) => {
      started++;
      return service.pull(ref, { signal, onProgress });
    };
    return { manager, service, outcomes, starts: () => started, start };
  }

  beforeAll(async () => {
    registry = await startDistribution({ dir: join(work, 'registry') });
    image = await sampleImage(83, { layers: 3 });
    await pushImage(registry.url, 'pulls/app', 'v1', image);
    ref = formatReference(parseReference(`${registry.host}/pulls/app:v1`));
  });
  afterAll(async () => {
    for (const s of services) await s.close();
    await registry?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  it('callers that join loosen the rate limit and CPU budget the first gave, to the loosest of theirs; none lifts them', async () => {
    const manager = new PullManager();
    const limiters: (RateLimiter | undefined)[] = [];
    const budgets: (PullCpuBudget | undefined)[] = [];
    const ends: (() => void)[] = [];
    // The pull itself is not needed here: a start that hands back what it was given and ends when told.
    const start: StartPull = (signal, _progress, _trace, _ticket, limiter, budget) => {
      limiters.push(limiter);
      budgets.push(budget);
      return new Promise<PullResult>((_resolve, reject) => {
        ends.push(() => reject(new Error('ended by the test')));
        signal.addEventListener('abort', () => reject(signal.reason as Error));
      });
    };
    const limited = [caller(), caller(), caller(), caller()];
    manager.join('limited', ref, start, limited[0]!, { priority: 'low', rateLimit: 1024 * 1024, cpuBudget: 1 });
    const limiter = limiters[0]!;
    const budget = budgets[0]!;
    expect(limiter.bytesPerSecond).toBe(1024 * 1024);
    expect(budget.cores).toBe(1);
    manager.join('limited', ref, start, limited[1]!, { priority: 'low', rateLimit: 2 * 1024 * 1024, cpuBudget: 3 });
    expect(limiter.bytesPerSecond).toBe(2 * 1024 * 1024);
    expect(budget.cores).toBe(3);
    manager.join('limited', ref, start, limited[2]!, { priority: 'low', rateLimit: 512 * 1024, cpuBudget: 2 });
    expect(limiter.bytesPerSecond).toBe(2 * 1024 * 1024);
    expect(budget.cores).toBe(3);
    manager.join('limited', ref, start, limited[3]!);
    expect(limiter.bytesPerSecond).toBe(0);
    expect(budget.cores).toBeUndefined();
    // A first caller without a limit gives the pull none, and a joiner's does not add one.
    const open = [caller(), caller()];
    manager.join('open', ref, start, open[0]!);
    manager.join('open', ref, start, open[1]!, { rateLimit: 1024, cpuBudget: 1 });
    expect(limiters).toEqual([limiter, undefined]);
    expect(budgets).toEqual([budget, undefined]);
    for (const end of ends) end();
    await manager.settled();
    for (const c of [...limited, ...open]) await expect(c.answer).rejects.toThrow('ended by the test');
  });

  it('two callers of one pull share it: one start, one result for both', async () => {
    const { manager, outcomes, starts, start } = setup();
    const a = caller();
    const b = caller();
    expect(manager.join('k', ref, start, a).joined).toBe(false);
    expect(manager.join('k', ref, start, b).joined).toBe(true);
    expect(manager.callers).toBe(2);
    const [ra, rb] = await Promise.all([a.answer, b.answer]);
    expect(starts()).toBe(1);
    expect(ra).toBe(rb);
    expect(ra.image.manifest.digest).toBe(image.manifestDigest);
    expect(outcomes).toHaveLength(1);
    expect(outcomes[0]).toMatchObject({ key: 'k', name: ref, callers: 2 });
    expect(outcomes[0]!.bytesFetched).toBe(image.layers.reduce((s, l) => s + l.size, 0));
    // Both saw the pull's progress, in the same order.
    expect(a.events.length).toBeGreaterThan(image.layers.length);
    expect(b.events).toEqual(a.events);
    expect(manager.size).toBe(0);
    // Settled: the next caller of the key starts a pull of its own.
    const c = caller();
    expect(manager.join('k', ref, start, c).joined).toBe(false);
    await c.answer;
    expect(starts()).toBe(2);
  });

  it("one caller leaving does not stop the other's pull", async () => {
    const { manager, outcomes, start } = setup();
    const a = caller();
    const b = caller();
    const { leave } = manager.join('k', ref, start, a);
    manager.join('k', ref, start, b);
    leave();
    const result = await b.answer;
    expect(result.image.manifest.digest).toBe(image.manifestDigest);
    expect(outcomes[0]!.error).toBeUndefined();
    // The caller that left heard nothing more, not even the answer.
    expect(a.answered).toBe(false);
    expect(a.events).toEqual([]);
  });

  it('the last caller leaving stops the pull, ABORTED', async () => {
    const { manager, outcomes, start } = setup();
    const a = caller();
    manager.join('k', ref, start, a).leave();
    await manager.settled();
    expect(outcomes).toHaveLength(1);
    expect(outcomes[0]!.error).toMatchObject({ code: 'ABORTED' });
    expect(a.answered).toBe(false);
  });

  it('a failed pull reaches every caller, as the same error', async () => {
    const { manager, service, outcomes } = setup();
    const missing = formatReference(parseReference(`${registry.host}/pulls/app:absent`));
    const start: StartPull<PulledImage> = (signal, onProgress) => service.pull(missing, { signal, onProgress });
    const a = caller();
    const b = caller();
    manager.join('missing', missing, start, a);
    manager.join('missing', missing, start, b);
    const [ea, eb] = await Promise.allSettled([a.answer, b.answer]);
    expect(ea.status).toBe('rejected');
    expect(eb.status).toBe('rejected');
    const reason = (ea as PromiseRejectedResult).reason as { code: string };
    expect(reason.code).toBe('NOT_FOUND');
    expect((eb as PromiseRejectedResult).reason).toBe(reason);
    expect(outcomes[0]!.error).toBe(reason);
  });

  it("the snapshotter's pull of an image joins a fastpull.v1 Pull of the same reference", async () => {
    const { manager, service, outcomes, start } = setup();
    const a = caller();
    // The key of Images.Pull without platform, options or credentials, as the handler builds it.
    manager.join(pullKey({ name: ref, plainHttp: false, keepBlobs: false, trace: false }), ref, start, a);
    const forContainerd = sharedSnapshotPuller(manager, service, false)(ref, image.manifestDigest, new AbortController().signal);
    expect(manager.callers).toBe(2);
    const [ra, rb] = await Promise.all([a.answer, forContainerd]);
    expect(rb).toBe(ra);
    expect(outcomes).toHaveLength(1);
    expect(outcomes[0]!.callers).toBe(2);
  });

  it('abortAll stops every running pull with the reason given', async () => {
    const { manager, start } = setup();
    const a = caller();
    manager.join('k', ref, start, a);
    const { FastpullError } = await import('@fastpull/core');
    manager.abortAll(new FastpullError('ABORTED', 'fastpulld is stopping'));
    await expect(a.answer).rejects.toMatchObject({ code: 'ABORTED' });
    await manager.settled();
    expect(manager.size).toBe(0);
  });
});

describe('a caller that joins a running pull', () => {
  it('first gets resolved and each layer’s latest state, then the rest', async () => {
    const loop = await startLoopbackRegistry();
    const root = mkdtempSync(join(tmpdir(), 'fastpull-pulls-late-'));
    const service = new LocalService({ root });
    let release!: () => void;
    try {
      const image = await sampleImage(84, { layers: 2 });
      loop.addImage('late/app', 'v1', image);
      const ref = formatReference(parseReference(`${loop.host}/late/app:v1`));
      // Layer blobs are held back: the pull stays running, resolved, while the second caller joins.
      const layers = new RegExp(`/blobs/(${image.layers.map((l) => l.digest).join('|')})$`);
      loop.faults.hold = { path: layers, until: new Promise<void>((resolve) => (release = resolve)) };
      const manager = new PullManager();
      const start: StartPull = (signal, onProgress) => service.pull(ref, { signal, onProgress });
      const a = caller();
      manager.join('k', ref, start, a);
      await expect.poll(() => a.events.filter((e) => e.type === 'layer').length, { timeout: 120_000 }).toBeGreaterThanOrEqual(image.layers.length);
      const b = caller();
      expect(manager.join('k', ref, start, b).joined).toBe(true);
      // What b missed, at once: resolved, then one event per layer seen so far, by index.
      const seen = new Map<number, PullEvent>();
      for (const e of a.events) if (e.type === 'layer') seen.set(e.index, e);
      expect(b.events[0]).toEqual(a.events.find((e) => e.type === 'resolved'));
      expect(b.events.slice(1)).toEqual([...seen.keys()].sort((x, y) => x - y).map((i) => seen.get(i)));
      release();
      const [ra, rb] = await Promise.all([a.answer, b.answer]);
      expect(rb).toBe(ra);
      // From the join on, b got what a got.
      expect(b.events.slice(1 + seen.size)).toEqual(a.events.slice(a.events.length - (b.events.length - 1 - seen.size)));
    } finally {
      release?.();
      await service.close();
      await loop.close();
      rmSync(root, { recursive: true, force: true });
    }
  });
});
