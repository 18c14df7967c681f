// containerd's snapshotter conformance, after its snapshots/testsuite: fastpulld as a real process
// serving containerd.services.snapshots.v1 on its snapshotter socket, driven over gRPC as
// containerd's proxy snapshotter drives it. As root the answered mounts are really mounted
// (overlayfs and bind mounts): files written in an active snapshot, committed, seen through a
// child; deletions hide lower files through whiteouts; views are read-only. Records survive a
// restart of fastpulld, and shutting down leaves mounted snapshot directories alone.
import {
  chmodSync,
  chownSync,
  existsSync,
  lchownSync,
  linkSync,
  lutimesSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { overlayUnavailable, serveDaemon, startDaemon, stopDaemon, tempDir, type RunningDaemon } from './helpers.js';
import { mountAll, snapshotsClient, statusOf, unmount, type SnapshotInfo, type SnapshotMount, type SnapshotsClient } from './snapshotter-client.js';
import { lacks } from '@fastpull/core/testing';
import { nativeFs } from '../packages/core/src/native/addon.js';

const noMounts = overlayUnavailable();
if (noMounts) console.warn(`snapshotter conformance: not mounting the answered mounts: ${noMounts}`);
const itMounts = it.skipIf(lacks('overlay', noMounts));

const work = tempDir('snapshotter');
const root = join(work.dir, 'root');
const socket = join(work.dir, 'fastpulld.sock');
const snapSocket = join(work.dir, 'snapshotter.sock');
let daemon: RunningDaemon | undefined;
let client: SnapshotsClient;

function serve(): Promise<RunningDaemon> {
  return serveDaemon(['--socket', socket, '--snapshotter-socket', snapSocket, '--root', root, '--log-level', 'debug']);
}

const stop = stopDaemon;

let mountSeq = 0;
/** Mounts `mounts` at a fresh directory, runs `fn` there, unmounts. */
async function mounted<T>(mounts: readonly SnapshotMount[], fn: (dir: string) => T | Promise<T>): Promise<T> {
  const dir = join(work.dir, `mnt-${mountSeq++}`);
  mkdirSync(dir);
  mountAll(mounts, dir);
  try {
    return await fn(dir);
  } finally {
    unmount(dir);
  }
}

/** path -> file content, or "dir", for the tree at `dir`. */
function tree(dir: string, rel = ''): Record<string, string> {
  const out: Record<string, string> = {};
  for (const e of readdirSync(join(dir, rel), { withFileTypes: true })) {
    const path = rel ? `${rel}/${e.name}` : e.name;
    if (e.isDirectory()) {
      out[path] = 'dir';
      Object.assign(out, tree(dir, path));
    } else out[path] = readFileSync(join(dir, path), 'utf8');
  }
  return out;
}

/**
 * Everything a commit must keep of each entry under `dir` (the root itself left out): type and mode,
 * owner, size, mtime to the nanosecond for what is not a directory, device number, link target,
 * link count, and the extended attributes this process can read, overlayfs's own left out.
 */
function meta(dir: string, rel = ''): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of readdirSync(join(dir, rel)).sort()) {
    const path = rel ? `${rel}/${name}` : name;
    const full = join(dir, path);
    const st = lstatSync(full, { bigint: true });
    const xattrs = nativeFs()
      .llistxattr(full)
      .filter((x) => !x.startsWith('trusted.overlay.'))
      .sort()
      .map((x) => `${x}=${nativeFs().lgetxattr(full, x)?.toString('hex')}`);
    const parts = [st.mode.toString(8), `${st.uid}:${st.gid}`, `nlink ${st.nlink}`];
    if (!st.isDirectory()) parts.push(`size ${st.size}`, `mtime ${st.mtimeNs}`);
    if (st.isCharacterDevice() || st.isBlockDevice()) parts.push(`rdev ${st.rdev}`);
    if (st.isSymbolicLink()) parts.push(`-> ${readlinkSync(full)}`);
    if (xattrs.length > 0) parts.push(...xattrs);
    out[path] = parts.join(' ');
    if (st.isDirectory()) Object.assign(out, meta(dir, path));
  }
  return out;
}

const ms = (t: SnapshotInfo['createdAt']): number => t.seconds * 1000 + t.nanos / 1e6;

beforeAll(async () => {
  daemon = await serve();
  client = snapshotsClient(snapSocket);
});
afterAll(async () => {
  client?.close();
  await stop(daemon);
  work.cleanup();
});

describe('containerd snapshotter API (conformance)', () => {
  itMounts('basic: write in an active snapshot, commit, see it through a child, whiteouts hide, views read-only', async () => {
    const m = await client.prepare('basic/preparing', '', { 'containerd.io/gc.root': 'now' });
    expect(m).toHaveLength(1);
    expect(m[0]).toMatchObject({ type: 'bind', options: ['rw', 'rbind'] });
    await mounted(m, (dir) => {
      writeFileSync(join(dir, 'foo'), 'foo\n');
      mkdirSync(join(dir, 'a/b/c'), { recursive: true });
    });
    await client.commit('basic/committed', 'basic/preparing', { 'containerd.io/gc.root': 'now' });
    const si = await client.stat('basic/committed');
    expect(si).toMatchObject({ name: 'basic/committed', parent: '', kind: 'COMMITTED' });
    expect(await statusOf(client.stat('basic/preparing'))).toBe('NOT_FOUND');

    const next = await client.prepare('basic/next', 'basic/committed');
    expect(next[0]!.type).toBe('overlay');
    await mounted(next, (dir) => {
      expect(tree(dir)).toEqual({ foo: 'foo\n', a: 'dir', 'a/b': 'dir', 'a/b/c': 'dir' });
      writeFileSync(join(dir, 'bar'), 'bar\n');
      writeFileSync(join(dir, 'foo'), 'bar\n');
      rmSync(join(dir, 'a/b'), { recursive: true });
    });
    expect(await client.stat('basic/next')).toMatchObject({ parent: 'basic/committed', kind: 'ACTIVE' });
    await client.commit('basic/committed-next', 'basic/next');
    const si2 = await client.stat('basic/committed-next');
    expect(si2).toMatchObject({ parent: 'basic/committed', kind: 'COMMITTED' });
    expect(await statusOf(client.stat('basic/next'))).toBe('NOT_FOUND');
    const listed = await client.list();
    expect(listed.find((i) => i.name === si.name)).toEqual(si);
    expect(listed.find((i) => i.name === si2.name)).toEqual(si2);

    const view = await client.view('basic/nextnext', 'basic/committed-next');
    expect(view).toEqual([
      { type: 'overlay', source: 'overlay', target: '', options: expect.arrayContaining([expect.stringMatching(/^lowerdir=[^:]+:[^:]+$/)]) },
    ]);
    expect(view[0]!.options.some((o) => o.startsWith('upperdir='))).toBe(false);
    await mounted(view, (dir) => {
      expect(tree(dir)).toEqual({ foo: 'bar\n', bar: 'bar\n', a: 'dir' });
      expect(() => writeFileSync(join(dir, 'testfile'), 'x')).toThrow(/EROFS|read-only/);
    });
    // A view of one committed snapshot is a read-only bind of its tree.
    const one = await client.view('basic/one', 'basic/committed');
    expect(one[0]).toMatchObject({ type: 'bind', options: ['ro', 'rbind'] });
    await mounted(one, (dir) => {
      expect(tree(dir)).toEqual({ foo: 'foo\n', a: 'dir', 'a/b': 'dir', 'a/b/c': 'dir' });
      expect(() => writeFileSync(join(dir, 'testfile'), 'x')).toThrow(/EROFS|read-only/);
    });
    expect(await client.mounts('basic/one')).toEqual(one);

    await client.remove('basic/nextnext');
    await client.remove('basic/one');
    expect(await statusOf(client.remove('basic/committed'))).toBe('FAILED_PRECONDITION');
    await client.remove('basic/committed-next');
    await client.remove('basic/committed');
    expect((await client.list()).filter((i) => i.name.startsWith('basic/'))).toEqual([]);
  });

  itMounts('a commit keeps every kind of entry with its modes, owners, times, links and xattrs', async () => {
    let written: Record<string, string> = {};
    await mounted(await client.prepare('keep/a'), (d) => {
      mkdirSync(join(d, 'dir'));
      chmodSync(join(d, 'dir'), 0o2750);
      chownSync(join(d, 'dir'), 10, 20);
      writeFileSync(join(d, 'dir/file'), 'content\n');
      chmodSync(join(d, 'dir/file'), 0o4755);
      chownSync(join(d, 'dir/file'), 1234, 5678);
      lutimesSync(join(d, 'dir/file'), 1_000_000, 1_234_567);
      linkSync(join(d, 'dir/file'), join(d, 'hard'));
      symlinkSync('dir/file', join(d, 'link'));
      lchownSync(join(d, 'link'), 7, 8);
      execFileSync('mkfifo', ['-m', '0600', join(d, 'fifo')]);
      execFileSync('mknod', ['-m', '0640', join(d, 'null-like'), 'c', '1', '3']);
      nativeFs().lsetxattr(join(d, 'dir/file'), 'user.note', Buffer.from('kept'));
      nativeFs().lsetxattr(join(d, 'dir'), 'trusted.fastpull-test', Buffer.from([0, 1, 2]));
      written = meta(d);
    });
    await client.commit('keep/c', 'keep/a');
    expect(Object.keys(written).sort()).toEqual(['dir', 'dir/file', 'fifo', 'hard', 'link', 'null-like']);
    await inView('keep/v', 'keep/c', (d) => expect(meta(d)).toEqual(written));
    // Seen through a child's overlay too.
    await mounted(await client.prepare('keep/child', 'keep/c'), (d) => expect(meta(d)).toEqual(written));
  });

  itMounts('deleted files in a child stay hidden through a chain of three', async () => {
    const l1 = await client.prepare('del/l1');
    await mounted(l1, (dir) => {
      writeFileSync(join(dir, 'foo'), 'foo\n');
      writeFileSync(join(dir, 'foobar'), 'foobar\n');
    });
    await client.commit('del/c1', 'del/l1');
    await mounted(await client.prepare('del/l2', 'del/c1'), (dir) => rmSync(join(dir, 'foobar')));
    await client.commit('del/c2', 'del/l2');
    await client.prepare('del/l3', 'del/c2');
    await client.commit('del/c3', 'del/l3');
    await mounted(await client.view('del/v', 'del/c3'), (dir) => expect(tree(dir)).toEqual({ foo: 'foo\n' }));
    // A file moved from a lower layer: gone at its old path, present at the new one.
    await mounted(await client.prepare('del/l4', 'del/c3'), (dir) => {
      mkdirSync(join(dir, 'dir3'));
      writeFileSync(join(dir, 'dir3/foo'), readFileSync(join(dir, 'foo')));
      rmSync(join(dir, 'foo'));
    });
    await client.commit('del/c4', 'del/l4');
    await mounted(await client.view('del/v4', 'del/c4'), (dir) => expect(tree(dir)).toEqual({ dir3: 'dir', 'dir3/foo': 'foo\n' }));
  });

  /** Prepares `key` over `parent`, lets `fn` write in it through a mount, commits it as `name`. */
  const layer = async (key: string, name: string, parent: string, fn: (dir: string) => void): Promise<void> => {
    await mounted(await client.prepare(key, parent), fn);
    await client.commit(name, key);
  };
  const inView = async <T>(key: string, parent: string, fn: (dir: string) => T): Promise<T> => mounted(await client.view(key, parent), fn);

  itMounts('a file updated in each of three layers reads as the last one wrote it (LayerFileUpdate)', async () => {
    await layer('lfu/1', 'lfu/c1', '', (d) => writeFileSync(join(d, 'foo'), 'first version, longer than the next\n'));
    await layer('lfu/2', 'lfu/c2', 'lfu/c1', (d) => writeFileSync(join(d, 'foo'), 'second\n'));
    await layer('lfu/3', 'lfu/c3', 'lfu/c2', (d) => {
      writeFileSync(join(d, 'foo'), 'third, and longest of the three versions\n');
      chmodSync(join(d, 'foo'), 0o600);
    });
    await inView('lfu/v2', 'lfu/c2', (d) => expect(readFileSync(join(d, 'foo'), 'utf8')).toBe('second\n'));
    await inView('lfu/v3', 'lfu/c3', (d) => {
      expect(readFileSync(join(d, 'foo'), 'utf8')).toBe('third, and longest of the three versions\n');
      expect(lstatSync(join(d, 'foo')).mode & 0o7777).toBe(0o600);
    });
  });

  itMounts('a directory tree of a lower layer removed above is gone, and one made again is empty (RemoveDirectoryInLowerLayer)', async () => {
    await layer('rdl/1', 'rdl/c1', '', (d) => {
      mkdirSync(join(d, 'lib/deep/er'), { recursive: true });
      writeFileSync(join(d, 'lib/deep/er/f'), 'f\n');
      writeFileSync(join(d, 'lib/g'), 'g\n');
      writeFileSync(join(d, 'keep'), 'k\n');
    });
    await layer('rdl/2', 'rdl/c2', 'rdl/c1', (d) => rmSync(join(d, 'lib'), { recursive: true }));
    await inView('rdl/v2', 'rdl/c2', (d) => expect(tree(d)).toEqual({ keep: 'k\n' }));
    await layer('rdl/3', 'rdl/c3', 'rdl/c2', (d) => mkdirSync(join(d, 'lib')));
    await inView('rdl/v3', 'rdl/c3', (d) => expect(tree(d)).toEqual({ keep: 'k\n', lib: 'dir' }));
  });

  itMounts('owners changed above a lower layer are what a view shows (Chown)', async () => {
    await layer('own/1', 'own/c1', '', (d) => {
      mkdirSync(join(d, 'dir'));
      writeFileSync(join(d, 'dir/file'), 'x\n');
      symlinkSync('file', join(d, 'dir/link'));
    });
    await layer('own/2', 'own/c2', 'own/c1', (d) => {
      chownSync(join(d, 'dir'), 1001, 1002);
      chownSync(join(d, 'dir/file'), 2001, 2002);
      lchownSync(join(d, 'dir/link'), 3001, 3002);
    });
    await inView('own/v', 'own/c2', (d) => {
      const owner = (p: string) => {
        const st = lstatSync(join(d, p));
        return [st.uid, st.gid];
      };
      expect([owner('dir'), owner('dir/file'), owner('dir/link')]).toEqual([
        [1001, 1002],
        [2001, 2002],
        [3001, 3002],
      ]);
      expect(readlinkSync(join(d, 'dir/link'))).toBe('file');
      expect(readFileSync(join(d, 'dir/file'), 'utf8')).toBe('x\n');
    });
  });

  itMounts('directory modes and owners made in an active snapshot are kept by its commit (DirectoryPermissionOnCommit)', async () => {
    const dirs: Array<[string, number, number]> = [
      ['dir-0700', 0o700, 1000],
      ['dir-0750', 0o750, 1001],
      ['dir-0777', 0o777, 1002],
      ['dir-1777', 0o1777, 1003],
      ['dir-0755/nested-0711', 0o711, 1004],
    ];
    await layer('dpc/1', 'dpc/c1', '', (d) => {
      mkdirSync(join(d, 'dir-0755'));
      chmodSync(join(d, 'dir-0755'), 0o755);
      for (const [p, mode, uid] of dirs) {
        mkdirSync(join(d, p));
        chmodSync(join(d, p), mode);
        chownSync(join(d, p), uid, uid);
      }
    });
    // Above it, an empty layer: the modes come through unchanged.
    await layer('dpc/2', 'dpc/c2', 'dpc/c1', () => {});
    await inView('dpc/v', 'dpc/c2', (d) => {
      for (const [p, mode, uid] of dirs) {
        const st = lstatSync(join(d, p));
        expect([p, st.mode & 0o7777, st.uid, st.gid]).toEqual([p, mode, uid, uid]);
      }
    });
  });

  itMounts('files, hard links and a directory moved from a lower layer: gone where they were, whole where they went (MoveFileFromLowerLayer)', async () => {
    await layer('mv/1', 'mv/c1', '', (d) => {
      writeFileSync(join(d, 'a'), 'a\n');
      linkSync(join(d, 'a'), join(d, 'h'));
      mkdirSync(join(d, 'dir/sub'), { recursive: true });
      writeFileSync(join(d, 'dir/sub/f'), 'f\n');
    });
    // mv copies what overlayfs will not rename in place (a lower directory: EXDEV), as a user's would.
    await layer('mv/2', 'mv/c2', 'mv/c1', (d) => {
      execFileSync('mv', [join(d, 'a'), join(d, 'moved')]);
      execFileSync('mv', [join(d, 'dir'), join(d, 'dir2')]);
    });
    await inView('mv/v', 'mv/c2', (d) => {
      expect(tree(d)).toEqual({ moved: 'a\n', h: 'a\n', dir2: 'dir', 'dir2/sub': 'dir', 'dir2/sub/f': 'f\n' });
    });
  });

  itMounts("transitivity with writes: B over A sees A's files and its own, and its parent is A", async () => {
    await layer('trw/1', 'trw/A', '', (d) => writeFileSync(join(d, 'a'), 'from A\n'));
    await layer('trw/2', 'trw/B', 'trw/A', (d) => writeFileSync(join(d, 'b'), 'from B\n'));
    expect((await client.stat('trw/B')).parent).toBe('trw/A');
    await inView('trw/v', 'trw/B', (d) => expect(tree(d)).toEqual({ a: 'from A\n', b: 'from B\n' }));
    await inView('trw/va', 'trw/A', (d) => expect(tree(d)).toEqual({ a: 'from A\n' }));
  });

  itMounts('the root of a new snapshot is a directory of mode 0755 (RootPermission)', async () => {
    await mounted(await client.prepare('rootperm/a'), (d) => expect(lstatSync(d).mode & 0o7777).toBe(0o755));
    await client.commit('rootperm/c', 'rootperm/a');
    await inView('rootperm/v', 'rootperm/c', (d) => expect(lstatSync(d).mode & 0o7777).toBe(0o755));
  });

  itMounts("a chain of 128 committed layers mounts, every layer's file seen through the top", async () => {
    let parent = '';
    for (let i = 0; i < 128; i++) {
      await layer(`deep/a${i}`, `deep/c${i}`, parent, (d) => writeFileSync(join(d, `f${i}`), `${i}\n`));
      parent = `deep/c${i}`;
    }
    await inView('deep/v', parent, (d) => {
      const t = tree(d);
      expect(Object.keys(t)).toHaveLength(128);
      for (let i = 0; i < 128; i++) expect(t[`f${i}`]).toBe(`${i}\n`);
    });
  });

  it('transitivity: A <- B, the parent of B is A, whose parent is none', async () => {
    await client.prepare('tr/preparing');
    await client.commit('tr/A', 'tr/preparing');
    await client.prepare('tr/next', 'tr/A');
    await client.commit('tr/B', 'tr/next');
    const b = await client.stat('tr/B');
    expect(b.parent).toBe('tr/A');
    expect((await client.stat(b.parent)).parent).toBe('');
  });

  it('refuses a second Prepare or View with the same key (ALREADY_EXISTS), and names already committed', async () => {
    await client.prepare('pv/p');
    await client.commit('pv/A', 'pv/p');
    await client.prepare('pv/new', 'pv/A');
    expect(await statusOf(client.view('pv/new', 'pv/A'))).toBe('ALREADY_EXISTS');
    expect(await statusOf(client.prepare('pv/new', 'pv/A'))).toBe('ALREADY_EXISTS');
    await client.view('pv/view', 'pv/A');
    expect(await statusOf(client.view('pv/view', 'pv/A'))).toBe('ALREADY_EXISTS');
    expect(await statusOf(client.prepare('pv/A', ''))).toBe('ALREADY_EXISTS');
    expect(await statusOf(client.commit('pv/A', 'pv/new'))).toBe('ALREADY_EXISTS');
  });

  it('update: times, labels replaced, masked by labels.<key>, immutable fields refused', async () => {
    const t1 = Date.now();
    await client.prepare('up/c1-a');
    await client.commit('up/c1', 'up/c1-a');
    await client.prepare('up/c2-a', 'up/c1');
    await client.commit('up/c2', 'up/c2-a');
    await client.prepare('up/a1', 'up/c2');
    await client.prepare('up/a2');
    await client.view('up/v1', 'up/c2');
    await client.view('up/v2');
    const t2 = Date.now();
    const cases: Array<[string, SnapshotInfo['kind'], string]> = [
      ['up/c1', 'COMMITTED', ''],
      ['up/c2', 'COMMITTED', 'up/c1'],
      ['up/a1', 'ACTIVE', 'up/c2'],
      ['up/a2', 'ACTIVE', ''],
      ['up/v1', 'VIEW', 'up/c2'],
      ['up/v2', 'VIEW', ''],
    ];
    for (const [name, kind, parent] of cases) {
      let st = await client.stat(name);
      expect(ms(st.createdAt)).toBeGreaterThanOrEqual(t1);
      expect(ms(st.createdAt)).toBeLessThanOrEqual(t2 + 1);
      expect(st.updatedAt).toEqual(st.createdAt);
      expect(st).toMatchObject({ name, kind, parent });
      const created = st.createdAt;
      const u1 = Date.now();
      st = await client.update({ ...st, parent: 'doesnotexist', labels: { l1: 'v1', l2: 'v2', l3: 'v3', 'containerd.io/gc.root': 'r' } });
      expect(st.createdAt).toEqual(created);
      expect(ms(st.updatedAt)).toBeGreaterThanOrEqual(u1);
      expect(ms(st.updatedAt)).toBeLessThanOrEqual(Date.now() + 1);
      expect(st).toMatchObject({ name, kind, parent, labels: { l1: 'v1', l2: 'v2', l3: 'v3', 'containerd.io/gc.root': 'r' } });
      st = await client.update({ ...st, labels: { l1: 'updated', l4: 'v4' } }, ['labels.l1', 'labels.l2']);
      expect(st.labels).toEqual({ l1: 'updated', l3: 'v3', 'containerd.io/gc.root': 'r' });
      st = await client.update({ ...st, labels: { l4: 'v4', 'containerd.io/gc.root': 'r' } }, ['labels']);
      expect(st.labels).toEqual({ l4: 'v4', 'containerd.io/gc.root': 'r' });
      expect(await statusOf(client.update({ ...st, parent: 'doesnotexist' }, ['parent']))).toBe('INVALID_ARGUMENT');
      expect((await client.stat(name)).labels).toEqual({ l4: 'v4', 'containerd.io/gc.root': 'r' });
    }
  });

  it('remove: keys come free again; intermediate snapshots with children stay (FAILED_PRECONDITION)', async () => {
    await client.prepare('rm/committed-a');
    await client.commit('rm/committed-1', 'rm/committed-a');
    await client.prepare('rm/reuse-1', 'rm/committed-1');
    await client.remove('rm/reuse-1');
    await client.view('rm/reuse-1', 'rm/committed-1');
    await client.remove('rm/reuse-1');
    await client.prepare('rm/reuse-1');
    await client.remove('rm/committed-1');
    await client.commit('rm/committed-1', 'rm/reuse-1');
    expect((await client.stat('rm/committed-1')).kind).toBe('COMMITTED');

    await client.prepare('rm/base');
    await client.commit('rm/committed-base', 'rm/base');
    await client.prepare('rm/intermediate', 'rm/committed-base');
    await client.commit('rm/committed-inter', 'rm/intermediate');
    await client.prepare('rm/top', 'rm/committed-inter');
    expect(await statusOf(client.remove('rm/committed-inter'))).toBe('FAILED_PRECONDITION');
    await client.remove('rm/top');
    await client.remove('rm/committed-inter');
    await client.remove('rm/committed-base');
    expect(await statusOf(client.remove('rm/committed-base'))).toBe('NOT_FOUND');
  });

  it('answers NOT_FOUND, INVALID_ARGUMENT and FAILED_PRECONDITION where containerd does', async () => {
    for (const p of [
      client.stat('nf/x'),
      client.mounts('nf/x'),
      client.usage('nf/x'),
      client.remove('nf/x'),
      client.update({ name: 'nf/x', labels: {} }),
      client.commit('nf/y', 'nf/x'),
      client.prepare('nf/a', 'nf/missing-parent'),
    ]) {
      expect(await statusOf(p)).toBe('NOT_FOUND');
    }
    await client.prepare('nf/active');
    expect(await statusOf(client.prepare('nf/child', 'nf/active'))).toBe('INVALID_ARGUMENT'); // parent must be committed
    await client.view('nf/view');
    expect(await statusOf(client.commit('nf/c', 'nf/view'))).toBe('FAILED_PRECONDITION');
    await client.commit('nf/c', 'nf/active');
    expect(await statusOf(client.mounts('nf/c'))).toBe('FAILED_PRECONDITION');
    expect(await statusOf(client.list(['labels."unterminated']))).toBe('INVALID_ARGUMENT');
    expect(await statusOf(client.prepare('nf/big', '', { k: 'v'.repeat(5000) }))).toBe('INVALID_ARGUMENT');
  });

  it('usage: an active snapshot measured now, a committed one the same, a view nothing', async () => {
    const [m] = await client.prepare('us/a');
    writeFileSync(join(m!.source, 'f'), Buffer.alloc(1 << 20, 1));
    const u = await client.usage('us/a');
    expect(u.inodes).toBe(2);
    expect(u.size).toBeGreaterThanOrEqual(1 << 20);
    await client.commit('us/c', 'us/a');
    expect(await client.usage('us/c')).toEqual(u);
    await client.view('us/v', 'us/c');
    expect(await client.usage('us/v')).toEqual({ size: 0, inodes: 0 });
  });

  it('lists with containerd filters (the one the metadata layer sends for remote snapshots)', async () => {
    await client.prepare('ls/a');
    await client.commit('ls/base', 'ls/a', { 'containerd.io/snapshot.ref': 'sha256:aaa' });
    await client.prepare('ls/b', 'ls/base');
    await client.commit('ls/top', 'ls/b', { 'containerd.io/snapshot.ref': 'sha256:bbb' });
    await client.view('ls/v', 'ls/top');
    const names = async (f: string[]) => (await client.list(f)).map((i) => i.name).sort();
    expect(await names(['labels."containerd.io/snapshot.ref"==sha256:bbb,parent=="ls/base"'])).toEqual(['ls/top']);
    expect(await names(['labels."containerd.io/snapshot.ref"==sha256:bbb,parent=="ls/other"'])).toEqual([]);
    // OR'd filters: two committed names by a quoted pattern, and the view by its kind.
    expect(await names(['name~="^ls/(base|top)$"', 'kind==view,name~=^ls/'])).toEqual(['ls/base', 'ls/top', 'ls/v']);
    // A label's presence, a parent that is not empty, a kind and a label together.
    expect(await names(['labels."containerd.io/snapshot.ref",name~=^ls/'])).toEqual(['ls/base', 'ls/top']);
    expect(await names(['parent!="",name~=^ls/'])).toEqual(['ls/top', 'ls/v']);
    expect(await names(['kind==committed,labels."containerd.io/snapshot.ref"==sha256:aaa'])).toEqual(['ls/base']);
    expect(await names(['kind==active,name~=^ls/'])).toEqual([]);
  });

  it('cleanup removes directories no record owns and nothing else', async () => {
    const stray = join(root, 'snapshots', 'containerd', 'zz-0123456789ab');
    mkdirSync(join(stray, 'fs'), { recursive: true });
    const before = await client.list();
    await client.cleanup();
    expect(existsSync(stray)).toBe(false);
    expect(await client.list()).toEqual(before);
  });

  itMounts('records survive a restart; stopping leaves mounted snapshot directories alone', async () => {
    const [m] = await client.prepare('rs/a');
    writeFileSync(join(m!.source, 'kept'), 'across restarts\n');
    await client.commit('rs/c', 'rs/a', { 'containerd.io/snapshot.ref': 'sha256:ccc' });
    const running = await client.prepare('rs/container', 'rs/c');
    const target = join(work.dir, 'rs-mounted');
    mkdirSync(target);
    mountAll(running, target);
    try {
      writeFileSync(join(target, 'written'), 'by the container\n');
      const before = await client.list();
      client.close();
      await stop(daemon);
      expect(existsSync(snapSocket)).toBe(false);
      // The container's rootfs is untouched by the shutdown.
      expect(tree(target)).toEqual({ kept: 'across restarts\n', written: 'by the container\n' });
      daemon = await serve();
      client = snapshotsClient(snapSocket);
      expect(await client.list()).toEqual(before);
      expect(await client.mounts('rs/container')).toEqual(running);
      expect(tree(target)).toEqual({ kept: 'across restarts\n', written: 'by the container\n' });
    } finally {
      unmount(target);
    }
    await client.commit('rs/c2', 'rs/container');
    await mounted(await client.view('rs/v', 'rs/c2'), (dir) => expect(tree(dir)).toEqual({ kept: 'across restarts\n', written: 'by the container\n' }));
  });

  it('a kill -9 amid a burst of calls leaves whole records: the next start loads them and sweeps the litter', async () => {
    const crashRoot = join(work.dir, 'crash-root');
    const crashSocket = join(work.dir, 'crash.sock');
    const crashSnap = join(work.dir, 'crash-snap.sock');
    const start = async (): Promise<RunningDaemon> => {
      const d = startDaemon(['--socket', crashSocket, '--snapshotter-socket', crashSnap, '--root', crashRoot]);
      await d.waitLog((l) => l.msg === 'fastpulld serving');
      return d;
    };
    let victim = await start();
    const c = snapshotsClient(crashSnap);
    // Chains of prepare, write, commit, and removals, in parallel lanes, until the kill, which comes
    // once KILL_AFTER commits were answered (not at a time: a loaded machine would shift it).
    const KILL_AFTER = 24;
    let killing = false;
    let stopped = false;
    /** Names whose commit was answered before the kill, less those since asked to be removed. */
    const acked = new Set<string>();
    let commits = 0;
    let enough!: () => void;
    const reached = new Promise<void>((r) => (enough = r));
    const lane = async (n: number): Promise<void> => {
      for (let i = 0; !stopped; i++) {
        const base = `crash/${n}/${i}`;
        try {
          const [m] = await c.prepare(`${base}/a`);
          writeFileSync(join(m!.source, 'f'), `${base}\n`);
          await c.commit(`${base}/c`, `${base}/a`, { k: base });
          if (!killing) acked.add(`${base}/c`);
          if (++commits >= KILL_AFTER) enough();
          await c.prepare(`${base}/child`, `${base}/c`);
          if (i % 2 === 0) {
            await c.remove(`${base}/child`);
            // Asked to go: whether or not the answer comes before the kill, it need not survive.
            acked.delete(`${base}/c`);
            await c.remove(`${base}/c`);
          }
        } catch (e) {
          // Only the daemon's death ends a lane; any other failure is the test's.
          if (killing) return;
          throw e;
        }
      }
    };
    const lanes = [0, 1, 2, 3].map(lane);
    await Promise.race([reached, Promise.all(lanes)]);
    killing = true;
    victim.proc.kill('SIGKILL');
    await victim.exited;
    stopped = true;
    await Promise.all(lanes);
    c.close();
    expect(commits).toBeGreaterThanOrEqual(KILL_AFTER);

    victim = await start();
    const c2 = snapshotsClient(crashSnap);
    try {
      const listed = await c2.list();
      expect(listed.length).toBeGreaterThan(0);
      // Every commit answered before the kill (and not removed since) survived it.
      const committedNow = new Set(listed.filter((i) => i.kind === 'COMMITTED').map((i) => i.name));
      expect([...acked].filter((name) => !committedNow.has(name))).toEqual([]);
      const dir = join(crashRoot, 'snapshots', 'containerd');
      expect(readdirSync(dir).filter((n) => n.startsWith('.new-') || n.startsWith('.trash-'))).toEqual([]);
      for (const info of listed) {
        if (info.kind === 'COMMITTED') {
          expect(info.labels.k).toBe(info.name.slice(0, -'/c'.length));
          // Its tree holds what was written before the commit.
          const [m] = await c2.view(`${info.name}/check`, info.name);
          expect(readFileSync(join(m!.source, 'f'), 'utf8')).toBe(`${info.labels.k}\n`);
          await c2.remove(`${info.name}/check`);
        } else {
          const [m] = await c2.mounts(info.name);
          expect(m).toBeDefined();
          if (info.parent === '') expect(existsSync(m!.source)).toBe(true);
          else for (const o of m!.options.filter((x) => /^(upperdir|workdir)=/.test(x))) expect(existsSync(o.split('=')[1]!)).toBe(true);
        }
      }
    } finally {
      c2.close();
      await stop(victim);
    }
  });
});
