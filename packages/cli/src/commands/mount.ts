// `fastpull mount REF TARGET`: mount a pulled image writable at TARGET (overlayfs, as root).
import { resolve } from 'node:path';
import { Command } from 'commander';
import { doing } from '../errors.js';
import { writeJSON, writeLine, type CliIO } from '../io.js';
import { checkedPlatform, jsonOption, platformOption, rootOption, withExample } from '../options.js';
import { mountImage } from '../overlay.js';
import { canonicalName } from '../refs.js';
import { addressOption } from '../remote.js';
import { withService } from '../service.js';

export function mountCommand(io: CliIO): Command {
  const command = new Command('mount')
    .description('mount a pulled image at TARGET as a writable overlay (fresh upper and work dirs under ROOT/mounts; needs root)')
    .argument('<ref>', 'a pulled image')
    .argument('<target>', 'an existing directory to mount on')
    .addOption(rootOption(io.env))
    .addOption(jsonOption('print the mount record as JSON'))
    .addOption(platformOption("which platform's image, for a name pulled for several (default: this host's, or the only one)"))
    .addOption(addressOption());
  return withExample(command, ['mkdir -p /mnt/app && fastpull mount app:1 /mnt/app', 'fastpull unmount /mnt/app']).action(
    async (ref: string, target: string, flags: { root: string; json?: boolean; address?: string; platform?: string }) => {
      const platform = checkedPlatform(flags.platform);
      const record = await withService(io, flags, command, (service) =>
        doing(`mounting ${canonicalName(ref)} at ${target}`, () => mountImage(service, ref, target, platform)),
      );
      if (flags.json) writeJSON(io.stdout, record);
      else
        writeLine(
          io.stdout,
          `mounted ${record.image} at ${record.target} (changes go to ${record.upper}; \`${unmountHint(command, flags, record.target)}\` discards them)`,
        );
    },
  );
}

/** The unmount command line to copy: with the store or daemon this mount was made through. */
function unmountHint(command: Command, flags: { root: string; address?: string }, target: string): string {
  if (flags.address) return `fastpull unmount --address ${shellWord(flags.address)} ${shellWord(target)}`;
  return command.getOptionValueSource('root') === 'default'
    ? `fastpull unmount ${shellWord(target)}`
    : `fastpull unmount --root ${shellWord(resolve(flags.root))} ${shellWord(target)}`;
}

/** `word` as a shell reads it back: quoted when it holds anything but plain path characters. */
function shellWord(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", "'\\''")}'`;
}
