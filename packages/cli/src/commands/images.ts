// `fastpull images`: list the images in the store, as a table or JSON.
import { Command } from 'commander';
import { formatPlatform, openStore, type ImageRecord, type Store } from '@fastpull/core';
import { doing } from '../errors.js';
import { formatAge, formatBytes, formatTable, shortDigest, writeJSON, writeLine, type CliIO } from '../io.js';
import { jsonOption, rootOption, withExample } from '../options.js';
import { addressOption, daemonAddress, withDaemon } from '../remote.js';

/** An image record with what the listing adds: its platform as text and its unpacked size. */
export type ImageListing = Omit<ImageRecord, 'unpackedSize'> & {
  /** `os/arch[/variant]`. */
  readonly platformName: string;
  /** Sum of the uncompressed layer tars, from the snapshots; null when a snapshot is missing. */
  readonly unpackedSize: number | null;
};

export async function listImages(store: Store): Promise<ImageListing[]> {
  const images = await store.images.list();
  return Promise.all(
    images.map(async (i) => ({ ...i, platformName: formatPlatform(i.platform), unpackedSize: await unpackedSize(store, i) })),
  );
}

/** Bytes of the image's uncompressed layers, or null when one of its snapshots is gone. */
export async function unpackedSize(store: Store, image: ImageRecord): Promise<number | null> {
  let total = 0;
  for (const l of image.layers) {
    const info = await store.snapshots.info(l.chainID);
    if (!info) return null;
    total += info.size;
  }
  return total;
}

export function imagesCommand(io: CliIO): Command {
  const command = new Command('images')
    .alias('ls')
    .description('list pulled images: name, digest, platform, layers, compressed and unpacked size, when pulled')
    .addOption(rootOption(io.env))
    .addOption(jsonOption('print a JSON array of image records, each with platformName and unpackedSize'))
    .addOption(addressOption());
  return withExample(command, ['fastpull images', 'fastpull images --json | jq -r ".[].name"']).action(async (flags: { root: string; json?: boolean; address?: string }) => {
    const address = daemonAddress(io, flags, command);
    const images = address
      ? await doing(`listing the images of fastpulld at ${address}`, () =>
          withDaemon(address, async (client) =>
            // The daemon sends each record with unpackedSize as its snapshots say now (absent: one is missing).
            (await client.listImages()).map((i) => ({ ...i, platformName: formatPlatform(i.platform), unpackedSize: i.unpackedSize ?? null })),
          ),
        )
      : await doing(`listing the images in ${openStore(flags.root).root}`, () => listImages(openStore(flags.root)));
    if (flags.json) {
      writeJSON(io.stdout, images);
      return;
    }
    const now = new Date();
    const rows = [['NAME', 'DIGEST', 'PLATFORM', 'LAYERS', 'SIZE', 'UNPACKED', 'CREATED']];
    for (const i of images) {
      rows.push([
        i.name,
        shortDigest(i.manifest.digest),
        i.platformName,
        String(i.layers.length),
        formatBytes(i.size),
        i.unpackedSize === null ? '-' : formatBytes(i.unpackedSize),
        formatAge(new Date(i.created), now),
      ]);
    }
    for (const line of formatTable(rows)) writeLine(io.stdout, line);
  });
}
