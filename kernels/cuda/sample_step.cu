/* sample_step.cu — one denoising step of the device-resident sampler
 * (common/sg_sample_step.h; the CPU reference is kernels/cpu/sample_step.c, the math
 * graph/sampler.h's).
 *
 * Shapes: N images of `per` values (NHWC, flat): x[N*per] fp32 state, xt[N*per] the model's
 * input (fp32 or bf16), eps[N*per] the prediction (fp32 or bf16), t[N] int32; guided
 * (classifier-free guidance, cpu_sample_step): xt, eps and t hold every image twice.
 * Everything that changes per step is read from device memory: the step counter k picks the
 * table row, the key holds {seed, first} (first: the batch's first image of the run x per), so
 * a captured graph replayed S times runs the S steps. The update is sg_sample_update, whose
 * double arithmetic goes through the _rn intrinsics (no fused multiply-add), so x matches the
 * CPU kernel bit for bit given the same z; z and x_T are Philox normals, whose device
 * logf/cosf may differ from libm's by a few ulp (common/philox.h).
 */
#include "common/philox.h"
#include "kernels/cuda/cuda_common.cuh"

/* ================================ kernels ================================ */

/* Threads stride over the N*per values (and, first, over the N timesteps). Every thread reads
 * k and the row itself (the same 80 bytes for all: served from cache); nothing is shared
 * between threads, so no barrier is needed. */
__global__ void sample_step_kernel(float *x, void *xt, int xt_dt, int32_t *t, const void *eps,
                                   int eps_dt, const sg_sample_row *rows, int n_rows,
                                   const int64_t *kp, const uint64_t *key, int N, int64_t per,
                                   int T, int guided, double w) {
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
        } else if (step && r.kind != SG_SAMPLE_NONE) {
            const float z =
                noise ? sg_rng_normal(seed, r.t, SG_RNG_SAMPLE, first + (uint64_t)i) : 0.0f;
            const double p =
                guided ? sg_sample_guide(w, dev_ld(eps, i, eps_dt), dev_ld(eps, n + i, eps_dt))
                       : (double)dev_ld(eps, i, eps_dt);
            v = sg_sample_update(&r, v, p, z);
            x[i] = v;
        }
        dev_st(xt, i, v, xt_dt);
        if (guided) dev_st(xt, n + i, v, xt_dt);
    }
}

/* =============================== launchers =============================== */

int cuda_sample_step(cudaStream_t st, float *x, void *xt, int xt_dt, int32_t *t, const void *eps,
                     int eps_dt, const sg_sample_row *rows, int n_rows, const int64_t *k,
                     const uint64_t *key, int N, int64_t per, int T, int guided, double w) {
    SG_DT_CHECK(xt_dt, "cuda_sample_step");
    SG_DT_CHECK(eps_dt, "cuda_sample_step");
    SG_ARG_CHECK(N > 0 && per > 0 && n_rows > 0 && T >= 1, "cuda_sample_step: bad shape");
    SG_ARG_CHECK(x && xt && t && eps && rows && k && key,
                 "cuda_sample_step: every operand must be a device pointer");
    SG_LAUNCH(sample_step_kernel, sg_grid_for((int64_t)N * per), SG_THREADS, 0, st, x, xt, xt_dt, t,
              eps, eps_dt, rows, n_rows, k, key, N, per, T, guided, w);
    SG_LAUNCH_CHECK("sample_step_kernel");
    return SG_OK;
}
