// Generated from proto/fastpull/v1/fastpull.proto by scripts/gen-proto.mjs; do not edit.


/**
 * Get one image.
 */
export interface GetImageRequest {
  /**
   * Any spelling of the image's reference ("app:1" finds "docker.io/library/app:1", a digest finds
   * the image pulled by tag that resolved to it).
   */
  'name'?: (string);
  /**
   * Platform "os/arch[/variant]" of a name pulled for several; empty: the daemon's host's, or the only one.
   */
  'platform'?: (string);
}

/**
 * Get one image.
 */
export interface GetImageRequest__Output {
  /**
   * Any spelling of the image's reference ("app:1" finds "docker.io/library/app:1", a digest finds
   * the image pulled by tag that resolved to it).
   */
  'name': (string);
  /**
   * Platform "os/arch[/variant]" of a name pulled for several; empty: the daemon's host's, or the only one.
   */
  'platform': (string);
}
