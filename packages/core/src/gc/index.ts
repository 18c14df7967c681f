export { collectGarbage, HELD_FOR_CONTAINERD_GRACE_MS, type GcOptions, type GcResult } from './gc.js';
export type { GcLeftover } from './leftovers.js';
export { acquireLease, withCollectionLock, type Lease, type LeaseRefs } from '../store/lease.js';
