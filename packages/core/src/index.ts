// @fastpull/core: the curated public surface.
export const VERSION = '0.1.0';
export * from './errors.js';
export * from './oci/index.js';
