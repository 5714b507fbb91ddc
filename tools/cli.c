/* cli.c — the tools' shared plumbing (cli.h): clock, strict parsing, the argument walker,
 * the model prelude, the backend choice, JSON through jansson. */
#include "tools/cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "graph/backend.h"
#include "graph/engine_table_io.h"
#include "graph/weights.h"

double cli_now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

const char *cli_fmt_duration(double s, char *buf) {
    if (!(s >= 0 && s <= 1e8)) return strcpy(buf, "?");
    int h = (int)(s / 3600), m = (int)(s / 60) % 60, sec = (int)s % 60;
    if (h)
        snprintf(buf, 16, "%dh%02dm", h, m);
    else if (m)
        snprintf(buf, 16, "%dm%02ds", m, sec);
    else
        snprintf(buf, 16, "%ds", sec);
    return buf;
}

/* ---- strict parsing */

/* strtoll/strtoull skip leading blanks and accept a sign (" -1" became 2^64-1): the first
 * character must be a digit, or a '-' followed by one when negatives are allowed. */
static int starts_like_number(const char *v, int allow_minus) {
    if (allow_minus && *v == '-') v++;
    return *v >= '0' && *v <= '9';
}

int cli_parse_i64(const char *flag, const char *v, int64_t lo, int64_t hi, int64_t *out) {
    char *end;
    errno = 0;
    long long x = starts_like_number(v, lo < 0) ? strtoll(v, &end, 10) : 0;
    if (!starts_like_number(v, lo < 0) || *end || errno || x < lo || x > hi)
        return sg_set_error("%s expects an integer in [%lld, %lld], got '%s'", flag, (long long)lo,
                            (long long)hi, v);
    *out = x;
    return SG_OK;
}

int cli_parse_int(const char *flag, const char *v, int lo, int hi, int *out) {
    int64_t x;
    if (cli_parse_i64(flag, v, lo, hi, &x)) return SG_ERR;
    *out = (int)x;
    return SG_OK;
}

int cli_parse_u64(const char *flag, const char *v, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long x = starts_like_number(v, 0) ? strtoull(v, &end, 10) : 0;
    if (!starts_like_number(v, 0) || *end || errno)
        return sg_set_error("%s expects an integer in [0, %llu], got '%s'", flag,
                            (unsigned long long)UINT64_MAX, v);
    *out = x;
    return SG_OK;
}

int cli_parse_float(const char *flag, const char *v, double lo, double hi, float *out) {
    char *end;
    errno = 0;
    double x = *v && *v != ' ' ? strtod(v, &end) : NAN;
    /* !(x >= lo && x <= hi) also rejects NaN; a finite double out of float range is too */
    if (!*v || *v == ' ' || *end || !(x >= lo && x <= hi) || !isfinite((float)x))
        return sg_set_error("%s expects a number in [%g, %g], got '%s'", flag, lo, hi, v);
    *out = (float)x;
    return SG_OK;
}

/* ---- the argument walker */

void cli_args_init(cli_args *a, const char *tool, int argc, char **argv) {
    memset(a, 0, sizeof *a);
    a->tool = tool, a->argc = argc, a->argv = argv, a->i = 0, a->value_taken = 1;
}

/* "<tool>: <before><what><after> (see <tool> --help)" */
static void walker_error(cli_args *a, const char *before, const char *what, const char *after) {
    fprintf(stderr, "%s: %s%s%s (see %s --help)\n", a->tool, before, what, after, a->tool);
    a->flag[0] = 0;
}

int cli_next(cli_args *a) {
    if (!a->flag[0] && a->i > 0) return 0; /* an error was reported: stop */
    if (a->inline_ && !a->value_taken) {
        walker_error(a, "", a->flag, " takes no value");
        return 1;
    }
    a->i++;
    if (a->i >= a->argc) return 0;
    const char *s = a->argv[a->i];
    a->inline_ = NULL, a->value_taken = 0;
    if (a->positional && s[0] != '-' && s[0]) { /* PATH as --flag=PATH */
        snprintf(a->flag, sizeof a->flag, "%s", a->positional);
        a->inline_ = s, a->positional = NULL;
        return 1;
    }
    if (strncmp(s, "--", 2) && strcmp(s, "-h")) {
        walker_error(a, "unexpected argument '", s, "'");
        return 1;
    }
    const char *eq = strchr(s, '=');
    size_t len = eq ? (size_t)(eq - s) : strlen(s);
    if (len >= sizeof a->flag) len = sizeof a->flag - 1;
    memcpy(a->flag, s, len);
    a->flag[len] = 0;
    if (!strcmp(a->flag, "-h")) strcpy(a->flag, "--help");
    if (eq) a->inline_ = eq + 1;
    /* a tool answers --help at once, before the check above would see the value: refuse it
     * here (--help=3 printed the help) */
    if (eq && cli_is(a, "--help")) walker_error(a, "", "--help", " takes no value");
    return 1;
}

int cli_is(const cli_args *a, const char *flag) {
    return !strcmp(a->flag, flag);
}

const char *cli_value(cli_args *a) {
    a->value_taken = 1;
    if (a->inline_) return a->inline_;
    if (a->i + 1 >= a->argc) {
        fprintf(stderr, "%s: %s needs a value (see %s --help)\n", a->tool, a->flag, a->tool);
        return NULL;
    }
    return a->argv[++a->i];
}

static int parsed(cli_args *a, int rc) {
    if (rc) fprintf(stderr, "%s: %s\n", a->tool, sg_last_error());
    return rc;
}

int cli_i64(cli_args *a, int64_t lo, int64_t hi, int64_t *out) {
    const char *v = cli_value(a);
    return v ? parsed(a, cli_parse_i64(a->flag, v, lo, hi, out)) : SG_ERR;
}

int cli_int(cli_args *a, int lo, int hi, int *out) {
    const char *v = cli_value(a);
    return v ? parsed(a, cli_parse_int(a->flag, v, lo, hi, out)) : SG_ERR;
}

int cli_u64(cli_args *a, uint64_t *out) {
    const char *v = cli_value(a);
    return v ? parsed(a, cli_parse_u64(a->flag, v, out)) : SG_ERR;
}

int cli_float(cli_args *a, double lo, double hi, float *out) {
    const char *v = cli_value(a);
    return v ? parsed(a, cli_parse_float(a->flag, v, lo, hi, out)) : SG_ERR;
}

int cli_unknown(const cli_args *a) {
    if (a->flag[0])
        fprintf(stderr, "%s: unknown flag '%s' (see %s --help)\n", a->tool, a->flag, a->tool);
    return SG_ERR_USAGE;
}

int cli_fail(const char *tool, int code) {
    fprintf(stderr, "%s: %s\n", tool, sg_last_error());
    return code;
}

/* ---- the model */

int cli_model_prelude(const char *tool, int argc, char **argv, const char *default_model,
                      sg_model_cfg *cfg) {
    const char *model = default_model;
    for (int i = 1; i < argc; i++) {
        if (!strncmp(argv[i], "--model=", 8)) model = argv[i] + 8;
        if (strcmp(argv[i], "--model")) continue;
        if (i + 1 >= argc || !strncmp(argv[i + 1], "--", 2)) {
            fprintf(stderr, "%s: --model needs a value (see %s --help)\n", tool, tool);
            return SG_ERR;
        }
        model = argv[++i];
    }
    if (sg_model_preset(cfg, model)) return cli_fail(tool, SG_ERR);
    return SG_OK;
}

void cli_print_models(FILE *f, const char *default_model) {
    for (int i = 0; sg_model_names[i]; i++)
        fprintf(f, "                         %-12s %s%s\n", sg_model_names[i],
                strcmp(sg_model_names[i], default_model) ? "" : "(default) ",
                sg_model_descriptions[i]);
}

int cli_model_flag(cli_args *a, sg_model_cfg *cfg) {
    if (cli_is(a, "--model")) return cli_value(a) ? 1 : -1;
    /* is it a model flag at all? ask with a scratch config (any value answers that) */
    sg_model_cfg scratch = *cfg;
    const char *probe = a->inline_ ? a->inline_ : "";
    if (!sg_model_flag(&scratch, a->flag, probe)) return 0;
    const char *v = cli_value(a);
    if (!v) return -1;
    if (sg_model_flag(cfg, a->flag, v) < 0)
        return fprintf(stderr, "%s: %s\n", a->tool, sg_last_error()), -1;
    /* a head count and channels per head: the one given last replaced the other in silence */
    a->heads_given |= cli_is(a, "--heads") ? 1 : cli_is(a, "--head-ch") ? 2 : 0;
    if (a->heads_given == 3) {
        fprintf(stderr,
                "%s: --heads N (a head count) and --head-ch N (channels per head) "
                "contradict each other: give one\n",
                a->tool);
        return -1;
    }
    return 1;
}

int cli_model_from_json(const json_t *config, sg_model_cfg *c) {
    if (sg_model_cfg_from_config(config, 0, c)) return SG_ERR;
    return sg_model_validate(c);
}

/* ---- the backend */

int cli_check_backend(const char *tool, const char *name) {
    if (!name || !strcmp(name, "cpu") || !strcmp(name, "cuda")) return SG_OK;
    fprintf(stderr, "%s: --backend expects cpu or cuda, got '%s'\n", tool, name);
    return SG_ERR;
}

const char *cli_backend_name(const char *name) {
    return name ? name : sg_cuda_available() ? "cuda" : "cpu";
}

int cli_conv_engine(cli_args *a, int *out) {
    const char *v = cli_value(a);
    if (!v) return SG_ERR;
    *out = sg_conv_engine_parse(v);
    if (*out >= 0) return SG_OK;
    fprintf(stderr, "%s: --conv-engine expects auto, own or cudnn, got '%s'\n", a->tool, v);
    return SG_ERR;
}

int cli_engine_table(cli_args *a, sg_engine_table *t, const char **path) {
    const char *v = cli_value(a);
    if (!v) return SG_ERR;
    sg_engine_table_free(t); /* a second --engine-table replaces the first */
    if (sg_engine_table_read(v, t)) {
        fprintf(stderr, "%s: --engine-table: %s\n", a->tool, sg_last_error());
        return SG_ERR;
    }
    if (path) *path = v;
    return SG_OK;
}

void cli_print_engine_table(const sg_plan *p, const char *path) {
    const sg_engine_table *t = p->cfg.engines;
    if (!t) return;
    const sg_graph *g = &p->g;
    int dnn = 0, timed = 0, wg = 0, own_passes = 0;
    for (int k = 0; k < t->n; k++) {
        for (int q = 0; q < 3 && t->e[k].engine == SG_LAYER_CUDNN; q++)
            own_passes += t->e[k].pass_own[q];
        dnn += t->e[k].engine == SG_LAYER_CUDNN;
        wg += t->e[k].engine == SG_LAYER_OWN && t->e[k].tc == SG_TC_WGMMA;
        timed += t->e[k].engine == SG_LAYER_CUDNN &&
                 (t->e[k].cudnn[0][0] || t->e[k].cudnn[1][0] || t->e[k].cudnn[2][0]);
    }
    printf("  engine table    %s (hash %016llx; measured on %s, %s backend): %d conv layers, "
           "%d on cudnn, %d on own (%d on the wgmma kernels); %d cudnn layers with timed cuDNN "
           "engines; %d of their passes on own\n",
           path ? path : "(the checkpoint's)", (unsigned long long)t->hash,
           t->device[0] ? t->device : "-", t->backend[0] ? t->backend : "-", t->n, dnn, t->n - dnn,
           wg, timed, own_passes);
    /* an fp32 table's forms of its own layers (other bits; the environment overrides them) */
    int wino = 0, f32tc = 0;
    for (int k = 0; k < t->n; k++)
        wino += t->e[k].engine == SG_LAYER_OWN && t->e[k].wino,
            f32tc += t->e[k].engine == SG_LAYER_OWN && t->e[k].f32tc;
    if (wino || f32tc)
        printf("    fp32 forms: %d own layer(s) with their 3x3 stride-1 passes as Winograd, %d "
               "with their tiles on the tensor cores (3xTF32); SG_CONV_WINO and SG_CONV_F32_TC "
               "override them\n",
               wino, f32tc);
    /* what the table sets besides the layers: the wgmma schedule, the step knobs, the GEMMs'
     * algorithms (the speed alone but for the last) */
    const sg_step_knobs *kn = &t->knobs;
    int own_sched = 0;
    for (int k = 0; k < t->n; k++) own_sched += t->e[k].wg_sched >= 0;
    if (t->wg_sched || own_sched || t->wg_layers_step_ms >= 0 || kn->pdl >= 0 || kn->tc_halo >= 0 ||
        kn->dgrad_stats >= 0 || kn->fuse_stats >= 0 || kn->base_ms >= 0) {
        char ms[96] = "";
        if (kn->base_ms >= 0 && kn->step_ms >= 0)
            snprintf(ms, sizeof ms, " (its step %.3f ms against %.3f with the defaults)",
                     kn->step_ms, kn->base_ms);
        char kt[160];
        sg_step_knobs_text(kn, kt, sizeof kt);
        /* the whole step under each schedule where the tuning timed it */
        char sched[128] = "";
        if (t->wg_sched_step_ms[t->wg_sched] >= 0) {
            int at = snprintf(sched, sizeof sched, " (the step under each:");
            for (int s = 0; s < SG_WG_SCHEDS && at < (int)sizeof sched; s++)
                at += t->wg_sched_step_ms[s] >= 0
                          ? snprintf(sched + at, sizeof sched - at, " %.3f", t->wg_sched_step_ms[s])
                          : snprintf(sched + at, sizeof sched - at, " -");
            if (at < (int)sizeof sched) snprintf(sched + at, sizeof sched - at, " ms)");
        }
        /* the layers on their own schedule, and the step the tuning timed with them */
        char layers[128] = "";
        if (own_sched || t->wg_layers_step_ms >= 0) {
            const int at = snprintf(layers, sizeof layers, ", %d layer(s) on their own", own_sched);
            if (t->wg_layers_step_ms >= 0)
                snprintf(layers + at, sizeof layers - at, " (the step with theirs: %.3f ms%s)",
                         t->wg_layers_step_ms, own_sched ? "" : ", not kept");
        }
        printf("    schedule: wgmma %s%s%s; step knobs %s%s\n", sg_wg_sched_text(t->wg_sched, 0),
               sched, layers, kt, ms);
    }
    if (t->attn != SG_ATTN_GEMM || t->attn_ms[0] >= 0) {
        char ms[96] = "";
        if (t->attn_ms[0] >= 0 && t->attn_ms[1] >= 0)
            snprintf(ms, sizeof ms, " (the attention nodes: gemm %.3f ms, fused %.3f)",
                     t->attn_ms[0], t->attn_ms[1]);
        printf("    attention: %s%s (SG_ATTN overrides it)\n",
               t->attn == SG_ATTN_FUSED ? "fused" : "gemm", ms);
    }
    if (t->ngemm) {
        int other = 0;
        for (int i = 0; i < t->ngemm; i++) other += t->gemm[i].ms < t->gemm[i].first_ms;
        printf("    GEMMs: %d with their cuBLASLt algorithm, %d not the heuristic's first (a run "
               "on the CUDA backend pins them)\n",
               t->ngemm, other);
    }
    printf("    %-48s %-12s %10s %10s %10s  %s\n", "layer", "engine", "own ms", "wgmma ms",
           "cudnn ms", "its input in this plan");
    for (int i = 0; i < g->n_forward; i++) {
        char names[2][SG_NAME_MAX];
        const int n = sg_conv_layers_computed(g, i, names);
        for (int j = 0; j < n; j++) {
            const sg_engine_entry *e = sg_engine_table_find(t, names[j]);
            if (!e) continue;
            /* the input this layer reads: the folded shortcut's is the block's input */
            const sg_tensor *x = &g->t[g->n[i].in[j ? 3 : 0]];
            char own[16] = "-", wg_ms[16] = "-", dnn_ms[16] = "-", eng[24];
            if (e->own_ms >= 0) snprintf(own, sizeof own, "%.4f", e->own_ms);
            if (e->wgmma_ms >= 0) snprintf(wg_ms, sizeof wg_ms, "%.4f", e->wgmma_ms);
            /* an own layer's generation where wgmma; a cudnn layer's passes on own (f: forward,
             * d: data gradient, w: weight gradient; upper case: on the wgmma kernels) */
            char passes[8] = "";
            for (int q = 0, m = 0; q < 3 && e->engine == SG_LAYER_CUDNN; q++)
                if (e->pass_own[q])
                    passes[m++] = (e->pass_tc[q] == SG_TC_WGMMA ? "FDW" : "fdw")[q], passes[m] = 0;
            /* an own layer's fp32 forms: "wino", "tf32x3" (the tiles on the tensor cores) */
            const int is_own = e->engine == SG_LAYER_OWN;
            snprintf(eng, sizeof eng, "%s%s%s%s", sg_layer_engine_name(e->engine),
                     is_own && e->tc == SG_TC_WGMMA ? " wgmma"
                     : is_own && e->wino            ? " wino"
                     : passes[0]                    ? " own:"
                                                    : "",
                     is_own && e->f32tc ? " tf32x3" : "", passes);
            if (e->cudnn_ms >= 0) snprintf(dnn_ms, sizeof dnn_ms, "%.4f", e->cudnn_ms);
            const int op = g->n[i].op;
            char sched[64] = "";
            if (e->wg_sched >= 0)
                snprintf(sched, sizeof sched, "wgmma schedule %s; ",
                         sg_wg_sched_text(e->wg_sched, 1));
            printf("    %-48s %-12s %10s %10s %10s  %s%s%s%s\n", names[j], eng, own, wg_ms, dnn_ms,
                   sched,
                   e->engine == SG_LAYER_CUDNN &&
                           (e->cudnn[0][0] || e->cudnn[1][0] || e->cudnn[2][0])
                       ? "timed cuDNN engines; "
                       : "",
                   op == OP_CONV2D_SC  ? "in conv2d_sc with its block's shortcut (own only); "
                   : op == OP_UPCONV2D ? "upconv2d: the upsample inside the conv (own only); "
                                       : "",
                   x->vnorm >= 0 ? "fused normalisation (never stored)"
                   : x->nparts   ? "concatenation (own only)"
                   : x->producer >= 0 && (g->n[x->producer].op == OP_NORM_ACT ||
                                          g->n[x->producer].op == OP_NORM_ACT_TEMB)
                       ? "stored normalisation"
                       : "stored");
        }
    }
}

/* ---- JSON output */

char *cli_json_string(json_t *j) {
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
    json_decref(j);
    if (!s) sg_set_error("cannot render JSON (out of memory?)");
    return s;
}

json_t *cli_json_text(const char *s) {
    json_t *j = json_string(s);
    if (j || !s) return j;
    char *copy = strdup(s); /* not UTF-8: JSON cannot hold the bytes; keep ASCII, mark the rest */
    for (char *p = copy; p && *p; p++)
        if ((unsigned char)*p >= 0x80) *p = '?';
    j = copy ? json_string(copy) : NULL;
    free(copy);
    return j;
}

int cli_json_print_inline(FILE *f, json_t *j) {
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(9)) : NULL;
    json_decref(j);
    if (!s) return sg_set_error("cannot render JSON (out of memory?)");
    fputs(s, f);
    free(s);
    return SG_OK;
}

int cli_json_print(FILE *f, json_t *j) {
    char *s = cli_json_string(j);
    if (!s) return SG_ERR;
    fprintf(f, "%s\n", s);
    free(s);
    return SG_OK;
}

static double shortest_float(float f) {
    char buf[32];
    for (int digits = 6; digits < 9; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, (double)f);
        if ((float)strtod(buf, NULL) == f) return strtod(buf, NULL);
    }
    return (double)f;
}

json_t *cli_json_float(float f) {
    return json_real(shortest_float(f));
}

json_t *cli_model_json(const sg_model_cfg *cfg) {
    char text[2048];
    sg_model_json(cfg, text, sizeof text);
    json_error_t err;
    json_t *j = json_loads(text, 0, &err);
    if (!j) return sg_set_error("model config JSON: %s", err.text), NULL;
    /* the config's reals are floats: write each as the shortest text that reads back to it */
    const char *key;
    json_t *v;
    json_object_foreach(j, key, v) {
        if (json_is_real(v)) json_real_set(v, shortest_float((float)json_real_value(v)));
    }
    return j;
}

/* ---- a training run's folder */

int cli_is_run_file(const char *name) {
    size_t n = strlen(name);
    return !strcmp(name, "metrics.jsonl") || !strcmp(name, "latest") ||
           !strcmp(name, "config.json") || !strcmp(name, "loss.png") ||
           (!strncmp(name, "ckpt_", 5) && n > 5 && !strcmp(name + n - 5, ".sgck")) ||
           (!strncmp(name, "samples_", 8) && n > 4 && !strcmp(name + n - 4, ".png"));
}

int cli_is_run_config(const char *dir) {
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    json_t *j = json_load_file(path, 0, NULL);
    const int runs = json_is_object(j) && json_object_get(j, "model") &&
                     json_is_array(json_object_get(j, "resumes"));
    json_decref(j);
    return runs;
}

int cli_make_dirs(const char *path) {
    char p[4096];
    if (!*path) return sg_set_error("an empty directory path");
    if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p)
        return sg_set_error("path too long: %s", path);
    for (char *s = p + 1;; s++) {
        int end = !*s;
        if (*s == '/' || end) {
            *s = 0;
            if (mkdir(p, 0755) && errno != EEXIST)
                return sg_set_error("cannot create %s: %s", p, strerror(errno));
            if (end) break;
            *s = '/';
        }
    }
    return SG_OK;
}
