// Deflate decoding for parallel gunzip (see src/unpack/decompress/pargzip.ts for the design).
//
// One call decodes one job: a span of a gzip stream that starts either at a known decoder state (the
// stream's start, a block boundary, a point inside a block) or at a block boundary found by searching
// from a bit position. When the bytes before the span are unknown, references into the 32 KiB window
// before it cannot be resolved yet: the job then writes 16-bit symbols, where 0-255 is a byte and
// 0x8000 | i stands for byte i of that window (i = 32767 is the byte just before the span). Once the
// last 32 KiB written hold no such marker, no later symbol can produce one, and the job continues
// with plain bytes. The caller resolves markers once the window is known (resolveMarkers).
//
// The decoder accepts exactly what zlib's inflate accepts, with the same rules for code sets
// (complete, except a single code of one bit), header fields, distances and gzip framing, so that a
// parallel decode either equals zlib's output or fails where zlib fails.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <node_api.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fastpull_inflate_core.h"

// ---- N-API ----
static int get_bytes(napi_env env, napi_value v, void** data, size_t* len) {
  napi_typedarray_type type;
  napi_value ab;
  size_t off;
  if (napi_get_typedarray_info(env, v, &type, len, data, &ab, &off) != napi_ok) return -1;
  if (type == napi_uint16_array) *len *= 2;
  else if (type == napi_float64_array) *len *= 8;
  return 0;
}

static double get_num(napi_env env, napi_value v) {
  double d = 0;
  napi_get_value_double(env, v, &d);
  return d;
}

// The 17 arguments of a job (data, dataOffset, final, startKind, startBit, btype, bfinal, left, hdr,
// hdrBit, stopKey, out16, out8, cap, members, res, window) into A and *res; a TypeError thrown and -1
// when they are not what a job takes (`what` names the call).
static int job_from_args(napi_env env, napi_value* a, job_args* A, double** res, const char* what) {
  void *data, *hdr = NULL, *o16, *o8, *members, *resv, *win = NULL;
  size_t dlen, hlen = 0, l16, l8, lm, lres, wlen = 0;
  napi_valuetype ht, wt;
  napi_typeof(env, a[8], &ht);
  napi_typeof(env, a[16], &wt);
  if (get_bytes(env, a[0], &data, &dlen) || get_bytes(env, a[11], &o16, &l16) || get_bytes(env, a[12], &o8, &l8) ||
      get_bytes(env, a[14], &members, &lm) || get_bytes(env, a[15], &resv, &lres) ||
      (ht != napi_null && ht != napi_undefined && get_bytes(env, a[8], &hdr, &hlen)) ||
      (wt != napi_null && wt != napi_undefined && get_bytes(env, a[16], &win, &wlen)) || lres < O_RESULT_LEN * 8 ||
      l8 < WIN + 300) {
    char msg[80];
    snprintf(msg, sizeof msg, "%s: bad buffers", what);
    napi_throw_type_error(env, NULL, msg);
    return -1;
  }
  bool fin;
  napi_get_value_bool(env, a[2], &fin);
  *A = (job_args){
      .data = data, .dlen = dlen, .data_offset = (uint64_t)get_num(env, a[1]), .final = fin,
      .start_kind = (int)get_num(env, a[3]), .start_bit = (uint64_t)get_num(env, a[4]),
      .btype = (int)get_num(env, a[5]), .bfinal = (int)get_num(env, a[6]), .left = (uint32_t)get_num(env, a[7]),
      .hdr = hdr, .hlen = hlen, .hdr_bit = (uint64_t)get_num(env, a[9]), .stop_key = get_num(env, a[10]),
      .o16 = o16, .l16 = l16, .o8 = o8, .l8 = l8, .cap = (size_t)get_num(env, a[13]), .members = members, .lm = lm,
      .window = win, .wlen = wlen,
  };
  // An empty window is a known one (a member that just began), not a missing one.
  static const uint8_t no_bytes[1];
  if (wt != napi_null && wt != napi_undefined && A->window == NULL) A->window = no_bytes;
  // The members array holds 3 numbers per member end and, after them, room for the segment CRCs.
  // (4 * M + 1 numbers: M member ends, then M + 1 segment CRCs.)
  size_t slots = lm / 8, m = slots > 0 ? (slots - 1) / 4 : 0;
  A->lm = 24 * m;
  A->crcs = (double*)members + 3 * m;
  A->ncrcs = slots - 3 * m;
  *res = resv;
  return 0;
}

// inflateJob(data, dataOffset, final, startKind, startBit, btype, bfinal, left, hdr, hdrBit,
//            stopKey, out16, out8, cap, members, res, window): decodes one job on the calling
// thread; results go to res.
// window: the member's bytes before the start (at most 32 KiB) when known, else null (markers).
// startKind: a state (ST_*), or -1 to search for a boundary from startBit.
static napi_value inflate_job(napi_env env, napi_callback_info info) {
  size_t argc = 17;
  napi_value a[17];
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  if (argc < 17) {
    napi_throw_type_error(env, NULL, "inflateJob: 17 arguments");
    return NULL;
  }
  job_args A;
  double* res;
  if (job_from_args(env, a, &A, &res, "inflateJob") != 0) return NULL;
  if (decode_job(&A, res) != 0) napi_throw_error(env, NULL, "inflateJob: out of memory");
  return NULL;
}

#include "fastpull_inflate_threads.h"

// resolveMarkers(src16, count, window, minIndex, dst8): dst8[i] = src16[i] for a byte, window[m] for a
// marker 0x8000|m. Returns -1, or the index of the first marker below minIndex (a distance reaching
// before the start of the member).
static napi_value resolve_markers(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value a[5];
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  void *s, *w, *d;
  size_t ls, lw, ld;
  if (argc < 5 || get_bytes(env, a[0], &s, &ls) || get_bytes(env, a[2], &w, &lw) || get_bytes(env, a[4], &d, &ld) || lw < WIN) {
    napi_throw_type_error(env, NULL, "resolveMarkers: bad arguments");
    return NULL;
  }
  size_t n = (size_t)get_num(env, a[1]);
  uint32_t min = (uint32_t)get_num(env, a[3]);
  if (n * 2 > ls || n > ld) {
    napi_throw_range_error(env, NULL, "resolveMarkers: count exceeds buffers");
    return NULL;
  }
  const uint16_t* src = s;
  const uint8_t* win = w;
  uint8_t* dst = d;
  double bad = -1;
  for (size_t i = 0; i < n; i++) {
    uint16_t v = src[i];
    if (v < 256) {
      dst[i] = (uint8_t)v;
    } else {
      uint32_t m = v & 0x7fff;
      if (m < min && bad < 0) bad = (double)i;
      dst[i] = win[m];
    }
  }
  napi_value out;
  napi_create_double(env, bad, &out);
  return out;
}

// copyBytes(dst, dstOffset, src, srcOffset, length): memcpy between byte views. V8 copies into or out
// of a SharedArrayBuffer with relaxed atomic word copies, some 2 GB/s here; the job slots are shared.
static napi_value copy_bytes(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value a[5];
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  void *d, *s;
  size_t ld, ls;
  if (argc < 5 || get_bytes(env, a[0], &d, &ld) || get_bytes(env, a[2], &s, &ls)) {
    napi_throw_type_error(env, NULL, "copyBytes: bad arguments");
    return NULL;
  }
  double dof = get_num(env, a[1]), sof = get_num(env, a[3]), n = get_num(env, a[4]);
  if (!(dof >= 0 && sof >= 0 && n >= 0) || dof + n > (double)ld || sof + n > (double)ls) {
    napi_throw_range_error(env, NULL, "copyBytes: out of range");
    return NULL;
  }
  memcpy((uint8_t*)d + (size_t)dof, (const uint8_t*)s + (size_t)sof, (size_t)n);
  return NULL;
}

// discard(bytes): hands the whole pages inside a byte view back to the kernel (madvise DONTNEED), so
// that a job slot let go stops counting in the process's RSS at once instead of when every thread that
// saw its SharedArrayBuffer has collected it. The view stays valid: its pages read as zeros until
// written again. Returns the bytes handed back.
static napi_value discard(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value a[1];
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  void* d;
  size_t len;
  if (argc < 1 || get_bytes(env, a[0], &d, &len)) {
    napi_throw_type_error(env, NULL, "discard: bad arguments");
    return NULL;
  }
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t from = ((uintptr_t)d + page - 1) & ~(page - 1);
  uintptr_t to = ((uintptr_t)d + len) & ~(page - 1);
  double n = 0;
  if (to > from && madvise((void*)from, to - from, MADV_DONTNEED) == 0) n = (double)(to - from);
  napi_value out;
  napi_create_double(env, n, &out);
  return out;
}

// crc32Combine(crc1, crc2, len2): the CRC-32 of A||B from crc(A), crc(B) and the length of B.
static napi_value crc32_combine_js(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value a[3];
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  if (argc < 3) {
    napi_throw_type_error(env, NULL, "crc32Combine: 3 arguments");
    return NULL;
  }
  uint32_t c = crc32_combine_((uint32_t)get_num(env, a[0]), (uint32_t)get_num(env, a[1]), (uint64_t)get_num(env, a[2]));
  napi_value out;
  napi_create_uint32(env, c, &out);
  return out;
}

// The process's zlib crc32_z (Node.js exports the zlib it bundles), when found and checked.
static crc32_z_fn found_crc;

static void find_zlib(void) {
  crc32_z_fn f = (crc32_z_fn)dlsym(RTLD_DEFAULT, "crc32_z");
  static const uint8_t check[9] = {'1', '2', '3', '4', '5', '6', '7', '8', '9'};
  uint8_t big[4096];
  for (int i = 0; i < 4096; i++) big[i] = (uint8_t)(i * 131 + (i >> 7));
  if (f && f(0, check, 9) == 0xcbf43926u && (uint32_t)f(0, big, sizeof big) == crc32_bytes(0, big, sizeof big)) found_crc = f;
}

static void use_zlib(bool on) { zlib_crc32_z = on ? found_crc : NULL; }

// useZlib(on?): with a boolean, switches between the process's zlib CRC-32 and this decoder's own
// (slicing by 8); returns whether zlib's is in use. Process-wide. The default is on where that
// zlib is found; tests switch it off to run the decoder's own. (Whole blocks through the process's inflate, once the
// window is known, were tried: no faster than this decoder's loops, so they are not used.)
static napi_value use_zlib_js(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value a[1];
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  if (argc >= 1) {
    napi_valuetype t;
    napi_typeof(env, a[0], &t);
    if (t == napi_boolean) {
      bool on;
      napi_get_value_bool(env, a[0], &on);
      use_zlib(on);
    }
  }
  napi_value out;
  napi_get_boolean(env, zlib_crc32_z != NULL, &out);
  return out;
}

// Once per process, not per thread that loads the addon (a useZlib switch holds for all of them).
static pthread_once_t once = PTHREAD_ONCE_INIT;
static void init_process(void) {
  init_static();
  find_zlib();
  use_zlib(true);
}

static napi_value init(napi_env env, napi_value exports) {
  pthread_once(&once, init_process);
  napi_property_descriptor props[] = {
      {"inflateJob", NULL, inflate_job, NULL, NULL, NULL, napi_default, NULL},
      {"resolveMarkers", NULL, resolve_markers, NULL, NULL, NULL, napi_default, NULL},
      {"copyBytes", NULL, copy_bytes, NULL, NULL, NULL, napi_default, NULL},
      {"crc32Combine", NULL, crc32_combine_js, NULL, NULL, NULL, napi_default, NULL},
      {"useZlib", NULL, use_zlib_js, NULL, NULL, NULL, napi_default, NULL},
      {"discard", NULL, discard, NULL, NULL, NULL, napi_default, NULL},
      {"decodeRunner", NULL, js_runner, NULL, NULL, NULL, napi_default, NULL},
      {"decodeSubmit", NULL, js_submit, NULL, NULL, NULL, napi_default, NULL},
      {"decodeRunnerClose", NULL, js_runner_close, NULL, NULL, NULL, napi_default, NULL},
      {"decodeThreads", NULL, js_threads, NULL, NULL, NULL, napi_default, NULL},
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
