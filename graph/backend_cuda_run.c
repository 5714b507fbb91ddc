/* backend_cuda_run.c — the CUDA backend's launchers: one function per op (cuda_run_<id>,
 * planner/op_list.h) that turns a node of the plan into its kernel or library calls on the
 * step's stream, on the engine backend_cuda_engines.c chose for it; the linear groups (runs of
 * the time-embedding projections as one launch a pass); the normalisations' statistics computed
 * by the convolution before them (prepare_norm_stats' pairs); and the node runner that eager
 * steps, the capture and every timing share (cuda_run_node_on). */
#ifdef SG_HAVE_CUDA

#include "graph/backend_cuda_ctx.h"

/* The dropout's key of norm_act node nd
 * (slice: its sg_node_slice) as cuda_run_dropout's */
static sg_drop node_drop(const cuda_ctx *c, const sg_graph *g, const sg_node *nd, uint64_t slice) {
    const sg_gn_args *a = &nd->a.gn;
    const sg_norm_operands o = sg_norm_operands_of(nd);
    sg_drop d = {.p = 0.0f, .purpose = 0, .seed = NULL, .step = NULL, .i0 = 0};
    if (o.temb && a->p > 0.0f) {
        d.p = a->p;
        d.purpose = SG_RNG_DROPOUT_BASE + (uint32_t)a->purpose;
        d.seed = P(c, g, nd->in[o.seed]);
        d.step = P(c, g, nd->in[o.step]);
        d.i0 = slice * (uint64_t)sg_in_numel(g, nd, o.x);
    }
    return d;
}
/* ---- one function per op, cuda_run_<id> (planner/op_list.h), in op-family order, each
 * returning its launcher's status. Sizes from planner/op_dims.h, args by name. */
#define CUDA_RUN(id) static int cuda_run_##id(const cuda_call *k)

CUDA_RUN(gather_batch) {
    const sg_tensor *ds = &k->g->t[k->nd->in[0]];
    const sg_gather_args *a = &k->a->gather;
    return cuda_gather_batch(k->st, kout(k, 0), kin(k, 0), ds->shape[0], (int)ds->shape[1],
                             (int)ds->shape[2], (int)ds->shape[3], a->N, a->img, a->img, kin(k, 1),
                             kin(k, 2), a->flip, a->batch, (int64_t)k->slice * a->N);
}
CUDA_RUN(gather_labels) {
    const sg_labels_args *a = &k->a->labels;
    return cuda_gather_labels(k->st, kout(k, 0), kin(k, 0), k->g->t[k->nd->in[0]].shape[0], a->N,
                              a->classes, a->p, kin(k, 1), kin(k, 2), a->batch,
                              (int64_t)k->slice * a->N);
}
CUDA_RUN(sample_t) {
    return cuda_sample_timesteps(k->st, kout(k, 0), k->a->sample_t.N, k->a->sample_t.T, kin(k, 0),
                                 kin(k, 1), k->slice * (uint64_t)k->a->sample_t.N);
}
CUDA_RUN(noise) {
    const sg_noise_args *a = &k->a->noise;
    const int64_t N = k->g->t[k->nd->out[0]].shape[0];
    const uint64_t i0 = k->slice * (uint64_t)k->n0;
    const int rc =
        a->offset > 0
            ? cuda_noise_offset(k->st, kout(k, 0), k->n0, k->n0 / N, a->C, a->offset, kin(k, 1),
                                kin(k, 2), i0, k->slice * (uint64_t)N)
            : cuda_gaussian(k->st, kout(k, 0), k->n0, kin(k, 1), kin(k, 2), SG_RNG_NOISE, i0);
    if (rc || !(a->perturb > 0)) return rc;
    return cuda_noise_perturb(k->st, kout(k, 0), k->n0, a->perturb, kin(k, 1), kin(k, 2), i0);
}
CUDA_RUN(ddpm_noise) {
    const sg_ddpm_args *a = &k->a->ddpm;
    int N = (int)k->g->t[k->nd->in[0]].shape[0];
    return cuda_ddpm_noise(k->st, kout(k, 0), kin(k, 0), kin(k, 1), kin(k, 2), kin(k, 3), N,
                           (int)(k->n0 / N), a->T, k->dt);
}
CUDA_RUN(timestep_emb) {
    return cuda_timestep_emb(k->st, kout(k, 0), kin(k, 0), (int)k->g->t[k->nd->in[0]].shape[0],
                             k->a->temb.dim, k->dt);
}
/* class_emb: in[0] the labels, in[1] the table; the backward: in[0] de, in[1] the labels */
CUDA_RUN(class_emb) {
    const sg_tensor *tab = &k->g->t[k->nd->in[1]];
    return cuda_class_emb_fwd(k->st, kout(k, 0), kin(k, 0), kin(k, 1),
                              (int)k->g->t[k->nd->in[0]].shape[0], (int)tab->shape[1],
                              (int)tab->shape[0], k->dt);
}
CUDA_RUN(class_emb_bwd) {
    const sg_tensor *dy = &k->g->t[k->nd->in[0]];
    return cuda_class_emb_bwd(k->st, kout(k, 0), kin(k, 0), kin(k, 1), (int)dy->shape[0],
                              (int)dy->shape[1], k->a->cemb.rows, k->dy_dt, kacc(k, 0));
}

/* conv / linear forward and backward-data: the weights (input 1) come in the activations' dtype
 * act_dt, as the launchers take them (bf16: the plan's copy; sg_plan_verify holds plans to it) */
static int weights_in(const cuda_call *k, int act_dt) {
    const sg_tensor *w = &k->g->t[k->nd->in[1]];
    if ((int)w->dtype != act_dt)
        return sg_set_error("the weights %s are %s, the activations %s", w->name,
                            sg_dtype_names[w->dtype], sg_dtype_names[act_dt]);
    return SG_OK;
}

/* ---- Linear groups. A run of consecutive linear nodes on one input (the ResBlocks'
 * time-embedding projections, planner/unet.c: right after the time MLP), and the run of their
 * backward nodes (data passes adding into that input's one gradient, weight passes on that
 * input), each run as one group: one launch of kernels/cuda/linear.cu's group kernels a pass,
 * where each node took cuBLASLt's GEMM and a bias or column-sum pass. The bits are the group
 * kernels' (cuda_kernels.h states every sum), a function of the plan: an eager step, a replay
 * and a resume all have them. A group runs at its last node, the others launch nothing; so
 * prepare_linear_groups takes a run only where what its nodes write lies apart from everything
 * else they read and write (lin_run_apart). */

/* tensor t may be a group's operand: stored, one buffer */
static int lin_operand(const sg_graph *g, int t) {
    return t >= 0 && !sg_tensor_virtual(&g->t[t]) && !g->t[t].nparts && g->t[t].offset >= 0;
}

/* Every tensor nodes first..last write lies apart from every other tensor they read or write
 * (the data passes' one dx, which they all write, aside): nothing a node of the run reads is
 * overwritten inside the run, and no two outputs share bytes. */
static int lin_run_apart(const sg_graph *g, int first, int last) {
    for (int i = first; i <= last; i++) {
        const sg_node *a = &g->n[i];
        for (int o = 0; o < a->nout; o++) {
            const sg_tensor *x = &g->t[a->out[o]];
            for (int j = first; j <= last; j++) {
                const sg_node *b = &g->n[j];
                for (int q = 0; q < b->nin + b->nout; q++) {
                    const int t = q < b->nin ? b->in[q] : b->out[q - b->nin];
                    const sg_tensor *y = &g->t[t];
                    if (t != a->out[o] && x->offset < y->offset + y->bytes &&
                        y->offset < x->offset + x->bytes)
                        return 0;
                }
            }
        }
    }
    return 1;
}

/* The last node of the run of linear-family nodes that begins at node f (f itself: none):
 * forward, linear nodes on f's input; backward, data passes into one dx (every one but the
 * first adding) and weight passes on one x, all of one N, K, dtype and at most
 * SG_LINEAR_GROUP_MAX layers a pass; every operand stored, in the dtypes the group kernels take
 * (the weights in the activations' dtype, as weights_in requires). */
static int lin_run_end(const sg_graph *g, int f) {
    const int fwd = g->n[f].op == OP_LINEAR;
    if (!fwd && g->n[f].op != OP_LINEAR_BWD_DATA && g->n[f].op != OP_LINEAR_BWD_WEIGHT) return f;
    const sg_linear_dims d0 = sg_linear_dims_of(g, &g->n[f]);
    const int dt = (int)g->t[g->n[f].in[0]].dtype;
    int dx = -1, x = -1, nd = 0, nw = 0, i;
    for (i = f; i < g->nn; i++) {
        const sg_node *n = &g->n[i];
        if (fwd ? n->op != OP_LINEAR : n->op != OP_LINEAR_BWD_DATA && n->op != OP_LINEAR_BWD_WEIGHT)
            break;
        const sg_linear_dims d = sg_linear_dims_of(g, n);
        int ok = d.N == d0.N && d.K == d0.K && (int)g->t[n->in[0]].dtype == dt;
        for (int q = 0; q < n->nin + n->nout && ok; q++)
            ok = lin_operand(g, q < n->nin ? n->in[q] : n->out[q - n->nin]);
        /* x, w, dy, y and dx in dt; b, dw and db fp32 */
        if (ok && n->op != OP_LINEAR_BWD_WEIGHT)
            ok = (int)g->t[n->in[1]].dtype == dt && (int)g->t[n->out[0]].dtype == dt;
        if (ok && n->op == OP_LINEAR) ok = g->t[n->in[2]].dtype == DT_F32;
        if (ok && n->op == OP_LINEAR_BWD_WEIGHT)
            ok = g->t[n->out[0]].dtype == DT_F32 && g->t[n->out[1]].dtype == DT_F32;
        if (ok && fwd) ok = n->in[0] == g->n[f].in[0] && nd++ < SG_LINEAR_GROUP_MAX;
        if (ok && n->op == OP_LINEAR_BWD_DATA) {
            ok = (dx < 0 || (n->out[0] == dx && (sg_accum_bits(n, 0) & 1u))) &&
                 nd++ < SG_LINEAR_GROUP_MAX;
            dx = n->out[0];
        }
        if (ok && n->op == OP_LINEAR_BWD_WEIGHT) {
            ok = (x < 0 || n->in[1] == x) && nw++ < SG_LINEAR_GROUP_MAX;
            x = n->in[1];
        }
        if (!ok) break;
    }
    return i - 1 < f ? f : i - 1;
}

int prepare_linear_groups(cuda_ctx *c, const sg_graph *g) {
    c->lin_first = malloc(sizeof(int) * (size_t)(g->nn > 0 ? g->nn : 1));
    if (!c->lin_first) return sg_set_error("out of memory");
    for (int i = 0; i < g->nn; i++) c->lin_first[i] = -1;
    const char *env = getenv("SG_LINEAR_GROUPS");
    if (env && *env && strcmp(env, "1") != 0) {
        if (strcmp(env, "0") != 0)
            return sg_set_error("SG_LINEAR_GROUPS=%s: expected 1 (the default: runs of linear "
                                "nodes as groups) or 0 (each node on cuBLASLt)",
                                env);
        return SG_OK;
    }
    for (int f = 0; f < g->nn;) {
        const int last = lin_run_end(g, f);
        if (last > f && lin_run_apart(g, f, last)) {
            for (int i = f; i <= last; i++) c->lin_first[i] = f;
            c->lin_groups++;
            c->lin_group_nodes += last - f + 1;
        }
        f = last + 1;
    }
    return SG_OK;
}

/* Node k's part of its group: nothing before the group's last node; there, the group's
 * launches (forward: one; backward: the data pass's, then the weight pass's). */
static int lin_group_run(const cuda_call *k) {
    const cuda_ctx *c = k->c;
    const sg_graph *g = k->g;
    const int i = (int)(k->nd - g->n), f = c->lin_first[i];
    if (i + 1 < g->nn && c->lin_first[i + 1] == f) return SG_OK;
    sg_linear_group gf = {0}, gd = {0}, gw = {0};
    const void *x = NULL;
    void *dx = NULL;
    int accum_dx = 0;
    for (int n = f; n <= i; n++) {
        const sg_node *nd = &g->n[n];
        const int M = sg_linear_dims_of(g, nd).M;
        if (nd->op == OP_LINEAR) {
            const int j = gf.n++;
            gf.M[j] = M, x = P(c, g, nd->in[0]);
            gf.w[j] = P(c, g, nd->in[1]), gf.b[j] = (const float *)P(c, g, nd->in[2]);
            gf.y[j] = P(c, g, nd->out[0]);
        } else if (nd->op == OP_LINEAR_BWD_DATA) {
            const int j = gd.n++;
            gd.M[j] = M, gd.dy[j] = P(c, g, nd->in[0]), gd.w[j] = P(c, g, nd->in[1]);
            if (!dx) dx = P(c, g, nd->out[0]), accum_dx = (int)(sg_accum_bits(nd, 0) & 1u);
        } else {
            const int j = gw.n++;
            gw.M[j] = M, gw.dy[j] = P(c, g, nd->in[0]), x = P(c, g, nd->in[1]);
            gw.dw[j] = (float *)P(c, g, nd->out[0]), gw.db[j] = (float *)P(c, g, nd->out[1]);
            gw.accum |= (sg_accum_bits(nd, 0) & 1u) << j;
        }
    }
    const sg_linear_dims d = sg_linear_dims_of(g, &g->n[f]);
    const int dt = (int)g->t[g->n[f].in[0]].dtype;
    if (gf.n) return cuda_linear_group_fwd(k->st, &gf, x, d.N, d.K, dt);
    if (gd.n && cuda_linear_group_bwd_data(k->st, &gd, dx, d.N, d.K, dt, accum_dx, k->ws, k->wsb))
        return SG_ERR;
    return gw.n ? cuda_linear_group_bwd_weight(k->st, &gw, x, d.N, d.K, dt) : SG_OK;
}

/* node k runs in a linear group */
static int in_lin_group(const cuda_call *k) {
    return k->c->lin_first && k->c->lin_first[k->nd - k->g->n] >= 0;
}

CUDA_RUN(linear) {
    if (in_lin_group(k)) return lin_group_run(k);
    sg_linear_dims d = sg_linear_dims_of(k->g, k->nd);
    if (weights_in(k, k->dt)) return SG_ERR;
    return cuda_linear_fwd(k->st, k->blas, kout(k, 0), kin(k, 0), kin(k, 1), kin(k, 2), d.N, d.K,
                           d.M, k->dt, k->ws, k->wsb);
}
CUDA_RUN(linear_bwd_data) {
    if (in_lin_group(k)) return lin_group_run(k);
    sg_linear_dims d = sg_linear_dims_of(k->g, k->nd);
    if (weights_in(k, k->dt)) return SG_ERR;
    return cuda_linear_bwd_data(k->st, k->blas, kout(k, 0), kin(k, 0), kin(k, 1), d.N, d.K, d.M,
                                k->dt, kacc(k, 0), k->ws, k->wsb);
}
CUDA_RUN(linear_bwd_weight) {
    if (in_lin_group(k)) return lin_group_run(k);
    sg_linear_dims d = sg_linear_dims_of(k->g, k->nd);
    return cuda_linear_bwd_weight(k->st, k->blas, kout(k, 0), kout(k, 1), kin(k, 0), kin(k, 1), d.N,
                                  d.K, d.M, k->dy_dt, kacc(k, 0), k->ws, k->wsb);
}

/* A conv node on the cuDNN engine: the call (cudnn_conv.h; a weight gradient's db included),
 * then the forward bias where cuDNN could not fuse it. */
static int conv_run_cudnn(const cuda_call *k, sg_conv_dims d) {
#ifdef SG_HAVE_CUDNN
    sg_cudnn_conv cv;
    if (!conv_cudnn_call(k->c, k->g, k->nd, &cv))
        return sg_set_error("conv: a concatenated operand cannot run on cuDNN (prepare chose it)");
    int bias_done = 0;
    if (sg_cudnn_run(k->c->dnn, &cv, &bias_done)) return SG_ERR;
    const int64_t P = (int64_t)d.N * d.Ho * d.Wo;
    if ((k->nd->op == OP_CONV2D || k->nd->op == OP_CONV2D_ADD) && !bias_done &&
        cuda_conv2d_bias_add(k->st, kout(k, 0), kin(k, 2), P, d.Co, k->dt))
        return SG_ERR;
    if (k->nd->op == OP_CONV2D_ADD) /* the residual: the unfused add (res + y in place) */
        return cuda_add_fwd(k->st, kout(k, 0), kin(k, 3), kout(k, 0), P * d.Co, k->dt);
    return SG_OK;
#else
    (void)k, (void)d;
    return sg_set_error("conv: this build has no cuDNN engine");
#endif
}

/* The node is on the wgmma kernels (own_generation) and this call can run there: x the
 * (concatenated) input, y the other activation (y, or dy for the backward passes), w the bf16
 * weights (NULL for the weight gradient) */
int conv_on_wgmma(const cuda_call *k, sg_conv_dims d, sg_cat x, const void *y, const void *w,
                  int dt) {
    return k->engine == CONV_ENGINE_WGMMA &&
           cuda_conv2d_wgmma_refusal(x, y, w, d.N, d.H, d.W, d.Co, d.K, d.S, dt) == NULL;
}

/* A conv's input t as the launchers take it: a stored tensor or concatenation as it is; a
 * virtual normalised tensor (planner/fuse.c) as its norm_act node's input x, with the
 * normalisation to apply in *f (f->norm = 0 otherwise); f->halo: SG_TC_HALO's choice. */
sg_cat conv_input(const cuda_ctx *c, const sg_graph *g, int t, sg_conv_fuse *f) {
    memset(f, 0, sizeof *f);
    f->halo = c->tc_halo;
    const int vn = g->t[t].vnorm;
    if (vn < 0) return CAT(c, g, t);
    const sg_node *nd = &g->n[vn];
    const sg_norm_operands o = sg_norm_operands_of(nd);
    f->norm = 1;
    f->mean = P(c, g, nd->out[1]), f->rstd = P(c, g, nd->out[2]);
    f->gamma = P(c, g, nd->in[o.gamma]), f->beta = P(c, g, nd->in[o.beta]);
    f->v = o.temb ? P(c, g, nd->in[o.v]) : NULL;
    f->G = nd->a.gn.groups, f->act = nd->a.gn.act;
    f->drop = node_drop(c, g, nd, sg_node_slice(g, nd, c->rank));
    return CAT(c, g, nd->in[o.x]);
}

/* A virtual normalised operand (planner/fuse.c) is computed inside the bf16 tensor-core
 * convolutions only (kernels/cuda/conv_tc.cu, conv_wgmma.cu): a plan that gives one to any other
 * reader is refused here, before the step, naming the node (the arena is allocated: the path
 * depends on the operands' alignment, which the plan's offsets fix). */
int check_fused_operands(const cuda_ctx *c, const sg_graph *g) {
    for (int i = 0; i < g->nn; i++) {
        const sg_node *nd = &g->n[i];
        if (nd->op == OP_CONV2D_SC) { /* the fold: the tensor cores take both GEMM parts */
            sg_conv_dims d = sg_conv_dims_of(g, nd);
            sg_conv_fuse f;
            const sg_cat h = conv_input(c, g, nd->in[0], &f);
            const void *y = P(c, g, nd->out[0]);
            if (g->t[nd->out[0]].dtype != DT_BF16 ||
                cuda_conv2d_path(h, y, d.N, d.H, d.W, d.Co, d.K, 1, DT_BF16) !=
                    SG_CONV_PATH_TENSOR_CORE ||
                cuda_conv2d_path(CAT(c, g, nd->in[3]), y, d.N, d.H, d.W, d.Co, 1, 1, DT_BF16) !=
                    SG_CONV_PATH_TENSOR_CORE)
                return sg_set_error("node %d (conv2d_sc -> %s): the 1x1 shortcut folded into "
                                    "conv2 runs on the bf16 tensor-core convolutions only (bf16, "
                                    "every channel count a multiple of 8); plan with --fuse 0",
                                    i, g->t[nd->out[0]].name);
        }
        for (int k = 0; k < nd->nin; k++) {
            const sg_tensor *t = &g->t[nd->in[k]];
            if (t->vnorm < 0) continue;
            const int conv_x =
                ((nd->op == OP_CONV2D || nd->op == OP_CONV2D_ADD || nd->op == OP_CONV2D_SC) &&
                 k == 0) ||
                (nd->op == OP_CONV2D_BWD_WEIGHT && k == 1);
            const char *why = NULL;
            if (!conv_x) {
                why = "only a convolution's input can be";
            } else {
                sg_conv_dims d = sg_conv_dims_of(g, nd);
                sg_conv_fuse f;
                const sg_cat x = conv_input(c, g, nd->in[k], &f);
                const int other = nd->op == OP_CONV2D_BWD_WEIGHT ? nd->in[0] : nd->out[0];
                if (t->dtype != DT_BF16 ||
                    cuda_conv2d_path(x, P(c, g, other), d.N, d.H, d.W, d.Co, d.K, d.S, DT_BF16) !=
                        SG_CONV_PATH_TENSOR_CORE)
                    why = "the CUDA kernels compute one only in bf16 tensor-core convolutions "
                          "(bf16, every channel count a multiple of 8)";
            }
            if (why)
                return sg_set_error("node %d (%s -> %s): its input %s is a fused normalisation "
                                    "(--fuse 1: never stored), and %s; plan with --fuse 0",
                                    i, sg_ops[nd->op].name, g->t[nd->out[0]].name, t->name, why);
        }
    }
    return SG_OK;
}

static int node_writes(const sg_node *nd, int t) {
    for (int k = 0; k < nd->nout; k++)
        if (nd->out[k] == t) return 1;
    return 0;
}
/* The statistics' partials of each forward norm_act node (kernels/cuda/norm.cu) are computed by
 * the conv-like node that writes its input x (or the first part of a concatenated x) when that
 * node runs right before it (only virtual concatenations between) and computes them in its
 * tensor-core epilogue (a producer that would run a pass after itself is unpaired once the engines
 * are chosen: unpair_stats_after, below). The partials lie in the
 * kernel workspace after the producer's own scratch (the plan sizes the workspace per node;
 * a pair that does not fit in it is not made), where the normalisation, the next node to
 * run, finds them. The partials are one fixed function of x whoever computes them, so this
 * changes no bits (SG_FUSE_STATS=0 turns it off, fwd or bwd keeps one direction; cuda_step_host
 * compares). The pairs depend on the plan alone: the same launches every step, eager and
 * captured. */
int prepare_norm_stats(cuda_ctx *c, const sg_graph *g, const sg_engine_table *table) {
    const int nn = g->nn > 0 ? g->nn : 1;
    c->stats_to = malloc(sizeof(int) * (size_t)nn);
    c->norm_done = calloc((size_t)nn, sizeof(int));
    c->norm_off = calloc((size_t)nn, sizeof(int64_t));
    if (!c->stats_to || !c->norm_done || !c->norm_off) return sg_set_error("out of host memory");
    for (int i = 0; i < nn; i++) c->stats_to[i] = -1;
    c->stats_fused = c->stats_fused_fwd = 0;
    /* SG_FUSE_STATS: 1 (the default) both directions, fwd or bwd one, 0 none: the same bits
     * every way, so a GPU can time each (docs/gpu-status.md) */
    const char *env = getenv("SG_FUSE_STATS");
    int fwd = (SG_KNOB_FUSE_STATS_DEFAULT & SG_KNOB_STATS_FWD) != 0,
        bwd = (SG_KNOB_FUSE_STATS_DEFAULT & SG_KNOB_STATS_BWD) != 0;
    if (env && *env) {
        fwd = !strcmp(env, "1") || !strcmp(env, "fwd");
        bwd = !strcmp(env, "1") || !strcmp(env, "bwd");
        if (!fwd && !bwd && strcmp(env, "0"))
            return sg_set_error("SG_FUSE_STATS=%s: expected 1 (the default), fwd, bwd or 0", env);
    } else if (table && table->knobs.fuse_stats >= 0) { /* the table's timed choice */
        fwd = (table->knobs.fuse_stats & SG_KNOB_STATS_FWD) != 0;
        bwd = (table->knobs.fuse_stats & SG_KNOB_STATS_BWD) != 0;
    }
    /* SG_NORM_ONEPASS: a forward normalisation that stores y, or a backward one, whose shape the
     * one-pass kernel takes computes its own partials, in that pass: not the convolution before
     * (forward) or after (the data gradient that writes dy) */
    c->norm_onepass_nodes = c->norm_bwd_onepass_nodes = 0;
    for (int j = 0; j < g->nn && c->norm_onepass; j++) {
        const sg_node *nj = &g->n[j];
        const int fwd_op = nj->op == OP_NORM_ACT || nj->op == OP_NORM_ACT_TEMB;
        const int bwd_op = nj->op == OP_NORM_ACT_BWD || nj->op == OP_NORM_ACT_TEMB_BWD;
        if (!fwd_op && !bwd_op) continue;
        const sg_gn_dims d = sg_gn_dims_of(g, nj);
        const int x = nj->in[sg_norm_operands_of(nj).x], dt = g->t[x].dtype;
        if (fwd_op && (c->norm_onepass & SG_NORM_ONEPASS_FWD) && g->t[nj->out[0]].vnorm < 0 &&
            cuda_norm_act_onepass_groups((int)d.N, (int)d.HW, (int)d.C, (int)d.G, dt) > 0)
            c->norm_done[j] = -1, c->norm_onepass_nodes++; /* -1: not paired (below) */
        if (bwd_op && (c->norm_onepass & SG_NORM_ONEPASS_BWD) &&
            cuda_norm_act_bwd_onepass_groups((int)d.N, (int)d.HW, (int)d.C, (int)d.G, dt) > 0)
            c->norm_done[j] = -1, c->norm_bwd_onepass_nodes++;
    }
    for (int j = 0; j < g->nn && fwd; j++) {
        const sg_node *nj = &g->n[j];
        if (nj->op != OP_NORM_ACT && nj->op != OP_NORM_ACT_TEMB) continue;
        if (c->norm_done[j] < 0) continue;
        const int x = nj->in[sg_norm_operands_of(nj).x];
        const int first = g->t[x].nparts ? g->t[x].parts[0] : x;
        int i = j - 1;
        while (i >= 0 && g->n[i].op == OP_CONCAT) i--;
        if (i < 0) continue;
        const sg_op op = g->n[i].op;
        if ((op != OP_CONV2D && op != OP_CONV2D_ADD && op != OP_CONV2D_SC && op != OP_UPCONV2D) ||
            g->n[i].out[0] != first)
            continue;
        const sg_gn_dims d = sg_gn_dims_of(g, nj);
        const int64_t off = sg_ws_align(sg_node_workspace_bytes(g, &g->n[i]));
        if (off + sg_ws_norm_act_fwd(d.N, d.HW, d.C, d.G) > c->ws_bytes) continue;
        c->stats_to[i] = j;
        c->norm_off[j] = off;
        c->norm_done[j] = (int)g->t[first].shape[3];
        c->stats_fused++, c->stats_fused_fwd++;
    }
    /* the backward: each norm_act's backward with the data gradient that last wrote its dy (the
     * gradient of its output y, which only convolutions read), its backward partials after the
     * scratch of every node from that one to it (e.g. the time-embedding projection's
     * backward: small), when that fits in the workspace */
    for (int j = 0; j < g->nn && bwd; j++) {
        const sg_node *nj = &g->n[j];
        if (nj->op != OP_NORM_ACT_BWD && nj->op != OP_NORM_ACT_TEMB_BWD) continue;
        if (c->norm_done[j] < 0) continue;
        const sg_norm_operands o = sg_norm_operands_of(nj);
        const int dy = nj->in[o.dy];
        int i = j - 1;
        while (i >= 0 && !node_writes(&g->n[i], dy)) i--;
        if (i < 0 || g->n[i].op != OP_CONV2D_BWD_DATA || g->t[dy].nparts) continue;
        int64_t off = 0;
        for (int k = i; k < j; k++) {
            const int64_t b = sg_ws_align(sg_node_workspace_bytes(g, &g->n[k]));
            off = b > off ? b : off;
        }
        const sg_gn_dims d = sg_gn_dims_of(g, nj);
        if (off + sg_ws_norm_act_bwd(d.N, d.HW, d.C, d.G, o.temb) > c->ws_bytes) continue;
        c->stats_to[i] = j;
        c->norm_off[j] = off;
        c->norm_done[j] = 1;
        c->stats_fused++;
    }
    for (int j = 0; j < g->nn; j++)
        if (c->norm_done[j] < 0) c->norm_done[j] = 0;
    return SG_OK;
}
/* A forward pair saves the normalisation a read of x only where the conv computes the partials
 * in its epilogue: a conv2d or conv2d_add on the own engine's bf16 tensor-core kernels (mma.sync,
 * wgmma), and every shortcut fold (conv2d_sc: those kernels alone). Any other producer (a conv
 * on cuDNN, on the GEMM engine's cuBLASLt, on the CUDA-core tiles; an upsample conv) runs them
 * as a pass after itself (cuda_norm_partials), and the normalisation then merges them in a
 * launch of its own (norm_stats_final_kernel): two launches where the normalisation alone takes
 * one (norm_stats_kernel: the partials, then each sample's last block merges), for the same
 * bytes read and the same bits. So, once the engines are chosen (prepare_conv_engines), those
 * forward pairs are undone: unet_cifar's default step (bf16, its 3x3 convs on cuDNN) loses a
 * launch for each of its 29 normalisations after a conv. (A tensor-core forward whose tiles do
 * not cover whole segments still runs the pass after: its launcher decides, tc_fwd_fuse and
 * conv_wg_fwd_launch.) The backward pairs stay: a data gradient's partials pass (the terms in
 * the same launch) replaces the normalisation's own, launch for launch. */
static int stats_in_epilogue(const cuda_ctx *c, const sg_graph *g, int i) {
    const sg_node *nd = &g->n[i];
    if (nd->op == OP_CONV2D_SC) return 1;
    if ((nd->op != OP_CONV2D && nd->op != OP_CONV2D_ADD) || !on_own(c->node_eng[i])) return 0;
    const sg_conv_dims d = sg_conv_dims_of(g, nd);
    sg_conv_fuse f;
    const sg_cat x = conv_input(c, g, nd->in[0], &f);
    return cuda_conv2d_path(x, P(c, g, nd->out[0]), d.N, d.H, d.W, d.Co, d.K, d.S,
                            (int)g->t[nd->out[0]].dtype) == SG_CONV_PATH_TENSOR_CORE;
}
void unpair_stats_after(cuda_ctx *c, const sg_graph *g) {
    for (int i = 0; i < g->nn; i++) {
        const int j = c->stats_to[i];
        if (j < 0 || (g->n[j].op != OP_NORM_ACT && g->n[j].op != OP_NORM_ACT_TEMB) ||
            stats_in_epilogue(c, g, i))
            continue;
        c->stats_to[i] = -1;
        c->norm_done[j] = 0;
        c->norm_off[j] = 0;
        c->stats_fused--;
        c->stats_fused_fwd--;
    }
}

/* Where node k writes the partials of the normalisation after it (NULL: nowhere), and their
 * channels per segment (that normalisation's C) */
static float *node_stats(const cuda_call *k, int *ld) {
    const int i = (int)(k->nd - k->g->n), j = k->c->stats_to[i];
    if (j < 0) return NULL;
    *ld = sg_gn_dims_of(k->g, &k->g->n[j]).C;
    return (float *)((char *)k->c->ws + k->c->norm_off[j]);
}
/* The backward partials data gradient k computes for the norm_act backward after it (its
 * operands: the norm's x, v, statistics, gamma, beta, dropout), or part = NULL */
static sg_norm_bwd_fuse node_bwd_stats(const cuda_call *k) {
    sg_norm_bwd_fuse nb;
    memset(&nb, 0, sizeof nb);
    const int i = (int)(k->nd - k->g->n), j = k->c->stats_to[i];
    if (j < 0) return nb;
    const sg_node *nj = &k->g->n[j];
    const sg_norm_operands o = sg_norm_operands_of(nj);
    nb.x = CAT(k->c, k->g, nj->in[o.x]);
    nb.mean = P(k->c, k->g, nj->in[o.mean]), nb.rstd = P(k->c, k->g, nj->in[o.rstd]);
    nb.gamma = P(k->c, k->g, nj->in[o.gamma]), nb.beta = P(k->c, k->g, nj->in[o.beta]);
    nb.v = o.temb ? P(k->c, k->g, nj->in[o.v]) : NULL;
    nb.drop = node_drop(k->c, k->g, nj, sg_node_slice(k->g, nj, k->c->rank));
    nb.G = nj->a.gn.groups, nb.act = nj->a.gn.act;
    nb.part = (float *)((char *)k->c->ws + k->c->norm_off[j]);
    nb.epilogue = k->c->dgrad_epilogue;
    return nb;
}
/* ... by the partials pass after a data gradient off the own launchers (cuDNN, wgmma) */
static int node_bwd_stats_after(const cuda_call *k, sg_conv_dims d) {
    const sg_norm_bwd_fuse nb = node_bwd_stats(k);
    return nb.part ? cuda_norm_bwd_partials(k->st, &nb, kout(k, 0), d.N, d.H * d.W, d.Ci, k->dy_dt)
                   : SG_OK;
}

/* The partials pass after a conv that ran off the fused launchers (cuDNN, upconv2d) */
static int node_stats_after(const cuda_call *k, int N, int HW, int Co) {
    int ld = 0;
    float *stats = node_stats(k, &ld);
    return stats ? cuda_norm_partials(k->st, stats, ld, sg_cat1(kout(k, 0), Co), N, HW, 0, k->dt)
                 : SG_OK;
}

/* the forward conv, with the residual res added in its store where not NULL (conv2d_add) */
static int conv_fwd_run(const cuda_call *k, const void *res) {
    sg_conv_dims d = sg_conv_dims_of(k->g, k->nd);
    if (weights_in(k, k->dt)) return SG_ERR;
    if (k->engine == SG_CONV_ENGINE_CUDNN)
        return conv_run_cudnn(k, d) || node_stats_after(k, d.N, d.Ho * d.Wo, d.Co);
    sg_conv_fuse f;
    const sg_cat x = conv_input(k->c, k->g, k->nd->in[0], &f);
    f.res = res;
    f.stats = node_stats(k, &f.stats_ld);
    if (k->engine == CONV_ENGINE_GEMM)
        return cuda_conv2d_gemm_fwd(k->st, k->blas, kout(k, 0), x, kin(k, 1), kin(k, 2), &f, d.N,
                                    d.H, d.W, d.Ci, d.Co, k->dt, k->ws, k->wsb);
    if (conv_on_wgmma(k, d, x, kout(k, 0), kin(k, 1), k->dt))
        return cuda_conv2d_wgmma_fwd(k->st, kout(k, 0), x, kin(k, 1), kin(k, 2), &f, d.N, d.H, d.W,
                                     d.Ci, d.Co, d.K, d.S, d.pad, k->dt, k->ws, k->wsb);
    return cuda_conv2d_fwd(k->st, k->blas, kout(k, 0), x, kin(k, 1), kin(k, 2), &f, d.N, d.H, d.W,
                           d.Ci, d.Co, d.K, d.S, d.pad, k->dt, k->ws, k->wsb);
}
CUDA_RUN(conv2d) {
    return conv_fwd_run(k, NULL);
}
/* the conv with the residual add in its store (sg_conv_fuse.res; after it off the tensor
 * cores), and its input normalised in its tile loads where that is virtual */
CUDA_RUN(conv2d_add) {
    return conv_fwd_run(k, kin(k, 3));
}
/* conv2 with its 1x1 shortcut folded into one tensor-core GEMM (conv2d_sc): always the own
 * kernels, whatever the conv engine (cuDNN takes no fold; it is no engine-chosen conv node,
 * sg_op_is_conv), on mma.sync or, where prepare_own_only put it there and both operands suit
 * them, on the wgmma kernels (the same k order); h normalised in its tile loads where it is
 * virtual, x (the block's input, often the skip concatenation) loaded as it is */
CUDA_RUN(conv2d_sc) {
    sg_conv_dims d = sg_conv_dims_of(k->g, k->nd);
    if (weights_in(k, k->dt)) return SG_ERR;
    const sg_tensor *ws = &k->g->t[k->nd->in[4]];
    if ((int)ws->dtype != k->dt)
        return sg_set_error("the shortcut weights %s are %s, the activations %s", ws->name,
                            sg_dtype_names[ws->dtype], sg_dtype_names[k->dt]);
    sg_conv_fuse f;
    const sg_cat h = conv_input(k->c, k->g, k->nd->in[0], &f);
    f.stats = node_stats(k, &f.stats_ld);
    const sg_cat x = CAT(k->c, k->g, k->nd->in[3]);
    if (conv_on_wgmma(k, d, h, kout(k, 0), kin(k, 1), k->dt) &&
        cuda_conv2d_wgmma_refusal(x, kout(k, 0), kin(k, 4), d.N, d.H, d.W, d.Co, 1, 1, k->dt) ==
            NULL)
        return cuda_conv2d_wgmma_sc_fwd(k->st, kout(k, 0), h, kin(k, 1), kin(k, 2), &f, x,
                                        kin(k, 4), kin(k, 5), d.N, d.H, d.W, d.Ci, d.Co, d.K, d.pad,
                                        k->dt);
    return cuda_conv2d_sc_fwd(k->st, kout(k, 0), h, kin(k, 1), kin(k, 2), &f, x, kin(k, 4),
                              kin(k, 5), d.N, d.H, d.W, d.Ci, d.Co, d.K, d.pad, k->dt);
}
CUDA_RUN(conv2d_bwd_data) {
    sg_conv_dims d = sg_conv_dims_of(k->g, k->nd);
    if (weights_in(k, k->dy_dt)) return SG_ERR;
    if (k->engine == SG_CONV_ENGINE_CUDNN)
        return conv_run_cudnn(k, d) || node_bwd_stats_after(k, d);
    if (k->engine == CONV_ENGINE_GEMM) {
        const sg_norm_bwd_fuse nb = node_bwd_stats(k);
        return cuda_conv2d_gemm_bwd_data(k->st, k->blas, kout_cat(k, 0), kin(k, 0), kin(k, 1), d.N,
                                         d.H, d.W, d.Ci, d.Co, k->dy_dt, kacc(k, 0), k->ws, k->wsb,
                                         nb.part ? &nb : NULL);
    }
    if (conv_on_wgmma(k, d, kout_cat(k, 0), kin(k, 0), kin(k, 1), k->dy_dt))
        return cuda_conv2d_wgmma_bwd_data(k->st, kout_cat(k, 0), kin(k, 0), kin(k, 1), d.N, d.H,
                                          d.W, d.Ci, d.Co, d.K, d.S, d.pad, k->dy_dt, kacc(k, 0),
                                          k->ws, k->wsb) ||
               node_bwd_stats_after(k, d);
    const sg_norm_bwd_fuse nb = node_bwd_stats(k);
    return cuda_conv2d_bwd_data(k->st, k->blas, kout_cat(k, 0), kin(k, 0), kin(k, 1), d.N, d.H, d.W,
                                d.Ci, d.Co, d.K, d.S, d.pad, k->dy_dt, kacc(k, 0), k->ws, k->wsb,
                                nb.part ? &nb : NULL);
}
CUDA_RUN(conv2d_bwd_weight) {
    sg_conv_dims d = sg_conv_dims_of(k->g, k->nd);
    if (k->engine == SG_CONV_ENGINE_CUDNN) return conv_run_cudnn(k, d);
    sg_conv_fuse f;
    const sg_cat x = conv_input(k->c, k->g, k->nd->in[1], &f);
    if (k->engine == CONV_ENGINE_GEMM)
        return cuda_conv2d_gemm_bwd_weight(k->st, k->blas, kout(k, 0), kout(k, 1), kin(k, 0), x,
                                           d.N, d.H, d.W, d.Ci, d.Co, k->dy_dt, kacc(k, 0), k->ws,
                                           k->wsb);
    if (conv_on_wgmma(k, d, x, kin(k, 0), NULL, k->dy_dt))
        return cuda_conv2d_wgmma_bwd_weight(k->st, kout(k, 0), kout(k, 1), kin(k, 0), x, &f, d.N,
                                            d.H, d.W, d.Ci, d.Co, d.K, d.S, d.pad, k->dy_dt,
                                            kacc(k, 0), k->ws, k->wsb);
    return cuda_conv2d_bwd_weight(k->st, k->blas, kout(k, 0), kout(k, 1), kin(k, 0), x, &f, d.N,
                                  d.H, d.W, d.Ci, d.Co, d.K, d.S, d.pad, k->dy_dt, kacc(k, 0),
                                  k->ws, k->wsb);
}

/* upconv2d: w (input 1) is the fp32 master weights, folded by the launchers (kernels/cuda/conv.cu);
 * each pass on the wgmma kernels where prepare_own_only put the node and they take its operands
 * (cuda_upconv2d_wgmma_refusal: fixed by the plan, so the same kernels every step) */
int upconv_on_wgmma(const cuda_call *k, const void *lo, const void *hi, const void *wf) {
    const sg_conv_dims d = sg_upconv_dims_of(k->g, k->nd);
    return k->engine == CONV_ENGINE_WGMMA &&
           cuda_upconv2d_wgmma_refusal(lo, hi, wf, d.N, d.H, d.W, d.Ci, d.Co, k->dy_dt) == NULL;
}
CUDA_RUN(upconv2d) {
    sg_conv_dims d = sg_upconv_dims_of(k->g, k->nd);
    return (upconv_on_wgmma(k, kin(k, 0), kout(k, 0), k->ws)
                ? cuda_upconv2d_wgmma_fwd(k->st, kout(k, 0), kin(k, 0), kin(k, 1), kin(k, 2), d.N,
                                          d.H, d.W, d.Ci, d.Co, k->dt, k->ws, k->wsb)
                : cuda_upconv2d_fwd(k->st, kout(k, 0), kin(k, 0), kin(k, 1), kin(k, 2), d.N, d.H,
                                    d.W, d.Ci, d.Co, k->dt, k->ws, k->wsb)) ||
           node_stats_after(k, d.N, 4 * d.H * d.W, d.Co);
}
CUDA_RUN(upconv2d_bwd_data) {
    sg_conv_dims d = sg_upconv_dims_of(k->g, k->nd);
    if (upconv_on_wgmma(k, kout(k, 0), kin(k, 0), k->ws))
        return cuda_upconv2d_wgmma_bwd_data(k->st, kout(k, 0), kin(k, 0), kin(k, 1), d.N, d.H, d.W,
                                            d.Ci, d.Co, k->dy_dt, kacc(k, 0), k->ws, k->wsb);
    return cuda_upconv2d_bwd_data(k->st, kout(k, 0), kin(k, 0), kin(k, 1), d.N, d.H, d.W, d.Ci,
                                  d.Co, k->dy_dt, kacc(k, 0), k->ws, k->wsb);
}
CUDA_RUN(upconv2d_bwd_weight) {
    sg_conv_dims d = sg_upconv_dims_of(k->g, k->nd);
    if (upconv_on_wgmma(k, kin(k, 1), kin(k, 0), NULL))
        return cuda_upconv2d_wgmma_bwd_weight(k->st, kout(k, 0), kout(k, 1), kin(k, 0), kin(k, 1),
                                              d.N, d.H, d.W, d.Ci, d.Co, k->dy_dt, kacc(k, 0),
                                              k->ws, k->wsb);
    return cuda_upconv2d_bwd_weight(k->st, kout(k, 0), kout(k, 1), kin(k, 0), kin(k, 1), d.N, d.H,
                                    d.W, d.Ci, d.Co, k->dy_dt, kacc(k, 0), k->ws, k->wsb);
}

CUDA_RUN(group_norm) {
    sg_gn_dims d = sg_gn_dims_of(k->g, k->nd);
    return cuda_group_norm_fwd(k->st, kout(k, 0), kout(k, 1), kout(k, 2), kin_cat(k, 0), kin(k, 1),
                               kin(k, 2), d.N, d.HW, d.C, d.G, k->a->gn.eps, k->dt);
}
CUDA_RUN(group_norm_bwd) {
    sg_gn_dims d = sg_gn_dims_of(k->g, k->nd);
    return cuda_group_norm_bwd(k->st, kout_cat(k, 0), kout(k, 1), kout(k, 2), kin(k, 0),
                               kin_cat(k, 1), kin(k, 2), kin(k, 3), kin(k, 4), d.N, d.HW, d.C, d.G,
                               k->dy_dt, kacc(k, 0), kacc(k, 1), k->ws, k->wsb);
}

/* the norm_act family: operands by sg_norm_operands_of (node_drop, above: the dropout) */
static int run_norm_act(const cuda_call *k) {
    sg_gn_dims d = sg_gn_dims_of(k->g, k->nd);
    sg_norm_operands o = sg_norm_operands_of(k->nd);
    const sg_gn_args *a = &k->a->gn;
    const void *v = o.temb ? kin(k, o.v) : NULL;
    const sg_drop drop = node_drop(k->c, k->g, k->nd, k->slice);
    /* the partials: where the conv before left them (prepare_norm_stats) */
    const int j = (int)(k->nd - k->g->n);
    void *ws = (char *)k->ws + k->c->norm_off[j];
    const int64_t wsb = k->wsb - k->c->norm_off[j];
    /* y virtual (planner/fuse.c): the convolutions that read it compute it; here the statistics
     * alone */
    if (!o.bwd && !o.apply && k->g->t[k->nd->out[0]].vnorm >= 0)
        return cuda_norm_act_stats(k->st, kout(k, 1), kout(k, 2), kin_cat(k, o.x), v, d.N, d.HW,
                                   d.C, d.G, a->eps, k->dt, ws, wsb, k->c->norm_done[j]);
    if (o.bwd)
        return cuda_norm_act_bwd(
            k->st, kout_cat(k, 0), o.temb ? kout(k, 1) : NULL, kout(k, o.temb + 1),
            kout(k, o.temb + 2), kin(k, o.dy), kin_cat(k, o.x), v, kin(k, o.mean), kin(k, o.rstd),
            kin(k, o.gamma), kin(k, o.beta), d.N, d.HW, d.C, d.G, a->act, drop, k->dy_dt,
            kacc(k, 0), o.temb ? kacc(k, 1) : 0, kacc(k, o.temb + 1), ws, wsb, k->c->norm_done[j]);
    if (o.apply)
        return cuda_norm_act_apply(k->st, kout(k, 0), kin_cat(k, o.x), v, kin(k, o.mean),
                                   kin(k, o.rstd), kin(k, o.gamma), kin(k, o.beta), d.N, d.HW, d.C,
                                   d.G, a->act, drop, k->dt);
    return cuda_norm_act_fwd(k->st, kout(k, 0), kout(k, 1), kout(k, 2), kin_cat(k, o.x), v,
                             kin(k, o.gamma), kin(k, o.beta), d.N, d.HW, d.C, d.G, a->eps, a->act,
                             drop, k->dt, ws, wsb, k->c->norm_done[j]);
}
CUDA_RUN(norm_act) {
    return run_norm_act(k);
}
CUDA_RUN(norm_act_temb) {
    return run_norm_act(k);
}
CUDA_RUN(norm_act_apply) {
    return run_norm_act(k);
}
CUDA_RUN(norm_act_temb_apply) {
    return run_norm_act(k);
}
CUDA_RUN(norm_act_bwd) {
    return run_norm_act(k);
}
CUDA_RUN(norm_act_temb_bwd) {
    return run_norm_act(k);
}

/* the pointwise ops (common/sg_pointwise.h): cuda_<fn>(outputs, inputs, n, dt[, accumulate
 * flags]), one per row */
#define CUDA_PW_OUT(i) kout(k, i)
#define CUDA_PW_IN(i) kin(k, i)
#define CUDA_PW_ACC(i) kacc(k, i)
#define CUDA_RUN_POINTWISE(op, fn, nin, nout, acc)                                                 \
    CUDA_RUN(op) {                                                                                 \
        return cuda_##fn(k->st, SG_PW_EACH_##nout(CUDA_PW_OUT), SG_PW_EACH_##nin(CUDA_PW_IN),      \
                         k->n0, k->dt SG_PW_IF_ACC_##acc(CUDA_PW_ACC, nout));                      \
    }
SG_POINTWISE_LIST(CUDA_RUN_POINTWISE)

CUDA_RUN(add_nc) {
    sg_nhwc_dims d = sg_nhwc_dims_of(k->g, k->nd);
    return cuda_add_nc_fwd(k->st, kout(k, 0), kin(k, 0), kin(k, 1), d.N, d.HW, d.C, k->dt);
}
CUDA_RUN(add_nc_bwd) {
    sg_nhwc_dims d = sg_nhwc_dims_of(k->g, k->nd);
    return cuda_add_nc_bwd(k->st, kout(k, 0), kin(k, 0), d.N, d.HW, d.C, k->dt, kacc(k, 0), k->ws,
                           k->wsb);
}
CUDA_RUN(concat) {
    (void)k; /* virtual: consumers read both parts */
    return SG_OK;
}

CUDA_RUN(upsample2x) {
    sg_nhwc_dims d = sg_nhwc_dims_of(k->g, k->nd);
    return cuda_upsample2x_fwd(k->st, kout(k, 0), kin(k, 0), d.N, d.H, d.W, d.C, k->dt);
}
CUDA_RUN(upsample2x_apply) { /* the recomputation: upsample2x's values */
    return cuda_run_upsample2x(k);
}
CUDA_RUN(upsample2x_bwd) {
    sg_nhwc_dims d = sg_nhwc_dims_of(k->g, k->nd);
    return cuda_upsample2x_bwd(k->st, kout(k, 0), kin(k, 0), d.N, d.H, d.W, d.C, k->dt, kacc(k, 0));
}
CUDA_RUN(avgpool2x) {
    sg_nhwc_dims d = sg_nhwc_dims_of(k->g, k->nd);
    return cuda_avgpool2x_fwd(k->st, kout(k, 0), kin(k, 0), d.N, d.H, d.W, d.C, k->dt);
}
CUDA_RUN(avgpool2x_bwd) {
    sg_nhwc_dims d = sg_nhwc_dims_of(k->g, k->nd);
    return cuda_avgpool2x_bwd(k->st, kout(k, 0), kin(k, 0), d.N, d.H, d.W, d.C, k->dt, kacc(k, 0));
}

CUDA_RUN(attention) {
    sg_attn_dims d = sg_attn_dims_of(k->g, k->nd);
    return (k->c->attn_fused ? cuda_attention_fused_fwd : cuda_attention_fwd)(
        k->st, k->blas, kout(k, 0), kout(k, 1), kin(k, 0), d.N, d.L, d.C, d.heads, k->dt, k->ws,
        k->wsb);
}
CUDA_RUN(attention_p) { /* the recomputation: the forward's P by its engine, without y */
    sg_attn_dims d = sg_attn_dims_of(k->g, k->nd);
    const int dt = (int)k->g->t[k->nd->in[0]].dtype; /* qkv's, as the forward's y (P is fp32) */
    return (k->c->attn_fused ? cuda_attention_fused_fwd : cuda_attention_fwd)(
        k->st, k->blas, NULL, kout(k, 0), kin(k, 0), d.N, d.L, d.C, d.heads, dt, k->ws, k->wsb);
}
CUDA_RUN(attention_bwd) {
    sg_attn_dims d = sg_attn_dims_of(k->g, k->nd);
    return (k->c->attn_fused ? cuda_attention_fused_bwd : cuda_attention_bwd)(
        k->st, k->blas, kout(k, 0), kin(k, 0), kin(k, 1), kin(k, 2), d.N, d.L, d.C, d.heads, k->dt,
        kacc(k, 0), k->ws, k->wsb);
}

CUDA_RUN(dropout) {
    return cuda_dropout_fwd(k->st, kout(k, 0), kin(k, 0), k->n0, k->a->dropout.p, kin(k, 1),
                            kin(k, 2), SG_RNG_DROPOUT_BASE + (uint32_t)k->a->dropout.purpose,
                            k->slice * (uint64_t)k->n0, k->dt);
}
CUDA_RUN(dropout_bwd) {
    return cuda_dropout_bwd(k->st, kout(k, 0), kin(k, 0), k->n0, k->a->dropout.p, kin(k, 1),
                            kin(k, 2), SG_RNG_DROPOUT_BASE + (uint32_t)k->a->dropout.purpose,
                            k->slice * (uint64_t)k->n0, k->dt, kacc(k, 0));
}

/* mse and mse_w (in[2] the samples' timesteps, in[3] the weight table), and their backwards */
static sg_loss_weights loss_weights(const cuda_call *k) {
    const sg_loss_weights w = {(const int32_t *)kin(k, 2), (const float *)kin(k, 3),
                               (int)sg_in_numel(k->g, k->nd, 2)};
    return w;
}
static int run_mse(const cuda_call *k, const sg_loss_weights *w) {
    const sg_tensor *pred = &k->g->t[k->nd->in[0]], *tgt = &k->g->t[k->nd->in[1]];
    return cuda_mse_fwd(k->st, kout(k, 0), kin(k, 0), pred->dtype, kin(k, 1), tgt->dtype,
                        sg_numel(pred), k->a->mse.micro_batches, kacc(k, 0), w, k->ws, k->wsb);
}
static int run_mse_bwd(const cuda_call *k, const sg_loss_weights *w) {
    const sg_tensor *pred = &k->g->t[k->nd->in[0]], *tgt = &k->g->t[k->nd->in[1]];
    return cuda_mse_bwd(k->st, kout(k, 0), kin(k, 0), pred->dtype, kin(k, 1), tgt->dtype, k->n0,
                        k->a->mse.loss_scale, kacc(k, 0), w);
}
CUDA_RUN(mse) {
    return run_mse(k, NULL);
}
CUDA_RUN(mse_bwd) {
    return run_mse_bwd(k, NULL);
}
CUDA_RUN(mse_w) {
    const sg_loss_weights w = loss_weights(k);
    return run_mse(k, &w);
}
CUDA_RUN(mse_w_bwd) {
    const sg_loss_weights w = loss_weights(k);
    return run_mse_bwd(k, &w);
}
CUDA_RUN(accum) {
    /* in place (the planner merged the buffers) and not accumulating: nothing to move */
    if (kout(k, 0) == kin(k, 0) && !kacc(k, 0)) return SG_OK;
    return cuda_copy(k->st, kout(k, 0), k->dt, kin(k, 0), k->dy_dt, k->n0, kacc(k, 0));
}

CUDA_RUN(grad_sumsq) {
    return cuda_sumsq(k->st, kout(k, 0), kin(k, 0), sg_in_numel(k->g, k->nd, 0), k->ws, k->wsb);
}
CUDA_RUN(clip_scale) {
    return cuda_clip_scale(k->st, kout(k, 0), kin(k, 0), k->a->clip.max_norm);
}
CUDA_RUN(adamw) {
    const sg_adamw_args *a = &k->a->adamw;
    return cuda_adamw(
        k->st, kout(k, 0), kout(k, 1), kout(k, 2), kin(k, 1), sg_in_numel(k->g, k->nd, 0),
        kin(k, 4), kin(k, 5), a->lr, a->b1, a->b2, a->eps, a->wd, a->warmup,
        (sg_lr_sched){.decay_steps = a->decay_steps, .lr_min = a->lr_min, .schedule = a->schedule},
        kout(k, 3));
}
CUDA_RUN(ema) {
    const sg_ema_args *a = &k->a->ema;
    const sg_ema_sched warm = {a->inv_gamma, a->power};
    return cuda_ema(k->st, kout(k, 0), kin(k, 1), k->n0, a->decay, a->warmup ? &warm : NULL,
                    kin(k, 2));
}
/* params, grads, m, v, ema, scale, step -> params, m, v, ema, lr (in place on the regions), and
 * with copy (adamw_ema_bf16's output 5) the bf16 copy of the updated parameters */
static int run_adamw_ema(const cuda_call *k, uint16_t *copy) {
    const sg_adamw_args *a = &k->a->optim.adamw;
    const sg_ema_args *e = &k->a->optim.ema;
    const sg_ema_sched warm = {e->inv_gamma, e->power};
    return cuda_adamw_ema(
        k->st, kout(k, 0), kout(k, 1), kout(k, 2), kout(k, 3), copy, kin(k, 1),
        sg_in_numel(k->g, k->nd, 0), kin(k, 5), kin(k, 6), a->lr, a->b1, a->b2, a->eps, a->wd,
        a->warmup,
        (sg_lr_sched){.decay_steps = a->decay_steps, .lr_min = a->lr_min, .schedule = a->schedule},
        kout(k, 4), e->decay, e->warmup ? &warm : NULL);
}
CUDA_RUN(adamw_ema) {
    return run_adamw_ema(k, NULL);
}
CUDA_RUN(adamw_ema_bf16) {
    return run_adamw_ema(k, kout(k, 5));
}
CUDA_RUN(step_inc) {
    return cuda_step_increment(k->st, kout(k, 0));
}
CUDA_RUN(loss_watch) {
    return cuda_loss_watch(k->st, kin(k, 0), kin(k, 1), kin(k, 2), kout(k, 0), kout(k, 1));
}

/* OP_ALLREDUCE: one grouped NCCL launch on the step's stream (captured like a kernel):
 * gradients summed (the 1/ranks is already in the loss gradient), the loss summed, then times
 * the op's loss factor, as the CPU backend does (ncclAvg ignored the factor: backend_ops_gpu's
 * one-rank case with a factor of 0.5 caught it on the first GPU run). Summation order is NCCL's:
 * deterministic for a fixed rank count, topology, NCCL version and algorithm
 * (docs/data-parallel.md pins NCCL_ALGO); every rank receives the same bits. */
CUDA_RUN(allreduce) {
    float *grads = kin(k, 0), *loss = kin(k, 1);
#ifdef SG_HAVE_NCCL
    if (!k->c->nccl) return sg_set_error("allreduce: no NCCL communicator (prepare not run?)");
    NC(ncclGroupStart());
    NC(ncclAllReduce(grads, grads, (size_t)sg_in_numel(k->g, k->nd, 0), ncclFloat32, ncclSum,
                     k->c->nccl, k->st));
    NC(ncclAllReduce(loss, loss, 1, ncclFloat32, ncclSum, k->c->nccl, k->st));
    NC(ncclGroupEnd());
#else
    (void)grads; /* one rank (prepare refused more): the sum is the identity */
#endif
    return cuda_scale(k->st, loss, loss, k->a->allreduce.loss_factor, 1, DT_F32, 0);
}

/* x, pred, table, k, key, x0h -> x (in place), x_t, t, x0h (in place) */
CUDA_RUN(sample_step) {
    const sg_tensor *x = &k->g->t[k->nd->in[0]], *table = &k->g->t[k->nd->in[2]];
    const int N = (int)x->shape[0];
    return cuda_sample_step(k->st, kout(k, 0), kout(k, 1), (int)k->g->t[k->nd->out[1]].dtype,
                            kout(k, 2), kout(k, 3), kin(k, 1), (int)k->g->t[k->nd->in[1]].dtype,
                            kin(k, 2), (int)table->shape[0], kin(k, 3), kin(k, 4), N,
                            sg_numel(x) / N, k->a->sampler.T, k->a->sampler.guided,
                            (double)k->a->sampler.guidance, (double)k->a->sampler.rescale);
}

/* every op's function, from the op list: an op without a cuda_run_<id> does not compile */
typedef int (*cuda_run_fn)(const cuda_call *k);
#define CUDA_RUN_ROW(op, id, ...) [op] = cuda_run_##id,
static const cuda_run_fn cuda_run[OP_COUNT] = {SG_OP_LIST(CUDA_RUN_ROW)};

int cuda_run_node_on(sg_backend *be, const sg_plan *p, int i, int engine, sg_blas *blas) {
    cuda_ctx *c = be->ctx;
    sg_cuda_set_pdl(c->pdl); /* process-wide: this backend's, for every launch of its nodes */
    sg_cuda_set_norm_onepass(c->norm_onepass); /* likewise */
    const sg_graph *g = &p->g;
    const sg_node *nd = &g->n[i];
    cuda_call k = {.c = c,
                   .g = g,
                   .nd = nd,
                   .a = &nd->a,
                   .st = c->st,
                   .blas = blas ? blas : c->blas,
                   .ws = c->ws,
                   .wsb = c->ws_bytes,
                   .dt = (int)g->t[nd->out[0]].dtype,
                   .dy_dt = (int)g->t[nd->in[0]].dtype,
                   .n0 = sg_out_numel(g, nd, 0),
                   .engine = engine        ? engine
                             : c->node_eng ? c->node_eng[i]
                                           : 0,
                   .slice = sg_node_slice(g, nd, c->rank)};
    /* a wgmma node of a layer with its own schedule: that schedule for its launches alone */
    const int sched = k.engine == CONV_ENGINE_WGMMA && c->node_sched ? c->node_sched[i] : -1;
    if (sched >= 0) wg_sched_apply(c, sched);
    /* the Winograd switch, process-wide, for this node's launches (read as they are issued: a
     * capture keeps it) */
    cuda_conv_wino_enable(c->wino_force >= 0 ? c->wino_force : c->node_wino ? c->node_wino[i] : 0);
    /* the tiles' product form likewise */
    cuda_conv_f32_tc_enable(c->f32tc_force >= 0 ? c->f32tc_force
                            : c->node_f32tc     ? c->node_f32tc[i]
                                                : 0);
    const int rc = cuda_run[nd->op](&k);
    if (sched >= 0) wg_sched_apply(c, -1);
    if (rc) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", sg_last_error());
        return sg_set_error("node %d (%s -> %s): %s", i, sg_ops[nd->op].name, g->t[nd->out[0]].name,
                            msg);
    }
    return SG_OK;
}

/* One node's launches inside an NVTX range named after it ("node 12 conv2d -> h3"): nsys and
 * ncu profiles show which node a kernel belongs to, and the host emulation names the node in
 * every message (tests/cuda_host). */
int cuda_run_node(sg_backend *be, const sg_plan *p, int i) {
    const sg_node *nd = &p->g.n[i];
    char name[160];
    snprintf(name, sizeof name, "node %d %s -> %s", i, sg_ops[nd->op].name,
             nd->nout ? p->g.t[nd->out[0]].name : "-");
    nvtxRangePushA(name);
    int rc = cuda_run_node_on(be, p, i, 0, NULL);
    nvtxRangePop();
    return rc;
}

int run_eager(sg_backend *be, const sg_plan *p) {
    for (int i = 0; i < p->g.nn; i++)
        if (cuda_run_node(be, p, i)) return SG_ERR;
    return SG_OK;
}

#else
typedef int sg_backend_cuda_run_unused; /* ISO C forbids an empty translation unit */
#endif
