// The conformance suite of containerd's snapshots over the store (SnapshotRecords), after containerd's
// snapshots/testsuite: prepare, view, commit and remove by key and name; parents and chains; removal
// refused while children exist; kinds; usage; and the error codes containerd maps back (NOT_FOUND,
// ALREADY_EXISTS, FAILED_PRECONDITION, INVALID_ARGUMENT). Mounts are checked as data; writing goes
// into the directories they name (a bind's source, an overlay's upperdir), as a mount would.
import assert from 'node:assert/strict';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import type { SnapshotRecords } from '../../snapshots/containerd/records.js';
import type { Mount } from '../../snapshots/store.js';
import { conformanceCase, rejectsWithCode, type ConformanceCase, type SubjectFactory } from './case.js';

/** What the suite uses of containerd's snapshots: the operations of containerd's Snapshotter. */

export type ContainerdSnapshots = Pick<SnapshotRecords, 'prepare' | 'view' | 'commit' | 'remove' | 'stat' | 'list' | 'mounts' | 'usage' | 'update'>;

/** The directory a write through `mounts` lands in: a writable bind's source, an overlay's upperdir. */
function writableDir(mounts: readonly Mount[]): string {
  assert.equal(mounts.length, 1, 'one mount');
  const [m] = mounts;
  if (m!.type === 'bind') {
    assert.ok(m!.options.includes('rw'), `a writable bind: ${m!.options.join(',')}`);
    return m!.source;
  }
  const upper = m!.options.find((o) => o.startsWith('upperdir='));
  assert.ok(upper !== undefined, `a writable overlay has an upperdir: ${m!.options.join(',')}`);
  return upper.slice('upperdir='.length);
}

/** The value of option `key=` of an overlay mount. */
function option(m: Mount | undefined, key: string): string | undefined {
  return m?.options.find((o) => o.startsWith(`${key}=`))?.slice(key.length + 1);
}

/** Prepares `key` over `parent`, writes `file` into it and commits it as `name`; returns its tree. */
async function layer(s: ContainerdSnapshots, name: string, key: string, parent: string | undefined, file: string): Promise<string> {
  const dir = writableDir(await s.prepare(key, parent));
  await fsp.writeFile(join(dir, file), file);
  await s.commit(name, key);
  return dir;
}

/** The cases, by name: each runs on a fresh subject. */
const CASES: Array<[string, (s: ContainerdSnapshots) => Promise<void>]> = [
  [
    'prepare without a parent: an active snapshot as a writable bind; commit turns its key into a committed name',
    async (s) => {
      const mounts = await s.prepare('active-1', undefined, { a: 'b' });
      assert.deepEqual(
        mounts.map((m) => [m.type, m.options]),
        [['bind', ['rw', 'rbind']]],
      );
      assert.deepEqual(withPlainLabels({ ...s.stat('active-1'), created: '', updated: '' }), {
        name: 'active-1',
        kind: 'active',
        labels: { a: 'b' },
        created: '',
        updated: '',
      });
      assert.deepEqual(s.mounts('active-1'), mounts);
      await fsp.writeFile(join(writableDir(mounts), 'foo'), 'foo');
      await s.commit('committed-1', 'active-1', { c: 'd' });
      await rejectsWithCode(() => s.stat('active-1'), 'NOT_FOUND', 'stat of a committed key');
      const info = s.stat('committed-1');
      assert.deepEqual(withPlainLabels({ ...info, created: '', updated: '' }), {
        name: 'committed-1',
        kind: 'committed',
        labels: { c: 'd' },
        created: '',
        updated: '',
      });
      assert.deepEqual(
        s.list().map((i) => i.name),
        ['committed-1'],
      );
    },
  ],
  [
    "parents and chains: an active snapshot is an overlay over its parents' trees, immediate parent first",
    async (s) => {
      const bottom = await layer(s, 'c1', 'a1', undefined, 'one');
      const active = await s.prepare('a2', 'c1');
      const [overlay] = active;
      assert.equal(overlay?.type, 'overlay');
      assert.equal(option(overlay, 'lowerdir'), bottom);
      assert.ok(option(overlay, 'workdir') !== undefined, 'an active overlay has a workdir');
      const middle = writableDir(active);
      await fsp.writeFile(join(middle, 'two'), 'two');
      await s.commit('c2', 'a2');
      assert.equal(s.stat('c2').parent, 'c1');
      const [top] = await s.prepare('a3', 'c2');
      assert.equal(option(top, 'lowerdir'), `${middle}:${bottom}`);
      assert.equal(s.stat('a3').parent, 'c2');
      assert.equal(await fsp.readFile(join(bottom, 'one'), 'utf8'), 'one', 'a committed tree keeps its files');
    },
  ],
  [
    'views: a read-only bind of one parent, a lowerdir-only overlay of several; a view is not committed',
    async (s) => {
      const bottom = await layer(s, 'c1', 'a1', undefined, 'one');
      const middle = await layer(s, 'c2', 'a2', 'c1', 'two');
      const one = await s.view('v1', 'c1');
      assert.deepEqual(one, [{ type: 'bind', source: bottom, options: ['ro', 'rbind'] }]);
      const [several] = await s.view('v2', 'c2');
      assert.equal(several?.type, 'overlay');
      assert.equal(option(several, 'lowerdir'), `${middle}:${bottom}`);
      assert.equal(option(several, 'upperdir'), undefined);
      assert.equal(s.stat('v2').kind, 'view');
      assert.deepEqual(s.mounts('v1'), one);
      await rejectsWithCode(s.commit('cv', 'v1'), 'FAILED_PRECONDITION', 'commit of a view');
      assert.deepEqual(await s.usage('v2'), { size: 0, inodes: 0 }, 'a view holds nothing of its own');
    },
  ],
  [
    'remove: refused while a child exists (FAILED_PRECONDITION); child first, then the parent',
    async (s) => {
      await layer(s, 'c1', 'a1', undefined, 'one');
      await s.prepare('child', 'c1');
      await s.view('viewer', 'c1');
      await rejectsWithCode(s.remove('c1'), 'FAILED_PRECONDITION', 'remove of a parent with children');
      await s.remove('child');
      await rejectsWithCode(s.remove('c1'), 'FAILED_PRECONDITION', 'remove of a parent with a view');
      await s.remove('viewer');
      await s.remove('c1');
      assert.deepEqual(s.list(), []);
      await rejectsWithCode(s.remove('c1'), 'NOT_FOUND', 'remove of a removed snapshot');
      // A removed key may be used again.
      await s.prepare('child', undefined);
      assert.equal(s.stat('child').kind, 'active');
    },
  ],
  [
    'codes: NOT_FOUND for an unknown key or parent, ALREADY_EXISTS for a key or name taken, FAILED_PRECONDITION for the wrong kind, INVALID_ARGUMENT for a parent not committed',
    async (s) => {
      await rejectsWithCode(s.prepare('k', 'no-such-parent'), 'NOT_FOUND', 'prepare over an unknown parent');
      await rejectsWithCode(s.view('k', 'no-such-parent'), 'NOT_FOUND', 'view of an unknown parent');
      await rejectsWithCode(s.commit('x', 'no-such-key'), 'NOT_FOUND', 'commit of an unknown key');
      await rejectsWithCode(() => s.mounts('no-such-key'), 'NOT_FOUND', 'mounts of an unknown key');
      await rejectsWithCode(s.usage('no-such-key'), 'NOT_FOUND', 'usage of an unknown key');
      await s.prepare('a', undefined);
      await rejectsWithCode(s.prepare('a', undefined), 'ALREADY_EXISTS', 'prepare of a key taken');
      await rejectsWithCode(s.view('a', undefined), 'ALREADY_EXISTS', 'view of a key taken');
      await rejectsWithCode(s.prepare('p', 'a'), 'INVALID_ARGUMENT', 'prepare over an active parent');
      await s.commit('c', 'a');
      await s.prepare('a2', undefined);
      await rejectsWithCode(s.commit('c', 'a2'), 'ALREADY_EXISTS', 'commit under a name taken');
      await rejectsWithCode(s.prepare('c', undefined), 'ALREADY_EXISTS', 'prepare of a committed name');
      await rejectsWithCode(() => s.mounts('c'), 'FAILED_PRECONDITION', 'mounts of a committed snapshot');
      await rejectsWithCode(s.commit('c-again', 'c'), 'FAILED_PRECONDITION', 'commit of a committed snapshot');
      assert.equal(s.stat('a2').kind, 'active', 'a refused commit leaves the active snapshot');
    },
  ],
  [
    'usage: an active snapshot measured as it is, a committed one as it was committed',
    async (s) => {
      const dir = writableDir(await s.prepare('a', undefined));
      const before = await s.usage('a');
      assert.equal(before.inodes, 1, 'an empty tree is its root alone');
      await fsp.writeFile(join(dir, 'big'), Buffer.alloc(64 * 1024, 1));
      await fsp.mkdir(join(dir, 'sub'));
      const after = await s.usage('a');
      assert.equal(after.inodes, 3);
      assert.ok(after.size >= before.size + 64 * 1024, `usage grows by the file: ${before.size} -> ${after.size}`);
      await s.commit('c', 'a');
      assert.deepEqual(await s.usage('c'), after);
      assert.deepEqual(await s.usage('c'), after, 'measured once, the same next time');
    },
  ],
  [
    'labels change through update; name, parent and kind do not',
    async (s) => {
      await layer(s, 'c1', 'a1', undefined, 'one');
      await s.prepare('a2', 'c1', { keep: 'me' });
      assert.deepEqual({ ...(await s.update({ name: 'a2', labels: { x: '1' } })).labels }, { x: '1' });
      assert.deepEqual({ ...(await s.update({ name: 'a2', labels: { y: '2' } }, ['labels.y'])).labels }, { x: '1', y: '2' });
      assert.deepEqual({ ...(await s.update({ name: 'a2', labels: {} }, ['labels.x'])).labels }, { y: '2' });
      await rejectsWithCode(s.update({ name: 'a2' }, ['parent']), 'INVALID_ARGUMENT', 'update of the parent');
      await rejectsWithCode(s.update({ name: 'nope', labels: {} }), 'NOT_FOUND', 'update of an unknown snapshot');
      const info = s.stat('a2');
      assert.deepEqual([info.name, info.parent, info.kind], ['a2', 'c1', 'active']);
      assert.deepEqual(
        s.list(['kind==active']).map((i) => i.name),
        ['a2'],
      );
      assert.deepEqual(
        s.list(['parent==c1']).map((i) => i.name),
        ['a2'],
      );
    },
  ],
];

/**
 * The cases containerd's snapshots over a store must pass, each on fresh records from `factory`.
 * @example
 * for (const c of snapshotRecordsConformance(async () => ({ store: await SnapshotRecords.open(openStore(dir)), cleanup }))) it(c.name, c.run);
 */
export function snapshotRecordsConformance(factory: SubjectFactory<ContainerdSnapshots>): ConformanceCase[] {
  return CASES.map(([name, body]) => conformanceCase(factory, name, body));
}

/** `info` with its labels as a plain object: stores may keep labels without a prototype (so that any name is a label). */
function withPlainLabels<T extends { labels: Readonly<Record<string, string>> }>(info: T): T {
  return { ...info, labels: { ...info.labels } };
}
