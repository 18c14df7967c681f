// The few filesystem calls fastpull needs that node:fs lacks: mknod (overlay whiteouts are character
// devices 0:0; images also carry fifos and device nodes), extended attributes (trusted.overlay.opaque,
// security.capability and other SCHILY.xattr records), times to the nanosecond (node:fs takes seconds
// as a double, which keeps microseconds at best), all on the path itself, never following a final
// symlink; flock, so that processes sharing a store unpack each layer once; and the flushes that make
// a snapshot durable before it is committed (sync_file_range to start write-back early, syncfs).
// Also SHA-256 on the libuv pool (OpenSSL's, as Node exports it) and a thread CPU clock, so that an
// unpack hashes its blob and its tar on other cores than the one parsing the tar; and, from
// fastpull_files.c, the threads that write a layer's small files beside its unpack thread. And one
// datagram to a unix socket, for a service manager's notify socket, which node:dgram cannot reach.
// And a thread's CPU affinity and I/O priority, which a CPU budget and a background pull set.
#define _GNU_SOURCE
// Threads keep their CPUs between changes this addon makes (fastpull_job_cpus.h).
#define FASTPULL_CPUS_KEPT
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <node_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "fastpull_files.h"
#include "fastpull_job_cpus.h"

// Changes of a thread's CPUs this addon made (fastpull_job_cpus.h).
unsigned fastpull_affinity_changes = 0;

#define PATH_CAP 4096
#define NAME_CAP 256

static napi_value errno_error(napi_env env, int err, const char* syscall, const char* path) {
  static const struct { int no; const char* code; } codes[] = {
      {EPERM, "EPERM"},   {ENOENT, "ENOENT"}, {EEXIST, "EEXIST"},     {EACCES, "EACCES"},
      {ENOSPC, "ENOSPC"}, {ENOTSUP, "ENOTSUP"}, {ENODATA, "ENODATA"}, {EINVAL, "EINVAL"},
      {ENOTDIR, "ENOTDIR"}, {ERANGE, "ERANGE"}, {EROFS, "EROFS"}, {EDQUOT, "EDQUOT"},
      {EBADF, "EBADF"},   {ELOOP, "ELOOP"},   {ENAMETOOLONG, "ENAMETOOLONG"}, {ENOSYS, "ENOSYS"},
      {EIO, "EIO"},       {EAGAIN, "EAGAIN"}, {ECONNREFUSED, "ECONNREFUSED"}, {ENOTSOCK, "ENOTSOCK"},
      {EPROTOTYPE, "EPROTOTYPE"}, {EMSGSIZE, "EMSGSIZE"}, {ENOBUFS, "ENOBUFS"}, {E2BIG, "E2BIG"},
      {EMLINK, "EMLINK"}, {ESRCH, "ESRCH"},
  };
  const char* code = "EIO";
  for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
    if (codes[i].no == err) code = codes[i].code;
  }
  char msg[PATH_CAP + 128];
  snprintf(msg, sizeof msg, "%s: %s, %s '%s'", code, strerror(err), syscall, path);
  napi_value js_msg, js_code, error, js_errno, js_syscall, js_path;
  napi_create_string_utf8(env, msg, NAPI_AUTO_LENGTH, &js_msg);
  napi_create_string_utf8(env, code, NAPI_AUTO_LENGTH, &js_code);
  napi_create_error(env, js_code, js_msg, &error);
  napi_create_int32(env, -err, &js_errno);
  napi_create_string_utf8(env, syscall, NAPI_AUTO_LENGTH, &js_syscall);
  napi_create_string_utf8(env, path, NAPI_AUTO_LENGTH, &js_path);
  napi_set_named_property(env, error, "errno", js_errno);
  napi_set_named_property(env, error, "syscall", js_syscall);
  napi_set_named_property(env, error, "path", js_path);
  return error;
}

static napi_value throw_errno(napi_env env, int err, const char* syscall, const char* path) {
  napi_throw(env, errno_error(env, err, syscall, path));
  return NULL;
}

napi_value fastpull_errno_error(napi_env env, int err, const char* syscall, const char* path) { return errno_error(env, err, syscall, path); }
napi_value fastpull_throw_errno(napi_env env, int err, const char* syscall, const char* path) { return throw_errno(env, err, syscall, path); }

static int get_string(napi_env env, napi_value v, char* buf, size_t cap) {
  size_t len = 0;
  if (napi_get_value_string_utf8(env, v, buf, cap, &len) != napi_ok) return -1;
  return len + 1 >= cap ? -1 : 0;  // refuse silently truncated strings
}

static int get_args(napi_env env, napi_callback_info info, size_t want, napi_value* argv) {
  size_t argc = want;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < want) {
    napi_throw_type_error(env, NULL, "missing arguments");
    return -1;
  }
  return 0;
}

// mknod(path, mode, major, minor): mode includes the file type bits (S_IFCHR, S_IFBLK, S_IFIFO).
static napi_value js_mknod(napi_env env, napi_callback_info info) {
  napi_value argv[4];
  if (get_args(env, info, 4, argv)) return NULL;
  char path[PATH_CAP];
  uint32_t mode, major, minor;
  if (get_string(env, argv[0], path, sizeof path) ||
      napi_get_value_uint32(env, argv[1], &mode) != napi_ok ||
      napi_get_value_uint32(env, argv[2], &major) != napi_ok ||
      napi_get_value_uint32(env, argv[3], &minor) != napi_ok) {
    napi_throw_type_error(env, NULL, "mknod(path: string, mode: number, major: number, minor: number)");
    return NULL;
  }
  if (mknod(path, (mode_t)mode, makedev(major, minor)) != 0) return throw_errno(env, errno, "mknod", path);
  return NULL;
}

// lsetxattr(path, name, value: Buffer)
static napi_value js_lsetxattr(napi_env env, napi_callback_info info) {
  napi_value argv[3];
  if (get_args(env, info, 3, argv)) return NULL;
  char path[PATH_CAP], name[NAME_CAP];
  void* data = NULL;
  size_t len = 0;
  bool is_buffer = false;
  napi_is_buffer(env, argv[2], &is_buffer);
  if (get_string(env, argv[0], path, sizeof path) || get_string(env, argv[1], name, sizeof name) || !is_buffer ||
      napi_get_buffer_info(env, argv[2], &data, &len) != napi_ok) {
    napi_throw_type_error(env, NULL, "lsetxattr(path: string, name: string, value: Buffer)");
    return NULL;
  }
  if (lsetxattr(path, name, len ? data : "", len, 0) != 0) return throw_errno(env, errno, "lsetxattr", path);
  return NULL;
}

// lgetxattr(path, name): Buffer, or null when the attribute is absent.
static napi_value js_lgetxattr(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  if (get_args(env, info, 2, argv)) return NULL;
  char path[PATH_CAP], name[NAME_CAP];
  if (get_string(env, argv[0], path, sizeof path) || get_string(env, argv[1], name, sizeof name)) {
    napi_throw_type_error(env, NULL, "lgetxattr(path: string, name: string)");
    return NULL;
  }
  ssize_t size = lgetxattr(path, name, NULL, 0);
  if (size < 0) {
    if (errno == ENODATA) {
      napi_value nul;
      napi_get_null(env, &nul);
      return nul;
    }
    return throw_errno(env, errno, "lgetxattr", path);
  }
  char* buf = malloc(size > 0 ? (size_t)size : 1);
  if (!buf) return throw_errno(env, ENOMEM, "lgetxattr", path);
  ssize_t got = lgetxattr(path, name, buf, (size_t)size);
  if (got < 0) {
    int err = errno;
    free(buf);
    return throw_errno(env, err, "lgetxattr", path);
  }
  napi_value out;
  napi_create_buffer_copy(env, (size_t)got, buf, NULL, &out);
  free(buf);
  return out;
}

// llistxattr(path): the names of the path's extended attributes (those this process may see).
static napi_value js_llistxattr(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  if (get_args(env, info, 1, argv)) return NULL;
  char path[PATH_CAP];
  if (get_string(env, argv[0], path, sizeof path)) {
    napi_throw_type_error(env, NULL, "llistxattr(path: string)");
    return NULL;
  }
  char* buf = NULL;
  ssize_t got;
  for (;;) {  // the list may grow between the two calls: ask again on ERANGE
    ssize_t size = llistxattr(path, NULL, 0);
    if (size < 0) return throw_errno(env, errno, "llistxattr", path);
    free(buf);
    buf = malloc(size > 0 ? (size_t)size : 1);
    if (!buf) return throw_errno(env, ENOMEM, "llistxattr", path);
    got = llistxattr(path, buf, (size_t)size);
    if (got >= 0) break;
    if (errno != ERANGE) {
      int err = errno;
      free(buf);
      return throw_errno(env, err, "llistxattr", path);
    }
  }
  napi_value out;
  napi_create_array(env, &out);
  uint32_t n = 0;
  for (ssize_t at = 0; at < got;) {
    size_t len = strnlen(buf + at, (size_t)(got - at));
    napi_value name;
    napi_create_string_utf8(env, buf + at, len, &name);
    napi_set_element(env, out, n++, name);
    at += (ssize_t)len + 1;
  }
  free(buf);
  return out;
}

// tryLock(fd, exclusive): flock(LOCK_NB); true when taken, false when another holder has it.
// Released by closing the fd, or by the kernel when the process dies (kill -9 included).
static napi_value js_try_lock(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  if (get_args(env, info, 2, argv)) return NULL;
  int32_t fd;
  bool exclusive;
  if (napi_get_value_int32(env, argv[0], &fd) != napi_ok || napi_get_value_bool(env, argv[1], &exclusive) != napi_ok) {
    napi_throw_type_error(env, NULL, "tryLock(fd: number, exclusive: boolean)");
    return NULL;
  }
  int rc;
  do {
    rc = flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  napi_value out;
  if (rc == 0) {
    napi_get_boolean(env, true, &out);
    return out;
  }
  if (errno == EWOULDBLOCK) {
    napi_get_boolean(env, false, &out);
    return out;
  }
  return throw_errno(env, errno, "flock", "(fd)");
}

// Seconds as a JS number (an integer) or a bigint, within time_t. -1 when it is neither.
static int get_seconds(napi_env env, napi_value v, time_t* out) {
  napi_valuetype type;
  if (napi_typeof(env, v, &type) != napi_ok) return -1;
  int64_t s;
  if (type == napi_bigint) {
    bool lossless = false;
    if (napi_get_value_bigint_int64(env, v, &s, &lossless) != napi_ok || !lossless) return -1;
  } else if (type == napi_number) {
    double d;
    if (napi_get_value_double(env, v, &d) != napi_ok) return -1;
    // -2^63 and 2^63 are exact as doubles; in between, the cast is defined and an integer survives it.
    if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0)) return -1;  // NaN and infinities too
    s = (int64_t)d;
    if ((double)s != d) return -1;  // a fraction
  } else {
    return -1;
  }
  if ((time_t)s != s) return -1;  // a 32-bit time_t
  *out = (time_t)s;
  return 0;
}

// Nanoseconds: an integer number in [0, 999999999].
static int get_nanoseconds(napi_env env, napi_value v, long* out) {
  napi_valuetype type;
  double d;
  if (napi_typeof(env, v, &type) != napi_ok || type != napi_number || napi_get_value_double(env, v, &d) != napi_ok) return -1;
  if (!(d >= 0 && d <= 999999999.0) || (double)(long)d != d) return -1;
  *out = (long)d;
  return 0;
}

// argv[from..from+3]: atime seconds, atime nanoseconds, mtime seconds, mtime nanoseconds.
static int get_times(napi_env env, napi_value* argv, struct timespec ts[2]) {
  for (int i = 0; i < 2; i++) {
    if (get_seconds(env, argv[2 * i], &ts[i].tv_sec) || get_nanoseconds(env, argv[2 * i + 1], &ts[i].tv_nsec)) return -1;
  }
  return 0;
}

// lutimesNs(path, atimeSec, atimeNsec, mtimeSec, mtimeNsec): utimensat(AT_SYMLINK_NOFOLLOW), so a
// symlink gets its own times. Seconds are integers (number or bigint), negative before 1970.
static napi_value js_lutimes_ns(napi_env env, napi_callback_info info) {
  napi_value argv[5];
  if (get_args(env, info, 5, argv)) return NULL;
  char path[PATH_CAP];
  struct timespec ts[2];
  if (get_string(env, argv[0], path, sizeof path) || get_times(env, argv + 1, ts)) {
    napi_throw_type_error(env, NULL,
                          "lutimesNs(path: string, atimeSec: integer | bigint, atimeNsec: 0-999999999, mtimeSec: integer | bigint, mtimeNsec: 0-999999999)");
    return NULL;
  }
  if (utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW) != 0) return throw_errno(env, errno, "utimensat", path);
  return NULL;
}

// futimesNs(fd, atimeSec, atimeNsec, mtimeSec, mtimeNsec): futimens(2) on an open fd.
static napi_value js_futimes_ns(napi_env env, napi_callback_info info) {
  napi_value argv[5];
  if (get_args(env, info, 5, argv)) return NULL;
  int32_t fd;
  struct timespec ts[2];
  if (napi_get_value_int32(env, argv[0], &fd) != napi_ok || get_times(env, argv + 1, ts)) {
    napi_throw_type_error(env, NULL,
                          "futimesNs(fd: number, atimeSec: integer | bigint, atimeNsec: 0-999999999, mtimeSec: integer | bigint, mtimeNsec: 0-999999999)");
    return NULL;
  }
  if (futimens(fd, ts) != 0) return throw_errno(env, errno, "futimens", "(fd)");
  return NULL;
}

// tuneAllocator(mmapThreshold, trimThreshold): mallopt(3) M_MMAP_THRESHOLD and M_TRIM_THRESHOLD where
// the C library is glibc; true when both were set, false elsewhere. An unpack allocates output buffers
// of 64 KiB to 1 MiB by the gigabyte; with glibc's defaults each one is a fresh mapping or a heap top
// that was just trimmed, so every 4 KiB of output costs a page fault (zeroing included) and the
// kernel time exceeds the inflating. Set once at startup, the heap keeps those pages.
static napi_value js_tune_allocator(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  if (get_args(env, info, 2, argv)) return NULL;
  double mmap_d, trim_d;
  // Read as doubles: napi_get_value_int64 turns NaN into 0, which would ask for a trim on every free.
  if (napi_get_value_double(env, argv[0], &mmap_d) != napi_ok || napi_get_value_double(env, argv[1], &trim_d) != napi_ok ||
      !(mmap_d >= 0 && mmap_d <= (double)(1 << 30)) || !(trim_d >= 0 && trim_d <= 1099511627776.0) ||
      mmap_d != (double)(int64_t)mmap_d || trim_d != (double)(int64_t)trim_d) {
    napi_throw_type_error(env, NULL, "tuneAllocator(mmapThreshold: 0-1GiB, trimThreshold: 0-1TiB)");
    return NULL;
  }
  int64_t mmap_at = (int64_t)mmap_d, trim_at = (int64_t)trim_d;
  (void)mmap_at;
  (void)trim_at;
  bool ok = false;
#ifdef __GLIBC__
  ok = mallopt(M_MMAP_THRESHOLD, (int)mmap_at) == 1;
  ok = mallopt(M_TRIM_THRESHOLD, (int)(trim_at > 0x7fffffff ? 0x7fffffff : trim_at)) == 1 && ok;
#endif
  napi_value out;
  napi_get_boolean(env, ok, &out);
  return out;
}

// trimAllocator(): malloc_trim(3) where the C library is glibc: every arena's free memory, top and
// middle, goes back to the kernel. With the thresholds above, freed unpack buffers stay in the
// heap (up to 64 MiB per arena, and threads get arenas of their own); a long-running process calls
// this when it goes idle, so what it keeps between pulls is what it uses. True when memory was
// released, false when there was none to release or the C library is another.
static napi_value js_trim_allocator(napi_env env, napi_callback_info info) {
  (void)info;
  bool released = false;
#ifdef __GLIBC__
  released = malloc_trim(0) == 1;
#endif
  napi_value out;
  napi_get_boolean(env, released, &out);
  return out;
}

// limitArenas(count): mallopt(3) M_ARENA_MAX where the C library is glibc; true when set, false
// elsewhere. glibc gives each thread that allocates an arena of its own (up to 8 per core), and what
// an arena keeps after a trim (its live allocations, spread over pages that stay) adds up per
// thread: a long-running process that wants a small idle footprint calls this before its threads
// first allocate. An arena already made stays; threads that come later share the ones there are.
static napi_value js_limit_arenas(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  if (get_args(env, info, 1, argv)) return NULL;
  int32_t count;
  if (napi_get_value_int32(env, argv[0], &count) != napi_ok || count < 1 || count > 1024) {
    napi_throw_type_error(env, NULL, "limitArenas(count: 1-1024)");
    return NULL;
  }
  bool ok = false;
#ifdef __GLIBC__
  ok = mallopt(M_ARENA_MAX, count) == 1;
#else
  (void)count;
#endif
  napi_value out;
  napi_get_boolean(env, ok, &out);
  return out;
}

// A byte offset or count as a JS number: a non-negative safe integer. -1 when it is not one.
static int get_offset(napi_env env, napi_value v, int64_t* out) {
  double d;
  if (napi_get_value_double(env, v, &d) != napi_ok) return -1;
  if (!(d >= 0 && d <= 9007199254740991.0) || d != (double)(int64_t)d) return -1;
  *out = (int64_t)d;
  return 0;
}

// startWriteback(fd, offset, nbytes): sync_file_range(SYNC_FILE_RANGE_WRITE) starts write-back of
// the range's dirty pages and returns without waiting for it (nbytes 0: to the end of the file). It
// makes nothing durable by itself (no metadata, no disk cache flush): it lets the device work while
// extraction goes on, so that the flush before the commit finds little left to write.
static napi_value js_start_writeback(napi_env env, napi_callback_info info) {
  napi_value argv[3];
  if (get_args(env, info, 3, argv)) return NULL;
  int32_t fd;
  int64_t offset, nbytes;
  if (napi_get_value_int32(env, argv[0], &fd) != napi_ok || get_offset(env, argv[1], &offset) || get_offset(env, argv[2], &nbytes)) {
    napi_throw_type_error(env, NULL, "startWriteback(fd: number, offset: integer >= 0, nbytes: integer >= 0)");
    return NULL;
  }
#ifdef __linux__
  int rc;
  do {
    rc = sync_file_range(fd, (off64_t)offset, (off64_t)nbytes, SYNC_FILE_RANGE_WRITE);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) return throw_errno(env, errno, "sync_file_range", "(fd)");
#else
  return throw_errno(env, ENOSYS, "sync_file_range", "(fd)");
#endif
  return NULL;
}

// Settles a promise of a call that returns nothing: resolved with undefined, or rejected with the
// errno error of `syscall` on `path` where `err` is set.
static void settle(napi_env env, napi_deferred deferred, int err, const char* syscall, const char* path) {
  if (err != 0) {
    napi_reject_deferred(env, deferred, errno_error(env, err, syscall, path));
    return;
  }
  napi_value undef;
  napi_get_undefined(env, &undef);
  napi_resolve_deferred(env, deferred, undef);
}

typedef struct {
  napi_async_work work;
  napi_deferred deferred;
  int fd;
  int64_t offset, nbytes;
  int err;
} PunchJob;

// On a libuv pool thread: freeing blocks that were written already can wait on the device (a
// filesystem mounted with `discard` trims them before fallocate returns, tens of ms per call).
static void punch_execute(napi_env env, void* data) {
  (void)env;
  PunchJob* job = data;
  job->err = 0;
#ifdef __linux__
  int rc;
  do {
    rc = fallocate64(job->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off64_t)job->offset, (off64_t)job->nbytes);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) job->err = errno;
#else
  job->err = EOPNOTSUPP;
#endif
  close(job->fd);
  job->fd = -1;
}

static void punch_complete(napi_env env, napi_status status, void* data) {
  PunchJob* job = data;
  if (job->fd >= 0) close(job->fd);  // never ran
  if (status != napi_ok && job->err == 0) job->err = EIO;
  settle(env, job->deferred, job->err, "fallocate", "(fd)");
  napi_delete_async_work(env, job->work);
  free(job);
}

// punchHoleAsync(fd, offset, nbytes): a promise of fallocate(FALLOC_FL_PUNCH_HOLE |
// FALLOC_FL_KEEP_SIZE), run on a libuv pool thread, which frees the range's blocks and drops its pages
// from the page cache, dirty ones included, without writing them: bytes that were read and will not
// be read again never reach the disk. The file keeps its size; the range reads as zeros. Rejects
// (EOPNOTSUPP where the filesystem cannot punch holes). The job punches through a duplicate of `fd`
// taken here: closing `fd` meanwhile (a worker torn down mid-pass) can never turn the punch onto
// another file that got the same number.
static napi_value js_punch_hole_async(napi_env env, napi_callback_info info) {
  napi_value argv[3];
  if (get_args(env, info, 3, argv)) return NULL;
  int32_t fd;
  int64_t offset, nbytes;
  if (napi_get_value_int32(env, argv[0], &fd) != napi_ok || fd < 0 || get_offset(env, argv[1], &offset) || get_offset(env, argv[2], &nbytes)) {
    napi_throw_type_error(env, NULL, "punchHoleAsync(fd: number, offset: integer >= 0, nbytes: integer >= 0)");
    return NULL;
  }
  PunchJob* job = calloc(1, sizeof *job);
  if (!job) return throw_errno(env, ENOMEM, "fallocate", "(fd)");
  job->offset = offset;
  job->nbytes = nbytes;
  napi_value promise, name;
  napi_create_promise(env, &job->deferred, &promise);
  job->fd = nbytes == 0 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, 0);
  int dup_err = nbytes != 0 && job->fd < 0 ? errno : 0;
  if (nbytes == 0 || job->fd < 0) {
    settle(env, job->deferred, dup_err, "fcntl", "(fd)");
    free(job);
    return promise;
  }
  napi_create_string_utf8(env, "fastpull:punchHole", NAPI_AUTO_LENGTH, &name);
  napi_create_async_work(env, NULL, name, punch_execute, punch_complete, job, &job->work);
  napi_queue_async_work(env, job->work);
  return promise;
}

typedef struct {
  napi_async_work work;
  napi_deferred deferred;
  char path[PATH_CAP];
  int fd; // -1: open `path`
  int err;
  const char* syscall;
} SyncfsJob;

// On a libuv pool thread: the flush may take seconds and must not hold up the event loop.
static void syncfs_execute(napi_env env, void* data) {
  (void)env;
  SyncfsJob* job = data;
  job->err = 0;
#ifdef __linux__
  int fd = job->fd >= 0 ? job->fd : open(job->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    job->err = errno;
    job->syscall = "open";
    return;
  }
  if (syncfs(fd) != 0) {
    job->err = errno;
    job->syscall = "syncfs";
  }
  if (job->fd < 0) close(fd);
#else
  job->err = ENOSYS;
  job->syscall = "syncfs";
#endif
}

static void syncfs_complete(napi_env env, napi_status status, void* data) {
  SyncfsJob* job = data;
  if (status != napi_ok && job->err == 0) {
    job->err = EIO;
    job->syscall = "syncfs";
  }
  settle(env, job->deferred, job->err, job->syscall, job->path);
  napi_delete_async_work(env, job->work);
  free(job);
}

// syncfs(dir): a promise of syncfs(2) on the filesystem holding the directory `dir` (a path, opened
// without following a final symlink, or an open fd, which must stay open until the promise settles):
// every dirty page and inode of that filesystem written and the device's cache flushed, run off the
// event loop. Through an fd it also reports a write-back error of the filesystem since that fd was
// opened, which a path opened now would miss (errors are kept per open file).
static napi_value js_syncfs(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  if (get_args(env, info, 1, argv)) return NULL;
  SyncfsJob* job = calloc(1, sizeof *job);
  if (!job) return throw_errno(env, ENOMEM, "syncfs", "");
  napi_valuetype type;
  napi_typeof(env, argv[0], &type);
  job->fd = -1;
  int64_t fd = -1;
  int bad = type == napi_number ? get_offset(env, argv[0], &fd) != 0 || fd > INT32_MAX
                                : get_string(env, argv[0], job->path, sizeof job->path) != 0;
  job->fd = (int)fd;
  if (bad) {
    free(job);
    napi_throw_type_error(env, NULL, "syncfs(dir: string | fd: number)");
    return NULL;
  }
  if (job->fd >= 0) snprintf(job->path, sizeof job->path, "(fd %d)", job->fd);
  napi_value promise, name;
  napi_create_promise(env, &job->deferred, &promise);
  napi_create_string_utf8(env, "fastpull:syncfs", NAPI_AUTO_LENGTH, &name);
  napi_create_async_work(env, NULL, name, syncfs_execute, syncfs_complete, job, &job->work);
  napi_queue_async_work(env, job->work);
  return promise;
}

// SHA-256 through the OpenSSL that Node carries, looked up at run time (dlsym): no OpenSSL headers
// are needed to build, and where the symbols are missing (a Node built without them) only the hash
// calls are absent and callers hash in JavaScript.
typedef struct evp_md_st EVP_MD;
typedef struct evp_md_ctx_st EVP_MD_CTX;
static struct {
  int state;  // 0 not looked up, 1 found, -1 missing
  const EVP_MD* (*sha256)(void);
  EVP_MD_CTX* (*ctx_new)(void);
  void (*ctx_free)(EVP_MD_CTX*);
  int (*init)(EVP_MD_CTX*, const EVP_MD*, void*);
  int (*update)(EVP_MD_CTX*, const void*, size_t);
  int (*final)(EVP_MD_CTX*, unsigned char*, unsigned int*);
} evp;

static bool evp_found(void) {
  if (evp.state == 0) {
    *(void**)&evp.sha256 = dlsym(RTLD_DEFAULT, "EVP_sha256");
    *(void**)&evp.ctx_new = dlsym(RTLD_DEFAULT, "EVP_MD_CTX_new");
    *(void**)&evp.ctx_free = dlsym(RTLD_DEFAULT, "EVP_MD_CTX_free");
    *(void**)&evp.init = dlsym(RTLD_DEFAULT, "EVP_DigestInit_ex");
    *(void**)&evp.update = dlsym(RTLD_DEFAULT, "EVP_DigestUpdate");
    *(void**)&evp.final = dlsym(RTLD_DEFAULT, "EVP_DigestFinal_ex");
    evp.state = evp.sha256 && evp.ctx_new && evp.ctx_free && evp.init && evp.update && evp.final ? 1 : -1;
  }
  return evp.state == 1;
}

static double thread_cpu_ns(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return -1;
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

// threadCpuNs(): CPU time of the calling thread in nanoseconds (a double: exact to 104 days).
static napi_value js_thread_cpu_ns(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value out;
  napi_create_double(env, thread_cpu_ns(), &out);
  return out;
}

// One running hash. JavaScript sends it one batch at a time (the next after the last completed),
// which keeps the updates in order without a lock.
typedef struct {
  EVP_MD_CTX* ctx;
  bool busy;      // a batch is on the pool: the context belongs to that thread
  bool finished;  // digested: no more updates
  double cpu_ns;  // pool thread CPU spent on this hash
} Sha256;

typedef struct {
  napi_async_work work;
  napi_ref self;   // keeps the hash's external alive
  napi_ref batch;  // keeps the batch's buffers alive
  napi_ref callback;
  Sha256* hash;
  size_t count;
  const unsigned char** data;
  size_t* lens;
  bool ok;
  double cpu_ns;
  fastpull_job_cpus cpus;  // the CPUs of the thread that queued it (a pass held to its pull's budget)
} Sha256Batch;

static void sha256_finalize(napi_env env, void* data, void* hint) {
  (void)env, (void)hint;
  Sha256* h = data;
  if (h->ctx) evp.ctx_free(h->ctx);
  free(h);
}

// sha256Create(): a new hash, or null where OpenSSL's functions are not in the process.
static napi_value js_sha256_create(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value out;
  if (!evp_found()) {
    napi_get_null(env, &out);
    return out;
  }
  Sha256* h = calloc(1, sizeof *h);
  if (!h) return throw_errno(env, ENOMEM, "sha256Create", "");
  h->ctx = evp.ctx_new();
  if (!h->ctx || evp.init(h->ctx, evp.sha256(), NULL) != 1) {
    if (h->ctx) evp.ctx_free(h->ctx);
    free(h);
    napi_throw_error(env, NULL, "sha256Create: OpenSSL could not start a SHA-256 context");
    return NULL;
  }
  napi_create_external(env, h, sha256_finalize, NULL, &out);
  return out;
}

static Sha256* get_hash(napi_env env, napi_value v) {
  void* h = NULL;
  napi_valuetype t;
  if (napi_typeof(env, v, &t) != napi_ok || t != napi_external || napi_get_value_external(env, v, &h) != napi_ok) return NULL;
  return h;
}

// On a libuv pool thread, so that hashing runs beside the event loop that parses the tar.
static void sha256_execute(napi_env env, void* data) {
  (void)env;
  Sha256Batch* b = data;
  // Node's pool serves every pull and node itself: the thread goes back to the process's CPUs after.
  bool moved = fastpull_cpus_enter(&b->cpus);
  double t0 = thread_cpu_ns();
  b->ok = true;
  for (size_t i = 0; i < b->count && b->ok; i++) {
    if (evp.update(b->hash->ctx, b->data[i], b->lens[i]) != 1) b->ok = false;
  }
  b->cpu_ns = thread_cpu_ns() - t0;
  fastpull_cpus_leave(moved);
}

static void sha256_complete(napi_env env, napi_status status, void* data) {
  Sha256Batch* b = data;
  b->hash->busy = false;
  b->hash->cpu_ns += b->cpu_ns;
  napi_value cb, global, argv[2];
  napi_get_reference_value(env, b->callback, &cb);
  napi_get_global(env, &global);
  if (status != napi_ok || !b->ok) {
    napi_value msg;
    napi_create_string_utf8(env, status == napi_cancelled ? "sha256Update: cancelled" : "sha256Update: OpenSSL failed to hash a batch", NAPI_AUTO_LENGTH, &msg);
    napi_create_error(env, NULL, msg, &argv[0]);
  } else {
    napi_get_null(env, &argv[0]);
  }
  napi_create_double(env, b->cpu_ns, &argv[1]);
  napi_delete_reference(env, b->self);
  napi_delete_reference(env, b->batch);
  napi_delete_reference(env, b->callback);
  napi_delete_async_work(env, b->work);
  free(b->data);
  free(b->lens);
  free(b);
  napi_call_function(env, global, cb, 2, argv, NULL);
}

// sha256Update(hash, buffers, callback): hashes the buffers, in order, on the libuv pool, then calls
// callback(error | null, cpuNs). One batch per hash at a time (a TypeError otherwise); the buffers
// must not change until the callback.
static napi_value js_sha256_update(napi_env env, napi_callback_info info) {
  napi_value argv[3];
  if (get_args(env, info, 3, argv)) return NULL;
  Sha256* h = get_hash(env, argv[0]);
  bool is_array = false;
  napi_valuetype cbt;
  napi_is_array(env, argv[1], &is_array);
  napi_typeof(env, argv[2], &cbt);
  if (!h || !is_array || cbt != napi_function) {
    napi_throw_type_error(env, NULL, "sha256Update(hash, buffers: Buffer[], callback)");
    return NULL;
  }
  if (h->busy || h->finished) {
    napi_throw_type_error(env, NULL, h->busy ? "sha256Update: a batch is still running" : "sha256Update: the hash was digested");
    return NULL;
  }
  uint32_t count = 0;
  napi_get_array_length(env, argv[1], &count);
  Sha256Batch* b = calloc(1, sizeof *b);
  if (b) {
    b->data = calloc(count ? count : 1, sizeof *b->data);
    b->lens = calloc(count ? count : 1, sizeof *b->lens);
  }
  if (!b || !b->data || !b->lens) {
    if (b) free(b->data), free(b->lens);
    free(b);
    return throw_errno(env, ENOMEM, "sha256Update", "");
  }
  for (uint32_t i = 0; i < count; i++) {
    napi_value el;
    bool is_typed = false;
    void* p = NULL;
    size_t len = 0;
    napi_get_element(env, argv[1], i, &el);
    napi_is_typedarray(env, el, &is_typed);
    if (is_typed) {
      napi_typedarray_type tt;
      size_t n;
      napi_get_typedarray_info(env, el, &tt, &n, &p, NULL, NULL);
      len = tt == napi_uint8_array ? n : 0;
    }
    if (!is_typed || (len > 0 && p == NULL)) {
      free(b->data), free(b->lens), free(b);
      napi_throw_type_error(env, NULL, "sha256Update: buffers must be Uint8Arrays");
      return NULL;
    }
    b->data[i] = p;
    b->lens[i] = len;
  }
  b->count = count;
  b->hash = h;
  fastpull_cpus_capture(&b->cpus);
  napi_value name;
  napi_create_string_utf8(env, "fastpull:sha256", NAPI_AUTO_LENGTH, &name);
  napi_create_reference(env, argv[0], 1, &b->self);
  napi_create_reference(env, argv[1], 1, &b->batch);
  napi_create_reference(env, argv[2], 1, &b->callback);
  napi_create_async_work(env, NULL, name, sha256_execute, sha256_complete, b, &b->work);
  h->busy = true;
  if (napi_queue_async_work(env, b->work) != napi_ok) {
    h->busy = false;
    napi_delete_reference(env, b->self);
    napi_delete_reference(env, b->batch);
    napi_delete_reference(env, b->callback);
    napi_delete_async_work(env, b->work);
    free(b->data), free(b->lens), free(b);
    napi_throw_error(env, NULL, "sha256Update: could not queue the batch");
    return NULL;
  }
  return NULL;
}

// sha256Digest(hash): the 32-byte digest of everything hashed; the hash takes no more updates.
static napi_value js_sha256_digest(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  if (get_args(env, info, 1, argv)) return NULL;
  Sha256* h = get_hash(env, argv[0]);
  if (!h || h->busy || h->finished) {
    napi_throw_type_error(env, NULL, !h ? "sha256Digest(hash)" : h->busy ? "sha256Digest: a batch is still running" : "sha256Digest: already digested");
    return NULL;
  }
  unsigned char md[32];
  unsigned int n = 0;
  h->finished = true;
  if (evp.final(h->ctx, md, &n) != 1 || n != sizeof md) {
    napi_throw_error(env, NULL, "sha256Digest: OpenSSL failed to finish the digest");
    return NULL;
  }
  void* data;
  napi_value out;
  napi_create_buffer_copy(env, sizeof md, md, &data, &out);
  return out;
}

// How long a datagram may wait for room in the receiver's queue: a service manager that stops reading
// must not hang the process that tells it something.
#define DATAGRAM_SEND_TIMEOUT_SEC 5

// sendDatagram(address, data): `data` (a Uint8Array) as one datagram to the AF_UNIX SOCK_DGRAM socket
// at `address`, written as $NOTIFY_SOCKET writes it: a path, or '@' then a name in the abstract
// namespace. Sent from this process itself (a helper process would be another sender, which a service
// manager may refuse). Throws an errno Error: ENAMETOOLONG for an address sockaddr_un cannot hold,
// EINVAL for one that is neither form, else what socket(2) or sendto(2) said.
static napi_value js_send_datagram(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  if (get_args(env, info, 2, argv)) return NULL;
  struct sockaddr_un sa;
  // One byte over what sun_path holds, so that an address too long is seen, not silently cut.
  char address[sizeof sa.sun_path + 2];
  size_t alen = 0;
  bool is_typed = false;
  napi_typedarray_type tt = napi_int8_array;
  void* data = NULL;
  size_t len = 0;
  napi_is_typedarray(env, argv[1], &is_typed);
  if (is_typed) napi_get_typedarray_info(env, argv[1], &tt, &len, &data, NULL, NULL);
  if (napi_get_value_string_utf8(env, argv[0], address, sizeof address, &alen) != napi_ok || !is_typed || tt != napi_uint8_array) {
    napi_throw_type_error(env, NULL, "sendDatagram(address: string, data: Uint8Array)");
    return NULL;
  }
  if (alen + 1 >= sizeof address) return throw_errno(env, ENAMETOOLONG, "sendDatagram", address);
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  socklen_t salen;
  if (address[0] == '/') {
    // A path: NUL-terminated inside sun_path, and no NUL of its own.
    if (strlen(address) != alen) return throw_errno(env, EINVAL, "sendDatagram", address);
    if (alen >= sizeof sa.sun_path) return throw_errno(env, ENAMETOOLONG, "sendDatagram", address);
    memcpy(sa.sun_path, address, alen + 1);
    salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + alen + 1);
  } else if (address[0] == '@' && alen > 1) {
    // An abstract name: a leading NUL instead of the '@', and its length, not a terminator, ends it.
    if (alen > sizeof sa.sun_path) return throw_errno(env, ENAMETOOLONG, "sendDatagram", address);
    memcpy(sa.sun_path + 1, address + 1, alen - 1);
    salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + alen);
  } else {
    return throw_errno(env, EINVAL, "sendDatagram", address);
  }
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return throw_errno(env, errno, "socket", address);
  struct timeval timeout = {.tv_sec = DATAGRAM_SEND_TIMEOUT_SEC, .tv_usec = 0};
  (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  ssize_t n;
  do {
    n = sendto(fd, len ? data : "", len, MSG_NOSIGNAL, (const struct sockaddr*)&sa, salen);
  } while (n < 0 && errno == EINTR);
  int err = errno;
  close(fd);
  if (n < 0) return throw_errno(env, err, "sendto", address);
  return NULL;
}

// setAffinity(tid, cpus): sched_setaffinity(2) of one thread of this process (0: the calling one) to
// the CPUs numbered in `cpus`, the way a CPU budget confines every thread (threads started later
// inherit their creator's set). Throws an errno Error: EINVAL for a set the kernel refuses (no CPU of
// it allowed by the cpuset), ESRCH for a thread that ended.
static napi_value js_set_affinity(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  if (get_args(env, info, 2, argv)) return NULL;
  int32_t tid = 0;
  bool is_array = false;
  uint32_t n = 0;
  napi_is_array(env, argv[1], &is_array);
  if (napi_get_value_int32(env, argv[0], &tid) != napi_ok || tid < 0 || !is_array || napi_get_array_length(env, argv[1], &n) != napi_ok || n == 0) {
    napi_throw_type_error(env, NULL, "setAffinity(tid: number, cpus: number[]) with at least one CPU");
    return NULL;
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  for (uint32_t i = 0; i < n; i++) {
    napi_value v;
    int32_t cpu = -1;
    napi_get_element(env, argv[1], i, &v);
    if (napi_get_value_int32(env, v, &cpu) != napi_ok || cpu < 0 || cpu >= CPU_SETSIZE) {
      napi_throw_type_error(env, NULL, "setAffinity: a CPU number is not an integer from 0 to 1023");
      return NULL;
    }
    CPU_SET(cpu, &set);
  }
  int r = sched_setaffinity((pid_t)tid, sizeof set, &set);
  int err = errno;
  // Every thread's kept set is read again: this may be any of them, or all of them in turn.
  fastpull_cpus_changed();
  if (r != 0) return throw_errno(env, err, "sched_setaffinity", "(thread)");
  return NULL;
}

// ioprio_set(2)'s constants (linux/ioprio.h, which glibc does not wrap).
#define FASTPULL_IOPRIO_WHO_PROCESS 1
#define FASTPULL_IOPRIO_CLASS_SHIFT 13

// setIoPriority(tid, class, level): ioprio_set(2) of one thread (0: the calling one): class 1 real
// time, 2 best effort, 3 idle; level 0-7 (0 highest). Throws an errno Error (EPERM: real time
// without CAP_SYS_ADMIN; ENOSYS where the kernel lacks it).
static napi_value js_set_io_priority(napi_env env, napi_callback_info info) {
  napi_value argv[3];
  if (get_args(env, info, 3, argv)) return NULL;
  int32_t tid = 0, cls = 0, level = 0;
  if (napi_get_value_int32(env, argv[0], &tid) != napi_ok || napi_get_value_int32(env, argv[1], &cls) != napi_ok || napi_get_value_int32(env, argv[2], &level) != napi_ok ||
      tid < 0 || cls < 0 || cls > 3 || level < 0 || level > 7) {
    napi_throw_type_error(env, NULL, "setIoPriority(tid: number, class: 0-3, level: 0-7)");
    return NULL;
  }
#ifdef SYS_ioprio_set
  if (syscall(SYS_ioprio_set, FASTPULL_IOPRIO_WHO_PROCESS, tid, (cls << FASTPULL_IOPRIO_CLASS_SHIFT) | level) != 0) return throw_errno(env, errno, "ioprio_set", "(thread)");
  return NULL;
#else
  return throw_errno(env, ENOSYS, "ioprio_set", "(thread)");
#endif
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"mknod", NULL, js_mknod, NULL, NULL, NULL, napi_default, NULL},
      {"lsetxattr", NULL, js_lsetxattr, NULL, NULL, NULL, napi_default, NULL},
      {"lgetxattr", NULL, js_lgetxattr, NULL, NULL, NULL, napi_default, NULL},
      {"llistxattr", NULL, js_llistxattr, NULL, NULL, NULL, napi_default, NULL},
      {"tryLock", NULL, js_try_lock, NULL, NULL, NULL, napi_default, NULL},
      {"lutimesNs", NULL, js_lutimes_ns, NULL, NULL, NULL, napi_default, NULL},
      {"futimesNs", NULL, js_futimes_ns, NULL, NULL, NULL, napi_default, NULL},
      {"tuneAllocator", NULL, js_tune_allocator, NULL, NULL, NULL, napi_default, NULL},
      {"trimAllocator", NULL, js_trim_allocator, NULL, NULL, NULL, napi_default, NULL},
      {"limitArenas", NULL, js_limit_arenas, NULL, NULL, NULL, napi_default, NULL},
      {"startWriteback", NULL, js_start_writeback, NULL, NULL, NULL, napi_default, NULL},
      {"punchHoleAsync", NULL, js_punch_hole_async, NULL, NULL, NULL, napi_default, NULL},
      {"syncfs", NULL, js_syncfs, NULL, NULL, NULL, napi_default, NULL},
      {"threadCpuNs", NULL, js_thread_cpu_ns, NULL, NULL, NULL, napi_default, NULL},
      {"sha256Create", NULL, js_sha256_create, NULL, NULL, NULL, napi_default, NULL},
      {"sha256Update", NULL, js_sha256_update, NULL, NULL, NULL, napi_default, NULL},
      {"sha256Digest", NULL, js_sha256_digest, NULL, NULL, NULL, napi_default, NULL},
      {"sendDatagram", NULL, js_send_datagram, NULL, NULL, NULL, napi_default, NULL},
      {"setAffinity", NULL, js_set_affinity, NULL, NULL, NULL, napi_default, NULL},
      {"setIoPriority", NULL, js_set_io_priority, NULL, NULL, NULL, napi_default, NULL},
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  fastpull_files_init(env, exports);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
