// `fastpull mounts REF`: print the read-only mount that presents an image's tree.
import { Command } from 'commander';
import { mountsFor, openStore } from '@fastpull/core';
import { doing } from '../errors.js';
import { writeJSON, writeLine, type CliIO } from '../io.js';
import { jsonOption, rootOption, withExample } from '../options.js';
import { canonicalName } from '../refs.js';
import { addressOption, daemonAddress, withDaemon } from '../remote.js';

export function mountsCommand(io: CliIO): Command {
  const command = new Command('mounts')
    .description('print the read-only mount of an image (add upperdir= and workdir= for a writable root, or use `fastpull mount`)')
    .argument('<ref>', 'a pulled image')
    .addOption(rootOption(io.env))
    .addOption(jsonOption('print the mounts as a JSON array of {type, source, options}'))
    .addOption(addressOption());
  return withExample(command, ['fastpull mounts app:1', 'mount $(fastpull mounts app:1) /mnt/app']).action(async (ref: string, flags: { root: string; json?: boolean; address?: string }) => {
    const address = daemonAddress(io, flags, command);
    const mounts = await doing(`finding the mounts of ${canonicalName(ref)}`, () =>
      address ? withDaemon(address, (client) => client.mounts({ image: ref })) : mountsFor(openStore(flags.root), ref),
    );
    if (flags.json) {
      writeJSON(io.stdout, mounts);
      return;
    }
    // One line per mount, in the argument order of mount(8): -t TYPE SOURCE -o OPTIONS.
    for (const m of mounts) writeLine(io.stdout, `-t ${m.type} ${m.source} -o ${m.options.join(',')}`);
  });
}
