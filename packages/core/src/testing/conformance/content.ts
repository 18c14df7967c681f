// The conformance suite of ContentStore, after containerd's content testsuite: an ingest is invisible
// until committed, commit checks size and digest and always closes the ingest, a suspended ingest
// resumes with what it holds, and the sweep takes only what no live writer holds.
import assert from 'node:assert/strict';
import type { ContentStore } from '../../content/store.js';
import { sha256Digest } from '../../oci/digest.js';
import type { Descriptor } from '../../oci/manifest.js';
import { conformanceCase, rejectsWithCode, type ConformanceCase, type SubjectFactory } from './case.js';

const LAYER = 'application/vnd.oci.image.layer.v1.tar+gzip';

/** Bytes that differ from case to case, and their descriptor. */
function blob(seed: string, size = 100_000): { data: Buffer; desc: Descriptor } {
  const data = Buffer.alloc(size);
  for (let i = 0; i < size; i++) data[i] = (i * 31 + seed.charCodeAt(i % seed.length)) & 0xff;
  return { data, desc: { mediaType: LAYER, digest: sha256Digest(data), size } };
}

/** The cases, by name: each runs on a fresh subject. */
const CASES: Array<[string, (store: ContentStore) => Promise<void>]> = [
  [
    'an ingest is invisible until committed; writes land in any order; commit makes the blob',
    async (store) => {
      const { data, desc } = blob('a');
      const ingest = await store.newIngest(desc);
      assert.deepEqual(ingest.resumed, []);
      const half = data.length >> 1;
      await ingest.write(data.subarray(half), half);
      assert.equal(ingest.watermark.value, 0, 'the watermark waits for the bytes from offset 0');
      await ingest.write(data.subarray(0, half), 0);
      assert.equal(ingest.watermark.value, data.length);
      assert.equal(await store.info(desc.digest), undefined, 'an ingest is no blob');
      assert.deepEqual(await store.list(), []);
      await store.commit(ingest);
      assert.deepEqual(await store.info(desc.digest), { digest: desc.digest, size: desc.size });
      assert.ok((await store.readBytes(desc.digest)).equals(data));
      assert.deepEqual(await store.list(), [{ digest: desc.digest, size: desc.size }]);
    },
  ],
  [
    'commit refuses bytes of another digest, or a digest the caller computed that differs, and drops the ingest',
    async (store) => {
      const { data, desc } = blob('b');
      const wrong = Buffer.from(data);
      wrong[7] = wrong[7]! ^ 1;
      const first = await store.newIngest(desc);
      await first.write(wrong, 0);
      await rejectsWithCode(store.commit(first), 'DIGEST_MISMATCH', 'commit of other bytes');
      assert.equal(await store.info(desc.digest), undefined);
      const second = await store.newIngest(desc);
      assert.deepEqual(second.resumed, [], 'a refused ingest is not resumed');
      await second.write(data, 0);
      await rejectsWithCode(store.commit(second, sha256Digest('something else')), 'DIGEST_MISMATCH', 'commit with a differing computed digest');
      assert.equal(await store.info(desc.digest), undefined);
      const third = await store.newIngest(desc);
      assert.deepEqual(third.resumed, [], 'nor is one refused for its computed digest');
      await store.abort(third);
    },
  ],
  [
    'commit refuses more bytes than the descriptor says',
    async (store) => {
      const { data, desc } = blob('c');
      const ingest = await store.newIngest(desc);
      await ingest.write(data, 0);
      await ingest.write(Buffer.from('extra'), data.length);
      await rejectsWithCode(store.commit(ingest), 'SIZE_MISMATCH', 'commit of a longer ingest');
      assert.equal(await store.info(desc.digest), undefined);
    },
  ],
  [
    'a suspended ingest resumes with the ranges it holds, and the whole blob is still verified',
    async (store) => {
      const { data, desc } = blob('d');
      const part = 40_000;
      const first = await store.newIngest(desc);
      await first.write(data.subarray(0, part), 0);
      await store.suspend(first);
      assert.equal(await store.info(desc.digest), undefined, 'a suspended ingest is no blob');
      const resumed = await store.newIngest(desc);
      assert.deepEqual(resumed.resumed, [[0, part]]);
      assert.equal(resumed.watermark.value, part);
      await resumed.write(data.subarray(part), part);
      await store.commit(resumed);
      assert.ok((await store.readBytes(desc.digest)).equals(data));
    },
  ],
  [
    'aborting an ingest drops what it holds',
    async (store) => {
      const { data, desc } = blob('e');
      const ingest = await store.newIngest(desc);
      await ingest.write(data.subarray(0, 1000), 0);
      await store.abort(ingest);
      const again = await store.newIngest(desc);
      assert.deepEqual(again.resumed, []);
      await store.abort(again);
    },
  ],
  [
    'putBytes verifies size and digest; delete removes a blob once; absent blobs are NOT_FOUND',
    async (store) => {
      const { data, desc } = blob('f', 300);
      await rejectsWithCode(store.putBytes({ digest: desc.digest, size: desc.size + 1 }, data), 'SIZE_MISMATCH', 'putBytes of the wrong size');
      await rejectsWithCode(store.putBytes({ digest: sha256Digest('other'), size: desc.size }, data), 'DIGEST_MISMATCH', 'putBytes of another digest');
      assert.deepEqual(await store.list(), []);
      await store.putBytes(desc, data);
      await store.putBytes(desc, data);
      assert.deepEqual(await store.list(), [{ digest: desc.digest, size: desc.size }]);
      assert.equal(await store.delete(desc.digest), true);
      assert.equal(await store.delete(desc.digest), false);
      assert.equal(await store.info(desc.digest), undefined);
      await rejectsWithCode(store.readBytes(desc.digest), 'NOT_FOUND', 'readBytes of a deleted blob');
    },
  ],
  [
    'the sweep leaves live ingests and fresh suspended ones, and takes one no pull will resume',
    async (store) => {
      const a = blob('g');
      const b = blob('h');
      const live = await store.newIngest(a.desc);
      await live.write(a.data.subarray(0, 10), 0);
      const parked = await store.newIngest(b.desc);
      await parked.write(b.data.subarray(0, 10), 0);
      await store.suspend(parked);
      assert.deepEqual(await store.sweep(), [], 'nothing is stale yet');
      assert.deepEqual(await store.sweep(0, { dryRun: true }), [parked.id], 'a dry run names the dead one');
      assert.deepEqual(await store.sweep(undefined, { unneeded: async (d) => d === a.desc.digest }), [], 'a live ingest is never swept');
      assert.deepEqual(await store.sweep(undefined, { unneeded: async (d) => d === b.desc.digest }), [parked.id]);
      const again = await store.newIngest(b.desc);
      assert.deepEqual(again.resumed, [], 'a swept ingest is gone');
      await store.abort(again);
      await live.write(a.data.subarray(10), 10);
      await store.commit(live);
      assert.deepEqual(await store.info(a.desc.digest), { digest: a.desc.digest, size: a.desc.size });
    },
  ],
];

/**
 * The cases every ContentStore must pass, each on a fresh store from `factory`.
 * @example
 * for (const c of contentStoreConformance(async () => ({ store: openStore(dir).content, cleanup }))) it(c.name, c.run);
 */
export function contentStoreConformance(factory: SubjectFactory<ContentStore>): ConformanceCase[] {
  return CASES.map(([name, body]) => conformanceCase(factory, name, body));
}
