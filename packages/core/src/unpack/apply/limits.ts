// Bounds on one layer's tar, so that a crafted one cannot exhaust memory, disk or time before it is caught.
import { FastpullError } from '../../errors.js';

/**
 * Bounds on one layer, so that a crafted tar cannot exhaust memory, disk or time before it is
 * caught. Going over a size limit fails with INVALID_LAYER, over any other with HOSTILE_LAYER;
 * either error names the limit.
 */
export interface ApplyLimits {
  /** Most bytes in an entry's name or a hardlink's target, as the tar holds it. */
  maxPathBytes: number;
  /** Most components in a path once cleaned. */
  maxPathDepth: number;
  /** Most bytes in a symlink's target. */
  maxSymlinkBytes: number;
  /** Most entries in the layer (PAX and long-name headers count with the entry they describe). */
  maxEntries: number;
  /**
   * Most bytes in the uncompressed tar, and most bytes in all the files it makes, a sparse file
   * counted at its full size.
   */
  maxTotalBytes: number;
  /** Most bytes in one PAX header, GNU long name or sparse map. */
  maxPaxHeaderBytes: number;
  /** Most extended attributes on one entry. */
  maxXattrs: number;
  /** Most bytes in one entry's extended attributes, names and values together. */
  maxXattrBytes: number;
}

/** The limits {@link applyLayer} uses unless told otherwise. */
export const DEFAULT_APPLY_LIMITS: Readonly<ApplyLimits> = Object.freeze({
  // PATH_MAX on Linux: no longer path can be opened from the root in one call anyway.
  maxPathBytes: 4096,
  // Real images nest a few dozen deep; 256 leaves room and keeps per-entry walks short.
  maxPathDepth: 256,
  // PATH_MAX again: the kernel refuses longer symlink targets (ENAMETOOLONG).
  maxSymlinkBytes: 4096,
  // The largest real layers hold about a million entries; every entry costs memory until the end.
  maxEntries: 5_000_000,
  // 1 TiB: far above any real layer, low enough that a forged size cannot promise exabytes.
  maxTotalBytes: 2 ** 40,
  // Go's archive/tar caps these at 1 MiB too: a layer made by Go tooling never has more.
  maxPaxHeaderBytes: 2 ** 20,
  // Real entries carry a few (file capabilities, an SELinux label, ACLs); thousands would each
  // cost a system call and hold the layer's memory.
  maxXattrs: 128,
  // The kernel's own bound on one entry's list of names and on one value (XATTR_LIST_MAX and
  // XATTR_SIZE_MAX): no filesystem can hold more, and ext4 holds much less.
  maxXattrBytes: 65_536,
});

/**
 * How many bytes of tar a compressed layer may inflate to, per byte of blob, unless told otherwise.
 * Deflate cannot pass 1032:1, so no gzip layer reaches it; a zstd frame can (a long run of one
 * byte costs it a few bytes per 128 KiB block), and a small zstd blob could otherwise fill the
 * disk up to the layer size bound.
 */
export const DEFAULT_MAX_INFLATE_RATIO = 1100;

/** Below this, any layer may inflate to this many bytes whatever its ratio: headers and padding of a tiny tar. */
const MIN_INFLATED_BOUND = 64 * 1024 * 1024;

/** The most bytes of tar a compressed blob of `blobBytes` may inflate to; INVALID_ARGUMENT for a ratio that is not a positive number. */
export function inflationBound(blobBytes: number, ratio: number = DEFAULT_MAX_INFLATE_RATIO): number {
  if (!(typeof ratio === 'number' && Number.isFinite(ratio) && ratio > 0)) {
    throw new FastpullError('INVALID_ARGUMENT', `maxInflateRatio must be a positive number, got ${String(ratio)}`);
  }
  return Math.max(MIN_INFLATED_BOUND, Math.ceil(blobBytes * ratio));
}

/** `given` over the defaults; INVALID_ARGUMENT for a value that is not a positive integer. */
export function resolveLimits(given: Partial<ApplyLimits> | undefined, what: string): ApplyLimits {
  const limits: ApplyLimits = { ...DEFAULT_APPLY_LIMITS };
  for (const key of Object.keys(DEFAULT_APPLY_LIMITS) as Array<keyof ApplyLimits>) {
    const value = given?.[key];
    if (value === undefined) continue;
    if (!Number.isSafeInteger(value) || value < 1) {
      throw new FastpullError('INVALID_ARGUMENT', `${what}: limits.${key} must be a positive integer, got ${String(value)}`);
    }
    limits[key] = value;
  }
  return limits;
}

/** The error code for going over `limit`: the sizes are the tar's own fault, the rest an attack's. */
export function limitCode(limit: keyof ApplyLimits): 'HOSTILE_LAYER' | 'INVALID_LAYER' {
  return limit === 'maxTotalBytes' || limit === 'maxPaxHeaderBytes' ? 'INVALID_LAYER' : 'HOSTILE_LAYER';
}
