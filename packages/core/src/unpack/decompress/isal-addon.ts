// The ISA-L addon (native/fastpull_isal.c, linked against the system's libisal): its calls, the
// slots and records it answers in, what its error numbers mean, and loading it once.
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

/** An inflater in the addon: opaque, one gzip stream from its start. */
export interface IsalHandle {
  readonly __isalHandle: never;
}

/** The addon built from `native/fastpull_isal.c`. */
export interface IsalAddon {
  /** `notify` is called on this thread when records of the decode thread wait ({@link take}). */
  create(result: Int32Array, notify?: () => void): IsalHandle;
  /** Compressed bytes for the decode thread (started by the first span), after those queued; kept unchanged until records show them used. */
  input(z: IsalHandle, bytes: Uint8Array, offset: number, length: number): void;
  /** Room for decoded bytes, filled after the spans queued before; kept until a record closes it. */
  output(z: IsalHandle, bytes: Uint8Array, offset: number, length: number): void;
  /** No more input: a record with `end` follows once everything is decoded. */
  end(z: IsalHandle): void;
  /** Moves the waiting records into `records`, {@link RECORD} numbers each; returns how many. */
  take(z: IsalHandle, records: Float64Array): number;
  /** One stretch on this thread; fills in the Int32Array given to create(). */
  inflateSync(z: IsalHandle, input: Uint8Array, inOffset: number, inLength: number, output: Uint8Array, outOffset: number, outLength: number): void;
  /** Ends the decode thread (after the stretch under way) and forgets the spans. */
  close(z: IsalHandle): void;
  /**
   * CPU nanoseconds of the decoding so far, on the clock of the thread that ran it: the decode
   * thread's (wake-ups included), plus the time of sync calls. Absent in a build from an older source.
   */
  cpuNs?(z: IsalHandle): number;
}

// The addon's result slots and phases (fastpull_isal.c).
export const R_ERROR = 0;
export const R_CONSUMED = 1;
export const R_PRODUCED = 2;
export const R_PHASE = 3;
export const R_MEMBERS = 4;
export const PH_BETWEEN = 2;
export const PH_PADDING = 3;

// A record of take(): produced, consumed, done (the head output span is closed), end, error, phase, members.
export const RECORD = 7;
export const REC_PRODUCED = 0;
export const REC_CONSUMED = 1;
export const REC_DONE = 2;
export const REC_END = 3;
export const REC_ERROR = 4;
export const REC_PHASE = 5;
export const REC_MEMBERS = 6;
/** Records one take() moves at most (the addon keeps fewer than this). */
export const MAX_RECORDS = 32;

/** What each error of the addon means, in zlib's words where zlib has one. */
export const ERRORS: Readonly<Record<number, string>> = {
  [-1]: 'invalid deflate block',
  [-2]: 'invalid code in deflate data',
  [-3]: 'invalid distance too far back',
  [-4]: 'incorrect header check',
  [-5]: 'unknown compression method',
  [-6]: 'incorrect data check (CRC-32 or length of a member)',
  [-100]: 'unknown header flags set',
};

// src/unpack/decompress/ and dist/unpack/decompress/ are both three levels below the package root, so one relative path serves both.
const ADDON_URL = new URL('../../../native/build/Release/fastpull_isal.node', import.meta.url);

/** The addon once loaded; null: it cannot load here (`why` says why). */
let addon: IsalAddon | null | undefined;
let why: string | undefined;

/** The addon, loaded on the first call; undefined where it cannot load ({@link isalUnavailableReason}). */
export function loadIsal(): IsalAddon | undefined {
  if (addon !== undefined) return addon ?? undefined;
  const file = fileURLToPath(ADDON_URL);
  try {
    const m = createRequire(import.meta.url)(file) as Partial<IsalAddon> | null;
    const calls = ['create', 'input', 'output', 'end', 'take', 'inflateSync', 'close'] as const;
    if (m && calls.every((c) => typeof m[c] === 'function')) return (addon = m as IsalAddon);
    why = `${file} lacks one of ${calls.join(', ')} (a build from an older source)`;
  } catch (e) {
    const notBuilt = (e as { code?: unknown } | null)?.code === 'MODULE_NOT_FOUND';
    why = notBuilt
      ? `${file} was not built: libisal was not found when the native addon was built (Debian/Ubuntu package libisal-dev, then \`npm rebuild @fastpull/core\`)`
      : `cannot load ${file}: ${e instanceof Error ? e.message.split('\n')[0] : String(e)}`;
  }
  addon = null;
  return undefined;
}

/** Whether the in-process ISA-L inflater can run here (its addon was built against libisal and loads). */
export function isalAvailable(): boolean {
  return loadIsal() !== undefined;
}

/** Why the in-process ISA-L inflater cannot run here, or undefined when it can. */
export function isalUnavailableReason(): string | undefined {
  loadIsal();
  return why;
}
