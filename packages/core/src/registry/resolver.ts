// From a reference to one platform's image: the manifest or index it names, the platform's manifest
// in an index, and the config, each read whole, size-capped and checked against its digest.
import type { RegistryResponse } from './message.js';
import { FastpullError, isFastpullError } from '../errors.js';
import { parseDigest, sha256Digest, verifyBytes, type Digest } from '../oci/digest.js';
import { parseImageConfig, parseManifest, type Descriptor, type ImageConfig, type ImageIndex, type ImageManifest } from '../oci/manifest.js';
import { MANIFEST_ACCEPT } from '../oci/mediatypes.js';
import { formatPlatform, hostPlatform, normalizePlatform, platformMatches, selectPlatform, type Platform } from '../oci/platform.js';
import { formatReference, type Reference } from '../oci/reference.js';
import { CONFIG_SIZE_LIMIT, MANIFEST_SIZE_LIMIT } from './defaults.js';
import { discard, headerValue, readBody, responseError } from './response.js';
import type { ByteThrottle } from './ratelimit.js';
import { retryBody, type Requester } from './transport.js';
import { DEFAULT_METADATA_TIMEOUT_MS, withinDeadline } from './deadline.js';

/** One platform's image, resolved and verified. */
export interface ResolvedImage {
  /** The reference that was resolved. */
  readonly reference: Reference;
  /** What the reference points to: an index or a manifest. */
  readonly target: Descriptor;
  /** The platform manifest (equal to target when the reference names a manifest). */
  readonly manifestDescriptor: Descriptor;
  /** The platform manifest, parsed. */
  readonly manifest: ImageManifest;
  /** The platform manifest's verified bytes. */
  readonly manifestBytes: Buffer;
  /** The index, when the reference names one. */
  readonly index?: ImageIndex;
  /** The index's bytes, when the reference names one. */
  readonly indexBytes?: Buffer;
  /** The image config, parsed. */
  readonly config: ImageConfig;
  /** The image config's verified bytes. */
  readonly configBytes: Buffer;
  /** The image's platform, from its config (else the platform asked for). */
  readonly platform: Platform;
}

/** A manifest or index as read: its verified bytes, the Content-Type it came with, and its digest. */
export interface FetchedManifest {
  /** The body, checked against the digest asked for (or the registry's Docker-Content-Digest). */
  readonly bytes: Buffer;
  /** The Content-Type the registry sent. */
  readonly mediaType: string | undefined;
  /** The digest of `bytes`. */
  readonly digest: Digest;
}

/** The platform manifest an index entry leads to. */
interface PlatformManifest {
  readonly manifest: ImageManifest;
  readonly bytes: Buffer;
  readonly descriptor: Descriptor;
}

/** Verified reads of manifests and small blobs, and resolution of a reference to one platform's image. */
export class Resolver {
  constructor(
    private readonly transport: Requester,
    /** How long one document may take, retries included (deadline.ts). */
    private readonly timeoutMs = DEFAULT_METADATA_TIMEOUT_MS,
    /** The rate limit the bodies read draw from; absent: none. */
    readonly throttle?: ByteThrottle,
  ) {}

  /** Runs `read` within the metadata timeout: NETWORK_ERROR naming `what` when it passes. */
  withinDeadline<T>(what: string, signal: AbortSignal | undefined, read: (signal: AbortSignal) => Promise<T>): Promise<T> {
    return withinDeadline(this.timeoutMs, signal, what, read);
  }

  /**
   * Fetches a manifest or index by tag or digest, size-capped. By digest the bytes must hash to
   * it; by tag they must match the Docker-Content-Digest the registry sends, if it sends one.
   */
  async fetchManifest(ref: Reference, reference: string, signal?: AbortSignal): Promise<FetchedManifest> {
    return this.withinDeadline(manifestWhat(ref, reference), signal, (s) => retryBody(s, () => this.fetchManifestOnce(ref, reference, s)));
  }

  /** Reads a small blob (a config) into memory, verifying size and digest. */
  async fetchBlobBytes(ref: Reference, desc: Descriptor, limit: number, signal?: AbortSignal): Promise<Buffer> {
    const what = `blob ${desc.digest} of ${ref.registry}/${ref.repository}`;
    if (desc.size > limit) throw new FastpullError('MANIFEST_TOO_LARGE', `${what}: ${desc.size} bytes, over the ${limit}-byte limit`);
    return this.withinDeadline(what, signal, (s) => retryBody(s, () => this.fetchBlobBytesOnce(ref, desc, what, s)));
  }

  /**
   * Resolves a reference to one platform's manifest and config: follows an index to the
   * platform's manifest, verifies everything fetched by digest, and checks that the config lists
   * one diffID per layer.
   */
  async resolve(ref: Reference, options: { platform?: Platform; signal?: AbortSignal } = {}): Promise<ResolvedImage> {
    const platform = normalizePlatform(options.platform ?? hostPlatform());
    const name = formatReference(ref);
    const top = await this.fetchManifest(ref, ref.digest ?? ref.tag ?? 'latest', options.signal);
    const parsed = parseManifest(top.bytes, top.mediaType, `manifest of ${name}`);
    const target: Descriptor = {
      mediaType: parsed.kind === 'index' ? parsed.index.mediaType : parsed.manifest.mediaType,
      digest: top.digest,
      size: top.bytes.length,
    };
    const index = parsed.kind === 'index' ? parsed.index : undefined;
    const chosen: PlatformManifest =
      parsed.kind === 'index'
        ? await this.platformManifest(ref, parsed.index, platform, options.signal)
        : { manifest: parsed.manifest, bytes: top.bytes, descriptor: target };
    const { manifest } = chosen;

    const configBytes = await this.fetchBlobBytes(ref, manifest.config, CONFIG_SIZE_LIMIT, options.signal);
    const config = parseImageConfig(configBytes, `config ${manifest.config.digest} of ${name}`, manifest.config.mediaType);
    if (config.rootfs.diff_ids.length !== manifest.layers.length) {
      throw new FastpullError(
        'INVALID_MANIFEST',
        `${name}: manifest lists ${manifest.layers.length} layers but the config lists ${config.rootfs.diff_ids.length} diffIDs`,
      );
    }
    const imagePlatform: Platform = { os: config.os, architecture: config.architecture, ...(config.variant ? { variant: config.variant } : {}) };
    if (!index && config.os && config.architecture && !platformMatches(platform, imagePlatform)) {
      throw new FastpullError('PLATFORM_NOT_FOUND', `${name}: the image is for ${formatPlatform(imagePlatform)}, not ${formatPlatform(platform)}`, {
        details: { platform: formatPlatform(platform), offered: [formatPlatform(imagePlatform)] },
      });
    }
    return {
      reference: ref,
      target,
      manifestDescriptor: chosen.descriptor,
      manifest,
      manifestBytes: chosen.bytes,
      ...(index ? { index, indexBytes: top.bytes } : {}),
      config,
      configBytes,
      platform: config.os && config.architecture ? normalizePlatform(imagePlatform) : platform,
    };
  }

  /** The manifest an index lists for `platform`, fetched by digest and checked against the entry's size. */
  private async platformManifest(ref: Reference, index: ImageIndex, platform: Platform, signal: AbortSignal | undefined): Promise<PlatformManifest> {
    const name = formatReference(ref);
    const chosen = selectPlatform(platform, index.manifests);
    if (!chosen) {
      const offered = index.manifests.filter((m) => m.platform).map((m) => formatPlatform(m.platform!));
      throw new FastpullError(
        'PLATFORM_NOT_FOUND',
        `${name}: no image for ${formatPlatform(platform)} (the index offers ${offered.join(', ') || 'no platforms'})`,
        {
          details: { platform: formatPlatform(platform), offered },
        },
      );
    }
    if (chosen.size > MANIFEST_SIZE_LIMIT) throw new FastpullError('MANIFEST_TOO_LARGE', `${name}: platform manifest of ${chosen.size} bytes`);
    const child = await this.fetchManifest(ref, chosen.digest, signal);
    if (child.bytes.length !== chosen.size) {
      throw new FastpullError('SIZE_MISMATCH', `${name}: platform manifest is ${child.bytes.length} bytes, index says ${chosen.size}`);
    }
    const inner = parseManifest(child.bytes, child.mediaType ?? chosen.mediaType, `manifest ${chosen.digest} of ${name}`);
    if (inner.kind !== 'manifest') throw new FastpullError('INVALID_MANIFEST', `${name}: index entry ${chosen.digest} is itself an index`);
    const descriptor: Descriptor = {
      mediaType: inner.manifest.mediaType,
      digest: chosen.digest,
      size: chosen.size,
      ...(chosen.platform ? { platform: chosen.platform } : {}),
    };
    return { manifest: inner.manifest, bytes: child.bytes, descriptor };
  }

  private async fetchManifestOnce(ref: Reference, reference: string, signal?: AbortSignal): Promise<FetchedManifest> {
    const what = manifestWhat(ref, reference);
    const byDigest = reference.includes(':');
    const res = await this.transport.requestWithRetry(ref, `manifests/${reference}`, {
      op: byDigest ? 'pull' : 'resolve',
      headers: { accept: MANIFEST_ACCEPT },
      signal,
    });
    if (res.statusCode !== 200) throw await responseError(res, what);
    const length = Number(headerValue(res.headers['content-length']) ?? NaN);
    if (length > MANIFEST_SIZE_LIMIT) {
      await discard(res);
      throw new FastpullError('MANIFEST_TOO_LARGE', `${what}: ${length} bytes, over the ${MANIFEST_SIZE_LIMIT}-byte limit`, { details: { size: length } });
    }
    const bytes = await readBody(res, MANIFEST_SIZE_LIMIT, what, 'MANIFEST_TOO_LARGE', signal, this.throttle);
    const mediaType = headerValue(res.headers['content-type']);
    if (byDigest) {
      const digest = parseDigest(reference).digest;
      verifyBytes(bytes, digest, what);
      return { bytes, mediaType, digest };
    }
    const claimed = claimedDigest(res, what);
    if (claimed !== undefined) verifyBytes(bytes, claimed, `${what} (against Docker-Content-Digest)`);
    return { bytes, mediaType, digest: sha256Digest(bytes) };
  }

  private async fetchBlobBytesOnce(ref: Reference, desc: Descriptor, what: string, signal?: AbortSignal): Promise<Buffer> {
    const res = await this.transport.requestWithRetry(ref, `blobs/${desc.digest}`, { signal });
    if (res.statusCode !== 200) throw await responseError(res, what);
    const length = headerValue(res.headers['content-length']);
    if (length !== undefined && Number(length) !== desc.size) {
      await discard(res);
      throw new FastpullError('SIZE_MISMATCH', `${what}: Content-Length ${length}, descriptor says ${desc.size}`, {
        details: { want: desc.size, got: Number(length) },
      });
    }
    const bytes = await readBody(res, desc.size, what, 'REGISTRY_ERROR', signal, this.throttle).catch((e: unknown) => {
      // Only the cap is the descriptor's business; a broken connection stays NETWORK_ERROR.
      if (isFastpullError(e) && e.code === 'REGISTRY_ERROR' && e.details.cap !== undefined) {
        throw new FastpullError('SIZE_MISMATCH', `${what}: more bytes than the descriptor's ${desc.size}`, { cause: e, details: { want: desc.size } });
      }
      throw e;
    });
    if (bytes.length !== desc.size) {
      throw new FastpullError('SIZE_MISMATCH', `${what}: got ${bytes.length} bytes, descriptor says ${desc.size}`, {
        details: { want: desc.size, got: bytes.length },
      });
    }
    verifyBytes(bytes, desc.digest, what);
    return bytes;
  }
}

/** A manifest as messages name it: by tag, `registry/repository:tag`; by digest, `registry/repository@digest`. */
function manifestWhat(ref: Reference, reference: string): string {
  return `manifest ${ref.registry}/${ref.repository}:${reference}`.replace(/:(sha\d+:)/, '@$1');
}

/** The Docker-Content-Digest a registry sent with a manifest read by tag, if any. */
function claimedDigest(res: RegistryResponse, what: string): Digest | undefined {
  const claimed = headerValue(res.headers['docker-content-digest']);
  if (claimed === undefined) return undefined;
  try {
    return parseDigest(claimed).digest;
  } catch (e) {
    throw new FastpullError('REGISTRY_ERROR', `${what}: registry sent an invalid Docker-Content-Digest`, { cause: e });
  }
}
