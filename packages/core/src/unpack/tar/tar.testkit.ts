// Helpers shared by the unpack tests (not part of the build): tars from entry lists, block padding,
// chunked streams, the error code a promise fails with, and entries as the tar reader gives them.
import { pack, type Header } from 'tar-stream';
import { isFastpullError } from '../../errors.js';
import type { ParsedTarEntry } from './tarreader.js';

export type Entry = Partial<Header> & { name: string; body?: string | Buffer };

/** A tar of `entries`, written by tar-stream with a fixed default mtime. */
export async function makeTar(entries: Entry[]): Promise<Buffer> {
  const p = pack();
  const out = (async () => {
    const chunks: Buffer[] = [];
    for await (const c of p) chunks.push(c as Buffer);
    return Buffer.concat(chunks);
  })();
  for (const { body, ...header } of entries) {
    await new Promise<void>((resolve, reject) => {
      const cb = (err?: Error | null): void => (err ? reject(err) : resolve());
      if (body === undefined && header.type !== undefined && header.type !== 'file') {
        p.entry({ mtime: new Date(1_600_000_000_000), ...header }, cb);
      } else {
        const data = body ?? '';
        p.entry({ mtime: new Date(1_600_000_000_000), ...header, size: Buffer.byteLength(data) }, data, cb);
      }
    });
  }
  p.finalize();
  return out;
}

/** `data` padded with zeros to a whole number of 512-byte blocks. */
export function padded(data: Buffer): Buffer {
  return Buffer.concat([data, Buffer.alloc((512 - (data.length % 512)) % 512)]);
}

/** `buf` as a stream of `size`-byte chunks (odd sizes exercise the reader's buffering). */
export async function* chunksOf(buf: Buffer, size = 700): AsyncGenerator<Buffer> {
  for (let i = 0; i < buf.length; i += size) yield buf.subarray(i, i + size);
}

/** The code of the FastpullError `p` rejects with; throws if it resolves or fails otherwise. */
export async function code(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (e) {
    if (isFastpullError(e)) return e.code;
    throw e;
  }
  throw new Error('expected a FastpullError, got success');
}

/** A tar entry as the reader gives it, for tests of the parts that take one: a 0644 file of root's at `name`, fields overridden. */
export function tarEntry(fields: Partial<ParsedTarEntry> & { name: string }): ParsedTarEntry {
  return {
    type: 'file',
    flag: '0',
    linkname: '',
    mode: 0o644,
    uid: 0,
    gid: 0,
    size: 0,
    mtime: 1_600_000_000,
    atime: undefined,
    devmajor: 0,
    devminor: 0,
    pax: new Map(),
    sparse: undefined,
    offset: 0,
    ...fields,
  };
}
