// Drives a stream stage with input read into recycled buffers, as a followed blob is read.
import { Readable, type Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadBuffers } from './read-buffers.js';

/**
 * Writes `data` into `stage` in chunks of `buffers.size` bytes (the last one shorter), each read
 * into a buffer of `buffers`: a buffer every reader gave back is filled with later bytes at once, so
 * a reader that gives a chunk back before it is done with it reads the wrong bytes. Returns what
 * came out of `stage`, copied as it came; `sinkDone` is then called with each chunk (the reader of a
 * stage that passes its input on).
 */
export async function pipeRecycled(stage: Transform, data: Buffer, buffers: ReadBuffers, sinkDone?: (chunk: Buffer) => void): Promise<Buffer> {
  async function* read(): AsyncGenerator<Buffer> {
    for (let at = 0; at < data.length; at += buffers.size) {
      const buf = buffers.take();
      const n = data.copy(buf, 0, at, Math.min(data.length, at + buffers.size));
      yield buffers.lend(buf, n);
    }
  }
  const out: Buffer[] = [];
  await pipeline(Readable.from(read(), { objectMode: false, highWaterMark: buffers.size }), stage, async (source: AsyncIterable<Buffer>) => {
    for await (const chunk of source) {
      out.push(Buffer.from(chunk));
      sinkDone?.(chunk);
    }
  });
  return Buffer.concat(out);
}
