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
 * - threads that exit while others wait at a barrier ("barrier divergence") are reported.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

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
