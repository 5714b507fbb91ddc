/* ckpt_json.c — strict JSON parser into a node array, path lookup, comparison (ckpt_json.h).
 *
 * Nodes live in one array; children of an array/object are linked through `next` in
 * document order. Strings (keys and values) are decoded into one NUL-separated byte pool. */
#include "checkpoints/ckpt_json.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sg_base.h"

#define JSON_MAX_DEPTH 64

typedef struct {
    int type;
    int first, last, next, count; /* children (arrays/objects), sibling link */
    size_t key;                   /* offset into pool, or (size_t)-1 */
    size_t str;                   /* string value: offset into pool */
    double num;
    int64_t inum;
    int is_int;
    int boolean;
    const json_t *v; /* the jansson value (rendering) */
} json_node;

struct ckpt_json {
    json_t *root; /* jansson's tree, owned */
    json_node *nodes;
    int n, cap;
    char *pool;
    size_t pool_len, pool_cap;
};

/* ---- parsing: jansson parses (strict: no NaN, no comments, no trailing commas, duplicate
 * keys and \u0000 refused); the tree is then indexed into nodes addressed by int ids */

static int new_node(ckpt_json *j, int type, const json_t *v) {
    if (j->n == j->cap) {
        int cap = j->cap ? j->cap * 2 : 64;
        json_node *nn = realloc(j->nodes, (size_t)cap * sizeof *nn);
        if (!nn) return -1;
        j->nodes = nn, j->cap = cap;
    }
    json_node *nd = &j->nodes[j->n];
    memset(nd, 0, sizeof *nd);
    nd->type = type;
    nd->first = nd->last = nd->next = -1;
    nd->key = (size_t)-1;
    nd->v = v;
    return j->n++;
}

static int pool_put(ckpt_json *j, const char *b, size_t n, size_t *off) {
    if (j->pool_len + n + 1 > j->pool_cap) {
        size_t cap = j->pool_cap ? j->pool_cap : 256;
        while (cap < j->pool_len + n + 1) cap *= 2;
        char *np = realloc(j->pool, cap);
        if (!np) return -1;
        j->pool = np, j->pool_cap = cap;
    }
    *off = j->pool_len;
    memcpy(j->pool + j->pool_len, b, n);
    j->pool[j->pool_len + n] = 0;
    j->pool_len += n + 1;
    return 0;
}

static void append_child(ckpt_json *j, int parent, int child) {
    json_node *pn = &j->nodes[parent];
    if (pn->last < 0)
        pn->first = child;
    else
        j->nodes[pn->last].next = child;
    pn->last = child;
    pn->count++;
}

/* Index v (and its children) as node ids in document order; -1 when out of memory or deeper
 * than JSON_MAX_DEPTH (*deep is set then). ints_as_real: the document held an integer beyond
 * int64 (a uint64 seed), so jansson read every number as a double: integral values within
 * 2^53 are integers again, exactly. */
/* v is not const only because jansson's object iteration takes a json_t * */
static int index_value(ckpt_json *j, json_t *v, int depth, int ints_as_real, int *deep) {
    if (depth >= JSON_MAX_DEPTH) return *deep = 1, -1;
    static const int kinds[] = {[JSON_OBJECT] = CKPT_JSON_OBJECT, [JSON_ARRAY] = CKPT_JSON_ARRAY,
                                [JSON_STRING] = CKPT_JSON_STRING, [JSON_INTEGER] = CKPT_JSON_NUMBER,
                                [JSON_REAL] = CKPT_JSON_NUMBER,   [JSON_TRUE] = CKPT_JSON_BOOL,
                                [JSON_FALSE] = CKPT_JSON_BOOL,    [JSON_NULL] = CKPT_JSON_NULL};
    int node = new_node(j, kinds[json_typeof(v)], v);
    if (node < 0) return -1;
    json_node *nd = &j->nodes[node];
    if (json_is_integer(v)) {
        nd->is_int = 1, nd->inum = json_integer_value(v), nd->num = (double)nd->inum;
    } else if (json_is_real(v)) {
        nd->num = json_real_value(v);
        if (ints_as_real && nd->num == floor(nd->num) && fabs(nd->num) <= 0x1p53)
            nd->is_int = 1, nd->inum = (int64_t)nd->num;
    } else if (json_is_boolean(v)) {
        nd->boolean = json_is_true(v);
    } else if (json_is_string(v)) {
        size_t off;
        if (pool_put(j, json_string_value(v), json_string_length(v), &off)) return -1;
        j->nodes[node].str = off;
    } else if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++) {
            int c = index_value(j, json_array_get(v, i), depth + 1, ints_as_real, deep);
            if (c < 0) return -1;
            append_child(j, node, c);
        }
    } else if (json_is_object(v)) {
        const char *key;
        json_t *val;
        json_object_foreach(v, key, val) {
            size_t off;
            if (pool_put(j, key, strlen(key), &off)) return -1;
            int c = index_value(j, val, depth + 1, ints_as_real, deep);
            if (c < 0) return -1;
            j->nodes[c].key = off;
            append_child(j, node, c);
        }
    }
    return node;
}

json_t *ckpt_meta_load(const char *text, char *err, size_t cap) {
    json_error_t e;
    const size_t flags = JSON_DECODE_ANY | JSON_REJECT_DUPLICATES;
    json_t *j = json_loads(text, flags, &e);
    if (!j && json_error_code(&e) == json_error_numeric_overflow)
        j = json_loads(text, flags | JSON_DECODE_INT_AS_REAL, NULL);
    if (!j && err) snprintf(err, cap, "line %d col %d: %s", e.line, e.column, e.text);
    return j;
}

ckpt_json *ckpt_json_parse(const char *text, size_t len) {
    ckpt_json *j = calloc(1, sizeof *j);
    if (!j) return sg_set_error("json: out of memory"), NULL;
    const size_t flags = JSON_DECODE_ANY | JSON_REJECT_DUPLICATES;
    json_error_t err;
    int ints_as_real = 0;
    j->root = json_loadb(text ? text : "", text ? len : 0, flags, &err);
    if (!j->root && json_error_code(&err) == json_error_numeric_overflow) {
        json_error_t err2; /* an integer past int64: read numbers as doubles */
        j->root = json_loadb(text, len, flags | JSON_DECODE_INT_AS_REAL, &err2);
        if (j->root) ints_as_real = 1;
    }
    if (!j->root) {
        sg_set_error("json: line %d col %d: %s", err.line < 1 ? 1 : err.line,
                     err.column < 1 ? 1 : err.column, err.text);
        return ckpt_json_free(j), NULL;
    }
    int deep = 0;
    if (index_value(j, j->root, 0, ints_as_real, &deep) != 0) {
        sg_set_error(deep ? "json: line 1 col 1: nested deeper than %d" : "json: out of memory",
                     JSON_MAX_DEPTH);
        return ckpt_json_free(j), NULL;
    }
    return j;
}

void ckpt_json_free(ckpt_json *j) {
    if (!j) return;
    json_decref(j->root);
    free(j->nodes);
    free(j->pool);
    free(j);
}

/* ---- the tree ---- */

static int valid(const ckpt_json *j, int node) {
    return j && node >= 0 && node < j->n;
}

int ckpt_json_type(const ckpt_json *j, int node) {
    return valid(j, node) ? j->nodes[node].type : -1;
}
int ckpt_json_count(const ckpt_json *j, int node) {
    return valid(j, node) ? j->nodes[node].count : 0;
}
int ckpt_json_child(const ckpt_json *j, int node, int k) {
    if (!valid(j, node) || k < 0) return -1;
    int c = j->nodes[node].first;
    while (c >= 0 && k-- > 0) c = j->nodes[c].next;
    return c;
}
const char *ckpt_json_key(const ckpt_json *j, int node) {
    if (!valid(j, node) || j->nodes[node].key == (size_t)-1) return NULL;
    return j->pool + j->nodes[node].key;
}
const char *ckpt_json_string(const ckpt_json *j, int node) {
    if (!valid(j, node) || j->nodes[node].type != CKPT_JSON_STRING) return NULL;
    return j->pool + j->nodes[node].str;
}
double ckpt_json_number(const ckpt_json *j, int node) {
    return valid(j, node) && j->nodes[node].type == CKPT_JSON_NUMBER ? j->nodes[node].num : 0;
}
int ckpt_json_is_integer(const ckpt_json *j, int node) {
    return valid(j, node) && j->nodes[node].type == CKPT_JSON_NUMBER && j->nodes[node].is_int;
}
int64_t ckpt_json_integer(const ckpt_json *j, int node) {
    return ckpt_json_is_integer(j, node) ? j->nodes[node].inum : 0;
}
int ckpt_json_bool(const ckpt_json *j, int node) {
    return valid(j, node) && j->nodes[node].type == CKPT_JSON_BOOL && j->nodes[node].boolean;
}

int ckpt_json_find(const ckpt_json *j, int node, const char *path) {
    if (!valid(j, node) || !path) return -1;
    const char *s = path;
    while (*s) {
        if (*s == '.') {
            s++;
            continue;
        }
        int cur = node;
        if (*s == '[' || (*s >= '0' && *s <= '9' && j->nodes[cur].type == CKPT_JSON_ARRAY)) {
            int bracket = *s == '[';
            if (bracket) s++;
            if (*s < '0' || *s > '9') return -1;
            long k = 0;
            while (*s >= '0' && *s <= '9') {
                k = k * 10 + (*s++ - '0');
                if (k > 1 << 30) return -1;
            }
            if (bracket) {
                if (*s != ']') return -1;
                s++;
            }
            if (j->nodes[cur].type != CKPT_JSON_ARRAY) return -1;
            node = ckpt_json_child(j, cur, (int)k);
            if (node < 0) return -1;
            continue;
        }
        size_t n = strcspn(s, ".[");
        if (j->nodes[cur].type != CKPT_JSON_OBJECT) return -1;
        int found = -1;
        for (int c = j->nodes[cur].first; c >= 0; c = j->nodes[c].next) {
            const char *key = j->pool + j->nodes[c].key;
            if (strlen(key) == n && memcmp(key, s, n) == 0) {
                found = c;
                break;
            }
        }
        if (found < 0) return -1;
        node = found;
        s += n;
    }
    return node;
}

static int get_typed(const ckpt_json *j, const char *path, int type, const char *what) {
    int node = ckpt_json_find(j, 0, path);
    if (node < 0) return sg_set_error("json: no field \"%s\"", path), -1;
    if (j->nodes[node].type != type) return sg_set_error("json: \"%s\" is not %s", path, what), -1;
    return node;
}

int ckpt_json_get_int(const ckpt_json *j, const char *path, int64_t *out) {
    int node = get_typed(j, path, CKPT_JSON_NUMBER, "a number");
    if (node < 0) return SG_ERR;
    if (!j->nodes[node].is_int) return sg_set_error("json: \"%s\" is not an integer", path);
    *out = j->nodes[node].inum;
    return SG_OK;
}

int ckpt_json_get_double(const ckpt_json *j, const char *path, double *out) {
    int node = get_typed(j, path, CKPT_JSON_NUMBER, "a number");
    if (node < 0) return SG_ERR;
    *out = j->nodes[node].num;
    return SG_OK;
}

int ckpt_json_get_bool(const ckpt_json *j, const char *path, int *out) {
    int node = get_typed(j, path, CKPT_JSON_BOOL, "a boolean");
    if (node < 0) return SG_ERR;
    *out = j->nodes[node].boolean;
    return SG_OK;
}

int ckpt_json_get_string(const ckpt_json *j, const char *path, char *buf, size_t cap) {
    int node = get_typed(j, path, CKPT_JSON_STRING, "a string");
    if (node < 0) return SG_ERR;
    const char *s = j->pool + j->nodes[node].str;
    size_t n = strlen(s);
    if (n >= cap) return sg_set_error("json: \"%s\" is longer than %zu bytes", path, cap - 1);
    memcpy(buf, s, n + 1);
    return SG_OK;
}

/* ---- rendering (jansson writes; a number alone is written in its shortest exact form) ---- */

size_t ckpt_json_render(const ckpt_json *j, int node, char *buf, size_t cap) {
    char num[40], *text = NULL;
    const char *out = "";
    if (valid(j, node) && j->nodes[node].type == CKPT_JSON_NUMBER) {
        const json_node *nd = &j->nodes[node];
        if (nd->is_int)
            snprintf(num, sizeof num, "%lld", (long long)nd->inum);
        else /* the shortest of %.15g / %.16g / %.17g that reads back exactly */
            for (int prec = 15; prec <= 17; prec++) {
                snprintf(num, sizeof num, "%.*g", prec, nd->num);
                if (strtod(num, NULL) == nd->num) break;
            }
        out = num;
    } else if (valid(j, node)) {
        text =
            json_dumps(j->nodes[node].v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17));
        out = text ? text : "";
    }
    size_t n = strlen(out);
    if (cap) {
        size_t k = n < cap ? n : cap - 1;
        memcpy(buf, out, k);
        buf[k] = 0;
    }
    free(text);
    return n;
}

/* ---- comparison ---- */

static void describe(const ckpt_json *j, int node, char *buf, size_t cap) {
    if (node < 0) {
        snprintf(buf, cap, "(absent)");
        return;
    }
    size_t need = ckpt_json_render(j, node, buf, cap);
    if (need >= cap && cap > 4) strcpy(buf + cap - 4, "...");
}

static int diff_rec(const ckpt_json *a, int na, const ckpt_json *b, int nb, char *path, size_t plen,
                    size_t pcap, char *where, size_t cap) {
    const json_node *x = &a->nodes[na], *y = &b->nodes[nb];
    int same = x->type == y->type;
    if (same) {
        switch (x->type) {
        case CKPT_JSON_BOOL:
            same = x->boolean == y->boolean;
            break;
        case CKPT_JSON_NUMBER:
            same = x->is_int && y->is_int ? x->inum == y->inum : x->num == y->num;
            break;
        case CKPT_JSON_STRING:
            same = strcmp(a->pool + x->str, b->pool + y->str) == 0;
            break;
        case CKPT_JSON_ARRAY:
        case CKPT_JSON_OBJECT: {
            int is_obj = x->type == CKPT_JSON_OBJECT;
            int k = 0;
            for (int c = x->first; c >= 0; c = a->nodes[c].next, k++) {
                const char *key = is_obj ? a->pool + a->nodes[c].key : "";
                int d = -1;
                if (is_obj) {
                    for (int e = y->first; e >= 0; e = b->nodes[e].next)
                        if (strcmp(key, b->pool + b->nodes[e].key) == 0) d = e;
                } else {
                    d = ckpt_json_child(b, nb, k);
                }
                size_t add = is_obj ? (size_t)snprintf(path + plen, pcap - plen, "%s%s",
                                                       plen ? "." : "", key)
                                    : (size_t)snprintf(path + plen, pcap - plen, "[%d]", k);
                size_t nplen = plen + add < pcap ? plen + add : pcap - 1;
                if (d < 0) {
                    char va[96];
                    describe(a, c, va, sizeof va);
                    if (where) snprintf(where, cap, "%s: %s vs (absent)", path, va);
                    return 1;
                }
                if (diff_rec(a, c, b, d, path, nplen, pcap, where, cap)) return 1;
                path[plen] = 0;
            }
            /* members of b that a lacks */
            k = 0;
            for (int e = y->first; e >= 0; e = b->nodes[e].next, k++) {
                int present = 0;
                if (is_obj) {
                    for (int c = x->first; c >= 0; c = a->nodes[c].next)
                        if (strcmp(b->pool + b->nodes[e].key, a->pool + a->nodes[c].key) == 0)
                            present = 1;
                } else {
                    present = k < x->count;
                }
                if (!present) {
                    char vb[96];
                    describe(b, e, vb, sizeof vb);
                    if (is_obj)
                        snprintf(path + plen, pcap - plen, "%s%s", plen ? "." : "",
                                 b->pool + b->nodes[e].key);
                    else
                        snprintf(path + plen, pcap - plen, "[%d]", k);
                    if (where) snprintf(where, cap, "%s: (absent) vs %s", path, vb);
                    return 1;
                }
            }
            return 0;
        }
        default:
            break;
        }
    }
    if (!same && where) {
        char va[96], vb[96];
        describe(a, na, va, sizeof va);
        describe(b, nb, vb, sizeof vb);
        snprintf(where, cap, "%s: %s vs %s", plen ? path : "(root)", va, vb);
    }
    return !same;
}

int ckpt_json_diff(const ckpt_json *a, int na, const ckpt_json *b, int nb, char *where,
                   size_t cap) {
    char path[512] = "";
    if (where && cap) where[0] = 0;
    if (!valid(a, na) || !valid(b, nb)) {
        if (where) snprintf(where, cap, "(absent)");
        return !(valid(a, na) == valid(b, nb));
    }
    return diff_rec(a, na, b, nb, path, 0, sizeof path, where, cap);
}

int ckpt_meta_check_config(const char *expected_meta, const char *ckpt_meta) {
    ckpt_json *e = ckpt_json_parse(expected_meta, strlen(expected_meta));
    if (!e) return sg_set_error("expected metadata: %s", sg_last_error());
    ckpt_json *c = ckpt_json_parse(ckpt_meta, strlen(ckpt_meta));
    if (!c) {
        ckpt_json_free(e);
        return sg_set_error("checkpoint metadata: %s", sg_last_error());
    }
    static const char *const keys[] = {"model", "config", "plan_hash"};
    int rc = SG_OK;
    for (int k = 0; k < SG_ARRAY_LEN(keys) && rc == SG_OK; k++) {
        int ne = ckpt_json_find(e, 0, keys[k]);
        if (ne < 0) continue;
        int nc = ckpt_json_find(c, 0, keys[k]);
        if (nc < 0) {
            rc = sg_set_error("checkpoint is from another model config: it has no \"%s\"", keys[k]);
            break;
        }
        char where[400];
        const int differs = ckpt_json_diff(c, nc, e, ne, where, sizeof where);
        if (differs && !strcmp(keys[k], "plan_hash")) {
            /* model and config agreed (they come first): the same config, another plan */
            const char *v = strstr(where, ": ");
            rc = sg_set_error("checkpoint's plan differs from this build's (plan_hash %s; "
                              "checkpoint vs here): the model config is the same, but this "
                              "build computes or lays out the step differently (another "
                              "stepgraph version), so the run cannot continue with the same "
                              "bits; start a new run from its weights with train --init-from",
                              v ? v + 2 : where);
        } else if (differs) {
            /* where = "<sub-path>: <ckpt value> vs <expected value>" */
            char *sep = strstr(where, ": ");
            char *vs = sep ? strstr(sep, " vs ") : NULL;
            if (sep && vs) {
                *sep = 0, *vs = 0;
                const char *sub = strcmp(where, "(root)") == 0 ? "" : where;
                /* the one config field with a meaning when absent: checkpoints written before
                 * the downsampling padding was a model property padded symmetrically */
                int old_pad = !strcmp(keys[k], "config") && !strcmp(sub, "down_pad") &&
                              !strcmp(sep + 2, "(absent)");
                if (old_pad && !strcmp(vs + 4, "\"symmetric\""))
                    rc = sg_set_error("checkpoint was written before config.down_pad existed: "
                                      "its padding (symmetric) is this model's, but its plan "
                                      "is not this build's, so it cannot be resumed; start "
                                      "from its weights with train --init-from instead");
                else
                    rc = sg_set_error("checkpoint is from another model config: %s%s%s is %s "
                                      "in the checkpoint, %s expected",
                                      keys[k], *sub ? "." : "", sub,
                                      old_pad ? "absent (written before down_pad existed: "
                                                "\"symmetric\")"
                                              : sep + 2,
                                      vs + 4);
            } else {
                rc = sg_set_error("checkpoint is from another model config: %s differs (%s)",
                                  keys[k], where);
            }
        }
    }
    ckpt_json_free(e);
    ckpt_json_free(c);
    return rc;
}
