// Writable overlay mounts of pulled images (`fastpull mount` / `unmount`): each gets a fresh upper and
// work dir under <root>/mounts/<id>/, recorded by core's mount records so unmount and gc know what is
// mounted where and which snapshots it uses. The image comes from the service (local or fastpulld);
// the mount itself is made here, by this process, on this host.
import { execFile } from 'node:child_process';
import { accessSync, constants, promises as fsp } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import { FastpullError, formatPlatform, type FastpullService } from '@fastpull/core';
import { createMountRecord, listMountRecords, mountInfo, readMountRecord, removeMountRecord, type MountRecord } from '@fastpull/core/snapshots';

export type { MountRecord } from '@fastpull/core/snapshots';

/** Fixed absolute paths: PATH is never searched for the programs that mount as root. */
const MOUNT_PATHS = ['/usr/bin/mount', '/bin/mount'];
const UMOUNT_PATHS = ['/usr/bin/umount', '/bin/umount'];

function program(paths: readonly string[]): string {
  for (const p of paths) {
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      // try the next
    }
  }
  throw new FastpullError('INTERNAL', `no executable at ${paths.join(' or ')} (util-linux mount)`);
}

function run(file: string, args: readonly string[]): Promise<void> {
  return new Promise((resolvePromise, reject) => {
    execFile(file, args, { timeout: 60_000 }, (err, _stdout, stderr) => {
      if (err) reject(new FastpullError('INTERNAL', `${file} failed: ${stderr.trim() || err.message}`, { cause: err }));
      else resolvePromise();
    });
  });
}

export function requireRoot(what: string): void {
  if (process.getuid?.() !== 0) {
    throw new FastpullError('PERMISSION_DENIED', `${what} needs root (an overlayfs mount); run it as root, or print the read-only mount with \`fastpull mounts\``);
  }
}

/** The directory a target names, symlinks resolved; INVALID_ARGUMENT when it is not a directory. */
async function targetDir(target: string): Promise<string> {
  let real: string;
  try {
    real = await fsp.realpath(resolve(target));
  } catch {
    throw new FastpullError('INVALID_ARGUMENT', `${target} does not exist; create the directory to mount on first`);
  }
  if (!(await fsp.stat(real)).isDirectory()) throw new FastpullError('INVALID_ARGUMENT', `${target} is not a directory`);
  return real;
}

/** Whether `path` is a mount point now. */
export async function isMountPoint(path: string): Promise<boolean> {
  return (await mountInfo()).some((m) => m.mountPoint === path);
}

/**
 * Mounts the image at `target` as a writable overlay: its snapshots as lowerdir (a one-layer image
 * too, which the read-only mounts give as a bind), a fresh upperdir and workdir. The snapshots are
 * never written: every change lands in the upper dir.
 */
export async function mountImage(service: FastpullService, ref: string, target: string, platform?: string): Promise<MountRecord> {
  requireRoot('mounting');
  const { image, root } = await service.inspectImage(ref, platform ? { platform } : {});
  const dir = await targetDir(target);
  if ((await listMountRecords(root)).some((m) => m.target === dir)) {
    throw new FastpullError('INVALID_ARGUMENT', `${dir} already holds a fastpull mount; unmount it first`);
  }
  const [ro] = await service.mounts({ image: image.name, platform: formatPlatform(image.platform) });
  const lower = ro!.type === 'overlay' ? ro!.options.filter((o) => o !== 'ro') : [`lowerdir=${ro!.source}`];
  const record = await createMountRecord(root, { image: image.name, manifest: image.manifest.digest, snapshots: image.layers.map((l) => l.chainID), target: dir });
  try {
    await run(program(MOUNT_PATHS), ['-t', 'overlay', 'overlay', '-o', [...lower, `upperdir=${record.upper}`, `workdir=${record.work}`].join(','), dir]);
  } catch (e) {
    await removeMountRecord(root, record.id);
    throw e;
  }
  return record;
}

/**
 * Unmounts a mount made by mountImage and removes its upper and work dirs (the changes made in it).
 * The record is found through the mount's upperdir (whatever store it belongs to), else among the
 * records of the store at `root` (a mount that is gone can still have a record to clean up).
 */
export async function unmountImage(root: string | undefined, target: string): Promise<MountRecord> {
  let dir = resolve(target);
  try {
    dir = await fsp.realpath(dir);
  } catch {
    // A target that is gone can still have a record to clean up.
  }
  const found = (await recordOfMount(dir)) ?? (root !== undefined ? await recordInStore(root, dir) : undefined);
  if (!found) throw new FastpullError('NOT_FOUND', `no fastpull mount at ${dir}${root !== undefined ? ` in the store at ${root}` : ''}`);
  requireRoot('unmounting');
  if (await isMountPoint(dir)) await run(program(UMOUNT_PATHS), [dir]);
  await removeMountRecord(found.root, found.record.id);
  return found.record;
}

/** The record of the overlay mounted at `dir`, from its upperdir `<root>/mounts/<id>/upper`. */
async function recordOfMount(dir: string): Promise<{ root: string; record: MountRecord } | undefined> {
  const m = (await mountInfo()).filter((x) => x.mountPoint === dir && x.fsType === 'overlay').pop();
  const upper = m?.superOptions.split(',').find((o) => o.startsWith('upperdir='))?.slice('upperdir='.length);
  if (!upper || basename(upper) !== 'upper') return undefined;
  const home = dirname(upper);
  const record = await readMountRecord(home);
  if (!record || record.target !== dir || basename(dirname(home)) !== 'mounts') return undefined;
  return { root: dirname(dirname(home)), record };
}

async function recordInStore(root: string, dir: string): Promise<{ root: string; record: MountRecord } | undefined> {
  const record = (await listMountRecords(root)).find((m) => m.target === dir);
  return record ? { root, record } : undefined;
}
