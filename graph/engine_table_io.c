/* engine_table_io.c — the engine table's JSON form: parse, serialise, write, compare
 * (graph/engine_table_io.h). */
#include "graph/engine_table_io.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SG_ENGINE_TABLE_FORMAT "stepgraph_engine_table"

static int str_field(json_t *o, const char *key, char *dst, size_t cap, int required,
                     const char *what) {
    json_t *v = json_object_get(o, key);
    if (!v && !required) return dst[0] = 0, SG_OK;
    if (!json_is_string(v) || strlen(json_string_value(v)) >= cap)
        return sg_set_error("%s: engine table: \"%s\" must be a string of at most %d characters",
                            what, key, (int)cap - 1);
    snprintf(dst, cap, "%s", json_string_value(v));
    return SG_OK;
}

/* a measured ms: a non-negative number, or null / absent for "not measured" (-1) */
static int ms_field(json_t *o, const char *key, double *out, const char *layer, const char *what) {
    json_t *v = json_object_get(o, key);
    *out = -1;
    if (!v || json_is_null(v)) return SG_OK;
    if (!json_is_number(v) || !isfinite(json_number_value(v)) || json_number_value(v) < 0)
        return sg_set_error("%s: engine table: layer %s: \"%s\" must be a number >= 0 or null",
                            what, layer, key);
    *out = json_number_value(v);
    return SG_OK;
}

/* the JSON keys of an entry's per-pass values, by pass (SG_CONV_PASS_*) */
static const char *const pass_keys[3] = {"fwd", "bwd_data", "bwd_filter"};

/* the pass a key names, 3 for none */
static int pass_of_key(const char *key) {
    int pass = 0;
    while (pass < 3 && strcmp(pass_keys[pass], key)) pass++;
    return pass;
}

/* a layer's optional "cudnn_engines": {"fwd": name, "bwd_data": name, "bwd_filter": name} */
static int cudnn_names(json_t *l, const char *name, sg_engine_table *t, const char *what) {
    json_t *o = json_object_get(l, "cudnn_engines");
    if (!o || json_is_null(o)) return SG_OK;
    if (!json_is_object(o))
        return sg_set_error("%s: engine table: layer %s: \"cudnn_engines\" must be an object", what,
                            name);
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v) {
        const int pass = pass_of_key(key);
        if (pass == 3 || !json_is_string(v))
            return sg_set_error("%s: engine table: layer %s: \"cudnn_engines\" takes string "
                                "values for fwd, bwd_data and bwd_filter (\"%s\")",
                                what, name, key);
        if (sg_engine_table_set_cudnn(t, name, pass, json_string_value(v))) {
            return sg_set_error("%s: %s", what, sg_last_error());
        }
    }
    return SG_OK;
}

/* a layer's optional "passes": {"fwd": {"engine": "own"|"cudnn", "own_ms": x, "lib_ms": y,
 * "tc": "mma"|"wgmma", "wgmma_ms": z}, "bwd_data": ..., "bwd_filter": ...}; "engine" absent: the
 * layer's side (a record of the times alone, as an own layer's); "tc" absent: mma (older tables),
 * wgmma only for a pass on own */
static int passes_field(json_t *l, const char *name, sg_engine_table *t, const char *what) {
    json_t *o = json_object_get(l, "passes");
    if (!o || json_is_null(o)) return SG_OK;
    if (!json_is_object(o))
        return sg_set_error("%s: engine table: layer %s: \"passes\" must be an object", what, name);
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v) {
        const int pass = pass_of_key(key);
        json_t *ej = json_object_get(v, "engine");
        const int eng = ej ? sg_layer_engine_parse(json_string_value(ej)) : SG_LAYER_CUDNN;
        double own, lib;
        if (pass == 3 || !json_is_object(v) || !eng)
            return sg_set_error("%s: engine table: layer %s: \"passes\" takes fwd, bwd_data and "
                                "bwd_filter, each {\"engine\": \"own\" or \"cudnn\", "
                                "\"own_ms\", \"lib_ms\"} (\"%s\")",
                                what, name, key);
        json_t *tj = json_object_get(v, "tc");
        const int tc = tj ? sg_tc_parse(json_string_value(tj)) : SG_TC_MMA;
        double wg;
        if (tc < 0)
            return sg_set_error("%s: engine table: layer %s: pass %s: \"tc\" must be \"mma\" or "
                                "\"wgmma\"",
                                what, name, key);
        if (ms_field(v, "own_ms", &own, name, what) || ms_field(v, "lib_ms", &lib, name, what) ||
            ms_field(v, "wgmma_ms", &wg, name, what))
            return SG_ERR;
        if (sg_engine_table_set_pass(t, name, pass, eng == SG_LAYER_OWN, own, lib) ||
            sg_engine_table_set_pass_tc(t, name, pass, tc, wg)) {
            return sg_set_error("%s: %s", what, sg_last_error());
        }
    }
    return SG_OK;
}

/* a layer's optional "tc": "mma" | "wgmma" (absent: mma) and "wgmma_ms" */
static int tc_field(json_t *l, const char *name, sg_engine_table *t, const char *what) {
    json_t *v = json_object_get(l, "tc");
    const int tc = v ? sg_tc_parse(json_string_value(v)) : SG_TC_MMA;
    double ms;
    if (tc < 0)
        return sg_set_error("%s: engine table: layer %s: \"tc\" must be \"mma\" or \"wgmma\"", what,
                            name);
    if (ms_field(l, "wgmma_ms", &ms, name, what)) return SG_ERR;
    if (sg_engine_table_set_tc(t, name, tc, ms)) {
        return sg_set_error("%s: %s", what, sg_last_error());
    }
    return SG_OK;
}

/* a layer's optional fp32 form choice: "wino": true|false (absent: false) with "direct_ms" and
 * "wino_ms" (sg_engine_entry.wino), or "f32tc" with "fma_ms" and "f32tc_ms" (.f32tc), given to
 * its setter (sg_engine_table_set_wino / _set_f32tc) */
static int form_field(json_t *l, const char *name, sg_engine_table *t, const char *what,
                      const char *form, const char *ms0_key, const char *ms1_key,
                      int (*set)(sg_engine_table *, const char *, int, double, double)) {
    json_t *v = json_object_get(l, form);
    double ms0, ms1;
    if (v && !json_is_boolean(v))
        return sg_set_error("%s: engine table: layer %s: \"%s\" must be true or false", what, name,
                            form);
    if (ms_field(l, ms0_key, &ms0, name, what) || ms_field(l, ms1_key, &ms1, name, what))
        return SG_ERR;
    const int on = json_is_true(v);
    return set(t, name, on, ms0, ms1) ? sg_set_error("%s: %s", what, sg_last_error()) : SG_OK;
}

/* one of "wg_sched"'s arrays: SG_WG_SCHEDS ms or nulls (absent or null: none measured) */
static int sched_ms_field(json_t *o, const char *key, double *ms, const char *what) {
    json_t *a = json_object_get(o, key);
    if (!a || json_is_null(a)) return SG_OK;
    int bad = !json_is_array(a) || json_array_size(a) != SG_WG_SCHEDS;
    for (int k = 0; k < SG_WG_SCHEDS && !bad; k++) {
        json_t *v = json_array_get(a, (size_t)k);
        if (json_is_null(v)) continue;
        bad = !json_is_number(v) || !isfinite(json_number_value(v)) || json_number_value(v) < 0;
        ms[k] = json_number_value(v);
    }
    return bad ? sg_set_error("%s: engine table: \"wg_sched\": \"%s\" must be [%d numbers >= 0 "
                              "or nulls]",
                              what, key, SG_WG_SCHEDS)
               : SG_OK;
}

/* the table's optional "wg_sched": {"persist": bool, "fill": bool, "ms": [4 ms or null],
 * "step_ms": [4 ms or null]} (the wgmma kernels' schedule, SG_WG_SCHED_*; the wgmma nodes' sums
 * and the whole step under each; absent: neither, not measured) */
static int wg_sched_field(json_t *r, sg_engine_table *t, const char *what) {
    json_t *o = json_object_get(r, "wg_sched");
    if (!o || json_is_null(o)) return SG_OK;
    json_t *p = json_object_get(o, "persist"), *f = json_object_get(o, "fill");
    if (!json_is_object(o) || (p && !json_is_boolean(p)) || (f && !json_is_boolean(f)))
        return sg_set_error("%s: engine table: \"wg_sched\" must be {\"persist\": true|false, "
                            "\"fill\": true|false, \"ms\": [%d numbers or nulls], \"step_ms\": "
                            "[%d numbers or nulls]}",
                            what, SG_WG_SCHEDS, SG_WG_SCHEDS);
    t->wg_sched =
        (json_is_true(p) ? SG_WG_SCHED_PERSIST : 0) | (json_is_true(f) ? SG_WG_SCHED_FILL : 0);
    return sched_ms_field(o, "ms", t->wg_sched_ms, what) ||
                   sched_ms_field(o, "step_ms", t->wg_sched_step_ms, what) ||
                   ms_field(o, "layers_step_ms", &t->wg_layers_step_ms, "wg_sched", what)
               ? SG_ERR
               : SG_OK;
}

/* a layer's optional "wg_sched": {"persist": bool, "fill": bool, "ms": [4 ms or null]} (its own
 * wgmma schedule where either knob is given, else the table's; its wgmma nodes' sums under each) */
static int layer_sched_field(json_t *l, const char *name, sg_engine_table *t, const char *what) {
    json_t *o = json_object_get(l, "wg_sched");
    if (!o || json_is_null(o)) return SG_OK;
    json_t *p = json_object_get(o, "persist"), *f = json_object_get(o, "fill");
    if (!json_is_object(o) || (p && !json_is_boolean(p)) || (f && !json_is_boolean(f)))
        return sg_set_error("%s: engine table: layer %s: \"wg_sched\" must be {\"persist\": "
                            "true|false, \"fill\": true|false, \"ms\": [%d numbers or nulls]}",
                            what, name, SG_WG_SCHEDS);
    double ms[SG_WG_SCHEDS];
    for (int s = 0; s < SG_WG_SCHEDS; s++) ms[s] = -1;
    const int sched = !p && !f ? -1
                               : (json_is_true(p) ? SG_WG_SCHED_PERSIST : 0) |
                                     (json_is_true(f) ? SG_WG_SCHED_FILL : 0);
    if (sched_ms_field(o, "ms", ms, what)) return SG_ERR;
    return sg_engine_table_set_sched(t, name, sched, ms)
               ? sg_set_error("%s: %s", what, sg_last_error())
               : SG_OK;
}

/* the table's optional "gemms": [{"gemm": key, "algo": "<16 hex digits>", "ms": ms or null,
 * "first_ms": ms or null}] (the GEMMs' cuBLASLt algorithms, sg_gemm_pick) */
static int gemms_field(json_t *r, sg_engine_table *t, const char *what) {
    json_t *a = json_object_get(r, "gemms");
    if (!a || json_is_null(a)) return SG_OK;
    if (!json_is_array(a))
        return sg_set_error("%s: engine table: \"gemms\" must be an array", what);
    for (size_t i = 0; i < json_array_size(a); i++) {
        json_t *g = json_array_get(a, i);
        const char *key = json_string_value(json_object_get(g, "gemm"));
        const char *id = json_string_value(json_object_get(g, "algo"));
        char *end = NULL;
        const unsigned long long algo = id ? strtoull(id, &end, 16) : 0;
        if (!json_is_object(g) || !key || !id || strlen(id) != 16 || !end || *end ||
            strspn(id, "0123456789abcdef") != 16)
            return sg_set_error("%s: engine table: gemms[%zu] must be {\"gemm\": key, \"algo\": "
                                "16 lowercase hex digits, \"ms\", \"first_ms\"}",
                                what, i);
        double ms, first;
        if (ms_field(g, "ms", &ms, key, what) || ms_field(g, "first_ms", &first, key, what))
            return SG_ERR;
        if (sg_engine_table_gemm(t, key))
            return sg_set_error("%s: engine table: GEMM %s is listed twice", what, key);
        if (sg_engine_table_set_gemm(t, key, (uint64_t)algo, ms, first))
            return sg_set_error("%s: %s", what, sg_last_error());
    }
    return SG_OK;
}

/* the table's optional "knobs": {"pdl": bool, "tc_halo": "prologue"|"none"|"all",
 * "dgrad_stats": bool, "fuse_stats": "1"|"fwd"|"bwd"|"0", "norm_onepass": "1"|"fwd"|"bwd"|"0",
 * "base_ms", "step_ms"}, each optional
 * (absent or null: the backend's default; sg_step_knobs) */
static int knobs_field(json_t *r, sg_engine_table *t, const char *what) {
    json_t *o = json_object_get(r, "knobs");
    if (!o || json_is_null(o)) return SG_OK;
    json_t *pdl = json_object_get(o, "pdl"), *halo = json_object_get(o, "tc_halo"),
           *ds = json_object_get(o, "dgrad_stats"), *fs = json_object_get(o, "fuse_stats"),
           *op = json_object_get(o, "norm_onepass");
    sg_step_knobs *k = &t->knobs;
    const int bad_bool = (pdl && !json_is_null(pdl) && !json_is_boolean(pdl)) ||
                         (ds && !json_is_null(ds) && !json_is_boolean(ds));
    k->pdl = json_is_boolean(pdl) ? json_is_true(pdl) : SG_KNOB_UNSET;
    k->dgrad_stats = json_is_boolean(ds) ? json_is_true(ds) : SG_KNOB_UNSET;
    k->tc_halo = sg_knob_halo_parse(json_string_value(halo));
    k->fuse_stats = sg_knob_stats_parse(json_string_value(fs));
    k->norm_onepass = sg_knob_stats_parse(json_string_value(op));
    if (!json_is_object(o) || bad_bool || (halo && !json_is_null(halo) && k->tc_halo < 0) ||
        (fs && !json_is_null(fs) && k->fuse_stats < 0) ||
        (op && !json_is_null(op) && k->norm_onepass < 0))
        return sg_set_error(
            "%s: engine table: \"knobs\" must be {\"pdl\": true|false, \"tc_halo\": "
            "\"prologue\"|\"none\"|\"all\", \"dgrad_stats\": true|false, "
            "\"fuse_stats\": \"1\"|\"fwd\"|\"bwd\"|\"0\", \"norm_onepass\": "
            "\"1\"|\"fwd\"|\"bwd\"|\"0\", "
            "\"base_ms\", \"step_ms\"}",
            what);
    return ms_field(o, "base_ms", &k->base_ms, "knobs", what) ||
                   ms_field(o, "step_ms", &k->step_ms, "knobs", what)
               ? SG_ERR
               : SG_OK;
}

/* the table's optional "attention": {"engine": "gemm"|"fused", "gemm_ms", "fused_ms"} (absent
 * or null: the backend's default, gemm) */
static int attn_field(json_t *r, sg_engine_table *t, const char *what) {
    json_t *o = json_object_get(r, "attention");
    if (!o || json_is_null(o)) return SG_OK;
    const char *eng = json_string_value(json_object_get(o, "engine"));
    if (!json_is_object(o) || !eng || (strcmp(eng, "gemm") && strcmp(eng, "fused")))
        return sg_set_error("%s: engine table: \"attention\" must be {\"engine\": "
                            "\"gemm\"|\"fused\", \"gemm_ms\", \"fused_ms\"}",
                            what);
    double g, f;
    if (ms_field(o, "gemm_ms", &g, "attention", what) ||
        ms_field(o, "fused_ms", &f, "attention", what))
        return SG_ERR;
    return sg_engine_table_set_attn(t, strcmp(eng, "fused") ? SG_ATTN_GEMM : SG_ATTN_FUSED, g, f);
}

int sg_engine_table_parse(const char *text, const char *what, sg_engine_table *t) {
    sg_engine_table_init(t);
    json_error_t err;
    json_t *r = json_loads(text, 0, &err);
    if (!r)
        return sg_set_error("%s: engine table is not JSON (line %d: %s)", what, err.line, err.text);
    int rc = SG_OK;
    const char *fmt = json_string_value(json_object_get(r, "format"));
    json_t *batch = json_object_get(r, "batch"), *layers = json_object_get(r, "layers");
    if (!json_is_object(r) || !fmt || strcmp(fmt, SG_ENGINE_TABLE_FORMAT))
        rc = sg_set_error("%s: not an engine table (no \"format\":\"%s\"; bench --tune-engines "
                          "writes one)",
                          what, SG_ENGINE_TABLE_FORMAT);
    else if (json_integer_value(json_object_get(r, "version")) != 1)
        rc = sg_set_error("%s: engine table version is not 1", what);
    else if (str_field(r, "model", t->model, sizeof t->model, 1, what) ||
             str_field(r, "precision", t->precision, sizeof t->precision, 1, what) ||
             str_field(r, "device", t->device, sizeof t->device, 0, what) ||
             str_field(r, "driver", t->driver, sizeof t->driver, 0, what) ||
             str_field(r, "cudnn", t->cudnn, sizeof t->cudnn, 0, what) ||
             str_field(r, "backend", t->backend, sizeof t->backend, 0, what))
        rc = SG_ERR;
    else if (!json_is_integer(batch) || json_integer_value(batch) < 1 ||
             json_integer_value(batch) > (1 << 16))
        rc = sg_set_error("%s: engine table: \"batch\" must be an integer from 1 to 65536", what);
    else if (!json_is_array(layers) || !json_array_size(layers))
        rc = sg_set_error("%s: engine table: \"layers\" must be a non-empty array", what);
    if (!rc) t->batch = (int)json_integer_value(batch);
    if (!rc) rc = wg_sched_field(r, t, what);
    if (!rc) rc = gemms_field(r, t, what);
    if (!rc) rc = knobs_field(r, t, what);
    if (!rc) rc = attn_field(r, t, what);
    for (size_t i = 0; !rc && i < json_array_size(layers); i++) {
        json_t *l = json_array_get(layers, i);
        const char *name = json_string_value(json_object_get(l, "layer"));
        const char *eng = json_string_value(json_object_get(l, "engine"));
        double own, dnn;
        if (!json_is_object(l) || !name)
            rc = sg_set_error("%s: engine table: layers[%zu] has no \"layer\" name", what, i);
        else if (!sg_layer_engine_parse(eng))
            rc = sg_set_error("%s: engine table: layer %s: \"engine\" must be \"own\" or "
                              "\"cudnn\"",
                              what, name);
        else if (ms_field(l, "own_ms", &own, name, what) ||
                 ms_field(l, "cudnn_ms", &dnn, name, what))
            rc = SG_ERR;
        else if (sg_engine_table_add(t, name, sg_layer_engine_parse(eng), own, dnn)) {
            rc = sg_set_error("%s: %s", what, sg_last_error()); /* sg_set_error copies first */
        } else {
            rc = cudnn_names(l, name, t, what);
            if (!rc) rc = tc_field(l, name, t, what);
            if (!rc)
                rc = form_field(l, name, t, what, "wino", "direct_ms", "wino_ms",
                                sg_engine_table_set_wino);
            if (!rc)
                rc = form_field(l, name, t, what, "f32tc", "fma_ms", "f32tc_ms",
                                sg_engine_table_set_f32tc);
            if (!rc) rc = passes_field(l, name, t, what);
            if (!rc) rc = layer_sched_field(l, name, t, what);
        }
    }
    json_decref(r);
    return rc;
}

int sg_engine_table_read(const char *path, sg_engine_table *t) {
    sg_engine_table_init(t);
    FILE *f = fopen(path, "rb");
    if (!f) return sg_set_error("%s: cannot open the engine table: %s", path, strerror(errno));
    struct stat st;
    if (!fstat(fileno(f), &st) && S_ISDIR(st.st_mode)) {
        fclose(f);
        return sg_set_error("%s: a directory, not an engine table file (bench --tune-engines "
                            "FILE writes one)",
                            path);
    }
    char *buf = NULL;
    size_t n = 0, cap = 0;
    int rc = SG_OK;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap = 2 * cap + 8192;
            if (cap > (64u << 20)) {
                rc = sg_set_error("%s: engine table larger than 64 MiB", path);
                break;
            }
            char *nb = realloc(buf, cap);
            if (!nb) {
                rc = sg_set_error("out of host memory");
                break;
            }
            buf = nb;
        }
        const size_t k = fread(buf + n, 1, 4096, f);
        n += k;
        if (k < 4096) break;
    }
    if (!rc && ferror(f)) rc = sg_set_error("%s: read error", path);
    fclose(f);
    if (!rc) {
        buf[n] = 0;
        rc = sg_engine_table_parse(buf, path, t);
    }
    free(buf);
    return rc;
}

static json_t *ms_json(double ms) {
    return ms >= 0 && isfinite(ms) ? json_real(ms) : json_null();
}

static json_t *table_json(const sg_engine_table *t) {
    json_t *layers = json_array();
    for (int i = 0; i < t->n; i++) {
        json_t *l = json_pack("{s:s, s:s, s:o, s:o}", "layer", t->e[i].layer, "engine",
                              sg_layer_engine_name(t->e[i].engine), "own_ms",
                              ms_json(t->e[i].own_ms), "cudnn_ms", ms_json(t->e[i].cudnn_ms));
        /* the generation where the table says wgmma or measured it (older tables: neither) */
        if (t->e[i].tc == SG_TC_WGMMA || t->e[i].wgmma_ms >= 0) {
            json_object_set_new(l, "tc", json_string(sg_tc_name(t->e[i].tc)));
            json_object_set_new(l, "wgmma_ms", ms_json(t->e[i].wgmma_ms));
        }
        /* the Winograd choice where the table says it or measured it (older tables: neither) */
        if (t->e[i].wino || t->e[i].wino_ms[0] >= 0 || t->e[i].wino_ms[1] >= 0) {
            json_object_set_new(l, "wino", json_boolean(t->e[i].wino));
            json_object_set_new(l, "direct_ms", ms_json(t->e[i].wino_ms[0]));
            json_object_set_new(l, "wino_ms", ms_json(t->e[i].wino_ms[1]));
        }
        /* the tiles' product form likewise */
        if (t->e[i].f32tc || t->e[i].f32tc_ms[0] >= 0 || t->e[i].f32tc_ms[1] >= 0) {
            json_object_set_new(l, "f32tc", json_boolean(t->e[i].f32tc));
            json_object_set_new(l, "fma_ms", ms_json(t->e[i].f32tc_ms[0]));
            json_object_set_new(l, "f32tc_ms", ms_json(t->e[i].f32tc_ms[1]));
        }
        json_t *names = json_object();
        for (int pass = 0; pass < 3; pass++)
            if (t->e[i].cudnn[pass][0])
                json_object_set_new(names, pass_keys[pass], json_string(t->e[i].cudnn[pass]));
        if (json_object_size(names))
            json_object_set_new(l, "cudnn_engines", names);
        else
            json_decref(names);
        /* the passes where they were measured or sent to own (a cudnn layer's: with the side
         * each runs on) */
        json_t *passes = json_object();
        for (int pass = 0; pass < 3; pass++) {
            const sg_engine_entry *x = &t->e[i];
            if (!x->pass_own[pass] && x->pass_own_ms[pass] < 0 && x->pass_lib_ms[pass] < 0 &&
                x->pass_wgmma_ms[pass] < 0)
                continue;
            json_t *o = json_pack("{s:o, s:o}", "own_ms", ms_json(x->pass_own_ms[pass]), "lib_ms",
                                  ms_json(x->pass_lib_ms[pass]));
            if (x->engine == SG_LAYER_CUDNN)
                json_object_set_new(o, "engine", json_string(x->pass_own[pass] ? "own" : "cudnn"));
            /* the generation where the pass says wgmma or measured it (older tables: neither) */
            if (x->pass_tc[pass] == SG_TC_WGMMA || x->pass_wgmma_ms[pass] >= 0) {
                json_object_set_new(o, "tc", json_string(sg_tc_name(x->pass_tc[pass])));
                json_object_set_new(o, "wgmma_ms", ms_json(x->pass_wgmma_ms[pass]));
            }
            json_object_set_new(passes, pass_keys[pass], o);
        }
        if (json_object_size(passes))
            json_object_set_new(l, "passes", passes);
        else
            json_decref(passes);
        /* the layer's wgmma schedule where it has its own or was measured (older tables:
         * neither); the knobs only where it has its own */
        const sg_engine_entry *x = &t->e[i];
        int timed = 0;
        for (int k = 0; k < SG_WG_SCHEDS; k++) timed |= x->wg_sched_ms[k] >= 0;
        if (x->wg_sched >= 0 || timed) {
            json_t *o = json_object(), *ms = json_array();
            if (x->wg_sched >= 0) {
                json_object_set_new(o, "persist", json_boolean(x->wg_sched & SG_WG_SCHED_PERSIST));
                json_object_set_new(o, "fill", json_boolean(x->wg_sched & SG_WG_SCHED_FILL));
            }
            for (int k = 0; k < SG_WG_SCHEDS; k++)
                json_array_append_new(ms, ms_json(x->wg_sched_ms[k]));
            json_object_set_new(o, "ms", ms);
            json_object_set_new(l, "wg_sched", o);
        }
        json_array_append_new(layers, l);
    }
    json_t *r = json_pack("{s:s, s:i, s:s, s:s, s:i, s:s, s:s, s:s, s:s}", "format",
                          SG_ENGINE_TABLE_FORMAT, "version", 1, "model", t->model, "precision",
                          t->precision, "batch", t->batch, "device", t->device, "driver", t->driver,
                          "cudnn", t->cudnn, "backend", t->backend);
    /* the wgmma schedule where the table has one or measured it (older tables: neither) */
    int measured = 0, stepped = 0;
    for (int k = 0; k < SG_WG_SCHEDS; k++)
        measured |= t->wg_sched_ms[k] > 0, stepped |= t->wg_sched_step_ms[k] > 0;
    if (r && (t->wg_sched || measured || stepped || t->wg_layers_step_ms >= 0)) {
        json_t *ms = json_array(), *step = json_array();
        for (int k = 0; k < SG_WG_SCHEDS; k++) {
            json_array_append_new(ms, ms_json(t->wg_sched_ms[k]));
            json_array_append_new(step, ms_json(t->wg_sched_step_ms[k]));
        }
        json_t *o =
            json_pack("{s:b, s:b, s:o}", "persist", (t->wg_sched & SG_WG_SCHED_PERSIST) != 0,
                      "fill", (t->wg_sched & SG_WG_SCHED_FILL) != 0, "ms", ms);
        /* (the whole step's times only where timed: older readers see the same object) */
        if (o && stepped)
            json_object_set_new(o, "step_ms", step);
        else
            json_decref(step);
        if (o && t->wg_layers_step_ms >= 0)
            json_object_set_new(o, "layers_step_ms", json_real(t->wg_layers_step_ms));
        json_object_set_new(r, "wg_sched", o);
    }
    /* the step's knobs where the table sets or measured them (older tables: none) */
    const sg_step_knobs *k = &t->knobs;
    if (r && (k->pdl >= 0 || k->tc_halo >= 0 || k->dgrad_stats >= 0 || k->fuse_stats >= 0 ||
              k->norm_onepass >= 0 || k->base_ms >= 0 || k->step_ms >= 0)) {
        json_t *o = json_object();
        json_object_set_new(o, "pdl", k->pdl >= 0 ? json_boolean(k->pdl) : json_null());
        json_object_set_new(o, "tc_halo",
                            k->tc_halo >= 0 ? json_string(sg_knob_halo_name(k->tc_halo))
                                            : json_null());
        json_object_set_new(o, "dgrad_stats",
                            k->dgrad_stats >= 0 ? json_boolean(k->dgrad_stats) : json_null());
        json_object_set_new(o, "fuse_stats",
                            k->fuse_stats >= 0 ? json_string(sg_knob_stats_name(k->fuse_stats))
                                               : json_null());
        json_object_set_new(o, "norm_onepass",
                            k->norm_onepass >= 0 ? json_string(sg_knob_stats_name(k->norm_onepass))
                                                 : json_null());
        json_object_set_new(o, "base_ms", ms_json(k->base_ms));
        json_object_set_new(o, "step_ms", ms_json(k->step_ms));
        json_object_set_new(r, "knobs", o);
    }
    /* the attention engine where the table sets or measured it (older tables: neither) */
    if (r && (t->attn != SG_ATTN_GEMM || t->attn_ms[0] >= 0 || t->attn_ms[1] >= 0))
        json_object_set_new(r, "attention",
                            json_pack("{s:s, s:o, s:o}", "engine",
                                      t->attn == SG_ATTN_FUSED ? "fused" : "gemm", "gemm_ms",
                                      ms_json(t->attn_ms[0]), "fused_ms", ms_json(t->attn_ms[1])));
    if (r) json_object_set_new(r, "layers", layers);
    /* the GEMMs' algorithms where the table has them (older tables: none) */
    if (r && t->ngemm) {
        json_t *gemms = json_array();
        for (int i = 0; i < t->ngemm; i++) {
            char id[17];
            snprintf(id, sizeof id, "%016llx", (unsigned long long)t->gemm[i].algo);
            json_array_append_new(gemms, json_pack("{s:s, s:s, s:o, s:o}", "gemm", t->gemm[i].key,
                                                   "algo", id, "ms", ms_json(t->gemm[i].ms),
                                                   "first_ms", ms_json(t->gemm[i].first_ms)));
        }
        json_object_set_new(r, "gemms", gemms);
    }
    return r;
}

char *sg_engine_table_json(const sg_engine_table *t) {
    json_t *j = table_json(t);
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(j);
    if (!s) sg_set_error("engine table: cannot serialise it");
    return s;
}

/* PATH.tmp, the file sg_engine_table_write writes before renaming it over path (malloc'ed;
 * NULL with sg_last_error) */
static char *tmp_path_of(const char *path) {
    const size_t n = strlen(path) + 8;
    char *tmp = malloc(n);
    if (!tmp) return sg_set_error("out of host memory"), NULL;
    snprintf(tmp, n, "%s.tmp", path);
    return tmp;
}

int sg_engine_table_check_writable(const char *path) {
    struct stat st;
    if (!*path) return sg_set_error("engine table: the file name is empty");
    if (!stat(path, &st) && S_ISDIR(st.st_mode))
        return sg_set_error("%s: is a directory, not an engine table file", path);
    char *tmp = tmp_path_of(path);
    if (!tmp) return SG_ERR;
    /* PATH.tmp, as the writer opens it */
    const int rc = sg_probe_writable(tmp)
                       ? sg_set_error("%s: cannot write the engine table: %s", tmp, sg_last_error())
                       : SG_OK;
    free(tmp);
    return rc;
}

int sg_engine_table_write(const char *path, const sg_engine_table *t) {
    json_t *j = table_json(t);
    /* indented: readable and diffable */
    char *s = j ? json_dumps(j, JSON_INDENT(1) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(j);
    if (!s) return sg_set_error("engine table: cannot serialise it");
    char *tmp = tmp_path_of(path);
    int rc = SG_OK;
    if (!tmp) {
        free(s);
        return SG_ERR;
    }
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        rc = sg_set_error("%s: cannot write the engine table", tmp);
    } else {
        const int bad = fputs(s, f) < 0 || fputc('\n', f) == EOF;
        if (fclose(f) || bad)
            rc = sg_set_error("%s: cannot write the engine table", tmp);
        else if (rename(tmp, path))
            rc = sg_set_error("%s: cannot rename the engine table into place", path);
        if (rc) remove(tmp);
    }
    free(tmp);
    free(s);
    return rc;
}

int sg_engine_table_diff(const sg_engine_table *a, const sg_engine_table *b, const char *prefix) {
    int differ = 0;
    for (int pass = 0; pass < 2; pass++) {
        const sg_engine_table *x = pass ? b : a, *y = pass ? a : b;
        for (int i = 0; i < x->n; i++) {
            const int e = sg_engine_table_layer(y, x->e[i].layer);
            if (!pass && e == x->e[i].engine && e == SG_LAYER_OWN) {
                /* the same choice, another tensor-core generation or the Winograd form on the
                 * other side: other bits too */
                const sg_engine_entry *ye = sg_engine_table_find(y, x->e[i].layer);
                if (ye->tc != x->e[i].tc && differ++ < 8)
                    fprintf(stderr, "%slayer %s: own (%s) -> own (%s)\n", prefix, x->e[i].layer,
                            sg_tc_name(x->e[i].tc), sg_tc_name(ye->tc));
                if (ye->wino != x->e[i].wino && differ++ < 8)
                    fprintf(stderr, "%slayer %s: own (%s) -> own (%s)\n", prefix, x->e[i].layer,
                            x->e[i].wino ? "Winograd" : "direct", ye->wino ? "Winograd" : "direct");
                if (ye->f32tc != x->e[i].f32tc && differ++ < 8)
                    fprintf(stderr, "%slayer %s: own (%s) -> own (%s)\n", prefix, x->e[i].layer,
                            x->e[i].f32tc ? "3xTF32 tiles" : "FMA tiles",
                            ye->f32tc ? "3xTF32 tiles" : "FMA tiles");
                continue;
            }
            if (!pass && e == x->e[i].engine && e == SG_LAYER_CUDNN) {
                /* the same choice, other timed cuDNN engines: other bits too */
                const sg_engine_entry *ye = sg_engine_table_find(y, x->e[i].layer);
                int same = 1, passes = 1;
                for (int q = 0; q < 3; q++) same &= !strcmp(ye->cudnn[q], x->e[i].cudnn[q]);
                for (int q = 0; q < 3; q++)
                    passes &= ye->pass_own[q] == x->e[i].pass_own[q] &&
                              (!ye->pass_own[q] || ye->pass_tc[q] == x->e[i].pass_tc[q]);
                if ((!same || !passes) && differ++ < 8)
                    fprintf(stderr, "%slayer %s: cudnn -> cudnn with other %s\n", prefix,
                            x->e[i].layer, !passes ? "passes on own" : "cuDNN engines");
                continue;
            }
            if (e == x->e[i].engine || (pass && e)) continue; /* pass 1: only y's missing ones */
            if (differ++ < 8)
                fprintf(stderr, "%slayer %s: %s -> %s\n", prefix, x->e[i].layer,
                        sg_layer_engine_name(pass ? e : x->e[i].engine),
                        sg_layer_engine_name(pass ? x->e[i].engine : e));
        }
    }
    /* the GEMMs' algorithms: another algorithm, other bits */
    for (int pass = 0; pass < 2; pass++) {
        const sg_engine_table *x = pass ? b : a, *y = pass ? a : b;
        for (int i = 0; i < x->ngemm; i++) {
            const sg_gemm_pick *o = sg_engine_table_gemm(y, x->gemm[i].key);
            if ((o && (pass || o->algo == x->gemm[i].algo)) || differ++ >= 8) continue;
            if (o)
                fprintf(stderr, "%sGEMM %s: algorithm %016llx -> %016llx\n", prefix, x->gemm[i].key,
                        (unsigned long long)x->gemm[i].algo, (unsigned long long)o->algo);
            else
                fprintf(stderr, "%sGEMM %s: %s\n", prefix, x->gemm[i].key,
                        pass ? "no algorithm -> one" : "an algorithm -> none");
        }
    }
    /* the attention engine: other kernels, other bits */
    if (a->attn != b->attn && differ++ < 8)
        fprintf(stderr, "%sattention: %s -> %s\n", prefix,
                a->attn == SG_ATTN_FUSED ? "fused" : "gemm",
                b->attn == SG_ATTN_FUSED ? "fused" : "gemm");
    return differ;
}
