// pull(): reference -> verified manifest and config -> every layer fetched, verified and unpacked into
// its snapshot concurrently -> image record. Nothing unverified is ever committed. The steps of one
// layer are in layer.ts (download.ts, verify.ts, commit.ts); planning in plan.ts; progress events
// in progress.ts; timings in timings.ts; what dead pulls left, reclaimed at the end, in reclaim.ts.
import { setMaxListeners } from 'node:events';
import { FastpullError, throwIfAborted } from '../errors.js';
import { formatReference, parseReference, type Reference } from '../oci/reference.js';
import { formatPlatform, parsePlatform, type Platform } from '../oci/platform.js';
import type { ImageLayer, ImageRecord } from '../images/store.js';
import { clientFor, type RegistryClient, type ResolvedImage } from '../registry/client.js';
import { findSociZtocs } from '../registry/soci.js';
import { throttleOf, type ByteThrottle, type RateLimit } from '../registry/ratelimit.js';
import { FetchScheduler, sharedFetchScheduler } from '../registry/scheduler.js';
import { openStore, type Store } from '../store/root.js';
import { sharedUnpackPool, UnpackPool } from '../unpack/pool/pool.js';
import { holdPullMemory } from '../util/allocator.js';
import { affinitySetter, PullCpuBudget } from '../util/pull-cpu.js';
import { acquireLease } from '../store/lease.js';
import { checkSignatures, gateCovers } from '../signatures/gate.js';
import type { ImageSignatures } from '../signatures/types.js';
import { pullLayer, type LayerContext } from './layer.js';
import { PriorityGate, PullTicket, sharedPriorityGate } from './priority.js';
import { imageLayers } from './plan.js';
import { reclaimDeadPulls } from './reclaim.js';
import { pullTimings } from './timings.js';
import type { LayerTimings, PullEvent, PullOptions, PullResult } from './types.js';
import { DEFAULT_NO_PROGRESS_TIMEOUT_MS, ProgressWatch } from './watchdog.js';

export type { LayerState, LayerTimings, PhaseTotals, PullEngine, PullEvent, PullOptions, PullResult, PullTimings } from './types.js';
export { DEFAULT_NO_PROGRESS_TIMEOUT_MS } from './watchdog.js';
export { parsePullPriority, PriorityGate, PULL_PRIORITIES, PullTicket, sharedPriorityGate, type PullPriority } from './priority.js';
export { DEFAULT_METADATA_TIMEOUT_MS } from '../registry/deadline.js';
export { RateLimiter, defaultBurst, type RateLimit, type RateLimiterOptions, type RateClock } from '../registry/ratelimit.js';

/**
 * Pulls an image: resolves the reference for the platform, fetches every layer not already
 * unpacked, verifies blob digests and diffIDs, unpacks all layers concurrently into snapshots named
 * by chainID, and records the image. Layers already unpacked are not fetched again, and several
 * pulls (in this or other processes) of the same layer unpack it once.
 *
 * Rejects with a {@link FastpullError}: INVALID_REFERENCE, INVALID_ARGUMENT (options),
 * NOT_FOUND, UNAUTHORIZED, DENIED, RATE_LIMITED, REGISTRY_ERROR, NETWORK_ERROR (also when no
 * byte arrives for `noProgressTimeoutMs`, or a manifest or config is not read within `metadataTimeoutMs`), PLATFORM_NOT_FOUND, INVALID_MANIFEST,
 * MANIFEST_TOO_LARGE, UNSUPPORTED_MEDIA_TYPE, DIGEST_MISMATCH, SIZE_MISMATCH, INVALID_LAYER,
 * HOSTILE_LAYER, NO_SPACE, PERMISSION_DENIED, or ABORTED when `signal` fires.
 * @example
 * const { image } = await pull('127.0.0.1:5000/app:1', { root: '/var/lib/fastpull' });
 * console.log(image.chainID);
 */
export async function pull(reference: string | Reference, given: PullOptions): Promise<PullResult> {
  const t0 = performance.now();
  const options = withEngine(given);
  const ref = typeof reference === 'string' ? parseReference(reference) : reference;
  const platform = typeof options.platform === 'string' ? parsePlatform(options.platform) : options.platform;
  const store = openStore(options.root, { sync: options.sync !== false, ...(options.tuning ? { tuning: options.tuning } : {}) });
  const ticket = options.priority instanceof PullTicket ? options.priority : new PullTicket(options.priority ?? 'normal');
  const throttle = throttleOf(rateLimits(options.rateLimit), ticket);
  const connections = options.engine?.connections;
  const cpuBudget = pullCpuBudget(options.cpuBudget);
  const client = options.client ?? clientFor({ ...options, ...(throttle ? { throttle } : {}), ...(connections ? { connections } : {}) });
  const signal = options.signal;
  // A worker thread starts while the image resolves, so the first layer's pass need not wait for one.
  if (options.pool) options.pool.warm();
  else if (!ownsPool(options)) sharedUnpackPool().warm();
  const gate = options.priorityGate ?? sharedPriorityGate();
  // Running from its start: a background pull gives way while this one still resolves.
  const leaveGate = gate.enter(ticket);
  const releaseMemory = holdPullMemory();
  try {
    const resolved = await resolveBesideGate(client, ref, platform, options);
    const resolveMs = performance.now() - t0;
    const name = formatReference(ref);
    const layers = imageLayers(name, resolved);
    options.onProgress?.({
      type: 'resolved',
      name,
      manifest: resolved.manifestDescriptor.digest,
      platform: resolved.platform,
      layers: layers.map((l) => ({ digest: l.digest, size: l.size, chainID: l.chainID })),
    });
    const verdict = startSignatureCheck(client, ref, resolved, options);
    try {
      // From here on, garbage collection leaves alone everything this image needs.
      const lease = await acquireLease(
        store.root,
        {
          blobs: [resolved.target.digest, resolved.manifestDescriptor.digest, resolved.manifest.config.digest, ...layers.map((l) => l.digest)],
          snapshots: layers.map((l) => l.chainID),
        },
        verdict?.signal ?? signal,
      );
      try {
        return await pullLeased(
          store,
          client,
          resolved,
          name,
          layers,
          { ...options, ...(verdict ? { signal: verdict.signal } : {}) },
          { id: lease.id, ticket, gate, throttle, cpuBudget },
          t0,
          resolveMs,
          verdict,
        );
      } finally {
        await lease.release();
      }
    } catch (e) {
      // A refusal stops the downloads it overtook: the pull fails with the refusal, not with their abort.
      throw (await verdict?.refusal()) ?? e;
    } finally {
      verdict?.stop();
    }
  } finally {
    leaveGate();
    releaseMemory();
    if (!options.client) await client.close();
  }
}

/**
 * {@link pull} as an async iterator of its progress events, the last of them `done` (which holds
 * the image and timings; so does the iterator's return value). A failed pull throws from the
 * loop. Leaving the loop early (break, return, throw) aborts the pull, which keeps what it
 * downloaded for the next pull to resume.
 * @example
 * for await (const e of pullEvents('127.0.0.1:5000/app:1', { root: '/var/lib/fastpull' })) {
 *   if (e.type === 'layer') console.log(e.index, e.state, e.bytes, '/', e.total);
 * }
 */
export async function* pullEvents(reference: string | Reference, options: Omit<PullOptions, 'onProgress'>): AsyncGenerator<PullEvent, PullResult, undefined> {
  const queue: PullEvent[] = [];
  let wake: (() => void) | undefined;
  const controller = new AbortController();
  const signal = options.signal ? AbortSignal.any([options.signal, controller.signal]) : controller.signal;
  let outcome: { ok: true; result: PullResult } | { ok: false; error: unknown } | undefined;
  const running = pull(reference, {
    ...options,
    signal,
    onProgress: (e) => {
      queue.push(e);
      wake?.();
    },
  }).then(
    (result) => void (outcome = { ok: true, result }),
    (error: unknown) => void (outcome = { ok: false, error }),
  );
  void running.finally(() => wake?.());
  try {
    for (;;) {
      while (queue.length > 0) yield queue.shift()!;
      if (outcome !== undefined) break;
      await new Promise<void>((resolve) => (wake = resolve));
      wake = undefined;
    }
    if (!outcome.ok) throw outcome.error;
    return outcome.result;
  } finally {
    if (outcome === undefined) {
      controller.abort(new FastpullError('ABORTED', 'the pull was abandoned by the consumer of its events'));
      await running;
    }
  }
}

/** The rest of a pull, once its lease is held: metadata, every layer, the image record. */
async function pullLeased(
  store: Store,
  client: RegistryClient,
  resolved: ResolvedImage,
  name: string,
  layers: readonly ImageLayer[],
  options: PullOptions,
  run: PullRun,
  t0: number,
  resolveMs: number,
  verdict: RunningSignatureCheck | undefined,
): Promise<PullResult> {
  const leaseId = run.id;
  await storeMetadata(store, resolved);
  // Litter from pulls that died (kill -9): nothing of it is visible, but it takes space.
  await Promise.all([store.content.sweep(), store.snapshots.sweep()]);
  const layerTimings = await pullLayers(store, client, resolved, layers, options, run);
  // The gate: nothing of the image is recorded before every policy that covers it has accepted it.
  const signatures = await verdict?.result;
  let unpackedSize = 0;
  for (const l of layers) unpackedSize += (await store.snapshots.info(l.chainID))?.size ?? 0;
  const image: ImageRecord = {
    name,
    target: resolved.target,
    manifest: resolved.manifestDescriptor,
    config: resolved.manifest.config,
    platform: resolved.platform,
    layers,
    chainID: layers[layers.length - 1]!.chainID,
    size: layers.reduce((s, l) => s + l.size, 0),
    unpackedSize,
    ...(options.keepBlobs === true ? { keepBlobs: true } : {}),
    created: new Date().toISOString(),
    ...(options.heldFor && (await heldForKept(store, name, resolved.platform)) ? { heldFor: options.heldFor } : {}),
    ...(signatures ? { signatures } : {}),
  };
  throwIfAborted(options.signal, `pulling ${name}`);
  await store.images.put(image);
  // What earlier pulls that died left of this image goes now, not at the next collection. The pull
  // has succeeded: a failure here undoes nothing, and collection removes what stays.
  await reclaimDeadPulls(store, layers, leaseId, options.keepBlobs === true).catch(() => undefined);
  const timings = pullTimings(resolveMs, t0, layerTimings);
  options.onProgress?.({ type: 'done', image, timings });
  return { image, timings };
}

/** A signature check running beside a pull. */
interface RunningSignatureCheck {
  /** The verdict (undefined: no policy covers the image), or the refusal. */
  readonly result: Promise<ImageSignatures | undefined>;
  /** The pull's signal, which also fires when the check refuses the image. */
  readonly signal: AbortSignal;
  /** The refusal, once the check has settled with one; undefined when it accepted or still runs. */
  refusal(): Promise<unknown>;
  /** Stops the check (the pull has ended). */
  stop(): void;
}

/**
 * Starts verifying the image's signatures from the digest the reference resolved to (an index's when
 * the name names one, as signers sign it), when the pull's gate covers the reference. A refusal
 * aborts the pull's downloads at once.
 */
function startSignatureCheck(client: RegistryClient, ref: Reference, resolved: ResolvedImage, options: PullOptions): RunningSignatureCheck | undefined {
  const given = options.signatures;
  if (!given || (!(given instanceof Promise) && !gateCovers(given, { reference: ref }))) return undefined;
  const controller = new AbortController();
  const signal = options.signal ? AbortSignal.any([options.signal, controller.signal]) : controller.signal;
  const subject = { reference: ref, digest: resolved.target.digest, mediaType: resolved.target.mediaType, size: resolved.target.size };
  let refused: unknown;
  let settled = false;
  // Policies still loading decide coverage once loaded; until then the layers download.
  const result = Promise.resolve(given).then((gate) =>
    gate && gateCovers(gate, { reference: ref }) ? checkSignatures(client, subject, gate, signal) : undefined,
  );
  const done = result.then(
    () => void (settled = true),
    (e: unknown) => {
      settled = true;
      refused = e;
      controller.abort(e);
    },
  );
  return {
    result,
    signal,
    refusal: async () => {
      // After a failure elsewhere, a check still running is not waited for: its refusal would be a guess.
      if (settled || controller.signal.aborted) await done;
      return refused;
    },
    stop: () => controller.abort(new FastpullError('ABORTED', 'the pull ended')),
  };
}

/**
 * Resolves the reference while the signature policies (when PullOptions.signatures is a promise)
 * still load. A policy that fails to load fails the pull with its own error, also when the resolve
 * failed or has not finished: it stops the resolve at once.
 */
async function resolveBesideGate(client: RegistryClient, ref: Reference, platform: Platform | undefined, options: PullOptions): Promise<ResolvedImage> {
  const loading = options.signatures instanceof Promise ? options.signatures : undefined;
  let signal = options.signal;
  if (loading) {
    const unusable = new AbortController();
    loading.catch((e: unknown) => unusable.abort(e));
    signal = signal ? AbortSignal.any([signal, unusable.signal]) : unusable.signal;
  }
  try {
    return await client.resolve(ref, { ...(platform ? { platform } : {}), ...(signal ? { signal } : {}) });
  } catch (e) {
    if (loading) await loading;
    throw e;
  }
}

/** Keeps the verified manifest(s) and config, so the image can be inspected without the registry. */
async function storeMetadata(store: Store, r: ResolvedImage): Promise<void> {
  if (r.indexBytes) await store.content.putBytes(r.target, r.indexBytes);
  await store.content.putBytes(r.manifestDescriptor, r.manifestBytes);
  await store.content.putBytes(r.manifest.config, r.configBytes);
}

/** What identifies one run of a pull to its layers: its lease, and its priority among the process's pulls. */
interface PullRun {
  readonly id: string;
  readonly ticket: PullTicket;
  readonly gate: PriorityGate;
  /** The pull's network rate limit; undefined: none. */
  readonly throttle: ByteThrottle | undefined;
  /** The pull's CPU budget; undefined: none. */
  readonly cpuBudget: PullCpuBudget | undefined;
}

/**
 * PullOptions.cpuBudget as the object its passes follow, checked before any work: INVALID_ARGUMENT
 * for a budget that is not a whole number of at least 1, FAILED_PRECONDITION without the addon.
 */
function pullCpuBudget(given: PullOptions['cpuBudget']): PullCpuBudget | undefined {
  if (given === undefined) return undefined;
  const budget = given instanceof PullCpuBudget ? given : new PullCpuBudget(given);
  if (budget.cores !== undefined) affinitySetter(`a CPU budget of ${budget.cores} for a pull`);
  return budget;
}

/** PullOptions.rateLimit as a list. */
function rateLimits(limit: PullOptions['rateLimit']): readonly RateLimit[] {
  if (limit === undefined) return [];
  return Array.isArray(limit) ? (limit as readonly RateLimit[]) : [limit as RateLimit];
}

/** Every layer at once, on the pull's pool and scheduler; the first failure stops the others. */
async function pullLayers(
  store: Store,
  client: RegistryClient,
  resolved: ResolvedImage,
  layers: readonly ImageLayer[],
  options: PullOptions,
  run: PullRun,
): Promise<LayerTimings[]> {
  const controller = new AbortController();
  const signal = options.signal ? AbortSignal.any([options.signal, controller.signal]) : controller.signal;
  // Every chunk request, back-off wait and unpack of the pull listens on this one signal.
  setMaxListeners(0, signal);
  const ownPool = ownsPool(options);
  const pool =
    options.pool ??
    (ownPool
      ? new UnpackPool({
          ...(options.unpackConcurrency !== undefined ? { size: options.unpackConcurrency } : {}),
          ...(options.threads === false ? { threads: false } : {}),
        })
      : sharedUnpackPool());
  const scheduler =
    options.scheduler ??
    (options.maxConnections !== undefined
      ? new FetchScheduler({ maxRequests: options.maxConnections, maxPerHost: options.maxConnections })
      : sharedFetchScheduler());
  let failure: unknown;
  const throttle = run.throttle;
  const watch = new ProgressWatch(
    options.noProgressTimeoutMs ?? DEFAULT_NO_PROGRESS_TIMEOUT_MS,
    (e) => {
      if (failure === undefined) failure = e;
      controller.abort(e);
    },
    throttle ? () => throttle.waiting > 0 : undefined,
  );
  const outcomes: Array<Promise<LayerTimings | undefined>> = [];
  const ctx: LayerContext = {
    store,
    client,
    ref: resolved.reference,
    options,
    signal,
    pool,
    scheduler,
    watch,
    layers,
    leaseId: run.id,
    ticket: run.ticket,
    gate: run.gate,
    ...(throttle ? { throttle } : {}),
    ...(run.cpuBudget ? { cpuBudget: run.cpuBudget } : {}),
    keepBlobs: options.keepBlobs === true,
    rootless: options.rootless ?? process.getuid?.() !== 0,
    // Only the parallel inflater uses zTOCs; the lookup runs while the downloads start.
    soci: options.inflater === 'parallel' ? findSociZtocs(client, resolved.reference, resolved, signal).catch(() => undefined) : Promise.resolve(undefined),
    lowersSettled: (index) => Promise.all(outcomes.slice(0, index)).then(() => undefined),
  };
  outcomes.push(
    ...layers.map((_, index) =>
      pullLayer(ctx, resolved.manifest.layers[index]!, index).catch((e: unknown) => {
        // One failed layer stops the rest; all settle before the pull reports the first error.
        if (failure === undefined) failure = e;
        controller.abort(e);
        return undefined;
      }),
    ),
  );
  const results = await Promise.all(outcomes).finally(() => {
    watch.stop();
    return ownPool ? pool.close() : undefined;
  });
  if (failure !== undefined) throw failure as unknown;
  return results as LayerTimings[];
}

/** Whether the pull makes a pool of its own (its options bound unpacking or ask for no threads). */
/** The options with the engine's shared parts filled in where the options name none of their own. */
function withEngine(options: PullOptions): PullOptions {
  const e = options.engine;
  if (!e) return options;
  const scheduler = options.scheduler ?? e.scheduler;
  const pool = options.pool ?? e.pool;
  const priorityGate = options.priorityGate ?? e.priorityGate;
  return { ...options, ...(scheduler ? { scheduler } : {}), ...(pool ? { pool } : {}), ...(priorityGate ? { priorityGate } : {}) };
}

function ownsPool(options: PullOptions): boolean {
  return options.pool === undefined && (options.unpackConcurrency !== undefined || options.threads === false);
}

/** Whether a record held for containerd may be written: no user's record of the name and platform is there. */
async function heldForKept(store: Store, name: string, platform: Platform): Promise<boolean> {
  const existing = await store.images.get(name, formatPlatform(platform));
  return existing === undefined || existing.heldFor !== undefined;
}
