/* conv_wgmma.cu — the bf16 convolutions on Hopper's tensor cores, second generation: implicit
 * GEMMs on wgmma.mma_async m64nNk16 (bf16 operands from 128-byte-swizzled shared memory, fp32
 * accumulators in registers), fed by the tensor copy engine (TMA, cp.async.bulk.tensor, tile
 * mode) through an mbarrier ring, in warp-specialised blocks: one producer warpgroup, two
 * consumer warpgroups. sm_90a only (kernels/cuda/hopper.cuh); built apart from the sm_90 kernels
 * (kernels/CMakeLists.txt). Opt-in (SG_CONV_TC=wgmma, graph/backend_cuda_engines.c; fused
 * convolutions included): conv.cu's launchers and their mma.sync kernels (conv_tc.cu) stay the
 * default until a GPU has measured these.
 *
 * Shapes and GEMMs as conv_tc.cu: x[N,H,W,Ci] NHWC bf16 (sg_cat: channels [0, c0) from p[0],
 * [c0, Ci) from p[1]), w[Co][K][K][Ci] bf16 (the plan's bf16 weight copy), y[N,Ho,Wo,Co],
 * K in {1, 3}, S in {1, 2}, zero padding `pad` at the top/left (1: symmetric; 0 with S = 2:
 * DDPM's SAME, one row/column at the bottom/right), tap = kh*K + kw.
 *   forward   M = output pixels, N = Co, reduction over (tap, part, 64-channel chunk of the part)
 *   bwd data  per output-parity class (rh, rw) of the input pixels (as conv_tc.cu: stride 2
 *             never multiplies the zeros of the zero-inserted dy): M = the class's input
 *             pixels, N = Ci, reduction over (class tap, 64-channel chunk of Co)
 *   bwd wgt   M = Co, N = the columns (tap, part, 64-channel chunk) of dw, each chunk padded to
 *             64 channels, reduction over output pixels in 64-pixel tiles; the tiles are cut
 *             into wg_wgrad_chunks' count (at most sg_ws_wgrad_chunks(P, nw)) of contiguous
 *             chunks whose fp32 partials go to the workspace and are summed in chunk order
 *             (deterministic split-K, no atomics).
 *
 * Pixel tiles. TMA copies boxes, not gathered rows, so a tile of GEMM rows that are pixels is a
 * box of the NHWC tensor: tw x th pixels of tn images, tw = min(rows, 2^ceil(log2 Wo)),
 * th = min(rows / tw, 2^ceil(log2 Ho)), tn = rows / (tw th) (rows = 128 for the forward and data
 * tiles, 64 for the weight gradient's reduction tiles): powers of two whose product is exactly
 * `rows`, so a box always fills its tile (the model's images, 4..64 wide, waste nothing; other
 * shapes waste the pixels past the image, which read zeros or are never stored). Rows are in
 * box order: row r is pixel (n0 + r / (tw th), h0 + r / tw % th, w0 + r % tw).
 *
 * Filter taps and padding: one box per filter tap and 64-channel chunk (no im2col mode: the
 * host emulation does not emulate it, see hopper.cuh), at the tap's shifted coordinates. TMA
 * writes zeros for coordinates outside the tensor: that IS the zero padding, symmetric or SAME
 * (a box may start at -1, or end past H), and the zero channels past a part's end. Stride 2
 * (forward; the weight gradient's x boxes) sets the box's element strides to {1, 2, 2, 1}: the
 * box of tw output columns spans 2 tw input columns and copies every second one, so one copy
 * per tap still fills the tile. (Per-row boxes would take th tn copies per tap; element
 * strides keep it one, at no cost in bytes.) The backward data pass needs no strides: a parity
 * class is a stride-1 correlation on its sub-grid.
 *
 * Shared memory: every tile row is 64 bf16 = 128 bytes and every box lands 1024-aligned with
 * CU_TENSOR_MAP_SWIZZLE_128B (16-byte chunk c of row r at c ^ (r % 8)): the layout the 128B
 * wgmma descriptors read (hopper.cuh), free of bank conflicts for the tensor cores, with no
 * thread touching the tiles. Per stage: A = 128 rows x 64 (16 KiB) and B = BN x 64 (BN * 128
 * bytes); both as 64-row blocks of 8 KiB where the operand is MN-major.
 *   forward   A K-major (rows = pixels), B K-major (rows = co: the weights' ci runs)
 *   bwd data  A K-major (rows = pixels of dy), B MN-major (rows = co, 64 ci per 8 KiB block)
 *   bwd wgt   A MN-major (rows = pixels, 64 co per block: one per consumer), B MN-major (rows =
 *             pixels, 64 ci of one column block per 8 KiB block)
 *
 * Warp roles (384 threads, __launch_bounds__(384, 1), one block per SM): warpgroup 0 is the
 * producer: setmaxnreg.dec to 40 registers, one elected thread of its first warp issues every
 * copy; warpgroups 1 and 2 consume GEMM rows 0-63 and 64-127 (setmaxnreg.inc to 232): four
 * m64nBNk16 per 64-wide k-tile on one accumulator (BN/2 fp32 registers per thread). BN is 64,
 * 128, 192 or 256, picked per call to waste the fewest columns (wg_pick_bn): Co 128 and 256
 * (unet_cifar) and 64 and 192 (unet_adm64) fill whole tiles.
 *
 * Pipeline: WG_STAGES = 4 stages (48 KiB each at BN 256: 192 KiB of the 227), full[s] (1
 * arrival: the producer's arrive.expect_tx of the stage's bytes, then its copies complete the
 * transaction) and empty[s] (one arrival per consumer warp). The producer waits for empty[s]
 * before refilling; a consumer waits for full[s], issues its four wgmmas as one commit group,
 * then wait_group(1) retires the PREVIOUS k-tile's group, whose stage it then releases: one
 * group of wgmmas always in flight behind the copies of the next three stages. Why 4 stages: at
 * 128 x 256 x 64 a k-tile is 4 wgmmas of ~0.25 us together on an SM; three tiles in flight
 * cover the copy latency, and four 48 KiB stages are what fits.
 *
 * Grid (wg_pipeline's kernels: the per-tap forward, the data and weight gradients, the upsample
 * conv's three passes): the tiles
 * (a gx x gy x gz grid of them, x fastest) run on a block each by default, or with
 * cuda_conv_wgmma_persist (SG_WG_PERSIST=1) on a persistent grid, one block per SM, block b
 * taking tiles b, b + gridDim.x, ..: the ring above runs on across a block's tiles (its it-th
 * k-tile over all of them in stage it % WG_STAGES), and the consumers hand back each tile's
 * last stage after their final wait, so the producer loads the next tile's first stages while
 * they finish the current tile's wgmmas and its store, where a fresh block would start from an
 * empty pipeline. Each tile's k order and store are the same either way: the same bits.
 *
 * Epilogue: straight from the accumulators, as conv_tc.cu (thread t of a consumer warpgroup,
 * w = t / 32, g = t % 32 / 4, q = t % 4, holds rows 16 w + g (+ 8), columns 8 j + 2 q (+ 1)):
 * forward y = bf16(acc + b) as two channels in one 32-bit store; bwd data dx = bf16(acc) or
 * bf16(__fadd_rn(old, acc)) (dev_st_acc's rule: one fp32 add, one rounding) into the part of
 * the concatenation; bwd weight stores the fp32 partial tile. Then the chunk sum and the bias
 * gradient (cu_col_sum), as conv.cu.
 *
 * Fusions (sg_conv_fuse, planner/fuse.c; conv_tc.cu's three, with the bits of this file's
 * unfused calls: norm_act_apply then the conv, the conv then cuda_add_fwd, the conv then
 * cuda_norm_partials):
 *   - Statistics' partials (f.stats, forward): the next normalisation's per-(sample, segment,
 *     channel) Welford partials of the stored y (wg_fwd_store, gn_tile_partials: the partials
 *     pass's arithmetic on the same bf16 values). The stored tile goes to shared memory that
 *     the mainloop no longer needs (the stage ring per tap, the halo on the halo), so only on a
 *     block per tile (a persistent block's producer refills the ring for its next tile), only
 *     where a tile's 128 rows are consecutive pixels (tw = Wo, th dividing Ho, whole images or
 *     one image's rows) in whole segments, and only where the tile fits below the mbarriers;
 *     otherwise the launcher runs cuda_norm_partials after the conv. Named barrier 3 among the
 *     256 consumer threads before the tile is written (both consumers' wgmmas retired) and
 *     after (the tile complete).
 *   - Residual epilogue (f.res, forward): tc_add_res (cuda_common.cuh, shared with conv_tc.cu)
 *     on each pair after the bias: the conv output rounded to bf16, __fadd_rn with the
 *     residual's two bf16 values of the same pixel and channels, rounded by the store.
 *   - Prologue (f.norm; the operand that reads the input: the forward's A, the weight
 *     gradient's B): x is norm_act's input and the operand is y = dropout(silu(GroupNorm(x
 *     [+ v]))). TMA cannot transform, so the consumers rewrite each landed stage in shared
 *     memory before their wgmmas read it (wg_pipeline's fix step, after the full[s] wait):
 *     . Addressing: a thread takes whole 16-byte chunks (8 channels) by PHYSICAL position, 8
 *       consecutive threads the 8 chunks of one 128-byte row (no bank conflict); only the
 *       channel index is un-swizzled: physical chunk p of row r holds logical chunk
 *       p ^ (r % 8) (the stages are 1024-aligned), channels c + 8 (p ^ (r % 8)) of the box's
 *       64-channel chunk c of the part. The values: tc_norm_chunk (norm_apply.cuh:
 *       norm_apply_kernel's expressions, the dropout's element index that of x), rounded to
 *       bf16, so the wgmmas read the very operands the unfused conv loads.
 *     . Padding: row r of a box is GEMM pixel (n0 + r / (tw th), ph0 + r / tw % th,
 *       pw0 + r % tw), its tap's input pixel (n, ph S - pad + kh, pw S - pad + kw) (the box's
 *       element strides): a chunk whose input pixel is outside the tensor, or whose channels
 *       are past the part's, is left as TMA's zeros: the padding of y, after the activation
 *       (silu(shift) != 0). Rows of pixels past the output grid are rewritten like any other
 *       (what the unfused conv loads there is y too), so every byte wgmma reads is the
 *       unfused operand's.
 *     . Who: forward, each consumer warpgroup its own 64 rows of A (only its wgmmas read them;
 *       4 chunks a thread), then a named barrier among its 128 threads (ids 1 and 2);
 *       weight gradient, both consumers together the B tile they share (BN / 64 boxes of 64
 *       pixel rows, BN / 32 chunks a thread; column blocks past the last tap left alone),
 *       then a named barrier among the 256 (id 1). The producer warpgroup takes no part.
 *     . Ordering: the rewrite is ordinary shared stores (the generic proxy) and wgmma reads
 *       its operands through the async proxy: each writing thread runs fence.proxy.async
 *       after its stores and before the barrier that orders them with every wgmma-issuing
 *       thread (PTX ISA, memory consistency model: proxies). The same fence orders the
 *       stores before the TMA refill of the stage (the consumers' empty[s] arrivals come
 *       later), and the refill itself waits until the wgmmas that read the stage's previous
 *       contents have retired (empty[s]), so no rewrite overlaps a read or a copy. The host
 *       emulation reports a wgmma operand changed by ordinary stores with no fence since
 *       (coarsely: any thread's fence counts for all).
 *     . Cost: the NORM instances keep 168 registers, no spills (ptxas, nvcc 13, sm_90a), but
 *       ptxas reports C7515 for them: it serialises the wgmmas around the rewrite (the
 *       in-flight group is waited for before it), so a warpgroup's tensor-core work does not
 *       overlap its own rewrite (the forward's other consumer runs on; the weight gradient's
 *       two meet at their barrier). To measure on a GPU against apply + plain conv; the
 *       rewrite's arithmetic per element is conv_tc.cu's (its comment has the estimate).
 *
 * Numerics: bf16 products are exact in fp32; the tensor cores sum them in their own order, so
 * results differ from the CPU reference by fp32 rounding of the sums, and every output is a
 * function of the inputs and the shapes alone (fixed tiles, fixed order, no atomics), run
 * after run. Against the mma.sync kernels (conv_tc.cu): y and dx run the same k16 slices in
 * the same order (forward: tap, part, 16 channels of the part; data: class tap, 16 output
 * channels; the zero-filled slices past a part's end add exact zeros) into one fp32
 * accumulator, with the same epilogue, so they are equal bit for bit wherever the tensor cores
 * sum a k16 slice into the accumulator the same way for mma.sync and wgmma — the host
 * emulation does (tests/test_cuda_ops.c checks it there); the ISA does not say so for a GPU.
 * dw is not: its reduction groups the pixels by box (padded past the image's edge) and
 * chunks by box, where conv_tc.cu takes 32 consecutive pixels and chunks by pixel range. The
 * fused calls give their unfused calls' bits exactly (the same operands in the same order, the
 * same epilogue arithmetic): on the emulation checked per call and per training step; on a GPU
 * too unless the compiler contracts the apply pass's and the rewrite's expressions differently.
 */
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/hopper.cuh"
#include "kernels/cuda/norm_apply.cuh"
#include "kernels/cuda/tensor_core.cuh"

/* ================================ kernels ================================ */

#define WG_BK 64 /* reduction elements per k-tile: one 128-byte row of bf16 */
#define WG_STAGES 4
#define WG_CONSUMERS 2                        /* consumer warpgroups, 64 GEMM rows each */
#define WG_BM (64 * WG_CONSUMERS)             /* GEMM rows per block */
#define WG_THREADS (128 * (1 + WG_CONSUMERS)) /* the producer warpgroup, then the consumers */
static_assert(WG_THREADS % 8 == 0, "wg_norm_halo: a thread keeps its 16-byte chunk of a row");
#define WG_BLOCK 8192                  /* 64 rows of 128 bytes: one 64 x 64 box */
#define WG_A_BYTES (WG_BM * WG_BK * 2) /* 16 KiB */
#define WG_STAGE_BYTES(BN) (WG_A_BYTES + (BN)*WG_BK * 2)
/* the stages, the 2 x WG_STAGES mbarriers, and 1024 bytes to align the stages (hopper.cuh) */
#define WG_SMEM_BYTES(BN) (WG_STAGES * WG_STAGE_BYTES(BN) + 16 * WG_STAGES + 1024)

/* The scalar arguments of every kernel here. Pixel tiles (file comment): tw x th pixels of tn
 * images, nw x nh x nn of them over the image grid the GEMM rows (or reduction) walk. */
struct wg_args {
    int N, H, W, Ci, Co, K, S, pad, Ho, Wo, c0, c1;
    int tw, th, tn, nw, nh, nn;
    int chunks;     /* weight gradient: chunks of pixel tiles */
    int gx, gy, gz; /* the pipelined kernels' tiles: gx x gy x gz (wg_pipeline) */
    int sc0, sc1;   /* the shortcut fold's x: its parts' channels (0: no fold) */
    /* the forward on a resident halo: its box (hw x hh input pixels of tn images), the box's
     * bytes rounded up to 1024, the B stages */
    int hh, hw, hbox, stages;
};

/* The shortcut fold's operands (a conv2d_sc node, SC instances of the forward kernels): x's
 * parts in boxes of the output tile (stride 1, no padding: the 1x1 conv's input pixel is the
 * output pixel), ws [Co][Cin] in 64 x BN boxes, the shortcut's bias (may be NULL). */
struct wg_sc {
    CUtensorMap x0, x1, w;
    const float *bs;
};

/* The first pixel (n, h, w) of pixel tile i (tiles in (n, h, w) order, w fastest). */
__device__ __forceinline__ void wg_tile_origin(const wg_args &a, int i, int *n0, int *h0, int *w0) {
    *w0 = (i % a.nw) * a.tw;
    i /= a.nw;
    *h0 = (i % a.nh) * a.th;
    *n0 = (i / a.nh) * a.tn;
}

/* A reduction (forward) or column (weight gradient) block of the (tap, part, 64-channel chunk)
 * order: ch0, ch1 chunks per part (ceil(c / 64)). */
struct wg_chunk {
    int tap, part, c;
};
__device__ __forceinline__ wg_chunk wg_chunk_of(int i, int ch0, int ch1) {
    wg_chunk r;
    const int per = ch0 + ch1, j = i % per;
    r.tap = i / per;
    r.part = j >= ch0;
    r.c = (r.part ? j - ch0 : j) * WG_BK;
    return r;
}

/* Who rewrites a landed stage before the wgmmas read it (the fused prologue, file comment):
 * nobody; each consumer warpgroup its own 64 rows of A (the barrier among its 128 threads); or
 * both consumers together the B tile they share (the barrier among their 256). */
enum { WG_FIX_NONE, WG_FIX_OWN_A, WG_FIX_SHARED_B };

/* A tile index's coordinates in a grid of gx x gy x gz tiles (x fastest: the order in which a
 * grid of one block per tile would launch them). */
struct wg_xyz {
    int x, y, z;
};
__device__ __forceinline__ wg_xyz wg_xyz_of(int tile, int gx, int gy) {
    wg_xyz r;
    r.x = tile % gx;
    tile /= gx;
    r.y = tile % gy;
    r.z = tile / gy;
    return r;
}

/* The warp-specialised main loop shared by the three kernels, over the block's tiles: tile
 * blockIdx.x, then + gridDim.x, .. < ntiles (one tile where the grid has a block per tile; the
 * persistent grid's several, file comment). decode(tile) gives the tile's description T, with
 * T.kt its k-tiles and T.skip a tile with nothing to store (the producer and the consumers
 * decode alike, so both skip it). For each k-tile k of a tile the producer's load(T, k, sA, sB,
 * bar) issues its copies (exactly WG_STAGE_BYTES(BN) bytes, completing on bar); with FIX (not
 * WG_FIX_NONE) the consumers' fix(T, consumer, thread in warpgroup, sA, sB, k) then rewrites
 * landed chunks in place with ordinary shared stores, each thread its own chunks, followed by
 * the fence and barrier that make them the async proxy's (wgmma's) operands; the consumers
 * multiply stage tiles as TA / TB say (0: K-major, 1: MN-major, file comment) and hand their
 * accumulators to epi(T, consumer, thread in warpgroup, d). The stage ring runs on across
 * tiles: the block's it-th k-tile, counted over all its tiles, uses stage it % WG_STAGES in
 * phase (it / WG_STAGES) & 1, so the producer fills the next tile's first stages while the
 * consumers finish the last k-tiles and the store of the current one. Every thread of the
 * block calls it (no thread may have left before). */
template <int BN, int TA, int TB, int FIX, class Decode, class Load, class Fix, class Epi>
__device__ __forceinline__ void wg_pipeline(uint8_t *raw, int ntiles, const Decode &decode,
                                            const Load &load, const Fix &fix, const Epi &epi) {
    uint8_t *smem = sg_smem_align(raw, 1024);
    uint64_t *full = (uint64_t *)(smem + WG_STAGES * WG_STAGE_BYTES(BN)), *empty = full + WG_STAGES;
    const int tid = threadIdx.x, wg = tid / 128;
    if (tid == 0) {
        for (int s = 0; s < WG_STAGES; s++) {
            sg_mbar_init(&full[s], 1);
            sg_mbar_init(&empty[s], 4 * WG_CONSUMERS); /* one arrival per consumer warp */
        }
        sg_fence_mbar_init(); /* the inits, visible to the copy engine */
    }
    __syncthreads();
    if (wg == 0) {
        sg_setmaxnreg_dec(40);
        if (tid < 32 && sg_elect_one()) {
            int it = 0;
            for (int tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
                const auto ti = decode(tile);
                if (ti.skip) continue;
                for (int k = 0; k < ti.kt; k++, it++) {
                    const int s = it % WG_STAGES;
                    /* the it / STAGES-th refill of s waits for the consumers' release of the
                     * previous one (the first pass waits on the phase before the first: done) */
                    sg_mbar_wait(&empty[s], ((it / WG_STAGES) & 1) ^ 1);
                    uint8_t *sa = smem + s * WG_STAGE_BYTES(BN);
                    sg_mbar_arrive_expect_tx(&full[s], WG_STAGE_BYTES(BN));
                    load(ti, k, sa, sa + WG_A_BYTES, &full[s]);
                }
            }
        }
    } else {
        sg_setmaxnreg_inc(232);
        const int c = wg - 1, t = tid % 128;
        float d[BN / 2];
        int it = 0;
        for (int tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
            const auto ti = decode(tile);
            if (ti.skip) continue;
#pragma unroll
            for (int i = 0; i < BN / 2; i++) d[i] = 0.0f;
            for (int k = 0; k < ti.kt; k++, it++) {
                const int s = it % WG_STAGES;
                sg_mbar_wait(&full[s], (it / WG_STAGES) & 1);
                uint8_t *sa = smem + s * WG_STAGE_BYTES(BN), *sb = sa + WG_A_BYTES;
                if constexpr (FIX != WG_FIX_NONE) {
                    fix(ti, c, t, sa, sb, k);
                    /* PTX ISA (memory consistency model, proxies): wgmma reads its shared-memory
                     * operands through the async proxy, which the generic proxy's stores above
                     * reach only after a fence.proxy.async in each writing thread; the barrier
                     * then orders every writer's fence before every reader's wgmma (the wgmmas
                     * of stage s's previous use retired before the producer's refill: empty[s]) */
                    sg_fence_proxy_async();
                    if constexpr (FIX == WG_FIX_OWN_A) {
                        /* (literal ids: a computed one makes ptxas reserve all 16 barriers) */
                        static_assert(WG_CONSUMERS == 2, "one named barrier per consumer");
                        if (c == 0)
                            sg_named_barrier_sync(1, 128);
                        else
                            sg_named_barrier_sync(2, 128);
                    } else {
                        sg_named_barrier_sync(1, 128 * WG_CONSUMERS);
                    }
                }
                sg_wgmma_fence_operand(d);
                sg_wgmma_fence();
#pragma unroll
                for (int ks = 0; ks < WG_BK / 16; ks++) {
                    /* K-major: the k16 step is 32 bytes along the swizzled 128-byte rows, this
                     * consumer's 64 rows 8 KiB in; MN-major: 16 rows of 128 bytes, this
                     * consumer's 64-wide block of A 8 KiB in, B's 64-wide blocks 8 KiB apart
                     * (LBO) */
                    const uint64_t da =
                        TA ? sg_wgmma_desc(sa + c * WG_BLOCK + 2048 * ks, WG_BLOCK, 1024,
                                           SG_SWIZZLE_128B)
                           : sg_wgmma_desc(sa + c * WG_BLOCK + 32 * ks, 0, 1024, SG_SWIZZLE_128B);
                    const uint64_t db =
                        TB ? sg_wgmma_desc(sb + 2048 * ks, WG_BLOCK, 1024, SG_SWIZZLE_128B)
                           : sg_wgmma_desc(sb + 32 * ks, 0, 1024, SG_SWIZZLE_128B);
                    sg_wgmma_ss<BN, TA, TB>(d, da, db, 1);
                }
                sg_wgmma_commit();
                /* the previous k-tile's group has retired: its stage is free (each warp for
                 * itself) */
                sg_wgmma_wait(1);
                sg_wgmma_fence_operand(d);
                if (k > 0 && t % 32 == 0) sg_mbar_arrive(&empty[(it - 1) % WG_STAGES]);
            }
            sg_wgmma_wait(0);
            sg_wgmma_fence_operand(d);
            /* the tile's last stage goes back too: the producer may be waiting for it with the
             * next tile's copies (a tile of no k-tiles holds none) */
            if (ti.kt > 0 && t % 32 == 0) sg_mbar_arrive(&empty[(it - 1) % WG_STAGES]);
            epi(ti, c, t, d);
        }
    }
}

/* The fused prologue's rewrite of one landed box (file comment): rows r0, r0 + rstep, .. < nrows
 * of the box of 128-byte rows at `box` (rows in box order from pixel (n0, ph0, pw0) of the GEMM's
 * pixel grid), the calling thread the physical 16-byte chunk pc of each: logical chunk pc ^ (r % 8)
 * (128B swizzle), channels c + 8 (pc ^ (r % 8)) of the part (cp channels, at coff in x). A chunk
 * is rewritten only where TMA copied x: its channels inside the part and its input pixel
 * (n, ph S - pad + kh, pw S - pad + kw) inside the image; the rest stays TMA's zeros, the
 * padding of y (after the activation: silu(shift) != 0). */
__device__ __forceinline__ void wg_norm_box(uint8_t *box, const sg_conv_fuse &f, const wg_args &a,
                                            int r0, int rstep, int nrows, int pc, int n0, int ph0,
                                            int pw0, int kh, int kw, int c, int cp, int coff) {
#pragma unroll 1
    for (int r = r0; r < nrows; r += rstep) {
        const int ci = c + 8 * (pc ^ (r % 8));
        if (ci >= cp) continue;
        const int n = n0 + r / (a.tw * a.th);
        const int ih = (ph0 + r / a.tw % a.th) * a.S - a.pad + kh;
        const int iw = (pw0 + r % a.tw) * a.S - a.pad + kw;
        if (n >= a.N || ih < 0 || ih >= a.H || iw < 0 || iw >= a.W) continue;
        tc_norm_chunk((uint16_t *)(box + 128 * r + 16 * pc), f, n,
                      ((int64_t)n * a.H + ih) * a.W + iw, coff + ci, a.Ci);
    }
}

/* A consumer's store of a pixel tile's accumulators (the forwards, the data gradients): consumer
 * c's thread t holds rows 64 c + 16 (t / 32) + t % 32 / 4 (+ 8) and columns 8 jj + 2 (t % 4)
 * (+ 1) (file comment); row r is pixel (n0 + r / (tw th), i0 + r / tw % th, j0 + r % tw) of the
 * N x Hh x Ww grid (box order). For each of its rows inside the grid: R = at(r, n, i, j), then
 * st(R, col, v0, v1) for each column pair col = col0 + 8 jj + 2 q below cols (cols even: col + 1
 * is below too). */
template <int BN, class At, class St>
__device__ __forceinline__ void
wg_store_pixels(int c, int t, const float (&d)[BN / 2], const wg_args &a, int Hh, int Ww, int n0,
                int i0, int j0, int col0, int cols, const At &at, const St &st) {
    const int w = t / 32, g = t % 32 / 4, q = t % 4;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int r = 64 * c + 16 * w + g + 8 * h;
        const int n = n0 + r / (a.tw * a.th), i = i0 + r / a.tw % a.th, j = j0 + r % a.tw;
        if (n >= a.N || i >= Hh || j >= Ww) continue;
        const auto R = at(r, n, i, j);
#pragma unroll
        for (int jj = 0; jj < BN / 8; jj++) {
            const int col = col0 + 8 * jj + 2 * q;
            if (col < cols) st(R, col, d[4 * jj + 2 * h], d[4 * jj + 2 * h + 1]);
        }
    }
}

/* wg_pipeline's fix where nothing is rewritten (WG_FIX_NONE) */
struct wg_no_fix {
    template <class T>
    __device__ void operator()(const T &, int, int, uint8_t *, uint8_t *, int) const {}
};

/* The forward's statistics' partials in the epilogue (sg_conv_fuse.stats; both forward kernels,
 * where the launcher found the tile's 128 rows consecutive pixels in whole segments of one image
 * and the grid a block per tile): the stored bf16 tile goes to shared memory (the stage ring or
 * the halo, free once both consumers' wgmmas have retired), WG_STATS_ROW_WORDS(BN) 32-bit words a
 * row (BN values, then 16 bytes that put the 8 rows of a warp's store on distinct banks), and
 * the 256 consumer threads run gn_tile_partials over it: the partials pass's bits. */
#define WG_STATS_ROW_WORDS(BN) ((BN) / 2 + 4)
#define WG_STATS_BYTES(BN) (WG_BM * WG_STATS_ROW_WORDS(BN) * 4)

/* The forward's store (both forward kernels): consumer c's thread t writes its accumulators'
 * rows of the pixel tile at (n0, oh0, ow0), channels co0 .. + BN: y = bf16(acc + b [+ bs, the
 * shortcut fold's bias]), with f.res the residual add (tc_add_res), two channels in one 32-bit
 * store; rows past the output grid and channels past Co are not stored. With f.stats, the
 * statistics' partials of the stored tile, through shared memory at `tile` (above): every
 * consumer thread calls it, after the tile's last wgmma has retired. */
template <int BN>
__device__ __forceinline__ void wg_fwd_store(int c, int t, const float (&d)[BN / 2], uint16_t *y,
                                             const float *bias, const float *bs, const wg_args &a,
                                             const sg_conv_fuse &f, int n0, int oh0, int ow0,
                                             int co0, uint8_t *tile) {
    uint32_t *words = (uint32_t *)tile;
    /* both consumers' wgmmas have read their last operands from the shared memory the tile
     * reuses (literal barrier ids, as wg_pipeline's; 1 and 2 are the prologue's) */
    if (f.stats) sg_named_barrier_sync(3, 128 * WG_CONSUMERS);
    struct at_row {
        int64_t pix;
        int r;
    };
    wg_store_pixels<BN>(
        c, t, d, a, a.Ho, a.Wo, n0, oh0, ow0, co0, a.Co,
        [&](int r, int n, int oh, int ow) {
            return at_row{(((int64_t)n * a.Ho + oh) * a.Wo + ow) * a.Co, r};
        },
        [&](const at_row &R, int co, float v0, float v1) {
            v0 += bias ? bias[co] : 0.0f, v1 += bias ? bias[co + 1] : 0.0f;
            if (bs) /* the fold's shortcut bias, after conv2's (conv_tc.cu's order) */
                v0 += bs[co], v1 += bs[co + 1];
            if (f.res) /* the residual add (the conv's bf16 output, then the sum) */
                tc_add_res(v0, v1, (const uint16_t *)f.res + R.pix + co);
            const uint32_t w = dev_st_bf16_pair(y + R.pix + co, v0, v1, 0);
            if (f.stats) words[R.r * WG_STATS_ROW_WORDS(BN) + (co - co0) / 2] = w;
        });
    if (f.stats) {
        sg_named_barrier_sync(3, 128 * WG_CONSUMERS); /* the whole tile stored */
        const int64_t m0 = ((int64_t)n0 * a.Ho + oh0) * a.Wo + ow0;
        gn_tile_partials((const uint16_t *)tile, 2 * WG_STATS_ROW_WORDS(BN), f, WG_BM, BN, m0, co0,
                         (int64_t)a.N * a.Ho * a.Wo, a.Co, a.Ho * a.Wo, 128 * c + t,
                         128 * WG_CONSUMERS);
    }
}

/* Forward. Tile (a.gx x a.gy): x the pixel tile (128 output pixels, the box order of the file
 * comment), y the BN output channels. k-tile k = (tap, part, 64-channel chunk): A = the x box of
 * the part at the tap's input coordinates (element strides S), B = wb[n0 .. n0 + BN)[tap][coff + c
 * .. + 63] (a chunk past its part reads the other part's weights against A's zeros). NORM: x is
 * norm_act's input, A its output y: consumer warpgroup c rewrites its own 64 rows of each landed
 * A (wg_norm_box: thread t the physical chunk t % 8 of rows t / 8 + 16 i). f.res: the residual
 * add in the store (tc_add_res). SC (the shortcut fold, conv_tc.cu's order): after conv2's
 * KK (ch0 + ch1) k-tiles, one per 64-channel chunk of x's parts (sch0 + sch1): A = the x box of
 * the output tile itself, B = ws[co0 .. + BN)[coff + c .. + 63]; the prologue rewrites conv2's
 * tiles only, and the store adds the shortcut's bias after conv2's. */
template <int BN, bool NORM, bool SC>
__global__ void __launch_bounds__(WG_THREADS, 1)
    conv_wg_fwd_kernel(uint16_t *y, const float *bias, const __grid_constant__ CUtensorMap xm0,
                       const __grid_constant__ CUtensorMap xm1,
                       const __grid_constant__ CUtensorMap wm, const __grid_constant__ wg_args a,
                       const __grid_constant__ sg_conv_fuse f, const __grid_constant__ wg_sc sc) {
    SG_PDL_ENTER();
    SG_DYNAMIC_SMEM(uint8_t, raw);
    const int ch0 = (a.c0 + WG_BK - 1) / WG_BK, ch1 = (a.c1 + WG_BK - 1) / WG_BK;
    const int KT1 = a.K * a.K * (ch0 + ch1), sch0 = (a.sc0 + WG_BK - 1) / WG_BK,
              sch1 = (a.sc1 + WG_BK - 1) / WG_BK;
    struct tile {
        int n0, oh0, ow0, co0, kt;
        bool skip;
    };
    auto decode = [&](int i) {
        const wg_xyz g = wg_xyz_of(i, a.gx, a.gy);
        tile r;
        wg_tile_origin(a, g.x, &r.n0, &r.oh0, &r.ow0);
        r.co0 = g.y * BN;
        r.kt = KT1 + (SC ? sch0 + sch1 : 0);
        r.skip = false;
        return r;
    };
    auto load = [&](const tile &u, int k, uint8_t *sA, uint8_t *sB, uint64_t *bar) {
        if (SC && k >= KT1) { /* the shortcut: x at the output pixels, ws */
            const int j = k - KT1, part = j >= sch0, c = (part ? j - sch0 : j) * WG_BK;
            sg_tma_load_4d(sA, part ? &sc.x1 : &sc.x0, bar, c, u.ow0, u.oh0, u.n0);
            sg_tma_load_2d(sB, &sc.w, bar, (part ? a.sc0 : 0) + c, u.co0);
            return;
        }
        const wg_chunk q = wg_chunk_of(k, ch0, ch1);
        const int kh = q.tap / a.K, kw = q.tap % a.K;
        sg_tma_load_4d(sA, q.part ? &xm1 : &xm0, bar, q.c, u.ow0 * a.S - a.pad + kw,
                       u.oh0 * a.S - a.pad + kh, u.n0);
        sg_tma_load_2d(sB, &wm, bar, q.tap * a.Ci + (q.part ? a.c0 : 0) + q.c, u.co0);
    };
    auto fix = [&](const tile &u, int c, int t, uint8_t *sA, uint8_t *, int k) {
        if constexpr (NORM) {
            if (SC && k >= KT1) return; /* x is loaded as it is */
            const wg_chunk q = wg_chunk_of(k, ch0, ch1);
            wg_norm_box(sA, f, a, 64 * c + t / 8, 16, 64 * (c + 1), t % 8, u.n0, u.oh0, u.ow0,
                        q.tap / a.K, q.tap % a.K, q.c, q.part ? a.c1 : a.c0, q.part ? a.c0 : 0);
        }
    };
    auto epi = [&](const tile &u, int c, int t, auto &d) {
        /* the statistics' tile (a block per tile: the stage ring is free) */
        wg_fwd_store<BN>(c, t, d, y, bias, SC ? sc.bs : nullptr, a, f, u.n0, u.oh0, u.ow0, u.co0,
                         sg_smem_align(raw, 1024));
    };
    wg_pipeline<BN, 0, 0, NORM ? WG_FIX_OWN_A : WG_FIX_NONE>(raw, a.gx * a.gy, decode, load, fix,
                                                             epi);
}

/* ---- the kernels on a resident halo (conv_wg_fwd_halo_kernel, conv_wg_dgrad_halo_kernel) ----
 *
 * The block's A operand is one box per 64-channel chunk (the halo: the tile's input pixels and
 * the filter's reach around them, TMA's zeros outside the tensor), copied once, each on its own
 * mbarrier hbar[j]; B streams through a ring of `stages` stages (full[s], empty[s] as
 * wg_pipeline's). Thread 0 initialises the barriers; every thread of the block calls this. */
__device__ __forceinline__ void wg_halo_bars_init(uint64_t *full, uint64_t *empty, uint64_t *hbar,
                                                  int stages, int nch) {
    if (threadIdx.x == 0) {
        for (int s = 0; s < stages; s++) {
            sg_mbar_init(&full[s], 1);
            sg_mbar_init(&empty[s], 4 * WG_CONSUMERS); /* one arrival per consumer warp */
        }
        for (int j = 0; j < nch; j++) sg_mbar_init(&hbar[j], 1);
        sg_fence_mbar_init();
    }
    __syncthreads();
}
/* Consumer c's thread t: its ldmatrix row, GEMM row r (warp t / 32's 16 rows, as sg_ldmatrix_x4
 * feeds an m16 A fragment), as the halo pixel of r's tap-(0, 0) input (element strides a.S inside
 * the box), and *l16, which 16-byte half of the k16 slice the lane addresses. */
__device__ __forceinline__ int wg_halo_row0(const wg_args &a, int c, int t, int *l16) {
    const int lane = t % 32, r = 64 * c + 16 * (t / 32) + (lane & 7) + 8 * ((lane >> 3) & 1);
    *l16 = lane >> 4;
    return ((r / (a.tw * a.th)) * a.hh + (r / a.tw % a.th) * a.S) * a.hw + (r % a.tw) * a.S;
}
/* The A fragments of one 64-channel k-tile from the halo box at `box`: the lane's row is halo
 * pixel hp (its row's tap-(0, 0) pixel shifted by the tap), its 16-byte chunks un-swizzled
 * (c ^ (hp % 8): the box is 1024-aligned, CU_TENSOR_MAP_SWIZZLE_128B). */
__device__ __forceinline__ void wg_halo_frag(uint32_t (&af)[WG_BK / 16][4], const uint8_t *box,
                                             int hp, int l16) {
    const uint8_t *row = box + 128 * hp;
#pragma unroll
    for (int ks = 0; ks < WG_BK / 16; ks++)
        sg_ldmatrix_x4(af[ks], row + 16 * ((2 * ks + l16) ^ (hp % 8)));
}
/* A consumer's main loop on the resident halo: k-tiles 0 .. KT - 1, B in the ring's stages
 * (`stage` bytes apart from sb0; TB: B K-major (0) or MN-major (1), file comment), into d from
 * zero. frag(k, af) fills k-tile k's A registers from the halo before the stage's wait (and waits
 * for its box where k is the box's first reader) and returns true; false where k-tile k's A is in
 * the stage instead (the shortcut fold's), which from_stage(sb) then multiplies with the stage's
 * B (both from shared memory). The A registers of an mma_async stay in flight until the wait
 * that retires it, so k-tiles alternate between two register sets: k's are filled while k - 1's
 * group may still run, and k + 1 refills k - 1's only after k's wait(1) retired it; that wait
 * also frees k - 1's stage, which each warp hands back to the producer (lane: t % 32). */
template <int BN, int TB, class Frag, class FromStage>
__device__ __forceinline__ void wg_halo_mainloop(float (&d)[BN / 2], int KT, int stages,
                                                 const uint8_t *sb0, int stage, uint64_t *full,
                                                 uint64_t *empty, int lane, const Frag &frag,
                                                 const FromStage &from_stage) {
#pragma unroll
    for (int i = 0; i < BN / 2; i++) d[i] = 0.0f;
    uint32_t af0[WG_BK / 16][4], af1[WG_BK / 16][4];
    int s = 0, ph = 0, sprev = 0;
    auto step = [&](int k, uint32_t(&af)[WG_BK / 16][4]) {
        const bool in_halo = frag(k, af);
        sg_mbar_wait(&full[s], ph);
        const uint8_t *sb = sb0 + (int64_t)s * stage;
        sg_wgmma_fence_operand(d);
        sg_wgmma_fence();
        if (!in_halo) {
            from_stage(sb);
        } else {
#pragma unroll
            for (int ks = 0; ks < WG_BK / 16; ks++)
                sg_wgmma_rs<BN, TB>(
                    d, af[ks],
                    TB ? sg_wgmma_desc(sb + 2048 * ks, WG_BLOCK, 1024, SG_SWIZZLE_128B)
                       : sg_wgmma_desc(sb + 32 * ks, 0, 1024, SG_SWIZZLE_128B),
                    1);
        }
        sg_wgmma_commit();
        /* k-tile k - 1's group has retired (its A registers, the other set, are free): its stage
         * goes back to the producer (each warp for itself) */
        sg_wgmma_wait(1);
        sg_wgmma_fence_operand(d);
        if (k > 0 && lane == 0) sg_mbar_arrive(&empty[sprev]);
        sprev = s;
        if (++s == stages) s = 0, ph ^= 1;
    };
    int k = 0;
    for (; k + 1 < KT; k += 2) {
        step(k, af0);
        step(k + 1, af1);
    }
    if (k < KT) step(k, af0);
    sg_wgmma_wait(0);
    sg_wgmma_fence_operand(d);
}

/* The fused prologue's rewrite of the resident halo (conv_wg_fwd_halo_kernel): thread u of nu
 * (every thread of the block; nu a multiple of 8) takes the 16-byte chunks i = u, u + nu, .. of
 * the nch boxes (hpix rows of 128 bytes each, hbox apart; i = (j hpix + p) 8 + pc), box j once
 * its own mbarrier hbar[j] says it landed (so box 0 is rewritten while the later boxes are still
 * in flight). Physical chunk pc = u % 8 of row p throughout (nu % 8 == 0): logical chunk
 * pc ^ (p % 8) (128B swizzle), channels of the part as wg_norm_box, input pixel
 * (n0 + pn, oh0 S - pad + ph, ow0 S - pad + pw) for p = (pn hh + ph) hw + pw. Each step moves p
 * on by nu / 8, carried into pw, ph, pn and the box without a division (the loop had five
 * integer divisions and remainders by the halo's dimensions a chunk, and tc_norm_chunk three
 * more, each a software sequence on the GPU, for 8 elements of a few arithmetic instructions
 * each; now one multiply-high for the group (dev_div, cuda_common.cuh), the divisions once a thread
 * before the loop). Where TMA copied x (inside the image and the part) the chunk becomes y
 * (tc_norm_chunk_in, WIDE: no accumulator is live yet); elsewhere it stays TMA's zeros, the padding
 * of y. The same chunks, the same values: the same bits as before. */
__device__ __forceinline__ void wg_norm_halo(uint8_t *halo, uint64_t *hbar, const sg_conv_fuse &f,
                                             const wg_args &a, int u, int nu, int n0, int oh0,
                                             int ow0, int ch0, int nch) {
    const int hpix = a.tn * a.hh * a.hw, pc = u % 8, step = nu / 8;
    const int cg = a.Ci / f.G;
    const dev_fastdiv cgd = dev_fastdiv_of((uint32_t)cg);
    int j = 0, p = u / 8;
    while (p >= hpix) p -= hpix, j++;
    int pn = p / (a.hh * a.hw), ph = p / a.hw % a.hh, pw = p % a.hw;
    int landed = -1; /* the last box whose mbarrier this thread waited for */
#pragma unroll 1
    while (j < nch) {
        if (j != landed) sg_mbar_wait(&hbar[j], 0), landed = j;
        const int part = j >= ch0, cp = part ? a.c1 : a.c0;
        const int ci = (part ? j - ch0 : j) * WG_BK + 8 * (pc ^ (p & 7));
        const int n = n0 + pn;
        const int ih = oh0 * a.S - a.pad + ph, iw = ow0 * a.S - a.pad + pw;
        if (ci < cp && n < a.N && ih >= 0 && ih < a.H && iw >= 0 && iw < a.W) {
            const int ch = (part ? a.c0 : 0) + ci, gq = (int)dev_div((uint32_t)ch, cgd);
            tc_norm_chunk_in<true>((uint16_t *)(halo + (int64_t)j * a.hbox + 128 * p + 16 * pc), f,
                                   n, ((int64_t)n * a.H + ih) * a.W + iw, ch, a.Ci, n * f.G + gq,
                                   ch - gq * cg, cg);
        }
        p += step, pw += step;
        while (pw >= a.hw) pw -= a.hw, ph++;
        while (ph >= a.hh) ph -= a.hh, pn++;
        while (pn >= a.tn) pn -= a.tn, p -= hpix, j++;
    }
}

/* The forward on a resident halo (the launcher's choice where the fused prologue's halo fits:
 * sg_conv_fuse.halo, as conv_tc.cu's conv_tc_fwd_halo_kernel; every forward that fits with
 * SG_TC_HALO_ALL, NORM false).
 *
 * Why: conv_wg_fwd_kernel's NORM instance rewrites each landed A box in place, so every element
 * of x is transformed once per tap (9 times for a 3x3), between its wgmmas (ptxas serialises
 * them around it: C7515). Here the producer first copies the block's whole input box with its
 * halo, every 64-channel chunk of both parts (TMA, element strides 1: hw = (tw - 1) S + K
 * columns, hh = (th - 1) S + K rows, tn images, from (ow0 S - pad, oh0 S - pad, n0); TMA's zeros
 * outside the tensor are the padding), one box per chunk, 1024-aligned, each on its own mbarrier
 * (hbar[j]); then it streams only the weights, B, through `stages` stages. NORM: the whole block
 * rewrites the halo into y once (wg_norm_halo), box by box as each lands, then __syncthreads:
 * the producer warpgroup too, which has nothing else to do until the consumers free the first
 * stage (its elected thread has issued the halo and the first `stages` B copies before it), so
 * 384 threads share the rewrite instead of the consumers' 256, and the rewrite of the first box
 * overlaps the copies of the others. Registers: the rewrite runs before setmaxnreg (168 a
 * thread, ptxas' cap for the whole block); the producer lowers its count only after it (the
 * consumers' setmaxnreg.inc waits for that), then issues the rest of B. The consumers keep the
 * halo for the whole reduction, and wait for box j's mbarrier before its first tap reads it
 * (every thread then has seen each box land, whoever rewrote it).
 *
 * A from registers: the A fragment of k-tile (tap (kh, kw), part, chunk) is cut from the halo by
 * ldmatrix, each lane's row address the halo pixel of its GEMM row shifted by the tap
 * (kh hw + kw), its 16-byte chunk un-swizzled (c ^ (pixel % 8)); sg_wgmma_rs multiplies it with
 * B from shared memory. The fragment of wgmma's A in registers is mma.sync's (hopper.cuh), so
 * ldmatrix.x4 fills it as in conv_tc.cu (wg_halo_frag; the loop, wg_halo_mainloop, is the one the
 * data gradient's halo kernel runs too).
 *
 * Same bits: the same k16 slices in the same order (tap, part, 16 channels of the 64-channel
 * chunk, a part's zero tail included) on the same operand values (the rewrite is tc_norm_chunk,
 * as the apply pass), and the same store (wg_fwd_store): the halo forward, the per-tap forward
 * and the unfused plan give identical bits (cuda_ops_host checks all three; and, there, against
 * conv_tc.cu's); on a GPU, cuda_ops checks them since the third GPU session (2026-12-04).
 *
 * SC (the shortcut fold, as conv_wg_fwd_kernel's): each stage also holds an A box after its B
 * (16 KiB more a stage), and the fold's k-tiles past conv2's stream both: B = ws's chunk, A = the
 * x box of the output tile (TMA, stride 1), which the consumers multiply from shared memory
 * (wgmma with both operands there: the same products, into the same accumulator, as the
 * per-tap kernel's). */
template <int BN, bool NORM, bool SC>
__global__ void __launch_bounds__(WG_THREADS, 1)
    conv_wg_fwd_halo_kernel(uint16_t *y, const float *bias, const __grid_constant__ CUtensorMap hm0,
                            const __grid_constant__ CUtensorMap hm1,
                            const __grid_constant__ CUtensorMap wm,
                            const __grid_constant__ wg_args a,
                            const __grid_constant__ sg_conv_fuse f,
                            const __grid_constant__ wg_sc sc) {
    SG_PDL_ENTER();
    constexpr int B_BYTES = BN * WG_BK * 2, STAGE = B_BYTES + (SC ? WG_A_BYTES : 0);
    SG_DYNAMIC_SMEM(uint8_t, raw);
    uint8_t *smem = sg_smem_align(raw, 1024);
    const int ch0 = (a.c0 + WG_BK - 1) / WG_BK, ch1 = (a.c1 + WG_BK - 1) / WG_BK, nch = ch0 + ch1;
    uint8_t *halo = smem, *sb0 = smem + (int64_t)nch * a.hbox;
    uint64_t *full = (uint64_t *)(sb0 + (int64_t)a.stages * STAGE), *empty = full + a.stages,
             *hbar = empty + a.stages; /* nch: one per halo box */
    int n0, oh0, ow0;
    wg_tile_origin(a, blockIdx.x, &n0, &oh0, &ow0);
    const int sch0 = (a.sc0 + WG_BK - 1) / WG_BK, sch1 = (a.sc1 + WG_BK - 1) / WG_BK;
    const int co0 = blockIdx.y * BN, KT1 = a.K * a.K * nch, KT = KT1 + (SC ? sch0 + sch1 : 0);
    const int tid = threadIdx.x, wg = tid / 128;
    wg_halo_bars_init(full, empty, hbar, a.stages, nch);
    /* the producer's elected thread issues every copy: the halo, box j on hbar[j], then B,
     * k-tile k = (tap, part, chunk): wb[co0 .. + BN)[tap][coff + c .. + 63] */
    const bool leader = tid < 32 && sg_elect_one();
    int ps = 0, pph = 0; /* the leader's place in the ring */
    auto issue = [&](int k) {
        sg_mbar_wait(&empty[ps], pph ^ 1); /* the first pass: the phase before, done */
        uint8_t *st = sb0 + (int64_t)ps * STAGE;
        if (SC && k >= KT1) { /* the shortcut: ws's chunk, and x at the output pixels */
            const int j = k - KT1, part = j >= sch0, c = (part ? j - sch0 : j) * WG_BK;
            sg_mbar_arrive_expect_tx(&full[ps], B_BYTES + WG_A_BYTES);
            sg_tma_load_2d(st, &sc.w, &full[ps], (part ? a.sc0 : 0) + c, co0);
            sg_tma_load_4d(st + B_BYTES, part ? &sc.x1 : &sc.x0, &full[ps], c, ow0, oh0, n0);
        } else {
            sg_mbar_arrive_expect_tx(&full[ps], B_BYTES);
            const wg_chunk q = wg_chunk_of(k, ch0, ch1);
            sg_tma_load_2d(st, &wm, &full[ps], q.tap * a.Ci + (q.part ? a.c0 : 0) + q.c, co0);
        }
        if (++ps == a.stages) ps = 0, pph ^= 1;
    };
    const int kpre = KT < a.stages ? KT : a.stages; /* the copies issued before the rewrite */
    if (leader) {
        for (int j = 0; j < nch; j++) {
            sg_mbar_arrive_expect_tx(&hbar[j], (uint32_t)a.tn * a.hh * a.hw * (WG_BK * 2));
            sg_tma_load_4d(halo + (int64_t)j * a.hbox, j >= ch0 ? &hm1 : &hm0, &hbar[j],
                           (j >= ch0 ? j - ch0 : j) * WG_BK, ow0 * a.S - a.pad, oh0 * a.S - a.pad,
                           n0);
        }
        for (int k = 0; k < kpre; k++) issue(k);
    }
    if constexpr (NORM) {
        wg_norm_halo(halo, hbar, f, a, tid, WG_THREADS, n0, oh0, ow0, ch0, nch);
        __syncthreads(); /* every rewrite before any read */
    }
    if (wg == 0) {
        sg_setmaxnreg_dec(40);
        if (leader)
            for (int k = kpre; k < KT; k++) issue(k);
    } else {
        sg_setmaxnreg_inc(232);
        const int c = wg - 1, t = tid % 128;
        int l16;
        const int hp0 = wg_halo_row0(a, c, t, &l16);
        float d[BN / 2];
        /* A from the halo: k-tile (tap, part, chunk) at the tap's shift; the shortcut's (SC)
         * from the stage, with B */
        auto frag = [&](int k, uint32_t(&af)[WG_BK / 16][4]) {
            if (SC && k >= KT1) return false;
            const wg_chunk q = wg_chunk_of(k, ch0, ch1);
            const int j = (q.part ? ch0 : 0) + q.c / WG_BK;
            if (q.tap == 0) sg_mbar_wait(&hbar[j], 0); /* the box's first reader: landed */
            wg_halo_frag(af, halo + (int64_t)j * a.hbox, hp0 + q.tap / a.K * a.hw + q.tap % a.K,
                         l16);
            return true;
        };
        auto from_stage = [&](const uint8_t *sb) {
            const uint8_t *sa = sb + B_BYTES;
#pragma unroll
            for (int ks = 0; ks < WG_BK / 16; ks++)
                sg_wgmma_ss<BN, 0, 0>(
                    d, sg_wgmma_desc(sa + c * WG_BLOCK + 32 * ks, 0, 1024, SG_SWIZZLE_128B),
                    sg_wgmma_desc(sb + 32 * ks, 0, 1024, SG_SWIZZLE_128B), 1);
        };
        wg_halo_mainloop<BN, 0>(d, KT, a.stages, sb0, STAGE, full, empty, t % 32, frag, from_stage);
        /* the statistics' tile where the halo was */
        wg_fwd_store<BN>(c, t, d, y, bias, SC ? sc.bs : nullptr, a, f, n0, oh0, ow0, co0, smem);
    }
}

/* A consumer's store of a data gradient's tile (both dgrad kernels): the pixel tile (n0, i0, j0)
 * of parity class k's sub-grid (k.Hc x k.Wc; dx pixel (n, k.ih1 + S i, k.iw1 + S j)), columns
 * ci0 .. + BN of the concatenation dx: bf16(acc), or with accum one fp32 add to the old value
 * (dev_st_bf16_pair), into the part that holds the channel. */
template <int BN>
__device__ __forceinline__ void
wg_dgrad_store(int c, int t, const float (&d)[BN / 2], const sg_cat &dx, const wg_args &a,
               const sg_conv_class &k, int n0, int i0, int j0, int ci0, int accum) {
    uint16_t *d0 = (uint16_t *)dx.p[0], *d1 = (uint16_t *)dx.p[1];
    wg_store_pixels<BN>(
        c, t, d, a, k.Hc, k.Wc, n0, i0, j0, ci0, a.Ci,
        [&](int, int n, int i, int j) {
            return ((int64_t)n * a.H + k.ih1 + a.S * i) * a.W + k.iw1 + a.S * j;
        },
        [&](int64_t pix, int ci, float v0, float v1) {
            /* ci even and both parts even: ci + 1 in the part */
            uint16_t *dst = ci < a.c0 ? d0 + pix * a.c0 + ci : d1 + pix * a.c1 + (ci - a.c0);
            dev_st_bf16_pair(dst, v0, v1, accum);
        });
}

/* Backward data. Tile (a.gx x a.gy x a.gz): z the parity class, x the pixel tile of the class's
 * sub-grid (tiles sized for the largest class; a smaller class's tiles past its extent are
 * skipped), y the BN input channels of the concatenation. k-tile k = (class tap (th, tw), 64 output
 * channels cs): A = the dy box at (i0 + ohoff - th, j0 + owoff - tw), B = BN / 64 boxes
 * wb[cs .. + 63][tap][ci0 + 64 b .. + 63]. */
template <int BN>
__global__ void __launch_bounds__(WG_THREADS, 1)
    conv_wg_dgrad_kernel(const __grid_constant__ sg_cat dx, const __grid_constant__ CUtensorMap dym,
                         const __grid_constant__ CUtensorMap wm, const __grid_constant__ wg_args a,
                         int accum) {
    SG_PDL_ENTER();
    SG_DYNAMIC_SMEM(uint8_t, raw);
    const int chc = (a.Co + WG_BK - 1) / WG_BK;
    struct tile {
        sg_conv_class k;
        int n0, i0, j0, ci0, kt;
        bool skip;
    };
    auto decode = [&](int i) {
        const wg_xyz g = wg_xyz_of(i, a.gx, a.gy);
        tile r;
        r.k = sg_conv_class_of(g.z, a.H, a.W, a.K, a.S, a.pad);
        wg_tile_origin(a, g.x, &r.n0, &r.i0, &r.j0);
        r.skip = r.i0 >= r.k.Hc || r.j0 >= r.k.Wc; /* a smaller (or empty) class */
        r.ci0 = g.y * BN;
        r.kt = r.k.nth * r.k.ntw * chc;
        return r;
    };
    auto load = [&](const tile &u, int kt, uint8_t *sA, uint8_t *sB, uint64_t *bar) {
        const sg_conv_class &k = u.k;
        const int ct = kt / chc, cs = kt % chc * WG_BK, th = ct / k.ntw, tw = ct % k.ntw;
        const int tap = (k.rh + a.S * th) * a.K + (k.rw + a.S * tw);
        sg_tma_load_4d(sA, &dym, bar, cs, u.j0 + k.owoff - tw, u.i0 + k.ohoff - th, u.n0);
#pragma unroll
        for (int b = 0; b < BN / 64; b++)
            sg_tma_load_3d(sB + b * WG_BLOCK, &wm, bar, u.ci0 + 64 * b, tap, cs);
    };
    auto epi = [&](const tile &u, int c, int t, auto &d) {
        wg_dgrad_store<BN>(c, t, d, dx, a, u.k, u.n0, u.i0, u.j0, u.ci0, accum);
    };
    wg_pipeline<BN, 0, 1, WG_FIX_NONE>(raw, a.gx * a.gy * a.gz, decode, load, wg_no_fix(), epi);
}

/* Backward data of a stride-1 convolution on a resident halo of dy (the launcher's choice where
 * it fits and cuda_conv_wgmma_dgrad_halo leaves it on): a stride-1 data gradient is a correlation
 * of dy with the flipped filter, dx(i, j) = sum over (kh, kw, co) of dy(i + pad - kh,
 * j + pad - kw, co) w[co][kh][kw][ci], so the block's dy pixels and their reach are copied once,
 * as the forward's halo (conv_wg_fwd_halo_kernel, whose loop this runs: wg_halo_mainloop), where
 * conv_wg_dgrad_kernel copies a dy box per tap, K x K times the bytes of A.
 *   Tile (blockIdx.x, blockIdx.y): the pixel tile of dx (tw x th pixels of tn images, the box
 *   order of the file comment) and its BN input channels ci0 = BN blockIdx.y.
 *   Halo: one box per 64-channel chunk of dy (nch of them), hw = tw + K - 1 columns by hh =
 *   th + K - 1 rows of tn images from (j0 + pad - (K - 1), i0 + pad - (K - 1), n0); TMA's zeros
 *   outside dy are the padding.
 *   k-tiles: conv_wg_dgrad_kernel's order for its one parity class, k = (tap th K + tw, chunk
 *   cs): A = the halo box cs shifted by (K - 1 - th, K - 1 - tw) (the dy pixel i + pad - th of
 *   the tile's row i), B = BN / 64 boxes w[cs .. + 63][tap][ci0 + 64 b .. + 63] (MN-major, as
 *   there).
 *   Store: wg_dgrad_store (dx = bf16(acc), or one fp32 add to the old value, into the part).
 * The same k16 slices in the same order into the same accumulator, and the same store: the same
 * bits as conv_wg_dgrad_kernel (cuda_ops checks it on every stride-1 case). */
template <int BN>
__global__ void __launch_bounds__(WG_THREADS, 1)
    conv_wg_dgrad_halo_kernel(const __grid_constant__ sg_cat dx,
                              const __grid_constant__ CUtensorMap hm,
                              const __grid_constant__ CUtensorMap wm,
                              const __grid_constant__ wg_args a, int accum) {
    SG_PDL_ENTER();
    constexpr int STAGE = BN * WG_BK * 2;
    SG_DYNAMIC_SMEM(uint8_t, raw);
    uint8_t *smem = sg_smem_align(raw, 1024);
    const int nch = (a.Co + WG_BK - 1) / WG_BK, KT = a.K * a.K * nch, back = a.K - 1 - a.pad;
    uint8_t *halo = smem, *sb0 = smem + (int64_t)nch * a.hbox;
    uint64_t *full = (uint64_t *)(sb0 + (int64_t)a.stages * STAGE), *empty = full + a.stages,
             *hbar = empty + a.stages; /* nch: one per halo box */
    int n0, i0, j0;
    wg_tile_origin(a, blockIdx.x, &n0, &i0, &j0);
    const int ci0 = blockIdx.y * BN, tid = threadIdx.x, wg = tid / 128;
    wg_halo_bars_init(full, empty, hbar, a.stages, nch);
    if (wg == 0) {
        sg_setmaxnreg_dec(40);
        if (tid < 32 && sg_elect_one()) {
            for (int j = 0; j < nch; j++) {
                sg_mbar_arrive_expect_tx(&hbar[j], (uint32_t)a.tn * a.hh * a.hw * (WG_BK * 2));
                sg_tma_load_4d(halo + (int64_t)j * a.hbox, &hm, &hbar[j], j * WG_BK, j0 - back,
                               i0 - back, n0);
            }
            for (int k = 0, s = 0, ph = 0; k < KT; k++) {
                sg_mbar_wait(&empty[s], ph ^ 1); /* the first pass: the phase before, done */
                uint8_t *st = sb0 + (int64_t)s * STAGE;
                sg_mbar_arrive_expect_tx(&full[s], STAGE);
                const int tap = k / nch, cs = k % nch * WG_BK;
#pragma unroll
                for (int b = 0; b < BN / 64; b++)
                    sg_tma_load_3d(st + b * WG_BLOCK, &wm, &full[s], ci0 + 64 * b, tap, cs);
                if (++s == a.stages) s = 0, ph ^= 1;
            }
        }
    } else {
        sg_setmaxnreg_inc(232);
        const int c = wg - 1, t = tid % 128, KK1 = a.K * a.K - 1;
        int l16;
        const int hp0 = wg_halo_row0(a, c, t, &l16);
        float d[BN / 2];
        auto frag = [&](int k, uint32_t(&af)[WG_BK / 16][4]) {
            const int tap = k / nch, j = k % nch;
            if (tap == 0) sg_mbar_wait(&hbar[j], 0); /* the box's first reader: landed */
            /* the tap's shift: (K - 1 - th) hw + (K - 1 - tw) from the flipped tap */
            const int ft = KK1 - tap;
            wg_halo_frag(af, halo + (int64_t)j * a.hbox, hp0 + ft / a.K * a.hw + ft % a.K, l16);
            return true;
        };
        wg_halo_mainloop<BN, 1>(d, KT, a.stages, sb0, STAGE, full, empty, t % 32, frag,
                                [](const uint8_t *) {});
        wg_dgrad_store<BN>(c, t, d, dx, a, sg_conv_class_of(0, a.H, a.W, a.K, 1, a.pad), n0, i0, j0,
                           ci0, accum);
    }
}

/* Backward weight. Tile (a.gx x a.gy x a.gz): x the BN padded columns (BN / 64 column blocks
 * (tap, part, chunk)), y the 128 output channels, z the chunk of pixel tiles (64 output pixels
 * each, tiles [z T / chunks, (z + 1) T / chunks)). k-tile = one pixel tile: A = two dy boxes
 * (co0 .. + 63, co0 + 64 .. + 127: one per consumer), B = one x box per column block at the
 * tap's input coordinates (element strides S). A column block past the last tap loads tap 0
 * (its results are never stored). Writes part[z][co][tap][ci] (fp32). NORM: x is norm_act's
 * input, B its output y: both consumer warpgroups rewrite each landed B together (wg_norm_box:
 * consumer thread u = 128 c + t the physical chunk u % 8 of rows u / 8 + 32 i of every column
 * block), the blocks past the last tap left alone. */
template <int BN, bool NORM>
__global__ void __launch_bounds__(WG_THREADS, 1)
    conv_wg_wgrad_kernel(float *part, const __grid_constant__ CUtensorMap dym,
                         const __grid_constant__ CUtensorMap xm0,
                         const __grid_constant__ CUtensorMap xm1, const __grid_constant__ wg_args a,
                         const __grid_constant__ sg_conv_fuse f) {
    SG_PDL_ENTER();
    SG_DYNAMIC_SMEM(uint8_t, raw);
    const int ch0 = (a.c0 + WG_BK - 1) / WG_BK, ch1 = (a.c1 + WG_BK - 1) / WG_BK;
    const int KK = a.K * a.K;
    const int64_t T = (int64_t)a.nn * a.nh * a.nw;
    struct tile {
        int cb0, co0, z, t0, kt;
        bool skip;
    };
    auto decode = [&](int i) {
        const wg_xyz g = wg_xyz_of(i, a.gx, a.gy);
        tile r;
        r.cb0 = g.x * (BN / 64), r.co0 = g.y * WG_BM, r.z = g.z;
        r.t0 = (int)(g.z * T / a.chunks);
        r.kt = (int)((g.z + 1) * T / a.chunks) - r.t0;
        r.skip = false;
        return r;
    };
    auto load = [&](const tile &u, int kt, uint8_t *sA, uint8_t *sB, uint64_t *bar) {
        const int cb0 = u.cb0, co0 = u.co0;
        int n0, oh0, ow0;
        wg_tile_origin(a, u.t0 + kt, &n0, &oh0, &ow0);
#pragma unroll
        for (int c = 0; c < WG_CONSUMERS; c++)
            sg_tma_load_4d(sA + c * WG_BLOCK, &dym, bar, co0 + 64 * c, ow0, oh0, n0);
#pragma unroll
        for (int b = 0; b < BN / 64; b++) {
            wg_chunk q = wg_chunk_of(cb0 + b, ch0, ch1);
            if (q.tap >= KK) q.tap = 0, q.part = 0, q.c = 0;
            const int kh = q.tap / a.K, kw = q.tap % a.K;
            sg_tma_load_4d(sB + b * WG_BLOCK, q.part ? &xm1 : &xm0, bar, q.c,
                           ow0 * a.S - a.pad + kw, oh0 * a.S - a.pad + kh, n0);
        }
    };
    auto fix = [&](const tile &u, int c, int t, uint8_t *, uint8_t *sB, int kt) {
        if constexpr (NORM) {
            const int cb0 = u.cb0;
            int n0, oh0, ow0;
            wg_tile_origin(a, u.t0 + kt, &n0, &oh0, &ow0);
            const int u = 128 * c + t;
#pragma unroll 1
            for (int b = 0; b < BN / 64; b++) {
                const wg_chunk q = wg_chunk_of(cb0 + b, ch0, ch1);
                if (q.tap >= KK) break; /* this block and the later ones: never stored */
                wg_norm_box(sB + b * WG_BLOCK, f, a, u / 8, 32, 64, u % 8, n0, oh0, ow0,
                            q.tap / a.K, q.tap % a.K, q.c, q.part ? a.c1 : a.c0, q.part ? a.c0 : 0);
            }
        }
    };
    auto epi = [&](const tile &u, int c, int t, auto &d) {
        const int cb0 = u.cb0, co0 = u.co0;
        const int w = t / 32, g = t % 32 / 4, q = t % 4;
        const int64_t ldw = (int64_t)KK * a.Ci;
        float *out = part + (int64_t)u.z * a.Co * ldw;
#pragma unroll
        for (int b = 0; b < BN / 64; b++) {
            const wg_chunk cq = wg_chunk_of(cb0 + b, ch0, ch1);
            const int cp = cq.part ? a.c1 : a.c0;
            if (cq.tap >= KK) continue;
            const int64_t col0 = (int64_t)cq.tap * a.Ci + (cq.part ? a.c0 : 0);
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int co = co0 + 64 * c + 16 * w + g + 8 * h;
                if (co >= a.Co) continue;
#pragma unroll
                for (int jj = 0; jj < 8; jj++) {
                    const int j = 8 * b + jj, ci = cq.c + 8 * jj + 2 * q;
                    if (ci >= cp) continue; /* the part's channels are even: ci + 1 < cp */
                    *(float2 *)(out + co * ldw + col0 + ci) =
                        make_float2(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
                }
            }
        }
    };
    wg_pipeline<BN, 1, 1, NORM ? WG_FIX_SHARED_B : WG_FIX_NONE>(raw, a.gx * a.gy * a.gz, decode,
                                                                load, fix, epi);
}

/* The upsample conv's forward (upconv2d: nearest x2 then 3x3, from the low-res input; conv_tc.cu's
 * sub-pixel form). Tile (a.gx x a.gy x a.gz): z the output parity class cls = 2 py + px, x the
 * pixel tile of the low-res grid (H x W, the box order of the file comment), y the BN output
 * channels. k-tile k = (folded tap t = 2 ta + tb, 64-channel chunk c): A = the x box at the tap's
 * coordinates (j0 + px - 1 + tb, i0 + py - 1 + ta; TMA's zeros outside are the padding), B =
 * wf[cls][co0 .. + BN)[t][c .. + 63] (the folded bf16 weights [4][Co][4][Ci] as a 4 Co x 4 Ci
 * matrix; rows past Co belong to the next class or lie outside, columns past the tap's Ci to
 * the next tap, both against zeros or never stored). The store: y pixel (2i + py, 2j + px) =
 * bf16(acc + b). k order (t, then 16-channel slices) and store as upconv_tc_fwd_kernel: the
 * same bits on the host emulation. */
template <int BN>
__global__ void __launch_bounds__(WG_THREADS, 1)
    upconv_wg_fwd_kernel(uint16_t *y, const float *bias, const __grid_constant__ CUtensorMap xm,
                         const __grid_constant__ CUtensorMap wfm,
                         const __grid_constant__ wg_args a) {
    SG_PDL_ENTER();
    SG_DYNAMIC_SMEM(uint8_t, raw);
    const int chc = (a.Ci + WG_BK - 1) / WG_BK;
    struct tile {
        int cls, n0, i0, j0, co0, kt;
        bool skip;
    };
    auto decode = [&](int i) {
        const wg_xyz g = wg_xyz_of(i, a.gx, a.gy);
        tile r;
        r.cls = g.z;
        wg_tile_origin(a, g.x, &r.n0, &r.i0, &r.j0);
        r.co0 = g.y * BN;
        r.kt = 4 * chc;
        r.skip = false;
        return r;
    };
    auto load = [&](const tile &u, int k, uint8_t *sA, uint8_t *sB, uint64_t *bar) {
        const int t = k / chc, c = k % chc * WG_BK, py = u.cls >> 1, px = u.cls & 1;
        sg_tma_load_4d(sA, &xm, bar, c, u.j0 + px - 1 + (t & 1), u.i0 + py - 1 + (t >> 1), u.n0);
        sg_tma_load_2d(sB, &wfm, bar, t * a.Ci + c, u.cls * a.Co + u.co0);
    };
    auto epi = [&](const tile &u, int c, int t, auto &d) {
        const int py = u.cls >> 1, px = u.cls & 1;
        wg_store_pixels<BN>(
            c, t, d, a, a.H, a.W, u.n0, u.i0, u.j0, u.co0, a.Co,
            [&](int, int n, int i, int j) {
                return (((int64_t)n * 2 * a.H + 2 * i + py) * 2 * a.W + 2 * j + px) * a.Co;
            },
            [&](int64_t pix, int co, float v0, float v1) {
                v0 += bias ? bias[co] : 0.0f, v1 += bias ? bias[co + 1] : 0.0f;
                dev_st_bf16_pair(y + pix + co, v0, v1, 0);
            });
    };
    wg_pipeline<BN, 0, 0, WG_FIX_NONE>(raw, a.gx * a.gy * a.gz, decode, load, wg_no_fix(), epi);
}

/* The upsample conv's backward data (conv_tc.cu's one GEMM over the low-res pixels). Tile (a.gx x
 * a.gy): x the pixel tile of the low-res grid (H x W, the box order of the file comment), y the
 * BN input channels. k-tile k = ((class, folded tap) ct = 4 cls + 2 ta + tb, 64 output channels
 * cs): A = the dy box at (2 j0 + 2 - 2 tb - px, 2 i0 + 2 - 2 ta - py) at element strides 2 (row
 * (i, j) of the tile reads the output pixel (2 i' + py, 2 j' + px), i' = i + 1 - py - ta, that
 * reaches it through (cls, ta, tb); TMA's zeros where i' or j' is outside: conv_tc.cu's mask),
 * B = BN / 64 boxes wf[cls][cs .. + 63][2 ta + tb][ci0 + 64 b .. + 63] (MN-major; rows past Co
 * are the next class's or outside, against A's zero channels). The 2 x 2 sum of the upsample's
 * backward is the reduction itself. k order (ct, then 16-channel slices) and store (dx =
 * bf16(acc), or one fp32 add to the old value) as upconv_tc_dgrad_kernel: the same bits on the
 * host emulation. */
template <int BN>
__global__ void __launch_bounds__(WG_THREADS, 1)
    upconv_wg_dgrad_kernel(uint16_t *dx, const __grid_constant__ CUtensorMap dym,
                           const __grid_constant__ CUtensorMap wfm,
                           const __grid_constant__ wg_args a, int accum) {
    SG_PDL_ENTER();
    SG_DYNAMIC_SMEM(uint8_t, raw);
    const int chc = (a.Co + WG_BK - 1) / WG_BK;
    struct tile {
        int n0, i0, j0, ci0, kt;
        bool skip;
    };
    auto decode = [&](int i) {
        const wg_xyz g = wg_xyz_of(i, a.gx, a.gy);
        tile r;
        wg_tile_origin(a, g.x, &r.n0, &r.i0, &r.j0);
        r.ci0 = g.y * BN;
        r.kt = 16 * chc;
        r.skip = false;
        return r;
    };
    auto load = [&](const tile &u, int k, uint8_t *sA, uint8_t *sB, uint64_t *bar) {
        const int ct = k / chc, cs = k % chc * WG_BK;
        const int py = ct >> 3, px = (ct >> 2) & 1, ta = (ct >> 1) & 1, tb = ct & 1;
        sg_tma_load_4d(sA, &dym, bar, cs, 2 * u.j0 + 2 - 2 * tb - px, 2 * u.i0 + 2 - 2 * ta - py,
                       u.n0);
#pragma unroll
        for (int b = 0; b < BN / 64; b++)
            sg_tma_load_3d(sB + b * WG_BLOCK, &wfm, bar, u.ci0 + 64 * b, ct & 3,
                           (ct >> 2) * a.Co + cs);
    };
    auto epi = [&](const tile &u, int c, int t, auto &d) {
        wg_store_pixels<BN>(
            c, t, d, a, a.H, a.W, u.n0, u.i0, u.j0, u.ci0, a.Ci,
            [&](int, int n, int i, int j) { return (((int64_t)n * a.H + i) * a.W + j) * a.Ci; },
            [&](int64_t pix, int ci, float v0, float v1) {
                dev_st_bf16_pair(dx + pix + ci, v0, v1, accum);
            });
    };
    wg_pipeline<BN, 0, 1, WG_FIX_NONE>(raw, a.gx * a.gy * a.gz, decode, load, wg_no_fix(), epi);
}

/* The upsample conv's backward weight (conv_tc.cu's per-class GEMMs, as conv_wg_wgrad_kernel's).
 * Tile (a.gx x a.gy x a.gz): x the BN padded columns (BN / 64 column blocks (folded tap t,
 * 64-channel chunk of Ci), 4 ceil(Ci / 64) of them), y the 128 output channels, z = 4 chunk +
 * cls: the output parity class (py, px) and the chunk of low-res pixel tiles (64 pixels each,
 * tiles [chunk T / chunks, (chunk + 1) T / chunks)). k-tile = one pixel tile (i0, j0): A = two
 * dy boxes (co0 .. + 63, co0 + 64 .. + 127, one per consumer) at (2 j0 + px, 2 i0 + py), element
 * strides 2 (the class's output pixels of the tile's low-res pixels), B = one x box per column
 * block at (j0 + px - 1 + tb, i0 + py - 1 + ta) (TMA's zeros outside: the padding; a column
 * block past the last tap loads tap 0, never stored). Writes part[chunk][cls][co][t][ci] (fp32),
 * conv.cu's layout: its fold back sums them into the 3 x 3 taps. */
template <int BN>
__global__ void __launch_bounds__(WG_THREADS, 1)
    upconv_wg_wgrad_kernel(float *part, const __grid_constant__ CUtensorMap dym,
                           const __grid_constant__ CUtensorMap xm,
                           const __grid_constant__ wg_args a) {
    SG_PDL_ENTER();
    SG_DYNAMIC_SMEM(uint8_t, raw);
    const int chc = (a.Ci + WG_BK - 1) / WG_BK;
    const int64_t T = (int64_t)a.nn * a.nh * a.nw;
    struct tile {
        int cb0, co0, z, t0, kt;
        bool skip;
    };
    auto decode = [&](int i) {
        const wg_xyz g = wg_xyz_of(i, a.gx, a.gy);
        const int chunk = g.z >> 2;
        tile r;
        r.cb0 = g.x * (BN / 64), r.co0 = g.y * WG_BM, r.z = g.z;
        r.t0 = (int)(chunk * T / a.chunks);
        r.kt = (int)((chunk + 1) * T / a.chunks) - r.t0;
        r.skip = false;
        return r;
    };
    auto load = [&](const tile &u, int kt, uint8_t *sA, uint8_t *sB, uint64_t *bar) {
        const int py = (u.z >> 1) & 1, px = u.z & 1;
        int n0, i0, j0;
        wg_tile_origin(a, u.t0 + kt, &n0, &i0, &j0);
#pragma unroll
        for (int c = 0; c < WG_CONSUMERS; c++)
            sg_tma_load_4d(sA + c * WG_BLOCK, &dym, bar, u.co0 + 64 * c, 2 * j0 + px, 2 * i0 + py,
                           n0);
#pragma unroll
        for (int b = 0; b < BN / 64; b++) {
            int t = (u.cb0 + b) / chc, ch = (u.cb0 + b) % chc * WG_BK;
            if (t >= 4) t = 0, ch = 0;
            sg_tma_load_4d(sB + b * WG_BLOCK, &xm, bar, ch, j0 + px - 1 + (t & 1),
                           i0 + py - 1 + (t >> 1), n0);
        }
    };
    auto epi = [&](const tile &u, int c, int t, auto &d) {
        const int w = t / 32, g = t % 32 / 4, q = t % 4;
        const int64_t ldw = 4 * (int64_t)a.Ci;
        float *out = part + (int64_t)u.z * a.Co * ldw; /* z = 4 chunk + cls: part's order */
#pragma unroll
        for (int b = 0; b < BN / 64; b++) {
            const int ft = (u.cb0 + b) / chc, ch = (u.cb0 + b) % chc * WG_BK;
            if (ft >= 4) continue;
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int co = u.co0 + 64 * c + 16 * w + g + 8 * h;
                if (co >= a.Co) continue;
#pragma unroll
                for (int jj = 0; jj < 8; jj++) {
                    const int j = 8 * b + jj, ci = ch + 8 * jj + 2 * q;
                    if (ci >= a.Ci) continue; /* Ci is even: ci + 1 < Ci */
                    *(float2 *)(out + co * ldw + (int64_t)ft * a.Ci + ci) =
                        make_float2(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
                }
            }
        }
    };
    wg_pipeline<BN, 1, 1, WG_FIX_NONE>(raw, a.gx * a.gy * a.gz, decode, load, wg_no_fix(), epi);
}

/* =============================== launchers =============================== */

/* Every launch of this file's pipelined kernels: their dynamic shared memory allowed, the
 * launch, errors named after the kernel. */
template <class... P, class... A>
static int wg_launch(void (*kernel)(P...), const char *name, dim3 grid, int bytes, cudaStream_t st,
                     A... args) {
    if (cuda_smem_attr(kernel, bytes, name)) return SG_ERR;
    SG_LAUNCH_NAMED(name, kernel, grid, WG_THREADS, bytes, st, args...);
    SG_LAUNCH_CHECK(name);
    return SG_OK;
}

static int wg_pow2(int v) {
    int p = 1;
    while (p < v) p <<= 1;
    return p;
}
/* The pixel tiles of `rows` pixels over an N x Hh x Ww image grid (file comment). */
static void wg_tiles(wg_args *a, int rows, int N, int Hh, int Ww) {
    a->tw = wg_pow2(Ww) < rows ? wg_pow2(Ww) : rows;
    a->th = wg_pow2(Hh) < rows / a->tw ? wg_pow2(Hh) : rows / a->tw;
    a->tn = rows / (a->tw * a->th);
    a->nw = (Ww + a->tw - 1) / a->tw;
    a->nh = (Hh + a->th - 1) / a->th;
    a->nn = (N + a->tn - 1) / a->tn;
}

/* The N tile: the fewest padded columns over BN in {256, 192, 128, 64}, ties to the larger. */
static int wg_pick_bn(int64_t n) {
    int best = 256;
    int64_t best_cols = (n + 255) / 256 * 256;
    for (int bn = 192; bn >= 64; bn -= 64) {
        const int64_t cols = (n + bn - 1) / bn * bn;
        if (cols < best_cols) best = bn, best_cols = cols;
    }
    return best;
}
/* The device's SM count (0 where no device answers). */
static int wg_sms(void) {
    static int sms = -1;
    if (sms < 0) {
        int dev = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
            cudaGetLastError();
            sms = 0;
        }
    }
    return sms;
}
/* The N tile of a pass whose output is mt row tiles by n columns (forward, data gradient): with
 * cuda_conv_wgmma_fill on, among the BN of wg_pick_bn's fewest padded columns, the one of least
 * estimated time waves x (BN + 64) (waves: ceil(blocks / SMs); 64: a tile's fixed share, its A
 * tile's copies and its store, in columns' worth) -- a narrower tile where the wide one leaves
 * SMs idle (unet_cifar at batch 128: 16 row tiles at 4x4, 64 at 8x8, against 132 SMs), ties to
 * the wider; else wg_pick_bn's. Each output's k order does not depend on BN: the same bits. */
static int wg_fill_sms; /* 0: off; < 0: the device's SM count; n > 0: n SMs (tests) */
void cuda_conv_wgmma_fill(int sms) {
    wg_fill_sms = sms;
}
static int wg_pick_bn_for(int64_t n, int64_t mt) {
    const int bn0 = wg_pick_bn(n), sms = wg_fill_sms < 0 ? wg_sms() : wg_fill_sms;
    if (sms <= 0) return bn0;
    const int64_t cols0 = (n + bn0 - 1) / bn0 * bn0;
    int best = bn0;
    int64_t best_cost = -1;
    for (int bn = 256; bn >= 64; bn -= 64) {
        if ((n + bn - 1) / bn * bn != cols0) continue; /* more padded columns */
        const int64_t blocks = mt * ((n + bn - 1) / bn),
                      cost = (blocks + sms - 1) / sms * (bn + 64);
        if (best_cost < 0 || cost < best_cost) best = bn, best_cost = cost;
    }
    return best;
}
/* The weight gradient's chunk count here: of 1 .. min(tiles, most) (most: the workspace rule's,
 * sg_ws_wgrad_chunks; tiles: the 64-pixel reduction tiles), the one of least estimated time,
 * waves x ceil(tiles / c) (a block's k-tiles), its blocks `per` a chunk, one an SM on WG_SMS;
 * ties to more chunks. The rule's count alone can spill a few blocks into a second wave: 32
 * chunks of unet_cifar's 32x32 128 -> 128 gradient are 192 blocks (BN 192), 8 of its 16x16
 * 256 -> 256 ones 144; 22 and 7 are one wave. A function of the shapes alone (WG_SMS a
 * constant, the persistent grid's blocks walk the same tiles), so are the bits. */
#define WG_SMS 132 /* an H100's or H200's SMs */
static int wg_wgrad_chunks(int64_t per, int64_t tiles, int64_t most) {
    const int64_t top = tiles < most ? tiles : most;
    int64_t best = top > 0 ? top : 1, best_cost = -1;
    for (int64_t c = best; c >= 1; c--) {
        const int64_t cost = (per * c + WG_SMS - 1) / WG_SMS * ((tiles + c - 1) / c);
        if (best_cost < 0 || cost < best_cost) best = c, best_cost = cost;
    }
    return (int)best;
}
#define WG_TILED(bn, fn, ...)                                                                      \
    ((bn) == 64    ? fn<64>(__VA_ARGS__)                                                           \
     : (bn) == 128 ? fn<128>(__VA_ARGS__)                                                          \
     : (bn) == 192 ? fn<192>(__VA_ARGS__)                                                          \
                   : fn<256>(__VA_ARGS__))

/* The pipelined kernels' grid (wg_pipeline): a block per tile, or with cuda_conv_wgmma_persist
 * at most that many blocks (one per SM by default), each running tiles blockIdx.x + i gridDim.x
 * in turn. The tiles and their order are the same either way, so are the bits. */
static int wg_persist_blocks; /* 0: a block per tile; < 0: one per SM; n > 0: at most n */
static long wg_persistent;    /* launches on a persistent grid, so far */
void cuda_conv_wgmma_persist(int blocks) {
    wg_persist_blocks = blocks;
}
long cuda_conv_wgmma_persistent_launches(void) {
    return wg_persistent;
}
static unsigned wg_grid(wg_args *a, int gx, int gy, int gz) {
    a->gx = gx, a->gy = gy, a->gz = gz;
    wg_persistent += wg_persist_blocks != 0;
    const int tiles = gx * gy * gz;
    const int cap = wg_persist_blocks < 0 ? wg_sms() : wg_persist_blocks; /* 0: a block per tile */
    return (unsigned)(cap > 0 && cap < tiles ? cap : tiles);
}

/* The halo forward's boxes (one per 64-channel chunk of either part) */
static int wg_halo_boxes(const wg_args &a) {
    return (a.c0 + WG_BK - 1) / WG_BK + (a.c1 + WG_BK - 1) / WG_BK;
}
/* A halo kernel's dynamic shared memory: the nch boxes, the B stages (with the shortcut fold's A
 * boxes where a.sc0 says there is one), the mbarriers (two a stage, one a box), and 1024 bytes
 * to align the boxes. */
static int wg_halo_smem(const wg_args &a, int bn, int nch) {
    const int stage = bn * WG_BK * 2 + (a.sc0 ? WG_A_BYTES : 0); /* the fold's A too */
    return nch * a.hbox + a.stages * (stage + 16) + 8 * nch + 1024;
}
/* Whether a halo of nch boxes fits (conv_wg_fwd_halo_kernel: x's chunks, input pixels at
 * element strides a.S; conv_wg_dgrad_halo_kernel: dy's, a.S = 1): its box dims within TMA's
 * 256, and the boxes with at least two B stages within the device's opt-in shared memory, at
 * the tile width *bn or, failing that, a narrower one (64 or 128 columns: more blocks, each its
 * own halo; the same bits). Sets a's halo fields and *bn where it fits. */
static int wg_halo_fit(wg_args *a, int *bn, int nch) {
    a->hw = (a->tw - 1) * a->S + a->K;
    a->hh = (a->th - 1) * a->S + a->K;
    if (a->hw > 256 || a->hh > 256 || a->S > a->K) return 0;
    a->hbox = (a->tn * a->hh * a->hw * WG_BK * 2 + 1023) / 1024 * 1024;
    const int tried[3] = {*bn, *bn % 128 ? 64 : 128, 64}, optin = cuda_smem_optin();
    for (int i = 0; i < 3; i++) {
        if (tried[i] > *bn || (i && tried[i] == tried[i - 1])) continue;
        for (a->stages = WG_STAGES; a->stages >= 2; a->stages--)
            if (wg_halo_smem(*a, tried[i], nch) <= optin) {
                *bn = tried[i];
                return 1;
            }
    }
    return 0;
}

/* The tensor map of a dense bf16 tensor (dims innermost first), 128B swizzle. */
static int wg_map(CUtensorMap *m, const void *base, int rank, const uint64_t *dims,
                  const uint32_t *box, const uint32_t *es, const char *fn, const char *what) {
    cuuint64_t gd[5], gs[4];
    cuuint32_t bx[5], el[5];
    uint64_t stride = 2;
    for (int i = 0; i < rank; i++) {
        gd[i] = dims[i], bx[i] = box[i], el[i] = es[i];
        stride *= dims[i];
        if (i + 1 < rank) gs[i] = stride;
    }
    const CUresult r =
        sg_tensor_map_encode_tiled(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, (cuuint32_t)rank,
                                   sg_cat_ptr(base), gd, gs, bx, el, CU_TENSOR_MAP_SWIZZLE_128B);
    if (r != CUDA_SUCCESS)
        return sg_set_error("%s: the tensor map of %s was refused (CUresult %d)", fn, what, (int)r);
    return SG_OK;
}
/* The NHWC activation [N][Hh][Ww][C] in boxes of 64 channels x (tw x th pixels of tn images) at
 * element strides S in w and h. */
static int wg_map_nhwc(CUtensorMap *m, const void *base, int N, int Hh, int Ww, int C,
                       const wg_args *a, int S, const char *fn, const char *what) {
    const uint64_t dims[4] = {(uint64_t)C, (uint64_t)Ww, (uint64_t)Hh, (uint64_t)N};
    const uint32_t box[4] = {WG_BK, (uint32_t)(a->tw * S), (uint32_t)(a->th * S), (uint32_t)a->tn};
    const uint32_t es[4] = {1, (uint32_t)S, (uint32_t)S, 1};
    return wg_map(m, base, 4, dims, box, es, fn, what);
}

static int wg_aligned128(const void *p) {
    return ((uintptr_t)p & 127u) == 0;
}

const char *cuda_conv2d_wgmma_refusal(sg_cat x, const void *y, const void *w, int N, int H, int W,
                                      int Co, int K, int S, int dt) {
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
        cudaGetLastError();
        return "no CUDA device to ask for its compute capability";
    }
    if (major != 9 || minor != 0)
        return "the wgmma kernels are built for sm_90a only (a compute capability 9.0 GPU)";
    if (cuda_conv2d_path(x, y, N, H, W, Co, K, S, dt) != SG_CONV_PATH_TENSOR_CORE)
        return "not a tensor-core convolution (bf16, every part of the input and Co multiples of "
               "8, 16-byte aligned operands)";
    if (!wg_aligned128(x.p[0]) || (x.c[1] && !wg_aligned128(x.p[1])) || !wg_aligned128(y) ||
        !wg_aligned128(w))
        return "an operand is not 128-byte aligned (the tensor maps' 128B swizzle)";
    return NULL;
}

/* The checks every launcher makes: the arguments (as conv.cu's), then the refusal. */
static int wg_check(const char *fn, sg_cat x, const void *y, const void *w, int N, int H, int W,
                    int Ci, int Co, int K, int S, int pad, int dt) {
    SG_ARG_CHECK((K == 1 || K == 3) && (S == 1 || S == 2), "%s: K=%d S=%d unsupported", fn, K, S);
    SG_ARG_CHECK(pad >= 0 && pad <= K / 2, "%s: padding %d with K=%d unsupported", fn, pad, K);
    SG_ARG_CHECK(N > 0 && H > 0 && W > 0 && Ci > 0 && Co > 0, "%s: bad shape", fn);
    SG_ARG_CHECK(x.c[0] > 0 && x.c[1] >= 0 && x.c[0] + x.c[1] == Ci && x.p[0] != NULL &&
                     (x.c[1] == 0 || x.p[1] != NULL) && y != NULL,
                 "%s: concatenation of %d + %d channels does not make Ci = %d", fn, x.c[0], x.c[1],
                 Ci);
    const char *why = cuda_conv2d_wgmma_refusal(x, y, w, N, H, W, Co, K, S, dt);
    SG_ARG_CHECK(why == NULL, "%s: %s", fn, why);
    return SG_OK;
}

/* The scalar arguments of a call; tiles set by the caller. */
static wg_args wg_args_of(sg_cat x, int N, int H, int W, int Ci, int Co, int K, int S, int pad) {
    wg_args a = {};
    a.N = N, a.H = H, a.W = W, a.Ci = Ci, a.Co = Co, a.K = K, a.S = S, a.pad = pad;
    a.Ho = sg_ws_conv_out(H, K, S), a.Wo = sg_ws_conv_out(W, K, S);
    a.c0 = x.c[0], a.c1 = x.c[1];
    return a;
}

/* The forward's launch, per tap (conv_wg_fwd_kernel: x in boxes of the pixel tile at element
 * strides S) or on the resident halo (conv_wg_fwd_halo_kernel: boxes of 64 channels x hw x hh x
 * tn at element strides 1, a.hh .. a.stages set by wg_halo_fit); the weights' map is the same.
 * With the shortcut fold (a.sc0 > 0): xs, ws and bs its operands, on the SC instances. */
template <int BN>
static int conv_wg_fwd_launch(cudaStream_t st, uint16_t *y, const float *b, sg_cat x,
                              const uint16_t *wb, wg_args a, sg_conv_fuse f, int halo, sg_cat xs,
                              const uint16_t *ws, const float *bs, int *stats_after) {
    const char *fn = a.sc0 ? "cuda_conv2d_wgmma_sc_fwd" : "cuda_conv2d_wgmma_fwd";
    CUtensorMap xm[2], wm;
    for (int part = 0; part < 2; part++) {
        const int c = part ? a.c1 : a.c0;
        const char *what = part ? "x (second part)" : "x (first part)";
        if (!c) {
            xm[1] = xm[0];
            continue;
        }
        const uint64_t dims[4] = {(uint64_t)c, (uint64_t)a.W, (uint64_t)a.H, (uint64_t)a.N};
        const uint32_t box[4] = {WG_BK, (uint32_t)a.hw, (uint32_t)a.hh, (uint32_t)a.tn},
                       es[4] = {1, 1, 1, 1};
        if (halo ? wg_map(&xm[part], x.p[part], 4, dims, box, es, fn, what)
                 : wg_map_nhwc(&xm[part], x.p[part], a.N, a.H, a.W, c, &a, a.S, fn, what))
            return SG_ERR;
    }
    const uint64_t wdims[2] = {(uint64_t)a.K * a.K * a.Ci, (uint64_t)a.Co};
    const uint32_t wbox[2] = {WG_BK, BN}, wes[2] = {1, 1};
    if (wg_map(&wm, wb, 2, wdims, wbox, wes, fn, "the bf16 weights")) return SG_ERR;
    /* the fold's x parts (boxes of the output tile, stride 1) and ws [Co][Cin]; else unused */
    wg_sc sc;
    memset(&sc, 0, sizeof sc);
    if (a.sc0) {
        if (wg_map_nhwc(&sc.x0, xs.p[0], a.N, a.H, a.W, a.sc0, &a, 1, fn, "the shortcut's x"))
            return SG_ERR;
        if (a.sc1 && wg_map_nhwc(&sc.x1, xs.p[1], a.N, a.H, a.W, a.sc1, &a, 1, fn,
                                 "the shortcut's x (second part)"))
            return SG_ERR;
        if (!a.sc1) sc.x1 = sc.x0;
        const uint64_t sdims[2] = {(uint64_t)(a.sc0 + a.sc1), (uint64_t)a.Co};
        if (wg_map(&sc.w, ws, 2, sdims, wbox, wes, fn, "the shortcut's bf16 weights"))
            return SG_ERR;
        sc.bs = bs;
    }
    /* the halo kernel: a block per tile (x pixels, y channels); the per-tap one pipelined */
    const int gx = a.nn * a.nh * a.nw, gy = (a.Co + BN - 1) / BN;
    const dim3 grid = halo ? dim3((unsigned)gx, (unsigned)gy) : dim3(wg_grid(&a, gx, gy, 1));
    void (*const kernel)(uint16_t *, const float *, const CUtensorMap, const CUtensorMap,
                         const CUtensorMap, const wg_args, const sg_conv_fuse, const wg_sc) =
        halo ? (a.sc0 ? (f.norm ? conv_wg_fwd_halo_kernel<BN, true, true>
                                : conv_wg_fwd_halo_kernel<BN, false, true>)
                      : (f.norm ? conv_wg_fwd_halo_kernel<BN, true, false>
                                : conv_wg_fwd_halo_kernel<BN, false, false>))
             : (a.sc0 ? (f.norm ? conv_wg_fwd_kernel<BN, true, true>
                                : conv_wg_fwd_kernel<BN, false, true>)
                      : (f.norm ? conv_wg_fwd_kernel<BN, true, false>
                                : conv_wg_fwd_kernel<BN, false, false>));
    const char *name = halo ? "conv_wg_fwd_halo_kernel" : "conv_wg_fwd_kernel";
    const int bytes = halo ? wg_halo_smem(a, BN, wg_halo_boxes(a)) : WG_SMEM_BYTES(BN);
    /* the statistics' partials in the epilogue (wg_fwd_store) where a tile's 128 rows are
     * consecutive pixels (whole rows of the image: tw = Wo; whole images, or one image's rows
     * evenly: th divides Ho, and tn = 1 unless th = Ho) in whole segments of one image, on a
     * block per tile (the ring is the block's alone after its tile), the stored tile fitting
     * below the mbarriers; else the partials pass after the conv (*stats_after): the same bits */
    *stats_after = 0;
    if (f.stats) {
        const int HoWo = a.Ho * a.Wo, seg = (int)sg_ws_norm_seg(HoWo);
        const int room = halo ? wg_halo_smem(a, BN, wg_halo_boxes(a)) - 1024 - a.stages * 16 -
                                    8 * wg_halo_boxes(a)
                              : WG_STAGES * WG_STAGE_BYTES(BN);
        f.stats_seg = seg;
        if (!(a.tw == a.Wo && a.Ho % a.th == 0 && (a.th == a.Ho || a.tn == 1) && HoWo % seg == 0 &&
              WG_BM % seg == 0 && grid.x * grid.y == (unsigned)(gx * gy) &&
              WG_STATS_BYTES(BN) <= room))
            f.stats = NULL, *stats_after = 1;
    }
    return wg_launch(kernel, name, grid, bytes, st, y, b, xm[0], xm[1], wm, a, f, sc);
}

/* The forward on bf16 weights wb [Co][K][K][Ci]: on the resident halo where f.halo asks for it
 * (cu_tc_fwd_on_halo: the fused prologue's by default, or every forward) and it fits
 * (wg_halo_fit), else per tap. With the shortcut fold where xs has channels (xs.c[0] > 0). The
 * statistics' partials (f.stats) in the epilogue where the launch allows, else by the pass after
 * (the same bits). */
static long wg_stats_epilogues; /* forwards with the partials in their epilogue, so far */
long cuda_conv_wgmma_stats_epilogues(void) {
    return wg_stats_epilogues;
}
static long wg_halo_forwards; /* forwards launched on the resident-halo kernel, so far */
long cuda_conv_wgmma_halo_forwards(void) {
    return wg_halo_forwards;
}
static int conv_wg_fwd(cudaStream_t st, uint16_t *y, sg_cat x, const uint16_t *wb, const float *b,
                       const sg_conv_fuse &f, int N, int H, int W, int Ci, int Co, int K, int S,
                       int pad, sg_cat xs, const uint16_t *ws, const float *bs) {
    int after = 0;
    wg_args a = wg_args_of(x, N, H, W, Ci, Co, K, S, pad);
    a.sc0 = xs.c[0], a.sc1 = xs.c[1];
    wg_tiles(&a, WG_BM, N, a.Ho, a.Wo);
    int bn = wg_pick_bn_for(Co, (int64_t)a.nn * a.nh * a.nw);
    const int halo = cu_tc_fwd_on_halo(f) && wg_halo_fit(&a, &bn, wg_halo_boxes(a));
    if (WG_TILED(bn, conv_wg_fwd_launch, st, y, b, x, wb, a, f, halo, xs, ws, bs, &after))
        return SG_ERR;
    if (f.stats && !after) wg_stats_epilogues++;
    if (halo) wg_halo_forwards++;
    return after ? cuda_norm_partials(st, f.stats, f.stats_ld, sg_cat1(y, Co), N, a.Ho * a.Wo, 0,
                                      DT_BF16)
                 : SG_OK;
}

int cuda_conv2d_wgmma_fwd(cudaStream_t st, void *y, sg_cat x, const void *w, const float *b,
                          const sg_conv_fuse *fuse, int N, int H, int W, int Ci, int Co, int K,
                          int S, int pad, int dt, void *ws, int64_t ws_bytes) {
    (void)ws, (void)ws_bytes; /* no scratch: the weights come in bf16 */
    const char *fn = "cuda_conv2d_wgmma_fwd";
    SG_ARG_CHECK(w != NULL, "%s: no weights", fn);
    if (wg_check(fn, x, y, w, N, H, W, Ci, Co, K, S, pad, dt)) return SG_ERR;
    if (cu_conv_fuse_check(fn, fuse, SG_CONV_PATH_TENSOR_CORE, N, Ci, dt)) return SG_ERR;
    return conv_wg_fwd(st, (uint16_t *)y, x, (const uint16_t *)w, b, cu_conv_fuse_arg(fuse), N, H,
                       W, Ci, Co, K, S, pad, sg_cat2(NULL, 0, NULL, 0), NULL, NULL);
}

int cuda_conv2d_wgmma_sc_fwd(cudaStream_t st, void *y, sg_cat h, const void *w, const float *b,
                             const sg_conv_fuse *fuse, sg_cat x, const void *ws, const float *bs,
                             int N, int H, int W, int Ci, int Co, int K, int pad, int dt) {
    const char *fn = "cuda_conv2d_wgmma_sc_fwd";
    SG_ARG_CHECK(w != NULL && ws != NULL, "%s: no weights", fn);
    if (wg_check(fn, h, y, w, N, H, W, Ci, Co, K, 1, pad, dt)) return SG_ERR;
    const int Cin = x.c[0] + x.c[1];
    if (wg_check(fn, x, y, ws, N, H, W, Cin, Co, 1, 1, 0, dt)) return SG_ERR;
    SG_ARG_CHECK(!fuse || !fuse->res, "%s: the fold adds the shortcut, not a residual", fn);
    if (cu_conv_fuse_check(fn, fuse, SG_CONV_PATH_TENSOR_CORE, N, Ci, dt)) return SG_ERR;
    return conv_wg_fwd(st, (uint16_t *)y, h, (const uint16_t *)w, b, cu_conv_fuse_arg(fuse), N, H,
                       W, Ci, Co, K, 1, pad, x, (const uint16_t *)ws, bs);
}

/* The weights [Co][K K][Ci] as the data gradients' MN-major B: boxes of 64 ci x 1 tap x 64 co */
static int wg_map_w_dgrad(CUtensorMap *m, const uint16_t *wb, const wg_args &a, const char *fn) {
    const uint64_t wdims[3] = {(uint64_t)a.Ci, (uint64_t)a.K * a.K, (uint64_t)a.Co};
    const uint32_t wbox[3] = {64, 1, WG_BK}, wes[3] = {1, 1, 1};
    return wg_map(m, wb, 3, wdims, wbox, wes, fn, "the bf16 weights");
}

/* The data gradient's launch, per tap (conv_wg_dgrad_kernel: dy in boxes of the class's pixel
 * tile, every parity class) or on the resident halo (conv_wg_dgrad_halo_kernel, stride 1: dy in
 * boxes of 64 channels x hw x hh x tn, a.hh .. a.stages set by wg_halo_fit). */
template <int BN>
static int conv_wg_dgrad_launch(cudaStream_t st, sg_cat dx, const uint16_t *dy, const uint16_t *wb,
                                wg_args a, int accum, int halo) {
    const char *fn = "cuda_conv2d_wgmma_bwd_data";
    CUtensorMap dym, wm;
    if (halo) {
        const uint64_t dims[4] = {(uint64_t)a.Co, (uint64_t)a.Wo, (uint64_t)a.Ho, (uint64_t)a.N};
        const uint32_t box[4] = {WG_BK, (uint32_t)a.hw, (uint32_t)a.hh, (uint32_t)a.tn},
                       es[4] = {1, 1, 1, 1};
        if (wg_map(&dym, dy, 4, dims, box, es, fn, "dy")) return SG_ERR;
    } else if (wg_map_nhwc(&dym, dy, a.N, a.Ho, a.Wo, a.Co, &a, 1, fn, "dy")) {
        return SG_ERR;
    }
    if (wg_map_w_dgrad(&wm, wb, a, fn)) return SG_ERR;
    if (halo) {
        const dim3 grid((unsigned)(a.nn * a.nh * a.nw), (unsigned)((a.Ci + BN - 1) / BN));
        return wg_launch(conv_wg_dgrad_halo_kernel<BN>, "conv_wg_dgrad_halo_kernel", grid,
                         wg_halo_smem(a, BN, (a.Co + WG_BK - 1) / WG_BK), st, dx, dym, wm, a,
                         accum);
    }
    const dim3 grid(wg_grid(&a, a.nn * a.nh * a.nw, (a.Ci + BN - 1) / BN, a.S * a.S));
    return wg_launch(conv_wg_dgrad_kernel<BN>, "conv_wg_dgrad_kernel", grid, WG_SMEM_BYTES(BN), st,
                     dx, dym, wm, a, accum);
}

/* The stride-1 data gradients on the resident halo where it fits (1, the default) or always per
 * tap (0): the same bits either way, so a GPU can time both (SG_WG_DGRAD_HALO, graph/
 * backend_cuda_engines.c). */
static int wg_dgrad_on_halo = 1;
static long wg_halo_dgrads; /* data gradients launched on the resident-halo kernel, so far */
void cuda_conv_wgmma_dgrad_halo(int on) {
    wg_dgrad_on_halo = on != 0;
}
long cuda_conv_wgmma_halo_dgrads(void) {
    return wg_halo_dgrads;
}

/* The backward data on bf16 weights wb [Co][K][K][Ci]. */
static int conv_wg_bwd_data(cudaStream_t st, sg_cat dx, const uint16_t *dy, const uint16_t *wb,
                            int N, int H, int W, int Ci, int Co, int K, int S, int pad, int accum) {
    wg_args a = wg_args_of(dx, N, H, W, Ci, Co, K, S, pad);
    /* tiles over the largest parity class, ceil(H / S) x ceil(W / S) pixels */
    wg_tiles(&a, WG_BM, N, (H + S - 1) / S, (W + S - 1) / S);
    int bn = wg_pick_bn_for(Ci, (int64_t)a.nn * a.nh * a.nw * S * S);
    /* a 1x1 reads each dy pixel once per tap already */
    const int halo =
        wg_dgrad_on_halo && S == 1 && K > 1 && wg_halo_fit(&a, &bn, (Co + WG_BK - 1) / WG_BK);
    if (WG_TILED(bn, conv_wg_dgrad_launch, st, dx, dy, wb, a, accum, halo)) return SG_ERR;
    wg_halo_dgrads += halo;
    return SG_OK;
}

int cuda_conv2d_wgmma_bwd_data(cudaStream_t st, sg_cat dx, const void *dy, const void *w, int N,
                               int H, int W, int Ci, int Co, int K, int S, int pad, int dt,
                               int accum, void *ws, int64_t ws_bytes) {
    (void)ws, (void)ws_bytes; /* no scratch: the weights come in bf16 */
    const char *fn = "cuda_conv2d_wgmma_bwd_data";
    SG_ARG_CHECK(w != NULL, "%s: no weights", fn);
    if (wg_check(fn, dx, dy, w, N, H, W, Ci, Co, K, S, pad, dt)) return SG_ERR;
    return conv_wg_bwd_data(st, dx, (const uint16_t *)dy, (const uint16_t *)w, N, H, W, Ci, Co, K,
                            S, pad, accum);
}

template <int BN>
static int conv_wg_wgrad_launch(cudaStream_t st, float *part, const uint16_t *dy, sg_cat x,
                                wg_args a, int64_t cols, const sg_conv_fuse &f) {
    const char *fn = "cuda_conv2d_wgmma_bwd_weight";
    CUtensorMap dym, xm0, xm1;
    if (wg_map_nhwc(&dym, dy, a.N, a.Ho, a.Wo, a.Co, &a, 1, fn, "dy")) return SG_ERR;
    if (wg_map_nhwc(&xm0, x.p[0], a.N, a.H, a.W, a.c0, &a, a.S, fn, "x (first part)"))
        return SG_ERR;
    if (a.c1 && wg_map_nhwc(&xm1, x.p[1], a.N, a.H, a.W, a.c1, &a, a.S, fn, "x (second part)"))
        return SG_ERR;
    if (!a.c1) xm1 = xm0;
    const dim3 grid(wg_grid(&a, (int)((cols + BN - 1) / BN), (a.Co + WG_BM - 1) / WG_BM, a.chunks));
    void (*const kernel)(float *, const CUtensorMap, const CUtensorMap, const CUtensorMap,
                         const wg_args, const sg_conv_fuse) =
        f.norm ? conv_wg_wgrad_kernel<BN, true> : conv_wg_wgrad_kernel<BN, false>;
    return wg_launch(kernel, "conv_wg_wgrad_kernel", grid, WG_SMEM_BYTES(BN), st, part, dym, xm0,
                     xm1, a, f);
}

/* The weight gradient's reduction tiles and columns: 64-pixel tiles (wg_tiles), cut into
 * wg_wgrad_chunks' count (at most sg_ws_wgrad_chunks(P, nw), the workspace rule's, and the
 * tiles, as the grid fills the SMs) in a->chunks; *cols the columns (tap, part, 64-channel
 * chunk); returns the N tile. */
static int wg_wgrad_setup(wg_args *a, int64_t *cols) {
    const int64_t P = (int64_t)a->N * a->Ho * a->Wo, nw = (int64_t)a->Co * a->K * a->K * a->Ci;
    wg_tiles(a, WG_BK, a->N, a->Ho, a->Wo);
    *cols =
        (int64_t)a->K * a->K * WG_BK * ((a->c0 + WG_BK - 1) / WG_BK + (a->c1 + WG_BK - 1) / WG_BK);
    const int bn = wg_pick_bn(*cols);
    a->chunks = wg_wgrad_chunks((*cols + bn - 1) / bn * ((a->Co + WG_BM - 1) / WG_BM),
                                (int64_t)a->nn * a->nh * a->nw, sg_ws_wgrad_chunks(P, nw));
    return bn;
}
int64_t cuda_conv2d_wgmma_wgrad_chunks(int N, int H, int W, int Ci, int Co, int K, int S, int pad) {
    wg_args a = wg_args_of(sg_cat1(NULL, Ci), N, H, W, Ci, Co, K, S, pad);
    int64_t cols;
    wg_wgrad_setup(&a, &cols);
    return a.chunks;
}

int cuda_conv2d_wgmma_bwd_weight(cudaStream_t st, float *dw, float *db, const void *dy, sg_cat x,
                                 const sg_conv_fuse *fuse, int N, int H, int W, int Ci, int Co,
                                 int K, int S, int pad, int dt, int accum, void *ws,
                                 int64_t ws_bytes) {
    const char *fn = "cuda_conv2d_wgmma_bwd_weight";
    if (wg_check(fn, x, dy, NULL, N, H, W, Ci, Co, K, S, pad, dt)) return SG_ERR;
    /* the prologue alone (a residual belongs to the forward) */
    const sg_conv_fuse *norm = fuse && fuse->norm ? fuse : NULL;
    if (cu_conv_fuse_check(fn, norm, SG_CONV_PATH_TENSOR_CORE, N, Ci, dt)) return SG_ERR;
    SG_ARG_CHECK(dw != NULL, "%s: no dw", fn);
    wg_args a = wg_args_of(x, N, H, W, Ci, Co, K, S, pad);
    const int64_t P = (int64_t)N * a.Ho * a.Wo, nw = (int64_t)Co * K * K * Ci;
    SG_WS_CHECK(sg_ws_conv_wgrad_chunked(P, Ci, Co, K, db != NULL), ws_bytes, fn);
    int64_t cols;
    const int bn = wg_wgrad_setup(&a, &cols);
    const int64_t most = sg_ws_wgrad_chunks(P, nw);
    float *part = (float *)ws;
    if (WG_TILED(bn, conv_wg_wgrad_launch, st, part, (const uint16_t *)dy, x, a, cols,
                 cu_conv_fuse_arg(norm)))
        return SG_ERR;
    /* the chunks' sum and db's column sums in one launch, conv.cu's (the same bits), db's
     * partials at conv.cu's offset in the workspace */
    return cu_wgrad_finish(st, dw, part, nw, a.chunks, accum, db, dy, dt, P, Co,
                           (char *)ws + sg_ws_align(most * nw * 4));
}

template <int BN>
static int upconv_wg_fwd_launch(cudaStream_t st, uint16_t *y, const uint16_t *x, const uint16_t *wf,
                                const float *b, wg_args a) {
    const char *fn = "cuda_upconv2d_wgmma_fwd";
    CUtensorMap xm, wfm;
    if (wg_map_nhwc(&xm, x, a.N, a.H, a.W, a.Ci, &a, 1, fn, "x")) return SG_ERR;
    const uint64_t dims[2] = {(uint64_t)4 * a.Ci, (uint64_t)4 * a.Co};
    const uint32_t box[2] = {WG_BK, BN}, es[2] = {1, 1};
    if (wg_map(&wfm, wf, 2, dims, box, es, fn, "the folded bf16 weights")) return SG_ERR;
    const dim3 grid(wg_grid(&a, a.nn * a.nh * a.nw, (a.Co + BN - 1) / BN, 4));
    return wg_launch(upconv_wg_fwd_kernel<BN>, "upconv_wg_fwd_kernel", grid, WG_SMEM_BYTES(BN), st,
                     y, b, xm, wfm, a);
}

/* The checks of the three upsample-conv launchers: the operands, the shape, and the refusal
 * (cuda_upconv2d_wgmma_refusal) with lo the low-res tensor (x, dx), hi the high-res one (y, dy),
 * wf the folded bf16 weights (NULL for the weight gradient). */
static int upconv_wg_check(const char *fn, const void *lo, const void *hi, const void *wf, int N,
                           int H, int W, int Ci, int Co, int dt) {
    SG_ARG_CHECK(lo != NULL && hi != NULL, "%s: no operands", fn);
    SG_ARG_CHECK(N > 0 && H > 0 && W > 0 && Ci > 0 && Co > 0, "%s: bad shape", fn);
    const char *why = cuda_upconv2d_wgmma_refusal(lo, hi, wf, N, H, W, Ci, Co, dt);
    SG_ARG_CHECK(why == NULL, "%s: %s", fn, why);
    return SG_OK;
}

const char *cuda_upconv2d_wgmma_refusal(const void *lo, const void *hi, const void *wf, int N,
                                        int H, int W, int Ci, int Co, int dt) {
    if (cuda_upconv2d_path(lo, hi, N, H, W, Ci, Co, dt) != SG_CONV_PATH_TENSOR_CORE)
        return "not a tensor-core upsample conv (bf16, Ci and Co multiples of 8, 16-byte aligned "
               "operands)";
    return cuda_conv2d_wgmma_refusal(sg_cat1(lo, Ci), hi, wf, N, H, W, Co, 3, 1, dt);
}

/* The forward's and the data gradient's common part: the checks, the bf16 fold of w into ws
 * (checked like any operand), the arguments with 128-pixel tiles of the low-res grid. */
static int upconv_wg_folded(const char *fn, cudaStream_t st, const void *lo, const void *hi,
                            const float *w, int N, int H, int W, int Ci, int Co, int dt, void *ws,
                            int64_t ws_bytes, wg_args *a) {
    SG_ARG_CHECK(w != NULL, "%s: no weights", fn);
    SG_WS_CHECK(sg_ws_upconv2d_fold(Ci, Co), ws_bytes, fn);
    if (upconv_wg_check(fn, lo, hi, ws, N, H, W, Ci, Co, dt)) return SG_ERR;
    if (cu_upconv_fold_bf16(st, ws, w, Ci, Co)) return SG_ERR;
    *a = wg_args_of(sg_cat1(lo, Ci), N, H, W, Ci, Co, 3, 1, 1);
    wg_tiles(a, WG_BM, N, H, W);
    return SG_OK;
}

int cuda_upconv2d_wgmma_fwd(cudaStream_t st, void *y, const void *x, const float *w, const float *b,
                            int N, int H, int W, int Ci, int Co, int dt, void *ws,
                            int64_t ws_bytes) {
    wg_args a;
    if (upconv_wg_folded("cuda_upconv2d_wgmma_fwd", st, x, y, w, N, H, W, Ci, Co, dt, ws, ws_bytes,
                         &a))
        return SG_ERR;
    return WG_TILED(wg_pick_bn_for(Co, (int64_t)a.nn * a.nh * a.nw * 4), upconv_wg_fwd_launch, st,
                    (uint16_t *)y, (const uint16_t *)x, (const uint16_t *)ws, b, a);
}

template <int BN>
static int upconv_wg_dgrad_launch(cudaStream_t st, uint16_t *dx, const uint16_t *dy,
                                  const uint16_t *wf, wg_args a, int accum) {
    const char *fn = "cuda_upconv2d_wgmma_bwd_data";
    CUtensorMap dym, wfm;
    /* dy [N][2H][2W][Co] in boxes of the low-res tile's class pixels: element strides 2 */
    if (wg_map_nhwc(&dym, dy, a.N, 2 * a.H, 2 * a.W, a.Co, &a, 2, fn, "dy")) return SG_ERR;
    /* wf [4][Co][4][Ci] as [4 Co][4][Ci]: boxes of 64 ci x one folded tap x 64 co */
    const uint64_t dims[3] = {(uint64_t)a.Ci, 4, (uint64_t)4 * a.Co};
    const uint32_t box[3] = {64, 1, WG_BK}, es[3] = {1, 1, 1};
    if (wg_map(&wfm, wf, 3, dims, box, es, fn, "the folded bf16 weights")) return SG_ERR;
    const dim3 grid(wg_grid(&a, a.nn * a.nh * a.nw, (a.Ci + BN - 1) / BN, 1));
    return wg_launch(upconv_wg_dgrad_kernel<BN>, "upconv_wg_dgrad_kernel", grid, WG_SMEM_BYTES(BN),
                     st, dx, dym, wfm, a, accum);
}

int cuda_upconv2d_wgmma_bwd_data(cudaStream_t st, void *dx, const void *dy, const float *w, int N,
                                 int H, int W, int Ci, int Co, int dt, int accum, void *ws,
                                 int64_t ws_bytes) {
    wg_args a;
    if (upconv_wg_folded("cuda_upconv2d_wgmma_bwd_data", st, dx, dy, w, N, H, W, Ci, Co, dt, ws,
                         ws_bytes, &a))
        return SG_ERR;
    return WG_TILED(wg_pick_bn_for(Ci, (int64_t)a.nn * a.nh * a.nw), upconv_wg_dgrad_launch, st,
                    (uint16_t *)dx, (const uint16_t *)dy, (const uint16_t *)ws, a, accum);
}

template <int BN>
static int upconv_wg_wgrad_launch(cudaStream_t st, float *part, const uint16_t *dy,
                                  const uint16_t *x, wg_args a, int64_t cols) {
    const char *fn = "cuda_upconv2d_wgmma_bwd_weight";
    CUtensorMap dym, xm;
    if (wg_map_nhwc(&dym, dy, a.N, 2 * a.H, 2 * a.W, a.Co, &a, 2, fn, "dy")) return SG_ERR;
    if (wg_map_nhwc(&xm, x, a.N, a.H, a.W, a.Ci, &a, 1, fn, "x")) return SG_ERR;
    const dim3 grid(
        wg_grid(&a, (int)((cols + BN - 1) / BN), (a.Co + WG_BM - 1) / WG_BM, 4 * a.chunks));
    return wg_launch(upconv_wg_wgrad_kernel<BN>, "upconv_wg_wgrad_kernel", grid, WG_SMEM_BYTES(BN),
                     st, part, dym, xm, a);
}

int cuda_upconv2d_wgmma_bwd_weight(cudaStream_t st, float *dw, float *db, const void *dy,
                                   const void *x, int N, int H, int W, int Ci, int Co, int dt,
                                   int accum, void *ws, int64_t ws_bytes) {
    const char *fn = "cuda_upconv2d_wgmma_bwd_weight";
    SG_ARG_CHECK(dw != NULL, "%s: no dw", fn);
    SG_WS_CHECK(sg_ws_upconv2d_bwd_weight(N, H, W, Ci, Co, db != NULL), ws_bytes, fn);
    if (upconv_wg_check(fn, x, dy, NULL, N, H, W, Ci, Co, dt)) return SG_ERR;
    /* 64-pixel reduction tiles of the low-res grid, cut into wg_wgrad_chunks' count (at most
     * sg_ws_wgrad_chunks(P, 16 Co Ci), conv.cu's partials layout) */
    wg_args a = wg_args_of(sg_cat1(x, Ci), N, H, W, Ci, Co, 3, 1, 1);
    wg_tiles(&a, WG_BK, N, H, W);
    const int64_t P = (int64_t)N * H * W, tiles = (int64_t)a.nn * a.nh * a.nw,
                  most = sg_ws_wgrad_chunks(P, (int64_t)16 * Co * Ci);
    /* the columns: 4 folded taps x ceil(Ci / 64) blocks, a multiple of 256 (BN 256, no waste) */
    const int64_t cols = 4 * WG_BK * (int64_t)((Ci + WG_BK - 1) / WG_BK);
    a.chunks = wg_wgrad_chunks((cols + 255) / 256 * ((Co + WG_BM - 1) / WG_BM) * 4, tiles, most);
    float *part = (float *)ws;
    if (upconv_wg_wgrad_launch<256>(st, part, (const uint16_t *)dy, (const uint16_t *)x, a, cols) ||
        cu_upconv_fold_back(st, dw, part, Ci, Co, a.chunks, accum))
        return SG_ERR;
    /* db: conv.cu's column sum over the 4 P output pixels, at conv.cu's offset (the same bits) */
    if (db)
        return cu_col_sum(st, db, DT_F32, dy, dt, 1, 4 * P, Co, accum,
                          (char *)ws + sg_ws_align(most * 16 * Co * Ci * 4));
    return SG_OK;
}
