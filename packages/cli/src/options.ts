// Options and help text shared by commands.
import { Option, type Command } from 'commander';
import { defaultRoot, formatPlatform, isFastpullError, parsePlatform } from '@fastpull/core';
import { UsageError } from './errors.js';

export function rootOption(env: NodeJS.ProcessEnv): Option {
  return new Option('--root <dir>', 'store root (env FASTPULL_ROOT)').default(defaultRoot(env));
}

/** --platform of a command that finds an image in the store (a name may be pulled for several). */
export function platformOption(what: string): Option {
  return new Option('--platform <os/arch[/variant]>', what);
}

/** A checked --platform value in its canonical form, or undefined when none was given. */
export function checkedPlatform(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  try {
    return formatPlatform(parsePlatform(value));
  } catch (e) {
    throw new UsageError(`--platform: ${isFastpullError(e) ? e.message : String(e)}`);
  }
}

export function jsonOption(description = 'print machine-readable JSON'): Option {
  return new Option('--json', description);
}

/** Ends a command's --help with examples of its use. */
export function withExample(command: Command, examples: readonly string[]): Command {
  return command.addHelpText('after', `\nExample${examples.length > 1 ? 's' : ''}:\n${examples.map((e) => `  $ ${e}`).join('\n')}\n`);
}
