// `fastpull unmount TARGET`: undo `fastpull mount`, removing the mount's upper and work dirs.
import { Command } from 'commander';
import { doing } from '../errors.js';
import { writeLine, type CliIO } from '../io.js';
import { rootOption, withExample } from '../options.js';
import { unmountImage } from '../overlay.js';
import { addressOption } from '../remote.js';
import { withService } from '../service.js';

export function unmountCommand(io: CliIO): Command {
  const command = new Command('unmount')
    .alias('umount')
    .description('unmount what `fastpull mount` mounted at TARGET and remove its upper and work dirs (needs root)')
    .argument('<target>', 'the directory given to `fastpull mount`')
    .addOption(rootOption(io.env))
    .addOption(addressOption());
  return withExample(command, ['fastpull unmount /mnt/app']).action(async (target: string, flags: { root: string; address?: string }) => {
    const record = await withService(io, flags, command, (service) => doing(`unmounting ${target}`, () => unmountImage(service, target)));
    writeLine(io.stdout, `unmounted ${record.image} from ${record.target}`);
  });
}
