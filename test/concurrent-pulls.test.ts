// Two processes pulling the same image into one store at once: each layer is fetched and unpacked once.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openStore } from '@fastpull/core';
import { sampleImage, startLoopbackRegistry } from '@fastpull/core/testing';
import { corruptBlobs, ls, runCliAsync as cli, tempDir } from './helpers.js';

const work = tempDir('concurrent');
afterAll(() => work.cleanup());

describe('concurrent pulls into one store', () => {
  it('unpacks each layer once across two processes, and both succeed', async () => {
    const image = await sampleImage(77, { layers: 4 });
    const reg = await startLoopbackRegistry();
    try {
      reg.addImage('c/app', '1', image);
      reg.faults.bytesPerSecond = 2 * 1024 * 1024;
      const root = join(work.dir, 'root');
      const ref = `${reg.host}/c/app:1`;
      // The layer blobs are held back until both processes hold a lease on the store (a pull takes
      // one once it has resolved the image, before it looks at any layer): so both are pulling at
      // once, whatever the machine's load, and the layers are theirs to race for.
      let release!: () => void;
      reg.faults.hold = { path: new RegExp(image.layers.map((l) => l.digest).join('|')), until: new Promise<void>((r) => (release = r)) };
      const leases = () => ls(join(root, 'leases')).filter((id) => existsSync(join(root, 'leases', id, 'refs.json'))).length;
      const pulls = Promise.all([cli(['pull', '--root', root, ref]), cli(['pull', '--root', root, ref])]);
      let held = 0;
      for (const deadline = Date.now() + 60_000; held < 2 && Date.now() < deadline;) {
        await new Promise((r) => setTimeout(r, 20));
        held = leases();
      }
      release();
      const [a, b] = await pulls;
      expect(held, 'leases held on the store at once').toBe(2);
      expect(a.status, a.stderr).toBe(0);
      expect(b.status, b.stderr).toBe(0);
      const lines = `${a.stderr}\n${b.stderr}`.split('\n');
      const distinct = new Map(image.layers.map((l) => [l.digest.slice(7, 19), l]));
      for (const [short, layer] of distinct) {
        const unpacked = lines.filter((l) => l.includes(`${short}: pull complete`)).length;
        const existed = lines.filter((l) => l.includes(`${short}: already exists`)).length;
        expect(unpacked + existed, short).toBe(2 * image.layers.filter((x) => x.digest === layer.digest).length);
        expect(unpacked, `${short} unpacked ${unpacked} times`).toBe(1);
        expect(reg.stats.blobBytesServed(layer.digest)).toBe(layer.size);
      }
      const store = openStore(root);
      expect((await store.images.list()).map((i) => i.name)).toEqual([ref]);
      expect(ls(join(root, 'snapshots', 'active'))).toEqual([]);
      expect(ls(join(root, 'content', 'ingest'))).toEqual([]);
      expect(corruptBlobs(root)).toEqual([]);
    } finally {
      await reg.close();
    }
  });
});
