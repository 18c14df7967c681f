// Reading `strace -f -y` output: each system call with the paths it names (its fd annotations and path
// arguments), its result, and where in the trace it started and returned, so that a test can check the
// order in which a process made changes, flushed them and committed them.
import { spawnSync } from 'node:child_process';

/** One system call from the trace. `start` and `end` are line numbers: entry and return, as strace saw them. */
export interface Syscall {
  readonly pid: number;
  readonly name: string;
  /** The argument text as strace printed it. */
  readonly args: string;
  /** The return value (-1 for an error); NaN when strace printed none (the process ended in the call). */
  readonly ret: number;
  readonly start: number;
  readonly end: number;
  /** Paths named: fd annotations (`3</a/b>`, the fd's path) and absolute path arguments, decoded to bytes as latin1. */
  readonly paths: readonly string[];
}

/** Why strace cannot be used here, or undefined. */
export function straceUnavailable(): string | undefined {
  const r = spawnSync('strace', ['-f', '-qq', '-o', '/dev/null', 'true'], { encoding: 'utf8' });
  if (r.error) return `strace is not installed (${r.error.message})`;
  return r.status === 0 ? undefined : `strace cannot trace here: ${r.stderr.trim()}`;
}

/** Decodes a string as strace prints it (C escapes, \xNN, octal) into its bytes, as a latin1 string. */
export function unescape(s: string): string {
  return s.replace(/\\(x[0-9a-fA-F]{2}|[0-7]{1,3}|.)/g, (_, e: string) => {
    if (e[0] === 'x') return String.fromCharCode(parseInt(e.slice(1), 16));
    if (/^[0-7]/.test(e)) return String.fromCharCode(parseInt(e, 8));
    return ({ n: '\n', t: '\t', r: '\r', v: '\v', f: '\f' } as Record<string, string>)[e] ?? e;
  });
}

const LINE = /^(\d+) +(?:([a-z_0-9]+)\((.*)|<\.\.\. ([a-z_0-9]+) resumed>(.*))$/;
const UNFINISHED = ' <unfinished ...>';
const RESULT = /\) += (-?\d+|0x[0-9a-f]+|\?)(?:<[^>]*>)?(?: .*)?$/;

/** Parses a trace written with `strace -f -y -o FILE` (one file, all processes and threads). */
export function parseTrace(text: string): Syscall[] {
  const out: Syscall[] = [];
  const pending = new Map<number, { name: string; args: string; start: number }>();
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const m = LINE.exec(lines[i]!);
    if (!m) continue; // signals, exits
    const pid = Number(m[1]);
    let name: string;
    let rest: string;
    let start = i;
    if (m[2] !== undefined) {
      name = m[2];
      rest = m[3]!;
      if (rest.endsWith(UNFINISHED)) {
        pending.set(pid, { name, args: rest.slice(0, -UNFINISHED.length), start: i });
        continue;
      }
    } else {
      const p = pending.get(pid);
      if (!p || p.name !== m[4]) continue;
      pending.delete(pid);
      name = p.name;
      rest = `${p.args}${m[5]!}`;
      start = p.start;
    }
    const r = RESULT.exec(rest);
    const args = r ? rest.slice(0, r.index) : rest;
    const ret = r ? (r[1] === '?' ? NaN : Number(r[1])) : NaN;
    out.push({ pid, name, args, ret, start, end: i, paths: pathsOf(name, args) });
  }
  return out;
}

/** Calls whose quoted arguments are data (or a symlink's target), never a path they act on. */
const DATA_ARGS = new Set(['write', 'pwrite64', 'writev', 'pwritev', 'pwritev2', 'sendto', 'sendmsg']);

/** Paths an argument text names: fd annotations other than AT_FDCWD's, and quoted absolute paths. */
function pathsOf(name: string, args: string): string[] {
  const paths: string[] = [];
  const text = args.replace(/AT_FDCWD<[^>]*>/g, 'AT_FDCWD');
  for (const m of text.matchAll(/\d+<((?:[^>\\]|\\.)*)>/g)) paths.push(unescape(m[1]!));
  if (DATA_ARGS.has(name)) return paths;
  // symlink(target, linkpath) and symlinkat(target, dirfd, linkpath): the target is data.
  const quoted = [...text.matchAll(/"((?:[^"\\]|\\.)*)"(\.\.\.)?/g)].slice(name === 'symlink' || name === 'symlinkat' ? 1 : 0);
  for (const m of quoted) {
    if (m[2] === undefined && m[1]!.startsWith('/')) paths.push(unescape(m[1]!));
  }
  return paths;
}
