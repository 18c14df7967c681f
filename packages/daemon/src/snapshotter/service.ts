// The handlers of containerd.services.snapshots.v1.Snapshots: a thin adapter from containerd's wire
// messages onto the store's containerd snapshot records (SnapshotRecords in @fastpull/core). Errors
// go out as the gRPC codes containerd maps back (NOT_FOUND, ALREADY_EXISTS, FAILED_PRECONDITION,
// INVALID_ARGUMENT), through the daemon's one error mapping.
import type * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { FastpullError, isFastpullError, type Mount } from '@fastpull/core';
import type { SnapshotRecordInfo, SnapshotRecords } from '@fastpull/core/snapshots';
import { toStatus } from '../errors.js';
import type {
  WireCommitRequest,
  WireInfo,
  WireKeyRequest,
  WireKind,
  WireListRequest,
  WireMount,
  WirePrepareRequest,
  WireTimestamp,
  WireUpdateRequest,
} from './proto.js';

/** Infos per List message at most, as containerd's own service sends them. */
const LIST_BATCH = 100;
/**
 * Bytes of infos per List message at most (one info larger than this goes alone): far below the
 * 16 MiB containerd takes in one message, whatever the keys and labels.
 */
export const LIST_MESSAGE_BYTES = 1024 * 1024;

/**
 * A Prepare that may be answered without mounts: the fast path looks at the request first and
 * either records the layer (then containerd is told ALREADY_EXISTS) or lets the normal path run.
 */
export type PrepareHook = (req: {
  key: string;
  parent: string | undefined;
  labels: Readonly<Record<string, string>>;
  signal: AbortSignal;
}) => Promise<'handled' | 'normal'>;

/** What the handlers need. */
export interface SnapshotsServiceOptions {
  readonly records: SnapshotRecords;
  readonly log: Logger;
  /** The fast path; none: every Prepare takes the normal path. */
  readonly prepareHook?: PrepareHook;
}

const KIND: Readonly<Record<SnapshotRecordInfo['kind'], WireKind>> = { active: 'ACTIVE', view: 'VIEW', committed: 'COMMITTED' };

/** An RFC 3339 time with up to nanoseconds as a protobuf Timestamp. */
export function toTimestamp(time: string): WireTimestamp {
  const m = /^(.*T\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?Z$/.exec(time);
  const seconds = Math.floor(Date.parse(`${m ? m[1] : time}Z`) / 1000);
  return { seconds: Number.isFinite(seconds) ? seconds : 0, nanos: m?.[2] ? Number(m[2].padEnd(9, '0')) : 0 };
}

/** A snapshot's info as containerd's Info message. */
export function infoToWire(info: SnapshotRecordInfo): WireInfo {
  return {
    name: info.name,
    parent: info.parent ?? '',
    kind: KIND[info.kind],
    createdAt: toTimestamp(info.created),
    updatedAt: toTimestamp(info.updated),
    // Without a prototype: a label may be named `__proto__`.
    labels: Object.assign(Object.create(null) as Record<string, string>, info.labels),
  };
}

/** About the bytes an info takes in a message: its strings, and a few for each field's framing. */
function wireSize(info: WireInfo): number {
  let size = Buffer.byteLength(info.name) + Buffer.byteLength(info.parent) + 64;
  for (const [k, v] of Object.entries(info.labels)) size += Buffer.byteLength(k) + Buffer.byteLength(v) + 16;
  return size;
}

/** Infos cut into List messages of at most {@link LIST_BATCH} infos and {@link LIST_MESSAGE_BYTES} bytes. */
export function listMessages(infos: readonly WireInfo[]): WireInfo[][] {
  const out: WireInfo[][] = [];
  let batch: WireInfo[] = [];
  let bytes = 0;
  for (const info of infos) {
    const size = wireSize(info);
    if (batch.length > 0 && (batch.length === LIST_BATCH || bytes + size > LIST_MESSAGE_BYTES)) {
      out.push(batch);
      batch = [];
      bytes = 0;
    }
    batch.push(info);
    bytes += size;
  }
  if (batch.length > 0) out.push(batch);
  return out;
}

function mountsToWire(mounts: readonly Mount[]): { mounts: WireMount[] } {
  return { mounts: mounts.map((m) => ({ type: m.type, source: m.source, target: '', options: [...m.options] })) };
}

/**
 * The Prepare handler: the fast path (`hook`) looks at the request first; else a new active
 * snapshot's mounts. containerd cancels a Prepare when its pull is cancelled: the fast path stops
 * waiting then.
 */
function prepareHandler(
  records: SnapshotRecords,
  hook: PrepareHook | undefined,
  fail: (method: string, e: unknown) => void,
): grpc.handleUnaryCall<WirePrepareRequest, unknown> {
  return (call: grpc.ServerUnaryCall<WirePrepareRequest, unknown>, callback: grpc.sendUnaryData<unknown>): void => {
    const req = call.request;
    const parent = req.parent || undefined;
    const labels = req.labels ?? {};
    // grpc-js also says 'cancelled' once a finished call closes: only a call not yet answered counts.
    const cancelled = new AbortController();
    let answered = false;
    call.on('cancelled', () => {
      if (!answered) cancelled.abort();
    });
    (async () => {
      if (hook && (await hook({ key: req.key, parent, labels, signal: cancelled.signal })) === 'handled') {
        // The layer is recorded as a committed snapshot carrying the target label: containerd finds it.
        throw new FastpullError('ALREADY_EXISTS', `snapshot ${labels['containerd.io/snapshot.ref'] ?? req.key} is already in the store`);
      }
      return mountsToWire(await records.prepare(req.key, parent, labels));
    })().then(
      (res) => {
        answered = true;
        callback(null, res);
      },
      (e: unknown) => {
        answered = true;
        fail('Prepare', e);
        callback(toStatus(e));
      },
    );
  };
}

/** The handler map for grpc.Server.addService. */
export function snapshotsHandlers(options: SnapshotsServiceOptions): grpc.UntypedServiceImplementation {
  const { records, log, prepareHook } = options;
  const fail = (method: string, e: unknown): void => {
    const code = isFastpullError(e) ? e.code : 'INTERNAL';
    // NOT_FOUND (Stat of a layer not there yet) and ALREADY_EXISTS (the fast path's answer) are
    // containerd's everyday questions, not failures.
    const level = code === 'INTERNAL' ? 'error' : code === 'NOT_FOUND' || code === 'ALREADY_EXISTS' ? 'debug' : 'info';
    log[level]({ method: `Snapshots.${method}`, code, err: e instanceof Error ? e.message : String(e) }, 'snapshotter request failed');
  };
  const unary =
    <Req, Res>(method: string, fn: (req: Req) => Res | Promise<Res>) =>
    (call: grpc.ServerUnaryCall<Req, Res>, callback: grpc.sendUnaryData<Res>): void => {
      Promise.resolve()
        .then(() => fn(call.request))
        .then(
          (res) => callback(null, res),
          (e: unknown) => {
            fail(method, e);
            callback(toStatus(e));
          },
        );
    };
  return {
    Prepare: prepareHandler(records, prepareHook, fail),
    View: unary('View', async (req: WirePrepareRequest) => mountsToWire(await records.view(req.key, req.parent || undefined, req.labels ?? {}))),
    Mounts: unary('Mounts', (req: WireKeyRequest) => mountsToWire(records.mounts(req.key))),
    Commit: unary('Commit', async (req: WireCommitRequest) => {
      await records.commit(req.name, req.key, req.labels ?? {});
      return {};
    }),
    Remove: unary('Remove', async (req: WireKeyRequest) => {
      await records.remove(req.key);
      return {};
    }),
    Stat: unary('Stat', (req: WireKeyRequest) => ({ info: infoToWire(records.stat(req.key)) })),
    Update: unary('Update', async (req: WireUpdateRequest) => {
      const info = req.info ?? { name: '', labels: {} };
      return { info: infoToWire(await records.update({ name: info.name, labels: info.labels ?? {} }, req.updateMask?.paths ?? [])) };
    }),
    List: (call: grpc.ServerWritableStream<WireListRequest, unknown>) => {
      const cancelled = new AbortController();
      call.on('cancelled', () => cancelled.abort());
      records.listYielding(call.request.filters ?? [], cancelled.signal).then(
        (found) => {
          for (const info of listMessages(found.map(infoToWire))) call.write({ info });
          call.end();
        },
        (e: unknown) => {
          if (cancelled.signal.aborted) return;
          fail('List', e);
          call.emit('error', toStatus(e));
        },
      );
    },
    Usage: unary('Usage', async (req: WireKeyRequest) => records.usage(req.key)),
    Cleanup: unary('Cleanup', async () => {
      const removed = await records.cleanup();
      if (removed.length > 0) log.info({ removed }, 'snapshotter cleanup removed directories no record owns');
      return {};
    }),
  };
}
