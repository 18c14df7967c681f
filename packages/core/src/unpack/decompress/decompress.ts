// Decides how a layer blob is compressed (magic bytes, checked against its media type) and makes its decompressor.
import { PassThrough, type Transform } from 'node:stream';
import zlib from 'node:zlib';
import { FastpullError } from '../../errors.js';
import { layerCompression, type LayerCompression } from '../../oci/mediatypes.js';
import { createExternalGunzip, DEFAULT_INFLATER, findZstd, resolveGunzip, type InflaterChoice } from './inflater.js';
import { createIsalGunzip } from './isal.js';
import { createParallelGunzip, InflatePool, sharedInflatePool } from './pargzip.js';
import type { GzipCheckpoint } from './ztoc.js';
import type { Tuning } from '../../tuning.js';
import { createZstdDecompressor } from './zstd.js';

/** How many leading bytes of a blob {@link detectCompression} looks at. */
export const MAGIC_BYTES = 4;

/**
 * zlib's output chunk for gunzip: larger chunks pull faster than the 16 KiB default, and 256 KiB
 * keeps most of the gain of 1 MiB with a quarter of the buffer (docs/architecture.md, "Figures
 * behind the defaults").
 */
export const GUNZIP_CHUNK_SIZE = 256 * 1024;

/**
 * The compression a blob's first bytes announce: gzip (1f 8b), zstd (28 b5 2f fd), otherwise 'none'
 * (an uncompressed tar opens with a file name, never with either magic).
 */
export function detectCompression(head: Uint8Array): LayerCompression {
  if (head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b) return 'gzip';
  if (head.length >= 4 && head[0] === 0x28 && head[1] === 0xb5 && head[2] === 0x2f && head[3] === 0xfd) return 'zstd';
  return 'none';
}

/**
 * The compression to undo for a layer blob. The media type must be a layer type (else
 * UNSUPPORTED_MEDIA_TYPE); when it disagrees with the magic bytes the bytes win, because docker has
 * shipped layers labelled gzip that were plain tar, and the reverse.
 */
export function resolveCompression(mediaType: string, head: Uint8Array, what = 'layer'): LayerCompression {
  if (layerCompression(mediaType) === undefined) {
    throw new FastpullError('UNSUPPORTED_MEDIA_TYPE', `${what}: media type ${JSON.stringify(mediaType)} is not a layer type`, {
      details: { mediaType },
    });
  }
  return detectCompression(head);
}

/**
 * CPU milliseconds a decompressor from {@link createDecompressor} spent decoding, where it can
 * tell: the in-process ISA-L stage (its decode thread's clock) and the parallel gunzip (its decode
 * threads' clocks, per job). Undefined for node:zlib (its calls run on libuv's pool, shared with
 * other work, with no clock per stream), for an external program (another process), for zstd and for
 * an uncompressed layer. Final once the stream has ended.
 */
export function decompressorCpuMs(decompressor: Transform): number | undefined {
  const cpu = (decompressor as { readonly cpuMs?: unknown }).cpuMs;
  return typeof cpu === 'number' ? cpu : undefined;
}

/** Options of {@link createDecompressor}. */
export interface DecompressorOptions {
  /** The gunzip decoder for gzip layers; default {@link DEFAULT_INFLATER} ('auto': in-process ISA-L when its addon is built, else node:zlib). */
  inflater?: InflaterChoice;
  /** The compressed size when known: it sizes the parallel decoder's chunks. */
  size?: number;
  /** Known starting points for the parallel decoder (a SOCI zTOC's); others ignore them. */
  checkpoints?: readonly GzipCheckpoint[];
  /**
   * Called with each input chunk once the decoder reads it no more, by decoders that can tell (the
   * in-process ISA-L one and the parallel one); {@link tellsInputDone} says whether the stream
   * returned does.
   */
  onInputDone?: (chunk: Uint8Array) => void;
  /**
   * The reader will say which output it is done with ({@link outputReleaser}), so a decoder that
   * can may fill its output buffers again instead of allocating (the in-process ISA-L one and the
   * parallel one).
   */
  reuseOutput?: boolean;
  /** Measuring knobs (tuning.ts): ISA-L's thread, the parallel decoder's chunk and the process's slot memory. */
  tuning?: Pick<Tuning, 'isalOnReader' | 'pargzipChunk' | 'inflateSlotBytes'>;
}

/** Decoders made with an `onInputDone` they call. */
const telling = new WeakSet<Transform>();

/** Decoders made with `reuseOutput` that can reuse their output buffers, and how to release them. */
const releasing = new WeakMap<Transform, (upTo: number) => void>();

/**
 * For a decoder made with `reuseOutput` that can reuse its output: the call that says the reader
 * holds no byte of its output before offset `upTo` any more, nor a view of one (see
 * IsalGunzipStream.releaseOutput); undefined for a decoder that allocates every output buffer.
 */
export function outputReleaser(decoder: Transform): ((upTo: number) => void) | undefined {
  return releasing.get(decoder);
}

/** Whether `decoder` (from {@link createDecompressor}) calls the `onInputDone` it was made with. */
export function tellsInputDone(decoder: Transform): boolean {
  return telling.has(decoder);
}

/**
 * A Transform that undoes `kind`. gzip accepts concatenated members (multi-member gzip) as one
 * stream and runs through the decoder `options.inflater` resolves to ({@link resolveGunzip}:
 * in-process ISA-L, node:zlib, an external igzip or pigz process; INVALID_ARGUMENT when an explicit
 * choice cannot run here), or through the parallel decoder for 'parallel'. zstd runs through an external `zstd -dc` when installed (unless the choice is 'zlib': the
 * built-in decoders only), else through fzstd.
 */
export function createDecompressor(kind: LayerCompression, options: DecompressorOptions = {}): Transform {
  switch (kind) {
    case 'gzip': {
      if (options.inflater === 'parallel') {
        if (!InflatePool.available()) {
          throw new FastpullError(
            'INVALID_ARGUMENT',
            'inflater parallel was asked for but its native decoder is not built (`pnpm --filter @fastpull/core build:native`); use auto or zlib instead',
          );
        }
        const pool = sharedInflatePool();
        const { pargzipChunk, inflateSlotBytes } = options.tuning ?? {};
        if (inflateSlotBytes !== undefined && inflateSlotBytes !== pool.budget.slotBytes) pool.budget.setSlotBytes(inflateSlotBytes);
        const stream = createParallelGunzip({
          pool,
          ...(pargzipChunk !== undefined ? { chunkSize: pargzipChunk } : {}),
          ...(options.size !== undefined ? { size: options.size } : {}),
          ...(options.checkpoints ? { checkpoints: options.checkpoints } : {}),
          ...(options.onInputDone ? { onInputDone: options.onInputDone } : {}),
          ...(options.reuseOutput ? { reuseOutput: true } : {}),
        });
        if (options.onInputDone) telling.add(stream);
        if (options.reuseOutput) releasing.set(stream, (upTo) => stream.releaseOutput(upTo));
        return stream;
      }
      const decoder = resolveGunzip(options.inflater ?? DEFAULT_INFLATER);
      if (decoder.kind === 'isal') {
        const stream = createIsalGunzip({
          ...(options.tuning?.isalOnReader ? { sync: true } : {}),
          ...(options.onInputDone ? { onInputDone: options.onInputDone } : {}),
          ...(options.reuseOutput ? { reuseOutput: true } : {}),
        });
        if (options.onInputDone) telling.add(stream);
        if (options.reuseOutput) releasing.set(stream, (upTo) => stream.releaseOutput(upTo));
        return stream;
      }
      return 'path' in decoder ? createExternalGunzip(decoder) : zlib.createGunzip({ chunkSize: GUNZIP_CHUNK_SIZE });
    }
    case 'none':
      return new PassThrough();
    case 'zstd': {
      const tool = findZstd(options.inflater ?? DEFAULT_INFLATER);
      return tool ? createExternalGunzip(tool) : createZstdDecompressor();
    }
  }
}
