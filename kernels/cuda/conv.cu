/* conv.cu — 2-D convolution, forward and both backward passes.
 *
 * Shapes (NHWC, weights [Co][K][K][Ci]): x[N,H,W,Ci] given as a channel concatenation
 * (sg_cat, Ci = c0 + c1), w[Co,K,K,Ci] in the activations' dtype (fp32: the master weights;
 * bf16: their bf16 copy, kept by the optimizer), b[Co] fp32, y[N,Ho,Wo,Co]; K in {1,3}, S in {1,2},
 * zero padding: pad (0..K/2) at the top/left, at the bottom/right what the output size needs (the
 * kernels only test ih < H), Ho = (H + 2 (K/2) - K) / S + 1. P = N*Ho*Wo output pixels.
 *
 * Paths (cuda_conv2d_path, one for all three passes of a convolution):
 * - bf16 with every part of x and Co multiples of 8 (16-byte aligned operands): tensor cores,
 *   conv_tc.cu (implicit GEMMs on mma.sync; 1x1 stride 1 included);
 * - otherwise 1x1 stride 1 is a plain GEMM on the NHWC rows: cuBLASLt (linear.cu's GEMM layer);
 * - everything else runs the fp32 tile kernels below: fp32 convolutions always, and bf16 ones
 *   the tensor-core path does not take (the 3-channel image convolutions); their products on
 *   the CUDA cores (FMAs), or with cuda_conv_f32_tc_enable(1) on the tensor cores with fp32
 *   accuracy (3xTF32, conv_tile_mma3: other bits, within the fp32 tolerance); where
 *   one side has 1 to 4 channels, its passes run on the thin kernels (below the tiles: the
 *   tiles' bits, without their padding work); with cuda_conv_wino_enable(1), an fp32 3x3
 *   stride-1 padding-1 pass the thin kernels do not take runs as Winograd F(2x2, 3x3)
 *   (conv_wino.cu: other bits, within the fp32 tolerance).
 *
 * The CUDA-core kernels are implicit GEMMs with the im2col matrix never stored (tap = kh*K + kw):
 *   forward     y[p][co]      = sum over (tap, ci) of x[pixel(p, tap)][ci] w[co][tap][ci]
 *               M = P output pixels, N = Co, reduction over (part, tap, ci)
 *   bwd data    dx[q][ci]     = sum over (tap, co) of dy[p(q, tap)][co] w[co][tap][ci]
 *               where p(q, tap) is the output pixel that reads input pixel q through tap
 *               (none when (ih + pad - kh) is not a multiple of S or lies outside)
 *               M = N*H*W input pixels, N = Ci, reduction over (tap, co); the pixels are cut
 *               by parity class ((ih + pad) % S, (iw + pad) % S), each class running only
 *               the taps that reach it, so stride 2 does none of the zero products
 *   bwd weight  dw[co][tap][ci] = sum over p of dy[p][co] x[pixel(p, tap)][ci]
 *               M = Co, N = Ci (one tap per block), reduction over p, cut into
 *               sg_ws_wgrad_chunks(P, nw) chunks whose fp32 partials are summed in chunk order.
 *
 * The tiling: a block of 256 threads computes a 128 x 64 output tile (forward and data
 * gradient: 128 pixels by 64 channels) or a 64 x 64 one (weight gradient: output by input
 * channels); the reduction advances 16 at a time through shared-memory tiles As[16][rows] and
 * Bs[16][64], two of each: the next slice's values are read from global memory into registers
 * before the current slice's FMAs and stored into the other buffer after them, one barrier a
 * slice. Thread (tm = tid / 16, tn = tid % 16) owns the outputs (rows 64 h + 4 tm + i, columns
 * 4 tn + j), i, j < 4, h < rows / 64, and reads each k's operands as float4s (a warp's A values
 * are two tm's, a broadcast; its B values 16 float4 side by side): 32 FMAs on three 16-byte
 * shared loads (16 on two, 64 rows), where the first tiles (64 x 64, 4 x 4 outputs a thread
 * at a stride of 16, no second buffer) did 16 on eight 4-byte loads. Every output's chain of
 * FMAs is the first tiles' (the same slices, k in the same order): the same bits. fp32
 * arithmetic throughout (bf16 is widened on load, rounded once on store; the weights come in
 * the activations' dtype, bf16: the plan's bf16 copy). A reduction slice
 * never straddles a tap or a concatenation part (the loops run part, tap, channel block), so
 * each tile load reads contiguous channels of one pixel of one buffer.
 *
 * Determinism: every output element is one thread's fixed sequence of FMAs, then (weights)
 * a fixed-order sum over chunks; no atomics.
 */
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/tensor_core.cuh"

/* ================================ kernels ================================ */

#define CONV_BM 64  /* the weight gradient's tile: 64 output channels (its M) */
#define CONV_BN 64  /* every tile's columns: 64 channels */
#define CONV_PM 128 /* the forward's and the data gradient's tile: 128 pixels (their M) */
#define CONV_BK 16
#define CONV_THREADS 256
#define CONV_PAD 4 /* smem row padding against bank conflicts (rows stay 16-byte aligned) */
/* ... for the tile's products on the CUDA cores (TC 0) or the tensor cores (TC 1: rows 8 banks
 * apart, so that a fragment's 32 single-float reads, lane (g, q) at row q and column g, fall on
 * 32 distinct banks; 4 apart they pair up) */
#define CONV_PAD_OF(TC) ((TC) ? 8 : CONV_PAD)

/* The 16-step inner product of one reduction slice on a BM x 64 tile (BM = 128 or 64):
 * acc[i][j] += As[k][row(i)] Bs[k][4 tn + j] for k = 0..15 in increasing order, row(i) =
 * 64 (i / 4) + 4 tm + i % 4. Each value is read as part of a float4: a warp's A rows belong
 * to two tm (a broadcast), its B columns are 16 float4 side by side. */
template <int BM, int PAD>
__device__ __forceinline__ void conv_tile_fma(float (&acc)[BM / 16][4], const float (*As)[BM + PAD],
                                              const float (*Bs)[CONV_BN + PAD], int tm, int tn) {
#pragma unroll
    for (int k = 0; k < CONV_BK; k++) {
        float a[BM / 16], b[4];
        const float4 bv = *(const float4 *)&Bs[k][4 * tn];
        b[0] = bv.x, b[1] = bv.y, b[2] = bv.z, b[3] = bv.w;
#pragma unroll
        for (int h = 0; h < BM / 64; h++) {
            const float4 av = *(const float4 *)&As[k][64 * h + 4 * tm];
            a[4 * h] = av.x, a[4 * h + 1] = av.y, a[4 * h + 2] = av.z, a[4 * h + 3] = av.w;
        }
#pragma unroll
        for (int i = 0; i < BM / 16; i++)
#pragma unroll
            for (int j = 0; j < 4; j++) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
}

/* The same slice on the tensor cores (TC: cuda_conv_f32_tc_enable), fp32 accuracy from three
 * TF32 products ("3xTF32"). Each operand value v is split into big = tf32(v) (cvt.rna) and
 * small = tf32(v - big) (v - big is exact in fp32), and each m16n8k8 step adds
 * a_small b_big, a_big b_small and a_big b_big to the fp32 accumulator, in that order: the
 * dropped a_small b_small and the rounding of small leave an error of about 2^-21 of each
 * product (fp32's own rounding of a product is 2^-24), far inside the fp32 tolerance. The 8
 * warps tile BM x 64: BM / 32 warps down M, each 32 rows (two m16 tiles) by 64 / (8 / (BM /
 * 32)) columns (NI n8 tiles); accumulator i = mi NI + ni holds the m16n8 tile (mi, ni) in the
 * PTX C layout (conv_tile_at). Operands come from the same k-major shared tiles as the FMA
 * path's, one 4-byte read per fragment element (As[k][m]: a0 = (g, q), a1 = (g + 8, q), a2 =
 * (g, q + 4), a3 = (g + 8, q + 4); Bs[k][n]: b0 = (q, g), b1 = (q + 4, g)). Every output is
 * still a fixed sequence of operations on fixed inputs: the same bits run after run, other
 * bits than the FMA path's. A non-finite operand gives NaN where the FMA path may give Inf
 * (Inf - tf32(Inf) is NaN); the loss watch stops a run on either. */
template <int BM> struct conv_tc_shape {
    static constexpr int WM = BM / 32;        /* warps down M */
    static constexpr int WNC = 64 / (8 / WM); /* a warp's columns */
    static constexpr int NI = WNC / 8;        /* its n8 tiles */
    static_assert(2 * NI == BM / 16, "the accumulators of the two paths must match");
};
__device__ __forceinline__ void tf32_split(float v, uint32_t &big, uint32_t &small) {
    big = sg_tf32_rna(v);
    small = sg_tf32_rna(v - __uint_as_float(big));
}
template <int BM, int PAD>
__device__ __forceinline__ void conv_tile_mma3(float (&acc)[BM / 16][4],
                                               const float (*As)[BM + PAD],
                                               const float (*Bs)[CONV_BN + PAD], int tid) {
    typedef conv_tc_shape<BM> sh;
    const int warp = tid / 32, lane = tid % 32, g = lane / 4, q = lane % 4;
    const int m0 = 32 * (warp % sh::WM), n0 = sh::WNC * (warp / sh::WM);
#pragma unroll
    for (int ks = 0; ks < CONV_BK; ks += 8) {
        uint32_t ab[2][4], as[2][4], bb[sh::NI][2], bs[sh::NI][2];
#pragma unroll
        for (int mi = 0; mi < 2; mi++)
#pragma unroll
            for (int r = 0; r < 4; r++)
                tf32_split(As[ks + q + 4 * (r >> 1)][m0 + 16 * mi + g + 8 * (r & 1)], ab[mi][r],
                           as[mi][r]);
#pragma unroll
        for (int ni = 0; ni < sh::NI; ni++)
#pragma unroll
            for (int r = 0; r < 2; r++)
                tf32_split(Bs[ks + q + 4 * r][n0 + 8 * ni + g], bb[ni][r], bs[ni][r]);
#pragma unroll
        for (int mi = 0; mi < 2; mi++)
#pragma unroll
            for (int ni = 0; ni < sh::NI; ni++) {
                float *c = acc[mi * sh::NI + ni];
                sg_mma_tf32_1688(c, as[mi], bb[ni], c);
                sg_mma_tf32_1688(c, ab[mi], bs[ni], c);
                sg_mma_tf32_1688(c, ab[mi], bb[ni], c);
            }
    }
}

/* Where accumulator acc[i][j] of thread tid lies in the BM x 64 tile: *m its row, *n its
 * column. FMA path: row 64 (i / 4) + 4 tm + i % 4, column 4 tn + j (tm = tid / 16, tn =
 * tid % 16). TC path: the m16n8 tile (mi, ni) = (i / NI, i % NI) of the thread's warp, element
 * j of the PTX C layout (row g + 8 (j / 2), column 2 q + j % 2). */
template <int BM, bool TC>
__device__ __forceinline__ void conv_tile_at(int i, int j, int tid, int *m, int *n) {
    if (TC) {
        typedef conv_tc_shape<BM> sh;
        const int warp = tid / 32, lane = tid % 32;
        *m = 32 * (warp % sh::WM) + 16 * (i / sh::NI) + lane / 4 + 8 * (j / 2);
        *n = sh::WNC * (warp / sh::WM) + 8 * (i % sh::NI) + 2 * (lane % 4) + j % 2;
    } else {
        *m = 64 * (i / 4) + 4 * (tid / 16) + i % 4;
        *n = 4 * (tid % 16) + j;
    }
}

/* Every accumulator of thread tid with its place in the BM x 64 tile: at(m, n, acc[i][j]) (the
 * epilogue walk of the three tile kernels) */
template <int BM, bool TC, class At>
__device__ __forceinline__ void conv_tile_each(const float (&acc)[BM / 16][4], int tid, At at) {
#pragma unroll
    for (int i = 0; i < BM / 16; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int m, n;
            conv_tile_at<BM, TC>(i, j, tid, &m, &n);
            at(m, n, acc[i][j]);
        }
}

/* The slice loop of every tile: fetch() reads the current slice into the thread's registers
 * and stash(b) stores them into shared buffer b; next() advances to the next slice (false past
 * the last). The first slice is fetched and stored before the loop; each iteration fetches the
 * next one before the current one's products and stores it into the other buffer after them.
 * TC: the products on the tensor cores (conv_tile_mma3), else on the CUDA cores. */
template <int BM, bool TC, class Next, class Fetch, class Stash>
__device__ __forceinline__ void conv_tile_loop(float (&acc)[BM / 16][4],
                                               float (*As)[CONV_BK][BM + CONV_PAD_OF(TC)],
                                               float (*Bs)[CONV_BK][CONV_BN + CONV_PAD_OF(TC)],
                                               int tid, Next next, Fetch fetch, Stash stash) {
    fetch();
    stash(0);
    __syncthreads();
    int buf = 0;
    for (bool more = true; more; buf ^= 1) {
        more = next();
        if (more) fetch(); /* in flight during the slice's products */
        if (TC)
            conv_tile_mma3<BM, CONV_PAD_OF(TC)>(acc, As[buf], Bs[buf], tid);
        else
            conv_tile_fma<BM, CONV_PAD_OF(TC)>(acc, As[buf], Bs[buf], tid / 16, tid % 16);
        if (more) stash(buf ^ 1);
        __syncthreads();
    }
}

/* cuda_conv_f32_tc_enable: the tiles' products on the tensor cores (conv_tile_mma3) */
static int f32_tc_enabled;
static long f32_tc_launches;
void cuda_conv_f32_tc_enable(int on) {
    f32_tc_enabled = on != 0;
}
long cuda_conv_f32_tc_launches(void) {
    return f32_tc_launches;
}
/* launch tile kernel `kern` in the form the switch says (the launch and its check) */
#define CONV_TILE_LAUNCH(kern, grid, st, ...)                                                      \
    do {                                                                                           \
        if (f32_tc_enabled) {                                                                      \
            f32_tc_launches++;                                                                     \
            SG_LAUNCH(kern<true>, grid, CONV_THREADS, 0, st, __VA_ARGS__);                         \
        } else {                                                                                   \
            SG_LAUNCH(kern<false>, grid, CONV_THREADS, 0, st, __VA_ARGS__);                        \
        }                                                                                          \
        SG_LAUNCH_CHECK(#kern);                                                                    \
    } while (0)

/* The forward's reduction slices in (part, tap, 16-channel block) order, a part without
 * channels skipped: advance (part, tap, c0) to the next, false past the last. */
__device__ __forceinline__ bool conv_fwd_next(int &part, int &tap, int &c0, int cp0, int cp1,
                                              int KK) {
    c0 += CONV_BK;
    if (c0 < (part ? cp1 : cp0)) return true;
    c0 = 0;
    if (++tap < KK) return true;
    tap = 0;
    return part == 0 && cp1 > 0 ? (part = 1, true) : false;
}

/* blockIdx.x: 128 output pixels p (flattened n, oh, ow); blockIdx.y: 64 output channels.
 * Loads, into registers one slice ahead, then into the other of two shared buffers: thread tid
 * reads pixel arow = tid / 2's 8 consecutive input channels from ak = 8 (tid % 2) into
 * As[ak..ak+7][arow], and output channel brow = tid / 4's 4 from bk = 4 (tid % 4) into
 * Bs[bk..bk+3][brow]. Compute: 8 x 4 outputs per thread (conv_tile_fma). */
template <bool TC>
__global__ void __launch_bounds__(CONV_THREADS, 2)
    conv_fwd_kernel(void *y, sg_cat x, const void *w, const float *bias, int N, int H, int W,
                    int Ci, int Co, int K, int S, int pad, int Ho, int Wo, int dt) {
    SG_PDL_ENTER();
    __shared__ __align__(16) float As[2][CONV_BK][CONV_PM + CONV_PAD_OF(TC)];
    __shared__ __align__(16) float Bs[2][CONV_BK][CONV_BN + CONV_PAD_OF(TC)];
    const int tid = threadIdx.x;
    const int arow = tid / 2, ak = (tid % 2) * 8, brow = tid / 4, bk = (tid % 4) * 4;
    const int64_t P = (int64_t)N * Ho * Wo;
    const int64_t p = (int64_t)blockIdx.x * CONV_PM + arow;
    const int co_ld = blockIdx.y * CONV_BN + brow;
    const int KK = K * K, cp0 = x.c[0], cp1 = x.c[1];
    int n = 0, oh = 0, ow = 0;
    if (p < P) {
        n = (int)(p / ((int64_t)Ho * Wo));
        int r = (int)(p % ((int64_t)Ho * Wo));
        oh = r / Wo;
        ow = r % Wo;
    }
    /* the weight row this thread loads (clamped: never read when co_ld >= Co) */
    const int64_t wrow = (int64_t)(co_ld < Co ? co_ld : 0) * KK * Ci;
    float ra[8], rb[4];
    auto fetch = [&](int part, int tap, int c0) {
        /* (ternaries, not x.c[part]: a dynamic index would copy x to local memory) */
        const int cp = part ? cp1 : cp0, coff = part ? cp0 : 0;
        const void *src = part ? x.p[1] : x.p[0];
        const int ih = oh * S - pad + tap / K, iw = ow * S - pad + tap % K;
        const bool valid = p < P && ih >= 0 && ih < H && iw >= 0 && iw < W;
        const int64_t abase = valid ? (((int64_t)n * H + ih) * W + iw) * cp : 0;
        const int64_t wtap = wrow + (int64_t)tap * Ci + coff;
#pragma unroll
        for (int e = 0; e < 8; e++) {
            const int ci = c0 + ak + e;
            ra[e] = valid && ci < cp ? dev_ld(src, abase + ci, dt) : 0.0f;
        }
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int ci = c0 + bk + e;
            rb[e] = co_ld < Co && ci < cp ? dev_ld(w, wtap + ci, dt) : 0.0f;
        }
    };
    auto stash = [&](int buf) {
#pragma unroll
        for (int e = 0; e < 8; e++) As[buf][ak + e][arow] = ra[e];
#pragma unroll
        for (int e = 0; e < 4; e++) Bs[buf][bk + e][brow] = rb[e];
    };
    float acc[CONV_PM / 16][4] = {};
    int part = cp0 > 0 ? 0 : 1, tap = 0, c0 = 0;
    conv_tile_loop<CONV_PM, TC>(
        acc, As, Bs, tid, [&] { return conv_fwd_next(part, tap, c0, cp0, cp1, KK); },
        [&] { fetch(part, tap, c0); }, stash);
    conv_tile_each<CONV_PM, TC>(acc, tid, [&](int m, int n, float v) {
        const int64_t po = (int64_t)blockIdx.x * CONV_PM + m;
        const int co = blockIdx.y * CONV_BN + n;
        if (po < P && co < Co) dev_st(y, po * Co + co, v + (bias ? bias[co] : 0.0f), dt);
    });
}

/* The input pixels of parity class (rh, rw) (see conv_bwd_data_kernel): ih = ih1 + S i,
 * iw = iw1 + S j, i < Hc, j < Wc, with ih1 the first row whose (ih + pad) % S is rh. */
__device__ __forceinline__ void conv_class_dims(int H, int W, int S, int pad, int rh, int rw,
                                                int *ih1, int *iw1, int *Hc, int *Wc) {
    *ih1 = ((rh - pad) % S + S) % S;
    *iw1 = ((rw - pad) % S + S) % S;
    *Hc = *ih1 < H ? (H - *ih1 + S - 1) / S : 0;
    *Wc = *iw1 < W ? (W - *iw1 + S - 1) / S : 0;
}

/* blockIdx.z: the parity class rh * S + rw of the input pixels, (ih + pad) % S == rh and
 * (iw + pad) % S == rw; blockIdx.x: 128 pixels of that class (flattened n, i, j: the class's
 * sub-grid, ih = ih1 + S i, iw = iw1 + S j); blockIdx.y: 64 input channels of the
 * concatenation. A pixel of class (rh, rw) is reached only by the taps kh = rh + S t,
 * kw = rw + S u (oh = (ih + pad - kh) / S divides exactly for those and no other), so the
 * block runs those taps alone: stride 2 multiplies none of the zeros the other taps would
 * read (a 3x3's classes hold 4, 2, 2 and 1 of its 9 taps), and stride 1 is one class with
 * every tap. Each output element still sums its taps in increasing tap order and its channels
 * in increasing order, the skipped taps having contributed exact zeros (fmaf(0, w, acc) ==
 * acc), so the bits are those of the single-grid kernel this replaces. Blocks past the end of
 * a smaller class return at once (the grid covers the largest).
 * Loads (one slice ahead, two shared buffers, as the forward's): As[ak..ak+7][arow] = dy at
 * the output pixel that reads q through the tap (arow = tid / 2, 8 consecutive output channels
 * from ak = 8 (tid % 2)), zero past the image edge; Bs[bk + 4e][bcol] = w[co][tap][ci] with
 * bcol = tid % 64 the input channel and bk = tid / 64 (consecutive threads read consecutive
 * ci). Compute: 8 x 4 per thread. */
template <bool TC>
__global__ void __launch_bounds__(CONV_THREADS, 2)
    conv_bwd_data_kernel(sg_cat dx, const void *dy, const void *w, int N, int H, int W, int Ci,
                         int Co, int K, int S, int pad, int Ho, int Wo, int dt, int accum) {
    SG_PDL_ENTER();
    __shared__ __align__(16) float As[2][CONV_BK][CONV_PM + CONV_PAD_OF(TC)];
    __shared__ __align__(16) float Bs[2][CONV_BK][CONV_BN + CONV_PAD_OF(TC)];
    const int tid = threadIdx.x;
    const int arow = tid / 2, ak = (tid % 2) * 8;
    const int bcol = tid % 64, bk = tid / 64;
    const int rh = (int)blockIdx.z / S, rw = (int)blockIdx.z % S;
    int ih1, iw1, Hc, Wc;
    conv_class_dims(H, W, S, pad, rh, rw, &ih1, &iw1, &Hc, &Wc);
    const int64_t Qc = (int64_t)N * Hc * Wc;
    if ((int64_t)blockIdx.x * CONV_PM >= Qc) return; /* the whole block: a smaller class */
    const int64_t q = (int64_t)blockIdx.x * CONV_PM + arow;
    const int ci_ld = blockIdx.y * CONV_BN + bcol;
    int n = 0, ih = 0, iw = 0;
    if (q < Qc) {
        n = (int)(q / ((int64_t)Hc * Wc));
        int r = (int)(q % ((int64_t)Hc * Wc));
        ih = ih1 + S * (r / Wc);
        iw = iw1 + S * (r % Wc);
    }
    float ra[8], rb[4];
    auto fetch = [&](int kh, int kw, int c0) {
        const int tap = kh * K + kw;
        /* oh*S - pad + kh = ih  =>  oh = (ih + pad - kh) / S, exact in this class */
        const int th = ih + pad - kh, tw = iw + pad - kw;
        const bool valid = q < Qc && th >= 0 && tw >= 0 && th / S < Ho && tw / S < Wo;
        const int64_t abase = valid ? (((int64_t)n * Ho + th / S) * Wo + tw / S) * Co : 0;
#pragma unroll
        for (int e = 0; e < 8; e++) {
            const int co = c0 + ak + e;
            ra[e] = valid && co < Co ? dev_ld(dy, abase + co, dt) : 0.0f;
        }
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int cob = c0 + bk + 4 * e;
            rb[e] = cob < Co && ci_ld < Ci
                        ? dev_ld(w, ((int64_t)cob * K * K + tap) * Ci + ci_ld, dt)
                        : 0.0f;
        }
    };
    auto stash = [&](int buf) {
#pragma unroll
        for (int e = 0; e < 8; e++) As[buf][ak + e][arow] = ra[e];
#pragma unroll
        for (int e = 0; e < 4; e++) Bs[buf][bk + 4 * e][bcol] = rb[e];
    };
    /* the slices: the class's taps (kh, kw) in increasing order, 16 output channels at a time */
    auto next = [&](int &kh, int &kw, int &c0) {
        if ((c0 += CONV_BK) < Co) return true;
        c0 = 0;
        if ((kw += S) < K) return true;
        kw = rw;
        return (kh += S) < K;
    };
    float acc[CONV_PM / 16][4] = {};
    int kh = rh, kw = rw, c0 = 0;
    if (kh < K && kw < K) /* a class some tap reaches (every class, for K >= S) */
        conv_tile_loop<CONV_PM, TC>(
            acc, As, Bs, tid, [&] { return next(kh, kw, c0); }, [&] { fetch(kh, kw, c0); }, stash);
    conv_tile_each<CONV_PM, TC>(acc, tid, [&](int m, int n, float v) {
        const int64_t qo = (int64_t)blockIdx.x * CONV_PM + m;
        const int ci = blockIdx.y * CONV_BN + n;
        if (qo >= Qc || ci >= Ci) return;
        const int no = (int)(qo / ((int64_t)Hc * Wc)), r = (int)(qo % ((int64_t)Hc * Wc));
        const int64_t pix = ((int64_t)no * H + ih1 + S * (r / Wc)) * W + iw1 + S * (r % Wc);
        dev_cat_st_acc(dx, pix, ci, v, dt, accum);
    });
}

/* blockIdx.x: tap * ceil(Ci/64) + input-channel tile; blockIdx.y: 64 output channels;
 * blockIdx.z: chunk of output pixels [z*chunk_len, min(P, (z+1)*chunk_len)). The reduction
 * runs over the chunk's pixels 16 at a time. Loads (one slice ahead, two shared buffers):
 * thread tid takes pixel lk = tid / 16 of the slice and 4 consecutive channels from
 * lc = 4 (tid % 16): As[lk][lc..] = dy[p][co..], Bs[lk][lc..] = x[pixel(p, tap)][ci..] (one
 * pixel decode per thread and slice). Compute: thread (tm, tn) owns co = 4 tm + i,
 * ci = 4 tn + j. Writes part[z][co][tap][ci]. */
template <bool TC>
__global__ void __launch_bounds__(CONV_THREADS, 2)
    conv_bwd_weight_kernel(float *part, const void *dy, sg_cat x, int N, int H, int W, int Ci,
                           int Co, int K, int S, int pad, int Ho, int Wo, int dt,
                           int64_t chunk_len) {
    SG_PDL_ENTER();
    __shared__ __align__(16) float As[2][CONV_BK][CONV_BM + CONV_PAD_OF(TC)];
    __shared__ __align__(16) float Bs[2][CONV_BK][CONV_BN + CONV_PAD_OF(TC)];
    const int tid = threadIdx.x;
    const int lk = tid / 16, lc = (tid % 16) * 4;
    const int nct = (Ci + CONV_BN - 1) / CONV_BN;
    const int tap = blockIdx.x / nct, ci_base = (blockIdx.x % nct) * CONV_BN;
    const int co_base = blockIdx.y * CONV_BM;
    const int kh = tap / K, kw = tap % K, KK = K * K;
    const int64_t P = (int64_t)N * Ho * Wo;
    const int64_t p0 = (int64_t)blockIdx.z * chunk_len;
    const int64_t p1 = p0 + chunk_len < P ? p0 + chunk_len : P;
    float ra[4], rb[4];
    auto fetch = [&](int64_t pb) {
        const int64_t p = pb + lk;
        bool valid = false;
        int64_t pix = 0;
        if (p < p1) {
            int nn = (int)(p / ((int64_t)Ho * Wo));
            int r = (int)(p % ((int64_t)Ho * Wo));
            int ih = (r / Wo) * S - pad + kh, iw = (r % Wo) * S - pad + kw;
            valid = ih >= 0 && ih < H && iw >= 0 && iw < W;
            pix = ((int64_t)nn * H + ih) * W + iw;
        }
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int co = co_base + lc + e, ci = ci_base + lc + e;
            ra[e] = p < p1 && co < Co ? dev_ld(dy, p * Co + co, dt) : 0.0f;
            rb[e] = valid && ci < Ci ? dev_cat_ld(x, pix, ci, dt) : 0.0f;
        }
    };
    auto stash = [&](int buf) {
#pragma unroll
        for (int e = 0; e < 4; e++) As[buf][lk][lc + e] = ra[e], Bs[buf][lk][lc + e] = rb[e];
    };
    float acc[CONV_BM / 16][4] = {};
    int64_t pb = p0;
    if (p0 < p1)
        conv_tile_loop<CONV_BM, TC>(
            acc, As, Bs, tid, [&] { return (pb += CONV_BK) < p1; }, [&] { fetch(pb); }, stash);
    float *out = part + (int64_t)blockIdx.z * Co * KK * Ci;
    conv_tile_each<CONV_BM, TC>(acc, tid, [&](int m, int n, float v) {
        const int co = co_base + m, ci = ci_base + n;
        if (co < Co && ci < Ci) out[((int64_t)co * KK + tap) * Ci + ci] = v;
    });
}

/* threads stride over P*Co: y[i] = round(y[i] + b[i % Co]) in place (fp32 sum, one rounding
 * of the sum; the engine that wrote y rounded it once already) */
__global__ void conv_bias_add_kernel(void *y, const float *b, int64_t n, int Co, int dt) {
    SG_PDL_ENTER();
    SG_GRID_STRIDE(i, n) {
        dev_st(y, i, dev_ld(y, i, dt) + b[i % Co], dt);
    }
}

/* ============ thin convolutions: 1 to 4 channels on one side (conv_in, conv_out) ============
 *
 * The 64 x 64 tiles above waste nearly all of their work on a convolution with 3 channels on
 * one side: the tile's reduction is 16 wide, so 13 of every 16 products of conv_in's forward
 * (Ci = 3) are padding, and conv_out's (Co = 3) fills 3 of a tile's 64 columns. cuDNN does not
 * do well either: the second GPU session measured unet_cifar's image convolutions at batch 128
 * (bf16) at 0.18 ms (conv_in forward), 0.17 (its weight gradient), 0.18 and 0.22 (conv_out's
 * weight and data gradients), for work that reads or writes one 33.5 MB activation. These
 * kernels take the CUDA-core path's thin cases (THIN_MAX channels or fewer on one side, the
 * other a multiple of each kernel's vector, below; x one buffer), and compute exactly what the
 * tiles compute:
 *
 * - every output is the same chain of fmaf as the tile's thread: the forward over (tap, ci)
 *   in increasing order, then + b (or + 0); the data gradient over its parity class's taps in
 *   increasing order and co in increasing order; the weight gradient's chunk partials over
 *   the chunk's pixels in increasing order, in the same chunks (sg_ws_wgrad_chunks), summed by
 *   the same chunk sum (cu_wgrad_finish). The products the tiles add and these skip are exact zeros
 * (a padding pixel, a channel past the tile's end): they change at most the sign of a zero sum, and
 * the tiles' last step makes every zero +0 (the forward's + b or + 0; the data gradient's padded
 * channels, which these end with __fadd_rn(acc, 0.0f); the chunk sum's 0 + part). So the bits are
 * the tiles', and cuda_ops holds them to that (cuda_conv_thin_enable(0) runs the tiles on the same
 * case);
 * - conv_thin_wide_kernel: an output of the wide side (the forward of a thin input, the data
 *   gradient of a thin output) is a sum of at most 9 x 4 products. A warp takes one pixel at a
 *   time, each lane THIN_VEC consecutive wide channels (a warp: 128 channels, one 8- or
 *   16-byte store a lane), with its channels' weights in registers for every pixel it visits;
 *   the thin values are read by every lane at once (one broadcast load each);
 * - conv_thin_wgrad_kernel: a warp takes one (chunk, tap, 64 wide channels): two channels a
 *   lane, each with its CT thin partners, so 2 CT chains a lane; the chunk's thin values go
 *   through shared memory 32 pixels at a time (each lane loads one pixel's, then every lane
 *   reads them with one broadcast); the wide ones are one 4- or 8-byte load a lane a pixel;
 * - conv_thin_narrow_kernel: the forward of a thin output (conv_out's, 0.06 ms on cuDNN at batch
 *   128; 0.90 on the tiles): a thread a pixel with its CT chains of 9 Ci products, x read 16 bytes
 *   at a time, the weights from shared memory (48 KiB at most: CT 9 Ci fp32 values), read by
 *   every lane at once; Ci a multiple of the 16-byte vector. */
#define THIN_MAX 4            /* channels on the thin side */
#define THIN_VEC 4            /* wide channels a lane (conv_thin_wide_kernel) */
#define THIN_WV 2             /* wide channels a lane (conv_thin_wgrad_kernel) */
#define THIN_THREADS 128      /* four warps a block, each on its own work */
#define THIN_WIDE_BLOCKS 1056 /* the wide kernel's grid at most (8 an SM on 132): warps loop */

static int thin_enabled = 1;
static long thin_launches;
void cuda_conv_thin_enable(int on) {
    thin_enabled = on != 0;
}
long cuda_conv_thin_launches(void) {
    return thin_launches;
}

/* THIN_VEC values stored at p (accum: added to the old ones first, dev_st_acc's arithmetic):
 * one 8-byte (bf16) or 16-byte (fp32) store */
__device__ __forceinline__ void thin_st4(uint16_t *p, const float *v, int accum) {
    float w[4];
    if (accum) {
        dev_ldv<uint16_t, 4>(w, p);
        for (int j = 0; j < 4; j++) w[j] = __fadd_rn(w[j], v[j]);
    } else {
        for (int j = 0; j < 4; j++) w[j] = v[j];
    }
    uint2 r;
    r.x = (uint32_t)dev_f32_to_bf16(w[0]) | ((uint32_t)dev_f32_to_bf16(w[1]) << 16);
    r.y = (uint32_t)dev_f32_to_bf16(w[2]) | ((uint32_t)dev_f32_to_bf16(w[3]) << 16);
    *reinterpret_cast<uint2 *>(p) = r;
}
__device__ __forceinline__ void thin_st4(float *p, const float *v, int accum) {
    dev_stv<float, 4>(p, v, accum);
}
/* THIN_WV consecutive values at p: one 4-byte (bf16) or 8-byte (fp32) load */
__device__ __forceinline__ void thin_ld2(float *out, const uint16_t *p) {
    const uint32_t u = *reinterpret_cast<const uint32_t *>(p);
    out[0] = dev_bf16_to_f32((uint16_t)(u & 0xffffu));
    out[1] = dev_bf16_to_f32((uint16_t)(u >> 16));
}
__device__ __forceinline__ void thin_ld2(float *out, const float *p) {
    const float2 u = *reinterpret_cast<const float2 *>(p);
    out[0] = u.x, out[1] = u.y;
}

/* The wide side of a thin convolution (see above). DGRAD false, the forward: out = y[N,Ho,Wo,Cw]
 * (Cw = Co), in = x[N,H,W,CT], rows = the output pixels; true, the data gradient: out =
 * dx[N,H,W,Cw] (Cw = Ci), in = dy[N,Ho,Wo,CT], rows = the input pixels. w[Co][K][K][Ci]. Lane l
 * of a warp owns wide channels c .. c + 3, c = 128 blockIdx.y + 4 l; the warps of the grid take
 * the rows in turn. */
template <typename T, int CT, bool DGRAD>
__global__ void __launch_bounds__(THIN_THREADS)
    conv_thin_wide_kernel(T *out, const T *in, const T *w, const float *bias, int N, int H, int W,
                          int Ho, int Wo, int Cw, int K, int S, int pad, int accum) {
    SG_PDL_ENTER();
    const int lane = (int)threadIdx.x % 32;
    const int c = (int)blockIdx.y * 32 * THIN_VEC + lane * THIN_VEC;
    const bool live = c < Cw; /* Cw is a multiple of THIN_VEC: all four or none */
    const int KK = K * K;
    /* this lane's weights: wr[tap][t][j] = w(wide c + j, tap, thin t) */
    float wr[9][CT][THIN_VEC];
#pragma unroll
    for (int tap = 0; tap < 9; tap++)
#pragma unroll
        for (int t = 0; t < CT; t++)
#pragma unroll
            for (int j = 0; j < THIN_VEC; j++) {
                const int64_t i = DGRAD ? ((int64_t)t * KK + tap) * Cw + c + j
                                        : ((int64_t)(c + j) * KK + tap) * CT + t;
                wr[tap][t][j] = live && tap < KK ? dev_ld1(w + i) : 0.0f;
            }
    if (!live) return;
    const int Ro = DGRAD ? H : Ho, Co_ = DGRAD ? W : Wo; /* the rows' grid */
    const int Ri = DGRAD ? Ho : H, Ci_ = DGRAD ? Wo : W; /* the thin input's grid */
    const int64_t R = (int64_t)N * Ro * Co_;
    const int64_t warps = (int64_t)gridDim.x * (THIN_THREADS / 32);
    for (int64_t r = (int64_t)blockIdx.x * (THIN_THREADS / 32) + threadIdx.x / 32; r < R;
         r += warps) {
        const int n = (int)(r / ((int64_t)Ro * Co_)), rem = (int)(r % ((int64_t)Ro * Co_));
        const int a = rem / Co_, b = rem % Co_;
        float acc[THIN_VEC] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int tap = 0; tap < 9; tap++) {
            if (tap >= KK) break;
            const int kh = tap / K, kw = tap % K;
            int ia, ib;
            bool valid;
            if (DGRAD) { /* the output pixel that reads input pixel (a, b) through the tap */
                const int th = a + pad - kh, tw = b + pad - kw;
                valid =
                    th >= 0 && tw >= 0 && th % S == 0 && tw % S == 0 && th / S < Ho && tw / S < Wo;
                ia = th / S, ib = tw / S;
            } else {
                ia = a * S - pad + kh, ib = b * S - pad + kw;
                valid = ia >= 0 && ia < H && ib >= 0 && ib < W;
            }
            if (!valid) continue;
            const T *ip = in + (((int64_t)n * Ri + ia) * Ci_ + ib) * CT;
            float v[CT];
#pragma unroll
            for (int t = 0; t < CT; t++) v[t] = dev_ld1(ip + t);
#pragma unroll
            for (int t = 0; t < CT; t++)
#pragma unroll
                for (int j = 0; j < THIN_VEC; j++) acc[j] = fmaf(v[t], wr[tap][t][j], acc[j]);
        }
#pragma unroll
        for (int j = 0; j < THIN_VEC; j++)
            acc[j] = DGRAD ? __fadd_rn(acc[j], 0.0f) : acc[j] + (bias ? bias[c + j] : 0.0f);
        thin_st4(out + r * Cw + c, acc, DGRAD ? accum : 0);
    }
}

/* The weight gradient's chunk partials of a thin convolution (see above), the tiles' layout:
 * part[chunk][co][tap][ci]. THIN_IN true: Ci = CT thin, Co = Cw wide (the wide operand dy at
 * the pixel p, the thin one x at the tap's input pixel); false: Co = CT, Ci = Cw (wide x at the
 * tap's pixel, thin dy at p). Warp item = ((chunk * nsl) + slice) * KK + tap, its lanes two wide
 * channels each of the slice's 64. */
template <typename T, int CT, bool THIN_IN>
__global__ void __launch_bounds__(THIN_THREADS)
    conv_thin_wgrad_kernel(float *part, const T *dy, const T *x, int N, int H, int W, int Ho,
                           int Wo, int Cw, int K, int S, int pad, int chunks, int64_t chunk_len) {
    SG_PDL_ENTER();
    __shared__ float4 thin[THIN_THREADS / 32][32];
    const int lane = (int)threadIdx.x % 32, wi = (int)threadIdx.x / 32;
    const int KK = K * K, nsl = (Cw + 32 * THIN_WV - 1) / (32 * THIN_WV);
    const int64_t item = (int64_t)blockIdx.x * (THIN_THREADS / 32) + wi;
    if (item >= (int64_t)chunks * nsl * KK) return; /* the whole warp */
    const int tap = (int)(item % KK), slice = (int)(item / KK % nsl), z = (int)(item / KK / nsl);
    const int kh = tap / K, kw = tap % K;
    const int c = slice * 32 * THIN_WV + lane * THIN_WV;
    const bool live = c < Cw; /* Cw is even: both or neither */
    const int64_t P = (int64_t)N * Ho * Wo, HWo = (int64_t)Ho * Wo;
    const int64_t p0 = (int64_t)z * chunk_len, p1 = p0 + chunk_len < P ? p0 + chunk_len : P;
    float acc[CT][THIN_WV];
#pragma unroll
    for (int t = 0; t < CT; t++)
#pragma unroll
        for (int j = 0; j < THIN_WV; j++) acc[t][j] = 0.0f;
    /* the pixel p's place (n, oh, ow), stepped along with p */
    int n = p0 < P ? (int)(p0 / HWo) : 0, oh = 0, ow = 0;
    if (p0 < P) {
        const int rem = (int)(p0 % HWo);
        oh = rem / Wo, ow = rem % Wo;
    }
    for (int64_t pb = p0; pb < p1; pb += 32) {
        /* lane l: the thin values of pixel pb + l (zeros past the chunk or off the image) */
        {
            const int64_t p = pb + lane;
            float v[THIN_MAX] = {0.0f, 0.0f, 0.0f, 0.0f};
            if (p < p1) {
                const T *src = NULL;
                if (THIN_IN) {
                    const int pn = (int)(p / HWo), rem = (int)(p % HWo);
                    const int ih = rem / Wo * S - pad + kh, iw = rem % Wo * S - pad + kw;
                    if (ih >= 0 && ih < H && iw >= 0 && iw < W)
                        src = x + (((int64_t)pn * H + ih) * W + iw) * CT;
                } else {
                    src = dy + p * CT;
                }
                if (src)
#pragma unroll
                    for (int t = 0; t < CT; t++) v[t] = dev_ld1(src + t);
            }
            thin[wi][lane] = make_float4(v[0], v[1], v[2], v[3]);
        }
        __syncwarp();
        const int m = p1 - pb < 32 ? (int)(p1 - pb) : 32;
#pragma unroll 4
        for (int i = 0; i < m; i++) {
            float wv[THIN_WV] = {0.0f, 0.0f};
            if (live) {
                if (THIN_IN) {
                    thin_ld2(wv, dy + (pb + i) * Cw + c);
                } else {
                    const int ih = oh * S - pad + kh, iw = ow * S - pad + kw;
                    if (ih >= 0 && ih < H && iw >= 0 && iw < W)
                        thin_ld2(wv, x + (((int64_t)n * H + ih) * W + iw) * Cw + c);
                }
            }
            const float4 tv = thin[wi][i];
            const float th[4] = {tv.x, tv.y, tv.z, tv.w};
#pragma unroll
            for (int t = 0; t < CT; t++)
#pragma unroll
                for (int j = 0; j < THIN_WV; j++) acc[t][j] = fmaf(wv[j], th[t], acc[t][j]);
            if (++ow == Wo) {
                ow = 0;
                if (++oh == Ho) oh = 0, n++;
            }
        }
        __syncwarp();
    }
    if (!live) return;
    float *o = part + (int64_t)z * Cw * KK * CT;
#pragma unroll
    for (int t = 0; t < CT; t++)
#pragma unroll
        for (int j = 0; j < THIN_WV; j++) {
            const int64_t i = THIN_IN ? ((int64_t)(c + j) * KK + tap) * CT + t
                                      : ((int64_t)t * KK + tap) * Cw + c + j;
            o[i] = acc[t][j];
        }
}

/* The forward of a thin output (Co = CT, Ci wide; see above): a thread a pixel, its CT chains
 * over (tap, ci) in the tiles' order, x read 16 bytes at a time (VEC channels), the weights
 * (fp32, [CT][K K][Ci], THIN_NARROW_SMEM bytes at most) from shared memory, read by every lane
 * at once. */
#define THIN_NARROW_SMEM (48 * 1024)
template <typename T, int CT>
__global__ void __launch_bounds__(THIN_THREADS)
    conv_thin_narrow_kernel(T *y, const T *x, const T *w, const float *bias, int N, int H, int W,
                            int Ho, int Wo, int Ci, int K, int S, int pad) {
    SG_PDL_ENTER();
    constexpr int VEC = 16 / (int)sizeof(T);
    SG_DYNAMIC_SMEM(float, ws);
    const int KK = K * K, nw = CT * KK * Ci;
    for (int i = (int)threadIdx.x; i < nw; i += THIN_THREADS) ws[i] = dev_ld1(w + i);
    __syncthreads();
    const int P = N * Ho * Wo; /* (the launcher: under 2^31) */
    const int p = (int)blockIdx.x * THIN_THREADS + (int)threadIdx.x;
    if (p >= P) return;
    const int n = p / (Ho * Wo), rem = p % (Ho * Wo), oh = rem / Wo, ow = rem % Wo;
    float acc[CT];
#pragma unroll
    for (int t = 0; t < CT; t++) acc[t] = 0.0f;
    for (int tap = 0; tap < KK; tap++) {
        const int ih = oh * S - pad + tap / K, iw = ow * S - pad + tap % K;
        if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
        const T *xp = x + (((int64_t)n * H + ih) * W + iw) * Ci;
        const float *wp = ws + tap * Ci;
        for (int c = 0; c < Ci; c += VEC) {
            float xv[VEC];
            dev_ldv<T, VEC>(xv, xp + c);
#pragma unroll
            for (int t = 0; t < CT; t++) {
                const float *wt = wp + (int64_t)t * KK * Ci + c;
#pragma unroll
                for (int e = 0; e < VEC; e++) acc[t] = fmaf(xv[e], wt[e], acc[t]);
            }
        }
    }
#pragma unroll
    for (int t = 0; t < CT; t++) dev_st1(y + (int64_t)p * CT + t, acc[t] + (bias ? bias[t] : 0.0f));
}

/* the thin side of a CUDA-core convolution (THIN_MAX or fewer channels), or 0 where the
 * thin kernels do not take it */
static int thin_side(int thin, int wide, int vec) {
    return thin_enabled && thin >= 1 && thin <= THIN_MAX && wide % vec == 0 ? thin : 0;
}
unsigned cuda_conv2d_thin_passes(int Ci, int Co, int K, int S) {
    if ((K != 1 && K != 3) || (S != 1 && S != 2) || (K == 1 && S == 1)) return 0; /* cuBLAS's */
    const int vec = 16 / 2; /* the narrow forward's bf16 vector (fp32: 4, which 8 divides) */
    const int narrow = thin_side(Co, Ci, vec) && (int64_t)Co * K * K * Ci * 4 <= THIN_NARROW_SMEM;
    return (thin_side(Ci, Co, THIN_VEC) || narrow ? 1u : 0u) |
           (thin_side(Co, Ci, THIN_VEC) ? 2u : 0u) |
           (thin_side(Ci, Co, THIN_WV) || thin_side(Co, Ci, THIN_WV) ? 4u : 0u);
}
static int thin_aligned(const void *p, int bytes) {
    return ((uintptr_t)p % (uintptr_t)bytes) == 0;
}

template <typename T, bool DGRAD>
static int thin_wide_launch(cudaStream_t st, int CT, void *out, const void *in, const void *w,
                            const float *bias, int N, int H, int W, int Ho, int Wo, int Cw, int K,
                            int S, int pad, int accum) {
    const int64_t R = (int64_t)N * (DGRAD ? (int64_t)H * W : (int64_t)Ho * Wo);
    int64_t blocks = (R + THIN_THREADS / 32 - 1) / (THIN_THREADS / 32);
    if (blocks > THIN_WIDE_BLOCKS) blocks = THIN_WIDE_BLOCKS;
    dim3 grid((unsigned)blocks, (unsigned)((Cw + 32 * THIN_VEC - 1) / (32 * THIN_VEC)));
#define THIN_WIDE_CASE(ct)                                                                         \
    case ct:                                                                                       \
        SG_LAUNCH_NAMED("conv_thin_wide_kernel", (conv_thin_wide_kernel<T, ct, DGRAD>), grid,      \
                        THIN_THREADS, 0, st, (T *)out, (const T *)in, (const T *)w, bias, N, H, W, \
                        Ho, Wo, Cw, K, S, pad, accum);                                             \
        break;
    switch (CT) {
        THIN_WIDE_CASE(1)
        THIN_WIDE_CASE(2)
        THIN_WIDE_CASE(3)
        THIN_WIDE_CASE(4)
    default:
        return sg_set_error("conv_thin_wide_kernel: %d thin channels", CT);
    }
#undef THIN_WIDE_CASE
    SG_LAUNCH_CHECK("conv_thin_wide_kernel");
    thin_launches++;
    return SG_OK;
}

template <typename T, bool THIN_IN>
static int thin_wgrad_launch(cudaStream_t st, int CT, float *part, const void *dy, const void *x,
                             int N, int H, int W, int Ho, int Wo, int Cw, int K, int S, int pad,
                             int64_t chunks, int64_t chunk_len) {
    const int64_t items = chunks * ((Cw + 32 * THIN_WV - 1) / (32 * THIN_WV)) * K * K;
    const unsigned blocks = (unsigned)((items + THIN_THREADS / 32 - 1) / (THIN_THREADS / 32));
#define THIN_WGRAD_CASE(ct)                                                                        \
    case ct:                                                                                       \
        SG_LAUNCH_NAMED("conv_thin_wgrad_kernel", (conv_thin_wgrad_kernel<T, ct, THIN_IN>),        \
                        blocks, THIN_THREADS, 0, st, part, (const T *)dy, (const T *)x, N, H, W,   \
                        Ho, Wo, Cw, K, S, pad, (int)chunks, chunk_len);                            \
        break;
    switch (CT) {
        THIN_WGRAD_CASE(1)
        THIN_WGRAD_CASE(2)
        THIN_WGRAD_CASE(3)
        THIN_WGRAD_CASE(4)
    default:
        return sg_set_error("conv_thin_wgrad_kernel: %d thin channels", CT);
    }
#undef THIN_WGRAD_CASE
    SG_LAUNCH_CHECK("conv_thin_wgrad_kernel");
    thin_launches++;
    return SG_OK;
}

template <typename T>
static int thin_narrow_launch(cudaStream_t st, int CT, void *y, const void *x, const void *w,
                              const float *bias, int N, int H, int W, int Ho, int Wo, int Ci, int K,
                              int S, int pad) {
    const unsigned blocks = (unsigned)(((int64_t)N * Ho * Wo + THIN_THREADS - 1) / THIN_THREADS);
    const size_t smem = (size_t)CT * K * K * Ci * 4;
#define THIN_NARROW_CASE(ct)                                                                       \
    case ct:                                                                                       \
        SG_LAUNCH_NAMED("conv_thin_narrow_kernel", (conv_thin_narrow_kernel<T, ct>), blocks,       \
                        THIN_THREADS, smem, st, (T *)y, (const T *)x, (const T *)w, bias, N, H, W, \
                        Ho, Wo, Ci, K, S, pad);                                                    \
        break;
    switch (CT) {
        THIN_NARROW_CASE(1)
        THIN_NARROW_CASE(2)
        THIN_NARROW_CASE(3)
        THIN_NARROW_CASE(4)
    default:
        return sg_set_error("conv_thin_narrow_kernel: %d thin channels", CT);
    }
#undef THIN_NARROW_CASE
    SG_LAUNCH_CHECK("conv_thin_narrow_kernel");
    thin_launches++;
    return SG_OK;
}

/* The forward of a thin input (Ci <= THIN_MAX, x one buffer) on conv_thin_wide_kernel; 1 when it
 * ran (0: the caller runs the tiles; -1: a launch error). (These three are not inlined into the
 * launchers: gcc 12 then misreads the host emulation's launch of the tiles, -Wstringop-overflow.)
 */
__attribute__((noinline)) static int thin_fwd(cudaStream_t st, void *y, sg_cat x, const void *w,
                                              const float *b, int N, int H, int W, int Ci, int Co,
                                              int K, int S, int pad, int Ho, int Wo, int dt) {
    const int es = dt == DT_BF16 ? 2 : 4, ct = thin_side(Ci, Co, THIN_VEC);
    if (x.c[1]) return 0;
    int e;
    if (ct) {
        if (!thin_aligned(y, THIN_VEC * es)) return 0;
        e = dt == DT_BF16 ? thin_wide_launch<uint16_t, false>(st, ct, y, x.p[0], w, b, N, H, W, Ho,
                                                              Wo, Co, K, S, pad, 0)
                          : thin_wide_launch<float, false>(st, ct, y, x.p[0], w, b, N, H, W, Ho, Wo,
                                                           Co, K, S, pad, 0);
    } else {
        /* a thin output: x read 16 bytes at a time, the weights in shared memory */
        const int co = thin_side(Co, Ci, 16 / es);
        if (!co || !thin_aligned(x.p[0], 16) || (int64_t)co * K * K * Ci * 4 > THIN_NARROW_SMEM ||
            (int64_t)N * Ho * Wo >= 2147483647LL - THIN_THREADS)
            return 0;
        e = dt == DT_BF16 ? thin_narrow_launch<uint16_t>(st, co, y, x.p[0], w, b, N, H, W, Ho, Wo,
                                                         Ci, K, S, pad)
                          : thin_narrow_launch<float>(st, co, y, x.p[0], w, b, N, H, W, Ho, Wo, Ci,
                                                      K, S, pad);
    }
    return e ? -1 : 1;
}

/* The data gradient of a thin output (Co <= THIN_MAX, dx one buffer), as thin_fwd */
__attribute__((noinline)) static int thin_bwd_data(cudaStream_t st, sg_cat dx, const void *dy,
                                                   const void *w, int N, int H, int W, int Ci,
                                                   int Co, int K, int S, int pad, int Ho, int Wo,
                                                   int dt, int accum) {
    const int ct = thin_side(Co, Ci, THIN_VEC);
    if (!ct || dx.c[1] || !thin_aligned(dx.p[0], THIN_VEC * (dt == DT_BF16 ? 2 : 4))) return 0;
    const int e = dt == DT_BF16
                      ? thin_wide_launch<uint16_t, true>(st, ct, dx.p[0], dy, w, NULL, N, H, W, Ho,
                                                         Wo, Ci, K, S, pad, accum)
                      : thin_wide_launch<float, true>(st, ct, dx.p[0], dy, w, NULL, N, H, W, Ho, Wo,
                                                      Ci, K, S, pad, accum);
    return e ? -1 : 1;
}

/* The weight gradient's partials of a thin convolution (either side, x one buffer), as
 * thin_fwd */
__attribute__((noinline)) static int thin_bwd_weight(cudaStream_t st, float *part, const void *dy,
                                                     sg_cat x, int N, int H, int W, int Ci, int Co,
                                                     int K, int S, int pad, int Ho, int Wo, int dt,
                                                     int64_t chunks, int64_t chunk_len) {
    const int in = thin_side(Ci, Co, THIN_WV), out = in ? 0 : thin_side(Co, Ci, THIN_WV);
    const int es = THIN_WV * (dt == DT_BF16 ? 2 : 4);
    if ((!in && !out) || x.c[1] || !thin_aligned(in ? dy : x.p[0], es)) return 0;
    const int Cw = in ? Co : Ci, ct = in ? in : out;
    int e;
    if (dt == DT_BF16)
        e = in ? thin_wgrad_launch<uint16_t, true>(st, ct, part, dy, x.p[0], N, H, W, Ho, Wo, Cw, K,
                                                   S, pad, chunks, chunk_len)
               : thin_wgrad_launch<uint16_t, false>(st, ct, part, dy, x.p[0], N, H, W, Ho, Wo, Cw,
                                                    K, S, pad, chunks, chunk_len);
    else
        e = in ? thin_wgrad_launch<float, true>(st, ct, part, dy, x.p[0], N, H, W, Ho, Wo, Cw, K, S,
                                                pad, chunks, chunk_len)
               : thin_wgrad_launch<float, false>(st, ct, part, dy, x.p[0], N, H, W, Ho, Wo, Cw, K,
                                                 S, pad, chunks, chunk_len);
    return e ? -1 : 1;
}

/* =============================== launchers =============================== */

static int conv_check(const char *fn, sg_cat x, int N, int H, int W, int Ci, int Co, int K, int S,
                      int pad, int dt) {
    SG_DT_CHECK(dt, fn);
    SG_ARG_CHECK((K == 1 || K == 3) && (S == 1 || S == 2), "%s: K=%d S=%d unsupported", fn, K, S);
    SG_ARG_CHECK(pad >= 0 && pad <= K / 2, "%s: padding %d with K=%d unsupported", fn, pad, K);
    SG_ARG_CHECK(N > 0 && H > 0 && W > 0 && Ci > 0 && Co > 0, "%s: bad shape", fn);
    SG_ARG_CHECK(x.c[0] > 0 && x.c[1] >= 0 && x.c[0] + x.c[1] == Ci && x.p[0] != NULL &&
                     (x.c[1] == 0 || x.p[1] != NULL),
                 "%s: concatenation of %d + %d channels does not make Ci = %d", fn, x.c[0], x.c[1],
                 Ci);
    int64_t P = (int64_t)N * sg_ws_conv_out(H, K, S) * sg_ws_conv_out(W, K, S);
    SG_ARG_CHECK(P > 0 && (int64_t)N * H * W / CONV_BM < 2147483647LL && Co / CONV_BN < 65535,
                 "%s: shape too large", fn);
    return SG_OK;
}

static int conv_aligned16(const void *p) {
    return ((uintptr_t)p & 15u) == 0;
}

sg_conv_path cuda_conv2d_path(sg_cat x, const void *y, int N, int H, int W, int Co, int K, int S,
                              int dt) {
    /* 16-byte copies of 8 channels that never straddle a part; 32-bit pixel indices */
    if (dt == DT_BF16 && x.c[0] % 8 == 0 && x.c[1] % 8 == 0 && Co % 8 == 0 &&
        conv_aligned16(x.p[0]) && conv_aligned16(x.p[1]) && conv_aligned16(y) &&
        (int64_t)N * H * W < 2147483647LL)
        return SG_CONV_PATH_TENSOR_CORE;
    return K == 1 && S == 1 ? SG_CONV_PATH_CUBLAS : SG_CONV_PATH_CUDA_CORE;
}

/* A fused prologue's operands (sg_conv_fuse), and the path it needs; the residual's alignment
 * (the tensor-core epilogue reads two channels at a time). */
int cu_conv_fuse_check(const char *fn, const sg_conv_fuse *f, sg_conv_path path, int N, int Ci,
                       int dt) {
    if (f && f->res)
        SG_ARG_CHECK(((uintptr_t)f->res & 3u) == 0, "%s: the residual must be 4-byte aligned", fn);
    if (f && f->stats)
        SG_ARG_CHECK(((uintptr_t)f->stats & 7u) == 0 && f->stats_ld > 0,
                     "%s: the statistics' partials must be 8-byte aligned, with their channels",
                     fn);
    if (!f || !f->norm) return SG_OK;
    SG_ARG_CHECK(path == SG_CONV_PATH_TENSOR_CORE && dt == DT_BF16,
                 "%s: a normalised input (sg_conv_fuse.norm) is computed on the bf16 tensor-core "
                 "path only (bf16, every part of x and Co multiples of 8, 16-byte aligned "
                 "operands); this convolution takes the %s path",
                 fn, path == SG_CONV_PATH_CUBLAS ? "cuBLAS" : "CUDA-core");
    SG_ARG_CHECK(f->mean && f->rstd && f->gamma && f->beta && f->G > 0 && Ci % f->G == 0 &&
                     (int64_t)N * f->G < 2147483647LL,
                 "%s: the normalisation needs mean, rstd, gamma, beta and G | Ci (G = %d, Ci = %d)",
                 fn, f->G, Ci);
    SG_ARG_CHECK(f->act == SG_ACT_NONE || f->act == SG_ACT_SILU, "%s: activation %d", fn, f->act);
    SG_ARG_CHECK(f->drop.p >= 0.0f && f->drop.p < 1.0f &&
                     (f->drop.p == 0.0f || (f->drop.seed && f->drop.step)),
                 "%s: dropout p = %g needs 0 <= p < 1 and the device seed and step", fn,
                 (double)f->drop.p);
    SG_ARG_CHECK(!f->v || conv_aligned16(f->v), "%s: v must be 16-byte aligned", fn);
    return SG_OK;
}

/* The forward on `path` (the launchers' choice: cuda_conv2d_path, or the GEMM engine's). */
static int conv2d_fwd_on(sg_conv_path path, const char *fn, cudaStream_t st, sg_blas *blas, void *y,
                         sg_cat x, const void *w, const float *b, const sg_conv_fuse *fuse, int N,
                         int H, int W, int Ci, int Co, int K, int S, int pad, int dt, void *ws,
                         int64_t ws_bytes) {
    if (conv_check(fn, x, N, H, W, Ci, Co, K, S, pad, dt)) return SG_ERR;
    if (cu_conv_fuse_check(fn, fuse, path, N, Ci, dt)) return SG_ERR;
    if (path == SG_CONV_PATH_TENSOR_CORE)
        return cu_conv_tc_fwd(st, y, x, (const uint16_t *)w, b, fuse, N, H, W, Ci, Co, K, S, pad);
    const int Ho = sg_ws_conv_out(H, K, S), Wo = sg_ws_conv_out(W, K, S);
    const int64_t P = (int64_t)N * Ho * Wo;
    if (K == 1 && S == 1) {
        if (cu_gemm_fwd(st, blas, y, x, w, b, (int64_t)N * H * W, Ci, Co, dt, ws, ws_bytes))
            return SG_ERR;
    } else {
        const int thin = thin_fwd(st, y, x, w, b, N, H, W, Ci, Co, K, S, pad, Ho, Wo, dt);
        if (thin < 0) return SG_ERR;
        if (!thin && cu_conv_wino_takes(dt, K, S, pad)) {
            if (cu_conv_wino(st, sg_cat1(y, Co), x, (const float *)w, b, N, H, W, Ci, Co, 0, 0))
                return SG_ERR;
        } else if (!thin) {
            dim3 grid((unsigned)((P + CONV_PM - 1) / CONV_PM),
                      (unsigned)((Co + CONV_BN - 1) / CONV_BN));
            CONV_TILE_LAUNCH(conv_fwd_kernel, grid, st, y, x, w, b, N, H, W, Ci, Co, K, S, pad, Ho,
                             Wo, dt);
        }
    }
    /* the residual after the conv, as the unfused plan's add node (y = res + y in place) */
    if (fuse && fuse->res && cuda_add_fwd(st, y, fuse->res, y, P * Co, dt)) return SG_ERR;
    /* the statistics' partials of y: the normalisation's own pass, after it */
    return fuse && fuse->stats ? cuda_norm_partials(st, fuse->stats, fuse->stats_ld, sg_cat1(y, Co),
                                                    N, Ho * Wo, 0, dt)
                               : SG_OK;
}

int cuda_conv2d_fwd(cudaStream_t st, sg_blas *blas, void *y, sg_cat x, const void *w,
                    const float *b, const sg_conv_fuse *fuse, int N, int H, int W, int Ci, int Co,
                    int K, int S, int pad, int dt, void *ws, int64_t ws_bytes) {
    return conv2d_fwd_on(cuda_conv2d_path(x, y, N, H, W, Co, K, S, dt), "cuda_conv2d_fwd", st, blas,
                         y, x, w, b, fuse, N, H, W, Ci, Co, K, S, pad, dt, ws, ws_bytes);
}

int cuda_conv2d_gemm_fwd(cudaStream_t st, sg_blas *blas, void *y, sg_cat x, const void *w,
                         const float *b, const sg_conv_fuse *fuse, int N, int H, int W, int Ci,
                         int Co, int dt, void *ws, int64_t ws_bytes) {
    return conv2d_fwd_on(SG_CONV_PATH_CUBLAS, "cuda_conv2d_gemm_fwd", st, blas, y, x, w, b, fuse, N,
                         H, W, Ci, Co, 1, 1, 0, dt, ws, ws_bytes);
}

/* The fold has no path off the tensor cores: the planner folds only bf16 convolutions the
 * fused kernels take (planner/fuse.c), and a call that does not fit is refused, never run
 * another way with other bits. */
int cuda_conv2d_sc_fwd(cudaStream_t st, void *y, sg_cat h, const void *w, const float *b,
                       const sg_conv_fuse *fuse, sg_cat x, const void *ws, const float *bs, int N,
                       int H, int W, int Ci, int Co, int K, int pad, int dt) {
    const char *fn = "cuda_conv2d_sc_fwd";
    if (conv_check(fn, h, N, H, W, Ci, Co, K, 1, pad, dt)) return SG_ERR;
    if (conv_check(fn, x, N, H, W, x.c[0] + x.c[1], Co, 1, 1, 0, dt)) return SG_ERR;
    const sg_conv_path path = cuda_conv2d_path(h, y, N, H, W, Co, K, 1, dt);
    SG_ARG_CHECK(path == SG_CONV_PATH_TENSOR_CORE &&
                     cuda_conv2d_path(x, y, N, H, W, Co, 1, 1, dt) == SG_CONV_PATH_TENSOR_CORE &&
                     ws != NULL && conv_aligned16(w) && conv_aligned16(ws),
                 "%s: the shortcut fold runs on the bf16 tensor-core path only (bf16, every part "
                 "of h and x and Co multiples of 8, 16-byte aligned operands): plan with --fuse 0",
                 fn);
    SG_ARG_CHECK(!fuse || !fuse->res, "%s: the fold adds the shortcut, not a residual", fn);
    if (cu_conv_fuse_check(fn, fuse, path, N, Ci, dt)) return SG_ERR;
    const sg_tc_shortcut sc = {x, (const uint16_t *)ws, bs};
    return cu_conv_tc_fwd_sc(st, y, h, (const uint16_t *)w, b, fuse, sc, N, H, W, Ci, Co, K, pad);
}

/* the backward partials of dx after a data gradient off the tensor cores (sg_norm_bwd_fuse) */
static int bwd_stats_after(cudaStream_t st, const sg_norm_bwd_fuse *nb, sg_cat dx, int N, int HW,
                           int Ci, int dt) {
    if (!nb || !nb->part) return SG_OK;
    SG_ARG_CHECK(!dx.c[1], "the backward partials of a concatenated dx");
    return cuda_norm_bwd_partials(st, nb, dx.p[0], N, HW, Ci, dt);
}

static int conv2d_bwd_data_on(int gemm, const char *fn, cudaStream_t st, sg_blas *blas, sg_cat dx,
                              const void *dy, const void *w, int N, int H, int W, int Ci, int Co,
                              int K, int S, int pad, int dt, int accum, void *ws, int64_t ws_bytes,
                              const sg_norm_bwd_fuse *nb) {
    if (conv_check(fn, dx, N, H, W, Ci, Co, K, S, pad, dt)) return SG_ERR;
    SG_ARG_CHECK(!nb || !nb->part ||
                     (!dx.c[1] && nb->x.c[0] + nb->x.c[1] == Ci && nb->G > 0 && Ci % nb->G == 0 &&
                      ((uintptr_t)nb->part & 7u) == 0),
                 "%s: the backward partials need dx one buffer, the norm's x of Ci channels in G "
                 "groups and 8-byte aligned partials",
                 fn);
    if (!gemm && cuda_conv2d_path(dx, dy, N, H, W, Co, K, S, dt) == SG_CONV_PATH_TENSOR_CORE)
        return cu_conv_tc_bwd_data(st, dx, dy, (const uint16_t *)w, nb, N, H, W, Ci, Co, K, S, pad,
                                   accum);
    if (K == 1 && S == 1)
        return cu_gemm_bwd_data(st, blas, dx, dy, w, (int64_t)N * H * W, Ci, Co, dt, accum, ws,
                                ws_bytes) ||
               bwd_stats_after(st, nb, dx, N, H * W, Ci, dt);
    const int Ho = sg_ws_conv_out(H, K, S), Wo = sg_ws_conv_out(W, K, S);
    const int thin = thin_bwd_data(st, dx, dy, w, N, H, W, Ci, Co, K, S, pad, Ho, Wo, dt, accum);
    if (thin < 0) return SG_ERR;
    if (thin) return bwd_stats_after(st, nb, dx, N, H * W, Ci, dt);
    if (cu_conv_wino_takes(dt, K, S, pad))
        return cu_conv_wino(st, dx, sg_cat1(dy, Co), (const float *)w, NULL, N, H, W, Co, Ci, 1,
                            accum) ||
               bwd_stats_after(st, nb, dx, N, H * W, Ci, dt);
    /* one grid z-slice per parity class, each as long as the largest class (ceil(H/S) x
     * ceil(W/S) pixels a sample) */
    const int64_t Qc = (int64_t)N * ((H + S - 1) / S) * ((W + S - 1) / S);
    dim3 grid((unsigned)((Qc + CONV_PM - 1) / CONV_PM), (unsigned)((Ci + CONV_BN - 1) / CONV_BN),
              (unsigned)(S * S));
    CONV_TILE_LAUNCH(conv_bwd_data_kernel, grid, st, dx, dy, w, N, H, W, Ci, Co, K, S, pad, Ho, Wo,
                     dt, accum);
    return bwd_stats_after(st, nb, dx, N, H * W, Ci, dt);
}

int cuda_conv2d_bwd_data(cudaStream_t st, sg_blas *blas, sg_cat dx, const void *dy, const void *w,
                         int N, int H, int W, int Ci, int Co, int K, int S, int pad, int dt,
                         int accum, void *ws, int64_t ws_bytes, const sg_norm_bwd_fuse *nb) {
    return conv2d_bwd_data_on(0, "cuda_conv2d_bwd_data", st, blas, dx, dy, w, N, H, W, Ci, Co, K, S,
                              pad, dt, accum, ws, ws_bytes, nb);
}

int cuda_conv2d_gemm_bwd_data(cudaStream_t st, sg_blas *blas, sg_cat dx, const void *dy,
                              const void *w, int N, int H, int W, int Ci, int Co, int dt, int accum,
                              void *ws, int64_t ws_bytes, const sg_norm_bwd_fuse *nb) {
    return conv2d_bwd_data_on(1, "cuda_conv2d_gemm_bwd_data", st, blas, dx, dy, w, N, H, W, Ci, Co,
                              1, 1, 0, dt, accum, ws, ws_bytes, nb);
}

/* the weight gradient's chunk partials on the 64 x 64 tiles (not inlined: as thin_fwd) */
__attribute__((noinline)) static int tiles_bwd_weight(cudaStream_t st, float *part, const void *dy,
                                                      sg_cat x, int N, int H, int W, int Ci, int Co,
                                                      int K, int S, int pad, int Ho, int Wo, int dt,
                                                      int64_t chunks, int64_t chunk_len) {
    dim3 grid((unsigned)(K * K * ((Ci + CONV_BN - 1) / CONV_BN)),
              (unsigned)((Co + CONV_BM - 1) / CONV_BM), (unsigned)chunks);
    CONV_TILE_LAUNCH(conv_bwd_weight_kernel, grid, st, part, dy, x, N, H, W, Ci, Co, K, S, pad, Ho,
                     Wo, dt, chunk_len);
    return SG_OK;
}

static int conv2d_bwd_weight_on(sg_conv_path path, const char *fn, cudaStream_t st, sg_blas *blas,
                                float *dw, float *db, const void *dy, sg_cat x,
                                const sg_conv_fuse *fuse, int N, int H, int W, int Ci, int Co,
                                int K, int S, int pad, int dt, int accum, void *ws,
                                int64_t ws_bytes) {
    if (conv_check(fn, x, N, H, W, Ci, Co, K, S, pad, dt)) return SG_ERR;
    const int Ho = sg_ws_conv_out(H, K, S), Wo = sg_ws_conv_out(W, K, S);
    const int64_t P = (int64_t)N * Ho * Wo;
    if (cu_conv_fuse_check(fn, fuse, path, N, Ci, dt)) return SG_ERR;
    if (path == SG_CONV_PATH_CUBLAS)
        return cu_gemm_bwd_weight(st, blas, dw, db, dy, x, P, Ci, Co, dt, accum, ws, ws_bytes);
    SG_WS_CHECK(sg_ws_conv_wgrad_chunked(P, Ci, Co, K, db != NULL), ws_bytes, fn);
    const int64_t nw = (int64_t)Co * K * K * Ci, most = sg_ws_wgrad_chunks(P, nw);
    int64_t chunks = path == SG_CONV_PATH_TENSOR_CORE
                         ? cuda_conv2d_tc_wgrad_chunks(N, H, W, Ci, Co, K, S)
                         : most;
    const int64_t chunk_len = (P + chunks - 1) / chunks;
    float *part = (float *)ws;
    if (path == SG_CONV_PATH_TENSOR_CORE) {
        if (cu_conv_tc_bwd_weight(st, part, dy, x, fuse && fuse->norm ? fuse : NULL, N, H, W, Ci,
                                  Co, K, S, pad, chunks, chunk_len))
            return SG_ERR;
    } else {
        const int thin = thin_bwd_weight(st, part, dy, x, N, H, W, Ci, Co, K, S, pad, Ho, Wo, dt,
                                         chunks, chunk_len);
        if (thin < 0) return SG_ERR;
        if (!thin && cu_conv_wino_takes(dt, K, S, pad)) {
            /* Winograd's chunks of tiles (at most the workspace's), its partials in this layout */
            chunks = cu_conv_wino_wgrad_chunks(N, H, W, Ci, Co, most);
            if (cu_conv_wino_wgrad(st, part, (const float *)dy, x, N, H, W, Ci, Co, chunks))
                return SG_ERR;
        } else if (!thin && tiles_bwd_weight(st, part, dy, x, N, H, W, Ci, Co, K, S, pad, Ho, Wo,
                                             dt, chunks, chunk_len)) {
            return SG_ERR;
        }
    }
    /* the chunks' sum and db's column sums, one launch */
    return cu_wgrad_finish(st, dw, part, nw, (int)chunks, accum, db, dy, dt, P, Co,
                           (char *)ws + sg_ws_align(most * nw * 4));
}

int64_t cuda_conv2d_tc_wgrad_chunks(int N, int H, int W, int Ci, int Co, int K, int S) {
    const int64_t P = (int64_t)N * sg_ws_conv_out(H, K, S) * sg_ws_conv_out(W, K, S),
                  nw = (int64_t)Co * K * K * Ci;
    return cu_conv_tc_wgrad_chunks(Co, (int64_t)K * K * Ci, 1, P, sg_ws_wgrad_chunks(P, nw));
}

int cuda_conv2d_bwd_weight(cudaStream_t st, sg_blas *blas, float *dw, float *db, const void *dy,
                           sg_cat x, const sg_conv_fuse *fuse, int N, int H, int W, int Ci, int Co,
                           int K, int S, int pad, int dt, int accum, void *ws, int64_t ws_bytes) {
    return conv2d_bwd_weight_on(cuda_conv2d_path(x, dy, N, H, W, Co, K, S, dt),
                                "cuda_conv2d_bwd_weight", st, blas, dw, db, dy, x, fuse, N, H, W,
                                Ci, Co, K, S, pad, dt, accum, ws, ws_bytes);
}

int cuda_conv2d_gemm_bwd_weight(cudaStream_t st, sg_blas *blas, float *dw, float *db,
                                const void *dy, sg_cat x, int N, int H, int W, int Ci, int Co,
                                int dt, int accum, void *ws, int64_t ws_bytes) {
    return conv2d_bwd_weight_on(SG_CONV_PATH_CUBLAS, "cuda_conv2d_gemm_bwd_weight", st, blas, dw,
                                db, dy, x, NULL, N, H, W, Ci, Co, 1, 1, 0, dt, accum, ws, ws_bytes);
}

/* The bias pieces of a convolution run by another engine (cudnn_conv.h): the forward bias
 * where cuDNN could not fuse it, and db, which the cuDNN backward-filter does not compute (the
 * same column sum, in the same order, as cuda_conv2d_bwd_weight's, so db has the own engine's
 * bits). */
int cuda_conv2d_bias_add(cudaStream_t st, void *y, const float *b, int64_t P, int Co, int dt) {
    const char *fn = "cuda_conv2d_bias_add";
    SG_DT_CHECK(dt, fn);
    SG_ARG_CHECK(y && b && P > 0 && Co > 0, "%s: bad arguments (P=%lld Co=%d)", fn, (long long)P,
                 Co);
    SG_LAUNCH(conv_bias_add_kernel, sg_grid_for(P * Co), SG_THREADS, 0, st, y, b, P * Co, Co, dt);
    SG_LAUNCH_CHECK("conv_bias_add_kernel");
    return SG_OK;
}

int cuda_conv2d_bwd_bias(cudaStream_t st, float *db, const void *dy, int64_t P, int Co, int dt,
                         int accum, void *ws, int64_t ws_bytes) {
    const char *fn = "cuda_conv2d_bwd_bias";
    SG_DT_CHECK(dt, fn);
    SG_ARG_CHECK(db && dy && P > 0 && Co > 0, "%s: bad arguments (P=%lld Co=%d)", fn, (long long)P,
                 Co);
    SG_WS_CHECK(sg_ws_colsum(1, P, Co), ws_bytes, fn);
    return cu_col_sum(st, db, DT_F32, dy, dt, 1, P, Co, accum, ws);
}

int cuda_conv2d_bwd_widen(cudaStream_t st, float *dw, const void *dwb, int64_t nw, float *db,
                          const void *dy, int64_t P, int Co, int dt, int accum, void *ws,
                          int64_t ws_bytes) {
    const char *fn = "cuda_conv2d_bwd_widen";
    SG_ARG_CHECK(dw && dwb && nw > 0, "%s: bad arguments (nw=%lld)", fn, (long long)nw);
    if (db) {
        SG_DT_CHECK(dt, fn);
        SG_ARG_CHECK(dy && P > 0 && Co > 0, "%s: bad arguments (P=%lld Co=%d)", fn, (long long)P,
                     Co);
        SG_WS_CHECK(sg_ws_colsum(1, P, Co), ws_bytes, fn);
    }
    return cu_widen_finish(st, dw, (const uint16_t *)dwb, nw, accum, db, dy, dt, P, Co, ws);
}

/* ================ upconv2d: nearest-upsample + 3x3 conv from the low-res input ================
 *
 * y[N,2H,2W,Co] = conv3x3_pad1(upsample2x(x[N,H,W,Ci]), w) + b without the upsampled tensor
 * (the sub-pixel form, derived in kernels/cpu/conv.c): output pixel (2i + py, 2j + px) is a 2x2
 * conv of x at rows i + py - 1 + a, columns j + px - 1 + b (a, b in {0, 1}; outside x: the zero
 * padding, exactly) with the folded weights wf[py][px][co][a][b][ci], each the sum of the 3x3
 * taps (ky, kx) with a = (py + ky + 1) / 2 - py and b = (px + kx + 1) / 2 - px.
 *
 * What is rounded where: w is the fp32 master weights; upconv_fold_kernel sums each folded
 * weight's taps in fp32 (increasing ky, then kx: cpu_upconv2d_fold's order, the same bits) and,
 * in a bf16 plan, rounds that sum to bf16 once (never a sum of rounded taps; on the CUDA-core
 * path the rounded value is kept in fp32 storage), into the workspace. The GEMMs multiply
 * those; the outputs are rounded once on store.
 *
 * Paths (cuda_upconv2d_path): bf16 with Ci and Co multiples of 8 and 16-byte aligned operands
 * runs on the tensor cores (conv_tc.cu: the forward as 4 class GEMMs of K = 4 Ci, the backward
 * data as one GEMM of K = 16 Co over the low-res pixels, the weight gradient as 4 class GEMMs
 * split over the pixels); anything else on the direct CUDA-core kernels below (one thread per
 * output element, fp32 arithmetic: the fallback, which the planner never picks for a model).
 *
 * Weight gradient, both paths: fp32 partials part[chunk][class][Co][2][2][Ci] over chunks of
 * the low-res pixels (sg_ws_wgrad_chunks), then upconv_fold_back_kernel: each 3x3 tap of dw is
 * the sum over the classes in increasing (py, px) of its folded entry (each entry the sum of its
 * chunks in chunk order), added to the old dw when accumulating. db: the conv's column sum over
 * the 4 N H W output pixels. No atomics. */

/* the folded tap (0 or 1) of 3x3 tap k in output parity class p */
__device__ __forceinline__ int upconv_tap(int p, int k) {
    return (p + k + 1) / 2 - p;
}

/* threads stride over wf[4][Co][4][Ci] (stored as dt): the fp32 sum of the element's taps,
 * rounded to bf16 once when round (the fp32 storage of the CUDA-core path keeps the rounded
 * value: a bf16 plan multiplies the same folded weights on either path, and the CPU's) */
__global__ void upconv_fold_kernel(void *wf, const float *w, int Ci, int Co, int dt, int round) {
    SG_PDL_ENTER();
    SG_GRID_STRIDE(e, (int64_t)16 * Co * Ci) {
        const int ci = (int)(e % Ci);
        int64_t r = e / Ci;
        const int t = (int)(r % 4), co = (int)(r / 4 % Co), cls = (int)(r / 4 / Co);
        const int py = cls >> 1, px = cls & 1, a = t >> 1, b = t & 1;
        float s = 0.0f;
        for (int ky = 0; ky < 3; ky++)
            for (int kx = 0; kx < 3; kx++)
                if (upconv_tap(py, ky) == a && upconv_tap(px, kx) == b)
                    s = __fadd_rn(s, w[((int64_t)co * 9 + ky * 3 + kx) * Ci + ci]);
        dev_st(wf, e, round ? dev_bf16_to_f32(dev_f32_to_bf16(s)) : s, dt);
    }
}

/* threads stride over y[N,2H,2W,Co]: the 2x2 sub-pixel conv of the element's class (fp32 wf) */
__global__ void upconv_fwd_kernel(void *y, const void *x, const float *wf, const float *b, int N,
                                  int H, int W, int Ci, int Co, int dt) {
    SG_PDL_ENTER();
    SG_GRID_STRIDE(e, (int64_t)N * 4 * H * W * Co) {
        const int co = (int)(e % Co);
        const int64_t q = e / Co;
        const int C = (int)(q % (2 * W)), R = (int)(q / (2 * W) % (2 * H));
        const int img = (int)(q / (2 * W) / (2 * H));
        const int py = R & 1, px = C & 1, i = R >> 1, j = C >> 1;
        float acc = 0.0f;
        for (int t = 0; t < 4; t++) {
            const int ih = i + py - 1 + (t >> 1), iw = j + px - 1 + (t & 1);
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
            const int64_t xo = (((int64_t)img * H + ih) * W + iw) * Ci;
            const float *wp = wf + (((int64_t)(py * 2 + px) * Co + co) * 4 + t) * Ci;
            for (int ci = 0; ci < Ci; ci++) acc = fmaf(wp[ci], dev_ld(x, xo + ci, dt), acc);
        }
        dev_st(y, e, acc + (b ? b[co] : 0.0f), dt);
    }
}

/* threads stride over dx[N,H,W,Ci]: the 16 (class, tap) output pixels that read it */
__global__ void upconv_bwd_data_kernel(void *dx, const void *dy, const float *wf, int N, int H,
                                       int W, int Ci, int Co, int dt, int accum) {
    SG_PDL_ENTER();
    SG_GRID_STRIDE(e, (int64_t)N * H * W * Ci) {
        const int ci = (int)(e % Ci);
        const int64_t q = e / Ci;
        const int j = (int)(q % W), i = (int)(q / W % H), img = (int)(q / W / H);
        float acc = 0.0f;
        for (int cls = 0; cls < 4; cls++)
            for (int t = 0; t < 4; t++) {
                const int py = cls >> 1, px = cls & 1;
                const int oi = i - py + 1 - (t >> 1), oj = j - px + 1 - (t & 1);
                if (oi < 0 || oi >= H || oj < 0 || oj >= W) continue;
                const int64_t yo =
                    (((int64_t)img * 2 * H + 2 * oi + py) * 2 * W + 2 * oj + px) * Co;
                const float *wp = wf + ((int64_t)cls * Co * 4 + t) * Ci + ci;
                for (int co = 0; co < Co; co++)
                    acc = fmaf(dev_ld(dy, yo + co, dt), wp[(int64_t)co * 4 * Ci], acc);
            }
        dev_st_acc(dx, e, acc, dt, accum);
    }
}

/* threads stride over part[chunks][4][Co][4][Ci]: the element's sum over its chunk's low-res
 * pixels */
__global__ void upconv_wgrad_part_kernel(float *part, const void *dy, const void *x, int N, int H,
                                         int W, int Ci, int Co, int dt, int chunks,
                                         int64_t chunk_len) {
    SG_PDL_ENTER();
    const int64_t P = (int64_t)N * H * W;
    SG_GRID_STRIDE(e, (int64_t)chunks * 16 * Co * Ci) {
        const int ci = (int)(e % Ci);
        int64_t r = e / Ci;
        const int t = (int)(r % 4);
        r /= 4;
        const int co = (int)(r % Co);
        r /= Co;
        const int cls = (int)(r % 4), chunk = (int)(r / 4);
        const int py = cls >> 1, px = cls & 1, a = t >> 1, b = t & 1;
        const int64_t p0 = chunk * chunk_len, p1 = p0 + chunk_len < P ? p0 + chunk_len : P;
        float acc = 0.0f;
        for (int64_t p = p0; p < p1; p++) {
            const int j = (int)(p % W), i = (int)(p / W % H), img = (int)(p / W / H);
            const int ih = i + py - 1 + a, iw = j + px - 1 + b;
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
            const float g = dev_ld(
                dy, (((int64_t)img * 2 * H + 2 * i + py) * 2 * W + 2 * j + px) * Co + co, dt);
            acc = fmaf(g, dev_ld(x, (((int64_t)img * H + ih) * W + iw) * Ci + ci, dt), acc);
        }
        part[e] = acc;
    }
}

/* threads stride over dw[Co][3][3][Ci]: the sum over classes (increasing) of the tap's folded
 * entry, each the sum of its chunks in order; old + that when accumulating */
__global__ void upconv_fold_back_kernel(float *dw, const float *part, int Ci, int Co, int chunks,
                                        int accum) {
    SG_PDL_ENTER();
    const int64_t nf = (int64_t)16 * Co * Ci; /* one chunk's partials */
    SG_GRID_STRIDE(e, (int64_t)9 * Co * Ci) {
        const int ci = (int)(e % Ci);
        const int tap = (int)(e / Ci % 9), co = (int)(e / Ci / 9);
        const int ky = tap / 3, kx = tap % 3;
        float v = 0.0f;
        for (int cls = 0; cls < 4; cls++) {
            const int t = upconv_tap(cls >> 1, ky) * 2 + upconv_tap(cls & 1, kx);
            const float *pp = part + (((int64_t)cls * Co + co) * 4 + t) * Ci + ci;
            float s = 0.0f;
            for (int c = 0; c < chunks; c++) s = __fadd_rn(s, pp[(int64_t)c * nf]);
            v = cls ? __fadd_rn(v, s) : s;
        }
        dw[e] = accum ? __fadd_rn(dw[e], v) : v;
    }
}

sg_conv_path cuda_upconv2d_path(const void *x, const void *y, int N, int H, int W, int Ci, int Co,
                                int dt) {
    if (dt == DT_BF16 && Ci % 8 == 0 && Co % 8 == 0 && conv_aligned16(x) && conv_aligned16(y) &&
        (int64_t)N * 4 * H * W < 2147483647LL)
        return SG_CONV_PATH_TENSOR_CORE;
    return SG_CONV_PATH_CUDA_CORE;
}

static int upconv_check(const char *fn, const void *a, const void *w, int N, int H, int W, int Ci,
                        int Co, int dt, const void *ws, int64_t need, int64_t ws_bytes) {
    SG_DT_CHECK(dt, fn);
    SG_ARG_CHECK(a && w && N > 0 && H > 0 && W > 0 && Ci > 0 && Co > 0 &&
                     (int64_t)N * 4 * H * W * (Ci > Co ? Ci : Co) < ((int64_t)1 << 40),
                 "%s: bad shape", fn);
    SG_WS_CHECK(need, ws_bytes, fn);
    return SG_OK;
}

/* the folded weights into ws, stored as sdt (the tensor-core path's bf16, the CUDA-core path's
 * fp32), their values rounded to bf16 once when the activations dt are bf16 */
static int upconv_fold(cudaStream_t st, void *ws, const float *w, int Ci, int Co, int sdt, int dt) {
    SG_LAUNCH(upconv_fold_kernel, sg_grid_for((int64_t)16 * Co * Ci), SG_THREADS, 0, st, ws, w, Ci,
              Co, sdt, (int)(dt == DT_BF16));
    SG_LAUNCH_CHECK("upconv_fold_kernel");
    return SG_OK;
}

int cu_upconv_fold_bf16(cudaStream_t st, void *ws, const float *w, int Ci, int Co) {
    return upconv_fold(st, ws, w, Ci, Co, DT_BF16, DT_BF16);
}

int cu_upconv_fold_back(cudaStream_t st, float *dw, const float *part, int Ci, int Co, int chunks,
                        int accum) {
    SG_LAUNCH(upconv_fold_back_kernel, sg_grid_for((int64_t)9 * Co * Ci), SG_THREADS, 0, st, dw,
              part, Ci, Co, chunks, accum);
    SG_LAUNCH_CHECK("upconv_fold_back_kernel");
    return SG_OK;
}

int cuda_upconv2d_fwd(cudaStream_t st, void *y, const void *x, const float *w, const float *b,
                      int N, int H, int W, int Ci, int Co, int dt, void *ws, int64_t ws_bytes) {
    const char *fn = "cuda_upconv2d_fwd";
    if (upconv_check(fn, x, w, N, H, W, Ci, Co, dt, ws, sg_ws_upconv2d_fold(Ci, Co), ws_bytes))
        return SG_ERR;
    if (cuda_upconv2d_path(x, y, N, H, W, Ci, Co, dt) == SG_CONV_PATH_TENSOR_CORE) {
        if (upconv_fold(st, ws, w, Ci, Co, DT_BF16, dt)) return SG_ERR;
        return cu_upconv_tc_fwd(st, (uint16_t *)y, (const uint16_t *)x, (const uint16_t *)ws, b, N,
                                H, W, Ci, Co);
    }
    if (upconv_fold(st, ws, w, Ci, Co, DT_F32, dt)) return SG_ERR;
    SG_LAUNCH(upconv_fwd_kernel, sg_grid_for((int64_t)N * 4 * H * W * Co), SG_THREADS, 0, st, y, x,
              (const float *)ws, b, N, H, W, Ci, Co, dt);
    SG_LAUNCH_CHECK("upconv_fwd_kernel");
    return SG_OK;
}

int cuda_upconv2d_bwd_data(cudaStream_t st, void *dx, const void *dy, const float *w, int N, int H,
                           int W, int Ci, int Co, int dt, int accum, void *ws, int64_t ws_bytes) {
    const char *fn = "cuda_upconv2d_bwd_data";
    if (upconv_check(fn, dy, w, N, H, W, Ci, Co, dt, ws, sg_ws_upconv2d_fold(Ci, Co), ws_bytes))
        return SG_ERR;
    if (cuda_upconv2d_path(dx, dy, N, H, W, Ci, Co, dt) == SG_CONV_PATH_TENSOR_CORE) {
        if (upconv_fold(st, ws, w, Ci, Co, DT_BF16, dt)) return SG_ERR;
        return cu_upconv_tc_bwd_data(st, (uint16_t *)dx, (const uint16_t *)dy, (const uint16_t *)ws,
                                     N, H, W, Ci, Co, accum);
    }
    if (upconv_fold(st, ws, w, Ci, Co, DT_F32, dt)) return SG_ERR;
    SG_LAUNCH(upconv_bwd_data_kernel, sg_grid_for((int64_t)N * H * W * Ci), SG_THREADS, 0, st, dx,
              dy, (const float *)ws, N, H, W, Ci, Co, dt, accum);
    SG_LAUNCH_CHECK("upconv_bwd_data_kernel");
    return SG_OK;
}

int cuda_upconv2d_bwd_weight(cudaStream_t st, float *dw, float *db, const void *dy, const void *x,
                             int N, int H, int W, int Ci, int Co, int dt, int accum, void *ws,
                             int64_t ws_bytes) {
    const char *fn = "cuda_upconv2d_bwd_weight";
    if (upconv_check(fn, dy, x, N, H, W, Ci, Co, dt, ws,
                     sg_ws_upconv2d_bwd_weight(N, H, W, Ci, Co, db != NULL), ws_bytes))
        return SG_ERR;
    SG_ARG_CHECK(dw != NULL, "%s: no dw", fn);
    const int64_t P = (int64_t)N * H * W, most = sg_ws_wgrad_chunks(P, (int64_t)16 * Co * Ci);
    const int tc = cuda_upconv2d_path(x, dy, N, H, W, Ci, Co, dt) == SG_CONV_PATH_TENSOR_CORE;
    const int64_t chunks = tc ? cu_conv_tc_wgrad_chunks(Co, 4 * (int64_t)Ci, 4, P, most) : most;
    const int64_t chunk_len = (P + chunks - 1) / chunks;
    float *part = (float *)ws;
    if (tc) {
        if (cu_upconv_tc_bwd_weight(st, part, (const uint16_t *)dy, (const uint16_t *)x, N, H, W,
                                    Ci, Co, chunks, chunk_len))
            return SG_ERR;
    } else {
        SG_LAUNCH(upconv_wgrad_part_kernel, sg_grid_for(chunks * 16 * Co * Ci), SG_THREADS, 0, st,
                  part, dy, x, N, H, W, Ci, Co, dt, (int)chunks, chunk_len);
        SG_LAUNCH_CHECK("upconv_wgrad_part_kernel");
    }
    if (cu_upconv_fold_back(st, dw, part, Ci, Co, (int)chunks, accum)) return SG_ERR;
    if (db)
        return cu_col_sum(st, db, DT_F32, dy, dt, 1, 4 * P, Co, accum,
                          (char *)ws + sg_ws_align(most * 16 * Co * Ci * 4));
    return SG_OK;
}
