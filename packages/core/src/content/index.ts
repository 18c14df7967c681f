// @fastpull/core/content: the content store. Verified blobs under `<root>/content/blobs`, downloads in
// ingests that become blobs only once their size and digest check out, the watermark that lets an
// unpacker follow a download, and the collection lock that deleting content must hold.
export { FileContentStore, hashFile, STALE_INGEST_MS, type ContentStore, type Ingest, type BlobInfo, type SweepIngestOptions } from './store.js';
export { Watermark, WatermarkView, WatermarkState } from './watermark.js';
export { digestLike } from '../oci/digest.js';
export { withCollectionLock } from '../util/collection-lock.js';
