// Pull priorities: waiting requests are granted by priority, and a low pull starts no layer while a
// pull above it runs, in pulls from a loopback registry whose layer blobs a gate holds back.
import { afterAll, describe, expect, it } from 'vitest';
import { FastpullError } from '../errors.js';
import { FetchScheduler } from '../registry/scheduler.js';
import { sampleImage } from '../testing/sample.js';
import { startLoopbackRegistry, type LoopbackRegistry } from '../testing/registry.js';
import type { BuiltImage } from '../testing/builder.js';
import { UnpackPool } from '../unpack/pool/pool.js';
import { pull } from './pull.js';
import { parsePullPriority, PriorityGate, PullTicket } from './priority.js';
import type { PullEvent } from './types.js';
import { workDir } from './pull.testkit.js';

const work = workDir('priority');
afterAll(() => work.cleanup());

describe('PullTicket and PriorityGate', () => {
  it('parses the three names and refuses others', () => {
    expect(parsePullPriority('LOW', 'x')).toBe('low');
    expect(parsePullPriority(' high ', 'x')).toBe('high');
    expect(() => parsePullPriority('urgent', '--priority')).toThrow(FastpullError);
    expect(() => parsePullPriority(2, '--priority')).toThrow(/--priority 2: want one of high, normal, low/);
  });

  it('raises, never lowers', () => {
    const t = new PullTicket('low');
    t.raise('normal');
    t.raise('low');
    expect(t.priority).toBe('normal');
    expect(t.rank).toBe(1);
  });

  it('holds a low pull while one above it runs, and lets it go when that leaves or it is raised', async () => {
    const gate = new PriorityGate();
    const low = new PullTicket('low');
    const normal = new PullTicket('normal');
    expect(gate.mayStart(low)).toBe(true);
    const leave = gate.enter(normal);
    gate.enter(low);
    expect(gate.mayStart(low)).toBe(false);
    expect(gate.mayStart(normal)).toBe(true);
    expect(gate.counts).toEqual({ high: 0, normal: 1, low: 1 });
    let waited = false;
    const first = gate.whenMayStart(low, undefined, () => (waited = true));
    expect(waited).toBe(true);
    leave();
    await first;
    const again = gate.enter(new PullTicket('high'));
    const second = gate.whenMayStart(low);
    low.raise('high');
    await second;
    again();
    // A withdrawn wait rejects with ABORTED.
    const other = new PullTicket('low');
    const leaveHigh = gate.enter(new PullTicket('high'));
    const ac = new AbortController();
    const third = gate.whenMayStart(other, ac.signal);
    ac.abort(new Error('stop'));
    await expect(third).rejects.toMatchObject({ code: 'ABORTED' });
    leaveHigh();
  });

  it('grants waiting requests of the scheduler by rank, then in arrival order', async () => {
    const s = new FetchScheduler({ maxRequests: 1, maxPerHost: 1 });
    let unblock!: () => void;
    let running!: () => void;
    const blocking = new Promise<void>((r) => (running = r));
    const blocker = s.run('h', 1, () => {
      running();
      return new Promise<void>((r) => (unblock = r));
    });
    await blocking;
    const order: string[] = [];
    const queued = [
      ['normal', { rank: 1 }],
      ['low', { rank: 0 }],
      ['none', undefined],
      ['high', { rank: 2 }],
    ] as const;
    const runs = queued.map(([name, rank]) => s.run('h', 1, async () => void order.push(name), undefined, rank));
    unblock();
    await Promise.all([blocker, ...runs]);
    expect(order).toEqual(['high', 'normal', 'none', 'low']);
  });
});

/**
 * An unpack pool with a slot for every layer of these tests: an unpack pass follows its download and
 * holds its slot while the download is held back, and the shared pool may have a single slot.
 */
const pool = new UnpackPool({ size: 6 });
afterAll(() => pool.close());

/** Serves `images` as `<host>/p/NAME:1` on a fresh loopback registry. */
async function registryWith(images: Record<string, BuiltImage>): Promise<LoopbackRegistry> {
  const reg = await startLoopbackRegistry();
  for (const [name, image] of Object.entries(images)) reg.addImage(`p/${name}`, '1', image);
  return reg;
}

/** Paths of the layer blob requests of `image` the registry has answered, in order. */
function blobRequests(reg: LoopbackRegistry, image: BuiltImage): number[] {
  const digests = new Set(image.layers.map((l) => l.digest));
  const out: number[] = [];
  reg.stats.requests.forEach((r, i) => {
    const m = /\/blobs\/(sha256:[0-9a-f]{64})$/.exec(r.path);
    if (m && digests.has(m[1] as never)) out.push(i);
  });
  return out;
}

/** Resolves once every layer of the pull has reported `waiting` (each has reached the gate). */
function allWaiting(count: number): { onProgress: (e: PullEvent) => void; reached: Promise<void> } {
  const seen = new Set<number>();
  let reach!: () => void;
  const reached = new Promise<void>((r) => (reach = r));
  return {
    reached,
    onProgress: (e) => {
      if (e.type === 'layer' && e.state === 'waiting') seen.add(e.index);
      if (seen.size === count) reach();
    },
  };
}

describe('pulls by priority', () => {
  it('a low pull fetches no layer while a normal pull runs, then completes after it', async () => {
    const a = await sampleImage(501, { layers: 2 });
    const b = await sampleImage(502, { layers: 3 });
    const reg = await registryWith({ a, b });
    try {
      const gate = new PriorityGate();
      let release!: () => void;
      reg.faults.hold = { path: new RegExp(a.layers.map((l) => l.digest).join('|')), until: new Promise<void>((r) => (release = r)) };
      const pullA = pull(`${reg.host}/p/a:1`, { root: `${work.dir}/low-waits`, priorityGate: gate, pool });
      const watch = allWaiting(b.layers.length);
      const pullB = pull(`${reg.host}/p/b:1`, { root: `${work.dir}/low-waits`, priorityGate: gate, pool, priority: 'low', onProgress: watch.onProgress });
      await watch.reached;
      // Every layer of b stands at the gate: none of its blobs has been asked for.
      expect(blobRequests(reg, b)).toEqual([]);
      expect(gate.counts).toEqual({ high: 0, normal: 1, low: 1 });
      release();
      await pullA;
      const { image } = await pullB;
      expect(image.layers.map((l) => l.digest)).toEqual(b.layers.map((l) => l.digest));
      const first = Math.min(...blobRequests(reg, b));
      expect(first).toBeGreaterThan(Math.max(...blobRequests(reg, a)));
      expect(gate.counts).toEqual({ high: 0, normal: 0, low: 0 });
    } finally {
      await reg.close();
    }
  });

  it('a normal pull beside another does not wait for it (the gate is what held the low one)', async () => {
    const a = await sampleImage(503, { layers: 2 });
    const b = await sampleImage(504, { layers: 2 });
    const reg = await registryWith({ a, b });
    try {
      const gate = new PriorityGate();
      let release!: () => void;
      reg.faults.hold = { path: new RegExp(a.layers.map((l) => l.digest).join('|')), until: new Promise<void>((r) => (release = r)) };
      const pullA = pull(`${reg.host}/p/a:1`, { root: `${work.dir}/normal`, priorityGate: gate, pool });
      // b completes while every layer blob of a is still held back.
      await pull(`${reg.host}/p/b:1`, { root: `${work.dir}/normal`, priorityGate: gate, pool, priority: 'normal' });
      expect(blobRequests(reg, a)).toEqual([]);
      release();
      await pullA;
    } finally {
      await reg.close();
    }
  });

  it('a low pull raised while it waits goes on at once', async () => {
    const a = await sampleImage(505, { layers: 2 });
    const b = await sampleImage(506, { layers: 2 });
    const reg = await registryWith({ a, b });
    try {
      const gate = new PriorityGate();
      let release!: () => void;
      reg.faults.hold = { path: new RegExp(a.layers.map((l) => l.digest).join('|')), until: new Promise<void>((r) => (release = r)) };
      const pullA = pull(`${reg.host}/p/a:1`, { root: `${work.dir}/raised`, priorityGate: gate, pool });
      const ticket = new PullTicket('low');
      const watch = allWaiting(b.layers.length);
      const pullB = pull(`${reg.host}/p/b:1`, { root: `${work.dir}/raised`, priorityGate: gate, pool, priority: ticket, onProgress: watch.onProgress });
      await watch.reached;
      expect(blobRequests(reg, b)).toEqual([]);
      ticket.raise('high');
      await pullB;
      expect(blobRequests(reg, a)).toEqual([]);
      release();
      await pullA;
    } finally {
      await reg.close();
    }
  });

  it('layers a low pull has started go on beside a normal pull that needs them too, each fetched once', async () => {
    // Two images over the same two first layers: the low pull has them in hand when the normal one comes.
    const low = await sampleImage(507, { layers: 3 });
    const normal = await sampleImage(507, { layers: 2 });
    expect(normal.layers.map((l) => l.digest)).toEqual(low.layers.slice(0, 2).map((l) => l.digest));
    const reg = await registryWith({ low, normal });
    try {
      const gate = new PriorityGate();
      let release!: () => void;
      reg.faults.hold = { path: new RegExp(low.layers.map((l) => l.digest).join('|')), until: new Promise<void>((r) => (release = r)) };
      const fetching = new Set<number>();
      let started!: () => void;
      const allFetching = new Promise<void>((r) => (started = r));
      const root = `${work.dir}/shared`;
      const pullLow = pull(`${reg.host}/p/low:1`, {
        root,
        priorityGate: gate,
        pool,
        priority: 'low',
        onProgress: (e) => {
          if (e.type === 'layer' && e.state === 'fetching') fetching.add(e.index);
          if (fetching.size === low.layers.length) started();
        },
      });
      await allFetching;
      const pullNormal = pull(`${reg.host}/p/normal:1`, { root, priorityGate: gate, pool });
      release();
      await Promise.all([pullLow, pullNormal]);
      for (const l of low.layers) expect(reg.stats.blobBytesServed(l.digest), l.digest).toBe(l.size);
    } finally {
      await reg.close();
    }
  });
});
