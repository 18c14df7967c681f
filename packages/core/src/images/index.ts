// Image records.
export * from './store.js';
