// `fastpull mounts REF`: print the overlay mount that presents an image's tree.
import { Command } from 'commander';
import { mountsFor, openStore } from '@fastpull/core';
import { writeJSON, writeLine, type CliIO } from '../io.js';
import { jsonOption, rootOption } from '../options.js';

export function mountsCommand(io: CliIO): Command {
  return new Command('mounts')
    .description('print the read-only mount of an image (add upperdir= and workdir= for a writable root)')
    .argument('<ref>', 'a pulled image')
    .addOption(rootOption(io.env))
    .addOption(jsonOption())
    .action(async (ref: string, flags: { root: string; json?: boolean }) => {
      const mounts = await mountsFor(openStore(flags.root), ref);
      if (flags.json) {
        writeJSON(io.stdout, mounts);
        return;
      }
      // One line per mount, in the argument order of mount(8): -t TYPE SOURCE -o OPTIONS.
      for (const m of mounts) writeLine(io.stdout, `-t ${m.type} ${m.source} -o ${m.options.join(',')}`);
    });
}
