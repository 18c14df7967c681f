// Campaign 3, disk full: the store (or one part of it) on a small tmpfs. A pull that runs out of
// space fails with NO_SPACE, leaves nothing that holds space but what it promises (downloads kept
// for a resume, committed layers, which gc removes when no image wants them), and succeeds once
// space is freed (the tmpfs remounted bigger, or a filler file deleted). Out of space during the
// fetch (content/ on its own tmpfs), during extraction (snapshots/), during metadata writes
// (content/ or images/ full from the start) and anywhere (the whole store, library and CLI, at
// seeded random sizes). Needs root to mount; skipped with the reason printed otherwise.
// FASTPULL_RELIABILITY_LONG=1 tries more sizes.
import { execFileSync } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readdirSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { collectGarbage, isFastpullError, openStore, pull } from '@fastpull/core';
import { type BuiltImage, lacks, type LoopbackRegistry, Prng, startLoopbackRegistry } from '@fastpull/core/testing';
import { corruptBlobs, failure, runCliAsync, tempDir } from './helpers.js';
import { generatedImage, ingestDigest, litter, LONG, snapshotDiffs, suiteSeed, usedBytes } from './reliability-lib.js';

const MiB = 1024 * 1024;

function tmpfsUnavailable(): string | undefined {
  if (process.getuid?.() !== 0) return 'not running as root (mounting a tmpfs needs it)';
  const { dir, cleanup } = tempDir('tmpfs-probe');
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'fastpull-probe', dir], { stdio: 'pipe' });
    execFileSync('umount', [dir], { stdio: 'pipe' });
    return undefined;
  } catch (e) {
    return `tmpfs mount not permitted: ${String((e as { stderr?: Buffer }).stderr ?? e).trim()}`;
  } finally {
    cleanup();
  }
}

const skip = tmpfsUnavailable();
if (skip) console.warn(`skipping the disk-full campaign: ${skip}`);

const work = tempDir('diskfull');
const mounts: string[] = [];
let n = 0;

function mountTmpfs(dir: string, size: number): void {
  mkdirSync(dir, { recursive: true });
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size},mode=0755`, 'fastpull-diskfull', dir], { stdio: 'pipe' });
  mounts.push(dir);
}

function resizeTmpfs(dir: string, size: number): void {
  execFileSync('mount', ['-o', `remount,size=${size}`, dir], { stdio: 'pipe' });
}

/** Fills the filesystem of `dir` with one file until it is full; returns the file. */
function fill(dir: string): string {
  const path = join(dir, 'filler');
  const fd = openSync(path, 'w');
  const chunk = Buffer.alloc(64 * 1024, 0xa5);
  try {
    for (;;) writeSync(fd, chunk);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOSPC') throw e;
  } finally {
    closeSync(fd);
  }
  // Small writes may still find room in a partial page: fill byte by byte-ish until none does.
  const fd2 = openSync(path, 'a');
  try {
    for (;;) writeSync(fd2, Buffer.alloc(512, 1));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOSPC') throw e;
  } finally {
    closeSync(fd2);
  }
  return path;
}

/** Temp files of atomic writes (`.tmp-*`) anywhere under `dir`: a failed write must remove its own. */
function tempFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    let names: string[];
    try {
      names = readdirSync(d);
    } catch {
      return;
    }
    for (const name of names) {
      if (name === 'committed' || name === 'trash') continue; // unpacked layers: image content, not store metadata
      if (name.startsWith('.tmp-') || name.endsWith('.tmp')) out.push(join(d, name));
      else walk(join(d, name));
    }
  };
  walk(dir);
  return out;
}

/**
 * What a failed pull may leave, and nothing more: no image record, no half-unpacked snapshot, no
 * temp file of a metadata write, no corrupt blob; each download kept for a resume is one of the
 * image's layers.
 */
async function expectFailedPullState(root: string, image: BuiltImage): Promise<void> {
  const store = openStore(root);
  expect(await store.images.list()).toEqual([]);
  const { ingests, actives } = litter(root);
  expect(actives).toEqual([]);
  const layerDigests = new Set<string>(image.layers.map((l) => l.digest));
  for (const id of ingests) expect(layerDigests.has(ingestDigest(root, id) ?? ''), `ingest ${id} is a download of a layer`).toBe(true);
  expect(tempFiles(root)).toEqual([]);
  expect(corruptBlobs(root)).toEqual([]);
}

describe.skipIf(lacks('tmpfs', skip))('disk full (campaign 3)', () => {
  const seed = suiteSeed(3003);
  let image: BuiltImage;
  let reg: LoopbackRegistry;
  let ref = '';
  let unpackedSize = 0;
  let compressedSize = 0;
  const figures: string[] = [];

  beforeAll(async () => {
    // ~6 MiB of incompressible data in one layer, between two small ones: a blob bigger than a
    // small tmpfs, and layers that may well commit before the space runs out.
    image = await generatedImage(seed, [
      { dir: 'etc', files: 8, fileSize: 2048 },
      { dir: 'data', files: 3, fileSize: 2 * MiB, noise: true },
      { dir: 'lib', files: 6, fileSize: 300 * 1024 },
    ]);
    compressedSize = image.layers.reduce((s, l) => s + l.size, 0);
    unpackedSize = image.layers.reduce((s, l) => s + l.tar.length, 0);
    reg = await startLoopbackRegistry();
    reg.addImage('disk/app', '1', image);
    ref = `${reg.host}/disk/app:1`;
  });

  afterAll(async () => {
    await reg?.close();
    for (const m of mounts.reverse()) {
      try {
        execFileSync('umount', [m], { stdio: 'pipe' });
      } catch {
        execFileSync('umount', ['-l', m], { stdio: 'pipe' });
      }
    }
    work.cleanup();
    console.log(
      `disk-full campaign (seed ${seed}): image ${(compressedSize / MiB).toFixed(1)} MiB compressed, ${(unpackedSize / MiB).toFixed(1)} MiB unpacked\n  ${figures.join('\n  ')}`,
    );
  });

  it('runs out during the fetch (content/ on a 3 MiB tmpfs): NO_SPACE, the failed download gone, then resumes once remounted bigger', async () => {
    const root = join(work.dir, `root${n++}`);
    const content = join(root, 'content');
    mountTmpfs(content, 3 * MiB);
    const err = await failure(pull(ref, { root }));
    expect(err.code, err.message).toBe('NO_SPACE');
    await expectFailedPullState(root, image);
    // The layer whose write failed dropped its download; the others stopped with it keep theirs
    // for a resume (which layer hits the wall first is a matter of timing).
    const failed = /writing the download of (sha256:[0-9a-f]{64})/.exec(err.message)?.[1];
    expect(failed, err.message).toBeDefined();
    expect(litter(root).ingests.map((id) => ingestDigest(root, id))).not.toContain(failed);
    // What holds space is at most the other layers' partial downloads and the metadata.
    const left = usedBytes(content);
    const others = image.layers.filter((l) => l.digest !== failed).reduce((s, l) => s + l.size, 0);
    expect(left).toBeLessThanOrEqual(others + image.config.length + image.manifest.length + 64 * 1024);
    figures.push(`fetch: ${err.message.slice(0, 160)}; ${left} bytes left on content/`);

    resizeTmpfs(content, 64 * MiB);
    await pull(ref, { root });
    expect(await snapshotDiffs(root, ref, image)).toEqual([]);
    expect(litter(root)).toEqual({ ingests: [], actives: [] });
    expect(tempFiles(root)).toEqual([]);
  });

  it('runs out during extraction (snapshots/ on a 3 MiB tmpfs): NO_SPACE, only whole layers committed, then succeeds once remounted bigger', async () => {
    const root = join(work.dir, `root${n++}`);
    const snaps = join(root, 'snapshots');
    mountTmpfs(snaps, 3 * MiB);
    const err = await failure(pull(ref, { root }));
    expect(err.code, err.message).toBe('NO_SPACE');
    await expectFailedPullState(root, image);
    // What holds space on snapshots/ is committed layers only, each whole.
    const store = openStore(root);
    const committed = await store.snapshots.list();
    let committedSize = 0;
    for (const s of committed) committedSize += s.size;
    expect(committed.length).toBeLessThan(image.layers.length);
    const used = usedBytes(snaps);
    expect(used).toBeLessThanOrEqual(committedSize + 256 * 1024);
    figures.push(`extraction: ${err.message.slice(0, 160)}; ${committed.length} layer(s) committed, ${used} bytes used on snapshots/`);

    resizeTmpfs(snaps, 64 * MiB);
    await pull(ref, { root });
    expect(await snapshotDiffs(root, ref, image)).toEqual([]);
    expect(litter(root)).toEqual({ ingests: [], actives: [] });
  });

  it('runs out writing the manifest (content/ full from the start): NO_SPACE, no temp file left, then succeeds once a filler is deleted', async () => {
    const root = join(work.dir, `root${n++}`);
    const content = join(root, 'content');
    mountTmpfs(content, 1 * MiB);
    const filler = fill(content);
    const err = await failure(pull(ref, { root }));
    expect(err.code, err.message).toBe('NO_SPACE');
    expect(err.message).toContain(image.manifestDigest);
    await expectFailedPullState(root, image);
    figures.push(`manifest write: ${err.message.slice(0, 160)}`);
    rmSync(filler);
    resizeTmpfs(content, 64 * MiB);
    await pull(ref, { root });
    expect(await snapshotDiffs(root, ref, image)).toEqual([]);
  });

  it('runs out writing the image record (images/ full): NO_SPACE, no temp file left, layers kept; the next pull fetches no layer again', async () => {
    const root = join(work.dir, `root${n++}`);
    const images = join(root, 'images');
    mountTmpfs(images, 256 * 1024);
    const filler = fill(images);
    reg.stats.reset();
    const err = await failure(pull(ref, { root }));
    expect(err.code, err.message).toBe('NO_SPACE');
    await expectFailedPullState(root, image);
    expect(readdirSync(images)).toEqual(['filler']);
    figures.push(`image record write: ${err.message.slice(0, 160)}`);
    rmSync(filler);
    reg.stats.reset();
    await pull(ref, { root });
    expect(await snapshotDiffs(root, ref, image)).toEqual([]);
    // Every layer was committed by the failed pull: nothing of them is fetched again.
    for (const l of image.layers) expect(reg.stats.blobBytesServed(l.digest)).toBe(0);
  });

  it('the CLI on a whole store that is too small: the NO_SPACE line and exit 1; gc gives the space back; succeeds once remounted bigger', async () => {
    const root = join(work.dir, `root${n++}`);
    mountTmpfs(root, 5 * MiB);
    const base = usedBytes(root);
    const r = await runCliAsync(['pull', '--root', root, '--quiet', ref]);
    expect(r.status, r.stderr).toBe(1);
    const lines = r.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(new RegExp(`^fastpull: pulling ${ref.replace(/[.]/g, '\\.')}: .+ \\(NO_SPACE\\)$`));
    await expectFailedPullState(root, image);
    const afterFailure = usedBytes(root);
    figures.push(`CLI, whole store of 5 MiB: "${lines[0]!.slice(0, 200)}"; ${afterFailure - base} bytes held after the failure`);
    const gc = await runCliAsync(['gc', '--root', root, '--json']);
    expect(gc.status, gc.stderr).toBe(0);
    expect(litter(root)).toEqual({ ingests: [], actives: [] });
    // Nothing of the failed pull holds space after gc (directories and lock files aside).
    expect(usedBytes(root) - base).toBeLessThanOrEqual(64 * 1024);
    figures.push(`CLI: after gc ${usedBytes(root) - base} bytes held`);
    resizeTmpfs(root, 64 * MiB);
    const ok = await runCliAsync(['pull', '--root', root, '--quiet', ref]);
    expect(ok.status, ok.stderr).toBe(0);
    expect(await snapshotDiffs(root, ref, image)).toEqual([]);
    expect(litter(root)).toEqual({ ingests: [], actives: [] });
  });

  it('the library on a whole store at seeded random sizes: NO_SPACE or success, never anything else; then success after growing', async () => {
    const prng = new Prng(seed + 1);
    const rounds = LONG ? 24 : 6;
    const outcomes: Record<string, number> = {};
    for (let i = 0; i < rounds; i++) {
      const root = join(work.dir, `root${n++}`);
      // From a store too small for the metadata to one big enough for every layer unpacked while
      // its download is still there (the most a pull holds at once).
      const size = prng.int(64 * 1024, unpackedSize + compressedSize + 1024 * 1024);
      mountTmpfs(root, size);
      const base = usedBytes(root);
      const outcome = await pull(ref, { root }).then(
        () => 'ok',
        (e: unknown) => (isFastpullError(e) ? e.code : `not a FastpullError: ${String(e)}`),
      );
      outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
      expect(['ok', 'NO_SPACE'], `round ${i} (seed ${seed}, ${size} bytes)`).toContain(outcome);
      if (outcome === 'NO_SPACE') {
        await expectFailedPullState(root, image);
        await collectGarbage(openStore(root));
        expect(litter(root)).toEqual({ ingests: [], actives: [] });
        expect(usedBytes(root) - base, `round ${i}: space held after gc`).toBeLessThanOrEqual(64 * 1024);
        resizeTmpfs(root, 64 * MiB);
        await pull(ref, { root });
      }
      expect(await snapshotDiffs(root, ref, image), `round ${i} (seed ${seed}, ${size} bytes)`).toEqual([]);
      expect(litter(root)).toEqual({ ingests: [], actives: [] });
      execFileSync('umount', [root], { stdio: 'pipe' });
      mounts.splice(mounts.indexOf(root), 1);
    }
    figures.push(`random sizes: ${rounds} rounds, outcomes ${JSON.stringify(outcomes)}`);
    expect(outcomes.NO_SPACE ?? 0).toBeGreaterThan(0);
  });
});
