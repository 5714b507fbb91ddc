/* elementwise.cu — pointwise ops over n values, the broadcast add of the time embedding, and
 * the deterministic column sum behind every bias gradient.
 *
 * Shapes: flat ops take n values; add_nc takes x[N,HW,C] and v[N,C]. Each output element of
 * a pointwise op depends only on the same element of its inputs, so outputs may alias inputs.
 *
 * Column sums (add_nc backward, bias gradients): out[b][c] = sum over r of in[b][r][c]. Pass 1
 * cuts the R rows into chunks of SG_WS_COLSUM_ROWS; one block per (32 columns, chunk, b) sums
 * its chunk and writes partials[b][chunk][c]; pass 2 sums the chunks of each column in
 * increasing chunk order. The order depends on the shapes alone: no atomics, same bits.
 */
#include "kernels/cuda/cuda_common.cuh"

/* ================================ kernels ================================ */

/* threads stride over n: y = x sigmoid(x) */
__global__ void silu_fwd_kernel(void *y, const void *x, int64_t n, int dt) {
    SG_GRID_STRIDE(i, n) {
        float v = dev_ld(x, i, dt);
        dev_st(y, i, v / (1.0f + expf(-v)), dt);
    }
}

/* threads stride over n: dx (+)= dy s (1 + x (1 - s)), s = sigmoid(x) */
__global__ void silu_bwd_kernel(void *dx, const void *dy, const void *x, int64_t n, int dt,
                                int accum) {
    SG_GRID_STRIDE(i, n) {
        float v = dev_ld(x, i, dt);
        float s = 1.0f / (1.0f + expf(-v));
        dev_st_acc(dx, i, dev_ld(dy, i, dt) * (s * (1.0f + v * (1.0f - s))), dt, accum);
    }
}

/* threads stride over n: y = silu(a) b */
__global__ void silu_mul_fwd_kernel(void *y, const void *a, const void *b, int64_t n, int dt) {
    SG_GRID_STRIDE(i, n) {
        float v = dev_ld(a, i, dt);
        dev_st(y, i, v / (1.0f + expf(-v)) * dev_ld(b, i, dt), dt);
    }
}

/* threads stride over n: da (+)= dy b s (1 + a (1 - s)), db (+)= dy silu(a), s = sigmoid(a) */
__global__ void silu_mul_bwd_kernel(void *da, void *db, const void *dy, const void *a,
                                    const void *b, int64_t n, int dt, int accum_a, int accum_b) {
    SG_GRID_STRIDE(i, n) {
        float v = dev_ld(a, i, dt), e = expf(-v), g = dev_ld(dy, i, dt);
        float s = 1.0f / (1.0f + e);
        float ga = g * dev_ld(b, i, dt) * (s * (1.0f + v * (1.0f - s))), gb = g * (v / (1.0f + e));
        dev_st_acc(da, i, ga, dt, accum_a);
        dev_st_acc(db, i, gb, dt, accum_b);
    }
}

/* threads stride over n: y = a + b */
__global__ void add_kernel(void *y, const void *a, const void *b, int64_t n, int dt) {
    SG_GRID_STRIDE(i, n) {
        dev_st(y, i, dev_ld(a, i, dt) + dev_ld(b, i, dt), dt);
    }
}

/* threads stride over n: y (+)= x * s, converting xdt -> ydt (copy: s = 1) */
__global__ void scale_kernel(void *y, int ydt, const void *x, int xdt, float s, int64_t n,
                             int accum) {
    SG_GRID_STRIDE(i, n) {
        dev_st_acc(y, i, dev_ld(x, i, xdt) * s, ydt, accum);
    }
}

/* threads stride over N*HW*C: y = x + v[n][c] */
__global__ void add_nc_kernel(void *y, const void *x, const void *v, int64_t total, int64_t HWC,
                              int C, int dt) {
    SG_GRID_STRIDE(i, total) {
        int64_t nidx = i / HWC;
        int c = (int)(i % C);
        dev_st(y, i, dev_ld(x, i, dt) + dev_ld(v, nidx * C + c, dt), dt);
    }
}

/* blockIdx.x: 32 columns, blockIdx.y: chunk of rows, blockIdx.z: batch b; threads (32, 8):
 * threadIdx.x is the column, threadIdx.y strides over the chunk's rows; then the 8 row-thread
 * sums of a column are added in order 0..7. part[b][chunk][c]. */
__global__ void col_sum_partial_kernel(float *part, const void *in, int dt, int64_t R, int C,
                                       int chunks) {
    __shared__ float sh[8][33];
    const int c = blockIdx.x * 32 + threadIdx.x;
    const int64_t b = blockIdx.z;
    const int64_t r0 = (int64_t)blockIdx.y * SG_WS_COLSUM_ROWS;
    const int64_t r1 = r0 + SG_WS_COLSUM_ROWS < R ? r0 + SG_WS_COLSUM_ROWS : R;
    float s = 0.0f;
    if (c < C)
        for (int64_t r = r0 + threadIdx.y; r < r1; r += 8) s += dev_ld(in, (b * R + r) * C + c, dt);
    sh[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        float t = sh[0][threadIdx.x];
        for (int k = 1; k < 8; k++) t += sh[k][threadIdx.x];
        part[(b * chunks + blockIdx.y) * C + c] = t;
    }
}

/* threads stride over nb*C: out[b][c] (+)= sum over chunks k (in order) of part[b][k][c] */
__global__ void col_sum_final_kernel(void *out, int odt, const float *part, int64_t nbC, int C,
                                     int chunks, int accum) {
    SG_GRID_STRIDE(i, nbC) {
        int64_t b = i / C;
        int c = (int)(i % C);
        const float *p = part + b * chunks * C + c;
        float s = 0.0f;
        for (int k = 0; k < chunks; k++) s += p[(int64_t)k * C];
        dev_st_acc(out, i, s, odt, accum);
    }
}

/* =============================== launchers =============================== */

int cu_col_sum(cudaStream_t st, void *out, int odt, const void *in, int idt, int nb, int64_t R,
               int C, int accum, void *ws) {
    int64_t chunks = sg_ws_colsum_chunks(R);
    if (nb <= 0 || R <= 0 || C <= 0) return sg_set_error("col_sum: bad shape");
    if (chunks > 65535 || nb > 65535) return sg_set_error("col_sum: too many rows or batches");
    dim3 grid((unsigned)((C + 31) / 32), (unsigned)chunks, (unsigned)nb);
    SG_LAUNCH(col_sum_partial_kernel, grid, dim3(32, 8), 0, st, (float *)ws, in, idt, R, C,
              (int)chunks);
    SG_LAUNCH_CHECK("col_sum_partial_kernel");
    int64_t nbC = (int64_t)nb * C;
    SG_LAUNCH(col_sum_final_kernel, sg_grid_for(nbC), SG_THREADS, 0, st, out, odt,
              (const float *)ws, nbC, C, (int)chunks, accum);
    SG_LAUNCH_CHECK("col_sum_final_kernel");
    return SG_OK;
}

int cuda_silu_fwd(cudaStream_t st, void *y, const void *x, int64_t n, int dt) {
    SG_DT_CHECK(dt, "cuda_silu_fwd");
    if (n <= 0) return SG_OK;
    SG_LAUNCH(silu_fwd_kernel, sg_grid_for(n), SG_THREADS, 0, st, y, x, n, dt);
    SG_LAUNCH_CHECK("silu_fwd_kernel");
    return SG_OK;
}

int cuda_silu_bwd(cudaStream_t st, void *dx, const void *dy, const void *x, int64_t n, int dt,
                  int accum) {
    SG_DT_CHECK(dt, "cuda_silu_bwd");
    if (n <= 0) return SG_OK;
    SG_LAUNCH(silu_bwd_kernel, sg_grid_for(n), SG_THREADS, 0, st, dx, dy, x, n, dt, accum);
    SG_LAUNCH_CHECK("silu_bwd_kernel");
    return SG_OK;
}

int cuda_silu_mul_fwd(cudaStream_t st, void *y, const void *a, const void *b, int64_t n, int dt) {
    SG_DT_CHECK(dt, "cuda_silu_mul_fwd");
    if (n <= 0) return SG_OK;
    SG_LAUNCH(silu_mul_fwd_kernel, sg_grid_for(n), SG_THREADS, 0, st, y, a, b, n, dt);
    SG_LAUNCH_CHECK("silu_mul_fwd_kernel");
    return SG_OK;
}

int cuda_silu_mul_bwd(cudaStream_t st, void *da, void *db, const void *dy, const void *a,
                      const void *b, int64_t n, int dt, int accum_a, int accum_b) {
    SG_DT_CHECK(dt, "cuda_silu_mul_bwd");
    if (n <= 0) return SG_OK;
    SG_LAUNCH(silu_mul_bwd_kernel, sg_grid_for(n), SG_THREADS, 0, st, da, db, dy, a, b, n, dt,
              accum_a, accum_b);
    SG_LAUNCH_CHECK("silu_mul_bwd_kernel");
    return SG_OK;
}

int cuda_add_fwd(cudaStream_t st, void *y, const void *a, const void *b, int64_t n, int dt) {
    SG_DT_CHECK(dt, "cuda_add_fwd");
    if (n <= 0) return SG_OK;
    SG_LAUNCH(add_kernel, sg_grid_for(n), SG_THREADS, 0, st, y, a, b, n, dt);
    SG_LAUNCH_CHECK("add_kernel");
    return SG_OK;
}

int cuda_copy(cudaStream_t st, void *y, int ydt, const void *x, int xdt, int64_t n, int accum) {
    SG_DT_CHECK(ydt, "cuda_copy");
    SG_DT_CHECK(xdt, "cuda_copy");
    if (n <= 0 || (y == x && ydt == xdt && !accum)) return SG_OK;
    SG_LAUNCH(scale_kernel, sg_grid_for(n), SG_THREADS, 0, st, y, ydt, x, xdt, 1.0f, n, accum);
    SG_LAUNCH_CHECK("scale_kernel (copy)");
    return SG_OK;
}

int cuda_scale(cudaStream_t st, void *y, const void *x, float s, int64_t n, int dt, int accum) {
    SG_DT_CHECK(dt, "cuda_scale");
    if (n <= 0) return SG_OK;
    SG_LAUNCH(scale_kernel, sg_grid_for(n), SG_THREADS, 0, st, y, dt, x, dt, s, n, accum);
    SG_LAUNCH_CHECK("scale_kernel");
    return SG_OK;
}

int cuda_add_nc_fwd(cudaStream_t st, void *y, const void *x, const void *v, int N, int HW, int C,
                    int dt) {
    SG_DT_CHECK(dt, "cuda_add_nc_fwd");
    SG_ARG_CHECK(N > 0 && HW > 0 && C > 0, "cuda_add_nc_fwd: bad shape");
    int64_t total = (int64_t)N * HW * C;
    SG_LAUNCH(add_nc_kernel, sg_grid_for(total), SG_THREADS, 0, st, y, x, v, total, (int64_t)HW * C,
              C, dt);
    SG_LAUNCH_CHECK("add_nc_kernel");
    return SG_OK;
}

int cuda_add_nc_bwd(cudaStream_t st, void *dv, const void *dy, int N, int HW, int C, int dt,
                    int accum, void *ws, int64_t ws_bytes) {
    SG_DT_CHECK(dt, "cuda_add_nc_bwd");
    SG_ARG_CHECK(N > 0 && HW > 0 && C > 0, "cuda_add_nc_bwd: bad shape");
    SG_WS_CHECK(sg_ws_add_nc_bwd(N, HW, C), ws_bytes, "cuda_add_nc_bwd");
    return cu_col_sum(st, dv, dt, dy, dt, N, HW, C, accum, ws);
}
