// `fastpull inspect REF`: an image's record with its manifest and config, as JSON (like `docker inspect`).
import { Command } from 'commander';
import { doing } from '../errors.js';
import { writeJSON, type CliIO } from '../io.js';
import { checkedPlatform, platformOption, rootOption, withExample } from '../options.js';
import { canonicalName } from '../refs.js';
import { addressOption } from '../remote.js';
import { withService } from '../service.js';

export function inspectCommand(io: CliIO): Command {
  const command = new Command('inspect')
    .description('print a pulled image as JSON: its record, manifest and config (and index, if its name resolved to one)')
    .argument('<ref>', 'a pulled image (a tag, or a digest of its manifest or index)')
    .addOption(rootOption(io.env))
    .addOption(platformOption("which platform's record, for a name pulled for several (default: this host's, or the only one)"))
    .addOption(addressOption());
  return withExample(command, ['fastpull inspect app:1', 'fastpull inspect app:1 | jq .config.config.Env']).action(
    async (ref: string, flags: { root: string; address?: string; platform?: string }) => {
      const platform = checkedPlatform(flags.platform);
      writeJSON(
        io.stdout,
        await withService(io, flags, command, (service) =>
          doing(`inspecting ${canonicalName(ref)}`, () => service.inspectImage(ref, platform ? { platform } : {})),
        ),
      );
    },
  );
}
