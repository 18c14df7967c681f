// `fastpull unmount TARGET`: undo `fastpull mount`, removing the mount's upper and work dirs.
import { Command } from 'commander';
import { LocalService } from '@fastpull/core';
import { doing } from '../errors.js';
import { writeLine, type CliIO } from '../io.js';
import { rootOption, withExample } from '../options.js';
import { unmountImage } from '../overlay.js';
import { addressOption } from '../remote.js';
import { openService } from '../service.js';

export function unmountCommand(io: CliIO): Command {
  const command = new Command('unmount')
    .alias('umount')
    .description('unmount what `fastpull mount` mounted at TARGET and remove its upper and work dirs (needs root)')
    .argument('<target>', 'the directory given to `fastpull mount`')
    .addOption(rootOption(io.env))
    .addOption(addressOption());
  return withExample(command, ['fastpull unmount /mnt/app']).action(async (target: string, flags: { root: string; address?: string }) => {
    // The mount names its own record; a store is only needed for a record whose mount is gone.
    const service = await openService(io, flags, command);
    const local = service instanceof LocalService ? service.location : undefined;
    await service.close();
    const record = await doing(`unmounting ${target}`, () => unmountImage(local, target));
    writeLine(io.stdout, `unmounted ${record.image} from ${record.target}`);
  });
}
