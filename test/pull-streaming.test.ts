// The unpacker follows the download: extraction begins before the registry has sent the whole blob.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openStore, pull } from '@fastpull/core';
import { buildImage, Prng, startLoopbackRegistry, type LayerEntry } from '@fastpull/core/testing';
import { ls, tempDir } from './helpers.js';

const work = tempDir('stream');
afterAll(() => work.cleanup());

/** Files extracted so far into any active snapshot of the store. */
function extractedFiles(root: string): number {
  const active = join(root, 'snapshots', 'active');
  return ls(active).reduce((n, id) => n + ls(join(active, id, 'fs', 'data')).length, 0);
}

describe('streaming unpack', () => {
  it('extracts while the blob is still arriving, then verifies and commits', async () => {
    const prng = new Prng(3);
    const files: LayerEntry[] = Array.from({ length: 64 }, (_, i) => ({ type: 'file', path: `data/f${i}`, content: prng.bytes(16 * 1024) }));
    const image = await buildImage({ layers: [files] });
    const layer = image.layers[0]!;
    const reg = await startLoopbackRegistry();
    try {
      reg.addImage('s/app', '1', image);
      // About two seconds for the blob: plenty of time to look inside the active snapshot.
      reg.faults.bytesPerSecond = Math.ceil(layer.size / 2);
      const root = join(work.dir, 'root');
      let seenEarly: { files: number; served: number } | undefined;
      const watch = setInterval(() => {
        const files = extractedFiles(root);
        const served = reg.stats.blobBytesServed(layer.digest);
        if (!seenEarly && files > 0 && served < layer.size) seenEarly = { files, served };
      }, 20);
      try {
        const { image: rec } = await pull(`${reg.host}/s/app:1`, { root });
        expect(rec.layers[0]!.digest).toBe(layer.digest);
      } finally {
        clearInterval(watch);
      }
      expect(seenEarly, 'no file was extracted before the last byte was served').toBeDefined();
      expect(seenEarly!.served).toBeLessThan(layer.size);
      expect(await openStore(root).snapshots.isCommitted(layer.diffID)).toBe(true);
      expect(readdirSync(join(openStore(root).snapshots.fsPath(layer.diffID), 'data'))).toHaveLength(64);
    } finally {
      await reg.close();
    }
  });
});
