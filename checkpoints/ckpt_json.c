/* ckpt_json.c — strict JSON parser into a node array, path lookup, comparison (ckpt_json.h).
 *
 * Nodes live in one array; children of an array/object are linked through `next` in
 * document order. Strings (keys and values) are decoded into one NUL-separated byte pool. */
#include "checkpoints/ckpt_json.h"

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
} json_node;

struct ckpt_json {
    json_node *nodes;
    int n, cap;
    char *pool;
    size_t pool_len, pool_cap;
};

typedef struct {
    const char *s;
    size_t len, pos;
    ckpt_json *j;
    int err;
} parser;

static int fail_at(parser *p, const char *what) {
    if (p->err) return -1;
    int line = 1, col = 1;
    for (size_t i = 0; i < p->pos && i < p->len; i++) {
        if (p->s[i] == '\n')
            line++, col = 1;
        else
            col++;
    }
    sg_set_error("json: line %d col %d: %s", line, col, what);
    p->err = 1;
    return -1;
}

static int new_node(parser *p, int type) {
    ckpt_json *j = p->j;
    if (j->n == j->cap) {
        int cap = j->cap ? j->cap * 2 : 64;
        json_node *nn = realloc(j->nodes, (size_t)cap * sizeof *nn);
        if (!nn) return fail_at(p, "out of memory");
        j->nodes = nn, j->cap = cap;
    }
    json_node *nd = &j->nodes[j->n];
    memset(nd, 0, sizeof *nd);
    nd->type = type;
    nd->first = nd->last = nd->next = -1;
    nd->key = (size_t)-1;
    return j->n++;
}

static int pool_put(parser *p, const char *b, size_t n) {
    ckpt_json *j = p->j;
    if (j->pool_len + n > j->pool_cap) {
        size_t cap = j->pool_cap ? j->pool_cap : 256;
        while (cap < j->pool_len + n) cap *= 2;
        char *np = realloc(j->pool, cap);
        if (!np) return fail_at(p, "out of memory");
        j->pool = np, j->pool_cap = cap;
    }
    memcpy(j->pool + j->pool_len, b, n);
    j->pool_len += n;
    return 0;
}

static void skip_ws(parser *p) {
    while (p->pos < p->len) {
        char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

static int hex4(parser *p, unsigned *out) {
    if (p->len - p->pos < 4) return fail_at(p, "truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p->s[p->pos + (size_t)i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return fail_at(p, "bad hex digit in \\u escape");
        v = v * 16 + (unsigned)d;
    }
    p->pos += 4;
    *out = v;
    return 0;
}

/* Parse a string starting at the opening quote; decoded bytes + NUL go to the pool. */
static int parse_string(parser *p, size_t *out) {
    p->pos++; /* the quote */
    *out = p->j->pool_len;
    for (;;) {
        if (p->pos >= p->len) return fail_at(p, "unterminated string");
        unsigned char c = (unsigned char)p->s[p->pos];
        if (c == '"') {
            p->pos++;
            return pool_put(p, "", 1);
        }
        if (c < 0x20) return fail_at(p, "control character in string");
        if (c != '\\') {
            size_t start = p->pos;
            while (p->pos < p->len && p->s[p->pos] != '"' && p->s[p->pos] != '\\' &&
                   (unsigned char)p->s[p->pos] >= 0x20)
                p->pos++;
            if (pool_put(p, p->s + start, p->pos - start)) return -1;
            continue;
        }
        p->pos++;
        if (p->pos >= p->len) return fail_at(p, "unterminated escape");
        char e = p->s[p->pos++];
        char one;
        switch (e) {
        case '"':
            one = '"';
            break;
        case '\\':
            one = '\\';
            break;
        case '/':
            one = '/';
            break;
        case 'b':
            one = '\b';
            break;
        case 'f':
            one = '\f';
            break;
        case 'n':
            one = '\n';
            break;
        case 'r':
            one = '\r';
            break;
        case 't':
            one = '\t';
            break;
        case 'u': {
            unsigned cp;
            if (hex4(p, &cp)) return -1;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned lo;
                if (p->len - p->pos < 2 || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u')
                    return fail_at(p, "lone high surrogate in \\u escape");
                p->pos += 2;
                if (hex4(p, &lo)) return -1;
                if (lo < 0xDC00 || lo > 0xDFFF)
                    return fail_at(p, "bad low surrogate in \\u escape");
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                return fail_at(p, "lone low surrogate in \\u escape");
            }
            if (cp == 0) return fail_at(p, "\\u0000 is not supported");
            char u[4];
            size_t n;
            if (cp < 0x80) {
                u[0] = (char)cp, n = 1;
            } else if (cp < 0x800) {
                u[0] = (char)(0xC0 | cp >> 6), u[1] = (char)(0x80 | (cp & 0x3F)), n = 2;
            } else if (cp < 0x10000) {
                u[0] = (char)(0xE0 | cp >> 12), u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
                u[2] = (char)(0x80 | (cp & 0x3F)), n = 3;
            } else {
                u[0] = (char)(0xF0 | cp >> 18), u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
                u[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), u[3] = (char)(0x80 | (cp & 0x3F));
                n = 4;
            }
            if (pool_put(p, u, n)) return -1;
            continue;
        }
        default:
            return fail_at(p, "bad escape in string");
        }
        if (pool_put(p, &one, 1)) return -1;
    }
}

static int is_digit(char c) {
    return c >= '0' && c <= '9';
}

static int parse_number(parser *p, json_node *nd) {
    size_t start = p->pos, i = p->pos;
    int is_int = 1;
    if (i < p->len && p->s[i] == '-') i++;
    if (i >= p->len || !is_digit(p->s[i])) return fail_at(p, "bad number");
    if (p->s[i] == '0') {
        i++;
    } else {
        while (i < p->len && is_digit(p->s[i])) i++;
    }
    if (i < p->len && p->s[i] == '.') {
        is_int = 0, i++;
        if (i >= p->len || !is_digit(p->s[i])) return fail_at(p, "bad number (digits after '.')");
        while (i < p->len && is_digit(p->s[i])) i++;
    }
    if (i < p->len && (p->s[i] == 'e' || p->s[i] == 'E')) {
        is_int = 0, i++;
        if (i < p->len && (p->s[i] == '+' || p->s[i] == '-')) i++;
        if (i >= p->len || !is_digit(p->s[i])) return fail_at(p, "bad number (exponent)");
        while (i < p->len && is_digit(p->s[i])) i++;
    }
    char tmp[64];
    size_t n = i - start;
    if (n >= sizeof tmp) {
        /* long literals: keep the value approximately, as a double */
        char *big = malloc(n + 1);
        if (!big) return fail_at(p, "out of memory");
        memcpy(big, p->s + start, n);
        big[n] = 0;
        nd->num = strtod(big, NULL);
        free(big);
        nd->is_int = 0;
    } else {
        memcpy(tmp, p->s + start, n);
        tmp[n] = 0;
        nd->num = strtod(tmp, NULL);
        nd->is_int = 0;
        if (is_int) {
            /* exact int64 when it fits */
            int neg = tmp[0] == '-';
            uint64_t v = 0;
            int ok = 1;
            for (size_t k = (size_t)neg; k < n; k++) {
                unsigned d = (unsigned)(tmp[k] - '0');
                if (v > (UINT64_MAX - d) / 10) {
                    ok = 0;
                    break;
                }
                v = v * 10 + d;
            }
            if (ok && (neg ? v <= (uint64_t)INT64_MAX + 1 : v <= (uint64_t)INT64_MAX)) {
                nd->is_int = 1;
                nd->inum =
                    neg ? (v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v) : (int64_t)v;
            }
        }
    }
    if (!isfinite(nd->num)) return fail_at(p, "number out of range");
    p->pos = i;
    return 0;
}

static int literal(parser *p, const char *word) {
    size_t n = strlen(word);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0)
        return fail_at(p, "unexpected character");
    p->pos += n;
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

static _Thread_local const char *sort_pool; /* qsort has no context argument */
static int cmp_keys(const void *a, const void *b) {
    return strcmp(sort_pool + *(const size_t *)a, sort_pool + *(const size_t *)b);
}

/* reject duplicate keys: sort the keys of one object and compare neighbours */
static int check_duplicates(parser *p, int obj) {
    ckpt_json *j = p->j;
    int n = j->nodes[obj].count;
    if (n < 2) return 0;
    size_t *keys = malloc((size_t)n * sizeof *keys);
    if (!keys) return fail_at(p, "out of memory");
    int k = 0;
    for (int c = j->nodes[obj].first; c >= 0; c = j->nodes[c].next) keys[k++] = j->nodes[c].key;
    sort_pool = j->pool;
    qsort(keys, (size_t)n, sizeof *keys, cmp_keys);
    int dup = -1;
    for (int i = 1; i < n && dup < 0; i++)
        if (strcmp(j->pool + keys[i - 1], j->pool + keys[i]) == 0) dup = i;
    if (dup >= 0) {
        char msg[160];
        snprintf(msg, sizeof msg, "duplicate key \"%.100s\"", j->pool + keys[dup]);
        free(keys);
        return fail_at(p, msg);
    }
    free(keys);
    return 0;
}

static int parse_value(parser *p, int depth);

static int parse_container(parser *p, int depth, int is_obj) {
    int node = new_node(p, is_obj ? CKPT_JSON_OBJECT : CKPT_JSON_ARRAY);
    if (node < 0) return -1;
    size_t open_pos = p->pos;
    p->pos++;
    skip_ws(p);
    char close = is_obj ? '}' : ']';
    if (p->pos < p->len && p->s[p->pos] == close) {
        p->pos++;
        return node;
    }
    for (;;) {
        size_t key = (size_t)-1;
        if (is_obj) {
            skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != '"') return fail_at(p, "expected a key");
            if (parse_string(p, &key)) return -1;
            skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':') return fail_at(p, "expected ':'");
            p->pos++;
        }
        int child = parse_value(p, depth + 1);
        if (child < 0) return -1;
        p->j->nodes[child].key = key;
        append_child(p->j, node, child);
        skip_ws(p);
        if (p->pos >= p->len) {
            p->pos = open_pos;
            return fail_at(p, is_obj ? "unterminated object" : "unterminated array");
        }
        char c = p->s[p->pos++];
        if (c == close) break;
        if (c != ',') {
            p->pos--;
            return fail_at(p, is_obj ? "expected ',' or '}'" : "expected ',' or ']'");
        }
    }
    if (is_obj && check_duplicates(p, node)) return -1;
    return node;
}

static int parse_value(parser *p, int depth) {
    if (depth >= JSON_MAX_DEPTH) return fail_at(p, "nested too deeply");
    skip_ws(p);
    if (p->pos >= p->len) return fail_at(p, "unexpected end of input");
    char c = p->s[p->pos];
    int node;
    switch (c) {
    case '{':
        return parse_container(p, depth, 1);
    case '[':
        return parse_container(p, depth, 0);
    case '"': {
        size_t off;
        node = new_node(p, CKPT_JSON_STRING);
        if (node < 0 || parse_string(p, &off)) return -1;
        p->j->nodes[node].str = off;
        return node;
    }
    case 't':
    case 'f':
        node = new_node(p, CKPT_JSON_BOOL);
        if (node < 0 || literal(p, c == 't' ? "true" : "false")) return -1;
        p->j->nodes[node].boolean = c == 't';
        return node;
    case 'n':
        node = new_node(p, CKPT_JSON_NULL);
        if (node < 0 || literal(p, "null")) return -1;
        return node;
    default:
        if (c != '-' && !is_digit(c)) return fail_at(p, "unexpected character");
        node = new_node(p, CKPT_JSON_NUMBER);
        if (node < 0) return -1;
        {
            json_node tmp = p->j->nodes[node];
            if (parse_number(p, &tmp)) return -1;
            p->j->nodes[node] = tmp;
        }
        return node;
    }
}

ckpt_json *ckpt_json_parse(const char *text, size_t len) {
    ckpt_json *j = calloc(1, sizeof *j);
    if (!j) {
        sg_set_error("json: out of memory");
        return NULL;
    }
    parser p = {.s = text ? text : "", .len = text ? len : 0, .pos = 0, .j = j, .err = 0};
    int root = parse_value(&p, 0);
    if (root == 0) {
        skip_ws(&p);
        if (p.pos < p.len) fail_at(&p, "trailing characters after the value");
    }
    if (p.err || root != 0) {
        if (!p.err) fail_at(&p, "internal error");
        ckpt_json_free(j);
        return NULL;
    }
    return j;
}

void ckpt_json_free(ckpt_json *j) {
    if (!j) return;
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

/* ---- rendering ---- */

typedef struct {
    char *buf;
    size_t cap, len;
} sink;

static void put(sink *o, const char *s, size_t n) {
    if (o->len < o->cap) {
        size_t room = o->cap - o->len;
        memcpy(o->buf + o->len, s, n < room ? n : room);
    }
    o->len += n;
}

static void put_string(sink *o, const char *s) {
    put(o, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\', esc[1] = (char)c;
            put(o, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            put(o, esc, 6);
        } else {
            put(o, (const char *)&c, 1);
        }
    }
    put(o, "\"", 1);
}

static void render(const ckpt_json *j, int node, sink *o) {
    const json_node *nd = &j->nodes[node];
    char num[40];
    switch (nd->type) {
    case CKPT_JSON_NULL:
        put(o, "null", 4);
        break;
    case CKPT_JSON_BOOL:
        nd->boolean ? put(o, "true", 4) : put(o, "false", 5);
        break;
    case CKPT_JSON_NUMBER:
        if (nd->is_int)
            snprintf(num, sizeof num, "%lld", (long long)nd->inum);
        else /* the shortest of %.15g / %.16g / %.17g that reads back exactly */
            for (int prec = 15; prec <= 17; prec++) {
                snprintf(num, sizeof num, "%.*g", prec, nd->num);
                if (strtod(num, NULL) == nd->num) break;
            }
        put(o, num, strlen(num));
        break;
    case CKPT_JSON_STRING:
        put_string(o, j->pool + nd->str);
        break;
    default: {
        int is_obj = nd->type == CKPT_JSON_OBJECT;
        put(o, is_obj ? "{" : "[", 1);
        for (int c = nd->first; c >= 0; c = j->nodes[c].next) {
            if (c != nd->first) put(o, ",", 1);
            if (is_obj) {
                put_string(o, j->pool + j->nodes[c].key);
                put(o, ":", 1);
            }
            render(j, c, o);
        }
        put(o, is_obj ? "}" : "]", 1);
    }
    }
}

size_t ckpt_json_render(const ckpt_json *j, int node, char *buf, size_t cap) {
    sink o = {buf, cap, 0};
    if (valid(j, node)) render(j, node, &o);
    if (cap) buf[o.len < cap ? o.len : cap - 1] = 0;
    return o.len;
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
        if (ckpt_json_diff(c, nc, e, ne, where, sizeof where)) {
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
