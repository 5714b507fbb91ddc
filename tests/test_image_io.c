/* test_image_io.c — data/image_io.c: grids and charts are written, read back with libpng, and
 * checked pixel by pixel where the layout is specified (grid tiles, gaps, clamping, upscaling)
 * and by structure where it is not (chart size, white margins, the axis, the curve's colour,
 * text in the title band). Failures (bad path, bad shapes) must return SG_ERR. Single images
 * round-trip through img_write_png / img_read_png, which refuses every other size, kind and a
 * damaged file; data/npz.c's archives are read back by numpy itself (/usr/bin/python3). */
#include <png.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

#include "data/image_io.h"
#include "data/npz.h"
#include "tests/sg_test.h"

static char tmpdir[64];

typedef struct {
    uint8_t *pix;
    int w, h, channels;
} image;

/* Reads an 8-bit gray or RGB PNG; channels = 0 when it could not. */
static image read_png(const char *path) {
    image im = {0};
    png_image p;
    memset(&p, 0, sizeof p);
    p.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_file(&p, path)) return im;
    int gray = !(p.format & PNG_FORMAT_FLAG_COLOR);
    p.format = gray ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
    im.pix = malloc(PNG_IMAGE_SIZE(p));
    if (!png_image_finish_read(&p, NULL, im.pix, 0, NULL)) {
        free(im.pix);
        im.pix = NULL;
        return im;
    }
    im.w = (int)p.width;
    im.h = (int)p.height;
    im.channels = gray ? 1 : 3;
    return im;
}

static const uint8_t *px(const image *im, int x, int y) {
    return im->pix + ((size_t)y * im->w + x) * im->channels;
}

static void test_grid_gray(void) {
    /* 3 images of 2x3, 2 per row, scale 2: tiles 6x4, gaps of 1, so 2*(6+1)+1 = 15 wide and
     * 2*(4+1)+1 = 11 high; the fourth cell is empty (white) */
    enum { N = 3, H = 2, W = 3 };
    const float x[N * H * W] = {-1, 0, 1,  -0.5f, 0.5f, 3, /* image 0: 3 clamps to 255 */
                                -7, 1, -1, 0.25f, NAN,  0, /* image 1: -7 clamps, NaN black */
                                0,  0, 0,  0,     0,    0};
    const uint8_t want[N * H * W] = {0,   128, 255, 64,  191, 255, 0,   255, 0,
                                     159, 0,   128, 128, 128, 128, 128, 128, 128};
    char path[128];
    snprintf(path, sizeof path, "%s/grid.png", tmpdir);
    CHECK(img_write_grid_png(path, x, N, H, W, 1, 2, 2) == SG_OK, "grid: %s", sg_last_error());
    image im = read_png(path);
    CHECK(im.pix && im.channels == 1 && im.w == 15 && im.h == 11, "grid is %dx%d (%d channels)",
          im.w, im.h, im.channels);
    if (!im.pix || im.w != 15 || im.h != 11) return;
    int bad_tile = 0, bad_gap = 0;
    for (int y = 0; y < im.h; y++)
        for (int xx = 0; xx < im.w; xx++) {
            int cx = xx % 7, cy = y % 5, col = xx / 7, row = y / 5, i = row * 2 + col;
            uint8_t v = *px(&im, xx, y);
            if (cx == 0 || cy == 0 || i >= N) {
                bad_gap += v != 255; /* gaps, frame and the empty cell */
                continue;
            }
            bad_tile += v != want[(i * H + (cy - 1) / 2) * W + (cx - 1) / 2];
        }
    CHECK(bad_tile == 0, "%d tile pixels differ", bad_tile);
    CHECK(bad_gap == 0, "%d gap pixels are not white", bad_gap);
    free(im.pix);
}

static void test_grid_rgb(void) {
    /* 5 images of 4x4x3 with cols <= 0: about square (3 per row), scale 1 */
    enum { N = 5, H = 4, W = 4, C = 3 };
    float x[N * H * W * C];
    uint64_t s = 3;
    sg_test_fill(x, N * H * W * C, &s, -1, 1);
    char path[128];
    snprintf(path, sizeof path, "%s/rgb.png", tmpdir);
    CHECK(img_write_grid_png(path, x, N, H, W, C, 0, 1) == SG_OK, "rgb: %s", sg_last_error());
    image im = read_png(path);
    CHECK(im.pix && im.channels == 3 && im.w == 3 * 5 + 1 && im.h == 2 * 5 + 1,
          "rgb grid is %dx%d (%d channels)", im.w, im.h, im.channels);
    if (!im.pix || im.w != 16 || im.h != 11) return;
    int bad = 0;
    for (int i = 0; i < N; i++)
        for (int y = 0; y < H; y++)
            for (int xx = 0; xx < W; xx++)
                for (int c = 0; c < C; c++) {
                    float v = x[((i * H + y) * W + xx) * C + c];
                    int want = (int)((v + 1) * 127.5f + 0.5f);
                    int got = px(&im, (i % 3) * 5 + 1 + xx, (i / 3) * 5 + 1 + y)[c];
                    bad += got != want;
                }
    CHECK(bad == 0, "%d rgb values differ", bad);
    free(im.pix);
    /* the uint8 variant writes the bytes as they are */
    uint8_t u[2 * 2 * 2 * 3];
    for (int i = 0; i < SG_ARRAY_LEN(u); i++) u[i] = (uint8_t)(i * 10);
    snprintf(path, sizeof path, "%s/u8.png", tmpdir);
    CHECK(img_write_grid_u8_png(path, u, 2, 2, 2, 3, 2, 1) == SG_OK, "u8: %s", sg_last_error());
    im = read_png(path);
    CHECK(im.pix && im.w == 7 && im.h == 4, "u8 grid is %dx%d", im.w, im.h);
    if (im.pix && im.w == 7 && im.h == 4)
        CHECK(px(&im, 1, 1)[0] == 0 && px(&im, 2, 2)[2] == 110 && px(&im, 4, 1)[1] == 130,
              "u8 values %d %d %d", px(&im, 1, 1)[0], px(&im, 2, 2)[2], px(&im, 4, 1)[1]);
    free(im.pix);
}

/* The training grids (issue 15: "sample grids labelled with their step"): an RGB grid under a
 * 15-pixel strip whose text is the caption. The grid below the strip is the plain grid's, the
 * strip holds dark text pixels, and two captions that differ only in the step number differ
 * only where that digit is drawn (after the shared "step " prefix). */
static void test_grid_captioned(void) {
    enum { N = 3, H = 4, W = 4, STRIP = 15 };
    float x[N * H * W];
    uint64_t s = 5;
    sg_test_fill(x, N * H * W, &s, -1, 1);
    char p3[128], p4[128], plain[128];
    snprintf(p3, sizeof p3, "%s/cap3.png", tmpdir);
    snprintf(p4, sizeof p4, "%s/cap4.png", tmpdir);
    snprintf(plain, sizeof plain, "%s/plain.png", tmpdir);
    CHECK(img_write_grid_captioned_png(p3, x, N, H, W, 1, 3, 4, "step 3  EMA") == SG_OK &&
              img_write_grid_captioned_png(p4, x, N, H, W, 1, 3, 4, "step 4  EMA") == SG_OK &&
              img_write_grid_png(plain, x, N, H, W, 1, 3, 4) == SG_OK,
          "captioned grids: %s", sg_last_error());
    image a = read_png(p3), b = read_png(p4), g = read_png(plain);
    int ok = a.pix && b.pix && g.pix;
    CHECK(ok && a.channels == 3 && a.w == g.w && a.h == g.h + STRIP && b.w == a.w && b.h == a.h,
          "captioned grid is %dx%d (%d channels), the plain one %dx%d", a.w, a.h, a.channels, g.w,
          g.h);
    if (ok && a.channels == 3 && a.w == g.w && a.h == g.h + STRIP) {
        int grid_bad = 0, dark = 0, differ = 0, first_diff = a.w;
        for (int y = 0; y < g.h; y++)
            for (int xx = 0; xx < g.w; xx++)
                for (int c = 0; c < 3; c++) grid_bad += px(&a, xx, y + STRIP)[c] != *px(&g, xx, y);
        for (int y = 0; y < STRIP; y++)
            for (int xx = 0; xx < a.w; xx++) {
                dark += px(&a, xx, y)[0] < 128;
                if (memcmp(px(&a, xx, y), px(&b, xx, y), 3)) {
                    differ++;
                    if (xx < first_diff) first_diff = xx;
                }
            }
        CHECK(grid_bad == 0, "%d grid values under the caption differ from the plain grid",
              grid_bad);
        CHECK(dark > 20, "the caption strip holds %d text pixels", dark);
        /* "step " is 5 characters of 6 pixels after a 3-pixel margin: the digit starts at 33 */
        CHECK(differ > 0 && first_diff >= 3 + 5 * 6,
              "step 3 and step 4 differ in %d pixels, "
              "the first at x = %d (the digit is drawn from x = 33)",
              differ, first_diff);
    }
    free(a.pix), free(b.pix), free(g.pix);
}

static void test_grid_errors(void) {
    float x[4] = {0};
    CHECK(img_write_grid_png("/nonexistent-dir/g.png", x, 1, 2, 2, 1, 1, 1) == SG_ERR, "bad path");
    CHECK(strstr(sg_last_error(), "/nonexistent-dir/g.png") != NULL, "msg: %s", sg_last_error());
    CHECK(img_write_grid_png("/tmp/x.png", x, 1, 2, 2, 2, 1, 1) == SG_ERR, "c=2 rejected");
    CHECK(img_write_grid_png("/tmp/x.png", x, 0, 2, 2, 1, 1, 1) == SG_ERR, "n=0 rejected");
    CHECK(access("/tmp/x.png", F_OK) != 0, "a rejected grid left a file");
}

/* Counts pixels of one exact colour. */
static int count_color(const image *im, int r, int g, int b, int x0, int y0, int x1, int y1) {
    int k = 0;
    for (int y = y0; y < y1; y++)
        for (int x = x0; x < x1; x++) {
            const uint8_t *p = px(im, x, y);
            k += p[0] == r && p[1] == g && p[2] == b;
        }
    return k;
}

static void test_plot(void) {
    enum { N = 1000 };
    double xs[N], ys[N];
    for (int i = 0; i < N; i++) {
        xs[i] = i * 10;
        ys[i] = 0.05 + exp(-i / 150.0) + 0.01 * sin(i * 0.7);
    }
    ys[500] = NAN; /* a skipped point */
    char path[128];
    for (int log_y = 0; log_y <= 1; log_y++) {
        snprintf(path, sizeof path, "%s/plot%d.png", tmpdir, log_y);
        CHECK(img_plot_curve_png(path, xs, ys, N, "loss", "step", "mse", log_y) == SG_OK,
              "plot: %s", sg_last_error());
        image im = read_png(path);
        CHECK(im.pix && im.channels == 3 && im.w == IMG_PLOT_W && im.h == IMG_PLOT_H,
              "plot is %dx%d", im.w, im.h);
        if (!im.pix || im.w != IMG_PLOT_W || im.h != IMG_PLOT_H) continue;
        CHECK(count_color(&im, 255, 255, 255, 0, 0, 4, 4) == 16 &&
                  count_color(&im, 255, 255, 255, IMG_PLOT_W - 4, IMG_PLOT_H - 4, IMG_PLOT_W,
                              IMG_PLOT_H) == 16,
              "corners are not white");
        /* the y axis: some column of the left third is black over most of the height */
        int axis = 0;
        for (int x = 0; x < IMG_PLOT_W / 3; x++) {
            int k = count_color(&im, 0, 0, 0, x, 0, x + 1, IMG_PLOT_H);
            axis = k > axis ? k : axis;
        }
        CHECK(axis > IMG_PLOT_H * 3 / 4, "no y axis (longest black column %d)", axis);
        /* both curves are drawn, and text sits in the title band */
        int raw = count_color(&im, 160, 190, 235, 0, 0, IMG_PLOT_W, IMG_PLOT_H);
        int avg = count_color(&im, 20, 60, 170, 0, 0, IMG_PLOT_W, IMG_PLOT_H);
        int title = count_color(&im, 0, 0, 0, 0, 0, IMG_PLOT_W, 30);
        CHECK(raw > 300 && avg > 600 && title > 50, "raw %d avg %d title %d pixels", raw, avg,
              title);
        free(im.pix);
    }
    /* degenerate inputs still give a chart */
    double one = 3.0, neg[3] = {-1, 0, -2}, xs3[3] = {0, 1, 2};
    snprintf(path, sizeof path, "%s/empty.png", tmpdir);
    CHECK(img_plot_curve_png(path, NULL, NULL, 0, "empty", "x", "y", 0) == SG_OK, "n=0: %s",
          sg_last_error());
    CHECK(img_plot_curve_png(path, &one, &one, 1, "one point", "x", "y", 1) == SG_OK, "n=1");
    CHECK(img_plot_curve_png(path, xs3, neg, 3, "log of negatives", NULL, NULL, 1) == SG_OK,
          "log of non-positive values");
    CHECK(img_plot_curve_png("/nonexistent-dir/p.png", xs3, xs3, 3, "t", "x", "y", 0) == SG_ERR,
          "bad path accepted");
    CHECK(img_plot_curve_png(path, xs3, xs3, -1, "t", "x", "y", 0) == SG_ERR, "n<0 accepted");
}

/* ---- single images */
static void test_single_png(void) {
    /* the grids' conversion, exposed */
    const float f[] = {-1, 0, 1, 0.25f, -7, 3, NAN, -0.5f, 0.5f};
    const uint8_t want[] = {0, 128, 255, 159, 0, 255, 0, 64, 191};
    uint8_t got[9];
    img_f32_to_u8(f, 9, got);
    CHECK(!memcmp(got, want, 9), "img_f32_to_u8 differs from the grids' values");

    enum { H = 5, W = 7 };
    char path[128], bad[160];
    for (int c = 1; c <= 3; c += 2) {
        uint8_t x[H * W * 3], y[H * W * 3];
        for (int i = 0; i < H * W * c; i++) x[i] = (uint8_t)(i * 37 + c);
        snprintf(path, sizeof path, "%s/one%d.png", tmpdir, c);
        CHECK(img_write_png(path, x, H, W, c) == SG_OK, "write: %s", sg_last_error());
        image im = read_png(path);
        CHECK(im.pix && im.w == W && im.h == H && im.channels == c &&
                  !memcmp(im.pix, x, (size_t)(H * W * c)),
              "c=%d: the PNG is not the image (no frame, no scaling)", c);
        free(im.pix);
        memset(y, 0, sizeof y);
        CHECK(img_read_png(path, H, W, c, y) == SG_OK && !memcmp(x, y, (size_t)(H * W * c)),
              "c=%d: read back: %s", c, sg_last_error());
        /* anything but the asked size and kind is refused, naming the file */
        CHECK(img_read_png(path, H, W + 1, c, y) == SG_ERR && strstr(sg_last_error(), path),
              "c=%d: another width accepted", c);
        CHECK(img_read_png(path, H + 1, W, c, y) == SG_ERR, "c=%d: another height accepted", c);
        CHECK(img_read_png(path, H, W, 4 - c, y) == SG_ERR, "c=%d: other channels accepted", c);
        /* a truncated file: every cut refused */
        FILE *in = fopen(path, "rb");
        uint8_t bytes[4096];
        size_t n = in ? fread(bytes, 1, sizeof bytes, in) : 0;
        if (in) fclose(in);
        snprintf(bad, sizeof bad, "%s/cut.png", tmpdir);
        int accepted = 0;
        for (size_t cut = 0; cut < n; cut += 7) {
            FILE *o = fopen(bad, "wb");
            fwrite(bytes, 1, cut, o);
            fclose(o);
            accepted += img_read_png(bad, H, W, c, y) == SG_OK;
        }
        CHECK(n > 40 && accepted == 0, "c=%d: %d truncated files accepted", c, accepted);
        remove(bad);
    }
    /* alpha and 16 bits are not what sample writes: refused */
    uint8_t rgba[H * W * 4] = {0};
    png_image pi;
    memset(&pi, 0, sizeof pi);
    pi.version = PNG_IMAGE_VERSION, pi.width = W, pi.height = H, pi.format = PNG_FORMAT_RGBA;
    snprintf(bad, sizeof bad, "%s/rgba.png", tmpdir);
    CHECK(png_image_write_to_file(&pi, bad, 0, rgba, 0, NULL), "RGBA written");
    uint8_t y[H * W * 3];
    CHECK(img_read_png(bad, H, W, 3, y) == SG_ERR && strstr(sg_last_error(), "RGBA"),
          "an RGBA PNG accepted: %s", sg_last_error());
    remove(bad);
    uint16_t deep[H * W * 3] = {0};
    pi.format = PNG_FORMAT_LINEAR_RGB;
    snprintf(bad, sizeof bad, "%s/deep.png", tmpdir);
    CHECK(png_image_write_to_file(&pi, bad, 0, deep, 0, NULL), "16-bit written");
    CHECK(img_read_png(bad, H, W, 3, y) == SG_ERR && strstr(sg_last_error(), "16-bit"),
          "a 16-bit PNG accepted: %s", sg_last_error());
    remove(bad);
    snprintf(bad, sizeof bad, "%s/missing.png", tmpdir);
    CHECK(img_read_png(bad, H, W, 3, y) == SG_ERR && strstr(sg_last_error(), bad),
          "a missing file: %s", sg_last_error());
    CHECK(img_write_png(bad, y, 0, W, 3) == SG_ERR && img_write_png(bad, y, H, W, 2) == SG_ERR,
          "bad shapes written");
    CHECK(access(bad, F_OK) != 0, "a refused image left a file");
}

/* ---- npz: arrays framed by data/npz.c and loaded by numpy */
static uint8_t npz_value(int64_t i) {
    return (uint8_t)(i * 7 + 3);
}

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p) {
    return le32(p) | (uint64_t)le32(p + 4) << 32;
}

static void test_npz(void) {
    static const struct {
        int ndim;
        int64_t shape[4];
    } cases[] = {{1, {5}},          {2, {2, 3}},       {2, {0, 4}},
                 {4, {3, 4, 5, 2}}, {4, {1, 1, 1, 1}}, {3, {7, 11, 13}}};
    char path[160], py[4096];
    int k = snprintf(py, sizeof py,
                     "import numpy as np, zipfile\n"
                     "for p, shape, z64 in [");
    for (int i = 0; i < SG_ARRAY_LEN(cases); i++)
        for (int zip64 = 0; zip64 < 2; zip64++) {
            int64_t n = 1;
            for (int d = 0; d < cases[i].ndim; d++) n *= cases[i].shape[d];
            uint8_t *x = malloc((size_t)n + 1);
            for (int64_t j = 0; j < n; j++) x[j] = npz_value(j);
            npz_frame f;
            CHECK(npz_u8_frame("arr_0", x, cases[i].shape, cases[i].ndim, zip64, &f) == SG_OK,
                  "frame: %s", sg_last_error());
            /* the data starts 64-byte aligned within the .npy member, as numpy writes it */
            const size_t local = 30 + strlen("arr_0.npy") + (zip64 ? 20 : 0);
            CHECK((f.head_n - local) % 64 == 0, "npy header of %zu bytes", f.head_n - local);
            /* the local header's CRC-32 and sizes are the central directory's (zipfile, and so
             * numpy, reads only the latter) and the member's */
            uLong crc = crc32(0L, f.head + local, (uInt)(f.head_n - local));
            crc = crc32(crc, x, (uInt)n);
            CHECK(le32(f.head + 14) == crc && le32(f.tail + 16) == crc,
                  "CRC-32 %08x / %08x, not %08lx", le32(f.head + 14), le32(f.tail + 16), crc);
            CHECK(le32(f.head + 18) == le32(f.tail + 20) &&
                      le32(f.head + 22) == le32(f.tail + 24) &&
                      le32(f.head + 18) == (zip64 ? 0xFFFFFFFFu : (uint32_t)(f.head_n - local + n)),
                  "sizes: local %u %u, central %u %u", le32(f.head + 18), le32(f.head + 22),
                  le32(f.tail + 20), le32(f.tail + 24));
            /* the offsets: the central directory right after the member, the zip64 end
             * record where the locator says (zipfile does not read the locator's offset) */
            const uint64_t cd = f.head_n + (uint64_t)n,
                           cd_n = 46 + strlen("arr_0.npy") + (zip64 ? 20 : 0);
            const uint8_t *end = f.tail + f.tail_n - 22;
            CHECK(le32(f.tail) == 0x02014b50 && le32(end) == 0x06054b50, "records");
            CHECK(le32(end + 12) == cd_n && le32(end + 16) == (zip64 ? 0xFFFFFFFFu : cd),
                  "end record: central directory %u bytes at %u", le32(end + 12), le32(end + 16));
            if (zip64) {
                const uint8_t *e64 = f.tail + cd_n, *loc = end - 20;
                CHECK(le32(e64) == 0x06064b50 && le32(loc) == 0x07064b50 &&
                          le64(loc + 8) == cd + cd_n && le64(e64 + 40) == cd_n &&
                          le64(e64 + 48) == cd && loc == e64 + 56,
                      "zip64 records: end record at %llu (%llu), directory %llu at %llu",
                      (unsigned long long)le64(loc + 8), (unsigned long long)(cd + cd_n),
                      (unsigned long long)le64(e64 + 40), (unsigned long long)le64(e64 + 48));
            }
            snprintf(path, sizeof path, "%s/a%d_%d.npz", tmpdir, i, zip64);
            FILE *o = fopen(path, "wb");
            CHECK(o && fwrite(f.head, 1, f.head_n, o) == f.head_n &&
                      fwrite(x, 1, (size_t)n, o) == (size_t)n &&
                      fwrite(f.tail, 1, f.tail_n, o) == f.tail_n && !fclose(o),
                  "write %s", path);
            free(x);
            k += snprintf(py + k, sizeof py - (size_t)k, "('%s', (", path);
            for (int d = 0; d < cases[i].ndim; d++)
                k += snprintf(py + k, sizeof py - (size_t)k, "%lld,", (long long)cases[i].shape[d]);
            k += snprintf(py + k, sizeof py - (size_t)k, "), %d), ", zip64);
        }
    snprintf(py + k, sizeof py - (size_t)k,
             "]:\n"
             "    z = zipfile.ZipFile(p)\n"
             "    assert z.testzip() is None and z.namelist() == ['arr_0.npy'], p\n"
             "    assert (z.infolist()[0].extract_version >= 45) == bool(z64), p\n"
             "    a = np.load(p)['arr_0']\n"
             "    want = ((np.arange(a.size, dtype=np.int64) * 7 + 3) %% 256).astype(np.uint8)\n"
             "    assert a.dtype == np.uint8 and a.shape == shape, (p, a.dtype, a.shape)\n"
             "    assert a.flags.c_contiguous and (a.ravel() == want).all(), p\n"
             "print('numpy read %d archives')\n",
             2 * SG_ARRAY_LEN(cases));
    snprintf(path, sizeof path, "%s/check.py", tmpdir);
    FILE *o = fopen(path, "w");
    CHECK(o && fputs(py, o) >= 0 && !fclose(o), "write %s", path);
    if (system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") != 0) {
        printf("npz: /usr/bin/python3 has no numpy: numpy's check skipped\n");
    } else {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s'", path);
        CHECK(system(cmd) == 0, "numpy refused or misread an archive (%s)", path);
    }
    /* the same array gives the same bytes (a fixed timestamp) */
    const int64_t shape[2] = {2, 3};
    const uint8_t x[6] = {1, 2, 3, 4, 5, 6};
    npz_frame a, b;
    CHECK(npz_u8_frame("arr_0", x, shape, 2, 0, &a) == SG_OK &&
              npz_u8_frame("arr_0", x, shape, 2, 0, &b) == SG_OK && a.head_n == b.head_n &&
              a.tail_n == b.tail_n && !memcmp(a.head, b.head, a.head_n) &&
              !memcmp(a.tail, b.tail, a.tail_n),
          "the same array framed twice differs");
    /* bad arguments */
    const int64_t neg[2] = {2, -1};
    CHECK(npz_u8_frame("a.b", x, shape, 2, 0, &a) == SG_ERR, "bad name accepted");
    CHECK(npz_u8_frame("", x, shape, 2, 0, &a) == SG_ERR, "empty name accepted");
    CHECK(npz_u8_frame("arr_0", x, shape, 0, 0, &a) == SG_ERR, "0 dimensions accepted");
    CHECK(npz_u8_frame("arr_0", x, neg, 2, 0, &a) == SG_ERR, "a negative dimension accepted");
    CHECK(npz_u8_frame("arr_0", NULL, shape, 2, 0, &a) == SG_ERR, "no data accepted");
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sg_test_img_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_grid_gray();
    test_grid_rgb();
    test_grid_captioned();
    test_grid_errors();
    test_plot();
    test_single_png();
    test_npz();
    const char *names[] = {"grid.png",  "rgb.png",   "u8.png",    "cap3.png",  "cap4.png",
                           "plain.png", "plot0.png", "plot1.png", "empty.png", "one1.png",
                           "one3.png",  "check.py",  "a0_0.npz",  "a0_1.npz",  "a1_0.npz",
                           "a1_1.npz",  "a2_0.npz",  "a2_1.npz",  "a3_0.npz",  "a3_1.npz",
                           "a4_0.npz",  "a4_1.npz",  "a5_0.npz",  "a5_1.npz"};
    char path[128];
    int keep = getenv("SG_KEEP_TEST_IMAGES") != NULL; /* to look at them */
    for (int i = 0; i < SG_ARRAY_LEN(names) && !keep; i++) {
        snprintf(path, sizeof path, "%s/%s", tmpdir, names[i]);
        remove(path);
    }
    if (keep)
        printf("images kept in %s\n", tmpdir);
    else
        rmdir(tmpdir);
    return sg_test_end();
}
