/* op_dims.h — every size a node's kernels need, derived once from its operands and arguments.
 *
 * A node stores tensors (ids) and named arguments (ir.h's sg_op_args); the sizes a kernel
 * takes (N, H, W, Ci, Co, K, S, Ho, Wo, L, ...) follow from them, differently for a forward op
 * and its backward ops (a conv's Ci comes from x forward, from w in the backward data pass).
 * That decoding lives here and nowhere else: both backends, the workspace sizing
 * (planner/workspace.c) and the FLOP rules (planner/ops.c) call these functions, so they can
 * never disagree. Each function takes the nodes of one op family and asserts (SG_ASSERT) that
 * it was given one of them.
 *
 * Tensor layouts (ir.h): activations NHWC {N, H, W, C}; conv weights {Co, K, K, Ci}; linear
 * weights {M, K}.
 */
#ifndef SG_OP_DIMS_H
#define SG_OP_DIMS_H

#include "planner/ir.h"

/* OP_CONV2D, OP_CONV2D_ADD, OP_CONV2D_BWD_DATA, OP_CONV2D_BWD_WEIGHT: x [N, H, W, Ci] ->
 * y [N, Ho, Wo, Co], weight [Co, K, K, Ci], stride S, top/left zero padding pad
 * (sg_conv_args). OP_CONV2D_SC: its conv2's (h = in0); the shortcut's Cin is in3's channels. */
typedef struct {
    int N, H, W, Ci, Co, K, S, pad, Ho, Wo;
} sg_conv_dims;
sg_conv_dims sg_conv_dims_of(const sg_graph *g, const sg_node *nd);
/* OP_UPCONV2D, OP_UPCONV2D_BWD_DATA, OP_UPCONV2D_BWD_WEIGHT: the low-res x [N, H, W, Ci] ->
 * y [N, Ho = 2H, Wo = 2W, Co], weight [Co, 3, 3, Ci] (K = 3, S = 1, pad = 1). */
sg_conv_dims sg_upconv_dims_of(const sg_graph *g, const sg_node *nd);
/* Is op a convolution pass (the ops sg_conv_dims_of decodes: a conv node for the engines)?
 * conv2d_sc is not: it runs on the own tensor-core kernels whatever the engine
 * (graph/backend_cuda_run.c). */
int sg_op_is_conv(sg_op op);

/* OP_LINEAR, OP_LINEAR_BWD_DATA, OP_LINEAR_BWD_WEIGHT: x [N, K] -> y [N, M], weight [M, K]. */
typedef struct {
    int N, K, M;
} sg_linear_dims;
sg_linear_dims sg_linear_dims_of(const sg_graph *g, const sg_node *nd);

/* OP_GROUP_NORM, OP_GROUP_NORM_BWD and the norm_act ops: x [N, H, W, C] in G groups;
 * HW = H * W. */
typedef struct {
    int N, H, W, C, HW, G;
} sg_gn_dims;
sg_gn_dims sg_gn_dims_of(const sg_graph *g, const sg_node *nd);

/* The norm_act ops' operands: the index of each in the node's inputs, -1 where it has none.
 * Forward (norm_act, norm_act_temb): x, [v,] gamma, beta, [seed, step]; the apply ops: the
 * forward's inputs, then mean, rstd; the backward ops: dy, then the apply op's inputs. temb:
 * the op adds v[N, C] to x first (and may drop out); bwd: a backward op; apply: an apply op. */
typedef struct {
    int dy, x, v, gamma, beta, seed, step, mean, rstd;
    int temb, bwd, apply;
} sg_norm_operands;
sg_norm_operands sg_norm_operands_of(const sg_node *nd);
/* Is op one of the norm_act family? */
int sg_op_is_norm_act(sg_op op);

/* OP_ATTENTION, OP_ATTENTION_BWD, OP_ATTENTION_P: qkv [N, H, W, 3C] -> y [N, H, W, C], L = H * W
 * positions, `heads` heads of C / heads channels. */
typedef struct {
    int N, H, W, L, C, heads;
} sg_attn_dims;
sg_attn_dims sg_attn_dims_of(const sg_graph *g, const sg_node *nd);
/* Is op one of the attention family (the forward, its backward, P's recompute)? One engine runs
 * them all (the CUDA backend's SG_ATTN) */
int sg_op_is_attention(sg_op op);

/* The NHWC sizes of the pixel-wise ops, always those of the forward op's input x:
 * OP_ADD_NC (x) and OP_ADD_NC_BWD (dy, shaped like x); OP_UPSAMPLE2X and OP_AVGPOOL2X (x),
 * OP_UPSAMPLE2X_BWD and OP_AVGPOOL2X_BWD (dx, their output). HW = H * W. */
typedef struct {
    int N, H, W, C, HW;
} sg_nhwc_dims;
sg_nhwc_dims sg_nhwc_dims_of(const sg_graph *g, const sg_node *nd);

/* Elements of input k / output k (any op). */
int64_t sg_in_numel(const sg_graph *g, const sg_node *nd, int k);
int64_t sg_out_numel(const sg_graph *g, const sg_node *nd, int k);

#endif
