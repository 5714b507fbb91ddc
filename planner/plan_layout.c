/* plan_layout.c — the layout of a built graph: lifetimes, in-place reuse, arena placement, the
 * lower bound, the plan hash, and verification. It never builds graphs (plan_build.c does,
 * through unet.c and train_step.c).
 *
 * Lifetimes come from the one fixed schedule (the node order). A virtual tensor (a skip
 * concatenation) has no storage: each use of it is a use of both parts, so the parts stay
 * alive as long as the concatenation is needed and consumers read them through two pointers.
 *
 * Placement of the dynamic region is offline best fit: buffers are taken in some order and
 * each goes into the smallest gap (among the buffers already placed whose lifetimes overlap
 * its own) that fits it, else on top. Several orderings are tried; the smallest arena wins.
 * The lower bound is the most bytes live at any point of the schedule: no placement can do
 * better, so arena / lower bound measures the placement's waste.
 */
#include "planner/plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_persistent(sg_role r) {
    return sg_role_persistent(r);
}

static void touch(sg_graph *g, int t, int i) {
    sg_tensor *x = &g->t[t];
    if (x->first < 0 || i < x->first) x->first = i;
    if (i > x->last) x->last = i;
    for (int p = 0; p < x->nparts; p++) touch(g, x->parts[p], i);
}

static int find(int *uf, int x) {
    while (uf[x] != x) x = uf[x] = uf[uf[x]];
    return x;
}

/* saved activations: forward tensors that a backward node reads (micro-batch by micro-batch:
 * micro-batch k's forward and backward are micro-batch 0's moved by k spans, ir.h) */
static void classify_roles(sg_graph *g) {
    const int span = g->n_forward + g->n_backward;
    const int K = g->micro_batches > 1 ? g->micro_batches : 1;
    for (int m = 0; m < K; m++) {
        const int base = m * span;
        for (int i = base + g->n_forward; i < base + span; i++)
            for (int k = 0; k < g->n[i].nin; k++) {
                sg_tensor *x = &g->t[g->n[i].in[k]];
                int stack[3] = {g->n[i].in[k], -1, -1}, ns = 1;
                if (x->nparts) stack[0] = x->parts[0], stack[1] = x->parts[1], ns = 2;
                for (int s = 0; s < ns; s++) {
                    sg_tensor *y = &g->t[stack[s]];
                    if (y->role == ROLE_TEMP && y->producer >= base &&
                        y->producer < base + g->n_forward)
                        y->role = ROLE_SAVED;
                }
            }
    }
}

typedef struct {
    int id;
    int first, last;
    int64_t size, offset;
} buf_t;

static int cmp_size(const void *a, const void *b) {
    const buf_t *x = a, *y = b;
    if (x->size != y->size) return x->size < y->size ? 1 : -1;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    return x->id - y->id;
}
static int cmp_area(const void *a, const void *b) {
    const buf_t *x = a, *y = b;
    double ax = (double)x->size * (x->last - x->first + 1);
    double ay = (double)y->size * (y->last - y->first + 1);
    if (ax != ay) return ax < ay ? 1 : -1;
    return cmp_size(a, b);
}
static int cmp_life(const void *a, const void *b) {
    const buf_t *x = a, *y = b;
    int lx = x->last - x->first, ly = y->last - y->first;
    if (lx != ly) return lx < ly ? 1 : -1;
    return cmp_size(a, b);
}
static int cmp_first(const void *a, const void *b) {
    const buf_t *x = a, *y = b;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    return cmp_size(a, b);
}
static int cmp_offset(const void *a, const void *b) {
    const buf_t *x = *(buf_t *const *)a, *y = *(buf_t *const *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return 0;
}

/* Best-fit placement of bufs (in the given order); returns the region's size. */
static int64_t place(buf_t *bufs, int n, buf_t **scratch) {
    int64_t top = 0;
    for (int i = 0; i < n; i++) {
        buf_t *b = &bufs[i];
        int nc = 0;
        for (int j = 0; j < i; j++)
            if (bufs[j].first <= b->last && b->first <= bufs[j].last) scratch[nc++] = &bufs[j];
        qsort(scratch, (size_t)nc, sizeof *scratch, cmp_offset);
        int64_t best = -1, best_gap = INT64_MAX, cursor = 0;
        for (int j = 0; j < nc; j++) {
            int64_t gap = scratch[j]->offset - cursor;
            if (gap >= b->size && gap < best_gap) best = cursor, best_gap = gap;
            int64_t end = scratch[j]->offset + scratch[j]->size;
            if (end > cursor) cursor = end;
        }
        b->offset = best >= 0 ? best : cursor;
        if (b->offset + b->size > top) top = b->offset + b->size;
    }
    return top;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ull;
    return h;
}

/* workspace: the largest any node's kernel needs, and cuBLAS's */
static int add_workspace(sg_graph *g) {
    int64_t ws = 256;
    for (int i = 0; i < g->nn; i++) {
        int64_t b = sg_node_workspace_bytes(g, &g->n[i]);
        if (b > ws) ws = b;
    }
    int64_t wsn[1] = {ws}, cbn[1] = {SG_CUBLAS_WORKSPACE_BYTES};
    if (sg_find_tensor(g, "workspace") < 0 &&
        (sg_tensor_new(g, "workspace", DT_U8, ROLE_WORKSPACE, 1, wsn) < 0 ||
         sg_tensor_new(g, "cublas_workspace", DT_U8, ROLE_WORKSPACE, 1, cbn) < 0))
        return SG_ERR;
    return SG_OK;
}

static void lifetimes(sg_graph *g) {
    for (int i = 0; i < g->nn; i++) {
        for (int k = 0; k < g->n[i].nin; k++) touch(g, g->n[i].in[k], i);
        for (int k = 0; k < g->n[i].nout; k++) touch(g, g->n[i].out[k], i);
    }
    for (int t = 0; t < g->nt; t++)
        if (is_persistent(g->t[t].role)) g->t[t].first = 0, g->t[t].last = g->nn - 1;
}

/* in-place reuse: an elementwise op's output takes its input's memory when the input dies at
 * that op and the output is freshly written there */
static int merge_inplace(sg_plan *p) {
    const sg_graph *g = &p->g;
    p->buffer_of = malloc(sizeof(int) * (size_t)g->nt);
    if (!p->buffer_of) return sg_set_error("out of host memory");
    for (int t = 0; t < g->nt; t++) p->buffer_of[t] = t;
    for (int i = 0; i < g->nn; i++) {
        const sg_node *nd = &g->n[i];
        if (!sg_ops[nd->op].inplace || sg_accum_bits(nd, 0)) continue;
        const sg_tensor *x = &g->t[nd->in[0]], *y = &g->t[nd->out[0]];
        if (x->nparts || y->nparts || is_persistent(x->role) || is_persistent(y->role)) continue;
        if (x->last != i || y->first != i || x->bytes != y->bytes || x->dtype != y->dtype) continue;
        p->buffer_of[find(p->buffer_of, nd->out[0])] = find(p->buffer_of, nd->in[0]);
        p->inplace_merges++;
    }
    for (int t = 0; t < g->nt; t++) p->buffer_of[t] = find(p->buffer_of, t);
    return SG_OK;
}

/* The bf16 weight copies (ROLE_PARAM_BF16) mirror the parameter region at half its size from
 * `start`: the copy of the parameter at byte o of that region at byte o/2 (so element j of the
 * region "params_bf16" is the copy of element j of "params", and each copy is SG_ALIGN/2-
 * aligned); any tensor of the role that copies nothing follows. Returns the end. */
static int64_t place_bf16_copies(sg_graph *g, int64_t start) {
    int64_t base = INT64_MAX, end = 0; /* the parameter region (placed already) */
    for (int t = 0; t < g->nt; t++) {
        const sg_tensor *x = &g->t[t];
        if (x->role != ROLE_PARAM || x->region) continue;
        if (x->offset < base) base = x->offset;
        if (x->offset + SG_ALIGN_UP(x->bytes, SG_ALIGN) > end)
            end = x->offset + SG_ALIGN_UP(x->bytes, SG_ALIGN);
    }
    int64_t off = base < end ? SG_ALIGN_UP(start + (end - base) / 2, SG_ALIGN) : start;
    for (int t = 0; t < g->nt; t++) {
        sg_tensor *x = &g->t[t];
        if (x->role != ROLE_PARAM_BF16 || x->region) continue;
        if (x->copy_of >= 0) {
            SG_ASSERT(g->t[x->copy_of].role == ROLE_PARAM && base < end);
            x->offset = start + (g->t[x->copy_of].offset - base) / 2;
        } else {
            x->offset = off;
            off += SG_ALIGN_UP(x->bytes, SG_ALIGN);
        }
    }
    return off;
}

/* persistent regions, bottom up */
static void place_persistent(sg_plan *p) {
    sg_graph *g = &p->g;
    static const sg_role order[] = {ROLE_PARAM,  ROLE_GRAD,  ROLE_ADAM_M,
                                    ROLE_ADAM_V, ROLE_EMA,   ROLE_PARAM_BF16,
                                    ROLE_STATE,  ROLE_INPUT, ROLE_WORKSPACE};
    int64_t off = 0;
    for (int r = 0; r < SG_ARRAY_LEN(order); r++) {
        int64_t start = off;
        for (int t = 0; t < g->nt && order[r] == ROLE_PARAM_BF16; t++)
            if (g->t[t].role == ROLE_PARAM_BF16) {
                off = place_bf16_copies(g, start);
                break;
            }
        for (int t = 0; t < g->nt && order[r] != ROLE_PARAM_BF16; t++) {
            sg_tensor *x = &g->t[t];
            if (x->role != order[r] || x->region) continue;
            x->offset = off;
            off += SG_ALIGN_UP(x->bytes, SG_ALIGN);
        }
        for (int t = 0; t < g->nt; t++)
            if (g->t[t].role == order[r] && g->t[t].region) g->t[t].offset = start;
        p->role_bytes[order[r]] = off - start;
    }
    p->persistent_bytes = off;
}

/* the dynamic buffers (a buffer: the tensors merged in place, their joint lifetime), in slot
 * order; slot[root tensor] = its buffer. Returns how many. */
static int collect_buffers(sg_plan *p, buf_t *bufs, int *slot) {
    const sg_graph *g = &p->g;
    int nb = 0;
    for (int t = 0; t < g->nt; t++) slot[t] = -1;
    for (int t = 0; t < g->nt; t++) {
        const sg_tensor *x = &g->t[t];
        if (is_persistent(x->role) || x->nparts || x->first < 0) continue;
        int root = p->buffer_of[t];
        int k = slot[root] >= 0 ? slot[root] : nb;
        if (k == nb) {
            slot[root] = nb;
            bufs[nb].id = root;
            bufs[nb].first = x->first;
            bufs[nb].last = x->last;
            bufs[nb].size = 0;
            nb++;
        }
        if (x->first < bufs[k].first) bufs[k].first = x->first;
        if (x->last > bufs[k].last) bufs[k].last = x->last;
        int64_t sz = SG_ALIGN_UP(x->bytes, SG_ALIGN);
        if (sz > bufs[k].size) bufs[k].size = sz;
        p->role_bytes[x->role] += root == t ? sz : 0;
    }
    return nb;
}

/* lower bound: the most dynamic bytes live at one schedule point */
static int lower_bound(sg_plan *p, const buf_t *bufs, int nb) {
    const sg_graph *g = &p->g;
    int64_t *live = calloc((size_t)g->nn + 1, sizeof *live);
    if (!live) return sg_set_error("out of host memory");
    for (int k = 0; k < nb; k++) {
        live[bufs[k].first] += bufs[k].size;
        live[bufs[k].last + 1] -= bufs[k].size;
    }
    int64_t cur = 0;
    for (int i = 0; i < g->nn; i++) {
        cur += live[i];
        if (cur > p->peak_dynamic_bytes) p->peak_dynamic_bytes = cur, p->peak_node = i;
    }
    p->lower_bound_bytes = p->persistent_bytes + p->peak_dynamic_bytes;
    free(live);
    return SG_OK;
}

/* the dynamic region: best fit under several orderings, the smallest wins */
static int place_dynamic(sg_plan *p) {
    sg_graph *g = &p->g;
    buf_t *bufs = calloc((size_t)g->nt, sizeof *bufs);
    buf_t *best = calloc((size_t)g->nt, sizeof *best);
    buf_t **scratch = calloc((size_t)g->nt, sizeof *scratch);
    int *slot = malloc(sizeof(int) * (size_t)g->nt);
    int rc = SG_OK;
    if (!bufs || !best || !scratch || !slot) {
        rc = sg_set_error("out of host memory");
        goto out;
    }
    int nb = collect_buffers(p, bufs, slot);
    /* gradient accumulation: the buffers of micro-batches 1 .. K-1 copy micro-batch 0's with
     * lifetimes moved by whole micro-batches (ir.h's twin), so they go where their twins go:
     * the placement (quadratic in the buffers) runs over one micro-batch, whatever K */
    int nown = 0;
    for (int k = 0; k < nb; k++)
        if (g->t[bufs[k].id].twin < 0) {
            buf_t t = bufs[k];
            bufs[k] = bufs[nown], bufs[nown++] = t;
        }
    static int (*const orders[])(const void *, const void *) = {cmp_size, cmp_area, cmp_life,
                                                                cmp_first};
    static const char *const order_names[] = {"size", "size x lifetime", "lifetime", "start"};
    int64_t best_top = INT64_MAX;
    for (int o = 0; o < SG_ARRAY_LEN(orders); o++) {
        qsort(bufs, (size_t)nown, sizeof *bufs, orders[o]);
        int64_t top = place(bufs, nown, scratch);
        if (top < best_top) {
            best_top = top;
            memcpy(best, bufs, sizeof *bufs * (size_t)nown);
            p->placement = order_names[o];
        }
    }
    if (!nown) best_top = 0;
    memcpy(best + nown, bufs + nown, sizeof *bufs * (size_t)(nb - nown));
    for (int k = 0; k < nown; k++) slot[best[k].id] = k;
    for (int k = nown; k < nb; k++) {
        const int j = slot[p->buffer_of[g->t[best[k].id].twin]];
        SG_ASSERT(j >= 0 && j < nown && best[j].size == best[k].size);
        best[k].offset = best[j].offset;
        slot[best[k].id] = k;
    }
    for (int t = 0; t < g->nt; t++)
        if (!is_persistent(g->t[t].role) && !g->t[t].nparts && g->t[t].first >= 0)
            g->t[t].offset = p->persistent_bytes + best[slot[p->buffer_of[t]]].offset;
    p->arena_bytes = p->persistent_bytes + best_top;
    rc = lower_bound(p, best, nb);
out:
    free(slot);
    free(bufs);
    free(best);
    free(scratch);
    return rc;
}

static void totals(sg_plan *p) {
    const sg_graph *g = &p->g;
    for (int t = 0; t < g->nt; t++)
        if (!g->t[t].nparts && !g->t[t].region)
            p->no_reuse_bytes += SG_ALIGN_UP(g->t[t].bytes, SG_ALIGN);
    for (int i = 0; i < g->nn; i++) {
        double f = sg_ops[g->n[i].op].flops(g, &g->n[i]);
        p->flops += f;
        if (sg_ops[g->n[i].op].matmul) p->matmul_flops += f;
    }
}

/* the hash pins config + schedule + layout: a checkpoint from another plan is refused */
static uint64_t plan_hash(const sg_plan *p) {
    const sg_graph *g = &p->g;
    uint64_t h = 0xcbf29ce484222325ull;
    char js[2048];
    sg_model_json(&p->cfg, js, sizeof js);
    h = fnv(h, js, strlen(js));
    for (int i = 0; i < g->nn; i++) h = fnv(h, &g->n[i].op, sizeof g->n[i].op);
    for (int t = 0; t < g->nt; t++) {
        h = fnv(h, g->t[t].name, strlen(g->t[t].name));
        h = fnv(h, &g->t[t].offset, sizeof g->t[t].offset);
    }
    return h;
}

int sg_plan_layout(sg_plan *p) {
    classify_roles(&p->g);
    if (add_workspace(&p->g)) return SG_ERR;
    lifetimes(&p->g);
    if (merge_inplace(p)) return SG_ERR;
    place_persistent(p);
    if (place_dynamic(p)) return SG_ERR;
    totals(p);
    p->hash = plan_hash(p);
    return sg_plan_verify(p);
}

void sg_plan_free(sg_plan *p) {
    sg_graph_free(&p->g);
    free(p->buffer_of);
    memset(p, 0, sizeof *p);
}

/* two stored tensors that are live at the same time must not share a byte, unless they are one
 * buffer (in-place reuse) or a region view and a member of its role */
static int verify_pair(const sg_plan *p, int a, int b) {
    const sg_graph *g = &p->g;
    const sg_tensor *x = &g->t[a], *y = &g->t[b];
    if (p->buffer_of[a] == p->buffer_of[b]) return SG_OK;
    if ((x->region || y->region) && x->role == y->role) return SG_OK;
    if (x->first > y->last || y->first > x->last) return SG_OK;
    if (x->offset < y->offset + y->bytes && y->offset < x->offset + x->bytes)
        return sg_set_error("plan: %s [%lld, +%lld) and %s [%lld, +%lld) overlap while both live "
                            "(%d..%d vs %d..%d)",
                            x->name, (long long)x->offset, (long long)x->bytes, y->name,
                            (long long)y->offset, (long long)y->bytes, x->first, x->last, y->first,
                            y->last);
    return SG_OK;
}

/* a tensor and the key it is sorted by (its offset, or the start of its life) */
typedef struct {
    int64_t key;
    int id;
} keyed_t;
static int cmp_keyed(const void *a, const void *b) {
    const keyed_t *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->id - y->id;
}

/* Every pair of stored tensors live at the same time, without the quadratic all-pairs loop
 * (an unrolled gradient-accumulation step has tens of thousands of tensors): the persistent
 * ones, live the whole step, sorted by offset and each compared with those that start before
 * it ends; every dynamic one against the persistent ones by binary search; the dynamic ones
 * in a sweep over the schedule, each compared with those still live when it starts. */
static int verify_pairs(const sg_plan *p) {
    const sg_graph *g = &p->g;
    const size_t n = (size_t)g->nt + 1;
    keyed_t *per = malloc(sizeof *per * n), *dyn = malloc(sizeof *dyn * n);
    int *live = malloc(sizeof *live * n);
    int64_t *reach = malloc(sizeof *reach * n);
    int np = 0, nd = 0, nl = 0, rc = SG_OK;
    if (!per || !dyn || !live || !reach) {
        rc = sg_set_error("out of host memory verifying the plan");
        goto out;
    }
    for (int t = 0; t < g->nt; t++) {
        const sg_tensor *x = &g->t[t];
        if (x->nparts || x->first < 0 || x->bytes == 0) continue;
        if (is_persistent(x->role))
            per[np++] = (keyed_t){x->offset, t};
        else
            dyn[nd++] = (keyed_t){x->first, t};
    }
    qsort(per, (size_t)np, sizeof *per, cmp_keyed);
    for (int i = 0; i < np && !rc; i++) {
        const int64_t end = per[i].key + g->t[per[i].id].bytes;
        for (int j = i + 1; j < np && per[j].key < end && !rc; j++)
            rc = verify_pair(p, per[i].id, per[j].id);
        /* reach[i]: the furthest end among per[0..i] */
        reach[i] = i && reach[i - 1] > end ? reach[i - 1] : end;
    }
    for (int k = 0; k < nd && !rc; k++) {
        const sg_tensor *x = &g->t[dyn[k].id];
        int lo = 0, hi = np; /* the persistent tensors that start before x ends: [0, lo) */
        while (lo < hi) {
            const int mid = (lo + hi) / 2;
            if (per[mid].key < x->offset + x->bytes)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (int i = lo - 1; i >= 0 && reach[i] > x->offset && !rc; i--)
            rc = verify_pair(p, per[i].id, dyn[k].id);
    }
    qsort(dyn, (size_t)nd, sizeof *dyn, cmp_keyed);
    for (int k = 0; k < nd && !rc; k++) {
        const sg_tensor *x = &g->t[dyn[k].id];
        int m = 0; /* drop the tensors whose life ended before x's began */
        for (int i = 0; i < nl; i++)
            if (g->t[live[i]].last >= x->first) live[m++] = live[i];
        nl = m;
        for (int i = 0; i < nl && !rc; i++) rc = verify_pair(p, live[i], dyn[k].id);
        live[nl++] = dyn[k].id;
    }
out:
    free(per), free(dyn), free(live), free(reach);
    return rc;
}

int sg_plan_verify(const sg_plan *p) {
    const sg_graph *g = &p->g;
    for (int t = 0; t < g->nt; t++) {
        const sg_tensor *x = &g->t[t];
        if (x->nparts || x->first < 0) continue;
        /* a bf16 weight copy lies at half its parameter's offset: SG_ALIGN / 2 */
        const int align = x->role == ROLE_PARAM_BF16 && x->copy_of >= 0 ? SG_ALIGN / 2 : SG_ALIGN;
        if (x->offset < 0) return sg_set_error("plan: tensor %s has no offset", x->name);
        if (x->offset % align)
            return sg_set_error("plan: tensor %s at %lld is not %d-aligned", x->name,
                                (long long)x->offset, align);
        if (x->offset + x->bytes > p->arena_bytes)
            return sg_set_error("plan: tensor %s ends past the arena", x->name);
    }
    /* a bf16 conv / linear multiplies bf16 weights (the plan's copy of its parameters,
     * planner/train_step.c): the CUDA kernels take the weights in the activations' dtype */
    for (int i = 0; i < g->nn; i++) {
        const sg_node *nd = &g->n[i];
        if (nd->op != OP_CONV2D && nd->op != OP_CONV2D_BWD_DATA && nd->op != OP_LINEAR &&
            nd->op != OP_LINEAR_BWD_DATA)
            continue;
        const sg_tensor *a = &g->t[nd->in[0]], *w = &g->t[nd->in[1]];
        if (a->dtype != w->dtype)
            return sg_set_error("plan: node %d (%s) multiplies %s weights '%s' with %s "
                                "activations: a %s conv / linear reads its weights in that dtype "
                                "(bf16: the parameters' bf16 copy)",
                                i, sg_ops[nd->op].name, sg_dtype_names[w->dtype], w->name,
                                sg_dtype_names[a->dtype], sg_dtype_names[a->dtype]);
    }
    return verify_pairs(p);
}
