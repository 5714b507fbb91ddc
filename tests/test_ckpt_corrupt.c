/* test_ckpt_corrupt.c — damaged and foreign checkpoints are refused with a clear error, never
 * a crash or a silent wrong value:
 *   - every truncation length;
 *   - one flipped bit at every byte (every bit position at every byte): detected at open, and
 *     when the byte is inside a tensor payload the error names that tensor; with
 *     CKPT_OPEN_LAZY the open succeeds and reading that tensor fails naming it;
 *   - appended bytes, wrong magic, a newer version, a missing file, a directory, an empty file;
 *   - metadata from another model config (ckpt_meta_check_config names the field).
 */
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoints/ckpt.h"
#include "checkpoints/ckpt_hash.h"
#include "checkpoints/ckpt_json.h"
#include "tests/sg_test.h"

#define NT 7

static const char *META = "{\"model\":\"unet_tiny\",\"config\":{\"ch\":32,\"ch_mult\":[1,2],"
                          "\"groups\":8},\"plan_hash\":\"abc\",\"step\":3}";

static void spit(const char *path, const uint8_t *b, size_t n) {
    FILE *f = fopen(path, "wb");
    fwrite(b, 1, n, f);
    fclose(f);
}

/* which tensor's payload holds byte `at`, or -1 */
static int payload_owner(const ckpt_entry *e, int n, size_t at) {
    for (int i = 0; i < n; i++)
        if ((int64_t)at >= e[i].file_offset && (int64_t)at < e[i].file_offset + e[i].stored_bytes)
            return i;
    return -1;
}

int main(void) {
    char dir[] = "/tmp/test_ckpt_corrupt.XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char path[256];
    snprintf(path, sizeof path, "%s/good.sgck", dir);

    /* a small checkpoint with multi-frame, shuffled, raw and empty payloads */
    uint64_t r = 5;
    float w[600], ramp[300];
    uint16_t h[257];
    uint8_t u8[100];
    int32_t step = 3;
    sg_test_fill(w, 600, &r, -0.05f, 0.05f);
    for (int i = 0; i < 300; i++) ramp[i] = (float)(i / 10);
    for (int i = 0; i < 257; i++) h[i] = sg_f32_to_bf16(sg_test_uniform(&r, -1, 1));
    for (int i = 0; i < 100; i++) u8[i] = (uint8_t)sg_test_next(&r);
    ckpt_tensor_desc t[NT] = {
        {.name = "conv_in.weight",
         .role = ROLE_PARAM,
         .dtype = DT_F32,
         .ndim = 4,
         .shape = {8, 3, 5, 5},
         .data = w,
         .bytes = sizeof w},
        {.name = "ramp",
         .role = ROLE_EMA,
         .dtype = DT_F32,
         .ndim = 1,
         .shape = {300},
         .data = ramp,
         .bytes = sizeof ramp},
        {.name = "half",
         .role = ROLE_SAVED,
         .dtype = DT_BF16,
         .ndim = 1,
         .shape = {257},
         .data = h,
         .bytes = sizeof h},
        {.name = "bytes",
         .role = ROLE_INPUT,
         .dtype = DT_U8,
         .ndim = 2,
         .shape = {10, 10},
         .data = u8,
         .bytes = sizeof u8},
        {.name = "step", .role = ROLE_STATE, .dtype = DT_I32, .ndim = 0, .data = &step, .bytes = 4},
        {.name = "nothing", .role = ROLE_STATE, .dtype = DT_F32, .ndim = 1, .shape = {0}},
        {.name = "adam_v:conv_in.weight",
         .role = ROLE_ADAM_V,
         .dtype = DT_F32,
         .ndim = 4,
         .shape = {8, 3, 5, 5},
         .data = w,
         .bytes = sizeof w},
    };
    ckpt_write_opts o = {.block_bytes = 512, .threads = 2};
    if (ckpt_write(path, META, t, NT, &o) != SG_OK) {
        fprintf(stderr, "%s\n", sg_last_error());
        return 1;
    }
    size_t size = 0;
    uint8_t *good = sg_test_slurp(path, &size);
    uint8_t *buf = malloc(size + 64);
    ckpt_file *f = ckpt_open_mem(good, size, 0);
    CHECK(f != NULL, "the good file opens: %s", sg_last_error());
    ckpt_entry e[NT];
    for (int i = 0; i < NT; i++) {
        ckpt_tensor_info(f, i, &e[i]);
        e[i].name = t[i].name; /* e's names live in f */
    }
    ckpt_close(f);
    printf("checkpoint of %zu bytes\n", size);

    /* truncation at every length */
    int missed = 0, unclear = 0;
    for (size_t len = 0; len < size; len++) {
        memcpy(buf, good, len);
        f = ckpt_open_mem(buf, len, 0);
        if (f) {
            missed++;
            ckpt_close(f);
        } else if (!strstr(sg_last_error(), "truncated") && !strstr(sg_last_error(), "empty")) {
            if (unclear++ < 3) fprintf(stderr, "len %zu: %s\n", len, sg_last_error());
        }
    }
    CHECK(missed == 0, "%d truncations were not detected", missed);
    CHECK(unclear == 0, "%d truncations were not reported as truncated", unclear);

    /* appended bytes */
    memcpy(buf, good, size);
    memset(buf + size, 0, 64);
    f = ckpt_open_mem(buf, size + 7, 0);
    CHECK(f == NULL, "appended bytes must be detected");
    ckpt_close(f);

    /* one flipped bit at every byte, every bit position */
    int undetected = 0, unnamed = 0, lazy_bad = 0;
    for (size_t at = 0; at < size; at++) {
        int owner = payload_owner(e, NT, at);
        for (int bit = 0; bit < 8; bit++) {
            memcpy(buf, good, size);
            buf[at] ^= (uint8_t)(1u << bit);
            f = ckpt_open_mem(buf, size, 0);
            if (f) {
                if (undetected++ < 3) fprintf(stderr, "flip at %zu bit %d undetected\n", at, bit);
                ckpt_close(f);
                continue;
            }
            if (owner >= 0) {
                char quoted[128];
                snprintf(quoted, sizeof quoted, "'%s'", e[owner].name);
                if (!strstr(sg_last_error(), quoted) && unnamed++ < 3)
                    fprintf(stderr, "flip at %zu in '%s': %s\n", at, e[owner].name,
                            sg_last_error());
                /* lazily opened: the open works, reading the damaged tensor fails naming it,
                 * the other tensors read fine */
                f = ckpt_open_mem(buf, size, CKPT_OPEN_LAZY);
                if (!f) {
                    lazy_bad++;
                    continue;
                }
                uint8_t out[4096];
                for (int i = 0; i < NT; i++) {
                    int rc = ckpt_read(f, i, out, sizeof out);
                    if (i == owner ? rc == SG_OK || !strstr(sg_last_error(), quoted) : rc != SG_OK)
                        lazy_bad++;
                }
                ckpt_close(f);
            }
        }
    }
    CHECK(undetected == 0, "%d bit flips were not detected", undetected);
    CHECK(unnamed == 0, "%d payload bit flips did not name the tensor", unnamed);
    CHECK(lazy_bad == 0, "%d lazy-open payload checks went wrong", lazy_bad);

    /* without checksums (the fuzzing mode) a damaged payload may read wrong, but never
     * crashes; a flip in a compressed frame header is still caught by zstd/frame checks */
    for (size_t at = (size_t)e[0].file_offset; at < (size_t)(e[0].file_offset + 8); at++) {
        memcpy(buf, good, size);
        buf[at] ^= 0xff;
        f = ckpt_open_mem(buf, size, CKPT_OPEN_NO_CHECKSUMS);
        CHECK(f != NULL, "no-checksum open");
        uint8_t out[4096];
        if (f) (void)ckpt_read(f, 0, out, sizeof out);
        ckpt_close(f);
    }

    /* wrong magic */
    memcpy(buf, good, size);
    buf[1] = 'X';
    f = ckpt_open_mem(buf, size, 0);
    CHECK(!f && strstr(sg_last_error(), "bad magic"), "wrong magic: %s", sg_last_error());
    /* a newer version, header checksum intact: "unsupported format version 2" */
    memcpy(buf, good, size);
    buf[8] = 2;
    uint64_t hh = ckpt_xxh64(buf, 56, 0);
    for (int i = 0; i < 8; i++) buf[56 + i] = (uint8_t)(hh >> (8 * i));
    f = ckpt_open_mem(buf, size, 0);
    CHECK(!f && strstr(sg_last_error(), "unsupported format version 2 (this build reads version"),
          "newer version: %s", sg_last_error());
    /* and with the header checksum not updated */
    memcpy(buf, good, size);
    buf[8] = 9;
    f = ckpt_open_mem(buf, size, 0);
    CHECK(!f && strstr(sg_last_error(), "version 9"), "bad version: %s", sg_last_error());

    /* files on disk: missing, a directory, empty, damaged (through mmap) */
    char p2[300];
    snprintf(p2, sizeof p2, "%s/missing.sgck", dir);
    f = ckpt_open(p2);
    CHECK(!f && strstr(sg_last_error(), "cannot open") && strstr(sg_last_error(), "missing.sgck"),
          "missing file: %s", sg_last_error());
    f = ckpt_open(dir);
    CHECK(!f && strstr(sg_last_error(), "not a regular file"), "directory: %s", sg_last_error());
    snprintf(p2, sizeof p2, "%s/empty.sgck", dir);
    spit(p2, good, 0);
    f = ckpt_open(p2);
    CHECK(!f && strstr(sg_last_error(), "empty"), "empty file: %s", sg_last_error());
    snprintf(p2, sizeof p2, "%s/damaged.sgck", dir);
    memcpy(buf, good, size);
    buf[e[1].file_offset + 3] ^= 4;
    spit(p2, buf, size);
    f = ckpt_open(p2);
    CHECK(!f && strstr(sg_last_error(), "'ramp'") && strstr(sg_last_error(), "damaged.sgck"),
          "damaged file on disk: %s", sg_last_error());
    snprintf(p2, sizeof p2, "%s/short.sgck", dir);
    spit(p2, good, size / 2);
    f = ckpt_open(p2);
    CHECK(!f && strstr(sg_last_error(), "truncated"), "truncated file on disk: %s",
          sg_last_error());

    /* a checkpoint from another config */
    f = ckpt_open(path);
    CHECK(f && ckpt_meta_check_config(META, ckpt_meta(f)) == SG_OK, "same config: %s",
          sg_last_error());
    const char *other = "{\"model\":\"unet_tiny\",\"config\":{\"ch\":64,\"ch_mult\":[1,2],"
                        "\"groups\":8},\"plan_hash\":\"abc\",\"step\":9}";
    CHECK(f && ckpt_meta_check_config(other, ckpt_meta(f)) == SG_ERR &&
              strstr(sg_last_error(), "config.ch is 32 in the checkpoint, 64 expected"),
          "other config: %s", sg_last_error());
    const char *other_mult = "{\"config\":{\"ch\":32,\"ch_mult\":[1,2,2],\"groups\":8}}";
    CHECK(f && ckpt_meta_check_config(other_mult, ckpt_meta(f)) == SG_ERR &&
              strstr(sg_last_error(), "config.ch_mult[2]"),
          "other ch_mult: %s", sg_last_error());
    /* META has no down_pad (as checkpoints from before the field): under a SAME model it is
     * refused, naming the field and what the old checkpoint means */
    const char *same_pad = "{\"model\":\"unet_tiny\",\"config\":{\"ch\":32,\"ch_mult\":[1,2],"
                           "\"groups\":8,\"down_pad\":\"same\"}}";
    CHECK(f && ckpt_meta_check_config(same_pad, ckpt_meta(f)) == SG_ERR &&
              strstr(sg_last_error(), "config.down_pad is absent") &&
              strstr(sg_last_error(), "\"symmetric\"") &&
              strstr(sg_last_error(), "\"same\" expected"),
          "old checkpoint under a SAME model: %s", sg_last_error());
    const char *sym_pad = "{\"model\":\"unet_tiny\",\"config\":{\"ch\":32,\"ch_mult\":[1,2],"
                          "\"groups\":8,\"down_pad\":\"symmetric\"}}";
    CHECK(f && ckpt_meta_check_config(sym_pad, ckpt_meta(f)) == SG_ERR &&
              strstr(sg_last_error(), "before config.down_pad existed") &&
              strstr(sg_last_error(), "--init-from"),
          "old checkpoint under a symmetric model: %s", sg_last_error());
    const char *other_model = "{\"model\":\"unet_cifar\"}";
    CHECK(f && ckpt_meta_check_config(other_model, ckpt_meta(f)) == SG_ERR &&
              strstr(sg_last_error(), "model is \"unet_tiny\" in the checkpoint"),
          "other model: %s", sg_last_error());
    const char *other_plan = "{\"plan_hash\":\"abd\"}";
    CHECK(f && ckpt_meta_check_config(other_plan, ckpt_meta(f)) == SG_ERR &&
              strstr(sg_last_error(), "plan_hash"),
          "other plan: %s", sg_last_error());
    CHECK(f && ckpt_meta_check_config("{\"step\":1}", ckpt_meta(f)) == SG_OK,
          "only model/config/plan_hash are compared");
    ckpt_close(f);

    free(good);
    free(buf);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) return 1;
    return sg_test_end();
}
