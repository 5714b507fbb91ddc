/* bench — how fast is one planned training step, and where does its time go?
 *
 *   build/bench --model unet_cifar --batch 128 --precision bf16          # on a GPU
 *   build/bench --backend cpu --model unet_tiny --iters 5 --json
 *
 * Builds the training-step plan, uploads a synthetic dataset sized to the model, initialises
 * the state, runs warm-up steps (on CUDA the first one is eager, then the step is captured
 * into a CUDA graph), then times `iters` replays (CUDA events around each replay on CUDA, the
 * host clock on the CPU) and reports the median and spread, img/s, MFU (the plan's matmul
 * FLOPs per step / median step time / the backend's measured dense matmul peak for the
 * activation dtype), the arena against its lower bound, the host time per replay (launch wall
 * time of back-to-back replays / n, CUDA only), and a per-op breakdown: every schedule node
 * run eagerly once and timed, summed per op family, so the next optimisation is aimed.
 *
 * The side-by-side with PyTorch (tools/torch_ref/bench.py) is assembled by tools/bench.sh and
 * tools/bench_report.py from this tool's --json output.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "data/dataset.h"
#include "graph/exec.h"

#ifndef SG_BUILD_ID
#define SG_BUILD_ID "unknown"
#endif

#define BENCH_DEFAULT_DATA_N 4096 /* same as tools/torch_ref/bench.py --ndata */

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: bench [flags]\n"
            "Time the planned training step (on CUDA: the replayed CUDA graph) and break it\n"
            "down per op family.\n\n"
            "  --model NAME         unet_cifar (default), unet_adm64, unet_tiny, unet_fmnist\n"
            "  --backend B          cpu | cuda (default: cuda when a GPU is present)\n"
            "  --warmup N           untimed steps first (default 10; on CUDA they include the\n"
            "                       eager step and the graph capture)\n"
            "  --iters N            timed replays (default 50 on cuda, 5 on cpu)\n"
            "  --data SPEC          synthetic (default: %d procedural images sized to the\n"
            "                       model, or --data-n of them), synthetic:N, or any train\n"
            "                       --data spec (fmnist, cifar10:DIR, idx:FILE)\n"
            "  --seed N             initialisation and data seed (default 0)\n"
            "  --no-breakdown       skip the per-op (eager, per-node timed) pass\n"
            "  --json               one JSON object on stdout instead of the report\n"
            "  --help               this text\n"
            "model flags:\n%s",
            BENCH_DEFAULT_DATA_N, sg_model_flags_help);
}

static int parse_count(const char *v, long lo, long hi, int *out) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (!*v || *end || errno || x < lo || x > hi) return -1;
    *out = (int)x;
    return 0;
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* q-quantile of sorted s[0..n) with linear interpolation (numpy's default, and bench.py's) */
static double quantile(const float *s, int n, double q) {
    double k = (n - 1) * q;
    int lo = (int)floor(k), hi = (int)ceil(k);
    return s[lo] + (s[hi] - s[lo]) * (k - lo);
}

typedef struct {
    double median, min, p10, p90, max, mean;
} stats;

static stats summarize(const float *ms, int n) {
    stats s = {0};
    float *c = malloc(sizeof(float) * (size_t)n);
    if (!c || n <= 0) return free(c), s;
    memcpy(c, ms, sizeof(float) * (size_t)n);
    qsort(c, (size_t)n, sizeof(float), cmp_float);
    s.median = quantile(c, n, 0.5), s.p10 = quantile(c, n, 0.1), s.p90 = quantile(c, n, 0.9);
    s.min = c[0], s.max = c[n - 1];
    for (int i = 0; i < n; i++) s.mean += c[i];
    s.mean /= n;
    free(c);
    return s;
}

typedef struct {
    int op, nodes, matmul;
    double ms, flops;
} op_row;

static int cmp_row(const void *a, const void *b) {
    const op_row *x = a, *y = b;
    return x->ms > y->ms ? -1 : x->ms < y->ms;
}

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

/* a finite number with `sig` significant digits (0: an integer, "%.0f"), or null */
static void json_num(FILE *f, const char *key, double v, int sig) {
    fprintf(f, ",\"%s\":", key);
    if (!isfinite(v))
        fputs("null", f);
    else if (sig > 0)
        fprintf(f, "%.*g", sig, v);
    else
        fprintf(f, "%.0f", v);
}

static const char *mib(int64_t b, char *buf) {
    snprintf(buf, 32, "%.1f MiB", (double)b / 1048576.0);
    return buf;
}

typedef struct {
    const char *model, *backend, *data;
    int warmup, iters, json, breakdown, data_n_set;
    unsigned long long seed;
} bench_args;

int main(int argc, char **argv) {
    bench_args a = {
        .model = "unet_cifar", .data = "synthetic", .warmup = 10, .iters = -1, .breakdown = 1};
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--model") && i + 1 < argc) a.model = argv[i + 1];
    sg_model_cfg cfg;
    if (sg_model_preset(&cfg, a.model)) return fprintf(stderr, "bench: %s\n", sg_last_error()), 2;

    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) return usage(stdout), 0;
        if (!strcmp(f, "--json")) {
            a.json = 1;
            continue;
        }
        if (!strcmp(f, "--no-breakdown")) {
            a.breakdown = 0;
            continue;
        }
        if (!v || strncmp(f, "--", 2)) {
            fprintf(stderr, "bench: unknown or incomplete flag '%s' (see bench --help)\n", f);
            return 2;
        }
        int r = sg_model_flag(&cfg, f, v);
        if (r < 0) return fprintf(stderr, "bench: %s\n", sg_last_error()), 2;
        i++;
        if (r > 0) {
            if (!strcmp(f, "--data-n")) a.data_n_set = 1;
            continue;
        }
        int bad = 0;
        if (!strcmp(f, "--model"))
            continue;
        else if (!strcmp(f, "--backend"))
            a.backend = v;
        else if (!strcmp(f, "--data"))
            a.data = v;
        else if (!strcmp(f, "--warmup"))
            bad = parse_count(v, 0, 1000000, &a.warmup);
        else if (!strcmp(f, "--iters"))
            bad = parse_count(v, 1, 1000000, &a.iters);
        else if (!strcmp(f, "--seed")) {
            char *end;
            errno = 0;
            a.seed = strtoull(v, &end, 10);
            bad = !*v || *end || errno || v[0] == '-';
        } else {
            fprintf(stderr, "bench: unknown flag '%s' (see bench --help)\n", f);
            return 2;
        }
        if (bad) return fprintf(stderr, "bench: bad value '%s' for %s\n", v, f), 2;
    }
    if (a.backend && strcmp(a.backend, "cpu") && strcmp(a.backend, "cuda"))
        return fprintf(stderr, "bench: --backend expects cpu or cuda, got '%s'\n", a.backend), 2;
    const char *backend = a.backend ? a.backend : sg_cuda_available() ? "cuda" : "cpu";
    int cuda = !strcmp(backend, "cuda");
    if (a.iters < 0) a.iters = cuda ? 50 : 5;

    /* the dataset: synthetic images sized to the model unless a real spec is given */
    sg_dataset ds;
    int64_t syn_n = -1;
    if (!strcmp(a.data, "synthetic"))
        syn_n =
            a.data_n_set || cfg.data_n < BENCH_DEFAULT_DATA_N ? cfg.data_n : BENCH_DEFAULT_DATA_N;
    else if (!strncmp(a.data, "synthetic:", 10)) {
        char *end;
        errno = 0;
        long long n = strtoll(a.data + 10, &end, 10);
        if (!a.data[10] || *end || errno || n < 1 || n > (1LL << 31))
            return fprintf(stderr, "bench: --data synthetic:N expects a count, got '%s'\n", a.data),
                   2;
        syn_n = n;
    }
    if (syn_n > 0) {
        if (data_synthetic(&ds, syn_n, cfg.data_h, cfg.data_w, cfg.in_ch))
            return fprintf(stderr, "bench: %s\n", sg_last_error()), 2;
    } else {
        if (data_load(&ds, a.data)) return fprintf(stderr, "bench: %s\n", sg_last_error()), 1;
        if (ds.c != cfg.in_ch || ds.h > cfg.img || ds.w > cfg.img) {
            fprintf(stderr, "bench: %s is %dx%dx%d; model %s takes %dx%dx%d at most\n", ds.source,
                    ds.h, ds.w, ds.c, cfg.name, cfg.img, cfg.img, cfg.in_ch);
            data_free(&ds);
            return 2;
        }
    }
    cfg.data_n = ds.n, cfg.data_h = ds.h, cfg.data_w = ds.w;
    char data_source[sizeof ds.source];
    snprintf(data_source, sizeof data_source, "%s", ds.source);

    /* plan, arena, state */
    double t_setup = now_ms();
    sg_backend *be = cuda ? sg_backend_cuda_create(0, 1) : sg_backend_cpu_create();
    if (!be) return data_free(&ds), fprintf(stderr, "bench: %s\n", sg_last_error()), 1;
    sg_exec e;
    int rc = sg_exec_init(&e, &cfg, 1, be);
    if (!rc) rc = sg_exec_upload_dataset(&e, ds.pixels, ds.n * ds.h * ds.w * ds.c);
    data_free(&ds);
    if (!rc) rc = sg_exec_init_state(&e, a.seed);
    if (rc) {
        fprintf(stderr, "bench: %s\n", sg_last_error());
        sg_exec_free(&e);
        return 1;
    }
    const sg_plan *p = &e.plan;
    const sg_graph *g = &p->g;
    double setup_ms = now_ms() - t_setup;

    float *ms = calloc((size_t)a.iters, sizeof(float));
    float *node_ms = calloc((size_t)g->nn, sizeof(float));
    op_row *rows = calloc(OP_COUNT, sizeof(op_row));
    if (!ms || !node_ms || !rows) {
        fprintf(stderr, "bench: out of host memory\n");
        free(ms), free(node_ms), free(rows);
        sg_exec_free(&e);
        return 1;
    }

    /* warm-up (CUDA: eager step, capture, replays), then the timed replays */
    double t_warm = now_ms();
    for (int i = 0; i < a.warmup && !rc; i++) rc = be->run_step(be, p);
    if (!rc) rc = be->sync(be);
    double warm_ms = now_ms() - t_warm;
    const char *timing = cuda ? "cuda-events" : "host-clock";
    if (!rc && be->time_steps) {
        rc = be->time_steps(be, p, a.iters, ms);
    } else if (!rc) { /* a backend without the timing hook: host clock around step + sync */
        timing = "host-clock";
        for (int i = 0; i < a.iters && !rc; i++) {
            double t0 = now_ms();
            rc = be->run_step(be, p);
            if (!rc) rc = be->sync(be);
            ms[i] = (float)(now_ms() - t0);
        }
    }
    if (!rc) rc = be->sync(be);

    /* host time per replay: launch n steps back to back without waiting, then wait */
    double host_us = NAN, host_wall_ms = NAN;
    if (!rc && cuda) {
        double t0 = now_ms();
        for (int i = 0; i < a.iters && !rc; i++) rc = be->run_step(be, p);
        double t1 = now_ms();
        if (!rc) rc = be->sync(be);
        double t2 = now_ms();
        host_us = (t1 - t0) * 1e3 / a.iters;
        host_wall_ms = (t2 - t0) / a.iters;
    }
    float loss = NAN;
    if (!rc && p->io.loss >= 0) rc = sg_exec_read(&e, p->io.loss, &loss);

    /* the per-op breakdown: every node once, eagerly, timed */
    int nrows = 0;
    double eager_total = 0;
    int have_breakdown = a.breakdown && be->time_nodes;
    if (!rc && have_breakdown) {
        rc = be->time_nodes(be, p, node_ms);
        if (!rc) rc = be->sync(be);
        for (int i = 0; i < g->nn && !rc; i++) {
            int op = g->n[i].op;
            rows[op].op = op;
            rows[op].nodes++;
            rows[op].matmul = sg_ops[op].matmul;
            rows[op].ms += node_ms[i];
            if (sg_ops[op].flops) rows[op].flops += sg_ops[op].flops(g, &g->n[i]);
            eager_total += node_ms[i];
        }
        for (int op = 0; op < OP_COUNT; op++)
            if (rows[op].nodes) rows[nrows++] = rows[op];
        qsort(rows, (size_t)nrows, sizeof(op_row), cmp_row);
    }
    if (rc) {
        fprintf(stderr, "bench: %s\n", sg_last_error());
        free(ms), free(node_ms), free(rows);
        sg_exec_free(&e);
        return 1;
    }
    double peak = be->matmul_peak_tflops ? be->matmul_peak_tflops(be, cfg.act_dt) : 0;

    stats s = summarize(ms, a.iters);
    double sec = s.median / 1e3;
    double img_s = cfg.batch / sec;
    double tflops = p->flops / sec / 1e12;
    double mfu = peak > 0 ? p->matmul_flops / sec / (peak * 1e12) : NAN;
    double ratio = (double)p->arena_bytes / (double)p->lower_bound_bytes;
    const char *prec = cfg.act_dt == DT_BF16 ? "bf16" : "fp32";
    char env[2048] = "";
    if (be->describe) be->describe(be, env, sizeof env);
    if (!env[0]) snprintf(env, sizeof env, "{\"backend\":\"%s\"}", backend);
    if (!isfinite(loss))
        fprintf(stderr, "bench: warning: the loss after the timed steps is %g (not finite)\n",
                loss);

    if (a.json) {
        char cj[2048];
        sg_model_json(&cfg, cj, sizeof cj);
        FILE *f = stdout;
        fprintf(f, "{\"tool\":\"stepgraph_bench\",\"model\":");
        json_str(f, cfg.name);
        fprintf(f, ",\"config\":%s,\"batch\":%d,\"precision\":\"%s\",\"backend\":\"%s\"", cj,
                cfg.batch, prec, backend);
        fprintf(f, ",\"env\":");
        if (env[0] == '{')
            fputs(env, f);
        else
            json_str(f, env);
        fprintf(f, ",\"build\":");
        json_str(f, SG_BUILD_ID);
        fprintf(f, ",\"data\":");
        json_str(f, data_source);
        fprintf(f, ",\"data_n\":%lld,\"seed\":%llu,\"warmup\":%d,\"iters\":%d,\"timing\":\"%s\"",
                (long long)cfg.data_n, a.seed, a.warmup, a.iters, timing);
        json_num(f, "ms_per_step", s.median, 6);
        json_num(f, "ms_min", s.min, 6);
        json_num(f, "ms_p10", s.p10, 6);
        json_num(f, "ms_p90", s.p90, 6);
        json_num(f, "ms_max", s.max, 6);
        json_num(f, "ms_mean", s.mean, 6);
        json_num(f, "img_per_s", img_s, 6);
        json_num(f, "flops_per_step", p->flops, 0);
        json_num(f, "matmul_flops_per_step", p->matmul_flops, 0);
        json_num(f, "achieved_tflops", tflops, 6);
        json_num(f, "matmul_peak_tflops", peak > 0 ? peak : NAN, 6);
        fprintf(f, ",\"peak_dtype\":\"%s\"", prec);
        json_num(f, "mfu", mfu, 6);
        json_num(f, "host_us_per_step", host_us, 6);
        json_num(f, "launch_sync_ms_per_step", host_wall_ms, 6);
        fprintf(f,
                ",\"arena_bytes\":%lld,\"lower_bound_bytes\":%lld,\"arena_ratio\":%.6f,"
                "\"persistent_bytes\":%lld,\"input_bytes\":%lld,\"no_reuse_bytes\":%lld,"
                "\"params\":%lld,\"nodes\":%d,\"plan_hash\":\"%016llx\"",
                (long long)p->arena_bytes, (long long)p->lower_bound_bytes, ratio,
                (long long)p->persistent_bytes, (long long)p->role_bytes[ROLE_INPUT],
                (long long)p->no_reuse_bytes, (long long)p->io.n_params, g->nn,
                (unsigned long long)p->hash);
        json_num(f, "loss", loss, 6);
        json_num(f, "setup_ms", setup_ms, 6);
        json_num(f, "warmup_ms", warm_ms, 6);
        fprintf(f, ",\"steps_ms\":[");
        for (int i = 0; i < a.iters; i++) fprintf(f, "%s%.5g", i ? "," : "", ms[i]);
        fprintf(f, "]");
        if (have_breakdown) {
            json_num(f, "eager_total_ms", eager_total, 6);
            fprintf(f, ",\"breakdown\":[");
            for (int r = 0; r < nrows; r++) {
                const op_row *o = &rows[r];
                fprintf(f, "%s{\"op\":\"%s\",\"nodes\":%d,\"matmul\":%s", r ? "," : "",
                        sg_ops[o->op].name, o->nodes, o->matmul ? "true" : "false");
                json_num(f, "ms", o->ms, 6);
                json_num(f, "pct", eager_total > 0 ? 100 * o->ms / eager_total : NAN, 4);
                json_num(f, "gflop", o->flops / 1e9, 6);
                json_num(f, "gflops_per_s", o->ms > 0 ? o->flops / (o->ms / 1e3) / 1e9 : NAN, 6);
                fprintf(f, "}");
            }
            fprintf(f, "]");
        } else {
            fprintf(f, ",\"breakdown\":null");
        }
        fprintf(f, "}\n");
    } else {
        char b1[32], b2[32], b3[32], b4[32];
        printf("bench: %s, batch %d, %s, %s backend, %lld parameters, %d nodes\n", cfg.name,
               cfg.batch, prec, backend, (long long)p->io.n_params, g->nn);
        printf("  device        %s\n", env);
        printf("  data          %s\n", data_source);
        printf("  step          %.3f ms median  (min %.3f  p10 %.3f  p90 %.3f  max %.3f; %d "
               "replays after %d warm-up, %s)\n",
               s.median, s.min, s.p10, s.p90, s.max, a.iters, a.warmup, timing);
        printf("  throughput    %.1f img/s\n", img_s);
        printf("  FLOPs         %.4g GFLOP/step (matmul %.4g), %.3g TFLOP/s achieved\n",
               p->flops / 1e9, p->matmul_flops / 1e9, tflops);
        if (peak > 0)
            printf("  MFU           %.1f%%  (matmul FLOPs / step time / measured %s matmul peak "
                   "%.1f TFLOP/s)\n",
                   100 * mfu, prec, peak);
        else
            printf("  MFU           n/a (the %s backend measures no matmul peak)\n", backend);
        if (isfinite(host_us))
            printf("  host          %.2f us per replay launch (%d back-to-back launches; "
                   "launch + sync %.3f ms/step)\n",
                   host_us, a.iters, host_wall_ms);
        else
            printf("  host          n/a (the %s backend runs the step synchronously)\n", backend);
        printf("  arena         %s; lower bound %s (ratio %.4f); persistent %s; dataset %s\n",
               mib(p->arena_bytes, b1), mib(p->lower_bound_bytes, b2), ratio,
               mib(p->persistent_bytes, b3), mib(p->role_bytes[ROLE_INPUT], b4));
        printf("  loss          %.5g after %lld steps\n", loss, (long long)sg_exec_step_count(&e));
        if (have_breakdown) {
            printf("per-op breakdown (each node run once eagerly and timed; sum %.3f ms vs "
                   "%.3f ms replayed):\n",
                   eager_total, s.median);
            printf("  %-20s %6s %11s %7s %10s %10s\n", "op", "nodes", "ms", "%", "GFLOP",
                   "GFLOP/s");
            for (int r = 0; r < nrows; r++) {
                const op_row *o = &rows[r];
                printf("  %-20s %6d %11.4f %7.2f %10.3f ", sg_ops[o->op].name, o->nodes, o->ms,
                       eager_total > 0 ? 100 * o->ms / eager_total : 0.0, o->flops / 1e9);
                if (o->matmul && o->ms > 0)
                    printf("%10.1f\n", o->flops / (o->ms / 1e3) / 1e9);
                else
                    printf("%10s\n", "-");
            }
        } else {
            printf("per-op breakdown: %s\n",
                   a.breakdown ? "not available on this backend" : "skipped (--no-breakdown)");
        }
    }
    free(ms), free(node_ms), free(rows);
    sg_exec_free(&e);
    return 0;
}
