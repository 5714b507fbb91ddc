/* backend_cuda_engines.c — the CUDA backend's engine choice: which engine runs each conv node,
 * decided once in prepare() (prepare_conv_engines) and recorded per node (node_engine(),
 * describe()).
 *
 * Convolution engines (issue 14; kernels/cuda/cudnn_conv.h): each conv node (forward,
 * backward-data, backward-filter) runs on `own` (conv.cu) or `cudnn`, decided once in prepare()
 * from be->conv_engine and recorded per node (node_engine(), describe()). With cuDNN asked for
 * (auto or cudnn, in a build with SG_HAVE_CUDNN), prepare() picks and pins every eligible
 * node's deterministic engine configuration and builds its execution plan, in the library
 * workspace (the plan's cublas_workspace), before the warm-up step; the table is frozen with
 * the GEMM table after it, so the captured step runs exactly the plans the eager step ran.
 * A node whose operand is a two-buffer concatenation (the decoder's skip inputs) or a virtual
 * normalised tensor (a fused GroupNorm + SiLU, planner/fuse.c) runs on own: cuDNN needs one
 * stored tensor. A node cuDNN has no deterministic engine for within the budget is an
 * error under `cudnn` and runs on own under `auto`, each with a line on stderr naming the layer
 * and the reason. Every cuDNN reference is behind SG_HAVE_CUDNN: without it, every conv is own.
 * With an engine table in the plan's config (planner/engine_table.h) and `auto`, a node goes
 * to cuDNN only when its layer's entry says cudnn (and its pass is not one the table sends to
 * own: "passes"), and stays on own when it says own.
 *
 * The GEMM engine (`gemm`, CONV_ENGINE_GEMM): under `auto`, every 1x1 stride-1 conv node
 * (the ResBlock shortcuts, attention's qkv and output projections) whose input is stored runs
 * as cuBLASLt GEMMs (conv.cu's cuda_conv2d_gemm_*: linear.cu's GEMM layer, algorithms pinned
 * in the GEMM table), in every build, with or without cuDNN: a 1x1 conv is a GEMM, and the
 * first GPU run measured cuBLASLt's GEMM of each such layer's size 2-5x faster than both the
 * cuDNN engine and the own kernels on that layer (bench/results/2026-11-28-nvidia-h200-bench-2.md,
 * per conv layer: 4.8 ms of the step's 75 1x1 passes against 1.4 ms as GEMMs). It takes the
 * skip concatenation as one GEMM per part, so the decoder's 1x1 shortcuts leave the own
 * kernels too. An engine table's `cudnn` for a 1x1 layer means this library side; `own` keeps
 * the own kernels; --conv-engine own and cudnn force their engine for 1x1 convs as well; a
 * conv whose input is a virtual normalised tensor (a fused prologue) stays own.
 * Since then the own kernels got faster: the second GPU session measured every 1x1 forward of
 * unet_cifar in bf16 faster on own's tensor-core kernel than as a GEMM (the GEMM writes fp32
 * products to a workspace tile, then a second pass adds the bias and rounds, and the
 * statistics' partials are a third; own does all three in its epilogue): 25 nodes, 1.110
 * against 1.913 ms at batch 128, 0.329 against 1.124 at batch 8, each node faster
 * (bench/results/2026-11-28-nvidia-h200-bench-3.md), while both backward passes stayed faster
 * as GEMMs. So without an engine table entry for its layer, a bf16 1x1 forward whose channels
 * the tensor-core kernel takes (multiples of 8) runs on own (FWD_1X1_OWN), its backward passes
 * on gemm; a resume's record of gemm keeps gemm. Since then the GEMM's forward of a one-part
 * input rounds once from cuBLASLt's bias epilogue (kernels/cuda/linear.cu), no tile and no
 * second pass: the GEMM the fourth GPU session timed beside each layer (the per-layer table's
 * same-size GEMM, both operands K-contiguous, bf16 out: the epilogue's layout) took 0.030 ms for
 * a to_qkv forward at batch 128 against own's 0.093, 0.013 for a to_out against 0.037
 * (bench/results/2026-12-04-nvidia-h200-session2-side-by-side.md). So where the library offers
 * the epilogue (sg_blas_bias_epilogue, asked once in prepare: describe()'s gemm_epilogue),
 * FWD_1X1_OWN keeps on own only the 1x1 forwards whose input is a concatenation (the decoder's
 * shortcuts, whose parts still sum in the tile); the others run on gemm. Not yet run on a GPU
 * (docs/gpu-status.md); SG_GEMM_EPILOGUE=0 turns the epilogue off (the tile everywhere, the
 * rule as before). THIN_OWN: with SG_CONV_THIN=own, a pass of a
 * convolution with 1 to 4 channels on one side (the image's conv_in and conv_out) that the own
 * engine's thin kernels take (cuda_conv2d_thin_passes) runs on own under auto unless the engine
 * table names its layer or a resume's record says cudnn: cuDNN took 0.17 to 0.22 ms for each of
 * four such passes of unet_cifar at batch 128 (bench-3.md), the thin kernels are unmeasured, so
 * this is off by default until a GPU times it (gpu_call.sh's thin_own variant). SG_CONV_THIN=0
 * runs the own engine's thin passes on the 64 x 64 tiles instead (the same bits).
 * F32_OWN: an fp32 conv pass (no TF32) whose input is 32 x 32 or larger runs on own under
 * auto unless the engine table names its layer or a resume's record says cudnn. The fourth GPU
 * session timed unet_adm64 at batch 32 in fp32 at 359.4 ms a step against PyTorch eager's 66.4:
 * the deterministic fp32 cuDNN engines the heuristics put first (workspace within the budget)
 * took 19.7 to 58.2 ms for each 64 x 64 data gradient that own's kernels did in 0.54 to 1.46,
 * 274.0 against 7.7 ms for the 11; at 64 x 64 the forward and weight gradient were 1.9 and 1.5x
 * faster on own as well, at 32 x 32 the forward, while at 8 x 8 and 16 x 16 cuDNN was faster in
 * every pass (bench/results/2026-12-04-nvidia-h200-session2-side-by-side.md, per conv layer).
 * Summed over the conv layers: 345.3 ms as chosen, 70.8 every pass on own, 63.1 under this
 * rule, 59.0 the per-layer best (the engine table's). SG_CONV_F32=cudnn turns it off. The rule
 * is sg_conv_f32_own_node (planner/engine_table.h), which `plan` counts with.
 *
 * Attention engines (issue 14): SG_ATTN=gemm (the default: cuBLASLt GEMMs + softmax kernels)
 * or fused (scores and softmax in registers, bf16 shapes it takes: kernels/cuda/attention.cu), read
 * when the backend is created. Both take the same plan, workspace and saved P; their bits
 * differ, so a run keeps one (describe() records it as attn_engine; node_engine() names it).
 * Within own, each conv node's tensor-core generation (CONV_ENGINE_WGMMA: the Hopper kernels,
 * conv_wgmma.cu, instead of conv_tc.cu's mma.sync ones; bf16, compute capability 9.0) comes from
 * the engine table's layer ("tc":"wgmma", measured by bench --tune-engines), a resume's record,
 * or SG_CONV_TC=mma|wgmma, which forces one generation on every own conv (prepare_conv_tc).
 */
#ifdef SG_HAVE_CUDA

#include "graph/backend_cuda_ctx.h"

/* Whether node i is an attention node whose shape the fused kernels take (SG_ATTN=fused then
 * runs it fused; other shapes stay on the GEMM path). 0 for every other op. */
int attn_node_fusable(const sg_graph *g, int i) {
    const sg_node *nd = &g->n[i];
    if (!sg_op_is_attention(nd->op)) return 0;
    const sg_attn_dims d = sg_attn_dims_of(g, nd);
    /* qkv's dtype (attention_p's output is P, fp32 whatever the activations) */
    const int qkv = nd->in[nd->op == OP_ATTENTION_BWD ? 1 : 0];
    return cuda_attention_fused_ok(d.L, d.C, d.heads, g->t[qkv].dtype);
}

#ifdef SG_HAVE_CUDNN
/* Conv node nd as a cuDNN call (cudnn_conv.h); 0 when an operand is a two-buffer
 * concatenation, which cuDNN cannot take, or the activations differ in dtype. */
int conv_cudnn_call(const cuda_ctx *c, const sg_graph *g, const sg_node *nd, sg_cudnn_conv *cv) {
    sg_conv_dims d = sg_conv_dims_of(g, nd);
    memset(cv, 0, sizeof *cv);
    cv->N = d.N, cv->H = d.H, cv->W = d.W, cv->Ci = d.Ci, cv->Co = d.Co, cv->K = d.K, cv->S = d.S;
    cv->pad = d.pad;
    cv->dt = (int)g->t[nd->in[0]].dtype; /* x forward, dy backward */
    cv->out = P(c, g, nd->out[0]);
    cv->in = P(c, g, nd->in[0]);
    if (nd->op == OP_CONV2D || nd->op == OP_CONV2D_ADD) {
        cv->pass = SG_CUDNN_FWD;
        cv->w = P(c, g, nd->in[1]);
        cv->b = P(c, g, nd->in[2]);
    } else if (nd->op == OP_CONV2D_BWD_DATA) {
        cv->pass = SG_CUDNN_BWD_DATA;
        cv->w = P(c, g, nd->in[1]);
        cv->accum = (int)(sg_accum_bits(nd, 0) & 1u);
    } else {
        SG_ASSERT(nd->op == OP_CONV2D_BWD_WEIGHT);
        cv->pass = SG_CUDNN_BWD_FILTER;
        cv->x = P(c, g, nd->in[1]);
        cv->accum = (int)(sg_accum_bits(nd, 0) & 1u);
        /* db too, by the call (with a bf16 dw's widening: one launch), its partials in the
         * kernel workspace; so a timed choice times the whole pass */
        cv->db = (float *)P(c, g, nd->out[1]);
        cv->db_ws = c->ws, cv->db_ws_bytes = c->ws_bytes;
    }
    /* one dtype for the activations of the call, as the own kernels also assume */
    const int other = nd->op == OP_CONV2D || nd->op == OP_CONV2D_ADD ? nd->out[0]
                      : nd->op == OP_CONV2D_BWD_DATA                 ? nd->out[0]
                                                                     : nd->in[1];
    return cv->out && cv->in && (cv->pass == SG_CUDNN_BWD_FILTER ? cv->x != NULL : cv->w != NULL) &&
           (int)g->t[other].dtype == cv->dt;
}
#endif

#ifdef SG_HAVE_CUDNN
/* A resume (be->conv_pins: the checkpoint's {"table":[names],"nodes":[index per conv node]}):
 * each conv node's recorded engine is marked in pinned[] (SG_CONV_ENGINE_OWN, _CUDNN,
 * CONV_ENGINE_GEMM), and each recorded cuDNN engine is asked for (sg_cudnn_prefer) on its
 * node's descriptor. A record that does not fit this plan is said
 * and ignored: the engines are then chosen afresh, and the resume's comparison names the
 * layers that differ. */
static void apply_conv_pins(cuda_ctx *c, const sg_graph *g, const char *pins, unsigned char *pinned,
                            int *n_own, int *n_cudnn) {
    json_error_t err;
    json_t *r = json_loads(pins, 0, &err);
    json_t *table = json_object_get(r, "table"), *nodes = json_object_get(r, "nodes");
    int convs = 0, bad = 0;
    for (int i = 0; i < g->nn; i++) convs += is_conv(g->n[i].op);
    if (!json_is_array(table) || !json_is_array(nodes) || (int)json_array_size(nodes) != convs) {
        fprintf(stderr,
                "stepgraph: warning: the checkpoint's conv-engine record does not fit this "
                "plan (%d conv nodes): engines chosen afresh\n",
                convs);
        json_decref(r);
        return;
    }
    for (int i = 0, k = 0; i < g->nn; i++) {
        if (!is_conv(g->n[i].op)) continue;
        const char *name = json_string_value(
            json_array_get(table, (size_t)json_integer_value(json_array_get(nodes, (size_t)k++))));
        sg_cudnn_conv cv;
        if (!name) {
            bad++;
        } else if (!strcmp(name, "own") || !strcmp(name, "wgmma")) {
            pinned[i] = !strcmp(name, "own") ? SG_CONV_ENGINE_OWN : CONV_ENGINE_WGMMA, (*n_own)++;
        } else if (!strcmp(name, "gemm")) {
            pinned[i] = CONV_ENGINE_GEMM;
        } else if (!strncmp(name, "cudnn ", 6) && conv_cudnn_call(c, g, &g->n[i], &cv)) {
            if (sg_cudnn_prefer(c->dnn, &cv, name + 6) == SG_OK)
                pinned[i] = SG_CONV_ENGINE_CUDNN, (*n_cudnn)++;
            else
                bad++, fprintf(stderr, "stepgraph: warning: node %d: %s\n", i, sg_last_error());
        } else {
            bad++;
        }
    }
    if (bad)
        fprintf(stderr,
                "stepgraph: warning: %d conv node(s) of the checkpoint's engine record "
                "could not be asked for\n",
                bad);
    json_decref(r);
}
#endif

#ifdef SG_HAVE_CUDNN
/* The engine table's cuDNN engine names (planner/engine_table.h: a timed tuning run's choice)
 * asked for on every conv node of a cudnn layer that cuDNN may run; a name that does not fit is
 * said and left to the heuristics. */
static void apply_table_engines(cuda_ctx *c, const sg_graph *g, const sg_engine_table *t) {
    int asked = 0, bad = 0;
    for (int i = 0; i < g->nn; i++) {
        const sg_engine_entry *x = sg_engine_table_entry_of(t, g, i);
        const int pass = sg_conv_pass_of(g->n[i].op);
        sg_cudnn_conv cv;
        if (!x || x->engine != SG_LAYER_CUDNN || pass < 0 || !x->cudnn[pass][0] ||
            sg_conv_gemm_node(g, i) || !conv_cudnn_call(c, g, &g->n[i], &cv))
            continue;
        if (sg_cudnn_prefer(c->dnn, &cv, x->cudnn[pass]) == SG_OK) {
            asked++;
        } else {
            bad++;
            fprintf(stderr, "stepgraph: warning: node %d (layer %s): %s\n", i, x->layer,
                    sg_last_error());
        }
    }
    if (asked || bad)
        fprintf(stderr,
                "stepgraph: engine table: %d conv node(s) asked for their timed cuDNN engine%s\n",
                asked, bad ? " (some could not be: said above)" : "");
}
#endif

/* A wgmma grid knob (SG_WG_PERSIST, SG_WG_FILL): unset or 0 -> 0, 1 -> -1 (the device's SM
 * count), n > 1 -> n; anything else an error naming it, `expected` what it takes. */
static int env_wg_knob(const char *name, const char *expected, int *v) {
    const char *s = getenv(name);
    *v = 0;
    if (!s || !*s) return SG_OK;
    char *end = NULL;
    const long n = strtol(s, &end, 10);
    if (*end || n < 0 || n > 1 << 20) return sg_set_error("%s=%s: expected %s", name, s, expected);
    *v = n == 1 ? -1 : (int)n;
    return SG_OK;
}

/* SG_CONV_TC (unset, "mma" or "wgmma"): one tensor-core generation for every own bf16
 * convolution, whatever the engine table says (unset: each layer's from the table, mma.sync
 * without one). wgmma is refused here, with the reason, where it cannot run: a device other
 * than compute capability 9.0 (the kernels are sm_90a code), a plan whose convolutions are not
 * bf16, --conv-engine cudnn (a plan without convolutions is left alone). With `auto` it means
 * own. A wgmma node's calls go to wgmma unless cuda_conv2d_wgmma_refusal refuses the call (not
 * a tensor-core convolution, e.g. the 3-channel image convs; an operand not 128-byte aligned):
 * that call runs where own would run it (fixed by the plan, so the same calls every step). */
/* The wgmma kernels' schedule s (SG_WG_SCHED_*: a persistent grid of a block per SM, the N tile
 * that fills the SMs) for the launches that follow */
static void wg_sched_set(int s) {
    cuda_conv_wgmma_persist(s & SG_WG_SCHED_PERSIST ? -1 : 0);
    cuda_conv_wgmma_fill(s & SG_WG_SCHED_FILL ? -1 : 0);
}

/* The wgmma knobs for the launches that follow: schedule s where s >= 0 (a layer's own, each
 * knob the environment leaves unset), else the step's (wg_persist, wg_fill); a forced schedule
 * (wg_force) wins over both. */
void wg_sched_apply(const cuda_ctx *c, int s) {
    if (c->wg_force >= 0) {
        wg_sched_set(c->wg_force);
        return;
    }
    cuda_conv_wgmma_persist(s < 0 || c->wg_env_persist ? c->wg_persist
                            : s & SG_WG_SCHED_PERSIST  ? -1
                                                       : 0);
    cuda_conv_wgmma_fill(s < 0 || c->wg_env_fill ? c->wg_fill : s & SG_WG_SCHED_FILL ? -1 : 0);
}

/* backend.h: wg_sched */
void cuda_wg_sched(sg_backend *be, int s) {
    cuda_ctx *c = be->ctx;
    c->wg_force = s >= 0 ? s : -1;
    wg_sched_apply(c, -1);
}

static int prepare_conv_tc(cuda_ctx *c, const sg_graph *g, const sg_engine_table *table) {
    /* SG_TC_HALO (unset or 1, 0, all): the fused prologue's forward on the resident halo or
     * per tap, or every tensor-core forward on the halo (conv_tc.cu; the same bits, so a GPU
     * can time each) */
    const char *halo = getenv("SG_TC_HALO");
    if (halo && *halo && strcmp(halo, "0") && strcmp(halo, "1") && strcmp(halo, "all"))
        return sg_set_error("SG_TC_HALO=%s: expected 1 (the default), 0 or all", halo);
    c->tc_halo = !halo || !*halo || !strcmp(halo, "1") ? SG_TC_HALO_PROLOGUE
                 : !strcmp(halo, "all")                ? SG_TC_HALO_ALL
                                                       : SG_TC_HALO_NONE;
    /* unset: the engine table's timed choice, where it makes one */
    if ((!halo || !*halo) && table && table->knobs.tc_halo >= 0)
        c->tc_halo = table->knobs.tc_halo == SG_KNOB_HALO_ALL    ? SG_TC_HALO_ALL
                     : table->knobs.tc_halo == SG_KNOB_HALO_NONE ? SG_TC_HALO_NONE
                                                                 : SG_TC_HALO_PROLOGUE;
    /* SG_TC_DGRAD_STATS (unset or 0, 1): the mma.sync data gradient's backward partials by the
     * partials pass after it or in its epilogue (conv_tc.cu; the same bits) */
    const char *ds = getenv("SG_TC_DGRAD_STATS");
    if (ds && *ds && strcmp(ds, "0") && strcmp(ds, "1"))
        return sg_set_error("SG_TC_DGRAD_STATS=%s: expected 0 (the default) or 1", ds);
    c->dgrad_epilogue = ds && !strcmp(ds, "1");
    if ((!ds || !*ds) && table && table->knobs.dgrad_stats >= 0)
        c->dgrad_epilogue = table->knobs.dgrad_stats;
    /* SG_WG_PERSIST: the wgmma pipelined kernels on a block per tile, on a persistent grid of
     * one block per SM, or of at most n blocks (host tests: several tiles per block); SG_WG_FILL:
     * the wgmma forwards' and data gradients' N tile by padding alone, or narrower where it fills
     * the device's SMs (or n SMs: host tests) better; conv_wgmma.cu, the same bits every way */
    int persist, fill;
    if (env_wg_knob("SG_WG_PERSIST",
                    "0 (the default: a block per tile), 1 (a block per SM) or a block count",
                    &persist) ||
        env_wg_knob("SG_WG_FILL",
                    "0 (the default: the widest tile), 1 (the tile width that fills the SMs) or "
                    "an SM count",
                    &fill))
        return SG_ERR;
    /* a knob the environment leaves unset: the engine table's schedule (measured by the
     * tuning), where it has one */
    const char *pe = getenv("SG_WG_PERSIST"), *fe = getenv("SG_WG_FILL");
    c->wg_env_persist = pe && *pe, c->wg_env_fill = fe && *fe;
    if (!c->wg_env_persist && table) persist = table->wg_sched & SG_WG_SCHED_PERSIST ? -1 : 0;
    if (!c->wg_env_fill && table) fill = table->wg_sched & SG_WG_SCHED_FILL ? -1 : 0;
    c->wg_persist = persist, c->wg_fill = fill, c->wg_force = -1;
    wg_sched_apply(c, -1);
    /* SG_WG_DGRAD_HALO (unset or 1, 0): the wgmma stride-1 3x3 data gradients on a resident halo
     * of dy where it fits, or per tap (conv_wgmma.cu; the same bits, so a GPU can time both) */
    const char *dh = getenv("SG_WG_DGRAD_HALO");
    if (dh && *dh && strcmp(dh, "0") && strcmp(dh, "1"))
        return sg_set_error("SG_WG_DGRAD_HALO=%s: expected 1 (the default) or 0", dh);
    c->wg_dgrad_halo = !dh || !*dh || !strcmp(dh, "1");
    cuda_conv_wgmma_dgrad_halo(c->wg_dgrad_halo);
    int major = 0, minor = 0;
    CU(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, c->dev));
    CU(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, c->dev));
    c->wgmma_ok = major == 9 && minor == 0;
    const char *env = getenv("SG_CONV_TC");
    c->conv_tc_force = -1;
    if (!env || !*env) return SG_OK;
    c->conv_tc_force = sg_tc_parse(env);
    if (c->conv_tc_force < 0)
        return sg_set_error("SG_CONV_TC=%s: expected mma or wgmma (unset: the engine table's "
                            "per layer, else mma)",
                            env);
    if (c->conv_tc_force == SG_TC_MMA) return SG_OK;
    int convs = 0, bf16 = 0;
    for (int i = 0; i < g->nn; i++)
        if (is_conv(g->n[i].op)) convs++, bf16 += g->t[g->n[i].in[0]].dtype == DT_BF16;
    if (!convs) return SG_OK; /* nothing to run there (a sampler's plan, an op test) */
    if (c->conv_engine == SG_CONV_ENGINE_CUDNN)
        return sg_set_error("SG_CONV_TC=wgmma selects the own engine's kernels, but --conv-engine "
                            "cudnn asks for cuDNN");
    if (!c->wgmma_ok)
        return sg_set_error("SG_CONV_TC=wgmma: the wgmma convolutions are sm_90a code and need a "
                            "compute capability 9.0 GPU (H100/H200); this device is %d.%d",
                            major, minor);
    if (!bf16)
        return sg_set_error("SG_CONV_TC=wgmma: the wgmma convolutions are bf16 only and this "
                            "plan has no bf16 convolution (--precision bf16)");
    c->conv_engine = SG_CONV_ENGINE_OWN;
    fprintf(stderr, "stepgraph: SG_CONV_TC=wgmma: the own engine's bf16 tensor-core convolutions "
                    "run on the wgmma kernels (conv_wgmma.cu)\n");
    return SG_OK;
}

/* An own conv node's generation: SG_CONV_TC's where forced, else a resume's record (pin), else
 * the engine table's layer (also under --conv-engine own, which forces the engine, not which
 * own kernels); wgmma only for a bf16 node on a device that runs it (a table or
 * record that asks for it elsewhere is counted in *refused, said once by the caller). */
static int own_generation(const cuda_ctx *c, const sg_plan *p, int i, int pin, int *refused) {
    const sg_graph *g = &p->g;
    const int tc = c->conv_tc_force >= 0       ? c->conv_tc_force
                   : pin == CONV_ENGINE_WGMMA  ? SG_TC_WGMMA
                   : pin == SG_CONV_ENGINE_OWN ? SG_TC_MMA
                                               : sg_engine_table_node_tc(p->cfg.engines, g, i);
    if (tc != SG_TC_WGMMA) return SG_CONV_ENGINE_OWN;
    if (!c->wgmma_ok || g->t[g->n[i].in[0]].dtype != DT_BF16) {
        (*refused)++;
        return SG_CONV_ENGINE_OWN;
    }
    return CONV_ENGINE_WGMMA;
}

/* The own-only ops (no engine-chosen conv node) on the wgmma kernels: node_eng[i] =
 * CONV_ENGINE_WGMMA (0 otherwise: mma.sync) for a shortcut fold (conv2d_sc) where its backward
 * passes are on them (their layers' generation: SG_CONV_TC, a resume's record, the table's
 * conv2 layer, sg_engine_table_node_tc); for an upsample conv (upconv2d, and its two backward
 * passes with it), or a fold in a plan without backward passes (sampling), where SG_CONV_TC or
 * the table's (first) layer says wgmma; only for bf16 on a device that runs them. The call
 * itself still runs on mma.sync where the wgmma refusal refuses an operand (fixed by the plan,
 * so the same calls every step). */
static void prepare_own_only(cuda_ctx *c, const sg_plan *p) {
    const sg_graph *g = &p->g;
    int on[2] = {0, 0};
    for (int i = 0; i < g->nn; i++) {
        const int up = g->n[i].op == OP_UPCONV2D;
        if (g->n[i].op != OP_CONV2D_SC && !up) continue;
        int gen = -1;
        /* (its backward passes on own: a 1x1 shortcut's may be on gemm under auto) */
        for (int j = 0; j < g->nn && gen < 0; j++)
            if (is_conv(g->n[j].op) && g->n[j].fwd == i && on_own(c->node_eng[j]))
                gen = c->node_eng[j] == CONV_ENGINE_WGMMA;
        if (gen < 0) {
            char names[2][SG_NAME_MAX];
            const sg_engine_entry *e = sg_conv_layers_computed(g, i, names) > 0
                                           ? sg_engine_table_find(p->cfg.engines, names[0])
                                           : NULL;
            gen = c->conv_tc_force >= 0 ? c->conv_tc_force == SG_TC_WGMMA
                                        : e && e->engine == SG_LAYER_OWN && e->tc == SG_TC_WGMMA;
        }
        c->node_eng[i] =
            gen > 0 && c->wgmma_ok && g->t[g->n[i].in[0]].dtype == DT_BF16 ? CONV_ENGINE_WGMMA : 0;
        on[up] += c->node_eng[i] != 0;
        for (int j = 0; up && j < g->nn; j++)
            if (g->n[j].fwd == i &&
                (g->n[j].op == OP_UPCONV2D_BWD_DATA || g->n[j].op == OP_UPCONV2D_BWD_WEIGHT))
                c->node_eng[j] = c->node_eng[i];
    }
    if (on[0] || on[1])
        fprintf(stderr,
                "stepgraph: %d shortcut fold(s) (conv2d_sc) and %d upsample conv(s) (upconv2d, "
                "with their backward passes) on the wgmma kernels\n",
                on[0], on[1]);
}

/* FWD_1X1_OWN (the file comment): is conv node i a bf16 1x1 forward on a stored input (a gemm
 * node) whose channels own's tensor-core kernel takes, and whose GEMM would need the fp32 tile
 * (its input a concatenation, or the library without the bias epilogue)? */
int fwd_1x1_own(const cuda_ctx *c, const sg_graph *g, int i) {
    const sg_node *nd = &g->n[i];
    if (!sg_conv_gemm_node(g, i) || sg_conv_pass_of(nd->op) != SG_CONV_PASS_FWD ||
        g->t[nd->in[0]].dtype != DT_BF16 || (c->gemm_epi && !g->t[nd->in[0]].nparts))
        return 0;
    const sg_conv_dims d = sg_conv_dims_of(g, nd);
    return d.Ci % 8 == 0 && d.Co % 8 == 0;
}

/* describe()'s conv_wino: "on" (SG_CONV_WINO=1), "table" (unset, and the engine table puts
 * passes on Winograd), "off" (neither) */
const char *wino_text(const cuda_ctx *c) {
    return c->conv_wino > 0 ? "on" : c->conv_wino < 0 && c->wino_nodes ? "table" : "off";
}

/* describe()'s conv_f32_tc: "on" (SG_CONV_F32_TC=1), "table" (unset, and the engine table puts
 * tiles on the tensor cores), "off" (neither) */
const char *f32tc_text(const cuda_ctx *c) {
    return c->f32_tc > 0 ? "on" : c->f32_tc < 0 && c->f32tc_nodes ? "table" : "off";
}

/* Is conv node `node` an fp32 pass of a plain convolution that the thin kernels (first in
 * conv.cu) leave to the tiles' side? Its dims into *d. */
static int f32_off_thin(const sg_plan *p, int node, sg_conv_dims *d) {
    const sg_node *nd = &p->g.n[node];
    const int pass = sg_conv_pass_of(nd->op);
    if (!sg_op_is_conv(nd->op) || pass < 0) return 0;
    *d = sg_conv_dims_of(&p->g, nd);
    const int x = pass == SG_CONV_PASS_BWD_DATA     ? nd->out[0]
                  : pass == SG_CONV_PASS_BWD_FILTER ? nd->in[1]
                                                    : nd->in[0];
    return p->g.t[x].dtype == DT_F32 &&
           !(cuda_conv2d_thin_passes(d->Ci, d->Co, d->K, d->S) & (1u << pass));
}

/* Would the Winograd form (kernels/cuda/conv_wino.cu) take conv node `node` with the switch on:
 * an fp32 3x3 stride-1 padding-1 pass that the thin kernels (before it in conv.cu) leave to the
 * tiles */
int wino_node(const sg_plan *p, int node) {
    sg_conv_dims d;
    return f32_off_thin(p, node, &d) && d.K == 3 && d.S == 1 && d.pad == 1;
}

/* Would the own engine's direct tiles (kernels/cuda/conv.cu) take conv node `node` with
 * Winograd off: an fp32 pass that is no 1x1 stride-1 GEMM and that the thin kernels leave to
 * them (the node timing of their two product forms tries these alone) */
int tiles_node(const sg_plan *p, int node) {
    sg_conv_dims d;
    return f32_off_thin(p, node, &d) && !(d.K == 1 && d.S == 1);
}

/* THIN_OWN (the file comment): is conv node i a pass the thin kernels take, its x (forward,
 * weight gradient) or dx (data gradient) one buffer? */
static int thin_own_node(const sg_graph *g, int i) {
    const sg_node *nd = &g->n[i];
    const int pass = sg_conv_pass_of(nd->op);
    if (pass < 0) return 0;
    const int x = pass == SG_CONV_PASS_BWD_DATA     ? nd->out[0]
                  : pass == SG_CONV_PASS_BWD_FILTER ? nd->in[1]
                                                    : nd->in[0];
    if (g->t[x].nparts) return 0;
    const sg_conv_dims d = sg_conv_dims_of(g, nd);
    return (cuda_conv2d_thin_passes(d.Ci, d.Co, d.K, d.S) >> pass) & 1u;
}

/* Decide every conv node's engine (see the file comment), once, before the warm-up step. */
int prepare_conv_engines(sg_backend *be, const sg_plan *p, void *lib_ws, int64_t lib_wsb) {
    cuda_ctx *c = be->ctx;
    const sg_graph *g = &p->g;
    c->conv_engine = be->conv_engine;
    if (c->conv_engine < SG_CONV_ENGINE_AUTO || c->conv_engine > SG_CONV_ENGINE_CUDNN)
        return sg_set_error("conv engine %d is not auto, own or cudnn", c->conv_engine);
    if (prepare_conv_tc(c, g, p->cfg.engines)) return SG_ERR;
    c->node_eng = calloc((size_t)(g->nn > 0 ? g->nn : 1), 1);
    if (!c->node_eng) return sg_set_error("out of host memory");
    int want = c->conv_engine != SG_CONV_ENGINE_OWN, concat = 0, first_concat = -1;
    int tc_refused = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
#ifdef SG_HAVE_CUDNN
    if (want && sg_cudnn_create(&c->dnn, c->st, lib_ws, lib_wsb)) {
        if (c->conv_engine == SG_CONV_ENGINE_CUDNN)
            return sg_set_error("--conv-engine cudnn: %s", sg_last_error());
        fprintf(stderr,
                "stepgraph: warning: cuDNN is unusable (%s): every conv runs on the own "
                "engine\n",
                sg_last_error());
        want = 0;
    }
    /* fp32 convs on TF32 tensor cores only when asked for (cudnn_conv.h) */
    const char *tf32 = getenv("SG_CUDNN_TF32");
    if (c->dnn && tf32 && !strcmp(tf32, "1")) {
        sg_cudnn_allow_tf32(c->dnn, 1);
        c->f32_own = 0; /* TF32 engines are another matter: unmeasured against own */
        fprintf(stderr, "stepgraph: SG_CUDNN_TF32=1: fp32 convs may run on TF32 engines\n");
    }
    /* a tuning run: each cuDNN engine chosen by timing (graph/engine_tune.h) */
    if (c->dnn && be->cudnn_time_reps > 0) {
        if (sg_cudnn_set_timing(c->dnn, be->cudnn_time_reps, &c->win, stderr)) return SG_ERR;
        fprintf(stderr,
                "stepgraph: cuDNN engines chosen by timing (%d runs of each candidate), for the "
                "engine table\n",
                be->cudnn_time_reps);
    }
    /* the engine table's timed cuDNN engines, asked for before any engine is chosen (a
     * resume's record, below, is asked for after them and wins) */
    if (want && c->conv_engine == SG_CONV_ENGINE_AUTO && p->cfg.engines)
        apply_table_engines(c, g, p->cfg.engines);
    /* a resume: the engines the checkpoint's step ran (before any engine is chosen) */
    unsigned char *pinned = NULL;
    int pins_own = 0, pins_cudnn = 0;
    if (want && be->conv_pins) {
        pinned = calloc((size_t)(g->nn > 0 ? g->nn : 1), 1);
        if (!pinned) return sg_set_error("out of host memory");
        apply_conv_pins(c, g, be->conv_pins, pinned, &pins_own, &pins_cudnn);
    }
#else
    (void)lib_ws, (void)lib_wsb;
    if (c->conv_engine == SG_CONV_ENGINE_CUDNN)
        return sg_set_error("--conv-engine cudnn: this build has no cuDNN (none was found at "
                            "configure time: -DSG_CUDNN_ROOT=DIR, see README.md)");
    want = 0;
#endif
    for (int i = 0; i < g->nn; i++) {
        const sg_node *nd = &g->n[i];
        if (!is_conv(nd->op)) continue;
        int eng = SG_CONV_ENGINE_OWN;
        /* the engine table's choice for this layer (auto only: own / cudnn force), own for a
         * cudnn layer's pass the tuning measured faster on own (its input stored all the same) */
        const int layer_pick =
            c->conv_engine == SG_CONV_ENGINE_AUTO ? sg_engine_table_node(p->cfg.engines, g, i) : 0;
        const int pick =
            layer_pick == SG_LAYER_CUDNN && sg_engine_table_node_pass_own(p->cfg.engines, g, i)
                ? SG_LAYER_OWN
                : layer_pick;
        /* auto's library side of a 1x1 stride-1 conv: cuBLASLt GEMMs (own where the table says
         * own; cuDNN only when asked for by --conv-engine cudnn or a resume's record) */
        const int gemm = c->conv_engine == SG_CONV_ENGINE_AUTO && pick != SG_LAYER_OWN &&
                         sg_conv_gemm_node(g, i);
        /* ... but its forward on own by default (the file comment) */
        const int fwd_own = gemm && !layer_pick && fwd_1x1_own(c, g, i);
        /* SG_CONV_THIN=own: a thin pass on own (THIN_OWN, the file comment) */
        const int thin_own = c->thin_own && c->conv_engine == SG_CONV_ENGINE_AUTO && !layer_pick &&
                             thin_own_node(g, i);
        /* an fp32 pass at 32 x 32 and above on own (F32_OWN, the file comment) */
        const int f32_own = c->f32_own && c->conv_engine == SG_CONV_ENGINE_AUTO && !layer_pick &&
                            sg_conv_f32_own_node(g, i);
#ifdef SG_HAVE_CUDNN
        sg_cudnn_conv cv;
        const int eligible = want && conv_cudnn_call(c, g, nd, &cv);
        const int pin = pinned ? pinned[i] : 0;
        if (gemm && (pin == CONV_ENGINE_GEMM ||
                     (!fwd_own && !on_own(pin) && pin != SG_CONV_ENGINE_CUDNN))) {
            eng = CONV_ENGINE_GEMM;
        } else if (fwd_own && pin != SG_CONV_ENGINE_CUDNN) {
            /* own's tensor-core kernel, measured faster than the GEMM (the file comment) */
        } else if (thin_own && pin != SG_CONV_ENGINE_CUDNN) {
            c->thin_own_nodes++; /* the thin kernels, asked for (the file comment) */
        } else if (f32_own && pin != SG_CONV_ENGINE_CUDNN) {
            c->f32_own_nodes++; /* measured faster on own (the file comment) */
        } else if (!want) {
            /* own asked for, or cuDNN unusable (said above) */
        } else if (!eligible) {
            if (first_concat < 0) first_concat = i;
            concat++;
            if (pick == SG_LAYER_CUDNN)
                fprintf(stderr,
                        "stepgraph: warning: node %d (%s -> %s): the engine table says cudnn, but "
                        "cuDNN cannot take its operands: own\n",
                        i, sg_ops[nd->op].name, g->t[nd->out[0]].name);
        } else if (on_own(pin) && c->conv_engine != SG_CONV_ENGINE_CUDNN &&
                   pick != SG_LAYER_CUDNN) {
            /* own in the checkpoint's step: own again (an explicit --conv-engine cudnn, or a
             * table given on the resume that says cudnn, wins) */
        } else if (pick == SG_LAYER_OWN) {
            /* the engine table measured own faster for this layer */
        } else if (sg_cudnn_probe(c->dnn, &cv) == SG_OK) {
            eng = SG_CONV_ENGINE_CUDNN;
        } else if (c->conv_engine == SG_CONV_ENGINE_CUDNN) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", sg_last_error());
            free(pinned);
            return sg_set_error("node %d (%s -> %s): --conv-engine cudnn, but %s", i,
                                sg_ops[nd->op].name, g->t[nd->out[0]].name, msg);
        } else {
            fprintf(stderr,
                    "stepgraph: warning: node %d (%s -> %s) runs on the own conv engine: %s\n", i,
                    sg_ops[nd->op].name, g->t[nd->out[0]].name, sg_last_error());
            c->convs_fallback++;
        }
#else
        const int pin = 0;
        (void)thin_own; /* every conv is own without cuDNN; F32_OWN's counted all the same */
        c->f32_own_nodes += f32_own;
        if (gemm && !fwd_own) eng = CONV_ENGINE_GEMM;
#endif
        if (eng == SG_CONV_ENGINE_OWN) eng = own_generation(c, p, i, pin, &tc_refused);
        c->node_eng[i] = (unsigned char)eng;
        if (eng == SG_CONV_ENGINE_CUDNN)
            c->convs_cudnn++;
        else if (eng == CONV_ENGINE_GEMM)
            c->convs_gemm++;
        else
            c->convs_own++, c->convs_wgmma += eng == CONV_ENGINE_WGMMA;
    }
    prepare_own_only(c, p);
    /* the Winograd form: SG_CONV_WINO's where set (also for a library node timed on own),
     * else the table's layer on own */
    c->node_wino = calloc((size_t)(g->nn > 0 ? g->nn : 1), 1);
    if (!c->node_wino) return sg_set_error("out of host memory");
    for (int i = 0; i < g->nn; i++) {
        c->node_wino[i] =
            (unsigned char)(wino_node(p, i) && (c->conv_wino >= 0 ? c->conv_wino
                                                                  : on_own(c->node_eng[i]) &&
                                                                        sg_engine_table_node_wino(
                                                                            p->cfg.engines, g, i)));
        c->wino_nodes += c->node_wino[i] && on_own(c->node_eng[i]);
    }
    if (c->conv_wino > 0 || c->wino_nodes)
        fprintf(stderr,
                "stepgraph: %s: %d conv pass(es) on the own engine as Winograd F(2x2, 3x3) (fp32 "
                "3x3 stride 1; other bits than the direct tiles)\n",
                c->conv_wino > 0 ? "SG_CONV_WINO=1" : "engine table", c->wino_nodes);
    /* the tiles' product form: SG_CONV_F32_TC's where set, else the table's layer on own; counted
     * where the tiles take the node (not Winograd) */
    c->node_f32tc = calloc((size_t)(g->nn > 0 ? g->nn : 1), 1);
    if (!c->node_f32tc) return sg_set_error("out of host memory");
    for (int i = 0; i < g->nn; i++) {
        c->node_f32tc[i] =
            (unsigned char)(c->f32_tc >= 0 ? c->f32_tc
                                           : on_own(c->node_eng[i]) &&
                                                 sg_engine_table_node_f32tc(p->cfg.engines, g, i));
        c->f32tc_nodes +=
            c->node_f32tc[i] && on_own(c->node_eng[i]) && tiles_node(p, i) && !c->node_wino[i];
    }
    if (c->f32_tc > 0 || c->f32tc_nodes)
        fprintf(
            stderr,
            "stepgraph: %s: %d conv pass(es) on the own engine's fp32 tiles with their products "
            "on the tensor cores (three TF32 products each: fp32 accuracy, other bits than the "
            "CUDA cores' FMAs)\n",
            c->f32_tc > 0 ? "SG_CONV_F32_TC=1" : "engine table", c->f32tc_nodes);
    /* the layers' own wgmma schedules (engine table) for their nodes on the wgmma kernels */
    c->node_sched = malloc((size_t)(g->nn > 0 ? g->nn : 1));
    if (!c->node_sched) return sg_set_error("out of host memory");
    const int env_both = c->wg_env_persist && c->wg_env_fill; /* nothing left to a layer */
    for (int i = 0; i < g->nn; i++) {
        c->node_sched[i] = (signed char)(c->node_eng[i] == CONV_ENGINE_WGMMA && !env_both
                                             ? sg_engine_table_node_sched(p->cfg.engines, g, i)
                                             : -1);
        c->wg_layer_nodes += c->node_sched[i] >= 0;
    }
    if (c->wg_layer_nodes)
        fprintf(stderr,
                "stepgraph: %d node(s) on the wgmma kernels run under their layer's own schedule "
                "(engine table)%s\n",
                c->wg_layer_nodes,
                c->wg_env_persist ? ", but for SG_WG_PERSIST"
                : c->wg_env_fill  ? ", but for SG_WG_FILL"
                                  : "");
    if (c->thin_own)
        fprintf(stderr,
                "stepgraph: SG_CONV_THIN=own: %d conv pass(es) with 1 to 4 channels on one side "
                "on the own engine's thin kernels\n",
                c->thin_own_nodes);
    if (c->f32_own_nodes && want) /* without cuDNN every conv is own anyway */
        fprintf(stderr,
                "stepgraph: %d fp32 conv pass(es) at 32 x 32 and above on the own engine "
                "(measured faster than cuDNN's deterministic fp32 engines; SG_CONV_F32=cudnn: "
                "not)\n",
                c->f32_own_nodes);
    if (tc_refused)
        fprintf(stderr,
                "stepgraph: warning: %d own conv node(s) asked for the wgmma kernels (engine "
                "table or checkpoint) run on mma.sync: %s\n",
                tc_refused,
                c->wgmma_ok ? "their convolutions are not bf16"
                            : "this device is not compute capability 9.0 (H100/H200)");
#ifdef SG_HAVE_CUDNN
    free(pinned);
    if (want && be->conv_pins) {
        int met = 0, missed = 0;
        const int descs = sg_cudnn_preferences(c->dnn, &met, &missed);
        fprintf(stderr,
                "stepgraph: conv engines from the checkpoint: %d node(s) kept on own; %d node(s) "
                "asked for their cuDNN engine (%d descriptors: %d had, %d not, chosen afresh as "
                "said above)\n",
                pins_own, pins_cudnn, descs, met, missed);
    }
#endif
    clock_gettime(CLOCK_MONOTONIC, &t1);
    /* the engine choice builds every plan (runtime-compiled engines compile here): its time */
    const double sec = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (!want && c->convs_gemm)
        fprintf(stderr,
                "stepgraph: conv engines (%s, no cuDNN): %d conv nodes on gemm (1x1, cuBLASLt), "
                "%d on own (%d on the wgmma kernels)\n",
                sg_conv_engine_name(c->conv_engine), c->convs_gemm, c->convs_own, c->convs_wgmma);
    else if (want)
        fprintf(stderr,
                "stepgraph: conv engines (%s): %d conv nodes on cudnn, %d on gemm (1x1, "
                "cuBLASLt), %d on own (%d on the wgmma kernels; %d with a concatenated or fused "
                "operand or mixed dtypes, "
                "e.g. node %d -> %s; %d for lack of a deterministic cuDNN engine); %.1f s to "
                "choose and build the plans\n",
                sg_conv_engine_name(c->conv_engine), c->convs_cudnn, c->convs_gemm, c->convs_own,
                c->convs_wgmma, concat, first_concat,
                first_concat >= 0 ? g->t[g->n[first_concat].out[0]].name : "-", c->convs_fallback,
                sec);
    return SG_OK;
}

void cuda_node_engine(sg_backend *be, const sg_plan *p, int node, char *buf, int cap) {
    cuda_ctx *c = be->ctx;
    if (cap <= 0) return;
    buf[0] = 0;
    if (node >= 0 && node < p->g.nn && sg_op_is_attention(p->g.n[node].op)) {
        const int fused = c->attn_fused && attn_node_fusable(&p->g, node);
        snprintf(buf, (size_t)cap, "%s", fused ? "fused" : "gemm");
        return;
    }
    if (node < 0 || node >= p->g.nn || !c->node_eng || !c->node_eng[node]) return;
    if (c->node_eng[node] != SG_CONV_ENGINE_CUDNN) {
        const int e = c->node_eng[node];
        snprintf(buf, (size_t)cap, "%s",
                 e == CONV_ENGINE_GEMM    ? "gemm"
                 : e == CONV_ENGINE_WGMMA ? "wgmma"
                                          : "own");
        return;
    }
#ifdef SG_HAVE_CUDNN
    sg_cudnn_conv cv;
    char name[160] = "-";
    if (conv_cudnn_call(c, &p->g, &p->g.n[node], &cv))
        sg_cudnn_engine_name(c->dnn, &cv, name, sizeof name);
    snprintf(buf, (size_t)cap, "cudnn %s", name);
#endif
}

#else
typedef int sg_backend_cuda_engines_unused; /* ISO C forbids an empty translation unit */
#endif
