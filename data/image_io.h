/* image_io.h — PNG output for people: grids of images (samples, dataset previews), single
 * images (sample --out-dir) and line charts (loss curves), written with libpng. Nothing here is
 * on the training path.
 *
 * Both return SG_OK or SG_ERR with a one-line sg_last_error() (file and reason); a failed
 * write removes the partial file.
 */
#ifndef SG_IMAGE_IO_H
#define SG_IMAGE_IO_H

#include <stdint.h>

#include "common/sg_base.h"

/* A grid of n images x[n][h][w][c] (NHWC floats, [-1, 1] maps to 0..255, values outside are
 * clamped, NaN is black), `cols` per row (<= 0: about square), each pixel upscaled to a
 * scale x scale block (nearest; scale <= 0 means 1), tiles separated and framed by 1-pixel
 * white lines. c = 1 writes grayscale, c = 3 RGB. Size: cols*(w*scale+1)+1 wide,
 * rows*(h*scale+1)+1 high with rows = ceil(n / cols); unused cells are white. */
int img_write_grid_png(const char *path, const float *x, int n, int h, int w, int c, int cols,
                       int scale);
/* The same grid in RGB under a 15-pixel white strip with a one-line caption (e.g. the
 * training step the samples show), cut to the grid's width. */
int img_write_grid_captioned_png(const char *path, const float *x, int n, int h, int w, int c,
                                 int cols, int scale, const char *caption);

/* The same for uint8 pixels (a dataset preview: data/dataset.h's layout). */
int img_write_grid_u8_png(const char *path, const uint8_t *x, int n, int h, int w, int c, int cols,
                          int scale);

/* x[i] in [-1, 1] to 0..255 as the grids do: (x + 1) * 127.5 rounded half up, values outside
 * clamped, NaN 0. */
void img_f32_to_u8(const float *x, int64_t n, uint8_t *out);

/* One image x[h][w][c] (c = 1 grey, c = 3 RGB), 8 bits, no frame. */
int img_write_png(const char *path, const uint8_t *x, int h, int w, int c);
/* Read back a PNG that must be exactly h x w, 8-bit, with c channels (grey or RGB, no alpha)
 * into out[h][w][c]: anything else, a truncated or damaged file included, is an error naming
 * the file. */
int img_read_png(const char *path, int h, int w, int c, uint8_t *out);

/* A line chart of ys against xs (n points, any n >= 0), IMG_PLOT_W x IMG_PLOT_H RGB: white
 * background, axes with "nice" tick values and light grid lines, tick labels and the title and
 * axis labels in a built-in 5x7 bitmap font (printable ASCII; unknown characters draw as a
 * box). The raw curve is light blue; when n >= 20 a centred moving average (window n/50, at
 * least 2) is drawn over it in dark blue. log_y != 0 plots log10(y) with decade ticks.
 * Non-finite points (and y <= 0 on a log axis) are skipped and break the line. */
#define IMG_PLOT_W 800
#define IMG_PLOT_H 500
int img_plot_curve_png(const char *path, const double *xs, const double *ys, int n,
                       const char *title, const char *xlabel, const char *ylabel, int log_y);
/* Several such charts over the same x, stacked top to bottom in one PNG (panels x
 * IMG_PLOT_H high): e.g. the loss, the learning rate and the gradient norm of a run. */
int img_plot_panels_png(const char *path, const double *xs, const double *const *ys, int n,
                        int panels, const char *const *titles, const char *xlabel,
                        const char *const *ylabels, const int *log_y);

#endif
