/* resample.cu — nearest 2x upsampling and 2x2 average pooling, with backwards.
 *
 * Shapes (NHWC; H, W are always the INPUT's spatial size):
 *   upsample  x[N,H,W,C] -> y[N,2H,2W,C], y[n,i,j,c] = x[n,i/2,j/2,c];
 *             backward dx = sum of the 2x2 block of dy, added (0,0) + (0,1) + (1,0) + (1,1)
 *   avgpool   x[N,H,W,C] -> y[N,H/2,W/2,C] = the 2x2 mean (same order, times 0.25);
 *             backward dx = dy / 4 spread over the block (H, W even)
 * One thread per output element, so every output is written exactly once, in the CPU's order
 * of additions (identical fp32 results).
 */
#include "kernels/cuda/cuda_common.cuh"

/* ================================ kernels ================================ */

/* The coordinates of flat index i of an NHWC tensor of H x W pixels and C channels. */
__device__ __forceinline__ void dev_nhwc_at(int64_t i, int H, int W, int C, int64_t *n, int *y,
                                            int *x, int *c) {
    *c = (int)(i % C);
    int64_t r = i / C;
    *x = (int)(r % W);
    r /= W;
    *y = (int)(r % H);
    *n = r / H;
}

/* threads stride over y's N*2H*2W*C elements */
__global__ void upsample_fwd_kernel(void *y, const void *x, int64_t total, int H, int W, int C,
                                    int dt) {
    SG_GRID_STRIDE(i, total) {
        int64_t n;
        int oy, ox, c;
        dev_nhwc_at(i, 2 * H, 2 * W, C, &n, &oy, &ox, &c);
        dev_st(y, i, dev_ld(x, ((n * H + oy / 2) * W + ox / 2) * C + c, dt), dt);
    }
}

/* threads stride over dx's N*H*W*C elements: the 2x2 block sum of dy */
__global__ void upsample_bwd_kernel(void *dx, const void *dy, int64_t total, int H, int W, int C,
                                    int dt, int accum) {
    SG_GRID_STRIDE(i, total) {
        int64_t n;
        int iy, ix, c;
        dev_nhwc_at(i, H, W, C, &n, &iy, &ix, &c);
        int64_t row = (int64_t)2 * W * C; /* one dy row */
        int64_t a = ((n * 2 * H + 2 * iy) * 2 * W + 2 * ix) * C + c;
        float s = dev_ld(dy, a, dt) + dev_ld(dy, a + C, dt) + dev_ld(dy, a + row, dt) +
                  dev_ld(dy, a + row + C, dt);
        dev_st_acc(dx, i, s, dt, accum);
    }
}

/* threads stride over y's N*(H/2)*(W/2)*C elements: the 2x2 mean of x */
__global__ void avgpool_fwd_kernel(void *y, const void *x, int64_t total, int H, int W, int C,
                                   int dt) {
    const int Ho = H / 2, Wo = W / 2;
    SG_GRID_STRIDE(i, total) {
        int64_t n;
        int oy, ox, c;
        dev_nhwc_at(i, Ho, Wo, C, &n, &oy, &ox, &c);
        int64_t row = (int64_t)W * C;
        int64_t a = ((n * H + 2 * oy) * W + 2 * ox) * C + c;
        float s = dev_ld(x, a, dt) + dev_ld(x, a + C, dt) + dev_ld(x, a + row, dt) +
                  dev_ld(x, a + row + C, dt);
        dev_st(y, i, s * 0.25f, dt);
    }
}

/* threads stride over dx's N*H*W*C elements: dy of the covering output, times 0.25 */
__global__ void avgpool_bwd_kernel(void *dx, const void *dy, int64_t total, int H, int W, int C,
                                   int dt, int accum) {
    const int Ho = H / 2, Wo = W / 2;
    SG_GRID_STRIDE(i, total) {
        int64_t n;
        int iy, ix, c;
        dev_nhwc_at(i, H, W, C, &n, &iy, &ix, &c);
        float g = dev_ld(dy, ((n * Ho + iy / 2) * Wo + ix / 2) * C + c, dt) * 0.25f;
        dev_st_acc(dx, i, g, dt, accum);
    }
}

/* =============================== launchers =============================== */

#define RESAMPLE_CHECK(fn)                                                                         \
    SG_DT_CHECK(dt, fn);                                                                           \
    SG_ARG_CHECK(N > 0 && H > 0 && W > 0 && C > 0, "%s: bad shape", fn)

int cuda_upsample2x_fwd(cudaStream_t st, void *y, const void *x, int N, int H, int W, int C,
                        int dt) {
    RESAMPLE_CHECK("cuda_upsample2x_fwd");
    int64_t total = (int64_t)N * 4 * H * W * C;
    SG_LAUNCH(upsample_fwd_kernel, sg_grid_for(total), SG_THREADS, 0, st, y, x, total, H, W, C, dt);
    SG_LAUNCH_CHECK("upsample_fwd_kernel");
    return SG_OK;
}

int cuda_upsample2x_bwd(cudaStream_t st, void *dx, const void *dy, int N, int H, int W, int C,
                        int dt, int accum) {
    RESAMPLE_CHECK("cuda_upsample2x_bwd");
    int64_t total = (int64_t)N * H * W * C;
    SG_LAUNCH(upsample_bwd_kernel, sg_grid_for(total), SG_THREADS, 0, st, dx, dy, total, H, W, C,
              dt, accum);
    SG_LAUNCH_CHECK("upsample_bwd_kernel");
    return SG_OK;
}

int cuda_avgpool2x_fwd(cudaStream_t st, void *y, const void *x, int N, int H, int W, int C,
                       int dt) {
    RESAMPLE_CHECK("cuda_avgpool2x_fwd");
    SG_ARG_CHECK(H % 2 == 0 && W % 2 == 0, "cuda_avgpool2x_fwd: H and W must be even");
    int64_t total = (int64_t)N * (H / 2) * (W / 2) * C;
    SG_LAUNCH(avgpool_fwd_kernel, sg_grid_for(total), SG_THREADS, 0, st, y, x, total, H, W, C, dt);
    SG_LAUNCH_CHECK("avgpool_fwd_kernel");
    return SG_OK;
}

int cuda_avgpool2x_bwd(cudaStream_t st, void *dx, const void *dy, int N, int H, int W, int C,
                       int dt, int accum) {
    RESAMPLE_CHECK("cuda_avgpool2x_bwd");
    SG_ARG_CHECK(H % 2 == 0 && W % 2 == 0, "cuda_avgpool2x_bwd: H and W must be even");
    int64_t total = (int64_t)N * H * W * C;
    SG_LAUNCH(avgpool_bwd_kernel, sg_grid_for(total), SG_THREADS, 0, st, dx, dy, total, H, W, C, dt,
              accum);
    SG_LAUNCH_CHECK("avgpool_bwd_kernel");
    return SG_OK;
}
