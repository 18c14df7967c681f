// Media types of the OCI image spec (https://github.com/opencontainers/image-spec/blob/main/media-types.md)
// and of Docker's image manifest v2 schema 2.

/**
 * The media types fastpull knows: OCI image spec manifests, indexes, configs and layers, and
 * their Docker image manifest v2 counterparts (schema 1 only to refuse it).
 * @example
 * if (image.manifest.mediaType === MediaTypes.DOCKER_MANIFEST) console.log('a Docker v2 image');
 */
export const MediaTypes = {
  OCI_INDEX: 'application/vnd.oci.image.index.v1+json',
  OCI_MANIFEST: 'application/vnd.oci.image.manifest.v1+json',
  OCI_CONFIG: 'application/vnd.oci.image.config.v1+json',
  OCI_LAYER: 'application/vnd.oci.image.layer.v1.tar',
  OCI_LAYER_GZIP: 'application/vnd.oci.image.layer.v1.tar+gzip',
  OCI_LAYER_ZSTD: 'application/vnd.oci.image.layer.v1.tar+zstd',
  OCI_LAYER_NONDISTRIBUTABLE: 'application/vnd.oci.image.layer.nondistributable.v1.tar',
  OCI_LAYER_NONDISTRIBUTABLE_GZIP: 'application/vnd.oci.image.layer.nondistributable.v1.tar+gzip',
  OCI_LAYER_NONDISTRIBUTABLE_ZSTD: 'application/vnd.oci.image.layer.nondistributable.v1.tar+zstd',
  DOCKER_MANIFEST_LIST: 'application/vnd.docker.distribution.manifest.list.v2+json',
  DOCKER_MANIFEST: 'application/vnd.docker.distribution.manifest.v2+json',
  DOCKER_MANIFEST_SCHEMA1: 'application/vnd.docker.distribution.manifest.v1+json',
  DOCKER_MANIFEST_SCHEMA1_SIGNED: 'application/vnd.docker.distribution.manifest.v1+prettyjws',
  DOCKER_CONFIG: 'application/vnd.docker.container.image.v1+json',
  DOCKER_LAYER_GZIP: 'application/vnd.docker.image.rootfs.diff.tar.gzip',
  DOCKER_LAYER_FOREIGN_GZIP: 'application/vnd.docker.image.rootfs.foreign.diff.tar.gzip',
  DOCKER_LAYER: 'application/vnd.docker.image.rootfs.diff.tar',
} as const;

/** The Accept header for manifest requests, preferred types first. */
export const MANIFEST_ACCEPT = [MediaTypes.OCI_INDEX, MediaTypes.OCI_MANIFEST, MediaTypes.DOCKER_MANIFEST_LIST, MediaTypes.DOCKER_MANIFEST].join(', ');

/**
 * True for the media types of an index (OCI image index, Docker manifest list).
 * @example
 * isIndexMediaType(MediaTypes.OCI_INDEX) // true
 */
export function isIndexMediaType(t: string | undefined): boolean {
  return t === MediaTypes.OCI_INDEX || t === MediaTypes.DOCKER_MANIFEST_LIST;
}

/**
 * True for the media types of a single-platform image manifest (OCI, Docker v2 schema 2).
 * @example
 * isManifestMediaType(MediaTypes.DOCKER_MANIFEST) // true
 */
export function isManifestMediaType(t: string | undefined): boolean {
  return t === MediaTypes.OCI_MANIFEST || t === MediaTypes.DOCKER_MANIFEST;
}

/**
 * True for Docker's deprecated schema 1 manifests, which fastpull refuses (UNSUPPORTED_MEDIA_TYPE).
 * @example
 * isSchema1MediaType(MediaTypes.DOCKER_MANIFEST_SCHEMA1_SIGNED) // true
 */
export function isSchema1MediaType(t: string | undefined): boolean {
  return t === MediaTypes.DOCKER_MANIFEST_SCHEMA1 || t === MediaTypes.DOCKER_MANIFEST_SCHEMA1_SIGNED;
}

/**
 * True for the media types of an image config (OCI, Docker); anything else is an artifact.
 * @example
 * isConfigMediaType(manifest.config.mediaType)
 */
export function isConfigMediaType(t: string | undefined): boolean {
  return t === MediaTypes.OCI_CONFIG || t === MediaTypes.DOCKER_CONFIG;
}

/** How a layer's blob is compressed, as {@link layerCompression} reads it from the media type. */
export type LayerCompression = 'gzip' | 'zstd' | 'none';

/**
 * How a layer with media type `t` is compressed; undefined when `t` is not a container layer type
 * (pull then fails with UNSUPPORTED_MEDIA_TYPE).
 * @example
 * layerCompression(MediaTypes.OCI_LAYER_ZSTD) // 'zstd'
 * layerCompression('application/vnd.example+json') // undefined
 */
export function layerCompression(t: string): LayerCompression | undefined {
  switch (t) {
    case MediaTypes.OCI_LAYER_GZIP:
    case MediaTypes.OCI_LAYER_NONDISTRIBUTABLE_GZIP:
    case MediaTypes.DOCKER_LAYER_GZIP:
    case MediaTypes.DOCKER_LAYER_FOREIGN_GZIP:
      return 'gzip';
    case MediaTypes.OCI_LAYER_ZSTD:
    case MediaTypes.OCI_LAYER_NONDISTRIBUTABLE_ZSTD:
      return 'zstd';
    case MediaTypes.OCI_LAYER:
    case MediaTypes.OCI_LAYER_NONDISTRIBUTABLE:
    case MediaTypes.DOCKER_LAYER:
      return 'none';
    default:
      return undefined;
  }
}
