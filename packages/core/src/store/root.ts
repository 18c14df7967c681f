// The store root: where content, snapshots and image records live, and its default location.
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { FileContentStore, type ContentStore } from '../content/store.js';
import { FileImageStore, type ImageStore } from '../images/store.js';
import { FileSnapshotter, type Snapshotter } from '../snapshots/store.js';
import type { Tuning } from '../tuning.js';

/**
 * The store root to use when none is given: `$FASTPULL_ROOT` when set, else `/var/lib/fastpull` for
 * root (like containerd's /var/lib/containerd), else `$XDG_DATA_HOME/fastpull` (by default
 * `~/.local/share/fastpull`).
 * @param env - the environment to read; default `process.env`.
 * @example
 * const store = openStore(defaultRoot());
 */
export function defaultRoot(env: NodeJS.ProcessEnv = process.env): string {
  if (env.FASTPULL_ROOT) return resolve(env.FASTPULL_ROOT);
  if (process.getuid?.() === 0) return '/var/lib/fastpull';
  return join(env.XDG_DATA_HOME || join(homedir(), '.local', 'share'), 'fastpull');
}

/**
 * A store root opened for use: its three parts, all on disk under `root`. Several processes may
 * use one store at once (the CLI and the daemon share it).
 */
export interface Store {
  /** Absolute path of the store root. */
  readonly root: string;
  /** Blobs and downloads in progress, under `<root>/content` (see `@fastpull/core/content`). */
  readonly content: ContentStore;
  /** Unpacked layers, under `<root>/snapshots` (see `@fastpull/core/snapshots`). */
  readonly snapshots: Snapshotter;
  /** Image records, under `<root>/images`. */
  readonly images: ImageStore;
}

/** Options of {@link openStore}. */
export interface StoreOptions {
  /**
   * Flush each snapshot's files to stable storage before committing it (default true). False is
   * unsafe: after a power cut a committed snapshot may hold empty or short files that nothing
   * checks again. A crash of the process alone never needs it.
   */
  readonly sync?: boolean;
  /** Measuring knobs (tuning.ts): the store reads how snapshots are flushed. */
  readonly tuning?: Tuning;
}

/**
 * Opens the store at `root`. Nothing is read or created until a part is used; directories are
 * made on first write.
 * @example
 * const store = openStore('/var/lib/fastpull');
 * for (const image of await store.images.list()) console.log(image.name);
 */
export function openStore(root: string, options: StoreOptions = {}): Store {
  const abs = resolve(root);
  return { root: abs, content: new FileContentStore(abs), snapshots: new FileSnapshotter(abs, options), images: new FileImageStore(abs) };
}
