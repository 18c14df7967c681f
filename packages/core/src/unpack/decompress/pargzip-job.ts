// One decode job of the parallel gunzip (see pargzip.ts): its input, the native call, its result.
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

/** Decoder states, as native/fastpull_inflate.c numbers them. */
export const St = {
  /** At a gzip member header (or the end of the stream). */
  Member: 0,
  /** At a deflate block header. */
  Block: 1,
  /** Inside a Huffman-coded block. */
  Huff: 2,
  /** Inside a stored block. */
  Stored: 3,
  /** At a member's 8-byte trailer. */
  Trailer: 4,
  /** After the last member. */
  End: 5,
} as const;

/** How a job ended, as native/fastpull_inflate.c numbers it. */
export const Status = {
  /** Reached a boundary whose key is at least the job's stop key. */
  Stop: 0,
  /** Wrote as much as it may. */
  Cap: 1,
  /** Needs bytes past its data. */
  Need: 2,
  /** The stream ended. */
  End: 3,
  /** A search found no boundary that decodes. */
  NoStart: 4,
  /** The stream is corrupt (for a search: every candidate was). */
  Error: 5,
} as const;
/** A {@link Status} value. */
export type StatusCode = (typeof Status)[keyof typeof Status];

/** The decoder's error codes, by number, as zlib words them where zlib has the same error. */
export const ERROR_TEXT: readonly string[] = [
  'no error',
  'unexpected end of file',
  'incorrect header check',
  'unknown compression method',
  'unknown header flags set',
  'header crc mismatch',
  'invalid block type',
  'invalid stored block lengths',
  'too many length or distance symbols',
  'invalid code lengths set',
  'invalid bit length repeat',
  'invalid code -- missing end-of-block',
  'invalid literal/lengths set',
  'invalid distances set',
  'invalid literal/length code',
  'invalid distance code',
  'invalid distance too far back',
  'incorrect data check',
  'incorrect length check',
];

/** Bytes of the window a deflate distance may reach back. */
export const WINDOW = 32768;
/** Room the native decoder wants past the output cap. */
const SLACK = 300;
/**
 * Most symbols a job writes with markers. Markers fade once 32 KiB go by without one, after some
 * hundred KiB for typical data; a job where they last longer stops there and a continuation goes on.
 */
const MARKED_MAX = 4 * 1024 * 1024;
/** Member ends one job may report; past that it stops at the next member. */
const MEMBERS_PER_JOB = 256;
/** Bytes of a dynamic block header a continuation carries (a header is at most 563 bytes). */
const HEADER_BYTES = 1024;
const RESULT_LEN = 16;

/** Where a job starts: a decoder state, or a search for a block boundary from `bit`. */
export interface JobStart {
  /** A state, or -1 to search. */
  kind: number;
  /** Absolute bit position in the compressed stream. */
  bit: number;
  /** Block type (Huff), or, at Member, 1 when a member ended just before. */
  btype: number;
  /** The current block is the member's last (Huff, Stored). */
  bfinal: number;
  /** Bytes left in the stored block (Stored). */
  left: number;
  /** The bytes holding the current dynamic block's header, from the byte of `hdrBit` (Huff, when the header is not inside `data`). */
  hdr: Uint8Array | null;
  /** Absolute bit of the current block's header (Huff). */
  hdrBit: number;
}

/** What a job decodes. */
export interface JobInput extends JobStart {
  /** Compressed bytes from `dataOffset`. */
  data: Uint8Array;
  /** Byte offset of data[0] in the stream. */
  dataOffset: number;
  /** `data` reaches the end of the stream. */
  final: boolean;
  /** Stop at the first boundary whose key is at least this (Infinity: never). */
  stopKey: number;
  /** Most symbols the job writes. */
  cap: number;
  /** The current member's bytes before the start (its last 32 KiB at most), when known: no markers then. */
  window: Uint8Array | null;
}

/** What a job produced. */
export interface JobResult {
  status: StatusCode;
  error: number;
  /** Where decoding stopped: a state to resume from. */
  end: JobStart;
  /** The boundary key at a Stop. */
  key: number;
  /** Key and state of the boundary a search settled on (or the given start). */
  startKey: number;
  startKind: number;
  /** Symbols with markers, then bytes: views on the slot, valid until it is released. */
  out16: Uint16Array;
  out8: Uint8Array;
  /** Member ends: output offset, CRC-32, ISIZE. */
  members: number[];
  /** CRC-32 of the byte part (out8), cut at each member end: members.length / 3 + 1 values. */
  crcs: number[];
  /** The slot holding out16, out8 and the input, until the pool's release. */
  slot: JobSlot;
  /** Which use of the slot this is (a release of an older use does nothing). */
  lease: number;
}

interface NativeInflate {
  inflateJob(
    data: Uint8Array,
    dataOffset: number,
    final: boolean,
    startKind: number,
    startBit: number,
    btype: number,
    bfinal: number,
    left: number,
    hdr: Uint8Array | null,
    hdrBit: number,
    stopKey: number,
    out16: Uint16Array,
    out8: Uint8Array,
    cap: number,
    members: Float64Array,
    res: Float64Array,
    window: Uint8Array | null,
  ): void;
  resolveMarkers(src: Uint16Array, count: number, window: Uint8Array, minIndex: number, dst: Uint8Array): number;
  crc32Combine(crc1: number, crc2: number, len2: number): number;
  /** Hands the whole pages inside `bytes` back to the kernel (they read as zeros after); the bytes handed back. Absent from addons built before it. */
  discard?(bytes: Uint8Array): number;
  /** memcpy between byte views (V8's own copy into or out of shared memory is much slower). */
  copyBytes(dst: Uint8Array, dstOffset: number, src: Uint8Array, srcOffset: number, length: number): void;
  /**
   * With a boolean, switches (process-wide) between the process's zlib CRC-32 and the decoder's own
   * (slicing by 8); returns whether zlib's is in use. On by default where Node.js exports its zlib.
   */
  useZlib(on?: boolean): boolean;
  /**
   * This thread's way to the process's decode threads (at least `threads` of them run): jobs given to
   * {@link decodeSubmit} end with `onDone(id, cpuNs, failed)` on this thread (cpuNs -1 without a
   * thread clock; failed: out of memory). Absent from addons built before it.
   */
  decodeRunner?(onDone: (id: number, cpuNs: number, failed: boolean) => void, threads: number): DecodeRunner;
  /** Queues a job (the arguments of inflateJob after the runner and an id); its buffers must not be touched until it is done. */
  decodeSubmit?(runner: DecodeRunner, id: number, ...args: Parameters<NativeInflate['inflateJob']>): void;
  /** No more jobs or reports through `runner`; jobs already decoding finish. */
  decodeRunnerClose?(runner: DecodeRunner): void;
  /** Decode threads running in the process. */
  decodeThreads?(): number;
}

/** A thread's handle on the process's decode threads (see NativeInflate.decodeRunner). */
export type DecodeRunner = object & { readonly __brand?: 'DecodeRunner' };

const ADDON_URL = new URL('../../../native/build/Release/fastpull_inflate.node', import.meta.url);
let loaded: NativeInflate | null | undefined;

/** The inflate addon, or null when it is not built or does not load (the caller then decodes serially). */
export function nativeInflate(): NativeInflate | null {
  if (loaded !== undefined) return loaded;
  try {
    const m = createRequire(import.meta.url)(fileURLToPath(ADDON_URL)) as Partial<NativeInflate>;
    loaded =
      typeof m.inflateJob === 'function' &&
      typeof m.resolveMarkers === 'function' &&
      typeof m.crc32Combine === 'function' &&
      typeof m.copyBytes === 'function' &&
      typeof m.useZlib === 'function'
        ? (m as NativeInflate)
        : null;
  } catch {
    loaded = null;
  }
  return loaded;
}

/**
 * A job's memory: its output (16-bit symbols, then the window and bytes) and its compressed input, in
 * one SharedArrayBuffer that the output thread and every decode thread see. A slot is allocated once
 * and used by job after job: moving fresh buffers between threads made V8 collect garbage for the
 * external memory each time (some 330 collections per GB), which cost more CPU than the decoding.
 */
export class JobSlot {
  /** Symbols with markers: 0-255 a byte, 0x8000 | i byte i of the unknown window. */
  readonly out16: Uint16Array;
  /** The window (32 KiB), then the job's bytes. */
  readonly out8: Uint8Array;
  /** Compressed bytes. */
  readonly input: Uint8Array;
  /** Whether the slot's pages are the process's (false once its pool discarded them: they read as zeros). */
  resident = true;

  /** Views on `buffer` for jobs of at most `cap` symbols and `inputBytes` of input. */
  constructor(
    readonly id: number,
    readonly cap: number,
    readonly inputBytes: number,
    readonly buffer: SharedArrayBuffer = new SharedArrayBuffer(JobSlot.bytes(cap, inputBytes)),
  ) {
    const n16 = Math.min(cap, MARKED_MAX) + SLACK;
    const n8 = WINDOW + cap + SLACK;
    const at8 = Math.ceil((2 * n16) / 8) * 8;
    const atIn = Math.ceil((at8 + n8) / 8) * 8;
    if (buffer.byteLength < atIn + inputBytes) throw new RangeError('job slot: buffer too small');
    this.out16 = new Uint16Array(buffer, 0, n16);
    this.out8 = new Uint8Array(buffer, at8, n8);
    this.input = new Uint8Array(buffer, atIn, inputBytes);
  }

  /** Bytes of a slot's buffer. */
  static bytes(cap: number, inputBytes: number): number {
    const n16 = Math.min(cap, MARKED_MAX) + SLACK;
    return Math.ceil((2 * n16) / 8) * 8 + Math.ceil((WINDOW + cap + SLACK) / 8) * 8 + inputBytes;
  }
}

/** A job as it travels to a decode thread: its input lies in the slot, `dataLength` bytes of it. */
export type WireJob = Omit<JobInput, 'data'> & { dataLength: number };

/** A job's result as it travels back: counts instead of the views (the slot holds the bytes). */
export type WireResult = Omit<JobResult, 'out16' | 'out8' | 'slot' | 'lease'> & { n16: number; n8: number };

/** A job ready for the native call: its arguments, and the views its results land in. */
export interface PreparedJob {
  args: Parameters<NativeInflate['inflateJob']>;
  data: Uint8Array;
  members: Float64Array;
  res: Float64Array;
}

/** The native call for a job whose input is the first `job.dataLength` bytes of `slot.input`. */
export function prepareJob(job: WireJob, slot: JobSlot): PreparedJob {
  if (job.cap > slot.cap || job.dataLength > slot.inputBytes) throw new RangeError('job larger than its slot');
  const data = slot.input.subarray(0, job.dataLength);
  const cap16 = (job.window || job.kind === St.Member ? 0 : Math.min(job.cap, MARKED_MAX)) + SLACK;
  const out16 = slot.out16.subarray(0, cap16);
  const out8 = slot.out8.subarray(0, WINDOW + job.cap + SLACK);
  const members = new Float64Array(4 * MEMBERS_PER_JOB + 1);
  const res = new Float64Array(RESULT_LEN);
  const args: PreparedJob['args'] = [
    data,
    job.dataOffset,
    job.final,
    job.kind,
    job.bit,
    job.btype,
    job.bfinal,
    job.left,
    job.hdr,
    job.hdrBit,
    job.stopKey === Infinity ? 2e19 : job.stopKey,
    out16,
    out8,
    job.cap,
    members,
    res,
    job.window,
  ];
  return { args, data, members, res };
}

/** What a prepared job's native call produced. */
export function finishJob(job: WireJob, p: PreparedJob): WireResult {
  const { data, members, res } = p;
  const [status, error, state, bit, btype, bfinal, left, hdrBit, hdrLen, key, n16, n8, startKey, startKind, nMembers] = res as unknown as number[];
  let hdr: Uint8Array | null = null;
  if (state === St.Huff && btype === 2) {
    if (hdrLen === -1) hdr = job.hdr;
    else {
      const from = Math.floor(hdrBit! / 8) - job.dataOffset;
      hdr = data.slice(from, from + HEADER_BYTES);
    }
  }
  return {
    status: status as StatusCode,
    error: error!,
    end: { kind: state!, bit: bit!, btype: btype!, bfinal: bfinal!, left: left!, hdr, hdrBit: hdrBit! },
    key: key!,
    startKey: startKey!,
    startKind: startKind!,
    n16: n16!,
    n8: n8!,
    members: Array.from(members.subarray(0, 3 * nMembers!)),
    crcs: Array.from(members.subarray(3 * MEMBERS_PER_JOB, 3 * MEMBERS_PER_JOB + nMembers! + 1)),
  };
}

/** Runs one job whose input is the first `job.dataLength` bytes of `slot.input`, on this thread. */
export function runJob(job: WireJob, slot: JobSlot): WireResult {
  const native = nativeInflate();
  if (!native) throw new Error('the inflate addon is not built');
  const p = prepareJob(job, slot);
  native.inflateJob(...p.args);
  return finishJob(job, p);
}
