/* workspace.c — the arena's workspace: scratch for the CUDA kernels' fixed-order reductions
 * (sized by common/sg_workspace.h, the rules the kernels themselves follow) and cuBLAS's own
 * workspace. Both are persistent tensors of role workspace, so the whole step, library calls
 * included, runs inside the one arena. The sizes passed are the ones the CUDA backend passes
 * to the launchers: both come from planner/op_dims.h. */
#include "common/sg_workspace.h"
#include "planner/ir.h"
#include "planner/op_dims.h"

int64_t sg_node_workspace_bytes(const sg_graph *g, const sg_node *nd) {
    int dt = nd->nout ? (int)g->t[nd->out[0]].dtype : DT_F32;
    switch (nd->op) {
    case OP_LINEAR: {
        sg_linear_dims d = sg_linear_dims_of(g, nd);
        return sg_ws_linear_fwd(d.N, d.K, d.M, dt);
    }
    case OP_LINEAR_BWD_DATA: {
        sg_linear_dims d = sg_linear_dims_of(g, nd);
        return sg_ws_linear_bwd_data(d.N, d.K, d.M, dt);
    }
    case OP_LINEAR_BWD_WEIGHT: {
        sg_linear_dims d = sg_linear_dims_of(g, nd);
        return sg_ws_linear_bwd_weight(d.N, d.K, d.M, 1);
    }
    /* convs: the scratch depends on the sizes only, and the padding split (d.pad) changes no
     * size (Ho, Wo are the same under either rule); likewise flops_conv in ops.c */
    case OP_CONV2D: {
        sg_conv_dims d = sg_conv_dims_of(g, nd);
        return sg_ws_conv2d_fwd(d.N, d.H, d.W, d.Ci, d.Co, d.K, d.S, dt);
    }
    case OP_CONV2D_BWD_DATA: {
        sg_conv_dims d = sg_conv_dims_of(g, nd);
        return sg_ws_conv2d_bwd_data(d.N, d.H, d.W, d.Ci, d.Co, d.K, d.S, dt);
    }
    case OP_CONV2D_BWD_WEIGHT: {
        sg_conv_dims d = sg_conv_dims_of(g, nd);
        return sg_ws_conv2d_bwd_weight(d.N, d.H, d.W, d.Ci, d.Co, d.K, d.S, 1);
    }
    case OP_GROUP_NORM_BWD: {
        sg_gn_dims d = sg_gn_dims_of(g, nd);
        return sg_ws_group_norm_bwd(d.N, d.C);
    }
    case OP_ADD_NC_BWD: {
        sg_nhwc_dims d = sg_nhwc_dims_of(g, nd);
        return sg_ws_add_nc_bwd(d.N, d.HW, d.C);
    }
    case OP_ATTENTION: {
        sg_attn_dims d = sg_attn_dims_of(g, nd);
        return sg_ws_attention_fwd(d.N, d.L, d.C, d.heads, dt);
    }
    case OP_ATTENTION_BWD: {
        sg_attn_dims d = sg_attn_dims_of(g, nd);
        return sg_ws_attention_bwd(d.N, d.L, d.C, d.heads, dt);
    }
    case OP_MSE:
        return sg_ws_mse_fwd(sg_in_numel(g, nd, 0));
    case OP_GRAD_SUMSQ:
        return sg_ws_sumsq(sg_in_numel(g, nd, 0));
    /* the launchers of these ops take no workspace */
    case OP_GATHER_BATCH:
    case OP_SAMPLE_T:
    case OP_NOISE:
    case OP_DDPM_NOISE:
    case OP_TIMESTEP_EMB:
    case OP_GROUP_NORM:
    case OP_SILU:
    case OP_ADD:
    case OP_ADD_NC:
    case OP_CONCAT:
    case OP_UPSAMPLE2X:
    case OP_AVGPOOL2X:
    case OP_DROPOUT:
    case OP_MSE_BWD:
    case OP_SILU_BWD:
    case OP_UPSAMPLE2X_BWD:
    case OP_AVGPOOL2X_BWD:
    case OP_DROPOUT_BWD:
    case OP_ACCUM:
    case OP_CLIP_SCALE:
    case OP_ADAMW:
    case OP_EMA:
    case OP_STEP_INC:
    case OP_LOSS_WATCH:
    case OP_ALLREDUCE:
        return 0;
    case OP_COUNT:
        break;
    }
    SG_UNREACHABLE("sg_node_workspace_bytes: not an op");
}
