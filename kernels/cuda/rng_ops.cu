/* rng_ops.cu — every op that draws random numbers or reads the dataset: batch gathering
 * (data order, normalisation, padding, flips), diffusion timesteps, Gaussian noise, dropout.
 *
 * Every draw comes from common/philox.h keyed by (seed, step, purpose, element index), the
 * same calls the CPU reference (kernels/cpu/rng_ops.c) makes, so the 32-bit words are
 * identical; integer-derived results (batches, timesteps, dropout masks) match the CPU bit
 * for bit, normals to a few ulp (device logf/cosf). The seed and step are READ FROM DEVICE
 * MEMORY: a captured graph replayed at every step draws that step's numbers.
 * Shapes: NHWC; data[ndata][H0][W0][C] uint8, x0[N][H][W][C] fp32.
 */
#include "common/philox.h"
#include "kernels/cuda/cuda_common.cuh"

/* ================================ kernels ================================ */

/* blockIdx.x: sample i of the batch; threads stride over its H*W*C values. Thread 0 first
 * finds the dataset item (sg_perm of the run position step*B + s0 + i) and the flip bit (index
 * s0 + i: global, see cpu_kernels.h). The placement rules are those of cpu_gather_batch
 * (centred, -1 padding, source mirrored). */
__global__ void gather_batch_kernel(float *x0, const uint8_t *data, int64_t ndata, int H0, int W0,
                                    int C, int H, int W, const uint64_t *seedp,
                                    const int64_t *stepp, int flip, int64_t B, int64_t s0) {
    SG_PDL_ENTER();
    __shared__ int64_t item_s;
    __shared__ int mirror_s;
    const int i = blockIdx.x;
    if (threadIdx.x == 0) {
        const uint64_t seed = seedp[0];
        const int64_t step = stepp[0];
        const int64_t g = step * B + s0 + i;
        item_s = sg_batch_item(seed, g, ndata);
        mirror_s = flip && sg_rng_bit(seed, step, SG_RNG_FLIP, (uint64_t)(s0 + i));
    }
    __syncthreads();
    const int top = (H - H0) / 2, left = (W - W0) / 2;
    const uint8_t *src = data + item_s * ((int64_t)H0 * W0 * C);
    float *dst = x0 + (int64_t)i * H * W * C;
    const int64_t total = (int64_t)H * W * C;
    for (int64_t k = threadIdx.x; k < total; k += blockDim.x) {
        const int c = (int)(k % C);
        const int64_t pix = k / C;
        const int y = (int)(pix / W), x = (int)(pix % W);
        const int sy = y - top;
        int sx = x - left;
        if (sy < 0 || sy >= H0 || sx < 0 || sx >= W0) {
            dst[k] = -1.0f;
            continue;
        }
        if (mirror_s) sx = W0 - 1 - sx;
        dst[k] = (float)src[((int64_t)sy * W0 + sx) * C + c] / 127.5f - 1.0f;
    }
}

/* threads stride over N: the label of sample i's item (sg_batch_item, as gather_batch_kernel),
 * or the null class where its drop draw falls below p */
__global__ void gather_labels_kernel(int32_t *y, const int32_t *labels, int64_t ndata, int N,
                                     int classes, float p, const uint64_t *seedp,
                                     const int64_t *stepp, int64_t B, int64_t s0) {
    SG_PDL_ENTER();
    SG_GRID_STRIDE(i, N) {
        const uint64_t seed = seedp[0];
        const int64_t step = stepp[0];
        const int64_t item = sg_batch_item(seed, step * B + s0 + i, ndata);
        const int drop = sg_rng_uniform(seed, step, SG_RNG_CLASS_DROP, (uint64_t)(s0 + i)) < p;
        y[i] = drop ? classes : labels[item];
    }
}

/* threads stride over N: t[i] = sg_rng_index(seed, step, SG_RNG_TIMESTEP, i0 + i, T) */
__global__ void timesteps_kernel(int32_t *t, int N, int T, const uint64_t *seed,
                                 const int64_t *step, uint64_t i0) {
    SG_PDL_ENTER();
    SG_GRID_STRIDE(i, N) {
        t[i] =
            (int32_t)sg_rng_index(seed[0], step[0], SG_RNG_TIMESTEP, i0 + (uint64_t)i, (uint32_t)T);
    }
}

/* threads stride over n: eps[i] = sg_rng_normal(seed, step, purpose, i0 + i) */
__global__ void gaussian_kernel(float *eps, int64_t n, const uint64_t *seed, const int64_t *step,
                                uint32_t purpose, uint64_t i0) {
    SG_PDL_ENTER();
    SG_GRID_STRIDE(i, n) {
        eps[i] = sg_rng_normal(seed[0], step[0], purpose, i0 + (uint64_t)i);
    }
}

/* threads stride over n: cpu_noise_offset's eps[i] = z_i + s zo (the product rounded first) */
__global__ void noise_offset_kernel(float *eps, int64_t n, int64_t per, int C, float s,
                                    const uint64_t *seed, const int64_t *step, uint64_t i0,
                                    uint64_t q0) {
    SG_PDL_ENTER();
    SG_GRID_STRIDE(i, n) {
        const uint64_t q = q0 + (uint64_t)(i / per);
        const float zo = sg_rng_normal(seed[0], step[0], SG_RNG_NOISE_OFFSET,
                                       q * (uint64_t)C + (uint64_t)(i % C));
        eps[i] = __fadd_rn(sg_rng_normal(seed[0], step[0], SG_RNG_NOISE, i0 + (uint64_t)i),
                           __fmul_rn(s, zo));
    }
}

/* threads stride over n: cpu_noise_perturb's eps[i] += g xi_i (the product rounded first) */
__global__ void noise_perturb_kernel(float *eps, int64_t n, float g, const uint64_t *seed,
                                     const int64_t *step, uint64_t i0) {
    SG_PDL_ENTER();
    SG_GRID_STRIDE(i, n) {
        const float xi = sg_rng_normal(seed[0], step[0], SG_RNG_PERTURB, i0 + (uint64_t)i);
        eps[i] = __fadd_rn(eps[i], __fmul_rn(g, xi));
    }
}

/* threads stride over n: y (+)= x * scale where sg_rng_dropout(seed, step, purpose, i0 + i) >= p,
 * else 0 (forward and backward alike: the mask is regenerated, never stored) */
__global__ void dropout_kernel(void *y, const void *x, int64_t n, float p, float scale,
                               const uint64_t *seed, const int64_t *step, uint32_t purpose,
                               uint64_t i0, int dt, int accum) {
    SG_PDL_ENTER();
    SG_GRID_STRIDE(i, n) {
        const float u = sg_rng_dropout(seed[0], step[0], purpose, i0 + (uint64_t)i);
        dev_st_acc(y, i, u >= p ? dev_ld(x, i, dt) * scale : 0.0f, dt, accum);
    }
}

/* =============================== launchers =============================== */

int cuda_gather_batch(cudaStream_t st, float *x0, const uint8_t *data, int64_t ndata, int H0,
                      int W0, int C, int N, int H, int W, const uint64_t *seed, const int64_t *step,
                      int flip, int64_t B, int64_t s0) {
    SG_ARG_CHECK(ndata > 0 && H0 > 0 && W0 > 0 && C > 0 && N > 0 && H > 0 && W > 0,
                 "cuda_gather_batch: bad shape");
    SG_ARG_CHECK(s0 >= 0 && s0 + N <= B, "cuda_gather_batch: samples [s0, s0+N) outside [0, B)");
    SG_ARG_CHECK(seed && step, "cuda_gather_batch: seed and step must be device pointers");
    SG_LAUNCH(gather_batch_kernel, (unsigned)N, SG_THREADS, 0, st, x0, data, ndata, H0, W0, C, H, W,
              seed, step, flip, B, s0);
    SG_LAUNCH_CHECK("gather_batch_kernel");
    return SG_OK;
}

int cuda_sample_timesteps(cudaStream_t st, int32_t *t, int N, int T, const uint64_t *seed,
                          const int64_t *step, uint64_t i0) {
    SG_ARG_CHECK(N > 0 && T > 0, "cuda_sample_timesteps: bad shape");
    SG_ARG_CHECK(seed && step, "cuda_sample_timesteps: seed and step must be device pointers");
    SG_LAUNCH(timesteps_kernel, sg_grid_for(N), SG_THREADS, 0, st, t, N, T, seed, step, i0);
    SG_LAUNCH_CHECK("timesteps_kernel");
    return SG_OK;
}

int cuda_gather_labels(cudaStream_t st, int32_t *y, const int32_t *labels, int64_t ndata, int N,
                       int classes, float p, const uint64_t *seed, const int64_t *step, int64_t B,
                       int64_t s0) {
    SG_ARG_CHECK(ndata > 0 && N > 0 && classes > 0, "cuda_gather_labels: bad shape");
    SG_ARG_CHECK(s0 >= 0 && s0 + N <= B, "cuda_gather_labels: samples [s0, s0+N) outside [0, B)");
    SG_ARG_CHECK(seed && step, "cuda_gather_labels: seed and step must be device pointers");
    SG_LAUNCH(gather_labels_kernel, sg_grid_for(N), SG_THREADS, 0, st, y, labels, ndata, N, classes,
              p, seed, step, B, s0);
    SG_LAUNCH_CHECK("gather_labels_kernel");
    return SG_OK;
}

int cuda_gaussian(cudaStream_t st, float *eps, int64_t n, const uint64_t *seed, const int64_t *step,
                  uint32_t purpose, uint64_t i0) {
    SG_ARG_CHECK(seed && step, "cuda_gaussian: seed and step must be device pointers");
    if (n <= 0) return SG_OK;
    SG_LAUNCH(gaussian_kernel, sg_grid_for(n), SG_THREADS, 0, st, eps, n, seed, step, purpose, i0);
    SG_LAUNCH_CHECK("gaussian_kernel");
    return SG_OK;
}

int cuda_noise_offset(cudaStream_t st, float *eps, int64_t n, int64_t per, int C, float s,
                      const uint64_t *seed, const int64_t *step, uint64_t i0, uint64_t q0) {
    SG_ARG_CHECK(seed && step, "cuda_noise_offset: seed and step must be device pointers");
    SG_ARG_CHECK(per > 0 && C > 0 && per % C == 0, "cuda_noise_offset: bad shape");
    if (n <= 0) return SG_OK;
    SG_LAUNCH(noise_offset_kernel, sg_grid_for(n), SG_THREADS, 0, st, eps, n, per, C, s, seed, step,
              i0, q0);
    SG_LAUNCH_CHECK("noise_offset_kernel");
    return SG_OK;
}

int cuda_noise_perturb(cudaStream_t st, float *eps, int64_t n, float g, const uint64_t *seed,
                       const int64_t *step, uint64_t i0) {
    SG_ARG_CHECK(seed && step, "cuda_noise_perturb: seed and step must be device pointers");
    if (n <= 0) return SG_OK;
    SG_LAUNCH(noise_perturb_kernel, sg_grid_for(n), SG_THREADS, 0, st, eps, n, g, seed, step, i0);
    SG_LAUNCH_CHECK("noise_perturb_kernel");
    return SG_OK;
}

/* The keep scale, computed in float exactly as cpu_dropout_*. */
static float dropout_scale(float p) {
    return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
}

int cuda_dropout_fwd(cudaStream_t st, void *y, const void *x, int64_t n, float p,
                     const uint64_t *seed, const int64_t *step, uint32_t purpose, uint64_t i0,
                     int dt) {
    SG_DT_CHECK(dt, "cuda_dropout_fwd");
    SG_ARG_CHECK(seed && step, "cuda_dropout_fwd: seed and step must be device pointers");
    if (n <= 0) return SG_OK;
    SG_LAUNCH(dropout_kernel, sg_grid_for(n), SG_THREADS, 0, st, y, x, n, p, dropout_scale(p), seed,
              step, purpose, i0, dt, 0);
    SG_LAUNCH_CHECK("dropout_kernel");
    return SG_OK;
}

int cuda_dropout_bwd(cudaStream_t st, void *dx, const void *dy, int64_t n, float p,
                     const uint64_t *seed, const int64_t *step, uint32_t purpose, uint64_t i0,
                     int dt, int accum) {
    SG_DT_CHECK(dt, "cuda_dropout_bwd");
    SG_ARG_CHECK(seed && step, "cuda_dropout_bwd: seed and step must be device pointers");
    if (n <= 0) return SG_OK;
    SG_LAUNCH(dropout_kernel, sg_grid_for(n), SG_THREADS, 0, st, dx, dy, n, p, dropout_scale(p),
              seed, step, purpose, i0, dt, accum);
    SG_LAUNCH_CHECK("dropout_kernel");
    return SG_OK;
}
