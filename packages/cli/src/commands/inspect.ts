// `fastpull inspect REF`: an image's record with its manifest and config, as JSON (like `docker inspect`).
import { Command } from 'commander';
import { openStore, resolveImage, verifyBytes, type Descriptor, type Store } from '@fastpull/core';
import { doing } from '../errors.js';
import { writeJSON, type CliIO } from '../io.js';
import { rootOption, withExample } from '../options.js';
import { canonicalName } from '../refs.js';
import { unpackedSize } from './images.js';

export interface Inspection {
  /** The image record (name, target, manifest and config descriptors, platform, layers, chainID, sizes). */
  readonly image: Awaited<ReturnType<typeof resolveImage>>;
  readonly root: string;
  /** Bytes of the uncompressed layers; null when a snapshot is missing. */
  readonly unpackedSize: number | null;
  /** The snapshot directory of each layer, bottom first. */
  readonly snapshots: readonly string[];
  /** The index the name resolved to, when it was one. */
  readonly index?: unknown;
  readonly manifest: unknown;
  readonly config: unknown;
}

export async function inspectImage(store: Store, ref: string): Promise<Inspection> {
  const image = await resolveImage(store, ref);
  const [manifest, config] = await Promise.all([readJSON(store, image.manifest, 'manifest'), readJSON(store, image.config, 'config')]);
  const index = image.target.digest !== image.manifest.digest ? await readJSON(store, image.target, 'index') : undefined;
  return {
    image,
    root: store.root,
    unpackedSize: await unpackedSize(store, image),
    snapshots: image.layers.map((l) => store.snapshots.fsPath(l.chainID)),
    ...(index !== undefined ? { index } : {}),
    manifest,
    config,
  };
}

/** A stored blob, checked against its digest again before it is shown, then parsed. */
async function readJSON(store: Store, desc: Descriptor, what: string): Promise<unknown> {
  const bytes = await store.content.readBytes(desc.digest);
  verifyBytes(bytes, desc.digest, `${what} ${desc.digest}`);
  return JSON.parse(bytes.toString('utf8')) as unknown;
}

export function inspectCommand(io: CliIO): Command {
  const command = new Command('inspect')
    .description('print a pulled image as JSON: its record, manifest and config (and index, if its name resolved to one)')
    .argument('<ref>', 'a pulled image')
    .addOption(rootOption(io.env));
  return withExample(command, ['fastpull inspect app:1', 'fastpull inspect app:1 | jq .config.config.Env']).action(async (ref: string, flags: { root: string }) => {
    writeJSON(io.stdout, await doing(`inspecting ${canonicalName(ref)}`, () => inspectImage(openStore(flags.root), ref)));
  });
}
