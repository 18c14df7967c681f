// Paths a user gives (store root, socket, hosts dir), checked before any work: each mistake fails at
// once with INVALID_ARGUMENT, PERMISSION_DENIED or NOT_FOUND naming the path and what is wrong, rather
// than as INTERNAL halfway through a pull. Directories are created one level at a time, never with
// Node's recursive mkdir, which can loop forever on kernel filesystems (/proc, /sys).
import { constants, promises as fsp } from 'node:fs';
import { dirname, isAbsolute, resolve, sep } from 'node:path';
import { FastpullError } from '../errors.js';

/** Kernel filesystems: nothing fastpull keeps can live there, and some calls never return on them. */
const KERNEL_FILESYSTEMS = ['/proc', '/sys'];

/** The deepest a path may go: far beyond any real one, and a bound on every walk here. */
const MAX_DEPTH = 256;

/** How a directory is to be used: made when missing, or required to exist (read, or also written). */
export type DirectoryUse = 'create' | 'read' | 'write';

/**
 * Checks the directory `path` names (`what` says what it is for, e.g. "store root") for `use`, and
 * makes it (with mode 0755 parents) when `use` is create. Returns its absolute path. Throws
 * INVALID_ARGUMENT for an empty path, one under /proc or /sys, one through a file or a symlink loop,
 * or one that is not a directory; PERMISSION_DENIED when it (or, to create it, its nearest existing
 * parent) cannot be written or read, or is on a read-only filesystem; `missingCode` (NOT_FOUND by
 * default) when it must exist and does not.
 * @example
 * const root = await checkDirectory(flags.root, 'store root', 'create');
 */
export async function checkDirectory(
  path: string,
  what: string,
  use: DirectoryUse,
  missingCode: 'NOT_FOUND' | 'INVALID_ARGUMENT' = 'NOT_FOUND',
): Promise<string> {
  if (path === '') throw new FastpullError('INVALID_ARGUMENT', `the ${what} is an empty path; name a directory`);
  const abs = resolve(path);
  if (!isAbsolute(abs) || abs.split(sep).length > MAX_DEPTH) throw new FastpullError('INVALID_ARGUMENT', `${what} ${path}: too deep a path`);
  const kernel = KERNEL_FILESYSTEMS.find((k) => abs === k || abs.startsWith(`${k}/`));
  if (kernel) throw new FastpullError('INVALID_ARGUMENT', `${what} ${abs}: ${kernel} is a kernel filesystem; choose a directory on disk`);
  // The nearest part of the path that exists, and the parts below it still to make.
  const missing: string[] = [];
  let existing = abs;
  for (;;) {
    const st = await statOf(existing, what, abs);
    if (st) {
      if (!st.isDirectory()) {
        const how = existing === abs ? 'is not a directory' : `goes through ${existing}, which is not a directory`;
        throw new FastpullError('INVALID_ARGUMENT', `${what} ${abs} ${how}`);
      }
      break;
    }
    missing.unshift(existing);
    const up = dirname(existing);
    if (up === existing) break;
    existing = up;
  }
  if (missing.length > 0 && use !== 'create') {
    const hint = missingCode === 'NOT_FOUND' && use === 'read' ? ' (nothing has been pulled there yet?)' : '';
    throw new FastpullError(missingCode, `${what} ${abs} does not exist${hint}`);
  }
  const need = use === 'read' ? constants.R_OK | constants.X_OK : constants.W_OK | constants.X_OK;
  await access(existing, need, what, abs);
  for (const dir of missing) {
    try {
      await fsp.mkdir(dir, { mode: 0o755 });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw fsFailure(e, what, abs, dir);
    }
  }
  return abs;
}

async function statOf(path: string, what: string, abs: string): Promise<import('node:fs').Stats | undefined> {
  try {
    return await fsp.stat(path);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    // ENOTDIR: a part above is a file; the walk up finds it and says which.
    if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
    throw fsFailure(e, what, abs, path);
  }
}

async function access(path: string, mode: number, what: string, abs: string): Promise<void> {
  try {
    await fsp.access(path, mode);
  } catch (e) {
    throw fsFailure(e, what, abs, path);
  }
}

/** A filesystem error on `at` (while checking `abs`) as the error a user can act on. */
function fsFailure(e: unknown, what: string, abs: string, at: string): FastpullError {
  const code = (e as NodeJS.ErrnoException).code;
  const where = at === abs ? `${what} ${abs}` : `${what} ${abs} (at ${at})`;
  switch (code) {
    case 'EACCES':
    case 'EPERM':
      return new FastpullError('PERMISSION_DENIED', `${where}: permission denied; run as a user who may write there, or choose another directory`, {
        cause: e,
      });
    case 'EROFS':
      return new FastpullError('PERMISSION_DENIED', `${where}: on a read-only filesystem`, { cause: e });
    case 'ENOTDIR':
      return new FastpullError('INVALID_ARGUMENT', `${where}: a part of the path is not a directory`, { cause: e });
    case 'ELOOP':
      return new FastpullError('INVALID_ARGUMENT', `${where}: too many levels of symbolic links (a symlink loop)`, { cause: e });
    case 'ENAMETOOLONG':
      return new FastpullError('INVALID_ARGUMENT', `${where}: name too long`, { cause: e });
    case 'ENOSPC':
      return new FastpullError('NO_SPACE', `${where}: no space left on the device`, { cause: e });
    default:
      return new FastpullError('INTERNAL', `${where}: ${(e as Error).message}`, { cause: e });
  }
}
