// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.

import type { BlobInfo as _fastpull_v1_BlobInfo, BlobInfo__Output as _fastpull_v1_BlobInfo__Output } from '../../fastpull/v1/BlobInfo.js';
import type { RemovedSnapshot as _fastpull_v1_RemovedSnapshot, RemovedSnapshot__Output as _fastpull_v1_RemovedSnapshot__Output } from '../../fastpull/v1/RemovedSnapshot.js';
import type { ReleasedImage as _fastpull_v1_ReleasedImage, ReleasedImage__Output as _fastpull_v1_ReleasedImage__Output } from '../../fastpull/v1/ReleasedImage.js';
import type { GcLeftover as _fastpull_v1_GcLeftover, GcLeftover__Output as _fastpull_v1_GcLeftover__Output } from '../../fastpull/v1/GcLeftover.js';
import type { Long } from '@grpc/proto-loader';

/**
 * What garbage collection removed (or would remove, in a dry run).
 */
export interface GarbageCollectResponse {
  /**
   * Blobs removed.
   */
  'blobs'?: (_fastpull_v1_BlobInfo)[];
  /**
   * Snapshots removed.
   */
  'snapshots'?: (_fastpull_v1_RemovedSnapshot)[];
  /**
   * Partial downloads and unpacks left by processes that died.
   */
  'litter'?: (number | string | Long);
  /**
   * Blob bytes plus uncompressed layer bytes of the removed snapshots.
   */
  'bytes'?: (number | string | Long);
  /**
   * Nothing was removed: it was a dry run.
   */
  'dryRun'?: (boolean);
  /**
   * Image records fastpulld's snapshotter held for containerd that no containerd snapshot used any
   * more, removed.
   */
  'images'?: (_fastpull_v1_ReleasedImage)[];
  /**
   * Each of the leftovers `litter` counts, named (a dry run names exactly what a collection would
   * remove).
   */
  'leftovers'?: (_fastpull_v1_GcLeftover)[];
}

/**
 * What garbage collection removed (or would remove, in a dry run).
 */
export interface GarbageCollectResponse__Output {
  /**
   * Blobs removed.
   */
  'blobs': (_fastpull_v1_BlobInfo__Output)[];
  /**
   * Snapshots removed.
   */
  'snapshots': (_fastpull_v1_RemovedSnapshot__Output)[];
  /**
   * Partial downloads and unpacks left by processes that died.
   */
  'litter': (number);
  /**
   * Blob bytes plus uncompressed layer bytes of the removed snapshots.
   */
  'bytes': (number);
  /**
   * Nothing was removed: it was a dry run.
   */
  'dryRun': (boolean);
  /**
   * Image records fastpulld's snapshotter held for containerd that no containerd snapshot used any
   * more, removed.
   */
  'images': (_fastpull_v1_ReleasedImage__Output)[];
  /**
   * Each of the leftovers `litter` counts, named (a dry run names exactly what a collection would
   * remove).
   */
  'leftovers': (_fastpull_v1_GcLeftover__Output)[];
}
