// containerd's snapshotter API as fastpulld loads it (its own trimmed copy of containerd's .proto
// files, loaded at run time), and the wire shapes @grpc/proto-loader gives its messages.
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { LOADER_OPTIONS } from '../proto.js';

/** The snapshotter API's .proto, relative to the daemon's proto directory. */
export const SNAPSHOTS_PROTO = 'containerd/services/snapshots/v1/snapshots.proto';
/** The service containerd's proxy snapshotter calls. */
export const SNAPSHOTS_SERVICE = 'containerd.services.snapshots.v1.Snapshots';

let cached: protoLoader.PackageDefinition | undefined;

/** containerd.services.snapshots.v1 and containerd.types, loaded once, as fastpull.v1 is. */
export function snapshotsPackage(): protoLoader.PackageDefinition {
  cached ??= protoLoader.loadSync([SNAPSHOTS_PROTO], LOADER_OPTIONS);
  return cached;
}

/** The service definition of containerd.services.snapshots.v1.Snapshots. */
export function snapshotsService(): grpc.ServiceDefinition {
  return snapshotsPackage()[SNAPSHOTS_SERVICE] as grpc.ServiceDefinition;
}

export type WireKind = 'UNKNOWN' | 'VIEW' | 'ACTIVE' | 'COMMITTED';

export interface WireTimestamp {
  seconds: number;
  nanos: number;
}

export interface WireInfo {
  name: string;
  parent: string;
  kind: WireKind;
  createdAt: WireTimestamp | null;
  updatedAt: WireTimestamp | null;
  labels: Record<string, string>;
}

export interface WireMount {
  type: string;
  source: string;
  target: string;
  options: string[];
}

export interface WirePrepareRequest {
  snapshotter: string;
  key: string;
  parent: string;
  labels: Record<string, string>;
}

export interface WireCommitRequest {
  snapshotter: string;
  name: string;
  key: string;
  labels: Record<string, string>;
}

export interface WireKeyRequest {
  snapshotter: string;
  key: string;
}

export interface WireUpdateRequest {
  snapshotter: string;
  info: WireInfo | null;
  updateMask: { paths: string[] } | null;
}

export interface WireListRequest {
  snapshotter: string;
  filters: string[];
}
