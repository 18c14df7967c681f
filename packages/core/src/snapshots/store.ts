// The snapshot store: one directory per layer, an overlayfs lower dir. Words (as containerd uses them):
// an *active* snapshot is being written and is invisible to mounts; a *committed* snapshot is
// immutable and named by its chainID, its parent being the chainID of the layers below it.
//
// Importing a layer, by example: prepare() gives snapshots/active/<id>/fs; the unpacker extracts the
// layer there; once the blob digest and the diffID both match, commit(active, chainID) renames
// snapshots/active/<id> to snapshots/committed/<hex of chainID> in one atomic step. Mounts for an
// image are then data (type, source, options) built from the committed dirs; this module mounts nothing.
import { promises as fsp } from 'node:fs';
import { dirname, join } from 'node:path';
import { FastpullError, fromFsError, isFastpullError } from '../errors.js';
import { parseDigest, type Digest } from '../oci/digest.js';
import { randomId, syncDir, TEMP_PREFIX, writeFileAtomic } from '../util/fs.js';
import { closeForFlush, flushTree, openForFlush, syncMethod, type SyncMethod } from './durable.js';
import type { Tuning } from '../tuning.js';
import { claimDir, disownDir, sweepDeadDirs } from '../util/owner.js';

/** A snapshot being written: invisible to mounts until it is committed. */
export interface ActiveSnapshot {
  /** Its directory's name under `<root>/snapshots/active`. */
  readonly key: string;
  /** The directory to extract into. */
  readonly fs: string;
  /** The snapshot's own directory (holds `fs`). */
  readonly dir: string;
  /** Lets go of the directory's owner lock, and of `flushFd` (commit and remove call it). */
  readonly release: () => void;
  /** An fd of `dir`, opened before anything was written into it, for the flush before the commit. */
  readonly flushFd?: number;
}

/** What the store records about a committed snapshot. */
export interface SnapshotInfo {
  /** Its name: the chainID of the layers up to and including its own. */
  readonly chainID: Digest;
  /** Digest of its layer's uncompressed tar. */
  readonly diffID: Digest;
  /** chainID of the snapshot below it; none for a bottom layer. */
  readonly parent?: Digest;
  /** Bytes of the uncompressed layer tar. */
  readonly size: number;
  /** When it was committed (ISO 8601). */
  readonly created: string;
  /** Laid out for a rootless overlay mount (user.overlay.* xattrs; mount with `userxattr`). */
  readonly rootless?: boolean;
}

/** A mount as data, in the form `mount(8)` and containerd take. */
export interface Mount {
  /** Filesystem type: `overlay`, or `bind` for a single layer. */
  readonly type: string;
  /** The source argument of mount(2). */
  readonly source: string;
  /** Mount options, e.g. `lowerdir=...` (top layer first), `ro`, `userxattr`. */
  readonly options: readonly string[];
}

/** What pulling, collection and containerd's snapshot records need from a snapshot store. */
export interface Snapshotter {
  /** The directory it keeps its snapshots in (per-chainID locks and collection's sweeps use it). */
  readonly dir: string;
  /** Whether a commit flushes the snapshot's files to stable storage first (see StoreOptions.sync). */
  readonly sync: boolean;
  /** True when a snapshot of `chainID` is committed. */
  isCommitted(chainID: Digest): Promise<boolean>;
  /** Makes a new active snapshot to unpack into. */
  prepare(): Promise<ActiveSnapshot>;
  /** Commits an active snapshot; returns false when another writer committed the same chainID first. */
  commit(active: ActiveSnapshot, info: Omit<SnapshotInfo, 'created'>): Promise<boolean>;
  /** Drops an active snapshot. */
  remove(active: ActiveSnapshot): Promise<void>;
  /**
   * Removes active snapshots whose writer died, and discarded ones whose deletion did not finish;
   * returns the keys of the active ones. `dryRun`: names the active ones, removes nothing.
   */
  sweep(options?: { readonly dryRun?: boolean }): Promise<string[]>;
  /**
   * Takes a committed snapshot out of the store at once (no half-deleted snapshot is ever visible)
   * and returns the deletion of its files, which may run later.
   */
  discard(chainID: Digest): Promise<() => Promise<void>>;
  /** What is recorded about a committed snapshot, or undefined when there is none. */
  info(chainID: Digest): Promise<SnapshotInfo | undefined>;
  /** The directory of a committed snapshot's tree. */
  fsPath(chainID: Digest): string;
  /** Read-only mounts presenting the stack of committed snapshots (bottom first) as one tree. */
  mounts(chainIDs: readonly Digest[]): Promise<Mount[]>;
  /** Every committed snapshot. */
  list(): Promise<SnapshotInfo[]>;
  /** The chainIDs that short links name, by link path (a mount of many layers names them by these). */
  shortLinks(): Promise<Map<string, Digest>>;
  /** A short link to a committed snapshot's tree (made on first use), for mounts of many layers. */
  shortLink(chainID: Digest): Promise<string>;
}

/**
 * mount(2) takes its options in one page (4096 bytes with the NUL); this leaves room for the
 * upperdir and workdir a writable mount adds. containerd's mount code starts shortening overlay
 * options at the same length (its page less 512).
 */
export const MAX_MOUNT_OPTIONS = 3584;
/**
 * overlayfs stacks at most this many lower directories in one mount (the kernel's OVL_MAX_STACK;
 * past it mount(2) fails "too many lower directories"). containerd and runc mount through the same
 * overlayfs and set no limit of their own, so an image of more layers can be mounted by nobody.
 */
export const MAX_OVERLAY_LAYERS = 500;
const LINKS_DIR = 'l';
const SHORT_LINK_HEX = 12;

/** TOO_MANY_LAYERS for `what`, `layers` deep: no overlay mount can stack it. */
export function tooManyLayers(what: string, layers: number): FastpullError {
  return new FastpullError(
    'TOO_MANY_LAYERS',
    `${what} has ${layers} layers; overlayfs stacks at most ${MAX_OVERLAY_LAYERS} in one mount (for containerd and runc as for fastpull), so no runtime could mount it: rebuild it with fewer layers (squash some)`,
    { details: { layers, limit: MAX_OVERLAY_LAYERS } },
  );
}

/** True for the failure of {@link Snapshotter.mounts} for a stack whose options do not fit one mount(2) even through short links. */
export function isMountTooLong(e: unknown): boolean {
  return isFastpullError(e) && e.code === 'INVALID_ARGUMENT' && e.details.limit === MAX_MOUNT_OPTIONS && typeof e.details.length === 'number';
}

/**
 * The on-disk snapshot store under `<root>/snapshots`, reached as `openStore(root).snapshots`.
 * Committed snapshots are `committed/<hex of chainID>/fs`. `mounts` throws INVALID_ARGUMENT for an
 * empty stack, a stack that mixes rootless and rootful layouts or options too long even through
 * short links, and NOT_FOUND for a snapshot that is not committed; writes throw NO_SPACE or INTERNAL.
 * @example
 * const snapshots = openStore(root).snapshots;
 * const active = await snapshots.prepare();
 * // ... extract the layer into active.fs ...
 * await snapshots.commit(active, { chainID, diffID, size });
 * const [mount] = await snapshots.mounts([chainID]); // { type: 'bind', source: '.../fs', options: ['ro', 'rbind'] }
 */
export class FileSnapshotter implements Snapshotter {
  /** `<root>/snapshots`. */
  readonly dir: string;
  /** Flush a snapshot's files to stable storage before committing it (see StoreOptions.sync). */
  readonly sync: boolean;

  /** How a snapshot is flushed (see syncMethod in durable.ts). */
  private readonly method: SyncMethod;

  constructor(root: string, options: { readonly sync?: boolean; readonly tuning?: Pick<Tuning, 'syncMethod'> } = {}) {
    this.dir = join(root, 'snapshots');
    this.sync = options.sync !== false;
    this.method = syncMethod(options.tuning?.syncMethod);
  }

  private committedDir(chainID: Digest): string {
    const { algorithm, hex } = parseDigest(chainID);
    return join(this.dir, 'committed', algorithm === 'sha256' ? hex : `${algorithm}-${hex}`);
  }

  fsPath(chainID: Digest): string {
    return join(this.committedDir(chainID), 'fs');
  }

  async isCommitted(chainID: Digest): Promise<boolean> {
    return (await this.info(chainID)) !== undefined;
  }

  async info(chainID: Digest): Promise<SnapshotInfo | undefined> {
    try {
      const raw = await fsp.readFile(join(this.committedDir(chainID), 'info.json'), 'utf8');
      const info = JSON.parse(raw) as SnapshotInfo;
      return info.chainID === chainID ? info : undefined;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw fromFsError(e, `reading snapshot ${chainID}`);
    }
  }

  async prepare(): Promise<ActiveSnapshot> {
    const key = randomId();
    const dir = join(this.dir, 'active', key);
    const fs = join(dir, 'fs');
    try {
      await fsp.mkdir(dir, { recursive: true });
      const release = claimDir(dir);
      await fsp.mkdir(fs, { mode: 0o755 });
      // The root of a layer dir is the container's root: 0755 whatever the umask says.
      await fsp.chmod(fs, 0o755);
      if (!this.sync) return { key, fs, dir, release };
      // The flush before the commit goes through it, so it reports every write-back error since.
      const flushFd = openForFlush(dir, this.method);
      let open = true;
      const releaseAll = (): void => {
        if (open) closeForFlush(flushFd);
        open = false;
        release();
      };
      return { key, fs, dir, release: releaseAll, ...(flushFd !== undefined ? { flushFd } : {}) };
    } catch (e) {
      throw fromFsError(e, 'preparing a snapshot');
    }
  }

  async commit(active: ActiveSnapshot, info: Omit<SnapshotInfo, 'created'>): Promise<boolean> {
    const target = this.committedDir(info.chainID);
    try {
      // info.json is written before the rename, so a committed dir always has one.
      await writeFileAtomic(join(active.dir, 'info.json'), JSON.stringify({ ...info, created: new Date().toISOString() }));
      // Committed means durable: after a power cut no committed snapshot may hold short files.
      if (this.sync) await flushTree(active.dir, this.method, active.flushFd);
      await fsp.mkdir(join(this.dir, 'committed'), { recursive: true });
      // Disowned only now: a directory without an owner is litter to a sweeper after a minute, and
      // a flush may take longer. Its removal is made durable too, or a power cut could leave it.
      await disownDir(active.dir);
      if (this.sync) await syncDir(active.dir);
      try {
        await fsp.rename(active.dir, target);
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        if (code === 'ENOTEMPTY' || code === 'EEXIST') {
          await this.remove(active);
          return false;
        }
        throw e;
      }
      await syncDir(join(this.dir, 'committed'));
      active.release();
      return true;
    } catch (e) {
      await this.remove(active);
      throw fromFsError(e, `committing snapshot ${info.chainID}`);
    }
  }

  async remove(active: ActiveSnapshot): Promise<void> {
    await fsp.rm(active.dir, { recursive: true, force: true });
    active.release();
  }

  /**
   * Takes a committed snapshot out of the store in one atomic step (a rename out of `committed/`,
   * so no half-deleted snapshot is ever visible) and returns the deletion of its files, which may
   * take long and can run later; a crash before it leaves litter that sweep() removes.
   */
  async discard(chainID: Digest): Promise<() => Promise<void>> {
    const trash = join(this.dir, 'trash');
    const target = join(trash, randomId());
    try {
      await fsp.mkdir(trash, { recursive: true });
      await fsp.rename(this.committedDir(chainID), target);
      await syncDir(join(this.dir, 'committed'));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return async () => undefined;
      throw fromFsError(e, `removing snapshot ${chainID}`);
    }
    return () => fsp.rm(target, { recursive: true, force: true });
  }

  /**
   * Removes active snapshots left by processes that died (kill -9, power loss) and discarded
   * snapshots whose deletion did not finish; returns the keys of the active ones. `dryRun`: names
   * the active ones and removes nothing.
   */
  async sweep(options: { readonly dryRun?: boolean } = {}): Promise<string[]> {
    if (options.dryRun === true) return sweepDeadDirs(join(this.dir, 'active'), 0, { dryRun: true });
    const trash = join(this.dir, 'trash');
    for (const name of await fsp.readdir(trash).catch(() => [] as string[])) {
      // A collection may be deleting it at the same time: whoever is second finds less to do.
      await fsp.rm(join(trash, name), { recursive: true, force: true, maxRetries: 2 }).catch(() => undefined);
    }
    return sweepDeadDirs(join(this.dir, 'active'));
  }

  async mounts(chainIDs: readonly Digest[]): Promise<Mount[]> {
    if (chainIDs.length === 0) throw new FastpullError('INVALID_ARGUMENT', 'mounts of an empty snapshot stack');
    if (chainIDs.length > MAX_OVERLAY_LAYERS) throw tooManyLayers(`an overlay of ${chainIDs.length} snapshots`, chainIDs.length);
    let rootless = 0;
    for (const id of chainIDs) {
      const info = await this.info(id);
      if (!info) throw new FastpullError('NOT_FOUND', `snapshot ${id} is not committed`);
      if (info.rootless === true) rootless++;
    }
    if (rootless !== 0 && rootless !== chainIDs.length) {
      // One overlay mount reads either trusted.overlay.* or (userxattr) user.overlay.*.
      throw new FastpullError(
        'INVALID_ARGUMENT',
        `the stack mixes ${rootless} snapshots laid out for rootless mounts with ${chainIDs.length - rootless} for rootful ones: no one overlay mount reads both`,
      );
    }
    const dirs = chainIDs.map((id) => this.fsPath(id)).reverse();
    // One layer needs no overlay: a read-only bind mount, as containerd does.
    if (dirs.length === 1) return [{ type: 'bind', source: dirs[0]!, options: ['ro', 'rbind'] }];
    // Rootless snapshots mark opaque directories with user.overlay.*, which overlayfs reads with userxattr.
    const flags = rootless > 0 ? ['userxattr'] : [];
    let lower = `lowerdir=${dirs.join(':')}`;
    if ([...flags, lower].join(',').length > MAX_MOUNT_OPTIONS) {
      // mount(2) takes its options in one page: past a few dozen layers the full paths do not fit,
      // so name each snapshot by a short link (as Docker's overlay2 driver does with its l/ dir).
      const links: string[] = [];
      for (const id of [...chainIDs].reverse()) links.push(await this.shortLink(id));
      lower = `lowerdir=${links.join(':')}`;
      const length = [...flags, lower].join(',').length;
      if (length > MAX_MOUNT_OPTIONS) throw this.mountTooLong(chainIDs.length, length, links, flags);
    }
    return [{ type: 'overlay', source: 'overlay', options: [...flags, lower] }];
  }

  /**
   * Why a stack's options do not fit even through short links, and what would: the links hold the
   * store root once per layer, so a shorter root helps only up to what `/` itself allows.
   */
  private mountTooLong(layers: number, length: number, links: readonly string[], flags: readonly string[]): FastpullError {
    const root = dirname(this.dir);
    // Each link is the root and a fixed tail; each takes its length plus a ':' (one fewer in all).
    const tail = Math.max(...links.map((l) => l.length)) - (root === '/' ? 0 : root.length);
    const budget = MAX_MOUNT_OPTIONS - [...flags, 'lowerdir='].join(',').length + 1;
    const fitting = (rootLength: number): number => Math.floor(budget / (rootLength + tail + 1));
    const rootFits = Math.floor(budget / layers) - tail - 1;
    const hint =
      rootFits >= 1
        ? `a store root of at most ${rootFits} bytes would fit them (${root} fits ${fitting(root.length)} layers)`
        : `no store root fits them: each layer takes its short link, ${tail + 1} bytes and more, so ${fitting(0)} layers fit even under /; containerd, through fastpulld's snapshotter, shortens the paths itself and mounts up to about 300 (docs/containerd.md, "Images of many layers")`;
    return new FastpullError(
      'INVALID_ARGUMENT',
      `an overlay of ${layers} layers needs ${length} bytes of mount options, over the ${MAX_MOUNT_OPTIONS} mount(2) takes; ${hint}`,
      {
        details: { layers, length, limit: MAX_MOUNT_OPTIONS },
      },
    );
  }

  /**
   * `<snapshots>/l/<first 12+ hex of chainID>`, a symlink to the committed snapshot's tree, made
   * on first use (atomically: a temporary link renamed into place). A prefix another snapshot holds
   * already is lengthened.
   */
  async shortLink(chainID: Digest): Promise<string> {
    const target = this.fsPath(chainID);
    const dir = join(this.dir, LINKS_DIR);
    const { hex } = parseDigest(chainID);
    try {
      await fsp.mkdir(dir, { recursive: true });
      for (let n = SHORT_LINK_HEX; n <= hex.length; n += 4) {
        const link = join(dir, hex.slice(0, n));
        const existing = await fsp.readlink(link).catch((e: NodeJS.ErrnoException) => {
          if (e.code === 'ENOENT') return undefined;
          throw e;
        });
        if (existing === target) return link;
        if (existing !== undefined && (await fsp.stat(link).catch(() => undefined)) !== undefined) continue; // another live snapshot's
        const tmp = join(dir, `${TEMP_PREFIX}${randomId()}`);
        await fsp.symlink(target, tmp);
        await fsp.rename(tmp, link); // replaces a dangling link left by a removed snapshot
        return link;
      }
    } catch (e) {
      throw fromFsError(e, `linking snapshot ${chainID}`);
    }
    throw new FastpullError('INTERNAL', `no short name left for snapshot ${chainID}`);
  }

  /** The chainIDs that short links name (for collection: a mount may name its layers by these links). */
  async shortLinks(): Promise<Map<string, Digest>> {
    const dir = join(this.dir, LINKS_DIR);
    const out = new Map<string, Digest>();
    for (const name of await fsp.readdir(dir).catch(() => [] as string[])) {
      const target = await fsp.readlink(join(dir, name)).catch(() => undefined);
      const m = target === undefined ? null : /([0-9a-f]{64})\/fs$/.exec(target);
      if (m) out.set(join(dir, name), `sha256:${m[1]}` as Digest);
    }
    return out;
  }

  async list(): Promise<SnapshotInfo[]> {
    let names: string[];
    try {
      names = await fsp.readdir(join(this.dir, 'committed'));
    } catch {
      return [];
    }
    const out: SnapshotInfo[] = [];
    for (const name of names) {
      try {
        out.push(JSON.parse(await fsp.readFile(join(this.dir, 'committed', name, 'info.json'), 'utf8')) as SnapshotInfo);
      } catch {
        // A dir without info.json was never committed through this store; ignore it.
      }
    }
    return out;
  }
}
