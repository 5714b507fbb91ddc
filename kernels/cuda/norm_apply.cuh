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
 *   y = keep ? a / (1 - p) : 0                      (dropout p > 0: keep = uniform(seed, step,
 *                                                    purpose, i0 + i) >= p, i the element's
 *                                                    index in x; y = a without)
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
__device__ __forceinline__ void gn_welford(float &m, float &M2, float u, int k) {
    const float d = __fsub_rn(u, m);
    m = __fmaf_rn(d, __fdiv_rn(1.0f, (float)k), m);
    M2 = __fmaf_rn(d, __fsub_rn(u, m), M2);
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
/* forward tail at element i of x: the activation, then the dropout */
__device__ __forceinline__ float na_tail_fwd(float z, int act, const na_drop &d, int64_t i) {
    float a = act == SG_ACT_SILU ? z / (1.0f + expf(-z)) : z;
    if (d.p > 0.0f)
        a = sg_rng_uniform(d.seed, d.step, d.purpose, d.i0 + (uint64_t)i) >= d.p ? a * d.scale
                                                                                 : 0.0f;
    return a;
}
/* backward tail at element i of x: dz from dy through the dropout and the activation (SiLU':
 * s (1 + z (1 - s)), s = 1 / (1 + expf(-z))), in explicitly rounded operations: the backward
 * partials (gn_bwd_step) are computed by two kernels that must agree bit for bit */
__device__ __forceinline__ float na_tail_bwd(float dy, float z, int act, const na_drop &d,
                                             int64_t i) {
    if (d.p > 0.0f)
        dy = sg_rng_uniform(d.seed, d.step, d.purpose, d.i0 + (uint64_t)i) >= d.p
                 ? __fmul_rn(dy, d.scale)
                 : 0.0f;
    if (act == SG_ACT_SILU) {
        const float s = __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-z)));
        dy = __fmul_rn(dy, __fmul_rn(s, __fmaf_rn(z, __fsub_rn(1.0f, s), 1.0f)));
    }
    return dy;
}
/* the affine transform's multiplier of channel c in group (n, g): rstd[n, g] gamma[c] */
__device__ __forceinline__ float na_apply_scale(float rstd, float gamma) {
    return rstd * gamma;
}
/* y at element i of x from u = x (+ v), the group's mean, the channel's scale
 * (na_apply_scale) and beta: the apply pass's value before its rounding to the stored dtype */
__device__ __forceinline__ float na_apply_value(float u, float mean, float scale, float beta,
                                                int act, const na_drop &d, int64_t i) {
    return na_tail_fwd(fmaf(u - mean, scale, beta), act, d, i);
}

/* One step of the backward statistics' canonical partials (norm.cu): element i of x with
 * u = x (+ v), its group's mean and rstd, its channel's scale (na_apply_scale) and beta, and dy
 * (the gradient of norm_act's output): dz by na_tail_bwd of z = fmaf(u - mean, scale, beta)
 * (the apply pass's z), then (a, b) += (dz, dz xhat), xhat = (u - mean) rstd, explicitly
 * rounded: norm_bwd_partials_kernel and the data gradient's epilogue (conv_tc.cu) agree bit
 * for bit. */
__device__ __forceinline__ void gn_bwd_step(float &a, float &b, float dy, float u, float mean,
                                            float rstd, float scale, float beta, int act,
                                            const na_drop &d, int64_t i) {
    const float uc = __fsub_rn(u, mean);
    const float dz = na_tail_bwd(dy, __fmaf_rn(uc, scale, beta), act, d, i);
    a = __fadd_rn(a, dz);
    b = __fmaf_rn(dz, __fmul_rn(uc, rstd), b);
}

/* The fused prologue of both tensor-core generations (sg_conv_fuse.norm): 8 channels
 * ch .. ch + 7 of input pixel q (of image n) of x, 16 bytes of shared memory at s (landed by the
 * calling thread's cp.async in conv_tc.cu, by TMA in conv_wgmma.cu), replaced in place by
 * norm_act's y of them (the apply pass's arithmetic above, the dropout's element index that of
 * x), rounded to bf16 as the unfused plan stores y. C: the channels of x. Its
 * operands (statistics, gamma, beta, v, the dropout key) are read from global memory per chunk
 * (L1 hits): the main loop's registers are spent on the accumulators. */
__device__ __forceinline__ void tc_norm_chunk(uint16_t *s, const sg_conv_fuse &f, int n, int64_t q,
                                              int ch, int C) {
    /* (the key is read here, not held through the main loop: registers are the limit) */
    const na_drop dk = na_drop_load(f.drop);
    const uint32_t *vw =
        f.v ? (const uint32_t *)((const uint16_t *)f.v + (int64_t)n * C + ch) : NULL;
    uint32_t *sw = (uint32_t *)s;
    const int cg = C / f.G;
    /* the channels' group, walked: one division per chunk, not one per channel (the same g) */
    int g = n * f.G + ch / cg, r = ch % cg;
    /* two channels (one 32-bit word) at a time, not unrolled: eight at once would hold every
     * operand load in flight in registers the accumulators need */
#pragma unroll 1
    for (int k = 0; k < 8; k += 2) {
        const uint32_t xw = sw[k / 2], vv = vw ? vw[k / 2] : 0u;
        uint32_t out = 0;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int c = ch + k + h;
            const float x = dev_bf16_to_f32((uint16_t)(xw >> (16 * h)));
            const float u = vw ? x + dev_bf16_to_f32((uint16_t)(vv >> (16 * h))) : x;
            const float y = na_apply_value(u, f.mean[g], na_apply_scale(f.rstd[g], f.gamma[c]),
                                           f.beta[c], f.act, dk, q * C + c);
            out |= (uint32_t)dev_f32_to_bf16(y) << (16 * h);
            if (++r == cg) r = 0, g++;
        }
        sw[k / 2] = out;
    }
}

#endif
