// The conformance suite of ImageStore: records keyed by name and platform, a second platform added
// beside the first, a put replacing only its own key, removal of one platform or of every one.
import assert from 'node:assert/strict';
import type { ImageRecord, ImageStore } from '../../images/store.js';
import { sha256Digest } from '../../oci/digest.js';
import { formatPlatform, hostPlatform, parsePlatform } from '../../oci/platform.js';
import { conformanceCase, rejectsWithCode, type ConformanceCase, type SubjectFactory } from './case.js';

/** A record of `name` for `platform` (os/arch[/variant]) whose digests follow from `seed`. */
function record(name: string, platform: string, seed = ''): ImageRecord {
  const d = (what: string) => sha256Digest(`${name} ${platform} ${seed} ${what}`);
  const layer = { digest: d('layer'), size: 10, mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip', diffID: d('diff'), chainID: d('diff') };
  return {
    name,
    target: { mediaType: 'application/vnd.oci.image.index.v1+json', digest: d('index'), size: 1 },
    manifest: { mediaType: 'application/vnd.oci.image.manifest.v1+json', digest: d('manifest'), size: 1 },
    config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: d('config'), size: 1 },
    platform: parsePlatform(platform),
    layers: [layer],
    chainID: layer.chainID,
    size: 10,
    created: '2026-01-01T00:00:00.000Z',
  };
}

/** A platform other than this host's. */
function otherPlatform(): string {
  return formatPlatform(hostPlatform()) === 'linux/s390x' ? 'linux/ppc64le' : 'linux/s390x';
}

/**
 * The cases every ImageStore must pass, each on a fresh store from `factory`.
 * @example
 * for (const c of imageStoreConformance(async () => ({ store: openStore(dir).images, cleanup }))) it(c.name, c.run);
 */
export function imageStoreConformance(factory: SubjectFactory<ImageStore>): ConformanceCase[] {
  const host = formatPlatform(hostPlatform());
  const other = otherPlatform();
  const cases: Array<[string, (store: ImageStore) => Promise<void>]> = [
    [
      'keeps one record per name and platform: a second platform is added beside the first',
      async (store) => {
        const name = 'example.com/app:1';
        assert.equal(await store.get(name), undefined);
        const mine = record(name, host);
        const theirs = record(name, other);
        await store.put(theirs);
        assert.deepEqual(await store.get(name), theirs, 'without a platform, the only record');
        await store.put(mine);
        assert.deepEqual(await store.get(name, host), mine);
        assert.deepEqual(await store.get(name, other), theirs);
        assert.deepEqual(await store.get(name), mine, "without a platform, this host's record");
        assert.equal(await store.get(name, 'linux/mips64le'), undefined);
        assert.deepEqual(
          (await store.records(name)).map((r) => formatPlatform(r.platform)),
          [host, other].sort(),
        );
      },
    ],
    [
      'a put replaces the record of its own name and platform only',
      async (store) => {
        const name = 'example.com/app:1';
        await store.put(record(name, host, 'old'));
        await store.put(record(name, other, 'old'));
        const updated = record(name, host, 'new');
        await store.put(updated);
        assert.deepEqual(await store.get(name, host), updated);
        assert.deepEqual(await store.get(name, other), record(name, other, 'old'));
        assert.equal((await store.list()).length, 2);
      },
    ],
    [
      'lists every record sorted by name, then platform',
      async (store) => {
        const all = [record('example.com/b:1', other), record('example.com/a:1', other), record('example.com/b:1', host), record('example.com/a:1', host)];
        for (const r of all) await store.put(r);
        const key = (r: ImageRecord): string => `${r.name} ${formatPlatform(r.platform)}`;
        const want = all.map(key).sort((a, b) => a.localeCompare(b));
        assert.deepEqual((await store.list()).map(key), want);
        assert.deepEqual(await store.records('example.com/none:1'), []);
      },
    ],
    [
      'removes one platform, or every record of a name; false when there was none',
      async (store) => {
        const name = 'example.com/app:1';
        await store.put(record(name, host));
        await store.put(record(name, other));
        await store.put(record('example.com/keep:1', host));
        assert.equal(await store.delete(name, other), true);
        assert.equal(await store.get(name, other), undefined);
        assert.deepEqual(await store.get(name, host), record(name, host));
        assert.equal(await store.delete(name, other), false);
        await store.put(record(name, other));
        assert.equal(await store.delete(name), true);
        assert.deepEqual(await store.records(name), []);
        assert.equal(await store.delete(name), false);
        assert.deepEqual(
          (await store.list()).map((r) => r.name),
          ['example.com/keep:1'],
        );
      },
    ],
    [
      'refuses a record without layers (INVALID_ARGUMENT)',
      async (store) => {
        const empty = { ...record('example.com/app:1', host), layers: [] };
        await rejectsWithCode(store.put(empty), 'INVALID_ARGUMENT', 'put of a record without layers');
        assert.deepEqual(await store.list(), []);
      },
    ],
  ];
  return cases.map(([name, body]) => conformanceCase(factory, name, body));
}
