/* make_data_seeds.c — seeds for the data fuzzer (data_fuzz_target.c): small valid files of every
 * form the loaders take: PNG (grey, RGB, RGBA, 16-bit grey), JPEG (baseline RGB and grey,
 * progressive), IDX images (raw, gzip, with a channel dimension).
 * usage: make_data_seeds OUTDIR
 */
#include <png.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* jpeglib.h needs FILE and size_t first */
#include <jpeglib.h>
#include <zlib.h>

static uint8_t px[64 * 48 * 4];

static void png(const char *dir, const char *name, int w, int h, png_uint_32 format) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    im.width = (png_uint_32)w, im.height = (png_uint_32)h, im.format = format;
    if (!png_image_write_to_file(&im, path, 0, px, 0, NULL)) {
        fprintf(stderr, "make_data_seeds: cannot write %s\n", path);
        exit(1);
    }
}

static void jpeg(const char *dir, const char *name, int w, int h, int c, int progressive) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "make_data_seeds: cannot write %s\n", path);
        exit(1);
    }
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr err;
    ci.err = jpeg_std_error(&err);
    jpeg_create_compress(&ci);
    jpeg_stdio_dest(&ci, f);
    ci.image_width = (JDIMENSION)w, ci.image_height = (JDIMENSION)h;
    ci.input_components = c, ci.in_color_space = c == 3 ? JCS_RGB : JCS_GRAYSCALE;
    jpeg_set_defaults(&ci);
    jpeg_set_quality(&ci, 75, TRUE);
    if (progressive) jpeg_simple_progression(&ci);
    jpeg_start_compress(&ci, TRUE);
    while (ci.next_scanline < ci.image_height) {
        JSAMPROW r = px + (size_t)ci.next_scanline * (size_t)(w * c);
        jpeg_write_scanlines(&ci, &r, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    fclose(f);
}

/* IDX3 (n x h x w) or, with c, IDX4 (n x h x w x c) unsigned-byte images; gz: gzip it */
static void idx(const char *dir, const char *name, int n, int h, int w, int c, int gz) {
    uint8_t buf[20 + sizeof px];
    int nd = c ? 4 : 3, len = 4 + 4 * nd, dims[4] = {n, h, w, c};
    memcpy(buf, (uint8_t[4]){0, 0, 8, (uint8_t)nd}, 4);
    for (int d = 0; d < nd; d++)
        for (int b = 0; b < 4; b++) buf[4 + 4 * d + b] = (uint8_t)(dims[d] >> (24 - 8 * b));
    size_t body = (size_t)n * h * w * (c ? c : 1);
    memcpy(buf + len, px, body);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int ok;
    if (gz) {
        gzFile g = gzopen(path, "wb9");
        ok =
            g && gzwrite(g, buf, (unsigned)(len + body)) == (int)(len + body) && gzclose(g) == Z_OK;
    } else {
        FILE *f = fopen(path, "wb");
        ok = f && fwrite(buf, 1, len + body, f) == len + body && !fclose(f);
    }
    if (!ok) {
        fprintf(stderr, "make_data_seeds: cannot write %s\n", path);
        exit(1);
    }
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: make_data_seeds OUTDIR\n");
        return 2;
    }
    for (size_t i = 0; i < sizeof px; i++) px[i] = (uint8_t)(i * 7 + (i >> 5) * 13);
    png(argv[1], "seed-grey.png", 12, 10, PNG_FORMAT_GRAY);
    png(argv[1], "seed-rgb.png", 10, 12, PNG_FORMAT_RGB);
    png(argv[1], "seed-rgba.png", 9, 9, PNG_FORMAT_RGBA);
    png(argv[1], "seed-grey16.png", 8, 8, PNG_FORMAT_LINEAR_Y);
    jpeg(argv[1], "seed-rgb.jpg", 16, 12, 3, 0);
    jpeg(argv[1], "seed-grey.jpg", 12, 16, 1, 0);
    jpeg(argv[1], "seed-progressive.jpg", 24, 16, 3, 1);
    idx(argv[1], "seed-idx3", 3, 5, 4, 0, 0);
    idx(argv[1], "seed-idx3.gz", 2, 6, 6, 0, 1);
    idx(argv[1], "seed-idx4", 2, 4, 4, 3, 0);
    printf("wrote the data seeds to %s\n", argv[1]);
    return 0;
}
