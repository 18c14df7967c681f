// `fastpull rm REF...`: forget images; with --gc, also remove what nothing refers to any more.
import { Command } from 'commander';
import { collectGarbage, openStore, resolveImage } from '@fastpull/core';
import { doing } from '../errors.js';
import { formatBytes, writeJSON, writeLine, type CliIO } from '../io.js';
import { jsonOption, rootOption, withExample } from '../options.js';
import { canonicalName } from '../refs.js';
import { addressOption, daemonAddress, withDaemon } from '../remote.js';

export function rmCommand(io: CliIO): Command {
  const command = new Command('rm')
    .alias('rmi')
    .description('remove images from the store (their records; snapshots and blobs go with `fastpull gc`, or at once with --gc)')
    .argument('<ref...>', 'pulled images')
    .option('--gc', 'collect garbage afterwards: remove the snapshots and blobs no other image, pull or mount uses')
    .addOption(rootOption(io.env))
    .addOption(jsonOption('print {"removed": [names], "gc": {...}} as JSON'))
    .addOption(addressOption());
  return withExample(command, ['fastpull rm app:1', 'fastpull rm --gc app:1 app:2']).action(async (refs: string[], flags: { root: string; gc?: boolean; json?: boolean; address?: string }) => {
    const address = daemonAddress(io, flags, command);
    if (address) {
      await withDaemon(address, async (client) => {
        const removed: string[] = [];
        for (const ref of refs) {
          await doing(`removing ${canonicalName(ref)}`, async () => {
            const { name } = await client.removeImage(ref);
            removed.push(name);
            if (!flags.json) writeLine(io.stdout, `removed ${name}`);
          });
        }
        const gc = flags.gc ? await doing(`collecting garbage through fastpulld at ${address}`, () => client.collectGarbage()) : undefined;
        if (flags.json) writeJSON(io.stdout, { removed, ...(gc ? { gc } : {}) });
        else if (gc) writeLine(io.stdout, `gc: removed ${gc.snapshots.length} snapshots and ${gc.blobs.length} blobs, ${formatBytes(gc.bytes)} freed`);
      });
      return;
    }
    const store = openStore(flags.root);
    const removed: string[] = [];
    for (const ref of refs) {
      await doing(`removing ${canonicalName(ref)}`, async () => {
        const image = await resolveImage(store, ref);
        await store.images.delete(image.name);
        removed.push(image.name);
        if (!flags.json) writeLine(io.stdout, `removed ${image.name}`);
      });
    }
    const gc = flags.gc ? await doing(`collecting garbage in ${store.root}`, () => collectGarbage(store)) : undefined;
    if (flags.json) writeJSON(io.stdout, { removed, ...(gc ? { gc } : {}) });
    else if (gc) writeLine(io.stdout, `gc: removed ${gc.snapshots.length} snapshots and ${gc.blobs.length} blobs, ${formatBytes(gc.bytes)} freed`);
  });
}
