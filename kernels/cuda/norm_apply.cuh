/* norm_apply.cuh — the one definition of norm_act's apply arithmetic on the device, shared by
 * its own apply pass (norm.cu's norm_apply_kernel: the forward's second pass and the backward
 * pass's recomputation) and by the convolutions that compute a virtual normalised operand as
 * they load it (conv_tc.cu, planner/fuse.c). Because both run exactly these expressions, a
 * fused convolution multiplies the very bf16 values the unfused plan would have stored and read
 * back. The math is kernels/cpu/norm.c's:
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

#endif
