/* ir.c — graph containers: adding tensors and nodes, with the op table's shape rules applied
 * as each node is added so that every shape is known (and checked) before anything runs. */
#include "planner/ir.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sg_graph_init(sg_graph *g) {
    memset(g, 0, sizeof *g);
}

void sg_graph_free(sg_graph *g) {
    free(g->t);
    free(g->n);
    memset(g, 0, sizeof *g);
}

int64_t sg_numel(const sg_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

static int grow(void **p, int *cap, int need, size_t elem) {
    if (need <= *cap) return SG_OK;
    int nc = *cap ? *cap * 2 : 256;
    while (nc < need) nc *= 2;
    void *q = realloc(*p, (size_t)nc * elem);
    if (!q) return sg_set_error("out of host memory growing the graph");
    *p = q;
    *cap = nc;
    return SG_OK;
}

int sg_tensor_new(sg_graph *g, const char *name, sg_dtype dt, sg_role role, int ndim,
                  const int64_t *shape_in) {
    /* the caller may pass pointers into g->t, which growing moves: copy first */
    int64_t shape[SG_MAX_DIMS];
    char nm[SG_NAME_MAX];
    memcpy(shape, shape_in, sizeof(int64_t) * (size_t)ndim);
    snprintf(nm, sizeof nm, "%s", name);
    if (grow((void **)&g->t, &g->cap_t, g->nt + 1, sizeof(sg_tensor))) return -1;
    sg_tensor *t = &g->t[g->nt];
    memset(t, 0, sizeof *t);
    memcpy(t->name, nm, sizeof nm);
    t->dtype = dt;
    t->role = role;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    t->bytes = sg_numel(t) * sg_dtype_size(dt);
    t->offset = -1;
    t->first = t->last = -1;
    t->producer = -1;
    t->grad = -1;
    t->twin = -1;
    t->recomputed = -1;
    t->vnorm = -1;
    t->copy_of = -1;
    return g->nt++;
}

int sg_find_tensor(const sg_graph *g, const char *name) {
    for (int i = 0; i < g->nt; i++)
        if (!strcmp(g->t[i].name, name)) return i;
    return -1;
}

char *sg_name(char *buf, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, SG_NAME_MAX, fmt, ap);
    va_end(ap);
    return buf;
}

const char *sg_shape_str(const sg_tensor *t, char *buf, int cap) {
    int k = 0;
    buf[0] = 0;
    for (int i = 0; i < t->ndim && k < cap; i++)
        k += snprintf(buf + k, (size_t)(cap - k), i ? "x%lld" : "%lld", (long long)t->shape[i]);
    return buf;
}

void sg_node_move_last(sg_graph *g, int to) {
    const int last = g->nn - 1;
    SG_ASSERT(to >= 0 && to <= last);
    const sg_node nd = g->n[last];
    for (int k = 0; k < nd.nin; k++)
        SG_ASSERT(g->t[nd.in[k]].producer < to); /* -1 (persistent, inputs) passes */
    memmove(&g->n[to + 1], &g->n[to], sizeof(sg_node) * (size_t)(last - to));
    g->n[to] = nd;
    for (int t = 0; t < g->nt; t++) {
        int *p = &g->t[t].producer;
        if (*p == last)
            *p = to;
        else if (*p >= to && *p < last)
            (*p)++;
    }
}

int sg_node_add(sg_graph *g, sg_op op, const int *in, int nin, int *outs, const sg_op_args *args,
                const char *name) {
    const sg_op_info *info = &sg_ops[op];
    if (nin != info->nin) {
        sg_set_error("%s: op %s takes %d inputs, got %d", name, info->name, info->nin, nin);
        return -1;
    }
    /* args may point into g->n (a backward rule passing its forward node's args), which
     * growing moves: take them first */
    sg_node nd;
    memset(&nd, 0, sizeof nd);
    if (args) nd.a = *args;
    if (grow((void **)&g->n, &g->cap_n, g->nn + 1, sizeof(sg_node))) return -1;
    nd.op = op;
    nd.nin = nin;
    nd.nout = info->nout;
    nd.fwd = -1;
    for (int i = 0; i < nin; i++) {
        if (in[i] < 0 || in[i] >= g->nt) {
            sg_set_error("%s: input %d of %s is not a tensor", name, i, info->name);
            return -1;
        }
        nd.in[i] = in[i];
    }
    for (int k = 0; k < nd.nout; k++) nd.out[k] = outs ? outs[k] : -1;

    /* the shape rule describes every output; existing outputs must match it */
    sg_tensor desc[SG_MAX_OUT];
    memset(desc, 0, sizeof desc);
    if (info->shape && info->shape(g, &nd, desc)) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", sg_last_error());
        sg_set_error("%s (%s): %s", name, info->name, msg);
        return -1;
    }
    int needs_grad = 0;
    for (int i = 0; i < nin; i++) needs_grad |= g->t[in[i]].needs_grad;
    static const char *const suffix[SG_MAX_OUT] = {"", ".mean", ".rstd", ".3", ".4", ".5"};
    for (int k = 0; k < nd.nout; k++) {
        if (nd.out[k] >= 0) {
            const sg_tensor *t = &g->t[nd.out[k]];
            if (t->ndim != desc[k].ndim || sg_numel(t) != sg_numel(&desc[k])) {
                sg_set_error("%s (%s): output %d '%s' has the wrong shape", name, info->name, k,
                             t->name);
                return -1;
            }
            continue;
        }
        char nm[SG_NAME_MAX + 16];
        const char *sfx = k == 0 ? "" : (op == OP_ATTENTION ? ".P" : suffix[k]);
        snprintf(nm, sizeof nm, "%s%s", name, sfx);
        int id = sg_tensor_new(g, nm, desc[k].dtype, ROLE_TEMP, desc[k].ndim, desc[k].shape);
        if (id < 0) return -1;
        g->t[id].producer = g->nn;
        g->t[id].needs_grad = needs_grad && k == 0;
        if (op == OP_CONCAT) {
            g->t[id].nparts = 2;
            g->t[id].parts[0] = in[0];
            g->t[id].parts[1] = in[1];
            g->t[id].bytes = 0;
        }
        nd.out[k] = id;
    }
    if (outs)
        for (int k = 0; k < nd.nout; k++) outs[k] = nd.out[k];
    g->n[g->nn] = nd;
    return g->nn++;
}
