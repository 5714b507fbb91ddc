/* ckpt_safetensors.c — a small, bounds-checked safetensors reader, and diffusers UNet2DModel
 * weights read into stepgraph's names and layouts (ckpt.h, "safetensors").
 *
 * The format: u64 little-endian header length N, N bytes of a JSON object
 *   {"<name>": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...,
 *    "__metadata__": {"<key>": "<string>", ...}}
 * then the data; offsets are relative to the end of the header. Everything is checked before
 * it is used: the header length against the file size, every entry's dtype and shape, and
 * that numel x element size == end - begin <= the data's length, so a corrupt or hostile file
 * is a clear error, never a read out of bounds.
 *
 * Layouts (the inverse of ckpt_export.c, docs/model.md): stepgraph conv weights [Co][K][K][Ci]
 * come from OIHW [Co][Ci][K][K]; "*.to_qkv.{weight,bias}" [3C][1][1][C] / [3C] from the rows
 * of to_q, to_k, to_v (Linear [C][C] / [C]); "*.to_out.0.weight" [C][1][1][Ci] from Linear
 * [C][Ci]. Attention weights of diffusers' deprecated attention block (query, key, value,
 * proj_attn: as in google/ddpm-cifar10-32's files) are accepted under those names too.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoints/ckpt_internal.h"
#include "checkpoints/ckpt_json.h"

#define ST_MAX_HEADER (100ll << 20) /* what the safetensors library itself allows */
#define ST_MAX_DIMS 8

typedef enum { ST_F32 = 0, ST_F16, ST_BF16, ST_OTHER } st_dtype;

typedef struct {
    char *name;
    st_dtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    int64_t numel, begin, end; /* begin/end: from the start of the data */
    int used;
} st_entry;

struct ckpt_st {
    char path[4096];
    FILE *fp;
    int64_t data_off, data_len;
    int n;
    st_entry *e;
    char model[64]; /* __metadata__.model when present */
};

void ckpt_st_close(ckpt_st *s) {
    if (!s) return;
    if (s->fp) fclose(s->fp);
    for (int i = 0; i < s->n; i++) free(s->e[i].name);
    free(s->e);
    free(s);
}

static int st_elsize(st_dtype d) {
    return d == ST_F32 ? 4 : 2;
}

/* One tensor entry of the header; SG_ERR naming the tensor and what is wrong. */
static int parse_entry(ckpt_st *s, const ckpt_json *j, int node, st_entry *e) {
    const char *name = ckpt_json_key(j, node);
    if (ckpt_json_type(j, node) != CKPT_JSON_OBJECT)
        return sg_set_error("%s: tensor '%s' is not described by an object", s->path, name);
    e->name = strdup(name);
    if (!e->name) return sg_set_error("out of memory");
    int dt = ckpt_json_find(j, node, "dtype"), sh = ckpt_json_find(j, node, "shape");
    int off = ckpt_json_find(j, node, "data_offsets");
    const char *dts = dt >= 0 ? ckpt_json_string(j, dt) : NULL;
    if (!dts || sh < 0 || ckpt_json_type(j, sh) != CKPT_JSON_ARRAY || off < 0 ||
        ckpt_json_type(j, off) != CKPT_JSON_ARRAY || ckpt_json_count(j, off) != 2)
        return sg_set_error("%s: tensor '%s' lacks dtype, shape or data_offsets [begin, end]",
                            s->path, name);
    e->dtype = !strcmp(dts, "F32")    ? ST_F32
               : !strcmp(dts, "F16")  ? ST_F16
               : !strcmp(dts, "BF16") ? ST_BF16
                                      : ST_OTHER;
    static const char *const known[] = {"F64", "I64", "U64", "I32",  "U32",     "I16",
                                        "U16", "I8",  "U8",  "BOOL", "F8_E4M3", "F8_E5M2"};
    int ok = e->dtype != ST_OTHER;
    for (int k = 0; k < SG_ARRAY_LEN(known) && !ok; k++) ok = !strcmp(dts, known[k]);
    if (!ok) return sg_set_error("%s: tensor '%s' has unknown dtype '%s'", s->path, name, dts);
    e->ndim = ckpt_json_count(j, sh);
    if (e->ndim > ST_MAX_DIMS)
        return sg_set_error("%s: tensor '%s' has %d dimensions", s->path, name, e->ndim);
    e->numel = 1;
    for (int d = 0; d < e->ndim; d++) {
        int c = ckpt_json_child(j, sh, d);
        if (!ckpt_json_is_integer(j, c) || ckpt_json_integer(j, c) < 0 ||
            ckpt_json_integer(j, c) > s->data_len)
            return sg_set_error("%s: tensor '%s' has a bad shape", s->path, name);
        e->shape[d] = ckpt_json_integer(j, c);
        /* numel <= data_len holds at every step (or a zero appears), so no overflow */
        e->numel *= e->shape[d];
        if (e->numel > s->data_len)
            return sg_set_error("%s: tensor '%s' is larger than the file", s->path, name);
    }
    int b = ckpt_json_child(j, off, 0), en = ckpt_json_child(j, off, 1);
    if (!ckpt_json_is_integer(j, b) || !ckpt_json_is_integer(j, en))
        return sg_set_error("%s: tensor '%s' has non-integer data_offsets", s->path, name);
    e->begin = ckpt_json_integer(j, b), e->end = ckpt_json_integer(j, en);
    if (e->begin < 0 || e->end < e->begin || e->end > s->data_len)
        return sg_set_error("%s: tensor '%s' has data_offsets [%lld, %lld] outside the %lld "
                            "data bytes",
                            s->path, name, (long long)e->begin, (long long)e->end,
                            (long long)s->data_len);
    if (e->dtype != ST_OTHER && e->numel * st_elsize(e->dtype) != e->end - e->begin)
        return sg_set_error("%s: tensor '%s' has %lld elements of %s but %lld bytes", s->path, name,
                            (long long)e->numel, dts, (long long)(e->end - e->begin));
    return SG_OK;
}

ckpt_st *ckpt_st_open(const char *path) {
    ckpt_st *s = calloc(1, sizeof *s);
    char *hdr = NULL;
    ckpt_json *j = NULL;
    if (!s) return sg_set_error("out of memory"), NULL;
    snprintf(s->path, sizeof s->path, "%s", path);
    struct stat st;
    s->fp = fopen(path, "rb");
    if (!s->fp || fstat(fileno(s->fp), &st)) {
        sg_set_error("cannot open %s", path);
        goto fail;
    }
    uint8_t len8[8];
    if (st.st_size < 8 || fread(len8, 1, 8, s->fp) != 8) {
        sg_set_error("%s: too short for a safetensors file", path);
        goto fail;
    }
    uint64_t hl = get64(len8);
    if (hl < 2 || hl > (uint64_t)ST_MAX_HEADER || hl > (uint64_t)st.st_size - 8) {
        sg_set_error("%s: header length %llu does not fit the file of %lld bytes (not a "
                     "safetensors file?)",
                     path, (unsigned long long)hl, (long long)st.st_size);
        goto fail;
    }
    hdr = malloc(hl + 1);
    if (!hdr || fread(hdr, 1, hl, s->fp) != hl) {
        sg_set_error("%s: cannot read the %llu-byte header", path, (unsigned long long)hl);
        goto fail;
    }
    hdr[hl] = 0;
    s->data_off = 8 + (int64_t)hl;
    s->data_len = (int64_t)st.st_size - s->data_off;
    /* the header may be padded with spaces after the object */
    size_t len = hl;
    while (len && hdr[len - 1] == ' ') len--;
    j = ckpt_json_parse(hdr, len);
    if (!j) {
        char msg[400];
        snprintf(msg, sizeof msg, "%s", sg_last_error());
        sg_set_error("%s: bad header: %s", path, msg);
        goto fail;
    }
    if (ckpt_json_type(j, 0) != CKPT_JSON_OBJECT) {
        sg_set_error("%s: the header is not a JSON object", path);
        goto fail;
    }
    int count = ckpt_json_count(j, 0);
    s->e = calloc((size_t)count + 1, sizeof *s->e);
    if (!s->e) {
        sg_set_error("out of memory");
        goto fail;
    }
    for (int k = 0; k < count; k++) {
        int c = ckpt_json_child(j, 0, k);
        if (!strcmp(ckpt_json_key(j, c), "__metadata__")) {
            int m = ckpt_json_find(j, c, "model");
            const char *v = m >= 0 ? ckpt_json_string(j, m) : NULL;
            if (v) snprintf(s->model, sizeof s->model, "%s", v);
            continue;
        }
        if (parse_entry(s, j, c, &s->e[s->n++])) goto fail;
    }
    ckpt_json_free(j);
    free(hdr);
    return s;
fail:
    ckpt_json_free(j);
    free(hdr);
    ckpt_st_close(s);
    return NULL;
}

int ckpt_st_count(const ckpt_st *s) {
    return s->n;
}
const char *ckpt_st_name(const ckpt_st *s, int i) {
    return i >= 0 && i < s->n ? s->e[i].name : NULL;
}
const char *ckpt_st_model(const ckpt_st *s) {
    return s->model;
}
int ckpt_st_find(const ckpt_st *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->e[i].name, name)) return i;
    return -1;
}
int ckpt_st_first_unused(const ckpt_st *s) {
    for (int i = 0; i < s->n; i++)
        if (!s->e[i].used) return i;
    return -1;
}

static float half_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 31, man = h & 1023, bits;
    if (exp == 0) { /* zero and subnormals: man * 2^-24, exact in fp32 */
        float f = ldexpf((float)man, -24);
        return sign ? -f : f;
    }
    bits = exp == 31 ? sign | 0x7f800000u | (man << 13) : sign | ((exp + 112) << 23) | (man << 13);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Tensor i as fp32 (F32, F16 and BF16 convert exactly); n must be its element count. */
static int st_read_f32(ckpt_st *s, int i, float *dst) {
    st_entry *e = &s->e[i];
    if (e->dtype == ST_OTHER)
        return sg_set_error("%s: tensor '%s' is not a floating-point tensor (F32, F16, BF16)",
                            s->path, e->name);
    size_t bytes = (size_t)(e->end - e->begin);
    uint8_t *raw = e->dtype == ST_F32 ? (uint8_t *)dst : malloc(bytes + 1);
    if (!raw) return sg_set_error("out of memory");
    int rc = SG_OK;
    if (fseeko(s->fp, (off_t)(s->data_off + e->begin), SEEK_SET) ||
        fread(raw, 1, bytes, s->fp) != bytes)
        rc = sg_set_error("%s: cannot read tensor '%s'", s->path, e->name);
    if (!rc && e->dtype != ST_F32) {
        for (int64_t k = 0; k < e->numel; k++) {
            uint16_t h = (uint16_t)(raw[2 * k] | raw[2 * k + 1] << 8);
            if (e->dtype == ST_BF16) {
                uint32_t bits = (uint32_t)h << 16;
                memcpy(&dst[k], &bits, 4);
            } else {
                dst[k] = half_to_f32(h);
            }
        }
    }
    if (raw != (uint8_t *)dst) free(raw);
    e->used = 1;
    return rc;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* The index of `stem + name`, or of `stem + legacy` (deprecated attention names). */
static int find2(const ckpt_st *s, const char *stem, size_t stem_len, const char *name,
                 const char *legacy, char *shown, size_t cap) {
    char nm[CKPT_MAX_NAME + 32];
    snprintf(nm, sizeof nm, "%.*s%s", (int)stem_len, stem, name);
    snprintf(shown, cap, "%s", nm);
    int i = ckpt_st_find(s, nm);
    if (i < 0 && legacy) {
        snprintf(nm, sizeof nm, "%.*s%s", (int)stem_len, stem, legacy);
        i = ckpt_st_find(s, nm);
    }
    if (i < 0) sg_set_error("%s has no tensor '%s'", s->path, shown);
    return i;
}

static int shape_is(const st_entry *e, int ndim, int64_t a, int64_t b, int64_t c, int64_t d) {
    int64_t want[4] = {a, b, c, d};
    if (e->ndim != ndim) return 0;
    for (int k = 0; k < ndim; k++)
        if (e->shape[k] != want[k]) return 0;
    return 1;
}

static void shape_text(const st_entry *e, char *buf, size_t cap) {
    size_t p = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < e->ndim && p < cap; d++)
        p += (size_t)snprintf(buf + p, cap - p, "%s%lld", d ? "," : "", (long long)e->shape[d]);
    if (p < cap) snprintf(buf + p, cap - p, "]");
}

static int wrong_shape(const ckpt_st *s, int i, const char *want) {
    char got[96];
    shape_text(&s->e[i], got, sizeof got);
    return sg_set_error("%s: tensor '%s' is %s, this model needs %s", s->path, s->e[i].name, got,
                        want);
}

int ckpt_st_read_param(ckpt_st *s, const char *name, int ndim, const int64_t *shape, float *dst) {
    char shown[CKPT_MAX_NAME + 32], want[96];
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) numel *= shape[d];
    if (ends_with(name, ".to_qkv.weight") || ends_with(name, ".to_qkv.bias")) {
        /* [3C][1][1][C] (or [3C]): rows q, then k, then v */
        int is_w = ends_with(name, ".weight");
        size_t stem = strlen(name) - strlen(is_w ? "to_qkv.weight" : "to_qkv.bias");
        int64_t C = shape[0] / 3, Ci = is_w ? shape[ndim - 1] : 1;
        static const char *const part[3] = {"to_q", "to_k", "to_v"};
        static const char *const legacy[3] = {"query", "key", "value"};
        for (int k = 0; k < 3; k++) {
            char nm[32], lg[32];
            snprintf(nm, sizeof nm, "%s.%s", part[k], is_w ? "weight" : "bias");
            snprintf(lg, sizeof lg, "%s.%s", legacy[k], is_w ? "weight" : "bias");
            int i = find2(s, name, stem, nm, lg, shown, sizeof shown);
            if (i < 0) return SG_ERR;
            if (is_w ? !shape_is(&s->e[i], 2, C, Ci, 0, 0) && !shape_is(&s->e[i], 4, C, Ci, 1, 1)
                     : !shape_is(&s->e[i], 1, C, 0, 0, 0)) {
                snprintf(want, sizeof want, is_w ? "[%lld,%lld]" : "[%lld]", (long long)C,
                         (long long)Ci);
                return wrong_shape(s, i, want);
            }
            if (st_read_f32(s, i, dst + k * C * Ci)) return SG_ERR;
        }
        return SG_OK;
    }
    const char *legacy = NULL;
    size_t stem = strlen(name);
    if (ends_with(name, ".to_out.0.weight") || ends_with(name, ".to_out.0.bias")) {
        legacy = ends_with(name, ".weight") ? "proj_attn.weight" : "proj_attn.bias";
        stem -= strlen(ends_with(name, ".weight") ? "to_out.0.weight" : "to_out.0.bias");
    }
    int i = legacy ? find2(s, name, stem, name + stem, legacy, shown, sizeof shown)
                   : ckpt_st_find(s, name);
    if (i < 0) {
        if (!legacy) sg_set_error("%s has no tensor '%s'", s->path, name);
        return SG_ERR;
    }
    const st_entry *e = &s->e[i];
    if (ndim == 4 && shape[1] == 1 && shape[2] == 1 && legacy && e->ndim == 2) {
        /* to_out.0: a 1x1 conv [C][1][1][Ci] here, a Linear [C][Ci] there: the same numbers */
        if (!shape_is(e, 2, shape[0], shape[3], 0, 0)) {
            snprintf(want, sizeof want, "[%lld,%lld]", (long long)shape[0], (long long)shape[3]);
            return wrong_shape(s, i, want);
        }
        return st_read_f32(s, i, dst);
    }
    if (ndim == 4) {
        /* conv: OIHW there, [Co][K][K][Ci] here */
        int64_t Co = shape[0], K1 = shape[1], K2 = shape[2], Ci = shape[3];
        if (!shape_is(e, 4, Co, Ci, K1, K2)) {
            snprintf(want, sizeof want, "[%lld,%lld,%lld,%lld]", (long long)Co, (long long)Ci,
                     (long long)K1, (long long)K2);
            return wrong_shape(s, i, want);
        }
        float *tmp = malloc((size_t)numel * sizeof(float) + 1);
        if (!tmp) return sg_set_error("out of memory");
        int rc = st_read_f32(s, i, tmp);
        for (int64_t a = 0; a < Co && !rc; a++)
            for (int64_t c = 0; c < Ci; c++)
                for (int64_t y = 0; y < K1; y++)
                    for (int64_t x = 0; x < K2; x++)
                        dst[((a * K1 + y) * K2 + x) * Ci + c] =
                            tmp[((a * Ci + c) * K1 + y) * K2 + x];
        free(tmp);
        return rc;
    }
    int same = e->ndim == ndim;
    for (int d = 0; d < ndim && same; d++) same = e->shape[d] == shape[d];
    if (!same) {
        size_t p = (size_t)snprintf(want, sizeof want, "[");
        for (int d = 0; d < ndim && p < sizeof want; d++)
            p += (size_t)snprintf(want + p, sizeof want - p, "%s%lld", d ? "," : "",
                                  (long long)shape[d]);
        if (p < sizeof want) snprintf(want + p, sizeof want - p, "]");
        return wrong_shape(s, i, want);
    }
    return st_read_f32(s, i, dst);
}
