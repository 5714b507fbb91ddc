/* fuse.c — the fusion decisions of a forward graph (issue 17; --fuse, sg_model_fuse): which
 * work around the convolutions the plan moves into them, so that its result is never written
 * to memory. The decisions are the plan's, the same for both backends: the CPU backend computes
 * a fused operand into scratch and runs its plain kernels (the reference by construction); the
 * CUDA backend computes it inside its tensor-core convolutions (kernels/cuda/conv_tc.cu).
 *
 * Prologue (sg_fuse_norm_prologues): the output y of a norm_act / norm_act_temb node whose
 * every reader is a convolution the fused kernels take (sg_conv_fusable) becomes a virtual
 * normalised tensor (sg_tensor.vnorm = the node): no storage in the forward pass. The node then
 * runs only its statistics pass (mean, rstd); the forward convolutions that read y compute it
 * from the node's inputs x, [v,] gamma, beta, [seed, step] and its mean and rstd with the apply
 * pass's arithmetic, so they read exactly the values the unfused plan would have stored. The
 * backward pass recomputes y for the weight gradient as the unfused plan does (y stays marked
 * for recomputation: autodiff.c emits norm_act_apply before the first backward reader, the one
 * reader, the weight gradient, reads that stored copy; norm_act's own backward reads x): a
 * weight gradient's output tile is one tap's channels, so a prologue there transforms each x
 * element once per tap, and on the first GPU run that made it 7x slower than the unfused
 * gradient (docs/gpu-status.md). The layout keeps y's operands alive as long as y is read
 * (plan_layout.c). A reader
 * the engine table (planner/engine_table.h) sends to cuDNN keeps y stored: cuDNN reads memory.
 *
 * Epilogue (the builder, planner/unet.c): a residual add y = skip + conv(h) (the ResBlock's
 * conv2 and its skip, the attention block's to_out and its input) becomes one conv2d_add node
 * (h, w, b, skip -> y) when the convolution is one the fused kernels take: the add node and the
 * conv's own output h disappear. y is the unfused add's, bit for bit: the conv's output rounded
 * to the activation dtype, plus skip, rounded once more. Its backward is the add's (dy into
 * skip's gradient, first) and the conv's, on dy itself. The time-embedding add needs no
 * epilogue: norm_act_temb already adds it before its normalisation.
 *
 * Shortcut fold (the builder, planner/unet.c; sg_conv_sc_foldable): a ResBlock whose input x
 * has other channels than its output adds a 1x1 shortcut conv of x; where conv2 and the
 * shortcut are both convolutions the fused kernels take and the activations are bf16, the two
 * are one conv2d_sc node (h, w2, b2, x, ws, bs -> y): ONE implicit GEMM whose reduction runs
 * over conv2's 9 Cmid taps-and-channels, then the shortcut's Cin channels, both biases added in
 * its store. The shortcut's output and its gradient (the add's copy of dy) are never written.
 * This changes the bits of y (the shortcut is summed in fp32, not rounded to bf16 and added),
 * so it is --fuse 1's only (--fuse 0 keeps the unfused bits). bf16 only: the CUDA kernels fold
 * the two only on the tensor-core path (kernels/cuda/conv_tc.cu), and a plan must run on both
 * backends; an fp32 plan with --fuse 1 keeps conv2d_add and its fallback off the tensor cores.
 */
#include "planner/engine_table.h"
#include "planner/unet.h"

int sg_conv_fusable(const sg_graph *g, int x, int Co, int K) {
    const sg_tensor *t = &g->t[x];
    if (K != 1 && K != 3) return 0;
    if (Co % 8) return 0;
    if (t->nparts)
        return g->t[t->parts[0]].shape[3] % 8 == 0 && g->t[t->parts[1]].shape[3] % 8 == 0;
    return t->shape[3] % 8 == 0;
}

int sg_conv_sc_foldable(const sg_graph *g, int h, int x, int Co, sg_dtype act_dt) {
    return act_dt == DT_BF16 && sg_conv_fusable(g, h, Co, 3) && sg_conv_fusable(g, x, Co, 1);
}

/* every forward reader of y is a convolution taking it as its input, fusable, and not a layer
 * the engine table sends to cuDNN (which reads stored tensors only) */
static int readers_fusable(const sg_graph *g, int y, const sg_engine_table *engines) {
    int readers = 0;
    for (int i = 0; i < g->nn; i++) {
        const sg_node *nd = &g->n[i];
        for (int k = 0; k < nd->nin; k++) {
            if (nd->in[k] != y) continue;
            if ((nd->op != OP_CONV2D && nd->op != OP_CONV2D_ADD && nd->op != OP_CONV2D_SC) ||
                k != 0)
                return 0;
            const sg_tensor *w = &g->t[nd->in[1]];
            if (!sg_conv_fusable(g, y, (int)w->shape[0], nd->a.conv.K)) return 0;
            if (sg_engine_table_node(engines, g, i) == SG_LAYER_CUDNN) return 0;
            readers++;
        }
    }
    return readers > 0;
}

int sg_fuse_norm_prologues(sg_graph *g, const sg_engine_table *engines, int train) {
    int fused = 0;
    for (int i = 0; i < g->nn; i++) {
        const sg_node *nd = &g->n[i];
        if (nd->op != OP_NORM_ACT && nd->op != OP_NORM_ACT_TEMB) continue;
        const int y = nd->out[0];
        if (sg_tensor_virtual(&g->t[y]) || !readers_fusable(g, y, engines)) continue;
        sg_tensor *t = &g->t[y];
        t->vnorm = i;
        t->bytes = 0;
        /* never stored, so recomputed for the weight gradients even where the config keeps
         * stored normalisations (--store-norm) */
        if (train) t->recompute = 1;
        fused++;
    }
    return fused;
}
