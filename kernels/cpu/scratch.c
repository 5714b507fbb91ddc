/* scratch.c — the shared fixed-size scratch buffer, the column-sum helper and the K-blocked
 * GEMM wrapper (see scratch.h). */
#include "common/sg_base.h"
#include "kernels/cpu/scratch.h"

#include <cblas.h>

#include <pthread.h>

static _Alignas(64) float sg_cpu_scratch_buf[SG_CPU_SCRATCH_FLOATS];
static pthread_mutex_t sg_cpu_scratch_lock = PTHREAD_MUTEX_INITIALIZER;

float *sg_cpu_scratch_acquire(void) {
    pthread_mutex_lock(&sg_cpu_scratch_lock);
    return sg_cpu_scratch_buf;
}

void sg_cpu_scratch_release(void) {
    pthread_mutex_unlock(&sg_cpu_scratch_lock);
}

/* Channels in blocks of SG_CPU_CBLK: the inner loop reads a contiguous run of one row, the
 * accumulators stay in registers/L1, and channel c's sum is always x[0,c] + x[1,c] + ... in
 * that order, whatever the block size. */
void sg_cpu_colsum(float *sum, const float *x, int64_t rows, int C, int64_t ld) {
    for (int c0 = 0; c0 < C; c0 += SG_CPU_CBLK) {
        int cb = C - c0 < SG_CPU_CBLK ? C - c0 : SG_CPU_CBLK;
        double acc[SG_CPU_CBLK] = {0};
        for (int64_t r = 0; r < rows; r++) {
            const float *row = x + r * ld + c0;
            for (int c = 0; c < cb; c++) acc[c] += row[c];
        }
        for (int c = 0; c < cb; c++) sum[c0 + c] = (float)acc[c];
    }
}

/* Block kb of op(A) starts kb columns in (A[M][K] row-major, lda) or kb rows down (A^T: A is
 * [K][M]); likewise op(B) starts kb rows down (B[K][N]) or kb columns in (B^T: B is [N][K]). */
void sg_cpu_sgemm(int transA, int transB, int M, int N, int K, float alpha, const float *A, int lda,
                  const float *B, int ldb, float beta, float *C, int ldc) {
    SG_ASSERT(M > 0 && N > 0 && K > 0);
    for (int k0 = 0; k0 < K; k0 += SG_CPU_GEMM_KB) {
        int kb = K - k0 < SG_CPU_GEMM_KB ? K - k0 : SG_CPU_GEMM_KB;
        const float *a = transA ? A + (int64_t)k0 * lda : A + k0;
        const float *b = transB ? B + k0 : B + (int64_t)k0 * ldb;
        cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
                    transB ? CblasTrans : CblasNoTrans, M, N, kb, alpha, a, lda, b, ldb,
                    k0 == 0 ? beta : 1.0f, C, ldc);
    }
}
