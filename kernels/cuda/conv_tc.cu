/* conv_tc.cu — the bf16 convolutions on tensor cores: implicit GEMMs on mma.sync.m16n8k16 (bf16
 * operands, fp32 accumulation) fed by ldmatrix from a cp.async multistage pipeline (sm_80 and
 * later; built for sm_90). conv.cu's launchers send a bf16 convolution here when
 * cuda_conv2d_path says so (every part of the concatenation and Co multiples of 8, 16-byte
 * aligned operands); fp32 convolutions never come here (no TF32).
 *
 * Shapes as conv.cu: x[N,H,W,Ci] (sg_cat: channel c from p[0] when c < c[0], else from p[1]),
 * w[Co][K][K][Ci] bf16 (the plan's bf16 copy of the weights, written by the optimizer's pass
 * and on every upload of the parameters: nothing here converts them), y[N,Ho,Wo,Co], K in
 * {1,3}, S in {1,2}, zero padding `pad` at the top/left.
 *
 * The three GEMMs (tap = kh*K + kw, channels innermost in the reduction):
 *   forward   M = P = N*Ho*Wo pixels, N = Co, reduction over (tap, part, ci):
 *             A[p][(tap,ci)] = x[pixel(p, tap)][ci] (implicit im2col), B[co][(tap,ci)] = w.
 *   bwd data  dx = the transposed convolution of dy with w, cut by output parity: the input
 *             pixels with (ih + pad) % S == rh and (iw + pad) % S == rw (blockIdx.z = rh*S + rw)
 *             receive exactly the taps kh = rh + S*th, kw = rw + S*tw, from the output pixel
 *             (i + ohoff - th, j + owoff - tw) where ih = ih1 + S*i: a stride-1 correlation on
 *             the class's sub-grid. Stride 2 thus never multiplies the zeros of the
 *             zero-inserted dy (the four classes hold 4, 2, 2 and 1 taps of the 3x3: 9 in all).
 *             M = the class's pixels, N = Ci, reduction over (class tap, co);
 *             A[q][(t,co)] = dy[opixel(q, t)][co], B[(t,co)][ci] = w[co][tap(t)][ci].
 *   bwd wgt   M = Co, N = K*K*Ci (the dw row [tap][ci] as it lies in memory), reduction over
 *             the output pixels of one chunk (deterministic split-K: cu_conv_tc_wgrad_chunks'
 *             count, at most sg_ws_wgrad_chunks(P, nw); each block writes its fp32 partial tile
 *             to the workspace; cu_wgrad_finish adds the chunks in chunk order; no
 *             atomics).
 *             A[co][p] = dy[p][co], B[p][(tap,ci)] = x[pixel(p, tap)][ci].
 *
 * Tiling. A block computes a BM x BN tile of the GEMM with (BM/64) x (BN/32) warps, each warp a
 * 64 x 32 sub-tile = 4 x 4 m16n8 accumulators (64 fp32 registers per thread). The main tile
 * is 128 x 128 (8 warps); BN = 64 where the N extent is at most 64 (the 64-channel layers of
 * unet_adm64 would waste half of a 128 tile), BM = 64 where M is at most 64 or where 128-row
 * tiles would leave the SMs idle (conv_tc_tile). The reduction advances TC_BK = 32 at a time
 * through TC_STAGES = 4 shared-memory stages (A BMx32 + B BNx32 bf16: 16 KiB a stage at
 * 128 x 128, 64 KiB of dynamic shared memory; 16 warps per SM asked of the register
 * allocator: <= 128 registers, no spills). Why this shape: 128 x 128 is the largest tile that
 * keeps 64 accumulators per thread with 8 warps and 2 blocks resident; a 64 x 32 warp tile
 * needs 4 A + 2 B ldmatrix.x4 per 16 mma; BK = 32 is two k16 steps, and 4 stages keep three
 * tiles of loads in flight behind the one being multiplied. The tile never changes the bits:
 * each output element runs the same k16 steps in the same order whatever the tile.
 *
 * Loads. Every global load is a 16-byte cp.async (8 bf16 channels of one pixel, one part, one
 * tap: Ci, c[0], c[1], Co multiples of 8 make every chunk lie in one buffer and one tap),
 * zero-filled where the pixel is padding, past the tile edge or past the channel count (a
 * part whose channels are not a multiple of 32 ends in a zero-filled slice; both operands are
 * zeroed there). A thread loads fixed rows of its tiles for the whole reduction, so the
 * im2col address math is hoisted out of the K loop: per A row, the pixel index of tap 0 and a
 * bit mask of the taps that fall inside the image (forward, bwd data); per B column of the
 * weight gradient, its (tap, ci, part) — only the output pixel of a reduction row advances.
 *
 * Shared layouts (no bank conflicts for ldmatrix, no padding):
 *   KC (K-contiguous: rows are m or n, 32 bf16 = 4 16-byte chunks each): row r, chunk c lies
 *      in the 128-byte line r/2 at chunk ((r%2)*4 + c) XOR (r/2 % 8). The 8 rows an ldmatrix
 *      reads at one chunk fall on 8 distinct 16-byte bank groups.
 *   MC (M/N-contiguous: rows are k, BM or BN bf16 = 16 or 8 chunks each): row r, chunk c at
 *      chunk c XOR (r % 8) of the row; read with ldmatrix.trans.
 *   forward: A KC, B KC; bwd data: A KC, B MC (trans); bwd weight: A MC, B MC (both trans).
 *
 * Fragments (kernels/cuda/tensor_core.cuh, from the PTX ISA): one ldmatrix.x4 gives a 16x16 A
 * fragment (matrices: rows m0..7 / m8..15 x k0..7 / k8..15 in a[0..3] order) or the B
 * fragments of two n8 tiles (b[0] = k0..7, b[1] = k8..15 of each).
 *
 * Pipeline per block (one __syncthreads per BK step): tiles 0..STAGES-2 are issued, one commit
 * group each; step kt waits until tile kt's group has landed (cp.async.wait_group STAGES-2:
 * the newer STAGES-2 groups may still fly), then a barrier makes every thread's copies
 * visible and frees the stage read at step kt-1, into which tile kt + STAGES - 1 is issued;
 * then the mma on stage kt % STAGES. An empty group is committed past the end so the count
 * stays uniform.
 *
 * Epilogue: straight from the accumulators (lane g = lane/4, q = lane%4 holds rows g and g+8,
 * columns 2q and 2q+1 of each m16n8 tile): forward y = bf16(acc + b), two channels in one
 * 32-bit store; bwd data dx = bf16(acc) or bf16(old + acc) (fp32 add, __fadd_rn, as
 * dev_st_acc), into the part of the concatenation the channel belongs to; bwd weight stores
 * the fp32 partial tile.
 *
 * Numerics: the products of bf16 values are exact in fp32; the tensor core sums each k16
 * slice and the accumulator in its own order, so results differ from the CPU reference (and
 * from the CUDA-core path) by fp32 rounding of the sums; every output is a function of the
 * inputs alone (fixed tiles, fixed order, no atomics), run after run.
 *
 * Fused prologue (sg_conv_fuse.norm; the plan's virtual normalised tensor, planner/fuse.c):
 * the conv's input is norm_act's output y = dropout(silu(GroupNorm(x [+ v]))), never stored;
 * x is what the kernels load. The forward's A operand and the weight gradient's B operand
 * (the two that read y) are made from x in the kernel instances with NORM set:
 *   - How: cp.async cannot transform, so either the operand is loaded through registers
 *     (ld.global, transform, st.shared) or the landed shared-memory tile is transformed in
 *     place before ldmatrix reads it. This file does the second: each thread rewrites its own
 *     16-byte chunks of stage kt (tc_norm_chunk) between its cp.async.wait_group (a thread's
 *     own copies are visible to it then) and the stage barrier that already exists (which
 *     publishes them), so no barrier is added and the global loads stay asynchronous, three
 *     tiles ahead. Through registers, a load would be exposed in the main loop unless a
 *     register double buffer held the next tile (one tile ahead instead of three, and its
 *     16 A_IT bytes per thread live across the MMAs, where the registers are already spent).
 *     The price of the in-place form: one more 16-byte shared read and write per chunk.
 *   - What: y with the apply pass's own device expressions (norm_apply.cuh, shared with
 *     norm.cu's norm_apply_kernel), rounded to bf16: the MMAs see exactly the operands the
 *     unfused conv reads back from memory, in the same order, so fused and unfused give the
 *     same bits (tested on the host emulation, per conv and per training step).
 *   - Padding: the chunks cp.async zero-filled (padding, past the pixels, past the channels)
 *     are left alone: the conv pads y with zeros, after the activation (silu(shift) != 0).
 *   - Registers: the transform runs while the 64 accumulators are live; the NORM instances
 *     ask the allocator for 12 warps per SM (TC_MIN_BLOCKS_NORM: 154-160 registers, no
 *     spills, nvcc 13 sm_90) instead of 16, so a 128 x 128 tile runs one 8-warp block per SM.
 *     Their operands (statistics, gamma, beta, v, the dropout key) are read per chunk from
 *     global memory (L1), the tile's pixels and channels decoded afresh from kt, and a chunk
 *     is transformed two channels at a time, not unrolled: every variant that held more in
 *     registers spilled.
 *   - Cost and saving. Saved per fused normalisation and step: y written and read back in
 *     the forward pass, 2 |y| bytes of traffic (x is read in place of y), |y| never allocated
 *     (the plan recomputes y in the backward pass for the weight gradient, which reads that
 *     stored copy: planner/fuse.c says why; the NORM instance of the weight gradient below is
 *     tested but no plan runs it). Paid: each x element is transformed
 *     once per tap and output-channel tile that reads it (K K ceil(Co / BN) times, 9 for a
 *     3 x 3 with Co <= 128), each an add (v), a subtract, an FMA, expf, an add and an IEEE
 *     divide (SiLU), and with dropout a Philox-4x32-10 draw: some 30 instructions against
 *     2 BN tensor-core FLOPs per transformed element, i.e. ~0.12 instruction per FLOP at
 *     BN = 128, within reach of an H100's ratio of fp32 issue to mma.sync throughput: the
 *     prologue may bound these layers. It did (the first GPU run: 10x the unfused kernel's
 *     time), so a forward with the prologue now runs on the resident halo instead
 *     (conv_tc_fwd_halo_kernel: each element transformed once per block, the tap tiles cut
 *     from it in shared memory, the same k order and bits).
 *
 * Shortcut fold (SC instances of the forward kernel, cu_conv_tc_fwd_sc; a conv2d_sc node,
 * planner/fuse.c): a ResBlock's conv2 and its 1x1 shortcut as ONE GEMM, y = conv(h, w) + b +
 * x ws^T + bs. The reduction runs over conv2's KK taps x (parts, slices) of h, then over the
 * shortcut's parts and slices of x: KT = KK (ceil(c0/32) + ceil(c1/32)) + ceil(s0/32) +
 * ceil(s1/32) tiles, so the shortcut's output is never written (nor, in the backward pass, its
 * gradient's copy of dy). The load cursor simply runs on past the last tap: tap == KK is the
 * shortcut, whose A rows are the output pixel itself (stride 1: the pixel of tap (pad, pad),
 * which lies inside the image for every pixel p < P, so its mask bit doubles as the row's
 * validity) read from x's parts (the skip concatenation: two pointers, as any sg_cat), and
 * whose B rows are ws[co][Cin]; each part ends in a zero-filled slice like the conv's. The
 * fused prologue (NORM) transforms only the conv's tiles (kt below the boundary): x is loaded
 * as it is. Both biases are added in the store, conv2's then the shortcut's, and y is rounded
 * once: the shortcut is summed in the fp32 accumulator instead of being rounded to bf16 and
 * added (conv2d_add), so the fold changes the bits and is --fuse 1's only. There is no path
 * off the tensor cores (conv.cu refuses it; the planner folds only bf16 convolutions the
 * fused kernels take); conv_wgmma.cu's SC instances run the same fold in the same k order.
 */
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/norm_apply.cuh"
#include "kernels/cuda/tensor_core.cuh"

/* ================================ kernels ================================ */

#define TC_BK 32
#define TC_STAGES 4
/* A BM x BN block tile (BM, BN in {64, 128}) has (BM/64) x (BN/32) warps of 64 x 32. */
#define TC_THREADS(BM, BN) ((BM) * (BN) / 64)
/* Resident blocks asked of the register allocator: 16 warps per SM (<= 128 registers); with
 * a fused prologue (NORM) 12 (<= 168 registers; one 256-thread block: <= 255): its transform
 * runs while the 64 accumulators are live and does not fit in 128 without spilling. */
#define TC_MIN_BLOCKS(BM, BN) (512 / TC_THREADS(BM, BN))
#define TC_MIN_BLOCKS_NORM(BM, BN) (384 / TC_THREADS(BM, BN))

/* Shared memory of one pipeline stage, in bf16 elements: A (BM x BK), then B (BN x BK). */
#define TC_STAGE_ELEMS(BM, BN) (((BM) + (BN)) * TC_BK)
#define TC_SMEM_BYTES(BM, BN) (TC_STAGES * TC_STAGE_ELEMS(BM, BN) * 2)

/* Element offset of 16-byte chunk c (0..3) of row r in a KC tile (rows of TC_BK bf16). */
__device__ __forceinline__ int tc_kc(int r, int c) {
    const int line = r >> 1;
    return (line * 8 + ((((r & 1) << 2) | c) ^ (line & 7))) * 8;
}
/* Element offset of chunk c of row r in an MC tile whose rows hold cpr chunks (8 or 16). */
__device__ __forceinline__ int tc_mc(int r, int c, int cpr) {
    return (r * cpr + (c ^ (r & 7))) * 8;
}

/* One k16 step's B fragments and MMAs: acc += A (16 k) * B (16 k) for the warp's 64 x 32
 * sub-tile at column wn of the stage's B, the A fragments given by afrag(mi, ks, a[mi]) (16
 * rows 16 mi .. of the warp's sub-tile, k ks .. ks + 15 of the stage). B_MN: B lies in an MC
 * tile (read transposed), else in a KC tile. */
template <bool B_MN, int BN, class AFrag>
__device__ __forceinline__ void tc_stage_mma_af(float (&acc)[4][4][4], AFrag afrag,
                                                const uint16_t *sB, int wn, int lane) {
    /* lane l addresses row l % 8 of matrix l / 8 of each ldmatrix.x4 */
    const int l7 = lane & 7, l8 = (lane >> 3) & 1, l16 = lane >> 4;
#pragma unroll
    for (int ks = 0; ks < TC_BK; ks += 16) {
        uint32_t a[4][4], b[4][2];
#pragma unroll
        for (int mi = 0; mi < 4; mi++) afrag(mi, ks, a[mi]);
#pragma unroll
        for (int nj = 0; nj < 2; nj++) {
            const int n = wn + 16 * nj;
            uint32_t r[4];
            /* matrices: (k, n), (k + 8, n), (k, n + 8), (k + 8, n + 8) -> b of tiles n, n + 8 */
            if constexpr (B_MN)
                sg_ldmatrix_x4_trans(r, sB + tc_mc(ks + l7 + 8 * l8, (n >> 3) + l16, BN / 8));
            else
                sg_ldmatrix_x4(r, sB + tc_kc(n + l7 + 8 * l16, (ks >> 3) + l8));
            b[2 * nj][0] = r[0];
            b[2 * nj][1] = r[1];
            b[2 * nj + 1][0] = r[2];
            b[2 * nj + 1][1] = r[3];
        }
#pragma unroll
        for (int mi = 0; mi < 4; mi++)
#pragma unroll
            for (int ni = 0; ni < 4; ni++)
                sg_mma_bf16_16816(acc[mi][ni], a[mi], b[ni], acc[mi][ni]);
    }
}
/* One stage: acc += A (BM x BK) * B (BK x BN) for the warp's 64 x 32 sub-tile at (wm, wn).
 * A_MN / B_MN: the operand lies in an MC tile (read transposed), else in a KC tile. */
template <bool A_MN, bool B_MN, int BM, int BN>
__device__ __forceinline__ void tc_stage_mma(float (&acc)[4][4][4], const uint16_t *sA,
                                             const uint16_t *sB, int wm, int wn, int lane) {
    const int l7 = lane & 7, l8 = (lane >> 3) & 1, l16 = lane >> 4;
    /* matrices: (m, k), (m + 8, k), (m, k + 8), (m + 8, k + 8) -> a[0..3] */
    auto afrag = [&](int mi, int ks, uint32_t(&a)[4]) {
        const int m = wm + 16 * mi;
        if constexpr (A_MN)
            sg_ldmatrix_x4_trans(a, sA + tc_mc(ks + l7 + 8 * l16, (m >> 3) + l8, BM / 8));
        else
            sg_ldmatrix_x4(a, sA + tc_kc(m + l7 + 8 * l8, (ks >> 3) + l16));
    };
    tc_stage_mma_af<B_MN, BN>(acc, afrag, sB, wn, lane);
}

/* The multistage main loop over KT reduction tiles. load(stage) issues the cp.async copies of
 * the next tile (in order 0, 1, ..., KT-1: it advances its own state) into that stage;
 * fix(stage, kt), called for tiles kt = 0, 1, ..., KT-1 in order once this thread's copies of
 * the tile have landed and before the barrier that shows them to the other warps, may rewrite
 * this thread's own chunks of it in place (the fused prologue; a no-op otherwise); mma(stage,
 * kt) then multiplies tile kt, every thread's copies of it visible. */
template <int STAGE_ELEMS, class Load, class Fix, class Mma>
__device__ __forceinline__ void tc_pipeline(uint16_t *smem, int KT, Load &load, Fix &fix, Mma mma) {
#pragma unroll
    for (int s = 0; s < TC_STAGES - 1; s++) {
        if (s < KT) load(smem + s * STAGE_ELEMS);
        sg_cp_async_commit();
    }
    for (int kt = 0; kt < KT; kt++) {
        sg_cp_async_wait(TC_STAGES - 2); /* tile kt has landed (this thread's copies) */
        fix(smem + (kt % TC_STAGES) * STAGE_ELEMS, kt);
        __syncthreads(); /* everyone's copies (and fixes); stage (kt-1) % STAGES is free */
        const int next = kt + TC_STAGES - 1;
        if (next < KT) load(smem + (next % TC_STAGES) * STAGE_ELEMS);
        sg_cp_async_commit();
        mma(smem + (kt % TC_STAGES) * STAGE_ELEMS, kt);
    }
    sg_cp_async_wait(0); /* only empty groups remain; nothing in flight at exit */
}
/* ... with stages of TC_STAGE_ELEMS (A, then B) multiplied by tc_stage_mma */
template <bool A_MN, bool B_MN, int BM, int BN, class Load, class Fix>
__device__ __forceinline__ void tc_mainloop(float (&acc)[4][4][4], uint16_t *smem, int KT,
                                            Load &load, Fix &fix) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int wm = (warp / (BN / 32)) * 64, wn = (warp % (BN / 32)) * 32;
    tc_pipeline<TC_STAGE_ELEMS(BM, BN)>(smem, KT, load, fix, [&](const uint16_t *sA, int) {
        tc_stage_mma<A_MN, B_MN, BM, BN>(acc, sA, sA + BM * TC_BK, wm, wn, lane);
    });
}
/* ... with no fix (every kernel but the fused prologue's) */
template <bool A_MN, bool B_MN, int BM, int BN, class Load>
__device__ __forceinline__ void tc_mainloop(float (&acc)[4][4][4], uint16_t *smem, int KT,
                                            Load &load) {
    auto none = [](uint16_t *, int) {};
    tc_mainloop<A_MN, B_MN, BM, BN>(acc, smem, KT, load, none);
}

/* The row within the warp tile of this thread's accumulators acc[mi][*][2h], acc[mi][*][2h+1]
 * (their columns: 8 ni + 2 (lane % 4) and the next). */
__device__ __forceinline__ int tc_acc_row(int mi, int h) {
    return 16 * mi + ((threadIdx.x & 31) >> 2) + 8 * h;
}

/* The epilogue's walk over this thread's accumulators: f(row, col, v0, v1) for each pair at
 * (row, col), (row, col + 1) of the block tile at (m0, n0) that lies inside rows x cols (cols
 * even: a pair is inside or outside whole), in a fixed order. */
template <int BN, class F>
__device__ __forceinline__ void tc_epilogue(const float (&acc)[4][4][4], int m0, int n0, int rows,
                                            int cols, F f) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int wm = m0 + (warp / (BN / 32)) * 64, wn = n0 + (warp % (BN / 32)) * 32;
#pragma unroll
    for (int mi = 0; mi < 4; mi++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int r = wm + tc_acc_row(mi, h);
            if (r >= rows) continue;
#pragma unroll
            for (int ni = 0; ni < 4; ni++) {
                const int c = wn + 8 * ni + 2 * (lane & 3);
                if (c < cols) f(r, c, acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]);
            }
        }
}

/* The gathered A operand (KC rows = pixels of some grid, an implicit im2col) that the forward
 * convolutions and both data gradients share: each of this thread's IT rows row0 + STEP j
 * holds the pixel of its first tap and a bit mask of its taps that lie inside the image,
 * computed once (geo(row, &pix, &mask) for the rows below `rows`; 0 and no taps past them);
 * a tile of tap `bit` then reads pixel pix + delta, channels ci .. ci + 7 of rows of ld
 * channels, zero-filled where the tap is outside or !cin (past the channels). Only the
 * geometry differs between the kernels: it lives in their geo lambdas and tap cursors. */
template <int IT, int STEP, class Geo>
__device__ __forceinline__ void tc_gather_rows(int (&pix0)[IT], unsigned (&mask)[IT], int row0,
                                               int rows, Geo geo) {
#pragma unroll
    for (int j = 0; j < IT; j++) {
        const int r = row0 + j * STEP;
        pix0[j] = 0, mask[j] = 0;
        if (r < rows) geo(r, pix0[j], mask[j]);
    }
}
template <int IT, int STEP>
__device__ __forceinline__ void tc_load_gather(uint16_t *sA, int r0, int c4, const uint16_t *src,
                                               const int (&pix0)[IT], const unsigned (&mask)[IT],
                                               int bit, int delta, int ld, int ci, bool cin) {
#pragma unroll
    for (int j = 0; j < IT; j++) {
        const bool v = cin && ((mask[j] >> bit) & 1u);
        const uint16_t *p = v ? src + (int64_t)(pix0[j] + delta) * ld + ci : src;
        sg_cp_async_16(sA + tc_kc(r0 + j * STEP, c4), p, v);
    }
}
/* The taps of an na x nb box, bit a nb + b for tap (a, b), whose pixel (r + s a, c + s b)
 * (s = 1: a convolution's window; s = -1: the output pixels a transposed one reads) lies
 * inside an h x w image. */
__device__ __forceinline__ unsigned tc_box_mask(int r, int c, int na, int nb, int s, int h, int w) {
    unsigned m = 0;
    for (int a = 0; a < na; a++)
        for (int b = 0; b < nb; b++)
            if (r + s * a >= 0 && r + s * a < h && c + s * b >= 0 && c + s * b < w)
                m |= 1u << (a * nb + b);
    return m;
}

/* The forwards' B operand (KC rows = output channels): the offset wrow[j] = off0 + co rowlen
 * of this thread's weight row co = row0 + STEP j, -1 past Co (computed once); a tile reads
 * channels off .. off + 7 of each row, zero-filled past Co or where !cin. */
template <int IT, int STEP>
__device__ __forceinline__ void tc_weight_rows(int64_t (&wrow)[IT], int row0, int Co, int64_t off0,
                                               int64_t rowlen) {
#pragma unroll
    for (int j = 0; j < IT; j++) {
        const int co = row0 + j * STEP;
        wrow[j] = co < Co ? off0 + co * rowlen : -1;
    }
}
template <int IT, int STEP>
__device__ __forceinline__ void tc_load_weight_rows(uint16_t *sB, int r0, int c4, const uint16_t *w,
                                                    const int64_t (&wrow)[IT], int64_t off,
                                                    bool cin) {
#pragma unroll
    for (int j = 0; j < IT; j++) {
        const bool v = cin && wrow[j] >= 0;
        const uint16_t *src = v ? w + wrow[j] + off : w;
        sg_cp_async_16(sB + tc_kc(r0 + j * STEP, c4), src, v);
    }
}

/* The folded shortcut's weight rows (SC: ws[Co][rowlen], rowlen = the shortcut's Cin) as the
 * forwards' B operand: row co = row0 + STEP j, channels off .. off + 7, zero-filled past Co
 * (wrow[j] < 0: the conv's rows, tc_weight_rows) or where !cin. */
template <int IT, int STEP>
__device__ __forceinline__ void tc_load_shortcut_rows(uint16_t *sB, int r0, int c4,
                                                      const uint16_t *ws, const int64_t (&wrow)[IT],
                                                      int row0, int rowlen, int64_t off, bool cin) {
#pragma unroll
    for (int j = 0; j < IT; j++) {
        const bool v = cin && wrow[j] >= 0;
        const uint16_t *src = v ? ws + (int64_t)(row0 + j * STEP) * rowlen + off : ws;
        sg_cp_async_16(sB + tc_kc(r0 + j * STEP, c4), src, v);
    }
}

/* The data gradients' B operand (MC rows = output channels cs + kr + STEP j of the slice,
 * rows of rowlen elements from w + off, CPR chunks a row): chunk cb, channels ci .. ci + 7,
 * zero-filled past Co or where !ci_ok. */
template <int IT, int STEP, int CPR>
__device__ __forceinline__ void tc_load_weight_cols(uint16_t *sB, int kr, int cb, const uint16_t *w,
                                                    int64_t off, int64_t rowlen, int cs, int Co,
                                                    int ci, bool ci_ok) {
#pragma unroll
    for (int j = 0; j < IT; j++) {
        const int cob = cs + kr + STEP * j;
        const bool v = ci_ok && cob < Co;
        const uint16_t *src = v ? w + off + cob * rowlen + ci : w;
        sg_cp_async_16(sB + tc_mc(kr + STEP * j, cb, CPR), src, v);
    }
}

/* The weight gradients' store: the fp32 partial tile at (m0, n0) of a rows x cols slice (cols
 * even), row-major at out. */
template <int BN>
__device__ __forceinline__ void tc_store_partial(const float (&acc)[4][4][4], float *out, int m0,
                                                 int n0, int rows, int cols) {
    tc_epilogue<BN>(acc, m0, n0, rows, cols, [&](int o, int c, float v0, float v1) {
        *(float2 *)(out + (int64_t)o * cols + c) = make_float2(v0, v1);
    });
}

/* The forward's statistics' partials (sg_conv_fuse.stats; norm.cu, "The statistics'
 * partials"): the block's stored output tile, bf16, rows of TC_STATS_ROW_WORDS(BN) 32-bit words
 * in shared memory (BN values, then 16 bytes that put the 8 rows a warp's epilogue stores at
 * once on distinct banks). The tile's BM rows are whole segments of f.stats_seg rows of one
 * image each (the launcher checked: HoWo and BM are multiples of the segment, so is P):
 * gn_tile_partials (norm_apply.cuh) over them. */
#define TC_STATS_ROW_WORDS(BN) ((BN) / 2 + 4)
template <int BM, int BN>
__device__ __forceinline__ void tc_stats_tile(const uint16_t *tile, const sg_conv_fuse &f, int m0,
                                              int n0, int P, int Co, int HoWo) {
    static_assert(BM * TC_STATS_ROW_WORDS(BN) * 4 <= TC_SMEM_BYTES(BM, BN),
                  "the output tile fits in the pipeline's shared memory");
    gn_tile_partials(tile, 2 * TC_STATS_ROW_WORDS(BN), f, BM, BN, m0, n0, P, Co, HoWo, threadIdx.x,
                     TC_THREADS(BM, BN));
}

/* The data gradient's backward statistics' partials (sg_norm_bwd_fuse; norm.cu): the block's
 * stored tile of dx (the normalisation's dy), laid out as tc_stats_tile's, rows whole segments
 * of nb.seg pixels of one image (the launcher checked), columns the normalisation's channels.
 * Chain (segment j, column cc) runs gn_bwd_step down its rows in order, reading x (and v, the
 * statistics, gamma, beta, the dropout key) of the normalisation from global memory:
 * norm_bwd_partials_kernel's arithmetic on the same values, so the same bits. */
template <int BM, int BN>
__device__ __forceinline__ void tc_bwd_stats_tile(const uint16_t *tile, const sg_norm_bwd_fuse &nb,
                                                  int m0, int n0, int P, int C, int HW) {
    const int seg = nb.seg, nseg = BM / seg, cg = C / nb.G;
    const na_drop dk = na_drop_load(nb.drop);
    for (int ch = threadIdx.x; ch < nseg * BN; ch += TC_THREADS(BM, BN)) {
        const int j = ch / BN, cc = ch - j * BN, c = n0 + cc, p0 = m0 + j * seg;
        if (c >= C || p0 >= P) continue;
        const int n = p0 / HW, g = n * nb.G + c / cg;
        const float mean = nb.mean[g], rstd = nb.rstd[g];
        const float scale = na_apply_scale(rstd, nb.gamma[c]), beta = nb.beta[c];
        const float add = nb.v ? dev_bf16_to_f32(((const uint16_t *)nb.v)[(int64_t)n * C + c]) : 0;
        const int part = c >= nb.x.c[0], cp = nb.x.c[part], cx = part ? c - nb.x.c[0] : c;
        const uint16_t *xc = (const uint16_t *)nb.x.p[part] + cx;
        const uint16_t *col = tile + (int64_t)j * seg * (2 * TC_STATS_ROW_WORDS(BN)) + cc;
        float a = 0.0f, b = 0.0f;
        for (int r = 0; r < seg; r++) {
            const int64_t q = p0 + r;
            const float x = dev_bf16_to_f32(xc[q * cp]);
            gn_bwd_step<true>(a, b, dev_bf16_to_f32(col[r * (2 * TC_STATS_ROW_WORDS(BN))]),
                              nb.v ? x + add : x, mean, rstd, scale, beta, nb.act, dk, q * C + c);
        }
        const int s = (p0 - n * HW) / seg;
        reinterpret_cast<float2 *>(nb.part)[((int64_t)n * (HW / seg) + s) * C + c] =
            make_float2(a, b);
    }
}

/* The forwards' store: y = bf16(acc + b (+ the shortcut's bias, SC) (+ the residual, fuse.res)),
 * two channels in one 32-bit store, and the statistics' partials (fuse.stats) of the stored
 * tile, kept in the block's shared memory (at least TC_SMEM_BYTES) once every warp is done with
 * it. */
template <int BM, int BN, bool SC>
__device__ __forceinline__ void tc_fwd_store(const float (&acc)[4][4][4], uint16_t *smem,
                                             uint16_t *y, const float *bias,
                                             const sg_conv_fuse &fuse, const sg_tc_shortcut &sc,
                                             int m0, int n0, int P, int Co, int HoWo) {
    uint32_t *tile = reinterpret_cast<uint32_t *>(smem);
    if (fuse.stats) __syncthreads();
    /* Co is even: co + 1 < Co too */
    tc_epilogue<BN>(acc, m0, n0, P, Co, [&](int p, int co, float v0, float v1) {
        v0 += bias ? bias[co] : 0.0f, v1 += bias ? bias[co + 1] : 0.0f;
        if (SC && sc.b) /* the shortcut's bias, once: its products are in acc already */
            v0 += sc.b[co], v1 += sc.b[co + 1];
        if (!SC && fuse.res) /* the residual add (the conv's bf16 output, then the sum) */
            tc_add_res(v0, v1, (const uint16_t *)fuse.res + (int64_t)p * Co + co);
        const uint32_t w = dev_st_bf16_pair(y + (int64_t)p * Co + co, v0, v1, 0);
        if (fuse.stats) tile[(p - m0) * TC_STATS_ROW_WORDS(BN) + (co - n0) / 2] = w;
    });
    if (fuse.stats) {
        __syncthreads();
        tc_stats_tile<BM, BN>(reinterpret_cast<const uint16_t *>(tile), fuse, m0, n0, P, Co, HoWo);
    }
}

/* Forward. blockIdx.x: BM output pixels p (flattened n, oh, ow); blockIdx.y: BN output
 * channels. Loads: thread t fills chunk t % 4 (channels 8 (t % 4) .. + 7 of the slice) of rows
 * t / 4 + j * (threads / 4) of A (pixels) and of B (output channels). NORM: x is norm_act's
 * input and A is its output y (sg_conv_fuse): each thread turns its own landed A chunks into y
 * (tc_norm_chunk) before the stage's barrier, following the loads one cursor behind; chunks of
 * padding, past the pixels or past the channels stay the zeros cp.async filled (padding of y,
 * after the activation). */
template <int BM, int BN, bool NORM, bool SC = false>
__global__ void __launch_bounds__(TC_THREADS(BM, BN),
                                  NORM ? TC_MIN_BLOCKS_NORM(BM, BN) : TC_MIN_BLOCKS(BM, BN))
    conv_tc_fwd_kernel(uint16_t *y, sg_cat x, const uint16_t *wb, const float *bias,
                       sg_conv_fuse fuse, sg_tc_shortcut sc, int N, int H, int W, int Ci, int Co,
                       int K, int S, int pad, int Ho, int Wo) {
    SG_PDL_ENTER();
    constexpr int ROW_STEP = TC_THREADS(BM, BN) / 4, A_IT = BM / ROW_STEP, B_IT = BN / ROW_STEP;
    SG_DYNAMIC_SMEM(uint16_t, smem);
    const int tid = threadIdx.x, c4 = tid & 3, r0 = tid >> 2;
    const int P = N * Ho * Wo, HoWo = Ho * Wo, KK = K * K;
    const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
    /* A rows: the pixel index of tap (0, 0) and the taps of the K x K window inside the image */
    int pix0[A_IT];
    unsigned mask[A_IT];
    tc_gather_rows<A_IT, ROW_STEP>(pix0, mask, m0 + r0, P, [&](int p, int &pix, unsigned &msk) {
        const int im = p / HoWo, rem = p - im * HoWo, oh = rem / Wo, ow = rem - oh * Wo;
        const int ih0 = oh * S - pad, iw0 = ow * S - pad;
        pix = (im * H + ih0) * W + iw0;
        msk = tc_box_mask(ih0, iw0, K, K, 1, H, W);
    });
    /* B rows: the offset of weight row co */
    int64_t wrow[B_IT];
    tc_weight_rows<B_IT, ROW_STEP>(wrow, n0 + r0, Co, 0, (int64_t)KK * Ci);
    const int c0 = x.c[0], c1 = x.c[1];
    /* SC: the shortcut's parts s0 + s1 = Cin channels follow the KK taps in the reduction */
    const int s0 = SC ? sc.x.c[0] : 0, s1 = SC ? sc.x.c[1] : 0;
    const int KT = KK * ((c0 + TC_BK - 1) / TC_BK + (c1 + TC_BK - 1) / TC_BK) +
                   (SC ? (s0 + TC_BK - 1) / TC_BK + (s1 + TC_BK - 1) / TC_BK : 0);
    /* the next tile to load: tap (kh, kw), part, channel slice c of the part; tap == KK: the
     * shortcut (SC), its part and slice */
    int tap = 0, kh = 0, kw = 0, part = 0, c = 0;
    auto load = [&](uint16_t *sA) {
        uint16_t *sB = sA + BM * TC_BK;
        const bool sct = SC && tap == KK;
        /* (ternaries, not x.p[part]: a dynamic index would copy x to local memory) */
        const uint16_t *xp =
            (const uint16_t *)(sct ? (part ? sc.x.p[1] : sc.x.p[0]) : (part ? x.p[1] : x.p[0]));
        const int cp = sct ? (part ? s1 : s0) : (part ? c1 : c0);
        const int coff = part ? (sct ? s0 : c0) : 0;
        /* the shortcut reads the output pixel itself: stride 1, so tap (pad, pad), which lies
         * inside the image for every pixel p < P (its mask bit) */
        const int ci = c + 8 * c4, delta = sct ? pad * W + pad : kh * W + kw;
        const int mtap = sct ? pad * K + pad : tap;
        const bool cin = ci < cp;
        tc_load_gather<A_IT, ROW_STEP>(sA, r0, c4, xp, pix0, mask, mtap, delta, cp, ci, cin);
        if (sct) {
            tc_load_shortcut_rows<B_IT, ROW_STEP>(sB, r0, c4, sc.w, wrow, n0 + r0, s0 + s1,
                                                  coff + ci, cin);
        } else {
            tc_load_weight_rows<B_IT, ROW_STEP>(sB, r0, c4, wb, wrow, (int64_t)tap * Ci + coff + ci,
                                                cin);
        }
        c += TC_BK;
        if (c >= cp) {
            c = 0;
            if (part == 0 && (sct ? s1 : c1) > 0) {
                part = 1;
            } else {
                part = 0, tap++;
                if (++kw == K) kw = 0, kh++;
            }
        }
    };
    /* the prologue: tile kt's own A chunks, the same pixels and channels as its load, decoded
     * afresh from kt and the row (a second cursor, or the rows' arrays indexed in a loop that
     * is not unrolled, would take registers the accumulators need) */
    auto fix = [&](uint16_t *sA, int kt) {
        if constexpr (NORM) {
            const int t0 = (c0 + TC_BK - 1) / TC_BK, tpt = t0 + (c1 + TC_BK - 1) / TC_BK;
            const int tap = kt / tpt, sl = kt - tap * tpt, part = sl >= t0;
            if (SC && tap >= KK) return; /* the shortcut's tiles: x as loaded */
            const int cp = part ? c1 : c0, coff = part ? c0 : 0;
            const int ci = (part ? sl - t0 : sl) * TC_BK + 8 * c4;
            const int kh = tap / K, kw = tap - kh * K;
            if (ci < cp) {
#pragma unroll 1
                for (int j = 0; j < A_IT; j++) {
                    const int p = m0 + r0 + j * ROW_STEP;
                    if (p >= P) break;
                    const int im = p / HoWo, rem = p - im * HoWo, oh = rem / Wo, ow = rem - oh * Wo;
                    const int ih = oh * S - pad + kh, iw = ow * S - pad + kw;
                    if (ih >= 0 && ih < H && iw >= 0 && iw < W)
                        tc_norm_chunk(sA + tc_kc(r0 + j * ROW_STEP, c4), fuse, im,
                                      ((int64_t)im * H + ih) * W + iw, coff + ci, Ci);
                }
            }
        }
    };
    float acc[4][4][4] = {};
    tc_mainloop<false, false, BM, BN>(acc, smem, KT, load, fix);

    tc_fwd_store<BM, BN, SC>(acc, smem, y, bias, fuse, sc, m0, n0, P, Co, HoWo);
}

/* The fused prologue's forward on a resident halo (conv_tc_fwd_halo_kernel; the launcher sends
 * a forward with the prologue here unless its fuse says SG_TC_HALO_NONE or it does not fit, and
 * with SG_TC_HALO_ALL every forward it fits: NORM false, x kept as loaded, an experiment for a
 * GPU, whether loading x once per block instead of once per tap beats the per-tap kernel's
 * overlap of loads and MMAs).
 *
 * Why: conv_tc_fwd_kernel's NORM instance transforms each landed A chunk in place, so an
 * element of x is transformed once per tap and output-channel tile that reads it (9 times for
 * a 3x3), between the stage's wait and its barrier: on the first GPU run that made the fused
 * forwards 10x slower than the same kernels unfused (docs/gpu-status.md). Here a block loads
 * the input its BM output pixels read, every channel, with its halo, ONCE (cp.async), turns it
 * into y ONCE (tc_norm_chunk, the same expressions as the apply pass), and keeps it in shared
 * memory for the whole reduction; the pipeline streams only the weights (B). The A fragment of
 * tap (kh, kw) is cut from the resident tile by each lane's ldmatrix row address (the halo
 * pixel of its output pixel, shifted by the tap).
 *
 * Same bits: the reduction runs the same k16 slices in the same order as conv_tc_fwd_kernel
 * (tap, part, 32-channel slice of the part, the zero-filled tail of a part included: the
 * resident channels are laid out padded the same way) on the same operand values, so fused
 * halo, fused per-tap and unfused give identical bits (cuda_ops_host checks all three).
 *
 * The halo (tc_halo_slots): a block's pixels lie on output rows R0 .. R1 (r = n Ho + oh). Output
 * row r = R0 + t of image n reads input rows oh S - pad + kh, held in slot rows t S + (n - n0)
 * (K - S) + kh (n0 = R0 / Ho): consecutive rows of one image share their K - S common input
 * rows, an image's first row starts past the previous image's last (S <= K). A slot row holds
 * Wh = (Wo - 1) S + K input columns iw = col - pad, each pixel cpr 16-byte chunks (the padded
 * channels), swizzled (tc_halo_at). Padding, rows past the image and the parts' tails are the
 * zeros cp.async fills and stay zero (padding of y, after the activation). A slot table in
 * shared memory maps slot -> (n, ih), written before the loads by the output row that owns it.
 *
 * Pipeline: the halo's copies are one commit group, older than the B tiles'; the tile-0 wait
 * of tc_pipeline therefore covers it, and its fix at kt = 0 transforms the thread's own halo
 * chunks (the barrier after it publishes them) while the first B tiles are in flight.
 * SC: the shortcut's tiles (kt >= KK tpt) stream their A through the stages as
 * conv_tc_fwd_kernel does (x as loaded, no prologue).
 *
 * Shared memory: TC_STAGES stages (B, or A + B with SC), the largest halo of any block of the
 * launch (hslots slot rows), the slot table; at least TC_SMEM_BYTES (the statistics' tile).
 * 32 x 32 x 128 at BM 128: 6 x 34 halo pixels, 52 KiB + 32 KiB of stages, two blocks an SM;
 * 16 x 16 x 256: 10 x 18 pixels, 90 KiB + 32; the launcher falls back to the per-tap kernel
 * where it exceeds the device's opt-in limit. Registers: the transform runs before the
 * accumulators are still zero, so the allocator is asked for 16 warps per SM as the unfused
 * kernels (<= 128 registers: 118-128 with nvcc 13 for sm_90, no spills), not the NORM
 * instances' 12. */
__host__ __device__ inline int tc_halo_slots(int m0, int BM, int P, int Ho, int Wo, int K, int S) {
    const int last = (m0 + BM < P ? m0 + BM : P) - 1;
    const int R0 = m0 / Wo, R1 = last / Wo;
    return (R1 - R0) * S + (R1 / Ho - R0 / Ho) * (K - S) + K;
}
/* Element offset of chunk c of halo pixel hr (rows of cpr chunks, cpr a multiple of 4): the
 * chunk XOR (hr >> ksh) & kmask, so the 8 rows an ldmatrix reads (8 consecutive output pixels:
 * consecutive halo pixels, every other one at stride 2) fall on distinct 16-byte bank groups:
 * ksh = S - 1, kmask = 7 where rows span whole 128-byte lines (cpr % 8 == 0); where they span
 * half lines (cpr % 8 == 4) kmask = 3 and ksh one more (pairs of rows share a line). */
__device__ __forceinline__ int tc_halo_at(int hr, int c, int cpr, int ksh, int kmask) {
    return (hr * cpr + (c ^ ((hr >> ksh) & kmask))) * 8;
}
template <int BM, int BN, bool NORM, bool SC>
__global__ void __launch_bounds__(TC_THREADS(BM, BN), TC_MIN_BLOCKS(BM, BN))
    conv_tc_fwd_halo_kernel(uint16_t *y, sg_cat x, const uint16_t *wb, const float *bias,
                            sg_conv_fuse fuse, sg_tc_shortcut sc, int N, int H, int W, int Ci,
                            int Co, int K, int S, int pad, int Ho, int Wo, int hslots) {
    SG_PDL_ENTER();
    constexpr int NT = TC_THREADS(BM, BN), ROW_STEP = NT / 4, A_IT = BM / ROW_STEP,
                  B_IT = BN / ROW_STEP;
    /* a stage: B (BN x BK), after the shortcut's A (BM x BK) with SC */
    constexpr int BOFF = SC ? BM * TC_BK : 0, STAGE = BOFF + BN * TC_BK;
    SG_DYNAMIC_SMEM(uint16_t, smem);
    const int tid = threadIdx.x, c4 = tid & 3, r0 = tid >> 2, lane = tid & 31, warp = tid >> 5;
    const int P = N * Ho * Wo, HoWo = Ho * Wo, KK = K * K;
    const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
    const int c0 = x.c[0], c1 = x.c[1];
    /* k tiles per tap: part 0's slices, then part 1's; the resident pixel's chunks likewise */
    const int t0 = (c0 + TC_BK - 1) / TC_BK, tpt = t0 + (c1 + TC_BK - 1) / TC_BK;
    const int cpr = tpt * (TC_BK / 8), Wh = (Wo - 1) * S + K;
    const int ksh = S - 1 + ((cpr & 7) ? 1 : 0), kmask = (cpr & 7) ? 3 : 7;
    uint16_t *res = smem + TC_STAGES * STAGE;
    int2 *slot = reinterpret_cast<int2 *>(res + (int64_t)hslots * Wh * cpr * 8);
    const int last = (m0 + BM < P ? m0 + BM : P) - 1;
    const int R0 = m0 / Wo, n0img = R0 / Ho, rows = last / Wo - R0 + 1;
    const int hpix = tc_halo_slots(m0, BM, P, Ho, Wo, K, S) * Wh;

    /* the slot table: output row t writes the slots no earlier row of its image wrote */
    for (int t = tid; t < rows; t += NT) {
        const int r = R0 + t, n = r / Ho, oh = r - n * Ho;
        const int base = t * S + (n - n0img) * (K - S);
        const int kh0 = t > 0 && (r - 1) / Ho == n ? K - S : 0;
        for (int kh = kh0; kh < K; kh++) slot[base + kh] = make_int2(n, oh * S - pad + kh);
    }
    __syncthreads();
    /* A thread's halo chunks i = tid, tid + NT, .. < hpix cpr, walked without a division a step
     * (the divisions by cpr and Wh once, here): chunk ch of halo pixel hp = sl Wh + col, col the
     * column (iw + pad) of slot row sl; NT chunks on is dhp pixels and dch chunks on, dhp pixels
     * dsl slot rows and dcol columns, each carried once. */
    struct walk {
        int hp, ch, sl, col;
    };
    const int dhp = NT / cpr, dch = NT - dhp * cpr, dsl = dhp / Wh, dcol = dhp - dsl * Wh;
    auto walk_first = [&]() {
        walk w;
        w.hp = tid / cpr, w.ch = tid - w.hp * cpr, w.sl = w.hp / Wh, w.col = w.hp - w.sl * Wh;
        return w;
    };
    auto walk_next = [&](walk &w) {
        w.hp += dhp, w.ch += dch, w.sl += dsl, w.col += dcol;
        if (w.ch >= cpr) w.ch -= cpr, w.hp++, w.col++;
        if (w.col >= Wh) w.col -= Wh, w.sl++;
    };
    /* the chunk's part and channel ci within it, the input pixel q of image n; whether it holds
     * data (else zeros) */
    auto halo_chunk = [&](const walk &w, int &part, int &ci, int &n, int64_t &q) {
        const int iw = w.col - pad;
        const int2 e = slot[w.sl];
        part = w.ch >= 4 * t0;
        ci = 8 * (part ? w.ch - 4 * t0 : w.ch);
        n = e.x, q = ((int64_t)e.x * H + e.y) * W + iw;
        return e.y >= 0 && e.y < H && iw >= 0 && iw < W && ci < (part ? c1 : c0);
    };
    for (walk w = walk_first(); w.hp < hpix; walk_next(w)) {
        int part, ci, n;
        int64_t q;
        const bool v = halo_chunk(w, part, ci, n, q);
        /* (ternaries, not x.p[part]: a dynamic index would copy x to local memory) */
        const uint16_t *xp = (const uint16_t *)(part ? x.p[1] : x.p[0]);
        sg_cp_async_16(res + tc_halo_at(w.hp, w.ch, cpr, ksh, kmask),
                       v ? xp + q * (part ? c1 : c0) + ci : xp, v);
    }
    sg_cp_async_commit();

    /* B rows: the offset of weight row co */
    int64_t wrow[B_IT];
    tc_weight_rows<B_IT, ROW_STEP>(wrow, n0 + r0, Co, 0, (int64_t)KK * Ci);
    const int s0 = SC ? sc.x.c[0] : 0, s1 = SC ? sc.x.c[1] : 0, KTc = KK * tpt;
    const int KT = KTc + (SC ? (s0 + TC_BK - 1) / TC_BK + (s1 + TC_BK - 1) / TC_BK : 0);
    /* the next tile to load: tap, part, channel slice c of the part; tap == KK: the shortcut */
    int tap = 0, part = 0, c = 0;
    auto load = [&](uint16_t *st) {
        const bool sct = SC && tap == KK;
        const int cp = sct ? (part ? s1 : s0) : (part ? c1 : c0);
        const int coff = part ? (sct ? s0 : c0) : 0;
        const int ci = c + 8 * c4;
        const bool cin = ci < cp;
        if (sct) {
            /* the shortcut's A rows: the output pixel itself (stride 1, Ho = H, Wo = W) */
            const uint16_t *xp = (const uint16_t *)(part ? sc.x.p[1] : sc.x.p[0]);
#pragma unroll
            for (int j = 0; j < A_IT; j++) {
                const int p = m0 + r0 + j * ROW_STEP;
                const bool v = cin && p < P;
                sg_cp_async_16(st + tc_kc(r0 + j * ROW_STEP, c4),
                               v ? xp + (int64_t)p * cp + ci : xp, v);
            }
            tc_load_shortcut_rows<B_IT, ROW_STEP>(st + BOFF, r0, c4, sc.w, wrow, n0 + r0, s0 + s1,
                                                  coff + ci, cin);
        } else {
            tc_load_weight_rows<B_IT, ROW_STEP>(st + BOFF, r0, c4, wb, wrow,
                                                (int64_t)tap * Ci + coff + ci, cin);
        }
        c += TC_BK;
        if (c >= cp) {
            c = 0;
            if (part == 0 && (sct ? s1 : c1) > 0)
                part = 1;
            else
                part = 0, tap++;
        }
    };
    /* the prologue, once: at tile 0 (the halo's group is older than tile 0's, so it has landed
     * too), this thread's own halo chunks become y; the barrier after publishes them */
    auto fix = [&](uint16_t *, int kt) {
        if constexpr (NORM) {
            if (kt) return;
            /* the channel's group by a multiply-high (dev_div), not a division a chunk */
            const int cg = Ci / fuse.G;
            const dev_fastdiv cgd = dev_fastdiv_of((uint32_t)cg);
#pragma unroll 1
            for (walk w = walk_first(); w.hp < hpix; walk_next(w)) {
                int part, ci, n;
                int64_t q;
                if (halo_chunk(w, part, ci, n, q)) {
                    const int ch = (part ? c0 : 0) + ci, gq = (int)dev_div((uint32_t)ch, cgd);
                    tc_norm_chunk_in(res + tc_halo_at(w.hp, w.ch, cpr, ksh, kmask), fuse, n, q, ch,
                                     Ci, n * fuse.G + gq, ch - gq * cg, cg);
                }
            }
        }
    };
    /* the lane's A rows (wm + 16 mi + lane % 8 + 8 (lane / 8 % 2), as tc_stage_mma's ldmatrix):
     * the halo pixel of tap (0, 0) of their output pixel (rows past P read the last pixel's:
     * any resident row will do, their outputs are not stored) */
    const int wm = (warp / (BN / 32)) * 64, wn = (warp % (BN / 32)) * 32;
    const int l16 = lane >> 4;
    int hrow[4];
#pragma unroll
    for (int mi = 0; mi < 4; mi++) {
        int p = m0 + wm + 16 * mi + (lane & 7) + 8 * ((lane >> 3) & 1);
        p = p < P ? p : P - 1;
        const int r = p / Wo, ow = p - r * Wo;
        hrow[mi] = ((r - R0) * S + (r / Ho - n0img) * (K - S)) * Wh + ow * S;
    }
    /* the multiplying cursor: slice sl of tap (kh, kw), toff = kh Wh + kw halo pixels */
    int msl = 0, mkh = 0, mkw = 0, toff = 0;
    float acc[4][4][4] = {};
    tc_pipeline<STAGE>(smem, KT, load, fix, [&](const uint16_t *st, int kt) {
        if (SC && kt >= KTc) {
            tc_stage_mma<false, false, BM, BN>(acc, st, st + BOFF, wm, wn, lane);
            return;
        }
        const int cb = msl * (TC_BK / 8);
        auto afrag = [&](int mi, int ks, uint32_t(&a)[4]) {
            sg_ldmatrix_x4(
                a, res + tc_halo_at(hrow[mi] + toff, cb + (ks >> 3) + l16, cpr, ksh, kmask));
        };
        tc_stage_mma_af<false, BN>(acc, afrag, st + BOFF, wn, lane);
        if (++msl == tpt) {
            msl = 0;
            if (++mkw == K) mkw = 0, mkh++;
            toff = mkh * Wh + mkw;
        }
    });

    tc_fwd_store<BM, BN, SC>(acc, smem, y, bias, fuse, sc, m0, n0, P, Co, HoWo);
}

/* Backward data. blockIdx.x: BM input pixels of parity class blockIdx.z (flattened n, i, j);
 * blockIdx.y: BN input channels of the concatenation. Loads: A (dy rows) as the forward's A;
 * B (w, MC rows = output channels of the slice): thread t fills chunk t % (BN/8) (input
 * channels 8 (t % (BN/8)) .. + 7) of rows t / (BN/8) + (BM/8) j. STATS: the epilogue also
 * computes the normalisation's backward partials (nb; tc_bwd_stats_tile), asking the register
 * allocator for 12 warps per SM as the fused prologue does (16 spills there). */
template <int BM, int BN, bool STATS>
__global__ void __launch_bounds__(TC_THREADS(BM, BN),
                                  STATS ? TC_MIN_BLOCKS_NORM(BM, BN) : TC_MIN_BLOCKS(BM, BN))
    conv_tc_dgrad_kernel(sg_cat dx, const uint16_t *dy, const uint16_t *wb, sg_norm_bwd_fuse nb,
                         int N, int H, int W, int Ci, int Co, int K, int S, int pad, int Ho, int Wo,
                         int accum) {
    SG_PDL_ENTER();
    constexpr int ROW_STEP = TC_THREADS(BM, BN) / 4, A_IT = BM / ROW_STEP;
    /* B: chunks per row, rows t / BCPR + B_STEP j */
    constexpr int BCPR = BN / 8, B_STEP = BM / 8, B_IT = TC_BK / B_STEP;
    SG_DYNAMIC_SMEM(uint16_t, smem);
    const sg_conv_class k = sg_conv_class_of(blockIdx.z, H, W, K, S, pad);
    const int HWc = k.Hc * k.Wc, Mc = N * HWc, KK = K * K;
    const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
    if (m0 >= Mc) return; /* the whole block: a smaller (or empty) class */
    const int tid = threadIdx.x, c4 = tid & 3, r0 = tid >> 2;
    /* A rows: the dy pixel index of class tap (0, 0) and the class taps inside dy (class tap
     * (th, tw) reads dy pixel (ohb - th, owb - tw)) */
    int pix0[A_IT];
    unsigned mask[A_IT];
    tc_gather_rows<A_IT, ROW_STEP>(pix0, mask, m0 + r0, Mc, [&](int p, int &pix, unsigned &msk) {
        const int img = p / HWc, rem = p - img * HWc, i = rem / k.Wc, jj = rem - i * k.Wc;
        const int ohb = i + k.ohoff, owb = jj + k.owoff;
        pix = (img * Ho + ohb) * Wo + owb;
        msk = tc_box_mask(ohb, owb, k.nth, k.ntw, -1, Ho, Wo);
    });
    const int cb = tid % BCPR, kr = tid / BCPR;
    const int ci = n0 + 8 * cb;
    const bool ci_ok = ci < Ci;
    const int KT = k.nth * k.ntw * ((Co + TC_BK - 1) / TC_BK);
    /* the next tile to load: class tap (th, tw) = number ct, output-channel slice cs */
    int th = 0, tw = 0, ct = 0, cs = 0;
    auto load = [&](uint16_t *sA) {
        uint16_t *sB = sA + BM * TC_BK;
        const int tap = (k.rh + S * th) * K + (k.rw + S * tw), delta = -(th * Wo + tw);
        const int co = cs + 8 * c4;
        tc_load_gather<A_IT, ROW_STEP>(sA, r0, c4, dy, pix0, mask, ct, delta, Co, co, co < Co);
        tc_load_weight_cols<B_IT, B_STEP, BCPR>(sB, kr, cb, wb, (int64_t)tap * Ci, (int64_t)KK * Ci,
                                                cs, Co, ci, ci_ok);
        cs += TC_BK;
        if (cs >= Co) {
            cs = 0, ct++;
            if (++tw == k.ntw) tw = 0, th++;
        }
    };
    float acc[4][4][4] = {};
    tc_mainloop<false, true, BM, BN>(acc, smem, KT, load);

    const int c0 = dx.c[0], c1 = dx.c[1];
    uint16_t *d0 = (uint16_t *)dx.p[0], *d1 = (uint16_t *)dx.p[1];
    /* the backward statistics' partials (nb.part; the launcher checked: stride 1, so the class
     * is the whole image and row p is pixel p, and dx one buffer): the stored tile, kept in the
     * pipeline's shared memory once every warp is done with it */
    uint32_t *tile = reinterpret_cast<uint32_t *>(smem);
    if (STATS) __syncthreads();
    /* c even and both parts even: c, c + 1 in one part */
    tc_epilogue<BN>(acc, m0, n0, Mc, Ci, [&](int p, int c, float v0, float v1) {
        const int img = p / HWc, rem = p - img * HWc, i = rem / k.Wc, jj = rem - i * k.Wc;
        const int64_t q = ((int64_t)img * H + k.ih1 + S * i) * W + k.iw1 + S * jj;
        const uint32_t w =
            dev_st_bf16_pair(c < c0 ? d0 + q * c0 + c : d1 + q * c1 + (c - c0), v0, v1, accum);
        if (STATS) tile[(p - m0) * TC_STATS_ROW_WORDS(BN) + (c - n0) / 2] = w;
    });
    if (STATS) {
        __syncthreads();
        tc_bwd_stats_tile<BM, BN>(reinterpret_cast<const uint16_t *>(tile), nb, m0, n0, Mc, Ci,
                                  HWc);
    }
}

/* Backward weight. blockIdx.x: BN columns n = tap*Ci + ci of dw; blockIdx.y: BM output
 * channels; blockIdx.z: chunk of output pixels [z*chunk_len, min(P, (z+1)*chunk_len)), the
 * reduction, 32 at a time. Loads: A (dy, MC rows = pixels): thread t fills chunk t % (BM/8)
 * (output channels 8 (t % (BM/8)) .. + 7) of rows t / (BM/8) + (BN/8) j; B (x, MC rows =
 * pixels): chunk t % (BN/8), i.e. 8 columns of one tap and one part fixed for the whole
 * reduction, of rows t / (BN/8) + (BM/8) j. Writes part[z][co][n]. NORM: B is norm_act's y,
 * made from the landed x chunks as the forward's A (tc_norm_chunk), the fix following the
 * loads' pixel rows one tile behind. */
template <int BM, int BN, bool NORM>
__global__ void __launch_bounds__(TC_THREADS(BM, BN),
                                  NORM ? TC_MIN_BLOCKS_NORM(BM, BN) : TC_MIN_BLOCKS(BM, BN))
    conv_tc_wgrad_kernel(float *part, const uint16_t *dy, sg_cat x, sg_conv_fuse fuse, int N, int H,
                         int W, int Ci, int Co, int K, int S, int pad, int Ho, int Wo,
                         int chunk_len) {
    SG_PDL_ENTER();
    /* A: chunks per row, rows t / ACPR + A_STEP j; B likewise */
    constexpr int ACPR = BM / 8, A_STEP = BN / 8, A_IT = TC_BK / A_STEP;
    constexpr int BCPR = BN / 8, B_STEP = BM / 8, B_IT = TC_BK / B_STEP;
    SG_DYNAMIC_SMEM(uint16_t, smem);
    const int tid = threadIdx.x;
    const int Nn = K * K * Ci, P = N * Ho * Wo, HoWo = Ho * Wo;
    const int n0 = blockIdx.x * BN, m0 = blockIdx.y * BM;
    const int p0 = blockIdx.z * chunk_len, p1 = min(P, p0 + chunk_len);
    const int KT = p1 > p0 ? (p1 - p0 + TC_BK - 1) / TC_BK : 0;
    /* A: output channels co .. co + 7 */
    const int ca = tid % ACPR, ka = tid / ACPR, co = m0 + 8 * ca;
    const bool co_ok = co < Co;
    /* B: columns n .. n + 7 = (tap, ci .. ci + 7) of one part */
    const int cbn = tid % BCPR, kb = tid / BCPR, n = n0 + 8 * cbn;
    const bool n_ok = n < Nn;
    const int tap = n_ok ? n / Ci : 0, ci = n_ok ? n - tap * Ci : 0;
    const int kh = tap / K, kw = tap % K;
    const int c0 = x.c[0], c1 = x.c[1];
    const uint16_t *xp = (const uint16_t *)(ci < c0 ? x.p[0] : x.p[1]);
    const int cp = ci < c0 ? c0 : c1, cc = ci < c0 ? ci : ci - c0;
    /* B rows: image and pixel-in-image of reduction row kb + B_STEP j of the next tile */
    int img[B_IT], rem[B_IT];
#pragma unroll
    for (int j = 0; j < B_IT; j++) {
        const int p = p0 + kb + B_STEP * j;
        img[j] = p / HoWo, rem[j] = p - img[j] * HoWo;
    }
    int pb = p0; /* first pixel of the next tile */
    auto load = [&](uint16_t *sA) {
        uint16_t *sB = sA + BM * TC_BK;
#pragma unroll
        for (int j = 0; j < A_IT; j++) {
            const int p = pb + ka + j * A_STEP;
            const bool v = co_ok && p < p1;
            const uint16_t *src = v ? dy + (int64_t)p * Co + co : dy;
            sg_cp_async_16(sA + tc_mc(ka + j * A_STEP, ca, ACPR), src, v);
        }
#pragma unroll
        for (int j = 0; j < B_IT; j++) {
            const int p = pb + kb + B_STEP * j;
            const int oh = rem[j] / Wo, ow = rem[j] - oh * Wo;
            const int ih = oh * S - pad + kh, iw = ow * S - pad + kw;
            const bool v = n_ok && p < p1 && ih >= 0 && ih < H && iw >= 0 && iw < W;
            const uint16_t *src = v ? xp + ((int64_t)(img[j] * H + ih) * W + iw) * cp + cc : xp;
            sg_cp_async_16(sB + tc_mc(kb + B_STEP * j, cbn, BCPR), src, v);
            rem[j] += TC_BK;
            while (rem[j] >= HoWo) rem[j] -= HoWo, img[j]++;
        }
        pb += TC_BK;
    };
    auto fix = [&](uint16_t *sA, int kt) {
        if constexpr (NORM) {
            uint16_t *sB = sA + BM * TC_BK;
#pragma unroll 1
            for (int j = 0; j < B_IT; j++) {
                const int p = p0 + kt * TC_BK + kb + B_STEP * j;
                if (!n_ok || p >= p1) continue;
                /* the pixel decoded afresh (a second cursor would hold 2 B_IT registers) */
                const int im = p / HoWo, rm = p - im * HoWo, oh = rm / Wo, ow = rm - oh * Wo;
                const int ih = oh * S - pad + kh, iw = ow * S - pad + kw;
                if (ih >= 0 && ih < H && iw >= 0 && iw < W)
                    tc_norm_chunk(sB + tc_mc(kb + B_STEP * j, cbn, BCPR), fuse, im,
                                  ((int64_t)im * H + ih) * W + iw, ci, Ci);
            }
        }
    };
    float acc[4][4][4] = {};
    tc_mainloop<true, true, BM, BN>(acc, smem, KT, load, fix);

    tc_store_partial<BN>(acc, part + (int64_t)blockIdx.z * Co * Nn, m0, n0, Co, Nn); /* Nn even */
}

/* =============================== launchers =============================== */

/* The block tile of a GEMM of M x N in `slices` independent slices (parity classes, weight
 * chunks): BN = 64 when N <= 64 (the 64-channel layers), else 128; BM = 64 when M <= 64 or
 * when 128-row tiles would give fewer than TC_FEW_BLOCKS blocks (the 4x4 and 8x8 layers:
 * twice as many blocks for the SMs), else 128. Shapes only, and the tile never changes the
 * bits: every output element's reduction runs the same k16 steps in the same order whatever
 * the tile, so this rule may be retuned on a GPU freely. */
#define TC_FEW_BLOCKS 264 /* two blocks for each of an H100's 132 SMs */
static void conv_tc_tile(int64_t M, int64_t N, int64_t slices, int *bm, int *bn) {
    *bn = N <= 64 ? 64 : 128;
    const int64_t blocks128 = (M + 127) / 128 * ((N + *bn - 1) / *bn) * slices;
    *bm = M <= 64 || blocks128 < TC_FEW_BLOCKS ? 64 : 128;
}
/* The weight gradient's chunk count on these kernels (the conv's, slices = 1 a chunk; the
 * upsample conv's, 4): of 1 .. most (the workspace rule's, sg_ws_wgrad_chunks), the one of least
 * estimated time, waves x (resident blocks an SM) x BM BN x ceil(P / c) (a block's pixels), its
 * blocks conv_tc_tile's of the M x N GEMM in slices x c slices, resident TC_MIN_BLOCKS an SM
 * (two of 128 x 128, four of 64 x 128) on TC_SMS SMs; ties to more chunks. The rule's count alone
 * can spill a few blocks into a second wave: 32 chunks of unet_cifar's 32x32 128 -> 128 gradient
 * are 288 blocks of 128 x 128 against 264 places, 8 of its 16x16 256 -> 256 ones too; 29 and 7
 * chunks are 522 and 504 blocks of 64 x 128 against 528, one wave. The fused
 * prologue's instances (fewer resident blocks) take the same count, so that fused and unfused
 * give the same bits; the count is a function of the shapes alone (TC_SMS a constant, not the
 * device's SMs), so are the bits. */
#define TC_SMS 132 /* an H100's or H200's SMs */
int64_t cu_conv_tc_wgrad_chunks(int64_t M, int64_t N, int slices, int64_t P, int64_t most) {
    int64_t best = most > 0 ? most : 1;
    double best_cost = -1;
    for (int64_t c = best; c >= 1; c--) {
        int bm, bn;
        conv_tc_tile(M, N, slices * c, &bm, &bn);
        const int64_t blocks = (M + bm - 1) / bm * ((N + bn - 1) / bn) * slices * c,
                      per_sm = TC_MIN_BLOCKS(bm, bn), slots = (int64_t)TC_SMS * per_sm;
        const double cost = (double)((blocks + slots - 1) / slots) * (double)per_sm * bm * bn *
                            (double)((P + c - 1) / c);
        if (best_cost < 0 || cost < best_cost) best = c, best_cost = cost;
    }
    return best;
}

/* fn<BM, BN>(args...) for the tile picked at run time */
#define TC_TILED(bm, bn, fn, ...)                                                                  \
    ((bm) == 64 ? ((bn) == 64 ? fn<64, 64>(__VA_ARGS__) : fn<64, 128>(__VA_ARGS__))                \
                : ((bn) == 64 ? fn<128, 64>(__VA_ARGS__) : fn<128, 128>(__VA_ARGS__)))

/* Every launch of a kernel of this file: its dynamic shared memory allowed (that of its BM x BN
 * tile, or `bytes`), then the launch, errors named after the kernel. */
template <int BM, int BN, class... P, class... A>
static int tc_launch_smem(void (*kernel)(P...), const char *name, dim3 grid, int bytes,
                          cudaStream_t st, A... args) {
    if (cuda_smem_attr(kernel, bytes, name)) return SG_ERR;
    SG_LAUNCH_NAMED(name, kernel, grid, TC_THREADS(BM, BN), bytes, st, args...);
    SG_LAUNCH_CHECK(name);
    return SG_OK;
}
template <int BM, int BN, class... P, class... A>
static int tc_launch(void (*kernel)(P...), const char *name, dim3 grid, cudaStream_t st,
                     A... args) {
    return tc_launch_smem<BM, BN>(kernel, name, grid, TC_SMEM_BYTES(BM, BN), st, args...);
}

/* the kernel instance for a fused prologue (norm) or none */
#define TC_NORM(norm, kernel, BM, BN) ((norm) ? kernel<BM, BN, true> : kernel<BM, BN, false>)

/* the forward kernel instance for a fused prologue (norm) or none, with the folded shortcut
 * (sc) or without */
#define TC_FWD(norm, sc, BM, BN)                                                                   \
    ((sc) ? ((norm) ? conv_tc_fwd_kernel<BM, BN, true, true>                                       \
                    : conv_tc_fwd_kernel<BM, BN, false, true>)                                     \
          : TC_NORM(norm, conv_tc_fwd_kernel, BM, BN))

/* Does the forward with fuse f run on the resident halo (conv_tc_fwd_halo_kernel here,
 * conv_wg_fwd_halo_kernel in conv_wgmma.cu), where it fits? f.halo (cuda_kernels.h): the
 * fused prologue's by default, every one with SG_TC_HALO_ALL (an experiment for a GPU: x
 * loaded once per block instead of once per tap), none with SG_TC_HALO_NONE. The same bits
 * every way. */
int cu_tc_fwd_on_halo(const sg_conv_fuse &f) {
    return f.halo == SG_TC_HALO_ALL || (f.norm && f.halo == SG_TC_HALO_PROLOGUE);
}

/* The halo kernel's dynamic shared memory for a BM x BN forward (0 where it does not apply:
 * S > K, or more than the device allows), and in *hslots the most slot rows a block's halo
 * takes (tc_halo_slots is the same for blocks HoWo pixels apart: one period of blocks, and the
 * last, cut by P). */
static int64_t tc_halo_bytes(int BM, int BN, int sc, int64_t P, int Ho, int Wo, int c0, int c1,
                             int K, int S, int *hslots) {
    if (S > K) return 0;
    const int64_t HoWo = (int64_t)Ho * Wo, blocks = (P + BM - 1) / BM;
    int64_t g = BM, h = HoWo; /* period: HoWo / gcd(BM, HoWo) blocks */
    while (h) {
        const int64_t t = g % h;
        g = h, h = t;
    }
    const int64_t period = HoWo / g < blocks ? HoWo / g : blocks;
    int most = 0;
    for (int64_t b = 0; b <= period; b++) {
        const int64_t m0 = b < period ? b * BM : (blocks - 1) * BM;
        const int n = tc_halo_slots((int)m0, BM, (int)P, Ho, Wo, K, S);
        most = n > most ? n : most;
    }
    const int64_t cpr = 4 * ((c0 + TC_BK - 1) / TC_BK + (c1 + TC_BK - 1) / TC_BK);
    const int64_t stage = ((sc ? BM : 0) + BN) * TC_BK * 2;
    int64_t bytes = TC_STAGES * stage + (int64_t)most * ((Wo - 1) * S + K) * cpr * 16 +
                    (int64_t)most * (int64_t)sizeof(int2);
    bytes = bytes > TC_SMEM_BYTES(BM, BN) ? bytes : TC_SMEM_BYTES(BM, BN);
    *hslots = most;
    return bytes <= cuda_smem_optin() ? bytes : 0;
}

static long tc_halo_forwards; /* forwards launched on the resident-halo kernel, so far */
long cuda_conv_tc_halo_forwards(void) {
    return tc_halo_forwards;
}

template <int BM, int BN>
static int conv_tc_fwd_launch(cudaStream_t st, uint16_t *y, sg_cat x, const uint16_t *wb,
                              const float *b, sg_conv_fuse f, sg_tc_shortcut sc, int N, int H,
                              int W, int Ci, int Co, int K, int S, int pad, int Ho, int Wo) {
    const int64_t P = (int64_t)N * Ho * Wo;
    dim3 grid((unsigned)((P + BM - 1) / BM), (unsigned)((Co + BN - 1) / BN));
    int hslots = 0;
    const int64_t hb = cu_tc_fwd_on_halo(f) ? tc_halo_bytes(BM, BN, sc.w != NULL, P, Ho, Wo, x.c[0],
                                                            x.c[1], K, S, &hslots)
                                            : 0;
    if (hb) {
        void (*const kernel)(uint16_t *, sg_cat, const uint16_t *, const float *, sg_conv_fuse,
                             sg_tc_shortcut, int, int, int, int, int, int, int, int, int, int,
                             int) = sc.w ? (f.norm ? conv_tc_fwd_halo_kernel<BM, BN, true, true>
                                                   : conv_tc_fwd_halo_kernel<BM, BN, false, true>)
                                         : (f.norm ? conv_tc_fwd_halo_kernel<BM, BN, true, false>
                                                   : conv_tc_fwd_halo_kernel<BM, BN, false, false>);
        tc_halo_forwards++;
        return tc_launch_smem<BM, BN>(kernel, "conv_tc_fwd_halo_kernel", grid, (int)hb, st, y, x,
                                      wb, b, f, sc, N, H, W, Ci, Co, K, S, pad, Ho, Wo, hslots);
    }
    void (*const kernel)(uint16_t *, sg_cat, const uint16_t *, const float *, sg_conv_fuse,
                         sg_tc_shortcut, int, int, int, int, int, int, int, int, int, int) =
        TC_FWD(f.norm, sc.w != NULL, BM, BN);
    return tc_launch<BM, BN>(kernel, "conv_tc_fwd_kernel", grid, st, y, x, wb, b, f, sc, N, H, W,
                             Ci, Co, K, S, pad, Ho, Wo);
}

/* the shortcut as the kernels take it: by value (a launch's argument bytes must be exactly its
 * values: graph capture, the host emulation's replay check) */
static_assert(sizeof(sg_tc_shortcut) == sizeof(sg_cat) + 2 * sizeof(void *) &&
                  sizeof(sg_cat) == 2 * sizeof(void *) + 2 * sizeof(int),
              "sg_tc_shortcut must have no padding bytes (a kernel argument, as below)");
/* The forwards' fusion argument with the statistics' partials (sg_conv_fuse.stats) decided:
 * the epilogue computes them where its BM-row tiles cover whole segments, else (*after set)
 * the normalisation's own pass runs after the conv (cuda_norm_partials): the same bits. */
static sg_conv_fuse tc_fwd_fuse(const sg_conv_fuse *fuse, int HoWo, int bm, int *after) {
    sg_conv_fuse f = cu_conv_fuse_arg(fuse);
    *after = 0;
    if (f.stats) {
        f.stats_seg = (int)sg_ws_norm_seg(HoWo);
        if (HoWo % f.stats_seg || bm % f.stats_seg) f.stats = NULL, *after = 1;
    }
    return f;
}
static int tc_fwd_stats_after(cudaStream_t st, int after, const sg_conv_fuse *fuse, void *y, int N,
                              int HoWo, int Co) {
    return after ? cuda_norm_partials(st, fuse->stats, fuse->stats_ld, sg_cat1(y, Co), N, HoWo, 0,
                                      DT_BF16)
                 : SG_OK;
}

int cu_conv_tc_fwd(cudaStream_t st, void *y, sg_cat x, const uint16_t *wb, const float *b,
                   const sg_conv_fuse *fuse, int N, int H, int W, int Ci, int Co, int K, int S,
                   int pad) {
    const int Ho = sg_ws_conv_out(H, K, S), Wo = sg_ws_conv_out(W, K, S);
    int bm, bn, after;
    conv_tc_tile((int64_t)N * Ho * Wo, Co, 1, &bm, &bn);
    sg_tc_shortcut none;
    memset(&none, 0, sizeof none);
    const sg_conv_fuse f = tc_fwd_fuse(fuse, Ho * Wo, bm, &after);
    if (TC_TILED(bm, bn, conv_tc_fwd_launch, st, (uint16_t *)y, x, wb, b, f, none, N, H, W, Ci, Co,
                 K, S, pad, Ho, Wo))
        return SG_ERR;
    return tc_fwd_stats_after(st, after, fuse, y, N, Ho * Wo, Co);
}

/* The shortcut fold: the forward kernel with the shortcut's tiles after the conv's (the same
 * tile rule: the reduction's length never changes the bits' order within a tile) */
int cu_conv_tc_fwd_sc(cudaStream_t st, void *y, sg_cat h, const uint16_t *wb, const float *b,
                      const sg_conv_fuse *fuse, sg_tc_shortcut sc, int N, int H, int W, int Ci,
                      int Co, int K, int pad) {
    int bm, bn, after;
    conv_tc_tile((int64_t)N * H * W, Co, 1, &bm, &bn);
    sg_conv_fuse f = tc_fwd_fuse(fuse, H * W, bm, &after);
    f.res = NULL; /* the fold adds the shortcut, never a stored residual */
    if (TC_TILED(bm, bn, conv_tc_fwd_launch, st, (uint16_t *)y, h, wb, b, f, sc, N, H, W, Ci, Co, K,
                 1, pad, H, W))
        return SG_ERR;
    return tc_fwd_stats_after(st, after, fuse, y, N, H * W, Co);
}

template <int BM, int BN>
static int conv_tc_dgrad_launch(cudaStream_t st, sg_cat dx, const uint16_t *dy, const uint16_t *wb,
                                sg_norm_bwd_fuse nb, int N, int H, int W, int Ci, int Co, int K,
                                int S, int pad, int Ho, int Wo, int accum) {
    /* the largest parity class has ceil(H/S) x ceil(W/S) pixels; smaller ones exit early */
    const int64_t Mmax = (int64_t)N * ((H + S - 1) / S) * ((W + S - 1) / S);
    dim3 grid((unsigned)((Mmax + BM - 1) / BM), (unsigned)((Ci + BN - 1) / BN), (unsigned)(S * S));
    void (*const kernel)(sg_cat, const uint16_t *, const uint16_t *, sg_norm_bwd_fuse, int, int,
                         int, int, int, int, int, int, int, int, int) =
        nb.part ? conv_tc_dgrad_kernel<BM, BN, true> : conv_tc_dgrad_kernel<BM, BN, false>;
    return tc_launch<BM, BN>(kernel, "conv_tc_dgrad_kernel", grid, st, dx, dy, wb, nb, N, H, W, Ci,
                             Co, K, S, pad, Ho, Wo, accum);
}

/* The backward partials (sg_norm_bwd_fuse.part) in the epilogue where nb->epilogue asks for
 * it, stride 1 makes a tile's rows consecutive pixels, dx is one buffer and the BM-row tiles
 * hold whole segments (then cuda_norm_bwd_terms after it), else cuda_norm_bwd_partials after the
 * data gradient: the same bits. The
 * second GPU session (bench/results/2026-11-28-nvidia-h200-run-3.md, per-layer table) put the
 * epilogue form at 64-74 TFLOP/s at 32x32 (batch 128), against 240-248 for the same kernel
 * without it; so the CUDA backend asks for it only under SG_TC_DGRAD_STATS=1. */
int cu_conv_tc_bwd_data(cudaStream_t st, sg_cat dx, const void *dy, const uint16_t *wb,
                        const sg_norm_bwd_fuse *nb, int N, int H, int W, int Ci, int Co, int K,
                        int S, int pad, int accum) {
    const int Ho = sg_ws_conv_out(H, K, S), Wo = sg_ws_conv_out(W, K, S);
    int bm, bn;
    conv_tc_tile((int64_t)N * ((H + S - 1) / S) * ((W + S - 1) / S), Ci, S * S, &bm, &bn);
    sg_norm_bwd_fuse f;
    memset(&f, 0, sizeof f);
    int after = 0;
    if (nb && nb->part) {
        f = *nb;
        f.seg = (int)sg_ws_norm_seg((int64_t)H * W);
        if (!f.epilogue || S != 1 || dx.c[1] || (H * W) % f.seg || bm % f.seg)
            f.part = NULL, after = 1;
    }
    if (TC_TILED(bm, bn, conv_tc_dgrad_launch, st, dx, (const uint16_t *)dy, wb, f, N, H, W, Ci, Co,
                 K, S, pad, Ho, Wo, accum))
        return SG_ERR;
    if (after) return cuda_norm_bwd_partials(st, nb, dx.p[0], N, H * W, Ci, DT_BF16);
    /* the epilogue left the partials: the terms after them, as cuda_norm_bwd_partials leaves */
    return f.part ? cuda_norm_bwd_terms(st, nb, N, H * W, Ci) : SG_OK;
}

template <int BM, int BN>
static int conv_tc_wgrad_launch(cudaStream_t st, float *part, const uint16_t *dy, sg_cat x,
                                sg_conv_fuse f, int N, int H, int W, int Ci, int Co, int K, int S,
                                int pad, int Ho, int Wo, int chunks, int chunk_len) {
    const int64_t Nn = (int64_t)K * K * Ci;
    dim3 grid((unsigned)((Nn + BN - 1) / BN), (unsigned)((Co + BM - 1) / BM), (unsigned)chunks);
    void (*const kernel)(float *, const uint16_t *, sg_cat, sg_conv_fuse, int, int, int, int, int,
                         int, int, int, int, int, int) =
        TC_NORM(f.norm, conv_tc_wgrad_kernel, BM, BN);
    return tc_launch<BM, BN>(kernel, "conv_tc_wgrad_kernel", grid, st, part, dy, x, f, N, H, W, Ci,
                             Co, K, S, pad, Ho, Wo, chunk_len);
}

int cu_conv_tc_bwd_weight(cudaStream_t st, float *part, const void *dy, sg_cat x,
                          const sg_conv_fuse *fuse, int N, int H, int W, int Ci, int Co, int K,
                          int S, int pad, int64_t chunks, int64_t chunk_len) {
    const int Ho = sg_ws_conv_out(H, K, S), Wo = sg_ws_conv_out(W, K, S);
    int bm, bn;
    conv_tc_tile(Co, (int64_t)K * K * Ci, chunks, &bm, &bn);
    return TC_TILED(bm, bn, conv_tc_wgrad_launch, st, part, (const uint16_t *)dy, x,
                    cu_conv_fuse_arg(fuse), N, H, W, Ci, Co, K, S, pad, Ho, Wo, (int)chunks,
                    (int)chunk_len);
}

/* ============ upconv2d: nearest-upsample + 3x3 conv from the low-res input (conv.cu) ============
 *
 * The three GEMMs of the sub-pixel form (conv.cu's section comment; wf[cls][co][t][ci], class
 * cls = 2 py + px, folded tap t = 2 a + b, bf16), on this file's tile machinery (tc_mainloop,
 * tc_epilogue, the KC/MC layouts, conv_tc_tile) and the convolutions' operand loads (the
 * gathered A rows, tc_gather_rows / tc_load_gather with tc_box_mask; the weight rows, KC and
 * MC; the partial tile's store), with their own geometry (a pixel's first tap, its mask, a
 * tap's offset) and tap tables:
 *   forward   per class (blockIdx.z = cls, like bwd data's parity classes): M = N*H*W low-res
 *             pixels p = (n, i, j), N = Co, reduction over (t, ci):
 *             A[p][(t,ci)] = x[n][i + py - 1 + a][j + px - 1 + b][ci] (0 outside),
 *             B[co][(t,ci)] = wf[cls][co][t][ci]; the store goes to y pixel (2i + py, 2j + px).
 *   bwd data  one GEMM: M = N*H*W low-res pixels q = (n, i, j), N = Ci, reduction over the 16
 *             (cls, t) and co: A[q][(cls,t,co)] = dy[n][2i + 2 - 2a - py][2j + 2 - 2b - px][co]
 *             (the output pixel (2i' + py, 2j' + px), i' = i - py + 1 - a, that reads q through
 *             (cls, t); 0 when i' or j' is outside), B[(cls,t,co)][ci] = wf[cls][co][t][ci].
 *             The 2x2 sum of the upsample's backward is the reduction itself.
 *   bwd wgt   per (chunk, class) (blockIdx.z = 4 chunk + cls): M = Co, N = 4 Ci (the folded
 *             row [t][ci]), reduction over the chunk's low-res pixels:
 *             A[co][p] = dy[n][2i + py][2j + px][co], B[p][(t,ci)] = x[n][i+py-1+a][j+px-1+b][ci];
 *             writes part[chunk][cls][co][t][ci] (conv.cu folds them back to 3x3).
 * FLOPs: 4 taps per output pixel in each pass, 4/9 of the 3x3 conv on the upsampled tensor.
 * Loads are 16-byte cp.async of 8 channels (Ci, Co multiples of 8), zero-filled outside. The
 * weight gradient decodes each row's pixel per tile (divisions; the conv's wgrad advances a
 * cursor instead: a GPU measurement decides whether that matters here). */

template <int BM, int BN>
__global__ void __launch_bounds__(TC_THREADS(BM, BN), TC_MIN_BLOCKS(BM, BN))
    upconv_tc_fwd_kernel(uint16_t *y, const uint16_t *x, const uint16_t *wf, const float *bias,
                         int N, int H, int W, int Ci, int Co) {
    SG_PDL_ENTER();
    constexpr int ROW_STEP = TC_THREADS(BM, BN) / 4, A_IT = BM / ROW_STEP, B_IT = BN / ROW_STEP;
    SG_DYNAMIC_SMEM(uint16_t, smem);
    const int tid = threadIdx.x, c4 = tid & 3, r0 = tid >> 2;
    const int cls = blockIdx.z, py = cls >> 1, px = cls & 1;
    const int P = N * H * W, HW = H * W;
    const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
    /* A rows: the low-res pixel of folded tap (0, 0) and the taps of the 2 x 2 window inside x
     * (the conv's forward geometry with K = 2, S = 1, the window moved by the class) */
    int pix0[A_IT];
    unsigned mask[A_IT];
    tc_gather_rows<A_IT, ROW_STEP>(pix0, mask, m0 + r0, P, [&](int p, int &pix, unsigned &msk) {
        const int im = p / HW, rem = p - im * HW, i = rem / W, jj = rem - i * W;
        const int ih0 = i + py - 1, iw0 = jj + px - 1;
        pix = (im * H + ih0) * W + iw0;
        msk = tc_box_mask(ih0, iw0, 2, 2, 1, H, W);
    });
    /* B rows: the offset of folded weight row co of this class */
    int64_t wrow[B_IT];
    tc_weight_rows<B_IT, ROW_STEP>(wrow, n0 + r0, Co, (int64_t)cls * Co * 4 * Ci, 4 * (int64_t)Ci);
    const int KT = 4 * ((Ci + TC_BK - 1) / TC_BK);
    int t = 0, c = 0; /* the next tile: folded tap t, channel slice c */
    auto load = [&](uint16_t *sA) {
        uint16_t *sB = sA + BM * TC_BK;
        const int ci = c + 8 * c4, delta = (t >> 1) * W + (t & 1);
        const bool cin = ci < Ci;
        tc_load_gather<A_IT, ROW_STEP>(sA, r0, c4, x, pix0, mask, t, delta, Ci, ci, cin);
        tc_load_weight_rows<B_IT, ROW_STEP>(sB, r0, c4, wf, wrow, (int64_t)t * Ci + ci, cin);
        c += TC_BK;
        if (c >= Ci) c = 0, t++;
    };
    float acc[4][4][4] = {};
    tc_mainloop<false, false, BM, BN>(acc, smem, KT, load);

    /* Co is even: co + 1 < Co too */
    tc_epilogue<BN>(acc, m0, n0, P, Co, [&](int p, int co, float v0, float v1) {
        const int im = p / HW, rem = p - im * HW, i = rem / W, jj = rem - i * W;
        const int64_t q = ((int64_t)im * 2 * H + 2 * i + py) * 2 * W + 2 * jj + px;
        v0 += bias ? bias[co] : 0.0f, v1 += bias ? bias[co + 1] : 0.0f;
        dev_st_bf16_pair(y + q * Co + co, v0, v1, 0);
    });
}

/* Backward data. blockIdx.x: BM low-res pixels; blockIdx.y: BN input channels. Loads: A (dy
 * rows) as the forward's A, one of 16 (class, tap) per tile run; B (wf, MC rows = output
 * channels of the slice) as conv_tc_dgrad_kernel's. */
template <int BM, int BN>
__global__ void __launch_bounds__(TC_THREADS(BM, BN), TC_MIN_BLOCKS(BM, BN))
    upconv_tc_dgrad_kernel(uint16_t *dx, const uint16_t *dy, const uint16_t *wf, int N, int H,
                           int W, int Ci, int Co, int accum) {
    SG_PDL_ENTER();
    constexpr int ROW_STEP = TC_THREADS(BM, BN) / 4, A_IT = BM / ROW_STEP;
    constexpr int BCPR = BN / 8, B_STEP = BM / 8, B_IT = TC_BK / B_STEP;
    SG_DYNAMIC_SMEM(uint16_t, smem);
    const int tid = threadIdx.x, c4 = tid & 3, r0 = tid >> 2;
    const int M = N * H * W, HW = H * W, W2 = 2 * W;
    const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
    /* A rows: the dy pixel (n, 2i, 2j) and the 16 (class, tap) whose output pixel is inside */
    int pix0[A_IT];
    unsigned mask[A_IT];
    tc_gather_rows<A_IT, ROW_STEP>(pix0, mask, m0 + r0, M, [&](int q, int &pix, unsigned &msk) {
        const int im = q / HW, rem = q - im * HW, i = rem / W, jj = rem - i * W;
        pix = (im * 2 * H + 2 * i) * W2 + 2 * jj;
        /* (class, tap) ct = 4 cls + 2 a + b reads output pixel (2 oi + py, 2 oj + px), oi =
         * i + 1 - py - a, oj = jj + 1 - px - b: per class, a 2 x 2 box stepping back */
        for (int cls = 0; cls < 4; cls++)
            msk |= tc_box_mask(i + 1 - (cls >> 1), jj + 1 - (cls & 1), 2, 2, -1, H, W) << 4 * cls;
    });
    const int cb = tid % BCPR, kr = tid / BCPR;
    const int ci = n0 + 8 * cb;
    const bool ci_ok = ci < Ci;
    const int KT = 16 * ((Co + TC_BK - 1) / TC_BK);
    int ct = 0, cs = 0; /* the next tile: (class, tap) number ct = 4 cls + t, channel slice cs */
    auto load = [&](uint16_t *sA) {
        uint16_t *sB = sA + BM * TC_BK;
        const int py = ct >> 3, px = (ct >> 2) & 1, a = (ct >> 1) & 1, b = ct & 1;
        const int delta = (2 - 2 * a - py) * W2 + (2 - 2 * b - px);
        const int co = cs + 8 * c4;
        tc_load_gather<A_IT, ROW_STEP>(sA, r0, c4, dy, pix0, mask, ct, delta, Co, co, co < Co);
        const int64_t wcls = (int64_t)(ct >> 2) * Co * 4 * Ci + (int64_t)(ct & 3) * Ci;
        tc_load_weight_cols<B_IT, B_STEP, BCPR>(sB, kr, cb, wf, wcls, 4 * (int64_t)Ci, cs, Co, ci,
                                                ci_ok);
        cs += TC_BK;
        if (cs >= Co) cs = 0, ct++;
    };
    float acc[4][4][4] = {};
    tc_mainloop<false, true, BM, BN>(acc, smem, KT, load);

    tc_epilogue<BN>(acc, m0, n0, M, Ci, [&](int q, int c, float v0, float v1) {
        dev_st_bf16_pair(dx + (int64_t)q * Ci + c, v0, v1, accum);
    });
}

/* Backward weight. blockIdx.x: BN columns n = t*Ci + ci of the class's folded row; blockIdx.y:
 * BM output channels; blockIdx.z = 4 chunk + cls: the class, and the chunk of low-res pixels
 * [chunk*chunk_len, min(P, (chunk+1)*chunk_len)), the reduction, 32 at a time. Loads as
 * conv_tc_wgrad_kernel's (A: dy, B: x, both MC), each row's pixel decoded per tile. */
template <int BM, int BN>
__global__ void __launch_bounds__(TC_THREADS(BM, BN), TC_MIN_BLOCKS(BM, BN))
    upconv_tc_wgrad_kernel(float *part, const uint16_t *dy, const uint16_t *x, int N, int H, int W,
                           int Ci, int Co, int chunk_len) {
    SG_PDL_ENTER();
    constexpr int ACPR = BM / 8, A_STEP = BN / 8, A_IT = TC_BK / A_STEP;
    constexpr int BCPR = BN / 8, B_STEP = BM / 8, B_IT = TC_BK / B_STEP;
    SG_DYNAMIC_SMEM(uint16_t, smem);
    const int tid = threadIdx.x;
    const int Nn = 4 * Ci, P = N * H * W, HW = H * W;
    const int cls = blockIdx.z & 3, chunk = blockIdx.z >> 2, py = cls >> 1, px = cls & 1;
    const int n0 = blockIdx.x * BN, m0 = blockIdx.y * BM;
    const int p0 = chunk * chunk_len, p1 = min(P, p0 + chunk_len);
    const int KT = p1 > p0 ? (p1 - p0 + TC_BK - 1) / TC_BK : 0;
    const int ca = tid % ACPR, ka = tid / ACPR, co = m0 + 8 * ca;
    const bool co_ok = co < Co;
    const int cbn = tid % BCPR, kb = tid / BCPR, n = n0 + 8 * cbn;
    const bool n_ok = n < Nn;
    const int t = n_ok ? n / Ci : 0, ci = n_ok ? n - t * Ci : 0;
    const int ta = py - 1 + (t >> 1), tb = px - 1 + (t & 1); /* the x row / column offsets */
    int pb = p0;
    auto load = [&](uint16_t *sA) {
        uint16_t *sB = sA + BM * TC_BK;
#pragma unroll
        for (int j = 0; j < A_IT; j++) {
            const int p = pb + ka + j * A_STEP;
            const bool v = co_ok && p < p1;
            const uint16_t *src = dy;
            if (v) {
                const int im = p / HW, rem = p - im * HW, i = rem / W, jj = rem - i * W;
                src = dy + (((int64_t)im * 2 * H + 2 * i + py) * 2 * W + 2 * jj + px) * Co + co;
            }
            sg_cp_async_16(sA + tc_mc(ka + j * A_STEP, ca, ACPR), src, v);
        }
#pragma unroll
        for (int j = 0; j < B_IT; j++) {
            const int p = pb + kb + B_STEP * j;
            bool v = n_ok && p < p1;
            const uint16_t *src = x;
            if (v) {
                const int im = p / HW, rem = p - im * HW, ih = rem / W + ta, iw = rem % W + tb;
                v = ih >= 0 && ih < H && iw >= 0 && iw < W;
                if (v) src = x + (((int64_t)im * H + ih) * W + iw) * Ci + ci;
            }
            sg_cp_async_16(sB + tc_mc(kb + B_STEP * j, cbn, BCPR), src, v);
        }
        pb += TC_BK;
    };
    float acc[4][4][4] = {};
    tc_mainloop<true, true, BM, BN>(acc, smem, KT, load);

    tc_store_partial<BN>(acc, part + ((int64_t)chunk * 4 + cls) * Co * Nn, m0, n0, Co, Nn);
}

template <int BM, int BN>
static int upconv_tc_fwd_launch(cudaStream_t st, uint16_t *y, const uint16_t *x, const uint16_t *wf,
                                const float *b, int N, int H, int W, int Ci, int Co) {
    const int64_t P = (int64_t)N * H * W;
    dim3 grid((unsigned)((P + BM - 1) / BM), (unsigned)((Co + BN - 1) / BN), 4u);
    return tc_launch<BM, BN>(upconv_tc_fwd_kernel<BM, BN>, "upconv_tc_fwd_kernel", grid, st, y, x,
                             wf, b, N, H, W, Ci, Co);
}

int cu_upconv_tc_fwd(cudaStream_t st, uint16_t *y, const uint16_t *x, const uint16_t *wf,
                     const float *b, int N, int H, int W, int Ci, int Co) {
    int bm, bn;
    conv_tc_tile((int64_t)N * H * W, Co, 4, &bm, &bn);
    return TC_TILED(bm, bn, upconv_tc_fwd_launch, st, y, x, wf, b, N, H, W, Ci, Co);
}

template <int BM, int BN>
static int upconv_tc_dgrad_launch(cudaStream_t st, uint16_t *dx, const uint16_t *dy,
                                  const uint16_t *wf, int N, int H, int W, int Ci, int Co,
                                  int accum) {
    const int64_t M = (int64_t)N * H * W;
    dim3 grid((unsigned)((M + BM - 1) / BM), (unsigned)((Ci + BN - 1) / BN));
    return tc_launch<BM, BN>(upconv_tc_dgrad_kernel<BM, BN>, "upconv_tc_dgrad_kernel", grid, st, dx,
                             dy, wf, N, H, W, Ci, Co, accum);
}

int cu_upconv_tc_bwd_data(cudaStream_t st, uint16_t *dx, const uint16_t *dy, const uint16_t *wf,
                          int N, int H, int W, int Ci, int Co, int accum) {
    int bm, bn;
    conv_tc_tile((int64_t)N * H * W, Ci, 1, &bm, &bn);
    return TC_TILED(bm, bn, upconv_tc_dgrad_launch, st, dx, dy, wf, N, H, W, Ci, Co, accum);
}

template <int BM, int BN>
static int upconv_tc_wgrad_launch(cudaStream_t st, float *part, const uint16_t *dy,
                                  const uint16_t *x, int N, int H, int W, int Ci, int Co,
                                  int chunks, int chunk_len) {
    dim3 grid((unsigned)((4 * Ci + BN - 1) / BN), (unsigned)((Co + BM - 1) / BM),
              (unsigned)(4 * chunks));
    return tc_launch<BM, BN>(upconv_tc_wgrad_kernel<BM, BN>, "upconv_tc_wgrad_kernel", grid, st,
                             part, dy, x, N, H, W, Ci, Co, chunk_len);
}

int cu_upconv_tc_bwd_weight(cudaStream_t st, float *part, const uint16_t *dy, const uint16_t *x,
                            int N, int H, int W, int Ci, int Co, int64_t chunks,
                            int64_t chunk_len) {
    int bm, bn;
    conv_tc_tile(Co, 4 * (int64_t)Ci, 4 * chunks, &bm, &bn);
    return TC_TILED(bm, bn, upconv_tc_wgrad_launch, st, part, dy, x, N, H, W, Ci, Co, (int)chunks,
                    (int)chunk_len);
}
