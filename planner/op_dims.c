/* op_dims.c — the one decoding of each op family's sizes (see op_dims.h for the contract).
 *
 * Which operand carries which size, per op (the node's inputs in[] and outputs out[]):
 *   conv2d             x = in0, w = in1, y = out0 (conv2d_add likewise; r = in3; conv2d_sc
 *                      likewise for its conv2: h = in0, w = in1; its shortcut's x = in3)
 *   conv2d_bwd_data    dy = in0, w = in1; H, W from the args (dx = out0 may be virtual)
 *   conv2d_bwd_weight  dy = in0, x = in1
 *   linear             x = in0, w = in1;   bwd_data: dy = in0, w = in1;  bwd_weight: dy, x
 *   group_norm         x = in0;            bwd: x = in1
 *   norm_act family    sg_norm_operands_of (x = in0 forward and apply, in1 backward)
 *   attention          qkv = in0;          bwd: qkv = in1
 *   upconv2d           x = in0, w = in1;   bwd_data: dy, w (H, W: args); bwd_weight: dy, x
 */
#include "planner/op_dims.h"

static const sg_tensor *in_t(const sg_graph *g, const sg_node *nd, int k) {
    SG_ASSERT(k < nd->nin);
    return &g->t[nd->in[k]];
}
static const sg_tensor *out_t(const sg_graph *g, const sg_node *nd, int k) {
    SG_ASSERT(k < nd->nout);
    return &g->t[nd->out[k]];
}
static int dim(const sg_tensor *t, int d) {
    SG_ASSERT(d < t->ndim);
    return (int)t->shape[d];
}

int64_t sg_in_numel(const sg_graph *g, const sg_node *nd, int k) {
    return sg_numel(in_t(g, nd, k));
}
int64_t sg_out_numel(const sg_graph *g, const sg_node *nd, int k) {
    return sg_numel(out_t(g, nd, k));
}

static int conv_out_size(int h, int K, int S) {
    return (h + 2 * (K / 2) - K) / S + 1;
}

sg_conv_dims sg_conv_dims_of(const sg_graph *g, const sg_node *nd) {
    const sg_conv_args *a = &nd->a.conv;
    sg_conv_dims d = {.K = a->K, .S = a->S, .pad = a->pad};
    if (nd->op == OP_CONV2D || nd->op == OP_CONV2D_ADD || nd->op == OP_CONV2D_SC ||
        nd->op == OP_CONV2D_BWD_WEIGHT) {
        const sg_tensor *x = in_t(g, nd, nd->op == OP_CONV2D_BWD_WEIGHT ? 1 : 0);
        d.N = dim(x, 0), d.H = dim(x, 1), d.W = dim(x, 2), d.Ci = dim(x, 3);
    } else {
        SG_ASSERT(nd->op == OP_CONV2D_BWD_DATA);
        const sg_tensor *dy = in_t(g, nd, 0), *w = in_t(g, nd, 1);
        d.N = dim(dy, 0), d.H = a->H, d.W = a->W, d.Ci = dim(w, 3);
    }
    /* Co: the weight's rows forward and in the data pass, dy's channels in the weight pass */
    d.Co = nd->op == OP_CONV2D_BWD_WEIGHT ? dim(in_t(g, nd, 0), 3) : dim(in_t(g, nd, 1), 0);
    d.Ho = conv_out_size(d.H, d.K, d.S);
    d.Wo = conv_out_size(d.W, d.K, d.S);
    return d;
}

sg_conv_dims sg_upconv_dims_of(const sg_graph *g, const sg_node *nd) {
    sg_conv_dims d = {.K = 3, .S = 1, .pad = 1};
    if (nd->op == OP_UPCONV2D || nd->op == OP_UPCONV2D_BWD_WEIGHT) {
        const sg_tensor *x = in_t(g, nd, nd->op == OP_UPCONV2D ? 0 : 1);
        d.N = dim(x, 0), d.H = dim(x, 1), d.W = dim(x, 2), d.Ci = dim(x, 3);
        d.Co = nd->op == OP_UPCONV2D ? dim(in_t(g, nd, 1), 0) : dim(in_t(g, nd, 0), 3);
    } else {
        SG_ASSERT(nd->op == OP_UPCONV2D_BWD_DATA);
        const sg_tensor *dy = in_t(g, nd, 0), *w = in_t(g, nd, 1);
        d.N = dim(dy, 0), d.H = nd->a.conv.H, d.W = nd->a.conv.W, d.Ci = dim(w, 3);
        d.Co = dim(w, 0);
    }
    d.Ho = 2 * d.H, d.Wo = 2 * d.W;
    return d;
}

sg_linear_dims sg_linear_dims_of(const sg_graph *g, const sg_node *nd) {
    const sg_tensor *a = in_t(g, nd, 0), *b = in_t(g, nd, 1);
    switch (nd->op) {
    case OP_LINEAR: /* x [N, K], w [M, K] */
        return (sg_linear_dims){.N = dim(a, 0), .K = dim(a, 1), .M = dim(b, 0)};
    case OP_LINEAR_BWD_DATA: /* dy [N, M], w [M, K] */
        return (sg_linear_dims){.N = dim(a, 0), .K = dim(b, 1), .M = dim(b, 0)};
    case OP_LINEAR_BWD_WEIGHT: /* dy [N, M], x [N, K] */
        return (sg_linear_dims){.N = dim(a, 0), .K = dim(b, 1), .M = dim(a, 1)};
    default:
        SG_UNREACHABLE("sg_linear_dims_of: not a linear op");
    }
}

static sg_nhwc_dims nhwc(const sg_tensor *t) {
    sg_nhwc_dims d = {.N = dim(t, 0), .H = dim(t, 1), .W = dim(t, 2), .C = dim(t, 3)};
    d.HW = d.H * d.W;
    return d;
}

int sg_op_is_conv(sg_op op) {
    return op == OP_CONV2D || op == OP_CONV2D_ADD || op == OP_CONV2D_BWD_DATA ||
           op == OP_CONV2D_BWD_WEIGHT;
}

int sg_op_is_norm_act(sg_op op) {
    return op == OP_NORM_ACT || op == OP_NORM_ACT_TEMB || op == OP_NORM_ACT_APPLY ||
           op == OP_NORM_ACT_TEMB_APPLY || op == OP_NORM_ACT_BWD || op == OP_NORM_ACT_TEMB_BWD;
}

sg_norm_operands sg_norm_operands_of(const sg_node *nd) {
    SG_ASSERT(sg_op_is_norm_act(nd->op));
    sg_norm_operands o = {-1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0};
    o.temb = nd->op == OP_NORM_ACT_TEMB || nd->op == OP_NORM_ACT_TEMB_APPLY ||
             nd->op == OP_NORM_ACT_TEMB_BWD;
    o.bwd = nd->op == OP_NORM_ACT_BWD || nd->op == OP_NORM_ACT_TEMB_BWD;
    o.apply = nd->op == OP_NORM_ACT_APPLY || nd->op == OP_NORM_ACT_TEMB_APPLY;
    int k = 0;
    if (o.bwd) o.dy = k++;
    o.x = k++;
    if (o.temb) o.v = k++;
    o.gamma = k++;
    o.beta = k++;
    if (o.temb) o.seed = k++, o.step = k++;
    if (o.apply || o.bwd) o.mean = k++, o.rstd = k++;
    SG_ASSERT(k == nd->nin);
    return o;
}

sg_gn_dims sg_gn_dims_of(const sg_graph *g, const sg_node *nd) {
    int xi;
    if (nd->op == OP_GROUP_NORM || nd->op == OP_GROUP_NORM_BWD)
        xi = nd->op == OP_GROUP_NORM ? 0 : 1;
    else
        xi = sg_norm_operands_of(nd).x;
    sg_nhwc_dims x = nhwc(in_t(g, nd, xi));
    return (sg_gn_dims){.N = x.N, .H = x.H, .W = x.W, .C = x.C, .HW = x.HW, .G = nd->a.gn.groups};
}

int sg_op_is_attention(sg_op op) {
    return op == OP_ATTENTION || op == OP_ATTENTION_BWD || op == OP_ATTENTION_P;
}

sg_attn_dims sg_attn_dims_of(const sg_graph *g, const sg_node *nd) {
    SG_ASSERT(nd->op == OP_ATTENTION || nd->op == OP_ATTENTION_BWD || nd->op == OP_ATTENTION_P);
    sg_nhwc_dims q = nhwc(in_t(g, nd, nd->op == OP_ATTENTION_BWD ? 1 : 0));
    return (sg_attn_dims){
        .N = q.N, .H = q.H, .W = q.W, .L = q.HW, .C = q.C / 3, .heads = nd->a.attn.heads};
}

sg_nhwc_dims sg_nhwc_dims_of(const sg_graph *g, const sg_node *nd) {
    switch (nd->op) {
    case OP_ADD_NC:
    case OP_ADD_NC_BWD:
    case OP_UPSAMPLE2X:
    case OP_UPSAMPLE2X_APPLY:
    case OP_AVGPOOL2X:
        return nhwc(in_t(g, nd, 0));
    case OP_UPSAMPLE2X_BWD:
    case OP_AVGPOOL2X_BWD:
        return nhwc(out_t(g, nd, 0));
    default:
        SG_UNREACHABLE("sg_nhwc_dims_of: not a pixel-wise NHWC op");
    }
}
