/* test_image_folder.c — data_load_folder (data/image_folder.c): PNG and JPEG files in a folder
 * and its subfolders become size x size images, centre-cropped and box-filtered, in the order of
 * their relative paths; other files are ignored; an unreadable image is an error naming it.
 *
 * Oracle: the crop is written out by hand (a 40x24 image keeps columns 8..31) and the resize
 * is an exact 2x2 mean (24 -> 12), computed here independently of the loader's general box
 * filter. Pixels are random (fixed seed); JPEG is lossy, so it is compared within a bound.
 */
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
/* jpeglib.h needs FILE and size_t first */
#include <jpeglib.h>
#include <unistd.h>

#include "data/dataset.h"
#include "tests/sg_test.h"

static void write_png(const char *path, const uint8_t *px, int w, int h, int c) {
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    im.width = (png_uint_32)w, im.height = (png_uint_32)h;
    im.format = c == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
    CHECK(png_image_write_to_file(&im, path, 0, px, 0, NULL), "write %s", path);
}

static void write_jpeg(const char *path, const uint8_t *px, int w, int h) {
    FILE *f = fopen(path, "wb");
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr err;
    ci.err = jpeg_std_error(&err);
    jpeg_create_compress(&ci);
    jpeg_stdio_dest(&ci, f);
    ci.image_width = (JDIMENSION)w, ci.image_height = (JDIMENSION)h;
    ci.input_components = 3, ci.in_color_space = JCS_RGB;
    jpeg_set_defaults(&ci);
    jpeg_set_quality(&ci, 100, TRUE);
    jpeg_start_compress(&ci, TRUE);
    while (ci.next_scanline < ci.image_height) {
        /* libjpeg's rows are not const: hand it a copy of the row */
        unsigned char row[3 * 64];
        CHECK(w <= 64, "write_jpeg: rows up to 64 pixels");
        memcpy(row, px + (size_t)ci.next_scanline * w * 3, (size_t)w * 3);
        JSAMPROW r = row;
        jpeg_write_scanlines(&ci, &r, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    fclose(f);
}

typedef struct {
    int calls, finals, monotonic;
    int64_t last_done, total;
} progress_seen;

static void on_progress(void *ctx, int64_t done, int64_t total, int final) {
    progress_seen *p = ctx;
    if (!p->calls) p->monotonic = 1;
    p->monotonic &= done >= p->last_done && done <= total;
    p->calls++, p->finals += final != 0;
    p->last_done = done, p->total = total;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* the size of path's file */
static long file_size(const char *path) {
    FILE *f = fopen(path, "rb");
    long n = -1;
    if (f && !fseek(f, 0, SEEK_END)) n = ftell(f);
    if (f) fclose(f);
    return n;
}

/* the file's bytes into buf (cap at most), and back */
static long slurp(const char *path, uint8_t *buf, long cap) {
    FILE *f = fopen(path, "rb");
    long n = f ? (long)fread(buf, 1, (size_t)cap, f) : -1;
    if (f) fclose(f);
    return n;
}
static void spill(const char *path, const uint8_t *buf, long n) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(buf, 1, (size_t)n, f) == (size_t)n, "write %s", path);
    if (f) fclose(f);
}

static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* PNG's chunk CRC (ISO 3309, reflected 0xEDB88320), bit by bit */
static uint32_t png_crc(const uint8_t *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    }
    return c ^ 0xFFFFFFFFu;
}

/* the expected 12x12 image: crop (x0, y0, 24x24) of src (w wide, c channels), 2x2 means */
static void expect(const uint8_t *src, int w, int c, int x0, int y0, uint8_t *out) {
    for (int y = 0; y < 12; y++)
        for (int x = 0; x < 12; x++)
            for (int ch = 0; ch < c; ch++) {
                int s = 0;
                for (int dy = 0; dy < 2; dy++)
                    for (int dx = 0; dx < 2; dx++)
                        s += src[((y0 + 2 * y + dy) * w + x0 + 2 * x + dx) * c + ch];
                out[(y * 12 + x) * c + ch] = (uint8_t)((s + 2) / 4);
            }
}

int main(void) {
    char dir[] = "/tmp/sg_folder_XXXXXX", path[256];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    uint64_t seed = 2024;
    /* a.png: 40x24 RGB (wide: crop columns 8..31); b.jpg: 24x40 RGB (tall: rows 8..31) */
    uint8_t wide[24 * 40 * 3], tall[40 * 24 * 3];
    for (size_t i = 0; i < sizeof wide; i++) wide[i] = (uint8_t)(sg_test_next(&seed) >> 56);
    for (int y = 0; y < 40; y++) /* smooth, so JPEG keeps it close */
        for (int x = 0; x < 24; x++)
            for (int ch = 0; ch < 3; ch++)
                tall[(y * 24 + x) * 3 + ch] = (uint8_t)(2 * y + 2 * x + 40 * ch);
    snprintf(path, sizeof path, "%s/a.png", dir), write_png(path, wide, 40, 24, 3);
    snprintf(path, sizeof path, "%s/b.JPG", dir), write_jpeg(path, tall, 24, 40);
    snprintf(path, sizeof path, "%s/notes.txt", dir);
    FILE *f = fopen(path, "w");
    fputs("not an image\n", f), fclose(f);

    sg_dataset ds;
    memset(&ds, 0xA5, sizeof ds);
    CHECK(data_load_folder(&ds, dir, 12, 3) == SG_OK, "load: %s", sg_last_error());
    CHECK(ds.n == 2 && ds.h == 12 && ds.w == 12 && ds.c == 3, "shape %lld x %dx%dx%d",
          (long long)ds.n, ds.h, ds.w, ds.c);
    uint8_t want[12 * 12 * 3];
    expect(wide, 40, 3, 8, 0, want);
    CHECK(ds.n >= 1 && !memcmp(ds.pixels, want, sizeof want), "a.png: crop + 2x2 mean exact");
    expect(tall, 24, 3, 0, 8, want);
    int worst = 0;
    for (size_t i = 0; i < sizeof want && ds.n == 2; i++) {
        int d = abs((int)ds.pixels[sizeof want + i] - (int)want[i]);
        worst = d > worst ? d : worst;
    }
    CHECK(worst <= 6, "b.JPG within 6 of the exact crop + mean (JPEG q100), worst %d", worst);
    data_free(&ds);

    /* grey */
    uint8_t grey[24 * 24];
    for (size_t i = 0; i < sizeof grey; i++) grey[i] = (uint8_t)(sg_test_next(&seed) >> 56);
    char gdir[] = "/tmp/sg_folder_XXXXXX";
    CHECK(mkdtemp(gdir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/g.png", gdir), write_png(path, grey, 24, 24, 1);
    CHECK(data_load_folder(&ds, gdir, 12, 1) == SG_OK, "grey: %s", sg_last_error());
    uint8_t gwant[12 * 12];
    expect(grey, 24, 1, 0, 0, gwant);
    CHECK(ds.n == 1 && ds.c == 1 && !memcmp(ds.pixels, gwant, sizeof gwant), "grey exact");
    data_free(&ds);
    /* converted to what the model asks: a grey file for an RGB model is the grey value in all
     * three channels; an RGB file whose channels are equal, for a grey model, that value
     * (within 1: libpng converts through linear light) */
    CHECK(data_load_folder(&ds, gdir, 12, 3) == SG_OK, "grey as RGB: %s", sg_last_error());
    int bad = ds.n != 1 || ds.c != 3;
    for (int i = 0; !bad && i < 12 * 12; i++)
        for (int ch = 0; ch < 3; ch++) bad += ds.pixels[i * 3 + ch] != gwant[i];
    CHECK(!bad, "a grey file for an RGB model: the grey in R, G and B");
    data_free(&ds);
    char cdir[] = "/tmp/sg_folder_XXXXXX";
    CHECK(mkdtemp(cdir) != NULL, "mkdtemp");
    uint8_t rgb_grey[24 * 24 * 3];
    for (int i = 0; i < 24 * 24; i++)
        rgb_grey[3 * i] = rgb_grey[3 * i + 1] = rgb_grey[3 * i + 2] = grey[i];
    snprintf(path, sizeof path, "%s/c.png", cdir), write_png(path, rgb_grey, 24, 24, 3);
    CHECK(data_load_folder(&ds, cdir, 12, 1) == SG_OK, "RGB as grey: %s", sg_last_error());
    const int shape_ok = ds.n == 1 && ds.c == 1;
    int worst_grey = shape_ok ? 0 : 256;
    for (int i = 0; shape_ok && i < 12 * 12; i++) {
        int d = abs((int)ds.pixels[i] - (int)gwant[i]);
        worst_grey = d > worst_grey ? d : worst_grey;
    }
    CHECK(worst_grey <= 1, "an RGB file (R = G = B) for a grey model: off by %d", worst_grey);
    data_free(&ds);
    unlink(path), rmdir(cdir);

    /* damaged files, each alone in a folder, each refused with its name: a truncated PNG
     * and JPEG (libjpeg would fill the rest with grey), and headers declaring 20000 x 16000
     * pixels (more than DATA_MAX_IMAGE_PIXELS; refused before any allocation) */
    {
        char ddir[] = "/tmp/sg_folder_XXXXXX";
        CHECK(mkdtemp(ddir) != NULL, "mkdtemp");
        static uint8_t bytes[1 << 16];
        const char *names[4] = {"cut.png", "cut.jpg", "huge.png", "huge.jpg"};
        const char *want_msg[4] = {"damaged PNG", "truncated", "20000x16000 pixels",
                                   "20000x16000 pixels"};
        for (int k = 0; k < 4; k++) {
            snprintf(path, sizeof path, "%s/%s", ddir, names[k]);
            if (k % 2 == 0)
                write_png(path, wide, 40, 24, 3);
            else
                write_jpeg(path, tall, 24, 40);
            long n = slurp(path, bytes, sizeof bytes);
            CHECK(n > 100 && n < (long)sizeof bytes, "%s: %ld bytes", names[k], n);
            if (k < 2) {
                n = k == 0 ? n * 2 / 3 : n - 48; /* into the image data (PNG: its IDAT; the
                                                  * JPEG's q100 tables take most of it) */
            } else if (k == 2) {
                /* IHDR: length, "IHDR", width, height, ..., CRC over type and data */
                CHECK(!memcmp(bytes + 12, "IHDR", 4), "huge.png: IHDR first");
                put_be32(bytes + 16, 20000), put_be32(bytes + 20, 16000);
                put_be32(bytes + 29, png_crc(bytes + 12, 17));
            } else {
                long sof = 2; /* SOF0: FF C0, length, precision, height, width */
                while (sof + 9 < n && !(bytes[sof] == 0xFF && bytes[sof + 1] == 0xC0)) sof++;
                CHECK(sof + 9 < n, "huge.jpg: no SOF0 marker");
                bytes[sof + 5] = 16000 >> 8, bytes[sof + 6] = 16000 & 255;
                bytes[sof + 7] = 20000 >> 8, bytes[sof + 8] = 20000 & 255;
            }
            spill(path, bytes, n);
            CHECK(k >= 2 || file_size(path) == n, "%s truncated", names[k]);
            double t0 = now_ms();
            int rc = data_load_folder(&ds, ddir, 12, 3);
            CHECK(rc == SG_ERR && strstr(sg_last_error(), names[k]) &&
                      strstr(sg_last_error(), want_msg[k]) && ds.pixels == NULL,
                  "%s refused with its name and \"%s\": %s", names[k], want_msg[k],
                  rc ? sg_last_error() : "(accepted)");
            CHECK(k < 2 || now_ms() - t0 < 2000, "%s refused from its header (%.0f ms)", names[k],
                  now_ms() - t0);
            data_free(&ds);
            unlink(path);
        }
        rmdir(ddir);
    }

    /* threads: 37 images of varied sizes decoded on 1, 3 and 8 threads give the same pixels;
     * with images 20 and 30 damaged, the error names image 20 whatever the threads (the
     * first in name order, as one thread finds it); the progress calls count up to the end,
     * and end with one final call */
    {
        char mdir[] = "/tmp/sg_folder_XXXXXX";
        CHECK(mkdtemp(mdir) != NULL, "mkdtemp");
        enum { M = 37 };
        static uint8_t img[40 * 40];
        for (int i = 0; i < M; i++) {
            const int w = 12 + i % 29, h = 12 + (i * 7) % 29;
            for (int k = 0; k < w * h; k++) img[k] = (uint8_t)(sg_test_next(&seed) >> 56);
            snprintf(path, sizeof path, "%s/m%02d.png", mdir, i);
            write_png(path, img, w, h, 1);
        }
        uint8_t *ref = NULL;
        const int threads[3] = {1, 3, 8};
        for (int k = 0; k < 3; k++) {
            data_set_threads(threads[k]);
            progress_seen p = {0};
            data_set_progress(on_progress, &p, 0, 0);
            int rc = data_load_folder(&ds, mdir, 12, 1);
            data_set_progress(NULL, NULL, 0, 0);
            CHECK(rc == SG_OK && ds.n == M, "%d threads: %s", threads[k], sg_last_error());
            /* the loading thread reports after each image it decodes (one thread: all), then
             * once at the end */
            CHECK((threads[k] > 1 || p.calls == M + 1) &&
                      (p.calls == 0 || (p.finals == 1 && p.last_done == M && p.total == M)) &&
                      (p.calls == 0 || p.monotonic),
                  "%d threads: progress %d calls (%d final), last %lld of %lld, monotonic %d",
                  threads[k], p.calls, p.finals, (long long)p.last_done, (long long)p.total,
                  p.monotonic);
            if (rc == SG_OK && !ref) {
                ref = malloc((size_t)M * 144);
                memcpy(ref, ds.pixels, (size_t)M * 144);
            } else if (rc == SG_OK) {
                CHECK(!memcmp(ref, ds.pixels, (size_t)M * 144), "%d threads: the 1-thread pixels",
                      threads[k]);
            }
            data_free(&ds);
        }
        free(ref);
        for (int broken = 20; broken <= 30; broken += 10) {
            snprintf(path, sizeof path, "%s/m%02d.png", mdir, broken);
            f = fopen(path, "w");
            fputs("not a PNG", f), fclose(f);
        }
        for (int rep = 0; rep < 4; rep++)
            for (int k = 0; k < 3; k++) {
                data_set_threads(threads[k]);
                CHECK(data_load_folder(&ds, mdir, 12, 1) == SG_ERR &&
                          strstr(sg_last_error(), "m20.png") && ds.pixels == NULL,
                      "%d threads: the first damaged image named: %s", threads[k], sg_last_error());
            }
        data_set_threads(0);
        for (int i = 0; i < M; i++) {
            snprintf(path, sizeof path, "%s/m%02d.png", mdir, i);
            unlink(path);
        }
        rmdir(mdir);
    }

    /* subfolders (class folders, FFHQ's numbered ones): every image under the folder, in the
     * byte order of the paths relative to it; names starting with '.' skipped; a symbolic link
     * loop ends at the depth limit, named */
    {
        char tdir[] = "/tmp/sg_folder_XXXXXX", cmd[512];
        CHECK(mkdtemp(tdir) != NULL, "mkdtemp");
        static const struct {
            const char *rel;
            int value; /* 0: must be skipped */
        } files[] = {{"c.png", 4},        {"a/1.png", 1},       {"a/b/2.png", 2},
                     {"a.png", 0x80 | 1}, {".hidden/9.png", 0}, {"a/.x.png", 0},
                     {"a/b/c/d/3.png", 3}};
        snprintf(cmd, sizeof cmd, "mkdir -p '%s/a/b/c/d' '%s/.hidden' '%s/empty' '%s/z'", tdir,
                 tdir, tdir, tdir);
        CHECK(system(cmd) == 0, "%s", cmd);
        uint8_t px[8 * 8];
        for (int i = 0; i < SG_ARRAY_LEN(files); i++) {
            memset(px, files[i].value ? files[i].value : 99, sizeof px);
            snprintf(path, sizeof path, "%s/%s", tdir, files[i].rel);
            write_png(path, px, 8, 8, 1);
        }
        snprintf(path, sizeof path, "%s/z/notes.txt", tdir);
        f = fopen(path, "w");
        fputs("not an image\n", f), fclose(f);
        /* "a.png" < "a/1.png" < "a/b/2.png" < "a/b/c/d/3.png" < "c.png" ('.' < '/') */
        static const int order[] = {0x81, 1, 2, 3, 4};
        CHECK(data_load_folder(&ds, tdir, 8, 1) == SG_OK, "nested: %s", sg_last_error());
        int wrong = ds.n != SG_ARRAY_LEN(order);
        for (int i = 0; !wrong && i < SG_ARRAY_LEN(order); i++)
            for (int k = 0; k < 64; k++) wrong += ds.pixels[i * 64 + k] != order[i];
        CHECK(!wrong, "nested: %lld images, or not in path order", (long long)ds.n);
        /* images directly in the folder (a.png, c.png): no class labels */
        CHECK(ds.labels == NULL && ds.nclasses == 0, "a folder with images at its top has labels");
        data_free(&ds);
        /* class folders: every image in one; its label the folder's rank in path order ("a b"
         * before "a": ' ' < '/'), deeper folders belonging to their top-level one */
        {
            char kdir[] = "/tmp/sg_folder_XXXXXX";
            CHECK(mkdtemp(kdir) != NULL, "mkdtemp");
            static const struct {
                const char *rel;
                int value, label;
            } cls[] = {{"a/x.png", 10, 1},
                       {"a b/y.png", 20, 0},
                       {"a/deep/z.png", 30, 1},
                       {"zeta/w.png", 40, 2},
                       {"a/v.png", 50, 1}};
            snprintf(cmd, sizeof cmd, "mkdir -p '%s/a/deep' '%s/a b' '%s/zeta' '%s/empty'", kdir,
                     kdir, kdir, kdir);
            CHECK(system(cmd) == 0, "%s", cmd);
            for (int i = 0; i < SG_ARRAY_LEN(cls); i++) {
                memset(px, cls[i].value, sizeof px);
                snprintf(path, sizeof path, "%s/%s", kdir, cls[i].rel);
                write_png(path, px, 8, 8, 1);
            }
            CHECK(data_load_folder(&ds, kdir, 8, 1) == SG_OK, "classes: %s", sg_last_error());
            int mislabelled = ds.n != SG_ARRAY_LEN(cls) || !ds.labels || ds.nclasses != 3;
            for (int64_t i = 0; !mislabelled && i < ds.n;
                 i++) /* each image's label, by its value */
                for (int k = 0; k < SG_ARRAY_LEN(cls); k++)
                    if (ds.pixels[i * 64] == cls[k].value)
                        mislabelled += ds.labels[i] != cls[k].label;
            CHECK(!mislabelled, "class folders: %lld images, %d classes, or the wrong labels",
                  (long long)ds.n, ds.nclasses);
            data_free(&ds);
            snprintf(cmd, sizeof cmd, "rm -r '%s'", kdir);
            CHECK(system(cmd) == 0, "%s", cmd);
        }
        /* a link to a folder above: refused at the depth limit, naming the path */
        snprintf(cmd, sizeof cmd, "ln -s .. '%s/a/b/up'", tdir);
        CHECK(system(cmd) == 0, "%s", cmd);
        CHECK(data_load_folder(&ds, tdir, 8, 1) == SG_ERR &&
                  strstr(sg_last_error(), "folders deep") && strstr(sg_last_error(), "a/b/up/") &&
                  ds.pixels == NULL,
              "a link loop: %s", sg_last_error());
        /* a damaged image in a subfolder is named by its path under the folder */
        snprintf(cmd, sizeof cmd, "rm '%s/a/b/up' && echo garbage > '%s/a/b/bad.png'", tdir, tdir);
        CHECK(system(cmd) == 0, "%s", cmd);
        CHECK(data_load_folder(&ds, tdir, 8, 1) == SG_ERR && strstr(sg_last_error(), "a/b/bad.png"),
              "a damaged image in a subfolder: %s", sg_last_error());
        snprintf(cmd, sizeof cmd, "rm -r '%s'", tdir);
        CHECK(system(cmd) == 0, "%s", cmd);
    }

    /* an unreadable image is named; an empty folder and a missing one are errors */
    snprintf(path, sizeof path, "%s/zz.png", gdir);
    f = fopen(path, "w");
    fputs("garbage, not a PNG", f), fclose(f);
    CHECK(data_load_folder(&ds, gdir, 12, 1) == SG_ERR && strstr(sg_last_error(), "zz.png") &&
              ds.pixels == NULL,
          "damaged file named: %s", sg_last_error());
    unlink(path);
    snprintf(path, sizeof path, "%s/g.png", gdir), unlink(path);
    CHECK(data_load_folder(&ds, gdir, 12, 1) == SG_ERR && strstr(sg_last_error(), "no .png"),
          "empty folder: %s", sg_last_error());
    rmdir(gdir);
    CHECK(data_load_folder(&ds, gdir, 12, 1) == SG_ERR, "missing folder");
    snprintf(path, sizeof path, "%s/a.png", dir), unlink(path);
    snprintf(path, sizeof path, "%s/b.JPG", dir), unlink(path);
    snprintf(path, sizeof path, "%s/notes.txt", dir), unlink(path);
    rmdir(dir);
    return sg_test_end();
}
