// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.

import type * as grpc from '@grpc/grpc-js'
import type { MethodDefinition } from '@grpc/proto-loader'
import type { ListSnapshotsRequest as _fastpull_v1_ListSnapshotsRequest, ListSnapshotsRequest__Output as _fastpull_v1_ListSnapshotsRequest__Output } from '../../fastpull/v1/ListSnapshotsRequest.js';
import type { ListSnapshotsResponse as _fastpull_v1_ListSnapshotsResponse, ListSnapshotsResponse__Output as _fastpull_v1_ListSnapshotsResponse__Output } from '../../fastpull/v1/ListSnapshotsResponse.js';
import type { MountsRequest as _fastpull_v1_MountsRequest, MountsRequest__Output as _fastpull_v1_MountsRequest__Output } from '../../fastpull/v1/MountsRequest.js';
import type { MountsResponse as _fastpull_v1_MountsResponse, MountsResponse__Output as _fastpull_v1_MountsResponse__Output } from '../../fastpull/v1/MountsResponse.js';
import type { UsageRequest as _fastpull_v1_UsageRequest, UsageRequest__Output as _fastpull_v1_UsageRequest__Output } from '../../fastpull/v1/UsageRequest.js';
import type { UsageResponse as _fastpull_v1_UsageResponse, UsageResponse__Output as _fastpull_v1_UsageResponse__Output } from '../../fastpull/v1/UsageResponse.js';

/**
 * Snapshots serves the committed snapshots (one directory per layer, named by chainID).
 */
export interface SnapshotsClient extends grpc.Client {
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
   * Every committed snapshot.
   */
  List: grpc.handleUnaryCall<_fastpull_v1_ListSnapshotsRequest__Output, _fastpull_v1_ListSnapshotsResponse>;
  
  /**
   * The read-only mounts that present an image's (or a chainID's) tree, as data: the daemon mounts
   * nothing. Add upperdir and workdir options to an overlay mount for a writable root.
   */
  Mounts: grpc.handleUnaryCall<_fastpull_v1_MountsRequest__Output, _fastpull_v1_MountsResponse>;
  
  /**
   * Disk usage of one committed snapshot's tree.
   */
  Usage: grpc.handleUnaryCall<_fastpull_v1_UsageRequest__Output, _fastpull_v1_UsageResponse>;
  
}

export interface SnapshotsDefinition extends grpc.ServiceDefinition {
  List: MethodDefinition<_fastpull_v1_ListSnapshotsRequest, _fastpull_v1_ListSnapshotsResponse, _fastpull_v1_ListSnapshotsRequest__Output, _fastpull_v1_ListSnapshotsResponse__Output>
  Mounts: MethodDefinition<_fastpull_v1_MountsRequest, _fastpull_v1_MountsResponse, _fastpull_v1_MountsRequest__Output, _fastpull_v1_MountsResponse__Output>
  Usage: MethodDefinition<_fastpull_v1_UsageRequest, _fastpull_v1_UsageResponse, _fastpull_v1_UsageRequest__Output, _fastpull_v1_UsageResponse__Output>
}
