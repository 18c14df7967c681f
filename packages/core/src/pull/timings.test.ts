import { afterAll, describe, expect, it } from 'vitest';
import type { Digest } from '../oci/digest.js';
import { sampleImage } from '../testing/sample.js';
import { pull } from './pull.js';
import { freshStore, serve, workDir } from './pull.testkit.js';
import { isalAvailable } from '../unpack/decompress/isal.js';
import { FileSink } from '../unpack/filesink.js';
import { nativeHash } from '../native/addon.js';
import { committedTimings, existsTimings, phaseTotals, pullTimings } from './timings.js';

const work = workDir('timings');
afterAll(() => work.cleanup());
const d = (c: string) => `sha256:${c.repeat(64)}` as Digest;

describe('pull timings', () => {
  it('sums per-layer phases only; resolving is once per pull and stays out of the sums', () => {
    const unpack = {
      timings: {
        totalMs: 40,
        waitMs: 5,
        verifyMs: 10,
        decompressMs: 15,
        extractMs: 10,
        hashMode: 'pool' as const,
        blobHashCpuMs: 3,
        tarHashCpuMs: 7,
        inflateCpuMs: 0,
        writerCpuMs: 0,
      },
    };
    const layers = [
      committedTimings(d('a'), 100, { ...unpack, releasedBytes: 0 }, 3),
      committedTimings(d('b'), 50, { ...unpack, checkpointsUsed: 4, releasedBytes: 8192 }, 2),
      existsTimings(d('c')),
    ];
    expect(layers[1]).toMatchObject({
      unpackMs: 40,
      ztocCheckpoints: 4,
      state: 'committed',
      blobHashCpuMs: 3,
      tarHashCpuMs: 7,
      inflateCpuMs: 0,
      writerCpuMs: 0,
      releasedBytes: 8192,
    });
    expect(layers[0]).not.toHaveProperty('threadCpuMs');
    expect(layers[0]).not.toHaveProperty('releasedBytes'); // none freed
    expect(layers[2]).toEqual({ digest: d('c'), fetchMs: 0, unpackMs: 0, waitMs: 0, verifyMs: 0, decompressMs: 0, extractMs: 0, commitMs: 0, state: 'exists' });
    expect(phaseTotals(layers)).toEqual({ fetchMs: 150, verifyMs: 20, decompressMs: 30, extractMs: 20, commitMs: 5 });
    const t = pullTimings(7, performance.now() - 1000, layers);
    expect(t.resolveMs).toBe(7);
    expect(t.totalMs).toBeGreaterThanOrEqual(1000);
    expect(Object.keys(t.phases)).not.toContain('resolveMs');
  });

  it('of a real pull: every layer timed, the phases their sums, resolve apart', async () => {
    const served = await serve(await sampleImage(5, { layers: 3 }));
    try {
      const { timings } = await pull(served.refText, { root: freshStore(work.dir, 'real').root, plainHttp: true });
      expect(timings.layers.map((l) => l.digest)).toEqual(served.layers.map((l) => l.digest));
      expect(timings.phases).toEqual(phaseTotals(timings.layers));
      expect(timings.resolveMs).toBeGreaterThan(0);
      expect(timings.totalMs).toBeGreaterThanOrEqual(timings.resolveMs);
      for (const l of timings.layers) {
        expect(l.fetchMs, l.digest).toBeGreaterThan(0);
        // Each stage's CPU, from its own thread's clock, reaches the pull's timings.
        expect(l.blobHashCpuMs, l.digest).toBeGreaterThan(0);
        expect(l.tarHashCpuMs, l.digest).toBeGreaterThan(0);
        if (nativeHash()) expect(l.threadCpuMs, l.digest).toBeGreaterThan(0);
        // The default inflater is in-process ISA-L where it is built, and it has a clock; node:zlib has none.
        if (isalAvailable()) expect(l.inflateCpuMs, l.digest).toBeGreaterThan(0);
        else expect(l, l.digest).not.toHaveProperty('inflateCpuMs');
        if (!FileSink.clocked()) expect(l, l.digest).not.toHaveProperty('writerCpuMs');
      }
      if (FileSink.clocked()) {
        // The base layer's small files went to the writer threads; the third layer is empty.
        expect(timings.layers[0]!.writerCpuMs).toBeGreaterThan(0);
        expect(timings.layers[2]!.writerCpuMs).toBe(0);
      }
    } finally {
      await served.close();
    }
  });
});
