// The service in this process: a long-lived object that owns one store, the fetch scheduler and the
// unpack pool its pulls share, and the credential sources; built once with its settings (as a puller
// is), then used for every request.
import { existsSync } from 'node:fs';
import { collectGarbage, type GcResult } from '../gc/gc.js';
import { deleteBlob } from '../gc/delete.js';
import { FastpullError } from '../errors.js';
import { inspectImage, type ImageDetails } from '../store/inspect.js';
import { findImages, resolveImage, unpackedSize } from '../store/resolve.js';
import { formatPlatform } from '../oci/platform.js';
import { createWritableMount, listWritableMounts, removeWritableMount, type WritableMount } from '../store/writable.js';
import type { MountRecord } from '../snapshots/mountrecords.js';
import type { ImageRecord } from '../images/store.js';
import { parseReference } from '../oci/reference.js';
import type { Digest } from '../oci/digest.js';
import { pull, type PullEvent, type PullResult, type PullTicket } from '../pull/pull.js';
import { observeBoth, type PullObserver } from '../pull/observer.js';
import { TraceRecorder } from '../pull/trace.js';
import type { CredentialsProvider } from '../registry/auth.js';
import { proxyEnvironment, type ProxySettings } from '../registry/proxy.js';
import { DEFAULT_METADATA_TIMEOUT_MS } from '../registry/deadline.js';
import { RateLimiter } from '../registry/ratelimit.js';
import { RegistryConnections } from '../registry/shared.js';
import { FetchScheduler, sharedFetchScheduler } from '../registry/scheduler.js';
import { isMountTooLong, type Mount, type SnapshotInfo } from '../snapshots/store.js';
import { snapshotChain, snapshotUsage, type SnapshotUsage } from '../snapshots/usage.js';
import { openStore, type Store } from '../store/root.js';
import type { InflaterChoice } from '../unpack/decompress/inflater.js';
import type { Tuning } from '../tuning.js';
import { sharedUnpackPool, UnpackPool } from '../unpack/pool/pool.js';
import { checkDirectory, type DirectoryUse } from '../util/paths.js';
import { applyCpuBudget, type CpuBudgetState } from '../util/cpu.js';
import type { SignatureGate } from '../signatures/gate.js';
import { loadSignatureVerifiers, signaturesEnabled, type SignatureSettings } from '../signatures/settings.js';
import { processCpusChanged, type PullCpuBudget } from '../util/pull-cpu.js';
import type { SignatureVerifier } from '../signatures/types.js';
import { dockerCredentialsWithWarning, scopedCredentials } from './credentials.js';
import { DEFAULT_CHUNK_SIZE, DEFAULT_INFLATER, type ServiceSettings } from './settings.js';
import type { BlobEntry, FastpullService, ImageOptions, MountTarget, Placement, PulledImage, ServicePullOptions } from './service.js';

/** Options of {@link LocalService.pull}: a service's, and what only the store's owner may ask. */
export interface LocalPullOptions extends ServicePullOptions {
  /** Record the image as held for containerd (see ImageRecord.heldFor): fastpulld's snapshotter. */
  readonly heldFor?: 'containerd';
  /** The pull's priority as a ticket the caller may raise while it runs (over `priority`): pulls that callers share. */
  readonly ticket?: PullTicket;
  /** The pull's own rate limit as a limiter the caller may change while it runs (over `rateLimit`): pulls that callers share. */
  readonly limiter?: RateLimiter;
  /** The pull's CPU budget as one the caller may loosen while it runs (over `cpuBudget`): pulls that callers share. */
  readonly budget?: PullCpuBudget;
  /** Watches the pull from inside (PullOptions.observer), beside the trace's observer when one is asked for. */
  readonly observer?: PullObserver;
}

/** How a local service is built; every setting applies to all of its pulls. */
export interface LocalServiceOptions {
  /** The store root. */
  readonly root: string;
  /** Registry host configuration (`<dir>/<host>/hosts.toml`); none when unset (see defaultHostsDir()). */
  readonly hostsDir?: string;
  /** The service's own credential source; default Docker's config.json, a failing helper warned once. */
  readonly credentials?: CredentialsProvider;
  /** Where warnings go (a credential helper that failed); default nowhere. */
  readonly onWarning?: (message: string) => void;
  /** The environment Docker's config and the proxy variables are read from; default process.env. */
  readonly env?: NodeJS.ProcessEnv;
  /**
   * Proxies of registry traffic; default what HTTP_PROXY, HTTPS_PROXY and NO_PROXY (or their
   * lower-case forms) in `env` say, read once here, as containerd reads them.
   */
  readonly proxy?: ProxySettings;
  /** Range requests in flight across all pulls of this service; default the process-wide scheduler. */
  readonly concurrency?: number;
  /** Bytes per range request; default the library's (16 MiB). */
  readonly chunkSize?: number;
  /** Layers unpacked at once across all pulls of this service; default the process-wide pool. */
  readonly unpackConcurrency?: number;
  /** gzip decoder; default auto. */
  readonly inflater?: InflaterChoice;
  /** Keep layer blobs for every pull. */
  readonly keepBlobs?: boolean;
  /** How long a manifest, index, config or referrers list may take to read (PullOptions.metadataTimeoutMs); default 2 min. */
  readonly metadataTimeoutMs?: number;
  /**
   * Flush each snapshot to stable storage before committing it (default true). False is unsafe:
   * after a power cut a committed snapshot may hold empty or short files (see StoreOptions.sync).
   */
  readonly sync?: boolean;
  /** Unpack on worker threads (default true). */
  readonly threads?: boolean;
  /**
   * Cores the whole process may use (a whole number): every thread of it, now and later, is confined
   * to that many of its CPUs (applyCpuBudget), and thread counts are sized by them. Unset: leave the
   * process as it is; the cgroup's CPU quota and cpuset still size its threads.
   */
  readonly cpuBudget?: number;
  /**
   * A network budget all of the service's pulls share (a node's link): bytes per second (0: none
   * for now, settable later by {@link LocalService.setRateLimit}), or a limiter shared with others.
   * Unset: none. A pull may ask for less (ServicePullOptions.rateLimit), never more; a pull of
   * higher priority takes the budget first (see RateLimiter).
   */
  readonly rateLimit?: number | RateLimiter;
  /** A range request was retried (metrics). */
  readonly onRetry?: (error: unknown) => void;
  /** A straggling range was re-issued (metrics). */
  readonly onStraggler?: () => void;
  /**
   * Signature policies every pull is gated by (the user's policy.json, notation configuration); none
   * when unset. Loaded at the first pull; {@link LocalService.setSignatureSettings} replaces them.
   */
  readonly signatures?: SignatureSettings;
  /** Measuring knobs (tuning.ts) for every pull, read by the program's entry point; default none. */
  readonly tuning?: Tuning;
}

/**
 * fastpull's operations over one store in this process.
 * @example
 * const service = new LocalService({ root: defaultRoot(), hostsDir: defaultHostsDir() });
 * const { mounts } = await service.pull('ubuntu:24.04');
 * await service.close();
 */
export class LocalService implements FastpullService {
  /** The store this service works on. */
  readonly store: Store;
  /** The store root, for messages. */
  readonly location: string;
  /** Registry host configuration for pulls that start from now on (a daemon reloads it). */
  hostsDir: string | undefined;
  private readonly scheduler: FetchScheduler;
  private readonly pool: UnpackPool | undefined;
  private readonly credentials: CredentialsProvider;
  /** The signature settings and their verifiers, loaded once (a failed load is tried again). */
  private signatureSettings: SignatureSettings;
  private verifiers: Promise<SignatureVerifier[]> | undefined;
  /** The store root's check for each use, made once (a failed check is tried again next time). */
  private readonly checked = new Map<DirectoryUse, Promise<string>>();
  private cpuBudget: number | undefined;
  private readonly proxy: ProxySettings;
  /** Connections and tokens its pulls share, so a second pull of a registry needs no new handshake. */
  private readonly connections: RegistryConnections;
  /** The budget all pulls share; undefined: none was ever set. */
  private limiter: RateLimiter | undefined;

  constructor(private readonly options: LocalServiceOptions) {
    this.store = openStore(options.root, { sync: options.sync !== false, ...(options.tuning ? { tuning: options.tuning } : {}) });
    this.location = this.store.root;
    this.hostsDir = options.hostsDir;
    this.signatureSettings = options.signatures ?? {};
    this.scheduler =
      options.concurrency !== undefined ? new FetchScheduler({ maxRequests: options.concurrency, maxPerHost: options.concurrency }) : sharedFetchScheduler();
    // Before the pool: a pool that is not told its size takes it from the cores the budget leaves.
    if (options.cpuBudget !== undefined) this.setCpuBudget(options.cpuBudget);
    this.pool = options.unpackConcurrency !== undefined ? new UnpackPool({ size: options.unpackConcurrency }) : undefined;
    this.proxy = options.proxy ?? proxyEnvironment(options.env ?? process.env);
    this.connections = new RegistryConnections({ proxy: this.proxy, ...(options.tuning ? { tuning: options.tuning } : {}) });
    this.limiter =
      options.rateLimit instanceof RateLimiter ? options.rateLimit : options.rateLimit !== undefined ? new RateLimiter(options.rateLimit) : undefined;
    this.credentials =
      options.credentials ??
      dockerCredentialsWithWarning(options.env ?? process.env, (registry, message) => options.onWarning?.(`no credentials for ${registry}: ${message}`));
  }

  /** The settings its pulls run with, every default filled in. */
  get settings(): ServiceSettings {
    const o = this.options;
    return {
      root: this.store.root,
      hostsDir: this.hostsDir,
      concurrency: this.scheduler.maxRequests,
      chunkSize: o.chunkSize ?? DEFAULT_CHUNK_SIZE,
      unpackConcurrency: (this.pool ?? sharedUnpackPool()).size,
      inflater: o.inflater ?? DEFAULT_INFLATER,
      keepBlobs: o.keepBlobs === true,
      sync: this.store.snapshots.sync,
      cpuBudget: this.cpuBudget,
      metadataTimeoutMs: o.metadataTimeoutMs ?? DEFAULT_METADATA_TIMEOUT_MS,
      rateLimit: this.limiter?.bytesPerSecond ?? 0,
    };
  }

  /**
   * Sets the budget all pulls share, in bytes per second (0: none): at once for running pulls too,
   * reads waiting on it included. A daemon calls it on reload.
   */
  setRateLimit(bytesPerSecond: number): void {
    if (this.limiter) this.limiter.setRate(bytesPerSecond);
    else if (bytesPerSecond !== 0) this.limiter = new RateLimiter(bytesPerSecond);
  }

  /**
   * Holds the process to `cores` cores from now on (undefined: gives back every CPU it was started
   * with); running pulls' threads are confined at once. A daemon calls it on reload.
   */
  setCpuBudget(cores: number | undefined): CpuBudgetState {
    const state = applyCpuBudget(cores);
    this.cpuBudget = cores;
    processCpusChanged();
    return state;
  }

  /** The signature settings its pulls are gated by. */
  get signatures(): SignatureSettings {
    return this.signatureSettings;
  }

  /**
   * Loads new signature settings (a daemon's reload) and uses them for pulls that start from now on.
   * Rejects, keeping the settings in force, when a file they name cannot be used.
   */
  async setSignatureSettings(settings: SignatureSettings): Promise<void> {
    const verifiers = await loadSignatureVerifiers(settings);
    this.signatureSettings = settings;
    this.verifiers = Promise.resolve(verifiers);
  }

  /** The verifiers of the settings in force, loaded at first use. */
  signatureVerifiers(): Promise<SignatureVerifier[]> {
    if (!this.verifiers) {
      const loading = loadSignatureVerifiers(this.signatureSettings);
      this.verifiers = loading;
      loading.catch(() => {
        if (this.verifiers === loading) this.verifiers = undefined;
      });
    }
    return this.verifiers;
  }

  /** Range requests this service's pulls have in flight now. */
  get requestsInFlight(): number {
    return this.scheduler.inFlight.requests;
  }

  /**
   * Checks the store root for `use` before any other work: a pull makes it, commands that only read
   * never create it (a missing store is NOT_FOUND naming the path, not an empty listing).
   */
  private async root(use: DirectoryUse): Promise<void> {
    let check = this.checked.get(use);
    if (!check) {
      check = checkDirectory(this.options.root, 'store root', use);
      this.checked.set(use, check);
      check.catch(() => this.checked.delete(use));
    }
    await check;
  }

  async pull(reference: string, options: LocalPullOptions = {}): Promise<PulledImage> {
    await this.root('create');
    // A hosts directory that does not exist (yet) means no mirrors, as containerd's config_path; one
    // that is a file, a loop or unreadable is a mistake to say at once.
    if (this.hostsDir !== undefined && existsSync(this.hostsDir)) await checkDirectory(this.hostsDir, 'registry hosts directory', 'read');
    const registry = parseReference(reference).registry;
    const credentials = options.credentials ? scopedCredentials(options.credentials, [registry], this.credentials) : this.credentials;
    const trace = options.onTrace ? new TraceRecorder() : undefined;
    const onProgress = trace ? (e: PullEvent) => (trace.event(e), options.onProgress?.(e)) : options.onProgress;
    // The policies load while the name resolves and the layers start; the verdict still comes before the record.
    const signatures = signaturesEnabled(this.signatureSettings)
      ? this.signatureVerifiers().then((verifiers) => (verifiers.length > 0 ? { verifiers } : undefined))
      : undefined;
    // The pull reports a policy that fails to load; one that fails before it looks is not an unhandled rejection.
    signatures?.catch(() => undefined);
    let result: PullResult | undefined;
    trace?.start();
    try {
      result = await this.runPull(reference, options, credentials, onProgress, observeBoth(trace?.observer, options.observer), signatures);
    } finally {
      if (trace) options.onTrace!(trace.finish(result?.timings));
    }
    return { ...result, ...(await this.placement(result.image)) };
  }

  private runPull(
    reference: string,
    options: LocalPullOptions,
    credentials: CredentialsProvider,
    onProgress: ((e: PullEvent) => void) | undefined,
    observer: PullObserver | undefined,
    signatures: Promise<SignatureGate | undefined> | undefined,
  ): Promise<PullResult> {
    const o = this.options;
    const settings = this.settings;
    const own = options.limiter ?? options.rateLimit;
    const limits = [...(own ? [own] : []), ...(this.limiter ? [this.limiter] : [])];
    return pull(reference, {
      root: this.store.root,
      ...(options.platform ? { platform: options.platform } : {}),
      ...(options.plainHttp ? { plainHttp: true } : {}),
      credentials,
      ...(this.hostsDir ? { hostsDir: this.hostsDir } : {}),
      // What `settings` reports is what the pull gets.
      chunkSize: settings.chunkSize,
      metadataTimeoutMs: settings.metadataTimeoutMs,
      engine: { connections: this.connections, scheduler: this.scheduler, ...(this.pool ? { pool: this.pool } : {}) },
      inflater: settings.inflater,
      ...(o.threads === false ? { threads: false } : {}),
      ...(options.keepBlobs || o.keepBlobs ? { keepBlobs: true } : {}),
      ...(o.sync === false ? { sync: false } : {}),
      ...(options.heldFor ? { heldFor: options.heldFor } : {}),
      ...(options.ticket ? { priority: options.ticket } : options.priority ? { priority: options.priority } : {}),
      ...(limits.length > 0 ? { rateLimit: limits } : {}),
      ...(options.budget ? { cpuBudget: options.budget } : options.cpuBudget !== undefined ? { cpuBudget: options.cpuBudget } : {}),
      ...(o.onRetry ? { onRetry: o.onRetry } : {}),
      ...(o.onStraggler ? { onStraggler: o.onStraggler } : {}),
      ...(options.signal ? { signal: options.signal } : {}),
      ...(onProgress ? { onProgress } : {}),
      ...(observer ? { observer } : {}),
      ...(signatures ? { signatures } : {}),
      ...(o.tuning ? { tuning: o.tuning } : {}),
    });
  }

  /**
   * Makes an image record held for containerd (ImageRecord.heldFor) a user's: a user's pull that
   * joined the snapshotter's pull of the same image wants the image kept, not let go once containerd
   * forgets it. Returns the record as stored now: unchanged when it is not held, or when the name
   * now holds another manifest.
   */
  async claimImage(image: ImageRecord): Promise<ImageRecord> {
    const current = await this.store.images.get(image.name, formatPlatform(image.platform));
    if (!current || current.heldFor === undefined || current.manifest.digest !== image.manifest.digest) return current ?? image;
    const { heldFor: _held, ...mine } = current;
    await this.store.images.put(mine);
    return mine;
  }

  /**
   * Where an image's snapshots lie and the mounts that stack them: none for a stack too deep for
   * one mount's options (`mounts` says why). The pull is done and recorded by then, and an image
   * that fastpulld pulls for containerd is mounted through containerd's records, not these.
   */
  async placement(image: ImageRecord): Promise<Placement> {
    const chain = image.layers.map((l) => l.chainID);
    const mounts = await this.store.snapshots.mounts(chain).catch((e: unknown) => {
      if (isMountTooLong(e)) return [];
      throw e;
    });
    return { root: this.store.root, snapshots: chain.map((id) => this.store.snapshots.fsPath(id)), mounts };
  }

  async listImages(): Promise<ImageRecord[]> {
    await this.root('read');
    const images = await this.store.images.list();
    return Promise.all(
      images.map(async (i) => {
        const { unpackedSize: _recorded, ...rest } = i;
        const size = await unpackedSize(this.store, i);
        return size === null ? rest : { ...rest, unpackedSize: size };
      }),
    );
  }

  async inspectImage(reference: string, options: ImageOptions = {}): Promise<ImageDetails> {
    await this.root('read');
    return inspectImage(this.store, reference, options.platform);
  }

  async removeImage(reference: string, options: ImageOptions = {}): Promise<{ name: string }> {
    await this.root('write');
    const { name, records } = await findImages(this.store, reference, options.platform);
    for (const r of records) await this.store.images.delete(name, formatPlatform(r.platform));
    return { name };
  }

  async mounts(target: MountTarget): Promise<Mount[]> {
    await this.root('read');
    if ('image' in target) {
      const image = await resolveImage(this.store, target.image, target.platform);
      return this.store.snapshots.mounts(image.layers.map((l) => l.chainID));
    }
    return this.store.snapshots.mounts(await snapshotChain(this.store.snapshots, target.chainID));
  }

  async createWritableMount(image: { readonly image: string; readonly platform?: string }, target: string): Promise<WritableMount> {
    await this.root('write');
    return createWritableMount(this.store, await resolveImage(this.store, image.image, image.platform), target);
  }

  async listWritableMounts(): Promise<MountRecord[]> {
    await this.root('read');
    return listWritableMounts(this.store);
  }

  async removeWritableMount(id: string): Promise<MountRecord> {
    await this.root('write');
    return removeWritableMount(this.store, id);
  }

  async collectGarbage(options: { dryRun?: boolean; signal?: AbortSignal } = {}): Promise<GcResult> {
    await this.root(options.dryRun ? 'read' : 'write');
    return collectGarbage(this.store, options);
  }

  async listSnapshots(): Promise<SnapshotInfo[]> {
    await this.root('read');
    return (await this.store.snapshots.list()).sort((a, b) => a.chainID.localeCompare(b.chainID));
  }

  async snapshotUsage(chainID: Digest): Promise<SnapshotUsage> {
    await this.root('read');
    return snapshotUsage(this.store.snapshots, chainID);
  }

  async contentInfo(digest: Digest): Promise<BlobEntry> {
    await this.root('read');
    const info = await this.store.content.info(digest);
    if (!info) throw new FastpullError('NOT_FOUND', `blob ${digest} is not in the store`);
    return { digest: info.digest, size: info.size };
  }

  async listContent(): Promise<BlobEntry[]> {
    await this.root('read');
    return (await this.store.content.list()).map((b) => ({ digest: b.digest, size: b.size })).sort((a, b) => a.digest.localeCompare(b.digest));
  }

  async deleteContent(digest: Digest, signal?: AbortSignal): Promise<void> {
    await this.root('write');
    return deleteBlob(this.store, digest, signal);
  }

  /**
   * Ends the unpack workers its pulls left idle ({@link UnpackPool.retireIdle}), once their threads
   * have exited: a long-running service calls it when no pull has run for a while, so that what it
   * holds between bursts of pulls is not a worker's heap. The next pull starts workers again.
   * Returns how many ended.
   */
  releaseIdleWorkers(): Promise<number> {
    return (this.pool ?? sharedUnpackPool()).retireIdle();
  }

  /** Ends its unpack workers and its registry connections; pulls still running fail. */
  async close(): Promise<void> {
    await Promise.all([this.pool?.close(), this.connections.close()]);
  }
}
