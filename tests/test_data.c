/* test_data.c — data/dataset.c: the real Fashion-MNIST file (when installed) against values
 * measured independently (Python's gzip module), IDX files written here raw and gzipped and
 * read back, every kind of broken input giving SG_ERR with a one-line message that says what
 * is wrong, a fake CIFAR-10 folder round trip (CHW records -> HWC), and the synthetic set's
 * determinism and spec parsing. Files go to a fresh temporary folder, removed at the end. */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "data/dataset.h"
#include "tests/sg_test.h"

static char tmpdir[64];
static char created[64][512];
static int ncreated;

/* A path inside the temporary folder, remembered for cleanup. */
static const char *tmp_path(const char *name) {
    snprintf(created[ncreated], sizeof created[0], "%s/%s", tmpdir, name);
    return created[ncreated++];
}

static void write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
    fclose(f);
}

static void write_gz(const char *path, const void *data, size_t len) {
    gzFile gz = gzopen(path, "wb");
    if (!gz || gzwrite(gz, data, (unsigned)len) != (int)len) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
    gzclose(gz);
}

static uint8_t *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(*len);
    if (fread(buf, 1, *len, f) != *len) *len = 0;
    fclose(f);
    return buf;
}

static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* An IDX image file in memory: magic 0x0803 (or 0x0804 with channels) + dims + pixels. */
static size_t make_idx(uint8_t *buf, uint32_t magic, uint32_t n, uint32_t h, uint32_t w, uint32_t c,
                       const uint8_t *pix, size_t npix) {
    size_t o = 0;
    put_be32(buf + o, magic), o += 4;
    put_be32(buf + o, n), o += 4;
    put_be32(buf + o, h), o += 4;
    put_be32(buf + o, w), o += 4;
    if ((magic & 0xff) == 4) put_be32(buf + o, c), o += 4;
    memcpy(buf + o, pix, npix);
    return o + npix;
}

/* Loading `spec` must fail, with a one-line message containing every given substring. */
static void expect_error(const char *spec, const char *sub1, const char *sub2) {
    sg_dataset ds;
    int rc = data_load(&ds, spec);
    const char *msg = sg_last_error();
    CHECK(rc == SG_ERR, "'%s' loaded (n=%lld) but should fail", spec, (long long)ds.n);
    CHECK(ds.pixels == NULL && ds.n == 0, "'%s': failed load left data behind", spec);
    CHECK(strchr(msg, '\n') == NULL, "'%s': message has a newline: %s", spec, msg);
    CHECK(strstr(msg, sub1) != NULL, "'%s': message lacks '%s': %s", spec, sub1, msg);
    if (sub2) CHECK(strstr(msg, sub2) != NULL, "'%s': message lacks '%s': %s", spec, sub2, msg);
    data_free(&ds);
}

/* FNV-1a of the default synthetic set, pinned when the generator was written */
#define SYNTH_HASH 0x4550e6beu

static uint32_t fnv1a(const uint8_t *p, int64_t n) {
    uint32_t h = 2166136261u;
    for (int64_t i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
    return h;
}

/* Values measured once with Python's gzip module on the Debian package's files. */
static void test_fmnist(void) {
    char path[256];
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte.gz", DATA_FMNIST_DIR);
    if (access(path, R_OK) != 0) {
        printf("SKIP Fashion-MNIST checks: %s absent (apt-get install dataset-fashion-mnist)\n",
               path);
        expect_error("fmnist", "apt-get install dataset-fashion-mnist", NULL);
        return;
    }
    sg_dataset ds;
    CHECK(data_load(&ds, "fmnist") == SG_OK, "fmnist: %s", sg_last_error());
    if (!ds.pixels) return;
    CHECK(ds.n == 60000 && ds.h == 28 && ds.w == 28 && ds.c == 1, "fmnist is %lldx%dx%dx%d",
          (long long)ds.n, ds.h, ds.w, ds.c);
    CHECK(strcmp(ds.source, path) == 0, "source %s", ds.source);
    uint64_t sum = 0, first = 0, last = 0;
    for (int64_t i = 0; i < ds.n * 784; i++) sum += ds.pixels[i];
    for (int i = 0; i < 784; i++) first += ds.pixels[i], last += ds.pixels[(ds.n - 1) * 784 + i];
    CHECK(sum == 3431114169ull, "pixel sum %llu (mean %.4f, want 72.9404)", (unsigned long long)sum,
          (double)sum / (ds.n * 784.0));
    CHECK(first == 76247 && last == 16684, "image sums: first %llu last %llu",
          (unsigned long long)first, (unsigned long long)last);
    static const uint8_t row10[28] = {0,   0,   0,   0,   0,   0,   0,   0,   0,   0,
                                      0,   0,   0,   193, 228, 218, 213, 198, 180, 212,
                                      210, 211, 213, 223, 220, 243, 202, 0};
    CHECK(memcmp(ds.pixels + 10 * 28, row10, 28) == 0, "row 10 of image 0 differs");
    /* the labels, from the label file beside the images: 6000 of each of the 10 classes, the
     * first image an ankle boot (9), the second a T-shirt (0) */
    int count[10] = {0}, balanced = ds.labels && ds.nclasses == 10;
    for (int64_t i = 0; balanced && i < ds.n; i++)
        if (ds.labels[i] >= 0 && ds.labels[i] < 10) count[ds.labels[i]]++;
    for (int k = 0; k < 10; k++) balanced &= count[k] == 6000;
    CHECK(balanced && ds.labels[0] == 9 && ds.labels[1] == 0,
          "fmnist labels: %d classes, not 6000 each, or not 9, 0 first", ds.nclasses);
    data_free(&ds);
    CHECK(ds.pixels == NULL && ds.n == 0, "data_free zeroes");
    data_free(&ds); /* twice is harmless */
    CHECK(data_load(&ds, "fmnist:test") == SG_OK, "fmnist:test: %s", sg_last_error());
    CHECK(ds.n == 10000 && fnv1a(ds.pixels, ds.n * 784) == 0x9dcd9631u, "test split n=%lld",
          (long long)ds.n);
    CHECK(ds.labels && ds.nclasses == 10, "fmnist:test has no labels");
    data_free(&ds);
    /* the same file through idx: gives the same bytes as through fmnist */
    char spec[300];
    snprintf(spec, sizeof spec, "idx:%s", path);
    CHECK(data_load(&ds, spec) == SG_OK && ds.n == 60000, "idx:%s: %s", path, sg_last_error());
    CHECK(ds.pixels && fnv1a(ds.pixels, ds.n * 784) == 0xc0f66fc4u, "idx: fmnist hash");
    CHECK(!ds.labels && !ds.nclasses, "idx:FILE has labels");
    data_free(&ds);
}

static void test_idx_roundtrip(void) {
    enum { N = 3, H = 4, W = 5 };
    uint8_t pix[N * H * W * 3], file[16 + 4 + sizeof pix];
    uint64_t s = 11;
    for (size_t i = 0; i < sizeof pix; i++) pix[i] = (uint8_t)sg_test_next(&s);
    size_t len = make_idx(file, 0x803, N, H, W, 1, pix, N * H * W);
    const char *raw = tmp_path("imgs-idx3-ubyte"), *gz = tmp_path("imgs-idx3-ubyte.gz");
    write_file(raw, file, len);
    write_gz(gz, file, len);
    const char *paths[2] = {raw, gz};
    for (int k = 0; k < 2; k++) {
        char spec[300];
        snprintf(spec, sizeof spec, "idx:%s", paths[k]);
        sg_dataset ds;
        CHECK(data_load(&ds, spec) == SG_OK, "%s: %s", spec, sg_last_error());
        CHECK(ds.n == N && ds.h == H && ds.w == W && ds.c == 1, "%s dims", spec);
        CHECK(ds.pixels && memcmp(ds.pixels, pix, N * H * W) == 0, "%s pixels differ", spec);
        CHECK(strcmp(ds.source, paths[k]) == 0, "%s source '%s'", spec, ds.source);
        data_free(&ds);
    }
    /* IDX with an explicit channel dimension (magic 0x0804): n, h, w, c, HWC order */
    len = make_idx(file, 0x804, N, H, W, 3, pix, sizeof pix);
    const char *gz4 = tmp_path("rgb.idx.gz");
    write_gz(gz4, file, len);
    sg_dataset ds;
    CHECK(data_load_idx(&ds, gz4) == SG_OK, "idx4: %s", sg_last_error());
    CHECK(ds.n == N && ds.h == H && ds.w == W && ds.c == 3 && ds.pixels &&
              memcmp(ds.pixels, pix, sizeof pix) == 0,
          "idx4 round trip");
    data_free(&ds);
}

static void test_idx_errors(void) {
    enum { N = 3, H = 4, W = 5 };
    uint8_t pix[N * H * W], file[16 + sizeof pix + 8];
    for (size_t i = 0; i < sizeof pix; i++) pix[i] = (uint8_t)(i * 13);
    char spec[300];
    size_t len;
#define SPEC(path) (snprintf(spec, sizeof spec, "idx:%s", path), spec)

    const char *p = tmp_path("missing.gz");
    expect_error(SPEC(p), p, "No such file");

    p = tmp_path("empty");
    write_file(p, "", 0);
    expect_error(SPEC(p), p, "empty file");

    p = tmp_path("short-header");
    write_file(p, "\0\0", 2);
    expect_error(SPEC(p), "truncated IDX header", "found 2");

    len = make_idx(file, 0x802, N, H, W, 1, pix, sizeof pix);
    p = tmp_path("bad-magic");
    write_file(p, file, len);
    expect_error(SPEC(p), "wrong magic 0x00000802", "0x00000803");

    len = make_idx(file, 0x801, N, 0, 0, 1, pix, 0);
    p = tmp_path("labels-idx1-ubyte");
    write_file(p, file, 8);
    expect_error(SPEC(p), "label file", "IDX3");

    p = tmp_path("text-file");
    write_file(p, "hello, this is not an image file\n", 33);
    expect_error(SPEC(p), "wrong magic 0x68656c6c", "not an IDX image file");

    /* raw: the header promises more (or fewer) bytes than the file has */
    len = make_idx(file, 0x803, N, H, W, 1, pix, sizeof pix);
    p = tmp_path("truncated-raw");
    write_file(p, file, len - 7);
    expect_error(SPEC(p), "wrong size", "the file has 69 bytes");
    p = tmp_path("long-raw");
    memset(file + len, 0, 5);
    write_file(p, file, len + 5);
    expect_error(SPEC(p), "wrong size", "76 bytes with the header");

    /* dimensions that cannot be real */
    len = make_idx(file, 0x803, 0, H, W, 1, pix, sizeof pix);
    p = tmp_path("zero-images");
    write_file(p, file, len);
    expect_error(SPEC(p), "implausible dimensions", "0 images");
    len = make_idx(file, 0x803, 0xffffffffu, 0xffff, 0xffff, 1, pix, sizeof pix);
    p = tmp_path("huge-dims.gz");
    write_gz(p, file, len);
    expect_error(SPEC(p), "implausible dimensions", NULL);

    /* gzip: the header claims 1000 images, the stream holds 3 (allocation must not trust it) */
    len = make_idx(file, 0x803, 1000, H, W, 1, pix, sizeof pix);
    p = tmp_path("short-stream.gz");
    write_gz(p, file, len);
    expect_error(SPEC(p), "truncated pixels of 1000 images of 4x5x1", "found 60");

    /* gzip: more data after the announced images */
    len = make_idx(file, 0x803, 2, H, W, 1, pix, sizeof pix);
    p = tmp_path("trailing.gz");
    write_gz(p, file, len);
    expect_error(SPEC(p), "more data after the 2 images", NULL);

    /* gzip: a good stream cut in half */
    uint8_t *bigpix = malloc(200 * 28 * 28);
    uint64_t s = 5;
    for (int i = 0; i < 200 * 28 * 28; i++) bigpix[i] = (uint8_t)(sg_test_next(&s) & 0x3f);
    uint8_t *bigfile = malloc(16 + 200 * 28 * 28);
    len = make_idx(bigfile, 0x803, 200, 28, 28, 1, bigpix, 200 * 28 * 28);
    const char *good = tmp_path("good.gz");
    write_gz(good, bigfile, len);
    size_t zlen;
    uint8_t *z = read_all(good, &zlen);
    p = tmp_path("cut.gz");
    write_file(p, z, zlen / 2);
    expect_error(SPEC(p), "gzip", "unexpected end of file");

    /* gzip: right magic, garbage after it */
    z[3] = 0; /* no optional header fields */
    for (size_t i = 10; i < 400 && i < zlen; i++) z[i] = (uint8_t)(i * 37 + 11);
    p = tmp_path("garbage.gz");
    write_file(p, z, zlen < 400 ? zlen : 400);
    expect_error(SPEC(p), "corrupt or truncated gzip stream", "zlib:");
    free(z);
    free(bigfile);
    free(bigpix);

    /* not a file at all */
    expect_error(SPEC(tmpdir), "not a regular file", NULL);
#undef SPEC
}

/* CIFAR-10 binary: each record is a label byte then R, G, B planes of 32x32 (CHW). */
static uint8_t cifar_value(int rec, int ch, int p) {
    return (uint8_t)(rec * 7 + ch * 50 + p * 3);
}

static void write_cifar_file(const char *path, int first_record, int label_offset) {
    enum { REC = 3073 };
    uint8_t *buf = malloc((size_t)10000 * REC);
    for (int r = 0; r < 10000; r++) {
        uint8_t *rec = buf + (size_t)r * REC;
        rec[0] = (uint8_t)((r % 10) + label_offset);
        for (int ch = 0; ch < 3; ch++)
            for (int p = 0; p < 1024; p++)
                rec[1 + ch * 1024 + p] = cifar_value(first_record + r, ch, p);
    }
    write_file(path, buf, (size_t)10000 * REC);
    free(buf);
}

static void check_cifar_hwc(const sg_dataset *ds, int64_t n, const char *what) {
    int64_t bad = 0;
    for (int64_t r = 0; r < n; r += 997) /* a spread of records, every pixel and channel */
        for (int y = 0; y < 32; y++)
            for (int x = 0; x < 32; x++)
                for (int ch = 0; ch < 3; ch++)
                    bad += ds->pixels[((r * 32 + y) * 32 + x) * 3 + ch] !=
                           cifar_value((int)r, ch, y * 32 + x);
    int64_t r = n - 1; /* and the very last record */
    for (int p = 0; p < 1024; p++)
        for (int ch = 0; ch < 3; ch++)
            bad += ds->pixels[(r * 1024 + p) * 3 + ch] != cifar_value((int)r, ch, p);
    CHECK(bad == 0, "%s: %lld values not where CHW -> HWC puts them", what, (long long)bad);
}

static void test_cifar(void) {
    const char *dir = tmp_path("cifar"), *sub = tmp_path("cifar/cifar-10-batches-bin");
    mkdir(dir, 0700);
    mkdir(sub, 0700);
    char spec[300], path[128];
    snprintf(spec, sizeof spec, "cifar10:%s", dir);
    expect_error(spec, "data_batch_1.bin not found", "cifar-10-binary.tar.gz");
    /* test split, in the nested folder the tarball extracts to */
    const char *test_batch = tmp_path("cifar/cifar-10-batches-bin/test_batch.bin");
    write_cifar_file(test_batch, 0, 0);
    snprintf(spec, sizeof spec, "cifar10:%s:test", dir);
    sg_dataset ds;
    CHECK(data_load(&ds, spec) == SG_OK, "%s: %s", spec, sg_last_error());
    CHECK(ds.n == 10000 && ds.h == 32 && ds.w == 32 && ds.c == 3, "cifar test dims");
    if (ds.pixels) check_cifar_hwc(&ds, 10000, "test split");
    data_free(&ds);
    /* training split: five files; the third missing, then wrong-sized, then bad labels */
    for (int f = 1; f <= 5; f++) {
        if (f == 3) continue;
        snprintf(path, sizeof path, "data_batch_%d.bin", f);
        write_cifar_file(tmp_path(path), (f - 1) * 10000, 0);
    }
    snprintf(spec, sizeof spec, "cifar10:%s", tmpdir);
    expect_error(spec, "data_batch_3.bin", "No such file");
    const char *third = tmp_path("data_batch_3.bin");
    write_file(third, "short", 5);
    expect_error(spec, "wrong size: expected 30730000 bytes", "found 5");
    write_cifar_file(third, 20000, 100);
    expect_error(spec, "has label 100", "not a CIFAR-10");
    write_cifar_file(third, 20000, 0);
    CHECK(data_load(&ds, spec) == SG_OK, "%s: %s", spec, sg_last_error());
    CHECK(ds.n == 50000 && ds.h == 32 && ds.w == 32 && ds.c == 3, "cifar train dims");
    if (ds.pixels) check_cifar_hwc(&ds, 50000, "train split");
    int bad_label = !ds.labels || ds.nclasses != 10; /* each record's label byte: r % 10 */
    for (int64_t i = 0; !bad_label && i < ds.n; i++) bad_label = ds.labels[i] != i % 10;
    CHECK(!bad_label, "cifar labels are not the records' label bytes");
    data_free(&ds);
    for (int f = 1; f <= 5; f++) { /* 150 MB: remove now, not at exit */
        snprintf(path, sizeof path, "%s/data_batch_%d.bin", tmpdir, f);
        remove(path);
    }
    remove(test_batch);
}

static void test_synthetic(void) {
    sg_dataset a, b;
    CHECK(data_load(&a, "synthetic") == SG_OK, "synthetic: %s", sg_last_error());
    CHECK(a.n == 1024 && a.h == 32 && a.w == 32 && a.c == 1, "default synthetic size");
    CHECK(strcmp(a.source, "synthetic:1024:32x32x1") == 0, "source %s", a.source);
    CHECK(data_load(&b, "synthetic:1024:32x32x1") == SG_OK, "explicit: %s", sg_last_error());
    CHECK(a.pixels && b.pixels && memcmp(a.pixels, b.pixels, 1024 * 32 * 32) == 0,
          "synthetic is not deterministic");
    /* pinned: integer-only generation gives these bytes on every machine */
    CHECK(fnv1a(a.pixels, 1024 * 32 * 32) == SYNTH_HASH, "synthetic bytes changed: %08x",
          fnv1a(a.pixels, 1024 * 32 * 32));
    /* every image has a dark background and a brighter shape */
    int flat = 0;
    double mean = 0;
    for (int i = 0; i < 1024; i++) {
        int lo = 255, hi = 0;
        for (int p = 0; p < 1024; p++) {
            int v = a.pixels[i * 1024 + p];
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
            mean += v;
        }
        flat += !(lo < 48 && hi > 120);
    }
    mean /= 1024.0 * 1024;
    CHECK(flat == 0, "%d synthetic images lack a shape on a dark background", flat);
    CHECK(mean > 20 && mean < 100, "synthetic mean pixel %f", mean);
    /* the labels: the shape of each image, 6 classes, each about a sixth of the set */
    int per_shape[6] = {0}, in_range = a.labels && a.nclasses == 6;
    for (int i = 0; in_range && i < 1024; i++)
        if ((in_range = a.labels[i] >= 0 && a.labels[i] < 6)) per_shape[a.labels[i]]++;
    for (int k = 0; k < 6; k++) in_range &= per_shape[k] > 120 && per_shape[k] < 220;
    CHECK(in_range, "synthetic labels: not 6 shapes of about 170 images each");
    /* a prefix of a larger set is the smaller set (image k depends on k only) */
    data_free(&b);
    CHECK(data_load(&b, "synthetic:2000") == SG_OK && b.n == 2000, "synthetic:2000");
    CHECK(b.pixels && memcmp(a.pixels, b.pixels, 1024 * 32 * 32) == 0, "prefix property");
    CHECK(a.labels && b.labels && !memcmp(a.labels, b.labels, 1024 * sizeof(int32_t)),
          "prefix property of the labels");
    data_free(&a);
    data_free(&b);
    CHECK(data_load(&a, "synthetic:10:16x24x3") == SG_OK, "rgb: %s", sg_last_error());
    CHECK(a.n == 10 && a.h == 16 && a.w == 24 && a.c == 3, "synthetic:10:16x24x3 dims");
    data_free(&a);
    expect_error("synthetic:abc", "expected synthetic[:N[:HxWxC]]", NULL);
    expect_error("synthetic:10:16x24", "expected synthetic[:N[:HxWxC]]", NULL);
    expect_error("synthetic:0", "bad size 0", NULL);
    expect_error("synthetic:5:2x2x1", "bad size", NULL);
    expect_error("synthetic:5:32x32x7", "bad size", NULL);
    expect_error("synthetics", "unknown dataset spec", NULL);
    expect_error("mnist", "unknown dataset spec 'mnist'", "fmnist");
    expect_error("", "empty dataset spec", NULL);
    expect_error("idx:", "expected idx:FILE", NULL);
    expect_error("cifar10:", "expected cifar10:DIR", NULL);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sg_test_data_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_fmnist();
    test_idx_roundtrip();
    test_idx_errors();
    test_cifar();
    test_synthetic();
    for (int i = ncreated - 1; i >= 0; i--) remove(created[i]); /* files, then folders */
    rmdir(tmpdir);
    return sg_test_end();
}
