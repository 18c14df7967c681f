// A background pull in a session of its own. Where the kernel groups CPU time by session
// (autogroups: a machine whose processes are not placed in CPU cgroups), a thread's nice value
// only orders it among its own session's threads; against every other session the whole group
// weighs as much as any other. `fastpull pull --background` started from a shell would then take
// half the CPU from a workload in another session, nice 19 or not. Run in a session it leads, the
// pull can lower its session's group instead (enterBackground), touching no one else's.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** What the decision reads of this process. */
export interface SessionState {
  /** Whether the kernel groups CPU time by session for this process (/proc/self/autogroup names a group: it is empty in init's own session, whose threads weigh one by one). */
  readonly autogroup: boolean;
  /** Whether this process leads its session already. */
  readonly leader: boolean;
}

/**
 * Whether `args` (the command line after the executable) run a background pull from a process
 * that shares its session's CPU group with others: only then is a new session worth a process.
 * @example needsOwnSession(['pull', '--background', 'app:1'], { autogroup: true, leader: false }) // true
 * needsOwnSession(['pull', 'app:1'], { autogroup: true, leader: false }) // false
 */
export function needsOwnSession(args: readonly string[], state: SessionState): boolean {
  if (!state.autogroup || state.leader) return false;
  const end = args.indexOf('--');
  const options = end < 0 ? args : args.slice(0, end);
  if (options.find((a) => !a.startsWith('-')) !== 'pull') return false;
  return options.includes('--background') && !options.some((a) => a === '-h' || a === '--help');
}

/** This process's state, from /proc (no autogroup where /proc says nothing). */
export function sessionState(): SessionState {
  let autogroup = false;
  try {
    autogroup = groupedBySession(readFileSync('/proc/self/autogroup', 'utf8'));
  } catch {
    // No CONFIG_SCHED_AUTOGROUP, or autogroups off: sessions do not split CPU time.
  }
  let leader = true;
  try {
    leader = leadsSession();
  } catch {
    // No /proc: nothing to decide by, so nothing is relaunched.
  }
  return { autogroup, leader };
}

/**
 * Whether /proc/self/autogroup's `text` names a group. It is empty in the session the kernel never
 * grouped (init's, kept by every process descended from it that never started a session of its own):
 * there each thread weighs on its own, and its nice value alone yields to other work.
 * @example groupedBySession('/autogroup-4131 nice 0\n') // true
 * groupedBySession('') // false
 */
export function groupedBySession(text: string): boolean {
  return text.trim() !== '';
}

/** Whether this process leads its session: field 6 of /proc/self/stat, after the command's closing parenthesis. */
export function leadsSession(stat = readFileSync('/proc/self/stat', 'utf8'), pid = process.pid): boolean {
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[3]) === pid;
}

/**
 * Runs this same command line again as the leader of a new session and ends with its outcome: its
 * exit code, or the signal that ended it. Signals a terminal or a supervisor sends this process
 * (Ctrl-C's SIGINT above all: the new session has no terminal of its own) are passed on to it.
 */
export function relaunchInOwnSession(): void {
  const child = spawn(process.execPath, [...process.execArgv, ...process.argv.slice(1)], { detached: true, stdio: 'inherit' });
  const forwarded = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT'] as const;
  const pass = (signal: NodeJS.Signals) => child.kill(signal);
  for (const s of forwarded) process.on(s, pass);
  child.on('error', (e) => {
    process.stderr.write(`fastpull: starting the background pull in its own session: ${e.message}\n`);
    process.exit(1);
  });
  child.on('exit', (code, signal) => {
    for (const s of forwarded) process.off(s, pass);
    if (signal) process.kill(process.pid, signal);
    else process.exit(code ?? 1);
  });
}
