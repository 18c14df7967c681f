// The fastpull program: parses arguments, runs one command, prints a failure as one line with a code.
import { Command, CommanderError } from 'commander';
import { VERSION } from '@fastpull/core';
import { gcCommand } from './commands/gc.js';
import { imagesCommand } from './commands/images.js';
import { inspectCommand } from './commands/inspect.js';
import { mountCommand } from './commands/mount.js';
import { mountsCommand } from './commands/mounts.js';
import { pullCommand } from './commands/pull.js';
import { rmCommand } from './commands/rm.js';
import { unmountCommand } from './commands/unmount.js';
import { verifyCommand } from './commands/verify.js';
import { versionCommand } from './commands/version.js';
import { debugReport, errorLine, EXIT_FAILURE, EXIT_USAGE, UsageError } from './errors.js';
import { writeLine, type CliIO } from './io.js';
import { withExample } from './options.js';

export { EXIT_FAILURE, EXIT_USAGE } from './errors.js';

export function createProgram(io: CliIO, signal: AbortSignal): Command {
  const output = {
    writeOut: (s: string) => void io.stdout.write(s),
    writeErr: (s: string) => void io.stderr.write(s),
    // Commander's own messages ("error: unknown option") are printed by main() in fastpull's form.
    outputError: () => undefined,
  };
  const program = new Command('fastpull')
    .description('Pull container images fast, verified, into overlayfs snapshots')
    .version(VERSION)
    .option('--debug', 'on failure, print the stack and the chain of causes too')
    .exitOverride()
    .configureOutput(output)
    .showHelpAfterError(false);
  withExample(program, ['fastpull pull --plain-http 127.0.0.1:5000/app:1', 'fastpull images', 'fastpull help pull']).addHelpText(
    'after',
    '\nExit status: 0 success, 1 failure (one line on stderr: "fastpull: <doing>: <message> (<CODE>)"), 2 bad usage.\nDocumentation: docs/cli.md; error codes: docs/errors.md\n',
  );
  const commands = [
    pullCommand(io, signal),
    imagesCommand(io),
    inspectCommand(io),
    rmCommand(io),
    gcCommand(io, signal),
    mountsCommand(io),
    mountCommand(io),
    unmountCommand(io),
    verifyCommand(io, signal),
    versionCommand(io),
  ];
  for (const c of commands) program.addCommand(c.exitOverride().configureOutput(output));
  return program;
}

/**
 * Runs fastpull with `argv` (without the node and script names) and returns the exit status:
 * 0 success, 1 failure, 2 usage error.
 * @example process.exitCode = await main(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr, env: process.env });
 */
export async function main(argv: readonly string[], io: CliIO, signal: AbortSignal = new AbortController().signal): Promise<number> {
  const program = createProgram(io, signal);
  let running: string | undefined;
  program.hook('preAction', (_program, action) => {
    running = action.name();
  });
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return 0;
  } catch (e) {
    if (e instanceof CommanderError) {
      // Help and version exit through here with status 0; help shown for a missing command is already printed.
      if (e.exitCode === 0 || e.code === 'commander.help') return e.exitCode === 0 ? 0 : EXIT_USAGE;
      const command = commandOf(program, argv);
      const help = command ? `fastpull ${command} --help` : 'fastpull --help';
      writeLine(
        io.stderr,
        `fastpull: ${command ? `${command}: ` : ''}${e.message.replace(/^error: /, '').replace(/\s*\n\s*/g, ' ')}; see '${help}' (INVALID_ARGUMENT)`,
      );
      return EXIT_USAGE;
    }
    writeLine(io.stderr, errorLine(e, e instanceof UsageError ? running : undefined));
    if (program.opts<{ debug?: boolean }>().debug) writeLine(io.stderr, debugReport(e));
    return e instanceof UsageError ? EXIT_USAGE : EXIT_FAILURE;
  }
}

/** The subcommand named on the command line, if any (for usage messages). */
function commandOf(program: Command, argv: readonly string[]): string | undefined {
  const names = new Map<string, string>();
  for (const c of program.commands) for (const n of [c.name(), ...c.aliases()]) names.set(n, c.name());
  for (const a of argv) {
    if (a === '--') break;
    const found = names.get(a);
    if (found) return found;
  }
  return undefined;
}
