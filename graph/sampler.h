/* sampler.h — DDPM ancestral and DDIM sampling: the update math as pure functions, and a loop
 * that drives a forward-only executor (sg_exec_init with train = 0) with them.
 *
 * Indexing follows training (docs/model.md): timesteps are 0-based, t in [0, T), linear betas
 * beta_t = beta1 + (betaT - beta1) t / (T - 1), abar_t = prod_{i<=t} (1 - beta_i) (double,
 * sg_ddpm_abar), x_t = sqrt(abar_t) x0 + sqrt(1 - abar_t) eps. The sampler starts from
 * x ~ N(0, I) at t = T - 1 and ends with x_{-1} = the image (abar_{-1} = 1). Coefficients are
 * computed in double from sg_ddpm_abar; each element is updated in double and stored as fp32.
 *
 * DDPM (Ho et al. 2020, Algorithm 2), one step t -> t-1:
 *   x_{t-1} = 1/sqrt(alpha_t) (x_t - beta_t / sqrt(1 - abar_t) eps) + sigma_t z,
 *   alpha_t = 1 - beta_t, sigma_t^2 = beta~_t = beta_t (1 - abar_{t-1}) / (1 - abar_t)
 * The variance is the posterior one (beta~, "fixedsmall" in the DDPM release, diffusers'
 * default) rather than beta_t: beta~_0 = 0, so the last step (t = 0) adds no noise.
 * With clip, x0_pred = (x_t - sqrt(1 - abar_t) eps) / sqrt(abar_t) is clamped to [-1, 1] and
 * the mean is the posterior mean of q(x_{t-1} | x_t, x0_pred):
 *   mu = sqrt(abar_{t-1}) beta_t / (1 - abar_t) x0_pred + sqrt(alpha_t) (1 - abar_{t-1}) /
 *        (1 - abar_t) x_t
 * which is Algorithm 2's mean exactly when nothing is clamped. Clipping is the default for
 * DDPM, as in the DDPM release (clip_denoised=True) and diffusers' DDPMScheduler
 * (clip_sample=True), so weights behave as they do there.
 *
 * DDIM (Song et al. 2021) with eta = 0, one step t -> t_prev (t_prev < t, -1 at the end):
 *   x0_pred = (x_t - sqrt(1 - abar_t) eps) / sqrt(abar_t)   (clamped to [-1, 1] with clip)
 *   x_prev  = sqrt(abar_prev) x0_pred + sqrt(1 - abar_prev) eps,  abar_prev = 1 if t_prev < 0
 * eps is the model's even when x0_pred was clamped (diffusers' use_clipped_model_output=False).
 * No clipping is the default for DDIM, as in the DDIM paper's code (ermongroup/ddim): the
 * sampler is then the deterministic ODE-like map that inverts the forward process.
 *
 * DDIM timesteps for S steps ("trailing" spacing, diffusers' timestep_spacing="trailing",
 * Lin et al. 2024): t_j = rint(T - j T / S) - 1 for j = 0 .. S-1 (visited in that order,
 * rint rounding half to even as numpy's round), so the first step is always T - 1 (where
 * x ~ N(0, I) is the right assumption) and S = T visits every timestep. When S divides T
 * these are T-1, T-1-T/S, ..., T/S - 1.
 *
 * Random numbers: Philox (common/philox.h) with purpose SG_RNG_SAMPLE, keyed by the seed;
 * x_T uses step = T, the DDPM noise z of the step from t uses step = t (t >= 1; t = 0 draws
 * none); the index is image * (img*img*in_ch) + element, with `image` the position in the
 * whole run (not in the batch), so the noise an image sees does not depend on the batch size.
 */
#ifndef SG_SAMPLER_H
#define SG_SAMPLER_H

#include <signal.h>
#include <stdint.h>

#include "graph/exec.h"

/* One DDPM ancestral step from x_t (timestep t) to x_{t-1}, n values. eps is the predicted
 * noise, z standard normal noise (unused at t = 0, may then be NULL). x_prev may alias x_t. */
void sg_ddpm_step(float *x_prev, const float *x_t, const float *eps, const float *z, int64_t n,
                  int t, int T, double beta1, double betaT, int clip);

/* One DDIM (eta = 0) step from x_t (timestep t) to timestep t_prev (< t; negative: the final
 * image, abar = 1), n values. x_prev may alias x_t. */
void sg_ddim_step(float *x_prev, const float *x_t, const float *eps, int64_t n, int t, int t_prev,
                  int T, double beta1, double betaT, int clip);

/* The S DDIM timesteps in the order visited (decreasing): ts[0] = T-1, ..., see the top.
 * Returns SG_ERR unless 1 <= S <= T. */
int sg_ddim_timesteps(int S, int T, int *ts);

/* Progress: called after each forward pass. images_done counts images finished before this
 * batch; batch_images is how many this batch holds; step is 1-based within the batch's
 * n_steps; t the timestep just evaluated. */
typedef void (*sg_sample_progress_fn)(void *ctx, int images_done, int batch_images, int n_images,
                                      int step, int n_steps, int t);

typedef struct {
    int ddim_steps; /* 0: DDPM with all T steps; else DDIM with this many (1 .. T) */
    int clip;       /* clamp x0_pred to [-1, 1]; -1: the default (DDPM on, DDIM off) */
    sg_sample_progress_fn progress; /* may be NULL */
    void *progress_ctx;
    /* may be NULL; when it becomes non-zero (a signal handler sets it) sampling stops after
     * the current forward pass with SG_ERR "sampling interrupted" */
    const volatile sig_atomic_t *cancel;
} sg_sample_opts;

/* Draw n_images samples with the forward executor e (plan built with train = 0, weights
 * loaded) on any backend (each denoising step is one sg_exec_step: on CUDA the forward pass is
 * captured once into a graph and replayed for every later step), in batches of the plan's batch
 * size (a last partial batch runs full, extra slots discarded). out: [n_images, img, img, in_ch]
 * fp32, clamped to [-1, 1] (NaN and Inf pass through, so broken weights show). Same seed, same
 * weights, same backend: same bits. Returns SG_ERR (sg_last_error) on bad arguments or a backend
 * failure. */
int sg_sample_ex(sg_exec *e, int n_images, uint64_t seed, const sg_sample_opts *opts, float *out);

/* sg_sample_ex with the default clipping for the chosen sampler. */
int sg_sample(sg_exec *e, int n_images, uint64_t seed, int ddim_steps, float *out,
              sg_sample_progress_fn progress, void *progress_ctx);

#endif
