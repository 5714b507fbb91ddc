/* test_ckpt_hash.c — XXH64 (checkpoints/ckpt_hash.c) against independent references: the
 * published value for the empty input, and zstd, whose frame checksum is the low 32 bits of
 * XXH64 (seed 0) of the frame's content. Streaming in random pieces must equal one-shot. */
#include <zstd.h>

#include "checkpoints/ckpt_hash.h"
#include "common/sg_base.h"
#include "tests/sg_test.h"

/* low 32 bits of XXH64(data) as zstd computes it */
static uint32_t zstd_xxh32low(const uint8_t *data, size_t n) {
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 1);
    size_t cap = ZSTD_compressBound(n);
    uint8_t *out = malloc(cap);
    size_t r = ZSTD_compress2(cc, out, cap, data, n);
    uint32_t v = 0;
    if (!ZSTD_isError(r) && r >= 4)
        v = (uint32_t)out[r - 4] | (uint32_t)out[r - 3] << 8 | (uint32_t)out[r - 2] << 16 |
            (uint32_t)out[r - 1] << 24;
    free(out);
    ZSTD_freeCCtx(cc);
    return v;
}

int main(void) {
    CHECK(ckpt_xxh64(NULL, 0, 0) == 0xEF46DB3751D8E999ull, "XXH64 of empty input");
    uint64_t s = 7;
    enum { MAX = 1 << 16 };
    uint8_t *buf = malloc(MAX + 3);
    for (int i = 0; i < MAX + 3; i++) buf[i] = (uint8_t)sg_test_next(&s);
    /* every length up to 300 (all tail paths, 0..9 stripes), then some large ones, at odd
     * alignments */
    int bad = 0;
    for (size_t n = 0; n <= 300; n++) {
        size_t at = n % 3;
        uint64_t h = ckpt_xxh64(buf + at, n, 0);
        if ((uint32_t)h != zstd_xxh32low(buf + at, n)) bad++;
    }
    CHECK(bad == 0, "%d lengths differ from zstd's XXH64", bad);
    size_t big[] = {1000, 4095, 4096, 4097, 65535, MAX};
    for (int k = 0; k < SG_ARRAY_LEN(big); k++)
        CHECK((uint32_t)ckpt_xxh64(buf + 1, big[k], 0) == zstd_xxh32low(buf + 1, big[k]),
              "length %zu", big[k]);
    /* streaming in random pieces, with seeds */
    for (int trial = 0; trial < 200; trial++) {
        size_t n = (size_t)(sg_test_next(&s) % MAX);
        uint64_t seed = trial % 3 ? sg_test_next(&s) : 0;
        ckpt_xxh64_state st;
        ckpt_xxh64_init(&st, seed);
        size_t pos = 0;
        while (pos < n) {
            size_t k = (size_t)(sg_test_next(&s) % 70);
            if (k > n - pos) k = n - pos;
            ckpt_xxh64_update(&st, buf + pos, k);
            pos += k;
        }
        uint64_t one = ckpt_xxh64(buf, n, seed), streamed = ckpt_xxh64_digest(&st);
        if (one != streamed) bad++;
    }
    CHECK(bad == 0, "%d streamed hashes differ from one-shot", bad);
    /* the seed matters */
    CHECK(ckpt_xxh64(buf, 100, 0) != ckpt_xxh64(buf, 100, 1), "seed ignored");
    free(buf);
    return sg_test_end();
}
