// The names SOCI (Seekable OCI) gives in an image's registry graph: the artifact types of its
// indexes, the annotations that tie an index to its image and a zTOC to its layer, and the zTOC
// blobs' media type. Finding them is registry/soci.ts's work; reading a zTOC is unpack/decompress/ztoc.ts's.

/** Artifact type of a SOCI index that refers to its image through `subject` (found by the referrers API). */
export const SOCI_INDEX_V1 = 'application/vnd.amazon.soci.index.v1+json';
/** Artifact type (config media type) of a SOCI index that the image manifest names by annotation. */
export const SOCI_INDEX_V2 = 'application/vnd.amazon.soci.index.v2+json';
/** Image manifest annotation naming its SOCI index (v2). */
export const SOCI_INDEX_DIGEST_ANNOTATION = 'com.amazon.soci.index-digest';
/** SOCI index layer annotation: the image layer a zTOC describes. */
export const SOCI_LAYER_DIGEST_ANNOTATION = 'com.amazon.soci.image-layer-digest';
/** Media type of zTOC blobs in a SOCI index. */
export const ZTOC_MEDIA_TYPE = 'application/octet-stream';
