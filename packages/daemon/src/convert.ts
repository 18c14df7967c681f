// Between the library's types and their fastpull.v1 wire shapes, both ways. Optional fields absent in
// the library are absent again after a round trip, and keys come back in the library's order, so a
// record printed from the daemon reads exactly as one printed from the store.
import {
  FastpullError,
  parseCpuBudget,
  type BlobEntry,
  type Descriptor,
  type Digest,
  type GcLeftover,
  type GcResult,
  type ImageRecord,
  type ImageSignatures,
  type LayerState,
  type Mount,
  type Platform,
  type PullEvent,
  type PullPriority,
  type PullTimings,
  type SignatureVerdict,
  type TraceDocument,
} from '@fastpull/core';
import type { SnapshotInfo } from '@fastpull/core/snapshots';
import type {
  WireBlobInfo,
  WireDescriptor,
  WireGcResponse,
  WireImage,
  WireImageSignatures,
  WireLayerState,
  WireMount,
  WirePlatform,
  WirePhaseTotals,
  WirePullPriority,
  WirePullResponse,
  WirePullTimings,
  WireSnapshotInfo,
} from './proto.js';

const STATES: Readonly<Record<LayerState, WireLayerState>> = {
  waiting: 'LAYER_STATE_WAITING',
  fetching: 'LAYER_STATE_FETCHING',
  verifying: 'LAYER_STATE_VERIFYING',
  extracting: 'LAYER_STATE_EXTRACTING',
  committed: 'LAYER_STATE_COMMITTED',
  exists: 'LAYER_STATE_EXISTS',
};
const STATE_OF_WIRE = new Map<string, LayerState>(Object.entries(STATES).map(([k, v]) => [v, k as LayerState]));

const PRIORITIES: Readonly<Record<PullPriority, WirePullPriority>> = { high: 'PULL_PRIORITY_HIGH', normal: 'PULL_PRIORITY_NORMAL', low: 'PULL_PRIORITY_LOW' };

export function priorityToWire(p: PullPriority | undefined): WirePullPriority {
  return p === undefined ? 'PULL_PRIORITY_UNSPECIFIED' : PRIORITIES[p];
}

/** A request's priority; unspecified is normal. INVALID_ARGUMENT for a value this daemon does not know. */
export function priorityFromWire(w: string | number | null | undefined): PullPriority {
  if (w === undefined || w === null || w === 'PULL_PRIORITY_UNSPECIFIED' || w === 0) return 'normal';
  for (const [k, v] of Object.entries(PRIORITIES)) if (v === w) return k as PullPriority;
  throw new FastpullError('INVALID_ARGUMENT', `pull priority ${String(w)}: want PULL_PRIORITY_HIGH, PULL_PRIORITY_NORMAL or PULL_PRIORITY_LOW`);
}

/**
 * A request's rate limit in bytes per second (0: none of its own). uint64 arrives as a number past
 * 2^53 too, or as a string: INVALID_ARGUMENT for what is not a whole number of bytes.
 */
export function rateLimitFromWire(w: number | string | null | undefined): number {
  const n = typeof w === 'string' ? Number(w) : (w ?? 0);
  if (!Number.isSafeInteger(n) || n < 0)
    throw new FastpullError('INVALID_ARGUMENT', `pull rate_limit_bytes_per_second ${String(w)}: want a whole number of bytes per second (0: no limit)`);
  return n;
}

/** A request's CPU budget in whole cores; 0 or absent: none of its own (uint32: always a whole number). */
export function cpuBudgetFromWire(w: number | null | undefined): number | undefined {
  return w ? parseCpuBudget(w, 'pull cpu_budget') : undefined;
}

export function platformToWire(p: Platform): WirePlatform {
  return { os: p.os, architecture: p.architecture, variant: p.variant ?? '', osVersion: p['os.version'] ?? '', osFeatures: [...(p['os.features'] ?? [])] };
}

export function platformFromWire(p: WirePlatform | null | undefined): Platform {
  if (!p) return { os: '', architecture: '' };
  return {
    os: p.os,
    architecture: p.architecture,
    ...(p.variant ? { variant: p.variant } : {}),
    ...(p.osVersion ? { 'os.version': p.osVersion } : {}),
    ...(p.osFeatures.length > 0 ? { 'os.features': p.osFeatures } : {}),
  };
}

export function descriptorToWire(d: Descriptor): WireDescriptor {
  return {
    mediaType: d.mediaType,
    digest: d.digest,
    size: d.size,
    urls: [...(d.urls ?? [])],
    annotations: { ...(d.annotations ?? {}) },
    platform: d.platform ? platformToWire(d.platform) : null,
  };
}

export function descriptorFromWire(d: WireDescriptor | null | undefined): Descriptor {
  if (!d) return { mediaType: '', digest: '' as Digest, size: 0 };
  return {
    mediaType: d.mediaType,
    digest: d.digest as Digest,
    size: d.size,
    ...(d.urls.length > 0 ? { urls: d.urls } : {}),
    ...(Object.keys(d.annotations).length > 0 ? { annotations: d.annotations } : {}),
    ...(d.platform ? { platform: platformFromWire(d.platform) } : {}),
  };
}

/** `unpackedSize` overrides the record's (null: unknown). */
export function imageToWire(i: ImageRecord, unpackedSize?: number | null): WireImage {
  const unpacked = unpackedSize === undefined ? i.unpackedSize : unpackedSize;
  return {
    name: i.name,
    target: descriptorToWire(i.target),
    manifest: descriptorToWire(i.manifest),
    config: descriptorToWire(i.config),
    platform: platformToWire(i.platform),
    layers: i.layers.map((l) => ({ digest: l.digest, size: l.size, mediaType: l.mediaType, diffId: l.diffID, chainId: l.chainID })),
    chainId: i.chainID,
    size: i.size,
    unpackedSize: unpacked ?? 0,
    keepBlobs: i.keepBlobs === true,
    heldFor: i.heldFor ?? '',
    created: i.created,
    signatures: i.signatures ? signaturesToWire(i.signatures) : null,
  };
}

/** An image's signature verdict as sent: absent strings are empty. */
export function signaturesToWire(s: ImageSignatures): WireImageSignatures {
  return {
    outcome: s.outcome,
    verdicts: s.verdicts.map((v) => ({
      kind: v.kind,
      level: v.level,
      outcome: v.outcome,
      scope: v.scope ?? '',
      signature: v.signature ?? '',
      checks: v.checks.map((c) => ({ signature: c.signature ?? '', check: c.check, ok: c.ok, message: c.message })),
    })),
    verifiedAt: s.verifiedAt,
  };
}

/** A received verdict, fields in the library's order, empty strings absent again. */
export function signaturesFromWire(w: WireImageSignatures): ImageSignatures {
  return {
    outcome: w.outcome as ImageSignatures['outcome'],
    verdicts: w.verdicts.map((v): SignatureVerdict => ({
      kind: v.kind as SignatureVerdict['kind'],
      level: v.level as SignatureVerdict['level'],
      outcome: v.outcome as SignatureVerdict['outcome'],
      ...(v.scope ? { scope: v.scope } : {}),
      ...(v.signature ? { signature: v.signature as Digest } : {}),
      checks: v.checks.map((c) => ({ ...(c.signature ? { signature: c.signature as Digest } : {}), check: c.check, ok: c.ok, message: c.message })),
    })),
    verifiedAt: w.verifiedAt,
  };
}

export function imageFromWire(w: WireImage | null | undefined): ImageRecord {
  if (!w) throw new TypeError('the daemon sent no image');
  return {
    name: w.name,
    target: descriptorFromWire(w.target),
    manifest: descriptorFromWire(w.manifest),
    config: descriptorFromWire(w.config),
    platform: platformFromWire(w.platform),
    layers: w.layers.map((l) => ({
      digest: l.digest as Digest,
      size: l.size,
      mediaType: l.mediaType,
      diffID: l.diffId as Digest,
      chainID: l.chainId as Digest,
    })),
    chainID: w.chainId as Digest,
    size: w.size,
    ...(w.unpackedSize > 0 ? { unpackedSize: w.unpackedSize } : {}),
    ...(w.keepBlobs ? { keepBlobs: true } : {}),
    created: w.created,
    ...(w.heldFor === 'containerd' ? { heldFor: 'containerd' as const } : {}),
    ...(w.signatures ? { signatures: signaturesFromWire(w.signatures) } : {}),
  };
}

export function mountToWire(m: Mount): WireMount {
  return { type: m.type, source: m.source, options: [...m.options] };
}

export function mountFromWire(m: WireMount): Mount {
  return { type: m.type, source: m.source, options: m.options };
}

export function timingsToWire(t: PullTimings): WirePullTimings {
  return {
    resolveMs: t.resolveMs,
    totalMs: t.totalMs,
    // Field by field, so that a field the wire lacks is a compile error rather than dropped unseen.
    layers: t.layers.map((l) => ({
      digest: l.digest,
      fetchMs: l.fetchMs,
      unpackMs: l.unpackMs,
      waitMs: l.waitMs,
      verifyMs: l.verifyMs,
      decompressMs: l.decompressMs,
      extractMs: l.extractMs,
      commitMs: l.commitMs,
      state: l.state,
      threadCpu: l.threadCpuMs !== undefined ? { ms: l.threadCpuMs } : null,
      blobHashCpu: l.blobHashCpuMs !== undefined ? { ms: l.blobHashCpuMs } : null,
      inflateCpu: l.inflateCpuMs !== undefined ? { ms: l.inflateCpuMs } : null,
      tarHashCpu: l.tarHashCpuMs !== undefined ? { ms: l.tarHashCpuMs } : null,
      writerCpu: l.writerCpuMs !== undefined ? { ms: l.writerCpuMs } : null,
      ztocCheckpoints: l.ztocCheckpoints !== undefined ? { n: l.ztocCheckpoints } : null,
      releasedBytes: l.releasedBytes ?? 0,
    })),
    phases: phasesToWire(t),
  };
}

/**
 * The per-layer phase sums, plus the pull's resolve time as `resolveMs` among them: where the wire
 * (and the daemon's log line of a pull) had it before it moved out of the library's PhaseTotals.
 * Deprecated there, and still sent so that readers written before keep working.
 */
export function phasesToWire(t: PullTimings): WirePhaseTotals {
  return { resolveMs: t.resolveMs, ...t.phases };
}

export function timingsFromWire(t: WirePullTimings | null | undefined): PullTimings {
  if (!t) throw new TypeError('the daemon sent no timings');
  const p = t.phases ?? { fetchMs: 0, verifyMs: 0, decompressMs: 0, extractMs: 0, commitMs: 0 };
  return {
    resolveMs: t.resolveMs,
    totalMs: t.totalMs,
    layers: t.layers.map((l) => ({
      digest: l.digest as Digest,
      fetchMs: l.fetchMs,
      unpackMs: l.unpackMs,
      waitMs: l.waitMs,
      verifyMs: l.verifyMs,
      decompressMs: l.decompressMs,
      extractMs: l.extractMs,
      commitMs: l.commitMs,
      state: l.state === 'exists' ? 'exists' : 'committed',
      ...(l.threadCpu ? { threadCpuMs: l.threadCpu.ms } : {}),
      ...(l.blobHashCpu ? { blobHashCpuMs: l.blobHashCpu.ms } : {}),
      ...(l.inflateCpu ? { inflateCpuMs: l.inflateCpu.ms } : {}),
      ...(l.tarHashCpu ? { tarHashCpuMs: l.tarHashCpu.ms } : {}),
      ...(l.writerCpu ? { writerCpuMs: l.writerCpu.ms } : {}),
      ...(l.ztocCheckpoints ? { ztocCheckpoints: l.ztocCheckpoints.n } : {}),
      ...(l.releasedBytes ? { releasedBytes: Number(l.releasedBytes) } : {}),
    })),
    phases: { fetchMs: p.fetchMs, verifyMs: p.verifyMs, decompressMs: p.decompressMs, extractMs: p.extractMs, commitMs: p.commitMs },
  };
}

/** Where a pulled image lies in the daemon's store (sent with `done`). */
export interface PullPlacement {
  readonly root: string;
  readonly snapshots: readonly string[];
  readonly mounts: readonly Mount[];
}

/** A progress event as sent; `done` needs the placement too. */
export function eventToWire(e: PullEvent, placement?: PullPlacement): WirePullResponse {
  switch (e.type) {
    case 'resolved':
      return {
        resolved: {
          name: e.name,
          manifest: e.manifest,
          platform: platformToWire(e.platform),
          layers: e.layers.map((l) => ({ digest: l.digest, size: l.size, chainId: l.chainID })),
        },
      };
    case 'layer':
      return {
        layer: {
          index: e.index,
          digest: e.digest,
          state: STATES[e.state],
          bytes: e.bytes,
          total: e.total,
          unpack: e.unpacked !== undefined ? { consumed: e.unpacked } : null,
        },
      };
    case 'done':
      return {
        done: {
          image: imageToWire(e.image),
          timings: timingsToWire(e.timings),
          root: placement?.root ?? '',
          snapshots: [...(placement?.snapshots ?? [])],
          mounts: (placement?.mounts ?? []).map(mountToWire),
        },
      };
  }
}

/** A pull's trace as sent (the JSON of a TraceDocument). */
export function traceToWire(trace: TraceDocument): WirePullResponse {
  return { trace: { json: JSON.stringify(trace) } };
}

/** A received trace message's document. */
export function traceFromWire(json: string): TraceDocument {
  let doc: unknown;
  try {
    doc = JSON.parse(json);
  } catch (e) {
    throw new FastpullError('INTERNAL', `the daemon sent a trace that is not JSON: ${(e as Error).message}`);
  }
  if (typeof doc !== 'object' || doc === null || !Array.isArray((doc as { traceEvents?: unknown }).traceEvents))
    throw new FastpullError('INTERNAL', 'the daemon sent a trace without traceEvents');
  return doc as TraceDocument;
}

/** A received message as the library's event; `done` comes with where the image lies. */
export function eventFromWire(w: WirePullResponse): { event: PullEvent; placement?: PullPlacement } {
  if (w.resolved) {
    const r = w.resolved;
    return {
      event: {
        type: 'resolved',
        name: r.name,
        manifest: r.manifest as Digest,
        platform: platformFromWire(r.platform),
        layers: r.layers.map((l) => ({ digest: l.digest as Digest, size: l.size, chainID: l.chainId as Digest })),
      },
    };
  }
  if (w.layer) {
    const l = w.layer;
    const state = STATE_OF_WIRE.get(l.state);
    if (!state) throw new TypeError(`the daemon sent an unknown layer state ${l.state}`);
    const unpacked = l.unpack ? Number(l.unpack.consumed) : undefined;
    return {
      event: {
        type: 'layer',
        index: l.index,
        digest: l.digest as Digest,
        state,
        bytes: l.bytes,
        total: l.total,
        ...(unpacked !== undefined ? { unpacked } : {}),
      },
    };
  }
  if (w.done) {
    const d = w.done;
    return {
      event: { type: 'done', image: imageFromWire(d.image), timings: timingsFromWire(d.timings) },
      placement: { root: d.root, snapshots: d.snapshots, mounts: d.mounts.map(mountFromWire) },
    };
  }
  throw new TypeError('the daemon sent an empty progress message');
}

export function gcToWire(r: GcResult, dryRun: boolean): WireGcResponse {
  return {
    blobs: r.blobs.map((b) => ({ digest: b.digest, size: b.size })),
    snapshots: r.snapshots.map((s) => ({ chainId: s.chainID, size: s.size })),
    litter: r.litter,
    bytes: r.bytes,
    dryRun,
    leftovers: (r.leftovers ?? []).map((l) => ({ kind: l.kind, path: l.path })),
    images: r.images.map((i) => ({ name: i.name, platform: i.platform })),
  };
}

export function gcFromWire(w: WireGcResponse): GcResult {
  return {
    blobs: w.blobs.map((b) => ({ digest: b.digest as Digest, size: b.size })),
    snapshots: w.snapshots.map((s) => ({ chainID: s.chainId as Digest, size: s.size })),
    litter: w.litter,
    leftovers: w.leftovers.map((l) => ({ kind: leftoverKind(l.kind), path: l.path })),
    bytes: w.bytes,
    images: w.images.map((i) => ({ name: i.name, platform: i.platform })),
  };
}

const LEFTOVER_KINDS: readonly GcLeftover['kind'][] = ['lease', 'ingest', 'active', 'trash', 'temp'];

function leftoverKind(kind: string): GcLeftover['kind'] {
  const known = LEFTOVER_KINDS.find((k) => k === kind);
  if (!known) throw new TypeError(`the daemon sent an unknown kind of leftover ${kind}`);
  return known;
}

export function snapshotToWire(s: SnapshotInfo): WireSnapshotInfo {
  return { chainId: s.chainID, diffId: s.diffID, parent: s.parent ?? '', size: s.size, created: s.created, rootless: s.rootless === true };
}

export function snapshotFromWire(w: WireSnapshotInfo): SnapshotInfo {
  return {
    chainID: w.chainId as Digest,
    diffID: w.diffId as Digest,
    ...(w.parent ? { parent: w.parent as Digest } : {}),
    size: w.size,
    created: w.created,
    ...(w.rootless ? { rootless: true } : {}),
  };
}

export function blobToWire(b: BlobEntry): WireBlobInfo {
  return { digest: b.digest, size: b.size };
}

export function blobFromWire(w: WireBlobInfo | null | undefined): BlobEntry {
  if (!w) throw new TypeError('the daemon sent no blob');
  return { digest: w.digest as Digest, size: w.size };
}
