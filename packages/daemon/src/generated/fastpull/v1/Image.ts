// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.

import type { Descriptor as _fastpull_v1_Descriptor, Descriptor__Output as _fastpull_v1_Descriptor__Output } from '../../fastpull/v1/Descriptor.js';
import type { Platform as _fastpull_v1_Platform, Platform__Output as _fastpull_v1_Platform__Output } from '../../fastpull/v1/Platform.js';
import type { ImageLayer as _fastpull_v1_ImageLayer, ImageLayer__Output as _fastpull_v1_ImageLayer__Output } from '../../fastpull/v1/ImageLayer.js';
import type { ImageSignatures as _fastpull_v1_ImageSignatures, ImageSignatures__Output as _fastpull_v1_ImageSignatures__Output } from '../../fastpull/v1/ImageSignatures.js';
import type { Long } from '@grpc/proto-loader';

/**
 * An image record: a name pointing to a manifest and the stack of snapshots it unpacked to.
 */
export interface Image {
  /**
   * Canonical reference, e.g. "docker.io/library/ubuntu:24.04".
   */
  'name'?: (string);
  /**
   * What the name resolved to: an index or a manifest.
   */
  'target'?: (_fastpull_v1_Descriptor | null);
  /**
   * The platform manifest that was unpacked.
   */
  'manifest'?: (_fastpull_v1_Descriptor | null);
  /**
   * The image config.
   */
  'config'?: (_fastpull_v1_Descriptor | null);
  /**
   * Platform of the unpacked manifest.
   */
  'platform'?: (_fastpull_v1_Platform | null);
  /**
   * Layers, bottom first.
   */
  'layers'?: (_fastpull_v1_ImageLayer)[];
  /**
   * chainID of the whole stack (the top layer's).
   */
  'chainId'?: (string);
  /**
   * Sum of the compressed layer sizes.
   */
  'size'?: (number | string | Long);
  /**
   * Sum of the uncompressed layer sizes; 0 when not known (a snapshot of the image is missing; a
   * layer tar is never empty, so 0 is no real size).
   */
  'unpackedSize'?: (number | string | Long);
  /**
   * The layer blobs were kept after unpacking.
   */
  'keepBlobs'?: (boolean);
  /**
   * When the image was pulled.
   */
  'created'?: (string);
  /**
   * "containerd" when fastpulld's snapshotter pulled it for containerd (garbage collection removes
   * the record once no containerd snapshot uses its layers); empty for a user's image.
   */
  'heldFor'?: (string);
  /**
   * What the signature policies decided about the image when it was pulled; unset when no policy
   * covered it (or verification was off).
   */
  'signatures'?: (_fastpull_v1_ImageSignatures | null);
}

/**
 * An image record: a name pointing to a manifest and the stack of snapshots it unpacked to.
 */
export interface Image__Output {
  /**
   * Canonical reference, e.g. "docker.io/library/ubuntu:24.04".
   */
  'name': (string);
  /**
   * What the name resolved to: an index or a manifest.
   */
  'target': (_fastpull_v1_Descriptor__Output | null);
  /**
   * The platform manifest that was unpacked.
   */
  'manifest': (_fastpull_v1_Descriptor__Output | null);
  /**
   * The image config.
   */
  'config': (_fastpull_v1_Descriptor__Output | null);
  /**
   * Platform of the unpacked manifest.
   */
  'platform': (_fastpull_v1_Platform__Output | null);
  /**
   * Layers, bottom first.
   */
  'layers': (_fastpull_v1_ImageLayer__Output)[];
  /**
   * chainID of the whole stack (the top layer's).
   */
  'chainId': (string);
  /**
   * Sum of the compressed layer sizes.
   */
  'size': (number);
  /**
   * Sum of the uncompressed layer sizes; 0 when not known (a snapshot of the image is missing; a
   * layer tar is never empty, so 0 is no real size).
   */
  'unpackedSize': (number);
  /**
   * The layer blobs were kept after unpacking.
   */
  'keepBlobs': (boolean);
  /**
   * When the image was pulled.
   */
  'created': (string);
  /**
   * "containerd" when fastpulld's snapshotter pulled it for containerd (garbage collection removes
   * the record once no containerd snapshot uses its layers); empty for a user's image.
   */
  'heldFor': (string);
  /**
   * What the signature policies decided about the image when it was pulled; unset when no policy
   * covered it (or verification was off).
   */
  'signatures': (_fastpull_v1_ImageSignatures__Output | null);
}
