// Checks a store on disk the way a crash must leave it: every committed blob re-hashed, every
// committed snapshot whole (info.json, fs, and its tree when the test knows it), every image record
// pointing at content that is there and agrees with it, and nothing half-done visible. What a dead
// process left where nothing looks (ingests, active snapshots, trash, leases, temp files) is
// counted as litter, not as a fault.
import { createHash } from 'node:crypto';
import { existsSync, lstatSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { chainIDs, formatPlatform, openStore, type Digest, type ImageRecord } from '@fastpull/core';
import { applyLayer, diffTrees, readTree, type BuiltImage, type ExpectedTree, type TreeEntry } from '@fastpull/core/testing';

/** What {@link verifyStore} found. */
export interface StoreReport {
  /** One line per violation; empty when the store is sound. */
  readonly problems: string[];
  /** Committed blobs re-hashed. */
  readonly blobs: number;
  /** Committed snapshots checked (trees compared for those the caller knows). */
  readonly snapshots: number;
  /** chainIDs of the snapshots whose trees were compared entry by entry. */
  readonly treesCompared: Digest[];
  /** Image records checked. */
  readonly images: number;
  /** Invisible leftovers of dead processes, by kind. */
  readonly litter: { ingests: number; active: number; trash: number; leases: number; tmp: number };
  /**
   * Per blob digest: bytes its ingest has recorded as on disk (its `ranges` file); with several
   * ingests of one blob, the least of them (a resuming pull may take over any).
   */
  readonly ingested: Map<Digest, number>;
}

/** Options of {@link verifyStore}. */
export interface VerifyOptions {
  /** The tree each committed snapshot's fs must hold, by chainID; others are checked for shape only. */
  readonly snapshotTrees?: ReadonlyMap<Digest, ReadonlyMap<string, TreeEntry>>;
}

const HEX64 = /^[0-9a-f]{64}$/;

function ls(dir: string): string[] {
  return existsSync(dir) ? readdirSync(dir) : [];
}

/** The tree a layer's own snapshot directory must hold: its tar entries on an empty tree (valid for layers without whiteouts). */
export function layerTree(layer: BuiltImage['layers'][number]): ExpectedTree {
  const tree: ExpectedTree = new Map();
  applyLayer(tree, layer);
  return tree;
}

/** Expected trees of every snapshot of `images`, by chainID (their layers must have no whiteouts or opaque dirs). */
export function snapshotTreesOf(...images: BuiltImage[]): Map<Digest, ExpectedTree> {
  const out = new Map<Digest, ExpectedTree>();
  for (const image of images) {
    const ids = chainIDs(image.layers.map((l) => l.diffID));
    image.layers.forEach((l, i) => {
      if (l.tarEntries.some((e) => e.type === 'whiteout' || e.type === 'opaque'))
        throw new Error('snapshotTreesOf: layers with whiteouts need the lower layers to predict their snapshot');
      out.set(ids[i]!, layerTree(l));
    });
  }
  return out;
}

/** Bytes an ingest's `ranges` record lists (0 when it has none or it is unreadable). */
function recordedBytes(dir: string): number {
  try {
    const ranges = JSON.parse(readFileSync(join(dir, 'ranges'), 'utf8')) as [number, number][];
    return ranges.reduce((n, [a, b]) => n + (b - a), 0);
  } catch {
    return 0;
  }
}

/**
 * Verifies the store at `root` from the disk and through the library (`openStore`), and returns
 * what it found; the caller asserts `problems` is empty.
 */
export async function verifyStore(root: string, options: VerifyOptions = {}): Promise<StoreReport> {
  const problems: string[] = [];
  const litter = { ingests: 0, active: 0, trash: 0, leases: 0, tmp: 0 };
  const ingested = new Map<Digest, number>();

  // Committed blobs: each name a digest, each file hashing to it.
  const blobDigests = new Set<Digest>();
  const blobsDir = join(root, 'content', 'blobs');
  for (const alg of ls(blobsDir)) {
    if (alg !== 'sha256') {
      problems.push(`content/blobs/${alg}: unexpected algorithm directory`);
      continue;
    }
    for (const name of ls(join(blobsDir, alg))) {
      const path = join(blobsDir, alg, name);
      if (name.startsWith('.tmp-')) {
        litter.tmp++; // writeFileAtomic's temp file: not a blob, never listed
        continue;
      }
      if (!HEX64.test(name)) {
        problems.push(`content/blobs/sha256/${name}: not a digest`);
        continue;
      }
      if (!lstatSync(path).isFile()) {
        problems.push(`content/blobs/sha256/${name}: not a regular file`);
        continue;
      }
      const got = createHash('sha256').update(readFileSync(path)).digest('hex');
      if (got !== name) problems.push(`content/blobs/sha256/${name}: content hashes to ${got}`);
      blobDigests.add(`sha256:${name}`);
    }
  }

  // Ingests: invisible; their recorded bytes say what a resumed pull may skip.
  for (const id of ls(join(root, 'content', 'ingest'))) {
    litter.ingests++;
    const dir = join(root, 'content', 'ingest', id);
    try {
      const ref = JSON.parse(readFileSync(join(dir, 'ref'), 'utf8')) as { digest: Digest };
      ingested.set(ref.digest, Math.min(ingested.get(ref.digest) ?? Infinity, recordedBytes(dir)));
    } catch {
      // Killed before its ref was written: nothing in it can be resumed.
    }
  }

  // Committed snapshots: exactly fs/ and info.json, named by the chainID info.json holds.
  const snapsDir = join(root, 'snapshots');
  const committed = new Set<Digest>();
  const treesCompared: Digest[] = [];
  for (const name of ls(join(snapsDir, 'committed'))) {
    const dir = join(snapsDir, 'committed', name);
    if (!HEX64.test(name)) {
      problems.push(`snapshots/committed/${name}: not a chainID`);
      continue;
    }
    const entries = ls(dir).sort();
    if (entries.join(',') !== 'fs,info.json') {
      problems.push(`snapshots/committed/${name}: holds [${entries.join(', ')}], want [fs, info.json]`);
      continue;
    }
    let info: { chainID?: unknown; diffID?: unknown; size?: unknown };
    try {
      info = JSON.parse(readFileSync(join(dir, 'info.json'), 'utf8')) as typeof info;
    } catch (e) {
      problems.push(`snapshots/committed/${name}/info.json: unreadable (${(e as Error).message})`);
      continue;
    }
    const chainID = `sha256:${name}` as Digest;
    if (info.chainID !== chainID) problems.push(`snapshots/committed/${name}/info.json: chainID ${String(info.chainID)}`);
    if (typeof info.diffID !== 'string' || !/^sha256:[0-9a-f]{64}$/.test(info.diffID))
      problems.push(`snapshots/committed/${name}/info.json: diffID ${String(info.diffID)}`);
    if (!Number.isSafeInteger(info.size)) problems.push(`snapshots/committed/${name}/info.json: size ${String(info.size)}`);
    if (!lstatSync(join(dir, 'fs')).isDirectory()) problems.push(`snapshots/committed/${name}/fs: not a directory`);
    committed.add(chainID);
    const want = options.snapshotTrees?.get(chainID);
    if (want !== undefined) {
      treesCompared.push(chainID);
      for (const d of diffTrees(want, await readTree(join(dir, 'fs')))) problems.push(`snapshot ${name.slice(0, 12)}: ${d}`);
    }
  }
  litter.active = ls(join(snapsDir, 'active')).length;
  litter.trash = ls(join(snapsDir, 'trash')).length;
  litter.leases = ls(join(root, 'leases')).length;

  // Image records: whole JSON, each naming content and snapshots that are there and agree.
  const records: ImageRecord[] = [];
  for (const name of ls(join(root, 'images'))) {
    if (name.startsWith('.tmp-')) {
      litter.tmp++;
      continue;
    }
    try {
      const rec = JSON.parse(readFileSync(join(root, 'images', name), 'utf8')) as ImageRecord;
      // Named by the SHA-256 of "name platform".
      if (
        `${createHash('sha256')
          .update(`${rec.name} ${formatPlatform(rec.platform)}`)
          .digest('hex')}.json` !== name
      )
        problems.push(`images/${name}: holds the record of ${rec.name}`);
      records.push(rec);
    } catch (e) {
      problems.push(`images/${name}: unreadable (${(e as Error).message})`);
    }
  }
  for (const rec of records) {
    const what = `image ${rec.name}`;
    for (const d of [rec.target.digest, rec.manifest.digest, rec.config.digest]) {
      if (!blobDigests.has(d)) problems.push(`${what}: blob ${d} is not in the store`);
    }
    try {
      const manifest = JSON.parse(readFileSync(join(blobsDir, 'sha256', rec.manifest.digest.slice(7)), 'utf8')) as {
        config: { digest: string };
        layers: { digest: string }[];
      };
      const config = JSON.parse(readFileSync(join(blobsDir, 'sha256', rec.config.digest.slice(7)), 'utf8')) as { rootfs: { diff_ids: string[] } };
      if (manifest.config.digest !== rec.config.digest) problems.push(`${what}: manifest names config ${manifest.config.digest}`);
      if (manifest.layers.map((l) => l.digest).join() !== rec.layers.map((l) => l.digest).join())
        problems.push(`${what}: manifest layers differ from the record`);
      if (config.rootfs.diff_ids.join() !== rec.layers.map((l) => l.diffID).join()) problems.push(`${what}: config diffIDs differ from the record`);
      if (chainIDs(config.rootfs.diff_ids).join() !== rec.layers.map((l) => l.chainID).join()) problems.push(`${what}: chainIDs differ from the config`);
    } catch (e) {
      problems.push(`${what}: manifest or config unreadable (${(e as Error).message})`);
    }
    for (const l of rec.layers) {
      if (!committed.has(l.chainID)) problems.push(`${what}: snapshot ${l.chainID} is not committed`);
      if (rec.keepBlobs === true && !blobDigests.has(l.digest)) problems.push(`${what}: kept layer blob ${l.digest} is not in the store`);
    }
    if (rec.chainID !== rec.layers.at(-1)?.chainID) problems.push(`${what}: chainID is not its top layer's`);
  }

  // The library's view is the disk's: it opens the store and lists the same things.
  const store = openStore(root);
  const [libImages, libSnaps, libBlobs] = await Promise.all([store.images.list(), store.snapshots.list(), store.content.list()]);
  if (libImages.length !== records.length) problems.push(`library lists ${libImages.length} images, the disk holds ${records.length}`);
  const libChains = libSnaps.map((s) => s.chainID).sort();
  if (libChains.join() !== [...committed].sort().join())
    problems.push(`library lists snapshots [${libChains.join(', ')}], the disk [${[...committed].join(', ')}]`);
  if (
    libBlobs
      .map((b) => b.digest)
      .sort()
      .join() !== [...blobDigests].sort().join()
  )
    problems.push('library lists other blobs than the disk holds');
  for (const img of libImages) {
    for (const l of img.layers) {
      if (!(await store.snapshots.isCommitted(l.chainID))) problems.push(`library: image ${img.name}: snapshot ${l.chainID} not committed`);
    }
  }

  return { problems, blobs: blobDigests.size, snapshots: committed.size, treesCompared, images: records.length, litter, ingested };
}

/**
 * What the next pull of `image` may fetch at most, per layer blob, given the store as the kill left
 * it: nothing for a layer whose snapshot (or blob) is committed; for one with ingests, what the
 * ingest it will resume has not recorded (the least recorded of them, as any may be taken over);
 * else the whole blob. No slack: a resumed download asks for exactly the gaps of its ranges record
 * (fetch.ts missingRanges), and the record never lists a byte that is not in the file. `report`
 * (verifyStore's) saves reading the ingests' records again.
 */
export async function resumeBound(root: string, image: BuiltImage, report?: StoreReport, why?: Map<Digest, string>): Promise<Map<Digest, number>> {
  const store = openStore(root);
  const ingested = report?.ingested ?? recordedIngests(root);
  const out = new Map<Digest, number>();
  const chains = chainIDs(image.layers.map((l) => l.diffID));
  for (const [i, l] of image.layers.entries()) {
    if (await store.snapshots.isCommitted(chains[i]!)) {
      out.set(l.digest, 0);
      why?.set(l.digest, `snapshot ${chains[i]} committed`);
    } else if ((await store.content.info(l.digest))?.size === l.size) {
      out.set(l.digest, 0);
      why?.set(l.digest, 'blob committed in content');
    } else {
      out.set(l.digest, l.size - (ingested.get(l.digest) ?? 0));
      why?.set(l.digest, ingested.has(l.digest) ? `ingests [${ingestsOf(root, l.digest).join('; ')}]` : 'nothing of it in the store');
    }
  }
  return out;
}

/** The ingests of `digest` as the disk holds them: id, files, size of data, ranges recorded. */
function ingestsOf(root: string, digest: Digest): string[] {
  const out: string[] = [];
  for (const id of ls(join(root, 'content', 'ingest'))) {
    const dir = join(root, 'content', 'ingest', id);
    try {
      const ref = JSON.parse(readFileSync(join(dir, 'ref'), 'utf8')) as { digest: Digest };
      if (ref.digest !== digest) continue;
      const files = ls(dir).sort().join(',');
      let size = '?';
      try {
        size = String(statSync(join(dir, 'data')).size);
      } catch {
        size = 'none';
      }
      let ranges = 'none';
      try {
        ranges = readFileSync(join(dir, 'ranges'), 'utf8');
      } catch {
        // no record
      }
      out.push(`${id}: files ${files}, data ${size} bytes, ranges ${ranges}`);
    } catch {
      // no readable ref: not resumable
    }
  }
  return out;
}

/** Per blob digest, the bytes its ingests have recorded as on disk (the least of them when several). */
export function recordedIngests(root: string): Map<Digest, number> {
  const out = new Map<Digest, number>();
  for (const id of ls(join(root, 'content', 'ingest'))) {
    try {
      const ref = JSON.parse(readFileSync(join(root, 'content', 'ingest', id, 'ref'), 'utf8')) as { digest: Digest };
      out.set(ref.digest, Math.min(out.get(ref.digest) ?? Infinity, recordedBytes(join(root, 'content', 'ingest', id))));
    } catch {
      // Killed before its ref was written: nothing in it can be resumed.
    }
  }
  return out;
}
