// Manifests, indexes and image configs: types that mirror the OCI image spec
// (manifest.md, image-index.md, config.md) and parsers that validate what fastpull relies on.
import { FastpullError } from '../errors.js';
import { validateDigest, type Digest } from './digest.js';
import { parseJSONDocument } from './json.js';
import { isConfigMediaType, isIndexMediaType, isManifestMediaType, isSchema1MediaType, MediaTypes } from './mediatypes.js';
import type { Platform } from './platform.js';

/** A content descriptor (OCI descriptor.md). */
export interface Descriptor {
  /** Media type of the content, e.g. {@link MediaTypes}.OCI_MANIFEST. */
  readonly mediaType: string;
  /** Digest of the content's bytes. */
  readonly digest: Digest;
  /** Size of the content in bytes. */
  readonly size: number;
  /** Other places the content may be fetched from (foreign layers). */
  readonly urls?: readonly string[];
  /** Free-form metadata. */
  readonly annotations?: Readonly<Record<string, string>>;
  /** In an index: the platform the manifest is for. */
  readonly platform?: Platform;
}

/** An image manifest (OCI manifest.md, Docker v2 schema 2): one platform's config and layers. */
export interface ImageManifest {
  /** Always 2. */
  readonly schemaVersion: 2;
  /** The manifest's media type (from the document, else the registry's Content-Type). */
  readonly mediaType: string;
  /** The image config. */
  readonly config: Descriptor;
  /** The layers, bottom first. */
  readonly layers: readonly Descriptor[];
  /** Free-form metadata. */
  readonly annotations?: Readonly<Record<string, string>>;
}

/** An image index (OCI image-index.md) or Docker manifest list: one manifest per platform. */
export interface ImageIndex {
  /** Always 2. */
  readonly schemaVersion: 2;
  /** The index's media type. */
  readonly mediaType: string;
  /** The platform manifests, in the publisher's order of preference. */
  readonly manifests: readonly Descriptor[];
  /** Free-form metadata. */
  readonly annotations?: Readonly<Record<string, string>>;
}

/** The parts of an image config (config.md) that pulling needs. */
export interface ImageConfig {
  /** CPU architecture the image was built for ('' when the config names none). */
  readonly architecture: string;
  /** Operating system the image was built for ('' when the config names none). */
  readonly os: string;
  /** Architecture variant, when the config names one. */
  readonly variant?: string;
  /** The layers' diffIDs (digests of the uncompressed tars), bottom first, one per manifest layer. */
  readonly rootfs: { readonly type: 'layers'; readonly diff_ids: readonly Digest[] };
  /** The runtime configuration (Env, Cmd, ...), unchecked. */
  readonly config?: Readonly<Record<string, unknown>>;
}

function bad(what: string, why: string): FastpullError {
  return new FastpullError('INVALID_MANIFEST', `${what}: ${why}`);
}

function parseJSON(bytes: Uint8Array, what: string): Record<string, unknown> {
  const v = parseJSONDocument(bytes, what);
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw bad(what, 'not a JSON object');
  return v as Record<string, unknown>;
}

const MAX_BLOB_SIZE = 2 ** 53 - 1;

/**
 * Validates one descriptor of a parsed JSON document (a manifest's config or layer, an index
 * entry). Throws INVALID_MANIFEST, starting the message with `what`, when it is not one.
 * @example
 * const config = parseDescriptor(JSON.parse(text).config, 'manifest config');
 */
export function parseDescriptor(v: unknown, what: string): Descriptor {
  if (typeof v !== 'object' || v === null) throw bad(what, 'descriptor is not an object');
  const d = v as Record<string, unknown>;
  if (typeof d.mediaType !== 'string' || d.mediaType.length === 0 || d.mediaType.length > 255) throw bad(what, 'descriptor without a valid mediaType');
  if (typeof d.digest !== 'string') throw bad(what, 'descriptor without a digest');
  let digest: Digest;
  try {
    digest = validateDigest(d.digest);
  } catch (e) {
    throw new FastpullError('INVALID_MANIFEST', `${what}: ${(e as Error).message}`, { cause: e });
  }
  if (typeof d.size !== 'number' || !Number.isSafeInteger(d.size) || d.size < 0 || d.size > MAX_BLOB_SIZE) {
    throw bad(what, `descriptor ${digest} has an invalid size`);
  }
  const out: { -readonly [K in keyof Descriptor]: Descriptor[K] } = { mediaType: d.mediaType, digest, size: d.size };
  if (Array.isArray(d.urls) && d.urls.every((u) => typeof u === 'string')) out.urls = d.urls;
  if (isStringRecord(d.annotations)) out.annotations = d.annotations;
  if (typeof d.platform === 'object' && d.platform !== null) {
    const p = d.platform as Record<string, unknown>;
    if (typeof p.os === 'string' && typeof p.architecture === 'string') {
      out.platform = { os: p.os, architecture: p.architecture, ...(typeof p.variant === 'string' && p.variant ? { variant: p.variant } : {}) };
    }
  }
  return out;
}

function isStringRecord(v: unknown): v is Record<string, string> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && Object.values(v).every((x) => typeof x === 'string');
}

function rejectSchema1(obj: Record<string, unknown>, mediaType: string | undefined, what: string): void {
  if (isSchema1MediaType(mediaType) || obj.schemaVersion === 1) {
    throw new FastpullError(
      'UNSUPPORTED_MEDIA_TYPE',
      `${what}: Docker image manifest schema 1 is deprecated and not supported; push the image again with a current client (schema 2 or OCI)`,
      { details: { mediaType: mediaType ?? MediaTypes.DOCKER_MANIFEST_SCHEMA1 } },
    );
  }
}

/** What {@link parseManifest} found: an index or a manifest. */
export type ParsedManifest = { kind: 'index'; index: ImageIndex } | { kind: 'manifest'; manifest: ImageManifest };

/**
 * Parses a manifest or index. `contentType` is the registry's Content-Type (or the descriptor's
 * media type); the document's own mediaType field wins when both are present and agree, and a
 * disagreement is an error. Throws INVALID_MANIFEST, or UNSUPPORTED_MEDIA_TYPE for schema 1 and
 * types that are neither.
 * @example
 * const parsed = parseManifest(bytes, res.headers['content-type'], 'manifest of app:1');
 * if (parsed.kind === 'index') console.log(parsed.index.manifests.length, 'platforms');
 */
export function parseManifest(bytes: Uint8Array, contentType: string | undefined, what: string): ParsedManifest {
  const header = contentType?.split(';')[0]?.trim() || undefined;
  if (isSchema1MediaType(header)) rejectSchema1({}, header, what);
  const obj = parseJSON(bytes, what);
  const field = typeof obj.mediaType === 'string' ? obj.mediaType : undefined;
  rejectSchema1(obj, field, what);
  if (obj.schemaVersion !== 2) throw bad(what, `unsupported schemaVersion ${JSON.stringify(obj.schemaVersion)}`);
  if (field && header && field !== header && header !== 'application/json' && header !== 'application/octet-stream') {
    throw bad(what, `mediaType ${field} disagrees with Content-Type ${header}`);
  }
  let mediaType = field ?? (header === 'application/json' || header === 'application/octet-stream' ? undefined : header);
  if (mediaType === undefined) mediaType = Array.isArray(obj.manifests) ? MediaTypes.OCI_INDEX : MediaTypes.OCI_MANIFEST;

  if (isIndexMediaType(mediaType)) {
    if (!Array.isArray(obj.manifests)) throw bad(what, 'index without a manifests array');
    const manifests = obj.manifests.map((m, i) => parseDescriptor(m, `${what}: manifests[${i}]`));
    return {
      kind: 'index',
      index: { schemaVersion: 2, mediaType, manifests, ...(isStringRecord(obj.annotations) ? { annotations: obj.annotations } : {}) },
    };
  }
  if (isManifestMediaType(mediaType)) {
    if (!Array.isArray(obj.layers)) throw bad(what, 'manifest without a layers array');
    const config = parseDescriptor(obj.config, `${what}: config`);
    const layers = obj.layers.map((l, i) => parseDescriptor(l, `${what}: layers[${i}]`));
    return {
      kind: 'manifest',
      manifest: { schemaVersion: 2, mediaType, config, layers, ...(isStringRecord(obj.annotations) ? { annotations: obj.annotations } : {}) },
    };
  }
  throw new FastpullError('UNSUPPORTED_MEDIA_TYPE', `${what}: unsupported manifest media type ${JSON.stringify(mediaType)}`, { details: { mediaType } });
}

/**
 * Parses an image config and validates its diffIDs. Throws INVALID_MANIFEST, or
 * UNSUPPORTED_MEDIA_TYPE when `mediaType` is given and is not an image config's (an artifact).
 * Checking one diffID per layer is the caller's part, against its manifest.
 * @example
 * const config = parseImageConfig(bytes, 'config of app:1', manifest.config.mediaType);
 * console.log(config.rootfs.diff_ids.length, 'layers');
 */
export function parseImageConfig(bytes: Uint8Array, what: string, mediaType?: string): ImageConfig {
  if (mediaType !== undefined && !isConfigMediaType(mediaType)) {
    throw new FastpullError('UNSUPPORTED_MEDIA_TYPE', `${what}: ${mediaType} is not an image config (is this an artifact rather than an image?)`, {
      details: { mediaType },
    });
  }
  const obj = parseJSON(bytes, what);
  const rootfs = obj.rootfs as Record<string, unknown> | undefined;
  if (typeof rootfs !== 'object' || rootfs === null || rootfs.type !== 'layers' || !Array.isArray(rootfs.diff_ids)) {
    throw bad(what, 'config without rootfs.type "layers" and rootfs.diff_ids');
  }
  const diffIDs = rootfs.diff_ids.map((d, i) => {
    if (typeof d !== 'string') throw bad(what, `rootfs.diff_ids[${i}] is not a string`);
    try {
      return validateDigest(d);
    } catch (e) {
      throw new FastpullError('INVALID_MANIFEST', `${what}: rootfs.diff_ids[${i}]: ${(e as Error).message}`, { cause: e });
    }
  });
  return {
    architecture: typeof obj.architecture === 'string' ? obj.architecture : '',
    os: typeof obj.os === 'string' ? obj.os : '',
    ...(typeof obj.variant === 'string' && obj.variant ? { variant: obj.variant } : {}),
    rootfs: { type: 'layers', diff_ids: diffIDs },
    ...(typeof obj.config === 'object' && obj.config !== null ? { config: obj.config as Record<string, unknown> } : {}),
  };
}
