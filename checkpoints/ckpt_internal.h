/* ckpt_internal.h — what the checkpoint sources share and nobody else uses: the byte layout
 * constants (docs/checkpoint-format.md), little-endian helpers, byte-plane shuffle, a tiny
 * parallel-for, and the crash-safe file writer. */
#ifndef CKPT_INTERNAL_H
#define CKPT_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

#include "checkpoints/ckpt.h"
#include "checkpoints/ckpt_hash.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoint payloads are little-endian; this implementation needs a little-endian host"
#endif

/* ---- layout (all integers little-endian) ---- */
#define CKPT_MAGIC "\x89SGCK\r\n\x1a" /* 8 bytes at offset 0 */
#define CKPT_END_MAGIC "SGCKEND\n"    /* 8 bytes opening the trailer */
#define CKPT_HEADER_SIZE 64
#define CKPT_TRAILER_SIZE 64
#define CKPT_ENTRY_FIXED 96 /* index entry without its name */
#define CKPT_PAYLOAD_ALIGN 64
#define CKPT_MAX_META (64 << 20)
#define CKPT_MIN_BLOCK 64
#define CKPT_MAX_BLOCK (1ll << 30)

/* header fields */
#define HDR_MAGIC 0
#define HDR_VERSION 8
#define HDR_HEADER_SIZE 12
#define HDR_BLOCK_BYTES 16
#define HDR_FLAGS 20
#define HDR_META_OFFSET 24
#define HDR_META_SIZE 32
#define HDR_META_HASH 40
#define HDR_RESERVED 48
#define HDR_HASH 56 /* XXH64 of bytes [0, 56) */

/* trailer fields (relative to the trailer start) */
#define TRL_MAGIC 0
#define TRL_INDEX_OFFSET 8
#define TRL_INDEX_SIZE 16
#define TRL_COUNT 24
#define TRL_INDEX_HASH 32
#define TRL_FILE_SIZE 40
#define TRL_RAW_TOTAL 48
#define TRL_FILE_HASH 56 /* XXH64 of every byte of the file before this field */

/* index entry fields */
#define ENT_NAME_LEN 0 /* u16 */
#define ENT_ROLE 2     /* u8, format role code */
#define ENT_DTYPE 3    /* u8, format dtype code */
#define ENT_NDIM 4     /* u8 */
#define ENT_CODEC 5    /* u8 */
#define ENT_FILTER 6   /* u8: 0 none, 1 byte-plane shuffle */
#define ENT_PAD 7      /* u8, zero */
#define ENT_SHAPE 8    /* 4 x i64 */
#define ENT_ARENA 40   /* i64 */
#define ENT_FOFF 48    /* u64 payload offset */
#define ENT_STORED 56  /* u64 */
#define ENT_RAW 64     /* u64 */
#define ENT_RAW_HASH 72
#define ENT_STORED_HASH 80
#define ENT_RESERVED 88 /* u64, zero */
/* name bytes follow at CKPT_ENTRY_FIXED, then zero padding to a multiple of 8 */

#define CKPT_FILTER_NONE 0
#define CKPT_FILTER_SHUFFLE 1

/* The format's own codes for roles and dtypes, independent of the enum order in sg_base.h. */
extern const char *const ckpt_format_roles[];
extern const int ckpt_format_role_count;
extern const char *const ckpt_format_dtypes[];
extern const int ckpt_format_dtype_count;
/* sg enum -> format code and back; -1 when there is no counterpart in this build */
int ckpt_role_to_code(int role);
int ckpt_role_from_code(int code);
int ckpt_dtype_to_code(int dtype);
int ckpt_dtype_from_code(int code);

static inline void put16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8);
}
static inline void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t get16(const uint8_t *p) {
    return (uint16_t)(p[0] | p[1] << 8);
}
static inline uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t get64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* ---- byte-plane shuffle: n elements of esize bytes; plane b holds byte b of every element.
 * dst[b * n + i] = src[i * esize + b]. unshuffle is the inverse. ---- */
void ckpt_shuffle(uint8_t *dst, const uint8_t *src, int64_t n, int esize);
void ckpt_unshuffle(uint8_t *dst, const uint8_t *src, int64_t n, int esize);

/* ---- parallel for: fn(ctx, item) for item in [0, n) on up to `threads` threads; the first
 * non-zero return stops the handing out of further items and is returned. ---- */
typedef int (*ckpt_item_fn)(void *ctx, int64_t item);
int ckpt_parallel_for(int64_t n, int threads, ckpt_item_fn fn, void *ctx);
int ckpt_default_threads(void);

/* ---- the crash-safe writer: temp file in the destination directory, buffered writes,
 * fsync, rename, fsync of the directory ---- */
typedef struct {
    char path[4096];
    char tmp[4096];
    char dir[4096];
    int fd;
    int64_t written; /* bytes handed to write(2) */
    int64_t pos;     /* bytes accepted (written + buffered) */
    uint8_t *buf;
    size_t buf_len, buf_cap;
    ckpt_fault_fn fault;
    void *fault_ctx;
    ckpt_xxh64_state hash; /* of every byte accepted, when hashing */
    int hashing;
} ckpt_atomic;

int ckpt_atomic_begin(ckpt_atomic *a, const char *path, const ckpt_write_opts *opts);
int ckpt_atomic_write(ckpt_atomic *a, const void *p, size_t n);
int ckpt_atomic_zeros(ckpt_atomic *a, size_t n);
/* flush, fsync, close, rename, fsync dir; on failure before the rename the temp is removed */
int ckpt_atomic_commit(ckpt_atomic *a);
/* close and remove the temp (after an error) */
void ckpt_atomic_abort(ckpt_atomic *a);
/* Is `name` a temporary file of ours ("." + base + ".tmp." + ...)? */
int ckpt_is_temp_name(const char *name);

#endif
