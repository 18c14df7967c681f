// Writable overlay mounts of pulled images (`fastpull mount` / `unmount`): each gets a fresh upper and
// work dir under <root>/mounts/<id>/, recorded in mount.json beside them so unmount (and a future gc)
// knows what is mounted where and which snapshots it uses.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { accessSync, constants, promises as fsp } from 'node:fs';
import { join, resolve } from 'node:path';
import { FastpullError, resolveImage, type Store } from '@fastpull/core';
import { mountInfo } from '@fastpull/core/snapshots';

export interface MountRecord {
  readonly id: string;
  /** The image name and manifest digest that was mounted. */
  readonly image: string;
  readonly manifest: string;
  /** chainIDs of the snapshots in the lowerdir stack, bottom first. */
  readonly snapshots: readonly string[];
  /** Absolute, symlinks resolved. */
  readonly target: string;
  readonly upper: string;
  readonly work: string;
  readonly created: string;
}

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

function mountsDir(store: Store): string {
  return join(store.root, 'mounts');
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

export async function listMounts(store: Store): Promise<MountRecord[]> {
  let ids: string[];
  try {
    ids = await fsp.readdir(mountsDir(store));
  } catch {
    return [];
  }
  const out: MountRecord[] = [];
  for (const id of ids) {
    try {
      out.push(JSON.parse(await fsp.readFile(join(mountsDir(store), id, 'mount.json'), 'utf8')) as MountRecord);
    } catch {
      // A mount dir without its record was never finished; nothing refers to it.
    }
  }
  return out;
}

/** Whether `path` is a mount point now. */
export async function isMountPoint(path: string): Promise<boolean> {
  return (await mountInfo()).some((m) => m.mountPoint === path);
}

/**
 * Mounts the image at `target` as a writable overlay: its snapshots as lowerdir (a one-layer image
 * too, which mountsFor would give as a read-only bind), a fresh upperdir and workdir. The snapshots
 * are never written: every change lands in the upper dir.
 */
export async function mountImage(store: Store, ref: string, target: string): Promise<MountRecord> {
  requireRoot('mounting');
  const image = await resolveImage(store, ref);
  const dir = await targetDir(target);
  if ((await listMounts(store)).some((m) => m.target === dir)) {
    throw new FastpullError('INVALID_ARGUMENT', `${dir} already holds a fastpull mount; unmount it first`);
  }
  const chainIDs = image.layers.map((l) => l.chainID);
  const [ro] = await store.snapshots.mounts(chainIDs);
  const lower = ro!.type === 'overlay' ? ro!.options : [`lowerdir=${ro!.source}`];
  const id = randomBytes(8).toString('hex');
  const home = join(mountsDir(store), id);
  const record: MountRecord = {
    id,
    image: image.name,
    manifest: image.manifest.digest,
    snapshots: chainIDs,
    target: dir,
    upper: join(home, 'upper'),
    work: join(home, 'work'),
    created: new Date().toISOString(),
  };
  await fsp.mkdir(record.upper, { recursive: true });
  await fsp.mkdir(record.work, { recursive: true });
  // The record is written before mounting, so a crash in between leaves something unmount can clean.
  await fsp.writeFile(join(home, 'mount.json'), `${JSON.stringify(record, null, 2)}\n`);
  try {
    await run(program(MOUNT_PATHS), ['-t', 'overlay', 'overlay', '-o', [...lower, `upperdir=${record.upper}`, `workdir=${record.work}`].join(','), dir]);
  } catch (e) {
    await fsp.rm(home, { recursive: true, force: true });
    throw e;
  }
  return record;
}

/** Unmounts a mount made by mountImage and removes its upper and work dirs (the changes made in it). */
export async function unmountImage(store: Store, target: string): Promise<MountRecord> {
  let dir = resolve(target);
  try {
    dir = await fsp.realpath(dir);
  } catch {
    // A target that is gone can still have a record to clean up.
  }
  const record = (await listMounts(store)).find((m) => m.target === dir);
  if (!record) throw new FastpullError('NOT_FOUND', `no fastpull mount at ${dir} in the store at ${store.root}`);
  requireRoot('unmounting');
  if (await isMountPoint(dir)) await run(program(UMOUNT_PATHS), [dir]);
  await fsp.rm(join(mountsDir(store), record.id), { recursive: true, force: true });
  return record;
}
