/* models.c — the UNet builder (docs/model.md), its presets and flags, and the training step.
 *
 * Shapes: activations {N, H, W, C}; conv weights {Co, K, K, Ci}; linear {M, K}. Tensor names
 * are module paths (diffusers UNet2DModel names); a parameter is "<module>.weight|bias".
 */
#include "planner/model.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/autodiff.h"

const char *const sg_model_names[] = {"unet_cifar", "unet_adm64", "unet_tiny", "unet_fmnist", NULL};
const char *const sg_model_descriptions[] = {
    "DDPM CIFAR-10: 32x32x3, ch 128 x (1,2,2,2), 2 res blocks, attn @16, batch 128",
    "ADM-style 64x64x3: ch 64 x (1,2,3,4), attn @16,8 (32 ch/head), pool/nearest, batch 32",
    "tests: 16x16x3, ch 32 x (1,2), 1 res block, attn @8, batch 4",
    "Fashion-MNIST (default): 32x32x1, ch 32 x (1,2,2), 1 res block, attn @8, batch 32",
};

static void set_training_defaults(sg_model_cfg *c) {
    c->T = 1000;
    c->beta1 = 1e-4f;
    c->betaT = 0.02f;
    c->lr = 2e-4f;
    c->b1 = 0.9f;
    c->b2 = 0.999f;
    c->eps = 1e-8f;
    c->wd = 0.0f;
    c->clip = 1.0f;
    c->ema_decay = 0.9999f;
    c->warmup = 5000;
    c->dropout = 0.1f;
    c->groups = 32;
    c->heads = 1;
    c->resample_conv = 1;
    c->flip = 1;
    c->act_dt = DT_F32;
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
    "  --batch N            batch size\n"
    "  --precision P        fp32 | bf16 (bf16 activations, fp32 master weights)\n"
    "  --ch N               base channels\n"
    "  --ch-mult A,B,...    channel multiplier per level\n"
    "  --res-blocks N       res blocks per level\n"
    "  --attn-res R,...     resolutions with attention (empty string: none)\n"
    "  --heads N            attention heads (--head-ch N: channels per head instead)\n"
    "  --groups N           GroupNorm groups\n"
    "  --img N              image size (square)\n"
    "  --in-ch N            image channels\n"
    "  --dropout P          dropout probability\n"
    "  --down-pad P         same | symmetric: padding of the stride-2 downsampling conv\n"
    "                       (same: 0 top/left, 1 bottom/right, as DDPM; symmetric: 1 all round)\n"
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
#undef INTFLAG
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
    if (!strcmp(f, "--dropout")) {
        char *end;
        double p = strtod(v, &end);
        if (!*v || *end || !(p >= 0 && p < 1)) /* NaN fails every comparison */
            return sg_set_error("--dropout expects a probability in [0, 1)"), -1;
        c->dropout = (float)p;
        return 1;
    }
    return 0;
}

static int heads_for(const sg_model_cfg *c, int C) {
    return c->head_ch ? C / c->head_ch : c->heads;
}

int sg_model_validate(const sg_model_cfg *c) {
    if (c->nlevels < 1 || c->nlevels > SG_MAX_LEVELS)
        return sg_set_error("model has %d levels (1 to %d)", c->nlevels, SG_MAX_LEVELS);
    if (c->nrb < 1 || c->nrb > SG_MAX_RES_BLOCKS)
        return sg_set_error("%d res blocks per level (1 to %d)", c->nrb, SG_MAX_RES_BLOCKS);
    if (c->ranks < 0)
        return sg_set_error("ranks must be 0 (one process) or a count, is %d", c->ranks);
    if (c->ranks > 0 && c->batch % c->ranks)
        return sg_set_error("--batch %d is the global batch and must divide evenly over %d ranks "
                            "(try --batch %d)",
                            c->batch, c->ranks, (c->batch / c->ranks + 1) * c->ranks);
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
    char ranks[32] = "";
    if (c->ranks > 0) snprintf(ranks, sizeof ranks, ",\"ranks\":%d", c->ranks);
    return snprintf(buf, (size_t)cap,
                    "{\"model\":\"%s\",\"img\":%d,\"in_ch\":%d,\"ch\":%d,\"ch_mult\":[%s],"
                    "\"nrb\":%d,\"attn_res\":[%s],\"heads\":%d,\"head_ch\":%d,\"groups\":%d,"
                    "\"dropout\":%.9g,\"resample_conv\":%d,\"down_pad\":\"%s\",\"batch\":%d,"
                    "\"precision\":\"%s\","
                    "\"T\":%d,\"beta1\":%.9g,\"betaT\":%.9g,\"lr\":%.9g,\"b1\":%.9g,\"b2\":%.9g,"
                    "\"eps\":%.9g,\"wd\":%.9g,\"warmup\":%d,\"clip\":%.9g,\"ema_decay\":%.9g,"
                    "\"flip\":%d%s}",
                    c->name, c->img, c->in_ch, c->ch, mult, c->nrb, attn, c->heads, c->head_ch,
                    c->groups, c->dropout, c->resample_conv, sg_down_pad_name(c->down_pad),
                    c->batch, c->act_dt == DT_BF16 ? "bf16" : "fp32", c->T, c->beta1, c->betaT,
                    c->lr, c->b1, c->b2, c->eps, c->wd, c->warmup, c->clip, c->ema_decay, c->flip,
                    ranks);
}

/* ---- the builder. `B` carries what every helper needs; errors latch in B->err. */
typedef struct {
    sg_graph *g;
    const sg_model_cfg *c;
    int train; /* creates grad/m/v/ema companions of each parameter */
    int seed_t, step_t;
    int st; /* silu(temb), shared by every res block */
    int err;
    int64_t n_params;
} builder;

static int param(builder *b, const char *module, const char *what, int ndim, const int64_t *shape,
                 int init, float bound) {
    if (b->err) return -1;
    char nm[SG_NAME_MAX];
    sg_name(nm, "%s.%s", module, what);
    int p = sg_tensor_new(b->g, nm, DT_F32, ROLE_PARAM, ndim, shape);
    if (p < 0) return b->err = 1, -1;
    b->g->t[p].needs_grad = 1;
    b->g->t[p].init = init;
    b->g->t[p].init_bound = bound;
    b->n_params += sg_numel(&b->g->t[p]);
    if (b->train) {
        static const char *const pre[] = {"grad:", "adam_m:", "adam_v:", "ema:"};
        static const sg_role roles[] = {ROLE_GRAD, ROLE_ADAM_M, ROLE_ADAM_V, ROLE_EMA};
        for (int i = 0; i < 4; i++) {
            char cn[SG_NAME_MAX + 8];
            sg_name(cn, "%s%s", pre[i], nm);
            int id = sg_tensor_new(b->g, cn, DT_F32, roles[i], ndim, shape);
            if (id < 0) return b->err = 1, -1;
            if (i == 0) b->g->t[p].grad = id;
        }
    }
    return p;
}

static int node(builder *b, sg_op op, const int *in, int nin, const sg_op_args *args,
                const char *name, int k) {
    if (b->err) return -1;
    int outs[SG_MAX_OUT] = {-1, -1, -1, -1};
    int n = sg_node_add(b->g, op, in, nin, outs, args, name);
    if (n < 0) return b->err = 1, -1;
    return outs[k];
}

/* pad: the top/left zero padding (K/2 is symmetric; see sg_conv_args) */
static int conv(builder *b, int x, int Co, int K, int S, int pad, const char *module,
                sg_dtype out_dt) {
    if (b->err) return -1;
    int Ci = (int)b->g->t[x].shape[3];
    float bound = 1.0f / sqrtf((float)(Ci * K * K));
    int64_t ws[4] = {Co, K, K, Ci}, bs[1] = {Co};
    int w = param(b, module, "weight", 4, ws, SG_INIT_UNIFORM, bound);
    int bb = param(b, module, "bias", 1, bs, SG_INIT_UNIFORM, bound);
    int in[3] = {x, w, bb};
    sg_op_args a = {.conv = {.K = K, .S = S, .pad = pad, .out_dt = out_dt}};
    return node(b, OP_CONV2D, in, 3, &a, module, 0);
}

static int linear(builder *b, int x, int M, const char *module) {
    if (b->err) return -1;
    int K = (int)b->g->t[x].shape[1];
    float bound = 1.0f / sqrtf((float)K);
    int64_t ws[2] = {M, K}, bs[1] = {M};
    int w = param(b, module, "weight", 2, ws, SG_INIT_UNIFORM, bound);
    int bb = param(b, module, "bias", 1, bs, SG_INIT_UNIFORM, bound);
    int in[3] = {x, w, bb};
    return node(b, OP_LINEAR, in, 3, NULL, module, 0);
}

static int group_norm(builder *b, int x, const char *module) {
    if (b->err) return -1;
    int64_t cs[1] = {b->g->t[x].shape[3]};
    int gm = param(b, module, "weight", 1, cs, SG_INIT_ONES, 0);
    int bt = param(b, module, "bias", 1, cs, SG_INIT_ZEROS, 0);
    int in[3] = {x, gm, bt};
    sg_op_args a = {.gn = {.groups = b->c->groups, .eps = 1e-6f}};
    return node(b, OP_GROUP_NORM, in, 3, &a, module, 0);
}

static int unary(builder *b, sg_op op, int x, const char *module, const char *what) {
    char nm[SG_NAME_MAX];
    sg_name(nm, "%s.%s", module, what);
    int in[1] = {x};
    return node(b, op, in, 1, NULL, nm, 0);
}

static int binary(builder *b, sg_op op, int x, int y, const char *module, const char *what) {
    char nm[SG_NAME_MAX];
    sg_name(nm, "%s.%s", module, what);
    int in[2] = {x, y};
    return node(b, op, in, 2, NULL, nm, 0);
}

static int dropout(builder *b, int x, const char *module) {
    if (b->c->dropout <= 0 || b->err) return x;
    char nm[SG_NAME_MAX];
    sg_name(nm, "%s.dropout", module);
    int in[3] = {x, b->seed_t, b->step_t};
    sg_op_args a = {.dropout = {.purpose = b->g->n_dropout++, .p = b->c->dropout}};
    return node(b, OP_DROPOUT, in, 3, &a, nm, 0);
}

static int resblock(builder *b, int x, int Co, const char *m) {
    char nm[SG_NAME_MAX];
#define SUB(s) (sg_name(nm, "%s.%s", m, s), nm)
    sg_dtype dt = b->c->act_dt;
    int h = group_norm(b, x, SUB("norm1"));
    h = unary(b, OP_SILU, h, m, "silu1");
    h = conv(b, h, Co, 3, 1, 1, SUB("conv1"), dt);
    int v = linear(b, b->st, Co, SUB("time_emb_proj"));
    h = binary(b, OP_ADD_NC, h, v, m, "add_temb");
    h = group_norm(b, h, SUB("norm2"));
    h = unary(b, OP_SILU, h, m, "silu2");
    h = dropout(b, h, m);
    h = conv(b, h, Co, 3, 1, 1, SUB("conv2"), dt);
    int skip = x;
    if (!b->err && b->g->t[x].shape[3] != Co)
        skip = conv(b, x, Co, 1, 1, 0, SUB("conv_shortcut"), dt);
    return binary(b, OP_ADD, skip, h, m, "out");
#undef SUB
}

static int attnblock(builder *b, int x, const char *m) {
    char nm[SG_NAME_MAX];
#define SUB(s) (sg_name(nm, "%s.%s", m, s), nm)
    if (b->err) return -1;
    int C = (int)b->g->t[x].shape[3];
    int h = group_norm(b, x, SUB("group_norm"));
    h = conv(b, h, 3 * C, 1, 1, 0, SUB("to_qkv"), b->c->act_dt);
    int in[1] = {h};
    sg_op_args a = {.attn = {.heads = heads_for(b->c, C)}};
    h = node(b, OP_ATTENTION, in, 1, &a, SUB("attn"), 0);
    h = conv(b, h, C, 1, 1, 0, SUB("to_out.0"), b->c->act_dt);
    return binary(b, OP_ADD, x, h, m, "out");
#undef SUB
}

static int has_attn(const sg_model_cfg *c, int res) {
    for (int i = 0; i < c->nattn; i++)
        if (c->attn_res[i] == res) return 1;
    return 0;
}

/* The UNet on x (act dtype) and t (i32[N]); returns the prediction (act dtype). */
static int unet(builder *b, int x, int t) {
    const sg_model_cfg *c = b->c;
    sg_dtype dt = c->act_dt;
    char nm[SG_NAME_MAX];
    int in[1] = {t};
    sg_op_args ta = {.temb = {.dim = c->ch, .out_dt = dt}};
    int e = node(b, OP_TIMESTEP_EMB, in, 1, &ta, "time_embedding.sinusoid", 0);
    e = linear(b, e, 4 * c->ch, "time_embedding.linear_1");
    e = unary(b, OP_SILU, e, "time_embedding", "silu");
    e = linear(b, e, 4 * c->ch, "time_embedding.linear_2");
    b->st = unary(b, OP_SILU, e, "time_embedding", "silu_out");

    /* skip connections: conv_in, nrb per level, one downsample per level but the last */
    int hs[1 + SG_MAX_LEVELS * (SG_MAX_RES_BLOCKS + 1)], nhs = 0;
    int h = conv(b, x, c->ch, 3, 1, 1, "conv_in", dt);
    hs[nhs++] = h;
    for (int i = 0; i < c->nlevels; i++) {
        int C = c->ch * c->ch_mult[i], res = c->img >> i;
        for (int j = 0; j < c->nrb; j++) {
            sg_name(nm, "down_blocks.%d.resnets.%d", i, j);
            h = resblock(b, h, C, nm);
            if (has_attn(c, res)) {
                sg_name(nm, "down_blocks.%d.attentions.%d", i, j);
                h = attnblock(b, h, nm);
            }
            hs[nhs++] = h;
        }
        if (i != c->nlevels - 1) {
            sg_name(nm, "down_blocks.%d.downsamplers.0", i);
            if (c->resample_conv) {
                char cn[SG_NAME_MAX + 8];
                sg_name(cn, "%s.conv", nm);
                h = conv(b, h, C, 3, 2, c->down_pad, cn, dt);
            } else {
                h = unary(b, OP_AVGPOOL2X, h, nm, "pool");
            }
            hs[nhs++] = h;
        }
    }
    int Cmid = c->ch * c->ch_mult[c->nlevels - 1];
    h = resblock(b, h, Cmid, "mid_block.resnets.0");
    h = attnblock(b, h, "mid_block.attentions.0");
    h = resblock(b, h, Cmid, "mid_block.resnets.1");
    for (int k = 0; k < c->nlevels; k++) {
        int i = c->nlevels - 1 - k;
        int C = c->ch * c->ch_mult[i], res = c->img >> i;
        for (int j = 0; j < c->nrb + 1; j++) {
            sg_name(nm, "up_blocks.%d.resnets.%d", k, j);
            h = binary(b, OP_CONCAT, h, hs[--nhs], nm, "cat");
            h = resblock(b, h, C, nm);
            if (has_attn(c, res)) {
                sg_name(nm, "up_blocks.%d.attentions.%d", k, j);
                h = attnblock(b, h, nm);
            }
        }
        if (i != 0) {
            sg_name(nm, "up_blocks.%d.upsamplers.0", k);
            h = unary(b, OP_UPSAMPLE2X, h, nm, "nearest");
            if (c->resample_conv) {
                char cn[SG_NAME_MAX + 8];
                sg_name(cn, "%s.conv", nm);
                h = conv(b, h, C, 3, 1, 1, cn, dt);
            }
        }
    }
    h = group_norm(b, h, "conv_norm_out");
    h = unary(b, OP_SILU, h, "conv_norm_out", "silu");
    /* the prediction in the activation dtype, as PyTorch's conv under autocast; the loss reads
     * it in fp32 */
    return conv(b, h, c->in_ch, 3, 1, 1, "conv_out", dt);
}

static int scalar_state(sg_graph *g, const char *name, sg_dtype dt) {
    int64_t one[1] = {1};
    return sg_tensor_new(g, name, dt, ROLE_STATE, 1, one);
}

/* One region tensor per persistent role: a flat f32 view over the whole role region (the
 * optimizer runs one kernel over it). Its size counts every tensor of the role at SG_ALIGN. */
static int region(sg_graph *g, sg_role role, const char *name) {
    int64_t bytes = 0;
    for (int i = 0; i < g->nt; i++)
        if (g->t[i].role == role && !g->t[i].region) bytes += SG_ALIGN_UP(g->t[i].bytes, SG_ALIGN);
    int64_t n[1] = {bytes / 4};
    int id = sg_tensor_new(g, name, DT_F32, role, 1, n);
    if (id >= 0) g->t[id].region = 1;
    return id;
}

int sg_build_train_step(sg_graph *g, const sg_model_cfg *c, sg_step_io *io) {
    if (sg_model_validate(c)) return SG_ERR;
    memset(io, -1, sizeof *io);
    builder b = {.g = g, .c = c, .train = 1};
    int N = sg_model_rank_batch(c); /* this rank's samples; c->batch is the global batch */
    io->step = scalar_state(g, "step", DT_I64);
    io->seed = scalar_state(g, "rng_seed", DT_U64);
    io->lr = scalar_state(g, "lr", DT_F32);
    io->loss = scalar_state(g, "loss", DT_F32);
    io->grad_sumsq = scalar_state(g, "grad_sumsq", DT_F32);
    io->clip_scale = scalar_state(g, "clip_scale", DT_F32);
    int64_t ds[4] = {c->data_n, c->data_h, c->data_w, c->in_ch};
    io->dataset = sg_tensor_new(g, "dataset", DT_U8, ROLE_INPUT, 4, ds);
    b.seed_t = io->seed, b.step_t = io->step;

    int in3[3] = {io->dataset, io->seed, io->step};
    sg_op_args ga = {.gather = {.N = N, .img = c->img, .flip = c->flip, .batch = c->batch}};
    io->x0 = node(&b, OP_GATHER_BATCH, in3, 3, &ga, "x0", 0);
    int in2[2] = {io->seed, io->step};
    sg_op_args ta = {.sample_t = {.N = N, .T = c->T}};
    io->t = node(&b, OP_SAMPLE_T, in2, 2, &ta, "t", 0);
    int in3b[3] = {io->x0, io->seed, io->step};
    io->eps = node(&b, OP_NOISE, in3b, 3, NULL, "eps", 0);
    int in3c[3] = {io->x0, io->eps, io->t};
    sg_op_args da = {
        .ddpm = {.T = c->T, .beta1 = c->beta1, .betaT = c->betaT, .out_dt = c->act_dt}};
    io->xt = node(&b, OP_DDPM_NOISE, in3c, 3, &da, "x_t", 0);
    io->pred = unet(&b, io->xt, io->t);
    if (b.err) return SG_ERR;
    /* the loss scale: the gradient of the loss is 1/ranks, so the all-reduce SUM of the ranks'
     * gradients is the gradient of the global batch's mean loss (1/1 = 1 in one process) */
    int mse_in[2] = {io->pred, io->eps}, mse_out[SG_MAX_OUT] = {io->loss};
    sg_op_args ma = {.mse = {.loss_scale = c->ranks > 0 ? (float)(1.0 / c->ranks) : 1.0f}};
    if (sg_node_add(g, OP_MSE, mse_in, 2, mse_out, &ma, "mse") < 0) return SG_ERR;
    io->n_params = b.n_params;

    if (ad_backward(g, io->loss)) return SG_ERR;
    for (int i = 0; i < g->nt; i++)
        if (g->t[i].role == ROLE_PARAM && !g->t[g->t[i].grad].has_contrib)
            return sg_set_error("parameter %s receives no gradient", g->t[i].name);

    io->params = region(g, ROLE_PARAM, "params");
    io->grads = region(g, ROLE_GRAD, "grads");
    io->adam_m = region(g, ROLE_ADAM_M, "adam_m");
    io->adam_v = region(g, ROLE_ADAM_V, "adam_v");
    io->ema = region(g, ROLE_EMA, "ema");
    int o[SG_MAX_OUT];
    if (c->ranks > 0) {
        /* data parallel: the one all-reduce of the step, after the backward pass and before
         * anything reads the gradients, so every rank then clips, steps and averages the same
         * numbers and stays bit-identical. Gradients sum (the 1/ranks is in the loss scale);
         * the loss is averaged over the ranks for the record. */
        int r_in[2] = {io->grads, io->loss}, r_out[SG_MAX_OUT] = {io->grads, io->loss};
        sg_op_args ra = {.allreduce = {.ranks = c->ranks, .loss_factor = (float)(1.0 / c->ranks)}};
        io->allreduce = sg_node_add(g, OP_ALLREDUCE, r_in, 2, r_out, &ra, "allreduce");
        if (io->allreduce < 0) return SG_ERR;
    }
    int s_in[1] = {io->grads};
    o[0] = io->grad_sumsq;
    if (sg_node_add(g, OP_GRAD_SUMSQ, s_in, 1, o, NULL, "grad_sumsq") < 0) return SG_ERR;
    int c_in[1] = {io->grad_sumsq};
    sg_op_args ca = {.clip = {.max_norm = c->clip}};
    o[0] = io->clip_scale;
    if (sg_node_add(g, OP_CLIP_SCALE, c_in, 1, o, &ca, "clip_scale") < 0) return SG_ERR;
    int a_in[6] = {io->params, io->grads, io->adam_m, io->adam_v, io->clip_scale, io->step};
    int a_out[SG_MAX_OUT] = {io->params, io->adam_m, io->adam_v, io->lr};
    sg_op_args aa = {.adamw = {.warmup = c->warmup,
                               .lr = c->lr,
                               .b1 = c->b1,
                               .b2 = c->b2,
                               .eps = c->eps,
                               .wd = c->wd}};
    if (sg_node_add(g, OP_ADAMW, a_in, 6, a_out, &aa, "adamw") < 0) return SG_ERR;
    int e_in[2] = {io->ema, io->params}, e_out[SG_MAX_OUT] = {io->ema};
    sg_op_args ea = {.ema = {.decay = c->ema_decay}};
    if (sg_node_add(g, OP_EMA, e_in, 2, e_out, &ea, "ema") < 0) return SG_ERR;
    /* before the increment: it records step + 1, the 1-based step just run */
    io->watch = scalar_state(g, "nonfinite_step", DT_I64);
    io->loss_sum = scalar_state(g, "loss_sum", DT_F32);
    int w_in[5] = {io->loss, io->grad_sumsq, io->step, io->watch, io->loss_sum};
    int w_out[SG_MAX_OUT] = {io->watch, io->loss_sum};
    if (sg_node_add(g, OP_LOSS_WATCH, w_in, 5, w_out, NULL, "loss_watch") < 0) return SG_ERR;
    int st_in[1] = {io->step}, st_out[SG_MAX_OUT] = {io->step};
    if (sg_node_add(g, OP_STEP_INC, st_in, 1, st_out, NULL, "step_inc") < 0) return SG_ERR;
    return SG_OK;
}

int sg_build_forward(sg_graph *g, const sg_model_cfg *c, sg_step_io *io) {
    if (sg_model_validate(c)) return SG_ERR;
    memset(io, -1, sizeof *io);
    sg_model_cfg fc = *c;
    fc.dropout = 0; /* sampling: the network in evaluation form */
    builder b = {.g = g, .c = &fc, .train = 0};
    int64_t xs[4] = {c->batch, c->img, c->img, c->in_ch}, ts[1] = {c->batch};
    io->xt = sg_tensor_new(g, "x_t", c->act_dt, ROLE_INPUT, 4, xs);
    io->t = sg_tensor_new(g, "t", DT_I32, ROLE_INPUT, 1, ts);
    io->pred = unet(&b, io->xt, io->t);
    if (b.err) return SG_ERR;
    io->n_params = b.n_params;
    io->params = region(g, ROLE_PARAM, "params");
    g->n_forward = g->nn;
    return SG_OK;
}
