// Tests of a pass that frees the blob's bytes behind it (UnpackLayerOptions.follow.release): it frees
// only what its writer granted, its digests are the whole blob's, and a failed pass still tells the
// blob's digest from the part of the file it did not free.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Watermark, WatermarkView } from '../content/watermark.js';
import { MediaTypes } from '../oci/mediatypes.js';
import { Prng } from '../testing/prng.js';
import { BLOB_DIGEST_DETAIL, BlobRelease, unpackLayer, type UnpackedLayer } from './layer.js';
import { nativePunchHole } from '../native/addon.js';
import { makeTar } from './tar/tar.testkit.js';
import { lacks } from '../testing/needs.js';

const sha256 = (b: Buffer): string => `sha256:${createHash('sha256').update(b).digest('hex')}`;
const STEP = 16 * 1024;

let work: string;
beforeEach(() => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'fastpull-release-'));
});
afterEach(() => {
  fs.rmSync(work, { recursive: true, force: true });
});

/** Why holes cannot be punched here (no addon call, or a filesystem that refuses), or undefined. */
async function cannotPunch(): Promise<string | undefined> {
  const punch = nativePunchHole();
  if (!punch) return 'the native addon has no punchHole here';
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fastpull-punch-probe-'));
  const file = path.join(dir, 'f');
  fs.writeFileSync(file, Buffer.alloc(8192, 1));
  const fd = fs.openSync(file, 'r+');
  try {
    await punch(fd, 0, 4096);
    return undefined;
  } catch (e) {
    return `the temporary directory's filesystem cannot punch holes (${(e as Error).message})`;
  } finally {
    fs.closeSync(fd);
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
const why = await cannotPunch();

/** A layer of one incompressible file of `size` bytes and a small one after it. */
async function layerTar(size: number, seed = 1): Promise<{ tar: Buffer; body: Buffer }> {
  const body = Buffer.from(new Prng(seed).bytes(size));
  return {
    tar: await makeTar([
      { name: 'weights', body },
      { name: 'after', body: 'after\n' },
    ]),
    body,
  };
}

/**
 * Unpacks `blob` as a download would bring it: written to `data` in slices with a pause between, a
 * watermark over what landed, and the writer granting the reader's asks after each slice (as the
 * ingest does on a timer). Returns the pass's outcome and every point granted, in order.
 */
async function unpackArriving(
  blob: Buffer,
  lead = 0,
  landedAtGrant: number[] = [],
): Promise<{ result: PromiseSettledResult<UnpackedLayer>; granted: number[]; data: string }> {
  const data = path.join(work, 'data');
  fs.writeFileSync(data, blob);
  const dest = path.join(work, 'snap');
  fs.mkdirSync(dest);
  const w = new Watermark(blob.length);
  const granted: number[] = [];
  const pass = unpackLayer({
    blobPath: data,
    mediaType: MediaTypes.OCI_LAYER_GZIP,
    dest,
    follow: { watermark: w.buffer, size: blob.length, release: { step: STEP, lead } },
  });
  const settled = pass.then(
    (value) => ({ status: 'fulfilled', value }) as const,
    (reason: unknown) => ({ status: 'rejected', reason }) as const,
  );
  let done = false;
  void settled.then(() => (done = true));
  for (let at = 0; at < blob.length && !done; at += 4 * STEP) {
    w.add(at, Math.min(blob.length, at + 4 * STEP));
    await new Promise((r) => setTimeout(r, 5));
    w.grantRelease((from) => (granted.push(from), landedAtGrant.push(w.value)));
  }
  return { result: await settled, granted, data };
}

/** Bytes of `file` from its start that read as zeros. */
function zeroPrefix(file: string): number {
  const b = fs.readFileSync(file);
  let i = 0;
  while (i < b.length && b[i] === 0) i++;
  return i;
}

describe.skipIf(lacks('addon', why))('unpackLayer freeing the blob as it goes', () => {
  it("frees only what the writer granted, in whole steps, and still computes the whole blob's digests", async () => {
    const { tar, body } = await layerTar(512 * 1024);
    const blob = zlib.gzipSync(tar, { level: 1 });
    const { result, granted, data } = await unpackArriving(blob);
    if (result.status === 'rejected') throw result.reason;
    const r = result.value;
    expect(r.blobDigest).toBe(sha256(blob));
    expect(r.diffID).toBe(sha256(tar));
    expect(fs.readFileSync(path.join(work, 'snap', 'weights')).equals(body)).toBe(true);
    // Freed: a positive multiple of the step, never past the last grant, and read back as zeros.
    expect(r.releasedBytes).toBeGreaterThanOrEqual(STEP);
    expect(r.releasedBytes % 4096).toBe(0);
    expect(r.releasedBytes).toBeLessThanOrEqual(granted.at(-1)!);
    expect(granted).toEqual([...granted].sort((a, b) => a - b));
    expect(zeroPrefix(data)).toBeGreaterThanOrEqual(r.releasedBytes);
    // Its blocks are gone, not just zeroed.
    expect(fs.statSync(data).blocks * 512).toBeLessThanOrEqual(blob.length - r.releasedBytes + 4096);
  });

  it('frees nothing while the download is less than its lead ahead, only once it is complete', async () => {
    const { tar } = await layerTar(512 * 1024, 4);
    const blob = zlib.gzipSync(tar, { level: 1 });
    // Slices of 4 steps, each read before the next lands: the download is never 8 steps ahead.
    const landed: number[] = [];
    const { result, granted } = await unpackArriving(blob, 8 * STEP, landed);
    if (result.status === 'rejected') throw result.reason;
    expect(result.value.blobDigest).toBe(sha256(blob));
    for (const at of landed) expect(at).toBe(blob.length);
    // The same blob with no lead frees bytes while it arrives.
    fs.rmSync(path.join(work, 'snap'), { recursive: true });
    const eager: number[] = [];
    const again = await unpackArriving(blob, 0, eager);
    if (again.result.status === 'rejected') throw again.result.reason;
    expect(again.result.value.releasedBytes).toBeGreaterThan(0);
    expect(eager.some((at) => at < blob.length)).toBe(true);
    expect(granted.length).toBeLessThanOrEqual(1);
  });

  it('frees nothing without a grant: the file keeps every byte', async () => {
    const { tar } = await layerTar(256 * 1024);
    const blob = zlib.gzipSync(tar, { level: 1 });
    const data = path.join(work, 'data');
    fs.writeFileSync(data, blob);
    fs.mkdirSync(path.join(work, 'snap'));
    const r = await unpackLayer({
      blobPath: data,
      mediaType: MediaTypes.OCI_LAYER_GZIP,
      dest: path.join(work, 'snap'),
      follow: { watermark: Watermark.complete(blob.length).buffer, size: blob.length, release: { step: STEP } },
    });
    expect(r.releasedBytes).toBe(0);
    expect(fs.readFileSync(data).equals(blob)).toBe(true);
  });

  it('tells the digest of a corrupt blob it freed part of, read from the rest of the file', async () => {
    const { tar } = await layerTar(512 * 1024, 2);
    const good = zlib.gzipSync(tar, { level: 1 });
    const bad = Buffer.from(good);
    const at = Math.floor(bad.length * 0.75);
    bad[at] = bad[at]! ^ 0xff;
    const { result, data } = await unpackArriving(bad);
    expect(result.status).toBe('rejected');
    const e = (result as PromiseRejectedResult).reason as { code: string; details: Record<string, unknown> };
    expect(e.code).toBe('INVALID_LAYER');
    expect(e.details[BLOB_DIGEST_DETAIL]).toBe(sha256(bad));
    // The pass had freed bytes before it failed: hashing the file now would give another digest.
    expect(zeroPrefix(data)).toBeGreaterThanOrEqual(STEP);
  });

  it('tells the right digest of a good blob whose tar is bad, so the caller keeps the tar error', async () => {
    const { tar } = await layerTar(512 * 1024, 3);
    // The second header (after the 512 KiB body) gets a wrong checksum.
    const second = 512 + 512 * 1024;
    tar.write('99999999', second + 148, 'latin1');
    const blob = zlib.gzipSync(tar, { level: 1 });
    const { result, data } = await unpackArriving(blob);
    expect(result.status).toBe('rejected');
    const e = (result as PromiseRejectedResult).reason as { code: string; details: Record<string, unknown> };
    expect(e.code).toBe('INVALID_LAYER');
    expect(e.details[BLOB_DIGEST_DETAIL]).toBe(sha256(blob));
    expect(zeroPrefix(data)).toBeGreaterThanOrEqual(STEP);
  });

  it('refuses a step that is not a positive multiple of 4096, and a negative lead', async () => {
    const blob = zlib.gzipSync((await layerTar(1024)).tar);
    const data = path.join(work, 'data');
    fs.writeFileSync(data, blob);
    const run = (step: number, lead?: number) =>
      unpackLayer({
        blobPath: data,
        mediaType: MediaTypes.OCI_LAYER_GZIP,
        dest: work,
        follow: { watermark: Watermark.complete(blob.length).buffer, size: blob.length, release: { step, ...(lead !== undefined ? { lead } : {}) } },
      });
    await expect(run(1000)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(run(0)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(run(4096, -1)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });
});

/** Opens FIFO `f` for writing, which ends a read open waiting on it (ENXIO until that open has begun). */
async function unblock(f: string): Promise<void> {
  for (let tries = 0; ; tries++) {
    try {
      fs.closeSync(fs.openSync(f, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK));
      return;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENXIO' || tries >= 200) throw e;
      await new Promise((r) => setTimeout(r, 10));
    }
  }
}

describe.skipIf(lacks('addon', why))('punchHoleAsync', () => {
  it('punches the file it was called on even when that descriptor is closed at once and its number taken again', async () => {
    const punch = nativePunchHole()!;
    const first = path.join(work, 'first');
    const second = path.join(work, 'second');
    fs.writeFileSync(first, Buffer.alloc(64 * 1024, 1));
    fs.writeFileSync(second, Buffer.alloc(64 * 1024, 2));
    // Every libuv pool thread blocks opening a FIFO, so the punch waits in the queue until the
    // descriptor it was given is closed and its number taken by another file.
    const threads = Number(process.env.UV_THREADPOOL_SIZE) || 4;
    const fifos = Array.from({ length: threads }, (_, i) => path.join(work, `fifo${i}`));
    for (const f of fifos) execFileSync('mkfifo', [f]);
    const blocked = fifos.map((f) => fs.promises.open(f, 'r'));
    await new Promise((r) => setTimeout(r, 50));
    const fd = fs.openSync(first, 'r+');
    const punched = punch(fd, 0, 32 * 1024);
    fs.closeSync(fd);
    const other = fs.openSync(second, 'r+');
    try {
      expect(other).toBe(fd); // the lowest free number
      for (const f of fifos) await unblock(f);
      await punched;
      for (const h of await Promise.all(blocked)) await h.close();
    } finally {
      fs.closeSync(other);
    }
    const a = fs.readFileSync(first);
    expect(a.subarray(0, 32 * 1024).every((b) => b === 0)).toBe(true);
    expect(a.subarray(32 * 1024).every((b) => b === 1)).toBe(true);
    expect(fs.readFileSync(second).every((b) => b === 2)).toBe(true);
  });

  it('rejects on a descriptor that is not open, and resolves at once for no bytes', async () => {
    const punch = nativePunchHole()!;
    const fd = fs.openSync(path.join(work, 'gone'), 'w');
    fs.closeSync(fd);
    await expect(punch(fd, 0, 4096)).rejects.toMatchObject({ code: 'EBADF' });
    await expect(punch(fd, 0, 0)).resolves.toBeUndefined();
  });
});

describe('BlobRelease', () => {
  /** A punch that records its calls and settles only when the test says. */
  function slowPunch(): {
    calls: [number, number, number][];
    settle: (ok?: boolean) => void;
    punch: (fd: number, offset: number, nbytes: number) => Promise<void>;
  } {
    const calls: [number, number, number][] = [];
    const waiting: ((ok: boolean) => void)[] = [];
    return {
      calls,
      settle: (ok = true) => waiting.shift()!(ok),
      punch: (fd, offset, nbytes) => {
        calls.push([fd, offset, nbytes]);
        return new Promise<void>((resolve, reject) => waiting.push((ok) => (ok ? resolve() : reject(new Error('EOPNOTSUPP')))));
      },
    };
  }
  const flush = () => new Promise((r) => setImmediate(r));

  it('punches one granted range at a time without waiting for it, and stop() waits for the one running', async () => {
    const size = 64 * STEP;
    const w = Watermark.complete(size);
    const p = slowPunch();
    const release = new BlobRelease(7, new WatermarkView(w.buffer), size, { step: STEP }, p.punch);
    release.hashed(2 * STEP);
    w.grantRelease(() => undefined);
    expect(w.punching).toBe(false);
    release.hashed(2 * STEP + 100); // returns at once: the punch runs elsewhere
    expect(p.calls).toEqual([[7, 0, 2 * STEP]]);
    expect(w.punching).toBe(true); // the download writes off its thread meanwhile
    // More is asked and granted while that punch runs: nothing new starts until it is done.
    release.hashed(5 * STEP);
    w.grantRelease(() => undefined);
    release.hashed(5 * STEP);
    expect(p.calls).toHaveLength(1);
    expect(release.released).toBe(0);
    p.settle();
    await flush();
    expect(release.released).toBe(2 * STEP);
    // The next one starts where the last ended and covers what was granted meanwhile.
    expect(p.calls).toEqual([
      [7, 0, 2 * STEP],
      [7, 2 * STEP, 3 * STEP],
    ]);
    let stopped = false;
    const stopping = release.stop().then(() => (stopped = true));
    await flush();
    expect(stopped).toBe(false); // the descriptor is still in use
    p.settle();
    await stopping;
    expect(release.released).toBe(5 * STEP);
    expect(w.punching).toBe(false);
    // Stopped: nothing more is punched.
    release.hashed(10 * STEP);
    w.grantRelease(() => undefined);
    release.hashed(10 * STEP);
    expect(p.calls).toHaveLength(2);
  });

  it('stops freeing at the first punch the filesystem refuses', async () => {
    const size = 64 * STEP;
    const w = Watermark.complete(size);
    const p = slowPunch();
    const release = new BlobRelease(3, new WatermarkView(w.buffer), size, { step: STEP }, p.punch);
    release.hashed(STEP);
    w.grantRelease(() => undefined);
    release.hashed(STEP);
    expect(w.punching).toBe(true);
    p.settle(false);
    await flush();
    expect(w.punching).toBe(false);
    release.hashed(4 * STEP);
    w.grantRelease(() => undefined);
    release.hashed(4 * STEP);
    expect(p.calls).toEqual([[3, 0, STEP]]);
    expect(release.released).toBe(0);
    await release.stop();
  });
});
