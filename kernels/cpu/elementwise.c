/* elementwise.c — pointwise ops over flat arrays of n values, plus the per-(sample, channel)
 * broadcast add that injects the time embedding into a feature map.
 *
 * Shapes: flat ops take n values; add_nc takes x[N,HW,C] and v[N,C].
 * These are single-pass loops: each output element depends on its own inputs only (except
 * add_nc_bwd, a sum over HW in increasing hw, in double), so aliasing an output onto an input
 * of the same index is safe where the contract allows it.
 */
#include "common/sg_pointwise_math.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/scratch.h"

#include <math.h>
#include <string.h>

/* ---- the pointwise ops (common/sg_pointwise.h): each row's math on one element is
 * common/sg_pointwise_math.h's sg_pw_<fn>, shared with the CUDA kernel; here the loop every
 * row shares. */

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
            sg_pw_##fn(y, x);                                                                      \
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
