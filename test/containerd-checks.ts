// What the containerd tests look at besides containerd's answers: a fingerprint of snapshot
// directories (to prove nothing wrote to them), the overlay a container's root is mounted from
// (read from /proc/self/mountinfo inside it), the merged tree of a snapshot read through a view
// containerd makes, and a bounded wait.
import { createHash } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { lstat, readdir, readFile, readlink } from 'node:fs/promises';
import { join } from 'node:path';
import { readTree, type TreeEntry } from '@fastpull/core/testing';
import type { PrivateContainerd } from './containerd.js';
import { mountAll, unmount, type SnapshotMount } from './snapshotter-client.js';

/**
 * A digest of everything under `dir`: each entry's path, type, mode, owner, size, link count, times
 * (mtime and ctime, so a changed extended attribute or a chmod shows too), device number, symlink
 * target and file content. Equal before and after means nothing was written there.
 */
export async function fingerprint(dir: string): Promise<string> {
  const h = createHash('sha256');
  const walk = async (abs: string, rel: string): Promise<void> => {
    for (const name of (await readdir(abs)).sort()) {
      const p = join(abs, name);
      const key = rel === '' ? name : `${rel}/${name}`;
      const st = await lstat(p, { bigint: true });
      h.update(`${key}\0${st.mode}\0${st.uid}:${st.gid}\0${st.size}\0${st.nlink}\0${st.mtimeNs}\0${st.ctimeNs}\0${st.rdev}\0`);
      if (st.isDirectory()) await walk(p, key);
      else if (st.isFile())
        h.update(
          createHash('sha256')
            .update(await readFile(p))
            .digest('hex'),
        );
      else if (st.isSymbolicLink()) h.update(await readlink(p));
      h.update('\n');
    }
  };
  await walk(dir, '');
  return h.digest('hex');
}

/** The fingerprints of each directory in `dir` (by name), e.g. every committed snapshot of a store. */
export async function fingerprints(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const name of (await readdir(dir)).sort()) {
    if ((await lstat(join(dir, name))).isDirectory()) out[name] = await fingerprint(join(dir, name));
  }
  return out;
}

/** The overlay mounted at `/` in a /proc/self/mountinfo: its lower directories (top first) and upper directory. */
export function rootOverlay(mountinfo: string): { lowerdirs: string[]; upperdir: string | undefined } {
  for (const line of mountinfo.split('\n')) {
    const [left, right] = line.split(' - ');
    if (!left || !right || left.split(' ')[4] !== '/') continue;
    const [fstype, , superOptions = ''] = right.split(' ');
    if (fstype !== 'overlay') continue;
    const opts = superOptions.split(',');
    const lower = opts.find((o) => o.startsWith('lowerdir='))?.slice('lowerdir='.length);
    const upper = opts.find((o) => o.startsWith('upperdir='))?.slice('upperdir='.length);
    return { lowerdirs: lower ? lower.split(':') : [], upperdir: upper };
  }
  throw new Error(`no overlay mounted at / in:\n${mountinfo}`);
}

/** ctr prints mounts with Go's field names. */
export function ctrMounts(json: string): SnapshotMount[] {
  return (JSON.parse(json) as Array<{ Type: string; Source: string; Options?: string[] }>).map((m) => ({
    type: m.Type,
    source: m.Source,
    target: '',
    options: m.Options ?? [],
  }));
}

let viewSeq = 0;

/**
 * The merged tree a snapshotter gives the committed snapshot `name` in `namespace`, read through a
 * view containerd makes (`ctr snapshots view --mounts`), mounted under `workDir` and removed after.
 */
export async function mergedTree(
  containerd: PrivateContainerd,
  namespace: string,
  snapshotter: string,
  name: string,
  workDir: string,
): Promise<Map<string, TreeEntry>> {
  const key = `view-${process.pid}-${viewSeq++}`;
  const r = await containerd.ctr(['snapshots', '--snapshotter', snapshotter, 'view', '--mounts', key, name], { namespace });
  if (r.status !== 0) throw new Error(`ctr snapshots view ${name} (${snapshotter}, ${namespace}): ${r.stderr}`);
  const dir = join(workDir, key);
  mkdirSync(dir, { recursive: true });
  mountAll(ctrMounts(r.stdout), dir);
  // The view goes whatever the reading did; a failure to read is the one reported.
  const read = await readTree(dir).then(
    (tree) => ({ tree }),
    (error: unknown) => ({ error }),
  );
  unmount(dir);
  // ctr made the view under a lease of its own that ended with it: a collection may have taken it already.
  const rm = await containerd.ctr(['snapshots', '--snapshotter', snapshotter, 'rm', key], { namespace });
  if ('error' in read) throw read.error;
  if (rm.status !== 0 && !rm.stderr.includes('not found')) throw new Error(`removing view ${key}: ${rm.stderr}`);
  return read.tree;
}

/** Polls `check` every 200 ms until it returns true or `timeoutMs` passes; returns its last answer. */
export async function waitUntil(check: () => Promise<boolean> | boolean, timeoutMs = 120_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 200));
  }
}
