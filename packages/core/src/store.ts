// The store root: where content, snapshots and image records live, and its default location.
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { FileContentStore } from './content/store.js';
import { FileImageStore } from './images/store.js';
import { FileSnapshotter } from './snapshots/store.js';

/** /var/lib/fastpull for root (like containerd's /var/lib/containerd), else the user's data dir. */
export function defaultRoot(env: NodeJS.ProcessEnv = process.env): string {
  if (env.FASTPULL_ROOT) return resolve(env.FASTPULL_ROOT);
  if (process.getuid?.() === 0) return '/var/lib/fastpull';
  return join(env.XDG_DATA_HOME || join(homedir(), '.local', 'share'), 'fastpull');
}

export interface Store {
  readonly root: string;
  readonly content: FileContentStore;
  readonly snapshots: FileSnapshotter;
  readonly images: FileImageStore;
}

/** Opens (lazily creating) the store at `root`. */
export function openStore(root: string): Store {
  const abs = resolve(root);
  return { root: abs, content: new FileContentStore(abs), snapshots: new FileSnapshotter(abs), images: new FileImageStore(abs) };
}
