/* sg_base.h — the few types every stepgraph module shares: dtypes, bf16 rounding, status.
 *
 * Header-only and usable from C11 and CUDA (SG_HD marks host/device functions).
 * Library code reports errors by returning SG_ERR after sg_set_error(); only main() exits.
 */
#ifndef SG_BASE_H
#define SG_BASE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define SG_HD __host__ __device__ __forceinline__
#else
#define SG_HD static inline
#endif

typedef enum { DT_F32 = 0, DT_BF16, DT_I32, DT_U8, DT_U32, DT_I64, DT_U64, DT_COUNT } sg_dtype;

/* What a tensor is for. The planner packs the persistent roles (PARAM .. INPUT, WORKSPACE,
 * PARAM_BF16: sg_role_persistent) at the bottom of the arena, each contiguous. New roles go at
 * the end (checkpoints name roles; plans print them). */
typedef enum {
    ROLE_PARAM = 0, /* fp32 master weights */
    ROLE_GRAD,      /* parameter gradients (fp32), contiguous: one norm/AdamW over them */
    ROLE_ADAM_M,
    ROLE_ADAM_V,
    ROLE_EMA,
    ROLE_STATE,     /* step counter, rng seed, lr, loss, grad norm, clip scale */
    ROLE_INPUT,     /* the dataset, uploaded once */
    ROLE_SAVED,     /* forward activation kept for the backward pass */
    ROLE_TEMP,      /* everything else that lives inside one step */
    ROLE_WORKSPACE, /* scratch for library calls (cuBLAS, reductions) */
    /* a forward activation computed again in the backward pass (a recompute node,
     * planner/autodiff.c) instead of being saved: it lives from just before its first backward
     * reader to its last */
    ROLE_RECOMPUTED,
    /* bf16 runs: the parameters rounded to bf16, the weights every bf16 conv and linear reads;
     * a pure function of ROLE_PARAM, never checkpointed */
    ROLE_PARAM_BF16,
    ROLE_COUNT
} sg_role;

static const char *const sg_role_names[ROLE_COUNT] = {
    "param", "grad",  "adam_m", "adam_v",    "ema",        "state",
    "input", "saved", "temp",   "workspace", "recomputed", "param_bf16"};

/* Lives the whole run at a fixed place at the bottom of the arena (not reused by lifetime). */
SG_HD int sg_role_persistent(int r) {
    return r <= ROLE_INPUT || r == ROLE_WORKSPACE || r == ROLE_PARAM_BF16;
}
static const char *const sg_dtype_names[DT_COUNT] = {"f32", "bf16", "i32", "u8",
                                                     "u32", "i64",  "u64"};

/* The activation a normalisation op applies after its affine transform (the norm_act ops:
 * planner/op_list.h, kernels/cpu/norm.c). */
enum { SG_ACT_NONE = 0, SG_ACT_SILU = 1 };

SG_HD int sg_dtype_size(int dt) {
    return dt == DT_BF16 ? 2 : dt == DT_U8 ? 1 : (dt == DT_I64 || dt == DT_U64) ? 8 : 4;
}

/* bf16 is stored as the top 16 bits of an fp32; stores round to nearest, ties to even.
 * NaN stays NaN (quiet bit forced), infinities stay infinite. */
typedef uint16_t sg_bf16;

SG_HD float sg_bf16_to_f32(sg_bf16 h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

SG_HD sg_bf16 sg_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return (sg_bf16)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (sg_bf16)(u >> 16);
}

/* Status codes: 0 is success; anything else failed and sg_last_error() says why. */
enum { SG_OK = 0, SG_ERR = 1, SG_ERR_USAGE = 2 };

#ifndef __CUDACC__
#include <stdarg.h>
#include <stdio.h>
/* One error message per thread; the caller that exits prints it. */
const char *sg_last_error(void);
int sg_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* An invariant that must hold in release builds too (unlike assert(), never compiled out):
 * when it fails, stepgraph itself is wrong, not its input, so there is no status to return.
 * It prints the condition with file:line and aborts. Input errors still go through
 * sg_set_error. */
#define SG_ASSERT(cond) ((cond) ? (void)0 : sg_assert_fail(#cond, __FILE__, __LINE__))
/* A branch that must never be taken (e.g. a switch's default over a closed set). */
#define SG_UNREACHABLE(what) sg_assert_fail(what, __FILE__, __LINE__)
void sg_assert_fail(const char *cond, const char *file, int line) __attribute__((noreturn));

/* Timings' statistics (bench, the engine tuning): sort v[0..n) ascending in place, and the
 * q-quantile of sorted s[0..n) (n >= 1) with linear interpolation between neighbours (numpy's
 * default; q = 0.5: the median, the mean of the middle two for even n). */
void sg_sort_f32(float *v, int n);
double sg_quantile_sorted(const float *s, int n, double q);
/* Can path be written, before the work that writes it? Opens it for writing, as a writer
 * would, and removes it again when it was not there (no stray file either way). SG_ERR with
 * the reason (a directory, strerror) in sg_last_error; the caller names the path. */
int sg_probe_writable(const char *path);
#endif

#define SG_ARRAY_LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define SG_ALIGN_UP(x, a) ((((x) + (a)-1) / (a)) * (a))

#endif
