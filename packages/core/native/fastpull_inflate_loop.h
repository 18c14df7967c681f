// The Huffman block loops of fastpull_inflate.c: huff8 writes bytes (the window is known), huff16
// writes 16-bit symbols with markers for the unknown window. Each returns -1 at the end of the block,
// -2 when huff16 switched to bytes mid-block, or an R_ status (the reader then sits on a symbol
// boundary, so a later job can resume exactly there).
//
// huff8 has a fast loop that runs while at least 16 input bytes and 258 output bytes of room are
// left, with no bounds checks inside, and a careful loop for the rest.

#define LL_MASK ((1u << LL_BITS) - 1)
#define D_MASK ((1u << D_BITS) - 1)

#define LOCAL_REFILL()                                      \
  do {                                                      \
    if (ip + 8 <= n) {                                      \
      bb |= load64(in + ip) << bc;                          \
      ip += (63 - bc) >> 3;                                 \
      bc |= 56;                                             \
    } else {                                                \
      while (bc <= 56) {                                    \
        uint64_t byte_ = ip < n ? in[ip] : 0;               \
        bb |= byte_ << bc;                                  \
        ip++;                                               \
        bc += 8;                                            \
      }                                                     \
    }                                                       \
  } while (0)

// The fast loop's refill: 8 readable bytes are guaranteed.
#define FAST_REFILL()               \
  do {                              \
    bb |= load64(in + ip) << bc;    \
    ip += (63 - bc) >> 3;           \
    bc |= 56;                       \
  } while (0)

#define LOOKUP(e, table, tbits, mask)                                                              \
  do {                                                                                             \
    e = table[bb & (mask)];                                                                        \
    if (KIND(e) == K_SUB) e = table[(e >> 16) + ((bb >> (tbits)) & ((1u << ((e >> 8) & 15)) - 1))]; \
  } while (0)

// Value of a length or distance entry: its base plus its extra bits (which follow the code).
#define BASE_VALUE(e) ((e >> 16) + (((uint32_t)bb & ((1u << NBITS(e)) - 1)) >> ((e >> 8) & 15)))

#define CONSUME(e)      \
  do {                  \
    bb >>= NBITS(e);    \
    bc -= NBITS(e);     \
  } while (0)

#define SAVE_READER() \
  do {                \
    r->ip = ip;       \
    r->bb = bb;       \
    r->bc = bc;       \
  } while (0)

#define PAST_END() ((uint64_t)ip * 8 - bc > (uint64_t)n * 8)

static inline uint8_t* copy_match(uint8_t* o, size_t D, unsigned L) {
  const uint8_t* src = o - D;
  uint8_t* end = o + L;
  if (D >= 16) {
    // Whole 16-byte words: the output has room past the cap for the overshoot.
    do {
      memcpy(o, src, 16);
      o += 16;
      src += 16;
    } while (o < end);
  } else if (D >= 8) {
    do {
      memcpy(o, src, 8);
      o += 8;
      src += 8;
    } while (o < end);
  } else if (D == 1) {
    memset(o, *src, L);
  } else {
    for (unsigned i = 0; i < L; i++) o[i] = src[i];
  }
  return end;
}

static int huff8(job* j) {
  reader* r = &j->r;
  const uint8_t* in = r->in;
  const size_t n = r->n;
  const int final = r->final;
  size_t ip = r->ip;
  uint64_t bb = r->bb;
  unsigned bc = r->bc;
  const uint32_t* ll = j->ll;
  const uint32_t* d = j->d;
  uint8_t* o = j->o8 + WIN + j->n8;
  const uint8_t* hist = j->o8 + j->hist8;
  size_t room = j->cap > j->n16 ? j->cap - j->n16 : 0;
  const uint8_t* olimit = j->o8 + WIN + (room > 258 ? room - 258 : 0);
  int ret = -1;

  // Fast loop: at most 6 bytes of input per symbol and 3 literals or one match (258) per round.
  while (room > 258 && ip + 16 <= n && o <= olimit) {
    FAST_REFILL();
    uint32_t e;
    LOOKUP(e, ll, LL_BITS, LL_MASK);
    if (KIND(e) == K_LIT) {
      CONSUME(e);
      *o++ = (uint8_t)(e >> 16);
      LOOKUP(e, ll, LL_BITS, LL_MASK);  // at least 41 bits are left: two more codes fit
      if (KIND(e) != K_LIT) continue;
      CONSUME(e);
      *o++ = (uint8_t)(e >> 16);
      LOOKUP(e, ll, LL_BITS, LL_MASK);
      if (KIND(e) != K_LIT) continue;
      CONSUME(e);
      *o++ = (uint8_t)(e >> 16);
      continue;
    }
    if (KIND(e) == K_BASE) {
      unsigned L = BASE_VALUE(e);
      CONSUME(e);
      // At least 36 bits are left: a distance code with its extra bits (28) fits.
      LOOKUP(e, d, D_BITS, D_MASK);
      if (KIND(e) != K_BASE) {
        set_error(j, E_BAD_DIST);
        ret = R_ERROR;
        goto out;
      }
      size_t D = BASE_VALUE(e);
      CONSUME(e);
      if (D > (size_t)(o - hist)) {
        set_error(j, E_DIST_FAR);
        ret = R_ERROR;
        goto out;
      }
      o = copy_match(o, D, L);
      continue;
    }
    if (KIND(e) == K_EOB) {
      CONSUME(e);
      goto out;
    }
    set_error(j, E_BAD_LITLEN);
    ret = R_ERROR;
    goto out;
  }

  // Careful loop: near the end of the data or of the output room.
  for (;;) {
    int near_end = ip + 16 > n;
    if (near_end && !final) {
      ret = R_NEED;
      break;
    }
    if (o > olimit || room <= 258) {
      ret = R_CAP;
      break;
    }
    LOCAL_REFILL();
    uint32_t e;
    LOOKUP(e, ll, LL_BITS, LL_MASK);
    unsigned kind = KIND(e);
    if (kind == K_INVALID) {
      set_error(j, E_BAD_LITLEN);
      ret = R_ERROR;
      break;
    }
    if (kind == K_LIT || kind == K_EOB) {
      CONSUME(e);
      if (near_end && PAST_END()) {
        set_error(j, E_TRUNCATED);
        ret = R_ERROR;
        break;
      }
      if (kind == K_EOB) break;
      *o++ = (uint8_t)(e >> 16);
      continue;
    }
    unsigned L = BASE_VALUE(e);
    CONSUME(e);
    LOOKUP(e, d, D_BITS, D_MASK);
    if (KIND(e) != K_BASE) {
      set_error(j, E_BAD_DIST);
      ret = R_ERROR;
      break;
    }
    size_t D = BASE_VALUE(e);
    CONSUME(e);
    if (near_end && PAST_END()) {
      set_error(j, E_TRUNCATED);
      ret = R_ERROR;
      break;
    }
    if (D > (size_t)(o - hist)) {
      set_error(j, E_DIST_FAR);
      ret = R_ERROR;
      break;
    }
    o = copy_match(o, D, L);
  }
out:
  j->n8 = (size_t)(o - (j->o8 + WIN));
  SAVE_READER();
  return ret;
}

static int huff16(job* j) {
  reader* r = &j->r;
  const uint8_t* in = r->in;
  const size_t n = r->n;
  const int final = r->final;
  size_t ip = r->ip;
  uint64_t bb = r->bb;
  unsigned bc = r->bc;
  const uint32_t* ll = j->ll;
  const uint32_t* d = j->d;
  uint16_t* o = j->o16;
  size_t pos = j->n16;
  size_t clean = j->clean_from;
  size_t max16 = j->cap16 > 300 ? j->cap16 - 300 : 0;
  size_t cap16 = j->cap < max16 ? j->cap : max16;
  size_t limit = cap16 > 258 ? cap16 - 258 : 0;
  int ret = -1;
  for (;;) {
    if (pos - clean >= WIN) {
      j->n16 = pos;
      j->clean_from = clean;
      switch_to_bytes(j);
      ret = -2;
      break;
    }
    int near_end = ip + 16 > n;
    if (near_end && !final) {
      ret = R_NEED;
      break;
    }
    if (pos > limit) {
      ret = R_CAP;
      break;
    }
    LOCAL_REFILL();
    uint32_t e;
    LOOKUP(e, ll, LL_BITS, LL_MASK);
    unsigned kind = KIND(e);
    if (kind == K_INVALID) {
      set_error(j, E_BAD_LITLEN);
      ret = R_ERROR;
      break;
    }
    if (kind == K_LIT || kind == K_EOB) {
      CONSUME(e);
      if (near_end && PAST_END()) {
        set_error(j, E_TRUNCATED);
        ret = R_ERROR;
        break;
      }
      if (kind == K_EOB) break;
      o[pos++] = (uint16_t)(e >> 16);
      continue;
    }
    unsigned L = BASE_VALUE(e);
    CONSUME(e);
    LOOKUP(e, d, D_BITS, D_MASK);
    if (KIND(e) != K_BASE) {
      set_error(j, E_BAD_DIST);
      ret = R_ERROR;
      break;
    }
    size_t D = BASE_VALUE(e);
    CONSUME(e);
    if (near_end && PAST_END()) {
      set_error(j, E_TRUNCATED);
      ret = R_ERROR;
      break;
    }
    if (D > pos) {
      // Reaches before the span: markers for the unknown window (D <= 32768 always holds here).
      for (unsigned i = 0; i < L; i++) {
        size_t at = pos + i;
        if (at < D) {
          o[at] = (uint16_t)(0x8000u | (uint32_t)(WIN - (D - at)));
        } else {
          o[at] = o[at - D];
        }
        if (o[at] >= 256) clean = at + 1;
      }
    } else if (pos - D < clean) {
      // The source may hold markers: copy and note the last one.
      for (unsigned i = 0; i < L; i++) {
        uint16_t v = o[pos + i - D];
        o[pos + i] = v;
        if (v >= 256) clean = pos + i + 1;
      }
    } else {
      for (unsigned i = 0; i < L; i++) o[pos + i] = o[pos + i - D];
    }
    pos += L;
  }
  if (ret != -2) {
    j->n16 = pos;
    j->clean_from = clean;
  }
  SAVE_READER();
  return ret;
}
