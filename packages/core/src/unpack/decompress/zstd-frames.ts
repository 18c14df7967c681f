// Reads the frame and block headers of a zstd stream as it passes to a decoder, and refuses a frame
// whose window (the memory a decoder must hold for it) is over the limit, before the decoder sees
// it. A frame header may ask for a window of up to 3.75 TiB; the decoders (the zstd program, fzstd)
// would try to allocate it or fail in their own words. The block contents are skipped, not decoded.
import { FastpullError } from '../../errors.js';

/**
 * The largest window a zstd layer may ask for: the zstd program's own default limit (its
 * `--memory`), so that both decoders accept the same layers. The format asks decoders to support
 * 8 MiB; encoders go above it only with `--long` or the highest levels.
 */
export const ZSTD_MAX_WINDOW_BYTES = 128 * 1024 * 1024;

const MAGIC = 0xfd2fb528;
const SKIPPABLE_MASK = 0xfffffff0;
const SKIPPABLE = 0x184d2a50;

type State = 'magic' | 'descriptor' | 'header' | 'block' | 'skippable-size' | 'skip';

/**
 * Follows the frame structure of a zstd stream fed to it in chunks of any size. Throws
 * INVALID_LAYER for a frame whose window is over `maxWindowBytes` or for a stream that is not zstd
 * frames. Each frame's window is checked as soon as its header is complete.
 */
export class ZstdFrameGuard {
  private state: State = 'magic';
  private readonly buf = Buffer.alloc(14);
  private have = 0;
  private need = 4;
  private skipLeft = 0;
  private afterSkip: State = 'block';
  private checksum = false;
  private frames = 0;

  constructor(private readonly maxWindowBytes = ZSTD_MAX_WINDOW_BYTES) {}

  /** Reads `chunk`'s headers; throws on a frame this stream may not have. */
  check(chunk: Uint8Array): void {
    let i = 0;
    while (i < chunk.length) {
      if (this.state === 'skip') {
        const n = Math.min(this.skipLeft, chunk.length - i);
        this.skipLeft -= n;
        i += n;
        if (this.skipLeft === 0) this.enter(this.afterSkip);
        continue;
      }
      const n = Math.min(this.need - this.have, chunk.length - i);
      this.buf.set(chunk.subarray(i, i + n), this.have);
      this.have += n;
      i += n;
      if (this.have === this.need) this.headerDone();
    }
  }

  private enter(state: State, need = 0): void {
    this.state = state;
    this.have = 0;
    this.need = state === 'magic' || state === 'skippable-size' ? 4 : state === 'descriptor' ? 1 : state === 'block' ? 3 : need;
    if (state === 'skip' && this.skipLeft === 0) this.enter(this.afterSkip);
  }

  private skip(bytes: number, then: State): void {
    this.skipLeft = bytes;
    this.afterSkip = then;
    this.enter('skip');
  }

  private headerDone(): void {
    const b = this.buf;
    switch (this.state) {
      case 'magic': {
        const magic = b.readUInt32LE(0);
        if (magic === MAGIC) this.enter('descriptor');
        else if ((magic & SKIPPABLE_MASK) >>> 0 === SKIPPABLE) this.enter('skippable-size');
        else throw corrupt(`no zstd frame at frame ${this.frames + 1} (magic ${magic.toString(16)})`);
        return;
      }
      case 'skippable-size':
        this.skip(b.readUInt32LE(0), 'magic');
        return;
      case 'descriptor': {
        const d = b[0]!;
        if (d & 0x08) throw corrupt('a frame header with its reserved bit set');
        const single = (d & 0x20) !== 0;
        const fcsBytes = [single ? 1 : 0, 2, 4, 8][d >> 6]!;
        const didBytes = [0, 1, 2, 4][d & 0x03]!;
        this.checksum = (d & 0x04) !== 0;
        // The descriptor stays at buf[0]; the rest of the header follows it.
        this.state = 'header';
        this.need = 1 + (single ? 0 : 1) + didBytes + fcsBytes;
        this.have = 1;
        if (this.have === this.need) this.headerDone();
        return;
      }
      case 'header': {
        this.checkWindow();
        this.frames++;
        this.enter('block');
        return;
      }
      case 'block': {
        const h = b[0]! | (b[1]! << 8) | (b[2]! << 16);
        const last = (h & 1) === 1;
        const type = (h >> 1) & 3;
        const size = h >>> 3;
        if (type === 3) throw corrupt('a block of the reserved type');
        const next: State = last ? 'magic' : 'block';
        if (last && this.checksum) {
          // The content checksum's 4 bytes follow the last block.
          this.skip((type === 1 ? 1 : size) + 4, next);
        } else {
          this.skip(type === 1 ? 1 : size, next);
        }
        return;
      }
      default:
        return;
    }
  }

  private checkWindow(): void {
    const b = this.buf;
    const d = b[0]!;
    const single = (d & 0x20) !== 0;
    const didBytes = [0, 1, 2, 4][d & 0x03]!;
    let window: number;
    if (single) {
      // No window descriptor: the window is the frame's whole content, which follows.
      const at = 1 + didBytes;
      const fcsBytes = [1, 2, 4, 8][d >> 6]!;
      window = fcsBytes === 1 ? b[at]! : fcsBytes === 2 ? b.readUInt16LE(at) + 256 : fcsBytes === 4 ? b.readUInt32LE(at) : Number(b.readBigUInt64LE(at));
    } else {
      const w = b[1]!;
      const log = 10 + (w >> 3);
      const base = 2 ** log;
      window = base + (base / 8) * (w & 7);
    }
    if (window > this.maxWindowBytes) {
      throw new FastpullError(
        'INVALID_LAYER',
        `zstd frame ${this.frames + 1} asks for a window of ${window} bytes, over the ${this.maxWindowBytes} a layer may use`,
        {
          details: { windowBytes: window, maxWindowBytes: this.maxWindowBytes },
        },
      );
    }
  }
}

function corrupt(what: string): FastpullError {
  return new FastpullError('INVALID_LAYER', `corrupt zstd stream: ${what}`);
}
