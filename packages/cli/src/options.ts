// Options and help text shared by commands.
import { Option, type Command } from 'commander';
import { defaultRoot } from '@fastpull/core';

export function rootOption(env: NodeJS.ProcessEnv): Option {
  return new Option('--root <dir>', 'store root (env FASTPULL_ROOT)').default(defaultRoot(env));
}

export function jsonOption(description = 'print machine-readable JSON'): Option {
  return new Option('--json', description);
}

/** Ends a command's --help with examples of its use. */
export function withExample(command: Command, examples: readonly string[]): Command {
  return command.addHelpText('after', `\nExample${examples.length > 1 ? 's' : ''}:\n${examples.map((e) => `  $ ${e}`).join('\n')}\n`);
}
