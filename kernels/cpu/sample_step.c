/* sample_step.c — the CPU reference of the device-resident sampler: its step table and one
 * denoising step (common/sg_sample_step.h; the math is graph/sampler.h's).
 *
 * Shapes: a batch of N images of `per` values each (NHWC, flat): x[N*per] the fp32 sampling
 * state, xt[N*per] the model's input, eps[N*per] the prediction, t[N] the model's timesteps.
 * Random numbers: Philox with purpose SG_RNG_SAMPLE keyed by the run seed, at index
 * first + i for element i of the batch (first = the batch's first image of the run x per):
 * x_T at step T, the DDPM noise of the step from t at step t (graph/sampler.h).
 */
#include <math.h>
#include <stdlib.h>

#include "common/philox.h"
#include "kernels/cpu/cpu_kernels.h"

/* The coefficients of one step, by the expressions of graph/sampler.c's sg_ddpm_step and
 * sg_ddim_step (kept there as the reference; tests/test_sampler.c compares bit for bit): the
 * same doubles, so sg_sample_update reproduces their loops exactly. */
static sg_sample_row ddpm_row(const double *betas, const double *ab, int t, int clip, int large) {
    sg_sample_row r = {.kind = clip ? SG_SAMPLE_DDPM_CLIP : SG_SAMPLE_DDPM, .t = t};
    double beta = betas[t], alpha = 1.0 - beta;
    double abar = ab[t];
    double abar_prev = t > 0 ? ab[t - 1] : 1.0;
    r.sigma = large ? sqrt(beta) : sqrt(beta * (1.0 - abar_prev) / (1.0 - abar));
    r.inv_sqrt_alpha = 1.0 / sqrt(alpha);
    r.k_eps = beta / sqrt(1.0 - abar);
    r.sqrt_abar = sqrt(abar);
    r.sqrt_1m_abar = sqrt(1.0 - abar);
    r.c_x0 = sqrt(abar_prev) * beta / (1.0 - abar);
    r.c_xt = sqrt(alpha) * (1.0 - abar_prev) / (1.0 - abar);
    return r;
}

static sg_sample_row ddim_row(const double *ab, int t, int t_prev, int clip, double eta) {
    sg_sample_row r = {.kind = clip ? SG_SAMPLE_DDIM_CLIP : SG_SAMPLE_DDIM, .t = t};
    double abar = ab[t];
    double abar_prev = t_prev >= 0 ? ab[t_prev] : 1.0;
    r.sqrt_abar = sqrt(abar);
    r.sqrt_1m_abar = sqrt(1.0 - abar);
    r.sigma = eta * sqrt((1.0 - abar_prev) / (1.0 - abar) * (1.0 - abar / abar_prev));
    r.sqrt_abar_prev = sqrt(abar_prev);
    r.sqrt_1m_abar_prev = sqrt(1.0 - abar_prev - r.sigma * r.sigma);
    return r;
}

/* lambda = log(alpha / sigma) = log(sqrt(abar) / sqrt(1 - abar)), DPM-Solver's half log-SNR;
 * -inf at abar = 0 (zero terminal SNR), +inf at abar = 1 (after the last step) */
static double dpm_lambda(double abar) {
    return 0.5 * (log(abar) - log1p(-abar));
}

/* DPM-Solver++(2M) from abar_s (the model asked at timestep t_model) to abar_t (1 after the last
 * step: x0), abar_s1 the step before's (order 2), as diffusers' DPMSolverMultistepScheduler
 * (midpoint; final_sigmas_type "zero"):
 *   h = lambda_t - lambda_s, phi = alpha_t (1 - e^-h),
 *   order 1: x_t = (sigma_t / sigma_s) x + phi x0                         (= DDIM, eta 0)
 *   order 2: x_t = (sigma_t / sigma_s) x + phi (1 + d) x0 - phi d x0_prev,
 *            d = 1 / (2 r0) = h / (2 (lambda_s - lambda_s1)).
 * Infinities only where their limits are meant: alpha_s = 0 (lambda_s = -inf) gives h = +inf,
 * phi = alpha_t, and at the next step d = h / inf = 0; the last step (lambda_t = +inf) is order
 * 1, phi = 1, sigma_t = 0: x_t = x0. */
static sg_sample_row dpm_row(double abar_s1, double abar_s, double abar_t, int t_model, int clip,
                             int order) {
    sg_sample_row r = {.kind = clip ? SG_SAMPLE_DPM2M_CLIP : SG_SAMPLE_DPM2M, .t = t_model};
    r.order = order;
    r.sqrt_abar = sqrt(abar_s);
    r.sqrt_1m_abar = sqrt(1.0 - abar_s);
    const double h = dpm_lambda(abar_t) - dpm_lambda(abar_s);
    const double phi = sqrt(abar_t) * -expm1(-h);
    r.c_xt = sqrt(1.0 - abar_t) / r.sqrt_1m_abar;
    r.c_x0 = phi;
    if (order == 2) {
        const double d = h / (2.0 * (dpm_lambda(abar_s) - dpm_lambda(abar_s1)));
        r.c_x0 = phi * (1.0 + d);
        r.c_x0_prev = -phi * d;
    }
    return r;
}

int sg_sample_table(sg_sample_row *rows, int cap, const int *ts, int n, int sampler, int clip,
                    double eta, int var_large, const sg_betas *b) {
    const int T = b->T, ddim = sampler == SG_TABLE_DDIM;
    SG_ASSERT(n >= 1 && n <= cap && T >= 1 && eta >= 0.0 && eta <= 1.0 && (ddim || eta == 0.0) &&
              (sampler == SG_TABLE_DDPM || !var_large) && sampler >= SG_TABLE_DDPM &&
              sampler <= SG_TABLE_DPM2M);
    /* sg_ddpm_abar and sg_ddpm_beta of every t, in O(T) */
    double *ab = malloc(2 * (size_t)T * sizeof(double)), *betas = ab + T;
    if (!ab) return sg_set_error("out of host memory for the %d-step schedule", T);
    sg_ddpm_abars(b, ab);
    sg_ddpm_betas(b, betas);
    memset(rows, 0, sizeof(sg_sample_row) * (size_t)cap); /* rows n .. cap: SG_SAMPLE_NONE */
    for (int k = 0; k < n; k++) {
        SG_ASSERT(ts[k] >= 0 && ts[k] < T && (k == 0 || ts[k] < ts[k - 1]));
        if (sampler == SG_TABLE_DPM2M)
            rows[k] =
                dpm_row(k > 0 ? ab[ts[k - 1]] : 0.0, ab[ts[k]], k + 1 < n ? ab[ts[k + 1]] : 1.0,
                        ts[k], clip, k == 0 || k + 1 == n ? 1 : 2);
        else if (ddim)
            rows[k] = ddim_row(ab, ts[k], k + 1 < n ? ts[k + 1] : -1, clip, eta);
        else
            rows[k] = ddpm_row(betas, ab, ts[k], clip, var_large);
    }
    free(ab);
    return SG_OK;
}

int sg_karras_timesteps(int S, const double *ab, int T, double *sig, int *ts) {
    if (S < 1 || T < 2 || !(ab[T - 1] > 0.0))
        return sg_set_error("Karras sigmas need S >= 1 and T >= 2 and a finite largest sigma "
                            "(abar > 0 at T - 1: not zero terminal SNR)");
    /* sigma_t = sqrt((1 - abar) / abar), increasing in t; its logs for the interpolation */
    double *ls = malloc(sizeof(double) * (size_t)T);
    if (!ls) return sg_set_error("out of host memory for the %d-step schedule", T);
    for (int t = 0; t < T; t++) ls[t] = log(sqrt((1.0 - ab[t]) / ab[t]));
    const double rho = 7.0, lo = pow(exp(ls[0]), 1.0 / rho), hi = pow(exp(ls[T - 1]), 1.0 / rho);
    for (int j = 0; j < S; j++) {
        const double ramp = S > 1 ? j * (1.0 / (S - 1)) : 0.0; /* np.linspace(0, 1, S) */
        sig[j] = pow(hi + ramp * (lo - hi), rho);
        /* _sigma_to_t: the last t whose log sigma is at most this one's (at most T - 2), then
         * linear in log sigma to the next, rounded half to even */
        const double l = log(fmax(sig[j], 1e-10));
        int i = 0;
        for (int q = 0; q < T; q++)
            if (l - ls[q] >= 0.0) i = q;
        i = i < T - 2 ? i : T - 2;
        double w = (ls[i] - l) / (ls[i] - ls[i + 1]);
        w = w < 0.0 ? 0.0 : w > 1.0 ? 1.0 : w;
        ts[j] = (int)rint((1.0 - w) * i + w * (i + 1));
    }
    free(ls);
    return SG_OK;
}

int sg_sample_table_karras(sg_sample_row *rows, int cap, int *ts, int n, int clip,
                           const sg_betas *b) {
    const int T = b->T;
    SG_ASSERT(n >= 1 && n <= cap && T >= 1);
    double *ab = malloc(2 * (size_t)T * sizeof(double)), *sig = malloc(sizeof(double) * (size_t)n);
    int rc = !ab || !sig ? sg_set_error("out of host memory for the %d-step schedule", T) : SG_OK;
    if (!rc) sg_ddpm_abars(b, ab);
    if (!rc) rc = sg_karras_timesteps(n, ab, T, sig, ts);
    if (!rc) {
        memset(rows, 0, sizeof(sg_sample_row) * (size_t)cap); /* rows n .. cap: SG_SAMPLE_NONE */
        /* abar = alpha^2 = 1 / (sigma^2 + 1), diffusers' _sigma_to_alpha_sigma_t */
        for (int k = 0; k < n; k++)
            rows[k] = dpm_row(k > 0 ? 1.0 / (sig[k - 1] * sig[k - 1] + 1.0) : 0.0,
                              1.0 / (sig[k] * sig[k] + 1.0),
                              k + 1 < n ? 1.0 / (sig[k + 1] * sig[k + 1] + 1.0) : 1.0, ts[k], clip,
                              k == 0 || k + 1 == n ? 1 : 2);
    }
    free(ab), free(sig);
    return rc;
}

/* the lanes in order, then the tree (common/sg_sample_step.h) */
double cpu_sample_rescale_factor(const float *eps, int64_t n, int64_t i0, int64_t per, double w,
                                 double phi) {
    sg_guide_sums lane[SG_SAMPLE_LANES];
    memset(lane, 0, sizeof lane);
    for (int64_t j = 0; j < per; j++)
        sg_guide_sums_add(&lane[j % SG_SAMPLE_LANES], eps[i0 + j],
                          sg_sample_guide(w, eps[i0 + j], eps[n + i0 + j]));
    for (int h = SG_SAMPLE_LANES / 2; h >= 1; h /= 2)
        for (int l = 0; l < h; l++) sg_guide_sums_merge(&lane[l], &lane[l + h]);
    return sg_guide_rescale(phi, &lane[0], per);
}

/* The step is picked by k: -1 starts the run (x = x_T), 0 .. rows-1 a denoising step (a NONE
 * row leaves x as it is), anything else nothing. x_t always ends as x; t is set where a step
 * follows (otherwise it keeps its value). */
void cpu_sample_step(float *x, float *xt, int32_t *t, float *x0h, const float *eps,
                     const sg_sample_row *rows, int n_rows, int64_t k, uint64_t seed,
                     uint64_t first, int N, int64_t per, int T, int guided, double w, double phi) {
    const int64_t n = (int64_t)N * per;
    const sg_sample_row *row = k >= 0 && k < n_rows ? &rows[k] : NULL;
    const sg_sample_row *next = k >= -1 && k + 1 < n_rows ? &rows[k + 1] : NULL;
    if (k == -1) {
        for (int64_t i = 0; i < n; i++) x[i] = sg_rng_normal(seed, T, SG_RNG_SAMPLE, first + i);
        memset(x0h, 0, sizeof(float) * (size_t)n);
    } else if (row) {
        const int noise = sg_sample_row_noise(row), rescale = guided && phi > 0.0;
        double f = 1.0;
        for (int64_t i = 0; i < n; i++) {
            if (rescale && i % per == 0) f = cpu_sample_rescale_factor(eps, n, i, per, w, phi);
            float z = noise ? sg_rng_normal(seed, row->t, SG_RNG_SAMPLE, first + i) : 0.0f;
            double p = guided ? sg_sample_guide(w, eps[i], eps[n + i]) : eps[i];
            if (rescale) p = SG_DMUL(p, f);
            x[i] = sg_sample_update_x0h(row, x[i], p, z, &x0h[i]);
        }
    }
    if (xt != x) memcpy(xt, x, sizeof(float) * (size_t)n);
    if (guided) memcpy(xt + n, x, sizeof(float) * (size_t)n);
    if (next && next->kind != SG_SAMPLE_NONE)
        for (int i = 0; i < (guided ? 2 * N : N); i++) t[i] = next->t;
}
