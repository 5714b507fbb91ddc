/* engine_table.c — the per-layer convolution engine table's planner side: entries, the hash
 * the config records, the layer of a conv node, and the check against a model
 * (planner/engine_table.h). */
#include "planner/engine_table.h"

#include "planner/op_dims.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sg_engine_table_init(sg_engine_table *t) {
    memset(t, 0, sizeof *t);
    for (int s = 0; s < SG_WG_SCHEDS; s++) t->wg_sched_ms[s] = t->wg_sched_step_ms[s] = -1;
    t->wg_layers_step_ms = -1;
    t->attn = SG_ATTN_GEMM, t->attn_ms[0] = t->attn_ms[1] = -1;
    t->knobs = (sg_step_knobs){.pdl = SG_KNOB_UNSET,
                               .tc_halo = SG_KNOB_UNSET,
                               .dgrad_stats = SG_KNOB_UNSET,
                               .fuse_stats = SG_KNOB_UNSET,
                               .norm_onepass = SG_KNOB_UNSET,
                               .base_ms = -1,
                               .step_ms = -1};
}

static const char *const halo_names[3] = {"prologue", "none", "all"};
static const char *const stats_names[4] = {"0", "fwd", "bwd", "1"};

const char *sg_knob_halo_name(int v) {
    return v >= 0 && v < 3 ? halo_names[v] : "default";
}

int sg_knob_halo_parse(const char *s) {
    for (int v = 0; s && v < 3; v++)
        if (!strcmp(s, halo_names[v])) return v;
    return SG_KNOB_UNSET;
}

const char *sg_knob_stats_name(int v) {
    return v >= 0 && v < 4 ? stats_names[v] : "default";
}

static const char *knob_bool_name(int v) {
    return v < 0 ? "default" : v ? "on" : "off";
}

void sg_step_knobs_text(const sg_step_knobs *k, char *buf, int cap) {
    snprintf(buf, (size_t)cap, "pdl %s, tc_halo %s, dgrad_stats %s, fuse_stats %s, norm_onepass %s",
             knob_bool_name(k->pdl), sg_knob_halo_name(k->tc_halo), knob_bool_name(k->dgrad_stats),
             sg_knob_stats_name(k->fuse_stats), sg_knob_stats_name(k->norm_onepass));
}

int sg_knob_stats_parse(const char *s) {
    for (int v = 0; s && v < 4; v++)
        if (!strcmp(s, stats_names[v])) return v;
    return SG_KNOB_UNSET;
}

void sg_engine_table_free(sg_engine_table *t) {
    free(t->e);
    free(t->gemm);
    memset(t, 0, sizeof *t);
}

int sg_wg_sched_best(const double *ms) {
    int best = 0;
    for (int s = 1; s < SG_WG_SCHEDS; s++)
        if (ms[s] >= 0 && (ms[best] < 0 || ms[s] < ms[best])) best = s;
    return ms[best] >= 0 ? best : 0;
}

const char *sg_wg_sched_text(int s, int brief) {
    static const char *const text[2][SG_WG_SCHEDS] = {
        {"persistent grid off, N tile that fills the SMs off",
         "persistent grid on, N tile that fills the SMs off",
         "persistent grid off, N tile that fills the SMs on",
         "persistent grid on, N tile that fills the SMs on"},
        {"persistent off, fill off", "persistent on, fill off", "persistent off, fill on",
         "persistent on, fill on"}};
    return text[brief != 0][s & (SG_WG_SCHEDS - 1)];
}

const char *sg_layer_engine_name(int engine) {
    return engine == SG_LAYER_OWN ? "own" : engine == SG_LAYER_CUDNN ? "cudnn" : "-";
}

int sg_layer_engine_parse(const char *s) {
    if (s && !strcmp(s, "own")) return SG_LAYER_OWN;
    if (s && !strcmp(s, "cudnn")) return SG_LAYER_CUDNN;
    return 0;
}

const char *sg_tc_name(int tc) {
    return tc == SG_TC_WGMMA ? "wgmma" : "mma";
}

int sg_tc_parse(const char *s) {
    if (s && !strcmp(s, "mma")) return SG_TC_MMA;
    if (s && !strcmp(s, "wgmma")) return SG_TC_WGMMA;
    return -1;
}

int sg_engine_table_add(sg_engine_table *t, const char *layer, int engine, double own_ms,
                        double cudnn_ms) {
    if (engine != SG_LAYER_OWN && engine != SG_LAYER_CUDNN)
        return sg_set_error("engine table: layer %s: engine must be \"own\" or \"cudnn\"", layer);
    if (!*layer || strlen(layer) >= SG_NAME_MAX)
        return sg_set_error("engine table: a layer name is empty or longer than %d characters",
                            SG_NAME_MAX - 1);
    if (sg_engine_table_layer(t, layer))
        return sg_set_error("engine table: layer %s is listed twice", layer);
    if (t->n == t->cap) {
        const int cap = t->cap ? 2 * t->cap : 64;
        sg_engine_entry *e = realloc(t->e, sizeof *e * (size_t)cap);
        if (!e) return sg_set_error("out of host memory for the engine table");
        t->e = e, t->cap = cap;
    }
    sg_engine_entry *x = &t->e[t->n++];
    memset(x, 0, sizeof *x);
    snprintf(x->layer, sizeof x->layer, "%s", layer);
    x->engine = engine, x->own_ms = own_ms, x->cudnn_ms = cudnn_ms;
    x->tc = SG_TC_MMA, x->wgmma_ms = -1;
    for (int q = 0; q < 3; q++)
        x->pass_own_ms[q] = x->pass_lib_ms[q] = x->pass_wgmma_ms[q] = -1, x->pass_tc[q] = SG_TC_MMA;
    x->wg_sched = -1;
    for (int s = 0; s < SG_WG_SCHEDS; s++) x->wg_sched_ms[s] = -1;
    x->wino_ms[0] = x->wino_ms[1] = x->f32tc_ms[0] = x->f32tc_ms[1] = -1;
    sg_engine_table_hash(t); /* kept current: a config reads it through a const pointer */
    return SG_OK;
}

static uint64_t fnv(uint64_t h, const char *s) {
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

static int cmp_entry(const void *a, const void *b) {
    return strcmp((*(const sg_engine_entry *const *)a)->layer,
                  (*(const sg_engine_entry *const *)b)->layer);
}

static int cmp_gemm(const void *a, const void *b) {
    return strcmp((*(const sg_gemm_pick *const *)a)->key, (*(const sg_gemm_pick *const *)b)->key);
}

uint64_t sg_engine_table_hash(sg_engine_table *t) {
    uint64_t h = 0xcbf29ce484222325ull;
    const sg_engine_entry **s = malloc(sizeof *s * (size_t)(t->n > 0 ? t->n : 1));
    SG_ASSERT(s); /* a few hundred pointers */
    for (int i = 0; i < t->n; i++) s[i] = &t->e[i];
    qsort(s, (size_t)t->n, sizeof *s, cmp_entry);
    for (int i = 0; i < t->n; i++) {
        h = fnv(h, s[i]->layer);
        h = fnv(h, "=");
        h = fnv(h, sg_layer_engine_name(s[i]->engine));
        h = fnv(h, ";");
        if (s[i]->engine == SG_LAYER_OWN && s[i]->tc == SG_TC_WGMMA) h = fnv(h, "tc:wgmma;");
        if (s[i]->engine == SG_LAYER_OWN && s[i]->wino) h = fnv(h, "wino;");
        if (s[i]->engine == SG_LAYER_OWN && s[i]->f32tc) h = fnv(h, "f32tc;");
        for (int pass = 0; pass < 3 && s[i]->engine == SG_LAYER_CUDNN; pass++) {
            if (!s[i]->pass_own[pass]) continue;
            const char tag[7] = {'o', 'w', 'n', ':', (char)('0' + pass), ';', 0};
            h = fnv(h, tag);
            if (s[i]->pass_tc[pass] == SG_TC_WGMMA) {
                const char wg[6] = {'w', 'g', ':', (char)('0' + pass), ';', 0};
                h = fnv(h, wg);
            }
        }
        for (int pass = 0; pass < 3 && s[i]->engine == SG_LAYER_CUDNN; pass++) {
            if (!s[i]->cudnn[pass][0]) continue;
            const char tag[3] = {(char)('0' + pass), ':', 0};
            h = fnv(h, tag);
            h = fnv(h, s[i]->cudnn[pass]);
            h = fnv(h, ";");
        }
    }
    free(s);
    const sg_gemm_pick **gp = malloc(sizeof *gp * (size_t)(t->ngemm > 0 ? t->ngemm : 1));
    SG_ASSERT(gp); /* a few hundred pointers */
    for (int i = 0; i < t->ngemm; i++) gp[i] = &t->gemm[i];
    qsort(gp, (size_t)t->ngemm, sizeof *gp, cmp_gemm);
    for (int i = 0; i < t->ngemm; i++) {
        char id[24];
        snprintf(id, sizeof id, "=%016llx;", (unsigned long long)gp[i]->algo);
        h = fnv(h, "gemm:");
        h = fnv(h, gp[i]->key);
        h = fnv(h, id);
    }
    free(gp);
    if (t->attn == SG_ATTN_FUSED) h = fnv(h, "attn:fused;");
    return t->hash = h;
}

int sg_engine_table_set_attn(sg_engine_table *t, int attn, double gemm_ms, double fused_ms) {
    if (attn != SG_ATTN_GEMM && attn != SG_ATTN_FUSED)
        return sg_set_error("engine table: attention engine %d is neither gemm nor fused", attn);
    t->attn = attn, t->attn_ms[0] = gemm_ms, t->attn_ms[1] = fused_ms;
    sg_engine_table_hash(t);
    return SG_OK;
}

int sg_engine_table_set_gemm(sg_engine_table *t, const char *key, uint64_t algo, double ms,
                             double first_ms) {
    if (!*key || strlen(key) >= SG_GEMM_KEY_MAX)
        return sg_set_error("engine table: a GEMM key is empty or longer than %d characters",
                            SG_GEMM_KEY_MAX - 1);
    sg_gemm_pick *x = NULL;
    for (int i = 0; i < t->ngemm && !x; i++)
        if (!strcmp(t->gemm[i].key, key)) x = &t->gemm[i];
    if (!x) {
        if (t->ngemm == t->gemm_cap) {
            const int cap = t->gemm_cap ? 2 * t->gemm_cap : 64;
            sg_gemm_pick *g = realloc(t->gemm, sizeof *g * (size_t)cap);
            if (!g) return sg_set_error("out of host memory for the engine table");
            t->gemm = g, t->gemm_cap = cap;
        }
        x = &t->gemm[t->ngemm++];
        memset(x, 0, sizeof *x);
        snprintf(x->key, sizeof x->key, "%s", key);
    }
    x->algo = algo, x->ms = ms, x->first_ms = first_ms;
    sg_engine_table_hash(t);
    return SG_OK;
}

const sg_gemm_pick *sg_engine_table_gemm(const sg_engine_table *t, const char *key) {
    for (int i = 0; t && i < t->ngemm; i++)
        if (!strcmp(t->gemm[i].key, key)) return &t->gemm[i];
    return NULL;
}

int sg_engine_table_set_tc(sg_engine_table *t, const char *layer, int tc, double wgmma_ms) {
    if (tc != SG_TC_MMA && tc != SG_TC_WGMMA)
        return sg_set_error("engine table: layer %s: tensor-core generation %d", layer, tc);
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->e[i].layer, layer)) {
            if (tc == SG_TC_WGMMA && t->e[i].engine != SG_LAYER_OWN)
                return sg_set_error("engine table: layer %s: \"tc\": \"wgmma\" is an own "
                                    "layer's generation, and this layer says %s",
                                    layer, sg_layer_engine_name(t->e[i].engine));
            t->e[i].tc = tc, t->e[i].wgmma_ms = wgmma_ms;
            sg_engine_table_hash(t);
            return SG_OK;
        }
    return sg_set_error("engine table: no layer %s", layer);
}

/* an own layer's two fp32 forms: their JSON keys, and their kernels for set_form's refusal */
enum { FORM_WINO, FORM_F32TC };
static const char *const form_key[] = {"wino", "f32tc"};
static const char *const form_what[] = {"the Winograd kernels are fp32 alone",
                                        "the tiles' tensor-core form is the fp32 tiles'"};

/* an own layer's fp32 form choice (form: FORM_*) into on / ms[2], refused where
 * sg_engine_table_set_wino says */
static int set_form(sg_engine_table *t, const char *layer, int form, int on, double ms0,
                    double ms1) {
    const char *key = form_key[form];
    if (on != 0 && on != 1)
        return sg_set_error("engine table: layer %s: \"%s\" choice %d is not 0 or 1", layer, key,
                            on);
    if (on && !strcmp(t->precision, "bf16"))
        return sg_set_error("engine table: layer %s: \"%s\" is for fp32 tables (%s), and this one "
                            "is bf16",
                            layer, key, form_what[form]);
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->e[i].layer, layer)) {
            sg_engine_entry *x = &t->e[i];
            if (on && x->engine != SG_LAYER_OWN)
                return sg_set_error("engine table: layer %s: \"%s\" is an own layer's "
                                    "choice, and this layer says %s",
                                    layer, key, sg_layer_engine_name(x->engine));
            double *ms = form == FORM_WINO ? x->wino_ms : x->f32tc_ms;
            *(form == FORM_WINO ? &x->wino : &x->f32tc) = on;
            ms[0] = ms0, ms[1] = ms1;
            sg_engine_table_hash(t);
            return SG_OK;
        }
    return sg_set_error("engine table: no layer %s", layer);
}

int sg_engine_table_set_wino(sg_engine_table *t, const char *layer, int wino, double direct_ms,
                             double wino_ms) {
    return set_form(t, layer, FORM_WINO, wino, direct_ms, wino_ms);
}

int sg_engine_table_set_f32tc(sg_engine_table *t, const char *layer, int f32tc, double fma_ms,
                              double tc_ms) {
    return set_form(t, layer, FORM_F32TC, f32tc, fma_ms, tc_ms);
}

double sg_engine_entry_form_saving(const sg_engine_entry *e) {
    if (e->engine != SG_LAYER_OWN) return 0;
    double saved = 0;
    /* the tiles' form: measured on both sides (older tables have neither) */
    if (e->f32tc && e->f32tc_ms[0] >= 0 && e->f32tc_ms[1] >= 0)
        saved += e->f32tc_ms[0] - e->f32tc_ms[1];
    /* Winograd against the direct passes it replaces, in the chosen form */
    if (e->wino && e->wino_ms[0] >= 0 && e->wino_ms[1] >= 0) saved += e->wino_ms[0] - e->wino_ms[1];
    return saved;
}

int sg_engine_table_set_pass(sg_engine_table *t, const char *layer, int pass, int own,
                             double own_ms, double lib_ms) {
    if (pass < 0 || pass > 2) return sg_set_error("engine table: pass %d", pass);
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->e[i].layer, layer)) {
            if (own && t->e[i].engine != SG_LAYER_CUDNN)
                return sg_set_error("engine table: layer %s: a pass on own is a cudnn layer's "
                                    "choice, and this layer says %s",
                                    layer, sg_layer_engine_name(t->e[i].engine));
            t->e[i].pass_own[pass] = own != 0;
            t->e[i].pass_own_ms[pass] = own_ms, t->e[i].pass_lib_ms[pass] = lib_ms;
            if (!own) t->e[i].pass_tc[pass] = SG_TC_MMA; /* a generation only where on own */
            sg_engine_table_hash(t);
            return SG_OK;
        }
    return sg_set_error("engine table: no layer %s", layer);
}

int sg_engine_table_set_pass_tc(sg_engine_table *t, const char *layer, int pass, int tc,
                                double wgmma_ms) {
    if (pass < 0 || pass > 2) return sg_set_error("engine table: pass %d", pass);
    if (tc != SG_TC_MMA && tc != SG_TC_WGMMA)
        return sg_set_error("engine table: layer %s: tensor-core generation %d", layer, tc);
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->e[i].layer, layer)) {
            if (tc == SG_TC_WGMMA && !t->e[i].pass_own[pass])
                return sg_set_error("engine table: layer %s: pass %d on wgmma, but the pass "
                                    "does not run on own",
                                    layer, pass);
            t->e[i].pass_tc[pass] = (unsigned char)tc, t->e[i].pass_wgmma_ms[pass] = wgmma_ms;
            sg_engine_table_hash(t);
            return SG_OK;
        }
    return sg_set_error("engine table: no layer %s", layer);
}

int sg_engine_table_set_cudnn(sg_engine_table *t, const char *layer, int pass, const char *name) {
    if (pass < 0 || pass > 2) return sg_set_error("engine table: pass %d", pass);
    if (strlen(name) >= SG_ENGINE_NAME_MAX)
        return sg_set_error("engine table: layer %s: a cuDNN engine name longer than %d characters",
                            layer, SG_ENGINE_NAME_MAX - 1);
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->e[i].layer, layer)) {
            snprintf(t->e[i].cudnn[pass], SG_ENGINE_NAME_MAX, "%s", name);
            sg_engine_table_hash(t);
            return SG_OK;
        }
    return sg_set_error("engine table: no layer %s", layer);
}

int sg_conv_pass_of(int op) {
    return op == OP_CONV2D || op == OP_CONV2D_ADD ? SG_CONV_PASS_FWD
           : op == OP_CONV2D_BWD_DATA             ? SG_CONV_PASS_BWD_DATA
           : op == OP_CONV2D_BWD_WEIGHT           ? SG_CONV_PASS_BWD_FILTER
                                                  : -1;
}

const sg_engine_entry *sg_engine_table_entry_of(const sg_engine_table *t, const sg_graph *g,
                                                int node) {
    char name[SG_NAME_MAX];
    if (!t || sg_conv_layer_of(g, node, name) < 0) return NULL;
    return sg_engine_table_find(t, name);
}

const sg_engine_entry *sg_engine_table_find(const sg_engine_table *t, const char *layer) {
    for (int i = 0; t && i < t->n; i++)
        if (!strcmp(t->e[i].layer, layer)) return &t->e[i];
    return NULL;
}

int sg_engine_table_layer(const sg_engine_table *t, const char *layer) {
    const sg_engine_entry *e = sg_engine_table_find(t, layer);
    return e ? e->engine : 0;
}

int sg_conv_gemm_node(const sg_graph *g, int node) {
    const sg_node *nd = &g->n[node];
    if (!sg_op_is_conv(nd->op)) return 0;
    const sg_conv_dims d = sg_conv_dims_of(g, nd);
    if (d.K != 1 || d.S != 1 || d.pad != 0) return 0;
    const int x = nd->op == OP_CONV2D_BWD_WEIGHT ? nd->in[1]
                  : nd->op == OP_CONV2D_BWD_DATA ? -1
                                                 : nd->in[0];
    return x < 0 || g->t[x].vnorm < 0;
}

int sg_conv_f32_own_node(const sg_graph *g, int node) {
    const sg_node *nd = &g->n[node];
    const int pass = sg_conv_pass_of(nd->op);
    if (pass < 0 || !sg_op_is_conv(nd->op) || sg_conv_gemm_node(g, node)) return 0;
    const int x = pass == SG_CONV_PASS_BWD_DATA     ? nd->out[0]
                  : pass == SG_CONV_PASS_BWD_FILTER ? nd->in[1]
                                                    : nd->in[0];
    const sg_conv_dims d = sg_conv_dims_of(g, nd);
    return g->t[x].dtype == DT_F32 && (int64_t)d.H * d.W >= 32 * 32;
}

/* The layer name of weight tensor w: its name without ".weight" (bf16 runs read the weights'
 * copy: its source's name) */
static void weight_layer(const sg_graph *g, int w, char *name) {
    if (g->t[w].copy_of >= 0) w = g->t[w].copy_of;
    snprintf(name, SG_NAME_MAX, "%s", g->t[w].name);
    const size_t n = strlen(name), k = strlen(".weight");
    if (n > k && !strcmp(name + n - k, ".weight")) name[n - k] = 0;
}

int sg_conv_layers_computed(const sg_graph *g, int node, char names[2][SG_NAME_MAX]) {
    if (node < 0 || node >= g->nn || g->n[node].fwd >= 0) return 0;
    const sg_node *nd = &g->n[node];
    if (nd->op != OP_CONV2D && nd->op != OP_CONV2D_ADD && nd->op != OP_UPCONV2D &&
        nd->op != OP_CONV2D_SC)
        return 0;
    weight_layer(g, nd->in[1], names[0]);
    if (nd->op != OP_CONV2D_SC) return 1;
    weight_layer(g, nd->in[4], names[1]); /* {h, w2, b2, x, ws, bs} */
    return 2;
}

int sg_conv_layer_charged(const sg_graph *g, int node, char *layer) {
    if (node < 0 || node >= g->nn) return -1;
    const int f = g->n[node].fwd >= 0 ? g->n[node].fwd : node;
    char names[2][SG_NAME_MAX];
    if (!sg_conv_layers_computed(g, f, names)) return -1;
    snprintf(layer, SG_NAME_MAX, "%s", names[0]);
    return 0;
}

int sg_conv_layer_of(const sg_graph *g, int node, char *name) {
    if (node < 0 || node >= g->nn || !sg_op_is_conv(g->n[node].op)) return -1;
    /* a backward node's layer is its forward node's (a weight gradient names no weight) */
    const int f = g->n[node].fwd >= 0 ? g->n[node].fwd : node;
    /* the backward passes of a folded shortcut (conv2d_sc: two weights, a forward only the own
     * kernels run) belong to no layer of the table: they take the --conv-engine default */
    if (g->n[f].op == OP_CONV2D_SC) return -1;
    SG_ASSERT(g->n[f].op == OP_CONV2D || g->n[f].op == OP_CONV2D_ADD);
    int w = g->n[f].in[1];
    if (name) weight_layer(g, w, name);
    return g->t[w].copy_of >= 0 ? g->t[w].copy_of : w;
}

int sg_engine_table_node(const sg_engine_table *t, const sg_graph *g, int node) {
    char layer[SG_NAME_MAX];
    if (!t || sg_conv_layer_of(g, node, layer) < 0) return 0;
    return sg_engine_table_layer(t, layer);
}

int sg_engine_table_node_pass_own(const sg_engine_table *t, const sg_graph *g, int node) {
    const sg_engine_entry *e = sg_engine_table_entry_of(t, g, node);
    const int pass = e && node >= 0 && node < g->nn ? sg_conv_pass_of(g->n[node].op) : -1;
    return pass >= 0 && e->engine == SG_LAYER_CUDNN && e->pass_own[pass];
}

int sg_engine_table_node_tc(const sg_engine_table *t, const sg_graph *g, int node) {
    const sg_engine_entry *e = sg_engine_table_entry_of(t, g, node);
    /* the backward passes of a folded shortcut (no layer's: sg_conv_layer_of) run where the
     * pair's first layer, conv2, says (and so does the fold itself: the CUDA backend's
     * prepare_own_only) */
    char names[2][SG_NAME_MAX];
    if (!e && t && node >= 0 && node < g->nn && sg_op_is_conv(g->n[node].op) &&
        g->n[node].fwd >= 0 && sg_conv_layers_computed(g, g->n[node].fwd, names) == 2)
        e = sg_engine_table_find(t, names[0]);
    if (e && e->engine == SG_LAYER_CUDNN) {
        const int pass = sg_conv_pass_of(g->n[node].op);
        return pass >= 0 && e->pass_own[pass] && e->pass_tc[pass] == SG_TC_WGMMA ? SG_TC_WGMMA
                                                                                 : SG_TC_MMA;
    }
    return e && e->engine == SG_LAYER_OWN && e->tc == SG_TC_WGMMA ? SG_TC_WGMMA : SG_TC_MMA;
}

int sg_engine_table_set_sched(sg_engine_table *t, const char *layer, int sched, const double *ms) {
    sg_engine_entry *x = NULL;
    for (int i = 0; i < t->n && !x; i++)
        if (!strcmp(t->e[i].layer, layer)) x = &t->e[i];
    if (!x) return sg_set_error("engine table: no layer %s", layer);
    if (sched < -1 || sched >= SG_WG_SCHEDS)
        return sg_set_error("engine table: layer %s: wgmma schedule %d is not -1 to %d", layer,
                            sched, SG_WG_SCHEDS - 1);
    x->wg_sched = sched;
    for (int s = 0; s < SG_WG_SCHEDS && ms; s++) x->wg_sched_ms[s] = ms[s];
    return SG_OK;
}

int sg_engine_table_node_wino(const sg_engine_table *t, const sg_graph *g, int node) {
    const sg_engine_entry *e = sg_engine_table_entry_of(t, g, node);
    return e && e->engine == SG_LAYER_OWN && e->wino;
}

int sg_engine_table_node_f32tc(const sg_engine_table *t, const sg_graph *g, int node) {
    const sg_engine_entry *e = sg_engine_table_entry_of(t, g, node);
    return e && e->engine == SG_LAYER_OWN && e->f32tc;
}

int sg_engine_table_node_sched(const sg_engine_table *t, const sg_graph *g, int node) {
    char layer[SG_NAME_MAX];
    const sg_engine_entry *e =
        t && !sg_conv_layer_charged(g, node, layer) ? sg_engine_table_find(t, layer) : NULL;
    return e ? e->wg_sched : -1;
}

int sg_engine_table_check(const sg_engine_table *t, const sg_graph *g, const sg_model_cfg *cfg,
                          int train) {
    const char *prec = cfg->act_dt == DT_BF16 ? "bf16" : "fp32";
    if (strcmp(t->model, cfg->name))
        return sg_set_error("engine table is for model %s, this run is %s", t->model, cfg->name);
    if (strcmp(t->precision, prec))
        return sg_set_error("engine table is for precision %s, this run is %s", t->precision, prec);
    if (train && t->batch != sg_model_micro_batch(cfg))
        return sg_set_error("engine table was measured at batch %d per pass, this run's is %d "
                            "(tune it again at this batch: bench --tune-engines)",
                            t->batch, sg_model_micro_batch(cfg));
    /* every conv layer the graph computes has a choice ... */
    int layers = 0;
    for (int i = 0; i < g->nn; i++) {
        char names[2][SG_NAME_MAX];
        const int n = g->n[i].micro ? 0 : sg_conv_layers_computed(g, i, names);
        for (int j = 0; j < n; j++) {
            layers++;
            if (!sg_engine_table_layer(t, names[j]))
                return sg_set_error("engine table has no entry for conv layer %s of model %s",
                                    names[j], cfg->name);
        }
    }
    /* ... and every entry is a layer the graph computes (the names are distinct: one each) */
    if (layers != t->n)
        for (int k = 0; k < t->n; k++) {
            int found = 0;
            for (int i = 0; i < g->nn && !found; i++) {
                char names[2][SG_NAME_MAX];
                const int n = sg_conv_layers_computed(g, i, names);
                for (int j = 0; j < n && !found; j++) found = !strcmp(names[j], t->e[k].layer);
            }
            if (!found)
                return sg_set_error("engine table names layer %s, which model %s does not have",
                                    t->e[k].layer, cfg->name);
        }
    return SG_OK;
}
