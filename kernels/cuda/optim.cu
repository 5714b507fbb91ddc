/* optim.cu — the optimizer step over flat fp32 regions: global gradient norm, clipping scale,
 * AdamW with linear warmup, EMA, and the step counter.
 *
 * Shapes: every region is n contiguous fp32 values (the planner packs params, grads, m, v and
 * EMA each into one region). The scalars that change per step (step, clip scale, sumsq) live
 * in device memory and are read inside the kernels, so a captured graph replays correctly.
 *
 * sumsq  out = sum g^2: per-block double partials over a grid of sg_ws_sum_blocks(n) blocks,
 *        then one block adds them in a fixed order (as loss.cu).
 * clip   scale = min(1, max_norm / (sqrt(sumsq) + 1e-6)), in double as the CPU.
 * AdamW  at 0-based step s, k = s + 1: lr_t = lr min(1, k / warmup), bias corrections
 *        1 - b^k: computed in double once per block from the device step; the per-element
 *        update runs in fp32 (the CPU reference uses double: they agree to rounding).
 * EMA    ema = decay ema + (1 - decay) p, in double like the CPU (identical results).
 */
#include "kernels/cuda/cuda_common.cuh"

/* ================================ kernels ================================ */

/* blockIdx.x: one of gridDim.x partial blocks; threads stride over n with the grid's width. */
__global__ void sumsq_partial_kernel(double *part, const float *g, int64_t n) {
    __shared__ double sh[SG_THREADS];
    double s = 0.0;
    SG_GRID_STRIDE(i, n) {
        double v = g[i];
        s += v * v;
    }
    s = dev_block_sum_d(s, sh);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}

/* one block; threads stride over the nb partials, then the tree */
__global__ void sumsq_final_kernel(float *out, const double *part, int nb) {
    __shared__ double sh[SG_THREADS];
    double s = 0.0;
    for (int b = threadIdx.x; b < nb; b += SG_THREADS) s += part[b];
    s = dev_block_sum_d(s, sh);
    if (threadIdx.x == 0) out[0] = (float)s;
}

/* one thread */
__global__ void clip_scale_kernel(float *scale, const float *sumsq, float max_norm) {
    double norm = sqrt((double)sumsq[0]);
    double s = (double)max_norm / (norm + 1e-6);
    scale[0] = (float)(s < 1.0 ? s : 1.0);
}

/* threads stride over n. Thread 0 of each block first derives the step's scalars from the
 * device step counter (and block 0 publishes lr_t to lr_out). */
__global__ void adamw_kernel(float *p, float *m, float *v, const float *grad, int64_t n,
                             const float *scale, const int64_t *step, float lr, float b1, float b2,
                             float eps, float wd, int warmup, sg_lr_sched sched, float *lr_out) {
    __shared__ float sc[4]; /* lr_t, 1 - b1^k, 1 - b2^k, grad scale */
    if (threadIdx.x == 0) {
        double k = (double)step[0] + 1.0;
        double lr_t = sg_lr_at((double)lr, step[0] + 1, warmup, sched.schedule, sched.decay_steps,
                               sched.lr_min);
        sc[0] = (float)lr_t;
        sc[1] = (float)(1.0 - pow((double)b1, k));
        sc[2] = (float)(1.0 - pow((double)b2, k));
        sc[3] = scale ? scale[0] : 1.0f;
        if (lr_out && blockIdx.x == 0) lr_out[0] = (float)lr_t;
    }
    __syncthreads();
    const float lr_t = sc[0], bc1 = sc[1], bc2 = sc[2], gs = sc[3];
    SG_GRID_STRIDE(i, n) {
        const float g = grad[i] * gs;
        const float mi = b1 * m[i] + (1.0f - b1) * g;
        const float vi = b2 * v[i] + (1.0f - b2) * g * g;
        float pi = p[i];
        pi -= lr_t * ((mi / bc1) / (sqrtf(vi / bc2) + eps) + wd * pi);
        m[i] = mi;
        v[i] = vi;
        p[i] = pi;
    }
}

/* threads stride over n: ema = d ema + (1 - d) p in double (no fused multiply-add, as the CPU);
 * with the warm-up (warm), d from the device step, the same function as the CPU's */
__global__ void ema_kernel(float *ema, const float *p, int64_t n, double decay, int warm,
                           double inv_gamma, double power, const int64_t *step) {
    const double d = warm ? sg_ema_decay_at(decay, step[0], 1, inv_gamma, power) : decay;
    const double e = 1.0 - d;
    SG_GRID_STRIDE(i, n) {
        ema[i] = (float)__dadd_rn(__dmul_rn(d, (double)ema[i]), __dmul_rn(e, (double)p[i]));
    }
}

/* one thread */
__global__ void step_increment_kernel(int64_t *step) {
    step[0] += 1;
}

/* one thread: the trainer reads watch and loss_sum at its log steps instead of the loss after
 * every step (no host sync per step), and still learns the exact step of a NaN or Inf */
__global__ void loss_watch_kernel(const float *loss, const float *sumsq, const int64_t *step,
                                  int64_t *watch, float *loss_sum) {
    float l = loss[0], s = sumsq[0];
    if (!(isfinite(l) && isfinite(s)) && watch[0] == 0) watch[0] = step[0] + 1;
    loss_sum[0] += l;
}

/* =============================== launchers =============================== */

int cuda_sumsq(cudaStream_t st, float *out, const float *g, int64_t n, void *ws, int64_t ws_bytes) {
    const char *fn = "cuda_sumsq";
    SG_ARG_CHECK(n > 0, "%s: n must be positive", fn);
    SG_WS_CHECK(sg_ws_sumsq(n), ws_bytes, fn);
    const int nb = (int)sg_ws_sum_blocks(n);
    SG_LAUNCH(sumsq_partial_kernel, nb, SG_THREADS, 0, st, (double *)ws, g, n);
    SG_LAUNCH_CHECK("sumsq_partial_kernel");
    SG_LAUNCH(sumsq_final_kernel, 1, SG_THREADS, 0, st, out, (const double *)ws, nb);
    SG_LAUNCH_CHECK("sumsq_final_kernel");
    return SG_OK;
}

int cuda_clip_scale(cudaStream_t st, float *scale, const float *sumsq, float max_norm) {
    SG_LAUNCH(clip_scale_kernel, 1, 1, 0, st, scale, sumsq, max_norm);
    SG_LAUNCH_CHECK("clip_scale_kernel");
    return SG_OK;
}

int cuda_adamw(cudaStream_t st, float *p, float *m, float *v, const float *grad, int64_t n,
               const float *scale, const int64_t *step, float lr, float b1, float b2, float eps,
               float wd, int warmup, sg_lr_sched sched, float *lr_out) {
    SG_ARG_CHECK(step != NULL, "cuda_adamw: the step counter is required");
    if (n <= 0) return SG_OK;
    SG_LAUNCH(adamw_kernel, sg_grid_for(n), SG_THREADS, 0, st, p, m, v, grad, n, scale, step, lr,
              b1, b2, eps, wd, warmup, sched, lr_out);
    SG_LAUNCH_CHECK("adamw_kernel");
    return SG_OK;
}

int cuda_ema(cudaStream_t st, float *ema, const float *p, int64_t n, float decay,
             const sg_ema_sched *warm, const int64_t *step) {
    SG_ARG_CHECK(!warm || step, "cuda_ema: the EMA warm-up needs the step counter");
    if (n <= 0) return SG_OK;
    SG_LAUNCH(ema_kernel, sg_grid_for(n), SG_THREADS, 0, st, ema, p, n, (double)decay, warm ? 1 : 0,
              warm ? warm->inv_gamma : 1.0, warm ? warm->power : 1.0, step);
    SG_LAUNCH_CHECK("ema_kernel");
    return SG_OK;
}

int cuda_step_increment(cudaStream_t st, int64_t *step) {
    SG_LAUNCH(step_increment_kernel, 1, 1, 0, st, step);
    SG_LAUNCH_CHECK("step_increment_kernel");
    return SG_OK;
}

int cuda_loss_watch(cudaStream_t st, const float *loss, const float *sumsq, const int64_t *step,
                    int64_t *watch, float *loss_sum) {
    SG_LAUNCH(loss_watch_kernel, 1, 1, 0, st, loss, sumsq, step, watch, loss_sum);
    SG_LAUNCH_CHECK("loss_watch_kernel");
    return SG_OK;
}
