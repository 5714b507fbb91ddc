/* test_planner.c — the planner's invariants, checked independently of the planner's own
 * verifier, on every built-in model, on random UNet configurations, and on random graphs.
 *
 * For each plan: recompute every tensor's lifetime from the schedule here, then check that no
 * two tensors live at the same time share bytes (unless the planner merged them into one buffer:
 * then a symbolic run of the schedule must find every read's own value in its bytes), that
 * every offset is aligned and
 * inside the arena, that every tensor read was written earlier in the schedule, that every
 * parameter receives its gradient from exactly one first write and one contribution per use,
 * and that arena / lower bound stays within 1.05 (every built-in model: exactly 1).
 */
#include <stdlib.h>
#include <string.h>

#include "planner/autodiff.h"
#include "common/sg_workspace.h"
#include "planner/op_dims.h"
#include "planner/plan.h"
#include "tests/sg_test.h"

static int persistent(sg_role r) {
    return r <= ROLE_INPUT || r == ROLE_WORKSPACE || r == ROLE_PARAM_BF16;
}

/* node i uses t: t, the parts of a concatenation, and what a virtual normalised tensor is
 * computed from (its norm_act node's inputs, those parts too, and its mean and rstd) */
static void use(const sg_graph *g, int t, int i, int *first, int *last) {
    if (first[t] < 0 || i < first[t]) first[t] = i;
    if (i > last[t]) last[t] = i;
    const sg_tensor *x = &g->t[t];
    for (int p = 0; p < x->nparts; p++) use(g, x->parts[p], i, first, last);
    if (x->vnorm >= 0) {
        const sg_node *nd = &g->n[x->vnorm];
        for (int k = 0; k < nd->nin; k++) use(g, nd->in[k], i, first, last);
        for (int k = 1; k < nd->nout; k++) use(g, nd->out[k], i, first, last);
    }
}

/* lifetimes recomputed from scratch: first/last schedule index touching t or a virtual
 * tensor made of it */
static void lifetimes(const sg_graph *g, int *first, int *last) {
    for (int t = 0; t < g->nt; t++) first[t] = -1, last[t] = -1;
    for (int i = 0; i < g->nn; i++) {
        const sg_node *nd = &g->n[i];
        for (int k = 0; k < nd->nin; k++) use(g, nd->in[k], i, first, last);
        for (int k = 0; k < nd->nout; k++) use(g, nd->out[k], i, first, last);
    }
}

/* The values, independently of the planner's buffers: the schedule run symbolically over the
 * arena. Each write gives its tensor a fresh value (a plain copy, accum writing over its
 * output, gives the copy its source's value) and puts that value in the tensor's bytes (keyed
 * by offset: tensors that share bytes while live start at one offset, the overlap check above
 * holds the rest); every read of a dynamic tensor (a concatenation's parts, a virtual
 * normalised tensor's operands) must find its own value there. A node reads before it writes.
 * So sharing memory is right exactly when no write lands on bytes a live tensor still needs. */
typedef struct {
    const sg_plan *p;
    int64_t *val;   /* per tensor: its current value */
    int64_t *held;  /* per distinct dynamic offset: the value in those bytes */
    int64_t *offs;  /* the sorted distinct dynamic offsets */
    int noffs, bad; /* ... and reads that found another value */
    const char *what;
} values_t;
static int cmp_i64(const void *a, const void *b) {
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}
static int64_t *held_at(values_t *v, int t) {
    const int64_t o = v->p->g.t[t].offset;
    const int64_t *k = bsearch(&o, v->offs, (size_t)v->noffs, sizeof o, cmp_i64);
    return k ? &v->held[k - v->offs] : NULL;
}
static void value_read(values_t *v, int t, int i) {
    const sg_graph *g = &v->p->g;
    const sg_tensor *x = &g->t[t];
    for (int q = 0; q < x->nparts; q++) value_read(v, x->parts[q], i);
    if (x->vnorm >= 0) {
        const sg_node *nd = &g->n[x->vnorm];
        for (int k = 0; k < nd->nin; k++) value_read(v, nd->in[k], i);
        for (int k = 1; k < nd->nout; k++) value_read(v, nd->out[k], i);
    }
    if (sg_tensor_virtual(x) || persistent(x->role) || !x->bytes) return;
    const int64_t *h = held_at(v, t);
    if (h && *h == v->val[t]) return;
    if (v->bad++ < 3)
        CHECK(0, "%s: node %d (%s) reads %s, but its bytes hold another value", v->what, i,
              sg_ops[g->n[i].op].name, x->name);
}
static void check_values(const sg_plan *p, const char *what) {
    const sg_graph *g = &p->g;
    values_t v = {.p = p, .what = what};
    v.val = calloc((size_t)g->nt, sizeof *v.val);
    v.offs = malloc(sizeof *v.offs * ((size_t)g->nt + 1));
    for (int t = 0; t < g->nt; t++)
        if (!sg_tensor_virtual(&g->t[t]) && !persistent(g->t[t].role) && g->t[t].bytes)
            v.offs[v.noffs++] = g->t[t].offset;
    qsort(v.offs, (size_t)v.noffs, sizeof *v.offs, cmp_i64);
    int n = 0;
    for (int k = 0; k < v.noffs; k++)
        if (!n || v.offs[k] != v.offs[n - 1]) v.offs[n++] = v.offs[k];
    v.noffs = n;
    v.held = calloc((size_t)n + 1, sizeof *v.held);
    int64_t fresh = 0;
    for (int i = 0; i < g->nn; i++) {
        const sg_node *nd = &g->n[i];
        for (int k = 0; k < nd->nin; k++) value_read(&v, nd->in[k], i);
        for (int k = 0; k < nd->nout; k++) {
            const sg_tensor *y = &g->t[nd->out[k]];
            for (int part = 0; part < (y->nparts ? y->nparts : 1); part++) {
                const int id = y->nparts ? y->parts[part] : nd->out[k];
                const int acc = (nd->accum >> (2 * k + part)) & 1u;
                const int copy = nd->op == OP_ACCUM && !acc && !g->t[nd->in[0]].nparts;
                v.val[id] = copy ? v.val[nd->in[0]] : ++fresh;
                int64_t *h = held_at(&v, id);
                if (h && !sg_tensor_virtual(&g->t[id]) && !persistent(g->t[id].role))
                    *h = v.val[id];
            }
        }
    }
    CHECK(v.bad == 0, "%s: %d reads of overwritten values", what, v.bad);
    free(v.val), free(v.held), free(v.offs);
}

static void check_plan(const sg_plan *p, const char *what, double max_ratio) {
    const sg_graph *g = &p->g;
    int *first = malloc(sizeof(int) * (size_t)g->nt), *last = malloc(sizeof(int) * (size_t)g->nt);
    lifetimes(g, first, last);
    int bad = 0;
    for (int t = 0; t < g->nt && bad < 5; t++) {
        const sg_tensor *x = &g->t[t];
        if (sg_tensor_virtual(x) || first[t] < 0) continue;
        /* a bf16 weight copy lies at half its parameter's offset in the mirrored region */
        const int align = x->role == ROLE_PARAM_BF16 && x->copy_of >= 0 ? SG_ALIGN / 2 : SG_ALIGN;
        if (x->offset < 0 || x->offset % align || x->offset + x->bytes > p->arena_bytes) {
            CHECK(0, "%s: tensor %s badly placed at %lld", what, x->name, (long long)x->offset);
            bad++;
        }
        if (!persistent(x->role) && (first[t] != x->first || last[t] != x->last)) {
            CHECK(0, "%s: %s lifetime %d..%d, planner says %d..%d", what, x->name, first[t],
                  last[t], x->first, x->last);
            bad++;
        }
    }
    /* pairwise overlap */
    int64_t violations = 0;
    for (int a = 0; a < g->nt; a++) {
        const sg_tensor *x = &g->t[a];
        if (sg_tensor_virtual(x) || first[a] < 0 || !x->bytes) continue;
        int la0 = persistent(x->role) ? 0 : first[a], la1 = persistent(x->role) ? g->nn : last[a];
        for (int b = a + 1; b < g->nt; b++) {
            const sg_tensor *y = &g->t[b];
            if (sg_tensor_virtual(y) || first[b] < 0 || !y->bytes) continue;
            if (x->role == y->role && (x->region || y->region)) continue;
            int lb0 = persistent(y->role) ? 0 : first[b],
                lb1 = persistent(y->role) ? g->nn : last[b];
            if (la1 < lb0 || lb1 < la0) continue;
            if (!(x->offset < y->offset + y->bytes && y->offset < x->offset + x->bytes)) continue;
            /* one buffer (in place, or a copy sharing its source's bytes): the values
             * check below decides */
            if (p->buffer_of[a] == p->buffer_of[b]) continue;
            if (violations++ < 3)
                CHECK(0, "%s: %s and %s overlap in memory while both live", what, x->name, y->name);
        }
    }
    CHECK(violations == 0, "%s: %lld overlapping live pairs", what, (long long)violations);

    /* every read has an earlier write; in-place ops are elementwise and run on one buffer */
    char *written = calloc((size_t)g->nt, 1);
    for (int t = 0; t < g->nt; t++)
        if (persistent(g->t[t].role)) written[t] = 1;
    int unread = 0;
    for (int i = 0; i < g->nn; i++) {
        const sg_node *nd = &g->n[i];
        for (int k = 0; k < nd->nin; k++) {
            const sg_tensor *x = &g->t[nd->in[k]];
            int ok = x->nparts ? written[x->parts[0]] && written[x->parts[1]] : written[nd->in[k]];
            if (!ok && unread++ < 3)
                CHECK(0, "%s: node %d (%s) reads %s before any write", what, i, sg_ops[nd->op].name,
                      x->name);
        }
        for (int k = 0; k < nd->nout; k++) {
            const sg_tensor *y = &g->t[nd->out[k]];
            for (int part = 0; part < 2; part++) {
                int id = y->nparts ? y->parts[part] : nd->out[k];
                if (!y->nparts && part) break;
                if ((nd->accum >> (2 * k + part)) & 1u)
                    CHECK(written[id], "%s: node %d accumulates into unwritten %s", what, i,
                          g->t[id].name);
                written[id] = 1;
            }
        }
    }
    CHECK(unread == 0, "%s: %d reads before writes", what, unread);
    free(written);
    check_values(p, what);

    double ratio = (double)p->arena_bytes / (double)p->lower_bound_bytes;
    CHECK(ratio >= 1.0 && ratio <= max_ratio, "%s: arena/lower bound = %.4f", what, ratio);
    CHECK(p->lower_bound_bytes <= p->no_reuse_bytes, "%s: bound above no-reuse", what);
    free(first);
    free(last);
}

/* every parameter: exactly one first write of its gradient, one contribution per use */
static void check_grads(const sg_plan *p, const char *what) {
    const sg_graph *g = &p->g;
    int bad = 0;
    for (int t = 0; t < g->nt && bad < 3; t++) {
        if (g->t[t].role != ROLE_PARAM || g->t[t].region) continue;
        int gt = g->t[t].grad, uses = 0, writes = 0, firsts = 0;
        for (int i = 0; i < g->n_forward; i++) /* a use of its bf16 copy is a use of it */
            for (int k = 0; k < g->n[i].nin; k++)
                uses += g->n[i].in[k] == t || g->t[g->n[i].in[k]].copy_of == t;
        for (int i = g->n_forward; i < g->n_forward + g->n_backward; i++)
            for (int k = 0; k < g->n[i].nout; k++)
                if (g->n[i].out[k] == gt) {
                    writes++;
                    firsts += !((g->n[i].accum >> (2 * k)) & 1u);
                }
        if (gt < 0 || g->t[gt].role != ROLE_GRAD || writes != uses || firsts != 1) {
            CHECK(0, "%s: param %s: %d uses, %d gradient writes, %d first writes", what,
                  g->t[t].name, uses, writes, firsts);
            bad++;
        }
    }
    CHECK(bad == 0, "%s: parameter gradients", what);
    /* every backward node's saved inputs are forward tensors alive until then (covered by the
     * lifetime check); every forward output that needs a gradient and is used got one */
}

/* Recomputation (planner/autodiff.c): no backward node reads a forward tensor marked for
 * recomputation, so it dies in the forward pass; each copy is made by a node of its producer's
 * recompute op reading the producer's inputs and then its other outputs, placed just before
 * its first reader (the next node), itself in the backward pass, role ROLE_RECOMPUTED, read
 * only by backward nodes. Returns the number of recompute nodes. */
static int check_recompute(const sg_plan *p, const char *what) {
    const sg_graph *g = &p->g;
    const int nf = g->n_forward, nb = nf + g->n_backward;
    int bad = 0, nodes = 0;
    for (int t = 0; t < g->nt && bad < 5; t++) {
        const sg_tensor *x = &g->t[t];
        if (!x->recompute) continue;
        int ok = x->role != ROLE_SAVED && x->last < nf;
        for (int i = nf; i < g->nn; i++)
            for (int k = 0; k < g->n[i].nin; k++) ok &= g->n[i].in[k] != t;
        if (!ok) {
            CHECK(0,
                  "%s: %s is marked for recomputation but lives into the backward pass "
                  "(role %s, last use %d, forward ends at %d)",
                  what, x->name, sg_role_names[x->role], x->last, nf);
            bad++;
        }
    }
    for (int i = 0; i < g->nn && bad < 5; i++) {
        const sg_node *nd = &g->n[i];
        const int rt = nd->out[0];
        if (g->t[rt].role != ROLE_RECOMPUTED) continue;
        nodes++;
        const sg_node *f = nd->fwd >= 0 ? &g->n[nd->fwd] : NULL;
        int which = -1; /* the forward output the copy stands for */
        for (int k = 0; f && k < f->nout; k++)
            if (g->t[f->out[k]].recomputed == rt) which = k;
        int ok = f && which >= 0 && i >= nf && i < nb && sg_ops[f->op].recompute == (int)nd->op &&
                 g->t[f->out[which]].recompute && nd->nin == sg_ops[nd->op].nin &&
                 nd->nin <= f->nin + f->nout - 1 && g->t[rt].first == i;
        /* its inputs: the producer's inputs, then its other outputs, as many as the op takes */
        int want[SG_MAX_IN + SG_MAX_OUT], n = 0;
        for (int k = 0; ok && k < f->nin; k++) want[n++] = f->in[k];
        for (int k = 0; ok && k < f->nout; k++)
            if (k != which) want[n++] = f->out[k];
        for (int k = 0; ok && k < nd->nin; k++) ok &= nd->in[k] == want[k];
        int next_reads = 0;
        for (int k = 0; ok && i + 1 < g->nn && k < g->n[i + 1].nin; k++)
            next_reads |= g->n[i + 1].in[k] == rt;
        for (int j = 0; ok && j < g->nn; j++)
            for (int k = 0; k < g->n[j].nin; k++)
                if (g->n[j].in[k] == rt && (j <= i || j >= nb)) ok = 0;
        if (!ok || !next_reads) {
            CHECK(0, "%s: recompute node %d (%s -> %s) is not wired as its forward node %d", what,
                  i, sg_ops[nd->op].name, g->t[rt].name, nd->fwd);
            bad++;
        }
    }
    CHECK(p->role_tensors[ROLE_RECOMPUTED] == nodes, "%s: %d recomputed tensors, %d nodes", what,
          p->role_tensors[ROLE_RECOMPUTED], nodes);
    return nodes;
}

/* Fusion (planner/fuse.c), checked against its rule restated here: with fusion on, the output
 * y of a forward norm_act / norm_act_temb node is virtual normalised (vnorm = that node, no
 * bytes, no offset) exactly when every forward reader is a conv taking it as input 0 whose
 * input and output channels are multiples of 8 (K is 1 or 3 in every conv); with it off, none
 * is. A virtual normalised tensor's readers are those convs, nothing in the backward pass: a
 * training plan recomputes it there as the unfused plan does (its stored copy, read by the
 * weight gradients of those convs, input 1). Returns how many are fused. */
static int check_fused(const sg_plan *p, const char *what) {
    const sg_graph *g = &p->g;
    const int on = sg_model_fuse(&p->cfg);
    int bad = 0, fused = 0, recomputes = 0, wgrads = 0;
    for (int i = 0; i < g->nn && bad < 5; i++) {
        const sg_node *nd = &g->n[i];
        if (nd->op != OP_NORM_ACT && nd->op != OP_NORM_ACT_TEMB) continue;
        const int y = nd->out[0];
        int readers = 0, fusable = 1, bwd_ok = 1;
        const int base = i - i % (g->n_forward + g->n_backward); /* its micro-batch's span */
        for (int j = base; j < base + g->n_forward; j++)
            for (int k = 0; k < g->n[j].nin; k++) {
                if (g->n[j].in[k] != y) continue;
                readers++;
                const sg_node *r = &g->n[j];
                fusable &=
                    (r->op == OP_CONV2D || r->op == OP_CONV2D_ADD || r->op == OP_CONV2D_SC) &&
                    k == 0 && g->t[y].shape[3] % 8 == 0 && g->t[r->out[0]].shape[3] % 8 == 0;
            }
        const sg_tensor *t = &g->t[y];
        for (int j = 0; j < g->nn; j++)
            if (j >= base + g->n_forward || j < base)
                for (int k = 0; k < g->n[j].nin; k++) {
                    bwd_ok &= g->n[j].in[k] != y;
                    /* the copy: read by the convs' weight gradients (and its recompute node) */
                    if (t->vnorm >= 0 && t->recomputed >= 0 && g->n[j].in[k] == t->recomputed)
                        recomputes += g->n[j].op == OP_CONV2D_BWD_WEIGHT && k == 1;
                }
        const int want = on && readers > 0 && fusable;
        int ok = want ? t->vnorm == i && t->bytes == 0 && t->offset < 0 && bwd_ok &&
                            (t->recompute ? t->recomputed >= 0 : t->recomputed < 0)
                      : t->vnorm < 0;
        fused += t->vnorm >= 0;
        /* (a later micro-batch's copy of y records no recomputed copy: micro-batch 0's counts) */
        wgrads += t->vnorm >= 0 && t->recomputed >= 0 ? readers : 0;
        if (!ok) {
            CHECK(0, "%s: %s (node %d, %d readers%s) %s virtual normalised (vnorm %d)", what,
                  t->name, i, readers, fusable ? ", all fusable convs" : "",
                  want ? "should be" : "should not be", t->vnorm);
            bad++;
        }
    }
    CHECK(p->fused_norms == fused, "%s: the plan counts %d fused norms, the graph has %d", what,
          p->fused_norms, fused);
    /* training: every fused conv's weight gradient reads the recomputed copy */
    CHECK(recomputes == wgrads && (wgrads > 0) == (fused > 0 && g->n_backward > 0),
          "%s: %d weight gradients read a recomputed copy of a fused normalisation, want %d", what,
          recomputes, wgrads);
    return fused;
}

/* the tensor of g named nm, or -1 */
static int tensor_named(const sg_graph *g, const char *nm) {
    for (int t = 0; t < g->nt; t++)
        if (!strcmp(g->t[t].name, nm)) return t;
    return -1;
}

/* The residual epilogue (planner/unet.c, planner/fuse.c), checked against its rule restated
 * here on the fused plan f and the unfused plan u of one config: u's forward add node y =
 * skip + h whose h is a stride-1 conv2d (K 1 or 3) with input and output channels (each half of
 * a concatenation) multiples of 8 is, in f, one conv2d_add node writing the tensor of the same
 * name from the conv's input, weight, bias and skip (those of the same names); every other add
 * stays an add. The parameters are the same tensors in the same places (their initial values
 * are drawn by position). In the backward pass each conv2d_add's output gradient is copied or
 * accumulated into skip's gradient by one accum node and read by its conv's two backward
 * passes. The shortcut fold: where skip is u's 1x1 stride-1 conv of the block input x (the
 * block's conv_shortcut) whose x and output channels are multiples of 8 too, and the plan is
 * bf16, the add and that conv are in f one conv2d_sc node from conv2's input, weight and bias
 * and the shortcut's (those names), no accum node, its output gradient read by the four
 * backward passes (conv2's and the shortcut's; three where x needs no gradient). Returns how
 * many residuals are fused. */
static int check_residuals(const sg_plan *f, const sg_plan *u, const char *what) {
    const sg_graph *gf = &f->g, *gu = &u->g;
    int bad = 0, want = 0, want_sc = 0;
    int pf = 0, pu = 0;
    for (;; pf++, pu++) {
        while (pf < gf->nt && gf->t[pf].role != ROLE_PARAM) pf++;
        while (pu < gu->nt && gu->t[pu].role != ROLE_PARAM) pu++;
        if (pf == gf->nt || pu == gu->nt) break;
        const sg_tensor *a = &gf->t[pf], *b = &gu->t[pu];
        if (strcmp(a->name, b->name) || a->offset != b->offset || a->init != b->init ||
            a->init_bound != b->init_bound) {
            CHECK(0, "%s: parameter %s at %lld, unfused %s at %lld", what, a->name,
                  (long long)a->offset, b->name, (long long)b->offset);
            break;
        }
    }
    CHECK(pf == gf->nt && pu == gu->nt, "%s: the fused and unfused plans differ in parameters",
          what);
    for (int i = 0; i < gu->n_forward && bad < 5; i++) {
        const sg_node *a = &gu->n[i];
        if (a->op != OP_ADD) continue;
        const sg_tensor *h = &gu->t[a->in[1]];
        const sg_node *c = h->producer >= 0 ? &gu->n[h->producer] : NULL;
        int fusable = sg_model_fuse(&f->cfg) && c && c->op == OP_CONV2D && c->a.conv.S == 1 &&
                      (c->a.conv.K == 1 || c->a.conv.K == 3) && h->shape[3] % 8 == 0;
        if (fusable) {
            const sg_tensor *x = &gu->t[c->in[0]];
            fusable = x->nparts ? gu->t[x->parts[0]].shape[3] % 8 == 0 &&
                                      gu->t[x->parts[1]].shape[3] % 8 == 0
                                : x->shape[3] % 8 == 0;
        }
        want += fusable;
        /* the fold: skip the block's 1x1 shortcut conv, its input's parts multiples of 8 */
        const sg_tensor *sk = &gu->t[a->in[0]];
        const sg_node *sc = sk->producer >= 0 ? &gu->n[sk->producer] : NULL;
        int fold = fusable && f->cfg.act_dt == DT_BF16 && sc && sc->op == OP_CONV2D &&
                   sc->a.conv.K == 1 && sc->a.conv.S == 1 && strstr(sk->name, ".conv_shortcut");
        if (fold) {
            const sg_tensor *xs = &gu->t[sc->in[0]];
            fold = xs->nparts ? gu->t[xs->parts[0]].shape[3] % 8 == 0 &&
                                    gu->t[xs->parts[1]].shape[3] % 8 == 0
                              : xs->shape[3] % 8 == 0;
        }
        want_sc += fold;
        const int y = tensor_named(gf, gu->t[a->out[0]].name);
        const sg_node *n = y >= 0 && gf->t[y].producer >= 0 ? &gf->n[gf->t[y].producer] : NULL;
        int ok = n && n->op == (fold ? OP_CONV2D_SC : fusable ? OP_CONV2D_ADD : OP_ADD);
        if (ok && fold) {
            for (int k = 0; k < 6; k++) /* conv2's operands, then the shortcut's */
                ok &= !strcmp(gf->t[n->in[k]].name, gu->t[k < 3 ? c->in[k] : sc->in[k - 3]].name);
            ok &= !memcmp(&n->a.conv, &c->a.conv, sizeof c->a.conv) &&
                  tensor_named(gf, sk->name) < 0; /* the shortcut's output: gone */
            const int dy = gf->t[y].grad;
            int accums = 0, reads = 0;
            for (int j = gf->n_forward; f->train && j < gf->n_forward + gf->n_backward; j++) {
                const sg_node *b = &gf->n[j];
                accums += b->op == OP_ACCUM && b->in[0] == dy;
                reads += (b->op == OP_CONV2D_BWD_DATA || b->op == OP_CONV2D_BWD_WEIGHT) &&
                         b->in[0] == dy;
            }
            if (f->train) ok &= accums == 0 && reads == (gf->t[n->in[3]].needs_grad ? 4 : 3);
        } else if (ok && fusable) {
            static const int from[4] = {0, 1, 2, -1}; /* conv operands, then the add's skip */
            for (int k = 0; k < 4; k++) {
                const char *nm = gu->t[from[k] < 0 ? a->in[0] : c->in[from[k]]].name;
                ok &= !strcmp(gf->t[n->in[k]].name, nm);
            }
            ok &= !memcmp(&n->a.conv, &c->a.conv, sizeof c->a.conv);
            const int dy = gf->t[y].grad, ds = gf->t[n->in[3]].grad;
            int accums = 0, reads = 0;
            for (int j = gf->n_forward; f->train && j < gf->n_forward + gf->n_backward; j++) {
                const sg_node *b = &gf->n[j];
                accums += b->op == OP_ACCUM && b->in[0] == dy && b->out[0] == ds;
                reads += (b->op == OP_CONV2D_BWD_DATA || b->op == OP_CONV2D_BWD_WEIGHT) &&
                         b->in[0] == dy;
            }
            /* the skip may need no gradient (the block's input from the network's first
             * conv always does: conv_in has parameters) */
            if (f->train) ok &= accums == 1 && reads == 2;
        }
        if (!ok) {
            CHECK(0, "%s: %s should be %s", what, gu->t[a->out[0]].name,
                  fold      ? "one conv2d_sc node with conv2's and the shortcut's operands"
                  : fusable ? "one conv2d_add node with its conv's operands and skip"
                            : "an add");
            bad++;
        }
    }
    int nodes = 0, folds = 0;
    for (int i = 0; i < gf->nn; i++) {
        nodes += gf->n[i].op == OP_CONV2D_ADD || gf->n[i].op == OP_CONV2D_SC;
        folds += gf->n[i].op == OP_CONV2D_SC;
    }
    CHECK(nodes == want && f->fused_residuals == want,
          "%s: %d conv2d_add and conv2d_sc nodes, the plan counts %d, the rule %d", what, nodes,
          f->fused_residuals, want);
    CHECK(folds == want_sc && f->fused_shortcuts == want_sc,
          "%s: %d conv2d_sc nodes, the plan counts %d, the rule %d", what, folds,
          f->fused_shortcuts, want_sc);
    return want;
}

/* A hand-made training plan's start: unet_tiny's config (the plan's metadata), an empty graph */
static sg_graph *hand_plan(sg_plan *p) {
    memset(p, 0, sizeof *p);
    sg_model_preset(&p->cfg, "unet_tiny");
    p->train = 1;
    sg_graph_init(&p->g);
    return &p->g;
}
/* a parameter that needs a gradient, with its gradient tensor ("grad:NAME") */
static int hand_param(sg_graph *g, const char *name, int ndim, const int64_t *shape) {
    const int t = sg_tensor_new(g, name, DT_F32, ROLE_PARAM, ndim, shape);
    char gn[SG_NAME_MAX];
    snprintf(gn, sizeof gn, "grad:%s", name);
    g->t[t].needs_grad = 1;
    g->t[t].grad = sg_tensor_new(g, gn, DT_F32, ROLE_GRAD, ndim, shape);
    return t;
}

/* A hand-made graph: x -> norm_act_temb (y marked) -> conv -> mse, and a second conv reading
 * y: one recompute node, before the first conv's weight gradient (the first backward reader
 * of y in schedule order), the second reader reads the same copy; the forward y dies at its
 * last forward reader. Unmarked, y is saved instead. */
static void test_recompute_graph(void) {
    for (int mark = 0; mark < 2; mark++) {
        sg_plan p;
        sg_graph *g = hand_plan(&p);
        int64_t xs[4] = {2, 4, 4, 8}, vs[2] = {2, 8}, cs[1] = {8}, ws[4] = {8, 3, 3, 8},
                one[1] = {1};
        int x = sg_tensor_new(g, "x", DT_F32, ROLE_INPUT, 4, xs);
        int v = sg_tensor_new(g, "v", DT_F32, ROLE_INPUT, 2, vs);
        int seed = sg_tensor_new(g, "rng_seed", DT_U64, ROLE_STATE, 1, one);
        int step = sg_tensor_new(g, "step", DT_I64, ROLE_STATE, 1, one);
        int par[6];
        const char *pn[6] = {"gamma", "beta", "w1", "b1", "w2", "b2"};
        for (int k = 0; k < 6; k++) {
            int nd = k == 2 || k == 4 ? 4 : 1;
            par[k] = hand_param(g, pn[k], nd, nd == 4 ? ws : cs);
        }
        int tgt = sg_tensor_new(g, "target", DT_F32, ROLE_INPUT, 4, xs);
        int loss = sg_tensor_new(g, "loss", DT_F32, ROLE_STATE, 1, one);
        int in6[6] = {x, v, par[0], par[1], seed, step}, o[SG_MAX_OUT] = {-1, -1, -1, -1};
        sg_op_args na = {.gn = {.groups = 2, .eps = 1e-6f, .act = SG_ACT_SILU, .p = 0.1f}};
        CHECK(sg_node_add(g, OP_NORM_ACT_TEMB, in6, 6, o, &na, "n") >= 0, "norm_act_temb: %s",
              sg_last_error());
        int y = o[0];
        g->t[y].recompute = mark;
        sg_op_args ca = {.conv = {.K = 3, .S = 1, .pad = 1, .out_dt = DT_F32}};
        int c1in[3] = {y, par[2], par[3]}, c2in[3] = {y, par[4], par[5]};
        int o1[SG_MAX_OUT] = {-1, -1, -1, -1}, o2[SG_MAX_OUT] = {-1, -1, -1, -1};
        sg_node_add(g, OP_CONV2D, c1in, 3, o1, &ca, "c1");
        sg_node_add(g, OP_CONV2D, c2in, 3, o2, &ca, "c2");
        int ain[2] = {o1[0], o2[0]}, ao[SG_MAX_OUT] = {-1, -1, -1, -1};
        sg_node_add(g, OP_ADD, ain, 2, ao, NULL, "sum");
        int min[2] = {ao[0], tgt}, mo[SG_MAX_OUT] = {loss};
        sg_op_args ma = {.mse = {.loss_scale = 1.0f, .micro_batches = 1}};
        CHECK(sg_node_add(g, OP_MSE, min, 2, mo, &ma, "mse") >= 0, "mse");
        CHECK(ad_backward(g, loss) == SG_OK, "backward: %s", sg_last_error());
        CHECK(sg_plan_layout(&p) == SG_OK, "layout: %s", sg_last_error());
        const char *what = mark ? "recompute graph (marked)" : "recompute graph (unmarked)";
        check_plan(&p, what, 1.05);
        int nodes = check_recompute(&p, what);
        CHECK(nodes == mark, "%s: %d recompute nodes", what, nodes);
        CHECK(mark ? g->t[y].role == ROLE_TEMP && g->t[y].last < g->n_forward
                   : g->t[y].role == ROLE_SAVED && g->t[y].last >= g->n_forward,
              "%s: y role %s, last %d", what, sg_role_names[g->t[y].role], g->t[y].last);
        if (mark) {
            int r = g->t[y].recomputed, readers = 0;
            for (int i = 0; i < g->nn; i++)
                for (int k = 0; k < g->n[i].nin; k++) readers += g->n[i].in[k] == r;
            CHECK(readers == 2,
                  "%s: the two conv weight gradients read the copy, nothing else does (%d "
                  "readers)",
                  what, readers);
        }
        sg_plan_free(&p);
    }
}

/* planner/op_dims.h decodes each op family's sizes from different operands forward and
 * backward. Check it against the tensors' shapes written by the shape rules (forward nodes),
 * and check that every backward node decodes exactly the sizes of its forward node. */
static int shape_is(const sg_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d) {
    return t->ndim == 4 && t->shape[0] == a && t->shape[1] == b && t->shape[2] == c &&
           t->shape[3] == d;
}

static void check_dims(const sg_plan *p, const char *what) {
    const sg_graph *g = &p->g;
    int bad = 0;
    for (int i = 0; i < g->nn && bad < 5; i++) {
        const sg_node *nd = &g->n[i], *fw = nd->fwd >= 0 ? &g->n[nd->fwd] : NULL;
        const sg_tensor *x = &g->t[nd->in[0]], *y = &g->t[nd->out[0]];
        int ok = 1;
        switch (nd->op) {
        case OP_CONV2D:
        case OP_CONV2D_ADD: {
            sg_conv_dims d = sg_conv_dims_of(g, nd);
            ok = shape_is(x, d.N, d.H, d.W, d.Ci) && shape_is(y, d.N, d.Ho, d.Wo, d.Co) &&
                 shape_is(&g->t[nd->in[1]], d.Co, d.K, d.K, d.Ci);
            break;
        }
        case OP_CONV2D_SC: { /* conv2's sizes; the shortcut's x and ws at its pixels */
            sg_conv_dims d = sg_conv_dims_of(g, nd);
            const sg_tensor *xs = &g->t[nd->in[3]];
            const int Cin = (int)xs->shape[3];
            ok = shape_is(x, d.N, d.H, d.W, d.Ci) && shape_is(y, d.N, d.H, d.W, d.Co) &&
                 shape_is(&g->t[nd->in[1]], d.Co, 3, 3, d.Ci) && d.S == 1 && d.K == 3 &&
                 shape_is(xs, d.N, d.H, d.W, Cin) && shape_is(&g->t[nd->in[4]], d.Co, 1, 1, Cin);
            break;
        }
        case OP_CONV2D_BWD_DATA:
        case OP_CONV2D_BWD_WEIGHT: {
            sg_conv_dims d = sg_conv_dims_of(g, nd), f = sg_conv_dims_of(g, fw);
            if (fw->op == OP_CONV2D_SC && nd->a.conv.K == 1) /* the folded shortcut's passes */
                f.K = 1, f.pad = 0, f.Ci = (int)g->t[fw->in[3]].shape[3];
            ok = (fw->op == OP_CONV2D || fw->op == OP_CONV2D_ADD || fw->op == OP_CONV2D_SC) &&
                 !memcmp(&d, &f, sizeof d);
            break;
        }
        case OP_UPCONV2D: {
            sg_conv_dims d = sg_upconv_dims_of(g, nd);
            ok = shape_is(x, d.N, d.H, d.W, d.Ci) && shape_is(y, d.N, 2 * d.H, 2 * d.W, d.Co) &&
                 d.Ho == 2 * d.H && d.Wo == 2 * d.W && shape_is(&g->t[nd->in[1]], d.Co, 3, 3, d.Ci);
            break;
        }
        case OP_UPCONV2D_BWD_DATA:
        case OP_UPCONV2D_BWD_WEIGHT: {
            sg_conv_dims d = sg_upconv_dims_of(g, nd), f = sg_upconv_dims_of(g, fw);
            ok = fw->op == OP_UPCONV2D && !memcmp(&d, &f, sizeof d);
            break;
        }
        case OP_LINEAR: {
            sg_linear_dims d = sg_linear_dims_of(g, nd);
            ok = x->shape[0] == d.N && x->shape[1] == d.K && y->shape[0] == d.N &&
                 y->shape[1] == d.M;
            break;
        }
        case OP_LINEAR_BWD_DATA:
        case OP_LINEAR_BWD_WEIGHT: {
            sg_linear_dims d = sg_linear_dims_of(g, nd), f = sg_linear_dims_of(g, fw);
            ok = fw->op == OP_LINEAR && !memcmp(&d, &f, sizeof d);
            break;
        }
        case OP_GROUP_NORM: {
            sg_gn_dims d = sg_gn_dims_of(g, nd);
            const sg_tensor *mean = &g->t[nd->out[1]];
            ok = shape_is(x, d.N, d.H, d.W, d.C) && d.HW == d.H * d.W && mean->shape[0] == d.N &&
                 mean->shape[1] == d.G;
            break;
        }
        case OP_GROUP_NORM_BWD: {
            sg_gn_dims d = sg_gn_dims_of(g, nd), f = sg_gn_dims_of(g, fw);
            ok = fw->op == OP_GROUP_NORM && !memcmp(&d, &f, sizeof d);
            break;
        }
        case OP_ATTENTION: {
            sg_attn_dims d = sg_attn_dims_of(g, nd);
            ok = shape_is(x, d.N, d.H, d.W, 3 * d.C) && shape_is(y, d.N, d.H, d.W, d.C) &&
                 shape_is(&g->t[nd->out[1]], d.N, d.heads, d.L, d.L);
            break;
        }
        case OP_ATTENTION_BWD: {
            sg_attn_dims d = sg_attn_dims_of(g, nd), f = sg_attn_dims_of(g, fw);
            ok = fw->op == OP_ATTENTION && !memcmp(&d, &f, sizeof d);
            break;
        }
        case OP_ADD_NC:
        case OP_UPSAMPLE2X:
        case OP_AVGPOOL2X: {
            sg_nhwc_dims d = sg_nhwc_dims_of(g, nd);
            ok = shape_is(x, d.N, d.H, d.W, d.C) && d.HW == d.H * d.W;
            break;
        }
        case OP_ADD_NC_BWD:
        case OP_UPSAMPLE2X_BWD:
        case OP_AVGPOOL2X_BWD: {
            sg_nhwc_dims d = sg_nhwc_dims_of(g, nd), f = sg_nhwc_dims_of(g, fw);
            ok = !memcmp(&d, &f, sizeof d);
            break;
        }
        default:
            break; /* no size decoding beyond element counts */
        }
        if (!ok) {
            CHECK(0, "%s: node %d (%s -> %s) decodes sizes that do not fit its tensors", what, i,
                  sg_ops[nd->op].name, y->name);
            bad++;
        }
    }
}

/* the op list's kind column against where the builder put each node: forward nodes first,
 * then the backward pass (each micro-batch's, with gradient accumulation), then the optimizer */
static void check_kinds(const sg_plan *p, const char *what) {
    const sg_graph *g = &p->g;
    const int span = g->n_forward + g->n_backward;
    const int K = g->micro_batches > 1 ? g->micro_batches : 1;
    int bad = 0;
    for (int i = 0; i < g->nn && bad < 3; i++) {
        sg_op op = g->n[i].op;
        const int j = i < K * span ? i % span : i; /* the place in its micro-batch */
        int fwd = j < g->n_forward, bwd = !fwd && j < span;
        if (sg_op_is_forward(op) != fwd || (bwd && sg_op_is_optimizer(op)) ||
            (!fwd && !bwd && !sg_op_is_optimizer(op))) {
            CHECK(0, "%s: node %d (%s) has kind %d where the schedule has a %s node", what, i,
                  sg_ops[op].name, (int)sg_ops[op].kind,
                  fwd   ? "forward"
                  : bwd ? "backward"
                        : "optimizer");
            bad++;
        }
    }
}

/* The bf16 weight copy: in a bf16 plan every conv / linear forward and backward-data node reads
 * a ROLE_PARAM_BF16 copy of a parameter, laid out at half that parameter's offset in the
 * parameter region (the region "params_bf16": as many elements as "params", half the bytes);
 * the training step's optimizer is adamw_ema_bf16 writing that region. An fp32 plan has no
 * copy, no byte for one, and the plain adamw_ema. */
static void check_weight_copy(const sg_plan *p, const char *what) {
    const sg_graph *g = &p->g;
    const int bf16 = p->cfg.act_dt == DT_BF16, pr = p->io.params, cr = p->io.params_bf16;
    int64_t po = 0, n = 0, co = 0;
    CHECK(sg_plan_bf16_copy(p, &po, &n, &co) == bf16 && (cr >= 0) == bf16, "%s: %s copy", what,
          bf16 ? "no" : "a");
    if (!bf16) {
        CHECK(p->role_bytes[ROLE_PARAM_BF16] == 0, "%s: fp32 with %lld bytes of copy", what,
              (long long)p->role_bytes[ROLE_PARAM_BF16]);
    } else {
        CHECK(po == g->t[pr].offset && co == g->t[cr].offset && n == sg_numel(&g->t[cr]) &&
                  2 * g->t[cr].bytes == g->t[pr].bytes &&
                  p->role_bytes[ROLE_PARAM_BF16] == SG_ALIGN_UP(g->t[cr].bytes, SG_ALIGN),
              "%s: the copy's region does not mirror the parameters'", what);
    }
    int bad = 0, opt = -1;
    for (int i = 0; i < g->nn && bad < 3; i++) {
        const sg_node *nd = &g->n[i];
        if (nd->op == OP_ADAMW_EMA || nd->op == OP_ADAMW_EMA_BF16) opt = i;
        if (nd->op != OP_CONV2D && nd->op != OP_CONV2D_ADD && nd->op != OP_CONV2D_SC &&
            nd->op != OP_CONV2D_BWD_DATA && nd->op != OP_LINEAR && nd->op != OP_LINEAR_BWD_DATA)
            continue;
        /* (conv2d_sc: conv2's weights here, the shortcut's checked alike just below) */
        if (nd->op == OP_CONV2D_SC) {
            const sg_tensor *s = &g->t[nd->in[4]];
            const int sok = bf16 ? s->role == ROLE_PARAM_BF16 && s->copy_of >= 0 &&
                                       s->dtype == DT_BF16 &&
                                       2 * (s->offset - co) == g->t[s->copy_of].offset - po
                                 : s->role == ROLE_PARAM && s->dtype == DT_F32;
            if (!sok) {
                CHECK(0, "%s: node %d (conv2d_sc) reads shortcut weights %s", what, i, s->name);
                bad++;
            }
        }
        const sg_tensor *w = &g->t[nd->in[1]];
        const int ok = bf16
                           ? w->role == ROLE_PARAM_BF16 && w->copy_of >= 0 && w->dtype == DT_BF16 &&
                                 2 * (w->offset - co) == g->t[w->copy_of].offset - po &&
                                 2 * w->bytes == g->t[w->copy_of].bytes
                           : w->role == ROLE_PARAM && w->dtype == DT_F32;
        if (!ok) {
            CHECK(0, "%s: node %d (%s) reads weights %s", what, i, sg_ops[nd->op].name, w->name);
            bad++;
        }
        /* nothing converts weights inside the step: no scratch for them (backward-data takes
         * none for that: a conv's none at all, a linear's only the fp32 partials of the group
         * the CUDA backend may run it in; a 3x3 forward none, a GEMM forward only its fp32
         * output tile) */
        const int64_t ws = sg_node_workspace_bytes(g, nd);
        const int gemm = nd->op == OP_LINEAR ||
                         ((nd->op == OP_CONV2D || nd->op == OP_CONV2D_ADD) && nd->a.conv.K == 1);
        int64_t allowed = gemm ? (int64_t)SG_WS_GEMM_OUT_ELEMS * 4 : 0;
        if (nd->op == OP_LINEAR_BWD_DATA) {
            const sg_linear_dims d = sg_linear_dims_of(g, nd);
            allowed = sg_ws_linear_group_bwd_data(d.N, d.K);
        }
        if (bf16 && ws > allowed) {
            CHECK(0, "%s: node %d (%s) takes %lld bytes of workspace", what, i, sg_ops[nd->op].name,
                  (long long)ws);
            bad++;
        }
    }
    if (p->train)
        CHECK(opt >= 0 && g->n[opt].op == (bf16 ? OP_ADAMW_EMA_BF16 : OP_ADAMW_EMA) &&
                  (!bf16 || g->n[opt].out[5] == cr),
              "%s: the optimizer does not write the copy", what);
}

/* Every built-in model in both precisions, trained as one pass, as 2 micro-batches, as one of
 * 2 data-parallel ranks, and forward only (sampling): the plan's invariants, and an arena at
 * exactly its lower bound (the search at the bound reaches it for all of them; a placement that
 * leaves a single aligned block over it fails here). */
static void test_builtin_models(void) {
    static const char *const variants[] = {"train", "2 micro-batches", "2 ranks", "forward"};
    for (int m = 0; sg_model_names[m]; m++)
        for (int pv = 0; pv < 3; pv++) /* fp32, bf16 (unfused, the default), bf16 --fuse 1 */
            for (int v = 0; v < SG_ARRAY_LEN(variants); v++) {
                const int prec = pv > 0, fz = pv == 2;
                sg_model_cfg cfg;
                CHECK(sg_model_preset(&cfg, sg_model_names[m]) == SG_OK, "preset");
                cfg.act_dt = prec ? DT_BF16 : DT_F32;
                cfg.fuse = fz ? 1 : SG_FUSE_AUTO;
                cfg.grad_accum = v == 1 ? 2 : 1;
                cfg.ranks = v == 2 ? 2 : 0;
                const int train = v != 3;
                sg_plan p;
                char what[96];
                snprintf(what, sizeof what, "%s/%s/%s", sg_model_names[m],
                         fz     ? "bf16 fused"
                         : prec ? "bf16"
                                : "fp32",
                         variants[v]);
                int rc = sg_plan_build(&p, &cfg, train);
                CHECK(rc == SG_OK, "%s: %s", what, sg_last_error());
                if (rc == SG_OK) {
                    check_plan(&p, what, 1.0);
                    CHECK(p.arena_bytes == p.lower_bound_bytes,
                          "%s: arena %lld, %lld over the lower bound %lld (%s)", what,
                          (long long)p.arena_bytes,
                          (long long)(p.arena_bytes - p.lower_bound_bytes),
                          (long long)p.lower_bound_bytes, p.placement);
                    check_dims(&p, what);
                    check_kinds(&p, what); /* forward plans: the sampler's update last */
                    check_weight_copy(&p, what);
                    if (train) check_grads(&p, what);
                    /* one micro-batch's span (with 2, each count is twice) */
                    const int recomputes = train && v != 1 ? check_recompute(&p, what) : 0;
                    const int fused = check_fused(&p, what);
                    if (v != 1) {
                        /* fused bf16 fuses every normalisation but the one before the 3- or
                         * 1-channel conv_out; unfused none. Either way each is recomputed in
                         * the backward pass (fused: for the weight gradients alone) */
                        int norms = 0;
                        for (int i = 0; i < p.g.nn; i++)
                            norms += p.g.n[i].op == OP_NORM_ACT || p.g.n[i].op == OP_NORM_ACT_TEMB;
                        CHECK(fused == (fz ? norms - 1 : 0), "%s: %d of %d normalisations fused",
                              what, fused, norms);
                        /* and each upsample before a conv (unfused; fused, it is upconv2d) */
                        int nups = 0, natt = 0; /* and every attention's P (--store-attn 0) */
                        for (int i = 0; i < p.g.n_forward; i++)
                            nups += p.g.n[i].op == OP_UPSAMPLE2X,
                                natt += p.g.n[i].op == OP_ATTENTION;
                        if (train)
                            CHECK(recomputes == norms + (cfg.resample_conv ? nups : 0) + natt,
                                  "%s: %d recompute nodes", what, recomputes);
                        /* the residual epilogue, against the unfused plan: every block's add is
                         * in its conv's store fused (each conv2 and to_out is fusable), none
                         * unfused */
                        sg_model_cfg c0 = cfg;
                        c0.fuse = 0;
                        sg_plan u;
                        if (sg_plan_build(&u, &c0, train) == SG_OK) {
                            const int res = check_residuals(&p, &u, what);
                            /* fused: every decoder upsample conv (channels multiples of 8 in
                             * every built-in model) is one upconv2d node, and no upsample2x
                             * is left; unfused keeps the pairs */
                            int upc = 0, ups = 0, ups0 = 0;
                            for (int i = 0; i < p.g.n_forward; i++)
                                upc += p.g.n[i].op == OP_UPCONV2D,
                                    ups += p.g.n[i].op == OP_UPSAMPLE2X;
                            for (int i = 0; i < u.g.n_forward; i++)
                                ups0 += u.g.n[i].op == OP_UPSAMPLE2X;
                            const int conv_ups = cfg.resample_conv ? ups0 : 0;
                            CHECK(fz ? upc == conv_ups && ups == ups0 - conv_ups
                                     : upc == 0 && ups == ups0,
                                  "%s: %d upconv2d, %d upsample2x (unfused %d)", what, upc, ups,
                                  ups0);
                            int adds = 0;
                            for (int i = 0; i < p.g.n_forward; i++) adds += p.g.n[i].op == OP_ADD;
                            CHECK(fz ? adds == 0 && res > 0 : res == 0 && adds > 0,
                                  "%s: %d add nodes, %d residuals fused", what, adds, res);
                            sg_plan_free(&u);
                        } else
                            CHECK(0, "%s --fuse 0: %s", what, sg_last_error());
                    }
                }
                if (rc == SG_OK && !strcmp(sg_model_names[m], "unet_cifar") && v == 0) {
                    CHECK(p.io.n_params == 35746307, "unet_cifar has %lld parameters",
                          (long long)p.io.n_params);
                    /* fused, the 3 upsample convs are upconv2d: 4 taps per output pixel
                     * instead of 9 in each of their three passes (0.338 TFLOP less) */
                    const double lo = fz ? 4.40e12 : 4.70e12, hi = fz ? 4.50e12 : 4.86e12;
                    CHECK(p.flops > lo && p.flops < hi, "unet_cifar %s step = %.3f TFLOP", what,
                          p.flops / 1e12);
                    /* unfused, each residual add's first gradient copy shares dy's bytes
                     * (the second takes them in place: dy dies there) */
                    if (!fz)
                        CHECK(p.copies_shared == 28, "unet_cifar %s: %d shared copies, want 28",
                              what, p.copies_shared);
                }
                sg_plan_free(&p);
            }
}

/* Gradient accumulation (train_step.c): micro-batches 1..K-1 are copies of micro-batch 0's
 * forward and backward nodes on their own activations, the same parameters and gradients;
 * every write of theirs into a gradient or the loss accumulates; the loss scale is 1/K; the
 * random ops' slices are rank K + k; the arena is that of one micro-batch's plan. */
static void check_micro_batches(const sg_plan *p, const sg_plan *one, int K, const char *what) {
    const sg_graph *g = &p->g;
    const int span = g->n_forward + g->n_backward;
    int bad = 0;
    CHECK(g->micro_batches == K && g->nn == K * span + (one->g.nn - span), "%s: %d nodes", what,
          g->nn);
    for (int i = 0; i < g->nn && bad < 3; i++) {
        const sg_node *nd = &g->n[i], *n0 = &g->n[i % span];
        const int k = i < K * span ? i / span : 0;
        int ok = nd->micro == k;
        if (k > 0) {
            ok &= nd->op == n0->op && nd->nin == n0->nin && (nd->fwd < 0) == (n0->fwd < 0) &&
                  (nd->fwd < 0 || nd->fwd == n0->fwd + k * span);
            for (int j = 0; j < nd->nin; j++) {
                const sg_tensor *x = &g->t[nd->in[j]];
                ok &= persistent(x->role) ? nd->in[j] == n0->in[j]
                                          : nd->in[j] != n0->in[j] && x->twin == n0->in[j];
            }
            for (int o = 0; o < nd->nout; o++) {
                const sg_tensor *y = &g->t[nd->out[o]];
                const unsigned bits = sg_accum_bits(nd, o), bits0 = sg_accum_bits(n0, o);
                if (persistent(y->role)) /* a gradient or the loss: always accumulated */
                    ok &= nd->out[o] == n0->out[o] && (bits & 1u) &&
                          (y->role == ROLE_GRAD || nd->out[o] == p->io.loss);
                else
                    ok &= y->twin == n0->out[o] && bits == bits0;
            }
        }
        if (nd->op == OP_MSE)
            ok &= nd->a.mse.micro_batches == K && nd->a.mse.loss_scale == (float)(1.0 / K);
        if (nd->op == OP_GATHER_BATCH)
            ok &= nd->a.gather.batch == K * nd->a.gather.N &&
                  sg_node_slice(g, nd, 0) == (uint64_t)k &&
                  sg_node_slice(g, nd, 3) == (uint64_t)(3 * K + k);
        if (!ok) {
            CHECK(0, "%s: node %d (%s, micro-batch %d) is not micro-batch 0's node %d copied", what,
                  i, sg_ops[nd->op].name, k, i % span);
            bad++;
        }
    }
    CHECK(p->arena_bytes == one->arena_bytes && p->lower_bound_bytes == one->lower_bound_bytes,
          "%s: arena %lld (bound %lld), one micro-batch's plan %lld (%lld)", what,
          (long long)p->arena_bytes, (long long)p->lower_bound_bytes, (long long)one->arena_bytes,
          (long long)one->lower_bound_bytes);
}

static void test_grad_accum_plans(void) {
    static const struct {
        const char *model;
        int batch, K, bf16;
    } cases[] = {{"unet_tiny", 4, 2, 0},
                 {"unet_tiny", 6, 3, 1},
                 {"unet_fmnist", 8, 4, 0},
                 {"unet_adm64", 4, 2, 1}};
    for (int c = 0; c < SG_ARRAY_LEN(cases); c++) {
        sg_model_cfg cfg;
        sg_model_preset(&cfg, cases[c].model);
        cfg.batch = cases[c].batch, cfg.act_dt = cases[c].bf16 ? DT_BF16 : DT_F32;
        sg_model_cfg micro = cfg;
        micro.batch = cfg.batch / cases[c].K;
        cfg.grad_accum = cases[c].K;
        char what[96];
        snprintf(what, sizeof what, "%s batch %d as %d micro-batches", cases[c].model, cfg.batch,
                 cases[c].K);
        sg_plan p, one;
        int rc = sg_plan_build(&p, &cfg, 1), rc1 = sg_plan_build(&one, &micro, 1);
        CHECK(rc == SG_OK && rc1 == SG_OK, "%s: %s", what, sg_last_error());
        if (rc == SG_OK && rc1 == SG_OK) {
            check_plan(&p, what, 1.05);
            check_dims(&p, what);
            check_grads(&p, what);
            check_kinds(&p, what);
            check_fused(&p, what); /* each micro-batch's copies point at their own nodes */
            check_micro_batches(&p, &one, cases[c].K, what);
        }
        /* the verifier sees micro-batch 1: one of its tensors moved onto a live one fails */
        if (rc == SG_OK && c == 0) {
            const sg_graph *g = &p.g;
            int a = -1, b = -1;
            for (int t = 0; t < g->nt && a < 0; t++)
                if (g->t[t].twin >= 0 && g->t[t].role == ROLE_SAVED && g->t[t].bytes) a = t;
            for (int t = 0; a >= 0 && t < g->nt && b < 0; t++)
                if (t != a && g->t[t].twin >= 0 && !g->t[t].nparts && g->t[t].bytes &&
                    g->t[t].first <= g->t[a].last && g->t[t].last >= g->t[a].first &&
                    p.buffer_of[t] != p.buffer_of[a])
                    b = t;
            CHECK(a >= 0 && b >= 0, "%s: two live micro-batch-1 tensors", what);
            if (a >= 0 && b >= 0) {
                const int64_t off = p.g.t[b].offset;
                p.g.t[b].offset = p.g.t[a].offset;
                CHECK(sg_plan_verify(&p) == SG_ERR, "%s: verifier accepted %s on %s", what,
                      g->t[b].name, g->t[a].name);
                p.g.t[b].offset = p.g.t[p.io.grads].offset; /* onto the gradients */
                CHECK(sg_plan_verify(&p) == SG_ERR, "%s: verifier accepted %s on the gradients",
                      what, g->t[b].name);
                p.g.t[b].offset = off;
                CHECK(sg_plan_verify(&p) == SG_OK, "%s: restored plan: %s", what, sg_last_error());
                /* two parameters on one another (the persistent ones are checked apart) */
                int p0 = -1, p1 = -1;
                for (int t = 0; t < g->nt && p1 < 0; t++)
                    if (g->t[t].role == ROLE_PARAM && !g->t[t].region) {
                        if (p0 < 0)
                            p0 = t;
                        else
                            p1 = t;
                    }
                const int64_t off1 = p.g.t[p1].offset;
                p.g.t[p1].offset = p.g.t[p0].offset + SG_ALIGN * (g->t[p0].bytes > SG_ALIGN);
                CHECK(sg_plan_verify(&p) == SG_ERR, "%s: verifier accepted %s on %s", what,
                      g->t[p1].name, g->t[p0].name);
                p.g.t[p1].offset = off1;
            }
        }
        sg_plan_free(&p);
        sg_plan_free(&one);
    }
    /* K that does not divide the batch, over ranks too, and out of range: clear errors */
    sg_model_cfg c;
    sg_model_preset(&c, "unet_tiny");
    sg_plan p;
    c.grad_accum = 3;
    CHECK(sg_plan_build(&p, &c, 1) == SG_ERR &&
              strstr(sg_last_error(), "does not split into 3 micro-batches"),
          "batch 4 in 3 micro-batches: %s", sg_last_error());
    sg_plan_free(&p);
    c.grad_accum = 2, c.ranks = 4;
    CHECK(sg_plan_build(&p, &c, 1) == SG_ERR && strstr(sg_last_error(), "over 4 rank(s)"),
          "batch 4 over 4 ranks in 2 micro-batches: %s", sg_last_error());
    sg_plan_free(&p);
    c.grad_accum = 0, c.ranks = 0;
    CHECK(sg_plan_build(&p, &c, 1) == SG_ERR, "grad_accum 0 accepted");
    sg_plan_free(&p);
    c.grad_accum = 3; /* a forward plan has no micro-batches: any sampler batch goes */
    CHECK(sg_plan_build(&p, &c, 0) == SG_OK && p.cfg.grad_accum == 1, "forward plan: %s",
          sg_last_error());
    sg_plan_free(&p);
}

static void test_random_unets(uint64_t *rng) {
    double worst = 1.0;
    int at_bound = 0;
    for (int it = 0; it < 40; it++) {
        sg_model_cfg c;
        sg_model_preset(&c, "unet_tiny");
        c.nlevels = 1 + (int)(sg_test_next(rng) % 3);
        c.groups = 1 << (sg_test_next(rng) % 3);
        c.ch = c.groups * (1 + (int)(sg_test_next(rng) % 3)) * 4;
        for (int i = 0; i < c.nlevels; i++) c.ch_mult[i] = 1 + (int)(sg_test_next(rng) % 3);
        c.nrb = 1 + (int)(sg_test_next(rng) % 2);
        c.img = 8 << (sg_test_next(rng) % 2);
        c.data_h = c.data_w = c.img - 2 * (int)(sg_test_next(rng) % 2);
        c.nattn = (int)(sg_test_next(rng) % 2);
        c.attn_res[0] = c.img >> (sg_test_next(rng) % c.nlevels);
        c.heads = 1, c.head_ch = 0;
        c.resample_conv = (int)(sg_test_next(rng) % 2);
        c.down_pad = (int)(sg_test_next(rng) % 2) ? SG_DOWN_PAD_SAME : SG_DOWN_PAD_SYMMETRIC;
        c.dropout = sg_test_next(rng) % 2 ? 0.1f : 0.0f;
        c.batch = 1 + (int)(sg_test_next(rng) % 3);
        c.act_dt = sg_test_next(rng) % 2 ? DT_BF16 : DT_F32;
        c.in_ch = 1 + (int)(sg_test_next(rng) % 3);
        c.fuse = (int)(sg_test_next(rng) % 3) - 1; /* automatic, off, on */
        sg_plan p;
        char what[64];
        snprintf(what, sizeof what, "random unet %d", it);
        int rc = sg_plan_build(&p, &c, 1);
        CHECK(rc == SG_OK, "%s: %s", what, sg_last_error());
        if (rc == SG_OK) {
            check_plan(&p, what, 1.05);
            const double r = (double)p.arena_bytes / (double)p.lower_bound_bytes;
            worst = r > worst ? r : worst;
            at_bound += p.arena_bytes == p.lower_bound_bytes;
            check_dims(&p, what);
            check_grads(&p, what);
            check_recompute(&p, what);
            check_fused(&p, what);
            sg_model_cfg c0 = c;
            c0.fuse = 0;
            sg_plan u;
            if (sg_plan_build(&u, &c0, 1) == SG_OK) {
                check_residuals(&p, &u, what);
                sg_plan_free(&u);
            } else
                CHECK(0, "%s --fuse 0: %s", what, sg_last_error());
        }
        sg_plan_free(&p);
    }
    printf("random unets: %d of 40 at the lower bound, worst arena / lower bound = %.4f\n",
           at_bound, worst);
}

/* Random graphs: a pool of NHWC activations; each step applies a random op to random
 * members (convs, norms, elementwise, adds, concats, resampling), then an MSE loss, backward,
 * and layout. The placement must stay valid; the ratio is reported, not bounded. */
static void test_random_graphs(uint64_t *rng) {
    double worst = 1.0;
    for (int it = 0; it < 60; it++) {
        sg_plan p;
        sg_graph *g = hand_plan(&p);
        int N = 2, H = 8, C = 4;
        int64_t xs[4] = {N, H, H, C};
        int pool[64], np = 0;
        pool[np++] = sg_tensor_new(g, "x", DT_F32, ROLE_INPUT, 4, xs);
        int nparam = 0, err = 0;
        int steps = 5 + (int)(sg_test_next(rng) % 25);
        for (int s = 0; s < steps && !err; s++) {
            int a = pool[sg_test_next(rng) % (uint64_t)np];
            int b = pool[sg_test_next(rng) % (uint64_t)np];
            const sg_tensor *ta = &g->t[a];
            int64_t Ca = ta->shape[3];
            char nm[32];
            snprintf(nm, sizeof nm, "n%d", s);
            int kind = (int)(sg_test_next(rng) % 7), out[SG_MAX_OUT] = {-1, -1, -1, -1};
            if (kind == 0 || (kind == 1 && ta->shape[1] < 2)) { /* conv */
                int K = sg_test_next(rng) % 2 ? 3 : 1, S = 1;
                int64_t ws[4] = {4 + (int64_t)(sg_test_next(rng) % 3) * 4, K, K, Ca},
                        bs[1] = {ws[0]};
                char pn[48];
                snprintf(pn, sizeof pn, "p%d.w", nparam);
                int w = hand_param(g, pn, 4, ws);
                snprintf(pn, sizeof pn, "p%d.b", nparam++);
                int bb = hand_param(g, pn, 1, bs);
                int in[3] = {a, w, bb};
                sg_op_args ca = {.conv = {.K = K, .S = S, .pad = K / 2, .out_dt = ta->dtype}};
                err = sg_node_add(g, OP_CONV2D, in, 3, out, &ca, nm) < 0;
            } else if (kind == 1) {
                int in[1] = {a};
                err = sg_node_add(g, OP_AVGPOOL2X, in, 1, out, NULL, nm) < 0;
            } else if (kind == 2) {
                int in[1] = {a};
                err = sg_node_add(g, OP_SILU, in, 1, out, NULL, nm) < 0;
            } else if (kind == 3 && ta->shape[1] <= 8) {
                int in[1] = {a};
                err = sg_node_add(g, OP_UPSAMPLE2X, in, 1, out, NULL, nm) < 0;
            } else if (kind == 4 && b != a && g->t[b].shape[1] == ta->shape[1] &&
                       g->t[b].shape[3] == Ca && !ta->nparts && !g->t[b].nparts) {
                int in[2] = {a, b};
                err = sg_node_add(g, OP_ADD, in, 2, out, NULL, nm) < 0;
            } else if (kind == 5 && b != a && g->t[b].shape[1] == ta->shape[1] && !ta->nparts &&
                       !g->t[b].nparts) {
                int in[2] = {a, b};
                err = sg_node_add(g, OP_CONCAT, in, 2, out, NULL, nm) < 0;
            } else {
                int in[1] = {a};
                err = sg_node_add(g, OP_SILU, in, 1, out, NULL, nm) < 0;
            }
            if (!err && np < 64) pool[np++] = out[0];
        }
        CHECK(!err, "random graph %d build: %s", it, sg_last_error());
        if (err || nparam == 0) {
            sg_plan_free(&p);
            continue;
        }
        /* loss on the last conv-derived tensor: reduce every pool member that needs a grad by
         * adding a loss per member would need an op; use the last tensor that needs one */
        int last = -1;
        for (int k = np - 1; k >= 0; k--)
            if (g->t[pool[k]].needs_grad && !g->t[pool[k]].nparts) {
                last = pool[k];
                break;
            }
        if (last < 0) {
            sg_plan_free(&p);
            continue;
        }
        int64_t one[1] = {1};
        int loss = sg_tensor_new(g, "loss", DT_F32, ROLE_STATE, 1, one);
        int tgt = sg_tensor_new(g, "target", DT_F32, ROLE_INPUT, g->t[last].ndim, g->t[last].shape);
        int in[2] = {last, tgt}, out[SG_MAX_OUT] = {loss};
        sg_op_args ma = {.mse = {.loss_scale = 1.0f, .micro_batches = 1}};
        CHECK(sg_node_add(g, OP_MSE, in, 2, out, &ma, "mse") >= 0, "mse");
        CHECK(ad_backward(g, loss) == SG_OK, "backward: %s", sg_last_error());
        char what[32];
        snprintf(what, sizeof what, "random graph %d", it);
        CHECK(sg_plan_layout(&p) == SG_OK, "%s layout: %s", what, sg_last_error());
        check_plan(&p, what, 1.5);
        double r = (double)p.arena_bytes / (double)p.lower_bound_bytes;
        if (r > worst) worst = r;
        sg_plan_free(&p);
    }
    printf("random graphs: worst arena / lower bound = %.4f\n", worst);
}

/* The verifier must catch a broken plan: move a live activation onto another. */
static void test_verifier_catches_overlap(void) {
    sg_model_cfg c;
    sg_model_preset(&c, "unet_tiny");
    sg_plan p;
    CHECK(sg_plan_build(&p, &c, 1) == SG_OK, "build");
    const sg_graph *g = &p.g;
    int a = p.io.xt, b = -1;
    for (int t = 0; t < g->nt; t++)
        if (t != a && !g->t[t].nparts && g->t[t].role == ROLE_SAVED &&
            g->t[t].first <= g->t[a].last && g->t[t].last >= g->t[a].first &&
            p.buffer_of[t] != p.buffer_of[a]) {
            b = t;
            break;
        }
    CHECK(b >= 0, "found a tensor live with x_t");
    if (b >= 0) {
        p.g.t[b].offset = p.g.t[a].offset;
        CHECK(sg_plan_verify(&p) == SG_ERR, "verifier accepted overlapping %s", g->t[b].name);
        p.g.t[b].offset += 1;
        CHECK(sg_plan_verify(&p) == SG_ERR, "verifier accepted a misaligned tensor");
    }
    sg_plan_free(&p);
}

/* The generic pointwise backward (silu_mul: two inputs): one silu_mul_bwd node reading
 * {dy, a, b} and writing {grad a, grad b}; an input that needs no gradient gets a scratch
 * output instead, never a gradient tensor. */
static void test_pointwise_backward(void) {
    for (int b_needs = 0; b_needs < 2; b_needs++) {
        sg_graph g;
        sg_graph_init(&g);
        int64_t s[2] = {3, 5}, one[1] = {1};
        int a = sg_tensor_new(&g, "a", DT_F32, ROLE_PARAM, 2, s);
        int b = sg_tensor_new(&g, "b", DT_F32, b_needs ? ROLE_PARAM : ROLE_INPUT, 2, s);
        g.t[a].needs_grad = 1, g.t[a].grad = sg_tensor_new(&g, "grad:a", DT_F32, ROLE_GRAD, 2, s);
        if (b_needs) {
            g.t[b].needs_grad = 1;
            g.t[b].grad = sg_tensor_new(&g, "grad:b", DT_F32, ROLE_GRAD, 2, s);
        }
        int tgt = sg_tensor_new(&g, "target", DT_F32, ROLE_INPUT, 2, s);
        int loss = sg_tensor_new(&g, "loss", DT_F32, ROLE_STATE, 1, one);
        int in[2] = {a, b}, out[SG_MAX_OUT] = {-1, -1, -1, -1};
        CHECK(sg_node_add(&g, OP_SILU_MUL, in, 2, out, NULL, "gate") >= 0, "silu_mul node");
        int y = out[0], min[2] = {y, tgt}, mout[SG_MAX_OUT] = {loss};
        sg_op_args ma = {.mse = {.loss_scale = 1.0f, .micro_batches = 1}};
        CHECK(sg_node_add(&g, OP_MSE, min, 2, mout, &ma, "mse") >= 0, "mse node");
        CHECK(ad_backward(&g, loss) == SG_OK, "backward: %s", sg_last_error());
        int found = 0;
        for (int i = 0; i < g.nn; i++) {
            const sg_node *nd = &g.n[i];
            if (nd->op != OP_SILU_MUL_BWD) continue;
            found++;
            CHECK(nd->nin == 3 && nd->in[0] == g.t[y].grad && nd->in[1] == a && nd->in[2] == b &&
                      nd->out[0] == g.t[a].grad && nd->fwd == 0,
                  "silu_mul_bwd reads {dy, a, b} and writes grad a");
            if (b_needs)
                CHECK(nd->out[1] == g.t[b].grad, "silu_mul_bwd writes grad b");
            else
                CHECK(g.t[nd->out[1]].role == ROLE_TEMP && g.t[nd->out[1]].producer == i,
                      "b needs no gradient: its slot is a scratch output");
        }
        CHECK(found == 1, "%d silu_mul_bwd nodes, want 1", found);
        sg_graph_free(&g);
    }
}

static void test_op_table_and_shapes(void) {
    for (int op = 0; op < OP_COUNT; op++)
        CHECK(sg_ops[op].name && sg_ops[op].shape && sg_ops[op].flops && sg_ops[op].nin > 0 &&
                  sg_ops[op].nout > 0,
              "op %d has an incomplete table row", op);
    /* a pointwise op's backward op reads dy and its inputs and writes one gradient per input */
    for (int op = 0; op < OP_COUNT; op++) {
        int b = sg_ops[op].bwd_op;
        CHECK(b < 0 || (b < OP_COUNT && sg_ops[b].nin == sg_ops[op].nin + 1 &&
                        sg_ops[b].nout == sg_ops[op].nin && sg_ops[op].backward),
              "op %s: bwd_op %d does not fit it", sg_ops[op].name, b);
    }
    test_pointwise_backward();
    sg_graph g;
    sg_graph_init(&g);
    int64_t xs[4] = {2, 9, 7, 5}, ws3[4] = {6, 3, 3, 5}, bs[1] = {6}, ws1[4] = {6, 1, 1, 5};
    int x = sg_tensor_new(&g, "x", DT_F32, ROLE_INPUT, 4, xs);
    int w3 = sg_tensor_new(&g, "w3", DT_F32, ROLE_PARAM, 4, ws3);
    int w1 = sg_tensor_new(&g, "w1", DT_F32, ROLE_PARAM, 4, ws1);
    int b = sg_tensor_new(&g, "b", DT_F32, ROLE_PARAM, 1, bs);
    int out[SG_MAX_OUT];
    struct {
        int w, K, S;
        int64_t H, W;
    } cs[] = {{w3, 3, 1, 9, 7}, {w3, 3, 2, 5, 4}, {w1, 1, 1, 9, 7}, {w1, 1, 2, 5, 4}};
    for (int i = 0; i < 4; i++) {
        int in[3] = {x, cs[i].w, b};
        sg_op_args ca = {
            .conv = {.K = cs[i].K, .S = cs[i].S, .pad = cs[i].K / 2, .out_dt = DT_F32}};
        out[0] = -1;
        int n = sg_node_add(&g, OP_CONV2D, in, 3, out, &ca, "conv");
        CHECK(n >= 0 && g.t[out[0]].shape[1] == cs[i].H && g.t[out[0]].shape[2] == cs[i].W &&
                  g.t[out[0]].shape[3] == 6,
              "conv K=%d S=%d shape", cs[i].K, cs[i].S);
    }
    { /* mismatched weight: 3x3 weight with a K=1 conv */
        int in[3] = {x, w3, b};
        sg_op_args ca = {.conv = {.K = 1, .S = 1, .pad = 0, .out_dt = DT_F32}};
        out[0] = -1;
        CHECK(sg_node_add(&g, OP_CONV2D, in, 3, out, &ca, "bad") < 0, "bad conv accepted");
        ca = (sg_op_args){.conv = {.K = 3, .S = 1, .pad = 1, .out_dt = DT_I32}};
        CHECK(sg_node_add(&g, OP_CONV2D, in, 3, out, &ca, "bad") < 0, "i32 conv output accepted");
    }
    { /* TensorFlow SAME (top/left 0) on the stride-2 3x3 conv: even sizes halve, an odd size
       * would need 2 rows of bottom padding and is refused, as is 0 padding at stride 1 and
       * padding beyond K/2 */
        int64_t es[4] = {2, 8, 6, 5};
        int xe = sg_tensor_new(&g, "xe", DT_F32, ROLE_INPUT, 4, es);
        int in[3] = {xe, w3, b};
        sg_op_args ca = {.conv = {.K = 3, .S = 2, .pad = 0, .out_dt = DT_F32}};
        out[0] = -1;
        CHECK(sg_node_add(&g, OP_CONV2D, in, 3, out, &ca, "same") >= 0 &&
                  g.t[out[0]].shape[1] == 4 && g.t[out[0]].shape[2] == 3,
              "SAME stride-2 conv shape");
        int in2[3] = {x, w3, b};
        out[0] = -1;
        CHECK(sg_node_add(&g, OP_CONV2D, in2, 3, out, &ca, "odd") < 0, "SAME on odd H");
        sg_op_args cb = {.conv = {.K = 3, .S = 1, .pad = 0, .out_dt = DT_F32}},
                   cc = {.conv = {.K = 3, .S = 2, .pad = 2, .out_dt = DT_F32}};
        out[0] = -1;
        CHECK(sg_node_add(&g, OP_CONV2D, in, 3, out, &cb, "s1") < 0, "pad 0 at stride 1");
        out[0] = -1;
        CHECK(sg_node_add(&g, OP_CONV2D, in, 3, out, &cc, "p2") < 0, "pad 2 accepted");
    }
    { /* group norm: 5 channels into 2 groups is an error, into 5 fine */
        int64_t cs5[1] = {5};
        int gm = sg_tensor_new(&g, "g", DT_F32, ROLE_PARAM, 1, cs5);
        int in[3] = {x, gm, gm};
        sg_op_args ia = {.gn = {.groups = 2, .eps = 1e-6f}},
                   ib = {.gn = {.groups = 5, .eps = 1e-6f}};
        int o2[SG_MAX_OUT] = {-1, -1, -1, -1};
        CHECK(sg_node_add(&g, OP_GROUP_NORM, in, 3, o2, &ia, "gn") < 0, "gn 5/2 accepted");
        o2[0] = o2[1] = o2[2] = -1;
        CHECK(sg_node_add(&g, OP_GROUP_NORM, in, 3, o2, &ib, "gn") >= 0 &&
                  g.t[o2[1]].shape[0] == 2 && g.t[o2[1]].shape[1] == 5,
              "gn stats shape");
    }
    { /* avgpool needs even sizes; upsample doubles; concat adds channels */
        int in[1] = {x};
        out[0] = -1;
        CHECK(sg_node_add(&g, OP_AVGPOOL2X, in, 1, out, NULL, "pool") < 0, "odd pool");
        out[0] = -1;
        CHECK(sg_node_add(&g, OP_UPSAMPLE2X, in, 1, out, NULL, "up") >= 0 &&
                  g.t[out[0]].shape[1] == 18 && g.t[out[0]].shape[2] == 14,
              "upsample shape");
        int in2[2] = {x, x};
        out[0] = -1;
        CHECK(sg_node_add(&g, OP_CONCAT, in2, 2, out, NULL, "cat") >= 0 &&
                  g.t[out[0]].shape[3] == 10 && g.t[out[0]].bytes == 0 && g.t[out[0]].nparts == 2,
              "concat is virtual with 10 channels");
    }
    { /* attention: 3C channels, heads divide C */
        int64_t qs[4] = {2, 4, 4, 12};
        int q = sg_tensor_new(&g, "qkv", DT_F32, ROLE_INPUT, 4, qs);
        int in[1] = {q};
        sg_op_args ia = {.attn = {.heads = 2}}, ib = {.attn = {.heads = 3}};
        int o2[SG_MAX_OUT] = {-1, -1, -1, -1};
        CHECK(sg_node_add(&g, OP_ATTENTION, in, 1, o2, &ia, "attn") >= 0 &&
                  g.t[o2[0]].shape[3] == 4 && g.t[o2[1]].shape[1] == 2 && g.t[o2[1]].shape[2] == 16,
              "attention shapes");
        o2[0] = o2[1] = -1;
        CHECK(sg_node_add(&g, OP_ATTENTION, in, 1, o2, &ib, "attn") < 0, "4 ch / 3 heads");
    }
    { /* linear */
        int64_t as[2] = {3, 7}, lw[2] = {5, 7}, lb[1] = {5};
        int a = sg_tensor_new(&g, "a", DT_F32, ROLE_INPUT, 2, as);
        int w = sg_tensor_new(&g, "lw", DT_F32, ROLE_PARAM, 2, lw);
        int bb = sg_tensor_new(&g, "lb", DT_F32, ROLE_PARAM, 1, lb);
        int in[3] = {a, w, bb};
        out[0] = -1;
        CHECK(sg_node_add(&g, OP_LINEAR, in, 3, out, NULL, "lin") >= 0 &&
                  g.t[out[0]].shape[0] == 3 && g.t[out[0]].shape[1] == 5,
              "linear shape");
        int in2[3] = {x, w, bb};
        out[0] = -1;
        CHECK(sg_node_add(&g, OP_LINEAR, in2, 3, out, NULL, "lin") < 0, "4-D linear");
    }
    sg_graph_free(&g);
}

static void test_bad_configs(void) {
    sg_model_cfg c;
    CHECK(sg_model_preset(&c, "no_such_model") == SG_ERR, "unknown model accepted");
    sg_model_preset(&c, "unet_cifar");
    CHECK(sg_model_flag(&c, "--ch-mult", "1,x") < 0, "bad ch-mult accepted");
    CHECK(sg_model_flag(&c, "--batch", "0") < 0, "batch 0 accepted");
    CHECK(sg_model_flag(&c, "--precision", "fp16") < 0, "fp16 accepted");
    CHECK(sg_model_flag(&c, "--frobnicate", "1") == 0, "unknown flag claimed");
    CHECK(sg_model_flag(&c, "--groups", "7") == 1, "groups");
    sg_plan p;
    CHECK(sg_plan_build(&p, &c, 1) == SG_ERR, "128 channels in 7 groups accepted");
    sg_plan_free(&p);
}

/* A plain copy shares its source's bytes only where neither is written while the other is
 * still read (plan_layout.c's merge_copies). Without silu: s = a + b; the add's backward copies
 * ds into db (first: shared) and da (in place: ds dies there). With it: v = s + u, u = silu(a).
 * v's add copies dv into du and ds (in place); s's add copies ds into db and da (in place);
 * then silu's backward accumulates into da, while db waits for b's convolution and while it
 * reads du: sharing either copy would let that write reach a value still to be read, so both
 * move their bytes. check_plan's symbolic run holds every read to its own value (planted:
 * merge_copies sharing every copy fails it). */
static void test_shared_copies(void) {
    for (int with_silu = 0; with_silu < 2; with_silu++) {
        sg_plan p;
        sg_graph *g = hand_plan(&p);
        int64_t xs[4] = {2, 8, 8, 4}, ws[4] = {4, 3, 3, 4}, bs[1] = {4}, one[1] = {1};
        const int x = sg_tensor_new(g, "x", DT_F32, ROLE_INPUT, 4, xs);
        int conv[2], err = 0;
        for (int k = 0; k < 2; k++) {
            char nm[16];
            snprintf(nm, sizeof nm, "w%d", k);
            const int w = hand_param(g, nm, 4, ws);
            snprintf(nm, sizeof nm, "b%d", k);
            const int b = hand_param(g, nm, 1, bs);
            int in[3] = {x, w, b}, out[SG_MAX_OUT] = {-1, -1, -1, -1};
            sg_op_args ca = {.conv = {.K = 3, .S = 1, .pad = 1, .out_dt = DT_F32}};
            snprintf(nm, sizeof nm, "conv%d", k);
            err |= sg_node_add(g, OP_CONV2D, in, 3, out, &ca, nm) < 0;
            conv[k] = out[0];
        }
        int u = -1, s = -1, v = -1;
        if (with_silu) {
            int in[1] = {conv[0]}, out[SG_MAX_OUT] = {-1, -1, -1, -1};
            err |= sg_node_add(g, OP_SILU, in, 1, out, NULL, "u") < 0;
            u = out[0];
        }
        {
            int in[2] = {conv[0], conv[1]}, out[SG_MAX_OUT] = {-1, -1, -1, -1};
            err |= sg_node_add(g, OP_ADD, in, 2, out, NULL, "s") < 0;
            s = v = out[0];
        }
        if (with_silu) {
            int in[2] = {s, u}, out[SG_MAX_OUT] = {-1, -1, -1, -1};
            err |= sg_node_add(g, OP_ADD, in, 2, out, NULL, "v") < 0;
            v = out[0];
        }
        CHECK(!err, "shared copies graph: %s", sg_last_error());
        const int loss = sg_tensor_new(g, "loss", DT_F32, ROLE_STATE, 1, one);
        const int tgt = sg_tensor_new(g, "target", DT_F32, ROLE_INPUT, 4, xs);
        int in[2] = {v, tgt}, out[SG_MAX_OUT] = {loss};
        sg_op_args ma = {.mse = {.loss_scale = 1.0f, .micro_batches = 1}};
        CHECK(sg_node_add(g, OP_MSE, in, 2, out, &ma, "mse") >= 0, "mse");
        CHECK(ad_backward(g, loss) == SG_OK, "backward: %s", sg_last_error());
        const char *what = with_silu ? "shared copies (a read twice)" : "shared copies";
        CHECK(sg_plan_layout(&p) == SG_OK, "%s layout: %s", what, sg_last_error());
        check_plan(&p, what, 1.5);
        CHECK(p.copies_shared == !with_silu, "%s: %d shared copies, want %d", what, p.copies_shared,
              !with_silu);
        int moved = 0;
        for (int i = 0; i < g->nn; i++)
            if (g->n[i].op == OP_ACCUM && !sg_accum_bits(&g->n[i], 0))
                moved += p.buffer_of[g->n[i].in[0]] != p.buffer_of[g->n[i].out[0]];
        CHECK(moved == 2 * with_silu, "%s: %d copies move bytes, want %d", what, moved,
              2 * with_silu);
        sg_plan_free(&p);
    }
}

/* --store-norm (sg_model_cfg.store_norm): unfused, no normalisation is recomputed (each stored
 * y lives from its forward node into the backward pass, the weight gradients read it) and the
 * arena grows; fused, the fused ones are still recomputed for their weight gradients
 * (check_fused) and only the stored one (before conv_out) is kept; the config records it (the
 * plan hash differs), a plan without it is the plan of before. */
static int norm_recomputes(const sg_graph *g) {
    int n = 0;
    for (int i = 0; i < g->nn; i++)
        n += g->n[i].op == OP_NORM_ACT_APPLY || g->n[i].op == OP_NORM_ACT_TEMB_APPLY;
    return n;
}
/* unet_cifar batch 128 bf16, fused or not: the configuration the memory switches are told by */
static sg_model_cfg cifar_b128_bf16(int fuse) {
    sg_model_cfg c;
    sg_model_preset(&c, "unet_cifar");
    c.act_dt = DT_BF16, c.batch = 128, c.fuse = fuse;
    return c;
}
static void test_store_norm(void) {
    for (int fz = 0; fz < 2; fz++) {
        sg_model_cfg c = cifar_b128_bf16(fz);
        sg_plan p0, p1;
        SG_ASSERT(!sg_plan_build(&p0, &c, 1));
        c.store_norm = 1;
        CHECK(!sg_plan_build(&p1, &c, 1), "store_norm, fuse %d: %s", fz, sg_last_error());
        char what[64];
        snprintf(what, sizeof what, "unet_cifar b128 bf16 fuse %d store_norm", fz);
        check_plan(&p1, what, 1.0);
        check_recompute(&p1, what);
        const int fused = check_fused(&p1, what), n0 = norm_recomputes(&p0.g),
                  n1 = norm_recomputes(&p1.g);
        int norms = 0, stored_read = 0;
        for (int i = 0; i < p1.g.n_forward; i++) {
            const sg_node *nd = &p1.g.n[i];
            if (nd->op != OP_NORM_ACT && nd->op != OP_NORM_ACT_TEMB) continue;
            norms++;
            const sg_tensor *y = &p1.g.t[nd->out[0]];
            /* a stored y: kept (saved) and read by a backward node itself */
            for (int j = p1.g.n_forward; y->vnorm < 0 && j < p1.g.nn; j++)
                for (int k = 0; k < p1.g.n[j].nin; k++)
                    stored_read += p1.g.n[j].in[k] == nd->out[0];
        }
        CHECK(n0 == norms && n1 == fused && (fz ? fused == norms - 1 : fused == 0),
              "%s: %d normalisations, %d fused, recomputed %d (without it %d)", what, norms, fused,
              n1, n0);
        CHECK(stored_read >= norms - fused && p1.hash != p0.hash &&
                  (fz ? p1.arena_bytes <= p0.arena_bytes + (64 << 20)
                      : p1.arena_bytes > p0.arena_bytes + ((int64_t)512 << 20)),
              "%s: %d backward reads of stored normalisations, arena %lld (without it %lld)", what,
              stored_read, (long long)p1.arena_bytes, (long long)p0.arena_bytes);
        char j0[2048], j1[2048];
        c.store_norm = 0;
        sg_model_json(&c, j0, sizeof j0);
        c.store_norm = 1;
        sg_model_json(&c, j1, sizeof j1);
        CHECK(!strstr(j0, "store_norm") && strstr(j1, "\"store_norm\":1"),
              "the config JSON: %s / %s", j0, j1);
        printf("store_norm, fuse %d: %d of %d normalisations recomputed (without it %d), arena "
               "%.2f GiB (without it %.2f)\n",
               fz, n1, norms, n0, (double)p1.arena_bytes / (1 << 30),
               (double)p0.arena_bytes / (1 << 30));
        sg_plan_free(&p0), sg_plan_free(&p1);
    }
    sg_model_cfg c;
    sg_model_preset(&c, "unet_tiny");
    CHECK(sg_model_flag(&c, "--store-norm", "2") == -1 &&
              sg_model_flag(&c, "--store-norm", "1") == 1 && c.store_norm == 1,
          "--store-norm: %s", sg_last_error());
}

/* --store-attn (sg_model_cfg.store_attn): 0, the default, recomputes every attention's P in the
 * backward pass (attention_p on qkv, just before the attention's backward, which reads the copy;
 * the forward's P dies at its node) and the arena shrinks (unet_cifar batch 128 bf16: every P of
 * the encoder and decoder was live at the peak, 5 x 32 MiB); 1 keeps P, and its plan is the plan
 * of before (a config without the key reads as 1: graph/weights.c), so the config records 0. */
static void test_store_attn(void) {
    for (int fz = 0; fz < 2; fz++) {
        sg_model_cfg c = cifar_b128_bf16(fz);
        sg_plan p0, p1;
        CHECK(!sg_plan_build(&p0, &c, 1), "store_attn 0, fuse %d: %s", fz, sg_last_error());
        c.store_attn = 1;
        SG_ASSERT(!sg_plan_build(&p1, &c, 1));
        char what[64];
        snprintf(what, sizeof what, "unet_cifar b128 bf16 fuse %d store_attn 0", fz);
        check_plan(&p0, what, 1.0);
        check_recompute(&p0, what);
        int attn = 0, ap0 = 0, ap1 = 0, wired = 0;
        for (int i = 0; i < p0.g.nn; i++) {
            const sg_node *nd = &p0.g.n[i];
            attn += nd->op == OP_ATTENTION;
            if (nd->op != OP_ATTENTION_P) continue;
            ap0++;
            /* the copy of its forward's P, read by the attention backward right after it */
            const sg_node *f = &p0.g.n[nd->fwd], *b = &p0.g.n[i + 1];
            wired += f->op == OP_ATTENTION && p0.g.t[f->out[1]].recomputed == nd->out[0] &&
                     p0.g.t[f->out[1]].last == nd->fwd && b->op == OP_ATTENTION_BWD &&
                     b->in[2] == nd->out[0] && p0.g.t[nd->out[0]].last == i + 1;
        }
        for (int i = 0; i < p1.g.nn; i++) ap1 += p1.g.n[i].op == OP_ATTENTION_P;
        CHECK(attn == 6 && ap0 == attn && wired == attn && ap1 == 0,
              "%s: %d attentions, %d attention_p (%d wired), with --store-attn 1 %d", what, attn,
              ap0, wired, ap1);
        CHECK(p0.hash != p1.hash && p0.arena_bytes + ((int64_t)150 << 20) < p1.arena_bytes,
              "%s: arena %lld, with --store-attn 1 %lld", what, (long long)p0.arena_bytes,
              (long long)p1.arena_bytes);
        char j0[2048], j1[2048];
        c.store_attn = 0;
        sg_model_json(&c, j0, sizeof j0);
        c.store_attn = 1;
        sg_model_json(&c, j1, sizeof j1);
        CHECK(strstr(j0, "\"store_attn\":0") && !strstr(j1, "store_attn"),
              "the config JSON: %s / %s", j0, j1);
        printf("store_attn, fuse %d: %d of %d attention P recomputed, arena %.1f MiB (with "
               "--store-attn 1 %.1f)\n",
               fz, ap0, attn, (double)p0.arena_bytes / (1 << 20),
               (double)p1.arena_bytes / (1 << 20));
        sg_plan_free(&p0), sg_plan_free(&p1);
    }
    sg_model_cfg c;
    sg_model_preset(&c, "unet_tiny");
    CHECK(c.store_attn == 0 && sg_model_flag(&c, "--store-attn", "2") == -1 &&
              sg_model_flag(&c, "--store-attn", "1") == 1 && c.store_attn == 1,
          "--store-attn: %s", sg_last_error());
}

/* sg_node_bytes (tools/bench's memory columns), restated from the shapes on unet_cifar batch 8
 * bf16, unfused and fused: a conv reads x, its weights' bf16 copy and the bias and writes y; a
 * concatenation moves nothing and its reader reads both parts; a fused conv reads its virtual
 * operand's sources (the norm's input, its statistics and affine parameters), not the
 * operand; an accumulating output is read and written; gather_batch reads the batch's pixels,
 * not the dataset; and the fused plan moves less than the unfused one. */
static int64_t shape_bytes(const sg_graph *g, int t) {
    const sg_tensor *x = &g->t[t];
    int64_t n = 1;
    for (int d = 0; d < x->ndim; d++) n *= x->shape[d];
    return n * sg_dtype_size(x->dtype);
}
static void test_node_bytes(void) {
    double total[2] = {0, 0};
    for (int fz = 0; fz < 2; fz++) {
        sg_model_cfg c;
        sg_model_preset(&c, "unet_cifar");
        c.act_dt = DT_BF16, c.batch = 8, c.fuse = fz;
        sg_plan p;
        SG_ASSERT(!sg_plan_build(&p, &c, 1));
        const sg_graph *g = &p.g;
        int convs = 0, concats = 0, concat_reads = 0, fused = 0, accums = 0, gathers = 0;
        int concat_writes = 0, elided = 0;
        for (int i = 0; i < g->nn; i++) {
            const sg_node *nd = &g->n[i];
            const int64_t b = sg_node_bytes(g, i);
            total[fz] += (double)b;
            CHECK(b >= 0, "fuse %d node %d (%s): %lld bytes", fz, i, sg_ops[nd->op].name,
                  (long long)b);
            const sg_tensor *x = nd->nin ? &g->t[nd->in[0]] : NULL;
            if (nd->op == OP_CONCAT) {
                CHECK(b == 0, "fuse %d: concat node %d moves %lld bytes", fz, i, (long long)b);
                concats++;
            } else if (nd->op == OP_CONV2D && !sg_tensor_virtual(x) && !nd->accum) {
                const int64_t want = shape_bytes(g, nd->in[0]) + shape_bytes(g, nd->in[1]) +
                                     shape_bytes(g, nd->in[2]) + shape_bytes(g, nd->out[0]);
                CHECK(b == want && g->t[nd->in[1]].dtype == DT_BF16,
                      "fuse %d: conv node %d moves %lld bytes, want %lld", fz, i, (long long)b,
                      (long long)want);
                convs++;
            } else if (nd->op == OP_CONV2D && x->nparts == 2 && x->vnorm < 0) {
                const int64_t want = shape_bytes(g, x->parts[0]) + shape_bytes(g, x->parts[1]) +
                                     shape_bytes(g, nd->in[1]) + shape_bytes(g, nd->in[2]) +
                                     shape_bytes(g, nd->out[0]);
                CHECK(b == want, "fuse %d: conv node %d on a concatenation moves %lld, want %lld",
                      fz, i, (long long)b, (long long)want);
                concat_reads++;
            }
            if (sg_op_is_conv(nd->op) && sg_op_is_forward(nd->op) && x->vnorm >= 0) {
                /* the norm's inputs (x, [v,] gamma, beta, ..) and its mean and rstd, not y */
                const sg_node *nn = &g->n[x->vnorm];
                int64_t want = 0;
                for (int k = 0; k < nn->nin; k++) {
                    const sg_tensor *s = &g->t[nn->in[k]];
                    if (s->nparts)
                        want += shape_bytes(g, s->parts[0]) + shape_bytes(g, s->parts[1]);
                    else
                        want += shape_bytes(g, nn->in[k]);
                }
                for (int k = 1; k < nn->nout; k++) want += shape_bytes(g, nn->out[k]);
                for (int k = 1; k < nd->nin; k++) want += shape_bytes(g, nd->in[k]);
                want += shape_bytes(g, nd->out[0]);
                CHECK(b == want, "fuse %d: fused conv node %d (%s) moves %lld, want %lld", fz, i,
                      sg_ops[nd->op].name, (long long)b, (long long)want);
                fused++;
            }
            if (nd->op == OP_ACCUM && !nd->accum &&
                g->t[nd->in[0]].offset == g->t[nd->out[0]].offset) {
                /* a copy into its own input's memory: the backends skip it */
                CHECK(b == 0, "fuse %d: elided copy node %d moves %lld", fz, i, (long long)b);
                elided++;
            }
            if (nd->op == OP_ACCUM && nd->accum && !g->t[nd->out[0]].nparts) {
                const int64_t want = shape_bytes(g, nd->in[0]) + 2 * shape_bytes(g, nd->out[0]);
                CHECK(b == want, "fuse %d: accumulating node %d moves %lld, want %lld", fz, i,
                      (long long)b, (long long)want);
                accums++;
            }
            /* a node writing a concatenation (a skip input's gradient): each part, twice where
             * that part accumulates; inputs here plain and distinct */
            int plain = nd->op != OP_CONCAT && nd->nout == 1 && g->t[nd->out[0]].nparts == 2;
            for (int k = 0; k < nd->nin && plain; k++) {
                plain &= !sg_tensor_virtual(&g->t[nd->in[k]]);
                for (int q = 0; q < k; q++) plain &= nd->in[q] != nd->in[k];
            }
            if (plain) {
                const sg_tensor *y = &g->t[nd->out[0]];
                int64_t want = 0;
                for (int k = 0; k < nd->nin; k++) want += shape_bytes(g, nd->in[k]);
                for (int q = 0; q < 2; q++)
                    want += shape_bytes(g, y->parts[q]) * (1 + ((nd->accum >> q) & 1u));
                CHECK(b == want,
                      "fuse %d: node %d (%s) writing a concatenation moves %lld, want "
                      "%lld",
                      fz, i, sg_ops[nd->op].name, (long long)b, (long long)want);
                concat_writes++;
            }
            if (nd->op == OP_GATHER_BATCH) {
                const sg_tensor *y = &g->t[nd->out[0]];
                int64_t want = shape_bytes(g, nd->out[0]) + shape_bytes(g, nd->out[0]) /
                                                                sg_dtype_size(y->dtype) *
                                                                sg_dtype_size(x->dtype);
                for (int k = 1; k < nd->nin; k++) want += shape_bytes(g, nd->in[k]);
                CHECK(b == want && b < g->t[nd->in[0]].bytes,
                      "gather_batch moves %lld, want %lld (the dataset %lld)", (long long)b,
                      (long long)want, (long long)g->t[nd->in[0]].bytes);
                gathers++;
            }
        }
        CHECK(convs >= (fz ? 3 : 10) && concats > 0 && gathers == 1 && accums > 0 &&
                  concat_writes > 0 && elided >= p.copies_shared && p.copies_shared > 0 &&
                  (fz ? fused > 10 : fused == 0 && concat_reads > 0),
              "fuse %d: checked %d convs, %d concats, %d convs on concatenations, %d fused, %d "
              "accumulating, %d writing a concatenation, %d gathers, %d elided copies (%d "
              "shared)",
              fz, convs, concats, concat_reads, fused, accums, concat_writes, gathers, elided,
              p.copies_shared);
        sg_plan_free(&p);
    }
    /* a concatenation's gradient written with one part accumulating (unet_cifar's skips get
     * their first contribution through the concatenation): a = conv(x), b = conv(x),
     * d = conv(concat(a, b)), e = d + a, mse(e): e's backward contributes to a first, so d's
     * data gradient accumulates into a's part and writes b's */
    sg_plan hp;
    sg_graph *g = hand_plan(&hp);
    const int64_t xs[4] = {2, 8, 8, 4}, ws[4] = {4, 3, 3, 4}, w2s[4] = {4, 3, 3, 8}, bs[1] = {4};
    int t[2], out[SG_MAX_OUT] = {-1, -1, -1, -1};
    const int x = sg_tensor_new(g, "x", DT_F32, ROLE_INPUT, 4, xs);
    sg_op_args ca = {.conv = {.K = 3, .S = 1, .pad = 1, .out_dt = DT_F32}};
    for (int k = 0; k < 2; k++) {
        char wn[16], bn[16], yn[16];
        snprintf(wn, sizeof wn, "w%d", k), snprintf(bn, sizeof bn, "b%d", k);
        snprintf(yn, sizeof yn, "y%d", k);
        const int in[3] = {x, hand_param(g, wn, 4, ws), hand_param(g, bn, 1, bs)};
        SG_ASSERT(sg_node_add(g, OP_CONV2D, in, 3, out, &ca, yn) >= 0);
        t[k] = out[0], out[0] = -1; /* -1: a new output */
    }
    const int cin[2] = {t[0], t[1]};
    SG_ASSERT(sg_node_add(g, OP_CONCAT, cin, 2, out, NULL, "c") >= 0);
    const int din[3] = {out[0], hand_param(g, "w2", 4, w2s), hand_param(g, "b2", 1, bs)};
    out[0] = -1;
    SG_ASSERT(sg_node_add(g, OP_CONV2D, din, 3, out, &ca, "d") >= 0);
    const int ein[2] = {out[0], t[0]};
    out[0] = -1;
    SG_ASSERT(sg_node_add(g, OP_ADD, ein, 2, out, NULL, "e") >= 0);
    const int64_t one[1] = {1};
    const int loss = sg_tensor_new(g, "loss", DT_F32, ROLE_STATE, 1, one);
    const int min[2] = {out[0], sg_tensor_new(g, "target", DT_F32, ROLE_INPUT, 4, xs)};
    int mout[SG_MAX_OUT] = {loss};
    sg_op_args ma = {.mse = {.loss_scale = 1.0f, .micro_batches = 1}};
    SG_ASSERT(sg_node_add(g, OP_MSE, min, 2, mout, &ma, "mse") >= 0);
    SG_ASSERT(ad_backward(g, loss) == SG_OK);
    int found = 0;
    for (int i = 0; i < g->nn; i++) {
        const sg_node *nd = &g->n[i];
        if (nd->op != OP_CONV2D_BWD_DATA || !g->t[nd->out[0]].nparts) continue;
        const sg_tensor *y = &g->t[nd->out[0]];
        int64_t want = 0;
        for (int k = 0; k < nd->nin; k++) want += shape_bytes(g, nd->in[k]);
        want += 2 * shape_bytes(g, y->parts[0]) + shape_bytes(g, y->parts[1]);
        CHECK(nd->accum == 1u && sg_node_bytes(g, i) == want,
              "the data gradient into a concatenation (accum bits %u) moves %lld, want %lld",
              nd->accum, (long long)sg_node_bytes(g, i), (long long)want);
        found++;
    }
    CHECK(found == 1, "%d data gradients into a concatenation", found);
    sg_plan_free(&hp);
    CHECK(total[1] < total[0] && total[0] > 1e9,
          "unet_cifar b8 bf16 moves %.3f GB a step unfused, %.3f fused", total[0] / 1e9,
          total[1] / 1e9);
    printf("node bytes: unet_cifar b8 bf16 moves at least %.3f GB a step unfused, %.3f fused\n",
           total[0] / 1e9, total[1] / 1e9);
}

/* The weight gradient's chunks (common/sg_workspace.h): ceil(P / SG_WS_WGRAD_PIX), raised toward
 * SG_WS_WGRAD_MIN_CHUNKS where P is small, within the bytes bound, never below the plain count. */
static int64_t wgrad_chunks_plain(int64_t P) {
    const int64_t c = (P + SG_WS_WGRAD_PIX - 1) / SG_WS_WGRAD_PIX;
    return c < 1 ? 1 : c > SG_WS_WGRAD_MAX_CHUNKS ? SG_WS_WGRAD_MAX_CHUNKS : c;
}
static void test_wgrad_chunks(void) {
    const int64_t k3 = 9;
    static const struct {
        int64_t P, nw, want;
        const char *what;
    } cases[] = {
        {2048, 256 * k3 * 256, 7, "unet_cifar batch 128, 4x4, 256 -> 256 (one chunk before)"},
        {2048, 256 * k3 * 512, 7, "4x4, 512 -> 256: 7 x 4.7 MB, within the bytes bound"},
        {2048, 256 * k3 * 1024, 3, "4x4, 1024 -> 256: the bytes bound, 3 x 9.4 MB"},
        {8192, 256 * k3 * 256, 7, "8x8, 256 -> 256 (two chunks before)"},
        {32768, 256 * k3 * 512, 8, "16x16: eight chunks as before"},
        {131072, 128 * k3 * 128, 32, "32x32: the most"},
        {1 << 22, 3 * k3 * 128, 32, "a huge P: still the most"},
        {128, 256 * k3 * 256, 1, "unet_cifar batch 8, 4x4: fewer pixels than a chunk's least"},
        {300, 64, 2, "chunks of at least SG_WS_WGRAD_MIN_PIX pixels"},
        {2048, 768 * k3 * 768, 1, "a wide layer (21 MB of dw) keeps its one chunk"},
        {8192, 768 * k3 * 768, 2, "... or its two"},
        {0, 64, 1, "no pixels"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int64_t c = sg_ws_wgrad_chunks(cases[i].P, cases[i].nw);
        CHECK(c == cases[i].want, "sg_ws_wgrad_chunks(%lld, %lld) = %lld, want %lld: %s",
              (long long)cases[i].P, (long long)cases[i].nw, (long long)c, (long long)cases[i].want,
              cases[i].what);
    }
    /* the rule's promises over a grid of shapes */
    for (int64_t P = 1; P <= (1 << 20); P = P * 3 / 2 + 1)
        for (int64_t nw = 27; nw <= (int64_t)1 << 24; nw *= 5) {
            const int64_t c = sg_ws_wgrad_chunks(P, nw), c0 = wgrad_chunks_plain(P);
            CHECK(c >= c0 && c <= SG_WS_WGRAD_MAX_CHUNKS,
                  "P %lld nw %lld: %lld chunks (plain %lld)", (long long)P, (long long)nw,
                  (long long)c, (long long)c0);
            if (c > c0) { /* raised: small chunks' pixels and the bytes stay bounded */
                CHECK(c <= SG_WS_WGRAD_MIN_CHUNKS && (c - 1) * SG_WS_WGRAD_MIN_PIX < P &&
                          c * nw * 4 <= SG_WS_WGRAD_SPREAD_BYTES,
                      "P %lld nw %lld: raised to %lld chunks", (long long)P, (long long)nw,
                      (long long)c);
            }
        }
}

int main(void) {
    uint64_t rng = 12345;
    test_wgrad_chunks();
    test_node_bytes();
    test_shared_copies();
    test_op_table_and_shapes();
    test_recompute_graph();
    test_bad_configs();
    test_builtin_models();
    test_random_unets(&rng);
    test_random_graphs(&rng);
    test_verifier_catches_overlap();
    test_grad_accum_plans();
    test_store_norm();
    test_store_attn();
    return sg_test_end();
}
