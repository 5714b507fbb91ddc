/* test_cpu_kernels.c — checks every CPU reference kernel (kernels/cpu/cpu_kernels.h, except
 * the randomness/data section, tested with the RNG) against independent oracles:
 *
 *  1. Forward vs naive direct formulas written here in double (a 7-loop convolution, naive
 *     GroupNorm, naive attention, ...), on random inputs with odd shapes, and on shapes big
 *     enough that the chunked im2col / chunked attention backward run more than one chunk.
 *  2. Every backward vs central finite differences of L = sum(r * y) for a random r, with L
 *     accumulated in double. All input elements are perturbed (shapes are kept small).
 *  3. Optimizer math vs a scalar re-implementation of the formulas in the header.
 *  4. Determinism and overwrite semantics: every kernel runs twice on the same inputs, once
 *     into a NaN-poisoned output and once into an output filled with 7.0; the two results
 *     must be bit-identical (same bits, nothing accumulated into or left from the old
 *     contents) and finite (every element written).
 *  5. Thread-count independence: the GEMM-based kernels give the same bits with OpenBLAS on 1
 *     thread and on 3, on shapes large enough for OpenBLAS to go multi-threaded.
 *
 * Tolerances (normalised error = max |got - want| / max |want|, see sg_test_rel_err). The
 * errors measured on this machine are printed with SG_TEST_VERBOSE=1; each tolerance keeps
 * at least 10x margin over them, while an indexing or formula bug gives errors of order 1:
 *  - fp32 kernel vs double oracle rounded to fp32: TOL_FWD = 2e-5 (measured <= 6e-7). The
 *    GEMMs sum at most a few thousand fp32 products (error ~1e-7 * sqrt(terms) in practice).
 *  - finite differences of an op that is LINEAR in the perturbed input (conv, linear, add_nc,
 *    resampling, GN's beta; mse is quadratic in pred, where central differences are exact
 *    too): the difference quotient is exact for any step, so a large step h = 0.25 is used
 *    and the only error is fp32 rounding of L divided by 2h: TOL_FD_LINEAR = 1e-4 (measured
 *    <= 2e-6).
 *  - finite differences of a nonlinear op (GroupNorm, SiLU, attention): h = 1e-2 balances the
 *    O(h^2) truncation error against fp32 rounding in L / 2h: TOL_FD_NONLINEAR = 5e-3
 *    (measured <= 5e-4). A wrong term in a backward (e.g. a dropped mean term in GroupNorm,
 *    whose groups here hold <= 260 values) is off by several percent or more.
 */
#include "common/philox.h"
#include "kernels/cpu/cpu_kernels.h"
#include "tests/sg_test.h"

#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TOL_FWD 2e-5
#define TOL_FD_LINEAR 1e-4
#define TOL_FD_NONLINEAR 5e-3
#define H_LINEAR 0.25
#define H_NONLINEAR 1e-2

static uint64_t rng = 0x5eed5eedull;
static int verbose; /* SG_TEST_VERBOSE=1 prints every measured error next to its tolerance */

/* ---- helpers ---------------------------------------------------------------------------- */

static float *new_rand(int64_t n, float lo, float hi) {
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    sg_test_fill(p, n, &rng, lo, hi);
    return p;
}

static float *new_fill(int64_t n, float v) {
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++) p[i] = v;
    return p;
}

static float *new_nan(int64_t n) {
    return new_fill(n, NAN);
}

static double *new_zero_d(int64_t n) {
    return calloc((size_t)(n > 0 ? n : 1), sizeof(double));
}

static int all_finite(const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

static double dot_rf(const float *r, const float *y, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)r[i] * y[i];
    return s;
}

/* Normalised error of an fp32 result against a double oracle rounded to fp32. */
static double rel_err_d(const float *got, const double *want, int64_t n) {
    float *w = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) w[i] = (float)want[i];
    double e = sg_test_rel_err(got, w, n);
    free(w);
    return all_finite(got, n) ? e : INFINITY;
}

#define CHECK_CLOSE(what, got, want_d, n, tol)                                                     \
    do {                                                                                           \
        double e_ = rel_err_d(got, want_d, n);                                                     \
        if (verbose) printf("  %-40s err %.3g (tol %.3g)\n", what, e_, (double)(tol));             \
        CHECK(e_ <= (tol), "%s: normalised error %.3g > %.3g", what, e_, (double)(tol));           \
    } while (0)

/* The scalar loss of a finite-difference check: runs the forward on the current inputs. */
typedef double (*loss_fn)(void *ctx);

/* Central differences of L with respect to every element of x (perturbed in place and
 * restored), compared with the analytic gradient. The step actually taken is the difference
 * of the two rounded fp32 inputs, not 2h. */
static void check_fd(const char *what, float *x, int64_t n, const float *grad, loss_fn L, void *ctx,
                     double h, double tol) {
    double maxerr = 0, maxref = 1e-6;
    int finite = all_finite(grad, n);
    for (int64_t i = 0; i < n; i++) {
        float save = x[i];
        float xp = (float)(save + h), xm = (float)(save - h);
        x[i] = xp;
        double lp = L(ctx);
        x[i] = xm;
        double lm = L(ctx);
        x[i] = save;
        double fd = (lp - lm) / ((double)xp - (double)xm);
        double err = fabs(fd - (double)grad[i]);
        if (err > maxerr || err != err) maxerr = err != err ? INFINITY : err;
        if (fabs(fd) > maxref) maxref = fabs(fd);
    }
    double e = finite ? maxerr / maxref : INFINITY;
    if (verbose) printf("  %-40s fd err %.3g (tol %.3g)\n", what, e, tol);
    CHECK(e <= tol, "%s: finite-difference error %.3g > %.3g", what, e, tol);
}

/* Runs `call` twice: into outputs poisoned with NaN, then into outputs filled with 7.0; the
 * results must be finite and bit-identical. out1/out2 are arrays of `nout` output pointers. */
#define CHECK_TWICE(what, outs1, outs2, sizes, nout, call1, call2)                                 \
    do {                                                                                           \
        for (int k_ = 0; k_ < (nout); k_++) {                                                      \
            for (int64_t i_ = 0; i_ < (sizes)[k_]; i_++) {                                         \
                (outs1)[k_][i_] = NAN;                                                             \
                (outs2)[k_][i_] = 7.0f;                                                            \
            }                                                                                      \
        }                                                                                          \
        call1;                                                                                     \
        call2;                                                                                     \
        for (int k_ = 0; k_ < (nout); k_++) {                                                      \
            CHECK(all_finite((outs1)[k_], (sizes)[k_]), "%s: output %d not fully written", what,   \
                  k_);                                                                             \
            CHECK(memcmp((outs1)[k_], (outs2)[k_], (size_t)(sizes)[k_] * sizeof(float)) == 0,      \
                  "%s: output %d differs between two calls (not deterministic or accumulates)",    \
                  what, k_);                                                                       \
        }                                                                                          \
    } while (0)

/* ---- convolution -------------------------------------------------------------------------- */

static int conv_out(int H, int K, int S) {
    return (H + 2 * (K / 2) - K) / S + 1;
}

/* The direct definition: 7 loops, double accumulation, no im2col. */
static void naive_conv_fwd(double *y, const float *x, const float *w, const float *b, int N, int H,
                           int W, int Ci, int Co, int K, int S, int pad) {
    int Ho = conv_out(H, K, S), Wo = conv_out(W, K, S);
    for (int n = 0; n < N; n++)
        for (int ho = 0; ho < Ho; ho++)
            for (int wo = 0; wo < Wo; wo++)
                for (int co = 0; co < Co; co++) {
                    double acc = b ? b[co] : 0.0;
                    for (int kh = 0; kh < K; kh++)
                        for (int kw = 0; kw < K; kw++) {
                            int ih = ho * S - pad + kh, iw = wo * S - pad + kw;
                            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                            for (int ci = 0; ci < Ci; ci++)
                                acc += (double)x[(((int64_t)n * H + ih) * W + iw) * Ci + ci] *
                                       w[((co * K + kh) * K + kw) * Ci + ci];
                        }
                    y[(((int64_t)n * Ho + ho) * Wo + wo) * Co + co] = acc;
                }
}

/* The direct adjoints of the loops above. */
static void naive_conv_bwd(double *dx, double *dw, double *db, const float *dy, const float *x,
                           const float *w, int N, int H, int W, int Ci, int Co, int K, int S,
                           int pad) {
    int Ho = conv_out(H, K, S), Wo = conv_out(W, K, S);
    for (int n = 0; n < N; n++)
        for (int ho = 0; ho < Ho; ho++)
            for (int wo = 0; wo < Wo; wo++)
                for (int co = 0; co < Co; co++) {
                    double g = dy[(((int64_t)n * Ho + ho) * Wo + wo) * Co + co];
                    db[co] += g;
                    for (int kh = 0; kh < K; kh++)
                        for (int kw = 0; kw < K; kw++) {
                            int ih = ho * S - pad + kh, iw = wo * S - pad + kw;
                            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                            for (int ci = 0; ci < Ci; ci++) {
                                int64_t xi = (((int64_t)n * H + ih) * W + iw) * Ci + ci;
                                int wi = ((co * K + kh) * K + kw) * Ci + ci;
                                dx[xi] += g * w[wi];
                                dw[wi] += g * x[xi];
                            }
                        }
                }
}

typedef struct {
    float *y, *x, *w, *b, *r;
    int N, H, W, Ci, Co, K, S, pad;
    int64_t ny;
} conv_ctx;

static double conv_loss(void *p) {
    conv_ctx *c = p;
    cpu_conv2d_fwd(c->y, c->x, c->w, c->b, c->N, c->H, c->W, c->Ci, c->Co, c->K, c->S, c->pad);
    return dot_rf(c->r, c->y, c->ny);
}

/* Forward vs naive (with and without bias), the three gradients vs finite differences and vs
 * the naive adjoint, and determinism. fd = 0 skips the finite differences (big shapes). */
static void test_conv_case(int N, int H, int W, int Ci, int Co, int K, int S, int pad, int fd) {
    char name[128];
    snprintf(name, sizeof name, "conv N%d H%d W%d Ci%d Co%d K%d S%d pad%d", N, H, W, Ci, Co, K, S,
             pad);
    int Ho = conv_out(H, K, S), Wo = conv_out(W, K, S);
    int64_t nx = (int64_t)N * H * W * Ci, ny = (int64_t)N * Ho * Wo * Co,
            nw = (int64_t)Co * K * K * Ci;
    float *x = new_rand(nx, -1, 1), *w = new_rand(nw, -0.5f, 0.5f), *b = new_rand(Co, -1, 1);
    float *r = new_rand(ny, -1, 1), *y = new_nan(ny), *y2 = new_nan(ny);
    double *yref = new_zero_d(ny);

    cpu_conv2d_fwd(y, x, w, b, N, H, W, Ci, Co, K, S, pad);
    naive_conv_fwd(yref, x, w, b, N, H, W, Ci, Co, K, S, pad);
    CHECK_CLOSE(name, y, yref, ny, TOL_FWD);
    cpu_conv2d_fwd(y, x, w, NULL, N, H, W, Ci, Co, K, S, pad);
    naive_conv_fwd(yref, x, w, NULL, N, H, W, Ci, Co, K, S, pad);
    CHECK_CLOSE(name, y, yref, ny, TOL_FWD);

    float *dx = new_nan(nx), *dw = new_nan(nw), *db = new_nan(Co);
    cpu_conv2d_bwd_data(dx, r, w, N, H, W, Ci, Co, K, S, pad);
    cpu_conv2d_bwd_weight(dw, db, r, x, N, H, W, Ci, Co, K, S, pad);
    double *dxr = new_zero_d(nx), *dwr = new_zero_d(nw), *dbr = new_zero_d(Co);
    naive_conv_bwd(dxr, dwr, dbr, r, x, w, N, H, W, Ci, Co, K, S, pad);
    CHECK_CLOSE("conv bwd_data vs naive adjoint", dx, dxr, nx, TOL_FWD);
    CHECK_CLOSE("conv bwd_weight dw vs naive adjoint", dw, dwr, nw, TOL_FWD);
    CHECK_CLOSE("conv bwd_weight db vs naive adjoint", db, dbr, Co, TOL_FWD);
    /* db == NULL must still produce the same dw */
    float *dw2 = new_nan(nw);
    cpu_conv2d_bwd_weight(dw2, NULL, r, x, N, H, W, Ci, Co, K, S, pad);
    CHECK(memcmp(dw, dw2, (size_t)nw * 4) == 0, "%s: dw differs with db NULL", name);

    if (fd) {
        conv_ctx c = {y2, x, w, b, r, N, H, W, Ci, Co, K, S, pad, ny};
        check_fd("conv bwd_data dx", x, nx, dx, conv_loss, &c, H_LINEAR, TOL_FD_LINEAR);
        check_fd("conv bwd_weight dw", w, nw, dw, conv_loss, &c, H_LINEAR, TOL_FD_LINEAR);
        check_fd("conv bwd_weight db", b, Co, db, conv_loss, &c, H_LINEAR, TOL_FD_LINEAR);
    }

    float *y_b = new_nan(ny), *dx_b = new_nan(nx), *dw_b = new_nan(nw), *db_b = new_nan(Co);
    float *f1[1] = {y}, *f2[1] = {y_b}, *d1[1] = {dx}, *d2[1] = {dx_b};
    float *w1[2] = {dw, db}, *w2[2] = {dw_b, db_b};
    int64_t szy[1] = {ny}, szx[1] = {nx}, szw[2] = {nw, Co};
    CHECK_TWICE(name, f1, f2, szy, 1, cpu_conv2d_fwd(y, x, w, b, N, H, W, Ci, Co, K, S, pad),
                cpu_conv2d_fwd(y_b, x, w, b, N, H, W, Ci, Co, K, S, pad));
    CHECK_TWICE(name, d1, d2, szx, 1, cpu_conv2d_bwd_data(dx, r, w, N, H, W, Ci, Co, K, S, pad),
                cpu_conv2d_bwd_data(dx_b, r, w, N, H, W, Ci, Co, K, S, pad));
    CHECK_TWICE(name, w1, w2, szw, 2,
                cpu_conv2d_bwd_weight(dw, db, r, x, N, H, W, Ci, Co, K, S, pad),
                cpu_conv2d_bwd_weight(dw_b, db_b, r, x, N, H, W, Ci, Co, K, S, pad));

    free(x), free(w), free(b), free(r), free(y), free(y2), free(yref), free(dx), free(dw);
    free(db), free(dxr), free(dwr), free(dbr), free(dw2), free(y_b), free(dx_b), free(dw_b);
    free(db_b);
}

static void test_conv(void) {
    /* every (K, S), with odd and even sizes; S = 2 with K = 1 leaves inputs with no gradient */
    int ks[4][2] = {{1, 1}, {1, 2}, {3, 1}, {3, 2}};
    for (int i = 0; i < 4; i++) {
        int K = ks[i][0], S = ks[i][1];
        test_conv_case(2, 5, 7, 3, 4, K, S, K / 2, 1);
        test_conv_case(1, 6, 4, 5, 3, K, S, K / 2, 1);
        test_conv_case(3, 1, 1, 2, 2, K, S, K / 2,
                       1); /* 1x1 image: all taps but the centre padded */
    }
    /* TensorFlow SAME for the stride-2 3x3 conv (DDPM's downsampling): 0 padding at the top/left,
     * 1 at the bottom/right, on even sizes (what the planner allows); a 2x2 image reads its
     * bottom/right padding from every output. */
    test_conv_case(2, 6, 4, 3, 4, 3, 2, 0, 1);
    test_conv_case(1, 8, 8, 5, 3, 3, 2, 0, 1);
    test_conv_case(3, 2, 2, 2, 2, 3, 2, 0, 1);
    /* Big enough for several im2col chunks (K*K*Ci = 576 floats per pixel, 1 Mi-float
     * scratch: 1820 pixels per chunk, 2048 output pixels here). */
    test_conv_case(2, 32, 32, 64, 8, 3, 1, 1, 0);
    test_conv_case(8, 32, 32, 64, 8, 3, 2, 1, 0);
    test_conv_case(8, 32, 32, 64, 8, 3, 2, 0, 0);
    test_conv_case(1, 40, 30, 300, 5, 3, 1, 1, 0); /* 2700 px of 2700 floats: 389 px/chunk */
}

/* ---- nearest upsample + 3x3 conv from the low-res input (upconv2d) --------------------- */

typedef struct {
    float *y, *x, *w, *b, *r;
    int N, H, W, Ci, Co;
    int64_t ny;
} upconv_ctx;

static double upconv_loss(void *p) {
    upconv_ctx *c = p;
    cpu_upconv2d_fwd(c->y, c->x, c->w, c->b, c->N, c->H, c->W, c->Ci, c->Co, 0);
    return dot_rf(c->r, c->y, c->ny);
}

/* The sub-pixel form against what it replaces, cpu_upsample2x_fwd then cpu_conv2d_fwd (3x3,
 * pad 1), and the adjoints likewise (the conv's backward then the upsample's 2x2 sum): the same
 * sums in another order, so within fp32 rounding (TOL_FWD); every gradient against finite
 * differences of the fused forward; the folded weights rounded to bf16 against a fold done
 * here; determinism and overwrite. */
static void test_upconv_case(int N, int H, int W, int Ci, int Co, int fd) {
    char name[128];
    snprintf(name, sizeof name, "upconv N%d H%d W%d Ci%d Co%d", N, H, W, Ci, Co);
    int64_t nx = (int64_t)N * H * W * Ci, nu = (int64_t)N * 4 * H * W * Ci,
            ny = (int64_t)N * 4 * H * W * Co, nw = (int64_t)Co * 9 * Ci;
    float *x = new_rand(nx, -1, 1), *w = new_rand(nw, -0.5f, 0.5f), *b = new_rand(Co, -1, 1);
    float *r = new_rand(ny, -1, 1), *y = new_nan(ny), *y2 = new_nan(ny), *u = new_nan(nu);
    float *yu = new_nan(ny);
    double *yd = new_zero_d(ny);

    /* forward: the unfused pair is the oracle (widened to double for rel_err_d) */
    cpu_upconv2d_fwd(y, x, w, b, N, H, W, Ci, Co, 0);
    cpu_upsample2x_fwd(u, x, N, H, W, Ci);
    cpu_conv2d_fwd(yu, u, w, b, N, 2 * H, 2 * W, Ci, Co, 3, 1, 1);
    for (int64_t i = 0; i < ny; i++) yd[i] = yu[i];
    CHECK_CLOSE(name, y, yd, ny, TOL_FWD);

    /* backward data and weight against the unfused adjoints */
    float *dx = new_nan(nx), *dw = new_nan(nw), *db = new_nan(Co);
    float *du = new_nan(nu), *dxu = new_nan(nx), *dwu = new_nan(nw), *dbu = new_nan(Co);
    cpu_upconv2d_bwd_data(dx, r, w, N, H, W, Ci, Co, 0);
    cpu_upconv2d_bwd_weight(dw, db, r, x, N, H, W, Ci, Co);
    cpu_conv2d_bwd_data(du, r, w, N, 2 * H, 2 * W, Ci, Co, 3, 1, 1);
    cpu_upsample2x_bwd(dxu, du, N, H, W, Ci);
    cpu_conv2d_bwd_weight(dwu, dbu, r, u, N, 2 * H, 2 * W, Ci, Co, 3, 1, 1);
    double *dxd = new_zero_d(nx), *dwd = new_zero_d(nw), *dbd = new_zero_d(Co);
    for (int64_t i = 0; i < nx; i++) dxd[i] = dxu[i];
    for (int64_t i = 0; i < nw; i++) dwd[i] = dwu[i];
    for (int i = 0; i < Co; i++) dbd[i] = dbu[i];
    CHECK_CLOSE("upconv bwd_data vs upsample+conv", dx, dxd, nx, TOL_FWD);
    CHECK_CLOSE("upconv bwd_weight dw vs upsample+conv", dw, dwd, nw, TOL_FWD);
    CHECK(memcmp(db, dbu, (size_t)Co * 4) == 0, "%s: db is not the conv's (same column sum)", name);

    /* the bf16 fold: each folded entry the fp32 sum of its taps, rounded once */
    float *wf = new_nan(16 * (int64_t)Co * Ci);
    cpu_upconv2d_fold(wf, w, Ci, Co, 1);
    int fold_ok = 1;
    for (int py = 0; py < 2; py++)
        for (int px = 0; px < 2; px++)
            for (int co = 0; co < Co; co++)
                for (int a = 0; a < 2; a++)
                    for (int bb = 0; bb < 2; bb++)
                        for (int c = 0; c < Ci; c++) {
                            /* the taps of (a, b): py = 0: a = 0 <- {0}, 1 <- {1, 2};
                             * py = 1: a = 0 <- {0, 1}, 1 <- {2} (listed, not derived) */
                            static const int lo[2][2] = {{0, 1}, {0, 2}},
                                             hi[2][2] = {{0, 2}, {1, 2}};
                            float s = 0.0f;
                            for (int ky = lo[py][a]; ky <= hi[py][a]; ky++)
                                for (int kx = lo[px][bb]; kx <= hi[px][bb]; kx++)
                                    s += w[((int64_t)co * 9 + ky * 3 + kx) * Ci + c];
                            const float want = sg_bf16_to_f32(sg_f32_to_bf16(s));
                            const int64_t k =
                                ((((int64_t)py * 2 + px) * Co + co) * 4 + a * 2 + bb) * Ci + c;
                            if (memcmp(&wf[k], &want, 4)) fold_ok = 0;
                        }
    CHECK(fold_ok, "%s: the bf16 folded weights are not round(sum of their taps)", name);
    /* the forward with bf16 folds is the fp32 form on the rounded folds: compare with the
     * fold's own rounding visible (normwise: bf16 weights move y by ~2^-9 relative) */
    float *ybf = new_nan(ny);
    cpu_upconv2d_fwd(ybf, x, w, b, N, H, W, Ci, Co, 1);
    double e_bf = sg_test_rel_err(ybf, y, ny);
    CHECK(all_finite(ybf, ny) && e_bf > 0 && e_bf < 2e-2,
          "%s: bf16-folded forward differs by %.3g (want > 0, < 2e-2)", name, e_bf);

    if (fd) {
        upconv_ctx c = {y2, x, w, b, r, N, H, W, Ci, Co, ny};
        check_fd("upconv bwd_data dx", x, nx, dx, upconv_loss, &c, H_LINEAR, TOL_FD_LINEAR);
        check_fd("upconv bwd_weight dw", w, nw, dw, upconv_loss, &c, H_LINEAR, TOL_FD_LINEAR);
        check_fd("upconv bwd_weight db", b, Co, db, upconv_loss, &c, H_LINEAR, TOL_FD_LINEAR);
    }

    float *y_b = new_nan(ny), *dx_b = new_nan(nx), *dw_b = new_nan(nw), *db_b = new_nan(Co);
    float *f1[1] = {y}, *f2[1] = {y_b}, *d1[1] = {dx}, *d2[1] = {dx_b};
    float *w1[2] = {dw, db}, *w2[2] = {dw_b, db_b};
    int64_t szy[1] = {ny}, szx[1] = {nx}, szw[2] = {nw, Co};
    CHECK_TWICE(name, f1, f2, szy, 1, cpu_upconv2d_fwd(y, x, w, b, N, H, W, Ci, Co, 1),
                cpu_upconv2d_fwd(y_b, x, w, b, N, H, W, Ci, Co, 1));
    CHECK_TWICE(name, d1, d2, szx, 1, cpu_upconv2d_bwd_data(dx, r, w, N, H, W, Ci, Co, 1),
                cpu_upconv2d_bwd_data(dx_b, r, w, N, H, W, Ci, Co, 1));
    CHECK_TWICE(name, w1, w2, szw, 2, cpu_upconv2d_bwd_weight(dw, db, r, x, N, H, W, Ci, Co),
                cpu_upconv2d_bwd_weight(dw_b, db_b, r, x, N, H, W, Ci, Co));

    free(x), free(w), free(b), free(r), free(y), free(y2), free(u), free(yu), free(yd), free(dx);
    free(dw), free(db), free(du), free(dxu), free(dwu), free(dbu), free(dxd), free(dwd);
    free(dbd), free(wf), free(ybf), free(y_b), free(dx_b), free(dw_b), free(db_b);
}

static void test_upconv(void) {
    test_upconv_case(2, 3, 4, 3, 5, 1);
    test_upconv_case(1, 1, 1, 2, 3, 1); /* one low-res pixel: every class reads padding */
    test_upconv_case(1, 2, 5, 4, 2, 1);
    test_upconv_case(2, 8, 8, 64, 32, 0); /* unet_cifar's 8 -> 16 shape, fewer channels */
}

/* ---- linear ------------------------------------------------------------------------------- */

typedef struct {
    float *y, *x, *w, *b, *r;
    int N, K, M;
} linear_ctx;

static double linear_loss(void *p) {
    linear_ctx *c = p;
    cpu_linear_fwd(c->y, c->x, c->w, c->b, c->N, c->K, c->M);
    return dot_rf(c->r, c->y, (int64_t)c->N * c->M);
}

static void test_linear(int N, int K, int M) {
    float *x = new_rand((int64_t)N * K, -1, 1), *w = new_rand((int64_t)M * K, -1, 1);
    float *b = new_rand(M, -1, 1), *r = new_rand((int64_t)N * M, -1, 1);
    float *y = new_nan((int64_t)N * M), *y2 = new_nan((int64_t)N * M);
    double *yref = new_zero_d((int64_t)N * M);
    for (int pass = 0; pass < 2; pass++) {
        const float *bb = pass ? NULL : b;
        cpu_linear_fwd(y, x, w, bb, N, K, M);
        for (int n = 0; n < N; n++)
            for (int m = 0; m < M; m++) {
                double acc = bb ? bb[m] : 0.0;
                for (int k = 0; k < K; k++) acc += (double)x[n * K + k] * w[m * K + k];
                yref[n * M + m] = acc;
            }
        CHECK_CLOSE("linear fwd vs naive", y, yref, (int64_t)N * M, TOL_FWD);
    }
    float *dx = new_nan((int64_t)N * K), *dw = new_nan((int64_t)M * K), *db = new_nan(M);
    cpu_linear_bwd_data(dx, r, w, N, K, M);
    cpu_linear_bwd_weight(dw, db, r, x, N, K, M);
    linear_ctx c = {y2, x, w, b, r, N, K, M};
    check_fd("linear dx", x, (int64_t)N * K, dx, linear_loss, &c, H_LINEAR, TOL_FD_LINEAR);
    check_fd("linear dw", w, (int64_t)M * K, dw, linear_loss, &c, H_LINEAR, TOL_FD_LINEAR);
    check_fd("linear db", b, M, db, linear_loss, &c, H_LINEAR, TOL_FD_LINEAR);
    float *dw2 = new_nan((int64_t)M * K);
    cpu_linear_bwd_weight(dw2, NULL, r, x, N, K, M);
    CHECK(memcmp(dw, dw2, (size_t)M * K * 4) == 0, "linear: dw differs with db NULL");

    float *o1[3] = {y, dx, dw}, *o2[3] = {y2, new_nan((int64_t)N * K), dw2};
    int64_t sz[3] = {(int64_t)N * M, (int64_t)N * K, (int64_t)M * K};
    CHECK_TWICE("linear fwd", o1, o2, sz, 1, cpu_linear_fwd(o1[0], x, w, b, N, K, M),
                cpu_linear_fwd(o2[0], x, w, b, N, K, M));
    CHECK_TWICE("linear bwd_data", o1 + 1, o2 + 1, sz + 1, 1,
                cpu_linear_bwd_data(o1[1], r, w, N, K, M),
                cpu_linear_bwd_data(o2[1], r, w, N, K, M));
    float *db2 = new_nan(M);
    float *p1[2] = {dw, db}, *p2[2] = {dw2, db2};
    int64_t szw[2] = {(int64_t)M * K, M};
    CHECK_TWICE("linear bwd_weight", p1, p2, szw, 2, cpu_linear_bwd_weight(dw, db, r, x, N, K, M),
                cpu_linear_bwd_weight(dw2, db2, r, x, N, K, M));
    free(x), free(w), free(b), free(r), free(y), free(y2), free(yref), free(dx), free(dw);
    free(db), free(dw2), free(o2[1]), free(db2);
}

/* ---- group norm --------------------------------------------------------------------------- */

typedef struct {
    float *y, *mean, *rstd, *x, *gamma, *beta, *r;
    int N, HW, C, G;
    float eps;
} gn_ctx;

static double gn_loss(void *p) {
    gn_ctx *c = p;
    cpu_group_norm_fwd(c->y, c->mean, c->rstd, c->x, c->gamma, c->beta, c->N, c->HW, c->C, c->G,
                       c->eps);
    return dot_rf(c->r, c->y, (int64_t)c->N * c->HW * c->C);
}

static void test_group_norm(int N, int HW, int C, int G, float eps, int fd) {
    char name[96];
    snprintf(name, sizeof name, "group_norm N%d HW%d C%d G%d", N, HW, C, G);
    int64_t n = (int64_t)N * HW * C;
    /* an offset and spread so the mean subtraction matters */
    float *x = new_rand(n, -0.5f, 2.5f), *gamma = new_rand(C, 0.5f, 1.5f);
    float *beta = new_rand(C, -1, 1), *r = new_rand(n, -1, 1);
    float *y = new_nan(n), *mean = new_nan((int64_t)N * G), *rstd = new_nan((int64_t)N * G);
    cpu_group_norm_fwd(y, mean, rstd, x, gamma, beta, N, HW, C, G, eps);

    /* naive: per (n, g), straight loops over (hw, channel) in double */
    int cg = C / G;
    double *yref = new_zero_d(n), *mref = new_zero_d((int64_t)N * G),
           *rref = new_zero_d((int64_t)N * G);
    for (int s = 0; s < N; s++)
        for (int g = 0; g < G; g++) {
            double sum = 0, sq = 0;
            for (int hw = 0; hw < HW; hw++)
                for (int c = g * cg; c < (g + 1) * cg; c++)
                    sum += x[((int64_t)s * HW + hw) * C + c];
            double mu = sum / ((double)HW * cg);
            for (int hw = 0; hw < HW; hw++)
                for (int c = g * cg; c < (g + 1) * cg; c++) {
                    double d = x[((int64_t)s * HW + hw) * C + c] - mu;
                    sq += d * d;
                }
            double rs = 1.0 / sqrt(sq / ((double)HW * cg) + eps);
            mref[s * G + g] = mu;
            rref[s * G + g] = rs;
            for (int hw = 0; hw < HW; hw++)
                for (int c = g * cg; c < (g + 1) * cg; c++) {
                    int64_t i = ((int64_t)s * HW + hw) * C + c;
                    yref[i] = (x[i] - mu) * rs * gamma[c] + beta[c];
                }
        }
    CHECK_CLOSE(name, y, yref, n, TOL_FWD);
    CHECK_CLOSE("group_norm saved mean", mean, mref, (int64_t)N * G, TOL_FWD);
    CHECK_CLOSE("group_norm saved rstd", rstd, rref, (int64_t)N * G, TOL_FWD);

    float *dx = new_nan(n), *dg = new_nan(C), *dbt = new_nan(C);
    cpu_group_norm_bwd(dx, dg, dbt, r, x, mean, rstd, gamma, N, HW, C, G);

    /* naive backward in double from the naive statistics: the textbook formula group by
     * group, and dgamma/dbeta channel by channel (an oracle for the big shapes, where finite
     * differences would be slow) */
    double *dxr = new_zero_d(n), *dgr = new_zero_d(C), *dbr = new_zero_d(C);
    for (int s = 0; s < N; s++)
        for (int g = 0; g < G; g++) {
            double mu = mref[s * G + g], rs = rref[s * G + g], m1 = 0, m2 = 0,
                   cnt = (double)HW * cg;
            for (int hw = 0; hw < HW; hw++)
                for (int c = g * cg; c < (g + 1) * cg; c++) {
                    int64_t i = ((int64_t)s * HW + hw) * C + c;
                    double xh = (x[i] - mu) * rs;
                    m1 += r[i] * gamma[c] / cnt;
                    m2 += r[i] * gamma[c] * xh / cnt;
                    dgr[c] += r[i] * xh;
                    dbr[c] += r[i];
                }
            for (int hw = 0; hw < HW; hw++)
                for (int c = g * cg; c < (g + 1) * cg; c++) {
                    int64_t i = ((int64_t)s * HW + hw) * C + c;
                    dxr[i] = rs * (r[i] * gamma[c] - m1 - (x[i] - mu) * rs * m2);
                }
        }
    CHECK_CLOSE("group_norm bwd dx vs naive", dx, dxr, n, TOL_FWD);
    CHECK_CLOSE("group_norm bwd dgamma vs naive", dg, dgr, C, TOL_FWD);
    CHECK_CLOSE("group_norm bwd dbeta vs naive", dbt, dbr, C, TOL_FWD);
    free(dxr), free(dgr), free(dbr);
    if (fd) {
        float *y2 = new_nan(n), *m2 = new_nan((int64_t)N * G), *r2 = new_nan((int64_t)N * G);
        gn_ctx c = {y2, m2, r2, x, gamma, beta, r, N, HW, C, G, eps};
        check_fd("group_norm dx", x, n, dx, gn_loss, &c, H_NONLINEAR, TOL_FD_NONLINEAR);
        check_fd("group_norm dgamma", gamma, C, dg, gn_loss, &c, H_NONLINEAR, TOL_FD_NONLINEAR);
        check_fd("group_norm dbeta", beta, C, dbt, gn_loss, &c, H_LINEAR, TOL_FD_LINEAR);
        free(y2), free(m2), free(r2);
    }

    float *o1[3] = {y, mean, rstd},
          *o2[3] = {new_nan(n), new_nan((int64_t)N * G), new_nan((int64_t)N * G)};
    int64_t sz[3] = {n, (int64_t)N * G, (int64_t)N * G};
    CHECK_TWICE(name, o1, o2, sz, 3,
                cpu_group_norm_fwd(o1[0], o1[1], o1[2], x, gamma, beta, N, HW, C, G, eps),
                cpu_group_norm_fwd(o2[0], o2[1], o2[2], x, gamma, beta, N, HW, C, G, eps));
    float *b1[3] = {dx, dg, dbt}, *b2[3] = {new_nan(n), new_nan(C), new_nan(C)};
    int64_t szb[3] = {n, C, C};
    CHECK_TWICE(name, b1, b2, szb, 3,
                cpu_group_norm_bwd(b1[0], b1[1], b1[2], r, x, mean, rstd, gamma, N, HW, C, G),
                cpu_group_norm_bwd(b2[0], b2[1], b2[2], r, x, mean, rstd, gamma, N, HW, C, G));
    free(x), free(gamma), free(beta), free(r), free(y), free(mean), free(rstd), free(yref);
    free(mref), free(rref), free(dx), free(dg), free(dbt);
    for (int i = 0; i < 3; i++) free(o2[i]), free(b2[i]);
}

static void test_group_norms(void) {
    test_group_norm(2, 5, 12, 3, 1e-6f, 1);    /* 4 channels per group, odd HW */
    test_group_norm(3, 3, 6, 6, 1e-5f, 1);     /* one channel per group */
    test_group_norm(1, 7, 5, 1, 1e-6f, 1);     /* one group (LayerNorm-like) */
    test_group_norm(2, 4, 130, 2, 1e-6f, 1);   /* 65 channels per group: > one channel block */
    test_group_norm(2, 64, 256, 32, 1e-6f, 0); /* UNet-like: 32 groups, several group blocks */
}

/* ---- norm_act ----------------------------------------------------------------------------- */

typedef struct {
    float *y, *mean, *rstd, *x, *v, *gamma, *beta, *r;
    int N, HW, C, G;
    cpu_norm_tail t;
} na_ctx;

static double na_loss(void *p) {
    na_ctx *c = p;
    cpu_norm_act_fwd(c->y, c->mean, c->rstd, c->x, c->v, c->gamma, c->beta, c->N, c->HW, c->C, c->G,
                     1e-6f, &c->t);
    return dot_rf(c->r, c->y, (int64_t)c->N * c->HW * c->C);
}

/* norm_act: the forward against the formula of norm.c in double (statistics of x + v, the
 * affine transform, the activation, the dropout's mask drawn from Philox here), the second pass
 * alone (the recomputation) bit for bit the forward's, the unfused chain add_nc -> group_norm ->
 * silu -> dropout (and its backward dropout -> silu -> group_norm -> add_nc) bit for bit in
 * fp32, every gradient (dx, dv, dgamma, dbeta) against central differences, and two calls into
 * poisoned outputs. */
static void test_norm_act(int N, int HW, int C, int G, int act, int temb, float p, int fd) {
    char name[128];
    snprintf(name, sizeof name, "norm_act N%d HW%d C%d G%d act%d temb%d p%g", N, HW, C, G, act,
             temb, (double)p);
    const int64_t n = (int64_t)N * HW * C, ng = (int64_t)N * G;
    const int cg = C / G;
    float *x = new_rand(n, -0.5f, 2.5f), *v = temb ? new_rand((int64_t)N * C, -1, 1) : NULL;
    float *gamma = new_rand(C, 0.5f, 1.5f), *beta = new_rand(C, -1, 1), *r = new_rand(n, -1, 1);
    float *y = new_nan(n), *mean = new_nan(ng), *rstd = new_nan(ng);
    cpu_norm_tail t = {.act = act, .p = p, .purpose = 0x10003u, .seed = 77, .step = 5, .i0 = 11};
    cpu_norm_act_fwd(y, mean, rstd, x, v, gamma, beta, N, HW, C, G, 1e-6f, &t);

    /* the formula in double */
    double *yref = new_zero_d(n), *mref = new_zero_d(ng), *rref = new_zero_d(ng);
    const double scale = p > 0 ? 1.0 / (1.0 - p) : 1.0;
    for (int s = 0; s < N; s++)
        for (int g = 0; g < G; g++) {
            double sum = 0, sq = 0;
            for (int hw = 0; hw < HW; hw++)
                for (int c = g * cg; c < (g + 1) * cg; c++)
                    sum += (double)x[((int64_t)s * HW + hw) * C + c] + (v ? v[s * C + c] : 0.0);
            double mu = sum / ((double)HW * cg);
            for (int hw = 0; hw < HW; hw++)
                for (int c = g * cg; c < (g + 1) * cg; c++) {
                    double d =
                        (double)x[((int64_t)s * HW + hw) * C + c] + (v ? v[s * C + c] : 0.0) - mu;
                    sq += d * d;
                }
            double rs = 1.0 / sqrt(sq / ((double)HW * cg) + 1e-6);
            mref[s * G + g] = mu, rref[s * G + g] = rs;
            for (int hw = 0; hw < HW; hw++)
                for (int c = g * cg; c < (g + 1) * cg; c++) {
                    int64_t i = ((int64_t)s * HW + hw) * C + c;
                    double z =
                        ((double)x[i] + (v ? v[s * C + c] : 0.0) - mu) * rs * gamma[c] + beta[c];
                    double a = act == SG_ACT_SILU ? z / (1.0 + exp(-z)) : z;
                    if (p > 0)
                        a = sg_rng_dropout(t.seed, t.step, t.purpose, t.i0 + (uint64_t)i) >= p
                                ? a * scale
                                : 0.0;
                    yref[i] = a;
                }
        }
    CHECK_CLOSE(name, y, yref, n, TOL_FWD);
    CHECK_CLOSE("norm_act saved mean", mean, mref, ng, TOL_FWD);
    CHECK_CLOSE("norm_act saved rstd", rstd, rref, ng, TOL_FWD);

    /* the recomputation: the second pass alone on the saved statistics, the same bits */
    float *y2 = new_nan(n);
    cpu_norm_act_apply(y2, x, v, mean, rstd, gamma, beta, N, HW, C, G, &t);
    CHECK(memcmp(y2, y, (size_t)n * 4) == 0, "%s: apply (the recomputation) differs from fwd",
          name);

    /* the unfused chain in fp32: the same bits, forward and backward */
    float *u = new_nan(n), *ch = new_nan(n), *cm = new_nan(ng), *cr = new_nan(ng);
    if (v)
        cpu_add_nc_fwd(u, x, v, N, HW, C);
    else
        memcpy(u, x, (size_t)n * 4);
    cpu_group_norm_fwd(ch, cm, cr, u, gamma, beta, N, HW, C, G, 1e-6f);
    float *zsave = new_nan(n);
    memcpy(zsave, ch, (size_t)n * 4);
    if (act == SG_ACT_SILU) cpu_silu_fwd(ch, ch, n);
    float *asave = new_nan(n);
    memcpy(asave, ch, (size_t)n * 4);
    if (p > 0) cpu_dropout_fwd(ch, ch, n, p, t.seed, t.step, t.purpose, t.i0);
    CHECK(memcmp(ch, y, (size_t)n * 4) == 0 && memcmp(cm, mean, (size_t)ng * 4) == 0 &&
              memcmp(cr, rstd, (size_t)ng * 4) == 0,
          "%s: fwd differs from the unfused chain's bits", name);

    float *dx = new_nan(n), *dv = temb ? new_nan((int64_t)N * C) : NULL, *dg = new_nan(C),
          *db = new_nan(C);
    cpu_norm_act_bwd(dx, dv, dg, db, r, x, v, mean, rstd, gamma, beta, N, HW, C, G, &t);
    {
        float *d = new_nan(n), *cdx = new_nan(n), *cdg = new_nan(C), *cdb = new_nan(C);
        memcpy(d, r, (size_t)n * 4);
        if (p > 0) cpu_dropout_bwd(d, d, n, p, t.seed, t.step, t.purpose, t.i0);
        if (act == SG_ACT_SILU) cpu_silu_bwd(d, d, zsave, n);
        cpu_group_norm_bwd(cdx, cdg, cdb, d, u, cm, cr, gamma, N, HW, C, G);
        int same = !memcmp(cdx, dx, (size_t)n * 4) && !memcmp(cdg, dg, (size_t)C * 4) &&
                   !memcmp(cdb, db, (size_t)C * 4);
        if (v) {
            float *cdv = new_nan((int64_t)N * C);
            cpu_add_nc_bwd(cdv, cdx, N, HW, C);
            same &= !memcmp(cdv, dv, (size_t)N * C * 4);
            free(cdv);
        }
        CHECK(same, "%s: bwd differs from the unfused chain's bits", name);
        free(d), free(cdx), free(cdg), free(cdb);
    }
    if (fd) {
        float *y3 = new_nan(n), *m3 = new_nan(ng), *r3 = new_nan(ng);
        na_ctx c = {y3, m3, r3, x, v, gamma, beta, r, N, HW, C, G, t};
        char w[160];
        snprintf(w, sizeof w, "%s dx", name);
        check_fd(w, x, n, dx, na_loss, &c, H_NONLINEAR, TOL_FD_NONLINEAR);
        if (v) {
            snprintf(w, sizeof w, "%s dv", name);
            check_fd(w, v, (int64_t)N * C, dv, na_loss, &c, H_NONLINEAR, TOL_FD_NONLINEAR);
        }
        snprintf(w, sizeof w, "%s dgamma", name);
        check_fd(w, gamma, C, dg, na_loss, &c, H_NONLINEAR, TOL_FD_NONLINEAR);
        snprintf(w, sizeof w, "%s dbeta", name);
        check_fd(w, beta, C, db, na_loss, &c, act == SG_ACT_NONE ? H_LINEAR : H_NONLINEAR,
                 act == SG_ACT_NONE ? TOL_FD_LINEAR : TOL_FD_NONLINEAR);
        free(y3), free(m3), free(r3);
    }

    float *o1[3] = {y, mean, rstd}, *o2[3] = {new_nan(n), new_nan(ng), new_nan(ng)};
    int64_t sz[3] = {n, ng, ng};
    CHECK_TWICE(name, o1, o2, sz, 3,
                cpu_norm_act_fwd(o1[0], o1[1], o1[2], x, v, gamma, beta, N, HW, C, G, 1e-6f, &t),
                cpu_norm_act_fwd(o2[0], o2[1], o2[2], x, v, gamma, beta, N, HW, C, G, 1e-6f, &t));
    float *b1[4] = {dx, dg, db, dv},
          *b2[4] = {new_nan(n), new_nan(C), new_nan(C), new_nan((int64_t)N * C)};
    int64_t szb[4] = {n, C, C, (int64_t)N * C};
    CHECK_TWICE(name, b1, b2, szb, temb ? 4 : 3,
                cpu_norm_act_bwd(b1[0], b1[3], b1[1], b1[2], r, x, v, mean, rstd, gamma, beta, N,
                                 HW, C, G, &t),
                cpu_norm_act_bwd(b2[0], temb ? b2[3] : NULL, b2[1], b2[2], r, x, v, mean, rstd,
                                 gamma, beta, N, HW, C, G, &t));
    free(x), free(v), free(gamma), free(beta), free(r), free(y), free(mean), free(rstd);
    free(yref), free(mref), free(rref), free(y2), free(u), free(ch), free(cm), free(cr);
    free(zsave), free(asave), free(dx), free(dv), free(dg), free(db);
    for (int i = 0; i < 3; i++) free(o2[i]);
    for (int i = 0; i < 4; i++) free(b2[i]);
}

static void test_norm_acts(void) {
    test_norm_act(2, 5, 12, 3, SG_ACT_SILU, 0, 0.0f, 1);    /* norm1 + silu1 */
    test_norm_act(2, 5, 12, 3, SG_ACT_SILU, 1, 0.3f, 1);    /* temb + norm2 + silu2 + dropout */
    test_norm_act(3, 3, 6, 6, SG_ACT_NONE, 0, 0.0f, 1);     /* the attention's GroupNorm */
    test_norm_act(1, 7, 8, 2, SG_ACT_SILU, 1, 0.0f, 1);     /* temb without dropout */
    test_norm_act(2, 4, 130, 2, SG_ACT_SILU, 1, 0.1f, 0);   /* 65 channels per group */
    test_norm_act(2, 64, 256, 32, SG_ACT_SILU, 1, 0.1f, 0); /* UNet-like */
}

/* ---- elementwise -------------------------------------------------------------------------- */

typedef struct {
    float *y, *x, *r, *v;
    int64_t n;
    int N, HW, C, H, W; /* add_nc: N, HW, C; resample: N, H, W, C */
} ew_ctx;

static double silu_loss(void *p) {
    ew_ctx *c = p;
    cpu_silu_fwd(c->y, c->x, c->n);
    return dot_rf(c->r, c->y, c->n);
}

static double silu_mul_loss(void *p) {
    ew_ctx *c = p;
    cpu_silu_mul_fwd(c->y, c->x, c->v, c->n);
    return dot_rf(c->r, c->y, c->n);
}

/* silu_mul: y = silu(a) * b against the formula in double, both gradients against finite
 * differences (nonlinear in a, linear in b), the allowed aliasing, determinism */
static void test_silu_mul(void) {
    int64_t n = 157;
    float *a = new_rand(n, -6, 6), *b = new_rand(n, -2, 2), *r = new_rand(n, -1, 1);
    float *y = new_nan(n), *y2 = new_nan(n), *da = new_nan(n), *db = new_nan(n);
    double *ref = new_zero_d(n);
    cpu_silu_mul_fwd(y, a, b, n);
    for (int64_t i = 0; i < n; i++) ref[i] = a[i] / (1.0 + exp(-(double)a[i])) * b[i];
    CHECK_CLOSE("silu_mul fwd", y, ref, n, TOL_FWD);

    cpu_silu_mul_bwd(da, db, r, a, b, n);
    ew_ctx c = {y2, a, r, b, n, 0, 0, 0, 0, 0};
    check_fd("silu_mul da", a, n, da, silu_mul_loss, &c, H_NONLINEAR, TOL_FD_NONLINEAR);
    check_fd("silu_mul db", b, n, db, silu_mul_loss, &c, H_LINEAR, TOL_FD_LINEAR);

    /* da may alias dy, and so may db; y may alias a */
    float *al = malloc((size_t)n * 4), *other = new_nan(n);
    memcpy(al, r, (size_t)n * 4);
    cpu_silu_mul_bwd(al, other, al, a, b, n);
    CHECK(memcmp(al, da, (size_t)n * 4) == 0 && memcmp(other, db, (size_t)n * 4) == 0,
          "silu_mul bwd with da == dy differs");
    memcpy(al, r, (size_t)n * 4);
    cpu_silu_mul_bwd(other, al, al, a, b, n);
    CHECK(memcmp(al, db, (size_t)n * 4) == 0 && memcmp(other, da, (size_t)n * 4) == 0,
          "silu_mul bwd with db == dy differs");
    memcpy(al, a, (size_t)n * 4);
    cpu_silu_mul_fwd(al, al, b, n);
    CHECK(memcmp(al, y, (size_t)n * 4) == 0, "silu_mul fwd with y == a differs");

    float *o1[2] = {y, da}, *o2[2] = {y2, db};
    int64_t sz[2] = {n, n};
    CHECK_TWICE("silu_mul fwd", o1, o2, sz, 1, cpu_silu_mul_fwd(o1[0], a, b, n),
                cpu_silu_mul_fwd(o2[0], a, b, n));
    float *g1[2] = {y, da}, *g2[2] = {y2, db};
    CHECK_TWICE("silu_mul bwd", g1, g2, sz, 2, cpu_silu_mul_bwd(g1[0], g1[1], r, a, b, n),
                cpu_silu_mul_bwd(g2[0], g2[1], r, a, b, n));
    free(a), free(b), free(r), free(y), free(y2), free(da), free(db), free(ref), free(al);
    free(other);
}

static double gelu_loss(void *p) {
    ew_ctx *c = p;
    cpu_gelu_fwd(c->y, c->x, c->n);
    return dot_rf(c->r, c->y, c->n);
}

/* gelu: y = x Phi(x) against the formula in double (erf, exp), finite at the extremes with the
 * right limits, dx against finite differences, the allowed aliasing, determinism */
static void test_gelu(void) {
    int64_t n = 181;
    float *x = new_rand(n, -6, 6), *r = new_rand(n, -1, 1);
    float *y = new_nan(n), *y2 = new_nan(n), *dx = new_nan(n);
    double *ref = new_zero_d(n);
    cpu_gelu_fwd(y, x, n);
    for (int64_t i = 0; i < n; i++) ref[i] = 0.5 * x[i] * (1.0 + erf(x[i] / sqrt(2.0)));
    CHECK_CLOSE("gelu fwd", y, ref, n, TOL_FWD);
    /* the derivative's formula too, so a wrong backward shows without the difference quotient */
    cpu_gelu_bwd(dx, r, x, n);
    for (int64_t i = 0; i < n; i++) {
        double v = x[i];
        ref[i] = r[i] * (0.5 * (1.0 + erf(v / sqrt(2.0))) +
                         v * exp(-0.5 * v * v) / sqrt(2.0 * acos(-1.0)));
    }
    CHECK_CLOSE("gelu bwd", dx, ref, n, TOL_FWD);
    ew_ctx c = {y2, x, r, NULL, n, 0, 0, 0, 0, 0};
    check_fd("gelu dx", x, n, dx, gelu_loss, &c, H_NONLINEAR, TOL_FD_NONLINEAR);
    float ext[4] = {-200.0f, -90.0f, 90.0f, 200.0f}, ey[4], edx[4], one[4] = {1, 1, 1, 1};
    cpu_gelu_fwd(ey, ext, 4);
    cpu_gelu_bwd(edx, one, ext, 4);
    CHECK(all_finite(ey, 4) && all_finite(edx, 4) && ey[0] == 0.0f && ey[3] == 200.0f &&
              edx[0] == 0.0f && edx[3] == 1.0f,
          "gelu at extremes: y %g %g dx %g %g", ey[0], ey[3], edx[0], edx[3]);

    /* dx may alias dy, y may alias x */
    float *al = malloc((size_t)n * 4);
    memcpy(al, r, (size_t)n * 4);
    cpu_gelu_bwd(al, al, x, n);
    CHECK(memcmp(al, dx, (size_t)n * 4) == 0, "gelu bwd with dx == dy differs");
    memcpy(al, x, (size_t)n * 4);
    cpu_gelu_fwd(al, al, n);
    CHECK(memcmp(al, y, (size_t)n * 4) == 0, "gelu fwd with y == x differs");

    float *o1[1] = {y}, *o2[1] = {y2};
    int64_t sz[1] = {n};
    CHECK_TWICE("gelu fwd", o1, o2, sz, 1, cpu_gelu_fwd(o1[0], x, n), cpu_gelu_fwd(o2[0], x, n));
    CHECK_TWICE("gelu bwd", o1, o2, sz, 1, cpu_gelu_bwd(o1[0], r, x, n),
                cpu_gelu_bwd(o2[0], r, x, n));
    free(x), free(r), free(y), free(y2), free(dx), free(ref), free(al);
}

static double add_nc_loss(void *p) {
    ew_ctx *c = p;
    cpu_add_nc_fwd(c->y, c->x, c->v, c->N, c->HW, c->C);
    return dot_rf(c->r, c->y, (int64_t)c->N * c->HW * c->C);
}

static void test_elementwise(void) {
    int64_t n = 203;
    float *x = new_rand(n, -6, 6), *a = new_rand(n, -1, 1), *r = new_rand(n, -1, 1);
    float *y = new_nan(n), *y2 = new_nan(n);
    double *ref = new_zero_d(n);

    /* silu forward vs formula; extreme inputs must stay finite with the right limits */
    cpu_silu_fwd(y, x, n);
    for (int64_t i = 0; i < n; i++) ref[i] = x[i] / (1.0 + exp(-(double)x[i]));
    CHECK_CLOSE("silu fwd", y, ref, n, TOL_FWD);
    float ext[4] = {-200.0f, -90.0f, 90.0f, 200.0f}, ey[4], edx[4], one[4] = {1, 1, 1, 1};
    cpu_silu_fwd(ey, ext, 4);
    cpu_silu_bwd(edx, one, ext, 4);
    CHECK(all_finite(ey, 4) && all_finite(edx, 4) && ey[0] == 0.0f && ey[3] == 200.0f &&
              edx[0] == 0.0f && edx[3] == 1.0f,
          "silu at extremes: y %g %g dx %g %g", ey[0], ey[3], edx[0], edx[3]);

    float *dx = new_nan(n);
    cpu_silu_bwd(dx, r, x, n);
    ew_ctx c = {y2, x, r, NULL, n, 0, 0, 0, 0, 0};
    check_fd("silu dx", x, n, dx, silu_loss, &c, H_NONLINEAR, TOL_FD_NONLINEAR);
    /* dx may alias dy */
    float *al = malloc((size_t)n * 4);
    memcpy(al, r, (size_t)n * 4);
    cpu_silu_bwd(al, al, x, n);
    CHECK(memcmp(al, dx, (size_t)n * 4) == 0, "silu bwd with dx == dy differs");
    /* y may alias x */
    memcpy(al, x, (size_t)n * 4);
    cpu_silu_fwd(al, al, n);
    cpu_silu_fwd(y, x, n);
    CHECK(memcmp(al, y, (size_t)n * 4) == 0, "silu fwd with y == x differs");

    /* add, copy, scale: exact in fp32 (one rounding each), so compare bits with the formula */
    int ok = 1;
    cpu_add_fwd(y, x, a, n);
    for (int64_t i = 0; i < n; i++) ok &= y[i] == x[i] + a[i];
    CHECK(ok, "add fwd differs from x + a");
    memcpy(al, x, (size_t)n * 4);
    cpu_add_fwd(al, al, a, n);
    CHECK(memcmp(al, y, (size_t)n * 4) == 0, "add fwd with y == a differs");
    cpu_copy(y, x, n);
    CHECK(memcmp(y, x, (size_t)n * 4) == 0, "copy");
    cpu_copy(y, y, n);
    CHECK(memcmp(y, x, (size_t)n * 4) == 0, "copy in place");
    ok = 1;
    cpu_scale(y, x, -0.37f, n);
    for (int64_t i = 0; i < n; i++) ok &= y[i] == x[i] * -0.37f;
    CHECK(ok, "scale differs from x * s");
    memcpy(al, x, (size_t)n * 4);
    cpu_scale(al, al, -0.37f, n);
    CHECK(memcmp(al, y, (size_t)n * 4) == 0, "scale in place differs");

    float *o1[1] = {y}, *o2[1] = {y2};
    int64_t sz[1] = {n};
    CHECK_TWICE("silu fwd", o1, o2, sz, 1, cpu_silu_fwd(o1[0], x, n), cpu_silu_fwd(o2[0], x, n));
    CHECK_TWICE("silu bwd", o1, o2, sz, 1, cpu_silu_bwd(o1[0], r, x, n),
                cpu_silu_bwd(o2[0], r, x, n));
    CHECK_TWICE("add", o1, o2, sz, 1, cpu_add_fwd(o1[0], x, a, n), cpu_add_fwd(o2[0], x, a, n));
    CHECK_TWICE("copy", o1, o2, sz, 1, cpu_copy(o1[0], x, n), cpu_copy(o2[0], x, n));
    CHECK_TWICE("scale", o1, o2, sz, 1, cpu_scale(o1[0], x, 3.0f, n), cpu_scale(o2[0], x, 3.0f, n));

    /* add_nc: forward vs formula, dv vs finite differences (dx is the identity) */
    int N = 3, HW = 7, C = 5;
    int64_t m = (int64_t)N * HW * C;
    float *xx = new_rand(m, -1, 1), *v = new_rand((int64_t)N * C, -1, 1), *rr = new_rand(m, -1, 1);
    float *yy = new_nan(m), *yy2 = new_nan(m), *dv = new_nan((int64_t)N * C);
    cpu_add_nc_fwd(yy, xx, v, N, HW, C);
    ok = 1;
    for (int s = 0; s < N; s++)
        for (int hw = 0; hw < HW; hw++)
            for (int ch = 0; ch < C; ch++) {
                int64_t i = ((int64_t)s * HW + hw) * C + ch;
                ok &= yy[i] == xx[i] + v[s * C + ch];
            }
    CHECK(ok, "add_nc fwd differs from x + v[n, c]");
    memcpy(yy2, xx, (size_t)m * 4);
    cpu_add_nc_fwd(yy2, yy2, v, N, HW, C);
    CHECK(memcmp(yy2, yy, (size_t)m * 4) == 0, "add_nc fwd in place differs");
    cpu_add_nc_bwd(dv, rr, N, HW, C);
    ew_ctx cn = {yy2, xx, rr, v, 0, N, HW, C, 0, 0};
    check_fd("add_nc dv", v, (int64_t)N * C, dv, add_nc_loss, &cn, H_LINEAR, TOL_FD_LINEAR);
    float *q1[1] = {yy}, *q2[1] = {yy2}, *d1[1] = {dv}, *d2[1] = {new_nan((int64_t)N * C)};
    int64_t szm[1] = {m}, szv[1] = {(int64_t)N * C};
    CHECK_TWICE("add_nc fwd", q1, q2, szm, 1, cpu_add_nc_fwd(q1[0], xx, v, N, HW, C),
                cpu_add_nc_fwd(q2[0], xx, v, N, HW, C));
    CHECK_TWICE("add_nc bwd", d1, d2, szv, 1, cpu_add_nc_bwd(d1[0], rr, N, HW, C),
                cpu_add_nc_bwd(d2[0], rr, N, HW, C));

    free(x), free(a), free(r), free(y), free(y2), free(ref), free(dx), free(al), free(xx);
    free(v), free(rr), free(yy), free(yy2), free(dv), free(d2[0]);
}

/* ---- resampling --------------------------------------------------------------------------- */

static double upsample_loss(void *p) {
    ew_ctx *c = p;
    cpu_upsample2x_fwd(c->y, c->x, c->N, c->H, c->W, c->C);
    return dot_rf(c->r, c->y, (int64_t)c->N * 4 * c->H * c->W * c->C);
}

static double avgpool_loss(void *p) {
    ew_ctx *c = p;
    cpu_avgpool2x_fwd(c->y, c->x, c->N, c->H, c->W, c->C);
    return dot_rf(c->r, c->y, (int64_t)c->N * (c->H / 2) * (c->W / 2) * c->C);
}

static void test_resample(void) {
    /* upsample: odd input sizes are fine (the output is 2H x 2W) */
    int N = 2, H = 3, W = 5, C = 3;
    int64_t nx = (int64_t)N * H * W * C, ny = 4 * nx;
    float *x = new_rand(nx, -1, 1), *r = new_rand(ny, -1, 1), *y = new_nan(ny), *y2 = new_nan(ny);
    float *dx = new_nan(nx);
    cpu_upsample2x_fwd(y, x, N, H, W, C);
    int ok = 1;
    for (int s = 0; s < N; s++)
        for (int i = 0; i < 2 * H; i++)
            for (int j = 0; j < 2 * W; j++)
                for (int c = 0; c < C; c++)
                    ok &= y[(((int64_t)s * 2 * H + i) * 2 * W + j) * C + c] ==
                          x[(((int64_t)s * H + i / 2) * W + j / 2) * C + c];
    CHECK(ok, "upsample fwd differs from nearest neighbour");
    cpu_upsample2x_bwd(dx, r, N, H, W, C);
    ew_ctx c = {y2, x, r, NULL, 0, N, 0, C, H, W};
    check_fd("upsample dx", x, nx, dx, upsample_loss, &c, H_LINEAR, TOL_FD_LINEAR);
    float *o1[1] = {y}, *o2[1] = {y2}, *b1[1] = {dx}, *b2[1] = {new_nan(nx)};
    int64_t szy[1] = {ny}, szx[1] = {nx};
    CHECK_TWICE("upsample fwd", o1, o2, szy, 1, cpu_upsample2x_fwd(o1[0], x, N, H, W, C),
                cpu_upsample2x_fwd(o2[0], x, N, H, W, C));
    CHECK_TWICE("upsample bwd", b1, b2, szx, 1, cpu_upsample2x_bwd(b1[0], r, N, H, W, C),
                cpu_upsample2x_bwd(b2[0], r, N, H, W, C));
    free(x), free(r), free(y), free(y2), free(dx), free(b2[0]);

    /* avgpool: H, W even, non-square */
    N = 2, H = 4, W = 6, C = 3;
    nx = (int64_t)N * H * W * C, ny = nx / 4;
    x = new_rand(nx, -1, 1), r = new_rand(ny, -1, 1), y = new_nan(ny), y2 = new_nan(ny);
    dx = new_nan(nx);
    cpu_avgpool2x_fwd(y, x, N, H, W, C);
    double *ref = new_zero_d(ny);
    for (int s = 0; s < N; s++)
        for (int i = 0; i < H; i++)
            for (int j = 0; j < W; j++)
                for (int ch = 0; ch < C; ch++)
                    ref[(((int64_t)s * (H / 2) + i / 2) * (W / 2) + j / 2) * C + ch] +=
                        0.25 * x[(((int64_t)s * H + i) * W + j) * C + ch];
    CHECK_CLOSE("avgpool fwd", y, ref, ny, TOL_FWD);
    cpu_avgpool2x_bwd(dx, r, N, H, W, C);
    ew_ctx c2 = {y2, x, r, NULL, 0, N, 0, C, H, W};
    check_fd("avgpool dx", x, nx, dx, avgpool_loss, &c2, H_LINEAR, TOL_FD_LINEAR);
    o1[0] = y, o2[0] = y2, b1[0] = dx, b2[0] = new_nan(nx);
    szy[0] = ny, szx[0] = nx;
    CHECK_TWICE("avgpool fwd", o1, o2, szy, 1, cpu_avgpool2x_fwd(o1[0], x, N, H, W, C),
                cpu_avgpool2x_fwd(o2[0], x, N, H, W, C));
    CHECK_TWICE("avgpool bwd", b1, b2, szx, 1, cpu_avgpool2x_bwd(b1[0], r, N, H, W, C),
                cpu_avgpool2x_bwd(b2[0], r, N, H, W, C));
    free(x), free(r), free(y), free(y2), free(dx), free(b2[0]), free(ref);
}

/* ---- attention ---------------------------------------------------------------------------- */

/* Naive attention in double: P[N,h,L,L], y[N,L,C]; and its backward from the same P. */
static void naive_attention(double *y, double *P, const float *qkv, int N, int L, int C,
                            int heads) {
    int D = C / heads;
    double a = 1.0 / sqrt((double)D);
    for (int n = 0; n < N; n++)
        for (int h = 0; h < heads; h++) {
            double *Pr = P + ((int64_t)n * heads + h) * L * L;
            for (int i = 0; i < L; i++) {
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j < L; j++) {
                    double s = 0;
                    for (int d = 0; d < D; d++)
                        s += (double)qkv[((int64_t)n * L + i) * 3 * C + h * D + d] *
                             qkv[((int64_t)n * L + j) * 3 * C + C + h * D + d];
                    Pr[(int64_t)i * L + j] = s * a;
                    if (s * a > mx) mx = s * a;
                }
                for (int j = 0; j < L; j++) {
                    Pr[(int64_t)i * L + j] = exp(Pr[(int64_t)i * L + j] - mx);
                    sum += Pr[(int64_t)i * L + j];
                }
                for (int j = 0; j < L; j++) Pr[(int64_t)i * L + j] /= sum;
                for (int d = 0; d < D; d++) {
                    double acc = 0;
                    for (int j = 0; j < L; j++)
                        acc += Pr[(int64_t)i * L + j] *
                               qkv[((int64_t)n * L + j) * 3 * C + 2 * C + h * D + d];
                    y[((int64_t)n * L + i) * C + h * D + d] = acc;
                }
            }
        }
}

static void naive_attention_bwd(double *dqkv, const float *dy, const float *qkv, const double *P,
                                int N, int L, int C, int heads) {
    int D = C / heads;
    double a = 1.0 / sqrt((double)D);
    double *dS = new_zero_d(L);
    for (int n = 0; n < N; n++)
        for (int h = 0; h < heads; h++) {
            const double *Pr = P + ((int64_t)n * heads + h) * L * L;
#define Q(i, d) qkv[((int64_t)n * L + (i)) * 3 * C + h * D + (d)]
#define K_(i, d) qkv[((int64_t)n * L + (i)) * 3 * C + C + h * D + (d)]
#define V(i, d) qkv[((int64_t)n * L + (i)) * 3 * C + 2 * C + h * D + (d)]
#define DQKV(i, part, d) dqkv[((int64_t)n * L + (i)) * 3 * C + (part)*C + h * D + (d)]
#define DY(i, d) dy[((int64_t)n * L + (i)) * C + h * D + (d)]
            for (int i = 0; i < L; i++) {
                double rowdot = 0;
                for (int j = 0; j < L; j++) {
                    double dp = 0;
                    for (int d = 0; d < D; d++) dp += DY(i, d) * V(j, d);
                    dS[j] = dp;
                    rowdot += Pr[(int64_t)i * L + j] * dp;
                    for (int d = 0; d < D; d++) DQKV(j, 2, d) += Pr[(int64_t)i * L + j] * DY(i, d);
                }
                for (int j = 0; j < L; j++) {
                    double ds = Pr[(int64_t)i * L + j] * (dS[j] - rowdot) * a;
                    for (int d = 0; d < D; d++) {
                        DQKV(i, 0, d) += ds * K_(j, d);
                        DQKV(j, 1, d) += ds * Q(i, d);
                    }
                }
            }
#undef Q
#undef K_
#undef V
#undef DQKV
#undef DY
        }
    free(dS);
}

typedef struct {
    float *y, *P, *qkv, *r;
    int N, L, C, heads;
} attn_ctx;

static double attn_loss(void *p) {
    attn_ctx *c = p;
    cpu_attention_fwd(c->y, c->P, c->qkv, c->N, c->L, c->C, c->heads);
    return dot_rf(c->r, c->y, (int64_t)c->N * c->L * c->C);
}

static void test_attention_case(int N, int L, int C, int heads, float lo, float hi, int fd) {
    char name[96];
    snprintf(name, sizeof name, "attention N%d L%d C%d heads%d", N, L, C, heads);
    int64_t nq = (int64_t)N * L * 3 * C, ny = (int64_t)N * L * C, nP = (int64_t)N * heads * L * L;
    float *qkv = new_rand(nq, lo, hi), *r = new_rand(ny, -1, 1);
    float *y = new_nan(ny), *P = new_nan(nP), *dqkv = new_nan(nq);
    double *yref = new_zero_d(ny), *Pref = new_zero_d(nP), *dref = new_zero_d(nq);
    cpu_attention_fwd(y, P, qkv, N, L, C, heads);
    naive_attention(yref, Pref, qkv, N, L, C, heads);
    CHECK_CLOSE(name, P, Pref, nP, TOL_FWD);
    CHECK_CLOSE(name, y, yref, ny, TOL_FWD);
    cpu_attention_bwd(dqkv, r, qkv, P, N, L, C, heads);
    naive_attention_bwd(dref, r, qkv, Pref, N, L, C, heads);
    CHECK_CLOSE("attention bwd vs naive", dqkv, dref, nq, TOL_FWD);
    if (fd) {
        float *y2 = new_nan(ny), *P2 = new_nan(nP);
        attn_ctx c = {y2, P2, qkv, r, N, L, C, heads};
        check_fd("attention dqkv", qkv, nq, dqkv, attn_loss, &c, H_NONLINEAR, TOL_FD_NONLINEAR);
        free(y2), free(P2);
    }
    float *o1[2] = {y, P}, *o2[2] = {new_nan(ny), new_nan(nP)};
    int64_t sz[2] = {ny, nP};
    CHECK_TWICE(name, o1, o2, sz, 2, cpu_attention_fwd(o1[0], o1[1], qkv, N, L, C, heads),
                cpu_attention_fwd(o2[0], o2[1], qkv, N, L, C, heads));
    float *b1[1] = {dqkv}, *b2[1] = {new_nan(nq)};
    int64_t szq[1] = {nq};
    CHECK_TWICE(name, b1, b2, szq, 1, cpu_attention_bwd(b1[0], r, qkv, P, N, L, C, heads),
                cpu_attention_bwd(b2[0], r, qkv, P, N, L, C, heads));
    free(qkv), free(r), free(y), free(P), free(dqkv), free(yref), free(Pref), free(dref);
    free(o2[0]), free(o2[1]), free(b2[0]);
}

static void test_attention(void) {
    /* scores spread enough (|qkv| up to 2) that softmax is far from uniform */
    test_attention_case(2, 7, 4, 1, -2, 2, 1);
    test_attention_case(2, 7, 4, 2, -2, 2, 1);
    test_attention_case(1, 5, 6, 2, -2, 2, 1); /* D = 3 */
    test_attention_case(2, 9, 8, 1, -1, 1, 1);
    /* L*L > the 1 Mi-float scratch: the backward runs two row chunks (953 + 147 rows) */
    test_attention_case(1, 1100, 4, 1, -1, 1, 0);
}

/* ---- timestep embedding, DDPM noise ------------------------------------------------------- */

/* ---- the class embedding: rows of a table by label; its backward by finite differences */

typedef struct {
    float *y, *table, *r;
    const int32_t *lab;
    int N, dim;
} cemb_ctx;

static double cemb_loss(void *p) {
    cemb_ctx *c = p;
    cpu_class_emb_fwd(c->y, c->lab, c->table, c->N, c->dim);
    return dot_rf(c->r, c->y, (int64_t)c->N * c->dim);
}

static void test_class_emb(void) {
    enum { N = 9, D = 5, R = 6 }; /* rows 0, 2 picked several times, row 4 never, 5 the null */
    static const int32_t lab[N] = {2, 0, 5, 2, 1, 0, 3, 2, 5};
    float *table = new_rand(R * D, -2, 2), *r = new_rand(N * D, -1, 1);
    float *y = new_nan(N * D), *dt = new_nan(R * D), *dt2 = new_nan(R * D);
    cpu_class_emb_fwd(y, lab, table, N, D);
    int same = 1;
    for (int n = 0; n < N; n++)
        for (int d = 0; d < D; d++) same &= y[n * D + d] == table[lab[n] * D + d];
    CHECK(same, "class emb: y[n] is not table[label[n]]");
    cpu_class_emb_bwd(dt, r, lab, N, D, R);
    cemb_ctx c = {y, table, r, lab, N, D};
    check_fd("class emb dtable", table, R * D, dt, cemb_loss, &c, H_LINEAR, TOL_FD_LINEAR);
    int zero = 1;
    for (int d = 0; d < D; d++) zero &= dt[4 * D + d] == 0.0f;
    CHECK(zero, "class emb: the row nobody picked has a gradient");
    /* the sum in sample order: row 2's samples 0, 3, 7 summed left to right, in float */
    for (int d = 0; d < D; d++)
        CHECK(dt[2 * D + d] == (r[0 * D + d] + r[3 * D + d]) + r[7 * D + d],
              "class emb: row 2 is not its samples' sum in sample order");
    float *o1[1] = {dt}, *o2[1] = {dt2};
    int64_t sz[1] = {R * D};
    CHECK_TWICE("class emb bwd", o1, o2, sz, 1, cpu_class_emb_bwd(o1[0], r, lab, N, D, R),
                cpu_class_emb_bwd(o2[0], r, lab, N, D, R));
    free(table), free(r), free(y), free(dt), free(dt2);
}

static void test_embedding(void) {
    int32_t t[5] = {0, 1, 17, 500, 999};
    int dims[3] = {4, 32, 128};
    for (int k = 0; k < 3; k++) {
        int dim = dims[k], half = dim / 2;
        float *y = new_nan(5L * dim), *y2 = new_nan(5L * dim);
        double *ref = new_zero_d(5L * dim);
        cpu_timestep_emb(y, t, 5, dim);
        for (int n = 0; n < 5; n++)
            for (int i = 0; i < half; i++) {
                /* 10000^(-i/(half-1)), written as a power rather than the kernel's exp/log */
                double f = pow(10000.0, -(double)i / (half - 1));
                ref[n * dim + i] = sin(t[n] * f);
                ref[n * dim + half + i] = cos(t[n] * f);
            }
        /* |values| <= 1: an absolute 1e-6 (a few fp32 ulps of 1) */
        CHECK_CLOSE("timestep emb", y, ref, 5L * dim, 1e-6);
        CHECK(y[0] == 0.0f && y[half] == 1.0f, "timestep emb at t=0");
        float *o1[1] = {y}, *o2[1] = {y2};
        int64_t sz[1] = {5L * dim};
        CHECK_TWICE("timestep emb", o1, o2, sz, 1, cpu_timestep_emb(o1[0], t, 5, dim),
                    cpu_timestep_emb(o2[0], t, 5, dim));
        free(y), free(y2), free(ref);
    }

    /* abar vs an independent formulation: exp(sum log(1 - beta_i)) */
    int T = 1000;
    double b1 = 1e-4, bT = 0.02;
    const sg_betas lin = {.T = T, .schedule = SG_BETA_LINEAR, .beta1 = b1, .betaT = bT};
    int ts[4] = {0, 1, 500, 999};
    for (int k = 0; k < 4; k++) {
        double ls = 0;
        for (int i = 0; i <= ts[k]; i++) ls += log1p(-(b1 + (bT - b1) * i / (T - 1)));
        double want = exp(ls), got = sg_ddpm_abar(&lin, ts[k]);
        CHECK(fabs(got - want) <= 1e-12 * want, "abar(%d) = %.17g, want %.17g", ts[k], got, want);
    }
    CHECK(sg_ddpm_abar(&lin, 0) == 1.0 - b1, "abar(0) = 1 - beta1");

    /* the cosine schedule (Nichol & Dhariwal 2021, eq. 17): abar_t = f(t+1) / f(0) with
     * f(u) = cos((u/T + s) / (1 + s) pi/2)^2, s = 0.008 (the product of the ratios telescopes:
     * 0-based t is their t + 1), wherever no beta is clipped at 0.999; clipped only at the last
     * step (f(T) = 0), where beta is 0.999 exactly. Several T: improved-diffusion's 4000 too. */
    const int cT[3] = {1000, 4000, 7};
    for (int c = 0; c < 3; c++) {
        const sg_betas cb = {.T = cT[c], .schedule = SG_BETA_COSINE, .beta1 = b1, .betaT = bT};
        const double pi = acos(-1.0);
        double worst = 0;
        int at = -1;
        for (int k = 0; k < cT[c] - 1; k++) {
            const double u = cos(((double)(k + 1) / cT[c] + 0.008) / 1.008 * pi / 2),
                         u0 = cos(0.008 / 1.008 * pi / 2);
            const double want = (u * u) / (u0 * u0), got = sg_ddpm_abar(&cb, k);
            if (fabs(got - want) > worst * want) worst = fabs(got - want) / want, at = k;
        }
        CHECK(worst <= 1e-9, "cosine T=%d: abar(%d) is %.3g off the closed form (relative)", cT[c],
              at, worst);
        CHECK(sg_ddpm_beta(&cb, cT[c] - 1) == 0.999 && sg_ddpm_beta(&cb, cT[c] - 2) < 0.999,
              "cosine T=%d: only the last beta is clipped at 0.999 (%.17g, %.17g)", cT[c],
              sg_ddpm_beta(&cb, cT[c] - 1), sg_ddpm_beta(&cb, cT[c] - 2));
        CHECK(sg_ddpm_abar(&cb, cT[c] - 1) == sg_ddpm_abar(&cb, cT[c] - 2) * (1.0 - 0.999),
              "cosine T=%d: abar(T-1) = abar(T-2) (1 - 0.999)", cT[c]);
    }
    /* the two schedules differ where they should: cosine keeps more signal in the middle */
    const sg_betas cos1k = {.T = T, .schedule = SG_BETA_COSINE, .beta1 = b1, .betaT = bT};
    CHECK(sg_ddpm_abar(&cos1k, 500) > 4 * sg_ddpm_abar(&lin, 500),
          "cosine abar(500) %.4g against linear %.4g", sg_ddpm_abar(&cos1k, 500),
          sg_ddpm_abar(&lin, 500));

    /* every abar at once (the sampler's table) is sg_ddpm_abar's bits, both schedules */
    double *abars = malloc(sizeof(double) * (size_t)T);
    for (int c = 0; c < 2; c++) {
        const sg_betas *sb = c ? &cos1k : &lin;
        sg_ddpm_abars(sb, abars);
        int off = -1;
        for (int k = 0; k < T && off < 0; k++) {
            const double a = sg_ddpm_abar(sb, k);
            if (memcmp(&abars[k], &a, 8)) off = k;
        }
        CHECK(off < 0, "%s: sg_ddpm_abars[%d] is not sg_ddpm_abar's", c ? "cosine" : "linear", off);
    }
    free(abars);

    int N = 4, per = 13;
    int32_t tt[4] = {0, 999, 250, 7};
    float *x0 = new_rand((int64_t)N * per, -1, 1), *eps = new_rand((int64_t)N * per, -3, 3);
    float *xt = new_nan((int64_t)N * per), *xt2 = new_nan((int64_t)N * per);
    double *ref = new_zero_d((int64_t)N * per);
    const sg_betas linf = {
        .T = T, .schedule = SG_BETA_LINEAR, .beta1 = (float)b1, .betaT = (float)bT};
    cpu_ddpm_noise(xt, x0, eps, tt, N, per, &linf);
    for (int n = 0; n < N; n++) {
        double ls = 0;
        for (int i = 0; i <= tt[n]; i++)
            ls += log1p(-((float)b1 + ((double)(float)bT - (float)b1) * i / (T - 1)));
        double ab = exp(ls);
        for (int i = 0; i < per; i++)
            ref[n * per + i] = sqrt(ab) * x0[n * per + i] + sqrt(1 - ab) * eps[n * per + i];
    }
    CHECK_CLOSE("ddpm noise", xt, ref, (int64_t)N * per, TOL_FWD);
    float *o1[1] = {xt}, *o2[1] = {xt2};
    int64_t sz[1] = {(int64_t)N * per};
    CHECK_TWICE("ddpm noise", o1, o2, sz, 1, cpu_ddpm_noise(o1[0], x0, eps, tt, N, per, &linf),
                cpu_ddpm_noise(o2[0], x0, eps, tt, N, per, &linf));
    /* the table (what the CUDA noising reads): row t = {sqrt(abar_t), sqrt(1 - abar_t)} of the
     * same product, bit for bit, for every t, both schedules; and the noising multiplies it */
    sg_ddpm_row *rows = malloc(sizeof(sg_ddpm_row) * (size_t)T);
    for (int c = 0; c < 2; c++) {
        const sg_betas *sb = c ? &cos1k : &linf;
        cpu_ddpm_table(rows, sb);
        int bad = -1;
        for (int k = 0; k < T && bad < 0; k++) {
            const double ab = sg_ddpm_abar(sb, k);
            const double a = sqrt(ab), s = sqrt(1.0 - ab);
            if (memcmp(&rows[k].sqrt_abar, &a, 8) || memcmp(&rows[k].sqrt_1m_abar, &s, 8)) bad = k;
        }
        CHECK(bad < 0, "%s: ddpm table row %d is not sqrt(abar), sqrt(1 - abar)",
              c ? "cosine" : "linear", bad);
        cpu_ddpm_noise(xt, x0, eps, tt, N, per, sb);
        for (int n = 0, i = 0; n < N; n++)
            for (int j = 0; j < per; j++, i++) {
                const sg_ddpm_row r = rows[tt[n]];
                ref[i] = (float)(r.sqrt_abar * x0[i] + r.sqrt_1m_abar * eps[i]);
            }
        int diff = -1;
        for (int i = 0; i < N * per && diff < 0; i++)
            if (xt[i] != (float)ref[i]) diff = i;
        CHECK(diff < 0, "%s: ddpm noise element %d is not the table's", c ? "cosine" : "linear",
              diff);
    }
    /* zero terminal SNR (tests/test_sampler.c checks the schedule against Lin et al.'s): the
     * table is the rescaled product's, its last row {0, 1} exactly (x_{T-1} = eps, v = -x0) */
    for (int c = 0; c < 2; c++) {
        sg_betas zs = c ? cos1k : linf;
        zs.zero_snr = 1;
        cpu_ddpm_table(rows, &zs);
        int bad = -1;
        for (int k = 0; k < T && bad < 0; k++) {
            const double ab = sg_ddpm_abar(&zs, k), a = sqrt(ab), s = sqrt(1.0 - ab);
            if (memcmp(&rows[k].sqrt_abar, &a, 8) || memcmp(&rows[k].sqrt_1m_abar, &s, 8)) bad = k;
        }
        CHECK(bad < 0 && rows[T - 1].sqrt_abar == 0.0 && rows[T - 1].sqrt_1m_abar == 1.0 &&
                  rows[T - 2].sqrt_abar > 0.0,
              "%s zero-SNR: table row %d is not the product's; the last row {%.17g, %.17g}",
              c ? "cosine" : "linear", bad, rows[T - 1].sqrt_abar, rows[T - 1].sqrt_1m_abar);
        float *w = malloc(sizeof(float) * (size_t)T);
        cpu_loss_weight_table(w, &zs, 5.0, 1);
        CHECK(w[T - 1] == 0.0f && w[T - 2] > 0.0f && w[0] > 0.0f,
              "%s zero-SNR min-SNR v weights: %g at T-1 (SNR 0: want 0), %g before it",
              c ? "cosine" : "linear", (double)w[T - 1], (double)w[T - 2]);
        free(w);
    }
    free(rows);
    free(x0), free(eps), free(xt), free(xt2), free(ref);
}

/* ---- loss --------------------------------------------------------------------------------- */

typedef struct {
    float *pred, *target;
    int64_t n;
    float dloss;
    const int32_t *t; /* weighted (mse_w): the samples' timesteps, the table, the sample count */
    const float *wtab;
    int N;
} mse_ctx;

static double mse_loss(void *p) {
    mse_ctx *c = p;
    float l;
    cpu_mse_w_fwd(&l, c->pred, c->target, c->n, 1, c->t, c->wtab, c->N);
    return (double)c->dloss * l;
}

static void test_loss(void) {
    /* n spans several 4096-value blocks plus a partial one */
    int64_t sizes[2] = {37, 3 * 4096 + 123};
    for (int k = 0; k < 2; k++) {
        int64_t n = sizes[k];
        float *pred = new_rand(n, -2, 2), *target = new_rand(n, -2, 2), *dp = new_nan(n);
        float loss = NAN, loss2 = 7.0f;
        double want = 0;
        for (int64_t i = 0; i < n; i++)
            want += ((double)pred[i] - target[i]) * (pred[i] - target[i]);
        want /= (double)n;
        cpu_mse_fwd(&loss, pred, target, n, 1);
        CHECK(fabs(loss - want) <= 1e-6 * want, "mse fwd %.9g want %.9g", loss, want);
        cpu_mse_fwd(&loss2, pred, target, n, 1);
        CHECK(memcmp(&loss, &loss2, 4) == 0, "mse fwd not deterministic");
        /* gradient accumulation: the shares of 3 equal micro-batches add up to the mean of all
         * (the first part of n is what 3 micro-batches of n/3 values would see) */
        int64_t m = n / 3;
        double want3 = 0;
        float share = NAN, sum3 = 0;
        for (int64_t i = 0; i < 3 * m; i++)
            want3 += ((double)pred[i] - target[i]) * (pred[i] - target[i]);
        want3 /= (double)(3 * m);
        for (int part = 0; part < 3; part++) {
            cpu_mse_fwd(&share, pred + part * m, target + part * m, m, 3);
            sum3 += share;
        }
        CHECK(fabs(sum3 - want3) <= 1e-6 * want3, "mse micro-batch shares %.9g want %.9g",
              (double)sum3, want3);
        cpu_mse_bwd(dp, pred, target, n, 0.75f);
        if (k == 0) {
            /* L = dloss * mse is quadratic in pred: central differences are exact */
            mse_ctx c = {pred, target, n, 0.75f, NULL, NULL, 1};
            check_fd("mse dpred", pred, n, dp, mse_loss, &c, H_LINEAR, TOL_FD_LINEAR);
        }
        double *ref = new_zero_d(n);
        for (int64_t i = 0; i < n; i++) ref[i] = 0.75 * 2.0 * ((double)pred[i] - target[i]) / n;
        CHECK_CLOSE("mse bwd vs formula", dp, ref, n, TOL_FWD);
        float *o1[1] = {dp}, *o2[1] = {new_nan(n)};
        int64_t sz[1] = {n};
        CHECK_TWICE("mse bwd", o1, o2, sz, 1, cpu_mse_bwd(o1[0], pred, target, n, 0.75f),
                    cpu_mse_bwd(o2[0], pred, target, n, 0.75f));
        free(pred), free(target), free(dp), free(ref), free(o2[0]);
    }
}

/* the loss weights' schedules: linear over 1000 steps (sch 0), cosine over 4000 (1) */
static sg_betas weight_betas(int sch) {
    const sg_betas b = {.T = sch ? 4000 : 1000,
                        .schedule = sch ? SG_BETA_COSINE : SG_BETA_LINEAR,
                        .beta1 = 1e-4f,
                        .betaT = 0.02f};
    return b;
}

/* min-SNR-gamma: the table against the weights' other closed forms, and the weighted loss */
static void test_loss_weighted(void) {
    /* SNR = abar / (1 - abar). eps: min(SNR, g) / SNR = min(1, g (1 - abar) / abar); v:
     * min(SNR, g) / (SNR + 1) = min(abar, g (1 - abar)) (SNR / (SNR + 1) is abar) */
    const double gammas[3] = {5.0, 1.0, 0.05};
    for (int sch = 0; sch < 2; sch++)
        for (int gi = 0; gi < 3; gi++)
            for (int vpred = 0; vpred < 2; vpred++) {
                const sg_betas b = weight_betas(sch);
                const double g = gammas[gi];
                float *w = malloc(sizeof(float) * (size_t)b.T);
                cpu_loss_weight_table(w, &b, g, vpred);
                double worst = 0;
                int unit = 1, mono = 1;
                for (int t = 0; t < b.T; t++) {
                    const double a = sg_ddpm_abar(&b, t);
                    const double want = vpred ? fmin(a, g * (1 - a)) : fmin(1.0, g * (1 - a) / a);
                    worst = fmax(worst, fabs(w[t] - want) / want);
                    if (!vpred && a / (1 - a) <= g) unit &= w[t] == 1.0f;
                    if (!vpred && t) mono &= w[t] >= w[t - 1]; /* SNR falls as t grows */
                }
                CHECK(worst <= 1e-6,
                      "min-SNR %s T %d gamma %g %s: a weight %.3g off its closed "
                      "form (relative)",
                      sch ? "cosine" : "linear", b.T, g, vpred ? "v" : "eps", worst);
                CHECK(unit && mono,
                      "min-SNR eps weights: 1 where SNR <= gamma (%d), rising in t "
                      "(%d)",
                      unit, mono);
                free(w);
            }
    /* abar 0 (an underflowed product): SNR's limits, not 0 / 0 */
    CHECK(sg_min_snr_weight(0.0, 5.0, 0) == 1.0 && sg_min_snr_weight(0.0, 5.0, 1) == 0.0,
          "min-SNR at abar 0: eps %g (want 1), v %g (want 0)", sg_min_snr_weight(0.0, 5.0, 0),
          sg_min_snr_weight(0.0, 5.0, 1));
    /* P2 (Choi et al. 2022): (k + SNR)^-g = ((1 - abar) / (k (1 - abar) + abar))^g for eps, times
     * SNR / (SNR + 1) = abar for v; eps weights rise in t (SNR falls), all below k^-g */
    const double p2[3][2] = {{1.0, 1.0}, {0.5, 1.0}, {1.0, 5.0}};
    for (int sch = 0; sch < 2; sch++)
        for (int pi = 0; pi < 3; pi++)
            for (int vpred = 0; vpred < 2; vpred++) {
                const sg_betas b = weight_betas(sch);
                const double g = p2[pi][0], k = p2[pi][1];
                float *w = malloc(sizeof(float) * (size_t)b.T);
                cpu_p2_weight_table(w, &b, g, k, vpred);
                double worst = 0;
                int mono = 1, below = 1;
                for (int t = 0; t < b.T; t++) {
                    const long double a = sg_ddpm_abar(&b, t);
                    const long double want = powl((1 - a) / (k * (1 - a) + a), g) * (vpred ? a : 1);
                    worst = fmax(worst, (double)(fabsl(w[t] - want) / want));
                    if (!vpred && t) mono &= w[t] >= w[t - 1];
                    below &= w[t] <= (float)pow(k, -g);
                }
                CHECK(worst <= 1e-6 && mono && below,
                      "P2 %s T %d gamma %g k %g %s: a weight %.3g off its closed form (relative); "
                      "eps rising in t %d, all at most k^-gamma %d",
                      sch ? "cosine" : "linear", b.T, g, k, vpred ? "v" : "eps", worst, mono,
                      below);
                free(w);
            }
    /* abar 0 (zero terminal SNR's last step): SNR 0, eps k^-g, v 0 */
    CHECK(sg_p2_weight(0.0, 1.0, 5.0, 0) == 0.2 && sg_p2_weight(0.0, 1.0, 5.0, 1) == 0.0,
          "P2 at abar 0: eps %g (want 0.2), v %g (want 0)", sg_p2_weight(0.0, 1.0, 5.0, 0),
          sg_p2_weight(0.0, 1.0, 5.0, 1));
    /* the weighted loss: against the formula, all-ones weights = the unweighted bits, micro-
     * batch shares, finite differences; N samples of `per` values, n past one sum block */
    const int N = 6, T = 50;
    const int64_t per = 1031, n = N * per;
    float *pred = new_rand(n, -2, 2), *target = new_rand(n, -2, 2), *dp = new_nan(n);
    float *wtab = new_rand(T, 0.01f, 2.0f), *ones = new_fill(T, 1.0f);
    int32_t t[6] = {49, 0, 7, 7, 31, 12};
    double want = 0;
    for (int64_t i = 0; i < n; i++)
        want += wtab[t[i / per]] * ((double)pred[i] - target[i]) * (pred[i] - target[i]);
    want /= (double)n;
    float loss = NAN, l1 = NAN, l0 = NAN;
    cpu_mse_w_fwd(&loss, pred, target, n, 1, t, wtab, N);
    CHECK(fabs(loss - want) <= 1e-6 * want, "weighted mse %.9g want %.9g", loss, want);
    cpu_mse_w_fwd(&l1, pred, target, n, 1, t, ones, N);
    cpu_mse_fwd(&l0, pred, target, n, 1);
    CHECK(memcmp(&l1, &l0, 4) == 0, "weights of 1: %.9g, unweighted %.9g", l1, l0);
    float sum2 = 0, share = NAN; /* two micro-batches of 3 samples */
    for (int part = 0; part < 2; part++) {
        cpu_mse_w_fwd(&share, pred + part * 3 * per, target + part * 3 * per, 3 * per, 2,
                      t + part * 3, wtab, 3);
        sum2 += share;
    }
    CHECK(fabs(sum2 - want) <= 1e-6 * want, "weighted micro-batch shares %.9g want %.9g",
          (double)sum2, want);
    cpu_mse_w_bwd(dp, pred, target, n, 0.75f, t, wtab, N);
    double *ref = new_zero_d(n);
    for (int64_t i = 0; i < n; i++)
        ref[i] = 0.75 * 2.0 * wtab[t[i / per]] * ((double)pred[i] - target[i]) / n;
    CHECK_CLOSE("weighted mse bwd vs formula", dp, ref, n, TOL_FWD);
    float *d1 = new_nan(n), *d0 = new_nan(n);
    cpu_mse_w_bwd(d1, pred, target, n, 0.75f, t, ones, N);
    cpu_mse_bwd(d0, pred, target, n, 0.75f);
    CHECK(memcmp(d1, d0, sizeof(float) * (size_t)n) == 0, "weights of 1: not the unweighted bits");
    /* finite differences on 3 samples of 12 values (the gradients' scale of the unweighted case) */
    mse_ctx c = {pred, target, 36, 0.75f, t, wtab, 3};
    cpu_mse_w_bwd(dp, pred, target, 36, 0.75f, t, wtab, 3);
    check_fd("weighted mse dpred", pred, 36, dp, mse_loss, &c, H_LINEAR, TOL_FD_LINEAR);
    free(pred), free(target), free(dp), free(wtab), free(ones), free(ref), free(d1), free(d0);
}

/* ---- optimizer ---------------------------------------------------------------------------- */

static void test_optim(void) {
    int64_t n = 70 * 4096 + 77; /* 71 blocks: two tasks of the pool (optim.c) */
    float *g = new_rand(n, -1, 1);
    double want = 0;
    for (int64_t i = 0; i < n; i++) want += (double)g[i] * g[i];
    float ss = NAN, ss2 = 7.0f;
    cpu_sumsq(&ss, g, n);
    cpu_sumsq(&ss2, g, n);
    CHECK(fabs(ss - want) <= 1e-6 * want, "sumsq %.9g want %.9g", ss, want);
    CHECK(memcmp(&ss, &ss2, 4) == 0, "sumsq not deterministic");

    /* clip: both branches */
    float sq = 100.0f, sc = NAN;
    cpu_clip_scale(&sc, &sq, 1.0f);
    CHECK(fabs(sc - 1.0 / (10.0 + 1e-6)) <= 1e-7, "clip scale %.9g, want ~0.1", sc);
    cpu_clip_scale(&sc, &sq, 20.0f);
    CHECK(sc == 1.0f, "clip scale %.9g, want 1 (norm below max)", sc);

    /* AdamW vs a scalar re-implementation of the header's formula, for several steps, with
     * warmup, a clip scale and weight decay; then without warmup and with NULL lr_out (three
     * tasks of the pool: 16384 elements a task) */
    int64_t m = 2 * 16384 + 53;
    float *p = new_rand(m, -1, 1), *mm = new_fill(m, 0.0f), *vv = new_fill(m, 0.0f);
    double *pr = new_zero_d(m), *mr = new_zero_d(m), *vr = new_zero_d(m);
    for (int64_t i = 0; i < m; i++) pr[i] = p[i];
    float lr = 2e-3f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 0.01f, scale = 0.7f;
    for (int64_t step = 0; step < 6; step++) {
        int warmup = step < 4 ? 3 : 0;
        float *grad = new_rand(m, -1, 1), lr_used = NAN;
        cpu_adamw(p, mm, vv, grad, m, &scale, step, lr, b1, b2, eps, wd, warmup, NULL,
                  step == 5 ? NULL : &lr_used);
        double k = (double)step + 1;
        double lrt = warmup > 0 && k < warmup ? lr * k / warmup : lr;
        for (int64_t i = 0; i < m; i++) {
            double gi = (double)grad[i] * scale;
            mr[i] = b1 * mr[i] + (1 - (double)b1) * gi;
            vr[i] = b2 * vr[i] + (1 - (double)b2) * gi * gi;
            double mh = mr[i] / (1 - pow(b1, k)), vh = vr[i] / (1 - pow(b2, k));
            pr[i] -= lrt * (mh / (sqrt(vh) + eps) + wd * pr[i]);
        }
        if (step < 5)
            CHECK(fabs(lr_used - lrt) <= 1e-7 * lrt, "adamw step %lld lr %.9g want %.9g",
                  (long long)step, lr_used, lrt);
        CHECK_CLOSE("adamw p", p, pr, m, 1e-6);
        CHECK_CLOSE("adamw m", mm, mr, m, 1e-5);
        CHECK_CLOSE("adamw v", vv, vr, m, 1e-5);
        free(grad);
    }
    /* NULL scale means 1, and AdamW is deterministic from the same state */
    {
        float *gr = new_rand(m, -1, 1), one = 1.0f;
        float *pa = malloc(m * 4), *ma = malloc(m * 4), *va = malloc(m * 4);
        float *pb = malloc(m * 4), *mb = malloc(m * 4), *vb = malloc(m * 4);
        memcpy(pa, p, m * 4), memcpy(ma, mm, m * 4), memcpy(va, vv, m * 4);
        memcpy(pb, p, m * 4), memcpy(mb, mm, m * 4), memcpy(vb, vv, m * 4);
        cpu_adamw(pa, ma, va, gr, m, NULL, 9, lr, b1, b2, eps, wd, 0, NULL, NULL);
        cpu_adamw(pb, mb, vb, gr, m, &one, 9, lr, b1, b2, eps, wd, 0, NULL, NULL);
        CHECK(memcmp(pa, pb, m * 4) == 0 && memcmp(ma, mb, m * 4) == 0 &&
                  memcmp(va, vb, m * 4) == 0,
              "adamw: NULL scale differs from scale 1 (or not deterministic)");
        free(gr), free(pa), free(ma), free(va), free(pb), free(mb), free(vb);
    }

    /* EMA vs formula; deterministic */
    float *e = new_rand(m, -1, 1), *e2 = malloc(m * 4);
    double *er = new_zero_d(m);
    memcpy(e2, e, m * 4);
    for (int64_t i = 0; i < m; i++) er[i] = 0.999 * e[i] + (1 - 0.999) * p[i];
    cpu_ema(e, p, m, 0.999f, NULL, 123);
    cpu_ema(e2, p, m, 0.999f, NULL, 0);
    CHECK_CLOSE("ema", e, er, m, TOL_FWD);
    CHECK(memcmp(e, e2, m * 4) == 0, "ema not deterministic (or the step read without warm-up)");

    /* the schedules against their formulas, written out here independently of
     * common/sg_schedule.h: lr at the 1-based step k with warm-up 10 and decay to step 110 */
    {
        const double pi = acos(-1.0), peak = 1e-3, frac = 0.1;
        const int64_t ks[] = {1, 5, 9, 10, 11, 35, 60, 85, 109, 110, 111, 500};
        for (int i = 0; i < (int)(sizeof ks / sizeof ks[0]); i++) {
            int64_t k = ks[i];
            double warm = k < 10 ? (double)k / 10 : 1.0;
            double t = k < 10 ? 0.0 : fmin(1.0, (double)(k - 10) / 100.0);
            double cosf_ = k < 10 ? warm : frac + (1 - frac) * 0.5 * (1 + cos(pi * t));
            double linf = k < 10 ? warm : 1 - (1 - frac) * t;
            double got_c = sg_lr_at(peak, k, 10, SG_LR_COSINE, 110, frac);
            double got_l = sg_lr_at(peak, k, 10, SG_LR_LINEAR, 110, frac);
            double got_k = sg_lr_at(peak, k, 10, SG_LR_CONSTANT, 110, frac);
            CHECK(fabs(got_c - peak * cosf_) <= 1e-15, "cosine lr at %lld: %.12g want %.12g",
                  (long long)k, got_c, peak * cosf_);
            CHECK(fabs(got_l - peak * linf) <= 1e-15, "linear lr at %lld: %.12g want %.12g",
                  (long long)k, got_l, peak * linf);
            CHECK(fabs(got_k - peak * warm) <= 1e-15, "constant lr at %lld: %.12g", (long long)k,
                  got_k);
        }
        CHECK(sg_lr_at(peak, 110, 10, SG_LR_COSINE, 110, frac) == peak * frac,
              "cosine must end exactly at lr_min");
        /* AdamW uses it: the lr it writes at 0-based step 59 (k = 60, half way) */
        float pp[3] = {0.5f, -0.25f, 1}, m0[3] = {0}, v0[3] = {0}, gg[3] = {0.1f, 0.2f, -0.3f};
        float used = 0;
        sg_lr_sched lrs = {.decay_steps = 110, .lr_min = frac, .schedule = SG_LR_COSINE};
        cpu_adamw(pp, m0, v0, gg, 3, NULL, 59, (float)peak, b1, b2, eps, 0, 10, &lrs, &used);
        CHECK(used == (float)(peak * (frac + (1 - frac) * 0.5)),
              "adamw under cosine half way: lr %.9g want %.9g", used,
              (float)(peak * (frac + (1 - frac) * 0.5)));
    }
    /* the EMA warm-up (diffusers' EMAModel: decay 0 at the first step, then
     * 1 - (1 + s / inv_gamma)^-power, capped) */
    {
        sg_ema_sched w = {1.0, 0.75};
        float *ew = new_rand(m, -1, 1);
        cpu_ema(ew, p, m, 0.999f, &w, 0);
        CHECK(memcmp(ew, p, m * 4) == 0, "EMA warm-up: the first step must copy the weights");
        double ema_want = 1 - pow(1.0 + 10.0, -0.75),
               got = sg_ema_decay_at(0.999, 10, 1, 1.0, 0.75);
        CHECK(fabs(got - ema_want) <= 1e-15, "EMA warm-up decay at 10: %.12g want %.12g", got,
              ema_want);
        CHECK(sg_ema_decay_at(0.999, 1000000, 1, 1.0, 0.75) == 0.999, "EMA warm-up not capped");
        CHECK(sg_ema_decay_at(0.999, 10, 0, 1.0, 0.75) == 0.999, "EMA without warm-up not fixed");
        float *e3 = new_rand(m, -1, 1);
        double *e3r = new_zero_d(m);
        for (int64_t i = 0; i < m; i++) e3r[i] = ema_want * e3[i] + (1 - ema_want) * p[i];
        cpu_ema(e3, p, m, 0.999f, &w, 10);
        CHECK_CLOSE("ema warm-up at 10", e3, e3r, m, TOL_FWD);
        free(ew), free(e3), free(e3r);
    }

    free(g), free(p), free(mm), free(vv), free(pr), free(mr), free(vr), free(e), free(e2);
    free(er);
}

/* The fused optimizer pass (cpu_adamw_ema) against cpu_adamw followed by cpu_ema: the same bits
 * in p, m, v, ema and lr, over several steps (inside and after the warm-up, each lr schedule,
 * with and without the clip scale and the EMA warm-up, its first step's decay 0 included), and
 * p_copy equal to the updated p. */
static void test_adamw_ema(void) {
    const int64_t n = 2 * 16384 + 1031; /* three tasks of the pool */
    const float lr = 2e-3f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 0.01f, scale = 0.6f;
    const sg_ema_sched warm = {1.0, 0.75};
    float *p = new_rand(n, -1, 1), *m = new_rand(n, -0.1f, 0.1f), *v = new_rand(n, 1e-4f, 1e-2f);
    float *e = new_rand(n, -1, 1), *copy = new_nan(n);
    float *p2 = malloc(n * 4), *m2 = malloc(n * 4), *v2 = malloc(n * 4), *e2 = malloc(n * 4);
    memcpy(p2, p, n * 4), memcpy(m2, m, n * 4), memcpy(v2, v, n * 4), memcpy(e2, e, n * 4);
    for (int64_t step = 0; step < 8; step++) {
        const sg_lr_sched sc = {.decay_steps = 6, .lr_min = 0.1, .schedule = (int)(step % 3)};
        const int warmup = step < 4 ? 3 : 0, ema_warm = step % 2 == 0;
        const float *s = step == 5 ? NULL : &scale;
        float *grad = new_rand(n, -0.5f, 0.5f), lr_a = NAN, lr_b = NAN;
        cpu_adamw(p, m, v, grad, n, s, step, lr, b1, b2, eps, wd, warmup, &sc, &lr_a);
        cpu_ema(e, p, n, 0.999f, ema_warm ? &warm : NULL, step);
        cpu_adamw_ema(p2, m2, v2, e2, copy, grad, n, s, step, lr, b1, b2, eps, wd, warmup, &sc,
                      &lr_b, 0.999f, ema_warm ? &warm : NULL);
        CHECK(!memcmp(p, p2, n * 4) && !memcmp(m, m2, n * 4) && !memcmp(v, v2, n * 4) &&
                  !memcmp(e, e2, n * 4) && !memcmp(&lr_a, &lr_b, 4),
              "adamw_ema step %lld: not the bits of adamw then ema", (long long)step);
        CHECK(!memcmp(copy, p2, n * 4), "adamw_ema step %lld: the copy is not the updated p",
              (long long)step);
        free(grad);
    }
    /* without a copy: the same again */
    float *g = new_rand(n, -0.5f, 0.5f);
    cpu_adamw(p, m, v, g, n, &scale, 9, lr, b1, b2, eps, wd, 0, NULL, NULL);
    cpu_ema(e, p, n, 0.999f, NULL, 9);
    cpu_adamw_ema(p2, m2, v2, e2, NULL, g, n, &scale, 9, lr, b1, b2, eps, wd, 0, NULL, NULL, 0.999f,
                  NULL);
    CHECK(!memcmp(p, p2, n * 4) && !memcmp(e, e2, n * 4), "adamw_ema without a copy differs");
    free(p), free(m), free(v), free(e), free(copy), free(p2), free(m2), free(v2), free(e2);
    free(g);
}

/* ---- thread-count independence ---------------------------------------------------------- */

/* Runs every kernel that shares its work out over the CPU threads with `threads` threads: the
 * GEMM-based ones on shapes that span several GEMM slices and K blocks (and where OpenBLAS's
 * own threading would change the bits), and the normalisation passes on shapes that span
 * several tasks of each kind (rows, group blocks, channel blocks, samples); out is a
 * concatenation of all outputs. */
static int64_t pooled_kernels_run(float *out, int threads, const float *x, const float *w,
                                  const float *qkv, const float *dy) {
    sg_cpu_set_threads(threads);
    int64_t o = 0;
    /* norm_act with the add, SiLU and dropout: N 3, HW 45 (135 rows: 3 row tasks), C 96 in 32
     * groups of 3 (2 group blocks a sample), dgamma / dbeta in 6 channel blocks */
    {
        const int N = 3, HW = 45, C = 96, G = 32;
        const int64_t nx = (int64_t)N * HW * C;
        const cpu_norm_tail t = {
            .act = SG_ACT_SILU, .p = 0.1f, .purpose = 7, .seed = 11, .step = 3, .i0 = 5};
        float *y = out + o, *mean = y + nx, *rstd = mean + N * G, *dx = rstd + N * G;
        float *dv = dx + nx, *dg = dv + N * C, *db = dg + C;
        cpu_norm_act_fwd(y, mean, rstd, x, w, w + C, w + 2 * C, N, HW, C, G, 1e-6f, &t);
        cpu_norm_act_bwd(dx, dv, dg, db, dy, x, w, mean, rstd, w + C, w + 2 * C, N, HW, C, G, &t);
        o += 2 * nx + 2 * N * G + N * C + 2 * C;
        cpu_group_norm_bwd(out + o, out + o + nx, out + o + nx + C, dy, x, mean, rstd, w + C, N, HW,
                           C, G);
        o += nx + 2 * C;
    }
    /* conv: K*K*Ci = 576 per pixel, 2048 output pixels (two im2col chunks), Co = 96 */
    cpu_conv2d_fwd(out + o, x, w, w, 2, 32, 32, 64, 96, 3, 1, 1), o += 2 * 32 * 32 * 96;
    cpu_conv2d_bwd_data(out + o, dy, w, 2, 32, 32, 64, 96, 3, 1, 1), o += 2 * 32 * 32 * 64;
    /* stride 2 with SAME padding (pad 0): col2im's gather skips taps by parity and edge */
    cpu_conv2d_bwd_data(out + o, dy, w, 2, 32, 32, 64, 96, 3, 2, 0), o += 2 * 32 * 32 * 64;
    cpu_conv2d_bwd_weight(out + o, NULL, dy, x, 2, 32, 32, 64, 96, 3, 2, 0), o += 96 * 576;
    cpu_conv2d_bwd_weight(out + o, out + o + 96 * 576, dy, x, 2, 32, 32, 64, 96, 3, 1, 1);
    o += 96 * 576 + 96;
    /* linear with K = 900 (the K that differs between 1 and 2 threads in plain sgemm) */
    cpu_linear_fwd(out + o, x, w, NULL, 128, 900, 96), o += 128 * 96;
    cpu_linear_bwd_data(out + o, dy, w, 128, 900, 96), o += 128 * 900;
    cpu_linear_bwd_weight(out + o, NULL, dy, x, 128, 900, 96), o += 96 * 900;
    /* attention over L = 600 positions, 2 heads of 32 */
    cpu_attention_fwd(out + o, out + o + 600 * 64, qkv, 1, 600, 64, 2);
    cpu_attention_bwd(out + o + 600 * 64 + 2 * 600 * 600, dy, qkv, out + o + 600 * 64, 1, 600, 64,
                      2);
    o += 600 * 64 + 2 * 600 * 600 + 600 * 192;
    /* the optimizer: sumsq over 300000 values (74 blocks: 2 tasks), AdamW + EMA + copy over
     * 40000 (3 tasks), from the same state every run */
    {
        const int64_t n = 40000;
        float *p = out + o, *m = p + n, *v = m + n, *ema = v + n, *cp = ema + n;
        const float scale = 0.5f;
        cpu_sumsq(cp + n, out, 300000); /* the outputs above: the same in every run */
        memcpy(p, x, sizeof(float) * n), memcpy(m, dy, sizeof(float) * n);
        for (int64_t i = 0; i < n; i++) v[i] = dy[i] * dy[i], ema[i] = w[i % (96 * 900)];
        cpu_adamw_ema(p, m, v, ema, cp, qkv, n, &scale, 7, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 10,
                      NULL, NULL, 0.999f, NULL);
        o += 5 * n + 1;
    }
    return o;
}

static void test_thread_invariance(void) {
    int64_t nmax = 4 << 20;
    float *x = new_rand(2 * 32 * 32 * 64 + 128 * 900, -1, 1), *w = new_rand(96 * 900, -0.5f, 0.5f);
    float *qkv = new_rand(600 * 192, -1, 1), *dy = new_rand(2 * 32 * 32 * 96 + 128 * 96, -1, 1);
    float *a = new_nan(nmax), *b = new_nan(nmax);
    int64_t n = pooled_kernels_run(a, 1, x, w, qkv, dy);
    for (int threads = 2; threads <= 5; threads += 3) {
        pooled_kernels_run(b, threads, x, w, qkv, dy);
        CHECK(n <= nmax && memcmp(a, b, (size_t)n * sizeof(float)) == 0,
              "the pooled kernels (GEMM-based, normalisation) give different bits on 1 and %d "
              "CPU threads",
              threads);
    }
    sg_cpu_set_threads(0);
    free(x), free(w), free(qkv), free(dy), free(a), free(b);
}

/* The threads' default: the CPUs this process may run on (its affinity mask, as an MPI
 * launcher's binding sets it); processes that share them take their part
 * (sg_cpu_share_threads); SG_CPU_THREADS overrides both. */
static void test_thread_share(void) {
    const char *env = getenv("SG_CPU_THREADS");
    char saved[32] = "";
    if (env) snprintf(saved, sizeof saved, "%s", env);
    unsetenv("SG_CPU_THREADS");
    cpu_set_t all;
    CHECK(sched_getaffinity(0, sizeof all, &all) == 0, "sched_getaffinity failed");
    const int allowed = CPU_COUNT(&all);
    sg_cpu_set_threads(0);
    CHECK(sg_cpu_threads() == allowed, "default threads %d, the affinity mask holds %d CPUs",
          sg_cpu_threads(), allowed);
    int got = sg_cpu_share_threads(2), want = allowed / 2 > 0 ? allowed / 2 : 1;
    CHECK(got == want && sg_cpu_threads() == want, "2 sharers of %d CPUs: %d threads, want %d",
          allowed, got, want);
    got = sg_cpu_share_threads(allowed + 1);
    CHECK(got == 1, "%d sharers of %d CPUs: %d threads, want 1", allowed + 1, allowed, got);
    /* bound to one CPU (as mpirun binds each of two ranks to a core): one thread */
    if (allowed > 1) {
        cpu_set_t one;
        CPU_ZERO(&one);
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &all)) {
                CPU_SET(c, &one);
                break;
            }
        CHECK(sched_setaffinity(0, sizeof one, &one) == 0, "sched_setaffinity failed");
        sg_cpu_set_threads(0);
        CHECK(sg_cpu_threads() == 1, "bound to one CPU: the default is %d threads",
              sg_cpu_threads());
        CHECK(sched_setaffinity(0, sizeof all, &all) == 0, "sched_setaffinity (restore) failed");
    }
    setenv("SG_CPU_THREADS", "3", 1);
    sg_cpu_set_threads(0);
    got = sg_cpu_share_threads(2);
    CHECK(got == 3, "SG_CPU_THREADS=3 with 2 sharers: %d threads, want 3", got);
    if (saved[0])
        setenv("SG_CPU_THREADS", saved, 1);
    else
        unsetenv("SG_CPU_THREADS");
    sg_cpu_set_threads(0);
}

int main(void) {
    verbose = getenv("SG_TEST_VERBOSE") != NULL;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    test_conv();
    test_linear(3, 5, 4);
    test_linear(1, 17, 9);
    test_linear(2, 3, 150); /* db over more than one 64-channel block */
    test_group_norms();
    test_norm_acts();
    test_elementwise();
    test_silu_mul();
    test_gelu();
    test_resample();
    test_upconv();
    test_attention();
    test_embedding();
    test_class_emb();
    test_loss();
    test_loss_weighted();
    test_optim();
    test_adamw_ema();
    test_thread_invariance();
    test_thread_share();
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("test_cpu_kernels: %.2f s\n",
           (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    return sg_test_end();
}
