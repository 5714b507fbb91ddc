/* embedding.c — the sinusoidal timestep embedding and the DDPM forward-noising step.
 *
 * Shapes: t[N] (int32 timesteps), y[N,dim]; x0, eps, xt [N,per] (per = H*W*C values/sample).
 *
 * Timestep embedding (DDPM; diffusers with flip_sin_to_cos=False, downscale_freq_shift=1):
 *   half = dim/2, f_i = exp(-ln(10000) * i / (half - 1)), i < half,
 *   y[n] = [sin(t_n f_0), ..., sin(t_n f_{half-1}), cos(t_n f_0), ..., cos(t_n f_{half-1})].
 * Computed in double and rounded once: t f_i reaches ~1000 rad, where an fp32 argument would
 * already be off by ~6e-5, and the reference should be the exact value.
 *
 * DDPM (Ho et al. 2020) with linear betas over T steps:
 *   beta_i = beta1 + (betaT - beta1) * i / (T-1),  abar_t = prod_{i<=t} (1 - beta_i),
 *   x_t = sqrt(abar_t) x0 + sqrt(1 - abar_t) eps.
 * The CUDA noising reads the coefficients from a table of every timestep's (cpu_ddpm_table,
 * written once per run by the executor) instead of recomputing the product: the same values.
 */
#include "common/sg_base.h"
#include "kernels/cpu/cpu_kernels.h"

#include <math.h>

void cpu_timestep_emb(float *y, const int32_t *t, int N, int dim) {
    SG_ASSERT(dim >= 4 && dim % 2 == 0); /* half - 1 must be > 0 */
    int half = dim / 2;
    double step = -log(10000.0) / (half - 1);
    for (int n = 0; n < N; n++) {
        float *yn = y + (int64_t)n * dim;
        for (int i = 0; i < half; i++) {
            double arg = (double)t[n] * exp(step * i);
            yn[i] = (float)sin(arg);
            yn[half + i] = (float)cos(arg);
        }
    }
}

/* The product runs in increasing i in double, as the contract fixes, so every caller (this
 * noising, the sampler's coefficients in graph/sampler.c) gets the same value; the CUDA
 * noising kernel (kernels/cuda/embedding.cu) runs the same product on the device, operation
 * for operation. */
double sg_ddpm_abar(int t, int T, double beta1, double betaT) {
    SG_ASSERT(T >= 1 && t >= 0 && t < T);
    double abar = 1.0;
    for (int i = 0; i <= t; i++) {
        double beta = T > 1 ? beta1 + (betaT - beta1) * i / (T - 1) : beta1;
        abar *= 1.0 - beta;
    }
    return abar;
}

double sg_ddpm_beta(int t, int T, double beta1, double betaT) {
    return T > 1 ? beta1 + (betaT - beta1) * t / (T - 1) : beta1;
}

/* timestep t's coefficients: the one expression cpu_ddpm_noise and cpu_ddpm_table share */
static sg_ddpm_row ddpm_row(int t, int T, float beta1, float betaT) {
    const double abar = sg_ddpm_abar(t, T, beta1, betaT);
    const sg_ddpm_row r = {sqrt(abar), sqrt(1.0 - abar)};
    return r;
}

void cpu_ddpm_table(sg_ddpm_row *rows, int T, float beta1, float betaT) {
    for (int t = 0; t < T; t++) rows[t] = ddpm_row(t, T, beta1, betaT);
}

void cpu_ddpm_noise(float *xt, const float *x0, const float *eps, const int32_t *t, int N, int per,
                    int T, float beta1, float betaT) {
    for (int n = 0; n < N; n++) {
        const sg_ddpm_row r = ddpm_row(t[n], T, beta1, betaT);
        const double a = r.sqrt_abar, s = r.sqrt_1m_abar;
        int64_t off = (int64_t)n * per;
        for (int i = 0; i < per; i++) xt[off + i] = (float)(a * x0[off + i] + s * eps[off + i]);
    }
}
