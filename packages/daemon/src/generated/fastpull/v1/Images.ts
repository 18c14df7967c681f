// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.

import type * as grpc from '@grpc/grpc-js'
import type { MethodDefinition } from '@grpc/proto-loader'
import type { GetImageRequest as _fastpull_v1_GetImageRequest, GetImageRequest__Output as _fastpull_v1_GetImageRequest__Output } from '../../fastpull/v1/GetImageRequest.js';
import type { GetImageResponse as _fastpull_v1_GetImageResponse, GetImageResponse__Output as _fastpull_v1_GetImageResponse__Output } from '../../fastpull/v1/GetImageResponse.js';
import type { ListImagesRequest as _fastpull_v1_ListImagesRequest, ListImagesRequest__Output as _fastpull_v1_ListImagesRequest__Output } from '../../fastpull/v1/ListImagesRequest.js';
import type { ListImagesResponse as _fastpull_v1_ListImagesResponse, ListImagesResponse__Output as _fastpull_v1_ListImagesResponse__Output } from '../../fastpull/v1/ListImagesResponse.js';
import type { PullRequest as _fastpull_v1_PullRequest, PullRequest__Output as _fastpull_v1_PullRequest__Output } from '../../fastpull/v1/PullRequest.js';
import type { PullResponse as _fastpull_v1_PullResponse, PullResponse__Output as _fastpull_v1_PullResponse__Output } from '../../fastpull/v1/PullResponse.js';
import type { RemoveImageRequest as _fastpull_v1_RemoveImageRequest, RemoveImageRequest__Output as _fastpull_v1_RemoveImageRequest__Output } from '../../fastpull/v1/RemoveImageRequest.js';
import type { RemoveImageResponse as _fastpull_v1_RemoveImageResponse, RemoveImageResponse__Output as _fastpull_v1_RemoveImageResponse__Output } from '../../fastpull/v1/RemoveImageResponse.js';

/**
 * Images pulls images into the store and manages their records.
 */
export interface ImagesClient extends grpc.Client {
  /**
   * One image record, by any spelling of its reference; NOT_FOUND when it is not in the store.
   */
  Get(argument: _fastpull_v1_GetImageRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_GetImageResponse__Output>): grpc.ClientUnaryCall;
  Get(argument: _fastpull_v1_GetImageRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_fastpull_v1_GetImageResponse__Output>): grpc.ClientUnaryCall;
  Get(argument: _fastpull_v1_GetImageRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_GetImageResponse__Output>): grpc.ClientUnaryCall;
  Get(argument: _fastpull_v1_GetImageRequest, callback: grpc.requestCallback<_fastpull_v1_GetImageResponse__Output>): grpc.ClientUnaryCall;
  /**
   * One image record, by any spelling of its reference; NOT_FOUND when it is not in the store.
   */
  get(argument: _fastpull_v1_GetImageRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_GetImageResponse__Output>): grpc.ClientUnaryCall;
  get(argument: _fastpull_v1_GetImageRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_fastpull_v1_GetImageResponse__Output>): grpc.ClientUnaryCall;
  get(argument: _fastpull_v1_GetImageRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_GetImageResponse__Output>): grpc.ClientUnaryCall;
  get(argument: _fastpull_v1_GetImageRequest, callback: grpc.requestCallback<_fastpull_v1_GetImageResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * Every image record in the store, by name.
   */
  List(argument: _fastpull_v1_ListImagesRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_ListImagesResponse__Output>): grpc.ClientUnaryCall;
  List(argument: _fastpull_v1_ListImagesRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_fastpull_v1_ListImagesResponse__Output>): grpc.ClientUnaryCall;
  List(argument: _fastpull_v1_ListImagesRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_ListImagesResponse__Output>): grpc.ClientUnaryCall;
  List(argument: _fastpull_v1_ListImagesRequest, callback: grpc.requestCallback<_fastpull_v1_ListImagesResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Every image record in the store, by name.
   */
  list(argument: _fastpull_v1_ListImagesRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_ListImagesResponse__Output>): grpc.ClientUnaryCall;
  list(argument: _fastpull_v1_ListImagesRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_fastpull_v1_ListImagesResponse__Output>): grpc.ClientUnaryCall;
  list(argument: _fastpull_v1_ListImagesRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_ListImagesResponse__Output>): grpc.ClientUnaryCall;
  list(argument: _fastpull_v1_ListImagesRequest, callback: grpc.requestCallback<_fastpull_v1_ListImagesResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * Pulls an image: a stream of progress events (first `resolved`, then `layer` state changes and
   * byte counts), ending with `done`, which holds the image record. Pulls of the same image (same
   * reference, platform and options) running at once are one pull: a caller that joins late gets
   * `resolved` and each layer's latest state first, then every event from then on. A caller that
   * goes away stops receiving; the pull stops only when no caller is left, and keeps what it
   * downloaded for the next pull to resume.
   */
  Pull(argument: _fastpull_v1_PullRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_fastpull_v1_PullResponse__Output>;
  Pull(argument: _fastpull_v1_PullRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_fastpull_v1_PullResponse__Output>;
  /**
   * Pulls an image: a stream of progress events (first `resolved`, then `layer` state changes and
   * byte counts), ending with `done`, which holds the image record. Pulls of the same image (same
   * reference, platform and options) running at once are one pull: a caller that joins late gets
   * `resolved` and each layer's latest state first, then every event from then on. A caller that
   * goes away stops receiving; the pull stops only when no caller is left, and keeps what it
   * downloaded for the next pull to resume.
   */
  pull(argument: _fastpull_v1_PullRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_fastpull_v1_PullResponse__Output>;
  pull(argument: _fastpull_v1_PullRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_fastpull_v1_PullResponse__Output>;
  
  /**
   * Forgets an image record; its snapshots and blobs stay until garbage collection (or `gc` here).
   */
  Remove(argument: _fastpull_v1_RemoveImageRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_RemoveImageResponse__Output>): grpc.ClientUnaryCall;
  Remove(argument: _fastpull_v1_RemoveImageRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_fastpull_v1_RemoveImageResponse__Output>): grpc.ClientUnaryCall;
  Remove(argument: _fastpull_v1_RemoveImageRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_RemoveImageResponse__Output>): grpc.ClientUnaryCall;
  Remove(argument: _fastpull_v1_RemoveImageRequest, callback: grpc.requestCallback<_fastpull_v1_RemoveImageResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Forgets an image record; its snapshots and blobs stay until garbage collection (or `gc` here).
   */
  remove(argument: _fastpull_v1_RemoveImageRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_RemoveImageResponse__Output>): grpc.ClientUnaryCall;
  remove(argument: _fastpull_v1_RemoveImageRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_fastpull_v1_RemoveImageResponse__Output>): grpc.ClientUnaryCall;
  remove(argument: _fastpull_v1_RemoveImageRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_RemoveImageResponse__Output>): grpc.ClientUnaryCall;
  remove(argument: _fastpull_v1_RemoveImageRequest, callback: grpc.requestCallback<_fastpull_v1_RemoveImageResponse__Output>): grpc.ClientUnaryCall;
  
}

/**
 * Images pulls images into the store and manages their records.
 */
export interface ImagesHandlers extends grpc.UntypedServiceImplementation {
  /**
   * One image record, by any spelling of its reference; NOT_FOUND when it is not in the store.
   */
  Get: grpc.handleUnaryCall<_fastpull_v1_GetImageRequest__Output, _fastpull_v1_GetImageResponse>;
  
  /**
   * Every image record in the store, by name.
   */
  List: grpc.handleUnaryCall<_fastpull_v1_ListImagesRequest__Output, _fastpull_v1_ListImagesResponse>;
  
  /**
   * Pulls an image: a stream of progress events (first `resolved`, then `layer` state changes and
   * byte counts), ending with `done`, which holds the image record. Pulls of the same image (same
   * reference, platform and options) running at once are one pull: a caller that joins late gets
   * `resolved` and each layer's latest state first, then every event from then on. A caller that
   * goes away stops receiving; the pull stops only when no caller is left, and keeps what it
   * downloaded for the next pull to resume.
   */
  Pull: grpc.handleServerStreamingCall<_fastpull_v1_PullRequest__Output, _fastpull_v1_PullResponse>;
  
  /**
   * Forgets an image record; its snapshots and blobs stay until garbage collection (or `gc` here).
   */
  Remove: grpc.handleUnaryCall<_fastpull_v1_RemoveImageRequest__Output, _fastpull_v1_RemoveImageResponse>;
  
}

export interface ImagesDefinition extends grpc.ServiceDefinition {
  Get: MethodDefinition<_fastpull_v1_GetImageRequest, _fastpull_v1_GetImageResponse, _fastpull_v1_GetImageRequest__Output, _fastpull_v1_GetImageResponse__Output>
  List: MethodDefinition<_fastpull_v1_ListImagesRequest, _fastpull_v1_ListImagesResponse, _fastpull_v1_ListImagesRequest__Output, _fastpull_v1_ListImagesResponse__Output>
  Pull: MethodDefinition<_fastpull_v1_PullRequest, _fastpull_v1_PullResponse, _fastpull_v1_PullRequest__Output, _fastpull_v1_PullResponse__Output>
  Remove: MethodDefinition<_fastpull_v1_RemoveImageRequest, _fastpull_v1_RemoveImageResponse, _fastpull_v1_RemoveImageRequest__Output, _fastpull_v1_RemoveImageResponse__Output>
}
