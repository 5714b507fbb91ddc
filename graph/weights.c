/* weights.c — model weights from outside a training run into an executor (weights.h). */
#include "graph/weights.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoints/ckpt.h"
#include "checkpoints/ckpt_json.h"

static int is_dir(const char *path) {
    struct stat st;
    return !stat(path, &st) && S_ISDIR(st.st_mode);
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* The "config" object of a checkpoint's metadata, as text. */
static int ckpt_config_text(const ckpt_file *f, char *buf, size_t cap) {
    ckpt_json *j = ckpt_json_parse(ckpt_meta(f), strlen(ckpt_meta(f)));
    if (!j) return SG_ERR;
    int c = ckpt_json_find(j, 0, "config");
    int rc = SG_OK;
    if (c < 0 || ckpt_json_type(j, c) != CKPT_JSON_OBJECT)
        rc = sg_set_error("%s has no model config in its metadata", ckpt_path(f));
    else if (ckpt_json_render(j, c, buf, cap) >= cap)
        rc = sg_set_error("%s: model config too long", ckpt_path(f));
    ckpt_json_free(j);
    return rc;
}

int sg_weights_config(const char *path, char *cfg_json, size_t cap) {
    if (is_dir(path)) return ckpt_diffusers_to_config(path, cfg_json, cap);
    if (ends_with(path, ".safetensors"))
        return sg_set_error("%s is a bare safetensors file: it carries no model config (give "
                            "the model, or use its diffusers folder)",
                            path);
    ckpt_file *f = ckpt_open(path);
    if (!f) return SG_ERR;
    int rc = ckpt_config_text(f, cfg_json, cap);
    ckpt_close(f);
    return rc;
}

/* ---- a model config from a config object ---- */

static int cfg_int(const ckpt_json *j, const char *key, int lo, int hi, int *out) {
    int64_t v;
    if (ckpt_json_get_int(j, key, &v)) return SG_ERR;
    if (v < lo || v > hi)
        return sg_set_error("config %s = %lld is out of range [%d, %d]", key, (long long)v, lo, hi);
    *out = (int)v;
    return SG_OK;
}

static int cfg_float(const ckpt_json *j, const char *key, float *out) {
    double v;
    if (ckpt_json_get_double(j, key, &v)) return SG_ERR;
    *out = (float)v;
    return SG_OK;
}

static int cfg_list(const ckpt_json *j, const char *key, int *out, int *n) {
    int node = ckpt_json_find(j, 0, key);
    if (node < 0 || ckpt_json_type(j, node) != CKPT_JSON_ARRAY)
        return sg_set_error("config has no list %s", key);
    int k = ckpt_json_count(j, node);
    if (k > SG_MAX_LEVELS) return sg_set_error("config %s has %d entries", key, k);
    for (int i = 0; i < k; i++) {
        int c = ckpt_json_child(j, node, i);
        if (!ckpt_json_is_integer(j, c) || ckpt_json_integer(j, c) < 1 ||
            ckpt_json_integer(j, c) > (1 << 20))
            return sg_set_error("config %s[%d] is not a positive integer", key, i);
        out[i] = (int)ckpt_json_integer(j, c);
    }
    *n = k;
    return SG_OK;
}

int sg_model_cfg_from_json(const char *cfg_json, sg_model_cfg *cfg) {
    ckpt_json *j = ckpt_json_parse(cfg_json, strlen(cfg_json));
    if (!j) return SG_ERR;
    char name[32], prec[16], pad[32]; /* name: as sg_model_cfg.name */
    int rc = SG_ERR;
    if (ckpt_json_get_string(j, "model", name, sizeof name)) goto done;
    /* a preset gives sane values for fields the config does not carry; every field the
     * forward pass depends on is then set from the config */
    if (sg_model_preset(cfg, name)) sg_model_preset(cfg, "unet_tiny");
    snprintf(cfg->name, sizeof cfg->name, "%s", name);
    if (cfg_int(j, "img", 1, 1 << 12, &cfg->img) || cfg_int(j, "in_ch", 1, 64, &cfg->in_ch) ||
        cfg_int(j, "ch", 1, 1 << 14, &cfg->ch) ||
        cfg_list(j, "ch_mult", cfg->ch_mult, &cfg->nlevels) ||
        cfg_int(j, "nrb", 1, 16, &cfg->nrb) ||
        cfg_list(j, "attn_res", cfg->attn_res, &cfg->nattn) ||
        cfg_int(j, "heads", 0, 1024, &cfg->heads) ||
        cfg_int(j, "head_ch", 0, 1 << 14, &cfg->head_ch) ||
        cfg_int(j, "groups", 1, 1 << 14, &cfg->groups) ||
        cfg_int(j, "resample_conv", 0, 1, &cfg->resample_conv) ||
        cfg_int(j, "T", 1, 1 << 20, &cfg->T) || cfg_float(j, "beta1", &cfg->beta1) ||
        cfg_float(j, "betaT", &cfg->betaT) || cfg_float(j, "dropout", &cfg->dropout) ||
        ckpt_json_get_string(j, "precision", prec, sizeof prec))
        goto done;
    /* the downsampling padding; configs from before the field padded symmetrically */
    cfg->down_pad = SG_DOWN_PAD_SYMMETRIC;
    if (ckpt_json_find(j, 0, "down_pad") >= 0 &&
        (ckpt_json_get_string(j, "down_pad", pad, sizeof pad) ||
         (cfg->down_pad = sg_down_pad_parse(pad)) < 0)) {
        sg_set_error("config down_pad is not \"same\" or \"symmetric\"");
        goto done;
    }
    if (!strcmp(prec, "bf16"))
        cfg->act_dt = DT_BF16;
    else if (!strcmp(prec, "fp32"))
        cfg->act_dt = DT_F32;
    else {
        sg_set_error("config precision is '%s' (fp32 or bf16 expected)", prec);
        goto done;
    }
    if (!(cfg->beta1 > 0 && cfg->betaT >= cfg->beta1 && cfg->betaT < 1)) {
        sg_set_error("config betas %g .. %g are not a schedule (0 < beta1 <= betaT < 1)",
                     (double)cfg->beta1, (double)cfg->betaT);
        goto done;
    }
    if (cfg->nlevels < 1 || (!cfg->heads && !cfg->head_ch)) {
        sg_set_error("config has no levels or no attention heads");
        goto done;
    }
    /* a forward plan reserves no dataset */
    cfg->data_n = 1, cfg->data_h = cfg->img, cfg->data_w = cfg->img;
    rc = SG_OK;
done:
    ckpt_json_free(j);
    return rc;
}

/* ---- loading ---- */

/* Write buf into the parameter t, and with set_ema into its EMA companion. */
static int put(sg_exec *e, int t, const float *buf, const float *ema_buf) {
    if (sg_exec_write(e, t, buf)) return SG_ERR;
    if (!ema_buf) return SG_OK;
    char nm[SG_NAME_MAX + 8];
    snprintf(nm, sizeof nm, "ema:%s", e->plan.g.t[t].name);
    int te = sg_find_tensor(&e->plan.g, nm);
    if (te < 0) return sg_set_error("this plan has no EMA tensor %s", nm);
    return sg_exec_write(e, te, ema_buf);
}

static int is_param(const sg_tensor *t) {
    return t->role == ROLE_PARAM && !t->region;
}

static int load_safetensors(sg_exec *e, const char *path, unsigned flags) {
    ckpt_st *s = ckpt_st_open(path);
    if (!s) return SG_ERR;
    const sg_graph *g = &e->plan.g;
    int rc = SG_OK;
    for (int t = 0; t < g->nt && !rc; t++) {
        if (!is_param(&g->t[t])) continue;
        float *buf = malloc((size_t)g->t[t].bytes + 4);
        if (!buf) rc = sg_set_error("out of host memory");
        if (!rc) rc = ckpt_st_read_param(s, g->t[t].name, g->t[t].ndim, g->t[t].shape, buf);
        if (!rc) rc = put(e, t, buf, flags & SG_WEIGHTS_SET_EMA ? buf : NULL);
        free(buf);
    }
    int extra = rc ? -1 : ckpt_st_first_unused(s);
    if (extra >= 0)
        rc = sg_set_error("%s: tensor '%s' has no place in this model (another architecture?)",
                          path, ckpt_st_name(s, extra));
    ckpt_st_close(s);
    return rc;
}

/* one tensor of the checkpoint, checked against the plan's tensor t */
static int read_ckpt_tensor(ckpt_file *f, const char *name, const sg_tensor *t, float *buf) {
    int i = ckpt_find(f, name);
    if (i < 0) return sg_set_error("%s has no tensor '%s'", ckpt_path(f), name);
    ckpt_entry en;
    ckpt_tensor_info(f, i, &en);
    int same = en.dtype == DT_F32 && en.ndim == t->ndim;
    for (int d = 0; d < t->ndim && same; d++) same = en.shape[d] == t->shape[d];
    if (!same)
        return sg_set_error("%s: tensor '%s' differs in shape or dtype from this model's",
                            ckpt_path(f), name);
    return ckpt_read(f, i, buf, t->bytes);
}

static int load_ckpt(sg_exec *e, const char *path, const char *mine, unsigned flags) {
    ckpt_file *f = ckpt_open(path);
    if (!f) return SG_ERR;
    char *got = malloc(8192);
    int rc = got ? ckpt_config_text(f, got, 8192) : sg_set_error("out of host memory");
    if (!rc) rc = ckpt_config_check_arch(mine, got, path);
    free(got);
    const sg_graph *g = &e->plan.g;
    for (int t = 0; t < g->nt && !rc; t++) {
        if (!is_param(&g->t[t])) continue;
        char nm[SG_NAME_MAX + 8];
        float *buf = malloc((size_t)g->t[t].bytes + 4), *eb = NULL;
        if (!buf) rc = sg_set_error("out of host memory");
        snprintf(nm, sizeof nm, "%s%s", flags & SG_WEIGHTS_FROM_EMA ? "ema:" : "", g->t[t].name);
        if (!rc) rc = read_ckpt_tensor(f, nm, &g->t[t], buf);
        if (!rc && (flags & SG_WEIGHTS_SET_EMA)) {
            snprintf(nm, sizeof nm, "ema:%s", g->t[t].name);
            eb = malloc((size_t)g->t[t].bytes + 4);
            rc = eb ? read_ckpt_tensor(f, nm, &g->t[t], eb) : sg_set_error("out of host memory");
        }
        if (!rc) rc = put(e, t, buf, eb);
        free(buf);
        free(eb);
    }
    ckpt_close(f);
    return rc;
}

int sg_exec_load_weights(sg_exec *e, const char *path, unsigned flags) {
    char mine[4096];
    sg_model_json(&e->plan.cfg, mine, sizeof mine);
    if (!is_dir(path)) {
        if (ends_with(path, ".safetensors")) return load_safetensors(e, path, flags);
        return load_ckpt(e, path, mine, flags);
    }
    /* a diffusers folder: its config first, then its weights */
    char *got = malloc(8192), wpath[4200];
    int rc = got ? ckpt_diffusers_to_config(path, got, 8192) : sg_set_error("out of host memory");
    if (!rc) rc = ckpt_config_check_arch(mine, got, path);
    free(got);
    if (rc) return SG_ERR;
    struct stat st;
    snprintf(wpath, sizeof wpath, "%s/diffusion_pytorch_model.safetensors", path);
    if (stat(wpath, &st))
        snprintf(wpath, sizeof wpath, "%s/unet/diffusion_pytorch_model.safetensors", path);
    if (stat(wpath, &st))
        return sg_set_error("%s: no diffusion_pytorch_model.safetensors (nor unet/...): save the "
                            "model with safe_serialization (the default), .bin is not read",
                            path);
    return load_safetensors(e, wpath, flags);
}
