// A gRPC client of containerd's snapshotter API for tests (what containerd's proxy snapshotter
// sends), and helpers that mount what it answers as containerd's mount.All would.
import { execFileSync } from 'node:child_process';
import { join, relative } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { repoRoot } from './helpers.js';

export interface SnapshotMount {
  type: string;
  source: string;
  target: string;
  options: string[];
}

export interface SnapshotInfo {
  name: string;
  parent: string;
  kind: 'UNKNOWN' | 'VIEW' | 'ACTIVE' | 'COMMITTED';
  createdAt: { seconds: number; nanos: number };
  updatedAt: { seconds: number; nanos: number };
  labels: Record<string, string>;
}

type Labels = Record<string, string>;

/** The ten RPCs, promised; failures reject with the grpc-js ServiceError. */
export interface SnapshotsClient {
  prepare(key: string, parent?: string, labels?: Labels): Promise<SnapshotMount[]>;
  view(key: string, parent?: string, labels?: Labels): Promise<SnapshotMount[]>;
  mounts(key: string): Promise<SnapshotMount[]>;
  commit(name: string, key: string, labels?: Labels): Promise<void>;
  remove(key: string): Promise<void>;
  stat(key: string): Promise<SnapshotInfo>;
  update(info: Partial<SnapshotInfo> & { name: string }, paths?: string[]): Promise<SnapshotInfo>;
  list(filters?: string[]): Promise<SnapshotInfo[]>;
  /** List's answer as it came: one array per message. */
  listMessages(filters?: string[]): Promise<SnapshotInfo[][]>;
  usage(key: string): Promise<{ size: number; inodes: number }>;
  cleanup(): Promise<void>;
  close(): void;
}

/** A client of the snapshotter API at `socket`. */
export function snapshotsClient(socket: string): SnapshotsClient {
  const def = protoLoader.loadSync(['containerd/services/snapshots/v1/snapshots.proto'], {
    keepCase: false,
    longs: Number,
    enums: String,
    defaults: true,
    oneofs: true,
    includeDirs: [join(repoRoot, 'packages', 'daemon', 'proto')],
  });
  const Ctor = grpc.makeGenericClientConstructor(def['containerd.services.snapshots.v1.Snapshots'] as grpc.ServiceDefinition, 'Snapshots');
  // containerd's clients take messages of up to 16 MiB (grpc-js's default is 4 MiB).
  const raw = new Ctor(`unix:${socket}`, grpc.credentials.createInsecure(), { 'grpc.max_receive_message_length': 16 * 1024 * 1024 }) as unknown as Record<
    string,
    (req: unknown, cb: (e: grpc.ServiceError | null, res: unknown) => void) => void
  > & {
    List(req: unknown): grpc.ClientReadableStream<{ info: SnapshotInfo[] }>;
    close(): void;
  };
  const call = <T>(method: string, req: unknown): Promise<T> =>
    new Promise((resolve, reject) => raw[method]!.call(raw, req, (e, res) => (e ? reject(e) : resolve(res as T))));
  const listMessages = (filters: string[] = []): Promise<SnapshotInfo[][]> =>
    new Promise((resolve, reject) => {
      const out: SnapshotInfo[][] = [];
      const stream = raw.List({ filters });
      stream.on('data', (m: { info: SnapshotInfo[] }) => out.push(m.info));
      stream.on('error', reject);
      stream.on('end', () => resolve(out));
    });
  return {
    prepare: async (key, parent = '', labels = {}) => (await call<{ mounts: SnapshotMount[] }>('Prepare', { key, parent, labels })).mounts,
    view: async (key, parent = '', labels = {}) => (await call<{ mounts: SnapshotMount[] }>('View', { key, parent, labels })).mounts,
    mounts: async (key) => (await call<{ mounts: SnapshotMount[] }>('Mounts', { key })).mounts,
    commit: async (name, key, labels = {}) => void (await call('Commit', { name, key, labels })),
    remove: async (key) => void (await call('Remove', { key })),
    stat: async (key) => (await call<{ info: SnapshotInfo }>('Stat', { key })).info,
    update: async (info, paths = []) => (await call<{ info: SnapshotInfo }>('Update', { info, updateMask: { paths } })).info,
    list: async (filters = []) => (await listMessages(filters)).flat(),
    listMessages,
    usage: (key) => call('Usage', { key }),
    cleanup: async () => void (await call('Cleanup', {})),
    close: () => raw.close(),
  };
}

/** The gRPC status name a call failed with (e.g. "NOT_FOUND"), or "OK" when it succeeded. */
export async function statusOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'OK';
  } catch (e) {
    const code = (e as grpc.ServiceError).code;
    if (typeof code !== 'number') throw e;
    return grpc.status[code];
  }
}

/** Mounts a snapshot's mounts at `target` as containerd does (bind mounts by their options, overlays by type). */
export function mountAll(mounts: readonly SnapshotMount[], target: string): void {
  for (const m of mounts) {
    if (m.type === 'bind') {
      execFileSync('mount', ['-o', m.options.join(','), m.source, target], { stdio: 'pipe' });
    } else {
      const { options, cwd } = compactLowerdirs(m.options);
      execFileSync('mount', ['-t', m.type, m.source, '-o', options.join(','), target], { stdio: 'pipe', ...(cwd ? { cwd } : {}) });
    }
  }
}

/**
 * What containerd's mount code does with overlay options longer than a page (the most mount(2)
 * takes): the lower directories named relative to their common parent, and the mount made from
 * there. Shorter options are left as they are.
 */
function compactLowerdirs(options: readonly string[]): { options: readonly string[]; cwd?: string } {
  const at = options.findIndex((o) => o.startsWith('lowerdir='));
  if (at < 0 || options.join(',').length < 4096) return { options };
  const dirs = options[at]!.slice('lowerdir='.length).split(':');
  let common = dirs[0]!.split('/').slice(0, -1);
  for (const d of dirs) {
    const parts = d.split('/');
    let n = 0;
    while (n < common.length && n < parts.length - 1 && common[n] === parts[n]) n++;
    common = common.slice(0, n);
  }
  const cwd = common.join('/');
  if (cwd === '') return { options };
  const compacted = [...options];
  compacted[at] = `lowerdir=${dirs.map((d) => relative(cwd, d)).join(':')}`;
  return { options: compacted, cwd };
}

export function unmount(target: string): void {
  execFileSync('umount', [target], { stdio: 'pipe' });
}

/**
 * Returns once this test has read every line fastpulld logged before the call: a Stat of a key that
 * cannot exist is logged after them (NOT_FOUND, at debug: the daemon must run with
 * `--log-level debug`), and waited for. What a test finds missing from the logs after this was
 * never logged, rather than not read yet.
 */
export async function logsSettled(daemon: { waitLog(fn: (l: Record<string, unknown>) => boolean): Promise<unknown> }, client: SnapshotsClient): Promise<void> {
  const key = `fastpull-test-barrier-${process.hrtime.bigint()}`;
  await client.stat(key).then(
    () => Promise.reject(new Error(`the barrier key ${key} exists`)),
    () => undefined,
  );
  await daemon.waitLog((l) => l.method === 'Snapshots.Stat' && typeof l.err === 'string' && l.err.includes(key));
}
