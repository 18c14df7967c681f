// A pull killed with SIGKILL in the middle leaves nothing visible; the next pull resumes its
// downloads (fetching only what is missing), removes its half-extracted snapshots and whatever else
// the dead pull left (its lease, blobs nothing keeps), and completes with verified content.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { chainIDs, collectGarbage, openStore, parseDigest, pull } from '@fastpull/core';
import { Prng, buildImage, startLoopbackRegistry } from '@fastpull/core/testing';
import { cliPath, corruptBlobs, ls, runCliAsync as cliAsync, tempDir } from './helpers.js';
import { recordedIngests, resumeBound } from './store-verify.js';

const work = tempDir('crash');
afterAll(() => work.cleanup());

async function until(what: string, cond: () => boolean, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('kill -9 during a pull', () => {
  it('leaves no visible partial state, and the next pull cleans up and completes', async () => {
    const prng = new Prng(12);
    const image = await buildImage({
      layers: [
        Array.from({ length: 40 }, (_, i) => ({ type: 'file' as const, path: `a/f${i}`, content: prng.bytes(32 * 1024) })),
        Array.from({ length: 40 }, (_, i) => ({ type: 'file' as const, path: `b/f${i}`, content: prng.bytes(32 * 1024) })),
      ],
    });
    const reg = await startLoopbackRegistry();
    try {
      reg.addImage('k/app', '1', image);
      reg.faults.bytesPerSecond = 256 * 1024;
      const root = join(work.dir, 'root');
      const ref = `${reg.host}/k/app:1`;
      const child = spawn(process.execPath, [cliPath, 'pull', '--root', root, ref], { stdio: 'ignore' });
      const exited = new Promise((r) => child.on('exit', r));
      const served = () => image.layers.reduce((s, l) => s + reg.stats.blobBytesServed(l.digest), 0);
      // Killed while both layers are downloading and extracting, once a download has recorded some
      // of its bytes (so that there is something to resume).
      await until(
        'the download to be under way',
        () => served() > 200 * 1024 && ls(join(root, 'snapshots', 'active')).length > 0 && [...recordedIngests(root).values()].some((n) => n > 0),
      );
      child.kill('SIGKILL');
      await exited;

      const store = openStore(root);
      expect(await store.images.list()).toEqual([]);
      expect(await store.snapshots.list()).toEqual([]);
      expect(ls(join(root, 'content', 'ingest')).length).toBeGreaterThan(0);
      expect(ls(join(root, 'snapshots', 'active')).length).toBeGreaterThan(0);

      // The CLI reads the store as it is: no image yet, and no error.
      const listed = await cliAsync(['images', '--root', root, '--json']);
      expect(listed.status, listed.stderr).toBe(0);
      expect(JSON.parse(listed.stdout)).toEqual([]);

      reg.faults = {};
      // What the next pull may fetch per blob: what the killed one had not recorded, no more.
      const bound = await resumeBound(root, image);
      expect([...bound.values()].reduce((a, b) => a + b, 0)).toBeLessThan(image.layers.reduce((s, l) => s + l.size, 0));
      const before = new Map(image.layers.map((l) => [l.digest, reg.stats.blobBytesServed(l.digest)]));
      const { image: rec } = await pull(ref, { root });
      const after = await cliAsync(['images', '--root', root, '--json']);
      expect((JSON.parse(after.stdout) as { name: string }[]).map((i) => i.name)).toEqual([ref]);
      for (const l of image.layers) {
        const fetched = reg.stats.blobBytesServed(l.digest) - before.get(l.digest)!;
        expect(fetched, `${l.digest}: fetched ${fetched} of ${l.size} bytes, ${bound.get(l.digest)} were missing`).toBeLessThanOrEqual(bound.get(l.digest)!);
      }
      expect(rec.layers.map((l) => l.digest)).toEqual(image.layers.map((l) => l.digest));
      expect(ls(join(root, 'content', 'ingest'))).toEqual([]);
      expect(ls(join(root, 'snapshots', 'active'))).toEqual([]);
      expect(corruptBlobs(root)).toEqual([]);
      expect((await store.snapshots.list()).map((s) => s.chainID).sort()).toEqual(rec.layers.map((l) => l.chainID).sort());
    } finally {
      await reg.close();
    }
  });

  it('leaves nothing for a collection once the next pull succeeds: the dead lease and the blob it kept go', async () => {
    const prng = new Prng(13);
    const image = await buildImage({
      layers: [[{ type: 'file', path: 'small', content: 'small' }], [{ type: 'file', path: 'big', content: prng.bytes(2 * 1024 * 1024) }]],
    });
    const [small, big] = chainIDs(image.layers.map((l) => l.diffID));
    const reg = await startLoopbackRegistry();
    // The big layer's blob is held back until the kill: a barrier, so the small layer's commit is
    // seen while the big one is surely still downloading, however loaded the machine.
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    try {
      reg.addImage('k/litter', '1', image);
      reg.faults.hold = { path: new RegExp(`/blobs/${image.layers[1]!.digest}$`), until: released };
      const root = join(work.dir, 'root-litter');
      const ref = `${reg.host}/k/litter:1`;
      // Blobs kept: the small layer's blob is committed before its snapshot, and stays when the
      // pull dies before recording the image.
      // Two unpack slots: with one (a 2-core default) the held layer's pass could take it first and
      // the small layer would wait for it.
      const child = spawn(process.execPath, [cliPath, 'pull', '--keep-blobs', '--unpack-concurrency', '2', '--root', root, ref], { stdio: 'ignore' });
      const exited = new Promise((r) => child.on('exit', r));
      const committed = (c: string) => existsSync(join(root, 'snapshots', 'committed', parseDigest(c).hex));
      await until('the small layer committed', () => committed(small!));
      child.kill('SIGKILL');
      await exited;
      const store = openStore(root);
      expect(committed(big!), 'the big layer was still downloading').toBe(false);
      expect(ls(join(root, 'leases'))).toHaveLength(1);
      expect(await store.content.info(image.layers[0]!.digest)).toBeDefined();

      // The next pull, not keeping blobs, finds the small layer unpacked and resumes the big one.
      reg.faults = {};
      await pull(ref, { root });
      expect(ls(join(root, 'leases'))).toEqual([]);
      expect(ls(join(root, 'content', 'ingest'))).toEqual([]);
      expect(await store.content.info(image.layers[0]!.digest)).toBeUndefined();
      expect(await collectGarbage(store, { dryRun: true })).toEqual({ blobs: [], snapshots: [], litter: 0, leftovers: [], bytes: 0, images: [] });
    } finally {
      release();
      await reg.close();
    }
  });

  it('resumes a layer of a few hundred MB killed mid-download, fetching only what is missing', async () => {
    const size = 192 * 1024 * 1024;
    const image = await buildImage({ layers: [[{ type: 'file', path: 'model.bin', content: randomBytes(size) }]], compression: 'none' });
    const layer = image.layers[0]!;
    const reg = await startLoopbackRegistry();
    try {
      reg.addImage('k/big', '1', image);
      // Paced, so that "served" is close to what the puller received when it is killed.
      reg.faults.bytesPerSecond = 8 * 1024 * 1024;
      const root = join(work.dir, 'root-big');
      const ref = `${reg.host}/k/big:1`;
      const child = spawn(process.execPath, [cliPath, 'pull', '--root', root, ref], { stdio: 'ignore' });
      const exited = new Promise((r) => child.on('exit', r));
      await until('half of the layer recorded', () => (recordedIngests(root).get(layer.digest) ?? 0) > layer.size / 2);
      child.kill('SIGKILL');
      await exited;
      const first = reg.stats.blobBytesServed(layer.digest);
      expect(first).toBeLessThan(layer.size);
      expect(await openStore(root).images.list()).toEqual([]);

      reg.faults = {};
      // What the killed process had recorded is not fetched again: the next pull asks for the rest.
      const bound = (await resumeBound(root, image)).get(layer.digest)!;
      expect(bound).toBeLessThan(layer.size / 2);
      await pull(ref, { root });
      const second = reg.stats.blobBytesServed(layer.digest) - first;
      expect(second).toBeLessThanOrEqual(bound);
      expect(corruptBlobs(root)).toEqual([]);
      expect(ls(join(root, 'content', 'ingest'))).toEqual([]);
    } finally {
      await reg.close();
    }
  });
});
