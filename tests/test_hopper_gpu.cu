/* test_hopper_gpu.cu — the Hopper probes of tests/hopper_probes.cuh on a Hopper GPU (ctest
 * hopper_gpu, label gpu; exits 77 where there is no sm_90 device). The same kernels pass on the
 * host emulation in every CI run (cuda_sim_selftest); each probe here names the reading of the
 * documents it confirms, so a failure says which one the emulation and hopper.cuh got wrong.
 * Also printed, not checked (the ISA leaves it open): the lane elect.sync elects.
 * Each probe runs in a process of its own (this program again, with --probe I): a fault is a
 * sticky error that ends every later CUDA call of its process, and on the first GPU run one
 * probe's "illegal instruction" took the eight after it down with it. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define SG_LAUNCH(kernel, grid, block, smem, stream, ...)                                          \
    kernel<<<grid, block, smem, stream>>>(__VA_ARGS__)
#include "tests/hopper_probes.cuh"

__global__ void elected_lane_kernel(int *lane) {
    if (sg_elect_one()) *lane = (int)(threadIdx.x % 32);
}

/* probe i in a child process (this program, exec'd afresh: no CUDA state crosses a fork);
 * its exit status: 0 pass, anything else (a crash included) fail */
static int run_child(const char *self, int i) {
    fflush(stdout);
    fflush(stderr);
    const pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
        char idx[16];
        snprintf(idx, sizeof idx, "%d", i);
        execl("/proc/self/exe", self, "--probe", idx, (char *)NULL);
        _exit(126);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) < 0) return 1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int main(int argc, char **argv) {
    const int child = argc == 3 && !strcmp(argv[1], "--probe");
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("hopper_gpu: no GPU, skipped\n");
        return 77;
    }
    cudaDeviceProp p;
    cudaGetDeviceProperties(&p, 0);
    if (p.major != 9) {
        printf("hopper_gpu: %s is sm_%d%d, not Hopper: skipped\n", p.name, p.major, p.minor);
        return 77;
    }
    cudaStream_t st;
    cudaStreamCreate(&st);
    const struct {
        const char *probe, *confirms;
        int (*run)(cudaStream_t);
    } probes[] = {
        {"mbarrier phases", "test_wait/try_wait parity: the current phase or the one before",
         probe_mbar_phases},
        {"TMA boxes",
         "the box's dense placement, element strides, zero fill outside the tensor, "
         "the 32/64/128B swizzle as a ^ (((a >> 7) & M) << 4)",
         probe_tma_boxes},
        {"wgmma N=64 via TMA",
         "the 128B-swizzled K-/MN-major descriptors (LBO/SBO roles), the "
         "accumulator layout, scale-d",
         probe_wgmma_tma<64>},
        {"wgmma N=128 via TMA", "the same at N=128 (MN-major B: two 64-wide lines at LBO)",
         probe_wgmma_tma<128>},
        {"wgmma N=256 via TMA", "the same at N=256", probe_wgmma_tma<256>},
        {"wgmma N=96 via TMA", "K-major B at an N that is no multiple of 64", probe_wgmma_tma<96>},
        {"wgmma layouts",
         "the canonical layouts without swizzle and with 32/64B, K-major starts "
         "inside a swizzled line, A from registers",
         probe_wgmma_layouts},
        {"elect/stmatrix/bar.sync",
         "stmatrix's fragment layout (ldmatrix's mirror), .trans, "
         "named barriers, elect.sync's determinism",
         probe_misc},
        {"TMA + wgmma GEMM",
         "the warp-specialised pipeline: full/empty mbarriers, expect-tx of "
         "whole boxes, wait_group 1",
         probe_tma_wgmma_gemm},
    };
    const int np = (int)(sizeof probes / sizeof probes[0]);
    if (child) {
        const int i = atoi(argv[2]);
        if (i < 0 || i >= np) return 2;
        const int f = probes[i].run(st);
        printf("%s %s (confirms: %s)\n", f ? "FAIL" : "PASS", probes[i].probe, probes[i].confirms);
        return f ? 1 : 0;
    }
    int failed = 0;
    for (int i = 0; i < np; i++) {
        const int rc = run_child(argv[0], i);
        if (rc > 1) printf("FAIL %s: its process ended with status %d\n", probes[i].probe, rc);
        failed += rc != 0;
    }
    int *dl, lane = -1;
    cudaMalloc((void **)&dl, sizeof(int));
    elected_lane_kernel<<<1, 32, 0, st>>>(dl);
    cudaMemcpy(&lane, dl, sizeof lane, cudaMemcpyDeviceToHost);
    printf("elect.sync over a full warp elected lane %d (the emulation elects 31)\n", lane);
    cudaFree(dl);
    printf("hopper_gpu: %d of %d probes failed\n", failed, np);
    return failed ? 1 : 0;
}
