// Shared parts of the reliability suites of campaigns 2 (network faults), 3 (disk full) and
// 5 (daemon load): the long-variant switch, seeds, generated images and store checks.
import { readFileSync, readdirSync, readlinkSync, statfsSync } from 'node:fs';
import { join } from 'node:path';
import { openStore, type ImageRecord } from '@fastpull/core';
import { applyLayer, buildImage, diffTrees, Prng, readTree, type BuiltImage, type ExpectedTree, type LayerEntry } from '@fastpull/core/testing';
import { ls } from './helpers.js';

/** The longer variant of every campaign suite (FASTPULL_RELIABILITY_LONG=1). */
export const LONG = process.env.FASTPULL_RELIABILITY_LONG === '1';

/** The seed of a suite: FASTPULL_RELIABILITY_SEED when set, else the suite's fixed default. */
export function suiteSeed(fallback: number): number {
  const env = process.env.FASTPULL_RELIABILITY_SEED;
  if (env === undefined || env === '') return fallback;
  const n = Number(env);
  if (!Number.isSafeInteger(n)) throw new Error(`FASTPULL_RELIABILITY_SEED=${env}: want an integer`);
  return n;
}

/** One layer of a generated image: `files` files of about `fileSize` bytes under `dir`. */
export interface LayerSpec {
  readonly dir: string;
  readonly files: number;
  readonly fileSize: number;
  /** Random (incompressible) bytes instead of binary-like ones. */
  readonly noise?: boolean;
}

/**
 * The entries of one generated layer: files, a nested directory, a symlink; never whiteouts, so the
 * layer's own snapshot must hold exactly its own tree (see {@link layerTree}).
 */
export function layerEntries(prng: Prng, spec: LayerSpec): LayerEntry[] {
  const out: LayerEntry[] = [{ type: 'dir', path: spec.dir, mode: 0o755 }];
  for (let i = 0; i < spec.files; i++) {
    const size = Math.max(1, spec.fileSize + prng.int(-Math.floor(spec.fileSize / 4), Math.floor(spec.fileSize / 4)));
    const sub = i % 3 === 2 ? `${spec.dir}/sub` : spec.dir;
    out.push({
      type: 'file',
      path: `${sub}/${prng.word()}-${i}.bin`,
      content: spec.noise ? prng.bytes(size) : prng.binary(size),
      mode: prng.pick([0o644, 0o755, 0o600]),
    });
  }
  out.push({ type: 'symlink', path: `${spec.dir}/link`, target: `../${spec.dir}` });
  return out;
}

/** Builds an image of generated layers, the same bytes for the same seed. */
export async function generatedImage(seed: number, layers: readonly LayerSpec[]): Promise<BuiltImage> {
  const prng = new Prng(seed);
  return buildImage({ layers: layers.map((l) => layerEntries(prng, l)) });
}

/** The tree a layer's own snapshot directory must hold (layers without whiteouts). */
export function layerTree(image: BuiltImage, index: number): ExpectedTree {
  const tree: ExpectedTree = new Map();
  applyLayer(tree, image.layers[index]!);
  return tree;
}

/**
 * Compares every layer's committed snapshot with what the builder says it holds, via the image
 * record named `name`; returns the differences (empty when all match).
 */
export async function snapshotDiffs(root: string, name: string, image: BuiltImage): Promise<string[]> {
  const store = openStore(root);
  const rec: ImageRecord | undefined = (await store.images.list()).find((i) => i.name === name);
  if (rec === undefined) return [`${name}: no image record`];
  if (rec.manifest.digest !== image.manifestDigest) return [`${name}: manifest ${rec.manifest.digest}, want ${image.manifestDigest}`];
  const out: string[] = [];
  for (let i = 0; i < image.layers.length; i++) {
    const got = await readTree(store.snapshots.fsPath(rec.layers[i]!.chainID));
    for (const d of diffTrees(layerTree(image, i), got)) out.push(`layer ${i}: ${d}`);
  }
  return out;
}

/** What a store holds that is not committed content: downloads in progress and half-unpacked snapshots. */
export function litter(root: string): { ingests: string[]; actives: string[] } {
  return { ingests: ls(join(root, 'content', 'ingest')), actives: ls(join(root, 'snapshots', 'active')) };
}

/** The blob digest an ingest directory downloads (from its `ref` record). */
export function ingestDigest(root: string, id: string): string | undefined {
  try {
    return (JSON.parse(readFileSync(join(root, 'content', 'ingest', id, 'ref'), 'utf8')) as { digest?: string }).digest;
  } catch {
    return undefined;
  }
}

/** Bytes used on the filesystem holding `path`. */
export function usedBytes(path: string): number {
  const s = statfsSync(path);
  return (s.blocks - s.bfree) * s.bsize;
}

/** The file descriptors this process has open, as `fd -> target`. */
export function openFds(): Map<number, string> {
  const out = new Map<number, string>();
  for (const name of readdirSync('/proc/self/fd')) {
    try {
      out.set(Number(name), readlinkSync(`/proc/self/fd/${name}`));
    } catch {
      // Closed between the listing and the read (the listing's own descriptor, for one).
    }
  }
  return out;
}

/** Established TCP connections between loopback port `port` and anything (both ends), from /proc/net/tcp. */
export function tcpConnections(port: number): { server: number; client: number } {
  const hex = port.toString(16).toUpperCase().padStart(4, '0');
  let server = 0;
  let client = 0;
  for (const line of readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 4) continue;
    // 01 = ESTABLISHED; CLOSE_WAIT (08) also holds a descriptor, so count it as open.
    if (f[3] !== '01' && f[3] !== '08') continue;
    if (f[1]!.endsWith(`:${hex}`)) server++;
    if (f[2]!.endsWith(`:${hex}`)) client++;
  }
  return { server, client };
}

/** Resolves after `ms`. */
export const delay = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Polls `fn` every 50 ms until it returns true or `ms` pass; returns its last answer. */
export async function settle(fn: () => boolean, ms: number): Promise<boolean> {
  const until = performance.now() + ms;
  for (;;) {
    if (fn()) return true;
    if (performance.now() > until) return false;
    await delay(50);
  }
}
