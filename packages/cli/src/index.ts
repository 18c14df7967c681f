// The fastpull CLI as a library: run it in-process with injected streams.
export { main, createProgram, EXIT_FAILURE, EXIT_USAGE } from './main.js';
export { formatBytes } from './io.js';
export type { CliIO } from './io.js';
