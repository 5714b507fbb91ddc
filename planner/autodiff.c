/* autodiff.c — reverse-mode differentiation over the forward graph.
 *
 * Walk the forward nodes backwards; for each node whose output 0 has a gradient, its op's
 * backward rule (planner/ops.c) appends nodes that contribute to its inputs' gradients via
 * ad_emit. A tensor used k times gets k contributions: the first overwrites, the rest add, in
 * schedule order — a fixed summation order, hence deterministic.
 *
 * Recomputation. A forward output the builder marked (sg_tensor.recompute) is not kept for the
 * backward pass. The first backward node that reads it (ad_emit sees every one) gets, emitted
 * just before it, a node of the producer op's recompute op (the op table's `recompute` column)
 * on the producer's inputs and its other outputs, as many as the recompute op takes, e.g.
 * norm_act_apply on x, gamma, beta and the saved mean and rstd, attention_p (attention's P, its
 * output 1) on qkv alone; that node and every later backward reader read the copy instead. So the
 * forward tensor dies at its last forward reader, and the copy lives from just before its
 * first backward reader to its last. The recompute op runs the forward's second pass on the
 * same inputs, so the copy has the forward's bits.
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

/* The tensor a backward node reads for t: t itself, or the recomputed copy of a marked forward
 * tensor (made on the first call; -1 with the error set). */
static int backward_read(sg_graph *g, int t) {
    if (g->t[t].nparts)
        for (int p = 0; p < 2; p++)
            if (g->t[g->t[t].parts[p]].recompute)
                return sg_set_error("%s: a concatenation of a tensor marked for recomputation "
                                    "('%s') is not supported",
                                    g->t[t].name, g->t[g->t[t].parts[p]].name),
                       -1;
    if (!g->t[t].recompute) return t;
    if (g->t[t].recomputed >= 0) return g->t[t].recomputed;
    const int p = g->t[t].producer;
    int which = -1; /* the output t is */
    if (p >= 0 && p < g->n_forward)
        for (int k = 0; k < g->n[p].nout; k++)
            if (g->n[p].out[k] == t) which = k;
    if (which < 0 || sg_ops[g->n[p].op].recompute < 0)
        return sg_set_error("%s is marked for recomputation, but it is not an output of a forward "
                            "op with a recompute op",
                            g->t[t].name),
               -1;
    const sg_node f = g->n[p]; /* a copy: g->n may move */
    const sg_op rop = (sg_op)sg_ops[f.op].recompute;
    int in[SG_MAX_IN + SG_MAX_OUT], n = 0, outs[SG_MAX_OUT] = {-1, -1, -1, -1};
    /* the producer's inputs, then its other outputs: the first sg_ops[rop].nin of them */
    for (int k = 0; k < f.nin; k++) in[n++] = f.in[k];
    for (int k = 0; k < f.nout; k++)
        if (k != which) in[n++] = f.out[k];
    SG_ASSERT(sg_ops[rop].nin <= n && sg_ops[rop].nin <= SG_MAX_IN);
    n = sg_ops[rop].nin;
    char nm[SG_NAME_MAX + 16];
    snprintf(nm, sizeof nm, "%s.recomputed", g->t[t].name);
    int nd = sg_node_add(g, rop, in, n, outs, &f.a, nm);
    if (nd < 0) return -1;
    g->n[nd].fwd = p;
    sg_tensor *r = &g->t[outs[0]];
    r->role = ROLE_RECOMPUTED;
    r->needs_grad = 0;
    g->t[t].recomputed = outs[0];
    return outs[0];
}

int ad_emit(sg_graph *g, sg_op op, const int *in_fwd, int nin, const int *grad_of,
            const sg_op_args *args, const char *name, int fwd) {
    /* args may point into g->n, which a recompute node moves: take them first */
    sg_op_args a;
    memset(&a, 0, sizeof a);
    if (args) a = *args;
    int in[SG_MAX_IN];
    SG_ASSERT(nin <= SG_MAX_IN);
    for (int k = 0; k < nin; k++)
        if ((in[k] = backward_read(g, in_fwd[k])) < 0) return -1;
    int outs[SG_MAX_OUT];
    int nout = sg_ops[op].nout;
    for (int k = 0; k < nout; k++) {
        outs[k] = -1;
        if (grad_of[k] >= 0) {
            outs[k] = ad_grad_tensor(g, grad_of[k]);
            if (outs[k] < 0) return -1;
        }
    }
    int nd = sg_node_add(g, op, in, nin, outs, &a, name);
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
        if (!g->t[y].needs_grad && !sg_op_is_loss(nd->op)) continue;
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
