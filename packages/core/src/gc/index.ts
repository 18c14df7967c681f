export { collectGarbage, type GcOptions, type GcResult } from './gc.js';
export { acquireLease, withCollectionLock, type Lease, type LeaseRefs } from './lease.js';
