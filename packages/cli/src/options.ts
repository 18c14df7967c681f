// Options shared by commands.
import { Option } from 'commander';
import { defaultRoot } from '@fastpull/core';

export function rootOption(env: NodeJS.ProcessEnv): Option {
  return new Option('--root <dir>', 'store root (env FASTPULL_ROOT)').default(defaultRoot(env));
}

export function jsonOption(): Option {
  return new Option('--json', 'print machine-readable JSON');
}
