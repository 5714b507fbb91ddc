/* scratch.h — internals shared by the CPU reference kernels: the one fixed-size scratch
 * buffer, a column-sum helper, the thread-count-independent GEMM wrapper, the dropout's
 * branch-free select (sg_cpu_keep_or_zero) and the task pool (sg_cpu_parallel) that runs the
 * GEMMs and the normalisation passes.
 *
 * GEMM-shaped kernels (conv via im2col, the attention backward) stage data in a buffer of
 * SG_CPU_SCRATCH_FLOATS floats. Its size is a compile-time constant: callers split their work
 * into chunks that fit, so nothing grows with the problem size and nothing is allocated per
 * call. The buffer lives in .bss (pages are only touched when used) and a mutex serialises
 * its users, so the kernels stay correct if two threads ever call them at once.
 *
 * Internal to kernels/cpu: not part of the kernel contract in cpu_kernels.h.
 */
#ifndef SG_CPU_SCRATCH_H
#define SG_CPU_SCRATCH_H

#include <stdint.h>
#include <string.h>

/* 1 Mi floats = 4 MiB: an im2col chunk of ~227 output pixels at 3x3x512 input channels, or
 * the full L x L attention-gradient block up to L = 1024 (32x32 attention). */
#define SG_CPU_SCRATCH_FLOATS (1 << 20)

/* Lock the scratch buffer and return it; every acquire is paired with one release. */
float *sg_cpu_scratch_acquire(void);
void sg_cpu_scratch_release(void);

/* Column-block width for per-channel reductions kept in double on the stack (see norm.c,
 * conv bias gradients): channels are reduced CBLK at a time so each channel's sum still runs
 * in one fixed order (outer index first) while the loops stream memory contiguously. */
#define SG_CPU_CBLK 64

/* sum[c] = sum over rows r (in increasing r) of x[r*ld + c], c < C, accumulated in double.
 * Shared by the bias gradients (conv, linear) and the broadcast-add backward. */
void sg_cpu_colsum(float *sum, const float *x, int64_t rows, int C, int64_t ld);

/* C[M][N] = alpha op(A)[M][K] op(B)[K][N] + beta C, row-major, as cblas_sgemm, but cut into
 * fixed blocks so the bits never depend on how many threads ran it:
 * - K in blocks of SG_CPU_GEMM_KB taken in increasing order (the first with `beta`, the rest
 *   with beta = 1);
 * - the larger of M and N (M on a tie) in blocks of SG_CPU_GEMM_PB rows or columns of C, each
 *   block one single-threaded cblas_sgemm, the blocks shared out over sg_cpu_threads() threads.
 * Why: OpenBLAS's own threading changes the bits. Its threaded driver cuts K differently from
 * its single-threaded one when GEMM_Q < K < 2 GEMM_Q (measured on OpenBLAS 0.3.21 / SkylakeX:
 * K = 500, 600, 900 differ between 1 and 2 threads), and on its Zen kernels (AMD EPYC, the
 * same OpenBLAS) even K = 16 differs: there an element's sum depends on where its row or column
 * falls in the M or N range a thread is given (single-threaded calls over 16- or 64-row slices
 * of C also differ from one call over all rows). So OpenBLAS always runs one thread here, and
 * the slices are a function of the shape alone: every element of C is the same FMA chain of
 * the same call whatever the thread count, on a given CPU. (Other CPUs run other OpenBLAS
 * kernels and give other bits; checkpoints record the environment.) */
#define SG_CPU_GEMM_KB 256
#define SG_CPU_GEMM_PB 128
void sg_cpu_sgemm(int transA, int transB, int M, int N, int K, float alpha, const float *A, int lda,
                  const float *B, int ldb, float beta, float *C, int ldc);

/* v where keep, else +0: the dropout's select as bit operations, so that a loop of it compiles
 * to vector compares and masks, not to a branch on a random mask that mispredicts at every
 * tenth element (v is computed whether kept or not; the values are those of keep ? v : 0.0f). */
static inline float sg_cpu_keep_or_zero(float v, int keep) {
    uint32_t b;
    memcpy(&b, &v, sizeof b);
    b &= 0u - (uint32_t)(keep != 0);
    memcpy(&v, &b, sizeof v);
    return v;
}

/* fn(ctx, j) for every j in [0, n), shared out over sg_cpu_threads() (cpu_kernels.h) threads (the
 * caller among them); returns when all have run. Which thread runs a task varies, so a task must
 * compute the same thing on any thread: its own outputs, its own fixed-order sums. A task must not
 * call sg_cpu_parallel or sg_cpu_sgemm itself (one call at a time: it would wait for itself). */
void sg_cpu_parallel(int n, void (*fn)(const void *ctx, int j), const void *ctx);

#endif
