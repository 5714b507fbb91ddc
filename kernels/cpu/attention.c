/* attention.c — multi-head self-attention over the pixels of a feature map.
 *
 * Shapes: L = H*W positions, C channels, `heads` heads of D = C/heads channels.
 *   qkv[N,L,3C]: q = channels [0,C), k = [C,2C), v = [2C,3C); head h owns channels
 *                h*D .. h*D+D-1 of each, so its q/k/v are L x D matrices with row stride 3C.
 *   P[N,heads,L,L] (saved), y[N,L,C] with head h writing channels h*D .. h*D+D-1.
 *
 * Forward, per (n, h), with a = 1/sqrt(D):
 *   S = a q k^T,  P = softmax over each row of S,  y_h = P v.
 * Backward, per (n, h), from dy_h (L x D, row stride C):
 *   dv = P^T dy_h
 *   dP = dy_h v^T
 *   dS_ij = P_ij (dP_ij - sum_j' P_ij' dP_ij')        (the softmax Jacobian, row by row)
 *   dq = a dS k,  dk = a dS^T q
 * Every product is an sgemm (sg_cpu_sgemm: thread-count independent bits, see scratch.h) that
 * reads q/k/v in place through the 3C row stride. dP/dS is an
 * L x L temporary: rows are processed in chunks of the fixed scratch buffer, dq rows are
 * independent, and dk sums its chunk products with beta = 1 in increasing chunk order.
 * Softmax row sums are in double, in increasing j.
 */
#include "common/sg_base.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/scratch.h"

#include <math.h>

void cpu_attention_fwd(float *y, float *P, const float *qkv, int N, int L, int C, int heads) {
    SG_ASSERT(heads > 0 && C % heads == 0 && L > 0);
    int D = C / heads, ld = 3 * C;
    float a = (float)(1.0 / sqrt((double)D));
    for (int n = 0; n < N; n++) {
        const float *base = qkv + (int64_t)n * L * ld;
        for (int h = 0; h < heads; h++) {
            const float *q = base + h * D, *k = base + C + h * D, *v = base + 2 * C + h * D;
            float *Pnh = P + ((int64_t)n * heads + h) * L * L;
            sg_cpu_sgemm(0, 1, L, L, D, a, q, ld, k, ld, 0.0f, Pnh, L);
            /* Row softmax, shifted by the row max so exp never overflows. */
            for (int i = 0; i < L; i++) {
                float *row = Pnh + (int64_t)i * L;
                float mx = row[0];
                for (int j = 1; j < L; j++) mx = row[j] > mx ? row[j] : mx;
                double sum = 0.0;
                for (int j = 0; j < L; j++) {
                    row[j] = expf(row[j] - mx);
                    sum += row[j];
                }
                float inv = (float)(1.0 / sum);
                for (int j = 0; j < L; j++) row[j] *= inv;
            }
            if (y) /* NULL: P alone (attention_p, the backward pass's recompute) */
                sg_cpu_sgemm(0, 0, L, D, L, 1.0f, Pnh, L, v, ld, 0.0f,
                             y + (int64_t)n * L * C + h * D, C);
        }
    }
}

void cpu_attention_bwd(float *dqkv, const float *dy, const float *qkv, const float *P, int N, int L,
                       int C, int heads) {
    SG_ASSERT(heads > 0 && C % heads == 0 && L > 0 && L <= SG_CPU_SCRATCH_FLOATS);
    int D = C / heads, ld = 3 * C;
    float a = (float)(1.0 / sqrt((double)D));
    int chunk = SG_CPU_SCRATCH_FLOATS / L < L ? SG_CPU_SCRATCH_FLOATS / L : L;
    float *dS = sg_cpu_scratch_acquire();
    for (int n = 0; n < N; n++) {
        const float *base = qkv + (int64_t)n * L * ld;
        float *dbase = dqkv + (int64_t)n * L * ld;
        const float *dyn = dy + (int64_t)n * L * C;
        for (int h = 0; h < heads; h++) {
            const float *q = base + h * D, *k = base + C + h * D, *v = base + 2 * C + h * D;
            float *dq = dbase + h * D, *dk = dbase + C + h * D, *dv = dbase + 2 * C + h * D;
            const float *Pnh = P + ((int64_t)n * heads + h) * L * L;
            const float *dyh = dyn + h * D;
            /* dv = P^T dy_h */
            sg_cpu_sgemm(1, 0, L, D, L, 1.0f, Pnh, L, dyh, C, 0.0f, dv, ld);
            for (int r0 = 0; r0 < L; r0 += chunk) {
                int rows = L - r0 < chunk ? L - r0 : chunk;
                /* dP rows r0.. = dy_h[r0..] v^T */
                sg_cpu_sgemm(0, 1, rows, L, D, 1.0f, dyh + (int64_t)r0 * C, C, v, ld, 0.0f, dS, L);
                /* dS = P (dP - rowdot(P, dP)), in place */
                for (int i = 0; i < rows; i++) {
                    const float *pr = Pnh + (int64_t)(r0 + i) * L;
                    float *sr = dS + (int64_t)i * L;
                    double dot = 0.0;
                    for (int j = 0; j < L; j++) dot += (double)pr[j] * sr[j];
                    float fdot = (float)dot;
                    for (int j = 0; j < L; j++) sr[j] = pr[j] * (sr[j] - fdot);
                }
                /* dq rows r0.. = a dS k;  dk += a dS^T q[r0..] */
                sg_cpu_sgemm(0, 0, rows, D, L, a, dS, L, k, ld, 0.0f, dq + (int64_t)r0 * ld, ld);
                sg_cpu_sgemm(1, 0, L, D, rows, a, dS, L, q + (int64_t)r0 * ld, ld,
                             r0 == 0 ? 0.0f : 1.0f, dk, ld);
            }
        }
    }
    sg_cpu_scratch_release();
}
