// The on-disk stores (FileContentStore, FileSnapshotter, FileImageStore, and containerd's snapshot
// records over them) against the conformance suites, each case on a fresh store in a temporary directory.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'vitest';
import { SnapshotRecords } from '../../snapshots/containerd/records.js';
import { openStore, type Store } from '../../store/root.js';
import { contentStoreConformance, imageStoreConformance, snapshotRecordsConformance, snapshotterConformance, type Subject } from './index.js';

/** A store on a fresh temporary root, its part `pick` under test; the root goes with cleanup. */
async function onDisk<T>(pick: (store: Store) => T | Promise<T>): Promise<Subject<T>> {
  const root = mkdtempSync(join(tmpdir(), 'fastpull-conformance-'));
  const store = openStore(root);
  const part = await pick(store);
  return {
    store: part,
    cleanup: async () => {
      if (part instanceof SnapshotRecords) part.close();
      rmSync(root, { recursive: true, force: true });
    },
  };
}

describe('FileContentStore conformance', () => {
  for (const c of contentStoreConformance(() => onDisk((s) => s.content))) it(c.name, c.run);
});

describe('FileSnapshotter conformance', () => {
  for (const c of snapshotterConformance(() => onDisk((s) => s.snapshots))) it(c.name, c.run);
});

describe('FileImageStore conformance', () => {
  for (const c of imageStoreConformance(() => onDisk((s) => s.images))) it(c.name, c.run);
});

describe('SnapshotRecords (containerd snapshots) conformance', () => {
  for (const c of snapshotRecordsConformance(() => onDisk((s) => SnapshotRecords.open(s)))) it(c.name, c.run);
});
