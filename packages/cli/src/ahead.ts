// Which invocations of the `fastpull` executable start an unpack worker before they load the CLI.

/**
 * Whether `args` (the command line after the executable) run a `pull` that unpacks in this
 * process: the command is the first argument that is not an option (the CLI's global options take
 * no value), and a pull through fastpulld (`--address`, FASTPULL_ADDRESS) or one that only prints
 * its help unpacks nothing here.
 * @example startsWorkerAhead(['pull', 'app:1'], {}) // true
 * startsWorkerAhead(['images'], {}) // false
 */
export function startsWorkerAhead(args: readonly string[], env: NodeJS.ProcessEnv): boolean {
  const command = args.find((a) => !a.startsWith('-'));
  if (command !== 'pull') return false;
  if (env.FASTPULL_ADDRESS) return false;
  return !args.some((a) => a === '--address' || a.startsWith('--address=') || a === '-h' || a === '--help');
}
