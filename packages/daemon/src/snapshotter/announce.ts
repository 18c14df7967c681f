// Telling containerd's CRI plugin to look at its images again once fastpulld serves.
//
// When the CRI plugin starts, it asks the snapshotter of its configuration whether each image of
// its namespace is unpacked, and leaves out of its image list every image for which the question
// fails; that is every image unpacked into fastpull when fastpulld is not serving yet (containerd
// started first: the DaemonSet's order, or fastpulld slow to come up). Nothing makes it ask again
// by itself: kubelet then sees those images as missing. What does make it read an image again is
// the image's create, update or delete event, and reading an image takes nothing from the
// snapshotter. So fastpulld, once serving, updates each image of CRI's namespace with a change
// that changes nothing (a label of its own, set empty: containerd stores no empty label), which
// has containerd publish /images/update for it, and the CRI plugin lists it again.
import { existsSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import type { Logger } from 'pino';
import { LOADER_OPTIONS } from '../proto.js';

/** The containerd namespace of CRI's images (kubelet's), in every containerd release. */
export const CRI_NAMESPACE = 'k8s.io';
/**
 * The label the update names. Its value is always empty, which containerd removes rather than
 * stores: the image keeps the labels it had, and only its update time changes.
 */
export const ANNOUNCE_LABEL = 'io.fastpull.announce';

const IMAGES_PROTO = 'containerd/services/images/v1/images.proto';
const IMAGES_SERVICE = 'containerd.services.images.v1.Images';
/** Updates in flight at once: each is a write transaction in containerd's metadata. */
const CONCURRENCY = 4;
/** A containerd that answers no call in this long is treated as not there. */
const CALL_TIMEOUT_MS = 10_000;

interface WireDescriptor {
  mediaType: string;
  digest: string;
  size: number;
  annotations: Record<string, string>;
}

interface WireImage {
  name: string;
  labels: Record<string, string>;
  target: WireDescriptor | null;
}

type Unary<Req, Res> = (
  req: Req,
  metadata: grpc.Metadata,
  options: grpc.CallOptions,
  cb: (e: grpc.ServiceError | null, res?: Res) => void,
) => grpc.ClientUnaryCall;

interface ImagesClient extends grpc.Client {
  List: Unary<{ filters: string[] }, { images: WireImage[] }>;
  Update: Unary<{ image: WireImage; updateMask: { paths: string[] } }, { image: WireImage }>;
}

let cached: grpc.ServiceClientConstructor | undefined;
function imagesClientConstructor(): grpc.ServiceClientConstructor {
  cached ??= grpc.makeClientConstructor(protoLoader.loadSync([IMAGES_PROTO], LOADER_OPTIONS)[IMAGES_SERVICE] as grpc.ServiceDefinition, 'Images');
  return cached;
}

/** What {@link announceImages} did. */
export type AnnounceOutcome =
  /** Each image of the namespace was updated (`images`), or had gone meanwhile (`gone`). */
  | { readonly result: 'announced'; readonly images: number; readonly gone: number }
  /** containerd was not reached: no socket there, or nothing answering on it. */
  | { readonly result: 'no-containerd'; readonly reason: string };

export interface AnnounceOptions {
  /** containerd's gRPC socket. */
  readonly socket: string;
  /** Default: {@link CRI_NAMESPACE}. */
  readonly namespace?: string;
  readonly signal?: AbortSignal;
}

/**
 * Updates every image of the namespace, changing nothing, so that containerd announces each one.
 * A containerd that is not there (no socket, nobody answering) is an outcome, not an error; a
 * containerd that refuses the calls rejects with its error.
 */
export async function announceImages(options: AnnounceOptions): Promise<AnnounceOutcome> {
  if (!existsSync(options.socket)) return { result: 'no-containerd', reason: `${options.socket} does not exist` };
  const Ctor = imagesClientConstructor();
  const client = new Ctor(`unix:${options.socket}`, grpc.credentials.createInsecure()) as unknown as ImagesClient;
  const metadata = new grpc.Metadata();
  metadata.set('containerd-namespace', options.namespace ?? CRI_NAMESPACE);
  const call = <Req, Res>(method: Unary<Req, Res>, req: Req): Promise<Res> =>
    new Promise((resolve, reject) => {
      const c = method.call(client, req, metadata, { deadline: Date.now() + CALL_TIMEOUT_MS }, (e, res) => (e ? reject(e) : resolve(res!)));
      options.signal?.addEventListener('abort', () => c.cancel(), { once: true });
    });
  try {
    let images: WireImage[];
    try {
      ({ images } = await call(client.List, { filters: [] }));
    } catch (e) {
      const code = (e as grpc.ServiceError).code;
      if (code === grpc.status.UNAVAILABLE || code === grpc.status.DEADLINE_EXCEEDED) return { result: 'no-containerd', reason: (e as Error).message };
      throw e;
    }
    let done = 0;
    let gone = 0;
    const queue = [...images];
    const worker = async (): Promise<void> => {
      for (let image = queue.shift(); image !== undefined && !options.signal?.aborted; image = queue.shift()) {
        try {
          // The listed target goes along: containerd converts the request's target whatever the
          // mask says (2.x without checking that there is one), though with this mask it keeps
          // the target it has.
          await call(client.Update, { image: { name: image.name, labels: {}, target: image.target }, updateMask: { paths: [`labels.${ANNOUNCE_LABEL}`] } });
          done++;
        } catch (e) {
          // Removed since the listing: nothing to announce.
          if ((e as grpc.ServiceError).code !== grpc.status.NOT_FOUND) throw e;
          gone++;
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(CONCURRENCY, queue.length) }, worker));
    return { result: 'announced', images: done, gone };
  } finally {
    client.close();
  }
}

/** Runs {@link announceImages} and logs what came of it; never rejects. */
export async function announceAndLog(options: AnnounceOptions & { readonly log: Logger }): Promise<AnnounceOutcome | undefined> {
  const namespace = options.namespace ?? CRI_NAMESPACE;
  try {
    const outcome = await announceImages(options);
    if (outcome.result === 'announced')
      options.log.info({ containerd: options.socket, namespace, images: outcome.images, gone: outcome.gone }, "containerd's images announced again");
    else options.log.info({ containerd: options.socket, reason: outcome.reason }, 'containerd is not running: no images to announce');
    return outcome;
  } catch (e) {
    options.log.warn({ containerd: options.socket, namespace, err: e instanceof Error ? e.message : String(e) }, "announcing containerd's images again failed");
    return undefined;
  }
}
