/* image_io.c — PNG grids of images and PNG line charts (see image_io.h), with libpng.
 *
 * The chart draws its own text with a small bitmap font defined here (5x7 cells plus two
 * descender rows), so it needs no font library and looks the same everywhere.
 */
#include "data/image_io.h"

#include <errno.h>
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- PNG writing -------------------------------------------------------------------------- */

/* Writes rows of `channels` (1 gray, 3 RGB) 8-bit samples; removes the file on failure. */
static int png_write(const char *path, const uint8_t *pix, int width, int height, int channels) {
    FILE *f = fopen(path, "wb");
    if (!f) return sg_set_error("image: %s: cannot create: %s", path, strerror(errno));
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!png || !info) {
        png_destroy_write_struct(&png, &info);
        fclose(f);
        remove(path);
        return sg_set_error("image: %s: libpng could not start (out of memory)", path);
    }
    /* libpng reports errors by longjmp; nothing modified after setjmp is read after it */
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        fclose(f);
        remove(path);
        return sg_set_error("image: %s: libpng failed while writing (disk full?)", path);
    }
    png_init_io(png, f);
    png_set_IHDR(png, info, (png_uint_32)width, (png_uint_32)height, 8,
                 channels == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < height; y++)
        png_write_row(png, (png_const_bytep)(pix + (size_t)y * width * channels));
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    if (fclose(f) != 0) {
        remove(path);
        return sg_set_error("image: %s: write failed: %s", path, strerror(errno));
    }
    return SG_OK;
}

/* ---- image grids -------------------------------------------------------------------------- */

static uint8_t to_u8(float v) {
    float q = (v + 1.0f) * 127.5f; /* [-1, 1] -> [0, 255] */
    if (!(q > 0.0f)) return 0;     /* also NaN */
    if (q >= 255.0f) return 255;
    return (uint8_t)(q + 0.5f);
}

enum { CAPTION_H = 15 }; /* the caption strip: one line of the 5x7 font, 3 px margins */
static void draw_caption(uint8_t *rgb, int width, const char *caption);

/* One grid writer for both pixel types: exactly one of xf, xu is non-NULL. With a caption
 * the grid is RGB under a white strip holding it. */
static int write_grid(const char *path, const float *xf, const uint8_t *xu, int n, int h, int w,
                      int c, int cols, int scale, const char *caption) {
    if (n < 1 || h < 1 || w < 1 || (c != 1 && c != 3))
        return sg_set_error("image: %s: bad grid of %d images of %dx%dx%d (need n >= 1, "
                            "c = 1 or 3)",
                            path, n, h, w, c);
    if (scale <= 0) scale = 1;
    if (cols <= 0) cols = (int)ceil(sqrt((double)n));
    if (cols > n) cols = n;
    int rows = (n + cols - 1) / cols;
    int64_t tw = (int64_t)w * scale, th = (int64_t)h * scale;
    int64_t top = caption ? CAPTION_H : 0, oc = caption ? 3 : c;
    int64_t width = cols * (tw + 1) + 1, height = top + rows * (th + 1) + 1;
    if (width > 65535 || height > 65535)
        return sg_set_error("image: %s: grid of %lldx%lld pixels is too large", path,
                            (long long)width, (long long)height);
    uint8_t *pix = malloc((size_t)(width * height * oc));
    if (!pix) return sg_set_error("image: %s: out of memory", path);
    memset(pix, 255, (size_t)(width * height * oc)); /* white gaps and unused cells */
    for (int i = 0; i < n; i++) {
        int64_t ox = (i % cols) * (tw + 1) + 1, oy = top + (i / cols) * (th + 1) + 1;
        for (int64_t y = 0; y < th; y++)
            for (int64_t x = 0; x < tw; x++) {
                int64_t src = (((int64_t)i * h + y / scale) * w + x / scale) * c;
                uint8_t *dst = pix + ((oy + y) * width + ox + x) * oc;
                for (int ch = 0; ch < oc; ch++) {
                    int64_t k = src + (c == 1 ? 0 : ch); /* grey is repeated into RGB */
                    dst[ch] = xf ? to_u8(xf[k]) : xu[k];
                }
            }
    }
    if (caption) draw_caption(pix, (int)width, caption);
    int rc = png_write(path, pix, (int)width, (int)height, (int)oc);
    free(pix);
    return rc;
}

void img_f32_to_u8(const float *x, int64_t n, uint8_t *out) {
    for (int64_t i = 0; i < n; i++) out[i] = to_u8(x[i]);
}

/* ---- single images ------------------------------------------------------------------------ */

static int check_image(const char *path, int h, int w, int c) {
    if (h < 1 || w < 1 || h > 65535 || w > 65535 || (c != 1 && c != 3))
        return sg_set_error("image: %s: bad image of %dx%dx%d (need 1..65535 pixels a side, c = "
                            "1 or 3)",
                            path, h, w, c);
    return SG_OK;
}

int img_write_png(const char *path, const uint8_t *x, int h, int w, int c) {
    if (check_image(path, h, w, c)) return SG_ERR;
    return png_write(path, x, w, h, c);
}

/* The file ends with the IEND chunk (length 0, its fixed CRC): libpng reads the pixels without
 * it, so a file cut in its last bytes would pass for whole. */
static int ends_whole(const char *path) {
    static const uint8_t iend[12] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xAE, 0x42, 0x60, 0x82};
    uint8_t tail[12];
    FILE *f = fopen(path, "rb");
    int ok =
        f && !fseek(f, -12, SEEK_END) && fread(tail, 1, 12, f) == 12 && !memcmp(tail, iend, 12);
    if (f) fclose(f);
    return ok;
}

int img_read_png(const char *path, int h, int w, int c, uint8_t *out) {
    if (check_image(path, h, w, c)) return SG_ERR;
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_file(&im, path))
        return sg_set_error("image: %s: not a readable PNG (%s)", path, im.message);
    const int color = (im.format & PNG_FORMAT_FLAG_COLOR) != 0;
    if ((int)im.width != w || (int)im.height != h || color != (c == 3) ||
        (im.format & (PNG_FORMAT_FLAG_ALPHA | PNG_FORMAT_FLAG_LINEAR))) {
        sg_set_error("image: %s: a %ux%u %s%s PNG, not the %dx%d 8-bit %s one expected", path,
                     im.width, im.height, im.format & PNG_FORMAT_FLAG_LINEAR ? "16-bit " : "",
                     im.format & PNG_FORMAT_FLAG_ALPHA ? "RGBA or grey + alpha"
                     : color                           ? "RGB"
                                                       : "grey",
                     w, h, c == 3 ? "RGB" : "grey");
        png_image_free(&im);
        return SG_ERR;
    }
    im.format = c == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
    if (!png_image_finish_read(&im, NULL, out, 0, NULL))
        return sg_set_error("image: %s: damaged PNG (%s)", path, im.message);
    if (!ends_whole(path))
        return sg_set_error("image: %s: truncated PNG (no IEND at its end)", path);
    return SG_OK;
}

int img_write_grid_png(const char *path, const float *x, int n, int h, int w, int c, int cols,
                       int scale) {
    return write_grid(path, x, NULL, n, h, w, c, cols, scale, NULL);
}

int img_write_grid_captioned_png(const char *path, const float *x, int n, int h, int w, int c,
                                 int cols, int scale, const char *caption) {
    return write_grid(path, x, NULL, n, h, w, c, cols, scale, caption ? caption : "");
}

int img_write_grid_u8_png(const char *path, const uint8_t *x, int n, int h, int w, int c, int cols,
                          int scale) {
    return write_grid(path, NULL, x, n, h, w, c, cols, scale, NULL);
}

/* ---- bitmap font ---------------------------------------------------------------------------- */

/* Each glyph: 9 rows of 5 columns, '#' set. Rows 0..6 hold capitals and digits (baseline under
 * row 6); rows 7..8 are the descenders of g, j, p, q, y and ','. Missing rows are blank. */
enum { FONT_W = 5, FONT_H = 9, FONT_ADVANCE = 6 };
typedef struct {
    char ch;
    const char *rows[FONT_H];
} glyph;

static const glyph font[] = {
    {' ', {0}},
    {'0', {".###.", "#...#", "#..##", "#.#.#", "##..#", "#...#", ".###."}},
    {'1', {"..#..", ".##..", "..#..", "..#..", "..#..", "..#..", ".###."}},
    {'2', {".###.", "#...#", "....#", "...#.", "..#..", ".#...", "#####"}},
    {'3', {"#####", "...#.", "..#..", "...#.", "....#", "#...#", ".###."}},
    {'4', {"...#.", "..##.", ".#.#.", "#..#.", "#####", "...#.", "...#."}},
    {'5', {"#####", "#....", "####.", "....#", "....#", "#...#", ".###."}},
    {'6', {"..##.", ".#...", "#....", "####.", "#...#", "#...#", ".###."}},
    {'7', {"#####", "....#", "...#.", "..#..", ".#...", ".#...", ".#..."}},
    {'8', {".###.", "#...#", "#...#", ".###.", "#...#", "#...#", ".###."}},
    {'9', {".###.", "#...#", "#...#", ".####", "....#", "...#.", ".##.."}},
    {'A', {".###.", "#...#", "#...#", "#####", "#...#", "#...#", "#...#"}},
    {'B', {"####.", "#...#", "#...#", "####.", "#...#", "#...#", "####."}},
    {'C', {".###.", "#...#", "#....", "#....", "#....", "#...#", ".###."}},
    {'D', {"###..", "#..#.", "#...#", "#...#", "#...#", "#..#.", "###.."}},
    {'E', {"#####", "#....", "#....", "####.", "#....", "#....", "#####"}},
    {'F', {"#####", "#....", "#....", "####.", "#....", "#....", "#...."}},
    {'G', {".###.", "#...#", "#....", "#.###", "#...#", "#...#", ".####"}},
    {'H', {"#...#", "#...#", "#...#", "#####", "#...#", "#...#", "#...#"}},
    {'I', {".###.", "..#..", "..#..", "..#..", "..#..", "..#..", ".###."}},
    {'J', {"..###", "...#.", "...#.", "...#.", "...#.", "#..#.", ".##.."}},
    {'K', {"#...#", "#..#.", "#.#..", "##...", "#.#..", "#..#.", "#...#"}},
    {'L', {"#....", "#....", "#....", "#....", "#....", "#....", "#####"}},
    {'M', {"#...#", "##.##", "#.#.#", "#.#.#", "#...#", "#...#", "#...#"}},
    {'N', {"#...#", "#...#", "##..#", "#.#.#", "#..##", "#...#", "#...#"}},
    {'O', {".###.", "#...#", "#...#", "#...#", "#...#", "#...#", ".###."}},
    {'P', {"####.", "#...#", "#...#", "####.", "#....", "#....", "#...."}},
    {'Q', {".###.", "#...#", "#...#", "#...#", "#.#.#", "#..#.", ".##.#"}},
    {'R', {"####.", "#...#", "#...#", "####.", "#.#..", "#..#.", "#...#"}},
    {'S', {".####", "#....", "#....", ".###.", "....#", "....#", "####."}},
    {'T', {"#####", "..#..", "..#..", "..#..", "..#..", "..#..", "..#.."}},
    {'U', {"#...#", "#...#", "#...#", "#...#", "#...#", "#...#", ".###."}},
    {'V', {"#...#", "#...#", "#...#", "#...#", "#...#", ".#.#.", "..#.."}},
    {'W', {"#...#", "#...#", "#...#", "#.#.#", "#.#.#", "#.#.#", ".#.#."}},
    {'X', {"#...#", "#...#", ".#.#.", "..#..", ".#.#.", "#...#", "#...#"}},
    {'Y', {"#...#", "#...#", ".#.#.", "..#..", "..#..", "..#..", "..#.."}},
    {'Z', {"#####", "....#", "...#.", "..#..", ".#...", "#....", "#####"}},
    {'a', {".....", ".....", ".###.", "....#", ".####", "#...#", ".####"}},
    {'b', {"#....", "#....", "####.", "#...#", "#...#", "#...#", "####."}},
    {'c', {".....", ".....", ".###.", "#....", "#....", "#...#", ".###."}},
    {'d', {"....#", "....#", ".####", "#...#", "#...#", "#...#", ".####"}},
    {'e', {".....", ".....", ".###.", "#...#", "#####", "#....", ".###."}},
    {'f', {"..##.", ".#..#", ".#...", "###..", ".#...", ".#...", ".#..."}},
    {'g', {".....", ".....", ".####", "#...#", "#...#", "#...#", ".####", "....#", ".###."}},
    {'h', {"#....", "#....", "#.##.", "##..#", "#...#", "#...#", "#...#"}},
    {'i', {"..#..", ".....", ".##..", "..#..", "..#..", "..#..", ".###."}},
    {'j', {"...#.", ".....", "..##.", "...#.", "...#.", "...#.", "...#.", "#..#.", ".##.."}},
    {'k', {"#....", "#....", "#..#.", "#.#..", "##...", "#.#..", "#..#."}},
    {'l', {".##..", "..#..", "..#..", "..#..", "..#..", "..#..", ".###."}},
    {'m', {".....", ".....", "##.#.", "#.#.#", "#.#.#", "#.#.#", "#.#.#"}},
    {'n', {".....", ".....", "#.##.", "##..#", "#...#", "#...#", "#...#"}},
    {'o', {".....", ".....", ".###.", "#...#", "#...#", "#...#", ".###."}},
    {'p', {".....", ".....", "####.", "#...#", "#...#", "#...#", "####.", "#....", "#...."}},
    {'q', {".....", ".....", ".####", "#...#", "#...#", "#...#", ".####", "....#", "....#"}},
    {'r', {".....", ".....", "#.##.", "##..#", "#....", "#....", "#...."}},
    {'s', {".....", ".....", ".####", "#....", ".###.", "....#", "####."}},
    {'t', {".#...", ".#...", "###..", ".#...", ".#...", ".#..#", "..##."}},
    {'u', {".....", ".....", "#...#", "#...#", "#...#", "#..##", ".##.#"}},
    {'v', {".....", ".....", "#...#", "#...#", "#...#", ".#.#.", "..#.."}},
    {'w', {".....", ".....", "#...#", "#...#", "#.#.#", "#.#.#", ".#.#."}},
    {'x', {".....", ".....", "#...#", ".#.#.", "..#..", ".#.#.", "#...#"}},
    {'y', {".....", ".....", "#...#", "#...#", "#...#", "#...#", ".####", "....#", ".###."}},
    {'z', {".....", ".....", "#####", "...#.", "..#..", ".#...", "#####"}},
    {'.', {".....", ".....", ".....", ".....", ".....", ".##..", ".##.."}},
    {',', {".....", ".....", ".....", ".....", ".....", ".##..", "..#..", ".#..."}},
    {'-', {".....", ".....", ".....", ".###.", ".....", ".....", "....."}},
    {'+', {".....", "..#..", "..#..", "#####", "..#..", "..#..", "....."}},
    {'=', {".....", ".....", "#####", ".....", "#####", ".....", "....."}},
    {':', {".....", ".##..", ".##..", ".....", ".##..", ".##..", "....."}},
    {';', {".....", ".##..", ".##..", ".....", ".##..", "..#..", ".#..."}},
    {'/', {"....#", "....#", "...#.", "..#..", ".#...", "#....", "#...."}},
    {'\\', {"#....", "#....", ".#...", "..#..", "...#.", "....#", "....#"}},
    {'(', {"...#.", "..#..", ".#...", ".#...", ".#...", "..#..", "...#."}},
    {')', {".#...", "..#..", "...#.", "...#.", "...#.", "..#..", ".#..."}},
    {'[', {".###.", ".#...", ".#...", ".#...", ".#...", ".#...", ".###."}},
    {']', {".###.", "...#.", "...#.", "...#.", "...#.", "...#.", ".###."}},
    {'_', {".....", ".....", ".....", ".....", ".....", ".....", ".....", "#####"}},
    {'%', {"##..#", "##..#", "...#.", "..#..", ".#...", "#..##", "#..##"}},
    {'*', {".....", "..#..", "#.#.#", ".###.", "#.#.#", "..#..", "....."}},
    {'\'', {"..#..", "..#..", ".#...", ".....", ".....", ".....", "....."}},
    {'"', {".#.#.", ".#.#.", ".....", ".....", ".....", ".....", "....."}},
    {'!', {"..#..", "..#..", "..#..", "..#..", "..#..", ".....", "..#.."}},
    {'?', {".###.", "#...#", "....#", "...#.", "..#..", ".....", "..#.."}},
    {'|', {"..#..", "..#..", "..#..", "..#..", "..#..", "..#..", "..#.."}},
    {'<', {"...#.", "..#..", ".#...", "#....", ".#...", "..#..", "...#."}},
    {'>', {".#...", "..#..", "...#.", "....#", "...#.", "..#..", ".#..."}},
    {'#', {".#.#.", ".#.#.", "#####", ".#.#.", "#####", ".#.#.", ".#.#."}},
    {'^', {"..#..", ".#.#.", "#...#", ".....", ".....", ".....", "....."}},
    {'~', {".....", ".....", ".#...", "#.#.#", "...#.", ".....", "....."}},
    {'@', {".###.", "#...#", "#.###", "#.#.#", "#.###", "#....", ".###."}},
    {'&', {".##..", "#..#.", "#.#..", ".#...", "#.#.#", "#..#.", ".##.#"}},
    {'$', {"..#..", ".####", "#.#..", ".###.", "..#.#", "####.", "..#.."}},
    {'{', {"...##", "..#..", "..#..", ".#...", "..#..", "..#..", "...##"}},
    {'}', {"##...", "..#..", "..#..", "...#.", "..#..", "..#..", "##..."}},
    {'`', {".#...", "..#..", ".....", ".....", ".....", ".....", "....."}},
};
static const glyph unknown_glyph = {
    '?', {"#####", "#...#", "#...#", "#...#", "#...#", "#...#", "#####"}};

static const glyph *font_find(char ch) {
    for (int i = 0; i < SG_ARRAY_LEN(font); i++)
        if (font[i].ch == ch) return &font[i];
    return &unknown_glyph;
}

/* ---- a tiny RGB canvas ---------------------------------------------------------------------- */

typedef struct {
    uint8_t *rgb;
    int w, h;
} canvas;
typedef struct {
    uint8_t r, g, b;
} color;

static const color BLACK = {0, 0, 0}, GRID = {228, 228, 228}, RAW = {160, 190, 235},
                   AVG = {20, 60, 170}, TEXT = {30, 30, 30};

static void put(canvas *cv, int x, int y, color c) {
    if (x < 0 || y < 0 || x >= cv->w || y >= cv->h) return;
    uint8_t *p = cv->rgb + ((size_t)y * cv->w + x) * 3;
    p[0] = c.r;
    p[1] = c.g;
    p[2] = c.b;
}

static void fill_rect(canvas *cv, int x0, int y0, int x1, int y1, color c) {
    for (int y = y0; y <= y1; y++)
        for (int x = x0; x <= x1; x++) put(cv, x, y, c);
}

/* Text with its top-left corner at (x, y), each font pixel a scale x scale block. */
static void draw_text(canvas *cv, int x, int y, const char *s, int scale, color c) {
    for (; *s; s++, x += FONT_ADVANCE * scale) {
        const glyph *g = font_find(*s);
        for (int r = 0; r < FONT_H; r++) {
            if (!g->rows[r]) continue;
            for (int col = 0; col < FONT_W; col++)
                if (g->rows[r][col] == '#')
                    fill_rect(cv, x + col * scale, y + r * scale, x + col * scale + scale - 1,
                              y + r * scale + scale - 1, c);
        }
    }
}

static int text_width(const char *s, int scale) {
    int n = (int)strlen(s);
    return n ? (n * FONT_ADVANCE - 1) * scale : 0;
}

/* The caption in the strip above a grid, cut to the characters that fit its width. */
static void draw_caption(uint8_t *rgb, int width, const char *caption) {
    canvas cv = {rgb, width, CAPTION_H};
    char buf[256];
    int fit = (width - 6) / FONT_ADVANCE;
    snprintf(buf, sizeof buf, "%.*s", fit < 0 ? 0 : fit > 255 ? 255 : fit, caption);
    draw_text(&cv, 3, 3, buf, 1, TEXT);
}

/* A line from (x0,y0) to (x1,y1) (Bresenham), kept inside the clip rectangle; thick draws a
 * 2x2 pen. */
typedef struct {
    int x0, y0, x1, y1;
} rect;

static void draw_line(canvas *cv, int x0, int y0, int x1, int y1, color c, int thick, rect clip) {
    int dx = abs(x1 - x0), dy = -abs(y1 - y0), sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
    int err = dx + dy;
    for (;;) {
        for (int t = 0; t < (thick ? 4 : 1); t++) {
            int px = x0 + (t & 1), py = y0 + (t >> 1);
            if (px >= clip.x0 && px <= clip.x1 && py >= clip.y0 && py <= clip.y1)
                put(cv, px, py, c);
        }
        if (x0 == x1 && y0 == y1) break;
        int e2 = 2 * err;
        if (e2 >= dy) {
            err += dy;
            x0 += sx;
        }
        if (e2 <= dx) {
            err += dx;
            y0 += sy;
        }
    }
}

/* ---- axes and ticks ------------------------------------------------------------------------- */

/* A "nice" step (1, 2 or 5 times a power of ten) giving about `target` ticks over span. */
static double nice_step(double span, int target) {
    double raw = span / target, mag = pow(10.0, floor(log10(raw))), norm = raw / mag;
    return (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
}

/* A tick label: enough significant digits to tell ticks `step` apart, compact exponents
 * ("1e-05" -> "1e-5", "2e+06" -> "2e6"). */
static void format_tick(char *buf, size_t len, double v, double step) {
    if (fabs(v) < step * 1e-9) v = 0;
    double mag = fabs(v) > 0 ? floor(log10(fabs(v))) : 0;
    int digits = (int)(mag - floor(log10(step) + 1e-9)) + 1;
    if (digits < 1) digits = 1;
    if (mag >= 0 && mag < 6 && digits < mag + 1) digits = (int)mag + 1; /* 500, not 5e2 */
    if (digits > 10) digits = 10;
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%.*g", digits, v);
    size_t o = 0;
    for (const char *p = tmp; *p && o + 1 < len; p++) {
        if (*p == 'e') {
            buf[o++] = 'e';
            p++;
            if (*p == '-' && o + 1 < len) buf[o++] = '-';
            if (*p == '-' || *p == '+') p++;
            while (*p == '0' && p[1]) p++;
            p--;
            continue;
        }
        buf[o++] = *p;
    }
    buf[o] = '\0';
}

/* The visible range of one axis: [lo, hi] over the finite values, padded by 5%; a single
 * value gets a unit-sized window. Returns 0 when there is no finite value. */
static int axis_range(const double *v, int n, double *lo, double *hi) {
    double a = INFINITY, b = -INFINITY;
    for (int i = 0; i < n; i++)
        if (isfinite(v[i])) {
            a = v[i] < a ? v[i] : a;
            b = v[i] > b ? v[i] : b;
        }
    if (!(a <= b)) return 0;
    if (b - a < 1e-12 * (fabs(a) + fabs(b)) || b == a) {
        double pad = fabs(a) > 0 ? fabs(a) * 0.1 : 1.0;
        a -= pad;
        b += pad;
    } else {
        double pad = (b - a) * 0.05;
        a -= pad;
        b += pad;
    }
    *lo = a;
    *hi = b;
    return 1;
}

enum { PLOT_MAX_TICKS = 64 };

/* The y ticks of a chart: values in plotted units (log10 on a log axis) and their labels;
 * returns how many. A log axis spanning a decade or more gets decades (thinned to ~8 labels,
 * with 2 and 5 between when there are few); less than a decade, 1-2-5 values placed
 * logarithmically; a linear axis, ~6 nice steps. */
static int plot_y_ticks(double y0, double y1, int log_y, double yt[PLOT_MAX_TICKS],
                        char ylab[PLOT_MAX_TICKS][32]) {
    int nyt = 0;
    if (log_y && y1 - y0 >= 1.0) {
        int d0 = (int)floor(y0), d1 = (int)ceil(y1), every = (d1 - d0) / 8 + 1;
        static const double sub[3] = {1, 2, 5};
        int nsub = y1 - y0 < 3.0 ? 3 : 1;
        for (int d = d0; d <= d1 && nyt < PLOT_MAX_TICKS; d++)
            for (int j = 0; j < nsub && (d - d0) % every == 0; j++) {
                double v = sub[j] * pow(10.0, d), lv = log10(v);
                if (lv < y0 || lv > y1) continue;
                yt[nyt] = lv;
                if (d >= -3 && d <= 4)
                    format_tick(ylab[nyt], 32, v, pow(10.0, d));
                else
                    snprintf(ylab[nyt], 32, "%de%d", (int)sub[j], d);
                nyt++;
            }
    } else if (log_y) {
        double a = pow(10.0, y0), b = pow(10.0, y1), st = nice_step(b - a, 5);
        for (double k = ceil(a / st); k * st <= b && nyt < PLOT_MAX_TICKS; k++) {
            double v = k * st;
            yt[nyt] = log10(v);
            format_tick(ylab[nyt++], 32, v, st);
        }
    } else {
        double st = nice_step(y1 - y0, 6);
        for (double k = ceil(y0 / st); k * st <= y1 + st * 1e-9 && nyt < PLOT_MAX_TICKS; k++) {
            double v = k * st;
            yt[nyt] = v;
            format_tick(ylab[nyt++], 32, v, st);
        }
    }
    return nyt;
}

/* Draw one chart into rgb (IMG_PLOT_W x IMG_PLOT_H x 3, owned by the caller). */
static int plot_render(uint8_t *rgb, const char *path, const double *xs, const double *ys, int n,
                       const char *title, const char *xlabel, const char *ylabel, int log_y) {
    if (n < 0 || (n > 0 && (!xs || !ys)))
        return sg_set_error("image: %s: bad curve (%d points)", path, n);
    canvas cv = {rgb, IMG_PLOT_W, IMG_PLOT_H};
    /* the plotted y: log10(y) on a log axis; non-finite marks a skipped point */
    double *py = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    double *avg = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    double *fx = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (!py || !avg || !fx) {
        free(py);
        free(avg);
        free(fx);
        return sg_set_error("image: %s: out of memory", path);
    }
    memset(cv.rgb, 255, (size_t)IMG_PLOT_W * IMG_PLOT_H * 3);
    for (int i = 0; i < n; i++) {
        double y = ys[i];
        py[i] = !isfinite(xs[i]) ? NAN : log_y ? (y > 0 ? log10(y) : NAN) : y;
    }
    /* moving average over a centred window of `win` points (the finite ones), so the smooth
     * curve does not lag behind the raw one; the window shrinks at the ends */
    int win = n / 50 < 2 ? 2 : n / 50, show_avg = n >= 20;
    for (int i = 0; i < n; i++) {
        double s = 0;
        int k = 0, lo = i - win / 2, hi = lo + win - 1;
        for (int j = lo < 0 ? 0 : lo; j <= hi && j < n; j++)
            if (isfinite(py[j])) s += py[j], k++;
        avg[i] = k && isfinite(py[i]) ? s / k : NAN;
    }
    double x0, x1, y0, y1;
    int m = 0; /* the x range covers the points that are drawn */
    for (int i = 0; i < n; i++)
        if (isfinite(py[i]) && isfinite(xs[i])) fx[m++] = xs[i];
    if (!axis_range(fx, m, &x0, &x1)) x0 = 0, x1 = 1;
    const int no_data = m == 0;
    free(fx);
    if (!axis_range(py, n, &y0, &y1)) y0 = 0, y1 = 1;

    /* y tick values (in plotted units) and labels decide the left margin */
    double yt[PLOT_MAX_TICKS];
    char ylab[PLOT_MAX_TICKS][32];
    int nyt = plot_y_ticks(y0, y1, log_y, yt, ylab), label_w = 0;
    for (int i = 0; i < nyt; i++) {
        int tw = text_width(ylab[i], 1);
        label_w = tw > label_w ? tw : label_w;
    }
    rect plot = {label_w + 18, 44, IMG_PLOT_W - 24, IMG_PLOT_H - 48};
    const int pw = plot.x1 - plot.x0, ph = plot.y1 - plot.y0;
#define SX(v) (plot.x0 + (int)lround(((v)-x0) / (x1 - x0) * pw))
#define SY(v) (plot.y1 - (int)lround(((v)-y0) / (y1 - y0) * ph))

    /* grid and tick labels */
    for (int i = 0; i < nyt; i++) {
        int y = SY(yt[i]);
        draw_line(&cv, plot.x0, y, plot.x1, y, GRID, 0, plot);
        draw_line(&cv, plot.x0 - 4, y, plot.x0, y, BLACK, 0, (rect){0, 0, cv.w - 1, cv.h - 1});
        draw_text(&cv, plot.x0 - 7 - text_width(ylab[i], 1), y - 3, ylab[i], 1, TEXT);
    }
    double xst = nice_step(x1 - x0, 8);
    for (double k = ceil(x0 / xst); k * xst <= x1 + xst * 1e-9; k++) {
        double v = k * xst;
        char lab[32];
        int x = SX(v);
        format_tick(lab, sizeof lab, v, xst);
        draw_line(&cv, x, plot.y0, x, plot.y1, GRID, 0, plot);
        draw_line(&cv, x, plot.y1, x, plot.y1 + 4, BLACK, 0, (rect){0, 0, cv.w - 1, cv.h - 1});
        draw_text(&cv, x - text_width(lab, 1) / 2, plot.y1 + 8, lab, 1, TEXT);
    }
    /* the curves: raw light, average dark and thick on top; a gap (skipped point) breaks the
     * line. A short series (no average) is drawn dark with a 3x3 marker on every point. */
    for (int pass = 0; pass < (show_avg ? 2 : 1); pass++) {
        const double *v = pass ? avg : py;
        const int bold = pass || !show_avg;
        const color col = bold ? AVG : RAW;
        int have = 0, lx = 0, ly = 0;
        for (int i = 0; i < n; i++) {
            if (!isfinite(v[i]) || !isfinite(xs[i])) {
                have = 0;
                continue;
            }
            int x = SX(xs[i]), y = SY(v[i]);
            if (have) draw_line(&cv, lx, ly, x, y, col, bold, plot);
            if (!show_avg)
                for (int d = -1; d <= 1; d++)
                    draw_line(&cv, x - 1, y + d, x + 1, y + d, col, 0, plot);
            have = 1, lx = x, ly = y;
        }
    }
#undef SX
#undef SY
    /* axes (frame), then the text around them */
    rect all = {0, 0, cv.w - 1, cv.h - 1};
    draw_line(&cv, plot.x0, plot.y0, plot.x0, plot.y1, BLACK, 0, all);
    draw_line(&cv, plot.x0, plot.y1, plot.x1, plot.y1, BLACK, 0, all);
    draw_line(&cv, plot.x1, plot.y0, plot.x1, plot.y1, GRID, 0, all);
    draw_line(&cv, plot.x0, plot.y0, plot.x1, plot.y0, GRID, 0, all);
    if (title) draw_text(&cv, (cv.w - text_width(title, 2)) / 2, 8, title, 2, BLACK);
    if (xlabel)
        draw_text(&cv, plot.x0 + (pw - text_width(xlabel, 1)) / 2, IMG_PLOT_H - 20, xlabel, 1,
                  TEXT);
    if (ylabel) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s%s", ylabel, log_y ? " (log scale)" : "");
        draw_text(&cv, 8, plot.y0 - 17, buf, 1, TEXT);
    }
    if (no_data) {
        const char *msg = "no data to plot";
        draw_text(&cv, plot.x0 + (pw - text_width(msg, 2)) / 2, plot.y0 + ph / 2 - 9, msg, 2, TEXT);
    }
    if (show_avg) {
        char buf[64];
        snprintf(buf, sizeof buf, "moving average of %d", win);
        int tx = plot.x1 - text_width(buf, 1) - 6;
        draw_line(&cv, tx - 22, plot.y0 + 10, tx - 6, plot.y0 + 10, AVG, 1, all);
        draw_text(&cv, tx, plot.y0 + 7, buf, 1, TEXT);
    }
    free(py);
    free(avg);
    return SG_OK;
}

int img_plot_curve_png(const char *path, const double *xs, const double *ys, int n,
                       const char *title, const char *xlabel, const char *ylabel, int log_y) {
    const char *titles[1] = {title}, *ylabels[1] = {ylabel};
    const int logs[1] = {log_y};
    return img_plot_panels_png(path, xs, &ys, n, 1, titles, xlabel, ylabels, logs);
}

int img_plot_panels_png(const char *path, const double *xs, const double *const *ys, int n,
                        int panels, const char *const *titles, const char *xlabel,
                        const char *const *ylabels, const int *log_y) {
    if (panels < 1 || panels > 16) return sg_set_error("image: %s: %d panels", path, panels);
    size_t one = (size_t)IMG_PLOT_W * IMG_PLOT_H * 3;
    uint8_t *rgb = malloc(one * (size_t)panels);
    if (!rgb) return sg_set_error("image: %s: out of memory", path);
    int rc = SG_OK;
    for (int k = 0; k < panels && !rc; k++)
        rc = plot_render(rgb + one * (size_t)k, path, xs, ys[k], n, titles[k], xlabel, ylabels[k],
                         log_y[k]);
    if (!rc) rc = png_write(path, rgb, IMG_PLOT_W, IMG_PLOT_H * panels, 3);
    free(rgb);
    return rc;
}
