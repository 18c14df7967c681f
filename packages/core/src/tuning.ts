// The measuring knobs: settings that exist to compare one way of doing a step against another
// (bench/README.md, "Measuring knobs", lists them with what each compares). They are not the user's
// settings (those are flags, fastpulld's configuration and service/settings.ts): the programs read
// them from the environment once, at their entry points (the CLI, fastpulld, the benchmarks), and
// pass the record down: service, pull, unpack task. Nothing below an entry point reads them itself.
import { FastpullError } from './errors.js';

/** How a snapshot is flushed before its commit (snapshots/durable.ts). */
export type SyncMethod = 'syncfs' | 'fsync';

/**
 * The measuring knobs of one process, each absent when it keeps its default. Plain data: it crosses
 * to unpack workers in their tasks.
 * @example
 * const tuning: Tuning = { syncMethod: 'fsync', writerThreads: 8 };
 */
export interface Tuning {
  /** false: a blob's bytes come through node:http instead of straight off the socket (FASTPULL_DIRECT_RANGES=0). */
  readonly directRanges?: boolean;
  /** Bytes a blob is downloaded past what its unpack pass has read, when the pass frees the blob behind it; 0: no limit (FASTPULL_DOWNLOAD_LEAD_MIB). */
  readonly downloadLead?: number;
  /** false: the unpack pass keeps every byte of the downloaded blob instead of freeing what it hashed (FASTPULL_BLOB_RELEASE=0). */
  readonly blobRelease?: boolean;
  /** How snapshots are flushed; `fsync` runs the fallback of a process without the addon (FASTPULL_SYNC_METHOD). */
  readonly syncMethod?: SyncMethod;
  /** true: ISA-L decodes on the reading thread instead of its own decode thread (FASTPULL_ISAL_THREAD=reader). */
  readonly isalOnReader?: boolean;
  /** Compressed bytes per chunk of the parallel decoder, instead of its choice from the layer's size (FASTPULL_PARGZIP_CHUNK_KIB). */
  readonly pargzipChunk?: number;
  /** Bytes all parallel decodes of the process may hold in job slots (FASTPULL_INFLATE_SLOT_MIB). */
  readonly inflateSlotBytes?: number;
  /** Threads that make a layer's small files instead of one per core, 2 to 4; more than the addon starts is ignored (FASTPULL_WRITER_THREADS). */
  readonly writerThreads?: number;
  /** false: an idle unpack worker keeps its heap and the allocator's free memory (FASTPULL_IDLE_GC=0). */
  readonly idleGc?: boolean;
}

const SYNC_METHODS: readonly SyncMethod[] = ['syncfs', 'fsync'];

/** The positive number `value` holds (fractions too), or undefined when unset, empty, zero, negative or not a number. */
function positive(value: string | undefined): number | undefined {
  const n = Number(value);
  return value !== undefined && value.trim() !== '' && Number.isFinite(n) && n > 0 ? n : undefined;
}

/**
 * The knobs `env` sets. A number that is not one keeps the default, as a knob of a benchmark should;
 * FASTPULL_SYNC_METHOD with an unknown method is INVALID_ARGUMENT, for a test that asks for the
 * fallback must not run the default unawares.
 * @example
 * const tuning = tuningFromEnv(process.env); // at a program's entry point only
 */
export function tuningFromEnv(env: Readonly<Record<string, string | undefined>>): Tuning {
  const lead = env.FASTPULL_DOWNLOAD_LEAD_MIB;
  const leadMiB = lead === undefined || lead.trim() === '' ? undefined : Number(lead);
  const sync = env.FASTPULL_SYNC_METHOD;
  if (sync !== undefined && sync !== '' && !(SYNC_METHODS as readonly string[]).includes(sync)) {
    throw new FastpullError('INVALID_ARGUMENT', `FASTPULL_SYNC_METHOD ${JSON.stringify(sync)}: want one of ${SYNC_METHODS.join(', ')}`);
  }
  const chunkKiB = positive(env.FASTPULL_PARGZIP_CHUNK_KIB);
  const slotMiB = positive(env.FASTPULL_INFLATE_SLOT_MIB);
  const writers = env.FASTPULL_WRITER_THREADS;
  const writerThreads = writers !== undefined && /^[0-9]+$/.test(writers) && Number(writers) >= 1 ? Number(writers) : undefined;
  return {
    ...(env.FASTPULL_DIRECT_RANGES === '0' ? { directRanges: false } : {}),
    ...(leadMiB !== undefined && Number.isFinite(leadMiB) && leadMiB >= 0 ? { downloadLead: leadMiB * 1024 * 1024 } : {}),
    ...(env.FASTPULL_BLOB_RELEASE === '0' ? { blobRelease: false } : {}),
    ...(sync ? { syncMethod: sync as SyncMethod } : {}),
    ...(env.FASTPULL_ISAL_THREAD === 'reader' ? { isalOnReader: true } : {}),
    ...(chunkKiB !== undefined ? { pargzipChunk: Math.round(chunkKiB * 1024) } : {}),
    ...(slotMiB !== undefined ? { inflateSlotBytes: Math.round(slotMiB * 1024 * 1024) } : {}),
    ...(writerThreads !== undefined ? { writerThreads } : {}),
    ...(env.FASTPULL_IDLE_GC === '0' ? { idleGc: false } : {}),
  };
}
