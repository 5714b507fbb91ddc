/* sg_workspace.h — how many bytes of scratch each CUDA kernel launcher needs.
 *
 * The CUDA launchers in kernels/cuda never allocate: every one that needs scratch (per-block
 * partial sums, the fp32 output tile of a bf16 GEMM, an attention score block)
 * takes a `void *ws, int64_t ws_bytes` pair pointing into the arena's workspace region. The
 * planner sizes that region with the functions below (the maximum over the ops of a plan),
 * and the launchers carve their scratch with the same functions, so the two never disagree.
 * A launcher given fewer bytes than its rule asks for fails with SG_ERR before launching.
 *
 * Rules every function follows:
 * - the result is in bytes, a multiple of SG_WS_ALIGN (0 when the op needs no scratch);
 * - `ws` itself must be SG_WS_ALIGN-aligned (arena offsets are);
 * - it depends only on the shapes, the activation dtype and whether an optional output
 *   exists, never on the device: the same plan gives the same layout everywhere;
 * - the chunking constants below also fix the order of every reduction, so they are part of
 *   the numerics: changing one changes bits (never correctness).
 *
 * Plain C, no CUDA types: the planner (host C11) includes it, and so do the .cu files.
 */
#ifndef SG_WORKSPACE_H
#define SG_WORKSPACE_H

#include <stdint.h>

#include "common/sg_base.h"

#define SG_WS_ALIGN 256

/* Column sums (bias gradients, add_nc backward): rows are cut into chunks of this many rows;
 * each chunk's partial sum per column is stored, then the chunks are summed in order. */
#define SG_WS_COLSUM_ROWS 512

/* 3x3 (and strided 1x1) conv weight gradient: the P = N*Ho*Wo output pixels are cut into
 * ceil(P / SG_WS_WGRAD_PIX) chunks, at most SG_WS_WGRAD_MAX_CHUNKS; each chunk writes a full
 * fp32 copy of dw, and the copies are summed in chunk order. Where that makes fewer than
 * SG_WS_WGRAD_MIN_CHUNKS, more, as long as a chunk keeps SG_WS_WGRAD_MIN_PIX pixels and the
 * copies of dw stay within SG_WS_WGRAD_SPREAD_BYTES: a small P (a low resolution, a small batch)
 * in one or two chunks leaves most of a GPU idle. (The second GPU session, unet_cifar at batch
 * 128: the own weight gradients ran at 40 TFLOP/s at 4x4, P = 2048 in one chunk, and 76 at 8x8,
 * two chunks, against 153 at 16x16, eight chunks of the same channels.) The bound on the bytes
 * leaves a wide layer at a low resolution as it was, and caps what the rule adds to the
 * workspace: unet_cifar's at batch 128 stays 104.2 MiB (its 16x16 layers of 512 input channels
 * already take 8 x 4.7 MB), at batch 8 it grows from 38.0 to 63.5 MiB, unet_adm64's at batch 32
 * from 45.6 (fp32) and 48.0 (bf16) to 63.5 (`plan`, 2026-12-02). */
#define SG_WS_WGRAD_PIX 4096
#define SG_WS_WGRAD_MAX_CHUNKS 32
/* 7, not 8: unet_cifar's 256 -> 256 layers at 4x4 and 8x8 then make 504 mma.sync blocks of
 * 64 x 128 (four an SM: 528 places) and 126 wgmma blocks of 128 x 256 (one an SM), one wave on
 * 132 SMs; 8 chunks would make 288 blocks of 128 x 128 (two an SM: 264 places) and 144, a few
 * in a second wave on both (the tensor cores' own choice, cuda_conv2d_tc_wgrad_chunks, takes
 * at most this count and may take fewer for the same reason) */
#define SG_WS_WGRAD_MIN_CHUNKS 7
#define SG_WS_WGRAD_MIN_PIX 256
#define SG_WS_WGRAD_SPREAD_BYTES ((int64_t)32 << 20)

/* cuBLAS GEMM layers in bf16: the product goes to an fp32 tile of at most this many elements
 * (rows at a time), then one kernel adds the bias and rounds to bf16 once. */
#define SG_WS_GEMM_OUT_ELEMS (4 << 20)

/* Full reductions to one scalar (sum of squares, MSE): at most SG_WS_SUM_MAX_BLOCKS blocks,
 * one per SG_WS_SUM_PER_BLOCK values, each writing one double partial. */
#define SG_WS_SUM_MAX_BLOCKS 1024
#define SG_WS_SUM_PER_BLOCK 2048

static inline int64_t sg_ws_align(int64_t bytes) {
    return (bytes + SG_WS_ALIGN - 1) / SG_WS_ALIGN * SG_WS_ALIGN;
}

/* ---- building blocks (also used by the launchers to carve their scratch) ---- */

/* Number of row chunks of a column sum over R rows. */
static inline int64_t sg_ws_colsum_chunks(int64_t R) {
    int64_t c = (R + SG_WS_COLSUM_ROWS - 1) / SG_WS_COLSUM_ROWS;
    return c < 1 ? 1 : c;
}
/* nb independent column sums of R rows x C columns: fp32 partials [nb][chunks][C]. */
static inline int64_t sg_ws_colsum(int64_t nb, int64_t R, int64_t C) {
    return sg_ws_align(nb * sg_ws_colsum_chunks(R) * C * 4);
}

/* Blocks of a scalar reduction over n values; its scratch holds one double per block. */
static inline int64_t sg_ws_sum_blocks(int64_t n) {
    int64_t b = (n + SG_WS_SUM_PER_BLOCK - 1) / SG_WS_SUM_PER_BLOCK;
    return b < 1 ? 1 : b > SG_WS_SUM_MAX_BLOCKS ? SG_WS_SUM_MAX_BLOCKS : b;
}
static inline int64_t sg_ws_sum(int64_t n) {
    return sg_ws_align(sg_ws_sum_blocks(n) * 8);
}

/* Weight-gradient chunks over P output pixels of a gradient of nw fp32 values (see
 * SG_WS_WGRAD_PIX). */
static inline int64_t sg_ws_wgrad_chunks(int64_t P, int64_t nw) {
    int64_t c = (P + SG_WS_WGRAD_PIX - 1) / SG_WS_WGRAD_PIX;
    if (c < SG_WS_WGRAD_MIN_CHUNKS) {
        int64_t m = (P + SG_WS_WGRAD_MIN_PIX - 1) / SG_WS_WGRAD_MIN_PIX;
        const int64_t fit = SG_WS_WGRAD_SPREAD_BYTES / (4 * (nw > 0 ? nw : 1));
        if (m > SG_WS_WGRAD_MIN_CHUNKS) m = SG_WS_WGRAD_MIN_CHUNKS;
        if (m > fit) m = fit;
        if (m > c) c = m;
    }
    return c < 1 ? 1 : c > SG_WS_WGRAD_MAX_CHUNKS ? SG_WS_WGRAD_MAX_CHUNKS : c;
}

/* The norm_act kernels (kernels/cuda/norm.cu): each sample's HW rows are cut into chunks of
 * sg_ws_norm_rows(HW, C) rows, about SG_WS_NORM_ELEMS values each; one block per (chunk,
 * sample) reduces its chunk to per-chunk partials, which a second pass merges in chunk order. */
#define SG_WS_NORM_ELEMS 8192

/* Rows per chunk and chunks per sample of a norm_act pass over x[N][HW][C]. */
static inline int64_t sg_ws_norm_rows(int64_t HW, int64_t C) {
    int64_t r = SG_WS_NORM_ELEMS / (C > 0 ? C : 1);
    if (r < 1) r = 1;
    return r < HW ? r : HW;
}
static inline int64_t sg_ws_norm_chunks(int64_t HW, int64_t C) {
    int64_t r = sg_ws_norm_rows(HW, C);
    return r > 0 ? (HW + r - 1) / r : 1;
}

/* Rows of one fp32 output tile of a bf16 GEMM with bias (see SG_WS_GEMM_OUT_ELEMS). */
static inline int64_t sg_ws_gemm_tile_rows(int64_t rows, int64_t Co) {
    int64_t r = SG_WS_GEMM_OUT_ELEMS / (Co > 0 ? Co : 1);
    if (r < 1) r = 1;
    return r < rows ? r : rows;
}

/* GEMM layer y[rows][Co] = x[rows][Ci] w[Co][Ci]^T (+ b) through cuBLAS (linear layers and
 * 1x1 stride-1 convs), w in the activations' dtype (bf16: the plan's weight copy, so nothing
 * is converted here). fp32: no scratch (the GEMM writes y, a kernel adds the bias). bf16: an
 * fp32 output tile, so that the two halves of a concatenated input and the bias are summed in
 * fp32 and y is rounded once. */
static inline int64_t sg_ws_gemm_fwd(int64_t rows, int64_t Ci, int64_t Co, int dt) {
    (void)Ci;
    if (dt != DT_BF16) return 0;
    return sg_ws_align(sg_ws_gemm_tile_rows(rows, Co) * Co * 4);
}
/* dx[rows][Ci] = dy[rows][Co] w: no scratch (w comes in dy's dtype). */
static inline int64_t sg_ws_gemm_bwd_data(int64_t rows, int64_t Ci, int64_t Co, int dt) {
    (void)rows, (void)Ci, (void)Co, (void)dt;
    return 0;
}
/* dw = dy^T x needs nothing; db is a column sum of dy. */
static inline int64_t sg_ws_gemm_bwd_weight(int64_t rows, int64_t Ci, int64_t Co, int has_db) {
    (void)Ci;
    return has_db ? sg_ws_colsum(1, rows, Co) : 0;
}

/* ---- one function per launcher that takes a workspace ---- */

static inline int sg_ws_conv_out(int H, int K, int S) {
    return (H + 2 * (K / 2) - K) / S + 1;
}

/* The conv launchers run a bf16 convolution on tensor cores (kernels/cuda/conv_tc.cu) when
 * cuda_conv2d_path says so (the channel counts, cuda_kernels.h), else on the CUDA-core
 * implicit GEMM, or cuBLAS for 1x1 stride 1. The rules below cover whichever path the launcher
 * takes: they see the dtype and the shape, not the channel split of a concatenation. */

/* Weight gradient by chunks (the CUDA-core and the tensor-core implicit GEMM): chunks x fp32
 * [Co][K][K][Ci] partials over P output pixels, then the db column sum (when db is wanted). */
static inline int64_t sg_ws_conv_wgrad_chunked(int64_t P, int Ci, int Co, int K, int has_db) {
    const int64_t nw = (int64_t)Co * K * K * Ci;
    int64_t b = sg_ws_align(sg_ws_wgrad_chunks(P, nw) * nw * 4);
    if (has_db) b += sg_ws_colsum(1, P, Co);
    return b;
}

/* cuda_conv2d_fwd: 1x1 stride 1 off the tensor cores is a cuBLAS GEMM (sg_ws_gemm_fwd); the
 * CUDA-core and the tensor-core implicit GEMMs need nothing (the weights come in bf16). */
static inline int64_t sg_ws_conv2d_fwd(int N, int H, int W, int Ci, int Co, int K, int S, int dt) {
    return K == 1 && S == 1 ? sg_ws_gemm_fwd((int64_t)N * H * W, Ci, Co, dt) : 0;
}
/* cuda_conv2d_bwd_data: likewise (the GEMM needs nothing either). */
static inline int64_t sg_ws_conv2d_bwd_data(int N, int H, int W, int Ci, int Co, int K, int S,
                                            int dt) {
    return K == 1 && S == 1 ? sg_ws_gemm_bwd_data((int64_t)N * H * W, Ci, Co, dt) : 0;
}
/* cuda_conv2d_bwd_weight (dt: the activations'): the chunked partials of either implicit GEMM
 * (1x1 stride 1 in bf16 included: the tensor cores), or for 1x1 stride 1 on cuBLAS the db
 * column sum alone. */
static inline int64_t sg_ws_conv2d_bwd_weight(int N, int H, int W, int Ci, int Co, int K, int S,
                                              int dt, int has_db) {
    int64_t P = (int64_t)N * sg_ws_conv_out(H, K, S) * sg_ws_conv_out(W, K, S);
    if (K == 1 && S == 1 && dt != DT_BF16) return sg_ws_gemm_bwd_weight(P, Ci, Co, has_db);
    return sg_ws_conv_wgrad_chunked(P, Ci, Co, K, has_db);
}

/* cuda_upconv2d_fwd / _bwd_data: the folded weights [4][Co][2][2][Ci] (bf16 on the
 * tensor-core path, fp32 on the CUDA-core one: the fp32 size covers both). */
static inline int64_t sg_ws_upconv2d_fold(int Ci, int Co) {
    return sg_ws_align((int64_t)16 * Co * Ci * 4);
}
/* cuda_upconv2d_bwd_weight: the folded gradient by chunks of the N*H*W low-res pixels, fp32
 * [chunks][4][Co][2][2][Ci] (chunks = sg_ws_wgrad_chunks(N*H*W, 16*Co*Ci)), then the db column sum
 * over the 4 N H W output pixels. */
static inline int64_t sg_ws_upconv2d_bwd_weight(int N, int H, int W, int Ci, int Co, int has_db) {
    const int64_t P = (int64_t)N * H * W;
    const int64_t nw = (int64_t)16 * Co * Ci;
    int64_t b = sg_ws_align(sg_ws_wgrad_chunks(P, nw) * nw * 4);
    if (has_db) b += sg_ws_colsum(1, 4 * P, Co);
    return b;
}

/* cuda_linear_*: x[N][K], w[M][K]. */
static inline int64_t sg_ws_linear_fwd(int N, int K, int M, int dt) {
    return sg_ws_gemm_fwd(N, K, M, dt);
}
static inline int64_t sg_ws_linear_bwd_data(int N, int K, int M, int dt) {
    return sg_ws_gemm_bwd_data(N, K, M, dt);
}
/* cuda_linear_group_bwd_data (kernels/cuda/cuda_kernels.h): its reduction over the layers'
 * outputs, `chunks` chunks of 32 (each layer's ceil(M_j / 32), in layer order), cut into
 * slices of whole chunks so that the (32 x 32 tiles of dx[N][K]) x slices blocks come near
 * 1024: at most SG_WS_LG_SLICES, at most one a chunk, at least 1. Each slice's fp32 partial
 * dx lies in the workspace when there are two or more: sg_ws_linear_group_bwd_data bytes, the
 * most any group on x[N][K] takes (a data pass node's workspace rule covers it, so a group of
 * such nodes always has it). */
#define SG_WS_LG_SLICES 16
static inline int sg_ws_lg_slices(int N, int K, int64_t chunks) {
    const int64_t tiles = (int64_t)((N + 31) / 32) * ((K + 31) / 32);
    int64_t s = (1024 + tiles - 1) / tiles;
    if (s > SG_WS_LG_SLICES) s = SG_WS_LG_SLICES;
    if (s > chunks) s = chunks;
    return s < 1 ? 1 : (int)s;
}
static inline int64_t sg_ws_linear_group_bwd_data(int N, int K) {
    return sg_ws_align((int64_t)sg_ws_lg_slices(N, K, SG_WS_LG_SLICES) * N * K * 4);
}
static inline int64_t sg_ws_linear_bwd_weight(int N, int K, int M, int has_db) {
    return sg_ws_gemm_bwd_weight(N, K, M, has_db);
}

/* cuda_group_norm_bwd: per-(sample, channel) partial sums of dy*xhat and dy, fp32 [N][C]
 * each; the final pass sums them over n in order. */
static inline int64_t sg_ws_group_norm_bwd(int N, int C) {
    return 2 * sg_ws_align((int64_t)N * C * 4);
}

/* The statistics of the norm_act ops (kernels/cuda/norm.cu, "the statistics' partials"): each
 * sample's HW rows are cut into segments of sg_ws_norm_seg(HW) rows (64, or the whole sample when
 * it has fewer), and each (sample, segment, channel) has ONE canonical partial (mean, M2): a
 * sequential Welford pass over the segment's rows in increasing order. The segments are what a
 * convolution's output tile covers (64 or 128 pixels: whole segments when HW is a multiple of
 * 64 or divides 64), so the convolution before a normalisation can compute its partials in its
 * epilogue with the same bits as the normalisation's own pass. */
#define SG_WS_NORM_SEG 64
static inline int64_t sg_ws_norm_seg(int64_t HW) {
    return HW < SG_WS_NORM_SEG ? (HW > 0 ? HW : 1) : SG_WS_NORM_SEG;
}
static inline int64_t sg_ws_norm_segs(int64_t HW) {
    return (HW + sg_ws_norm_seg(HW) - 1) / sg_ws_norm_seg(HW);
}
/* the partials, float2 (mean, M2) [N][segs][C] */
static inline int64_t sg_ws_norm_partials(int64_t N, int64_t HW, int64_t C) {
    return sg_ws_align(N * sg_ws_norm_segs(HW) * C * 8);
}
/* cuda_norm_act_fwd / _stats: the partials of every channel (the statistics merge them: per
 * segment the group's channels, then the segments in order). cuda_norm_act_apply needs
 * nothing. */
static inline int64_t sg_ws_norm_act_fwd(int N, int HW, int C, int G) {
    (void)G;
    return sg_ws_norm_partials(N, HW, C);
}
/* cuda_norm_act_bwd: the backward partials, per (sample, segment, channel) the segment's sums of
 * dz and dz xhat (float2, sg_ws_norm_partials: first, where the data gradient before may leave
 * them); their sums over the segments per (sample, channel) (float2); the two group means of
 * the dx formula per (sample, group) (float2); with the time-embedding add, per (sample, chunk,
 * channel) the chunk's sum of dx (fp32), summed over the chunks into dv. */
static inline int64_t sg_ws_norm_act_bwd(int N, int HW, int C, int G, int has_v) {
    int64_t chunks = sg_ws_norm_chunks(HW, C);
    int64_t b = sg_ws_norm_partials(N, HW, C) + sg_ws_align((int64_t)N * C * 8) +
                sg_ws_align((int64_t)N * G * 8);
    if (has_v) b += sg_ws_align((int64_t)N * chunks * C * 4);
    return b;
}

/* cuda_add_nc_bwd: N column sums of HW rows x C. */
static inline int64_t sg_ws_add_nc_bwd(int N, int HW, int C) {
    return sg_ws_colsum(N, HW, C);
}

/* cuda_attention_fwd: bf16 needs a bf16 copy of one head's P [N][L][L] for the P v GEMM. */
static inline int64_t sg_ws_attention_fwd(int N, int L, int C, int heads, int dt) {
    (void)C, (void)heads;
    return dt == DT_BF16 ? sg_ws_align((int64_t)N * L * L * 2) : 0;
}
/* cuda_attention_bwd: one head's dP/dS [N][L][L] in fp32; bf16 adds bf16 copies of P and dS.
 * The fused engine's (cuda_attention_fused_bwd), bf16: one head's dS and P in bf16 with rows of
 * L8 = L rounded up to 8 (16-byte copies), [N][L][L8] each; no more than the GEMM path's for
 * L >= 4. fp32: each row's sum of P dP, [N][heads][L] fp32: no more than the GEMM path's for
 * heads <= L. */
static inline int64_t sg_ws_attention_bwd(int N, int L, int C, int heads, int dt) {
    (void)C;
    int64_t b = sg_ws_align((int64_t)N * L * L * 4);
    const int64_t rowdot = sg_ws_align((int64_t)N * heads * L * 4);
    if (dt == DT_F32 && rowdot > b) b = rowdot;
    if (dt == DT_BF16) {
        b += 2 * sg_ws_align((int64_t)N * L * L * 2);
        const int64_t fused = 2 * sg_ws_align((int64_t)N * L * ((L + 7) & ~7) * 2);
        if (fused > b) b = fused;
    }
    return b;
}

/* cuda_mse_fwd and cuda_sumsq: one double partial per block. */
static inline int64_t sg_ws_mse_fwd(int64_t n) {
    return sg_ws_sum(n);
}
static inline int64_t sg_ws_sumsq(int64_t n) {
    return sg_ws_sum(n);
}

#endif
