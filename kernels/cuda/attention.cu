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
 * Softmax rows (and the softmax backward) are one warp a row with fixed-order tree
 * reductions (the order of the block-per-row kernels they replaced: the same bits). bf16: GEMM
 * operands share one type, so the P used in P v and P^T dy and the dS used for dq, dk are rounded
 * to bf16 copies in the workspace (as autocast does); P itself, dP and dS are fp32, and dqkv/y are
 * rounded once (beta * old added in fp32 by the GEMM).
 *
 * The fused engine (SG_ATTN=fused, graph/backend_cuda_engines.c): the same op in one kernel per
 * direction for bf16 sequences of at most 256 positions, below ("the fused bf16 kernels"); fp32
 * heads of 32 or 64 channels take attention_f32.cu's kernels (CUDA cores, every head a launch).
 */
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/tensor_core.cuh"

/* ================================ kernels ================================ */

/* The softmax rows, one warp a row (SM_ROWS rows a block of SG_THREADS threads). The reductions
 * over a row keep the order of the block-per-row kernels these were (dev_block_reduce over
 * SG_THREADS threads, thread t summing columns t, t + SG_THREADS, ... in order), so the bits
 * are theirs: lane l keeps thread t = 32 k + l's partial in slot k (SM_SLOTS slots), and
 * sm_row_reduce combines in that function's tree, t with t + SG_THREADS / 2, then with
 * t + SG_THREADS / 4, ... t + 1: first the slots k with k + SM_SLOTS / 2, ... k + 1 in the lane
 * (t + 128, + 64, + 32), then the lanes 16, 8, 4, 2, 1 apart by shuffles; lane 0's value is
 * everyone's. Why: a block a row spent nine barriers on each of its two reductions for a row of
 * 256 values (unet_cifar's attention, 128 x 256 rows a head at batch 128); a warp does them with
 * shuffles, and reads its row (1 KiB) back from L1. */
#define SM_ROWS (SG_THREADS / 32)
#define SM_SLOTS (SG_THREADS / 32)
template <bool MAX> __device__ __forceinline__ float sm_row_reduce(float (&v)[SM_SLOTS]) {
#pragma unroll
    for (int s = SM_SLOTS / 2; s > 0; s >>= 1)
#pragma unroll
        for (int k = 0; k < s; k++) v[k] = MAX ? fmaxf(v[k], v[k + s]) : v[k] + v[k + s];
    float r = v[0];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float u = __shfl_down_sync(0xffffffffu, r, o);
        r = MAX ? fmaxf(r, u) : r + u;
    }
    return __shfl_sync(0xffffffffu, r, 0);
}

/* Row r = (n, i) of head h (warp r % SM_ROWS of block r / SM_ROWS; rows: N L); lane l takes
 * columns 32 k + l + SG_THREADS m (slot k). row = P + ((n*heads + h)*L + i)*L holds the scaled
 * scores; it becomes softmax = exp(s - max) * (1 / sum) (the CPU's formulation), and with Pb !=
 * NULL also a bf16 copy at Pb + (n*L + i)*L. */
__global__ void __launch_bounds__(SG_THREADS)
    softmax_fwd_kernel(float *P, uint16_t *Pb, int64_t rows, int L, int heads, int h) {
    SG_PDL_ENTER();
    const int64_t r = (int64_t)blockIdx.x * SM_ROWS + threadIdx.x / 32;
    if (r >= rows) return; /* the whole warp: no barrier follows */
    const int lane = threadIdx.x % 32;
    const int64_t n = r / L, i = r % L;
    float *row = P + ((n * heads + h) * L + i) * L;
    float v[SM_SLOTS];
#pragma unroll
    for (int k = 0; k < SM_SLOTS; k++) {
        v[k] = -INFINITY;
        for (int j = 32 * k + lane; j < L; j += SG_THREADS) v[k] = fmaxf(v[k], row[j]);
    }
    const float mx = sm_row_reduce<true>(v);
#pragma unroll
    for (int k = 0; k < SM_SLOTS; k++) {
        v[k] = 0.0f;
        for (int j = 32 * k + lane; j < L; j += SG_THREADS) v[k] += expf(row[j] - mx);
    }
    const float inv = (float)(1.0 / (double)sm_row_reduce<false>(v));
    for (int j = lane; j < L; j += 32) {
        const float p = expf(row[j] - mx) * inv;
        row[j] = p;
        if (Pb) Pb[(n * L + i) * L + j] = dev_f32_to_bf16(p);
    }
}

/* Row r = (n, i) of head h, laid out as softmax_fwd_kernel's. dS = P (dP - sum_j P dP), in
 * place over dP (fp32, [N][L][L]); with bf16 copies (dSb, Pb != NULL) also writes dS and P
 * rounded to bf16, laid out like dP. */
__global__ void __launch_bounds__(SG_THREADS)
    softmax_bwd_kernel(float *dP, uint16_t *dSb, uint16_t *Pb, const float *P, int64_t rows, int L,
                       int heads, int h) {
    SG_PDL_ENTER();
    const int64_t r = (int64_t)blockIdx.x * SM_ROWS + threadIdx.x / 32;
    if (r >= rows) return;
    const int lane = threadIdx.x % 32;
    const int64_t n = r / L, i = r % L;
    const float *prow = P + ((n * heads + h) * L + i) * L;
    const int64_t o = (n * L + i) * L;
    float *drow = dP + o;
    float v[SM_SLOTS];
#pragma unroll
    for (int k = 0; k < SM_SLOTS; k++) {
        v[k] = 0.0f;
        for (int j = 32 * k + lane; j < L; j += SG_THREADS) v[k] += prow[j] * drow[j];
    }
    const float dot = sm_row_reduce<false>(v);
    for (int j = lane; j < L; j += 32) {
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
 * The same math as the GEMM path with a head's sequence held on chip: L <= AF_MAX_L positions,
 * D a multiple of 16 and at most AF_MAX_D (every head of the models: D = 32, 64, 128, 256).
 * bf16 operands on tensor cores (mma.sync.m16n8k16, fragments from ldmatrix:
 * kernels/cuda/tensor_core.cuh), fp32 accumulation; scores, P, dP and the softmax in fp32; the
 * P and dS fed to the tensor cores rounded to bf16, as the GEMM path's copies are. Every
 * reduction has a fixed order (k16 steps in increasing k, a lane's columns in increasing order
 * then a fixed xor pair within the quad that holds a row), no atomics; the bits differ from the
 * GEMM path's (another summation order), so the choice is an engine switch.
 *
 * Three kernels, each a block of four warps over a 64-row tile; a warp owns 16 rows:
 *   forward, block (query tile, h, n): S = a q k^T for the warp's 16 rows and all Lp = 64 NJ
 *     keys in registers (NJ * 8 n8 accumulator tiles), each row's softmax there (the quad of
 *     lanes holding a row reduces with two shuffles), P stored fp32 straight from the fragments,
 *     then rounded to bf16 as the A fragments of y_h = P v (an m16n8 accumulator pair is an
 *     m16k16 A fragment), so neither S nor P passes through shared memory;
 *   backward rows, block (query tile, n) of one head: dP = dy_h v^T the same way, dS = P (dP -
 *     sum_j P dP) in registers (P read from the forward's fp32), dq = a dS k from the registers,
 *     and dS and P rounded to bf16 into the workspace for
 *   backward columns, block (key tile, n) of one head: dk = a dS^T q and dv = P^T dy_h, the
 *     A operands read transposed (ldmatrix .trans) from the workspace's tiles.
 * Every output element is written once, by one warp, in a fixed order. The operand that stays
 * (q or dy_h rows of the tile, all D channels) is copied once into shared memory; the streamed
 * ones (k, v tiles; the backward columns' four tiles) pass through a ring of AF_STAGES slots by
 * cp.async, the copy of stage s + AF_STAGES - 1 in flight while stage s computes.
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
 * (m+8, k+8); B: b[0], b[1] of the n0 tile, then of the n0 + 8 tile). An m16n8 accumulator
 * c[0..3] holds (row g, columns 2q, 2q+1), (row g + 8, the same), g = lane >> 2, q = lane & 3. */
#define AF_MAX_L 256
#define AF_MAX_D 256
#define AF_TILE 64 /* rows per block tile (16 per warp); keys and channels per streamed tile */
#define AF_THREADS 128
#define AF_STAGES 3
#define AF_LD(w) ((w) + 8)
#define AF_TILE_ELEMS (AF_TILE * AF_LD(AF_TILE)) /* one streamed 64 x 64 tile, padded */

/* Issue (no commit) the cp.async copies of a 64 x w bf16 tile (w a multiple of 8) from global
 * rows (row stride ld elements) into shared memory with row stride lds: 16 bytes a copy; rows
 * >= rows_ok and columns >= cols_ok (a multiple of 8) are zero-filled. */
__device__ __forceinline__ void af_issue(uint16_t *s, int lds, const uint16_t *g, int64_t ld, int w,
                                         int rows_ok, int cols_ok) {
    const int segs = w / 8;
    for (int seg = threadIdx.x; seg < AF_TILE * segs; seg += AF_THREADS) {
        const int r = seg / segs, c = (seg % segs) * 8;
        const int ok = r < rows_ok && c < cols_ok;
        sg_cp_async_16(s + r * lds + c, ok ? g + r * ld + c : g, ok);
    }
}

/* The ring: stage s's copies (issue(s)) land in slot s % AF_STAGES; one commit group a stage
 * (empty past the last, S stages), so waiting until AF_STAGES - 2 groups are pending at stage s
 * means stage s has landed. */
template <class Issue> __device__ __forceinline__ void af_pipe_start(int S, Issue issue) {
    for (int s = 0; s < AF_STAGES - 1; s++) {
        if (s < S) issue(s);
        sg_cp_async_commit();
    }
}
/* Before computing stage s: wait for it, make it visible to the block, and issue stage
 * s + AF_STAGES - 1 into the slot stage s - 1 used (every thread is past it after the barrier). */
template <class Issue> __device__ __forceinline__ void af_pipe_next(int s, int S, Issue issue) {
    sg_cp_async_wait(AF_STAGES - 2);
    __syncthreads();
    if (s + AF_STAGES - 1 < S) issue(s + AF_STAGES - 1);
    sg_cp_async_commit();
}
/* After the last stage: every copy landed and every thread is done with the ring. */
__device__ __forceinline__ void af_pipe_end(void) {
    sg_cp_async_wait(0);
    __syncthreads();
}
__device__ __forceinline__ uint16_t *af_slot(uint16_t *ring, int s, int tiles) {
    return ring + (s % AF_STAGES) * tiles * AF_TILE_ELEMS;
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
/* acc (a warp's 16 x 64 tile: 8 n8 tiles) += A[m0.., ka..ka+ksteps*16) * B[kb.., n 0..63], B a
 * streamed 64-wide tile */
__device__ __forceinline__ void af_mma(float (*acc)[4], const uint16_t *sa, int lda, int m0, int ka,
                                       bool akm, const uint16_t *sb, int kb, bool bkn, int ksteps,
                                       int lane) {
    for (int ks = 0; ks < ksteps; ks++) {
        uint32_t a[4];
        af_lda(a, sa, lda, m0, ka + 16 * ks, akm, lane);
#pragma unroll
        for (int nj = 0; nj < 4; nj++) {
            uint32_t b[4];
            af_ldb(b, sb, AF_LD(AF_TILE), 16 * nj, kb + 16 * ks, bkn, lane);
            sg_mma_bf16_16816(acc[2 * nj], a, b, acc[2 * nj]);
            sg_mma_bf16_16816(acc[2 * nj + 1], a, b + 2, acc[2 * nj + 1]);
        }
    }
}
/* the same with the four k16 steps' A fragments in registers, B stored [k][n] */
__device__ __forceinline__ void af_mma_regs(float (*acc)[4], const uint32_t (*a)[4],
                                            const uint16_t *sb, int lane) {
#pragma unroll
    for (int ks = 0; ks < 4; ks++)
#pragma unroll
        for (int nj = 0; nj < 4; nj++) {
            uint32_t b[4];
            af_ldb(b, sb, AF_LD(AF_TILE), 16 * nj, 16 * ks, true, lane);
            sg_mma_bf16_16816(acc[2 * nj], a[ks], b, acc[2 * nj]);
            sg_mma_bf16_16816(acc[2 * nj + 1], a[ks], b + 2, acc[2 * nj + 1]);
        }
}
template <int T> __device__ __forceinline__ void af_zero(float (*acc)[4]) {
#pragma unroll
    for (int t = 0; t < T; t++) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.0f;
}
__device__ __forceinline__ uint32_t af_pack(float lo, float hi) {
    return (uint32_t)dev_f32_to_bf16(lo) | (uint32_t)dev_f32_to_bf16(hi) << 16;
}
/* The warp's 16 x Lp accumulator rows, rounded to bf16, as the A fragments of the k16 steps over
 * Lp: an n8 tile pair (2kk, 2kk + 1) is the m16k16 fragment kk. */
template <int NJ>
__device__ __forceinline__ void af_to_frags(uint32_t (*pa)[4], const float (*acc)[4]) {
#pragma unroll
    for (int kk = 0; kk < NJ * 4; kk++) {
        pa[kk][0] = af_pack(acc[2 * kk][0], acc[2 * kk][1]);
        pa[kk][1] = af_pack(acc[2 * kk][2], acc[2 * kk][3]);
        pa[kk][2] = af_pack(acc[2 * kk + 1][0], acc[2 * kk + 1][1]);
        pa[kk][3] = af_pack(acc[2 * kk + 1][2], acc[2 * kk + 1][3]);
    }
}
/* The warp's 16 x 64 tile, scale * acc (+ old with accum, an fp32 add), rounded to bf16 into
 * global rows i0 + (g, g + 8) < rows_ok, columns d0 + 8t + 2q (+1) < cols_ok (row stride ld). */
__device__ __forceinline__ void af_st_out(uint16_t *out, int64_t ld, int i0, int rows_ok, int d0,
                                          int cols_ok, const float (*acc)[4], float scale,
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
            *(uint32_t *)o = af_pack(v0, v1);
        }
}
/* a row's reduction over the quad of lanes that holds it (lanes 4g .. 4g + 3): every lane ends
 * with (v0 op v1) op (v2 op v3) */
__device__ __forceinline__ float af_quad_sum(float v) {
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    return v + __shfl_xor_sync(0xffffffffu, v, 2);
}
__device__ __forceinline__ float af_quad_max(float v) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
    return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

/* Dynamic shared memory of the forward and the backward rows: the resident 64 x D tile, then
 * the ring of one streamed tile a slot. */
static int af_rows_smem(int D) {
    return (AF_TILE * AF_LD(D) + AF_STAGES * AF_TILE_ELEMS) * 2;
}
/* the backward columns': a ring of four streamed tiles a slot (dS, P, q, dy_h) */
#define AF_COLS_TILES 4
static int af_cols_smem(void) {
    return AF_STAGES * AF_COLS_TILES * AF_TILE_ELEMS * 2;
}

/* acc[NJ*8] = (64 rows of A, resident [64][AF_LD(D)]) x (Lp rows of B)^T over D channels: stage
 * (jt, dc) streams B's key tile jt, channels dc*64..; stage 0 also copies A (first: issue_a). */
template <int NJ, class IssueA>
__device__ __forceinline__ void af_rows_scores(float (*acc)[4], uint16_t *sA, uint16_t *ring,
                                               const uint16_t *B, int64_t ldb, int L, int D,
                                               IssueA issue_a, int lane) {
    const int ND = (D + AF_TILE - 1) / AF_TILE, S = NJ * ND, wr = 16 * (threadIdx.x >> 5);
    auto issue = [&](int s) {
        const int jt = s / ND, dc = s % ND;
        if (s == 0) issue_a();
        af_issue(af_slot(ring, s, 1), AF_LD(AF_TILE),
                 B + (int64_t)jt * AF_TILE * ldb + dc * AF_TILE, ldb, AF_TILE, L - jt * AF_TILE,
                 D - dc * AF_TILE);
    };
    af_zero<NJ * 8>(acc);
    af_pipe_start(S, issue);
#pragma unroll
    for (int jt = 0; jt < NJ; jt++)
        for (int dc = 0; dc < ND; dc++) {
            const int s = jt * ND + dc, rem = D - dc * AF_TILE;
            af_pipe_next(s, S, issue);
            af_mma(acc + 8 * jt, sA, AF_LD(D), wr, dc * AF_TILE, false, af_slot(ring, s, 1), 0,
                   false, rem < AF_TILE ? rem / 16 : 4, lane);
        }
    af_pipe_end();
}

/* out rows (the warp's 16 of the tile at row0) = scale * (A fragments over the Lp keys) x B, B
 * the L x D rows at B (row stride ldb) streamed as stage (dc, jt): key tile jt, channels dc. */
template <int NJ>
__device__ __forceinline__ void
af_rows_product(uint16_t *out, int64_t ldo, int row0, const uint32_t (*pa)[4], uint16_t *ring,
                const uint16_t *B, int64_t ldb, int L, int D, float scale, int accum, int lane) {
    const int ND = (D + AF_TILE - 1) / AF_TILE, S = NJ * ND, wr = 16 * (threadIdx.x >> 5);
    auto issue = [&](int s) {
        const int dc = s / NJ, jt = s % NJ;
        af_issue(af_slot(ring, s, 1), AF_LD(AF_TILE),
                 B + (int64_t)jt * AF_TILE * ldb + dc * AF_TILE, ldb, AF_TILE, L - jt * AF_TILE,
                 D - dc * AF_TILE);
    };
    af_pipe_start(S, issue);
    for (int dc = 0; dc < ND; dc++) {
        float o[8][4];
        af_zero<8>(o);
#pragma unroll
        for (int jt = 0; jt < NJ; jt++) {
            const int s = dc * NJ + jt;
            af_pipe_next(s, S, issue);
            af_mma_regs(o, pa + 4 * jt, af_slot(ring, s, 1), lane);
        }
        af_st_out(out, ldo, row0 + wr, L, dc * AF_TILE, D, o, scale, accum, lane);
    }
    af_pipe_end();
}

/* Forward. blockIdx.x: query tile (64 rows), y: head h, z: sample n.
 *   1. S = a q k^T, the warp's 16 rows x Lp keys in registers (q's tile resident);
 *   2. each row's softmax (the GEMM path's formula: exp(s - max) * (1 / sum)) over its L keys,
 *      P stored fp32 (saved for the backward), then rounded to bf16 A fragments (0 past L);
 *   3. y_h = P v (v streamed), stored bf16. */
template <int NJ>
__global__ void __launch_bounds__(AF_THREADS, 2)
    attn_fused_fwd_kernel(uint16_t *y, float *P, const uint16_t *qkv, int L, int C, int heads,
                          float a) {
    SG_PDL_ENTER();
    SG_DYNAMIC_SMEM(uint16_t, smem);
    const int D = C / heads, h = blockIdx.y, n = blockIdx.z, i0 = blockIdx.x * AF_TILE;
    const int lane = threadIdx.x & 31, wr = 16 * (threadIdx.x >> 5), g = lane >> 2, q = lane & 3;
    const int64_t ld = 3LL * C;
    const uint16_t *base = qkv + (int64_t)n * L * ld + (int64_t)h * D;
    uint16_t *sQ = smem, *ring = smem + AF_TILE * AF_LD(D);
    float acc[NJ * 8][4];
    /* 1. scores */
    af_rows_scores<NJ>(
        acc, sQ, ring, base + C, ld, L, D,
        [&] { af_issue(sQ, AF_LD(D), base + (int64_t)i0 * ld, ld, D, L - i0, D); }, lane);
    /* 2. softmax of the rows wr + g + 8 hf: lane (g, q) holds their columns 8t + 2q + e */
#pragma unroll
    for (int hf = 0; hf < 2; hf++) {
        float mx = -INFINITY, s = 0.0f;
#pragma unroll
        for (int t = 0; t < NJ * 8; t++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                float &v = acc[t][2 * hf + e];
                v *= a;
                if (8 * t + 2 * q + e < L) mx = fmaxf(mx, v);
            }
        mx = af_quad_max(mx);
#pragma unroll
        for (int t = 0; t < NJ * 8; t++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                float &v = acc[t][2 * hf + e];
                v = 8 * t + 2 * q + e < L ? expf(v - mx) : 0.0f;
                s += v;
            }
        s = af_quad_sum(s);
        const float inv = (float)(1.0 / (double)s);
        const int i = i0 + wr + g + 8 * hf;
        float *grow = P + (((int64_t)n * heads + (i < L ? h : 0)) * L + (i < L ? i : 0)) * L;
#pragma unroll
        for (int t = 0; t < NJ * 8; t++) {
            const int j = 8 * t + 2 * q;
            float &v0 = acc[t][2 * hf], &v1 = acc[t][2 * hf + 1];
            v0 *= inv, v1 *= inv;
            if (i >= L || j >= L) continue;
            if (j + 1 < L && !(L & 1)) /* even L: the pair is 8-byte aligned */
                *(float2 *)(grow + j) = make_float2(v0, v1);
            else if (j + 1 < L)
                grow[j] = v0, grow[j + 1] = v1;
            else
                grow[j] = v0;
        }
    }
    if (!y) return; /* P alone (attention_p): the block's copies are all waited for */
    uint32_t pa[NJ * 4][4];
    af_to_frags<NJ>(pa, acc);
    /* 3. y_h = P v */
    af_rows_product<NJ>(y + (int64_t)n * L * C + (int64_t)h * D, C, i0, pa, ring, base + 2 * C, ld,
                        L, D, 1.0f, 0, lane);
}

/* Backward rows, head h. blockIdx.x: query tile (64 rows), y: sample n.
 *   1. dP = dy_h v^T, the warp's 16 rows x Lp keys in registers (dy_h's tile resident);
 *   2. dS = P (dP - sum_j P dP), P read from the forward's fp32 (0 past L); dS and P rounded to
 *      bf16 into the workspace's [n][i][j] (row stride L8 = L rounded up to 8; zeros in
 *      L <= j < L8), and dS as A fragments;
 *   3. dq = a dS k (k streamed). */
template <int NJ>
__global__ void __launch_bounds__(AF_THREADS, 2)
    attn_fused_bwd_rows_kernel(uint16_t *dqkv, uint16_t *dSw, uint16_t *Pw, const uint16_t *dy,
                               const uint16_t *qkv, const float *P, int L, int C, int heads, int h,
                               float a, int accum) {
    SG_PDL_ENTER();
    SG_DYNAMIC_SMEM(uint16_t, smem);
    const int D = C / heads, n = blockIdx.y, i0 = blockIdx.x * AF_TILE, L8 = (L + 7) & ~7;
    const int lane = threadIdx.x & 31, wr = 16 * (threadIdx.x >> 5), g = lane >> 2, q = lane & 3;
    const int64_t ld = 3LL * C;
    const uint16_t *base = qkv + (int64_t)n * L * ld + (int64_t)h * D;
    const uint16_t *dyh = dy + (int64_t)n * L * C + (int64_t)h * D;
    uint16_t *sDY = smem, *ring = smem + AF_TILE * AF_LD(D);
    float acc[NJ * 8][4];
    /* 1. dP */
    af_rows_scores<NJ>(
        acc, sDY, ring, base + 2 * C, ld, L, D,
        [&] { af_issue(sDY, AF_LD(D), dyh + (int64_t)i0 * C, C, D, L - i0, D); }, lane);
    /* 2. dS of the rows wr + g + 8 hf, packed into A fragments as each n8 tile pair is done */
    const float *prow[2];
    float dot[2];
    int64_t w[2];
#pragma unroll
    for (int hf = 0; hf < 2; hf++) {
        const int i = i0 + wr + g + 8 * hf, ok = i < L;
        prow[hf] = ok ? P + (((int64_t)n * heads + h) * L + i) * L : NULL;
        w[hf] = ok ? ((int64_t)n * L + i) * L8 : -1;
        float d = 0.0f;
#pragma unroll
        for (int t = 0; t < NJ * 8; t++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int j = 8 * t + 2 * q + e;
                if (ok && j < L) d += prow[hf][j] * acc[t][2 * hf + e];
            }
        dot[hf] = af_quad_sum(d);
    }
    uint32_t pa[NJ * 4][4];
#pragma unroll
    for (int t = 0; t < NJ * 8; t++) {
        const int j = 8 * t + 2 * q;
#pragma unroll
        for (int hf = 0; hf < 2; hf++) {
            float p[2] = {0.0f, 0.0f};
            if (prow[hf] && j + 1 < L && !(L & 1)) { /* even L: the pair is 8-byte aligned */
                const float2 pp = *(const float2 *)(prow[hf] + j);
                p[0] = pp.x, p[1] = pp.y;
            } else if (prow[hf]) {
                p[0] = j < L ? prow[hf][j] : 0.0f;
                p[1] = j + 1 < L ? prow[hf][j + 1] : 0.0f;
            }
#pragma unroll
            for (int e = 0; e < 2; e++) {
                float &v = acc[t][2 * hf + e];
                v = p[e] * (v - dot[hf]);
            }
            const uint32_t ds = af_pack(acc[t][2 * hf], acc[t][2 * hf + 1]);
            if (w[hf] >= 0 && j < L8) {
                *(uint32_t *)(dSw + w[hf] + j) = ds;
                *(uint32_t *)(Pw + w[hf] + j) = af_pack(p[0], p[1]);
            }
            pa[t / 2][2 * (t & 1) + hf] = ds;
        }
    }
    /* 3. dq = a dS k */
    af_rows_product<NJ>(dqkv + (int64_t)n * L * ld + (int64_t)h * D, ld, i0, pa, ring, base + C, ld,
                        L, D, a, accum, lane);
}

/* Backward columns, head h. blockIdx.x: key tile (64 keys), y: sample n; warp w owns keys
 * j0 + 16w ..: dk = a dS[:, j]^T q and dv = P[:, j]^T dy_h, over the Lp queries in tiles of 64.
 * Stage (dc, it) streams the workspace's dS and P tiles (queries it, the block's keys) and the
 * q and dy_h tiles (queries it, channels dc). */
__global__ void __launch_bounds__(AF_THREADS, 2)
    attn_fused_bwd_cols_kernel(uint16_t *dqkv, const uint16_t *dSw, const uint16_t *Pw,
                               const uint16_t *dy, const uint16_t *qkv, int L, int C, int heads,
                               int h, float a, int accum) {
    SG_PDL_ENTER();
    SG_DYNAMIC_SMEM(uint16_t, ring);
    const int D = C / heads, n = blockIdx.y, j0 = blockIdx.x * AF_TILE, L8 = (L + 7) & ~7;
    const int lane = threadIdx.x & 31, wr = 16 * (threadIdx.x >> 5);
    const int NI = (L + AF_TILE - 1) / AF_TILE, ND = (D + AF_TILE - 1) / AF_TILE, S = NI * ND;
    const int64_t ld = 3LL * C;
    const uint16_t *base = qkv + (int64_t)n * L * ld + (int64_t)h * D;
    const uint16_t *dyh = dy + (int64_t)n * L * C + (int64_t)h * D;
    const uint16_t *wS = dSw + (int64_t)n * L * L8 + j0, *wP = Pw + (int64_t)n * L * L8 + j0;
    uint16_t *dbase = dqkv + (int64_t)n * L * ld + (int64_t)h * D;
    auto issue = [&](int s) {
        const int dc = s / NI, i = (s % NI) * AF_TILE;
        uint16_t *t = af_slot(ring, s, AF_COLS_TILES);
        af_issue(t, AF_LD(AF_TILE), wS + (int64_t)i * L8, L8, AF_TILE, L - i, L8 - j0);
        af_issue(t + AF_TILE_ELEMS, AF_LD(AF_TILE), wP + (int64_t)i * L8, L8, AF_TILE, L - i,
                 L8 - j0);
        af_issue(t + 2 * AF_TILE_ELEMS, AF_LD(AF_TILE), base + (int64_t)i * ld + dc * AF_TILE, ld,
                 AF_TILE, L - i, D - dc * AF_TILE);
        af_issue(t + 3 * AF_TILE_ELEMS, AF_LD(AF_TILE), dyh + (int64_t)i * C + dc * AF_TILE, C,
                 AF_TILE, L - i, D - dc * AF_TILE);
    };
    af_pipe_start(S, issue);
    for (int dc = 0; dc < ND; dc++) {
        float ok[8][4], ov[8][4];
        af_zero<8>(ok);
        af_zero<8>(ov);
        for (int it = 0; it < NI; it++) {
            const int s = dc * NI + it;
            af_pipe_next(s, S, issue);
            const uint16_t *t = af_slot(ring, s, AF_COLS_TILES);
            af_mma(ok, t, AF_LD(AF_TILE), wr, 0, true, t + 2 * AF_TILE_ELEMS, 0, true, 4, lane);
            af_mma(ov, t + AF_TILE_ELEMS, AF_LD(AF_TILE), wr, 0, true, t + 3 * AF_TILE_ELEMS, 0,
                   true, 4, lane);
        }
        af_st_out(dbase + C, ld, j0 + wr, L, dc * AF_TILE, D, ok, a, accum, lane);
        af_st_out(dbase + 2 * C, ld, j0 + wr, L, dc * AF_TILE, D, ov, 1.0f, accum, lane);
    }
    af_pipe_end();
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
    /* P alone takes none (attention_p's workspace rule: 0) */
    SG_WS_CHECK(y ? sg_ws_attention_fwd(N, L, C, heads, dt) : 0, ws_bytes, fn);
    const int D = C / heads, ld = 3 * C;
    const float a = (float)(1.0 / sqrt((double)D));
    const int64_t sqkv = (int64_t)L * ld, sP = (int64_t)heads * L * L, sY = (int64_t)L * C;
    /* y NULL: P alone (attention_p, the backward pass's recompute: the same GEMM and softmax) */
    uint16_t *Pb = dt == DT_BF16 && y ? (uint16_t *)ws : NULL;
    const int64_t rows = (int64_t)N * L;
    for (int h = 0; h < heads; h++) {
        const void *q = att_off(qkv, (int64_t)h * D, dt);
        const void *k = att_off(qkv, (int64_t)C + h * D, dt);
        const void *v = att_off(qkv, (int64_t)2 * C + h * D, dt);
        float *Ph = P + (int64_t)h * L * L;
        /* S^T (L x L) = a op_T(k^T) q^T, into P */
        if (att_gemm(blas, st, CUBLAS_OP_T, CUBLAS_OP_N, L, L, D, a, k, dt, ld, sqkv, q, dt, ld,
                     sqkv, 0.0f, Ph, DT_F32, L, sP, N))
            return SG_ERR;
        SG_LAUNCH(softmax_fwd_kernel, (unsigned)((rows + SM_ROWS - 1) / SM_ROWS), SG_THREADS, 0, st,
                  P, Pb, rows, L, heads, h);
        SG_LAUNCH_CHECK("softmax_fwd_kernel");
        if (!y) continue;
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
    const int64_t sW = (int64_t)L * L, rows = (int64_t)N * L; /* sW: one [L][L] matrix a sample */
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
        SG_LAUNCH(softmax_bwd_kernel, (unsigned)((rows + SM_ROWS - 1) / SM_ROWS), SG_THREADS, 0, st,
                  dP, dSb, Pb, P, rows, L, heads, h);
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
    if (dt == DT_F32) return cu_attention_f32_ok(L, C, heads);
    if (dt != DT_BF16 || heads <= 0 || C % heads || L <= 0 || L > AF_MAX_L) return 0;
    const int D = C / heads;
    return D % 16 == 0 && D <= AF_MAX_D;
}

/* the kernels' instance for Lp = 64 NJ keys (NJ = 1..4: L <= AF_MAX_L) */
template <class F> static F *af_pick(int L, F *k1, F *k2, F *k3, F *k4) {
    const int nj = (L + AF_TILE - 1) / AF_TILE;
    return nj == 1 ? k1 : nj == 2 ? k2 : nj == 3 ? k3 : k4;
}

int cuda_attention_fused_fwd(cudaStream_t st, sg_blas *blas, void *y, float *P, const void *qkv,
                             int N, int L, int C, int heads, int dt, void *ws, int64_t ws_bytes) {
    if (!cuda_attention_fused_ok(L, C, heads, dt))
        return cuda_attention_fwd(st, blas, y, P, qkv, N, L, C, heads, dt, ws, ws_bytes);
    if (dt == DT_F32)
        return cu_attention_f32_fwd(st, (float *)y, P, (const float *)qkv, N, L, C, heads);
    const char *fn = "cuda_attention_fused_fwd";
    SG_ARG_CHECK(N > 0 && N <= 65535 && heads <= 65535, "%s: bad shape", fn);
    const int NJ = (L + AF_TILE - 1) / AF_TILE, smem = af_rows_smem(C / heads);
    auto *k = af_pick(L, attn_fused_fwd_kernel<1>, attn_fused_fwd_kernel<2>,
                      attn_fused_fwd_kernel<3>, attn_fused_fwd_kernel<4>);
    if (cuda_smem_attr(k, smem, fn)) return SG_ERR;
    const float a = (float)(1.0 / sqrt((double)(C / heads)));
    SG_LAUNCH_NAMED("attn_fused_fwd_kernel", k, dim3((unsigned)NJ, (unsigned)heads, (unsigned)N),
                    AF_THREADS, (size_t)smem, st, (uint16_t *)y, P, (const uint16_t *)qkv, L, C,
                    heads, a);
    SG_LAUNCH_CHECK("attn_fused_fwd_kernel");
    return SG_OK;
}

int cuda_attention_fused_bwd(cudaStream_t st, sg_blas *blas, void *dqkv, const void *dy,
                             const void *qkv, const float *P, int N, int L, int C, int heads,
                             int dt, int accum, void *ws, int64_t ws_bytes) {
    if (!cuda_attention_fused_ok(L, C, heads, dt))
        return cuda_attention_bwd(st, blas, dqkv, dy, qkv, P, N, L, C, heads, dt, accum, ws,
                                  ws_bytes);
    if (dt == DT_F32)
        return cu_attention_f32_bwd(st, (float *)dqkv, (const float *)dy, (const float *)qkv, P, N,
                                    L, C, heads, accum, ws, ws_bytes);
    const char *fn = "cuda_attention_fused_bwd";
    SG_ARG_CHECK(N > 0 && N <= 65535, "%s: bad shape", fn);
    SG_WS_CHECK(sg_ws_attention_bwd(N, L, C, heads, dt), ws_bytes, fn);
    const int NJ = (L + AF_TILE - 1) / AF_TILE, rows_smem = af_rows_smem(C / heads);
    const int cols_smem = af_cols_smem();
    auto *rows = af_pick(L, attn_fused_bwd_rows_kernel<1>, attn_fused_bwd_rows_kernel<2>,
                         attn_fused_bwd_rows_kernel<3>, attn_fused_bwd_rows_kernel<4>);
    if (cuda_smem_attr(rows, rows_smem, fn) ||
        cuda_smem_attr(attn_fused_bwd_cols_kernel, cols_smem, fn))
        return SG_ERR;
    const float a = (float)(1.0 / sqrt((double)(C / heads)));
    /* one head's dS and P in bf16, [N][L][L8] each (sg_ws_attention_bwd's fused share) */
    uint16_t *dSw = (uint16_t *)ws;
    uint16_t *Pw = (uint16_t *)((char *)ws + sg_ws_align((int64_t)N * L * ((L + 7) & ~7) * 2));
    const dim3 grid((unsigned)NJ, (unsigned)N);
    for (int h = 0; h < heads; h++) {
        SG_LAUNCH_NAMED("attn_fused_bwd_rows_kernel", rows, grid, AF_THREADS, (size_t)rows_smem, st,
                        (uint16_t *)dqkv, dSw, Pw, (const uint16_t *)dy, (const uint16_t *)qkv, P,
                        L, C, heads, h, a, accum);
        SG_LAUNCH_CHECK("attn_fused_bwd_rows_kernel");
        SG_LAUNCH(attn_fused_bwd_cols_kernel, grid, AF_THREADS, (size_t)cols_smem, st,
                  (uint16_t *)dqkv, (const uint16_t *)dSw, (const uint16_t *)Pw,
                  (const uint16_t *)dy, (const uint16_t *)qkv, L, C, heads, h, a, accum);
        SG_LAUNCH_CHECK("attn_fused_bwd_cols_kernel");
    }
    return SG_OK;
}
