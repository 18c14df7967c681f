// Writable mounts over fastpull.v1 Snapshots: the records between the library's shape and the wire's,
// and the server's handlers of CreateWritableMount, ListWritableMounts and RemoveWritableMount.
import { isAbsolute } from 'node:path';
import type { Logger } from 'pino';
import {
  FastpullError,
  formatPlatform,
  parsePlatform,
  parseReference,
  type Digest,
  type FastpullService,
  type MountRecord,
  type WritableMount,
} from '@fastpull/core';
import { mountFromWire, mountToWire } from './convert.js';
import type { CreateWritableMountRequest__Output } from './generated/fastpull/v1/CreateWritableMountRequest.js';
import type { CreateWritableMountResponse__Output } from './generated/fastpull/v1/CreateWritableMountResponse.js';
import type { ListWritableMountsRequest__Output } from './generated/fastpull/v1/ListWritableMountsRequest.js';
import type { ListWritableMountsResponse__Output } from './generated/fastpull/v1/ListWritableMountsResponse.js';
import type { RemoveWritableMountRequest__Output } from './generated/fastpull/v1/RemoveWritableMountRequest.js';
import type { RemoveWritableMountResponse__Output } from './generated/fastpull/v1/RemoveWritableMountResponse.js';
import type { WritableMountRecord__Output } from './generated/fastpull/v1/WritableMountRecord.js';
import type { SnapshotsHandlers } from './proto.js';
import { unary } from './unary.js';

export type WireWritableMountRecord = WritableMountRecord__Output;
export type WireCreateWritableMountRequest = CreateWritableMountRequest__Output;
export type WireCreateWritableMountResponse = CreateWritableMountResponse__Output;
export type WireListWritableMountsRequest = ListWritableMountsRequest__Output;
export type WireListWritableMountsResponse = ListWritableMountsResponse__Output;
export type WireRemoveWritableMountRequest = RemoveWritableMountRequest__Output;
export type WireRemoveWritableMountResponse = RemoveWritableMountResponse__Output;

export function mountRecordToWire(r: MountRecord): WireWritableMountRecord {
  return { id: r.id, image: r.image, manifest: r.manifest, snapshots: [...r.snapshots], target: r.target, upper: r.upper, work: r.work, created: r.created };
}

export function mountRecordFromWire(r: WireWritableMountRecord | null | undefined): MountRecord {
  if (!r) throw new FastpullError('INTERNAL', 'the daemon sent no writable mount record');
  return {
    id: r.id,
    image: r.image,
    manifest: r.manifest,
    snapshots: r.snapshots as Digest[],
    target: r.target,
    upper: r.upper,
    work: r.work,
    created: r.created,
  };
}

export function writableMountFromWire(r: WireCreateWritableMountResponse): WritableMount {
  if (!r.mount) throw new FastpullError('INTERNAL', 'the daemon sent no mount with the writable mount record');
  return { record: mountRecordFromWire(r.record), mount: mountFromWire(r.mount) };
}

/** The writable-mount methods of the Snapshots service, over `service`. */
export function writableMountHandlers(
  service: FastpullService,
  log: Logger,
): Pick<SnapshotsHandlers, 'CreateWritableMount' | 'ListWritableMounts' | 'RemoveWritableMount'> {
  return {
    CreateWritableMount: unary<WireCreateWritableMountRequest, WireCreateWritableMountResponse>(log, 'Snapshots.CreateWritableMount', async (req) => {
      if (!req.image) throw new FastpullError('INVALID_REFERENCE', 'create writable mount: the request names no image');
      parseReference(req.image);
      if (!req.target || !isAbsolute(req.target))
        throw new FastpullError('INVALID_ARGUMENT', `create writable mount: the mount point must be an absolute path, not "${req.target}"`);
      const platform = req.platform ? formatPlatform(parsePlatform(req.platform)) : undefined;
      const { record, mount } = await service.createWritableMount({ image: req.image, ...(platform ? { platform } : {}) }, req.target);
      log.info({ image: record.image, target: record.target, id: record.id }, 'writable mount recorded');
      return { record: mountRecordToWire(record), mount: mountToWire(mount) };
    }),
    ListWritableMounts: unary<WireListWritableMountsRequest, WireListWritableMountsResponse>(log, 'Snapshots.ListWritableMounts', async () => ({
      mounts: (await service.listWritableMounts()).map(mountRecordToWire),
    })),
    RemoveWritableMount: unary<WireRemoveWritableMountRequest, WireRemoveWritableMountResponse>(log, 'Snapshots.RemoveWritableMount', async (req) => {
      if (!req.id) throw new FastpullError('INVALID_ARGUMENT', 'remove writable mount: the request names no id');
      const record = await service.removeWritableMount(req.id);
      log.info({ image: record.image, target: record.target, id: record.id }, 'writable mount removed');
      return { record: mountRecordToWire(record) };
    }),
  };
}
