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
 *
 * Threads (sg_cpu_parallel): sumsq's blocks are summed by tasks, each block into its own
 * partial, and the partials then added in block order on one thread; the AdamW passes run in
 * tasks of contiguous elements. Each value is computed as above whatever the thread count.
 */
#include "common/sg_base.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/scratch.h"

#include <math.h>
#include <string.h>

#define SG_SUMSQ_BLOCK 4096

/* blocks a task of sumsq takes; elements a task of the AdamW passes takes */
#define SUMSQ_TASK_BLOCKS 64
#define ADAMW_TASK 16384

typedef struct {
    double *part;
    const float *g;
    int64_t n;
} sumsq_job;

/* task j: the partials of blocks [j SUMSQ_TASK_BLOCKS, ...) */
static void sumsq_task(const void *ctx, int j) {
    const sumsq_job *k = ctx;
    const int64_t nb = (k->n + SG_SUMSQ_BLOCK - 1) / SG_SUMSQ_BLOCK;
    const int64_t q0 = (int64_t)j * SUMSQ_TASK_BLOCKS;
    const int64_t q1 = nb - q0 < SUMSQ_TASK_BLOCKS ? nb : q0 + SUMSQ_TASK_BLOCKS;
    for (int64_t q = q0; q < q1; q++) {
        const int64_t b0 = q * SG_SUMSQ_BLOCK;
        const int64_t b1 = k->n - b0 < SG_SUMSQ_BLOCK ? k->n : b0 + SG_SUMSQ_BLOCK;
        double part = 0.0;
        for (int64_t i = b0; i < b1; i++) part += (double)k->g[i] * k->g[i];
        k->part[q] = part;
    }
}

void cpu_sumsq(float *out, const float *g, int64_t n) {
    /* the partials in the scratch buffer: 2^19 doubles, blocks of 2^31 elements */
    const int64_t nb = (n + SG_SUMSQ_BLOCK - 1) / SG_SUMSQ_BLOCK;
    SG_ASSERT(nb <= SG_CPU_SCRATCH_FLOATS / 2);
    double *part = (double *)(void *)sg_cpu_scratch_acquire();
    const sumsq_job k = {.part = part, .g = g, .n = n};
    sg_cpu_parallel((int)((nb + SUMSQ_TASK_BLOCKS - 1) / SUMSQ_TASK_BLOCKS), sumsq_task, &k);
    double total = 0.0;
    for (int64_t q = 0; q < nb; q++) total += part[q];
    sg_cpu_scratch_release();
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

typedef struct {
    adamw_step s;
    double d; /* the EMA decay */
    float *p, *m, *v, *ema, *p_copy;
    const float *grad;
    int64_t n;
} adamw_job;

/* task j: elements [j ADAMW_TASK, ...): the update, then (with ema) the EMA of the updated
 * value, as cpu_ema after cpu_adamw, then its copy */
static void adamw_task(const void *ctx, int j) {
    const adamw_job *k = ctx;
    const int64_t i0 = (int64_t)j * ADAMW_TASK;
    const int64_t i1 = k->n - i0 < ADAMW_TASK ? k->n : i0 + ADAMW_TASK;
    for (int64_t i = i0; i < i1; i++) {
        adamw_update(&k->s, &k->p[i], &k->m[i], &k->v[i], k->grad[i]);
        if (k->ema) k->ema[i] = ema_update(k->d, k->ema[i], k->p[i]);
        if (k->p_copy) k->p_copy[i] = k->p[i];
    }
}

void cpu_adamw(float *p, float *m, float *v, const float *grad, int64_t n, const float *scale,
               int64_t step, float lr, float b1, float b2, float eps, float wd, int warmup,
               const sg_lr_sched *sched, float *lr_out) {
    cpu_adamw_ema(p, m, v, NULL, NULL, grad, n, scale, step, lr, b1, b2, eps, wd, warmup, sched,
                  lr_out, 0.0f, NULL);
}

/* (ema NULL: the AdamW update alone, cpu_adamw) */
void cpu_adamw_ema(float *p, float *m, float *v, float *ema, float *p_copy, const float *grad,
                   int64_t n, const float *scale, int64_t step, float lr, float b1, float b2,
                   float eps, float wd, int warmup, const sg_lr_sched *sched, float *lr_out,
                   float decay, const sg_ema_sched *warm) {
    adamw_job k = {.s = adamw_step_at(scale, step, lr, b1, b2, eps, wd, warmup, sched)};
    k.d = warm ? sg_ema_decay_at(decay, step, 1, warm->inv_gamma, warm->power) : decay;
    k.p = p, k.m = m, k.v = v, k.ema = ema, k.p_copy = p_copy, k.grad = grad, k.n = n;
    sg_cpu_parallel((int)((n + ADAMW_TASK - 1) / ADAMW_TASK), adamw_task, &k);
    if (lr_out) lr_out[0] = (float)k.s.lr_t;
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
