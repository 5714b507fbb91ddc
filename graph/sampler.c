/* sampler.c — DDPM ancestral and DDIM sampling (the math and conventions are in sampler.h).
 *
 * Shapes: one batch of images is x[B][H][W][C] (NHWC, the plan's x_t layout), per = H*W*C
 * values each; the update math is elementwise, so it treats the batch as B*per flat values.
 */
#include "graph/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/philox.h"
#include "kernels/cpu/cpu_kernels.h"

/* clamp to [-1, 1]; NaN passes through (a broken model stays visible) */
static double clamp1(double v) {
    return v < -1.0 ? -1.0 : v > 1.0 ? 1.0 : v;
}

void sg_ddpm_step(float *x_prev, const float *x_t, const float *eps, const float *z, int64_t n,
                  int t, int T, double beta1, double betaT, int clip) {
    double beta = sg_ddpm_beta(t, T, beta1, betaT), alpha = 1.0 - beta;
    double abar = sg_ddpm_abar(t, T, beta1, betaT);
    double abar_prev = t > 0 ? sg_ddpm_abar(t - 1, T, beta1, betaT) : 1.0;
    /* posterior variance beta~_t; exactly 0 at t = 0 (abar_prev = 1) */
    double sigma = sqrt(beta * (1.0 - abar_prev) / (1.0 - abar));
    int noise = t > 0 && z != NULL;
    if (!clip) {
        /* Algorithm 2: 1/sqrt(alpha_t) (x_t - beta_t / sqrt(1 - abar_t) eps) + sigma_t z */
        double inv_sqrt_alpha = 1.0 / sqrt(alpha), k_eps = beta / sqrt(1.0 - abar);
        for (int64_t i = 0; i < n; i++) {
            double mu = inv_sqrt_alpha * ((double)x_t[i] - k_eps * (double)eps[i]);
            x_prev[i] = (float)(noise ? mu + sigma * (double)z[i] : mu);
        }
        return;
    }
    /* x0-parameterised posterior mean with x0_pred clamped to [-1, 1] */
    double sqrt_abar = sqrt(abar), sqrt_1m_abar = sqrt(1.0 - abar);
    double c_x0 = sqrt(abar_prev) * beta / (1.0 - abar);
    double c_xt = sqrt(alpha) * (1.0 - abar_prev) / (1.0 - abar);
    for (int64_t i = 0; i < n; i++) {
        double x = x_t[i];
        double x0 = clamp1((x - sqrt_1m_abar * (double)eps[i]) / sqrt_abar);
        double mu = c_x0 * x0 + c_xt * x;
        x_prev[i] = (float)(noise ? mu + sigma * (double)z[i] : mu);
    }
}

void sg_ddim_step(float *x_prev, const float *x_t, const float *eps, int64_t n, int t, int t_prev,
                  int T, double beta1, double betaT, int clip) {
    double abar = sg_ddpm_abar(t, T, beta1, betaT);
    double abar_prev = t_prev >= 0 ? sg_ddpm_abar(t_prev, T, beta1, betaT) : 1.0;
    double sqrt_abar = sqrt(abar), sqrt_1m_abar = sqrt(1.0 - abar);
    double sqrt_abar_prev = sqrt(abar_prev), sqrt_1m_abar_prev = sqrt(1.0 - abar_prev);
    for (int64_t i = 0; i < n; i++) {
        double e = eps[i];
        double x0 = ((double)x_t[i] - sqrt_1m_abar * e) / sqrt_abar;
        if (clip) x0 = clamp1(x0);
        x_prev[i] = (float)(sqrt_abar_prev * x0 + sqrt_1m_abar_prev * e);
    }
}

int sg_ddim_timesteps(int S, int T, int *ts) {
    if (T < 1 || S < 1 || S > T)
        return sg_set_error("DDIM steps must be in [1, %d] (the schedule's T), got %d", T, S);
    /* numpy: np.round(np.arange(T, 0, -T / S)) - 1, element j = T + j * (-T / S) */
    double step = -(double)T / S;
    for (int j = 0; j < S; j++) ts[j] = (int)rint((double)T + j * step) - 1;
    return SG_OK;
}

typedef struct {
    float *x, *eps, *z;
    void *xin; /* x_t as the plan stores it (fp32 or bf16) */
    int32_t *tb;
    int *ts;
} sample_bufs;

static void bufs_free(sample_bufs *b) {
    free(b->x), free(b->eps), free(b->z), free(b->xin), free(b->tb), free(b->ts);
}

/* x (fp32) -> the plan's x_t tensor, rounding to bf16 when the activations are bf16 */
static int write_xt(sg_exec *e, const sample_bufs *b, int64_t count) {
    const sg_tensor *xt = &e->plan.g.t[e->plan.io.xt];
    if (xt->dtype == DT_BF16) {
        sg_bf16 *h = b->xin;
        for (int64_t i = 0; i < count; i++) h[i] = sg_f32_to_bf16(b->x[i]);
        return sg_exec_write(e, e->plan.io.xt, h);
    }
    return sg_exec_write(e, e->plan.io.xt, b->x);
}

/* the prediction as fp32 (a bf16 plan predicts in bf16, like PyTorch under autocast) */
static int read_pred(sg_exec *e, sample_bufs *b, int64_t count) {
    const sg_tensor *pred = &e->plan.g.t[e->plan.io.pred];
    if (pred->dtype == DT_F32) return sg_exec_read(e, e->plan.io.pred, b->eps);
    if (sg_exec_read(e, e->plan.io.pred, b->xin)) return SG_ERR; /* same size as bf16 x_t */
    for (int64_t i = 0; i < count; i++) b->eps[i] = sg_bf16_to_f32(((const sg_bf16 *)b->xin)[i]);
    return SG_OK;
}

int sg_sample_ex(sg_exec *e, int n_images, uint64_t seed, const sg_sample_opts *opts, float *out) {
    const sg_plan *p = &e->plan;
    const sg_model_cfg *c = &p->cfg;
    if (p->train || p->io.xt < 0 || p->io.t < 0 || p->io.pred < 0)
        return sg_set_error("sampling needs a forward-only plan (sg_exec_init with train = 0)");
    if (n_images < 1) return sg_set_error("nothing to sample: %d images", n_images);
    int S = opts->ddim_steps;
    if (S < 0 || S > c->T)
        return sg_set_error("DDIM steps must be in [1, %d] (the schedule's T), or 0 for DDPM; "
                            "got %d",
                            c->T, S);
    int ddim = S > 0, n_steps = ddim ? S : c->T;
    int clip = opts->clip < 0 ? !ddim : opts->clip != 0;
    int B = c->batch;
    int64_t per = (int64_t)c->img * c->img * c->in_ch, count = B * per;
    const sg_tensor *xt = &p->g.t[p->io.xt], *pred = &p->g.t[p->io.pred], *tt = &p->g.t[p->io.t];
    if (sg_numel(xt) != count || sg_numel(pred) != count || pred->dtype != xt->dtype ||
        sg_numel(tt) != B || tt->dtype != DT_I32 || (xt->dtype != DT_F32 && xt->dtype != DT_BF16))
        return sg_set_error("the plan's x_t / t / pred tensors are not [%d,%d,%d,%d] / i32[%d] / "
                            "x_t's dtype as sampling expects",
                            B, c->img, c->img, c->in_ch, B);
    double beta1 = c->beta1, betaT = c->betaT;

    sample_bufs b = {0};
    b.x = malloc((size_t)count * sizeof(float));
    b.eps = malloc((size_t)count * sizeof(float));
    b.z = malloc((size_t)count * sizeof(float));
    b.xin = malloc((size_t)xt->bytes);
    b.tb = malloc((size_t)B * sizeof(int32_t));
    b.ts = malloc((size_t)n_steps * sizeof(int));
    if (!b.x || !b.eps || !b.z || !b.xin || !b.tb || !b.ts) {
        bufs_free(&b);
        return sg_set_error("out of host memory for a sampling batch of %d images", B);
    }
    if (ddim) {
        if (sg_ddim_timesteps(S, c->T, b.ts)) return bufs_free(&b), SG_ERR;
    } else {
        for (int k = 0; k < n_steps; k++) b.ts[k] = c->T - 1 - k;
    }

    int rc = SG_OK;
    for (int b0 = 0; b0 < n_images && !rc; b0 += B) {
        int nb = n_images - b0 < B ? n_images - b0 : B;
        /* x_T ~ N(0, I): step T, index = image of the run * per + element */
        uint64_t first = (uint64_t)b0 * (uint64_t)per;
        for (int64_t i = 0; i < count; i++)
            b.x[i] = sg_rng_normal(seed, c->T, SG_RNG_SAMPLE, first + (uint64_t)i);
        for (int k = 0; k < n_steps && !rc; k++) {
            int t = b.ts[k];
            for (int j = 0; j < B; j++) b.tb[j] = t;
            /* sg_exec_step runs the whole forward plan: on the CUDA backend the first call runs
             * it eagerly and captures it into a graph, every later denoising step replays that
             * graph (x_t and t live at fixed arena offsets, so the replay reads each step's) */
            if (write_xt(e, &b, count) || sg_exec_write(e, p->io.t, b.tb) || sg_exec_step(e) ||
                read_pred(e, &b, count)) {
                rc = SG_ERR;
                break;
            }
            if (ddim) {
                int t_prev = k + 1 < n_steps ? b.ts[k + 1] : -1;
                sg_ddim_step(b.x, b.x, b.eps, count, t, t_prev, c->T, beta1, betaT, clip);
            } else {
                if (t > 0)
                    for (int64_t i = 0; i < count; i++)
                        b.z[i] = sg_rng_normal(seed, t, SG_RNG_SAMPLE, first + (uint64_t)i);
                sg_ddpm_step(b.x, b.x, b.eps, t > 0 ? b.z : NULL, count, t, c->T, beta1, betaT,
                             clip);
            }
            if (opts->progress)
                opts->progress(opts->progress_ctx, b0, nb, n_images, k + 1, n_steps, t);
            if (opts->cancel && *opts->cancel) rc = sg_set_error("sampling interrupted");
        }
        for (int64_t i = 0; i < nb * per && !rc; i++)
            out[b0 * per + i] = isfinite(b.x[i]) ? (float)clamp1((double)b.x[i]) : b.x[i];
    }
    bufs_free(&b);
    return rc;
}

int sg_sample(sg_exec *e, int n_images, uint64_t seed, int ddim_steps, float *out,
              sg_sample_progress_fn progress, void *progress_ctx) {
    sg_sample_opts o = {
        .ddim_steps = ddim_steps, .clip = -1, .progress = progress, .progress_ctx = progress_ctx};
    return sg_sample_ex(e, n_images, seed, &o, out);
}
