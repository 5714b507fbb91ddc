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

/* silu(x) = x * sigmoid(x). sigmoid via expf(-x): for x << 0 expf overflows to +inf and
 * s = 1/(1+inf) = 0, which is the correct limit (no NaN). */
void cpu_silu_fwd(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        y[i] = v / (1.0f + expf(-v));
    }
}

/* d silu / dx = s + x s (1 - s) = s (1 + x (1 - s)), s = sigmoid(x). dx may alias dy: each
 * dy[i] is read before dx[i] is written. */
void cpu_silu_bwd(float *dx, const float *dy, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        float s = 1.0f / (1.0f + expf(-v));
        dx[i] = dy[i] * (s * (1.0f + v * (1.0f - s)));
    }
}

/* silu(a) * b, silu as above. */
void cpu_silu_mul_fwd(float *y, const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float v = a[i];
        y[i] = v / (1.0f + expf(-v)) * b[i];
    }
}

/* da = dy b silu'(a) with silu' as in cpu_silu_bwd; db = dy silu(a). Both are computed before
 * either is stored, so da or db may alias dy. */
void cpu_silu_mul_bwd(float *da, float *db, const float *dy, const float *a, const float *b,
                      int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float v = a[i], e = expf(-v), g = dy[i];
        float s = 1.0f / (1.0f + e);
        float ga = g * b[i] * (s * (1.0f + v * (1.0f - s))), gb = g * (v / (1.0f + e));
        da[i] = ga;
        db[i] = gb;
    }
}

void cpu_add_fwd(float *y, const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

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
