/* optim.c — the optimizer step over flat parameter regions: global gradient norm, clipping
 * scale, AdamW with linear warmup, and the EMA of the weights.
 *
 * Shapes: every region is n contiguous fp32 values (the planner packs params, grads, m, v
 * and EMA each into one region, so one call covers the whole model). Scalars live in
 * one-element arrays because on the device they are arena values, not host constants.
 *
 * sumsq  out = sum g^2, blocked like loss.c: fixed-size blocks in increasing order, each
 *        summed in double, block partials summed in double.
 * clip   scale = min(1, max_norm / (sqrt(sumsq) + 1e-6)).
 * AdamW  (Loshchilov & Hutter, decoupled weight decay), at 0-based step s, k = s + 1:
 *          lr_t = lr * min(1, k / warmup)            (no warmup when warmup <= 0)
 *          g = grad * scale
 *          m = b1 m + (1 - b1) g,  v = b2 v + (1 - b2) g^2
 *          p -= lr_t * (mhat / (sqrt(vhat) + eps) + wd p),  mhat = m / (1 - b1^k),
 *                                                           vhat = v / (1 - b2^k)
 *        The per-step scalars (lr_t, bias corrections) are computed once in double; the
 *        per-element update is also done in double and rounded once per stored value.
 * EMA    ema = decay ema + (1 - decay) p.
 * AdamW + EMA in one pass (cpu_adamw_ema, the training step's optimizer): per element the
 *        AdamW update, then the EMA of the updated value, then its copy for the bf16 weights;
 *        the same expressions as cpu_adamw followed by cpu_ema, so the same bits.
 */
#include "kernels/cpu/cpu_kernels.h"

#include <math.h>
#include <string.h>

#define SG_SUMSQ_BLOCK 4096

void cpu_sumsq(float *out, const float *g, int64_t n) {
    double total = 0.0;
    for (int64_t b0 = 0; b0 < n; b0 += SG_SUMSQ_BLOCK) {
        int64_t b1 = n - b0 < SG_SUMSQ_BLOCK ? n : b0 + SG_SUMSQ_BLOCK;
        double part = 0.0;
        for (int64_t i = b0; i < b1; i++) part += (double)g[i] * g[i];
        total += part;
    }
    out[0] = (float)total;
}

void cpu_clip_scale(float *scale, const float *sumsq, float max_norm) {
    double norm = sqrt((double)sumsq[0]);
    double s = (double)max_norm / (norm + 1e-6);
    scale[0] = (float)(s < 1.0 ? s : 1.0);
}

/* One AdamW step's scalars, computed once in double. */
typedef struct {
    double lr_t, bc1, bc2, gs, b1, b2, eps, wd;
} adamw_step;

static adamw_step adamw_step_at(const float *scale, int64_t step, float lr, float b1, float b2,
                                float eps, float wd, int warmup, const sg_lr_sched *sched) {
    const double k = (double)step + 1.0;
    adamw_step s;
    s.lr_t = sg_lr_at((double)lr, step + 1, warmup, sched ? sched->schedule : SG_LR_CONSTANT,
                      sched ? sched->decay_steps : 0, sched ? sched->lr_min : 0.0);
    s.bc1 = 1.0 - pow((double)b1, k), s.bc2 = 1.0 - pow((double)b2, k);
    s.gs = scale ? (double)scale[0] : 1.0; /* NULL scale: no clipping */
    s.b1 = b1, s.b2 = b2, s.eps = eps, s.wd = wd;
    return s;
}

/* Element i's update: the one expression cpu_adamw and cpu_adamw_ema share, so their bits
 * agree by construction. */
static inline void adamw_update(const adamw_step *s, float *p, float *m, float *v, float grad) {
    double g = (double)grad * s->gs;
    double mi = s->b1 * *m + (1.0 - s->b1) * g;
    double vi = s->b2 * *v + (1.0 - s->b2) * g * g;
    double pi = *p;
    pi -= s->lr_t * ((mi / s->bc1) / (sqrt(vi / s->bc2) + s->eps) + s->wd * pi);
    *m = (float)mi;
    *v = (float)vi;
    *p = (float)pi;
}

/* The EMA of one element (shared likewise by cpu_ema and cpu_adamw_ema). */
static inline float ema_update(double d, float ema, float p) {
    return (float)(d * ema + (1.0 - d) * p);
}

void cpu_adamw(float *p, float *m, float *v, const float *grad, int64_t n, const float *scale,
               int64_t step, float lr, float b1, float b2, float eps, float wd, int warmup,
               const sg_lr_sched *sched, float *lr_out) {
    const adamw_step s = adamw_step_at(scale, step, lr, b1, b2, eps, wd, warmup, sched);
    for (int64_t i = 0; i < n; i++) adamw_update(&s, &p[i], &m[i], &v[i], grad[i]);
    if (lr_out) lr_out[0] = (float)s.lr_t;
}

void cpu_adamw_ema(float *p, float *m, float *v, float *ema, float *p_copy, const float *grad,
                   int64_t n, const float *scale, int64_t step, float lr, float b1, float b2,
                   float eps, float wd, int warmup, const sg_lr_sched *sched, float *lr_out,
                   float decay, const sg_ema_sched *warm) {
    const adamw_step s = adamw_step_at(scale, step, lr, b1, b2, eps, wd, warmup, sched);
    const double d = warm ? sg_ema_decay_at(decay, step, 1, warm->inv_gamma, warm->power) : decay;
    for (int64_t i = 0; i < n; i++) {
        adamw_update(&s, &p[i], &m[i], &v[i], grad[i]);
        ema[i] = ema_update(d, ema[i], p[i]); /* the updated p, as cpu_ema after cpu_adamw */
        if (p_copy) p_copy[i] = p[i];
    }
    if (lr_out) lr_out[0] = (float)s.lr_t;
}

void cpu_loss_watch(const float *loss, const float *sumsq, const void *step, void *watch,
                    float *loss_sum) {
    int64_t s, w;
    memcpy(&s, step, 8), memcpy(&w, watch, 8);
    if (!(isfinite(loss[0]) && isfinite(sumsq[0])) && w == 0) w = s + 1;
    memcpy(watch, &w, 8);
    loss_sum[0] += loss[0];
}

void cpu_ema(float *ema, const float *p, int64_t n, float decay, const sg_ema_sched *warm,
             int64_t step) {
    double d = warm ? sg_ema_decay_at(decay, step, 1, warm->inv_gamma, warm->power) : decay;
    for (int64_t i = 0; i < n; i++) ema[i] = ema_update(d, ema[i], p[i]);
}
