/* autodiff.c — reverse-mode differentiation over the forward graph.
 *
 * Walk the forward nodes backwards; for each node whose output 0 has a gradient, its op's
 * backward rule (planner/ops.c) appends nodes that contribute to its inputs' gradients via
 * ad_emit. A tensor used k times gets k contributions: the first overwrites, the rest add, in
 * schedule order — a fixed summation order, hence deterministic.
 */
#include "planner/autodiff.h"

#include <stdio.h>
#include <string.h>

int ad_grad_tensor(sg_graph *g, int t) {
    if (g->t[t].grad >= 0) return g->t[t].grad;
    char nm[SG_NAME_MAX + 8];
    int id;
    if (g->t[t].nparts) {
        /* the gradient of a virtual concat is the virtual concat of its parts' gradients */
        int p0 = ad_grad_tensor(g, g->t[t].parts[0]);
        int p1 = ad_grad_tensor(g, g->t[t].parts[1]);
        if (p0 < 0 || p1 < 0) return -1;
        sg_name(nm, "grad:%s", g->t[t].name);
        id = sg_tensor_new(g, nm, g->t[t].dtype, ROLE_TEMP, g->t[t].ndim, g->t[t].shape);
        if (id < 0) return -1;
        g->t[id].nparts = 2;
        g->t[id].parts[0] = p0;
        g->t[id].parts[1] = p1;
        g->t[id].bytes = 0;
    } else {
        sg_name(nm, "grad:%s", g->t[t].name);
        id = sg_tensor_new(g, nm, g->t[t].dtype, ROLE_TEMP, g->t[t].ndim, g->t[t].shape);
        if (id < 0) return -1;
    }
    g->t[t].grad = id;
    return id;
}

/* accum bits for writing gradient tensor gt into output slot k; marks it contributed */
static unsigned contrib_bits(sg_graph *g, int gt, int k) {
    unsigned bits = 0;
    if (g->t[gt].nparts) {
        for (int p = 0; p < 2; p++) {
            int pt = g->t[gt].parts[p];
            if (g->t[pt].has_contrib) bits |= sg_accum_bit(k, p);
            g->t[pt].has_contrib = 1;
        }
    } else {
        if (g->t[gt].has_contrib) bits |= sg_accum_bit(k, 0);
    }
    g->t[gt].has_contrib = 1;
    return bits;
}

int ad_emit(sg_graph *g, sg_op op, const int *in, int nin, const int *grad_of,
            const sg_op_args *args, const char *name, int fwd) {
    int outs[SG_MAX_OUT];
    int nout = sg_ops[op].nout;
    for (int k = 0; k < nout; k++) {
        outs[k] = -1;
        if (grad_of[k] >= 0) {
            outs[k] = ad_grad_tensor(g, grad_of[k]);
            if (outs[k] < 0) return -1;
        }
    }
    int nd = sg_node_add(g, op, in, nin, outs, args, name);
    if (nd < 0) return -1;
    unsigned bits = 0;
    for (int k = 0; k < nout; k++)
        if (grad_of[k] >= 0) bits |= contrib_bits(g, outs[k], k);
    g->n[nd].accum = bits;
    g->n[nd].fwd = fwd;
    for (int k = 0; k < nout; k++)
        if (grad_of[k] < 0) g->t[outs[k]].producer = nd;
    return nd;
}

int ad_backward(sg_graph *g, int loss) {
    int nf = g->nn;
    g->n_forward = nf;
    /* seed: the loss node's backward produces d(loss)/d(pred) directly (dloss = 1) */
    g->t[loss].grad = loss; /* marks "has a gradient"; MSE's rule does not read it */
    for (int i = nf - 1; i >= 0; i--) {
        const sg_node *nd = &g->n[i];
        const sg_op_info *info = &sg_ops[nd->op];
        if (!info->backward) continue;
        int y = nd->out[0];
        if (!g->t[y].needs_grad && nd->op != OP_MSE) continue;
        if (g->t[y].grad < 0 || (!g->t[g->t[y].grad].has_contrib && y != loss)) continue;
        if (info->backward(g, i)) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", sg_last_error());
            return sg_set_error("autodiff of node %d (%s): %s", i, info->name, msg);
        }
    }
    g->t[loss].grad = -1;
    g->n_backward = g->nn - nf;
    return SG_OK;
}
