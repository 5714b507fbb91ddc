/* conv.c — 2-D convolution, forward and both backward passes, as im2col + GEMM.
 *
 * Shapes (NHWC activations, weights [Co][K][K][Ci]):
 *   x[N,H,W,Ci], w[Co,K,K,Ci], b[Co], y[N,Ho,Wo,Co]
 *   K in {1,3}, stride S in {1,2}, zero padding: pad (0..K/2) at the top/left, at the
 *   bottom/right what the output size needs (pad = K/2: symmetric; pad = 0 with S = 2: SAME),
 *   Ho = (H + 2 (K/2) - K) / S + 1, Wo likewise.
 *
 * The math. Flatten the output pixels p = (n, ho, wo) into P = N*Ho*Wo rows. The im2col row
 * of pixel p is the receptive field laid out exactly like one filter:
 *   col[p][kh][kw][ci] = x[n, ho*S - pad + kh, wo*S - pad + kw, ci]   (0 outside the image)
 * so with Kc = K*K*Ci and w viewed as a [Co][Kc] matrix:
 *   forward      y[P][Co]   = col[P][Kc] w^T[Kc][Co] + b
 *   bwd data     dcol[P][Kc] = dy[P][Co] w[Co][Kc], then scatter-add dcol back (col2im)
 *   bwd weight   dw[Co][Kc] = dy^T[Co][P] col[P][Kc];  db[co] = sum_p dy[p][co]
 *
 * Memory. col for all P rows would grow with the batch, so rows are processed in chunks of
 * SG_CPU_SCRATCH_FLOATS / Kc pixels through the shared fixed scratch buffer. The chunking
 * depends only on the shapes, the chunks run in increasing p, the weight gradient sums chunk
 * products with beta = 1 in that order, and col2im adds each dx element's contributions in
 * increasing p: the same inputs give the same bits, whatever the thread count (sg_cpu_sgemm,
 * scratch.h; the copies and sums below share out over the same threads). A 1x1 stride-1 conv
 * needs no im2col at all: col is x itself (NHWC rows are pixels), so it is one plain GEMM.
 */
#include "common/sg_base.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/scratch.h"

#include <limits.h>
#include <string.h>

typedef struct {
    int N, H, W, Ci, Co, K, S, pad, Ho, Wo;
    int Kc;     /* K*K*Ci: one im2col row, one filter */
    int64_t P;  /* N*Ho*Wo output pixels */
    int chunk;  /* output pixels per im2col chunk */
    int direct; /* 1x1 stride 1: x is already the col matrix */
} conv_shape;

static conv_shape conv_shape_make(int N, int H, int W, int Ci, int Co, int K, int S, int pad) {
    SG_ASSERT((K == 1 || K == 3) && (S == 1 || S == 2) && pad >= 0 && pad <= K / 2);
    SG_ASSERT(N > 0 && H > 0 && W > 0 && Ci > 0 && Co > 0);
    conv_shape s = {N, H, W, Ci, Co, K, S, pad, 0, 0, 0, 0, 0, 0};
    s.Ho = (H + 2 * (K / 2) - K) / S + 1;
    s.Wo = (W + 2 * (K / 2) - K) / S + 1;
    s.Kc = K * K * Ci;
    s.P = (int64_t)N * s.Ho * s.Wo;
    s.direct = K == 1 && S == 1;
    /* One im2col row must fit the scratch; BLAS takes int dimensions. */
    SG_ASSERT(s.Kc <= SG_CPU_SCRATCH_FLOATS);
    SG_ASSERT(s.P <= INT_MAX);
    int64_t rows = SG_CPU_SCRATCH_FLOATS / s.Kc;
    /* A whole number of GEMM K blocks per chunk: the weight gradient's K is the chunk's rows */
    if (rows >= SG_CPU_GEMM_KB) rows -= rows % SG_CPU_GEMM_KB;
    s.chunk = (int)(rows < s.P ? rows : s.P);
    return s;
}

/* The copies and sums between the GEMMs run on the CPU kernels' pool (sg_cpu_parallel) in
 * tasks of CONV_TASK_ROWS im2col rows or dx pixels: each value is one task's, computed in the
 * order above, so the bits never depend on the thread count. */
#define CONV_TASK_ROWS 64

typedef struct {
    float *col, *dx;
    const float *x, *dcol;
    const conv_shape *s;
    int64_t p0, q0; /* the chunk's first output pixel; col2im: its first input pixel */
    int rows;       /* output pixels in the chunk */
    int64_t pixels; /* col2im: input pixels from q0 the chunk reaches */
} conv_job;

/* col[r][kh][kw][ci] for output pixels p0 + r, r in [r0, r1) (see the file comment). */
static void im2col_rows(float *col, const float *x, const conv_shape *s, int64_t p0, int r0,
                        int r1) {
    size_t ci_bytes = (size_t)s->Ci * sizeof(float);
    for (int r = r0; r < r1; r++) {
        int64_t p = p0 + r;
        int n = (int)(p / ((int64_t)s->Ho * s->Wo));
        int rem = (int)(p % ((int64_t)s->Ho * s->Wo));
        int ho = rem / s->Wo, wo = rem % s->Wo;
        float *dst = col + (int64_t)r * s->Kc;
        for (int kh = 0; kh < s->K; kh++) {
            int ih = ho * s->S - s->pad + kh;
            for (int kw = 0; kw < s->K; kw++, dst += s->Ci) {
                int iw = wo * s->S - s->pad + kw;
                if (ih < 0 || ih >= s->H || iw < 0 || iw >= s->W) {
                    memset(dst, 0, ci_bytes);
                } else {
                    memcpy(dst, x + (((int64_t)n * s->H + ih) * s->W + iw) * s->Ci, ci_bytes);
                }
            }
        }
    }
}

static void im2col_task(const void *ctx, int j) {
    const conv_job *k = ctx;
    const int r0 = j * CONV_TASK_ROWS,
              r1 = k->rows - r0 < CONV_TASK_ROWS ? k->rows : r0 + CONV_TASK_ROWS;
    im2col_rows(k->col, k->x, k->s, k->p0, r0, r1);
}

/* col[r][kh][kw][ci] for output pixels p0 .. p0+rows-1 */
static void im2col(float *col, const float *x, const conv_shape *s, int64_t p0, int rows) {
    const conv_job k = {.col = col, .x = x, .s = s, .p0 = p0, .rows = rows};
    sg_cpu_parallel((rows + CONV_TASK_ROWS - 1) / CONV_TASK_ROWS, im2col_task, &k);
}

/* The adjoint of im2col: dx[pixel under (p, kh, kw)] += dcol[p][kh][kw][:], each dx element
 * summing its contributions in increasing p (chunk after chunk, and within a chunk). Done as a
 * gather: input pixel q adds, for every output pixel p of the chunk one of whose taps (kh, kw)
 * reads it, dcol[p][kh][kw][:], with kh and then kw from K - 1 down (p grows as they shrink:
 * ho = (ih + pad - kh) / S, wo likewise; one tap per p reads q). The same float adds in the
 * same order as the scatter (p outer, kh, kw inner) made, and each pixel is one task's. */
static void col2im_task(const void *ctx, int j) {
    const conv_job *k = ctx;
    const conv_shape *s = k->s;
    const int64_t q0 = k->q0 + (int64_t)j * CONV_TASK_ROWS, qe = k->q0 + k->pixels;
    const int64_t q1 = qe - q0 < CONV_TASK_ROWS ? qe : q0 + CONV_TASK_ROWS;
    const int64_t p1 = k->p0 + k->rows, HW = (int64_t)s->H * s->W;
    for (int64_t q = q0; q < q1; q++) {
        const int n = (int)(q / HW), rem = (int)(q % HW), ih = rem / s->W, iw = rem % s->W;
        float *dst = k->dx + q * s->Ci;
        for (int kh = s->K - 1; kh >= 0; kh--) {
            const int th = ih + s->pad - kh, ho = th / s->S;
            if (th < 0 || th % s->S || ho >= s->Ho) continue;
            for (int kw = s->K - 1; kw >= 0; kw--) {
                const int tw = iw + s->pad - kw, wo = tw / s->S;
                if (tw < 0 || tw % s->S || wo >= s->Wo) continue;
                const int64_t p = ((int64_t)n * s->Ho + ho) * s->Wo + wo;
                if (p < k->p0 || p >= p1) continue;
                const float *src = k->dcol + (p - k->p0) * s->Kc + (kh * s->K + kw) * s->Ci;
                for (int c = 0; c < s->Ci; c++) dst[c] += src[c];
            }
        }
    }
}

static void col2im_add(float *dx, const float *dcol, const conv_shape *s, int64_t p0, int rows) {
    /* the input pixels the chunk's receptive fields reach: from its first pixel's first row to
     * its last pixel's last row, whole rows */
    const int64_t HoWo = (int64_t)s->Ho * s->Wo, pl = p0 + rows - 1;
    const int n0 = (int)(p0 / HoWo), ho0 = (int)(p0 % HoWo) / s->Wo;
    const int n1 = (int)(pl / HoWo), ho1 = (int)(pl % HoWo) / s->Wo;
    const int ih0 = ho0 * s->S - s->pad < 0 ? 0 : ho0 * s->S - s->pad;
    const int ih1 =
        ho1 * s->S - s->pad + s->K - 1 >= s->H ? s->H - 1 : ho1 * s->S - s->pad + s->K - 1;
    const int64_t q0 = ((int64_t)n0 * s->H + ih0) * s->W,
                  q1 = ((int64_t)n1 * s->H + ih1 + 1) * s->W;
    const conv_job k = {
        .dx = dx, .dcol = dcol, .s = s, .p0 = p0, .q0 = q0, .rows = rows, .pixels = q1 - q0};
    sg_cpu_parallel((int)((k.pixels + CONV_TASK_ROWS - 1) / CONV_TASK_ROWS), col2im_task, &k);
}

void cpu_conv2d_fwd(float *y, const float *x, const float *w, const float *b, int N, int H, int W,
                    int Ci, int Co, int K, int S, int pad) {
    conv_shape s = conv_shape_make(N, H, W, Ci, Co, K, S, pad);
    if (s.direct) {
        /* y[P][Co] = x[P][Ci] w^T */
        sg_cpu_sgemm(0, 1, (int)s.P, Co, Ci, 1.0f, x, Ci, w, Ci, 0.0f, y, Co);
    } else {
        float *col = sg_cpu_scratch_acquire();
        for (int64_t p0 = 0; p0 < s.P; p0 += s.chunk) {
            int rows = (int)(s.P - p0 < s.chunk ? s.P - p0 : s.chunk);
            im2col(col, x, &s, p0, rows);
            sg_cpu_sgemm(0, 1, rows, Co, s.Kc, 1.0f, col, s.Kc, w, s.Kc, 0.0f, y + p0 * Co, Co);
        }
        sg_cpu_scratch_release();
    }
    if (b) {
        for (int64_t p = 0; p < s.P; p++) {
            float *row = y + p * Co;
            for (int c = 0; c < Co; c++) row[c] += b[c];
        }
    }
}

/* conv2d_sc: the two convolutions of the fold as they are written unfused, each in fp32 with
 * its bias, y = (conv(h) + b) + (x ws^T + bs): conv2's output, the shortcut's GEMM summed onto
 * it (beta = 1), then the shortcut's bias. Not rounded in between: the fold's one rounding is
 * the store's. */
void cpu_conv2d_sc_fwd(float *y, const float *h, const float *w, const float *b, const float *x,
                       const float *ws, const float *bs, int N, int H, int W, int Cm, int Cin,
                       int Co, int K, int pad) {
    cpu_conv2d_fwd(y, h, w, b, N, H, W, Cm, Co, K, 1, pad);
    const int64_t P = (int64_t)N * H * W; /* stride 1, same size: conv2's pixels are x's */
    SG_ASSERT(K % 2 == 1 && P <= 2147483647LL);
    sg_cpu_sgemm(0, 1, (int)P, Co, Cin, 1.0f, x, Cin, ws, Cin, 1.0f, y, Co);
    if (bs)
        for (int64_t p = 0; p < P; p++)
            for (int c = 0; c < Co; c++) y[p * Co + c] += bs[c];
}

void cpu_conv2d_bwd_data(float *dx, const float *dy, const float *w, int N, int H, int W, int Ci,
                         int Co, int K, int S, int pad) {
    conv_shape s = conv_shape_make(N, H, W, Ci, Co, K, S, pad);
    if (s.direct) {
        /* dx[P][Ci] = dy[P][Co] w[Co][Ci] */
        sg_cpu_sgemm(0, 0, (int)s.P, Ci, Co, 1.0f, dy, Co, w, Ci, 0.0f, dx, Ci);
        return;
    }
    /* Strided or padded: some input pixels receive no contribution at all (S = 2 with K = 1
     * skips odd rows/columns), so start from zero and scatter-add every chunk. */
    memset(dx, 0, (size_t)N * H * W * Ci * sizeof(float));
    float *dcol = sg_cpu_scratch_acquire();
    for (int64_t p0 = 0; p0 < s.P; p0 += s.chunk) {
        int rows = (int)(s.P - p0 < s.chunk ? s.P - p0 : s.chunk);
        sg_cpu_sgemm(0, 0, rows, s.Kc, Co, 1.0f, dy + p0 * Co, Co, w, s.Kc, 0.0f, dcol, s.Kc);
        col2im_add(dx, dcol, &s, p0, rows);
    }
    sg_cpu_scratch_release();
}

void cpu_conv2d_bwd_weight(float *dw, float *db, const float *dy, const float *x, int N, int H,
                           int W, int Ci, int Co, int K, int S, int pad) {
    conv_shape s = conv_shape_make(N, H, W, Ci, Co, K, S, pad);
    if (s.direct) {
        /* dw[Co][Ci] = dy^T[Co][P] x[P][Ci] */
        sg_cpu_sgemm(1, 0, Co, Ci, (int)s.P, 1.0f, dy, Co, x, Ci, 0.0f, dw, Ci);
    } else {
        float *col = sg_cpu_scratch_acquire();
        for (int64_t p0 = 0; p0 < s.P; p0 += s.chunk) {
            int rows = (int)(s.P - p0 < s.chunk ? s.P - p0 : s.chunk);
            im2col(col, x, &s, p0, rows);
            /* The first chunk overwrites dw (beta 0), later ones add to it in chunk order. */
            sg_cpu_sgemm(1, 0, Co, s.Kc, rows, 1.0f, dy + p0 * Co, Co, col, s.Kc,
                         p0 == 0 ? 0.0f : 1.0f, dw, s.Kc);
        }
        sg_cpu_scratch_release();
    }
    if (db) sg_cpu_colsum(db, dy, s.P, Co, Co);
}

/* ---- nearest-upsample + 3x3 conv from the low-resolution input (upconv2d, issue 17)
 *
 * u[n][r][c] = x[n][r/2][c/2] (r < 2H, c < 2W) followed by the 3x3 stride-1 pad-1 conv:
 *   y[n][R][C] = b + sum over (ky, kx) of w[ky][kx] u[R - 1 + ky][C - 1 + kx]  (0 outside u).
 * Write R = 2i + py (the output's row class py in {0, 1}): tap ky reads up row 2i + py - 1 + ky,
 * i.e. low-res row floor((2i + py - 1 + ky) / 2) = i + floor((py - 1 + ky) / 2):
 *   py = 0: ky = 0 -> i - 1; ky = 1, 2 -> i        py = 1: ky = 0, 1 -> i; ky = 2 -> i + 1
 * so each class reads a 2 x 2 low-res window, rows i + py - 1 + a (a in {0, 1}), with the
 * folded tap a(py, ky) = floor((py - 1 + ky) / 2) - (py - 1); columns likewise. Padding is
 * exact: up row -1 is low row -1 and up row 2H is low row H, both outside x, and every up row
 * inside u maps to a low row inside x. Hence, with the folded weights
 *   wf[py][px][co][a][b][ci] = sum of w[co][ky][kx][ci] over the taps with a(py, ky) = a and
 *                              a(px, kx) = b   (in increasing ky, then kx),
 * y[n][2i + py][2j + px] = b + sum over (a, b) of wf[py][px][a][b] x[i + py - 1 + a][j + px - 1 +
 * b]: 16 multiply-adds per low-res pixel and output channel-pair instead of 36. These kernels are
 * direct loops over that form (the reference; the CUDA kernels are tested against them). */

/* the low-res row offset (relative to i + py - 1) of 3x3 tap k in output class p */
static int up_fold(int p, int k) {
    const int d = p - 1 + k; /* -1 .. 2 */
    const int fl = d < 0 ? -1 : d / 2;
    return fl - (p - 1);
}

void cpu_upconv2d_fold(float *wf, const float *w, int Ci, int Co, int round_bf16) {
    const int64_t cls_n = (int64_t)Co * 4 * Ci;
    memset(wf, 0, (size_t)(4 * cls_n) * sizeof(float));
    for (int py = 0; py < 2; py++)
        for (int px = 0; px < 2; px++) {
            float *dst = wf + (py * 2 + px) * cls_n;
            for (int co = 0; co < Co; co++)
                for (int ky = 0; ky < 3; ky++)
                    for (int kx = 0; kx < 3; kx++) {
                        const float *src = w + ((int64_t)co * 9 + ky * 3 + kx) * Ci;
                        float *d =
                            dst + ((int64_t)co * 4 + up_fold(py, ky) * 2 + up_fold(px, kx)) * Ci;
                        for (int c = 0; c < Ci; c++) d[c] += src[c];
                    }
        }
    if (round_bf16)
        for (int64_t k = 0; k < 4 * cls_n; k++) wf[k] = sg_bf16_to_f32(sg_f32_to_bf16(wf[k]));
}

/* one folded weight set at a time: 4 classes x Co x 4 x Ci floats of the scratch */
static float *upconv_folded(const float *w, int Ci, int Co, int round_bf16) {
    SG_ASSERT((int64_t)16 * Co * Ci <= SG_CPU_SCRATCH_FLOATS);
    float *wf = sg_cpu_scratch_acquire();
    cpu_upconv2d_fold(wf, w, Ci, Co, round_bf16);
    return wf;
}

void cpu_upconv2d_fwd(float *y, const float *x, const float *w, const float *b, int N, int H, int W,
                      int Ci, int Co, int round_bf16) {
    SG_ASSERT(N > 0 && H > 0 && W > 0 && Ci > 0 && Co > 0);
    const float *wf = upconv_folded(w, Ci, Co, round_bf16);
    const int64_t cls_n = (int64_t)Co * 4 * Ci;
    for (int n = 0; n < N; n++)
        for (int R = 0; R < 2 * H; R++)
            for (int C = 0; C < 2 * W; C++) {
                const int py = R & 1, px = C & 1, i = R >> 1, j = C >> 1;
                const float *wc = wf + (py * 2 + px) * cls_n;
                float *yp = y + (((int64_t)n * 2 * H + R) * 2 * W + C) * Co;
                for (int co = 0; co < Co; co++) {
                    float acc = 0.0f;
                    for (int a = 0; a < 2; a++) {
                        const int ih = i + py - 1 + a;
                        if (ih < 0 || ih >= H) continue;
                        for (int bb = 0; bb < 2; bb++) {
                            const int iw = j + px - 1 + bb;
                            if (iw < 0 || iw >= W) continue;
                            const float *xp = x + (((int64_t)n * H + ih) * W + iw) * Ci;
                            const float *wp = wc + ((int64_t)co * 4 + a * 2 + bb) * Ci;
                            for (int c = 0; c < Ci; c++) acc += wp[c] * xp[c];
                        }
                    }
                    yp[co] = acc + (b ? b[co] : 0.0f);
                }
            }
    sg_cpu_scratch_release();
}

/* dx[i][j] = sum over the output pixels (2i' + py, 2j' + px) that read it through folded tap
 * (a, b): i' = i - py + 1 - a, j' = j - px + 1 - b (inside the low-res grid); in increasing
 * (py, px, a, b), then co. */
void cpu_upconv2d_bwd_data(float *dx, const float *dy, const float *w, int N, int H, int W, int Ci,
                           int Co, int round_bf16) {
    SG_ASSERT(N > 0 && H > 0 && W > 0 && Ci > 0 && Co > 0);
    const float *wf = upconv_folded(w, Ci, Co, round_bf16);
    const int64_t cls_n = (int64_t)Co * 4 * Ci;
    memset(dx, 0, (size_t)N * H * W * Ci * sizeof(float));
    for (int n = 0; n < N; n++)
        for (int i = 0; i < H; i++)
            for (int j = 0; j < W; j++) {
                float *dxp = dx + (((int64_t)n * H + i) * W + j) * Ci;
                for (int py = 0; py < 2; py++)
                    for (int px = 0; px < 2; px++)
                        for (int a = 0; a < 2; a++)
                            for (int bb = 0; bb < 2; bb++) {
                                const int oi = i - py + 1 - a, oj = j - px + 1 - bb;
                                if (oi < 0 || oi >= H || oj < 0 || oj >= W) continue;
                                const float *dyp =
                                    dy +
                                    (((int64_t)n * 2 * H + 2 * oi + py) * 2 * W + 2 * oj + px) * Co;
                                const float *wc = wf + (py * 2 + px) * cls_n + (a * 2 + bb) * Ci;
                                for (int co = 0; co < Co; co++) {
                                    const float g = dyp[co], *wp = wc + (int64_t)co * 4 * Ci;
                                    for (int c = 0; c < Ci; c++) dxp[c] += g * wp[c];
                                }
                            }
            }
    sg_cpu_scratch_release();
}

/* dwf[py][px][co][a][b][ci] = sum over low-res pixels (n, i, j) (in that order) of
 * dy[n][2i + py][2j + px][co] x[n][i + py - 1 + a][j + px - 1 + b][ci]; then each 3x3 tap of dw
 * is the sum over the classes (py, px) in increasing order of the one folded entry that holds
 * it. db as the conv's (the same column sum over all output pixels). */
void cpu_upconv2d_bwd_weight(float *dw, float *db, const float *dy, const float *x, int N, int H,
                             int W, int Ci, int Co) {
    SG_ASSERT(N > 0 && H > 0 && W > 0 && Ci > 0 && Co > 0);
    SG_ASSERT((int64_t)Co * Ci <= SG_CPU_SCRATCH_FLOATS);
    float *part = sg_cpu_scratch_acquire(); /* one (class, a, b): [Co][Ci] */
    for (int py = 0; py < 2; py++)
        for (int px = 0; px < 2; px++)
            for (int a = 0; a < 2; a++)
                for (int bb = 0; bb < 2; bb++) {
                    memset(part, 0, (size_t)Co * Ci * sizeof(float));
                    for (int n = 0; n < N; n++)
                        for (int i = 0; i < H; i++)
                            for (int j = 0; j < W; j++) {
                                const int ih = i + py - 1 + a, iw = j + px - 1 + bb;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                const float *xp = x + (((int64_t)n * H + ih) * W + iw) * Ci;
                                const float *dyp =
                                    dy +
                                    (((int64_t)n * 2 * H + 2 * i + py) * 2 * W + 2 * j + px) * Co;
                                for (int co = 0; co < Co; co++) {
                                    float *pp = part + (int64_t)co * Ci;
                                    for (int c = 0; c < Ci; c++) pp[c] += dyp[co] * xp[c];
                                }
                            }
                    /* fold: every 3x3 tap whose folded position in this class is (a, b) */
                    for (int ky = 0; ky < 3; ky++)
                        for (int kx = 0; kx < 3; kx++) {
                            if (up_fold(py, ky) != a || up_fold(px, kx) != bb) continue;
                            for (int co = 0; co < Co; co++) {
                                float *d = dw + ((int64_t)co * 9 + ky * 3 + kx) * Ci;
                                const float *pp = part + (int64_t)co * Ci;
                                if (py == 0 && px == 0)
                                    memcpy(d, pp, (size_t)Ci * sizeof(float));
                                else
                                    for (int c = 0; c < Ci; c++) d[c] += pp[c];
                            }
                        }
                }
    sg_cpu_scratch_release();
    if (db) sg_cpu_colsum(db, dy, (int64_t)N * 4 * H * W, Co, Co);
}
