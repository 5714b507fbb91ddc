/* scratch.c — the shared fixed-size scratch buffer, the column-sum helper, the K-blocked
 * GEMM wrapper and the thread pool that runs it and the other kernels' tasks (see scratch.h). */
#include "common/sg_base.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/scratch.h"

#include <cblas.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

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

/* ---- the GEMM: fixed slices of C, run by sg_cpu_parallel (below) ----
 *
 * A call is cut into nslice slices of C (sg_cpu_sgemm's comment): slice j covers rows (or
 * columns) [j PB, (j + 1) PB) and runs its K blocks in increasing order in one thread. */

typedef struct {
    int transA, transB, M, N, K, split_m, nslice;
    float alpha, beta;
    const float *A, *B;
    int lda, ldb, ldc;
    float *C;
} sg_gemm_call;

/* Slice j: its rows of op(A) and C (split_m), or its columns of op(B) and C, then the K blocks
 * in order. Block kb of op(A) starts kb columns in (A[M][K] row-major, lda) or kb rows down
 * (A^T: A is [K][M]); likewise op(B) starts kb rows down (B[K][N]) or kb columns in (B^T: B is
 * [N][K]). */
static void gemm_slice(const void *ctx, int j) {
    const sg_gemm_call *g = ctx;
    const int p0 = j * SG_CPU_GEMM_PB, extent = g->split_m ? g->M : g->N;
    const int pb = extent - p0 < SG_CPU_GEMM_PB ? extent - p0 : SG_CPU_GEMM_PB;
    const int M = g->split_m ? pb : g->M, N = g->split_m ? g->N : pb;
    const float *A = g->A, *B = g->B;
    float *C = g->C;
    if (g->split_m) {
        A += g->transA ? (int64_t)p0 : (int64_t)p0 * g->lda;
        C += (int64_t)p0 * g->ldc;
    } else {
        B += g->transB ? (int64_t)p0 * g->ldb : (int64_t)p0;
        C += p0;
    }
    for (int k0 = 0; k0 < g->K; k0 += SG_CPU_GEMM_KB) {
        const int kb = g->K - k0 < SG_CPU_GEMM_KB ? g->K - k0 : SG_CPU_GEMM_KB;
        const float *a = g->transA ? A + (int64_t)k0 * g->lda : A + k0;
        const float *b = g->transB ? B + k0 : B + (int64_t)k0 * g->ldb;
        cblas_sgemm(CblasRowMajor, g->transA ? CblasTrans : CblasNoTrans,
                    g->transB ? CblasTrans : CblasNoTrans, M, N, kb, g->alpha, a, g->lda, b, g->ldb,
                    k0 == 0 ? g->beta : 1.0f, C, g->ldc);
    }
}

/* ---- the pool: a call's n tasks shared out over the caller and up to sg_cpu_threads() - 1
 * workers, which take task indices from a shared counter: which thread runs a task varies,
 * what a task computes never does. One call at a time (sg_par_call_lock): a second caller
 * waits. */

typedef struct {
    void (*fn)(const void *ctx, int j);
    const void *ctx;
    int n;
} sg_par_call;

#define SG_CPU_MAX_THREADS 256

static struct {
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    const sg_par_call *call; /* the call in progress, NULL between calls */
    uint64_t gen;            /* bumped per call: wakes the workers */
    int next, finished;      /* the next task to take, tasks finished */
    int helpers;             /* workers taking part in this call */
    int started;             /* workers running (they never exit) */
    int threads;             /* sg_cpu_threads(); 0 = not read yet */
} sg_pool = {.mu = PTHREAD_MUTEX_INITIALIZER,
             .go = PTHREAD_COND_INITIALIZER,
             .done = PTHREAD_COND_INITIALIZER};
static pthread_mutex_t sg_par_call_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t sg_blas_once = PTHREAD_ONCE_INIT;

static void blas_one_thread(void) {
    openblas_set_num_threads(1);
}

/* Take tasks until none is left; called with sg_pool.mu held, returns with it held. */
static void pool_take_tasks(const sg_par_call *c) {
    while (sg_pool.next < c->n) {
        const int j = sg_pool.next++;
        pthread_mutex_unlock(&sg_pool.mu);
        c->fn(c->ctx, j);
        pthread_mutex_lock(&sg_pool.mu);
        if (++sg_pool.finished == c->n) pthread_cond_broadcast(&sg_pool.done);
    }
}

static void *pool_worker(void *arg) {
    const int id = (int)(intptr_t)arg; /* 1, 2, ...: the caller is 0 */
    uint64_t seen = 0;
    pthread_mutex_lock(&sg_pool.mu);
    for (;;) {
        while (sg_pool.gen == seen) pthread_cond_wait(&sg_pool.go, &sg_pool.mu);
        seen = sg_pool.gen;
        if (sg_pool.call && id <= sg_pool.helpers) pool_take_tasks(sg_pool.call);
    }
    return NULL;
}

static long cpus_online(void) {
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n;
}

/* The CPUs this process may run on: its affinity mask (an MPI launcher's binding, taskset, a
 * container's cpuset), else the online processors. */
static long cpus_allowed(void) {
#ifdef CPU_COUNT
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
#endif
    return cpus_online();
}

/* SG_CPU_THREADS when set (a valid value), else 0 (an invalid value is named once) */
static int threads_env(void) {
    static _Atomic int warned;
    const char *e = getenv("SG_CPU_THREADS");
    if (e && *e) {
        char *end;
        long v = strtol(e, &end, 10);
        if (*end == '\0' && v >= 1 && v <= SG_CPU_MAX_THREADS) return (int)v;
        if (!atomic_exchange(&warned, 1))
            fprintf(stderr,
                    "stepgraph: SG_CPU_THREADS=%s is not a whole number in 1..%d; ignored\n", e,
                    SG_CPU_MAX_THREADS);
    }
    return 0;
}

static int threads_clamp(long n) {
    return n < 1 ? 1 : n > SG_CPU_MAX_THREADS ? SG_CPU_MAX_THREADS : (int)n;
}

static int threads_default(void) {
    const int e = threads_env();
    return e ? e : threads_clamp(cpus_allowed());
}

int sg_cpu_threads(void) {
    pthread_mutex_lock(&sg_pool.mu);
    if (!sg_pool.threads) sg_pool.threads = threads_default();
    int n = sg_pool.threads;
    pthread_mutex_unlock(&sg_pool.mu);
    return n;
}

void sg_cpu_set_threads(int n) {
    pthread_mutex_lock(&sg_pool.mu);
    sg_pool.threads = n <= 0 ? threads_default() : threads_clamp(n);
    pthread_mutex_unlock(&sg_pool.mu);
}

int sg_cpu_share_threads(int sharers) {
    if (sharers > 1 && !threads_env()) {
        pthread_mutex_lock(&sg_pool.mu);
        sg_pool.threads = threads_clamp(cpus_allowed() / sharers);
        pthread_mutex_unlock(&sg_pool.mu);
    }
    return sg_cpu_threads();
}

void sg_cpu_sgemm(int transA, int transB, int M, int N, int K, float alpha, const float *A, int lda,
                  const float *B, int ldb, float beta, float *C, int ldc) {
    SG_ASSERT(M > 0 && N > 0 && K > 0);
    const int split_m = M >= N, extent = split_m ? M : N;
    const sg_gemm_call g = {.transA = transA,
                            .transB = transB,
                            .M = M,
                            .N = N,
                            .K = K,
                            .split_m = split_m,
                            .nslice = (extent + SG_CPU_GEMM_PB - 1) / SG_CPU_GEMM_PB,
                            .alpha = alpha,
                            .beta = beta,
                            .A = A,
                            .B = B,
                            .lda = lda,
                            .ldb = ldb,
                            .ldc = ldc,
                            .C = C};
    pthread_once(&sg_blas_once, blas_one_thread);
    sg_cpu_parallel(g.nslice, gemm_slice, &g);
}

void sg_cpu_parallel(int n, void (*fn)(const void *ctx, int j), const void *ctx) {
    const int threads = n > 1 ? sg_cpu_threads() : 1;
    if (threads == 1) {
        for (int j = 0; j < n; j++) fn(ctx, j);
        return;
    }
    const sg_par_call c = {.fn = fn, .ctx = ctx, .n = n};
    pthread_mutex_lock(&sg_par_call_lock);
    pthread_mutex_lock(&sg_pool.mu);
    const int helpers = (threads < n ? threads : n) - 1;
    while (sg_pool.started < helpers) {
        pthread_t t;
        if (pthread_create(&t, NULL, pool_worker, (void *)(intptr_t)(sg_pool.started + 1)))
            break; /* fewer helpers: the same tasks, the same bits */
        pthread_detach(t);
        sg_pool.started++;
    }
    sg_pool.call = &c;
    sg_pool.helpers = helpers;
    sg_pool.next = sg_pool.finished = 0;
    sg_pool.gen++;
    pthread_cond_broadcast(&sg_pool.go);
    pool_take_tasks(&c);
    while (sg_pool.finished < n) pthread_cond_wait(&sg_pool.done, &sg_pool.mu);
    sg_pool.call = NULL;
    pthread_mutex_unlock(&sg_pool.mu);
    pthread_mutex_unlock(&sg_par_call_lock);
}
