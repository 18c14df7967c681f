// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.

import type { Platform as _fastpull_v1_Platform, Platform__Output as _fastpull_v1_Platform__Output } from '../../fastpull/v1/Platform.js';
import type { ResolvedLayer as _fastpull_v1_ResolvedLayer, ResolvedLayer__Output as _fastpull_v1_ResolvedLayer__Output } from '../../fastpull/v1/ResolvedLayer.js';

/**
 * The reference resolved to a platform manifest.
 */
export interface Resolved {
  /**
   * Canonical reference.
   */
  'name'?: (string);
  /**
   * Digest of the platform manifest.
   */
  'manifest'?: (string);
  /**
   * Its platform.
   */
  'platform'?: (_fastpull_v1_Platform | null);
  /**
   * Its layers, bottom first.
   */
  'layers'?: (_fastpull_v1_ResolvedLayer)[];
}

/**
 * The reference resolved to a platform manifest.
 */
export interface Resolved__Output {
  /**
   * Canonical reference.
   */
  'name': (string);
  /**
   * Digest of the platform manifest.
   */
  'manifest': (string);
  /**
   * Its platform.
   */
  'platform': (_fastpull_v1_Platform__Output | null);
  /**
   * Its layers, bottom first.
   */
  'layers': (_fastpull_v1_ResolvedLayer__Output)[];
}
