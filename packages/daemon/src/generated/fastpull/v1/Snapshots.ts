// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.

import type * as grpc from '@grpc/grpc-js'
import type { MethodDefinition } from '@grpc/proto-loader'
import type { CreateWritableMountRequest as _fastpull_v1_CreateWritableMountRequest, CreateWritableMountRequest__Output as _fastpull_v1_CreateWritableMountRequest__Output } from '../../fastpull/v1/CreateWritableMountRequest.js';
import type { CreateWritableMountResponse as _fastpull_v1_CreateWritableMountResponse, CreateWritableMountResponse__Output as _fastpull_v1_CreateWritableMountResponse__Output } from '../../fastpull/v1/CreateWritableMountResponse.js';
import type { ListSnapshotsRequest as _fastpull_v1_ListSnapshotsRequest, ListSnapshotsRequest__Output as _fastpull_v1_ListSnapshotsRequest__Output } from '../../fastpull/v1/ListSnapshotsRequest.js';
import type { ListSnapshotsResponse as _fastpull_v1_ListSnapshotsResponse, ListSnapshotsResponse__Output as _fastpull_v1_ListSnapshotsResponse__Output } from '../../fastpull/v1/ListSnapshotsResponse.js';
import type { ListWritableMountsRequest as _fastpull_v1_ListWritableMountsRequest, ListWritableMountsRequest__Output as _fastpull_v1_ListWritableMountsRequest__Output } from '../../fastpull/v1/ListWritableMountsRequest.js';
import type { ListWritableMountsResponse as _fastpull_v1_ListWritableMountsResponse, ListWritableMountsResponse__Output as _fastpull_v1_ListWritableMountsResponse__Output } from '../../fastpull/v1/ListWritableMountsResponse.js';
import type { MountsRequest as _fastpull_v1_MountsRequest, MountsRequest__Output as _fastpull_v1_MountsRequest__Output } from '../../fastpull/v1/MountsRequest.js';
import type { MountsResponse as _fastpull_v1_MountsResponse, MountsResponse__Output as _fastpull_v1_MountsResponse__Output } from '../../fastpull/v1/MountsResponse.js';
import type { RemoveWritableMountRequest as _fastpull_v1_RemoveWritableMountRequest, RemoveWritableMountRequest__Output as _fastpull_v1_RemoveWritableMountRequest__Output } from '../../fastpull/v1/RemoveWritableMountRequest.js';
import type { RemoveWritableMountResponse as _fastpull_v1_RemoveWritableMountResponse, RemoveWritableMountResponse__Output as _fastpull_v1_RemoveWritableMountResponse__Output } from '../../fastpull/v1/RemoveWritableMountResponse.js';
import type { UsageRequest as _fastpull_v1_UsageRequest, UsageRequest__Output as _fastpull_v1_UsageRequest__Output } from '../../fastpull/v1/UsageRequest.js';
import type { UsageResponse as _fastpull_v1_UsageResponse, UsageResponse__Output as _fastpull_v1_UsageResponse__Output } from '../../fastpull/v1/UsageResponse.js';

/**
 * Snapshots serves the committed snapshots (one directory per layer, named by chainID).
 */
export interface SnapshotsClient extends grpc.Client {
  /**
   * Records a writable mount of an image (fresh upper and work dirs in the store, which keep the
   * image's snapshots from garbage collection) and answers the overlay to mount. The daemon mounts
   * nothing: the caller mounts it, in its own mount namespace, and removes the record if it cannot.
   * INVALID_ARGUMENT when a record has that mount point already.
   */
  CreateWritableMount(argument: _fastpull_v1_CreateWritableMountRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_CreateWritableMountResponse__Output>): grpc.ClientUnaryCall;
  CreateWritableMount(argument: _fastpull_v1_CreateWritableMountRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_fastpull_v1_CreateWritableMountResponse__Output>): grpc.ClientUnaryCall;
  CreateWritableMount(argument: _fastpull_v1_CreateWritableMountRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_CreateWritableMountResponse__Output>): grpc.ClientUnaryCall;
  CreateWritableMount(argument: _fastpull_v1_CreateWritableMountRequest, callback: grpc.requestCallback<_fastpull_v1_CreateWritableMountResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Records a writable mount of an image (fresh upper and work dirs in the store, which keep the
   * image's snapshots from garbage collection) and answers the overlay to mount. The daemon mounts
   * nothing: the caller mounts it, in its own mount namespace, and removes the record if it cannot.
   * INVALID_ARGUMENT when a record has that mount point already.
   */
  createWritableMount(argument: _fastpull_v1_CreateWritableMountRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_CreateWritableMountResponse__Output>): grpc.ClientUnaryCall;
  createWritableMount(argument: _fastpull_v1_CreateWritableMountRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_fastpull_v1_CreateWritableMountResponse__Output>): grpc.ClientUnaryCall;
  createWritableMount(argument: _fastpull_v1_CreateWritableMountRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_CreateWritableMountResponse__Output>): grpc.ClientUnaryCall;
  createWritableMount(argument: _fastpull_v1_CreateWritableMountRequest, callback: grpc.requestCallback<_fastpull_v1_CreateWritableMountResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * Every committed snapshot.
   */
  List(argument: _fastpull_v1_ListSnapshotsRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_ListSnapshotsResponse__Output>): grpc.ClientUnaryCall;
  List(argument: _fastpull_v1_ListSnapshotsRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_fastpull_v1_ListSnapshotsResponse__Output>): grpc.ClientUnaryCall;
  List(argument: _fastpull_v1_ListSnapshotsRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_ListSnapshotsResponse__Output>): grpc.ClientUnaryCall;
  List(argument: _fastpull_v1_ListSnapshotsRequest, callback: grpc.requestCallback<_fastpull_v1_ListSnapshotsResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Every committed snapshot.
   */
  list(argument: _fastpull_v1_ListSnapshotsRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_ListSnapshotsResponse__Output>): grpc.ClientUnaryCall;
  list(argument: _fastpull_v1_ListSnapshotsRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_fastpull_v1_ListSnapshotsResponse__Output>): grpc.ClientUnaryCall;
  list(argument: _fastpull_v1_ListSnapshotsRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_ListSnapshotsResponse__Output>): grpc.ClientUnaryCall;
  list(argument: _fastpull_v1_ListSnapshotsRequest, callback: grpc.requestCallback<_fastpull_v1_ListSnapshotsResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * Every writable mount the store has a record of, by mount point.
   */
  ListWritableMounts(argument: _fastpull_v1_ListWritableMountsRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_ListWritableMountsResponse__Output>): grpc.ClientUnaryCall;
  ListWritableMounts(argument: _fastpull_v1_ListWritableMountsRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_fastpull_v1_ListWritableMountsResponse__Output>): grpc.ClientUnaryCall;
  ListWritableMounts(argument: _fastpull_v1_ListWritableMountsRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_ListWritableMountsResponse__Output>): grpc.ClientUnaryCall;
  ListWritableMounts(argument: _fastpull_v1_ListWritableMountsRequest, callback: grpc.requestCallback<_fastpull_v1_ListWritableMountsResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Every writable mount the store has a record of, by mount point.
   */
  listWritableMounts(argument: _fastpull_v1_ListWritableMountsRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_ListWritableMountsResponse__Output>): grpc.ClientUnaryCall;
  listWritableMounts(argument: _fastpull_v1_ListWritableMountsRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_fastpull_v1_ListWritableMountsResponse__Output>): grpc.ClientUnaryCall;
  listWritableMounts(argument: _fastpull_v1_ListWritableMountsRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_ListWritableMountsResponse__Output>): grpc.ClientUnaryCall;
  listWritableMounts(argument: _fastpull_v1_ListWritableMountsRequest, callback: grpc.requestCallback<_fastpull_v1_ListWritableMountsResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * The read-only mounts that present an image's (or a chainID's) tree, as data: the daemon mounts
   * nothing. Add upperdir and workdir options to an overlay mount for a writable root.
   */
  Mounts(argument: _fastpull_v1_MountsRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_MountsResponse__Output>): grpc.ClientUnaryCall;
  Mounts(argument: _fastpull_v1_MountsRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_fastpull_v1_MountsResponse__Output>): grpc.ClientUnaryCall;
  Mounts(argument: _fastpull_v1_MountsRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_MountsResponse__Output>): grpc.ClientUnaryCall;
  Mounts(argument: _fastpull_v1_MountsRequest, callback: grpc.requestCallback<_fastpull_v1_MountsResponse__Output>): grpc.ClientUnaryCall;
  /**
   * The read-only mounts that present an image's (or a chainID's) tree, as data: the daemon mounts
   * nothing. Add upperdir and workdir options to an overlay mount for a writable root.
   */
  mounts(argument: _fastpull_v1_MountsRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_MountsResponse__Output>): grpc.ClientUnaryCall;
  mounts(argument: _fastpull_v1_MountsRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_fastpull_v1_MountsResponse__Output>): grpc.ClientUnaryCall;
  mounts(argument: _fastpull_v1_MountsRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_MountsResponse__Output>): grpc.ClientUnaryCall;
  mounts(argument: _fastpull_v1_MountsRequest, callback: grpc.requestCallback<_fastpull_v1_MountsResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * Removes a writable mount's record with its upper and work dirs (the changes made in it);
   * NOT_FOUND when there is none. Unmount it first.
   */
  RemoveWritableMount(argument: _fastpull_v1_RemoveWritableMountRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_RemoveWritableMountResponse__Output>): grpc.ClientUnaryCall;
  RemoveWritableMount(argument: _fastpull_v1_RemoveWritableMountRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_fastpull_v1_RemoveWritableMountResponse__Output>): grpc.ClientUnaryCall;
  RemoveWritableMount(argument: _fastpull_v1_RemoveWritableMountRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_RemoveWritableMountResponse__Output>): grpc.ClientUnaryCall;
  RemoveWritableMount(argument: _fastpull_v1_RemoveWritableMountRequest, callback: grpc.requestCallback<_fastpull_v1_RemoveWritableMountResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Removes a writable mount's record with its upper and work dirs (the changes made in it);
   * NOT_FOUND when there is none. Unmount it first.
   */
  removeWritableMount(argument: _fastpull_v1_RemoveWritableMountRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_RemoveWritableMountResponse__Output>): grpc.ClientUnaryCall;
  removeWritableMount(argument: _fastpull_v1_RemoveWritableMountRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_fastpull_v1_RemoveWritableMountResponse__Output>): grpc.ClientUnaryCall;
  removeWritableMount(argument: _fastpull_v1_RemoveWritableMountRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_RemoveWritableMountResponse__Output>): grpc.ClientUnaryCall;
  removeWritableMount(argument: _fastpull_v1_RemoveWritableMountRequest, callback: grpc.requestCallback<_fastpull_v1_RemoveWritableMountResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * Disk usage of one committed snapshot's tree.
   */
  Usage(argument: _fastpull_v1_UsageRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_UsageResponse__Output>): grpc.ClientUnaryCall;
  Usage(argument: _fastpull_v1_UsageRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_fastpull_v1_UsageResponse__Output>): grpc.ClientUnaryCall;
  Usage(argument: _fastpull_v1_UsageRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_UsageResponse__Output>): grpc.ClientUnaryCall;
  Usage(argument: _fastpull_v1_UsageRequest, callback: grpc.requestCallback<_fastpull_v1_UsageResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Disk usage of one committed snapshot's tree.
   */
  usage(argument: _fastpull_v1_UsageRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_UsageResponse__Output>): grpc.ClientUnaryCall;
  usage(argument: _fastpull_v1_UsageRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_fastpull_v1_UsageResponse__Output>): grpc.ClientUnaryCall;
  usage(argument: _fastpull_v1_UsageRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_fastpull_v1_UsageResponse__Output>): grpc.ClientUnaryCall;
  usage(argument: _fastpull_v1_UsageRequest, callback: grpc.requestCallback<_fastpull_v1_UsageResponse__Output>): grpc.ClientUnaryCall;
  
}

/**
 * Snapshots serves the committed snapshots (one directory per layer, named by chainID).
 */
export interface SnapshotsHandlers extends grpc.UntypedServiceImplementation {
  /**
   * Records a writable mount of an image (fresh upper and work dirs in the store, which keep the
   * image's snapshots from garbage collection) and answers the overlay to mount. The daemon mounts
   * nothing: the caller mounts it, in its own mount namespace, and removes the record if it cannot.
   * INVALID_ARGUMENT when a record has that mount point already.
   */
  CreateWritableMount: grpc.handleUnaryCall<_fastpull_v1_CreateWritableMountRequest__Output, _fastpull_v1_CreateWritableMountResponse>;
  
  /**
   * Every committed snapshot.
   */
  List: grpc.handleUnaryCall<_fastpull_v1_ListSnapshotsRequest__Output, _fastpull_v1_ListSnapshotsResponse>;
  
  /**
   * Every writable mount the store has a record of, by mount point.
   */
  ListWritableMounts: grpc.handleUnaryCall<_fastpull_v1_ListWritableMountsRequest__Output, _fastpull_v1_ListWritableMountsResponse>;
  
  /**
   * The read-only mounts that present an image's (or a chainID's) tree, as data: the daemon mounts
   * nothing. Add upperdir and workdir options to an overlay mount for a writable root.
   */
  Mounts: grpc.handleUnaryCall<_fastpull_v1_MountsRequest__Output, _fastpull_v1_MountsResponse>;
  
  /**
   * Removes a writable mount's record with its upper and work dirs (the changes made in it);
   * NOT_FOUND when there is none. Unmount it first.
   */
  RemoveWritableMount: grpc.handleUnaryCall<_fastpull_v1_RemoveWritableMountRequest__Output, _fastpull_v1_RemoveWritableMountResponse>;
  
  /**
   * Disk usage of one committed snapshot's tree.
   */
  Usage: grpc.handleUnaryCall<_fastpull_v1_UsageRequest__Output, _fastpull_v1_UsageResponse>;
  
}

export interface SnapshotsDefinition extends grpc.ServiceDefinition {
  CreateWritableMount: MethodDefinition<_fastpull_v1_CreateWritableMountRequest, _fastpull_v1_CreateWritableMountResponse, _fastpull_v1_CreateWritableMountRequest__Output, _fastpull_v1_CreateWritableMountResponse__Output>
  List: MethodDefinition<_fastpull_v1_ListSnapshotsRequest, _fastpull_v1_ListSnapshotsResponse, _fastpull_v1_ListSnapshotsRequest__Output, _fastpull_v1_ListSnapshotsResponse__Output>
  ListWritableMounts: MethodDefinition<_fastpull_v1_ListWritableMountsRequest, _fastpull_v1_ListWritableMountsResponse, _fastpull_v1_ListWritableMountsRequest__Output, _fastpull_v1_ListWritableMountsResponse__Output>
  Mounts: MethodDefinition<_fastpull_v1_MountsRequest, _fastpull_v1_MountsResponse, _fastpull_v1_MountsRequest__Output, _fastpull_v1_MountsResponse__Output>
  RemoveWritableMount: MethodDefinition<_fastpull_v1_RemoveWritableMountRequest, _fastpull_v1_RemoveWritableMountResponse, _fastpull_v1_RemoveWritableMountRequest__Output, _fastpull_v1_RemoveWritableMountResponse__Output>
  Usage: MethodDefinition<_fastpull_v1_UsageRequest, _fastpull_v1_UsageResponse, _fastpull_v1_UsageRequest__Output, _fastpull_v1_UsageResponse__Output>
}
