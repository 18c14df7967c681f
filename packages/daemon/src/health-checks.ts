// Which checks fastpulld's health rests on, and what each asks: its sockets take connections, its
// store takes writes and has room, and containerd's snapshot records can be answered. health.ts
// runs them; the server hands the result to gRPC health and /readyz.
import type { DaemonConfig } from './config.js';
import { diskFree, storeWritable, type Check, type CheckName, type HealthMonitorOptions } from './health.js';
import { SERVICE_NAMES } from './proto.js';
import { connectError } from './socket.js';
import { SNAPSHOTS_SERVICE } from './snapshotter/proto.js';
import type { SnapshotterServer } from './snapshotter/server.js';

/** A socket of its own process that takes no connection in this long is as good as gone to a prober. */
const PROBE_CONNECT_TIMEOUT_MS = 2000;
/** What fastpull's own services need; containerd's snapshotter API needs its records as well. */
const API_CHECKS: readonly CheckName[] = ['api_socket', 'store_writable', 'disk_free'];
const SNAPSHOTTER_CHECKS: readonly CheckName[] = ['snapshotter_socket', 'store_writable', 'disk_free', 'snapshot_records'];

/** The checks and the services that rest on them, for a daemon with `config` (and its snapshotter, if it serves one). */
export function daemonChecks(
  config: DaemonConfig,
  snapshotter: SnapshotterServer | undefined,
  onDiskSpace: Parameters<typeof diskFree>[2],
): Pick<HealthMonitorOptions, 'checks' | 'services'> {
  const socketCheck =
    (what: string, path: string): Check =>
    async () => {
      const why = await connectError(path, PROBE_CONNECT_TIMEOUT_MS);
      return why === undefined ? undefined : `${what} ${path} takes no connection: ${why}`;
    };
  const records =
    (s: SnapshotterServer): Check =>
    () =>
      s.records.check().then(
        () => undefined,
        (e: unknown) => `containerd's snapshots cannot be answered: ${e instanceof Error ? e.message : String(e)}`,
      );
  return {
    checks: {
      api_socket: socketCheck('API socket', config.socket),
      store_writable: storeWritable(config.root),
      disk_free: diskFree(config.root, config.minFreeSpace, onDiskSpace),
      ...(snapshotter && config.snapshotterSocket
        ? { snapshotter_socket: socketCheck('snapshotter socket', config.snapshotterSocket), snapshot_records: records(snapshotter) }
        : {}),
    },
    services: { ...Object.fromEntries(SERVICE_NAMES.map((s) => [s, API_CHECKS])), ...(snapshotter ? { [SNAPSHOTS_SERVICE]: SNAPSHOTTER_CHECKS } : {}) },
  };
}
