// Garbage collection and dropped layer blobs, with images pulled from the CNCF distribution registry.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, utimesSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acquireLease, collectGarbage, openStore, pull, type Digest, type GcLeftover, type ImageRecord, type Store } from '@fastpull/core';
import {
  buildImage,
  type BuiltImage,
  lacksRegistry,
  lacksRoot,
  type LayerEntry,
  Prng,
  pushImage,
  startDistribution,
  startLoopbackRegistry,
} from '@fastpull/core/testing';
import { cliPath, corruptBlobs, ls, runCliAsync, tempDir } from './helpers.js';

const base: LayerEntry[] = [
  { type: 'dir', path: 'etc' },
  { type: 'file', path: 'etc/os-release', content: 'ID=shared\n' },
];
const layerOf = (name: string): LayerEntry[] => [{ type: 'file', path: `${name}.txt`, content: `${name}\n`.repeat(1000) }];

const blobsOf = (root: string): string[] =>
  ls(join(root, 'content', 'blobs', 'sha256'))
    .map((hex) => `sha256:${hex}`)
    .sort();
const snapshotsOf = async (store: Store): Promise<Digest[]> => (await store.snapshots.list()).map((s) => s.chainID).sort();
const metadataBlobs = (r: ImageRecord): Digest[] => [r.manifest.digest, r.config.digest];

/** Every path under `root`, relative to it (files, directories and links). */
const treeOf = (root: string): string[] => (readdirSync(root, { recursive: true }) as string[]).sort();

async function until(what: string, cond: () => boolean, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

interface GcJson {
  dryRun: boolean;
  snapshots: { chainID: Digest; size: number }[];
  blobs: { digest: Digest; size: number }[];
  litter: number;
  leftovers: GcLeftover[];
  bytes: number;
}

describe.skipIf(lacksRegistry())('garbage collection', () => {
  let registry: Awaited<ReturnType<typeof startDistribution>>;
  let images: Record<'a' | 'b' | 'c', BuiltImage>;
  const work = tempDir('gc');

  beforeAll(async () => {
    registry = await startDistribution({ dir: join(work.dir, 'registry') });
    images = {
      // a and b share their base layer; c shares nothing.
      a: await buildImage({ layers: [base, layerOf('a1'), layerOf('a2')] }),
      b: await buildImage({ layers: [base, layerOf('b1')] }),
      c: await buildImage({ layers: [layerOf('c1'), layerOf('c2')] }),
    };
    for (const [name, image] of Object.entries(images)) await pushImage(registry.url, `gc/${name}`, '1', image);
  });
  afterAll(async () => {
    await registry?.stop();
    work.cleanup();
  });

  const ref = (name: string): string => `${registry.host}/gc/${name}:1`;

  it('drops layer blobs once unpacked unless asked to keep them, and images show both sizes', async () => {
    const root = join(work.dir, 'drop');
    const store = openStore(root);
    const { image: a } = await pull(ref('a'), { root });
    const { image: c } = await pull(ref('c'), { root, keepBlobs: true });
    expect(blobsOf(root)).toEqual([...metadataBlobs(a), ...metadataBlobs(c), ...c.layers.map((l) => l.digest)].sort());
    expect(a.keepBlobs).toBeUndefined();
    expect(c.keepBlobs).toBe(true);
    const tarBytes = (img: BuiltImage): number => img.layers.reduce((n, l) => n + l.tar.length, 0);
    expect(a.unpackedSize).toBe(tarBytes(images.a));
    expect(a.size).toBe(images.a.layers.reduce((n, l) => n + l.blob.length, 0));
    expect(await snapshotsOf(store)).toEqual([...a.layers, ...c.layers].map((l) => l.chainID).sort());
    // Nothing to collect: every blob and snapshot left is wanted.
    const r = await collectGarbage(store);
    expect(r).toMatchObject({ blobs: [], snapshots: [], bytes: 0 });
  });

  it('removes exactly what no image, lease or mount refers to', async () => {
    const root = join(work.dir, 'collect');
    const store = openStore(root);
    const { image: a } = await pull(ref('a'), { root, keepBlobs: true });
    const { image: b } = await pull(ref('b'), { root, keepBlobs: true });
    const { image: c } = await pull(ref('c'), { root });
    const blobsBefore = blobsOf(root);
    const snapshotsBefore = await snapshotsOf(store);

    expect(await store.images.delete(a.name)).toBe(true);
    const dry = await collectGarbage(store, { dryRun: true });
    expect(blobsOf(root)).toEqual(blobsBefore);
    expect(await snapshotsOf(store)).toEqual(snapshotsBefore);

    const r = await collectGarbage(store);
    expect(r.blobs).toEqual(dry.blobs);
    expect(r.snapshots).toEqual(dry.snapshots);
    // a's own layers (not the base it shares with b), its manifest and config.
    const onlyA = a.layers.filter((l) => !b.layers.some((x) => x.chainID === l.chainID));
    expect(onlyA).toHaveLength(2);
    expect(r.snapshots.map((s) => s.chainID).sort()).toEqual(onlyA.map((l) => l.chainID).sort());
    expect(r.blobs.map((x) => x.digest).sort()).toEqual([...metadataBlobs(a), ...onlyA.map((l) => l.digest)].sort());
    expect(r.bytes).toBe(r.blobs.reduce((n, x) => n + x.size, 0) + r.snapshots.reduce((n, s) => n + s.size, 0));
    expect(blobsOf(root)).toEqual([...metadataBlobs(b), ...b.layers.map((l) => l.digest), ...metadataBlobs(c)].sort());
    expect(await snapshotsOf(store)).toEqual([...b.layers, ...c.layers].map((l) => l.chainID).sort());
    expect(ls(join(root, 'snapshots', 'trash'))).toEqual([]);
    expect(corruptBlobs(root)).toEqual([]);

    // A lease keeps what it names, until it ends.
    await store.images.delete(c.name);
    const lease = await acquireLease(root, { blobs: [c.config.digest], snapshots: [c.layers[0]!.chainID] });
    const held = await collectGarbage(store);
    expect(held.snapshots.map((s) => s.chainID)).toEqual([c.layers[1]!.chainID]);
    expect(held.blobs.map((x) => x.digest)).toEqual([c.manifest.digest]);
    await lease.release();
    const after = await collectGarbage(store);
    expect(after.snapshots.map((s) => s.chainID)).toEqual([c.layers[0]!.chainID]);
    expect(after.blobs.map((x) => x.digest)).toEqual([c.config.digest]);
    expect(await snapshotsOf(store)).toEqual(b.layers.map((l) => l.chainID).sort());
  });

  it('drops the lease of a process that died', async () => {
    const root = join(work.dir, 'dead-lease');
    const store = openStore(root);
    const { image: c } = await pull(ref('c'), { root });
    await store.images.delete(c.name);
    // A lease taken by a child process that is then killed: its lock dies with it.
    const script = `import { acquireLease } from '@fastpull/core'; await acquireLease(${JSON.stringify(root)}, { blobs: [], snapshots: ${JSON.stringify(c.layers.map((l) => l.chainID))} }); process.stdout.write('held\\n'); setInterval(() => {}, 1000);`;
    const { spawn } = await import('node:child_process');
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { cwd: join(import.meta.dirname), stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((resolve, reject) => {
      child.stdout.once('data', () => resolve());
      child.once('exit', (code) => reject(new Error(`lease holder exited with ${code}`)));
    });
    const held = await collectGarbage(store);
    expect(held.snapshots).toEqual([]);
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    const freed = await collectGarbage(store);
    expect(freed.snapshots.map((s) => s.chainID).sort()).toEqual(c.layers.map((l) => l.chainID).sort());
    expect(ls(join(root, 'leases'))).toEqual([]);
  });

  it.skipIf(lacksRoot())('keeps a snapshot that is mounted', async () => {
    const root = join(work.dir, 'mounted');
    const store = openStore(root);
    const { image: c } = await pull(ref('c'), { root });
    await store.images.delete(c.name);
    const target = join(work.dir, 'mnt');
    mkdirSync(target);
    execFileSync('mount', ['--bind', '-o', 'ro', store.snapshots.fsPath(c.layers[1]!.chainID), target]);
    try {
      const r = await collectGarbage(store);
      expect(r.snapshots.map((s) => s.chainID)).toEqual([c.layers[0]!.chainID]);
    } finally {
      execFileSync('umount', [target]);
    }
    expect((await collectGarbage(store)).snapshots.map((s) => s.chainID)).toEqual([c.layers[1]!.chainID]);
  });

  it('never takes what a pull running at the same time needs', async () => {
    const root = join(work.dir, 'race');
    const store = openStore(root);
    // Pull, remove, collect, over and over, with collections running beside the pulls.
    for (let round = 0; round < 4; round++) {
      let collecting = true;
      // When each collection started and ended, to show that some ran while the pull held its lease.
      const runs: Array<{ start: number; end: number }> = [];
      const collector = (async () => {
        while (collecting) {
          const start = performance.now();
          await collectGarbage(store);
          runs.push({ start, end: performance.now() });
        }
      })();
      // From its first layer event to its end, the pull holds its lease and its layers are in flight.
      let layersFrom = Infinity;
      const { image } = await pull(ref(round % 2 === 0 ? 'a' : 'b'), {
        root,
        onProgress: (e) => {
          if (e.type === 'layer') layersFrom = Math.min(layersFrom, performance.now());
        },
      });
      const pulledAt = performance.now();
      collecting = false;
      await collector;
      expect(runs.filter((r) => r.start < pulledAt && r.end > layersFrom).length, `round ${round}: collections while the layers were pulled`).toBeGreaterThan(
        0,
      );
      for (const l of image.layers) expect(await store.snapshots.isCommitted(l.chainID), `round ${round}`).toBe(true);
      for (const d of metadataBlobs(image)) expect(blobsOf(root)).toContain(d);
      await store.images.delete(image.name);
    }
    await collectGarbage(store);
    expect(await snapshotsOf(store)).toEqual([]);
    expect(blobsOf(root)).toEqual([]);
  });

  it('a dry run names each leftover, snapshot and blob that the collection then removes, and removes nothing', async () => {
    const root = join(work.dir, 'dry-run');
    const cli = async (args: string[]): Promise<string> => {
      const r = await runCliAsync([...args, '--root', root]);
      expect(r.status, `fastpull ${args.join(' ')}: ${r.stderr}`).toBe(0);
      return r.stdout;
    };
    // An image pulled with its layer blobs kept and then forgotten: its snapshots and blobs are
    // unreferenced. Another image stays, with what it uses.
    await cli(['pull', '-q', '--keep-blobs', ref('c')]);
    await cli(['pull', '-q', ref('b')]);
    const store = openStore(root);
    const recordOf = async (name: string): Promise<ImageRecord> => (await store.images.list()).find((i) => i.name === ref(name))!;
    const [b, c] = [await recordOf('b'), await recordOf('c')];
    await cli(['rm', ref('c')]);

    // A pull killed with SIGKILL mid-download (the loopback registry slows it so that the kill lands
    // there): its lease, partial downloads and half-written snapshots stay behind.
    const prng = new Prng(41);
    const slow = await buildImage({
      layers: ['x', 'y'].map((d) => Array.from({ length: 40 }, (_, i) => ({ type: 'file' as const, path: `${d}/f${i}`, content: prng.bytes(32 * 1024) }))),
    });
    const reg = await startLoopbackRegistry();
    try {
      reg.addImage('gc/slow', '1', slow);
      reg.faults.bytesPerSecond = 256 * 1024;
      const child = spawn(process.execPath, [cliPath, 'pull', '--root', root, `${reg.host}/gc/slow:1`], { stdio: 'ignore' });
      const exited = new Promise((r) => child.once('exit', r));
      // Owned: a directory killed before its owner file was made stays a minute (its writer may still be making it).
      const owned = (dir: string): boolean => ls(join(root, dir)).some((name) => existsSync(join(root, dir, name, 'owner')));
      await until('the killed pull to be downloading and unpacking', () => ['content/ingest', 'snapshots/active', 'leases'].every(owned));
      child.kill('SIGKILL');
      await exited;
    } finally {
      await reg.close();
    }
    // A collection killed between renaming a snapshot into trash/ and deleting it.
    mkdirSync(join(root, 'snapshots', 'trash', 'killed-collection', 'fs', 'etc'), { recursive: true });
    writeFileSync(join(root, 'snapshots', 'trash', 'killed-collection', 'fs', 'etc', 'hosts'), '127.0.0.1 localhost\n');
    // Writes killed between making their temporary file and renaming it, two minutes ago: an image
    // record's and a blob's.
    const longAgo = new Date(Date.now() - 120_000);
    for (const temp of [join(root, 'images', '.tmp-killedrecord'), join(root, 'content', 'blobs', 'sha256', '.tmp-killedblob')]) {
      writeFileSync(temp, '{"half": ');
      utimesSync(temp, longAgo, longAgo);
    }

    const before = treeOf(root);
    const dry = JSON.parse(await cli(['gc', '--dry-run', '--json'])) as GcJson;
    // The dry run removed nothing (it may add the collection lock's file).
    const afterDry = new Set(treeOf(root));
    expect(before.filter((p) => !afterDry.has(p))).toEqual([]);
    expect(dry.dryRun).toBe(true);
    expect(dry.litter).toBe(dry.leftovers.length);
    // Each kind of litter made above is named.
    expect(new Set(dry.leftovers.map((l) => l.kind))).toEqual(new Set(['lease', 'ingest', 'active', 'trash', 'temp']));
    expect(dry.leftovers).toContainEqual({ kind: 'trash', path: 'snapshots/trash/killed-collection' });
    expect(dry.leftovers).toContainEqual({ kind: 'temp', path: 'images/.tmp-killedrecord' });
    expect(dry.leftovers).toContainEqual({ kind: 'temp', path: 'content/blobs/sha256/.tmp-killedblob' });
    // The forgotten image's snapshots and blobs (and whatever the killed pull committed), none of the other's.
    expect(dry.snapshots.map((x) => x.chainID)).toEqual(expect.arrayContaining(c.layers.map((l) => l.chainID)));
    expect(dry.blobs.map((x) => x.digest)).toEqual(expect.arrayContaining([...metadataBlobs(c), ...c.layers.map((l) => l.digest)]));
    for (const l of b.layers) expect(dry.snapshots.map((x) => x.chainID)).not.toContain(l.chainID);
    for (const d of metadataBlobs(b)) expect(dry.blobs.map((x) => x.digest)).not.toContain(d);

    // -v names the same leftovers, a line each.
    const verbose = await cli(['gc', '--dry-run', '-v']);
    for (const l of dry.leftovers)
      expect(
        verbose.split('\n').filter((line) => line.startsWith('would remove ') && line.endsWith(` ${l.path}`)),
        l.path,
      ).toHaveLength(1);
    expect(verbose).toMatch(
      new RegExp(`^would remove ${dry.snapshots.length} snapshots and ${dry.blobs.length} blobs, ${dry.litter} leftovers of interrupted pulls: `, 'm'),
    );

    const real = JSON.parse(await cli(['gc', '--json'])) as GcJson;
    const byPath = (a: GcLeftover, b: GcLeftover): number => a.path.localeCompare(b.path);
    expect([...real.leftovers].sort(byPath)).toEqual([...dry.leftovers].sort(byPath));
    expect(real.snapshots).toEqual(dry.snapshots);
    expect(real.blobs).toEqual(dry.blobs);
    expect(real.bytes).toBe(dry.bytes);

    // What went from the disk is exactly what the dry run named: the topmost paths that disappeared,
    // less the short links of removed snapshots (part of the snapshot).
    const after = new Set(treeOf(root));
    const gone = before.filter((p) => !after.has(p));
    const goneTop = gone.filter((p) => !gone.includes(dirname(p)));
    const named = [
      ...dry.leftovers.map((l) => l.path),
      ...dry.snapshots.map((x) => relative(root, dirname(store.snapshots.fsPath(x.chainID)))),
      ...dry.blobs.map((b) => relative(root, store.content.blobPath(b.digest))),
    ].sort();
    const links = goneTop.filter((p) => p.startsWith('snapshots/l/'));
    expect(goneTop.filter((p) => !links.includes(p)).sort()).toEqual(named);
    expect(links.length).toBeLessThanOrEqual(dry.snapshots.length);
    // The image that stays is whole, and nothing is left to collect.
    expect(await snapshotsOf(store)).toEqual(b.layers.map((l) => l.chainID).sort());
    expect(blobsOf(root)).toEqual(metadataBlobs(b).sort());
    expect(JSON.parse(await cli(['gc', '--dry-run', '--json']))).toMatchObject({ snapshots: [], blobs: [], litter: 0, leftovers: [] });
  });
});
