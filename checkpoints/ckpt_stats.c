/* ckpt_stats.c — value statistics and bitwise comparison of tensors (ckpt_stats,
 * ckpt_compare). Values are widened to double; bf16 through sg_bf16_to_f32. */
#include <math.h>
#include <string.h>

#include "checkpoints/ckpt_internal.h"

/* element i of an array of the format dtype `code`, as a double */
static double value_at(const uint8_t *p, int code, int64_t i) {
    switch (code) {
    case 0: {
        float f;
        memcpy(&f, p + 4 * i, 4);
        return f;
    }
    case 1: {
        sg_bf16 h;
        memcpy(&h, p + 2 * i, 2);
        return sg_bf16_to_f32(h);
    }
    case 2: {
        int32_t v;
        memcpy(&v, p + 4 * i, 4);
        return v;
    }
    case 3:
        return p[i];
    case 4: {
        uint32_t v;
        memcpy(&v, p + 4 * i, 4);
        return v;
    }
    case 5: {
        int64_t v;
        memcpy(&v, p + 8 * i, 8);
        return (double)v;
    }
    default: {
        uint64_t v;
        memcpy(&v, p + 8 * i, 8);
        return (double)v;
    }
    }
}

int ckpt_stats(const void *data, int dtype, int64_t n, ckpt_value_stats *out) {
    int code = ckpt_dtype_to_code(dtype);
    if (code < 0) return sg_set_error("stats: bad dtype %d", dtype);
    if (n < 0 || (n > 0 && !data)) return sg_set_error("stats: bad buffer");
    memset(out, 0, sizeof *out);
    out->count = n;
    const uint8_t *p = data;
    double sum = 0, mn = INFINITY, mx = -INFINITY;
    int64_t finite = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = value_at(p, code, i);
        if (isnan(v)) {
            out->nan++;
        } else if (isinf(v)) {
            out->inf++;
        } else {
            finite++;
            sum += v;
            if (v < mn) mn = v;
            if (v > mx) mx = v;
        }
    }
    if (finite == 0) return SG_OK;
    double mean = sum / (double)finite, ss = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = value_at(p, code, i);
        if (isfinite(v)) ss += (v - mean) * (v - mean);
    }
    out->min = mn, out->max = mx, out->mean = mean;
    out->std = sqrt(ss / (double)finite);
    return SG_OK;
}

int ckpt_compare(const void *a, const void *b, int dtype, int64_t n, ckpt_value_diff *out) {
    int code = ckpt_dtype_to_code(dtype);
    if (code < 0) return sg_set_error("compare: bad dtype %d", dtype);
    if (n < 0 || (n > 0 && (!a || !b))) return sg_set_error("compare: bad buffers");
    memset(out, 0, sizeof *out);
    out->first = out->max_abs_index = -1;
    size_t es = (size_t)sg_dtype_size(dtype);
    const uint8_t *pa = a, *pb = b;
    int64_t i = 0;
    while (i < n) {
        /* skip equal stretches quickly */
        int64_t chunk = n - i < 4096 ? n - i : 4096;
        if (memcmp(pa + (size_t)i * es, pb + (size_t)i * es, (size_t)chunk * es) == 0) {
            i += chunk;
            continue;
        }
        for (int64_t k = i; k < i + chunk; k++) {
            if (memcmp(pa + (size_t)k * es, pb + (size_t)k * es, es) == 0) continue;
            out->ndiff++;
            if (out->first < 0) out->first = k;
            double x = value_at(pa, code, k), y = value_at(pb, code, k);
            if (!isfinite(x) || !isfinite(y)) {
                out->nonfinite_diff++;
                continue;
            }
            double d = fabs(x - y);
            if (out->max_abs_index < 0 || d > out->max_abs)
                out->max_abs = d, out->max_abs_index = k;
        }
        i += chunk;
    }
    return SG_OK;
}
