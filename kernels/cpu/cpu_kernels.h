/* cpu_kernels.h — the CPU reference kernels: the spec every CUDA kernel is tested against.
 *
 * Conventions (one contract for every function below):
 * - fp32 in, fp32 out. bf16 storage is converted by the CPU backend around these calls.
 * - Activations are NHWC: x[N][H][W][C]. Conv weights are [Co][K][K][Ci]; linear weights are
 *   [M][K] (out, in) as in PyTorch.
 * - Every output is OVERWRITTEN, never accumulated. The backend implements accumulation
 *   (gradient += contribution) around the call, so a kernel has one job.
 * - Every reduction runs in a fixed order: the same inputs give the same bits, always.
 * - Outputs never alias inputs unless a function says it allows it.
 */
#ifndef SG_CPU_KERNELS_H
#define SG_CPU_KERNELS_H

#include <stdint.h>

#include "common/sg_pointwise.h"
#include "common/sg_sample_step.h"
#include "common/sg_schedule.h"

/* ---- convolution: K in {1, 3}, stride S in {1, 2}, zero padding: `pad` (0..K/2) rows and
 * columns at the top/left, at the bottom/right whatever the output size needs.
 * Ho = (H + 2*(K/2) - K) / S + 1, likewise Wo (pad = K/2: the symmetric rule; pad = 0 with
 * K = 3, S = 2 and even H: TensorFlow's SAME, 0 top/left and 1 bottom/right).
 * y[N,Ho,Wo,Co] = conv(x[N,H,W,Ci], w[Co,K,K,Ci]) + b[Co]   (b may be NULL) */
void cpu_conv2d_fwd(float *y, const float *x, const float *w, const float *b, int N, int H, int W,
                    int Ci, int Co, int K, int S, int pad);
/* dx[N,H,W,Ci] from dy[N,Ho,Wo,Co] and w. */
/* y[N,H,W,Co] = conv(h, w, b) (K x K, stride 1, h[N,H,W,Cm], w[Co,K,K,Cm]) + the 1x1 conv of
 * x[N,H,W,Cin] with ws[Co,Cin] and bs[Co]: a ResBlock's conv2 with its shortcut folded in
 * (conv2d_sc), both summed in fp32; the caller rounds y once. b, bs may be NULL. */
void cpu_conv2d_sc_fwd(float *y, const float *h, const float *w, const float *b, const float *x,
                       const float *ws, const float *bs, int N, int H, int W, int Cm, int Cin,
                       int Co, int K, int pad);
void cpu_conv2d_bwd_data(float *dx, const float *dy, const float *w, int N, int H, int W, int Ci,
                         int Co, int K, int S, int pad);
/* dw[Co,K,K,Ci] = sum over n,pixels of dy * x; db[Co] = sum of dy (db may be NULL). */
void cpu_conv2d_bwd_weight(float *dw, float *db, const float *dy, const float *x, int N, int H,
                           int W, int Ci, int Co, int K, int S, int pad);

/* ---- nearest 2x upsample + 3x3 stride-1 pad-1 conv, from the low-resolution input (upconv2d;
 * conv.c derives the sub-pixel form): y[N,2H,2W,Co] = conv3x3(upsample2x(x[N,H,W,Ci]), w) + b,
 * computed as four 2x2 convs of x (one per output parity class) with the folded weights
 * wf[4][Co][2][2][Ci] (cpu_upconv2d_fold). round_bf16: the folded weights are rounded to bf16
 * once (the bf16 plans: wf is summed in fp32 from the fp32 master weights, then rounded), else
 * kept in fp32. H, W: the low-res input's size. */
void cpu_upconv2d_fold(float *wf, const float *w, int Ci, int Co, int round_bf16);
void cpu_upconv2d_fwd(float *y, const float *x, const float *w, const float *b, int N, int H, int W,
                      int Ci, int Co, int round_bf16);
/* dx[N,H,W,Ci] from dy[N,2H,2W,Co] and w (folded as the forward). */
void cpu_upconv2d_bwd_data(float *dx, const float *dy, const float *w, int N, int H, int W, int Ci,
                           int Co, int round_bf16);
/* dw[Co,3,3,Ci] (the 3x3 conv's weight gradient: the folded gradient folded back), db[Co]
 * (may be NULL). */
void cpu_upconv2d_bwd_weight(float *dw, float *db, const float *dy, const float *x, int N, int H,
                             int W, int Ci, int Co);

/* ---- linear: y[N,M] = x[N,K] w[M,K]^T + b[M] (b may be NULL) */
void cpu_linear_fwd(float *y, const float *x, const float *w, const float *b, int N, int K, int M);
void cpu_linear_bwd_data(float *dx, const float *dy, const float *w, int N, int K, int M);
void cpu_linear_bwd_weight(float *dw, float *db, const float *dy, const float *x, int N, int K,
                           int M);

/* ---- group norm over x[N,HW,C] with G groups (C % G == 0), statistics over (HW, C/G).
 * y = (x - mean) * rstd * gamma[c] + beta[c]; mean[N,G], rstd[N,G] = 1/sqrt(var + eps) are
 * saved for the backward pass (biased variance, as PyTorch). */
void cpu_group_norm_fwd(float *y, float *mean, float *rstd, const float *x, const float *gamma,
                        const float *beta, int N, int HW, int C, int G, float eps);
/* dx[N,HW,C], dgamma[C], dbeta[C] from dy, x and the saved statistics. */
void cpu_group_norm_bwd(float *dx, float *dgamma, float *dbeta, const float *dy, const float *x,
                        const float *mean, const float *rstd, const float *gamma, int N, int HW,
                        int C, int G);

/* ---- norm_act (norm.c has the math): y = dropout(act(group_norm(x + v[n,c]))), the
 * ResBlock's GroupNorm fused with the time-embedding add before it (v may be NULL: none) and
 * the activation and dropout after it (the tail). Statistics as group_norm's, over x + v. */
typedef struct {
    int act;          /* SG_ACT_NONE or SG_ACT_SILU (common/sg_base.h) */
    float p;          /* drop probability after the activation; 0: no dropout */
    uint32_t purpose; /* the dropout's key, as cpu_dropout_fwd: sg_rng_dropout(seed, step, */
    uint64_t seed;    /* purpose, i0 + element index) >= p keeps an element */
    int64_t step;
    uint64_t i0;
} cpu_norm_tail;
/* Pass 1: mean[N,G], rstd[N,G] of x + v. */
void cpu_norm_act_stats(float *mean, float *rstd, const float *x, const float *v, int N, int HW,
                        int C, int G, float eps);
/* Pass 2: y[N,HW,C] from x, v and the statistics (the backward pass's recomputation calls it
 * alone, on the saved statistics: the same bits as the forward). */
void cpu_norm_act_apply(float *y, const float *x, const float *v, const float *mean,
                        const float *rstd, const float *gamma, const float *beta, int N, int HW,
                        int C, int G, const cpu_norm_tail *t);
/* Both passes. */
void cpu_norm_act_fwd(float *y, float *mean, float *rstd, const float *x, const float *v,
                      const float *gamma, const float *beta, int N, int HW, int C, int G, float eps,
                      const cpu_norm_tail *t);
/* dx[N,HW,C] (the gradient of x and of x + v), dv[N,C] (NULL: not wanted; needs v), dgamma[C],
 * dbeta[C] from dy and what the forward read and saved. */
void cpu_norm_act_bwd(float *dx, float *dv, float *dgamma, float *dbeta, const float *dy,
                      const float *x, const float *v, const float *mean, const float *rstd,
                      const float *gamma, const float *beta, int N, int HW, int C, int G,
                      const cpu_norm_tail *t);

/* ---- pointwise ops: cpu_<fn>(outputs, inputs, n) over n values, any output may alias any
 * input. Which ops, and their operands: common/sg_pointwise.h; their math: elementwise.c's
 * element functions (silu, add, silu_mul, gelu and their backward ops). */
#define SG_PW_CPU_DECL(op, fn, nin, nout, acc) void cpu_##fn(SG_PW_CPU_PARAMS(nin, nout));
SG_POINTWISE_LIST(SG_PW_CPU_DECL)
#undef SG_PW_CPU_DECL

/* ---- other elementwise ops over n values (y may alias x) */
void cpu_copy(float *y, const float *x, int64_t n);
void cpu_scale(float *y, const float *x, float s, int64_t n);

/* y[N,HW,C] = x[N,HW,C] + v[N,C] broadcast over HW (y may alias x). */
void cpu_add_nc_fwd(float *y, const float *x, const float *v, int N, int HW, int C);
/* dv[N,C] = sum over HW of dy[N,HW,C]. */
void cpu_add_nc_bwd(float *dv, const float *dy, int N, int HW, int C);

/* ---- resampling; H, W are the INPUT's spatial size.
 * upsample: y[N,2H,2W,C] = x[N,H,W,C] nearest; backward sums each 2x2 block.
 * avgpool:  y[N,H/2,W/2,C] = mean of 2x2 blocks (H, W even); backward spreads dy/4. */
void cpu_upsample2x_fwd(float *y, const float *x, int N, int H, int W, int C);
void cpu_upsample2x_bwd(float *dx, const float *dy, int N, int H, int W, int C);
void cpu_avgpool2x_fwd(float *y, const float *x, int N, int H, int W, int C);
void cpu_avgpool2x_bwd(float *dx, const float *dy, int N, int H, int W, int C);

/* ---- sinusoidal timestep embedding (DDPM / diffusers flip_sin_to_cos=False, shift=1):
 * half = dim/2, f_i = exp(-ln(10000) * i / (half - 1)), y[n] = [sin(t f_0..), cos(t f_0..)]. */
void cpu_timestep_emb(float *y, const int32_t *t, int N, int dim);
/* ---- the class embedding (diffusers' class_embedding, an nn.Embedding): y[n] = table[lab[n]]
 * (table [rows, dim]); its backward dtable[r] = the sum over n with lab[n] = r of dy[n], in
 * sample order (a row no sample picked: 0). Every label lies in [0, rows). */
void cpu_class_emb_fwd(float *y, const int32_t *lab, const float *table, int N, int dim);
void cpu_class_emb_bwd(float *dtable, const float *dy, const int32_t *lab, int N, int dim,
                       int rows);

/* ---- self-attention, `heads` heads of D = C/heads channels over L = H*W positions.
 * qkv[N,L,3C] holds q | k | v along channels (head h owns channels h*D .. h*D+D-1 of each).
 * P[N,heads,L,L] = softmax_row(q k^T / sqrt(D)) is saved; y[N,L,C] = P v. */
/* y NULL: P alone, the same bits (attention_p, the recompute of P in the backward pass) */
void cpu_attention_fwd(float *y, float *P, const float *qkv, int N, int L, int C, int heads);
/* dqkv[N,L,3C] from dy[N,L,C], qkv and P. */
void cpu_attention_bwd(float *dqkv, const float *dy, const float *qkv, const float *P, int N, int L,
                       int C, int heads);

/* ---- DDPM: the betas of the schedule b (common/sg_schedule.h: linear or cosine, either
 * optionally rescaled to zero terminal SNR), i in [0,T);
 * abar_t = prod_{i<=t} (1 - beta_i), accumulated in double in increasing i.
 * x_t[n] = sqrt(abar_t) x0[n] + sqrt(1 - abar_t) eps[n]; each sample has `per` values. */
double sg_ddpm_abar(const sg_betas *b, int t);
/* beta_t (t in [0, T)): the expression sg_ddpm_abar multiplies, so alpha_t and abar_t agree to
 * the bit. */
double sg_ddpm_beta(const sg_betas *b, int t);
/* beta[t] = sg_ddpm_beta(b, t) for every t < b->T, the same bits, in O(T) (with zero_snr one
 * sg_ddpm_beta is O(T) itself) */
void sg_ddpm_betas(const sg_betas *b, double *beta);
/* abar[t] = sg_ddpm_abar(b, t) for every t < b->T, the same bits, in O(T) */
void sg_ddpm_abars(const sg_betas *b, double *abar);
void cpu_ddpm_noise(float *xt, const float *x0, const float *eps, const int32_t *t, int N, int per,
                    const sg_betas *b);
/* v prediction's target: v[n] = sqrt(abar_t) eps[n] - sqrt(1 - abar_t) x0[n] (Salimans & Ho
 * 2022), by the same rows and rounding as cpu_ddpm_noise */
void cpu_ddpm_v(float *v, const float *x0, const float *eps, const int32_t *t, int N, int per,
                const sg_betas *b);
/* The noising table (common/sg_schedule.h): rows[t] = {sqrt(abar_t), sqrt(1 - abar_t)} for
 * t < b->T, the values cpu_ddpm_noise multiplies, bit for bit. */
void cpu_ddpm_table(sg_ddpm_row *rows, const sg_betas *b);
/* min-SNR-gamma loss weighting (Hang et al. 2023, as diffusers' training scripts compute it):
 * SNR = abar / (1 - abar), the weight min(SNR, gamma) / SNR for an eps model, min(SNR, gamma) /
 * (SNR + 1) for a v model (vpred 1), in double. The table: w[t] for every t < b->T, rounded to
 * fp32 (the training step's "loss_weight", written once by the executor). */
double sg_min_snr_weight(double abar, double gamma, int vpred);
void cpu_loss_weight_table(float *w, const sg_betas *b, double gamma, int vpred);
/* P2 (Choi et al. 2022): (k + SNR)^-gamma for an eps model, times SNR / (SNR + 1) for v (0 at
 * abar 0), SNR = abar / (1 - abar); the table of every timestep's, as cpu_loss_weight_table */
double sg_p2_weight(double abar, double gamma, double k, int vpred);
void cpu_p2_weight_table(float *w, const sg_betas *b, double gamma, double k, int vpred);

/* ---- the device-resident sampler (common/sg_sample_step.h; the math is graph/sampler.h's).
 * The step table for a run visiting the timesteps ts[0 .. n) (decreasing, ts[0] = T - 1):
 * rows[k] = step k, rows[n .. cap) zeroed (SG_SAMPLE_NONE). sampler (SG_TABLE_*): DDIM from ts[k]
 * to ts[k+1] (-1 after the last) with eta in [0, 1]; DPM-Solver++(2M) between the same
 * timesteps (eta 0; order 1 at the first and the last step, as diffusers' lower_order_final with
 * final_sigmas_type "zero"); else DDPM from ts[k] to ts[k] - 1 (eta 0), with the variance
 * var_large 0: beta~_t (the posterior's), 1: beta_t (DDIM, DPM: 0). clip: x0_pred clamped to
 * [-1, 1]. DDPM and DDIM coefficients by the expressions of sg_ddpm_step_var / sg_ddim_step_eta
 * (graph/sampler.h), so the steps agree bit for bit with those functions; DPM's are written out
 * at dpm_row (kernels/cpu/sample_step.c). A host helper (both backends' tables come from it);
 * SG_ERR only when out of host memory. */
int sg_sample_table(sg_sample_row *rows, int cap, const int *ts, int n, int sampler, int clip,
                    double eta, int var_large, const sg_betas *b);
/* Karras et al. 2022's sigmas for S steps (rho 7, from sigma at T - 1 down to sigma at 0,
 * sigma_t = sqrt((1 - abar_t) / abar_t)) into sig, and the timesteps the model is asked at into
 * ts: each sigma's t interpolated in log sigma and rounded (diffusers' _convert_to_karras and
 * _sigma_to_t, its use_karras_sigmas); ts may repeat near 0. SG_ERR where abar at T - 1 is 0
 * (zero terminal SNR: an infinite sigma). ab: the T abars. */
int sg_karras_timesteps(int S, const double *ab, int T, double *sig, int *ts);
/* The step table of DPM-Solver++(2M) over n Karras sigmas (sg_karras_timesteps; diffusers'
 * DPMSolverMultistepScheduler with use_karras_sigmas): each step between two sigmas, its
 * coefficients and x0 conversion from those sigmas (abar = 1 / (sigma^2 + 1)), the model asked at
 * the rounded timestep ts[k] (written here). SG_ERR as sg_karras_timesteps, or out of memory. */
int sg_sample_table_karras(sg_sample_row *rows, int cap, int *ts, int n, int clip,
                           const sg_betas *b);
/* One step of a batch of N images of `per` values, chosen by the step counter k:
 *   k = -1        start: x[i] = sg_rng_normal(seed, T, SG_RNG_SAMPLE, first + i) (x_T);
 *   0 <= k < n_rows   denoising step k: x[i] = sg_sample_update_x0h(rows[k], x[i], eps[i], z[i],
 *                 &x0h[i]),
 *                 z[i] = sg_rng_normal(seed, rows[k].t, SG_RNG_SAMPLE, first + i) where the
 *                 row draws noise (DDPM, t > 0);
 *   otherwise     x unchanged.
 * Then xt = x (the backend rounds it to the model's dtype) and, where rows[k + 1] is a step,
 * t[0 .. N) = rows[k + 1].t (the next forward's timestep); else t is left as it is. x is
 * updated in place; xt may alias x.
 * guided (classifier-free guidance with scale w): the forward pass holds every image twice, the
 * conditional copies first: eps[N per + i] is image i's unconditional prediction, the update
 * reads sg_sample_guide(w, eps[i], eps[N per + i]), and xt (then 2 N per values, not aliasing
 * x) and t (2 N) are written for both copies. phi > 0 (guided only): that prediction times its
 * image's guidance-rescale factor (common/sg_sample_step.h: sg_guide_rescale).
 * x0h[N per] (fp32) is DPM-Solver++(2M)'s x0 history: zeroed at the start (k = -1), read and
 * written by its rows only. */
void cpu_sample_step(float *x, float *xt, int32_t *t, float *x0h, const float *eps,
                     const sg_sample_row *rows, int n_rows, int64_t k, uint64_t seed,
                     uint64_t first, int N, int64_t per, int T, int guided, double w, double phi);
/* the guidance-rescale factor of the image whose values start at i0 (eps: a guided forward's
 * 2 n predictions, the conditional ones first), in the header's fixed order */
double cpu_sample_rescale_factor(const float *eps, int64_t n, int64_t i0, int64_t per, double w,
                                 double phi);

/* ---- loss: loss[0] = sum((pred - target)^2) / (n parts) over n values (blocked sum in a
 * fixed order): the mean with parts = 1; one of `parts` equal micro-batches' share of the
 * mean over all of them otherwise (the caller adds the shares); backward:
 * dpred = scale * 2 (pred - target) / n, scale = dloss. */
void cpu_mse_fwd(float *loss, const float *pred, const float *target, int64_t n, int parts);
void cpu_mse_bwd(float *dpred, const float *pred, const float *target, int64_t n, float dloss);
/* The weighted loss (min-SNR): the N samples of n/N consecutive values each, sample b's squared
 * errors times w_b = wtab[t[b]] (double from fp32):
 *   loss = (1/(n parts)) sum_i w_b(i) (pred_i - target_i)^2,  dpred_i = k_b (pred_i - target_i)
 * with k_b = fp32(2 dloss w_b / n). The same blocked sum and order as cpu_mse_fwd; with every
 * w_b = 1 the same bits as the unweighted pair. */
void cpu_mse_w_fwd(float *loss, const float *pred, const float *target, int64_t n, int parts,
                   const int32_t *t, const float *wtab, int N);
void cpu_mse_w_bwd(float *dpred, const float *pred, const float *target, int64_t n, float dloss,
                   const int32_t *t, const float *wtab, int N);

/* ---- optimizer, over flat regions of n fp32 values.
 * sumsq: out[0] = sum of g^2 in a fixed blocked order (the global grad norm is its sqrt). */
void cpu_sumsq(float *out, const float *g, int64_t n);
/* clip: scale[0] = min(1, max_norm / (norm + 1e-6)) with norm = sqrt(sumsq[0]). */
void cpu_clip_scale(float *scale, const float *sumsq, float max_norm);
/* AdamW at step number `step` (0-based; bias correction uses step+1):
 * lr_t = lr * min(1, (step+1) / warmup) (warmup <= 0: no warmup)
 * g = grad * scale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2
 * p -= lr_t * ( mhat / (sqrt(vhat) + eps) + wd * p ), mhat = m/(1-b1^(step+1)), likewise v.
 * lr_t = sg_lr_at(lr, step + 1, warmup, sched) (common/sg_schedule.h; sched NULL: constant
 * after the warm-up). Writes the lr used to lr_out[0] when lr_out is not NULL. */
void cpu_adamw(float *p, float *m, float *v, const float *grad, int64_t n, const float *scale,
               int64_t step, float lr, float b1, float b2, float eps, float wd, int warmup,
               const sg_lr_sched *sched, float *lr_out);
/* ema = d * ema + (1 - d) * p; d = decay, or with warm (not NULL) diffusers' warm-up decay at
 * the 0-based step being finished, at most decay (sg_ema_decay_at) */
void cpu_ema(float *ema, const float *p, int64_t n, float decay, const sg_ema_sched *warm,
             int64_t step);
/* cpu_adamw, then cpu_ema of the updated parameters, in one pass: p, m, v, ema and lr_out end
 * bit for bit as the two calls leave them (shared per-element expressions). p_copy (NULL: none)
 * receives the updated p: the CPU backend rounds it once into the bf16 weight copy. */
void cpu_adamw_ema(float *p, float *m, float *v, float *ema, float *p_copy, const float *grad,
                   int64_t n, const float *scale, int64_t step, float lr, float b1, float b2,
                   float eps, float wd, int warmup, const sg_lr_sched *sched, float *lr_out,
                   float decay, const sg_ema_sched *warm);
/* The trainer's watch (one step-state scalar each): when the loss or the gradient sum of
 * squares is not finite and *watch is still 0, *watch = step + 1 (the 1-based step that went
 * wrong); always *loss_sum += *loss (the trainer averages and resets it per log line). */
void cpu_loss_watch(const float *loss, const float *sumsq, const void *step, void *watch,
                    float *loss_sum);

/* ---- randomness and data, all drawn from common/philox.h keyed by (seed, step, purpose, index)
 * so that the CUDA kernels draw exactly the same numbers. The index is GLOBAL: under data
 * parallelism (docs/data-parallel.md) a rank computes a slice of the batch, and i0 (s0 for
 * samples) is the global index of its first element, so N ranks together draw exactly the
 * numbers one process with the whole batch draws. One process: i0 = s0 = 0. */
/* x0[N,H,W,C] in [-1, 1] gathered from the uploaded dataset data[ndata,H0,W0,C] (uint8):
 * sample i of this call is g = step*B + s0 + i of the run (B: the global batch), epoch =
 * g / ndata, item = sg_perm(seed, epoch, g % ndata, ndata); pixels map v -> v/127.5 - 1, the
 * image sits centred with -1 padding ((H-H0)/2 rows above, (W-W0)/2 columns left), and is
 * mirrored left-right when flip != 0 and sg_rng_bit(seed, step, SG_RNG_FLIP, s0 + i) is set. */
void cpu_gather_batch(float *x0, const uint8_t *data, int64_t ndata, int H0, int W0, int C, int N,
                      int H, int W, uint64_t seed, int64_t step, int flip, int64_t B, int64_t s0);
/* The labels of the items cpu_gather_batch takes (sg_batch_item of the same g): y[i] =
 * labels[item], or the null class `classes` where sg_rng_uniform(seed, step, SG_RNG_CLASS_DROP,
 * s0 + i) < p (classifier-free guidance's label dropout). */
void cpu_gather_labels(int32_t *y, const int32_t *labels, int64_t ndata, int N, int classes,
                       float p, uint64_t seed, int64_t step, int64_t B, int64_t s0);
/* t[i] uniform in [0, T) from sg_rng_index(seed, step, SG_RNG_TIMESTEP, i0 + i, T). */
void cpu_sample_timesteps(int32_t *t, int N, int T, uint64_t seed, int64_t step, uint64_t i0);
/* eps[i] ~ N(0, 1) = sg_rng_normal(seed, step, purpose, i0 + i). */
void cpu_gaussian(float *eps, int64_t n, uint64_t seed, int64_t step, uint32_t purpose,
                  uint64_t i0);
/* Offset noise (Guttenberg 2023; diffusers' --noise_offset): eps[i] = z_i + s zo, z_i as
 * cpu_gaussian (SG_RNG_NOISE at i0 + i) and zo = sg_rng_normal(seed, step, SG_RNG_NOISE_OFFSET,
 * (q0 + i / per) C + i % C), one normal per (sample, channel) of samples of per values each,
 * channels innermost (NHWC); q0 is the first sample's global index, so slices draw what one
 * call draws. In float: z + s * zo, the product rounded first. */
void cpu_noise_offset(float *eps, int64_t n, int64_t per, int C, float s, uint64_t seed,
                      int64_t step, uint64_t i0, uint64_t q0);
/* Input perturbation (Ning et al. 2023; diffusers' --input_perturbation), in place on noise eps
 * already drawn: eps[i] += g xi_i, xi_i = sg_rng_normal(seed, step, SG_RNG_PERTURB, i0 + i). In
 * float: eps + g * xi, the product rounded first. */
void cpu_noise_perturb(float *eps, int64_t n, float g, uint64_t seed, int64_t step, uint64_t i0);
/* Inverted dropout: keep x[i] * 1/(1-p) where sg_rng_dropout(seed, step, purpose, i0 + i) >= p,
 * else 0. The backward regenerates the same mask from the same key: nothing is stored. */
void cpu_dropout_fwd(float *y, const float *x, int64_t n, float p, uint64_t seed, int64_t step,
                     uint32_t purpose, uint64_t i0);
void cpu_dropout_bwd(float *dx, const float *dy, int64_t n, float p, uint64_t seed, int64_t step,
                     uint32_t purpose, uint64_t i0);

/* ---- threads: the kernels share their work out over a pool (kernels/cpu/scratch.h), and the
 * results are the same bits whatever its size.
 * sg_cpu_threads: SG_CPU_THREADS from the environment when set (1..256), else the CPUs this
 * process may run on (its affinity mask: an MPI launcher that binds each rank to a core gives
 * each rank one).
 * sg_cpu_set_threads(n): n threads from now on (n <= 0: back to that default).
 * sg_cpu_share_threads(sharers): `sharers` processes (this one included) run on the CPUs this
 * one may run on: unless SG_CPU_THREADS is set, take 1/sharers of them (at least one);
 * returns the threads now used. */
int sg_cpu_threads(void);
void sg_cpu_set_threads(int n);
int sg_cpu_share_threads(int sharers);

#endif
