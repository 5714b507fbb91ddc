/* weights.c — model weights from outside a training run into an executor (weights.h). */
#include "graph/weights.h"

#include <math.h>
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

const char *sg_weights_path(const char *path, char *buf, size_t cap) {
    return is_dir(path) && !ckpt_latest(path, buf, cap) ? buf : path;
}

int sg_weights_has_ema(const char *path) {
    return !is_dir(path) && !ends_with(path, ".safetensors");
}

int sg_weights_config(const char *path, char *cfg_json, size_t cap) {
    char ck[4200];
    path = sg_weights_path(path, ck, sizeof ck);
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

/* ---- a model config from a config object: the one reader of sg_model_json's fields ---- */

static int json_int_field(const json_t *o, const char *key, int lo, int hi, int *out) {
    json_t *v = json_object_get(o, key);
    if (!v) return SG_OK; /* absent: the preset's value; the config check names a mismatch */
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return sg_set_error("config: \"%s\" is not an integer in [%d, %d]", key, lo, hi);
    *out = (int)json_integer_value(v);
    return SG_OK;
}

static int json_float_field(const json_t *o, const char *key, float *out) {
    json_t *v = json_object_get(o, key);
    if (!v) return SG_OK;
    if (!json_is_number(v) || !isfinite(json_number_value(v)))
        return sg_set_error("config: \"%s\" is not a finite number", key);
    *out = (float)json_number_value(v);
    return SG_OK;
}

static int json_list_field(const json_t *o, const char *key, int *vals, int *n) {
    json_t *v = json_object_get(o, key);
    if (!v) return SG_OK;
    if (!json_is_array(v) || json_array_size(v) > SG_MAX_LEVELS)
        return sg_set_error("config: \"%s\" is not a list of at most %d integers", key,
                            SG_MAX_LEVELS);
    *n = (int)json_array_size(v);
    memset(vals, 0, sizeof(int) * SG_MAX_LEVELS); /* as sg_model_flag leaves unused slots */
    for (int i = 0; i < *n; i++) {
        json_t *x = json_array_get(v, (size_t)i);
        if (!json_is_integer(x) || json_integer_value(x) < 1 || json_integer_value(x) > 1 << 20)
            return sg_set_error("config: \"%s\"[%d] is not a positive integer", key, i);
        vals[i] = (int)json_integer_value(x);
    }
    return SG_OK;
}

int sg_model_cfg_from_config(const json_t *config, int any_name, sg_model_cfg *c) {
    const char *model = json_string_value(json_object_get(config, "model"));
    if (!json_is_object(config) || !model)
        return sg_set_error("no model config with a \"model\" name");
    /* the preset gives the fields the config does not carry; a weights source's config may
     * name no preset (a diffusers folder's says "diffusers"): then every architecture field
     * must come from the config, over unet_tiny's training defaults */
    if (sg_model_preset(c, model)) {
        if (!any_name) return SG_ERR;
        /* the name goes into sg_model_json's text (the plan hash, checkpoints) as it is: a
         * plain word, so that text stays JSON whatever the weights source says */
        if (!*model || strlen(model) >= sizeof c->name ||
            strspn(model, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") !=
                strlen(model))
            return sg_set_error("config: model name \"%.40s\" is not a word of at most %d "
                                "letters, digits, '_', '.' or '-'",
                                model, (int)sizeof c->name - 1);
        sg_model_preset(c, "unet_tiny");
        snprintf(c->name, sizeof c->name, "%s", model);
    }
    const char *prec = json_string_value(json_object_get(config, "precision"));
    if (prec && strcmp(prec, "fp32") && strcmp(prec, "bf16"))
        return sg_set_error("config: unknown precision '%s'", prec);
    if (prec) c->act_dt = !strcmp(prec, "bf16") ? DT_BF16 : DT_F32;
    /* a checkpoint from before down_pad existed padded symmetrically */
    const json_t *pad = json_object_get(config, "down_pad");
    c->down_pad = SG_DOWN_PAD_SYMMETRIC;
    if (pad &&
        (!json_is_string(pad) || (c->down_pad = sg_down_pad_parse(json_string_value(pad))) < 0))
        return sg_set_error("config: down_pad must be \"same\" or \"symmetric\"");
    /* fusion: recorded when on; a config without it (every one from before it existed) is
     * unfused */
    c->fuse = 0;
    c->store_norm = 0; /* likewise --store-norm: recorded when on */
    c->store_attn = 1; /* --store-attn: recorded when off; a config from before it kept P */
    struct {
        const char *key;
        int *field, lo, hi;
    } ints[] = {{"img", &c->img, 1, 1 << 12},
                {"in_ch", &c->in_ch, 1, 64},
                {"ch", &c->ch, 1, 1 << 14},
                {"nrb", &c->nrb, 1, SG_MAX_RES_BLOCKS},
                {"heads", &c->heads, 0, 1024},
                {"head_ch", &c->head_ch, 0, 1 << 14},
                {"groups", &c->groups, 1, 1 << 14},
                {"resample_conv", &c->resample_conv, 0, 1},
                {"batch", &c->batch, 1, 1 << 16},
                {"T", &c->T, 1, SG_MAX_T},
                {"warmup", &c->warmup, 0, 1 << 30},
                {"flip", &c->flip, 0, 1},
                {"ema_warmup", &c->ema_warmup, 0, 1},
                {"grad_accum", &c->grad_accum, 1, SG_MAX_GRAD_ACCUM},
                {"fuse", &c->fuse, 0, SG_FUSE_BITWISE},
                {"store_norm", &c->store_norm, 0, 1},
                {"store_attn", &c->store_attn, 0, 1},
                {"classes", &c->classes, 0, SG_MAX_CLASSES},
                {"zero_snr", &c->zero_snr, 0, 1}};
    for (int i = 0; i < SG_ARRAY_LEN(ints); i++)
        if (json_int_field(config, ints[i].key, ints[i].lo, ints[i].hi, ints[i].field))
            return SG_ERR;
    struct {
        const char *key;
        float *field;
    } fls[] = {{"dropout", &c->dropout},
               {"beta1", &c->beta1},
               {"betaT", &c->betaT},
               {"lr", &c->lr},
               {"b1", &c->b1},
               {"b2", &c->b2},
               {"eps", &c->eps},
               {"wd", &c->wd},
               {"clip", &c->clip},
               {"ema_decay", &c->ema_decay},
               {"lr_min", &c->lr_min},
               {"ema_inv_gamma", &c->ema_inv_gamma},
               {"ema_power", &c->ema_power},
               {"snr_gamma", &c->snr_gamma},
               {"p2_gamma", &c->p2_gamma},
               {"p2_k", &c->p2_k},
               {"noise_offset", &c->noise_offset},
               {"input_perturbation", &c->input_perturbation},
               {"class_dropout", &c->class_dropout}};
    for (int i = 0; i < SG_ARRAY_LEN(fls); i++)
        if (json_float_field(config, fls[i].key, fls[i].field)) return SG_ERR;
    /* the schedules: absent in configs from before them, or when they are the defaults */
    const json_t *bs = json_object_get(config, "beta_schedule");
    if (bs && (!json_is_string(bs) ||
               (c->beta_schedule = sg_beta_schedule_parse(json_string_value(bs))) < 0))
        return sg_set_error("config: beta_schedule must be \"linear\" or \"cosine\"");
    const json_t *pr = json_object_get(config, "prediction");
    if (pr &&
        (!json_is_string(pr) || (c->prediction = sg_prediction_parse(json_string_value(pr))) < 0))
        return sg_set_error("config: prediction must be \"eps\" or \"v\"");
    const json_t *sched = json_object_get(config, "lr_schedule");
    if (sched && (!json_is_string(sched) ||
                  (c->lr_schedule = sg_lr_schedule_parse(json_string_value(sched))) < 0))
        return sg_set_error("config: lr_schedule must be \"constant\", \"cosine\" or \"linear\"");
    const json_t *ds = json_object_get(config, "lr_decay_steps");
    if (ds && (!json_is_integer(ds) || json_integer_value(ds) < 0))
        return sg_set_error("config: \"lr_decay_steps\" is not a step count");
    if (ds) c->lr_decay_steps = (int64_t)json_integer_value(ds);
    if (json_list_field(config, "ch_mult", c->ch_mult, &c->nlevels) ||
        json_list_field(config, "attn_res", c->attn_res, &c->nattn))
        return SG_ERR;
    if (c->beta_schedule == SG_BETA_LINEAR &&
        !(c->beta1 > 0 && c->betaT >= c->beta1 && c->betaT < 1))
        return sg_set_error("config: betas %g .. %g are not a schedule (0 < beta1 <= "
                            "betaT < 1)",
                            (double)c->beta1, (double)c->betaT);
    return SG_OK;
}

int sg_model_cfg_from_json(const char *cfg_json, sg_model_cfg *cfg) {
    json_error_t err;
    json_t *j = json_loads(cfg_json, JSON_REJECT_DUPLICATES, &err);
    if (!j) return sg_set_error("config JSON: %s (line %d)", err.text, err.line);
    int rc = sg_model_cfg_from_config(j, 1, cfg);
    json_decref(j);
    if (rc) return SG_ERR;
    if (cfg->nlevels < 1 || (!cfg->heads && !cfg->head_ch))
        return sg_set_error("config has no levels or no attention heads");
    /* a forward plan reserves no dataset */
    cfg->data_n = 1, cfg->data_h = cfg->img, cfg->data_w = cfg->img;
    return SG_OK;
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
    char mine[4096], ck[4200];
    sg_model_json(&e->plan.cfg, mine, sizeof mine);
    if (sg_weights_path(path, ck, sizeof ck) != path) return load_ckpt(e, ck, mine, flags);
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
