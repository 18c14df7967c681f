// Writers of small files for the extractor: a process-wide pool of threads that create, fill and
// finish (owner, mode, times) the small regular files of a layer while its unpack thread goes on
// parsing the tar. On a tree of small files nearly all of a file's cost is the kernel's (open with
// O_CREAT, the first write, the inode updates), and it is paid on whichever core calls: a single
// extraction thread pays it for every file in turn, these threads pay it side by side.
//
// The unpack thread keeps the policy: it checks every name, makes the parents, decides what may go
// here (a new regular file, no sparse map, no extended attributes), and waits for the sink to drain
// before anything that could touch a name still being written (see src/unpack/filesink.ts). A sink
// is one layer's queue; its files are independent, so its jobs may end in any order. The data is
// copied into the job, so the caller's buffers are free once add returns.
#define _GNU_SOURCE
// Threads keep their CPUs between changes this addon makes (fastpull_job_cpus.h).
#define FASTPULL_CPUS_KEPT
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <node_api.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "fastpull_files.h"
#include "fastpull_process_threads.h"

#define MAX_THREADS 16

typedef struct fs_sink fs_sink;

typedef struct fs_job {
  struct fs_job* next;
  fs_sink* sink;
  uint32_t seq;
  size_t len;
  mode_t mode;
  bool chown;
  uid_t uid;
  gid_t gid;
  struct timespec times[2];
  fastpull_job_cpus cpus;  // the CPUs of the unpack thread that queued it
  char* path;     // NUL-terminated, in the same allocation
  uint8_t* data;  // len bytes, in the same allocation
} fs_job;

struct fs_sink {
  // Bytes of this sink's jobs queued or being written, each counted as len + 1 (0: none left).
  size_t pending;
  // Waits (on pool threads) that still look at this sink.
  int waiters;
  // The most pending bytes that end one of those waits: a finished job wakes them only once the
  // sink is down to it. Woken per job, a wait for room on a layer of 20,000 small files cost a
  // futex call and a context switch for each file made while it slept.
  size_t wake_at;
  // The JavaScript object is gone: the last of the jobs and waits frees the sink.
  bool released;
  // The first failure: later jobs of the sink are dropped unwritten.
  int err;
  const char* syscall;
  char* err_path;
  uint32_t err_seq;
  // CPU the writer threads spent making this sink's files, on their own clocks (ns).
  uint64_t cpu_ns;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_cv = PTHREAD_COND_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;
static fs_job* head = NULL;
static fs_job* tail = NULL;
static int threads = 0;
// Jobs in the queue, and writer threads making a file now or about to take the next job. An add
// wakes a sleeping writer only when the running ones have more queued than they are: each wake is
// a futex call on the unpack thread and a context switch on a busy core, once per small file when
// every add woke one (a third of the unpack thread's time on a layer of 20,000 small files).
static size_t queued = 0;
static int running = 0;

// Under mu: whether nothing looks at the sink any more.
static bool sink_unused(fs_sink* s) { return s->released && s->pending == 0 && s->waiters == 0; }

static void free_sink(fs_sink* s) {
  free(s->err_path);
  free(s);
}

// Under mu: drops the sink's jobs that no thread has taken yet.
static void cancel_queued(fs_sink* s) {
  fs_job** at = &head;
  fs_job* last = NULL;
  while (*at != NULL) {
    fs_job* j = *at;
    if (j->sink == s) {
      *at = j->next;
      s->pending -= j->len + 1;
      queued--;
      free(j);
    } else {
      last = j;
      at = &j->next;
    }
  }
  tail = last;
}

static int write_all(int fd, const uint8_t* p, size_t len) {
  size_t off = 0;
  while (off < len) {
    ssize_t n = pwrite(fd, p + off, len - off, (off_t)off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EIO;
    off += (size_t)n;
  }
  return 0;
}

// Makes the file as the unpack thread's own path would: a new name only (O_EXCL), never through a
// symlink (O_NOFOLLOW), owner before mode (chown clears setuid), times last.
static int write_file(fs_job* j, const char** syscall) {
  int fd = open(j->path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    *syscall = "open";
    return errno;
  }
  int err = write_all(fd, j->data, j->len);
  if (err != 0) *syscall = "write";
  if (err == 0 && j->chown && fchown(fd, j->uid, j->gid) != 0) {
    err = errno;
    *syscall = "fchown";
  }
  if (err == 0 && fchmod(fd, j->mode) != 0) {
    err = errno;
    *syscall = "fchmod";
  }
  if (err == 0 && futimens(fd, j->times) != 0) {
    err = errno;
    *syscall = "futimens";
  }
  if (close(fd) != 0 && err == 0) {
    err = errno;
    *syscall = "close";
  }
  return err;
}

// The calling thread's CPU clock in ns (0 where it has none: the job then adds nothing).
static uint64_t thread_cpu_ns(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void* writer_main(void* arg) {
  (void)arg;
  // The thread's CPU clock when its last job ended (or it started): a job costs the CPU since. A
  // sleeping thread's clock stands still, so waiting for work adds nothing, and one clock call per
  // file is enough (it is a system call).
  uint64_t mark = thread_cpu_ns();
  // On the CPUs of the last job's unpack thread rather than the process's: a job moves the thread
  // only when its CPUs differ (a move there and back per small file would cost two calls each), and
  // the thread goes back once the queue is empty. That is under the lock the job's end is counted
  // under, so a pass that has drained its sink finds no writer on its pull's CPUs any more.
  bool away = false;
  pthread_mutex_lock(&mu);
  for (;;) {
    while (head == NULL) {
      if (away) fastpull_cpus_leave(true);
      away = false;
      pthread_cond_wait(&work_cv, &mu);
    }
    fs_job* j = head;
    head = j->next;
    if (head == NULL) tail = NULL;
    queued--;
    running++;
    fs_sink* s = j->sink;
    bool skip = s->err != 0 || s->released;
    pthread_mutex_unlock(&mu);

    int err = 0;
    const char* syscall = NULL;
    if (!skip) {
      if (fastpull_cpus_enter(&j->cpus)) away = true;
      err = write_file(j, &syscall);
    }
    uint64_t now = thread_cpu_ns();
    uint64_t cpu = !skip && mark != 0 && now > mark ? now - mark : 0;
    mark = now;

    // The job's end and the next job's start under one lock.
    pthread_mutex_lock(&mu);
    running--;
    s->cpu_ns += cpu;
    if (err != 0 && s->err == 0) {
      s->err = err;
      s->syscall = syscall;
      s->err_seq = j->seq;
      s->err_path = strdup(j->path);
    }
    s->pending -= j->len + 1;
    if (s->waiters > 0 && s->pending <= s->wake_at) pthread_cond_broadcast(&done_cv);
    if (sink_unused(s)) free_sink(s);
    free(j);
  }
  return NULL;
}

// Under mu: at least `want` writer threads run (they live as long as the process).
static int ensure_threads(int want) { return fastpull_start_threads(&threads, want, MAX_THREADS, writer_main, 256 * 1024); }

static void sink_finalize(napi_env env, void* data, void* hint) {
  (void)env;
  (void)hint;
  fs_sink* s = data;
  pthread_mutex_lock(&mu);
  s->released = true;
  cancel_queued(s);
  bool unused = sink_unused(s);
  pthread_mutex_unlock(&mu);
  if (unused) free_sink(s);
}

static fs_sink* get_sink(napi_env env, napi_value v) {
  fs_sink* s = NULL;
  if (napi_unwrap(env, v, (void**)&s) != napi_ok || s == NULL) {
    napi_throw_type_error(env, NULL, "not a file sink");
    return NULL;
  }
  return s;
}

// Takes a call's `n` arguments into `a` (n <= 11), the first being a sink: the sink, or NULL with
// a TypeError thrown (`usage` says what the call takes).
static fs_sink* sink_args(napi_env env, napi_callback_info info, size_t n, napi_value* a, const char* usage) {
  size_t argc = n;
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  if (argc < n) {
    napi_throw_type_error(env, NULL, usage);
    return NULL;
  }
  return get_sink(env, a[0]);
}

// fileSinkCreate(threads): a new sink; at least `threads` writer threads run in the process.
static napi_value js_create(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  int32_t want = 0;
  if (argc < 1 || napi_get_value_int32(env, argv[0], &want) != napi_ok || want < 1) {
    napi_throw_type_error(env, NULL, "fileSinkCreate(threads: a positive integer)");
    return NULL;
  }
  pthread_mutex_lock(&mu);
  int r = ensure_threads(want);
  pthread_mutex_unlock(&mu);
  if (r != 0) return fastpull_throw_errno(env, r, "pthread_create", "file sink");
  fs_sink* s = calloc(1, sizeof *s);
  if (s == NULL) return fastpull_throw_errno(env, ENOMEM, "malloc", "file sink");
  napi_value obj;
  napi_create_object(env, &obj);
  if (napi_wrap(env, obj, s, sink_finalize, NULL, NULL) != napi_ok) {
    free(s);
    napi_throw_error(env, NULL, "cannot wrap a file sink");
    return NULL;
  }
  return obj;
}

static int get_i64(napi_env env, napi_value v, int64_t* out) {
  napi_valuetype t;
  if (napi_typeof(env, v, &t) != napi_ok || t != napi_number) return -1;
  double d;
  napi_get_value_double(env, v, &d);
  if (d != d || d < -9007199254740991.0 || d > 9007199254740991.0 || (double)(int64_t)d != d) return -1;
  *out = (int64_t)d;
  return 0;
}

// fileSinkAdd(sink, seq, path: Buffer, chunks: Uint8Array[], mode, uid, gid, atimeSec, atimeNsec,
// mtimeSec, mtimeNsec) -> the sink's pending bytes after this job, or -1 when an earlier job failed
// (nothing is queued then). uid -1: leave the owner. The path is raw bytes without NUL.
static napi_value js_add(napi_env env, napi_callback_info info) {
  napi_value a[11];
  fs_sink* s = sink_args(env, info, 11, a, "fileSinkAdd: missing arguments");
  if (s == NULL) return NULL;
  int64_t seq, mode, uid, gid, as, ans, ms, mns;
  void* path_data = NULL;
  size_t path_len = 0;
  bool is_array = false;
  bool ok = get_i64(env, a[1], &seq) == 0 && seq >= 0 && seq <= UINT32_MAX &&
            napi_get_buffer_info(env, a[2], &path_data, &path_len) == napi_ok && path_len > 0 &&
            memchr(path_data, 0, path_len) == NULL && napi_is_array(env, a[3], &is_array) == napi_ok && is_array &&
            get_i64(env, a[4], &mode) == 0 && mode >= 0 && mode <= 07777 && get_i64(env, a[5], &uid) == 0 &&
            uid >= -1 && uid <= 0xfffffffe && get_i64(env, a[6], &gid) == 0 && gid >= -1 && gid <= 0xfffffffe &&
            get_i64(env, a[7], &as) == 0 && get_i64(env, a[8], &ans) == 0 && ans >= 0 && ans <= 999999999 &&
            get_i64(env, a[9], &ms) == 0 && get_i64(env, a[10], &mns) == 0 && mns >= 0 && mns <= 999999999;
  if (!ok) {
    napi_throw_type_error(env, NULL, "fileSinkAdd(sink, seq, path: Buffer, chunks: Uint8Array[], mode, uid, gid, atimeSec, atimeNsec, mtimeSec, mtimeNsec)");
    return NULL;
  }
  uint32_t n = 0;
  napi_get_array_length(env, a[3], &n);
  size_t len = 0;
  for (uint32_t i = 0; i < n; i++) {
    napi_value c;
    void* d;
    size_t l;
    napi_get_element(env, a[3], i, &c);
    if (napi_get_typedarray_info(env, c, NULL, &l, &d, NULL, NULL) != napi_ok) {
      napi_throw_type_error(env, NULL, "fileSinkAdd: chunks must be Uint8Arrays");
      return NULL;
    }
    len += l;
  }
  napi_value out;
  // Made and filled outside the lock; an earlier failure of the sink is seen when it is queued.
  fs_job* j = malloc(sizeof *j + path_len + 1 + len);
  if (j == NULL) return fastpull_throw_errno(env, ENOMEM, "malloc", "file sink");
  j->next = NULL;
  j->sink = s;
  j->seq = (uint32_t)seq;
  j->len = len;
  j->mode = (mode_t)mode;
  j->chown = uid >= 0 || gid >= 0;
  j->uid = (uid_t)uid;
  j->gid = (gid_t)gid;
  j->times[0].tv_sec = (time_t)as;
  j->times[0].tv_nsec = (long)ans;
  j->times[1].tv_sec = (time_t)ms;
  j->times[1].tv_nsec = (long)mns;
  fastpull_cpus_capture(&j->cpus);
  j->path = (char*)(j + 1);
  memcpy(j->path, path_data, path_len);
  j->path[path_len] = '\0';
  j->data = (uint8_t*)j->path + path_len + 1;
  size_t at = 0;
  for (uint32_t i = 0; i < n; i++) {
    napi_value c;
    void* d;
    size_t l;
    napi_get_element(env, a[3], i, &c);
    napi_get_typedarray_info(env, c, NULL, &l, &d, NULL, NULL);
    memcpy(j->data + at, d, l);
    at += l;
  }
  pthread_mutex_lock(&mu);
  if (s->err != 0) {
    pthread_mutex_unlock(&mu);
    free(j);
    napi_create_int32(env, -1, &out);
    return out;
  }
  s->pending += len + 1;
  size_t pending = s->pending;
  if (tail != NULL) tail->next = j;
  else head = j;
  tail = j;
  queued++;
  // A running writer takes the next job itself once its file is made; another one is woken only
  // when the queue outgrows the running ones (signalling a condition nobody waits on is free).
  if (running == 0 || queued > (size_t)running) pthread_cond_signal(&work_cv);
  pthread_mutex_unlock(&mu);
  napi_create_double(env, (double)pending, &out);
  return out;
}

typedef struct {
  napi_async_work work;
  napi_deferred deferred;
  napi_ref keep;  // the sink's object, alive while the wait runs
  fs_sink* sink;
  size_t below;
  size_t pending;
} WaitJob;

static void wait_execute(napi_env env, void* data) {
  (void)env;
  WaitJob* w = data;
  pthread_mutex_lock(&mu);
  while (w->sink->pending > w->below) pthread_cond_wait(&done_cv, &mu);
  w->pending = w->sink->pending;
  pthread_mutex_unlock(&mu);
}

static void wait_complete(napi_env env, napi_status status, void* data) {
  (void)status;
  WaitJob* w = data;
  pthread_mutex_lock(&mu);
  // The last wait gone, the next ones set the threshold afresh (one that stays keeps a higher one
  // until then: it wakes a little early, never late).
  if (--w->sink->waiters == 0) w->sink->wake_at = 0;
  bool unused = sink_unused(w->sink);
  pthread_mutex_unlock(&mu);
  if (unused) free_sink(w->sink);
  napi_value v;
  napi_create_double(env, (double)w->pending, &v);
  napi_resolve_deferred(env, w->deferred, v);
  napi_delete_reference(env, w->keep);
  napi_delete_async_work(env, w->work);
  free(w);
}

// fileSinkWait(sink, below) -> a promise of the pending bytes, once they are at most `below` (0:
// every job of the sink is done or dropped). The wait blocks a libuv pool thread, not the loop.
static napi_value js_wait(napi_env env, napi_callback_info info) {
  napi_value a[2];
  fs_sink* s = sink_args(env, info, 2, a, "fileSinkWait(sink, below)");
  if (s == NULL) return NULL;
  int64_t below;
  if (get_i64(env, a[1], &below) != 0 || below < 0) {
    napi_throw_type_error(env, NULL, "fileSinkWait(sink, below: a byte count)");
    return NULL;
  }
  WaitJob* w = calloc(1, sizeof *w);
  if (w == NULL) return fastpull_throw_errno(env, ENOMEM, "malloc", "file sink");
  w->sink = s;
  w->below = (size_t)below;
  napi_value promise, name;
  napi_create_promise(env, &w->deferred, &promise);
  napi_create_reference(env, a[0], 1, &w->keep);
  napi_create_string_utf8(env, "fastpull:file-sink-wait", NAPI_AUTO_LENGTH, &name);
  napi_create_async_work(env, NULL, name, wait_execute, wait_complete, w, &w->work);
  pthread_mutex_lock(&mu);
  s->waiters++;
  if (w->below > s->wake_at) s->wake_at = w->below;
  pthread_mutex_unlock(&mu);
  napi_queue_async_work(env, w->work);
  return promise;
}

// fileSinkCancel(sink): drops the jobs no thread has started; the ones being written go on.
static napi_value js_cancel(napi_env env, napi_callback_info info) {
  napi_value a[1];
  fs_sink* s = sink_args(env, info, 1, a, "missing the file sink");
  if (s == NULL) return NULL;
  pthread_mutex_lock(&mu);
  cancel_queued(s);
  pthread_cond_broadcast(&done_cv);
  pthread_mutex_unlock(&mu);
  return NULL;
}

// fileSinkError(sink) -> null, or { seq, error } for the first job that failed: `error` as the
// addon's other calls throw (code, errno, syscall, path).
static napi_value js_error(napi_env env, napi_callback_info info) {
  napi_value a[1];
  fs_sink* s = sink_args(env, info, 1, a, "missing the file sink");
  if (s == NULL) return NULL;
  pthread_mutex_lock(&mu);
  int err = s->err;
  const char* syscall = s->syscall;
  uint32_t seq = s->err_seq;
  char path[4096];
  snprintf(path, sizeof path, "%s", s->err_path != NULL ? s->err_path : "");
  pthread_mutex_unlock(&mu);
  napi_value out;
  if (err == 0) {
    napi_get_null(env, &out);
    return out;
  }
  napi_value js_seq;
  napi_create_object(env, &out);
  napi_create_uint32(env, seq, &js_seq);
  napi_set_named_property(env, out, "seq", js_seq);
  napi_set_named_property(env, out, "error", fastpull_errno_error(env, err, syscall, path));
  return out;
}

// fileSinkCpuNs(sink) -> the CPU (ns, a number) the writer threads have spent on the sink's files so
// far, each on its own thread clock; a skipped or dropped job adds nothing. Complete once a wait
// for 0 has resolved.
static napi_value js_cpu(napi_env env, napi_callback_info info) {
  napi_value a[1];
  fs_sink* s = sink_args(env, info, 1, a, "missing the file sink");
  if (s == NULL) return NULL;
  pthread_mutex_lock(&mu);
  uint64_t ns = s->cpu_ns;
  pthread_mutex_unlock(&mu);
  napi_value out;
  napi_create_double(env, (double)ns, &out);
  return out;
}

void fastpull_files_init(napi_env env, napi_value exports) {
  pthread_mutex_lock(&mu);
  fastpull_pin_addon((void*)writer_main);
  pthread_mutex_unlock(&mu);
  napi_property_descriptor props[] = {
      {"fileSinkCreate", NULL, js_create, NULL, NULL, NULL, napi_default, NULL},
      {"fileSinkAdd", NULL, js_add, NULL, NULL, NULL, napi_default, NULL},
      {"fileSinkWait", NULL, js_wait, NULL, NULL, NULL, napi_default, NULL},
      {"fileSinkCancel", NULL, js_cancel, NULL, NULL, NULL, napi_default, NULL},
      {"fileSinkError", NULL, js_error, NULL, NULL, NULL, napi_default, NULL},
      {"fileSinkCpuNs", NULL, js_cpu, NULL, NULL, NULL, napi_default, NULL},
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
}
