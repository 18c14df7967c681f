// `fastpull images`: list the images in the store.
import { Command } from 'commander';
import { openStore } from '@fastpull/core';
import { formatBytes, shortDigest, writeJSON, writeLine, type CliIO } from '../io.js';
import { jsonOption, rootOption } from '../options.js';

export function imagesCommand(io: CliIO): Command {
  return new Command('images')
    .alias('ls')
    .description('list pulled images')
    .addOption(rootOption(io.env))
    .addOption(jsonOption())
    .action(async (flags: { root: string; json?: boolean }) => {
      const images = await openStore(flags.root).images.list();
      if (flags.json) {
        writeJSON(io.stdout, images);
        return;
      }
      const rows = [['NAME', 'DIGEST', 'PLATFORM', 'LAYERS', 'SIZE']];
      for (const i of images) {
        const p = `${i.platform.os}/${i.platform.architecture}${i.platform.variant ? `/${i.platform.variant}` : ''}`;
        rows.push([i.name, shortDigest(i.manifest.digest), p, String(i.layers.length), formatBytes(i.size)]);
      }
      const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
      for (const r of rows) writeLine(io.stdout, r.map((cell, c) => (c === r.length - 1 ? cell : cell.padEnd(widths[c]!))).join('  '));
    });
}
