import type * as grpc from '@grpc/grpc-js';
import type { EnumTypeDefinition, MessageTypeDefinition } from '@grpc/proto-loader';

import type { BlobInfo as _fastpull_v1_BlobInfo, BlobInfo__Output as _fastpull_v1_BlobInfo__Output } from './fastpull/v1/BlobInfo.js';
import type { ContentClient as _fastpull_v1_ContentClient, ContentDefinition as _fastpull_v1_ContentDefinition } from './fastpull/v1/Content.js';
import type { Count as _fastpull_v1_Count, Count__Output as _fastpull_v1_Count__Output } from './fastpull/v1/Count.js';
import type { CreateWritableMountRequest as _fastpull_v1_CreateWritableMountRequest, CreateWritableMountRequest__Output as _fastpull_v1_CreateWritableMountRequest__Output } from './fastpull/v1/CreateWritableMountRequest.js';
import type { CreateWritableMountResponse as _fastpull_v1_CreateWritableMountResponse, CreateWritableMountResponse__Output as _fastpull_v1_CreateWritableMountResponse__Output } from './fastpull/v1/CreateWritableMountResponse.js';
import type { Credentials as _fastpull_v1_Credentials, Credentials__Output as _fastpull_v1_Credentials__Output } from './fastpull/v1/Credentials.js';
import type { DeleteContentRequest as _fastpull_v1_DeleteContentRequest, DeleteContentRequest__Output as _fastpull_v1_DeleteContentRequest__Output } from './fastpull/v1/DeleteContentRequest.js';
import type { DeleteContentResponse as _fastpull_v1_DeleteContentResponse, DeleteContentResponse__Output as _fastpull_v1_DeleteContentResponse__Output } from './fastpull/v1/DeleteContentResponse.js';
import type { Descriptor as _fastpull_v1_Descriptor, Descriptor__Output as _fastpull_v1_Descriptor__Output } from './fastpull/v1/Descriptor.js';
import type { GarbageCollectRequest as _fastpull_v1_GarbageCollectRequest, GarbageCollectRequest__Output as _fastpull_v1_GarbageCollectRequest__Output } from './fastpull/v1/GarbageCollectRequest.js';
import type { GarbageCollectResponse as _fastpull_v1_GarbageCollectResponse, GarbageCollectResponse__Output as _fastpull_v1_GarbageCollectResponse__Output } from './fastpull/v1/GarbageCollectResponse.js';
import type { GcLeftover as _fastpull_v1_GcLeftover, GcLeftover__Output as _fastpull_v1_GcLeftover__Output } from './fastpull/v1/GcLeftover.js';
import type { GetImageRequest as _fastpull_v1_GetImageRequest, GetImageRequest__Output as _fastpull_v1_GetImageRequest__Output } from './fastpull/v1/GetImageRequest.js';
import type { GetImageResponse as _fastpull_v1_GetImageResponse, GetImageResponse__Output as _fastpull_v1_GetImageResponse__Output } from './fastpull/v1/GetImageResponse.js';
import type { Image as _fastpull_v1_Image, Image__Output as _fastpull_v1_Image__Output } from './fastpull/v1/Image.js';
import type { ImageLayer as _fastpull_v1_ImageLayer, ImageLayer__Output as _fastpull_v1_ImageLayer__Output } from './fastpull/v1/ImageLayer.js';
import type { ImageSignatures as _fastpull_v1_ImageSignatures, ImageSignatures__Output as _fastpull_v1_ImageSignatures__Output } from './fastpull/v1/ImageSignatures.js';
import type { ImagesClient as _fastpull_v1_ImagesClient, ImagesDefinition as _fastpull_v1_ImagesDefinition } from './fastpull/v1/Images.js';
import type { InfoRequest as _fastpull_v1_InfoRequest, InfoRequest__Output as _fastpull_v1_InfoRequest__Output } from './fastpull/v1/InfoRequest.js';
import type { InfoResponse as _fastpull_v1_InfoResponse, InfoResponse__Output as _fastpull_v1_InfoResponse__Output } from './fastpull/v1/InfoResponse.js';
import type { LayerProgress as _fastpull_v1_LayerProgress, LayerProgress__Output as _fastpull_v1_LayerProgress__Output } from './fastpull/v1/LayerProgress.js';
import type { LayerTimings as _fastpull_v1_LayerTimings, LayerTimings__Output as _fastpull_v1_LayerTimings__Output } from './fastpull/v1/LayerTimings.js';
import type { ListContentRequest as _fastpull_v1_ListContentRequest, ListContentRequest__Output as _fastpull_v1_ListContentRequest__Output } from './fastpull/v1/ListContentRequest.js';
import type { ListContentResponse as _fastpull_v1_ListContentResponse, ListContentResponse__Output as _fastpull_v1_ListContentResponse__Output } from './fastpull/v1/ListContentResponse.js';
import type { ListImagesRequest as _fastpull_v1_ListImagesRequest, ListImagesRequest__Output as _fastpull_v1_ListImagesRequest__Output } from './fastpull/v1/ListImagesRequest.js';
import type { ListImagesResponse as _fastpull_v1_ListImagesResponse, ListImagesResponse__Output as _fastpull_v1_ListImagesResponse__Output } from './fastpull/v1/ListImagesResponse.js';
import type { ListSnapshotsRequest as _fastpull_v1_ListSnapshotsRequest, ListSnapshotsRequest__Output as _fastpull_v1_ListSnapshotsRequest__Output } from './fastpull/v1/ListSnapshotsRequest.js';
import type { ListSnapshotsResponse as _fastpull_v1_ListSnapshotsResponse, ListSnapshotsResponse__Output as _fastpull_v1_ListSnapshotsResponse__Output } from './fastpull/v1/ListSnapshotsResponse.js';
import type { ListWritableMountsRequest as _fastpull_v1_ListWritableMountsRequest, ListWritableMountsRequest__Output as _fastpull_v1_ListWritableMountsRequest__Output } from './fastpull/v1/ListWritableMountsRequest.js';
import type { ListWritableMountsResponse as _fastpull_v1_ListWritableMountsResponse, ListWritableMountsResponse__Output as _fastpull_v1_ListWritableMountsResponse__Output } from './fastpull/v1/ListWritableMountsResponse.js';
import type { Millis as _fastpull_v1_Millis, Millis__Output as _fastpull_v1_Millis__Output } from './fastpull/v1/Millis.js';
import type { Mount as _fastpull_v1_Mount, Mount__Output as _fastpull_v1_Mount__Output } from './fastpull/v1/Mount.js';
import type { MountsRequest as _fastpull_v1_MountsRequest, MountsRequest__Output as _fastpull_v1_MountsRequest__Output } from './fastpull/v1/MountsRequest.js';
import type { MountsResponse as _fastpull_v1_MountsResponse, MountsResponse__Output as _fastpull_v1_MountsResponse__Output } from './fastpull/v1/MountsResponse.js';
import type { PhaseTotals as _fastpull_v1_PhaseTotals, PhaseTotals__Output as _fastpull_v1_PhaseTotals__Output } from './fastpull/v1/PhaseTotals.js';
import type { Platform as _fastpull_v1_Platform, Platform__Output as _fastpull_v1_Platform__Output } from './fastpull/v1/Platform.js';
import type { PullDone as _fastpull_v1_PullDone, PullDone__Output as _fastpull_v1_PullDone__Output } from './fastpull/v1/PullDone.js';
import type { PullRequest as _fastpull_v1_PullRequest, PullRequest__Output as _fastpull_v1_PullRequest__Output } from './fastpull/v1/PullRequest.js';
import type { PullResponse as _fastpull_v1_PullResponse, PullResponse__Output as _fastpull_v1_PullResponse__Output } from './fastpull/v1/PullResponse.js';
import type { PullTimings as _fastpull_v1_PullTimings, PullTimings__Output as _fastpull_v1_PullTimings__Output } from './fastpull/v1/PullTimings.js';
import type { PullTrace as _fastpull_v1_PullTrace, PullTrace__Output as _fastpull_v1_PullTrace__Output } from './fastpull/v1/PullTrace.js';
import type { ReleasedImage as _fastpull_v1_ReleasedImage, ReleasedImage__Output as _fastpull_v1_ReleasedImage__Output } from './fastpull/v1/ReleasedImage.js';
import type { RemoveImageRequest as _fastpull_v1_RemoveImageRequest, RemoveImageRequest__Output as _fastpull_v1_RemoveImageRequest__Output } from './fastpull/v1/RemoveImageRequest.js';
import type { RemoveImageResponse as _fastpull_v1_RemoveImageResponse, RemoveImageResponse__Output as _fastpull_v1_RemoveImageResponse__Output } from './fastpull/v1/RemoveImageResponse.js';
import type { RemoveWritableMountRequest as _fastpull_v1_RemoveWritableMountRequest, RemoveWritableMountRequest__Output as _fastpull_v1_RemoveWritableMountRequest__Output } from './fastpull/v1/RemoveWritableMountRequest.js';
import type { RemoveWritableMountResponse as _fastpull_v1_RemoveWritableMountResponse, RemoveWritableMountResponse__Output as _fastpull_v1_RemoveWritableMountResponse__Output } from './fastpull/v1/RemoveWritableMountResponse.js';
import type { RemovedSnapshot as _fastpull_v1_RemovedSnapshot, RemovedSnapshot__Output as _fastpull_v1_RemovedSnapshot__Output } from './fastpull/v1/RemovedSnapshot.js';
import type { Resolved as _fastpull_v1_Resolved, Resolved__Output as _fastpull_v1_Resolved__Output } from './fastpull/v1/Resolved.js';
import type { ResolvedLayer as _fastpull_v1_ResolvedLayer, ResolvedLayer__Output as _fastpull_v1_ResolvedLayer__Output } from './fastpull/v1/ResolvedLayer.js';
import type { SignatureCheck as _fastpull_v1_SignatureCheck, SignatureCheck__Output as _fastpull_v1_SignatureCheck__Output } from './fastpull/v1/SignatureCheck.js';
import type { SignatureVerdict as _fastpull_v1_SignatureVerdict, SignatureVerdict__Output as _fastpull_v1_SignatureVerdict__Output } from './fastpull/v1/SignatureVerdict.js';
import type { SnapshotInfo as _fastpull_v1_SnapshotInfo, SnapshotInfo__Output as _fastpull_v1_SnapshotInfo__Output } from './fastpull/v1/SnapshotInfo.js';
import type { SnapshotsClient as _fastpull_v1_SnapshotsClient, SnapshotsDefinition as _fastpull_v1_SnapshotsDefinition } from './fastpull/v1/Snapshots.js';
import type { UnpackProgress as _fastpull_v1_UnpackProgress, UnpackProgress__Output as _fastpull_v1_UnpackProgress__Output } from './fastpull/v1/UnpackProgress.js';
import type { UsageRequest as _fastpull_v1_UsageRequest, UsageRequest__Output as _fastpull_v1_UsageRequest__Output } from './fastpull/v1/UsageRequest.js';
import type { UsageResponse as _fastpull_v1_UsageResponse, UsageResponse__Output as _fastpull_v1_UsageResponse__Output } from './fastpull/v1/UsageResponse.js';
import type { WritableMountRecord as _fastpull_v1_WritableMountRecord, WritableMountRecord__Output as _fastpull_v1_WritableMountRecord__Output } from './fastpull/v1/WritableMountRecord.js';

type SubtypeConstructor<Constructor extends new (...args: any) => any, Subtype> = {
  new(...args: ConstructorParameters<Constructor>): Subtype;
};

export interface ProtoGrpcType {
  fastpull: {
    v1: {
      BlobInfo: MessageTypeDefinition<_fastpull_v1_BlobInfo, _fastpull_v1_BlobInfo__Output>
      /**
       * Content serves the verified blobs of the store (manifests, configs, kept layer blobs).
       */
      Content: SubtypeConstructor<typeof grpc.Client, _fastpull_v1_ContentClient> & { service: _fastpull_v1_ContentDefinition }
      Count: MessageTypeDefinition<_fastpull_v1_Count, _fastpull_v1_Count__Output>
      CreateWritableMountRequest: MessageTypeDefinition<_fastpull_v1_CreateWritableMountRequest, _fastpull_v1_CreateWritableMountRequest__Output>
      CreateWritableMountResponse: MessageTypeDefinition<_fastpull_v1_CreateWritableMountResponse, _fastpull_v1_CreateWritableMountResponse__Output>
      Credentials: MessageTypeDefinition<_fastpull_v1_Credentials, _fastpull_v1_Credentials__Output>
      DeleteContentRequest: MessageTypeDefinition<_fastpull_v1_DeleteContentRequest, _fastpull_v1_DeleteContentRequest__Output>
      DeleteContentResponse: MessageTypeDefinition<_fastpull_v1_DeleteContentResponse, _fastpull_v1_DeleteContentResponse__Output>
      Descriptor: MessageTypeDefinition<_fastpull_v1_Descriptor, _fastpull_v1_Descriptor__Output>
      GarbageCollectRequest: MessageTypeDefinition<_fastpull_v1_GarbageCollectRequest, _fastpull_v1_GarbageCollectRequest__Output>
      GarbageCollectResponse: MessageTypeDefinition<_fastpull_v1_GarbageCollectResponse, _fastpull_v1_GarbageCollectResponse__Output>
      GcLeftover: MessageTypeDefinition<_fastpull_v1_GcLeftover, _fastpull_v1_GcLeftover__Output>
      GetImageRequest: MessageTypeDefinition<_fastpull_v1_GetImageRequest, _fastpull_v1_GetImageRequest__Output>
      GetImageResponse: MessageTypeDefinition<_fastpull_v1_GetImageResponse, _fastpull_v1_GetImageResponse__Output>
      Image: MessageTypeDefinition<_fastpull_v1_Image, _fastpull_v1_Image__Output>
      ImageLayer: MessageTypeDefinition<_fastpull_v1_ImageLayer, _fastpull_v1_ImageLayer__Output>
      ImageSignatures: MessageTypeDefinition<_fastpull_v1_ImageSignatures, _fastpull_v1_ImageSignatures__Output>
      /**
       * Images pulls images into the store and manages their records.
       */
      Images: SubtypeConstructor<typeof grpc.Client, _fastpull_v1_ImagesClient> & { service: _fastpull_v1_ImagesDefinition }
      InfoRequest: MessageTypeDefinition<_fastpull_v1_InfoRequest, _fastpull_v1_InfoRequest__Output>
      InfoResponse: MessageTypeDefinition<_fastpull_v1_InfoResponse, _fastpull_v1_InfoResponse__Output>
      LayerProgress: MessageTypeDefinition<_fastpull_v1_LayerProgress, _fastpull_v1_LayerProgress__Output>
      LayerState: EnumTypeDefinition
      LayerTimings: MessageTypeDefinition<_fastpull_v1_LayerTimings, _fastpull_v1_LayerTimings__Output>
      ListContentRequest: MessageTypeDefinition<_fastpull_v1_ListContentRequest, _fastpull_v1_ListContentRequest__Output>
      ListContentResponse: MessageTypeDefinition<_fastpull_v1_ListContentResponse, _fastpull_v1_ListContentResponse__Output>
      ListImagesRequest: MessageTypeDefinition<_fastpull_v1_ListImagesRequest, _fastpull_v1_ListImagesRequest__Output>
      ListImagesResponse: MessageTypeDefinition<_fastpull_v1_ListImagesResponse, _fastpull_v1_ListImagesResponse__Output>
      ListSnapshotsRequest: MessageTypeDefinition<_fastpull_v1_ListSnapshotsRequest, _fastpull_v1_ListSnapshotsRequest__Output>
      ListSnapshotsResponse: MessageTypeDefinition<_fastpull_v1_ListSnapshotsResponse, _fastpull_v1_ListSnapshotsResponse__Output>
      ListWritableMountsRequest: MessageTypeDefinition<_fastpull_v1_ListWritableMountsRequest, _fastpull_v1_ListWritableMountsRequest__Output>
      ListWritableMountsResponse: MessageTypeDefinition<_fastpull_v1_ListWritableMountsResponse, _fastpull_v1_ListWritableMountsResponse__Output>
      Millis: MessageTypeDefinition<_fastpull_v1_Millis, _fastpull_v1_Millis__Output>
      Mount: MessageTypeDefinition<_fastpull_v1_Mount, _fastpull_v1_Mount__Output>
      MountsRequest: MessageTypeDefinition<_fastpull_v1_MountsRequest, _fastpull_v1_MountsRequest__Output>
      MountsResponse: MessageTypeDefinition<_fastpull_v1_MountsResponse, _fastpull_v1_MountsResponse__Output>
      PhaseTotals: MessageTypeDefinition<_fastpull_v1_PhaseTotals, _fastpull_v1_PhaseTotals__Output>
      Platform: MessageTypeDefinition<_fastpull_v1_Platform, _fastpull_v1_Platform__Output>
      PullDone: MessageTypeDefinition<_fastpull_v1_PullDone, _fastpull_v1_PullDone__Output>
      PullPriority: EnumTypeDefinition
      PullRequest: MessageTypeDefinition<_fastpull_v1_PullRequest, _fastpull_v1_PullRequest__Output>
      PullResponse: MessageTypeDefinition<_fastpull_v1_PullResponse, _fastpull_v1_PullResponse__Output>
      PullTimings: MessageTypeDefinition<_fastpull_v1_PullTimings, _fastpull_v1_PullTimings__Output>
      PullTrace: MessageTypeDefinition<_fastpull_v1_PullTrace, _fastpull_v1_PullTrace__Output>
      ReleasedImage: MessageTypeDefinition<_fastpull_v1_ReleasedImage, _fastpull_v1_ReleasedImage__Output>
      RemoveImageRequest: MessageTypeDefinition<_fastpull_v1_RemoveImageRequest, _fastpull_v1_RemoveImageRequest__Output>
      RemoveImageResponse: MessageTypeDefinition<_fastpull_v1_RemoveImageResponse, _fastpull_v1_RemoveImageResponse__Output>
      RemoveWritableMountRequest: MessageTypeDefinition<_fastpull_v1_RemoveWritableMountRequest, _fastpull_v1_RemoveWritableMountRequest__Output>
      RemoveWritableMountResponse: MessageTypeDefinition<_fastpull_v1_RemoveWritableMountResponse, _fastpull_v1_RemoveWritableMountResponse__Output>
      RemovedSnapshot: MessageTypeDefinition<_fastpull_v1_RemovedSnapshot, _fastpull_v1_RemovedSnapshot__Output>
      Resolved: MessageTypeDefinition<_fastpull_v1_Resolved, _fastpull_v1_Resolved__Output>
      ResolvedLayer: MessageTypeDefinition<_fastpull_v1_ResolvedLayer, _fastpull_v1_ResolvedLayer__Output>
      SignatureCheck: MessageTypeDefinition<_fastpull_v1_SignatureCheck, _fastpull_v1_SignatureCheck__Output>
      SignatureVerdict: MessageTypeDefinition<_fastpull_v1_SignatureVerdict, _fastpull_v1_SignatureVerdict__Output>
      SnapshotInfo: MessageTypeDefinition<_fastpull_v1_SnapshotInfo, _fastpull_v1_SnapshotInfo__Output>
      /**
       * Snapshots serves the committed snapshots (one directory per layer, named by chainID).
       */
      Snapshots: SubtypeConstructor<typeof grpc.Client, _fastpull_v1_SnapshotsClient> & { service: _fastpull_v1_SnapshotsDefinition }
      UnpackProgress: MessageTypeDefinition<_fastpull_v1_UnpackProgress, _fastpull_v1_UnpackProgress__Output>
      UsageRequest: MessageTypeDefinition<_fastpull_v1_UsageRequest, _fastpull_v1_UsageRequest__Output>
      UsageResponse: MessageTypeDefinition<_fastpull_v1_UsageResponse, _fastpull_v1_UsageResponse__Output>
      WritableMountRecord: MessageTypeDefinition<_fastpull_v1_WritableMountRecord, _fastpull_v1_WritableMountRecord__Output>
    }
  }
}

