/* exec.c — the executor: plan + backend, training state, and checkpoint save/load. */
#include "graph/exec.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoints/ckpt.h"
#include "checkpoints/ckpt_json.h"
#include "common/philox.h"
#include "graph/engine_table_io.h"
#include "graph/weights.h"
#include "kernels/cpu/cpu_kernels.h"
#include "planner/op_dims.h"

#ifndef SG_BUILD_ID
#define SG_BUILD_ID "unknown"
#endif

/* The training step's noising table: every timestep's coefficients, from the CPU reference,
 * once per executor (a function of the config alone: no checkpoint carries it); and the loss
 * weights where the step has them. */
static int write_ddpm_table(sg_exec *e) {
    const sg_plan *p = &e->plan;
    if (p->io.ddpm_table < 0) return SG_OK;
    const sg_tensor *t = &p->g.t[p->io.ddpm_table];
    sg_ddpm_row *rows = malloc((size_t)t->bytes);
    if (!rows) return sg_set_error("out of host memory for the noising table");
    const sg_betas b = sg_model_betas(&p->cfg);
    SG_ASSERT(t->shape[0] == b.T);
    cpu_ddpm_table(rows, &b);
    int rc = sg_exec_write(e, p->io.ddpm_table, rows);
    /* v prediction's target coefficients: {sqrt(abar), -sqrt(1 - abar)} (an exact negation) */
    if (!rc && p->io.v_table >= 0) {
        for (int k = 0; k < b.T; k++) rows[k].sqrt_1m_abar = -rows[k].sqrt_1m_abar;
        rc = sg_exec_write(e, p->io.v_table, rows);
    }
    free(rows);
    /* min-SNR: every timestep's loss weight */
    if (!rc && p->io.loss_weight >= 0) {
        float *w = malloc((size_t)b.T * sizeof *w);
        if (!w) return sg_set_error("out of host memory for the loss weights");
        const int vpred = p->cfg.prediction == SG_PRED_V;
        if (p->cfg.p2_gamma > 0)
            cpu_p2_weight_table(w, &b, p->cfg.p2_gamma, p->cfg.p2_k, vpred);
        else
            cpu_loss_weight_table(w, &b, p->cfg.snr_gamma, vpred);
        rc = sg_exec_write(e, p->io.loss_weight, w);
        free(w);
    }
    return rc;
}

int sg_exec_init(sg_exec *e, const sg_model_cfg *cfg, int train, sg_backend *be) {
    memset(e, 0, sizeof *e);
    e->be = be;
    if (!be) return sg_set_error("no backend");
    if (sg_plan_build(&e->plan, cfg, train) || be->prepare(be, &e->plan)) return SG_ERR;
    return write_ddpm_table(e);
}

void sg_exec_free(sg_exec *e) {
    if (e->be) e->be->destroy(e->be);
    sg_plan_free(&e->plan);
    memset(e, 0, sizeof *e);
}

void sg_exec_param_init_values(const sg_plan *p, uint64_t seed, float *params) {
    const sg_graph *g = &p->g;
    int64_t base = g->t[p->io.params].offset;
    memset(params, 0, (size_t)p->role_bytes[ROLE_PARAM]);
    for (int t = 0; t < g->nt; t++) {
        const sg_tensor *x = &g->t[t];
        if (x->role != ROLE_PARAM || x->region) continue;
        int64_t first = (x->offset - base) / 4, n = sg_numel(x);
        float *v = params + first;
        for (int64_t j = 0; j < n; j++) {
            switch (x->init) {
            case SG_INIT_UNIFORM: {
                /* index = the element's position in the parameter region: independent of
                 * which backend or how many threads draw it */
                float u = sg_rng_uniform(seed, 0, SG_RNG_INIT, (uint64_t)(first + j));
                v[j] = (2.0f * u - 1.0f) * x->init_bound;
                break;
            }
            case SG_INIT_ONES:
                v[j] = 1.0f;
                break;
            default:
                v[j] = 0.0f;
                break;
            }
        }
    }
}

/* The state regions zeroed, before init_state or a load writes their tensors: zero wherever no
 * tensor lands. The regions hold gaps between their tensors (each padded to SG_ALIGN), and the
 * step's whole-region passes read them: grad_sumsq sums the gradient region's, the optimizer
 * carries the others' along. A checkpoint holds no gaps, and the gradients not at all, so
 * without this a resume's gaps held whatever the arena held: zeros only because the backends
 * happen to clear it (NaN gaps made the norm NaN and turned clipping off). */
static int zero_state_regions(sg_exec *e) {
    const sg_step_io *io = &e->plan.io;
    const int regions[5] = {io->params, io->adam_m, io->adam_v, io->ema, io->grads};
    int64_t most = 0;
    for (int k = 0; k < 5; k++)
        if (regions[k] >= 0 && e->plan.g.t[regions[k]].bytes > most)
            most = e->plan.g.t[regions[k]].bytes;
    void *z = most ? calloc(1, (size_t)most) : NULL;
    if (most && !z) return sg_set_error("out of host memory for %lld bytes", (long long)most);
    int rc = SG_OK;
    for (int k = 0; k < 5 && !rc; k++)
        if (regions[k] >= 0) {
            const sg_tensor *x = &e->plan.g.t[regions[k]];
            rc = e->be->upload(e->be, x->offset, z, x->bytes);
        }
    free(z);
    return rc;
}

int sg_exec_init_state(sg_exec *e, uint64_t seed) {
    sg_plan *p = &e->plan;
    const sg_step_io *io = &p->io;
    e->seed = seed;
    int64_t pb = p->role_bytes[ROLE_PARAM];
    float *buf = malloc((size_t)pb);
    if (!buf) return sg_set_error("out of host memory for %lld bytes of parameters", (long long)pb);
    sg_exec_param_init_values(p, seed, buf);
    int rc = zero_state_regions(e);
    if (!rc) rc = e->be->upload(e->be, p->g.t[io->params].offset, buf, pb);
    if (!rc && io->ema >= 0) rc = e->be->upload(e->be, p->g.t[io->ema].offset, buf, pb);
    free(buf);
    if (rc) return rc;
    if (io->step >= 0) {
        int64_t step = 0;
        if (sg_exec_write(e, io->step, &step) || sg_exec_write(e, io->seed, &seed)) return SG_ERR;
    }
    return SG_OK;
}

int sg_exec_upload_dataset(sg_exec *e, const uint8_t *pixels, int64_t bytes,
                           const int32_t *labels) {
    const sg_tensor *d = &e->plan.g.t[e->plan.io.dataset];
    if (bytes != d->bytes)
        return sg_set_error("dataset is %lld bytes, the plan reserved %lld (%lldx%lldx%lldx%lld)",
                            (long long)bytes, (long long)d->bytes, (long long)d->shape[0],
                            (long long)d->shape[1], (long long)d->shape[2], (long long)d->shape[3]);
    const int lt = e->plan.io.labels, K = e->plan.cfg.classes;
    if (lt >= 0) {
        if (!labels)
            return sg_set_error("the model is class-conditional (--classes %d) and this dataset "
                                "has no labels (cifar10, fmnist, synthetic and class subfolders "
                                "have them; idx:FILE and a flat folder do not)",
                                K);
        const int64_t n = d->shape[0];
        for (int64_t i = 0; i < n; i++)
            if (labels[i] < 0 || labels[i] >= K)
                return sg_set_error("image %lld of the dataset has label %d: the model has %d "
                                    "classes (--classes %d takes labels 0..%d)",
                                    (long long)i, labels[i], K, K, K - 1);
    }
    if (e->be->upload(e->be, d->offset, pixels, bytes)) return SG_ERR;
    return lt < 0 ? SG_OK : sg_exec_write(e, lt, labels);
}

int sg_exec_step(sg_exec *e) {
    return e->be->run_step(e->be, &e->plan);
}

int sg_exec_run_nodes(sg_exec *e, int from, int to) {
    for (int i = from; i < to; i++)
        if (e->be->run_node(e->be, &e->plan, i)) return SG_ERR;
    return SG_OK;
}

int sg_exec_read(sg_exec *e, int t, void *dst) {
    const sg_tensor *x = &e->plan.g.t[t];
    if (x->nparts) return sg_set_error("%s is virtual (a concatenation): read its parts", x->name);
    if (x->vnorm >= 0)
        return sg_set_error("%s is virtual (normalised inside the convolutions that read it)",
                            x->name);
    if (e->be->sync(e->be)) return SG_ERR;
    return e->be->download(e->be, x->offset, dst, x->bytes);
}

int sg_exec_write(sg_exec *e, int t, const void *src) {
    const sg_tensor *x = &e->plan.g.t[t];
    if (sg_tensor_virtual(x)) return sg_set_error("%s is virtual (no storage)", x->name);
    return e->be->upload(e->be, x->offset, src, x->bytes);
}

int sg_exec_read_name(sg_exec *e, const char *name, void *dst) {
    int t = sg_find_tensor(&e->plan.g, name);
    if (t < 0) return sg_set_error("no tensor named %s in the plan", name);
    return sg_exec_read(e, t, dst);
}

int64_t sg_exec_step_count(sg_exec *e) {
    int64_t s = -1;
    if (e->plan.io.step >= 0) sg_exec_read(e, e->plan.io.step, &s);
    return s;
}

float sg_exec_loss(sg_exec *e) {
    float l = NAN;
    if (e->plan.io.loss >= 0) sg_exec_read(e, e->plan.io.loss, &l);
    return l;
}

/* ---- checkpoints */

/* the tensors a checkpoint carries: everything persistent except gradients (recomputed each
 * step), the dataset (reloaded from its source) and workspace */
static int ckpt_carries(const sg_tensor *x) {
    if (x->region || sg_tensor_virtual(x)) return 0;
    return x->role == ROLE_PARAM || x->role == ROLE_ADAM_M || x->role == ROLE_ADAM_V ||
           x->role == ROLE_EMA || x->role == ROLE_STATE;
}

int sg_exec_meta_json(sg_exec *e, const char *extra_json, char *buf, int cap) {
    char cfg[2048], env[2048];
    sg_model_json(&e->plan.cfg, cfg, sizeof cfg);
    e->be->describe(e->be, env, sizeof env);
    int64_t step = sg_exec_step_count(e);
    uint64_t seed = 0;
    if (e->plan.io.seed >= 0) sg_exec_read(e, e->plan.io.seed, &seed);
    int n =
        snprintf(buf, (size_t)cap,
                 "{\"format\":\"stepgraph\",\"config\":%s,\"plan_hash\":\"%016llx\","
                 "\"step\":%lld,\"seed\":%llu,\"data_position\":%lld,\"env\":%s,"
                 "\"build\":\"%s\"%s%s}",
                 cfg, (unsigned long long)e->plan.hash, (long long)step, (unsigned long long)seed,
                 (long long)(step * e->plan.cfg.batch), env, SG_BUILD_ID,
                 extra_json && *extra_json ? "," : "", extra_json ? extra_json : "");
    if (n >= cap) return sg_set_error("checkpoint metadata does not fit in %d bytes", cap);
    return SG_OK;
}

/* download every carried tensor into one host buffer and describe it */
static int collect(sg_exec *e, ckpt_tensor_desc **descs_out, int *n_out, void **mem_out) {
    const sg_graph *g = &e->plan.g;
    int n = 0;
    int64_t total = 0;
    for (int t = 0; t < g->nt; t++)
        if (ckpt_carries(&g->t[t])) n++, total += g->t[t].bytes;
    ckpt_tensor_desc *d = calloc((size_t)n, sizeof *d);
    unsigned char *mem = malloc((size_t)total + 1);
    if (!d || !mem) return free(d), free(mem), sg_set_error("out of host memory for a checkpoint");
    if (e->be->sync(e->be)) return free(d), free(mem), SG_ERR;
    int k = 0;
    int64_t off = 0;
    for (int t = 0; t < g->nt; t++) {
        const sg_tensor *x = &g->t[t];
        if (!ckpt_carries(x)) continue;
        if (e->be->download(e->be, x->offset, mem + off, x->bytes))
            return free(d), free(mem), SG_ERR;
        d[k].name = x->name;
        d[k].role = x->role;
        d[k].dtype = x->dtype;
        d[k].ndim = x->ndim;
        for (int i = 0; i < x->ndim; i++) d[k].shape[i] = x->shape[i];
        d[k].data = mem + off;
        d[k].bytes = x->bytes;
        d[k].offset = x->offset;
        off += x->bytes;
        k++;
    }
    *descs_out = d;
    *n_out = n;
    *mem_out = mem;
    return SG_OK;
}

/* room for the metadata: the fixed part is < 8 KiB; the caller's extra JSON (a data path of
 * any length) comes on top, so a long path cannot fail the save at the end of a run */
static int meta_cap(const char *extra_json) {
    return 8192 + (extra_json ? (int)strlen(extra_json) : 0);
}

static int exec_is_conv(int op) {
    return sg_op_is_conv((sg_op)op);
}

/* The conv engines of a backend with several (CUDA: own / cudnn, issue 14) as checkpoint
 * metadata: "conv_engines":{"table":[distinct engine names],"nodes":[index into the table per
 * conv node, in schedule order]} (the plan hash pins which nodes those are). NULL (nothing to
 * record) for a backend with one engine. */
static json_t *conv_engines_json(sg_exec *e) {
    sg_backend *be = e->be;
    const sg_graph *g = &e->plan.g;
    if (!be->node_engine) return NULL;
    json_t *table = json_array(), *nodes = json_array();
    for (int i = 0; i < g->nn; i++) {
        if (!exec_is_conv(g->n[i].op)) continue;
        char name[160] = "";
        be->node_engine(be, &e->plan, i, name, sizeof name);
        size_t k = 0;
        while (k < json_array_size(table) &&
               strcmp(json_string_value(json_array_get(table, k)), name))
            k++;
        if (k == json_array_size(table)) json_array_append_new(table, json_string(name));
        json_array_append_new(nodes, json_integer((json_int_t)k));
    }
    return json_pack("{s:o, s:o}", "table", table, "nodes", nodes);
}

/* The caller's extra JSON plus the conv-engine record and the engine table the plan was made
 * with (the whole table: a resume plans with it; malloc'ed; NULL: out of memory). */
static char *meta_extra(sg_exec *e, const char *extra_json) {
    json_t *ce = conv_engines_json(e);
    char *rec = ce ? json_dumps(ce, JSON_COMPACT) : NULL;
    json_decref(ce);
    char *tab = e->plan.cfg.engines ? sg_engine_table_json(e->plan.cfg.engines) : NULL;
    if (e->plan.cfg.engines && !tab) return free(rec), NULL;
    const char *x = extra_json ? extra_json : "";
    size_t n = strlen(x) + (rec ? strlen(rec) : 0) + (tab ? strlen(tab) : 0) + 64;
    char *out = malloc(n);
    if (out)
        snprintf(out, n, "%s%s%s%s%s%s", x, *x && rec ? "," : "", rec ? "\"conv_engines\":" : "",
                 rec ? rec : "", (*x || rec) && tab ? "," : "", tab ? "\"engine_table\":" : "");
    if (out && tab) snprintf(out + strlen(out), n - strlen(out), "%s", tab);
    free(rec);
    free(tab);
    return out;
}

/* The engine table in checkpoint metadata text: 1 (t filled), 0 none, SG_ERR malformed. */
static int meta_engine_table(const char *meta_text, const char *path, sg_engine_table *t) {
    json_t *m = ckpt_meta_load(meta_text, NULL, 0);
    json_t *tab = json_object_get(m, "engine_table");
    char *text = json_is_object(tab) ? json_dumps(tab, JSON_COMPACT) : NULL;
    json_decref(m);
    sg_engine_table_init(t);
    if (!text) return 0;
    const int rc = sg_engine_table_parse(text, path, t);
    free(text);
    return rc ? SG_ERR : 1;
}

int sg_exec_ckpt_engine_table(const char *path, sg_engine_table *t) {
    sg_engine_table_init(t);
    ckpt_file *f = ckpt_open(path);
    if (!f) return SG_ERR;
    const int rc = meta_engine_table(ckpt_meta(f), path, t);
    ckpt_close(f);
    return rc;
}

/* A resume whose conv engines differ from the checkpoint's cannot give the same bits: say so,
 * naming the layers (a warning: the run goes on, as asked). Checkpoints without the record
 * (the CPU backend, or written before it existed) are not compared. */
static void check_conv_engines(sg_exec *e, const char *path, const char *meta_text) {
    json_t *m = ckpt_meta_load(meta_text, NULL, 0), *mine = conv_engines_json(e);
    json_t *theirs = json_object_get(m, "conv_engines");
    const sg_graph *g = &e->plan.g;
    e->ckpt_conv_engines_differ = 0;
    if (mine && json_is_object(theirs)) {
        json_t *tt = json_object_get(theirs, "table"), *tn = json_object_get(theirs, "nodes");
        json_t *mt = json_object_get(mine, "table"), *mn = json_object_get(mine, "nodes");
        int differ = 0;
        size_t k = 0;
        for (int i = 0; i < g->nn; i++) {
            if (!exec_is_conv(g->n[i].op)) continue;
            const char *a = json_string_value(
                json_array_get(tt, (size_t)json_integer_value(json_array_get(tn, k))));
            const char *b = json_string_value(
                json_array_get(mt, (size_t)json_integer_value(json_array_get(mn, k))));
            k++;
            if (a && b && !strcmp(a, b)) continue;
            if (differ++ < 8)
                fprintf(stderr,
                        "warning: %s: node %d (%s -> %s) ran on conv engine '%s', this run uses "
                        "'%s'\n",
                        path, i, sg_ops[g->n[i].op].name, g->t[g->n[i].out[0]].name,
                        a ? a : "(none recorded)", b ? b : "?");
        }
        e->ckpt_conv_engines_differ = differ;
        if (differ)
            fprintf(stderr,
                    "warning: %s: %d conv layer(s) run on another engine than the checkpoint's "
                    "(another --conv-engine, cuDNN version or GPU?): the resumed run will not "
                    "give the same bits as a straight one\n",
                    path, differ);
    }
    json_decref(mine);
    json_decref(m);
}

/* The same for the engine choices describe() records in the checkpoint's env (CUDA: the
 * attention engine, SG_ATTN; the tensor-core convolutions' generation, SG_CONV_TC; the fp32 3x3
 * convolutions' Winograd form, SG_CONV_WINO; the fp32 tiles on the tensor cores, SG_CONV_F32_TC):
 * each pair sums in different orders. */
static void check_env_engines(sg_exec *e, const char *path, const char *meta_text) {
    static const char *const keys[][2] = {{"attn_engine", "SG_ATTN"},
                                          {"conv_tc", "SG_CONV_TC"},
                                          {"conv_wino", "SG_CONV_WINO"},
                                          {"conv_f32_tc", "SG_CONV_F32_TC"}};
    char env[2048];
    e->be->describe(e->be, env, sizeof env);
    json_t *m = ckpt_meta_load(meta_text, NULL, 0), *mine = json_loads(env, 0, NULL);
    e->ckpt_env_engines_differ = 0;
    for (int k = 0; k < SG_ARRAY_LEN(keys); k++) {
        const char *a = json_string_value(json_object_get(json_object_get(m, "env"), keys[k][0]));
        const char *b = json_string_value(json_object_get(mine, keys[k][0]));
        if (!a || !b || !strcmp(a, b)) continue;
        e->ckpt_env_engines_differ++;
        fprintf(stderr,
                "warning: %s: %s was '%s', this run uses '%s' (%s): the resumed run will not "
                "give the same bits as a straight one\n",
                path, keys[k][0], a, b, keys[k][1]);
    }
    json_decref(mine);
    json_decref(m);
}

/* One save: the metadata and the state collected once; dir NULL writes path, else a rotating
 * checkpoint in dir (its path into path_out). */
static int save(sg_exec *e, const char *path, const char *dir, const char *extra_json,
                int keep_last, char *path_out, size_t cap) {
    char *extra = meta_extra(e, extra_json);
    char *meta = extra ? malloc((size_t)meta_cap(extra)) : NULL;
    ckpt_tensor_desc *d = NULL;
    void *mem = NULL;
    int n = 0, rc = SG_ERR;
    if (!meta) sg_set_error("out of host memory for the checkpoint metadata");
    if (meta && !sg_exec_meta_json(e, extra, meta, meta_cap(extra)) && !collect(e, &d, &n, &mem))
        rc = dir ? ckpt_save_rotating(dir, sg_exec_step_count(e), meta, d, n, NULL, keep_last,
                                      path_out, cap)
                 : ckpt_write(path, meta, d, n, NULL);
    free(extra);
    free(meta);
    free(d);
    free(mem);
    return rc;
}

int sg_exec_save(sg_exec *e, const char *path, const char *extra_json) {
    return save(e, path, NULL, extra_json, 0, NULL, 0);
}

int sg_exec_save_rotating(sg_exec *e, const char *dir, const char *extra_json, int keep_last,
                          char *path_out, size_t cap) {
    return save(e, NULL, dir, extra_json, keep_last, path_out, cap);
}

/* The rank count a checkpoint's config records (absent: 0, one process). */
static int meta_ranks(const char *meta) {
    ckpt_json *j = ckpt_json_parse(meta, strlen(meta));
    int64_t r = 0;
    if (j && ckpt_json_get_int(j, "config.ranks", &r)) r = 0;
    ckpt_json_free(j);
    return r > 0 && r < (1 << 20) ? (int)r : 0;
}

/* A checkpoint written on another rank count: the per-rank shapes (and so the plan hash)
 * differ. Check it against the plan that rank count makes from our config, so that every
 * other field still has to match exactly. */
static int check_other_ranks(sg_exec *e, const char *meta, int ranks) {
    sg_model_cfg c = e->plan.cfg;
    c.ranks = ranks;
    sg_plan other;
    if (sg_plan_build(&other, &c, e->plan.train)) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", sg_last_error());
        sg_plan_free(&other);
        return sg_set_error("checkpoint was written on %d rank(s): %s", ranks ? ranks : 1, msg);
    }
    char cfg[2048], expect[2560];
    sg_model_json(&c, cfg, sizeof cfg);
    snprintf(expect, sizeof expect, "{\"config\":%s,\"plan_hash\":\"%016llx\"}", cfg,
             (unsigned long long)other.hash);
    sg_plan_free(&other);
    return ckpt_meta_check_config(expect, meta);
}

/* The metadata a checkpoint must agree with: this run's, except that the config fields named
 * in may_differ take the checkpoint's values and the plan hash (which pins them) is left out.
 * A malloc'ed string, NULL on failure. */
static char *expected_meta(sg_exec *e, const char *ckpt_meta_text, const char *const *may_differ) {
    char *mine = malloc(8192), *out = NULL;
    if (!mine) return sg_set_error("out of host memory"), NULL;
    if (sg_exec_meta_json(e, NULL, mine, 8192)) return free(mine), NULL;
    if (!may_differ) return mine;
    json_t *m = ckpt_meta_load(mine, NULL, 0), *c = ckpt_meta_load(ckpt_meta_text, NULL, 0);
    json_t *mc = json_object_get(m, "config"), *cc = json_object_get(c, "config");
    if (m && json_is_object(mc) && json_is_object(cc)) {
        for (int i = 0; may_differ[i]; i++) {
            json_t *v = json_object_get(cc, may_differ[i]);
            if (v)
                json_object_set(mc, may_differ[i], v);
            else /* absent there (e.g. a schedule turned on at this resume): not compared */
                json_object_del(mc, may_differ[i]);
        }
        json_object_del(m, "plan_hash");
        out = json_dumps(m, JSON_COMPACT);
    }
    if (!out) sg_set_error("checkpoint metadata: cannot compare it with this run's");
    json_decref(m);
    json_decref(c);
    free(mine);
    return out;
}

/* A resume lets the fields in may_differ (the learning rate, the EMA, ...) change, and they are
 * hashed into the plan, so expected_meta leaves the plan hash out. Check it here against the
 * plan this build makes from the checkpoint's own config: the same config with another plan
 * means another build computes the step differently (a changed graph or layout), and the run
 * cannot continue with the bits it would have had; it is refused, as a plain load refuses it
 * (ckpt_meta_check_config). */
static int check_resume_plan(sg_exec *e, const char *meta) {
    json_t *m = ckpt_meta_load(meta, NULL, 0);
    const char *have = json_string_value(json_object_get(m, "plan_hash"));
    char *cfg_json = json_dumps(json_object_get(m, "config"), JSON_COMPACT);
    sg_model_cfg c;
    sg_engine_table tab;
    int rc = SG_OK, has_tab = meta_engine_table(meta, "checkpoint", &tab);
    /* the data's image count is part of the plan (the dataset lies in the arena) and of the
     * run's data order: a changed count is named as such, not as another build's plan */
    const json_t *dn = json_object_get(json_object_get(m, "data"), "n");
    if (has_tab < 0) {
        rc = SG_ERR;
    } else if (json_is_integer(dn) && json_integer_value(dn) != e->plan.cfg.data_n) {
        rc = sg_set_error("the data holds %lld images now and held %lld when the checkpoint was "
                          "written (its data.n): a resume needs the same data (the run's data "
                          "order and its plan depend on the count)",
                          (long long)e->plan.cfg.data_n, (long long)json_integer_value(dn));
    } else if (!have || !cfg_json || sg_model_cfg_from_json(cfg_json, &c)) {
        rc = sg_set_error("checkpoint metadata: no config or plan_hash to compare with this run");
    } else {
        /* the plan the checkpoint's step ran: with its engine table */
        c.engines = has_tab ? &tab : NULL;
        /* the data the plan reserves is this run's (a resume keeps the data source), and so
         * is the rank count (another one takes check_other_ranks's way) */
        c.data_n = e->plan.cfg.data_n, c.data_h = e->plan.cfg.data_h;
        c.data_w = e->plan.cfg.data_w, c.ranks = e->plan.cfg.ranks;
        sg_plan p;
        if (sg_plan_build(&p, &c, e->plan.train)) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", sg_last_error());
            rc = sg_set_error("checkpoint's config does not plan in this build: %s", msg);
        } else {
            char want[20];
            snprintf(want, sizeof want, "%016llx", (unsigned long long)p.hash);
            if (strcmp(want, have))
                rc = sg_set_error("checkpoint's plan differs from this build's: plan_hash %s in "
                                  "the checkpoint, %s for its config here. The model config is "
                                  "the same, but this build computes or lays out the step "
                                  "differently (another stepgraph version), so the run cannot "
                                  "continue with the same bits: start a new run from its "
                                  "weights with train --init-from",
                                  have, want);
        }
        sg_plan_free(&p);
    }
    sg_engine_table_free(&tab);
    free(cfg_json);
    json_decref(m);
    return rc;
}

static int load(sg_exec *e, const char *path, int params_only, int ema,
                const char *const *may_differ) {
    ckpt_file *f = ckpt_open(path);
    if (!f) return SG_ERR;
    const sg_graph *g = &e->plan.g;
    int rc = SG_OK;
    /* same architecture? (the training fields may differ only when loading weights alone) */
    e->ckpt_ranks = meta_ranks(ckpt_meta(f));
    if (!params_only && e->ckpt_ranks != e->plan.cfg.ranks) {
        rc = check_other_ranks(e, ckpt_meta(f), e->ckpt_ranks);
    } else if (!params_only) {
        char *want = expected_meta(e, ckpt_meta(f), may_differ);
        if (!want || ckpt_meta_check_config(want, ckpt_meta(f))) rc = SG_ERR;
        free(want);
        if (!rc && may_differ) rc = check_resume_plan(e, ckpt_meta(f));
    }
    if (!rc && !params_only) {
        check_conv_engines(e, path, ckpt_meta(f));
        check_env_engines(e, path, ckpt_meta(f));
    }
    /* find every tensor first (a clear error before any work), then decompress them all in
     * parallel into one host buffer, then upload */
    int *tid = calloc((size_t)g->nt, sizeof(int)), *idx = calloc((size_t)g->nt, sizeof(int)), n = 0;
    int64_t total = 0;
    if (!tid || !idx) rc = sg_set_error("out of host memory");
    for (int t = 0; t < g->nt && !rc; t++) {
        const sg_tensor *x = &g->t[t];
        if (!ckpt_carries(x)) continue;
        if (params_only && x->role != ROLE_PARAM) continue;
        char name[SG_NAME_MAX + 8];
        snprintf(name, sizeof name, "%s%s", params_only && ema ? "ema:" : "", x->name);
        int i = ckpt_find(f, name);
        if (i < 0) {
            rc =
                sg_set_error("%s: checkpoint has no tensor '%s' (from another model?)", path, name);
            break;
        }
        ckpt_entry en;
        ckpt_tensor_info(f, i, &en);
        if (en.raw_bytes != x->bytes || en.dtype != (int)x->dtype) {
            rc = sg_set_error("%s: tensor '%s' is %lld bytes of %s, the plan expects %lld of %s",
                              path, name, (long long)en.raw_bytes, ckpt_dtype_name(en.dtype),
                              (long long)x->bytes, sg_dtype_names[x->dtype]);
            break;
        }
        tid[n] = t, idx[n] = i, n++;
        total += x->bytes;
    }
    unsigned char *buf = NULL;
    void **dst = NULL;
    int64_t *cap = NULL;
    if (!rc && n) {
        buf = malloc((size_t)total);
        dst = malloc(sizeof(void *) * (size_t)n);
        cap = malloc(sizeof(int64_t) * (size_t)n);
        if (!buf || !dst || !cap) rc = sg_set_error("out of host memory for the checkpoint");
        int64_t off = 0;
        for (int k = 0; k < n && !rc; k++) {
            dst[k] = buf + off;
            cap[k] = g->t[tid[k]].bytes;
            off += cap[k];
        }
        if (!rc) rc = ckpt_read_many(f, idx, dst, cap, n, 0);
        if (!rc && !params_only) rc = zero_state_regions(e);
        for (int k = 0; k < n && !rc; k++)
            rc = e->be->upload(e->be, g->t[tid[k]].offset, dst[k], cap[k]);
    }
    free(dst);
    free(cap);
    free(tid);
    free(idx);
    free(buf);
    if (!rc && !params_only && e->plan.io.seed >= 0) sg_exec_read(e, e->plan.io.seed, &e->seed);
    ckpt_close(f);
    return rc;
}

int sg_exec_load(sg_exec *e, const char *path, int params_only, int ema) {
    return load(e, path, params_only, ema, NULL);
}

char *sg_exec_ckpt_conv_engines(const char *path) {
    ckpt_file *f = ckpt_open(path);
    if (!f) return NULL;
    json_t *m = ckpt_meta_load(ckpt_meta(f), NULL, 0);
    ckpt_close(f);
    json_t *rec = json_object_get(m, "conv_engines");
    char *out = json_is_object(rec) ? json_dumps(rec, JSON_COMPACT) : NULL;
    json_decref(m);
    return out;
}

int sg_exec_resume(sg_exec *e, const char *path, const char *const *may_differ) {
    return load(e, path, 0, 0, may_differ);
}
