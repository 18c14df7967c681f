// @fastpull/core/snapshots: the snapshot store. chainID-named overlay lower directories, their mounts
// as data, the settling of a layer's snapshot against the committed snapshots below it, and
// containerd's snapshots (records with keys, parents and labels) over the same store.
export { FileSnapshotter, type Snapshotter, type ActiveSnapshot, type SnapshotInfo, type Mount } from './store.js';
export { LowerView, reconcileWithLowers, type ReconcileOptions, type ReconcileStats } from './lowers.js';
export type { LowerChecks } from './lowers.js';
export { mountInfo, type MountInfo } from './mountinfo.js';
export { snapshotUsage, snapshotChain, treeUsage, type SnapshotUsage } from './usage.js';
export { createMountRecord, listMountRecords, mountsDir, readMountRecord, removeMountRecord, type MountRecord } from './mountrecords.js';
export { SnapshotRecords, type SnapshotRecordInfo, type SnapshotRecordsOptions, type RecordsStore } from './containerd/records.js';
export type { SnapshotKind } from './containerd/record-file.js';
