// Loads the native addon for the filesystem calls node:fs lacks (mknod, extended attributes, nanosecond times, flock, syncfs), once, on first use.
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { isMainThread } from 'node:worker_threads';
import { fallbackFs, WITHOUT_ADDON } from './fallback.js';
import type { NativeFs } from './fs.js';

const FUNCTIONS = [
  'mknod',
  'lsetxattr',
  'lgetxattr',
  'llistxattr',
  'tryLock',
  'lutimesNs',
  'futimesNs',
  'tuneAllocator',
  'trimAllocator',
] as const satisfies ReadonlyArray<keyof NativeFs>;

// src/native/ and dist/native/ are both two levels below the package root, so one relative path serves both.
const ADDON_URL = new URL('../../native/build/Release/fastpull_native.node', import.meta.url);

let loaded: NativeFs | undefined;

/**
 * The native addon, loaded on the first call. Where it is missing or cannot be loaded, stand-ins
 * (fallback.ts) take its place, and the first call through them in the main thread emits one
 * process warning (code FASTPULL_NATIVE_ADDON): the file, why it did not load, what is off and how
 * to build it. A pull still works where no layer needs extended attributes.
 */
export function nativeFs(): NativeFs {
  if (loaded !== undefined) return loaded;
  const file = fileURLToPath(ADDON_URL);
  let why: string;
  try {
    const m = createRequire(import.meta.url)(file) as Partial<NativeFs> | null;
    const missing = FUNCTIONS.filter((name) => typeof m?.[name] !== 'function');
    if (missing.length === 0) return (loaded = m as NativeFs);
    why = `${file} lacks ${missing.join(', ')} (a build from an older source)`;
  } catch (e) {
    const notBuilt = (e as { code?: unknown } | null)?.code === 'MODULE_NOT_FOUND';
    why = notBuilt ? `${file} does not exist` : `cannot load ${file}: ${e instanceof Error ? e.message.split('\n')[0] : String(e)}`;
  }
  // Worker threads load this module again; only the main thread, where every pull takes its locks first, says it.
  let warned = !isMainThread;
  loaded = fallbackFs(() => {
    if (warned) return;
    warned = true;
    process.emitWarning(
      `fastpull runs without its native addon (${why}): ${WITHOUT_ADDON}. Build it with \`npm rebuild @fastpull/core\` ` +
        '(-g for a global install; it needs python3, make and a C compiler), or `pnpm --filter @fastpull/core build:native` in a source checkout.',
      { type: 'FastpullWarning', code: 'FASTPULL_NATIVE_ADDON' },
    );
  });
  return loaded;
}

/**
 * The addon's flush calls, which an older build or another OS may lack: callers fall back to
 * fsync(2) through node:fs when {@link nativeSync} gives none.
 */
export interface NativeSync {
  /**
   * sync_file_range(2) with SYNC_FILE_RANGE_WRITE: starts write-back of the range's dirty pages and
   * returns at once (`nbytes` 0: to the end of the file). Makes nothing durable by itself.
   */
  startWriteback(fd: number, offset: number, nbytes: number): void;
  /**
   * syncfs(2) on the filesystem holding directory `dir` (a path, or an open fd that stays open until
   * the promise settles), on a libuv pool thread (the event loop goes on). Through an fd it also
   * reports a write-back error of the filesystem since the fd was opened.
   */
  syncfs(dir: string | number): Promise<void>;
}

let sync: NativeSync | null | undefined;

/** The addon's flush calls, or undefined when the addon cannot load or predates them. */
export function nativeSync(): NativeSync | undefined {
  if (sync === undefined) {
    try {
      const m = nativeFs() as Partial<NativeSync>;
      sync = typeof m.startWriteback === 'function' && typeof m.syncfs === 'function' ? (m as NativeSync) : null;
    } catch {
      sync = null;
    }
  }
  return sync ?? undefined;
}

/** Opaque handle of a running native SHA-256. */
export type NativeSha256 = object & { readonly __brand?: 'NativeSha256' };

/**
 * The addon's SHA-256 (the OpenSSL that Node carries) run as libuv pool work, and its thread CPU
 * clock; absent where the addon cannot load, predates them, or the process has no OpenSSL symbols.
 */
export interface NativeHash {
  /** CPU time of the calling thread in nanoseconds (CLOCK_THREAD_CPUTIME_ID). */
  threadCpuNs(): number;
  /** A new SHA-256, or null where the process lacks OpenSSL's functions. */
  sha256Create(): NativeSha256 | null;
  /**
   * Hashes `buffers` in order on a libuv pool thread, then calls back with the pool thread's CPU
   * nanoseconds. One batch per hash at a time; the buffers must not change until the callback.
   */
  sha256Update(hash: NativeSha256, buffers: readonly Uint8Array[], callback: (error: Error | null, cpuNs: number) => void): void;
  /** The 32-byte digest; the hash takes no more updates. */
  sha256Digest(hash: NativeSha256): Buffer;
}

let hash: NativeHash | null | undefined;

/** The addon's pool SHA-256 and thread clock, or undefined (callers hash with node:crypto instead). */
export function nativeHash(): NativeHash | undefined {
  if (hash === undefined) {
    try {
      const m = nativeFs() as Partial<NativeHash>;
      const ok =
        typeof m.threadCpuNs === 'function' &&
        typeof m.sha256Update === 'function' &&
        typeof m.sha256Digest === 'function' &&
        typeof m.sha256Create === 'function';
      // A probe: the addon is there but the process may lack OpenSSL's symbols.
      hash = ok && m.sha256Create!() !== null ? (m as NativeHash) : null;
    } catch {
      hash = null;
    }
  }
  return hash ?? undefined;
}

/**
 * fallocate(2) with FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE on a libuv pool thread: frees the
 * range's blocks and drops its pages, dirty ones unwritten; the range then reads as zeros. Rejects
 * with an errno error (EOPNOTSUPP where the filesystem cannot). Off the caller's thread because
 * freeing blocks that were written already waits on the device where the filesystem discards
 * freed blocks at once (ext4 mounted with `discard`: 5-100 ms per 8 MiB measured on a cloud VM's
 * disk). The call takes a duplicate of `fd` for the job: closing `fd` before the promise settles
 * never turns the punch onto another file that got the same number.
 */
export type PunchHole = (fd: number, offset: number, nbytes: number) => Promise<void>;

let punch: PunchHole | null | undefined;

/** The addon's hole punching, or undefined when the addon cannot load or predates it. */
export function nativePunchHole(): PunchHole | undefined {
  if (punch === undefined) {
    try {
      const m = nativeFs() as { punchHoleAsync?: unknown };
      punch = typeof m.punchHoleAsync === 'function' ? (m.punchHoleAsync as PunchHole) : null;
    } catch {
      punch = null;
    }
  }
  return punch ?? undefined;
}

/**
 * sendto(2) of `data` as one datagram to the AF_UNIX SOCK_DGRAM socket at `address` (a path, or `@`
 * and an abstract name), from this process. Throws an errno Error (`code` ECONNREFUSED, ENOENT, ...).
 */
export type SendDatagram = (address: string, data: Uint8Array) => void;

let datagram: SendDatagram | null | undefined;

/** The addon's unix datagram send, or undefined when the addon cannot load or predates it. */
export function nativeSendDatagram(): SendDatagram | undefined {
  if (datagram === undefined) {
    try {
      const m = nativeFs() as { sendDatagram?: unknown };
      datagram = typeof m.sendDatagram === 'function' ? (m.sendDatagram as SendDatagram) : null;
    } catch {
      datagram = null;
    }
  }
  return datagram ?? undefined;
}
