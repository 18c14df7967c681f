import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { buildImage } from '../testing/builder.js';
import { Prng } from '../testing/prng.js';
import { UnpackPool } from '../unpack/index.js';
import { nativePunchHole } from '../native/addon.js';
import { READER_DONE, WatermarkView } from '../content/watermark.js';
import { LayerDownload, RELEASE_LEAD, RELEASE_STEP } from './download.js';
import { LayerProgress } from './progress.js';
import { downloadContext, freshStore, serve, statesByLayer, workDir } from './pull.testkit.js';
import type { PullEvent } from './types.js';
import { lacks } from '../testing/needs.js';

const work = workDir('download');
afterAll(() => work.cleanup());
const ingests = async (root: string) => readdir(join(root, 'content', 'ingest')).catch(() => [] as string[]);

describe('LayerDownload', () => {
  const prng = new Prng(77);

  it('fetches a blob into an ingest the unpacker can follow, and commits it when kept', async () => {
    const image = await buildImage({ layers: [[{ type: 'file', path: 'f', content: prng.bytes(300 * 1024) }]], compression: 'none' });
    const served = await serve(image);
    try {
      const store = freshStore(work.dir, 'keep');
      const ctx = downloadContext(served, store);
      const layer = served.layers[0]!;
      const events: PullEvent[] = [];
      const d = await LayerDownload.start(
        { ...ctx, options: { chunkSize: 64 * 1024 } },
        layer,
        layer,
        new LayerProgress({ index: 0, ...layer }, (e) => events.push(e)),
      );
      expect(d.fromStore).toBe(false);
      expect(d.downloading).toBe(true);
      expect(await d.done).toBeGreaterThan(0);
      expect(d.watermark.value).toBe(layer.size);
      expect(readFileSync(d.blobPath).equals(image.layers[0]!.blob)).toBe(true);
      const states = statesByLayer(events).get(0)!;
      expect(states[0]).toBe('fetching');
      expect(events.at(-1)).toMatchObject({ state: 'fetching', bytes: layer.size });
      await d.keep(layer.digest);
      expect(d.downloading).toBe(false);
      await d.close(false);
      expect(await store.content.info(layer.digest)).toEqual({ digest: layer.digest, size: layer.size });
      expect(await ingests(store.root)).toEqual([]);
      ctx.watch.stop();
    } finally {
      await served.close();
    }
  });

  it('keeps what landed when stopped from outside, and the next download resumes from it', async () => {
    const image = await buildImage({ layers: [[{ type: 'file', path: 'f', content: prng.bytes(1024 * 1024) }]], compression: 'none' });
    const served = await serve(image);
    try {
      const store = freshStore(work.dir, 'resume');
      const layer = served.layers[0]!;
      served.reg.faults.bytesPerSecond = 1024 * 1024;
      const stop = new AbortController();
      const ctx = downloadContext(served, store, stop.signal);
      const first = await LayerDownload.start(
        { ...ctx, options: { chunkSize: 64 * 1024 } },
        layer,
        layer,
        new LayerProgress({ index: 0, ...layer }, undefined),
      );
      while (served.reg.stats.blobBytesServed(layer.digest) < 256 * 1024) await new Promise((r) => setTimeout(r, 20));
      stop.abort();
      await expect(first.done).rejects.toMatchObject({ code: 'ABORTED' });
      await first.close(true);
      expect(await ingests(store.root)).toHaveLength(1);
      ctx.watch.stop();

      served.reg.faults = {};
      // The registry may still be writing into the connections the stop cut: let it see that.
      let before = -1;
      while (before !== served.reg.stats.blobBytesServed(layer.digest)) {
        before = served.reg.stats.blobBytesServed(layer.digest);
        await new Promise((r) => setTimeout(r, 300));
      }
      const events: PullEvent[] = [];
      const again = downloadContext(served, store);
      const second = await LayerDownload.start(again, layer, layer, new LayerProgress({ index: 0, ...layer }, (e) => events.push(e)));
      await second.done;
      const resumed = events[0]!.type === 'layer' ? events[0]!.bytes : 0;
      expect(resumed).toBeGreaterThan(0);
      expect(served.reg.stats.blobBytesServed(layer.digest) - before).toBeLessThanOrEqual(layer.size - resumed);
      expect(readFileSync(second.blobPath).equals(image.layers[0]!.blob)).toBe(true);
      // Failed itself (not stopped from outside): what it downloaded goes.
      await second.close(false);
      expect(await ingests(store.root)).toEqual([]);
      again.watch.stop();
    } finally {
      await served.close();
    }
  });

  it.skipIf(lacks('addon', nativePunchHole() === undefined ? 'the native addon (punchHole) is not built' : undefined))(
    'lets the unpacker free what it hashed; a download stopped after that fetches those bytes again on resume',
    async () => {
      const image = await buildImage({ layers: [[{ type: 'file', path: 'f', content: prng.bytes(2 * 1024 * 1024) }]], compression: 'none' });
      const served = await serve(image);
      const pool = new UnpackPool({ size: 1, threads: false });
      try {
        const store = freshStore(work.dir, 'release');
        const layer = served.layers[0]!;
        // Paced, so that the download lasts several of the ingest's grants: ranges come at 4 MiB/s
        // each, and the one before the last at 512 KiB/s, so that the pass, which frees what it
        // hashed, is still running with the download incomplete for many grants, however fast
        // the other ranges land side by side.
        served.reg.faults.bytesPerSecond = 4 * 1024 * 1024;
        served.reg.faults.slowRange = { start: (Math.ceil(layer.size / (256 * 1024)) - 2) * 256 * 1024, bytesPerSecond: 512 * 1024 };
        const ctx = downloadContext(served, store);
        const first = await LayerDownload.start(
          { ...ctx, options: { chunkSize: 256 * 1024 } },
          layer,
          layer,
          new LayerProgress({ index: 0, ...layer }, undefined),
        );
        expect(first.releasing(true)).toBeUndefined(); // a kept blob is never freed
        expect(first.releasing(false)).toEqual({ step: RELEASE_STEP, lead: RELEASE_LEAD });
        // The tuning that keeps every byte (to measure the difference) frees nothing.
        const keeping = downloadContext(served, freshStore(work.dir, 'release-off'));
        const off = await LayerDownload.start(
          { ...keeping, options: { chunkSize: 256 * 1024, tuning: { blobRelease: false } } },
          layer,
          layer,
          new LayerProgress({ index: 0, ...layer }, undefined),
        );
        expect(off.releasing(false)).toBeUndefined();
        await off.close(false);
        keeping.watch.stop();
        const dest = join(work.dir, 'release-fs');
        mkdirSync(dest);
        // Smaller steps than a pull's, and no lead: the unpacker frees as soon as it is granted.
        const r = await pool.run({
          blobPath: first.blobPath,
          mediaType: layer.mediaType,
          dest,
          follow: { watermark: first.watermark.buffer, size: layer.size, release: { step: 64 * 1024, lead: 0 } },
        });
        expect(r.blobDigest).toBe(layer.digest);
        expect(r.releasedBytes).toBeGreaterThan(0);
        await first.done;
        // Stopped from outside before its commit: put away for a resume, without the freed bytes.
        await first.close(true);
        ctx.watch.stop();
        served.reg.faults = {};
        const before = served.reg.stats.blobBytesServed(layer.digest);
        const events: PullEvent[] = [];
        const again = downloadContext(served, store);
        const second = await LayerDownload.start(again, layer, layer, new LayerProgress({ index: 0, ...layer }, (e) => events.push(e)));
        await second.done;
        const resumed = events[0]!.type === 'layer' ? events[0]!.bytes : 0;
        expect(resumed).toBeLessThanOrEqual(layer.size - r.releasedBytes);
        expect(served.reg.stats.blobBytesServed(layer.digest) - before).toBeGreaterThanOrEqual(r.releasedBytes);
        expect(readFileSync(second.blobPath).equals(image.layers[0]!.blob)).toBe(true);
        await second.close(false);
        again.watch.stop();
      } finally {
        await pool.close();
        await served.close();
      }
    },
  );

  it('reads a blob already in the store without a request, and drops it only when it is damaged', async () => {
    const image = await buildImage({ layers: [[{ type: 'file', path: 'f', content: 'stored' }]] });
    const served = await serve(image);
    try {
      const store = freshStore(work.dir, 'stored');
      const layer = served.layers[0]!;
      await store.content.putBytes(layer, image.layers[0]!.blob);
      served.reg.stats.reset();
      const ctx = downloadContext(served, store);
      const events: PullEvent[] = [];
      const d = await LayerDownload.start(ctx, layer, layer, new LayerProgress({ index: 0, ...layer }, (e) => events.push(e)));
      expect(d.fromStore).toBe(true);
      expect(d.blobPath).toBe(store.content.blobPath(layer.digest));
      expect(d.watermark.value).toBe(layer.size);
      expect(await d.done).toBe(0);
      expect(events).toEqual([]);
      expect(served.reg.stats.requests).toEqual([]);
      await d.dropDamaged();
      expect(existsSync(store.content.blobPath(layer.digest))).toBe(false);
      await d.close(false);
      ctx.watch.stop();
    } finally {
      await served.close();
    }
  });

  it('holds a blob it frees behind the unpack pass to within the download lead of what the pass has read, and runs free once the pass is done or the blob is kept', async () => {
    const image = await buildImage({ layers: [[{ type: 'file', path: 'f', content: prng.bytes(2 * 1024 * 1024) }]], compression: 'none' });
    const served = await serve(image);
    try {
      const layer = served.layers[0]!;
      const chunk = 64 * 1024;
      const lead = 256 * 1024;
      // The download is quiet once every byte before the first range it holds back has landed: then
      // nothing more comes until the pass reads on. Looked at on each landing, and at a bound of
      // ticks when nothing lands (a held range is only seen, not announced).
      const landedUntilHeld = async (d: LayerDownload, past: number) => {
        for (let looks = 0; looks < 6000; looks++) {
          const held = d.heldFrom;
          if (held !== undefined && held > past && d.watermark.value === held) return held;
          await d.watermark.waitPast(d.watermark.value, 10);
        }
        throw new Error(`the download never settled behind a held range: landed ${d.watermark.value}, held from ${d.heldFrom}`);
      };

      // Many ranges held at once each wait on the download's signal: that is no leak to warn of.
      const warnings: string[] = [];
      const onWarning = (w: Error) => void warnings.push(w.name);
      process.on('warning', onWarning);
      const ctx = downloadContext(served, freshStore(work.dir, 'paced'));
      const d = await LayerDownload.start(
        { ...ctx, options: { chunkSize: chunk, tuning: { downloadLead: lead } } },
        layer,
        layer,
        new LayerProgress({ index: 0, ...layer }, undefined),
      );
      expect(d.releasing(false)).toBeDefined();
      // No pass has read anything: ranges that start past the lead wait.
      const first = await landedUntilHeld(d, 0);
      expect(first).toBeGreaterThan(lead);
      expect(first).toBeLessThanOrEqual(lead + chunk);
      const reader = new WatermarkView(d.watermark.buffer);
      reader.setReader(1024 * 1024);
      const second = await landedUntilHeld(d, first);
      expect(second).toBeGreaterThan(1024 * 1024 + lead);
      expect(second).toBeLessThanOrEqual(1024 * 1024 + lead + chunk);
      // A pass that frees nothing more lets the rest come.
      reader.setReader(READER_DONE);
      await d.done;
      expect(d.watermark.value).toBe(layer.size);
      await d.close(false);
      ctx.watch.stop();
      process.off('warning', onWarning);
      expect(d.heldFrom).toBeUndefined();
      expect(warnings).not.toContain('MaxListenersExceededWarning');

      // A blob that is kept is never held back.
      const kept = downloadContext(served, freshStore(work.dir, 'paced-kept'));
      const k = await LayerDownload.start(
        { ...kept, options: { chunkSize: chunk, tuning: { downloadLead: lead } } },
        layer,
        layer,
        new LayerProgress({ index: 0, ...layer }, undefined),
      );
      expect(k.releasing(true)).toBeUndefined();
      await k.done;
      expect(k.watermark.value).toBe(layer.size);
      await k.close(false);
      kept.watch.stop();
    } finally {
      await served.close();
    }
  });
});
