// The pure OCI model: no I/O.
export * from './digest.js';
export * from './reference.js';
export * from './mediatypes.js';
export * from './platform.js';
export * from './manifest.js';
export * from './chainid.js';
