/* linear.cu — fully connected layers, and the GEMM layer they share with 1x1 convs.
 *
 * Shapes: x[rows][Ci] (a concatenation along Ci for convs), w[Co][Ci] in the activations'
 * dtype (fp32: the master weights; bf16: the plan's bf16 copy of them), b[Co] fp32,
 * y[rows][Co]. For a linear layer rows = N, Ci = K, Co = M.
 *   forward     y  = x w^T + b
 *   bwd data    dx = dy w
 *   bwd weight  dw = dy^T x,  db = column sums of dy
 *
 * The GEMMs go through blas.cu (cuBLASLt, pinned algorithms), which is column-major; a row-major
 * [r][c] matrix is the column-major c x r matrix with leading dimension c, so each product is
 * written on the transposes: y^T  (Co x rows) = op_T(w as Ci x Co) * x^T (Ci x rows) dx^T (Ci x
 * rows) = w^T (Ci x Co) * dy^T (Co x rows) dw^T (Ci x Co)   = x^T (Ci x rows) * op_T(dy^T as Co x
 * rows) A concatenated x contributes one GEMM per part: the part's channel range [off, off + c) is
 * a row offset `off` into w^T (leading dimension Ci) and into dw^T.
 *
 * Precision: fp32 runs plain fp32 GEMMs (CUBLAS_COMPUTE_32F, no TF32). bf16 multiplies bf16 x
 * and the bf16 weights as they come (nothing is converted here); the forward of a one-part x
 * rounds y once from the GEMM, the fp32 bias added before by cuBLASLt's bias epilogue
 * (blas.cu: cu_blas_gemm_bias), where the library takes it; a concatenation's parts, or a
 * library that refuses the epilogue (or SG_GEMM_EPILOGUE=0), accumulate into an fp32 tile in the
 * workspace, rounded once after the bias by a second pass (8 values per access where Co is a
 * multiple of 8 and the operands are aligned: the 1x1 convs of the gemm engine). Both ways
 * y = round(sum + b) in fp32: the same arithmetic, each GEMM's sum in its pinned algorithm's
 * order (the second GPU session measured the tile's two passes at 1.9 ms of a b128 step's 1x1
 * forwards, bench/results/2026-11-28-nvidia-h200-bench-3.md; the epilogue has not run on a
 * GPU yet: docs/gpu-status.md). dx is
 * produced in bf16 directly (the GEMM adds beta * dx in fp32 and rounds once; split-K sums stay
 * fp32); dw is fp32 from bf16 operands. One pinned algorithm per GEMM on one stream with a fixed
 * workspace is deterministic.
 */
#include "kernels/cuda/cuda_common.cuh"

#include <limits.h>

/* ================================ kernels ================================ */

/* threads stride over rows*Co: y[i] += b[i % Co] (fp32, in place) */
__global__ void bias_add_kernel(float *y, const float *b, int64_t n, int Co) {
    SG_PDL_ENTER();
    SG_GRID_STRIDE(i, n) {
        y[i] += b[i % Co];
    }
}

/* threads stride over rows*Co of one tile: y[i] = round(tile[i] + b[i % Co]) (b may be NULL) */
__global__ void bias_round_kernel(void *y, const float *tile, const float *b, int64_t n, int Co,
                                  int dt) {
    SG_PDL_ENTER();
    SG_GRID_STRIDE(i, n) {
        float v = tile[i];
        if (b) v += b[i % Co];
        dev_st(y, i, v, dt);
    }
}

/* bias_round_kernel into bf16, 8 values per access: threads stride over rows*Co/8 (Co a multiple
 * of 8; tile, b and y 16-byte aligned); the same arithmetic, so the same bits */
__global__ void bias_round8_kernel(uint16_t *y, const float *tile, const float *b, int64_t n8,
                                   int Co8) {
    SG_PDL_ENTER();
    SG_GRID_STRIDE(i, n8) {
        float v[8];
        const float4 t0 = reinterpret_cast<const float4 *>(tile)[2 * i],
                     t1 = reinterpret_cast<const float4 *>(tile)[2 * i + 1];
        v[0] = t0.x, v[1] = t0.y, v[2] = t0.z, v[3] = t0.w;
        v[4] = t1.x, v[5] = t1.y, v[6] = t1.z, v[7] = t1.w;
        if (b) {
            const int64_t c8 = i % Co8;
            const float4 b0 = reinterpret_cast<const float4 *>(b)[2 * c8],
                         b1 = reinterpret_cast<const float4 *>(b)[2 * c8 + 1];
            v[0] += b0.x, v[1] += b0.y, v[2] += b0.z, v[3] += b0.w;
            v[4] += b1.x, v[5] += b1.y, v[6] += b1.z, v[7] += b1.w;
        }
        dev_stv<uint16_t, 8>(y + 8 * i, v, 0);
    }
}

/* ---- linear groups (cuda_kernels.h, sg_linear_group): one tiled CUDA-core GEMM a pass over
 * every layer. A block computes an LG_T x LG_T output tile; its reduction runs in chunks of
 * LG_T, each chunk's two operand tiles staged in shared memory (zero outside the operands);
 * thread (ty, tx) holds rows ty, ty + 16 and columns tx, tx + 16 of the tile and adds the
 * chunk's products to them one reduction index after another (fmaf: the chain the header
 * states, whatever the tiling). */
#define LG_T 32
typedef float lg_tile[LG_T][LG_T + 1]; /* [row][reduction index], padded: no bank conflicts */

#ifdef SG_CUDA_HOST
/* the emulator checks every layer's pointers like pointer arguments */
template <> struct cuda_sim_arg_ptrs<sg_linear_group> {
    static int get(const sg_linear_group &g, const void **out) {
        int k = 0;
        for (int j = 0; j < g.n && j < SG_LINEAR_GROUP_MAX; j++) {
            const void *p[6] = {g.w[j], g.b[j], g.y[j], g.dy[j], g.dw[j], g.db[j]};
            for (int i = 0; i < 6; i++) out[k++] = p[i];
        }
        return k;
    }
};
#endif

/* s[r][t] = p[r * rs + t * ts] for r < rows, t < len, else 0; rfast: consecutive threads take
 * consecutive r (the operand's contiguous direction), else consecutive t */
template <typename T>
__device__ __forceinline__ void lg_load(lg_tile &s, const T *p, int64_t rs, int64_t ts, int rows,
                                        int len, bool rfast) {
    for (int e = threadIdx.x; e < LG_T * LG_T; e += blockDim.x) {
        const int r = rfast ? e % LG_T : e / LG_T, t = rfast ? e / LG_T : e % LG_T;
        s[r][t] = r < rows && t < len ? dev_ld1(p + r * rs + t * ts) : 0.0f;
    }
}

/* acc[i][j] (row ty + 16 i, column tx + 16 j) += a[row][t] b[column][t], t = 0 .. len - 1 */
__device__ __forceinline__ void lg_chunk(float (&acc)[2][2], const lg_tile &a, const lg_tile &b,
                                         int len) {
    const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
    for (int t = 0; t < len; t++) {
        const float a0 = a[ty][t], a1 = a[ty + 16][t], b0 = b[tx][t], b1 = b[tx + 16][t];
        acc[0][0] = fmaf(a0, b0, acc[0][0]);
        acc[0][1] = fmaf(a0, b1, acc[0][1]);
        acc[1][0] = fmaf(a1, b0, acc[1][0]);
        acc[1][1] = fmaf(a1, b1, acc[1][1]);
    }
}

static inline __host__ __device__ int lg_tiles(int n) {
    return (n + LG_T - 1) / LG_T;
}

/* The kernels' two operand tiles: dynamic shared memory (a template kernel's shared data,
 * cuda_sim.hpp), sizeof(lg_smem) bytes a block. */
struct lg_smem {
    lg_tile a, b;
    unsigned last; /* the data pass's election (dev_last_block) */
};
#define LG_SMEM_DECL(s)                                                                            \
    SG_DYNAMIC_SMEM(float, lg_sm_);                                                                \
    lg_smem &s = *reinterpret_cast<lg_smem *>(lg_sm_)

/* One chunk of len reduction indices: the operand tiles staged (a: arows rows from pa, b: brows
 * from pb, lg_load's strides and order), then their products added to acc. The caller syncs
 * the block before the next chunk's loads. */
template <typename T>
__device__ __forceinline__ void lg_step(float (&acc)[2][2], lg_smem &s, const T *pa, int64_t ars,
                                        int64_t ats, int arows, bool afast, const T *pb,
                                        int64_t brs, int64_t bts, int brows, bool bfast, int len) {
    lg_load(s.a, pa, ars, ats, arows, len, afast);
    lg_load(s.b, pb, brs, bts, brows, len, bfast);
    __syncthreads();
    lg_chunk(acc, s.a, s.b, len);
}

/* the layer j whose tiles hold block `blk` (each layer rows_tiles x lg_tiles(M_j) of them, in
 * layer order); *first: its first block */
__device__ __forceinline__ int lg_layer(const sg_linear_group &g, int blk, int per_m, int *first) {
    int j = 0, b0 = 0;
    while (j < g.n - 1 && blk >= b0 + per_m * lg_tiles(g.M[j])) b0 += per_m * lg_tiles(g.M[j++]);
    *first = b0;
    return j;
}

/* forward: blocks over every layer's (row tile, column tile), layer after layer */
template <typename T>
__global__ void __launch_bounds__(256)
    linear_group_fwd_kernel(sg_linear_group g, const T *x, int N, int K) {
    SG_PDL_ENTER();
    LG_SMEM_DECL(sm);
    const int nt = lg_tiles(N);
    int b0;
    const int j = lg_layer(g, blockIdx.x, nt, &b0);
    const int M = g.M[j], n0 = (blockIdx.x - b0) % nt * LG_T, m0 = (blockIdx.x - b0) / nt * LG_T;
    const T *w = (const T *)g.w[j];
    float acc[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};
    for (int k0 = 0; k0 < K; k0 += LG_T) {
        const int len = min(LG_T, K - k0);
        lg_step(acc, sm, x + (int64_t)n0 * K + k0, K, 1, N - n0, false, w + (int64_t)m0 * K + k0, K,
                1, M - m0, false, len);
        __syncthreads();
    }
    const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
    for (int a = 0; a < 2; a++)
        for (int c = 0; c < 2; c++) {
            const int n = n0 + ty + 16 * a, m = m0 + tx + 16 * c;
            if (n >= N || m >= M) continue;
            float v = acc[a][c];
            if (g.b[j]) v = __fadd_rn(v, g.b[j][m]);
            dev_st1((T *)g.y[j] + (int64_t)n * M + m, v);
        }
}

/* The data pass's slices elect, per dx tile, the last block to finish (dev_last_block); it sums
 * the slices' partials. */
#define LG_TICKETS 65536
static __device__ unsigned lg_tickets[LG_TICKETS];

/* backward data: blocks over dx's (row tile, column tile, slice q of S); each runs its slice's
 * chunks of the reduction (layer after layer in the group's order, chunks of 32 m); one slice:
 * the chain is dx's sum; more: each block writes its partial tile to part[q][N][K] and each
 * tile's last block adds the S partials in order */
template <typename T>
__global__ void __launch_bounds__(256)
    linear_group_bwd_data_kernel(sg_linear_group g, T *dx, int N, int K, int accum, float *part,
                                 int S, int C) {
    SG_PDL_ENTER();
    LG_SMEM_DECL(sm);
    const int n0 = blockIdx.x * LG_T, k0 = blockIdx.y * LG_T, q = blockIdx.z;
    const int64_t c_lo = (int64_t)q * C / S, c_hi = (int64_t)(q + 1) * C / S;
    float acc[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};
    int64_t c = 0; /* the chunk index of layer j's first chunk */
    for (int j = 0; j < g.n && c < c_hi; c += lg_tiles(g.M[j]), j++) {
        const int M = g.M[j];
        const T *dy = (const T *)g.dy[j], *w = (const T *)g.w[j];
        for (int m0 = 0; m0 < M; m0 += LG_T) {
            const int64_t cc = c + m0 / LG_T;
            if (cc < c_lo) continue;
            if (cc >= c_hi) break;
            const int len = min(LG_T, M - m0);
            lg_step(acc, sm, dy + (int64_t)n0 * M + m0, M, 1, N - n0, false,
                    w + (int64_t)m0 * K + k0, 1, K, K - k0, true, len);
            __syncthreads();
        }
    }
    const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
    if (S > 1) {
        for (int a = 0; a < 2; a++)
            for (int b = 0; b < 2; b++) {
                const int n = n0 + ty + 16 * a, k = k0 + tx + 16 * b;
                if (n < N && k < K) part[((int64_t)q * N + n) * K + k] = acc[a][b];
            }
        if (!dev_last_block(&lg_tickets[blockIdx.y * gridDim.x + blockIdx.x], (unsigned)S,
                            &sm.last))
            return;
        for (int a = 0; a < 2; a++)
            for (int b = 0; b < 2; b++) {
                const int n = n0 + ty + 16 * a, k = k0 + tx + 16 * b;
                if (n >= N || k >= K) continue;
                float v = 0.0f;
                for (int r = 0; r < S; r++) v += __ldcg(part + ((int64_t)r * N + n) * K + k);
                acc[a][b] = v;
            }
    }
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++) {
            const int n = n0 + ty + 16 * a, k = k0 + tx + 16 * b;
            if (n >= N || k >= K) continue;
            T *o = dx + (int64_t)n * K + k;
            dev_st1(o, accum ? __fadd_rn(dev_ld1(o), acc[a][b]) : acc[a][b]);
        }
}

/* backward weight: blocks over every layer's (row tile of M_j, column tile of K), layer after
 * layer; the reduction over the N rows; a layer's first column tile's blocks also sum db */
template <typename T>
__global__ void __launch_bounds__(256)
    linear_group_bwd_weight_kernel(sg_linear_group g, const T *x, int N, int K) {
    SG_PDL_ENTER();
    LG_SMEM_DECL(sm);
    const int kt = lg_tiles(K);
    int b0;
    const int j = lg_layer(g, blockIdx.x, kt, &b0);
    const int M = g.M[j], k0 = (blockIdx.x - b0) % kt * LG_T, m0 = (blockIdx.x - b0) / kt * LG_T;
    const T *dy = (const T *)g.dy[j];
    const bool bias = k0 == 0 && g.db[j] != NULL;
    float acc[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}}, sdb = 0.0f;
    for (int n0 = 0; n0 < N; n0 += LG_T) {
        const int len = min(LG_T, N - n0);
        lg_step(acc, sm, dy + (int64_t)n0 * M + m0, 1, M, M - m0, true, x + (int64_t)n0 * K + k0, 1,
                K, K - k0, true, len);
        if (bias && threadIdx.x < LG_T)
            for (int t = 0; t < len; t++) sdb = __fadd_rn(sdb, sm.a[threadIdx.x][t]);
        __syncthreads();
    }
    const int acc_j = (g.accum >> j) & 1u;
    const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
    for (int a = 0; a < 2; a++)
        for (int c = 0; c < 2; c++) {
            const int m = m0 + ty + 16 * a, k = k0 + tx + 16 * c;
            if (m >= M || k >= K) continue;
            float *o = g.dw[j] + (int64_t)m * K + k;
            *o = acc_j ? __fadd_rn(*o, acc[a][c]) : acc[a][c];
        }
    if (bias && threadIdx.x < LG_T && m0 + (int)threadIdx.x < M) {
        float *o = g.db[j] + m0 + threadIdx.x;
        *o = acc_j ? __fadd_rn(*o, sdb) : sdb;
    }
}

/* =============================== launchers =============================== */

/* Element offset into a buffer of dtype dt. */
static const void *cu_off(const void *p, int64_t elems, int dt) {
    return (const char *)p + elems * sg_dtype_size(dt);
}

/* One column-major GEMM, C = alpha op(A) op(B) + beta C, fp32 compute (not batched). */
static int cu_gemm(sg_blas *blas, cudaStream_t st, cublasOperation_t ta, cublasOperation_t tb,
                   int m, int n, int k, float alpha, const void *A, int adt, int lda, const void *B,
                   int bdt, int ldb, float beta, void *C, int cdt, int ldc) {
    return cu_blas_gemm(blas, st, ta, tb, m, n, k, alpha, A, adt, lda, 0, B, bdt, ldb, 0, beta, C,
                        cdt, ldc, 0, 1);
}

static int cu_cat_check(sg_cat x, int Ci, const char *fn) {
    SG_ARG_CHECK(x.c[0] > 0 && x.c[1] >= 0 && x.c[0] + x.c[1] == Ci && x.p[0] != NULL &&
                     (x.c[1] == 0 || x.p[1] != NULL),
                 "%s: concatenation of %d + %d channels does not make Ci = %d", fn, x.c[0], x.c[1],
                 Ci);
    return SG_OK;
}

int cu_gemm_fwd(cudaStream_t st, sg_blas *blas, void *y, sg_cat x, const void *w, const float *b,
                int64_t rows, int Ci, int Co, int dt, void *ws, int64_t ws_bytes) {
    const char *fn = "gemm_fwd";
    SG_DT_CHECK(dt, fn);
    SG_ARG_CHECK(rows > 0 && rows <= INT_MAX && Ci > 0 && Co > 0, "%s: bad shape", fn);
    if (cu_cat_check(x, Ci, fn)) return SG_ERR;
    if (cu_blas_check(blas, st, fn)) return SG_ERR;
    int64_t need = sg_ws_gemm_fwd(rows, Ci, Co, dt);
    SG_WS_CHECK(need, ws_bytes, fn);
    if (dt == DT_F32) {
        for (int j = 0, first = 1; j < 2; j++) {
            if (x.c[j] == 0) continue;
            int off = j ? x.c[0] : 0;
            if (cu_gemm(blas, st, CUBLAS_OP_T, CUBLAS_OP_N, Co, (int)rows, x.c[j], 1.0f,
                        cu_off(w, off, DT_F32), DT_F32, Ci, x.p[j], DT_F32, x.c[j],
                        first ? 0.0f : 1.0f, y, DT_F32, Co))
                return SG_ERR;
            first = 0;
        }
        if (b) {
            SG_LAUNCH(bias_add_kernel, sg_grid_for(rows * Co), SG_THREADS, 0, st, (float *)y, b,
                      rows * Co, Co);
            SG_LAUNCH_CHECK("bias_add_kernel");
        }
        return SG_OK;
    }
    /* bf16, one part: y = round(x w^T + b) from the GEMM itself, the bias added in fp32 by
     * cuBLASLt's epilogue (or no bias at all), where the library takes the epilogue */
    if (!x.c[1]) {
        int refused = 0;
        if (b ? cu_blas_gemm_bias(blas, st, CUBLAS_OP_T, CUBLAS_OP_N, Co, (int)rows, Ci, w, DT_BF16,
                                  Ci, x.p[0], DT_BF16, Ci, y, DT_BF16, Co, b, &refused)
              : cu_gemm(blas, st, CUBLAS_OP_T, CUBLAS_OP_N, Co, (int)rows, Ci, 1.0f, w, DT_BF16, Ci,
                        x.p[0], DT_BF16, Ci, 0.0f, y, DT_BF16, Co))
            return SG_ERR;
        if (!refused) return SG_OK;
    }
    /* bf16: products of the bf16 operands in an fp32 tile, then bias + one rounding. */
    float *tile = (float *)ws;
    int64_t R = sg_ws_gemm_tile_rows(rows, Co);
    for (int64_t r0 = 0; r0 < rows; r0 += R) {
        int nr = (int)(rows - r0 < R ? rows - r0 : R);
        for (int j = 0, first = 1; j < 2; j++) {
            if (x.c[j] == 0) continue;
            int off = j ? x.c[0] : 0;
            if (cu_gemm(blas, st, CUBLAS_OP_T, CUBLAS_OP_N, Co, nr, x.c[j], 1.0f,
                        cu_off(w, off, DT_BF16), DT_BF16, Ci, cu_off(x.p[j], r0 * x.c[j], DT_BF16),
                        DT_BF16, x.c[j], first ? 0.0f : 1.0f, tile, DT_F32, Co))
                return SG_ERR;
            first = 0;
        }
        int64_t n = (int64_t)nr * Co;
        void *yr = (void *)cu_off(y, r0 * Co, DT_BF16);
        if (Co % 8 == 0 && ((uintptr_t)yr & 15u) == 0 && ((uintptr_t)tile & 15u) == 0 &&
            ((uintptr_t)b & 15u) == 0) {
            SG_LAUNCH(bias_round8_kernel, sg_grid_for(n / 8), SG_THREADS, 0, st, (uint16_t *)yr,
                      tile, b, n / 8, Co / 8);
            SG_LAUNCH_CHECK("bias_round8_kernel");
        } else {
            SG_LAUNCH(bias_round_kernel, sg_grid_for(n), SG_THREADS, 0, st, yr, tile, b, n, Co,
                      DT_BF16);
            SG_LAUNCH_CHECK("bias_round_kernel");
        }
    }
    return SG_OK;
}

int cu_gemm_bwd_data(cudaStream_t st, sg_blas *blas, sg_cat dx, const void *dy, const void *w,
                     int64_t rows, int Ci, int Co, int dt, int accum, void *ws, int64_t ws_bytes) {
    const char *fn = "gemm_bwd_data";
    SG_DT_CHECK(dt, fn);
    SG_ARG_CHECK(rows > 0 && rows <= INT_MAX && Ci > 0 && Co > 0, "%s: bad shape", fn);
    if (cu_cat_check(dx, Ci, fn)) return SG_ERR;
    if (cu_blas_check(blas, st, fn)) return SG_ERR;
    int64_t need = sg_ws_gemm_bwd_data(rows, Ci, Co, dt);
    SG_WS_CHECK(need, ws_bytes, fn);
    (void)ws; /* w comes in dt: no scratch (sg_ws_gemm_bwd_data is 0) */
    for (int j = 0; j < 2; j++) {
        if (dx.c[j] == 0) continue;
        int off = j ? dx.c[0] : 0;
        if (cu_gemm(blas, st, CUBLAS_OP_N, CUBLAS_OP_N, dx.c[j], (int)rows, Co, 1.0f,
                    cu_off(w, off, dt), dt, Ci, dy, dt, Co, accum ? 1.0f : 0.0f, dx.p[j], dt,
                    dx.c[j]))
            return SG_ERR;
    }
    return SG_OK;
}

int cu_gemm_bwd_weight(cudaStream_t st, sg_blas *blas, float *dw, float *db, const void *dy,
                       sg_cat x, int64_t rows, int Ci, int Co, int dt, int accum, void *ws,
                       int64_t ws_bytes) {
    const char *fn = "gemm_bwd_weight";
    SG_DT_CHECK(dt, fn);
    SG_ARG_CHECK(rows > 0 && rows <= INT_MAX && Ci > 0 && Co > 0, "%s: bad shape", fn);
    if (cu_cat_check(x, Ci, fn)) return SG_ERR;
    if (cu_blas_check(blas, st, fn)) return SG_ERR;
    int64_t need = sg_ws_gemm_bwd_weight(rows, Ci, Co, db != NULL);
    SG_WS_CHECK(need, ws_bytes, fn);
    for (int j = 0; j < 2; j++) {
        if (x.c[j] == 0) continue;
        int off = j ? x.c[0] : 0;
        if (cu_gemm(blas, st, CUBLAS_OP_N, CUBLAS_OP_T, x.c[j], Co, (int)rows, 1.0f, x.p[j], dt,
                    x.c[j], dy, dt, Co, accum ? 1.0f : 0.0f, dw + off, DT_F32, Ci))
            return SG_ERR;
    }
    if (db) return cu_col_sum(st, db, DT_F32, dy, dt, 1, rows, Co, accum, ws);
    return SG_OK;
}

int cuda_linear_fwd(cudaStream_t st, sg_blas *blas, void *y, const void *x, const void *w,
                    const float *b, int N, int K, int M, int dt, void *ws, int64_t ws_bytes) {
    return cu_gemm_fwd(st, blas, y, sg_cat1(x, K), w, b, N, K, M, dt, ws, ws_bytes);
}

int cuda_linear_bwd_data(cudaStream_t st, sg_blas *blas, void *dx, const void *dy, const void *w,
                         int N, int K, int M, int dt, int accum, void *ws, int64_t ws_bytes) {
    return cu_gemm_bwd_data(st, blas, sg_cat1(dx, K), dy, w, N, K, M, dt, accum, ws, ws_bytes);
}

int cuda_linear_bwd_weight(cudaStream_t st, sg_blas *blas, float *dw, float *db, const void *dy,
                           const void *x, int N, int K, int M, int dt, int accum, void *ws,
                           int64_t ws_bytes) {
    return cu_gemm_bwd_weight(st, blas, dw, db, dy, sg_cat1(x, K), N, K, M, dt, accum, ws,
                              ws_bytes);
}

/* ---- linear groups ---- */

static int lg_check(const sg_linear_group *g, int N, int K, int dt, int fwd, int data,
                    const char *fn) {
    SG_DT_CHECK(dt, fn);
    SG_ARG_CHECK(g != NULL && g->n >= 1 && g->n <= SG_LINEAR_GROUP_MAX,
                 "%s: a group of 1 to %d layers", fn, SG_LINEAR_GROUP_MAX);
    SG_ARG_CHECK(N > 0 && K > 0, "%s: bad shape N %d K %d", fn, N, K);
    int64_t tiles = 0;
    for (int j = 0; j < g->n; j++) {
        SG_ARG_CHECK(g->M[j] > 0, "%s: layer %d has %d outputs", fn, j, g->M[j]);
        SG_ARG_CHECK(fwd    ? g->w[j] && g->y[j]
                     : data ? g->w[j] && g->dy[j]
                            : g->dy[j] && g->dw[j],
                     "%s: layer %d lacks an operand", fn, j);
        tiles += (int64_t)lg_tiles(g->M[j]) * lg_tiles(fwd ? N : K);
    }
    SG_ARG_CHECK(tiles <= INT_MAX, "%s: %lld tiles", fn, (long long)tiles);
    return SG_OK;
}

static int lg_blocks(const sg_linear_group *g, int per_m) {
    int b = 0;
    for (int j = 0; j < g->n; j++) b += per_m * lg_tiles(g->M[j]);
    return b;
}

int cuda_linear_group_fwd(cudaStream_t st, const sg_linear_group *g, const void *x, int N, int K,
                          int dt) {
    if (lg_check(g, N, K, dt, 1, 0, "linear_group_fwd")) return SG_ERR;
    const int blocks = lg_blocks(g, lg_tiles(N));
    if (dt == DT_BF16)
        SG_LAUNCH(linear_group_fwd_kernel<uint16_t>, blocks, 256, (int)sizeof(lg_smem), st, *g,
                  (const uint16_t *)x, N, K);
    else
        SG_LAUNCH(linear_group_fwd_kernel<float>, blocks, 256, (int)sizeof(lg_smem), st, *g,
                  (const float *)x, N, K);
    SG_LAUNCH_CHECK("linear_group_fwd_kernel");
    return SG_OK;
}

int cuda_linear_group_bwd_data(cudaStream_t st, const sg_linear_group *g, void *dx, int N, int K,
                               int dt, int accum, void *ws, int64_t ws_bytes) {
    const char *fn = "linear_group_bwd_data";
    if (lg_check(g, N, K, dt, 0, 1, fn)) return SG_ERR;
    SG_ARG_CHECK(dx != NULL, "%s: no dx", fn);
    int64_t chunks = 0;
    for (int j = 0; j < g->n; j++) chunks += lg_tiles(g->M[j]);
    const int S = sg_ws_lg_slices(N, K, chunks);
    const int64_t tiles = (int64_t)lg_tiles(N) * lg_tiles(K);
    SG_ARG_CHECK(tiles <= LG_TICKETS && chunks <= INT_MAX, "%s: %lld tiles of dx, %lld chunks", fn,
                 (long long)tiles, (long long)chunks);
    if (S > 1) SG_WS_CHECK(sg_ws_linear_group_bwd_data(N, K), ws_bytes, fn);
    const dim3 grid((unsigned)lg_tiles(N), (unsigned)lg_tiles(K), (unsigned)S);
    if (dt == DT_BF16)
        SG_LAUNCH(linear_group_bwd_data_kernel<uint16_t>, grid, 256, (int)sizeof(lg_smem), st, *g,
                  (uint16_t *)dx, N, K, accum, (float *)ws, S, (int)chunks);
    else
        SG_LAUNCH(linear_group_bwd_data_kernel<float>, grid, 256, (int)sizeof(lg_smem), st, *g,
                  (float *)dx, N, K, accum, (float *)ws, S, (int)chunks);
    SG_LAUNCH_CHECK("linear_group_bwd_data_kernel");
    return SG_OK;
}

int cuda_linear_group_bwd_weight(cudaStream_t st, const sg_linear_group *g, const void *x, int N,
                                 int K, int dt) {
    if (lg_check(g, N, K, dt, 0, 0, "linear_group_bwd_weight")) return SG_ERR;
    const int blocks = lg_blocks(g, lg_tiles(K));
    if (dt == DT_BF16)
        SG_LAUNCH(linear_group_bwd_weight_kernel<uint16_t>, blocks, 256, (int)sizeof(lg_smem), st,
                  *g, (const uint16_t *)x, N, K);
    else
        SG_LAUNCH(linear_group_bwd_weight_kernel<float>, blocks, 256, (int)sizeof(lg_smem), st, *g,
                  (const float *)x, N, K);
    SG_LAUNCH_CHECK("linear_group_bwd_weight_kernel");
    return SG_OK;
}
