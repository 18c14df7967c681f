// The addon's file-system calls: what the addon (addon.ts) and its stand-ins (fallback.ts) both offer.

/**
 * The addon built from `native/fastpull_native.c`. Every call acts on the path itself and never
 * follows a final symlink; failures throw an Error whose `code` is the errno name ('EPERM', ...).
 */
export interface NativeFs {
  /** mknod(2). `mode` includes the file type bits (S_IFCHR, S_IFBLK, S_IFIFO). */
  mknod(path: string, mode: number, major: number, minor: number): void;
  /** lsetxattr(2): sets extended attribute `name` to `value`. */
  lsetxattr(path: string, name: string, value: Buffer): void;
  /** lgetxattr(2): the attribute's value, or null when the path has no such attribute. */
  lgetxattr(path: string, name: string): Buffer | null;
  /** llistxattr(2): the names of the path's extended attributes that this process may read. */
  llistxattr(path: string): string[];
  /**
   * flock(2) with LOCK_NB on an open fd: true when the lock was taken, false when another holder
   * has it. Closing the fd releases it; so does the death of the process.
   */
  tryLock(fd: number, exclusive: boolean): boolean;
  /**
   * utimensat(2) with AT_SYMLINK_NOFOLLOW: sets the times of the path itself (a symlink's own) to
   * the nanosecond, which fs.lutimes, taking seconds as a double, cannot. Seconds are integers
   * (negative before 1970), nanoseconds 0-999999999; anything else is a TypeError.
   */
  lutimesNs(path: string, atimeSec: number | bigint, atimeNsec: number, mtimeSec: number | bigint, mtimeNsec: number): void;
  /** futimens(2): {@link lutimesNs} on an open fd. */
  futimesNs(fd: number, atimeSec: number | bigint, atimeNsec: number, mtimeSec: number | bigint, mtimeNsec: number): void;
  /**
   * mallopt(3) M_MMAP_THRESHOLD and M_TRIM_THRESHOLD (glibc only): true when both were set, false where
   * the C library is another. Bad values are a TypeError.
   */
  tuneAllocator(mmapThreshold: number, trimThreshold: number): boolean;
  /** malloc_trim(0): free memory of every arena back to the kernel; false when none was, or not glibc. */
  trimAllocator(): boolean;
}
