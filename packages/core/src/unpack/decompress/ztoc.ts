// SOCI zTOCs: the gzip checkpoints a SOCI index stores for a layer, which let a parallel gunzip start
// decoding at known places with a known window instead of guessing block boundaries.
//
// A SOCI index (an OCI manifest, artifact type application/vnd.amazon.soci.index.v1+json found through
// the referrers API, or v2+json named by the image manifest's com.amazon.soci.index-digest annotation)
// lists one zTOC blob per indexed layer (annotation com.amazon.soci.image-layer-digest). A zTOC is a
// FlatBuffers table (schema `Ztoc`: version, build_tool_identifier, compressed_archive_size,
// uncompressed_archive_size, toc, compression_info); its compression_info.checkpoints bytes are a
// "zinfo" blob: int32 count, int64 span size, then per checkpoint int64 compressed offset, int64
// uncompressed offset, uint8 bits and the 32 KiB window, all little-endian. A checkpoint sits on a
// deflate block boundary of the layer's first gzip member: `bits` bits of the byte before the
// compressed offset belong to the next block. Version 1 blobs leave out the first checkpoint (just
// after a 10-byte header). The media types and annotation names are in oci/soci.ts.
import { FastpullError } from '../../errors.js';

const WINDOW = 32768;
const HEADER = 12;
const PACKED = 8 + 8 + 1 + WINDOW;
/** Most checkpoints accepted (a 10 TB layer at the default 4 MiB span has 2.5 million; refuse more). */
const MAX_CHECKPOINTS = 4_000_000;

/** A place in a gzip stream's first member where decoding can start: a block boundary and the window before it. */
export interface GzipCheckpoint {
  /** Bit offset of the block's header in the compressed stream (the gzip header included). */
  bit: number;
  /** Bytes of the member's output before it. */
  out: number;
  /** The member's last 32 KiB before it (fewer when `out` is smaller). */
  window: Uint8Array;
}

/** What fastpull reads of a zTOC. */
export interface Ztoc {
  /** The zTOC format version ("0.9", "1.0"). */
  version: string;
  /** The tool that built it (build_tool_identifier). */
  buildTool: string;
  /** Size of the compressed layer it describes. */
  compressedSize: number;
  /** Size of the layer's tar. */
  uncompressedSize: number;
  /** 1 gzip, 2 uncompressed (no checkpoints then). */
  algorithm: number;
  /** Span size the checkpoints were made with (uncompressed bytes). */
  spanSize: number;
  /** The checkpoints in stream order, the first right after the gzip header. */
  checkpoints: GzipCheckpoint[];
}

function bad(reason: string): FastpullError {
  return new FastpullError('INVALID_MANIFEST', `invalid zTOC: ${reason}`);
}

/** Minimal FlatBuffers reading, every offset checked against the buffer. */
class Flat {
  private readonly view: DataView;
  constructor(readonly buf: Uint8Array) {
    this.view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  }
  private need(at: number, n: number): void {
    if (!Number.isInteger(at) || at < 0 || at + n > this.buf.length) throw bad(`offset ${at} (+${n}) outside ${this.buf.length} bytes`);
  }
  u8(at: number): number {
    this.need(at, 1);
    return this.view.getUint8(at);
  }
  u16(at: number): number {
    this.need(at, 2);
    return this.view.getUint16(at, true);
  }
  u32(at: number): number {
    this.need(at, 4);
    return this.view.getUint32(at, true);
  }
  i32(at: number): number {
    this.need(at, 4);
    return this.view.getInt32(at, true);
  }
  i64(at: number): number {
    this.need(at, 8);
    const v = this.view.getBigInt64(at, true);
    if (v < 0n || v > BigInt(Number.MAX_SAFE_INTEGER)) throw bad(`integer ${v} out of range`);
    return Number(v);
  }
  /** The table at `at`: the position of field `i`, or undefined when absent. */
  field(table: number, i: number): number | undefined {
    const vt = table - this.i32(table);
    const vtLen = this.u16(vt);
    if (vtLen < 4 || vtLen % 2 !== 0) throw bad('vtable size');
    if (4 + 2 * i + 2 > vtLen) return undefined;
    const off = this.u16(vt + 4 + 2 * i);
    return off === 0 ? undefined : table + off;
  }
  /** Follows the offset stored at `at`. */
  deref(at: number): number {
    const target = at + this.u32(at);
    this.need(target, 4);
    return target;
  }
  string(at: number | undefined): string {
    if (at === undefined) return '';
    const s = this.deref(at);
    const n = this.u32(s);
    this.need(s + 4, n);
    return new TextDecoder('utf-8', { fatal: false }).decode(this.buf.subarray(s + 4, s + 4 + n));
  }
  bytes(at: number | undefined): Uint8Array {
    if (at === undefined) return new Uint8Array(0);
    const v = this.deref(at);
    const n = this.u32(v);
    this.need(v + 4, n);
    return this.buf.subarray(v + 4, v + 4 + n);
  }
}

/**
 * Parses a zTOC blob. INVALID_MANIFEST when it is not a well-formed zTOC or its checkpoints are not in
 * order. The checkpoints are checked for form only; whether they fit the layer is for the decoder to
 * verify (it compares each window it uses with the bytes it produced).
 * @example
 * const { checkpoints } = parseZtoc(await readFile('ztoc.bin'));
 * await pipeline(createReadStream('layer.tar.gz'), createParallelGunzip({ checkpoints }), extractor);
 */
export function parseZtoc(blob: Uint8Array): Ztoc {
  const f = new Flat(blob);
  const root = f.u32(0);
  const z = root;
  f.u32(z); // the root table's vtable offset must be readable
  const version = f.string(f.field(z, 0));
  const buildTool = f.string(f.field(z, 1));
  const cAt = f.field(z, 2);
  const uAt = f.field(z, 3);
  const compressedSize = cAt === undefined ? 0 : f.i64(cAt);
  const uncompressedSize = uAt === undefined ? 0 : f.i64(uAt);
  const infoAt = f.field(z, 5);
  if (infoAt === undefined) throw bad('no compression_info');
  const info = f.deref(infoAt);
  const algAt = f.field(info, 0);
  const algorithm = algAt === undefined ? 1 : f.u8(algAt);
  const blob2 = f.bytes(f.field(info, 3));
  if (algorithm !== 1) return { version, buildTool, compressedSize, uncompressedSize, algorithm, spanSize: 0, checkpoints: [] };
  const { spanSize, checkpoints } = parseZinfo(blob2);
  return { version, buildTool, compressedSize, uncompressedSize, algorithm, spanSize, checkpoints };
}

/** Parses a zinfo checkpoints blob (version 1 or 2, told apart by its length). */
export function parseZinfo(blob: Uint8Array): { spanSize: number; checkpoints: GzipCheckpoint[] } {
  if (blob.length < HEADER) throw bad(`checkpoints blob of ${blob.length} bytes`);
  const view = new DataView(blob.buffer, blob.byteOffset, blob.byteLength);
  const count = view.getInt32(0, true);
  const span = view.getBigInt64(4, true);
  if (count < 1 || count > MAX_CHECKPOINTS) throw bad(`${count} checkpoints`);
  if (span < 0n || span > BigInt(Number.MAX_SAFE_INTEGER)) throw bad(`span size ${span}`);
  let stored: number;
  if (blob.length === HEADER + count * PACKED) stored = count;
  else if (blob.length === HEADER + (count - 1) * PACKED)
    stored = count - 1; // version 1: the first is implied
  else throw bad(`checkpoints blob of ${blob.length} bytes for ${count} checkpoints`);
  const checkpoints: GzipCheckpoint[] = [];
  if (stored < count) checkpoints.push({ bit: 80, out: 0, window: new Uint8Array(0) });
  for (let i = 0; i < stored; i++) {
    const at = HEADER + i * PACKED;
    const inB = view.getBigInt64(at, true);
    const outB = view.getBigInt64(at + 8, true);
    const bits = view.getUint8(at + 16);
    if (inB < 0n || outB < 0n || inB > BigInt(Math.floor(Number.MAX_SAFE_INTEGER / 8)) || outB > BigInt(Number.MAX_SAFE_INTEGER))
      throw bad(`checkpoint ${i}: offsets out of range`);
    if (bits > 7) throw bad(`checkpoint ${i}: ${bits} bits`);
    const out = Number(outB);
    const bit = Number(inB) * 8 - bits;
    const keep = Math.min(out, WINDOW);
    // A copy, not a view: a window that shares the blob's buffer would carry all of it wherever it goes
    // (a structured clone to a decode thread copies the whole buffer; Buffer#slice does not copy).
    checkpoints.push({ bit, out, window: new Uint8Array(blob.subarray(at + 17 + WINDOW - keep, at + 17 + WINDOW)) });
  }
  for (let i = 1; i < checkpoints.length; i++) {
    if (checkpoints[i]!.bit <= checkpoints[i - 1]!.bit || checkpoints[i]!.out < checkpoints[i - 1]!.out)
      throw bad(`checkpoint ${i} is not after checkpoint ${i - 1}`);
  }
  return { spanSize: Number(span), checkpoints };
}
