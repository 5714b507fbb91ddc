/* sg_pointwise_math.h — the math of the pointwise ops (sg_pointwise.h): one element function
 * per row, y[0..nout) from x[0..nin) in fp32, written once for the CPU reference
 * (kernels/cpu/elementwise.c) and the CUDA kernel (kernels/cuda/elementwise.cu), which differ
 * only in the loop around it. One text, so the two cannot drift apart; what still differs is
 * the platform's expf/erff (the CUDA device's are within 2 ulp of the host's: the CUDA op
 * test compares with a tolerance).
 *
 * Header-only, C11 and CUDA (SG_HD, common/sg_base.h). Every input of an element is read
 * before any output is written, so an output may alias an input.
 */
#ifndef SG_POINTWISE_MATH_H
#define SG_POINTWISE_MATH_H

#include <math.h>

#include "common/sg_base.h"

/* silu(x) = x sigmoid(x). sigmoid via expf(-x): for x << 0 expf overflows to +inf and
 * s = 1/(1+inf) = 0, which is the correct limit (no NaN). */
SG_HD void sg_pw_silu_fwd(float *y, const float *x) {
    float v = x[0];
    y[0] = v / (1.0f + expf(-v));
}

/* x: dy, x. d silu / dx = s + x s (1 - s) = s (1 + x (1 - s)), s = sigmoid(x). */
SG_HD void sg_pw_silu_bwd(float *y, const float *x) {
    float v = x[1];
    float s = 1.0f / (1.0f + expf(-v));
    y[0] = x[0] * (s * (1.0f + v * (1.0f - s)));
}

SG_HD void sg_pw_add_fwd(float *y, const float *x) {
    y[0] = x[0] + x[1];
}

/* silu(a) * b, silu as above. */
SG_HD void sg_pw_silu_mul_fwd(float *y, const float *x) {
    float v = x[0];
    y[0] = v / (1.0f + expf(-v)) * x[1];
}

/* x: dy, a, b. da = dy b silu'(a) with silu' as in silu_bwd; db = dy silu(a). */
SG_HD void sg_pw_silu_mul_bwd(float *y, const float *x) {
    float v = x[1], e = expf(-v), g = x[0];
    float s = 1.0f / (1.0f + e);
    y[0] = g * x[2] * (s * (1.0f + v * (1.0f - s)));
    y[1] = g * (v / (1.0f + e));
}

/* gelu(x) = x Phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2 the standard normal CDF: the exact
 * GELU (PyTorch's approximate='none'). erff saturates at +-1, so both limits are exact. */
SG_HD void sg_pw_gelu_fwd(float *y, const float *x) {
    float v = x[0];
    y[0] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
}

/* x: dy, x. gelu'(x) = Phi(x) + x phi(x), phi(x) = exp(-x^2 / 2) / sqrt(2 pi). */
SG_HD void sg_pw_gelu_bwd(float *y, const float *x) {
    float v = x[1];
    float cdf = 0.5f * (1.0f + erff(v * 0.70710678118654752f));
    float pdf = 0.39894228040143268f * expf(-0.5f * v * v);
    y[0] = x[0] * (cdf + v * pdf);
}

#endif
