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

void cpu_adamw(float *p, float *m, float *v, const float *grad, int64_t n, const float *scale,
               int64_t step, float lr, float b1, float b2, float eps, float wd, int warmup,
               const sg_lr_sched *sched, float *lr_out) {
    double k = (double)step + 1.0;
    double lr_t = sg_lr_at((double)lr, step + 1, warmup, sched ? sched->schedule : SG_LR_CONSTANT,
                           sched ? sched->decay_steps : 0, sched ? sched->lr_min : 0.0);
    double bc1 = 1.0 - pow((double)b1, k), bc2 = 1.0 - pow((double)b2, k);
    double gs = scale ? (double)scale[0] : 1.0; /* NULL scale: no clipping */
    double db1 = b1, db2 = b2, deps = eps, dwd = wd;
    for (int64_t i = 0; i < n; i++) {
        double g = (double)grad[i] * gs;
        double mi = db1 * m[i] + (1.0 - db1) * g;
        double vi = db2 * v[i] + (1.0 - db2) * g * g;
        double pi = p[i];
        pi -= lr_t * ((mi / bc1) / (sqrt(vi / bc2) + deps) + dwd * pi);
        m[i] = (float)mi;
        v[i] = (float)vi;
        p[i] = (float)pi;
    }
    if (lr_out) lr_out[0] = (float)lr_t;
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
    for (int64_t i = 0; i < n; i++) ema[i] = (float)(d * ema[i] + (1.0 - d) * p[i]);
}
