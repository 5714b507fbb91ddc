/* attention.cu — multi-head self-attention over the pixels of a feature map.
 *
 * Shapes: L = H*W positions, C channels, `heads` heads of D = C/heads channels.
 *   qkv[N,L,3C]: q = channels [0,C), k = [C,2C), v = [2C,3C); head h owns channels
 *   h*D .. h*D+D-1 of each (an L x D matrix with row stride 3C).
 *   P[N,heads,L,L] fp32 (saved for the backward), y[N,L,C] (head h writes its D channels).
 *
 * Forward, per (n, h), a = 1/sqrt(D):  S = a q k^T,  P = row softmax(S),  y_h = P v.
 * Backward:  dv = P^T dy_h,  dP = dy_h v^T,  dS = P (dP - rowsum(P dP)),
 *            dq = a dS k,  dk = a dS^T q.
 *
 * The products are strided-batched GEMMs (blas.cu: cuBLASLt, pinned algorithms) over the N
 * samples, one head at a time (the batch stride must be uniform, and heads sit at a channel
 * offset inside each row). In the GEMMs' column-major view a row-major [r][c] matrix with row
 * stride ld is the c x r matrix with leading dimension ld, so (writing X^T for the column-major
 * view of row-major X): S^T  (L x L)  = op_T(k^T) q^T          -> P, ld L y^T  (D x L)  = v^T P^T
 * -> y + h*D, ld C dv^T (D x L)  = dy^T op_T(P^T)         -> dqkv + 2C + h*D, ld 3C dP^T (L x L)  =
 * op_T(v^T) dy^T         -> workspace, ld L dq^T (D x L)  = a k^T dS^T             -> dqkv + h*D
 *   dk^T (D x L)  = a q^T op_T(dS^T)       -> dqkv + C + h*D
 * Softmax rows (and the softmax backward) are one block per row with fixed-order tree
 * reductions. bf16: GEMM operands share one type, so the P used in P v and P^T dy and the dS
 * used for dq, dk are rounded to bf16 copies in the workspace (as autocast does); P itself,
 * dP and dS are fp32, and dqkv/y are rounded once (beta * old added in fp32 by the GEMM).
 */
#include "kernels/cuda/cuda_common.cuh"

/* ================================ kernels ================================ */

/* blockIdx.x: row (n, i) of head h; threads stride over the L columns j.
 * row = P + ((n*heads + h)*L + i)*L holds the scaled scores; it becomes
 * softmax = exp(s - max) * (1 / sum) (the CPU's formulation), and with Pb != NULL also a bf16
 * copy at Pb + (n*L + i)*L. */
__global__ void softmax_fwd_kernel(float *P, uint16_t *Pb, int L, int heads, int h) {
    __shared__ float sh[SG_THREADS];
    const int64_t n = blockIdx.x / L, i = blockIdx.x % L;
    float *row = P + ((n * heads + h) * L + i) * L;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < L; j += SG_THREADS) mx = fmaxf(mx, row[j]);
    mx = dev_block_max(mx, sh);
    float s = 0.0f;
    for (int j = threadIdx.x; j < L; j += SG_THREADS) s += expf(row[j] - mx);
    s = dev_block_sum(s, sh);
    const float inv = (float)(1.0 / (double)s);
    for (int j = threadIdx.x; j < L; j += SG_THREADS) {
        const float p = expf(row[j] - mx) * inv;
        row[j] = p;
        if (Pb) Pb[(n * L + i) * L + j] = dev_f32_to_bf16(p);
    }
}

/* blockIdx.x: row (n, i) of head h; threads stride over the columns j.
 * dS = P (dP - sum_j P dP), in place over dP (fp32, [N][L][L]); with bf16 copies (dSb, Pb
 * != NULL) also writes dS and P rounded to bf16, laid out like dP. */
__global__ void softmax_bwd_kernel(float *dP, uint16_t *dSb, uint16_t *Pb, const float *P, int L,
                                   int heads, int h) {
    __shared__ float sh[SG_THREADS];
    const int64_t n = blockIdx.x / L, i = blockIdx.x % L;
    const float *prow = P + ((n * heads + h) * L + i) * L;
    const int64_t o = (n * L + i) * L;
    float *drow = dP + o;
    float dot = 0.0f;
    for (int j = threadIdx.x; j < L; j += SG_THREADS) dot += prow[j] * drow[j];
    dot = dev_block_sum(dot, sh);
    for (int j = threadIdx.x; j < L; j += SG_THREADS) {
        const float p = prow[j], ds = p * (drow[j] - dot);
        drow[j] = ds;
        if (dSb) {
            dSb[o + j] = dev_f32_to_bf16(ds);
            Pb[o + j] = dev_f32_to_bf16(p);
        }
    }
}

/* =============================== launchers =============================== */

static const void *att_off(const void *p, int64_t elems, int dt) {
    return (const char *)p + elems * sg_dtype_size(dt);
}

/* One strided-batched column-major GEMM over `batch` matrices, fp32 compute. */
static int att_gemm(sg_blas *blas, cudaStream_t st, cublasOperation_t ta, cublasOperation_t tb,
                    int m, int n, int k, float alpha, const void *A, int adt, int lda, int64_t sA,
                    const void *B, int bdt, int ldb, int64_t sB, float beta, void *C, int cdt,
                    int ldc, int64_t sC, int batch) {
    return cu_blas_gemm(blas, st, ta, tb, m, n, k, alpha, A, adt, lda, sA, B, bdt, ldb, sB, beta, C,
                        cdt, ldc, sC, batch);
}

static int att_check(const char *fn, sg_blas *blas, cudaStream_t st, int N, int L, int C, int heads,
                     int dt) {
    SG_DT_CHECK(dt, fn);
    SG_ARG_CHECK(N > 0 && L > 0 && C > 0 && heads > 0 && C % heads == 0,
                 "%s: bad shape (C %% heads)", fn);
    SG_ARG_CHECK((int64_t)N * L < 2147483647LL && (int64_t)L * L < 2147483647LL &&
                     3LL * C < 2147483647LL,
                 "%s: shape too large", fn);
    return cu_blas_check(blas, st, fn);
}

int cuda_attention_fwd(cudaStream_t st, sg_blas *blas, void *y, float *P, const void *qkv, int N,
                       int L, int C, int heads, int dt, void *ws, int64_t ws_bytes) {
    const char *fn = "cuda_attention_fwd";
    if (att_check(fn, blas, st, N, L, C, heads, dt)) return SG_ERR;
    SG_WS_CHECK(sg_ws_attention_fwd(N, L, C, heads, dt), ws_bytes, fn);
    const int D = C / heads, ld = 3 * C;
    const float a = (float)(1.0 / sqrt((double)D));
    const int64_t sqkv = (int64_t)L * ld, sP = (int64_t)heads * L * L, sY = (int64_t)L * C;
    uint16_t *Pb = dt == DT_BF16 ? (uint16_t *)ws : NULL;
    for (int h = 0; h < heads; h++) {
        const void *q = att_off(qkv, (int64_t)h * D, dt);
        const void *k = att_off(qkv, (int64_t)C + h * D, dt);
        const void *v = att_off(qkv, (int64_t)2 * C + h * D, dt);
        float *Ph = P + (int64_t)h * L * L;
        /* S^T (L x L) = a op_T(k^T) q^T, into P */
        if (att_gemm(blas, st, CUBLAS_OP_T, CUBLAS_OP_N, L, L, D, a, k, dt, ld, sqkv, q, dt, ld,
                     sqkv, 0.0f, Ph, DT_F32, L, sP, N))
            return SG_ERR;
        SG_LAUNCH(softmax_fwd_kernel, (unsigned)(N * L), SG_THREADS, 0, st, P, Pb, L, heads, h);
        SG_LAUNCH_CHECK("softmax_fwd_kernel");
        /* y_h^T (D x L) = v^T P^T */
        const void *Pop = Pb ? (const void *)Pb : (const void *)Ph;
        const int64_t sPop = Pb ? (int64_t)L * L : sP;
        if (att_gemm(blas, st, CUBLAS_OP_N, CUBLAS_OP_N, D, L, L, 1.0f, v, dt, ld, sqkv, Pop, dt, L,
                     sPop, 0.0f, (void *)att_off(y, (int64_t)h * D, dt), dt, C, sY, N))
            return SG_ERR;
    }
    return SG_OK;
}

int cuda_attention_bwd(cudaStream_t st, sg_blas *blas, void *dqkv, const void *dy, const void *qkv,
                       const float *P, int N, int L, int C, int heads, int dt, int accum, void *ws,
                       int64_t ws_bytes) {
    const char *fn = "cuda_attention_bwd";
    if (att_check(fn, blas, st, N, L, C, heads, dt)) return SG_ERR;
    SG_WS_CHECK(sg_ws_attention_bwd(N, L, C, heads, dt), ws_bytes, fn);
    const int D = C / heads, ld = 3 * C;
    const float a = (float)(1.0 / sqrt((double)D)), beta = accum ? 1.0f : 0.0f;
    const int64_t sqkv = (int64_t)L * ld, sP = (int64_t)heads * L * L, sY = (int64_t)L * C;
    const int64_t sW = (int64_t)L * L; /* one [L][L] workspace matrix per sample */
    float *dP = (float *)ws;
    uint16_t *dSb = NULL, *Pb = NULL;
    if (dt == DT_BF16) {
        dSb = (uint16_t *)((char *)ws + sg_ws_align((int64_t)N * L * L * 4));
        Pb = (uint16_t *)((char *)dSb + sg_ws_align((int64_t)N * L * L * 2));
    }
    for (int h = 0; h < heads; h++) {
        const void *q = att_off(qkv, (int64_t)h * D, dt);
        const void *k = att_off(qkv, (int64_t)C + h * D, dt);
        const void *v = att_off(qkv, (int64_t)2 * C + h * D, dt);
        void *dq = (void *)att_off(dqkv, (int64_t)h * D, dt);
        void *dk = (void *)att_off(dqkv, (int64_t)C + h * D, dt);
        void *dv = (void *)att_off(dqkv, (int64_t)2 * C + h * D, dt);
        const void *dyh = att_off(dy, (int64_t)h * D, dt);
        const float *Ph = P + (int64_t)h * L * L;
        /* dP^T (L x L) = op_T(v^T) dy_h^T */
        if (att_gemm(blas, st, CUBLAS_OP_T, CUBLAS_OP_N, L, L, D, 1.0f, v, dt, ld, sqkv, dyh, dt, C,
                     sY, 0.0f, dP, DT_F32, L, sW, N))
            return SG_ERR;
        SG_LAUNCH(softmax_bwd_kernel, (unsigned)(N * L), SG_THREADS, 0, st, dP, dSb, Pb, P, L,
                  heads, h);
        SG_LAUNCH_CHECK("softmax_bwd_kernel");
        const void *Pop = Pb ? (const void *)Pb : (const void *)Ph;
        const int64_t sPop = Pb ? sW : sP;
        const void *dS = dSb ? (const void *)dSb : (const void *)dP;
        /* dv^T (D x L) = dy_h^T op_T(P^T) */
        if (att_gemm(blas, st, CUBLAS_OP_N, CUBLAS_OP_T, D, L, L, 1.0f, dyh, dt, C, sY, Pop, dt, L,
                     sPop, beta, dv, dt, ld, sqkv, N))
            return SG_ERR;
        /* dq^T (D x L) = a k^T dS^T */
        if (att_gemm(blas, st, CUBLAS_OP_N, CUBLAS_OP_N, D, L, L, a, k, dt, ld, sqkv, dS, dt, L, sW,
                     beta, dq, dt, ld, sqkv, N))
            return SG_ERR;
        /* dk^T (D x L) = a q^T op_T(dS^T) */
        if (att_gemm(blas, st, CUBLAS_OP_N, CUBLAS_OP_T, D, L, L, a, q, dt, ld, sqkv, dS, dt, L, sW,
                     beta, dk, dt, ld, sqkv, N))
            return SG_ERR;
    }
    return SG_OK;
}
