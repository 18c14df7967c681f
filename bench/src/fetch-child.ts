// The fastpull side of fetch-blob.ts, in its own process so /usr/bin/time sees only it: downloads one
// blob into a content store ingest with fastpull's ranged fetch. Like curl, it neither hashes nor
// fsyncs (in a pull, hashing runs in the unpack worker while the download goes on).
// Usage: node fetch-child.js HOST:PORT DIGEST SIZE ROOT [CHUNK_MIB]
import { parseReference, tuneAllocator, type Digest } from '@fastpull/core';
import { FileContentStore } from '@fastpull/core/content';
import { fetchBlob, RegistryClient } from '@fastpull/core/registry';
import { tuningFromEnv } from '@fastpull/core/tuning';
import { Agent } from 'undici';

// As the CLI and fastpulld do at start (the allocator's thresholds, and a young collection each 16 MiB
// the download writes).
tuneAllocator(process.env);
const [host, digest, size, root, chunkMiB] = process.argv.slice(2) as [string, Digest, string, string, string?];
const desc = { mediaType: 'application/octet-stream', digest, size: Number(size) };
// fetch-blob.ts compares the ways a body is read: FASTPULL_DIRECT_RANGES (Tuning.directRanges), or
// BENCH_FETCH_UNDICI=1, an undici Agent (16 connections per origin, as the client's own) as the dispatcher.
const agent = process.env.BENCH_FETCH_UNDICI === '1' ? new Agent({ connections: 16 }) : undefined;
const client = new RegistryClient({ plainHttp: true, tuning: tuningFromEnv(process.env), ...(agent ? { dispatcher: agent } : {}) });
const store = new FileContentStore(root);
const ingest = await store.newIngest(desc);
await fetchBlob(client, parseReference(`${host}/bench/blob:1`), desc, ingest, chunkMiB ? { chunkSize: Number(chunkMiB) * 1024 * 1024 } : {});
if (ingest.watermark.value !== desc.size) throw new Error(`only ${ingest.watermark.value} of ${desc.size} bytes landed`);
await store.abort(ingest);
await client.close();
await agent?.close();
