// The fastpull program: parses arguments, runs one command, prints errors as one line with a code.
import { Command, CommanderError } from 'commander';
import { isFastpullError, VERSION } from '@fastpull/core';
import { imagesCommand } from './commands/images.js';
import { mountsCommand } from './commands/mounts.js';
import { pullCommand } from './commands/pull.js';
import { writeLine, type CliIO } from './io.js';

/** Exit status of a failed command; usage errors exit with 2. */
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

export function createProgram(io: CliIO, signal: AbortSignal): Command {
  const program = new Command('fastpull')
    .description('Pull container images fast, verified, into overlayfs snapshots')
    .version(VERSION)
    .exitOverride()
    .configureOutput({ writeOut: (s) => io.stdout.write(s), writeErr: (s) => io.stderr.write(s) })
    .showHelpAfterError(false);
  for (const c of [pullCommand(io, signal), imagesCommand(io), mountsCommand(io)]) {
    c.exitOverride().configureOutput({ writeOut: (s) => io.stdout.write(s), writeErr: (s) => io.stderr.write(s) });
    program.addCommand(c);
  }
  return program;
}

/**
 * Runs fastpull with `argv` (without the node and script names) and returns the exit status.
 * @example process.exitCode = await main(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr, env: process.env });
 */
export async function main(argv: readonly string[], io: CliIO, signal: AbortSignal = new AbortController().signal): Promise<number> {
  const program = createProgram(io, signal);
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return 0;
  } catch (e) {
    if (e instanceof CommanderError) {
      // Help and version exit through here with status 0; commander already printed its message.
      return e.exitCode === 0 ? 0 : EXIT_USAGE;
    }
    if (isFastpullError(e)) {
      writeLine(io.stderr, `fastpull: ${e.code}: ${e.message}`);
    } else {
      writeLine(io.stderr, `fastpull: INTERNAL: ${e instanceof Error ? e.message : String(e)}`);
    }
    return EXIT_FAILURE;
  }
}
