/* ckpt_fuzz_target.c — the fuzz target of the checkpoint reader and the metadata JSON reader.
 *
 * ckpt_fuzz_one treats the input as a checkpoint file image and as JSON text and drives every
 * read path: opening with full checks, lazily, and with every checksum skipped (so mutations
 * reach the index parser, the zstd frame walk and the unshuffle instead of stopping at the
 * whole-file checksum); then metadata parsing and rendering, tensor info, reads and stats.
 * Nothing may crash, leak or read out of bounds (built with ASan/UBSan), whatever the bytes.
 *
 * Built two ways: with -DCKPT_LIBFUZZER as a libFuzzer target (tests/fuzz/build.sh), and into
 * test_ckpt_corpus, which replays tests/fuzz/corpus/ under ctest.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoints/ckpt.h"
#include "checkpoints/ckpt_json.h"

int ckpt_fuzz_one(const uint8_t *data, size_t size);

static void exercise_json(const char *text, size_t len) {
    ckpt_json *j = ckpt_json_parse(text, len);
    if (!j) return;
    char buf[256];
    (void)ckpt_json_render(j, 0, buf, sizeof buf);
    int64_t v;
    double d;
    (void)ckpt_json_get_int(j, "config.ch", &v);
    (void)ckpt_json_get_double(j, "step", &d);
    (void)ckpt_json_get_string(j, "model", buf, sizeof buf);
    (void)ckpt_json_find(j, 0, "a[0].b.1[2]");
    (void)ckpt_json_diff(j, 0, j, 0, buf, sizeof buf);
    for (int k = 0; k < ckpt_json_count(j, 0) && k < 64; k++) {
        int c = ckpt_json_child(j, 0, k);
        (void)ckpt_json_key(j, c);
        (void)ckpt_json_string(j, c);
    }
    ckpt_json_free(j);
}

int ckpt_fuzz_one(const uint8_t *data, size_t size) {
    static const unsigned modes[3] = {0, CKPT_OPEN_LAZY, CKPT_OPEN_NO_CHECKSUMS};
    for (int m = 0; m < 3; m++) {
        ckpt_file *f = ckpt_open_mem(data, size, modes[m]);
        if (!f) continue;
        const char *meta = ckpt_meta(f);
        exercise_json(meta, strlen(meta));
        (void)ckpt_meta_check_config("{\"model\":\"x\",\"config\":{\"ch\":32}}", meta);
        for (int i = 0; i < ckpt_count(f); i++) {
            ckpt_entry e;
            if (ckpt_tensor_info(f, i, &e) != SG_OK) continue;
            (void)ckpt_find(f, e.name);
            if (e.raw_bytes > (64 << 20)) continue; /* a claim, not memory the input holds */
            void *buf = malloc((size_t)e.raw_bytes + 1);
            if (!buf) continue;
            if (ckpt_read(f, i, buf, e.raw_bytes) == SG_OK) {
                ckpt_value_stats s;
                (void)ckpt_stats(buf, e.dtype, e.numel, &s);
            }
            (void)ckpt_check_tensor(f, i);
            free(buf);
        }
        ckpt_close(f);
    }
    exercise_json((const char *)data, size);
    return 0;
}

#ifdef CKPT_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    return ckpt_fuzz_one(data, size);
}
#endif
