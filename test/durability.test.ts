// Committed means durable: the built CLI pulls under `strace -f`, and the trace must show that every
// file and directory of each snapshot was flushed (syncfs of the store's filesystem, or fsync of the
// entry) after its last change and before the rename that committed the snapshot; that the rename
// was made durable (fsync of committed/) before the image record was written; and that the record
// itself was durable before the CLI reported the pull. With the default flush, each snapshot's last
// syncfs must go through an fd of its directory opened before anything was written into it (so that
// write-back errors seen by the syncfs calls started while extracting are reported to it too), and
// such a call must have run while a layer was extracting. Run with the default flush, with the fallback
// used where the native addon cannot load (fsync of every file and directory), and with --no-sync,
// where the same check must find the files unflushed (so it can fail).
import { spawnSync } from 'node:child_process';
import { lstatSync, mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chainIDs } from '@fastpull/core';
import { buildImage, type BuiltImage, findDistributionBinary, lacks, lacksRegistry, pushImage, startDistribution } from '@fastpull/core/testing';
import { cliPath, tempDir } from './helpers.js';
import { parseTrace, straceUnavailable, type Syscall } from './strace.js';

const binary = findDistributionBinary();
const noStrace = straceUnavailable();
if (!binary) console.warn('skipping the durability test: docker-registry is not installed');
if (noStrace) console.warn(`skipping the durability test: ${noStrace}`);

const TRACED = [
  'openat',
  'open',
  'creat',
  'write',
  'pwrite64',
  'pwritev',
  'writev',
  'ftruncate',
  'truncate',
  'fallocate',
  'fchmod',
  'chmod',
  'fchmodat',
  'fchown',
  'chown',
  'lchown',
  'fchownat',
  'utimensat',
  'setxattr',
  'lsetxattr',
  'fsetxattr',
  'removexattr',
  'lremovexattr',
  'fremovexattr',
  'mkdir',
  'mkdirat',
  'mknod',
  'mknodat',
  'symlink',
  'symlinkat',
  'link',
  'linkat',
  'unlink',
  'unlinkat',
  'rmdir',
  'rename',
  'renameat',
  'renameat2',
  'fsync',
  'fdatasync',
  'syncfs',
  'sync_file_range',
  'fcntl',
];
/** Calls that add, remove or rename a name: they change the directory holding it, and the entry. */
const NAMING = new Set([
  'mkdir',
  'mkdirat',
  'mknod',
  'mknodat',
  'symlink',
  'symlinkat',
  'link',
  'linkat',
  'unlink',
  'unlinkat',
  'rmdir',
  'rename',
  'renameat',
  'renameat2',
  'creat',
]);
/** Calls that change an entry's data or metadata. */
const CHANGING = new Set([
  'write',
  'pwrite64',
  'pwritev',
  'writev',
  'ftruncate',
  'truncate',
  'fallocate',
  'fchmod',
  'chmod',
  'fchmodat',
  'fchown',
  'chown',
  'lchown',
  'fchownat',
  'utimensat',
  'setxattr',
  'lsetxattr',
  'fsetxattr',
  'removexattr',
  'lremovexattr',
  'fremovexattr',
  ...NAMING,
]);
const isRename = (c: Syscall) => c.name === 'rename' || c.name === 'renameat' || c.name === 'renameat2';
const creates = (c: Syscall) => NAMING.has(c.name) || ((c.name === 'openat' || c.name === 'open') && c.args.includes('O_CREAT'));

interface Traced {
  readonly calls: Syscall[];
  readonly root: string;
  readonly status: number | null;
  readonly output: string;
}

/** Pulls `ref` with the built CLI under strace into a fresh store; returns the parsed trace. */
function tracedPull(dir: string, ref: string, args: string[], env: NodeJS.ProcessEnv): Traced {
  const root = join(dir, 'root');
  const trace = join(dir, 'trace');
  mkdirSync(dir, { recursive: true });
  const r = spawnSync(
    'strace',
    ['-f', '-y', '-qq', '-s', '64', '-o', trace, '-e', `trace=${TRACED.join(',')}`, process.execPath, cliPath, 'pull', '--json', '--root', root, ...args, ref],
    {
      encoding: 'utf8',
      env: { ...process.env, ...env },
      timeout: 300_000,
    },
  );
  return { calls: parseTrace(readFileSync(trace, 'latin1')), root, status: r.status, output: `${r.stdout}${r.stderr}` };
}

/** Every entry under `dir` (itself included, as ''), relative, with whether it can be opened to fsync. */
function entries(dir: string): Array<{ rel: string; openable: boolean }> {
  const out: Array<{ rel: string; openable: boolean }> = [];
  const walk = (rel: string): void => {
    const st = lstatSync(rel === '' ? dir : join(dir, rel));
    out.push({ rel, openable: st.isFile() || st.isDirectory() });
    if (st.isDirectory()) for (const name of readdirSync(join(dir, rel))) walk(rel === '' ? name : `${rel}/${name}`);
  };
  walk('');
  return out;
}

/**
 * What the trace shows about one pull: the problems found, and how many entries of how many
 * snapshots were checked. `metadata`: the digests of the manifest and config blobs, which must be
 * durable in content/ before the image record that names them.
 */
function checkDurability(t: Traced, metadata: readonly string[]): { problems: string[]; snapshots: number; entries: number; unflushedFiles: number } {
  const { calls, root } = t;
  const ok = calls.filter((c) => c.ret >= 0);
  const problems: string[] = [];
  const sameFs = statSync(root).dev === statSync(join(root, 'snapshots')).dev;
  const flushes = ok.filter(
    (c) => c.name === 'fsync' || c.name === 'fdatasync' || (c.name === 'syncfs' && sameFs && c.paths.some((p) => p.startsWith(`${root}/`))),
  );
  const syncDirAfter = (dir: string, at: number) => flushes.find((f) => f.name !== 'syncfs' && f.paths.includes(dir) && f.start > at);
  const commits = ok.filter(
    (c) =>
      isRename(c) &&
      c.paths.length === 2 &&
      dirname(c.paths[0]!) === join(root, 'snapshots', 'active') &&
      dirname(c.paths[1]!) === join(root, 'snapshots', 'committed'),
  );
  let checked = 0;
  let unflushedFiles = 0;
  const durableAt: number[] = [];
  for (const rename of commits) {
    const [active, committed] = rename.paths as [string, string];
    for (const { rel, openable } of entries(committed)) {
      const path = rel === '' ? active : join(active, rel);
      checked++;
      // Its last change: a call on the entry itself, or one naming an entry inside it.
      let last = -1;
      for (const c of ok) {
        if (c.start >= rename.start) break;
        if (!(CHANGING.has(c.name) || creates(c))) continue;
        if (c.paths.includes(path) || (creates(c) && c.paths.some((p) => dirname(p) === path))) last = Math.max(last, c.end);
      }
      // A symlink or device node cannot be opened to fsync: the fsync of its directory covers it.
      const target = openable ? path : dirname(path);
      const flush = flushes.find((f) => f.start > last && f.end < rename.start && (f.name === 'syncfs' || f.paths.includes(target)));
      if (!flush) {
        problems.push(`${rel || '.'} of ${active}: no flush after its last change (trace line ${last + 1}) and before the commit (line ${rename.start + 1})`);
        if (rel.startsWith('fs/') && openable && !lstatSync(join(committed, rel)).isDirectory()) unflushedFiles++;
      }
    }
    const renamed = syncDirAfter(join(root, 'snapshots', 'committed'), rename.end);
    if (!renamed) problems.push(`the commit of ${committed} (line ${rename.start + 1}) was never made durable: no fsync of committed/ after it`);
    else durableAt.push(renamed.end);
  }
  // The image record: written (and fsynced) whole, renamed into images/ once every snapshot's
  // commit was durable, and its own rename durable before the CLI reported the pull.
  const record = ok.find((c) => isRename(c) && c.paths.length === 2 && dirname(c.paths[1]!) === join(root, 'images') && c.paths[1]!.endsWith('.json'));
  const reported = ok.find((c) => c.name === 'write' && /^1</.test(c.args) && c.args.includes('\\"type\\":\\"done\\"'));
  if (!record) problems.push('no image record was renamed into images/');
  else {
    for (const at of durableAt)
      if (at > record.start) problems.push(`the image record (line ${record.start + 1}) was written before a snapshot's commit was durable (line ${at + 1})`);
    for (const digest of metadata) {
      const target = join(root, 'content', 'blobs', 'sha256', digest.slice('sha256:'.length));
      const stored = ok.find((c) => isRename(c) && c.paths.length === 2 && c.paths[1] === target);
      if (!stored) {
        problems.push(`${digest} was never renamed into content/blobs`);
        continue;
      }
      const written = Math.max(...ok.filter((c) => c.paths.includes(stored.paths[0]!) && CHANGING.has(c.name) && c.start < stored.start).map((c) => c.end));
      if (!flushes.some((f) => f.paths.includes(stored.paths[0]!) && f.start > written && f.end < stored.start))
        problems.push(`${digest} was renamed into content/blobs before it was fsynced`);
      const dirSync = syncDirAfter(dirname(target), stored.end);
      if (!dirSync || dirSync.end > record.start)
        problems.push(`${digest}'s rename into content/blobs was not durable before the image record was written (line ${record.start + 1})`);
    }
    const tmp = record.paths[0]!;
    const lastWrite = Math.max(...ok.filter((c) => c.paths.includes(tmp) && CHANGING.has(c.name) && c.start < record.start).map((c) => c.end));
    if (!flushes.some((f) => f.paths.includes(tmp) && f.start > lastWrite && f.end < record.start))
      problems.push('the image record was renamed into place before it was fsynced');
    const dirSync = syncDirAfter(join(root, 'images'), record.end);
    if (!dirSync) problems.push("the image record's rename was never made durable: no fsync of images/ after it");
    else if (!reported || reported.start < dirSync.end)
      problems.push(`the pull was reported (line ${(reported?.start ?? -1) + 1}) before its image record was durable (line ${dirSync.end + 1})`);
  }
  return { problems, snapshots: commits.length, entries: checked, unflushedFiles };
}

/** The snapshot's own directory, of a commit rename. */
const activeOf = (rename: Syscall) => rename.paths[0]!;
const fdOf = (c: Syscall) => Number(/^(\d+)</.exec(c.args)?.[1] ?? NaN);

/**
 * For each commit: how its last flush before the rename went. It must be a syncfs through an fd of
 * the snapshot's directory opened before the first name was made inside its fs/.
 */
function finalFlushes(t: Traced): string[] {
  const ok = t.calls.filter((c) => c.ret >= 0);
  return ok
    .filter((c) => isRename(c) && c.paths.length === 2 && dirname(c.paths[1]!) === join(t.root, 'snapshots', 'committed'))
    .map((rename) => {
      const active = activeOf(rename);
      const flush = ok.filter((c) => c.name === 'syncfs' && c.paths.includes(active) && c.end < rename.start).at(-1);
      if (!flush) return `no syncfs through ${active} before its commit`;
      const fd = fdOf(flush);
      // The latest open that gave this fd number: the one the syncfs went through (fds are per process).
      const opened = ok.filter((c) => (c.name === 'openat' || c.name === 'open') && c.ret === fd && c.paths.includes(active) && c.end < flush.start).at(-1);
      const firstWrite = ok.find((c) => creates(c) && c.paths.some((p) => p.startsWith(`${active}/fs/`)));
      if (!opened) return `no open of ${active} gave the fd ${fd} it was flushed through`;
      if (!firstWrite || opened.end > firstWrite.start)
        return `the fd of ${active} was opened after the first write into it (line ${(firstWrite?.start ?? -1) + 1})`;
      return 'through an fd opened before the writes';
    });
}

/**
 * For each commit: whether the layer's downloaded blob (its ingest's data file, named after the
 * first 16 hex digits of the layer digest) was unlinked before the snapshot's final flush, which
 * would otherwise write it only for it to be deleted. `layers`: chainID -> layer digest.
 */
function blobsGoneBeforeFlush(t: Traced, layers: ReadonlyMap<string, string>): string[] {
  const ok = t.calls.filter((c) => c.ret >= 0);
  return ok
    .filter((c) => isRename(c) && c.paths.length === 2 && dirname(c.paths[1]!) === join(t.root, 'snapshots', 'committed'))
    .map((rename) => {
      // committed/<hex of the chainID>
      const digest = layers.get(`sha256:${rename.paths[1]!.split('/').at(-1)!}`);
      if (!digest) return `no layer for ${rename.paths[1]}`;
      const prefix = join(t.root, 'content', 'ingest', `${digest.split(':')[1]!.slice(0, 16)}-`);
      const unlink = ok.find((c) => (c.name === 'unlink' || c.name === 'unlinkat') && c.paths.some((p) => p.startsWith(prefix) && p.endsWith('/data')));
      const flush = ok.filter((c) => c.name === 'syncfs' && c.paths.includes(activeOf(rename)) && c.end < rename.start).at(-1);
      if (!unlink) return `the ingest of ${digest} was never unlinked`;
      if (!flush || unlink.end > flush.start)
        return `the ingest of ${digest} was unlinked (line ${unlink.start + 1}) after its snapshot's final flush (line ${(flush?.start ?? -1) + 1})`;
      return 'gone before the flush';
    });
}

/** How many syncfs calls of a snapshot's fs/ started before the last file of that snapshot was created. */
function backgroundFlushes(t: Traced): number {
  const ok = t.calls.filter((c) => c.ret >= 0);
  let n = 0;
  for (const sync of ok.filter((c) => c.name === 'syncfs')) {
    const fsDir = sync.paths.find((p) => p.endsWith('/fs') && dirname(dirname(p)) === join(t.root, 'snapshots', 'active'));
    if (fsDir && ok.some((c) => creates(c) && c.start > sync.start && c.paths.some((p) => p.startsWith(`${fsDir}/`)))) n++;
  }
  return n;
}

describe.skipIf(lacksRegistry() || lacks('strace', noStrace))('committed means durable (strace)', () => {
  let registry: Awaited<ReturnType<typeof startDistribution>>;
  let image: BuiltImage;
  let ref = '';
  const work = tempDir('durability');

  beforeAll(async () => {
    registry = await startDistribution({ dir: join(work.dir, 'registry') });
    image = await buildImage({
      layers: [
        [
          { type: 'dir', path: 'etc', mode: 0o755 },
          { type: 'file', path: 'etc/a', content: 'lower a\n', mode: 0o640 },
          { type: 'symlink', path: 'etc/l', target: 'a' },
          { type: 'hardlink', path: 'etc/h', target: 'etc/a' },
          { type: 'file', path: 'd/sub/deep/f', content: 'deep\n' },
          // Over the 8 MiB write-back step, so the extractor starts its write-back while writing it.
          { type: 'file', path: 'big/x', content: Buffer.alloc(20 * 1024 * 1024, 'fastpull ') },
          // Files under the step have no write-back of their own: past 8 MiB of them, a syncfs not
          // waited for starts (the big file's data counts for nothing there: it has its own).
          ...Array.from({ length: 3 }, (_, i) => ({ type: 'file' as const, path: `mid/m${i}`, content: Buffer.alloc(3 * 1024 * 1024, `mid ${i} `) })),
          ...Array.from({ length: 40 }, (_, i) => ({ type: 'file' as const, path: `many/f${i}`, content: `file ${i}\n` })),
        ],
        [
          // A whiteout and an implied parent: settled against the layer below, on the main thread,
          // after this layer's own unpack and before its commit.
          { type: 'whiteout', path: 'etc/a' },
          { type: 'opaque', path: 'd' },
          { type: 'file', path: 'd/new', content: 'upper\n' },
          { type: 'file', path: 'usr/local/bin/tool', content: '#!/bin/sh\n', mode: 0o755 },
        ],
        [{ type: 'file', path: 'etc/app.conf', content: 'x=1\n' }],
      ],
    });
    await pushImage(registry.url, 'durable/app', '1', image);
    ref = `${registry.host}/durable/app:1`;
  });
  afterAll(async () => {
    await registry?.stop();
    work.cleanup();
  });

  it.each<{ name: string; env: NodeJS.ProcessEnv; syncfs: boolean }>([
    { name: 'syncfs, with write-back started while extracting (the default)', env: {}, syncfs: true },
    { name: 'fsync of every file and directory (the fallback without the native addon)', env: { FASTPULL_SYNC_METHOD: 'fsync' }, syncfs: false },
  ])('flushes every entry of every snapshot before its commit, and the commits before the image record: $name', ({ env, syncfs }) => {
    const t = tracedPull(join(work.dir, `run-${Object.keys(env).join('-') || 'default'}`), ref, [], env);
    expect(t.status, t.output).toBe(0);
    const r = checkDurability(t, [image.manifestDigest, image.configDigest]);
    expect(r.snapshots).toBe(image.layers.length);
    expect(r.entries).toBeGreaterThan(50);
    expect(r.problems).toEqual([]);
    if (syncfs) {
      // Each snapshot's last flush is a syncfs through an fd of its directory opened before
      // anything was written into it (so that it reports every write-back error since), and
      // write-back was started while extracting: the big file's write-back started in steps, the
      // smaller files' by a syncfs not waited for, started before the layer's last file was written.
      expect(finalFlushes(t)).toEqual(Array.from({ length: image.layers.length }, () => 'through an fd opened before the writes'));
      const big = (c: Syscall) => c.ret >= 0 && c.paths.some((p) => p.endsWith('/fs/big/x'));
      expect(t.calls.some((c) => c.name === 'sync_file_range' && big(c))).toBe(true);
      expect(backgroundFlushes(t)).toBeGreaterThan(0);
      const ids = chainIDs(image.layers.map((l) => l.diffID));
      const layers = new Map(image.layers.map((l, i) => [ids[i]!, l.digest] as [string, string]));
      expect(blobsGoneBeforeFlush(t, layers)).toEqual(Array.from({ length: image.layers.length }, () => 'gone before the flush'));
    }
  });

  it.each<{ name: string; args: string[]; env: NodeJS.ProcessEnv }>([
    { name: '--no-sync', args: ['--no-sync'], env: {} },
    { name: 'FASTPULL_NO_SYNC=1', args: [], env: { FASTPULL_NO_SYNC: '1' } },
  ])('finds the files unflushed with $name, so the check can fail', ({ name, args, env }) => {
    const t = tracedPull(join(work.dir, `run-${name.replace(/\W/g, '')}`), ref, args, env);
    expect(t.status, t.output).toBe(0);
    const r = checkDurability(t, [image.manifestDigest, image.configDigest]);
    expect(r.snapshots).toBe(image.layers.length);
    expect(t.calls.filter((c) => c.name === 'syncfs')).toEqual([]);
    // Every regular file the layers hold went unflushed: 47 in the first (a hardlink counts), 2, 1.
    expect(r.unflushedFiles).toBe(50);
    expect(r.problems.length).toBeGreaterThanOrEqual(50);
  });
});
