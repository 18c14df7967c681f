// gunzip through ISA-L's isal_inflate, in process (see src/unpack/decompress/isal.ts for the stream around it).
//
// Its own addon, linked against the system's libisal, so that a machine without libisal still
// builds the others (binding.gyp builds this target only when native/isal-probe.mjs finds it).
//
// One inflater decodes a gzip stream of any number of members, in one of two ways:
// - inflateSync: one stretch on the calling thread, from a span of input into a span of output, until
//   the input is used up, the output is full, or the data is bad; create()'s Int32Array says how far.
// - streaming, on the inflater's own decode thread: the JS thread queues spans of input (input()) and
//   of output (output()), up to MAX_SPANS each, and end() after the last input. The decode thread goes
//   from span to span without waiting for the JS thread, and records what it did (bytes produced into
//   the head output span, input used, whether the span is closed, the end, an error); the JS thread
//   is told that records wait (one notification until it takes them) and takes them all in one call
//   (take()). A stream whose thread had to hand each stretch back before the next one spent about a
//   third of a millisecond per round trip on a loaded 2-core VM: 0.35 s of 1.9 s on a 512 MiB
//   fp16-like layer, while the decoding itself took 1.5 s.
// Its own thread, not libuv's pool: on the pool successive calls land on different threads, and kept
// on one thread the same calls took 2-5% less CPU and 7-9% less wall per GiB (bench:decoders). The
// thread starts with the first span and ends with close(), the object's collection, or the
// environment's teardown, each after the stretch in progress returns.
//
// cpuNs() is the CPU the decoding took, on the clock of the thread that ran it (CLOCK_THREAD_CPUTIME_ID):
// the decode thread's whole clock, wake-ups included, brought up to date after each stretch and when
// the thread ends; a stretch on the calling thread counts its own time. Exact, at a clock read or two
// per stretch.
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

// Where the decoder stands, as the result reports it (src/unpack/decompress/isal.ts has the same numbers).
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

// Queues of the streaming decode (see the top of this file). Input spans are released in order as
// the decoder uses them up; output spans are filled in order; each record says what one stretch of
// decoding did (src/unpack/decompress/isal.ts reads them).
#define MAX_SPANS 8
#define MAX_RECORDS (2 * MAX_SPANS + 2)

typedef struct {
  uint8_t* p;
  uint32_t len;
  uint32_t used;
} span;

// A record: bytes written into the head output span since the last record (the span goes on after
// them unless `done`), input bytes used since the last record, and the decoder's state after.
typedef struct {
  double produced, consumed;
  int32_t error, phase, members;
  bool done, end;
} record;

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
  // The decode thread and everything below it, under mu. `quit` ends the thread.
  pthread_t thread;
  bool thread_running;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool quit;
  span in[MAX_SPANS], out[MAX_SPANS];
  int in_head, in_n, out_head, out_n;
  // No more input will come; the decoder ran into an error; the end was recorded.
  bool ended, failed, end_recorded;
  // The last stretch filled its output span: the decoder may hold more output without more input.
  bool full;
  record rec[MAX_RECORDS];
  int rec_head, rec_n;
  // Produced and consumed since the last record closed.
  double produced, consumed;
  // A notification is on its way to the JS thread (cleared when it takes the records).
  bool notified;
  // Whether the threadsafe function keeps the JS thread's loop alive now.
  bool refd;
  // CPU of the decoding so far in ns, under mu: every decode thread's clock, plus the sync calls'.
  double cpu_ns;
  // How the decode thread tells the JS thread that records wait; NULL once released.
  napi_threadsafe_function tsfn;
  napi_env env;
  bool hook_ran;
} inflater;

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

// Decodes from `in` into `out` as far as it goes: until the input is used up, the output is full, or
// the data is bad. Returns 0 or an error; *consumed and *produced say how far it went.
static int run(inflater* z, uint8_t* in, uint32_t in_len, uint32_t* consumed, uint8_t* out, uint32_t out_len, uint32_t* produced) {
  struct inflate_state* st = &z->st;
  st->next_in = in;
  st->avail_in = in_len;
  st->next_out = out;
  st->avail_out = out_len;
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
  *consumed = in_len - st->avail_in;
  *produced = out_len - st->avail_out;
  return err;
}

// Closes a record of what was consumed, and (unless `input_only`) produced, since the last one (mu
// held). A record not yet taken that left its span open is extended instead.
static void add_record(inflater* z, bool done, int32_t error, bool end, bool input_only) {
  double produced = input_only ? 0 : z->produced;
  record* last = z->rec_n > 0 ? &z->rec[(z->rec_head + z->rec_n - 1) % MAX_RECORDS] : NULL;
  record* r;
  if (last && !last->done && !last->end && last->error == 0) {
    r = last;
    r->produced += produced;
    r->consumed += z->consumed;
  } else {
    r = &z->rec[(z->rec_head + z->rec_n) % MAX_RECORDS];
    z->rec_n++;
    r->produced = produced;
    r->consumed = z->consumed;
  }
  r->done = done;
  r->end = end;
  r->error = error;
  r->phase = z->phase;
  r->members = z->members & 0x7fffffff;
  z->produced -= produced;
  z->consumed = 0;
  if (!z->notified && z->tsfn) {
    z->notified = true;
    napi_call_threadsafe_function(z->tsfn, NULL, napi_tsfn_nonblocking);
  }
}

// Ends the decode thread, after the stretch it decodes, if any.
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

// Forgets every span and record (the thread is stopped): the stream is over.
static void clear_stream(inflater* z) {
  z->in_head = z->in_n = z->out_head = z->out_n = z->rec_head = z->rec_n = 0;
  z->ended = z->failed = z->end_recorded = z->full = z->notified = false;
  z->produced = z->consumed = 0;
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

// On the JS thread, when records wait: calls the stream's notify function (env is NULL when the
// function is being torn down: then nothing can be called).
static void call_notify(napi_env env, napi_value js_cb, void* context, void* data) {
  (void)context;
  (void)data;
  if (env == NULL || js_cb == NULL) return;
  napi_value global;
  napi_get_global(env, &global);
  napi_call_function(env, global, js_cb, 0, NULL, NULL);
}

// create(result: Int32Array(5)[, notify: () => void]) -> an inflater object at the start of a gzip
// stream. `notify` is called on this thread when records of the decode thread wait (see take()).
static napi_value js_create(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2], self;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  uint8_t* res;
  size_t len;
  if (argc < 1 || get_bytes(env, argv[0], &res, &len) || len < R_LEN * sizeof(int32_t)) {
    napi_throw_type_error(env, NULL, "create(result: Int32Array of 5[, notify])");
    return NULL;
  }
  napi_value notify = NULL;
  if (argc >= 2) {
    napi_valuetype t;
    napi_typeof(env, argv[1], &t);
    if (t == napi_function) notify = argv[1];
    else if (t != napi_undefined) {
      napi_throw_type_error(env, NULL, "create(result, notify): notify must be a function");
      return NULL;
    }
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
  if (napi_create_threadsafe_function(env, notify, NULL, name, 0, 1, NULL, NULL, z, call_notify, &z->tsfn) != napi_ok) {
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

// The inflater `v` wraps; NULL (with a TypeError saying `usage`) when it is none.
static inflater* unwrap_inflater(napi_env env, napi_value v, const char* usage) {
  inflater* z = NULL;
  if (napi_unwrap(env, v, (void**)&z) != napi_ok) {
    napi_throw_type_error(env, NULL, usage);
    return NULL;
  }
  return z;
}

// The inflater that is a call's only argument (see unwrap_inflater).
static inflater* only_inflater(napi_env env, napi_callback_info info, const char* usage) {
  size_t argc = 1;
  napi_value a[1];
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  if (argc < 1) {
    napi_throw_type_error(env, NULL, usage);
    return NULL;
  }
  return unwrap_inflater(env, a[0], usage);
}

// Reads the span (bytes, offset, length) at a[0..2] into *p and *n; false (with a TypeError saying
// `usage`) when they are not what they must be.
static bool get_span(napi_env env, const napi_value* a, const char* usage, uint8_t** p, uint32_t* n) {
  uint8_t* data;
  size_t len;
  uint32_t off;
  if (get_bytes(env, a[0], &data, &len) || napi_get_value_uint32(env, a[1], &off) != napi_ok || napi_get_value_uint32(env, a[2], n) != napi_ok ||
      (uint64_t)off + *n > len) {
    napi_throw_type_error(env, NULL, usage);
    return false;
  }
  *p = data + off;
  return true;
}

// inflateSync(z, input, inOffset, inLength, output, outOffset, outLength): one stretch on this
// thread; fills in z's result. Not while the stream decodes on its thread.
static napi_value js_inflate_sync(napi_env env, napi_callback_info info) {
  size_t argc = 7;
  napi_value a[7];
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  static const char usage[] = "inflateSync(inflater, input, inOffset, inLength, output, outOffset, outLength)";
  uint8_t *in, *out;
  uint32_t in_n, out_n;
  if (argc < 7) {
    napi_throw_type_error(env, NULL, usage);
    return NULL;
  }
  inflater* z = unwrap_inflater(env, a[0], usage);
  if (!z || !get_span(env, a + 1, usage, &in, &in_n) || !get_span(env, a + 4, usage, &out, &out_n)) return NULL;
  if (z->thread_running) {
    napi_throw_error(env, NULL, "isal: the inflater decodes on its own thread");
    return NULL;
  }
  double t0 = thread_cpu_ns();
  uint32_t consumed, produced;
  int err = run(z, in, in_n, &consumed, out, out_n, &produced);
  double t1 = thread_cpu_ns();
  if (t0 >= 0 && t1 >= t0) {
    pthread_mutex_lock(&z->mu);
    z->cpu_ns += t1 - t0;
    pthread_mutex_unlock(&z->mu);
  }
  int32_t* res = z->result;
  res[R_ERROR] = err;
  res[R_CONSUMED] = (int32_t)consumed;
  res[R_PRODUCED] = (int32_t)produced;
  res[R_PHASE] = z->phase;
  res[R_MEMBERS] = z->members & 0x7fffffff;
  return NULL;
}

// Adds the decode thread's CPU from *last to now to z->cpu_ns (mu held).
static void add_cpu(inflater* z, double* last, double now) {
  if (*last >= 0 && now >= *last) z->cpu_ns += now - *last;
  *last = now;
}

// Whether the decode thread has something to do (mu held): decode into the head output span, or
// record the end.
static bool can_work(inflater* z) {
  if (z->failed || z->end_recorded || z->rec_n == MAX_RECORDS) return false;
  if (z->in_n == 0 && !z->full) return z->ended;  // the end is all that is left to record
  return z->out_n > 0;
}

static void* thread_main(void* data) {
  inflater* z = data;
  pthread_mutex_lock(&z->mu);
  // This thread's clock since `last` goes into cpu_ns after each stretch, and when the thread ends.
  double last = thread_cpu_ns();
  for (;;) {
    while (!z->quit && !can_work(z)) pthread_cond_wait(&z->cv, &z->mu);
    if (z->quit) break;
    if (z->in_n == 0 && !z->full) {
      z->end_recorded = true;
      add_record(z, false, 0, true, false);
      continue;
    }
    span* in = z->in_n > 0 ? &z->in[z->in_head] : NULL;
    span* out = &z->out[z->out_head];
    uint8_t* ip = in ? in->p + in->used : NULL;
    uint32_t in_left = in ? in->len - in->used : 0;
    uint8_t* op = out->p + out->used;
    uint32_t out_left = out->len - out->used;
    pthread_mutex_unlock(&z->mu);
    uint32_t consumed, produced;
    int err = run(z, ip, in_left, &consumed, op, out_left, &produced);
    double now = thread_cpu_ns();
    pthread_mutex_lock(&z->mu);
    add_cpu(z, &last, now);
    // The spans the JS thread queued meanwhile went after these: the heads are the same.
    z->produced += produced;
    z->consumed += consumed;
    out->used += produced;
    if (in) in->used += consumed;
    if (err) {
      z->failed = true;
      add_record(z, false, err, false, false);
      continue;
    }
    z->full = out->used == out->len;
    bool used_up = in && in->used == in->len;
    if (used_up) {
      z->in_head = (z->in_head + 1) % MAX_SPANS;
      z->in_n--;
    }
    if (z->full) {
      z->out_head = (z->out_head + 1) % MAX_SPANS;
      z->out_n--;
      add_record(z, true, 0, false, false);
    } else if (used_up) {
      // Said at once, so that the next input comes while this thread goes on. The output span is
      // handed over full (or at the end): pieces of a fixed size downstream, not one cut per input
      // chunk. Holding it cannot stall the stream: input does not wait for output.
      add_record(z, false, 0, false, true);
    } else if (in_left > 0 && consumed == 0 && produced == 0) {
      // Neither end reached and nothing moved: never spin.
      z->failed = true;
      add_record(z, false, ISAL_INVALID_BLOCK, false, false);
    }
  }
  add_cpu(z, &last, thread_cpu_ns());
  pthread_mutex_unlock(&z->mu);
  return NULL;
}

// Keeps the JS thread's loop alive while the decode thread has work or records wait (mu held).
static void update_ref(napi_env env, inflater* z) {
  if (!z->tsfn) return;
  bool want = z->rec_n > 0 || can_work(z);
  if (want == z->refd) return;
  if (want) napi_ref_threadsafe_function(env, z->tsfn);
  else napi_unref_threadsafe_function(env, z->tsfn);
  z->refd = want;
}

// Starts z's decode thread unless it runs; false (with an exception thrown) when z was closed or
// the thread cannot start.
static bool ensure_thread(napi_env env, inflater* z) {
  if (!z->tsfn) {
    napi_throw_error(env, NULL, "isal: the inflater was closed, or its environment is shutting down");
    return false;
  }
  if (z->thread_running) return true;
  if (pthread_create(&z->thread, NULL, thread_main, z) != 0) {
    napi_throw_error(env, NULL, "isal: cannot start the decode thread");
    return false;
  }
  z->thread_running = true;
  return true;
}

// Queues a span for the decode thread (input when `input`), starting the thread first if need be.
static napi_value queue_span(napi_env env, napi_callback_info info, bool input) {
  size_t argc = 4;
  napi_value a[4];
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  const char* usage = input ? "input(inflater, bytes, offset, length)" : "output(inflater, bytes, offset, length)";
  uint8_t* p;
  uint32_t n;
  if (argc < 4) {
    napi_throw_type_error(env, NULL, usage);
    return NULL;
  }
  inflater* z = unwrap_inflater(env, a[0], usage);
  if (!z || !get_span(env, a + 1, usage, &p, &n) || n == 0) return NULL;
  if (!ensure_thread(env, z)) return NULL;
  pthread_mutex_lock(&z->mu);
  int* count = input ? &z->in_n : &z->out_n;
  if (*count == MAX_SPANS || (input && z->ended)) {
    pthread_mutex_unlock(&z->mu);
    napi_throw_error(env, NULL, input && z->ended ? "isal: input after the end" : "isal: too many spans queued");
    return NULL;
  }
  span* q = input ? z->in : z->out;
  int head = input ? z->in_head : z->out_head;
  q[(head + *count) % MAX_SPANS] = (span){p, n, 0};
  (*count)++;
  pthread_cond_signal(&z->cv);
  update_ref(env, z);
  pthread_mutex_unlock(&z->mu);
  return NULL;
}

// input(z, bytes, offset, length): compressed bytes for the decode thread, after those queued. The
// caller keeps `bytes` alive and unchanged until records show it used up.
static napi_value js_input(napi_env env, napi_callback_info info) {
  return queue_span(env, info, true);
}

// output(z, bytes, offset, length): room for decoded bytes, filled after the spans queued before. The
// caller keeps `bytes` alive until a record closes the span, and reads only what records say.
static napi_value js_output(napi_env env, napi_callback_info info) {
  return queue_span(env, info, false);
}

// end(z): no more input; a record with `end` set follows once the decoder has given everything.
static napi_value js_end(napi_env env, napi_callback_info info) {
  inflater* z = only_inflater(env, info, "end(inflater)");
  if (!z) return NULL;
  if (!ensure_thread(env, z)) return NULL;
  pthread_mutex_lock(&z->mu);
  z->ended = true;
  pthread_cond_signal(&z->cv);
  update_ref(env, z);
  pthread_mutex_unlock(&z->mu);
  return NULL;
}

// take(z, records: Float64Array) -> n: moves up to length / 7 records out, 7 numbers each:
// produced, consumed, done (1: the head output span is closed), end (1: everything was decoded),
// error (0 or the decoder's), phase, members.
static napi_value js_take(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value a[2], out;
  inflater* z = NULL;
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  bool is = false;
  napi_typedarray_type type;
  size_t len = 0;
  void* p = NULL;
  napi_value ab;
  size_t off;
  static const char usage[] = "take(inflater, records: Float64Array)";
  if (argc < 2 || !(z = unwrap_inflater(env, a[0], usage))) {
    if (argc < 2) napi_throw_type_error(env, NULL, usage);
    return NULL;
  }
  if (napi_is_typedarray(env, a[1], &is) != napi_ok || !is || napi_get_typedarray_info(env, a[1], &type, &len, &p, &ab, &off) != napi_ok ||
      type != napi_float64_array) {
    napi_throw_type_error(env, NULL, usage);
    return NULL;
  }
  double* f = p;
  uint32_t n = 0;
  pthread_mutex_lock(&z->mu);
  while (z->rec_n > 0 && (n + 1) * 7 <= len) {
    record* r = &z->rec[z->rec_head];
    double* o = f + n * 7;
    o[0] = r->produced;
    o[1] = r->consumed;
    o[2] = r->done;
    o[3] = r->end;
    o[4] = r->error;
    o[5] = r->phase;
    o[6] = r->members;
    z->rec_head = (z->rec_head + 1) % MAX_RECORDS;
    z->rec_n--;
    n++;
  }
  if (z->rec_n == 0) z->notified = false;
  pthread_cond_signal(&z->cv);  // room for records again
  update_ref(env, z);
  pthread_mutex_unlock(&z->mu);
  napi_create_uint32(env, n, &out);
  return out;
}

// close(z): ends the decode thread (after the stretch it decodes, which it finishes first) and forgets
// the stream's spans: nothing writes into them after it returns. The stream is over: input(),
// output() and end() throw after it (inflateSync still runs).
static napi_value js_close(napi_env env, napi_callback_info info) {
  inflater* z = only_inflater(env, info, "close(inflater)");
  if (!z) return NULL;
  stop_thread(z);
  clear_stream(z);
  // Lets go of the notify function (which holds the stream); a notification already queued still comes.
  if (z->tsfn) napi_release_threadsafe_function(z->tsfn, napi_tsfn_release);
  z->tsfn = NULL;
  return NULL;
}

// cpuNs(z): CPU of z's decoding so far, in ns (see the top of this file).
static napi_value js_cpu_ns(napi_env env, napi_callback_info info) {
  napi_value out;
  inflater* z = only_inflater(env, info, "cpuNs(inflater)");
  if (!z) return NULL;
  pthread_mutex_lock(&z->mu);
  double ns = z->cpu_ns;
  pthread_mutex_unlock(&z->mu);
  napi_create_double(env, ns, &out);
  return out;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"create", NULL, js_create, NULL, NULL, NULL, napi_default, NULL},
      {"input", NULL, js_input, NULL, NULL, NULL, napi_default, NULL},
      {"output", NULL, js_output, NULL, NULL, NULL, napi_default, NULL},
      {"end", NULL, js_end, NULL, NULL, NULL, napi_default, NULL},
      {"take", NULL, js_take, NULL, NULL, NULL, napi_default, NULL},
      {"inflateSync", NULL, js_inflate_sync, NULL, NULL, NULL, napi_default, NULL},
      {"close", NULL, js_close, NULL, NULL, NULL, napi_default, NULL},
      {"cpuNs", NULL, js_cpu_ns, NULL, NULL, NULL, napi_default, NULL},
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
