// Writes built images as an OCI image layout on disk, the form reference tools (umoci, skopeo oci:) read.
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { FastpullError } from '../errors.js';
import { parseDigest, type Digest } from '../oci/digest.js';
import { MediaTypes } from '../oci/mediatypes.js';
import type { BuiltImage } from './builder.js';

/** The annotation of an index.json entry that names it (https://github.com/opencontainers/image-spec/blob/main/image-layout.md#indexjson-file). */
export const OCI_REF_NAME_ANNOTATION = 'org.opencontainers.image.ref.name';

/** Contents of the `oci-layout` file (https://github.com/opencontainers/image-spec/blob/main/image-layout.md#oci-layout-file). */
const LAYOUT_VERSION = '1.0.0';

/**
 * The `ref.name` grammar of the image-layout spec: components of alphanumerics joined by `-._:@+`
 * or `--`, separated by `/`.
 */
const REF_NAME_RE = /^[A-Za-z0-9]+(?:(?:[-._:@+]|--)[A-Za-z0-9]+)*(?:\/[A-Za-z0-9]+(?:(?:[-._:@+]|--)[A-Za-z0-9]+)*)*$/;

const OCI_LAYER_TYPES: ReadonlySet<string> = new Set([
  MediaTypes.OCI_LAYER,
  MediaTypes.OCI_LAYER_GZIP,
  MediaTypes.OCI_LAYER_ZSTD,
  MediaTypes.OCI_LAYER_NONDISTRIBUTABLE,
  MediaTypes.OCI_LAYER_NONDISTRIBUTABLE_GZIP,
  MediaTypes.OCI_LAYER_NONDISTRIBUTABLE_ZSTD,
]);

/** What {@link writeOciLayout} needs of an image: a {@link BuiltImage} has all of it. */
export type OciLayoutImage = Pick<BuiltImage, 'manifest' | 'manifestDigest' | 'manifestDescriptor' | 'blobs'>;

/** One image of a layout and the name index.json gives it. */
export interface OciLayoutEntry {
  /** The `org.opencontainers.image.ref.name`, e.g. `latest` (what `umoci unpack --image DIR:TAG` selects). */
  readonly tag: string;
  /** The image to write. */
  readonly image: OciLayoutImage;
}

function invalid(message: string): FastpullError {
  return new FastpullError('INVALID_ARGUMENT', `writeOciLayout: ${message}`);
}

interface ManifestRefs {
  readonly mediaType?: unknown;
  readonly config?: { mediaType?: unknown; digest?: unknown };
  readonly layers?: readonly { mediaType?: unknown; digest?: unknown }[];
}

/** The digests the manifest references; fails when it is not an OCI image manifest or a referenced blob is missing. */
function referencedBlobs(entry: OciLayoutEntry): Digest[] {
  const { tag, image } = entry;
  let parsed: unknown;
  try {
    parsed = JSON.parse(image.manifest.toString('utf8'));
  } catch (e) {
    throw new FastpullError('INVALID_MANIFEST', `writeOciLayout: image ${JSON.stringify(tag)}: the manifest is not JSON`, { cause: e });
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new FastpullError('INVALID_MANIFEST', `writeOciLayout: image ${JSON.stringify(tag)}: the manifest is not a JSON object`);
  }
  const m = parsed as ManifestRefs;
  const unsupported = (what: string, type: unknown): FastpullError =>
    new FastpullError(
      'UNSUPPORTED_MEDIA_TYPE',
      `writeOciLayout: image ${JSON.stringify(tag)}: ${what} has media type ${JSON.stringify(type)}; an OCI layout needs OCI media types (build the image with format 'oci', not 'docker')`,
      { details: { mediaType: type } },
    );
  // OCI lets a manifest omit its mediaType; Docker's schema 2 always says it.
  if (m.mediaType !== undefined && m.mediaType !== MediaTypes.OCI_MANIFEST) throw unsupported('the manifest', m.mediaType);
  if (image.manifestDescriptor.mediaType !== MediaTypes.OCI_MANIFEST) throw unsupported('the manifest descriptor', image.manifestDescriptor.mediaType);
  if (m.config?.mediaType !== MediaTypes.OCI_CONFIG) throw unsupported('the config', m.config?.mediaType);
  const digests = [m.config.digest];
  for (const [i, layer] of (m.layers ?? []).entries()) {
    if (typeof layer.mediaType !== 'string' || !OCI_LAYER_TYPES.has(layer.mediaType)) throw unsupported(`layer ${i}`, layer.mediaType);
    digests.push(layer.digest);
  }
  return digests.map((d) => {
    if (typeof d !== 'string' || !image.blobs.has(d as Digest)) {
      throw invalid(`image ${JSON.stringify(tag)}: the manifest references blob ${JSON.stringify(d)}, which the image does not carry`);
    }
    return d as Digest;
  });
}

/**
 * Writes `images` as an OCI image layout into `dir` (created if missing; it must be empty): the
 * `oci-layout` file, `index.json` listing each manifest with its platform and an
 * `org.opencontainers.image.ref.name` annotation holding its tag, and every manifest, config and
 * layer blob under `blobs/<algorithm>/<hex>` (a blob shared by several images is written once).
 * Blobs are written as given, not re-hashed, so a test can plant a corrupt one.
 *
 * Errors: UNSUPPORTED_MEDIA_TYPE for a Docker-format image (umoci, for one, reads OCI media types
 * only); INVALID_MANIFEST for a manifest that is not a JSON object; INVALID_DIGEST for a
 * malformed digest; INVALID_ARGUMENT for an invalid tag, a tag given twice, a blob the manifest
 * references but the image lacks, or a non-empty `dir`.
 *
 * @example
 * await writeOciLayout(dir, [{ tag: 'latest', image: await sampleImage(1) }]);
 * execFileSync('umoci', ['unpack', '--image', `${dir}:latest`, bundle]);
 */
export async function writeOciLayout(dir: string, images: readonly OciLayoutEntry[]): Promise<void> {
  if (!Array.isArray(images)) throw invalid('images must be an array of { tag, image }');
  const blobs = new Map<Digest, Buffer>();
  const tags = new Set<string>();
  const manifests: Record<string, unknown>[] = [];
  const addBlob = (digest: Digest, bytes: Buffer | undefined, tag: string): void => {
    parseDigest(digest); // INVALID_DIGEST: the digest names a file
    if (bytes === undefined) throw invalid(`image ${JSON.stringify(tag)}: no bytes for blob ${digest}`);
    blobs.set(digest, bytes);
  };
  for (const entry of images) {
    const tag = entry?.tag;
    if (typeof tag !== 'string' || !REF_NAME_RE.test(tag)) throw invalid(`tag ${JSON.stringify(tag)} is not a valid ${OCI_REF_NAME_ANNOTATION}`);
    if (tags.has(tag)) throw invalid(`tag ${JSON.stringify(tag)} is given twice`);
    tags.add(tag);
    for (const digest of referencedBlobs(entry)) addBlob(digest, entry.image.blobs.get(digest), tag);
    addBlob(entry.image.manifestDigest, entry.image.manifest, tag);
    const d = entry.image.manifestDescriptor;
    if (d.digest !== entry.image.manifestDigest || d.size !== entry.image.manifest.byteLength) {
      throw invalid(
        `image ${JSON.stringify(tag)}: the manifest descriptor (${d.digest}, ${d.size} bytes) does not describe the manifest (${entry.image.manifestDigest}, ${entry.image.manifest.byteLength} bytes)`,
      );
    }
    manifests.push({
      mediaType: d.mediaType,
      digest: d.digest,
      size: d.size,
      ...(d.platform !== undefined ? { platform: d.platform } : {}),
      annotations: { ...(d.annotations ?? {}), [OCI_REF_NAME_ANNOTATION]: tag },
    });
  }

  await mkdir(dir, { recursive: true });
  const present = await readdir(dir);
  if (present.length > 0) throw invalid(`${dir} is not empty (it holds ${present.slice(0, 3).join(', ')}${present.length > 3 ? ', ...' : ''})`);
  for (const [digest, bytes] of blobs) {
    const { algorithm, hex } = parseDigest(digest);
    await mkdir(join(dir, 'blobs', algorithm), { recursive: true });
    await writeFile(join(dir, 'blobs', algorithm, hex), bytes);
  }
  await writeFile(join(dir, 'oci-layout'), `${JSON.stringify({ imageLayoutVersion: LAYOUT_VERSION })}\n`);
  // index.json last: a reader that finds it finds every blob it names.
  await writeFile(join(dir, 'index.json'), `${JSON.stringify({ schemaVersion: 2, mediaType: MediaTypes.OCI_INDEX, manifests })}\n`);
}
