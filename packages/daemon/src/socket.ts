// The unix sockets fastpulld listens on (its API and containerd's snapshotter API), made the same way:
// a stale socket replaced, a live one or any other file refused, mode 0660 from the first moment, then
// given to the configured group; a directory missing above one made with mode 0755.
import { lstatSync, promises as fsp, readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { dirname } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { checkDirectory, FastpullError } from '@fastpull/core';
import { listenConnections, type ConnectionLimits, type UnixListener } from './connections.js';

/**
 * Makes `path` free to listen on: a socket file nobody answers on (a daemon that crashed) is removed;
 * a live one means another daemon serves there, which is an error, as is any file that is not a
 * socket. `flag` names the setting in messages (e.g. `--socket`).
 */
export async function prepareSocket(path: string, flag = '--socket'): Promise<void> {
  const made = missingDirectories(path);
  await checkDirectory(dirname(path), 'socket directory', 'create');
  // Whatever the umask: members of the sockets' group must be able to reach them (as systemd's
  // RuntimeDirectoryMode=0755 for /run/fastpull).
  for (const dir of made) await fsp.chmod(dir, 0o755);
  let st;
  try {
    st = await fsp.lstat(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw e;
  }
  if (!st.isSocket()) throw new FastpullError('INVALID_ARGUMENT', `${path} exists and is not a socket; not replacing it`);
  const answered = (await connectError(path)) === undefined;
  if (answered) throw new FastpullError('INVALID_ARGUMENT', `another process is serving on ${path}; stop it first or choose another ${flag}`);
  await fsp.rm(path, { force: true });
}

/**
 * Connects to the unix socket `path` and hangs up: undefined when something accepted the
 * connection, else why not (the error's message, or no answer within `timeoutMs`).
 */
export function connectError(path: string, timeoutMs?: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    const s = connect(path);
    if (timeoutMs !== undefined) {
      s.setTimeout(timeoutMs, () => {
        s.destroy();
        resolve(`no connection within ${timeoutMs} ms`);
      });
    }
    s.once('connect', () => {
      s.destroy();
      resolve(undefined);
    });
    s.once('error', (e) => resolve(e.message));
  });
}

/** Where and how a gRPC server listens: its socket, the group it is given to, its connection bounds. */
export interface UnixSocketOptions {
  readonly path: string;
  readonly group: string | undefined;
  readonly limits: ConnectionLimits;
  readonly log: Logger;
  /** The setting that names the socket, for messages (e.g. `--socket`). */
  readonly flag: string;
}

/**
 * Has `server` take connections on the unix socket `path` (prepared with {@link prepareSocket}), mode
 * 0660, owned by `group`, within the connection bounds of `limits` (connections.ts).
 */
export async function listenUnix(server: grpc.Server, o: UnixSocketOptions): Promise<UnixListener> {
  const { path, group } = o;
  await prepareSocket(path, o.flag);
  // The socket file takes its mode from the umask at bind(): 0660 from its first moment, so nobody
  // outside the group can connect in the window before the chmod.
  const umask = process.umask(0o117);
  let listener: UnixListener;
  try {
    listener = await listenConnections(server, path, o.limits, o.log, o.flag);
  } catch (e) {
    throw new FastpullError('INTERNAL', `listening on ${path}: ${(e as Error).message}`, { cause: e });
  } finally {
    process.umask(umask);
  }
  try {
    await fsp.chmod(path, 0o660);
    if (group === undefined) return listener;
    const gid = groupId(group);
    try {
      await fsp.chown(path, process.getuid?.() ?? -1, gid);
    } catch (e) {
      throw new FastpullError('PERMISSION_DENIED', `giving ${path} to group ${group}: ${(e as Error).message}`, { cause: e });
    }
    return listener;
  } catch (e) {
    // Bound by this call: a socket left here would look like a daemon that crashed.
    listener.close();
    await fsp.rm(path, { force: true });
    throw e;
  }
}

/**
 * The directories above the socket `path` that do not exist yet, outermost first: those that making
 * its directory creates, and that a failed start takes away again.
 */
export function missingDirectories(path: string): string[] {
  const missing: string[] = [];
  for (let dir = dirname(path); dirname(dir) !== dir; dir = dirname(dir)) {
    try {
      lstatSync(dir);
      break;
    } catch (e) {
      // Anything but "not there" is for checkDirectory to report.
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') break;
      missing.unshift(dir);
    }
  }
  return missing;
}

/** A group name or numeric id as a gid (from /etc/group). */
export function groupId(group: string): number {
  if (/^\d+$/.test(group)) return Number(group);
  let text = '';
  try {
    text = readFileSync('/etc/group', 'utf8');
  } catch {
    // No group database: only numeric ids work.
  }
  for (const line of text.split('\n')) {
    const [name, , gid] = line.split(':');
    if (name === group && gid !== undefined && /^\d+$/.test(gid)) return Number(gid);
  }
  throw new FastpullError(
    'INVALID_ARGUMENT',
    `group ${JSON.stringify(group)} does not exist: create it (groupadd --system ${group}), or drop --group (the config file's \`group\`) to leave the sockets to fastpulld's own group`,
  );
}
