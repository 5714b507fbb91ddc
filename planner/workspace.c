/* workspace.c — the arena's workspace: scratch for the CUDA kernels' fixed-order reductions
 * (sized by common/sg_workspace.h, the rules the kernels themselves follow) and cuBLAS's own
 * workspace. Both are persistent tensors of role workspace, so the whole step, library calls
 * included, runs inside the one arena. */
#include "common/sg_workspace.h"
#include "planner/ir.h"

#define D(k, d) ((int)g->t[nd->in[k]].shape[d])

int64_t sg_node_workspace_bytes(const sg_graph *g, const sg_node *nd) {
    int dt = nd->nout ? (int)g->t[nd->out[0]].dtype : DT_F32;
    switch (nd->op) {
    case OP_LINEAR:
        return sg_ws_linear_fwd(D(0, 0), D(0, 1), D(1, 0), dt);
    case OP_LINEAR_BWD_DATA:
        return sg_ws_linear_bwd_data(D(0, 0), D(1, 1), D(1, 0), dt);
    case OP_LINEAR_BWD_WEIGHT:
        return sg_ws_linear_bwd_weight(D(0, 0), D(1, 1), D(0, 1), 1);
    case OP_CONV2D:
        return sg_ws_conv2d_fwd(D(0, 0), D(0, 1), D(0, 2), D(0, 3), D(1, 0), nd->iarg[0],
                                nd->iarg[1], dt);
    case OP_CONV2D_BWD_DATA:
        return sg_ws_conv2d_bwd_data(D(0, 0), nd->iarg[2], nd->iarg[3], D(1, 3), D(1, 0),
                                     nd->iarg[0], nd->iarg[1], dt);
    case OP_CONV2D_BWD_WEIGHT:
        return sg_ws_conv2d_bwd_weight(D(1, 0), D(1, 1), D(1, 2), D(1, 3), D(0, 3), nd->iarg[0],
                                       nd->iarg[1], 1);
    case OP_GROUP_NORM_BWD:
        return sg_ws_group_norm_bwd(D(1, 0), D(1, 3));
    case OP_ADD_NC_BWD:
        return sg_ws_add_nc_bwd(D(0, 0), D(0, 1) * D(0, 2), D(0, 3));
    case OP_ATTENTION:
        return sg_ws_attention_fwd(D(0, 0), D(0, 1) * D(0, 2), D(0, 3) / 3, nd->iarg[0], dt);
    case OP_ATTENTION_BWD:
        return sg_ws_attention_bwd(D(1, 0), D(1, 1) * D(1, 2), D(1, 3) / 3, nd->iarg[0], dt);
    case OP_MSE:
        return sg_ws_mse_fwd(sg_numel(&g->t[nd->in[0]]));
    case OP_GRAD_SUMSQ:
        return sg_ws_sumsq(sg_numel(&g->t[nd->in[0]]));
    default:
        return 0;
    }
}
