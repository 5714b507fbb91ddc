/* hopper_probes.cuh — the Hopper probes: kernels built only on kernels/cuda/hopper.cuh, and what
 * they must produce, written from the documents (the PTX ISA's layouts, the driver API's tensor
 * maps, the programming guide's swizzle description) independently of any emulator. The same
 * source runs twice: on the host emulation in every CI run (cuda_sim_selftest, through
 * tests/cuda_host/test_cuda_sim.cpp, which adds the emulation's own rule checks), and on a
 * Hopper GPU (hopper_gpu, tests/test_hopper_gpu.cu, label gpu): a probe that passes on the
 * emulation and fails on the GPU points at the reading of the documents to correct, in the
 * emulation and in hopper.cuh's comments alike.
 *
 * The includer defines SG_LAUNCH(kernel, grid, block, smem, stream, args...) and may define
 * SG_DYNAMIC_SMEM; the drivers (probe_*) return the number of failed checks and print each. */
#ifndef SG_HOPPER_PROBES_CUH
#define SG_HOPPER_PROBES_CUH

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <vector>

#include "kernels/cuda/hopper.cuh"

#ifndef SG_DYNAMIC_SMEM
#define SG_DYNAMIC_SMEM(type, name) extern __shared__ __align__(16) type name[]
#endif

/* ---- host helpers: data and tensor maps ---- */

static uint32_t probe_rng = 0x9e3779b9u;
static inline uint32_t probe_rand(void) {
    probe_rng ^= probe_rng << 13;
    probe_rng ^= probe_rng >> 17;
    probe_rng ^= probe_rng << 5;
    return probe_rng;
}
/* a random bf16 that is never zero: +-(1 + m/128) * 2^e, e in [-3, 1] */
static inline uint16_t probe_bf16(void) {
    const uint32_t r = probe_rand(), e = 127 - 3 + (r >> 1) % 5;
    return (uint16_t)(((r & 1u) << 15) | (e << 7) | ((r >> 8) & 0x7fu));
}
static inline float probe_f32(void) {
    return ((float)(probe_rand() % 2001) - 1000.0f) / 256.0f;
}
static inline float probe_bf16f(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* A bf16 tensor in device memory with its host copy (random, never zero). */
struct probe_tensor {
    uint16_t *d = NULL;
    std::vector<uint16_t> h;
    void alloc(size_t n) {
        h.resize(n);
        for (size_t i = 0; i < n; i++) h[i] = probe_bf16();
        cudaMalloc((void **)&d, n * 2);
        cudaMemcpy(d, h.data(), n * 2, cudaMemcpyHostToDevice);
    }
    void upload() {
        cudaMemcpy(d, h.data(), h.size() * 2, cudaMemcpyHostToDevice);
    }
    void release() {
        cudaFree(d);
        d = NULL;
    }
};

/* a row-major rows x cols bf16 matrix with a row pitch of row_bytes, boxes of box_r x box_c */
static inline CUresult probe_encode2d(CUtensorMap *m, const void *g, uint64_t cols, uint64_t rows,
                                      uint64_t row_bytes, uint32_t box_c, uint32_t box_r,
                                      CUtensorMapSwizzle sw) {
    const cuuint64_t dim[2] = {cols, rows}, stride[1] = {row_bytes};
    const cuuint32_t box[2] = {box_c, box_r}, es[2] = {1, 1};
    return sg_tensor_map_encode_tiled(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)g, dim,
                                      stride, box, es, sw);
}

static inline int probe_sync(cudaStream_t st, const char *what) {
    cudaError_t e = cudaStreamSynchronize(st);
    const cudaError_t l = cudaGetLastError();
    if (e == cudaSuccess) e = l;
    if (e == cudaSuccess) return 0;
    fprintf(stderr, "FAIL %s: %s\n", what, cudaGetErrorString(e));
    return 1;
}

/* ---- the copy engine ---- */

/* The swizzled position of byte o of a dense box in shared memory (the box starts at a multiple
 * of the pattern repeat): "16-byte chunks swizzled within a span of 32/64/128 bytes", the chunk
 * index within its span XORed with the 128-byte line index modulo the span's chunk count. */
__host__ __device__ static inline size_t swz_pos(size_t o, int span) {
    if (!span) return o;
    const size_t chunk = (o % (size_t)span) / 16, line = o / 128;
    const size_t chunks = (size_t)span / 16;
    return o - o % (size_t)span + ((chunk ^ (line % chunks)) * 16) + o % 16;
}

/* Thread 0 copies one box (dims 2..5, coordinates c) into a 1024-aligned buffer of dynamic
 * shared memory, expecting `expect` bytes; all threads wait (early: read before the wait), then
 * copy the buffer's `bytes` bytes to out. */
struct coords5 {
    int c[5];
};
__global__ void tma_box_kernel(uint8_t *out, const __grid_constant__ CUtensorMap map, int dims,
                               coords5 c, unsigned bytes, unsigned expect, int early) {
    SG_DYNAMIC_SMEM(uint8_t, raw);
    uint8_t *box = sg_smem_align(raw, 1024);
    __shared__ uint64_t bar;
    const int t = threadIdx.x;
    if (t == 0) {
        sg_mbar_init(&bar, 1);
        sg_fence_mbar_init();
    }
    __syncthreads();
    if (t == 0) {
        sg_mbar_arrive_expect_tx(&bar, expect);
        if (dims == 2) sg_tma_load_2d(box, &map, &bar, c.c[0], c.c[1]);
        if (dims == 3) sg_tma_load_3d(box, &map, &bar, c.c[0], c.c[1], c.c[2]);
        if (dims == 4) sg_tma_load_4d(box, &map, &bar, c.c[0], c.c[1], c.c[2], c.c[3]);
        if (dims == 5) sg_tma_load_5d(box, &map, &bar, c.c[0], c.c[1], c.c[2], c.c[3], c.c[4]);
    }
    if (!early) sg_mbar_wait(&bar, 0);
    for (unsigned i = t; i < bytes; i += blockDim.x) out[i] = box[i];
    if (early) { /* every thread reads before any waits (a wait lands the copy) */
        __syncthreads();
        sg_mbar_wait(&bar, 0);
    }
}

/* The box a tile-mode copy writes, dense (dimension 0 innermost), then swizzled: element
 * (j0..j4) is tensor element (c_i + j_i * es_i) (es_0 ignored), zero outside the tensor. */
static inline std::vector<uint8_t> expected_box(const std::vector<uint16_t> &g, int rank,
                                                const uint64_t *dim, const uint64_t *stride_el,
                                                const uint32_t *box, const uint32_t *es,
                                                const int *c, int span) {
    uint64_t B[5] = {1, 1, 1, 1, 1}, n = 1;
    for (int i = 0; i < rank; i++) {
        B[i] = i == 0 ? box[0] : (box[i] + es[i] - 1) / es[i];
        n *= B[i];
    }
    std::vector<uint8_t> dense(n * 2), out(n * 2);
    for (uint64_t e = 0; e < n; e++) {
        uint64_t rest = e, off = 0;
        bool in = true;
        for (int i = 0; i < rank; i++) {
            const int64_t x = c[i] + (int64_t)(rest % B[i]) * (i == 0 ? 1 : es[i]);
            rest /= B[i];
            if (x < 0 || (uint64_t)x >= dim[i]) in = false;
            off += (uint64_t)x * stride_el[i];
        }
        const uint16_t v = in ? g[off] : 0;
        memcpy(&dense[e * 2], &v, 2);
    }
    for (size_t o = 0; o < dense.size(); o++) out[swz_pos(o, span)] = dense[o];
    return out;
}

/* Every swizzle, 2D boxes inside, across the far and the near corner (negative coordinates) of
 * a 40 x 100 bf16 matrix with a row pitch of 128; then 3D, 4D and 5D boxes with element strides,
 * partly outside. Byte for byte. */
static inline int probe_tma_boxes(cudaStream_t st) {
    int fails = 0;
    probe_tensor g;
    g.alloc(40 * 128);
    uint8_t *dout;
    cudaMalloc((void **)&dout, 48 << 10);
    std::vector<uint8_t> got(48 << 10);
    /* the largest box is 2 KiB, plus the 1024-byte alignment; under the 48 KiB that static
     * (the barrier) and dynamic shared memory share without an opt-in: 48 KiB of dynamic alone
     * was refused at launch on the first GPU ("invalid argument"; the emulation checks the
     * dynamic part only: a kernel's static size is not known to it) */
    const size_t smem = 16 << 10;
    /* 128B first: the swizzle the wgmma probes' copies use (they passed on the first GPU run,
     * where a launch of this kernel, swizzle NONE first, met "an illegal instruction"): the
     * first failing case of the four narrows the cause */
    const CUtensorMapSwizzle sws[4] = {CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_SWIZZLE_64B,
                                       CU_TENSOR_MAP_SWIZZLE_32B, CU_TENSOR_MAP_SWIZZLE_NONE};
    const int spans[4] = {128, 64, 32, 0};
    /* the innermost coordinates at multiples of 8 elements (16 bytes): at 60 the first GPU
     * faulted ("an illegal instruction"; at 1, 2, 4, 36, 90, -3, -4 too, at 0, 8, ..., 88, -8,
     * -16 not: bench/results/2026-11-28-nvidia-h200-run-3.md); the emulation now refuses such a
     * copy (tests/cuda_host/sim_hopper.cpp) */
    const int corners[3][2] = {{0, 0}, {88, 30}, {-8, -3}};
    for (int s = 0; s < 4; s++)
        for (int k = 0; k < 3; k++) {
            const uint32_t box[2] = {spans[s] ? (uint32_t)spans[s] / 2 : 24u, 16u}, es[2] = {1, 1};
            const uint64_t dim[2] = {100, 40}, stride_el[2] = {1, 128};
            CUtensorMap map;
            if (probe_encode2d(&map, g.d, 100, 40, 256, box[0], box[1], sws[s]) != CUDA_SUCCESS) {
                fprintf(stderr, "FAIL cuTensorMapEncodeTiled (swizzle %d) refused\n", spans[s]);
                fails++;
                continue;
            }
            const unsigned bytes = box[0] * box[1] * 2;
            const coords5 c = {{corners[k][0], corners[k][1], 0, 0, 0}};
            cudaMemset(dout, 0xAB, bytes);
            SG_LAUNCH(tma_box_kernel, 1, 32, smem, st, dout, map, 2, c, bytes, bytes, 0);
            char what[96];
            snprintf(what, sizeof what, "TMA 2D (swizzle %d, box %ux%u at %d,%d)", spans[s], box[0],
                     box[1], c.c[0], c.c[1]);
            if (probe_sync(st, what)) return fails + 1;
            cudaMemcpy(got.data(), dout, bytes, cudaMemcpyDeviceToHost);
            const std::vector<uint8_t> want =
                expected_box(g.h, 2, dim, stride_el, box, es, c.c, spans[s]);
            int bad = 0;
            for (unsigned i = 0; i < bytes; i++) bad += got[i] != want[i];
            if (bad) {
                fprintf(stderr, "FAIL TMA 2D (swizzle %d, box at %d,%d): %d of %u bytes wrong\n",
                        spans[s], c.c[0], c.c[1], bad, bytes);
                fails++;
            }
        }
    struct nd_case {
        int rank;
        uint64_t dim[5];
        uint32_t box[5], es[5];
        int c[5];
        CUtensorMapSwizzle sw;
        int span;
    } cases[] = {
        {3, {32, 7, 5}, {32, 4, 3}, {1, 2, 1}, {0, 5, -1}, CU_TENSOR_MAP_SWIZZLE_64B, 64},
        {4,
         {16, 10, 9, 3},
         {16, 8, 4, 2},
         {1, 2, 1, 1},
         {0, -1, 7, 1},
         CU_TENSOR_MAP_SWIZZLE_32B,
         32},
        {4,
         {16, 10, 9, 3},
         {16, 8, 4, 2},
         {3, 3, 1, 2},
         {0, 1, 0, 0},
         CU_TENSOR_MAP_SWIZZLE_NONE,
         0},
        {5,
         {8, 3, 3, 2, 2},
         {8, 3, 3, 2, 2},
         {1, 1, 1, 1, 1},
         {0, -1, 0, 1, 1},
         CU_TENSOR_MAP_SWIZZLE_NONE,
         0},
    };
    for (const nd_case &k : cases) {
        uint64_t n = 1, stride_el[5];
        cuuint64_t strides[4];
        for (int i = 0; i < k.rank; i++) {
            stride_el[i] = n;
            n *= k.dim[i];
            if (i + 1 < k.rank) strides[i] = n * 2;
        }
        probe_tensor t;
        t.alloc(n);
        CUtensorMap map;
        if (sg_tensor_map_encode_tiled(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, k.rank, t.d, k.dim,
                                       strides, k.box, k.es, k.sw) != CUDA_SUCCESS) {
            fprintf(stderr, "FAIL cuTensorMapEncodeTiled rank %d refused\n", k.rank);
            fails++;
            t.release();
            continue;
        }
        unsigned bytes = 2;
        for (int i = 0; i < k.rank; i++) bytes *= i ? (k.box[i] + k.es[i] - 1) / k.es[i] : k.box[0];
        coords5 c = {{0, 0, 0, 0, 0}};
        for (int i = 0; i < k.rank; i++) c.c[i] = k.c[i];
        cudaMemset(dout, 0xAB, bytes);
        SG_LAUNCH(tma_box_kernel, 1, 64, smem, st, dout, map, k.rank, c, bytes, bytes, 0);
        char what[64];
        snprintf(what, sizeof what, "TMA %dD (swizzle %d)", k.rank, k.span);
        if (probe_sync(st, what)) return fails + 1;
        cudaMemcpy(got.data(), dout, bytes, cudaMemcpyDeviceToHost);
        const std::vector<uint8_t> want =
            expected_box(t.h, k.rank, k.dim, stride_el, k.box, k.es, k.c, k.span);
        int bad = 0;
        for (unsigned i = 0; i < bytes; i++) bad += got[i] != want[i];
        if (bad) {
            fprintf(stderr, "FAIL TMA %dD (swizzle %d): %d of %u bytes wrong\n", k.rank, k.span,
                    bad, bytes);
            fails++;
        }
        t.release();
    }
    g.release();
    cudaFree(dout);
    return fails;
}

/* ---- mbarrier ---- */

/* Phases and parities, 64 threads; out[i] records what each step saw. */
__global__ void mbar_phase_kernel(int *out) {
    __shared__ uint64_t bar;
    const int t = threadIdx.x;
    if (t == 0) {
        sg_mbar_init(&bar, 2);
        sg_fence_mbar_init();
    }
    __syncthreads();
    if (t == 0) {
        out[0] = sg_mbar_test_wait(&bar, 0); /* phase 0 runs: not complete */
        out[1] = sg_mbar_test_wait(&bar, 1); /* parity 1: the phase before, complete */
        sg_mbar_arrive(&bar);
        out[2] = sg_mbar_test_wait(&bar, 0); /* 1 of 2 arrivals */
    }
    __syncthreads();
    if (t == 1) {
        sg_mbar_arrive(&bar);
        out[3] = sg_mbar_test_wait(&bar, 0); /* phase 0 complete */
        out[4] = sg_mbar_test_wait(&bar, 1); /* phase 1 runs */
    }
    __syncthreads();
    /* phase 1: 62 threads wait for it while threads 0 and 1 complete it */
    if (t >= 2) {
        sg_mbar_wait(&bar, 1);
        out[8 + t] = 1;
    } else {
        sg_mbar_arrive(&bar);
    }
    __syncthreads();
    if (t == 0) {
        out[5] = sg_mbar_test_wait(&bar, 0); /* phase 2 runs */
        out[6] = sg_mbar_try_wait(&bar, 1);  /* phase 1 complete */
        sg_mbar_inval(&bar);
        sg_mbar_init(&bar, 1); /* after inval the 8 bytes may hold a new mbarrier */
        sg_mbar_arrive(&bar);
        out[7] = sg_mbar_test_wait(&bar, 0);
    }
}

static inline int probe_mbar_phases(cudaStream_t st) {
    int *dout, hout[72];
    cudaMalloc((void **)&dout, sizeof hout);
    cudaMemset(dout, 0xFF, sizeof hout);
    SG_LAUNCH(mbar_phase_kernel, 1, 64, 0, st, dout);
    if (probe_sync(st, "mbarrier phases")) return 1;
    cudaMemcpy(hout, dout, sizeof hout, cudaMemcpyDeviceToHost);
    cudaFree(dout);
    const int want[8] = {0, 1, 0, 1, 0, 0, 1, 1};
    int bad = 0;
    for (int i = 0; i < 8; i++) bad += hout[i] != want[i];
    for (int t = 2; t < 64; t++) bad += hout[8 + t] != 1;
    if (!bad) return 0;
    fprintf(stderr,
            "FAIL mbarrier phases/parities: %d of 70 observations wrong (%d %d %d %d %d %d %d "
            "%d, want 0 1 0 1 0 0 1 1)\n",
            bad, hout[0], hout[1], hout[2], hout[3], hout[4], hout[5], hout[6], hout[7]);
    return 1;
}

/* ---- wgmma ---- */

/* Thread t of a warpgroup holds D[row][col] in accumulator register i (the PTX ISA's figure for
 * the m64nNk16 D fragment: each warp 16 rows; d[4j..4j+3] = rows g, g, g + 8, g + 8, columns
 * 8j + 2q, 8j + 2q + 1, with g = lane / 4, q = lane % 4). */
__host__ __device__ static inline int acc_row(int t, int i) {
    const int lane = t % 32, warp = t / 32;
    return 16 * warp + lane / 4 + (i % 4 >= 2 ? 8 : 0);
}
__host__ __device__ static inline int acc_col(int t, int i) {
    return 8 * (i / 4) + 2 * (t % 32 % 4) + i % 2;
}

/* D (64 x N) = A (64 x 64) * B (64 x N) + (first_scale ? C : 0), both operands brought in by
 * the copy engine with the 128B swizzle, K in 4 steps of 16 chained on one accumulator. A:
 * K-major (TA 0: rows of 64 k) or MN-major (TA 1: rows of 64 m per k); B: K-major (TB 0: N rows
 * of 64 k, one box) or MN-major (TB 1: 64 rows of N per k, N / 64 boxes of 64 columns). */
template <int N, int TA, int TB>
__global__ void wg_tma_kernel(float *out, const float *cinit,
                              const __grid_constant__ CUtensorMap amap,
                              const __grid_constant__ CUtensorMap bmap, int first_scale) {
    SG_DYNAMIC_SMEM(uint8_t, raw);
    uint8_t *As = sg_smem_align(raw, 1024), *Bs = As + 8192;
    /* in dynamic shared memory: a template kernel's __shared__ variables are not shared memory
     * under the emulation (g++ ignores the section attribute of template statics) */
    uint64_t *bar = (uint64_t *)(Bs + N * 128);
    const int t = threadIdx.x;
    if (t == 0) {
        sg_mbar_init(bar, 1);
        sg_fence_mbar_init();
    }
    __syncthreads();
    if (t == 0) {
        sg_mbar_arrive_expect_tx(bar, 8192 + N * 128);
        sg_tma_load_2d(As, &amap, bar, 0, 0);
        if (!TB)
            sg_tma_load_2d(Bs, &bmap, bar, 0, 0);
        else
            for (int j = 0; j < N / 64; j++) sg_tma_load_2d(Bs + 8192 * j, &bmap, bar, 64 * j, 0);
    }
    float d[N / 2];
#pragma unroll
    for (int i = 0; i < N / 2; i++) d[i] = cinit[acc_row(t, i) * N + acc_col(t, i)];
    sg_mbar_wait(bar, 0);
    sg_wgmma_fence_operand(d);
    sg_wgmma_fence();
#pragma unroll
    for (int s = 0; s < 4; s++) {
        /* K-major: the k step is 32 bytes along the 128-byte row; MN-major: 16 rows of 128 */
        const uint64_t da = TA ? sg_wgmma_desc(As + 2048 * s, 0, 1024, SG_SWIZZLE_128B)
                               : sg_wgmma_desc(As + 32 * s, 0, 1024, SG_SWIZZLE_128B);
        const uint64_t db = TB ? sg_wgmma_desc(Bs + 2048 * s, 8192, 1024, SG_SWIZZLE_128B)
                               : sg_wgmma_desc(Bs + 32 * s, 0, 1024, SG_SWIZZLE_128B);
        sg_wgmma_ss<N, TA, TB>(d, da, db, s == 0 ? first_scale : 1);
    }
    sg_wgmma_commit();
    sg_wgmma_wait(0);
    sg_wgmma_fence_operand(d);
#pragma unroll
    for (int i = 0; i < N / 2; i++) out[t * (N / 2) + i] = d[i];
}

/* the reference: D = A (64 x K) * B (K x N) + (scale ? C : 0); worst normalised error */
static inline int check_mma(const char *what, const float *got, int N, int K,
                            const std::vector<uint16_t> &A, const std::vector<uint16_t> &B,
                            const std::vector<float> &C, int scale, double *worst) {
    int bad = 0;
    *worst = 0;
    for (int t = 0; t < 128; t++)
        for (int i = 0; i < N / 2; i++) {
            const int m = acc_row(t, i), n = acc_col(t, i);
            double s = scale ? C[m * N + n] : 0.0, mag = fabs(s);
            for (int k = 0; k < K; k++) {
                const double p =
                    (double)probe_bf16f(A[m * K + k]) * (double)probe_bf16f(B[k * N + n]);
                s += p;
                mag += fabs(p);
            }
            const double err = fabs((double)got[t * (N / 2) + i] - s) / (mag > 0 ? mag : 1);
            if (!(err <= 1e-5)) bad++; /* K / 16 fp32 roundings */
            if (!(err <= *worst)) *worst = err;
        }
    if (bad)
        fprintf(stderr, "FAIL %s: %d of %d elements wrong (worst %g)\n", what, bad, 64 * N, *worst);
    return bad;
}

/* every transpose pair (MN-major B only where N is a multiple of 64), accumulate and overwrite */
template <int N> static int probe_wgmma_tma(cudaStream_t st) {
    int fails = 0;
    float *dout, *dc;
    cudaMalloc((void **)&dout, 64 * N * 4);
    cudaMalloc((void **)&dc, 64 * N * 4);
    probe_tensor a, b; /* A as M x K (ta 0) or K x M (ta 1); B as N x K (tb 0) or K x N (tb 1) */
    std::vector<uint16_t> A(64 * 64), B(64 * N);
    for (auto &v : A) v = probe_bf16();
    for (auto &v : B) v = probe_bf16();
    std::vector<float> C(64 * N), got(64 * N);
    for (auto &v : C) v = probe_f32();
    cudaMemcpy(dc, C.data(), C.size() * 4, cudaMemcpyHostToDevice);
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            if (tb && N % 64) continue; /* MN-major 128B: whole 64-wide lines */
            a.alloc(64 * 64);
            b.alloc(64 * N);
            for (int m = 0; m < 64; m++)
                for (int k = 0; k < 64; k++) a.h[ta ? k * 64 + m : m * 64 + k] = A[m * 64 + k];
            for (int k = 0; k < 64; k++)
                for (int n = 0; n < N; n++) b.h[tb ? k * N + n : n * 64 + k] = B[k * N + n];
            a.upload();
            b.upload();
            CUtensorMap am, bm;
            probe_encode2d(&am, a.d, 64, 64, 128, 64, 64, CU_TENSOR_MAP_SWIZZLE_128B);
            if (!tb)
                probe_encode2d(&bm, b.d, 64, N, 128, 64, N, CU_TENSOR_MAP_SWIZZLE_128B);
            else
                probe_encode2d(&bm, b.d, N, 64, 2 * N, 64, 64, CU_TENSOR_MAP_SWIZZLE_128B);
            for (int sc = 0; sc < 2; sc++) {
                cudaMemset(dout, 0xFF, 64 * N * 4);
                const size_t smem = 8192 + N * 128 + 1040;
                const float *c = dc;
                if (!ta && !tb)
                    SG_LAUNCH((wg_tma_kernel<N, 0, 0>), 1, 128, smem, st, dout, c, am, bm, sc);
                if (ta && !tb)
                    SG_LAUNCH((wg_tma_kernel<N, 1, 0>), 1, 128, smem, st, dout, c, am, bm, sc);
                if (!ta && tb)
                    SG_LAUNCH((wg_tma_kernel<N, 0, 1>), 1, 128, smem, st, dout, c, am, bm, sc);
                if (ta && tb)
                    SG_LAUNCH((wg_tma_kernel<N, 1, 1>), 1, 128, smem, st, dout, c, am, bm, sc);
                char what[100];
                snprintf(what, sizeof what,
                         "wgmma m64n%dk16 via TMA 128B, trans-a %d trans-b %d, %s", N, ta, tb,
                         sc ? "accumulate" : "overwrite");
                if (probe_sync(st, what)) return fails + 1;
                cudaMemcpy(got.data(), dout, 64 * N * 4, cudaMemcpyDeviceToHost);
                double worst;
                fails += check_mma(what, got.data(), N, 64, A, B, C, sc, &worst) != 0;
            }
            a.release();
            b.release();
        }
    cudaFree(dout);
    cudaFree(dc);
    return fails;
}

/* The layouts written by the threads themselves (ordinary stores, then fence.proxy.async), from
 * the canonical layouts of the PTX ISA: element (r, k) of an R x 16 operand at byte
 *   K-major  none:  (r/8) SBO + (k/8) LBO + (r%8) 16 + (k%8) 2
 *   K-major  span:  (r/8) SBO + (r%8) span + (k/8) 16 + (k%8) 2
 *   MN-major none:  (r/8) SBO + (k/8) LBO + (k%8) 16 + (r%8) 2
 *   MN-major span:  (r/E) LBO + (k/8) SBO + (k%8) span + (r%E) 2,  E = span / 2
 * from the operand's start (`off` bytes into a 1024-aligned buffer), then swizzled. */
struct wg_layout {
    int trans, span;
    unsigned lbo, sbo, off;
};
__host__ __device__ static inline size_t layout_pos(const wg_layout &l, int r, int k) {
    size_t o;
    if (!l.trans)
        o = l.span ? (r / 8) * l.sbo + (r % 8) * l.span + (k / 8) * 16 + (k % 8) * 2
                   : (r / 8) * l.sbo + (k / 8) * l.lbo + (r % 8) * 16 + (k % 8) * 2;
    else
        o = l.span ? (r / (l.span / 2)) * l.lbo + (k / 8) * l.sbo + (k % 8) * l.span +
                         (r % (l.span / 2)) * 2
                   : (r / 8) * l.sbo + (k / 8) * l.lbo + (k % 8) * 16 + (r % 8) * 2;
    return swz_pos(l.off + o, l.span);
}
__host__ __device__ static inline int swz_code(int span) {
    return span == 128  ? SG_SWIZZLE_128B
           : span == 64 ? SG_SWIZZLE_64B
           : span == 32 ? SG_SWIZZLE_32B
                        : 0;
}

/* one m64n64k16 on operands the threads place themselves; RS: A from registers instead */
template <int TA, int TB, int RS>
__global__ void wg_layout_kernel(float *out, const uint16_t *A, const uint16_t *B, wg_layout la,
                                 wg_layout lb) {
    SG_DYNAMIC_SMEM(uint8_t, raw);
    uint8_t *As = sg_smem_align(raw, 1024), *Bs = As + 8192;
    const int t = threadIdx.x;
    for (int e = t; e < 64 * 16; e += 128) {
        const int r = e / 16, k = e % 16;
        if (!RS) memcpy(As + layout_pos(la, r, k), &A[r * 16 + k], 2);
        memcpy(Bs + layout_pos(lb, r, k), &B[r * 16 + k], 2); /* B as N x K: row r = n */
    }
    sg_fence_proxy_async();
    __syncthreads();
    float d[32];
#pragma unroll
    for (int i = 0; i < 32; i++) d[i] = 0.0f;
    const uint64_t db = sg_wgmma_desc(Bs + lb.off, lb.lbo, lb.sbo, swz_code(lb.span));
    sg_wgmma_fence_operand(d);
    sg_wgmma_fence();
    if (RS) {
        /* the A fragment: a[j] = A[16w + g + 8 (j % 2)][2q + 8 (j / 2) + {0, 1}] */
        const int w = t / 32, g = t % 32 / 4, q = t % 4;
        uint32_t a[4];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int m = 16 * w + g + 8 * (j % 2), k = 2 * q + 8 * (j / 2);
            a[j] = (uint32_t)A[m * 16 + k] | (uint32_t)A[m * 16 + k + 1] << 16;
        }
        sg_wgmma_rs<64, TB>(d, a, db, 0);
    } else {
        const uint64_t da = sg_wgmma_desc(As + la.off, la.lbo, la.sbo, swz_code(la.span));
        sg_wgmma_ss<64, TA, TB>(d, da, db, 0);
    }
    sg_wgmma_commit();
    sg_wgmma_wait(0);
    sg_wgmma_fence_operand(d);
#pragma unroll
    for (int i = 0; i < 32; i++) out[t * 32 + i] = d[i];
}

/* {A layout, B layout, rs}: dense and strided core matrices, every swizzle, both majors,
 * K-major starts one or three k steps (32 bytes each) into a swizzled line */
struct probe_layout_case {
    wg_layout a, b;
    int rs;
};
static const probe_layout_case probe_layout_cases[] = {
    {{0, 0, 1024, 128, 0}, {0, 0, 128, 256, 0}, 0},   /* K-major, no swizzle */
    {{1, 0, 1024, 128, 0}, {1, 0, 128, 256, 0}, 0},   /* MN-major, no swizzle */
    {{0, 64, 0, 512, 32}, {0, 32, 0, 256, 0}, 0},     /* K-major 64B (k step), 32B */
    {{1, 64, 1024, 512, 0}, {1, 32, 512, 256, 0}, 0}, /* MN-major 64B, 32B */
    {{0, 128, 0, 1024, 96}, {1, 128, 0, 1024, 0}, 0}, /* K-major 128B (3rd k step), MN 128B */
    {{0, 0, 0, 0, 0}, {0, 64, 0, 512, 32}, 1},        /* A in registers, B K-major 64B */
    {{0, 0, 0, 0, 0}, {1, 128, 0, 1024, 0}, 1},       /* A in registers, B MN-major 128B */
};

static inline int probe_wgmma_layouts(cudaStream_t st) {
    int fails = 0;
    float *dout;
    cudaMalloc((void **)&dout, 64 * 64 * 4);
    std::vector<uint16_t> A(64 * 16), Bt(64 * 16), B(16 * 64);
    for (auto &v : A) v = probe_bf16();
    for (auto &v : Bt) v = probe_bf16();
    for (int n = 0; n < 64; n++)
        for (int k = 0; k < 16; k++) B[k * 64 + n] = Bt[n * 16 + k];
    uint16_t *dA, *dB;
    cudaMalloc((void **)&dA, A.size() * 2);
    cudaMalloc((void **)&dB, Bt.size() * 2);
    cudaMemcpy(dA, A.data(), A.size() * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(dB, Bt.data(), Bt.size() * 2, cudaMemcpyHostToDevice);
    std::vector<float> got(64 * 64), zero(64 * 64, 0.0f);
    const int ncases = (int)(sizeof probe_layout_cases / sizeof probe_layout_cases[0]);
    for (int ci = 0; ci < ncases; ci++) {
        const probe_layout_case &c = probe_layout_cases[ci];
        cudaMemset(dout, 0xFF, 64 * 64 * 4);
        const size_t smem = 24 << 10;
        const uint16_t *a = dA, *b = dB;
        if (c.rs && !c.b.trans)
            SG_LAUNCH((wg_layout_kernel<0, 0, 1>), 1, 128, smem, st, dout, a, b, c.a, c.b);
        if (c.rs && c.b.trans)
            SG_LAUNCH((wg_layout_kernel<0, 1, 1>), 1, 128, smem, st, dout, a, b, c.a, c.b);
        if (!c.rs && !c.a.trans && !c.b.trans)
            SG_LAUNCH((wg_layout_kernel<0, 0, 0>), 1, 128, smem, st, dout, a, b, c.a, c.b);
        if (!c.rs && c.a.trans && c.b.trans)
            SG_LAUNCH((wg_layout_kernel<1, 1, 0>), 1, 128, smem, st, dout, a, b, c.a, c.b);
        if (!c.rs && !c.a.trans && c.b.trans)
            SG_LAUNCH((wg_layout_kernel<0, 1, 0>), 1, 128, smem, st, dout, a, b, c.a, c.b);
        if (!c.rs && c.a.trans && !c.b.trans)
            SG_LAUNCH((wg_layout_kernel<1, 0, 0>), 1, 128, smem, st, dout, a, b, c.a, c.b);
        char what[100];
        snprintf(what, sizeof what, "wgmma layout case %d (A %s %d, B %s %d)", ci,
                 c.rs        ? "registers"
                 : c.a.trans ? "MN"
                             : "K",
                 c.a.span, c.b.trans ? "MN" : "K", c.b.span);
        if (probe_sync(st, what)) return fails + 1;
        cudaMemcpy(got.data(), dout, got.size() * 4, cudaMemcpyDeviceToHost);
        double worst;
        fails += check_mma(what, got.data(), 64, 16, A, B, zero, 0, &worst) != 0;
    }
    cudaFree(dA);
    cudaFree(dB);
    cudaFree(dout);
    return fails;
}

/* ---- the pipeline: a 128 x 128 x 64 bf16 GEMM, warp-specialised ----
 * C (128 x 128, fp32) = A (128 x 64, bf16, row-major) * B (64 x 128, bf16, row-major) + C0.
 * 384 threads. Warpgroup 0 produces: one elected thread of its first warp copies each k-tile of
 * 16; warpgroups 1 and 2 consume rows 0-63 and 64-127 with one m64n128k16 per k-tile. The 4
 * k-tiles go through a 3-stage ring: stage s = A's 128 x 16 tile, K-major with the 32B swizzle
 * (128 rows of 32 bytes), then B's 16 x 128 tile, MN-major with the 128B swizzle (two boxes of 16
 * rows of 64 n). full[s]: 1 arrival (the producer's, with the bytes); empty[s]: one arrival per
 * consumer warpgroup. A consumer keeps one wgmma group in flight (wait_group 1) and then
 * releases the stage of the previous k-tile. Broken on purpose:
 * mode 1: the consumers release a stage as soon as its wgmma is issued (waiting only at the
 *         end): the producer refills it under the wgmma;
 * mode 2: the producer does not wait for a stage to be empty (it re-arms a full barrier whose
 *         phase is still open);
 * mode 3: the consumers do not wait for a stage to be full. */
__global__ void __launch_bounds__(384, 1)
    tma_wgmma_gemm_kernel(float *C, const float *C0, const __grid_constant__ CUtensorMap amap,
                          const __grid_constant__ CUtensorMap bmap, int mode) {
    SG_DYNAMIC_SMEM(uint8_t, raw);
    uint8_t *smem = sg_smem_align(raw, 1024);
    __shared__ uint64_t full[3], empty[3];
    const int t = threadIdx.x, wg = t / 128;
    if (t == 0) {
        for (int s = 0; s < 3; s++) {
            sg_mbar_init(&full[s], 1);
            sg_mbar_init(&empty[s], 2);
        }
        sg_fence_mbar_init();
    }
    __syncthreads();
    if (wg == 0) {
        sg_setmaxnreg_dec(40);
        if (t < 32 && sg_elect_one())
            for (int k = 0; k < 4; k++) {
                const int s = k % 3;
                /* the first pass waits on the phase before the first: complete already */
                if (mode != 2) sg_mbar_wait(&empty[s], ((k / 3) & 1) ^ 1);
                uint8_t *stage = smem + 8192 * s;
                sg_mbar_arrive_expect_tx(&full[s], 8192);
                sg_tma_load_2d(stage, &amap, &full[s], 16 * k, 0);
                sg_tma_load_2d(stage + 4096, &bmap, &full[s], 0, 16 * k);
                sg_tma_load_2d(stage + 6144, &bmap, &full[s], 64, 16 * k);
            }
        return;
    }
    sg_setmaxnreg_inc(232);
    const int c = t - 128 * wg, row0 = 64 * (wg - 1);
    float d[64];
    for (int i = 0; i < 64; i++) d[i] = C0[(row0 + acc_row(c, i)) * 128 + acc_col(c, i)];
    for (int k = 0; k < 4; k++) {
        const int s = k % 3;
        if (mode != 3) sg_mbar_wait(&full[s], (k / 3) & 1);
        uint8_t *stage = smem + 8192 * s;
        const uint64_t da = sg_wgmma_desc(stage + 32 * row0, 0, 256, SG_SWIZZLE_32B);
        const uint64_t db = sg_wgmma_desc(stage + 4096, 2048, 1024, SG_SWIZZLE_128B);
        sg_wgmma_fence_operand(d);
        sg_wgmma_fence();
        sg_wgmma_ss<128, 0, 1>(d, da, db, 1);
        sg_wgmma_commit();
        if (mode == 1) {
            if (c == 0) sg_mbar_arrive(&empty[s]);
            continue;
        }
        sg_wgmma_wait(1);
        sg_wgmma_fence_operand(d);
        if (k > 0 && c == 0) sg_mbar_arrive(&empty[(k - 1) % 3]);
    }
    sg_wgmma_wait(0);
    sg_wgmma_fence_operand(d);
    for (int i = 0; i < 64; i++) C[(row0 + acc_row(c, i)) * 128 + acc_col(c, i)] = d[i];
}

/* The GEMM's data and maps; run(mode) launches it, check() compares with a double reference. */
struct probe_gemm {
    probe_tensor a, b;
    std::vector<float> C0, got;
    float *dC = NULL, *dC0 = NULL;
    CUtensorMap am, bm;
    bool init() {
        a.alloc(128 * 64);
        b.alloc(64 * 128);
        C0.resize(128 * 128);
        got.resize(128 * 128);
        for (auto &v : C0) v = probe_f32();
        cudaMalloc((void **)&dC, got.size() * 4);
        cudaMalloc((void **)&dC0, C0.size() * 4);
        cudaMemcpy(dC0, C0.data(), C0.size() * 4, cudaMemcpyHostToDevice);
        return probe_encode2d(&am, a.d, 64, 128, 128, 16, 128, CU_TENSOR_MAP_SWIZZLE_32B) ==
                   CUDA_SUCCESS &&
               probe_encode2d(&bm, b.d, 128, 64, 256, 64, 16, CU_TENSOR_MAP_SWIZZLE_128B) ==
                   CUDA_SUCCESS;
    }
    void run(cudaStream_t st, int mode) {
        cudaMemset(dC, 0xFF, got.size() * 4);
        SG_LAUNCH(tma_wgmma_gemm_kernel, 1, 384, 3 * 8192 + 1024, st, dC, (const float *)dC0, am,
                  bm, mode);
    }
    /* the number of wrong elements (NaN included) */
    int check(double *worst) {
        cudaMemcpy(got.data(), dC, got.size() * 4, cudaMemcpyDeviceToHost);
        int bad = 0;
        *worst = 0;
        for (int m = 0; m < 128; m++)
            for (int n = 0; n < 128; n++) {
                double s = C0[m * 128 + n], mag = fabs(s);
                for (int k = 0; k < 64; k++) {
                    const double p = (double)probe_bf16f(a.h[m * 64 + k]) *
                                     (double)probe_bf16f(b.h[k * 128 + n]);
                    s += p;
                    mag += fabs(p);
                }
                const double err = fabs((double)got[m * 128 + n] - s) / mag;
                if (!(err <= 1e-5)) bad++;
                if (!(err <= *worst)) *worst = err;
            }
        return bad;
    }
    void release() {
        cudaFree(dC);
        cudaFree(dC0);
        a.release();
        b.release();
    }
};

static inline int probe_tma_wgmma_gemm(cudaStream_t st) {
    probe_gemm g;
    if (!g.init()) {
        fprintf(stderr, "FAIL the GEMM's tensor maps were refused\n");
        return 1;
    }
    g.run(st, 0);
    int fails = probe_sync(st, "the TMA + wgmma GEMM");
    double worst = 0;
    const int bad = fails ? 0 : g.check(&worst);
    if (bad) {
        fprintf(stderr, "FAIL the TMA + wgmma GEMM: %d of 16384 elements wrong (worst %g)\n", bad,
                worst);
        fails++;
    }
    g.release();
    return fails;
}

/* ---- elect.sync, stmatrix, named barriers ---- */

#define STM_PITCH 24
__global__ void hopper_misc_kernel(int *elected, uint16_t *stm, float *nbar_out, int trans) {
    __shared__ __align__(16) uint16_t tile[4 * 8 * STM_PITCH];
    __shared__ float xfer[64];
    const int t = threadIdx.x, lane = t % 32, warp = t / 32;
    elected[t] = sg_elect_one();
    elected[96 + t] = sg_elect_one(); /* the same lane again */
    if (warp == 0) {
        /* lane l's register i: elements (4 l + 2 i, + 1) of a pattern, so every value differs */
        uint32_t r[4];
        for (int i = 0; i < 4; i++)
            r[i] = (uint32_t)(1000 + 8 * lane + 2 * i) | (uint32_t)(1000 + 8 * lane + 2 * i + 1)
                                                             << 16;
        for (int e = lane; e < 4 * 8 * STM_PITCH; e += 32) tile[e] = 0xFFFF;
        __syncwarp();
        uint16_t *row = tile + ((lane / 8) * 8 + lane % 8) * STM_PITCH;
        if (trans)
            sg_stmatrix_x4_trans(row, r);
        else
            sg_stmatrix_x4(row, r);
        __syncwarp();
        for (int e = lane; e < 4 * 8 * STM_PITCH; e += 32) stm[e] = tile[e];
    } else { /* warps 1 and 2 meet at bar.sync 1, 64 while warp 0 runs on */
        if (warp == 1) xfer[lane] = (float)(lane * 3);
        sg_named_barrier_sync(1, 64);
        if (warp == 2) nbar_out[lane] = xfer[31 - lane];
    }
}

/* Exactly one lane per warp elected, the same one twice; stmatrix.x4 (.trans) places lane l's
 * register i (elements 2 (l % 4), + 1 of row l / 4 of matrix i; .trans: of column l / 4) at the
 * rows the lanes give and nowhere else; bar.sync 1, 64 orders warp 1's stores before warp 2's
 * loads while warp 0 runs on. */
static inline int probe_misc(cudaStream_t st) {
    int fails = 0;
    int *del, hel[192];
    uint16_t *dstm, hstm[4 * 8 * STM_PITCH];
    float *dnb, hnb[32];
    cudaMalloc((void **)&del, sizeof hel);
    cudaMalloc((void **)&dstm, sizeof hstm);
    cudaMalloc((void **)&dnb, sizeof hnb);
    for (int trans = 0; trans < 2; trans++) {
        SG_LAUNCH(hopper_misc_kernel, 1, 96, 0, st, del, dstm, dnb, trans);
        if (probe_sync(st, "elect/stmatrix/bar.sync")) return fails + 1;
        cudaMemcpy(hel, del, sizeof hel, cudaMemcpyDeviceToHost);
        cudaMemcpy(hstm, dstm, sizeof hstm, cudaMemcpyDeviceToHost);
        cudaMemcpy(hnb, dnb, sizeof hnb, cudaMemcpyDeviceToHost);
        int ebad = 0;
        for (int w = 0; w < 3; w++) {
            int n = 0;
            for (int l = 0; l < 32; l++) {
                n += hel[32 * w + l] != 0;
                ebad += hel[32 * w + l] != hel[96 + 32 * w + l];
            }
            ebad += n != 1;
        }
        int sbad = 0;
        for (int i = 0; i < 4; i++)
            for (int l = 0; l < 32; l++)
                for (int h = 0; h < 2; h++) {
                    const uint16_t v = (uint16_t)(1000 + 8 * l + 2 * i + h);
                    const int row = trans ? 2 * (l % 4) + h : l / 4;
                    const int col = trans ? l / 4 : 2 * (l % 4) + h;
                    sbad += hstm[(i * 8 + row) * STM_PITCH + col] != v;
                }
        for (int r = 0; r < 32; r++)
            for (int c = 8; c < STM_PITCH; c++) sbad += hstm[r * STM_PITCH + c] != 0xFFFF;
        int nbad = 0;
        for (int l = 0; l < 32; l++) nbad += hnb[l] != (float)((31 - l) * 3);
        if (ebad)
            fprintf(stderr, "FAIL elect.sync: not one lane per warp, or not the same twice\n");
        if (sbad)
            fprintf(stderr, "FAIL stmatrix.x4%s: %d elements wrong\n", trans ? ".trans" : "", sbad);
        if (nbad)
            fprintf(stderr, "FAIL bar.sync 1, 64: warp 2 read %d values warp 1 had not written\n",
                    nbad);
        fails += (ebad != 0) + (sbad != 0) + (nbad != 0);
    }
    cudaFree(del);
    cudaFree(dstm);
    cudaFree(dnb);
    return fails;
}

#endif /* SG_HOPPER_PROBES_CUH */
