// gunzip through ISA-L's isal_inflate, in process (see src/unpack/isal.ts for the stream around it).
//
// Its own addon, linked against the system's libisal, so that a machine without libisal still
// builds the others (binding.gyp builds this target only when native/isal-probe.mjs finds it).
//
// One inflater decodes a gzip stream of any number of members. Each call takes a span of input and
// a span of output and runs until the input is used up, the output is full, or the data is bad;
// create() hands back a small Int32Array-backed result the call fills in. A call runs either on the
// calling thread (inflateSync) or on the inflater's own decode thread (inflate, with a callback), so
// a worker thread can hash and extract one chunk while the next is being decoded, as node:zlib does.
// Its own thread, not libuv's pool: on the pool successive calls land on different threads, and
// kept on one thread the same calls took 2-5% less CPU and 7-9% less wall per GiB (bench:decoders). The thread starts with the first call and ends with close(), the
// object's collection, or the environment's teardown, each after the call in progress returns.
//
// cpuNs() is the CPU the decoding took, on the clock of the thread that ran it (CLOCK_THREAD_CPUTIME_ID):
// the decode thread's whole clock, wake-ups included, brought up to date after each call and when the
// thread ends; a call on the calling thread counts its own time. Exact, at a clock read or two per call.
//
// Between members the rules are node:zlib's: a member may be followed by another member, by the
// end, or by a zero byte, after which everything is ignored (padding); anything else must parse as
// a gzip header. Header flags zlib rejects (reserved bits) are rejected here too; CRC-32 and ISIZE
// of each member are checked by isal_inflate itself (crc_flag ISAL_GZIP).
#include <isa-l/igzip_lib.h>
#include <node_api.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// Where the decoder stands, as the result reports it (src/unpack/isal.ts has the same numbers).
enum phase { PH_HEADER = 0, PH_BODY = 1, PH_BETWEEN = 2, PH_PADDING = 3 };

// An error of our own: a gzip header with a reserved flag bit set (zlib: "unknown header flags set").
#define FP_RESERVED_FLAGS (-100)
#define RESERVED_FLAG_BITS 0xe0

// Result slots: [0] error (0, an ISAL_* error, or FP_*), [1] bytes of input used, [2] bytes of
// output written, [3] phase after the call, [4] members finished so far (low 31 bits).
#define R_ERROR 0
#define R_CONSUMED 1
#define R_PRODUCED 2
#define R_PHASE 3
#define R_MEMBERS 4
#define R_LEN 5

typedef struct {
  struct inflate_state st;
  struct isal_gzip_header hdr;
  int phase;
  // Bytes of the current member's magic (1f 8b) checked so far: bad ones fail at once, as in zlib,
  // where isal_read_gzip_header would wait for the whole 10-byte header first.
  int magic_seen;
  int32_t members;
  int32_t* result;
  napi_ref result_ref;
  // The call in progress: its spans, and for an async one its callback and references.
  bool busy;
  uint8_t* in;
  uint32_t in_len;
  uint8_t* out;
  uint32_t out_len;
  napi_ref self_ref, cb_ref, in_ref, out_ref;
  // The decode thread: `job` is set by the JS thread and cleared by the decode thread, `quit` ends it.
  pthread_t thread;
  bool thread_running;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool job, quit;
  // CPU of the decoding so far in ns, under mu: every decode thread's clock, plus the sync calls'.
  double cpu_ns;
  // How the decode thread hands a finished call back to the JS thread; NULL once released.
  napi_threadsafe_function tsfn;
  napi_env env;
  bool hook_ran;
} inflater;

static void call_done(napi_env env, napi_value js_cb, void* context, void* data);

// CPU time of the calling thread in ns (-1 where the clock is missing).
static double thread_cpu_ns(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return -1;
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void start_member(inflater* z) {
  isal_inflate_reset(&z->st);
  z->st.crc_flag = ISAL_GZIP;
  isal_gzip_header_init(&z->hdr);
  z->phase = PH_HEADER;
  z->magic_seen = 0;
}

// Decodes z->in into z->out as far as it goes; fills in z->result.
static void run(inflater* z) {
  struct inflate_state* st = &z->st;
  st->next_in = z->in;
  st->avail_in = z->in_len;
  st->next_out = z->out;
  st->avail_out = z->out_len;
  int err = 0;
  for (;;) {
    if (z->phase == PH_BETWEEN) {
      if (st->avail_in == 0) break;
      if (st->next_in[0] == 0) {
        z->phase = PH_PADDING;
      } else {
        start_member(z);
      }
    }
    if (z->phase == PH_PADDING) {
      st->next_in += st->avail_in;
      st->avail_in = 0;
      break;
    }
    if (z->phase == PH_HEADER) {
      static const uint8_t magic[2] = {0x1f, 0x8b};
      for (uint32_t i = 0; z->magic_seen < 2 && i < st->avail_in; i++, z->magic_seen++) {
        if (st->next_in[i] != magic[z->magic_seen]) err = ISAL_INVALID_WRAPPER;
      }
      if (err) break;
      int r = isal_read_gzip_header(st, &z->hdr);
      if (r < 0) {
        err = r;
        break;
      }
      if (r > 0) break;  // ISAL_END_INPUT: the header goes on in the next span
      if (z->hdr.flags & RESERVED_FLAG_BITS) {
        err = FP_RESERVED_FLAGS;
        break;
      }
      z->phase = PH_BODY;
    }
    uint32_t in_before = st->avail_in, out_before = st->avail_out;
    int r = isal_inflate(st);
    if (r < 0) {
      err = r;
      break;
    }
    if (st->block_state == ISAL_BLOCK_FINISH) {
      z->members++;
      z->phase = PH_BETWEEN;
      continue;
    }
    if (st->avail_out == 0 || st->avail_in == 0) break;
    // Neither end reached and nothing moved: never spin (isal_inflate always moves one of them).
    if (st->avail_in == in_before && st->avail_out == out_before) break;
  }
  int32_t* res = z->result;
  res[R_ERROR] = err;
  res[R_CONSUMED] = (int32_t)(z->in_len - st->avail_in);
  res[R_PRODUCED] = (int32_t)(z->out_len - st->avail_out);
  res[R_PHASE] = z->phase;
  res[R_MEMBERS] = z->members & 0x7fffffff;
}

// Ends the decode thread, after the call it runs, if any.
static void stop_thread(inflater* z) {
  if (!z->thread_running) return;
  pthread_mutex_lock(&z->mu);
  z->quit = true;
  pthread_cond_signal(&z->cv);
  pthread_mutex_unlock(&z->mu);
  pthread_join(z->thread, NULL);
  z->thread_running = false;
  z->quit = false;
}

// The environment goes away (a worker thread ends): the thread must not write into its buffers after.
static void env_cleanup(void* data) {
  inflater* z = data;
  z->hook_ran = true;
  stop_thread(z);
  if (z->tsfn) napi_release_threadsafe_function(z->tsfn, napi_tsfn_abort);
  z->tsfn = NULL;
}

static void finalize(napi_env env, void* data, void* hint) {
  (void)hint;
  inflater* z = data;
  stop_thread(z);
  if (!z->hook_ran) napi_remove_env_cleanup_hook(env, env_cleanup, z);
  if (z->tsfn) napi_release_threadsafe_function(z->tsfn, napi_tsfn_release);
  if (z->result_ref) napi_delete_reference(env, z->result_ref);
  pthread_cond_destroy(&z->cv);
  pthread_mutex_destroy(&z->mu);
  free(z);
}

static int get_bytes(napi_env env, napi_value v, uint8_t** data, size_t* len) {
  bool is;
  if (napi_is_typedarray(env, v, &is) != napi_ok || !is) return -1;
  napi_typedarray_type type;
  napi_value ab;
  size_t off;
  void* p;
  if (napi_get_typedarray_info(env, v, &type, len, &p, &ab, &off) != napi_ok) return -1;
  if (type != napi_uint8_array && type != napi_int32_array) return -1;
  if (type == napi_int32_array) *len *= 4;
  *data = p;
  return 0;
}

// create(result: Int32Array(5)) -> an inflater object at the start of a gzip stream.
static napi_value js_create(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], self;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  uint8_t* res;
  size_t len;
  if (argc < 1 || get_bytes(env, argv[0], &res, &len) || len < R_LEN * sizeof(int32_t)) {
    napi_throw_type_error(env, NULL, "create(result: Int32Array of 5)");
    return NULL;
  }
  inflater* z = calloc(1, sizeof *z);
  if (!z) {
    napi_throw_error(env, "ENOMEM", "isal: cannot allocate an inflater");
    return NULL;
  }
  isal_inflate_init(&z->st);
  start_member(z);
  z->result = (int32_t*)res;
  pthread_mutex_init(&z->mu, NULL);
  pthread_cond_init(&z->cv, NULL);
  napi_value name;
  napi_create_string_utf8(env, "fastpull:isal-inflate", NAPI_AUTO_LENGTH, &name);
  if (napi_create_threadsafe_function(env, NULL, NULL, name, 0, 1, NULL, NULL, z, call_done, &z->tsfn) != napi_ok) {
    pthread_cond_destroy(&z->cv);
    pthread_mutex_destroy(&z->mu);
    free(z);
    napi_throw_error(env, NULL, "isal: cannot create the decode thread's callback");
    return NULL;
  }
  napi_unref_threadsafe_function(env, z->tsfn);
  napi_add_env_cleanup_hook(env, env_cleanup, z);
  napi_create_reference(env, argv[0], 1, &z->result_ref);
  napi_create_object(env, &self);
  if (napi_wrap(env, self, z, finalize, NULL, NULL) != napi_ok) {
    finalize(env, z, NULL);
    napi_throw_error(env, NULL, "isal: cannot wrap an inflater");
    return NULL;
  }
  return self;
}

// Reads (z, input, inOffset, inLength, output, outOffset, outLength) into z; throws and returns NULL
// when they are not what they must be, or when z is busy.
static inflater* take_args(napi_env env, napi_value* a, size_t argc) {
  inflater* z = NULL;
  uint8_t *in, *out;
  size_t in_len, out_len;
  uint32_t in_off, in_n, out_off, out_n;
  if (argc < 7 || napi_unwrap(env, a[0], (void**)&z) != napi_ok || get_bytes(env, a[1], &in, &in_len) ||
      napi_get_value_uint32(env, a[2], &in_off) != napi_ok || napi_get_value_uint32(env, a[3], &in_n) != napi_ok ||
      get_bytes(env, a[4], &out, &out_len) || napi_get_value_uint32(env, a[5], &out_off) != napi_ok ||
      napi_get_value_uint32(env, a[6], &out_n) != napi_ok || (uint64_t)in_off + in_n > in_len ||
      (uint64_t)out_off + out_n > out_len) {
    napi_throw_type_error(env, NULL, "inflate(inflater, input, inOffset, inLength, output, outOffset, outLength[, callback])");
    return NULL;
  }
  if (z->busy) {
    napi_throw_error(env, NULL, "isal: inflater already has a call in progress");
    return NULL;
  }
  z->in = in + in_off;
  z->in_len = in_n;
  z->out = out + out_off;
  z->out_len = out_n;
  return z;
}

static napi_value js_inflate_sync(napi_env env, napi_callback_info info) {
  size_t argc = 7;
  napi_value a[7];
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  inflater* z = take_args(env, a, argc);
  if (!z) return NULL;
  double t0 = thread_cpu_ns();
  run(z);
  double t1 = thread_cpu_ns();
  if (t0 >= 0 && t1 >= t0) {
    pthread_mutex_lock(&z->mu);
    z->cpu_ns += t1 - t0;
    pthread_mutex_unlock(&z->mu);
  }
  return NULL;
}

// Adds the decode thread's CPU from *last to now to z->cpu_ns (mu held).
static void add_cpu(inflater* z, double* last, double now) {
  if (*last >= 0 && now >= *last) z->cpu_ns += now - *last;
  *last = now;
}

static void* thread_main(void* data) {
  inflater* z = data;
  pthread_mutex_lock(&z->mu);
  // This thread's clock since `last` goes into cpu_ns after each call, and when the thread ends.
  double last = thread_cpu_ns();
  for (;;) {
    while (!z->job && !z->quit) pthread_cond_wait(&z->cv, &z->mu);
    if (!z->job) break;  // quit, and nothing left to run
    pthread_mutex_unlock(&z->mu);
    run(z);
    double now = thread_cpu_ns();
    pthread_mutex_lock(&z->mu);
    add_cpu(z, &last, now);
    z->job = false;
    // Queued while the lock is held, so that close() never returns before the call is handed back.
    if (z->tsfn) napi_call_threadsafe_function(z->tsfn, NULL, napi_tsfn_nonblocking);
  }
  add_cpu(z, &last, thread_cpu_ns());
  pthread_mutex_unlock(&z->mu);
  return NULL;
}

// On the JS thread, after a call on the decode thread returned (env is NULL when the function is
// being torn down: then nothing can be called).
static void call_done(napi_env env, napi_value js_cb, void* context, void* data) {
  (void)js_cb;
  (void)data;
  inflater* z = context;
  if (env == NULL || !z->busy) return;
  napi_value cb = NULL, global, arg;
  napi_get_reference_value(env, z->cb_ref, &cb);
  napi_delete_reference(env, z->cb_ref);
  napi_delete_reference(env, z->in_ref);
  napi_delete_reference(env, z->out_ref);
  z->busy = false;
  if (z->tsfn) napi_unref_threadsafe_function(env, z->tsfn);  // idle: no reason to keep the loop alive
  napi_ref self = z->self_ref;
  z->self_ref = NULL;
  napi_get_boolean(env, true, &arg);
  if (cb) {
    napi_get_global(env, &global);
    napi_call_function(env, global, cb, 1, &arg, NULL);
  }
  // Released last: until here the inflater object, and with it z, must not be collected.
  napi_delete_reference(env, self);
}

static napi_value js_inflate(napi_env env, napi_callback_info info) {
  size_t argc = 8;
  napi_value a[8];
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  napi_valuetype t = napi_undefined;
  if (argc >= 8) napi_typeof(env, a[7], &t);
  if (t != napi_function) {
    napi_throw_type_error(env, NULL, "inflate(..., callback): callback must be a function");
    return NULL;
  }
  inflater* z = take_args(env, a, argc);
  if (!z) return NULL;
  if (!z->tsfn) {
    napi_throw_error(env, NULL, "isal: the inflater's environment is shutting down");
    return NULL;
  }
  if (!z->thread_running) {
    if (pthread_create(&z->thread, NULL, thread_main, z) != 0) {
      napi_throw_error(env, NULL, "isal: cannot start the decode thread");
      return NULL;
    }
    z->thread_running = true;
  }
  napi_create_reference(env, a[0], 1, &z->self_ref);
  napi_create_reference(env, a[1], 1, &z->in_ref);
  napi_create_reference(env, a[4], 1, &z->out_ref);
  napi_create_reference(env, a[7], 1, &z->cb_ref);
  z->busy = true;
  napi_ref_threadsafe_function(env, z->tsfn);  // a call under way keeps the loop alive, as queued work does
  pthread_mutex_lock(&z->mu);
  z->job = true;
  pthread_cond_signal(&z->cv);
  pthread_mutex_unlock(&z->mu);
  return NULL;
}

// close(z): ends the decode thread once the stream is done with it (after the call in progress,
// whose callback still comes). Calls after close() start a new one.
static napi_value js_close(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value a[1];
  inflater* z = NULL;
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  if (argc < 1 || napi_unwrap(env, a[0], (void**)&z) != napi_ok) {
    napi_throw_type_error(env, NULL, "close(inflater)");
    return NULL;
  }
  stop_thread(z);
  return NULL;
}

// cpuNs(z): CPU of z's decoding so far, in ns (see the top of this file).
static napi_value js_cpu_ns(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value a[1], out;
  inflater* z = NULL;
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  if (argc < 1 || napi_unwrap(env, a[0], (void**)&z) != napi_ok) {
    napi_throw_type_error(env, NULL, "cpuNs(inflater)");
    return NULL;
  }
  pthread_mutex_lock(&z->mu);
  double ns = z->cpu_ns;
  pthread_mutex_unlock(&z->mu);
  napi_create_double(env, ns, &out);
  return out;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"create", NULL, js_create, NULL, NULL, NULL, napi_default, NULL},
      {"inflate", NULL, js_inflate, NULL, NULL, NULL, napi_default, NULL},
      {"inflateSync", NULL, js_inflate_sync, NULL, NULL, NULL, napi_default, NULL},
      {"close", NULL, js_close, NULL, NULL, NULL, napi_default, NULL},
      {"cpuNs", NULL, js_cpu_ns, NULL, NULL, NULL, napi_default, NULL},
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
