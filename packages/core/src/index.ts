// @fastpull/core: the curated public surface.
export const VERSION = '0.1.0';
export * from './errors.js';
export * from './oci/index.js';
export * from './registry/index.js';
export * from './content/index.js';
export * from './snapshots/index.js';
export * from './images/index.js';
export * from './store.js';
export * from './pull/index.js';
export * from './gc/index.js';
export { UnpackPool, sharedUnpackPool, inflaterFromEnv, parseInflaterChoice, findInflater, type InflaterChoice, type UnpackPoolOptions } from './unpack/index.js';
export { mountsFor, resolveImage } from './images/mounts.js';
