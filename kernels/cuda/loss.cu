/* loss.cu — the DDPM training loss: mean squared error between predicted and true noise.
 *
 * Shapes: pred[n] (dtype pdt), target[n] (dtype tdt), loss[1] fp32 in device memory.
 *   loss (+)= (1/(n parts)) sum w (pred - target)^2,   dpred = dloss * 2 w (pred - target) / n
 * w: 1, or with weights (min-SNR; sg_loss_weights) the table's entry at the element's sample's
 * timestep
 * (parts: the step's micro-batches, each adding its share of their mean; 1 is the mean)
 * The sum: sg_ws_sum_blocks(n) blocks; thread g of the grid adds the elements
 * g, g + grid, g + 2 grid, ... in double, each block reduces its threads in a fixed tree and
 * writes one double partial; one block then adds the partials in a fixed order. The order
 * depends on n alone (not the same blocking as the CPU's, so the last bits may differ).
 * The backward's coefficient 2 dloss / n is computed once, as the CPU reference does.
 */
#include "kernels/cuda/cuda_common.cuh"

/* ================================ kernels ================================ */

/* blockIdx.x: one of gridDim.x partial blocks; threads stride over n with the grid's width.
 * wtab (min-SNR): element i's squared error times wtab[t[i / per]] in double; NULL: unweighted
 * (its own loop: the expression, and so the bits, of the loss before weighting existed) */
__global__ void mse_partial_kernel(double *part, const void *pred, int pdt, const void *target,
                                   int tdt, int64_t n, const int32_t *t, const float *wtab,
                                   int64_t per) {
    SG_PDL_ENTER();
    __shared__ double sh[SG_THREADS];
    double s = 0.0;
    if (wtab) {
        SG_GRID_STRIDE(i, n) {
            double d = (double)dev_ld(pred, i, pdt) - (double)dev_ld(target, i, tdt);
            s += (double)wtab[t[i / per]] * (d * d);
        }
    } else {
        SG_GRID_STRIDE(i, n) {
            double d = (double)dev_ld(pred, i, pdt) - (double)dev_ld(target, i, tdt);
            s += d * d;
        }
    }
    s = dev_block_sum_d(s, sh);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}

/* one block; threads stride over the nb partials, then the tree: loss[0] (+)= sum / (n parts) */
__global__ void mse_final_kernel(float *loss, const double *part, int nb, int64_t n, int parts,
                                 int accum) {
    SG_PDL_ENTER();
    __shared__ double sh[SG_THREADS];
    double s = 0.0;
    for (int b = threadIdx.x; b < nb; b += SG_THREADS) s += part[b];
    s = dev_block_sum_d(s, sh);
    if (threadIdx.x == 0) {
        const float v = (float)(s / ((double)n * parts));
        loss[0] = accum ? loss[0] + v : v;
    }
}

/* threads stride over n: dpred (+)= k (pred - target); with wtab (min-SNR) k is element i's
 * sample's fp32(2 dloss w / n), w = wtab[t[i / per]] in double (the CPU reference's expression) */
__global__ void mse_bwd_kernel(void *dpred, const void *pred, int pdt, const void *target, int tdt,
                               int64_t n, float k, int accum, const int32_t *t, const float *wtab,
                               int64_t per, float dloss) {
    SG_PDL_ENTER();
    SG_GRID_STRIDE(i, n) {
        const float kb =
            wtab ? (float)(2.0 * (double)dloss * (double)wtab[t[i / per]] / (double)n) : k;
        dev_st_acc(dpred, i, kb * (dev_ld(pred, i, pdt) - dev_ld(target, i, tdt)), pdt, accum);
    }
}

/* =============================== launchers =============================== */

int cuda_mse_fwd(cudaStream_t st, float *loss, const void *pred, int pdt, const void *target,
                 int tdt, int64_t n, int parts, int accum, const sg_loss_weights *w, void *ws,
                 int64_t ws_bytes) {
    const char *fn = "cuda_mse_fwd";
    SG_DT_CHECK(pdt, fn);
    SG_DT_CHECK(tdt, fn);
    SG_ARG_CHECK(n > 0, "%s: n must be positive", fn);
    SG_ARG_CHECK(parts > 0, "%s: parts must be positive", fn);
    SG_ARG_CHECK(!w || (w->t && w->table && w->N > 0 && n % w->N == 0),
                 "%s: the weights need t, a table and a sample count dividing n", fn);
    SG_WS_CHECK(sg_ws_mse_fwd(n), ws_bytes, fn);
    const int nb = (int)sg_ws_sum_blocks(n);
    SG_LAUNCH(mse_partial_kernel, nb, SG_THREADS, 0, st, (double *)ws, pred, pdt, target, tdt, n,
              w ? w->t : (const int32_t *)NULL, w ? w->table : (const float *)NULL,
              w ? n / w->N : n);
    SG_LAUNCH_CHECK("mse_partial_kernel");
    SG_LAUNCH(mse_final_kernel, 1, SG_THREADS, 0, st, loss, (const double *)ws, nb, n, parts,
              accum);
    SG_LAUNCH_CHECK("mse_final_kernel");
    return SG_OK;
}

int cuda_mse_bwd(cudaStream_t st, void *dpred, const void *pred, int pdt, const void *target,
                 int tdt, int64_t n, float dloss, int accum, const sg_loss_weights *w) {
    SG_DT_CHECK(pdt, "cuda_mse_bwd");
    SG_DT_CHECK(tdt, "cuda_mse_bwd");
    SG_ARG_CHECK(!w || (w->t && w->table && w->N > 0 && n % w->N == 0),
                 "cuda_mse_bwd: the weights need t, a table and a sample count dividing n");
    if (n <= 0) return SG_OK;
    const float k = (float)(2.0 * (double)dloss / (double)n);
    SG_LAUNCH(mse_bwd_kernel, sg_grid_for(n), SG_THREADS, 0, st, dpred, pred, pdt, target, tdt, n,
              k, accum, w ? w->t : (const int32_t *)NULL, w ? w->table : (const float *)NULL,
              w ? n / w->N : n, dloss);
    SG_LAUNCH_CHECK("mse_bwd_kernel");
    return SG_OK;
}
