/* test_dist.c — graph/dist.c's all-reduce under mpirun (-np 4 in ctest): the sum is taken in
 * rank order, ((x_0 + x_1) + x_2) + x_3 element by element in fp32, and every rank receives
 * exactly those bits.
 *
 * Every rank regenerates every rank's input from its seed, so each one computes the oracle
 * (the left-to-right sum) on its own. The inputs are chosen so that the order matters: values
 * of mixed magnitudes and signs (1e4 and 1e-3 scales), where another association gives other
 * bits; the test checks that it does for many elements (a test whose inputs any order sums
 * identically would prove nothing, and with 2 ranks x_0 + x_1 = x_1 + x_0 always). Then:
 * bcast carries rank 0's bytes, allgather_u64 gathers in rank order, and a buffer that is
 * not a whole number of anything (n odd) works. Exit 0 on success, 1 on a wrong result.
 * Run without a launcher it is one rank and checks the identity.
 */
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/dist.h"
#include "tests/sg_test.h"

/* rank r's input: a fresh pseudo-random mix of large and small values of both signs */
static void fill(float *x, int64_t n, int r) {
    uint64_t s = 0x9e3779b97f4a7c15ull * (uint64_t)(r + 1);
    for (int64_t i = 0; i < n; i++) {
        float u = sg_test_uniform(&s, -1.0f, 1.0f);
        x[i] = (sg_test_next(&s) & 1) ? u * 1e4f : u * 1e-3f;
    }
}

int main(int argc, char **argv) {
    sg_dist *d = sg_dist_init(&argc, &argv);
    if (!d) {
        fprintf(stderr, "test_dist: %s\n", sg_last_error());
        return 1;
    }
    const int R = d->size, me = d->rank;
    const int64_t n = 100003;
    float *buf = malloc(sizeof(float) * n), *tmp = malloc(sizeof(float) * n);
    float *want = malloc(sizeof(float) * n), *other = malloc(sizeof(float) * n);
    float *x = malloc(sizeof(float) * n);
    if (!buf || !tmp || !want || !other || !x) return 1;

    /* the oracle: left to right in rank order; and the reverse order, for contrast */
    for (int r = 0; r < R; r++) {
        fill(x, n, r);
        for (int64_t i = 0; i < n; i++) want[i] = r ? want[i] + x[i] : x[i];
    }
    for (int r = R - 1; r >= 0; r--) {
        fill(x, n, r);
        for (int64_t i = 0; i < n; i++) other[i] = r < R - 1 ? other[i] + x[i] : x[i];
    }
    int64_t order_matters = 0;
    for (int64_t i = 0; i < n; i++) order_matters += memcmp(&want[i], &other[i], 4) != 0;
    if (R >= 3)
        CHECK(order_matters > n / 100,
              "inputs too tame: only %lld of %lld elements depend on "
              "the summation order",
              (long long)order_matters, (long long)n);

    fill(buf, n, me);
    for (int64_t i = 0; i < n; i++) tmp[i] = NAN; /* scratch: must not leak into the result */
    CHECK(d->allreduce_sum(d, buf, tmp, n) == SG_OK, "allreduce_sum: %s", sg_last_error());
    int64_t wrong = 0, first = -1;
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&buf[i], &want[i], 4)) {
            if (first < 0) first = i;
            wrong++;
        }
    CHECK(wrong == 0,
          "rank %d of %d: %lld elements differ from the rank-order sum (first %lld: "
          "%.9g vs %.9g)",
          me, R, (long long)wrong, (long long)first, first >= 0 ? buf[first] : 0.0,
          first >= 0 ? want[first] : 0.0);

    /* bcast: rank 0's bytes everywhere */
    uint64_t word = me == 0 ? 0x1234567890abcdefull : 0;
    CHECK(d->bcast(d, &word, 8) == SG_OK && word == 0x1234567890abcdefull, "bcast on rank %d", me);
    /* allgather: one value per rank, in rank order */
    uint64_t *all = calloc((size_t)R, 8);
    CHECK(all && d->allgather_u64(d, 1000u + (uint64_t)me, all) == SG_OK, "allgather");
    for (int r = 0; all && r < R; r++)
        CHECK(all[r] == 1000u + (uint64_t)r, "allgather slot %d is %llu", r,
              (unsigned long long)all[r]);
    /* cpu_sharers: the ranks whose affinity masks meet this one's (every rank runs on this
     * machine here), counted again from masks gathered over the world (CPUs below 64) */
    cpu_set_t mask;
    uint64_t bits = 0;
    CHECK(sched_getaffinity(0, sizeof mask, &mask) == 0, "sched_getaffinity");
    for (int c = 0; c < 64; c++)
        if (CPU_ISSET(c, &mask)) bits |= 1ull << c;
    int sharers = 0;
    CHECK(all && d->allgather_u64(d, bits, all) == SG_OK, "allgather of the masks");
    for (int r = 0; all && r < R; r++) sharers += (all[r] & bits) != 0;
    CHECK(d->cpu_sharers == sharers, "rank %d: cpu_sharers %d, the masks say %d", me,
          d->cpu_sharers, sharers);
    if (me == 0)
        printf("test_dist: %d rank(s) (%s), %lld floats; %lld of them depend on the order; %d "
               "rank(s) share rank 0's CPUs\n",
               R, d->name, (long long)n, (long long)order_matters, d->cpu_sharers);
    free(all);
    free(buf), free(tmp), free(want), free(other), free(x);
    int rc = sg_test_end();
    sg_dist_finalize(d);
    return rc;
}
