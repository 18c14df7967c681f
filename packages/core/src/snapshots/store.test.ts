import { existsSync, fstatSync, readdirSync, readlinkSync, writeFileSync } from 'node:fs';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { chainIDs } from '../oci/chainid.js';
import { sha256Digest } from '../oci/digest.js';
import { FileSnapshotter } from './store.js';

let root: string;
let snaps: FileSnapshotter;
beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'fastpull-snap-'));
  snaps = new FileSnapshotter(root);
});
afterEach(() => rm(root, { recursive: true, force: true }));

const diffs = [sha256Digest('a'), sha256Digest('b'), sha256Digest('c')];
const chains = chainIDs(diffs);

async function commitLayer(i: number, content: string): Promise<boolean> {
  const a = await snaps.prepare();
  writeFileSync(join(a.fs, 'f'), content);
  return snaps.commit(a, { chainID: chains[i]!, diffID: diffs[i]!, ...(i > 0 ? { parent: chains[i - 1]! } : {}), size: content.length });
}

describe('FileSnapshotter', () => {
  it('hides active snapshots and commits them under their chainID', async () => {
    const a = await snaps.prepare();
    expect(await snaps.isCommitted(chains[0]!)).toBe(false);
    await snaps.remove(a);
    expect(existsSync(a.dir)).toBe(false);
    expect(await commitLayer(0, 'one')).toBe(true);
    expect(await snaps.isCommitted(chains[0]!)).toBe(true);
    expect(existsSync(join(snaps.fsPath(chains[0]!), 'f'))).toBe(true);
    expect((await snaps.info(chains[0]!))?.diffID).toBe(diffs[0]);
    expect(await readdir(join(root, 'snapshots', 'active'))).toEqual([]);
  });

  it('holds an fd of each active snapshot for its flush, from prepare to commit or remove, and no longer', async () => {
    // What this process's fds point at (an fd closed between the listing and the readlink: '').
    const openDirs = () =>
      readdirSync('/proc/self/fd').map((fd) => {
        try {
          return readlinkSync(`/proc/self/fd/${fd}`);
        } catch {
          return '';
        }
      });
    const a = await snaps.prepare();
    expect(a.flushFd).toBeDefined();
    expect(fstatSync(a.flushFd!).isDirectory()).toBe(true);
    expect(openDirs()).toContain(a.dir);
    const b = await snaps.prepare();
    writeFileSync(join(b.fs, 'f'), 'x');
    await snaps.remove(a);
    expect(await snaps.commit(b, { chainID: chains[0]!, diffID: diffs[0]!, size: 1 })).toBe(true);
    // Neither the removed nor the committed (renamed) directory is held open any more.
    expect(openDirs().filter((p) => p.startsWith(root))).toEqual([]);
    // Without the flush there is nothing to hold.
    const unsynced = await new FileSnapshotter(root, { sync: false }).prepare();
    expect(unsynced.flushFd).toBeUndefined();
  });

  it('keeps the first commit when two writers commit the same chainID', async () => {
    expect(await commitLayer(0, 'first')).toBe(true);
    expect(await commitLayer(0, 'second')).toBe(false);
    expect((await snaps.list()).length).toBe(1);
    expect(await readdir(join(root, 'snapshots', 'active'))).toEqual([]);
  });

  it('builds overlay mounts top layer first, a bind mount for one layer, and refuses missing layers', async () => {
    for (let i = 0; i < 3; i++) await commitLayer(i, String(i));
    const [m] = await snaps.mounts(chains);
    expect(m).toEqual({ type: 'overlay', source: 'overlay', options: [`lowerdir=${[2, 1, 0].map((i) => snaps.fsPath(chains[i]!)).join(':')}`] });
    expect(await snaps.mounts(chains.slice(0, 1))).toEqual([{ type: 'bind', source: snaps.fsPath(chains[0]!), options: ['ro', 'rbind'] }]);
    await expect(snaps.mounts([sha256Digest('missing')])).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('mounts rootless stacks with userxattr, and refuses a stack that mixes both layouts', async () => {
    for (let i = 0; i < 3; i++) {
      const a = await snaps.prepare();
      await snaps.commit(a, {
        chainID: chains[i]!,
        diffID: diffs[i]!,
        ...(i > 0 ? { parent: chains[i - 1]! } : {}),
        size: 0,
        ...(i < 2 ? { rootless: true } : {}),
      });
    }
    expect((await snaps.mounts(chains.slice(0, 2)))[0]!.options[0]).toBe('userxattr');
    await expect(snaps.mounts(chains)).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringMatching(/mixes 2 snapshots laid out for rootless mounts with 1/),
    });
  });
});

describe('FileSnapshotter mounts of many layers', () => {
  const many = chainIDs(Array.from({ length: 140 }, (_, i) => sha256Digest(`layer ${i}`)));

  async function commitMany(s: FileSnapshotter, n: number): Promise<void> {
    for (let i = 0; i < n; i++) {
      const a = await s.prepare();
      await s.commit(a, { chainID: many[i]!, diffID: sha256Digest(`layer ${i}`), ...(i > 0 ? { parent: many[i - 1]! } : {}), size: 0 });
    }
  }

  it('says which store root would fit a stack too long for this one, and that root does fit it', async () => {
    const long = new FileSnapshotter(join(root, 'a-store-root-far-too-long-for-sixty'), { sync: false });
    await commitMany(long, 60);
    const err = await long.mounts(many.slice(0, 60)).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'INVALID_ARGUMENT', details: { layers: 60, limit: 3584 } });
    const fits = Number(/a store root of at most (\d+) bytes would fit them/.exec((err as Error).message)?.[1]);
    expect(fits).toBeGreaterThan(root.length + 1);
    // A root of exactly that many bytes mounts the stack; one byte more does not.
    for (const [extra, ok] of [
      [0, true],
      [1, false],
    ] as const) {
      const dir = join(root, 'r'.repeat(fits - root.length - 1 + extra));
      const s = new FileSnapshotter(dir, { sync: false });
      await commitMany(s, 60);
      const got = await s.mounts(many.slice(0, 60)).then(
        (m) => m[0]!.options.join(',').length,
        (e: unknown) => e,
      );
      if (ok) expect(got).toBeLessThanOrEqual(3584);
      else expect(got).toMatchObject({ code: 'INVALID_ARGUMENT' });
    }
  });

  it('says no store root fits a stack past what short links allow under /, and refuses more than overlayfs stacks as TOO_MANY_LAYERS', async () => {
    const s = new FileSnapshotter(root, { sync: false });
    await commitMany(s, 140);
    await expect(s.mounts(many)).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringMatching(
        /an overlay of 140 layers needs \d+ bytes of mount options, over the 3584 mount\(2\) takes; no store root fits them: .* so 137 layers fit even under \//,
      ),
    });
    const tooMany = Array.from({ length: 501 }, () => many[0]!);
    await expect(s.mounts(tooMany)).rejects.toMatchObject({ code: 'TOO_MANY_LAYERS', details: { layers: 501, limit: 500 } });
  });
});
