/* test_philox.c — common/philox.h against an independent oracle where one exists (the
 * Random123 known-answer vectors), and against the laws the draws must obey where none does:
 * sg_perm is a bijection for every n, the uniforms/normals have the right moments, indices
 * stay in range and fill it evenly, and distinct keys give distinct streams. */
#include "common/philox.h"
#include "tests/sg_test.h"

/* Random123 tests/kat_vectors, the three "philox4x32 10" lines: counter[4] key[2] -> out[4]. */
static void test_known_answers(void) {
    static const uint32_t kat[3][10] = {
        {0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x6627e8d5,
         0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
        {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d,
         0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
        {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09,
         0x94fdcceb, 0x5001e420, 0x24126ea1},
    };
    for (int t = 0; t < 3; t++) {
        sg_u32x4 out = sg_philox4x32_10(kat[t], kat[t] + 4);
        for (int j = 0; j < 4; j++)
            CHECK(out.v[j] == kat[t][6 + j], "kat %d word %d: got %08x want %08x", t, j, out.v[j],
                  kat[t][6 + j]);
    }
}

/* The keying contract: sg_rng_u32x4 is philox on {index lo, index hi, step, purpose} with
 * key {seed lo, seed hi}. */
static void test_keying(void) {
    uint64_t seed = 0x0123456789abcdefull, index = 0xfedcba9876543210ull;
    int64_t step = 0x11223344;
    uint32_t ctr[4] = {0x76543210u, 0xfedcba98u, 0x11223344u, SG_RNG_NOISE};
    uint32_t key[2] = {0x89abcdefu, 0x01234567u};
    sg_u32x4 a = sg_philox4x32_10(ctr, key), b = sg_rng_u32x4(seed, step, SG_RNG_NOISE, index);
    CHECK(memcmp(&a, &b, sizeof a) == 0, "sg_rng_u32x4 keying differs from the documented one");
    /* every purpose below the dropout range, and the range fits 2^16 nodes in 32 bits */
    CHECK(SG_RNG_SAMPLE < SG_RNG_DROPOUT_BASE && SG_RNG_SYNTHETIC < SG_RNG_DROPOUT_BASE, "order");
    CHECK((uint64_t)SG_RNG_DROPOUT_BASE + SG_RNG_DROPOUT_MAX <= 0xffffffffull, "dropout range");
    /* the conversions derived from word 0 */
    sg_u32x4 w = sg_rng_u32x4(seed, step, SG_RNG_TIMESTEP, 5);
    CHECK(sg_rng_bit(seed, step, SG_RNG_TIMESTEP, 5) == (w.v[0] & 1u), "bit is word0 & 1");
    CHECK(sg_rng_index(seed, step, SG_RNG_TIMESTEP, 5, 1000) ==
              (uint32_t)(((uint64_t)w.v[0] * 1000u) >> 32),
          "index is multiply-shift of word 0");
    CHECK(sg_rng_uniform(seed, step, SG_RNG_TIMESTEP, 5) == sg_u32_to_unit(w.v[0]), "uniform");
    /* the dropout's packing: element e takes half word e % 2 (low half first) of word
     * (e / 2) % 4 of counter e / 8, and the run and block forms agree with it wherever they
     * start */
    for (uint64_t e = 40; e < 64; e++) {
        const sg_u32x4 blk = sg_rng_u32x4(seed, step, SG_RNG_DROPOUT_BASE + 3, e / 8);
        const uint32_t word = blk.v[(e / 2) % 4], half = e % 2 ? word >> 16 : word & 0xFFFFu;
        CHECK(sg_rng_dropout(seed, step, SG_RNG_DROPOUT_BASE + 3, e) == sg_u16_to_unit(half),
              "dropout element %llu is not half %llu of word %llu of counter %llu",
              (unsigned long long)e, (unsigned long long)(e % 2), (unsigned long long)((e / 2) % 4),
              (unsigned long long)(e / 8));
    }
    float u4[4], u8[8], run[150];
    for (uint64_t blk = 10; blk < 12; blk++) {
        sg_rng_dropout4(u4, seed, step, SG_RNG_DROPOUT_BASE, blk);
        for (int j = 0; j < 4; j++)
            CHECK(u4[j] == sg_rng_dropout(seed, step, SG_RNG_DROPOUT_BASE, 4 * blk + (uint64_t)j),
                  "dropout4 block %llu, element %d", (unsigned long long)blk, j);
    }
    sg_rng_dropout8(u8, seed, step, SG_RNG_DROPOUT_BASE, 5);
    for (int j = 0; j < 8; j++)
        CHECK(u8[j] == sg_rng_dropout(seed, step, SG_RNG_DROPOUT_BASE, 40 + (uint64_t)j),
              "dropout8 element %d", j);
    /* runs of 19 (single blocks) and 150 (a partial block, two spans of SG_PHILOX_LANES blocks
     * drawn at once, a tail), aligned to a block (e0 = 40) and not */
    for (int len = 19; len <= 150; len += 131)
        for (uint64_t e0 = 35; e0 < 41; e0++) {
            sg_rng_dropout_run(run, len, seed, step, SG_RNG_DROPOUT_BASE, e0);
            for (int k = 0; k < len; k++)
                CHECK(run[k] == sg_rng_dropout(seed, step, SG_RNG_DROPOUT_BASE, e0 + (uint64_t)k),
                      "dropout run of %d from %llu, element %d", len, (unsigned long long)e0, k);
        }
    /* the 16-bit grid: exact, strictly inside (0, 1); and the keep rate of p = 0.1 over 2^20
     * elements is 1 - p rounded to the grid (0.899994), within 5 sigma (0.0015) */
    CHECK(sg_u16_to_unit(0) == 0x1p-17f, "min %a", sg_u16_to_unit(0));
    CHECK(sg_u16_to_unit(0xFFFFu) == 1.0f - 0x1p-17f, "max %a", sg_u16_to_unit(0xFFFFu));
    {
        static float big[1 << 20];
        sg_rng_dropout_run(big, 1 << 20, seed, step, SG_RNG_DROPOUT_BASE + 1, 3);
        int64_t kept = 0;
        double mean = 0.0;
        for (int i = 0; i < 1 << 20; i++) kept += big[i] >= 0.1f, mean += big[i];
        const double rate = (double)kept / (double)(1 << 20);
        mean /= (double)(1 << 20);
        CHECK(fabs(rate - 0.899994) < 0.0015, "keep rate %.6f for p = 0.1", rate);
        CHECK(fabs(mean - 0.5) < 0.0015, "mean uniform %.6f", mean);
    }
    /* the endpoints of the uniform grid are exact and strictly inside (0, 1) */
    CHECK(sg_u32_to_unit(0) == 0x1p-24f, "min %a", sg_u32_to_unit(0));
    CHECK(sg_u32_to_unit(0xffffffffu) == 1.0f - 0x1p-24f, "max %a", sg_u32_to_unit(0xffffffffu));
    CHECK(sg_u32_to_unit(0xffffffffu) < 1.0f && sg_u32_to_unit(0) > 0.0f, "open interval");
}

/* Fills perm[0..n) for (seed, epoch) and checks it is a bijection of [0, n). */
static int perm_is_bijection(int64_t *perm, uint8_t *seen, int64_t n, uint64_t seed,
                             int64_t epoch) {
    memset(seen, 0, (size_t)n);
    int ok = 1;
    for (int64_t p = 0; p < n; p++) {
        int64_t v = sg_perm(seed, epoch, p, n);
        perm[p] = v;
        if (v < 0 || v >= n || seen[v]) {
            ok = 0;
            break;
        }
        seen[v] = 1;
    }
    return ok;
}

static void test_perm(void) {
    static const int64_t ns[] = {1,  2,   3,   4,    5,    7,    8,     9,     15,    16,   17,
                                 63, 100, 255, 1000, 4096, 4097, 50000, 60000, 65536, 65537};
    int64_t maxn = 65537;
    int64_t *a = malloc(sizeof(int64_t) * maxn), *b = malloc(sizeof(int64_t) * maxn);
    uint8_t *seen = malloc((size_t)maxn);
    for (int k = 0; k < SG_ARRAY_LEN(ns); k++) {
        int64_t n = ns[k];
        for (int e = 0; e < 3; e++) {
            uint64_t seed = 1234 + (uint64_t)k;
            CHECK(perm_is_bijection(e ? b : a, seen, n, seed, e), "n=%lld epoch %d not bijective",
                  (long long)n, e);
            if (e != 1 || n < 8) continue;
            /* epochs 0 and 1 differ; for a random pair about 1 position in n coincides */
            int64_t same = 0;
            for (int64_t p = 0; p < n; p++) same += a[p] == b[p];
            CHECK(same < n / 2 + 1 && (n < 1000 || same < 20), "n=%lld epochs 0/1 share %lld",
                  (long long)n, (long long)same);
        }
    }
    /* a different seed gives a different order */
    int64_t n = 60000, same = 0, fixed = 0;
    for (int64_t p = 0; p < n; p++) same += sg_perm(1, 0, p, n) == sg_perm(2, 0, p, n);
    CHECK(same < 20, "seeds 1/2 share %lld positions", (long long)same);
    /* quality: a random permutation has one fixed point on average (Poisson(1)); over 400
     * epochs of n=1000 the mean is 1 +- 0.05 */
    for (int e = 0; e < 400; e++)
        for (int64_t p = 0; p < 1000; p++) fixed += sg_perm(77, e, p, 1000) == p;
    CHECK(fixed > 300 && fixed < 500, "fixed points over 400 epochs: %lld (want ~400)",
          (long long)fixed);
    /* tiny domain: all 6 orders of [0, 3) occur over many epochs, none starved */
    int counts[6] = {0};
    for (int e = 0; e < 6000; e++) {
        int64_t p0 = sg_perm(5, e, 0, 3), p1 = sg_perm(5, e, 1, 3);
        counts[p0 * 2 + (p1 > (p0 == 0 ? 1 : 0) ? 1 : 0)]++;
    }
    for (int i = 0; i < 6; i++) CHECK(counts[i] > 500, "order %d of 3 drawn %d/6000", i, counts[i]);
    /* very large n: values in range and distinct over a prefix (bijection by construction) */
    int64_t big = ((int64_t)1 << 40) + 12345;
    for (int64_t p = 0; p < 2000; p++) {
        a[p] = sg_perm(9, 3, p, big);
        CHECK(a[p] >= 0 && a[p] < big, "big perm out of range");
    }
    int dup = 0;
    for (int64_t p = 0; p < 2000; p++)
        for (int64_t q = 0; q < p; q++) dup += a[p] == a[q];
    CHECK(dup == 0, "big perm has %d duplicates", dup);
    free(a);
    free(b);
    free(seen);
}

static void test_moments(void) {
    const int n = 1000000;
    double s1 = 0, s2 = 0, z1 = 0, z2 = 0, z4 = 0, bits = 0;
    float umin = 1, umax = 0, zmax = 0;
    int finite = 1;
    for (int i = 0; i < n; i++) {
        float u = sg_rng_uniform(42, 7, SG_RNG_SAMPLE, (uint64_t)i);
        float z = sg_rng_normal(42, 7, SG_RNG_NOISE, (uint64_t)i);
        s1 += u;
        s2 += (double)u * u;
        umin = u < umin ? u : umin;
        umax = u > umax ? u : umax;
        finite &= isfinite(z) != 0;
        z1 += z;
        z2 += (double)z * z;
        z4 += (double)z * z * z * z;
        zmax = fabsf(z) > zmax ? fabsf(z) : zmax;
        bits += sg_rng_bit(42, 7, SG_RNG_FLIP, (uint64_t)i);
    }
    double mean = s1 / n, var = s2 / n - mean * mean;
    CHECK(fabs(mean - 0.5) < 0.002, "uniform mean %f", mean);
    CHECK(fabs(var - 1.0 / 12) < 0.001, "uniform var %f", var);
    CHECK(umin > 0 && umax < 1 && umin < 1e-5 && umax > 1 - 1e-5, "uniform range [%g, %g]",
          (double)umin, (double)umax);
    double zm = z1 / n, zv = z2 / n - zm * zm, kurt = z4 / n / (zv * zv);
    CHECK(finite, "non-finite normal");
    CHECK(fabs(zm) < 0.005, "normal mean %f", zm);
    CHECK(fabs(zv - 1) < 0.01, "normal var %f", zv);
    CHECK(fabs(kurt - 3) < 0.06, "normal kurtosis %f", kurt);
    CHECK(zmax > 4 && zmax < 5.8, "normal max |z| %f", (double)zmax);
    CHECK(fabs(bits / n - 0.5) < 0.003, "bit mean %f", bits / n);
}

static void test_index(void) {
    const int n = 1000000, T = 1000;
    int *counts = calloc(T, sizeof(int));
    int in_range = 1;
    for (int i = 0; i < n; i++) {
        uint32_t t = sg_rng_index(3, 11, SG_RNG_TIMESTEP, (uint64_t)i, T);
        if (t >= (uint32_t)T) {
            in_range = 0;
            continue;
        }
        counts[t]++;
    }
    CHECK(in_range, "index out of [0, %d)", T);
    double chi2 = 0, expect = (double)n / T;
    for (int t = 0; t < T; t++) chi2 += (counts[t] - expect) * (counts[t] - expect) / expect;
    /* 999 degrees of freedom: mean 999, sd ~45 */
    CHECK(chi2 > 800 && chi2 < 1250, "timestep chi2 %f", chi2);
    free(counts);
    CHECK(sg_rng_index(1, 2, SG_RNG_TIMESTEP, 3, 1) == 0, "n=1 gives 0");
}

/* Keys that differ in one field give unrelated streams. */
static void test_independence(void) {
    const int n = 4096;
    int same_step = 0, same_purpose = 0, same_seed = 0, same_hi = 0;
    for (int i = 0; i < n; i++) {
        uint32_t base = sg_rng_u32x4(10, 20, SG_RNG_NOISE, (uint64_t)i).v[0];
        same_step += base == sg_rng_u32x4(10, 21, SG_RNG_NOISE, (uint64_t)i).v[0];
        same_purpose += base == sg_rng_u32x4(10, 20, SG_RNG_DROPOUT_BASE, (uint64_t)i).v[0];
        same_seed += base == sg_rng_u32x4(10 + (1ull << 32), 20, SG_RNG_NOISE, (uint64_t)i).v[0];
        same_hi += base == sg_rng_u32x4(10, 20, SG_RNG_NOISE, (uint64_t)i + (1ull << 32)).v[0];
    }
    CHECK(same_step + same_purpose + same_seed + same_hi == 0, "streams collide: %d %d %d %d",
          same_step, same_purpose, same_seed, same_hi);
    /* the same key twice gives the same bits */
    CHECK(sg_rng_normal(5, 6, SG_RNG_NOISE, 7) == sg_rng_normal(5, 6, SG_RNG_NOISE, 7), "pure");
}

int main(void) {
    test_known_answers();
    test_keying();
    test_perm();
    test_moments();
    test_index();
    test_independence();
    return sg_test_end();
}
