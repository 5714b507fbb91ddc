/* attention_f32.cu — the fused attention engine's fp32 form (SG_ATTN=fused on an fp32 run).
 *
 * The op and its layouts are attention.cu's (qkv[N,L,3C], P[N,heads,L,L] fp32 saved, y[N,L,C];
 * head h owns channels h*D .. h*D+D-1 of q, k and v). fp32 means fp32: the products run on the
 * CUDA cores as fmaf chains (no TF32), so the tensor-core fused kernels do not apply; the GEMM
 * path runs each head as 2 + 4 strided-batched cuBLASLt GEMMs with K or N = D (32 in
 * unet_adm64: far below the CUDA cores' rate) and softmax kernels over [N][L][L] copies.
 * These keep a 64-row tile's scores in shared memory and take every head in one launch.
 *
 * Shapes: D = 32 or 64 (every fp32 head of the models: unet_adm64 32, unet_tiny / unet_fmnist
 * 64), L <= AQ_MAX_L; others stay on the GEMM path (cu_attention_f32_ok). Block: 256 threads
 * (8 warps), a tile of 64 query rows (forward, backward rows) or 64 keys (backward columns);
 * grid (tiles, heads, N). Lp = L rounded up to 64; rows and keys past L are zeros in shared
 * memory and never stored.
 *
 * Three kernels (one launch forward, two backward), no atomics, every output element written
 * once by one thread, every sum one fmaf chain in a fixed order:
 *   rows (forward):    S = a q k^T (k resident, [Lp][D+1]); each row's softmax (a warp a row:
 *                      lanes own columns lane + 32c, xor-tree max and sum; exp(s - max) *
 *                      (1 / sum), the GEMM path's formula); P stored fp32; y_h = P v.
 *   rows (backward):   dP = dy_h v^T; rowdot_i = sum_j P_ij dP_ij (the same warp form), stored
 *                      in the workspace ([N][heads][L] fp32); dS = P (dP - rowdot) in shared
 *                      memory; dq = a dS k.
 *   columns:           for the block's 64 keys j, over the queries in tiles of 64:
 *                      dP_ij = dy_i . v_j again (the rows kernel's chain, so the same bits),
 *                      dS_ij = P_ij (dP_ij - rowdot_i), dk_j = a sum_i dS_ij q_i,
 *                      dv_j = sum_i P_ij dy_i (i increasing).
 * Recomputing dP in the columns kernel (FlashAttention's fifth product) replaces the GEMM
 * path's [N][L][L] dS in the workspace with L floats a row: no head loop, and the workspace is
 * no larger than the GEMM path's unless heads > L (sg_ws_attention_bwd).
 *
 * Products in shared memory, per thread (t = threadIdx.x, warp w = t >> 5, lane = t & 31):
 *   scores (64 x Lp, K = D): rows 8w .. 8w + 7 by keys lane + 32c (c < Lp / 32), A stored
 *     transposed (a channel's eight rows: two broadcast float4), B's rows with stride D + 1
 *     (lanes in distinct banks);
 *   products (64 x D, K = Lp or 64): rows 4 (t >> 4) .. + 3 by columns (t & 15) * D/16 .. + D/16,
 *     the 64-row operand read as float4 along K (row stride + 4), the other [K][D + 4] as float2
 *     or float4. */
#include "kernels/cuda/cuda_common.cuh"

#define AQ_TILE 64
#define AQ_THREADS 256
#define AQ_MAX_L 256
#define AQ_LDK(D) ((D) + 1)    /* a scores operand's row stride (floats) */
#define AQ_LDB(D) ((D) + 4)    /* a products operand's [K][D] row stride */
#define AQ_LDS(Lp) ((Lp) + 4)  /* the 64 x Lp score tile's row stride */
#define AQ_LDT AQ_LDS(AQ_TILE) /* a 64-wide tile's: [D][64] transposed rows, 64 x 64 tiles */

static long aq_launches; /* launches of this file's kernels (cuda_attention_f32_launches) */

/* ---- device helpers ---- */

/* rows r < 64 of a row-strided fp32 matrix (global, row stride ld floats, 16-byte aligned rows)
 * into shared memory with row stride lds, D channels; rows >= rows_ok are zeros */
template <int D>
__device__ __forceinline__ void aq_load(float *s, int lds, const float *g, int64_t ld, int rows,
                                        int rows_ok) {
    constexpr int V = D / 4;
    for (int idx = threadIdx.x; idx < rows * V; idx += AQ_THREADS) {
        const int r = idx / V, c = (idx % V) * 4;
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (r < rows_ok) v = *(const float4 *)(g + (int64_t)r * ld + c);
        float *d = s + r * lds + c;
        if (!(lds & 3)) {
            *(float4 *)d = v;
        } else {
            d[0] = v.x, d[1] = v.y, d[2] = v.z, d[3] = v.w;
        }
    }
}

/* the same rows transposed: s[c * AQ_LDT + r] = row r's channel c */
template <int D>
__device__ __forceinline__ void aq_load_t(float *s, const float *g, int64_t ld, int rows_ok) {
    constexpr int V = D / 4;
    for (int idx = threadIdx.x; idx < AQ_TILE * V; idx += AQ_THREADS) {
        const int r = idx / V, c = (idx % V) * 4;
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (r < rows_ok) v = *(const float4 *)(g + (int64_t)r * ld + c);
        s[c * AQ_LDT + r] = v.x, s[(c + 1) * AQ_LDT + r] = v.y;
        s[(c + 2) * AQ_LDT + r] = v.z, s[(c + 3) * AQ_LDT + r] = v.w;
    }
}

__device__ __forceinline__ float aq_warp_max(float v) {
#pragma unroll
    for (int o = 16; o; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
/* every lane ends with the same sum: each step adds two values in either order, exactly */
__device__ __forceinline__ float aq_warp_sum(float v) {
#pragma unroll
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float aq_f4(const float4 &v, int k) {
    return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w;
}
__device__ __forceinline__ void aq_ldv(float (&b)[2], const float *p) {
    const float2 v = *(const float2 *)p;
    b[0] = v.x, b[1] = v.y;
}
__device__ __forceinline__ void aq_ldv(float (&b)[4], const float *p) {
    const float4 v = *(const float4 *)p;
    b[0] = v.x, b[1] = v.y, b[2] = v.z, b[3] = v.w;
}

/* acc[i][c] = sum over d = 0 .. D-1 (increasing) of A[8w + i][d] * B[lane + 32c][d]: one fmaf
 * chain from 0 each; A transposed in shared memory ([D][AQ_LDT]: a warp's eight values of a
 * channel are two broadcast float4), B [rows][D + 1] */
template <int D, int NC>
__device__ __forceinline__ void aq_scores(float (*acc)[NC], const float *sAT, const float *sB) {
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int c = 0; c < NC; c++) acc[i][c] = 0.0f;
#pragma unroll 4
    for (int d = 0; d < D; d++) {
        const float4 a0 = *(const float4 *)(sAT + d * AQ_LDT + 8 * w);
        const float4 a1 = *(const float4 *)(sAT + d * AQ_LDT + 8 * w + 4);
        const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
        float b[NC];
#pragma unroll
        for (int c = 0; c < NC; c++) b[c] = sB[(lane + 32 * c) * AQ_LDK(D) + d];
#pragma unroll
        for (int i = 0; i < 8; i++)
#pragma unroll
            for (int c = 0; c < NC; c++) acc[i][c] = fmaf(a[i], b[c], acc[i][c]);
    }
}

/* acc[i][e] = sum over k = 0 .. K-1 (increasing) of A[4 (t >> 4) + i][k] * B[k][(t & 15) CPT + e]:
 * A [64][lda] (lda a multiple of 4), B [K][D + 4], K a multiple of 4 */
template <int D>
__device__ __forceinline__ void aq_product(float (*acc)[D / 16], const float *sA, int lda,
                                           const float *sB, int K) {
    constexpr int CPT = D / 16;
    const int r0 = 4 * (threadIdx.x >> 4), c0 = CPT * (threadIdx.x & 15);
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int e = 0; e < CPT; e++) acc[i][e] = 0.0f;
    for (int k = 0; k < K; k += 4) {
        float4 a[4];
#pragma unroll
        for (int i = 0; i < 4; i++) a[i] = *(const float4 *)(sA + (r0 + i) * lda + k);
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            float b[CPT];
            aq_ldv(b, sB + (k + kk) * AQ_LDB(D) + c0);
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int e = 0; e < CPT; e++) acc[i][e] = fmaf(aq_f4(a[i], kk), b[e], acc[i][e]);
        }
    }
}

/* out rows row0 + 4 (t >> 4) + i < rows_ok (row stride ld), columns (t & 15) CPT + e: scale *
 * acc, plus the old value with accum (an add of its own, never contracted) */
template <int D>
__device__ __forceinline__ void aq_store(float *out, int64_t ld, int row0, int rows_ok,
                                         const float (*acc)[D / 16], float scale, int accum) {
    constexpr int CPT = D / 16;
    const int r0 = 4 * (threadIdx.x >> 4), c0 = CPT * (threadIdx.x & 15);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        if (row0 + r0 + i >= rows_ok) continue;
        float *o = out + (int64_t)(row0 + r0 + i) * ld + c0;
#pragma unroll
        for (int e = 0; e < CPT; e++) {
            const float v = acc[i][e] * scale;
            o[e] = accum ? __fadd_rn(o[e], v) : v;
        }
    }
}

/* ---- the kernels ---- */

/* Shared memory of the rows kernels: the tile's 64 rows of A (transposed, [D][AQ_LDT]), the keys'
 * operand
 * ([Lp][D + 1] for the scores, then [Lp][D + 4] for the product), the scores ([64][Lp + 4]). */
static int aq_rows_smem(int D, int Lp) {
    return (D * AQ_LDT + Lp * AQ_LDB(D) + AQ_TILE * AQ_LDS(Lp)) * 4;
}

/* Forward (BWD false) or backward rows (BWD true). blockIdx.x: query tile (64 rows i0 ..), y:
 * head h, z: sample n; Lp = 64 NJ.
 *   forward:  S = a q k^T; softmax rows, P stored; y_h = P v.
 *   backward: dP = dy_h v^T; rowdot and dS = P (dP - rowdot), rowdot stored; dq = a dS k
 *             (+ the old dq with accum). */
template <int D, int NJ, bool BWD>
__global__ void __launch_bounds__(AQ_THREADS, 2)
    attn_f32_rows_kernel(float *out, float *Pw, const float *Pr, float *rowdot, const float *dy,
                         const float *qkv, int L, int C, int heads, float a, int accum) {
    SG_PDL_ENTER();
    SG_DYNAMIC_SMEM(float, smem);
    constexpr int Lp = AQ_TILE * NJ, NC = Lp / 32;
    const int h = blockIdx.y, n = blockIdx.z, i0 = blockIdx.x * AQ_TILE;
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t ld = 3LL * C;
    const float *base = qkv + (int64_t)n * L * ld + (int64_t)h * D;
    float *sA = smem, *sB = sA + D * AQ_LDT, *sS = sB + Lp * AQ_LDB(D);
    /* 1. scores: q (dy_h) rows of the tile against every k (v) */
    if (BWD)
        aq_load_t<D>(sA, dy + ((int64_t)n * L + i0) * C + (int64_t)h * D, C, L - i0);
    else
        aq_load_t<D>(sA, base + (int64_t)i0 * ld, ld, L - i0);
    aq_load<D>(sB, AQ_LDK(D), base + (BWD ? 2 * C : C), ld, Lp, L);
    __syncthreads();
    {
        float acc[8][NC];
        aq_scores<D, NC>(acc, sA, sB);
#pragma unroll
        for (int i = 0; i < 8; i++)
#pragma unroll
            for (int c = 0; c < NC; c++)
                sS[(8 * w + i) * AQ_LDS(Lp) + lane + 32 * c] = BWD ? acc[i][c] : acc[i][c] * a;
    }
    __syncthreads();
    /* the product's keys operand (v; k backward) replaces the scores' while the rows are done;
     * a forward without y (out NULL: P alone, attention_p) has no product */
    const bool product = BWD || out;
    if (product) aq_load<D>(sB, AQ_LDB(D), base + (BWD ? C : 2 * C), ld, Lp, L);
    /* 2. each row: warp w takes rows 8w .. 8w + 7, lane the columns lane + 32c */
    const int64_t hrow = ((int64_t)n * heads + h) * L;
    for (int rr = 0; rr < 8; rr++) {
        const int r = 8 * w + rr, i = i0 + r;
        float *row = sS + r * AQ_LDS(Lp);
        if (i >= L) { /* a row past L: zeros (warp-uniform) */
#pragma unroll
            for (int c = 0; c < NC; c++) row[lane + 32 * c] = 0.0f;
            continue;
        }
        float v[NC];
        if (!BWD) {
            float mx = -INFINITY, s = 0.0f;
#pragma unroll
            for (int c = 0; c < NC; c++) {
                const int j = lane + 32 * c;
                v[c] = j < L ? row[j] : -INFINITY;
                mx = fmaxf(mx, v[c]);
            }
            mx = aq_warp_max(mx);
#pragma unroll
            for (int c = 0; c < NC; c++) {
                v[c] = lane + 32 * c < L ? expf(v[c] - mx) : 0.0f;
                s += v[c];
            }
            const float inv = (float)(1.0 / (double)aq_warp_sum(s));
#pragma unroll
            for (int c = 0; c < NC; c++) {
                const int j = lane + 32 * c;
                const float p = v[c] * inv;
                row[j] = p;
                if (j < L) Pw[(hrow + i) * L + j] = p;
            }
        } else {
            float dot = 0.0f;
#pragma unroll
            for (int c = 0; c < NC; c++) {
                const int j = lane + 32 * c;
                v[c] = j < L ? Pr[(hrow + i) * L + j] : 0.0f;
                dot = fmaf(v[c], row[j], dot);
            }
            dot = aq_warp_sum(dot);
#pragma unroll
            for (int c = 0; c < NC; c++) {
                const int j = lane + 32 * c;
                row[j] = v[c] * (row[j] - dot);
            }
            if (lane == 0) rowdot[hrow + i] = dot;
        }
    }
    if (!product) return;
    __syncthreads();
    /* 3. y_h = P v (dq = a dS k) */
    float acc[4][D / 16];
    aq_product<D>(acc, sS, AQ_LDS(Lp), sB, Lp);
    if (BWD)
        aq_store<D>(out + (int64_t)n * L * ld + (int64_t)h * D, ld, i0, L, acc, a, accum);
    else
        aq_store<D>(out + (int64_t)n * L * C + (int64_t)h * D, C, i0, L, acc, 1.0f, 0);
}

/* Shared memory of the columns kernel: v's 64 keys, a query tile's q and dy_h ([64][D + 1]
 * each), its P and dS ([64][68] each), dy_h again transposed (the scores' A), its rowdot (64). */
static int aq_cols_smem(int D) {
    return (3 * AQ_TILE * AQ_LDK(D) + D * AQ_LDT + 2 * AQ_TILE * AQ_LDT + AQ_TILE) * 4;
}

/* Backward columns. blockIdx.x: key tile (64 keys j0 ..), y: head h, z: sample n. Over the
 * query tiles i0 = 0, 64, ..: dP (the rows kernel's chain), dS = P (dP - rowdot) into shared
 * memory, then dk += dS^T q, dv += P^T dy_h in registers (queries in increasing order);
 * dk = a dk, dv stored (+ the old values with accum). Products as aq_product's, with the 64 x 64
 * tiles read transposed: thread t owns keys 4 (t >> 4) .. + 3 and channels (t & 15) CPT .. */
template <int D>
__global__ void __launch_bounds__(AQ_THREADS, 2)
    attn_f32_cols_kernel(float *dqkv, const float *rowdot, const float *dy, const float *qkv,
                         const float *P, int L, int C, int heads, float a, int accum) {
    SG_PDL_ENTER();
    SG_DYNAMIC_SMEM(float, smem);
    constexpr int CPT = D / 16;
    const int h = blockIdx.y, n = blockIdx.z, j0 = blockIdx.x * AQ_TILE;
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int k0 = 4 * (threadIdx.x >> 4), c0 = CPT * (threadIdx.x & 15);
    const int64_t ld = 3LL * C, hrow = ((int64_t)n * heads + h) * L;
    const float *base = qkv + (int64_t)n * L * ld + (int64_t)h * D;
    const float *dyh = dy + (int64_t)n * L * C + (int64_t)h * D;
    float *sV = smem, *sQ = sV + AQ_TILE * AQ_LDK(D), *sDY = sQ + AQ_TILE * AQ_LDK(D);
    float *sP = sDY + AQ_TILE * AQ_LDK(D), *sDS = sP + AQ_TILE * AQ_LDT;
    float *sDYT = sDS + AQ_TILE * AQ_LDT, *sRD = sDYT + D * AQ_LDT;
    aq_load<D>(sV, AQ_LDK(D), base + 2 * C + (int64_t)j0 * ld, ld, AQ_TILE, L - j0);
    float dk[4][CPT], dv[4][CPT];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int e = 0; e < CPT; e++) dk[i][e] = dv[i][e] = 0.0f;
    for (int i0 = 0; i0 < L; i0 += AQ_TILE) {
        aq_load<D>(sQ, AQ_LDK(D), base + (int64_t)i0 * ld, ld, AQ_TILE, L - i0);
        aq_load<D>(sDY, AQ_LDK(D), dyh + (int64_t)i0 * C, C, AQ_TILE, L - i0);
        aq_load_t<D>(sDYT, dyh + (int64_t)i0 * C, C, L - i0);
        for (int idx = threadIdx.x; idx < AQ_TILE * AQ_TILE; idx += AQ_THREADS) {
            const int r = idx / AQ_TILE, j = idx % AQ_TILE;
            const bool ok = i0 + r < L && j0 + j < L;
            sP[r * AQ_LDT + j] = ok ? P[(hrow + i0 + r) * L + j0 + j] : 0.0f;
        }
        const int t = (int)threadIdx.x;
        if (t < AQ_TILE) sRD[t] = i0 + t < L ? rowdot[hrow + i0 + t] : 0.0f;
        __syncthreads();
        {
            float s[8][2];
            aq_scores<D, 2>(s, sDYT, sV);
#pragma unroll
            for (int i = 0; i < 8; i++)
#pragma unroll
                for (int c = 0; c < 2; c++) {
                    const int r = 8 * w + i, j = lane + 32 * c;
                    sDS[r * AQ_LDT + j] = sP[r * AQ_LDT + j] * (s[i][c] - sRD[r]);
                }
        }
        __syncthreads();
        const int rows = L - i0 < AQ_TILE ? L - i0 : AQ_TILE;
        for (int i = 0; i < rows; i++) {
            const float4 ds = *(const float4 *)(sDS + i * AQ_LDT + k0);
            const float4 p = *(const float4 *)(sP + i * AQ_LDT + k0);
            float q[CPT], g[CPT];
#pragma unroll
            for (int e = 0; e < CPT; e++)
                q[e] = sQ[i * AQ_LDK(D) + c0 + e], g[e] = sDY[i * AQ_LDK(D) + c0 + e];
#pragma unroll
            for (int kk = 0; kk < 4; kk++)
#pragma unroll
                for (int e = 0; e < CPT; e++) {
                    dk[kk][e] = fmaf(aq_f4(ds, kk), q[e], dk[kk][e]);
                    dv[kk][e] = fmaf(aq_f4(p, kk), g[e], dv[kk][e]);
                }
        }
        __syncthreads();
    }
    float *dbase = dqkv + (int64_t)n * L * ld + (int64_t)h * D;
    aq_store<D>(dbase + C, ld, j0, L, dk, a, accum);
    aq_store<D>(dbase + 2 * C, ld, j0, L, dv, 1.0f, accum);
}

/* ================================ launchers ================================ */

int cu_attention_f32_ok(int L, int C, int heads) {
    if (heads <= 0 || C <= 0 || C % heads || L <= 0 || L > AQ_MAX_L) return 0;
    const int D = C / heads;
    return D == 32 || D == 64;
}

long cuda_attention_f32_launches(void) {
    return aq_launches;
}

typedef void (*aq_rows_fn)(float *, float *, const float *, float *, const float *, const float *,
                           int, int, int, float, int);
template <bool BWD> static aq_rows_fn aq_rows_pick(int D, int NJ) {
    static const aq_rows_fn k[2][4] = {
        {attn_f32_rows_kernel<32, 1, BWD>, attn_f32_rows_kernel<32, 2, BWD>,
         attn_f32_rows_kernel<32, 3, BWD>, attn_f32_rows_kernel<32, 4, BWD>},
        {attn_f32_rows_kernel<64, 1, BWD>, attn_f32_rows_kernel<64, 2, BWD>,
         attn_f32_rows_kernel<64, 3, BWD>, attn_f32_rows_kernel<64, 4, BWD>}};
    return k[D == 64][NJ - 1];
}

static int aq_check(const char *fn, int N, int L, int C, int heads) {
    SG_ARG_CHECK(cu_attention_f32_ok(L, C, heads) && N > 0 && N <= 65535 && heads <= 65535,
                 "%s: a shape it does not take (N %d, L %d, C %d, heads %d)", fn, N, L, C, heads);
    return SG_OK;
}

int cu_attention_f32_fwd(cudaStream_t st, float *y, float *P, const float *qkv, int N, int L, int C,
                         int heads) {
    const char *fn = "cuda_attention_fused_fwd (fp32)";
    if (aq_check(fn, N, L, C, heads)) return SG_ERR;
    const int D = C / heads, NJ = (L + AQ_TILE - 1) / AQ_TILE, smem = aq_rows_smem(D, NJ * AQ_TILE);
    aq_rows_fn k = aq_rows_pick<false>(D, NJ);
    if (cuda_smem_attr(k, smem, fn)) return SG_ERR;
    const float a = (float)(1.0 / sqrt((double)D));
    SG_LAUNCH_NAMED("attn_f32_rows_kernel", k, dim3((unsigned)NJ, (unsigned)heads, (unsigned)N),
                    AQ_THREADS, (size_t)smem, st, y, P, (const float *)NULL, (float *)NULL,
                    (const float *)NULL, qkv, L, C, heads, a, 0);
    SG_LAUNCH_CHECK("attn_f32_rows_kernel");
    aq_launches++;
    return SG_OK;
}

int cu_attention_f32_bwd(cudaStream_t st, float *dqkv, const float *dy, const float *qkv,
                         const float *P, int N, int L, int C, int heads, int accum, void *ws,
                         int64_t ws_bytes) {
    const char *fn = "cuda_attention_fused_bwd (fp32)";
    if (aq_check(fn, N, L, C, heads)) return SG_ERR;
    SG_WS_CHECK(sg_ws_attention_bwd(N, L, C, heads, DT_F32), ws_bytes, fn);
    const int D = C / heads, NJ = (L + AQ_TILE - 1) / AQ_TILE, smem = aq_rows_smem(D, NJ * AQ_TILE);
    const int csmem = aq_cols_smem(D);
    aq_rows_fn rows = aq_rows_pick<true>(D, NJ);
    auto *cols = D == 64 ? attn_f32_cols_kernel<64> : attn_f32_cols_kernel<32>;
    if (cuda_smem_attr(rows, smem, fn) || cuda_smem_attr(cols, csmem, fn)) return SG_ERR;
    const float a = (float)(1.0 / sqrt((double)D));
    float *rowdot = (float *)ws; /* [N][heads][L] */
    const dim3 grid((unsigned)NJ, (unsigned)heads, (unsigned)N);
    SG_LAUNCH_NAMED("attn_f32_rows_kernel", rows, grid, AQ_THREADS, (size_t)smem, st, dqkv,
                    (float *)NULL, P, rowdot, dy, qkv, L, C, heads, a, accum);
    SG_LAUNCH_CHECK("attn_f32_rows_kernel");
    SG_LAUNCH_NAMED("attn_f32_cols_kernel", cols, grid, AQ_THREADS, (size_t)csmem, st, dqkv,
                    (const float *)rowdot, dy, qkv, P, L, C, heads, a, accum);
    SG_LAUNCH_CHECK("attn_f32_cols_kernel");
    aq_launches += 2;
    return SG_OK;
}
