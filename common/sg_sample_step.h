/* sg_sample_step.h — one denoising step of the device-resident sampler: the per-step
 * coefficient row and the per-element update, shared by the CPU reference
 * (kernels/cpu/sample_step.c) and the CUDA kernel (kernels/cuda/sample_step.cu), so that both
 * evaluate the same double-precision expressions, operation for operation, and round once.
 *
 * The math and the conventions (timesteps, schedules, clipping, Philox keys) are those of
 * graph/sampler.h, whose sg_ddpm_step / sg_ddim_step stay the reference: the row holds the
 * coefficients those functions compute for one step, by the same expressions (sg_sample_table,
 * kernels/cpu/cpu_kernels.h), and sg_sample_update is their loop body. tests/test_sampler.c
 * checks the two bit for bit at every timestep.
 *
 * The table: row k is denoising step k of the run (k = 0 evaluates t = T - 1), written once by
 * the host before the loop; rows past the last step are SG_SAMPLE_NONE (zero bytes). A step
 * counter in the arena picks the row, so a replayed CUDA graph runs step after step with
 * nothing from the host.
 *
 * Double arithmetic on the device goes through the _rn intrinsics (SG_D*): nvcc would fuse
 * a * b + c into one fma, which rounds once where the host rounds twice. Host compilers do not
 * fuse on x86-64 without -mfma (the host execution of the CUDA sources builds with
 * -ffp-contract=off).
 */
#ifndef SG_SAMPLE_STEP_H
#define SG_SAMPLE_STEP_H

#include <math.h>
#include <stdint.h>

#include "sg_base.h"

/* What row k does. NONE (0: a zeroed row) leaves x alone. */
enum {
    SG_SAMPLE_NONE = 0,
    SG_SAMPLE_DDPM = 1,      /* ancestral, Algorithm 2's mean */
    SG_SAMPLE_DDPM_CLIP = 2, /* ancestral, posterior mean of the clamped x0_pred */
    SG_SAMPLE_DDIM = 3,      /* sigma = 0 where eta = 0 */
    SG_SAMPLE_DDIM_CLIP = 4, /* x0_pred clamped */
    SG_SAMPLE_DPM2M = 5,     /* DPM-Solver++(2M): sg_sample_update_x0h, with the previous x0 */
    SG_SAMPLE_DPM2M_CLIP = 6 /* x0_pred clamped (diffusers' thresholding at ratio 1, max 1) */
};

/* The sampler a table is made for (sg_sample_table's `sampler`) */
enum { SG_TABLE_DDPM = 0, SG_TABLE_DDIM = 1, SG_TABLE_DPM2M = 2 };

/* One step's coefficients, in double, as sg_ddpm_step / sg_ddim_step compute them for it. */
typedef struct {
    int32_t kind; /* SG_SAMPLE_* */
    int32_t t;    /* the timestep this step evaluates: the model's t, and the DDPM noise key */
    /* 1: the model predicts v; its eps is sqrt_abar v + sqrt_1m_abar x (sg_sample_eps), its x0
     * sqrt_abar x - sqrt_1m_abar v (sg_sample_x0) */
    int32_t v_pred;
    int32_t order; /* DPM-Solver++(2M): 1 (the first and last steps) or 2; otherwise 0 */
    /* x0_pred = (x - sqrt_1m_abar eps) / sqrt_abar (DDPM clip, DDIM; a v model: sg_sample_x0) */
    double sqrt_abar, sqrt_1m_abar;
    /* DDPM: mu = inv_sqrt_alpha (x - k_eps eps) */
    double inv_sqrt_alpha, k_eps;
    /* DDPM clip: mu = c_x0 x0_pred + c_xt x; DPM-Solver++(2M):
     * x_prev = c_xt x + c_x0 x0_pred + c_x0_prev x0_pred of the step before (order 2) */
    double c_x0, c_xt, c_x0_prev;
    /* DDIM: x_prev = sqrt_abar_prev x0_pred + sqrt_1m_abar_prev eps (+ sigma z where sigma > 0);
     * with eta > 0 the second root is sqrt(1 - abar_prev - sigma^2) */
    double sqrt_abar_prev, sqrt_1m_abar_prev;
    /* DDPM: x_prev = mu + sigma z where t > 0; DDIM: + sigma z where sigma > 0 (eta > 0)
     * (z: Philox(seed, t, SG_RNG_SAMPLE, index) in both) */
    double sigma;
} sg_sample_row;

/* The row's size in the table tensor (planner: u8 [rows][SG_SAMPLE_ROW_BYTES]). */
#define SG_SAMPLE_ROW_BYTES 96
#ifdef __cplusplus
static_assert(sizeof(sg_sample_row) == SG_SAMPLE_ROW_BYTES, "sg_sample_row layout");
#else
_Static_assert(sizeof(sg_sample_row) == SG_SAMPLE_ROW_BYTES, "sg_sample_row layout");
#endif

#ifdef __CUDA_ARCH__
#define SG_DADD(a, b) __dadd_rn(a, b)
#define SG_DSUB(a, b) __dsub_rn(a, b)
#define SG_DMUL(a, b) __dmul_rn(a, b)
#define SG_DDIV(a, b) __ddiv_rn(a, b)
#define SG_DSQRT(a) __dsqrt_rn(a)
#else
#define SG_DADD(a, b) ((a) + (b))
#define SG_DSUB(a, b) ((a) - (b))
#define SG_DMUL(a, b) ((a) * (b))
#define SG_DDIV(a, b) ((a) / (b))
#define SG_DSQRT(a) sqrt(a)
#endif

/* Does step `r` draw the noise z? DDPM: not at t = 0 (posterior variance beta~_0 = 0); DDIM:
 * only with eta > 0, and never at its last step (abar_prev = 1 makes sigma 0) */
SG_HD int sg_sample_row_noise(const sg_sample_row *r) {
    if (r->kind == SG_SAMPLE_DDIM || r->kind == SG_SAMPLE_DDIM_CLIP) return r->sigma > 0.0;
    return (r->kind == SG_SAMPLE_DDPM || r->kind == SG_SAMPLE_DDPM_CLIP) && r->t > 0;
}

/* clamp to [-1, 1]; NaN passes through (a broken model stays visible) */
SG_HD double sg_sample_clamp1(double v) {
    return v < -1.0 ? -1.0 : v > 1.0 ? 1.0 : v;
}

/* The x0 a step predicts from x (its input) and the model's prediction p: from eps,
 * (x - sqrt_1m_abar p) / sqrt_abar; from v, sqrt_abar x - sqrt_1m_abar p (diffusers' form,
 * finite at abar = 0: zero terminal SNR); clamped by the clipping kinds (every kind's row holds
 * both roots); what the update below uses, and what a picture of the denoising shows. */
SG_HD double sg_sample_x0(const sg_sample_row *r, double x, double p) {
    const double x0 = r->v_pred ? SG_DSUB(SG_DMUL(r->sqrt_abar, x), SG_DMUL(r->sqrt_1m_abar, p))
                                : SG_DDIV(SG_DSUB(x, SG_DMUL(r->sqrt_1m_abar, p)), r->sqrt_abar);
    return r->kind == SG_SAMPLE_DDPM_CLIP || r->kind == SG_SAMPLE_DDIM_CLIP ||
                   r->kind == SG_SAMPLE_DPM2M_CLIP
               ? sg_sample_clamp1(x0)
               : x0;
}

/* The eps of the model's prediction p at the state x: p itself, or from a v prediction
 * (v = sqrt(abar) eps - sqrt(1 - abar) x0 with x = sqrt(abar) x0 + sqrt(1 - abar) eps gives
 * eps = sqrt(abar) v + sqrt(1 - abar) x, as diffusers converts it), in double, not rounded. */
SG_HD double sg_sample_eps(const sg_sample_row *r, double x, double p) {
    return r->v_pred ? SG_DADD(SG_DMUL(r->sqrt_abar, p), SG_DMUL(r->sqrt_1m_abar, x)) : p;
}

/* Classifier-free guidance (Ho & Salimans 2022; diffusers' guidance_scale): the prediction a
 * guided step uses, pu + w (pc - pu), from the model's conditional (pc) and unconditional (pu,
 * the null class) predictions of the same x_t, in double, not rounded. As diffusers, it mixes
 * the model's outputs (eps or v: the conversion to eps is linear, so either way is the same). */
SG_HD double sg_sample_guide(double w, float pc, float pu) {
    const double u = (double)pu;
    return SG_DADD(u, SG_DMUL(w, SG_DSUB((double)pc, u)));
}

/* Guidance rescale (Lin et al. 2024, section 3.4; diffusers' guidance_rescale, its
 * rescale_noise_cfg): a guided image's prediction g (sg_sample_guide's) times
 *   f = phi sigma_c / sigma_g + (1 - phi),
 * sigma_c and sigma_g the standard deviations (unbiased, as torch.std) of the image's
 * conditional prediction and of g over its `per` values, so that phi = 1 gives the guided
 * prediction the conditional one's spread. The four sums run in one fixed order, the CUDA
 * kernel's block reduction: SG_SAMPLE_LANES lanes, lane l summing values l, l + LANES, ... in
 * increasing order, then a tree (lane l += lane l + h for h = LANES / 2, ..., 1); the CPU follows
 * it, so both get the same bits. */
#define SG_SAMPLE_LANES 256
typedef struct {
    double c, cc, g, gg; /* sums of c, c^2, g, g^2 */
} sg_guide_sums;

SG_HD void sg_guide_sums_add(sg_guide_sums *s, double c, double g) {
    s->c = SG_DADD(s->c, c), s->cc = SG_DADD(s->cc, SG_DMUL(c, c));
    s->g = SG_DADD(s->g, g), s->gg = SG_DADD(s->gg, SG_DMUL(g, g));
}

SG_HD void sg_guide_sums_merge(sg_guide_sums *s, const sg_guide_sums *o) {
    s->c = SG_DADD(s->c, o->c), s->cc = SG_DADD(s->cc, o->cc);
    s->g = SG_DADD(s->g, o->g), s->gg = SG_DADD(s->gg, o->gg);
}

/* f from an image's sums over n values; 1 where the guided prediction does not vary (sigma_g
 * 0: diffusers would divide by 0) */
SG_HD double sg_guide_rescale(double phi, const sg_guide_sums *s, int64_t n) {
    const double dn = (double)n;
    const double vc = SG_DDIV(SG_DSUB(s->cc, SG_DDIV(SG_DMUL(s->c, s->c), dn)), dn - 1.0);
    const double vg = SG_DDIV(SG_DSUB(s->gg, SG_DDIV(SG_DMUL(s->g, s->g), dn)), dn - 1.0);
    if (!(vg > 0.0) || !(vc >= 0.0) || n < 2) return 1.0;
    return SG_DADD(SG_DMUL(phi, SG_DDIV(SG_DSQRT(vc), SG_DSQRT(vg))), 1.0 - phi);
}

/* One element: x (fp32 state), the prediction p (eps, or v: sg_sample_eps; a float widened, or
 * sg_sample_guide's), z (standard normal; read only where sg_sample_row_noise) -> the next x,
 * computed in double and rounded once. A v model's DDPM step always takes the posterior mean of
 * its x0 (diffusers' DDPMScheduler does for every model): Algorithm 2's 1 / sqrt(alpha_t) is
 * infinite where beta_t = 1 (zero terminal SNR's last beta). */
SG_HD float sg_sample_update(const sg_sample_row *r, float xf, double p, float zf) {
    const double x = (double)xf, e = sg_sample_eps(r, x, p);
    double mu = 0.0, x0 = 0.0;
    switch (r->kind) {
    case SG_SAMPLE_DDPM:
    case SG_SAMPLE_DDPM_CLIP:
        if (r->kind == SG_SAMPLE_DDPM && !r->v_pred) {
            mu = SG_DMUL(r->inv_sqrt_alpha, SG_DSUB(x, SG_DMUL(r->k_eps, e)));
            break;
        }
        x0 = sg_sample_x0(r, x, p);
        mu = SG_DADD(SG_DMUL(r->c_x0, x0), SG_DMUL(r->c_xt, x));
        break;
    case SG_SAMPLE_DDIM:
    case SG_SAMPLE_DDIM_CLIP:
        x0 = sg_sample_x0(r, x, p);
        mu = SG_DADD(SG_DMUL(r->sqrt_abar_prev, x0), SG_DMUL(r->sqrt_1m_abar_prev, e));
        break;
    default:
        return xf;
    }
    return (float)(sg_sample_row_noise(r) ? SG_DADD(mu, SG_DMUL(r->sigma, (double)zf)) : mu);
}

/* sg_sample_update for every kind, x0h[0] the element's x0 history: a DPM-Solver++(2M) step
 * (Lu et al. 2022, Algorithm 2's data-prediction multistep; diffusers' DPMSolverMultistep
 * Scheduler, midpoint form) reads the x0 its previous step predicted from it (order 2 only:
 * the first step has none) and leaves its own there, rounded to fp32 as the state is; the
 * other kinds neither read nor write it. Deterministic: no noise. */
SG_HD float sg_sample_update_x0h(const sg_sample_row *r, float xf, double p, float zf, float *x0h) {
    if (r->kind != SG_SAMPLE_DPM2M && r->kind != SG_SAMPLE_DPM2M_CLIP)
        return sg_sample_update(r, xf, p, zf);
    const double x = (double)xf, x0 = sg_sample_x0(r, x, p);
    double mu = SG_DADD(SG_DMUL(r->c_xt, x), SG_DMUL(r->c_x0, x0));
    if (r->order == 2) mu = SG_DADD(mu, SG_DMUL(r->c_x0_prev, (double)x0h[0]));
    x0h[0] = (float)x0;
    return (float)mu;
}

#endif
