// fastpulld's second gRPC server: containerd's snapshotter API on a unix socket of its own, so that
// containerd can use fastpulld as a proxy snapshotter (`[proxy_plugins.fastpull] type = "snapshot"`).
// It serves the store's containerd snapshot records; stopping it closes the socket and nothing else
// (running containers hold snapshot directories as their lower and upper dirs).
import { promises as fsp, readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { dirname } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { checkDirectory, FastpullError } from '@fastpull/core';
import { SnapshotRecords, type RecordsStore } from '@fastpull/core/snapshots';
import { snapshotsService } from './proto.js';
import { fastPathHook, type PullForSnapshot } from './fastpath.js';
import { snapshotsHandlers } from './service.js';

/** containerd caps its messages at 16 MiB; so does this server. */
const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

/** What the snapshotter server needs. */
export interface SnapshotterServerOptions {
  /** The unix socket to listen on. */
  readonly socket: string;
  /** Group owning the socket (name or gid), as for the API socket; unset: the daemon's. */
  readonly group?: string;
  /** The store whose records it serves. */
  readonly store: RecordsStore;
  readonly log: Logger;
  /**
   * Pulls an image for the fast path (CRI's labelled Prepares: the layer comes from fastpull's own
   * pull, containerd downloads nothing); none: every Prepare takes the normal path.
   */
  readonly pullForSnapshot?: PullForSnapshot;
}

/** The running snapshotter server. */
export class SnapshotterServer {
  private stopping: Promise<void> | undefined;

  private constructor(
    private readonly server: grpc.Server,
    /** The records it serves (the fast path records layers in them). */
    readonly records: SnapshotRecords,
    private readonly options: SnapshotterServerOptions,
  ) {}

  /** Opens the records (sweeping crash litter), then listens. */
  static async start(options: SnapshotterServerOptions): Promise<SnapshotterServer> {
    const records = await SnapshotRecords.open(options.store);
    const server = new grpc.Server({ 'grpc.max_receive_message_length': MAX_MESSAGE_BYTES, 'grpc.max_send_message_length': MAX_MESSAGE_BYTES });
    try {
      const prepareHook = options.pullForSnapshot ? fastPathHook({ records, snapshots: options.store.snapshots, pull: options.pullForSnapshot, log: options.log }) : undefined;
      server.addService(snapshotsService(), snapshotsHandlers({ records, log: options.log, ...(prepareHook ? { prepareHook } : {}) }));
      await listenUnix(server, options.socket, options.group);
    } catch (e) {
      server.forceShutdown();
      records.close();
      throw e;
    }
    options.log.info({ snapshotterSocket: options.socket, snapshots: records.list().length, fastPath: options.pullForSnapshot !== undefined }, 'serving the containerd snapshotter API');
    return new SnapshotterServer(server, records, options);
  }

  /**
   * Stops taking calls (those running may finish within `timeoutMs`), removes the socket and lets
   * go of the records. Snapshot directories are left as they are.
   */
  stop(timeoutMs: number): Promise<void> {
    this.stopping ??= (async () => {
      let timer: NodeJS.Timeout | undefined;
      const drained = new Promise<'drained'>((resolve) => this.server.tryShutdown(() => resolve('drained')));
      const deadline = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), timeoutMs)));
      if ((await Promise.race([drained, deadline])) === 'timeout') this.server.forceShutdown();
      clearTimeout(timer);
      await fsp.rm(this.options.socket, { force: true });
      this.records.close();
    })();
    return this.stopping;
  }
}

/**
 * Binds `server` to a unix socket as fastpulld binds its API socket: a stale socket file (nobody
 * answers) is replaced, a live one or any other file is an error; mode 0660 from the first moment,
 * then given to `group`.
 */
async function listenUnix(server: grpc.Server, socket: string, group: string | undefined): Promise<void> {
  await checkDirectory(dirname(socket), 'snapshotter socket directory', 'create');
  const st = await fsp.lstat(socket).catch((e: NodeJS.ErrnoException) => {
    if (e.code === 'ENOENT') return undefined;
    throw e;
  });
  if (st && !st.isSocket()) throw new FastpullError('INVALID_ARGUMENT', `${socket} exists and is not a socket; not replacing it`);
  if (st) {
    const answered = await new Promise<boolean>((resolve) => {
      const s = connect(socket);
      s.once('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (answered) throw new FastpullError('INVALID_ARGUMENT', `another process is serving on ${socket}; stop it first or choose another --snapshotter-socket`);
    await fsp.rm(socket, { force: true });
  }
  const umask = process.umask(0o117);
  try {
    await new Promise<void>((resolve, reject) => server.bindAsync(`unix:${socket}`, grpc.ServerCredentials.createInsecure(), (e) => (e ? reject(e) : resolve())));
  } catch (e) {
    throw new FastpullError('INTERNAL', `listening on ${socket}: ${(e as Error).message}`, { cause: e });
  } finally {
    process.umask(umask);
  }
  await fsp.chmod(socket, 0o660);
  if (group === undefined) return;
  try {
    await fsp.chown(socket, process.getuid?.() ?? -1, groupId(group));
  } catch (e) {
    if (e instanceof FastpullError) throw e;
    throw new FastpullError('PERMISSION_DENIED', `giving ${socket} to group ${group}: ${(e as Error).message}`, { cause: e });
  }
}

/** A group name or numeric id as a gid (from /etc/group). */
function groupId(group: string): number {
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
  throw new FastpullError('INVALID_ARGUMENT', `group ${JSON.stringify(group)} does not exist`);
}
