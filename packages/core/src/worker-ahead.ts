// What a command imports before the rest of the library: the unpack worker started ahead.
export { startWorkerAhead } from './unpack/pool/spawn.js';
