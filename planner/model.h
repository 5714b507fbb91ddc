/* model.h — model configurations and the graph builders (docs/model.md is the reference).
 *
 * sg_build_train_step builds the whole training step as one graph: batch gather, timestep and
 * noise draws, DDPM noising, the UNet forward, MSE, the backward pass, gradient-norm clip,
 * AdamW, EMA and the step increment. sg_build_forward builds the UNet alone, and
 * sg_build_sampler appends the sampler's update to it: together, the sampling plan.
 */
#ifndef SG_MODEL_H
#define SG_MODEL_H

#include "common/sg_schedule.h"
#include "planner/ir.h"

#define SG_MAX_LEVELS 8
#define SG_MAX_RES_BLOCKS 16
/* The step is unrolled: K micro-batches are K copies of the forward and backward nodes, so the
 * plan's size (and the planner's time) grows with K; 64 keeps unet_cifar's plan in seconds. */
#define SG_MAX_GRAD_ACCUM 64
/* diffusion steps: the tables are O(T), the CPU noising O(T) per sample (improved-diffusion
 * trained with 4000) */
#define SG_MAX_T (1 << 16)
/* class-conditional models: the most classes (data/dataset.h's DATA_MAX_CLASSES) */
#define SG_MAX_CLASSES 4096
/* the linear schedule's default betas (DDPM's); a cosine config keeps them, unused */
#define SG_BETA1_DEFAULT 1e-4f
#define SG_BETAT_DEFAULT 0.02f
enum { SG_PRED_EPS = 0, SG_PRED_V = 1 };

/* The padding of the stride-2 3x3 downsampling conv, as its top/left padding (the
 * bottom/right padding follows from the output size H/2, see OP_CONV2D):
 *   SAME       0 top/left, 1 bottom/right: TensorFlow's SAME, what DDPM (diffusion_tf) trained
 *              with; diffusers' Downsample2D with downsample_padding = 0
 *   SYMMETRIC  1 on every side (the last row/column of padding is never read): ADM, and
 *              diffusers with downsample_padding = 1. Checkpoints written before the field
 *              existed are SYMMETRIC. */
enum { SG_DOWN_PAD_SAME = 0, SG_DOWN_PAD_SYMMETRIC = 1 };
/* sg_model_cfg.fuse's default: by precision */
#define SG_FUSE_AUTO (-1)
/* sg_model_cfg.fuse = SG_FUSE_BITWISE (tests; no flag sets it): only the fusions that keep the
 * unfused plan's bits (the normalisation prologues, the residual epilogues), not upconv2d
 * (folded weights rounded once) nor conv2d_sc (the shortcut summed in fp32), which round
 * differently (planner/fuse.c) */
#define SG_FUSE_BITWISE 2
/* "same" / "symmetric" <-> SG_DOWN_PAD_*; parse returns -1 for anything else. */
const char *sg_down_pad_name(int down_pad);
int sg_down_pad_parse(const char *s);

typedef struct {
    char name[32];
    /* architecture */
    int img, in_ch, ch, nlevels, ch_mult[SG_MAX_LEVELS], nrb;
    int nattn, attn_res[SG_MAX_LEVELS];
    int heads, head_ch; /* head_ch > 0 wins: heads = C / head_ch */
    int groups;
    float dropout;
    int resample_conv;
    int down_pad; /* SG_DOWN_PAD_*: the stride-2 downsampling conv's padding (resample_conv) */
    /* step */
    int batch; /* the GLOBAL batch: with ranks > 0, each rank's step holds batch / ranks */
    /* data parallel (docs/data-parallel.md): 0 = one process, no all-reduce (the classic step);
     * N >= 1 = one of N ranks: the step ends its backward pass with an all-reduce of the
     * gradients and the loss, and the loss gradient is scaled by 1/N */
    int ranks;
    /* gradient accumulation (--grad-accum K >= 1): each rank's step runs K forward+backward
     * passes over micro-batches of batch / (ranks x K) samples, summing their gradients into
     * the one gradient region, then ONE clip / AdamW / EMA / step increment (1: the classic
     * step). Micro-batch k of rank r holds the global batch's samples
     * [(r K + k) m, (r K + k + 1) m), m the micro-batch, and draws its random numbers there */
    int grad_accum;
    sg_dtype act_dt; /* DT_F32 or DT_BF16: activations; master weights are always fp32 */
    /* fusion of the work around the convolutions into them (--fuse; planner/fuse.c): 1 on, 0
     * off, SG_FUSE_AUTO (the presets') the measured faster of the two: off, but where a bf16
     * plan's engine table puts a layer on own (on the first GPU run, 2026-11-28, an H200,
     * unet_cifar batch 128 bf16 took 28.3 ms per step unfused on cuDNN and 173 ms fused on the
     * own kernels; bench/results/2026-11-28-nvidia-h200.md); SG_FUSE_BITWISE (tests) on but for
     * upconv2d and conv2d_sc. Read it with sg_model_fuse. */
    int fuse;
    /* memory for time (--store-norm): 1 keeps each stored GroupNorm(+SiLU, + dropout) output y
     * from the forward pass for the weight gradients that read it, instead of recomputing it
     * in the backward pass (the recomputation's bits are the forward's, so the bits do not
     * change); 0, the default, recomputes (unet_cifar batch 128 bf16: 0.74 GiB less arena).
     * A fused site (y never stored) is recomputed either way. */
    int store_norm;
    /* memory for time (--store-attn): 1 keeps each attention's softmax P (fp32 [N, heads, L, L])
     * from the forward pass for its backward; 0, the default, recomputes it there (attention_p:
     * the forward's scores and softmax again, the same kernels, the same bits; unet_cifar batch
     * 128 bf16: 160 MiB less arena, every P of the encoder and decoder at the peak). */
    int store_attn;
    /* the per-layer conv engine table (--engine-table; planner/engine_table.h), or NULL: a
     * `cudnn` layer's normalisation is not fused into it. Not owned (the caller keeps it alive
     * as long as the config); recorded in the config JSON as its hash */
    const struct sg_engine_table *engines;
    /* the dataset the step gathers from (uploaded once) */
    int64_t data_n;
    int data_h, data_w;
    int flip;
    /* objective and optimizer */
    /* the noise schedule (common/sg_schedule.h: sg_betas): T steps, SG_BETA_LINEAR from beta1
     * to betaT or SG_BETA_COSINE (beta1, betaT then at their defaults, unused) */
    int T;
    int beta_schedule;
    float beta1, betaT;
    /* 1: the betas rescaled to zero terminal SNR (Lin et al. 2024; diffusers'
     * rescale_betas_zero_snr; common/sg_schedule.h): abar_{T-1} = 0, x_{T-1} pure noise, as the
     * sampler's first step assumes. Needs v prediction (an eps model cannot see x0 there). */
    int zero_snr;
    /* what the network predicts: SG_PRED_EPS, the noise (DDPM), or SG_PRED_V, the velocity
     * v = sqrt(abar) eps - sqrt(1 - abar) x0 (Salimans & Ho 2022; diffusers' v_prediction) */
    int prediction;
    /* min-SNR-gamma loss weighting (Hang et al. 2023; diffusers' --snr_gamma): each sample's
     * squared error weighted by min(SNR_t, gamma) / SNR_t (eps) or / (SNR_t + 1) (v), with
     * SNR_t = abar_t / (1 - abar_t); 0: off, the plain mean (DDPM) */
    float snr_gamma;
    /* P2 loss weighting (Choi et al. 2022, "Perception Prioritized Training of Diffusion
     * Models"): each sample's squared error weighted by (p2_k + SNR_t)^-p2_gamma (eps), times
     * SNR_t / (SNR_t + 1) for v (the same objective: an eps error is sqrt(abar) times a v
     * error); p2_gamma 0: off. Not together with snr_gamma. */
    float p2_gamma, p2_k;
    /* offset noise (Guttenberg 2023; diffusers' --noise_offset): the training noise gets one
     * N(0, offset^2) value per (sample, channel) added to it; 0: off (DDPM) */
    float noise_offset;
    /* input perturbation (Ning et al. 2023; diffusers' --input_perturbation): x_t is made with
     * the noise plus input_perturbation times a second normal per element, while the target
     * stays the noise (or v) without it; 0: off (DDPM) */
    float input_perturbation;
    /* class conditioning (--classes K; docs/model.md): 0, an unconditional model (DDPM); K > 0,
     * a table class_embedding.weight of K + 1 rows (the K classes and the null class K, which
     * an unconditional prediction takes) whose row for each sample's label is added to the time
     * embedding (diffusers' UNet2DModel with num_class_embeds = K + 1). Training replaces each
     * label by the null class with probability class_dropout (classifier-free guidance, Ho &
     * Salimans 2022), so one model predicts both and `sample --guidance` can mix them. */
    int classes;
    float class_dropout;
    /* sampling plans only (never recorded): the classifier-free guidance scale w of a
     * class-conditional model (sample --guidance), eps = eps_null + w (eps_class - eps_null);
     * 1 (the default): the conditional prediction alone. Guided (sg_model_guided), the forward
     * pass holds every image twice, with its class and with the null class. */
    float guidance;
    /* sampling plans only (never recorded): guided, Lin et al.'s guidance rescale phi in [0, 1]
     * (sample --guidance-rescale; diffusers' guidance_rescale): each image's guided prediction
     * scaled towards the conditional one's standard deviation; 0 (the default): none */
    float guidance_rescale;
    float lr, b1, b2, eps, wd, clip, ema_decay;
    int warmup;
    /* the schedules (common/sg_schedule.h): lr after its warm-up — SG_LR_CONSTANT / COSINE /
     * LINEAR, ending at lr_min x lr at step lr_decay_steps; the EMA decay with diffusers'
     * warm-up (ema_warmup 1: 1 - (1 + s/inv_gamma)^-power, at most ema_decay) or fixed */
    int lr_schedule;
    int64_t lr_decay_steps;
    float lr_min;
    int ema_warmup;
    float ema_inv_gamma, ema_power;
} sg_model_cfg;

/* Fill cfg with a named preset (unet_cifar, unet_adm64, unet_tiny, unet_fmnist). */
int sg_model_preset(sg_model_cfg *cfg, const char *name);
/* The presets' names, NULL-terminated, and one-line descriptions. */
extern const char *const sg_model_names[];
extern const char *const sg_model_descriptions[];

/* Apply one command-line override `--flag value` to cfg. Returns 1 if the flag is a model
 * flag and was applied, 0 if it is not a model flag, -1 (with sg_last_error) on a bad value. */
int sg_model_flag(sg_model_cfg *cfg, const char *flag, const char *value);
/* Usage text for the model flags. */
extern const char *const sg_model_flags_help;
/* "constant" / "cosine" / "linear" <-> SG_LR_*; parse returns -1 for anything else. */
const char *sg_lr_schedule_name(int schedule);
int sg_lr_schedule_parse(const char *s);
/* "eps" / "v" <-> SG_PRED_*; parse returns -1 for anything else. */
const char *sg_prediction_name(int prediction);
int sg_prediction_parse(const char *s);
/* "linear" / "cosine" <-> SG_BETA_*; parse returns -1 for anything else. */
const char *sg_beta_schedule_name(int schedule);
int sg_beta_schedule_parse(const char *s);
/* the config's noise schedule, as the kernels take it */
sg_betas sg_model_betas(const sg_model_cfg *cfg);
/* The batch splits: over the ranks, and each rank's share into grad_accum micro-batches
 * (part of sg_model_validate; train checks it as soon as it knows the rank count). */
int sg_model_check_batch(const sg_model_cfg *cfg);
/* Check the configuration is buildable (channels divisible by groups, sizes, ...). */
int sg_model_validate(const sg_model_cfg *cfg);
/* One-line JSON object of the architecture fields (for checkpoints and --json). */
int sg_model_json(const sg_model_cfg *cfg, char *buf, int cap);

/* Indices of the tensors the executor and tools need by role. */
typedef struct {
    int dataset, step, seed, lr, loss, grad_sumsq, clip_scale;
    int watch, loss_sum; /* the trainer's: first non-finite step + 1 (0: none), sum of losses */
    int x0, t, eps, xt, pred;
    int eps_in;      /* the noise x_t is made with: eps plus input perturbation, else eps itself */
    int ddpm_table;  /* the noising coefficients of every timestep (written by sg_exec_init) */
    int v_table, v;  /* v prediction: {sqrt(abar), -sqrt(1 - abar)} per timestep, the target */
    int loss_weight; /* min-SNR or P2 weighting: f32[T], every timestep's weight (sg_exec_init) */
    /* class-conditional models: the dataset's labels (i32[data_n], uploaded with it), and the
     * labels the network reads (i32[N]: the training step's gather_labels; the forward plan's
     * input class_labels) */
    int labels, class_labels;
    int params, grads, adam_m, adam_v, ema; /* region tensors */
    int params_bf16;  /* bf16 runs: the region of the parameters' bf16 copy (ROLE_PARAM_BF16,
                         element j = round(params element j)); -1 in fp32 runs */
    int64_t n_params; /* parameter count (scalars) */
    int allreduce;    /* the all-reduce node, -1 without ranks */
    /* the sampling plan (sg_build_sampler): the fp32 state x, the step table, the step
     * counter, the key {seed, first}, the x0 history (DPM-Solver++(2M)), and the first sampler
     * node (its update; the counter's increment follows) */
    int sample_x, sample_table, sample_k, sample_key, sample_x0h, sample_node;
} sg_step_io;

/* Samples one rank's step holds: batch / ranks (batch when ranks is 0). */
static inline int sg_model_rank_batch(const sg_model_cfg *c) {
    return c->ranks > 0 ? c->batch / c->ranks : c->batch;
}
/* Whether the plan fuses (sg_model_cfg.fuse). SG_FUSE_AUTO: a bf16 plan with a per-layer engine
 * table fuses where the table says own (its measurement chose the fused layer); any other plan
 * does not, until the own fused kernels measure faster than cuDNN's unfused convolutions. */
static inline int sg_model_fuse(const sg_model_cfg *c) {
    return c->fuse == SG_FUSE_AUTO ? c->engines != NULL && c->act_dt == DT_BF16 : c->fuse != 0;
}
/* Does a sampling plan of this config guide (classifier-free guidance: two predictions per
 * image)? */
static inline int sg_model_guided(const sg_model_cfg *c) {
    return c->classes > 0 && c->guidance != 1.0f;
}
/* Micro-batches per step (grad_accum, at least 1). */
static inline int sg_model_micro_batches(const sg_model_cfg *c) {
    return c->grad_accum > 1 ? c->grad_accum : 1;
}
/* Samples one micro-batch holds: batch / (ranks x grad_accum); what the forward pass sees. */
static inline int sg_model_micro_batch(const sg_model_cfg *c) {
    return sg_model_rank_batch(c) / sg_model_micro_batches(c);
}

int sg_build_train_step(sg_graph *g, const sg_model_cfg *cfg, sg_step_io *io);
/* The UNet alone: inputs x_t (INPUT role, act dtype), t (INPUT role, i32[batch]) and, in a
 * class-conditional model, class_labels (INPUT, i32[batch]); io->xt, io->t, io->class_labels,
 * io->pred, io->n_params are set; parameters are ROLE_PARAM tensors. A guided config
 * (sg_model_guided) holds 2 x batch images: each image with its class, then with the null one. */
int sg_build_forward(sg_graph *g, const sg_model_cfg *cfg, sg_step_io *io);
/* Append one denoising step to a forward graph (planner/sample_graph.c): after the UNet, the
 * update (OP_SAMPLE_STEP: x, pred -> x, and x_t, t for the next forward pass) and the step
 * counter's increment; sets io->sample_*. One run of the whole plan = one denoising step
 * (graph/sampler.h). */
int sg_build_sampler(sg_graph *g, const sg_model_cfg *cfg, sg_step_io *io);

#endif
