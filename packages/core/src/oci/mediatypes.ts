// Media types of the OCI image spec (https://github.com/opencontainers/image-spec/blob/main/media-types.md)
// and of Docker's image manifest v2 schema 2.

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
export const MANIFEST_ACCEPT = [
  MediaTypes.OCI_INDEX,
  MediaTypes.OCI_MANIFEST,
  MediaTypes.DOCKER_MANIFEST_LIST,
  MediaTypes.DOCKER_MANIFEST,
].join(', ');

export function isIndexMediaType(t: string | undefined): boolean {
  return t === MediaTypes.OCI_INDEX || t === MediaTypes.DOCKER_MANIFEST_LIST;
}

export function isManifestMediaType(t: string | undefined): boolean {
  return t === MediaTypes.OCI_MANIFEST || t === MediaTypes.DOCKER_MANIFEST;
}

export function isSchema1MediaType(t: string | undefined): boolean {
  return t === MediaTypes.DOCKER_MANIFEST_SCHEMA1 || t === MediaTypes.DOCKER_MANIFEST_SCHEMA1_SIGNED;
}

export function isConfigMediaType(t: string | undefined): boolean {
  return t === MediaTypes.OCI_CONFIG || t === MediaTypes.DOCKER_CONFIG;
}

/** How a layer's blob is compressed, by its media type; undefined when the type is not a layer. */
export type LayerCompression = 'gzip' | 'zstd' | 'none';

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
