/* philox.h — the one random number generator of stepgraph: Philox4x32-10, counter-based.
 *
 * Header-only, C11 and CUDA (every function is SG_HD), so the CPU reference kernels and the
 * CUDA kernels draw exactly the same 32-bit words from the same key. Nothing carries state:
 * a draw is a pure function of (seed, step, purpose, index), which is what makes a resumed
 * run replay the same bits as an uninterrupted one and what lets a captured CUDA graph draw
 * fresh numbers every step from the device-resident step counter alone.
 *
 * Philox4x32-10 is the generator of Salmon, Moraes, Dror and Shaw, "Parallel random numbers:
 * as easy as 1, 2, 3" (SC'11), as published in Random123: a 128-bit counter and a 64-bit key
 * go through 10 rounds of two 32x32->64 multiplies, xors and a Weyl-sequence key bump.
 * tests/test_philox.c checks it against Random123's known-answer vectors.
 *
 * Keying, used everywhere in stepgraph:
 *   counter = { (u32)index, (u32)(index >> 32), (u32)step, purpose }
 *   key     = { (u32)seed,  (u32)(seed >> 32) }
 * One purpose per consumer keeps streams independent: the timesteps of step 7 never reuse
 * the noise words of step 7.
 *
 * Floating point: the uint32 streams are bit-identical on every platform, and so are the
 * draws derived from them by integer arithmetic or exact conversions (index, bit, uniform,
 * sg_perm). Normals use logf/sqrtf/cosf: host libm and CUDA's device math library may differ
 * in the last ulp of logf and cosf (sqrtf is correctly rounded on both), so a CPU-vs-CUDA
 * comparison of normals needs a tolerance of a few ulp; everything else is exact. Build the
 * CUDA side without --use_fast_math, which would widen that gap.
 */
#ifndef SG_PHILOX_H
#define SG_PHILOX_H

#include <math.h>
#include <stdint.h>

#include "sg_base.h"

/* Purposes: the fourth counter word. Dropout node d uses SG_RNG_DROPOUT_BASE + d, d < 2^16;
 * every other purpose stays below SG_RNG_DROPOUT_BASE so the two ranges never meet. */
enum {
    SG_RNG_INIT = 1,         /* parameter initialisation (index = element of the parameter arena) */
    SG_RNG_TIMESTEP = 2,     /* diffusion timestep per sample */
    SG_RNG_NOISE = 3,        /* training noise eps */
    SG_RNG_FLIP = 4,         /* horizontal flip per sample */
    SG_RNG_PERM = 5,         /* the per-epoch data permutation (sg_perm's round function) */
    SG_RNG_SAMPLE = 6,       /* sampler noise (DDPM ancestral / initial x_T) */
    SG_RNG_SYNTHETIC = 7,    /* the procedural "synthetic" dataset */
    SG_RNG_CLASS_DROP = 8,   /* a sample's class label dropped (classifier-free guidance) */
    SG_RNG_NOISE_OFFSET = 9, /* offset noise: one normal per (sample, channel) */
    SG_RNG_PERTURB = 10,     /* input perturbation: a second normal per element of the noise */
    SG_RNG_DROPOUT_BASE = 0x10000
};
#define SG_RNG_DROPOUT_MAX 0x10000 /* dropout nodes d in [0, SG_RNG_DROPOUT_MAX) */

typedef struct {
    uint32_t v[4];
} sg_u32x4;

/* Philox4x32 constants: the two round multipliers and the Weyl key increments
 * (golden ratio and sqrt(3)-1, as in the paper). */
#define SG_PHILOX_M0 0xD2511F53u
#define SG_PHILOX_M1 0xCD9E8D57u
#define SG_PHILOX_W0 0x9E3779B9u
#define SG_PHILOX_W1 0xBB67AE85u

/* One round: two 32x32->64 products, each high half xored with a word that was not
 * multiplied and a key word, each low half carried over:
 *   out = { hi(M1 c2) ^ c1 ^ k0, lo(M1 c2), hi(M0 c0) ^ c3 ^ k1, lo(M0 c0) } */
SG_HD sg_u32x4 sg_philox4x32_round(sg_u32x4 c, uint32_t k0, uint32_t k1) {
#if defined(__CUDA_ARCH__)
    /* The same products as below, spelled as the device's high and low halves: nvcc turns the
     * 64-bit product of the zero-extended words into a wide multiply plus an add of a zero high
     * part, 2 of a round's 8 instructions (sm_90 SASS); these two fold into one wide multiply
     * each, 6 a round. */
    const uint32_t h0 = __umulhi(SG_PHILOX_M0, c.v[0]), l0 = SG_PHILOX_M0 * c.v[0];
    const uint32_t h1 = __umulhi(SG_PHILOX_M1, c.v[2]), l1 = SG_PHILOX_M1 * c.v[2];
#else
    const uint64_t p0 = (uint64_t)SG_PHILOX_M0 * c.v[0], p1 = (uint64_t)SG_PHILOX_M1 * c.v[2];
    const uint32_t h0 = (uint32_t)(p0 >> 32), l0 = (uint32_t)p0;
    const uint32_t h1 = (uint32_t)(p1 >> 32), l1 = (uint32_t)p1;
#endif
    sg_u32x4 r;
    r.v[0] = h1 ^ c.v[1] ^ k0;
    r.v[1] = l1;
    r.v[2] = h0 ^ c.v[3] ^ k1;
    r.v[3] = l0;
    return r;
}

/* Philox4x32-10: 10 rounds, the key bumped by the Weyl constants between rounds. */
SG_HD sg_u32x4 sg_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2]) {
    sg_u32x4 c;
    c.v[0] = ctr[0];
    c.v[1] = ctr[1];
    c.v[2] = ctr[2];
    c.v[3] = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int r = 0; r < 10; r++) {
        if (r > 0) {
            k0 += SG_PHILOX_W0;
            k1 += SG_PHILOX_W1;
        }
        c = sg_philox4x32_round(c, k0, k1);
    }
    return c;
}

/* The four words for (seed, step, purpose, index) under stepgraph's keying (see top). */
SG_HD sg_u32x4 sg_rng_u32x4(uint64_t seed, int64_t step, uint32_t purpose, uint64_t index) {
    uint32_t ctr[4] = {(uint32_t)index, (uint32_t)(index >> 32), (uint32_t)(uint64_t)step, purpose};
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    return sg_philox4x32_10(ctr, key);
}

/* A 32-bit word -> float strictly inside (0, 1): the midpoints of 2^23 equal bins,
 * (u >> 9) * 2^-23 + 2^-24, in [2^-24, 1 - 2^-24]. Why 23 bits and not 24: a 24-bit midpoint
 * grid (k + 1/2) / 2^24 needs 25 significant bits above 0.5, so in float the top value would
 * round to 1.0; with 23 bits every value is exact (no rounding anywhere, so CPU and CUDA agree
 * bit for bit, FMA contraction or not) and 0 and 1 are never drawn (logf(u) stays finite). */
SG_HD float sg_u32_to_unit(uint32_t u) {
    return (float)(u >> 9) * (1.0f / 8388608.0f) + (1.0f / 16777216.0f);
}

/* Uniform in (0, 1) from word 0. */
SG_HD float sg_rng_uniform(uint64_t seed, int64_t step, uint32_t purpose, uint64_t i) {
    return sg_u32_to_unit(sg_rng_u32x4(seed, step, purpose, i).v[0]);
}

/* A 16-bit half word -> float strictly inside (0, 1): the midpoints of 2^16 equal bins,
 * h 2^-16 + 2^-17, in [2^-17, 1 - 2^-17]; exact in float (17 significant bits), so CPU and CUDA
 * agree bit for bit. */
SG_HD float sg_u16_to_unit(uint32_t h) {
    return (float)h * (1.0f / 65536.0f) + (1.0f / 131072.0f);
}

/* The dropout's uniform of element e of a stream (seed, step, purpose): half word e % 2 (the low
 * half for even e) of word (e / 2) % 4 of counter e / 8, so one Philox call serves eight
 * consecutive elements (every dropout, CPU and CUDA, fused into norm_act or alone, draws its
 * mask this way; sg_rng_dropout8 and sg_rng_dropout4 give a block's eight or four at once).
 *
 * 16 bits a uniform: element e is kept where its uniform is >= p, so the keep probability is p
 * rounded to the bins, within 2^-17 of it (p = 0.1: 0.899994 instead of 0.9; the kept values'
 * scale stays 1 / (1 - p), a bias of 7 parts per million, against bf16's 2^-9 rounding).
 * FlashAttention-2's dropout compares 8-bit draws. History: until 2026-11-28 each element took
 * word 0 of its own counter, then until 2026-11-29 word e % 4 of counter e / 4 (23-bit uniforms,
 * sg_u32_to_unit): eight and then two times the Philox work for the same mask quality, in
 * passes that the draws made issue-bound (docs/design-notes.md). */
SG_HD float sg_rng_dropout(uint64_t seed, int64_t step, uint32_t purpose, uint64_t e) {
    const sg_u32x4 w = sg_rng_u32x4(seed, step, purpose, e >> 3);
    /* (selects, not w.v[...]: a dynamic index would put w in CUDA local memory) */
    const uint32_t lo = (e & 2) ? w.v[1] : w.v[0], hi = (e & 2) ? w.v[3] : w.v[2];
    const uint32_t word = (e & 4) ? hi : lo;
    return sg_u16_to_unit((e & 1) ? word >> 16 : word & 0xFFFFu);
}
/* The eight uniforms of elements 8 b .. 8 b + 7 (sg_rng_dropout of each): one Philox call. */
SG_HD void sg_rng_dropout8(float u[8], uint64_t seed, int64_t step, uint32_t purpose, uint64_t b) {
    const sg_u32x4 w = sg_rng_u32x4(seed, step, purpose, b);
    for (int j = 0; j < 4; j++) {
        u[2 * j] = sg_u16_to_unit(w.v[j] & 0xFFFFu);
        u[2 * j + 1] = sg_u16_to_unit(w.v[j] >> 16);
    }
}
/* The four uniforms of elements 4 b .. 4 b + 3 (sg_rng_dropout of each): half of counter b / 2's
 * draw (a thread that owns four elements draws the whole call and keeps its half). */
SG_HD void sg_rng_dropout4(float u[4], uint64_t seed, int64_t step, uint32_t purpose, uint64_t b) {
    const sg_u32x4 w = sg_rng_u32x4(seed, step, purpose, b >> 1);
    const uint32_t w0 = (b & 1) ? w.v[2] : w.v[0], w1 = (b & 1) ? w.v[3] : w.v[1];
    u[0] = sg_u16_to_unit(w0 & 0xFFFFu), u[1] = sg_u16_to_unit(w0 >> 16);
    u[2] = sg_u16_to_unit(w1 & 0xFFFFu), u[3] = sg_u16_to_unit(w1 >> 16);
}

/* Philox4x32-10 of SG_PHILOX_LANES counters at once, word-major and in place (c[w][l]: word w of
 * lane l): sg_philox4x32_10's rounds as loops over the lanes, which a host compiler turns into
 * vector multiplies; lane l ends with the words of sg_philox4x32_10 of its counter. */
#define SG_PHILOX_LANES 8
SG_HD void sg_philox4x32_10_lanes(uint32_t c[4][SG_PHILOX_LANES], const uint32_t key[2]) {
    uint32_t k0 = key[0], k1 = key[1];
    for (int r = 0; r < 10; r++) {
        if (r > 0) {
            k0 += SG_PHILOX_W0;
            k1 += SG_PHILOX_W1;
        }
        for (int l = 0; l < SG_PHILOX_LANES; l++) {
            const uint64_t p0 = (uint64_t)SG_PHILOX_M0 * c[0][l];
            const uint64_t p1 = (uint64_t)SG_PHILOX_M1 * c[2][l];
            const uint32_t w0 = (uint32_t)(p1 >> 32) ^ c[1][l] ^ k0;
            const uint32_t w2 = (uint32_t)(p0 >> 32) ^ c[3][l] ^ k1;
            c[0][l] = w0, c[1][l] = (uint32_t)p1, c[2][l] = w2, c[3][l] = (uint32_t)p0;
        }
    }
}

/* u[k] = sg_rng_dropout(seed, step, purpose, e0 + k) for k < n: one Philox call per block of
 * eight, SG_PHILOX_LANES blocks at a time where whole ones fit (the host's loops; a CUDA thread
 * draws its own blocks). */
SG_HD void sg_rng_dropout_run(float *u, int64_t n, uint64_t seed, int64_t step, uint32_t purpose,
                              uint64_t e0) {
    const int64_t span = 8 * SG_PHILOX_LANES;
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    int64_t k = 0;
    while (k < n) {
        const uint64_t e = e0 + (uint64_t)k;
        if ((e & 7) == 0 && n - k >= span) {
            uint32_t c[4][SG_PHILOX_LANES];
            for (int l = 0; l < SG_PHILOX_LANES; l++) {
                const uint64_t b = (e >> 3) + (uint64_t)l;
                c[0][l] = (uint32_t)b, c[1][l] = (uint32_t)(b >> 32);
                c[2][l] = (uint32_t)(uint64_t)step, c[3][l] = purpose;
            }
            sg_philox4x32_10_lanes(c, key);
            for (int l = 0; l < SG_PHILOX_LANES; l++)
                for (int j = 0; j < 4; j++) {
                    u[k + 8 * l + 2 * j] = sg_u16_to_unit(c[j][l] & 0xFFFFu);
                    u[k + 8 * l + 2 * j + 1] = sg_u16_to_unit(c[j][l] >> 16);
                }
            k += span;
            continue;
        }
        float w[8];
        sg_rng_dropout8(w, seed, step, purpose, e >> 3);
        for (int j = (int)(e & 7); j < 8 && k < n; j++) u[k++] = w[j];
    }
}

/* Standard normal by Box-Muller on words 0 and 1: r = sqrt(-2 ln u1), z = r cos(2 pi u2).
 * u1 >= 2^-24 bounds |z| by sqrt(2 * 24 ln 2) ~ 5.77; the tails beyond that (p ~ 1e-8) are
 * never drawn, which diffusion training does not notice. Words 2 and 3 are left unused so
 * that element i depends on counter i alone (any thread can draw any element). */
SG_HD float sg_rng_normal(uint64_t seed, int64_t step, uint32_t purpose, uint64_t i) {
    sg_u32x4 w = sg_rng_u32x4(seed, step, purpose, i);
    float u1 = sg_u32_to_unit(w.v[0]);
    float u2 = sg_u32_to_unit(w.v[1]);
    float r = sqrtf(-2.0f * logf(u1));
    return r * cosf(6.28318530717958647692f * u2);
}

/* Integer in [0, n) from word 0 by a 32x32->64 multiply-shift (Lemire): no division, no
 * rejection loop; the bias is at most n / 2^32, negligible for timesteps and batch sizes. */
SG_HD uint32_t sg_rng_index(uint64_t seed, int64_t step, uint32_t purpose, uint64_t i, uint32_t n) {
    return (uint32_t)(((uint64_t)sg_rng_u32x4(seed, step, purpose, i).v[0] * n) >> 32);
}

/* A fair coin from the lowest bit of word 0. */
SG_HD uint32_t sg_rng_bit(uint64_t seed, int64_t step, uint32_t purpose, uint64_t i) {
    return sg_rng_u32x4(seed, step, purpose, i).v[0] & 1u;
}

/* ---- sg_perm: a keyed bijection of [0, n) per epoch, so the data order needs no stored
 * permutation and no state: sample g of the run reads item sg_perm(seed, g / n, g % n, n).
 *
 * A balanced Feistel network over the smallest even bit width 2b with 2^(2b) >= n: the value
 * splits into halves L, R of b bits; each round does (L, R) <- (R, L ^ F(R)) with
 * F = Philox word 0 keyed by seed, counter (R, round, epoch, SG_RNG_PERM), masked to b bits.
 * Each round is invertible whatever F is, so the network permutes [0, 2^(2b)). Cycle walking
 * (apply it again while the result is >= n) restricts that permutation to [0, n): the orbit
 * of pos < n under a permutation returns to pos, so a value < n is always reached, and since
 * 2^(2b) < 4n the expected number of walks is below 4. The epoch is taken mod 2^32. */
#define SG_PERM_ROUNDS 6

SG_HD uint64_t sg_perm_feistel(uint64_t x, uint32_t half_bits, uint64_t seed, uint32_t epoch) {
    uint64_t mask = ((uint64_t)1 << half_bits) - 1; /* half_bits <= 32 */
    uint64_t left = (x >> half_bits) & mask, right = x & mask;
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    for (uint32_t r = 0; r < SG_PERM_ROUNDS; r++) {
        uint32_t ctr[4] = {(uint32_t)right, r, epoch, SG_RNG_PERM};
        uint64_t f = sg_philox4x32_10(ctr, key).v[0] & mask;
        uint64_t next = left ^ f;
        left = right;
        right = next;
    }
    return (left << half_bits) | right;
}

/* pos must lie in [0, n), n >= 1; returns the item at position pos of epoch `epoch`. */
SG_HD int64_t sg_perm(uint64_t seed, int64_t epoch, int64_t pos, int64_t n) {
    if (n <= 1) return 0;
    uint32_t bits = 0; /* smallest bits with 2^bits >= n, then rounded up to even */
    while (bits < 63 && ((uint64_t)1 << bits) < (uint64_t)n) bits++;
    bits += bits & 1u;
    uint64_t x = (uint64_t)pos;
    do {
        x = sg_perm_feistel(x, bits / 2, seed, (uint32_t)(uint64_t)epoch);
    } while (x >= (uint64_t)n);
    return (int64_t)x;
}

/* The dataset item sample g of the run reads (g = step x the global batch + its place in it):
 * epoch g / n in the order of sg_perm. gather_batch and gather_labels both call it, so an
 * image and its label are always the same item's. */
SG_HD int64_t sg_batch_item(uint64_t seed, int64_t g, int64_t n) {
    return sg_perm(seed, g / n, g % n, n);
}

#endif
