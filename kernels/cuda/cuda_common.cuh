/* cuda_common.cuh — what the kernels/cuda files share: dtype loads/stores, deterministic block
 * reductions, the grid-stride loop, launch checks, and the few host helpers one family lends
 * another (the pinned GEMM, GEMM layers, column sums). Internal to kernels/cuda; the public API
 * is cuda_kernels.h.
 */
#ifndef SG_CUDA_COMMON_CUH
#define SG_CUDA_COMMON_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <utility>

#include "common/sg_base.h"
#include "common/sg_workspace.h"
#include "kernels/cuda/cuda_kernels.h"

/* sg_base.h declares these for C only; they are C functions (common/sg_base.c). */
extern "C" int sg_set_error(const char *fmt, ...);
extern "C" const char *sg_last_error(void);

#define SG_THREADS 256 /* the block size of every 1-D kernel here (a power of two) */

/* ---- launches ---- */

/* Every kernel launch: SG_LAUNCH(kernel, grid, block, dynamic smem bytes, stream, args...).
 * nvcc: kernel<<<grid, block, smem, stream>>>(args...). Host emulation (SG_CUDA_HOST, the
 * tests/cuda_host build of these files as C++): the emulator checks the configuration and every
 * pointer argument, then runs the launch or records it into the stream's capture. */
#ifdef SG_CUDA_HOST
#define SG_LAUNCH(kernel, grid, block, smem, stream, ...)                                          \
    sg_sim::launch_as(true, #kernel, kernel, grid, block, smem, stream, __VA_ARGS__)
/* SG_LAUNCH where the kernel is a variable (a launch helper's parameter): the emulator's reports
 * name it `name` */
#define SG_LAUNCH_NAMED(name, kernel, grid, block, smem, stream, ...)                              \
    sg_sim::launch_as(true, name, kernel, grid, block, smem, stream, __VA_ARGS__)
/* The first statement of every kernel SG_LAUNCH launches (cuda_kernels.h: programmatic
 * dependent launch): the emulator runs kernels one after another, and checks that every thread
 * of such a launch executed it. */
#define SG_PDL_ENTER() sg_sim::pdl_enter()
/* A kernel as a graph kernel node's function (cudaKernelNodeParams.func): the emulator records
 * its parameter types, to call it from the node's kernelParams. */
#define SG_KERNEL_NODE_FUNC(kernel) sg_sim::node_func(#kernel, kernel)
/* A kernel's dynamic shared memory: a declaration statement inside the kernel. */
#define SG_DYNAMIC_SMEM(type, name) type *name = (type *)sg_sim::dynamic_smem()
/* The emulator checks the two pointers of a concatenated operand like pointer arguments. */
template <> struct cuda_sim_arg_ptrs<sg_cat> {
    static int get(const sg_cat &x, const void **out) {
        out[0] = x.p[0];
        out[1] = x.p[1];
        return 2;
    }
};
/* ... and the dropout key's seed and step pointers. */
template <> struct cuda_sim_arg_ptrs<sg_drop> {
    static int get(const sg_drop &d, const void **out) {
        out[0] = d.seed;
        out[1] = d.step;
        return 2;
    }
};
/* ... and a fused convolution's normalisation operands and residual. */
template <> struct cuda_sim_arg_ptrs<sg_conv_fuse> {
    static int get(const sg_conv_fuse &f, const void **out) {
        const void *p[8] = {f.mean, f.rstd, f.gamma, f.beta, f.v, f.res, f.drop.seed, f.drop.step};
        for (int i = 0; i < 8; i++) out[i] = p[i];
        return 8;
    }
};
#else
#define SG_LAUNCH(kernel, grid, block, smem, stream, ...)                                          \
    sg_launch_pdl(kernel, grid, block, smem, stream, __VA_ARGS__)
#define SG_KERNEL_NODE_FUNC(kernel) ((void *)(kernel))
#define SG_LAUNCH_NAMED(name, kernel, grid, block, smem, stream, ...)                              \
    sg_launch_pdl(kernel, grid, block, smem, stream, __VA_ARGS__)
/* Let the next kernel in the stream start (its own SG_PDL_ENTER holds it until this grid has
 * finished), then wait for the previous kernel's completion and memory. No-ops in a launch
 * without the attribute. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define SG_PDL_ENTER()                                                                             \
    asm volatile("griddepcontrol.launch_dependents;\n\tgriddepcontrol.wait;" ::: "memory")
#else
#define SG_PDL_ENTER() ((void)0)
#endif
/* A launch, with the programmatic-serialization attribute when sg_cuda_pdl() is on. */
template <typename... P, typename... A>
static inline void sg_launch_pdl(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem,
                                 cudaStream_t st, A &&...args) {
    if (!sg_cuda_pdl()) {
        kernel<<<grid, block, smem, st>>>(std::forward<A>(args)...);
        return;
    }
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    (void)cudaLaunchKernelEx(&cfg, kernel, std::forward<A>(args)...); /* SG_LAUNCH_CHECK reads it */
}
#define SG_DYNAMIC_SMEM(type, name) extern __shared__ __align__(16) type name[]
#endif

/* ---- checks (host) ---- */

/* After every launch: a bad configuration or a sticky error shows up here, with file:line. */
#define SG_LAUNCH_CHECK(what)                                                                      \
    do {                                                                                           \
        cudaError_t e_ = cudaGetLastError();                                                       \
        if (e_ != cudaSuccess)                                                                     \
            return sg_set_error("%s:%d: launching %s: %s", __FILE__, __LINE__, what,               \
                                cudaGetErrorString(e_));                                           \
    } while (0)

#define SG_ARG_CHECK(cond, ...)                                                                    \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            sg_set_error(__VA_ARGS__);                                                             \
            return SG_ERR;                                                                         \
        }                                                                                          \
    } while (0)

#define SG_DT_CHECK(dt, fn)                                                                        \
    SG_ARG_CHECK((dt) == DT_F32 || (dt) == DT_BF16, "%s: activation dtype %d is not f32/bf16", fn, \
                 (int)(dt))

#define SG_WS_CHECK(need, have, fn)                                                                \
    SG_ARG_CHECK((have) >= (need) && ((need) == 0 || ((uintptr_t)ws % SG_WS_ALIGN) == 0),          \
                 "%s: workspace of %lld bytes (aligned %d) given, %lld needed (sg_ws_*)", fn,      \
                 (long long)(have), (int)((uintptr_t)ws % SG_WS_ALIGN == 0), (long long)(need))

/* Grid for a grid-stride loop over n items, SG_THREADS per block. */
static inline unsigned sg_grid_for(int64_t n) {
    int64_t b = (n + SG_THREADS - 1) / SG_THREADS;
    return (unsigned)(b < 1 ? 1 : b > 65536 ? 65536 : b);
}

/* ---- device helpers ---- */

/* The loop of every 1-D kernel: each thread takes items blockIdx.x * blockDim.x + threadIdx.x,
 * then strides by the whole grid, so any grid (sg_grid_for caps it) covers n items. i is an
 * int64_t declared by the macro. */
#define SG_GRID_STRIDE(i, n)                                                                       \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                      \
         i += (int64_t)gridDim.x * blockDim.x)

/* The hardware's approximate 2^x and 1 / x (ex2.approx.ftz.f32, rcp.approx.ftz.f32): one MUFU
 * instruction each, where CUDA's __expf and __fdividef add range checks for subnormal results
 * and divisors (two to four more instructions) that a sigmoid's 1 + e^-z >= 1 never needs. The
 * host emulation computes the same expressions exactly, each operation rounded once. */
#ifdef SG_CUDA_HOST
static inline float dev_ex2_approx(float x) {
    return exp2f(x);
}
static inline float dev_rcp_approx(float x) {
    return 1.0f / x;
}
#else
__device__ __forceinline__ float dev_ex2_approx(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
__device__ __forceinline__ float dev_rcp_approx(float x) {
    float y;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
#endif

/* n / d for 0 <= n < 2^16 and 1 <= d < 2^16 by one multiply-high (m = ceil(2^32 / d): with
 * e = m d - 2^32 < d, n e < n d < 2^32 keeps floor(n m / 2^32) = floor(n / d); d = 1 apart, whose
 * m does not fit 32 bits): for the fused prologues' channel groups, where an integer division is
 * a software sequence of some twenty instructions per 16-byte chunk of eight elements. */
struct dev_fastdiv {
    uint32_t d, m;
};
__host__ __device__ inline dev_fastdiv dev_fastdiv_of(uint32_t d) {
    return {d, d > 1 ? (uint32_t)((0x100000000ull + d - 1) / d) : 0u};
}
__device__ __forceinline__ uint32_t dev_div(uint32_t n, dev_fastdiv v) {
    return v.d > 1 ? __umulhi(n, v.m) : n;
}

__device__ __forceinline__ float dev_bf16_to_f32(uint16_t h) {
    return __uint_as_float((uint32_t)h << 16);
}
/* Round to nearest even; NaN stays NaN: bit for bit sg_f32_to_bf16. */
__device__ __forceinline__ uint16_t dev_f32_to_bf16(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
__device__ __forceinline__ float dev_ld(const void *p, int64_t i, int dt) {
    return dt == DT_BF16 ? dev_bf16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}
__device__ __forceinline__ void dev_st(void *p, int64_t i, float v, int dt) {
    if (dt == DT_BF16)
        ((uint16_t *)p)[i] = dev_f32_to_bf16(v);
    else
        ((float *)p)[i] = v;
}
/* Two bf16 at p (4-byte aligned): bf16(v) or, accumulating, bf16(__fadd_rn(old, v)) each
 * (dev_st_acc's arithmetic, two channels in one 32-bit store: the tensor-core epilogues).
 * Returns the stored word. */
__device__ __forceinline__ uint32_t dev_st_bf16_pair(uint16_t *p, float v0, float v1, int accum) {
    uint32_t *u = (uint32_t *)p;
    if (accum) {
        const uint32_t o = *u;
        v0 = __fadd_rn(dev_bf16_to_f32((uint16_t)(o & 0xffffu)), v0);
        v1 = __fadd_rn(dev_bf16_to_f32((uint16_t)(o >> 16)), v1);
    }
    const uint32_t w = (uint32_t)dev_f32_to_bf16(v0) | ((uint32_t)dev_f32_to_bf16(v1) << 16);
    *u = w;
    return w;
}
/* Store v, or v + the old value with accum: v is rounded to fp32 first and the add is never
 * fused into a multiply-add (__fadd_rn), so old + result is exactly what the CPU backend's
 * "compute, then add" gives. */
__device__ __forceinline__ void dev_st_acc(void *p, int64_t i, float v, int dt, int accum) {
    if (accum) v = __fadd_rn(dev_ld(p, i, dt), v);
    dev_st(p, i, v, dt);
}

/* The last block of a group finishes a one-launch reduction (the programming guide's memory
 * fence example). Every block of the group writes its partials, then every thread calls this;
 * it returns true in exactly one block, the group's last to arrive of `arrivals`, after every
 * other block's partials are visible to it (read them with __ldcg: not from L1); its arrival
 * wraps the ticket back to 0 for the next launch (atomicInc). A ticket is an unsigned of a
 * __device__ array (0 at module load), back at 0 after every completed launch; the launches that
 * share a ticket array must not run at the same time (stepgraph issues on one stream a process).
 * Only which block finishes depends on timing: it reads every partial and sums them in an order
 * fixed by the shapes, so the bits do not. One integer atomic, no float atomics. sh_last: a
 * __shared__ unsigned of the kernel's. */
__device__ __forceinline__ bool dev_last_block(unsigned *ticket, unsigned arrivals,
                                               unsigned *sh_last) {
    __threadfence(); /* this thread's partials, before the block's arrival */
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0)
        /* the last arrival wraps the ticket back to 0 (old >= arrivals - 1 ? 0 : old + 1) */
        *sh_last = atomicInc(ticket, arrivals - 1) == arrivals - 1;
    __syncthreads();
    const bool last = *sh_last != 0;
    if (last) __threadfence(); /* the others' partials, after their arrivals */
    return last;
}

/* The fused residual epilogue of both tensor-core generations (sg_conv_fuse.res; conv_tc.cu,
 * conv_wgmma.cu): v0, v1 (two channels of the conv's fp32 output, bias
 * added) become what the unfused plan's add computes from the conv's stored bf16 output and the
 * residual's two bf16 values at r (4-byte aligned): res + round(v), in fp32 (add_kernel's
 * order; a sum never fuses into a multiply-add), rounded once more by the store. */
__device__ __forceinline__ void tc_add_res(float &v0, float &v1, const uint16_t *r) {
    const uint32_t rr = *reinterpret_cast<const uint32_t *>(r);
    v0 = __fadd_rn(dev_bf16_to_f32((uint16_t)(rr & 0xffffu)), dev_bf16_to_f32(dev_f32_to_bf16(v0)));
    v1 = __fadd_rn(dev_bf16_to_f32((uint16_t)(rr >> 16)), dev_bf16_to_f32(dev_f32_to_bf16(v1)));
}
/* Typed access: fp32 (float) or bf16 (uint16_t) storage: converted to fp32 on load, rounded once on
 * store */
__device__ __forceinline__ float dev_ld1(const float *p) {
    return *p;
}
__device__ __forceinline__ float dev_ld1(const uint16_t *p) {
    return dev_bf16_to_f32(*p);
}
__device__ __forceinline__ void dev_st1(float *p, float v) {
    *p = v;
}
__device__ __forceinline__ void dev_st1(uint16_t *p, float v) {
    *p = dev_f32_to_bf16(v);
}
/* VEC consecutive elements at p: one 16- or 8-byte access when VEC * sizeof(T) is 16 or 8 (the
 * caller checked the alignment), else VEC single ones. */
template <typename T, int VEC> __device__ __forceinline__ void dev_ldv(float *out, const T *p) {
    if constexpr (VEC * sizeof(T) == 16) {
        const uint4 r = *reinterpret_cast<const uint4 *>(p);
        T e[VEC];
        memcpy(e, &r, 16);
        for (int j = 0; j < VEC; j++) out[j] = dev_ld1(&e[j]);
    } else if constexpr (VEC * sizeof(T) == 8) {
        const uint2 r = *reinterpret_cast<const uint2 *>(p);
        T e[VEC];
        memcpy(e, &r, 8);
        for (int j = 0; j < VEC; j++) out[j] = dev_ld1(&e[j]);
    } else {
        for (int j = 0; j < VEC; j++) out[j] = dev_ld1(p + j);
    }
}
/* store v (accum: added to what is there, in fp32, then rounded once, as dev_st_acc) */
template <typename T, int VEC>
__device__ __forceinline__ void dev_stv(T *p, const float *v, int accum) {
    float w[VEC];
    if (accum) {
        dev_ldv<T, VEC>(w, p);
        for (int j = 0; j < VEC; j++) w[j] = __fadd_rn(w[j], v[j]);
    } else {
        for (int j = 0; j < VEC; j++) w[j] = v[j];
    }
    if constexpr (VEC * sizeof(T) == 16) {
        T e[VEC];
        for (int j = 0; j < VEC; j++) dev_st1(&e[j], w[j]);
        uint4 r;
        memcpy(&r, e, 16);
        *reinterpret_cast<uint4 *>(p) = r;
    } else {
        for (int j = 0; j < VEC; j++) dev_st1(p + j, w[j]);
    }
}
/* Element i of a concatenation (see sg_cat): row = pixel, c = channel of the concatenation. */
__device__ __forceinline__ float dev_cat_ld(const sg_cat x, int64_t row, int c, int dt) {
    return c < x.c[0] ? dev_ld(x.p[0], row * x.c[0] + c, dt)
                      : dev_ld(x.p[1], row * x.c[1] + (c - x.c[0]), dt);
}
__device__ __forceinline__ void dev_cat_st_acc(sg_cat x, int64_t row, int c, float v, int dt,
                                               int accum) {
    if (c < x.c[0])
        dev_st_acc(x.p[0], row * x.c[0] + c, v, dt, accum);
    else
        dev_st_acc(x.p[1], row * x.c[1] + (c - x.c[0]), v, dt, accum);
}

/* Reduce v over the block in a fixed tree order (deterministic): the halves are combined
 * pairwise, SG_THREADS/2 apart, then SG_THREADS/4, ... Every thread of a 1-D block of
 * SG_THREADS threads calls it; sh holds SG_THREADS values of T; all threads get the result.
 * MAX selects fmaxf (float only) instead of +. */
template <typename T, bool MAX> __device__ __forceinline__ T dev_block_reduce(T v, T *sh) {
    const int t = threadIdx.x;
    sh[t] = v;
    __syncthreads();
    for (int s = SG_THREADS / 2; s > 0; s >>= 1) {
        if (t < s) {
            if constexpr (MAX)
                sh[t] = fmaxf(sh[t], sh[t + s]);
            else
                sh[t] += sh[t + s];
        }
        __syncthreads();
    }
    T r = sh[0];
    __syncthreads();
    return r;
}
__device__ __forceinline__ float dev_block_sum(float v, float *sh) {
    return dev_block_reduce<float, false>(v, sh);
}
__device__ __forceinline__ double dev_block_sum_d(double v, double *sh) {
    return dev_block_reduce<double, false>(v, sh);
}
__device__ __forceinline__ float dev_block_max(float v, float *sh) {
    return dev_block_reduce<float, true>(v, sh);
}

/* ---- host helpers shared across families ---- */

/* blas.cu: the context exists and was created for st. */
int cu_blas_check(const sg_blas *blas, cudaStream_t st, const char *fn);
/* blas.cu: one column-major GEMM through cuBLASLt with its pinned algorithm (see sg_blas):
 * C = alpha op(A) op(B) + beta C, op(A) m x k, op(B) k x n, fp32 compute, alpha/beta on the
 * host; with batch > 1 strided-batched (strides sa, sb, sc in elements; ignored for batch 1).
 * adt/bdt/cdt: DT_F32 or DT_BF16. */
int cu_blas_gemm(sg_blas *blas, cudaStream_t st, cublasOperation_t ta, cublasOperation_t tb, int m,
                 int n, int k, float alpha, const void *A, int adt, int lda, int64_t sa,
                 const void *B, int bdt, int ldb, int64_t sb, float beta, void *C, int cdt, int ldc,
                 int64_t sc, int batch);
/* blas.cu: C = op(A) op(B) + bias through cuBLASLt's bias epilogue (bias: fp32, m values, one
 * per row of C, added in fp32 before C's one rounding), not batched. *refused: the library
 * refused the epilogue for this GEMM (then nothing ran, and every call of the same GEMM is
 * refused alike). */
int cu_blas_gemm_bias(sg_blas *blas, cudaStream_t st, cublasOperation_t ta, cublasOperation_t tb,
                      int m, int n, int k, const void *A, int adt, int lda, const void *B, int bdt,
                      int ldb, void *C, int cdt, int ldc, const float *bias, int *refused);

/* linear.cu: GEMM layers on rows x channels (linear layers and 1x1 stride-1 convs).
 * y[rows][Co] = x[rows][Ci] w[Co][Ci]^T + b; x a concatenation along Ci.
 * Scratch rules: sg_ws_gemm_fwd / _bwd_data / _bwd_weight. */
int cu_gemm_fwd(cudaStream_t st, sg_blas *blas, void *y, sg_cat x, const void *w, const float *b,
                int64_t rows, int Ci, int Co, int dt, void *ws, int64_t ws_bytes);
int cu_gemm_bwd_data(cudaStream_t st, sg_blas *blas, sg_cat dx, const void *dy, const void *w,
                     int64_t rows, int Ci, int Co, int dt, int accum, void *ws, int64_t ws_bytes);
int cu_gemm_bwd_weight(cudaStream_t st, sg_blas *blas, float *dw, float *db, const void *dy,
                       sg_cat x, int64_t rows, int Ci, int Co, int dt, int accum, void *ws,
                       int64_t ws_bytes);
/* The fused attention's fp32 form (attention_f32.cu; cuda_attention_fused_* hand fp32 to it):
 * heads of 32 or 64 channels, L <= 256; the backward's workspace is sg_ws_attention_bwd's
 * (rowdot [N][heads][L] fp32 at its start). */
int cu_attention_f32_ok(int L, int C, int heads);
int cu_attention_f32_fwd(cudaStream_t st, float *y, float *P, const float *qkv, int N, int L, int C,
                         int heads);
int cu_attention_f32_bwd(cudaStream_t st, float *dqkv, const float *dy, const float *qkv,
                         const float *P, int N, int L, int C, int heads, int accum, void *ws,
                         int64_t ws_bytes);

/* conv_wino.cu: the fp32 3x3 stride-1 padding-1 passes as Winograd
 * F(2x2, 3x3) (its file comment). cu_conv_wino_takes: whether the switch
 * (cuda_conv_wino_enable) and the shape send a CUDA-core pass there. cu_conv_wino: out[N,H,W,Cn]
 * = the correlation of in[N,H,W,Cr] with the filters (+ bias, may be NULL; + the old value
 * under accum); dgrad 0: w[Cn][3][3][Cr] as given (the forward), 1: flipped and transposed from
 * w[Cr][3][3][Cn] (the data gradient). fp32 operands; conv.cu has checked the arguments. */
int cu_conv_wino_takes(int dt, int K, int S, int pad);
int cu_conv_wino(cudaStream_t st, sg_cat out, sg_cat in, const float *w, const float *bias, int N,
                 int H, int W, int Cr, int Cn, int dgrad, int accum);
/* ... and the weight gradient's chunk partials part[chunk][Co][3][3][Ci] (the direct tiles'
 * layout: cu_wgrad_finish sums them) from dy[N,H,W,Co] and x (fp32), over
 * cu_conv_wino_wgrad_chunks(..., most) chunks of the 2x2 tiles (at most `most`, the workspace's).
 */
int64_t cu_conv_wino_wgrad_chunks(int N, int H, int W, int Ci, int Co, int64_t most);
int cu_conv_wino_wgrad(cudaStream_t st, float *part, const float *dy, sg_cat x, int N, int H, int W,
                       int Ci, int Co, int64_t chunks);
/* conv_tc.cu: the tensor-core convolutions behind conv.cu's launchers (SG_CONV_PATH_TENSOR_CORE:
 * bf16 activations and bf16 weights wb, conv.cu has checked the arguments; fuse: NULL, or a
 * prologue to compute, and/or the residual to add). Forward and backward data take no scratch;
 * backward weight writes `chunks` fp32 partials [chunk][Co][K][K][Ci] of chunk_len output pixels
 * each into part. */
int cu_conv_tc_fwd(cudaStream_t st, void *y, sg_cat x, const uint16_t *wb, const float *b,
                   const sg_conv_fuse *fuse, int N, int H, int W, int Ci, int Co, int K, int S,
                   int pad);
/* The folded 1x1 shortcut of cu_conv_tc_fwd_sc (conv2d_sc): its input x [N,H,W,Cin] (at the
 * conv's pixels: stride 1), bf16 weights w [Co][Cin] and bias b [Co] (may be NULL). Zeroed:
 * none. No padding bytes (a kernel argument). */
typedef struct {
    sg_cat x;
    const uint16_t *w;
    const float *b;
} sg_tc_shortcut;
/* y = conv(h) + b + x ws^T + bs in one implicit GEMM (stride 1; the conv's and the shortcut's
 * operands on the tensor-core path, checked by conv.cu); fuse: NULL or the prologue (of h). */
int cu_conv_tc_fwd_sc(cudaStream_t st, void *y, sg_cat h, const uint16_t *wb, const float *b,
                      const sg_conv_fuse *fuse, sg_tc_shortcut sc, int N, int H, int W, int Ci,
                      int Co, int K, int pad);
int cu_conv_tc_bwd_data(cudaStream_t st, sg_cat dx, const void *dy, const uint16_t *wb,
                        const sg_norm_bwd_fuse *nb, int N, int H, int W, int Ci, int Co, int K,
                        int S, int pad, int accum);
/* conv_tc.cu: the weight gradient's chunks on the tensor-core kernels, at most `most` (the
 * workspace rule's), for an M x N GEMM (Co x K K Ci; the upsample conv's Co x 4 Ci in 4 slices a
 * chunk) over P pixels: a function of the shapes alone. */
int64_t cu_conv_tc_wgrad_chunks(int64_t M, int64_t N, int slices, int64_t P, int64_t most);
int cu_conv_tc_bwd_weight(cudaStream_t st, float *part, const void *dy, sg_cat x,
                          const sg_conv_fuse *fuse, int N, int H, int W, int Ci, int Co, int K,
                          int S, int pad, int64_t chunks, int64_t chunk_len);
/* conv_tc.cu: upconv2d's tensor-core GEMMs behind conv.cu's launchers (bf16, Ci and Co multiples
 * of 8, 16-byte aligned operands, checked there). wf: the folded bf16 weights [4][Co][2][2][Ci]
 * (conv.cu's upconv_fold_kernel). The weight gradient writes `chunks` fp32 partials
 * [chunk][4][Co][2][2][Ci] of chunk_len low-res pixels each into part. */
int cu_upconv_tc_fwd(cudaStream_t st, uint16_t *y, const uint16_t *x, const uint16_t *wf,
                     const float *b, int N, int H, int W, int Ci, int Co);
int cu_upconv_tc_bwd_data(cudaStream_t st, uint16_t *dx, const uint16_t *dy, const uint16_t *wf,
                          int N, int H, int W, int Ci, int Co, int accum);
int cu_upconv_tc_bwd_weight(cudaStream_t st, float *part, const uint16_t *dy, const uint16_t *x,
                            int N, int H, int W, int Ci, int Co, int64_t chunks, int64_t chunk_len);

/* the fusion as the tensor-core kernels (conv_tc.cu, conv_wgmma.cu) take it: by value, zeroed for
 * none, field by field (a struct copy need not copy padding, and there is none to copy) */
static_assert(sizeof(sg_conv_fuse) == 7 * sizeof(void *) + sizeof(sg_drop) + 6 * sizeof(int),
              "sg_conv_fuse must have no padding bytes: a launch's argument bytes must be "
              "exactly its values (graph capture, the host emulation's replay check)");
static_assert(sizeof(sg_norm_bwd_fuse) ==
                  sizeof(sg_cat) + 6 * sizeof(void *) + sizeof(sg_drop) + 4 * sizeof(int),
              "sg_norm_bwd_fuse must have no padding bytes (a kernel argument, as above)");
static inline sg_conv_fuse cu_conv_fuse_arg(const sg_conv_fuse *fuse) {
    sg_conv_fuse f;
    memset(&f, 0, sizeof f);
    if (fuse && fuse->norm) {
        f.mean = fuse->mean, f.rstd = fuse->rstd, f.gamma = fuse->gamma, f.beta = fuse->beta;
        f.v = fuse->v, f.drop = fuse->drop, f.norm = 1, f.G = fuse->G, f.act = fuse->act;
    }
    if (fuse)
        f.res = fuse->res, f.stats = fuse->stats, f.stats_ld = fuse->stats_ld, f.halo = fuse->halo;
    return f;
}
/* conv.cu: the checks of a fusion's operands (sg_conv_fuse) for a convolution on `path`: a
 * prologue needs the bf16 tensor-core path and its normalisation's operands, a residual 4-byte
 * alignment. Shared by conv.cu's launchers and conv_wgmma.cu's. */
int cu_conv_fuse_check(const char *fn, const sg_conv_fuse *f, sg_conv_path path, int N, int Ci,
                       int dt);

/* elementwise.cu: out[b][c] (odt) (+)= sum over r < R of in[b][r][c] (idt), b < nb, c < C, in
 * a fixed order: row chunks of SG_WS_COLSUM_ROWS, then the chunks in order.
 * ws: sg_ws_colsum(nb, R, C) bytes. */
int cu_col_sum(cudaStream_t st, void *out, int odt, const void *in, int idt, int nb, int64_t R,
               int C, int accum, void *ws);
/* A weight gradient's finish, one launch: dw[nw] (fp32; accum: added) = the sum over `chunks`
 * chunks, in order, of part[chunk][nw] (fp32), and, where db is not NULL, db[C] (fp32, the same
 * accum) = cu_col_sum's column sums of dy[R][C] (dt), the same bits (ws: its
 * sg_ws_colsum(1, R, C) bytes). */
int cu_wgrad_finish(cudaStream_t st, float *dw, const float *part, int64_t nw, int chunks,
                    int accum, float *db, const void *dy, int dt, int64_t R, int C, void *ws);
/* ... after a library wrote dw in bf16 (cuDNN's +dw_bf16 backward-filter): dw[nw] (fp32) = or
 * (accum) += dwb widened, bit for bit cuda_copy's, and db as above, in one launch */
int cu_widen_finish(cudaStream_t st, float *dw, const uint16_t *dwb, int64_t nw, int accum,
                    float *db, const void *dy, int dt, int64_t R, int C, void *ws);

/* The output-parity class z = rh * S + rw of a convolution's backward data pass (the
 * tensor-core kernels: conv_tc.cu, conv_wgmma.cu): the input pixels ih = ih1 + S i (i < Hc)
 * receive the taps kh = rh + S th (th < nth) from output row i + ohoff - th; likewise in w. */
struct sg_conv_class {
    int ih1, iw1, Hc, Wc, nth, ntw, ohoff, owoff, rh, rw;
};
__device__ __forceinline__ sg_conv_class sg_conv_class_of(int z, int H, int W, int K, int S,
                                                          int pad) {
    sg_conv_class k;
    k.rh = z / S, k.rw = z % S;
    k.ih1 = ((k.rh - pad) % S + S) % S, k.iw1 = ((k.rw - pad) % S + S) % S;
    k.Hc = k.ih1 < H ? (H - k.ih1 + S - 1) / S : 0;
    k.Wc = k.iw1 < W ? (W - k.iw1 + S - 1) / S : 0;
    k.nth = k.rh < K ? (K - k.rh + S - 1) / S : 0;
    k.ntw = k.rw < K ? (K - k.rw + S - 1) / S : 0;
    k.ohoff = (k.ih1 + pad - k.rh) / S, k.owoff = (k.iw1 + pad - k.rw) / S;
    return k;
}

/* Before every launch with dynamic shared memory: the kernel's limit raised where it needs it,
 * never lowered. A block's static shared memory (ptxas's, cudaFuncGetAttributes) counts against
 * the same 48 KiB default: a kernel with 20 KiB of static arrays launches with at most 28 KiB of
 * dynamic shared memory unless its cudaFuncAttributeMaxDynamicSharedMemorySize says more. So the
 * attribute is set to `bytes` where static + bytes passes 48 KiB and `bytes` passes what was set
 * before (a function attribute, no stream work: allowed during capture); a lower value is never
 * set, so a graph captured with a larger launch of the same kernel keeps its room. The first
 * call for a kernel asks its attributes (outside a capture: the eager warm-up comes first), kept
 * in a table of each file's (128 kernels; conv_tc.cu has the most, 60; past it, every call sets
 * the attribute as asked). The error names the kernel and both sizes. */
struct cuda_smem_slot {
    const void *kernel;
    int static_bytes, attr;
};
static inline cuda_smem_slot *cuda_smem_slot_of(const void *kernel) {
    static cuda_smem_slot slots[128];
    static int n;
    for (int i = 0; i < n; i++)
        if (slots[i].kernel == kernel) return &slots[i];
    if (n == (int)(sizeof slots / sizeof slots[0])) return nullptr;
    cudaFuncAttributes fa;
    if (cudaFuncGetAttributes(&fa, kernel) != cudaSuccess) {
        cudaGetLastError();
        return nullptr;
    }
    slots[n] = cuda_smem_slot{kernel, (int)fa.sharedSizeBytes, 0};
    return &slots[n++];
}
template <class F> static int cuda_smem_attr(F *kernel, int bytes, const char *name) {
    cuda_smem_slot *sl = cuda_smem_slot_of((const void *)kernel);
    const int st = sl ? sl->static_bytes : 0;
    if (sl && (st + bytes <= 48 * 1024 || bytes <= sl->attr)) return SG_OK;
    cudaError_t e =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    if (e != cudaSuccess)
        return sg_set_error("%s: %d bytes of dynamic shared memory (and %d of static): %s", name,
                            bytes, st, cudaGetErrorString(e));
    if (sl) sl->attr = bytes;
    return SG_OK;
}

/* The device's opt-in limit of a block's dynamic shared memory (bytes), asked once per file
 * (0 where it cannot be asked: the caller's smaller kernel then). */
static inline int cuda_smem_optin(void) {
    static int bytes = -1;
    if (bytes < 0) {
        int dev = 0, v = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) !=
                cudaSuccess) {
            cudaGetLastError();
            v = 0;
        }
        bytes = v;
    }
    return bytes;
}

/* conv.cu: upconv2d's folded weights wf[4][Co][2][2][Ci] in bf16 into ws (the tensor-core
 * path's fold: cuda_upconv2d_fwd's, the same bits), for conv_wgmma.cu's forward. */
int cu_upconv_fold_bf16(cudaStream_t st, void *ws, const float *w, int Ci, int Co);
/* conv.cu: upconv2d's weight gradient from the partials part[chunks][4][Co][2][2][Ci] (the sum
 * over chunks in order, then over the classes into each 3x3 tap; + dw when accumulating), for
 * both generations' weight gradients. */
int cu_upconv_fold_back(cudaStream_t st, float *dw, const float *part, int Ci, int Co, int chunks,
                        int accum);

/* Does a tensor-core forward with fuse f run on the resident halo where it fits (conv_tc.cu;
 * sg_conv_fuse.halo), for both generations' forwards. */
int cu_tc_fwd_on_halo(const sg_conv_fuse &f);

#endif
