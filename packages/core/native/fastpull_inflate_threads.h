// Decode threads of the parallel gunzip, one set for the whole process (included by fastpull_inflate.c).
//
// Every unpack worker of a pull has its own isolate, and a Node.js worker thread cannot be lent to
// another isolate: with a pool of worker threads per unpack worker, a pull of two layers on two cores
// ran four decode isolates (some 9 MiB each before any work) for at most two jobs at a time. Here the
// jobs of every isolate go to one queue that the same few threads serve; each isolate gets its
// results through its own runner (a thread-safe function), whose queue order it keeps to itself.
//
// A job's buffers are views on the caller's shared slots: the runner holds a reference to each until
// the job's result reached the caller, and an isolate that goes away waits for its jobs that are
// decoding (dropping those that are not), so no thread ever writes to memory that was freed.

#include "fastpull_process_threads.h"

#define MAX_DECODE_THREADS 256

typedef struct dr_runner dr_runner;

typedef struct dr_job {
  struct dr_job* next;
  dr_runner* r;
  double id;
  job_args A;
  double* res;
  napi_ref refs[7];
  int nrefs;
  double cpu_ns;  // -1 without a thread clock
  bool failed;    // out of memory
  fastpull_job_cpus cpus;  // the CPUs of the thread that queued it
} dr_job;

struct dr_runner {
  napi_threadsafe_function tsfn;
  // Under dmu.
  int inflight;    // jobs queued or decoding (not yet handed to the callback)
  bool tearing;    // the isolate goes away: no more jobs
  bool tsfn_gone;  // the callback was finalized
  bool wrap_gone;  // the JavaScript object was finalized
  // On the isolate's thread only.
  int pending;     // jobs submitted and not yet reported
  bool closed;     // decodeRunnerClose: report nothing more, release once nothing is pending
  bool released;   // the callback was released
};

static pthread_mutex_t dmu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t dwork = PTHREAD_COND_INITIALIZER;
static pthread_cond_t ddone = PTHREAD_COND_INITIALIZER;
static dr_job* dhead = NULL;
static dr_job* dtail = NULL;
static int dthreads = 0;

static double thread_cpu_ns(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return -1;
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

// Under dmu: frees the runner once neither its callback, its object nor a job looks at it.
static bool runner_unused(dr_runner* r) { return r->tsfn_gone && r->wrap_gone && r->inflight == 0; }

static void* decode_main(void* arg) {
  (void)arg;
  pthread_mutex_lock(&dmu);
  for (;;) {
    while (dhead == NULL) pthread_cond_wait(&dwork, &dmu);
    dr_job* j = dhead;
    dhead = j->next;
    if (dhead == NULL) dtail = NULL;
    pthread_mutex_unlock(&dmu);

    bool moved = fastpull_cpus_enter(&j->cpus);
    double t0 = thread_cpu_ns();
    j->failed = decode_job(&j->A, j->res) != 0;
    double t1 = thread_cpu_ns();
    fastpull_cpus_leave(moved);
    j->cpu_ns = t0 >= 0 && t1 >= t0 ? t1 - t0 : -1;
    dr_runner* r = j->r;
    // The callback stays open while the job counts as in flight: a close releases it only with
    // nothing pending, and an isolate's teardown waits for its jobs in flight before it closes it.
    if (napi_call_threadsafe_function(r->tsfn, j, napi_tsfn_nonblocking) != napi_ok) free(j);

    pthread_mutex_lock(&dmu);
    r->inflight--;
    if (r->inflight == 0) pthread_cond_broadcast(&ddone);
    if (runner_unused(r)) free(r);
  }
  return NULL;
}

// Under dmu: at least `want` decode threads run; 0, or the error of the first that could not start.
static int ensure_decode_threads(int want) { return fastpull_start_threads(&dthreads, want, MAX_DECODE_THREADS, decode_main, 1024 * 1024); }

// On the isolate's thread, with a job's result (env NULL: the callback is being torn down).
static void runner_call(napi_env env, napi_value on_done, void* context, void* data) {
  dr_job* j = data;
  if (env == NULL) {
    free(j);
    return;
  }
  dr_runner* r = context;
  for (int i = 0; i < j->nrefs; i++) napi_delete_reference(env, j->refs[i]);
  double id = j->id, cpu = j->cpu_ns;
  bool failed = j->failed;
  free(j);
  r->pending--;
  if (!r->closed) {
    napi_value argv[3], undefined;
    napi_create_double(env, id, &argv[0]);
    napi_create_double(env, cpu, &argv[1]);
    napi_get_boolean(env, failed, &argv[2]);
    napi_get_undefined(env, &undefined);
    napi_call_function(env, undefined, on_done, 3, argv, NULL);
  }
  if (r->pending == 0) {
    if (r->closed && !r->released) {
      r->released = true;
      napi_release_threadsafe_function(r->tsfn, napi_tsfn_release);
    } else if (!r->released) {
      napi_unref_threadsafe_function(env, r->tsfn);
    }
  }
}

// The isolate goes away: its queued jobs are dropped, and it waits for those being decoded (they
// write into its memory).
static void runner_teardown(void* arg) {
  dr_runner* r = arg;
  pthread_mutex_lock(&dmu);
  r->tearing = true;
  dr_job** at = &dhead;
  dr_job* last = NULL;
  while (*at != NULL) {
    dr_job* j = *at;
    if (j->r == r) {
      *at = j->next;
      r->inflight--;
      free(j);
    } else {
      last = j;
      at = &j->next;
    }
  }
  dtail = last;
  while (r->inflight > 0) pthread_cond_wait(&ddone, &dmu);
  pthread_mutex_unlock(&dmu);
}

static void runner_tsfn_finalize(napi_env env, void* data, void* hint) {
  (void)hint;
  dr_runner* r = data;
  napi_remove_env_cleanup_hook(env, runner_teardown, r);
  pthread_mutex_lock(&dmu);
  r->tsfn_gone = true;
  bool unused = runner_unused(r);
  pthread_mutex_unlock(&dmu);
  if (unused) free(r);
}

static void runner_wrap_finalize(napi_env env, void* data, void* hint) {
  (void)env;
  (void)hint;
  dr_runner* r = data;
  pthread_mutex_lock(&dmu);
  r->wrap_gone = true;
  bool unused = runner_unused(r);
  pthread_mutex_unlock(&dmu);
  if (unused) free(r);
}

static dr_runner* get_runner(napi_env env, napi_value v) {
  dr_runner* r = NULL;
  if (napi_unwrap(env, v, (void**)&r) != napi_ok || r == NULL) {
    napi_throw_type_error(env, NULL, "not a decode runner");
    return NULL;
  }
  return r;
}

// decodeRunner(onDone, threads): this isolate's way to the process's decode threads, of which at
// least `threads` run. onDone(id, cpuNs, failed) is called on this thread for each job submitted
// through it, in the order jobs end; cpuNs is the job's CPU on its thread's clock (-1 without one),
// failed means out of memory. An idle runner does not keep the event loop alive.
static napi_value js_runner(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value a[2], self, name;
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  napi_valuetype t = napi_undefined;
  if (argc >= 1) napi_typeof(env, a[0], &t);
  double want = argc >= 2 ? get_num(env, a[1]) : 0;
  if (t != napi_function || !(want >= 1)) {
    napi_throw_type_error(env, NULL, "decodeRunner(onDone: a function, threads: >= 1)");
    return NULL;
  }
  pthread_mutex_lock(&dmu);
  int err = ensure_decode_threads(want > MAX_DECODE_THREADS ? MAX_DECODE_THREADS : (int)want);
  pthread_mutex_unlock(&dmu);
  if (err != 0) {
    napi_throw_error(env, NULL, "decodeRunner: cannot start a decode thread");
    return NULL;
  }
  dr_runner* r = calloc(1, sizeof(dr_runner));
  if (r == NULL) {
    napi_throw_error(env, NULL, "decodeRunner: out of memory");
    return NULL;
  }
  napi_create_string_utf8(env, "fastpull decode", NAPI_AUTO_LENGTH, &name);
  if (napi_create_threadsafe_function(env, a[0], NULL, name, 0, 1, r, runner_tsfn_finalize, r, runner_call, &r->tsfn) != napi_ok) {
    free(r);
    napi_throw_error(env, NULL, "decodeRunner: cannot create its callback");
    return NULL;
  }
  napi_unref_threadsafe_function(env, r->tsfn);
  napi_add_env_cleanup_hook(env, runner_teardown, r);
  napi_create_object(env, &self);
  if (napi_wrap(env, self, r, runner_wrap_finalize, NULL, NULL) != napi_ok) {
    // The callback frees the runner once released (its object counts as gone).
    r->wrap_gone = true;
    r->released = true;
    napi_release_threadsafe_function(r->tsfn, napi_tsfn_release);
    napi_throw_error(env, NULL, "decodeRunner: cannot wrap it");
    return NULL;
  }
  return self;
}

// decodeSubmit(runner, id, <the 17 arguments of inflateJob>): queues the job for the decode threads;
// runner's onDone gets `id` once res and members hold its result. The buffers are kept alive until
// then and must not be touched meanwhile.
static napi_value js_submit(napi_env env, napi_callback_info info) {
  size_t argc = 19;
  napi_value a[19];
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  if (argc < 19) {
    napi_throw_type_error(env, NULL, "decodeSubmit: runner, id and the 17 arguments of inflateJob");
    return NULL;
  }
  dr_runner* r = get_runner(env, a[0]);
  if (r == NULL) return NULL;
  if (r->closed) {
    napi_throw_error(env, NULL, "decodeSubmit: the runner is closed");
    return NULL;
  }
  dr_job* j = calloc(1, sizeof(dr_job));
  if (j == NULL) {
    napi_throw_error(env, NULL, "decodeSubmit: out of memory");
    return NULL;
  }
  if (job_from_args(env, a + 2, &j->A, &j->res, "decodeSubmit") != 0) {
    free(j);
    return NULL;
  }
  j->r = r;
  j->id = get_num(env, a[1]);
  fastpull_cpus_capture(&j->cpus);
  static const int kept[7] = {0, 8, 11, 12, 14, 15, 16};
  for (int i = 0; i < 7; i++) {
    napi_valuetype t;
    napi_typeof(env, a[2 + kept[i]], &t);
    if (t == napi_object && napi_create_reference(env, a[2 + kept[i]], 1, &j->refs[j->nrefs]) == napi_ok) j->nrefs++;
  }
  pthread_mutex_lock(&dmu);
  if (r->tearing) {
    pthread_mutex_unlock(&dmu);
    for (int i = 0; i < j->nrefs; i++) napi_delete_reference(env, j->refs[i]);
    free(j);
    napi_throw_error(env, NULL, "decodeSubmit: the thread is ending");
    return NULL;
  }
  if (dtail != NULL) dtail->next = j;
  else dhead = j;
  dtail = j;
  r->inflight++;
  pthread_cond_signal(&dwork);
  pthread_mutex_unlock(&dmu);
  if (r->pending++ == 0) napi_ref_threadsafe_function(env, r->tsfn);
  return NULL;
}

// decodeRunnerClose(runner): no more jobs and no more reports; the jobs still decoding finish (into
// buffers the runner keeps alive), then the runner lets go of its callback.
static napi_value js_runner_close(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value a[1];
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  dr_runner* r = argc >= 1 ? get_runner(env, a[0]) : NULL;
  if (r == NULL) {
    if (argc < 1) napi_throw_type_error(env, NULL, "decodeRunnerClose(runner)");
    return NULL;
  }
  r->closed = true;
  if (r->pending == 0 && !r->released) {
    r->released = true;
    napi_release_threadsafe_function(r->tsfn, napi_tsfn_release);
  }
  return NULL;
}

// decodeThreads() -> the decode threads running in the process.
static napi_value js_threads(napi_env env, napi_callback_info info) {
  (void)info;
  pthread_mutex_lock(&dmu);
  int n = dthreads;
  pthread_mutex_unlock(&dmu);
  napi_value out;
  napi_create_int32(env, n, &out);
  return out;
}
