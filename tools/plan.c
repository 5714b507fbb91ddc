/* plan — print where every byte of a training step lives.
 *
 *   build/plan --model unet_cifar [--batch 128] [--precision bf16|fp32] [--json] [--forward]
 *   build/plan --model unet_cifar --ranks 8     # one rank's plan of an 8-rank data-parallel run
 *   build/plan --model unet_cifar --grad-accum 4  # batch 128 as 4 micro-batches of 32
 *
 * A thin program over planner/: build the plan, then render it as a readable memory map
 * (summary, per-role totals, the peak, a per-tensor table, a time x address chart) or JSON.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/plan.h"
#include "tools/cli.h"

static const char role_char[ROLE_COUNT] = {'P', 'G', 'm', 'v', 'E', 's',
                                           'D', 'S', 't', 'w', 'R', 'b'};

static const char *human(int64_t b, char *buf) {
    double x = (double)b;
    if (x >= 1 << 30)
        snprintf(buf, 32, "%.2f GiB", x / (1 << 30));
    else if (x >= 1 << 20)
        snprintf(buf, 32, "%.1f MiB", x / (1 << 20));
    else if (x >= 1 << 10)
        snprintf(buf, 32, "%.1f KiB", x / (1 << 10));
    else
        snprintf(buf, 32, "%lld B", (long long)b);
    return buf;
}

static const char *commas(int64_t v, char *buf) {
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%lld", (long long)v), k = 0;
    for (int i = 0; i < n; i++) {
        buf[k++] = tmp[i];
        if ((n - 1 - i) % 3 == 0 && i != n - 1) buf[k++] = ',';
    }
    buf[k] = 0;
    return buf;
}

static const char *op_of(const sg_graph *g, int t) {
    int p = g->t[t].producer;
    return p >= 0 ? sg_ops[g->n[p].op].name : "-";
}

static json_t *int_array(const int *v, int n) {
    json_t *a = json_array();
    for (int k = 0; k < n; k++) json_array_append_new(a, json_integer(v[k]));
    return a;
}

/* Bytes one step's all-reduce moves in (and out of) each rank: the fp32 gradient region and
 * the loss (docs/data-parallel.md); 0 without data parallelism. */
static int64_t allreduce_bytes(const sg_plan *p) {
    if (p->io.allreduce < 0) return 0;
    const sg_node *nd = &p->g.n[p->io.allreduce];
    return p->g.t[nd->in[0]].bytes + p->g.t[nd->in[1]].bytes;
}

/* The conv nodes (forward, backward-data, backward-filter) and how many of them the CUDA
 * backend can give to cuDNN: one single-buffer stored tensor per activation operand (not a
 * concatenation, not a virtual normalised tensor), of one dtype (graph/backend_cuda_engines.c's
 * rule). The 1x1 ones `auto` runs as cuBLASLt GEMMs (sg_conv_gemm_node) are counted apart. The
 * engine itself is chosen when a backend prepares the plan
 * (--conv-engine; bench's per-conv-layer table and the checkpoints show what each ran on). */
static void conv_counts(const sg_graph *g, int *convs, int *eligible, int *gemm, int *rest,
                        int *f32_own) {
    *convs = *eligible = *gemm = *rest = *f32_own = 0;
    for (int i = 0; i < g->nn; i++) {
        const sg_node *nd = &g->n[i];
        int x, y; /* the two activation operands: x side and y side */
        if (nd->op == OP_CONV2D || nd->op == OP_CONV2D_ADD)
            x = nd->in[0], y = nd->out[0];
        else if (nd->op == OP_CONV2D_BWD_DATA)
            x = nd->out[0], y = nd->in[0];
        else if (nd->op == OP_CONV2D_BWD_WEIGHT)
            x = nd->in[1], y = nd->in[0];
        else
            continue;
        (*convs)++;
        const int ok = !sg_tensor_virtual(&g->t[x]) && !sg_tensor_virtual(&g->t[y]) &&
                       g->t[x].dtype == g->t[y].dtype;
        const int on_gemm = sg_conv_gemm_node(g, i);
        *eligible += ok, *gemm += on_gemm, *rest += ok && !on_gemm;
        *f32_own += ok && !on_gemm && sg_conv_f32_own_node(g, i);
    }
}

static json_t *tensor_json(const sg_graph *g, int t) {
    const sg_tensor *x = &g->t[t];
    json_t *shape = json_array();
    for (int d = 0; d < x->ndim; d++) json_array_append_new(shape, json_integer(x->shape[d]));
    json_t *o =
        json_pack("{s:i, s:s, s:s, s:s, s:o, s:I, s:I, s:i, s:i, s:s}", "id", t, "name", x->name,
                  "role", sg_role_names[x->role], "dtype", sg_dtype_names[x->dtype], "shape", shape,
                  "bytes", (json_int_t)x->bytes, "offset", (json_int_t)x->offset, "first", x->first,
                  "last", x->last, "op", op_of(g, t));
    if (o && x->nparts) json_object_set_new(o, "parts", int_array(x->parts, 2));
    /* a virtual normalised tensor: the norm_act node whose statistics define it */
    if (o && x->vnorm >= 0) json_object_set_new(o, "normalised_by", json_integer(x->vnorm));
    if (o && x->region) json_object_set_new(o, "region", json_true());
    /* a forward activation not kept for the backward pass: "recomputed_as" names its copy */
    if (o && x->recompute && x->recomputed >= 0)
        json_object_set_new(o, "recomputed_as", json_integer(x->recomputed));
    return o;
}

static int print_json(const sg_plan *p) {
    const sg_graph *g = &p->g;
    char hash[20];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)p->hash);
    json_t *roles = json_object(), *sched = json_array(), *tensors = json_array();
    for (int r = 0; r < ROLE_COUNT; r++)
        json_object_set_new(roles, sg_role_names[r], json_integer(p->role_bytes[r]));
    for (int i = 0; i < g->nn; i++)
        json_array_append_new(
            sched, json_pack("{s:s, s:o, s:o, s:i}", "op", sg_ops[g->n[i].op].name, "in",
                             int_array(g->n[i].in, g->n[i].nin), "out",
                             int_array(g->n[i].out, g->n[i].nout), "accum", (int)g->n[i].accum));
    for (int t = 0; t < g->nt; t++) json_array_append_new(tensors, tensor_json(g, t));
    json_t *j = json_pack(
        "{s:o, s:I, s:I, s:I, s:f, s:I, s:I, s:I, s:I, s:i, s:i, s:s, s:o, s:o, s:o}", "model",
        cli_model_json(&p->cfg), "params", (json_int_t)p->io.n_params, "arena_bytes",
        (json_int_t)p->arena_bytes, "lower_bound_bytes", (json_int_t)p->lower_bound_bytes, "ratio",
        (double)p->arena_bytes / (double)p->lower_bound_bytes, "no_reuse_bytes",
        (json_int_t)p->no_reuse_bytes, "persistent_bytes", (json_int_t)p->persistent_bytes,
        "flops_per_step", (json_int_t)p->flops, "matmul_flops_per_step",
        (json_int_t)p->matmul_flops, "nodes", g->nn, "peak_node", p->peak_node, "plan_hash", hash,
        "role_bytes", roles, "schedule", sched, "tensors", tensors);
    if (j) {
        json_object_set_new(j, "ranks", json_integer(p->cfg.ranks));
        json_object_set_new(j, "bytes_moved_per_step", json_integer((json_int_t)sg_graph_bytes(g)));
        int convs, eligible, gemm, rest, f32_own;
        conv_counts(g, &convs, &eligible, &gemm, &rest, &f32_own);
        json_object_set_new(j, "conv_nodes", json_integer(convs));
        /* of the cuDNN-eligible ones, the fp32 passes auto puts on own (F32_OWN) */
        json_object_set_new(j, "conv_f32_own", json_integer(f32_own));
        json_object_set_new(j, "conv_gemm", json_integer(gemm));
        json_object_set_new(j, "conv_cudnn_eligible", json_integer(eligible));
        json_object_set_new(j, "rank_batch", json_integer(sg_model_rank_batch(&p->cfg)));
        json_object_set_new(j, "grad_accum", json_integer(sg_model_micro_batches(&p->cfg)));
        json_object_set_new(j, "micro_batch", json_integer(sg_model_micro_batch(&p->cfg)));
        json_object_set_new(j, "allreduce_bytes", json_integer(allreduce_bytes(p)));
        /* what the backward pass reads from the forward: kept, or recomputed there */
        json_object_set_new(j, "saved_tensors", json_integer(p->role_tensors[ROLE_SAVED]));
        json_object_set_new(j, "saved_bytes", json_integer(p->role_bytes[ROLE_SAVED]));
        json_object_set_new(j, "recomputed_tensors",
                            json_integer(p->role_tensors[ROLE_RECOMPUTED]));
        json_object_set_new(j, "recomputed_bytes", json_integer(p->role_bytes[ROLE_RECOMPUTED]));
        /* the fusions (--fuse): what no tensor holds any more */
        json_object_set_new(j, "fuse", json_integer(sg_model_fuse(&p->cfg)));
        json_object_set_new(j, "fused_norms", json_integer(p->fused_norms));
        json_object_set_new(j, "fused_residuals", json_integer(p->fused_residuals));
        json_object_set_new(j, "fused_residual_bytes", json_integer(p->fused_residual_bytes));
        json_object_set_new(j, "fused_upconvs", json_integer(p->fused_upconvs));
        json_object_set_new(j, "fused_upconv_bytes", json_integer(p->fused_upconv_bytes));
        json_object_set_new(j, "fused_shortcuts", json_integer(p->fused_shortcuts));
        json_object_set_new(j, "fused_shortcut_bytes", json_integer(p->fused_shortcut_bytes));
        json_object_set_new(j, "unmaterialised_bytes", json_integer(p->unmaterialised_bytes));
        /* the engine table: each conv layer's choice (forward order) */
        if (p->cfg.engines) {
            json_t *layers = json_array();
            for (int i = 0; i < g->n_forward; i++) {
                char names[2][SG_NAME_MAX];
                const int n = sg_conv_layers_computed(g, i, names);
                for (int k = 0; k < n; k++) {
                    const sg_engine_entry *e = sg_engine_table_find(p->cfg.engines, names[k]);
                    /* a cudnn layer's passes the table sends to own */
                    static const char *const pass_names[3] = {"fwd", "bwd_data", "bwd_filter"};
                    json_t *own_passes = json_array(), *own_passes_tc = json_array();
                    for (int q = 0; q < 3 && e && e->engine == SG_LAYER_CUDNN; q++)
                        if (e->pass_own[q]) {
                            json_array_append_new(own_passes, json_string(pass_names[q]));
                            json_array_append_new(own_passes_tc,
                                                  json_string(sg_tc_name(e->pass_tc[q])));
                        }
                    /* its own wgmma schedule, null for the table's */
                    json_t *own_sched =
                        e && e->wg_sched >= 0
                            ? json_pack("{s:b, s:b}", "persist",
                                        (e->wg_sched & SG_WG_SCHED_PERSIST) != 0, "fill",
                                        (e->wg_sched & SG_WG_SCHED_FILL) != 0)
                            : json_null();
                    json_array_append_new(
                        layers,
                        json_pack("{s:s, s:s, s:s, s:o, s:o, s:b, s:s, s:o, s:b, s:b}", "layer",
                                  names[k], "engine", sg_layer_engine_name(e ? e->engine : 0), "tc",
                                  e && e->engine == SG_LAYER_OWN ? sg_tc_name(e->tc) : "-",
                                  "own_passes", own_passes, "own_passes_tc", own_passes_tc,
                                  "input_fused", g->t[g->n[i].in[k ? 3 : 0]].vnorm >= 0, "node_op",
                                  sg_ops[g->n[i].op].name, "wg_sched", own_sched, "wino",
                                  e && e->engine == SG_LAYER_OWN && e->wino, "f32tc",
                                  e && e->engine == SG_LAYER_OWN && e->f32tc));
                }
            }
            char th[20];
            snprintf(th, sizeof th, "%016llx", (unsigned long long)p->cfg.engines->hash);
            json_object_set_new(j, "engine_table",
                                json_pack("{s:s, s:o}", "hash", th, "layers", layers));
        }
    }
    if (!j) return sg_set_error("plan: cannot build the JSON output");
    return cli_json_print(stdout, j);
}

/* time (columns) x address (rows, high at the top): each cell shows the role of the tensor
 * covering most of it; '.' is free arena. */
static void print_chart(const sg_plan *p) {
    enum { COLS = 96, ROWS = 28 };
    const sg_graph *g = &p->g;
    static double cover[ROWS][COLS][ROLE_COUNT];
    memset(cover, 0, sizeof cover);
    double rowb = (double)p->arena_bytes / ROWS, colt = (double)g->nn / COLS;
    for (int t = 0; t < g->nt; t++) {
        const sg_tensor *x = &g->t[t];
        if (sg_tensor_virtual(x) || x->region || x->first < 0 || !x->bytes) continue;
        int c0 = (int)(x->first / colt), c1 = (int)(x->last / colt);
        double a0 = (double)x->offset, a1 = a0 + (double)x->bytes;
        for (int r = (int)(a0 / rowb); r < ROWS && r * rowb < a1; r++) {
            double lo = r * rowb > a0 ? r * rowb : a0,
                   hi = (r + 1) * rowb < a1 ? (r + 1) * rowb : a1;
            for (int c = c0; c <= c1 && c < COLS; c++) cover[r][c][x->role] += hi - lo;
        }
    }
    char hb[32];
    printf("\nmemory over the schedule (x: %d nodes, forward | backward %s| optimizer; y: arena, "
           "%s per row)\n",
           g->nn, g->micro_batches > 1 ? "| (the further micro-batches) " : "",
           human((int64_t)rowb, hb));
    for (int r = ROWS - 1; r >= 0; r--) {
        printf("%9s |", human((int64_t)(r * rowb), hb));
        for (int c = 0; c < COLS; c++) {
            int best = -1;
            double bv = rowb * 0.02;
            for (int k = 0; k < ROLE_COUNT; k++)
                if (cover[r][c][k] > bv) bv = cover[r][c][k], best = k;
            putchar(best < 0 ? '.' : role_char[best]);
        }
        putchar('\n');
    }
    printf("          +");
    /* the marks: forward | backward | optimizer; with K micro-batches, the end of each
     * micro-batch's backward, the optimizer after the last */
    const int span = g->n_forward + g->n_backward, K = g->micro_batches > 1 ? g->micro_batches : 1;
    int fcol = (int)(g->n_forward / colt);
    for (int c = 0; c < COLS; c++) {
        int mark = c == fcol;
        for (int k = 1; k <= K; k++) mark |= c == (int)(k * span / colt);
        putchar(mark ? '|' : '-');
    }
    printf("\n           roles: ");
    for (int k = 0; k < ROLE_COUNT; k++) printf("%c=%s ", role_char[k], sg_role_names[k]);
    printf("\n");
}

static void print_text(const sg_plan *p, int table, const char *engines_path) {
    const sg_graph *g = &p->g;
    char a[32], b[32], c[32], d[32], e[32];
    printf("stepgraph plan: %s, batch %d, %s, %s\n\n", p->cfg.name, p->cfg.batch,
           p->cfg.act_dt == DT_BF16 ? "bf16 activations / fp32 master weights" : "fp32",
           p->train ? "one training step" : "one sampling step (forward pass and sampler update)");
    if (p->cfg.ranks > 0) {
        /* a ring all-reduce sends and receives 2 (N-1)/N of the buffer per rank */
        const int64_t ar = allreduce_bytes(p);
        printf("  data parallel   %d ranks x %d samples (global batch %d); FLOPs, arena and "
               "everything below are ONE rank's\n",
               p->cfg.ranks, sg_model_rank_batch(&p->cfg), p->cfg.batch);
        printf("  all-reduce      %s per step (%s bytes: gradients + loss); a ring moves %s in "
               "and out of each rank\n",
               human(ar, a), commas(ar, b),
               human((int64_t)(2.0 * (p->cfg.ranks - 1) / p->cfg.ranks * (double)ar), c));
    }
    const int K = sg_model_micro_batches(&p->cfg);
    if (K > 1)
        printf("  accumulation    %d micro-batches of %d samples%s = global batch %d "
               "(--grad-accum %d): gradients summed, one optimizer step; the arena holds one "
               "micro-batch's activations\n",
               K, sg_model_micro_batch(&p->cfg), p->cfg.ranks > 0 ? " per rank" : "", p->cfg.batch,
               K);
    printf("  parameters      %s\n", commas(p->io.n_params, a));
    printf("  FLOPs / step    %.3f TFLOP  (matmul %.3f TFLOP: conv, linear, attention; a "
           "multiply-add counts 2, elementwise work 1 per element)\n",
           p->flops / 1e12, p->matmul_flops / 1e12);
    printf("  traffic / step  %.2f GB at least  (every node's inputs read and outputs written "
           "once; bench sets it against the measured bandwidth)\n",
           sg_graph_bytes(&p->g) / 1e9);
    printf("  arena           %s  (%s bytes, one allocation%s)\n", human(p->arena_bytes, a),
           commas(p->arena_bytes, b), p->cfg.ranks > 0 ? " per rank" : "");
    printf("  lower bound     %s  (most bytes live at once)   arena / bound = %.4f\n",
           human(p->lower_bound_bytes, a), (double)p->arena_bytes / (double)p->lower_bound_bytes);
    printf("  without reuse   %s  (every tensor its own memory: %.2fx the arena)\n",
           human(p->no_reuse_bytes, a), (double)p->no_reuse_bytes / (double)p->arena_bytes);
    const int span = g->n_forward + g->n_backward;
    if (K > 1)
        printf("  schedule        %d nodes: %d micro-batches x (%d forward, %d backward), %d "
               "optimizer; %d tensors, %d in-place (%d shared copies)\n",
               g->nn, K, g->n_forward, g->n_backward, g->nn - K * span, g->nt, p->inplace_merges,
               p->copies_shared);
    else
        printf("  schedule        %d nodes: %d forward, %d backward, %d %s; %d tensors, %d "
               "in-place (%d shared copies)\n",
               g->nn, g->n_forward, g->n_backward, g->nn - span, p->train ? "optimizer" : "sampler",
               g->nt, p->inplace_merges, p->copies_shared);
    printf("  placement       persistent %s at the bottom; dynamic %s by %s\n",
           human(p->persistent_bytes, a), human(p->arena_bytes - p->persistent_bytes, b),
           p->placement ? p->placement : "-");
    printf("  saved           %d activations (%s) kept from the forward pass for the backward "
           "pass; %d recomputed there instead (%s, each live from just before its first "
           "backward reader)\n",
           p->role_tensors[ROLE_SAVED], human(p->role_bytes[ROLE_SAVED], a),
           p->role_tensors[ROLE_RECOMPUTED], human(p->role_bytes[ROLE_RECOMPUTED], b));
    if (sg_model_fuse(&p->cfg))
        printf("  fused           %d normalisations computed inside the convolutions that read "
               "them in the forward pass (GroupNorm + SiLU [+ dropout] in the operand load; the "
               "backward pass recomputes them for the weight gradients, as unfused); %d "
               "residual adds in the store of the "
               "convolution before them (conv2d_add, conv2d_sc: %s of conv output never "
               "written), %d of them with the 1x1 shortcut folded into the same GEMM "
               "(conv2d_sc, %s of shortcut output and gradient never written); %d nearest "
               "upsamples done inside the 3x3 conv after them from the low-res input "
               "(upconv2d, %s of upsampled tensors and their gradients never written): %s "
               "never materialised per step, %s less written and read back (--fuse 0: off)\n",
               p->fused_norms, p->fused_residuals, human(p->fused_residual_bytes, c),
               p->fused_shortcuts, human(p->fused_shortcut_bytes, d), p->fused_upconvs,
               human(p->fused_upconv_bytes, e), human(p->unmaterialised_bytes, a),
               human(2 * p->unmaterialised_bytes, b));
    else
        printf("  fused           nothing (--fuse 0: the default; --fuse 1 fuses%s)\n",
               p->cfg.act_dt == DT_BF16 ? "" : ", on the CPU only in fp32");
    int convs, eligible, gemm, rest, f32_own;
    conv_counts(g, &convs, &eligible, &gemm, &rest, &f32_own);
    char f32[200] = "";
    if (f32_own && !p->cfg.engines)
        snprintf(f32, sizeof f32,
                 " (%d of them fp32 passes at 32 x 32 and above, which run on own unless "
                 "SG_CONV_F32=cudnn or SG_CUDNN_TF32=1)",
                 f32_own);
    printf("  conv engines    %d conv nodes; on CUDA under auto %d (1x1) run as cuBLASLt GEMMs, "
           "%d can run on cuDNN%s, %d on the own kernels (a concatenated or fused operand); "
           "chosen at prepare (--conv-engine)\n",
           convs, gemm, rest, f32, convs - gemm - rest);
    cli_print_engine_table(p, engines_path);
    printf("  plan hash       %016llx\n\n", (unsigned long long)p->hash);
    printf("  by role (bytes, aligned):\n");
    for (int r = 0; r < ROLE_COUNT; r++)
        if (p->role_bytes[r])
            printf("    %-10s %12s  %s\n", sg_role_names[r], human(p->role_bytes[r], a),
                   r == ROLE_SAVED || r == ROLE_TEMP || r == ROLE_RECOMPUTED
                       ? "(sum over the step; shares memory)"
                       : "");

    const sg_node *pk = &g->n[p->peak_node];
    printf("\n  peak: node %d (%s -> %s), %s of activations and gradients live; largest:\n",
           p->peak_node, sg_ops[pk->op].name, g->t[pk->out[0]].name,
           human(p->peak_dynamic_bytes, a));
    int shown[8], ns = 0;
    for (int k = 0; k < 8; k++) {
        int bi = -1;
        for (int t = 0; t < g->nt; t++) {
            const sg_tensor *x = &g->t[t];
            if (sg_tensor_virtual(x) || sg_role_persistent(x->role)) continue;
            if (x->first > p->peak_node || x->last < p->peak_node) continue;
            int dup = 0;
            for (int s = 0; s < ns; s++) dup |= shown[s] == t;
            if (!dup && (bi < 0 || x->bytes > g->t[bi].bytes)) bi = t;
        }
        if (bi < 0) break;
        shown[ns++] = bi;
        printf("    %-52s %-6s %10s  %s\n", g->t[bi].name, sg_role_names[g->t[bi].role],
               human(g->t[bi].bytes, a), sg_shape_str(&g->t[bi], c, sizeof c));
    }

    if (table) {
        printf("\n  %-56s %-18s %-16s %-5s %12s %14s %6s %6s %s\n", "tensor", "op", "shape",
               "dtype", "bytes", "offset", "first", "last", "role");
        for (int t = 0; t < g->nt; t++) {
            const sg_tensor *x = &g->t[t];
            char off[32];
            if (x->nparts)
                snprintf(off, sizeof off, "= %d ++ %d", x->parts[0], x->parts[1]);
            else if (x->vnorm >= 0)
                snprintf(off, sizeof off, "= norm(%d)", x->vnorm);
            else
                snprintf(off, sizeof off, "%lld", (long long)x->offset);
            printf("  %-56s %-18s %-16s %-5s %12lld %14s %6d %6d %s%s%s\n", x->name, op_of(g, t),
                   sg_shape_str(x, c, sizeof c), sg_dtype_names[x->dtype], (long long)x->bytes, off,
                   x->first, x->last, sg_role_names[x->role], x->region ? " (region)" : "",
                   x->recompute && x->recomputed >= 0 ? " (recomputed in the backward pass)" : "");
        }
    }
    print_chart(p);
}

#define PLAN_DEFAULT_MODEL "unet_cifar"

static void usage(FILE *f) {
    fprintf(f, "usage: plan [--model NAME] [flags]\n"
               "Print the memory plan of one training step: where every byte lives.\n\n"
               "  --model NAME         one of:\n");
    cli_print_models(f, PLAN_DEFAULT_MODEL);
    fprintf(f,
            "  --json               machine-readable output (summary, schedule, every tensor)\n"
            "  --no-table           leave out the per-tensor table\n"
            "  --forward            plan a sampling step (forward pass + sampler update)\n"
            "  --ranks N            one rank's plan when N ranks share --batch (data parallel:\n"
            "                       per-rank arena and all-reduce bytes; a training step, not\n"
            "                       with --forward)\n"
            "  --engine-table FILE  plan with a per-layer conv engine table (bench\n"
            "                       --tune-engines writes one): a normalisation read by a layer\n"
            "                       chosen cudnn is stored, not fused; prints each layer's choice\n"
            "  --help               this text\n"
            "model flags:\n%s",
            sg_model_flags_help);
}

int main(int argc, char **argv) {
    int json = 0, table = 1, train = 1;
    sg_model_cfg cfg;
    sg_engine_table engines;
    const char *engines_path = NULL;
    sg_engine_table_init(&engines);
    if (cli_model_prelude("plan", argc, argv, PLAN_DEFAULT_MODEL, &cfg)) return 2;
    cli_args a;
    cli_args_init(&a, "plan", argc, argv);
    while (cli_next(&a)) {
        if (cli_is(&a, "--help")) return usage(stdout), 0;
        if (cli_is(&a, "--json"))
            json = 1;
        else if (cli_is(&a, "--no-table"))
            table = 0;
        else if (cli_is(&a, "--forward"))
            train = 0;
        else if (cli_is(&a, "--ranks")) {
            if (cli_int(&a, 1, 1 << 16, &cfg.ranks)) return 2;
        } else if (cli_is(&a, "--engine-table")) {
            if (cli_engine_table(&a, &engines, &engines_path)) return 2;
            cfg.engines = &engines;
        } else {
            int r = cli_model_flag(&a, &cfg);
            if (r <= 0) return r < 0 ? 2 : cli_unknown(&a);
        }
    }
    if (!train && cfg.ranks) {
        sg_engine_table_free(&engines);
        fprintf(stderr, "plan: --ranks plans one rank of a data-parallel training step; a sampling "
                        "step (--forward) runs in one process and has no gradients to all-reduce: "
                        "give one of them\n");
        return 2;
    }
    sg_plan p;
    if (sg_plan_build(&p, &cfg, train)) {
        sg_plan_free(&p);
        sg_engine_table_free(&engines);
        return cli_fail("plan", 1);
    }
    int rc = json ? print_json(&p) : (print_text(&p, table, engines_path), SG_OK);
    sg_plan_free(&p);
    sg_engine_table_free(&engines);
    return rc ? cli_fail("plan", 1) : 0;
}
