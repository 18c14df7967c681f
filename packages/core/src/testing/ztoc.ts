// zTOCs for tests: checkpoints of a gzip stream made with fastpull's own decoder, and their encoding
// as a SOCI zTOC (FlatBuffers, with a zinfo checkpoints blob), as soci-snapshotter writes them.
import { nativeInflate, St, Status, WINDOW } from '../unpack/decompress/pargzip-job.js';
import { slideWindow } from '../unpack/decompress/pargzip.js';
import type { GzipCheckpoint } from '../unpack/decompress/ztoc.js';

/**
 * Checkpoints of `gz`'s first member at block boundaries at least `span` output bytes apart, the
 * first right after the gzip header, none after the last block (as soci's zinfo places them).
 * Needs the inflate addon.
 * @example
 * const blob = encodeZtoc({ checkpoints: buildGzipCheckpoints(gz, 4 << 20) }); // a zTOC for gz
 */
export function buildGzipCheckpoints(gz: Uint8Array, span: number): GzipCheckpoint[] {
  const native = nativeInflate();
  if (!native) throw new Error('the inflate addon is not built');
  const checkpoints: GzipCheckpoint[] = [];
  const cap = 8 * 1024 * 1024;
  const out8 = new Uint8Array(WINDOW + cap + 300);
  const out16 = new Uint16Array(400);
  const members = new Float64Array(4 * 8 + 1);
  const res = new Float64Array(16);
  // The member's last 32 KiB so far (its first `total` bytes when fewer).
  let win: Uint8Array = new Uint8Array(WINDOW);
  let total = 0;
  const tail = () => win.slice(WINDOW - Math.min(total, WINDOW));
  let state = { kind: St.Member as number, bit: 0, btype: 0, bfinal: 0, left: 0, hdrBit: 0 };
  let stop = 1;
  let last = -Infinity;
  for (let guard = 0; guard < 10_000_000; guard++) {
    // One block per job: stop at the first boundary past the one it starts on (a block longer than the
    // output room goes on from where it stopped).
    const window = state.kind === St.Member ? null : tail();
    native.inflateJob(
      gz,
      0,
      true,
      state.kind,
      state.bit,
      state.btype,
      state.bfinal,
      state.left,
      null,
      state.hdrBit,
      stop,
      out16,
      out8,
      cap,
      members,
      res,
      window,
    );
    const [status, , kind, bit, btype, bfinal, left, hdrBit, , key, , n8] = res as unknown as number[];
    if (n8! > 0) {
      win = slideWindow(win, [Buffer.from(out8.buffer, out8.byteOffset + WINDOW, n8)]);
      total += n8!;
    }
    if (status === Status.Cap) {
      state = { kind: kind!, bit: bit!, btype: btype!, bfinal: bfinal!, left: left!, hdrBit: hdrBit! };
      continue;
    }
    // Anything but a stop at a block boundary: the member's last block ended (or the stream is corrupt).
    if (status !== Status.Stop || kind !== St.Block) break;
    if (total === 0 || total - last > span) {
      checkpoints.push({ bit: bit!, out: total, window: tail() });
      last = total;
    }
    state = { kind: kind, bit: bit!, btype: btype!, bfinal: bfinal!, left: left!, hdrBit: 0 };
    stop = key! + 1;
  }
  return checkpoints;
}

const PACKED = 8 + 8 + 1 + WINDOW;

/**
 * The zinfo blob of `checkpoints` (version 2 keeps the first; version 1 leaves it out).
 * @example
 * parseZinfo(encodeZinfo(checkpoints, 4 << 20)).checkpoints; // the same checkpoints
 */
export function encodeZinfo(checkpoints: readonly GzipCheckpoint[], spanSize: number, version: 1 | 2 = 2): Uint8Array {
  const stored = version === 1 ? checkpoints.slice(1) : checkpoints;
  const blob = new Uint8Array(12 + stored.length * PACKED);
  const view = new DataView(blob.buffer);
  view.setInt32(0, checkpoints.length, true);
  view.setBigInt64(4, BigInt(spanSize), true);
  stored.forEach((c, i) => {
    const at = 12 + i * PACKED;
    const inByte = Math.ceil(c.bit / 8);
    view.setBigInt64(at, BigInt(inByte), true);
    view.setBigInt64(at + 8, BigInt(c.out), true);
    view.setUint8(at + 16, inByte * 8 - c.bit);
    blob.set(c.window.subarray(Math.max(0, c.window.length - WINDOW)), at + 17 + WINDOW - Math.min(WINDOW, c.window.length));
  });
  return blob;
}

/** What {@link encodeZtoc} writes. */
export interface ZtocFields {
  /** The checkpoints, the first (right after the gzip header) included. */
  checkpoints: readonly GzipCheckpoint[];
  /** Span size recorded (default 4 MiB, soci's). */
  spanSize?: number;
  /** compressed_archive_size (default 0). */
  compressedSize?: number;
  /** uncompressed_archive_size (default 0). */
  uncompressedSize?: number;
  /** The format version (default "0.9"). */
  version?: string;
  /** build_tool_identifier (default "fastpull test"). */
  buildTool?: string;
  /** zinfo blob version (default 2). */
  zinfoVersion?: 1 | 2;
}

/**
 * A zTOC blob (FlatBuffers `Ztoc` with its compression_info; no TOC of files).
 * @example
 * const blob = encodeZtoc({ checkpoints, compressedSize: gz.length, version: '1.0' });
 */
export function encodeZtoc(z: ZtocFields): Uint8Array {
  const zinfo = encodeZinfo(z.checkpoints, z.spanSize ?? 4 * 1024 * 1024, z.zinfoVersion ?? 2);
  const enc = new TextEncoder();
  const version = enc.encode(z.version ?? '0.9');
  const tool = enc.encode(z.buildTool ?? 'fastpull test');
  const pad4 = (n: number) => (n + 3) & ~3;
  // Layout: root offset, Ztoc vtable and table, CompressionInfo vtable and table, then the strings
  // and the checkpoints vector (FlatBuffers offsets point forward).
  const vtZ = 4,
    tZ = 24,
    vtC = 60,
    tC = 72,
    sVersion = 88;
  const sTool = sVersion + pad4(4 + version.length + 1);
  const vCheck = sTool + pad4(4 + tool.length + 1);
  const buf = new Uint8Array(vCheck + 4 + zinfo.length);
  const v = new DataView(buf.buffer);
  v.setUint32(0, tZ, true);
  // Ztoc: version 0, build_tool_identifier 1, compressed 2, uncompressed 3, toc 4 (absent), compression_info 5.
  v.setUint16(vtZ, 16, true);
  v.setUint16(vtZ + 2, 36, true);
  [4, 8, 16, 24, 0, 32].forEach((off, i) => v.setUint16(vtZ + 4 + 2 * i, off, true));
  v.setInt32(tZ, tZ - vtZ, true);
  v.setUint32(tZ + 4, sVersion - (tZ + 4), true);
  v.setUint32(tZ + 8, sTool - (tZ + 8), true);
  v.setBigInt64(tZ + 16, BigInt(z.compressedSize ?? 0), true);
  v.setBigInt64(tZ + 24, BigInt(z.uncompressedSize ?? 0), true);
  v.setUint32(tZ + 32, tC - (tZ + 32), true);
  // CompressionInfo: compression_algorithm 0, max_span_id 1, span_digests 2 (absent), checkpoints 3.
  v.setUint16(vtC, 12, true);
  v.setUint16(vtC + 2, 16, true);
  [4, 8, 0, 12].forEach((off, i) => v.setUint16(vtC + 4 + 2 * i, off, true));
  v.setInt32(tC, tC - vtC, true);
  v.setUint8(tC + 4, 1);
  v.setInt32(tC + 8, z.checkpoints.length - 1, true);
  v.setUint32(tC + 12, vCheck - (tC + 12), true);
  v.setUint32(sVersion, version.length, true);
  buf.set(version, sVersion + 4);
  v.setUint32(sTool, tool.length, true);
  buf.set(tool, sTool + 4);
  v.setUint32(vCheck, zinfo.length, true);
  buf.set(zinfo, vCheck + 4);
  return buf;
}
