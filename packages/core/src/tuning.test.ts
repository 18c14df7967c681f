import { describe, expect, it } from 'vitest';
import { tuningFromEnv } from './tuning.js';

describe('tuningFromEnv', () => {
  it('reads nothing from an environment without the knobs', () => {
    expect(tuningFromEnv({})).toEqual({});
    expect(tuningFromEnv({ FASTPULL_ROOT: '/x', FASTPULL_INFLATER: 'zlib' })).toEqual({});
  });

  it('reads each knob into its field', () => {
    expect(
      tuningFromEnv({
        FASTPULL_DIRECT_RANGES: '0',
        FASTPULL_DOWNLOAD_LEAD_MIB: '0.25',
        FASTPULL_BLOB_RELEASE: '0',
        FASTPULL_SYNC_METHOD: 'fsync',
        FASTPULL_ISAL_THREAD: 'reader',
        FASTPULL_PARGZIP_CHUNK_KIB: '512',
        FASTPULL_INFLATE_SLOT_MIB: '1.5',
        FASTPULL_WRITER_THREADS: '8',
        FASTPULL_IDLE_GC: '0',
      }),
    ).toEqual({
      directRanges: false,
      downloadLead: 256 * 1024,
      blobRelease: false,
      syncMethod: 'fsync',
      isalOnReader: true,
      pargzipChunk: 512 * 1024,
      inflateSlotBytes: 1.5 * 1024 * 1024,
      writerThreads: 8,
      idleGc: false,
    });
    expect(tuningFromEnv({ FASTPULL_DOWNLOAD_LEAD_MIB: '0' })).toEqual({ downloadLead: 0 });
  });

  it('keeps the default for a number that is not one, and for switches set to anything but their value', () => {
    for (const v of ['', '  ', '-3', 'lots', 'Infinity', 'NaN']) expect(tuningFromEnv({ FASTPULL_DOWNLOAD_LEAD_MIB: v }), v).toEqual({});
    for (const v of ['', '0', '-3', 'lots', 'Infinity']) {
      expect(tuningFromEnv({ FASTPULL_PARGZIP_CHUNK_KIB: v, FASTPULL_INFLATE_SLOT_MIB: v }), v).toEqual({});
    }
    for (const v of ['0', '-1', '2.5', ' 4', 'four', '']) expect(tuningFromEnv({ FASTPULL_WRITER_THREADS: v }), v).toEqual({});
    expect(tuningFromEnv({ FASTPULL_WRITER_THREADS: '1' })).toEqual({ writerThreads: 1 });
    expect(tuningFromEnv({ FASTPULL_WRITER_THREADS: '17' })).toEqual({ writerThreads: 17 }); // writerThreadsFor ignores it
    for (const v of ['1', '', 'no']) {
      expect(tuningFromEnv({ FASTPULL_DIRECT_RANGES: v, FASTPULL_BLOB_RELEASE: v, FASTPULL_IDLE_GC: v, FASTPULL_ISAL_THREAD: v }), v).toEqual({});
    }
    expect(tuningFromEnv({ FASTPULL_SYNC_METHOD: '' })).toEqual({});
  });

  it('refuses a flush method it does not know', () => {
    for (const v of ['fdatasync', 'syncfs-late']) {
      expect(() => tuningFromEnv({ FASTPULL_SYNC_METHOD: v }), v).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    }
  });

  it('gives plain data, which crosses to a worker thread as it is', () => {
    const t = tuningFromEnv({ FASTPULL_SYNC_METHOD: 'fsync', FASTPULL_WRITER_THREADS: '3' });
    expect(structuredClone(t)).toEqual(t);
  });
});
