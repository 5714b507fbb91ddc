/* norm.c — group normalisation: alone (group_norm), and fused with what surrounds it in a
 * ResBlock (norm_act): a per-(sample, channel) add before it, an activation and a dropout after
 * it. Forward, the second pass alone (the backward pass's recomputation) and backward.
 *
 * Shapes: x[N,HW,C] (NHWC with the two spatial dims flattened), G groups of cg = C/G
 * consecutive channels, gamma[C], beta[C], v[N,C] (optional), saved mean[N,G] and rstd[N,G],
 * y like x.
 *
 * Forward. The normalised input is u = x + v[n,c] (one fp32 add; u = x without v). For sample
 * n and group g, over the cnt = HW*cg values of u in the group:
 *   mean = sum(u) / cnt,  var = sum((u - mean)^2) / cnt   (biased, as PyTorch)
 *   rstd = 1 / sqrt(var + eps)
 * in double, two passes (no E[u^2] - E[u]^2 cancellation); mean and rstd are rounded to fp32
 * once and saved, and the second pass uses the saved values, so the backward pass and a
 * recomputation see exactly the statistics the forward applied. Then per element, in fp32:
 *   z = (u - mean) * rstd * gamma[c] + beta[c]          (this order)
 *   a = z                          (act none)
 *   a = z / (1 + expf(-z))         (act silu: z * sigmoid(z))
 *   y = keep ? a * (1/(1-p)) : 0   (dropout, p > 0: keep = uniform(seed, step, purpose, i0 + i)
 *                                   >= p, the mask of cpu_dropout_fwd; p = 0: y = a)
 * with i the element's index in x. Every step is the arithmetic of the unfused op it replaces
 * (add_nc, group_norm, silu, dropout), so in fp32 y has the unfused chain's bits.
 *
 * Backward. From dy, per element (z recomputed as above):
 *   dm = keep ? dy * (1/(1-p)) : 0     (dropout; dm = dy without)
 *   dz = dm * s (1 + z (1 - s)), s = 1 / (1 + expf(-z))   (silu'; dz = dm without)
 * then group_norm's backward of dz, with xhat = (u - mean) * rstd and dxhat = dz * gamma[c]:
 *   dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))     (means per group)
 *   dgamma[c] = sum over n, hw of dz * xhat,  dbeta[c] = sum over n, hw of dz
 *   dv[n,c] = sum over hw of dx (the add's adjoint: dx is also the gradient of x)
 * dz goes through the fp32 value the unfused silu_bwd would have stored, so again fp32 gives the
 * unfused bits.
 *
 * Order. Group sums run hw outer, channel inner; channel sums run n outer, hw inner; dv's sums
 * hw in increasing order; all in double. Groups (and channels) are handled a block at a time
 * so the loops read contiguous runs of each NHWC row; the block size does not change any sum's
 * order.
 */
#include "common/philox.h"
#include "common/sg_base.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/scratch.h"

#include <math.h>
#include <string.h>

/* Groups per block: enough to cover about SG_CPU_CBLK channels, at most SG_CPU_CBLK groups. */
static int groups_per_block(int cg) {
    return cg >= SG_CPU_CBLK ? 1 : SG_CPU_CBLK / cg;
}

/* The keep scale 1/(1-p) in float, exactly as cpu_dropout_fwd computes it. */
static float drop_scale(float p) {
    return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
}

/* u at channel c of the row starting at offset `off` of x (vn: that sample's v, or NULL) */
static inline float u_at(const float *x, const float *vn, int64_t off, int c) {
    return vn ? x[off + c] + vn[c] : x[off + c];
}

void cpu_norm_act_stats(float *mean, float *rstd, const float *x, const float *v, int N, int HW,
                        int C, int G, float eps) {
    SG_ASSERT(G > 0 && C % G == 0 && HW > 0);
    int cg = C / G, gpb = groups_per_block(cg);
    double cnt = (double)HW * cg;
    for (int n = 0; n < N; n++) {
        const int64_t base = (int64_t)n * HW * C;
        const float *vn = v ? v + (int64_t)n * C : NULL;
        for (int g0 = 0; g0 < G; g0 += gpb) {
            int gb = G - g0 < gpb ? G - g0 : gpb;
            double sum[SG_CPU_CBLK] = {0}, ssd[SG_CPU_CBLK] = {0}, mu[SG_CPU_CBLK];
            for (int64_t hw = 0; hw < HW; hw++) {
                const int64_t off = base + hw * C;
                for (int j = 0; j < gb; j++)
                    for (int c = 0; c < cg; c++) sum[j] += u_at(x, vn, off, (g0 + j) * cg + c);
            }
            for (int j = 0; j < gb; j++) mu[j] = sum[j] / cnt;
            for (int64_t hw = 0; hw < HW; hw++) {
                const int64_t off = base + hw * C;
                for (int j = 0; j < gb; j++) {
                    for (int c = 0; c < cg; c++) {
                        double d = u_at(x, vn, off, (g0 + j) * cg + c) - mu[j];
                        ssd[j] += d * d;
                    }
                }
            }
            for (int j = 0; j < gb; j++) {
                mean[n * G + g0 + j] = (float)mu[j];
                rstd[n * G + g0 + j] = (float)(1.0 / sqrt(ssd[j] / cnt + (double)eps));
            }
        }
    }
}

/* The dropout over one row of C values, in place: a[c] kept (times scale) where
 * sg_rng_dropout(seed, step, purpose, i0 + off + c) >= p; the uniforms drawn DROP_RUN at a time
 * on the stack. */
#define DROP_RUN 256
static void drop_row(float *a, int C, int64_t off, const cpu_norm_tail *t, float scale) {
    float u[DROP_RUN];
    for (int c0 = 0; c0 < C; c0 += DROP_RUN) {
        const int m = C - c0 < DROP_RUN ? C - c0 : DROP_RUN;
        sg_rng_dropout_run(u, m, t->seed, t->step, t->purpose, t->i0 + (uint64_t)(off + c0));
        for (int c = 0; c < m; c++) a[c0 + c] = u[c] >= t->p ? a[c0 + c] * scale : 0.0f;
    }
}

/* The tail (activation, dropout) over one row of C values, in place; i0 + off: the row's first
 * element's dropout index. */
static void tail_fwd_row(float *a, int C, int64_t off, const cpu_norm_tail *t, float scale) {
    if (t->act == SG_ACT_SILU)
        for (int c = 0; c < C; c++) a[c] = a[c] / (1.0f + expf(-a[c]));
    if (t->p > 0.0f) drop_row(a, C, off, t, scale);
}

void cpu_norm_act_apply(float *y, const float *x, const float *v, const float *mean,
                        const float *rstd, const float *gamma, const float *beta, int N, int HW,
                        int C, int G, const cpu_norm_tail *t) {
    SG_ASSERT(G > 0 && C % G == 0 && HW > 0);
    SG_ASSERT(t->act == SG_ACT_NONE || t->act == SG_ACT_SILU);
    const int cg = C / G;
    const float scale = drop_scale(t->p);
    for (int n = 0; n < N; n++) {
        const float *vn = v ? v + (int64_t)n * C : NULL;
        for (int64_t hw = 0; hw < HW; hw++) {
            const int64_t off = ((int64_t)n * HW + hw) * C;
            float *yr = y + off;
            const float *xr = x + off;
            for (int g = 0; g < G; g++) {
                const float mu = mean[n * G + g], rs = rstd[n * G + g];
                for (int c = g * cg; c < (g + 1) * cg; c++)
                    yr[c] = ((vn ? xr[c] + vn[c] : xr[c]) - mu) * rs * gamma[c] + beta[c];
            }
            tail_fwd_row(yr, C, off, t, scale);
        }
    }
}

void cpu_norm_act_fwd(float *y, float *mean, float *rstd, const float *x, const float *v,
                      const float *gamma, const float *beta, int N, int HW, int C, int G, float eps,
                      const cpu_norm_tail *t) {
    cpu_norm_act_stats(mean, rstd, x, v, N, HW, C, G, eps);
    cpu_norm_act_apply(y, x, v, mean, rstd, gamma, beta, N, HW, C, G, t);
}

/* group_norm's backward of dz (held in dx on entry; dx on return), with x + v as the
 * normalised input. dgamma and dbeta come first: they read dz, which the dx pass overwrites
 * group by group (each group's two means are summed before any of its dx is written, and no
 * group reads another's). */
static void gn_bwd_inplace(float *dx, float *dgamma, float *dbeta, const float *x, const float *v,
                           const float *mean, const float *rstd, const float *gamma, int N, int HW,
                           int C, int G) {
    int cg = C / G, gpb = groups_per_block(cg);
    double cnt = (double)HW * cg;
    const float *dz = dx;

    /* dgamma, dbeta: per channel over all (n, hw), a block of channels at a time. */
    for (int c0 = 0; c0 < C; c0 += SG_CPU_CBLK) {
        int cb = C - c0 < SG_CPU_CBLK ? C - c0 : SG_CPU_CBLK;
        double sg[SG_CPU_CBLK] = {0}, sb[SG_CPU_CBLK] = {0};
        for (int n = 0; n < N; n++) {
            const float *vn = v ? v + (int64_t)n * C : NULL;
            for (int64_t hw = 0; hw < HW; hw++) {
                int64_t off = ((int64_t)n * HW + hw) * C;
                for (int c = 0; c < cb; c++) {
                    int g = n * G + (c0 + c) / cg;
                    double xhat = ((double)u_at(x, vn, off, c0 + c) - mean[g]) * rstd[g];
                    sg[c] += (double)dz[off + c0 + c] * xhat;
                    sb[c] += dz[off + c0 + c];
                }
            }
        }
        for (int c = 0; c < cb; c++) {
            dgamma[c0 + c] = (float)sg[c];
            dbeta[c0 + c] = (float)sb[c];
        }
    }

    /* dx: per group, the two means of the formula above, then one elementwise pass. */
    for (int n = 0; n < N; n++) {
        const int64_t base = (int64_t)n * HW * C;
        const float *vn = v ? v + (int64_t)n * C : NULL;
        for (int g0 = 0; g0 < G; g0 += gpb) {
            int gb = G - g0 < gpb ? G - g0 : gpb;
            double s_dxhat[SG_CPU_CBLK] = {0}, s_dxhat_xhat[SG_CPU_CBLK] = {0};
            for (int64_t hw = 0; hw < HW; hw++) {
                int64_t off = base + hw * C;
                for (int j = 0; j < gb; j++) {
                    double mu = mean[n * G + g0 + j], rs = rstd[n * G + g0 + j];
                    for (int c = 0; c < cg; c++) {
                        int ch = (g0 + j) * cg + c;
                        double xhat = ((double)u_at(x, vn, off, ch) - mu) * rs;
                        double dxhat = (double)dz[off + ch] * gamma[ch];
                        s_dxhat[j] += dxhat;
                        s_dxhat_xhat[j] += dxhat * xhat;
                    }
                }
            }
            for (int j = 0; j < gb; j++) {
                double mu = mean[n * G + g0 + j], rs = rstd[n * G + g0 + j];
                double m1 = s_dxhat[j] / cnt, m2 = s_dxhat_xhat[j] / cnt;
                for (int64_t hw = 0; hw < HW; hw++) {
                    int64_t off = base + hw * C;
                    for (int c = 0; c < cg; c++) {
                        int ch = (g0 + j) * cg + c;
                        double xhat = ((double)u_at(x, vn, off, ch) - mu) * rs;
                        double dxhat = (double)dz[off + ch] * gamma[ch];
                        dx[off + ch] = (float)(rs * (dxhat - m1 - xhat * m2));
                    }
                }
            }
        }
    }
}

void cpu_norm_act_bwd(float *dx, float *dv, float *dgamma, float *dbeta, const float *dy,
                      const float *x, const float *v, const float *mean, const float *rstd,
                      const float *gamma, const float *beta, int N, int HW, int C, int G,
                      const cpu_norm_tail *t) {
    SG_ASSERT(G > 0 && C % G == 0 && HW > 0);
    SG_ASSERT(t->act == SG_ACT_NONE || t->act == SG_ACT_SILU);
    SG_ASSERT(!dv || v);
    const int cg = C / G;
    const float scale = drop_scale(t->p);
    /* dz into dx: the dropout's and the activation's backward, element by element */
    for (int n = 0; n < N; n++) {
        const float *vn = v ? v + (int64_t)n * C : NULL;
        for (int64_t hw = 0; hw < HW; hw++) {
            const int64_t off = ((int64_t)n * HW + hw) * C;
            float *d = dx + off;
            const float *xr = x + off;
            for (int c = 0; c < C; c++) d[c] = dy[off + c];
            if (t->p > 0.0f) drop_row(d, C, off, t, scale);
            if (t->act == SG_ACT_SILU)
                for (int g = 0; g < G; g++) {
                    const float mu = mean[n * G + g], rs = rstd[n * G + g];
                    for (int c = g * cg; c < (g + 1) * cg; c++) {
                        float z = ((vn ? xr[c] + vn[c] : xr[c]) - mu) * rs * gamma[c] + beta[c];
                        float s = 1.0f / (1.0f + expf(-z));
                        d[c] = d[c] * (s * (1.0f + z * (1.0f - s)));
                    }
                }
        }
    }
    gn_bwd_inplace(dx, dgamma, dbeta, x, v, mean, rstd, gamma, N, HW, C, G);
    if (dv)
        for (int n = 0; n < N; n++)
            sg_cpu_colsum(dv + (int64_t)n * C, dx + (int64_t)n * HW * C, HW, C, C);
}

/* ---- group_norm: norm_act without the add, the activation and the dropout */

static const cpu_norm_tail plain = {.act = SG_ACT_NONE};

void cpu_group_norm_fwd(float *y, float *mean, float *rstd, const float *x, const float *gamma,
                        const float *beta, int N, int HW, int C, int G, float eps) {
    cpu_norm_act_fwd(y, mean, rstd, x, NULL, gamma, beta, N, HW, C, G, eps, &plain);
}

void cpu_group_norm_bwd(float *dx, float *dgamma, float *dbeta, const float *dy, const float *x,
                        const float *mean, const float *rstd, const float *gamma, int N, int HW,
                        int C, int G) {
    SG_ASSERT(G > 0 && C % G == 0 && HW > 0);
    memcpy(dx, dy, sizeof(float) * (size_t)((int64_t)N * HW * C));
    gn_bwd_inplace(dx, dgamma, dbeta, x, NULL, mean, rstd, gamma, N, HW, C, G);
}
