/* sampler.h — DDPM ancestral and DDIM sampling: the update math as pure functions (the
 * reference), and the loop that runs it on the device with a sampling plan (sg_exec_init with
 * train = 0).
 *
 * Indexing follows training (docs/model.md): timesteps are 0-based, t in [0, T), the betas of
 * the model's schedule (linear, beta_t = beta1 + (betaT - beta1) t / (T - 1), or cosine:
 * common/sg_schedule.h), abar_t = prod_{i<=t} (1 - beta_i) (double, sg_ddpm_abar), x_t =
 * sqrt(abar_t) x0 + sqrt(1 - abar_t) eps. The sampler starts from x ~ N(0, I) at t = T - 1 and ends
 * with x_{-1} = the image (abar_{-1} = 1). Coefficients are computed in double from sg_ddpm_abar;
 * each element is updated in double and stored as fp32.
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
 * With eta > 0 (sg_ddim_step_eta) the step is stochastic: the eps coefficient becomes
 * sqrt(1 - abar_prev - sigma^2) and sigma z is added, sigma = eta sqrt((1 - abar_prev) /
 * (1 - abar)) sqrt(1 - abar / abar_prev), z keyed as the DDPM noise of step t (below).
 * No clipping is the default for DDIM, as in the DDIM paper's code (ermongroup/ddim): the
 * sampler is then the deterministic ODE-like map that inverts the forward process.
 *
 * DDIM timesteps for S steps ("trailing" spacing, diffusers' timestep_spacing="trailing",
 * Lin et al. 2024): t_j = rint(T - j T / S) - 1 for j = 0 .. S-1 (visited in that order,
 * rint rounding half to even as numpy's round), so the first step is always T - 1 (where
 * x ~ N(0, I) is the right assumption) and S = T visits every timestep. When S divides T
 * these are T-1, T-1-T/S, ..., T/S - 1.
 *
 * Other spacings (sg_ddim_timesteps_spaced; `sample --spacing`, Lin et al. 2024's Table 2 and
 * diffusers' DDIMScheduler.set_timesteps, whose numpy expressions these are):
 *   leading:  t_j = (S - 1 - j) floor(T / S) + offset (diffusers' default, with its steps_offset;
 *             DDIM's own "uniform" sequence at offset 0): 4 of 1000 visit 750, 500, 250, 0;
 *   linspace: t_j = rint((S - 1 - j) (T - 1) / (S - 1)) (np.linspace(0, T - 1, S).round()): 4 of
 *             1000 visit 999, 666, 333, 0; S = 1 visits 0.
 * Every spacing's step goes from t_j to the next visited t_{j+1}, and the last to x0 (abar 1).
 * That is diffusers' DDIMScheduler (prev = t - T // S) for leading and for trailing where S
 * divides T. For linspace its DDIMScheduler and DDPMScheduler step to t - T // S instead, not a
 * visited timestep (4 of 1000: from 999 to 749, then the model is asked at 666); DDIM's
 * definition, and DDPMScheduler given the timesteps as a list, step to the next one visited.
 *
 * DPM-Solver++(2M) (Lu et al. 2022, "DPM-Solver++", Algorithm 2; diffusers'
 * DPMSolverMultistepScheduler with its defaults: dpmsolver++, solver_order 2, midpoint,
 * lower_order_final, final_sigmas_type "zero"; sg_sample_opts.solver). With alpha = sqrt(abar),
 * sigma = sqrt(1 - abar), lambda = log(alpha / sigma), one step from s to t (t = -1 after the
 * last: alpha 1, sigma 0), h = lambda_t - lambda_s:
 *   x_t = (sigma_t / sigma_s) x_s + alpha_t (1 - e^-h) D
 *   D   = x0_pred                                         (order 1: the first and the last step)
 *   D   = (1 + 1 / (2 r)) x0_pred - 1 / (2 r) x0_prev     (order 2: between; r = h' / h)
 * x0_prev is the x0_pred of the step before, h' that step's h. The last step lands on x0_pred
 * itself; order 1 is DDIM with eta 0 (the same map, other roundings). x0_pred is DDIM's (a v
 * model's from v; clamped with clip, which is diffusers' thresholding at ratio 1, maximum 1).
 * Deterministic (no noise); x0_prev is kept per element in the plan's x0 history. Timesteps
 * (sg_solver_timesteps) are that scheduler's set_timesteps': trailing as DDIM's; leading and
 * linspace from S + 1 points with the last (0) dropped:
 *   leading:  t_j = (S - j) floor(T / (S + 1)) + offset
 *   linspace: t_j = rint((S - j) (T - 1) / S)   (20 of 1000: 999, 949, ..., 50; trailing's end
 *             at 49)
 * Or (karras; diffusers' use_karras_sigmas) its steps go between Karras et al. 2022's sigmas,
 * sigma_j = (smax^(1/7) + j / (S - 1) (smin^(1/7) - smax^(1/7)))^7 with sigma_t = sqrt((1 - abar_t)
 * / abar_t), smax and smin those at T - 1 and 0: every coefficient (x0_pred's too) from those
 * sigmas (abar = 1 / (sigma^2 + 1)), the model asked at the timestep each sigma's falls at
 * (interpolated in log sigma, rounded; kernels/cpu: sg_karras_timesteps). Not with zero terminal
 * SNR (smax infinite).
 *
 * Random numbers: Philox (common/philox.h) with purpose SG_RNG_SAMPLE, keyed by the seed;
 * x_T uses step = T, the DDPM noise z of the step from t uses step = t (t >= 1; t = 0 draws
 * none); the index is image * (img*img*in_ch) + element, with `image` the position in the
 * whole run (not in the batch), so the noise an image sees does not depend on the batch size.
 *
 * Device-resident loop (sg_sample_ex). The sampling plan is the forward pass followed by the
 * update (OP_SAMPLE_STEP) and a step counter k (planner/sample_graph.c): one run of the plan is
 * one denoising step, and on CUDA one replay of its captured graph. The update reads the fp32
 * state x, the prediction and row k of a step table, and writes the next x, the next x_t (in
 * the model's dtype) and the next t; the DDPM noise z is drawn inside it with the keys above.
 * The table (common/sg_sample_step.h, sg_sample_table) holds each step's coefficients,
 * computed once per call on the host by the expressions of sg_ddpm_step / sg_ddim_step, and the
 * per-element update is their loop body, so the device loop gives the same bits as these
 * functions driven from the host (tests/test_sampler.c checks it). Per batch the host writes
 * the key {seed, first image x per} and k = -1 and runs the update once (it then draws x_T on
 * the device and sets x_t, t for the first step), runs the plan n_steps times, and reads x
 * once (a class-conditional plan: the batch's labels are written with the key; guided, each image
 * twice, the second time with the null class). Between runs it only calls the progress callback
 * and reads the cancel flag; when
 * either is given it waits for the device (no transfer) every few steps, so that both stay
 * within a few steps of it.
 */
#ifndef SG_SAMPLER_H
#define SG_SAMPLER_H

#include <signal.h>
#include <stdint.h>

#include "graph/exec.h"

/* One DDPM ancestral step from x_t (timestep t) to x_{t-1}, n values. eps is the predicted
 * noise, z standard normal noise (unused at t = 0, may then be NULL). x_prev may alias x_t. */
void sg_ddpm_step(float *x_prev, const float *x_t, const float *eps, const float *z, int64_t n,
                  int t, const sg_betas *b, int clip);
/* ... with the variance sigma_t^2 = beta~_t (large 0: the posterior's, as sg_ddpm_step; diffusers'
 * fixed_small) or beta_t (large 1: diffusers' fixed_large, DDPM's CIFAR-10 samples); the DDPM
 * paper finds the two alike */
void sg_ddpm_step_var(float *x_prev, const float *x_t, const float *eps, const float *z, int64_t n,
                      int t, const sg_betas *b, int clip, int large);

/* One DDIM (eta = 0) step from x_t (timestep t) to timestep t_prev (< t; negative: the final
 * image, abar = 1), n values. x_prev may alias x_t. */
void sg_ddim_step(float *x_prev, const float *x_t, const float *eps, int64_t n, int t, int t_prev,
                  const sg_betas *b, int clip);
/* The same with eta in [0, 1] (Song et al. 2021, eq. 12 and 16; diffusers' DDIMScheduler eta):
 *   sigma = eta sqrt((1 - abar_prev) / (1 - abar)) sqrt(1 - abar / abar_prev),
 *   x_prev = sqrt(abar_prev) x0_pred + sqrt(1 - abar_prev - sigma^2) eps + sigma z
 * (eta 1: the DDPM posterior's variance; sigma = 0 at the last step). z is read where sigma > 0
 * (NULL: no noise); eta = 0 is sg_ddim_step, bit for bit. */
void sg_ddim_step_eta(float *x_prev, const float *x_t, const float *eps, const float *z, int64_t n,
                      int t, int t_prev, const sg_betas *b, double eta, int clip);

/* The S DDIM timesteps in the order visited (decreasing): ts[0] = T-1, ..., see the top.
 * Returns SG_ERR unless 1 <= S <= T. */
int sg_ddim_timesteps(int S, int T, int *ts);

/* The DDIM timesteps' spacings (see the top; diffusers' timestep_spacing) */
typedef enum {
    SG_SPACING_TRAILING = 0,
    SG_SPACING_LEADING = 1,
    SG_SPACING_LINSPACE = 2
} sg_spacing;
/* "trailing", "leading", "linspace"; NULL for another value */
const char *sg_spacing_name(int spacing);
/* the spacing a name says, or -1 */
int sg_spacing_parse(const char *name);
/* The S timesteps of a spacing, decreasing, in [0, T). offset (diffusers' steps_offset) shifts
 * leading's and must be 0 for the others. SG_ERR (the reason set) unless 1 <= S <= T, the spacing
 * is known and the offset keeps every step below T. */
int sg_ddim_timesteps_spaced(int S, int T, int spacing, int offset, int *ts);

/* The solver a DDIM-timestep run uses (sg_sample_opts.solver; see the top) */
typedef enum { SG_SOLVER_DDIM = 0, SG_SOLVER_DPMPP_2M = 1 } sg_solver;
/* "ddim", "dpm++2m"; NULL for another value */
const char *sg_solver_name(int solver);
/* the solver a name says, or -1 */
int sg_solver_parse(const char *name);
/* The S timesteps a solver visits at a spacing (decreasing, in [0, T)): DDIM's are
 * sg_ddim_timesteps_spaced's; DPM-Solver++(2M)'s are diffusers' DPMSolverMultistepScheduler's,
 * the same at trailing, but S + 1 points with the last (0) dropped at the others (see the top).
 * SG_ERR (the reason set) where the solver's spacing cannot make S distinct steps. */
int sg_solver_timesteps(int solver, int S, int T, int spacing, int offset, int *ts);

/* Progress: called after each denoising step is issued (at most a few steps ahead of the
 * device). images_done counts images finished before this batch; batch_images is how many this
 * batch holds; step is 1-based within the batch's n_steps; t the timestep evaluated. */
typedef void (*sg_sample_progress_fn)(void *ctx, int images_done, int batch_images, int n_images,
                                      int step, int n_steps, int t);

typedef struct {
    int ddim_steps;   /* 0: DDPM with all T steps; else DDIM with this many (1 .. T) */
    int solver;       /* with ddim_steps: sg_solver (0: DDIM; DPM-Solver++(2M): eta 0) */
    int karras;       /* DPM-Solver++(2M): 1 steps between Karras et al.'s sigmas (see the top);
                         then the spacing must be trailing and the offset 0 */
    int spacing;      /* DDIM's timesteps (sg_spacing; 0: trailing); DDPM: 0 */
    int steps_offset; /* leading's offset (sg_ddim_timesteps_spaced); otherwise 0 */
    double eta;       /* DDIM's eta in [0, 1] (sg_ddim_step_eta; 0: deterministic); DDPM: 0 */
    int var_large;    /* DDPM's variance: 0 beta~_t, 1 beta_t (sg_ddpm_step_var); DDIM: 0 */
    int clip;         /* clamp x0_pred to [-1, 1]; -1: the default (DDPM on, DDIM off) */
    /* a class-conditional model's: image i's class labels[i] (n_images of them, each in
     * [0, classes]: the value `classes` is the null class, an unconditional image); the plan's
     * guidance scale (its config's, sg_model_guided) mixes in the null class's prediction.
     * Must be NULL for an unconditional model and given for a conditional one. */
    const int32_t *labels;
    sg_sample_progress_fn progress; /* may be NULL */
    void *progress_ctx;
    /* may be NULL; when it becomes non-zero (a signal handler sets it) sampling issues no
     * further step and returns SG_ERR "sampling interrupted" */
    const volatile sig_atomic_t *cancel;
    /* Per batch of the plan's size (images first .. first + count - 1 of the run), both may be
     * NULL: skip(ctx, first, count) != 0 leaves the batch out (nothing runs for it: e.g. its
     * images are already on disk; the others are the same bits, each image's noise being keyed
     * by its number); on_batch(ctx, first, count, x) receives each batch that ran, x as `out`
     * would hold it, and a non-zero return stops sampling with SG_ERR (its sg_set_error). */
    int (*skip)(void *ctx, int first, int count);
    int (*on_batch)(void *ctx, int first, int count, const float *x);
    /* Snapshots of the denoising (both may be NULL): for k = -1 (x_T, before the first step) and
     * after each step k = 0 .. n_steps - 1 of the batch starting at image `first`, when
     * snap_at(ctx, first, k, n_steps) != 0, the batch's fp32 state x (the next step's x_t; after
     * the last step the image, not yet clamped) and x0, the step's prediction of the image
     * (common/sg_sample_step.h's sg_sample_x0 from the step's input and eps, the value its
     * update used; NULL at k = -1), are read back, a wait for the device, and handed to
     * on_snap(ctx, first, count, k, x, x0); a non-zero return stops sampling with SG_ERR. */
    int (*snap_at)(void *ctx, int first, int k, int n_steps);
    int (*on_snap)(void *ctx, int first, int count, int k, const float *x, const float *x0);
    void *batch_ctx;
} sg_sample_opts;

/* Draw n_images samples with the sampling executor e (plan built with train = 0, weights
 * loaded) on any backend (each denoising step is one sg_exec_step, the device-resident loop
 * above: on CUDA the step is captured once into a graph and replayed for every later step), in
 * batches of the plan's batch size (a last partial batch runs full, extra slots discarded). out:
 * [n_images, img, img, in_ch] fp32, clamped to [-1, 1] (NaN and Inf pass through, so broken weights
 * show); it may be NULL when opts->on_batch takes the images, and a skipped batch's slots are
 * left as they were. Same seed, same weights, same backend and batch size: same bits. Returns
 * SG_ERR (sg_last_error) on bad arguments, a backend failure, a cancel or on_batch's refusal. */
int sg_sample_ex(sg_exec *e, int n_images, uint64_t seed, const sg_sample_opts *opts, float *out);

/* sg_sample_ex with the default clipping for the chosen sampler. */
int sg_sample(sg_exec *e, int n_images, uint64_t seed, int ddim_steps, float *out,
              sg_sample_progress_fn progress, void *progress_ctx);

#endif
