/* resample.c — nearest-neighbour 2x upsampling and 2x2 average pooling, with backwards.
 *
 * Shapes (H, W are always the INPUT's spatial size, NHWC):
 *   upsample  x[N,H,W,C]  -> y[N,2H,2W,C],  y[n,i,j,c] = x[n,i/2,j/2,c]
 *   avgpool   x[N,H,W,C]  -> y[N,H/2,W/2,C], y = mean of the 2x2 block (H, W even)
 * The backwards are the adjoints: upsample's sums each 2x2 block of dy, avgpool's spreads
 * dy/4 to the four inputs. Block sums add (0,0) + (0,1) + (1,0) + (1,1) in that order.
 */
#include "common/sg_base.h"
#include "kernels/cpu/cpu_kernels.h"

#include <string.h>

void cpu_upsample2x_fwd(float *y, const float *x, int N, int H, int W, int C) {
    int Wo = 2 * W;
    size_t bytes = (size_t)C * sizeof(float);
    for (int n = 0; n < N; n++) {
        for (int i = 0; i < H; i++) {
            const float *xr = x + ((int64_t)n * H + i) * W * C;
            float *y0 = y + ((int64_t)n * 2 * H + 2 * i) * Wo * C, *y1 = y0 + (int64_t)Wo * C;
            for (int j = 0; j < W; j++) {
                memcpy(y0 + (2 * j) * (int64_t)C, xr + (int64_t)j * C, bytes);
                memcpy(y0 + (2 * j + 1) * (int64_t)C, xr + (int64_t)j * C, bytes);
            }
            memcpy(y1, y0, (size_t)Wo * bytes); /* the second output row repeats the first */
        }
    }
}

void cpu_upsample2x_bwd(float *dx, const float *dy, int N, int H, int W, int C) {
    int64_t Wo = 2 * (int64_t)W;
    for (int n = 0; n < N; n++) {
        for (int i = 0; i < H; i++) {
            const float *d0 = dy + ((int64_t)n * 2 * H + 2 * i) * Wo * C, *d1 = d0 + Wo * C;
            float *dxr = dx + ((int64_t)n * H + i) * W * C;
            for (int j = 0; j < W; j++) {
                const float *a = d0 + 2 * j * (int64_t)C, *b = a + C, *c2 = d1 + 2 * j * (int64_t)C,
                            *d = c2 + C;
                for (int c = 0; c < C; c++) dxr[(int64_t)j * C + c] = a[c] + b[c] + c2[c] + d[c];
            }
        }
    }
}

void cpu_avgpool2x_fwd(float *y, const float *x, int N, int H, int W, int C) {
    SG_ASSERT(H % 2 == 0 && W % 2 == 0);
    int Ho = H / 2, Wo = W / 2;
    for (int n = 0; n < N; n++) {
        for (int i = 0; i < Ho; i++) {
            const float *x0 = x + ((int64_t)n * H + 2 * i) * W * C, *x1 = x0 + (int64_t)W * C;
            float *yr = y + ((int64_t)n * Ho + i) * Wo * C;
            for (int j = 0; j < Wo; j++) {
                const float *a = x0 + 2 * j * (int64_t)C, *b = a + C, *c2 = x1 + 2 * j * (int64_t)C,
                            *d = c2 + C;
                for (int c = 0; c < C; c++)
                    yr[(int64_t)j * C + c] = (a[c] + b[c] + c2[c] + d[c]) * 0.25f;
            }
        }
    }
}

void cpu_avgpool2x_bwd(float *dx, const float *dy, int N, int H, int W, int C) {
    SG_ASSERT(H % 2 == 0 && W % 2 == 0);
    int Ho = H / 2, Wo = W / 2;
    for (int n = 0; n < N; n++) {
        for (int i = 0; i < Ho; i++) {
            float *x0 = dx + ((int64_t)n * H + 2 * i) * W * C, *x1 = x0 + (int64_t)W * C;
            const float *dyr = dy + ((int64_t)n * Ho + i) * Wo * C;
            for (int j = 0; j < Wo; j++) {
                float *a = x0 + 2 * j * (int64_t)C, *b = a + C, *c2 = x1 + 2 * j * (int64_t)C,
                      *d = c2 + C;
                for (int c = 0; c < C; c++) {
                    float g = dyr[(int64_t)j * C + c] * 0.25f;
                    a[c] = g;
                    b[c] = g;
                    c2[c] = g;
                    d[c] = g;
                }
            }
        }
    }
}
