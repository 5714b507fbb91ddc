/* norm.c — group normalisation, forward and backward.
 *
 * Shapes: x[N,HW,C] (NHWC with the two spatial dims flattened), G groups of cg = C/G
 * consecutive channels, gamma[C], beta[C], saved mean[N,G] and rstd[N,G], y like x.
 *
 * Forward. For sample n and group g, over the cnt = HW*cg values in the group:
 *   mean = sum(x) / cnt,  var = sum((x - mean)^2) / cnt   (biased, as PyTorch)
 *   rstd = 1 / sqrt(var + eps),  xhat = (x - mean) * rstd,  y = xhat * gamma[c] + beta[c]
 * The statistics are two passes in double (no E[x^2] - E[x]^2 cancellation); mean and rstd
 * are rounded to fp32 once, saved, and used for y, so the backward sees exactly the
 * statistics the forward applied.
 *
 * Backward. With dxhat = dy * gamma[c], the chain rule through mean and rstd gives, per group,
 *   dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
 *   dgamma[c] = sum over n, hw of dy * xhat,  dbeta[c] = sum over n, hw of dy.
 *
 * Order. Group sums run hw outer, channel inner; channel sums run n outer, hw inner; all in
 * double. Groups (and channels) are handled a block at a time so the loops read contiguous
 * runs of each NHWC row; the block size does not change any sum's order.
 */
#include "common/sg_base.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/scratch.h"

#include <math.h>

/* Groups per block: enough to cover about SG_CPU_CBLK channels, at most SG_CPU_CBLK groups. */
static int groups_per_block(int cg) {
    return cg >= SG_CPU_CBLK ? 1 : SG_CPU_CBLK / cg;
}

void cpu_group_norm_fwd(float *y, float *mean, float *rstd, const float *x, const float *gamma,
                        const float *beta, int N, int HW, int C, int G, float eps) {
    SG_ASSERT(G > 0 && C % G == 0 && HW > 0);
    int cg = C / G, gpb = groups_per_block(cg);
    double cnt = (double)HW * cg;
    for (int n = 0; n < N; n++) {
        const float *xn = x + (int64_t)n * HW * C;
        float *yn = y + (int64_t)n * HW * C;
        for (int g0 = 0; g0 < G; g0 += gpb) {
            int gb = G - g0 < gpb ? G - g0 : gpb;
            double sum[SG_CPU_CBLK] = {0}, ssd[SG_CPU_CBLK] = {0}, mu[SG_CPU_CBLK];
            for (int64_t hw = 0; hw < HW; hw++) {
                const float *row = xn + hw * C + g0 * cg;
                for (int j = 0; j < gb; j++)
                    for (int c = 0; c < cg; c++) sum[j] += row[j * cg + c];
            }
            for (int j = 0; j < gb; j++) mu[j] = sum[j] / cnt;
            for (int64_t hw = 0; hw < HW; hw++) {
                const float *row = xn + hw * C + g0 * cg;
                for (int j = 0; j < gb; j++) {
                    for (int c = 0; c < cg; c++) {
                        double d = row[j * cg + c] - mu[j];
                        ssd[j] += d * d;
                    }
                }
            }
            for (int j = 0; j < gb; j++) {
                mean[n * G + g0 + j] = (float)mu[j];
                rstd[n * G + g0 + j] = (float)(1.0 / sqrt(ssd[j] / cnt + (double)eps));
            }
        }
        for (int64_t hw = 0; hw < HW; hw++) {
            const float *xr = xn + hw * C;
            float *yr = yn + hw * C;
            for (int c = 0; c < C; c++) {
                int g = n * G + c / cg;
                yr[c] = (xr[c] - mean[g]) * rstd[g] * gamma[c] + beta[c];
            }
        }
    }
}

void cpu_group_norm_bwd(float *dx, float *dgamma, float *dbeta, const float *dy, const float *x,
                        const float *mean, const float *rstd, const float *gamma, int N, int HW,
                        int C, int G) {
    SG_ASSERT(G > 0 && C % G == 0 && HW > 0);
    int cg = C / G, gpb = groups_per_block(cg);
    double cnt = (double)HW * cg;

    /* dx: per group, the two means of the formula above, then one elementwise pass. */
    for (int n = 0; n < N; n++) {
        const float *xn = x + (int64_t)n * HW * C, *dyn = dy + (int64_t)n * HW * C;
        float *dxn = dx + (int64_t)n * HW * C;
        for (int g0 = 0; g0 < G; g0 += gpb) {
            int gb = G - g0 < gpb ? G - g0 : gpb;
            double s_dxhat[SG_CPU_CBLK] = {0}, s_dxhat_xhat[SG_CPU_CBLK] = {0};
            for (int64_t hw = 0; hw < HW; hw++) {
                int64_t off = hw * C + g0 * cg;
                for (int j = 0; j < gb; j++) {
                    double mu = mean[n * G + g0 + j], rs = rstd[n * G + g0 + j];
                    for (int c = 0; c < cg; c++) {
                        int ch = (g0 + j) * cg + c;
                        double xhat = ((double)xn[off + j * cg + c] - mu) * rs;
                        double dxhat = (double)dyn[off + j * cg + c] * gamma[ch];
                        s_dxhat[j] += dxhat;
                        s_dxhat_xhat[j] += dxhat * xhat;
                    }
                }
            }
            for (int j = 0; j < gb; j++) {
                double mu = mean[n * G + g0 + j], rs = rstd[n * G + g0 + j];
                double m1 = s_dxhat[j] / cnt, m2 = s_dxhat_xhat[j] / cnt;
                for (int64_t hw = 0; hw < HW; hw++) {
                    int64_t off = hw * C + (g0 + j) * cg;
                    for (int c = 0; c < cg; c++) {
                        int ch = (g0 + j) * cg + c;
                        double xhat = ((double)xn[off + c] - mu) * rs;
                        double dxhat = (double)dyn[off + c] * gamma[ch];
                        dxn[off + c] = (float)(rs * (dxhat - m1 - xhat * m2));
                    }
                }
            }
        }
    }

    /* dgamma, dbeta: per channel over all (n, hw), a block of channels at a time. */
    for (int c0 = 0; c0 < C; c0 += SG_CPU_CBLK) {
        int cb = C - c0 < SG_CPU_CBLK ? C - c0 : SG_CPU_CBLK;
        double sg[SG_CPU_CBLK] = {0}, sb[SG_CPU_CBLK] = {0};
        for (int n = 0; n < N; n++) {
            for (int64_t hw = 0; hw < HW; hw++) {
                int64_t off = ((int64_t)n * HW + hw) * C + c0;
                for (int c = 0; c < cb; c++) {
                    int g = n * G + (c0 + c) / cg;
                    double xhat = ((double)x[off + c] - mean[g]) * rstd[g];
                    sg[c] += (double)dy[off + c] * xhat;
                    sb[c] += dy[off + c];
                }
            }
        }
        for (int c = 0; c < cb; c++) {
            dgamma[c0 + c] = (float)sg[c];
            dbeta[c0 + c] = (float)sb[c];
        }
    }
}
