/* ckpt_diffusers.c — stepgraph models as diffusers folders and back (ckpt.h, "diffusers").
 *
 * A stepgraph model config is the "config" object of the checkpoint metadata (sg_model_json's
 * fields: img, in_ch, ch, ch_mult, nrb, attn_res, heads, head_ch, groups, dropout,
 * resample_conv, down_pad, T, beta1, betaT, beta_schedule). diffusers' UNet2DModel computes the
 * same function (docs/model.md) when its config.json says: sample_size img, in/out_channels in_ch,
 * block_out_channels ch*ch_mult[i], layers_per_block nrb, (Attn)DownBlock2D / (Attn)UpBlock2D where
 * the level's resolution is in attn_res (up blocks listed from the lowest resolution),
 * norm_num_groups groups, norm_eps 1e-6, act_fn silu, time_embedding_type positional with
 * flip_sin_to_cos false and freq_shift 1 ([sin, cos] with frequencies exp(-ln(1e4) i / (half -
 * 1))), downsample_padding 0 (same: diffusers pads (0,1,0,1) then convolves unpadded) or 1
 *   (symmetric), attention_head_dim null (one head of C channels) or the channels per head,
 *   mid_block_scale_factor 1, conv resampling, no class embedding.
 * Anything else either way is refused with the field that has no counterpart.
 *
 * The exported folder serves both loaders:
 *   DIR/config.json, DIR/diffusion_pytorch_model.safetensors   UNet2DModel.from_pretrained(DIR)
 *   DIR/scheduler_config.json                                  DDPMScheduler.from_pretrained(DIR)
 *   DIR/model_index.json, DIR/unet/{config.json, the weights (a hard link)},
 *   DIR/scheduler/scheduler_config.json                        DDPMPipeline.from_pretrained(DIR)
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoints/ckpt_internal.h"
#include "checkpoints/ckpt_json.h"

#define DIFFUSERS_VERSION "0.31.0" /* the version the CI test pins and checks against */
/* a class table's most rows: planner/model.h's SG_MAX_CLASSES and the null class */
#define MAX_CLASS_ROWS 4097
#define MAX_LEVELS 8

/* The architecture fields of a stepgraph config, decoded. */
typedef struct {
    int img, in_ch, ch, nlevels, ch_mult[MAX_LEVELS], nrb, nattn, attn_res[MAX_LEVELS];
    int heads, head_ch, groups, resample_conv, same_pad;
    double dropout;
    int T, cosine; /* cosine: beta_schedule "cosine" (absent: linear from beta1 to betaT) */
    int vpred;     /* prediction "v" (absent: eps) */
    int zero_snr;  /* zero_snr 1 (absent: 0) */
    int classes;   /* a class-conditional model's classes (absent: 0, unconditional) */
    double beta1, betaT;
} arch;

static int get_int(const ckpt_json *j, int node, const char *key, int64_t lo, int64_t hi, int *out,
                   const char *what) {
    int c = ckpt_json_find(j, node, key);
    if (c < 0 || !ckpt_json_is_integer(j, c))
        return sg_set_error("%s: \"%s\" is missing or not an integer", what, key);
    int64_t v = ckpt_json_integer(j, c);
    if (v < lo || v > hi)
        return sg_set_error("%s: \"%s\" = %lld is outside [%lld, %lld]", what, key, (long long)v,
                            (long long)lo, (long long)hi);
    *out = (int)v;
    return SG_OK;
}

static int get_list(const ckpt_json *j, int node, const char *key, int *out, int *n,
                    const char *what) {
    int c = ckpt_json_find(j, node, key);
    if (c < 0 || ckpt_json_type(j, c) != CKPT_JSON_ARRAY)
        return sg_set_error("%s: \"%s\" is missing or not a list", what, key);
    *n = ckpt_json_count(j, c);
    if (*n > MAX_LEVELS) return sg_set_error("%s: \"%s\" has more than %d entries", what, key, 8);
    for (int i = 0; i < *n; i++) {
        int e = ckpt_json_child(j, c, i);
        if (!ckpt_json_is_integer(j, e) || ckpt_json_integer(j, e) < 1 ||
            ckpt_json_integer(j, e) > (1 << 20))
            return sg_set_error("%s: \"%s\"[%d] is not a positive integer", what, key, i);
        out[i] = (int)ckpt_json_integer(j, e);
    }
    return SG_OK;
}

static int get_num(const ckpt_json *j, int node, const char *key, double *out, const char *what) {
    int c = ckpt_json_find(j, node, key);
    if (c < 0 || ckpt_json_type(j, c) != CKPT_JSON_NUMBER)
        return sg_set_error("%s: \"%s\" is missing or not a number", what, key);
    *out = ckpt_json_number(j, c);
    return SG_OK;
}

/* Decode the stepgraph config object at `node`. */
static int arch_decode(const ckpt_json *j, int node, arch *a, const char *what) {
    memset(a, 0, sizeof *a);
    char pad[32] = "symmetric"; /* configs from before down_pad existed */
    int c = ckpt_json_find(j, node, "down_pad");
    if (c >= 0) {
        const char *s = ckpt_json_string(j, c);
        if (!s || (strcmp(s, "same") && strcmp(s, "symmetric")))
            return sg_set_error("%s: \"down_pad\" is not \"same\" or \"symmetric\"", what);
        snprintf(pad, sizeof pad, "%s", s);
    }
    a->same_pad = !strcmp(pad, "same");
    c = ckpt_json_find(j, node, "beta_schedule");
    if (c >= 0) {
        const char *s = ckpt_json_string(j, c);
        if (!s || (strcmp(s, "linear") && strcmp(s, "cosine")))
            return sg_set_error("%s: \"beta_schedule\" is not \"linear\" or \"cosine\"", what);
        a->cosine = !strcmp(s, "cosine");
    }
    c = ckpt_json_find(j, node, "prediction");
    if (c >= 0) {
        const char *s = ckpt_json_string(j, c);
        if (!s || (strcmp(s, "eps") && strcmp(s, "v")))
            return sg_set_error("%s: \"prediction\" is not \"eps\" or \"v\"", what);
        a->vpred = !strcmp(s, "v");
    }
    c = ckpt_json_find(j, node, "zero_snr");
    if (c >= 0) {
        if (!ckpt_json_is_integer(j, c) || (uint64_t)ckpt_json_integer(j, c) > 1)
            return sg_set_error("%s: \"zero_snr\" is not 0 or 1", what);
        a->zero_snr = (int)ckpt_json_integer(j, c);
    }
    if (get_int(j, node, "img", 1, 1 << 14, &a->img, what) ||
        get_int(j, node, "in_ch", 1, 64, &a->in_ch, what) ||
        get_int(j, node, "ch", 1, 1 << 14, &a->ch, what) ||
        get_list(j, node, "ch_mult", a->ch_mult, &a->nlevels, what) ||
        get_int(j, node, "nrb", 1, 64, &a->nrb, what) ||
        get_list(j, node, "attn_res", a->attn_res, &a->nattn, what) ||
        get_int(j, node, "heads", 0, 1 << 14, &a->heads, what) ||
        get_int(j, node, "head_ch", 0, 1 << 14, &a->head_ch, what) ||
        get_int(j, node, "groups", 1, 1 << 14, &a->groups, what) ||
        get_int(j, node, "resample_conv", 0, 1, &a->resample_conv, what) ||
        get_num(j, node, "dropout", &a->dropout, what) ||
        get_int(j, node, "T", 1, 1 << 20, &a->T, what) ||
        get_num(j, node, "beta1", &a->beta1, what) || get_num(j, node, "betaT", &a->betaT, what))
        return SG_ERR;
    if (ckpt_json_find(j, node, "classes") >= 0 &&
        get_int(j, node, "classes", 0, 1 << 20, &a->classes, what))
        return SG_ERR;
    if (a->nlevels < 1) return sg_set_error("%s: \"ch_mult\" is empty", what);
    if (!a->heads && !a->head_ch) return sg_set_error("%s: neither heads nor head_ch", what);
    return SG_OK;
}

static int level_has_attn(const arch *a, int level) {
    for (int k = 0; k < a->nattn; k++)
        if (a->attn_res[k] == a->img >> level) return 1;
    return 0;
}

/* Attention heads of a block with C channels. */
static int heads_at(const arch *a, int C) {
    return a->head_ch ? C / a->head_ch : a->heads;
}

/* diffusers' attention_head_dim for a: 0 means null (one head of C channels everywhere). */
static int attention_head_dim(const arch *a, int *dim) {
    if (a->head_ch) return *dim = a->head_ch, SG_OK;
    if (a->heads == 1) return *dim = 0, SG_OK;
    /* a fixed head count: the channels per head must be one number across the attention
     * blocks (the middle block has the last level's channels) */
    int d = a->ch * a->ch_mult[a->nlevels - 1] / a->heads;
    for (int i = 0; i < a->nlevels; i++) {
        int C = a->ch * a->ch_mult[i];
        if (level_has_attn(a, i) && C / a->heads != d)
            return sg_set_error("diffusers cannot express %d heads at every attention block: it "
                                "has one attention_head_dim, and the blocks here have %d and %d "
                                "channels per head (use --head-ch)",
                                a->heads, C / a->heads, d);
    }
    *dim = d;
    return SG_OK;
}

/* the architecture of a stepgraph model config (JSON text) */
static int decode_config(const char *config_json, arch *a) {
    ckpt_json *j = ckpt_json_parse(config_json, strlen(config_json));
    if (!j) return SG_ERR;
    int rc = arch_decode(j, 0, a, "model config");
    ckpt_json_free(j);
    return rc;
}

int ckpt_diffusers_unet_config(const char *config_json, char *buf, size_t cap) {
    arch a;
    if (decode_config(config_json, &a)) return SG_ERR;
    if (!a.resample_conv)
        return sg_set_error("diffusers' UNet2DModel cannot express resample_conv 0: its "
                            "DownBlock2D/UpBlock2D always resample through a 3x3 conv, this "
                            "model pools 2x2 / repeats nearest without one (unet_adm64's "
                            "resampling)");
    int dim = 0;
    if (attention_head_dim(&a, &dim)) return SG_ERR;
    char boc[128] = "", down[512] = "", up[512] = "", head[32] = "null", cls[32] = "null";
    /* a class-conditional model: its table's rows, the classes and the null class (the last:
     * docs/model.md); diffusers' UNet2DModel makes the nn.Embedding the weights load into */
    if (a.classes > 0) snprintf(cls, sizeof cls, "%d", a.classes + 1);
    for (int i = 0; i < a.nlevels; i++) {
        size_t n = strlen(boc), m = strlen(down), u = strlen(up);
        snprintf(boc + n, sizeof boc - n, "%s%d", i ? ", " : "", a.ch * a.ch_mult[i]);
        snprintf(down + m, sizeof down - m, "%s\"%s\"", i ? ", " : "",
                 level_has_attn(&a, i) ? "AttnDownBlock2D" : "DownBlock2D");
        snprintf(up + u, sizeof up - u, "%s\"%s\"", i ? ", " : "",
                 level_has_attn(&a, a.nlevels - 1 - i) ? "AttnUpBlock2D" : "UpBlock2D");
    }
    if (dim) snprintf(head, sizeof head, "%d", dim);
    int n = snprintf(buf, cap,
                     "{\n"
                     "  \"_class_name\": \"UNet2DModel\",\n"
                     "  \"_diffusers_version\": \"" DIFFUSERS_VERSION "\",\n"
                     "  \"_stepgraph\": \"exported by stepgraph (docs/model.md)\",\n"
                     "  \"sample_size\": %d,\n"
                     "  \"in_channels\": %d,\n"
                     "  \"out_channels\": %d,\n"
                     "  \"center_input_sample\": false,\n"
                     "  \"time_embedding_type\": \"positional\",\n"
                     "  \"flip_sin_to_cos\": false,\n"
                     "  \"freq_shift\": 1,\n"
                     "  \"down_block_types\": [%s],\n"
                     "  \"up_block_types\": [%s],\n"
                     "  \"block_out_channels\": [%s],\n"
                     "  \"layers_per_block\": %d,\n"
                     "  \"mid_block_scale_factor\": 1,\n"
                     "  \"downsample_padding\": %d,\n"
                     "  \"downsample_type\": \"conv\",\n"
                     "  \"upsample_type\": \"conv\",\n"
                     "  \"dropout\": %.9g,\n"
                     "  \"act_fn\": \"silu\",\n"
                     "  \"attention_head_dim\": %s,\n"
                     "  \"norm_num_groups\": %d,\n"
                     "  \"attn_norm_num_groups\": null,\n"
                     "  \"norm_eps\": 1e-06,\n"
                     "  \"resnet_time_scale_shift\": \"default\",\n"
                     "  \"add_attention\": true,\n"
                     "  \"class_embed_type\": null,\n"
                     "  \"num_class_embeds\": %s,\n"
                     "  \"num_train_timesteps\": null\n"
                     "}\n",
                     a.img, a.in_ch, a.in_ch, down, up, boc, a.nrb, a.same_pad ? 0 : 1, a.dropout,
                     head, a.groups, cls);
    if (n < 0 || (size_t)n >= cap) return sg_set_error("diffusers config does not fit");
    return SG_OK;
}

/* DDPMScheduler's config for the training schedule of config_json (cosine: diffusers'
 * "squaredcos_cap_v2", which has no beta_start / beta_end: DDPM's are written, unused).
 * rescale_betas_zero_snr says whether the betas are rescaled to zero terminal SNR.
 * timestep_spacing "trailing" is `sample --ddim-steps`'s spacing (graph/sampler.h:
 * sg_ddim_timesteps), so a DDIMScheduler made from this config visits the same timesteps; all T
 * steps (DDPM) are the same under every spacing. */
static int scheduler_config(const char *config_json, char *buf, size_t cap) {
    arch a;
    if (decode_config(config_json, &a)) return SG_ERR;
    int n = snprintf(buf, cap,
                     "{\n"
                     "  \"_class_name\": \"DDPMScheduler\",\n"
                     "  \"_diffusers_version\": \"" DIFFUSERS_VERSION "\",\n"
                     "  \"num_train_timesteps\": %d,\n"
                     "  \"beta_start\": %.9g,\n"
                     "  \"beta_end\": %.9g,\n"
                     "  \"beta_schedule\": \"%s\",\n"
                     "  \"trained_betas\": null,\n"
                     "  \"variance_type\": \"fixed_small\",\n"
                     "  \"clip_sample\": true,\n"
                     "  \"clip_sample_range\": 1.0,\n"
                     "  \"prediction_type\": \"%s\",\n"
                     "  \"rescale_betas_zero_snr\": %s,\n"
                     "  \"thresholding\": false,\n"
                     "  \"timestep_spacing\": \"trailing\",\n"
                     "  \"steps_offset\": 0\n"
                     "}\n",
                     a.T, a.cosine ? 1e-4 : a.beta1, a.cosine ? 0.02 : a.betaT,
                     a.cosine ? "squaredcos_cap_v2" : "linear",
                     a.vpred ? "v_prediction" : "epsilon", a.zero_snr ? "true" : "false");
    if (n < 0 || (size_t)n >= cap) return sg_set_error("scheduler config does not fit");
    return SG_OK;
}

static int write_text(const char *path, const char *text) {
    ckpt_atomic a;
    if (ckpt_atomic_begin(&a, path, NULL)) return SG_ERR;
    if (ckpt_atomic_write(&a, text, strlen(text))) {
        ckpt_atomic_abort(&a);
        return SG_ERR;
    }
    return ckpt_atomic_commit(&a);
}

static int make_dir(const char *path) {
    if (mkdir(path, 0755) && errno != EEXIST)
        return sg_set_error("cannot create directory %s: %s", path, strerror(errno));
    struct stat st;
    if (stat(path, &st) || !S_ISDIR(st.st_mode))
        return sg_set_error("%s exists and is not a directory", path);
    return SG_OK;
}

/* dst as a hard link to src (same bytes, no copy); a copy where links are impossible. */
static int link_or_copy(const char *src, const char *dst) {
    unlink(dst);
    if (!link(src, dst)) return SG_OK;
    FILE *in = fopen(src, "rb");
    if (!in) return sg_set_error("cannot read %s: %s", src, strerror(errno));
    ckpt_atomic a;
    if (ckpt_atomic_begin(&a, dst, NULL)) return fclose(in), SG_ERR;
    char buf[1 << 16];
    size_t n;
    int failed = 0;
    while (!failed && (n = fread(buf, 1, sizeof buf, in)) > 0)
        failed = ckpt_atomic_write(&a, buf, n);
    failed |= ferror(in);
    fclose(in);
    if (failed) {
        ckpt_atomic_abort(&a);
        return sg_set_error("cannot copy %s to %s", src, dst);
    }
    return ckpt_atomic_commit(&a);
}

int ckpt_export_diffusers(const ckpt_file *f, const char *dir, int ema) {
    /* the model config: the checkpoint metadata's "config" object */
    ckpt_json *meta = ckpt_json_parse(ckpt_meta(f), strlen(ckpt_meta(f)));
    if (!meta) return SG_ERR;
    int c = ckpt_json_find(meta, 0, "config");
    if (c < 0 || ckpt_json_type(meta, c) != CKPT_JSON_OBJECT) {
        ckpt_json_free(meta);
        return sg_set_error("%s has no model config in its metadata (not a training checkpoint)",
                            ckpt_path(f));
    }
    size_t need = ckpt_json_render(meta, c, NULL, 0) + 1;
    char *cfg = malloc(need), *unet = malloc(8192), *sched = malloc(4096);
    char *path = malloc(3 * 4096);
    int rc = SG_ERR;
    if (!cfg || !unet || !sched || !path) {
        sg_set_error("export: out of memory");
        goto out;
    }
    ckpt_json_render(meta, c, cfg, need);
    char *p2 = path + 4096, *p3 = path + 8192;
#define PATH(buf, ...)                                                                             \
    (snprintf(buf, 4096, __VA_ARGS__) >= 4096 ? (sg_set_error("path too long"), 1) : 0)
    /* everything that can be refused is refused before anything is written */
    if (ckpt_diffusers_unet_config(cfg, unet, 8192) || scheduler_config(cfg, sched, 4096)) goto out;
    if (make_dir(dir)) goto out;
    if (PATH(path, "%s/diffusion_pytorch_model.safetensors", dir) ||
        ckpt_export_safetensors(f, path, ema))
        goto out;
    if (PATH(p2, "%s/config.json", dir) || write_text(p2, unet)) goto out;
    if (PATH(p2, "%s/scheduler_config.json", dir) || write_text(p2, sched)) goto out;
    if (PATH(p2, "%s/unet", dir) || make_dir(p2)) goto out;
    if (PATH(p3, "%s/unet/config.json", dir) || write_text(p3, unet)) goto out;
    if (PATH(p3, "%s/unet/diffusion_pytorch_model.safetensors", dir) || link_or_copy(path, p3))
        goto out;
    if (PATH(p2, "%s/scheduler", dir) || make_dir(p2)) goto out;
    if (PATH(p3, "%s/scheduler/scheduler_config.json", dir) || write_text(p3, sched)) goto out;
    if (PATH(p2, "%s/model_index.json", dir) ||
        write_text(p2, "{\n"
                       "  \"_class_name\": \"DDPMPipeline\",\n"
                       "  \"_diffusers_version\": \"" DIFFUSERS_VERSION "\",\n"
                       "  \"scheduler\": [\"diffusers\", \"DDPMScheduler\"],\n"
                       "  \"unet\": [\"diffusers\", \"UNet2DModel\"]\n"
                       "}\n"))
        goto out;
#undef PATH
    rc = SG_OK;
out:
    ckpt_json_free(meta);
    free(cfg);
    free(unet);
    free(sched);
    free(path);
    return rc;
}

/* ---- diffusers folder -> stepgraph config ---- */

static char *slurp(const char *path, size_t max) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    char *buf = malloc(max + 1);
    size_t n = buf ? fread(buf, 1, max + 1, fp) : 0;
    fclose(fp);
    if (!buf) return NULL;
    if (n > max) {
        free(buf);
        sg_set_error("%s is larger than %zu bytes", path, max);
        return NULL;
    }
    buf[n] = 0;
    return buf;
}

/* `key` of object `node` compared with what stepgraph computes; absent keys take diffusers'
 * defaults (given as JSON text). Returns SG_ERR naming the field. */
static int want(const ckpt_json *j, int node, const char *key, const char *expect, const char *dflt,
                const char *file) {
    ckpt_json *e = ckpt_json_parse(expect, strlen(expect));
    int c = ckpt_json_find(j, node, key);
    ckpt_json *d = c < 0 ? ckpt_json_parse(dflt, strlen(dflt)) : NULL;
    int differs =
        !e || (c < 0 && !d) || ckpt_json_diff(c < 0 ? d : j, c < 0 ? 0 : c, e, 0, NULL, 0);
    /* numbers: norm_eps may be written as 1e-6 or 0.000001; compare by value, relatively */
    if (differs && e && c >= 0 && ckpt_json_type(j, c) == CKPT_JSON_NUMBER &&
        ckpt_json_type(e, 0) == CKPT_JSON_NUMBER) {
        double x = ckpt_json_number(j, c), y = ckpt_json_number(e, 0);
        differs = fabs(x - y) > 1e-9 * fabs(y);
    }
    char got[128] = "";
    if (differs) {
        if (c >= 0)
            ckpt_json_render(j, c, got, sizeof got);
        else
            snprintf(got, sizeof got, "%s (the default)", dflt);
    }
    ckpt_json_free(e);
    ckpt_json_free(d);
    if (differs)
        return sg_set_error("%s: \"%s\" is %s; stepgraph computes only %s", file, key, got, expect);
    return SG_OK;
}

/* Find DIR/name, else DIR/sub/name; returns the file's text or NULL (path_out: which). */
static char *find_config(const char *dir, const char *sub, const char *name, char *path_out) {
    snprintf(path_out, 4096, "%s/%s", dir, name);
    char *t = slurp(path_out, 1 << 20);
    if (t) return t;
    snprintf(path_out, 4096, "%s/%s/%s", dir, sub, name);
    return slurp(path_out, 1 << 20);
}

/* what stepgraph's UNet is (docs/model.md); absent keys take diffusers' defaults */
static int check_fixed(const ckpt_json *j, const char *path) {
    return want(j, 0, "act_fn", "\"silu\"", "\"silu\"", path) ||
           want(j, 0, "time_embedding_type", "\"positional\"", "\"positional\"", path) ||
           want(j, 0, "flip_sin_to_cos", "false", "true", path) ||
           want(j, 0, "freq_shift", "1", "0", path) ||
           want(j, 0, "norm_eps", "1e-6", "1e-5", path) ||
           want(j, 0, "mid_block_scale_factor", "1", "1", path) ||
           want(j, 0, "center_input_sample", "false", "false", path) ||
           want(j, 0, "resnet_time_scale_shift", "\"default\"", "\"default\"", path) ||
           want(j, 0, "downsample_type", "\"conv\"", "\"conv\"", path) ||
           want(j, 0, "upsample_type", "\"conv\"", "\"conv\"", path) ||
           want(j, 0, "add_attention", "true", "true", path) ||
           want(j, 0, "class_embed_type", "null", "null", path);
}

/* A scheduler field that names one of two choices (absent: the first): *second set, or SG_ERR
 * naming the field, what it says and the two choices. */
static int one_of(const ckpt_json *s, const char *key, const char *first, const char *second,
                  const char *spath, int *is_second) {
    const int c = ckpt_json_find(s, 0, key);
    const char *v = c >= 0 ? ckpt_json_string(s, c) : first;
    *is_second = v && !strcmp(v, second);
    if (v && (*is_second || !strcmp(v, first))) return SG_OK;
    char got[64] = "";
    ckpt_json_render(s, c, got, sizeof got);
    return sg_set_error("%s: \"%s\" is %s; stepgraph trains \"%s\" and \"%s\"", spath, key, got,
                        first, second);
}

/* A scheduler field that is true or false (absent: *out unchanged). */
static int get_flag(const ckpt_json *s, const char *key, int *out, const char *spath) {
    const int c = ckpt_json_find(s, 0, key);
    if (c < 0) return SG_OK;
    if (ckpt_json_type(s, c) == CKPT_JSON_BOOL) {
        *out = ckpt_json_bool(s, c);
        return SG_OK;
    }
    char got[64] = "";
    ckpt_json_render(s, c, got, sizeof got);
    return sg_set_error("%s: \"%s\" is %s, not a boolean (true or false)", spath, key, got);
}

/* The DDPM schedule of a folder's scheduler_config.json (absent: DDPM's, T = 1000, linear
 * betas 1e-4 .. 0.02, eps prediction); only what stepgraph trains is accepted: linear betas, or
 * cosine ("squaredcos_cap_v2", whose beta_start / beta_end diffusers does not read: not read
 * here); prediction_type "epsilon" or "v_prediction"; rescale_betas_zero_snr (absent: false);
 * no trained_betas. The sampling options (timestep_spacing, clip_sample, variance_type, ...) are
 * not the model's and not read. */
static int read_scheduler(const char *dir, int *T, int *cosine, int *vpred, int *zero_snr,
                          double *b1, double *bT) {
    char spath[4096];
    char *st = find_config(dir, "scheduler", "scheduler_config.json", spath);
    if (!st) return SG_OK;
    ckpt_json *s = ckpt_json_parse(st, strlen(st));
    free(st);
    if (!s) return SG_ERR;
    if (one_of(s, "beta_schedule", "linear", "squaredcos_cap_v2", spath, cosine) ||
        one_of(s, "prediction_type", "epsilon", "v_prediction", spath, vpred)) {
        ckpt_json_free(s);
        return SG_ERR;
    }
    int rc =
        want(s, 0, "trained_betas", "null", "null", spath) ||
        /* zero terminal SNR (Lin et al. 2024): the betas rescaled (common/sg_schedule.h) */
        get_flag(s, "rescale_betas_zero_snr", zero_snr, spath) ||
        (ckpt_json_find(s, 0, "num_train_timesteps") >= 0 &&
         get_int(s, 0, "num_train_timesteps", 1, 1 << 20, T, spath)) ||
        (!*cosine && ckpt_json_find(s, 0, "beta_start") >= 0 &&
         get_num(s, 0, "beta_start", b1, spath)) ||
        (!*cosine && ckpt_json_find(s, 0, "beta_end") >= 0 && get_num(s, 0, "beta_end", bT, spath));
    ckpt_json_free(s);
    return rc ? SG_ERR : SG_OK;
}

int ckpt_diffusers_sampling(const char *dir, char *scheduler, char *spacing, size_t cap,
                            int *steps_offset, int *var_large, int *karras) {
    char spath[4096];
    scheduler[0] = spacing[0] = 0, *steps_offset = 0, *var_large = 0, *karras = 0;
    char *st = find_config(dir, "scheduler", "scheduler_config.json", spath);
    if (!st) return SG_OK;
    ckpt_json *s = ckpt_json_parse(st, strlen(st));
    free(st);
    if (!s) return SG_ERR;
    int c = ckpt_json_find(s, 0, "_class_name");
    const char *cls = c >= 0 ? ckpt_json_string(s, c) : "";
    if (!cls) {
        ckpt_json_free(s);
        return sg_set_error("%s: \"_class_name\" is not a string", spath);
    }
    snprintf(scheduler, cap, "%s", cls);
    c = ckpt_json_find(s, 0, "timestep_spacing");
    const char *sp = c >= 0                                        ? ckpt_json_string(s, c)
                     : !strcmp(cls, "DPMSolverMultistepScheduler") ? "linspace"
                                                                   : "leading";
    c = ckpt_json_find(s, 0, "variance_type");
    const char *var = c >= 0 ? ckpt_json_string(s, c) : NULL;
    int rc = !sp ? sg_set_error("%s: \"timestep_spacing\" is not a string", spath) : SG_OK;
    if (!rc && ckpt_json_find(s, 0, "steps_offset") >= 0)
        rc = get_int(s, 0, "steps_offset", 0, 1 << 20, steps_offset, spath);
    if (!rc) rc = get_flag(s, "use_karras_sigmas", karras, spath);
    if (!rc) {
        snprintf(spacing, cap, "%s", sp);
        *var_large = var && !strcmp(var, "fixed_large");
    }
    ckpt_json_free(s);
    return rc;
}

/* The level structure of a diffusers config: block types (attention on both paths or neither),
 * block_out_channels as multiples of the first (-> "mult", "1,2,2,2"), the attention
 * resolutions (-> "attn", "16"), and the heads from attention_head_dim (dim 0: null = one head
 * of C channels; D channels per head = C / D heads, a head count when the same in every
 * attention block, else head_ch = D). */
static int decode_blocks(ckpt_json *j, const char *path, int nl, const int *boc, int img, int dim,
                         char mult[128], char attn[128], int *heads, int *head_ch) {
    int dn = ckpt_json_find(j, 0, "down_block_types"), un = ckpt_json_find(j, 0, "up_block_types");
    if (dn < 0 || un < 0 || ckpt_json_count(j, dn) != nl || ckpt_json_count(j, un) != nl)
        return sg_set_error("%s: down_block_types / up_block_types must list %d blocks", path, nl);
    int nattn = 0, attn_C[MAX_LEVELS + 1], n_attn_C = 0;
    for (int i = 0; i < nl; i++) {
        const char *d = ckpt_json_string(j, ckpt_json_child(j, dn, i));
        const char *u = ckpt_json_string(j, ckpt_json_child(j, un, nl - 1 - i));
        int da = d && !strcmp(d, "AttnDownBlock2D"), ua = u && !strcmp(u, "AttnUpBlock2D");
        if (!d || (!da && strcmp(d, "DownBlock2D")) || !u || (!ua && strcmp(u, "UpBlock2D")))
            return sg_set_error("%s: block types %s / %s at level %d: stepgraph has DownBlock2D, "
                                "AttnDownBlock2D, UpBlock2D, AttnUpBlock2D",
                                path, d ? d : "?", u ? u : "?", i);
        if (da != ua)
            return sg_set_error("%s: level %d has attention on one path only (%s / %s); "
                                "stepgraph's attn_res applies to both",
                                path, i, d, u);
        if (boc[i] % boc[0])
            return sg_set_error("%s: block_out_channels[%d] = %d is not a multiple of %d", path, i,
                                boc[i], boc[0]);
        snprintf(mult + strlen(mult), 128 - strlen(mult), "%s%d", i ? "," : "", boc[i] / boc[0]);
        if (da) {
            snprintf(attn + strlen(attn), 128 - strlen(attn), "%s%d", nattn ? "," : "", img >> i);
            nattn++;
            attn_C[n_attn_C++] = boc[i];
        }
    }
    attn_C[n_attn_C++] = boc[nl - 1]; /* the middle block */
    *heads = 1, *head_ch = 0;
    if (!dim) return SG_OK;
    int same = 1;
    for (int k = 0; k < n_attn_C; k++) {
        if (attn_C[k] % dim)
            return sg_set_error("%s: attention_head_dim %d does not divide %d channels", path, dim,
                                attn_C[k]);
        same &= attn_C[k] / dim == attn_C[0] / dim;
    }
    if (same)
        *heads = attn_C[0] / dim;
    else
        *heads = 0, *head_ch = dim;
    return SG_OK;
}

int ckpt_diffusers_to_config(const char *dir, char *buf, size_t cap) {
    char path[4096];
    char *text = find_config(dir, "unet", "config.json", path);
    if (!text)
        return sg_set_error("%s: no config.json (nor unet/config.json): not a diffusers "
                            "UNet2DModel folder",
                            dir);
    ckpt_json *j = ckpt_json_parse(text, strlen(text));
    free(text);
    if (!j) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", sg_last_error());
        return sg_set_error("%s: %s", path, msg);
    }
    int rc = SG_ERR;
    char cls[64] = "";
    if (ckpt_json_find(j, 0, "_class_name") >= 0 &&
        (ckpt_json_get_string(j, "_class_name", cls, sizeof cls) || strcmp(cls, "UNet2DModel"))) {
        sg_set_error("%s: _class_name is \"%s\", not UNet2DModel", path, cls);
        goto out;
    }
    if (check_fixed(j, path)) goto out;
    int img, in_ch, out_ch, nrb, groups = 32, pad = 1, boc[MAX_LEVELS], nl, dim = 8, rows = 0;
    double dropout = 0;
    if (get_int(j, 0, "sample_size", 1, 1 << 14, &img, path) ||
        get_int(j, 0, "in_channels", 1, 64, &in_ch, path) ||
        get_int(j, 0, "out_channels", 1, 64, &out_ch, path) ||
        get_int(j, 0, "layers_per_block", 1, 64, &nrb, path) ||
        get_list(j, 0, "block_out_channels", boc, &nl, path))
        goto out;
    if (ckpt_json_find(j, 0, "norm_num_groups") >= 0 &&
        get_int(j, 0, "norm_num_groups", 1, 1 << 14, &groups, path))
        goto out;
    if (ckpt_json_find(j, 0, "downsample_padding") >= 0 &&
        get_int(j, 0, "downsample_padding", 0, 1, &pad, path))
        goto out;
    if (ckpt_json_find(j, 0, "dropout") >= 0 && get_num(j, 0, "dropout", &dropout, path)) goto out;
    /* class conditioning (class_embed_type null): num_class_embeds rows, the last the null
     * class that stepgraph's guidance and label dropout use (docs/model.md) */
    int ce = ckpt_json_find(j, 0, "num_class_embeds");
    if (ce >= 0 && ckpt_json_type(j, ce) != CKPT_JSON_NULL &&
        get_int(j, 0, "num_class_embeds", 2, MAX_CLASS_ROWS, &rows, path)) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", sg_last_error());
        sg_set_error("%s (stepgraph's class table: the classes, then the null class)", msg);
        goto out;
    }
    int hd = ckpt_json_find(j, 0, "attention_head_dim");
    if (hd >= 0 && ckpt_json_type(j, hd) == CKPT_JSON_NULL)
        dim = 0;
    else if (hd >= 0 && get_int(j, 0, "attention_head_dim", 1, 1 << 14, &dim, path))
        goto out;
    int ag = ckpt_json_find(j, 0, "attn_norm_num_groups");
    if (ag >= 0 && ckpt_json_type(j, ag) != CKPT_JSON_NULL &&
        (!ckpt_json_is_integer(j, ag) || ckpt_json_integer(j, ag) != groups)) {
        sg_set_error("%s: attn_norm_num_groups differs from norm_num_groups; stepgraph uses one "
                     "group count",
                     path);
        goto out;
    }
    int te = ckpt_json_find(j, 0, "time_embedding_dim");
    if (te >= 0 && ckpt_json_type(j, te) != CKPT_JSON_NULL &&
        (!ckpt_json_is_integer(j, te) || ckpt_json_integer(j, te) != 4 * boc[0])) {
        sg_set_error("%s: time_embedding_dim is not 4 x block_out_channels[0]", path);
        goto out;
    }
    if (out_ch != in_ch) {
        sg_set_error("%s: out_channels %d differs from in_channels %d (stepgraph predicts the "
                     "noise of the input)",
                     path, out_ch, in_ch);
        goto out;
    }
    if (nl < 1 || img % (1 << (nl - 1))) {
        sg_set_error("%s: %d blocks do not fit sample_size %d", path, nl, img);
        goto out;
    }
    int dn = ckpt_json_find(j, 0, "down_block_types"), un = ckpt_json_find(j, 0, "up_block_types");
    if (dn < 0 || un < 0 || ckpt_json_count(j, dn) != nl || ckpt_json_count(j, un) != nl) {
        sg_set_error("%s: down_block_types / up_block_types must list %d blocks", path, nl);
        goto out;
    }
    char mult[128] = "", attn[128] = "";
    int heads = 1, head_ch = 0;
    if (decode_blocks(j, path, nl, boc, img, dim, mult, attn, &heads, &head_ch)) goto out;
    /* the schedule */
    int T = 1000, cosine = 0, vpred = 0, zero_snr = 0;
    double b1 = 1e-4, bT = 0.02;
    if (read_scheduler(dir, &T, &cosine, &vpred, &zero_snr, &b1, &bT)) goto out;
    char cls_key[32] = "";
    if (rows) snprintf(cls_key, sizeof cls_key, ",\"classes\":%d", rows - 1);
    int n = snprintf(
        buf, cap,
        "{\"model\":\"diffusers\",\"img\":%d,\"in_ch\":%d,\"ch\":%d,\"ch_mult\":[%s],"
        "\"nrb\":%d,\"attn_res\":[%s],\"heads\":%d,\"head_ch\":%d,\"groups\":%d,"
        "\"dropout\":%.9g,\"resample_conv\":1,\"down_pad\":\"%s\","
        "\"precision\":\"fp32\",\"T\":%d,\"beta1\":%.9g,\"betaT\":%.9g%s%s%s%s}",
        img, in_ch, boc[0], mult, nrb, attn, heads, head_ch, groups, dropout,
        pad ? "symmetric" : "same", T, b1, bT, cosine ? ",\"beta_schedule\":\"cosine\"" : "",
        zero_snr ? ",\"zero_snr\":1" : "", vpred ? ",\"prediction\":\"v\"" : "", cls_key);
    if (n < 0 || (size_t)n >= cap) {
        sg_set_error("config does not fit");
        goto out;
    }
    rc = SG_OK;
out:
    ckpt_json_free(j);
    return rc;
}

/* ---- the architecture of two stepgraph configs ---- */

int ckpt_config_check_arch(const char *expected_json, const char *got_json, const char *source) {
    ckpt_json *e = ckpt_json_parse(expected_json, strlen(expected_json));
    ckpt_json *g = e ? ckpt_json_parse(got_json, strlen(got_json)) : NULL;
    arch x, y;
    int rc = !e || !g || arch_decode(e, 0, &x, "this model") || arch_decode(g, 0, &y, source);
    ckpt_json_free(e);
    ckpt_json_free(g);
    if (rc) return SG_ERR;
#define SAME(F, NAME)                                                                              \
    if (x.F != y.F)                                                                                \
        return sg_set_error("%s is another architecture: " NAME " is %d there, %d here", source,   \
                            y.F, x.F);
    SAME(img, "img")
    SAME(in_ch, "in_ch")
    SAME(ch, "ch")
    SAME(nlevels, "the number of levels (ch_mult)")
    for (int i = 0; i < x.nlevels; i++) SAME(ch_mult[i], "a ch_mult entry")
    SAME(nrb, "nrb (res blocks per level)")
    SAME(groups, "groups")
    SAME(resample_conv, "resample_conv")
    SAME(classes, "classes (the class embedding's rows, less the null class)")
#undef SAME
    if (x.resample_conv && x.same_pad != y.same_pad)
        return sg_set_error("%s is another architecture: down_pad is \"%s\" there, \"%s\" here "
                            "(--down-pad)",
                            source, y.same_pad ? "same" : "symmetric",
                            x.same_pad ? "same" : "symmetric");
    for (int i = 0; i <= x.nlevels; i++) {
        /* level i's attention blocks, and (i == nlevels) the middle block */
        int mid = i == x.nlevels, C = x.ch * x.ch_mult[mid ? x.nlevels - 1 : i];
        int ax = mid || level_has_attn(&x, i), ay = mid || level_has_attn(&y, i);
        if (ax != ay)
            return sg_set_error("%s is another architecture: attention at %dx%d (attn_res) is "
                                "%s there, %s here",
                                source, x.img >> i, x.img >> i, ay ? "on" : "off",
                                ax ? "on" : "off");
        if (ax && heads_at(&x, C) != heads_at(&y, C))
            return sg_set_error("%s is another architecture: %d attention heads in the %d-channel "
                                "blocks there, %d here",
                                source, heads_at(&y, C), C, heads_at(&x, C));
    }
    return SG_OK;
}
