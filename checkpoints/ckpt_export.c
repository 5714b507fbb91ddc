/* ckpt_export.c — the model weights of a checkpoint as a safetensors file with diffusers
 * UNet2DModel names and PyTorch layouts (ckpt_export_safetensors in ckpt.h).
 *
 * safetensors: u64 little-endian header length N, N bytes of JSON header
 *   {"<name>": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...,
 *    "__metadata__": {"format": "pt", ...}}
 * padded with spaces to a multiple of 8, then the tensors' bytes back to back (row-major),
 * offsets relative to the end of the header. We write tensors sorted by name.
 *
 * Layout conversions (stepgraph -> diffusers), see docs/model.md:
 *   4-D "*.weight"         [Co][K][K][Ci] -> [Co][Ci][K][K]          (conv, OIHW)
 *   "*.to_qkv.weight"      [3C][1][1][C]  -> to_q/to_k/to_v.weight [C][C] (rows in order)
 *   "*.to_qkv.bias"        [3C]           -> to_q/to_k/to_v.bias [C]
 *   "*.to_out.0.weight"    [C][1][1][Ci]  -> [C][Ci]                 (Linear in diffusers)
 *   everything else unchanged.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoints/ckpt_internal.h"
#include "checkpoints/ckpt_json.h"

typedef enum { CONV_COPY = 0, CONV_OIHW, CONV_SPLIT3, CONV_SQUEEZE } conversion;

typedef struct {
    char name[CKPT_MAX_NAME + 16];
    int src;  /* tensor index in the checkpoint */
    int conv; /* conversion */
    int part; /* CONV_SPLIT3: 0 q, 1 k, 2 v */
    int dtype, ndim;
    int64_t shape[CKPT_MAX_DIMS];
    int64_t bytes, begin;
} out_tensor;

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static const char *st_dtype(int dtype) {
    static const char *const names[] = {"F32", "BF16", "I32", "U8", "U32", "I64", "U64"};
    int code = ckpt_dtype_to_code(dtype);
    return code >= 0 && code < SG_ARRAY_LEN(names) ? names[code] : NULL;
}

static int cmp_out(const void *a, const void *b) {
    return strcmp(((const out_tensor *)a)->name, ((const out_tensor *)b)->name);
}

/* Plan the output tensors of one checkpoint tensor; returns how many (0 on error). */
static int plan_tensor(const ckpt_entry *e, int src, const char *name, out_tensor *o) {
    int es = sg_dtype_size(e->dtype);
    memset(o, 0, 3 * sizeof *o);
    for (int k = 0; k < 3; k++) o[k].src = src, o[k].dtype = e->dtype;
    if (ends_with(name, ".to_qkv.weight") || ends_with(name, ".to_qkv.bias")) {
        int is_w = ends_with(name, ".weight");
        int64_t rows = e->shape[0];
        int64_t cols = is_w ? e->shape[e->ndim - 1] : 1;
        int ok = is_w ? (e->ndim == 4 && e->shape[1] == 1 && e->shape[2] == 1) || e->ndim == 2
                      : e->ndim == 1;
        if (!ok || rows % 3 != 0) {
            sg_set_error("export: '%s' has shape that is not [3C][1][1][C] / [3C]", e->name);
            return 0;
        }
        size_t stem = strlen(name) - strlen(is_w ? "to_qkv.weight" : "to_qkv.bias");
        static const char *const part[] = {"to_q", "to_k", "to_v"};
        for (int k = 0; k < 3; k++) {
            snprintf(o[k].name, sizeof o[k].name, "%.*s%s.%s", (int)stem, name, part[k],
                     is_w ? "weight" : "bias");
            o[k].conv = CONV_SPLIT3;
            o[k].part = k;
            o[k].ndim = is_w ? 2 : 1;
            o[k].shape[0] = rows / 3;
            o[k].shape[1] = cols;
            o[k].bytes = rows / 3 * cols * es;
        }
        return 3;
    }
    snprintf(o->name, sizeof o->name, "%s", name);
    o->bytes = e->raw_bytes;
    o->ndim = e->ndim;
    memcpy(o->shape, e->shape, sizeof o->shape);
    if (ends_with(name, ".to_out.0.weight") && e->ndim == 4 && e->shape[1] == 1 &&
        e->shape[2] == 1) {
        o->conv = CONV_SQUEEZE;
        o->ndim = 2;
        o->shape[1] = e->shape[3];
        o->shape[2] = o->shape[3] = 1;
    } else if (e->ndim == 4 && ends_with(name, ".weight")) {
        o->conv = CONV_OIHW;
        o->shape[1] = e->shape[3];
        o->shape[2] = e->shape[1];
        o->shape[3] = e->shape[2];
    }
    return 1;
}

/* Produce the output bytes of o from the source tensor's raw bytes. */
static void convert(const out_tensor *o, const ckpt_entry *e, const uint8_t *src, uint8_t *dst) {
    size_t es = (size_t)sg_dtype_size(e->dtype);
    if (o->conv == CONV_COPY || o->conv == CONV_SQUEEZE) {
        memcpy(dst, src, (size_t)o->bytes);
    } else if (o->conv == CONV_SPLIT3) {
        memcpy(dst, src + (size_t)o->part * (size_t)o->bytes, (size_t)o->bytes);
    } else {
        int64_t co = e->shape[0], kh = e->shape[1], kw = e->shape[2], ci = e->shape[3];
        for (int64_t a = 0; a < co; a++)
            for (int64_t y = 0; y < kh; y++)
                for (int64_t x = 0; x < kw; x++)
                    for (int64_t i = 0; i < ci; i++) {
                        size_t from = (size_t)(((a * kh + y) * kw + x) * ci + i) * es;
                        size_t to = (size_t)(((a * ci + i) * kh + y) * kw + x) * es;
                        memcpy(dst + to, src + from, es);
                    }
    }
}

int ckpt_export_safetensors(const ckpt_file *f, const char *out_path, int ema) {
    int role = ema ? ROLE_EMA : ROLE_PARAM;
    int n = ckpt_count(f), nout = 0;
    out_tensor *o = calloc((size_t)n * 3 + 3, sizeof *o);
    char *header = NULL;
    uint8_t *src = NULL, *dst = NULL;
    int rc = SG_ERR;
    if (!o) return sg_set_error("export: out of memory");
    int64_t largest = 0;
    for (int i = 0; i < n; i++) {
        ckpt_entry e;
        ckpt_tensor_info(f, i, &e);
        if (e.role != role) continue;
        const char *name = e.name;
        if (ema && strncmp(name, "ema:", 4) == 0) name += 4;
        if (!st_dtype(e.dtype)) {
            sg_set_error("export: '%s' has dtype %s, which safetensors cannot hold", e.name,
                         ckpt_dtype_name(e.dtype));
            goto out;
        }
        int k = plan_tensor(&e, i, name, o + nout);
        if (!k) goto out;
        nout += k;
        if (e.raw_bytes > largest) largest = e.raw_bytes;
    }
    if (nout == 0) {
        sg_set_error("export: %s has no tensors of role %s", ckpt_path(f), ckpt_role_name(role));
        goto out;
    }
    qsort(o, (size_t)nout, sizeof *o, cmp_out);
    for (int k = 1; k < nout; k++)
        if (strcmp(o[k - 1].name, o[k].name) == 0) {
            sg_set_error("export: two output tensors would be named '%s'", o[k].name);
            goto out;
        }

    char step[32] = "", model[128] = "";
    ckpt_json *meta = ckpt_json_parse(ckpt_meta(f), strlen(ckpt_meta(f)));
    if (meta) {
        int64_t s;
        if (ckpt_json_get_int(meta, "step", &s) == SG_OK)
            snprintf(step, sizeof step, "%lld", (long long)s);
        /* the model name: top-level "model", or the training metadata's config.model */
        if (ckpt_json_get_string(meta, "model", model, sizeof model) &&
            ckpt_json_get_string(meta, "config.model", model, sizeof model))
            model[0] = 0;
        ckpt_json_free(meta);
    }
    /* the header: one JSON object written by jansson, padded with spaces to 8 bytes */
    json_t *hj = json_object();
    int64_t begin = 0;
    for (int k = 0; k < nout && hj; k++) {
        json_t *shape = json_array();
        for (int d = 0; d < o[k].ndim; d++)
            json_array_append_new(shape, json_integer(o[k].shape[d]));
        json_object_set_new(hj, o[k].name,
                            json_pack("{s:s, s:o, s:[I, I]}", "dtype", st_dtype(o[k].dtype),
                                      "shape", shape, "data_offsets", (json_int_t)begin,
                                      (json_int_t)(begin + o[k].bytes)));
        o[k].begin = begin;
        begin += o[k].bytes;
    }
    json_t *md = json_pack("{s:s, s:s, s:s}", "format", "pt", "producer", "stepgraph", "weights",
                           ema ? "ema" : "param");
    if (md && step[0]) json_object_set_new(md, "step", json_string(step));
    if (md && model[0]) json_object_set_new(md, "model", json_string(model));
    json_object_set_new(hj, "__metadata__", md);
    char *text = json_dumps(hj, JSON_COMPACT);
    json_decref(hj);
    size_t hp = text ? strlen(text) : 0;
    header = text ? malloc(hp + 8) : NULL;
    if (!header) {
        free(text);
        sg_set_error("export: out of memory");
        goto out;
    }
    memcpy(header, text, hp);
    free(text);
    while (hp % 8) header[hp++] = ' ';

    src = malloc((size_t)largest + 1);
    dst = malloc((size_t)largest + 1);
    if (!src || !dst) {
        sg_set_error("export: out of memory");
        goto out;
    }
    ckpt_atomic a;
    if (ckpt_atomic_begin(&a, out_path, NULL)) goto out;
    uint8_t len8[8];
    put64(len8, hp);
    int failed = ckpt_atomic_write(&a, len8, 8) || ckpt_atomic_write(&a, header, hp);
    for (int k = 0; k < nout && !failed; k++) {
        ckpt_entry e;
        ckpt_tensor_info(f, o[k].src, &e);
        if (ckpt_read(f, o[k].src, src, e.raw_bytes)) {
            failed = 1;
            break;
        }
        convert(&o[k], &e, src, dst);
        failed = ckpt_atomic_write(&a, dst, (size_t)o[k].bytes);
    }
    if (failed) {
        ckpt_atomic_abort(&a);
        goto out;
    }
    rc = ckpt_atomic_commit(&a);
out:
    free(o);
    free(header);
    free(src);
    free(dst);
    return rc;
}
