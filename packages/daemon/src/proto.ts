// Loads the .proto files at run time (no codegen step) and declares the wire shapes of fastpull.v1 as
// @grpc/proto-loader presents them: camelCase fields, int64 as number, enums as their names.
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

/** The directory holding fastpull/v1/fastpull.proto and grpc/health/v1/health.proto (src and dist alike sit beside it). */
export const PROTO_DIR = fileURLToPath(new URL('../proto', import.meta.url));
export const FASTPULL_PROTO = 'fastpull/v1/fastpull.proto';
export const HEALTH_PROTO = 'grpc/health/v1/health.proto';

/** The fully qualified names of the services fastpulld serves (health and reflection aside). */
export const SERVICE_NAMES = ['fastpull.v1.Images', 'fastpull.v1.Snapshots', 'fastpull.v1.Content'] as const;

/** How both server and client turn messages into objects: the same options on both ends. */
const LOADER_OPTIONS: protoLoader.Options = {
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
  return def as grpc.ServiceDefinition;
}

// ---- Wire shapes (see fastpull.proto for each field's meaning) ----

export interface WirePlatform {
  os: string;
  architecture: string;
  variant: string;
  osVersion: string;
  osFeatures: string[];
}

export interface WireDescriptor {
  mediaType: string;
  digest: string;
  size: number;
  urls: string[];
  annotations: Record<string, string>;
  platform: WirePlatform | null;
}

export interface WireImageLayer {
  digest: string;
  size: number;
  mediaType: string;
  diffId: string;
  chainId: string;
}

export interface WireImage {
  name: string;
  target: WireDescriptor | null;
  manifest: WireDescriptor | null;
  config: WireDescriptor | null;
  platform: WirePlatform | null;
  layers: WireImageLayer[];
  chainId: string;
  size: number;
  /** 0: not known. */
  unpackedSize: number;
  keepBlobs: boolean;
  created: string;
}

export interface WireMount {
  type: string;
  source: string;
  options: string[];
}

export interface WirePullRequest {
  reference: string;
  platform: string;
  plainHttp: boolean;
  keepBlobs: boolean;
  credentials: { username: string; password: string } | null;
}

export type WireLayerState =
  | 'LAYER_STATE_UNSPECIFIED'
  | 'LAYER_STATE_WAITING'
  | 'LAYER_STATE_FETCHING'
  | 'LAYER_STATE_VERIFYING'
  | 'LAYER_STATE_EXTRACTING'
  | 'LAYER_STATE_COMMITTED'
  | 'LAYER_STATE_EXISTS';

export interface WireResolved {
  name: string;
  manifest: string;
  platform: WirePlatform | null;
  layers: { digest: string; size: number; chainId: string }[];
}

export interface WireLayerProgress {
  index: number;
  digest: string;
  state: WireLayerState;
  bytes: number;
  total: number;
}

export interface WireLayerTimings {
  digest: string;
  fetchMs: number;
  unpackMs: number;
  waitMs: number;
  verifyMs: number;
  decompressMs: number;
  extractMs: number;
  commitMs: number;
  state: string;
}

export interface WirePhaseTotals {
  resolveMs: number;
  fetchMs: number;
  verifyMs: number;
  decompressMs: number;
  extractMs: number;
  commitMs: number;
}

export interface WirePullTimings {
  resolveMs: number;
  totalMs: number;
  layers: WireLayerTimings[];
  phases: WirePhaseTotals | null;
}

export interface WirePullDone {
  image: WireImage | null;
  timings: WirePullTimings | null;
  root: string;
  snapshots: string[];
  mounts: WireMount[];
}

export interface WirePullResponse {
  event?: 'resolved' | 'layer' | 'done';
  resolved?: WireResolved | null;
  layer?: WireLayerProgress | null;
  done?: WirePullDone | null;
}

export interface WireGetImageResponse {
  image: WireImage | null;
  root: string;
  snapshots: string[];
  manifestJson: string;
  configJson: string;
  indexJson: string;
}

export interface WireBlobInfo {
  digest: string;
  size: number;
}

export interface WireGcResponse {
  blobs: WireBlobInfo[];
  snapshots: { chainId: string; size: number }[];
  litter: number;
  bytes: number;
  dryRun: boolean;
}

export interface WireSnapshotInfo {
  chainId: string;
  diffId: string;
  parent: string;
  size: number;
  created: string;
  rootless: boolean;
}

export interface WireMountsRequest {
  target?: 'image' | 'chainId';
  image?: string;
  chainId?: string;
}
