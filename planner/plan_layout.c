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
 * better, so arena / lower bound measures the placement's waste. When every ordering leaves
 * some, a bounded search (below) looks for a placement at the bound itself.
 */
#include "planner/plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_persistent(sg_role r) {
    return r <= ROLE_INPUT || r == ROLE_WORKSPACE;
}

/* The stored tensors a read of virtual tensor t reads (none for a stored one): a
 * concatenation's two parts; a virtual normalised tensor's node's inputs and its other outputs
 * (mean, rstd), the operands of the apply pass that computes it (the node's x may itself be a
 * concatenation: the caller recurses). Returns how many, into deps (at most SG_MAX_IN +
 * SG_MAX_OUT). */
static int virtual_deps(const sg_graph *g, int t, int *deps) {
    const sg_tensor *x = &g->t[t];
    int n = 0;
    for (int p = 0; p < x->nparts; p++) deps[n++] = x->parts[p];
    if (x->vnorm >= 0) {
        const sg_node *nd = &g->n[x->vnorm];
        for (int k = 0; k < nd->nin; k++) deps[n++] = nd->in[k];
        for (int k = 1; k < nd->nout; k++) deps[n++] = nd->out[k];
    }
    return n;
}

static void touch(sg_graph *g, int t, int i) {
    sg_tensor *x = &g->t[t];
    if (x->first < 0 || i < x->first) x->first = i;
    if (i > x->last) x->last = i;
    int deps[SG_MAX_IN + SG_MAX_OUT];
    const int nd = virtual_deps(g, t, deps);
    for (int k = 0; k < nd; k++) touch(g, deps[k], i);
}

static int find(int *uf, int x) {
    while (uf[x] != x) x = uf[x] = uf[uf[x]];
    return x;
}

/* a backward node of the micro-batch starting at node `base` reads t (or, virtual, what t is
 * computed from): a temporary of that micro-batch's forward pass is saved for it */
static void mark_saved(sg_graph *g, int t, int base) {
    sg_tensor *y = &g->t[t];
    if (y->role == ROLE_TEMP && y->producer >= base && y->producer < base + g->n_forward)
        y->role = ROLE_SAVED;
    int deps[SG_MAX_IN + SG_MAX_OUT];
    const int nd = virtual_deps(g, t, deps);
    for (int k = 0; k < nd; k++) mark_saved(g, deps[k], base);
}

/* saved activations: forward tensors that a backward node reads (micro-batch by micro-batch:
 * micro-batch k's forward and backward are micro-batch 0's moved by k spans, ir.h) */
static void classify_roles(sg_graph *g) {
    const int span = g->n_forward + g->n_backward;
    const int K = g->micro_batches > 1 ? g->micro_batches : 1;
    for (int m = 0; m < K; m++) {
        const int base = m * span;
        for (int i = base + g->n_forward; i < base + span; i++)
            for (int k = 0; k < g->n[i].nin; k++) mark_saved(g, g->n[i].in[k], base);
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
/* by first use, then larger first: the search's order */
static int cmp_start(const void *a, const void *b) {
    const buf_t *x = a, *y = b;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    if (x->size != y->size) return x->size > y->size ? -1 : 1;
    return x->id - y->id;
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

/* ---- the search: a placement no higher than `cap` (the lower bound), when the orderings
 * missed it.
 *
 * Best fit never revisits a choice, and around a peak of the schedule that can strand a gap
 * the bound does not have (unet_cifar with recomputed normalisations: 32 MiB over it). The
 * search takes the buffers in order of first use (cmp_start); each goes at the bottom of a free
 * gap among the buffers it overlaps in time, or at the top of one, lowest first, never above
 * cap; when one fits nowhere the search backs up to the previous buffer's next position. Only
 * buffers of at least cap/SEARCH_BIG bytes get more than the lowest position: the small ones
 * would multiply the branches without moving the peak. A dead end is remembered by a hash of
 * (the buffer, the offsets and ends of the placed buffers still live), which is all the rest
 * of the search depends on. Buffers marked kept stay where they are (obstacles to the others).
 * It gives up after SEARCH_STEPS positions tried, so its cost is bounded, and its result, as
 * everything in this file, depends on the plan alone. */
#define SEARCH_STEPS 50000
#define SEARCH_MEMO (1 << 16) /* remembered dead ends (a power of two) */
#define SEARCH_BIG 256

typedef struct {
    int64_t off, end;
} span_t;
static int cmp_span(const void *a, const void *b) {
    const span_t *x = a, *y = b;
    return x->off != y->off ? (x->off < y->off ? -1 : 1) : 0;
}

typedef struct {
    buf_t *bufs;               /* sorted by cmp_start */
    int n;                     /* buffers */
    const unsigned char *kept; /* per buffer: keep its offset; NULL: none kept */
    int64_t cap;
    span_t *busy;   /* scratch: 2n spans */
    int64_t *cand;  /* scratch: 2n + 2 offsets */
    int *next;      /* per depth: the next candidate to try */
    uint64_t *memo; /* dead ends */
    int depth;      /* buffers placed */
} search_t;

/* The offsets buffer i may take (bufs[0..i) placed), ascending, into s->cand; returns how
 * many (0: none). *key identifies the state. */
static int search_candidates(search_t *s, int i, uint64_t *key) {
    const buf_t *b = &s->bufs[i];
    int nl = 0;
    uint64_t h = fnv(0xcbf29ce484222325ull, &i, sizeof i);
    for (int j = 0; j < i; j++)
        if (s->bufs[j].last >= b->first) {
            const buf_t *x = &s->bufs[j];
            s->busy[nl].off = x->offset, s->busy[nl++].end = x->offset + x->size;
            h = fnv(h, &x->offset, sizeof x->offset);
            h = fnv(h, &x->last, sizeof x->last);
        }
    *key = h ? h : 1;
    if (s->kept && s->kept[i]) {
        for (int j = 0; j < nl; j++)
            if (s->busy[j].off < b->offset + b->size && b->offset < s->busy[j].end) return 0;
        s->cand[0] = b->offset;
        return b->offset + b->size <= s->cap;
    }
    /* the kept buffers still to come are there already */
    for (int j = i + 1; s->kept && j < s->n && s->bufs[j].first <= b->last; j++)
        if (s->kept[j])
            s->busy[nl].off = s->bufs[j].offset,
            s->busy[nl++].end = s->bufs[j].offset + s->bufs[j].size;
    qsort(s->busy, (size_t)nl, sizeof *s->busy, cmp_span);
    const int big = b->size * SEARCH_BIG >= s->cap;
    int nc = 0;
    int64_t cursor = 0;
    for (int j = 0; j <= nl && !(nc && !big); j++) {
        int64_t lim = j < nl ? s->busy[j].off : s->cap;
        if (lim - cursor >= b->size) {
            s->cand[nc++] = cursor;
            if (big && j < nl && lim - b->size > cursor) s->cand[nc++] = lim - b->size;
        }
        if (j < nl && s->busy[j].end > cursor) cursor = s->busy[j].end;
    }
    return nc;
}

static int memo_has(const uint64_t *memo, uint64_t key) {
    for (int probe = 0; probe < 8; probe++) {
        uint64_t v = memo[(key + (uint64_t)probe) & (SEARCH_MEMO - 1)];
        if (v == key) return 1;
        if (!v) return 0;
    }
    return 0;
}
static void memo_add(uint64_t *memo, uint64_t key) {
    for (int probe = 0; probe < 8; probe++)
        if (!memo[(key + (uint64_t)probe) & (SEARCH_MEMO - 1)]) {
            memo[(key + (uint64_t)probe) & (SEARCH_MEMO - 1)] = key;
            return;
        }
}

static int search_init(search_t *s, buf_t *bufs, int n, const unsigned char *kept, int64_t cap) {
    *s = (search_t){.bufs = bufs, .n = n, .kept = kept, .cap = cap};
    s->next = calloc((size_t)n + 1, sizeof *s->next);
    s->cand = malloc(sizeof *s->cand * (size_t)(2 * n + 2));
    s->memo = calloc(SEARCH_MEMO, sizeof *s->memo);
    s->busy = malloc(sizeof *s->busy * (size_t)(2 * n + 1));
    return s->next && s->cand && s->memo && s->busy;
}
static void search_free(search_t *s) {
    free(s->next), free(s->cand), free(s->memo), free(s->busy);
}

/* The next placement of s->bufs under s->cap: 1 (every offset set; a later call goes on to
 * the one after), or 0 when there is none left or the budget of positions ran out. */
static int search_next(search_t *s, int64_t *budget) {
    if (s->depth == s->n) { /* after a placement: on to the next one */
        if (--s->depth < 0) return 0;
        s->next[s->depth]++;
    }
    while (s->depth >= 0 && (*budget)-- > 0) {
        if (s->depth == s->n) return 1;
        uint64_t key;
        const int d = s->depth, nc = search_candidates(s, d, &key);
        const int dead = s->next[d] == 0 && memo_has(s->memo, key);
        if (dead || s->next[d] >= nc) {
            if (!dead) memo_add(s->memo, key);
            s->next[d] = 0;
            if (--s->depth >= 0) s->next[s->depth]++;
            continue;
        }
        s->bufs[d].offset = s->cand[s->next[d]];
        s->next[++s->depth] = 0;
    }
    return 0;
}

/* The search in two stages: the buffers that live through a peak of the schedule (`bound`
 * bytes live) among themselves, then, with those kept, everything around them; each stage-1
 * placement in turn until one admits a stage 2 or the budget is spent. Both in schedule order
 * and mirrored (the problem is the same with time reversed; the search's order is not).
 * bufs in any order; on success they hold the placement and 1 is returned. */
static int search_at_bound(buf_t *bufs, int nb, int nn, int nt, const int64_t *pressure,
                           int64_t bound) {
    unsigned char *kept = calloc((size_t)nb, 1);
    buf_t *work = calloc((size_t)nb, sizeof *work);
    int64_t *offset_of = calloc((size_t)nt, sizeof *offset_of);
    int found = 0;
    int64_t budget = SEARCH_STEPS;
    for (int mirror = 0; mirror < 2 && !found && kept && work && offset_of; mirror++) {
        /* the peak group first, by (mirrored) first use */
        int ng = 0;
        for (int k = 0; k < nb; k++) {
            buf_t b = bufs[k];
            if (mirror) b.first = nn - 1 - bufs[k].last, b.last = nn - 1 - bufs[k].first;
            if (pressure[b.id] == bound) work[ng++] = b;
        }
        for (int k = 0, m = ng; k < nb; k++) {
            buf_t b = bufs[k];
            if (mirror) b.first = nn - 1 - bufs[k].last, b.last = nn - 1 - bufs[k].first;
            if (pressure[b.id] != bound) work[m++] = b;
        }
        qsort(work, (size_t)ng, sizeof *work, cmp_start);
        search_t s1, s2;
        buf_t *all = calloc((size_t)nb, sizeof *all);
        int ok1 = all && search_init(&s1, work, ng, NULL, bound);
        while (ok1 && !found && search_next(&s1, &budget)) {
            memcpy(all, work, sizeof *all * (size_t)nb);
            qsort(all, (size_t)nb, sizeof *all, cmp_start);
            for (int k = 0; k < nb; k++) kept[k] = pressure[all[k].id] == bound;
            if (search_init(&s2, all, nb, kept, bound) && search_next(&s2, &budget)) {
                found = 1; /* the offsets, by buffer id, back onto bufs (schedule time) */
                for (int k = 0; k < nb; k++) offset_of[all[k].id] = all[k].offset;
                for (int k = 0; k < nb; k++) bufs[k].offset = offset_of[bufs[k].id];
            }
            search_free(&s2);
        }
        if (all) search_free(&s1);
        free(all);
    }
    free(kept);
    free(work);
    free(offset_of);
    return found;
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
        if (sg_tensor_virtual(x) || sg_tensor_virtual(y) || is_persistent(x->role) ||
            is_persistent(y->role))
            continue;
        if (x->last != i || y->first != i || x->bytes != y->bytes || x->dtype != y->dtype) continue;
        p->buffer_of[find(p->buffer_of, nd->out[0])] = find(p->buffer_of, nd->in[0]);
        p->inplace_merges++;
    }
    for (int t = 0; t < g->nt; t++) p->buffer_of[t] = find(p->buffer_of, t);
    return SG_OK;
}

/* persistent regions, bottom up */
static void place_persistent(sg_plan *p) {
    sg_graph *g = &p->g;
    static const sg_role order[] = {ROLE_PARAM, ROLE_GRAD,  ROLE_ADAM_M, ROLE_ADAM_V,
                                    ROLE_EMA,   ROLE_STATE, ROLE_INPUT,  ROLE_WORKSPACE};
    int64_t off = 0;
    for (int r = 0; r < SG_ARRAY_LEN(order); r++) {
        int64_t start = off;
        for (int t = 0; t < g->nt; t++) {
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
        if (is_persistent(x->role) || sg_tensor_virtual(x) || x->first < 0) continue;
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

/* per buffer id (nt ids): the most bytes of bufs live at a point of its lifetime, and in
 * *peak the most at any point; malloc'ed (NULL when out of memory) */
static int64_t *pressures(int nn, const buf_t *bufs, int nb, int nt, int64_t *peak) {
    int64_t *live = calloc((size_t)nn + 1, sizeof *live), *pr = calloc((size_t)nt, sizeof *pr);
    *peak = 0;
    if (!live || !pr) {
        free(live), free(pr);
        return NULL;
    }
    for (int k = 0; k < nb; k++) {
        live[bufs[k].first] += bufs[k].size;
        live[bufs[k].last + 1] -= bufs[k].size;
    }
    int64_t cur = 0;
    for (int i = 0; i < nn; i++) {
        live[i] = cur += live[i];
        if (cur > *peak) *peak = cur;
    }
    for (int k = 0; k < nb; k++)
        for (int i = bufs[k].first; i <= bufs[k].last; i++)
            if (live[i] > pr[bufs[k].id]) pr[bufs[k].id] = live[i];
    free(live);
    return pr;
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
    static const char *const order_names[] = {
        "best fit (ordering: size)", "best fit (ordering: size x lifetime)",
        "best fit (ordering: lifetime)", "best fit (ordering: start)"};
    int64_t best_top = INT64_MAX, bound;
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
    /* best fit may leave a gap above the lower bound: a bounded search for a placement at it
     * (over micro-batch 0's buffers; the twins follow below) */
    int64_t *pressure = pressures(g->nn, bufs, nown, g->nt, &bound);
    if (!pressure) {
        rc = sg_set_error("out of host memory");
        goto out;
    }
    if (nown && best_top > bound && search_at_bound(bufs, nown, g->nn, g->nt, pressure, bound)) {
        best_top = bound;
        memcpy(best, bufs, sizeof *bufs * (size_t)nown);
        p->placement = "a search at the lower bound (best fit left a gap)";
    }
    free(pressure);
    memcpy(best + nown, bufs + nown, sizeof *bufs * (size_t)(nb - nown));
    for (int k = 0; k < nown; k++) slot[best[k].id] = k;
    for (int k = nown; k < nb; k++) {
        const int j = slot[p->buffer_of[g->t[best[k].id].twin]];
        SG_ASSERT(j >= 0 && j < nown && best[j].size == best[k].size);
        best[k].offset = best[j].offset;
        slot[best[k].id] = k;
    }
    for (int t = 0; t < g->nt; t++)
        if (!is_persistent(g->t[t].role) && !sg_tensor_virtual(&g->t[t]) && g->t[t].first >= 0)
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

/* What the fusions (planner/fuse.c) leave unwritten: each virtual normalised tensor's bytes,
 * twice when a backward node reads it (the unfused plan recomputes a copy there), and each
 * conv2d_add's conv output (the unfused plan's conv2d writes it, its add reads it back) */
static void fusion_totals(sg_plan *p) {
    const sg_graph *g = &p->g;
    unsigned char *bwd_read = calloc((size_t)g->nt + 1, 1);
    for (int i = 0; bwd_read && i < g->nn; i++)
        if (sg_ops[g->n[i].op].kind == SG_OPK_BWD)
            for (int k = 0; k < g->n[i].nin; k++) bwd_read[g->n[i].in[k]] = 1;
    for (int t = 0; t < g->nt; t++) {
        const sg_tensor *x = &g->t[t];
        if (x->vnorm < 0) continue;
        const int64_t b = SG_ALIGN_UP(sg_numel(x) * sg_dtype_size(x->dtype), SG_ALIGN);
        p->fused_norms++;
        p->unmaterialised_bytes += b;
        if (bwd_read && bwd_read[t]) p->unmaterialised_bytes += b, p->fused_recomputes++;
    }
    free(bwd_read);
    for (int i = 0; i < g->nn; i++) {
        if (g->n[i].op != OP_CONV2D_ADD) continue;
        const sg_tensor *y = &g->t[g->n[i].out[0]];
        const int64_t b = SG_ALIGN_UP(sg_numel(y) * sg_dtype_size(y->dtype), SG_ALIGN);
        p->fused_residuals++;
        p->fused_residual_bytes += b;
        p->unmaterialised_bytes += b;
    }
}

static void totals(sg_plan *p) {
    const sg_graph *g = &p->g;
    fusion_totals(p);
    for (int t = 0; t < g->nt; t++)
        if (!sg_tensor_virtual(&g->t[t]) && !g->t[t].region) {
            p->no_reuse_bytes += SG_ALIGN_UP(g->t[t].bytes, SG_ALIGN);
            p->role_tensors[g->t[t].role]++;
        }
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
        if (sg_tensor_virtual(x) || x->first < 0 || x->bytes == 0) continue;
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
        if (sg_tensor_virtual(x) || x->first < 0) continue;
        if (x->offset < 0) return sg_set_error("plan: tensor %s has no offset", x->name);
        if (x->offset % SG_ALIGN)
            return sg_set_error("plan: tensor %s at %lld is not %d-aligned", x->name,
                                (long long)x->offset, SG_ALIGN);
        if (x->offset + x->bytes > p->arena_bytes)
            return sg_set_error("plan: tensor %s ends past the arena", x->name);
    }
    return verify_pairs(p);
}
