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
 * activation dtype), the arena against its lower bound, the host time per replay (CUDA only:
 * the median host time of one launch on an idle stream; and the wall time per step of n
 * launches back to back, then a wait), and a per-op breakdown: every schedule node
 * run eagerly once and timed, summed per op family (conv families split by the engine that ran
 * them: own or cudnn; attention rows labelled with SG_ATTN's engine, gemm or fused: run bench
 * once with each to compare them), so the next optimisation is aimed, with beside each row
 * (CUDA) its nodes captured in schedule order as one graph and replayed (the family's cost
 * inside a replay, without the eager launch gaps; run last: it leaves the arena as no step
 * would), the bytes its nodes move at least (sg_node_bytes) and the GB/s that makes, and its
 * floor: each node at the longer of its matmul FLOPs at the measured matmul peak and its bytes
 * at the measured copy bandwidth (mem_peak_gbs; either peak may be given instead: --peak-tflops,
 * --peak-gbs), so a family far above its floor is a kernel to
 * mend and one near it needs fusion; and a per-conv-layer table:
 * every convolution-like node (conv forward, backward-data, backward-filter, and the own-only
 * fused ones: conv2d_sc, upconv2d and its backward passes; the fusions each carries named)
 * timed eagerly on the own engine, where the backend pinned a cuDNN engine for it on cuDNN, and
 * where the own kernels' Hopper generation takes it on those (wgmma: bf16 on a compute
 * capability 9.0 GPU, whatever the step runs), with the engine the step uses named, its FLOPs and
 * TFLOP/s, and the time of a plain GEMM of its implicit GEMM's size and dtype on the same backend
 * (time_gemm: cuBLASLt on CUDA, each distinct size timed once; '-' on the CPU) with the layer's %
 * of that GEMM's TFLOP/s; then the fusion savings: the plan's per-fusion counts, bytes and FLOPs
 * removed, the fused nodes' measured time, and the --fuse 0 command that measures the unfused
 * alternative.
 *
 * --tune-engines FILE measures the per-layer engine table (planner/engine_table.h) instead:
 * the step planned with every conv layer on own (fused), again on the wgmma kernels where the
 * backend has them (bf16 on a compute capability 9.0 GPU), then with every layer on cuDNN
 * (nothing fused into a conv), every node of each timed eagerly --iters times (median), each
 * node charged to its conv layer (its conv nodes, the normalisation feeding it and that one's
 * recomputation and backward), and per layer the fastest whole alternative written to FILE
 * (own with its tensor-core generation, "tc", or cudnn).
 * --engine-table FILE benches the step planned and run with such a table.
 *
 * The side-by-side with PyTorch (tools/torch_ref/bench.py) is assembled by tools/bench.sh and
 * tools/bench_report.py from this tool's --json output.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/dataset.h"
#include "graph/engine_table_io.h"
#include "graph/engine_tune.h"
#include "graph/exec.h"
#include "planner/op_dims.h"
#include "tools/cli.h"

#ifndef SG_BUILD_ID
#define SG_BUILD_ID "unknown"
#endif

#define BENCH_DEFAULT_DATA_N 4096 /* same as tools/torch_ref/bench.py --ndata */

static void usage(FILE *f) {
    fprintf(f,
            "usage: bench [flags]\n"
            "Time the planned training step (on CUDA: the replayed CUDA graph) and break it\n"
            "down per op family.\n\n"
            "  --model NAME         unet_cifar (default), unet_adm64, unet_tiny, unet_fmnist\n"
            "  --backend B          cpu | cuda (default: cuda; with no GPU, bench refuses\n"
            "                       unless --backend cpu is given: a CPU step of unet_cifar\n"
            "                       takes minutes, and the default run would take hours)\n"
            "  --warmup N           untimed steps first (default 10; on CUDA they include the\n"
            "                       eager step and the graph capture)\n"
            "  --iters N            timed replays (default 50 on cuda, 5 on cpu)\n"
            "  --data SPEC          synthetic (default: %d procedural images sized to the\n"
            "                       model, or --data-n of them), synthetic:N, or any train\n"
            "                       --data spec (fmnist, cifar10:DIR, idx:FILE, folder:DIR)\n"
            "  --seed N             initialisation and data seed (default 0)\n"
            "  --conv-engine E      auto (default: cudnn where built with it, 1x1 convs as\n"
            "                       cuBLASLt GEMMs) | own | cudnn (env SG_CONV_WINO=1: own's\n"
            "                       fp32 3x3 stride-1 convs as Winograd F(2x2, 3x3);\n"
            "                       SG_CONV_F32_TC=1: own's fp32 tiles' products on the\n"
            "                       tensor cores, 3xTF32; the per-layer table times the\n"
            "                       nodes each takes both ways)\n"
            "  --engine-table FILE  plan and run with a per-layer conv engine table (see\n"
            "                       --tune-engines; --conv-engine own|cudnn override its\n"
            "                       engines, not its plan)\n"
            "  --tune-engines FILE  measure the table instead of benching: the step with every\n"
            "                       conv layer on own (fused: mma.sync, then the wgmma\n"
            "                       kernels on a Hopper GPU in bf16) and with every layer on\n"
            "                       cudnn (unfused), each node timed eagerly --iters times\n"
            "                       (median; 5 is plenty on a GPU), charged to its layer; the\n"
            "                       fastest alternative per layer is written to FILE\n"
            "                       (fp32: each own 3x3 pass also timed as Winograd, and a\n"
            "                       layer marked \"wino\" where 1%% faster that way)\n"
            "                       (cudnn_ms null where cuDNN is unavailable:\n"
            "                       the CPU, a build without cuDNN); the cudnn step's engines\n"
            "                       are chosen by timing (--cudnn-time) and written per layer\n"
            "                       and pass: every run given the table asks for them\n"
            "  --cudnn-time N       with --tune-engines: runs of each deterministic cuDNN\n"
            "                       candidate (heuristics modes A, B and fallback) timed to\n"
            "                       choose a convolution's engine (default 10; 0: the\n"
            "                       heuristics' first, nothing recorded)\n"
            "  --gemm-time N        with --tune-engines: runs of each cuBLASLt candidate\n"
            "                       algorithm timed, per GEMM of the chosen table's step, last;\n"
            "                       the fastest where 3%% faster than the heuristic's first,\n"
            "                       else the first, written per GEMM (\"gemms\"): every run\n"
            "                       given the table pins them (default 10; 0: none recorded)\n"
            "  --knob-time N        with --tune-engines: replays of the chosen table's step\n"
            "                       per trial of each step knob that leaves the bits alone\n"
            "                       (SG_PDL, SG_TC_HALO, SG_TC_DGRAD_STATS, SG_FUSE_STATS,\n"
            "                       SG_NORM_ONEPASS; one at a time, kept where 1%% faster),\n"
            "                       last; where the table\n"
            "                       runs nodes on the wgmma kernels, then their schedule\n"
            "                       (SG_WG_PERSIST, SG_WG_FILL) for the table and the layers'\n"
            "                       own, the same way; the values go into the table\n"
            "                       (\"knobs\", \"wg_sched\"): a run given it applies each\n"
            "                       one its environment leaves unset (default 20; 0: none)\n"
            "  --peak-tflops X      the matmul peak MFU and the floors divide by (e.g. a\n"
            "                       datasheet's), instead of the one measured (CUDA: a cuBLAS\n"
            "                       GEMM; the CPU measures none); the report says given\n"
            "  --peak-gbs X         the memory bandwidth the floors divide by, instead of the\n"
            "                       one measured (a large device-to-device copy; the CPU:\n"
            "                       memcpy)\n"
            "  --no-breakdown       skip the per-op and per-conv-layer (eager, per-node\n"
            "                       timed) passes, and the per-op replay column (CUDA: each\n"
            "                       op family's nodes captured as one graph and replayed)\n"
            "  (the per-op table's memory columns: the bytes each family moves at least, its\n"
            "   GB/s, and its floor: each node at the longer of its matmul FLOPs at the\n"
            "   measured matmul peak and its bytes at the measured copy bandwidth (CUDA; the\n"
            "   CPU measures no matmul peak: floors of memory-bound rows only))\n"
            "  (the per-conv-layer table: every conv-like node, fused ones included, with\n"
            "   its FLOPs, TFLOP/s and %% of a same-size cuBLASLt GEMM (CUDA; '-' on the\n"
            "   CPU); then the fusion savings and the --fuse 0 command to compare)\n"
            "  (env SG_ATTN=gemm|fused picks the attention engine; the breakdown's\n"
            "   attention rows say which ran)\n"
            "  --json               one JSON object on stdout instead of the report\n"
            "  --help               this text\n"
            "model flags:\n%s",
            BENCH_DEFAULT_DATA_N, sg_model_flags_help);
}

typedef struct {
    double median, min, p10, p90, max, mean;
} stats;

static stats summarize(const float *ms, int n) {
    stats s = {0};
    float *c = malloc(sizeof(float) * (size_t)n);
    if (!c || n <= 0) return free(c), s;
    memcpy(c, ms, sizeof(float) * (size_t)n);
    sg_sort_f32(c, n); /* quantiles as numpy's default, and bench.py's */
    s.median = sg_quantile_sorted(c, n, 0.5), s.p10 = sg_quantile_sorted(c, n, 0.1),
    s.p90 = sg_quantile_sorted(c, n, 0.9);
    s.min = c[0], s.max = c[n - 1];
    for (int i = 0; i < n; i++) s.mean += c[i];
    s.mean /= n;
    free(c);
    return s;
}

/* A row of the per-layer table: every convolution-like node, the engine-chosen conv passes
 * (sg_op_is_conv) and the own-only fused ones (conv2 + folded shortcut, the upsample convs). */
static int is_layer_op(int op) {
    return sg_op_is_conv((sg_op)op) || op == OP_CONV2D_SC || op == OP_UPCONV2D ||
           op == OP_UPCONV2D_BWD_DATA || op == OP_UPCONV2D_BWD_WEIGHT;
}
static int is_attn_op(int op) {
    return sg_op_is_attention((sg_op)op);
}

/* The implicit GEMM of a layer node, as an M x N x K dense GEMM doing the node's FLOPs (2MNK is
 * the planner's flops rule for the node; tests/test_bench.sh checks it). conv_tc.cu's header:
 *   forward (conv2d, conv2d_add)  M = N*Ho*Wo, N = Co, K = taps*Ci; conv2d_sc: K + Cin (the
 *                                 folded 1x1 shortcut's reduction rows);
 *   backward data                 M = N*Ho*Wo, N = Ci, K = taps*Co (stride 1: M is the input
 *                                 pixels; stride 2: the four parity classes together);
 *   backward weight               M = Co, N = taps*Ci, K = N*Ho*Wo;
 *   upconv2d (sub-pixel form: four 2x2 convs of the low-res x, one per output parity)
 *                                 M = N*2H*2W, N = Co, K = 4*Ci;
 *   upconv2d_bwd_data             M = N*H*W, N = Ci, K = 16*Co (4 parities x 4 taps);
 *   upconv2d_bwd_weight           M = Co, N = 16*Ci (the folded taps), K = N*H*W. */
static void layer_gemm(const sg_graph *g, int node, int64_t *M, int64_t *N, int64_t *K) {
    const sg_node *nd = &g->n[node];
    const int op = nd->op;
    if (op == OP_UPCONV2D || op == OP_UPCONV2D_BWD_DATA || op == OP_UPCONV2D_BWD_WEIGHT) {
        sg_conv_dims d = sg_upconv_dims_of(g, nd);
        const int64_t lo = (int64_t)d.N * d.H * d.W;
        if (op == OP_UPCONV2D) *M = 4 * lo, *N = d.Co, *K = 4 * (int64_t)d.Ci;
        if (op == OP_UPCONV2D_BWD_DATA) *M = lo, *N = d.Ci, *K = 16 * (int64_t)d.Co;
        if (op == OP_UPCONV2D_BWD_WEIGHT) *M = d.Co, *N = 16 * (int64_t)d.Ci, *K = lo;
        return;
    }
    sg_conv_dims d = sg_conv_dims_of(g, nd);
    const int64_t P = (int64_t)d.N * d.Ho * d.Wo, taps = (int64_t)d.K * d.K;
    if (op == OP_CONV2D_BWD_DATA)
        *M = P, *N = d.Ci, *K = taps * d.Co;
    else if (op == OP_CONV2D_BWD_WEIGHT)
        *M = d.Co, *N = taps * d.Ci, *K = P;
    else
        *M = P, *N = d.Co, *K = taps * d.Ci + (op == OP_CONV2D_SC ? g->t[nd->in[3]].shape[3] : 0);
}

/* Does the node read a virtual normalised tensor (a GroupNorm + SiLU done in its prologue)? */
static int reads_fused_norm(const sg_graph *g, int node) {
    const sg_node *nd = &g->n[node];
    for (int k = 0; k < nd->nin; k++) {
        const sg_tensor *t = &g->t[nd->in[k]];
        if (t->vnorm >= 0) return 1;
        for (int q = 0; q < t->nparts; q++)
            if (g->t[t->parts[q]].vnorm >= 0) return 1;
    }
    return 0;
}

/* the fusions a layer node carries, e.g. "norm+residual" ("-" for none) */
static void layer_fusions(const sg_graph *g, int node, char *buf, int cap) {
    const int op = g->n[node].op;
    snprintf(buf, (size_t)cap, "%s%s%s%s", reads_fused_norm(g, node) ? "+norm" : "",
             op == OP_CONV2D_ADD ? "+residual" : "", op == OP_CONV2D_SC ? "+shortcut" : "",
             op == OP_UPCONV2D || op == OP_UPCONV2D_BWD_DATA || op == OP_UPCONV2D_BWD_WEIGHT
                 ? "+upsample"
                 : "");
    if (buf[0] == '+')
        memmove(buf, buf + 1, strlen(buf));
    else
        snprintf(buf, (size_t)cap, "-");
}

typedef struct {
    int op, nodes, matmul, engine; /* engine: SG_CONV_ENGINE_* of conv rows, 0 for the rest */
    char variant[8]; /* attention rows: the engine that ran them (SG_ATTN: "gemm" / "fused") */
    double ms, flops;
    double replay_ms;   /* the row's nodes captured as one graph and replayed; NAN: not measured */
    int graph_types[4]; /* that graph's commands: kernel, memset, memcpy, other; -1: unknown */
    double bytes;       /* its nodes' sg_node_bytes summed */
    double floor_ms;    /* its nodes' floors summed (node_floor_ms); NAN: a peak not measured */
} op_row;

static int cmp_row(const void *a, const void *b) {
    const op_row *x = a, *y = b;
    return x->ms > y->ms ? -1 : x->ms < y->ms;
}

/* a finite number, or null */
static json_t *num_or_null(double v) {
    return isfinite(v) ? json_real(v) : json_null();
}

static const char *mib(int64_t b, char *buf) {
    snprintf(buf, 32, "%.1f MiB", (double)b / 1048576.0);
    return buf;
}

typedef struct {
    const char *backend, *data;
    int warmup, iters, json, breakdown, data_n_set, conv_engine;
    int cudnn_time; /* --cudnn-time: runs per cuDNN candidate when tuning; -1: the default */
    int gemm_time;  /* --gemm-time: runs per cuBLASLt candidate when tuning; -1: the default */
    int knob_time;  /* --knob-time: replays per step-knob trial when tuning; -1: the default */
    float peak_tflops, peak_gbs; /* --peak-tflops, --peak-gbs: given, not measured; 0: measure */
    uint64_t seed;
    const char *tune_path, *table_path; /* --tune-engines, --engine-table */
    sg_engine_table table;
} bench_args;

/* 0 parsed, 1 --help printed, 2 usage error (printed) */
static int parse_args(int argc, char **argv, bench_args *a, sg_model_cfg *cfg) {
    if (cli_model_prelude("bench", argc, argv, "unet_cifar", cfg)) return 2;
    cli_args c;
    cli_args_init(&c, "bench", argc, argv);
    while (cli_next(&c)) {
        int bad = 0;
        if (cli_is(&c, "--help"))
            return usage(stdout), 1;
        else if (cli_is(&c, "--json"))
            a->json = 1;
        else if (cli_is(&c, "--no-breakdown"))
            a->breakdown = 0;
        else if (cli_is(&c, "--backend"))
            bad = !(a->backend = cli_value(&c)) || cli_check_backend("bench", a->backend);
        else if (cli_is(&c, "--data"))
            bad = !(a->data = cli_value(&c));
        else if (cli_is(&c, "--conv-engine"))
            bad = cli_conv_engine(&c, &a->conv_engine);
        else if (cli_is(&c, "--tune-engines"))
            bad = !(a->tune_path = cli_value(&c));
        else if (cli_is(&c, "--cudnn-time"))
            bad = cli_int(&c, 0, 1000, &a->cudnn_time);
        else if (cli_is(&c, "--gemm-time"))
            bad = cli_int(&c, 0, 1000, &a->gemm_time);
        else if (cli_is(&c, "--knob-time"))
            bad = cli_int(&c, 0, 1000, &a->knob_time);
        else if (cli_is(&c, "--peak-tflops"))
            bad = cli_float(&c, 1e-3, 1e6, &a->peak_tflops);
        else if (cli_is(&c, "--peak-gbs"))
            bad = cli_float(&c, 1e-3, 1e7, &a->peak_gbs);
        else if (cli_is(&c, "--engine-table")) {
            bad = cli_engine_table(&c, &a->table, &a->table_path);
            if (!bad) cfg->engines = &a->table;
        } else if (cli_is(&c, "--warmup"))
            bad = cli_int(&c, 0, 1000000, &a->warmup);
        else if (cli_is(&c, "--iters"))
            bad = cli_int(&c, 1, 1000000, &a->iters);
        else if (cli_is(&c, "--seed"))
            bad = cli_u64(&c, &a->seed);
        else {
            if (cli_is(&c, "--data-n")) a->data_n_set = 1;
            int r = cli_model_flag(&c, cfg);
            if (!r) return cli_unknown(&c);
            bad = r < 0;
        }
        if (bad) return 2;
    }
    if (a->cudnn_time >= 0 && !a->tune_path) {
        fprintf(stderr, "bench: --cudnn-time chooses the cuDNN engines of --tune-engines: give "
                        "both\n");
        return 2;
    }
    if (a->gemm_time >= 0 && !a->tune_path) {
        fprintf(stderr, "bench: --gemm-time chooses the GEMM algorithms of --tune-engines: give "
                        "both\n");
        return 2;
    }
    if (a->knob_time >= 0 && !a->tune_path) {
        fprintf(stderr, "bench: --knob-time chooses the step knobs of --tune-engines: give "
                        "both\n");
        return 2;
    }
    if (a->tune_path && a->table_path) {
        fprintf(stderr, "bench: --tune-engines measures a table, --engine-table uses one: give "
                        "one\n");
        return 2;
    }
    return 0;
}

/* The dataset: synthetic images sized to the model unless a real spec is given: the preset's
 * image size (unet_fmnist: 28 x 28, padded to the model's 32 as the real set is), or the
 * model's --img where that is smaller. */
static int load_data(const bench_args *a, sg_model_cfg *cfg, sg_dataset *ds) {
    int64_t syn_n = -1;
    if (!strcmp(a->data, "synthetic"))
        syn_n = a->data_n_set || cfg->data_n < BENCH_DEFAULT_DATA_N ? cfg->data_n
                                                                    : BENCH_DEFAULT_DATA_N;
    else if (!strncmp(a->data, "synthetic:", 10) &&
             cli_parse_i64("--data synthetic:N", a->data + 10, 1, 1LL << 31, &syn_n))
        return 2;
    if (syn_n > 0) {
        const int h = cfg->data_h < cfg->img ? cfg->data_h : cfg->img,
                  w = cfg->data_w < cfg->img ? cfg->data_w : cfg->img;
        if (data_synthetic(ds, syn_n, h, w, cfg->in_ch)) return 2;
    } else {
        if (data_load_for_model(ds, a->data, cfg->img, cfg->in_ch)) return 1;
        if (ds->c != cfg->in_ch || ds->h > cfg->img || ds->w > cfg->img) {
            sg_set_error("%s is %dx%dx%d; model %s takes %dx%dx%d at most", ds->source, ds->h,
                         ds->w, ds->c, cfg->name, cfg->img, cfg->img, cfg->in_ch);
            data_free(ds);
            return 2;
        }
    }
    cfg->data_n = ds->n, cfg->data_h = ds->h, cfg->data_w = ds->w;
    return 0;
}

/* What one bench run measured. */
typedef struct {
    const char *backend, *timing;
    char data_source[512], env[2048];
    int cuda, nrows, have_breakdown;
    float *ms, *node_ms, loss;
    int *node_key; /* each node's breakdown row (node_row), once */
    op_row *rows;
    /* the per-layer table: per convolution-like node (is_layer_op), eager ms on own, on cudnn
     * and on own's wgmma kernels (-1: not run; conv_wgh, conv_wgt: on their resident-halo
     * kernels and per tap, where a halo kernel takes the node), the engine the step runs it on,
     * its FLOPs, its same-size GEMM and that GEMM's ms (-1: the backend has no time_gemm) */
    int nconv;
    int *conv_node;
    float *conv_own, *conv_dnn, *conv_wg, *conv_wgh, *conv_wgt, *conv_gemm;
    /* own with the Winograd form of the fp32 3x3 convolutions on and off (SG_TIME_OWN_WINO,
     * _DIRECT), where it takes the node; -1 elsewhere */
    float *conv_wino, *conv_direct;
    /* own on the direct tiles with their products on the tensor cores (3xTF32) and on the CUDA
     * cores' FMAs (SG_TIME_OWN_TILES_TC, _FMA), where a tile launch takes the node; -1 elsewhere */
    float *conv_tc, *conv_fma;
    double *conv_flops;
    int64_t (*conv_mnk)[3];
    int gemms_timed; /* time_gemm calls: one per distinct (M, N, K) */
    /* the attention table: per attention node (forward, backward), eager ms on each engine
     * (SG_TIME_ATTN_GEMM, _FUSED; -1: not run or not taken) and the one the step runs */
    int nattn;
    int *attn_node;
    float (*attn_ms)[2];
    char (*attn_engine)[16];
    char (*conv_engine)[96];
    double setup_ms, warm_ms, host_us, host_wall_ms, eager_total, peak;
    double host_us_captured; /* the graph as the libraries captured it, where it differs */
    double bytes_step;       /* the plan's nodes' sg_node_bytes summed */
    double bw;               /* measured copy bandwidth, GB/s (mem_peak_gbs); 0: not measured */
    double floor_ms;         /* every node's floor summed; NAN: a peak not measured */
    double replay_total;     /* the rows' replay_ms summed; NAN: not measured */
    stats s;
} bench_result;

/* Two paired columns of the per-layer table: node i timed as `first` into *t0, then, where that
 * takes it (*t0 >= 0), as `second` into *t1 (both -1 on entry). A failure says so on stderr (what:
 * the two forms) and leaves both empty, as does a node the second does not take: the two go as a
 * pair. A failed timing is not the run's: a fault on the device would fail its next call. */
static void time_pair(sg_backend *be, const sg_plan *p, int i, int first, float *t0, int second,
                      float *t1, const char *what) {
    if (be->time_node_engine(be, p, i, first, t0) ||
        (*t0 >= 0 && be->time_node_engine(be, p, i, second, t1))) {
        fprintf(stderr, "bench: node %d %s: %s (those columns left empty)\n", i, what,
                sg_last_error());
        *t0 = *t1 = -1;
    }
    if (*t1 < 0) *t0 = -1;
}

/* The breakdown row of node i: its op, and for a conv node its engine (SG_CONV_ENGINE_*, 0
 * for the rest); name: the backend's engine name of it ("" where it has none). */
static int node_row(sg_backend *be, const sg_plan *p, int i, char *name, int cap) {
    name[0] = 0;
    if (be->node_engine) be->node_engine(be, p, i, name, cap);
    const int eng = !strncmp(name, "own", 3)     ? SG_CONV_ENGINE_OWN
                    : !strncmp(name, "cudnn", 5) ? SG_CONV_ENGINE_CUDNN
                                                 : 0;
    return 3 * (int)p->g.n[i].op + eng;
}

/* Node i's floor, ms: the longer of its matmul FLOPs at the matmul peak and its bytes
 * (sg_node_bytes) at the copy bandwidth (other FLOPs are not a roof); NAN where one it needs
 * is not measured. */
static double node_floor_ms(const sg_graph *g, int i, double peak_tflops, double bw_gbs) {
    const sg_op op = g->n[i].op;
    const double mm = sg_ops[op].matmul && sg_ops[op].flops ? sg_ops[op].flops(g, &g->n[i]) : 0;
    const double bytes = (double)sg_node_bytes(g, i);
    const double t_mm = mm <= 0 ? 0 : peak_tflops > 0 ? mm / (peak_tflops * 1e9) : NAN;
    const double t_mem = bytes <= 0 ? 0 : bw_gbs > 0 ? bytes / (bw_gbs * 1e6) : NAN;
    return isnan(t_mm) || isnan(t_mem) ? NAN : fmax(t_mm, t_mem);
}

/* the breakdown rows' floors and the step's, from the measured peaks (r->peak, r->bw) */
static void node_floors(const sg_graph *g, bench_result *r) {
    r->floor_ms = 0;
    for (int k = 0; k < r->nrows; k++) r->rows[k].floor_ms = 0;
    for (int i = 0; i < g->nn; i++) {
        const double f = node_floor_ms(g, i, r->peak, r->bw);
        r->floor_ms += f;
        for (int k = 0; k < r->nrows; k++)
            if (3 * r->rows[k].op + r->rows[k].engine == r->node_key[i]) r->rows[k].floor_ms += f;
    }
}

/* Warm-up, the timed replays, the host time per launch, the loss, the per-op breakdown. */
static int measure(const bench_args *a, sg_exec *e, bench_result *r) {
    sg_backend *be = e->be;
    const sg_plan *p = &e->plan;
    const sg_graph *g = &p->g;
    r->ms = calloc((size_t)a->iters, sizeof(float));
    r->node_ms = calloc((size_t)g->nn, sizeof(float));
    r->node_key = calloc((size_t)g->nn + 1, sizeof(int));
    r->rows = calloc(3 * OP_COUNT, sizeof(op_row)); /* (op, engine) */
    if (!r->ms || !r->node_ms || !r->node_key || !r->rows)
        return sg_set_error("out of host memory");
    /* warm-up (CUDA: eager step, capture, replays), then the timed replays */
    double t_warm = cli_now_ms();
    int rc = SG_OK;
    for (int i = 0; i < a->warmup && !rc; i++) rc = be->run_step(be, p);
    if (!rc) rc = be->sync(be);
    r->warm_ms = cli_now_ms() - t_warm;
    r->timing = r->cuda ? "cuda-events" : "host-clock";
    if (!rc && be->time_steps) {
        rc = be->time_steps(be, p, a->iters, r->ms);
    } else if (!rc) { /* a backend without the timing hook: host clock around step + sync */
        r->timing = "host-clock";
        for (int i = 0; i < a->iters && !rc; i++) {
            double t0 = cli_now_ms();
            rc = be->run_step(be, p);
            if (!rc) rc = be->sync(be);
            r->ms[i] = (float)(cli_now_ms() - t0);
        }
    }
    if (!rc) rc = be->sync(be);
    /* host time per replay: each launch timed alone on the host, issued on an idle stream
     * (the median of n): what the host spends on a step while the device queue has room.
     * Launches back to back block once the queue is full (the first GPU run's batch-128
     * figure, 20 ms a launch, was that wait), so they give the launch + sync wall time per
     * step instead. */
    r->host_us = r->host_wall_ms = r->host_us_captured = NAN;
    if (!rc && r->cuda) {
        float *launch_us = calloc((size_t)a->iters, sizeof(float));
        if (!launch_us) return sg_set_error("out of host memory");
        for (int i = 0; i < a->iters && !rc; i++) {
            rc = be->sync(be);
            const double t0 = cli_now_ms();
            if (!rc) rc = be->run_step(be, p);
            launch_us[i] = (float)((cli_now_ms() - t0) * 1e3);
        }
        if (!rc) rc = be->sync(be);
        if (!rc) r->host_us = summarize(launch_us, a->iters).median;
        /* the same for the graph as captured, where ours differs (the libraries' memset nodes
         * made kernel nodes): both in one run say what that change saves. At most 10 launches
         * (each runs a step: a slow step's row stays short) */
        const int nc = a->iters < 10 ? a->iters : 10;
        if (!rc && be->time_launch_captured) rc = be->time_launch_captured(be, p, nc, launch_us);
        if (!rc && be->time_launch_captured && launch_us[0] >= 0)
            r->host_us_captured = summarize(launch_us, nc).median;
        free(launch_us);
        const double t0 = cli_now_ms();
        for (int i = 0; i < a->iters && !rc; i++) rc = be->run_step(be, p);
        if (!rc) rc = be->sync(be);
        r->host_wall_ms = (cli_now_ms() - t0) / a->iters;
    }
    r->loss = NAN;
    if (!rc && p->io.loss >= 0) rc = sg_exec_read(e, p->io.loss, &r->loss);
    /* the per-op breakdown: every node once, eagerly, timed */
    r->have_breakdown = a->breakdown && be->time_nodes;
    if (!rc && r->have_breakdown) {
        rc = be->time_nodes(be, p, r->node_ms);
        if (!rc) rc = be->sync(be);
        for (int i = 0; i < g->nn && !rc; i++) {
            char name[96];
            const int key = r->node_key[i] = node_row(be, p, i, name, sizeof name);
            const int op = key / 3, eng = key % 3;
            op_row *o = &r->rows[key];
            o->op = op, o->engine = eng, o->nodes++, o->matmul = sg_ops[op].matmul;
            if (!eng && (!strcmp(name, "gemm") || !strcmp(name, "fused")))
                snprintf(o->variant, sizeof o->variant, "%.7s", name);
            o->ms += r->node_ms[i];
            if (sg_ops[op].flops) o->flops += sg_ops[op].flops(g, &g->n[i]);
            o->bytes += (double)sg_node_bytes(g, i);
            r->eager_total += r->node_ms[i];
        }
        for (int k = 0; k < 3 * OP_COUNT; k++)
            if (r->rows[k].nodes) r->rows[r->nrows++] = r->rows[k];
        qsort(r->rows, (size_t)r->nrows, sizeof(op_row), cmp_row);
        for (int k = 0; k < r->nrows; k++) {
            r->rows[k].replay_ms = NAN;
            for (int q = 0; q < 4; q++) r->rows[k].graph_types[q] = -1;
        }
    }
    /* the per-layer table: each convolution-like node on own, then on cudnn where it is
     * pinned (a node no engine choice covers, or a backend with one engine: its eager time
     * from the breakdown), and its same-size GEMM, timed once per distinct (M, N, K) */
    if (!rc && r->have_breakdown) {
        for (int i = 0; i < g->nn; i++) r->nconv += is_layer_op(g->n[i].op);
        const size_t n1 = (size_t)r->nconv + 1;
        r->conv_node = calloc(n1, sizeof(int));
        r->conv_own = calloc(n1, sizeof(float));
        r->conv_dnn = calloc(n1, sizeof(float));
        r->conv_wg = calloc(n1, sizeof(float));
        r->conv_wgh = calloc(n1, sizeof(float));
        r->conv_wgt = calloc(n1, sizeof(float));
        r->conv_wino = calloc(n1, sizeof(float));
        r->conv_direct = calloc(n1, sizeof(float));
        r->conv_tc = calloc(n1, sizeof(float));
        r->conv_fma = calloc(n1, sizeof(float));
        r->conv_gemm = calloc(n1, sizeof(float));
        r->conv_flops = calloc(n1, sizeof(double));
        r->conv_mnk = calloc(n1, sizeof *r->conv_mnk);
        r->conv_engine = calloc(n1, sizeof *r->conv_engine);
        if (!r->conv_node || !r->conv_own || !r->conv_dnn || !r->conv_wg || !r->conv_wgh ||
            !r->conv_wgt || !r->conv_wino || !r->conv_direct || !r->conv_tc || !r->conv_fma ||
            !r->conv_gemm || !r->conv_flops || !r->conv_mnk || !r->conv_engine)
            return sg_set_error("out of host memory");
        const int dt = p->cfg.act_dt;
        for (int i = 0, k = 0; i < g->nn && !rc; i++) {
            if (!is_layer_op(g->n[i].op)) continue;
            r->conv_node[k] = i;
            r->conv_own[k] = r->conv_dnn[k] = r->conv_wg[k] = r->conv_gemm[k] = -1;
            r->conv_wgh[k] = r->conv_wgt[k] = r->conv_wino[k] = r->conv_direct[k] = -1;
            r->conv_tc[k] = r->conv_fma[k] = -1;
            if (be->node_engine) be->node_engine(be, p, i, r->conv_engine[k], 96);
            if (be->time_node_engine) {
                rc = be->time_node_engine(be, p, i, SG_CONV_ENGINE_OWN, &r->conv_own[k]);
                if (!rc) rc = be->time_node_engine(be, p, i, SG_CONV_ENGINE_CUDNN, &r->conv_dnn[k]);
                /* the own kernels' Hopper generation, where they take the node (a bf16 step on
                 * a compute capability 9.0 GPU): the column issue 17 is measured by. A failure
                 * there is said and leaves the column empty: the step's own numbers stand (a
                 * fault on the device would still fail the run's next call) */
                if (!rc && be->time_node_engine(be, p, i, SG_TIME_OWN_WGMMA, &r->conv_wg[k])) {
                    fprintf(stderr,
                            "bench: node %d on the wgmma kernels: %s (its wgmma columns "
                            "left empty)\n",
                            i, sg_last_error());
                    r->conv_wg[k] = -1;
                }
                /* ... on the resident-halo kernels and per tap, where a halo kernel takes it
                 * (whichever the step's knobs choose: the other is what a GPU must say) */
                if (!rc && r->conv_wg[k] >= 0)
                    time_pair(be, p, i, SG_TIME_WGMMA_HALO, &r->conv_wgh[k], SG_TIME_WGMMA_PER_TAP,
                              &r->conv_wgt[k], "on the wgmma halo or per-tap kernels");
                /* the own engine's fp32 3x3 pass as Winograd and on the direct tiles, where the
                 * Winograd form takes it (whichever SG_CONV_WINO chooses: the other is what a GPU
                 * must say) */
                if (!rc)
                    time_pair(be, p, i, SG_TIME_OWN_WINO, &r->conv_wino[k], SG_TIME_OWN_DIRECT,
                              &r->conv_direct[k], "as Winograd or on the direct tiles");
                /* the own engine's pass on the direct tiles with their products on the tensor
                 * cores and on the CUDA cores, where a tile launch takes it (whichever
                 * SG_CONV_F32_TC chooses: the other is what a GPU must say) */
                if (!rc)
                    time_pair(be, p, i, SG_TIME_OWN_TILES_TC, &r->conv_tc[k], SG_TIME_OWN_TILES_FMA,
                              &r->conv_fma[k], "on the tiles' tensor-core or FMA form");
            }
            if (r->conv_own[k] < 0) r->conv_own[k] = r->node_ms[i];
            r->conv_flops[k] = sg_ops[g->n[i].op].flops(g, &g->n[i]);
            int64_t *mnk = r->conv_mnk[k];
            layer_gemm(g, i, &mnk[0], &mnk[1], &mnk[2]);
            for (int q = 0; q < k && r->conv_gemm[k] < 0; q++) /* the cache: one run a size */
                if (!memcmp(r->conv_mnk[q], mnk, sizeof r->conv_mnk[q]))
                    r->conv_gemm[k] = r->conv_gemm[q];
            if (!rc && r->conv_gemm[k] < 0 && be->time_gemm) {
                rc = be->time_gemm(be, p, mnk[0], mnk[1], mnk[2], dt, &r->conv_gemm[k]);
                r->gemms_timed++;
            }
            k++;
        }
        if (!rc) rc = be->sync(be);
    }
    /* the attention table: each attention node on both engines (the same node, two bits) */
    if (!rc && r->have_breakdown && be->time_node_engine) {
        for (int i = 0; i < g->nn; i++) r->nattn += is_attn_op(g->n[i].op);
        const size_t n1 = (size_t)r->nattn + 1;
        r->attn_node = calloc(n1, sizeof(int));
        r->attn_ms = calloc(n1, sizeof *r->attn_ms);
        r->attn_engine = calloc(n1, sizeof *r->attn_engine);
        if (!r->attn_node || !r->attn_ms || !r->attn_engine)
            return sg_set_error("out of host memory");
        for (int i = 0, k = 0; i < g->nn && !rc; i++) {
            if (!is_attn_op(g->n[i].op)) continue;
            r->attn_node[k] = i;
            if (be->node_engine) be->node_engine(be, p, i, r->attn_engine[k], 16);
            rc = be->time_node_engine(be, p, i, SG_TIME_ATTN_GEMM, &r->attn_ms[k][0]);
            if (!rc) rc = be->time_node_engine(be, p, i, SG_TIME_ATTN_FUSED, &r->attn_ms[k][1]);
            k++;
        }
        if (!rc) rc = be->sync(be);
    }
    /* the replay column: each row's nodes captured in schedule order as one graph, replayed
     * (the median of up to 10); last, since it leaves the arena as no step would */
    r->replay_total = NAN;
    if (!rc && r->have_breakdown && be->time_nodes_replay) {
        const int reps = a->iters < 10 ? a->iters : 10;
        int *nodes = calloc((size_t)g->nn + 1, sizeof(int));
        float *ms = calloc((size_t)reps, sizeof(float));
        if (!nodes || !ms) rc = sg_set_error("out of host memory");
        if (!rc) r->replay_total = 0;
        for (int k = 0; k < r->nrows && !rc; k++) {
            const int want = 3 * r->rows[k].op + r->rows[k].engine;
            int n = 0;
            for (int i = 0; i < g->nn; i++)
                if (r->node_key[i] == want) nodes[n++] = i;
            rc = be->time_nodes_replay(be, p, nodes, n, reps, ms);
            r->rows[k].replay_ms = summarize(ms, reps).median;
            if (!rc && be->last_replay_types) be->last_replay_types(be, r->rows[k].graph_types);
            r->replay_total += r->rows[k].replay_ms;
        }
        free(nodes), free(ms);
    }
    if (rc) return rc;
#ifndef SG_CUDA_HOST
    r->peak = a->peak_tflops > 0       ? a->peak_tflops
              : be->matmul_peak_tflops ? be->matmul_peak_tflops(be, e->plan.cfg.act_dt)
                                       : 0;
    const int64_t bw_bytes = (int64_t)256 << 20; /* beyond any GPU's L2 cache */
#else /* bench on the host emulation (tests/cuda_host_bench.cmake): the peak's 8192^3 GEMMs        \
         would take hours there, and an emulated time is no peak: MFU n/a */
    r->peak = a->peak_tflops > 0 ? a->peak_tflops : 0;
    const int64_t bw_bytes = (int64_t)8 << 20; /* the columns' arithmetic, not a bandwidth */
#endif
    r->bytes_step = sg_graph_bytes(g);
    /* the floors: with the breakdown (the bandwidth is measured only for its columns) */
    r->floor_ms = NAN;
    if (a->peak_gbs > 0)
        r->bw = a->peak_gbs;
    else if (r->have_breakdown && be->mem_peak_gbs)
        r->bw = be->mem_peak_gbs(be, bw_bytes);
    if (r->have_breakdown) node_floors(g, r);
    r->s = summarize(r->ms, a->iters);
    if (be->describe) be->describe(be, r->env, sizeof r->env);
    if (!isfinite(r->loss))
        fprintf(stderr, "bench: warning: the loss after the timed steps is %g (not finite)\n",
                r->loss);
    return SG_OK;
}

/* a row's GB/s: its bytes over its replay ms, or its eager ms where not replayed */
static double row_gbs(const op_row *o) {
    const double t = isfinite(o->replay_ms) && o->replay_ms > 0 ? o->replay_ms : o->ms;
    return t > 0 ? o->bytes / (t * 1e6) : NAN;
}

static json_t *breakdown_json(const bench_result *r) {
    if (!r->have_breakdown) return json_null();
    json_t *rows = json_array();
    for (int k = 0; k < r->nrows; k++) {
        const op_row *o = &r->rows[k];
        json_array_append_new(
            rows,
            json_pack("{s:s, s:s, s:i, s:b, s:o, s:o, s:o, s:o, s:o}", "op", sg_ops[o->op].name,
                      "engine", o->engine ? sg_conv_engine_name(o->engine) : o->variant, "nodes",
                      o->nodes, "matmul", o->matmul, "ms", num_or_null(o->ms), "pct",
                      num_or_null(r->eager_total > 0 ? 100 * o->ms / r->eager_total : NAN), "gflop",
                      num_or_null(o->flops / 1e9), "gflops_per_s",
                      num_or_null(o->ms > 0 ? o->flops / (o->ms / 1e3) / 1e9 : NAN), "replay_ms",
                      num_or_null(o->replay_ms)));
        json_t *row = json_array_get(rows, json_array_size(rows) - 1);
        json_object_set_new(row, "gbytes", json_real(o->bytes / 1e9));
        json_object_set_new(row, "gb_per_s", num_or_null(row_gbs(o)));
        json_object_set_new(row, "floor_ms", num_or_null(o->floor_ms));
        /* the replayed graph's commands (which rows' library calls add memset nodes) */
        if (o->graph_types[0] >= 0)
            json_object_set_new(row, "graph_commands",
                                json_pack("{s:i, s:i, s:i, s:i}", "kernel", o->graph_types[0],
                                          "memset", o->graph_types[1], "memcpy", o->graph_types[2],
                                          "other", o->graph_types[3]));
    }
    return rows;
}

/* a layer node's shape, "N HxW Ci->Co K3 S2 pad0" (upconvs: the low-res H x W, "up2") */
static void conv_shape(const sg_graph *g, int node, char *buf, int cap) {
    const int op = g->n[node].op;
    const int up = op == OP_UPCONV2D || op == OP_UPCONV2D_BWD_DATA || op == OP_UPCONV2D_BWD_WEIGHT;
    sg_conv_dims d = up ? sg_upconv_dims_of(g, &g->n[node]) : sg_conv_dims_of(g, &g->n[node]);
    snprintf(buf, (size_t)cap, "%d %dx%d %d->%d K%d S%d pad%d%s", d.N, d.H, d.W, d.Ci, d.Co, d.K,
             d.S, d.pad, up ? " up2" : "");
}

/* a layer row's achieved TFLOP/s (own engine), its same-size GEMM's, and the % of the latter
 * (NAN where not measured) */
static double layer_tflops(const bench_result *r, int k) {
    return r->conv_own[k] > 0 ? r->conv_flops[k] / (r->conv_own[k] * 1e-3) / 1e12 : NAN;
}
static double wg_tflops(const bench_result *r, int k) {
    return r->conv_wg[k] > 0 ? r->conv_flops[k] / (r->conv_wg[k] * 1e-3) / 1e12 : NAN;
}
static double gemm_tflops(const bench_result *r, int k) {
    const int64_t *m = r->conv_mnk[k];
    return r->conv_gemm[k] > 0 ? 2.0 * m[0] * m[1] * m[2] / (r->conv_gemm[k] * 1e-3) / 1e12 : NAN;
}
static double pct_of_gemm(const bench_result *r, int k) {
    return 100 * layer_tflops(r, k) / gemm_tflops(r, k);
}
static double wg_pct_of_gemm(const bench_result *r, int k) {
    return 100 * wg_tflops(r, k) / gemm_tflops(r, k);
}

/* an attention node's shape: "N L=HxW C heads" */
static void attn_shape(const sg_graph *g, int node, char *buf, int cap) {
    const sg_attn_dims d = sg_attn_dims_of(g, &g->n[node]);
    snprintf(buf, (size_t)cap, "%d L%d C%d heads%d", d.N, d.L, d.C, d.heads);
}

static json_t *attn_layers_json(const sg_plan *p, const bench_result *r) {
    if (!r->attn_node) return json_null();
    json_t *rows = json_array();
    for (int k = 0; k < r->nattn; k++) {
        const int i = r->attn_node[k];
        char shape[96];
        attn_shape(&p->g, i, shape, sizeof shape);
        json_array_append_new(
            rows, json_pack("{s:i, s:s, s:s, s:s, s:s, s:o, s:o}", "node", i, "op",
                            sg_ops[p->g.n[i].op].name, "tensor", p->g.t[p->g.n[i].out[0]].name,
                            "shape", shape, "engine", r->attn_engine[k], "gemm_ms",
                            num_or_null(r->attn_ms[k][0] >= 0 ? r->attn_ms[k][0] : NAN), "fused_ms",
                            num_or_null(r->attn_ms[k][1] >= 0 ? r->attn_ms[k][1] : NAN)));
    }
    return rows;
}

static json_t *conv_layers_json(const sg_plan *p, const bench_result *r) {
    if (!r->conv_node) return json_null();
    json_t *rows = json_array();
    for (int k = 0; k < r->nconv; k++) {
        const int i = r->conv_node[k];
        char shape[96], fus[64];
        conv_shape(&p->g, i, shape, sizeof shape);
        layer_fusions(&p->g, i, fus, sizeof fus);
        const int64_t *m = r->conv_mnk[k];
        json_t *row = json_pack(
            "{s:i, s:s, s:s, s:s, s:s, s:s, s:o, s:o, s:o, s:o, s:[I,I,I], s:o, s:o, s:o}", "node",
            i, "op", sg_ops[p->g.n[i].op].name, "tensor", p->g.t[p->g.n[i].out[0]].name, "shape",
            shape, "engine", r->conv_engine[k], "fusions", fus, "own_ms",
            num_or_null(r->conv_own[k] >= 0 ? r->conv_own[k] : NAN), "cudnn_ms",
            num_or_null(r->conv_dnn[k] >= 0 ? r->conv_dnn[k] : NAN), "flops",
            json_real(r->conv_flops[k]), "tflops", num_or_null(layer_tflops(r, k)), "gemm_mnk",
            (json_int_t)m[0], (json_int_t)m[1], (json_int_t)m[2], "gemm_ms",
            num_or_null(r->conv_gemm[k] >= 0 ? r->conv_gemm[k] : NAN), "gemm_tflops",
            num_or_null(gemm_tflops(r, k)), "pct_of_gemm", num_or_null(pct_of_gemm(r, k)));
        if (row) {
            json_object_set_new(row, "wgmma_ms",
                                num_or_null(r->conv_wg[k] >= 0 ? r->conv_wg[k] : NAN));
            json_object_set_new(row, "wgmma_tflops", num_or_null(wg_tflops(r, k)));
            json_object_set_new(row, "wgmma_pct_of_gemm", num_or_null(wg_pct_of_gemm(r, k)));
            json_object_set_new(row, "wgmma_halo_ms",
                                num_or_null(r->conv_wgh[k] >= 0 ? r->conv_wgh[k] : NAN));
            json_object_set_new(row, "wgmma_per_tap_ms",
                                num_or_null(r->conv_wgt[k] >= 0 ? r->conv_wgt[k] : NAN));
            json_object_set_new(row, "wino_ms",
                                num_or_null(r->conv_wino[k] >= 0 ? r->conv_wino[k] : NAN));
            json_object_set_new(row, "direct_ms",
                                num_or_null(r->conv_direct[k] >= 0 ? r->conv_direct[k] : NAN));
            json_object_set_new(row, "f32tc_ms",
                                num_or_null(r->conv_tc[k] >= 0 ? r->conv_tc[k] : NAN));
            json_object_set_new(row, "fma_ms",
                                num_or_null(r->conv_fma[k] >= 0 ? r->conv_fma[k] : NAN));
        }
        json_array_append_new(rows, row);
    }
    return rows;
}

/* The fusion savings (planner/plan.h's counters): per fusion kind, the nodes, the FLOPs and
 * bytes the fused plan no longer spends, and the measured eager time of the layer nodes that
 * carry it. FLOPs removed: only the upsample conv's (its sub-pixel form does 4 taps of the 9
 * the conv of the upsampled tensor does: 5/4 of its own FLOPs); the normalisation, residual
 * add and shortcut are moved into a convolution, not removed (the shortcut's 1x1 GEMM is in
 * conv2d_sc's FLOPs). The unfused alternative is measured by running the same command with
 * --fuse 0. */
typedef struct {
    const char *kind, *tag, *tag2; /* the layer_fusions tags of its nodes */
    int count;
    int64_t bytes;
    double flops_removed, ms;
    int nodes;
} fusion_row;

static int fusion_rows(const sg_plan *p, const bench_result *r, fusion_row *f) {
    /* plan.h: unmaterialised_bytes is the sum of the normalised tensors' bytes (with their
     * recomputations) and the three others; conv2d_sc's sum is counted as a residual too */
    const fusion_row rows[] = {
        {"norm", "norm", "norm", p->fused_norms,
         p->unmaterialised_bytes - p->fused_residual_bytes - p->fused_shortcut_bytes -
             p->fused_upconv_bytes,
         0, 0, 0},
        {"residual", "residual", "shortcut", p->fused_residuals, p->fused_residual_bytes, 0, 0, 0},
        {"shortcut", "shortcut", "shortcut", p->fused_shortcuts, p->fused_shortcut_bytes, 0, 0, 0},
        {"upsample", "upsample", "upsample", p->fused_upconvs, p->fused_upconv_bytes, 0, 0, 0},
    };
    const int n = SG_ARRAY_LEN(rows);
    for (int j = 0; j < n; j++) {
        f[j] = rows[j];
        for (int k = 0; k < r->nconv; k++) {
            char fus[64];
            layer_fusions(&p->g, r->conv_node[k], fus, sizeof fus);
            if (!strstr(fus, f[j].tag) && !strstr(fus, f[j].tag2)) continue;
            f[j].nodes++, f[j].ms += r->conv_own[k];
            if (!strcmp(f[j].tag, "upsample")) f[j].flops_removed += 1.25 * r->conv_flops[k];
        }
    }
    return n;
}

/* the command that measures the unfused plan: this run's, with --fuse 0 */
static void unfused_command(const sg_plan *p, const bench_result *r, char *buf, int cap) {
    snprintf(buf, (size_t)cap,
             "build/bench --backend %s --model %s --batch %d --precision %s --fuse 0", r->backend,
             p->cfg.name, p->cfg.batch, p->cfg.act_dt == DT_BF16 ? "bf16" : "fp32");
}

static json_t *fusions_json(const sg_plan *p, const bench_result *r) {
    if (!r->conv_node) return json_null();
    fusion_row f[8];
    const int n = fusion_rows(p, r, f);
    json_t *rows = json_array();
    for (int k = 0; k < n; k++)
        json_array_append_new(rows,
                              json_pack("{s:s, s:i, s:I, s:f, s:i, s:f}", "kind", f[k].kind,
                                        "count", f[k].count, "bytes_removed",
                                        (json_int_t)f[k].bytes, "flops_removed", f[k].flops_removed,
                                        "fused_nodes", f[k].nodes, "fused_nodes_ms", f[k].ms));
    char cmd[256];
    unfused_command(p, r, cmd, sizeof cmd);
    return json_pack("{s:o, s:s}", "kinds", rows, "unfused_command", cmd);
}

static int report_json(const bench_args *a, sg_exec *e, const bench_result *r) {
    const sg_plan *p = &e->plan;
    const sg_model_cfg *cfg = &p->cfg;
    double sec = r->s.median / 1e3;
    const char *prec = cfg->act_dt == DT_BF16 ? "bf16" : "fp32";
    json_t *env = json_loads(r->env, 0, NULL);
    if (!env) env = r->env[0] ? json_string(r->env) : json_pack("{s:s}", "backend", r->backend);
    /* the CPU backend's threads: a CPU step time means little without them */
    if (!strcmp(r->backend, "cpu") && json_is_object(env))
        json_object_set_new(env, "threads", json_integer(sg_backend_cpu_threads()));
    json_t *steps = json_array();
    for (int i = 0; i < a->iters; i++) json_array_append_new(steps, json_real(r->ms[i]));
    char hash[20];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)p->hash);
    json_t *j =
        json_pack("{s:s, s:s, s:o, s:i, s:s, s:s, s:o, s:s, s:s, s:I, s:I, s:i, s:i, s:s}", "tool",
                  "stepgraph_bench", "model", cfg->name, "config", cli_model_json(cfg), "batch",
                  cfg->batch, "precision", prec, "backend", r->backend, "env", env, "build",
                  SG_BUILD_ID, "data", r->data_source, "data_n", (json_int_t)cfg->data_n, "seed",
                  (json_int_t)a->seed, "warmup", a->warmup, "iters", a->iters, "timing", r->timing);
    struct {
        const char *key;
        double v;
    } nums[] = {{"ms_per_step", r->s.median},
                {"ms_min", r->s.min},
                {"ms_p10", r->s.p10},
                {"ms_p90", r->s.p90},
                {"ms_max", r->s.max},
                {"ms_mean", r->s.mean},
                {"img_per_s", cfg->batch / sec},
                {"achieved_tflops", p->flops / sec / 1e12},
                {"matmul_peak_tflops", r->peak > 0 ? r->peak : NAN},
                {"mfu", r->peak > 0 ? p->matmul_flops / sec / (r->peak * 1e12) : NAN},
                {"host_us_per_step", r->host_us},
                {"host_us_captured", r->host_us_captured},
                {"launch_sync_ms_per_step", r->host_wall_ms},
                {"arena_ratio", (double)p->arena_bytes / (double)p->lower_bound_bytes},
                {"loss", r->loss},
                {"setup_ms", r->setup_ms},
                {"warmup_ms", r->warm_ms},
                {"bytes_per_step", r->bytes_step},
                {"gb_per_s", r->bytes_step / (sec * 1e9)},
                {"mem_peak_gb_per_s", r->bw > 0 ? r->bw : NAN},
                {"floor_ms", r->have_breakdown ? r->floor_ms : NAN}};
    for (int i = 0; j && i < SG_ARRAY_LEN(nums); i++)
        json_object_set_new(j, nums[i].key, num_or_null(nums[i].v));
    json_t *more = json_pack(
        "{s:I, s:I, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:i, s:s, s:o}", "flops_per_step",
        (json_int_t)p->flops, "matmul_flops_per_step", (json_int_t)p->matmul_flops, "peak_dtype",
        prec, "arena_bytes", (json_int_t)p->arena_bytes, "lower_bound_bytes",
        (json_int_t)p->lower_bound_bytes, "persistent_bytes", (json_int_t)p->persistent_bytes,
        "input_bytes", (json_int_t)p->role_bytes[ROLE_INPUT], "no_reuse_bytes",
        (json_int_t)p->no_reuse_bytes, "params", (json_int_t)p->io.n_params, "nodes", p->g.nn,
        "plan_hash", hash, "steps_ms", steps);
    if (!j || !more) return json_decref(j), json_decref(more), sg_set_error("bench: JSON");
    json_object_update(j, more);
    json_decref(more);
    if (r->have_breakdown) json_object_set_new(j, "eager_total_ms", num_or_null(r->eager_total));
    if (r->have_breakdown) json_object_set_new(j, "replay_total_ms", num_or_null(r->replay_total));
    json_object_set_new(j, "matmul_peak_given", json_boolean(a->peak_tflops > 0));
    json_object_set_new(j, "mem_peak_given", json_boolean(a->peak_gbs > 0));
    json_object_set_new(j, "breakdown", breakdown_json(r));
    json_object_set_new(j, "conv_engine", json_string(sg_conv_engine_name(a->conv_engine)));
    json_object_set_new(j, "conv_layers", conv_layers_json(p, r));
    json_object_set_new(j, "attn_layers", attn_layers_json(p, r));
    json_object_set_new(j, "fusions", fusions_json(p, r));
    if (r->conv_node) json_object_set_new(j, "gemm_sizes_timed", json_integer(r->gemms_timed));
    return cli_json_print(stdout, j);
}

static void report_text(const bench_args *a, sg_exec *e, const bench_result *r) {
    const sg_plan *p = &e->plan;
    const sg_model_cfg *cfg = &p->cfg;
    const stats *s = &r->s;
    double sec = s->median / 1e3, tflops = p->flops / sec / 1e12;
    double mfu = r->peak > 0 ? p->matmul_flops / sec / (r->peak * 1e12) : NAN;
    const char *prec = cfg->act_dt == DT_BF16 ? "bf16" : "fp32";
    char b1[32], b2[32], b3[32], b4[32];
    char micro[64] = "";
    if (cfg->grad_accum > 1)
        snprintf(micro, sizeof micro, " (%d micro-batches of %d)", cfg->grad_accum,
                 sg_model_micro_batch(cfg));
    printf("bench: %s, batch %d%s, %s, %s backend, %lld parameters, %d nodes\n", cfg->name,
           cfg->batch, micro, prec, r->backend, (long long)p->io.n_params, p->g.nn);
    if (!strcmp(r->backend, "cpu"))
        printf("  device        %s, %d CPU thread%s\n", r->env[0] ? r->env : r->backend,
               sg_backend_cpu_threads(), sg_backend_cpu_threads() == 1 ? "" : "s");
    else
        printf("  device        %s\n", r->env[0] ? r->env : r->backend);
    printf("  data          %s\n", r->data_source);
    printf("  step          %.3f ms median  (min %.3f  p10 %.3f  p90 %.3f  max %.3f; %d "
           "replays after %d warm-up, %s)\n",
           s->median, s->min, s->p10, s->p90, s->max, a->iters, a->warmup, r->timing);
    printf("  throughput    %.1f img/s\n", cfg->batch / sec);
    printf("  FLOPs         %.4g GFLOP/step (matmul %.4g), %.3g TFLOP/s achieved\n", p->flops / 1e9,
           p->matmul_flops / 1e9, tflops);
    if (r->peak > 0)
        printf("  MFU           %.1f%%  (matmul FLOPs / step time / %s %s matmul peak "
               "%.1f TFLOP/s)\n",
               100 * mfu, a->peak_tflops > 0 ? "given (--peak-tflops)" : "measured", prec, r->peak);
    else
        printf("  MFU           n/a (the %s backend measures no matmul peak)\n", r->backend);
    printf("  memory        %.4g GB/step at least (each node's inputs read and outputs written "
           "once), %.1f GB/s over the step",
           r->bytes_step / 1e9, r->bytes_step / (sec * 1e9));
    if (r->bw > 0)
        printf("; %s copy bandwidth %.1f GB/s: %.3f ms at it\n",
               a->peak_gbs > 0 ? "given (--peak-gbs)" : "measured", r->bw,
               r->bytes_step / (r->bw * 1e6));
    else
        printf("\n");
    if (r->have_breakdown && isfinite(r->floor_ms) && r->floor_ms > 0)
        printf("  floor         %.3f ms (each node at the longer of its matmul FLOPs at the "
               "matmul peak and its bytes at the copy bandwidth); the step is %.2fx it\n",
               r->floor_ms, s->median / r->floor_ms);
    else if (r->have_breakdown)
        printf("  floor         n/a (it needs the matmul peak and the copy bandwidth measured)\n");
    if (isfinite(r->host_us))
        printf("  host          %.2f us per replay launch (the median of %d, each on an idle "
               "stream); back to back, launch + sync %.3f ms/step\n",
               r->host_us, a->iters, r->host_wall_ms);
    if (isfinite(r->host_us_captured))
        printf("                %.2f us per launch of the graph as captured (the libraries' "
               "memset nodes not yet kernel nodes)\n",
               r->host_us_captured);
    if (!isfinite(r->host_us))
        printf("  host          n/a (the %s backend runs the step synchronously)\n", r->backend);
    printf("  arena         %s; lower bound %s (ratio %.4f); persistent %s; dataset %s\n",
           mib(p->arena_bytes, b1), mib(p->lower_bound_bytes, b2),
           (double)p->arena_bytes / (double)p->lower_bound_bytes, mib(p->persistent_bytes, b3),
           mib(p->role_bytes[ROLE_INPUT], b4));
    printf("  loss          %.5g after %lld steps\n", r->loss, (long long)sg_exec_step_count(e));
    if (!r->have_breakdown) {
        printf("per-op breakdown: %s\n",
               a->breakdown ? "not available on this backend" : "skipped (--no-breakdown)");
        return;
    }
    printf("per-op breakdown (each node run once eagerly and timed; sum %.3f ms vs "
           "%.3f ms replayed",
           r->eager_total, s->median);
    if (isfinite(r->replay_total))
        printf("; replay ms: the row's nodes captured as one graph and replayed, sum %.3f ms",
               r->replay_total);
    printf("; GB: the bytes its nodes move at least; GB/s: over the replay ms, else the eager ms; "
           "floor ms: its nodes' floors, as the step's):\n");
    printf("  %-20s %6s %11s %7s %10s %10s %10s %9s %9s %9s\n", "op", "nodes", "ms", "%", "GFLOP",
           "GFLOP/s", "replay ms", "GB", "GB/s", "floor ms");
    for (int k = 0; k < r->nrows; k++) {
        const op_row *o = &r->rows[k];
        char label[64];
        const char *eng = o->engine ? sg_conv_engine_name(o->engine) : o->variant;
        snprintf(label, sizeof label, "%s%s%s", sg_ops[o->op].name, *eng ? "/" : "", eng);
        printf("  %-20s %6d %11.4f %7.2f %10.3f ", label, o->nodes, o->ms,
               r->eager_total > 0 ? 100 * o->ms / r->eager_total : 0.0, o->flops / 1e9);
        if (o->matmul && o->ms > 0)
            printf("%10.1f ", o->flops / (o->ms / 1e3) / 1e9);
        else
            printf("%10s ", "-");
        if (isfinite(o->replay_ms))
            printf("%10.4f ", o->replay_ms);
        else
            printf("%10s ", "-");
        printf("%9.4f ", o->bytes / 1e9);
        if (isfinite(row_gbs(o)))
            printf("%9.1f ", row_gbs(o));
        else
            printf("%9s ", "-");
        if (isfinite(o->floor_ms))
            printf("%9.4f\n", o->floor_ms);
        else
            printf("%9s\n", "-");
    }
    if (!r->conv_node) return;
    double own = 0, dnn = 0, best = 0, wg = 0, wg_own = 0, halo[2] = {0}, tap[2] = {0};
    double wino[3] = {0}, direct[3] = {0}, wino_lib[3] = {0}, tcs[3] = {0}, fmas[3] = {0};
    int wg_n = 0, halo_n[2] = {0}, wino_n[3] = {0}, tc_n[3] = {0};
    printf("per-conv-layer (each convolution-like node run once eagerly on each engine; "
           "--conv-engine %s; lib: the library side, cuDNN, or cuBLASLt for a 1x1 conv on the "
           "gemm engine; GEMM: a plain %s cuBLASLt GEMM of the layer's implicit-GEMM "
           "M x N x K, %% of GEMM = TFLOP/s over the GEMM's; wgmma: own on its Hopper kernels, "
           "where they take the node):\n",
           sg_conv_engine_name(a->conv_engine), prec);
    printf("  %5s %-19s %-28s %-34s %-17s %10s %10s %9s %9s %8s %-22s %10s %9s %8s %10s %8s %8s  "
           "%s\n",
           "node", "op", "tensor", "shape", "fusions", "own ms", "lib ms", "own/lib", "GFLOP",
           "TFLOP/s", "GEMM M x N x K", "GEMM ms", "GEMM TF/s", "% GEMM", "wgmma ms", "wg TF/s",
           "wg %GEMM", "the step's engine");
    for (int k = 0; k < r->nconv; k++) {
        const int i = r->conv_node[k];
        char shape[96], fus[64], mnk[64];
        conv_shape(&p->g, i, shape, sizeof shape);
        layer_fusions(&p->g, i, fus, sizeof fus);
        snprintf(mnk, sizeof mnk, "%lldx%lldx%lld", (long long)r->conv_mnk[k][0],
                 (long long)r->conv_mnk[k][1], (long long)r->conv_mnk[k][2]);
        printf("  %5d %-19s %-28s %-34s %-17s %10.4f ", i, sg_ops[p->g.n[i].op].name,
               p->g.t[p->g.n[i].out[0]].name, shape, fus, r->conv_own[k]);
        if (r->conv_dnn[k] >= 0)
            printf("%10.4f %8.2fx", r->conv_dnn[k], r->conv_own[k] / r->conv_dnn[k]);
        else
            printf("%10s %9s", "-", "-");
        printf(" %9.4f %8.3f %-22s", r->conv_flops[k] / 1e9, layer_tflops(r, k), mnk);
        if (r->conv_gemm[k] >= 0)
            printf(" %10.4f %9.3f %7.1f%%", r->conv_gemm[k], gemm_tflops(r, k), pct_of_gemm(r, k));
        else
            printf(" %10s %9s %8s", "-", "-", "-");
        if (r->conv_wg[k] >= 0) {
            printf(" %10.4f %8.3f %7.1f%%", r->conv_wg[k], wg_tflops(r, k), wg_pct_of_gemm(r, k));
            wg += r->conv_wg[k], wg_own += r->conv_own[k], wg_n++;
        } else {
            printf(" %10s %8s %8s", "-", "-", "-");
        }
        printf("  %s\n", r->conv_engine[k][0] ? r->conv_engine[k] : "-");
        if (r->conv_wgh[k] >= 0) { /* [0] forwards, [1] data gradients */
            const int dg = p->g.n[i].op == OP_CONV2D_BWD_DATA;
            halo[dg] += r->conv_wgh[k], tap[dg] += r->conv_wgt[k], halo_n[dg]++;
        }
        if (r->conv_wino[k] >= 0) { /* [0] forwards, [1] data gradients, [2] weight gradients */
            const int dg = p->g.n[i].op == OP_CONV2D_BWD_DATA     ? 1
                           : p->g.n[i].op == OP_CONV2D_BWD_WEIGHT ? 2
                                                                  : 0;
            wino[dg] += r->conv_wino[k], direct[dg] += r->conv_direct[k], wino_n[dg]++;
            wino_lib[dg] += r->conv_dnn[k] >= 0 ? r->conv_dnn[k] : r->conv_direct[k];
        }
        if (r->conv_tc[k] >= 0) { /* the same three passes */
            const int dg = p->g.n[i].op == OP_CONV2D_BWD_DATA     ? 1
                           : p->g.n[i].op == OP_CONV2D_BWD_WEIGHT ? 2
                                                                  : 0;
            tcs[dg] += r->conv_tc[k], fmas[dg] += r->conv_fma[k], tc_n[dg]++;
        }
        own += r->conv_own[k];
        dnn += r->conv_dnn[k] >= 0 ? r->conv_dnn[k] : r->conv_own[k];
        best += r->conv_dnn[k] >= 0 && r->conv_dnn[k] < r->conv_own[k] ? r->conv_dnn[k]
                                                                       : r->conv_own[k];
    }
    printf("  all convs: own %.3f ms, lib (own where not pinned) %.3f ms, per-layer best %.3f "
           "ms\n",
           own, dnn, best);
    if (wg_n)
        printf("  the wgmma kernels take %d of these nodes: %.3f ms on them, %.3f ms on own as the "
               "step runs them\n",
               wg_n, wg, wg_own);
    for (int dg = 0; dg < 2; dg++)
        if (halo_n[dg])
            printf("  the wgmma %s the resident halo takes (%d nodes): %.3f ms on the halo, "
                   "%.3f ms per tap (wgmma_halo_ms, wgmma_per_tap_ms)\n",
                   dg ? "stride-1 data gradients" : "forwards", halo_n[dg], halo[dg], tap[dg]);
    static const char *const wino_pass[3] = {"forwards", "data gradients", "weight gradients"};
    for (int dg = 0; dg < 3; dg++)
        if (wino_n[dg])
            printf("  the fp32 3x3 %s Winograd F(2x2, 3x3) takes (%d nodes): %.3f ms as "
                   "Winograd, %.3f ms on the direct tiles, %.3f ms on the library (the direct "
                   "tiles where it has none) (wino_ms, direct_ms)\n",
                   wino_pass[dg], wino_n[dg], wino[dg], direct[dg], wino_lib[dg]);
    for (int dg = 0; dg < 3; dg++)
        if (tc_n[dg])
            printf("  the %s on the direct tiles (%d nodes): %.3f ms with their products on the "
                   "tensor cores (3xTF32), %.3f ms on the CUDA cores (f32tc_ms, fma_ms)\n",
                   wino_pass[dg], tc_n[dg], tcs[dg], fmas[dg]);
    if (r->nattn) {
        double sum[2] = {0};
        int n[2] = {0};
        printf("per-attention-node (each run once eagerly on both engines, SG_ATTN=gemm | fused; "
               "-: not taken):\n");
        printf("  %5s %-15s %-34s %-24s %10s %10s  %s\n", "node", "op", "tensor", "shape",
               "gemm ms", "fused ms", "the step's engine");
        for (int k = 0; k < r->nattn; k++) {
            const int i = r->attn_node[k];
            char shape[96];
            attn_shape(&p->g, i, shape, sizeof shape);
            printf("  %5d %-15s %-34s %-24s", i, sg_ops[p->g.n[i].op].name,
                   p->g.t[p->g.n[i].out[0]].name, shape);
            for (int q = 0; q < 2; q++) {
                if (r->attn_ms[k][q] >= 0)
                    printf(" %10.4f", r->attn_ms[k][q]), sum[q] += r->attn_ms[k][q], n[q]++;
                else
                    printf(" %10s", "-");
            }
            printf("  %s\n", r->attn_engine[k][0] ? r->attn_engine[k] : "-");
        }
        printf("  all attention nodes: gemm %.3f ms (%d nodes), fused %.3f ms (%d nodes)\n", sum[0],
               n[0], sum[1], n[1]);
    }
    fusion_row f[8];
    const int nf = fusion_rows(p, r, f);
    char cmd[256];
    unfused_command(p, r, cmd, sizeof cmd);
    printf("fusion savings (the plan's counters; FLOPs removed: only the upsample conv's 5 of 9 "
           "taps, the others move work into a conv; ms: the eager time of the fused layer nodes "
           "above):\n");
    printf("  %-10s %6s %14s %14s %7s %11s\n", "fusion", "count", "MiB removed", "GFLOP removed",
           "nodes", "fused ms");
    for (int k = 0; k < nf; k++)
        printf("  %-10s %6d %14.2f %14.4f %7d %11.4f\n", f[k].kind, f[k].count,
               f[k].bytes / 1048576.0, f[k].flops_removed / 1e9, f[k].nodes, f[k].ms);
    printf("  the unfused alternative, to compare (same per-layer table, nothing fused): %s\n",
           cmd);
}

/* --tune-engines: measure the table (graph/engine_tune.h) and write it */
static sg_backend *tune_backend(const void *ctx) {
    return !strcmp((const char *)ctx, "cuda") ? sg_backend_cuda_create(0, 1)
                                              : sg_backend_cpu_create();
}

/* the layers' choice written as soon as it is made (sg_engine_tune_opts.chosen): a tuning cut
 * short in its GEMM or knob pass leaves a table without those */
static const char *g_tune_path;
static int tune_chosen(const sg_engine_table *t, const void *ctx) {
    (void)ctx;
    return sg_engine_table_write(g_tune_path, t);
}

static int tune_engines(const bench_args *a, const sg_model_cfg *cfg, const sg_dataset *ds) {
    g_tune_path = a->tune_path;
    sg_engine_tune_opts o = {.make_backend = tune_backend,
                             .chosen = tune_chosen,
                             .ctx = cli_backend_name(a->backend),
                             .pixels = ds->pixels,
                             .pixel_bytes = ds->n * ds->h * ds->w * ds->c,
                             .labels = ds->labels,
                             .warmup = a->warmup,
                             .iters = a->iters,
                             .cudnn_time_reps = a->cudnn_time >= 0 ? a->cudnn_time : 10,
                             .gemm_reps = a->gemm_time >= 0 ? a->gemm_time : 10,
                             .gemm_min_gain = 0.03,
                             .knob_steps = a->knob_time >= 0 ? a->knob_time : 20,
                             .knob_min_gain = 0.01,
                             .seed = a->seed,
                             .progress = stderr};
    sg_engine_table t;
    int rc = sg_engine_tune(cfg, &o, &t);
    if (!rc) rc = sg_engine_table_write(a->tune_path, &t);
    if (!rc) {
        int on_dnn = 0, on_wg = 0, measured = 0, wg_measured = 0, own_passes = 0, on_wino = 0,
            on_tc = 0;
        double sum_own = 0, sum_best = 0;
        for (int k = 0; k < t.n; k++) {
            const sg_engine_entry *x = &t.e[k];
            on_dnn += x->engine == SG_LAYER_CUDNN;
            on_wg += x->engine == SG_LAYER_OWN && x->tc == SG_TC_WGMMA;
            measured += x->cudnn_ms >= 0;
            wg_measured += x->wgmma_ms >= 0;
            double saved = 0; /* a cudnn layer's passes on own */
            for (int q = 0; q < 3 && x->engine == SG_LAYER_CUDNN; q++)
                if (x->pass_own[q]) own_passes++, saved += x->pass_lib_ms[q] - x->pass_own_ms[q];
            on_wino += x->engine == SG_LAYER_OWN && x->wino;
            on_tc += x->engine == SG_LAYER_OWN && x->f32tc;
            sum_own += x->own_ms;
            /* an own layer in other fp32 forms: its own time less what its passes saved so */
            sum_best += x->engine == SG_LAYER_CUDNN ? x->cudnn_ms - saved
                        : x->tc == SG_TC_WGMMA      ? x->wgmma_ms
                                                    : x->own_ms - sg_engine_entry_form_saving(x);
        }
        char wino[96] = ""; /* fp32: the layers on Winograd, on the 3xTF32 tiles */
        if (!strcmp(t.precision, "fp32"))
            snprintf(wino, sizeof wino, ", %d as Winograd, %d on the 3xTF32 tiles", on_wino, on_tc);
        printf("bench: engine table %s: %s, batch %d per pass, %s, on %s; %d conv layers, %d on "
               "cudnn (%d of their passes on own), %d on own (%d on the wgmma kernels%s%s); "
               "charged time %.3f ms all own (mma.sync), %.3f ms per-layer best%s\n",
               a->tune_path, t.model, t.batch, t.precision, t.device, t.n, on_dnn, own_passes,
               t.n - on_dnn, on_wg, wg_measured ? "" : ", not measured here", wino, sum_own,
               sum_best, measured ? "" : " (cuDNN unavailable on this backend: cudnn_ms null)");
        int other = 0;
        double first = 0, chosen = 0;
        for (int i = 0; i < t.ngemm; i++) {
            other += t.gemm[i].ms < t.gemm[i].first_ms;
            first += t.gemm[i].first_ms, chosen += t.gemm[i].ms;
        }
        const sg_step_knobs *k = &t.knobs;
        char kt[160];
        sg_step_knobs_text(k, kt, sizeof kt);
        if (k->base_ms >= 0)
            printf("bench: engine table %s: step knobs %s (the step %.3f ms against %.3f with the "
                   "defaults)\n",
                   a->tune_path, kt, k->step_ms, k->base_ms);
        if (t.attn_ms[0] >= 0 && t.attn_ms[1] >= 0)
            printf("bench: engine table %s: attention %s (its nodes: gemm %.3f ms, fused %.3f)\n",
                   a->tune_path, t.attn == SG_ATTN_FUSED ? "fused" : "gemm", t.attn_ms[0],
                   t.attn_ms[1]);
        if (t.ngemm)
            printf("bench: engine table %s: %d GEMMs with their algorithm, %d not the heuristic's "
                   "first (the GEMMs' sum %.3f ms against %.3f with the first)\n",
                   a->tune_path, t.ngemm, other, chosen, first);
    }
    sg_engine_table_free(&t);
    return rc;
}

int main(int argc, char **argv) {
    bench_args a = {.data = "synthetic",
                    .warmup = 10,
                    .iters = -1,
                    .breakdown = 1,
                    .cudnn_time = -1,
                    .gemm_time = -1,
                    .knob_time = -1};
    sg_model_cfg cfg;
    int rc = parse_args(argc, argv, &a, &cfg);
    if (rc) return rc == 1 ? 0 : rc;
    /* the table's file before the tuning (minutes on a GPU), not after */
    if (a.tune_path && sg_engine_table_check_writable(a.tune_path)) return cli_fail("bench", 1);
    if (!a.backend && !sg_cuda_available()) {
        fprintf(stderr,
                "bench: no usable GPU; a CPU step of %s takes far longer, so bench does "
                "not fall back to it: pass --backend cpu to time the CPU (e.g. --backend "
                "cpu --model unet_tiny --iters 5)\n",
                cfg.name);
        return 2;
    }
    bench_result r = {.backend = cli_backend_name(a.backend)};
    r.cuda = !strcmp(r.backend, "cuda");
    if (a.iters < 0) a.iters = r.cuda ? 50 : 5;
    sg_dataset ds;
    if ((rc = load_data(&a, &cfg, &ds)))
        return sg_engine_table_free(&a.table), cli_fail("bench", rc);
    if (a.tune_path) {
        rc = tune_engines(&a, &cfg, &ds);
        data_free(&ds);
        return rc ? cli_fail("bench", 1) : 0;
    }
    snprintf(r.data_source, sizeof r.data_source, "%s", ds.source);
    /* plan, arena, state */
    double t_setup = cli_now_ms();
    sg_backend *be = r.cuda ? sg_backend_cuda_create(0, 1) : sg_backend_cpu_create();
    if (!be) return data_free(&ds), cli_fail("bench", 1);
    be->conv_engine = a.conv_engine;
    sg_exec e;
    rc = sg_exec_init(&e, &cfg, 1, be);
    if (!rc) rc = sg_exec_upload_dataset(&e, ds.pixels, ds.n * ds.h * ds.w * ds.c, ds.labels);
    data_free(&ds);
    if (!rc) rc = sg_exec_init_state(&e, a.seed);
    r.setup_ms = cli_now_ms() - t_setup;
    if (!rc) rc = measure(&a, &e, &r);
    if (!rc && a.json)
        rc = report_json(&a, &e, &r);
    else if (!rc)
        report_text(&a, &e, &r);
    if (rc) fprintf(stderr, "bench: %s\n", sg_last_error());
    free(r.ms), free(r.node_ms), free(r.node_key), free(r.rows);
    free(r.conv_node), free(r.conv_own), free(r.conv_dnn), free(r.conv_wg), free(r.conv_engine);
    free(r.conv_wgh), free(r.conv_wgt), free(r.conv_wino), free(r.conv_direct);
    free(r.conv_tc), free(r.conv_fma);
    free(r.attn_node), free(r.attn_ms), free(r.attn_engine);
    free(r.conv_gemm), free(r.conv_flops), free(r.conv_mnk);
    sg_exec_free(&e);
    sg_engine_table_free(&a.table);
    return rc ? 1 : 0;
}
