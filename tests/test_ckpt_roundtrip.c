/* test_ckpt_roundtrip.c — write then read back many tensors of every dtype and odd shapes
 * (scalars, empty, one element, multi-block), under several levels / thread counts / shuffle
 * modes / block sizes: every value must come back bitwise, the index must say what was
 * written, the file bytes must not depend on the thread count, and bad arguments must be
 * refused without leaving files behind. */
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoints/ckpt.h"
#include "checkpoints/ckpt_json.h"
#include "tests/sg_test.h"

#define MAXT 64

typedef struct {
    ckpt_tensor_desc d[MAXT];
    char names[MAXT][64];
    void *data[MAXT];
    int n;
} tensor_set;

static void add(tensor_set *s, const char *name, int role, int dtype, int ndim,
                const int64_t *shape, uint64_t *rng, int fill) {
    ckpt_tensor_desc *d = &s->d[s->n];
    snprintf(s->names[s->n], sizeof s->names[0], "%s", name);
    int64_t numel = 1;
    for (int k = 0; k < ndim; k++) numel *= shape[k], d->shape[k] = shape[k];
    int es = sg_dtype_size(dtype);
    uint8_t *p = malloc((size_t)(numel * es) + 1);
    for (int64_t i = 0; i < numel; i++) {
        if (dtype == DT_F32) {
            /* fill 0: weight-like values; 1: special values */
            float v = sg_test_uniform(rng, -0.1f, 0.1f);
            if (fill == 1) {
                static const uint32_t special[] = {0x7fc00001u, 0xffc12345u, 0x80000000u,
                                                   0x7f800000u, 0xff800000u, 0x00000001u,
                                                   0x007fffffu, 0x00000000u};
                uint32_t u = special[i % 8];
                memcpy(&v, &u, 4);
            }
            memcpy(p + 4 * i, &v, 4);
        } else if (dtype == DT_BF16) {
            sg_bf16 h = sg_f32_to_bf16(sg_test_uniform(rng, -2.f, 2.f));
            memcpy(p + 2 * i, &h, 2);
        } else if (es == 1) {
            p[i] = fill == 1 ? (uint8_t)(i % 7) : (uint8_t)sg_test_next(rng);
        } else {
            uint64_t v = fill == 1 ? (uint64_t)(i / 3) : sg_test_next(rng);
            memcpy(p + es * i, &v, (size_t)es);
        }
    }
    d->name = s->names[s->n];
    d->role = role;
    d->dtype = dtype;
    d->ndim = ndim;
    d->data = p;
    d->bytes = numel * es;
    d->offset = 4096 * s->n;
    s->data[s->n] = p;
    s->n++;
}

static void make_set(tensor_set *s, uint64_t seed) {
    memset(s, 0, sizeof *s);
    uint64_t r = seed;
    const int64_t scalar[1] = {1}, empty[1] = {0}, one[1] = {1}, three[1] = {3},
                  odd[3] = {13, 17, 3}, conv[4] = {8, 3, 3, 5}, big[1] = {3001}, mat[2] = {7, 5},
                  zero2[2] = {4, 0}, huge[2] = {300, 70};
    add(s, "step", ROLE_STATE, DT_I32, 0, scalar, &r, 0);
    add(s, "empty", ROLE_STATE, DT_F32, 1, empty, &r, 0);
    add(s, "empty2d", ROLE_TEMP, DT_BF16, 2, zero2, &r, 0);
    add(s, "one", ROLE_PARAM, DT_F32, 1, one, &r, 0);
    add(s, "conv_in.bias", ROLE_PARAM, DT_F32, 1, three, &r, 0);
    add(s, "conv_in.weight", ROLE_PARAM, DT_F32, 4, conv, &r, 0);
    add(s, "ema:conv_in.weight", ROLE_EMA, DT_F32, 4, conv, &r, 0);
    add(s, "adam_m:conv_in.weight", ROLE_ADAM_M, DT_F32, 4, conv, &r, 0);
    add(s, "adam_v:conv_in.weight", ROLE_ADAM_V, DT_F32, 4, conv, &r, 0);
    add(s, "special", ROLE_PARAM, DT_F32, 3, odd, &r, 1);
    add(s, "big_f32", ROLE_PARAM, DT_F32, 1, big, &r, 0);
    add(s, "big_bf16", ROLE_PARAM, DT_BF16, 2, huge, &r, 0);
    add(s, "bf16_odd", ROLE_SAVED, DT_BF16, 3, odd, &r, 0);
    add(s, "i32_mat", ROLE_INPUT, DT_I32, 2, mat, &r, 0);
    add(s, "i32_ramp", ROLE_INPUT, DT_I32, 1, big, &r, 1);
    add(s, "u8_random", ROLE_INPUT, DT_U8, 2, huge, &r, 0);
    add(s, "u8_ramp", ROLE_INPUT, DT_U8, 1, big, &r, 1);
    add(s, "u8_odd", ROLE_INPUT, DT_U8, 3, odd, &r, 0);
    add(s, "u32_random", ROLE_WORKSPACE, DT_U32, 1, big, &r, 0);
    add(s, "u32_ramp", ROLE_WORKSPACE, DT_U32, 3, odd, &r, 1);
    add(s, "name with spaces, \"quotes\" and \\", ROLE_GRAD, DT_F32, 2, mat, &r, 0);
    int i64 = ckpt_dtype_from_name("i64"), u64 = ckpt_dtype_from_name("u64");
    if (i64 >= 0) add(s, "i64_ramp", ROLE_STATE, i64, 1, big, &r, 1);
    if (u64 >= 0) add(s, "u64_random", ROLE_STATE, u64, 2, mat, &r, 0);
}

static void free_set(tensor_set *s) {
    for (int i = 0; i < s->n; i++) free(s->data[i]);
}

static int count_files(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) n++;
    closedir(d);
    return n;
}

static const char *META =
    "{\"model\":\"unet_tiny\",\"config\":{\"ch\":32,\"ch_mult\":[1,2]},\"step\":7,"
    "\"seed\":42,\"note\":\"caf\\u00e9 \\ud83d\\ude00\"}";

/* Open path and compare everything with s. */
static void check_file(const char *path, const tensor_set *s, const char *what) {
    ckpt_file *f = ckpt_open(path);
    CHECK(f != NULL, "%s: open: %s", what, sg_last_error());
    if (!f) return;
    CHECK(ckpt_count(f) == s->n, "%s: count %d", what, ckpt_count(f));
    CHECK(strcmp(ckpt_meta(f), META) == 0, "%s: metadata differs", what);
    CHECK(ckpt_version(f) == CKPT_FORMAT_VERSION, "%s: version", what);
    int bad = 0;
    void *bufs[MAXT];
    int idx[MAXT];
    int64_t caps[MAXT];
    for (int i = 0; i < s->n; i++) {
        const ckpt_tensor_desc *d = &s->d[i];
        int k = ckpt_find(f, d->name);
        CHECK(k == i, "%s: find '%s' -> %d", what, d->name, k);
        ckpt_entry e;
        CHECK(ckpt_tensor_info(f, i, &e) == SG_OK, "%s: info %d", what, i);
        CHECK(strcmp(e.name, d->name) == 0 && e.role == d->role && e.dtype == d->dtype &&
                  e.ndim == d->ndim && e.raw_bytes == d->bytes && e.offset == d->offset,
              "%s: index entry of '%s'", what, d->name);
        for (int a = 0; a < d->ndim; a++)
            CHECK(e.shape[a] == d->shape[a], "%s: '%s' dim %d", what, d->name, a);
        uint8_t *out = malloc((size_t)d->bytes + 16);
        memset(out, 0xA5, (size_t)d->bytes + 16);
        if (ckpt_read(f, i, out, d->bytes) != SG_OK) {
            bad++;
            fprintf(stderr, "%s\n", sg_last_error());
        } else if (d->bytes && memcmp(out, d->data, (size_t)d->bytes) != 0) {
            bad++;
            fprintf(stderr, "%s: '%s' differs\n", what, d->name);
        }
        for (int g = 0; g < 16; g++)
            if (out[d->bytes + g] != 0xA5) bad++; /* nothing written past the tensor */
        free(out);
        bufs[i] = malloc((size_t)d->bytes + 1);
        memset(bufs[i], 0x5A, (size_t)d->bytes + 1);
        idx[i] = i;
        caps[i] = d->bytes;
    }
    CHECK(bad == 0, "%s: %d tensors did not round-trip", what, bad);
    CHECK(ckpt_read_many(f, idx, bufs, caps, s->n, 3) == SG_OK, "%s: read_many: %s", what,
          sg_last_error());
    for (int i = 0; i < s->n; i++) {
        CHECK(s->d[i].bytes == 0 || memcmp(bufs[i], s->d[i].data, (size_t)s->d[i].bytes) == 0,
              "%s: read_many '%s'", what, s->d[i].name);
        free(bufs[i]);
    }
    CHECK(ckpt_find(f, "no such tensor") == -1, "find of a missing name");
    if (s->n > 5 && s->d[5].bytes > 4) {
        uint8_t small[4];
        CHECK(ckpt_read(f, 5, small, 4) == SG_ERR && strstr(sg_last_error(), s->d[5].name),
              "a too-small buffer must be refused naming the tensor (%s)", sg_last_error());
    }
    CHECK(ckpt_read(f, s->n, NULL, 0) == SG_ERR, "reading past the last tensor");
    ckpt_close(f);
}

int main(void) {
    char dir[] = "/tmp/test_ckpt_roundtrip.XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char path[256], path2[256];
    tensor_set s;
    make_set(&s, 1234);

    struct {
        int level, threads, shuffle;
        int64_t block;
    } variants[] = {
        {0, 0, CKPT_SHUFFLE_AUTO, 0},   {1, 1, CKPT_SHUFFLE_ON, 4096},
        {-1, 4, CKPT_SHUFFLE_OFF, 64},  {19, 2, CKPT_SHUFFLE_AUTO, 4096},
        {3, 3, CKPT_SHUFFLE_AUTO, 192},
    };
    for (int v = 0; v < SG_ARRAY_LEN(variants); v++) {
        ckpt_write_opts o = {.level = variants[v].level,
                             .threads = variants[v].threads,
                             .shuffle = variants[v].shuffle,
                             .block_bytes = variants[v].block};
        char what[64];
        snprintf(what, sizeof what, "variant %d", v);
        snprintf(path, sizeof path, "%s/v%d.sgck", dir, v);
        CHECK(ckpt_write(path, META, s.d, s.n, &o) == SG_OK, "%s: write: %s", what,
              sg_last_error());
        check_file(path, &s, what);
        /* determinism: another thread count gives the same bytes */
        o.threads = o.threads == 1 ? 4 : 1;
        snprintf(path2, sizeof path2, "%s/v%d_again.sgck", dir, v);
        CHECK(ckpt_write(path2, META, s.d, s.n, &o) == SG_OK, "%s: rewrite", what);
        size_t n1 = 0, n2 = 0;
        uint8_t *b1 = sg_test_slurp(path, &n1), *b2 = sg_test_slurp(path2, &n2);
        CHECK(b1 && b2 && n1 == n2 && memcmp(b1, b2, n1) == 0,
              "%s: file bytes depend on the thread count", what);
        free(b1);
        free(b2);
        unlink(path2);
    }

    /* what the index records: shuffle on weight-like floats (auto), raw for random bytes,
     * several frames for multi-block tensors */
    {
        snprintf(path, sizeof path, "%s/v0.sgck", dir);
        ckpt_file *f = ckpt_open(path);
        ckpt_entry e;
        ckpt_tensor_info(f, ckpt_find(f, "big_f32"), &e);
        CHECK(e.codec == CKPT_CODEC_ZSTD && e.shuffled, "auto mode shuffles weight-like fp32");
        ckpt_tensor_info(f, ckpt_find(f, "u8_random"), &e);
        CHECK(e.codec == CKPT_CODEC_RAW && e.stored_bytes == e.raw_bytes,
              "random bytes are stored raw");
        ckpt_tensor_info(f, ckpt_find(f, "u8_ramp"), &e);
        CHECK(e.codec == CKPT_CODEC_ZSTD && !e.shuffled && e.stored_bytes < e.raw_bytes,
              "u8 ramp compresses, never shuffled");
        ckpt_tensor_info(f, ckpt_find(f, "empty"), &e);
        CHECK(e.raw_bytes == 0 && e.stored_bytes == 0, "empty tensor");
        ckpt_close(f);
        snprintf(path, sizeof path, "%s/v2.sgck", dir);
        f = ckpt_open(path);
        int shuffled = 0;
        for (int i = 0; i < ckpt_count(f); i++) {
            ckpt_tensor_info(f, i, &e);
            shuffled += e.shuffled;
        }
        CHECK(shuffled == 0, "shuffle off: %d tensors shuffled", shuffled);
        CHECK(ckpt_block_bytes(f) == 64, "block size recorded");
        ckpt_close(f);
    }

    /* no tensors at all */
    snprintf(path, sizeof path, "%s/none.sgck", dir);
    CHECK(ckpt_write(path, NULL, NULL, 0, NULL) == SG_OK, "empty checkpoint: %s", sg_last_error());
    ckpt_file *f = ckpt_open(path);
    CHECK(f && ckpt_count(f) == 0 && strcmp(ckpt_meta(f), "{}") == 0, "empty checkpoint reads");
    ckpt_close(f);

    /* refused inputs: nothing is created */
    int before = count_files(dir);
    snprintf(path, sizeof path, "%s/refused.sgck", dir);
    tensor_set bad;
    make_set(&bad, 99);
    bad.d[3].name = bad.d[4].name;
    CHECK(ckpt_write(path, "{}", bad.d, bad.n, NULL) == SG_ERR &&
              strstr(sg_last_error(), "two tensors"),
          "duplicate names: %s", sg_last_error());
    bad.d[3].name = bad.names[3];
    bad.d[4].bytes += 4;
    CHECK(ckpt_write(path, "{}", bad.d, bad.n, NULL) == SG_ERR, "byte count that is not the shape");
    bad.d[4].bytes -= 4;
    bad.d[4].dtype = 99;
    CHECK(ckpt_write(path, "{}", bad.d, bad.n, NULL) == SG_ERR, "bad dtype");
    bad.d[4].dtype = DT_F32;
    bad.d[4].name = "";
    CHECK(ckpt_write(path, "{}", bad.d, bad.n, NULL) == SG_ERR, "empty name");
    bad.d[4].name = "tab\there";
    CHECK(ckpt_write(path, "{}", bad.d, bad.n, NULL) == SG_ERR, "control byte in a name");
    bad.d[4].name = bad.names[4];
    CHECK(ckpt_write(path, "{\"a\":1,}", bad.d, bad.n, NULL) == SG_ERR, "metadata not JSON");
    CHECK(ckpt_write(path, "[1,2]", bad.d, bad.n, NULL) == SG_ERR, "metadata not an object");
    ckpt_write_opts o = {.level = 99};
    CHECK(ckpt_write(path, "{}", bad.d, bad.n, &o) == SG_ERR, "bad level");
    o = (ckpt_write_opts){.block_bytes = 100};
    CHECK(ckpt_write(path, "{}", bad.d, bad.n, &o) == SG_ERR, "bad block size");
    char nodir[300];
    snprintf(nodir, sizeof nodir, "%s/missing/x.sgck", dir);
    CHECK(ckpt_write(nodir, "{}", bad.d, bad.n, NULL) == SG_ERR &&
              strstr(sg_last_error(), "cannot create"),
          "missing directory: %s", sg_last_error());
    CHECK(count_files(dir) == before, "a refused write left files behind");
    free_set(&bad);

    /* overwrite an existing checkpoint in place */
    tensor_set s2;
    make_set(&s2, 555);
    snprintf(path, sizeof path, "%s/v0.sgck", dir);
    CHECK(ckpt_write(path, META, s2.d, s2.n, NULL) == SG_OK, "overwrite");
    check_file(path, &s2, "overwritten");
    free_set(&s2);

    free_set(&s);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) return 1;
    return sg_test_end();
}
