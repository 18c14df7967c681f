// fastpulld's second gRPC server: containerd's snapshotter API on a unix socket of its own, so that
// containerd can use fastpulld as a proxy snapshotter (`[proxy_plugins.fastpull] type = "snapshot"`).
// It serves the store's containerd snapshot records; stopping it closes the socket and nothing else
// (running containers hold snapshot directories as their lower and upper dirs).
import { promises as fsp } from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { listenUnix } from '../socket.js';
import { grpcServerOptions, type ConnectionLimits, type UnixListener } from '../connections.js';
import { SnapshotRecords, type RecordsStore } from '@fastpull/core/snapshots';
import { snapshotsService } from './proto.js';
import { fastPathHook, type PullForSnapshot, type SignaturePolicyFor } from './fastpath.js';
import { snapshotsHandlers } from './service.js';

/** containerd caps its messages at 16 MiB; so does this server. */
const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

/** What the snapshotter server needs. */
export interface SnapshotterServerOptions {
  /** The unix socket to listen on. */
  readonly socket: string;
  /** Group owning the socket (name or gid), as for the API socket; unset: the daemon's. */
  readonly group?: string;
  /** Connections taken at once and the handshake's deadline, apart from the API socket's. */
  readonly limits: ConnectionLimits;
  /** Milliseconds a connection may run no call before it is closed. */
  readonly idleTimeoutMs: number;
  /** The store whose records it serves. */
  readonly store: RecordsStore;
  readonly log: Logger;
  /**
   * Pulls an image for the fast path (CRI's labelled Prepares: the layer comes from fastpull's own
   * pull, containerd downloads nothing); none: every Prepare takes the normal path.
   */
  readonly pullForSnapshot?: PullForSnapshot;
  /** The signature policy covering an image the fast path pulls (see fastpath.ts); unset: none. */
  readonly signaturePolicy?: SignaturePolicyFor;
}

/** The running snapshotter server. */
export class SnapshotterServer {
  private stopping: Promise<void> | undefined;

  private constructor(
    private readonly server: grpc.Server,
    private readonly listener: UnixListener,
    /** The records it serves (the fast path records layers in them). */
    readonly records: SnapshotRecords,
    private readonly options: SnapshotterServerOptions,
  ) {}

  /** Opens the records (sweeping crash litter), then listens. */
  static async start(options: SnapshotterServerOptions): Promise<SnapshotterServer> {
    const records = await SnapshotRecords.open(options.store);
    const server = new grpc.Server({
      ...grpcServerOptions({ idleTimeoutMs: options.idleTimeoutMs }),
      'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
      'grpc.max_send_message_length': MAX_MESSAGE_BYTES,
    });
    let listener: UnixListener;
    try {
      const prepareHook = options.pullForSnapshot
        ? fastPathHook({
            records,
            snapshots: options.store.snapshots,
            pull: options.pullForSnapshot,
            log: options.log,
            ...(options.signaturePolicy ? { signaturePolicy: options.signaturePolicy } : {}),
          })
        : undefined;
      server.addService(snapshotsService(), snapshotsHandlers({ records, log: options.log, ...(prepareHook ? { prepareHook } : {}) }));
      listener = await listenUnix(server, {
        path: options.socket,
        group: options.group,
        limits: options.limits,
        log: options.log,
        flag: '--snapshotter-socket',
      });
    } catch (e) {
      server.forceShutdown();
      records.close();
      throw e;
    }
    options.log.info(
      {
        snapshotterSocket: options.socket,
        maxConnections: options.limits.maxConnections,
        snapshots: records.list().length,
        fastPath: options.pullForSnapshot !== undefined,
      },
      'serving the containerd snapshotter API',
    );
    return new SnapshotterServer(server, listener, records, options);
  }

  /**
   * Stops taking calls (those running may finish within `timeoutMs`), removes the socket and lets
   * go of the records. Snapshot directories are left as they are.
   */
  stop(timeoutMs: number): Promise<void> {
    this.stopping ??= (async () => {
      let timer: NodeJS.Timeout | undefined;
      this.listener.close();
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
