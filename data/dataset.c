/* dataset.c — the dataset loaders: IDX (MNIST / Fashion-MNIST, raw or gzipped), CIFAR-10
 * binary, and a procedural synthetic set. All produce NHWC uint8 (see dataset.h).
 *
 * The loaders distrust their input: a header is checked against the file's size (raw) or the
 * bytes that actually decompress (gzip) before anything is trusted, allocation grows with the
 * data actually read rather than with what a header claims, and every failure names the file,
 * what was expected, what was found, and where to get the real thing.
 */
#include "data/dataset.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "common/philox.h"

/* More than this many pixel bytes means a corrupt header, not a dataset (64 GiB). */
#define DATA_MAX_BYTES ((int64_t)1 << 36)

static const char FMNIST_HINT[] = "install it with `apt-get install dataset-fashion-mnist`";
static const char CIFAR_HINT[] =
    "download https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz, extract it, and pass "
    "the folder holding data_batch_1.bin";

void data_free(sg_dataset *ds) {
    if (!ds) return;
    free(ds->pixels);
    free(ds->labels);
    memset(ds, 0, sizeof *ds);
}

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* ---- IDX ---------------------------------------------------------------------------------- */

/* Reads up to len bytes (any size) from gz; returns the count read (short at end of input)
 * or -1 on a zlib error. */
static int64_t gz_read_full(gzFile gz, uint8_t *buf, int64_t len) {
    int64_t have = 0;
    while (have < len) {
        int64_t chunk = len - have < (1 << 30) ? len - have : (1 << 30);
        int got = gzread(gz, buf + have, (unsigned)chunk);
        if (got < 0) return -1;
        if (got == 0) break;
        have += got;
    }
    return have;
}

/* zlib's message for the last error on gz, or "" when there was none. */
static const char *gz_msg(gzFile gz) {
    int code = Z_OK;
    const char *msg = gzerror(gz, &code);
    return code == Z_OK || !msg ? "" : msg;
}

/* The error for a short or failed read of `what` from an IDX file. */
static int idx_read_error(const char *path, gzFile gz, int64_t got, int64_t want,
                          const char *what) {
    const char *zmsg = gz_msg(gz);
    if (!gzdirect(gz) && zmsg[0])
        return sg_set_error("data: %s: corrupt or truncated gzip stream while reading %s: got %lld "
                            "of %lld bytes (zlib: %s)",
                            path, what, (long long)(got > 0 ? got : 0), (long long)want, zmsg);
    return sg_set_error("data: %s: truncated %s: expected %lld bytes, found %lld", path, what,
                        (long long)want, (long long)(got > 0 ? got : 0));
}

static int idx_read(sg_dataset *ds, const char *path, gzFile gz, int64_t file_bytes) {
    uint8_t hdr[20];
    int64_t got = gz_read_full(gz, hdr, 4);
    if (got != 4) return idx_read_error(path, gz, got, 4, "IDX header");
    uint32_t magic = be32(hdr);
    if (magic == 0x00000801)
        return sg_set_error("data: %s: this is an IDX1 label file (magic 0x00000801), expected "
                            "IDX3 images (magic 0x00000803), e.g. train-images-idx3-ubyte.gz",
                            path);
    if (magic != 0x00000803 && magic != 0x00000804)
        return sg_set_error("data: %s: wrong magic 0x%08x, expected 0x00000803 (IDX3 unsigned-byte "
                            "images; 0x00000804 with channels); not an IDX image file",
                            path, magic);
    int ndims = hdr[3];
    got = gz_read_full(gz, hdr + 4, 4 * ndims);
    if (got != 4 * ndims) return idx_read_error(path, gz, got, 4 * ndims, "IDX dimensions");
    int64_t n = be32(hdr + 4), h = be32(hdr + 8), w = be32(hdr + 12);
    int64_t c = ndims == 4 ? be32(hdr + 16) : 1;
    /* each factor is < 2^32: bound the image first, then n by division, so nothing overflows */
    int ok = n >= 1 && h >= 1 && h <= 65536 && w >= 1 && w <= 65536 && c >= 1 && c <= 4 &&
             n <= DATA_MAX_BYTES / (h * w * c);
    int64_t bytes = ok ? n * h * w * c : 0;
    if (!ok)
        return sg_set_error("data: %s: implausible dimensions in the IDX header: %lld images of "
                            "%lldx%lldx%lld (expected n >= 1, sides 1..65536, 1..4 channels)",
                            path, (long long)n, (long long)h, (long long)w, (long long)c);
    int64_t header_bytes = 4 + 4 * (int64_t)ndims;
    /* a raw file's size must match its header exactly; a gzip stream is checked as it inflates */
    if (gzdirect(gz) && file_bytes != header_bytes + bytes)
        return sg_set_error("data: %s: wrong size: the header says %lld images of %lldx%lldx%lld "
                            "(%lld bytes with the header), the file has %lld bytes",
                            path, (long long)n, (long long)h, (long long)w, (long long)c,
                            (long long)(header_bytes + bytes), (long long)file_bytes);
    /* grow the buffer with the data actually inflated, so a lying header cannot make us
     * allocate gigabytes before the stream runs out */
    int64_t cap = bytes < ((int64_t)64 << 20) ? bytes : ((int64_t)64 << 20), have = 0;
    uint8_t *buf = malloc((size_t)cap);
    if (!buf) return sg_set_error("data: %s: out of memory (%lld bytes)", path, (long long)cap);
    for (;;) {
        got = gz_read_full(gz, buf + have, cap - have);
        if (got > 0) have += got;
        if (got < 0 || have < cap || cap == bytes) break;
        int64_t next = cap * 2 < bytes ? cap * 2 : bytes;
        uint8_t *grown = realloc(buf, (size_t)next);
        if (!grown) {
            free(buf);
            return sg_set_error("data: %s: out of memory (%lld bytes)", path, (long long)next);
        }
        buf = grown;
        cap = next;
    }
    if (got < 0 || have < bytes) {
        char what[128];
        snprintf(what, sizeof what, "pixels of %lld images of %lldx%lldx%lld", (long long)n,
                 (long long)h, (long long)w, (long long)c);
        free(buf);
        return idx_read_error(path, gz, got < 0 ? -1 : have, bytes, what);
    }
    uint8_t extra;
    if (gz_read_full(gz, &extra, 1) != 0) {
        free(buf);
        return sg_set_error("data: %s: more data after the %lld images of %lldx%lldx%lld the "
                            "header announces (wrong dimensions or a concatenated file?)",
                            path, (long long)n, (long long)h, (long long)w, (long long)c);
    }
    ds->pixels = buf;
    ds->n = n;
    ds->h = (int)h;
    ds->w = (int)w;
    ds->c = (int)c;
    snprintf(ds->source, sizeof ds->source, "%s", path);
    return SG_OK;
}

int data_load_idx(sg_dataset *ds, const char *path) {
    memset(ds, 0, sizeof *ds);
    struct stat st;
    if (stat(path, &st) != 0)
        return sg_set_error("data: %s: %s (expected an IDX image file, raw or .gz)", path,
                            strerror(errno));
    if (!S_ISREG(st.st_mode))
        return sg_set_error("data: %s: not a regular file (expected an IDX image file)", path);
    if (st.st_size == 0)
        return sg_set_error("data: %s: empty file (expected an IDX image file: a 16-byte header "
                            "with magic 0x00000803, then the pixels)",
                            path);
    gzFile gz = gzopen(path, "rb");
    if (!gz) return sg_set_error("data: %s: cannot open: %s", path, strerror(errno));
    gzbuffer(gz, 1 << 18);
    int rc = idx_read(ds, path, gz, (int64_t)st.st_size);
    gzclose(gz);
    if (rc != SG_OK) data_free(ds);
    return rc;
}

/* An IDX1 label file (magic 0x00000801, raw or gzipped) of exactly n labels, each below
 * `classes`, into ds->labels; ds->nclasses = classes. */
static int idx_read_labels(sg_dataset *ds, const char *path, int classes) {
    gzFile gz = gzopen(path, "rb");
    if (!gz) return sg_set_error("data: %s: cannot open: %s", path, strerror(errno));
    uint8_t hdr[8];
    int64_t got = gz_read_full(gz, hdr, 8);
    int rc = SG_OK;
    if (got != 8) {
        rc = idx_read_error(path, gz, got, 8, "IDX1 label header");
    } else if (be32(hdr) != 0x00000801) {
        rc = sg_set_error("data: %s: wrong magic 0x%08x, expected 0x00000801 (IDX1 labels)", path,
                          be32(hdr));
    } else if ((int64_t)be32(hdr + 4) != ds->n) {
        rc = sg_set_error("data: %s: %lld labels for %lld images", path, (long long)be32(hdr + 4),
                          (long long)ds->n);
    }
    uint8_t *raw = rc ? NULL : malloc((size_t)ds->n + 1);
    ds->labels = raw ? malloc(sizeof(int32_t) * (size_t)ds->n) : NULL;
    if (!rc && !ds->labels) rc = sg_set_error("data: %s: out of memory for the labels", path);
    if (!rc && (got = gz_read_full(gz, raw, ds->n + 1)) != ds->n)
        rc = got > ds->n ? sg_set_error("data: %s: more than the %lld labels its header announces",
                                        path, (long long)ds->n)
                         : idx_read_error(path, gz, got, ds->n, "labels");
    for (int64_t i = 0; !rc && i < ds->n; i++) {
        if (raw[i] >= classes)
            rc = sg_set_error("data: %s: label %d of image %lld, expected 0..%d", path, raw[i],
                              (long long)i, classes - 1);
        else
            ds->labels[i] = raw[i];
    }
    gzclose(gz);
    free(raw);
    if (rc) free(ds->labels), ds->labels = NULL;
    ds->nclasses = rc ? 0 : classes;
    return rc;
}

/* ---- CIFAR-10 ----------------------------------------------------------------------------- */

enum { CIFAR_SIDE = 32, CIFAR_PLANE = 32 * 32, CIFAR_RECORD = 1 + 3 * 32 * 32, CIFAR_PER = 10000 };

/* One batch file: 10000 records of a label byte then the R, G and B planes (row-major 32x32
 * each); converted to HWC so pixel (y, x) keeps its three channels together. */
static int cifar_read_file(uint8_t *dst, int32_t *labels, const char *path, uint8_t *record_buf) {
    struct stat st;
    if (stat(path, &st) != 0)
        return sg_set_error("data: %s: %s (expected a CIFAR-10 batch file; %s)", path,
                            strerror(errno), CIFAR_HINT);
    const int64_t want = (int64_t)CIFAR_PER * CIFAR_RECORD;
    if ((int64_t)st.st_size != want)
        return sg_set_error("data: %s: wrong size: expected %lld bytes (10000 records of 1 label + "
                            "3072 pixel bytes), found %lld; %s",
                            path, (long long)want, (long long)st.st_size, CIFAR_HINT);
    FILE *f = fopen(path, "rb");
    if (!f) return sg_set_error("data: %s: cannot open: %s", path, strerror(errno));
    size_t got = fread(record_buf, 1, (size_t)want, f);
    fclose(f);
    if ((int64_t)got != want)
        return sg_set_error("data: %s: short read: expected %lld bytes, read %zu", path,
                            (long long)want, got);
    for (int r = 0; r < CIFAR_PER; r++) {
        const uint8_t *rec = record_buf + (int64_t)r * CIFAR_RECORD;
        if (rec[0] > 9)
            return sg_set_error("data: %s: record %d has label %d, expected 0..9 (not a CIFAR-10 "
                                "binary batch; CIFAR-100 records have 2 label bytes)",
                                path, r, rec[0]);
        labels[r] = rec[0];
        uint8_t *out = dst + (int64_t)r * 3 * CIFAR_PLANE;
        for (int p = 0; p < CIFAR_PLANE; p++)
            for (int ch = 0; ch < 3; ch++) out[p * 3 + ch] = rec[1 + ch * CIFAR_PLANE + p];
    }
    return SG_OK;
}

int data_load_cifar10(sg_dataset *ds, const char *dir, int test_split) {
    memset(ds, 0, sizeof *ds);
    const char *first = test_split ? "test_batch.bin" : "data_batch_1.bin";
    char base[400], path[512];
    snprintf(base, sizeof base, "%s", dir);
    snprintf(path, sizeof path, "%s/%s", base, first);
    if (!is_file(path)) { /* also accept the folder the tarball was extracted into */
        char sub[512];
        snprintf(sub, sizeof sub, "%s/cifar-10-batches-bin/%s", dir, first);
        if (!is_file(sub))
            return sg_set_error("data: cifar10: %s not found (expected the CIFAR-10 binary "
                                "version: data_batch_1..5.bin, test_batch.bin); %s",
                                path, CIFAR_HINT);
        snprintf(base, sizeof base, "%s/cifar-10-batches-bin", dir);
    }
    const int files = test_split ? 1 : 5;
    const int64_t image = 3 * CIFAR_PLANE;
    uint8_t *pixels = malloc((size_t)(files * CIFAR_PER * image));
    uint8_t *record_buf = malloc((size_t)CIFAR_PER * CIFAR_RECORD);
    int32_t *labels = malloc(sizeof(int32_t) * (size_t)(files * CIFAR_PER));
    if (!pixels || !record_buf || !labels) {
        free(pixels);
        free(record_buf);
        free(labels);
        return sg_set_error("data: cifar10: out of memory (%lld bytes)",
                            (long long)(files * CIFAR_PER * image));
    }
    for (int f = 0; f < files; f++) {
        if (test_split)
            snprintf(path, sizeof path, "%s/test_batch.bin", base);
        else
            snprintf(path, sizeof path, "%s/data_batch_%d.bin", base, f + 1);
        if (cifar_read_file(pixels + (int64_t)f * CIFAR_PER * image, labels + f * CIFAR_PER, path,
                            record_buf) != SG_OK) {
            free(pixels);
            free(record_buf);
            free(labels);
            return SG_ERR;
        }
    }
    free(record_buf);
    ds->pixels = pixels;
    ds->labels = labels;
    ds->nclasses = 10;
    ds->n = (int64_t)files * CIFAR_PER;
    ds->h = ds->w = CIFAR_SIDE;
    ds->c = 3;
    snprintf(ds->source, sizeof ds->source, "%s/%s", base,
             test_split ? "test_batch.bin" : "data_batch_[1-5].bin");
    return SG_OK;
}

/* ---- synthetic ---------------------------------------------------------------------------- */

enum {
    SHAPE_DISC,
    SHAPE_RING,
    SHAPE_SQUARE,
    SHAPE_DIAMOND,
    SHAPE_HSTRIPES,
    SHAPE_VSTRIPES,
    SHAPE_COUNT
};

/* Fixed key of the synthetic set: the images must not change with the training seed. */
#define DATA_SYNTH_SEED 0x73796e7468657469ull

/* Whether the sub-pixel sample at offset (dx, dy) from the centre lies inside the shape of
 * radius r; stripes of `period` alternate inside the box. All in sub-pixel units. */
static int synth_inside(int shape, int64_t dx, int64_t dy, int64_t r, int64_t period) {
    int64_t d2 = dx * dx + dy * dy, adx = dx < 0 ? -dx : dx, ady = dy < 0 ? -dy : dy;
    switch (shape) {
    case SHAPE_DISC:
        return d2 <= r * r;
    case SHAPE_RING:
        return d2 <= r * r && d2 * 100 >= r * r * 36; /* inner radius 0.6 r */
    case SHAPE_SQUARE:
        return adx <= r && ady <= r;
    case SHAPE_DIAMOND:
        return adx + ady <= r;
    case SHAPE_HSTRIPES:
        return adx <= r && ady <= r && ((dy + r) / period) % 2 == 0;
    default:
        return adx <= r && ady <= r && ((dx + r) / period) % 2 == 0;
    }
}

int data_synthetic(sg_dataset *ds, int64_t n, int h, int w, int c) {
    memset(ds, 0, sizeof *ds);
    if (n < 1 || h < 4 || w < 4 || h > 4096 || w > 4096 || c < 1 || c > 4 ||
        n > DATA_MAX_BYTES / ((int64_t)h * w * c))
        return sg_set_error("data: synthetic: bad size %lld x %dx%dx%d (expected N >= 1, sides "
                            "4..4096, 1..4 channels)",
                            (long long)n, h, w, c);
    uint8_t *pixels = malloc((size_t)(n * h * w * c));
    int32_t *labels = malloc(sizeof(int32_t) * (size_t)n);
    if (!pixels || !labels) {
        free(pixels), free(labels);
        return sg_set_error("data: synthetic: out of memory (%lld bytes)",
                            (long long)(n * h * w * c));
    }
    /* 4x4 samples per pixel, sample centres at odd multiples of 1/8 pixel: U = 8 units per
     * pixel, so every coordinate is an integer and the bytes are the same on every machine */
    enum { S = 4, U = 2 * S };
    const int side = h < w ? h : w;
    for (int64_t k = 0; k < n; k++) {
        sg_u32x4 a = sg_rng_u32x4(DATA_SYNTH_SEED, 0, SG_RNG_SYNTHETIC, 2 * (uint64_t)k);
        sg_u32x4 b = sg_rng_u32x4(DATA_SYNTH_SEED, 0, SG_RNG_SYNTHETIC, 2 * (uint64_t)k + 1);
        int shape = (int)(a.v[0] % SHAPE_COUNT);
        labels[k] = shape;                                                   /* the image's class */
        int64_t r = (int64_t)side * U * (15 + (int64_t)(a.v[1] % 21)) / 100; /* 15..35% */
        int64_t cx = (int64_t)w * U * (30 + (int64_t)(a.v[2] % 41)) / 100;   /* 30..70% */
        int64_t cy = (int64_t)h * U * (30 + (int64_t)(a.v[3] % 41)) / 100;
        int64_t period = (int64_t)U * (2 + (int64_t)(b.v[0] % 3)) * side / 32; /* stripe width */
        if (period < U) period = U;
        int bg[4], fg[4];
        for (int ch = 0; ch < 4; ch++) {
            bg[ch] = (int)((b.v[1] >> (8 * ch)) & 0xff) % 48; /* dark background */
            fg[ch] = c == 1 ? 150 + (int)((b.v[2] >> (8 * ch)) & 0xff) % 106
                            : 40 + (int)((b.v[2] >> (8 * ch)) & 0xff) % 216;
        }
        if (c > 1) fg[b.v[3] % (uint32_t)(c < 3 ? c : 3)] = 255; /* one channel always bright */
        uint8_t *img = pixels + k * h * w * c;
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                int cover = 0;
                for (int sy = 0; sy < S; sy++)
                    for (int sx = 0; sx < S; sx++) {
                        int64_t px = (int64_t)(x * S + sx) * 2 + 1,
                                py = (int64_t)(y * S + sy) * 2 + 1;
                        cover += synth_inside(shape, px - cx, py - cy, r, period);
                    }
                for (int ch = 0; ch < c; ch++)
                    img[((int64_t)y * w + x) * c + ch] =
                        (uint8_t)(bg[ch] + ((fg[ch] - bg[ch]) * cover + S * S / 2) / (S * S));
            }
    }
    ds->pixels = pixels;
    ds->labels = labels;
    ds->nclasses = SHAPE_COUNT;
    ds->n = n;
    ds->h = h;
    ds->w = w;
    ds->c = c;
    snprintf(ds->source, sizeof ds->source, "synthetic:%lld:%dx%dx%d", (long long)n, h, w, c);
    return SG_OK;
}

/* ---- spec parsing ------------------------------------------------------------------------- */

/* Parses a decimal integer filling all of [s, end) ; returns 0 on junk. */
static int parse_int(const char *s, const char *end, int64_t *out) {
    if (s == end) return 0;
    int64_t v = 0;
    for (const char *p = s; p < end; p++) {
        if (*p < '0' || *p > '9' || v > ((int64_t)1 << 40)) return 0;
        v = v * 10 + (*p - '0');
    }
    *out = v;
    return 1;
}

static int load_synthetic_spec(sg_dataset *ds, const char *spec) {
    int64_t n = 1024, h = 32, w = 32, c = 1;
    const char *p = spec + strlen("synthetic");
    if (*p == ':') {
        const char *colon = strchr(p + 1, ':'), *end = colon ? colon : p + strlen(p);
        int ok = parse_int(p + 1, end, &n);
        if (ok && colon) {
            const char *x1 = strchr(colon + 1, 'x'), *x2 = x1 ? strchr(x1 + 1, 'x') : NULL;
            ok = x1 && x2 && parse_int(colon + 1, x1, &h) && parse_int(x1 + 1, x2, &w) &&
                 parse_int(x2 + 1, x2 + 1 + strlen(x2 + 1), &c);
        }
        if (!ok)
            return sg_set_error("data: bad dataset spec '%s': expected synthetic[:N[:HxWxC]], "
                                "e.g. synthetic:4096:28x28x1",
                                spec);
    } else if (*p != '\0') {
        return sg_set_error("data: unknown dataset spec '%s'", spec);
    }
    if (h > 4096 || w > 4096 || c > 4)
        return sg_set_error("data: synthetic: bad size %lld x %lldx%lldx%lld (expected N >= 1, "
                            "sides 4..4096, 1..4 channels)",
                            (long long)n, (long long)h, (long long)w, (long long)c);
    return data_synthetic(ds, n, (int)h, (int)w, (int)c);
}

static int load_fmnist(sg_dataset *ds, int test_split) {
    const char *stem = test_split ? "t10k-images-idx3-ubyte" : "train-images-idx3-ubyte";
    char gz[512], raw[512];
    snprintf(gz, sizeof gz, "%s/%s.gz", DATA_FMNIST_DIR, stem);
    snprintf(raw, sizeof raw, "%s/%s", DATA_FMNIST_DIR, stem);
    const char *path = is_file(gz) ? gz : is_file(raw) ? raw : NULL;
    if (!path)
        return sg_set_error("data: fmnist: %s not found (Fashion-MNIST is not installed: %s, or "
                            "pass idx:FILE)",
                            gz, FMNIST_HINT);
    if (data_load_idx(ds, path) != SG_OK) return SG_ERR;
    if (ds->h != 28 || ds->w != 28 || ds->c != 1) {
        int h = ds->h, w = ds->w, c = ds->c;
        data_free(ds);
        return sg_set_error("data: %s: expected 28x28x1 Fashion-MNIST images, found %dx%dx%d (%s "
                            "again?)",
                            path, h, w, c, FMNIST_HINT);
    }
    /* the labels, where their file lies beside the images (the package installs both) */
    const char *lstem = test_split ? "t10k-labels-idx1-ubyte" : "train-labels-idx1-ubyte";
    snprintf(gz, sizeof gz, "%s/%s.gz", DATA_FMNIST_DIR, lstem);
    snprintf(raw, sizeof raw, "%s/%s", DATA_FMNIST_DIR, lstem);
    const char *lpath = is_file(gz) ? gz : is_file(raw) ? raw : NULL;
    if (lpath && idx_read_labels(ds, lpath, 10)) return data_free(ds), SG_ERR;
    return SG_OK;
}

/* data_load's specs; with a model's size (size > 0) folder:DIR too */
static int load_spec(sg_dataset *ds, const char *spec, int size, int c) {
    memset(ds, 0, sizeof *ds);
    if (!spec || !*spec) return sg_set_error("data: empty dataset spec");
    if (strncmp(spec, "folder:", 7) == 0) {
        if (size <= 0)
            return sg_set_error("data: '%s': folder:DIR needs the model's image size (a tool that "
                                "takes it: train, verify, bench)",
                                spec);
        if (!spec[7]) return sg_set_error("data: bad dataset spec 'folder:': expected folder:DIR");
        return data_load_folder(ds, spec + 7, size, c);
    }
    if (strcmp(spec, "fmnist") == 0) return load_fmnist(ds, 0);
    if (strcmp(spec, "fmnist:test") == 0) return load_fmnist(ds, 1);
    if (strncmp(spec, "idx:", 4) == 0) {
        if (!spec[4]) return sg_set_error("data: bad dataset spec 'idx:': expected idx:FILE");
        return data_load_idx(ds, spec + 4);
    }
    if (strncmp(spec, "cifar10:", 8) == 0) {
        char dir[400];
        size_t len = strlen(spec + 8);
        int test_split = len > 5 && strcmp(spec + 8 + len - 5, ":test") == 0;
        if (test_split) len -= 5;
        if (len == 0 || len >= sizeof dir)
            return sg_set_error("data: bad dataset spec '%s': expected cifar10:DIR[:test]", spec);
        memcpy(dir, spec + 8, len);
        dir[len] = '\0';
        return data_load_cifar10(ds, dir, test_split);
    }
    if (strncmp(spec, "synthetic", 9) == 0) return load_synthetic_spec(ds, spec);
    return sg_set_error("data: unknown dataset spec '%s' (expected fmnist, fmnist:test, "
                        "cifar10:DIR[:test], idx:FILE%s or synthetic[:N[:HxWxC]])",
                        spec, size > 0 ? ", folder:DIR" : "");
}

int data_load(sg_dataset *ds, const char *spec) {
    return load_spec(ds, spec, 0, 0);
}

int data_load_for_model(sg_dataset *ds, const char *spec, int size, int c) {
    return load_spec(ds, spec, size, c);
}
