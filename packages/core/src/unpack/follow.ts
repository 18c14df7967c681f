// Reading a layer blob that may still be downloading: never past its watermark, timing the waits.
import type fs from 'node:fs';
import { FastpullError, throwIfAborted } from '../errors.js';
import type { WatermarkView } from '../content/watermark.js';
import type { ReadBuffers } from './read-buffers.js';

/** Read size for layer blobs: large reads keep syscalls and stream hops per byte low. */
export const BLOB_READ_CHUNK = 1024 * 1024;

/** The time a pass spent waiting for the download's bytes; tells `onWait` as each wait starts and ends. */
export class WaitClock {
  ms = 0;
  constructor(private readonly onWait?: (waiting: boolean) => void) {}

  /** A wait starts: returns its start, for {@link stop}. */
  start(): number {
    this.onWait?.(true);
    return performance.now();
  }

  /** The wait that {@link start} returned `started` for ends. */
  stop(started: number): void {
    this.ms += performance.now() - started;
    this.onWait?.(false);
  }
}

/**
 * Waits until the watermark is past `want` bytes (or the download failed), polling `signal`. The
 * time counts in `waited`.
 */
export async function waitForBytes(view: WatermarkView, want: number, what: string, signal: AbortSignal | undefined, waited: WaitClock): Promise<void> {
  const t = waited.start();
  try {
    while (view.value < want && !view.failed) {
      throwIfAborted(signal, what);
      await view.waitPast(view.value, 250);
    }
  } finally {
    waited.stop(t);
  }
}

/**
 * Reads a blob that is still arriving: never past the watermark, waiting (without blocking the
 * thread) for it to move, from byte `from` until `size` bytes were read, into `buffers` when given
 * (else fresh ones). The caller closes the file.
 */
export async function* followFile(
  file: fs.promises.FileHandle,
  view: WatermarkView,
  size: number,
  what: string,
  signal: AbortSignal | undefined,
  waited: WaitClock,
  from = 0,
  buffers?: ReadBuffers,
): AsyncGenerator<Buffer> {
  let pos = from;
  while (pos < size) {
    let mark = view.value;
    if (mark <= pos) {
      const t = waited.start();
      try {
        while (mark <= pos) {
          if (view.failed) throw new FastpullError('ABORTED', `${what}: the download of the blob stopped`);
          throwIfAborted(signal, what);
          await view.waitPast(pos, 250);
          mark = view.value;
        }
      } finally {
        waited.stop(t);
      }
    }
    const len = Math.min(BLOB_READ_CHUNK, mark - pos);
    const buf = buffers ? buffers.take() : Buffer.allocUnsafe(len);
    const { bytesRead } = await file.read(buf, 0, len, pos);
    if (bytesRead === 0) throw new FastpullError('INTERNAL', `${what}: blob file ends at ${pos}, before its watermark ${mark}`);
    pos += bytesRead;
    if (buffers) yield buffers.lend(buf, bytesRead);
    else yield bytesRead === len ? buf : buf.subarray(0, bytesRead);
  }
}
