/* elementwise.cu — pointwise ops over n values, the broadcast add of the time embedding, and
 * the deterministic column sum behind every bias gradient.
 *
 * Shapes: flat ops take n values; add_nc takes x[N,HW,C] and v[N,C]. Each output element of
 * a pointwise op depends only on the same element of its inputs, so outputs may alias inputs.
 *
 * The pointwise family (common/sg_pointwise.h) is one kernel template, pointwise_kernel: an
 * op is its element function (sg_pw_<fn>, common/sg_pointwise_math.h), and its launcher cuda_<fn>
 * is generated from its row. The kernel moves 16 bytes per operand per access (fp32: 4 values,
 * bf16: 8) when every operand is 16-byte aligned, one value at a time otherwise.
 *
 * Column sums (add_nc backward, bias gradients): out[b][c] = sum over r of in[b][r][c]. Pass 1
 * cuts the R rows into chunks of SG_WS_COLSUM_ROWS; one block per (32 columns, chunk, b) sums
 * its chunk and writes partials[b][chunk][c]; pass 2 sums the chunks of each column in
 * increasing chunk order. The order depends on the shapes alone: no atomics, same bits.
 */
#include "common/sg_pointwise_math.h"
#include "kernels/cuda/cuda_common.cuh"

#include <limits.h>

/* Programmatic dependent launch (cuda_kernels.h): the switch SG_LAUNCH reads */
static int g_pdl;
void sg_cuda_set_pdl(int on) {
    g_pdl = on != 0;
}
int sg_cuda_pdl(void) {
    return g_pdl;
}

/* ================================ kernels ================================ */

/* ---- the pointwise ops (common/sg_pointwise.h): each row's math on one element is
 * common/sg_pointwise_math.h's sg_pw_<fn> (fp32; the CPU reference's very text), run in the
 * one kernel below. */

/* A pointwise launch's operands, passed by value. */
struct pw_io {
    void *out[SG_PW_MAX_OUT];
    const void *in[SG_PW_MAX_IN];
    int accum[SG_PW_MAX_OUT];
};
#ifdef SG_CUDA_HOST
/* the emulator checks the operands like pointer arguments */
template <> struct cuda_sim_arg_ptrs<pw_io> {
    static int get(const pw_io &io, const void **out) {
        int k = 0;
        for (int i = 0; i < SG_PW_MAX_OUT; i++) out[k++] = io.out[i];
        for (int i = 0; i < SG_PW_MAX_IN; i++) out[k++] = io.in[i];
        return k;
    }
};
#endif

/* VEC elements from element i on: every input loaded, F applied element by element, every
 * output stored (accum: added to what it holds, in fp32, then rounded once). All inputs are
 * read before any output is written, so outputs may alias inputs. */
template <class F, int NIN, int NOUT, typename T, int VEC>
__device__ __forceinline__ void pw_apply(const pw_io &io, int64_t i) {
    float x[NIN][VEC], y[NOUT][VEC];
    for (int k = 0; k < NIN; k++) dev_ldv<T, VEC>(x[k], (const T *)io.in[k] + i);
    for (int j = 0; j < VEC; j++) {
        float xj[NIN], yj[NOUT];
        for (int k = 0; k < NIN; k++) xj[k] = x[k][j];
        F::apply(yj, xj);
        for (int k = 0; k < NOUT; k++) y[k][j] = yj[k];
    }
    for (int k = 0; k < NOUT; k++) dev_stv<T, VEC>((T *)io.out[k] + i, y[k], io.accum[k]);
}

/* Every pointwise op, F its element function, T its storage (float or uint16_t: bf16). VEC
 * elements are one 16-byte access per operand (fp32: 4, bf16: 8), or 1 when an operand is not
 * 16-byte aligned. Threads stride over the n / VEC vectors; then the first n % VEC threads of
 * the grid take one tail element each. */
template <class F, int NIN, int NOUT, typename T, int VEC>
__global__ void pointwise_kernel(pw_io io, int64_t n) {
    SG_PDL_ENTER();
    const int64_t nv = n / VEC;
    SG_GRID_STRIDE(j, nv) {
        pw_apply<F, NIN, NOUT, T, VEC>(io, j * VEC);
    }
    const int64_t t = nv * VEC + (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n) pw_apply<F, NIN, NOUT, T, 1>(io, t);
}

/* threads stride over n: y (+)= x * s, converting xdt -> ydt (copy: s = 1) */
__global__ void scale_kernel(void *y, int ydt, const void *x, int xdt, float s, int64_t n,
                             int accum) {
    SG_PDL_ENTER();
    SG_GRID_STRIDE(i, n) {
        dev_st_acc(y, i, dev_ld(x, i, xdt) * s, ydt, accum);
    }
}

/* cuda_kernels.h: one of this file's kernels stands for the build (every .cu but the sm_90a
 * ones compiles for the same architectures) */
#ifndef SG_CUDA_ARCHS
#define SG_CUDA_ARCHS "?"
#endif
int sg_cuda_kernel_image(void) {
    cudaFuncAttributes a;
    const cudaError_t e = cudaFuncGetAttributes(&a, (const void *)scale_kernel);
    cudaGetLastError();
    return (int)e;
}
const char *sg_cuda_build_archs(void) {
    return SG_CUDA_ARCHS;
}

/* scale_kernel's arithmetic over one dtype, VEC values per 16-byte access (both operands
 * 16-byte aligned); the first n % VEC threads of the grid take one tail value each. y may be x. */
template <typename T, int VEC>
__global__ void scale_vec_kernel(T *y, const T *x, float s, int64_t n, int accum) {
    SG_PDL_ENTER();
    const int64_t nv = n / VEC;
    SG_GRID_STRIDE(j, nv) {
        float v[VEC];
        dev_ldv<T, VEC>(v, x + j * VEC);
        for (int k = 0; k < VEC; k++) v[k] *= s;
        dev_stv<T, VEC>(y + j * VEC, v, accum);
    }
    const int64_t t = nv * VEC + (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n) {
        float v;
        dev_ldv<T, 1>(&v, x + t);
        v *= s;
        dev_stv<T, 1>(y + t, &v, accum);
    }
}

/* threads stride over N*HW*C: y = x + v[n][c] */
__global__ void add_nc_kernel(void *y, const void *x, const void *v, int64_t total, int64_t HWC,
                              int C, int dt) {
    SG_PDL_ENTER();
    SG_GRID_STRIDE(i, total) {
        int64_t nidx = i / HWC;
        int c = (int)(i % C);
        dev_st(y, i, dev_ld(x, i, dt) + dev_ld(v, nidx * C + c, dt), dt);
    }
}

/* Column sums in one launch. Block (tile, chunk, b) = (32 columns, chunk of SG_WS_COLSUM_ROWS
 * rows, batch b); its threads (tx, ty) = (32, 8): tx is the column, ty strides over the chunk's
 * rows; the 8 row-thread sums of a column are added in order 0..7 into part[b][chunk][c]. The
 * last chunk block of each (32 columns, b) to finish (dev_last_block, ticket
 * colsum_tickets[b][tile]) then sums the chunks' partials in order k = 0, 1, ...: out[b][c] (+)=
 * that sum. The same bits as a second launch over the partials (the form before 2026-12-04),
 * one launch fewer per column sum: every bias gradient of the step. sh, sh_last: the kernel's
 * shared memory (a device function's statics get none on the host emulation).
 *
 * Both chains are latency chains: a row thread adds 64 values, the last block up to R / 512
 * partials (256 at 32 x 32, batch 128), each add waiting for its load when the loop issued one
 * load an add. So the loads go first, CS_BATCH of them in flight (cs_chain: a row thread's rows;
 * the chunks: the whole block loads CS_CHUNKS partials a round into sh, the ty = 0 threads add
 * them), and the adds follow in the same order as before: the same bits (2026-12-05). */
#define SG_COLSUM_TICKETS 65536
#define CS_BATCH 16  /* a row thread's loads in flight */
#define CS_CHUNKS 64 /* the chunk partials a round of the last block's sum (8 a thread) */
static __device__ unsigned colsum_tickets[SG_COLSUM_TICKETS];

/* the sum of p[r C], r = r0, r0 + 8, ... < r1, in that order, CS_BATCH loads issued at a time.
 * Past r1 a batch adds +0.0f, which changes no sum: s starts at +0 and never becomes -0 (in
 * round-to-nearest x + (-x) is +0), so s + 0 is s. */
template <typename T>
__device__ __forceinline__ float cs_chain(const T *p, int64_t r0, int64_t r1, int C) {
    float s = 0.0f;
    for (int64_t r = r0; r < r1; r += 8 * CS_BATCH) {
        float v[CS_BATCH];
#pragma unroll
        for (int u = 0; u < CS_BATCH; u++)
            v[u] = r + 8 * u < r1 ? dev_ld1(p + (r + 8 * u) * C) : 0.0f;
#pragma unroll
        for (int u = 0; u < CS_BATCH; u++) s += v[u];
    }
    return s;
}

__device__ __forceinline__ void col_sum_block(void *out, int odt, float *part, const void *in,
                                              int dt, int64_t R, int C, int chunks, int accum,
                                              int tile, int chunk, int64_t b, int tiles, int tx,
                                              int ty, float (*sh)[33], unsigned *sh_last) {
    const int c = tile * 32 + tx;
    const int64_t r0 = (int64_t)chunk * SG_WS_COLSUM_ROWS;
    const int64_t r1 = r0 + SG_WS_COLSUM_ROWS < R ? r0 + SG_WS_COLSUM_ROWS : R;
    float s = 0.0f;
    if (c < C)
        s = dt == DT_BF16 ? cs_chain((const uint16_t *)in + b * R * C + c, r0 + ty, r1, C)
                          : cs_chain((const float *)in + b * R * C + c, r0 + ty, r1, C);
    sh[ty][tx] = s;
    __syncthreads();
    if (ty == 0 && c < C) {
        float t = sh[0][tx];
        for (int k = 1; k < 8; k++) t += sh[k][tx];
        part[(b * chunks + chunk) * C + c] = t;
    }
    if (!dev_last_block(&colsum_tickets[b * tiles + tile], (unsigned)chunks, sh_last)) return;
    /* (dev_last_block's barrier: the reads of sh above are done) */
    const float *p = part + b * chunks * C + c;
    float t = 0.0f;
    for (int k0 = 0; k0 < chunks; k0 += CS_CHUNKS) {
        if (c < C)
#pragma unroll
            for (int u = 0; u < CS_CHUNKS / 8; u++) {
                const int k = k0 + ty + 8 * u;
                if (k < chunks) sh[ty + 8 * u][tx] = __ldcg(p + (int64_t)k * C);
            }
        __syncthreads();
        if (ty == 0 && c < C) {
            const int n = chunks - k0 < CS_CHUNKS ? chunks - k0 : CS_CHUNKS;
            for (int u = 0; u < n; u++) t += sh[u][tx];
        }
        __syncthreads();
    }
    if (ty == 0 && c < C) dev_st_acc(out, b * C + c, t, odt, accum);
}

/* blocks (column tiles, chunks, batches), threads (32, 8) */
__global__ void col_sum_kernel(void *out, int odt, float *part, const void *in, int dt, int64_t R,
                               int C, int chunks, int accum) {
    SG_PDL_ENTER();
    __shared__ float sh[CS_CHUNKS][33];
    __shared__ unsigned sh_last;
    col_sum_block(out, odt, part, in, dt, R, C, chunks, accum, blockIdx.x, blockIdx.y, blockIdx.z,
                  gridDim.x, threadIdx.x, threadIdx.y, sh, &sh_last);
}

/* A weight gradient's finish in one launch of 256-thread blocks. Blocks [0, cb) make dw: threads
 * stride over the nw weights, and
 * - fp32 partials (pdt DT_F32; the own kernels' chunks): dw[i] (+)= the sum over chunks c, in
 *   order, of part[c][i];
 * - a bf16 dw (pdt DT_BF16, one chunk; cuDNN's +dw_bf16 backward-filter, cudnn_conv.c): dw[i] =
 *   or (accum) += part[i] widened: cuda_copy's arithmetic.
 * The blocks after them are col_sum_kernel's (tile, chunk) blocks of db, the column sums of
 * dy[R][C] (none where there is no db): the same bits as the two launches this replaces (a
 * chunk sum or cuda_copy, then cu_col_sum). */
__global__ void __launch_bounds__(256)
    wgrad_finish_kernel(float *dw, const void *part, int pdt, int64_t nw, int chunks, int accum,
                        int cb, float *db, float *cpart, const void *dy, int dt, int64_t R, int C,
                        int cchunks, int tiles) {
    SG_PDL_ENTER();
    __shared__ float sh[CS_CHUNKS][33];
    __shared__ unsigned sh_last;
    if ((int)blockIdx.x < cb) {
        for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < nw;
             i += (int64_t)cb * blockDim.x) {
            if (pdt == DT_BF16) {
                dev_st_acc(dw, i, dev_ld(part, i, DT_BF16), DT_F32, accum);
                continue;
            }
            /* the chunks in order, eight loads in flight (the same adds as one at a time; past
             * the last chunk + 0.0f, which changes no sum: cs_chain) */
            const float *pf = (const float *)part;
            float s = 0.0f;
            for (int c = 0; c < chunks; c += 8) {
                float v[8];
#pragma unroll
                for (int u = 0; u < 8; u++)
                    v[u] = c + u < chunks ? pf[(int64_t)(c + u) * nw + i] : 0.0f;
#pragma unroll
                for (int u = 0; u < 8; u++) s += v[u];
            }
            dw[i] = accum ? dw[i] + s : s;
        }
        return;
    }
    const int k = (int)blockIdx.x - cb;
    col_sum_block(db, DT_F32, cpart, dy, dt, R, C, cchunks, accum, k % tiles, k / tiles, 0, tiles,
                  threadIdx.x % 32, threadIdx.x / 32, sh, &sh_last);
}

/* =============================== launchers =============================== */

int cu_col_sum(cudaStream_t st, void *out, int odt, const void *in, int idt, int nb, int64_t R,
               int C, int accum, void *ws) {
    int64_t chunks = sg_ws_colsum_chunks(R);
    if (nb <= 0 || R <= 0 || C <= 0) return sg_set_error("col_sum: bad shape");
    if (chunks > 65535 || nb > 65535) return sg_set_error("col_sum: too many rows or batches");
    const int64_t tiles = (C + 31) / 32;
    if ((int64_t)nb * tiles > SG_COLSUM_TICKETS)
        return sg_set_error("col_sum: %d x %lld column tiles, more than the %d tickets", nb,
                            (long long)tiles, SG_COLSUM_TICKETS);
    dim3 grid((unsigned)tiles, (unsigned)chunks, (unsigned)nb);
    SG_LAUNCH(col_sum_kernel, grid, dim3(32, 8), 0, st, out, odt, (float *)ws, in, idt, R, C,
              (int)chunks, accum);
    SG_LAUNCH_CHECK("col_sum_kernel");
    return SG_OK;
}

static int wgrad_finish(cudaStream_t st, float *dw, const void *part, int pdt, int64_t nw,
                        int chunks, int accum, float *db, const void *dy, int dt, int64_t R, int C,
                        void *ws) {
    if (nw <= 0 || chunks <= 0 || (pdt == DT_BF16 && chunks != 1) || (db && (R <= 0 || C <= 0)))
        return sg_set_error("wgrad_finish: bad shape");
    const int64_t cchunks = db ? sg_ws_colsum_chunks(R) : 0, tiles = db ? (C + 31) / 32 : 1;
    if (tiles > SG_COLSUM_TICKETS)
        return sg_set_error("wgrad_finish: %lld column tiles, more than the %d tickets",
                            (long long)tiles, SG_COLSUM_TICKETS);
    const unsigned cb = sg_grid_for(nw);
    const int64_t blocks = cb + tiles * cchunks;
    if (blocks > INT_MAX) return sg_set_error("wgrad_finish: %lld blocks", (long long)blocks);
    SG_LAUNCH(wgrad_finish_kernel, (unsigned)blocks, 256, 0, st, dw, part, pdt, nw, chunks, accum,
              (int)cb, db, (float *)ws, dy, dt, R, C, (int)cchunks, (int)tiles);
    SG_LAUNCH_CHECK("wgrad_finish_kernel");
    return SG_OK;
}
int cu_wgrad_finish(cudaStream_t st, float *dw, const float *part, int64_t nw, int chunks,
                    int accum, float *db, const void *dy, int dt, int64_t R, int C, void *ws) {
    return wgrad_finish(st, dw, part, DT_F32, nw, chunks, accum, db, dy, dt, R, C, ws);
}
int cu_widen_finish(cudaStream_t st, float *dw, const uint16_t *dwb, int64_t nw, int accum,
                    float *db, const void *dy, int dt, int64_t R, int C, void *ws) {
    return wgrad_finish(st, dw, dwb, DT_BF16, nw, 1, accum, db, dy, dt, R, C, ws);
}

/* The 16-byte kernel when every operand is 16-byte aligned (arena tensors are), else the
 * one-value kernel; both give the same bits (each element is computed alone). */
template <class F, int NIN, int NOUT, typename T>
static int pw_launch(cudaStream_t st, const pw_io &io, int64_t n, const char *name) {
    constexpr int V = 16 / sizeof(T);
    bool aligned = true;
    for (int k = 0; k < NIN; k++) aligned = aligned && (uintptr_t)io.in[k] % 16 == 0;
    for (int k = 0; k < NOUT; k++) aligned = aligned && (uintptr_t)io.out[k] % 16 == 0;
    if (aligned)
        SG_LAUNCH((pointwise_kernel<F, NIN, NOUT, T, V>), sg_grid_for(n / V), SG_THREADS, 0, st, io,
                  n);
    else
        SG_LAUNCH((pointwise_kernel<F, NIN, NOUT, T, 1>), sg_grid_for(n), SG_THREADS, 0, st, io, n);
    SG_LAUNCH_CHECK(name);
    return SG_OK;
}

/* cuda_<fn> for every row: the operands into a pw_io, the element function into a type */
#define PW_OUT_PTR(i) out##i
#define PW_IN_PTR(i) in##i
#define PW_ACC_0(i) 0
#define PW_ACC_1(i) accum##i
#define PW_LAUNCHER(op, fn, nin, nout, acc)                                                        \
    struct fn##_op {                                                                               \
        static __device__ __forceinline__ void apply(float *y, const float *x) {                   \
            sg_pw_##fn(y, x);                                                                      \
        }                                                                                          \
    };                                                                                             \
    int cuda_##fn(SG_PW_CUDA_PARAMS(nin, nout, acc)) {                                             \
        SG_DT_CHECK(dt, "cuda_" #fn);                                                              \
        if (n <= 0) return SG_OK;                                                                  \
        const pw_io io = {{SG_PW_EACH_##nout(PW_OUT_PTR)},                                         \
                          {SG_PW_EACH_##nin(PW_IN_PTR)},                                           \
                          {SG_PW_EACH_##nout(PW_ACC_##acc)}};                                      \
        return dt == DT_BF16 ? pw_launch<fn##_op, nin, nout, uint16_t>(st, io, n, "cuda_" #fn)     \
                             : pw_launch<fn##_op, nin, nout, float>(st, io, n, "cuda_" #fn);       \
    }
SG_POINTWISE_LIST(PW_LAUNCHER)

/* y (+)= x s: 16-byte accesses where both are one dtype and 16-byte aligned (the gradient
 * fan-in copies and accumulations of a step), else one value at a time; the same bits */
static int scale_launch(cudaStream_t st, void *y, int ydt, const void *x, int xdt, float s,
                        int64_t n, int accum) {
    const int vec = ydt == xdt && ((uintptr_t)y & 15u) == 0 && ((uintptr_t)x & 15u) == 0;
    if (vec && ydt == DT_BF16) {
        SG_LAUNCH((scale_vec_kernel<uint16_t, 8>), sg_grid_for(n / 8 + 1), SG_THREADS, 0, st,
                  (uint16_t *)y, (const uint16_t *)x, s, n, accum);
    } else if (vec) {
        SG_LAUNCH((scale_vec_kernel<float, 4>), sg_grid_for(n / 4 + 1), SG_THREADS, 0, st,
                  (float *)y, (const float *)x, s, n, accum);
    } else {
        SG_LAUNCH(scale_kernel, sg_grid_for(n), SG_THREADS, 0, st, y, ydt, x, xdt, s, n, accum);
    }
    SG_LAUNCH_CHECK("scale_kernel");
    return SG_OK;
}

int cuda_copy(cudaStream_t st, void *y, int ydt, const void *x, int xdt, int64_t n, int accum) {
    SG_DT_CHECK(ydt, "cuda_copy");
    SG_DT_CHECK(xdt, "cuda_copy");
    if (n <= 0 || (y == x && ydt == xdt && !accum)) return SG_OK;
    return scale_launch(st, y, ydt, x, xdt, 1.0f, n, accum);
}

int cuda_scale(cudaStream_t st, void *y, const void *x, float s, int64_t n, int dt, int accum) {
    SG_DT_CHECK(dt, "cuda_scale");
    if (n <= 0) return SG_OK;
    return scale_launch(st, y, dt, x, dt, s, n, accum);
}

int cuda_add_nc_fwd(cudaStream_t st, void *y, const void *x, const void *v, int N, int HW, int C,
                    int dt) {
    SG_DT_CHECK(dt, "cuda_add_nc_fwd");
    SG_ARG_CHECK(N > 0 && HW > 0 && C > 0, "cuda_add_nc_fwd: bad shape");
    int64_t total = (int64_t)N * HW * C;
    SG_LAUNCH(add_nc_kernel, sg_grid_for(total), SG_THREADS, 0, st, y, x, v, total, (int64_t)HW * C,
              C, dt);
    SG_LAUNCH_CHECK("add_nc_kernel");
    return SG_OK;
}

int cuda_add_nc_bwd(cudaStream_t st, void *dv, const void *dy, int N, int HW, int C, int dt,
                    int accum, void *ws, int64_t ws_bytes) {
    SG_DT_CHECK(dt, "cuda_add_nc_bwd");
    SG_ARG_CHECK(N > 0 && HW > 0 && C > 0, "cuda_add_nc_bwd: bad shape");
    SG_WS_CHECK(sg_ws_add_nc_bwd(N, HW, C), ws_bytes, "cuda_add_nc_bwd");
    return cu_col_sum(st, dv, dt, dy, dt, N, HW, C, accum, ws);
}
