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
 * AdamW + EMA (+ the bf16 weight copy) in one pass (adamw_ema_kernel, the training step's
 *        optimizer): one read of grad, p, m, v, ema and one write of p, m, v, ema (and the
 *        copy), 16 bytes at a time; per element the same device functions as adamw_kernel then
 *        ema_kernel, so the same bits as the two kernels in sequence.
 */
#include "kernels/cuda/cuda_common.cuh"

/* ================================ kernels ================================ */

/* blockIdx.x: one of gridDim.x partial blocks; threads stride over n with the grid's width. */
__global__ void sumsq_partial_kernel(double *part, const float *g, int64_t n) {
    SG_PDL_ENTER();
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
    SG_PDL_ENTER();
    __shared__ double sh[SG_THREADS];
    double s = 0.0;
    for (int b = threadIdx.x; b < nb; b += SG_THREADS) s += part[b];
    s = dev_block_sum_d(s, sh);
    if (threadIdx.x == 0) out[0] = (float)s;
}

/* one thread */
__global__ void clip_scale_kernel(float *scale, const float *sumsq, float max_norm) {
    SG_PDL_ENTER();
    double norm = sqrt((double)sumsq[0]);
    double s = (double)max_norm / (norm + 1e-6);
    scale[0] = (float)(s < 1.0 ? s : 1.0);
}

/* The step's AdamW scalars from the device step counter, by one thread of each block into
 * shared memory: sc = {lr_t, 1 - b1^k, 1 - b2^k, grad scale}, computed in double (block 0
 * publishes lr_t to lr_out). */
__device__ __forceinline__ void adamw_scalars(float sc[4], const float *scale, const int64_t *step,
                                              float lr, float b1, float b2, int warmup,
                                              sg_lr_sched sched, float *lr_out) {
    double k = (double)step[0] + 1.0;
    double lr_t =
        sg_lr_at((double)lr, step[0] + 1, warmup, sched.schedule, sched.decay_steps, sched.lr_min);
    sc[0] = (float)lr_t;
    sc[1] = (float)(1.0 - pow((double)b1, k));
    sc[2] = (float)(1.0 - pow((double)b2, k));
    sc[3] = scale ? scale[0] : 1.0f;
    if (lr_out && blockIdx.x == 0) lr_out[0] = (float)lr_t;
}

/* One element's AdamW update in fp32: the one expression adamw_kernel and adamw_ema_kernel
 * share (the compiler contracts the same expression the same way in both), so the fused pass
 * gives adamw's bits. */
__device__ __forceinline__ void adamw_update(float &p, float &m, float &v, float grad,
                                             const float sc[4], float b1, float b2, float eps,
                                             float wd) {
    const float lr_t = sc[0], bc1 = sc[1], bc2 = sc[2], gs = sc[3];
    const float g = grad * gs;
    const float mi = b1 * m + (1.0f - b1) * g;
    const float vi = b2 * v + (1.0f - b2) * g * g;
    float pi = p;
    pi -= lr_t * ((mi / bc1) / (sqrtf(vi / bc2) + eps) + wd * pi);
    m = mi;
    v = vi;
    p = pi;
}

/* One element's EMA, ema d + p e with e = 1 - d, in double without fused multiply-adds (the
 * CPU's rounding): shared by ema_kernel and adamw_ema_kernel. */
__device__ __forceinline__ float ema_update(double d, double e, float ema, float p) {
    return (float)__dadd_rn(__dmul_rn(d, (double)ema), __dmul_rn(e, (double)p));
}

/* threads stride over n. Thread 0 of each block first derives the step's scalars from the
 * device step counter (and block 0 publishes lr_t to lr_out). */
__global__ void adamw_kernel(float *p, float *m, float *v, const float *grad, int64_t n,
                             const float *scale, const int64_t *step, float lr, float b1, float b2,
                             float eps, float wd, int warmup, sg_lr_sched sched, float *lr_out) {
    SG_PDL_ENTER();
    __shared__ float sc[4]; /* lr_t, 1 - b1^k, 1 - b2^k, grad scale */
    if (threadIdx.x == 0) adamw_scalars(sc, scale, step, lr, b1, b2, warmup, sched, lr_out);
    __syncthreads();
    SG_GRID_STRIDE(i, n) {
        float pi = p[i], mi = m[i], vi = v[i];
        adamw_update(pi, mi, vi, grad[i], sc, b1, b2, eps, wd);
        m[i] = mi;
        v[i] = vi;
        p[i] = pi;
    }
}

/* threads stride over n: ema = d ema + (1 - d) p in double (no fused multiply-add, as the CPU);
 * with the warm-up (warm), d from the device step, the same function as the CPU's */
__global__ void ema_kernel(float *ema, const float *p, int64_t n, double decay, int warm,
                           double inv_gamma, double power, const int64_t *step) {
    SG_PDL_ENTER();
    const double d = warm ? sg_ema_decay_at(decay, step[0], 1, inv_gamma, power) : decay;
    const double e = 1.0 - d;
    SG_GRID_STRIDE(i, n) {
        ema[i] = ema_update(d, e, ema[i], p[i]);
    }
}

/* One element of the fused pass: AdamW, then the EMA of the updated parameter. */
__device__ __forceinline__ void adamw_ema_update(float &p, float &m, float &v, float &ema,
                                                 float grad, const float sc[4], float b1, float b2,
                                                 float eps, float wd, double d, double e) {
    adamw_update(p, m, v, grad, sc, b1, b2, eps, wd);
    ema = ema_update(d, e, ema, p);
}

/* The training step's optimizer in one pass: AdamW, the EMA of the updated parameters and (pb
 * not NULL) their bf16 copy, reading grad, p, m, v, ema once and writing p, m, v, ema, pb once.
 * Thread mapping: threads stride over the n/4 groups of 4 consecutive elements (16-byte loads
 * and stores of every fp32 region, 8 bytes of pb), then over the n % 4 elements left, one
 * each. Per element exactly adamw_kernel's then ema_kernel's arithmetic. */
__global__ void adamw_ema_kernel(float *p, float *m, float *v, float *ema, uint16_t *pb,
                                 const float *grad, int64_t n, const float *scale,
                                 const int64_t *step, float lr, float b1, float b2, float eps,
                                 float wd, int warmup, sg_lr_sched sched, float *lr_out,
                                 double decay, int warm, double inv_gamma, double power) {
    SG_PDL_ENTER();
    __shared__ float sc[4];
    if (threadIdx.x == 0) adamw_scalars(sc, scale, step, lr, b1, b2, warmup, sched, lr_out);
    __syncthreads();
    const double d = warm ? sg_ema_decay_at(decay, step[0], 1, inv_gamma, power) : decay;
    const double e = 1.0 - d;
    const int64_t nv = n / 4;
    SG_GRID_STRIDE(j, nv) {
        float4 P = ((const float4 *)p)[j], M = ((const float4 *)m)[j], V = ((const float4 *)v)[j];
        float4 E = ((const float4 *)ema)[j];
        const float4 G = ((const float4 *)grad)[j];
        adamw_ema_update(P.x, M.x, V.x, E.x, G.x, sc, b1, b2, eps, wd, d, e);
        adamw_ema_update(P.y, M.y, V.y, E.y, G.y, sc, b1, b2, eps, wd, d, e);
        adamw_ema_update(P.z, M.z, V.z, E.z, G.z, sc, b1, b2, eps, wd, d, e);
        adamw_ema_update(P.w, M.w, V.w, E.w, G.w, sc, b1, b2, eps, wd, d, e);
        ((float4 *)p)[j] = P, ((float4 *)m)[j] = M, ((float4 *)v)[j] = V, ((float4 *)ema)[j] = E;
        if (pb)
            ((uint2 *)pb)[j] =
                make_uint2((uint32_t)dev_f32_to_bf16(P.x) | (uint32_t)dev_f32_to_bf16(P.y) << 16,
                           (uint32_t)dev_f32_to_bf16(P.z) | (uint32_t)dev_f32_to_bf16(P.w) << 16);
    }
    SG_GRID_STRIDE(r, n - 4 * nv) {
        const int64_t i = 4 * nv + r;
        float pi = p[i], mi = m[i], vi = v[i], ei = ema[i];
        adamw_ema_update(pi, mi, vi, ei, grad[i], sc, b1, b2, eps, wd, d, e);
        p[i] = pi, m[i] = mi, v[i] = vi, ema[i] = ei;
        if (pb) pb[i] = dev_f32_to_bf16(pi);
    }
}

/* one thread */
__global__ void step_increment_kernel(int64_t *step) {
    SG_PDL_ENTER();
    step[0] += 1;
}

/* one thread: the trainer reads watch and loss_sum at its log steps instead of the loss after
 * every step (no host sync per step), and still learns the exact step of a NaN or Inf */
__global__ void loss_watch_kernel(const float *loss, const float *sumsq, const int64_t *step,
                                  int64_t *watch, float *loss_sum) {
    SG_PDL_ENTER();
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

static int aligned_to(const void *ptr, uintptr_t bytes) {
    return ((uintptr_t)ptr & (bytes - 1)) == 0;
}

int cuda_adamw_ema(cudaStream_t st, float *p, float *m, float *v, float *ema, uint16_t *p_bf16,
                   const float *grad, int64_t n, const float *scale, const int64_t *step, float lr,
                   float b1, float b2, float eps, float wd, int warmup, sg_lr_sched sched,
                   float *lr_out, float decay, const sg_ema_sched *warm) {
    const char *fn = "cuda_adamw_ema";
    SG_ARG_CHECK(step != NULL, "%s: the step counter is required", fn);
    /* the regions start at arena offsets (256-aligned): 16-byte groups of 4 fp32, 8 bytes of
     * 4 bf16 */
    SG_ARG_CHECK(aligned_to(p, 16) && aligned_to(m, 16) && aligned_to(v, 16) &&
                     aligned_to(ema, 16) && aligned_to(grad, 16) && aligned_to(p_bf16, 8),
                 "%s: the regions must be 16-byte aligned (the bf16 copy 8)", fn);
    if (n <= 0) return SG_OK;
    const int64_t nv = n / 4;
    SG_LAUNCH(adamw_ema_kernel, sg_grid_for(nv > 0 ? nv : n), SG_THREADS, 0, st, p, m, v, ema,
              p_bf16, grad, n, scale, step, lr, b1, b2, eps, wd, warmup, sched, lr_out,
              (double)decay, warm ? 1 : 0, warm ? warm->inv_gamma : 1.0, warm ? warm->power : 1.0);
    SG_LAUNCH_CHECK("adamw_ema_kernel");
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
