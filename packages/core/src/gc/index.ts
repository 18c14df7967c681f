export { collectGarbage, HELD_FOR_CONTAINERD_GRACE_MS, type GcOptions, type GcResult } from './gc.js';
export type { GcLeftover } from './leftovers.js';
export { acquireLease, type Lease, type LeaseRefs } from '../store/lease.js';
export { withCollectionLock } from '../util/collection-lock.js';
