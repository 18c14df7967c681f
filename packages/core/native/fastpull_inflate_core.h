// The decoder of fastpull_inflate.c, without the N-API glue (a benchmark harness includes it too).
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
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// ---- results and states, shared with pargzip.ts ----
enum { ST_MEMBER = 0, ST_BLOCK = 1, ST_HUFF = 2, ST_STORED = 3, ST_TRAILER = 4, ST_END = 5 };
enum { R_STOP = 0, R_CAP = 1, R_NEED = 2, R_END = 3, R_NOSTART = 4, R_ERROR = 5 };
enum {
  E_NONE = 0, E_TRUNCATED, E_HEADER_MAGIC, E_HEADER_METHOD, E_HEADER_FLAGS, E_HEADER_CRC, E_BTYPE,
  E_STORED_LEN, E_TOO_MANY_SYMS, E_CL_SET, E_REPEAT, E_NO_EOB, E_LITLEN_SET, E_DIST_SET, E_BAD_LITLEN,
  E_BAD_DIST, E_DIST_FAR, E_CRC, E_LENGTH
};
// The layout of the result array (Float64Array) the caller passes.
enum {
  O_STATUS = 0, O_ERROR, O_STATE, O_BIT, O_BTYPE, O_FINAL, O_LEFT, O_HDRBIT, O_HDRLEN, O_KEY,
  O_N16, O_N8, O_START_KEY, O_START_KIND, O_MEMBERS, O_START_BIT, O_RESULT_LEN
};

// ---- Huffman tables ----
// An entry: bits 0-4 the bits to consume (the code, plus the extra bits of a length or distance),
// bits 5-7 the kind, bits 8-11 the code's own length (where the extra bits start) or a subtable's
// index bits, bits 16-31 the value (a byte, a base, a subtable offset). 0 is no code at all.
enum { K_INVALID = 0, K_BASE = 1, K_EOB = 2, K_SUB = 3, K_LIT = 4 };
#define KIND(e) (((e) >> 5) & 7)
#define NBITS(e) ((e) & 31)
#define LL_BITS 10
#define D_BITS 8
#define LL_SIZE 2048
#define D_SIZE 1024
#define ENT(nbits, kind, aux, val) ((uint32_t)(nbits) | ((uint32_t)(kind) << 5) | ((uint32_t)(aux) << 8) | ((uint32_t)(val) << 16))

static const uint16_t LEN_BASE[29] = {3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31,
                                      35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
static const uint8_t LEN_EXTRA[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
static const uint16_t DIST_BASE[30] = {1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385,
                                       513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
static const uint8_t DIST_EXTRA[30] = {0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};
static const uint8_t CL_ORDER[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};

enum { T_LITLEN, T_DIST, T_CODES };

static uint32_t sym_entry(int type, int sym, int len) {
  if (type == T_CODES) return ENT(len, K_LIT, 0, sym);
  if (type == T_LITLEN) {
    if (sym < 256) return ENT(len, K_LIT, 0, sym);
    if (sym == 256) return ENT(len, K_EOB, 0, 0);
    if (sym < 286) return ENT(len + LEN_EXTRA[sym - 257], K_BASE, len, LEN_BASE[sym - 257]);
    return 0;  // 286, 287: invalid literal/length code
  }
  if (sym < 30) return ENT(len + DIST_EXTRA[sym], K_BASE, len, DIST_BASE[sym]);
  return 0;  // 30, 31: invalid distance code
}

static uint8_t REV8[256];

// The `len` low bits of code, reversed (deflate sends Huffman codes from their top bit).
static inline uint32_t rev_bits(uint32_t code, int len) {
  uint32_t r = ((uint32_t)REV8[code & 0xff] << 8) | REV8[(code >> 8) & 0xff];
  return r >> (16 - len);
}

// Builds a decoding table as zlib's inflate_table would accept it: 0, or -1 for an over-subscribed
// set, -2 for an incomplete one (allowed only when the longest code has one bit, or no code at all
// for distances). `tbits` is the primary table's index width.
static int build_table(uint32_t* table, int size, int tbits, const uint8_t* lens, int n, int type) {
  int count[16] = {0};
  for (int i = 0; i < n; i++) count[lens[i]]++;
  int max = 15;
  while (max > 0 && count[max] == 0) max--;
  memset(table, 0, sizeof(uint32_t) * (size_t)(1 << tbits));
  if (max == 0) return type == T_DIST ? 0 : -2;  // no codes: every lookup is an invalid code
  int left = 1;
  for (int len = 1; len <= 15; len++) {
    left <<= 1;
    left -= count[len];
    if (left < 0) return -1;
  }
  if (left > 0 && (type == T_CODES || max != 1)) return -2;
  uint32_t next[16];
  uint32_t code = 0;
  count[0] = 0;
  for (int len = 1; len <= 15; len++) {
    code = (code + count[len - 1]) << 1;
    next[len] = code;
  }
  int root = 1 << tbits;
  // Subtable widths per primary slot, from the longest code that starts there.
  uint8_t subw[1 << LL_BITS];
  uint32_t codes[288];
  int long_codes = 0;
  for (int s = 0; s < n; s++) {
    int len = lens[s];
    if (len == 0) continue;
    codes[s] = rev_bits(next[len]++, len);
    if (len > tbits) {
      uint32_t slot = codes[s] & (uint32_t)(root - 1);
      if (long_codes++ == 0) memset(subw, 0, (size_t)root);
      if (len - tbits > subw[slot]) subw[slot] = (uint8_t)(len - tbits);
    }
  }
  int used = root;
  for (int slot = 0; long_codes > 0 && slot < root; slot++) {
    if (subw[slot] == 0) continue;
    if (used + (1 << subw[slot]) > size) return -1;
    table[slot] = ENT(tbits, K_SUB, subw[slot], used);
    memset(table + used, 0, sizeof(uint32_t) * (size_t)(1 << subw[slot]));
    used += 1 << subw[slot];
  }
  for (int s = 0; s < n; s++) {
    int len = lens[s];
    if (len == 0) continue;
    uint32_t e = sym_entry(type, s, len);
    if (len <= tbits) {
      for (uint32_t i = codes[s]; i < (uint32_t)root; i += 1u << len) table[i] = e;
    } else {
      uint32_t slot = codes[s] & (uint32_t)(root - 1);
      uint32_t off = table[slot] >> 16;
      int w = subw[slot];
      for (uint32_t i = codes[s] >> tbits; i < (1u << w); i += 1u << (len - tbits)) table[off + i] = e;
    }
  }
  return 0;
}

static uint32_t FIXED_LL[LL_SIZE];
static uint32_t FIXED_D[D_SIZE];
static uint8_t HDR13_OK[1 << 13];
static uint32_t CRC_TABLE[256];

static uint32_t CRC8[8][256];
static uint32_t X2N[32];
static uint32_t mult_mod_p(uint32_t a, uint32_t b);

static void init_static(void) {
  for (int i = 0; i < 256; i++) {
    uint8_t r = 0;
    for (int b = 0; b < 8; b++) r |= (uint8_t)(((i >> b) & 1) << (7 - b));
    REV8[i] = r;
  }
  uint8_t lens[288];
  for (int i = 0; i < 144; i++) lens[i] = 8;
  for (int i = 144; i < 256; i++) lens[i] = 9;
  for (int i = 256; i < 280; i++) lens[i] = 7;
  for (int i = 280; i < 288; i++) lens[i] = 8;
  build_table(FIXED_LL, LL_SIZE, LL_BITS, lens, 288, T_LITLEN);
  for (int i = 0; i < 32; i++) lens[i] = 5;
  build_table(FIXED_D, D_SIZE, D_BITS, lens, 32, T_DIST);
  // BFINAL 0, BTYPE 2, HLIT <= 29, HDIST <= 29: the first 13 bits of a dynamic block worth a closer look.
  for (uint32_t v = 0; v < (1u << 13); v++) HDR13_OK[v] = (v & 7) == 4 && ((v >> 3) & 31) <= 29 && ((v >> 8) & 31) <= 29;
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
    CRC_TABLE[i] = c;
  }
  for (int i = 0; i < 256; i++) {
    CRC8[0][i] = CRC_TABLE[i];
    for (int t = 1; t < 8; t++) CRC8[t][i] = (CRC8[t - 1][i] >> 8) ^ CRC_TABLE[CRC8[t - 1][i] & 0xff];
  }
  uint32_t x = 1u << 30;  // x^1
  X2N[0] = x;
  for (int k = 1; k < 32; k++) X2N[k] = x = mult_mod_p(x, x);
}

static uint32_t crc32_bytes(uint32_t crc, const uint8_t* p, size_t n) {
  crc = ~crc;
  for (size_t i = 0; i < n; i++) crc = CRC_TABLE[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

// CRC-32 eight bytes at a time (slicing by 8), on the decode threads instead of the output's.
static uint32_t CRC8[8][256];

// zlib's crc32_z when the process has one (Node.js exports its zlib, whose CRC-32 folds with carry-less
// multiplication: 5.5 GB/s here against about 1.3 GB/s for slicing by 8); set by the glue at load.
typedef unsigned long (*crc32_z_fn)(unsigned long crc, const unsigned char* buf, size_t len);
static crc32_z_fn zlib_crc32_z;

static uint32_t crc32_fast(uint32_t crc, const uint8_t* p, size_t n) {
  if (zlib_crc32_z) return (uint32_t)zlib_crc32_z(crc, p, n);
  crc = ~crc;
  while (n >= 8) {
    uint64_t v;
    memcpy(&v, p, 8);
    v ^= crc;
    crc = CRC8[7][v & 0xff] ^ CRC8[6][(v >> 8) & 0xff] ^ CRC8[5][(v >> 16) & 0xff] ^ CRC8[4][(v >> 24) & 0xff] ^
          CRC8[3][(v >> 32) & 0xff] ^ CRC8[2][(v >> 40) & 0xff] ^ CRC8[1][(v >> 48) & 0xff] ^ CRC8[0][v >> 56];
    p += 8;
    n -= 8;
  }
  while (n--) crc = CRC_TABLE[(crc ^ *p++) & 0xff] ^ (crc >> 8);
  return ~crc;
}

// Combining CRCs: crc(A||B) from crc(A), crc(B) and |B|, by multiplying crc(A) with x^(8|B|)
// modulo the CRC polynomial (bit-reflected arithmetic).
static uint32_t mult_mod_p(uint32_t a, uint32_t b) {
  uint32_t m = 1u << 31, prod = 0;
  for (;;) {
    if (a & m) {
      prod ^= b;
      if ((a & (m - 1)) == 0) break;
    }
    m >>= 1;
    b = b & 1 ? (b >> 1) ^ 0xedb88320u : b >> 1;
  }
  return prod;
}
static uint32_t X2N[32];  // x^(2^k) mod p

static uint32_t crc32_combine_(uint32_t crc1, uint32_t crc2, uint64_t len2) {
  uint32_t p = 1u << 31;  // x^0
  unsigned k = 3;         // len2 bytes are 2^3 * len2 bits
  for (uint64_t n = len2; n; n >>= 1, k++)
    if (n & 1) p = mult_mod_p(X2N[k & 31], p);
  return mult_mod_p(p, crc1) ^ crc2;
}

// ---- bit reader ----
typedef struct {
  const uint8_t* in;
  size_t n;        // bytes of data
  size_t ip;       // next byte to load (may pass n: zeros are loaded there)
  uint64_t bb;     // bit buffer
  unsigned bc;     // bits in it
  int final;       // the data reaches the end of the stream
} reader;

static inline uint64_t load64(const uint8_t* p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;  // little-endian hosts only (x86-64, arm64)
}

static inline void refill(reader* r) {
  if (r->ip + 8 <= r->n) {
    r->bb |= load64(r->in + r->ip) << r->bc;
    r->ip += (63 - r->bc) >> 3;
    r->bc |= 56;
  } else {
    while (r->bc <= 56) {
      uint64_t b = r->ip < r->n ? r->in[r->ip] : 0;
      r->bb |= b << r->bc;
      r->ip++;
      r->bc += 8;
    }
  }
}
// Bit position relative to data[0].
static inline uint64_t rpos(const reader* r) { return (uint64_t)r->ip * 8 - r->bc; }
static inline void rseek(reader* r, uint64_t bit) {
  r->ip = (size_t)(bit >> 3);
  r->bb = 0;
  r->bc = 0;
  refill(r);
  unsigned skip = (unsigned)(bit & 7);
  r->bb >>= skip;
  r->bc -= skip;
}
static inline uint32_t rbits(reader* r, unsigned k) { return (uint32_t)(r->bb & ((1ull << k) - 1)); }
static inline void rdrop(reader* r, unsigned k) {
  r->bb >>= k;
  r->bc -= k;
}
static inline uint32_t rtake(reader* r, unsigned k) {
  if (r->bc < k) refill(r);
  uint32_t v = rbits(r, k);
  rdrop(r, k);
  return v;
}
static inline int overrun(const reader* r) { return rpos(r) > (uint64_t)r->n * 8; }

// ---- dynamic block header ----
typedef struct {
  uint32_t ll[LL_SIZE];
  uint32_t d[D_SIZE];
} tables;

// Reads a dynamic block's header after its 3 header bits. 0, or an E_ code.
static int read_dynamic(reader* r, tables* t) {
  refill(r);
  int nlen = (int)rtake(r, 5) + 257;
  int ndist = (int)rtake(r, 5) + 1;
  int ncode = (int)rtake(r, 4) + 4;
  if (nlen > 286 || ndist > 30) return E_TOO_MANY_SYMS;
  uint8_t cl[19] = {0};
  refill(r);
  for (int i = 0; i < ncode; i++) cl[CL_ORDER[i]] = (uint8_t)rtake(r, 3);
  uint32_t ct[128];
  if (build_table(ct, 128, 7, cl, 19, T_CODES) != 0) return E_CL_SET;
  uint8_t lens[286 + 30];
  int i = 0;
  while (i < nlen + ndist) {
    refill(r);
    uint32_t e = ct[rbits(r, 7)];
    if (e == 0) return E_CL_SET;
    rdrop(r, NBITS(e));
    int sym = (int)(e >> 16);
    if (sym < 16) {
      lens[i++] = (uint8_t)sym;
      continue;
    }
    int rep;
    uint8_t val = 0;
    if (sym == 16) {
      if (i == 0) return E_REPEAT;
      val = lens[i - 1];
      rep = 3 + (int)rtake(r, 2);
    } else if (sym == 17) {
      rep = 3 + (int)rtake(r, 3);
    } else {
      rep = 11 + (int)rtake(r, 7);
    }
    if (i + rep > nlen + ndist) return E_REPEAT;
    while (rep--) lens[i++] = val;
  }
  if (lens[256] == 0) return E_NO_EOB;
  if (build_table(t->ll, LL_SIZE, LL_BITS, lens, nlen, T_LITLEN) != 0) return E_LITLEN_SET;
  if (build_table(t->d, D_SIZE, D_BITS, lens + nlen, ndist, T_DIST) != 0) return E_DIST_SET;
  return 0;
}

// ---- the job ----
typedef struct {
  reader r;
  uint64_t base;        // absolute bit position of data[0]
  uint64_t stop_key;    // stop at the first boundary whose key is at least this
  int state, btype, final;
  int after_member;     // at ST_MEMBER: a member ended here (a zero byte or the end then ends the stream)
  uint32_t left;        // stored bytes left
  uint64_t hdr_bit;     // absolute bit of the current block's header (its first bit)
  const uint32_t* ll;
  const uint32_t* d;
  tables* dyn;
  // output
  uint16_t* o16;
  size_t n16, cap16;
  uint8_t* o8;          // 32 KiB of window, then output
  size_t n8, cap8;      // n8 counts bytes after the window part
  int mode8;            // writing bytes (window known)
  size_t hist8;         // o8 index of the first byte a distance may reach (member start, or 0)
  size_t clean_from;    // o16 index after the last marker written
  size_t cap;           // stop once this many symbols are out (both parts)
  // members
  double* members;      // triples: output offset of the member's end, crc, isize
  int nmembers, members_cap;
  int error;
  // a continuation's block header, when it is not inside data
  const uint8_t* hdr_data;
  size_t hdr_n;
  uint64_t hdr_data_bit;  // absolute bit of hdr_data[0]
} job;

#define WIN 32768

static inline size_t out_count(const job* j) { return j->n16 + j->n8; }

// Switches to bytes once the last 32 KiB written in 16 bits hold no marker.
static void switch_to_bytes(job* j) {
  size_t from = j->n16 - WIN;
  for (size_t i = 0; i < WIN; i++) j->o8[i] = (uint8_t)j->o16[from + i];
  j->mode8 = 1;
  j->n8 = 0;
  j->hist8 = 0;
}

// A new member starts: the window is empty, so everything after it is known.
static void member_start(job* j) {
  if (!j->mode8) {
    // Keep what the markers part wrote; the new member's bytes go to the byte part.
    j->mode8 = 1;
    j->n8 = 0;
  }
  j->hist8 = WIN + j->n8;
}

static void set_error(job* j, int e) {
  if (j->error == 0) j->error = e;
}

#include "fastpull_inflate_loop.h"

// Key of a block boundary at absolute bit p: a stored block is named by the byte of its LEN field.
static uint64_t block_key(job* j, uint64_t p, int* btype_out, int* final_out) {
  reader save = j->r;
  rseek(&j->r, p - j->base);
  uint32_t h = rbits(&j->r, 3);
  j->r = save;
  *final_out = (int)(h & 1);
  *btype_out = (int)(h >> 1);
  if ((h >> 1) == 0) return ((p + 3 + 7) >> 3) << 3;
  return p;
}

// Parses a gzip member header at the current (byte-aligned) position. 0 done, 1 needs more data, or -E.
static int read_member_header(job* j) {
  reader* r = &j->r;
  size_t p = (size_t)(rpos(r) >> 3);
  const uint8_t* in = r->in;
  size_t n = r->n;
#define NEED(k) \
  do {          \
    if (p + (k) > n) return r->final ? -E_TRUNCATED : 1; \
  } while (0)
  size_t start = p;
  NEED(10);
  if (in[p] != 0x1f || in[p + 1] != 0x8b) return -E_HEADER_MAGIC;
  if (in[p + 2] != 8) return -E_HEADER_METHOD;
  int flg = in[p + 3];
  if (flg & 0xe0) return -E_HEADER_FLAGS;
  p += 10;
  if (flg & 4) {
    NEED(2);
    size_t xlen = in[p] | ((size_t)in[p + 1] << 8);
    p += 2;
    NEED(xlen);
    p += xlen;
  }
  for (int f = 8; f <= 16; f += 8) {
    if (!(flg & f)) continue;
    for (;;) {
      NEED(1);
      if (in[p++] == 0) break;
    }
  }
  if (flg & 2) {
    NEED(2);
    uint32_t want = in[p] | ((uint32_t)in[p + 1] << 8);
    if ((crc32_bytes(0, in + start, p - start) & 0xffff) != want) return -E_HEADER_CRC;
    p += 2;
  }
#undef NEED
  rseek(r, (uint64_t)p * 8);
  return 0;
}

// Runs the state machine until a stop. Returns an R_ status.
static int run(job* j, double* res) {
  reader* r = &j->r;
  for (;;) {
    switch (j->state) {
      case ST_MEMBER: {
        uint64_t at = rpos(r);  // byte-aligned here
        size_t p = (size_t)(at >> 3);
        if (p >= r->n) {
          if (!r->final) return R_NEED;
          if (!j->after_member) {
            set_error(j, E_TRUNCATED);  // an empty stream
            return R_ERROR;
          }
          j->state = ST_END;
          return R_END;
        }
        // node:zlib stops at a zero byte after a member and ignores the rest; anything else must be a member.
        if (j->after_member && r->in[p] == 0) {
          j->state = ST_END;
          return R_END;
        }
        uint64_t key = j->base + at;
        if (key >= j->stop_key) {
          res[O_KEY] = (double)key;
          return R_STOP;
        }
        if (j->nmembers >= j->members_cap) return R_CAP;
        int h = read_member_header(j);
        if (h == 1) return R_NEED;
        if (h < 0) {
          set_error(j, -h);
          return R_ERROR;
        }
        member_start(j);
        j->state = ST_BLOCK;
        break;
      }
      case ST_BLOCK: {
        uint64_t p = j->base + rpos(r);
        int bt, fin;
        if (!r->final && (size_t)(rpos(r) >> 3) + 8 > r->n) return R_NEED;
        uint64_t key = block_key(j, p, &bt, &fin);
        if (key >= j->stop_key) {
          res[O_KEY] = (double)key;
          res[O_BTYPE] = bt;
          res[O_FINAL] = fin;
          return R_STOP;
        }
        if (bt == 2 && !r->final && (size_t)(rpos(r) >> 3) + 1024 > r->n) return R_NEED;
        if (out_count(j) + 258 > j->cap) return R_CAP;
        refill(r);
        j->hdr_bit = p;
        j->final = (int)rtake(r, 1);
        j->btype = (int)rtake(r, 2);
        j->hdr_data = NULL;
        if (j->btype == 0) {
          // Stored: skip to the byte boundary, then LEN and NLEN.
          uint64_t q = (rpos(r) + 7) & ~(uint64_t)7;
          size_t b = (size_t)(q >> 3);
          if (b + 4 > r->n) {
            if (r->final) {
              set_error(j, E_TRUNCATED);
              return R_ERROR;
            }
            rseek(r, p - j->base);
            return R_NEED;
          }
          uint32_t len = r->in[b] | ((uint32_t)r->in[b + 1] << 8);
          uint32_t nlen = r->in[b + 2] | ((uint32_t)r->in[b + 3] << 8);
          if ((len ^ 0xffff) != nlen) {
            set_error(j, E_STORED_LEN);
            return R_ERROR;
          }
          rseek(r, (uint64_t)(b + 4) * 8);
          j->left = len;
          j->state = ST_STORED;
        } else if (j->btype == 1) {
          j->ll = FIXED_LL;
          j->d = FIXED_D;
          j->state = ST_HUFF;
        } else if (j->btype == 2) {
          int e = read_dynamic(r, j->dyn);
          if (e == 0 && overrun(r)) e = E_TRUNCATED;
          if (e) {
            set_error(j, e);
            return R_ERROR;
          }
          j->ll = j->dyn->ll;
          j->d = j->dyn->d;
          j->state = ST_HUFF;
        } else {
          set_error(j, E_BTYPE);
          return R_ERROR;
        }
        break;
      }
      case ST_STORED: {
        size_t b = (size_t)(rpos(r) >> 3);
        while (j->left > 0) {
          size_t avail = b < r->n ? r->n - b : 0;
          if (avail == 0) {
            if (r->final) {
              set_error(j, E_TRUNCATED);
              return R_ERROR;
            }
            rseek(r, (uint64_t)b * 8);
            return R_NEED;
          }
          size_t room = j->cap > out_count(j) ? j->cap - out_count(j) : 0;
          if (room == 0) {
            rseek(r, (uint64_t)b * 8);
            return R_CAP;
          }
          size_t k = j->left;
          if (k > avail) k = avail;
          if (k > room) k = room;
          if (j->mode8) {
            memcpy(j->o8 + WIN + j->n8, r->in + b, k);
            j->n8 += k;
          } else {
            size_t room16 = j->cap16 > 300 + j->n16 ? j->cap16 - 300 - j->n16 : 0;
            if (k > room16) k = room16;
            if (k == 0) {
              rseek(r, (uint64_t)b * 8);
              return R_CAP;
            }
            for (size_t i = 0; i < k; i++) j->o16[j->n16 + i] = r->in[b + i];
            j->n16 += k;
            if (j->n16 - j->clean_from >= WIN) switch_to_bytes(j);
          }
          b += k;
          j->left -= (uint32_t)k;
        }
        rseek(r, (uint64_t)b * 8);
        j->state = j->final ? ST_TRAILER : ST_BLOCK;
        break;
      }
      case ST_HUFF: {
        int s = j->mode8 ? huff8(j) : huff16(j);
        if (s == -2) break;  // now writing bytes: same block, same state
        if (s != -1) return s;
        if (j->error) return R_ERROR;
        j->state = j->final ? ST_TRAILER : ST_BLOCK;
        break;
      }
      case ST_TRAILER: {
        uint64_t q = (rpos(r) + 7) & ~(uint64_t)7;
        size_t b = (size_t)(q >> 3);
        if (b + 8 > r->n) {
          if (r->final) {
            set_error(j, E_TRUNCATED);
            return R_ERROR;
          }
          rseek(r, q);
          return R_NEED;
        }
        const uint8_t* t = r->in + b;
        double* m = j->members + 3 * j->nmembers++;
        m[0] = (double)out_count(j);
        m[1] = (double)((uint32_t)t[0] | (uint32_t)t[1] << 8 | (uint32_t)t[2] << 16 | (uint32_t)t[3] << 24);
        m[2] = (double)((uint32_t)t[4] | (uint32_t)t[5] << 8 | (uint32_t)t[6] << 16 | (uint32_t)t[7] << 24);
        rseek(r, (uint64_t)(b + 8) * 8);
        j->state = ST_MEMBER;
        j->after_member = 1;
        break;
      }
      default:
        return R_END;
    }
  }
}

// Checks whether a dynamic block header parses at relative bit p (the cheap test passed).
static int dynamic_header_ok(job* j, uint64_t p) {
  reader save = j->r;
  rseek(&j->r, p + 3);
  int e = read_dynamic(&j->r, j->dyn);
  int ok = e == 0 && !overrun(&j->r);
  j->r = save;
  return ok;
}

static void reset_output(job* j) {
  j->n16 = 0;
  j->n8 = 0;
  j->mode8 = 0;
  j->clean_from = 0;
  j->hist8 = 0;
  j->nmembers = 0;
  j->error = 0;
}

typedef struct {
  const uint8_t* data;
  size_t dlen;
  uint64_t data_offset;  // byte offset of data[0] in the stream
  int final;             // data reaches the end of the stream
  int start_kind;        // a state, or -1 to search from start_bit
  uint64_t start_bit;
  int btype, bfinal;
  uint32_t left;
  const uint8_t* hdr;    // a continuation's block header bytes (from the byte of hdr_bit), or NULL
  size_t hlen;
  uint64_t hdr_bit;
  double stop_key;
  uint16_t* o16;
  size_t l16;            // bytes
  uint8_t* o8;
  size_t l8;             // bytes
  size_t cap;
  double* members;
  size_t lm;             // bytes
  const uint8_t* window; // the bytes before the start when known (at most 32 KiB, all of the member's), or NULL
  size_t wlen;
  double* crcs;          // CRC-32 per segment of the byte part (members + 1 entries), or NULL
  size_t ncrcs;
} job_args;

// Decodes one job; results go to res (O_* layout). 0, or -1 when out of memory.
static int decode_job(const job_args* A, double* res) {
  memset(res, 0, O_RESULT_LEN * 8);
  job* j = calloc(1, sizeof(job));
  tables* dyn = malloc(sizeof(tables));
  if (!j || !dyn) {
    free(j);
    free(dyn);
    return -1;
  }
  j->dyn = dyn;
  j->r.in = A->data;
  j->r.n = A->dlen;
  j->r.final = A->final;
  j->base = A->data_offset * 8;
  int start_kind = A->start_kind;
  uint64_t start_bit = A->start_bit;
  double stop = A->stop_key;
  j->stop_key = stop >= 1.8e19 ? UINT64_MAX : (uint64_t)stop;
  j->o16 = A->o16;
  j->cap16 = A->l16 / 2;
  j->o8 = A->o8;
  j->cap8 = A->l8 - WIN;
  j->cap = A->cap;
  // The 16-bit part may be smaller than cap (or empty when the window is known): it stops at its own end.
  if (j->cap + 300 > j->cap8) j->cap = j->cap8 > 300 ? j->cap8 - 300 : 0;
  j->members = A->members;
  j->members_cap = (int)(A->lm / 24);
  int status;
  if (start_kind >= 0) {
    reset_output(j);
    j->state = start_kind;
    j->btype = A->btype;
    j->final = A->bfinal;
    j->left = A->left;
    rseek(&j->r, start_bit - j->base);
    if (start_kind == ST_MEMBER) j->after_member = j->btype == 1;
    if (A->window && start_kind != ST_MEMBER) {
      // A known window: plain bytes from the start, distances checked against what it holds.
      size_t w = A->wlen < WIN ? A->wlen : WIN;
      memcpy(j->o8 + WIN - w, A->window + A->wlen - w, w);
      j->mode8 = 1;
      j->hist8 = WIN - w;
    }
    if (start_kind == ST_HUFF) {
      j->hdr_bit = A->hdr_bit;
      if (j->btype == 1) {
        j->ll = FIXED_LL;
        j->d = FIXED_D;
      } else {
        // The block's header, from hdr (or from data when it lies there), rebuilds the tables.
        reader hr = {0};
        if (A->hdr) {
          hr.in = A->hdr;
          hr.n = A->hlen;
        } else {
          hr.in = A->data;
          hr.n = A->dlen;
        }
        hr.final = 1;
        uint64_t hb = A->hdr ? (j->hdr_bit & 7) : j->hdr_bit - j->base;
        rseek(&hr, hb + 3);
        int e = read_dynamic(&hr, dyn);
        if (e) {
          set_error(j, e);
        } else {
          j->ll = dyn->ll;
          j->d = dyn->d;
        }
        if (A->hdr) {
          j->hdr_data = A->hdr;
          j->hdr_n = A->hlen;
          j->hdr_data_bit = j->hdr_bit & ~(uint64_t)7;
        }
      }
    }
    // A block boundary is named by its key (a stored block by its LEN byte), as stops name them.
    if (start_kind == ST_BLOCK && (size_t)((start_bit - j->base) >> 3) + 1 < A->dlen) {
      int bt, fin;
      res[O_START_KEY] = (double)block_key(j, start_bit, &bt, &fin);
    } else {
      res[O_START_KEY] = (double)start_bit;
    }
    res[O_START_KIND] = start_kind;
    res[O_START_BIT] = (double)start_bit;
    status = j->error ? R_ERROR : run(j, res);
  } else {
    // Search: the first candidate boundary at or after start_bit whose decode does not fail.
    status = R_NOSTART;
    uint64_t from = start_bit - j->base;
    size_t q0 = (size_t)((from + 7) >> 3);
    for (size_t q = q0; q + 8 <= A->dlen; q++) {
      if (j->base + (uint64_t)q * 8 >= j->stop_key) break;
      const uint8_t* in = j->r.in;
      for (int kind = 0; kind < 10; kind++) {
        uint64_t p;  // relative bit where the decode starts
        int st, bt = 0;
        uint32_t left = 0;
        if (kind == 0) {
          if (!(in[q] == 0x1f && in[q + 1] == 0x8b && in[q + 2] == 8 && (in[q + 3] & 0xe0) == 0)) continue;
          st = ST_MEMBER;
          p = (uint64_t)q * 8;
        } else if (kind == 1) {
          if (q == 0 || (in[q - 1] & 0xe0) != 0 || (in[q] ^ in[q + 2]) != 0xff || (in[q + 1] ^ in[q + 3]) != 0xff) continue;
          st = ST_STORED;
          left = in[q] | ((uint32_t)in[q + 1] << 8);
          p = (uint64_t)(q + 4) * 8;
        } else {
          uint64_t b = (uint64_t)q * 8 + (uint64_t)(kind - 2);
          if (b < from) continue;
          uint64_t w = load64(in + q);
          if (!HDR13_OK[(w >> (kind - 2)) & 0x1fff]) continue;
          if (!dynamic_header_ok(j, b)) continue;
          st = ST_BLOCK;
          bt = 2;
          p = b;
        }
        reset_output(j);
        j->state = st;
        j->btype = bt;
        j->final = 0;
        j->left = left;
        rseek(&j->r, p);
        j->after_member = 0;
        memset(res, 0, O_RESULT_LEN * 8);
        int s = run(j, res);
#ifdef DEBUG_SEARCH
        fprintf(stderr, "cand q=%zu kind=%d status=%d err=%d out=%zu+%zu consumed=%llu\n", q, kind, s, j->error, j->n16, j->n8, (unsigned long long)(rpos(&j->r) - p));
#endif
        if (s == R_ERROR) continue;
        status = s;
        res[O_START_KEY] = (double)(j->base + (uint64_t)q * 8 + (kind >= 2 ? (uint64_t)(kind - 2) : 0));
        res[O_START_KIND] = st == ST_STORED ? ST_STORED : st;
        res[O_START_BIT] = (double)(j->base + p);
        goto found;
      }
    }
    reset_output(j);
  found:;
  }
  res[O_STATUS] = status;
  res[O_ERROR] = j->error;
  res[O_STATE] = j->state;
  if (status != R_STOP) {
    res[O_BTYPE] = j->state == ST_MEMBER ? j->after_member : j->btype;
    res[O_FINAL] = j->final;
  } else if (j->state == ST_MEMBER) {
    res[O_BTYPE] = j->after_member;
  }
  res[O_LEFT] = j->left;
  res[O_BIT] = (double)(j->base + rpos(&j->r));
  res[O_HDRBIT] = (double)j->hdr_bit;
  res[O_N16] = (double)j->n16;
  res[O_N8] = (double)j->n8;
  res[O_MEMBERS] = j->nmembers;
  // CRC-32 of the byte part, cut at each member end (their offsets count the 16-bit part too).
  if (A->crcs) {
    size_t from = 0;
    int ncrc = 0;
    for (int m = 0; m < j->nmembers && ncrc < (int)A->ncrcs - 1; m++) {
      size_t at = (size_t)j->members[3 * m] - j->n16;
      A->crcs[ncrc++] = (double)crc32_fast(0, j->o8 + WIN + from, at - from);
      from = at;
    }
    A->crcs[ncrc++] = (double)crc32_fast(0, j->o8 + WIN + from, j->n8 - from);
  }
  // Where a continuation inside a dynamic block finds its header: res[O_HDRLEN] bytes from the header's
  // byte, inside data (or inside hdr for a continuation of a continuation); the caller copies them.
  if (j->state == ST_HUFF && j->btype == 2) {
    res[O_HDRLEN] = j->hdr_data ? -1 : 1;
  }
  free(dyn);
  free(j);
  return 0;
}
