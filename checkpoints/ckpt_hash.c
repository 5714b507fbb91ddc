/* ckpt_hash.c — XXH64 (see ckpt_hash.h). Inputs are read as little-endian words with memcpy,
 * so any alignment works and the value is the same on every host. */
#include "checkpoints/ckpt_hash.h"

#include <string.h>

#define P1 0x9E3779B185EBCA87ull
#define P2 0xC2B2AE3D27D4EB4Full
#define P3 0x165667B19E3779F9ull
#define P4 0x85EBCA77C2B2AE63ull
#define P5 0x27D4EB2F165667C5ull

static inline uint64_t rotl64(uint64_t x, int r) {
    return (x << r) | (x >> (64 - r));
}

static inline uint64_t read64(const uint8_t *p) {
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24 |
           (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 |
           (uint64_t)p[7] << 56;
}

static inline uint32_t read32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* One lane step: fold 8 input bytes into an accumulator. */
static inline uint64_t lane_round(uint64_t acc, uint64_t input) {
    acc += input * P2;
    acc = rotl64(acc, 31);
    return acc * P1;
}

static inline uint64_t merge_round(uint64_t h, uint64_t acc) {
    h ^= lane_round(0, acc);
    return h * P1 + P4;
}

/* Consume whole 32-byte stripes; returns the bytes consumed. */
static size_t consume_stripes(uint64_t acc[4], const uint8_t *p, size_t n) {
    size_t done = 0;
    uint64_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
    while (n - done >= 32) {
        a0 = lane_round(a0, read64(p + done));
        a1 = lane_round(a1, read64(p + done + 8));
        a2 = lane_round(a2, read64(p + done + 16));
        a3 = lane_round(a3, read64(p + done + 24));
        done += 32;
    }
    acc[0] = a0, acc[1] = a1, acc[2] = a2, acc[3] = a3;
    return done;
}

/* The end game shared by both forms: converge the lanes (or start from seed + P5 when fewer
 * than 32 bytes were seen), add the length, fold in the last < 32 bytes, avalanche. */
static uint64_t finish(const uint64_t acc[4], int have_stripes, uint64_t seed, uint64_t total,
                       const uint8_t *p, size_t n) {
    uint64_t h;
    if (have_stripes) {
        h = rotl64(acc[0], 1) + rotl64(acc[1], 7) + rotl64(acc[2], 12) + rotl64(acc[3], 18);
        for (int i = 0; i < 4; i++) h = merge_round(h, acc[i]);
    } else {
        h = seed + P5;
    }
    h += total;
    while (n >= 8) {
        h ^= lane_round(0, read64(p));
        h = rotl64(h, 27) * P1 + P4;
        p += 8, n -= 8;
    }
    if (n >= 4) {
        h ^= (uint64_t)read32(p) * P1;
        h = rotl64(h, 23) * P2 + P3;
        p += 4, n -= 4;
    }
    while (n > 0) {
        h ^= (uint64_t)(*p) * P5;
        h = rotl64(h, 11) * P1;
        p++, n--;
    }
    h ^= h >> 33;
    h *= P2;
    h ^= h >> 29;
    h *= P3;
    h ^= h >> 32;
    return h;
}

static void init_lanes(uint64_t acc[4], uint64_t seed) {
    acc[0] = seed + P1 + P2;
    acc[1] = seed + P2;
    acc[2] = seed;
    acc[3] = seed - P1;
}

uint64_t ckpt_xxh64(const void *data, size_t n, uint64_t seed) {
    static const uint8_t empty[1];
    const uint8_t *p = n ? data : empty;
    uint64_t acc[4];
    init_lanes(acc, seed);
    size_t done = n >= 32 ? consume_stripes(acc, p, n) : 0;
    return finish(acc, n >= 32, seed, n, p + done, n - done);
}

void ckpt_xxh64_init(ckpt_xxh64_state *s, uint64_t seed) {
    memset(s, 0, sizeof *s);
    s->seed = seed;
    init_lanes(s->acc, seed);
}

void ckpt_xxh64_update(ckpt_xxh64_state *s, const void *data, size_t n) {
    const uint8_t *p = data;
    if (n == 0) return;
    s->total += n;
    if (s->tail_len) {
        size_t take = 32 - s->tail_len;
        if (take > n) take = n;
        memcpy(s->tail + s->tail_len, p, take);
        s->tail_len += (uint32_t)take;
        p += take, n -= take;
        if (s->tail_len < 32) return;
        consume_stripes(s->acc, s->tail, 32);
        s->tail_len = 0;
    }
    size_t done = consume_stripes(s->acc, p, n);
    memcpy(s->tail, p + done, n - done);
    s->tail_len = (uint32_t)(n - done);
}

uint64_t ckpt_xxh64_digest(const ckpt_xxh64_state *s) {
    return finish(s->acc, s->total >= 32, s->seed, s->total, s->tail, s->tail_len);
}
