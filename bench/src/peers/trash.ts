// Keeps the peers benchmark's large deletes away from its measured runs. ext4 without a journal (the
// VM the bench's figures come from has none), when it allocates an inode, skips every inode freed in
// the last minute (several minutes while their inode table block is not yet written back), scanning
// past each one, so a run that creates files right after a tree of 20,000 was removed pays many
// times the usual system CPU, and parallel creators contend on the lock around that scan. Each
// run's tree goes to a trash list instead; the trash is emptied only when the next work would not
// fit on the filesystem, and a measured run waits a cool-down after any removal.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, statfsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ImageMeta } from './images.js';
import { sleep } from './measure.js';

const GIB = 1024 ** 3;

/** What the filesystem has left, from statfs. `totalInodes` 0: it has no fixed inode count (btrfs). */
export interface FsSpace {
  readonly freeBytes: number;
  readonly totalBytes: number;
  readonly freeInodes: number;
  readonly totalInodes: number;
}

/** What the next work will write: bytes and files. */
export interface Need {
  readonly bytes: number;
  readonly inodes: number;
}

export interface Decision {
  /** Remove everything in the trash now. */
  readonly empty: boolean;
  /** Seconds to wait before the measured run (after the removal, when there is one). */
  readonly waitS: number;
  readonly why: string;
}

/** What must stay free besides the work: 1 GiB or 5% of the filesystem, and 5% of its inodes. */
export function margins(fs: FsSpace): Need {
  return { bytes: Math.max(GIB, 0.05 * fs.totalBytes), inodes: 0.05 * fs.totalInodes };
}

/**
 * Whether to empty the trash before work that needs `need`, and how long to wait then.
 * `sinceRemovalS`: seconds since the last removal ended (undefined: none yet).
 */
export function decide(fs: FsSpace, need: Need, trashed: number, sinceRemovalS: number | undefined, cooldownS: number): Decision {
  const m = margins(fs);
  const shortBytes = fs.freeBytes - need.bytes < m.bytes;
  const shortInodes = fs.totalInodes > 0 && fs.freeInodes - need.inodes < m.inodes;
  const left = sinceRemovalS === undefined ? 0 : Math.max(0, cooldownS - sinceRemovalS);
  if (!shortBytes && !shortInodes) return { empty: false, waitS: left, why: 'fits' };
  const short = [
    shortBytes ? `${gib(fs.freeBytes)} GiB free, ${gib(need.bytes)} GiB needed, ${gib(m.bytes)} GiB kept free` : '',
    shortInodes ? `${fs.freeInodes} inodes free, ${need.inodes} needed, ${Math.round(m.inodes)} kept free` : '',
  ]
    .filter(Boolean)
    .join('; ');
  if (trashed === 0) return { empty: false, waitS: left, why: `${short}; trash empty, nothing to remove` };
  return { empty: true, waitS: cooldownS, why: short };
}

const gib = (b: number) => (b / GIB).toFixed(1);

export function fsSpace(path: string): FsSpace {
  const s = statfsSync(path);
  return { freeBytes: s.bavail * s.bsize, totalBytes: s.blocks * s.bsize, freeInodes: s.ffree, totalInodes: s.files };
}

const uncompressed = (image: ImageMeta) => image.layers.reduce((a, l) => a + l.tarSize, 0);
const compressed = (image: ImageMeta) => image.layers.reduce((a, l) => a + l.size, 0);
const files = (image: ImageMeta) => image.layers.reduce((a, l) => a + l.files, 0);

/**
 * One pull's store: the unpacked trees, the blobs where a puller keeps them, and room for a
 * puller that writes more (containerd kept 1.55x the uncompressed size on the ML image).
 */
export function pullNeed(image: ImageMeta): Need {
  return { bytes: 2 * uncompressed(image) + compressed(image), inodes: 2 * files(image) + 64 * image.layers.length + 256 };
}

/** The limit's work: the blobs, the tars, their extraction and dd's file of as many bytes. */
export function limitNeed(image: ImageMeta): Need {
  return { bytes: 3 * uncompressed(image) + compressed(image), inodes: files(image) + 4 * image.layers.length + 64 };
}

export function plus(...needs: Need[]): Need {
  return { bytes: needs.reduce((a, n) => a + n.bytes, 0), inodes: needs.reduce((a, n) => a + n.inodes, 0) };
}

export function times(n: number, need: Need): Need {
  return { bytes: n * need.bytes, inodes: n * need.inodes };
}

/** The trash: directories the benchmark is done with, removed only when `decide` says so, or at the end. */
export class Trash {
  private readonly paths: string[] = [];
  private removedAt: number | undefined;

  /** `base`: where the directories are made (its filesystem is the one watched, through `space`). */
  constructor(
    private readonly cooldownS: number,
    private readonly log: (s: string) => void,
    readonly base: string = tmpdir(),
    private readonly space: (path: string) => FsSpace = fsSpace,
  ) {}

  /** A fresh directory under `base`, already in the trash (so an interrupted run's tree goes too). */
  dir(prefix: string): string {
    const d = mkdtempSync(join(this.base, prefix));
    this.paths.push(d);
    return d;
  }

  add(path: string): void {
    this.paths.push(path);
  }

  get size(): number {
    return this.paths.length;
  }

  /** Before measured work that will write `need`: empties the trash if it must, then waits out the cool-down. */
  async before(need: Need, what: string): Promise<void> {
    const since = this.removedAt === undefined ? undefined : (performance.now() - this.removedAt) / 1000;
    const d = decide(this.space(this.base), need, this.paths.length, since, this.cooldownS);
    if (d.empty) {
      this.log(`  trash: removing ${this.paths.length} tree(s) before ${what} (${d.why})`);
      this.empty();
    } else if (d.why !== 'fits') {
      this.log(`  trash: ${d.why} (before ${what})`);
    }
    if (d.waitS > 0) {
      this.log(`  trash: cool-down, ${d.waitS.toFixed(d.waitS < 10 ? 1 : 0)} s before ${what} (BENCH_DELETE_COOLDOWN_S=${this.cooldownS})`);
      await sleep(d.waitS * 1000);
    }
  }

  /**
   * Removes everything in the trash now, then syncs (so the freed inodes' table blocks are written
   * back and ext4 forgets them sooner). Lazily unmounts what a killed pull may have left mounted in
   * them first. Never throws: says what it could not remove.
   */
  empty(): void {
    if (this.paths.length === 0) return;
    for (const p of this.paths.splice(0)) {
      spawnSync('sh', ['-c', 'grep -o " $0[^ ]*" /proc/mounts | xargs -r -n1 umount -l', p], { stdio: 'ignore' });
      try {
        rmSync(p, { recursive: true, force: true });
      } catch (e) {
        this.log(`  trash: could not remove ${p}: ${e instanceof Error ? e.message : String(e)}`);
      }
    }
    spawnSync('sync');
    this.removedAt = performance.now();
  }
}
