// How the CLI reports failures: one line a person can act on, `fastpull: <doing>: <message> (<CODE>)`,
// exit 1 for failures and 2 for usage errors; with --debug, the stack and cause chain too.
import { FastpullError, isFastpullError, type ErrorCode } from '@fastpull/core';

/** Exit status of a command that failed. */
export const EXIT_FAILURE = 1;
/** Exit status of a command line that is wrong (unknown command or flag, bad flag value). */
export const EXIT_USAGE = 2;

/** A command line that cannot be run as written: exits 2. Its code is INVALID_ARGUMENT. */
export class UsageError extends FastpullError {
  constructor(message: string) {
    super('INVALID_ARGUMENT', message);
  }
}

/** A failure with what the command was doing when it happened ("pulling docker.io/library/x:1"). */
export class CommandFailure extends Error {
  constructor(
    readonly doing: string,
    readonly error: unknown,
  ) {
    super(`${doing}: ${messageOf(error)}`, { cause: error });
    this.name = 'CommandFailure';
  }
}

/** Runs `fn`, labelling whatever it throws with what was being done. Usage errors pass through unlabelled. */
export async function doing<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    if (e instanceof CommandFailure || e instanceof UsageError) throw e;
    throw new CommandFailure(what, e);
  }
}

function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

export function codeOf(e: unknown): ErrorCode {
  const inner = e instanceof CommandFailure ? e.error : e;
  return isFastpullError(inner) ? inner.code : 'INTERNAL';
}

/** The one line printed for an error, without the trailing newline. */
export function errorLine(e: unknown, command?: string): string {
  if (e instanceof CommandFailure) return `fastpull: ${e.doing}: ${oneLine(messageOf(e.error))} (${codeOf(e)})`;
  const where = command ? `${command}: ` : '';
  return `fastpull: ${where}${oneLine(messageOf(e))} (${codeOf(e)})`;
}

/** The stack and every cause below it, for --debug. */
export function debugReport(e: unknown): string {
  const out: string[] = [];
  const seen = new Set<unknown>();
  let cur: unknown = e instanceof CommandFailure ? e.error : e;
  let depth = 0;
  while (cur !== undefined && cur !== null && !seen.has(cur) && depth < 16) {
    seen.add(cur);
    const prefix = depth === 0 ? '' : 'caused by: ';
    if (cur instanceof Error) {
      out.push(`${prefix}${cur.stack ?? `${cur.name}: ${cur.message}`}`);
      if (isFastpullError(cur) && Object.keys(cur.details).length > 0) out.push(`  details: ${JSON.stringify(cur.details)}`);
      cur = cur.cause;
    } else {
      // Not an Error: a thrown string or number, or an object that says what it says as itself.
      // eslint-disable-next-line @typescript-eslint/no-base-to-string -- not an object here: a string, number or the like
      out.push(`${prefix}${typeof cur === 'object' ? safeJson(cur) : String(cur)}`);
      cur = undefined;
    }
    depth++;
  }
  return out.join('\n');
}

function oneLine(s: string): string {
  return s.replace(/\s*\n\s*/g, '; ').trim();
}

/** `value` as JSON, or what Object.prototype.toString says of it where JSON cannot (a cycle, a BigInt). */
function safeJson(value: object): string {
  try {
    return JSON.stringify(value) ?? Object.prototype.toString.call(value);
  } catch {
    return Object.prototype.toString.call(value);
  }
}
