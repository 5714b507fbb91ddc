/* engine_tune.c — measuring the per-layer conv engine table (graph/engine_tune.h). */
#include "graph/engine_tune.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "graph/exec.h"
#include "planner/op_dims.h"

/* A layer's fp32 form sums (tune_pass's forms, per layer): its passes the direct tiles take, with
 * their products on the CUDA cores (FMA) and on the tensor cores (TC); of those, the ones the
 * Winograd kernels take, both ways (_W) and as Winograd */
enum { FORM_FMA, FORM_TC, FORM_FMA_W, FORM_TC_W, FORM_WINO, FORMS };

int sg_engine_tune_charge(const sg_graph *g, int node, char *layer) {
    /* a conv node, any pass, fused forms included: its (first) layer's */
    if (!sg_conv_layer_charged(g, node, layer)) return 0;
    const int f = g->n[node].fwd >= 0 ? g->n[node].fwd : node;
    char names[2][SG_NAME_MAX];
    /* a normalisation or a nearest upsample (with its recomputation and backward) that one
     * layer's convs alone read: that layer's */
    if (g->n[f].op != OP_NORM_ACT && g->n[f].op != OP_NORM_ACT_TEMB && g->n[f].op != OP_UPSAMPLE2X)
        return -1;
    const int y = g->n[f].out[0];
    int readers = 0;
    for (int i = 0; i < g->nn; i++) {
        if (g->n[i].in[0] != y || !sg_conv_layers_computed(g, i, names)) continue;
        if (readers++ && strcmp(names[0], layer)) return -1; /* read by two layers: neither's */
        snprintf(layer, SG_NAME_MAX, "%s", names[0]);
    }
    return readers ? 0 : -1;
}

/* a conv node's engine name on the library side: cuDNN, or cuBLASLt for a 1x1 conv (the CUDA
 * backend's gemm) */
static int on_lib(const char *name) {
    return !strncmp(name, "cudnn", 5) || !strcmp(name, "gemm");
}

/* a node the engines name (node_engine): a conv pass, or an own-only one (a shortcut fold, an
 * upsample conv's three passes) whose wgmma schedule is timed like theirs */
static int conv_like(sg_op op) {
    return sg_op_is_conv(op) || op == OP_CONV2D_SC || op == OP_UPCONV2D ||
           op == OP_UPCONV2D_BWD_DATA || op == OP_UPCONV2D_BWD_WEIGHT;
}

/* the median of v[0..n) (sorted in place) */
static double median(float *v, int n) {
    sg_sort_f32(v, n);
    return sg_quantile_sorted(v, n, 0.5);
}

/* The index of layer name in t (every name the plans compute is listed: sg_plan_build checked) */
static int layer_index(const sg_engine_table *t, const char *name) {
    int k = 0;
    while (k < t->n && strcmp(t->e[k].layer, name)) k++;
    SG_ASSERT(k < t->n);
    return k;
}

/* e: the plan of cfg on backend be (its conv engine auto: the table decides), the dataset
 * uploaded, the state initialised, `steps` steps run (the caller frees e, also on failure) */
static int warm_exec(const sg_model_cfg *cfg, const sg_engine_tune_opts *o, sg_backend *be,
                     int steps, sg_exec *e) {
    be->conv_engine = SG_CONV_ENGINE_AUTO;
    int rc = sg_exec_init(e, cfg, 1, be);
    if (!rc) rc = sg_exec_upload_dataset(e, o->pixels, o->pixel_bytes, o->labels);
    if (!rc) rc = sg_exec_init_state(e, o->seed);
    for (int i = 0; i < steps && !rc; i++) rc = be->run_step(be, &e->plan);
    return rc;
}

/* The schedule a layer takes over the table's `table` (SG_WG_SCHED_*), from its wgmma nodes'
 * sums under each (ms[SG_WG_SCHEDS], < 0: not measured): the fastest where it is another and
 * gain (a fraction) faster than the table's on those nodes; -1 (the table's) otherwise. */
static int layer_sched_pick(const double *ms, int table, double gain) {
    const int b = sg_wg_sched_best(ms);
    return b != table && ms[table] >= 0 && ms[b] >= 0 && ms[b] < (1.0 - gain) * ms[table] ? b : -1;
}

/* ms[k]: the median of `reps` replays of layer k's charged nodes (sg_engine_tune_charge), in
 * schedule order, captured as one graph (backend.h: time_nodes_replay); where sched >= 0, under
 * the wgmma schedule the layer would take (layer_sched_pick of its sums in layer_sched, gain),
 * else sched; 0 for a layer charged no node */
static int replay_layers(sg_backend *be, const sg_plan *p, const sg_engine_table *layers, int reps,
                         int sched, const double *layer_sched, double gain, double *ms) {
    const sg_graph *g = &p->g;
    int *of = malloc(sizeof(int) * ((size_t)g->nn + 1)),
        *nodes = malloc(sizeof(int) * ((size_t)g->nn + 1));
    float *r = malloc(sizeof(float) * ((size_t)reps + 1));
    int rc = of && nodes && r ? SG_OK : sg_set_error("out of host memory");
    for (int i = 0; i < g->nn && !rc; i++) {
        char layer[SG_NAME_MAX];
        of[i] = sg_engine_tune_charge(g, i, layer) ? -1 : layer_index(layers, layer);
    }
    int set = -1; /* the schedule the backend is forced to */
    for (int k = 0; k < layers->n && !rc; k++) {
        const int own =
            sched >= 0 ? layer_sched_pick(layer_sched + SG_WG_SCHEDS * k, sched, gain) : -1;
        const int want = own >= 0 ? own : sched;
        if (want != set) be->wg_sched(be, want), set = want;
        int n = 0;
        for (int i = 0; i < g->nn; i++)
            if (of[i] == k) nodes[n++] = i;
        rc = be->time_nodes_replay(be, p, nodes, n, reps, r);
        if (!rc) ms[k] = median(r, reps);
    }
    if (set >= 0) be->wg_sched(be, -1);
    free(of), free(nodes), free(r);
    return rc;
}

/* One alternative: every layer of `layers` on `engine` (own: on tensor-core generation tc);
 * per layer the charged ms (ms[k]) and whether every conv node of it ran on that engine (ran[k];
 * own on wgmma: none left on mma.sync, "own", where the backend could not take it; the 1x1
 * passes a folded shortcut leaves to gemm are gemm in every alternative); env: describe()'s record.
 * cuDNN's alternative chooses its engines by timing where o->cudnn_time_reps asks, and each layer's
 * cuDNN engine per pass (its first node's) goes into `layers` (sg_engine_table_set_cudnn); with
 * pass_lib / pass_own / pass_wg (n x 3 each, cuDNN's alternative on a backend that can time a
 * node on another engine), each of its library-side conv nodes is also timed on own in the same
 * plan, on mma.sync and (where the backend has them) on the wgmma kernels, and per layer and
 * pass the sums go there (< 0: not measured; a pass is measured on wgmma only where every node
 * of it ran there). With sched_ms (SG_WG_SCHEDS values; own on wgmma, a backend that can time
 * a node under a schedule), each node on the wgmma kernels is also timed under every schedule of
 * theirs (SG_WG_SCHED_*, the same bits): sched_ms[s] the sum of those nodes' medians under s (< 0:
 * not measured), per layer k the same sums of its charged wgmma nodes in layer_sched[SG_WG_SCHEDS
 * k + s] (< 0: none of its nodes ran there), and each layer is charged its wgmma nodes' medians
 * under the fastest schedule. With forms (n x FORMS; own on mma.sync, a backend that can time
 * a node on another engine), each own node the direct tiles take is also timed with their
 * products on the CUDA cores and on the tensor cores (backend.h: SG_TIME_OWN_TILES_FMA / _TC),
 * and each one the Winograd kernels take as Winograd (SG_TIME_OWN_WINO), the forms form_mask
 * names (bit w: form_time[w]) and no other; per layer k the sums of those nodes' medians go to
 * forms[FORMS k + FORM_*]; -1 where the layer has none, or the form was not timed. */
static int tune_pass(const sg_model_cfg *cfg0, const sg_engine_tune_opts *o,
                     sg_engine_table *layers, int engine, int tc, double *ms, int *ran,
                     double *pass_lib, double *pass_own, double *pass_wg, double *sched_ms,
                     double *layer_sched, double *forms, int form_mask, char *env, int env_cap) {
    sg_engine_table all;
    sg_engine_table_init(&all);
    snprintf(all.model, sizeof all.model, "%s", layers->model);
    snprintf(all.precision, sizeof all.precision, "%s", layers->precision);
    all.batch = layers->batch;
    int rc = SG_OK;
    for (int k = 0; k < layers->n && !rc; k++)
        rc = sg_engine_table_add(&all, layers->e[k].layer, engine, -1, -1) ||
             (tc == SG_TC_WGMMA && sg_engine_table_set_tc(&all, layers->e[k].layer, tc, -1));
    sg_model_cfg cfg = *cfg0;
    cfg.engines = &all;
    sg_backend *be = rc ? NULL : o->make_backend(o->ctx);
    if (!be) return sg_engine_table_free(&all), SG_ERR;
    if (engine == SG_LAYER_CUDNN) be->cudnn_time_reps = o->cudnn_time_reps;
    sg_exec e;
    rc = warm_exec(&cfg, o, be, o->warmup, &e);
    if (!rc) rc = be->sync(be);
    const sg_graph *g = &e.plan.g;
    const int nn = rc ? 0 : g->nn;
    float *node_ms = calloc((size_t)nn * (size_t)o->iters + 1, sizeof(float));
    float *one = calloc((size_t)o->iters + 1, sizeof(float));
    /* each conv node's engine name; the library side's nodes also timed on own (pass_own) */
    char(*names)[160] = calloc((size_t)nn + 1, sizeof *names);
    const int per_pass = pass_lib && pass_own && pass_wg && be->time_node_engine;
    const int per_pass_wg = per_pass && be->conv_wgmma;
    float *own_ms = per_pass ? calloc((size_t)nn * (size_t)o->iters + 1, sizeof(float)) : NULL;
    float *wg_ms = per_pass_wg ? calloc((size_t)nn * (size_t)o->iters + 1, sizeof(float)) : NULL;
    const int per_sched = sched_ms && be->time_node_engine && be->conv_wgmma;
    float *sch =
        per_sched ? calloc((size_t)nn * (size_t)o->iters * SG_WG_SCHEDS + 1, sizeof(float)) : NULL;
    const int per_form = forms && be->time_node_engine;
    /* per iteration and node: its time on the tiles' FMAs, on their tensor cores, as Winograd
     * (form_time's order; -1: not taken, or not timed) */
    float *wi = per_form ? malloc(sizeof(float) * ((size_t)nn * (size_t)o->iters * 3 + 1)) : NULL;
    if (!rc && (!node_ms || !one || !names || (per_pass && !own_ms) || (per_pass_wg && !wg_ms) ||
                (per_sched && !sch) || (per_form && !wi)))
        rc = sg_set_error("out of host memory");
    for (size_t q = 0; wi && q < (size_t)nn * (size_t)o->iters * 3; q++) wi[q] = -1;
    static const int form_time[3] = {SG_TIME_OWN_TILES_FMA, SG_TIME_OWN_TILES_TC, SG_TIME_OWN_WINO};
    if (!rc && !be->time_nodes) rc = sg_set_error("the %s backend cannot time nodes", be->name);
    for (int i = 0; i < nn && !rc; i++)
        if (conv_like(g->n[i].op) && be->node_engine)
            be->node_engine(be, &e.plan, i, names[i], sizeof names[i]);
    for (int it = 0; it < o->iters && !rc; it++) {
        rc = be->time_nodes(be, &e.plan, node_ms + (size_t)it * (size_t)nn);
        for (int i = 0; i < nn && !rc && own_ms; i++)
            if (on_lib(names[i])) {
                rc = be->time_node_engine(be, &e.plan, i, SG_CONV_ENGINE_OWN,
                                          own_ms + (size_t)it * (size_t)nn + i);
                if (!rc && wg_ms)
                    rc = be->time_node_engine(be, &e.plan, i, SG_TIME_OWN_WGMMA,
                                              wg_ms + (size_t)it * (size_t)nn + i);
            }
        for (int i = 0; i < nn && !rc && wi; i++)
            for (int w = 0; w < 3 && !rc && !strcmp(names[i], "own"); w++)
                if (form_mask >> w & 1)
                    rc = be->time_node_engine(be, &e.plan, i, form_time[w],
                                              wi + ((size_t)it * (size_t)nn + i) * 3 + w);
        for (int i = 0; i < nn && !rc && sch; i++)
            for (int sc = 0; sc < SG_WG_SCHEDS && !rc && !strcmp(names[i], "wgmma"); sc++)
                rc = be->time_node_engine(be, &e.plan, i, SG_TIME_WGMMA_SCHED + sc,
                                          sch + ((size_t)it * (size_t)nn + i) * SG_WG_SCHEDS + sc);
        if (!rc) rc = be->sync(be);
    }
    /* the schedules: per node its median under each, summed over the wgmma nodes; the fastest
     * one measured on every one of them */
    double *med = sch ? calloc((size_t)nn * SG_WG_SCHEDS + 1, sizeof(double)) : NULL;
    if (!rc && sch && !med) rc = sg_set_error("out of host memory");
    for (int sc = 0; sc < SG_WG_SCHEDS && sched_ms; sc++) sched_ms[sc] = med && !rc ? 0 : -1;
    for (int i = 0; i < nn && med && !rc; i++)
        for (int sc = 0; sc < SG_WG_SCHEDS && !strcmp(names[i], "wgmma"); sc++) {
            for (int it = 0; it < o->iters; it++)
                one[it] = sch[((size_t)it * (size_t)nn + i) * SG_WG_SCHEDS + sc];
            const double m = median(one, o->iters);
            med[(size_t)i * SG_WG_SCHEDS + sc] = m;
            sched_ms[sc] = m < 0 || sched_ms[sc] < 0 ? -1 : sched_ms[sc] + m;
        }
    const int best = med ? sg_wg_sched_best(sched_ms) : 0;
    for (int k = 0; k < 3 * layers->n && per_pass; k++)
        pass_lib[k] = pass_own[k] = 0, pass_wg[k] = per_pass_wg ? 0 : -1;
    int *pass_seen = per_pass ? calloc(3 * (size_t)layers->n + 1, sizeof(int)) : NULL;
    if (!rc && per_pass && !pass_seen) rc = sg_set_error("out of host memory");
    for (int k = 0; k < layers->n; k++) ms[k] = 0, ran[k] = 1;
    for (int k = 0; k < SG_WG_SCHEDS * layers->n && layer_sched; k++) layer_sched[k] = -1;
    for (int k = 0; k < FORMS * layers->n && forms; k++) forms[k] = -1;
    for (int i = 0; i < nn && !rc; i++) {
        char layer[SG_NAME_MAX];
        if (sg_engine_tune_charge(g, i, layer)) continue;
        const int k = layer_index(layers, layer);
        for (int sc = 0; sc < SG_WG_SCHEDS && med && layer_sched && !strcmp(names[i], "wgmma");
             sc++) {
            double *l = &layer_sched[SG_WG_SCHEDS * k + sc];
            const double m = med[(size_t)i * SG_WG_SCHEDS + sc];
            *l = *l == -2 || m < 0 ? -2 : (*l < 0 ? 0 : *l) + m; /* -2: a node unmeasured */
        }
        /* an own node the tiles took (measured in every direct form timed): its medians to its
         * layer's sums; one the Winograd kernels took too: those and its Winograd median to the
         * Winograd nodes' */
        double wm[3] = {-1, -1, -1};
        for (int w = 0; w < 3 && wi; w++) {
            for (int it = 0; it < o->iters; it++)
                one[it] = wi[((size_t)it * (size_t)nn + i) * 3 + w];
            wm[w] = median(one, o->iters);
        }
        static const int form_of[FORMS] = {0, 1, 0, 1, 2}; /* FORM_* from form_time[] */
        int tiles = wi != NULL;
        for (int w = 0; w < 2; w++)
            if (form_mask >> w & 1) tiles &= wm[w] >= 0;
        for (int f = 0; f < FORMS && tiles; f++) {
            double *x = &forms[FORMS * k + f];
            if (wm[form_of[f]] >= 0 && (f < FORM_FMA_W || wm[2] >= 0))
                *x = (*x < 0 ? 0 : *x) + wm[form_of[f]];
        }
        for (int it = 0; it < o->iters; it++) one[it] = node_ms[(size_t)it * (size_t)nn + i];
        /* a wgmma node: its time under the fastest schedule (measured under every one) */
        ms[k] += med && sched_ms[best] >= 0 && !strcmp(names[i], "wgmma")
                     ? med[(size_t)i * SG_WG_SCHEDS + best]
                     : median(one, o->iters);
        if (sg_op_is_conv(g->n[i].op)) {
            const char *name = names[i];
            const int lib = on_lib(name);
            ran[k] &= engine == SG_LAYER_CUDNN ? lib
                      : tc == SG_TC_WGMMA      ? strcmp(name, "own") != 0
                                               : !lib;
            const int pass = sg_conv_pass_of(g->n[i].op);
            /* the pass's two sides: this node's median on the library side and on own (-1 from
             * time_node_engine: own cannot run it, the pass unmeasured) */
            if (per_pass && lib && pass >= 0) {
                const int kp = 3 * k + pass;
                pass_lib[kp] += median(one, o->iters);
                for (int it = 0; it < o->iters; it++) one[it] = own_ms[(size_t)it * (size_t)nn + i];
                const double own = median(one, o->iters);
                pass_own[kp] = own < 0 || pass_own[kp] < 0 ? -1 : pass_own[kp] + own;
                for (int it = 0; it < o->iters && wg_ms; it++)
                    one[it] = wg_ms[(size_t)it * (size_t)nn + i];
                const double wg = wg_ms ? median(one, o->iters) : -1;
                pass_wg[kp] = wg < 0 || pass_wg[kp] < 0 ? -1 : pass_wg[kp] + wg;
                pass_seen[kp] = 1;
            }
            if (engine == SG_LAYER_CUDNN && !strncmp(name, "cudnn ", 6) && pass >= 0 &&
                !layers->e[k].cudnn[pass][0])
                rc = sg_engine_table_set_cudnn(layers, layer, pass, name + 6);
        }
    }
    for (int k = 0; k < SG_WG_SCHEDS * layers->n && layer_sched; k++)
        if (rc || !med || layer_sched[k] < 0) layer_sched[k] = -1;
    for (int k = 0; k < FORMS * layers->n && forms && rc; k++) forms[k] = -1;
    /* each layer's charged nodes replayed as one graph, where the backend can (a wgmma pass
     * under the schedule chosen above, or the layer's own where the tuning would give it one:
     * so that its own side is compared with cuDNN at its best, as cuDNN's is with its timed
     * engines): the layer's cost inside a replayed step. The eager sums
     * above carry every node's launch gap, which a replay does not have, and the two plans have
     * different numbers of nodes (on the only GPU tuning run so far the per-layer sums did not
     * say what the table's step would replay at). ms[k] becomes the replay's median, which the
     * choice compares; the per-pass sides stay eager (one node each side). */
    if (!rc && be->time_nodes_replay)
        rc = replay_layers(be, &e.plan, layers, o->iters,
                           med && layer_sched && be->wg_sched ? best : -1, layer_sched,
                           o->knob_min_gain, ms);
    for (int k = 0; k < 3 * layers->n && pass_lib && pass_own && pass_wg; k++)
        if (!per_pass || rc || !pass_seen[k]) pass_lib[k] = pass_own[k] = pass_wg[k] = -1;
    if (!rc && env && be->describe) be->describe(be, env, env_cap);
    free(node_ms);
    free(one);
    free(names);
    free(own_ms);
    free(wg_ms);
    free(sch);
    free(wi);
    free(med);
    free(pass_seen);
    sg_exec_free(&e);
    sg_engine_table_free(&all);
    return rc;
}

static void env_field(json_t *env, const char *key, char *dst, size_t cap) {
    json_t *v = json_object_get(env, key);
    if (json_is_string(v))
        snprintf(dst, cap, "%s", json_string_value(v));
    else if (json_is_integer(v))
        snprintf(dst, cap, "%lld", (long long)json_integer_value(v));
}

/* Layer k's fp32 forms (f[FORMS]: its tune_pass sums): the tiles' product form into *tc and
 * Winograd into *wino, from the base (tc0: the form the tuning's own side ran with, direct): the
 * fastest of those allowed (tc_free: either product form; wino_free: Winograd) where it saves
 * more than `gain` of the passes it changes (every tile pass where the product form changes, else
 * the Winograd passes), else the base. Returns what the choice saves on the base, in ms. */
static double form_choice(const double *f, int tc0, int tc_free, int wino_free, double gain,
                          int *tc, int *wino) {
    *tc = tc0, *wino = 0;
    const double base = f[tc0 ? FORM_TC : FORM_FMA];
    if (base < 0 || (tc_free && f[tc0 ? FORM_FMA : FORM_TC] < 0)) return 0;
    const int wino_ok = wino_free && f[FORM_WINO] >= 0;
    double best = 0;
    for (int t = 0; t < 2; t++)
        for (int w = 0; w < 1 + wino_ok; w++) {
            if (t != tc0 && !tc_free) continue;
            const double all = f[t ? FORM_TC : FORM_FMA], on_w = f[t ? FORM_TC_W : FORM_FMA_W];
            const double cost = all - (w ? on_w - f[FORM_WINO] : 0);
            const double changed = t != tc0 ? base : f[tc0 ? FORM_TC_W : FORM_FMA_W];
            const double saved = base - cost;
            if (saved > gain * changed && saved > best) best = saved, *tc = t, *wino = w;
        }
    return best;
}

/* the better own side of pass kp (pass_own on mma.sync, pass_wg on wgmma, as tune_pass left
 * them): its time (< 0: neither measured), and its generation into *tc */
static double pass_best_own(const double *pown, const double *pwg, int kp, int *tc) {
    const double w = pown[kp], x = pwg[kp];
    *tc = x >= 0 && (w < 0 || x < w) ? SG_TC_WGMMA : SG_TC_MMA;
    return *tc == SG_TC_WGMMA ? x : w;
}

/* what layer k's passes on own save on cuDNN's side */
static double pass_saving(const double *plib, const double *pown, const double *pwg, int k) {
    double s = 0;
    for (int p = 0; p < 3; p++) {
        int tc;
        const double l = plib[3 * k + p], w = pass_best_own(pown, pwg, 3 * k + p, &tc);
        if (l >= 0 && w >= 0 && w < l) s += l - w;
    }
    return s;
}

/* The last pass (sg_engine_tune_opts.gemm_reps): the plan of table t, warmed up (at least one
 * step: every GEMM pinned), then the backend's tune_gemms into t. Nothing where the backend
 * has no GEMM library to choose in. */
static int tune_gemms(const sg_model_cfg *cfg0, const sg_engine_tune_opts *o, sg_engine_table *t) {
    sg_model_cfg cfg = *cfg0;
    cfg.engines = t;
    sg_backend *be = o->make_backend(o->ctx);
    if (!be) return SG_ERR;
    if (!be->tune_gemms) return be->destroy(be), SG_OK;
    if (o->progress)
        fprintf(o->progress, "engine tuning: the chosen plan's GEMMs, each on every candidate "
                             "algorithm\n");
    sg_exec e;
    int rc = warm_exec(&cfg, o, be, o->warmup > 1 ? o->warmup : 1, &e);
    if (!rc) rc = be->sync(be);
    int timed = 0;
    if (!rc) rc = be->tune_gemms(be, &e.plan, o->gemm_reps, o->gemm_min_gain, t, &timed);
    int picked = 0;
    double first = 0, chosen = 0;
    for (int i = 0; i < t->ngemm && !rc; i++) {
        picked += t->gemm[i].ms < t->gemm[i].first_ms;
        first += t->gemm[i].first_ms, chosen += t->gemm[i].ms;
    }
    if (!rc && o->progress)
        fprintf(o->progress,
                "engine tuning: %d GEMMs timed, %d on another algorithm than the heuristic's "
                "first (their sum %.3f ms against %.3f)\n",
                timed, picked, chosen, first);
    sg_exec_free(&e);
    return rc;
}

/* The attention engine (sg_engine_table.attn): the plan of table t, warmed up, each attention
 * node run o->iters times on each engine (backend.h: SG_TIME_ATTN_GEMM / _FUSED); fused where the
 * sum of the medians of the nodes it takes is o->knob_min_gain faster than theirs on gemm. The
 * environment's SG_ATTN overrides a table, so it is left alone where set, as is a plan without
 * attention nodes or a backend that cannot time them. */
static int tune_attention(const sg_model_cfg *cfg0, const sg_engine_tune_opts *o,
                          sg_engine_table *t) {
    const char *env = getenv("SG_ATTN");
    if (env && *env) return SG_OK;
    sg_model_cfg cfg = *cfg0;
    cfg.engines = t;
    sg_backend *be = o->make_backend(o->ctx);
    if (!be) return SG_ERR;
    if (!be->time_node_engine) return be->destroy(be), SG_OK;
    sg_exec e;
    int rc = warm_exec(&cfg, o, be, o->warmup > 1 ? o->warmup : 1, &e);
    if (!rc) rc = be->sync(be);
    float *r[2] = {malloc(sizeof(float) * ((size_t)o->iters + 1)),
                   malloc(sizeof(float) * ((size_t)o->iters + 1))};
    if (!rc && (!r[0] || !r[1])) rc = sg_set_error("out of host memory");
    double sum[2] = {0, 0};
    int nodes = 0;
    for (int i = 0; !rc && i < e.plan.g.nn; i++) {
        const int op = e.plan.g.n[i].op;
        if (!sg_op_is_attention((sg_op)op)) continue;
        for (int it = 0; it < o->iters && !rc; it++)
            for (int f = 0; f < 2 && !rc; f++)
                rc = be->time_node_engine(be, &e.plan, i,
                                          f ? SG_TIME_ATTN_FUSED : SG_TIME_ATTN_GEMM, &r[f][it]);
        if (rc) break;
        const double g = median(r[0], o->iters), fu = median(r[1], o->iters);
        if (g < 0 || fu < 0) continue; /* a shape the fused kernels do not take */
        sum[0] += g, sum[1] += fu, nodes++;
    }
    if (!rc && nodes) {
        const int fused = sum[1] < (1.0 - o->knob_min_gain) * sum[0];
        rc = sg_engine_table_set_attn(t, fused ? SG_ATTN_FUSED : SG_ATTN_GEMM, sum[0], sum[1]);
        if (!rc && o->progress)
            fprintf(o->progress,
                    "engine tuning: %d attention nodes: gemm %.3f ms, fused %.3f ms: %s\n", nodes,
                    sum[0], sum[1], fused ? "fused" : "gemm");
    }
    free(r[0]), free(r[1]);
    sg_exec_free(&e);
    return rc;
}

/* The replayed step of cfg on a fresh backend: warmed up (at least two steps: the graph
 * captured), then the median of o->knob_steps timed replays into *ms */
static int time_step(const sg_model_cfg *cfg, const sg_engine_tune_opts *o, double *ms) {
    sg_backend *be = o->make_backend(o->ctx);
    if (!be) return SG_ERR;
    sg_exec e;
    int rc = warm_exec(cfg, o, be, o->warmup > 2 ? o->warmup : 2, &e);
    float *r = malloc(sizeof(float) * ((size_t)o->knob_steps + 1));
    if (!rc && !r) rc = sg_set_error("out of host memory");
    if (!rc && !be->time_steps) rc = sg_set_error("the %s backend cannot time steps", be->name);
    if (!rc) rc = be->time_steps(be, &e.plan, o->knob_steps, r);
    if (!rc) *ms = median(r, o->knob_steps);
    free(r);
    sg_exec_free(&e);
    return rc;
}

/* Does entry x put any conv node on the wgmma kernels (own on them, or a pass)? */
static int layer_runs_wgmma(const sg_engine_entry *x) {
    if (x->engine == SG_LAYER_OWN && x->tc == SG_TC_WGMMA) return 1;
    for (int pass = 0; pass < 3; pass++)
        if (x->pass_own[pass] && x->pass_tc[pass] == SG_TC_WGMMA) return 1;
    return 0;
}

/* ... does table t, on any layer? */
static int table_runs_wgmma(const sg_engine_table *t) {
    for (int k = 0; k < t->n; k++)
        if (layer_runs_wgmma(&t->e[k])) return 1;
    return 0;
}

/* Each layer's own wgmma schedule (sg_engine_entry.wg_sched): layer_sched_pick of its wgmma
 * nodes' sums (wg_sched_ms) against the table's, where the layer runs a node there; -1 (the
 * table's) otherwise. The count of layers given one. */
static int pick_layer_scheds(sg_engine_table *t, double gain) {
    int picked = 0;
    for (int k = 0; k < t->n; k++) {
        sg_engine_entry *x = &t->e[k];
        x->wg_sched =
            layer_runs_wgmma(x) ? layer_sched_pick(x->wg_sched_ms, t->wg_sched, gain) : -1;
        picked += x->wg_sched >= 0;
    }
    return picked;
}

/* The `picked` layers' own wgmma schedules (pick_layer_scheds) tried on the whole step (cfg: the
 * table t, *best its step so far): all at once, kept where that step is knob_min_gain faster;
 * where not, and the layers picked more than one schedule, each group of the layers that picked
 * one schedule alone, in schedule order on top of the groups kept before it, by the same rule
 * (a persistent grid may pay on the large layers while the fill tile costs on the small ones, and
 * all at once shows only their sum). A layer of no group kept goes back to the table's schedule.
 * t->wg_layers_step_ms: the step with the layers kept on theirs, or all at once where none is;
 * *best the step now. */
static int try_layer_scheds(const sg_model_cfg *cfg, const sg_engine_tune_opts *o,
                            sg_engine_table *t, int picked, double *best) {
    int *pick = malloc(sizeof(int) * ((size_t)t->n + 1));
    if (!pick) return sg_set_error("out of host memory");
    int seen = 0, groups = 0; /* the schedules the layers picked, a bitmask; how many */
    for (int q = 0; q < t->n; q++) {
        pick[q] = t->e[q].wg_sched;
        if (pick[q] >= 0 && !(seen & 1 << pick[q])) seen |= 1 << pick[q], groups++;
    }
    double ms = -1;
    int rc = time_step(cfg, o, &ms);
    t->wg_layers_step_ms = rc ? -1 : ms;
    const int keep = !rc && ms < (1.0 - o->knob_min_gain) * *best;
    if (!rc && o->progress)
        fprintf(o->progress, "engine tuning: %d layer(s) on their own wgmma schedule: %.3f ms%s\n",
                picked, ms, keep ? " (kept)" : "");
    if (keep) *best = ms;
    for (int q = 0; q < t->n && !keep; q++) t->e[q].wg_sched = -1;
    for (int s = 0; s < SG_WG_SCHEDS && !keep && groups > 1 && !rc; s++) {
        if (!(seen & 1 << s)) continue;
        int n = 0;
        for (int q = 0; q < t->n; q++)
            if (pick[q] == s) t->e[q].wg_sched = s, n++;
        ms = -1;
        rc = time_step(cfg, o, &ms);
        const int kept = !rc && ms < (1.0 - o->knob_min_gain) * *best;
        if (!rc && o->progress)
            fprintf(o->progress, "engine tuning: %d layer(s) on wgmma schedule %s: %.3f ms%s\n", n,
                    sg_wg_sched_text(s, 1), ms, kept ? " (kept)" : "");
        if (kept) *best = ms, t->wg_layers_step_ms = ms;
        for (int q = 0; q < t->n && !kept; q++)
            if (pick[q] == s) t->e[q].wg_sched = -1;
    }
    free(pick);
    return rc;
}

/* A directions knob's values besides its default def, in trial order: both, forward, backward,
 * neither. Into out (3); their count. */
static int stats_trials(int def, int *out) {
    static const int order[4] = {SG_KNOB_STATS_BOTH, SG_KNOB_STATS_FWD, SG_KNOB_STATS_BWD,
                                 SG_KNOB_STATS_NONE};
    int n = 0;
    for (int k = 0; k < 4; k++)
        if (order[k] != def) out[n++] = order[k];
    return n;
}

/* The last pass (sg_engine_tune_opts.knob_steps): t's step knobs, one at a time in a fixed
 * order, each value timed on the whole replayed step from the best so far; a knob the
 * environment sets is left alone (the environment overrides a table). */
static int tune_knobs(const sg_model_cfg *cfg0, const sg_engine_tune_opts *o, sg_engine_table *t) {
    sg_backend *probe = o->make_backend(o->ctx);
    if (!probe) return SG_ERR;
    const int applies = probe->step_knobs;
    probe->destroy(probe);
    if (!applies) return SG_OK;
    sg_model_cfg cfg = *cfg0;
    cfg.engines = t;
    sg_step_knobs *k = &t->knobs;
    k->pdl = k->tc_halo = k->dgrad_stats = k->fuse_stats = k->norm_onepass = SG_KNOB_UNSET;
    /* the layers' own wgmma schedules, if any, are tried last (below): the trials before run
     * every wgmma node under the table's */
    const char *pe = getenv("SG_WG_PERSIST"), *fe = getenv("SG_WG_FILL");
    const int sched_trials = table_runs_wgmma(t) && !(pe && *pe) && !(fe && *fe);
    for (int q = 0; q < t->n && sched_trials; q++) t->e[q].wg_sched = -1;
    double best = -1;
    int rc = time_step(&cfg, o, &best);
    k->base_ms = rc ? -1 : best;
    if (!rc && o->progress)
        fprintf(o->progress,
                "engine tuning: the step knobs (%d replays a trial): defaults %.3f ms\n",
                o->knob_steps, best);
    /* the knobs, each with the values it may take besides the default (the directions knobs':
     * planner/engine_table.h's defaults) */
    struct {
        const char *env, *name;
        int values[3], n;
    } knobs[5] = {{"SG_PDL", "pdl", {1}, 1},
                  {"SG_TC_HALO", "tc_halo", {SG_KNOB_HALO_ALL, SG_KNOB_HALO_NONE}, 2},
                  {"SG_TC_DGRAD_STATS", "dgrad_stats", {1}, 1},
                  {"SG_FUSE_STATS", "fuse_stats", {0}, 0},
                  {"SG_NORM_ONEPASS", "norm_onepass", {0}, 0}};
    knobs[3].n = stats_trials(SG_KNOB_FUSE_STATS_DEFAULT, knobs[3].values);
    knobs[4].n = stats_trials(SG_KNOB_NORM_ONEPASS_DEFAULT, knobs[4].values);
    for (int q = 0; q < 5 && !rc; q++) {
        const char *env = getenv(knobs[q].env);
        if (env && *env) continue;
        int *field = q == 0   ? &k->pdl
                     : q == 1 ? &k->tc_halo
                     : q == 2 ? &k->dgrad_stats
                     : q == 3 ? &k->fuse_stats
                              : &k->norm_onepass;
        for (int v = 0; v < knobs[q].n && !rc; v++) {
            const int before = *field;
            double ms = -1;
            *field = knobs[q].values[v];
            rc = time_step(&cfg, o, &ms);
            const int keep = !rc && ms < (1.0 - o->knob_min_gain) * best;
            if (!rc && o->progress)
                fprintf(o->progress, "engine tuning: %s %s: %.3f ms%s\n", knobs[q].name,
                        q == 1   ? sg_knob_halo_name(*field)
                        : q >= 3 ? sg_knob_stats_name(*field)
                        : *field ? "on"
                                 : "off",
                        ms, keep ? " (kept)" : "");
            if (keep)
                best = ms;
            else
                *field = before;
        }
    }
    /* the wgmma schedule, chosen from the wgmma nodes' sums in the per-layer pass, as one more
     * knob on the whole step where the table runs any node on wgmma and the environment sets
     * neither of its variables: the others in order, each kept where faster by the same margin */
    if (!rc && sched_trials) {
        t->wg_sched_step_ms[t->wg_sched] = best;
        const int first = t->wg_sched;
        for (int s = 0; s < SG_WG_SCHEDS && !rc; s++) {
            if (s == first) continue;
            const int before = t->wg_sched;
            double ms = -1;
            t->wg_sched = s;
            rc = time_step(&cfg, o, &ms);
            t->wg_sched_step_ms[s] = rc ? -1 : ms;
            const int keep = !rc && ms < (1.0 - o->knob_min_gain) * best;
            if (!rc && o->progress)
                fprintf(o->progress, "engine tuning: wgmma schedule %s: %.3f ms%s\n",
                        sg_wg_sched_text(s, 1), ms, keep ? " (kept)" : "");
            if (keep)
                best = ms;
            else
                t->wg_sched = before;
        }
    }
    /* then the layers faster on their own schedule than on the table's (per node) */
    const int picked = !rc && sched_trials ? pick_layer_scheds(t, o->knob_min_gain) : 0;
    if (picked) rc = try_layer_scheds(&cfg, o, t, picked, &best);
    k->step_ms = rc ? -1 : best;
    return rc;
}

int sg_engine_tune(const sg_model_cfg *cfg0, const sg_engine_tune_opts *o, sg_engine_table *t) {
    sg_engine_table_init(t);
    if (o->iters < 1 || o->warmup < 0) return sg_set_error("engine tuning: iters must be >= 1");
    sg_model_cfg cfg = *cfg0;
    cfg.engines = NULL;
    /* own means fused: the table is for plans that fuse where it says own (sg_model_fuse) */
    if (cfg.fuse == SG_FUSE_AUTO && cfg.act_dt == DT_BF16) cfg.fuse = 1;
    snprintf(t->model, sizeof t->model, "%s", cfg.name);
    snprintf(t->precision, sizeof t->precision, "%s", cfg.act_dt == DT_BF16 ? "bf16" : "fp32");
    t->batch = sg_model_micro_batch(&cfg);
    /* the layers: the forward conv nodes of the unfused plan (every layer a plain conv, in
     * forward order), so that the table also fits a --fuse 0 run; then the layer pairs the
     * fused plan folds into one conv2d_sc (conv2 and its block's shortcut), chosen together */
    sg_model_cfg plain = cfg;
    plain.fuse = 0;
    sg_plan p;
    int rc = sg_plan_build(&p, &plain, 1);
    for (int i = 0; !rc && i < p.g.n_forward; i++) {
        char layer[SG_NAME_MAX];
        if (sg_conv_layer_of(&p.g, i, layer) >= 0)
            rc = sg_engine_table_add(t, layer, SG_LAYER_OWN, -1, -1);
    }
    sg_plan_free(&p);
    const int n = t->n;
    int *pair = calloc((size_t)n + 1, sizeof(int)); /* a folded layer's partner, or -1 */
    if (!rc && !pair) rc = sg_set_error("out of host memory");
    for (int k = 0; !rc && k < n; k++) pair[k] = -1;
    if (!rc) {
        rc = sg_plan_build(&p, &cfg, 1);
        for (int i = 0; !rc && i < p.g.n_forward; i++) {
            char names[2][SG_NAME_MAX];
            if (sg_conv_layers_computed(&p.g, i, names) != 2) continue;
            const int a = layer_index(t, names[0]), b = layer_index(t, names[1]);
            pair[a] = b, pair[b] = a;
        }
        sg_plan_free(&p);
    }
    double *own = calloc((size_t)n + 1, sizeof(double)),
           *dnn = calloc((size_t)n + 1, sizeof(double));
    double *wg = calloc((size_t)n + 1, sizeof(double));
    double *plib = calloc(3 * (size_t)n + 1, sizeof(double)),
           *pown = calloc(3 * (size_t)n + 1, sizeof(double)),
           *pwg = calloc(3 * (size_t)n + 1, sizeof(double));
    double *lsched = calloc(SG_WG_SCHEDS * (size_t)n + 1, sizeof(double));
    /* the fp32 forms per layer (tune_pass): the tiles' products on the CUDA cores and on the
     * tensor cores, where the environment leaves SG_CONV_F32_TC unset (else only the form it
     * sets, Winograd's direct side), and the 3x3 passes as Winograd, where it leaves SG_CONV_WINO
     * unset (each overrides a table); tc0: the product form the own side runs with */
    const char *wino_env = getenv("SG_CONV_WINO"), *tc_env = getenv("SG_CONV_F32_TC");
    const int f32 = cfg.act_dt == DT_F32;
    const int wino_tune = f32 && !(wino_env && *wino_env), tc_tune = f32 && !(tc_env && *tc_env);
    const int tc0 = tc_env && !strcmp(tc_env, "1");
    const int form_mask = (tc_tune ? 3 : 1 << tc0) | (wino_tune ? 4 : 0);
    double *wsum = calloc(FORMS * (size_t)n + 1, sizeof(double));
    double *form_saved = calloc((size_t)n + 1, sizeof(double));
    int *form_tc = calloc((size_t)n + 1, sizeof(int)),
        *form_wino = calloc((size_t)n + 1, sizeof(int));
    int *ran_own = calloc((size_t)n + 1, sizeof(int)),
        *ran_dnn = calloc((size_t)n + 1, sizeof(int)), *ran_wg = calloc((size_t)n + 1, sizeof(int));
    char env[2048] = "";
    if (!rc && (!own || !dnn || !wg || !plib || !pown || !pwg || !lsched || !wsum || !form_saved ||
                !form_tc || !form_wino || !ran_own || !ran_dnn || !ran_wg))
        rc = sg_set_error("out of host memory");
    if (!rc && o->progress)
        fprintf(o->progress, "engine tuning: %d conv layers, every layer on own (fused)\n", n);
    if (!rc)
        rc = tune_pass(&cfg, o, t, SG_LAYER_OWN, SG_TC_MMA, own, ran_own, NULL, NULL, NULL, NULL,
                       NULL, wino_tune || tc_tune ? wsum : NULL, form_mask, NULL, 0);
    for (int k = 0; k < FORMS * n && !wino_tune && !tc_tune; k++) wsum[k] = -1;
    /* each layer's own side in its fastest fp32 forms (form_choice; the per-pass rule of cuDNN's
     * side): its own time less what they save */
    int tc_layers = 0, wino_layers = 0;
    double forms_fma = 0, forms_chosen = 0;
    for (int k = 0; k < n && !rc; k++) {
        const double *f = &wsum[FORMS * k];
        form_saved[k] =
            form_choice(f, tc0, tc_tune, wino_tune, o->knob_min_gain, &form_tc[k], &form_wino[k]);
        if (f[tc0 ? FORM_TC : FORM_FMA] < 0) continue;
        forms_fma += f[tc0 ? FORM_TC : FORM_FMA],
            forms_chosen += f[tc0 ? FORM_TC : FORM_FMA] - form_saved[k];
        tc_layers += form_tc[k] != tc0, wino_layers += form_wino[k];
    }
    if (!rc && o->progress && forms_fma > 0)
        fprintf(o->progress,
                "engine tuning: the fp32 tiles' passes: %d layer(s) faster with their products on "
                "the %s cores, %d as Winograd F(2x2, 3x3) (%.3f ms so, %.3f as they ran)\n",
                tc_layers, tc0 ? "CUDA" : "tensor", wino_layers, forms_chosen, forms_fma);
    /* the own kernels' second generation, where the backend has it (bf16 on a Hopper GPU) */
    int wgmma = 0;
    if (!rc && cfg.act_dt == DT_BF16) {
        sg_backend *be = o->make_backend(o->ctx);
        wgmma = be && be->conv_wgmma;
        if (be) be->destroy(be);
    }
    if (!rc && wgmma && o->progress)
        fprintf(o->progress, "engine tuning: every layer on own (fused), on the wgmma kernels\n");
    if (!rc && wgmma)
        rc = tune_pass(&cfg, o, t, SG_LAYER_OWN, SG_TC_WGMMA, wg, ran_wg, NULL, NULL, NULL,
                       t->wg_sched_ms, lsched, NULL, 0, NULL, 0);
    /* the schedule for the whole step: the fastest measured on every wgmma node */
    if (!rc && wgmma) t->wg_sched = sg_wg_sched_best(t->wg_sched_ms);
    if (!rc && wgmma && o->progress && t->wg_sched_ms[0] > 0)
        fprintf(o->progress,
                "engine tuning: the wgmma nodes' schedule: %s (their ms a step: plain %.3f, "
                "persistent %.3f, fill %.3f, both %.3f)\n",
                sg_wg_sched_text(t->wg_sched, 0), t->wg_sched_ms[0], t->wg_sched_ms[1],
                t->wg_sched_ms[2], t->wg_sched_ms[3]);
    if (!rc && o->progress)
        fprintf(o->progress, "engine tuning: every layer on cudnn (nothing fused into a conv)\n");
    if (!rc)
        rc = tune_pass(&cfg, o, t, SG_LAYER_CUDNN, SG_TC_MMA, dnn, ran_dnn, plib, pown, pwg, NULL,
                       NULL, NULL, 0, env, sizeof env);
    json_t *envj = json_loads(env, 0, NULL);
    env_field(envj, "backend", t->backend, sizeof t->backend);
    env_field(envj, "gpu", t->device, sizeof t->device);
    env_field(envj, "driver", t->driver, sizeof t->driver);
    env_field(envj, "cudnn", t->cudnn, sizeof t->cudnn);
    json_decref(envj);
    if (!t->device[0]) snprintf(t->device, sizeof t->device, "%s", t->backend);
    for (int k = 0; k < n && !rc; k++) {
        sg_engine_entry *x = &t->e[k];
        x->own_ms = own[k];
        /* cuDNN's time counts only where every conv node of the layer ran on it */
        x->cudnn_ms = ran_dnn[k] ? dnn[k] : -1;
        /* a folded pair is one choice: the fused conv2d_sc (charged to conv2, its first layer;
         * the shortcut's own_ms is 0) against both layers on cuDNN; on own, the generation of
         * the pair's nodes, the fold's included (the CUDA backend's prepare_own_only) */
        const int q = pair[k];
        const double mma_ms =
            own[k] + (q >= 0 ? own[q] : 0) - form_saved[k] - (q >= 0 ? form_saved[q] : 0);
        const int wg_ran = wgmma && ran_wg[k] && (q < 0 || ran_wg[q]);
        const double wg_ms = wg_ran ? wg[k] + (q >= 0 ? wg[q] : 0) : -1;
        const int tc = wg_ms >= 0 && wg_ms < mma_ms ? SG_TC_WGMMA : SG_TC_MMA;
        const double own_ms = tc == SG_TC_WGMMA ? wg_ms : mma_ms;
        x->wgmma_ms = wg_ran ? wg[k] : -1;
        /* cuDNN's side with each of its passes where it was faster: a pass whose nodes ran faster
         * on own in that plan (the layer's input stored) runs there (pass_own) */
        const double dnn_ms = !ran_dnn[k] || (q >= 0 && !ran_dnn[q])
                                  ? -1
                                  : dnn[k] + (q >= 0 ? dnn[q] : 0) -
                                        pass_saving(plib, pown, pwg, k) -
                                        (q >= 0 ? pass_saving(plib, pown, pwg, q) : 0);
        x->engine = dnn_ms >= 0 && dnn_ms < own_ms ? SG_LAYER_CUDNN : SG_LAYER_OWN;
        /* the cuDNN engines are kept where the layer goes there */
        if (x->engine != SG_LAYER_CUDNN) memset(x->cudnn, 0, sizeof x->cudnn);
        /* every layer's pass times (a record), the choice where it is cudnn: the pass on own
         * where its better own side (mma.sync or wgmma: pass_tc) beat the library; pass_own_ms
         * that side's time, pass_wgmma_ms the wgmma time */
        for (int pass = 0; pass < 3; pass++) {
            int ptc;
            const double l = plib[3 * k + pass], w = pass_best_own(pown, pwg, 3 * k + pass, &ptc);
            x->pass_lib_ms[pass] = l, x->pass_own_ms[pass] = w;
            x->pass_wgmma_ms[pass] = pwg[3 * k + pass];
            x->pass_own[pass] = x->engine == SG_LAYER_CUDNN && l >= 0 && w >= 0 && w < l;
            x->pass_tc[pass] = x->pass_own[pass] ? (unsigned char)ptc : SG_TC_MMA;
            if (x->pass_own[pass]) x->cudnn[pass][0] = 0; /* no cuDNN engine to ask for */
        }
        x->tc = x->engine == SG_LAYER_OWN ? tc : SG_TC_MMA;
        /* the fp32 forms where the layer is own (on mma.sync: fp32 has no wgmma side), each
         * measured where tuned: the tiles' both ways; Winograd's passes in the chosen product form
         * and as Winograd */
        const double *f = &wsum[FORMS * k];
        const int own_mma = x->engine == SG_LAYER_OWN && tc == SG_TC_MMA;
        x->f32tc = own_mma && tc_tune && form_tc[k];
        x->f32tc_ms[0] = tc_tune ? f[FORM_FMA] : -1, x->f32tc_ms[1] = tc_tune ? f[FORM_TC] : -1;
        x->wino = own_mma && form_wino[k];
        const int wino_ms = wino_tune && f[FORM_WINO] >= 0;
        x->wino_ms[0] = wino_ms ? f[form_tc[k] ? FORM_TC_W : FORM_FMA_W] : -1;
        x->wino_ms[1] = wino_ms ? f[FORM_WINO] : -1;
        for (int sc = 0; sc < SG_WG_SCHEDS && wgmma; sc++)
            x->wg_sched_ms[sc] = lsched[SG_WG_SCHEDS * k + sc];
    }
    /* the layers' own wgmma schedules against the table's per-node choice (the knob pass tries
     * them on the whole step) */
    const int picked = !rc && wgmma ? pick_layer_scheds(t, o->knob_min_gain) : 0;
    if (picked && o->progress)
        fprintf(o->progress,
                "engine tuning: %d layer(s) faster on their own wgmma schedule than on the "
                "table's\n",
                picked);
    if (!rc) sg_engine_table_hash(t);
    if (!rc && o->chosen) rc = o->chosen(t, o->ctx);
    /* the attention engine, before the GEMMs (its GEMMs are the gemm engine's) */
    if (!rc) rc = tune_attention(&cfg, o, t);
    /* the GEMMs of the chosen table's plan, each on every candidate algorithm */
    if (!rc && o->gemm_reps > 0) rc = tune_gemms(&cfg, o, t);
    /* the step's knobs that leave the bits alone, on the whole replayed step */
    if (!rc && o->knob_steps > 0) rc = tune_knobs(&cfg, o, t);
    if (!rc) sg_engine_table_hash(t);
    free(own), free(dnn), free(wg), free(plib), free(pown), free(pwg), free(ran_own), free(ran_dnn),
        free(ran_wg), free(pair), free(lsched), free(wsum);
    free(form_saved), free(form_tc), free(form_wino);
    return rc;
}
