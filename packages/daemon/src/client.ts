// A typed client of fastpulld, and the fastpull service over gRPC: it implements the same
// FastpullService as the library's LocalService (as containerd's proxy packages implement its
// interfaces), with the library's own types in and out and failures as the same FastpullError (code,
// message, details) the daemon hit.
import * as grpc from '@grpc/grpc-js';
import {
  FastpullError,
  type BlobEntry,
  type Credentials,
  type FastpullService,
  type GcResult,
  type ImageDetails,
  type ImageOptions,
  type ImageRecord,
  type Mount,
  type MountRecord,
  type MountTarget,
  type PullEvent,
  type PullPriority,
  type PullResult,
  type ServicePullOptions,
  type TraceDocument,
  type WritableMount,
} from '@fastpull/core';
import type { SnapshotInfo } from '@fastpull/core/snapshots';
import {
  blobFromWire,
  eventFromWire,
  priorityToWire,
  traceFromWire,
  gcFromWire,
  imageFromWire,
  mountFromWire,
  snapshotFromWire,
  type PullPlacement,
} from './convert.js';
import { fromServiceError } from './errors.js';
import { HEALTH_REASON_KEY } from './health.js';
import {
  packageDefinition,
  type ContentClient,
  type ImagesClient,
  type SnapshotsClient,
  type WireDeleteContentResponse,
  type WireGcResponse,
  type WireGetImageResponse,
  type WireInfoResponse,
  type WireListContentResponse,
  type WireListImagesResponse,
  type WireListSnapshotsResponse,
  type WireMountsResponse,
  type WirePullRequest,
  type WirePullResponse,
  type WireRemoveImageResponse,
  type WireUsageResponse,
} from './proto.js';
import type { WireCreateWritableMountResponse, WireListWritableMountsResponse, WireRemoveWritableMountResponse } from './writable.js';
import { mountRecordFromWire, writableMountFromWire } from './writable.js';

/** Options of a pull through the daemon. */
export interface RemotePullOptions {
  /** `os/arch[/variant]`; default: the daemon's host. */
  readonly platform?: string;
  readonly plainHttp?: boolean;
  readonly keepBlobs?: boolean;
  /** For the reference's registry only; sent to the daemon, never logged by it. */
  readonly credentials?: Credentials;
  /** Stops receiving (the daemon's pull goes on while other callers wait for it). */
  readonly signal?: AbortSignal;
  /**
   * Asks the daemon for a trace of the pull: called with it once the pull has ended, failed or not
   * (before the generator returns or throws). Never written to a file by the daemon.
   */
  readonly onTrace?: (trace: TraceDocument) => void;
  /** How urgent the pull is among the daemon's pulls (default normal); callers sharing a pull raise it to the highest. */
  readonly priority?: PullPriority;
  /** Bytes per second this pull may read (0 or unset: none of its own); the daemon's rate_limit holds as well. */
  readonly rateLimit?: number;
  /**
   * Whole cores this pull's unpack work may keep busy at once (unset: none of its own); the daemon's
   * cpu_budget holds as well. Callers sharing a pull loosen it to the largest (one without lifts it).
   */
  readonly cpuBudget?: number;
}

/** A finished pull: the library's result, and where the image lies in the daemon's store. */
export interface RemotePullResult extends PullResult, PullPlacement {}

/** What Images.Get answers. */
export interface RemoteImage {
  readonly image: ImageRecord;
  readonly root: string;
  readonly snapshots: readonly string[];
}

export type HealthStatus = 'UNKNOWN' | 'SERVING' | 'NOT_SERVING' | 'SERVICE_UNKNOWN';

/** grpc.health.v1.Health as this client calls it (health.proto's types are not generated). */
interface HealthClient extends grpc.Client {
  Check(
    argument: { service: string },
    metadata: grpc.Metadata,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<{ status: HealthStatus }>,
  ): grpc.ClientUnaryCall;
}

/** The client of each service, by its full name: the generated client types of fastpull.v1. */
interface ServiceClients {
  'fastpull.v1.Images': ImagesClient;
  'fastpull.v1.Snapshots': SnapshotsClient;
  'fastpull.v1.Content': ContentClient;
  'grpc.health.v1.Health': HealthClient;
}

/** Largest message the client takes: room for the trace of a long pull. */
const MAX_RECEIVE_BYTES = 256 * 1024 * 1024;

/** The address as gRPC dials it: a bare path is a unix socket. */
export function dialAddress(address: string): string {
  return address.startsWith('unix:') ? address : `unix:${address}`;
}

export class FastpullClient implements FastpullService {
  /** The dialled address, `unix:<path>`. */
  readonly address: string;
  /** The same as `address`: where the service works, for messages. */
  readonly location: string;
  private readonly clients = new Map<keyof ServiceClients, grpc.Client>();
  private readonly channel: grpc.ChannelCredentials = grpc.credentials.createInsecure();
  private readonly channelOptions: grpc.ChannelOptions;

  /**
   * `address`: the daemon's socket path, or `unix:<path>`. Nothing is dialled until the first call.
   * `options.ownConnection`: use a connection of this client's own; by default gRPC shares one
   * connection among all clients of a process that dial the same address.
   */
  constructor(address: string, options: { ownConnection?: boolean } = {}) {
    this.address = dialAddress(address);
    this.location = this.address;
    // A pull's trace comes in one message, and a long pull's can pass gRPC's default 4 MiB.
    this.channelOptions = {
      'grpc.max_receive_message_length': MAX_RECEIVE_BYTES,
      ...(options.ownConnection === true ? { 'grpc.use_local_subchannel_pool': 1 } : {}),
    };
  }

  private client<K extends keyof ServiceClients>(service: K): ServiceClients[K] {
    let c = this.clients.get(service);
    if (!c) {
      const Ctor = grpc.makeClientConstructor(packageDefinition()[service] as grpc.ServiceDefinition, service);
      // All services share one channel: the first client's.
      const first = this.clients.values().next().value;
      c = first ? new Ctor(this.address, this.channel, { channelOverride: first.getChannel() }) : new Ctor(this.address, this.channel, this.channelOptions);
      this.clients.set(service, c);
    }
    // The constructor is made from the .proto the client types were generated from (a test keeps them in step).
    return c as ServiceClients[K];
  }

  /** One unary call: `call` starts it with the metadata, options and callback given; failures as FastpullError. */
  private unary<Res>(
    method: string,
    call: (metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<Res>) => grpc.ClientUnaryCall,
    signal?: AbortSignal,
  ): Promise<Res> {
    const what = `${method} at ${this.address}`;
    return new Promise<Res>((resolve, reject) => {
      const c = call(new grpc.Metadata(), {}, (e, r) => (e ? reject(fromServiceError(e, what, this.address)) : resolve(r as Res)));
      signal?.addEventListener('abort', () => c.cancel(), { once: true });
    });
  }

  /**
   * Pulls through the daemon: its progress events as the library's PullEvent objects, the last one
   * `done`; the generator's return value adds where the image lies. Leaving the loop early stops
   * receiving; the daemon stops the pull only when no other caller waits for it.
   */
  async *pullEvents(reference: string, options: RemotePullOptions = {}): AsyncGenerator<PullEvent, RemotePullResult, undefined> {
    const req: WirePullRequest = {
      reference,
      platform: options.platform ?? '',
      plainHttp: options.plainHttp === true,
      keepBlobs: options.keepBlobs === true,
      credentials: options.credentials ? { username: options.credentials.username ?? '', password: options.credentials.password ?? '' } : null,
      trace: options.onTrace !== undefined,
      priority: priorityToWire(options.priority),
      rateLimitBytesPerSecond: options.rateLimit ?? 0,
      cpuBudget: options.cpuBudget ?? 0,
    };
    const call = this.client('fastpull.v1.Images').Pull(req);
    const abort = (): void => call.cancel();
    options.signal?.addEventListener('abort', abort, { once: true });
    let result: RemotePullResult | undefined;
    try {
      for await (const msg of call as AsyncIterable<WirePullResponse>) {
        if (msg.trace) {
          options.onTrace?.(traceFromWire(msg.trace.json));
          continue;
        }
        const { event, placement } = eventFromWire(msg);
        if (event.type === 'done')
          result = { image: event.image, timings: event.timings, root: placement!.root, snapshots: placement!.snapshots, mounts: placement!.mounts };
        yield event;
      }
    } catch (e) {
      if (options.signal?.aborted)
        throw new FastpullError('ABORTED', `pulling ${reference} through ${this.address}: aborted`, { cause: options.signal.reason });
      throw fromServiceError(e, `pulling ${reference} through ${this.address}`, this.address);
    } finally {
      options.signal?.removeEventListener('abort', abort);
      if (!result) call.cancel();
    }
    if (!result) throw new FastpullError('INTERNAL', `pulling ${reference} through ${this.address}: the stream ended without a result`);
    return result;
  }

  /** {@link pullEvents} with a callback: resolves with the result. */
  async pull(reference: string, options: RemotePullOptions & ServicePullOptions = {}): Promise<RemotePullResult> {
    const it = this.pullEvents(reference, options);
    for (;;) {
      const n = await it.next();
      if (n.done) return n.value;
      options.onProgress?.(n.value);
    }
  }

  /**
   * The images in the daemon's store, by name. Each record's `unpackedSize` is the sum of its
   * snapshots as they are now, absent when one of them is missing.
   */
  async listImages(signal?: AbortSignal): Promise<ImageRecord[]> {
    const r = await this.unary<WireListImagesResponse>('List', (m, o, cb) => this.client('fastpull.v1.Images').List({}, m, o, cb), signal);
    return r.images.map(imageFromWire);
  }

  async getImage(name: string, signal?: AbortSignal): Promise<RemoteImage> {
    const r = await this.unary<WireGetImageResponse>('Get', (m, o, cb) => this.client('fastpull.v1.Images').Get({ name }, m, o, cb), signal);
    return { image: imageFromWire(r.image), root: r.root, snapshots: r.snapshots };
  }

  /** An image with its manifest, config and index, as the daemon's store holds them. */
  async inspectImage(reference: string, options: ImageOptions = {}): Promise<ImageDetails> {
    const r = await this.unary<WireGetImageResponse>(
      'Get',
      (m, o, cb) => this.client('fastpull.v1.Images').Get({ name: reference, platform: options.platform ?? '' }, m, o, cb),
      options.signal,
    );
    const image = imageFromWire(r.image);
    const parse = (text: string, what: string): unknown => {
      try {
        return JSON.parse(text) as unknown;
      } catch (e) {
        throw new FastpullError('INTERNAL', `inspecting ${reference} through ${this.address}: the daemon sent no ${what} (is it older than this client?)`, {
          cause: e,
        });
      }
    };
    return {
      image,
      root: r.root,
      unpackedSize: image.unpackedSize ?? null,
      snapshots: r.snapshots,
      ...(r.indexJson ? { index: parse(r.indexJson, 'index') } : {}),
      manifest: parse(r.manifestJson, 'manifest'),
      config: parse(r.configJson, 'config'),
    };
  }

  /**
   * Forgets an image (every platform of its name, or the one given); with `gc`, collects garbage
   * afterwards. Returns its canonical name.
   */
  async removeImage(name: string, options: ImageOptions & { gc?: boolean } = {}): Promise<{ name: string; gc?: GcResult }> {
    const r = await this.unary<WireRemoveImageResponse>(
      'Remove',
      (m, o, cb) => this.client('fastpull.v1.Images').Remove({ name, gc: options.gc === true, platform: options.platform ?? '' }, m, o, cb),
      options.signal,
    );
    return { name: r.name, ...(r.gc ? { gc: gcFromWire(r.gc) } : {}) };
  }

  /** The mounts of an image (by reference) or of a snapshot stack (by its top chainID). */
  async mounts(target: MountTarget | { chainID: string }, signal?: AbortSignal): Promise<Mount[]> {
    const req =
      'image' in target
        ? { image: target.image, ...('platform' in target && target.platform ? { platform: target.platform } : {}) }
        : { chainId: target.chainID };
    const r = await this.unary<WireMountsResponse>('Mounts', (m, o, cb) => this.client('fastpull.v1.Snapshots').Mounts(req, m, o, cb), signal);
    return r.mounts.map(mountFromWire);
  }

  async listSnapshots(signal?: AbortSignal): Promise<SnapshotInfo[]> {
    const r = await this.unary<WireListSnapshotsResponse>('List', (m, o, cb) => this.client('fastpull.v1.Snapshots').List({}, m, o, cb), signal);
    return r.snapshots.map(snapshotFromWire);
  }

  async snapshotUsage(chainID: string, signal?: AbortSignal): Promise<{ size: number; inodes: number }> {
    return this.unary<WireUsageResponse>('Usage', (m, o, cb) => this.client('fastpull.v1.Snapshots').Usage({ chainId: chainID }, m, o, cb), signal);
  }

  async contentInfo(digest: string, signal?: AbortSignal): Promise<BlobEntry> {
    const r = await this.unary<WireInfoResponse>('Info', (m, o, cb) => this.client('fastpull.v1.Content').Info({ digest }, m, o, cb), signal);
    return blobFromWire(r.info);
  }

  async listContent(signal?: AbortSignal): Promise<BlobEntry[]> {
    const r = await this.unary<WireListContentResponse>('List', (m, o, cb) => this.client('fastpull.v1.Content').List({}, m, o, cb), signal);
    return r.blobs.map(blobFromWire);
  }

  async deleteContent(digest: string, signal?: AbortSignal): Promise<void> {
    await this.unary<WireDeleteContentResponse>('Delete', (m, o, cb) => this.client('fastpull.v1.Content').Delete({ digest }, m, o, cb), signal);
  }

  async createWritableMount(image: { readonly image: string; readonly platform?: string }, target: string, signal?: AbortSignal): Promise<WritableMount> {
    const req = { image: image.image, platform: image.platform ?? '', target };
    return writableMountFromWire(
      await this.unary<WireCreateWritableMountResponse>(
        'CreateWritableMount',
        (m, o, cb) => this.client('fastpull.v1.Snapshots').CreateWritableMount(req, m, o, cb),
        signal,
      ),
    );
  }

  async listWritableMounts(signal?: AbortSignal): Promise<MountRecord[]> {
    const r = await this.unary<WireListWritableMountsResponse>(
      'ListWritableMounts',
      (m, o, cb) => this.client('fastpull.v1.Snapshots').ListWritableMounts({}, m, o, cb),
      signal,
    );
    return r.mounts.map(mountRecordFromWire);
  }

  async removeWritableMount(id: string, signal?: AbortSignal): Promise<MountRecord> {
    const r = await this.unary<WireRemoveWritableMountResponse>(
      'RemoveWritableMount',
      (m, o, cb) => this.client('fastpull.v1.Snapshots').RemoveWritableMount({ id }, m, o, cb),
      signal,
    );
    return mountRecordFromWire(r.record);
  }

  async collectGarbage(options: { dryRun?: boolean; signal?: AbortSignal } = {}): Promise<GcResult> {
    return gcFromWire(
      await this.unary<WireGcResponse>(
        'GarbageCollect',
        (m, o, cb) => this.client('fastpull.v1.Content').GarbageCollect({ dryRun: options.dryRun === true }, m, o, cb),
        options.signal,
      ),
    );
  }

  /**
   * grpc.health.v1 Check of `service` ("" for the whole server), with the reason fastpulld gives
   * when it is not SERVING (the `fastpull-health-reason` trailer).
   */
  async healthCheck(service = '', signal?: AbortSignal): Promise<{ status: HealthStatus; reason?: string }> {
    let reason: string | undefined;
    const r = await this.unary<{ status: HealthStatus }>(
      'Check',
      (m, o, cb) =>
        this.client('grpc.health.v1.Health')
          .Check({ service }, m, o, cb)
          .on('status', (s: grpc.StatusObject) => (reason = s.metadata.get(HEALTH_REASON_KEY)[0]?.toString())),
      signal,
    );
    return reason === undefined ? { status: r.status } : { status: r.status, reason };
  }

  /** grpc.health.v1 Check of `service` ("" for the whole server). */
  async health(service = '', signal?: AbortSignal): Promise<HealthStatus> {
    const r = await this.unary<{ status: HealthStatus }>('Check', (m, o, cb) => this.client('grpc.health.v1.Health').Check({ service }, m, o, cb), signal);
    return r.status;
  }

  /** Closes the connection (at once; the promise is for FastpullService). */
  close(): Promise<void> {
    for (const c of this.clients.values()) c.close();
    this.clients.clear();
    return Promise.resolve();
  }
}
