/* embedding.cu — the sinusoidal timestep embedding, the class embedding and the DDPM
 * forward-noising step.
 *
 * Shapes: t[N] int32 timesteps in device memory, y[N,dim]; x0, eps [N,per] fp32, xt[N,per].
 *
 * Class embedding: y[n] = table[lab[n]] (table [rows, dim] fp32); its backward, one thread per
 * table element, sums the samples that picked its row in sample order (no atomics: the CPU
 * reference's order, so the same bits).
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

/* a label outside [0, rows) must not run away */
__device__ __forceinline__ int64_t class_row(int32_t lab, int rows) {
    return lab < 0 ? 0 : lab >= rows ? rows - 1 : lab;
}

/* threads stride over N*dim (n, d): y[n][d] = table[lab[n]][d] */
__global__ void class_emb_kernel(void *y, const int32_t *lab, const float *table, int N, int dim,
                                 int rows, int dt) {
    SG_PDL_ENTER();
    SG_GRID_STRIDE(k, (int64_t)N * dim) {
        const int64_t n = k / dim, d = k % dim;
        dev_st(y, k, table[class_row(lab[n], rows) * dim + d], dt);
    }
}

/* threads stride over rows*dim (r, d): dtable[r][d] (+)= the sum over n with lab[n] = r of
 * dy[n][d], n in order */
__global__ void class_emb_bwd_kernel(float *dtable, const void *dy, const int32_t *lab, int N,
                                     int dim, int rows, int dt, int accum) {
    SG_PDL_ENTER();
    SG_GRID_STRIDE(k, (int64_t)rows * dim) {
        const int64_t r = k / dim, d = k % dim;
        float s = 0.0f;
        for (int n = 0; n < N; n++)
            if (class_row(lab[n], rows) == r) s += dev_ld(dy, (int64_t)n * dim + d, dt);
        dev_st_acc(dtable, k, s, DT_F32, accum);
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

int cuda_class_emb_fwd(cudaStream_t st, void *y, const int32_t *lab, const float *table, int N,
                       int dim, int rows, int dt) {
    SG_DT_CHECK(dt, "cuda_class_emb_fwd");
    SG_ARG_CHECK(N > 0 && dim > 0 && rows > 0, "cuda_class_emb_fwd: bad shape");
    SG_LAUNCH(class_emb_kernel, sg_grid_for((int64_t)N * dim), SG_THREADS, 0, st, y, lab, table, N,
              dim, rows, dt);
    SG_LAUNCH_CHECK("class_emb_kernel");
    return SG_OK;
}

int cuda_class_emb_bwd(cudaStream_t st, float *dtable, const void *dy, const int32_t *lab, int N,
                       int dim, int rows, int dt, int accum) {
    SG_DT_CHECK(dt, "cuda_class_emb_bwd");
    SG_ARG_CHECK(N > 0 && dim > 0 && rows > 0, "cuda_class_emb_bwd: bad shape");
    SG_LAUNCH(class_emb_bwd_kernel, sg_grid_for((int64_t)rows * dim), SG_THREADS, 0, st, dtable, dy,
              lab, N, dim, rows, dt, accum);
    SG_LAUNCH_CHECK("class_emb_bwd_kernel");
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
