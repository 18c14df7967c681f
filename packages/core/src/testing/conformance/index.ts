// Conformance suites of core's store interfaces: each returns named cases that any implementation
// must pass, run on fresh stores from a factory (see case.ts).
export { conformanceCase, rejectsWithCode, type ConformanceCase, type Subject, type SubjectFactory } from './case.js';
export { contentStoreConformance } from './content.js';
export { imageStoreConformance } from './images.js';
export { snapshotterConformance } from './snapshots.js';
export { snapshotRecordsConformance, type ContainerdSnapshots } from './records.js';
