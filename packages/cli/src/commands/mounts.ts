// `fastpull mounts REF`: print the read-only mount that presents an image's tree.
import { Command } from 'commander';
import { doing } from '../errors.js';
import { writeJSON, writeLine, type CliIO } from '../io.js';
import { checkedPlatform, jsonOption, platformOption, rootOption, withExample } from '../options.js';
import { canonicalName } from '../refs.js';
import { addressOption } from '../remote.js';
import { withService } from '../service.js';

export function mountsCommand(io: CliIO): Command {
  const command = new Command('mounts')
    .description('print the read-only mount of an image (add upperdir= and workdir= for a writable root, or use `fastpull mount`)')
    .argument('<ref>', 'a pulled image')
    .addOption(rootOption(io.env))
    .addOption(jsonOption('print the mounts as a JSON array of {type, source, options}'))
    .addOption(platformOption("which platform's image, for a name pulled for several (default: this host's, or the only one)"))
    .addOption(addressOption());
  return withExample(command, ['fastpull mounts app:1', 'mount $(fastpull mounts app:1) /mnt/app']).action(
    async (ref: string, flags: { root: string; json?: boolean; address?: string; platform?: string }) => {
      const platform = checkedPlatform(flags.platform);
      const mounts = await withService(io, flags, command, (service) =>
        doing(`finding the mounts of ${canonicalName(ref)}`, () => service.mounts({ image: ref, ...(platform ? { platform } : {}) })),
      );
      if (flags.json) {
        writeJSON(io.stdout, mounts);
        return;
      }
      // One line per mount, in the argument order of mount(8): -t TYPE SOURCE -o OPTIONS.
      for (const m of mounts) writeLine(io.stdout, `-t ${m.type} ${m.source} -o ${m.options.join(',')}`);
    },
  );
}
