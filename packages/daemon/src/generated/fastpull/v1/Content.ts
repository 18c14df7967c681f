// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.

import type * as grpc from '@grpc/grpc-js'
import type { MethodDefinition } from '@grpc/proto-loader'
import type { DeleteContentRequest as _fastpull_v1_DeleteContentRequest, DeleteContentRequest__Output as _fastpull_v1_DeleteContentRequest__Output } from '../../fastpull/v1/DeleteContentRequest.js';
import type { DeleteContentResponse as _fastpull_v1_DeleteContentResponse, DeleteContentResponse__Output as _fastpull_v1_DeleteContentResponse__Output } from '../../fastpull/v1/DeleteContentResponse.js';
import type { GarbageCollectRequest as _fastpull_v1_GarbageCollectRequest, GarbageCollectRequest__Output as _fastpull_v1_GarbageCollectRequest__Output } from '../../fastpull/v1/GarbageCollectRequest.js';
import type { GarbageCollectResponse as _fastpull_v1_GarbageCollectResponse, GarbageCollectResponse__Output as _fastpull_v1_GarbageCollectResponse__Output } from '../../fastpull/v1/GarbageCollectResponse.js';
import type { InfoRequest as _fastpull_v1_InfoRequest, InfoRequest__Output as _fastpull_v1_InfoRequest__Output } from '../../fastpull/v1/InfoRequest.js';
import type { InfoResponse as _fastpull_v1_InfoResponse, InfoResponse__Output as _fastpull_v1_InfoResponse__Output } from '../../fastpull/v1/InfoResponse.js';
import type { ListContentRequest as _fastpull_v1_ListContentRequest, ListContentRequest__Output as _fastpull_v1_ListContentRequest__Output } from '../../fastpull/v1/ListContentRequest.js';
import type { ListContentResponse as _fastpull_v1_ListContentResponse, ListContentResponse__Output as _fastpull_v1_ListContentResponse__Output } from '../../fastpull/v1/ListContentResponse.js';

/**
 * Content serves the verified blobs of the store (manifests, configs, kept layer blobs).
 */
export interface ContentClient extends grpc.Client {
  /**
   * Removes one blob; INVALID_ARGUMENT when an image record or a running pull still uses it.
   */
  Delete(argument: _fastpull_v1_DeleteContentRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_DeleteContentResponse__Output>): grpc.ClientUnaryCall;
  Delete(argument: _fastpull_v1_DeleteContentRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_fastpull_v1_DeleteContentResponse__Output>): grpc.ClientUnaryCall;
  Delete(argument: _fastpull_v1_DeleteContentRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_DeleteContentResponse__Output>): grpc.ClientUnaryCall;
  Delete(argument: _fastpull_v1_DeleteContentRequest, callback: grpc.requestCallback<_fastpull_v1_DeleteContentResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Removes one blob; INVALID_ARGUMENT when an image record or a running pull still uses it.
   */
  delete(argument: _fastpull_v1_DeleteContentRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_DeleteContentResponse__Output>): grpc.ClientUnaryCall;
  delete(argument: _fastpull_v1_DeleteContentRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_fastpull_v1_DeleteContentResponse__Output>): grpc.ClientUnaryCall;
  delete(argument: _fastpull_v1_DeleteContentRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_DeleteContentResponse__Output>): grpc.ClientUnaryCall;
  delete(argument: _fastpull_v1_DeleteContentRequest, callback: grpc.requestCallback<_fastpull_v1_DeleteContentResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * Removes every snapshot and blob that no image, running pull or mount refers to, and what dead
   * processes left behind.
   */
  GarbageCollect(argument: _fastpull_v1_GarbageCollectRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_GarbageCollectResponse__Output>): grpc.ClientUnaryCall;
  GarbageCollect(argument: _fastpull_v1_GarbageCollectRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_fastpull_v1_GarbageCollectResponse__Output>): grpc.ClientUnaryCall;
  GarbageCollect(argument: _fastpull_v1_GarbageCollectRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_GarbageCollectResponse__Output>): grpc.ClientUnaryCall;
  GarbageCollect(argument: _fastpull_v1_GarbageCollectRequest, callback: grpc.requestCallback<_fastpull_v1_GarbageCollectResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Removes every snapshot and blob that no image, running pull or mount refers to, and what dead
   * processes left behind.
   */
  garbageCollect(argument: _fastpull_v1_GarbageCollectRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_GarbageCollectResponse__Output>): grpc.ClientUnaryCall;
  garbageCollect(argument: _fastpull_v1_GarbageCollectRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_fastpull_v1_GarbageCollectResponse__Output>): grpc.ClientUnaryCall;
  garbageCollect(argument: _fastpull_v1_GarbageCollectRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_GarbageCollectResponse__Output>): grpc.ClientUnaryCall;
  garbageCollect(argument: _fastpull_v1_GarbageCollectRequest, callback: grpc.requestCallback<_fastpull_v1_GarbageCollectResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * Digest and size of one blob; NOT_FOUND when the store does not hold it.
   */
  Info(argument: _fastpull_v1_InfoRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_InfoResponse__Output>): grpc.ClientUnaryCall;
  Info(argument: _fastpull_v1_InfoRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_fastpull_v1_InfoResponse__Output>): grpc.ClientUnaryCall;
  Info(argument: _fastpull_v1_InfoRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_InfoResponse__Output>): grpc.ClientUnaryCall;
  Info(argument: _fastpull_v1_InfoRequest, callback: grpc.requestCallback<_fastpull_v1_InfoResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Digest and size of one blob; NOT_FOUND when the store does not hold it.
   */
  info(argument: _fastpull_v1_InfoRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_InfoResponse__Output>): grpc.ClientUnaryCall;
  info(argument: _fastpull_v1_InfoRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_fastpull_v1_InfoResponse__Output>): grpc.ClientUnaryCall;
  info(argument: _fastpull_v1_InfoRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_InfoResponse__Output>): grpc.ClientUnaryCall;
  info(argument: _fastpull_v1_InfoRequest, callback: grpc.requestCallback<_fastpull_v1_InfoResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * Every blob in the store.
   */
  List(argument: _fastpull_v1_ListContentRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_ListContentResponse__Output>): grpc.ClientUnaryCall;
  List(argument: _fastpull_v1_ListContentRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_fastpull_v1_ListContentResponse__Output>): grpc.ClientUnaryCall;
  List(argument: _fastpull_v1_ListContentRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_ListContentResponse__Output>): grpc.ClientUnaryCall;
  List(argument: _fastpull_v1_ListContentRequest, callback: grpc.requestCallback<_fastpull_v1_ListContentResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Every blob in the store.
   */
  list(argument: _fastpull_v1_ListContentRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_ListContentResponse__Output>): grpc.ClientUnaryCall;
  list(argument: _fastpull_v1_ListContentRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_fastpull_v1_ListContentResponse__Output>): grpc.ClientUnaryCall;
  list(argument: _fastpull_v1_ListContentRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_ListContentResponse__Output>): grpc.ClientUnaryCall;
  list(argument: _fastpull_v1_ListContentRequest, callback: grpc.requestCallback<_fastpull_v1_ListContentResponse__Output>): grpc.ClientUnaryCall;
  
}

/**
 * Content serves the verified blobs of the store (manifests, configs, kept layer blobs).
 */
export interface ContentHandlers extends grpc.UntypedServiceImplementation {
  /**
   * Removes one blob; INVALID_ARGUMENT when an image record or a running pull still uses it.
   */
  Delete: grpc.handleUnaryCall<_fastpull_v1_DeleteContentRequest__Output, _fastpull_v1_DeleteContentResponse>;
  
  /**
   * Removes every snapshot and blob that no image, running pull or mount refers to, and what dead
   * processes left behind.
   */
  GarbageCollect: grpc.handleUnaryCall<_fastpull_v1_GarbageCollectRequest__Output, _fastpull_v1_GarbageCollectResponse>;
  
  /**
   * Digest and size of one blob; NOT_FOUND when the store does not hold it.
   */
  Info: grpc.handleUnaryCall<_fastpull_v1_InfoRequest__Output, _fastpull_v1_InfoResponse>;
  
  /**
   * Every blob in the store.
   */
  List: grpc.handleUnaryCall<_fastpull_v1_ListContentRequest__Output, _fastpull_v1_ListContentResponse>;
  
}

export interface ContentDefinition extends grpc.ServiceDefinition {
  Delete: MethodDefinition<_fastpull_v1_DeleteContentRequest, _fastpull_v1_DeleteContentResponse, _fastpull_v1_DeleteContentRequest__Output, _fastpull_v1_DeleteContentResponse__Output>
  GarbageCollect: MethodDefinition<_fastpull_v1_GarbageCollectRequest, _fastpull_v1_GarbageCollectResponse, _fastpull_v1_GarbageCollectRequest__Output, _fastpull_v1_GarbageCollectResponse__Output>
  Info: MethodDefinition<_fastpull_v1_InfoRequest, _fastpull_v1_InfoResponse, _fastpull_v1_InfoRequest__Output, _fastpull_v1_InfoResponse__Output>
  List: MethodDefinition<_fastpull_v1_ListContentRequest, _fastpull_v1_ListContentResponse, _fastpull_v1_ListContentRequest__Output, _fastpull_v1_ListContentResponse__Output>
}
