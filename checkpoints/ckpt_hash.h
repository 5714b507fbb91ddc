/* ckpt_hash.h — XXH64, the checksum of the checkpoint format.
 *
 * Implemented here from the public XXH64 specification (Yann Collet's xxHash, 64-bit
 * variant). It is the same function zstd uses for its frame checksums (zstd keeps the low
 * 32 bits), which the tests use as an independent oracle. One-shot and streaming forms give
 * the same value for the same bytes, however they are split.
 */
#ifndef CKPT_HASH_H
#define CKPT_HASH_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t acc[4]; /* the four lane accumulators */
    uint64_t total;  /* bytes seen so far */
    uint64_t seed;
    uint8_t tail[32]; /* a partial 32-byte stripe */
    uint32_t tail_len;
} ckpt_xxh64_state;

/* XXH64 of n bytes at p (p may be NULL when n == 0). */
uint64_t ckpt_xxh64(const void *p, size_t n, uint64_t seed);

void ckpt_xxh64_init(ckpt_xxh64_state *s, uint64_t seed);
void ckpt_xxh64_update(ckpt_xxh64_state *s, const void *p, size_t n);
/* The hash of everything passed to update so far; s is left unchanged. */
uint64_t ckpt_xxh64_digest(const ckpt_xxh64_state *s);

#endif
