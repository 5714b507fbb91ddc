/* attention.cu — multi-head self-attention over the pixels of a feature map.
 *
 * Shapes: L = H*W positions, C channels, `heads` heads of D = C/heads channels.
 *   qkv[N,L,3C]: q = channels [0,C), k = [C,2C), v = [2C,3C); head h owns channels
 *   h*D .. h*D+D-1 of each (an L x D matrix with row stride 3C).
 *   P[N,heads,L,L] fp32 (saved for the backward), y[N,L,C] (head h writes its D channels).
 *
 * Forward, per (n, h), a = 1/sqrt(D):  S = a q k^T,  P = row softmax(S),  y_h = P v.
 * Backward:  dv = P^T dy_h,  dP = dy_h v^T,  dS = P (dP - rowsum(P dP)),
 *            dq = a dS k,  dk = a dS^T q.
 *
 * The products are strided-batched GEMMs (blas.cu: cuBLASLt, pinned algorithms) over the N
 * samples, one head at a time (the batch stride must be uniform, and heads sit at a channel
 * offset inside each row). In the GEMMs' column-major view a row-major [r][c] matrix with row
 * stride ld is the c x r matrix with leading dimension ld, so (writing X^T for the column-major
 * view of row-major X): S^T  (L x L)  = op_T(k^T) q^T          -> P, ld L y^T  (D x L)  = v^T P^T
 * -> y + h*D, ld C dv^T (D x L)  = dy^T op_T(P^T)         -> dqkv + 2C + h*D, ld 3C dP^T (L x L)  =
 * op_T(v^T) dy^T         -> workspace, ld L dq^T (D x L)  = a k^T dS^T             -> dqkv + h*D
 *   dk^T (D x L)  = a q^T op_T(dS^T)       -> dqkv + C + h*D
 * Softmax rows (and the softmax backward) are one block per row with fixed-order tree
 * reductions. bf16: GEMM operands share one type, so the P used in P v and P^T dy and the dS
 * used for dq, dk are rounded to bf16 copies in the workspace (as autocast does); P itself,
 * dP and dS are fp32, and dqkv/y are rounded once (beta * old added in fp32 by the GEMM).
 *
 * The fused engine (SG_ATTN=fused, graph/backend_cuda.c): the same op in one kernel per
 * direction for bf16 sequences of at most 256 positions, below ("the fused bf16 kernels").
 */
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/tensor_core.cuh"

/* ================================ kernels ================================ */

/* blockIdx.x: row (n, i) of head h; threads stride over the L columns j.
 * row = P + ((n*heads + h)*L + i)*L holds the scaled scores; it becomes
 * softmax = exp(s - max) * (1 / sum) (the CPU's formulation), and with Pb != NULL also a bf16
 * copy at Pb + (n*L + i)*L. */
__global__ void softmax_fwd_kernel(float *P, uint16_t *Pb, int L, int heads, int h) {
    SG_PDL_ENTER();
    __shared__ float sh[SG_THREADS];
    const int64_t n = blockIdx.x / L, i = blockIdx.x % L;
    float *row = P + ((n * heads + h) * L + i) * L;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < L; j += SG_THREADS) mx = fmaxf(mx, row[j]);
    mx = dev_block_max(mx, sh);
    float s = 0.0f;
    for (int j = threadIdx.x; j < L; j += SG_THREADS) s += expf(row[j] - mx);
    s = dev_block_sum(s, sh);
    const float inv = (float)(1.0 / (double)s);
    for (int j = threadIdx.x; j < L; j += SG_THREADS) {
        const float p = expf(row[j] - mx) * inv;
        row[j] = p;
        if (Pb) Pb[(n * L + i) * L + j] = dev_f32_to_bf16(p);
    }
}

/* blockIdx.x: row (n, i) of head h; threads stride over the columns j.
 * dS = P (dP - sum_j P dP), in place over dP (fp32, [N][L][L]); with bf16 copies (dSb, Pb
 * != NULL) also writes dS and P rounded to bf16, laid out like dP. */
__global__ void softmax_bwd_kernel(float *dP, uint16_t *dSb, uint16_t *Pb, const float *P, int L,
                                   int heads, int h) {
    SG_PDL_ENTER();
    __shared__ float sh[SG_THREADS];
    const int64_t n = blockIdx.x / L, i = blockIdx.x % L;
    const float *prow = P + ((n * heads + h) * L + i) * L;
    const int64_t o = (n * L + i) * L;
    float *drow = dP + o;
    float dot = 0.0f;
    for (int j = threadIdx.x; j < L; j += SG_THREADS) dot += prow[j] * drow[j];
    dot = dev_block_sum(dot, sh);
    for (int j = threadIdx.x; j < L; j += SG_THREADS) {
        const float p = prow[j], ds = p * (drow[j] - dot);
        drow[j] = ds;
        if (dSb) {
            dSb[o + j] = dev_f32_to_bf16(ds);
            Pb[o + j] = dev_f32_to_bf16(p);
        }
    }
}

/* ---- the fused bf16 kernels (SG_ATTN=fused) ----
 *
 * The same math as the GEMM path, with the sequence held on chip: L <= AF_MAX_L positions, D a
 * multiple of 16 (every head of the models: D = 32, 64, 128, 256). bf16 operands on tensor cores
 * (mma.sync.m16n8k16, fragments from ldmatrix: kernels/cuda/tensor_core.cuh), fp32
 * accumulation; P, dP and the softmax in fp32; the P and dS fed to the tensor cores rounded to
 * bf16, as the GEMM path's copies are. Every reduction has a fixed order (k16 steps in
 * increasing k, lane-strided partial sums then a fixed xor tree), no atomics; the bits differ
 * from the GEMM path's (another summation order), so the choice is an engine switch.
 *
 * Shared tiles are row-major with 8 bf16 (16 bytes) of padding per row, so the 8 rows one
 * ldmatrix reads start in 8 distinct 16-byte bank groups. ldmatrix addressing (lane l, l7 =
 * l & 7, l8 = (l >> 3) & 1, l16 = l >> 4), for an m16 x k16 A fragment / two n8 x k16 B
 * fragments:
 *   A stored [m][k] (plain):       row m0 + l7 + 8 l8, column k0 + 8 l16
 *   A stored [k][m] (.trans):      row k0 + l7 + 8 l16, column m0 + 8 l8
 *   B stored [n][k] (plain):       row n0 + l7 + 8 l16, column k0 + 8 l8
 *   B stored [k][n] (.trans):      row k0 + l7 + 8 l8,  column n0 + 8 l16
 * (matrix order of the x4 loads as conv_tc.cu's: a[0..3] = (m, k), (m+8, k), (m, k+8),
 * (m+8, k+8); B: b[0], b[1] of the n0 tile, then of the n0 + 8 tile). */
#define AF_MAX_L 256
#define AF_TILE 64 /* query rows per block tile (16 per warp), keys / channels per smem tile */
#define AF_THREADS 128
#define AF_DK 32 /* channels per Q/K (dy/V) tile of the score products */
#define AF_LD(w) ((w) + 8)

/* R x W bf16 tile (W a multiple of 8) from global rows (row stride ld elements) into shared
 * memory with row stride AF_LD(W): 16-byte cp.async; rows >= rows_ok and columns >= cols_ok
 * are zero-filled (cols_ok a multiple of 8). The calling thread commits and waits. */
template <int R, int W>
__device__ __forceinline__ void af_load(uint16_t *s, const uint16_t *g, int64_t ld, int rows_ok,
                                        int cols_ok) {
    for (int seg = threadIdx.x; seg < R * W / 8; seg += AF_THREADS) {
        const int r = seg / (W / 8), c = (seg % (W / 8)) * 8;
        const int ok = r < rows_ok && c < cols_ok;
        sg_cp_async_16(s + r * AF_LD(W) + c, ok ? g + r * ld + c : g, ok);
    }
    sg_cp_async_commit();
    sg_cp_async_wait(0);
}

__device__ __forceinline__ void af_lda(uint32_t a[4], const uint16_t *s, int ld, int m0, int k0,
                                       bool km, int lane) {
    const int l7 = lane & 7, l8 = (lane >> 3) & 1, l16 = lane >> 4;
    if (km)
        sg_ldmatrix_x4_trans(a, s + (k0 + l7 + 8 * l16) * ld + m0 + 8 * l8);
    else
        sg_ldmatrix_x4(a, s + (m0 + l7 + 8 * l8) * ld + k0 + 8 * l16);
}
/* b[0..1]: fragments of the n tile n0, b[2..3]: of n0 + 8 */
__device__ __forceinline__ void af_ldb(uint32_t b[4], const uint16_t *s, int ld, int n0, int k0,
                                       bool kn, int lane) {
    const int l7 = lane & 7, l8 = (lane >> 3) & 1, l16 = lane >> 4;
    if (kn)
        sg_ldmatrix_x4_trans(b, s + (k0 + l7 + 8 * l8) * ld + n0 + 8 * l16);
    else
        sg_ldmatrix_x4(b, s + (n0 + l7 + 8 * l16) * ld + k0 + 8 * l8);
}
/* acc (a warp's 16 x 64 tile: 8 n8 tiles) += A[m0.., k0..k0+ksteps*16) * B[k.., n 0..63] */
__device__ __forceinline__ void af_mma(float (&acc)[8][4], const uint16_t *sa, int lda, int m0,
                                       int ka, bool akm, const uint16_t *sb, int ldb, int kb,
                                       bool bkn, int ksteps, int lane) {
    for (int ks = 0; ks < ksteps; ks++) {
        uint32_t a[4];
        af_lda(a, sa, lda, m0, ka + 16 * ks, akm, lane);
#pragma unroll
        for (int nj = 0; nj < 4; nj++) {
            uint32_t b[4];
            af_ldb(b, sb, ldb, 16 * nj, kb + 16 * ks, bkn, lane);
            sg_mma_bf16_16816(acc[2 * nj], a, b, acc[2 * nj]);
            sg_mma_bf16_16816(acc[2 * nj + 1], a, b + 2, acc[2 * nj + 1]);
        }
    }
}
__device__ __forceinline__ void af_zero(float (&acc)[8][4]) {
#pragma unroll
    for (int t = 0; t < 8; t++) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.0f;
}
/* The warp's 16 x 64 accumulator tile times s, rows r0 + (g, g + 8), columns c0 + 8t + 2q (+1),
 * into a [rows][ld] fp32 shared tile. */
__device__ __forceinline__ void af_st_f32(float *s, int ld, int r0, int c0,
                                          const float (&acc)[8][4], float scale, int lane) {
    const int g = lane >> 2, q = lane & 3;
#pragma unroll
    for (int t = 0; t < 8; t++)
#pragma unroll
        for (int hf = 0; hf < 2; hf++) {
            float *row = s + (r0 + g + 8 * hf) * ld + c0 + 8 * t + 2 * q;
            row[0] = acc[t][2 * hf] * scale;
            row[1] = acc[t][2 * hf + 1] * scale;
        }
}
/* The warp's 16 x 64 tile, scale * acc (+ old with accum, an fp32 add), rounded to bf16 into
 * global rows i0 + (g, g + 8) < rows_ok, columns d0 + 8t + 2q (+1) < cols_ok (row stride ld). */
__device__ __forceinline__ void af_st_out(uint16_t *out, int64_t ld, int i0, int rows_ok, int d0,
                                          int cols_ok, const float (&acc)[8][4], float scale,
                                          int accum, int lane) {
    const int g = lane >> 2, q = lane & 3;
#pragma unroll
    for (int t = 0; t < 8; t++)
#pragma unroll
        for (int hf = 0; hf < 2; hf++) {
            const int i = i0 + g + 8 * hf, d = d0 + 8 * t + 2 * q;
            if (i >= rows_ok || d >= cols_ok) continue;
            uint16_t *o = out + (int64_t)i * ld + d;
            float v0 = acc[t][2 * hf] * scale, v1 = acc[t][2 * hf + 1] * scale;
            if (accum) {
                v0 = __fadd_rn(dev_bf16_to_f32(o[0]), v0);
                v1 = __fadd_rn(dev_bf16_to_f32(o[1]), v1);
            }
            *(uint32_t *)o = (uint32_t)dev_f32_to_bf16(v0) | (uint32_t)dev_f32_to_bf16(v1) << 16;
        }
}
__device__ __forceinline__ float af_warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float af_warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Forward. blockIdx.x: query tile (64 rows), y: head h, z: sample n; warp w owns the tile's
 * rows 16w .. 16w + 15 through all three steps:
 *   1. S = a q k^T for the tile's rows and all Lp = L rounded up to 64 keys, key tile by key
 *      tile, D in AF_DK slices (Q and K tiles staged in shared memory), into sS (fp32);
 *   2. each row's softmax (the GEMM path's formula: exp(s - max) * (1 / sum)) over its L keys:
 *      P to global (fp32, saved for the backward) and, rounded to bf16, to sP (0 past L);
 *   3. y_h = P v, 64 channels at a time, the keys in tiles of 64 (V tile staged), stored bf16.
 * Dynamic shared memory: sS [64][Lp+4] fp32, sP [64][Lp+8], sQ, sK [64][AF_LD(32)],
 * sV [64][AF_LD(64)] bf16. */
__global__ void __launch_bounds__(AF_THREADS)
    attn_fused_fwd_kernel(uint16_t *y, float *P, const uint16_t *qkv, int L, int C, int heads,
                          float a) {
    SG_PDL_ENTER();
    SG_DYNAMIC_SMEM(float, sS);
    const int Lp = (L + AF_TILE - 1) / AF_TILE * AF_TILE, ldS = Lp + 4, ldP = AF_LD(Lp);
    uint16_t *sP = (uint16_t *)(sS + AF_TILE * ldS);
    uint16_t *sQ = sP + AF_TILE * ldP, *sK = sQ + AF_TILE * AF_LD(AF_DK);
    uint16_t *sV = sK + AF_TILE * AF_LD(AF_DK);
    const int D = C / heads, h = blockIdx.y, n = blockIdx.z, i0 = blockIdx.x * AF_TILE;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, wr = 16 * warp;
    const int64_t ld = 3LL * C;
    const uint16_t *base = qkv + (int64_t)n * L * ld + (int64_t)h * D;
    float acc[8][4];
    /* 1. scores */
    for (int j0 = 0; j0 < Lp; j0 += AF_TILE) {
        af_zero(acc);
        for (int d0 = 0; d0 < D; d0 += AF_DK) {
            __syncthreads(); /* the previous tiles are read */
            af_load<AF_TILE, AF_DK>(sQ, base + (int64_t)i0 * ld + d0, ld, L - i0, D - d0);
            af_load<AF_TILE, AF_DK>(sK, base + C + (int64_t)j0 * ld + d0, ld, L - j0, D - d0);
            __syncthreads();
            af_mma(acc, sQ, AF_LD(AF_DK), wr, 0, false, sK, AF_LD(AF_DK), 0, false, AF_DK / 16,
                   lane);
        }
        af_st_f32(sS, ldS, wr, j0, acc, a, lane);
    }
    __syncwarp();
    /* 2. softmax of the warp's rows */
    for (int r = wr; r < wr + 16; r++) {
        const float *srow = sS + r * ldS;
        uint16_t *prow = sP + r * ldP;
        float mx = -INFINITY, s = 0.0f;
        for (int j = lane; j < L; j += 32) mx = fmaxf(mx, srow[j]);
        mx = af_warp_max(mx);
        for (int j = lane; j < L; j += 32) s += expf(srow[j] - mx);
        s = af_warp_sum(s);
        const float inv = (float)(1.0 / (double)s);
        const int i = i0 + r;
        float *grow = i < L ? P + (((int64_t)n * heads + h) * L + i) * L : NULL;
        for (int j = lane; j < Lp; j += 32) {
            const float p = j < L ? expf(srow[j] - mx) * inv : 0.0f;
            prow[j] = dev_f32_to_bf16(p);
            if (grow && j < L) grow[j] = p;
        }
    }
    /* 3. y_h = P v */
    for (int d0 = 0; d0 < D; d0 += AF_TILE) {
        af_zero(acc);
        for (int j0 = 0; j0 < Lp; j0 += AF_TILE) {
            __syncthreads(); /* sV is read; the first time: every sP row is written */
            af_load<AF_TILE, AF_TILE>(sV, base + 2 * C + (int64_t)j0 * ld + d0, ld, L - j0, D - d0);
            __syncthreads();
            af_mma(acc, sP, ldP, wr, j0, false, sV, AF_LD(AF_TILE), 0, true, AF_TILE / 16, lane);
        }
        af_st_out(y + (int64_t)n * L * C + (int64_t)h * D, C, i0 + wr, L, d0, D, acc, 1.0f, 0,
                  lane);
    }
}

/* The backward's middle region: sdP (64 x (Lp+4) fp32) in step A, sT and sPt in step B. */
__host__ __device__ __forceinline__ int af_bwd_region_bytes(int Lp) {
    const int dp = AF_TILE * (Lp + 4) * 4, tiles = 2 * AF_TILE * AF_LD(AF_TILE) * 2;
    return dp > tiles ? dp : tiles;
}
static int af_fwd_smem(int Lp) {
    return AF_TILE * (Lp + 4) * 4 + AF_TILE * AF_LD(Lp) * 2 + 2 * AF_TILE * AF_LD(AF_DK) * 2 +
           AF_TILE * AF_LD(AF_TILE) * 2;
}
static int af_bwd_smem(int Lp) {
    return Lp * AF_LD(Lp) * 2 + af_bwd_region_bytes(Lp) + 2 * AF_TILE * AF_LD(AF_DK) * 2;
}

/* Backward. blockIdx.x: head h, y: sample n; the block owns dq, dk, dv of its (n, h), so every
 * output element is written once, by one warp, in a fixed order (no atomics, no partials).
 *   A. for each 64-row query tile (warp w: rows 16w..): dP = dy_h v^T into sdP (fp32), then per
 *      row dS = P (dP - sum_j P dP) (P read from global), rounded to bf16 into sdS, which holds
 *      all Lp x Lp of dS by the end (0 past L);
 *   B. dq = a dS k (A = sdS rows), dk = a dS^T q (A = sdS read transposed), dv = P^T dy_h (A =
 *      a 64 x 64 tile of P rounded to bf16, read transposed), each in 64 x 64 output tiles (warp
 *      w: rows 16w..) over the reduction in tiles of 64, the B operand (k, q, dy) staged.
 * Dynamic shared memory: sdS [Lp][AF_LD(Lp)] bf16; then a region of 64 x (Lp+4) fp32 that is
 * sdP in A and the staged tiles sT, sPt [64][AF_LD(64)] in B; then sA, sB [64][AF_LD(32)]. */
__global__ void __launch_bounds__(AF_THREADS)
    attn_fused_bwd_kernel(uint16_t *dqkv, const uint16_t *dy, const uint16_t *qkv, const float *P,
                          int L, int C, int heads, float a, int accum) {
    SG_PDL_ENTER();
    SG_DYNAMIC_SMEM(uint16_t, sdS);
    const int Lp = (L + AF_TILE - 1) / AF_TILE * AF_TILE, ldS = AF_LD(Lp), ldP = Lp + 4;
    float *sdP = (float *)(sdS + Lp * ldS);
    uint16_t *sT = (uint16_t *)sdP, *sPt = sT + AF_TILE * AF_LD(AF_TILE);
    uint16_t *sA = (uint16_t *)((char *)sdP + af_bwd_region_bytes(Lp));
    uint16_t *sB = sA + AF_TILE * AF_LD(AF_DK);
    const int D = C / heads, h = blockIdx.x, n = blockIdx.y;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, wr = 16 * warp;
    const int64_t ld = 3LL * C;
    const uint16_t *base = qkv + (int64_t)n * L * ld + (int64_t)h * D;
    const uint16_t *dyh = dy + (int64_t)n * L * C + (int64_t)h * D;
    uint16_t *dbase = dqkv + (int64_t)n * L * ld + (int64_t)h * D;
    const float *Pnh = P + ((int64_t)n * heads + h) * L * L;
    float acc[8][4];
    /* A. dS */
    for (int i0 = 0; i0 < Lp; i0 += AF_TILE) {
        for (int j0 = 0; j0 < Lp; j0 += AF_TILE) {
            af_zero(acc);
            for (int d0 = 0; d0 < D; d0 += AF_DK) {
                __syncthreads();
                af_load<AF_TILE, AF_DK>(sA, dyh + (int64_t)i0 * C + d0, C, L - i0, D - d0);
                af_load<AF_TILE, AF_DK>(sB, base + 2 * C + (int64_t)j0 * ld + d0, ld, L - j0,
                                        D - d0);
                __syncthreads();
                af_mma(acc, sA, AF_LD(AF_DK), wr, 0, false, sB, AF_LD(AF_DK), 0, false, AF_DK / 16,
                       lane);
            }
            af_st_f32(sdP, ldP, wr, j0, acc, 1.0f, lane);
        }
        __syncwarp();
        for (int r = wr; r < wr + 16; r++) {
            const int i = i0 + r;
            const float *drow = sdP + r * ldP, *prow = Pnh + (int64_t)i * L;
            uint16_t *srow = sdS + i * ldS;
            float dot = 0.0f;
            if (i < L)
                for (int j = lane; j < L; j += 32) dot += prow[j] * drow[j];
            dot = af_warp_sum(dot);
            for (int j = lane; j < Lp; j += 32)
                srow[j] = dev_f32_to_bf16(i < L && j < L ? prow[j] * (drow[j] - dot) : 0.0f);
        }
        __syncwarp(); /* the warp's sdP rows are read before the next tile overwrites them */
    }
    /* B. dq rows i0.. = a dS[i0..][:] k */
    for (int i0 = 0; i0 < Lp; i0 += AF_TILE)
        for (int d0 = 0; d0 < D; d0 += AF_TILE) {
            af_zero(acc);
            for (int j0 = 0; j0 < Lp; j0 += AF_TILE) {
                __syncthreads(); /* sT is read; the first time: sdS is complete */
                af_load<AF_TILE, AF_TILE>(sT, base + C + (int64_t)j0 * ld + d0, ld, L - j0, D - d0);
                __syncthreads();
                af_mma(acc, sdS + i0 * ldS, ldS, wr, j0, false, sT, AF_LD(AF_TILE), 0, true,
                       AF_TILE / 16, lane);
            }
            af_st_out(dbase, ld, i0 + wr, L, d0, D, acc, a, accum, lane);
        }
    /* dk rows j0.. = a dS[:][j0..]^T q;  dv rows j0.. = P[:][j0..]^T dy_h */
    for (int j0 = 0; j0 < Lp; j0 += AF_TILE)
        for (int d0 = 0; d0 < D; d0 += AF_TILE) {
            af_zero(acc);
            for (int i0 = 0; i0 < Lp; i0 += AF_TILE) {
                __syncthreads();
                af_load<AF_TILE, AF_TILE>(sT, base + (int64_t)i0 * ld + d0, ld, L - i0, D - d0);
                __syncthreads();
                af_mma(acc, sdS + i0 * ldS, ldS, wr + j0, 0, true, sT, AF_LD(AF_TILE), 0, true,
                       AF_TILE / 16, lane);
            }
            af_st_out(dbase + C, ld, j0 + wr, L, d0, D, acc, a, accum, lane);
            af_zero(acc);
            for (int i0 = 0; i0 < Lp; i0 += AF_TILE) {
                __syncthreads();
                af_load<AF_TILE, AF_TILE>(sT, dyh + (int64_t)i0 * C + d0, C, L - i0, D - d0);
                for (int e = threadIdx.x; e < AF_TILE * AF_TILE; e += AF_THREADS) {
                    const int r = e / AF_TILE, c = e % AF_TILE, i = i0 + r, j = j0 + c;
                    sPt[r * AF_LD(AF_TILE) + c] =
                        dev_f32_to_bf16(i < L && j < L ? Pnh[(int64_t)i * L + j] : 0.0f);
                }
                __syncthreads();
                af_mma(acc, sPt, AF_LD(AF_TILE), wr, 0, true, sT, AF_LD(AF_TILE), 0, true,
                       AF_TILE / 16, lane);
            }
            af_st_out(dbase + 2 * C, ld, j0 + wr, L, d0, D, acc, 1.0f, accum, lane);
        }
}

/* =============================== launchers =============================== */

static const void *att_off(const void *p, int64_t elems, int dt) {
    return (const char *)p + elems * sg_dtype_size(dt);
}

/* One strided-batched column-major GEMM over `batch` matrices, fp32 compute. */
static int att_gemm(sg_blas *blas, cudaStream_t st, cublasOperation_t ta, cublasOperation_t tb,
                    int m, int n, int k, float alpha, const void *A, int adt, int lda, int64_t sA,
                    const void *B, int bdt, int ldb, int64_t sB, float beta, void *C, int cdt,
                    int ldc, int64_t sC, int batch) {
    return cu_blas_gemm(blas, st, ta, tb, m, n, k, alpha, A, adt, lda, sA, B, bdt, ldb, sB, beta, C,
                        cdt, ldc, sC, batch);
}

static int att_check(const char *fn, sg_blas *blas, cudaStream_t st, int N, int L, int C, int heads,
                     int dt) {
    SG_DT_CHECK(dt, fn);
    SG_ARG_CHECK(N > 0 && L > 0 && C > 0 && heads > 0 && C % heads == 0,
                 "%s: bad shape (C %% heads)", fn);
    SG_ARG_CHECK((int64_t)N * L < 2147483647LL && (int64_t)L * L < 2147483647LL &&
                     3LL * C < 2147483647LL,
                 "%s: shape too large", fn);
    return cu_blas_check(blas, st, fn);
}

int cuda_attention_fwd(cudaStream_t st, sg_blas *blas, void *y, float *P, const void *qkv, int N,
                       int L, int C, int heads, int dt, void *ws, int64_t ws_bytes) {
    const char *fn = "cuda_attention_fwd";
    if (att_check(fn, blas, st, N, L, C, heads, dt)) return SG_ERR;
    SG_WS_CHECK(sg_ws_attention_fwd(N, L, C, heads, dt), ws_bytes, fn);
    const int D = C / heads, ld = 3 * C;
    const float a = (float)(1.0 / sqrt((double)D));
    const int64_t sqkv = (int64_t)L * ld, sP = (int64_t)heads * L * L, sY = (int64_t)L * C;
    uint16_t *Pb = dt == DT_BF16 ? (uint16_t *)ws : NULL;
    for (int h = 0; h < heads; h++) {
        const void *q = att_off(qkv, (int64_t)h * D, dt);
        const void *k = att_off(qkv, (int64_t)C + h * D, dt);
        const void *v = att_off(qkv, (int64_t)2 * C + h * D, dt);
        float *Ph = P + (int64_t)h * L * L;
        /* S^T (L x L) = a op_T(k^T) q^T, into P */
        if (att_gemm(blas, st, CUBLAS_OP_T, CUBLAS_OP_N, L, L, D, a, k, dt, ld, sqkv, q, dt, ld,
                     sqkv, 0.0f, Ph, DT_F32, L, sP, N))
            return SG_ERR;
        SG_LAUNCH(softmax_fwd_kernel, (unsigned)(N * L), SG_THREADS, 0, st, P, Pb, L, heads, h);
        SG_LAUNCH_CHECK("softmax_fwd_kernel");
        /* y_h^T (D x L) = v^T P^T */
        const void *Pop = Pb ? (const void *)Pb : (const void *)Ph;
        const int64_t sPop = Pb ? (int64_t)L * L : sP;
        if (att_gemm(blas, st, CUBLAS_OP_N, CUBLAS_OP_N, D, L, L, 1.0f, v, dt, ld, sqkv, Pop, dt, L,
                     sPop, 0.0f, (void *)att_off(y, (int64_t)h * D, dt), dt, C, sY, N))
            return SG_ERR;
    }
    return SG_OK;
}

int cuda_attention_bwd(cudaStream_t st, sg_blas *blas, void *dqkv, const void *dy, const void *qkv,
                       const float *P, int N, int L, int C, int heads, int dt, int accum, void *ws,
                       int64_t ws_bytes) {
    const char *fn = "cuda_attention_bwd";
    if (att_check(fn, blas, st, N, L, C, heads, dt)) return SG_ERR;
    SG_WS_CHECK(sg_ws_attention_bwd(N, L, C, heads, dt), ws_bytes, fn);
    const int D = C / heads, ld = 3 * C;
    const float a = (float)(1.0 / sqrt((double)D)), beta = accum ? 1.0f : 0.0f;
    const int64_t sqkv = (int64_t)L * ld, sP = (int64_t)heads * L * L, sY = (int64_t)L * C;
    const int64_t sW = (int64_t)L * L; /* one [L][L] workspace matrix per sample */
    float *dP = (float *)ws;
    uint16_t *dSb = NULL, *Pb = NULL;
    if (dt == DT_BF16) {
        dSb = (uint16_t *)((char *)ws + sg_ws_align((int64_t)N * L * L * 4));
        Pb = (uint16_t *)((char *)dSb + sg_ws_align((int64_t)N * L * L * 2));
    }
    for (int h = 0; h < heads; h++) {
        const void *q = att_off(qkv, (int64_t)h * D, dt);
        const void *k = att_off(qkv, (int64_t)C + h * D, dt);
        const void *v = att_off(qkv, (int64_t)2 * C + h * D, dt);
        void *dq = (void *)att_off(dqkv, (int64_t)h * D, dt);
        void *dk = (void *)att_off(dqkv, (int64_t)C + h * D, dt);
        void *dv = (void *)att_off(dqkv, (int64_t)2 * C + h * D, dt);
        const void *dyh = att_off(dy, (int64_t)h * D, dt);
        const float *Ph = P + (int64_t)h * L * L;
        /* dP^T (L x L) = op_T(v^T) dy_h^T */
        if (att_gemm(blas, st, CUBLAS_OP_T, CUBLAS_OP_N, L, L, D, 1.0f, v, dt, ld, sqkv, dyh, dt, C,
                     sY, 0.0f, dP, DT_F32, L, sW, N))
            return SG_ERR;
        SG_LAUNCH(softmax_bwd_kernel, (unsigned)(N * L), SG_THREADS, 0, st, dP, dSb, Pb, P, L,
                  heads, h);
        SG_LAUNCH_CHECK("softmax_bwd_kernel");
        const void *Pop = Pb ? (const void *)Pb : (const void *)Ph;
        const int64_t sPop = Pb ? sW : sP;
        const void *dS = dSb ? (const void *)dSb : (const void *)dP;
        /* dv^T (D x L) = dy_h^T op_T(P^T) */
        if (att_gemm(blas, st, CUBLAS_OP_N, CUBLAS_OP_T, D, L, L, 1.0f, dyh, dt, C, sY, Pop, dt, L,
                     sPop, beta, dv, dt, ld, sqkv, N))
            return SG_ERR;
        /* dq^T (D x L) = a k^T dS^T */
        if (att_gemm(blas, st, CUBLAS_OP_N, CUBLAS_OP_N, D, L, L, a, k, dt, ld, sqkv, dS, dt, L, sW,
                     beta, dq, dt, ld, sqkv, N))
            return SG_ERR;
        /* dk^T (D x L) = a q^T op_T(dS^T) */
        if (att_gemm(blas, st, CUBLAS_OP_N, CUBLAS_OP_T, D, L, L, a, q, dt, ld, sqkv, dS, dt, L, sW,
                     beta, dk, dt, ld, sqkv, N))
            return SG_ERR;
    }
    return SG_OK;
}

/* ---- the fused engine (SG_ATTN=fused) ---- */

int cuda_attention_fused_ok(int L, int C, int heads, int dt) {
    if (dt != DT_BF16 || heads <= 0 || C % heads || L <= 0 || L > AF_MAX_L) return 0;
    return (C / heads) % 16 == 0;
}

int cuda_attention_fused_fwd(cudaStream_t st, sg_blas *blas, void *y, float *P, const void *qkv,
                             int N, int L, int C, int heads, int dt, void *ws, int64_t ws_bytes) {
    if (!cuda_attention_fused_ok(L, C, heads, dt))
        return cuda_attention_fwd(st, blas, y, P, qkv, N, L, C, heads, dt, ws, ws_bytes);
    const char *fn = "cuda_attention_fused_fwd";
    SG_ARG_CHECK(N > 0 && N <= 65535 && heads <= 65535, "%s: bad shape", fn);
    const int Lp = (L + AF_TILE - 1) / AF_TILE * AF_TILE, smem = af_fwd_smem(Lp);
    if (cuda_smem_attr(attn_fused_fwd_kernel, smem, fn)) return SG_ERR;
    const float a = (float)(1.0 / sqrt((double)(C / heads)));
    SG_LAUNCH(attn_fused_fwd_kernel, dim3((unsigned)(Lp / AF_TILE), (unsigned)heads, (unsigned)N),
              AF_THREADS, (size_t)smem, st, (uint16_t *)y, P, (const uint16_t *)qkv, L, C, heads,
              a);
    SG_LAUNCH_CHECK("attn_fused_fwd_kernel");
    return SG_OK;
}

int cuda_attention_fused_bwd(cudaStream_t st, sg_blas *blas, void *dqkv, const void *dy,
                             const void *qkv, const float *P, int N, int L, int C, int heads,
                             int dt, int accum, void *ws, int64_t ws_bytes) {
    if (!cuda_attention_fused_ok(L, C, heads, dt))
        return cuda_attention_bwd(st, blas, dqkv, dy, qkv, P, N, L, C, heads, dt, accum, ws,
                                  ws_bytes);
    const char *fn = "cuda_attention_fused_bwd";
    SG_ARG_CHECK(N > 0 && N <= 65535, "%s: bad shape", fn);
    const int Lp = (L + AF_TILE - 1) / AF_TILE * AF_TILE, smem = af_bwd_smem(Lp);
    if (cuda_smem_attr(attn_fused_bwd_kernel, smem, fn)) return SG_ERR;
    const float a = (float)(1.0 / sqrt((double)(C / heads)));
    SG_LAUNCH(attn_fused_bwd_kernel, dim3((unsigned)heads, (unsigned)N), AF_THREADS, (size_t)smem,
              st, (uint16_t *)dqkv, (const uint16_t *)dy, (const uint16_t *)qkv, P, L, C, heads, a,
              accum);
    SG_LAUNCH_CHECK("attn_fused_bwd_kernel");
    return SG_OK;
}
