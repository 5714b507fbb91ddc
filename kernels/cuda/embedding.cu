/* embedding.cu — the sinusoidal timestep embedding and the DDPM forward-noising step.
 *
 * Shapes: t[N] int32 timesteps in device memory, y[N,dim]; x0, eps [N,per] fp32, xt[N,per].
 *
 * Timestep embedding: half = dim/2, f_i = exp(-ln(10000) i / (half - 1)),
 *   y[n] = [sin(t f_0) .. sin(t f_{half-1}), cos(t f_0) .. cos(t f_{half-1})],
 * in double and rounded once, as the CPU reference (the argument reaches ~1000 rad).
 *
 * DDPM noising: abar_t = prod_{i<=t} (1 - beta_i), beta_i = beta1 + (betaT - beta1) i / (T-1),
 *   xt = sqrt(abar_t) x0 + sqrt(1 - abar_t) eps.
 * t lives on the device, so abar_t is computed there: one thread per block runs the CPU's
 * product (same operations, same order, in double; explicit _rn intrinsics keep the compiler
 * from fusing), so xt matches cpu_ddpm_noise bit for bit. At most T multiplies per block.
 */
#include "kernels/cuda/cuda_common.cuh"

/* ================================ kernels ================================ */

/* threads stride over N*half (n, i): y[n][i] = sin(t f_i), y[n][half + i] = cos(t f_i) */
__global__ void timestep_emb_kernel(void *y, const int32_t *t, int N, int half, double step,
                                    int dt) {
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

/* blockIdx.y: sample n; blockIdx.x and the threads stride over its `per` values. Thread 0
 * computes sqrt(abar_t) and sqrt(1 - abar_t) first (shared). */
__global__ void ddpm_noise_kernel(void *xt, const float *x0, const float *eps, const int32_t *t,
                                  int per, int T, double beta1, double betaT, int dt) {
    __shared__ double coef[2];
    const int64_t n = blockIdx.y;
    if (threadIdx.x == 0) {
        int tn = t[n];
        tn = tn < 0 ? 0 : tn >= T ? T - 1 : tn; /* a bad timestep must not run away */
        double abar = 1.0;
        for (int i = 0; i <= tn; i++) {
            double beta =
                T > 1 ? __dadd_rn(beta1, __ddiv_rn(__dmul_rn(__dsub_rn(betaT, beta1), (double)i),
                                                   (double)(T - 1)))
                      : beta1;
            abar = __dmul_rn(abar, __dsub_rn(1.0, beta));
        }
        coef[0] = sqrt(abar);
        coef[1] = sqrt(__dsub_rn(1.0, abar));
    }
    __syncthreads();
    const double a = coef[0], s = coef[1];
    SG_GRID_STRIDE(i, per) {
        const int64_t o = n * per + i;
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
                    int N, int per, int T, float beta1, float betaT, int dt) {
    SG_DT_CHECK(dt, "cuda_ddpm_noise");
    SG_ARG_CHECK(N > 0 && N <= 65535 && per > 0 && T >= 1, "cuda_ddpm_noise: bad shape");
    unsigned bx = sg_grid_for(per);
    if (bx > 64) bx = 64; /* each block recomputes abar_t: keep the blocks per sample few */
    SG_LAUNCH(ddpm_noise_kernel, dim3(bx, (unsigned)N), SG_THREADS, 0, st, xt, x0, eps, t, per, T,
              beta1, betaT, dt);
    SG_LAUNCH_CHECK("ddpm_noise_kernel");
    return SG_OK;
}
