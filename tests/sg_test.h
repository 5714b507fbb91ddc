/* sg_test.h — the tiny harness every C test uses.
 *
 * A test program calls CHECK(...) as often as it likes and ends with `return sg_test_end();`,
 * which prints "N passed, N failed" and returns non-zero on any failure. SG_TEST_SKIP (77) is
 * ctest's skip code (set SKIP_RETURN_CODE 77 on the test).
 */
#ifndef SG_TEST_H
#define SG_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SG_TEST_SKIP 77

static int sg_test_passed, sg_test_failed;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (cond) {                                                                                \
            sg_test_passed++;                                                                      \
        } else {                                                                                   \
            sg_test_failed++;                                                                      \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

static inline int sg_test_end(void) {
    printf("%d passed, %d failed\n", sg_test_passed, sg_test_failed);
    return sg_test_failed ? 1 : 0;
}

/* A small deterministic generator for test inputs (splitmix64): fixed seeds, fresh values. */
static inline uint64_t sg_test_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
/* uniform in [lo, hi) */
static inline float sg_test_uniform(uint64_t *s, float lo, float hi) {
    return lo + (hi - lo) * (float)((sg_test_next(s) >> 40) * (1.0 / 16777216.0));
}
static inline void sg_test_fill(float *x, int64_t n, uint64_t *s, float lo, float hi) {
    for (int64_t i = 0; i < n; i++) x[i] = sg_test_uniform(s, lo, hi);
}
/* max |a-b| / max(1e-12, max |b|): the normalised error used across tests */
static inline double sg_test_rel_err(const float *a, const float *b, int64_t n) {
    double num = 0, den = 1e-12;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > num || d != d) num = d != d ? INFINITY : d;
        if (fabs((double)b[i]) > den) den = fabs((double)b[i]);
    }
    return num / den;
}

/* The whole file at path (malloc'd, *n bytes; NULL if it cannot be opened). */
static inline uint8_t *sg_test_slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)(size > 0 ? size : 0) + 1);
    *n = b ? fread(b, 1, (size_t)(size > 0 ? size : 0), f) : 0;
    fclose(f);
    return b;
}

#ifdef SG_EXEC_H
/* Every byte of a training plan's state regions 0xFF (NaN) before a load: a resume must not
 * depend on what the arena held (exec.c's zero_state_regions; a backend need not clear its
 * arena). For the tests that include graph/exec.h first. */
static inline int sg_test_poison_state(sg_exec *e) {
    const sg_step_io *io = &e->plan.io;
    const int regions[5] = {io->params, io->adam_m, io->adam_v, io->ema, io->grads};
    int rc = SG_OK;
    for (int k = 0; k < 5 && !rc; k++) {
        if (regions[k] < 0) continue;
        const int64_t n = e->plan.g.t[regions[k]].bytes;
        void *b = malloc((size_t)n);
        rc = b ? (memset(b, 0xFF, (size_t)n), sg_exec_write(e, regions[k], b)) : SG_ERR;
        free(b);
    }
    return rc;
}
#endif

#endif
