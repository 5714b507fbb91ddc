/* sample_step.cu — one denoising step of the device-resident sampler
 * (common/sg_sample_step.h; the CPU reference is kernels/cpu/sample_step.c, the math
 * graph/sampler.h's).
 *
 * Shapes: N images of `per` values (NHWC, flat): x[N*per] fp32 state, xt[N*per] the model's
 * input (fp32 or bf16), eps[N*per] the prediction (fp32 or bf16), t[N] int32, x0h[N*per] fp32
 * DPM-Solver++(2M)'s x0 history (zeroed with x_T; only its rows use it); guided
 * (classifier-free guidance, cpu_sample_step): xt, eps and t hold every image twice.
 * Everything that changes per step is read from device memory: the step counter k picks the
 * table row, the key holds {seed, first} (first: the batch's first image of the run x per), so
 * a captured graph replayed S times runs the S steps. The update is sg_sample_update, whose
 * double arithmetic goes through the _rn intrinsics (no fused multiply-add), so x matches the
 * CPU kernel bit for bit given the same z; z and x_T are Philox normals, whose device
 * logf/cosf may differ from libm's by a few ulp (common/philox.h).
 * Guidance rescale (phi > 0, guided): a block per image (SG_SAMPLE_LANES threads) sums its
 * image's conditional and guided predictions in the header's fixed order (lane l: values l,
 * l + LANES, ...; then a tree in shared memory), so the factor has the CPU's bits.
 */
#include "common/philox.h"
#include "kernels/cuda/cuda_common.cuh"

/* ================================ kernels ================================ */

/* Threads stride over the N*per values (and, first, over the N timesteps). Every thread reads
 * k and the row itself (the same 80 bytes for all: served from cache); nothing is shared
 * between threads, so no barrier is needed. */
__global__ void sample_step_kernel(float *x, void *xt, int xt_dt, int32_t *t, float *x0h,
                                   const void *eps, int eps_dt, const sg_sample_row *rows,
                                   int n_rows, const int64_t *kp, const uint64_t *key, int N,
                                   int64_t per, int T, int guided, double w) {
    SG_PDL_ENTER();
    const int64_t k = kp[0];
    const uint64_t seed = key[0], first = key[1];
    const int start = k == -1;
    const int step = k >= 0 && k < n_rows;
    const int has_next = k >= -1 && k + 1 < n_rows;
    SG_GRID_STRIDE(i, (int64_t)(guided ? 2 * N : N)) {
        if (has_next && rows[k + 1].kind != SG_SAMPLE_NONE) t[i] = rows[k + 1].t;
    }
    const sg_sample_row r = step ? rows[k] : sg_sample_row{};
    const int noise = step && sg_sample_row_noise(&r);
    const int64_t n = (int64_t)N * per;
    SG_GRID_STRIDE(i, n) {
        float v = x[i];
        if (start) {
            v = sg_rng_normal(seed, T, SG_RNG_SAMPLE, first + (uint64_t)i);
            x[i] = v;
            x0h[i] = 0.0f;
        } else if (step && r.kind != SG_SAMPLE_NONE) {
            const float z =
                noise ? sg_rng_normal(seed, r.t, SG_RNG_SAMPLE, first + (uint64_t)i) : 0.0f;
            const double p =
                guided ? sg_sample_guide(w, dev_ld(eps, i, eps_dt), dev_ld(eps, n + i, eps_dt))
                       : (double)dev_ld(eps, i, eps_dt);
            v = sg_sample_update_x0h(&r, v, p, z, &x0h[i]);
            x[i] = v;
        }
        dev_st(xt, i, v, xt_dt);
        if (guided) dev_st(xt, n + i, v, xt_dt);
    }
}

/* Guidance rescale: block b is image b; its SG_SAMPLE_LANES threads reduce the image's sums
 * (sg_guide_sums), then update its values as sample_step_kernel does, the prediction scaled by
 * the factor. Also writes t for the image's two copies. */
__global__ void __launch_bounds__(SG_SAMPLE_LANES)
    sample_step_rescaled_kernel(float *x, void *xt, int xt_dt, int32_t *t, float *x0h,
                                const void *eps, int eps_dt, const sg_sample_row *rows, int n_rows,
                                const int64_t *kp, const uint64_t *key, int N, int64_t per, int T,
                                double w, double phi) {
    SG_PDL_ENTER();
    __shared__ sg_guide_sums lane[SG_SAMPLE_LANES];
    const int64_t k = kp[0];
    const uint64_t seed = key[0], first = key[1];
    const int start = k == -1;
    const int step = k >= 0 && k < n_rows;
    const int has_next = k >= -1 && k + 1 < n_rows;
    const int b = (int)blockIdx.x, l = (int)threadIdx.x;
    if (l == 0 && has_next && rows[k + 1].kind != SG_SAMPLE_NONE)
        t[b] = rows[k + 1].t, t[N + b] = rows[k + 1].t;
    const sg_sample_row r = step ? rows[k] : sg_sample_row{};
    const int update = step && r.kind != SG_SAMPLE_NONE;
    const int noise = step && sg_sample_row_noise(&r);
    const int64_t n = (int64_t)N * per, i0 = (int64_t)b * per;
    double f = 1.0;
    if (update) { /* uniform across the block: every thread reaches the barriers */
        sg_guide_sums s = {0.0, 0.0, 0.0, 0.0};
        for (int64_t j = l; j < per; j += SG_SAMPLE_LANES) {
            const float c = dev_ld(eps, i0 + j, eps_dt);
            sg_guide_sums_add(&s, (double)c,
                              sg_sample_guide(w, c, dev_ld(eps, n + i0 + j, eps_dt)));
        }
        lane[l] = s;
        __syncthreads();
        for (int h = SG_SAMPLE_LANES / 2; h >= 1; h /= 2) {
            if (l < h) sg_guide_sums_merge(&lane[l], &lane[l + h]);
            __syncthreads();
        }
        f = sg_guide_rescale(phi, &lane[0], per);
    }
    for (int64_t j = l; j < per; j += SG_SAMPLE_LANES) {
        const int64_t i = i0 + j;
        float v = x[i];
        if (start) {
            v = sg_rng_normal(seed, T, SG_RNG_SAMPLE, first + (uint64_t)i);
            x[i] = v;
            x0h[i] = 0.0f;
        } else if (update) {
            const float z =
                noise ? sg_rng_normal(seed, r.t, SG_RNG_SAMPLE, first + (uint64_t)i) : 0.0f;
            const double p =
                SG_DMUL(sg_sample_guide(w, dev_ld(eps, i, eps_dt), dev_ld(eps, n + i, eps_dt)), f);
            v = sg_sample_update_x0h(&r, v, p, z, &x0h[i]);
            x[i] = v;
        }
        dev_st(xt, i, v, xt_dt);
        dev_st(xt, n + i, v, xt_dt);
    }
}

/* =============================== launchers =============================== */

int cuda_sample_step(cudaStream_t st, float *x, void *xt, int xt_dt, int32_t *t, float *x0h,
                     const void *eps, int eps_dt, const sg_sample_row *rows, int n_rows,
                     const int64_t *k, const uint64_t *key, int N, int64_t per, int T, int guided,
                     double w, double phi) {
    SG_DT_CHECK(xt_dt, "cuda_sample_step");
    SG_DT_CHECK(eps_dt, "cuda_sample_step");
    SG_ARG_CHECK(N > 0 && per > 0 && n_rows > 0 && T >= 1, "cuda_sample_step: bad shape");
    SG_ARG_CHECK(x && xt && t && x0h && eps && rows && k && key,
                 "cuda_sample_step: every operand must be a device pointer");
    SG_ARG_CHECK(phi >= 0.0 && phi <= 1.0 && (phi == 0.0 || guided),
                 "cuda_sample_step: guidance rescale needs guidance and phi in [0, 1]");
    if (phi > 0.0) {
        SG_LAUNCH(sample_step_rescaled_kernel, dim3((unsigned)N), SG_SAMPLE_LANES, 0, st, x, xt,
                  xt_dt, t, x0h, eps, eps_dt, rows, n_rows, k, key, N, per, T, w, phi);
        SG_LAUNCH_CHECK("sample_step_rescaled_kernel");
        return SG_OK;
    }
    SG_LAUNCH(sample_step_kernel, sg_grid_for((int64_t)N * per), SG_THREADS, 0, st, x, xt, xt_dt, t,
              x0h, eps, eps_dt, rows, n_rows, k, key, N, per, T, guided, w);
    SG_LAUNCH_CHECK("sample_step_kernel");
    return SG_OK;
}
