// `fastpull images`: list the images in the store, as a table or JSON.
import { Command } from 'commander';
import { formatPlatform } from '@fastpull/core';
import { doing } from '../errors.js';
import { formatAge, formatBytes, formatTable, shortDigest, writeJSON, writeLine, type CliIO } from '../io.js';
import { jsonOption, rootOption, withExample } from '../options.js';
import { addressOption } from '../remote.js';
import { withService } from '../service.js';

export function imagesCommand(io: CliIO): Command {
  const command = new Command('images')
    .alias('ls')
    .description('list pulled images: name, digest, platform, layers, compressed and unpacked size, when pulled')
    .addOption(rootOption(io.env))
    .addOption(jsonOption('print a JSON array of image records, each with platformName and unpackedSize'))
    .addOption(addressOption());
  return withExample(command, ['fastpull images', 'fastpull images --json | jq -r ".[].name"']).action(
    async (flags: { root: string; json?: boolean; address?: string }) => {
      const images = await withService(io, flags, command, (service) =>
        doing(`listing the images of ${service.location}`, async () =>
          // unpackedSize is what the snapshots hold now; null when one of them is missing.
          (await service.listImages()).map((i) => ({ ...i, platformName: formatPlatform(i.platform), unpackedSize: i.unpackedSize ?? null })),
        ),
      );
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
    },
  );
}
