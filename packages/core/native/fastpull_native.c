// The few filesystem calls fastpull needs that node:fs lacks: mknod (overlay whiteouts are character
// devices 0:0; images also carry fifos and device nodes), extended attributes (trusted.overlay.opaque,
// security.capability and other SCHILY.xattr records), times to the nanosecond (node:fs takes seconds
// as a double, which keeps microseconds at best), all on the path itself, never following a final
// symlink; flock, so that processes sharing a store unpack each layer once; and the flushes that make
// a snapshot durable before it is committed (sync_file_range to start write-back early, syncfs).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdbool.h>
#include <node_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/file.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define PATH_CAP 4096
#define NAME_CAP 256

static napi_value errno_error(napi_env env, int err, const char* syscall, const char* path) {
  static const struct { int no; const char* code; } codes[] = {
      {EPERM, "EPERM"},   {ENOENT, "ENOENT"}, {EEXIST, "EEXIST"},     {EACCES, "EACCES"},
      {ENOSPC, "ENOSPC"}, {ENOTSUP, "ENOTSUP"}, {ENODATA, "ENODATA"}, {EINVAL, "EINVAL"},
      {ENOTDIR, "ENOTDIR"}, {ERANGE, "ERANGE"}, {EROFS, "EROFS"}, {EDQUOT, "EDQUOT"},
      {EBADF, "EBADF"},   {ELOOP, "ELOOP"},   {ENAMETOOLONG, "ENAMETOOLONG"}, {ENOSYS, "ENOSYS"},
      {EIO, "EIO"},
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
  if (job->err != 0) {
    napi_reject_deferred(env, job->deferred, errno_error(env, job->err, job->syscall, job->path));
  } else {
    napi_value undef;
    napi_get_undefined(env, &undef);
    napi_resolve_deferred(env, job->deferred, undef);
  }
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
      {"startWriteback", NULL, js_start_writeback, NULL, NULL, NULL, napi_default, NULL},
      {"syncfs", NULL, js_syncfs, NULL, NULL, NULL, napi_default, NULL},
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
