/* linear.c — fully connected layer, forward and both backward passes, as single GEMMs.
 *
 * Shapes: x[N,K], w[M,K] (out, in — PyTorch's nn.Linear layout), b[M], y[N,M].
 *   forward     y[N][M]  = x[N][K] w^T[K][M] + b
 *   bwd data    dx[N][K] = dy[N][M] w[M][K]
 *   bwd weight  dw[M][K] = dy^T[M][N] x[N][K];  db[m] = sum_n dy[n][m]
 * Each is one sg_cpu_sgemm (cblas_sgemm with K cut into fixed blocks, so the bits do not depend
 * on the BLAS thread count; see scratch.h); db sums rows in increasing n in double.
 */
#include "common/sg_base.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/scratch.h"

void cpu_linear_fwd(float *y, const float *x, const float *w, const float *b, int N, int K, int M) {
    SG_ASSERT(N > 0 && K > 0 && M > 0);
    sg_cpu_sgemm(0, 1, N, M, K, 1.0f, x, K, w, K, 0.0f, y, M);
    if (b) {
        for (int n = 0; n < N; n++) {
            float *row = y + (int64_t)n * M;
            for (int m = 0; m < M; m++) row[m] += b[m];
        }
    }
}

void cpu_linear_bwd_data(float *dx, const float *dy, const float *w, int N, int K, int M) {
    SG_ASSERT(N > 0 && K > 0 && M > 0);
    sg_cpu_sgemm(0, 0, N, K, M, 1.0f, dy, M, w, K, 0.0f, dx, K);
}

void cpu_linear_bwd_weight(float *dw, float *db, const float *dy, const float *x, int N, int K,
                           int M) {
    SG_ASSERT(N > 0 && K > 0 && M > 0);
    sg_cpu_sgemm(1, 0, M, K, N, 1.0f, dy, M, x, K, 0.0f, dw, K);
    if (db) sg_cpu_colsum(db, dy, N, M, M);
}
