/* norm.cu — group normalisation, forward and backward: group_norm alone, and the norm_act
 * kernels (GroupNorm fused with the time-embedding add before it and the activation and
 * dropout after it: the second half of this file's kernels; their math is kernels/cpu/norm.c's).
 *
 * group_norm:
 *
 * Shapes: x[N,HW,C] as a channel concatenation (sg_cat, C = c0 + c1), G groups of Cg = C/G
 * consecutive channels, gamma[C], beta[C] fp32, mean[N,G], rstd[N,G] fp32, y[N,HW,C] (one
 * buffer), dx like x (a concatenation).
 *
 * Forward, per (n, g) over the cnt = HW*Cg values of the group:
 *   mean = sum(x) / cnt, var = sum((x - mean)^2) / cnt (two passes, biased as PyTorch),
 *   rstd = 1 / sqrt(var + eps), y = (x - mean) rstd gamma[c] + beta[c].
 * Backward, with xhat = (x - mean) rstd and dxhat = dy gamma[c]:
 *   dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat))       (per group)
 *   dgamma[c] = sum over n, hw of dy xhat,  dbeta[c] = sum over n, hw of dy.
 *
 * One block per (n, g) does the whole group: it reads the group's values up to three times
 * (sum, squared deviations, output), which stay in L1/L2; statistics reduce in a fixed tree
 * (dev_block_sum), so there are no atomics and no workspace in the forward. The backward block
 * also leaves its per-channel sums of dy xhat and dy in the workspace ([N][C] each, each
 * element written by exactly one block); a second kernel sums them over n in order.
 * Arithmetic is fp32 (the CPU reference uses double: differences are rounding-level).
 */
#include "common/philox.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/norm_apply.cuh"
#include "kernels/cuda/tensor_core.cuh"

/* ================================ kernels ================================ */

/* Thread layout inside a group block: TC = min(Cg, 256) channel threads times TR = 256 / TC
 * row threads; thread (tr, tc) = (tid / TC, tid % TC) visits the group's channels
 * cc = tc, tc + TC, ... and rows hw = tr, tr + TR, ...; threads with tid >= TR*TC idle. */
#define GN_LAYOUT(Cg)                                                                              \
    const int TC = (Cg) < SG_THREADS ? (Cg) : SG_THREADS, TR = SG_THREADS / TC;                    \
    const int tc = threadIdx.x % TC, tr = threadIdx.x / TC;                                        \
    const bool active = tr < TR

/* blockIdx.x: n*G + g; threads as GN_LAYOUT over the group's (hw, channel) values. */
__global__ void gn_fwd_kernel(void *y, float *mean, float *rstd, sg_cat x, const float *gamma,
                              const float *beta, int HW, int C, int G, float eps, int dt) {
    SG_PDL_ENTER();
    __shared__ float sh[SG_THREADS];
    const int ng = blockIdx.x, n = ng / G, g = ng % G, Cg = C / G, cbase = g * Cg;
    GN_LAYOUT(Cg);
    const int64_t row0 = (int64_t)n * HW;
    const float cnt = (float)HW * (float)Cg;

    float s = 0.0f;
    if (active)
        for (int cc = tc; cc < Cg; cc += TC)
            for (int hw = tr; hw < HW; hw += TR) s += dev_cat_ld(x, row0 + hw, cbase + cc, dt);
    const float mu = dev_block_sum(s, sh) / cnt;

    float ss = 0.0f;
    if (active)
        for (int cc = tc; cc < Cg; cc += TC)
            for (int hw = tr; hw < HW; hw += TR) {
                float d = dev_cat_ld(x, row0 + hw, cbase + cc, dt) - mu;
                ss += d * d;
            }
    const float var = dev_block_sum(ss, sh) / cnt;
    const float rs = 1.0f / sqrtf(var + eps);
    if (threadIdx.x == 0) {
        mean[ng] = mu;
        rstd[ng] = rs;
    }

    if (active)
        for (int cc = tc; cc < Cg; cc += TC) {
            const int c = cbase + cc;
            const float ga = gamma[c] * rs, be = beta[c];
            for (int hw = tr; hw < HW; hw += TR) {
                float v = dev_cat_ld(x, row0 + hw, c, dt);
                dev_st(y, (row0 + hw) * C + c, (v - mu) * ga + be, dt);
            }
        }
}

/* blockIdx.x: n*G + g; threads as GN_LAYOUT. Pass 1 runs over channel blocks of TC (uniform
 * across the block): each thread sums dy and dy xhat of its channel over its rows, the TR
 * partials of a channel are added in order tr = 0.. by thread tc, and written to
 * ws_db[n][c], ws_dg[n][c]; the group sums of dxhat and dxhat xhat go through the tree.
 * Pass 2 writes dx. */
__global__ void gn_bwd_kernel(sg_cat dx, float *ws_dg, float *ws_db, const void *dy, sg_cat x,
                              const float *mean, const float *rstd, const float *gamma, int HW,
                              int C, int G, int dt, int accum) {
    SG_PDL_ENTER();
    __shared__ float sh[SG_THREADS], sh2[SG_THREADS];
    const int ng = blockIdx.x, n = ng / G, g = ng % G, Cg = C / G, cbase = g * Cg;
    GN_LAYOUT(Cg);
    const int tid = threadIdx.x;
    const int64_t row0 = (int64_t)n * HW;
    const float cnt = (float)HW * (float)Cg;
    const float mu = mean[ng], rs = rstd[ng];

    float A = 0.0f, B = 0.0f; /* sums of dxhat and dxhat * xhat */
    for (int cb0 = 0; cb0 < Cg; cb0 += TC) {
        const int cc = cb0 + tc;
        float sdy = 0.0f, sdyx = 0.0f;
        if (active && cc < Cg) {
            const int c = cbase + cc;
            const float ga = gamma[c];
            for (int hw = tr; hw < HW; hw += TR) {
                const int64_t row = row0 + hw;
                const float xhat = (dev_cat_ld(x, row, c, dt) - mu) * rs;
                const float d = dev_ld(dy, row * C + c, dt);
                sdy += d;
                sdyx += d * xhat;
                A += d * ga;
                B += d * ga * xhat;
            }
        }
        sh[tid] = sdy;
        sh2[tid] = sdyx;
        __syncthreads();
        if (tid < TC && cb0 + tid < Cg) {
            float a = 0.0f, b = 0.0f;
            for (int r = 0; r < TR; r++) {
                a += sh[r * TC + tid];
                b += sh2[r * TC + tid];
            }
            const int64_t o = (int64_t)n * C + cbase + cb0 + tid;
            ws_db[o] = a;
            ws_dg[o] = b;
        }
        __syncthreads();
    }
    const float m1 = dev_block_sum(A, sh) / cnt;
    const float m2 = dev_block_sum(B, sh) / cnt;

    if (active)
        for (int cc = tc; cc < Cg; cc += TC) {
            const int c = cbase + cc;
            const float ga = gamma[c];
            for (int hw = tr; hw < HW; hw += TR) {
                const int64_t row = row0 + hw;
                const float xhat = (dev_cat_ld(x, row, c, dt) - mu) * rs;
                const float dxhat = dev_ld(dy, row * C + c, dt) * ga;
                dev_cat_st_acc(dx, row, c, rs * (dxhat - m1 - xhat * m2), dt, accum);
            }
        }
}

/* Samples staged per round by dev_col_sums */
#define NA_FIN_ROWS 64

/* The column sums of a table of N rows, column c = 32 blk + lane: ld(n, c) gives (row n,
 * column c) as a float2 (columns c >= C read nothing). The block's warps stage NA_FIN_ROWS rows
 * at a time in shared memory, coalesced, and the first warp adds them in order n = 0, 1, ...,
 * one column a lane: the order of one thread's loop, its loads spread over the block. Every
 * thread of the block calls it; the first warp's lanes return the sums. */
template <typename LD>
__device__ __forceinline__ float2 dev_col_sums(const LD &ld, int N, int C, int blk) {
    __shared__ float2 rows[NA_FIN_ROWS][32];
    const int lane = threadIdx.x % 32, w = threadIdx.x / 32, c = blk * 32 + lane;
    float2 s = make_float2(0.0f, 0.0f);
    for (int n0 = 0; n0 < N; n0 += NA_FIN_ROWS) {
        const int nr = N - n0 < NA_FIN_ROWS ? N - n0 : NA_FIN_ROWS;
        for (int r = w; r < nr; r += SG_THREADS / 32)
            rows[r][lane] = c < C ? ld(n0 + r, c) : make_float2(0.0f, 0.0f);
        __syncthreads();
        if (w == 0)
            for (int r = 0; r < nr; r++) {
                s.x += rows[r][lane].x;
                s.y += rows[r][lane].y;
            }
        __syncthreads();
    }
    return s;
}

/* block b < ceil(C / 32): dgamma[c] (+)= sum over n (in order) of ws_dg[n][c], dbeta likewise,
 * for its 32 channels (dev_col_sums) */
__global__ void gn_param_kernel(float *dgamma, float *dbeta, const float *ws_dg, const float *ws_db,
                                int N, int C, int accum) {
    SG_PDL_ENTER();
    const float2 q = dev_col_sums(
        [&](int n, int c) {
            return make_float2(ws_dg[(int64_t)n * C + c], ws_db[(int64_t)n * C + c]);
        },
        N, C, (int)blockIdx.x);
    const int c = (int)blockIdx.x * 32 + (int)threadIdx.x;
    if (threadIdx.x < 32 && c < C) {
        dgamma[c] = accum ? dgamma[c] + q.x : q.x;
        dbeta[c] = accum ? dbeta[c] + q.y : q.y;
    }
}

/* ---- norm_act ----
 *
 * Passes. Forward: (1) the statistics: norm_partials_kernel reads x once and leaves the
 * canonical partials (below), norm_stats_final_kernel merges them into mean and rstd (one
 * launch, norm_stats_kernel, where the normalisation computes the partials itself); (2)
 * norm_apply_kernel reads x (+ v) again and writes y. The recomputation is pass (2) alone.
 * Backward: (1) norm_bwd_partials_kernel reads x, v, dy once and leaves the backward partials:
 * per (sample, segment, channel) the sums of dz and dz xhat down the segment's rows in order
 * (gn_bwd_step, explicitly rounded: the epilogue of the data gradient that writes dy computes
 * the same bits where its tile holds whole segments, conv_tc.cu), and each sample's last block
 * merges the segments in order into the terms: per-(sample, channel) sums and the two
 * per-group means of the dx formula (norm_bwd_terms_kernel alone after such an epilogue); (2)
 * norm_bwd_apply_kernel reads x, v, dy again and writes dx (and per-chunk sums of dx for dv);
 * norm_bwd_finish_kernel sums dgamma, dbeta over the samples and dv over the chunks, in order.
 * Two passes over the activations each way; the small kernels touch O(N C) values.
 *
 * The statistics' partials. Each sample's HW rows are cut into segments of seg =
 * sg_ws_norm_seg(HW) rows (64; the whole sample when it has fewer), and each (sample n,
 * segment s, channel c) has ONE partial (mean, M2) of x over the segment's rows: Welford's
 * sequential update (gn_welford, norm_apply.cuh) over the rows in increasing order, in
 * explicitly rounded fp32 operations. That definition fixes every bit of the partials whoever
 * computes them: this file's norm_partials_kernel (any vector width: a vector is VEC
 * independent chains), or the epilogue of the convolution that writes x when its output tile
 * covers whole segments (conv_tc.cu: the convolution before a normalisation; graph/
 * backend_cuda_run.c pairs them, and tells the normalisation which channels' partials are there
 * already). The partials are of x alone: the time-embedding add shifts a channel's mean by
 * v[n, c] in the merge (its M2 does not change), so a convolution needs no v.
 * norm_stats_final_kernel then merges, per (sample, group): for each segment in order, the
 * group's channels (mean = average of the channel means + v, M2 = sum of M2 + R sum (m_c -
 * mean)^2, R the segment's rows), merged into the running total with Chan et al.'s rule (n = na
 * + nb, d = mb - ma, m = ma + d nb/n, M2 = M2a + M2b + d^2 na nb / n). No E[u^2] - E[u]^2
 * cancellation. Arithmetic is fp32 (the CPU reference uses double: rounding-level differences);
 * z = fmaf(u - mean, rstd gamma, beta) is written as one explicit fused multiply-add, so the
 * forward and the recomputation (the same kernel) agree bit for bit.
 *
 * Thread layout of the big elementwise kernels (apply, backward). Block (blockIdx.x,
 * blockIdx.y) = (chunk, sample n) covers rows [r0, r1) of sample n (sg_ws_norm_rows rows per
 * chunk) and every channel. A thread owns VEC consecutive channels (VEC = 16 bytes of the dtype
 * when the launcher can vectorise, else 1): TC = min(CV, SG_THREADS) threads span the CV = C /
 * VEC vectors of a row and TR = SG_THREADS / TC rows are visited at once; thread (tr, tc) =
 * (tid / TC, tid % TC) takes vector cv = cv0 + tc of rows r0 + tr, r0 + tr + TR, ..., one tile
 * of TC vectors (cv0 = 0, TC, ...) at a time; threads with tr >= TR idle. The backward's
 * per-thread partials are merged in order tr = 0, 1, ... through shared memory, one channel of
 * the tile per thread (thread t: channel t, t + SG_THREADS, ...), so every sum has one order
 * fixed by the shapes. */

#define NA_LAYOUT(VEC)                                                                             \
    const int n = blockIdx.y, chunk = blockIdx.x, cg = C / G;                                      \
    const int r0 = chunk * rows, r1 = r0 + rows < HW ? r0 + rows : HW, R = r1 - r0;                \
    const int CV = C / (VEC), TC = CV < SG_THREADS ? CV : SG_THREADS, TR = SG_THREADS / TC;        \
    const int tc = threadIdx.x % TC, tr = threadIdx.x / TC;                                        \
    const bool active = tr < TR;                                                                   \
    (void)cg, (void)R

/* Column c of a concatenation: its part's pointer at row 0 and that part's row stride, so that
 * element (row, c) is at p + row ld. A thread's channels are fixed down its rows, so the part is
 * chosen once, before the row loop, not per row (with VEC > 1 the launcher made every vector
 * lie in one part). */
template <typename T> struct na_col {
    T *p;
    int64_t ld;
    __device__ __forceinline__ T *at(int64_t row) const {
        return p + row * ld;
    }
};
template <typename T> __device__ __forceinline__ na_col<T> na_cat_col(const sg_cat &x, int c) {
    return c < x.c[0] ? na_col<T>{(T *)x.p[0] + c, x.c[0]}
                      : na_col<T>{(T *)x.p[1] + (c - x.c[0]), x.c[1]};
}

/* Chan et al.'s merge of (nb, mb, M2b) into (na, ma, M2a) */
__device__ __forceinline__ void na_merge(float &na, float &ma, float &M2a, float nb, float mb,
                                         float M2b) {
    const float nn = na + nb, d = mb - ma;
    ma += d * (nb / nn);
    M2a += M2b + d * d * (na * nb / nn);
    na = nn;
}

/* The forward partials kernels' parallelism. A segment's Welford chain is sequential and its
 * every step depends on the one before, so the chains are the only parallelism: N S C / VEC
 * threads, each waiting a memory latency per batch of rows. Two choices make the most of it
 * without touching a chain's order (so the bits are unchanged):
 * - rows loaded before they are folded into the chains: NA_BATCH (16), so a 64-row segment waits
 *   4 latencies, not 64;
 * - 4 channels a thread in both dtypes (NA_PART_DISPATCH: 8-byte bf16 vectors where the other
 *   passes move 16): twice the threads of 16-byte vectors in bf16. At batch 128, 8 x 8 x 256 has
 *   one segment per image, 32768 chains: 16 blocks of 256 threads at 8 channels a thread on a
 *   132-SM GPU, 32 at 4.
 * (The backward's chains only add: their operands, most of the work, are computed apart, every
 * element at once: norm_bwd_partials_kernel.) */
#define NA_BATCH 16
/* ... and the apply passes, rows TR apart: a thread loads NA_ROWS_APPLY (forward) or
 * NA_ROWS_BWD_APPLY (backward: x and dy) rows of its chunk (SG_WS_NORM_ELEMS values a block)
 * before it computes the first; the same arithmetic per element. The dropout's code is compiled
 * only into the instances that draw it (DROP): its Philox rounds hold registers the loads in
 * flight would otherwise get. No spills (nvcc 13, sm_90). Forward, 16-byte vectors: the chunk
 * staged in shared memory first (na_stage_chunk: 16 KiB of bf16 in flight a block, every copy
 * at once), then a row at a time from there, three blocks an SM (80 registers in bf16 with the
 * dropout; a thread's 3 or 4 rows loaded from global memory at once took 124 and two blocks);
 * unaligned (1 channel a thread), NA_ROWS_APPLY rows at once from global memory. Backward, 4
 * channels a thread (NA_PART_DISPATCH): with vectors, x and dy staged the same way (32 KiB of
 * bf16 a block), three blocks an SM (80 registers; loading 2 or 4 of a thread's 8 rows at once
 * from global memory took 123 and two blocks); unaligned, NA_ROWS_BWD_APPLY rows at once. The
 * per-chunk sums of dx for dv add a thread's rows in order, then the threads in order, so their
 * order follows the layout (not changed by the staging). */
#define NA_ROWS_APPLY(DROP) ((DROP) ? 3 : 4)
#define NA_ROWS_BWD_APPLY(DROP) ((DROP) ? 2 : 4)

/* One item of the partials: the VEC chains of channels c .. c + VEC - 1 of sample n down
 * segment s, into part[(n S + s) ld + c ..]. Shared by norm_partials_kernel and
 * norm_stats_kernel, so that both compute the same bits. */
template <typename T, int VEC>
__device__ __forceinline__ void na_partial_item(float2 *part, int ld, sg_cat x, int HW, int64_t n,
                                                int s, int c, int seg, int S) {
    const int r0 = s * seg, r1 = r0 + seg < HW ? r0 + seg : HW;
    const na_col<const T> xc = na_cat_col<const T>(x, c);
    float m[VEC], M2[VEC];
    for (int j = 0; j < VEC; j++) m[j] = M2[j] = 0.0f;
    for (int rb = r0; rb < r1; rb += NA_BATCH) {
        float u[NA_BATCH][VEC] = {};
#pragma unroll
        for (int q = 0; q < NA_BATCH; q++)
            if (rb + q < r1) dev_ldv<T, VEC>(u[q], xc.at(n * HW + rb + q));
#pragma unroll
        for (int q = 0; q < NA_BATCH; q++)
            if (rb + q < r1)
#pragma unroll
                for (int j = 0; j < VEC; j++) gn_welford(m[j], M2[j], u[q][j], rb + q - r0 + 1);
    }
    const int64_t ns = n * S + s;
    for (int j = 0; j < VEC; j++) part[ns * ld + c + j] = make_float2(m[j], M2[j]);
}

/* The statistics' partials (above) of channels [c0, c1) of x[N][HW][*] (a concatenation)
 * into part[n][s][c] (ld channels a segment). Grid-stride over the items (n, s, cv), cv the
 * VEC-channel vectors of [c0, c1) (the launcher checked that a vector lies in one part and is
 * 16-byte aligned when VEC > 1): a thread runs its VEC chains down the segment's rows,
 * NA_BATCH rows loaded at a time. */
template <typename T, int VEC>
__global__ void norm_partials_kernel(float2 *part, int ld, sg_cat x, int HW, int c0, int c1,
                                     int seg, int S, int64_t items) {
    SG_PDL_ENTER();
    const int CV = (c1 - c0) / VEC;
    SG_GRID_STRIDE(it, items) {
        const int64_t ns = it / CV, n = ns / S;
        na_partial_item<T, VEC>(part, ld, x, HW, n, (int)(ns % S), c0 + (int)(it % CV) * VEC, seg,
                                S);
    }
}

/* One segment's contribution to a group's statistics: from the partials ps[0 .. cg) of the
 * group's channels (mean, M2 of the segment's R rows), each channel's mean shifted by
 * v[vi + j] (dt) where v is given: (the group's mean over the segment, M2 + R sum (m_c -
 * mean)^2), channels in order. Shared by norm_stats_final_kernel, norm_stats_kernel and
 * norm_onepass_kernel, so that all compute the same bits. CG: ps is global memory that other
 * blocks of this launch wrote (loads that bypass L1). */
template <bool CG = false>
__device__ __forceinline__ float2 na_seg_group(const float2 *ps, const void *v, int64_t vi, int cg,
                                               int R, int dt) {
    float sum = 0.0f;
    for (int j = 0; j < cg; j++) {
        const float2 p = CG ? __ldcg(ps + j) : ps[j];
        sum += v ? p.x + dev_ld(v, vi + j, dt) : p.x;
    }
    const float mg = sum / (float)cg;
    float M2 = 0.0f, q = 0.0f;
    for (int j = 0; j < cg; j++) {
        const float2 p = CG ? __ldcg(ps + j) : ps[j];
        const float d = (v ? p.x + dev_ld(v, vi + j, dt) : p.x) - mg;
        M2 += p.y;
        q += d * d;
    }
    return make_float2(mg, M2 + (float)R * q);
}
/* rstd from the merged (count na, M2a) */
__device__ __forceinline__ float na_rstd(float M2a, float na, float eps) {
    return 1.0f / sqrtf(M2a / na + eps);
}

/* The merges of the partials (norm_stats_final_kernel, norm_bwd_terms_kernel) take one block
 * per (tile of NA_GROUPS(G) groups, sample n): grid (ceil(G / NA_GROUPS(G)), N). Their loads
 * are spread over the block's threads and each sum keeps the order defined above, through
 * shared memory. (One thread per (sample, group) walking every segment and channel itself was
 * a chain of dependent memory latencies: 16 segments of 4 channels at 32 x 32 x 128, in 16
 * blocks at batch 128 and one at batch 8.) */
#define NA_GROUPS(G) ((G) < SG_THREADS ? (G) : SG_THREADS)

/* mean and rstd of the block's groups of sample n from the partials part[n][s][c] (C channels a
 * segment), each channel's mean shifted by v[n][c] (dt) where v is given. Segments are taken
 * SG_THREADS / NA_GROUPS(G) at a time: thread t first sums segment s0 + t / gb's channels of
 * group g0 + t % gb into (mean, M2 + R q) in order (above), then thread g (< the block's
 * groups) merges its group's segments in order into the running total. */
template <bool CG>
__device__ __forceinline__ void
na_stats_merge(float *mean, float *rstd, float2 *sums, const float2 *part, const void *v, int n,
               int g0, int HW, int C, int G, int seg, int S, float eps, int dt) {
    const int cg = C / G, gb = NA_GROUPS(G), ST = SG_THREADS / gb;
    const int ng = G - g0 < gb ? G - g0 : gb;
    const int t = threadIdx.x, gi = t % gb, sl = t / gb;
    float na = 0.0f, ma = 0.0f, M2a = 0.0f;
    for (int s0 = 0; s0 < S; s0 += ST) {
        const int s = s0 + sl, g = g0 + gi;
        if (sl < ST && gi < ng && s < S) {
            const int R = HW - s * seg < seg ? HW - s * seg : seg;
            sums[t] = na_seg_group<CG>(part + ((int64_t)n * S + s) * C + g * cg, v,
                                       (int64_t)n * C + g * cg, cg, R, dt);
        }
        __syncthreads();
        if (t < ng)
            for (int k = 0; k < ST && s0 + k < S; k++) {
                const int R = HW - (s0 + k) * seg < seg ? HW - (s0 + k) * seg : seg;
                const float2 u = sums[k * gb + t];
                na_merge(na, ma, M2a, (float)R * (float)cg, u.x, u.y);
            }
        __syncthreads();
    }
    if (t < ng) {
        mean[(int64_t)n * G + g0 + t] = ma;
        rstd[(int64_t)n * G + g0 + t] = na_rstd(M2a, na, eps);
    }
}

__global__ void norm_stats_final_kernel(float *mean, float *rstd, const float2 *part, const void *v,
                                        int N, int HW, int C, int G, int seg, int S, float eps,
                                        int dt) {
    SG_PDL_ENTER();
    __shared__ float2 sums[SG_THREADS];
    (void)N;
    na_stats_merge<false>(mean, rstd, sums, part, v, blockIdx.y, blockIdx.x * NA_GROUPS(G), HW, C,
                          G, seg, S, eps, dt);
}

/* Pass 1 in one launch: grid (B, N), blocks blockIdx.x < B of sample n = blockIdx.y. The
 * sample's partials of channels [c0, C) (items (s, cv) strided over its B blocks,
 * na_partial_item; those of channels below c0 are in part already), then the sample's last
 * block to finish (dev_last_block, ticket norm_stats_tickets[n]) merges every group of the
 * sample as norm_stats_final_kernel's blocks do: the same bits as the two launches, one fewer. */
#define NA_TICKETS 65536 /* a sample each: N <= 65535 (na_check) */
static __device__ unsigned norm_stats_tickets[NA_TICKETS];

template <typename T, int VEC>
__global__ void norm_stats_kernel(float *mean, float *rstd, float2 *part, sg_cat x, const void *v,
                                  int HW, int C, int G, int c0, int seg, int S, float eps, int dt) {
    SG_PDL_ENTER();
    __shared__ float2 sums[SG_THREADS];
    __shared__ unsigned sh_last;
    const int n = blockIdx.y, CV = (C - c0) / VEC;
    const int64_t items = (int64_t)S * CV;
    for (int64_t it = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; it < items;
         it += (int64_t)gridDim.x * blockDim.x)
        na_partial_item<T, VEC>(part, C, x, HW, n, (int)(it / CV), c0 + (int)(it % CV) * VEC, seg,
                                S);
    if (!dev_last_block(&norm_stats_tickets[n], gridDim.x, &sh_last)) return;
    for (int g0 = 0; g0 < G; g0 += NA_GROUPS(G))
        na_stats_merge<true>(mean, rstd, sums, part, v, n, g0, HW, C, G, seg, S, eps, dt);
}

/* The chunk's R rows of x (a concatenation of C channels; 16-byte vectors, each in one part:
 * the launcher's na_vec) from row `row0` into shared memory xs[R][C] by cp.async, every copy in
 * flight at once, then waited for by every thread: the elementwise passes' loads were a thread's
 * few rows at a time (its registers hold the channels' operands and the rows), two blocks an
 * SM, a memory latency each; the same values whoever loads them, so the same bits. R C <=
 * SG_WS_NORM_ELEMS (sg_ws_norm_rows). Every thread of the block calls it. */
/* The copies behind it, issued and not waited for (the one-pass kernels commit them and do other
 * work first): channels [c0, c0 + CB) of rows row0 .. row0 + R - 1 of x into dst[R][CB], a
 * 16-byte cp.async each, the block's threads taking them in turn. */
template <typename T>
__device__ __forceinline__ void na_copy_rows(T *dst, const sg_cat &x, int64_t row0, int R, int c0,
                                             int CB) {
    constexpr int V = 16 / sizeof(T); /* a copy's channels */
    const int CV = CB / V;
    for (int i = threadIdx.x; i < R * CV; i += SG_THREADS) {
        const int r = i / CV, c = (i - r * CV) * V;
        sg_cp_async_16(dst + (int64_t)r * CB + c, na_cat_col<const T>(x, c0 + c).at(row0 + r), 1);
    }
}
/* One buffer of C channels as a concatenation, in device code (sg_cat1 is the host's) */
template <typename T> __device__ __forceinline__ sg_cat na_cat1(const T *p, int C) {
    return sg_cat{{(void *)(uintptr_t)p, nullptr}, {C, 0}};
}
template <typename T>
__device__ __forceinline__ void na_stage_chunk(T *xs, const sg_cat &x, int64_t row0, int R, int C) {
    na_copy_rows<T>(xs, x, row0, R, 0, C);
    sg_cp_async_commit();
    sg_cp_async_wait(0);
    __syncthreads();
}

/* Pass 2 forward (and the recomputation), layout above: y = tail(fmaf(u - mean, rstd gamma,
 * beta)) with u = x + v. Elementwise: no barriers. */
template <typename T, int VEC, bool DROP>
__global__ void __launch_bounds__(SG_THREADS, 3)
    norm_apply_kernel(T *y, sg_cat x, const T *v, const float *mean, const float *rstd,
                      const float *gamma, const float *beta, int HW, int C, int G, int rows,
                      int act, sg_drop drop) {
    SG_PDL_ENTER();
    /* 16-byte vectors: the chunk's x first copied whole into shared memory, every copy in
     * flight at once (na_stage_chunk), then read from there a row at a time (no latency left
     * to hide: the registers of more rows bought nothing) */
    constexpr int ROWS = VEC > 1 ? 1 : NA_ROWS_APPLY(DROP);
    NA_LAYOUT(VEC);
    const na_drop dk = na_drop_load(drop);
    const T *vn = v ? v + (int64_t)n * C : nullptr;
    SG_DYNAMIC_SMEM(uint8_t, smem); /* [R][C] of T with 16-byte vectors (na_apply), else none */
    T *xs = (T *)smem;
    if constexpr (VEC > 1) na_stage_chunk<T>(xs, x, (int64_t)n * HW + r0, R, C);
    if (!active) return;
    for (int cv0 = 0; cv0 < CV; cv0 += TC) {
        if (cv0 + tc >= CV) break;
        const int c0 = (cv0 + tc) * VEC;
        float mu[VEC], ga[VEC], be[VEC], add[VEC];
        int sg[VEC];
        na_groups<VEC>(sg, n, G, c0, cg);
        for (int j = 0; j < VEC; j++) {
            const int c = c0 + j, s = sg[j];
            mu[j] = mean[s], ga[j] = na_apply_scale(rstd[s], gamma[c]), be[j] = beta[c];
            add[j] = 0.0f;
        }
        if (vn) dev_ldv<T, VEC>(add, vn + c0);
        const na_col<const T> xc = na_cat_col<const T>(x, c0);
        for (int rb = r0 + tr; rb < r1; rb += ROWS * TR) {
            float u[ROWS][VEC];
#pragma unroll
            for (int q = 0; q < ROWS; q++)
                if (rb + q * TR < r1)
                    dev_ldv<T, VEC>(u[q], VEC > 1 ? xs + (int64_t)(rb + q * TR - r0) * C + c0
                                                  : xc.at((int64_t)n * HW + rb + q * TR));
#pragma unroll
            for (int q = 0; q < ROWS; q++) {
                if (rb + q * TR >= r1) break;
                const int64_t i = ((int64_t)n * HW + rb + q * TR) * C + c0;
                float o[VEC];
                for (int j = 0; j < VEC; j++)
                    o[j] = na_apply_act<na_fast_act<T>>(vn ? u[q][j] + add[j] : u[q][j], mu[j],
                                                        ga[j], be[j], act);
                /* the dropout: one Philox call per 8 elements (na_drop_vec) */
                if constexpr (DROP) na_drop_vec<false, VEC>(o, dk, dk.i0 + (uint64_t)i);
                dev_stv<T, VEC>(y + i, o, 0);
            }
        }
    }
}

/* The one-pass forward (SG_NORM_ONEPASS; cuda_norm_act_onepass_groups): partials, merge and
 * apply of norm_act's forward in one kernel that reads x once. Block (tile of gpb groups, sample
 * n): its CB = gpb C / G channels of the sample's HW rows are copied into shared memory (cp.async,
 * every copy in flight at once), then:
 * - the partials of each (segment, channel), gn_welford down the segment's rows in order
 *   (1 / k from a table of gn_welford_rcp: the same values), norm_partials_kernel's chains;
 * - each group's statistics, its segments merged in order (na_seg_group, na_merge, na_rstd:
 *   norm_stats_final_kernel's arithmetic), written to mean and rstd;
 * - y from the copy, norm_apply_kernel's arithmetic (na_apply_act, the dropout by na_drop_vec at
 *   the same element indices).
 * So the same bits as the two-pass forward (partials, merge, apply), which reads x twice and
 * launches three kernels; cuda_ops checks both on every case. Taken only with 16-byte vectors
 * and where the tile fits (NA1_SLAB_MAX), and never where the convolution before left some
 * partials (c_done > 0). Shared memory: na1_layout_of. */
#define NA1_SLAB_MAX (64 * 1024) /* the copies (x; backward: x and dy), bytes at most */
#define NA1_ROW_BYTES 64         /* a tile's row, bytes: the groups a tile takes reach this */
struct na1_layout {
    int part, stat, chan, rk, bytes;
};
__host__ __device__ __forceinline__ na1_layout na1_layout_of(int HW, int CB, int gpb, int S,
                                                             int seg, int es) {
    na1_layout l;
    int o = (HW * CB * es + 15) & ~15; /* the copy [HW][CB] */
    l.part = o, o += S * CB * 8;       /* the partials [S][CB] (float2) */
    l.stat = o, o += gpb * 8;          /* each group's (mean, rstd) */
    l.chan = o, o += 4 * CB * 4;       /* per channel: mean, scale, beta, v */
    l.rk = o, o += (seg + 1) * 4;      /* 1 / k, k = 0 .. seg */
    l.bytes = o;
    return l;
}

template <typename T, int VEC, bool DROP>
__global__ void __launch_bounds__(SG_THREADS)
    norm_onepass_kernel(T *y, float *mean, float *rstd, sg_cat x, const T *v, const float *gamma,
                        const float *beta, int HW, int C, int G, int gpb, int seg, int S, float eps,
                        int act, sg_drop drop) {
    SG_PDL_ENTER();
    SG_DYNAMIC_SMEM(uint8_t, smem);
    const int dt = sizeof(T) == 2 ? DT_BF16 : DT_F32;
    const int n = blockIdx.y, cg = C / G, g0 = blockIdx.x * gpb, CB = gpb * cg, c0 = g0 * cg;
    const int CBV = CB / VEC, items = HW * CBV, t = threadIdx.x;
    const na1_layout L = na1_layout_of(HW, CB, gpb, S, seg, (int)sizeof(T));
    T *slab = (T *)smem;
    float2 *part = (float2 *)(smem + L.part), *stat = (float2 *)(smem + L.stat);
    float *smu = (float *)(smem + L.chan), *ssc = smu + CB, *sbe = ssc + CB, *sadd = sbe + CB;
    float *rk = (float *)(smem + L.rk);
    /* the copy: row r, vector cv of the tile at slab[r][cv VEC] */
    static_assert(VEC * sizeof(T) == 16, "the copies are the tile's 16-byte vectors");
    na_copy_rows<T>(slab, x, (int64_t)n * HW, HW, c0, CB);
    sg_cp_async_commit();
    for (int k = t; k <= seg; k += SG_THREADS) rk[k] = k ? gn_welford_rcp(k) : 0.0f;
    sg_cp_async_wait(0);
    __syncthreads();
    /* the partials: chain (segment s, channel c) */
    for (int ch = t; ch < S * CB; ch += SG_THREADS) {
        const int s = ch / CB, c = ch - s * CB, r0 = s * seg, R = HW - r0 < seg ? HW - r0 : seg;
        const T *col = slab + (int64_t)r0 * CB + c;
        float m = 0.0f, M2 = 0.0f;
        for (int r = 0; r < R; r++) gn_welford_r(m, M2, dev_ld1(col + (int64_t)r * CB), rk[r + 1]);
        part[ch] = make_float2(m, M2);
    }
    __syncthreads();
    /* the statistics: thread j < gpb, group g0 + j */
    if (t < gpb) {
        const int g = g0 + t;
        float na = 0.0f, ma = 0.0f, M2a = 0.0f;
        for (int s = 0; s < S; s++) {
            const int R = HW - s * seg < seg ? HW - s * seg : seg;
            const float2 u =
                na_seg_group(part + s * CB + t * cg, v, (int64_t)n * C + g * cg, cg, R, dt);
            na_merge(na, ma, M2a, (float)R * (float)cg, u.x, u.y);
        }
        const float rs = na_rstd(M2a, na, eps);
        mean[(int64_t)n * G + g] = ma;
        rstd[(int64_t)n * G + g] = rs;
        stat[t] = make_float2(ma, rs);
    }
    __syncthreads();
    for (int c = t; c < CB; c += SG_THREADS) {
        const float2 st = stat[c / cg];
        smu[c] = st.x, ssc[c] = na_apply_scale(st.y, gamma[c0 + c]), sbe[c] = beta[c0 + c];
        sadd[c] = v ? dev_ld1(v + (int64_t)n * C + c0 + c) : 0.0f;
    }
    __syncthreads();
    /* y */
    const na_drop dk = na_drop_load(drop);
    for (int i = t; i < items; i += SG_THREADS) {
        const int r = i / CBV, cl = (i - r * CBV) * VEC;
        float u[VEC], o[VEC];
        dev_ldv<T, VEC>(u, slab + (int64_t)r * CB + cl);
#pragma unroll
        for (int j = 0; j < VEC; j++)
            o[j] = na_apply_act<na_fast_act<T>>(v ? u[j] + sadd[cl + j] : u[j], smu[cl + j],
                                                ssc[cl + j], sbe[cl + j], act);
        const int64_t e = ((int64_t)n * HW + r) * C + c0 + cl;
        if constexpr (DROP) na_drop_vec<false, VEC>(o, dk, dk.i0 + (uint64_t)e);
        dev_stv<T, VEC>(y + e, o, 0);
    }
}

/* The backward's arithmetic shared by the two-pass kernels and the one-pass backward
 * (norm_bwd_onepass_kernel), each operation explicitly rounded so that both compute the same
 * bits whatever the compiler contracts:
 * - nb_seg_sums: a channel's (sum dz, sum dz xhat) over the segments' partials p[0], p[ld],
 *   ... in order;
 * - nb_group_m: a group's (mean(dxhat), mean(dxhat xhat)) = (sum gamma dz, sum gamma dz xhat) /
 *   cnt over its cg channels' sums s[0 .. cg) in order;
 * - nb_dx: dx of one element, rstd (dz gamma - m1 - xhat m2), from u = x (+ v), dyd (dy after
 *   the dropout), the group's mean and rstd, the channel's gamma, scale (na_apply_scale) and
 *   beta, and the group's (m1, m2). */
template <bool CG>
__device__ __forceinline__ float2 nb_seg_sums(const float2 *p, int64_t ld, int segs) {
    float sx = 0.0f, sy = 0.0f;
#pragma unroll 8
    for (int k = 0; k < segs; k++) {
        const float2 q = CG ? __ldcg(p + k * ld) : p[k * ld];
        sx = __fadd_rn(sx, q.x);
        sy = __fadd_rn(sy, q.y);
    }
    return make_float2(sx, sy);
}
__device__ __forceinline__ float2 nb_group_m(const float2 *s, const float *gamma, int cg,
                                             float cnt) {
    float A = 0.0f, B = 0.0f;
    for (int j = 0; j < cg; j++) {
        A = __fmaf_rn(gamma[j], s[j].x, A);
        B = __fmaf_rn(gamma[j], s[j].y, B);
    }
    return make_float2(__fdiv_rn(A, cnt), __fdiv_rn(B, cnt));
}
template <bool FAST>
__device__ __forceinline__ float nb_dx(float dyd, float u, float mu, float rs, float gm, float sc,
                                       float be, float m1, float m2, int act) {
    const float uc = __fsub_rn(u, mu);
    const float dz = na_act_bwd<FAST>(dyd, __fmaf_rn(uc, sc, be), act);
    return __fmul_rn(rs, __fmaf_rn(-__fmul_rn(uc, rs), m2, __fmaf_rn(dz, gm, -m1)));
}

/* The terms of sample n's groups [g0, g1): for each of their channels c, S[n][c] = the sums over
 * the segments (in order) of (dz, dz xhat), one thread a channel; then thread g m[n][g] = (sum
 * gamma dz, sum gamma dz xhat) / cnt over its group's channels in order, read back from S (this
 * block wrote them: visible to it after the barrier): mean(dxhat) and mean(dxhat xhat). CG: the
 * partials are other blocks' of this launch (read past L1, __ldcg). Every thread of the block
 * calls it. */
template <bool CG>
__device__ __forceinline__ void nb_terms(float2 *Sg, float2 *m, const float2 *part,
                                         const float *gamma, int n, int HW, int C, int G, int segs,
                                         int g0, int g1) {
    const int cg = C / G;
    float2 *Sn = Sg + (int64_t)n * C;
    for (int c = g0 * cg + (int)threadIdx.x; c < g1 * cg; c += SG_THREADS)
        Sn[c] = nb_seg_sums<CG>(part + (int64_t)n * segs * C + c, C, segs);
    __syncthreads();
    const float cnt = (float)HW * (float)cg;
    for (int g = g0 + (int)threadIdx.x; g < g1; g += SG_THREADS)
        m[(int64_t)n * G + g] = nb_group_m(Sn + g * cg, gamma + g * cg, cg, cnt);
}

/* The terms alone, after partials a data gradient's epilogue left (cuda_norm_bwd_terms): block
 * (tile of NA_GROUPS(G) groups, sample n) */
__global__ void norm_bwd_terms_kernel(float2 *Sg, float2 *m, const float2 *part, const float *gamma,
                                      int HW, int C, int G, int segs) {
    SG_PDL_ENTER();
    const int gb = NA_GROUPS(G), g0 = blockIdx.x * gb, g1 = G - g0 < gb ? G : g0 + gb;
    nb_terms<false>(Sg, m, part, gamma, blockIdx.y, HW, C, G, segs, g0, g1);
}

/* Pass 1 backward: the backward statistics' partials (above: the forward's segments) of dy,
 * part[n][s][c] = (sum dz, sum dz xhat) over the segment's rows in order (gn_bwd_step), then the
 * terms (nb_terms, above) in the same launch. Block (blockIdx.x = s nct + t, sample n =
 * blockIdx.y): the segment's rows of channels [t NB_CT, + NB_CT) (nct tiles a row):
 * - the operands, every element at once: each thread takes VEC-channel vectors of the tile's rows
 *   (x (+ v) and dy loaded, the dropout by na_drop_vec at the element's index) and leaves each
 *   element's gn_bwd_operands (dz, xhat) in shared memory;
 * - the chains, one thread a channel: gn_bwd_accum down the rows in order.
 * Each chain is the same operations on the same values in the same order as one thread running
 * gn_bwd_step down the segment, so the same bits as the data gradient's epilogue (conv_tc.cu);
 * only who computes an element's operands changed. Why: the operands are most of the work (the
 * dropout's Philox, the SiLU's exponential), and a thread a chain did them row after row, a
 * memory latency per batch of rows: N S C / 4 threads, 64 a sample at 8 x 8 x 256 (one segment),
 * each 64 rows long. The sample's last block to finish (dev_last_block, ticket
 * norm_bwd_tickets[n]) computes every group's terms of the sample as norm_bwd_terms_kernel's
 * blocks do: the same bits as the two launches, one fewer. */
static __device__ unsigned norm_bwd_tickets[NA_TICKETS];
#define NB_CT 64 /* channels a block of the backward partials */

template <typename T, int VEC>
__global__ void __launch_bounds__(SG_THREADS, 3) /* 80 registers (bf16), no spills */
    norm_bwd_partials_kernel(float2 *part, float2 *Sg, float2 *m, const T *dy, sg_cat x, const T *v,
                             const float *mean, const float *rstd, const float *gamma,
                             const float *beta, int HW, int C, int G, int seg, int S, int act,
                             sg_drop drop) {
    SG_PDL_ENTER();
    static_assert(NB_CT % VEC == 0, "a vector lies in one tile");
    SG_DYNAMIC_SMEM(uint8_t, smem); /* the operands: dz, then xhat, float [seg][NB_CT] each */
    float(*sdz)[NB_CT] = (float(*)[NB_CT])smem, (*sxh)[NB_CT] = sdz + SG_WS_NORM_SEG;
    __shared__ unsigned sh_last;
    const int n = blockIdx.y, nct = (C + NB_CT - 1) / NB_CT, s = blockIdx.x / nct;
    const int c0 = blockIdx.x % nct * NB_CT, cw = C - c0 < NB_CT ? C - c0 : NB_CT;
    const int r0 = s * seg, R = HW - r0 < seg ? HW - r0 : seg, CV = cw / VEC, cg = C / G;
    const na_drop dk = na_drop_load(drop);
    for (int it = threadIdx.x; it < R * CV; it += SG_THREADS) {
        const int r = it / CV, cl = (it - r * CV) * VEC, c = c0 + cl;
        const int64_t row = (int64_t)n * HW + r0 + r;
        float u[VEC], d[VEC], add[VEC] = {};
        int sg[VEC];
        dev_ldv<T, VEC>(u, na_cat_col<const T>(x, c).at(row));
        dev_ldv<T, VEC>(d, dy + row * C + c);
        if (v) dev_ldv<T, VEC>(add, v + (int64_t)n * C + c);
        na_drop_vec<true, VEC>(d, dk, dk.i0 + (uint64_t)(row * C + c)); /* gn_bwd_step's */
        na_groups<VEC>(sg, n, G, c, cg);
#pragma unroll
        for (int j = 0; j < VEC; j++) {
            const float rs = rstd[sg[j]];
            const float2 o =
                gn_bwd_operands<na_fast_act<T>>(d[j], v ? u[j] + add[j] : u[j], mean[sg[j]], rs,
                                                na_apply_scale(rs, gamma[c + j]), beta[c + j], act);
            sdz[r][cl + j] = o.x, sxh[r][cl + j] = o.y;
        }
    }
    __syncthreads();
    for (int cl = threadIdx.x; cl < cw; cl += SG_THREADS) {
        float a = 0.0f, b = 0.0f;
        for (int r = 0; r < R; r++) gn_bwd_accum(a, b, sdz[r][cl], sxh[r][cl]);
        part[((int64_t)n * S + s) * C + c0 + cl] = make_float2(a, b);
    }
    if (!dev_last_block(&norm_bwd_tickets[n], gridDim.x, &sh_last)) return;
    nb_terms<true>(Sg, m, part, gamma, n, HW, C, G, S, 0, G);
}

/* The backward's finish (after the terms: S complete; after dx: the chunks' sums of dx):
 * - nb_fin_params, column block blk < ceil(C / 32): dgamma[c] (+)= sum over n (in order) of
 *   S[n][c].y, dbeta[c] (+)= of S[n][c].x (dev_col_sums), for its 32 channels;
 * - nb_fin_dv: dv[n][c] (+)= sum over the chunks (in order) of dvpart[n][k][c], for every c of
 *   sample n (CG: the chunks' sums are other blocks' of this launch, read past L1).
 * Run by norm_bwd_finish_kernel after the one-pass backward, and inside the two-pass dx kernel
 * (nb_fin): one code, the same bits. */
__device__ __forceinline__ void nb_fin_params(float *dgamma, float *dbeta, const float2 *S, int N,
                                              int C, int blk, int accum) {
    if (blk >= (C + 31) / 32) return;
    const float2 q = dev_col_sums([&](int n, int c) { return S[(int64_t)n * C + c]; }, N, C, blk);
    const int i = blk * 32 + (int)threadIdx.x;
    if (threadIdx.x < 32 && i < C) {
        dgamma[i] = accum ? __fadd_rn(dgamma[i], q.y) : q.y;
        dbeta[i] = accum ? __fadd_rn(dbeta[i], q.x) : q.x;
    }
}
template <bool CG>
__device__ __forceinline__ void nb_fin_dv(void *dv, const float *dvpart, int n, int C, int chunks,
                                          int dt, int accum) {
    for (int c = (int)threadIdx.x; c < C; c += SG_THREADS) {
        float s = 0.0f;
        for (int k = 0; k < chunks; k++) {
            const float *q = dvpart + ((int64_t)n * chunks + k) * C + c;
            s += CG ? __ldcg(q) : *q;
        }
        dev_st_acc(dv, (int64_t)n * C + c, s, dt, accum);
    }
}

/* What the two-pass dx kernel finishes besides dx: dgamma and dbeta in blocks of grid rows
 * blockIdx.y >= N (their column block (blockIdx.y - N) gridDim.x + blockIdx.x; S is complete
 * before the kernel starts), and with dv, each sample's dv in the sample's last chunk block to
 * finish (dev_last_block, ticket norm_dv_tickets[n]). The same arithmetic in the same order as
 * norm_bwd_finish_kernel: the same bits, one launch fewer. No padding bytes (a kernel
 * argument). */
struct nb_fin {
    float *dgamma, *dbeta;
    const float2 *S;
    void *dv;
    int N, dt, accum_param, accum_dv;
};
static __device__ unsigned norm_dv_tickets[NA_TICKETS];

/* Pass 2 backward, layout above: dx (+)= rstd (dz gamma - m1 - xhat m2); with dvpart, the
 * chunk's per-channel sums of dx (the fresh contribution) into dvpart[n][chunk][c]. */
template <typename T, int VEC, bool DROP>
__global__ void __launch_bounds__(SG_THREADS, 3)
    norm_bwd_apply_kernel(sg_cat dx, float *dvpart, const T *dy, sg_cat x, const T *v,
                          const float *mean, const float *rstd, const float *gamma,
                          const float *beta, const float2 *m, int HW, int C, int G, int rows,
                          int act, sg_drop drop, int accum, nb_fin fin) {
    SG_PDL_ENTER();
    if ((int)blockIdx.y >= fin.N) { /* a block of dgamma and dbeta (nb_fin) */
        nb_fin_params(fin.dgamma, fin.dbeta, fin.S, fin.N, C,
                      ((int)blockIdx.y - fin.N) * (int)gridDim.x + (int)blockIdx.x,
                      fin.accum_param);
        return;
    }
    /* vectors (the launcher's 16-byte ones): the chunk's x and dy staged in shared memory first
     * (na_stage_chunk), then a row at a time from there, as the forward apply */
    constexpr int ROWS = VEC > 1 ? 1 : NA_ROWS_BWD_APPLY(DROP);
    __shared__ float tp[SG_THREADS][VEC];
    __shared__ unsigned sh_last;
    NA_LAYOUT(VEC);
    const na_drop dk = na_drop_load(drop);
    const T *vn = v ? v + (int64_t)n * C : nullptr;
    SG_DYNAMIC_SMEM(uint8_t, smem); /* x, then dy: [R][C] of T each with vectors, else none */
    T *xs = (T *)smem, *dys = xs + (int64_t)R * C;
    if constexpr (VEC > 1) {
        na_stage_chunk<T>(xs, x, (int64_t)n * HW + r0, R, C);
        na_stage_chunk<T>(dys, na_cat1(dy, C), (int64_t)n * HW + r0, R, C);
    }
    for (int cv0 = 0; cv0 < CV; cv0 += TC) {
        const int c0 = (cv0 + tc) * VEC;
        const bool mine = active && cv0 + tc < CV;
        float sdx[VEC];
        for (int j = 0; j < VEC; j++) sdx[j] = 0.0f;
        if (mine) {
            float mu[VEC], rs[VEC], ga[VEC], be[VEC], gm[VEC], m1[VEC], m2[VEC], add[VEC];
            int sg[VEC];
            na_groups<VEC>(sg, n, G, c0, cg);
            for (int j = 0; j < VEC; j++) {
                const int c = c0 + j, s = sg[j];
                mu[j] = mean[s], rs[j] = rstd[s], gm[j] = gamma[c];
                ga[j] = na_apply_scale(rs[j], gm[j]);
                be[j] = beta[c], m1[j] = m[s].x, m2[j] = m[s].y, add[j] = 0.0f;
            }
            if (vn) dev_ldv<T, VEC>(add, vn + c0);
            const na_col<const T> xc = na_cat_col<const T>(x, c0);
            const na_col<T> dxc = na_cat_col<T>(dx, c0);
            for (int rb = r0 + tr; rb < r1; rb += ROWS * TR) {
                float u[ROWS][VEC], d[ROWS][VEC];
#pragma unroll
                for (int q = 0; q < ROWS; q++)
                    if (rb + q * TR < r1) {
                        const int64_t row = (int64_t)n * HW + rb + q * TR;
                        const int64_t s = (int64_t)(rb + q * TR - r0) * C + c0;
                        dev_ldv<T, VEC>(u[q], VEC > 1 ? xs + s : xc.at(row));
                        dev_ldv<T, VEC>(d[q], VEC > 1 ? dys + s : dy + row * C + c0);
                    }
#pragma unroll
                for (int q = 0; q < ROWS; q++) {
                    if (rb + q * TR >= r1) break;
                    const int64_t row = (int64_t)n * HW + rb + q * TR, i = row * C + c0;
                    if constexpr (DROP) /* na_tail_bwd's dropout */
                        na_drop_vec<true, VEC>(d[q], dk, dk.i0 + (uint64_t)i);
                    for (int j = 0; j < VEC; j++) {
                        d[q][j] =
                            nb_dx<na_fast_act<T>>(d[q][j], vn ? u[q][j] + add[j] : u[q][j], mu[j],
                                                  rs[j], gm[j], ga[j], be[j], m1[j], m2[j], act);
                        sdx[j] = __fadd_rn(sdx[j], d[q][j]);
                    }
                    dev_stv<T, VEC>(dxc.at(row), d[q], accum);
                }
            }
        }
        if (dvpart) {
            for (int j = 0; j < VEC; j++) tp[threadIdx.x][j] = sdx[j];
            __syncthreads();
            for (int c = threadIdx.x; c < TC * VEC && cv0 + c / VEC < CV; c += SG_THREADS) {
                float a = 0.0f;
                for (int t = 0; t < TR; t++) a = __fadd_rn(a, tp[t * TC + c / VEC][c % VEC]);
                dvpart[((int64_t)n * gridDim.x + chunk) * C + cv0 * VEC + c] = a;
            }
            __syncthreads();
        }
    }
    if (fin.dv && dev_last_block(&norm_dv_tickets[n], gridDim.x, &sh_last))
        nb_fin_dv<true>(fin.dv, dvpart, n, C, (int)gridDim.x, fin.dt, fin.accum_dv);
}

/* The one-pass backward (SG_NORM_ONEPASS bwd; cuda_norm_act_bwd_onepass_groups): the backward
 * partials, the terms and dx of norm_act's backward in one kernel that reads x and dy once.
 * Block (tile of gpb groups, sample n), as the one-pass forward's: its CB channels of x and dy
 * over the sample's HW rows are copied into shared memory (cp.async, all in flight at once),
 * then:
 * - the partials of each (segment, channel): gn_bwd_step_dropped down the segment's rows in
 *   order, the dropout drawn per element (na_drop_at: the same uniforms as na_drop_vec's), as
 *   norm_bwd_partials_kernel's chains;
 * - each channel's sums over the segments (nb_seg_sums), written to S for the finish kernel,
 *   and each group's (m1, m2) (nb_group_m): norm_bwd_terms_kernel's;
 * - dx (nb_dx, stored (+)= as norm_bwd_apply_kernel) by items (chunk k, row lane t, VEC
 *   channels) that visit the rows the two-pass apply's thread (t, the same channels) of chunk k
 *   visits, in its order: rows k rows + t, + TR, ... (TR = its row lanes, NA_LAYOUT with 4
 *   channels a thread). With dv, each item's sums of dx go to shared memory and the chunk's
 *   per-channel sums over the lanes in order to dvpart[n][k][c]: the same bits as the
 *   two-pass's.
 * norm_bwd_finish_kernel follows, as after the two passes. Taken with 16-byte vectors, where
 * the two copies fit (NA1_SLAB_MAX together), and never where the data gradient before left
 * the partials (part_done). Shared memory: nb1_layout_of. */
struct nb1_layout {
    int dy, part, sums, m, chan, tp, bytes;
};
/* the two-pass apply's row lanes (NA_LAYOUT, 4 channels a thread) */
__host__ __device__ __forceinline__ int nb1_lanes(int C) {
    const int CV = C / 4, TC = CV < SG_THREADS ? CV : SG_THREADS;
    return SG_THREADS / TC;
}
__host__ __device__ __forceinline__ nb1_layout nb1_layout_of(int HW, int C, int CB, int gpb, int S,
                                                             int rows, int es) {
    nb1_layout l;
    const int slab = (HW * CB * es + 15) & ~15;
    const int chunks = (HW + rows - 1) / rows;
    int o = slab;                                  /* the copy of x [HW][CB] */
    l.dy = o, o += slab;                           /* the copy of dy [HW][CB] */
    l.part = o, o += S * CB * 8;                   /* the partials [S][CB] (float2) */
    l.sums = o, o += CB * 8;                       /* their sums over the segments */
    l.m = o, o += gpb * 8;                         /* each group's (m1, m2) */
    l.chan = o, o += 6 * CB * 4;                   /* mean, rstd, gamma, scale, beta, v */
    l.tp = o, o += chunks * nb1_lanes(C) * CB * 4; /* the items' sums of dx (dv) */
    l.bytes = o;
    return l;
}

template <typename T, int VEC, bool DROP>
__global__ void __launch_bounds__(SG_THREADS, 2)
    norm_bwd_onepass_kernel(sg_cat dx, float2 *Sg, float *dvpart, const T *dy, sg_cat x, const T *v,
                            const float *mean, const float *rstd, const float *gamma,
                            const float *beta, int HW, int C, int G, int gpb, int seg, int S,
                            int rows, int act, sg_drop drop, int accum) {
    SG_PDL_ENTER();
    SG_DYNAMIC_SMEM(uint8_t, smem);
    const int n = blockIdx.y, cg = C / G, g0 = blockIdx.x * gpb, CB = gpb * cg, c0 = g0 * cg;
    const int CBV = CB / VEC, t = threadIdx.x;
    const nb1_layout L = nb1_layout_of(HW, C, CB, gpb, S, rows, (int)sizeof(T));
    T *xs = (T *)smem, *dys = (T *)(smem + L.dy);
    float2 *part = (float2 *)(smem + L.part), *sums = (float2 *)(smem + L.sums);
    float2 *sm = (float2 *)(smem + L.m);
    float *smu = (float *)(smem + L.chan), *srs = smu + CB, *sgm = srs + CB, *ssc = sgm + CB;
    float *sbe = ssc + CB, *sadd = sbe + CB, *tp = (float *)(smem + L.tp);
    /* the copies: row r, vector cv of the tile at [r][cv VEC] */
    static_assert(VEC * sizeof(T) == 16, "the copies are the tile's 16-byte vectors");
    na_copy_rows<T>(xs, x, (int64_t)n * HW, HW, c0, CB);
    na_copy_rows<T>(dys, na_cat1(dy, C), (int64_t)n * HW, HW, c0, CB);
    sg_cp_async_commit();
    for (int c = t; c < CB; c += SG_THREADS) {
        const int g = n * G + g0 + c / cg;
        smu[c] = mean[g], srs[c] = rstd[g], sgm[c] = gamma[c0 + c];
        ssc[c] = na_apply_scale(srs[c], sgm[c]), sbe[c] = beta[c0 + c];
        sadd[c] = v ? dev_ld1(v + (int64_t)n * C + c0 + c) : 0.0f;
    }
    sg_cp_async_wait(0);
    __syncthreads();
    const na_drop dk = na_drop_load(drop);
    /* the partials: chain (segment s, channel c) */
    for (int ch = t; ch < S * CB; ch += SG_THREADS) {
        const int s = ch / CB, c = ch - s * CB, r0 = s * seg, R = HW - r0 < seg ? HW - r0 : seg;
        float a = 0.0f, b = 0.0f;
        for (int r = r0; r < r0 + R; r++) {
            float d = dev_ld1(dys + (int64_t)r * CB + c);
            if constexpr (DROP) d = na_drop_at<true>(d, dk, ((int64_t)n * HW + r) * C + c0 + c);
            const float u = dev_ld1(xs + (int64_t)r * CB + c);
            gn_bwd_step_dropped<na_fast_act<T>>(a, b, d, v ? u + sadd[c] : u, smu[c], srs[c],
                                                ssc[c], sbe[c], act);
        }
        part[ch] = make_float2(a, b);
    }
    __syncthreads();
    /* the terms: the channels' sums (to S too), then the groups' (m1, m2) */
    for (int c = t; c < CB; c += SG_THREADS)
        Sg[(int64_t)n * C + c0 + c] = sums[c] = nb_seg_sums<false>(part + c, CB, S);
    __syncthreads();
    if (t < gpb) sm[t] = nb_group_m(sums + t * cg, sgm + t * cg, cg, (float)HW * (float)cg);
    __syncthreads();
    /* dx, by items (chunk k, lane l, vector cv) */
    const int chunks = (HW + rows - 1) / rows, TR = nb1_lanes(C), work = chunks * TR * CBV;
    for (int it = t; it < work; it += SG_THREADS) {
        const int kl = it / CBV, cl = (it - kl * CBV) * VEC, k = kl / TR, l = kl - k * TR;
        const int r1 = (k + 1) * rows < HW ? (k + 1) * rows : HW;
        const na_col<T> dxc = na_cat_col<T>(dx, c0 + cl);
        const int gi0 = cl / cg, gr0 = cl - gi0 * cg;
        float sdx[VEC];
        for (int j = 0; j < VEC; j++) sdx[j] = 0.0f;
        for (int r = k * rows + l; r < r1; r += TR) {
            float u[VEC], d[VEC];
            dev_ldv<T, VEC>(u, xs + (int64_t)r * CB + cl);
            dev_ldv<T, VEC>(d, dys + (int64_t)r * CB + cl);
            const int64_t row = (int64_t)n * HW + r;
            if constexpr (DROP)
                na_drop_vec<true, VEC>(d, dk, dk.i0 + (uint64_t)(row * C + c0 + cl));
            int gi = gi0, gr = gr0; /* channel cl + j's group in the tile, and place in it */
#pragma unroll
            for (int j = 0; j < VEC; j++) {
                const int c = cl + j;
                const float2 mm = sm[gi];
                d[j] = nb_dx<na_fast_act<T>>(d[j], v ? u[j] + sadd[c] : u[j], smu[c], srs[c],
                                             sgm[c], ssc[c], sbe[c], mm.x, mm.y, act);
                sdx[j] = __fadd_rn(sdx[j], d[j]);
                if (++gr == cg) gr = 0, gi++;
            }
            dev_stv<T, VEC>(dxc.at(row), d, accum);
        }
        if (dvpart)
            for (int j = 0; j < VEC; j++) tp[kl * CB + cl + j] = sdx[j];
    }
    if (!dvpart) return;
    __syncthreads();
    for (int kc = t; kc < chunks * CB; kc += SG_THREADS) {
        const int k = kc / CB, c = kc - k * CB;
        float a = 0.0f;
        for (int l = 0; l < TR; l++) a = __fadd_rn(a, tp[(k * TR + l) * CB + c]);
        dvpart[((int64_t)n * chunks + k) * C + c0 + c] = a;
    }
}

/* After the one-pass backward: blocks [0, pb), pb = ceil(C / 32), dgamma and dbeta
 * (nb_fin_params); with dv, block pb + n sample n's dv (nb_fin_dv) */
__global__ void norm_bwd_finish_kernel(float *dgamma, float *dbeta, void *dv, const float2 *S,
                                       const float *dvpart, int N, int C, int chunks, int dt,
                                       int accum_param, int accum_dv) {
    SG_PDL_ENTER();
    const int pb = (C + 31) / 32;
    if ((int)blockIdx.x < pb)
        nb_fin_params(dgamma, dbeta, S, N, C, (int)blockIdx.x, accum_param);
    else if (dv)
        nb_fin_dv<false>(dv, dvpart, (int)blockIdx.x - pb, C, chunks, dt, accum_dv);
}

/* =============================== launchers =============================== */

static int gn_check(const char *fn, sg_cat x, int N, int HW, int C, int G, int dt) {
    SG_DT_CHECK(dt, fn);
    SG_ARG_CHECK(N > 0 && HW > 0 && C > 0 && G > 0 && C % G == 0, "%s: bad shape (C %% G)", fn);
    SG_ARG_CHECK((int64_t)N * G < 2147483647LL, "%s: too many groups", fn);
    SG_ARG_CHECK(x.c[0] > 0 && x.c[1] >= 0 && x.c[0] + x.c[1] == C && x.p[0] != NULL &&
                     (x.c[1] == 0 || x.p[1] != NULL),
                 "%s: concatenation of %d + %d channels does not make C = %d", fn, x.c[0], x.c[1],
                 C);
    SG_ARG_CHECK((double)HW * (C / G) < 16777216.0, "%s: group too large for fp32 counts", fn);
    return SG_OK;
}

int cuda_group_norm_fwd(cudaStream_t st, void *y, float *mean, float *rstd, sg_cat x,
                        const float *gamma, const float *beta, int N, int HW, int C, int G,
                        float eps, int dt) {
    if (gn_check("cuda_group_norm_fwd", x, N, HW, C, G, dt)) return SG_ERR;
    SG_LAUNCH(gn_fwd_kernel, (unsigned)(N * G), SG_THREADS, 0, st, y, mean, rstd, x, gamma, beta,
              HW, C, G, eps, dt);
    SG_LAUNCH_CHECK("gn_fwd_kernel");
    return SG_OK;
}

int cuda_group_norm_bwd(cudaStream_t st, sg_cat dx, float *dgamma, float *dbeta, const void *dy,
                        sg_cat x, const float *mean, const float *rstd, const float *gamma, int N,
                        int HW, int C, int G, int dt, int accum_dx, int accum_param, void *ws,
                        int64_t ws_bytes) {
    const char *fn = "cuda_group_norm_bwd";
    if (gn_check(fn, x, N, HW, C, G, dt)) return SG_ERR;
    SG_ARG_CHECK(dx.c[0] == x.c[0] && dx.c[1] == x.c[1] && dx.p[0] != NULL &&
                     (dx.c[1] == 0 || dx.p[1] != NULL),
                 "%s: dx must be split like x", fn);
    SG_WS_CHECK(sg_ws_group_norm_bwd(N, C), ws_bytes, fn);
    float *ws_dg = (float *)ws;
    float *ws_db = (float *)((char *)ws + sg_ws_align((int64_t)N * C * 4));
    SG_LAUNCH(gn_bwd_kernel, (unsigned)(N * G), SG_THREADS, 0, st, dx, ws_dg, ws_db, dy, x, mean,
              rstd, gamma, HW, C, G, dt, accum_dx);
    SG_LAUNCH_CHECK("gn_bwd_kernel");
    SG_LAUNCH(gn_param_kernel, (unsigned)((C + 31) / 32), SG_THREADS, 0, st, dgamma, dbeta, ws_dg,
              ws_db, N, C, accum_param);
    SG_LAUNCH_CHECK("gn_param_kernel");
    return SG_OK;
}

/* ---- norm_act launchers */

/* 16-byte vectors (4 fp32 or 8 bf16 channels) when C and x's first part are multiples of the
 * width and every activation pointer is 16-byte aligned; else 1 */
static int na_vec(int dt, int C, sg_cat x, const void *const *p, int np) {
    const int V = dt == DT_BF16 ? 8 : 4;
    if (C % V || x.c[0] % V) return 1;
    for (int k = 0; k < np; k++)
        if ((uintptr_t)p[k] % 16) return 1;
    return V;
}

static int na_check(const char *fn, sg_cat x, int N, int HW, int C, int G, int act, sg_drop d,
                    int dt) {
    if (gn_check(fn, x, N, HW, C, G, dt)) return SG_ERR;
    SG_ARG_CHECK(C <= SG_NORM_ACT_MAX_C,
                 "%s: %d channels: at most %d (a block holds one chunk's per-channel "
                 "statistics in shared memory)",
                 fn, C, SG_NORM_ACT_MAX_C);
    SG_ARG_CHECK(N <= 65535, "%s: %d samples: at most 65535 (the grid's y)", fn, N);
    SG_ARG_CHECK(act == SG_ACT_NONE || act == SG_ACT_SILU, "%s: activation %d", fn, act);
    SG_ARG_CHECK(d.p >= 0.0f && d.p < 1.0f && (d.p == 0.0f || (d.seed && d.step)),
                 "%s: dropout p = %g needs 0 <= p < 1 and the device seed and step", fn,
                 (double)d.p);
    return SG_OK;
}

/* one dispatch over (dtype, vector width) for every norm_act launch below: LAUNCH(T, VEC) is
 * the launch with element type T */
#define NA_DISPATCH(dt, vec, LAUNCH)                                                               \
    ((dt) == DT_BF16 ? ((vec) > 1 ? LAUNCH(uint16_t, 8) : LAUNCH(uint16_t, 1))                     \
                     : ((vec) > 1 ? LAUNCH(float, 4) : LAUNCH(float, 1)))
/* ... and for the partials kernels: 4 channels a thread in both dtypes where na_vec allows
 * vectors (NA_BATCH) */
#define NA_PART_DISPATCH(dt, vec, LAUNCH)                                                          \
    ((dt) == DT_BF16 ? ((vec) > 1 ? LAUNCH(uint16_t, 4) : LAUNCH(uint16_t, 1))                     \
                     : ((vec) > 1 ? LAUNCH(float, 4) : LAUNCH(float, 1)))

template <typename T, int VEC>
static int na_apply(cudaStream_t st, dim3 grid, void *y, sg_cat x, const void *v, const float *mean,
                    const float *rstd, const float *gamma, const float *beta, int HW, int C, int G,
                    int rows, int act, sg_drop drop) {
    void (*const norm_apply)(T *, sg_cat, const T *, const float *, const float *, const float *,
                             const float *, int, int, int, int, int, sg_drop) =
        drop.p > 0.0f ? norm_apply_kernel<T, VEC, true> : norm_apply_kernel<T, VEC, false>;
    /* the staged chunk (16-byte vectors): at most SG_WS_NORM_ELEMS values, under 48 KiB */
    const size_t bytes = VEC > 1 ? (size_t)rows * C * sizeof(T) : 0;
    SG_LAUNCH(norm_apply, grid, SG_THREADS, bytes, st, (T *)y, x, (const T *)v, mean, rstd, gamma,
              beta, HW, C, G, rows, act, drop);
    SG_LAUNCH_CHECK("norm_apply_kernel");
    return SG_OK;
}

/* cuda_norm_act_bwd's workspace, in sg_ws_norm_act_bwd's order: the backward partials, their
 * sums over the segments S, the groups' terms m, and with v the chunks' sums of dx */
typedef struct {
    float2 *part, *S, *m;
    float *dvpart;
} nb_ws;
static nb_ws nb_ws_of(void *ws, int N, int HW, int C, int G, int has_v) {
    char *w = (char *)ws;
    nb_ws r;
    r.part = (float2 *)w;
    w += sg_ws_norm_partials(N, HW, C);
    r.S = (float2 *)w;
    w += sg_ws_align((int64_t)N * C * 8);
    r.m = (float2 *)w;
    w += sg_ws_align((int64_t)N * G * 8);
    r.dvpart = has_v ? (float *)w : NULL;
    return r;
}

template <typename T, int VEC>
static int na_bwd_partials(cudaStream_t st, const nb_ws &w, const void *dy, sg_cat x, const void *v,
                           const float *mean, const float *rstd, const float *gamma,
                           const float *beta, int N, int HW, int C, int G, int act, sg_drop drop) {
    const int seg = (int)sg_ws_norm_seg(HW), S = (int)sg_ws_norm_segs(HW);
    /* a block a (segment, NB_CT-channel tile) of a sample */
    const int64_t B = (int64_t)S * ((C + NB_CT - 1) / NB_CT);
    SG_ARG_CHECK(B <= INT32_MAX, "cuda_norm_bwd_partials: %lld blocks a sample", (long long)B);
    void (*const kernel)(float2 *, float2 *, float2 *, const T *, sg_cat, const T *, const float *,
                         const float *, const float *, const float *, int, int, int, int, int, int,
                         sg_drop) = norm_bwd_partials_kernel<T, VEC>;
    SG_LAUNCH_NAMED("norm_bwd_partials_kernel", kernel, dim3((unsigned)B, (unsigned)N), SG_THREADS,
                    2 * SG_WS_NORM_SEG * NB_CT * sizeof(float), st, w.part, w.S, w.m, (const T *)dy,
                    x, (const T *)v, mean, rstd, gamma, beta, HW, C, G, seg, S, act, drop);
    SG_LAUNCH_CHECK("norm_bwd_partials_kernel");
    return SG_OK;
}

/* the dx kernel on grid (chunks, N), plus the rows of dgamma and dbeta blocks (nb_fin) */
template <typename T, int VEC>
static int na_bwd_apply(cudaStream_t st, int chunks, sg_cat dx, float *dvpart, const void *dy,
                        sg_cat x, const void *v, const float *mean, const float *rstd,
                        const float *gamma, const float *beta, const float2 *m, int HW, int C,
                        int G, int rows, int act, sg_drop drop, int accum, nb_fin fin) {
    void (*const norm_bwd_apply)(sg_cat, float *, const T *, sg_cat, const T *, const float *,
                                 const float *, const float *, const float *, const float2 *, int,
                                 int, int, int, int, sg_drop, int, nb_fin) =
        drop.p > 0.0f ? norm_bwd_apply_kernel<T, VEC, true> : norm_bwd_apply_kernel<T, VEC, false>;
    const int pb = (C + 31) / 32, prow = (pb + chunks - 1) / chunks;
    const dim3 grid((unsigned)chunks, (unsigned)(fin.N + prow));
    /* the staged x and dy (vectors): 2 SG_WS_NORM_ELEMS values at most, 64 KiB in fp32 */
    const int bytes = VEC > 1 ? 2 * rows * C * (int)sizeof(T) : 0;
    if (bytes > 0 && cuda_smem_attr(norm_bwd_apply, bytes, "norm_bwd_apply_kernel")) return SG_ERR;
    SG_LAUNCH(norm_bwd_apply, grid, SG_THREADS, (size_t)bytes, st, dx, dvpart, (const T *)dy, x,
              (const T *)v, mean, rstd, gamma, beta, m, HW, C, G, rows, act, drop, accum, fin);
    SG_LAUNCH_CHECK("norm_bwd_apply_kernel");
    return SG_OK;
}

template <typename T, int VEC>
static int na_partials(cudaStream_t st, float2 *part, int ld, sg_cat x, int N, int HW, int c0,
                       int c1) {
    const int seg = (int)sg_ws_norm_seg(HW), S = (int)sg_ws_norm_segs(HW);
    const int64_t items = (int64_t)N * S * ((c1 - c0) / VEC);
    void (*const kernel)(float2 *, int, sg_cat, int, int, int, int, int, int64_t) =
        norm_partials_kernel<T, VEC>;
    SG_LAUNCH_NAMED("norm_partials_kernel", kernel, sg_grid_for(items), SG_THREADS, 0, st, part, ld,
                    x, HW, c0, c1, seg, S, items);
    SG_LAUNCH_CHECK("norm_partials_kernel");
    return SG_OK;
}

/* the partials' vector width over channels [c0, C) of x: NA_PART_DISPATCH's vectors where
 * 16-byte ones would lie in one part, aligned, and cover [c0, C); else 1 */
static int na_part_vec(sg_cat x, int c0, int dt) {
    const int C = x.c[0] + x.c[1], V = dt == DT_BF16 ? 8 : 4;
    if (c0 % V || C % V || x.c[0] % V || (uintptr_t)x.p[0] % 16 ||
        (x.c[1] && (uintptr_t)x.p[1] % 16))
        return 1;
    return V;
}

int cuda_norm_partials(cudaStream_t st, float *part, int ld, sg_cat x, int N, int HW, int c0,
                       int dt) {
    const int C = x.c[0] + x.c[1];
    SG_ARG_CHECK(part != NULL && N > 0 && HW > 0 && c0 >= 0 && c0 <= C && C <= ld,
                 "cuda_norm_partials: channels %d.. of %d into partials of %d channels", c0, C, ld);
    if (c0 == C) return SG_OK;
    const int vec = na_part_vec(x, c0, dt);
    float2 *p = (float2 *)part;
#define NA_PARTIALS(T, V) na_partials<T, V>(st, p, ld, x, N, HW, c0, C)
    return NA_PART_DISPATCH(dt, vec, NA_PARTIALS);
#undef NA_PARTIALS
}

template <typename T, int VEC>
static int na_stats(cudaStream_t st, float *mean, float *rstd, float2 *part, sg_cat x,
                    const void *v, int N, int HW, int C, int G, int c0, float eps, int dt) {
    const int seg = (int)sg_ws_norm_seg(HW), S = (int)sg_ws_norm_segs(HW);
    const int64_t items = (int64_t)S * ((C - c0) / VEC);
    int64_t B = (items + SG_THREADS - 1) / SG_THREADS;
    if (B > 65535) B = 65535;
    void (*const kernel)(float *, float *, float2 *, sg_cat, const void *, int, int, int, int, int,
                         int, float, int) = norm_stats_kernel<T, VEC>;
    SG_LAUNCH_NAMED("norm_stats_kernel", kernel, dim3((unsigned)B, (unsigned)N), SG_THREADS, 0, st,
                    mean, rstd, part, x, v, HW, C, G, c0, seg, S, eps, dt);
    SG_LAUNCH_CHECK("norm_stats_kernel");
    return SG_OK;
}

/* The one-pass forward (norm_onepass_kernel): the switch (cuda_kernels.h), the tile's groups,
 * the launch */
static int g_norm_onepass;
static long g_norm_onepass_launches, g_norm_bwd_onepass_launches;
long cuda_norm_onepass_launches(void) {
    return g_norm_onepass_launches;
}
long cuda_norm_bwd_onepass_launches(void) {
    return g_norm_bwd_onepass_launches;
}
void sg_cuda_set_norm_onepass(int mode) {
    g_norm_onepass = mode & (SG_NORM_ONEPASS_FWD | SG_NORM_ONEPASS_BWD);
}
int sg_cuda_norm_onepass(void) {
    return g_norm_onepass;
}

/* the tile's groups of both one-pass kernels: the fewest whose rows reach NA1_ROW_BYTES, while
 * the copies (bwd: x and dy) fit in NA1_SLAB_MAX; then, where the N samples' tiles make a grid of
 * fewer than NA1_MIN_BLOCKS blocks (a small batch: e.g. unet_cifar's 32x32 forward at batch 8,
 * 32 blocks of 8 groups), fewer groups a tile, down to one 16-byte vector a row, until the grid
 * has them. A function of the shapes only (132 is a constant, not the device's SM count), so
 * every device runs the same tiles; the bits do not depend on the tile. */
#define NA1_MIN_BLOCKS (2 * 132)
static int na1_groups(int N, int HW, int C, int G, int dt, int bwd) {
    if (N <= 0 || HW <= 0 || G <= 0 || C <= 0 || C % G || (dt != DT_BF16 && dt != DT_F32)) return 0;
    const int es = dt == DT_BF16 ? 2 : 4, V = 16 / es, cg = C / G, copies = bwd ? 2 : 1;
    int gpb = 0;
    for (int d = 1; d <= G; d++) {
        if (G % d || d * cg % V) continue;
        if ((int64_t)HW * d * cg * es * copies > NA1_SLAB_MAX) break;
        gpb = d;
        if (d * cg * es >= NA1_ROW_BYTES) break;
    }
    /* rows of at least a 32-byte sector, unless the tile is the whole sample */
    if (!gpb || (gpb * cg * es < 32 && gpb != G)) return 0;
    for (int d = gpb - 1; d >= 1 && (int64_t)N * (G / gpb) < NA1_MIN_BLOCKS; d--)
        if (G % d == 0 && d * cg % V == 0) gpb = d;
    const int seg = (int)sg_ws_norm_seg(HW), S = (int)sg_ws_norm_segs(HW);
    const int bytes =
        bwd ? nb1_layout_of(HW, C, gpb * cg, gpb, S, (int)sg_ws_norm_rows(HW, C), es).bytes
            : na1_layout_of(HW, gpb * cg, gpb, S, seg, es).bytes;
    if (bytes > 48 * 1024 && bytes > cuda_smem_optin()) return 0;
    return gpb;
}
int cuda_norm_act_onepass_groups(int N, int HW, int C, int G, int dt) {
    return na1_groups(N, HW, C, G, dt, 0);
}
int cuda_norm_act_bwd_onepass_groups(int N, int HW, int C, int G, int dt) {
    return na1_groups(N, HW, C, G, dt, 1);
}

template <typename T, int VEC>
static int na_onepass(cudaStream_t st, void *y, float *mean, float *rstd, sg_cat x, const void *v,
                      const float *gamma, const float *beta, int N, int HW, int C, int G, int gpb,
                      float eps, int act, sg_drop drop) {
    const int seg = (int)sg_ws_norm_seg(HW), S = (int)sg_ws_norm_segs(HW);
    const int bytes = na1_layout_of(HW, gpb * (C / G), gpb, S, seg, (int)sizeof(T)).bytes;
    void (*const kernel)(T *, float *, float *, sg_cat, const T *, const float *, const float *,
                         int, int, int, int, int, int, float, int, sg_drop) =
        drop.p > 0.0f ? norm_onepass_kernel<T, VEC, true> : norm_onepass_kernel<T, VEC, false>;
    if (bytes > 0 && cuda_smem_attr(kernel, bytes, "norm_onepass_kernel")) return SG_ERR;
    SG_LAUNCH_NAMED("norm_onepass_kernel", kernel, dim3((unsigned)(G / gpb), (unsigned)N),
                    SG_THREADS, (size_t)bytes, st, (T *)y, mean, rstd, x, (const T *)v, gamma, beta,
                    HW, C, G, gpb, seg, S, eps, act, drop);
    SG_LAUNCH_CHECK("norm_onepass_kernel");
    g_norm_onepass_launches++;
    return SG_OK;
}

/* Pass 1: the partials of channels [c_done, C) (those before c_done are in ws already: the
 * convolution before wrote them, graph/backend_cuda_run.c), then the merge: one launch
 * (norm_stats_kernel) where there are partials to compute, else the merge alone. */
static int na_stats_pass(cudaStream_t st, float *mean, float *rstd, sg_cat x, const void *v, int N,
                         int HW, int C, int G, float eps, int dt, void *ws, int c_done) {
    if (c_done < C) { /* one launch (norm_stats_kernel) */
        const int vec = na_part_vec(x, c_done, dt);
        float2 *p = (float2 *)ws;
#define NA_STATS(T, V) na_stats<T, V>(st, mean, rstd, p, x, v, N, HW, C, G, c_done, eps, dt)
        return NA_PART_DISPATCH(dt, vec, NA_STATS);
#undef NA_STATS
    }
    if (cuda_norm_partials(st, (float *)ws, C, x, N, HW, c_done, dt)) return SG_ERR;
    const dim3 grid((unsigned)((G + NA_GROUPS(G) - 1) / NA_GROUPS(G)), (unsigned)N);
    SG_LAUNCH(norm_stats_final_kernel, grid, SG_THREADS, 0, st, mean, rstd, (const float2 *)ws, v,
              N, HW, C, G, (int)sg_ws_norm_seg(HW), (int)sg_ws_norm_segs(HW), eps, dt);
    SG_LAUNCH_CHECK("norm_stats_final_kernel");
    return SG_OK;
}

int cuda_norm_act_fwd(cudaStream_t st, void *y, float *mean, float *rstd, sg_cat x, const void *v,
                      const float *gamma, const float *beta, int N, int HW, int C, int G, float eps,
                      int act, sg_drop drop, int dt, void *ws, int64_t ws_bytes, int c_done) {
    const char *fn = "cuda_norm_act_fwd";
    if (na_check(fn, x, N, HW, C, G, act, drop, dt)) return SG_ERR;
    SG_WS_CHECK(sg_ws_norm_act_fwd(N, HW, C, G), ws_bytes, fn);
    SG_ARG_CHECK(c_done >= 0 && c_done <= C, "%s: %d channels' partials done of %d", fn, c_done, C);
    if ((g_norm_onepass & SG_NORM_ONEPASS_FWD) && !c_done) {
        const void *p[4] = {x.p[0], x.c[1] ? x.p[1] : NULL, v, y};
        const int gpb = cuda_norm_act_onepass_groups(N, HW, C, G, dt);
        if (gpb && na_vec(dt, C, x, p, 4) > 1)
            return dt == DT_BF16 ? na_onepass<uint16_t, 8>(st, y, mean, rstd, x, v, gamma, beta, N,
                                                           HW, C, G, gpb, eps, act, drop)
                                 : na_onepass<float, 4>(st, y, mean, rstd, x, v, gamma, beta, N, HW,
                                                        C, G, gpb, eps, act, drop);
    }
    if (na_stats_pass(st, mean, rstd, x, v, N, HW, C, G, eps, dt, ws, c_done)) return SG_ERR;
    return cuda_norm_act_apply(st, y, x, v, mean, rstd, gamma, beta, N, HW, C, G, act, drop, dt);
}

int cuda_norm_act_stats(cudaStream_t st, float *mean, float *rstd, sg_cat x, const void *v, int N,
                        int HW, int C, int G, float eps, int dt, void *ws, int64_t ws_bytes,
                        int c_done) {
    const char *fn = "cuda_norm_act_stats";
    const sg_drop none = {0.0f, 0, NULL, NULL, 0};
    if (na_check(fn, x, N, HW, C, G, SG_ACT_NONE, none, dt)) return SG_ERR;
    SG_WS_CHECK(sg_ws_norm_act_fwd(N, HW, C, G), ws_bytes, fn);
    SG_ARG_CHECK(c_done >= 0 && c_done <= C, "%s: %d channels' partials done of %d", fn, c_done, C);
    return na_stats_pass(st, mean, rstd, x, v, N, HW, C, G, eps, dt, ws, c_done);
}

int cuda_norm_act_apply(cudaStream_t st, void *y, sg_cat x, const void *v, const float *mean,
                        const float *rstd, const float *gamma, const float *beta, int N, int HW,
                        int C, int G, int act, sg_drop drop, int dt) {
    if (na_check("cuda_norm_act_apply", x, N, HW, C, G, act, drop, dt)) return SG_ERR;
    const int rows = (int)sg_ws_norm_rows(HW, C), chunks = (int)sg_ws_norm_chunks(HW, C);
    const void *p[4] = {x.p[0], x.c[1] ? x.p[1] : NULL, v, y};
    const int vec = na_vec(dt, C, x, p, 4);
    const dim3 grid((unsigned)chunks, (unsigned)N);
#define NA_APPLY(T, V)                                                                             \
    na_apply<T, V>(st, grid, y, x, v, mean, rstd, gamma, beta, HW, C, G, rows, act, drop)
    return NA_DISPATCH(dt, vec, NA_APPLY);
#undef NA_APPLY
}

int cuda_norm_bwd_partials(cudaStream_t st, const sg_norm_bwd_fuse *nb, const void *dy, int N,
                           int HW, int C, int dt) {
    const char *fn = "cuda_norm_bwd_partials";
    SG_ARG_CHECK(nb && nb->part != NULL && dy != NULL, "%s: no partials or dy", fn);
    if (na_check(fn, nb->x, N, HW, C, nb->G, nb->act, nb->drop, dt)) return SG_ERR;
    const void *p[4] = {nb->x.p[0], nb->x.c[1] ? nb->x.p[1] : NULL, nb->v, dy};
    const int vec = na_vec(dt, C, nb->x, p, 4);
    const nb_ws w = nb_ws_of(nb->part, N, HW, C, nb->G, 0);
#define NA_PARTIALS(T, V)                                                                          \
    na_bwd_partials<T, V>(st, w, dy, nb->x, nb->v, nb->mean, nb->rstd, nb->gamma, nb->beta, N, HW, \
                          C, nb->G, nb->act, nb->drop)
    return NA_DISPATCH(dt, vec, NA_PARTIALS);
#undef NA_PARTIALS
}

int cuda_norm_bwd_terms(cudaStream_t st, const sg_norm_bwd_fuse *nb, int N, int HW, int C) {
    const char *fn = "cuda_norm_bwd_terms";
    SG_ARG_CHECK(nb && nb->part != NULL && nb->gamma != NULL, "%s: no partials or gamma", fn);
    SG_ARG_CHECK(N > 0 && N <= 65535 && HW > 0 && nb->G > 0 && C % nb->G == 0,
                 "%s: bad shape (N %d, HW %d, C %d, G %d)", fn, N, HW, C, nb->G);
    const nb_ws w = nb_ws_of(nb->part, N, HW, C, nb->G, 0);
    const int gb = NA_GROUPS(nb->G);
    SG_LAUNCH(norm_bwd_terms_kernel, dim3((unsigned)((nb->G + gb - 1) / gb), (unsigned)N),
              SG_THREADS, 0, st, w.S, w.m, (const float2 *)w.part, nb->gamma, HW, C, nb->G,
              (int)sg_ws_norm_segs(HW));
    SG_LAUNCH_CHECK("norm_bwd_terms_kernel");
    return SG_OK;
}

template <typename T, int VEC>
static int nb_onepass(cudaStream_t st, sg_cat dx, float2 *S, float *dvpart, const void *dy,
                      sg_cat x, const void *v, const float *mean, const float *rstd,
                      const float *gamma, const float *beta, int N, int HW, int C, int G, int gpb,
                      int act, sg_drop drop, int accum) {
    const int seg = (int)sg_ws_norm_seg(HW), segs = (int)sg_ws_norm_segs(HW);
    const int rows = (int)sg_ws_norm_rows(HW, C);
    const int bytes = nb1_layout_of(HW, C, gpb * (C / G), gpb, segs, rows, (int)sizeof(T)).bytes;
    void (*const kernel)(sg_cat, float2 *, float *, const T *, sg_cat, const T *, const float *,
                         const float *, const float *, const float *, int, int, int, int, int, int,
                         int, int, sg_drop, int) = drop.p > 0.0f
                                                       ? norm_bwd_onepass_kernel<T, VEC, true>
                                                       : norm_bwd_onepass_kernel<T, VEC, false>;
    if (bytes > 0 && cuda_smem_attr(kernel, bytes, "norm_bwd_onepass_kernel")) return SG_ERR;
    SG_LAUNCH_NAMED("norm_bwd_onepass_kernel", kernel, dim3((unsigned)(G / gpb), (unsigned)N),
                    SG_THREADS, (size_t)bytes, st, dx, S, dvpart, (const T *)dy, x, (const T *)v,
                    mean, rstd, gamma, beta, HW, C, G, gpb, seg, segs, rows, act, drop, accum);
    SG_LAUNCH_CHECK("norm_bwd_onepass_kernel");
    g_norm_bwd_onepass_launches++;
    return SG_OK;
}

int cuda_norm_act_bwd(cudaStream_t st, sg_cat dx, void *dv, float *dgamma, float *dbeta,
                      const void *dy, sg_cat x, const void *v, const float *mean, const float *rstd,
                      const float *gamma, const float *beta, int N, int HW, int C, int G, int act,
                      sg_drop drop, int dt, int accum_dx, int accum_dv, int accum_param, void *ws,
                      int64_t ws_bytes, int part_done) {
    const char *fn = "cuda_norm_act_bwd";
    if (na_check(fn, x, N, HW, C, G, act, drop, dt)) return SG_ERR;
    SG_ARG_CHECK(dx.c[0] == x.c[0] && dx.c[1] == x.c[1] && dx.p[0] != NULL &&
                     (dx.c[1] == 0 || dx.p[1] != NULL),
                 "%s: dx must be split like x", fn);
    SG_ARG_CHECK(!dv || v, "%s: dv needs v", fn);
    SG_WS_CHECK(sg_ws_norm_act_bwd(N, HW, C, G, v != NULL), ws_bytes, fn);
    const int rows = (int)sg_ws_norm_rows(HW, C), chunks = (int)sg_ws_norm_chunks(HW, C);
    const void *p[6] = {x.p[0], x.c[1] ? x.p[1] : NULL, v, dy, dx.p[0], dx.c[1] ? dx.p[1] : NULL};
    const int vec = na_vec(dt, C, x, p, 6);
    /* the dx kernel's grid rows: the samples', then dgamma's and dbeta's (nb_fin) */
    SG_ARG_CHECK(N + ((C + 31) / 32 + chunks - 1) / chunks <= 65535,
                 "%s: %d samples of %d channels: too many for the grid's y", fn, N, C);
    /* the workspace (nb_ws_of): the partials and the terms first, where the data gradient before
     * may have left them (part_done) */
    const nb_ws w = nb_ws_of(ws, N, HW, C, G, dv != NULL);
    const int gpb = (g_norm_onepass & SG_NORM_ONEPASS_BWD) && !part_done && vec > 1
                        ? cuda_norm_act_bwd_onepass_groups(N, HW, C, G, dt)
                        : 0;
    if (gpb) {
        const int e =
            dt == DT_BF16
                ? nb_onepass<uint16_t, 8>(st, dx, w.S, w.dvpart, dy, x, v, mean, rstd, gamma, beta,
                                          N, HW, C, G, gpb, act, drop, accum_dx)
                : nb_onepass<float, 4>(st, dx, w.S, w.dvpart, dy, x, v, mean, rstd, gamma, beta, N,
                                       HW, C, G, gpb, act, drop, accum_dx);
        if (e) return SG_ERR;
    } else {
        if (!part_done) {
            const sg_norm_bwd_fuse nb = {.x = x,
                                         .mean = mean,
                                         .rstd = rstd,
                                         .gamma = gamma,
                                         .beta = beta,
                                         .v = v,
                                         .part = (float *)ws,
                                         .drop = drop,
                                         .G = G,
                                         .act = act,
                                         .seg = 0,
                                         .epilogue = 0};
            if (cuda_norm_bwd_partials(st, &nb, dy, N, HW, C, dt)) return SG_ERR;
        }
        /* dx, and in the same launch dgamma, dbeta and dv (nb_fin) */
        const nb_fin fin = {dgamma, dbeta, w.S, dv, N, dt, accum_param, accum_dv};
#define NA_BWD_APPLY(T, V)                                                                         \
    na_bwd_apply<T, V>(st, chunks, dx, w.dvpart, dy, x, v, mean, rstd, gamma, beta, w.m, HW, C, G, \
                       rows, act, drop, accum_dx, fin)
        return NA_PART_DISPATCH(dt, vec, NA_BWD_APPLY);
#undef NA_BWD_APPLY
    }
    const unsigned fin = (unsigned)((C + 31) / 32) + (dv ? (unsigned)N : 0u);
    SG_LAUNCH(norm_bwd_finish_kernel, fin, SG_THREADS, 0, st, dgamma, dbeta, dv,
              (const float2 *)w.S, (const float *)w.dvpart, N, C, chunks, dt, accum_param,
              accum_dv);
    SG_LAUNCH_CHECK("norm_bwd_finish_kernel");
    return SG_OK;
}
