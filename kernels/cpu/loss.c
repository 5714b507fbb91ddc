/* loss.c — the DDPM training loss: mean squared error between predicted and true noise.
 *
 * Shapes: pred[n], target[n] (flat; n = N*H*W*C), loss[1].
 *   loss = (1/(n parts)) sum_i w_b (pred_i - target_i)^2   (parts: the step's micro-batches; 1
 *          is the plain mean, and K shares of K equal micro-batches add up to their mean)
 *   dpred_i = dloss * 2 w_b (pred_i - target_i) / n
 * w_b: sample b's weight (min-SNR: the table's entry at its timestep), 1 unweighted.
 * The sum is blocked: each block of SG_LOSS_BLOCK values is summed in increasing i in double,
 * then the block partials are summed in increasing block order, also in double. The order is
 * fixed by n alone, and mirrors the per-block partials + final pass a GPU reduction uses.
 */
#include "kernels/cpu/cpu_kernels.h"

#define SG_LOSS_BLOCK 4096

/* sample b's weight: wtab[t[b]] in double, 1 without a table (w x (d d) with w = 1 is d d
 * exactly: the unweighted pair is this code, the same bits) */
static double weight_of(const int32_t *t, const float *wtab, int64_t b) {
    return wtab ? (double)wtab[t[b]] : 1.0;
}

void cpu_mse_w_fwd(float *loss, const float *pred, const float *target, int64_t n, int parts,
                   const int32_t *t, const float *wtab, int N) {
    const int64_t per = N > 0 ? n / N : n;
    double total = 0.0;
    for (int64_t b0 = 0; b0 < n; b0 += SG_LOSS_BLOCK) {
        int64_t b1 = n - b0 < SG_LOSS_BLOCK ? n : b0 + SG_LOSS_BLOCK;
        double part = 0.0;
        for (int64_t i = b0; i < b1; i++) {
            double d = (double)pred[i] - (double)target[i];
            part += weight_of(t, wtab, i / per) * (d * d);
        }
        total += part;
    }
    loss[0] = n > 0 ? (float)(total / ((double)n * parts)) : 0.0f;
}

void cpu_mse_w_bwd(float *dpred, const float *pred, const float *target, int64_t n, float dloss,
                   const int32_t *t, const float *wtab, int N) {
    const int64_t per = N > 0 ? n / N : n;
    for (int64_t b = 0; b * per < n; b++) {
        /* one fp32 coefficient per sample, as a GPU kernel would hold it */
        const float k = (float)(2.0 * (double)dloss * weight_of(t, wtab, b) / (double)n);
        for (int64_t i = b * per; i < (b + 1) * per; i++) dpred[i] = k * (pred[i] - target[i]);
    }
}

void cpu_mse_fwd(float *loss, const float *pred, const float *target, int64_t n, int parts) {
    cpu_mse_w_fwd(loss, pred, target, n, parts, NULL, NULL, 1);
}

void cpu_mse_bwd(float *dpred, const float *pred, const float *target, int64_t n, float dloss) {
    cpu_mse_w_bwd(dpred, pred, target, n, dloss, NULL, NULL, 1);
}
