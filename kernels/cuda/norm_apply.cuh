/* norm_apply.cuh — the one definition of norm_act's apply arithmetic on the device, shared by
 * its own apply pass (norm.cu's norm_apply_kernel: the forward's second pass and the backward
 * pass's recomputation) and by the convolutions that compute a virtual normalised operand as
 * they load it (conv_tc.cu, conv_wgmma.cu; planner/fuse.c). Because both run exactly these
 * expressions, a fused convolution multiplies the very bf16 values the unfused plan would have
 * stored and read back. The math is kernels/cpu/norm.c's:
 *
 *   u = x + v[n, c]                                 (one fp32 add; u = x without v)
 *   z = fmaf(u - mean[n, g], rstd[n, g] gamma[c], beta[c])
 *   a = z / (1 + expf(-z))                          (act silu; a = z with act none)
 *   y = keep ? a / (1 - p) : 0                      (dropout p > 0: keep = sg_rng_dropout(seed,
 *                                                    step, purpose, i0 + i) >= p, i the
 *                                                    element's index in x; y = a without)
 *
 * SiLU's precision follows the stored dtype (FAST below). In fp32: expf and an IEEE division,
 * as the CPU. In bf16: the sigmoid as rcp.approx(1 + ex2.approx(-z log2 e)) (dev_ex2_approx,
 * dev_rcp_approx), the form of CUDA's __expf and __fdividef without their range checks. CUDA's
 * guide bounds that exponential's error by 2 + floor(|1.173 z|) ulp, and rcp.approx is within
 * about 1 ulp: under 2^-18 relative for |z| < 16 (20 ulp and 1), 2^9 times below bf16's half ulp,
 * and every value this arithmetic produces is stored as bf16 or summed into fp32 statistics.
 * The exact forms take 19 instructions an element each way on sm_90 (the expf range
 * reduction, the division's Newton steps and slow-path check); the approximate ones 5 forward
 * and 8 backward (docs/design-notes.md). Why it matters: the passes that apply SiLU move 4 to
 * 6 bytes an element, and an H200 issues about 7 instructions a byte at full bandwidth.
 * torch.compile's SiLU takes the same approximations (Triton's exp is ex2.approx). Every
 * kernel of a dtype runs the same form, so the fused and unfused plans still agree bit for
 * bit.
 *
 * Internal to kernels/cuda (after cuda_common.cuh).
 */
#ifndef SG_NORM_APPLY_CUH
#define SG_NORM_APPLY_CUH

#include "common/philox.h"
#include "kernels/cuda/cuda_common.cuh"

/* One step of the statistics' canonical partials (norm.cu, "The statistics' partials"):
 * Welford's update of the running (m, M2) of a segment's channel by its k-th value u (k = 1,
 * 2, ...), in explicitly rounded operations, so that every kernel that computes a partial (the
 * normalisation's own pass, the epilogue of the convolution before it: conv_tc.cu) computes the
 * same bits, whatever the compiler would contract. */
__device__ __forceinline__ void gn_welford_r(float &m, float &M2, float u, float rk) {
    const float d = __fsub_rn(u, m);
    m = __fmaf_rn(d, rk, m);
    M2 = __fmaf_rn(d, __fsub_rn(u, m), M2);
}
/* ... rk = 1 / k, correctly rounded: gn_welford's (a caller with a table of them: the same bits) */
__device__ __forceinline__ float gn_welford_rcp(int k) {
    return __fdiv_rn(1.0f, (float)k);
}
__device__ __forceinline__ void gn_welford(float &m, float &M2, float u, int k) {
    gn_welford_r(m, M2, u, gn_welford_rcp(k));
}

/* The statistics' partials of a convolution's stored output tile (both tensor-core generations'
 * forward epilogues; sg_conv_fuse.stats): the tile in shared memory, bf16, row r (pixel m0 + r of
 * the P = N HoWo output pixels) at tile + r * ld, `rows` rows that are whole segments of
 * f.stats_seg pixels of one image (the launchers check it), columns n0 .. + cols of Co. Threads
 * tid, + nthreads, .. take chain (segment j, column cc), consecutive threads consecutive columns
 * (conflict-free reads), and run gn_welford down its rows in order: norm_partials_kernel's
 * arithmetic on the same values, so the same bits. Rows past P are not read. */
__device__ __forceinline__ void gn_tile_partials(const uint16_t *tile, int ld,
                                                 const sg_conv_fuse &f, int rows, int cols,
                                                 int64_t m0, int n0, int64_t P, int Co, int HoWo,
                                                 int tid, int nthreads) {
    const int seg = f.stats_seg, nseg = rows / seg;
    for (int ch = tid; ch < nseg * cols; ch += nthreads) {
        const int j = ch / cols, cc = ch - j * cols, co = n0 + cc;
        const int64_t p0 = m0 + (int64_t)j * seg;
        if (co >= Co || p0 >= P) continue;
        float m = 0.0f, M2 = 0.0f;
        const uint16_t *col = tile + (int64_t)j * seg * ld + cc;
        for (int r = 0; r < seg; r++) gn_welford(m, M2, dev_bf16_to_f32(col[r * ld]), r + 1);
        const int64_t n = p0 / HoWo, s = (p0 - n * HoWo) / seg;
        reinterpret_cast<float2 *>(f.stats)[(n * (HoWo / seg) + s) * f.stats_ld + co] =
            make_float2(m, M2);
    }
}

/* the dropout's key, read from device memory once per thread */
struct na_drop {
    float p, scale;
    uint32_t purpose;
    uint64_t seed, i0;
    int64_t step;
};
__device__ __forceinline__ na_drop na_drop_load(const sg_drop &d) {
    na_drop r = {d.p, d.p < 1.0f ? 1.0f / (1.0f - d.p) : 0.0f, d.purpose, 0, d.i0, 0};
    if (d.p > 0.0f) r.seed = d.seed[0], r.step = d.step[0];
    return r;
}
/* The dropout on one element with its uniform u (sg_rng_dropout): kept times 1 / (1 - p), or
 * 0; the backward (BWD) multiplies explicitly rounded, as na_tail_bwd's other operations. */
template <bool BWD> __device__ __forceinline__ float na_drop1(float a, const na_drop &d, float u) {
    return u >= d.p ? (BWD ? __fmul_rn(a, d.scale) : a * d.scale) : 0.0f;
}
/* ... on element i of x, its uniform drawn alone (sg_rng_dropout); a unchanged where p = 0 */
template <bool BWD>
__device__ __forceinline__ float na_drop_at(float a, const na_drop &d, int64_t i) {
    return d.p > 0.0f
               ? na_drop1<BWD>(a, d, sg_rng_dropout(d.seed, d.step, d.purpose, d.i0 + (uint64_t)i))
               : a;
}
/* ... on VEC consecutive elements e0 .. e0 + VEC - 1 of x, in place: one Philox call per eight
 * of them (sg_rng_dropout8) where e0 % 8 == 0 and VEC % 8 == 0, else one per four
 * (sg_rng_dropout4: the call's half, where e0 % 4 == 0 and VEC % 4 == 0), else one per
 * element; the same uniforms every way (sg_rng_dropout's packing), so the same bits as na_drop1
 * element by element. Nothing where p = 0. */
template <bool BWD, int VEC>
__device__ __forceinline__ void na_drop_vec(float (&o)[VEC], const na_drop &d, uint64_t e0) {
    if (d.p <= 0.0f) return;
    if constexpr (VEC % 8 == 0) {
        if ((e0 & 7) == 0) {
#pragma unroll
            for (int b = 0; b < VEC; b += 8) {
                float u[8];
                sg_rng_dropout8(u, d.seed, d.step, d.purpose, (e0 >> 3) + (uint64_t)(b / 8));
#pragma unroll
                for (int j = 0; j < 8; j++) o[b + j] = na_drop1<BWD>(o[b + j], d, u[j]);
            }
            return;
        }
    }
    if constexpr (VEC % 4 == 0) {
        if ((e0 & 3) == 0) {
#pragma unroll
            for (int b = 0; b < VEC; b += 4) {
                float u[4];
                sg_rng_dropout4(u, d.seed, d.step, d.purpose, (e0 >> 2) + (uint64_t)(b / 4));
#pragma unroll
                for (int j = 0; j < 4; j++) o[b + j] = na_drop1<BWD>(o[b + j], d, u[j]);
            }
            return;
        }
    }
#pragma unroll
    for (int j = 0; j < VEC; j++)
        o[j] = na_drop1<BWD>(o[j], d, sg_rng_dropout(d.seed, d.step, d.purpose, e0 + (uint64_t)j));
}
/* SiLU's precision for storage type T (top): the approximations for bf16 (uint16_t) */
template <typename T> constexpr bool na_fast_act = sizeof(T) == 2;
/* bf16's sigmoid (top): each operation explicitly rounded, so that every kernel computes the
 * same bits (-z log2 e, 1 + e) */
__device__ __forceinline__ float na_sigmoid_fast(float z) {
    return dev_rcp_approx(__fadd_rn(1.0f, dev_ex2_approx(__fmul_rn(z, -1.44269504088896341f))));
}
/* the activation (FAST: top) */
template <bool FAST> __device__ __forceinline__ float na_act_fwd(float z, int act) {
    if (act != SG_ACT_SILU) return z;
    return FAST ? __fmul_rn(z, na_sigmoid_fast(z)) : z / (1.0f + expf(-z));
}
/* forward tail at element i of x: the activation, then the dropout (na_drop1) */
template <bool FAST>
__device__ __forceinline__ float na_tail_fwd(float z, int act, const na_drop &d, int64_t i) {
    return na_drop_at<false>(na_act_fwd<FAST>(z, act), d, i);
}
/* the activation's backward: dz from the dropout's output gradient (SiLU': s (1 + z (1 - s)),
 * s = 1 / (1 + expf(-z))), in explicitly rounded operations: the backward partials
 * (gn_bwd_step) are computed by two kernels that must agree bit for bit */
template <bool FAST> __device__ __forceinline__ float na_act_bwd(float dy, float z, int act) {
    if (act == SG_ACT_SILU) {
        const float s = FAST ? na_sigmoid_fast(z) : __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-z)));
        dy = __fmul_rn(dy, __fmul_rn(s, __fmaf_rn(z, __fsub_rn(1.0f, s), 1.0f)));
    }
    return dy;
}
/* backward tail at element i of x: dz from dy through the dropout (na_drop1), then the
 * activation (na_act_bwd) */
template <bool FAST>
__device__ __forceinline__ float na_tail_bwd(float dy, float z, int act, const na_drop &d,
                                             int64_t i) {
    return na_act_bwd<FAST>(na_drop_at<true>(dy, d, i), z, act);
}
/* The statistics' rows s[j] = n G + (c0 + j) / cg of VEC consecutive channels c0.. of sample n
 * (cg = C / G channels a group): one division for the first, a carry for the others (the
 * elementwise kernels did one integer division a channel, a software sequence of some twenty
 * instructions each on the GPU, for a few elements' arithmetic). */
template <int VEC> __device__ __forceinline__ void na_groups(int *s, int n, int G, int c0, int cg) {
    int g = c0 / cg, r = c0 - g * cg;
    g += n * G;
#pragma unroll
    for (int j = 0; j < VEC; j++) {
        s[j] = g;
        if (++r == cg) r = 0, g++;
    }
}
/* the affine transform's multiplier of channel c in group (n, g): rstd[n, g] gamma[c] */
__device__ __forceinline__ float na_apply_scale(float rstd, float gamma) {
    return rstd * gamma;
}
/* y at element i of x from u = x (+ v), the group's mean, the channel's scale
 * (na_apply_scale) and beta: the apply pass's value before its rounding to the stored dtype */
template <bool FAST>
__device__ __forceinline__ float na_apply_value(float u, float mean, float scale, float beta,
                                                int act, const na_drop &d, int64_t i) {
    return na_tail_fwd<FAST>(fmaf(u - mean, scale, beta), act, d, i);
}
/* ... without the dropout (the caller's na_drop_vec follows) */
template <bool FAST>
__device__ __forceinline__ float na_apply_act(float u, float mean, float scale, float beta,
                                              int act) {
    return na_act_fwd<FAST>(fmaf(u - mean, scale, beta), act);
}

/* One step of the backward statistics' canonical partials (norm.cu): element i of x with
 * u = x (+ v), its group's mean and rstd, its channel's scale (na_apply_scale) and beta, and dy
 * (the gradient of norm_act's output): dz by na_tail_bwd of z = fmaf(u - mean, scale, beta)
 * (the apply pass's z), then (a, b) += (dz, dz xhat), xhat = (u - mean) rstd, explicitly
 * rounded: norm_bwd_partials_kernel and the data gradient's epilogue (conv_tc.cu) agree bit
 * for bit. */
/* ... as its two halves: the element's operands (dz, xhat), which depend on the element alone,
 * and the chain's step (a, b) += (dz, dz xhat), which depends on every element before it in the
 * segment: norm_bwd_partials_kernel computes the first for a tile's elements in parallel and
 * then runs the chains */
template <bool FAST>
__device__ __forceinline__ float2 gn_bwd_operands(float dyd, float u, float mean, float rstd,
                                                  float scale, float beta, int act) {
    const float uc = __fsub_rn(u, mean);
    return make_float2(na_act_bwd<FAST>(dyd, __fmaf_rn(uc, scale, beta), act), __fmul_rn(uc, rstd));
}
__device__ __forceinline__ void gn_bwd_accum(float &a, float &b, float dz, float xhat) {
    a = __fadd_rn(a, dz);
    b = __fmaf_rn(dz, xhat, b);
}
template <bool FAST>
__device__ __forceinline__ void gn_bwd_step_dropped(float &a, float &b, float dyd, float u,
                                                    float mean, float rstd, float scale, float beta,
                                                    int act) {
    const float2 o = gn_bwd_operands<FAST>(dyd, u, mean, rstd, scale, beta, act);
    gn_bwd_accum(a, b, o.x, o.y);
}
template <bool FAST>
__device__ __forceinline__ void gn_bwd_step(float &a, float &b, float dy, float u, float mean,
                                            float rstd, float scale, float beta, int act,
                                            const na_drop &d, int64_t i) {
    gn_bwd_step_dropped<FAST>(a, b, na_drop_at<true>(dy, d, i), u, mean, rstd, scale, beta, act);
}

/* The fused prologue of both tensor-core generations (sg_conv_fuse.norm): 8 channels
 * ch .. ch + 7 of input pixel q (of image n) of x, 16 bytes of shared memory at s (landed by the
 * calling thread's cp.async in conv_tc.cu, by TMA in conv_wgmma.cu), replaced in place by
 * norm_act's y of them (the apply pass's arithmetic above, the dropout's element index that of
 * x), rounded to bf16 as the unfused plan stores y. C: the channels of x. Its
 * operands (statistics, gamma, beta, v, the dropout key) are read from global memory per chunk
 * (L1 hits): the main loop's registers are spent on the accumulators. WIDE: all 8 at once,
 * the dropout's uniforms drawn by one Philox call (na_drop_vec; the same values, so the same
 * bits), for a caller with registers to spare (conv_wgmma.cu's halo rewrite, before its
 * accumulators are live); otherwise two channels at a time, one Philox call per element. */
/* tc_norm_chunk with the first channel's group g (n G + ch / cg) and its place r in it (ch % cg)
 * given, cg = C / G: for a caller that has them without a division (conv_wgmma.cu's halo
 * rewrite) */
template <bool WIDE = false>
__device__ __forceinline__ void tc_norm_chunk_in(uint16_t *s, const sg_conv_fuse &f, int n,
                                                 int64_t q, int ch, int C, int g, int r, int cg) {
    /* (the key is read here, not held through the main loop: registers are the limit) */
    const na_drop dk = na_drop_load(f.drop);
    const uint32_t *vw =
        f.v ? (const uint32_t *)((const uint16_t *)f.v + (int64_t)n * C + ch) : NULL;
    uint32_t *sw = (uint32_t *)s;
    /* the channels' group, walked from the first's: the same g for each as a division */
    if constexpr (WIDE) {
        float o[8];
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const int c = ch + k;
            const float x = dev_bf16_to_f32((uint16_t)(sw[k / 2] >> (16 * (k % 2))));
            const float u = vw ? x + dev_bf16_to_f32((uint16_t)(vw[k / 2] >> (16 * (k % 2)))) : x;
            o[k] = na_apply_act<true>(u, f.mean[g], na_apply_scale(f.rstd[g], f.gamma[c]),
                                      f.beta[c], f.act);
            if (++r == cg) r = 0, g++;
        }
        na_drop_vec<false, 8>(o, dk, dk.i0 + (uint64_t)(q * C + ch));
#pragma unroll
        for (int k = 0; k < 8; k += 2)
            sw[k / 2] = (uint32_t)dev_f32_to_bf16(o[k]) | (uint32_t)dev_f32_to_bf16(o[k + 1]) << 16;
    } else {
        /* two channels (one 32-bit word) at a time, not unrolled: eight at once would hold
         * every operand load in flight in registers the accumulators need */
#pragma unroll 1
        for (int k = 0; k < 8; k += 2) {
            const uint32_t xw = sw[k / 2], vv = vw ? vw[k / 2] : 0u;
            uint32_t out = 0;
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int c = ch + k + h;
                const float x = dev_bf16_to_f32((uint16_t)(xw >> (16 * h)));
                const float u = vw ? x + dev_bf16_to_f32((uint16_t)(vv >> (16 * h))) : x;
                const float y =
                    na_apply_value<true>(u, f.mean[g], na_apply_scale(f.rstd[g], f.gamma[c]),
                                         f.beta[c], f.act, dk, q * C + c);
                out |= (uint32_t)dev_f32_to_bf16(y) << (16 * h);
                if (++r == cg) r = 0, g++;
            }
            sw[k / 2] = out;
        }
    }
}

template <bool WIDE = false>
__device__ __forceinline__ void tc_norm_chunk(uint16_t *s, const sg_conv_fuse &f, int n, int64_t q,
                                              int ch, int C) {
    /* the channels' group: one division per chunk, not one per channel */
    const int cg = C / f.G;
    tc_norm_chunk_in<WIDE>(s, f, n, q, ch, C, n * f.G + ch / cg, ch % cg, cg);
}

#endif
