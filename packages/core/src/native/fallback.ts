// Stand-ins for the native addon's calls where it was not built: locks and device nodes through
// flock(1) and mknod(1), times through node:fs (to the microsecond), and no extended attributes.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import type { NativeFs } from './fs.js';

/** What a pull loses without the addon, for the one warning that says so. */
export const WITHOUT_ADDON =
  'extended attributes are dropped (a layer with an opaque directory fails), file times keep microseconds (milliseconds before 1970), ' +
  'the in-process ISA-L and parallel gzip decoders and allocator tuning are off (node:zlib decodes), both hashes of a layer and all its ' +
  'file writes run on its unpack thread, snapshots are flushed file by file instead of with one syncfs, and locks and device nodes go through flock(1) and mknod(1)';

/** The exit status flock(1) is told to use when another holder has the lock (its default, 1, is also its error status). */
const CONFLICT = 75;
/** The descriptor the lock's file has in flock(1). */
const CHILD_FD = 3;

const ERRNO_TEXT: ReadonlyArray<readonly [string, string]> = [
  ['Operation not permitted', 'EPERM'],
  ['No such file or directory', 'ENOENT'],
  ['File exists', 'EEXIST'],
  ['Permission denied', 'EACCES'],
  ['No space left on device', 'ENOSPC'],
  ['Not a directory', 'ENOTDIR'],
  ['Read-only file system', 'EROFS'],
  ['Disk quota exceeded', 'EDQUOT'],
  ['Too many levels of symbolic links', 'ELOOP'],
  ['File name too long', 'ENAMETOOLONG'],
  ['Invalid argument', 'EINVAL'],
];

/** An Error shaped like the addon's: `code` the errno name, and the call and path it was about. */
function errnoError(code: string, text: string, syscall: string, path: string): Error {
  return Object.assign(new Error(`${code}: ${text}, ${syscall} '${path}'`), { code, syscall, path });
}

/** A path that names the same file from a child process: /proc/self there is the child. */
function forChild(path: string): string {
  return path.startsWith('/proc/self/') ? `/proc/${process.pid}/${path.slice('/proc/self/'.length)}` : path;
}

/** Runs a helper command; returns its exit status, or throws when it cannot be run at all. */
function run(
  command: string,
  args: string[],
  syscall: string,
  path: string,
  stdio: Array<'ignore' | 'pipe' | number> = ['ignore', 'ignore', 'pipe'],
): { status: number; stderr: string } {
  // Loaded here, not imported: every unpack worker imports this module, and few ever run a helper.
  const { spawnSync } = createRequire(import.meta.url)('node:child_process') as typeof import('node:child_process');
  const r = spawnSync(command, args, { stdio, encoding: 'utf8', env: { ...process.env, LC_ALL: 'C' } });
  if (r.error !== undefined) {
    throw errnoError('ENOSYS', `without fastpull's native addon this needs ${command}(1), which could not be run (${r.error.message})`, syscall, path);
  }
  return { status: r.status ?? -1, stderr: r.stderr ?? '' };
}

function checkTime(sec: number | bigint, nsec: number): void {
  const wholeSec = typeof sec === 'bigint' || Number.isSafeInteger(sec);
  if (!wholeSec || !Number.isInteger(nsec) || nsec < 0 || nsec > 999_999_999) throw new TypeError(`invalid time: ${String(sec)} s ${String(nsec)} ns`);
}

/**
 * A time as node:fs takes it: seconds as a double, which keeps microseconds; a Date (milliseconds)
 * before 1970, as node:fs reads a negative number as "now".
 */
function timeArg(sec: number | bigint, nsec: number): number | Date {
  const s = Number(sec) + nsec / 1e9;
  return s >= 0 ? s : new Date(Math.floor(s * 1000));
}

/** The stand-in; `onUse` runs on every call that goes through it (the caller warns on the first). */
export function fallbackFs(onUse: () => void): NativeFs {
  return {
    mknod(path, mode, major, minor) {
      onUse();
      const kind = mode & fs.constants.S_IFMT;
      const letter = kind === fs.constants.S_IFCHR ? 'c' : kind === fs.constants.S_IFBLK ? 'b' : kind === fs.constants.S_IFIFO ? 'p' : undefined;
      if (letter === undefined) throw new TypeError(`mknod: mode ${mode.toString(8)} is not a device or fifo`);
      const numbers = letter === 'p' ? [] : [String(major), String(minor)];
      const r = run('mknod', ['-m', (mode & 0o7777).toString(8), '--', forChild(path), letter, ...numbers], 'mknod', path);
      if (r.status === 0) return;
      const [text, code] = ERRNO_TEXT.find(([t]) => r.stderr.includes(t)) ?? [r.stderr.trim(), 'EIO'];
      throw errnoError(code, text, 'mknod', path);
    },
    lsetxattr(path) {
      onUse();
      throw errnoError('ENOTSUP', "extended attributes need fastpull's native addon, which is not loaded", 'lsetxattr', path);
    },
    lgetxattr() {
      onUse();
      return null; // none can be read without the addon: nothing is marked
    },
    llistxattr() {
      onUse();
      return [];
    },
    tryLock(fd, exclusive) {
      onUse();
      // flock(1) locks the open file it inherits as CHILD_FD: the very one `fd` refers to, so the lock
      // outlives the child and goes when this process closes `fd` or dies, as with flock(2) here.
      const stdio: Array<'ignore' | 'pipe' | number> = ['ignore', 'ignore', 'pipe', fd];
      const r = run(
        'flock',
        [exclusive ? '--exclusive' : '--shared', '--nonblock', '--conflict-exit-code', String(CONFLICT), String(CHILD_FD)],
        'flock',
        '(fd)',
        stdio,
      );
      if (r.status === 0) return true;
      if (r.status === CONFLICT) return false;
      throw errnoError('EIO', r.stderr.trim() || `flock(1) exited with status ${r.status}`, 'flock', '(fd)');
    },
    lutimesNs(path, atimeSec, atimeNsec, mtimeSec, mtimeNsec) {
      onUse();
      checkTime(atimeSec, atimeNsec);
      checkTime(mtimeSec, mtimeNsec);
      fs.lutimesSync(path, timeArg(atimeSec, atimeNsec), timeArg(mtimeSec, mtimeNsec));
    },
    futimesNs(fd, atimeSec, atimeNsec, mtimeSec, mtimeNsec) {
      onUse();
      checkTime(atimeSec, atimeNsec);
      checkTime(mtimeSec, mtimeNsec);
      fs.futimesSync(fd, timeArg(atimeSec, atimeNsec), timeArg(mtimeSec, mtimeNsec));
    },
    tuneAllocator(mmapThreshold, trimThreshold) {
      if (!Number.isSafeInteger(mmapThreshold) || mmapThreshold < 0 || !Number.isSafeInteger(trimThreshold) || trimThreshold < 0) {
        throw new TypeError('tuneAllocator: thresholds must be non-negative integers');
      }
      return false; // nothing to tune with; said with the rest when a call needs the addon
    },
    trimAllocator() {
      return false; // nothing was tuned, so nothing is kept beyond the C library's own habits
    },
  };
}
