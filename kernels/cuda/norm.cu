/* norm.cu — group normalisation, forward and backward.
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
#include "kernels/cuda/cuda_common.cuh"

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

/* threads stride over C: dgamma[c] (+)= sum over n (in order) of ws_dg[n][c]; dbeta likewise */
__global__ void gn_param_kernel(float *dgamma, float *dbeta, const float *ws_dg, const float *ws_db,
                                int N, int C, int accum) {
    SG_GRID_STRIDE(c, C) {
        float sg = 0.0f, sb = 0.0f;
        for (int n = 0; n < N; n++) {
            sg += ws_dg[(int64_t)n * C + c];
            sb += ws_db[(int64_t)n * C + c];
        }
        dgamma[c] = accum ? dgamma[c] + sg : sg;
        dbeta[c] = accum ? dbeta[c] + sb : sb;
    }
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
    SG_LAUNCH(gn_param_kernel, sg_grid_for(C), SG_THREADS, 0, st, dgamma, dbeta, ws_dg, ws_db, N, C,
              accum_param);
    SG_LAUNCH_CHECK("gn_param_kernel");
    return SG_OK;
}
