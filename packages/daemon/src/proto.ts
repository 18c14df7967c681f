// Loads the .proto files at run time and names the wire shapes of fastpull.v1, generated from the
// .proto, as @grpc/proto-loader presents them: camelCase fields, int64 as number, enums as their names.
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import type { BlobInfo__Output } from './generated/fastpull/v1/BlobInfo.js';
import type { ContentClient, ContentHandlers } from './generated/fastpull/v1/Content.js';
import type { DeleteContentRequest__Output } from './generated/fastpull/v1/DeleteContentRequest.js';
import type { DeleteContentResponse__Output } from './generated/fastpull/v1/DeleteContentResponse.js';
import type { Descriptor__Output } from './generated/fastpull/v1/Descriptor.js';
import type { GarbageCollectRequest__Output } from './generated/fastpull/v1/GarbageCollectRequest.js';
import type { GarbageCollectResponse__Output } from './generated/fastpull/v1/GarbageCollectResponse.js';
import type { GetImageRequest__Output } from './generated/fastpull/v1/GetImageRequest.js';
import type { GetImageResponse__Output } from './generated/fastpull/v1/GetImageResponse.js';
import type { ImageSignatures__Output } from './generated/fastpull/v1/ImageSignatures.js';
import type { Image__Output } from './generated/fastpull/v1/Image.js';
import type { ImageLayer__Output } from './generated/fastpull/v1/ImageLayer.js';
import type { ImagesClient, ImagesHandlers } from './generated/fastpull/v1/Images.js';
import type { InfoRequest__Output } from './generated/fastpull/v1/InfoRequest.js';
import type { InfoResponse__Output } from './generated/fastpull/v1/InfoResponse.js';
import type { LayerProgress__Output } from './generated/fastpull/v1/LayerProgress.js';
import type { LayerState__Output } from './generated/fastpull/v1/LayerState.js';
import type { PullPriority__Output } from './generated/fastpull/v1/PullPriority.js';
import type { LayerTimings__Output } from './generated/fastpull/v1/LayerTimings.js';
import type { ListContentRequest__Output } from './generated/fastpull/v1/ListContentRequest.js';
import type { ListContentResponse__Output } from './generated/fastpull/v1/ListContentResponse.js';
import type { ListImagesRequest__Output } from './generated/fastpull/v1/ListImagesRequest.js';
import type { ListImagesResponse__Output } from './generated/fastpull/v1/ListImagesResponse.js';
import type { ListSnapshotsRequest__Output } from './generated/fastpull/v1/ListSnapshotsRequest.js';
import type { ListSnapshotsResponse__Output } from './generated/fastpull/v1/ListSnapshotsResponse.js';
import type { Mount__Output } from './generated/fastpull/v1/Mount.js';
import type { MountsRequest__Output } from './generated/fastpull/v1/MountsRequest.js';
import type { MountsResponse__Output } from './generated/fastpull/v1/MountsResponse.js';
import type { PhaseTotals__Output } from './generated/fastpull/v1/PhaseTotals.js';
import type { Platform__Output } from './generated/fastpull/v1/Platform.js';
import type { PullDone__Output } from './generated/fastpull/v1/PullDone.js';
import type { PullRequest__Output } from './generated/fastpull/v1/PullRequest.js';
import type { PullResponse__Output } from './generated/fastpull/v1/PullResponse.js';
import type { PullTimings__Output } from './generated/fastpull/v1/PullTimings.js';
import type { RemoveImageRequest__Output } from './generated/fastpull/v1/RemoveImageRequest.js';
import type { RemoveImageResponse__Output } from './generated/fastpull/v1/RemoveImageResponse.js';
import type { Resolved__Output } from './generated/fastpull/v1/Resolved.js';
import type { SnapshotInfo__Output } from './generated/fastpull/v1/SnapshotInfo.js';
import type { SnapshotsClient, SnapshotsHandlers } from './generated/fastpull/v1/Snapshots.js';
import type { UsageRequest__Output } from './generated/fastpull/v1/UsageRequest.js';
import type { UsageResponse__Output } from './generated/fastpull/v1/UsageResponse.js';

/** The directory holding fastpull/v1/fastpull.proto and grpc/health/v1/health.proto (src and dist alike sit beside it). */
export const PROTO_DIR = fileURLToPath(new URL('../proto', import.meta.url));
export const FASTPULL_PROTO = 'fastpull/v1/fastpull.proto';
export const HEALTH_PROTO = 'grpc/health/v1/health.proto';

/** The fully qualified names of the services fastpulld serves (health and reflection aside). */
export const SERVICE_NAMES = ['fastpull.v1.Images', 'fastpull.v1.Snapshots', 'fastpull.v1.Content'] as const;

/** How both server and client turn messages into objects: the same options on both ends, every API. */
export const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: false,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [PROTO_DIR],
};

let cached: protoLoader.PackageDefinition | undefined;

/** fastpull.v1 and grpc.health.v1, loaded once. */
export function packageDefinition(): protoLoader.PackageDefinition {
  cached ??= protoLoader.loadSync([FASTPULL_PROTO, HEALTH_PROTO], LOADER_OPTIONS);
  return cached;
}

/** The service definition of `name` (e.g. "fastpull.v1.Images"). */
export function serviceDefinition(name: string): grpc.ServiceDefinition {
  const def = packageDefinition()[name];
  // Message and enum types carry a `format`; a service is a map of its methods.
  if (!def || 'format' in def) throw new Error(`no service ${name} in the loaded protos`);
  return def;
}

// ---- Wire shapes: the types generated from fastpull.proto (src/generated, by scripts/gen-proto.mjs),
// as the loader options above present messages: every field present, camelCase, int64 as number,
// enums as names. A message sent is built to the same full shape.

export type WirePlatform = Platform__Output;
export type WireDescriptor = Descriptor__Output;
export type WireImageLayer = ImageLayer__Output;
/** `unpackedSize` 0: not known. */
export type WireImage = Image__Output;
export type WireImageSignatures = ImageSignatures__Output;
export type WireMount = Mount__Output;
export type WirePullRequest = PullRequest__Output;
export type WireLayerState = LayerState__Output;
export type WirePullPriority = PullPriority__Output;
export type WireResolved = Resolved__Output;
export type WireLayerProgress = LayerProgress__Output;
export type WireLayerTimings = LayerTimings__Output;
export type WirePhaseTotals = PhaseTotals__Output;
export type WirePullTimings = PullTimings__Output;
export type WirePullDone = PullDone__Output;
export type WirePullResponse = PullResponse__Output;
export type WireGetImageResponse = GetImageResponse__Output;
export type WireBlobInfo = BlobInfo__Output;
export type WireGcResponse = GarbageCollectResponse__Output;
export type WireSnapshotInfo = SnapshotInfo__Output;
export type WireMountsRequest = MountsRequest__Output;
export type WireListImagesRequest = ListImagesRequest__Output;
export type WireListImagesResponse = ListImagesResponse__Output;
export type WireGetImageRequest = GetImageRequest__Output;
export type WireRemoveImageRequest = RemoveImageRequest__Output;
export type WireRemoveImageResponse = RemoveImageResponse__Output;
export type WireMountsResponse = MountsResponse__Output;
export type WireListSnapshotsRequest = ListSnapshotsRequest__Output;
export type WireListSnapshotsResponse = ListSnapshotsResponse__Output;
export type WireUsageRequest = UsageRequest__Output;
export type WireUsageResponse = UsageResponse__Output;
export type WireInfoRequest = InfoRequest__Output;
export type WireInfoResponse = InfoResponse__Output;
export type WireListContentRequest = ListContentRequest__Output;
export type WireListContentResponse = ListContentResponse__Output;
export type WireDeleteContentRequest = DeleteContentRequest__Output;
export type WireDeleteContentResponse = DeleteContentResponse__Output;
export type WireGcRequest = GarbageCollectRequest__Output;

// The generated service types: the server implements the handlers, the client calls through the clients.
export type { ContentClient, ContentHandlers, ImagesClient, ImagesHandlers, SnapshotsClient, SnapshotsHandlers };
