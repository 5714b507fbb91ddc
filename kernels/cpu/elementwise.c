/* elementwise.c — pointwise ops over flat arrays of n values, plus the per-(sample, channel)
 * broadcast add that injects the time embedding into a feature map.
 *
 * Shapes: flat ops take n values; add_nc takes x[N,HW,C] and v[N,C].
 * These are single-pass loops: each output element depends on its own inputs only (except
 * add_nc_bwd, a sum over HW in increasing hw, in double), so aliasing an output onto an input
 * of the same index is safe where the contract allows it.
 */
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/scratch.h"

#include <math.h>
#include <string.h>

/* ---- the pointwise ops (common/sg_pointwise.h): each row's math on one element, y[0..nout)
 * from x[0..nin), then the loop every row shares. */
#define PW_ELEM(fn) static inline void fn##_elem(float *y, const float *x)

/* silu(x) = x * sigmoid(x). sigmoid via expf(-x): for x << 0 expf overflows to +inf and
 * s = 1/(1+inf) = 0, which is the correct limit (no NaN). */
PW_ELEM(silu_fwd) {
    float v = x[0];
    y[0] = v / (1.0f + expf(-v));
}

/* x: dy, x. d silu / dx = s + x s (1 - s) = s (1 + x (1 - s)), s = sigmoid(x). */
PW_ELEM(silu_bwd) {
    float v = x[1];
    float s = 1.0f / (1.0f + expf(-v));
    y[0] = x[0] * (s * (1.0f + v * (1.0f - s)));
}

PW_ELEM(add_fwd) {
    y[0] = x[0] + x[1];
}

/* silu(a) * b, silu as above. */
PW_ELEM(silu_mul_fwd) {
    float v = x[0];
    y[0] = v / (1.0f + expf(-v)) * x[1];
}

/* x: dy, a, b. da = dy b silu'(a) with silu' as in silu_bwd; db = dy silu(a). */
PW_ELEM(silu_mul_bwd) {
    float v = x[1], e = expf(-v), g = x[0];
    float s = 1.0f / (1.0f + e);
    y[0] = g * x[2] * (s * (1.0f + v * (1.0f - s)));
    y[1] = g * (v / (1.0f + e));
}

/* gelu(x) = x Phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2 the standard normal CDF: the exact
 * GELU (PyTorch's approximate='none'). erff saturates at +-1, so both limits are exact. */
PW_ELEM(gelu_fwd) {
    float v = x[0];
    y[0] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
}

/* x: dy, x. gelu'(x) = Phi(x) + x phi(x), phi(x) = exp(-x^2 / 2) / sqrt(2 pi). */
PW_ELEM(gelu_bwd) {
    float v = x[1];
    float cdf = 0.5f * (1.0f + erff(v * 0.70710678118654752f));
    float pdf = 0.39894228040143268f * expf(-0.5f * v * v);
    y[0] = x[0] * (cdf + v * pdf);
}

/* cpu_<fn>: element i's inputs are all read before its outputs are stored, so an output may
 * alias any input (the contract in cpu_kernels.h). */
#define PW_OUT_PTR(i) out##i
#define PW_IN_PTR(i) in##i
#define PW_CPU_KERNEL(op, fn, nin, nout, acc)                                                      \
    void cpu_##fn(SG_PW_CPU_PARAMS(nin, nout)) {                                                   \
        float *const out[] = {SG_PW_EACH_##nout(PW_OUT_PTR)};                                      \
        const float *const in[] = {SG_PW_EACH_##nin(PW_IN_PTR)};                                   \
        for (int64_t i = 0; i < n; i++) {                                                          \
            float x[nin], y[nout];                                                                 \
            for (int k = 0; k < nin; k++) x[k] = in[k][i];                                         \
            fn##_elem(y, x);                                                                       \
            for (int k = 0; k < nout; k++) out[k][i] = y[k];                                       \
        }                                                                                          \
    }
SG_POINTWISE_LIST(PW_CPU_KERNEL)

/* ---- the other elementwise ops */

/* memmove: the contract allows y == x (a no-op) and the backend may copy within the arena. */
void cpu_copy(float *y, const float *x, int64_t n) {
    if (y != x) memmove(y, x, (size_t)n * sizeof(float));
}

void cpu_scale(float *y, const float *x, float s, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * s;
}

void cpu_add_nc_fwd(float *y, const float *x, const float *v, int N, int HW, int C) {
    for (int n = 0; n < N; n++) {
        const float *vn = v + (int64_t)n * C;
        for (int64_t hw = 0; hw < HW; hw++) {
            int64_t off = ((int64_t)n * HW + hw) * C;
            for (int c = 0; c < C; c++) y[off + c] = x[off + c] + vn[c];
        }
    }
}

/* The broadcast's adjoint: dv[n][c] = sum over hw of dy[n][hw][c]. */
void cpu_add_nc_bwd(float *dv, const float *dy, int N, int HW, int C) {
    for (int n = 0; n < N; n++)
        sg_cpu_colsum(dv + (int64_t)n * C, dy + (int64_t)n * HW * C, HW, C, C);
}
