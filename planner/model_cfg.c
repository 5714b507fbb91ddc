/* model_cfg.c — model configurations: the presets, the command-line model flags, validation
 * and the JSON form of a config (docs/model.md). No graph is built here (unet.c builds the
 * network, train_step.c the step around it).
 */
#include "planner/model.h"

#include "planner/engine_table.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const sg_model_names[] = {"unet_cifar", "unet_adm64", "unet_tiny", "unet_fmnist", NULL};
const char *const sg_model_descriptions[] = {
    "DDPM CIFAR-10: 32x32x3, ch 128 x (1,2,2,2), 2 res blocks, attn @16, batch 128",
    "ADM-style 64x64x3: ch 64 x (1,2,3,4), attn @16,8 (32 ch/head), pool/nearest, batch 32",
    "tests: 16x16x3, ch 32 x (1,2), 1 res block, attn @8, batch 4",
    "Fashion-MNIST: 32x32x1, ch 32 x (1,2,2), 1 res block, attn @8, batch 32",
};

static void set_training_defaults(sg_model_cfg *c) {
    c->T = 1000;
    c->beta_schedule = SG_BETA_LINEAR;
    c->zero_snr = 0;
    c->prediction = SG_PRED_EPS;
    c->snr_gamma = 0.0f;
    c->p2_gamma = 0.0f;
    c->p2_k = 1.0f; /* Choi et al.'s */
    c->noise_offset = 0.0f;
    c->input_perturbation = 0.0f;
    c->classes = 0;
    c->class_dropout = 0.1f; /* Ho & Salimans' p_uncond (used only with classes) */
    c->guidance = 1.0f;
    c->guidance_rescale = 0.0f;
    c->beta1 = SG_BETA1_DEFAULT;
    c->betaT = SG_BETAT_DEFAULT;
    c->lr = 2e-4f;
    c->b1 = 0.9f;
    c->b2 = 0.999f;
    c->eps = 1e-8f;
    c->wd = 0.0f;
    c->clip = 1.0f;
    c->ema_decay = 0.9999f;
    c->warmup = 5000;
    c->lr_schedule = SG_LR_CONSTANT;
    c->lr_decay_steps = 0;
    c->lr_min = 0.0f;
    c->ema_warmup = 0;
    c->ema_inv_gamma = 1.0f; /* diffusers' train_unconditional: inv_gamma 1, power 3/4 */
    c->ema_power = 0.75f;
    c->dropout = 0.1f;
    c->groups = 32;
    c->heads = 1;
    c->resample_conv = 1;
    c->flip = 1;
    c->act_dt = DT_F32;
    c->grad_accum = 1;
    c->fuse = SG_FUSE_AUTO;
}

int sg_model_preset(sg_model_cfg *c, const char *name) {
    memset(c, 0, sizeof *c);
    set_training_defaults(c);
    snprintf(c->name, sizeof c->name, "%s", name ? name : "");
    if (!strcmp(name, "unet_cifar")) {
        c->img = 32, c->in_ch = 3, c->ch = 128, c->nlevels = 4, c->nrb = 2;
        c->ch_mult[0] = 1, c->ch_mult[1] = 2, c->ch_mult[2] = 2, c->ch_mult[3] = 2;
        c->nattn = 1, c->attn_res[0] = 16;
        c->down_pad = SG_DOWN_PAD_SAME; /* DDPM's TensorFlow SAME */
        c->batch = 128, c->data_n = 50000, c->data_h = 32, c->data_w = 32;
    } else if (!strcmp(name, "unet_adm64")) {
        c->img = 64, c->in_ch = 3, c->ch = 64, c->nlevels = 4, c->nrb = 2;
        c->ch_mult[0] = 1, c->ch_mult[1] = 2, c->ch_mult[2] = 3, c->ch_mult[3] = 4;
        c->nattn = 2, c->attn_res[0] = 16, c->attn_res[1] = 8;
        c->head_ch = 32, c->resample_conv = 0;
        c->down_pad = SG_DOWN_PAD_SYMMETRIC; /* ADM's rule, used if resample convs are turned on */
        c->batch = 32, c->data_n = 10000, c->data_h = 64, c->data_w = 64;
    } else if (!strcmp(name, "unet_tiny")) {
        c->img = 16, c->in_ch = 3, c->ch = 32, c->nlevels = 2, c->nrb = 1;
        c->ch_mult[0] = 1, c->ch_mult[1] = 2;
        c->nattn = 1, c->attn_res[0] = 8, c->groups = 8;
        c->down_pad = SG_DOWN_PAD_SAME;
        c->batch = 4, c->data_n = 1024, c->data_h = 16, c->data_w = 16;
    } else if (!strcmp(name, "unet_fmnist")) {
        c->img = 32, c->in_ch = 1, c->ch = 32, c->nlevels = 3, c->nrb = 1;
        c->ch_mult[0] = 1, c->ch_mult[1] = 2, c->ch_mult[2] = 2;
        c->nattn = 1, c->attn_res[0] = 8, c->groups = 8;
        c->down_pad = SG_DOWN_PAD_SAME;
        c->batch = 32, c->data_n = 60000, c->data_h = 28, c->data_w = 28;
        /* the first run is a few thousand CPU steps, not DDPM's 800k: a higher learning rate,
         * a short warm-up and a faster EMA so that its samples mean something */
        c->lr = 1e-3f, c->warmup = 100, c->ema_decay = 0.995f;
    } else {
        char list[256] = "";
        for (int i = 0; sg_model_names[i]; i++) {
            strcat(list, i ? ", " : "");
            strcat(list, sg_model_names[i]);
        }
        return sg_set_error("unknown model '%s' (models: %s)", name, list);
    }
    return SG_OK;
}

const char *const sg_model_flags_help =
    "  --batch N            the global batch (= ranks x --grad-accum x micro-batch)\n"
    "  --grad-accum K       gradient accumulation: the step runs K forward+backward passes\n"
    "                       over micro-batches of batch/K samples (per rank), sums their\n"
    "                       gradients, then one optimizer step (default 1; at most 64; the\n"
    "                       same data, noise and dropout as one pass over the whole batch)\n"
    "  --precision P        fp32 | bf16 (bf16 activations, fp32 master weights)\n"
    "  --fuse 0|1           fuse GroupNorm + SiLU (+ dropout) into the next convolution's\n"
    "                       operand loads and the residual add into its store, so neither\n"
    "                       is written to memory, and (bf16) a block's 1x1 shortcut into\n"
    "                       the same GEMM as the conv before the add and the decoder's\n"
    "                       nearest upsample into the 3x3 conv after it (from the low-res\n"
    "                       input, 4/9 of its FLOPs); these two change the bits (default\n"
    "                       0: measured on an H200, unet_cifar batch 128 bf16, unfused on\n"
    "                       cuDNN took 24.6 ms a step, fused 34.8 (its fused forwards on\n"
    "                       stepgraph's own kernels); the CUDA backend fuses on its bf16\n"
    "                       tensor-core convolutions only)\n"
    "  --store-norm 0|1     1: keep each stored GroupNorm + SiLU output from the forward\n"
    "                       pass for the weight gradients instead of recomputing it in\n"
    "                       the backward pass: the same bits, fewer passes, more memory\n"
    "                       (unet_cifar batch 128 bf16: +0.74 GiB of arena; default 0)\n"
    "  --store-attn 0|1     1: keep each attention's softmax P (fp32, batch x heads x L x L)\n"
    "                       from the forward pass for its backward instead of recomputing\n"
    "                       it there (the forward's scores and softmax again: the same\n"
    "                       bits, one GEMM more; unet_cifar batch 128 bf16: +160 MiB of\n"
    "                       arena; default 0)\n"
    "  --ch N               base channels\n"
    "  --ch-mult A,B,...    channel multiplier per level\n"
    "  --res-blocks N       res blocks per level\n"
    "  --attn-res R,...     resolutions with attention (empty string: none)\n"
    "  --heads N            attention heads (--head-ch N: channels per head instead;\n"
    "                       give one of them)\n"
    "  --groups N           GroupNorm groups\n"
    "  --img N              image size (square)\n"
    "  --in-ch N            image channels\n"
    "  --dropout P          dropout probability\n"
    "  --down-pad P         same | symmetric: padding of the stride-2 downsampling conv\n"
    "                       (same: 0 top/left, 1 bottom/right, as DDPM; symmetric: 1 all round)\n"
    "  --timesteps N        diffusion steps T (default 1000)\n"
    "  --beta-schedule S    linear (DDPM; the default) | cosine (Nichol & Dhariwal 2021,\n"
    "                       diffusers' squaredcos_cap_v2)\n"
    "  --beta-start X       linear: the first beta (default 1e-4); --beta-end X the last\n"
    "                       (default 0.02)\n"
    "  --zero-snr 0|1       1: either schedule rescaled to zero terminal SNR (Lin et al.\n"
    "                       2024; diffusers' rescale_betas_zero_snr): the last step is pure\n"
    "                       noise, as sampling's first step assumes; needs --prediction v\n"
    "                       (default 0)\n"
    "  --prediction P       eps (the noise, DDPM; the default) | v (the velocity\n"
    "                       sqrt(abar) eps - sqrt(1 - abar) x0: diffusers' v_prediction)\n"
    "  --snr-gamma G        min-SNR-gamma loss weighting (Hang et al. 2023; diffusers'\n"
    "                       --snr_gamma, 5 is usual): each sample's squared error times\n"
    "                       min(SNR, G)/SNR (eps) or min(SNR, G)/(SNR + 1) (v), SNR =\n"
    "                       abar/(1 - abar) at its timestep (default 0: off, the plain mean)\n"
    "  --p2-gamma G         P2 loss weighting (Choi et al. 2022; 1 theirs): each sample's\n"
    "                       squared error times (K + SNR)^-G (eps), times SNR/(SNR + 1)\n"
    "                       for v (default 0: off; not with --snr-gamma)\n"
    "  --p2-k K             P2's K, > 0 (default 1)\n"
    "  --noise-offset S     offset noise (Guttenberg 2023; diffusers' --noise_offset, 0.1\n"
    "                       is usual): the training noise plus S times one normal per\n"
    "                       image and channel, so the model learns to change an image's\n"
    "                       mean brightness (default 0: off)\n"
    "  --input-perturbation G\n"
    "                       input perturbation (Ning et al. 2023; diffusers'\n"
    "                       --input_perturbation, 0.1 is theirs): x_t is made with the\n"
    "                       noise plus G times a second normal per value, the target is\n"
    "                       the noise without it, so training sees the kind of error\n"
    "                       sampling feeds back (exposure bias; default 0: off)\n"
    "  --classes K          class-conditional: the data's labels 0..K-1 pick a learned\n"
    "                       embedding added to the time embedding (diffusers'\n"
    "                       num_class_embeds = K + 1: row K is the null class); the\n"
    "                       dataset must have labels (cifar10, fmnist, synthetic: 6\n"
    "                       shapes, folder: its class subfolders); default 0: unconditional\n"
    "  --class-dropout P    with --classes: each label replaced by the null class with\n"
    "                       probability P, so the model also learns the unconditional\n"
    "                       prediction that sample --guidance mixes in (default 0.1)\n"
    "  --data-n N           dataset images the plan reserves (train sets it from the data)\n";

const char *sg_down_pad_name(int down_pad) {
    return down_pad == SG_DOWN_PAD_SAME        ? "same"
           : down_pad == SG_DOWN_PAD_SYMMETRIC ? "symmetric"
                                               : "?";
}

int sg_down_pad_parse(const char *s) {
    if (!strcmp(s, "same")) return SG_DOWN_PAD_SAME;
    if (!strcmp(s, "symmetric")) return SG_DOWN_PAD_SYMMETRIC;
    return -1;
}

/* A decimal integer in [lo, hi], the whole of v: no sign tricks, no blanks, no overflow. */
static int parse_int(const char *v, int lo, int hi, int *out) {
    const char *d = v + (*v == '-');
    if (*d < '0' || *d > '9') return -1;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (*end || errno || x < lo || x > hi) return -1;
    *out = (int)x;
    return 0;
}

/* A whole decimal number (strtod's forms) into *out; -1 for an empty or partly read value. The
 * caller checks the range (NaN fails every comparison). */
static int parse_real(const char *v, double *out) {
    char *end;
    *out = strtod(v, &end);
    return !*v || *end ? -1 : 0;
}

/* A comma-separated list of integers in [1, 2^20]; "" is the empty list, and an empty
 * element ("1,,2", "1,", ",1") is an error (strtok skipped them silently). */
static int parse_list(const char *v, int *out, int max, int *n) {
    *n = 0;
    if (!*v) return 0;
    for (const char *p = v;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char tok[16];
        if (!len || len >= sizeof tok || *n >= max) return -1;
        memcpy(tok, p, len);
        tok[len] = 0;
        if (parse_int(tok, 1, 1 << 20, &out[*n])) return -1;
        (*n)++;
        if (!comma) return 0;
        p = comma + 1;
    }
}

int sg_model_flag(sg_model_cfg *c, const char *f, const char *v) {
    int x, n;
    int tmp[SG_MAX_LEVELS] = {0}; /* unused slots stay 0: configs compare field for field */
#define INTFLAG(NAME, FIELD, LO, HI)                                                               \
    if (!strcmp(f, NAME)) {                                                                        \
        if (parse_int(v, LO, HI, &x))                                                              \
            return sg_set_error("%s expects an integer in [%d, %d], got '%s'", NAME, LO, HI, v),   \
                   -1;                                                                             \
        c->FIELD = x;                                                                              \
        return 1;                                                                                  \
    }
    INTFLAG("--batch", batch, 1, 1 << 16)
    INTFLAG("--ch", ch, 1, 1 << 14)
    INTFLAG("--res-blocks", nrb, 1, SG_MAX_RES_BLOCKS)
    INTFLAG("--groups", groups, 1, 1 << 14)
    INTFLAG("--img", img, 4, 1 << 12)
    INTFLAG("--in-ch", in_ch, 1, 64)
    INTFLAG("--grad-accum", grad_accum, 1, SG_MAX_GRAD_ACCUM)
    INTFLAG("--fuse", fuse, 0, 1)
    INTFLAG("--store-norm", store_norm, 0, 1)
    INTFLAG("--store-attn", store_attn, 0, 1)
    INTFLAG("--timesteps", T, 1, SG_MAX_T)
    INTFLAG("--classes", classes, 0, SG_MAX_CLASSES)
    INTFLAG("--zero-snr", zero_snr, 0, 1)
#undef INTFLAG
    if (!strcmp(f, "--beta-schedule")) {
        int b = sg_beta_schedule_parse(v);
        if (b < 0) return sg_set_error("--beta-schedule expects linear or cosine, got '%s'", v), -1;
        c->beta_schedule = b;
        return 1;
    }
    if (!strcmp(f, "--prediction")) {
        int p = sg_prediction_parse(v);
        if (p < 0) return sg_set_error("--prediction expects eps or v, got '%s'", v), -1;
        c->prediction = p;
        return 1;
    }
/* a real-valued flag: FIELD = g, the value read, where OK (an expression of g) holds */
#define REALFLAG(NAME, FIELD, OK, WHAT)                                                            \
    if (!strcmp(f, NAME)) {                                                                        \
        double g;                                                                                  \
        if (parse_real(v, &g) || !(OK))                                                            \
            return sg_set_error("%s expects %s, got '%s'", NAME, WHAT, v), -1;                     \
        c->FIELD = (float)g;                                                                       \
        return 1;                                                                                  \
    }
    REALFLAG("--snr-gamma", snr_gamma, g >= 0 && g <= FLT_MAX, "a number >= 0 (0: off)")
    REALFLAG("--p2-gamma", p2_gamma, g >= 0 && g <= 10, "a number in [0, 10] (0: off)")
    REALFLAG("--p2-k", p2_k, g > 0 && g <= 1e6, "a number in (0, 1e6]")
    REALFLAG("--noise-offset", noise_offset, g >= 0 && g <= 10, "a number in [0, 10] (0: off)")
    REALFLAG("--input-perturbation", input_perturbation, g >= 0 && g <= 10,
             "a number in [0, 10] (0: off)")
    REALFLAG("--class-dropout", class_dropout, g >= 0 && g <= 1, "a probability in [0, 1]")
    REALFLAG("--dropout", dropout, g >= 0 && g < 1, "a probability in [0, 1)")
    REALFLAG("--beta-start", beta1, g > 0 && g < 1, "a beta in (0, 1)")
    REALFLAG("--beta-end", betaT, g > 0 && g < 1, "a beta in (0, 1)")
#undef REALFLAG
    if (!strcmp(f, "--heads")) {
        if (parse_int(v, 1, 1024, &x)) return sg_set_error("--heads expects a count"), -1;
        c->heads = x, c->head_ch = 0;
        return 1;
    }
    if (!strcmp(f, "--head-ch")) {
        if (parse_int(v, 1, 1 << 14, &x)) return sg_set_error("--head-ch expects a count"), -1;
        c->head_ch = x;
        return 1;
    }
    if (!strcmp(f, "--data-n")) {
        if (parse_int(v, 1, 1 << 30, &x)) return sg_set_error("--data-n expects a count"), -1;
        c->data_n = x;
        return 1;
    }
    if (!strcmp(f, "--ch-mult")) {
        if (parse_list(v, tmp, SG_MAX_LEVELS, &n) || n < 1)
            return sg_set_error("--ch-mult expects a list like 1,2,2,2 (at most %d levels)",
                                SG_MAX_LEVELS),
                   -1;
        memcpy(c->ch_mult, tmp, sizeof tmp);
        c->nlevels = n;
        return 1;
    }
    if (!strcmp(f, "--attn-res")) {
        if (parse_list(v, tmp, SG_MAX_LEVELS, &n))
            return sg_set_error("--attn-res expects a list like 16,8"), -1;
        memcpy(c->attn_res, tmp, sizeof tmp);
        c->nattn = n;
        return 1;
    }
    if (!strcmp(f, "--precision")) {
        if (!strcmp(v, "fp32"))
            c->act_dt = DT_F32;
        else if (!strcmp(v, "bf16"))
            c->act_dt = DT_BF16;
        else
            return sg_set_error("--precision expects fp32 or bf16, got '%s'", v), -1;
        return 1;
    }
    if (!strcmp(f, "--down-pad")) {
        int p = sg_down_pad_parse(v);
        if (p < 0) return sg_set_error("--down-pad expects same or symmetric, got '%s'", v), -1;
        c->down_pad = p;
        return 1;
    }
    return 0;
}

const char *sg_lr_schedule_name(int schedule) {
    return schedule == SG_LR_CONSTANT ? "constant"
           : schedule == SG_LR_COSINE ? "cosine"
           : schedule == SG_LR_LINEAR ? "linear"
                                      : "?";
}

int sg_lr_schedule_parse(const char *s) {
    if (!strcmp(s, "constant")) return SG_LR_CONSTANT;
    if (!strcmp(s, "cosine")) return SG_LR_COSINE;
    if (!strcmp(s, "linear")) return SG_LR_LINEAR;
    return -1;
}

const char *sg_prediction_name(int prediction) {
    return prediction == SG_PRED_EPS ? "eps" : prediction == SG_PRED_V ? "v" : "?";
}

int sg_prediction_parse(const char *s) {
    if (!strcmp(s, "eps")) return SG_PRED_EPS;
    if (!strcmp(s, "v")) return SG_PRED_V;
    return -1;
}

const char *sg_beta_schedule_name(int schedule) {
    return schedule == SG_BETA_LINEAR ? "linear" : schedule == SG_BETA_COSINE ? "cosine" : "?";
}

int sg_beta_schedule_parse(const char *s) {
    if (!strcmp(s, "linear")) return SG_BETA_LINEAR;
    if (!strcmp(s, "cosine")) return SG_BETA_COSINE;
    return -1;
}

sg_betas sg_model_betas(const sg_model_cfg *c) {
    const sg_betas b = {.T = c->T,
                        .schedule = c->beta_schedule,
                        .beta1 = c->beta1,
                        .betaT = c->betaT,
                        .zero_snr = c->zero_snr};
    return b;
}

/* the schedules' fields: each one in its range */
static int validate_schedules(const sg_model_cfg *c) {
    if (c->T < 1 || c->T > SG_MAX_T)
        return sg_set_error("T = %d diffusion steps (1 to %d)", c->T, SG_MAX_T);
    if (c->prediction != SG_PRED_EPS && c->prediction != SG_PRED_V)
        return sg_set_error("prediction %d is neither eps nor v", c->prediction);
    if (c->beta_schedule != SG_BETA_LINEAR && c->beta_schedule != SG_BETA_COSINE)
        return sg_set_error("beta schedule %d is neither linear nor cosine", c->beta_schedule);
    if (c->beta_schedule == SG_BETA_LINEAR &&
        !(c->beta1 > 0 && c->betaT >= c->beta1 && c->betaT < 1))
        return sg_set_error("linear betas %g .. %g are not a schedule (0 < beta start <= beta end "
                            "< 1)",
                            (double)c->beta1, (double)c->betaT);
    /* the cosine betas come from T alone: other start/end values would be recorded and unused */
    if (c->beta_schedule == SG_BETA_COSINE &&
        (c->beta1 != SG_BETA1_DEFAULT || c->betaT != SG_BETAT_DEFAULT))
        return sg_set_error("the cosine beta schedule has no start or end beta (--beta-start / "
                            "--beta-end set the linear one's)");
    if (c->zero_snr != 0 && c->zero_snr != 1)
        return sg_set_error("zero_snr %d is neither 0 nor 1", c->zero_snr);
    /* x_{T-1} holds nothing of x0: an eps model's x0 = (x - sqrt(1 - abar) eps) / sqrt(abar)
     * divides by 0 there (diffusers warns; Lin et al. train v) */
    if (c->zero_snr && c->prediction != SG_PRED_V)
        return sg_set_error("zero terminal SNR (--zero-snr 1) needs v prediction (--prediction "
                            "v): at the last step x_t is pure noise and an eps model's x0 "
                            "divides by sqrt(abar) = 0");
    if (c->zero_snr && c->T < 2)
        return sg_set_error("zero terminal SNR needs T >= 2 steps (the rescaling keeps the first "
                            "abar and zeroes the last)");
    if (!(c->noise_offset >= 0 && c->noise_offset <= 10))
        return sg_set_error("noise_offset %g is not in [0, 10] (0: off)", (double)c->noise_offset);
    if (!(c->input_perturbation >= 0 && c->input_perturbation <= 10))
        return sg_set_error("input_perturbation %g is not in [0, 10] (0: off)",
                            (double)c->input_perturbation);
    if (!(c->snr_gamma >= 0 && isfinite(c->snr_gamma)))
        return sg_set_error("snr_gamma %g is not a finite number >= 0 (0: no loss weighting)",
                            (double)c->snr_gamma);
    if (!(c->p2_gamma >= 0 && c->p2_gamma <= 10) || !(c->p2_k > 0 && c->p2_k <= 1e6))
        return sg_set_error("p2_gamma %g, p2_k %g: gamma in [0, 10] (0: off), k in (0, 1e6]",
                            (double)c->p2_gamma, (double)c->p2_k);
    if (c->p2_gamma == 0 && c->p2_k != 1.0f)
        return sg_set_error("p2_k %g without P2 weighting: give --p2-gamma G too", (double)c->p2_k);
    if (c->p2_gamma > 0 && c->snr_gamma > 0)
        return sg_set_error("two loss weightings: min-SNR (--snr-gamma %g) and P2 (--p2-gamma "
                            "%g); give one of them",
                            (double)c->snr_gamma, (double)c->p2_gamma);
    if (c->classes < 0 || c->classes > SG_MAX_CLASSES)
        return sg_set_error("classes %d: 0 (unconditional) to %d", c->classes, SG_MAX_CLASSES);
    if (!(c->guidance >= 0 && c->guidance <= 1000))
        return sg_set_error("guidance %g is not a scale in [0, 1000]", (double)c->guidance);
    if (c->guidance != 1.0f && c->classes == 0)
        return sg_set_error("guidance %g needs a class-conditional model (--classes)",
                            (double)c->guidance);
    if (!(c->guidance_rescale >= 0 && c->guidance_rescale <= 1))
        return sg_set_error("guidance rescale %g is not in [0, 1]", (double)c->guidance_rescale);
    if (c->guidance_rescale > 0 && !sg_model_guided(c))
        return sg_set_error("guidance rescale %g needs classifier-free guidance (a "
                            "class-conditional model and a guidance scale other than 1)",
                            (double)c->guidance_rescale);
    if (!(c->class_dropout >= 0 && c->class_dropout <= 1))
        return sg_set_error("class_dropout %g is not a probability in [0, 1]",
                            (double)c->class_dropout);
    /* the default where it is unused (unconditional configs do not record it): another value
     * was asked for a model that has no labels to drop */
    if (c->classes == 0 && c->class_dropout != 0.1f)
        return sg_set_error("--class-dropout %g: only a class-conditional model drops labels "
                            "(give --classes K)",
                            (double)c->class_dropout);
    if (c->lr_schedule < SG_LR_CONSTANT || c->lr_schedule > SG_LR_LINEAR)
        return sg_set_error("lr schedule %d is not constant, cosine or linear", c->lr_schedule);
    if (!(c->lr_min >= 0 && c->lr_min <= 1))
        return sg_set_error("lr_min %g is not a fraction of the peak lr in [0, 1]",
                            (double)c->lr_min);
    if (c->lr_decay_steps < 0)
        return sg_set_error("lr_decay_steps %lld is negative", (long long)c->lr_decay_steps);
    if (c->lr_schedule != SG_LR_CONSTANT && c->lr_decay_steps <= c->warmup)
        return sg_set_error("the %s lr schedule ends at step %lld, not after its warm-up of %d "
                            "steps",
                            sg_lr_schedule_name(c->lr_schedule), (long long)c->lr_decay_steps,
                            c->warmup);
    if (c->ema_warmup != 0 && c->ema_warmup != 1)
        return sg_set_error("ema_warmup %d is neither 0 nor 1", c->ema_warmup);
    if (!(c->ema_inv_gamma > 0 && isfinite(c->ema_inv_gamma)) ||
        !(c->ema_power > 0 && isfinite(c->ema_power)))
        return sg_set_error("EMA warm-up inv_gamma %g and power %g must be positive",
                            (double)c->ema_inv_gamma, (double)c->ema_power);
    return SG_OK;
}

int sg_model_check_batch(const sg_model_cfg *c) {
    if (c->ranks < 0)
        return sg_set_error("ranks must be 0 (one process) or a count, is %d", c->ranks);
    if (c->ranks > 0 && c->batch % c->ranks)
        return sg_set_error("--batch %d is the global batch and must divide evenly over %d ranks "
                            "(try --batch %d)",
                            c->batch, c->ranks, (c->batch / c->ranks + 1) * c->ranks);
    if (c->grad_accum < 1 || c->grad_accum > SG_MAX_GRAD_ACCUM)
        return sg_set_error("grad_accum %d: micro-batches per step must be in [1, %d]",
                            c->grad_accum, SG_MAX_GRAD_ACCUM);
    if (sg_model_rank_batch(c) % c->grad_accum) {
        /* suggest the next global batch that ranks x K micro-batches divide */
        const int per = (c->ranks > 0 ? c->ranks : 1) * c->grad_accum;
        char where[96] = "";
        if (c->ranks > 0)
            snprintf(where, sizeof where, " over %d rank(s) is %d samples per rank, which",
                     c->ranks, sg_model_rank_batch(c));
        return sg_set_error("--batch %d%s does not split into %d micro-batches (--grad-accum "
                            "%d): the global batch must be a multiple of %s%d (try --batch %d)",
                            c->batch, where, c->grad_accum, c->grad_accum,
                            c->ranks > 0 ? "ranks x micro-batches = " : "", per,
                            (c->batch / per + 1) * per);
    }
    return SG_OK;
}

int sg_model_validate(const sg_model_cfg *c) {
    if (validate_schedules(c)) return SG_ERR;
    if (c->nlevels < 1 || c->nlevels > SG_MAX_LEVELS)
        return sg_set_error("model has %d levels (1 to %d)", c->nlevels, SG_MAX_LEVELS);
    if (c->nrb < 1 || c->nrb > SG_MAX_RES_BLOCKS)
        return sg_set_error("%d res blocks per level (1 to %d)", c->nrb, SG_MAX_RES_BLOCKS);
    if (sg_model_check_batch(c)) return SG_ERR;
    if (c->img % (1 << (c->nlevels - 1)))
        return sg_set_error("image size %d is not divisible by 2^%d (levels)", c->img,
                            c->nlevels - 1);
    for (int k = 0; k < c->nattn; k++) {
        int found = 0;
        for (int i = 0; i < c->nlevels; i++) found |= c->attn_res[k] == c->img >> i;
        if (!found)
            return sg_set_error("attention resolution %d is not one of the model's resolutions "
                                "(%d halved per level, %d levels)",
                                c->attn_res[k], c->img, c->nlevels);
    }
    if (c->data_h > c->img || c->data_w > c->img)
        return sg_set_error("data images %dx%d are larger than the model's %d", c->data_h,
                            c->data_w, c->img);
    /* Sizes the planner's int64 byte arithmetic holds with room to spare: what the flags
     * allow (--img 4096 --batch 65536 --ch-mult 1048576 ...) is a clean error here, never an
     * overflow later. The attention matrix (batch x heads x (H W)^2) is usually the largest. */
    const double max_elems = 0x1p40;
    if ((double)c->data_n * c->data_h * c->data_w * c->in_ch > max_elems)
        return sg_set_error("the dataset region is too large (%lld images of %dx%dx%d)",
                            (long long)c->data_n, c->data_h, c->data_w, c->in_ch);
    if (c->fuse != SG_FUSE_AUTO && c->fuse != 0 && c->fuse != 1 && c->fuse != SG_FUSE_BITWISE)
        return sg_set_error("fuse %d is neither 0, 1, %d (bitwise) nor automatic (%d)", c->fuse,
                            SG_FUSE_BITWISE, SG_FUSE_AUTO);
    if (c->store_norm != 0 && c->store_norm != 1)
        return sg_set_error("store_norm %d is neither 0 nor 1", c->store_norm);
    if (c->store_attn != 0 && c->store_attn != 1)
        return sg_set_error("store_attn %d is neither 0 nor 1", c->store_attn);
    if (c->down_pad != SG_DOWN_PAD_SAME && c->down_pad != SG_DOWN_PAD_SYMMETRIC)
        return sg_set_error("down_pad %d is neither same (%d) nor symmetric (%d)", c->down_pad,
                            SG_DOWN_PAD_SAME, SG_DOWN_PAD_SYMMETRIC);
    for (int i = 0; i < c->nlevels; i++) {
        int64_t C = (int64_t)c->ch * c->ch_mult[i];
        if (C % c->groups || c->ch % c->groups)
            return sg_set_error("%lld channels at level %d are not divisible by %d groups",
                                (long long)C, i, c->groups);
        if (c->head_ch && C % c->head_ch)
            return sg_set_error("%lld channels at level %d are not divisible by %d ch/head",
                                (long long)C, i, c->head_ch);
        if (!c->head_ch && C % c->heads)
            return sg_set_error("%lld channels at level %d are not divisible by %d heads",
                                (long long)C, i, c->heads);
        double hw = (double)(c->img >> i) * (double)(c->img >> i);
        double heads = c->head_ch ? (double)(C / c->head_ch) : c->heads;
        /* concatenated skips hold up to 3 C channels; attention at its levels and mid */
        double act = (double)c->batch * hw * 3.0 * (double)C;
        double attn = (double)c->batch * heads * hw * hw;
        int attn_here = i == c->nlevels - 1;
        for (int k = 0; k < c->nattn; k++) attn_here |= c->attn_res[k] == c->img >> i;
        if (act > max_elems || (attn_here && attn > max_elems))
            return sg_set_error("model too large: level %d (%dx%d, %lld channels, batch %d%s) "
                                "would need tensors over 2^40 elements",
                                i, c->img >> i, c->img >> i, (long long)C, c->batch,
                                attn_here && attn > max_elems ? ", its attention matrix" : "");
    }
    return SG_OK;
}

int sg_model_json(const sg_model_cfg *c, char *buf, int cap) {
    char mult[64] = "", attn[64] = "";
    for (int i = 0; i < c->nlevels; i++)
        snprintf(mult + strlen(mult), sizeof mult - strlen(mult), i ? ",%d" : "%d", c->ch_mult[i]);
    for (int i = 0; i < c->nattn; i++)
        snprintf(attn + strlen(attn), sizeof attn - strlen(attn), i ? ",%d" : "%d", c->attn_res[i]);
    /* ranks only when data parallel, so one-process configs read as they always did */
    char ranks[128] = "";
    if (c->ranks > 0) snprintf(ranks, sizeof ranks, ",\"ranks\":%d", c->ranks);
    /* grad_accum likewise only when accumulating: K = 1 configs (and their plan hashes) are
     * those of before it existed */
    if (c->grad_accum > 1)
        snprintf(ranks + strlen(ranks), sizeof ranks - strlen(ranks), ",\"grad_accum\":%d",
                 c->grad_accum);
    /* fusion only when on: a config without it is unfused, as every one before it existed */
    if (sg_model_fuse(c))
        snprintf(ranks + strlen(ranks), sizeof ranks - strlen(ranks), ",\"fuse\":%d",
                 c->fuse == SG_FUSE_BITWISE ? SG_FUSE_BITWISE : 1);
    /* storing the normalisations only when on (the same bits, another plan) */
    if (c->store_norm)
        snprintf(ranks + strlen(ranks), sizeof ranks - strlen(ranks), ",\"store_norm\":1");
    /* attention's P recomputed (0, the default) is recorded: a config from before it existed
     * (no key) kept P, and reads back as store_attn 1 (graph/weights.c), its plan unchanged */
    if (!c->store_attn)
        snprintf(ranks + strlen(ranks), sizeof ranks - strlen(ranks), ",\"store_attn\":0");
    /* the engine table only when given: its hash (of the choices) pins it */
    if (c->engines)
        snprintf(ranks + strlen(ranks), sizeof ranks - strlen(ranks),
                 ",\"engine_table\":\"%016llx\"", (unsigned long long)c->engines->hash);
    /* the schedules only when not the defaults (linear betas, constant lr, fixed EMA decay):
     * configs and
     * checkpoints from before them read as they always did */
    char sched[512] = ""; /* every optional key at its longest: under 256 */
    if (c->beta_schedule != SG_BETA_LINEAR)
        snprintf(sched, sizeof sched, ",\"beta_schedule\":\"%s\"",
                 sg_beta_schedule_name(c->beta_schedule));
    if (c->zero_snr)
        snprintf(sched + strlen(sched), sizeof sched - strlen(sched), ",\"zero_snr\":1");
    if (c->prediction != SG_PRED_EPS)
        snprintf(sched + strlen(sched), sizeof sched - strlen(sched), ",\"prediction\":\"%s\"",
                 sg_prediction_name(c->prediction));
    if (c->snr_gamma > 0)
        snprintf(sched + strlen(sched), sizeof sched - strlen(sched), ",\"snr_gamma\":%.9g",
                 (double)c->snr_gamma);
    if (c->p2_gamma > 0)
        snprintf(sched + strlen(sched), sizeof sched - strlen(sched),
                 ",\"p2_gamma\":%.9g,\"p2_k\":%.9g", (double)c->p2_gamma, (double)c->p2_k);
    if (c->noise_offset > 0)
        snprintf(sched + strlen(sched), sizeof sched - strlen(sched), ",\"noise_offset\":%.9g",
                 (double)c->noise_offset);
    if (c->input_perturbation > 0)
        snprintf(sched + strlen(sched), sizeof sched - strlen(sched),
                 ",\"input_perturbation\":%.9g", (double)c->input_perturbation);
    if (c->classes > 0)
        snprintf(sched + strlen(sched), sizeof sched - strlen(sched),
                 ",\"classes\":%d,\"class_dropout\":%.9g", c->classes, (double)c->class_dropout);
    if (c->lr_schedule != SG_LR_CONSTANT)
        snprintf(sched + strlen(sched), sizeof sched - strlen(sched),
                 ",\"lr_schedule\":\"%s\",\"lr_min\":%.9g,\"lr_decay_steps\":%lld",
                 sg_lr_schedule_name(c->lr_schedule), c->lr_min, (long long)c->lr_decay_steps);
    if (c->ema_warmup)
        snprintf(sched + strlen(sched), sizeof sched - strlen(sched),
                 ",\"ema_warmup\":1,\"ema_inv_gamma\":%.9g,\"ema_power\":%.9g", c->ema_inv_gamma,
                 c->ema_power);
    return snprintf(buf, (size_t)cap,
                    "{\"model\":\"%s\",\"img\":%d,\"in_ch\":%d,\"ch\":%d,\"ch_mult\":[%s],"
                    "\"nrb\":%d,\"attn_res\":[%s],\"heads\":%d,\"head_ch\":%d,\"groups\":%d,"
                    "\"dropout\":%.9g,\"resample_conv\":%d,\"down_pad\":\"%s\",\"batch\":%d,"
                    "\"precision\":\"%s\","
                    "\"T\":%d,\"beta1\":%.9g,\"betaT\":%.9g,\"lr\":%.9g,\"b1\":%.9g,\"b2\":%.9g,"
                    "\"eps\":%.9g,\"wd\":%.9g,\"warmup\":%d,\"clip\":%.9g,\"ema_decay\":%.9g,"
                    "\"flip\":%d%s%s}",
                    c->name, c->img, c->in_ch, c->ch, mult, c->nrb, attn, c->heads, c->head_ch,
                    c->groups, c->dropout, c->resample_conv, sg_down_pad_name(c->down_pad),
                    c->batch, c->act_dt == DT_BF16 ? "bf16" : "fp32", c->T, c->beta1, c->betaT,
                    c->lr, c->b1, c->b2, c->eps, c->wd, c->warmup, c->clip, c->ema_decay, c->flip,
                    ranks, sched);
}
