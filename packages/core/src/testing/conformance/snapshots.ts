// The conformance suite of Snapshotter, the store's chainID-named snapshots: an active snapshot is
// invisible until committed, the first commit of a chainID wins, mounts are data (a read-only bind of
// one layer, an overlay of several, top layer first), a discarded snapshot is gone at once.
import assert from 'node:assert/strict';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { chainIDs } from '../../oci/chainid.js';
import { sha256Digest, type Digest } from '../../oci/digest.js';
import type { Snapshotter } from '../../snapshots/store.js';
import { conformanceCase, rejectsWithCode, type ConformanceCase, type SubjectFactory } from './case.js';

/** Commits a snapshot of layer `i` of `diffs` holding one file, `layer-<i>`; returns whether it won. */
async function commitLayer(store: Snapshotter, diffs: readonly Digest[], i: number, content = `layer ${i}`): Promise<boolean> {
  const chains = chainIDs(diffs);
  const active = await store.prepare();
  await fsp.writeFile(join(active.fs, `layer-${i}`), content);
  return store.commit(active, { chainID: chains[i]!, diffID: diffs[i]!, ...(i > 0 ? { parent: chains[i - 1]! } : {}), size: content.length });
}

/** The layers the cases commit: their diffIDs and chainIDs. */
const diffs = [0, 1, 2].map((i) => sha256Digest(`conformance layer ${i}`));
const chains = chainIDs(diffs);

/** The cases, by name: each runs on a fresh subject. */
const CASES: Array<[string, (store: Snapshotter) => Promise<void>]> = [
  [
    'an active snapshot is invisible until committed under its chainID',
    async (store) => {
      const active = await store.prepare();
      await fsp.writeFile(join(active.fs, 'file'), 'data');
      assert.equal((await fsp.stat(active.fs)).mode & 0o777, 0o755, "a layer's root is 0755");
      assert.equal(await store.isCommitted(chains[0]!), false);
      assert.deepEqual(await store.list(), []);
      assert.equal(await store.commit(active, { chainID: chains[0]!, diffID: diffs[0]!, size: 4 }), true);
      assert.equal(await store.isCommitted(chains[0]!), true);
      const info = await store.info(chains[0]!);
      assert.ok(info !== undefined);
      assert.deepEqual({ ...info, created: '' }, { chainID: chains[0]!, diffID: diffs[0]!, size: 4, created: '' });
      assert.ok(!Number.isNaN(Date.parse(info.created)), `created ${info.created} is a time`);
      assert.equal(await fsp.readFile(join(store.fsPath(chains[0]!), 'file'), 'utf8'), 'data');
      assert.deepEqual(
        (await store.list()).map((s) => s.chainID),
        [chains[0]],
      );
    },
  ],
  [
    'records the parent of a chain, and the first commit of a chainID wins',
    async (store) => {
      for (let i = 0; i < 3; i++) assert.equal(await commitLayer(store, diffs, i), true);
      assert.equal((await store.info(chains[2]!))?.parent, chains[1]);
      assert.equal((await store.info(chains[0]!))?.parent, undefined);
      assert.equal(await commitLayer(store, diffs, 1, 'second writer'), false);
      assert.equal(await fsp.readFile(join(store.fsPath(chains[1]!), 'layer-1'), 'utf8'), 'layer 1');
      assert.equal((await store.list()).length, 3);
    },
  ],
  [
    'a removed active snapshot leaves nothing, and a sweep finds nothing of a live one',
    async (store) => {
      const live = await store.prepare();
      const dropped = await store.prepare();
      await fsp.writeFile(join(dropped.fs, 'f'), 'x');
      await store.remove(dropped);
      await assert.rejects(fsp.stat(dropped.fs), 'the removed snapshot has no tree');
      assert.deepEqual(await store.sweep({ dryRun: true }), []);
      assert.deepEqual(await store.sweep(), []);
      await fsp.stat(live.fs);
      await store.remove(live);
      assert.deepEqual(await store.list(), []);
    },
  ],
  [
    'mounts are data: a read-only bind of one layer, an overlay of several with the top layer first',
    async (store) => {
      for (let i = 0; i < 3; i++) await commitLayer(store, diffs, i);
      assert.deepEqual(await store.mounts([chains[0]!]), [{ type: 'bind', source: store.fsPath(chains[0]!), options: ['ro', 'rbind'] }]);
      const [overlay] = await store.mounts(chains);
      assert.equal(overlay?.type, 'overlay');
      const lower = overlay.options.find((o) => o.startsWith('lowerdir='));
      assert.equal(
        lower,
        `lowerdir=${[...chains]
          .reverse()
          .map((c) => store.fsPath(c))
          .join(':')}`,
      );
      assert.ok(!overlay.options.some((o) => o.startsWith('upperdir=')), 'read-only: no upperdir');
      await rejectsWithCode(store.mounts([]), 'INVALID_ARGUMENT', 'mounts of an empty stack');
      await rejectsWithCode(store.mounts([chains[0]!, sha256Digest('absent')]), 'NOT_FOUND', 'mounts of a stack with a missing snapshot');
    },
  ],
  [
    'a discarded snapshot is gone at once; its files go when the returned deletion runs',
    async (store) => {
      await commitLayer(store, diffs, 0);
      const tree = store.fsPath(chains[0]!);
      const remove = await store.discard(chains[0]!);
      assert.equal(await store.isCommitted(chains[0]!), false);
      assert.deepEqual(await store.list(), []);
      await assert.rejects(fsp.stat(tree));
      await rejectsWithCode(store.mounts([chains[0]!]), 'NOT_FOUND', 'mounts of a discarded snapshot');
      await remove();
      await (
        await store.discard(chains[0]!)
      )();
      // Committed again, it is whole.
      assert.equal(await commitLayer(store, diffs, 0), true);
      assert.equal(await fsp.readFile(join(store.fsPath(chains[0]!), 'layer-0'), 'utf8'), 'layer 0');
    },
  ],
];

/**
 * The cases every Snapshotter must pass, each on a fresh store from `factory`.
 * @example
 * for (const c of snapshotterConformance(async () => ({ store: openStore(dir).snapshots, cleanup }))) it(c.name, c.run);
 */
export function snapshotterConformance(factory: SubjectFactory<Snapshotter>): ConformanceCase[] {
  return CASES.map(([name, body]) => conformanceCase(factory, name, body));
}
