import { existsSync, readdirSync } from 'node:fs';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { sha256Digest } from '../oci/digest.js';
import { MediaTypes } from '../oci/mediatypes.js';
import { FileContentStore } from './store.js';
import { WatermarkView } from './watermark.js';

let root: string;
let store: FileContentStore;
beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'fastpull-content-'));
  store = new FileContentStore(root);
});
afterEach(() => rm(root, { recursive: true, force: true }));

const data = Buffer.from('0123456789abcdef'.repeat(1000));
const desc = { mediaType: MediaTypes.OCI_LAYER, digest: sha256Digest(data), size: data.length };

describe('FileContentStore', () => {
  it('keeps an ingest invisible until commit, accepts writes in any order, and commits atomically', async () => {
    const ing = await store.newIngest(desc);
    await ing.write(data.subarray(8000), 8000);
    expect(await store.info(desc.digest)).toBeUndefined();
    await ing.write(data.subarray(0, 8000), 0);
    expect(await store.info(desc.digest)).toBeUndefined();
    await store.commit(ing);
    expect(await store.info(desc.digest)).toEqual({ digest: desc.digest, size: data.length });
    expect(await readFile(store.blobPath(desc.digest))).toEqual(data);
    expect(readdirSync(join(root, 'content', 'ingest'))).toEqual([]);
  });

  it('writes through the thread pool while the reader punches a hole in the file (writeNow then declines), else at once on this thread', async () => {
    const ing = await store.newIngest(desc);
    // No punch: the bytes are in the file and published before write() returns its promise.
    const first = ing.write(data.subarray(0, 4000), 0);
    expect(ing.watermark.value).toBe(4000);
    await first;
    // A punch runs: the write goes off this thread, so nothing is published until it is done.
    new WatermarkView(ing.watermark.buffer).setPunching(true);
    expect(ing.watermark.punching).toBe(true);
    const second = ing.write(data.subarray(4000, 9000), 4000);
    expect(ing.watermark.value).toBe(4000);
    await second;
    expect(ing.watermark.value).toBe(9000);
    // writeNow writes nothing while the punch runs, and says so.
    expect(ing.writeNow(data.subarray(9000, 9500), 9000)).toBe(false);
    expect(ing.watermark.value).toBe(9000);
    new WatermarkView(ing.watermark.buffer).setPunching(false);
    // Else it writes and publishes before it returns.
    expect(ing.writeNow(data.subarray(9000, 9500), 9000)).toBe(true);
    expect(ing.watermark.value).toBe(9500);
    await ing.write(data.subarray(9500), 9500);
    await store.commit(ing);
    expect(await readFile(store.blobPath(desc.digest))).toEqual(data);
  });

  it('refuses to commit content that does not match, and removes the ingest', async () => {
    const ing = await store.newIngest(desc);
    const bad = Buffer.from(data);
    bad[5] = 0;
    await ing.write(bad, 0);
    await expect(store.commit(ing)).rejects.toMatchObject({ code: 'DIGEST_MISMATCH' });
    expect(await store.info(desc.digest)).toBeUndefined();
    expect(readdirSync(join(root, 'content', 'ingest'))).toEqual([]);
  });

  it('refuses a commit whose caller-computed digest disagrees', async () => {
    const ing = await store.newIngest(desc);
    await ing.write(data, 0);
    await expect(store.commit(ing, sha256Digest('other'))).rejects.toMatchObject({ code: 'DIGEST_MISMATCH' });
    expect(existsSync(store.blobPath(desc.digest))).toBe(false);
  });

  it('refuses a commit of the wrong size', async () => {
    const ing = await store.newIngest(desc);
    await ing.write(data, 0);
    await ing.write(Buffer.from('extra'), data.length);
    await expect(store.commit(ing)).rejects.toMatchObject({ code: 'SIZE_MISMATCH' });
  });

  it('stores verified bytes and lists and deletes blobs', async () => {
    await expect(store.putBytes({ digest: desc.digest, size: 4 }, Buffer.from('abc'))).rejects.toMatchObject({ code: 'SIZE_MISMATCH' });
    await expect(store.putBytes({ digest: desc.digest, size: 3 }, Buffer.from('abc'))).rejects.toMatchObject({ code: 'DIGEST_MISMATCH' });
    expect(await store.list()).toEqual([]);
    await store.putBytes(desc, data);
    expect(await store.list()).toEqual([{ digest: desc.digest, size: data.length }]);
    expect(await store.readBytes(desc.digest)).toEqual(data);
    expect(await store.delete(desc.digest)).toBe(true);
    expect(await store.delete(desc.digest)).toBe(false);
    await expect(store.readBytes(desc.digest)).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('refuses digests that could name paths outside the store', () => {
    expect(() => store.blobPath(`sha256:../../../etc/passwd`)).toThrowError(expect.objectContaining({ code: 'INVALID_DIGEST' }) as Error);
  });
});

describe('resuming ingests', () => {
  it('takes over the download of a process that died, with the ranges it recorded', async () => {
    const big = Buffer.alloc(3 * 1024 * 1024, 7);
    big.write('distinct', 1234);
    const d = { mediaType: MediaTypes.OCI_LAYER, digest: sha256Digest(big), size: big.length };
    const first = await store.newIngest(d);
    await first.write(big.subarray(0, 1024 * 1024), 0);
    await first.write(big.subarray(2 * 1024 * 1024), 2 * 1024 * 1024);
    // Wait past the record's update interval, then write once more so the record is saved.
    await new Promise((r) => setTimeout(r, 300));
    await first.write(big.subarray(1024 * 1024, 1024 * 1024 + 10), 1024 * 1024);

    // While its owner lives, nobody else takes it.
    const other = await store.newIngest(d);
    expect(other.id).not.toBe(first.id);
    expect(other.resumed).toEqual([]);
    await store.abort(other);

    // The owner dies (its lock goes with its file descriptors), leaving the directory behind.
    (first as unknown as { release: () => void }).release();
    await (first as unknown as { handle: { close(): Promise<void> } }).handle.close();
    const resumed = await store.newIngest(d);
    expect(resumed.id).toBe(first.id);
    expect(resumed.resumed).toEqual([
      [0, 1024 * 1024 + 10],
      [2 * 1024 * 1024, 3 * 1024 * 1024],
    ]);
    expect(resumed.watermark.value).toBe(1024 * 1024 + 10);
    await resumed.write(big.subarray(1024 * 1024 + 10, 2 * 1024 * 1024), 1024 * 1024 + 10);
    expect(resumed.watermark.value).toBe(big.length);
    await store.commit(resumed);
    // Buffer.equals: vitest's deep equality walks 3 MiB byte by byte.
    expect((await readFile(store.blobPath(d.digest))).equals(big)).toBe(true);
  });

  it('rewrites its record in place: a shorter one is padded with spaces and parses', async () => {
    const big = Buffer.alloc(3 * 1024 * 1024, 5);
    const d = { mediaType: MediaTypes.OCI_LAYER, digest: sha256Digest(big), size: big.length };
    const ing = await store.newIngest(d);
    const dir = join(store.dir, 'ingest', ing.id);
    const record = join(dir, 'ranges');
    // Three ranges apart, then the gaps filled: the record shrinks to one range.
    await ing.write(big.subarray(0, 1024), 0);
    await ing.write(big.subarray(1024 * 1024, 1024 * 1024 + 1024), 1024 * 1024);
    await ing.write(big.subarray(2 * 1024 * 1024, 2 * 1024 * 1024 + 1024), 2 * 1024 * 1024);
    await store.suspend(ing);
    const long = await readFile(record, 'utf8');
    expect(JSON.parse(long)).toEqual([
      [0, 1024],
      [1024 * 1024, 1024 * 1024 + 1024],
      [2 * 1024 * 1024, 2 * 1024 * 1024 + 1024],
    ]);
    const inode = (await stat(record)).ino;
    const resumed = await store.newIngest(d);
    expect(resumed.id).toBe(ing.id);
    await resumed.write(big.subarray(1024, 1024 * 1024), 1024);
    await resumed.write(big.subarray(1024 * 1024 + 1024, 2 * 1024 * 1024), 1024 * 1024 + 1024);
    await store.suspend(resumed);
    const short = await readFile(record, 'utf8');
    expect(JSON.parse(short)).toEqual([[0, 2 * 1024 * 1024 + 1024]]);
    // Same file, same length, the rest spaces: no byte of the longer record is left to misread.
    expect((await stat(record)).ino).toBe(inode);
    expect(short.length).toBe(long.length);
    expect(short.trimEnd()).toBe(JSON.stringify([[0, 2 * 1024 * 1024 + 1024]]));
    const again = await store.newIngest(d);
    expect(again.resumed).toEqual([[0, 2 * 1024 * 1024 + 1024]]);
    await store.abort(again);
  });

  it('records no bytes a reader was granted to free: a resumed download fetches them again', async () => {
    const big = Buffer.alloc(2 * 1024 * 1024, 9);
    const d = { mediaType: MediaTypes.OCI_LAYER, digest: sha256Digest(big), size: big.length };
    const first = await store.newIngest(d);
    await first.write(big, 0); // complete: the record is saved
    const reader = new WatermarkView(first.watermark.buffer);
    reader.askRelease(1024 * 1024);
    first.grantRelease();
    expect(reader.releaseGranted).toBe(1024 * 1024);
    const dir = join(store.dir, 'ingest', first.id);
    expect(JSON.parse(await readFile(join(dir, 'ranges'), 'utf8'))).toEqual([[1024 * 1024, 2 * 1024 * 1024]]);
    // A record saved later (the ingest put away) still leaves them out.
    await store.suspend(first);
    expect(JSON.parse(await readFile(join(dir, 'ranges'), 'utf8'))).toEqual([[1024 * 1024, 2 * 1024 * 1024]]);
    const resumed = await store.newIngest(d);
    expect(resumed.id).toBe(first.id);
    expect(resumed.resumed).toEqual([[1024 * 1024, 2 * 1024 * 1024]]);
    expect(resumed.watermark.value).toBe(0);
    await store.abort(resumed);
  });

  it('sweeps dead ingests only once they are stale', async () => {
    const ing = await store.newIngest(desc);
    (ing as unknown as { release: () => void }).release();
    expect(await store.sweep()).toEqual([]);
    expect(await store.sweep(60_000)).toEqual([]);
    await new Promise((r) => setTimeout(r, 20));
    expect(await store.sweep(10)).toEqual([ing.id]);
    expect(readdirSync(join(root, 'content', 'ingest'))).toEqual([]);
  });
});
