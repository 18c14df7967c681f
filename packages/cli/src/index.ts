// The fastpull CLI as a library: run it in-process with injected streams.
export { main, createProgram, EXIT_FAILURE, EXIT_USAGE } from './main.js';
export { formatBytes } from './io.js';
export type { CliIO } from './io.js';
// What a command runs with, for embedding and for the tests that compare the CLI with fastpulld.
export { openService, type LocalTuning, type ServiceFlags } from './service.js';
export { pullSettings, type PullFlags } from './commands/pull.js';
