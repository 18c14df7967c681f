// Commands that can run through fastpulld: given --address SOCKET (or FASTPULL_ADDRESS) they ask the
// daemon, else they work on the store in-process. The output is the same either way.
import { statSync } from 'node:fs';
import { Option, type Command } from 'commander';
import { defaultSocket } from '@fastpull/daemon/paths';
import type { CliIO } from './io.js';

export function addressOption(): Option {
  return new Option(
    '--address <socket>',
    "talk to fastpulld on this unix socket instead of opening the store (env FASTPULL_ADDRESS; the daemon's store and configuration apply)",
  );
}

/**
 * The daemon's address, when the command should go through one: `--address`, else
 * FASTPULL_ADDRESS, else the daemon's default socket when it exists and the command was not
 * pointed at a store of its own (`--root` or FASTPULL_ROOT).
 */
export function daemonAddress(io: CliIO, flags: { address?: string }, command?: Command): string | undefined {
  const given = flags.address || io.env.FASTPULL_ADDRESS;
  if (given) return given;
  if (command === undefined || command.getOptionValueSource('root') !== 'default' || io.env.FASTPULL_ROOT) return undefined;
  const socket = defaultSocket(io.env);
  try {
    return statSync(socket).isSocket() ? socket : undefined;
  } catch {
    return undefined;
  }
}
