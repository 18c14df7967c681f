// The one fastpull service every front end stands on: the CLI, fastpulld's gRPC API and its
// containerd snapshotter call these methods and nothing else. Two implementations: LocalService owns a
// store (with its fetch scheduler and worker pools) in this process; the daemon's client implements the
// same interface over gRPC, so a front end picks one at start and never asks "local or remote" again.
//
// Words: an *image* is a record naming a manifest and the chainID-named snapshots it unpacked to; its
// *placement* is where those lie (store root, snapshot directories, the read-only mounts). Every method
// throws FastpullError with a stable code; a remote implementation rebuilds the same code.
import type { Credentials } from '../registry/auth.js';
import type { Digest } from '../oci/digest.js';
import type { GcResult } from '../gc/gc.js';
import type { ImageDetails } from '../store/inspect.js';
import type { ImageRecord } from '../images/store.js';
import type { WritableMount } from '../store/writable.js';
import type { MountRecord } from '../snapshots/mountrecords.js';
import type { PullEvent, PullPriority, PullResult } from '../pull/pull.js';
import type { TraceDocument } from '../pull/trace.js';
import type { Mount, SnapshotInfo } from '../snapshots/store.js';
import type { SnapshotUsage } from '../snapshots/usage.js';

/** Options of one pull through a service. */
export interface ServicePullOptions {
  /** `os/arch[/variant]`; default: the service's host. */
  readonly platform?: string;
  /** Plain HTTP to the registry (loopback registries always may). */
  readonly plainHttp?: boolean;
  /** Keep the compressed layer blobs after unpacking (the service may keep them anyway). */
  readonly keepBlobs?: boolean;
  /**
   * Credentials for the reference's registry only, before the service's own sources (Docker's
   * config.json); never sent to a mirror or another host, never logged.
   */
  readonly credentials?: Credentials;
  /** Stops the pull (or, where pulls are shared, this caller's interest in it). */
  readonly signal?: AbortSignal;
  /** Each progress event, the last one `done`. */
  readonly onProgress?: (event: PullEvent) => void;
  /**
   * Asks for a trace of the pull (see TraceRecorder), recorded where the pull runs: called once with
   * the document when the pull has ended, failed or not, before the pull's promise settles.
   */
  readonly onTrace?: (trace: TraceDocument) => void;
  /**
   * How urgent the pull is among the service's pulls (default `normal`): `high` for one a container
   * start waits on; a `low` (background) pull gives way to every other (see PullOptions.priority).
   */
  readonly priority?: PullPriority;
  /**
   * Bytes per second this pull may read from registries (see PullOptions.rateLimit); 0 or unset:
   * no limit of its own. It only lowers what the service allows: the service's own budget, shared
   * by all its pulls, holds as well.
   */
  readonly rateLimit?: number;
  /**
   * Whole cores this pull's unpack work may keep busy at once (see PullOptions.cpuBudget), while the
   * service's other pulls keep theirs; unset: none of its own. A budget of the whole service (its
   * process) holds as well.
   */
  readonly cpuBudget?: number;
}

/** Where a pulled image lies. */
export interface Placement {
  /** Absolute path of the store root. */
  readonly root: string;
  /** The snapshot directory of each layer, bottom first. */
  readonly snapshots: readonly string[];
  /**
   * The read-only mounts that present the image's tree; none when its layers are too many for one
   * mount's options under this store root (`mounts` of the image then fails, saying so).
   */
  readonly mounts: readonly Mount[];
}

/** A finished pull: the record and timings, and where the image lies. */
export interface PulledImage extends PullResult, Placement {}

/**
 * What to present as mounts: an image by reference (and platform, for a name pulled for several), or
 * a stack of snapshots by its top chainID.
 */
export type MountTarget = { readonly image: string; readonly platform?: string } | { readonly chainID: Digest };

/** Which record of a name pulled for several platforms, and a signal. */
export interface ImageOptions {
  /** `os/arch[/variant]`; default this host's record, or the only one (for remove: every one). */
  readonly platform?: string;
  /** Stops waiting for the answer. */
  readonly signal?: AbortSignal;
}

/** A blob of the content store. */
export interface BlobEntry {
  /** Its digest. */
  readonly digest: Digest;
  /** Its size in bytes. */
  readonly size: number;
}

/** The operations of fastpull, as any front end reaches them. */
export interface FastpullService {
  /** Where the service works, for messages: the store root, or `unix:<socket>` of a daemon. */
  readonly location: string;
  /** Pulls an image into the store and says where it lies. */
  pull(reference: string, options?: ServicePullOptions): Promise<PulledImage>;
  /** Every image record, by name; `unpackedSize` is what its snapshots hold now, absent when one is gone. */
  listImages(signal?: AbortSignal): Promise<ImageRecord[]>;
  /** One image, found by any spelling of its reference (digests too), with its documents. NOT_FOUND when absent. */
  inspectImage(reference: string, options?: ImageOptions): Promise<ImageDetails>;
  /**
   * Forgets an image's records (every platform, or the one named; its snapshots and blobs stay until
   * gc); returns its canonical name.
   */
  removeImage(reference: string, options?: ImageOptions): Promise<{ readonly name: string }>;
  /** The read-only mounts of an image or snapshot stack. */
  mounts(target: MountTarget, signal?: AbortSignal): Promise<Mount[]>;
  /**
   * Records a writable mount of an image at `target` (the mount point: absolute, symlinks resolved)
   * with fresh upper and work dirs in the store, and gives the overlay to mount there. The service
   * mounts nothing: the caller, on the host and in the mount namespace where `target` is, does, and
   * removes the record if it cannot. INVALID_ARGUMENT when a record has that target already.
   */
  createWritableMount(image: { readonly image: string; readonly platform?: string }, target: string, signal?: AbortSignal): Promise<WritableMount>;
  /** Every writable mount the store has a record of, by target. */
  listWritableMounts(signal?: AbortSignal): Promise<MountRecord[]>;
  /**
   * Removes a writable mount's record with its upper and work dirs (the changes made in it); returns
   * the record, NOT_FOUND when there is none. Unmount it first.
   */
  removeWritableMount(id: string, signal?: AbortSignal): Promise<MountRecord>;
  /** Removes what nothing refers to (or, with dryRun, says what it would remove). */
  collectGarbage(options?: { readonly dryRun?: boolean; readonly signal?: AbortSignal }): Promise<GcResult>;
  /** Every committed snapshot, by chainID. */
  listSnapshots(signal?: AbortSignal): Promise<SnapshotInfo[]>;
  /** Disk usage of one committed snapshot. */
  snapshotUsage(chainID: Digest, signal?: AbortSignal): Promise<SnapshotUsage>;
  /** Digest and size of one blob; NOT_FOUND when the store does not hold it. */
  contentInfo(digest: Digest, signal?: AbortSignal): Promise<BlobEntry>;
  /** Every blob, by digest. */
  listContent(signal?: AbortSignal): Promise<BlobEntry[]>;
  /** Removes one blob; INVALID_ARGUMENT while an image or a running pull uses it. */
  deleteContent(digest: Digest, signal?: AbortSignal): Promise<void>;
  /** Lets go of what the service holds (connections; a local service's own pools). */
  close(): Promise<void>;
}
