// `fastpull rm REF...`: forget images; with --gc, also remove what nothing refers to any more.
import { Command } from 'commander';
import { CommandFailure, doing, errorLine } from '../errors.js';
import { formatBytes, writeJSON, writeLine, type CliIO } from '../io.js';
import { checkedPlatform, jsonOption, platformOption, rootOption, withExample } from '../options.js';
import { canonicalName } from '../refs.js';
import { addressOption } from '../remote.js';
import { withService } from '../service.js';

export function rmCommand(io: CliIO): Command {
  const command = new Command('rm')
    .alias('rmi')
    .description('remove images from the store (their records; snapshots and blobs go with `fastpull gc`, or at once with --gc)')
    .argument('<ref...>', 'pulled images')
    .option('--gc', 'collect garbage afterwards: remove the snapshots and blobs no other image, pull or mount uses')
    .addOption(rootOption(io.env))
    .addOption(jsonOption('print {"removed": [names], "gc": {...}} as JSON'))
    .addOption(platformOption('remove only this platform of each name (default: every platform pulled)'))
    .addOption(addressOption());
  return withExample(command, ['fastpull rm app:1', 'fastpull rm --gc app:1 app:2']).action(
    async (refs: string[], flags: { root: string; gc?: boolean; json?: boolean; address?: string; platform?: string }) => {
      const platform = checkedPlatform(flags.platform);
      await withService(io, flags, command, async (service) => {
        const removed: string[] = [];
        // Every image named is tried, and the collection --gc asks for runs, before a failure is
        // reported: one missing name does not keep the rest. The last failure decides the exit status.
        const failures: CommandFailure[] = [];
        for (const ref of refs) {
          try {
            const { name } = await doing(`removing ${canonicalName(ref)}`, () => service.removeImage(ref, platform ? { platform } : {}));
            removed.push(name);
            if (!flags.json) writeLine(io.stdout, `removed ${name}`);
          } catch (e) {
            if (!(e instanceof CommandFailure)) throw e;
            failures.push(e);
          }
        }
        const gc = flags.gc ? await doing(`collecting garbage in ${service.location}`, () => service.collectGarbage()) : undefined;
        if (flags.json) writeJSON(io.stdout, { removed, ...(gc ? { gc } : {}) });
        else if (gc) writeLine(io.stdout, `gc: removed ${gc.snapshots.length} snapshots and ${gc.blobs.length} blobs, ${formatBytes(gc.bytes)} freed`);
        for (const f of failures.slice(0, -1)) writeLine(io.stderr, errorLine(f));
        if (failures.length > 0) throw failures[failures.length - 1] as unknown;
      });
    },
  );
}
