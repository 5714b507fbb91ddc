/* sg_schedule.h — the learning-rate schedule and the EMA warm-up, as functions of the step, in
 * double. One definition for the CPU kernels, the CUDA kernels (computed on the device inside
 * the step: nothing in the step depends on a host value) and the trainer's log lines. Also the
 * row of the DDPM noising table (the coefficients of each timestep, computed once).
 *
 * Learning rate at the 1-based step k (the optimizer step being taken), peak lr:
 *   warm-up (k < warmup):  lr * k / warmup                   (linear, as before schedules)
 *   then, t = (k - warmup) / (decay_steps - warmup) clamped to [0, 1]:
 *     constant:  lr
 *     cosine:    lr * (min + (1 - min) * (1 + cos(pi t)) / 2)
 *     linear:    lr * (1 - (1 - min) t)
 *   min is the final fraction of the peak (lr_min); decay_steps is where the decay ends.
 *
 * EMA decay at the 0-based step s being finished (the EMA runs after AdamW, before the step
 * counter moves): with warm-up off, the fixed decay; with it on, diffusers' EMAModel with
 * use_ema_warmup (diffusers/training_utils.py, EMAModel.get_decay, update_after_step = 0,
 * min_decay = 0): its optimization_step is s + 1, its `step` = optimization_step - 1 = s, and
 *   decay = 0                                             if s <= 0   (the EMA takes the weights)
 *   decay = min(max, 1 - (1 + s / inv_gamma)^(-power))    otherwise.
 */
#ifndef SG_SCHEDULE_H
#define SG_SCHEDULE_H

#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define SG_SCHED_FN __host__ __device__ static inline
#else
#define SG_SCHED_FN static inline
#endif

enum { SG_LR_CONSTANT = 0, SG_LR_COSINE = 1, SG_LR_LINEAR = 2 };

/* what a schedule needs besides the peak lr and the warm-up; the EMA warm-up's shape. Passed
 * by value to kernels, so no byte is padding: a kernel's argument bytes are recorded when a
 * graph is captured (and compared with the eager launch by the host emulation), and padding
 * bytes would be whatever the stack held. */
typedef struct {
    int64_t decay_steps;
    double lr_min;
    int32_t schedule; /* SG_LR_* */
    int32_t unused;   /* 0: makes the padding a field */
} sg_lr_sched;
typedef struct {
    double inv_gamma, power;
} sg_ema_sched;

/* The noise schedule: T steps of betas beta_0 .. beta_{T-1}, abar_t = prod_{i<=t} (1 - beta_i)
 * (kernels/cpu/cpu_kernels.h: sg_ddpm_abar, sg_ddpm_beta; docs/model.md):
 *   linear (DDPM, Ho et al. 2020):   beta_i = beta1 + (betaT - beta1) i / (T - 1)
 *   cosine (Nichol & Dhariwal 2021): beta_i = min(1 - f(i + 1) / f(i), 0.999),
 *                                    f(i) = cos((i / T + 0.008) / 1.008 * pi / 2)^2
 * cosine is improved-diffusion's get_named_beta_schedule("cosine") and diffusers'
 * "squaredcos_cap_v2"; it has no beta1 / betaT (they are kept, unused).
 * zero_snr rescales either to zero terminal SNR (Lin et al. 2024; diffusers'
 * rescale_betas_zero_snr): sqrt(abar) shifted and scaled to end at 0 (so beta_{T-1} = 1 and
 * x_{T-1} is pure noise) and to keep its start (kernels/cpu/embedding.c: the walk). */
enum { SG_BETA_LINEAR = 0, SG_BETA_COSINE = 1 };
typedef struct {
    int32_t T, schedule; /* SG_BETA_* */
    double beta1, betaT; /* linear: the first and last beta */
    int32_t zero_snr;    /* 1: rescaled to zero terminal SNR (T >= 2) */
    int32_t unused;      /* 0: the padding is a field */
} sg_betas;

/* The DDPM noising coefficients of timestep t: x_t = sqrt_abar x0 + sqrt_1m_abar eps, with
 * abar_t = prod_{i<=t} (1 - beta_i) (kernels/cpu/cpu_kernels.h: sg_ddpm_abar). The training
 * step's table, u8 [T][SG_DDPM_ROW_BYTES] (the plan's "ddpm_table"), holds row t for every
 * t < T: written once by the executor from the CPU reference (cpu_ddpm_table), read by the CUDA
 * noising kernel, so no kernel recomputes the T-long product. */
typedef struct {
    double sqrt_abar, sqrt_1m_abar;
} sg_ddpm_row;
#define SG_DDPM_ROW_BYTES 16
#ifdef __cplusplus
static_assert(sizeof(sg_ddpm_row) == SG_DDPM_ROW_BYTES, "sg_ddpm_row layout");
#else
_Static_assert(sizeof(sg_ddpm_row) == SG_DDPM_ROW_BYTES, "sg_ddpm_row layout");
#endif

SG_SCHED_FN double sg_lr_at(double lr, int64_t k, int warmup, int schedule, int64_t decay_steps,
                            double lr_min) {
    if (warmup > 0 && k < warmup) return lr * ((double)k / warmup);
    if (schedule == SG_LR_CONSTANT) return lr;
    const double span = decay_steps > warmup ? (double)(decay_steps - warmup) : 1.0;
    double t = (double)(k - warmup) / span;
    t = t < 0.0 ? 0.0 : t > 1.0 ? 1.0 : t;
    const double pi = 3.14159265358979323846;
    if (schedule == SG_LR_COSINE) return lr * (lr_min + (1.0 - lr_min) * 0.5 * (1.0 + cos(pi * t)));
    return lr * (1.0 - (1.0 - lr_min) * t);
}

SG_SCHED_FN double sg_ema_decay_at(double max_decay, int64_t s, int warmup, double inv_gamma,
                                   double power) {
    if (!warmup) return max_decay;
    if (s <= 0) return 0.0;
    const double d = 1.0 - pow(1.0 + (double)s / inv_gamma, -power);
    return d < max_decay ? d : max_decay;
}

#endif
