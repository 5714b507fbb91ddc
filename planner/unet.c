/* unet.c — the UNet builder (docs/model.md): parameters with their training companions, the
 * res blocks, attention blocks, down/up paths and skip connections, as nodes of a graph.
 *
 * Shapes: activations {N, H, W, C}; conv weights {Co, K, K, Ci}; linear {M, K}. Tensor names
 * are module paths (diffusers UNet2DModel names); a parameter is "<module>.weight|bias".
 */
#include "planner/unet.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "planner/engine_table.h"

static int param(builder *b, const char *module, const char *what, int ndim, const int64_t *shape,
                 int init, float bound) {
    if (b->err) return -1;
    char nm[SG_NAME_MAX];
    sg_name(nm, "%s.%s", module, what);
    int p = sg_tensor_new(b->g, nm, DT_F32, ROLE_PARAM, ndim, shape);
    if (p < 0) return b->err = 1, -1;
    b->g->t[p].needs_grad = 1;
    b->g->t[p].init = init;
    b->g->t[p].init_bound = bound;
    b->n_params += sg_numel(&b->g->t[p]);
    if (b->train) {
        static const char *const pre[] = {"grad:", "adam_m:", "adam_v:", "ema:"};
        static const sg_role roles[] = {ROLE_GRAD, ROLE_ADAM_M, ROLE_ADAM_V, ROLE_EMA};
        for (int i = 0; i < 4; i++) {
            char cn[SG_NAME_MAX + 8];
            sg_name(cn, "%s%s", pre[i], nm);
            int id = sg_tensor_new(b->g, cn, DT_F32, roles[i], ndim, shape);
            if (id < 0) return b->err = 1, -1;
            if (i == 0) b->g->t[p].grad = id;
        }
    }
    return p;
}

int sg_builder_node(builder *b, sg_op op, const int *in, int nin, const sg_op_args *args,
                    const char *name, int k) {
    if (b->err) return -1;
    int outs[SG_MAX_OUT] = {-1, -1, -1, -1};
    int n = sg_node_add(b->g, op, in, nin, outs, args, name);
    if (n < 0) return b->err = 1, -1;
    return outs[k];
}

/* A conv's parameters `module`.weight [Co, K, K, Ci] and .bias [Co], created here: their place
 * in the parameter region (creation order) is where their initial values are drawn from. */
static void conv_params(builder *b, int Ci, int Co, int K, const char *module, int *w, int *bb) {
    float bound = 1.0f / sqrtf((float)(Ci * K * K));
    int64_t ws[4] = {Co, K, K, Ci}, bs[1] = {Co};
    *w = param(b, module, "weight", 4, ws, SG_INIT_UNIFORM, bound);
    *bb = param(b, module, "bias", 1, bs, SG_INIT_UNIFORM, bound);
}
/* The conv node on x with parameters w, bb; with res >= 0 (a tensor shaped like its output)
 * the residual add res + conv(x) in the same node (conv2d_add: the fused epilogue,
 * planner/fuse.c), else a plain conv2d. pad: the top/left zero padding (K/2 is symmetric; see
 * sg_conv_args). */
static int conv_node(builder *b, int x, int w, int bb, int res, int K, int S, int pad,
                     sg_dtype out_dt, const char *name) {
    int in[4] = {x, w, bb, res};
    sg_op_args a = {.conv = {.K = K, .S = S, .pad = pad, .out_dt = out_dt}};
    if (res >= 0) return sg_builder_node(b, OP_CONV2D_ADD, in, 4, &a, name, 0);
    return sg_builder_node(b, OP_CONV2D, in, 3, &a, name, 0);
}
static int conv(builder *b, int x, int Co, int K, int S, int pad, const char *module,
                sg_dtype out_dt) {
    if (b->err) return -1;
    int w, bb;
    conv_params(b, (int)b->g->t[x].shape[3], Co, K, module, &w, &bb);
    return conv_node(b, x, w, bb, -1, K, S, pad, out_dt, module);
}
/* Is skip + conv(x) (Co channels, K x K, stride 1) one conv2d_add node: fusing, and a conv the
 * fused kernels take (planner/fuse.c)? */
static int fuse_residual(const builder *b, int x, int Co, int K) {
    return !b->err && sg_model_fuse(b->c) && sg_conv_fusable(b->g, x, Co, K);
}

/* Does the engine table send conv layer `layer` to cuDNN? Then no form only the own kernels
 * run (conv2d_sc, upconv2d) takes it. */
static int layer_on_cudnn(const builder *b, const char *layer) {
    return b->c->engines && sg_engine_table_layer(b->c->engines, layer) == SG_LAYER_CUDNN;
}

/* Is upsample2x(x) then a 3x3 conv `layer` to Co channels one upconv2d node (planner/fuse.c):
 * fusing, the table leaves the conv to the own kernels, and the bf16 tensor-core kernels take
 * it (bf16 activations, channels multiples of 8)? fp32 plans (--fuse 1 forced) keep the pair:
 * only the direct CUDA-core kernels would run it there, and its numerics would change for no
 * gain. */
static int fuse_upconv(const builder *b, int x, int Co, const char *layer) {
    return !b->err && sg_model_fuse(b->c) && b->c->fuse != SG_FUSE_BITWISE &&
           !layer_on_cudnn(b, layer) && b->c->act_dt == DT_BF16 && b->g->t[x].shape[3] % 8 == 0 &&
           Co % 8 == 0 && !sg_tensor_virtual(&b->g->t[x]);
}
/* upconv2d: the upsample and the conv `module` in one node; the conv's parameters as conv()
 * makes them (same names, same place in the parameter region: the same initial values, and
 * checkpoints load across --fuse) */
static int upconv(builder *b, int x, int Co, const char *module) {
    int w, bb;
    conv_params(b, (int)b->g->t[x].shape[3], Co, 3, module, &w, &bb);
    if (b->err) return -1;
    int in[3] = {x, w, bb};
    sg_op_args a = {.conv = {.K = 3, .S = 1, .pad = 1, .out_dt = b->c->act_dt}};
    return sg_builder_node(b, OP_UPCONV2D, in, 3, &a, module, 0);
}

static int linear(builder *b, int x, int M, const char *module) {
    if (b->err) return -1;
    int K = (int)b->g->t[x].shape[1];
    float bound = 1.0f / sqrtf((float)K);
    int64_t ws[2] = {M, K}, bs[1] = {M};
    int w = param(b, module, "weight", 2, ws, SG_INIT_UNIFORM, bound);
    int bb = param(b, module, "bias", 1, bs, SG_INIT_UNIFORM, bound);
    int in[3] = {x, w, bb};
    return sg_builder_node(b, OP_LINEAR, in, 3, NULL, module, 0);
}

/* GroupNorm (the module's weight = gamma, bias = beta) and the activation after it as one
 * norm_act node; with v >= 0 (v[N, C], the time-embedding projection) the node adds v to x
 * first and drops out after the activation with the model's dropout (norm_act_temb, the
 * ResBlock's second normalisation; its stream is the one a dropout op in its place would
 * have). The output is marked for recomputation: the backward pass keeps x and the statistics,
 * not y, and recomputes y before the next conv's weight gradient (planner/autodiff.c). */
static int norm_act(builder *b, int x, int v, int act, const char *module) {
    if (b->err) return -1;
    int64_t cs[1] = {b->g->t[x].shape[3]};
    int gm = param(b, module, "weight", 1, cs, SG_INIT_ONES, 0);
    int bt = param(b, module, "bias", 1, cs, SG_INIT_ZEROS, 0);
    sg_op_args a = {.gn = {.groups = b->c->groups, .eps = 1e-6f, .act = act}};
    int y;
    if (v < 0) {
        int in[3] = {x, gm, bt};
        y = sg_builder_node(b, OP_NORM_ACT, in, 3, &a, module, 0);
    } else {
        if (b->c->dropout > 0) a.gn.p = b->c->dropout, a.gn.purpose = b->g->n_dropout++;
        /* the dropout's key: the step's seed and counter. A forward-only graph (sampling,
         * dropout off) has neither; it gets two zero scalars that are never read. */
        if (b->g->t[b->seed_t].dtype != DT_U64 || b->g->t[b->step_t].dtype != DT_I64) {
            int64_t one[1] = {1};
            b->seed_t = sg_tensor_new(b->g, "rng_seed", DT_U64, ROLE_STATE, 1, one);
            b->step_t = sg_tensor_new(b->g, "step", DT_I64, ROLE_STATE, 1, one);
            if (b->seed_t < 0 || b->step_t < 0) return b->err = 1, -1;
        }
        int in[6] = {x, v, gm, bt, b->seed_t, b->step_t};
        y = sg_builder_node(b, OP_NORM_ACT_TEMB, in, 6, &a, module, 0);
    }
    /* recomputed for the backward pass unless the config keeps it (--store-norm); a fused y
     * (planner/fuse.c) is marked there whatever this says */
    if (y >= 0 && b->train && !b->c->store_norm) b->g->t[y].recompute = 1;
    return y;
}

static int unary(builder *b, sg_op op, int x, const char *module, const char *what) {
    char nm[SG_NAME_MAX];
    sg_name(nm, "%s.%s", module, what);
    int in[1] = {x};
    return sg_builder_node(b, op, in, 1, NULL, nm, 0);
}

static int binary(builder *b, sg_op op, int x, int y, const char *module, const char *what) {
    char nm[SG_NAME_MAX];
    sg_name(nm, "%s.%s", module, what);
    int in[2] = {x, y};
    return sg_builder_node(b, op, in, 2, NULL, nm, 0);
}

static int resblock(builder *b, int x, int Co, const char *m) {
    char nm[SG_NAME_MAX];
#define SUB(s) (sg_name(nm, "%s.%s", m, s), nm)
    sg_dtype dt = b->c->act_dt;
    const int hn = norm_act(b, x, -1, SG_ACT_SILU, SUB("norm1"));
    int h = conv(b, hn, Co, 3, 1, 1, SUB("conv1"), dt);
    int v = linear(b, b->st, Co, SUB("time_emb_proj"));
    /* The projection runs with the other blocks' right after the time MLP (b->proj_at), in the
     * blocks' order; its parameters are still created after conv1's (the parameter region,
     * initial values and checkpoints stay as they were). All of them read silu(temb) alone, so
     * they are one run of consecutive linear nodes on one input, and their backward nodes one
     * run at the end of the backward pass, which the CUDA backend runs as one launch each way
     * (graph/backend_cuda_run.c, prepare_linear_groups); no projection's bits depend on where it
     * runs, and silu(temb)'s gradient still sums them in the reverse block order. conv1 then runs
     * right before norm2, so that its tensor-core epilogue can compute norm2's statistics'
     * partials (prepare_norm_stats). */
    if (!b->err) sg_node_move_last(b->g, b->proj_at++);
    const int after_norm1 = b->err ? 0 : b->g->t[hn].producer + 1; /* conv1's place */
    h = norm_act(b, h, v, SG_ACT_SILU, SUB("norm2"));              /* + v, and the dropout */
    if (!fuse_residual(b, h, Co, 3)) {
        h = conv(b, h, Co, 3, 1, 1, SUB("conv2"), dt);
        int skip = x;
        if (!b->err && b->g->t[x].shape[3] != Co)
            skip = conv(b, x, Co, 1, 1, 0, SUB("conv_shortcut"), dt);
        return binary(b, OP_ADD, skip, h, m, "out");
    }
    /* fused: the add in conv2's store, so the skip path runs first: the shortcut conv runs
     * right after norm1 (there the placement reaches the lower bound on every built-in model;
     * just before conv2 it misses unet_fmnist bf16's by 6 KiB), still after norm1 so that the
     * backward pass adds the two gradients of x in the unfused order (the shortcut's first: a
     * bf16 gradient is rounded between them). Its parameters and conv2's are still created
     * last, conv2's first: the unfused order (the same parameter region, the same initial
     * values, checkpoints that load across --fuse). */
    int w2, b2;
    conv_params(b, (int)b->g->t[h].shape[3], Co, 3, SUB("conv2"), &w2, &b2);
    if (!b->err && b->g->t[x].shape[3] != Co && b->c->fuse != SG_FUSE_BITWISE &&
        sg_conv_sc_foldable(b->g, h, x, Co, dt) && !layer_on_cudnn(b, SUB("conv2")) &&
        !layer_on_cudnn(b, SUB("conv_shortcut"))) {
        /* the shortcut folded into conv2's GEMM (conv2d_sc, planner/fuse.c): its parameters
         * created after conv2's, as unfused; no shortcut node, nothing to move */
        int ws, bs;
        conv_params(b, (int)b->g->t[x].shape[3], Co, 1, SUB("conv_shortcut"), &ws, &bs);
        int in[6] = {h, w2, b2, x, ws, bs};
        sg_op_args a = {.conv = {.K = 3, .S = 1, .pad = 1, .out_dt = dt}};
        return sg_builder_node(b, OP_CONV2D_SC, in, 6, &a, SUB("out"), 0);
    }
    int skip = x;
    if (!b->err && b->g->t[x].shape[3] != Co) {
        skip = conv(b, x, Co, 1, 1, 0, SUB("conv_shortcut"), dt);
        if (!b->err) sg_node_move_last(b->g, after_norm1);
    }
    if (b->err) return -1;
    return conv_node(b, h, w2, b2, skip, 3, 1, 1, dt, SUB("out"));
#undef SUB
}

/* attention heads at C channels: C / head_ch when a head width is set, else the fixed count */
static int heads_for(const sg_model_cfg *c, int C) {
    return c->head_ch ? C / c->head_ch : c->heads;
}

static int attnblock(builder *b, int x, const char *m) {
    char nm[SG_NAME_MAX];
#define SUB(s) (sg_name(nm, "%s.%s", m, s), nm)
    if (b->err) return -1;
    int C = (int)b->g->t[x].shape[3];
    int h = norm_act(b, x, -1, SG_ACT_NONE, SUB("group_norm"));
    h = conv(b, h, 3 * C, 1, 1, 0, SUB("to_qkv"), b->c->act_dt);
    int in[1] = {h};
    sg_op_args a = {.attn = {.heads = heads_for(b->c, C)}};
    h = sg_builder_node(b, OP_ATTENTION, in, 1, &a, SUB("attn"), 0);
    /* P (output 1) recomputed for the backward pass unless the config keeps it (--store-attn) */
    if (h >= 0 && b->train && !b->c->store_attn) {
        const int p = b->g->t[h].producer;
        b->g->t[b->g->n[p].out[1]].recompute = 1;
    }
    if (!fuse_residual(b, h, C, 1)) {
        h = conv(b, h, C, 1, 1, 0, SUB("to_out.0"), b->c->act_dt);
        return binary(b, OP_ADD, x, h, m, "out");
    }
    int w, bb;
    conv_params(b, C, C, 1, SUB("to_out.0"), &w, &bb);
    if (b->err) return -1;
    return conv_node(b, h, w, bb, x, 1, 1, 0, b->c->act_dt, SUB("out"));
#undef SUB
}

static int has_attn(const sg_model_cfg *c, int res) {
    for (int i = 0; i < c->nattn; i++)
        if (c->attn_res[i] == res) return 1;
    return 0;
}

/* A class-conditional model's class embedding of labels y (i32[N]): a table of classes + 1
 * rows (the last the null class) initialised uniform with unit variance (PyTorch's
 * nn.Embedding draws N(0, 1); the variance is the same) */
static int class_embedding(builder *b, int y) {
    const int D = 4 * b->c->ch, rows = b->c->classes + 1;
    int64_t ts[2] = {rows, D};
    int w = param(b, "class_embedding", "weight", 2, ts, SG_INIT_UNIFORM, sqrtf(3.0f));
    int in[2] = {y, w};
    sg_op_args a = {.cemb = {.rows = rows, .out_dt = b->c->act_dt}};
    return sg_builder_node(b, OP_CLASS_EMB, in, 2, &a, "class_embedding", 0);
}

/* The UNet on x (act dtype), t (i32[N]) and, in a class-conditional model, the class labels y
 * (i32[N]; -1 otherwise); returns the prediction (act dtype). */
int sg_unet(builder *b, int x, int t, int y) {
    const sg_model_cfg *c = b->c;
    sg_dtype dt = c->act_dt;
    char nm[SG_NAME_MAX];
    int in[1] = {t};
    sg_op_args ta = {.temb = {.dim = c->ch, .out_dt = dt}};
    int e = sg_builder_node(b, OP_TIMESTEP_EMB, in, 1, &ta, "time_embedding.sinusoid", 0);
    e = linear(b, e, 4 * c->ch, "time_embedding.linear_1");
    e = unary(b, OP_SILU, e, "time_embedding", "silu");
    e = linear(b, e, 4 * c->ch, "time_embedding.linear_2");
    /* diffusers' UNet2DModel: emb = time_embedding(t) + class_embedding(y), before the SiLU every
     * ResBlock applies */
    if (c->classes > 0) e = binary(b, OP_ADD, e, class_embedding(b, y), "time_embedding", "class");
    b->st = unary(b, OP_SILU, e, "time_embedding", "silu_out");
    b->proj_at = b->g->nn; /* the blocks' time-embedding projections go here (resblock) */

    /* skip connections: conv_in, nrb per level, one downsample per level but the last */
    int hs[1 + SG_MAX_LEVELS * (SG_MAX_RES_BLOCKS + 1)], nhs = 0;
    int h = conv(b, x, c->ch, 3, 1, 1, "conv_in", dt);
    hs[nhs++] = h;
    for (int i = 0; i < c->nlevels; i++) {
        int C = c->ch * c->ch_mult[i], res = c->img >> i;
        for (int j = 0; j < c->nrb; j++) {
            sg_name(nm, "down_blocks.%d.resnets.%d", i, j);
            h = resblock(b, h, C, nm);
            if (has_attn(c, res)) {
                sg_name(nm, "down_blocks.%d.attentions.%d", i, j);
                h = attnblock(b, h, nm);
            }
            hs[nhs++] = h;
        }
        if (i != c->nlevels - 1) {
            sg_name(nm, "down_blocks.%d.downsamplers.0", i);
            if (c->resample_conv) {
                char cn[SG_NAME_MAX + 8];
                sg_name(cn, "%s.conv", nm);
                h = conv(b, h, C, 3, 2, c->down_pad, cn, dt);
            } else {
                h = unary(b, OP_AVGPOOL2X, h, nm, "pool");
            }
            hs[nhs++] = h;
        }
    }
    int Cmid = c->ch * c->ch_mult[c->nlevels - 1];
    h = resblock(b, h, Cmid, "mid_block.resnets.0");
    h = attnblock(b, h, "mid_block.attentions.0");
    h = resblock(b, h, Cmid, "mid_block.resnets.1");
    for (int k = 0; k < c->nlevels; k++) {
        int i = c->nlevels - 1 - k;
        int C = c->ch * c->ch_mult[i], res = c->img >> i;
        for (int j = 0; j < c->nrb + 1; j++) {
            sg_name(nm, "up_blocks.%d.resnets.%d", k, j);
            h = binary(b, OP_CONCAT, h, hs[--nhs], nm, "cat");
            h = resblock(b, h, C, nm);
            if (has_attn(c, res)) {
                sg_name(nm, "up_blocks.%d.attentions.%d", k, j);
                h = attnblock(b, h, nm);
            }
        }
        if (i != 0) {
            sg_name(nm, "up_blocks.%d.upsamplers.0", k);
            char cn[SG_NAME_MAX + 8];
            sg_name(cn, "%s.conv", nm);
            if (c->resample_conv && fuse_upconv(b, h, C, cn)) {
                h = upconv(b, h, C, cn);
            } else {
                h = unary(b, OP_UPSAMPLE2X, h, nm, "nearest");
                /* the conv's weight gradient reads it: recomputed there (upsample2x_apply), not
                 * kept from the forward pass (it is 4x its input) */
                if (h >= 0 && b->train && c->resample_conv) b->g->t[h].recompute = 1;
                if (c->resample_conv) h = conv(b, h, C, 3, 1, 1, cn, dt);
            }
        }
    }
    h = norm_act(b, h, -1, SG_ACT_SILU, "conv_norm_out");
    /* the prediction in the activation dtype, as PyTorch's conv under autocast; the loss reads
     * it in fp32 */
    int pred = conv(b, h, c->in_ch, 3, 1, 1, "conv_out", dt);
    /* the network is complete: every reader of every normalisation is known */
    if (!b->err && sg_model_fuse(c)) sg_fuse_norm_prologues(b->g, c->engines, b->train);
    return b->err ? -1 : pred;
}
