// The pull pipeline.
export * from './pull.js';
