/* test_cuda_sim.cpp — the host emulation's own checks (ctest cuda_sim_selftest): each rule the
 * emulation enforces is broken once on purpose and must be reported as an error, and the
 * execution model's semantics the kernels rely on are checked on small kernels of its own:
 *
 * - a launch with more than 1024 threads per block is an invalid configuration;
 * - a kernel argument that points into no live allocation is refused;
 * - a synchronisation inside stream capture invalidates the capture (EndCapture fails);
 * - a captured step that differs from the eager one before it is reported;
 * - __syncthreads is a real barrier: a block-wide reversal through shared memory is exact in
 *   every scheduling order, and the same kernel without the barrier reads poison;
 * - __shfl_xor_sync butterfly sums agree with the serial sum in every lane;
 * - threads that exit while others wait at a barrier ("barrier divergence") are reported;
 * - the tensor-core operations of kernels/cuda/tensor_core.cuh (sim_tensor_core.cpp), through
 *   its wrappers where they exist: mma.sync m16n8k16 bf16 tiles of several warps and blocks
 *   against a double matmul (Inf and NaN inputs, d aliasing c), a lane that exited, a partial
 *   warp and a diverged lane reported; every register of every lane of ldmatrix x1/x2/x4 and
 *   .trans from static and dynamic shared memory, bad row addresses reported; cp.async data
 *   after the wait, poison before it, zero-fill, wait_group N in a 3-stage pipeline, eight
 *   misuses reported; a 64x64x64 bf16 GEMM (cp.async 2-stage pipeline, ldmatrix, mma) against
 *   a double reference, and the same GEMM waiting too little (reported) or without the barrier
 *   before a stage is refilled (reads poison in the forward and reverse orders);
 * - the Hopper operations of kernels/cuda/hopper.cuh (sim_hopper.cpp), through the probes of
 *   tests/hopper_probes.cuh (which hopper_gpu runs unchanged on a GPU) and the emulation's own
 *   rules: mbarrier phases and parities, ten misuses reported; TMA tile copies of 2 to 5 dimensions
 * byte for byte against index arithmetic (each swizzle, boxes across the tensor's edges
 * zero-filled, element strides), poison before the wait, the transaction count, eleven misuses and
 * the encoders' documented argument rules; wgmma of every N (32..256) and both transposes through
 * TMA with the 128B swizzle against a double matmul (accumulate and overwrite), the canonical
 *   layouts of every swizzle placed by the threads themselves, A from registers, wait_group N
 *   retiring only the older groups, the accumulators poisoned until the wait, thirteen misuses
 *   reported; a warp-specialised 128x128x64 GEMM (a producer warp's TMA into a 3-stage ring
 *   guarded by full/empty mbarriers, two consumer warpgroups' wgmma) against a double
 *   reference, and the same GEMM releasing a stage under its wgmma, refilling a stage that is
 *   not empty, or reading one that is not full (each reported or wrong); elect.sync, stmatrix,
 *   named barriers and setmaxnreg, with their misuses.
 * Expected failures are checked by their report (stderr captured), then the sticky error is
 * cleared (sg_sim_reset_errors).
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <vector>

#include "kernels/cuda/hopper.cuh"
#include "kernels/cuda/tensor_core.cuh"

static int g_fail, g_pass;
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (cond) {                                                                                \
            g_pass++;                                                                              \
        } else {                                                                                   \
            g_fail++;                                                                              \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

#define SG_LAUNCH(kernel, grid, block, smem, stream, ...)                                          \
    sg_sim::launch(#kernel, kernel, grid, block, smem, stream, __VA_ARGS__)
#define SG_DYNAMIC_SMEM(type, name) type *name = (type *)sg_sim::dynamic_smem()

#include "tests/hopper_probes.cuh" /* after SG_LAUNCH: its drivers launch with it */

__global__ void fill_kernel(float *y, int n, float v) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = v;
}

/* y[i] = x[n-1-i] within one block of n <= 256 threads, through shared memory */
__global__ void reverse_kernel(float *y, const float *x, int n, int with_barrier) {
    __shared__ float s[256];
    int i = threadIdx.x;
    if (i < n) s[i] = x[i];
    if (with_barrier) __syncthreads();
    if (i < n) y[i] = s[n - 1 - i];
}

/* every lane ends with the sum of the warp's values */
__global__ void warp_sum_kernel(float *y, const float *x) {
    float v = x[threadIdx.x];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    y[threadIdx.x] = v;
}

/* thread 0 leaves early while the others wait at a barrier */
__global__ void divergent_kernel(float *y) {
    if (threadIdx.x == 0) return;
    __syncthreads();
    y[threadIdx.x] = 1.0f;
}

static cudaError_t sync_and_error(cudaStream_t st) {
    cudaError_t e = cudaStreamSynchronize(st);
    cudaError_t l = cudaGetLastError();
    return e != cudaSuccess ? e : l;
}

/* ======== the tensor-core fragment operations (kernels/cuda/tensor_core.cuh) ========
 * The fragment layouts below are written from the PTX ISA's element formulas ("Matrix Fragments
 * for mma.m16n8k16 with floating point type": row and column of a_i, b_i, c_i one element at a
 * time; "ldmatrix": each group of four threads receives one row), independently of the
 * emulator's tabulated form. */

extern "C" void sg_sim_reset_errors(void); /* sim_runtime.cpp: clear a planted failure */

static uint32_t g_rng = 0x2545f491u;
static uint32_t rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 17;
    g_rng ^= g_rng << 5;
    return g_rng;
}
/* a random bf16 that is never zero: +-(1 + m/128) * 2^e, e in [-3, 1] */
static uint16_t rand_bf16(void) {
    uint32_t r = rnd();
    uint32_t e = 127 - 3 + (r >> 1) % 5;
    return (uint16_t)(((r & 1u) << 15) | (e << 7) | ((r >> 8) & 0x7fu));
}
static float bf16f(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static float rand_f32(void) {
    return ((float)(rnd() % 2001) - 1000.0f) / 256.0f;
}
static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The emulator refuses the launch that `launch` issues, and its report contains `want`:
 * stderr is captured to check that (and echoed), then the sticky error is cleared. */
template <class F>
static void expect_fail(const char *what, const char *want, cudaStream_t st, F launch) {
    fflush(stderr);
    const int saved = dup(2);
    FILE *tmp = tmpfile();
    dup2(fileno(tmp), 2);
    launch();
    const cudaError_t e = sync_and_error(st);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char buf[4096];
    rewind(tmp);
    size_t n = fread(buf, 1, sizeof buf - 1, tmp);
    buf[n] = 0;
    fclose(tmp);
    fprintf(stderr, "expected failure (%s): %s", what, buf);
    CHECK(e != cudaSuccess, "%s was not reported", what);
    CHECK(strstr(buf, want) != NULL, "%s: the report does not say \"%s\"", what, want);
    sg_sim_reset_errors();
}

/* ---- mma.sync m16n8k16 ---- */

/* One D = A * B + C tile per warp: tile t = blockIdx.x * warps + warp. A tiles 16x16 bf16 and B
 * tiles 16x8 bf16 (K x N) row-major, C and D 16x8 fp32. inplace: d and c are one array. */
__global__ void mma_tile_kernel(float *D, const uint16_t *A, const uint16_t *B, const float *C,
                                int inplace) {
    const int lane = threadIdx.x % 32, t = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const uint16_t *At = A + t * 256, *Bt = B + t * 128;
    const float *Ct = C + t * 128;
    float *Dt = D + t * 128;
    const int groupID = lane >> 2, tig = lane % 4;
    uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
    for (int i = 0; i < 8; i++) {
        const int row = (i < 2 || (i >= 4 && i < 6)) ? groupID : groupID + 8;
        const int col = tig * 2 + (i & 1) + (i >= 4 ? 8 : 0);
        a[i / 2] |= (uint32_t)At[row * 16 + col] << (16 * (i & 1));
    }
    for (int i = 0; i < 4; i++) {
        const int row = tig * 2 + (i & 1) + (i >= 2 ? 8 : 0);
        b[i / 2] |= (uint32_t)Bt[row * 8 + groupID] << (16 * (i & 1));
    }
    float c[4], d[4];
    for (int i = 0; i < 4; i++) c[i] = Ct[(i < 2 ? groupID : groupID + 8) * 8 + tig * 2 + (i & 1)];
    if (inplace) {
        sg_mma_bf16_16816(c, a, b, c);
        for (int i = 0; i < 4; i++) d[i] = c[i];
    } else {
        sg_mma_bf16_16816(d, a, b, c);
    }
    for (int i = 0; i < 4; i++) Dt[(i < 2 ? groupID : groupID + 8) * 8 + tig * 2 + (i & 1)] = d[i];
}

/* lane 7 leaves before the mma */
__global__ void mma_missing_lane_kernel(float *D) {
    const uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
    float c[4] = {0, 0, 0, 0};
    if (threadIdx.x == 7) return;
    sg_mma_bf16_16816(c, a, b, c);
    D[threadIdx.x] = c[0];
}

/* lane 0 is at __syncwarp while the others are at the mma */
__global__ void mma_diverged_kernel(float *D) {
    const uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
    float c[4] = {0, 0, 0, 0};
    if (threadIdx.x == 0)
        __syncwarp();
    else
        sg_mma_bf16_16816(c, a, b, c);
    D[threadIdx.x] = c[0];
}

/* device memory the size of host array h, uninitialised (dev_alloc) or a copy of it (dev_copy) */
template <class T, size_t N> static T *dev_alloc(const T (&h)[N]) {
    T *d = nullptr;
    cudaMalloc((void **)&d, sizeof h);
    return d;
}
template <class T, size_t N> static T *dev_copy(const T (&h)[N]) {
    T *d = dev_alloc(h);
    cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
    return d;
}

static void test_mma(cudaStream_t st) {
    enum { WARPS = 4, BLOCKS = 3, T = WARPS * BLOCKS };
    static uint16_t hA[T * 256], hB[T * 128];
    static float hC[T * 128], hD[T * 128];
    for (int i = 0; i < T * 256; i++) hA[i] = rand_bf16();
    for (int i = 0; i < T * 128; i++) hB[i] = rand_bf16(), hC[i] = rand_f32();
    hA[0 * 256 + 3 * 16 + 5] = 0x7f80; /* tile 0: A[3][5] = +Inf: row 3 of D is +-Inf */
    hB[1 * 128 + 2 * 8 + 6] = 0x7fc0;  /* tile 1: B[2][6] = NaN: column 6 of D is NaN */
    hA[2 * 256 + 9 * 16 + 0] = 0xff80; /* tile 2: A[9][0] = -Inf and A[9][1] = +Inf */
    hA[2 * 256 + 9 * 16 + 1] = 0x7f80; /*   (with B[0][n], B[1][n] of one sign: NaN) */
    uint16_t *dA = dev_copy(hA), *dB = dev_copy(hB);
    float *dC = dev_copy(hC), *dD = dev_alloc(hD);
    for (int inplace = 0; inplace < 2; inplace++) {
        cudaMemset(dD, 0xFF, sizeof hD); /* poison: every element must be written */
        SG_LAUNCH(mma_tile_kernel, BLOCKS, WARPS * 32, 0, st, dD, (const uint16_t *)dA,
                  (const uint16_t *)dB, (const float *)dC, inplace);
        CHECK(sync_and_error(st) == cudaSuccess, "mma tiles (inplace %d) failed", inplace);
        cudaMemcpy(hD, dD, sizeof hD, cudaMemcpyDeviceToHost);
        int bad = 0, nonfinite = 0;
        double worst = 0;
        for (int t = 0; t < T; t++)
            for (int m = 0; m < 16; m++)
                for (int n = 0; n < 8; n++) {
                    double s = 0, mag = 0;
                    for (int k = 0; k < 16; k++) {
                        double p = (double)bf16f(hA[t * 256 + m * 16 + k]) *
                                   (double)bf16f(hB[t * 128 + k * 8 + n]);
                        s += p;
                        mag += fabs(p);
                    }
                    s += hC[t * 128 + m * 8 + n];
                    mag += fabs(hC[t * 128 + m * 8 + n]);
                    const float d = hD[t * 128 + m * 8 + n];
                    if (s != s) { /* NaN: the canonical one */
                        nonfinite++;
                        if (f32_bits(d) != 0x7fffffffu) bad++;
                    } else if (isinf(s)) {
                        nonfinite++;
                        if (d != (float)s) bad++;
                    } else {
                        double err = fabs((double)d - s) / (mag > 0 ? mag : 1);
                        if (!(err <= 1e-6)) bad++;
                        if (err > worst) worst = err;
                    }
                }
        CHECK(bad == 0, "mma (inplace %d): %d of %d elements wrong (worst relative error %g)",
              inplace, bad, T * 128, worst);
        CHECK(nonfinite == 8 + 16 + 8, "mma: %d non-finite reference elements, expected 32",
              nonfinite);
    }
    expect_fail("mma with a lane that exited", "which has exited", st,
                [&] { SG_LAUNCH(mma_missing_lane_kernel, 1, 32, 0, st, dD); });
    expect_fail("mma in a warp of 16 threads", "which does not exist", st, [&] {
        SG_LAUNCH(mma_tile_kernel, 1, 48, 0, st, dD, (const uint16_t *)dA, (const uint16_t *)dB,
                  (const float *)dC, 0);
    });
    expect_fail("mma while one lane is at __syncwarp", "different warp operations", st,
                [&] { SG_LAUNCH(mma_diverged_kernel, 1, 32, 0, st, dD); });
    cudaFree(dA), cudaFree(dB), cudaFree(dC), cudaFree(dD);
}

/* ---- mma.sync m16n8k8 tf32 and cvt.rna.tf32.f32 ---- */

/* One D = A * B + C tile per warp, as mma_tile_kernel: A tiles 16x8 and B tiles 8x8 (K x N)
 * row-major, fp32 bit patterns given to the mma as they are (their low 13 bits set at random:
 * the instruction must not read them). */
__global__ void mma_tf32_tile_kernel(float *D, const uint32_t *A, const uint32_t *B,
                                     const float *C) {
    const int lane = threadIdx.x % 32, t = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const uint32_t *At = A + t * 128, *Bt = B + t * 64;
    const int groupID = lane >> 2, tig = lane % 4;
    uint32_t a[4], b[2];
    for (int i = 0; i < 4; i++) a[i] = At[(groupID + 8 * (i & 1)) * 8 + tig + 4 * (i >> 1)];
    for (int i = 0; i < 2; i++) b[i] = Bt[(tig + 4 * i) * 8 + groupID];
    float c[4];
    for (int i = 0; i < 4; i++)
        c[i] = C[t * 128 + (i < 2 ? groupID : groupID + 8) * 8 + tig * 2 + (i & 1)];
    sg_mma_tf32_1688(c, a, b, c);
    for (int i = 0; i < 4; i++)
        D[t * 128 + (i < 2 ? groupID : groupID + 8) * 8 + tig * 2 + (i & 1)] = c[i];
}

__global__ void tf32_rna_kernel(uint32_t *out, const float *in, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = sg_tf32_rna(in[i]);
}

static float tf32f(uint32_t u) {
    return bits_f32(u & 0xffffe000u);
}

static void test_mma_tf32(cudaStream_t st) {
    enum { WARPS = 4, BLOCKS = 2, T = WARPS * BLOCKS };
    static uint32_t hA[T * 128], hB[T * 64];
    static float hC[T * 128], hD[T * 128];
    for (int i = 0; i < T * 128; i++)
        hA[i] = f32_bits(rand_f32() + 1.0f / 1024) ^ (rnd() & 0x1fffu);
    for (int i = 0; i < T * 64; i++) hB[i] = f32_bits(rand_f32() - 1.0f / 512) ^ (rnd() & 0x1fffu);
    for (int i = 0; i < T * 128; i++) hC[i] = rand_f32();
    uint32_t *dA = dev_copy(hA), *dB = dev_copy(hB);
    float *dC = dev_copy(hC), *dD = dev_alloc(hD);
    cudaMemset(dD, 0xFF, sizeof hD);
    SG_LAUNCH(mma_tf32_tile_kernel, BLOCKS, WARPS * 32, 0, st, dD, (const uint32_t *)dA,
              (const uint32_t *)dB, (const float *)dC);
    CHECK(sync_and_error(st) == cudaSuccess, "mma tf32 tiles failed");
    cudaMemcpy(hD, dD, sizeof hD, cudaMemcpyDeviceToHost);
    int bad = 0;
    double worst = 0;
    for (int t = 0; t < T; t++)
        for (int m = 0; m < 16; m++)
            for (int n = 0; n < 8; n++) {
                double s = hC[t * 128 + m * 8 + n], mag = fabs(s);
                for (int k = 0; k < 8; k++) {
                    const double p =
                        (double)tf32f(hA[t * 128 + m * 8 + k]) * tf32f(hB[t * 64 + k * 8 + n]);
                    s += p, mag += fabs(p);
                }
                const double err = fabs((double)hD[t * 128 + m * 8 + n] - s) / (mag > 0 ? mag : 1);
                if (!(err <= 1e-6)) bad++;
                if (err > worst) worst = err;
            }
    CHECK(bad == 0, "mma tf32: %d of %d elements wrong (worst relative error %g)", bad, T * 128,
          worst);
    expect_fail("mma tf32 in a warp of 16 threads", "which does not exist", st, [&] {
        SG_LAUNCH(mma_tf32_tile_kernel, 1, 48, 0, st, dD, (const uint32_t *)dA,
                  (const uint32_t *)dB, (const float *)dC);
    });

    /* cvt.rna.tf32.f32: ties away from zero at the 13-bit unit, carries, Inf and NaN */
    const float in[] = {1.0f + 0x1p-11f,
                        -(1.0f + 0x1p-11f),
                        1.0f + 0x1p-11f - 0x1p-23f,
                        1.0f + 3 * 0x1p-11f,
                        0x1.fffp0f,
                        3.4028235e38f,
                        bits_f32(0x7f800000u),
                        bits_f32(0xff800000u),
                        bits_f32(0x7f800001u),
                        bits_f32(0x00001fffu),
                        bits_f32(0x00001000u),
                        0.0f};
    const uint32_t want[] = {0x3f802000u, 0xbf802000u, 0x3f800000u, 0x3f804000u,
                             0x40000000u, 0x7f800000u, 0x7f800000u, 0xff800000u,
                             0x7fc00000u, 0x00002000u, 0x00002000u, 0x00000000u};
    enum { NC = sizeof in / sizeof in[0] };
    float *din;
    uint32_t *dout, hout[NC];
    cudaMalloc((void **)&din, sizeof in);
    cudaMalloc((void **)&dout, sizeof hout);
    cudaMemcpy(din, in, sizeof in, cudaMemcpyHostToDevice);
    SG_LAUNCH(tf32_rna_kernel, 1, 32, 0, st, dout, (const float *)din, (int)NC);
    CHECK(sync_and_error(st) == cudaSuccess, "cvt.rna.tf32.f32 failed");
    cudaMemcpy(hout, dout, sizeof hout, cudaMemcpyDeviceToHost);
    for (int i = 0; i < NC; i++)
        CHECK(hout[i] == want[i], "cvt.rna.tf32.f32(%a): 0x%08x, expected 0x%08x", (double)in[i],
              hout[i], want[i]);
    cudaFree(din);
    cudaFree(dout);
    cudaFree(dA), cudaFree(dB), cudaFree(dC), cudaFree(dD);
}

/* ---- ldmatrix ---- */

/* The tile: 4 matrices of 8 rows of 8 b16 in shared memory with a row pitch of 24 elements (48
 * bytes: rows 16-byte aligned, not contiguous), filled from src[(i * 8 + row) * 8 + col]. Lane l
 * < 8 num gives row l % 8 of matrix l / 8 as tile row ROWPERM(l % 8): rows in any order. The
 * lanes above 8 num pass a misaligned global pointer, which ldmatrix must ignore. */
#define LDM_PITCH 24
#define ROWPERM(r) (((r)*3 + 1) % 8)
__global__ void ldmatrix_kernel(unsigned *out, const uint16_t *src, int num, int trans,
                                int dynamic) {
    __shared__ __align__(16) uint16_t stile[4 * 8 * LDM_PITCH];
    uint16_t *tile = dynamic ? (uint16_t *)sg_sim::dynamic_smem() : stile;
    const int lane = threadIdx.x;
    for (int e = lane; e < 256; e += 32) tile[(e / 8) * LDM_PITCH + e % 8] = src[e];
    __syncthreads();
    const void *p = (const char *)src + 2;
    if (lane < 8 * num) p = tile + ((lane / 8) * 8 + ROWPERM(lane % 8)) * LDM_PITCH;
    unsigned r[4];
    sg_sim::ldmatrix_b16(num, trans, r, p);
    for (int i = 0; i < num; i++) out[lane * 4 + i] = r[i];
}

/* every lane gives a valid row of a 4-matrix tile, but for one planted fault */
__global__ void ldmatrix_bad_kernel(const uint16_t *g, int mode) {
    __shared__ __align__(16) uint16_t tile[32 * 8];
    const int lane = threadIdx.x;
    const char *p = (const char *)(tile + lane * 8);
    if (mode == 0 && lane == 3) p += 8;                                        /* misaligned */
    if (mode == 1 && lane == 5) p = (const char *)g;                           /* global memory */
    if (mode == 2 && lane == 9) p = (const char *)sg_sim::dynamic_smem() + 64; /* past the end */
    uint32_t r[4];
    sg_ldmatrix_x4(r, p);
}

static void test_ldmatrix(cudaStream_t st) {
    uint16_t hs[256];
    for (int i = 0; i < 256; i++) hs[i] = (uint16_t)(rnd() & 0xffff);
    uint16_t *ds;
    unsigned *dout, hout[32 * 4];
    cudaMalloc((void **)&ds, sizeof hs);
    cudaMalloc((void **)&dout, sizeof hout);
    cudaMemcpy(ds, hs, sizeof hs, cudaMemcpyHostToDevice);
    const size_t dyn_bytes = 4 * 8 * LDM_PITCH * sizeof(uint16_t);
    for (int dynamic = 0; dynamic < 2; dynamic++)
        for (int trans = 0; trans < 2; trans++)
            for (int num = 1; num <= 4; num *= 2) {
                cudaMemset(dout, 0xAB, sizeof hout);
                SG_LAUNCH(ldmatrix_kernel, 1, 32, dynamic ? dyn_bytes : 0, st, dout,
                          (const uint16_t *)ds, num, trans, dynamic);
                CHECK(sync_and_error(st) == cudaSuccess, "ldmatrix x%d trans %d failed", num,
                      trans);
                cudaMemcpy(hout, dout, sizeof hout, cudaMemcpyDeviceToHost);
                /* matrix i's logical row r is tile row ROWPERM(r); the four threads 4 row + j
                 * receive its elements 2j (low half) and 2j + 1 (high half); .trans: the same
                 * of the transposed matrix (its row = the original column). */
                int bad = 0;
                for (int i = 0; i < num; i++)
                    for (int row = 0; row < 8; row++)
                        for (int j = 0; j < 4; j++) {
                            uint16_t e0, e1;
                            if (!trans) {
                                e0 = hs[(i * 8 + ROWPERM(row)) * 8 + 2 * j];
                                e1 = hs[(i * 8 + ROWPERM(row)) * 8 + 2 * j + 1];
                            } else {
                                e0 = hs[(i * 8 + ROWPERM(2 * j)) * 8 + row];
                                e1 = hs[(i * 8 + ROWPERM(2 * j + 1)) * 8 + row];
                            }
                            const unsigned want = (unsigned)e0 | (unsigned)e1 << 16;
                            if (hout[(4 * row + j) * 4 + i] != want) bad++;
                        }
                for (int l = 0; l < 32; l++) /* registers beyond num are not written */
                    for (int i = num; i < 4; i++) bad += hout[l * 4 + i] != 0xABABABABu;
                CHECK(bad == 0, "ldmatrix x%d%s (%s shared): %d registers wrong", num,
                      trans ? ".trans" : "", dynamic ? "dynamic" : "static", bad);
            }
    expect_fail("ldmatrix with a misaligned row", "(3,0,0)", st,
                [&] { SG_LAUNCH(ldmatrix_bad_kernel, 1, 32, 0, st, (const uint16_t *)ds, 0); });
    expect_fail("ldmatrix with a misaligned row", "is not 16-byte aligned", st,
                [&] { SG_LAUNCH(ldmatrix_bad_kernel, 1, 32, 0, st, (const uint16_t *)ds, 0); });
    expect_fail("ldmatrix from global memory", "not inside shared memory", st,
                [&] { SG_LAUNCH(ldmatrix_bad_kernel, 1, 32, 0, st, (const uint16_t *)ds, 1); });
    expect_fail("ldmatrix past the end of dynamic shared memory", "not inside shared memory", st,
                [&] { SG_LAUNCH(ldmatrix_bad_kernel, 1, 32, 64, st, (const uint16_t *)ds, 2); });
    cudaFree(ds);
    cudaFree(dout);
}

/* ---- cp.async ---- */

/* Each of 64 threads copies 16 bytes into shared memory, then reads another thread's chunk
 * after a barrier. forget_wait: the kernel bug of reading before cp.async.wait_group. */
__global__ void cp_basic_kernel(uint32_t *out, const uint32_t *src, int forget_wait) {
    __shared__ __align__(16) uint32_t s[64 * 4];
    const int t = threadIdx.x;
    sg_cp_async_16(&s[t * 4], &src[t * 4], 1);
    sg_cp_async_commit();
    if (!forget_wait) sg_cp_async_wait(0);
    __syncthreads();
    for (int k = 0; k < 4; k++) out[t * 4 + k] = s[(63 - t) * 4 + k];
}

/* Zero-fill: thread c performs case c into its own 16 bytes of shared memory (the rest of them
 * keeps the poison), waits (wait_all), and writes them out. */
__global__ void cp_fill_kernel(uint8_t *out, const uint8_t *src) {
    __shared__ __align__(16) uint8_t s[6][16];
    const int c = threadIdx.x;
    switch (c) {
    case 0: /* src-size 0: src is never read */
        sg_sim::cp_async(s[0], NULL, 16, 0);
        break;
    case 1:
        sg_sim::cp_async(s[1], src + 16, 16, 5);
        break;
    case 2:
        sg_sim::cp_async(s[2], src + 32, 16, 16);
        break;
    case 3:
        sg_sim::cp_async(s[3], src + 48, 8, 3);
        break;
    case 4:
        sg_sim::cp_async(s[4] + 4, src + 64, 4, 4);
        break;
    case 5: /* src-size 0 from an address in no allocation */
        sg_sim::cp_async(s[5] + 8, (const void *)16, 4, 0);
        break;
    }
    sg_sim::cp_async_wait_all();
    for (int k = 0; k < 16; k++) out[c * 16 + k] = s[c][k];
}

/* The groups: 3 stages, 2 copies in flight. Prologue: tiles 0 and 1, one group each. Step k:
 * wait_group 1 (tile k has landed, tile k + 1 may not have: its destination must still read
 * poison, counted in seen[t]), barrier, consume tile k (another thread's chunk), issue tile
 * k + 2 into the buffer consumed at step k - 1 (the barrier of step k orders that). A tile is 32
 * chunks of 4 floats. Also: a copy issued but not committed stays pending through wait_group
 * 0 and lands at wait_all. */
__global__ void cp_pipeline_kernel(float *out, int *seen, const float *src, int ntiles) {
    __shared__ __align__(16) float buf[3][128];
    __shared__ __align__(16) float extra[32 * 4];
    const int t = threadIdx.x;
    for (int s = 0; s < 2; s++) {
        if (s < ntiles) sg_cp_async_16(&buf[s][t * 4], src + s * 128 + t * 4, 1);
        sg_cp_async_commit();
    }
    float acc = 0;
    int pending = 0;
    for (int k = 0; k < ntiles; k++) {
        sg_cp_async_wait(1);
        if (k + 1 < ntiles && f32_bits(buf[(k + 1) % 3][t * 4]) == 0xffffffffu) pending++;
        __syncthreads();
        const float *b = buf[k % 3] + ((t + 5) % 32) * 4;
        acc += (b[0] + b[1] + b[2] + b[3]) * (float)(k + 1);
        if (k + 2 < ntiles)
            sg_cp_async_16(&buf[(k + 2) % 3][t * 4], src + (k + 2) * 128 + t * 4, 1);
        sg_cp_async_commit();
    }
    sg_cp_async_16(&extra[t * 4], src + t * 4, 1); /* not committed */
    sg_cp_async_wait(0);
    if (f32_bits(extra[t * 4]) == 0xffffffffu) pending += 1000;
    sg_sim::cp_async_wait_all();
    acc += extra[t * 4];
    out[t] = acc;
    seen[t] = pending;
}

/* thread 0 breaks one cp.async rule (mode), the others leave */
__global__ void cp_bad_kernel(const float *g, int mode) {
    __shared__ __align__(16) float s[16];
    __align__(16) float local[4] = {0, 0, 0, 0};
    if (threadIdx.x != 0) return;
    if (mode == 0) sg_cp_async_16(&s[1], g, 1);        /* dst misaligned */
    if (mode == 1) sg_cp_async_16(&s[0], g + 1, 1);    /* src misaligned */
    if (mode == 2) sg_cp_async_16(&s[0], local, 1);    /* src: a thread's stack */
    if (mode == 3) sg_cp_async_16(&s[0], g + 1024, 1); /* src: past the end */
    if (mode == 4) sg_cp_async_16((void *)g, g, 1);    /* dst: global memory */
    if (mode == 5) sg_sim::cp_async(&s[0], g, 12, 12); /* cp-size 12 */
    if (mode == 6) sg_sim::cp_async(&s[0], g, 16, 17); /* src-size > cp-size */
    if (mode == 7) {                                   /* two writes, no order */
        sg_cp_async_16(&s[0], g, 1);
        sg_cp_async_commit();
        sg_sim::cp_async(&s[2], g, 8, 8);
    }
    sg_cp_async_commit();
    sg_cp_async_wait(0);
}

static void test_cp_async(cudaStream_t st) {
    uint32_t hsrc[256], hout[256];
    for (int i = 0; i < 256; i++) hsrc[i] = rnd() & 0x7fffffffu; /* never the poison */
    uint32_t *dsrc, *dout;
    cudaMalloc((void **)&dsrc, 1024 * sizeof(float));
    cudaMalloc((void **)&dout, sizeof hout);
    cudaMemcpy(dsrc, hsrc, sizeof hsrc, cudaMemcpyHostToDevice);
    for (int forget = 0; forget < 2; forget++) {
        SG_LAUNCH(cp_basic_kernel, 1, 64, 0, st, dout, (const uint32_t *)dsrc, forget);
        CHECK(sync_and_error(st) == cudaSuccess, "cp.async basic (forget_wait %d) failed", forget);
        cudaMemcpy(hout, dout, sizeof hout, cudaMemcpyDeviceToHost);
        int ok = 0, poison = 0;
        for (int t = 0; t < 64; t++)
            for (int k = 0; k < 4; k++) {
                ok += hout[t * 4 + k] == hsrc[(63 - t) * 4 + k];
                poison += hout[t * 4 + k] == 0xffffffffu;
            }
        if (!forget)
            CHECK(ok == 256, "cp.async: %d of 256 words arrived after the wait", ok);
        else
            CHECK(poison == 256,
                  "a read before cp.async.wait_group read data (%d of 256 words "
                  "poisoned): the copy was performed at issue",
                  poison);
    }

    /* zero-fill */
    uint8_t hb[80], hf[6 * 16];
    for (int i = 0; i < 80; i++) hb[i] = (uint8_t)(1 + rnd() % 200);
    uint8_t *db, *df;
    cudaMalloc((void **)&db, sizeof hb);
    cudaMalloc((void **)&df, sizeof hf);
    cudaMemcpy(db, hb, sizeof hb, cudaMemcpyHostToDevice);
    SG_LAUNCH(cp_fill_kernel, 1, 6, 0, st, df, (const uint8_t *)db);
    CHECK(sync_and_error(st) == cudaSuccess, "cp.async zero-fill failed");
    cudaMemcpy(hf, df, sizeof hf, cudaMemcpyDeviceToHost);
    /* case: (first byte written, cp-size, src-size, source offset) */
    const int cases[6][4] = {{0, 16, 0, 0}, {0, 16, 5, 16}, {0, 16, 16, 32},
                             {0, 8, 3, 48}, {4, 4, 4, 64},  {8, 4, 0, 0}};
    int bad = 0;
    for (int c = 0; c < 6; c++)
        for (int k = 0; k < 16; k++) {
            const int o = k - cases[c][0];
            const int want = o < 0 || o >= cases[c][1] ? 0xFF
                             : o < cases[c][2]         ? hb[cases[c][3] + o]
                                                       : 0;
            bad += hf[c * 16 + k] != want;
        }
    CHECK(bad == 0, "cp.async zero-fill: %d bytes wrong", bad);

    /* the 3-stage pipeline */
    enum { NT = 6 };
    static float hp[NT * 128];
    for (int i = 0; i < NT * 128; i++) hp[i] = rand_f32();
    float *dp, *dacc, hacc[32];
    int *dseen, hseen[32];
    cudaMalloc((void **)&dp, sizeof hp);
    cudaMalloc((void **)&dacc, sizeof hacc);
    cudaMalloc((void **)&dseen, sizeof hseen);
    cudaMemcpy(dp, hp, sizeof hp, cudaMemcpyHostToDevice);
    SG_LAUNCH(cp_pipeline_kernel, 1, 32, 0, st, dacc, dseen, (const float *)dp, (int)NT);
    CHECK(sync_and_error(st) == cudaSuccess, "cp.async pipeline failed");
    cudaMemcpy(hacc, dacc, sizeof hacc, cudaMemcpyDeviceToHost);
    cudaMemcpy(hseen, dseen, sizeof hseen, cudaMemcpyDeviceToHost);
    int pbad = 0, sbad = 0;
    for (int t = 0; t < 32; t++) {
        float acc = 0;
        for (int k = 0; k < NT; k++) {
            const float *b = hp + k * 128 + ((t + 5) % 32) * 4;
            acc += (b[0] + b[1] + b[2] + b[3]) * (float)(k + 1);
        }
        acc += hp[t * 4];
        pbad += hacc[t] != acc;
        sbad += hseen[t] != 1000 + NT - 1;
    }
    CHECK(pbad == 0, "cp.async pipeline: %d of 32 sums wrong", pbad);
    CHECK(sbad == 0,
          "cp.async.wait_group 1 did not keep the newest group pending, or wait_group "
          "0 performed an uncommitted copy (thread 0 saw %d, want %d)",
          hseen[0], 1000 + NT - 1);

    const float *g = (const float *)dsrc;
    const struct {
        int mode;
        const char *what, *want;
    } bads[] = {{0, "cp.async to a misaligned shared address", "not aligned to cp-size 16"},
                {1, "cp.async from a misaligned global address", "global source"},
                {2, "cp.async from a thread's stack", "not inside a live allocation"},
                {3, "cp.async past the end of an allocation", "not inside a live allocation"},
                {4, "cp.async into global memory", "not inside shared memory"},
                {5, "cp.async of 12 bytes", "cp-size 12"},
                {6, "cp.async with src-size 17", "src-size 17"},
                {7, "two pending cp.async to one address", "overlaps"}};
    for (const auto &b : bads)
        expect_fail(b.what, b.want, st, [&] { SG_LAUNCH(cp_bad_kernel, 1, 32, 0, st, g, b.mode); });
    cudaFree(dsrc);
    cudaFree(dout);
    cudaFree(db);
    cudaFree(df);
    cudaFree(dp);
    cudaFree(dacc);
    cudaFree(dseen);
}

/* ---- a 64x64x64 bf16 GEMM: the pattern of the tensor-core convolutions ----
 * D (64x64 fp32) = A (64x64 bf16, row-major M x K) * B (64x64 bf16, row-major K x N) + C.
 * Grid 2x2 blocks of 32x32 outputs; 4 warps per block in 2x2, each 16x16 = two m16n8k16 tiles.
 * K in 4 tiles of 16, double-buffered with cp.async (2 stages): threads 0..63 copy the A tile
 * (32 rows x 2 chunks of 8), 64..127 the B tile (16 rows x 4 chunks). A fragments by ldmatrix
 * .x4, B fragments by ldmatrix .x4.trans from the row-major K x N tile.
 * mode 1: waits with N = 2 (reads a stage still in flight); mode 2: no barrier before a stage
 * is refilled (the next copy lands on a stage other warps still read): both must fail. */
__global__ void gemm_kernel(float *D, const uint16_t *A, const uint16_t *B, const float *C,
                            int mode) {
    __shared__ __align__(16) uint16_t As[2][32][24]; /* rows padded to 48 bytes */
    __shared__ __align__(16) uint16_t Bs[2][16][40]; /* rows padded to 80 bytes */
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int m0 = blockIdx.y * 32, n0 = blockIdx.x * 32, wm = warp / 2, wn = warp % 2;
    const int groupID = lane >> 2, tig = lane % 4;
    float acc[2][4];
    for (int j = 0; j < 2; j++)
        for (int i = 0; i < 4; i++)
            acc[j][i] = C[(m0 + wm * 16 + groupID + 8 * (i / 2)) * 64 + n0 + wn * 16 + 8 * j +
                          tig * 2 + (i & 1)];
    auto load = [&](int kt, int s) {
        if (tid < 64)
            sg_cp_async_16(&As[s][tid / 2][(tid % 2) * 8],
                           A + (m0 + tid / 2) * 64 + kt * 16 + (tid % 2) * 8, 1);
        else
            sg_cp_async_16(&Bs[s][(tid - 64) / 4][((tid - 64) % 4) * 8],
                           B + (kt * 16 + (tid - 64) / 4) * 64 + n0 + ((tid - 64) % 4) * 8, 1);
    };
    load(0, 0);
    sg_cp_async_commit();
    for (int kt = 0; kt < 4; kt++) {
        if (kt + 1 < 4) load(kt + 1, (kt + 1) & 1);
        sg_cp_async_commit();
        sg_cp_async_wait(mode == 1 ? 2 : 1);
        __syncthreads();
        const int s = kt & 1;
        uint32_t a[4], b[4];
        /* matrices: rows 0-7 / 8-15 x columns 0-7 / 8-15, in the order a0..a3 wants them */
        sg_ldmatrix_x4(a, &As[s][wm * 16 + lane % 8 + ((lane / 8) & 1) * 8][(lane / 16) * 8]);
        /* matrices: k 0-7 / 8-15 x n 0-7 / 8-15: b[0], b[1] for n-tile 0, b[2], b[3] for 1 */
        sg_ldmatrix_x4_trans(b, &Bs[s][lane % 8 + ((lane / 8) & 1) * 8][wn * 16 + (lane / 16) * 8]);
        sg_mma_bf16_16816(acc[0], a, b, acc[0]);
        sg_mma_bf16_16816(acc[1], a, b + 2, acc[1]);
        if (mode != 2) __syncthreads();
    }
    for (int j = 0; j < 2; j++)
        for (int i = 0; i < 4; i++)
            D[(m0 + wm * 16 + groupID + 8 * (i / 2)) * 64 + n0 + wn * 16 + 8 * j + tig * 2 +
              (i & 1)] = acc[j][i];
}

static void test_gemm(cudaStream_t st) {
    /* The missing barrier shows only when one warp refills a stage before another has read it:
     * the forward and reverse orders run a warp ahead to its barrier; random:SEED moves the
     * warps in step (one operation per thread per pass) and cannot show it. */
    const char *order = getenv("SG_SIM_ORDER");
    const bool warp_runs_ahead = !(order && !strncmp(order, "random:", 7));
    static uint16_t hA[64 * 64], hB[64 * 64];
    static float hC[64 * 64], hD[64 * 64];
    for (int i = 0; i < 64 * 64; i++) hA[i] = rand_bf16(), hB[i] = rand_bf16(), hC[i] = rand_f32();
    uint16_t *dA = dev_copy(hA), *dB = dev_copy(hB);
    float *dC = dev_copy(hC), *dD = dev_alloc(hD);
    /* waiting for too little: step 0 reads a stage still in flight (poison); step 1 refills
     * the stage whose copies were never waited for, which the emulator reports */
    expect_fail("gemm with wait_group 2", "overlaps", st, [&] {
        SG_LAUNCH(gemm_kernel, dim3(2, 2), 128, 0, st, dD, (const uint16_t *)dA,
                  (const uint16_t *)dB, (const float *)dC, 1);
    });
    for (int mode = 0; mode < 3; mode += 2) {
        cudaMemset(dD, 0xFF, sizeof hD);
        SG_LAUNCH(gemm_kernel, dim3(2, 2), 128, 0, st, dD, (const uint16_t *)dA,
                  (const uint16_t *)dB, (const float *)dC, mode);
        CHECK(sync_and_error(st) == cudaSuccess, "gemm (mode %d) failed", mode);
        cudaMemcpy(hD, dD, sizeof hD, cudaMemcpyDeviceToHost);
        int bad = 0, worst_i = 0;
        double worst = 0;
        for (int m = 0; m < 64; m++)
            for (int n = 0; n < 64; n++) {
                double s = hC[m * 64 + n], mag = fabs(s);
                for (int k = 0; k < 64; k++) {
                    double p = (double)bf16f(hA[m * 64 + k]) * (double)bf16f(hB[k * 64 + n]);
                    s += p;
                    mag += fabs(p);
                }
                double err = fabs((double)hD[m * 64 + n] - s) / mag;
                if (!(err <= 1e-5)) bad++; /* four fp32 roundings: ~4 * 2^-24 */
                if (!(err <= worst)) worst = err, worst_i = m * 64 + n;
            }
        if (mode == 0)
            CHECK(bad == 0, "gemm: %d of 4096 wrong, worst (%d,%d): %g vs reference", bad,
                  worst_i / 64, worst_i % 64, (double)hD[worst_i]);
        else if (warp_runs_ahead)
            CHECK(bad > 0, "gemm without the barrier before a stage is refilled went unnoticed");
    }
    cudaFree(dA), cudaFree(dB), cudaFree(dC), cudaFree(dD);
}

/* ======== the Hopper operations (kernels/cuda/hopper.cuh, sim_hopper.cpp) ========
 * The probes of tests/hopper_probes.cuh (expected values from the documents; the same kernels
 * run on a GPU as hopper_gpu), then the emulation's own rules, each broken once. */

/* ---- mbarrier ---- */

/* one rule broken per mode (the report is checked) */
__global__ void mbar_bad_kernel(int mode) {
    __shared__ uint64_t bar[2];
    const int t = threadIdx.x;
    if (t == 0) {
        if (mode == 9) sg_mbar_init((uint64_t *)((char *)bar + 4), 1);
        sg_mbar_init(&bar[0], mode == 0 ? 0u : mode == 3 || mode == 6 || mode == 8 ? 1u : 2u);
        sg_mbar_init(&bar[1], 1);
        sg_fence_mbar_init();
        if (mode == 1) sg_mbar_init(&bar[0], 1);
    }
    if (mode == 2 && t < 32) __syncwarp(); /* orders the init before lane 1's use, but ... */
    if (mode == 2 && t == 1) sg_mbar_arrive(&bar[0]); /* ... the emulation wants a __syncthreads */
    __syncthreads();
    if (t != 0 && mode != 6) return;
    if (mode == 3) {
        sg_mbar_arrive_expect_tx(&bar[0], 16); /* 0 arrivals left, 16 bytes pending */
        sg_mbar_arrive(&bar[0]);
    }
    if (mode == 4) {
        bar[0] = 0; /* an ordinary store over a live mbarrier */
        sg_mbar_arrive(&bar[0]);
    }
    if (mode == 5) {
        sg_mbar_arrive(&bar[0]);
        sg_mbar_wait(&bar[0], 0); /* the second arrival never comes */
    }
    if (mode == 6) { /* thread 1 waits for phase 0; thread 0 completes phases 0 and 1 */
        if (t == 1) {
            sg_mbar_arrive(&bar[1]);
            sg_mbar_wait(&bar[0], 0);
        } else if (t == 0) {
            sg_mbar_wait(&bar[1], 0);
            sg_mbar_arrive(&bar[0]);
            sg_mbar_arrive(&bar[0]);
        }
    }
    if (mode == 7) sg_mbar_expect_tx(&bar[0], 1u << 20);
    if (mode == 8) {
        sg_mbar_inval(&bar[0]);
        sg_mbar_arrive(&bar[0]);
    }
}

static void test_mbarrier(cudaStream_t st) {
    CHECK(probe_mbar_phases(st) == 0, "mbarrier phases and parities");
    const struct {
        int mode;
        const char *what, *want;
    } bads[] = {{0, "mbarrier.init with count 0", "outside [1, 2^20 - 1]"},
                {1, "mbarrier.init on a live mbarrier", "live mbarrier"},
                {2, "an mbarrier used before the __syncthreads after its init",
                 "before a "
                 "__syncthreads"},
                {3, "more arrivals than expected", "more arrivals"},
                {4, "an ordinary store over a live mbarrier", "overwritten by an ordinary store"},
                {5, "an mbarrier wait that never completes", "waits on the mbarrier"},
                {6, "a waiter the barrier ran two phases ahead of", "completed two phases"},
                {7, "a tx-count of 2^20", "outside +-(2^20 - 1)"},
                {8, "an arrive after mbarrier.inval", "not an initialised mbarrier"},
                {9, "mbarrier.init at a misaligned address", "8-byte aligned"}};
    for (const auto &b : bads)
        expect_fail(b.what, b.want, st, [&] { SG_LAUNCH(mbar_bad_kernel, 1, 64, 0, st, b.mode); });
}

/* ---- the copy engine ---- */

/* cuTensorMapEncodeTiled itself, for its argument rules */
static CUresult encode2d_raw(CUtensorMap *m, const void *g, uint64_t cols, uint64_t rows,
                             uint64_t row_bytes, uint32_t box_c, uint32_t box_r,
                             CUtensorMapSwizzle sw) {
    const cuuint64_t dim[2] = {cols, rows}, stride[1] = {row_bytes};
    const cuuint32_t box[2] = {box_c, box_r}, es[2] = {1, 1};
    return cuTensorMapEncodeTiled(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)g, dim, stride,
                                  box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, sw,
                                  CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

/* one copy-engine rule broken per mode; a 2D map over 64 x 64 bf16 with a 128B swizzle */
__global__ void tma_bad_kernel(const __grid_constant__ CUtensorMap map, int mode) {
    SG_DYNAMIC_SMEM(uint8_t, raw);
    uint8_t *box = sg_smem_align(raw, 1024);
    __shared__ uint64_t bar;
    __shared__ __align__(128) CUtensorMap shared_map;
    if (threadIdx.x != 0) return;
    sg_mbar_init(&bar, 1);
    if (mode != 5) sg_fence_mbar_init();
    sg_mbar_arrive_expect_tx(&bar, 4096u * (mode == 6 ? 2 : 1)); /* a box: 32 rows of 128 bytes */
    if (mode == 0) sg_tma_load_2d(box + 16, &map, &bar, 0, 0);
    if (mode == 1) sg_tma_load_2d(box + 128, &map, &bar, 0, 0);
    if (mode == 2) sg_tma_load_3d(box, &map, &bar, 0, 0, 0);
    if (mode == 3) {
        shared_map = map;
        sg_tma_load_2d(box, &shared_map, &bar, 0, 0);
    }
    if (mode == 4) {
        CUtensorMap local = map;
        local.opaque[1] ^= 1; /* the global address changed by hand */
        sg_tma_load_2d(box, &local, &bar, 0, 0);
    }
    if (mode == 5 || mode == 7 || mode == 8) sg_tma_load_2d(box, &map, &bar, 0, 0);
    if (mode == 6) {
        sg_tma_load_2d(box, &map, &bar, 0, 0);
        sg_tma_load_2d(box + 2048, &map, &bar, 0, 32);
    }
    if (mode == 10) sg_tma_load_2d(box, &map, &bar, 4, 0); /* innermost at 8 bytes */
    if (mode == 9) { /* a second mbarrier inside the destination */
        sg_mbar_init((uint64_t *)(box + 64), 1);
        sg_tma_load_2d(box, &map, &bar, 0, 0);
    }
    if (mode != 7) sg_mbar_wait(&bar, 0);
}

/* a template kernel's __shared__ variable: g++ ignores the section of template statics */
template <int N> __global__ void tma_template_kernel(int *out) {
    __shared__ uint64_t bar[N];
    if (threadIdx.x == 0) sg_mbar_init(&bar[0], 1);
    out[0] = 1;
}

/* Captures stderr around f (a host call), echoes it, and checks that it contains want. */
template <class F> static void expect_report(const char *what, const char *want, F f) {
    fflush(stderr);
    const int saved = dup(2);
    FILE *tmp = tmpfile();
    dup2(fileno(tmp), 2);
    const bool failed = f();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char buf[4096];
    rewind(tmp);
    size_t n = fread(buf, 1, sizeof buf - 1, tmp);
    buf[n] = 0;
    fclose(tmp);
    fprintf(stderr, "expected failure (%s): %s", what, buf);
    CHECK(failed, "%s was accepted", what);
    CHECK(strstr(buf, want) != NULL, "%s: the report does not say \"%s\"", what, want);
}

static void test_tma(cudaStream_t st) {
    CHECK(probe_tma_boxes(st) == 0, "TMA boxes byte for byte");
    probe_tensor g;
    g.alloc(40 * 128);
    uint8_t *dout;
    cudaMalloc((void **)&dout, 64 << 10);
    static uint8_t hout[64 << 10];
    const size_t smem = 48 << 10;
    /* read before the wait: poison */
    {
        CUtensorMap map;
        probe_encode2d(&map, g.d, 100, 40, 256, 64, 16, CU_TENSOR_MAP_SWIZZLE_128B);
        const coords5 c = {{0, 0, 0, 0, 0}};
        SG_LAUNCH(tma_box_kernel, 1, 32, smem, st, dout, map, 2, c, 2048u, 2048u, 1);
        CHECK(sync_and_error(st) == cudaSuccess, "TMA read-early kernel failed");
        cudaMemcpy(hout, dout, 2048, cudaMemcpyDeviceToHost);
        int poison = 0;
        for (int i = 0; i < 2048; i++) poison += hout[i] == 0xFF;
        CHECK(poison == 2048, "a read before the mbarrier wait saw data (%d of 2048 bytes poison)",
              poison);
        /* the transaction count: the whole box's bytes, no more, no fewer */
        expect_fail("a phase expecting 16 bytes fewer than the box", "tx-count -16", st, [&] {
            SG_LAUNCH(tma_box_kernel, 1, 32, smem, st, dout, map, 2, c, 2048u, 2032u, 0);
        });
        expect_fail("a phase expecting 16 bytes more than the box", "tx-count 16", st, [&] {
            SG_LAUNCH(tma_box_kernel, 1, 32, smem, st, dout, map, 2, c, 2048u, 2064u, 0);
        });
    }
    /* device-side misuse */
    {
        probe_tensor sq;
        sq.alloc(64 * 64);
        CUtensorMap map, im2col;
        probe_encode2d(&map, sq.d, 64, 64, 128, 64, 32, CU_TENSOR_MAP_SWIZZLE_128B);
        const cuuint64_t idim[4] = {64, 4, 4, 4}, istr[3] = {128, 512, 2048};
        const int lo[2] = {-1, -1}, up[2] = {-1, -1};
        const cuuint32_t ies[4] = {1, 1, 1, 1};
        CHECK(cuTensorMapEncodeIm2col(&im2col, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, sq.d, idim,
                                      istr, lo, up, 64, 16, ies, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS,
              "a valid cuTensorMapEncodeIm2col was refused");
        const struct {
            int mode;
            const char *what, *want;
        } bads[] = {
            {0, "a copy to a misaligned destination", "not 128-byte aligned"},
            {1, "a 128B-swizzled copy to a destination off the 1024-byte pattern",
             "pattern's "
             "repeat"},
            {2, "a 3D copy through a 2D tensor map", "has rank 2"},
            {3, "a tensor map in shared memory", "in shared memory"},
            {4, "a tensor map modified after encoding", "not a tensor map encoded"},
            {5, "a copy on an mbarrier whose init was not fenced", "fence.mbarrier_init"},
            {6, "two copies in flight to overlapping shared memory", "overlaps"},
            {7, "a copy nobody waits for", "still in flight when every thread had exited"},
            {9, "a copy over a live mbarrier", "covers the live mbarrier"},
            {10, "a box whose innermost coordinate is not at a 16-byte multiple",
             "not a multiple of 16 bytes"},
        };
        for (const auto &b : bads)
            expect_fail(b.what, b.want, st,
                        [&] { SG_LAUNCH(tma_bad_kernel, 1, 32, smem, st, map, b.mode); });
        expect_fail("a .tile copy through an im2col tensor map", "cuTensorMapEncodeIm2col", st,
                    [&] { SG_LAUNCH(tma_bad_kernel, 1, 32, smem, st, im2col, 8); });
        int *dflag;
        cudaMalloc((void **)&dflag, sizeof(int));
        expect_fail("an mbarrier declared __shared__ in a template kernel", "template kernel", st,
                    [&] { SG_LAUNCH(tma_template_kernel<2>, 1, 32, 0, st, dflag); });
        cudaFree(dflag);
        sq.release();
    }
    /* the encoders' documented argument rules (and the emulation's own limits) */
    {
        probe_tensor t;
        t.alloc(64 * 64);
        CUtensorMap map;
        const CUtensorMapSwizzle N0 = CU_TENSOR_MAP_SWIZZLE_NONE, S128 = CU_TENSOR_MAP_SWIZZLE_128B;
        auto enc = [&](void *addr, uint64_t cols, uint64_t rows, uint64_t pitch, uint32_t bc,
                       uint32_t br, CUtensorMapSwizzle sw) {
            return encode2d_raw(&map, addr, cols, rows, pitch, bc, br, sw) != CUDA_SUCCESS;
        };
        uint8_t *base = (uint8_t *)t.d;
        expect_report("a global address 8 bytes off", "16-byte aligned",
                      [&] { return enc(base + 8, 32, 32, 128, 32, 8, N0); });
        expect_report("a row pitch of 120 bytes", "not a multiple of 16",
                      [&] { return enc(base, 32, 32, 120, 32, 8, N0); });
        expect_report("a row pitch smaller than the row", "overlapping strides",
                      [&] { return enc(base, 64, 32, 96, 32, 8, N0); });
        expect_report("a box of 257 rows", "outside [1, 256]",
                      [&] { return enc(base, 64, 32, 128, 64, 257, N0); });
        expect_report("a box row of 20 bytes", "not a multiple of 16",
                      [&] { return enc(base, 64, 32, 128, 10, 8, N0); });
        expect_report("a box row of 256 bytes under a 128B swizzle", "exceeds the 128B swizzle",
                      [&] { return enc(base, 256, 8, 512, 128, 8, S128); });
        expect_report("a box row of 64 bytes under a 128B swizzle", "not emulated",
                      [&] { return enc(base, 64, 32, 128, 32, 8, S128); });
        expect_report("a swizzled map 16 bytes off 128", "128-byte aligned",
                      [&] { return enc(base + 16, 56, 32, 128, 64, 8, S128); });
        expect_report("a tensor larger than its allocation", "not inside one live allocation",
                      [&] { return enc(base, 64, 65, 128, 64, 8, N0); });
        expect_report("globalDim 0", "outside [1, 2^32]",
                      [&] { return enc(base, 0, 32, 128, 64, 8, N0); });
        const cuuint64_t dim[2] = {64, 64}, stride[1] = {128};
        const cuuint32_t box[2] = {64, 8}, es1[2] = {1, 1}, es9[2] = {1, 9};
        expect_report("an element stride of 9", "outside [1, 8]", [&] {
            return cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, t.d, dim,
                                          stride, box, es9, CU_TENSOR_MAP_INTERLEAVE_NONE, N0,
                                          CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                          CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS;
        });
        expect_report("rank 6", "outside [1, 5]", [&] {
            return cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 6, t.d, dim,
                                          stride, box, es1, CU_TENSOR_MAP_INTERLEAVE_NONE, N0,
                                          CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                          CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS;
        });
        expect_report("an interleaved 2D map", "rank >= 3", [&] {
            return cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, t.d, dim,
                                          stride, box, es1, CU_TENSOR_MAP_INTERLEAVE_16B, N0,
                                          CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                          CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS;
        });
        expect_report("a NaN fill of an integer tensor", "floating-point", [&] {
            return cuTensorMapEncodeTiled(
                       &map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, t.d, dim, stride, box, es1,
                       CU_TENSOR_MAP_INTERLEAVE_NONE, N0, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                       CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA) != CUDA_SUCCESS;
        });
        const cuuint64_t idim[4] = {64, 4, 4, 4}, istr[3] = {128, 512, 2048};
        const int lo[2] = {-1, -1}, up[2] = {-1, -1}, far[2] = {-200, -1};
        const cuuint32_t ies[4] = {1, 1, 1, 1};
        expect_report("an im2col map of rank 2", "not 3, 4 or 5", [&] {
            return cuTensorMapEncodeIm2col(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, t.d, idim,
                                           istr, lo, up, 64, 16, ies, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                           N0, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                           CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS;
        });
        expect_report("an im2col corner of -200 at rank 4", "outside [-128, 127]", [&] {
            return cuTensorMapEncodeIm2col(
                       &map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, t.d, idim, istr, far, up, 64, 16,
                       ies, CU_TENSOR_MAP_INTERLEAVE_NONE, N0, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                       CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS;
        });
        expect_report("1025 pixels per column", "outside [1, 1024]", [&] {
            return cuTensorMapEncodeIm2col(
                       &map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, t.d, idim, istr, lo, up, 64, 1025,
                       ies, CU_TENSOR_MAP_INTERLEAVE_NONE, N0, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                       CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS;
        });
        t.release();
    }
    g.release();
    cudaFree(dout);
}

/* ---- wgmma ---- */

/* Two groups in flight: group 0 on d0, group 1 on d1. After wait_group 1 only group 0 has
 * retired: d0 holds results, d1 still the poison; after wait_group 0 both hold results.
 * early: the kernel bug of reading d0 before any wait (it reads the poison). */
__global__ void wg_groups_kernel(float *out, int early) {
    SG_DYNAMIC_SMEM(uint8_t, raw);
    uint8_t *s = sg_smem_align(raw, 1024);
    const int t = threadIdx.x;
    for (int e = t; e < 4096 / 2; e += 128) ((uint16_t *)s)[e] = 0x3f80; /* 1.0 */
    sg_fence_proxy_async();
    __syncthreads();
    const uint64_t da = sg_wgmma_desc(s, 128, 256, SG_SWIZZLE_NONE);
    const uint64_t db = sg_wgmma_desc(s + 2048, 128, 256, SG_SWIZZLE_NONE);
    float d0[32], d1[32];
    for (int i = 0; i < 32; i++) d0[i] = d1[i] = 1.0f;
    sg_wgmma_fence();
    sg_wgmma_ss<64, 0, 0>(d0, da, db, 1);
    sg_wgmma_commit();
    sg_wgmma_ss<64, 0, 0>(d1, da, db, 0);
    sg_wgmma_commit();
    if (early) out[t] = d0[0];
    sg_wgmma_wait(1);
    if (!early) {
        out[t * 4 + 0] = d0[0];
        out[t * 4 + 1] = d1[0];
    }
    sg_wgmma_wait(0);
    if (!early) {
        out[t * 4 + 2] = d0[1];
        out[t * 4 + 3] = d1[1];
    }
}

/* one wgmma rule broken per mode (K-major operands without swizzle, placed by the threads) */
__global__ void wg_bad_kernel(const __grid_constant__ CUtensorMap map, int mode) {
    SG_DYNAMIC_SMEM(uint8_t, raw);
    uint8_t *s = sg_smem_align(raw, 1024);
    __shared__ uint64_t bar;
    const int t = threadIdx.x, warp = t / 32;
    for (int e = t % 128; e < 4096 / 2; e += 128) ((uint16_t *)s)[e] = 0x3f80;
    if (mode != 4) sg_fence_proxy_async();
    if (t == 0) {
        sg_mbar_init(&bar, 1);
        sg_fence_mbar_init();
    }
    __syncthreads();
    uint64_t da = sg_wgmma_desc(s, 128, 256, SG_SWIZZLE_NONE);
    uint64_t db = sg_wgmma_desc(s + 2048, 128, 256, SG_SWIZZLE_NONE);
    if (mode == 8 && warp == 3) db += 2; /* another start address in one warp */
    if (mode == 9) da |= 1ull << 49;     /* base offset 1 */
    if (mode == 10) da = sg_wgmma_desc(s + 16, 0, 1024, SG_SWIZZLE_128B);
    if (mode == 12 && t == 0) {
        sg_mbar_arrive_expect_tx(&bar, 1024);
        sg_tma_load_2d(s + 2048, &map, &bar, 0, 0); /* into B, not waited for */
    }
    float d[32], e[32];
    uint32_t a[4] = {0x3f803f80u, 0x3f803f80u, 0x3f803f80u, 0x3f803f80u};
    for (int i = 0; i < 32; i++) d[i] = e[i] = 0.0f;
    if (mode != 0) sg_wgmma_fence();
    if (mode == 7 && warp == 1)
        sg_wgmma_commit(); /* one warp elsewhere */
    else if (mode == 13)
        sg_wgmma_rs<64, 0>(d, a, db, 1);
    else if (mode == 14) {
        sg_wgmma_ss<32, 0, 0>(*reinterpret_cast<float(*)[16]>(d), da, db, 1);
        sg_wgmma_ss<32, 0, 0>(*reinterpret_cast<float(*)[16]>(d + 8), da, db, 1);
    } else
        sg_wgmma_ss<64, 0, 0>(d, da, db, 1);
    sg_wgmma_commit();
    if (mode == 2) d[3] = 1.0f;           /* a write to an accumulator in flight */
    if (mode == 3 && t == 0) s[2048] = 0; /* a write to operand B in flight */
    if (mode == 13) a[2] = 0;             /* a write to the A fragment in flight */
    if (mode == 11 && t == 5) return;     /* leaves with its registers in flight */
    if (mode == 5) return;                /* nobody waits */
    sg_wgmma_wait(0);
    if (mode == 12 && t == 0) sg_mbar_wait(&bar, 0);
    (void)e;
}

/* ---- the pipeline GEMM (tests/hopper_probes.cuh): correct, then broken three ways ---- */

static void test_tma_wgmma_gemm(cudaStream_t st) {
    CHECK(probe_tma_wgmma_gemm(st) == 0, "the TMA + wgmma GEMM");
    probe_gemm g;
    CHECK(g.init(), "the GEMM's tensor maps were refused");
    expect_fail("the GEMM releasing a stage under its wgmma", "written while it was in flight", st,
                [&] { g.run(st, 1); });
    /* the producer re-arms full[0] for k-tile 3 while its phase for k-tile 0 is still open */
    expect_fail("the GEMM refilling a stage that is not empty", "more arrivals", st,
                [&] { g.run(st, 2); });
    /* not waiting for a full stage: reported (a wgmma under a copy in flight) where the
     * producer ran first, else the consumers read the poison of the empty ring */
    g.run(st, 3);
    const cudaError_t e = sync_and_error(st);
    sg_sim_reset_errors();
    double worst;
    CHECK(e != cudaSuccess || g.check(&worst) > 0,
          "the GEMM reading stages before they are full went unnoticed");
    g.release();
}

/* ---- elect.sync, stmatrix, named barriers, setmaxnreg ---- */

__global__ void hopper_misc_bad_kernel(int mode) {
    if (mode == 0) sg_named_barrier_sync(1, 33);
    if (mode == 1) sg_setmaxnreg_inc(100);
    if (mode == 2) {
        sg_setmaxnreg_dec(40);
        sg_setmaxnreg_inc(32);
    }
    if (mode == 3) sg_setmaxnreg_inc(232); /* three warpgroups: 3 x 232 x 128 > 65536 */
    if (mode == 4) {                       /* one warpgroup asks for another count */
        if (threadIdx.x < 64)
            sg_setmaxnreg_inc(232);
        else
            sg_setmaxnreg_inc(240);
    }
    if (mode == 5 && threadIdx.x < 64) sg_named_barrier_sync(2, 96); /* only 64 come */
}

static void test_hopper_misc(cudaStream_t st) {
    CHECK(probe_misc(st) == 0, "elect.sync, stmatrix, bar.sync");
    const struct {
        int mode, threads;
        const char *what, *want;
    } bads[] = {{0, 64, "bar.sync with 33 threads", "multiple of 32"},
                {1, 128, "setmaxnreg 100", "multiple of 8 in [24, 256]"},
                {2, 128, "setmaxnreg.inc below the current count", "must not lower"},
                {3, 384, "setmaxnreg beyond the register file", "more than the 65536"},
                {4, 128, "setmaxnreg counts differing in a warpgroup", "different operations"},
                {5, 96, "bar.sync waiting for threads that never come", "bar.sync 2"}};
    for (const auto &b : bads)
        expect_fail(b.what, b.want, st,
                    [&] { SG_LAUNCH(hopper_misc_bad_kernel, 1, b.threads, 0, st, b.mode); });
}

static void test_wgmma(cudaStream_t st) {
    float *dout;
    cudaMalloc((void **)&dout, 64 * 256 * 4);
    CHECK(probe_wgmma_tma<32>(st) == 0, "wgmma m64n32k16 via TMA");
    CHECK(probe_wgmma_tma<64>(st) == 0, "wgmma m64n64k16 via TMA");
    CHECK(probe_wgmma_tma<96>(st) == 0, "wgmma m64n96k16 via TMA");
    CHECK(probe_wgmma_tma<128>(st) == 0, "wgmma m64n128k16 via TMA");
    CHECK(probe_wgmma_tma<192>(st) == 0, "wgmma m64n192k16 via TMA");
    CHECK(probe_wgmma_tma<256>(st) == 0, "wgmma m64n256k16 via TMA");
    CHECK(probe_wgmma_layouts(st) == 0, "wgmma canonical layouts");

    /* the groups: wait_group 1 retires the older group only; a read before the wait */
    float h[128 * 4];
    SG_LAUNCH(wg_groups_kernel, 1, 128, 8192, st, dout, 0);
    CHECK(sync_and_error(st) == cudaSuccess, "wgmma groups kernel failed");
    cudaMemcpy(h, dout, sizeof h, cudaMemcpyDeviceToHost);
    int gbad = 0;
    for (int t = 0; t < 128; t++) {
        gbad += h[t * 4 + 0] != 17.0f; /* 16 products of 1 + C = 1 */
        gbad += f32_bits(h[t * 4 + 1]) != 0x7fc0deadu;
        gbad += h[t * 4 + 2] != 17.0f || h[t * 4 + 3] != 16.0f; /* overwrite: no C */
    }
    CHECK(gbad == 0,
          "wgmma.wait_group 1 retired the wrong groups (thread 0 saw %g, 0x%08x after wait 1; %g, "
          "%g after wait 0)",
          (double)h[0], f32_bits(h[1]), (double)h[2], (double)h[3]);
    SG_LAUNCH(wg_groups_kernel, 1, 128, 8192, st, dout, 1);
    CHECK(sync_and_error(st) == cudaSuccess, "wgmma early-read kernel failed");
    cudaMemcpy(h, dout, 128 * 4, cudaMemcpyDeviceToHost);
    int poison = 0;
    for (int t = 0; t < 128; t++) poison += f32_bits(h[t]) == 0x7fc0deadu;
    CHECK(poison == 128,
          "a read of the accumulators before wgmma.wait_group saw values (%d of "
          "128 poisoned)",
          poison);

    probe_tensor g;
    g.alloc(64 * 64);
    CUtensorMap map;
    probe_encode2d(&map, g.d, 64, 64, 128, 8, 64, CU_TENSOR_MAP_SWIZZLE_NONE);
    const struct {
        int mode, threads;
        const char *what, *want;
    } bads[] = {
        {0, 128, "wgmma without wgmma.fence", "no wgmma.fence"},
        {2, 128, "a write to an accumulator in flight", "wrote accumulator register"},
        {3, 128, "a write to a shared-memory operand in flight", "written while it was in flight"},
        {4, 128, "ordinary stores read by wgmma without fence.proxy.async",
         "no "
         "fence.proxy.async"},
        {6, 160, "a warpgroup of one warp", "incomplete"},
        {7, 128, "one warp at another wgmma operation", "different operations"},
        {8, 128, "descriptors that differ across the warpgroup", "descriptors differ"},
        {9, 128, "a descriptor with a base offset", "base offset 1"},
        {10, 128, "a 128B-swizzled operand 16 bytes into its line", "start address"},
        {11, 128, "a thread leaving with its accumulators in flight",
         "exits while a "
         "wgmma.mma_async"},
        {12, 128, "wgmma on shared memory a copy still writes", "still writes"},
        {13, 128, "a write to the A fragment in flight", "A-fragment registers"},
        {14, 128, "accumulators overlapping an in-flight wgmma's", "overlap"},
    };
    for (const auto &b : bads)
        expect_fail(b.what, b.want, st,
                    [&] { SG_LAUNCH(wg_bad_kernel, 1, b.threads, 8192, st, map, b.mode); });
    g.release();
    cudaFree(dout);
}

/* A last-block reduction (cuda_common.cuh's dev_last_block, written out): block b of group
 * blockIdx.y leaves part[y][b] = b + 1, and the block that its ticket elects sums the group's
 * parts in order into out[y]. arrivals: what the election waits for (gridDim.x when right). */
static __device__ unsigned sim_tickets[4];
__global__ void last_block_kernel(float *out, float *part, unsigned arrivals) {
    __shared__ unsigned last;
    const unsigned y = blockIdx.y;
    if (threadIdx.x == 0) part[y * gridDim.x + blockIdx.x] = (float)(blockIdx.x + 1);
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicInc(&sim_tickets[y], arrivals - 1) == arrivals - 1;
    __syncthreads();
    if (!last || threadIdx.x) return;
    __threadfence();
    float s = 0.0f;
    for (unsigned b = 0; b < gridDim.x; b++) s += __ldcg(part + y * gridDim.x + b);
    out[y] = s;
}

static void test_last_block(cudaStream_t st, float *a, float *b) {
    /* right: twice in a row (the tickets are back at 0 after each launch), every order */
    for (int rep = 0; rep < 2; rep++) {
        cudaMemset(a, 0, 3 * sizeof(float)); /* each launch's sums are its own */
        SG_LAUNCH(last_block_kernel, dim3(5, 3), 32, 0, st, a, b, 5u);
        CHECK(sync_and_error(st) == cudaSuccess, "a last-block reduction failed");
        float h[3];
        cudaMemcpy(h, a, sizeof h, cudaMemcpyDeviceToHost);
        CHECK(h[0] == 15.0f && h[1] == 15.0f && h[2] == 15.0f, "last-block sums %g %g %g",
              (double)h[0], (double)h[1], (double)h[2]);
    }
    /* one arrival short: the fourth block is elected, and its sum is even right (the fifth
     * part is the last launch's); the ticket is left at 1: only the audit sees it */
    expect_fail("a last-block election one arrival short", "wrap it exactly once", st,
                [&] { SG_LAUNCH(last_block_kernel, dim3(5, 1), 32, 0, st, a, b, 4u); });
    sim_tickets[0] = 0; /* the planted launch left it at 1 */
    /* one arrival too many: nobody finishes, the ticket stays at 5 */
    expect_fail("a last-block election one arrival too many", "0 wraps", st,
                [&] { SG_LAUNCH(last_block_kernel, dim3(5, 1), 32, 0, st, a, b, 6u); });
    sim_tickets[0] = 0; /* and this one at 5 */
}

/* ---- the blocks' order ---- */

/* block b's thread 0 writes seq[b] = how many blocks ran before it (the emulation runs blocks
 * one after another; on a GPU this kernel would race, which is the point of the next test) */
__global__ void block_seq_kernel(unsigned *seq, unsigned *count) {
    if (threadIdx.x) return;
    const unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    seq[b] = (*count)++;
}
/* mode 0: y[b] = b + 1, order-free; 1: y[b] = b + 1, then y[b] += y[b - 1] (a neighbour's
 * result: what it holds depends on which block ran first); 2: every block writes y[0] = b;
 * 3: every thread of every block writes y[0] = its thread index */
__global__ void block_dep_kernel(float *y, int mode) {
    if (mode == 3) {
        y[0] = (float)threadIdx.x;
        return;
    }
    if (threadIdx.x) return;
    const int b = blockIdx.x;
    if (mode == 2) {
        y[0] = (float)b;
        return;
    }
    y[b + 1] = (float)(b + 1);
    if (mode == 1 && b > 0) y[b + 1] += y[b];
}
extern "C" int sg_sim_set_block_check(int on); /* sim_exec.cpp */

/* The blocks run forward (x fastest, then y, z), the last first in the reverse order, and under
 * SG_SIM_BLOCK_CHECK each launch twice, blocks and threads forward then both in reverse, from
 * the same memory: a result that depends on either order is refused, an order-free one (a
 * last-block election among them) is not. */
static void test_block_order(cudaStream_t st, float *a, float *b) {
    const char *o = getenv("SG_SIM_ORDER");
    const bool rev = o && !strcmp(o, "reverse"), fwd = !o || !*o || !strcmp(o, "forward");
    const int was = sg_sim_set_block_check(0);
    unsigned *seq = (unsigned *)a, *count = (unsigned *)b, h[24];
    cudaMemset(count, 0, sizeof(unsigned));
    SG_LAUNCH(block_seq_kernel, dim3(2, 3, 4), 32, 0, st, seq, count);
    CHECK(sync_and_error(st) == cudaSuccess, "block_seq failed");
    cudaMemcpy(h, seq, sizeof h, cudaMemcpyDeviceToHost);
    bool in_order = true;
    for (unsigned i = 0; i < 24; i++) in_order &= h[i] == (rev ? 23 - i : i);
    if (fwd || rev)
        CHECK(in_order, "the blocks did not run %s: block 0 ran %u-th, block 23 %u-th",
              rev ? "last block first" : "x fastest, then y, then z", h[0], h[23]);
    sg_sim_set_block_check(1);
    for (int mode = 0; mode < 4; mode++) {
        cudaMemset(a, 0, 64 * sizeof(float));
        if (mode == 0) {
            SG_LAUNCH(block_dep_kernel, 16, 32, 0, st, a, 0);
            CHECK(sync_and_error(st) == cudaSuccess, "an order-free kernel refused");
            float y[17];
            cudaMemcpy(y, a, sizeof y, cudaMemcpyDeviceToHost);
            CHECK(y[0] == 0.0f && y[1] == 1.0f && y[16] == 16.0f, "order-free: %g %g %g",
                  (double)y[0], (double)y[1], (double)y[16]);
            SG_LAUNCH(last_block_kernel, dim3(5, 3), 32, 0, st, a, b, 5u);
            CHECK(sync_and_error(st) == cudaSuccess,
                  "a last-block election refused by the block check");
        } else {
            static const char *what[4] = {"", "a block reading its neighbour's result",
                                          "every block writing the same word",
                                          "every thread of one block writing the same word"};
            expect_fail(what[mode], "depends on the order of its blocks or threads", st, [&] {
                SG_LAUNCH(block_dep_kernel, mode == 3 ? 1 : 16, 32, 0, st, a, mode);
            });
        }
    }
    sg_sim_set_block_check(was);
}

int main(void) {
    cudaStream_t st;
    cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
    float *a = NULL, *b = NULL;
    CHECK(cudaMalloc((void **)&a, 1024 * sizeof(float)) == cudaSuccess, "cudaMalloc");
    CHECK(cudaMalloc((void **)&b, 1024 * sizeof(float)) == cudaSuccess, "cudaMalloc");

    /* a valid launch runs */
    SG_LAUNCH(fill_kernel, 4, 256, 0, st, a, 1024, 2.0f);
    CHECK(sync_and_error(st) == cudaSuccess, "a valid launch failed");
    float h[1024];
    cudaMemcpy(h, a, sizeof h, cudaMemcpyDeviceToHost);
    CHECK(h[0] == 2.0f && h[1023] == 2.0f, "fill: %g %g", (double)h[0], (double)h[1023]);

    /* too many threads per block */
    SG_LAUNCH(fill_kernel, 1, 2048, 0, st, a, 1024, 1.0f);
    CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration,
          "a 2048-thread block was not refused");
    cudaStreamSynchronize(st);
    cudaGetLastError();

    /* a pointer into no allocation */
    float stack_buf[4];
    SG_LAUNCH(fill_kernel, 1, 4, 0, st, stack_buf, 4, 1.0f);
    CHECK(cudaGetLastError() == cudaErrorInvalidDevicePointer,
          "a host stack pointer was accepted as a kernel argument");
    cudaStreamSynchronize(st);
    cudaGetLastError();

    /* __syncthreads is a barrier: exact with it; without it a thread reads a slot its partner
     * has not written yet (poisoned shared memory, NaN) in the forward order */
    float x[256], want[256];
    for (int i = 0; i < 256; i++) x[i] = (float)i, want[i] = (float)(255 - i);
    cudaMemcpy(b, x, sizeof x, cudaMemcpyHostToDevice);
    SG_LAUNCH(reverse_kernel, 1, 256, 0, st, a, (const float *)b, 256, 1);
    CHECK(sync_and_error(st) == cudaSuccess, "reverse with barrier failed");
    cudaMemcpy(h, a, 256 * sizeof(float), cudaMemcpyDeviceToHost);
    CHECK(memcmp(h, want, sizeof want) == 0, "reverse with a barrier is wrong");
    SG_LAUNCH(reverse_kernel, 1, 256, 0, st, a, (const float *)b, 256, 0);
    sync_and_error(st);
    cudaMemcpy(h, a, 256 * sizeof(float), cudaMemcpyDeviceToHost);
    CHECK(memcmp(h, want, sizeof want) != 0, "a missing __syncthreads went unnoticed");

    test_last_block(st, a, b);
    test_block_order(st, a, b);

    /* warp shuffles */
    float wx[32], ws = 0;
    for (int i = 0; i < 32; i++) wx[i] = (float)(i * i % 7), ws += wx[i];
    cudaMemcpy(b, wx, sizeof wx, cudaMemcpyHostToDevice);
    SG_LAUNCH(warp_sum_kernel, 1, 32, 0, st, a, (const float *)b);
    CHECK(sync_and_error(st) == cudaSuccess, "warp sum failed");
    cudaMemcpy(h, a, 32 * sizeof(float), cudaMemcpyDeviceToHost);
    int lanes_ok = 1;
    for (int i = 0; i < 32; i++) lanes_ok &= h[i] == ws;
    CHECK(lanes_ok, "shfl_xor butterfly: lane 0 has %g, want %g", (double)h[0], (double)ws);

    /* a synchronisation inside capture invalidates it */
    cudaGraph_t graph = NULL;
    CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal) == cudaSuccess,
          "BeginCapture");
    SG_LAUNCH(fill_kernel, 4, 256, 0, st, a, 1024, 3.0f);
    cudaStreamSynchronize(st);
    cudaError_t e = cudaStreamEndCapture(st, &graph);
    CHECK(e != cudaSuccess, "a sync inside capture was not reported");
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();

    /* the captured sequence must replay the eager one issued since the last synchronisation */
    SG_LAUNCH(fill_kernel, 4, 256, 0, st, a, 1024, 4.0f);
    cudaStreamSynchronize(st);
    graph = NULL;
    cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal);
    SG_LAUNCH(fill_kernel, 2, 256, 0, st, a, 512, 4.0f); /* another grid than the eager step */
    e = cudaStreamEndCapture(st, &graph);
    CHECK(e != cudaSuccess, "a capture that differs from the eager step was accepted");
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();

    /* the tensor-core fragment operations and asynchronous copies */
    test_mma(st);
    test_mma_tf32(st);
    test_ldmatrix(st);
    test_cp_async(st);
    test_gemm(st);

    /* the Hopper operations */
    test_mbarrier(st);
    test_tma(st);
    test_wgmma(st);
    test_tma_wgmma_gemm(st);
    test_hopper_misc(st);

    /* barrier divergence is an error (last: a failed kernel leaves the context unusable, as a
     * sticky error does on a GPU) */
    SG_LAUNCH(divergent_kernel, 1, 64, 0, st, a);
    CHECK(sync_and_error(st) != cudaSuccess, "barrier divergence was not reported");

    cudaFree(a);
    cudaFree(b);
    cudaStreamDestroy(st);
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
