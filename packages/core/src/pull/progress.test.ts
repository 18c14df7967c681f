import { afterAll, describe, expect, it } from 'vitest';
import type { Digest } from '../oci/digest.js';
import { buildImage, type LayerEntry } from '../testing/builder.js';
import { Prng } from '../testing/prng.js';
import { pull, pullEvents } from './pull.js';
import { freshStore, serve, statesByLayer, workDir } from './pull.testkit.js';
import { LayerProgress, PROGRESS_STEP } from './progress.js';
import type { LayerState, PullEvent } from './types.js';

const work = workDir('progress');
afterAll(() => work.cleanup());

/** The order the docs give; `exists` ends a layer that was already there. */
const ORDER: readonly LayerState[] = ['waiting', 'fetching', 'extracting', 'verifying', 'committed'];

/** Fails unless every layer's states only move forward and its bytes say what the docs say. */
function expectForwardOnly(events: readonly PullEvent[], context: string): void {
  const last = new Map<number, { state: LayerState; bytes: number; unpacked?: number }>();
  for (const e of events) {
    if (e.type !== 'layer') continue;
    const prev = last.get(e.index);
    const where = `${context}: layer ${e.index} ${prev?.state ?? '(start)'} -> ${e.state}`;
    if (prev?.state === 'exists' || prev?.state === 'committed') throw new Error(`${where}: an event after the last state`);
    if (e.state === 'exists') {
      expect(prev === undefined || prev.state === 'waiting', where).toBe(true);
    } else if (prev) {
      const [a, b] = [ORDER.indexOf(prev.state), ORDER.indexOf(e.state)];
      // The same state again only to report more fetched bytes, or more bytes the pass consumed.
      if (a === b && e.state === 'extracting') expect(e.unpacked!, where).toBeGreaterThan(prev.unpacked!);
      else if (a === b) expect(e.state === 'fetching' && e.bytes > prev.bytes, where).toBe(true);
      else expect(b, where).toBeGreaterThan(a);
      // The pass read the whole blob before the layer leaves extracting.
      if (prev.state === 'extracting' && e.state !== 'extracting') expect(prev.unpacked, where).toBe(e.total);
    }
    if (e.state === 'waiting') expect(e.bytes, where).toBe(0);
    if (e.state === 'fetching') expect(e.bytes, where).toBeLessThanOrEqual(e.total);
    if (['extracting', 'verifying', 'committed', 'exists'].includes(e.state)) expect(e.bytes, where).toBe(e.total);
    if (e.state === 'extracting') {
      expect(e.unpacked, where).toBeGreaterThanOrEqual(0);
      expect(e.unpacked, where).toBeLessThanOrEqual(e.total);
    } else {
      expect(e.unpacked, where).toBeUndefined();
    }
    last.set(e.index, { state: e.state, bytes: e.bytes, ...(e.unpacked !== undefined ? { unpacked: e.unpacked } : {}) });
  }
  for (const [index, { state }] of last) expect(['committed', 'exists'], `${context}: layer ${index} ended ${state}`).toContain(state);
}

describe('LayerProgress', () => {
  const layer = { index: 2, digest: `sha256:${'a'.repeat(64)}` as Digest, size: 10 * PROGRESS_STEP };
  const record = () => {
    const events: PullEvent[] = [];
    let now = 0;
    const p = new LayerProgress(
      layer,
      (e) => events.push(e),
      () => now,
    );
    const states = () => events.map((e) => (e.type === 'layer' ? `${e.state}:${e.bytes}` : e.type));
    return { p, states, events, tick: (ms: number) => (now += ms) };
  };

  it('is extracting only once the download is done, whichever of the two signals comes first', () => {
    const a = record();
    a.p.waiting();
    a.p.fetchStarted(0);
    a.p.unpackStarted(); // the pass follows the download
    a.p.fetched(PROGRESS_STEP);
    a.p.fetched(layer.size - PROGRESS_STEP);
    a.p.fetchDone();
    a.p.verifying();
    a.p.committed();
    expect(a.states()).toEqual([
      'waiting:0',
      'fetching:0',
      `fetching:${PROGRESS_STEP}`,
      `fetching:${layer.size}`,
      `extracting:${layer.size}`,
      `verifying:${layer.size}`,
      `committed:${layer.size}`,
    ]);

    const b = record();
    b.p.fetchStarted(0);
    b.p.fetched(layer.size);
    b.p.fetchDone(); // all in, but no unpack slot yet
    b.p.unpackStarted();
    expect(b.states()).toEqual(['fetching:0', `fetching:${layer.size}`, `extracting:${layer.size}`]);
  });

  it('never goes back, repeats no state, and drops fetched bytes past fetching', () => {
    const r = record();
    r.p.waiting();
    r.p.waiting();
    r.p.fetchStarted(3);
    r.p.fetched(layer.size - 3);
    r.p.fetchDone();
    r.p.unpackStarted();
    r.p.fetched(1); // a late report: the layer is past fetching
    r.p.waiting();
    r.p.fetchStarted(0);
    r.p.verifying();
    r.p.unpackStarted();
    r.p.committed();
    r.p.exists();
    expect(r.states()).toEqual([
      'waiting:0',
      'fetching:3',
      `fetching:${layer.size}`,
      `extracting:${layer.size}`,
      `verifying:${layer.size}`,
      `committed:${layer.size}`,
    ]);
    expect(r.p.state).toBe('committed');
  });

  it('reports fetched bytes every PROGRESS_STEP bytes or after an interval, not per chunk', () => {
    const r = record();
    r.p.fetchStarted(0);
    for (let i = 0; i < 64; i++) r.p.fetched(PROGRESS_STEP / 16); // 4 steps' worth, no time passing
    r.tick(150);
    r.p.fetched(1); // slow bytes still show after the interval
    expect(r.states()).toEqual(['fetching:0', ...[1, 2, 3, 4].map((k) => `fetching:${k * PROGRESS_STEP}`), `fetching:${4 * PROGRESS_STEP + 1}`]);
  });

  it('reports the bytes the unpack pass consumed while extracting: kept until then, every step or interval, always the end', () => {
    const r = record();
    const unpacked = () => r.events.filter((e) => e.type === 'layer' && e.state === 'extracting').map((e) => (e.type === 'layer' ? e.unpacked : -1));
    r.p.fetchStarted(0);
    r.p.unpackStarted(); // follows the download
    r.p.unpackProgress(PROGRESS_STEP / 2); // not news while the download runs
    r.p.fetched(layer.size);
    expect(unpacked()).toEqual([]);
    r.p.fetchDone();
    expect(unpacked()).toEqual([PROGRESS_STEP / 2]);
    r.p.unpackProgress(PROGRESS_STEP); // half a step, no time: nothing
    r.p.unpackProgress(PROGRESS_STEP / 4); // backwards: ignored
    r.p.unpackProgress(PROGRESS_STEP * 2); // a step and a half since the last report
    r.tick(150);
    r.p.unpackProgress(PROGRESS_STEP * 2 + 1); // a byte, but after the interval
    r.p.unpackProgress(PROGRESS_STEP * 3); // no step, no time: nothing
    r.p.unpackProgress(layer.size); // the end always shows
    r.p.unpackProgress(layer.size);
    r.p.verifying();
    r.p.unpackProgress(layer.size + 1); // past extracting: nothing
    expect(unpacked()).toEqual([PROGRESS_STEP / 2, PROGRESS_STEP * 2, PROGRESS_STEP * 2 + 1, layer.size]);
    expect(r.events.filter((e) => e.type === 'layer' && e.state !== 'extracting' && e.unpacked !== undefined)).toEqual([]);

    // A stored blob: extracting at once, from 0.
    const s = record();
    s.p.waiting();
    s.p.unpackStarted();
    s.p.unpackProgress(layer.size);
    expect(s.events.map((e) => (e.type === 'layer' ? `${e.state}:${e.unpacked}` : ''))).toEqual([
      'waiting:undefined',
      'extracting:0',
      `extracting:${layer.size}`,
    ]);
  });

  it('goes from waiting to extracting for a blob already in the store, and to exists for a layer already unpacked', () => {
    const a = record();
    a.p.waiting();
    a.p.unpackStarted();
    a.p.fetchDone();
    expect(a.states()).toEqual(['waiting:0', `extracting:${layer.size}`]);
    const b = record();
    b.p.waiting();
    b.p.exists();
    expect(b.states()).toEqual(['waiting:0', `exists:${layer.size}`]);
  });
});

describe('layer states of real pulls', () => {
  const prng = new Prng(31);
  const big = (dir: string): LayerEntry[] =>
    Array.from({ length: 4 }, (_, i) => ({ type: 'file' as const, path: `${dir}/f${i}`, content: prng.bytes(128 * 1024) }));

  it('only move forward for every layer: downloads the unpacker follows, stored blobs, layers already there', async () => {
    const base = big('base');
    const image = await buildImage({ layers: [base, big('mid'), big('top'), [{ type: 'file', path: 'small', content: 'x' }]] });
    const other = await buildImage({ layers: [base, big('other')] });
    const served = await serve(image);
    served.reg.addImage('steps/other', '1', other);
    try {
      const root = freshStore(work.dir, 'forward').root;
      // Paced and in 64 KiB ranges: every unpacker starts long before its download ends.
      served.reg.faults.bytesPerSecond = 4 * 1024 * 1024;
      const first: PullEvent[] = [];
      await pull(served.refText, { root, plainHttp: true, chunkSize: 64 * 1024, onProgress: (e) => first.push(e) });
      expectForwardOnly(first, 'first pull');
      const states = statesByLayer(first);
      for (let i = 0; i < 3; i++) expect(states.get(i), `layer ${i}`).toEqual(expect.arrayContaining(['fetching', 'extracting', 'verifying', 'committed']));
      // The unpacker did start while bytes were still arriving (what made states go back before).
      expect(served.reg.stats.requests.filter((r) => r.range !== undefined).length).toBeGreaterThan(10);

      // A layer shared with the image pulled: exists; a blob in the store already: no fetching.
      served.reg.faults = {};
      const store = freshStore(work.dir, 'forward');
      const own = other.layers[1]!;
      await store.content.putBytes(own, own.blob);
      const second: PullEvent[] = [];
      for await (const e of pullEvents(`${served.reg.host}/steps/other:1`, { root, plainHttp: true })) second.push(e);
      expectForwardOnly(second, 'second pull');
      expect(statesByLayer(second).get(0)).toEqual(['exists']);
      expect(statesByLayer(second).get(1)).toEqual(['waiting', 'extracting', 'verifying', 'committed']);
    } finally {
      await served.close();
    }
  });
});
