// Snapshot store: chainID-named overlay lower dirs and their mounts.
export * from './store.js';
