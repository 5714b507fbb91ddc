/* loss.c — the DDPM training loss: mean squared error between predicted and true noise.
 *
 * Shapes: pred[n], target[n] (flat; n = N*H*W*C), loss[1].
 *   loss = (1/(n parts)) sum_i (pred_i - target_i)^2   (parts: the step's micro-batches; 1 is
 *          the plain mean, and K shares of K equal micro-batches add up to their mean)
 *   dpred_i = dloss * 2 (pred_i - target_i) / n
 * The sum is blocked: each block of SG_LOSS_BLOCK values is summed in increasing i in double,
 * then the block partials are summed in increasing block order, also in double. The order is
 * fixed by n alone, and mirrors the per-block partials + final pass a GPU reduction uses.
 */
#include "kernels/cpu/cpu_kernels.h"

#define SG_LOSS_BLOCK 4096

void cpu_mse_fwd(float *loss, const float *pred, const float *target, int64_t n, int parts) {
    double total = 0.0;
    for (int64_t b0 = 0; b0 < n; b0 += SG_LOSS_BLOCK) {
        int64_t b1 = n - b0 < SG_LOSS_BLOCK ? n : b0 + SG_LOSS_BLOCK;
        double part = 0.0;
        for (int64_t i = b0; i < b1; i++) {
            double d = (double)pred[i] - (double)target[i];
            part += d * d;
        }
        total += part;
    }
    loss[0] = n > 0 ? (float)(total / ((double)n * parts)) : 0.0f;
}

void cpu_mse_bwd(float *dpred, const float *pred, const float *target, int64_t n, float dloss) {
    /* One fp32 coefficient for every element, as a GPU kernel would hold it. */
    float k = (float)(2.0 * (double)dloss / (double)n);
    for (int64_t i = 0; i < n; i++) dpred[i] = k * (pred[i] - target[i]);
}
