/* test_image_io.c — data/image_io.c: grids and charts are written, read back with libpng, and
 * checked pixel by pixel where the layout is specified (grid tiles, gaps, clamping, upscaling)
 * and by structure where it is not (chart size, white margins, the axis, the curve's colour,
 * text in the title band). Failures (bad path, bad shapes) must return SG_ERR. */
#include <png.h>
#include <stdlib.h>
#include <unistd.h>

#include "data/image_io.h"
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
    const char *names[] = {"grid.png",  "rgb.png",   "u8.png",    "cap3.png", "cap4.png",
                           "plain.png", "plot0.png", "plot1.png", "empty.png"};
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
