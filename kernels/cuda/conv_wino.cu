/* conv_wino.cu — fp32 3x3 stride-1 convolutions as Winograd F(2x2, 3x3) on the CUDA cores: the
 * three passes of the CUDA-core path (conv.cu), where cuda_conv_wino_enable switched it on (the
 * CUDA backend: SG_CONV_WINO=1).
 *
 * Why: an fp32 convolution runs on the CUDA cores (no TF32: the design's fp32 is fp32), and
 * unet_adm64 at batch 32 spends most of its step there. The fourth GPU session measured the
 * direct tiles at 17-20 TFLOP/s on every large fp32 layer, cuBLAS's SGEMM of the same size at
 * 35-51, and PyTorch's fp32 step (TF32 off) reaching its 31 ms of convolutions with cuDNN's FFT
 * and Winograd-class kernels among them. F(2x2, 3x3) computes a 2x2 output tile from a 4x4
 * input tile with 16 multiplies per (input, output) channel pair instead of 36: 2.25x fewer
 * FMAs, the rest additions in the transforms.
 *
 * The arithmetic (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks"): per
 * tile, d the 4x4 input patch (rows 2 th - 1 .. 2 th + 2, columns 2 tw - 1 .. 2 tw + 2, zero
 * outside the image: padding 1) and g the 3x3 filter of one channel pair,
 *   V = B^T d B,  U = G g G^T,  M[xi] = sum over the reduction channels of U[xi] V[xi],
 *   Y = A^T M A (the 2x2 outputs), xi = 4 a + b over the 16 positions, with
 *   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1],
 *   A^T = [1 1 1 0; 0 1 -1 -1].
 * The data gradient of a stride-1, padding-1 3x3 convolution is the same correlation of dy with
 * the filter flipped in both taps and transposed in its channels, g'[ci][t][co] =
 * w[co][8 - t][ci], padding 1 again: one kernel, two ways of reading the weights (DGRAD).
 *
 * One fused kernel, no workspace: a block of 256 threads takes 32 tiles (128 output pixels,
 * flattened n, th, tw) by 32 output channels, and the reduction 8 channels a slice. Each slice
 * thread tid reads one (tile, channel)'s 4x4 patch (8 consecutive channels of a pixel by 8
 * consecutive threads) and transforms it into V, and one (channel, output channel) filter (9
 * values) into U, both into shared memory (V[16][8][32], U[16][8][32]); the next slice's
 * values are read into registers during the current slice's FMAs and stored into the other of
 * two buffers after them (one barrier a slice), as the direct tiles do. The 16 products M[xi] are
 * 16 independent 32 x 32 GEMMs: thread (xi = tid / 16, l = tid % 16) owns xi's tiles 4 tt + 16 j
 * + e (tt = l / 4) by channels 4 tc + 16 j + e (tc = l % 4), j < 2, e < 4: 64 accumulators,
 * two float4 of V and two of U a channel for 64 FMAs, two blocks an SM (76 KiB of shared memory
 * each, at most 128 registers a thread). After the last slice the accumulators go through
 * shared memory so that one thread has a (tile, channel)'s 16 values and writes its 2x2 outputs
 * (+ bias), consecutive threads on consecutive channels.
 *
 * The weight gradient is the same GEMMs with the tiles as the reduction: dU[xi][co][ci] = sum over
 * tiles of Z[xi][tile][co] V[xi][tile][ci], Z = A dY A^T the transform of the tile's 2x2 output
 * gradient (the gradient of M), then dw = G^T dU G (the gradient of g). A block takes 32 output
 * by 32 input channels and one chunk of the tiles, 8 tiles a slice; each chunk's dU is taken back
 * to the 3x3 taps in the block and stored as the direct tiles' chunk partials
 * part[chunk][co][tap][ci], which cu_wgrad_finish sums in chunk order (with db, as for the
 * tiles). The chunks: about two blocks an SM of 132, at most the workspace's (a function of the
 * shapes alone).
 *
 * Determinism: every M[xi] is one thread's chain of fmaf over the reduction channels in
 * increasing order; the transforms are fixed sequences of adds (and exact halvings); the store
 * adds the bias, or the old value under accumulation (dev_cat_st_acc); the weight gradient's
 * chunks are summed in order. No atomics. The bits differ from the direct tiles' (another
 * arithmetic): a run keeps one (the backend's describe() records it; a resume that changes it is
 * warned about). cuda_ops holds the three passes to the CPU reference within the fp32 tolerance.
 */
#include "kernels/cuda/cuda_common.cuh"

#define WN_TILES 32 /* Winograd tiles (2 x 2 outputs each) a block */
#define WN_BN 32    /* output channels a block */
#define WN_BK 8     /* reduction channels a slice */
#define WN_THREADS 256
#define WN_LD 36                        /* a row of V (32 tiles) or U (32 channels): + 4, float4s */
#define WN_XI (WN_BK * WN_LD + 16)      /* one xi of V or U: 8 rows, + 16 so that xi and xi + 1 */
#define WN_SMEM_FLOATS (4 * 16 * WN_XI) /* start 16 banks apart; two buffers of each */
#define WN_SMEM_BYTES (WN_SMEM_FLOATS * 4)

/* The 2x2 output tiles of an N x H x W image batch (a partial tile at an odd edge) */
__host__ __device__ __forceinline__ int64_t wino_tiles(int N, int H, int W) {
    return (int64_t)N * ((H + 1) / 2) * ((W + 1) / 2);
}

static int wino_enabled;
static long wino_launches;
void cuda_conv_wino_enable(int on) {
    wino_enabled = on != 0;
}
long cuda_conv_wino_launches(void) {
    return wino_launches;
}

/* V = B^T d B of one 4x4 patch d (row-major), into v[16] (xi = 4 a + b) */
__device__ __forceinline__ void wino_input_transform(const float (&d)[16], float (&v)[16]) {
    float t[16];
#pragma unroll
    for (int c = 0; c < 4; c++) { /* B^T d: the rows */
        t[c] = d[c] - d[8 + c];
        t[4 + c] = d[4 + c] + d[8 + c];
        t[8 + c] = d[8 + c] - d[4 + c];
        t[12 + c] = d[4 + c] - d[12 + c];
    }
#pragma unroll
    for (int r = 0; r < 4; r++) { /* (B^T d) B: the columns */
        v[4 * r] = t[4 * r] - t[4 * r + 2];
        v[4 * r + 1] = t[4 * r + 1] + t[4 * r + 2];
        v[4 * r + 2] = t[4 * r + 2] - t[4 * r + 1];
        v[4 * r + 3] = t[4 * r + 1] - t[4 * r + 3];
    }
}

/* U = G g G^T of one 3x3 filter g (row-major, tap = 3 kh + kw), into u[16] */
__device__ __forceinline__ void wino_filter_transform(const float (&g)[9], float (&u)[16]) {
    float t[12]; /* G g: 4 rows of 3 */
#pragma unroll
    for (int c = 0; c < 3; c++) {
        t[c] = g[c];
        t[3 + c] = 0.5f * (g[c] + g[3 + c] + g[6 + c]);
        t[6 + c] = 0.5f * (g[c] - g[3 + c] + g[6 + c]);
        t[9 + c] = g[6 + c];
    }
#pragma unroll
    for (int r = 0; r < 4; r++) {
        u[4 * r] = t[3 * r];
        u[4 * r + 1] = 0.5f * (t[3 * r] + t[3 * r + 1] + t[3 * r + 2]);
        u[4 * r + 2] = 0.5f * (t[3 * r] - t[3 * r + 1] + t[3 * r + 2]);
        u[4 * r + 3] = t[3 * r + 2];
    }
}

/* Z = A dY A^T of one tile's 2x2 output gradient dy (row-major), into z[16]: the gradient of
 * the forward's M (Y = A^T M A) */
__device__ __forceinline__ void wino_grad_transform(const float (&dy)[4], float (&z)[16]) {
    const float r[4][2] = {{dy[0], dy[1]},
                           {dy[0] + dy[2], dy[1] + dy[3]},
                           {dy[0] - dy[2], dy[1] - dy[3]},
                           {-dy[2], -dy[3]}}; /* A dY */
#pragma unroll
    for (int i = 0; i < 4; i++) {
        z[4 * i] = r[i][0];
        z[4 * i + 1] = r[i][0] + r[i][1];
        z[4 * i + 2] = r[i][0] - r[i][1];
        z[4 * i + 3] = -r[i][1];
    }
}

/* dg = G^T dU G of one filter's 16 summed products du, into dg[9] (tap = 3 kh + kw): the gradient
 * of the forward's g (U = G g G^T) */
__device__ __forceinline__ void wino_filter_grad(const float (&du)[16], float (&dg)[9]) {
    float t[12]; /* G^T dU: 3 rows of 4 */
#pragma unroll
    for (int c = 0; c < 4; c++) {
        const float h = 0.5f * (du[4 + c] + du[8 + c]);
        t[c] = du[c] + h;
        t[4 + c] = 0.5f * (du[4 + c] - du[8 + c]);
        t[8 + c] = h + du[12 + c];
    }
#pragma unroll
    for (int r = 0; r < 3; r++) {
        const float h = 0.5f * (t[4 * r + 1] + t[4 * r + 2]);
        dg[3 * r] = t[4 * r] + h;
        dg[3 * r + 1] = 0.5f * (t[4 * r + 1] - t[4 * r + 2]);
        dg[3 * r + 2] = h + t[4 * r + 3];
    }
}

/* Y = A^T M A of one tile's 16 products m (xi = 4 a + b), into y[4] (2 x 2, row-major) */
__device__ __forceinline__ void wino_output_transform(const float (&m)[16], float (&y)[4]) {
    float t[8]; /* A^T M: 2 rows of 4 */
#pragma unroll
    for (int c = 0; c < 4; c++) {
        t[c] = m[c] + m[4 + c] + m[8 + c];
        t[4 + c] = m[4 + c] - m[8 + c] - m[12 + c];
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        y[2 * r] = t[4 * r] + t[4 * r + 1] + t[4 * r + 2];
        y[2 * r + 1] = t[4 * r + 1] - t[4 * r + 2] - t[4 * r + 3];
    }
}

__device__ __forceinline__ void wino_zero(float (&acc)[8][8]) {
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int j = 0; j < 8; j++) acc[i][j] = 0.0f;
}

/* One slice's 16 GEMMs, this thread's part: acc[i][j] += a[k][i] b[k][j] for k < WN_BK in
 * increasing order, a[k][i] = ar[k WN_LD + 4 (i / 4) ... ] read as float4s at rows 16 j apart
 * (ar and br: this thread's xi and its first float4, file comment) */
__device__ __forceinline__ void wino_slice(float (&acc)[8][8], const float *ar, const float *br) {
#pragma unroll
    for (int k = 0; k < WN_BK; k++) {
        float a[8], b[8];
#pragma unroll
        for (int j = 0; j < 2; j++) {
            const float4 av = *(const float4 *)(ar + k * WN_LD + 16 * j);
            const float4 bv = *(const float4 *)(br + k * WN_LD + 16 * j);
            a[4 * j] = av.x, a[4 * j + 1] = av.y, a[4 * j + 2] = av.z, a[4 * j + 3] = av.w;
            b[4 * j] = bv.x, b[4 * j + 1] = bv.y, b[4 * j + 2] = bv.z, b[4 * j + 3] = bv.w;
        }
#pragma unroll
        for (int i = 0; i < 8; i++)
#pragma unroll
            for (int j = 0; j < 8; j++) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
}

/* The accumulators into shared memory, Ms[xi][row][col] (rows: the thread's 4 tt + 16 (i / 4) +
 * i % 4, columns its 4 tc + 16 j + e), after the last slice's barrier */
__device__ __forceinline__ void wino_acc_store(const float (&acc)[8][8], float *Ms, int xi, int tt,
                                               int tc) {
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const int r = 4 * tt + 16 * (i / 4) + i % 4;
#pragma unroll
        for (int j = 0; j < 2; j++) {
            float4 v;
            v.x = acc[i][4 * j], v.y = acc[i][4 * j + 1], v.z = acc[i][4 * j + 2],
            v.w = acc[i][4 * j + 3];
            *(float4 *)(Ms + (xi * 32 + r) * WN_LD + 4 * tc + 16 * j) = v;
        }
    }
}

/* out[N,H,W,Cn] (a concatenation for the data gradient's dx) = the correlation of in[N,H,W,Cr]
 * (x, or dy as one buffer) with the filters, padding 1, + bias (may be NULL), or + the old value
 * under accum. The forward: filter (n, k) is w[n][t][k] (w[Cn][3][3][Cr]); DGRAD: w[k][8 - t][n]
 * (w[Cr][3][3][Cn]: the forward's weights, whose output channels are this reduction's).
 * blockIdx.x: 32 tiles, blockIdx.y: 32 output channels (file comment). */
template <bool DGRAD>
__global__ void __launch_bounds__(WN_THREADS, 2)
    conv_wino_kernel(sg_cat out, sg_cat in, const float *w, const float *bias, int N, int H, int W,
                     int Cr, int Cn, int accum) {
    SG_PDL_ENTER();
    SG_DYNAMIC_SMEM(float, sm);
    float *Vs = sm, *Us = sm + 2 * 16 * WN_XI;
    const int tid = threadIdx.x;
    const int TH = (H + 1) / 2, TW = (W + 1) / 2;
    const int64_t T = wino_tiles(N, H, W);
    const int64_t t0 = (int64_t)blockIdx.x * WN_TILES;
    const int n0 = blockIdx.y * WN_BN;
    /* the loads: tile lt's patch of channel k0 + lk, whose pixels inside the image are the bits
     * of `inside` (4 i + j: row lh + i, column lw + j) */
    const int lt = tid / WN_BK, lk = tid % WN_BK;
    int64_t lpix = 0;
    unsigned inside = 0;
    if (t0 + lt < T) {
        const int64_t t = t0 + lt;
        const int n = (int)(t / ((int64_t)TH * TW)), r = (int)(t % ((int64_t)TH * TW));
        const int lh = 2 * (r / TW) - 1, lw = 2 * (r % TW) - 1;
        lpix = ((int64_t)n * H + lh) * W + lw;
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++)
                if (lh + i >= 0 && lh + i < H && lw + j >= 0 && lw + j < W)
                    inside |= 1u << (4 * i + j);
    }
    /* ... and filter (k, n) = (tid % 8, tid / 8) forward, (tid / 32, tid % 32) DGRAD, so that
     * consecutive threads read consecutive addresses */
    const int fk = DGRAD ? tid / WN_BN : tid % WN_BK, fn = DGRAD ? tid % WN_BN : tid / WN_BK;
    /* filter (k, n)'s tap 0 at k0 = 0, its taps gs apart */
    const bool fn_ok = n0 + fn < Cn;
    const float *wf = DGRAD ? w + ((int64_t)fk * 9 + 8) * Cn + n0 + fn
                            : w + (int64_t)(fn_ok ? n0 + fn : 0) * 9 * Cr + fk;
    const int gs = DGRAD ? -Cn : Cr;
    float rd[16], rg[9];
    auto fetch = [&](int k0) {
        /* one channel of one part: its base and pixel stride, 32-bit offsets from there */
        const int k = k0 + lk, part = k >= in.c[0];
        const int cp = part ? in.c[1] : in.c[0];
        const float *src =
            (const float *)(part ? in.p[1] : in.p[0]) + lpix * cp + (part ? k - in.c[0] : k);
        const bool kin = k < Cr;
#pragma unroll
        for (int e = 0; e < 16; e++)
            rd[e] = kin && (inside >> e & 1u) ? src[((e / 4) * W + e % 4) * cp] : 0.0f;
        const bool ok = k0 + fk < Cr && fn_ok;
        const float *g = wf + (DGRAD ? (int64_t)k0 * 9 * Cn : k0);
#pragma unroll
        for (int t = 0; t < 9; t++) rg[t] = ok ? g[t * gs] : 0.0f;
    };
    auto stash = [&](int buf) {
        float v[16], u[16];
        wino_input_transform(rd, v);
        float *vb = Vs + buf * 16 * WN_XI + lk * WN_LD + lt;
#pragma unroll
        for (int x = 0; x < 16; x++) vb[x * WN_XI] = v[x];
        wino_filter_transform(rg, u);
        float *ub = Us + buf * 16 * WN_XI + fk * WN_LD + fn;
#pragma unroll
        for (int x = 0; x < 16; x++) ub[x * WN_XI] = u[x];
    };
    /* the GEMMs: thread (xi, tt, tc) owns xi's tiles 4 tt + 16 j + e and channels 4 tc + 16 j + e
     * (j < 2, e < 4): acc[tile][channel] */
    const int xi = tid / 16, tt = (tid % 16) / 4, tc = tid % 4;
    float acc[8][8];
    wino_zero(acc);
    fetch(0);
    stash(0);
    __syncthreads();
    int buf = 0;
    for (int k0 = 0; k0 < Cr; k0 += WN_BK, buf ^= 1) {
        const bool more = k0 + WN_BK < Cr;
        if (more) fetch(k0 + WN_BK); /* in flight during the slice's FMAs */
        const float *vb = Vs + (buf * 16 + xi) * WN_XI + 4 * tt;
        const float *ub = Us + (buf * 16 + xi) * WN_XI + 4 * tc;
        wino_slice(acc, vb, ub);
        if (more) stash(buf ^ 1);
        __syncthreads();
    }
    /* the outputs: M[xi][tile][channel] through shared memory (over V and U, the last barrier
     * passed), then thread pairs (tile, channel) = (p / 32, p % 32), p = tid + 256 r, r < 4 */
    float *Ms = sm;
    wino_acc_store(acc, Ms, xi, tt, tc);
    __syncthreads();
#pragma unroll
    for (int r = 0; r < 4; r++) {
        const int p = tid + WN_THREADS * r, tl = p / WN_BN, nl = p % WN_BN;
        const int64_t t = t0 + tl;
        const int n = n0 + nl;
        if (t >= T || n >= Cn) continue;
        float m[16], y[4];
#pragma unroll
        for (int x = 0; x < 16; x++) m[x] = Ms[(x * WN_TILES + tl) * WN_LD + nl];
        wino_output_transform(m, y);
        const int nn = (int)(t / ((int64_t)TH * TW)), rr = (int)(t % ((int64_t)TH * TW));
        const int oh = 2 * (rr / TW), ow = 2 * (rr % TW);
        const float b = bias ? bias[n] : 0.0f;
#pragma unroll
        for (int a = 0; a < 2; a++)
#pragma unroll
            for (int c = 0; c < 2; c++)
                if (oh + a < H && ow + c < W)
                    dev_cat_st_acc(out, ((int64_t)nn * H + oh + a) * W + ow + c, n,
                                   y[2 * a + c] + b, DT_F32, accum);
    }
}

/* The weight gradient's partials part[z][co][tap][ci] (the direct tiles' layout, which
 * cu_wgrad_finish sums in chunk order) over chunk z's tiles [z chunk_len, (z + 1) chunk_len) of
 * T: dU[xi][co][ci] = sum over the tiles of Z[xi][tile][co] V[xi][tile][ci] (Z the output
 * gradient's transform, V the input's), then G^T dU G. The GEMMs are the forward's with tiles as
 * the reduction: thread (xi, tt, tc) owns output channels 4 tt + 16 j + e by input channels 4 tc +
 * 16 j + e; a slice is 8 tiles, thread tid loads tile tid / 32's dy at output channel tid % 32 (4
 * values) and x patch at input channel tid % 32 (16 values). blockIdx.x: 32 input channels,
 * blockIdx.y: 32 output channels, blockIdx.z: the chunk. */
__global__ void __launch_bounds__(WN_THREADS, 2)
    conv_wino_wgrad_kernel(float *part, const float *dy, sg_cat x, int N, int H, int W, int Ci,
                           int Co, int64_t chunk_len) {
    SG_PDL_ENTER();
    SG_DYNAMIC_SMEM(float, sm);
    float *Zs = sm, *Xs = sm + 2 * 16 * WN_XI;
    const int tid = threadIdx.x;
    const int TH = (H + 1) / 2, TW = (W + 1) / 2;
    const int64_t T = wino_tiles(N, H, W);
    const int64_t tb0 = (int64_t)blockIdx.z * chunk_len;
    const int64_t tb1 = tb0 + chunk_len < T ? tb0 + chunk_len : T;
    const int ci0 = blockIdx.x * WN_BN, co0 = blockIdx.y * WN_BN;
    const int lt = tid / WN_BN, lc = tid % WN_BN;
    /* this thread's input channel: one part of x for the whole kernel */
    const int ci = ci0 + lc, xp = ci >= x.c[0];
    const int cp = xp ? x.c[1] : x.c[0];
    const float *xc = (const float *)(xp ? x.p[1] : x.p[0]) + (xp ? ci - x.c[0] : ci);
    const bool ci_ok = ci < Ci, co_ok = co0 + lc < Co;
    float rz[4], rx[16];
    auto fetch = [&](int64_t tb) {
        const int64_t t = tb + lt;
        const bool tin = t < tb1;
        int n = 0, th = 0, tw = 0;
        if (tin) {
            n = (int)(t / ((int64_t)TH * TW));
            const int r = (int)(t % ((int64_t)TH * TW));
            th = r / TW, tw = r % TW;
        }
        const int64_t pix = ((int64_t)n * H + 2 * th) * W + 2 * tw;
        /* the tile's outputs (and its patch's rows and columns) inside the image */
        const bool r1 = 2 * th + 1 < H, c1 = 2 * tw + 1 < W;
        const float *g = dy + pix * Co + co0 + lc;
        const bool go = tin && co_ok;
        rz[0] = go ? g[0] : 0.0f;
        rz[1] = go && c1 ? g[Co] : 0.0f;
        rz[2] = go && r1 ? g[(int64_t)W * Co] : 0.0f;
        rz[3] = go && r1 && c1 ? g[(int64_t)W * Co + Co] : 0.0f;
        const bool xo = tin && ci_ok;
        const bool rows[4] = {xo && th > 0, xo, xo && r1, xo && 2 * th + 2 < H};
        const bool cols[4] = {tw > 0, true, c1, 2 * tw + 2 < W};
        const float *row = xc + (pix - W - 1) * cp;
#pragma unroll
        for (int i = 0; i < 4; i++, row += (int64_t)W * cp)
#pragma unroll
            for (int j = 0; j < 4; j++) rx[4 * i + j] = rows[i] && cols[j] ? row[j * cp] : 0.0f;
    };
    auto stash = [&](int buf) {
        float z[16], v[16];
        wino_grad_transform(rz, z);
        wino_input_transform(rx, v);
        float *zb = Zs + buf * 16 * WN_XI + lt * WN_LD + lc;
        float *xb = Xs + buf * 16 * WN_XI + lt * WN_LD + lc;
#pragma unroll
        for (int q = 0; q < 16; q++) zb[q * WN_XI] = z[q], xb[q * WN_XI] = v[q];
    };
    const int xi = tid / 16, tt = (tid % 16) / 4, tc = tid % 4;
    float acc[8][8];
    wino_zero(acc);
    if (tb0 < tb1) {
        fetch(tb0);
        stash(0);
    }
    __syncthreads();
    int buf = 0;
    for (int64_t tb = tb0; tb < tb1; tb += WN_BK, buf ^= 1) {
        const bool more = tb + WN_BK < tb1;
        if (more) fetch(tb + WN_BK); /* in flight during the slice's FMAs */
        wino_slice(acc, Zs + (buf * 16 + xi) * WN_XI + 4 * tt,
                   Xs + (buf * 16 + xi) * WN_XI + 4 * tc);
        if (more) stash(buf ^ 1);
        __syncthreads();
    }
    /* dU through shared memory, then (co, ci) = (p / 32, p % 32), p = tid + 256 r: G^T dU G */
    float *Ms = sm;
    wino_acc_store(acc, Ms, xi, tt, tc);
    __syncthreads();
    float *out = part + (int64_t)blockIdx.z * Co * 9 * Ci;
#pragma unroll
    for (int r = 0; r < 4; r++) {
        const int p = tid + WN_THREADS * r, col = p / WN_BN, cil = p % WN_BN;
        const int co = co0 + col, c = ci0 + cil;
        if (co >= Co || c >= Ci) continue;
        float du[16], dg[9];
#pragma unroll
        for (int q = 0; q < 16; q++) du[q] = Ms[(q * 32 + col) * WN_LD + cil];
        wino_filter_grad(du, dg);
#pragma unroll
        for (int t = 0; t < 9; t++) out[((int64_t)co * 9 + t) * Ci + c] = dg[t];
    }
}

/* Does the Winograd form take this pass (conv.cu asks before the direct tiles)? fp32, 3x3,
 * stride 1, padding 1, with the switch on (all three passes). */
int cu_conv_wino_takes(int dt, int K, int S, int pad) {
    return wino_enabled && dt == DT_F32 && K == 3 && S == 1 && pad == 1;
}

int cu_conv_wino(cudaStream_t st, sg_cat out, sg_cat in, const float *w, const float *bias, int N,
                 int H, int W, int Cr, int Cn, int dgrad, int accum) {
    const char *name = dgrad ? "conv_wino_kernel<dgrad>" : "conv_wino_kernel<fwd>";
    const int64_t T = wino_tiles(N, H, W);
    SG_ARG_CHECK((T + WN_TILES - 1) / WN_TILES < 2147483647LL && (Cn + WN_BN - 1) / WN_BN < 65535,
                 "%s: shape too large", name);
    const dim3 grid((unsigned)((T + WN_TILES - 1) / WN_TILES),
                    (unsigned)((Cn + WN_BN - 1) / WN_BN));
    if (dgrad) {
        if (cuda_smem_attr(conv_wino_kernel<true>, WN_SMEM_BYTES, name)) return SG_ERR;
        SG_LAUNCH_NAMED(name, conv_wino_kernel<true>, grid, WN_THREADS, WN_SMEM_BYTES, st, out, in,
                        w, bias, N, H, W, Cr, Cn, accum);
    } else {
        if (cuda_smem_attr(conv_wino_kernel<false>, WN_SMEM_BYTES, name)) return SG_ERR;
        SG_LAUNCH_NAMED(name, conv_wino_kernel<false>, grid, WN_THREADS, WN_SMEM_BYTES, st, out, in,
                        w, bias, N, H, W, Cr, Cn, accum);
    }
    SG_LAUNCH_CHECK(name);
    wino_launches++;
    return SG_OK;
}

int64_t cu_conv_wino_wgrad_chunks(int N, int H, int W, int Ci, int Co, int64_t most) {
    /* about two blocks an SM of an H100 or H200 (132 SMs), each chunk at least 8 slices of
     * tiles, at most the workspace's `most`: a function of the shapes alone (the bits follow the
     * chunks) */
    const int64_t T = wino_tiles(N, H, W);
    const int64_t blocks = (int64_t)((Ci + WN_BN - 1) / WN_BN) * ((Co + WN_BN - 1) / WN_BN);
    int64_t c = (2 * 132 + blocks - 1) / blocks;
    if (c > T / (8 * WN_BK)) c = T / (8 * WN_BK);
    if (c > most) c = most;
    return c < 1 ? 1 : c;
}

int cu_conv_wino_wgrad(cudaStream_t st, float *part, const float *dy, sg_cat x, int N, int H, int W,
                       int Ci, int Co, int64_t chunks) {
    const char *name = "conv_wino_wgrad_kernel";
    const int64_t T = wino_tiles(N, H, W);
    const int64_t chunk_len = (T + chunks - 1) / chunks;
    SG_ARG_CHECK(chunks >= 1 && chunks < 65535 && (Ci + WN_BN - 1) / WN_BN < 65535 &&
                     (Co + WN_BN - 1) / WN_BN < 65535,
                 "%s: shape too large", name);
    const dim3 grid((unsigned)((Ci + WN_BN - 1) / WN_BN), (unsigned)((Co + WN_BN - 1) / WN_BN),
                    (unsigned)chunks);
    if (cuda_smem_attr(conv_wino_wgrad_kernel, WN_SMEM_BYTES, name)) return SG_ERR;
    SG_LAUNCH_NAMED(name, conv_wino_wgrad_kernel, grid, WN_THREADS, WN_SMEM_BYTES, st, part, dy, x,
                    N, H, W, Ci, Co, chunk_len);
    SG_LAUNCH_CHECK(name);
    wino_launches++;
    return SG_OK;
}
