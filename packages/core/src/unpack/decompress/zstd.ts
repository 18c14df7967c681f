// The built-in zstd decoder, for machines without the zstd program: fzstd (pure JavaScript, so it
// installs everywhere Node runs) behind a Transform. Multi-frame streams decode as one.
//
// Measured (unpackLayer of a 257 MiB layer, 86 MiB compressed, 5 interleaved runs, medians): `zstd -dc`
// 1.16 s, fzstd 1.15 s; gzip for comparison igzip 1.15 s, node:zlib 1.03 s. Extraction and the two
// hashes bound the pass, not the decoder. zstd-napi (native, faster: docs/architecture.md, figures) was not taken: its
// install step first tries to download a prebuilt binary, which cannot work on these machines.
import { Transform, type TransformCallback } from 'node:stream';
import { createRequire } from 'node:module';
import { FastpullError, isFastpullError } from '../../errors.js';
import { ZstdFrameGuard } from './zstd-frames.js';

type Fzstd = typeof import('fzstd');
let fzstd: Fzstd | undefined;

/** fzstd, required by the first zstd layer: a gzip layer's worker need not compile it. */
function decoderModule(): Fzstd {
  return (fzstd ??= createRequire(import.meta.url)('fzstd') as Fzstd);
}

class ZstdDecompressor extends Transform {
  private readonly decoder: InstanceType<Fzstd['Decompress']>;
  private readonly guard = new ZstdFrameGuard();

  constructor() {
    super();
    this.decoder = new (decoderModule().Decompress)((chunk: Uint8Array) => {
      this.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
    });
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    try {
      this.guard.check(chunk);
      this.decoder.push(chunk);
      callback();
    } catch (e) {
      callback(corrupt(e));
    }
  }

  override _flush(callback: TransformCallback): void {
    try {
      this.decoder.push(new Uint8Array(0), true);
      callback();
    } catch (e) {
      callback(corrupt(e));
    }
  }
}

function corrupt(e: unknown): FastpullError {
  if (isFastpullError(e)) return e;
  return new FastpullError('INVALID_LAYER', `corrupt zstd stream: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
}

/** A Transform that decodes a zstd stream (one or more frames) in this thread. */
export function createZstdDecompressor(): Transform {
  return new ZstdDecompressor();
}
