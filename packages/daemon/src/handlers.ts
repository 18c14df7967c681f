// fastpull.v1's methods over one LocalService, as the generated *Handlers types declare them: a request
// read by a field it does not have, or a response missing a field or carrying one the .proto lacks,
// does not compile.
import type * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import {
  FastpullError,
  formatPlatform,
  formatReference,
  parseDigest,
  parsePlatform,
  parseReference,
  type Digest,
  type LocalService,
  type MountTarget,
  type PulledImage,
} from '@fastpull/core';
import {
  blobToWire,
  cpuBudgetFromWire,
  eventToWire,
  gcToWire,
  imageToWire,
  mountToWire,
  priorityFromWire,
  rateLimitFromWire,
  snapshotToWire,
  traceToWire,
} from './convert.js';
import { toStatus } from './errors.js';
import { passLog } from './pull-log.js';
import type {
  ContentHandlers,
  ImagesHandlers,
  SnapshotsHandlers,
  WireDeleteContentRequest,
  WireDeleteContentResponse,
  WireGcRequest,
  WireGcResponse,
  WireGetImageRequest,
  WireGetImageResponse,
  WireInfoRequest,
  WireInfoResponse,
  WireListContentRequest,
  WireListContentResponse,
  WireListImagesRequest,
  WireListImagesResponse,
  WireListSnapshotsRequest,
  WireListSnapshotsResponse,
  WireMountsRequest,
  WireMountsResponse,
  WirePullRequest,
  WirePullResponse,
  WireRemoveImageRequest,
  WireRemoveImageResponse,
  WireUsageRequest,
  WireUsageResponse,
} from './proto.js';
import { pullKey, type PullManager, type PullShares, type PullSubscriber } from './pulls.js';
import { logFailure, unary } from './unary.js';
import { writableMountHandlers } from './writable.js';

/** What the handlers work over. */
export interface HandlerContext {
  readonly service: LocalService;
  /** Pulls shared between callers. */
  readonly pulls: PullManager<PulledImage>;
  /** The daemon's keep_blobs: every pull keeps its blobs, asked or not. */
  readonly keepBlobs: boolean;
  readonly log: Logger;
  /** A Pull request was taken: `joined` when it joined a running pull. */
  readonly pullRequested?: (joined: boolean) => void;
}

export function imagesHandlers(ctx: HandlerContext): ImagesHandlers {
  const { service, log } = ctx;
  return {
    Pull: (call: grpc.ServerWritableStream<WirePullRequest, WirePullResponse>) => pullCall(ctx, call),
    List: unary<WireListImagesRequest, WireListImagesResponse>(log, 'Images.List', async () => ({
      images: (await service.listImages()).map((i) => imageToWire(i, i.unpackedSize ?? null)),
    })),
    Get: unary<WireGetImageRequest, WireGetImageResponse>(log, 'Images.Get', async (req) => {
      const d = await service.inspectImage(checkReference(req.name), req.platform ? { platform: req.platform } : {});
      return {
        image: imageToWire(d.image, d.unpackedSize),
        root: d.root,
        snapshots: [...d.snapshots],
        manifestJson: JSON.stringify(d.manifest),
        configJson: JSON.stringify(d.config),
        indexJson: d.index !== undefined ? JSON.stringify(d.index) : '',
      };
    }),
    Remove: unary<WireRemoveImageRequest, WireRemoveImageResponse>(log, 'Images.Remove', async (req) => {
      const removed = await service.removeImage(checkReference(req.name), req.platform ? { platform: req.platform } : {});
      log.info({ image: removed.name }, 'image removed');
      return { name: removed.name, gc: req.gc ? gcToWire(await service.collectGarbage(), false) : null };
    }),
  };
}

export function snapshotsHandlers(ctx: HandlerContext): SnapshotsHandlers {
  const { service, log } = ctx;
  return {
    Mounts: unary<WireMountsRequest, WireMountsResponse>(log, 'Snapshots.Mounts', async (req) => ({
      mounts: (await service.mounts(mountTarget(req))).map(mountToWire),
    })),
    List: unary<WireListSnapshotsRequest, WireListSnapshotsResponse>(log, 'Snapshots.List', async () => ({
      snapshots: (await service.listSnapshots()).map(snapshotToWire),
    })),
    Usage: unary<WireUsageRequest, WireUsageResponse>(log, 'Snapshots.Usage', async (req) => {
      const { size, inodes } = await service.snapshotUsage(checkDigest(req.chainId));
      return { size, inodes };
    }),
    ...writableMountHandlers(service, log),
  };
}

export function contentHandlers(ctx: HandlerContext): ContentHandlers {
  const { service, log } = ctx;
  return {
    Info: unary<WireInfoRequest, WireInfoResponse>(log, 'Content.Info', async (req) => {
      return { info: blobToWire(await service.contentInfo(checkDigest(req.digest))) };
    }),
    List: unary<WireListContentRequest, WireListContentResponse>(log, 'Content.List', async () => ({
      blobs: (await service.listContent()).map(blobToWire),
    })),
    Delete: unary<WireDeleteContentRequest, WireDeleteContentResponse>(log, 'Content.Delete', async (req) => {
      const digest = checkDigest(req.digest);
      await service.deleteContent(digest);
      log.info({ digest }, 'blob deleted');
      return {};
    }),
    GarbageCollect: unary<WireGcRequest, WireGcResponse>(log, 'Content.GarbageCollect', async (req) =>
      gcToWire(await service.collectGarbage({ dryRun: req.dryRun }), req.dryRun),
    ),
  };
}

/** What a Pull request asks for, checked: the pull's identity and the caller's shares. */
interface PullAsk {
  readonly name: string;
  readonly key: string;
  readonly platform: string | undefined;
  readonly credentials: { username: string; password: string } | undefined;
  readonly shares: PullShares;
}

/** A Pull request checked; INVALID_REFERENCE or INVALID_ARGUMENT for what does not parse. */
function pullAsk(ctx: HandlerContext, req: WirePullRequest): PullAsk {
  const credentials = req.credentials && req.credentials.username ? { username: req.credentials.username, password: req.credentials.password } : undefined;
  if (!req.reference) throw new FastpullError('INVALID_REFERENCE', 'pull: the request names no image reference');
  const name = formatReference(parseReference(req.reference));
  const platform = req.platform ? formatPlatform(parsePlatform(req.platform)) : undefined;
  const key = pullKey({ name, platform, plainHttp: req.plainHttp, keepBlobs: req.keepBlobs || ctx.keepBlobs, credentials, trace: req.trace });
  const cpuBudget = cpuBudgetFromWire(req.cpuBudget);
  const shares: PullShares = {
    priority: priorityFromWire(req.priority),
    rateLimit: rateLimitFromWire(req.rateLimitBytesPerSecond),
    ...(cpuBudget !== undefined ? { cpuBudget } : {}),
  };
  return { name, key, platform, credentials, shares };
}

/**
 * Images.Pull: joins the running pull of the same image, options and credentials, or starts one;
 * streams its progress from there. The caller going away only stops its stream.
 */
function pullCall(ctx: HandlerContext, call: grpc.ServerWritableStream<WirePullRequest, WirePullResponse>): void {
  const { service, log } = ctx;
  const req = call.request;
  let ask: PullAsk;
  try {
    ask = pullAsk(ctx, req);
  } catch (e) {
    logFailure(log, 'Images.Pull', e);
    call.emit('error', toStatus(e));
    return;
  }
  const { name, platform, credentials } = ask;
  const stream = streamPull(ctx, call);
  const { leave, joined } = ctx.pulls.join(
    ask.key,
    name,
    (signal, onProgress, onTrace, ticket, limiter, budget) =>
      service.pull(name, {
        ticket,
        ...(limiter ? { limiter } : {}),
        ...(budget ? { budget } : {}),
        ...(log.isLevelEnabled('debug') ? { observer: passLog(log, name, budget) } : {}),
        ...(platform ? { platform } : {}),
        ...(req.plainHttp ? { plainHttp: true } : {}),
        ...(req.keepBlobs ? { keepBlobs: true } : {}),
        ...(credentials ? { credentials } : {}),
        ...(req.trace ? { onTrace } : {}),
        signal,
        onProgress,
      }),
    stream.subscriber,
    ask.shares,
  );
  ctx.pullRequested?.(joined);
  if (joined) log.debug({ image: name }, 'joined a running pull');
  call.on('cancelled', () => {
    stream.close();
    leave();
  });
}

/** One caller's stream of a shared pull: its progress, trace and answer, until the stream closes. */
function streamPull(
  ctx: HandlerContext,
  call: grpc.ServerWritableStream<WirePullRequest, WirePullResponse>,
): { subscriber: PullSubscriber<PulledImage>; close: () => void } {
  const { service, log } = ctx;
  let open = true;
  const subscriber: PullSubscriber<PulledImage> = {
    progress: (e) => {
      if (open) call.write(eventToWire(e));
    },
    trace: (t) => {
      if (open) call.write(traceToWire(t));
    },
    finish: (r) => {
      if (!open) return;
      // A pull the snapshotter started for containerd, joined by this caller: the image is a
      // user's now, and gc must not let it go when containerd forgets it.
      const claimed = r.image.heldFor === undefined ? Promise.resolve(r) : service.claimImage(r.image).then((image) => ({ ...r, image }));
      claimed.then(
        (done) => {
          if (!open) return;
          open = false;
          call.write(eventToWire({ type: 'done', image: done.image, timings: done.timings }, done));
          call.end();
        },
        (e: unknown) => {
          if (!open) return;
          open = false;
          logFailure(log, 'Images.Pull', e);
          call.emit('error', toStatus(e));
        },
      );
    },
    fail: (e) => {
      if (!open) return;
      open = false;
      call.emit('error', toStatus(e));
    },
  };
  return { subscriber, close: () => void (open = false) };
}

/** A reference that parses, returned as given (resolveImage canonicalises it). */
function checkReference(ref: string): string {
  if (!ref) throw new FastpullError('INVALID_REFERENCE', 'the request names no image reference');
  parseReference(ref);
  return ref;
}

function checkDigest(d: string): Digest {
  if (!d) throw new FastpullError('INVALID_DIGEST', 'the request names no digest');
  return parseDigest(d).digest;
}

/** What a Mounts request names: an image by reference or a snapshot stack by its top chainID. */
function mountTarget(req: WireMountsRequest): MountTarget {
  if (req.target === 'image' && req.image) return { image: checkReference(req.image), ...(req.platform ? { platform: req.platform } : {}) };
  if (req.target === 'chainId' && req.chainId) return { chainID: checkDigest(req.chainId) };
  throw new FastpullError('INVALID_ARGUMENT', 'mounts: name an image or a chain_id');
}
