// Writable overlay mounts of pulled images (`fastpull mount` / `unmount`). The service (the store in
// this process, or fastpulld) records each mount with its upper and work dirs and gives the overlay as
// data; the mount(2) itself is made here, because only this process is sure to be in the mount
// namespace where TARGET is: fastpulld runs in its own (systemd's PrivateTmp and ProtectSystem give it
// one, as does a pod), and a mount made there would never show at the user's TARGET.
import { execFile } from 'node:child_process';
import { accessSync, constants, promises as fsp } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import { FastpullError, type FastpullService, type MountRecord } from '@fastpull/core';
import { mountInfo } from '@fastpull/core/snapshots';

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
    throw new FastpullError(
      'PERMISSION_DENIED',
      `${what} needs root (an overlayfs mount); run it as root, or print the read-only mount with \`fastpull mounts\``,
    );
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
  const dir = await targetDir(target);
  const { record, mount } = await service.createWritableMount({ image: ref, ...(platform ? { platform } : {}) }, dir);
  try {
    await run(program(MOUNT_PATHS), ['-t', mount.type, mount.source, '-o', mount.options.join(','), dir]);
  } catch (e) {
    await service.removeWritableMount(record.id).catch(() => undefined);
    throw e;
  }
  return record;
}

/**
 * Unmounts a mount made by mountImage and has the service remove its record with its upper and work
 * dirs (the changes made in it). The record is the service's: a mount made in another store says
 * which one to name.
 */
export async function unmountImage(service: FastpullService, target: string): Promise<MountRecord> {
  let dir = resolve(target);
  try {
    dir = await fsp.realpath(dir);
  } catch {
    // A target that is gone can still have a record to clean up.
  }
  const record = (await service.listWritableMounts()).find((m) => m.target === dir);
  if (!record) {
    const other = await storeOfMount(dir);
    const hint = other !== undefined ? `; the overlay there keeps its changes in the store at ${other}: name that store` : '';
    // A daemon's location is its address, `unix:<socket>`; a local service's, its store root.
    const where = service.location.startsWith('unix:') ? `fastpulld at ${service.location}` : `the store at ${service.location}`;
    throw new FastpullError('NOT_FOUND', `no fastpull mount at ${dir} in ${where}${hint}`);
  }
  requireRoot('unmounting');
  if (await isMountPoint(dir)) await run(program(UMOUNT_PATHS), [dir]);
  await service.removeWritableMount(record.id);
  return record;
}

/**
 * The store root an overlay at `dir` looks made by another store's `fastpull mount` (its upperdir
 * is `<root>/mounts/<id>/upper`), for the error message only: nothing is read or removed there.
 */
async function storeOfMount(dir: string): Promise<string | undefined> {
  const m = (await mountInfo()).filter((x) => x.mountPoint === dir && x.fsType === 'overlay').pop();
  const upper = m?.superOptions
    .split(',')
    .find((o) => o.startsWith('upperdir='))
    ?.slice('upperdir='.length);
  if (!upper || basename(upper) !== 'upper' || basename(dirname(dirname(upper))) !== 'mounts') return undefined;
  return dirname(dirname(dirname(upper)));
}
