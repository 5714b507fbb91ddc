/* resample.cu — nearest 2x upsampling and 2x2 average pooling, with backwards.
 *
 * Shapes (NHWC; H, W are always the INPUT's spatial size):
 *   upsample  x[N,H,W,C] -> y[N,2H,2W,C], y[n,i,j,c] = x[n,i/2,j/2,c];
 *             backward dx = sum of the 2x2 block of dy, added (0,0) + (0,1) + (1,0) + (1,1)
 *   avgpool   x[N,H,W,C] -> y[N,H/2,W/2,C] = the 2x2 mean (same order, times 0.25);
 *             backward dx = dy / 4 spread over the block (H, W even)
 * Every output element is written exactly once, in the CPU's order of additions (identical
 * fp32 results).
 */
#include "kernels/cuda/cuda_common.cuh"

/* ================================ kernels ================================ */

/* Thread layout: one thread per (pixel p, channel vector cv) of the smaller side's N*h*w
 * pixels (upsample: the input; avgpool: the output), VEC channels a vector (16 bytes where C
 * and the pointers allow, else 1: the launcher's rs_vec); each thread covers its pixel's 2x2
 * block on the larger side. Index arithmetic per vector, not per element. Every output
 * element is written by exactly one thread, its sums in the CPU's order. */
#define RS_ITEM(i, CV, h, w)                                                                       \
    const int cv = (int)((i) % (CV));                                                              \
    const int64_t px = (i) / (CV), n = px / ((int64_t)(h) * (w));                                  \
    const int pr = (int)(px % ((int64_t)(h) * (w))), py = pr / (w), pxx = pr % (w)

/* y[n, 2py + a, 2px + b] = x[n, py, px] for a, b in {0, 1} */
template <typename T, int VEC>
__global__ void upsample_fwd_kernel(T *y, const T *x, int64_t items, int H, int W, int C) {
    SG_PDL_ENTER();
    const int CV = C / VEC;
    SG_GRID_STRIDE(i, items) {
        RS_ITEM(i, CV, H, W);
        float v[VEC];
        dev_ldv<T, VEC>(v, x + px * C + (int64_t)cv * VEC);
        const int64_t o = ((n * 2 * H + 2 * py) * 2 * W + 2 * pxx) * C + (int64_t)cv * VEC,
                      row = (int64_t)2 * W * C;
        dev_stv<T, VEC>(y + o, v, 0);
        dev_stv<T, VEC>(y + o + C, v, 0);
        dev_stv<T, VEC>(y + o + row, v, 0);
        dev_stv<T, VEC>(y + o + row + C, v, 0);
    }
}

/* dx[n, py, px] (+)= dy (0,0) + (0,1) + (1,0) + (1,1) of its 2x2 block, in that order */
template <typename T, int VEC>
__global__ void upsample_bwd_kernel(T *dx, const T *dy, int64_t items, int H, int W, int C,
                                    int accum) {
    SG_PDL_ENTER();
    const int CV = C / VEC;
    SG_GRID_STRIDE(i, items) {
        RS_ITEM(i, CV, H, W);
        const int64_t a = ((n * 2 * H + 2 * py) * 2 * W + 2 * pxx) * C + (int64_t)cv * VEC,
                      row = (int64_t)2 * W * C;
        float q[4][VEC], s[VEC];
        dev_ldv<T, VEC>(q[0], dy + a);
        dev_ldv<T, VEC>(q[1], dy + a + C);
        dev_ldv<T, VEC>(q[2], dy + a + row);
        dev_ldv<T, VEC>(q[3], dy + a + row + C);
        for (int j = 0; j < VEC; j++) s[j] = q[0][j] + q[1][j] + q[2][j] + q[3][j];
        dev_stv<T, VEC>(dx + px * C + (int64_t)cv * VEC, s, accum);
    }
}

/* y[n, py, px] = the 2x2 mean of x: (0,0) + (0,1) + (1,0) + (1,1), times 0.25 */
template <typename T, int VEC>
__global__ void avgpool_fwd_kernel(T *y, const T *x, int64_t items, int H, int W, int C) {
    SG_PDL_ENTER();
    const int CV = C / VEC, Ho = H / 2, Wo = W / 2;
    SG_GRID_STRIDE(i, items) {
        RS_ITEM(i, CV, Ho, Wo);
        const int64_t a = ((n * H + 2 * py) * W + 2 * pxx) * C + (int64_t)cv * VEC,
                      row = (int64_t)W * C;
        float q[4][VEC], s[VEC];
        dev_ldv<T, VEC>(q[0], x + a);
        dev_ldv<T, VEC>(q[1], x + a + C);
        dev_ldv<T, VEC>(q[2], x + a + row);
        dev_ldv<T, VEC>(q[3], x + a + row + C);
        for (int j = 0; j < VEC; j++) s[j] = (q[0][j] + q[1][j] + q[2][j] + q[3][j]) * 0.25f;
        dev_stv<T, VEC>(y + px * C + (int64_t)cv * VEC, s, 0);
    }
}

/* dx (+)= dy of the covering output times 0.25, over each output's 2x2 block */
template <typename T, int VEC>
__global__ void avgpool_bwd_kernel(T *dx, const T *dy, int64_t items, int H, int W, int C,
                                   int accum) {
    SG_PDL_ENTER();
    const int CV = C / VEC, Ho = H / 2, Wo = W / 2;
    SG_GRID_STRIDE(i, items) {
        RS_ITEM(i, CV, Ho, Wo);
        float g[VEC];
        dev_ldv<T, VEC>(g, dy + px * C + (int64_t)cv * VEC);
        for (int j = 0; j < VEC; j++) g[j] *= 0.25f;
        const int64_t a = ((n * H + 2 * py) * W + 2 * pxx) * C + (int64_t)cv * VEC,
                      row = (int64_t)W * C;
        dev_stv<T, VEC>(dx + a, g, accum);
        dev_stv<T, VEC>(dx + a + C, g, accum);
        dev_stv<T, VEC>(dx + a + row, g, accum);
        dev_stv<T, VEC>(dx + a + row + C, g, accum);
    }
}

/* =============================== launchers =============================== */

#define RESAMPLE_CHECK(fn)                                                                         \
    SG_DT_CHECK(dt, fn);                                                                           \
    SG_ARG_CHECK(N > 0 && H > 0 && W > 0 && C > 0, "%s: bad shape", fn)

/* 16-byte vectors where C is a multiple of the width and both pointers are aligned, else 1 */
static int rs_vec(int dt, int C, const void *a, const void *b) {
    const int V = dt == DT_BF16 ? 8 : 4;
    return C % V || (uintptr_t)a % 16 || (uintptr_t)b % 16 ? 1 : V;
}

/* one launch of KERNEL over `items` thread items with the dtype's type and rs_vec's width; ARGS
 * after the two pointers */
#define RS_LAUNCH(KERNEL, out, in, pix, ...)                                                       \
    do {                                                                                           \
        const int vec_ = rs_vec(dt, C, out, in);                                                   \
        const int64_t items_ = (int64_t)(pix) * (C / vec_);                                        \
        if (dt == DT_BF16 && vec_ > 1)                                                             \
            SG_LAUNCH((KERNEL<uint16_t, 8>), sg_grid_for(items_), SG_THREADS, 0, st,               \
                      (uint16_t *)(out), (const uint16_t *)(in), items_, __VA_ARGS__);             \
        else if (dt == DT_BF16)                                                                    \
            SG_LAUNCH((KERNEL<uint16_t, 1>), sg_grid_for(items_), SG_THREADS, 0, st,               \
                      (uint16_t *)(out), (const uint16_t *)(in), items_, __VA_ARGS__);             \
        else if (vec_ > 1)                                                                         \
            SG_LAUNCH((KERNEL<float, 4>), sg_grid_for(items_), SG_THREADS, 0, st, (float *)(out),  \
                      (const float *)(in), items_, __VA_ARGS__);                                   \
        else                                                                                       \
            SG_LAUNCH((KERNEL<float, 1>), sg_grid_for(items_), SG_THREADS, 0, st, (float *)(out),  \
                      (const float *)(in), items_, __VA_ARGS__);                                   \
        SG_LAUNCH_CHECK(#KERNEL);                                                                  \
    } while (0)

int cuda_upsample2x_fwd(cudaStream_t st, void *y, const void *x, int N, int H, int W, int C,
                        int dt) {
    RESAMPLE_CHECK("cuda_upsample2x_fwd");
    RS_LAUNCH(upsample_fwd_kernel, y, x, (int64_t)N * H * W, H, W, C);
    return SG_OK;
}

int cuda_upsample2x_bwd(cudaStream_t st, void *dx, const void *dy, int N, int H, int W, int C,
                        int dt, int accum) {
    RESAMPLE_CHECK("cuda_upsample2x_bwd");
    RS_LAUNCH(upsample_bwd_kernel, dx, dy, (int64_t)N * H * W, H, W, C, accum);
    return SG_OK;
}

int cuda_avgpool2x_fwd(cudaStream_t st, void *y, const void *x, int N, int H, int W, int C,
                       int dt) {
    RESAMPLE_CHECK("cuda_avgpool2x_fwd");
    SG_ARG_CHECK(H % 2 == 0 && W % 2 == 0, "cuda_avgpool2x_fwd: H and W must be even");
    RS_LAUNCH(avgpool_fwd_kernel, y, x, (int64_t)N * (H / 2) * (W / 2), H, W, C);
    return SG_OK;
}

int cuda_avgpool2x_bwd(cudaStream_t st, void *dx, const void *dy, int N, int H, int W, int C,
                       int dt, int accum) {
    RESAMPLE_CHECK("cuda_avgpool2x_bwd");
    SG_ARG_CHECK(H % 2 == 0 && W % 2 == 0, "cuda_avgpool2x_bwd: H and W must be even");
    RS_LAUNCH(avgpool_bwd_kernel, dx, dy, (int64_t)N * (H / 2) * (W / 2), H, W, C, accum);
    return SG_OK;
}
