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
    return sg_role_persistent(r);
}

static void touch(sg_graph *g, int t, int i) {
    sg_tensor *x = &g->t[t];
    if (x->first < 0 || i < x->first) x->first = i;
    if (i > x->last) x->last = i;
    int deps[SG_MAX_IN + SG_MAX_OUT];
    const int nd = sg_virtual_deps(g, t, deps);
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
    const int nd = sg_virtual_deps(g, t, deps);
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

/* ---- the search at the bound: a placement no higher than `cap` (the lower bound) when every
 * best-fit ordering left a gap.
 *
 * Why best fit misses it: at a peak of the schedule the buffers live there must tile
 * [0, bound) exactly, and best fit, which never revisits a choice, has by then put some of
 * them where the pieces no longer fit. With normalisations recomputed in the backward pass the
 * peak is at its start (unet_fmnist fp32, 92.3 MiB at nodes 147-149): the recomputed 12 MiB
 * input of the last block's conv1 (norm1's output), then its 12 MiB gradient, meet the saved
 * activations of the whole forward pass. Three nodes earlier the block's 4 MiB conv1 output
 * died, at the node where its own gradient is born (so the gradient cannot take its slot);
 * the 12 MiB copy does not fit the 4 MiB hole left there, best fit puts it on top, and the
 * arena ends 4 MiB (4.3%) over the bound. unet_tiny and unet_adm64 bf16 miss it the same way.
 *
 * The search is a depth-first search over canonical placements (the method of MiniMalloc,
 * Moffitt, ASPLOS 2023): buffers are placed in order of non-decreasing offset, each at its
 * `low`, the top of the placed buffers it overlaps in time, so that a partial placement is a
 * skyline; every placement under cap has a canonical counterpart that is too. At each step the
 * candidates are the unplaced buffers in order of (low, rank), rank being the buffer's place in
 * a static preorder, and four rules prune:
 *   - canonical order: no candidate before the buffer placed last (each placement once);
 *   - symmetry: of interchangeable buffers (same lifetime, same size) the first in the
 *     preorder goes first;
 *   - dominance: no candidate whose low is at or above the top of another unplaced buffer set
 *     at its own low (that one fits under it, and the branch that places it first is searched);
 *   - inference: in every section (a stretch of the schedule with one set of live buffers),
 *     max(the skyline, the offset just used) + the bytes still to place there <= cap.
 * The inference rule is what finds the bound quickly: at a peak section the bytes still to
 * place are exactly the room left, so a hole under them is seen as soon as it is made.
 *
 * Preorders: T pressure (the most bytes live at a point of the buffer's lifetime: a peak's
 * buffers first), A area (bytes x nodes), W width (sections spanned), Z size, in a few
 * priorities (TAW alone places every built-in model; the others rescue random configs),
 * tried in turn with a limit on the placements that doubles each round (a preorder that goes
 * wrong early costs little). Per step the work is linear in the buffers (choosing the next,
 * raising the lows of those it overlaps) and logarithmic in the sections (two segment trees:
 * the skyline, and the bytes still to place); the whole search stops after PACK_WORK buffer
 * visits, so its cost is bounded whatever the graph, and its result, as everything in this
 * file, depends on the plan alone. */
#define PACK_WORK ((int64_t)1 << 26)

/* a buffer's place in a preorder: by k[0], k[1], k[2], larger first, then by lifetime and
 * size, so that interchangeable buffers (same lifetime, same size) are neighbours */
typedef struct {
    int64_t k[3], size;
    int first, last, buf;
} pack_key_t;
static int cmp_pack_key(const void *a, const void *b) {
    const pack_key_t *x = a, *y = b;
    for (int c = 0; c < 3; c++)
        if (x->k[c] != y->k[c]) return x->k[c] > y->k[c] ? -1 : 1;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    if (x->last != y->last) return x->last < y->last ? -1 : 1;
    if (x->size != y->size) return x->size < y->size ? -1 : 1;
    return x->buf - y->buf;
}

typedef struct {
    const buf_t *bufs;
    int n, ns;  /* buffers, sections */
    int nplace; /* the buffers of size > 0 (the others go at 0) */
    int64_t cap;
    int *lo, *hi;       /* per buffer: the sections it spans, [lo, hi) */
    int *rank;          /* per buffer: its place in the preorder */
    int *same;          /* per buffer: the one before it in the preorder if interchangeable
                         * with it (same lifetime and size), else -1 */
    int64_t *low, *off; /* per buffer: its offset if placed next; its offset (-1: unplaced) */
    /* segment trees over the sections (node 1 the root, node v's children 2v and 2v + 1):
     * the skyline, sky_set[v] the top set over all of v's range, sky_max[v] the most set in
     * it; the bytes still to place, left_add[v] added to all of v's range, left_max[v] the
     * most in it */
    int64_t *sky_set, *sky_max, *left_add, *left_max;
    int *sky_node;      /* undo log of the skyline: a node ... */
    int64_t *sky_old;   /* ... and its sky_set before */
    int nlog, maxlog;   /* entries, capacity */
    int *placed, *mark; /* per depth: the buffer placed there, the undo log's length before */
    int64_t work;       /* buffer visits so far */
} pack_t;

static int64_t max64(int64_t a, int64_t b) {
    return a > b ? a : b;
}

/* the skyline over [a, b) of v's range [l, r) rises to h (above all of it) */
static void sky_raise(pack_t *s, int v, int l, int r, int a, int b, int64_t h) {
    if (b <= l || r <= a) return;
    if (a <= l && r <= b) {
        s->sky_node[s->nlog] = v, s->sky_old[s->nlog++] = s->sky_set[v];
        s->sky_set[v] = s->sky_max[v] = h;
        return;
    }
    const int m = (l + r) / 2;
    sky_raise(s, 2 * v, l, m, a, b, h), sky_raise(s, 2 * v + 1, m, r, a, b, h);
    s->sky_max[v] = max64(s->sky_set[v], max64(s->sky_max[2 * v], s->sky_max[2 * v + 1]));
}
/* after the undo log restored sky_set over [a, b): sky_max again */
static void sky_fix(pack_t *s, int v, int l, int r, int a, int b) {
    if (b <= l || r <= a) return;
    const int m = (l + r) / 2;
    if (!(a <= l && r <= b)) sky_fix(s, 2 * v, l, m, a, b), sky_fix(s, 2 * v + 1, m, r, a, b);
    s->sky_max[v] = r - l == 1
                        ? s->sky_set[v]
                        : max64(s->sky_set[v], max64(s->sky_max[2 * v], s->sky_max[2 * v + 1]));
}
static int64_t sky_top(const pack_t *s, int v, int l, int r, int a, int b) {
    if (b <= l || r <= a) return 0;
    if (a <= l && r <= b) return s->sky_max[v];
    const int m = (l + r) / 2;
    return max64(s->sky_set[v],
                 max64(sky_top(s, 2 * v, l, m, a, b), sky_top(s, 2 * v + 1, m, r, a, b)));
}
static void left_change(pack_t *s, int v, int l, int r, int a, int b, int64_t d) {
    if (b <= l || r <= a) return;
    if (a <= l && r <= b) {
        s->left_add[v] += d, s->left_max[v] += d;
        return;
    }
    const int m = (l + r) / 2;
    left_change(s, 2 * v, l, m, a, b, d), left_change(s, 2 * v + 1, m, r, a, b, d);
    s->left_max[v] = s->left_add[v] + max64(s->left_max[2 * v], s->left_max[2 * v + 1]);
}
static int64_t left_most(const pack_t *s, int v, int l, int r, int a, int b) {
    if (b <= l || r <= a) return INT64_MIN;
    if (a <= l && r <= b) return s->left_max[v];
    const int m = (l + r) / 2;
    const int64_t x = max64(left_most(s, 2 * v, l, m, a, b), left_most(s, 2 * v + 1, m, r, a, b));
    return x == INT64_MIN ? x : x + s->left_add[v];
}
/* the bytes to place per section at the start: leaves from `bytes`, in v's range [l, r) */
static void left_build(pack_t *s, int v, int l, int r, const int64_t *bytes) {
    s->left_add[v] = 0, s->sky_set[v] = s->sky_max[v] = 0;
    if (r - l == 1) {
        s->left_add[v] = s->left_max[v] = bytes[l];
        return;
    }
    const int m = (l + r) / 2;
    left_build(s, 2 * v, l, m, bytes), left_build(s, 2 * v + 1, m, r, bytes);
    s->left_max[v] = max64(s->left_max[2 * v], s->left_max[2 * v + 1]);
}

/* a candidate's key (low, rank) before (off, rank_b)? */
static int pack_before(const pack_t *s, int a, int64_t off, int rank_b) {
    return s->low[a] != off ? s->low[a] < off : s->rank[a] < rank_b;
}

/* Places buffer i at its low: 1; or 0 when the inference rule fails (nothing changed). Holds
 * throughout: skyline + bytes to place <= cap in every section, so the rule needs checking
 * only where i goes (skyline h) and, with the offset used, against the fullest section. */
static int pack_place(pack_t *s, int i) {
    const buf_t *b = &s->bufs[i];
    const int64_t o = s->low[i], h = o + b->size;
    left_change(s, 1, 0, s->ns, s->lo[i], s->hi[i], -b->size);
    s->work += 64;
    if (o + s->left_max[1] > s->cap || h + left_most(s, 1, 0, s->ns, s->lo[i], s->hi[i]) > s->cap) {
        left_change(s, 1, 0, s->ns, s->lo[i], s->hi[i], b->size);
        return 0;
    }
    s->off[i] = o;
    sky_raise(s, 1, 0, s->ns, s->lo[i], s->hi[i], h);
    for (int j = 0; j < s->n; j++) {
        const buf_t *x = &s->bufs[j];
        if (s->off[j] < 0 && s->low[j] < h && x->first <= b->last && b->first <= x->last)
            s->low[j] = h;
    }
    s->work += s->n;
    return 1;
}

/* Takes back the placement of buffer i, the last made (undo log entries from `mark` on). */
static void pack_unplace(pack_t *s, int i, int mark) {
    const buf_t *b = &s->bufs[i];
    const int64_t h = s->off[i] + b->size;
    left_change(s, 1, 0, s->ns, s->lo[i], s->hi[i], b->size);
    while (s->nlog > mark) s->nlog--, s->sky_set[s->sky_node[s->nlog]] = s->sky_old[s->nlog];
    sky_fix(s, 1, 0, s->ns, s->lo[i], s->hi[i]);
    s->off[i] = -1;
    /* the lows that i raised: the top of what is still placed under them */
    for (int j = 0; j < s->n; j++) {
        const buf_t *x = &s->bufs[j];
        if (s->off[j] < 0 && s->low[j] == h && j != i && x->first <= b->last && b->first <= x->last)
            s->low[j] = sky_top(s, 1, 0, s->ns, s->lo[j], s->hi[j]);
    }
    s->work += s->n;
}

/* One depth-first search from nothing placed, at most `limit` placements: 1 when every buffer
 * is placed (s->off holds the offsets), 0 when the search space is exhausted (no placement
 * under cap), -1 when the limit or the work budget stopped it. */
static int pack_search(pack_t *s, int64_t limit) {
    int depth = 0, tried = -1; /* the last candidate tried at this depth (-1: none yet) */
    for (;;) {
        if (depth == s->nplace) return 1;
        const int prev = depth ? s->placed[depth - 1] : -1;
        int64_t min_top = INT64_MAX;
        int best = -1;
        for (int j = 0; j < s->n; j++) {
            if (s->off[j] >= 0 || !s->bufs[j].size) continue;
            /* interchangeable buffers go in preorder: the others' orders place the same */
            const int twin_unplaced = s->same[j] >= 0 && s->off[s->same[j]] < 0;
            const int64_t t = s->low[j] + s->bufs[j].size;
            if (t < min_top) min_top = t;
            if (t > s->cap || twin_unplaced ||
                (tried >= 0 && !pack_before(s, tried, s->low[j], s->rank[j])) ||
                (prev >= 0 && pack_before(s, j, s->off[prev], s->rank[prev])))
                continue;
            if (best < 0 || pack_before(s, j, s->low[best], s->rank[best])) best = j;
        }
        s->work += s->n;
        if (best >= 0 && s->low[best] >= min_top) best = -1; /* dominance: so is every later one */
        if (best < 0) {                                      /* back up */
            if (--depth < 0) return 0;
            tried = s->placed[depth];
            pack_unplace(s, tried, s->mark[depth]);
            continue;
        }
        if (s->work > PACK_WORK) return -1;
        s->mark[depth] = s->nlog;
        if (!pack_place(s, best)) {
            tried = best;
            continue;
        }
        if (limit-- <= 0) { /* the limit counts the placements that pass the rules */
            pack_unplace(s, best, s->mark[depth]);
            return -1;
        }
        s->placed[depth++] = best, tried = -1;
    }
}

/* One search per preorder, in turn, with a placement limit that doubles each round: 1 at the
 * first placement found; 0 when a search has exhausted its space or the work budget is spent.
 * bytes: per section, the bytes live there. */
static int pack_rounds(pack_t *s, const int64_t *pressure, const int64_t *bytes) {
    static const char *const preorders[] = {"TAW", "TWA", "TZW", "AWT"};
    const buf_t *bufs = s->bufs;
    pack_key_t *keys = malloc(sizeof *keys * (size_t)s->n);
    int found = 0;
    for (int64_t limit = 2 * (int64_t)s->n; keys && s->work <= PACK_WORK; limit *= 2)
        for (int h = 0; h < SG_ARRAY_LEN(preorders) && s->work <= PACK_WORK; h++) {
            for (int k = 0; k < s->n; k++) {
                keys[k].buf = k, keys[k].first = bufs[k].first, keys[k].last = bufs[k].last;
                keys[k].size = bufs[k].size;
                for (int c = 0; c < 3; c++) {
                    const char f = preorders[h][c];
                    keys[k].k[c] = f == 'T'   ? pressure[bufs[k].id]
                                   : f == 'A' ? bufs[k].size * (bufs[k].last - bufs[k].first + 1)
                                   : f == 'Z' ? bufs[k].size
                                              : s->hi[k] - s->lo[k];
                }
            }
            qsort(keys, (size_t)s->n, sizeof *keys, cmp_pack_key);
            for (int k = 0; k < s->n; k++) {
                const pack_key_t *x = &keys[k], *w = k ? &keys[k - 1] : NULL;
                s->rank[x->buf] = k, s->low[k] = 0, s->off[k] = -1;
                s->same[x->buf] =
                    w && w->first == x->first && w->last == x->last && w->size == x->size ? w->buf
                                                                                          : -1;
            }
            left_build(s, 1, 0, s->ns, bytes);
            s->nlog = 0;
            s->work += s->n + s->ns;
            const int r = pack_search(s, limit);
            if (r >= 0) { /* found; or exhausted: the rules lose no placement, whatever the
                           * preorder, so none is under cap */
                found = r;
                goto out;
            }
        }
out:
    free(keys);
    return found;
}

/* A search for a placement of bufs (any order) under cap; nn schedule points, pressure by
 * buffer id. On success the offsets are in bufs and 1 is returned. */
static int pack_at_bound(buf_t *bufs, int n, int nn, const int64_t *pressure, int64_t cap) {
    /* each step visits every buffer: skip a search that could not place them all once */
    if (2 * (int64_t)n * n > PACK_WORK) return 0;
    pack_t s = {.n = n, .bufs = bufs, .cap = cap};
    int found = 0, *idx = calloc((size_t)nn + 2, sizeof *idx);
    int64_t *bytes = calloc((size_t)nn + 2, sizeof *bytes);
    s.lo = malloc(sizeof(int) * (size_t)n), s.hi = malloc(sizeof(int) * (size_t)n);
    s.rank = malloc(sizeof(int) * (size_t)n), s.same = malloc(sizeof(int) * (size_t)n);
    s.placed = malloc(sizeof(int) * (size_t)n), s.mark = malloc(sizeof(int) * (size_t)n);
    s.low = malloc(sizeof(int64_t) * (size_t)n), s.off = malloc(sizeof(int64_t) * (size_t)n);
    if (idx && bytes && s.lo && s.hi && s.rank && s.same && s.placed && s.mark && s.low && s.off) {
        /* sections: a boundary where a buffer starts or ends; idx[t]: the section from t on */
        for (int k = 0; k < n; k++) idx[bufs[k].first] = idx[bufs[k].last + 1] = 1;
        for (int t = 0, c = -1; t <= nn; t++) idx[t] = c += idx[t];
        for (int k = 0; k < n; k++) {
            s.lo[k] = idx[bufs[k].first], s.hi[k] = idx[bufs[k].last + 1];
            if (s.hi[k] > s.ns) s.ns = s.hi[k];
            s.nplace += bufs[k].size > 0;
            bytes[s.lo[k]] += bufs[k].size, bytes[s.hi[k]] -= bufs[k].size;
        }
        for (int q = 1; q < s.ns; q++) bytes[q] += bytes[q - 1];
        /* a raise logs at most 2 nodes per tree level: 2 (log2 ns + 2) per placement */
        int levels = 2;
        while (((int64_t)1 << (levels - 2)) < s.ns) levels++;
        s.maxlog = 2 * levels * n;
        s.sky_set = malloc(sizeof(int64_t) * 4 * (size_t)s.ns);
        s.sky_max = malloc(sizeof(int64_t) * 4 * (size_t)s.ns);
        s.left_add = malloc(sizeof(int64_t) * 4 * (size_t)s.ns);
        s.left_max = malloc(sizeof(int64_t) * 4 * (size_t)s.ns);
        s.sky_node = malloc(sizeof(int) * (size_t)s.maxlog);
        s.sky_old = malloc(sizeof(int64_t) * (size_t)s.maxlog);
        if (s.ns > 0 && s.sky_set && s.sky_max && s.left_add && s.left_max && s.sky_node &&
            s.sky_old && pack_rounds(&s, pressure, bytes)) {
            found = 1;
            for (int k = 0; k < n; k++) bufs[k].offset = bufs[k].size ? s.off[k] : 0;
        }
    }
    free(idx), free(bytes), free(s.lo), free(s.hi), free(s.rank), free(s.same), free(s.placed);
    free(s.mark);
    free(s.low), free(s.off), free(s.sky_set), free(s.sky_max), free(s.left_add), free(s.left_max);
    free(s.sky_node), free(s.sky_old);
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

/* May node i's output 0 take input 0's memory, as far as the two tensors go: both stored in the
 * dynamic region, the output first written at i, the same bytes and dtype (the callers add
 * what the op and the lifetimes must allow) */
static int may_take_memory(const sg_graph *g, int i) {
    const sg_node *nd = &g->n[i];
    const sg_tensor *x = &g->t[nd->in[0]], *y = &g->t[nd->out[0]];
    return !sg_tensor_virtual(x) && !sg_tensor_virtual(y) && !is_persistent(x->role) &&
           !is_persistent(y->role) && y->first == i && x->bytes == y->bytes && x->dtype == y->dtype;
}
/* a plain copy: accum writing over its output */
static int plain_copy(const sg_node *nd) {
    return nd->op == OP_ACCUM && !sg_accum_bits(nd, 0);
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
        if (!may_take_memory(g, i) || g->t[nd->in[0]].last != i) continue;
        p->buffer_of[find(p->buffer_of, nd->out[0])] = find(p->buffer_of, nd->in[0]);
        p->inplace_merges++;
    }
    for (int t = 0; t < g->nt; t++) p->buffer_of[t] = find(p->buffer_of, t);
    return SG_OK;
}

/* node j makes t from t2 in place: an elementwise in-place op whose input t2 dies there
 * (merge_inplace's rule) */
static int makes_in_place(const sg_graph *g, int j, int t2, int t) {
    const sg_node *nd = &g->n[j];
    return sg_ops[nd->op].inplace && !sg_accum_bits(nd, 0) && nd->in[0] == t2 && nd->out[0] == t &&
           g->t[t2].last == j;
}

/* May the members mem[0..nm) (two buffers' tensors) be one buffer? Every write into one of
 * them (an output of a node: its first write, or a later accumulation into it; a virtual
 * concatenation's write is its parts') must find each other member dead (last use before the
 * write), not yet started (first use after it), or the source the write makes it from in place
 * (makes_in_place); a copy from one member to another writes the bytes that are there. */
static int can_share(const sg_graph *g, const int *root, int ra, int rb, const int *mem, int nm) {
    int lo = g->nn, hi = -1;
    for (int k = 0; k < nm; k++) {
        if (g->t[mem[k]].first < lo) lo = g->t[mem[k]].first;
        if (g->t[mem[k]].last > hi) hi = g->t[mem[k]].last;
    }
    for (int j = lo; j <= hi; j++) {
        const sg_node *nd = &g->n[j];
        /* a copy within the buffer moves no bytes */
        if (plain_copy(nd) && (root[nd->in[0]] == ra || root[nd->in[0]] == rb) &&
            (root[nd->out[0]] == ra || root[nd->out[0]] == rb))
            continue;
        for (int o = 0; o < nd->nout; o++) {
            const sg_tensor *w = &g->t[nd->out[o]];
            const int np = w->nparts ? w->nparts : 1;
            for (int q = 0; q < np; q++) {
                const int t = w->nparts ? w->parts[q] : nd->out[o];
                if (root[t] != ra && root[t] != rb) continue;
                for (int k = 0; k < nm; k++) {
                    const int t2 = mem[k];
                    const sg_tensor *x = &g->t[t2];
                    if (t2 == t || x->last < j || x->first > j) continue;
                    if (j == g->t[t].first && makes_in_place(g, j, t2, t)) continue;
                    return 0;
                }
            }
        }
    }
    return 1;
}

/* Copies elided: a plain copy y = x (accum writing over y: the add's backward fans dy out to
 * both of its inputs' gradients, one copy each) takes x's memory even where x lives on, when
 * neither is written again while the other is still read (can_share): then the copy moves no
 * bytes (both backends skip an accum whose input and output are one buffer). merge_inplace
 * takes the copies whose input dies there; this pass the others (the add's first copy: 28 of
 * unet_cifar's 56 accum nodes, 348 MiB moved per step at batch 128 in bf16). The merged
 * buffers live longer, which can cost the placement its lower bound (sg_plan_layout). */
static int merge_copies(sg_plan *p) {
    const sg_graph *g = &p->g;
    int *root = p->buffer_of, *next = malloc(sizeof(int) * (size_t)g->nt),
        *mem = malloc(sizeof(int) * (size_t)g->nt);
    int *head = malloc(sizeof(int) * (size_t)g->nt), *tail = malloc(sizeof(int) * (size_t)g->nt);
    if (!next || !mem || !head || !tail) {
        free(next), free(mem), free(head), free(tail);
        return sg_set_error("out of host memory");
    }
    /* each buffer's tensors: a list from head[root] through next[] */
    for (int t = 0; t < g->nt; t++) head[t] = tail[t] = next[t] = -1;
    for (int t = 0; t < g->nt; t++) {
        const int r = root[t];
        if (head[r] < 0)
            head[r] = t;
        else
            next[tail[r]] = t;
        tail[r] = t;
    }
    for (int i = 0; i < g->nn; i++) {
        const sg_node *nd = &g->n[i];
        if (!plain_copy(nd) || !may_take_memory(g, i)) continue;
        const int ra = root[nd->in[0]], rb = root[nd->out[0]];
        if (ra == rb) continue;
        int nm = 0;
        for (int t = head[ra]; t >= 0; t = next[t]) mem[nm++] = t;
        for (int t = head[rb]; t >= 0; t = next[t]) mem[nm++] = t;
        if (!can_share(g, root, ra, rb, mem, nm)) continue;
        for (int t = head[rb]; t >= 0; t = next[t]) root[t] = ra;
        next[tail[ra]] = head[rb], tail[ra] = tail[rb];
        head[rb] = tail[rb] = -1;
        p->inplace_merges++, p->copies_shared++;
    }
    free(next), free(mem), free(head), free(tail);
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
    if (nown && best_top > bound && pack_at_bound(bufs, nown, g->nn, pressure, bound)) {
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

/* What the fusions (planner/fuse.c) leave unwritten: each virtual normalised tensor's bytes
 * (the forward pass's y; the backward pass recomputes its copy as the unfused plan does), and each
 * conv2d_add's conv output (the unfused plan's conv2d writes it, its add reads it back), and
 * each conv2d_sc's conv output, shortcut output and that one's gradient, and
 * each upconv2d's upsampled input u [N,2H,2W,Ci] in the activations' dtype, twice in training
 * (the unfused plan's upsample writes u and its conv reads it, forward and in the weight
 * gradient; the conv's data gradient writes du and the upsample's backward reads it back) */
static void fusion_totals(sg_plan *p) {
    const sg_graph *g = &p->g;
    for (int t = 0; t < g->nt; t++) {
        const sg_tensor *x = &g->t[t];
        if (x->vnorm < 0) continue;
        const int64_t b = SG_ALIGN_UP(sg_numel(x) * sg_dtype_size(x->dtype), SG_ALIGN);
        p->fused_norms++;
        p->unmaterialised_bytes += b;
    }
    for (int i = 0; i < g->nn; i++) {
        if (g->n[i].op != OP_CONV2D_ADD && g->n[i].op != OP_CONV2D_SC) continue;
        const sg_tensor *y = &g->t[g->n[i].out[0]];
        const int64_t b = SG_ALIGN_UP(sg_numel(y) * sg_dtype_size(y->dtype), SG_ALIGN);
        p->fused_residuals++;
        p->fused_residual_bytes += b;
        p->unmaterialised_bytes += b;
        if (g->n[i].op != OP_CONV2D_SC) continue;
        /* the folded shortcut's output, and in a training plan its gradient (conv2d_add's
         * copy of dy) */
        const int64_t sb = y->grad >= 0 ? 2 * b : b;
        p->fused_shortcuts++;
        p->fused_shortcut_bytes += sb;
        p->unmaterialised_bytes += sb;
    }
    for (int i = 0; i < g->nn; i++) {
        if (g->n[i].op != OP_UPCONV2D) continue;
        const sg_tensor *x = &g->t[g->n[i].in[0]];
        const int64_t b = SG_ALIGN_UP(4 * sg_numel(x) * sg_dtype_size(x->dtype), SG_ALIGN);
        const int64_t n = x->needs_grad && p->train ? 2 : 1;
        p->fused_upconvs++;
        p->fused_upconv_bytes += n * b;
        p->unmaterialised_bytes += n * b;
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

/* One layout from the lifetimes: the in-place merges (with the shared copies or not), then
 * the placement and its lower bound; everything it sets starts afresh */
static int layout_once(sg_plan *p, int share_copies) {
    free(p->buffer_of);
    p->buffer_of = NULL;
    p->inplace_merges = p->copies_shared = 0;
    p->peak_dynamic_bytes = 0, p->peak_node = 0;
    memset(p->role_bytes, 0, sizeof p->role_bytes);
    if (merge_inplace(p) || (share_copies && merge_copies(p))) return SG_ERR;
    place_persistent(p);
    return place_dynamic(p);
}

int sg_plan_layout(sg_plan *p) {
    classify_roles(&p->g);
    if (add_workspace(&p->g)) return SG_ERR;
    lifetimes(&p->g);
    /* shared copies save time, the arena memory: where the placement misses its lower bound
     * with them, the plan without them is laid out too, and the smaller arena wins (the shared
     * copies on a tie) */
    if (layout_once(p, 1)) return SG_ERR;
    if (p->copies_shared && p->arena_bytes > p->lower_bound_bytes) {
        const int64_t shared = p->arena_bytes;
        if (layout_once(p, 0)) return SG_ERR;
        if (p->arena_bytes >= shared && layout_once(p, 1)) return SG_ERR;
    }
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
        if (nd->op != OP_CONV2D && nd->op != OP_CONV2D_SC && nd->op != OP_CONV2D_BWD_DATA &&
            nd->op != OP_LINEAR && nd->op != OP_LINEAR_BWD_DATA)
            continue;
        const sg_tensor *a = &g->t[nd->in[0]], *w = &g->t[nd->in[1]];
        if (nd->op == OP_CONV2D_SC && w->dtype == a->dtype) w = &g->t[nd->in[4]];
        if (a->dtype != w->dtype)
            return sg_set_error("plan: node %d (%s) multiplies %s weights '%s' with %s "
                                "activations: a %s conv / linear reads its weights in that dtype "
                                "(bf16: the parameters' bf16 copy)",
                                i, sg_ops[nd->op].name, sg_dtype_names[w->dtype], w->name,
                                sg_dtype_names[a->dtype], sg_dtype_names[a->dtype]);
    }
    return verify_pairs(p);
}
