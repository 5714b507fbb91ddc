/* embedding.cu — the sinusoidal timestep embedding and the DDPM forward-noising step.
 *
 * Shapes: t[N] int32 timesteps in device memory, y[N,dim]; x0, eps [N,per] fp32, xt[N,per].
 *
 * Timestep embedding: half = dim/2, f_i = exp(-ln(10000) i / (half - 1)),
 *   y[n] = [sin(t f_0) .. sin(t f_{half-1}), cos(t f_0) .. cos(t f_{half-1})],
 * in double and rounded once, as the CPU reference (the argument reaches ~1000 rad).
 *
 * DDPM noising: abar_t = prod_{i<=t} (1 - beta_i), the betas of the model's schedule (linear or
 * cosine: common/sg_schedule.h), xt = sqrt(abar_t) x0 + sqrt(1 - abar_t) eps.
 * t lives on the device; the coefficients of every timestep come from the plan's table
 * (common/sg_schedule.h: sg_ddpm_row, written once per run by the executor from the CPU
 * reference, cpu_ddpm_table), so no thread recomputes the T-long product. The element's
 * expression is the CPU's in double with explicit _rn intrinsics (no fused multiply-add):
 * xt matches cpu_ddpm_noise bit for bit.
 */
#include "kernels/cuda/cuda_common.cuh"

/* ================================ kernels ================================ */

/* threads stride over N*half (n, i): y[n][i] = sin(t f_i), y[n][half + i] = cos(t f_i) */
__global__ void timestep_emb_kernel(void *y, const int32_t *t, int N, int half, double step,
                                    int dt) {
    SG_PDL_ENTER();
    const int64_t total = (int64_t)N * half;
    SG_GRID_STRIDE(k, total) {
        const int64_t n = k / half;
        const int i = (int)(k % half);
        const double arg = __dmul_rn((double)t[n], exp(__dmul_rn(step, (double)i)));
        const int64_t o = n * 2 * half;
        dev_st(y, o + i, (float)sin(arg), dt);
        dev_st(y, o + half + i, (float)cos(arg), dt);
    }
}

/* threads stride over the N*per values o (sample n = o / per): the row of the sample's timestep,
 * then one element */
__global__ void ddpm_noise_kernel(void *xt, const float *x0, const float *eps, const int32_t *t,
                                  const sg_ddpm_row *table, int64_t total, int per, int T, int dt) {
    SG_PDL_ENTER();
    SG_GRID_STRIDE(o, total) {
        int tn = t[o / per];
        tn = tn < 0 ? 0 : tn >= T ? T - 1 : tn; /* a bad timestep must not run away */
        const double a = table[tn].sqrt_abar, s = table[tn].sqrt_1m_abar;
        dev_st(xt, o, (float)__dadd_rn(__dmul_rn(a, (double)x0[o]), __dmul_rn(s, (double)eps[o])),
               dt);
    }
}

/* =============================== launchers =============================== */

int cuda_timestep_emb(cudaStream_t st, void *y, const int32_t *t, int N, int dim, int dt) {
    SG_DT_CHECK(dt, "cuda_timestep_emb");
    SG_ARG_CHECK(N > 0 && dim >= 4 && dim % 2 == 0, "cuda_timestep_emb: need N > 0, even dim >= 4");
    const int half = dim / 2;
    const double step = -log(10000.0) / (half - 1);
    SG_LAUNCH(timestep_emb_kernel, sg_grid_for((int64_t)N * half), SG_THREADS, 0, st, y, t, N, half,
              step, dt);
    SG_LAUNCH_CHECK("timestep_emb_kernel");
    return SG_OK;
}

int cuda_ddpm_noise(cudaStream_t st, void *xt, const float *x0, const float *eps, const int32_t *t,
                    const void *table, int N, int per, int T, int dt) {
    SG_DT_CHECK(dt, "cuda_ddpm_noise");
    SG_ARG_CHECK(N > 0 && per > 0 && T >= 1 && table != NULL, "cuda_ddpm_noise: bad arguments");
    const int64_t total = (int64_t)N * per;
    SG_LAUNCH(ddpm_noise_kernel, sg_grid_for(total), SG_THREADS, 0, st, xt, x0, eps, t,
              (const sg_ddpm_row *)table, total, per, T, dt);
    SG_LAUNCH_CHECK("ddpm_noise_kernel");
    return SG_OK;
}
