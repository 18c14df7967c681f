// Content store: verified blobs and ingests.
export * from './store.js';
export * from './watermark.js';
