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

/* The passes below run as tasks on the CPU kernels' pool (sg_cpu_parallel): a task owns whole
 * sums (a sample's group block, a channel block) or whole rows, so every value is computed by
 * one thread in the order above, whatever the thread count: the same bits. */

/* rows a task of the elementwise passes takes */
#define NORM_TASK_ROWS 64
/* channels a task of the dgamma / dbeta sums takes (each channel's sum is one chain whatever
 * the block: the width only spreads the channels over the threads) */
#define NORM_TASK_CH 16

typedef struct {
    float *y, *dx, *mean, *rstd, *dgamma, *dbeta, *dv;
    const float *x, *v, *dy, *gamma, *beta, *cmean, *crstd;
    const cpu_norm_tail *t;
    int N, HW, C, G, cg, gpb, nblk;
    float eps, scale;
} norm_job;

/* the shape and the operands every pass reads (mean, rstd: the statistics it applies) */
static norm_job norm_job_of(const float *x, const float *v, const float *mean, const float *rstd,
                            const float *gamma, const float *beta, int N, int HW, int C, int G) {
    norm_job k;
    memset(&k, 0, sizeof k);
    k.x = x, k.v = v, k.cmean = mean, k.crstd = rstd, k.gamma = gamma, k.beta = beta;
    k.N = N, k.HW = HW, k.C = C, k.G = G, k.cg = C / G, k.gpb = groups_per_block(k.cg);
    k.nblk = (G + k.gpb - 1) / k.gpb;
    return k;
}

/* task j: sample j / nblk, its groups' block j % nblk */
static void stats_task(const void *ctx, int j) {
    const norm_job *k = ctx;
    const int n = j / k->nblk, g0 = j % k->nblk * k->gpb, HW = k->HW, C = k->C, cg = k->cg;
    const int gb = k->G - g0 < k->gpb ? k->G - g0 : k->gpb;
    const double cnt = (double)HW * cg;
    const int64_t base = (int64_t)n * HW * C;
    const float *x = k->x, *vn = k->v ? k->v + (int64_t)n * C : NULL;
    double sum[SG_CPU_CBLK] = {0}, ssd[SG_CPU_CBLK] = {0}, mu[SG_CPU_CBLK];
    for (int64_t hw = 0; hw < HW; hw++) {
        const int64_t off = base + hw * C;
        for (int jj = 0; jj < gb; jj++)
            for (int c = 0; c < cg; c++) sum[jj] += u_at(x, vn, off, (g0 + jj) * cg + c);
    }
    for (int jj = 0; jj < gb; jj++) mu[jj] = sum[jj] / cnt;
    for (int64_t hw = 0; hw < HW; hw++) {
        const int64_t off = base + hw * C;
        for (int jj = 0; jj < gb; jj++) {
            for (int c = 0; c < cg; c++) {
                double d = u_at(x, vn, off, (g0 + jj) * cg + c) - mu[jj];
                ssd[jj] += d * d;
            }
        }
    }
    for (int jj = 0; jj < gb; jj++) {
        k->mean[n * k->G + g0 + jj] = (float)mu[jj];
        k->rstd[n * k->G + g0 + jj] = (float)(1.0 / sqrt(ssd[jj] / cnt + (double)k->eps));
    }
}

void cpu_norm_act_stats(float *mean, float *rstd, const float *x, const float *v, int N, int HW,
                        int C, int G, float eps) {
    SG_ASSERT(G > 0 && C % G == 0 && HW > 0);
    norm_job k = norm_job_of(x, v, NULL, NULL, NULL, NULL, N, HW, C, G);
    k.mean = mean, k.rstd = rstd, k.eps = eps;
    sg_cpu_parallel(N * k.nblk, stats_task, &k);
}

/* The dropout over the n values from offset `off` of x, in place: a[i] kept (times scale) where
 * sg_rng_dropout(seed, step, purpose, i0 + off + i) >= p; the uniforms drawn DROP_RUN at a time
 * on the stack (a task's whole run of rows at once: whole Philox lane blocks). */
#define DROP_RUN 256
static void drop_run(float *a, int64_t n, int64_t off, const cpu_norm_tail *t, float scale) {
    const float p = t->p;
    float u[DROP_RUN];
    for (int64_t i0 = 0; i0 < n; i0 += DROP_RUN) {
        const int m = n - i0 < DROP_RUN ? (int)(n - i0) : DROP_RUN;
        sg_rng_dropout_run(u, m, t->seed, t->step, t->purpose, t->i0 + (uint64_t)(off + i0));
        for (int i = 0; i < m; i++) a[i0 + i] = sg_cpu_keep_or_zero(a[i0 + i] * scale, u[i] >= p);
    }
}

/* The tail (activation, dropout) over the n values from offset `off` of x, in place. */
static void tail_fwd(float *a, int64_t n, int64_t off, const cpu_norm_tail *t, float scale) {
    if (t->act == SG_ACT_SILU)
        for (int64_t i = 0; i < n; i++) a[i] = a[i] / (1.0f + expf(-a[i]));
    if (t->p > 0.0f) drop_run(a, n, off, t, scale);
}

/* task j's rows [*r0, *r1): [j NORM_TASK_ROWS, ...) of the N HW rows */
static void task_rows(const norm_job *k, int j, int64_t *r0, int64_t *r1) {
    const int64_t rows = (int64_t)k->N * k->HW;
    *r0 = (int64_t)j * NORM_TASK_ROWS;
    *r1 = rows - *r0 < NORM_TASK_ROWS ? rows : *r0 + NORM_TASK_ROWS;
}

static void apply_task(const void *ctx, int j) {
    const norm_job *k = ctx;
    int64_t r0, r1;
    task_rows(k, j, &r0, &r1);
    const int C = k->C, G = k->G, cg = k->cg;
    for (int64_t r = r0; r < r1; r++) {
        const int n = (int)(r / k->HW);
        const float *vn = k->v ? k->v + (int64_t)n * C : NULL;
        const int64_t off = r * C;
        float *yr = k->y + off;
        const float *xr = k->x + off;
        for (int g = 0; g < G; g++) {
            const float mu = k->cmean[n * G + g], rs = k->crstd[n * G + g];
            for (int c = g * cg; c < (g + 1) * cg; c++)
                yr[c] = ((vn ? xr[c] + vn[c] : xr[c]) - mu) * rs * k->gamma[c] + k->beta[c];
        }
    }
    tail_fwd(k->y + r0 * C, (r1 - r0) * C, r0 * C, k->t, k->scale);
}

static int row_tasks(int N, int HW) {
    return (int)(((int64_t)N * HW + NORM_TASK_ROWS - 1) / NORM_TASK_ROWS);
}

void cpu_norm_act_apply(float *y, const float *x, const float *v, const float *mean,
                        const float *rstd, const float *gamma, const float *beta, int N, int HW,
                        int C, int G, const cpu_norm_tail *t) {
    SG_ASSERT(G > 0 && C % G == 0 && HW > 0);
    SG_ASSERT(t->act == SG_ACT_NONE || t->act == SG_ACT_SILU);
    norm_job k = norm_job_of(x, v, mean, rstd, gamma, beta, N, HW, C, G);
    k.y = y, k.t = t, k.scale = drop_scale(t->p);
    sg_cpu_parallel(row_tasks(N, HW), apply_task, &k);
}

void cpu_norm_act_fwd(float *y, float *mean, float *rstd, const float *x, const float *v,
                      const float *gamma, const float *beta, int N, int HW, int C, int G, float eps,
                      const cpu_norm_tail *t) {
    cpu_norm_act_stats(mean, rstd, x, v, N, HW, C, G, eps);
    cpu_norm_act_apply(y, x, v, mean, rstd, gamma, beta, N, HW, C, G, t);
}

/* dgamma, dbeta: task j takes channels [j NORM_TASK_CH, ...), each summed over all (n, hw), n
 * outer (dz is dx: read before the dx tasks run) */
static void dgb_task(const void *ctx, int j) {
    const norm_job *k = ctx;
    const int c0 = j * NORM_TASK_CH, cb = k->C - c0 < NORM_TASK_CH ? k->C - c0 : NORM_TASK_CH;
    const int C = k->C, G = k->G, cg = k->cg;
    const float *dz = k->dx;
    double sg[NORM_TASK_CH] = {0}, sb[NORM_TASK_CH] = {0}, mu[NORM_TASK_CH], rs[NORM_TASK_CH];
    for (int n = 0; n < k->N; n++) {
        const float *vn = k->v ? k->v + (int64_t)n * C : NULL;
        for (int c = 0; c < cb; c++) {
            const int g = n * G + (c0 + c) / cg;
            mu[c] = k->cmean[g], rs[c] = k->crstd[g];
        }
        for (int64_t hw = 0; hw < k->HW; hw++) {
            const int64_t off = ((int64_t)n * k->HW + hw) * C;
            for (int c = 0; c < cb; c++) {
                const double xhat = ((double)u_at(k->x, vn, off, c0 + c) - mu[c]) * rs[c];
                sg[c] += (double)dz[off + c0 + c] * xhat;
                sb[c] += dz[off + c0 + c];
            }
        }
    }
    for (int c = 0; c < cb; c++) {
        k->dgamma[c0 + c] = (float)sg[c];
        k->dbeta[c0 + c] = (float)sb[c];
    }
}

/* dx: task j takes sample j / nblk's groups' block j % nblk: the two means of the formula
 * above, then one elementwise pass (the block's dz is read before any of its dx is written, and
 * no block reads another's) */
static void dx_task(const void *ctx, int j) {
    const norm_job *k = ctx;
    const int n = j / k->nblk, g0 = j % k->nblk * k->gpb, HW = k->HW, C = k->C, G = k->G;
    const int cg = k->cg, gb = G - g0 < k->gpb ? G - g0 : k->gpb;
    const double cnt = (double)HW * cg;
    const int64_t base = (int64_t)n * HW * C;
    const float *vn = k->v ? k->v + (int64_t)n * C : NULL, *x = k->x, *gamma = k->gamma;
    float *dx = k->dx;
    double s_dxhat[SG_CPU_CBLK] = {0}, s_dxhat_xhat[SG_CPU_CBLK] = {0};
    for (int64_t hw = 0; hw < HW; hw++) {
        int64_t off = base + hw * C;
        for (int jj = 0; jj < gb; jj++) {
            double mu = k->cmean[n * G + g0 + jj], rs = k->crstd[n * G + g0 + jj];
            for (int c = 0; c < cg; c++) {
                int ch = (g0 + jj) * cg + c;
                double xhat = ((double)u_at(x, vn, off, ch) - mu) * rs;
                double dxhat = (double)dx[off + ch] * gamma[ch];
                s_dxhat[jj] += dxhat;
                s_dxhat_xhat[jj] += dxhat * xhat;
            }
        }
    }
    for (int jj = 0; jj < gb; jj++) {
        double mu = k->cmean[n * G + g0 + jj], rs = k->crstd[n * G + g0 + jj];
        double m1 = s_dxhat[jj] / cnt, m2 = s_dxhat_xhat[jj] / cnt;
        for (int64_t hw = 0; hw < HW; hw++) {
            int64_t off = base + hw * C;
            for (int c = 0; c < cg; c++) {
                int ch = (g0 + jj) * cg + c;
                double xhat = ((double)u_at(x, vn, off, ch) - mu) * rs;
                double dxhat = (double)dx[off + ch] * gamma[ch];
                dx[off + ch] = (float)(rs * (dxhat - m1 - xhat * m2));
            }
        }
    }
}

/* group_norm's backward of dz (held in dx on entry; dx on return), with x + v as the
 * normalised input: dgamma and dbeta first (they read dz, which the dx tasks overwrite), then
 * dx. */
static void gn_bwd_inplace(float *dx, float *dgamma, float *dbeta, const float *x, const float *v,
                           const float *mean, const float *rstd, const float *gamma, int N, int HW,
                           int C, int G) {
    norm_job k = norm_job_of(x, v, mean, rstd, gamma, NULL, N, HW, C, G);
    k.dx = dx, k.dgamma = dgamma, k.dbeta = dbeta;
    sg_cpu_parallel((C + NORM_TASK_CH - 1) / NORM_TASK_CH, dgb_task, &k);
    sg_cpu_parallel(N * k.nblk, dx_task, &k);
}

/* dz into dx, task j's rows: the dropout's and the activation's backward, element by element */
static void dz_task(const void *ctx, int j) {
    const norm_job *k = ctx;
    int64_t r0, r1;
    task_rows(k, j, &r0, &r1);
    const int C = k->C, G = k->G, cg = k->cg;
    const cpu_norm_tail *t = k->t;
    memmove(k->dx + r0 * C, k->dy + r0 * C, sizeof(float) * (size_t)((r1 - r0) * C));
    if (t->p > 0.0f) drop_run(k->dx + r0 * C, (r1 - r0) * C, r0 * C, t, k->scale);
    if (t->act == SG_ACT_SILU)
        for (int64_t r = r0; r < r1; r++) {
            const int n = (int)(r / k->HW);
            const float *vn = k->v ? k->v + (int64_t)n * C : NULL;
            const int64_t off = r * C;
            float *d = k->dx + off;
            const float *xr = k->x + off;
            for (int g = 0; g < G; g++) {
                const float mu = k->cmean[n * G + g], rs = k->crstd[n * G + g];
                for (int c = g * cg; c < (g + 1) * cg; c++) {
                    float z = ((vn ? xr[c] + vn[c] : xr[c]) - mu) * rs * k->gamma[c] + k->beta[c];
                    float s = 1.0f / (1.0f + expf(-z));
                    d[c] = d[c] * (s * (1.0f + z * (1.0f - s)));
                }
            }
        }
}

/* dv[n] = the column sums of sample n's dx */
static void dv_task(const void *ctx, int n) {
    const norm_job *k = ctx;
    sg_cpu_colsum(k->dv + (int64_t)n * k->C, k->dx + (int64_t)n * k->HW * k->C, k->HW, k->C, k->C);
}

void cpu_norm_act_bwd(float *dx, float *dv, float *dgamma, float *dbeta, const float *dy,
                      const float *x, const float *v, const float *mean, const float *rstd,
                      const float *gamma, const float *beta, int N, int HW, int C, int G,
                      const cpu_norm_tail *t) {
    SG_ASSERT(G > 0 && C % G == 0 && HW > 0);
    SG_ASSERT(t->act == SG_ACT_NONE || t->act == SG_ACT_SILU);
    SG_ASSERT(!dv || v);
    norm_job k = norm_job_of(x, v, mean, rstd, gamma, beta, N, HW, C, G);
    k.dx = dx, k.dv = dv, k.dy = dy, k.t = t, k.scale = drop_scale(t->p);
    sg_cpu_parallel(row_tasks(N, HW), dz_task, &k);
    gn_bwd_inplace(dx, dgamma, dbeta, x, v, mean, rstd, gamma, N, HW, C, G);
    if (dv) sg_cpu_parallel(N, dv_task, &k);
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
